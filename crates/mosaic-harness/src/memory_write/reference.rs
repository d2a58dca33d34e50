//! The reference write of chapter 8: one consented, source-supported
//! principal preference ("For alerts, keep the first response concise."),
//! with every independent input the gate needs. Used by the lab example,
//! the golden vectors and downstream crates' tests; every digest in it is
//! derived from a readable label with [`label_sha256`].

use std::collections::BTreeMap;

use super::{
    ConflictObservation, ConflictRelation, ConsentReceipt, MemoryPurpose, MemoryWriteError,
    MemoryWriteGrant, MemoryWriteInput, MemoryWritePolicy, MemoryWriteProposal, SourceJudgment,
    StructuredClaim, consent_receipt_sha256,
};
use crate::canonical::sha256_hex;
use crate::record::{MemoryKind, MemorySource, MemorySubject};

/// The tenant of the reference write.
pub const TENANT_ID: &str = "tenant-acme";
/// The principal who states (and consents to) the preference.
pub const PRINCIPAL_ID: &str = "principal-vinay";
/// 2026-07-29T00:00:00Z, the proposal instant.
pub const PROPOSED_AT_UNIX_MS: u64 = 1_785_283_200_000;
/// One day in milliseconds.
pub const DAY_MS: u64 = 86_400_000;
/// The policy's maximum TTL: 180 days.
pub const MAX_TTL_MS: u64 = 180 * DAY_MS;
/// The supporting source.
pub const SOURCE_ID: &str = "source-user-confirmation";
/// The proposal's one structured claim.
pub const CLAIM_ID: &str = "claim-alerts-concise";

/// `SHA-256(label)` as lowercase hex: a readable stand-in for a real digest.
pub fn label_sha256(label: &str) -> String {
    sha256_hex(label.as_bytes())
}

/// The claim `principal:principal-vinay response_detail_preference <object>`
/// under `surface=<surface>, locale=en-CA`, valid from the proposal day.
pub fn preference_claim(claim_id: &str, surface: &str, object: &str) -> StructuredClaim {
    StructuredClaim {
        claim_id: claim_id.to_owned(),
        subject: format!("principal:{PRINCIPAL_ID}"),
        predicate: "response_detail_preference".to_owned(),
        object: object.to_owned(),
        qualifiers: BTreeMap::from([
            ("locale".to_owned(), "en-CA".to_owned()),
            ("surface".to_owned(), surface.to_owned()),
        ]),
        valid_from_unix_ms: PROPOSED_AT_UNIX_MS,
        valid_until_unix_ms: None,
        source_ids: vec![SOURCE_ID.to_owned()],
    }
}

/// The reference consent: the principal agreed to personalization.
pub fn consent() -> ConsentReceipt {
    ConsentReceipt {
        consent_id: "consent-vinay-personalization".to_owned(),
        tenant_id: TENANT_ID.to_owned(),
        policy_sha256: label_sha256("policy/memory-write/v3"),
        principal_id: PRINCIPAL_ID.to_owned(),
        purpose: MemoryPurpose::Personalization,
        ui_release: "consent-ui-2026.07".to_owned(),
        granted_at_unix_ms: PROPOSED_AT_UNIX_MS - 60_000,
        revoked_at_unix_ms: None,
    }
}

/// The accepted baseline input.
///
/// Its one conflict observation is a paraphrase detector's false alarm: it
/// reports the existing "detailed tutorials" preference as `contradicts`,
/// but the structured claims differ in `surface`, so the gate decides
/// `unrelated` (narrow conflict reasoning).
pub fn baseline_input() -> Result<MemoryWriteInput, MemoryWriteError> {
    let policy_sha256 = label_sha256("policy/memory-write/v3");
    let consent = consent();
    let source = MemorySource {
        source_id: SOURCE_ID.to_owned(),
        content_sha256: label_sha256("source/user-confirmation/content"),
        provenance_sha256: label_sha256("source/user-confirmation/provenance"),
        locator_sha256: label_sha256("source/user-confirmation/locator"),
    };
    let proposal = MemoryWriteProposal {
        proposal_id: "proposal-0001".to_owned(),
        record_id: "memory-vinay-alerts-concise".to_owned(),
        kind: MemoryKind::Semantic,
        purpose: MemoryPurpose::Personalization,
        tenant_id: TENANT_ID.to_owned(),
        policy_sha256: policy_sha256.clone(),
        subject: MemorySubject::Principal {
            principal_id: PRINCIPAL_ID.to_owned(),
        },
        content_sha256: label_sha256("For alerts, keep the first response concise."),
        provenance_sha256: label_sha256("proposal-0001/provenance"),
        token_count: 9,
        token_counter_release: "tokenizer-o200k-v1".to_owned(),
        proposed_at_unix_ms: PROPOSED_AT_UNIX_MS,
        requested_expiry_unix_ms: PROPOSED_AT_UNIX_MS + 90 * DAY_MS,
        writer_release: "memory-extractor-2026.07".to_owned(),
        sources: vec![source.clone()],
        summary: None,
        consent_receipt_sha256: Some(consent_receipt_sha256(&consent)?),
        procedure_evaluation: None,
        supersedes_record_id: None,
        claims: vec![preference_claim(CLAIM_ID, "alerts", "concise")],
        metadata: None,
        address: None,
    };
    Ok(MemoryWriteInput {
        policy: MemoryWritePolicy {
            tenant_id: TENANT_ID.to_owned(),
            policy_sha256: policy_sha256.clone(),
            allowed_kinds: vec![
                MemoryKind::Working,
                MemoryKind::Episodic,
                MemoryKind::Semantic,
                MemoryKind::Procedural,
            ],
            max_ttl_ms: MAX_TTL_MS,
            require_consent_for_principal_semantic: true,
            minimum_procedure_eval_cases: 20,
        },
        grant: MemoryWriteGrant {
            grant_id: "grant-vinay-session-42".to_owned(),
            tenant_id: TENANT_ID.to_owned(),
            policy_sha256,
            principal_id: PRINCIPAL_ID.to_owned(),
            allowed_kinds: vec![MemoryKind::Episodic, MemoryKind::Semantic],
            allowed_purposes: vec![MemoryPurpose::Personalization],
            allowed_workspace_ids: vec!["workspace-incidents".to_owned()],
            allowed_run_ids: Vec::new(),
            expires_at_unix_ms: PROPOSED_AT_UNIX_MS + 3_600_000,
        },
        judgments: vec![SourceJudgment {
            source_id: SOURCE_ID.to_owned(),
            claim_id: Some(CLAIM_ID.to_owned()),
            source_content_sha256: source.content_sha256,
            supports_proposal: true,
            verifier_release: "support-verifier-2026.06".to_owned(),
            judgment_sha256: label_sha256("judgment/support-verifier-2026.06/claim-alerts-concise"),
        }],
        adjudications: Vec::new(),
        consent: Some(consent),
        conflicts: vec![ConflictObservation {
            observation_id: "observation-tutorials".to_owned(),
            existing_record_id: "memory-vinay-tutorials-detailed".to_owned(),
            relation: ConflictRelation::Contradicts,
            detector_release: "paraphrase-detector-2026.05".to_owned(),
            existing_claim: Some(preference_claim(
                "claim-tutorials-detailed",
                "tutorials",
                "detailed",
            )),
        }],
        procedure_evaluation: None,
        proposal,
    })
}
