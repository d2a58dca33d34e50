//! Selection: by kind and recency, or by a relevance receipt, and the
//! receipt and decisions it finishes with.

use std::collections::BTreeMap;

use super::{
    CheckedRecord, DecisionCounts, DecisionOutcome, DropReason, EligibleEntry, EligibleSet,
    MemoryDecision, MemoryReadContext, MemorySelection, MemorySelectionReceipt, RelevanceReceipt,
    ScopeCommitment, SelectionError, SelectionOrdering, check_all, check_inputs, decisions_digest,
    eligibility, kind_recency_order, record_set_digest_sorted, relevance,
};
#[cfg(doc)]
use super::{eligible_set, rank_relevance, verify_selection_scopes};
use crate::record::MemoryRecord;

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

pub(super) fn select_ranked<R: std::borrow::Borrow<CheckedRecord>>(
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
