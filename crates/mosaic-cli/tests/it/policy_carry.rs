//! A tenant's policy changes: records written under the earlier policy
//! are explained as `policy_mismatch` (not silently missing), and the
//! admin carries them to the new policy through the gate.

use axum::http::StatusCode;
use mosaic_harness::MemoryKind;
use mosaic_harness::MemorySubject;
use mosaic_harness::memory_write::MemoryPurpose;
use mosaic_service::examples::{preference, supported_proposal, workspace_fact};
use serde_json::{Value, json};

use crate::common::{WORKSPACE, World, error_code, send, world};

async fn write(w: &World, key: &str, request: mosaic_service::api::ProposeRequest) -> String {
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(key),
        Some(serde_json::to_value(&request).expect("json")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "accepted", "{body}");
    body["record_id"].as_str().expect("id").to_owned()
}

async fn recall(w: &World, key: &str, body: Value) -> Value {
    let (status, r) = send(&w.router, "POST", "/v1/recall", Some(key), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    r
}

fn ids(r: &Value) -> Vec<String> {
    serde_json::from_value(r["selected_record_ids"].clone()).expect("ids")
}

async fn put_policy(w: &World, policy: Value) {
    let (status, body) = send(
        &w.router,
        "PUT",
        "/v1/admin/tenants/tenant-a/policy",
        Some(&w.admin_key),
        Some(policy),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn carry(w: &World) -> Value {
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/admin/tenants/tenant-a/policy/carry",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test]
async fn records_of_an_earlier_policy_say_policy_mismatch_and_are_carried_through_the_gate() {
    let w = world();
    let alice = &w.principals[0];
    let pref = write(
        &w,
        &alice.key,
        preference(
            "carry-pref",
            "alice",
            "alice prefers window seats",
            Some(alice.consent.clone()),
        ),
    )
    .await;
    let fact = write(
        &w,
        &alice.key,
        workspace_fact("carry-fact", WORKSPACE, "the build server is in rack four"),
    )
    .await;
    let episode = write(
        &w,
        &alice.key,
        supported_proposal(
            "carry-episode",
            "alice asked about the rack layout",
            MemoryKind::Episodic,
            MemoryPurpose::Personalization,
            MemorySubject::Principal {
                principal_id: "alice".into(),
            },
            Some(alice.consent.clone()),
        ),
    )
    .await;
    let mut before = ids(&recall(&w, &alice.key, json!({"max_records": 50})).await);
    before.sort();
    let mut expected = vec![pref.clone(), fact.clone(), episode.clone()];
    expected.sort();
    assert_eq!(before, expected);

    // A new policy that no longer allows episodic memory: nothing is
    // recalled, and the read says why (the selector's policy check over
    // the records the store's policy-bound query leaves out).
    put_policy(
        &w,
        json!({"allowed_kinds": ["working", "semantic", "procedural"]}),
    )
    .await;
    let r = recall(&w, &alice.key, json!({"explain": true, "max_records": 50})).await;
    assert!(ids(&r).is_empty(), "{r}");
    assert_eq!(r["drop_reasons"]["policy_mismatch"], 3, "{r}");
    let mut explained: Vec<(String, String)> = r["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .map(|d| {
            (
                d["record_id"].as_str().expect("id").to_owned(),
                d["outcome"]["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    explained.sort();
    let mut want: Vec<(String, String)> = expected
        .iter()
        .map(|id| (id.clone(), "policy_mismatch".to_owned()))
        .collect();
    want.sort();
    assert_eq!(explained, want, "{r}");
    // Another principal of the tenant sees only what it may see: the
    // workspace fact, never alice's own records.
    let bob = &w.principals[1];
    let r = recall(&w, &bob.key, json!({"explain": true, "max_records": 50})).await;
    let named: Vec<&str> = r["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter_map(|d| d["record_id"].as_str())
        .collect();
    assert_eq!(named, [fact.as_str()], "{r}");

    // Only the admin carries, and only an existing tenant.
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/admin/tenants/tenant-a/policy/carry",
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(error_code(&body), "admin_required");
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/admin/tenants/nowhere/policy/carry",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // Carrying: each record is proposed again and the gate decides under
    // the new policy and the writer's grant. The workspace fact is
    // accepted. The episode's kind is no longer allowed, and both of
    // alice's personal records name a consent given under the earlier
    // policy (a consent binds its policy; only alice can give a new one):
    // refused, and they stay hidden as policy_mismatch.
    let report = carry(&w).await;
    assert_eq!(report["examined"], 3, "{report}");
    assert_eq!(report["accepted"], 1, "{report}");
    assert_eq!(report["refused"], 2, "{report}");
    assert_eq!(
        report["refused_reasons"],
        json!({"consent_policy_mismatch": 2, "kind_not_allowed_by_policy": 1}),
        "{report}"
    );
    let r = recall(
        &w,
        &alice.key,
        json!({"query": "window seats rack", "explain": true, "max_records": 50}),
    )
    .await;
    let carried = ids(&r);
    assert_eq!(carried.len(), 1, "{r}");
    for old in [&pref, &fact, &episode] {
        assert!(!carried.contains(old), "{r}");
    }
    assert!(
        r["context"]
            .as_str()
            .expect("context")
            .contains("rack four"),
        "{r}"
    );
    assert_eq!(r["drop_reasons"]["policy_mismatch"], 2, "{r}");
    let mut still: Vec<&str> = r["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter(|d| d["outcome"]["reason"] == "policy_mismatch")
        .filter_map(|d| d["record_id"].as_str())
        .collect();
    still.sort_unstable();
    let mut refused = vec![pref.as_str(), episode.as_str()];
    refused.sort_unstable();
    assert_eq!(still, refused, "{r}");
    // The carried record replaces the old one (superseded, not copied).
    let (status, view) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{fact}"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["record"]["status"]["state"], "superseded", "{view}");
    assert_eq!(
        view["record"]["status"]["replacement_id"],
        carried[0].as_str(),
        "{view}"
    );

    // Idempotent: a second run adds nothing and decides the same.
    let again = carry(&w).await;
    assert_eq!(again["accepted"], 0, "{again}");
    assert_eq!(again["current"], 1, "{again}");
    assert_eq!(again["examined"], 2, "{again}");
    assert_eq!(again["refused"], 0, "{again}");
    assert_eq!(again["decided_earlier"], 2, "{again}");
    let r = recall(&w, &alice.key, json!({"max_records": 50})).await;
    assert_eq!(ids(&r).len(), 1, "{r}");

    // Alice consents again, under the new policy: the next run relies on
    // that consent and carries her preference; the episode stays refused
    // (its kind), with its consent problem gone.
    let (status, consent) = send(
        &w.router,
        "POST",
        "/v1/consents",
        Some(&alice.key),
        Some(json!({"purpose": "personalization", "ui_release": "consent-ui-v2"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{consent}");
    let fourth = carry(&w).await;
    assert_eq!(fourth["accepted"], 1, "{fourth}");
    assert_eq!(fourth["refused"], 1, "{fourth}");
    assert_eq!(
        fourth["refused_reasons"],
        json!({"kind_not_allowed_by_policy": 1}),
        "{fourth}"
    );
    let r = recall(
        &w,
        &alice.key,
        json!({"query": "window seats", "max_records": 50}),
    )
    .await;
    assert!(
        r["context"]
            .as_str()
            .expect("context")
            .contains("window seats"),
        "{r}"
    );
    assert_eq!(r["drop_reasons"]["policy_mismatch"], 1, "{r}");
    // And again: nothing new.
    let again = carry(&w).await;
    assert_eq!(again["accepted"], 0, "{again}");
    assert_eq!(again["decided_earlier"], 1, "{again}");

    // Back to the first policy: the episode is current again (its consent
    // names that policy), and the two carried records are carried back,
    // relying on alice's first consent.
    put_policy(&w, json!({})).await;
    let third = carry(&w).await;
    assert_eq!(third["current"], 1, "{third}");
    assert_eq!(third["accepted"], 2, "{third}");
    assert_eq!(third["refused"], 0, "{third}");
    let r = recall(&w, &alice.key, json!({"max_records": 50})).await;
    assert_eq!(ids(&r).len(), 3, "{r}");
    assert!(r["drop_reasons"].get("policy_mismatch").is_none(), "{r}");
}
