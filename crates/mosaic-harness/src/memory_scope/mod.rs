//! The scoped read selector of chapter 7.
//!
//! [`select_memory`] checks every supplied record against the current
//! [`MemoryReadContext`], in a fixed order, and records one decision per
//! record. Eligible records are ordered working, semantic, procedural, then
//! episodic; newer first; record id breaks exact ties. (With a
//! [`RelevanceReceipt`] the eligible records are ordered by relevance instead,
//! see [`select_memory_ranked`].) The [`MemorySelectionReceipt`] binds the
//! read context, the canonical record set (or, in place of it, the
//! commitments of the read's scopes, which a store keeps at write: see
//! [`bind_scope_roots`] and [`bind_scope_exceptions`]), the ordered
//! selection, the count of decisions per outcome and the digest of the
//! decision list (or, with the scopes bound, of its exceptions); the list
//! itself travels beside the receipt ([`MemorySelection::decisions`]), so a
//! receipt's size does not grow with the number of records decided on.
//! [`verify_memory_selection`] recomputes the receipt from independently
//! supplied inputs; [`verify_selection_decisions`] checks a decision list
//! against the receipt that commits to it.
//!
//! Input order never matters: the record set is canonicalized by record id
//! before hashing and decisions are listed by record id.

mod chunked;
mod clock;
mod commitment;
mod handoff;
mod manifest;
mod pass;
mod relevance;
mod supersession;

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::canonical::{CanonicalError, domain_digest, domain_digest_seq};
use crate::record::{
    InvalidField, MemoryKind, MemoryRecord, MemoryStatus, MemorySubject, Problems,
};

pub use chunked::{Chunked, Keyed};
pub use clock::{Clock, ManualClock};
pub use commitment::{
    ReadScope, SCOPE_BUCKET_DOMAIN, SCOPE_BUCKETS, SCOPE_ENTRY_DOMAIN, SCOPE_TREE_LEVELS,
    ScopeCommitment, ScopeCommitmentError, ScopeEntry, ScopeInclusionProof, bucket_hash, bucket_of,
    climb, empty_node, empty_scope_root, proof_from_parts, scope_inclusion_proof, scope_root,
    sibling_of, verify_scope_commitment, verify_scope_inclusion,
};
pub use handoff::{
    AllocationDropReason, ContextAllocation, ContextBudget, ContextItem, ContextLane,
    ContextPlacement, ContextTrust, MemoryContextReport, RECALLED_MEMORY_NOTICE, RenderError,
    allocate_context, allocate_selected_memory, memory_context_items, render_recalled_memory,
};
pub use handoff::{DroppedItem, escape_memory_attribute, escape_memory_text};
pub use handoff::{Handoff, HandoffError, hand_off, hand_off_set};
pub use manifest::{
    ManifestError, SignedSourceSetManifest, SourceSetManifest, TrustedManifestKey, sign_source_set,
    verify_summary_sources,
};
pub use pass::{EligibilityPass, Listing, select_memory_ranked_set, select_memory_set};
pub use relevance::{
    ELIGIBLE_ENTRIES_DOMAIN, ELIGIBLE_SET_DOMAIN, ELIGIBLE_SET_V3_DOMAIN, EligibleEntry,
    EligibleSet, Entries, EntryRef, RELEVANCE_RECEIPT_DOMAIN, RELEVANCE_RECEIPT_V2_DOMAIN,
    RankedResult, RelevanceError, RelevanceInput, RelevanceReceipt, SCORE_SCALE, ScoredCandidate,
    SealedEligibleSet, SealedEntries, eligible_set, eligible_set_checked, fixed_point_score,
    rank_relevance, scoped_set_digest, verify_relevance_receipt,
};
pub use supersession::SupersessionProblem;

/// Domain tag of the read-context digest.
pub const READ_CONTEXT_DOMAIN: &str = "mosaic.memory.read_context.v1";
/// Domain tag of one record's digest (the record set commits to these).
pub const RECORD_DOMAIN: &str = "mosaic.memory.record.v1";
/// Domain tag of the canonical record-set digest.
pub const RECORD_SET_DOMAIN: &str = "mosaic.memory.record_set.v2";
/// Domain tag of the selection-receipt digest.
pub const SELECTION_RECEIPT_DOMAIN: &str = "mosaic.memory.selection_receipt.v2";
/// Domain tag of the digest of a selection receipt that binds its read
/// scopes' commitments ([`MemorySelectionReceipt::scope_commitments`]).
pub const SELECTION_RECEIPT_V3_DOMAIN: &str = "mosaic.memory.selection_receipt.v3";
/// Domain tag of the digest of a selection receipt that binds its read
/// scopes' commitments in place of the record set's digest (see
/// [`bind_scope_roots`]).
pub const SELECTION_RECEIPT_V4_DOMAIN: &str = "mosaic.memory.selection_receipt.v4";
/// Domain tag of the digest of a selection receipt that binds its read
/// scopes' commitments in place of the record set's digest and commits to
/// its decisions by their exceptions alone (`exceptions_sha256`, see
/// [`bind_scope_exceptions`]).
pub const SELECTION_RECEIPT_V5_DOMAIN: &str = "mosaic.memory.selection_receipt.v5";
/// Domain tag of the digest of a selection's decision list.
pub const SELECTION_DECISIONS_DOMAIN: &str = "mosaic.memory.selection_decisions.v2";
/// Domain tag of the digest of a selection's usual outcome and exceptions
/// (a v5 receipt's `exceptions_sha256`): the decision list without which
/// records were decided on, which the scopes' commitments bind.
pub const SELECTION_EXCEPTIONS_DOMAIN: &str = "mosaic.memory.selection_exceptions.v1";
/// Domain tag of the digest of which records a decision list decides on.
pub const DECIDED_RECORDS_DOMAIN: &str = "mosaic.memory.decided_records.v1";

/// Most records one read may select.
pub const MAX_SELECTION: usize = 10_000;

/// The current authorization and time context of one read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryReadContext {
    /// Must equal [`crate::MEMORY_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The selector release that makes (and must reproduce) the decisions.
    pub selector_release: String,
    /// The reading tenant.
    pub tenant_id: String,
    /// Digest of the policy in force for this read.
    pub policy_sha256: String,
    /// First instant the policy is in force (inclusive).
    pub policy_valid_from_unix_ms: u64,
    /// Instant the policy stops being in force (exclusive), if any.
    pub policy_valid_until_unix_ms: Option<u64>,
    /// The reading principal.
    pub principal_id: String,
    /// The current workspace.
    pub workspace_id: String,
    /// The current run.
    pub run_id: String,
    /// The read instant, from an injected clock.
    pub now_unix_ms: u64,
    /// Kinds this route may recall.
    pub allowed_kinds: Vec<MemoryKind>,
    /// Most records to select (at most [`MAX_SELECTION`]).
    pub max_records: usize,
    /// The read's filter: a record it does not match is not eligible
    /// (`filtered_out`). Absent when the read has none, and then omitted
    /// from the encoding, so an unfiltered context keeps its digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<crate::filter::ReadFilter>,
}

impl MemoryReadContext {
    /// Checks the context's own shape and returns every problem, sorted.
    pub fn validate(&self) -> Result<(), Vec<InvalidField>> {
        let mut p = Problems::default();
        p.schema(self.schema_version);
        p.id("selector_release", &self.selector_release);
        p.id("tenant_id", &self.tenant_id);
        p.sha("policy_sha256", &self.policy_sha256);
        p.id("principal_id", &self.principal_id);
        p.id("workspace_id", &self.workspace_id);
        p.id("run_id", &self.run_id);
        p.int("now_unix_ms", self.now_unix_ms);
        p.int("policy_valid_from_unix_ms", self.policy_valid_from_unix_ms);
        if let Some(until) = self.policy_valid_until_unix_ms {
            p.int("policy_valid_until_unix_ms", until);
            if until <= self.policy_valid_from_unix_ms {
                p.0.push(InvalidField::BadIdentifier {
                    field: "policy_valid_until_unix_ms".into(),
                });
            }
        }
        if self.max_records > MAX_SELECTION {
            p.0.push(InvalidField::IntegerOutOfRange {
                field: "max_records".into(),
            });
        }
        if let Some(Err(reason)) = self.filter.as_ref().map(crate::filter::ReadFilter::check) {
            p.0.push(InvalidField::BadFilter { reason });
        }
        p.finish()
    }

    /// The canonical digest of this context (`mosaic.memory.read_context.v1`).
    /// `allowed_kinds` is hashed sorted and deduplicated, so listing the
    /// same kinds in another order names the same context.
    pub fn digest(&self) -> Result<String, CanonicalError> {
        let mut canonical = self.clone();
        canonical.allowed_kinds.sort();
        canonical.allowed_kinds.dedup();
        domain_digest(READ_CONTEXT_DOMAIN, &canonical)
    }

    fn subject_matches(&self, subject: &MemorySubject) -> bool {
        match subject {
            MemorySubject::Run { run_id } => run_id == &self.run_id,
            MemorySubject::Principal { principal_id } => principal_id == &self.principal_id,
            MemorySubject::PrincipalInWorkspace {
                workspace_id,
                principal_id,
            } => principal_id == &self.principal_id && workspace_id == &self.workspace_id,
            MemorySubject::Workspace { workspace_id }
            | MemorySubject::Procedure { workspace_id, .. } => workspace_id == &self.workspace_id,
        }
    }

    fn policy_in_force(&self) -> bool {
        self.policy_valid_from_unix_ms <= self.now_unix_ms
            && self
                .policy_valid_until_unix_ms
                .is_none_or(|until| self.now_unix_ms < until)
    }
}

/// Why a record was not selected. The declaration order is the order the
/// checks run in; the first failing check names the drop.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The record's kind is not enabled for this route.
    KindDisabled,
    /// The record belongs to another tenant.
    WrongTenant,
    /// The record was written under another policy than the current one.
    PolicyMismatch,
    /// The current policy is not in force at the read instant.
    PolicyNotInForce,
    /// The record is contested.
    Contested,
    /// The record was revoked at or before the read instant.
    Revoked,
    /// The record was replaced by another record.
    Superseded,
    /// The record's validity has not started (`now < created_at`).
    NotYetValid,
    /// The record's validity ended (`now >= expires_at`).
    Expired,
    /// The record's run, principal or workspace is not the reader's.
    SubjectMismatch,
    /// The record does not match the read's filter.
    FilteredOut,
    /// Eligible, but ranked below a relevance cut-off.
    NotRelevant,
    /// Eligible, but the selection limit was already reached.
    SelectionLimit,
}

impl DropReason {
    /// The snake_case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::KindDisabled => "kind_disabled",
            DropReason::WrongTenant => "wrong_tenant",
            DropReason::PolicyMismatch => "policy_mismatch",
            DropReason::PolicyNotInForce => "policy_not_in_force",
            DropReason::Contested => "contested",
            DropReason::Revoked => "revoked",
            DropReason::Superseded => "superseded",
            DropReason::NotYetValid => "not_yet_valid",
            DropReason::Expired => "expired",
            DropReason::SubjectMismatch => "subject_mismatch",
            DropReason::FilteredOut => "filtered_out",
            DropReason::NotRelevant => "not_relevant",
            DropReason::SelectionLimit => "selection_limit",
        }
    }
}

/// Whether `record` may be read under `ctx`, ignoring the selection limit.
///
/// Checks run in the spec's order: kind enabled, tenant, policy (match, then
/// in force), status (contested, revoked, superseded), time (half-open
/// `created_at <= now < expires_at`), subject. The first failure is returned.
pub fn eligibility(ctx: &MemoryReadContext, record: &MemoryRecord) -> Result<(), DropReason> {
    if !ctx.allowed_kinds.contains(&record.kind) {
        return Err(DropReason::KindDisabled);
    }
    if record.tenant_id != ctx.tenant_id {
        return Err(DropReason::WrongTenant);
    }
    if record.policy_sha256 != ctx.policy_sha256 {
        return Err(DropReason::PolicyMismatch);
    }
    if !ctx.policy_in_force() {
        return Err(DropReason::PolicyNotInForce);
    }
    match &record.status {
        MemoryStatus::Verified => {}
        MemoryStatus::Contested => return Err(DropReason::Contested),
        MemoryStatus::Revoked { revoked_at_unix_ms } => {
            if ctx.now_unix_ms >= *revoked_at_unix_ms {
                return Err(DropReason::Revoked);
            }
        }
        MemoryStatus::Superseded { .. } => return Err(DropReason::Superseded),
    }
    if ctx.now_unix_ms < record.created_at_unix_ms {
        return Err(DropReason::NotYetValid);
    }
    if record
        .expires_at_unix_ms
        .is_some_and(|expires| ctx.now_unix_ms >= expires)
    {
        return Err(DropReason::Expired);
    }
    if !ctx.subject_matches(&record.subject) {
        return Err(DropReason::SubjectMismatch);
    }
    if ctx.filter.as_ref().is_some_and(|f| !f.matches(record)) {
        return Err(DropReason::FilteredOut);
    }
    Ok(())
}

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
fn decided_digest<'a>(
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

/// Proof of one selection, reproducible from its inputs.
///
/// The receipt commits to one decision per input record through
/// `decision_counts` and `decisions_sha256`; the decisions themselves are
/// [`MemorySelection::decisions`]. `receipt_sha256` is the digest of every
/// other field: `mosaic.memory.selection_receipt.v2` over a record set's
/// digest, v3 over it and the read scopes' commitments, v4 over the
/// commitments in place of the record set (see [`bind_scope_roots`]), v5
/// as v4 with `exceptions_sha256` in place of `decisions_sha256` (what a
/// reader that keeps the commitments at write issues, see
/// [`bind_scope_exceptions`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySelectionReceipt {
    /// Must equal [`crate::MEMORY_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The selector release from the read context.
    pub selector_release: String,
    /// Digest of the read context.
    pub read_context_sha256: String,
    /// Digest of the record set, canonicalized by record id. Absent (and
    /// then left out of the encoding) from a receipt that binds its read
    /// scopes' commitments instead (`mosaic.memory.selection_receipt.v4`,
    /// see [`bind_scope_roots`]): the scopes' roots commit to every record
    /// the read decided on, and are kept at write, so such a receipt is
    /// issued without hashing every record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_set_sha256: Option<String>,
    /// How eligible records were ordered.
    pub ordering: SelectionOrdering,
    /// Digest of the bound relevance receipt, when ordering is by relevance.
    pub relevance_receipt_sha256: Option<String>,
    /// Selected record ids, in selection order.
    pub selected_record_ids: Vec<String>,
    /// How many records were decided on, selected and dropped (by reason).
    pub decision_counts: DecisionCounts,
    /// [`decisions_digest`] of the decision list (one per input record,
    /// sorted by record id). Absent (and then left out of the encoding)
    /// from a v5 receipt, which has `exceptions_sha256` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions_sha256: Option<String>,
    /// [`exceptions_digest`] of the decision list: its usual outcome and
    /// every decision that is not the usual one, without which records were
    /// decided on (the scopes' commitments bind those). Present only in a
    /// v5 receipt (`mosaic.memory.selection_receipt.v5`, see
    /// [`bind_scope_exceptions`]); its name is what tells a verifier the
    /// version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exceptions_sha256: Option<String>,
    /// The commitments of the read's scopes at the read (their roots over
    /// every record the scopes hold, in any state, and generations), sorted
    /// by scope. Absent (and then left out of the encoding and the digest,
    /// `mosaic.memory.selection_receipt.v2`) when the reader bound none;
    /// present, the digest is `mosaic.memory.selection_receipt.v3` over
    /// the body with them. See [`bind_scope_commitments`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope_commitments: Vec<ScopeCommitment>,
    /// Digest of all fields above.
    pub receipt_sha256: String,
}

impl MemorySelectionReceipt {
    /// Whether the receipt binds the records it decided on at all: by the
    /// record set's digest, or by its read scopes' commitments (a receipt
    /// with neither names no records and never verifies).
    pub fn binds_records(&self) -> bool {
        self.record_set_sha256.is_some() || !self.scope_commitments.is_empty()
    }
}

#[derive(Serialize)]
struct ReceiptBody<'a> {
    schema_version: u32,
    selector_release: &'a str,
    read_context_sha256: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    record_set_sha256: Option<&'a str>,
    ordering: SelectionOrdering,
    relevance_receipt_sha256: &'a Option<String>,
    selected_record_ids: &'a [String],
    decision_counts: &'a DecisionCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    decisions_sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exceptions_sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "<[ScopeCommitment]>::is_empty")]
    scope_commitments: &'a [ScopeCommitment],
}

impl MemorySelectionReceipt {
    /// The domain tag this receipt's body is hashed under, picked from
    /// its members alone: `exceptions_sha256`, v5; otherwise v2 with a
    /// record set and no scope commitments, v3 with both, v4 with scope
    /// commitments and no record set. (A body that mixes members of two
    /// versions hashes under the one its members pick and verifies against
    /// nothing: the receipt a selection gives never has them.)
    pub fn domain(&self) -> &'static str {
        if self.exceptions_sha256.is_some() {
            return SELECTION_RECEIPT_V5_DOMAIN;
        }
        match (&self.record_set_sha256, self.scope_commitments.is_empty()) {
            (Some(_), true) => SELECTION_RECEIPT_DOMAIN,
            (Some(_), false) => SELECTION_RECEIPT_V3_DOMAIN,
            (None, _) => SELECTION_RECEIPT_V4_DOMAIN,
        }
    }

    /// Recomputes the digest of this receipt's body, under
    /// [`MemorySelectionReceipt::domain`].
    pub fn compute_digest(&self) -> Result<String, CanonicalError> {
        let domain = self.domain();
        domain_digest(
            domain,
            &ReceiptBody {
                schema_version: self.schema_version,
                selector_release: &self.selector_release,
                read_context_sha256: &self.read_context_sha256,
                record_set_sha256: self.record_set_sha256.as_deref(),
                ordering: self.ordering,
                relevance_receipt_sha256: &self.relevance_receipt_sha256,
                selected_record_ids: &self.selected_record_ids,
                decision_counts: &self.decision_counts,
                decisions_sha256: self.decisions_sha256.as_deref(),
                exceptions_sha256: self.exceptions_sha256.as_deref(),
                scope_commitments: &self.scope_commitments,
            },
        )
    }
}

/// Binds the commitments of the read's scopes into `receipt` (sorted by
/// scope) and recomputes its digest (`mosaic.memory.selection_receipt.v3`
/// when any is bound).
pub fn bind_scope_commitments(
    receipt: &mut MemorySelectionReceipt,
    mut commitments: Vec<ScopeCommitment>,
) -> Result<(), CanonicalError> {
    commitments.sort_by(|a, b| a.scope.cmp(&b.scope));
    receipt.scope_commitments = commitments;
    receipt.receipt_sha256 = receipt.compute_digest()?;
    Ok(())
}

/// Binds the commitments of the read's scopes into `receipt` (sorted by
/// scope) in place of its record set's digest, and recomputes its digest
/// (`mosaic.memory.selection_receipt.v4`). The roots commit to every
/// record of the scopes in every state, so the receipt still names the
/// records decided on (those of the scopes the read context finds
/// eligible), and anyone holding the scopes' records recomputes both the
/// roots ([`scope_root`]) and the receipt. `commitments` must not be
/// empty: a receipt with neither names no records.
pub fn bind_scope_roots(
    receipt: &mut MemorySelectionReceipt,
    mut commitments: Vec<ScopeCommitment>,
) -> Result<(), SelectionError> {
    if commitments.is_empty() {
        return Err(SelectionError::NoScopeCommitments);
    }
    commitments.sort_by(|a, b| a.scope.cmp(&b.scope));
    receipt.scope_commitments = commitments;
    receipt.record_set_sha256 = None;
    receipt.receipt_sha256 = receipt.compute_digest()?;
    Ok(())
}

/// [`bind_scope_roots`], and the decisions committed to by their
/// [`exceptions_digest`] in place of their [`decisions_digest`]
/// (`mosaic.memory.selection_receipt.v5`): `decisions` is the receipt's
/// decision list. Which records were decided on, the one thing v4's
/// decisions digest bound beyond the exceptions, follows from the scopes'
/// records (which the roots commit to) and the read context; so neither
/// the receipt nor its decisions digest needs a digest of every record.
pub fn bind_scope_exceptions(
    receipt: &mut MemorySelectionReceipt,
    decisions: &[MemoryDecision],
    commitments: Vec<ScopeCommitment>,
) -> Result<(), SelectionError> {
    if commitments.is_empty() {
        return Err(SelectionError::NoScopeCommitments);
    }
    receipt.decisions_sha256 = None;
    receipt.exceptions_sha256 = Some(exceptions_digest(decisions)?);
    bind_scope_roots(receipt, commitments)
}

/// The result of one selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemorySelection {
    /// The receipt (the ordered selection; commits to every decision).
    pub receipt: MemorySelectionReceipt,
    /// One decision per input record, sorted by record id.
    pub decisions: Vec<MemoryDecision>,
}

impl MemorySelection {
    /// Selected record ids in selection order.
    pub fn selected_ids(&self) -> &[String] {
        &self.receipt.selected_record_ids
    }

    /// The decision for `record_id`, if it was an input.
    pub fn decision(&self, record_id: &str) -> Option<&DecisionOutcome> {
        self.decisions
            .binary_search_by(|d| d.record_id.as_str().cmp(record_id))
            .ok()
            .map(|idx| &self.decisions[idx].outcome)
    }
}

/// An execution error: the inputs cannot be decided on at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// The read context is malformed.
    #[error("invalid read context: {0:?}")]
    InvalidContext(Vec<InvalidField>),
    /// A record is malformed.
    #[error("invalid record {record_id}: {problems:?}")]
    InvalidRecord {
        /// The record.
        record_id: String,
        /// Everything wrong with it.
        problems: Vec<InvalidField>,
    },
    /// Two input records share one identity.
    #[error("duplicate record id {0}")]
    DuplicateRecordId(String),
    /// A supersession edge is invalid.
    #[error("invalid supersession of {record_id}: {problem:?}")]
    InvalidSupersession {
        /// The superseded record.
        record_id: String,
        /// What is wrong with the edge.
        problem: SupersessionProblem,
    },
    /// An eligibility pass was given for another set, another context or
    /// an instant it does not hold at.
    #[error("the eligibility pass does not hold for this read")]
    StalePass,
    /// The relevance receipt does not belong to this read.
    #[error("relevance receipt does not match this read: {0}")]
    RelevanceMismatch(String),
    /// A receipt was to bind its scopes' roots in place of its record set,
    /// and none were given.
    #[error("no scope commitments to bind in place of the record set")]
    NoScopeCommitments,
    /// Canonical encoding failed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

/// A record checked once for reading: valid, with its
/// `mosaic.memory.record.v1` digest. A record's body never changes once
/// written, so a reader that decides on the same records many times keeps
/// them checked and each read neither validates nor hashes a record again
/// (the `*_checked` selection functions take these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedRecord {
    record: MemoryRecord,
    record_sha256: String,
}

impl CheckedRecord {
    /// Validates `record` and computes its digest.
    pub fn new(record: MemoryRecord) -> Result<Self, SelectionError> {
        record
            .validate()
            .map_err(|problems| SelectionError::InvalidRecord {
                record_id: record.record_id.clone(),
                problems,
            })?;
        let record_sha256 = domain_digest(RECORD_DOMAIN, &record)?;
        Ok(CheckedRecord {
            record,
            record_sha256,
        })
    }

    /// The record.
    pub fn record(&self) -> &MemoryRecord {
        &self.record
    }

    /// Its `mosaic.memory.record.v1` digest.
    pub fn record_sha256(&self) -> &str {
        &self.record_sha256
    }
}

/// Checked records sorted by record id without repeats, their supersession
/// edges sound, sealed with their `mosaic.memory.record_set.v2` digest and
/// the digest of which records a selection over them decides on, both
/// computed once: a reader whose records did not change since an earlier
/// read selects over the same set again without hashing every record
/// again (see [`EligibilityPass`], [`select_memory_set`],
/// [`select_memory_ranked_set`] and [`hand_off_set`]).
#[derive(Clone, Debug)]
pub struct RecordSet {
    /// In shared chunks: a clone of the set and the eligible entries of a
    /// pass over it hold the same records without copying them, and a set
    /// derived by a change shares every chunk the change did not touch.
    records: Chunked<std::sync::Arc<CheckedRecord>>,
    /// Computed on first use: a set whose receipts bind its scopes'
    /// commitments never needs it.
    record_set_sha256: std::sync::OnceLock<String>,
    /// The same: only a receipt without scope commitments (v2, v3) uses it.
    decided_sha256: std::sync::OnceLock<String>,
    scope_commitments: Vec<ScopeCommitment>,
    /// Whether a record of the set is superseded (then a change checks the
    /// whole set's supersession edges again).
    any_superseded: bool,
    /// Which sealing this is (clones share it): an eligibility pass holds
    /// for the set it was made over and its clones.
    seal: u64,
    /// The change this set was derived by (see [`RecordSet::with_changes`]).
    derived: Option<std::sync::Arc<SetChange>>,
}

/// The change a [`RecordSet`] was derived by from another sealing: what
/// an eligibility pass over that sealing applies to become the pass over
/// this one (see [`EligibilityPass::with_changes`]).
#[derive(Debug)]
pub(crate) struct SetChange {
    /// The sealing the set was derived from.
    pub(crate) parent: u64,
    /// Every record id taken out (sorted, without repeats): the ids of the
    /// records put in are among them.
    pub(crate) changed: Vec<String>,
    /// The records put in, sorted by record id.
    pub(crate) added: Vec<std::sync::Arc<CheckedRecord>>,
}

impl PartialEq for RecordSet {
    fn eq(&self, other: &Self) -> bool {
        self.records == other.records && self.scope_commitments == other.scope_commitments
    }
}

impl Eq for RecordSet {}

/// Numbers each sealed [`RecordSet`].
static SEALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl RecordSet {
    /// Sorts `records` by id, checks them (no repeated id, sound
    /// supersession edges) and seals them.
    pub fn new(records: Vec<std::sync::Arc<CheckedRecord>>) -> Result<Self, SelectionError> {
        Self::new_in(records, chunked::CHUNK)
    }

    /// [`RecordSet::new`] held in chunks of `chunk` records (tests cross
    /// chunk boundaries with small ones).
    pub(crate) fn new_in(
        mut records: Vec<std::sync::Arc<CheckedRecord>>,
        chunk: usize,
    ) -> Result<Self, SelectionError> {
        records.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
        let sorted = check_sorted(records.iter().map(|r| &**r).collect())?;
        let any_superseded = sorted
            .iter()
            .any(|r| matches!(r.record.status, MemoryStatus::Superseded { .. }));
        Ok(RecordSet {
            records: Chunked::from_sorted_in(records, chunk),
            record_set_sha256: std::sync::OnceLock::new(),
            decided_sha256: std::sync::OnceLock::new(),
            scope_commitments: Vec::new(),
            any_superseded,
            seal: SEALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            derived: None,
        })
    }

    /// A new sealing of this set with every record whose id is in
    /// `changed` (sorted, without repeats) taken out and `added` (records
    /// whose ids are all in `changed`, in any order) put in: what a reader
    /// that keeps a read applies when the store answers what changed since.
    /// The result is the set [`RecordSet::new`] gives for the same records;
    /// it shares every chunk of records the change did not touch with this
    /// set, so its cost is a copy of the chunk handles, the touched chunks
    /// and checks of the added records only (the whole set's supersession
    /// edges are checked again only when a record of it is superseded).
    pub fn with_changes(
        &self,
        changed: &[String],
        mut added: Vec<std::sync::Arc<CheckedRecord>>,
    ) -> Result<Self, SelectionError> {
        if let Some(pair) = changed.windows(2).find(|w| w[0] >= w[1]) {
            return Err(SelectionError::DuplicateRecordId(pair[1].clone()));
        }
        added.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
        if let Some(pair) = added
            .windows(2)
            .find(|w| w[0].record.record_id == w[1].record.record_id)
        {
            return Err(SelectionError::DuplicateRecordId(
                pair[0].record.record_id.clone(),
            ));
        }
        for record in &added {
            if changed
                .binary_search_by(|id| id.as_str().cmp(&record.record.record_id))
                .is_err()
            {
                // Not a change: it would stand beside a kept record of the
                // same id.
                return Err(SelectionError::DuplicateRecordId(
                    record.record.record_id.clone(),
                ));
            }
        }
        let any_superseded = self.any_superseded
            || added
                .iter()
                .any(|r| matches!(r.record.status, MemoryStatus::Superseded { .. }));
        let (records, _) = self.records.with_changes(changed, added.clone());
        if any_superseded {
            check_sorted(records.iter().map(|r| &**r).collect())?;
        }
        Ok(RecordSet {
            records,
            record_set_sha256: std::sync::OnceLock::new(),
            decided_sha256: std::sync::OnceLock::new(),
            scope_commitments: self.scope_commitments.clone(),
            any_superseded,
            seal: SEALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            derived: Some(std::sync::Arc::new(SetChange {
                parent: self.seal,
                changed: changed.to_vec(),
                added,
            })),
        })
    }

    /// The set with the commitments of the scopes it was read from (read
    /// in the same snapshot as the records): every selection receipt over
    /// it binds them in place of the record set's digest and commits to its
    /// decisions by their exceptions (v5, see [`bind_scope_exceptions`]),
    /// and its eligible sets are named by the commitments
    /// (`mosaic.memory.eligible_set.v3`), so neither the record set's
    /// digest, nor the decided records', nor the eligible entries' is ever
    /// computed. The set is sealed anew: a pass made over it before names
    /// other receipts and does not hold for it.
    pub fn with_scope_commitments(mut self, mut commitments: Vec<ScopeCommitment>) -> Self {
        commitments.sort_by(|a, b| a.scope.cmp(&b.scope));
        self.scope_commitments = commitments;
        self.seal = SEALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// The commitments a selection over this set binds (sorted by scope;
    /// empty when none were given).
    pub fn scope_commitments(&self) -> &[ScopeCommitment] {
        &self.scope_commitments
    }

    /// The records, sorted by record id.
    pub fn records(&self) -> &Chunked<std::sync::Arc<CheckedRecord>> {
        &self.records
    }

    /// The record of id `record_id`, if the set holds it.
    pub fn find(&self, record_id: &str) -> Option<&CheckedRecord> {
        self.records.find(record_id).map(|r| &**r)
    }

    /// The change this set was derived by, if it was (see
    /// [`RecordSet::with_changes`]).
    pub(crate) fn derived(&self) -> Option<&SetChange> {
        self.derived.as_deref()
    }

    /// Their `mosaic.memory.record_set.v2` digest (every record hashed, on
    /// the first call).
    pub fn record_set_sha256(&self) -> Result<&str, CanonicalError> {
        if let Some(digest) = self.record_set_sha256.get() {
            return Ok(digest);
        }
        let sorted: Vec<&CheckedRecord> = self.records.iter().map(|r| &**r).collect();
        let digest = record_set_digest_sorted(&sorted)?;
        Ok(self.record_set_sha256.get_or_init(|| digest))
    }

    /// Which sealing this set is (see [`EligibilityPass::holds_for`]).
    pub(crate) fn seal(&self) -> u64 {
        self.seal
    }

    /// The `mosaic.memory.decided_records.v1` digest of a selection over
    /// these records (every record's id and kind hashed, on the first
    /// call; a set with scope commitments never asks).
    pub(crate) fn decided_sha256(&self) -> Result<&str, CanonicalError> {
        if let Some(digest) = self.decided_sha256.get() {
            return Ok(digest);
        }
        let digest = decided_digest(
            self.records
                .iter()
                .map(|r| (r.record.record_id.as_str(), r.record.kind)),
        )?;
        Ok(self.decided_sha256.get_or_init(|| digest))
    }

    /// Whether the record set's digest and the decided records' digest
    /// have been computed (what a test of a set with scope commitments
    /// checks never happens).
    #[cfg(test)]
    pub(crate) fn digests_computed(&self) -> (bool, bool) {
        (
            self.record_set_sha256.get().is_some(),
            self.decided_sha256.get().is_some(),
        )
    }
}

/// Checks every record (in input order: the first invalid one is the error).
pub(crate) fn check_all(records: &[MemoryRecord]) -> Result<Vec<CheckedRecord>, SelectionError> {
    records.iter().cloned().map(CheckedRecord::new).collect()
}

#[derive(Serialize)]
struct RecordSetEntry<'a> {
    record_id: &'a str,
    record_sha256: &'a str,
}

/// The digest of `records` canonicalized by record id
/// (`mosaic.memory.record_set.v2` over the JSON array of
/// `{record_id, record_sha256}`, each record's `mosaic.memory.record.v1`
/// digest, sorted by record id).
pub fn record_set_digest(records: &[MemoryRecord]) -> Result<String, CanonicalError> {
    let mut entries: Vec<(&str, String)> = records
        .iter()
        .map(|r| Ok((r.record_id.as_str(), domain_digest(RECORD_DOMAIN, r)?)))
        .collect::<Result<_, CanonicalError>>()?;
    entries.sort();
    domain_digest_seq(
        RECORD_SET_DOMAIN,
        &entries
            .iter()
            .map(|(record_id, record_sha256)| RecordSetEntry {
                record_id,
                record_sha256,
            })
            .collect::<Vec<_>>(),
    )
}

/// [`record_set_digest`] of checked records already sorted by record id.
fn record_set_digest_sorted(sorted: &[&CheckedRecord]) -> Result<String, CanonicalError> {
    domain_digest_seq(
        RECORD_SET_DOMAIN,
        &sorted
            .iter()
            .map(|r| RecordSetEntry {
                record_id: &r.record.record_id,
                record_sha256: &r.record_sha256,
            })
            .collect::<Vec<_>>(),
    )
}

fn kind_recency_order(a: &MemoryRecord, b: &MemoryRecord) -> Ordering {
    a.kind
        .selection_rank()
        .cmp(&b.kind.selection_rank())
        .then(b.created_at_unix_ms.cmp(&a.created_at_unix_ms))
        .then(a.record_id.cmp(&b.record_id))
}

/// The read context is valid, no two records share an id, and the
/// supersession edges among them are sound; the records sorted by id.
pub(crate) fn check_inputs<'a, R: std::borrow::Borrow<CheckedRecord>>(
    ctx: &MemoryReadContext,
    records: &'a [R],
) -> Result<Vec<&'a CheckedRecord>, SelectionError> {
    ctx.validate().map_err(SelectionError::InvalidContext)?;
    let mut sorted: Vec<&CheckedRecord> = records.iter().map(|r| r.borrow()).collect();
    sorted.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
    check_sorted(sorted)
}

/// No two of `sorted` (sorted by record id) share an id, and the
/// supersession edges among them are sound.
fn check_sorted(sorted: Vec<&CheckedRecord>) -> Result<Vec<&CheckedRecord>, SelectionError> {
    if let Some(pair) = sorted
        .windows(2)
        .find(|w| w[0].record.record_id == w[1].record.record_id)
    {
        return Err(SelectionError::DuplicateRecordId(
            pair[0].record.record_id.clone(),
        ));
    }
    if sorted
        .iter()
        .any(|r| matches!(r.record.status, MemoryStatus::Superseded { .. }))
    {
        let by_id: BTreeMap<&str, &MemoryRecord> = sorted
            .iter()
            .map(|r| (r.record.record_id.as_str(), &r.record))
            .collect();
        supersession::validate_edges(&by_id).map_err(|(record_id, problem)| {
            SelectionError::InvalidSupersession { record_id, problem }
        })?;
    }
    Ok(sorted)
}

/// Selects memory for one read, ordered by kind and recency.
pub fn select_memory(
    ctx: &MemoryReadContext,
    records: &[MemoryRecord],
) -> Result<MemorySelection, SelectionError> {
    select_memory_checked(ctx, &check_all(records)?)
}

/// [`select_memory`] over checked records.
pub fn select_memory_checked<R: std::borrow::Borrow<CheckedRecord>>(
    ctx: &MemoryReadContext,
    records: &[R],
) -> Result<MemorySelection, SelectionError> {
    select_kind_recency(ctx, check_inputs(ctx, records)?)
}

fn select_kind_recency(
    ctx: &MemoryReadContext,
    sorted: Vec<&CheckedRecord>,
) -> Result<MemorySelection, SelectionError> {
    let mut eligible: Vec<&MemoryRecord> = Vec::new();
    let mut outcomes: Vec<Option<DropReason>> = Vec::with_capacity(sorted.len());
    for checked in &sorted {
        let record = &checked.record;
        match eligibility(ctx, record) {
            Ok(()) => {
                eligible.push(record);
                outcomes.push(None);
            }
            Err(reason) => outcomes.push(Some(reason)),
        }
    }
    // Only the first `max_records` in kind and recency order are selected
    // (the order is total: record id breaks ties), so only those are sorted.
    if eligible.len() > ctx.max_records && ctx.max_records > 0 {
        eligible.select_nth_unstable_by(ctx.max_records - 1, |a, b| kind_recency_order(a, b));
        eligible.truncate(ctx.max_records);
    }
    eligible.sort_by(|a, b| kind_recency_order(a, b));
    finish(
        ctx,
        &sorted,
        &outcomes,
        eligible,
        SelectionOrdering::KindRecency,
        None,
    )
}

/// Selects memory ordered by a relevance receipt computed over this read's
/// eligible set (see [`eligible_set`] and [`rank_relevance`]). Eligible
/// records the receipt did not rank are dropped as `not_relevant`.
pub fn select_memory_ranked(
    ctx: &MemoryReadContext,
    records: &[MemoryRecord],
    relevance: &RelevanceReceipt,
) -> Result<MemorySelection, SelectionError> {
    select_memory_ranked_checked(ctx, &check_all(records)?, relevance)
}

/// [`select_memory_ranked`] over checked records.
pub fn select_memory_ranked_checked<R: std::borrow::Borrow<CheckedRecord>>(
    ctx: &MemoryReadContext,
    records: &[R],
    relevance: &RelevanceReceipt,
) -> Result<MemorySelection, SelectionError> {
    select_ranked(ctx, records, relevance, &[])
}

/// [`select_memory_ranked_checked`] of records read from the scopes whose
/// commitments are `scope_commitments`: a relevance receipt that names its
/// eligible set by them (`eligible_scopes_sha256`) is checked against the
/// `mosaic.memory.eligible_set.v3` digest of this read's context and
/// `scope_commitments` (that the records are the scopes' is
/// [`verify_selection_scopes`]'s question); one that names it by its
/// entries, as [`select_memory_ranked_checked`] checks it.
pub fn select_memory_ranked_scoped<R: std::borrow::Borrow<CheckedRecord>>(
    ctx: &MemoryReadContext,
    records: &[R],
    relevance: &RelevanceReceipt,
    scope_commitments: &[ScopeCommitment],
) -> Result<MemorySelection, SelectionError> {
    select_ranked(ctx, records, relevance, scope_commitments)
}

fn select_ranked<R: std::borrow::Borrow<CheckedRecord>>(
    ctx: &MemoryReadContext,
    records: &[R],
    relevance: &RelevanceReceipt,
    scope_commitments: &[ScopeCommitment],
) -> Result<MemorySelection, SelectionError> {
    let sorted = check_inputs(ctx, records)?;
    let rank_of: BTreeMap<&str, usize> = relevance
        .results
        .iter()
        .enumerate()
        .map(|(idx, r)| (r.record_id.as_str(), idx))
        .collect();
    // One eligibility pass yields both the eligible set the relevance
    // receipt must name and the decisions.
    let mut entries = Vec::new();
    let mut eligible: Vec<(usize, &MemoryRecord)> = Vec::new();
    let mut outcomes: Vec<Option<DropReason>> = Vec::with_capacity(sorted.len());
    for checked in &sorted {
        let record = &checked.record;
        match eligibility(ctx, record) {
            Ok(()) => {
                entries.push(EligibleEntry {
                    record_id: record.record_id.clone(),
                    content_sha256: record.content_sha256.clone(),
                });
                match rank_of.get(record.record_id.as_str()) {
                    Some(&rank) => {
                        eligible.push((rank, record));
                        outcomes.push(None);
                    }
                    None => outcomes.push(Some(DropReason::NotRelevant)),
                }
            }
            Err(reason) => outcomes.push(Some(reason)),
        }
    }
    // Sorted by record id already: the records are. A receipt names the
    // set by its scopes' commitments (v3) or by its entries (v2), never
    // both; one that names it by commitments the read has not is not this
    // read's.
    let mut commitments = scope_commitments.to_vec();
    commitments.sort_by(|a, b| a.scope.cmp(&b.scope));
    let (expected, named) = match (
        &relevance.eligible_set_sha256,
        &relevance.eligible_scopes_sha256,
    ) {
        (Some(named), None) => (
            EligibleSet {
                read_context_sha256: ctx.digest()?,
                entries,
                scope_commitments: Vec::new(),
            }
            .digest()?,
            named,
        ),
        (None, Some(named)) if !commitments.is_empty() => (
            relevance::scoped_set_digest(&ctx.digest()?, &commitments)?,
            named,
        ),
        _ => {
            return Err(SelectionError::RelevanceMismatch(
                "the relevance receipt does not name this read's eligible set".into(),
            ));
        }
    };
    if expected != *named {
        return Err(SelectionError::RelevanceMismatch(
            "eligible_set_sha256 differs from this read's eligible set".into(),
        ));
    }
    if relevance.compute_digest()? != relevance.receipt_sha256 {
        return Err(SelectionError::RelevanceMismatch(
            "relevance receipt digest does not match its body".into(),
        ));
    }
    eligible.sort_by_key(|(rank, _)| *rank);
    let ordered = eligible.into_iter().map(|(_, r)| r).collect();
    finish(
        ctx,
        &sorted,
        &outcomes,
        ordered,
        SelectionOrdering::Relevance,
        Some(relevance.receipt_sha256.clone()),
    )
}

/// The receipt and the decisions, in record id order: `outcomes[i]` is
/// the drop reason of `sorted[i]` found before ordering, or `None` for a
/// candidate, which is selected at its position in `ordered` if that is
/// below the selection limit and dropped as `selection_limit` otherwise.
fn finish(
    ctx: &MemoryReadContext,
    sorted: &[&CheckedRecord],
    outcomes: &[Option<DropReason>],
    ordered: Vec<&MemoryRecord>,
    ordering: SelectionOrdering,
    relevance_receipt_sha256: Option<String>,
) -> Result<MemorySelection, SelectionError> {
    let selected_record_ids: Vec<String> = ordered
        .iter()
        .take(ctx.max_records)
        .map(|r| r.record_id.clone())
        .collect();
    // position < max_records <= MAX_SELECTION, so it fits in u32.
    let rank_of: BTreeMap<&str, u32> = selected_record_ids
        .iter()
        .enumerate()
        .map(|(position, id)| (id.as_str(), position as u32))
        .collect();
    let decisions: Vec<MemoryDecision> = sorted
        .iter()
        .zip(outcomes)
        .map(|(checked, outcome)| {
            let record = &checked.record;
            let outcome = match outcome {
                Some(reason) => DecisionOutcome::Dropped { reason: *reason },
                None => match rank_of.get(record.record_id.as_str()) {
                    Some(&rank) => DecisionOutcome::Selected { rank },
                    None => DecisionOutcome::Dropped {
                        reason: DropReason::SelectionLimit,
                    },
                },
            };
            MemoryDecision {
                record_id: record.record_id.clone(),
                kind: record.kind,
                outcome,
            }
        })
        .collect();
    let mut receipt = MemorySelectionReceipt {
        schema_version: crate::MEMORY_SCHEMA_VERSION,
        selector_release: ctx.selector_release.clone(),
        read_context_sha256: ctx.digest()?,
        record_set_sha256: Some(record_set_digest_sorted(sorted)?),
        ordering,
        relevance_receipt_sha256,
        selected_record_ids,
        decision_counts: DecisionCounts::of(&decisions),
        decisions_sha256: Some(decisions_digest(&decisions)?),
        exceptions_sha256: None,
        scope_commitments: Vec::new(),
        receipt_sha256: String::new(),
    };
    receipt.receipt_sha256 = receipt.compute_digest()?;
    Ok(MemorySelection { receipt, decisions })
}

/// Why a stored selection receipt failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionVerifyError {
    /// The supplied inputs cannot be selected over at all.
    #[error("inputs are invalid: {0}")]
    Inputs(#[from] SelectionError),
    /// The stored digest does not match the stored body: the receipt was
    /// edited after it was issued.
    #[error("stored receipt digest does not match its body")]
    DigestMismatch,
    /// The stored body differs from the recomputed one in `field`.
    #[error("receipt_mismatch: {field}")]
    ReceiptMismatch {
        /// The first field (in receipt order) that differs.
        field: &'static str,
    },
}

/// Recomputes the selection from independently supplied inputs and checks
/// `stored` against it, field by field, then its digest.
///
/// `records` are the records the read decided on. A stored receipt that
/// binds its read scopes' commitments (v3, v4, v5) is recomputed with them
/// bound as stored: that they are the scopes' roots, and that `records` are
/// the records the read decides on in those scopes, is
/// [`verify_selection_scopes`]'s question.
pub fn verify_memory_selection(
    ctx: &MemoryReadContext,
    records: &[MemoryRecord],
    relevance: Option<&RelevanceReceipt>,
    stored: &MemorySelectionReceipt,
) -> Result<(), SelectionVerifyError> {
    let MemorySelection {
        receipt: mut fresh,
        decisions,
    } = match relevance {
        Some(relevance) => select_ranked(
            ctx,
            &check_all(records)?,
            relevance,
            &stored.scope_commitments,
        )?,
        None => select_memory(ctx, records)?,
    };
    // The scopes' roots are over records the selection's inputs need not
    // hold (every state); they are checked against the scopes' records by
    // [`verify_selection_scopes`]. Here they are bound as stored, in the
    // stored receipt's version (v5: in place of the record set's digest,
    // with the exceptions' digest in place of the decisions'; v4: in place
    // of the record set's digest), so the digest covers them. A receipt
    // that binds no records at all differs from the fresh one in
    // `record_set_sha256`.
    if stored.exceptions_sha256.is_some() {
        if stored.scope_commitments.is_empty() {
            return Err(SelectionVerifyError::ReceiptMismatch {
                field: "scope_commitments",
            });
        }
        bind_scope_exceptions(&mut fresh, &decisions, stored.scope_commitments.clone())?;
    } else if stored.record_set_sha256.is_none() && !stored.scope_commitments.is_empty() {
        bind_scope_roots(&mut fresh, stored.scope_commitments.clone())?;
    } else if !stored.scope_commitments.is_empty() {
        bind_scope_commitments(&mut fresh, stored.scope_commitments.clone())
            .map_err(SelectionError::from)?;
    }
    let checks: [(&'static str, bool); 10] = [
        (
            "schema_version",
            fresh.schema_version == stored.schema_version,
        ),
        (
            "selector_release",
            fresh.selector_release == stored.selector_release,
        ),
        (
            "read_context_sha256",
            fresh.read_context_sha256 == stored.read_context_sha256,
        ),
        (
            "record_set_sha256",
            fresh.record_set_sha256 == stored.record_set_sha256,
        ),
        ("ordering", fresh.ordering == stored.ordering),
        (
            "relevance_receipt_sha256",
            fresh.relevance_receipt_sha256 == stored.relevance_receipt_sha256,
        ),
        (
            "selected_record_ids",
            fresh.selected_record_ids == stored.selected_record_ids,
        ),
        (
            "decision_counts",
            fresh.decision_counts == stored.decision_counts,
        ),
        (
            "decisions_sha256",
            fresh.decisions_sha256 == stored.decisions_sha256,
        ),
        (
            "exceptions_sha256",
            fresh.exceptions_sha256 == stored.exceptions_sha256,
        ),
    ];
    if let Some((field, _)) = checks.iter().find(|(_, same)| !same) {
        return Err(SelectionVerifyError::ReceiptMismatch { field });
    }
    if stored.compute_digest().map_err(SelectionError::from)? != stored.receipt_sha256
        || fresh.receipt_sha256 != stored.receipt_sha256
    {
        return Err(SelectionVerifyError::DigestMismatch);
    }
    Ok(())
}

/// The records a read decides on among its scopes' records
/// (`scope_records`: every record of the scopes, each with its state):
/// those of the context's tenant in one of its scopes, `active`, written
/// under its policy, current at its instant (`created_at <= now <
/// expires_at`) and of a kind it allows, one per exact content (see
/// [`one_per_content`]), sorted by record id. This is the set a reader that
/// binds its scopes' commitments selects over, so a holder of the scopes'
/// records recomputes it from the roots' records and the context alone.
pub fn records_decided_on(
    ctx: &MemoryReadContext,
    scope_records: &[(MemoryRecord, &str)],
) -> Vec<MemoryRecord> {
    let scopes = ReadScope::of_context(ctx);
    let now = ctx.now_unix_ms;
    let read: Vec<&MemoryRecord> = scope_records
        .iter()
        .filter(|(r, state)| {
            *state == "active"
                && r.tenant_id == ctx.tenant_id
                && r.policy_sha256 == ctx.policy_sha256
                && scopes.contains(&ReadScope::of_subject(&r.subject))
                && r.created_at_unix_ms <= now
                && r.expires_at_unix_ms.is_none_or(|expires| now < expires)
                && ctx.allowed_kinds.contains(&r.kind)
        })
        .map(|(r, _)| r)
        .collect();
    let mut kept: Vec<MemoryRecord> = one_per_content(read, |r| r).into_iter().cloned().collect();
    kept.sort_by(|a, b| a.record_id.cmp(&b.record_id));
    kept
}

/// Whether `a` is kept before `b`, a record of the same content: the
/// newer (larger `created_at`), the larger record id among equals (see
/// [`one_per_content`]).
pub fn kept_for_its_content(a: &MemoryRecord, b: &MemoryRecord) -> bool {
    (a.created_at_unix_ms, a.record_id.as_str()) > (b.created_at_unix_ms, b.record_id.as_str())
}

/// Keeps one of `items` per exact content (`content_sha256`): the newest
/// (largest `created_at`), the larger record id among equals; the kept
/// items stay in their order. A read decides on one record per content,
/// so a content written twice is not recalled twice.
pub fn one_per_content<T>(items: Vec<T>, record_of: impl Fn(&T) -> &MemoryRecord) -> Vec<T> {
    let mut best: BTreeMap<&str, usize> = BTreeMap::new();
    for (at, item) in items.iter().enumerate() {
        let record = record_of(item);
        best.entry(record.content_sha256.as_str())
            .and_modify(|kept| {
                if kept_for_its_content(record, record_of(&items[*kept])) {
                    *kept = at;
                }
            })
            .or_insert(at);
    }
    if best.len() == items.len() {
        return items;
    }
    let mut keep = vec![false; items.len()];
    for at in best.into_values() {
        keep[at] = true;
    }
    items
        .into_iter()
        .zip(keep)
        .filter_map(|(item, kept)| kept.then_some(item))
        .collect()
}

/// Checks a receipt that binds its read scopes' commitments against the
/// scopes' records as given (`scope_records`: every record of the
/// context's tenant whose subject is in one of the scopes, in any state,
/// with that state): that it binds exactly the read's scopes (all four,
/// sorted), that each root is the root of its scope's records, and that
/// the receipt is the selection of the records the read decides on among
/// them ([`records_decided_on`]) under `relevance` when it was ranked
/// ([`verify_memory_selection`]): its selection, its counts, its decisions
/// (or exceptions) digest, and the eligible set its relevance receipt
/// names. This is how a holder of the scopes' records checks a v4 or v5
/// receipt, which names the records through the roots alone.
pub fn verify_selection_scopes(
    ctx: &MemoryReadContext,
    stored: &MemorySelectionReceipt,
    scope_records: &[(MemoryRecord, &str)],
    relevance: Option<&RelevanceReceipt>,
) -> Result<(), SelectionVerifyError> {
    let bound: Vec<&ReadScope> = stored.scope_commitments.iter().map(|c| &c.scope).collect();
    if bound != ReadScope::of_context(ctx).iter().collect::<Vec<_>>() {
        return Err(SelectionVerifyError::ReceiptMismatch {
            field: "scope_commitments",
        });
    }
    for commitment in &stored.scope_commitments {
        let entries: Vec<ScopeEntry> = scope_records
            .iter()
            .filter(|(r, _)| {
                r.tenant_id == ctx.tenant_id
                    && ReadScope::of_subject(&r.subject) == commitment.scope
            })
            .map(|(r, state)| ScopeEntry::of_record(r, state))
            .collect::<Result<_, CanonicalError>>()
            .map_err(SelectionError::from)?;
        if verify_scope_commitment(commitment, &entries).is_err() {
            return Err(SelectionVerifyError::ReceiptMismatch {
                field: "scope_commitments",
            });
        }
    }
    verify_memory_selection(
        ctx,
        &records_decided_on(ctx, scope_records),
        relevance,
        stored,
    )
}

/// Why a decision list does not belong to a selection receipt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionsVerifyError {
    /// The list is not sorted by record id, or names a record twice.
    #[error("decisions are not sorted by record id without repeats")]
    NotSorted,
    /// The list's digest is not the receipt's `decisions_sha256`.
    #[error("decisions do not hash to the receipt's decisions_sha256")]
    DigestMismatch,
    /// The list's counts are not the receipt's `decision_counts`.
    #[error("decisions do not add up to the receipt's decision_counts")]
    CountsMismatch,
    /// A selected record is not decided selected at its rank.
    #[error("selected record {0} is not decided selected at its rank")]
    SelectionMismatch(String),
    /// Canonical encoding failed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

/// Checks that `decisions` is the list `receipt` commits to: sorted by
/// record id, hashing to `decisions_sha256` (a v5 receipt: its usual
/// outcome and exceptions hashing to `exceptions_sha256`), adding up to
/// `decision_counts`, and deciding each selected record selected at its
/// rank. (Whether the decisions are right for the inputs is
/// [`verify_memory_selection`]'s question. Against a v5 receipt the
/// decisions with the usual outcome are checked by their number only:
/// which records they are is bound by the scopes' commitments, and checked
/// by [`verify_selection_scopes`].)
pub fn verify_selection_decisions(
    receipt: &MemorySelectionReceipt,
    decisions: &[MemoryDecision],
) -> Result<(), DecisionsVerifyError> {
    if !decisions
        .windows(2)
        .all(|w| w[0].record_id < w[1].record_id)
    {
        return Err(DecisionsVerifyError::NotSorted);
    }
    // A v5 receipt commits to them by their exceptions, the others by
    // the whole list's digest.
    let digest = match (&receipt.decisions_sha256, &receipt.exceptions_sha256) {
        (Some(_), None) => decisions_digest(decisions)?,
        (None, Some(_)) => exceptions_digest(decisions)?,
        _ => return Err(DecisionsVerifyError::DigestMismatch),
    };
    if Some(&digest)
        != receipt
            .exceptions_sha256
            .as_ref()
            .or(receipt.decisions_sha256.as_ref())
    {
        return Err(DecisionsVerifyError::DigestMismatch);
    }
    if DecisionCounts::of(decisions) != receipt.decision_counts {
        return Err(DecisionsVerifyError::CountsMismatch);
    }
    for (rank, id) in receipt.selected_record_ids.iter().enumerate() {
        let here = decisions
            .binary_search_by(|d| d.record_id.as_str().cmp(id))
            .ok()
            .is_some_and(|idx| {
                matches!(decisions[idx].outcome,
                    DecisionOutcome::Selected { rank: r } if r as usize == rank)
            });
        if !here {
            return Err(DecisionsVerifyError::SelectionMismatch(id.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
