//! Typed rejection reasons and execution errors.

use serde::{Deserialize, Serialize};

use super::MemoryPurpose;
use crate::canonical::CanonicalError;
use crate::memory_scope::DropReason;
use crate::record::{InvalidField, MemoryKind};

/// Why a well-formed proposal was rejected. A rejected decision lists every
/// violation found, sorted by this type's `Ord` (declaration order, then
/// fields) and deduplicated, so the list is stable across input orders.
///
/// The declaration order follows the gate's layers: binding, authority,
/// purpose and subject, retention, evidence, consent, conflicts, procedural
/// evaluation, and the final revalidation of the built record.
///
/// Variants without data are written `Name {}` so that strict decoding
/// rejects unknown fields for them too (serde ignores extra members of an
/// internally tagged unit variant).
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(tag = "violation", rename_all = "snake_case", deny_unknown_fields)]
pub enum MemoryWriteViolation {
    /// The proposal names another tenant than the policy.
    ProposalTenantMismatch {
        /// The proposal's tenant.
        proposal_tenant_id: String,
    },
    /// The grant was issued for another tenant than the policy's.
    GrantTenantMismatch {
        /// The grant's tenant.
        grant_tenant_id: String,
    },
    /// The proposal was made under another (stale) policy.
    ProposalPolicyMismatch {
        /// The policy digest the proposal names.
        proposal_policy_sha256: String,
    },
    /// The grant was issued under another (stale) policy.
    GrantPolicyMismatch {
        /// The policy digest the grant names.
        grant_policy_sha256: String,
    },
    /// The grant is not valid at proposal time (`proposed_at >= expires_at`).
    GrantExpired {
        /// The grant's exclusive expiry.
        expires_at_unix_ms: u64,
    },
    /// The policy does not allow this kind for the tenant.
    KindNotAllowedByPolicy {
        /// The proposed kind.
        kind: MemoryKind,
    },
    /// The grant does not allow this kind for the principal.
    KindNotAllowedByGrant {
        /// The proposed kind.
        kind: MemoryKind,
    },
    /// The grant does not allow this purpose.
    PurposeNotGranted {
        /// The proposed purpose.
        purpose: MemoryPurpose,
    },
    /// The subject is outside the grant's bounds (another principal, or a
    /// workspace or run the grant does not list).
    SubjectOutsideGrant {
        /// The subject key.
        subject: String,
    },
    /// The subject shape is not permitted for the kind (chapter 7).
    KindSubjectMismatch {
        /// The proposed kind.
        kind: MemoryKind,
        /// The subject key.
        subject: String,
    },
    /// The purpose is not compatible with the kind and subject.
    PurposeIncompatible {
        /// The proposed purpose.
        purpose: MemoryPurpose,
        /// The proposed kind.
        kind: MemoryKind,
        /// The subject key.
        subject: String,
    },
    /// `requested_expiry <= proposed_at`: the TTL is not positive.
    TtlNotPositive {},
    /// The TTL exceeds the policy maximum.
    TtlExceedsPolicy {
        /// `requested_expiry - proposed_at`.
        ttl_ms: u64,
        /// The policy maximum.
        max_ttl_ms: u64,
    },
    /// A judgment names a source the proposal does not declare.
    UnknownSource {
        /// The judgment.
        judgment_sha256: String,
        /// The unknown source.
        source_id: String,
    },
    /// A judgment names a claim the proposal does not declare.
    UnknownClaim {
        /// The judgment.
        judgment_sha256: String,
        /// The unknown claim.
        claim_id: String,
    },
    /// A judgment judges a known source for a claim that does not rest on it
    /// (or judges the whole proposal when it is split into claims).
    JudgmentOutsideCoverage {
        /// The judgment.
        judgment_sha256: String,
    },
    /// A judgment judged other bytes than the declared source content.
    SourceDigestMismatch {
        /// The judgment.
        judgment_sha256: String,
    },
    /// A judgment was made by the writer release itself.
    VerifierNotIndependent {
        /// The judgment.
        judgment_sha256: String,
    },
    /// One verifier release judged the same source (and claim) twice.
    DuplicateJudgment {
        /// The source.
        source_id: String,
        /// The claim, when the proposal is split into claims.
        claim_id: Option<String>,
        /// The repeating verifier.
        verifier_release: String,
    },
    /// Verification did not finish: no usable judgment for this source.
    IncompleteEvidence {
        /// The uncovered source.
        source_id: String,
        /// The claim, when the proposal is split into claims.
        claim_id: Option<String>,
    },
    /// Verification finished and did not support the proposition.
    UnsupportedEvidence {
        /// The source.
        source_id: String,
        /// The unsupported claim, when the proposal is split into claims.
        claim_id: Option<String>,
    },
    /// Independent verifier releases disagree and no bound adjudication
    /// resolves it.
    VerifierDisagreement {
        /// The disputed source.
        source_id: String,
        /// The claim, when the proposal is split into claims.
        claim_id: Option<String>,
    },
    /// An adjudication is not bound to exactly the disputed judgments, is not
    /// independent of them, or resolves no disagreement.
    AdjudicationMismatch {
        /// The adjudication.
        adjudication_id: String,
    },
    /// Consent is required (or referenced by the proposal) but not supplied.
    MissingConsent {},
    /// The proposal's consent digest does not name the supplied receipt.
    ConsentDigestMismatch {},
    /// The consent was given in another tenant.
    ConsentTenantMismatch {},
    /// The consent was given under another policy.
    ConsentPolicyMismatch {},
    /// The consent was given by another principal than the subject.
    ConsentPrincipalMismatch {},
    /// The consent covers another purpose.
    ConsentPurposeMismatch {},
    /// The consent was granted after the proposal.
    ConsentNotYetGranted {},
    /// The consent was withdrawn at or before proposal time.
    ConsentRevoked {
        /// The withdrawal instant.
        revoked_at_unix_ms: u64,
    },
    /// An existing record already uses the proposed record id.
    RecordIdInUse {
        /// The observation that found it.
        observation_id: String,
    },
    /// The proposal duplicates an existing record.
    DuplicateMemory {
        /// The observation.
        observation_id: String,
        /// The existing record.
        existing_record_id: String,
        /// The duplicating claim, when decided from structured claims.
        claim_id: Option<String>,
    },
    /// The proposal contradicts an existing record.
    Contradiction {
        /// The observation.
        observation_id: String,
        /// The existing record.
        existing_record_id: String,
        /// The contradicting claim, when decided from structured claims.
        claim_id: Option<String>,
    },
    /// The proposal supersedes a record but no independent observation
    /// confirms that relation for that record.
    SupersessionUnobserved {
        /// The record the proposal says it supersedes.
        record_id: String,
    },
    /// An observation says the proposal supersedes a record the proposal does
    /// not declare.
    UndeclaredSupersession {
        /// The observation.
        observation_id: String,
        /// The record observed as superseded.
        existing_record_id: String,
    },
    /// A procedural proposal without an independent held-out evaluation.
    MissingProcedureEvaluation {},
    /// A procedure evaluation supplied for a non-procedural proposal.
    UnexpectedProcedureEvaluation {},
    /// The proposal's evaluation differs from the independent one.
    ProcedureEvaluationMismatch {},
    /// Fewer evaluated cases than the policy minimum.
    InsufficientEvaluationCases {
        /// Cases evaluated.
        total_cases: u32,
        /// Policy minimum.
        minimum: u32,
    },
    /// Not every evaluated case passed.
    FailedEvaluationCases {
        /// Cases passed.
        passed_cases: u32,
        /// Cases evaluated.
        total_cases: u32,
    },
    /// The evaluation found severe regressions.
    SevereRegressions {
        /// How many.
        count: u32,
    },
    /// The built record failed `MemoryRecord::validate`.
    RecordInvalid {
        /// The problem found.
        problem: InvalidField,
    },
    /// The built record would not be readable by its own subject at
    /// proposal time under the read selector.
    RecordNotReadable {
        /// The read selector's drop reason.
        reason: DropReason,
    },
    /// A summary's `source_set_sha256` is not the digest of the source-set
    /// manifest of exactly the proposal's sources under the descriptor's
    /// summarizer release: it names a manifest listing other sources (one
    /// the record does not hold), another summarizer, or nothing at all.
    SummarySourceSetMismatch {
        /// The digest the proposal's own sources give.
        expected_source_set_sha256: String,
    },
}

impl MemoryWriteViolation {
    /// The name it is written under (its `violation` tag, such as
    /// `missing_consent`), what error messages, reports and counters name
    /// it by.
    pub fn code(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| Some(v.get("violation")?.as_str()?.to_owned()))
            .unwrap_or_else(|| "violation".to_owned())
    }
}

/// An execution error: the gate could not decide because the input is
/// malformed or cannot be hashed. No decision and no receipt exist.
///
/// Arithmetic: every integer is validated to be at most 2^53 - 1 first (else
/// [`MemoryWriteError::Malformed`] with `integer_out_of_range`: an
/// overflowing time is an execution error), so no sum of two inputs can wrap.
/// The TTL is computed with `checked_sub`; an expiry at or before the
/// proposal instant (where the subtraction would go negative) is the typed
/// violation [`MemoryWriteViolation::TtlNotPositive`], not an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryWriteError {
    /// Field-level problems (identifiers, digests, integer ranges, counts).
    #[error("malformed input: {}", join(problems))]
    Malformed {
        /// Every problem found, sorted.
        problems: Vec<InvalidField>,
    },
    /// Two inputs share one identity.
    #[error("duplicate {what} identity {id}")]
    DuplicateIdentity {
        /// The kind of input (`judgment`, `conflict_observation`, ...).
        what: &'static str,
        /// The repeated identity.
        id: String,
    },
    /// The inputs contradict themselves structurally.
    #[error("inconsistent input: {0}")]
    Inconsistent(String),
    /// More inputs of one kind than the gate accepts.
    #[error("too many {what}: {found} > {max}")]
    TooManyInputs {
        /// The kind of input.
        what: &'static str,
        /// How many were supplied.
        found: usize,
        /// The bound.
        max: usize,
    },
    /// Canonical encoding failed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

fn join(problems: &[InvalidField]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why a stored receipt does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiptVerifyError {
    /// The independent inputs could not be evaluated.
    #[error("inputs do not evaluate: {0}")]
    Inputs(#[from] MemoryWriteError),
    /// The stored receipt differs from the one recomputed from the inputs.
    #[error("receipt_mismatch: {}", fields.join(", "))]
    ReceiptMismatch {
        /// Every differing receipt field, in declaration order.
        fields: Vec<&'static str>,
    },
}

#[cfg(test)]
mod tests {
    use super::MemoryWriteViolation;

    #[test]
    fn a_violations_code_is_its_wire_tag() {
        assert_eq!(
            MemoryWriteViolation::MissingConsent {}.code(),
            "missing_consent"
        );
        let mismatch = MemoryWriteViolation::GrantTenantMismatch {
            grant_tenant_id: "t".into(),
        };
        assert_eq!(mismatch.code(), "grant_tenant_mismatch");
    }
}
