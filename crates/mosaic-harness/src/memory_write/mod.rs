//! The verified write gate of chapter 8.
//!
//! *Model proposes memory ≠ product writes memory.* A [`MemoryWriteProposal`]
//! is untrusted: nothing in it becomes true because the proposer filled it
//! in. [`evaluate_memory_write`] decides it against independently obtained
//! inputs (current [`MemoryWritePolicy`], the principal's
//! [`MemoryWriteGrant`], exact [`SourceJudgment`]s and [`Adjudication`]s, a
//! [`ConsentReceipt`], [`ConflictObservation`]s and a held-out
//! [`ProcedureEvaluation`]) and returns a [`GateOutcome`]: either a verified
//! [`MemoryRecord`] or every [`MemoryWriteViolation`], plus a
//! [`MemoryWriteReceipt`] that [`verify_memory_write_receipt`] recomputes.
//!
//! The gate is pure: no I/O, clock, randomness or floats. The proposal's own
//! `proposed_at_unix_ms` is the decision instant; the caller (the store)
//! must stamp it from its clock, never take it from the proposer.
//!
//! Layers, in the order violations are listed:
//!
//! 1. **binding**: proposal and grant name the policy's tenant and policy
//!    digest (reported separately per input);
//! 2. **authority**: the grant is valid at proposal time (half-open:
//!    expired when `proposed_at >= expires_at`), and the kind is allowed by
//!    policy ∩ grant; the grant also bounds purpose and subject;
//! 3. **purpose and subject**: kind permits subject (chapter 7) and purpose
//!    fits both (see [`MemoryPurpose::permits`]);
//! 4. **retention**: `0 < requested_expiry - proposed_at <= max_ttl`;
//! 5. **evidence**: exactly one usable judgment per `(source, claim)` unit
//!    from each independent verifier; missing coverage is
//!    `incomplete_evidence`, an explicit negative `unsupported_evidence`;
//!    disagreeing verifiers need a bound [`Adjudication`];
//! 6. **consent** for principal semantic memory when policy requires it,
//!    bound to tenant, policy, principal and purpose, not revoked;
//! 7. **conflicts**: duplicates and contradictions reject; supersession
//!    needs a matching independent observation;
//! 8. **procedural evaluation**: at least the policy minimum of cases, all
//!    passed, zero severe regressions;
//! 9. **revalidation**: the built record passes `MemoryRecord::validate` and
//!    the read selector's [`eligibility`](crate::memory_scope::eligibility)
//!    for its own subject at proposal time.
//!
//! Claims are all-or-nothing: one unsupported claim rejects the whole write
//! and the violation names that claim.

mod claims;
mod gate;
mod receipt;
pub mod reference;
mod violation;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::record::{
    MemoryAddress, MemoryKind, MemoryMetadata, MemoryRecord, MemorySource, MemorySubject,
    SummaryDescriptor,
};

pub use claims::{
    ConflictRelation, StructuredClaim, claim_index_keys, claim_key_component, claim_relation,
};
pub use gate::evaluate_memory_write;
pub use receipt::{
    ADJUDICATIONS_DOMAIN, CONFLICTS_DOMAIN, CONSENT_DOMAIN, DECISION_DOMAIN, GRANT_DOMAIN,
    JUDGMENTS_DOMAIN, MEMORY_WRITE_GATE_RELEASE, MemoryWriteReceipt, POLICY_DOMAIN,
    PROCEDURE_EVALUATION_DOMAIN, PROPOSAL_DOMAIN, RECEIPT_DOMAIN, adjudications_sha256,
    conflicts_sha256, consent_receipt_sha256, decision_sha256, grant_input_sha256,
    judgments_sha256, policy_input_sha256, procedure_evaluation_sha256, proposal_input_sha256,
    verify_memory_write_receipt,
};
pub use violation::{MemoryWriteError, MemoryWriteViolation, ReceiptVerifyError};

/// Most claims one proposal may carry.
pub const MAX_CLAIMS: usize = 32;
/// Most judgments one evaluation accepts.
pub const MAX_JUDGMENTS: usize = 512;
/// Most adjudications one evaluation accepts.
pub const MAX_ADJUDICATIONS: usize = 128;
/// Most conflict observations one evaluation accepts.
pub const MAX_CONFLICTS: usize = 256;

/// Why a memory is written. Purpose controls consent, retention and use.
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
pub enum MemoryPurpose {
    /// State needed to continue one run.
    RunContinuity,
    /// A principal's own preferences and history.
    Personalization,
    /// Shared knowledge of a workspace.
    WorkspaceKnowledge,
    /// A candidate procedure for a workspace.
    ProcedureImprovement,
}

impl MemoryPurpose {
    /// Whether this purpose may produce a record of `kind` about `subject`:
    ///
    /// * run continuity → working memory of a run;
    /// * personalization → episodic or semantic memory of a principal
    ///   (episodes may be workspace-scoped);
    /// * workspace knowledge → semantic memory of a workspace, or episodes of
    ///   a principal within a workspace;
    /// * procedure improvement → procedural memory of a workspace procedure.
    pub fn permits(self, kind: MemoryKind, subject: &MemorySubject) -> bool {
        use MemoryKind as K;
        use MemorySubject as S;
        match self {
            MemoryPurpose::RunContinuity => matches!((kind, subject), (K::Working, S::Run { .. })),
            MemoryPurpose::Personalization => matches!(
                (kind, subject),
                (K::Semantic, S::Principal { .. })
                    | (K::Episodic, S::Principal { .. })
                    | (K::Episodic, S::PrincipalInWorkspace { .. })
            ),
            MemoryPurpose::WorkspaceKnowledge => matches!(
                (kind, subject),
                (K::Semantic, S::Workspace { .. }) | (K::Episodic, S::PrincipalInWorkspace { .. })
            ),
            MemoryPurpose::ProcedureImprovement => {
                matches!((kind, subject), (K::Procedural, S::Procedure { .. }))
            }
        }
    }
}

/// Held-out evaluation of a procedure candidate.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcedureEvaluation {
    /// Digest of the held-out suite.
    pub suite_sha256: String,
    /// The candidate release evaluated.
    pub candidate_release: String,
    /// Cases passed (at most `total_cases`).
    pub passed_cases: u32,
    /// Cases evaluated.
    pub total_cases: u32,
    /// Severe regressions found.
    pub severe_regressions: u32,
}

/// A candidate memory. Untrusted: every field is checked against
/// independent inputs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryWriteProposal {
    /// Identity of this proposal.
    pub proposal_id: String,
    /// Identity the record will have if accepted.
    pub record_id: String,
    /// The memory job.
    pub kind: MemoryKind,
    /// Why it is written.
    pub purpose: MemoryPurpose,
    /// Tenant the proposal claims.
    pub tenant_id: String,
    /// Policy the proposal claims to be made under.
    pub policy_sha256: String,
    /// Who or what the memory is about.
    pub subject: MemorySubject,
    /// SHA-256 of the exact content bytes.
    pub content_sha256: String,
    /// SHA-256 of the content's provenance.
    pub provenance_sha256: String,
    /// Tokens of the content under `token_counter_release`.
    pub token_count: u32,
    /// The token counter.
    pub token_counter_release: String,
    /// Decision instant, stamped by the caller's clock.
    pub proposed_at_unix_ms: u64,
    /// Requested exclusive expiry.
    pub requested_expiry_unix_ms: u64,
    /// The writer (model, extractor, form, import job) that proposed it.
    pub writer_release: String,
    /// Declared evidence; never empty, ids unique.
    pub sources: Vec<MemorySource>,
    /// Present when the content is a lossy summary.
    pub summary: Option<SummaryDescriptor>,
    /// Digest of the consent receipt the proposal relies on
    /// (see [`consent_receipt_sha256`]).
    pub consent_receipt_sha256: Option<String>,
    /// The proposer's copy of the procedure evaluation; must equal the
    /// independently supplied one.
    pub procedure_evaluation: Option<ProcedureEvaluation>,
    /// A record this proposal replaces (immutable supersession).
    pub supersedes_record_id: Option<String>,
    /// The structured claims the content asserts; empty when the proposal is
    /// judged as a whole.
    pub claims: Vec<StructuredClaim>,
    /// Application metadata the record will carry (absent: encoded as
    /// before metadata existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
    /// Application address the record will have (absent: unaddressed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<MemoryAddress>,
}

/// Tenant-wide write constraints.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryWritePolicy {
    /// The tenant.
    pub tenant_id: String,
    /// Identity of the current policy document.
    pub policy_sha256: String,
    /// Kinds the tenant may write.
    pub allowed_kinds: Vec<MemoryKind>,
    /// Longest TTL allowed.
    pub max_ttl_ms: u64,
    /// Whether principal semantic memory needs a consent receipt.
    pub require_consent_for_principal_semantic: bool,
    /// Fewest held-out cases a procedure needs.
    pub minimum_procedure_eval_cases: u32,
}

/// What the current principal may write. Cannot widen the policy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryWriteGrant {
    /// Identity of the grant.
    pub grant_id: String,
    /// Tenant the grant was issued in.
    pub tenant_id: String,
    /// Policy the grant was issued under.
    pub policy_sha256: String,
    /// The principal the grant belongs to; principal subjects must be them.
    pub principal_id: String,
    /// Kinds the principal may write.
    pub allowed_kinds: Vec<MemoryKind>,
    /// Purposes the principal may write for.
    pub allowed_purposes: Vec<MemoryPurpose>,
    /// Workspaces whose workspace, procedure or principal-in-workspace
    /// subjects the principal may write.
    pub allowed_workspace_ids: Vec<String>,
    /// Runs whose working state the principal may write.
    pub allowed_run_ids: Vec<String>,
    /// Exclusive expiry: the grant is expired when `proposed_at >= expires_at`.
    pub expires_at_unix_ms: u64,
}

/// An independent verifier's judgment of one source (for one claim, when the
/// proposal is split into claims).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceJudgment {
    /// The judged source.
    pub source_id: String,
    /// The claim judged; `None` when the proposal has no claims.
    pub claim_id: Option<String>,
    /// SHA-256 of the exact bytes the verifier read.
    pub source_content_sha256: String,
    /// Whether the source supports the proposition.
    pub supports_proposal: bool,
    /// The verifier; must not be the writer.
    pub verifier_release: String,
    /// Identity of this judgment (unique across the input).
    pub judgment_sha256: String,
}

/// An independent resolution of a verifier disagreement on one
/// `(source, claim)` unit, bound to exactly the disputed judgments.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Adjudication {
    /// Identity of the adjudication.
    pub adjudication_id: String,
    /// The disputed source.
    pub source_id: String,
    /// The disputed claim, if any.
    pub claim_id: Option<String>,
    /// Exactly the judgments of that unit (any order).
    pub disputed_judgment_sha256: Vec<String>,
    /// The resolution.
    pub supports_proposal: bool,
    /// The adjudicator; neither a disputing verifier nor the writer.
    pub adjudicator_release: String,
}

/// A principal's consent to be remembered for one purpose.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsentReceipt {
    /// Identity of the consent.
    pub consent_id: String,
    /// The tenant it was given in.
    pub tenant_id: String,
    /// The policy it was given under.
    pub policy_sha256: String,
    /// Who consented.
    pub principal_id: String,
    /// What for.
    pub purpose: MemoryPurpose,
    /// The UI release that presented the request.
    pub ui_release: String,
    /// When consent was given (inclusive).
    pub granted_at_unix_ms: u64,
    /// When consent was withdrawn (inclusive); proposals at or after it fail.
    pub revoked_at_unix_ms: Option<u64>,
}

/// What conflict retrieval found about one existing record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConflictObservation {
    /// Identity of the observation (unique across the input).
    pub observation_id: String,
    /// The existing record.
    pub existing_record_id: String,
    /// The detector's relation. Used as is when `existing_claim` is `None`;
    /// `supersedes` is always taken as stated.
    pub relation: ConflictRelation,
    /// The detector.
    pub detector_release: String,
    /// The existing record's structured claim, when it has one. The gate
    /// then decides the relation itself with [`claim_relation`] against
    /// every proposed claim: structured keys come before paraphrase.
    pub existing_claim: Option<StructuredClaim>,
}

/// Everything the gate decides on. Only `proposal` comes from the proposer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryWriteInput {
    /// Current tenant policy.
    pub policy: MemoryWritePolicy,
    /// The untrusted proposal.
    pub proposal: MemoryWriteProposal,
    /// The authenticated principal's grant.
    pub grant: MemoryWriteGrant,
    /// Independent source judgments (any order).
    pub judgments: Vec<SourceJudgment>,
    /// Independent resolutions of verifier disagreements (any order).
    pub adjudications: Vec<Adjudication>,
    /// The consent receipt from the consent store, if any.
    pub consent: Option<ConsentReceipt>,
    /// Conflict retrieval results (any order).
    pub conflicts: Vec<ConflictObservation>,
    /// The evaluation harness's result for a procedure candidate.
    pub procedure_evaluation: Option<ProcedureEvaluation>,
}

/// The gate's decision: a verified record, or every reason it was refused.
///
/// The shape is the spec's; a decision is built once per write, so the
/// size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum MemoryWriteDecision {
    /// Every check passed; the record is `verified`.
    Accepted {
        /// The record to persist.
        record: MemoryRecord,
    },
    /// At least one check failed; nothing may be persisted.
    Rejected {
        /// Every violation, sorted and deduplicated.
        violations: Vec<MemoryWriteViolation>,
    },
}

impl MemoryWriteDecision {
    /// `"accepted"` or `"rejected"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            MemoryWriteDecision::Accepted { .. } => "accepted",
            MemoryWriteDecision::Rejected { .. } => "rejected",
        }
    }

    /// The violations of a rejection; empty when accepted.
    pub fn violations(&self) -> &[MemoryWriteViolation] {
        match self {
            MemoryWriteDecision::Accepted { .. } => &[],
            MemoryWriteDecision::Rejected { violations } => violations,
        }
    }
}

/// The gate's output and proof token: its fields are private, so only
/// [`evaluate_memory_write`] can produce one, and a store that takes a
/// `GateOutcome` cannot be handed an unchecked record. It serializes (for
/// logs and reports) but deliberately does not deserialize.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct GateOutcome {
    decision: MemoryWriteDecision,
    receipt: MemoryWriteReceipt,
}

impl GateOutcome {
    /// The decision.
    pub fn decision(&self) -> &MemoryWriteDecision {
        &self.decision
    }

    /// The receipt binding the decision to its inputs.
    pub fn receipt(&self) -> &MemoryWriteReceipt {
        &self.receipt
    }

    /// The verified record, when accepted.
    pub fn accepted_record(&self) -> Option<&MemoryRecord> {
        match &self.decision {
            MemoryWriteDecision::Accepted { record } => Some(record),
            MemoryWriteDecision::Rejected { .. } => None,
        }
    }

    /// Decision and receipt, by value.
    pub fn into_parts(self) -> (MemoryWriteDecision, MemoryWriteReceipt) {
        (self.decision, self.receipt)
    }
}
