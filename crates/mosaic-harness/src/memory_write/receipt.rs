//! Write-side digests and the write receipt.
//!
//! Every digest is `SHA-256(domain_tag || 0x0A || canonical_json(value))`
//! (see [`crate::canonical`]). Exactly what each one covers:
//!
//! | digest | domain tag | canonical JSON of |
//! |---|---|---|
//! | `policy_input_sha256` | `mosaic.memory.write_policy.v1` | the [`MemoryWritePolicy`] as supplied |
//! | `proposal_input_sha256` | `mosaic.memory.write_proposal.v1` | the [`MemoryWriteProposal`] as supplied (its `sources` and `claims` in the proposer's order: they are part of what was proposed) |
//! | `grant_input_sha256` | `mosaic.memory.write_grant.v1` | the [`MemoryWriteGrant`] as supplied |
//! | `judgments_sha256` | `mosaic.memory.source_judgments.v1` | the array of [`SourceJudgment`]s sorted by `judgment_sha256` |
//! | `adjudications_sha256` | `mosaic.memory.adjudications.v1` | the array of [`Adjudication`]s sorted by `adjudication_id`, each with `disputed_judgment_sha256` sorted |
//! | `conflicts_sha256` | `mosaic.memory.conflict_observations.v1` | the array of [`ConflictObservation`]s sorted by `observation_id` |
//! | `consent_sha256` | `mosaic.memory.consent_receipt.v1` | the [`ConsentReceipt`] (absent → field `null`, no digest) |
//! | `procedure_evaluation_sha256` | `mosaic.memory.procedure_evaluation.v1` | the independent [`ProcedureEvaluation`] (absent → `null`) |
//! | `decision_sha256` | `mosaic.memory.write_decision.v1` | the [`MemoryWriteDecision`] (`{"decision":"accepted","record":{..}}` or `{"decision":"rejected","violations":[..]}`) |
//! | `receipt_sha256` | `mosaic.memory.write_receipt.v1` | the [`MemoryWriteReceipt`] object **without** its `receipt_sha256` member |
//!
//! Sorting by stable identity means input order never changes a digest;
//! identities are unique (duplicates are execution errors), so the sort is
//! total.

use serde::{Deserialize, Serialize};

use super::{
    Adjudication, ConflictObservation, ConsentReceipt, MemoryWriteDecision, MemoryWriteError,
    MemoryWriteGrant, MemoryWriteInput, MemoryWritePolicy, MemoryWriteProposal,
    ProcedureEvaluation, ReceiptVerifyError, SourceJudgment, evaluate_memory_write,
};
use crate::canonical::domain_digest;
use crate::record::MEMORY_SCHEMA_VERSION;

/// Release identity of this gate; recorded in every receipt.
pub const MEMORY_WRITE_GATE_RELEASE: &str = "mosaic.memory_write.gate.v1";
/// Domain tag of [`policy_input_sha256`].
pub const POLICY_DOMAIN: &str = "mosaic.memory.write_policy.v1";
/// Domain tag of [`proposal_input_sha256`].
pub const PROPOSAL_DOMAIN: &str = "mosaic.memory.write_proposal.v1";
/// Domain tag of [`grant_input_sha256`].
pub const GRANT_DOMAIN: &str = "mosaic.memory.write_grant.v1";
/// Domain tag of [`judgments_sha256`].
pub const JUDGMENTS_DOMAIN: &str = "mosaic.memory.source_judgments.v1";
/// Domain tag of [`adjudications_sha256`].
pub const ADJUDICATIONS_DOMAIN: &str = "mosaic.memory.adjudications.v1";
/// Domain tag of [`conflicts_sha256`].
pub const CONFLICTS_DOMAIN: &str = "mosaic.memory.conflict_observations.v1";
/// Domain tag of [`consent_receipt_sha256`].
pub const CONSENT_DOMAIN: &str = "mosaic.memory.consent_receipt.v1";
/// Domain tag of [`procedure_evaluation_sha256`].
pub const PROCEDURE_EVALUATION_DOMAIN: &str = "mosaic.memory.procedure_evaluation.v1";
/// Domain tag of [`decision_sha256`].
pub const DECISION_DOMAIN: &str = "mosaic.memory.write_decision.v1";
/// Domain tag of [`MemoryWriteReceipt::receipt_sha256`].
pub const RECEIPT_DOMAIN: &str = "mosaic.memory.write_receipt.v1";

/// Binds one decision to every input it was made from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryWriteReceipt {
    /// Must equal [`MEMORY_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The gate release that decided ([`MEMORY_WRITE_GATE_RELEASE`]).
    pub gate_release: String,
    /// The proposal decided on.
    pub proposal_id: String,
    /// The record id proposed (persisted only when accepted).
    pub record_id: String,
    /// `"accepted"` or `"rejected"` (also covered by `decision_sha256`).
    pub decision: String,
    /// See the module table.
    pub policy_input_sha256: String,
    /// See the module table.
    pub proposal_input_sha256: String,
    /// See the module table.
    pub grant_input_sha256: String,
    /// See the module table.
    pub judgments_sha256: String,
    /// See the module table.
    pub adjudications_sha256: String,
    /// See the module table.
    pub conflicts_sha256: String,
    /// See the module table.
    pub consent_sha256: Option<String>,
    /// See the module table.
    pub procedure_evaluation_sha256: Option<String>,
    /// See the module table.
    pub decision_sha256: String,
    /// Digest of every other field (domain [`RECEIPT_DOMAIN`]).
    pub receipt_sha256: String,
}

/// The receipt without its own digest: what `receipt_sha256` covers.
#[derive(Serialize)]
struct ReceiptBody<'a> {
    schema_version: u32,
    gate_release: &'a str,
    proposal_id: &'a str,
    record_id: &'a str,
    decision: &'a str,
    policy_input_sha256: &'a str,
    proposal_input_sha256: &'a str,
    grant_input_sha256: &'a str,
    judgments_sha256: &'a str,
    adjudications_sha256: &'a str,
    conflicts_sha256: &'a str,
    consent_sha256: Option<&'a str>,
    procedure_evaluation_sha256: Option<&'a str>,
    decision_sha256: &'a str,
}

impl MemoryWriteReceipt {
    /// Recomputes `receipt_sha256` from the other fields.
    pub fn compute_digest(&self) -> Result<String, MemoryWriteError> {
        let body = ReceiptBody {
            schema_version: self.schema_version,
            gate_release: &self.gate_release,
            proposal_id: &self.proposal_id,
            record_id: &self.record_id,
            decision: &self.decision,
            policy_input_sha256: &self.policy_input_sha256,
            proposal_input_sha256: &self.proposal_input_sha256,
            grant_input_sha256: &self.grant_input_sha256,
            judgments_sha256: &self.judgments_sha256,
            adjudications_sha256: &self.adjudications_sha256,
            conflicts_sha256: &self.conflicts_sha256,
            consent_sha256: self.consent_sha256.as_deref(),
            procedure_evaluation_sha256: self.procedure_evaluation_sha256.as_deref(),
            decision_sha256: &self.decision_sha256,
        };
        Ok(domain_digest(RECEIPT_DOMAIN, &body)?)
    }

    /// Builds the receipt for `decision` over `input`.
    pub(super) fn build(
        input: &MemoryWriteInput,
        decision: &MemoryWriteDecision,
    ) -> Result<Self, MemoryWriteError> {
        let mut receipt = MemoryWriteReceipt {
            schema_version: MEMORY_SCHEMA_VERSION,
            gate_release: MEMORY_WRITE_GATE_RELEASE.to_owned(),
            proposal_id: input.proposal.proposal_id.clone(),
            record_id: input.proposal.record_id.clone(),
            decision: decision.as_str().to_owned(),
            policy_input_sha256: policy_input_sha256(&input.policy)?,
            proposal_input_sha256: proposal_input_sha256(&input.proposal)?,
            grant_input_sha256: grant_input_sha256(&input.grant)?,
            judgments_sha256: judgments_sha256(&input.judgments)?,
            adjudications_sha256: adjudications_sha256(&input.adjudications)?,
            conflicts_sha256: conflicts_sha256(&input.conflicts)?,
            consent_sha256: input
                .consent
                .as_ref()
                .map(consent_receipt_sha256)
                .transpose()?,
            procedure_evaluation_sha256: input
                .procedure_evaluation
                .as_ref()
                .map(procedure_evaluation_sha256)
                .transpose()?,
            decision_sha256: decision_sha256(decision)?,
            receipt_sha256: String::new(),
        };
        receipt.receipt_sha256 = receipt.compute_digest()?;
        Ok(receipt)
    }

    /// Names of the fields that differ from `other`, in declaration order.
    fn differing_fields(&self, other: &MemoryWriteReceipt) -> Vec<&'static str> {
        let pairs: [(&'static str, bool); 15] = [
            (
                "schema_version",
                self.schema_version == other.schema_version,
            ),
            ("gate_release", self.gate_release == other.gate_release),
            ("proposal_id", self.proposal_id == other.proposal_id),
            ("record_id", self.record_id == other.record_id),
            ("decision", self.decision == other.decision),
            (
                "policy_input_sha256",
                self.policy_input_sha256 == other.policy_input_sha256,
            ),
            (
                "proposal_input_sha256",
                self.proposal_input_sha256 == other.proposal_input_sha256,
            ),
            (
                "grant_input_sha256",
                self.grant_input_sha256 == other.grant_input_sha256,
            ),
            (
                "judgments_sha256",
                self.judgments_sha256 == other.judgments_sha256,
            ),
            (
                "adjudications_sha256",
                self.adjudications_sha256 == other.adjudications_sha256,
            ),
            (
                "conflicts_sha256",
                self.conflicts_sha256 == other.conflicts_sha256,
            ),
            (
                "consent_sha256",
                self.consent_sha256 == other.consent_sha256,
            ),
            (
                "procedure_evaluation_sha256",
                self.procedure_evaluation_sha256 == other.procedure_evaluation_sha256,
            ),
            (
                "decision_sha256",
                self.decision_sha256 == other.decision_sha256,
            ),
            (
                "receipt_sha256",
                self.receipt_sha256 == other.receipt_sha256,
            ),
        ];
        pairs
            .into_iter()
            .filter_map(|(name, equal)| (!equal).then_some(name))
            .collect()
    }
}

/// `SHA-256("mosaic.memory.write_policy.v1\n" || canonical_json(policy))`.
pub fn policy_input_sha256(policy: &MemoryWritePolicy) -> Result<String, MemoryWriteError> {
    Ok(domain_digest(POLICY_DOMAIN, policy)?)
}

/// `SHA-256("mosaic.memory.write_proposal.v1\n" || canonical_json(proposal))`.
pub fn proposal_input_sha256(proposal: &MemoryWriteProposal) -> Result<String, MemoryWriteError> {
    Ok(domain_digest(PROPOSAL_DOMAIN, proposal)?)
}

/// `SHA-256("mosaic.memory.write_grant.v1\n" || canonical_json(grant))`.
pub fn grant_input_sha256(grant: &MemoryWriteGrant) -> Result<String, MemoryWriteError> {
    Ok(domain_digest(GRANT_DOMAIN, grant)?)
}

/// `SHA-256("mosaic.memory.source_judgments.v1\n" || canonical_json(sorted))`
/// with the judgments sorted by `judgment_sha256`.
pub fn judgments_sha256(judgments: &[SourceJudgment]) -> Result<String, MemoryWriteError> {
    let mut sorted: Vec<&SourceJudgment> = judgments.iter().collect();
    sorted.sort_by(|a, b| a.judgment_sha256.cmp(&b.judgment_sha256));
    Ok(domain_digest(JUDGMENTS_DOMAIN, &sorted)?)
}

/// `SHA-256("mosaic.memory.adjudications.v1\n" || canonical_json(sorted))`
/// with adjudications sorted by `adjudication_id` and each
/// `disputed_judgment_sha256` list sorted.
pub fn adjudications_sha256(adjudications: &[Adjudication]) -> Result<String, MemoryWriteError> {
    let mut sorted: Vec<Adjudication> = adjudications.to_vec();
    for adjudication in &mut sorted {
        adjudication.disputed_judgment_sha256.sort();
    }
    sorted.sort_by(|a, b| a.adjudication_id.cmp(&b.adjudication_id));
    Ok(domain_digest(ADJUDICATIONS_DOMAIN, &sorted)?)
}

/// `SHA-256("mosaic.memory.conflict_observations.v1\n" || canonical_json(sorted))`
/// with observations sorted by `observation_id`.
pub fn conflicts_sha256(conflicts: &[ConflictObservation]) -> Result<String, MemoryWriteError> {
    let mut sorted: Vec<&ConflictObservation> = conflicts.iter().collect();
    sorted.sort_by(|a, b| a.observation_id.cmp(&b.observation_id));
    Ok(domain_digest(CONFLICTS_DOMAIN, &sorted)?)
}

/// `SHA-256("mosaic.memory.consent_receipt.v1\n" || canonical_json(consent))`;
/// the value a proposal's `consent_receipt_sha256` must carry.
pub fn consent_receipt_sha256(consent: &ConsentReceipt) -> Result<String, MemoryWriteError> {
    Ok(domain_digest(CONSENT_DOMAIN, consent)?)
}

/// `SHA-256("mosaic.memory.procedure_evaluation.v1\n" || canonical_json(evaluation))`.
pub fn procedure_evaluation_sha256(
    evaluation: &ProcedureEvaluation,
) -> Result<String, MemoryWriteError> {
    Ok(domain_digest(PROCEDURE_EVALUATION_DOMAIN, evaluation)?)
}

/// `SHA-256("mosaic.memory.write_decision.v1\n" || canonical_json(decision))`.
pub fn decision_sha256(decision: &MemoryWriteDecision) -> Result<String, MemoryWriteError> {
    Ok(domain_digest(DECISION_DOMAIN, decision)?)
}

/// Re-runs the gate on independently supplied `input` and checks that
/// `stored` is exactly the receipt it produces. Any changed field (a
/// mutated proposal digest, a swapped decision, a forged `receipt_sha256`)
/// yields [`ReceiptVerifyError::ReceiptMismatch`] naming every differing field.
pub fn verify_memory_write_receipt(
    input: &MemoryWriteInput,
    stored: &MemoryWriteReceipt,
) -> Result<(), ReceiptVerifyError> {
    let outcome = evaluate_memory_write(input)?;
    let fields = outcome.receipt().differing_fields(stored);
    if fields.is_empty() {
        Ok(())
    } else {
        Err(ReceiptVerifyError::ReceiptMismatch { fields })
    }
}
