//! The selection receipt, the binding of the read scopes' commitments
//! into it, the selection result and the selection's execution error.

use serde::{Deserialize, Serialize};

use super::{
    DecisionCounts, DecisionOutcome, MemoryDecision, SELECTION_RECEIPT_DOMAIN,
    SELECTION_RECEIPT_V3_DOMAIN, SELECTION_RECEIPT_V4_DOMAIN, SELECTION_RECEIPT_V5_DOMAIN,
    ScopeCommitment, SelectionOrdering, SupersessionProblem, exceptions_digest,
};
#[cfg(doc)]
use super::{decisions_digest, scope_root};
use crate::canonical::{CanonicalError, domain_digest};
use crate::record::InvalidField;

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
