//! Selection over a sealed [`RecordSet`] whose eligibility was decided
//! once: what a reader that keeps an unchanged read does at every recall.
//!
//! An [`EligibilityPass`] is every record's eligibility under one read
//! context, with the instants over which it holds: each time check of
//! [`eligibility`] compares the read's instant with an instant of the
//! record or the policy, so the outcomes are the same at any later instant
//! before the first of those instants at or after the pass's own. Within
//! that interval, and under an otherwise equal context, a selection over
//! the set needs no pass over every record: the selected records, the drop
//! counts and the decisions digest (whose compressed form lists only the
//! decisions that are not the usual one, see [`decisions_digest`]) follow
//! from the pass and the ranking alone. The receipt is the one
//! [`select_memory`] and [`select_memory_ranked`] give for the same
//! records; with [`Listing::Full`] the decision list is built as well.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use super::chunked::{Chunked, Keyed};
use super::relevance::{SealedEligibleSet, SealedEntries};
use super::{
    CheckedRecord, DecisionCounts, DecisionOutcome, DropReason, MemoryDecision, MemoryReadContext,
    MemorySelection, MemorySelectionReceipt, RecordSet, RelevanceReceipt, ScopeCommitment,
    SelectionError, SelectionOrdering, decisions_digest_with, eligibility, kind_recency_order,
    usual_outcome,
};
use crate::record::MemoryStatus;

/// Whether a selection lists every decision or only commits to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listing {
    /// Build [`MemorySelection::decisions`], one per record (a pass over
    /// every record).
    Full,
    /// Leave [`MemorySelection::decisions`] empty: the receipt still
    /// commits to every decision by its counts and digest.
    CountsOnly,
}

/// A record a pass dropped, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Dropped {
    pub(super) record: Arc<CheckedRecord>,
    pub(super) reason: DropReason,
}

impl Keyed for Dropped {
    fn key(&self) -> &str {
        &self.record.record().record_id
    }
}

/// Every record's eligibility in one [`RecordSet`] under one read context.
#[derive(Clone, Debug)]
pub struct EligibilityPass {
    /// The sealing of the set the pass was made over.
    seal: u64,
    context: MemoryReadContext,
    /// The first instant at or after the context's at which any time check
    /// could change its answer.
    pub(super) next_change_unix_ms: Option<u64>,
    /// The eligible records, sorted by record id, in shared chunks (a pass
    /// derived by a change shares every chunk the change did not touch).
    pub(super) eligible: Chunked<Arc<CheckedRecord>>,
    /// The dropped records with their reasons, the same way.
    pub(super) dropped: Chunked<Dropped>,
    /// Drops by reason.
    pub(super) drop_counts: BTreeMap<DropReason, u64>,
    /// The eligible records in kind and recency order, sorted by the first
    /// selection without a ranking that asks (a ranked one never does).
    recency_order: OnceLock<Vec<Arc<CheckedRecord>>>,
    /// The eligible set's entries, sealed (the eligible records' chunks).
    pub(super) entries: Arc<SealedEntries>,
    /// The set's scope commitments (empty when it has none), which name
    /// the eligible set in place of its entries.
    scope_commitments: Vec<ScopeCommitment>,
}

impl EligibilityPass {
    /// Decides every record of `set` under `ctx`.
    pub fn new(ctx: &MemoryReadContext, set: &RecordSet) -> Result<Self, SelectionError> {
        ctx.validate().map_err(SelectionError::InvalidContext)?;
        let now = ctx.now_unix_ms;
        let mut next: Option<u64> = None;
        let mut at_or_after = |t: u64| {
            if t >= now {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        at_or_after(ctx.policy_valid_from_unix_ms);
        if let Some(until) = ctx.policy_valid_until_unix_ms {
            at_or_after(until);
        }
        let mut eligible = Vec::with_capacity(set.records().len());
        let mut dropped = Vec::new();
        let mut drop_counts: BTreeMap<DropReason, u64> = BTreeMap::new();
        for checked in set.records().iter() {
            match decide_record(ctx, checked.record(), &mut at_or_after) {
                None => eligible.push(checked.clone()),
                Some(reason) => {
                    *drop_counts.entry(reason).or_insert(0) += 1;
                    dropped.push(Dropped {
                        record: checked.clone(),
                        reason,
                    });
                }
            }
        }
        let chunk = set.records().chunk_size();
        let eligible = Chunked::from_sorted_in(eligible, chunk);
        Ok(EligibilityPass {
            seal: set.seal(),
            context: ctx.clone(),
            next_change_unix_ms: next,
            entries: Arc::new(SealedEntries::of_records(eligible.clone(), None)),
            eligible,
            dropped: Chunked::from_sorted_in(dropped, chunk),
            drop_counts,
            recency_order: OnceLock::new(),
            scope_commitments: set.scope_commitments().to_vec(),
        })
    }

    /// The pass over `set`, a set derived from `kept` (the set this pass
    /// was made over) by [`RecordSet::with_changes`], under `ctx`, for
    /// which this pass holds over `kept`: the same as
    /// [`EligibilityPass::new`] over `set` under `ctx`, deciding only the
    /// records the change put in and taking out the ones it took out; the
    /// chunks of eligible and dropped records the change did not touch are
    /// shared with this pass. Fails with [`SelectionError::StalePass`] when
    /// the pass does not hold for `kept` under `ctx`, or when `set` was not
    /// derived from `kept`.
    pub fn with_changes(
        &self,
        ctx: &MemoryReadContext,
        kept: &RecordSet,
        set: &RecordSet,
    ) -> Result<Self, SelectionError> {
        ctx.validate().map_err(SelectionError::InvalidContext)?;
        if !self.holds_for(ctx, kept) {
            return Err(SelectionError::StalePass);
        }
        let Some(change) = set.derived().filter(|c| c.parent == kept.seal()) else {
            return Err(SelectionError::StalePass);
        };
        let now = ctx.now_unix_ms;
        // Every instant the kept pass watches is at or after `now` (it
        // holds), so its next change still bounds the new pass.
        let mut next = self.next_change_unix_ms;
        let mut at_or_after = |t: u64| {
            if t >= now {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        let mut drop_counts = self.drop_counts.clone();
        // The records put in, decided (sorted by id, as the change holds
        // them): the only ones whose eligibility can differ, with the ones
        // taken out.
        let mut eligible_in = Vec::new();
        let mut dropped_in = Vec::new();
        for checked in &change.added {
            match decide_record(ctx, checked.record(), &mut at_or_after) {
                None => eligible_in.push(checked.clone()),
                Some(reason) => {
                    *drop_counts.entry(reason).or_insert(0) += 1;
                    dropped_in.push(Dropped {
                        record: checked.clone(),
                        reason,
                    });
                }
            }
        }
        let (eligible, _) = self.eligible.with_changes(&change.changed, eligible_in);
        let (dropped, taken_out) = self.dropped.with_changes(&change.changed, dropped_in);
        for gone in taken_out {
            if let Some(count) = drop_counts.get_mut(&gone.reason) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    drop_counts.remove(&gone.reason);
                }
            }
        }
        Ok(EligibilityPass {
            seal: set.seal(),
            context: ctx.clone(),
            next_change_unix_ms: next,
            entries: Arc::new(SealedEntries::of_records(
                eligible.clone(),
                Some((self.entries.seal_number(), change.changed.clone())),
            )),
            eligible,
            dropped,
            drop_counts,
            recency_order: OnceLock::new(),
            scope_commitments: set.scope_commitments().to_vec(),
        })
    }

    /// Whether this pass decides `set` under `ctx` as a new pass would: the
    /// set it was made over (or a clone of it), the same context but for its instant and selection limit,
    /// and an instant from the pass's own up to (not including) the first
    /// instant at which a time check could change.
    pub fn holds_for(&self, ctx: &MemoryReadContext, set: &RecordSet) -> bool {
        let then = self.context.now_unix_ms;
        let now = ctx.now_unix_ms;
        set.seal() == self.seal
            && same_but_instant_and_limit(&self.context, ctx)
            && (now == then
                || (then < now && self.next_change_unix_ms.is_none_or(|next| now < next)))
    }

    /// The eligible set under `ctx` (for which this pass holds), sealed
    /// from the pass's entries: only the set's own digest is computed, over
    /// the set's scope commitments when it has them
    /// (`mosaic.memory.eligible_set.v3`, no entry hashed), else over the
    /// entries' digest (v2, hashed once per pass).
    pub fn eligible_set(
        &self,
        ctx: &MemoryReadContext,
    ) -> Result<SealedEligibleSet, SelectionError> {
        Ok(SealedEligibleSet::of_scopes(
            ctx.digest()?,
            self.entries.clone(),
            self.scope_commitments.clone(),
        )?)
    }
}

/// The drop reason of `record` under `ctx` (`None`: eligible), with every
/// instant of the record a time check compares the read's instant with
/// passed to `watch`.
fn decide_record(
    ctx: &MemoryReadContext,
    record: &crate::record::MemoryRecord,
    watch: &mut impl FnMut(u64),
) -> Option<DropReason> {
    watch(record.created_at_unix_ms);
    if let Some(expires) = record.expires_at_unix_ms {
        watch(expires);
    }
    if let MemoryStatus::Revoked { revoked_at_unix_ms } = record.status {
        watch(revoked_at_unix_ms);
    }
    eligibility(ctx, record).err()
}

/// Whether two contexts are equal but for their instant and selection
/// limit. Destructured field by field, so a field added to the context is
/// a compile error here until it is compared.
fn same_but_instant_and_limit(a: &MemoryReadContext, b: &MemoryReadContext) -> bool {
    let MemoryReadContext {
        schema_version,
        selector_release,
        tenant_id,
        policy_sha256,
        policy_valid_from_unix_ms,
        policy_valid_until_unix_ms,
        principal_id,
        workspace_id,
        run_id,
        now_unix_ms: _,
        allowed_kinds,
        max_records: _,
        filter,
    } = a;
    *schema_version == b.schema_version
        && *selector_release == b.selector_release
        && *tenant_id == b.tenant_id
        && *policy_sha256 == b.policy_sha256
        && *policy_valid_from_unix_ms == b.policy_valid_from_unix_ms
        && *policy_valid_until_unix_ms == b.policy_valid_until_unix_ms
        && *principal_id == b.principal_id
        && *workspace_id == b.workspace_id
        && *run_id == b.run_id
        && *allowed_kinds == b.allowed_kinds
        && *filter == b.filter
}

/// [`select_memory`](super::select_memory) over a sealed set, with its
/// eligibility decided by `pass`.
pub fn select_memory_set(
    ctx: &MemoryReadContext,
    set: &RecordSet,
    pass: &EligibilityPass,
    listing: Listing,
) -> Result<MemorySelection, SelectionError> {
    check_pass(ctx, set, pass)?;
    let order = pass.recency_order.get_or_init(|| {
        let mut order: Vec<Arc<CheckedRecord>> = pass.eligible.iter().cloned().collect();
        order.sort_by(|a, b| kind_recency_order(a.record(), b.record()));
        order
    });
    let selected: Vec<&CheckedRecord> = order.iter().take(ctx.max_records).map(|r| &**r).collect();
    // Every other eligible record is past the selection limit.
    decide(
        ctx,
        ctx.digest()?,
        set,
        pass,
        &selected,
        &[],
        DropReason::SelectionLimit,
        SelectionOrdering::KindRecency,
        None,
        listing,
    )
}

/// [`select_memory_ranked`](super::select_memory_ranked) over a sealed set,
/// with its eligibility decided by `pass`; `eligible` is the set the
/// ranking ranked, which must be the pass's.
pub fn select_memory_ranked_set(
    ctx: &MemoryReadContext,
    set: &RecordSet,
    pass: &EligibilityPass,
    relevance: &RelevanceReceipt,
    eligible: &SealedEligibleSet,
    listing: Listing,
) -> Result<MemorySelection, SelectionError> {
    check_pass(ctx, set, pass)?;
    let read_context_sha256 = ctx.digest()?;
    // The pass's own entries are recognised by their seal, without
    // comparing or hashing them; a set sealed apart is compared entry by
    // entry.
    if !eligible.sealed_entries().same_entries(&pass.entries)
        || eligible.read_context_sha256() != read_context_sha256
        || eligible.scope_commitments() != set.scope_commitments()
    {
        return Err(SelectionError::RelevanceMismatch(
            "the sealed eligible set is not this read's eligible set".into(),
        ));
    }
    if relevance.eligible_sha256() != Some(eligible.sha256())
        || relevance.eligible_scopes_sha256.is_some() == set.scope_commitments().is_empty()
    {
        return Err(SelectionError::RelevanceMismatch(
            "eligible_set_sha256 differs from this read's eligible set".into(),
        ));
    }
    if relevance.compute_digest()? != relevance.receipt_sha256 {
        return Err(SelectionError::RelevanceMismatch(
            "relevance receipt digest does not match its body".into(),
        ));
    }
    // The ranked records that are eligible, in rank order (a result naming
    // anything else is not a candidate, and a record named twice ranks at
    // its last place, as in the selection over records).
    let mut place_of: BTreeMap<&str, (usize, &CheckedRecord)> = BTreeMap::new();
    for (place, result) in relevance.results.iter().enumerate() {
        if let Some(record) = pass.eligible.find(&result.record_id) {
            place_of.insert(&record.record().record_id, (place, &**record));
        }
    }
    let mut by_place: Vec<(usize, &CheckedRecord)> = place_of.into_values().collect();
    by_place.sort_unstable_by_key(|(place, _)| *place);
    let ranked: Vec<&CheckedRecord> = by_place.into_iter().map(|(_, record)| record).collect();
    let cut = ranked.len().min(ctx.max_records);
    let (selected, past_limit) = ranked.split_at(cut);
    decide(
        ctx,
        read_context_sha256,
        set,
        pass,
        selected,
        past_limit,
        DropReason::NotRelevant,
        SelectionOrdering::Relevance,
        Some(relevance.receipt_sha256.clone()),
        listing,
    )
}

fn check_pass(
    ctx: &MemoryReadContext,
    set: &RecordSet,
    pass: &EligibilityPass,
) -> Result<(), SelectionError> {
    ctx.validate().map_err(SelectionError::InvalidContext)?;
    if !pass.holds_for(ctx, set) {
        return Err(SelectionError::StalePass);
    }
    Ok(())
}

/// The receipt (and, with [`Listing::Full`], the decisions) of a selection
/// under `ctx` (whose digest is `read_context_sha256`) whose eligible
/// records are `selected` (in order), `past_limit` (ranked past the
/// selection limit) and the rest, dropped as `rest`.
#[allow(clippy::too_many_arguments)]
fn decide(
    ctx: &MemoryReadContext,
    read_context_sha256: String,
    set: &RecordSet,
    pass: &EligibilityPass,
    selected: &[&CheckedRecord],
    past_limit: &[&CheckedRecord],
    rest: DropReason,
    ordering: SelectionOrdering,
    relevance_receipt_sha256: Option<String>,
    listing: Listing,
) -> Result<MemorySelection, SelectionError> {
    let eligible = pass.eligible.len();
    let mut counts = pass.drop_counts.clone();
    let beyond = past_limit.len() as u64;
    let rest_count = (eligible - selected.len() - past_limit.len()) as u64;
    if beyond > 0 {
        *counts.entry(DropReason::SelectionLimit).or_insert(0) += beyond;
    }
    if rest_count > 0 {
        *counts.entry(rest).or_insert(0) += rest_count;
    }
    // rank < max_records <= MAX_SELECTION, so it fits in u32.
    let rank_of: BTreeMap<&str, u32> = selected
        .iter()
        .enumerate()
        .map(|(rank, r)| (r.record().record_id.as_str(), rank as u32))
        .collect();
    let past: BTreeSet<&str> = past_limit
        .iter()
        .map(|r| r.record().record_id.as_str())
        .collect();
    // The outcome of an eligible record.
    let outcome_of = |id: &str| -> DecisionOutcome {
        if let Some(rank) = rank_of.get(id) {
            return DecisionOutcome::Selected { rank: *rank };
        }
        if past.contains(id) {
            return DecisionOutcome::Dropped {
                reason: DropReason::SelectionLimit,
            };
        }
        DecisionOutcome::Dropped { reason: rest }
    };
    let decision = |record: &CheckedRecord, outcome: DecisionOutcome| {
        let record = record.record();
        MemoryDecision {
            record_id: record.record_id.clone(),
            kind: record.kind,
            outcome,
        }
    };
    let dropped_decision =
        |d: &Dropped| decision(&d.record, DecisionOutcome::Dropped { reason: d.reason });
    let eligible_decision = |r: &CheckedRecord| decision(r, outcome_of(&r.record().record_id));
    // Every decision, in record id order: the eligible and the dropped
    // records merged.
    let all = || -> Vec<MemoryDecision> {
        let mut out = Vec::with_capacity(set.records().len());
        let mut kept = pass.eligible.iter().peekable();
        let mut gone = pass.dropped.iter().peekable();
        loop {
            let eligible_first = match (kept.peek(), gone.peek()) {
                (Some(e), Some(d)) => e.key() < d.key(),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if eligible_first {
                out.extend(kept.next().map(|r| eligible_decision(r)));
            } else {
                out.extend(gone.next().map(dropped_decision));
            }
        }
        out
    };
    let usual = usual_outcome(counts.iter().map(|(reason, count)| (*reason, *count)));
    let listed: Vec<MemoryDecision> = match listing {
        Listing::Full => all(),
        Listing::CountsOnly => Vec::new(),
    };
    // A set read with its scopes' commitments commits to its decisions by
    // their exceptions alone (v5): the digest of which records were decided
    // on is then never computed.
    let scoped = !set.scope_commitments().is_empty();
    let decided = || -> Result<Option<&str>, SelectionError> {
        Ok(if scoped {
            None
        } else {
            Some(set.decided_sha256()?)
        })
    };
    let digest = if listing == Listing::Full {
        decisions_digest_with(decided()?, &listed)?
    } else if usual != Some(DecisionOutcome::Dropped { reason: rest }) {
        // Not the usual case of a read: hash the whole list.
        decisions_digest_with(decided()?, &all())?
    } else {
        // Every decision but those of the dropped, selected and past-limit
        // records is the usual one: only those are exceptions.
        let mut exceptions: Vec<MemoryDecision> = pass
            .dropped
            .iter()
            .map(dropped_decision)
            .chain(
                selected
                    .iter()
                    .chain(past_limit)
                    .map(|r| eligible_decision(r)),
            )
            .collect();
        exceptions.sort_unstable_by(|a, b| a.record_id.cmp(&b.record_id));
        super::decisions_digest_of(decided()?, usual, &exceptions)?
    };
    let (decisions_sha256, exceptions_sha256) = if scoped {
        (None, Some(digest))
    } else {
        (Some(digest), None)
    };
    let decision_counts = DecisionCounts {
        decided: set.records().len() as u64,
        selected: selected.len() as u64,
        dropped: counts
            .iter()
            .map(|(reason, count)| (reason.as_str().to_owned(), *count))
            .collect(),
    };
    // A set read with its scopes' commitments binds them in place of its
    // record set's digest (v5), which is then never computed.
    let record_set_sha256 = if !scoped {
        Some(set.record_set_sha256()?.to_owned())
    } else {
        None
    };
    let mut receipt = MemorySelectionReceipt {
        schema_version: crate::MEMORY_SCHEMA_VERSION,
        selector_release: ctx.selector_release.clone(),
        read_context_sha256,
        record_set_sha256,
        ordering,
        relevance_receipt_sha256,
        selected_record_ids: selected
            .iter()
            .map(|r| r.record().record_id.clone())
            .collect(),
        decision_counts,
        decisions_sha256,
        exceptions_sha256,
        scope_commitments: set.scope_commitments().to_vec(),
        receipt_sha256: String::new(),
    };
    receipt.receipt_sha256 = receipt.compute_digest()?;
    Ok(MemorySelection {
        receipt,
        decisions: listed,
    })
}
