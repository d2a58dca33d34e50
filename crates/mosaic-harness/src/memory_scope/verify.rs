//! Verification of a stored selection (receipt, scopes and decisions) and
//! the records a read decides on among its scopes' records.

use std::collections::BTreeMap;

use super::{
    DecisionCounts, DecisionOutcome, MemoryDecision, MemoryReadContext, MemorySelection,
    MemorySelectionReceipt, ReadScope, RelevanceReceipt, ScopeEntry, SelectionError,
    bind_scope_commitments, bind_scope_exceptions, bind_scope_roots, check_all, decisions_digest,
    exceptions_digest, select_memory, select_ranked, verify_scope_commitment,
};
use crate::canonical::CanonicalError;
use crate::record::MemoryRecord;

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
