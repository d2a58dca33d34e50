//! Evidence is independent of the proposer: the agent's key cannot certify
//! its own evidence. Each negative case names the layer that stops it:
//! the server's source-text check (400), the server's evidence
//! authentication (403), the gate (a rejected decision), or the server's
//! own conflict scan feeding the gate.

use axum::http::StatusCode;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::{
    Adjudication, ConflictObservation, ConflictRelation, ProcedureEvaluation, SourceJudgment,
    StructuredClaim,
};
use mosaic_service::api::{
    ProposeRequest,
    signed::{EvidenceSignature, Signed},
};
use mosaic_service::evidence::{
    CONFLICT_SCANNER_RELEASE, EvidenceKind, Proposition, VERBATIM_VERIFIER_RELEASE, public_key_hex,
    sign_evidence,
};
use mosaic_service::examples::{quoted_proposal, workspace_fact};
use serde_json::{Value, json};

use crate::common::{WORKSPACE, World, error_code, send, world};

/// The tenant-a verifier's secret key.
const CHECKER_A: [u8; 32] = [0xa1; 32];
/// The tenant-b verifier's secret key.
const CHECKER_B: [u8; 32] = [0xb2; 32];
const CHECKER_RELEASE: &str = "checker-v1";

async fn register(
    w: &World,
    tenant: &str,
    release: &str,
    secret: &[u8; 32],
) -> (StatusCode, Value) {
    send(
        &w.router,
        "POST",
        &format!("/v1/admin/tenants/{tenant}/verifiers"),
        Some(&w.admin_key),
        Some(json!({"verifier_release": release, "public_key_hex": public_key_hex(secret)})),
    )
    .await
}

async fn propose(w: &World, key: &str, request: &ProposeRequest) -> (StatusCode, Value) {
    let body = serde_json::to_value(request).expect("json");
    send(&w.router, "POST", "/v1/memories", Some(key), Some(body)).await
}

fn violations(response: &Value) -> Vec<String> {
    response["violations"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v["violation"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// What the workspace holds now (any state).
async fn listed(w: &World, key: &str) -> Vec<Value> {
    let (status, body) = send(
        &w.router,
        "GET",
        &format!("/v1/memories?type=workspace&workspace_id={WORKSPACE}"),
        Some(key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.as_array().cloned().unwrap_or_default()
}

/// A judgment that the request's first source supports the proposal (for
/// `claim_id`), as a proposer or a verifier would write it.
fn judgment_of(request: &ProposeRequest, claim_id: Option<&str>, release: &str) -> SourceJudgment {
    let source = &request.sources[0];
    SourceJudgment {
        source_id: source.source_id.clone(),
        claim_id: claim_id.map(str::to_owned),
        source_content_sha256: source.content_sha256.clone(),
        supports_proposal: true,
        verifier_release: release.to_owned(),
        judgment_sha256: sha256_hex(
            format!("judgment/{}/{claim_id:?}", request.content).as_bytes(),
        ),
    }
}

/// A workspace fact without source texts, judged by nobody yet.
fn bare_fact(label: &str, content: &str) -> ProposeRequest {
    let mut request = workspace_fact(label, WORKSPACE, content);
    request.source_texts.clear();
    request
}

fn deploy_claim(claim_id: &str, day: &str, source_id: &str) -> StructuredClaim {
    StructuredClaim {
        claim_id: claim_id.into(),
        subject: format!("workspace:{WORKSPACE}"),
        predicate: "deploy_day".into(),
        object: day.into(),
        qualifiers: Default::default(),
        valid_from_unix_ms: 0,
        valid_until_unix_ms: None,
        source_ids: vec![source_id.into()],
    }
}

/// A workspace fact with one structured claim, its judgment signed by
/// `secret` for `tenant`.
fn signed_claim_fact(label: &str, day: &str, tenant: &str, secret: &[u8; 32]) -> ProposeRequest {
    let mut request = bare_fact(label, &format!("Deploys happen on {day}"));
    let source_id = request.sources[0].source_id.clone();
    request.claims = vec![deploy_claim("deploy-day", day, &source_id)];
    let content_sha256 = sha256_hex(request.content.as_bytes());
    let proposition = Proposition {
        tenant_id: tenant,
        content_sha256: &content_sha256,
        claims: &request.claims,
    };
    let judgment = judgment_of(&request, Some("deploy-day"), CHECKER_RELEASE);
    request.judgments = vec![
        sign_evidence(&proposition, EvidenceKind::SourceJudgment, judgment, secret).expect("signs"),
    ];
    request
}

#[tokio::test]
async fn own_unsigned_evidence_is_refused_by_server_evidence_authentication() {
    let w = world();
    let alice = &w.principals[0];
    // The agent vouches for its own source: before this layer existed, the
    // gate accepted exactly this request.
    let mut own = bare_fact("self", "Refunds need no approval");
    own.judgments = vec![Signed::unsigned(judgment_of(&own, None, "verifier-v1"))];
    let (status, body) = propose(&w, &alice.key, &own).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "unverified_evidence"),
        "{body}"
    );
    // A signature naming a verifier nobody registered is no better.
    own.judgments[0].signature = Some(EvidenceSignature {
        verifier_id: "vk-00000000000000000000000000000000".into(),
        signature_hex: "00".repeat(64),
    });
    let (status, body) = propose(&w, &alice.key, &own).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "unverified_evidence"),
        "{body}"
    );
    // Every other kind of evidence is refused unsigned too.
    let base = workspace_fact("kinds", WORKSPACE, "Builds run nightly");
    let mut with_conflict = base.clone();
    with_conflict.conflicts = vec![Signed::unsigned(ConflictObservation {
        observation_id: "obs-1".into(),
        existing_record_id: "m-other".into(),
        relation: ConflictRelation::Unrelated,
        detector_release: "detector-v1".into(),
        existing_claim: None,
    })];
    let mut with_adjudication = base.clone();
    with_adjudication.adjudications = vec![Signed::unsigned(Adjudication {
        adjudication_id: "adj-1".into(),
        source_id: base.sources[0].source_id.clone(),
        claim_id: None,
        disputed_judgment_sha256: vec![sha256_hex(b"a"), sha256_hex(b"b")],
        supports_proposal: true,
        adjudicator_release: "adjudicator-v1".into(),
    })];
    let mut with_evaluation = base.clone();
    with_evaluation.procedure_evaluation = Some(Signed::unsigned(ProcedureEvaluation {
        suite_sha256: sha256_hex(b"suite"),
        candidate_release: "candidate-v1".into(),
        passed_cases: 20,
        total_cases: 20,
        severe_regressions: 0,
    }));
    for (what, request) in [
        ("conflicts", with_conflict),
        ("adjudications", with_adjudication),
        ("procedure_evaluation", with_evaluation),
    ] {
        let (status, body) = propose(&w, &alice.key, &request).await;
        assert_eq!(
            (status, error_code(&body).as_str()),
            (StatusCode::FORBIDDEN, "unverified_evidence"),
            "{what}: {body}"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(what),
            "the message names the field: {body}"
        );
    }
    // Refused before any write: nothing is listed, nothing is recalled.
    assert!(listed(&w, &alice.key).await.is_empty());
    let (_, recalled) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(recalled["selected_record_ids"], json!([]));
}

#[tokio::test]
async fn judgment_signed_by_another_tenants_verifier_is_refused_by_server_evidence_authentication()
{
    let w = world();
    let alice_a = &w.principals[0];
    let (status, _) = register(&w, "tenant-b", CHECKER_RELEASE, &CHECKER_B).await;
    assert_eq!(status, StatusCode::OK);
    // Signed for tenant-a's proposition, by tenant-b's verifier.
    let request = signed_claim_fact("cross", "Tuesday", "tenant-a", &CHECKER_B);
    let (status, body) = propose(&w, &alice_a.key, &request).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "unverified_evidence"),
        "{body}"
    );
    // Signed for tenant-b, by tenant-b's verifier, replayed in tenant-a.
    let request = signed_claim_fact("replay", "Tuesday", "tenant-b", &CHECKER_B);
    let (status, body) = propose(&w, &alice_a.key, &request).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "unverified_evidence"),
        "{body}"
    );
    assert!(listed(&w, &alice_a.key).await.is_empty());
    // The same judgment is accepted from tenant-a's own registered verifier.
    let (status, _) = register(&w, "tenant-a", CHECKER_RELEASE, &CHECKER_A).await;
    assert_eq!(status, StatusCode::OK);
    let request = signed_claim_fact("own", "Tuesday", "tenant-a", &CHECKER_A);
    let (status, body) = propose(&w, &alice_a.key, &request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "accepted", "{body}");
}

#[tokio::test]
async fn a_signature_binds_content_and_release_and_dies_with_its_verifier() {
    let w = world();
    let alice = &w.principals[0];
    let (status, verifier) = register(&w, "tenant-a", CHECKER_RELEASE, &CHECKER_A).await;
    assert_eq!(status, StatusCode::OK, "{verifier}");
    // A valid signature moved onto other content: refused.
    let mut moved = signed_claim_fact("moved", "Tuesday", "tenant-a", &CHECKER_A);
    moved.content = "Deploys happen whenever the agent likes".into();
    let (status, body) = propose(&w, &alice.key, &moved).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "unverified_evidence"),
        "{body}"
    );
    // The judgment names another release than its signer's: refused.
    let mut request = bare_fact("release", "Deploys happen on Monday");
    let content_sha256 = sha256_hex(request.content.as_bytes());
    let proposition = Proposition {
        tenant_id: "tenant-a",
        content_sha256: &content_sha256,
        claims: &[],
    };
    let judgment = judgment_of(&request, None, VERBATIM_VERIFIER_RELEASE);
    request.judgments = vec![
        sign_evidence(
            &proposition,
            EvidenceKind::SourceJudgment,
            judgment,
            &CHECKER_A,
        )
        .expect("signs"),
    ];
    let (status, body) = propose(&w, &alice.key, &request).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "unverified_evidence"),
        "{body}"
    );
    // Disabled: its signatures stop counting.
    let accepted = signed_claim_fact("before", "Wednesday", "tenant-a", &CHECKER_A);
    let id = verifier["verifier_id"].as_str().expect("id");
    let (status, disabled) = send(
        &w.router,
        "DELETE",
        &format!("/v1/admin/tenants/tenant-a/verifiers/{id}"),
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(disabled["disabled"], true);
    let (status, body) = propose(&w, &alice.key, &accepted).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "unverified_evidence"),
        "{body}"
    );
}

#[tokio::test]
async fn verbatim_judgment_of_content_not_in_the_source_is_rejected_by_the_gate() {
    let w = world();
    let alice = &w.principals[0];
    let request = quoted_proposal(
        "paraphrase",
        "The support queue closes at 5pm",
        "Customer: the support queue closes at 6pm on weekdays, right?",
        mosaic_harness::MemoryKind::Semantic,
        mosaic_harness::memory_write::MemoryPurpose::WorkspaceKnowledge,
        mosaic_harness::MemorySubject::Workspace {
            workspace_id: WORKSPACE.into(),
        },
        None,
    );
    let (status, body) = propose(&w, &alice.key, &request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "rejected");
    assert_eq!(violations(&body), ["unsupported_evidence"], "{body}");
    let judgment = &body["server_judgments"][0];
    assert_eq!(judgment["verifier_release"], VERBATIM_VERIFIER_RELEASE);
    assert_eq!(judgment["supports_proposal"], false);
    // The same content quoted verbatim (whitespace aside) is accepted, with
    // a deterministic judgment id.
    let quoted = quoted_proposal(
        "quote",
        "The support queue closes at 5pm",
        "Customer: the  support queue\ncloses at 5pm, thanks.",
        mosaic_harness::MemoryKind::Semantic,
        mosaic_harness::memory_write::MemoryPurpose::WorkspaceKnowledge,
        mosaic_harness::MemorySubject::Workspace {
            workspace_id: WORKSPACE.into(),
        },
        None,
    );
    let (status, first) = propose(&w, &alice.key, &quoted).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(
        first["decision"], "rejected",
        "lower-case `the` is not `The`: {first}"
    );
    let mut exact = quoted.clone();
    exact.content = "the support queue closes at 5pm".into();
    let (_, accepted) = propose(&w, &alice.key, &exact).await;
    assert_eq!(accepted["decision"], "accepted", "{accepted}");
    let (_, replayed) = propose(&w, &alice.key, &exact).await;
    assert_eq!(replayed["replayed"], true, "{replayed}");
    assert_eq!(
        replayed["server_judgments"], accepted["server_judgments"],
        "judgment ids are deterministic"
    );
}

#[tokio::test]
async fn source_text_whose_digest_differs_is_refused_by_the_server_source_check() {
    let w = world();
    let alice = &w.principals[0];
    let mut request = workspace_fact("digest", WORKSPACE, "Backups run at noon");
    let source_id = request.sources[0].source_id.clone();
    request
        .source_texts
        .insert(source_id, "Backups run at noon and midnight".into());
    let (status, body) = propose(&w, &alice.key, &request).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::BAD_REQUEST, "invalid_digest"),
        "{body}"
    );
    let mut request = workspace_fact("unknown", WORKSPACE, "Backups run at noon");
    request
        .source_texts
        .insert("src-not-declared".into(), "Backups run at noon".into());
    let (status, body) = propose(&w, &alice.key, &request).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::BAD_REQUEST, "unknown_source"),
        "{body}"
    );
    assert!(listed(&w, &alice.key).await.is_empty());
}

#[tokio::test]
async fn omitted_contradiction_is_found_by_the_server_conflict_scan_and_rejected_by_the_gate() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let (status, _) = register(&w, "tenant-a", CHECKER_RELEASE, &CHECKER_A).await;
    assert_eq!(status, StatusCode::OK);
    let tuesday = signed_claim_fact("tue", "Tuesday", "tenant-a", &CHECKER_A);
    let (_, first) = propose(&w, &alice.key, &tuesday).await;
    assert_eq!(first["decision"], "accepted", "{first}");
    let existing = first["record_id"].as_str().expect("id").to_owned();
    // Bob (same workspace) proposes Friday and sends no conflicts at all.
    let friday = signed_claim_fact("fri", "Friday", "tenant-a", &CHECKER_A);
    assert!(friday.conflicts.is_empty());
    let (status, body) = propose(&w, &bob.key, &friday).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "rejected");
    assert_eq!(violations(&body), ["contradiction"], "{body}");
    let violation = &body["violations"][0];
    assert_eq!(violation["existing_record_id"], existing.as_str());
    let observation = &body["server_conflicts"][0];
    assert_eq!(observation["observation_id"], violation["observation_id"]);
    assert_eq!(observation["detector_release"], CONFLICT_SCANNER_RELEASE);
    assert_eq!(observation["relation"], "contradicts");
    assert_eq!(body["review_case_ids"].as_array().map(Vec::len), Some(1));
    // The same proposition again is a duplicate, found the same way.
    let again = signed_claim_fact("tue-again", "Tuesday", "tenant-a", &CHECKER_A);
    let (_, body) = propose(&w, &bob.key, &again).await;
    assert_eq!(violations(&body), ["duplicate_memory"], "{body}");
    // Once the existing record is revoked, Friday is no contradiction.
    let (status, _) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{existing}/revoke"),
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let friday = signed_claim_fact("fri-2", "Friday", "tenant-a", &CHECKER_A);
    let (_, body) = propose(&w, &bob.key, &friday).await;
    assert_eq!(body["decision"], "accepted", "{body}");
    assert_eq!(body["server_conflicts"], json!([]));
}

#[tokio::test]
async fn the_server_observes_a_supersession_it_can_confirm() {
    let w = world();
    let (alice, other_tenant) = (&w.principals[0], &w.principals[2]);
    let (status, _) = register(&w, "tenant-a", CHECKER_RELEASE, &CHECKER_A).await;
    assert_eq!(status, StatusCode::OK);
    let (_, first) = propose(
        &w,
        &alice.key,
        &signed_claim_fact("s1", "Tuesday", "tenant-a", &CHECKER_A),
    )
    .await;
    assert_eq!(first["decision"], "accepted", "{first}");
    let old = first["record_id"].as_str().expect("id").to_owned();
    let mut correction = signed_claim_fact("s2", "Thursday", "tenant-a", &CHECKER_A);
    correction.supersedes_record_id = Some(old.clone());
    let (_, body) = propose(&w, &alice.key, &correction).await;
    assert_eq!(body["decision"], "accepted", "{body}");
    assert_eq!(body["line_generation"], 2, "{body}");
    // A record the key cannot see (another tenant's) is never observed.
    let (status, _) = register(&w, "tenant-b", CHECKER_RELEASE, &CHECKER_B).await;
    assert_eq!(status, StatusCode::OK);
    let mut foreign = signed_claim_fact("s3", "Friday", "tenant-b", &CHECKER_B);
    foreign.supersedes_record_id = Some(old);
    let (status, body) = propose(&w, &other_tenant.key, &foreign).await;
    assert!(
        status == StatusCode::NOT_FOUND
            || violations(&body).contains(&"supersession_unobserved".to_owned()),
        "{status} {body}"
    );
}

#[tokio::test]
async fn verifier_registration_is_admin_only_and_validated() {
    let w = world();
    let alice = &w.principals[0];
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/admin/tenants/tenant-a/verifiers",
        Some(&alice.key),
        Some(
            json!({"verifier_release": "checker-v1", "public_key_hex": public_key_hex(&CHECKER_A)}),
        ),
    )
    .await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "admin_required")
    );
    for (release, key, code) in [
        (
            VERBATIM_VERIFIER_RELEASE,
            public_key_hex(&CHECKER_A),
            "reserved_release",
        ),
        (
            CONFLICT_SCANNER_RELEASE,
            public_key_hex(&CHECKER_A),
            "reserved_release",
        ),
        ("checker-v1", "zz".repeat(32), "invalid_public_key"),
        ("checker-v1", "00".repeat(31), "invalid_public_key"),
        ("has space", public_key_hex(&CHECKER_A), "invalid_field"),
    ] {
        let (status, body) = send(
            &w.router,
            "POST",
            "/v1/admin/tenants/tenant-a/verifiers",
            Some(&w.admin_key),
            Some(json!({"verifier_release": release, "public_key_hex": key})),
        )
        .await;
        assert_eq!(
            (status, error_code(&body).as_str()),
            (StatusCode::BAD_REQUEST, code),
            "{release}"
        );
    }
    let (status, body) = register(&w, "tenant-nope", CHECKER_RELEASE, &CHECKER_A).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let (status, first) = register(&w, "tenant-a", CHECKER_RELEASE, &CHECKER_A).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert!(
        first["verifier_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("vk-"))
    );
    let (status, body) = register(&w, "tenant-a", CHECKER_RELEASE, &CHECKER_A).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::CONFLICT, "verifier_exists")
    );
    let (status, list) = send(
        &w.router,
        "GET",
        "/v1/admin/tenants/tenant-a/verifiers",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list, json!([first]));
    let (status, list) = send(
        &w.router,
        "GET",
        "/v1/admin/tenants/tenant-b/verifiers",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!((status, list), (StatusCode::OK, json!([])));
    let (status, body) = send(
        &w.router,
        "DELETE",
        "/v1/admin/tenants/tenant-b/verifiers/vk-nope",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
}

#[test]
fn signed_evidence_round_trips_and_decodes_strictly() {
    let request = signed_claim_fact("wire", "Tuesday", "tenant-a", &CHECKER_A);
    let text = serde_json::to_string(&request).expect("json");
    let back: ProposeRequest = serde_json::from_str(&text).expect("decodes");
    assert_eq!(back, request);
    let mut value: Value = serde_json::from_str(&text).expect("json");
    value["judgments"][0]["surprise"] = json!(1);
    let err = mosaic_server::http::decode_json::<ProposeRequest>(value.to_string().as_bytes())
        .expect_err("unknown member");
    assert_eq!(err.code(), "unknown_field");
    // A repeated member inside an evidence item is an error, not last-wins.
    let judgment = serde_json::to_string(&request.judgments[0]).expect("json");
    let doubled = judgment.replacen('{', "{\"supports_proposal\":false,", 1);
    let body = text.replacen(&judgment, &doubled, 1);
    assert_ne!(body, text, "the judgment appears in the request text");
    assert!(mosaic_server::http::decode_json::<ProposeRequest>(body.as_bytes()).is_err());
}

/// The evidence module's pure functions: normalisation, verbatim matching,
/// signatures and the claim scan.
mod pure {
    use std::collections::BTreeMap;

    use mosaic_harness::MemorySource;
    use mosaic_harness::canonical::sha256_hex;
    use mosaic_harness::memory_write::{ConflictRelation, SourceJudgment, StructuredClaim};
    use mosaic_service::api::signed::Signed;
    use mosaic_service::evidence::{
        CONFLICT_SCANNER_RELEASE, EvidenceError, EvidenceKind, Proposition, RegisteredVerifier,
        SourceTextError, VERBATIM_VERIFIER_RELEASE, normalize_whitespace, occurs_verbatim,
        parse_public_key, public_key_hex, scan_claims, sign_evidence, verbatim_judgments,
        verifier_id, verify_signed,
    };

    fn claim(id: &str, object: &str) -> StructuredClaim {
        StructuredClaim {
            claim_id: id.into(),
            subject: "principal:alice".into(),
            predicate: "drink_preference".into(),
            object: object.into(),
            qualifiers: BTreeMap::new(),
            valid_from_unix_ms: 0,
            valid_until_unix_ms: None,
            source_ids: vec!["s".into()],
        }
    }

    #[test]
    fn whitespace_normalisation_is_conservative() {
        assert_eq!(normalize_whitespace("  a \t\n b\u{a0}c  "), "a b c");
        assert!(occurs_verbatim("I like  tea", "Well,\nI like tea. Thanks"));
        assert!(
            !occurs_verbatim("I like tea", "i like tea"),
            "no case folding"
        );
        assert!(!occurs_verbatim("tea", "steady"), "word boundary before");
        assert!(
            !occurs_verbatim("I like tea", "I like teal"),
            "word boundary after"
        );
        assert!(
            occurs_verbatim("like teal", "I like tea, I like teal"),
            "later match"
        );
        assert!(occurs_verbatim("tea.", "tea.x"), "punctuation ends a word");
        assert!(
            !occurs_verbatim("   ", "anything"),
            "empty content supports nothing"
        );
        assert!(!occurs_verbatim("I like tea", "I like coffee"));
        assert!(
            occurs_verbatim("a a", "ba a a"),
            "overlapping occurrences count"
        );
        // Work is bounded: occurrences glued to a word are examined only so far.
        let glued = "xa".repeat(mosaic_service::evidence::MAX_OCCURRENCES + 1);
        assert!(!occurs_verbatim("a", &format!("{glued} a")));
        assert!(occurs_verbatim("a", &format!("{} a", "xa".repeat(10))));
    }

    #[test]
    fn verbatim_judgments_check_digests_and_are_deterministic() {
        let text = "Alice said: I like tea.".to_owned();
        let source = MemorySource {
            source_id: "s".into(),
            content_sha256: sha256_hex(text.as_bytes()),
            provenance_sha256: sha256_hex(b"p"),
            locator_sha256: sha256_hex(b"l"),
        };
        let content_sha256 = sha256_hex(b"I like tea");
        let p = Proposition {
            tenant_id: "t",
            content_sha256: &content_sha256,
            claims: &[],
        };
        let texts = BTreeMap::from([("s".to_owned(), text.clone())]);
        let sources = [source.clone()];
        let a = verbatim_judgments(&p, "I like tea", &sources, &texts).expect("digests match");
        let b = verbatim_judgments(&p, "I like tea", &sources, &texts).expect("digests match");
        assert_eq!(a, b);
        assert!(a[0].supports_proposal);
        assert_eq!(a[0].verifier_release, VERBATIM_VERIFIER_RELEASE);
        let no = verbatim_judgments(&p, "I like coffee", &sources, &texts).expect("digests match");
        assert!(!no[0].supports_proposal);
        assert_ne!(no[0].judgment_sha256, a[0].judgment_sha256);
        let wrong = BTreeMap::from([("s".to_owned(), format!("{text} "))]);
        assert_eq!(
            verbatim_judgments(&p, "I like tea", &sources, &wrong),
            Err(SourceTextError::DigestMismatch("s".into()))
        );
        let unknown = BTreeMap::from([("x".to_owned(), text)]);
        assert_eq!(
            verbatim_judgments(&p, "I like tea", &sources, &unknown),
            Err(SourceTextError::UnknownSource("x".into()))
        );
    }

    #[test]
    fn signatures_bind_tenant_content_kind_and_release() {
        let secret = [7u8; 32];
        let public = parse_public_key(&public_key_hex(&secret)).expect("valid key");
        let verifier = RegisteredVerifier {
            verifier_id: verifier_id(&public),
            verifier_release: "checker-v1".into(),
            public_key: public,
        };
        let content = sha256_hex(b"c");
        let p = Proposition {
            tenant_id: "t",
            content_sha256: &content,
            claims: &[],
        };
        let judgment = SourceJudgment {
            source_id: "s".into(),
            claim_id: None,
            source_content_sha256: sha256_hex(b"s"),
            supports_proposal: true,
            verifier_release: "checker-v1".into(),
            judgment_sha256: sha256_hex(b"j"),
        };
        let kind = EvidenceKind::SourceJudgment;
        let signed = sign_evidence(&p, kind, judgment.clone(), &secret).expect("signs");
        let release = Some("checker-v1");
        assert_eq!(
            verify_signed(&p, kind, 0, &signed, Some(&verifier), release),
            Ok(())
        );
        let other_tenant = Proposition {
            tenant_id: "u",
            ..p
        };
        assert!(matches!(
            verify_signed(&other_tenant, kind, 0, &signed, Some(&verifier), release),
            Err(EvidenceError::BadSignature { .. })
        ));
        let other_content = sha256_hex(b"d");
        let other = Proposition {
            content_sha256: &other_content,
            ..p
        };
        assert!(verify_signed(&other, kind, 0, &signed, Some(&verifier), release).is_err());
        let as_adjudication = EvidenceKind::Adjudication;
        assert!(verify_signed(&p, as_adjudication, 0, &signed, Some(&verifier), None).is_err());
        assert!(matches!(
            verify_signed(&p, kind, 0, &signed, Some(&verifier), Some("other-v1")),
            Err(EvidenceError::ReleaseMismatch { .. })
        ));
        assert!(matches!(
            verify_signed(
                &p,
                kind,
                3,
                &Signed::unsigned(judgment),
                Some(&verifier),
                release
            ),
            Err(EvidenceError::Unsigned { index: 3, .. })
        ));
        assert!(matches!(
            verify_signed(&p, kind, 0, &signed, None, release),
            Err(EvidenceError::UnknownVerifier { .. })
        ));
    }

    #[test]
    fn the_scan_reports_what_claim_relation_finds() {
        let proposed = [claim("c", "coffee")];
        let existing = vec![
            ("m-old".to_owned(), claim("a", "tea")),
            ("m-same".to_owned(), claim("b", "coffee")),
            ("m-self".to_owned(), claim("z", "tea")),
        ];
        let found = scan_claims("m-self", &proposed, &existing).expect("encodes");
        let relations: BTreeMap<&str, ConflictRelation> = found
            .iter()
            .map(|o| (o.existing_record_id.as_str(), o.relation))
            .collect();
        assert_eq!(
            relations,
            BTreeMap::from([
                ("m-old", ConflictRelation::Contradicts),
                ("m-same", ConflictRelation::Duplicate),
            ])
        );
        assert!(
            found
                .iter()
                .all(|o| o.detector_release == CONFLICT_SCANNER_RELEASE
                    && o.existing_claim.is_some())
        );
        let mut unrelated = claim("d", "tea");
        unrelated.predicate = "food_preference".into();
        assert!(
            scan_claims("m-new", &[unrelated], &existing)
                .expect("encodes")
                .is_empty()
        );
    }
}

/// A summary whose `source_set_sha256` names a manifest listing a source
/// the record does not hold, or a random digest, is refused by the gate
/// (`SummarySourceSetMismatch`); the manifest of exactly its sources passes.
#[tokio::test]
async fn summary_naming_a_foreign_or_random_source_set_is_rejected_by_the_gate() {
    use mosaic_harness::memory_scope::SourceSetManifest;
    let w = world();
    let alice = &w.principals[0];
    let base = workspace_fact("summary", WORKSPACE, "the team agreed to ship on Friday");
    let release = "summarizer-v1";
    let own = SourceSetManifest::new(release, base.sources.clone())
        .digest()
        .expect("digest");
    let mut foreign_sources = base.sources.clone();
    foreign_sources.push(mosaic_harness::MemorySource {
        source_id: "src-elsewhere".into(),
        content_sha256: sha256_hex(b"another conversation"),
        provenance_sha256: sha256_hex(b"elsewhere"),
        locator_sha256: sha256_hex(b"elsewhere/1"),
    });
    let foreign = SourceSetManifest::new(release, foreign_sources)
        .digest()
        .expect("digest");
    for (label, digest, accepted) in [
        ("foreign", foreign, false),
        ("random", sha256_hex(b"made up"), false),
        ("own", own.clone(), true),
    ] {
        let mut request = serde_json::to_value(&base).expect("json");
        request["summary"] = json!({
            "objective": format!("keep the decision ({label})"),
            "summarizer_release": release,
            "source_set_sha256": digest,
            "known_omissions": []
        });
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/memories",
            Some(&alice.key),
            Some(request),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{r}");
        if accepted {
            assert_eq!(r["decision"], "accepted", "{label}: {r}");
        } else {
            assert_eq!(r["decision"], "rejected", "{label}: {r}");
            assert_eq!(
                r["violations"],
                json!([{"violation": "summary_source_set_mismatch", "expected_source_set_sha256": own}]),
                "{label}"
            );
        }
    }
}
