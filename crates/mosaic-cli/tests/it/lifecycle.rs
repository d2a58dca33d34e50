//! Points 1 and 3: propose → publish → recall, revocation never recalled
//! again and ends in a verifying deletion receipt, consent withdrawal,
//! erasure, export/import, reconcile, reindex, metrics and restart.

use axum::http::StatusCode;
use mosaic_service::examples::{preference, workspace_fact};
use serde_json::{Value, json};

use crate::common::{WORKSPACE, error_code, send, send_raw, world};

async fn propose(
    w: &crate::common::World,
    key: &str,
    request: &mosaic_service::api::ProposeRequest,
) -> Value {
    crate::common::propose(&w.router, key, request).await
}

fn selected(r: &Value) -> Vec<String> {
    serde_json::from_value(r["selected_record_ids"].clone()).expect("ids")
}

#[tokio::test]
async fn proposed_memory_is_recalled_then_revoked_and_never_recalled_again() {
    let w = world();
    let p = &w.principals[0];
    let key = p.key.as_str();
    let accepted = propose(
        &w,
        key,
        &preference(
            "tea",
            &p.principal,
            "Alice drinks green tea <b>every</b> morning",
            Some(p.consent.clone()),
        ),
    )
    .await;
    assert_eq!(accepted["decision"], "accepted");
    let record_id = accepted["record_id"].as_str().expect("id").to_owned();
    let other = propose(
        &w,
        key,
        &workspace_fact("deploy", WORKSPACE, "Deploys happen on Tuesday"),
    )
    .await;
    assert_eq!(other["decision"], "accepted");
    // Retrying the same request replays the stored decision.
    let replay = propose(
        &w,
        key,
        &preference(
            "tea",
            &p.principal,
            "Alice drinks green tea <b>every</b> morning",
            Some(p.consent.clone()),
        ),
    )
    .await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["receipt"], accepted["receipt"]);
    // A rejection says why and stores nothing readable.
    let rejected = propose(
        &w,
        key,
        &preference("nocon", &p.principal, "Alice likes jazz", None),
    )
    .await;
    assert_eq!(rejected["decision"], "rejected");
    assert!(
        rejected["violations"]
            .to_string()
            .contains("missing_consent"),
        "{rejected}"
    );

    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(key),
        Some(json!({"query": "green tea"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(selected(&r)[0], record_id, "{r}");
    assert!(r["relevance_receipt"]["receipt_sha256"].is_string());
    let context = r["context"].as_str().expect("context");
    assert!(context.contains("<recalled-memory kind=\"semantic\""));
    assert!(
        context.contains("&lt;b&gt;every&lt;/b&gt;"),
        "content is escaped: {context}"
    );
    assert!(!context.contains("<b>"));
    // The write receipt re-verifies.
    let (_, v) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(key),
        Some(json!({"kind": "write", "proposal_id": accepted["proposal_id"]})),
    )
    .await;
    assert_eq!(v["valid"], true, "{v}");

    let (status, revoked) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{record_id}/revoke"),
        Some(key),
        Some(json!({"authority_ref": "ticket-1"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert_eq!(revoked["stage"], "finalized");
    let stores: Vec<String> = revoked["deletion_receipt"]["body"]["stores"]
        .as_array()
        .expect("stores")
        .iter()
        .map(|s| s["store"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(stores, ["lexical", "primary", "result_cache", "vector"]);
    let (_, v) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(key),
        Some(json!({"kind": "deletion", "receipt": revoked["deletion_receipt"]})),
    )
    .await;
    assert_eq!(v["valid"], true, "{v}");
    let mut tampered = revoked["deletion_receipt"].clone();
    tampered["body"]["finalized_at_unix_ms"] = json!(1);
    let (_, v) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(key),
        Some(json!({"kind": "deletion", "receipt": tampered})),
    )
    .await;
    assert_eq!(v["valid"], false, "{v}");

    for body in [
        json!({}),
        json!({"query": "green tea"}),
        json!({"query": "green tea", "mode": "lexical"}),
        json!({"query": "tea", "mode": "vector"}),
    ] {
        let (_, r) = send(&w.router, "POST", "/v1/recall", Some(key), Some(body)).await;
        assert!(
            !selected(&r).contains(&record_id),
            "revoked memory recalled: {r}"
        );
        assert!(!r["context"].as_str().unwrap_or("").contains("green tea"));
    }
    // Reconcile and reindex change nothing about that.
    let admin = Some(w.admin_key.as_str());
    let (status, _) = send(
        &w.router,
        "POST",
        "/v1/admin/reconcile",
        admin,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, report) = send(
        &w.router,
        "POST",
        "/v1/admin/reindex",
        admin,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["tombstones"], 1);
    let (_, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(key),
        Some(json!({"query": "green tea deploys"})),
    )
    .await;
    assert!(!selected(&r).contains(&record_id));
    assert_eq!(
        selected(&r).len(),
        1,
        "the workspace fact is still recalled after reindex: {r}"
    );
    // The content is gone from the store; get says so.
    let (status, _) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}"),
        Some(key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, d) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}/deletion"),
        Some(key),
        None,
    )
    .await;
    assert_eq!((status, &d["stage"]), (StatusCode::OK, &json!("finalized")));
}

#[tokio::test]
async fn consent_withdrawal_and_erasure_end_in_deletion_receipts() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let a = propose(
        &w,
        &alice.key,
        &preference(
            "a1",
            "alice",
            "Alice prefers email",
            Some(alice.consent.clone()),
        ),
    )
    .await;
    let b = propose(
        &w,
        &bob.key,
        &preference(
            "b1",
            "bob",
            "Bob prefers phone calls",
            Some(bob.consent.clone()),
        ),
    )
    .await;
    let b2 = propose(
        &w,
        &bob.key,
        &workspace_fact("b2", WORKSPACE, "Bob wrote the runbook"),
    )
    .await;
    let (status, withdrawn) = send(
        &w.router,
        "POST",
        &format!("/v1/consents/{}/withdraw", alice.consent),
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{withdrawn}");
    assert_eq!(withdrawn["revocations"][0]["record_id"], a["record_id"]);
    assert_eq!(withdrawn["revocations"][0]["stage"], "finalized");
    let (_, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert!(!selected(&r).contains(&a["record_id"].as_str().expect("id").to_owned()));
    // Proposals naming the withdrawn consent are rejected.
    let again = propose(
        &w,
        &alice.key,
        &preference(
            "a2",
            "alice",
            "Alice prefers post",
            Some(alice.consent.clone()),
        ),
    )
    .await;
    assert_eq!(again["decision"], "rejected", "{again}");

    // Erasure of bob by the admin: every memory about or by bob, receipts, keys disabled.
    let (status, erased) = send(
        &w.router,
        "POST",
        "/v1/admin/tenants/tenant-a/principals/bob/erase",
        Some(&w.admin_key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["complete"], true, "{erased}");
    let ids: Vec<&str> = erased["revocations"]
        .as_array()
        .expect("list")
        .iter()
        .map(|r| r["record_id"].as_str().unwrap_or(""))
        .collect();
    assert!(
        ids.contains(&b["record_id"].as_str().expect("id"))
            && ids.contains(&b2["record_id"].as_str().expect("id")),
        "{erased}"
    );
    let (status, r) = send(&w.router, "GET", "/v1/whoami", Some(&bob.key), None).await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::UNAUTHORIZED, "invalid_key")
    );
    // Alice no longer sees bob's workspace fact.
    let (_, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert!(!r["context"].as_str().unwrap_or("").contains("runbook"));
    // Self-service erasure.
    let (status, mine) = send(
        &w.router,
        "POST",
        "/v1/erasure",
        Some(&w.principals[2].key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(mine["complete"], true);
}

#[tokio::test]
async fn export_then_import_round_trips_through_the_gate() {
    let w = world();
    let alice = &w.principals[0];
    propose(
        &w,
        &alice.key,
        &workspace_fact("e1", WORKSPACE, "The wiki lives at /docs"),
    )
    .await;
    propose(
        &w,
        &alice.key,
        &preference(
            "e2",
            "alice",
            "Alice likes short answers",
            Some(alice.consent.clone()),
        ),
    )
    .await;
    let (status, raw, _) = send_raw(&w.router, "GET", "/v1/export", Some(&alice.key), None).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(raw).expect("utf8");
    assert_eq!(text.lines().count(), 2);
    // Import into the other tenant's alice: ids are taken from the export,
    // tenant and principal from the key; the gate decides again.
    let target = &w.principals[2];
    let (status, _, report) = send_raw(
        &w.router,
        "POST",
        "/v1/import",
        Some(&target.key),
        Some(text.clone().into_bytes()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(report["lines"], 2, "{report}");
    // Both are accepted: the preference named the other tenant's consent
    // digest, which is no consent of the importing principal's, so the
    // import names hers (as `POST /v1/facts` does) and the gate checks it.
    assert_eq!(report["accepted"], 2, "{report}");
    assert_eq!(report["rejected"], 0, "{report}");
    // Garbage lines are reported, not fatal.
    let mixed = format!("{{not json}}\n{}", text.lines().next().unwrap_or(""));
    let (status, _, report) = send_raw(
        &w.router,
        "POST",
        "/v1/import",
        Some(&target.key),
        Some(mixed.into_bytes()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["errors"]["1"], "malformed_line");
    // A body with nothing importable is a 400.
    let (status, _, report) = send_raw(
        &w.router,
        "POST",
        "/v1/import",
        Some(&target.key),
        Some(b"{not json}\n".to_vec()),
    )
    .await;
    assert_eq!(
        (status, error_code(&report).as_str()),
        (StatusCode::BAD_REQUEST, "malformed_body")
    );
}

#[tokio::test]
async fn metrics_count_requests_without_ids_or_content() {
    let w = world();
    let alice = &w.principals[0];
    propose(
        &w,
        &alice.key,
        &preference(
            "m1",
            "alice",
            "Alice secret-ish preference text",
            Some(alice.consent.clone()),
        ),
    )
    .await;
    send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "preference"})),
    )
    .await;
    // A lexical recall and a recall without a query embed nothing.
    for body in [json!({"query": "preference", "mode": "lexical"}), json!({})] {
        send(
            &w.router,
            "POST",
            "/v1/recall",
            Some(&alice.key),
            Some(body),
        )
        .await;
    }
    let (status, raw, _) = send_raw(&w.router, "GET", "/metrics", Some(&w.admin_key), None).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(raw).expect("utf8");
    assert!(text.contains("mosaic_http_requests_total"), "{text}");
    assert!(
        text.contains("mosaic_http_request_duration_seconds_bucket"),
        "{text}"
    );
    assert!(
        text.contains("mosaic_write_decisions_total{decision=\"accepted\"} 1"),
        "{text}"
    );
    assert!(text.contains("mosaic_recalls_total 3"), "{text}");
    // The hybrid recall's query was embedded, timed apart.
    assert!(
        text.contains("mosaic_query_embedding_seconds_count 1"),
        "{text}"
    );
    // The proposal's phases, once each (it has no claims, so it was not
    // written under the lock), and the acknowledgement that made it
    // readable.
    assert_eq!(crate::common::write_phases(&text), [1, 1, 1, 0], "{text}");
    assert!(
        crate::common::counter(&text, "mosaic_outbox_acknowledge_seconds_count") >= 1,
        "{text}"
    );
    for forbidden in ["alice", "tenant-a", "secret-ish", "mk_"] {
        assert!(!text.contains(forbidden), "metrics leak {forbidden}");
    }
}

#[tokio::test]
async fn state_survives_a_restart_of_the_service() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = crate::common::config(dir.path());
    let record_id;
    let key;
    {
        let (service, _) = mosaic_service::Service::open(config.clone()).expect("open");
        let admin_key = std::fs::read_to_string(config.data_dir.join("admin.key")).expect("key");
        let admin = service.authenticate(Some(admin_key.trim())).expect("admin");
        service
            .create_tenant(
                &admin,
                &mosaic_service::api::admin::CreateTenantRequest {
                    tenant_id: "t".into(),
                    policy: crate::common::self_quoting_policy(),
                },
            )
            .expect("tenant");
        let created = service
            .create_key(
                &admin,
                &mosaic_service::api::admin::CreateKeyRequest {
                    tenant_id: "t".into(),
                    principal_id: "p".into(),
                    grant: None,
                },
            )
            .expect("key");
        key = created.key;
        let cred = service.authenticate(Some(&key)).expect("cred");
        let r = service
            .propose(
                &cred,
                &workspace_fact("s1", "default", "Restart-proof fact about kettles"),
            )
            .expect("propose");
        assert_eq!(r.decision, "accepted");
        record_id = r.record_id;
        service.reconcile().expect("reconcile");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(config.data_dir.join("admin.key"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (service, report) = mosaic_service::Service::open(config).expect("reopen");
    assert!(
        report.admin_key_file.is_none(),
        "the admin key is generated once"
    );
    let cred = service.authenticate(Some(&key)).expect("key survives");
    let r = service
        .recall(
            &cred,
            &mosaic_service::api::RecallRequest {
                query: Some("kettles".into()),
                ..Default::default()
            },
        )
        .expect("recall");
    assert_eq!(r.selected_record_ids, vec![record_id]);
    assert!(
        service.doctor().expect("doctor").is_empty(),
        "{:?}",
        service.doctor()
    );
}
