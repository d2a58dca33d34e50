//! Golden vectors for every write-side digest kind: reference input →
//! documented canonical bytes → SHA-256. The expected values live in
//! `tests/golden/memory_write.json`; an accidental encoding change fails
//! here. After an intentional change, regenerate with `UPDATE_GOLDEN=1 cargo
//! test -p mosaic-harness --test golden_memory_write` and review the diff.

use std::collections::BTreeMap;

use mosaic_harness::canonical::{domain_bytes, sha256_hex};
use mosaic_harness::memory_write::reference::{self, label_sha256};
use mosaic_harness::memory_write::{
    ADJUDICATIONS_DOMAIN, Adjudication, CONFLICTS_DOMAIN, CONSENT_DOMAIN, DECISION_DOMAIN,
    GRANT_DOMAIN, JUDGMENTS_DOMAIN, MemoryWriteDecision, MemoryWriteInput, MemoryWriteViolation,
    POLICY_DOMAIN, PROCEDURE_EVALUATION_DOMAIN, PROPOSAL_DOMAIN, ProcedureEvaluation,
    RECEIPT_DOMAIN, SourceJudgment, adjudications_sha256, conflicts_sha256, consent_receipt_sha256,
    decision_sha256, evaluate_memory_write, grant_input_sha256, judgments_sha256,
    policy_input_sha256, procedure_evaluation_sha256, proposal_input_sha256,
};
use serde_json::{Value, json};

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/memory_write.json"
);

/// The reference input with a second, reversed-order judgment so that the
/// sorted-array encoding is exercised.
fn input() -> MemoryWriteInput {
    let mut input = reference::baseline_input().expect("reference input");
    let mut second: SourceJudgment = input.judgments[0].clone();
    second.verifier_release = "support-verifier-2025.11".into();
    second.judgment_sha256 = label_sha256("judgment/second");
    input.judgments.insert(0, second);
    input
}

/// One vector: the exact bytes (when short enough to read), their length and
/// their SHA-256; `digest` is what the library function returned.
fn vector(bytes: Vec<u8>, digest: String, show_bytes: bool) -> Value {
    assert_eq!(
        sha256_hex(&bytes),
        digest,
        "documented bytes and digest disagree"
    );
    let mut v = json!({"bytes_len": bytes.len(), "sha256": digest});
    if show_bytes {
        v["bytes"] = json!(String::from_utf8(bytes).expect("utf-8"));
    }
    v
}

fn vectors() -> BTreeMap<String, Value> {
    let input = input();
    let outcome = evaluate_memory_write(&input).expect("evaluates");
    let receipt = outcome.receipt();
    let mut out = BTreeMap::new();
    let mut put = |domain: &str, value: Value| {
        out.insert(domain.to_owned(), value);
    };

    put(
        POLICY_DOMAIN,
        vector(
            domain_bytes(POLICY_DOMAIN, &input.policy).expect("bytes"),
            policy_input_sha256(&input.policy).expect("digest"),
            true,
        ),
    );
    put(
        PROPOSAL_DOMAIN,
        vector(
            domain_bytes(PROPOSAL_DOMAIN, &input.proposal).expect("bytes"),
            proposal_input_sha256(&input.proposal).expect("digest"),
            false,
        ),
    );
    put(
        GRANT_DOMAIN,
        vector(
            domain_bytes(GRANT_DOMAIN, &input.grant).expect("bytes"),
            grant_input_sha256(&input.grant).expect("digest"),
            true,
        ),
    );
    let mut sorted = input.judgments.clone();
    sorted.sort_by(|a, b| a.judgment_sha256.cmp(&b.judgment_sha256));
    put(
        JUDGMENTS_DOMAIN,
        vector(
            domain_bytes(JUDGMENTS_DOMAIN, &sorted).expect("bytes"),
            judgments_sha256(&input.judgments).expect("digest"),
            false,
        ),
    );
    let adjudications = vec![
        Adjudication {
            adjudication_id: "adjudication-b".into(),
            source_id: "source-b".into(),
            claim_id: None,
            disputed_judgment_sha256: vec![label_sha256("j2"), label_sha256("j1")],
            supports_proposal: false,
            adjudicator_release: "human-review-1".into(),
        },
        Adjudication {
            adjudication_id: "adjudication-a".into(),
            source_id: "source-a".into(),
            claim_id: Some("claim-a".into()),
            disputed_judgment_sha256: vec![label_sha256("j3")],
            supports_proposal: true,
            adjudicator_release: "human-review-1".into(),
        },
    ];
    let mut canonical_adjudications = adjudications.clone();
    canonical_adjudications.reverse();
    canonical_adjudications[1].disputed_judgment_sha256.sort();
    put(
        ADJUDICATIONS_DOMAIN,
        vector(
            domain_bytes(ADJUDICATIONS_DOMAIN, &canonical_adjudications).expect("bytes"),
            adjudications_sha256(&adjudications).expect("digest"),
            false,
        ),
    );
    put(
        CONFLICTS_DOMAIN,
        vector(
            domain_bytes(CONFLICTS_DOMAIN, &input.conflicts).expect("bytes"),
            conflicts_sha256(&input.conflicts).expect("digest"),
            false,
        ),
    );
    let consent = input.consent.as_ref().expect("consent");
    put(
        CONSENT_DOMAIN,
        vector(
            domain_bytes(CONSENT_DOMAIN, consent).expect("bytes"),
            consent_receipt_sha256(consent).expect("digest"),
            true,
        ),
    );
    let evaluation = ProcedureEvaluation {
        suite_sha256: label_sha256("suite"),
        candidate_release: "candidate-1".into(),
        passed_cases: 20,
        total_cases: 20,
        severe_regressions: 0,
    };
    put(
        PROCEDURE_EVALUATION_DOMAIN,
        vector(
            domain_bytes(PROCEDURE_EVALUATION_DOMAIN, &evaluation).expect("bytes"),
            procedure_evaluation_sha256(&evaluation).expect("digest"),
            true,
        ),
    );
    put(
        DECISION_DOMAIN,
        vector(
            domain_bytes(DECISION_DOMAIN, outcome.decision()).expect("bytes"),
            decision_sha256(outcome.decision()).expect("digest"),
            false,
        ),
    );
    let rejected = MemoryWriteDecision::Rejected {
        violations: vec![
            MemoryWriteViolation::TtlNotPositive {},
            MemoryWriteViolation::MissingConsent {},
        ],
    };
    put(
        "mosaic.memory.write_decision.v1#rejected",
        vector(
            domain_bytes(DECISION_DOMAIN, &rejected).expect("bytes"),
            decision_sha256(&rejected).expect("digest"),
            true,
        ),
    );
    // The receipt digest covers the receipt object without its own member.
    let mut body = serde_json::to_value(receipt).expect("value");
    if let Value::Object(map) = &mut body {
        map.remove("receipt_sha256");
    }
    put(
        RECEIPT_DOMAIN,
        vector(
            domain_bytes(RECEIPT_DOMAIN, &body).expect("bytes"),
            receipt.receipt_sha256.clone(),
            false,
        ),
    );
    out
}

#[test]
fn memory_write_golden_vectors_match() {
    let actual = vectors();
    let rendered = serde_json::to_string_pretty(&actual).expect("json") + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(GOLDEN, &rendered).expect("write golden file");
    }
    let expected: BTreeMap<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(GOLDEN).expect("golden file"))
            .expect("golden json");
    for (domain, value) in &actual {
        assert_eq!(
            expected.get(domain),
            Some(value),
            "golden vector for {domain} changed"
        );
    }
    assert_eq!(
        expected.len(),
        actual.len(),
        "golden file lists other domains"
    );
}

#[test]
fn memory_write_golden_receipt_binds_every_vector() {
    let input = input();
    let outcome = evaluate_memory_write(&input).expect("evaluates");
    let receipt = outcome.receipt();
    let vectors = vectors();
    let sha = |domain: &str| vectors[domain]["sha256"].as_str().map(str::to_owned);
    assert_eq!(
        sha(POLICY_DOMAIN),
        Some(receipt.policy_input_sha256.clone())
    );
    assert_eq!(
        sha(PROPOSAL_DOMAIN),
        Some(receipt.proposal_input_sha256.clone())
    );
    assert_eq!(sha(GRANT_DOMAIN), Some(receipt.grant_input_sha256.clone()));
    assert_eq!(
        sha(JUDGMENTS_DOMAIN),
        Some(receipt.judgments_sha256.clone())
    );
    assert_eq!(
        sha(CONFLICTS_DOMAIN),
        receipt.conflicts_sha256.clone().into()
    );
    assert_eq!(sha(CONSENT_DOMAIN), receipt.consent_sha256.clone());
    assert_eq!(sha(DECISION_DOMAIN), Some(receipt.decision_sha256.clone()));
    assert_eq!(sha(RECEIPT_DOMAIN), Some(receipt.receipt_sha256.clone()));
    assert_eq!(
        receipt.adjudications_sha256,
        adjudications_sha256(&[]).expect("digest")
    );
    assert_eq!(receipt.procedure_evaluation_sha256, None);
    assert_eq!(receipt.gate_release, "mosaic.memory_write.gate.v1");
}

#[test]
fn memory_write_golden_canonical_bytes_are_readable() {
    // One fully spelled-out vector documents the encoding by example.
    let expected = concat!(
        "mosaic.memory.write_decision.v1\n",
        r#"{"decision":"rejected","violations":[{"violation":"ttl_not_positive"},{"violation":"missing_consent"}]}"#
    );
    assert_eq!(
        vectors()["mosaic.memory.write_decision.v1#rejected"]["bytes"],
        json!(expected)
    );
}
