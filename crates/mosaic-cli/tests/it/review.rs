//! Review cases over the API: each of the five actions returns a review
//! receipt and leaves the records in the expected state; the two that
//! write (`accept_narrower`, `supersede`) send their proposal through the
//! same evidence checks and gate as `POST /v1/memories`.

use axum::http::StatusCode;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::{SourceJudgment, StructuredClaim};
use mosaic_service::api::{ProposeRequest, signed::Signed};
use mosaic_service::evidence::{EvidenceKind, Proposition, public_key_hex, sign_evidence};
use mosaic_service::examples::workspace_fact;
use serde_json::{Value, json};

use crate::common::{WORKSPACE, World, error_code, send, world};

const CHECKER: [u8; 32] = [0xc3; 32];
const CHECKER_RELEASE: &str = "review-checker-v1";
const TENANT: &str = "tenant-a";

fn judgment(request: &ProposeRequest, claim_id: Option<&str>) -> SourceJudgment {
    let source = &request.sources[0];
    SourceJudgment {
        source_id: source.source_id.clone(),
        claim_id: claim_id.map(str::to_owned),
        source_content_sha256: source.content_sha256.clone(),
        supports_proposal: true,
        verifier_release: CHECKER_RELEASE.to_owned(),
        judgment_sha256: sha256_hex(
            format!("judgment/{}/{claim_id:?}", request.content).as_bytes(),
        ),
    }
}

/// A workspace fact `predicate = value` with one structured claim whose
/// judgment the registered checker signed.
fn claim_fact(label: &str, predicate: &str, value: &str) -> ProposeRequest {
    let mut request = workspace_fact(label, WORKSPACE, &format!("The {predicate} is {value}"));
    request.source_texts.clear();
    let source_id = request.sources[0].source_id.clone();
    request.claims = vec![StructuredClaim {
        claim_id: "c1".into(),
        subject: format!("workspace:{WORKSPACE}"),
        predicate: predicate.into(),
        object: value.into(),
        qualifiers: Default::default(),
        valid_from_unix_ms: 0,
        valid_until_unix_ms: None,
        source_ids: vec![source_id],
    }];
    let content_sha256 = sha256_hex(request.content.as_bytes());
    let proposition = Proposition {
        tenant_id: TENANT,
        content_sha256: &content_sha256,
        claims: &request.claims,
    };
    let signed = sign_evidence(
        &proposition,
        EvidenceKind::SourceJudgment,
        judgment(&request, Some("c1")),
        &CHECKER,
    )
    .expect("signs");
    request.judgments = vec![signed];
    request
}

async fn propose(w: &World, key: &str, request: &ProposeRequest) -> Value {
    crate::common::propose(&w.router, key, request).await
}

/// Alice's record says `predicate = Tuesday`; Bob's proposal says Friday
/// and is rejected as a contradiction, which opens a case. Returns the
/// existing record and the case.
async fn open_case(w: &World, predicate: &str) -> (String, String) {
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let existing = propose(
        w,
        &alice.key,
        &claim_fact(&format!("{predicate}-a"), predicate, "Tuesday"),
    )
    .await;
    assert_eq!(existing["decision"], "accepted", "{existing}");
    let contradiction = propose(
        w,
        &bob.key,
        &claim_fact(&format!("{predicate}-b"), predicate, "Friday"),
    )
    .await;
    assert_eq!(contradiction["decision"], "rejected", "{contradiction}");
    let case = contradiction["review_case_ids"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no review case: {contradiction}"))
        .to_owned();
    let existing = existing["record_id"]
        .as_str()
        .expect("record id")
        .to_owned();
    (existing, case)
}

fn review_world() -> World {
    world()
}

async fn register_checker(w: &World) {
    let (status, body) = send(
        &w.router,
        "POST",
        &format!("/v1/admin/tenants/{TENANT}/verifiers"),
        Some(&w.admin_key),
        Some(json!({"verifier_release": CHECKER_RELEASE, "public_key_hex": public_key_hex(&CHECKER)})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn act(w: &World, case: &str, body: Value) -> (StatusCode, Value) {
    send(
        &w.router,
        "POST",
        &format!("/v1/admin/review/{case}"),
        Some(&w.admin_key),
        Some(body),
    )
    .await
}

async fn state_of(w: &World, record: &str) -> String {
    let (status, body) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record}"),
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["state"]
        .as_str()
        .unwrap_or_else(|| panic!("no state: {body}"))
        .to_owned()
}

async fn open_cases(w: &World) -> Vec<Value> {
    let (status, body) = send(
        &w.router,
        "GET",
        &format!("/v1/admin/tenants/{TENANT}/review"),
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["cases"].as_array().cloned().unwrap_or_default()
}

fn assert_receipt(receipt: &Value, case: &str, action: &str, status_after: &str) {
    assert_eq!(receipt["body"]["case_id"], case, "{receipt}");
    assert_eq!(receipt["body"]["action"], action, "{receipt}");
    assert_eq!(receipt["body"]["status_after"], status_after, "{receipt}");
    assert_eq!(receipt["body"]["tenant_id"], TENANT, "{receipt}");
    let digest = receipt["receipt_sha256"].as_str().unwrap_or("");
    assert_eq!(digest.len(), 64, "{receipt}");
}

#[tokio::test]
async fn reject_contest_and_request_evidence_each_return_a_receipt() {
    let w = review_world();
    register_checker(&w).await;

    let (existing, case) = open_case(&w, "deploy_day").await;
    let (status, receipt) = act(&w, &case, json!({"action": "request_evidence"})).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_receipt(&receipt, &case, "request_evidence", "evidence_requested");
    assert_eq!(receipt["body"]["new_proposal_id"], Value::Null);
    assert_eq!(state_of(&w, &existing).await, "active");
    assert!(
        open_cases(&w).await.iter().any(|c| c["case_id"] == case),
        "the case stays open"
    );
    let (status, receipt) = act(
        &w,
        &case,
        json!({"action": "reject_proposal", "authority_ref": "ticket-7"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_receipt(&receipt, &case, "reject_proposal", "resolved");
    assert_eq!(receipt["body"]["reviewer"]["authority_ref"], "ticket-7");
    assert_eq!(state_of(&w, &existing).await, "active");
    assert!(!open_cases(&w).await.iter().any(|c| c["case_id"] == case));
    // A resolved case takes no further action.
    let (status, body) = act(&w, &case, json!({"action": "contest_existing"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    let (existing, case) = open_case(&w, "backup_day").await;
    let (status, receipt) = act(&w, &case, json!({"action": "contest_existing"})).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_receipt(&receipt, &case, "contest_existing", "resolved");
    assert_eq!(state_of(&w, &existing).await, "contested");
}

#[tokio::test]
async fn accept_narrower_writes_a_gated_record_and_keeps_the_existing_one() {
    let w = review_world();
    register_checker(&w).await;
    let (existing, case) = open_case(&w, "deploy_day").await;

    // The narrower proposition: its own source text, judged by the
    // server's verbatim verifier.
    let narrower = workspace_fact("narrow", WORKSPACE, "Deploys happen on a weekday");
    let (status, receipt) = act(
        &w,
        &case,
        json!({"action": "accept_narrower", "proposal": narrower}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_receipt(&receipt, &case, "accept_narrower", "resolved");
    assert_eq!(receipt["body"]["new_proposal_accepted"], true, "{receipt}");
    assert_eq!(
        receipt["body"]["new_proposal_receipt_sha256"]
            .as_str()
            .map(str::len),
        Some(64)
    );
    let record = receipt["record_id"].as_str().expect("record id").to_owned();
    assert_eq!(state_of(&w, &record).await, "active");
    assert_eq!(state_of(&w, &existing).await, "active");
    // Written for the case's proposer (bob), readable through recall.
    let (status, listed) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record}"),
        Some(&w.principals[1].key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["content"], "Deploys happen on a weekday");
    let (status, recalled) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&w.principals[1].key),
        Some(json!({"query": "weekday deploys"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{recalled}");
    assert!(
        recalled["selected_record_ids"]
            .as_array()
            .is_some_and(|ids| ids.iter().any(|id| id == record.as_str())),
        "{recalled}"
    );
    assert!(!open_cases(&w).await.iter().any(|c| c["case_id"] == case));
}

#[tokio::test]
async fn supersede_writes_a_gated_record_that_supersedes_the_existing_one() {
    let w = review_world();
    register_checker(&w).await;
    let (existing, case) = open_case(&w, "deploy_day").await;
    // The correction carries its own signed evidence; it names no record,
    // so it supersedes the case's existing one.
    let correction = claim_fact("deploy_day-fix", "deploy_day", "Friday");
    let (status, receipt) = act(
        &w,
        &case,
        json!({"action": "supersede", "proposal": correction}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_receipt(&receipt, &case, "supersede", "resolved");
    assert_eq!(receipt["body"]["new_proposal_accepted"], true, "{receipt}");
    let record = receipt["record_id"].as_str().expect("record id").to_owned();
    assert_eq!(state_of(&w, &record).await, "active");
    assert_eq!(state_of(&w, &existing).await, "superseded");
    // The new record's write receipt re-verifies from stored inputs.
    let proposal = receipt["body"]["new_proposal_id"]
        .as_str()
        .expect("proposal id");
    let (status, verified) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&w.admin_key),
        Some(json!({"kind": "write", "proposal_id": proposal})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{verified}");
    assert_eq!(verified["valid"], true, "{verified}");
}

#[tokio::test]
async fn a_reviewer_cannot_bypass_the_evidence_rules_or_the_gate() {
    let w = review_world();
    register_checker(&w).await;
    let (existing, case) = open_case(&w, "deploy_day").await;

    // The proposal's own unsigned judgment is refused before anything is
    // written, as on POST /v1/memories.
    let mut vouched = workspace_fact("vouched", WORKSPACE, "Deploys need no approval");
    vouched.source_texts.clear();
    vouched.judgments = vec![Signed::unsigned(judgment(&vouched, None))];
    let (status, body) = act(
        &w,
        &case,
        json!({"action": "accept_narrower", "proposal": vouched}),
    )
    .await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "unverified_evidence"),
        "{body}"
    );

    // Content its source does not say: the gate rejects it, the receipt
    // says so and the case stays open.
    let mut unsupported = workspace_fact("unsupported", WORKSPACE, "Deploys happen hourly");
    let source_id = unsupported.sources[0].source_id.clone();
    let text = "Deploys happen daily";
    unsupported.sources[0].content_sha256 = sha256_hex(text.as_bytes());
    unsupported.source_texts.insert(source_id, text.into());
    let (status, receipt) = act(
        &w,
        &case,
        json!({"action": "accept_narrower", "proposal": unsupported}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_receipt(&receipt, &case, "accept_narrower", "open");
    assert_eq!(receipt["body"]["new_proposal_accepted"], false, "{receipt}");
    let record = receipt["record_id"].as_str().expect("record id");
    let (status, _) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record}"),
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was written");
    assert!(open_cases(&w).await.iter().any(|c| c["case_id"] == case));
    assert_eq!(state_of(&w, &existing).await, "active");

    // A proposal naming another principal is refused.
    let mut foreign = workspace_fact("foreign", WORKSPACE, "Deploys happen on Monday");
    foreign.principal_id = Some("mallory".into());
    let (status, body) = act(
        &w,
        &case,
        json!({"action": "supersede", "proposal": foreign}),
    )
    .await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "principal_mismatch"),
        "{body}"
    );

    // Inputs the actions require or refuse.
    for (body, code) in [
        (json!({"action": "accept_narrower"}), "missing_proposal"),
        (json!({"action": "supersede"}), "missing_proposal"),
        (
            json!({"action": "reject_proposal", "proposal": workspace_fact("x", WORKSPACE, "x")}),
            "unexpected_proposal",
        ),
        (json!({"action": "approve"}), "unsupported_action"),
        (
            json!({"action": "supersede", "proposal": {"content": "x", "surprise": 1}}),
            "unknown_field",
        ),
    ] {
        let (status, answer) = act(&w, &case, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        let got = error_code(&answer);
        assert!(
            got == code || (code == "unknown_field" && got.starts_with("invalid")),
            "{body}: {answer}"
        );
    }
    // A case that does not exist.
    let (status, body) = act(
        &w,
        "case-missing",
        json!({"action": "accept_narrower", "proposal": workspace_fact("y", WORKSPACE, "y")}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}
