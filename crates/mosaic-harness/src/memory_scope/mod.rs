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
//!
//! What lives where: `context` (the read context, [`eligibility`] and
//! [`DropReason`]), `decision` (one decision per record and the digests of
//! a decision list), `receipt` (the selection receipt, binding the scopes'
//! commitments into it, [`SelectionError`]), `record_set` (checked records
//! and the sealed [`RecordSet`]), `select` (selection by kind and recency
//! or by relevance), `verify` (verifying a stored selection, and the
//! records a read decides on), `pass` (selection over a sealed set whose
//! eligibility was decided once), `chunked` (the shared chunks a set is
//! held in), `commitment` (scope commitments), `relevance` (the relevance
//! receipt), `supersession`, `handoff` (context allocation and rendering),
//! `manifest` (signed summary sources) and `clock`.

mod chunked;
mod clock;
mod commitment;
mod context;
mod decision;
mod handoff;
mod manifest;
mod pass;
mod receipt;
mod record_set;
mod relevance;
mod select;
mod supersession;
mod verify;

pub use chunked::{Chunked, Keyed};
pub use clock::{Clock, ManualClock};
pub use commitment::{
    ReadScope, SCOPE_BUCKET_DOMAIN, SCOPE_BUCKETS, SCOPE_ENTRY_DOMAIN, SCOPE_TREE_LEVELS,
    ScopeCommitment, ScopeCommitmentError, ScopeEntry, ScopeInclusionProof, bucket_hash, bucket_of,
    climb, empty_node, empty_scope_root, proof_from_parts, scope_inclusion_proof, scope_root,
    sibling_of, verify_scope_commitment, verify_scope_inclusion,
};
pub use context::{DropReason, MemoryReadContext, eligibility};
use decision::decided_digest;
pub use decision::{
    DecisionCounts, DecisionOutcome, MemoryDecision, SelectionOrdering, decisions_digest,
    exceptions_digest,
};
pub(crate) use decision::{decisions_digest_of, decisions_digest_with, usual_outcome};
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
pub use receipt::{
    MemorySelection, MemorySelectionReceipt, SelectionError, bind_scope_commitments,
    bind_scope_exceptions, bind_scope_roots,
};
pub use record_set::{CheckedRecord, RecordSet, record_set_digest};
pub(crate) use record_set::{check_all, check_inputs};
use record_set::{kind_recency_order, record_set_digest_sorted};
pub use relevance::{
    ELIGIBLE_ENTRIES_DOMAIN, ELIGIBLE_SET_DOMAIN, ELIGIBLE_SET_V3_DOMAIN, EligibleEntry,
    EligibleSet, Entries, EntryRef, RELEVANCE_RECEIPT_DOMAIN, RELEVANCE_RECEIPT_V2_DOMAIN,
    RankedResult, RelevanceError, RelevanceInput, RelevanceReceipt, SCORE_SCALE, ScoredCandidate,
    SealedEligibleSet, SealedEntries, eligible_set, eligible_set_checked, fixed_point_score,
    rank_relevance, scoped_set_digest, verify_relevance_receipt,
};
use select::select_ranked;
pub use select::{
    select_memory, select_memory_checked, select_memory_ranked, select_memory_ranked_checked,
    select_memory_ranked_scoped,
};
pub use supersession::SupersessionProblem;
pub use verify::{
    DecisionsVerifyError, SelectionVerifyError, kept_for_its_content, one_per_content,
    records_decided_on, verify_memory_selection, verify_selection_decisions,
    verify_selection_scopes,
};

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

#[cfg(test)]
mod tests;
