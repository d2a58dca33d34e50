//! A write as the store receives it, and what the store decided.

use mosaic_harness::canonical::{CanonicalError, domain_digest};
use mosaic_harness::memory_write::{
    Adjudication, ConflictObservation, MemoryWriteProposal, MemoryWriteReceipt,
    MemoryWriteViolation, ProcedureEvaluation, SourceJudgment,
};
use serde::{Deserialize, Serialize};

use super::WRITE_REQUEST_DOMAIN;

/// What happens to a derived record (summary) when a source is revoked.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DerivedAction {
    /// Revoke the derived record too (transitively), in the same transaction.
    Revoke,
    /// Quarantine it (unreadable) and open a review case.
    Quarantine,
}

/// One proposal plus the independent inputs the caller obtained, and the
/// exact content bytes. Policy, grant and consent are *not* here: the store
/// re-reads them inside the write transaction.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    /// The authenticated tenant (selects the policy). Comes from
    /// authentication, never from the proposal body.
    pub tenant_id: String,
    /// The authenticated writing principal (selects the grant). Comes from
    /// authentication, never from the proposal body.
    pub principal_id: String,
    /// The untrusted proposal. Its `proposed_at_unix_ms` is overwritten with
    /// `now_unix_ms` before the gate runs.
    pub proposal: MemoryWriteProposal,
    /// The content whose SHA-256 the proposal names.
    pub content: String,
    /// Independent source judgments.
    pub judgments: Vec<SourceJudgment>,
    /// Independent adjudications of verifier disagreements.
    pub adjudications: Vec<Adjudication>,
    /// Conflict retrieval results.
    pub conflicts: Vec<ConflictObservation>,
    /// Held-out evaluation result for a procedure candidate.
    pub procedure_evaluation: Option<ProcedureEvaluation>,
    /// Existing records this one is derived from (a summary's inputs). Each
    /// must also be a declared source (`source_id == record_id`).
    pub derived_from: Vec<String>,
    /// For a supersession: the line generation the writer observed for the
    /// superseded record. The store refuses with
    /// [`crate::StoreError::StaleGeneration`] if the line moved on.
    pub expected_line_generation: Option<u64>,
    /// The decision instant from the caller's clock.
    pub now_unix_ms: u64,
    /// What the caller keeps beside the record when the proposal is
    /// accepted, committed in this same transaction (not part of the
    /// idempotency identity: a replay writes nothing).
    #[serde(
        default,
        skip_serializing_if = "crate::intake::KeptWithRecord::is_empty"
    )]
    pub kept: crate::intake::KeptWithRecord,
}

#[derive(Serialize)]
struct RequestIdentity<'a> {
    tenant_id: &'a str,
    principal_id: &'a str,
    proposal: &'a MemoryWriteProposal,
    judgments: Vec<&'a SourceJudgment>,
    adjudications: Vec<&'a Adjudication>,
    conflicts: Vec<&'a ConflictObservation>,
    procedure_evaluation: &'a Option<ProcedureEvaluation>,
    derived_from: Vec<&'a String>,
    expected_line_generation: Option<u64>,
}

impl WriteRequest {
    /// The idempotency identity: everything except the decision instant (a
    /// retry happens later) and the content (bound through
    /// `proposal.content_sha256`). Unordered inputs are sorted by identity.
    pub fn identity_sha256(&self) -> Result<String, CanonicalError> {
        let mut proposal = self.proposal.clone();
        proposal.proposed_at_unix_ms = 0;
        let mut judgments: Vec<_> = self.judgments.iter().collect();
        judgments.sort_by(|a, b| a.judgment_sha256.cmp(&b.judgment_sha256));
        let mut adjudications: Vec<_> = self.adjudications.iter().collect();
        adjudications.sort_by(|a, b| a.adjudication_id.cmp(&b.adjudication_id));
        let mut conflicts: Vec<_> = self.conflicts.iter().collect();
        conflicts.sort_by(|a, b| a.observation_id.cmp(&b.observation_id));
        let mut derived_from: Vec<_> = self.derived_from.iter().collect();
        derived_from.sort();
        domain_digest(
            WRITE_REQUEST_DOMAIN,
            &RequestIdentity {
                tenant_id: &self.tenant_id,
                principal_id: &self.principal_id,
                proposal: &proposal,
                judgments,
                adjudications,
                conflicts,
                procedure_evaluation: &self.procedure_evaluation,
                derived_from,
                expected_line_generation: self.expected_line_generation,
            },
        )
    }
}

/// What the store decided for one proposal.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum WriteDecision {
    /// Committed; the record is publishing (or active when no index is
    /// required) at this line generation.
    Accepted {
        /// The new record.
        record_id: String,
        /// Its line (subject/claim lineage) identity.
        line_id: String,
        /// Its generation within the line (1 for a new line).
        line_generation: u64,
    },
    /// Refused by the gate; only the rejection receipt (and a review case for
    /// a conflict) was stored.
    Rejected {
        /// Every violation.
        violations: Vec<MemoryWriteViolation>,
        /// Review cases opened for duplicate/contradiction conflicts.
        review_case_ids: Vec<String>,
    },
}

/// The result of [`crate::Store::write`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The proposal decided.
    pub proposal_id: String,
    /// The decision.
    pub decision: WriteDecision,
    /// The gate's receipt, as stored.
    pub receipt: MemoryWriteReceipt,
    /// True when this is a retry that returned the stored decision.
    pub replayed: bool,
}

/// What [`Store::write_all_or_nothing`](crate::Store::write_all_or_nothing) did.
#[derive(Clone, Debug, PartialEq)]
pub enum AllOrNothing {
    /// Every request was accepted and committed together.
    Committed(Vec<WriteOutcome>),
    /// The gate refused the request at `index`: nothing was written.
    Refused {
        /// Its place in the batch.
        index: usize,
        /// The gate's refusal (not stored).
        outcome: Box<WriteOutcome>,
    },
}

impl WriteOutcome {
    /// True when accepted.
    pub fn is_accepted(&self) -> bool {
        matches!(self.decision, WriteDecision::Accepted { .. })
    }
}
