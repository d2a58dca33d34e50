//! One decision per input record, their counts, and the digests of a
//! decision list (full, or its exceptions alone).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    DECIDED_RECORDS_DOMAIN, DropReason, SELECTION_DECISIONS_DOMAIN, SELECTION_EXCEPTIONS_DOMAIN,
};
use crate::canonical::{CanonicalError, domain_digest, domain_digest_seq};
use crate::record::MemoryKind;

/// The outcome for one input record.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum DecisionOutcome {
    /// Selected at this zero-based position.
    Selected {
        /// Position in the ordered selection.
        rank: u32,
    },
    /// Not selected, and why.
    Dropped {
        /// The first failing check.
        reason: DropReason,
    },
}

/// One decision per input record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryDecision {
    /// The record decided on.
    pub record_id: String,
    /// Its kind (for per-kind metrics without the record at hand).
    pub kind: MemoryKind,
    /// Selected or dropped.
    pub outcome: DecisionOutcome,
}

/// How eligible records were ordered.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SelectionOrdering {
    /// Kind priority, then newest first, then record id.
    KindRecency,
    /// The order of a bound relevance receipt.
    Relevance,
}

/// How many input records a selection decided on, per outcome.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct DecisionCounts {
    /// Input records (one decision each).
    pub decided: u64,
    /// Records selected.
    pub selected: u64,
    /// Records dropped, by reason (snake_case names; reasons with no drop
    /// are absent).
    pub dropped: BTreeMap<String, u64>,
}

impl DecisionCounts {
    /// Counts `decisions`.
    pub fn of(decisions: &[MemoryDecision]) -> Self {
        let mut counts = DecisionCounts {
            decided: decisions.len() as u64,
            ..DecisionCounts::default()
        };
        for decision in decisions {
            match decision.outcome {
                DecisionOutcome::Selected { .. } => counts.selected += 1,
                DecisionOutcome::Dropped { reason } => {
                    *counts
                        .dropped
                        .entry(reason.as_str().to_owned())
                        .or_insert(0) += 1;
                }
            }
        }
        counts
    }
}

/// The `mosaic.memory.selection_decisions.v2` digest of a decision list
/// sorted by record id.
///
/// A list is hashed in a canonical compressed form that names each
/// decision exactly once: `decided_sha256`, the
/// `mosaic.memory.decided_records.v1` digest of the `{record_id, kind}`
/// of every decision in order; `usual`, the outcome most decisions have
/// when that is a drop (the drop reason with the most decisions, the
/// smallest reason name among equals; `null` when nothing was dropped);
/// and `exceptions`, every decision whose outcome is not `usual`, in
/// order. Which records were decided on does not depend on the query, so
/// a reader that keeps it hashes only the exceptions (about the selected
/// records) per read, whatever the number of records decided on.
pub fn decisions_digest(decisions: &[MemoryDecision]) -> Result<String, CanonicalError> {
    let decided = decided_digest(decisions.iter().map(|d| (d.record_id.as_str(), d.kind)))?;
    decisions_digest_with(Some(&decided), decisions)
}

/// The `mosaic.memory.selection_exceptions.v1` digest of a decision list
/// sorted by record id: `{usual, exceptions}` as in [`decisions_digest`],
/// without `decided_sha256`. A v5 receipt commits to its decisions by this
/// (`exceptions_sha256`): which records were decided on is bound by the
/// read scopes' commitments and the read context, and how many by
/// `decision_counts`, so a reader hashes only the exceptions, and never a
/// digest of every record decided on.
pub fn exceptions_digest(decisions: &[MemoryDecision]) -> Result<String, CanonicalError> {
    decisions_digest_with(None, decisions)
}

#[derive(Serialize)]
struct DecidedRecord<'a> {
    record_id: &'a str,
    kind: MemoryKind,
}

/// `mosaic.memory.decided_records.v1` of `(record_id, kind)` pairs in
/// record id order.
pub(super) fn decided_digest<'a>(
    decided: impl Iterator<Item = (&'a str, MemoryKind)>,
) -> Result<String, CanonicalError> {
    let entries: Vec<DecidedRecord<'a>> = decided
        .map(|(record_id, kind)| DecidedRecord { record_id, kind })
        .collect();
    domain_digest_seq(DECIDED_RECORDS_DOMAIN, &entries)
}

#[derive(Serialize)]
struct DecisionsBody<'a> {
    decided_sha256: &'a str,
    usual: Option<DecisionOutcome>,
    exceptions: Vec<&'a MemoryDecision>,
}

#[derive(Serialize)]
struct ExceptionsBody<'a> {
    usual: Option<DecisionOutcome>,
    exceptions: Vec<&'a MemoryDecision>,
}

/// [`decisions_digest`] with the decided records' digest already known,
/// or, with `None`, [`exceptions_digest`].
pub(crate) fn decisions_digest_with(
    decided_sha256: Option<&str>,
    decisions: &[MemoryDecision],
) -> Result<String, CanonicalError> {
    let mut drops: BTreeMap<DropReason, u64> = BTreeMap::new();
    for decision in decisions {
        if let DecisionOutcome::Dropped { reason } = decision.outcome {
            *drops.entry(reason).or_insert(0) += 1;
        }
    }
    let usual = usual_outcome(drops.into_iter());
    let exceptions: Vec<&MemoryDecision> = decisions
        .iter()
        .filter(|d| usual.as_ref() != Some(&d.outcome))
        .collect();
    digest_body(decided_sha256, usual, exceptions)
}

/// The usual outcome of a decision list with these drop counts: the drop
/// reason with the most drops, the smallest reason name among equals;
/// `None` when nothing was dropped.
pub(crate) fn usual_outcome(
    drops: impl Iterator<Item = (DropReason, u64)>,
) -> Option<DecisionOutcome> {
    drops
        .filter(|(_, count)| *count > 0)
        .min_by(|(a, a_count), (b, b_count)| b_count.cmp(a_count).then(a.as_str().cmp(b.as_str())))
        .map(|(reason, _)| DecisionOutcome::Dropped { reason })
}

/// [`decisions_digest_with`] of a list given by its usual outcome and its
/// `exceptions` (every decision whose outcome is not `usual`, sorted by
/// record id).
pub(crate) fn decisions_digest_of(
    decided_sha256: Option<&str>,
    usual: Option<DecisionOutcome>,
    exceptions: &[MemoryDecision],
) -> Result<String, CanonicalError> {
    digest_body(decided_sha256, usual, exceptions.iter().collect())
}

/// `mosaic.memory.selection_decisions.v2` with the decided records'
/// digest, `mosaic.memory.selection_exceptions.v1` without it.
fn digest_body(
    decided_sha256: Option<&str>,
    usual: Option<DecisionOutcome>,
    exceptions: Vec<&MemoryDecision>,
) -> Result<String, CanonicalError> {
    match decided_sha256 {
        Some(decided_sha256) => domain_digest(
            SELECTION_DECISIONS_DOMAIN,
            &DecisionsBody {
                decided_sha256,
                usual,
                exceptions,
            },
        ),
        None => domain_digest(
            SELECTION_EXCEPTIONS_DOMAIN,
            &ExceptionsBody { usual, exceptions },
        ),
    }
}
