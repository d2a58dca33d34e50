//! Point 2: no endpoint returns another tenant's or another principal's
//! data. Two tenants, two principals each, near-identical content.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use mosaic_harness::MemoryKind;
use mosaic_harness::MemorySubject;
use mosaic_harness::memory_write::MemoryPurpose;
use mosaic_service::examples::{preference, supported_proposal, workspace_fact};
use serde_json::{Value, json};

use crate::common::{WORKSPACE, World, error_code, send, world};

/// Who owns what: record id -> (tenant, principal, principal-scoped?).
struct Written {
    owner: BTreeMap<String, (String, String, bool)>,
    content: BTreeMap<String, String>,
}

async fn write_everything(w: &World) -> Written {
    let mut owner = BTreeMap::new();
    let mut content = BTreeMap::new();
    for p in &w.principals {
        let who = format!("{}/{}", p.tenant, p.principal);
        let requests = vec![
            (
                true,
                preference(
                    &format!("pref-{who}"),
                    &p.principal,
                    &format!("{who} likes green tea in the morning"),
                    Some(p.consent.clone()),
                ),
            ),
            (
                false,
                workspace_fact(
                    &format!("ws-{who}"),
                    WORKSPACE,
                    &format!(
                        "{who}: the deploy window is Tuesday morning ({})",
                        crate::common::distinct(&who)
                    ),
                ),
            ),
            (
                true,
                supported_proposal(
                    &format!("run-{who}"),
                    &format!("{who} run state: green tea order pending"),
                    MemoryKind::Working,
                    MemoryPurpose::RunContinuity,
                    MemorySubject::Run {
                        run_id: format!("run-{}", p.principal),
                    },
                    None,
                ),
            ),
        ];
        for (private, request) in requests {
            let (status, body) = send(
                &w.router,
                "POST",
                "/v1/memories",
                Some(&p.key),
                Some(serde_json::to_value(&request).expect("json")),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(body["decision"], "accepted", "{body}");
            let id = body["record_id"].as_str().expect("record id").to_owned();
            owner.insert(id.clone(), (p.tenant.clone(), p.principal.clone(), private));
            content.insert(id, request.content.clone());
        }
    }
    Written { owner, content }
}

fn may_see(written: &Written, id: &str, tenant: &str, principal: &str) -> bool {
    let (t, p, private) = &written.owner[id];
    t == tenant && (!*private || p == principal)
}

#[tokio::test]
async fn no_endpoint_returns_another_tenants_or_principals_data() {
    let w = world();
    let written = write_everything(&w).await;
    assert_eq!(written.owner.len(), 12);
    for p in &w.principals {
        let key = Some(p.key.as_str());
        // Recall, with and without a query, with and without the run.
        for body in [
            json!({"explain": true}),
            json!({"query": "green tea morning", "explain": true}),
            json!({"query": "deploy window", "run_id": format!("run-{}", p.principal), "max_records": 50, "explain": true}),
        ] {
            let (status, r) = send(&w.router, "POST", "/v1/recall", key, Some(body.clone())).await;
            assert_eq!(status, StatusCode::OK, "{r}");
            let selected: Vec<String> =
                serde_json::from_value(r["selected_record_ids"].clone()).expect("ids");
            assert!(!selected.is_empty(), "{body}: own memories are recalled");
            for id in &selected {
                assert!(
                    may_see(&written, id, &p.tenant, &p.principal),
                    "{}/{} recalled {id}",
                    p.tenant,
                    p.principal
                );
            }
            for decision in r["decisions"].as_array().expect("decisions") {
                let id = decision["record_id"].as_str().expect("id");
                assert!(
                    may_see(&written, id, &p.tenant, &p.principal),
                    "decision names a foreign record {id}"
                );
            }
            let context = r["context"].as_str().expect("context");
            for (id, text) in &written.content {
                if !may_see(&written, id, &p.tenant, &p.principal) {
                    assert!(
                        !context.contains(text.as_str()),
                        "foreign content leaked into context"
                    );
                }
            }
        }
        // Get: foreign records look exactly like missing ones.
        for (id, text) in &written.content {
            let (status, r) =
                send(&w.router, "GET", &format!("/v1/memories/{id}"), key, None).await;
            if may_see(&written, id, &p.tenant, &p.principal) {
                assert_eq!(status, StatusCode::OK, "{r}");
                assert_eq!(r["content"].as_str(), Some(text.as_str()));
            } else {
                assert_eq!(
                    status,
                    StatusCode::NOT_FOUND,
                    "{id} visible to {}/{}",
                    p.tenant,
                    p.principal
                );
                assert_eq!(error_code(&r), "not_found");
            }
            // Revoke and deletion status of foreign records: 404, nothing changes.
            if !may_see(&written, id, &p.tenant, &p.principal) {
                let (status, _) = send(
                    &w.router,
                    "POST",
                    &format!("/v1/memories/{id}/revoke"),
                    key,
                    Some(json!({})),
                )
                .await;
                assert_eq!(status, StatusCode::NOT_FOUND);
                let (status, _) = send(
                    &w.router,
                    "GET",
                    &format!("/v1/memories/{id}/deletion"),
                    key,
                    None,
                )
                .await;
                assert_eq!(status, StatusCode::NOT_FOUND);
                // Nor a place in a scope's commitment (the service's
                // visibility check, before the store is asked).
                let (status, r) = send(
                    &w.router,
                    "GET",
                    &format!("/v1/memories/{id}/inclusion"),
                    key,
                    None,
                )
                .await;
                assert_eq!(status, StatusCode::NOT_FOUND);
                assert_eq!(error_code(&r), "not_found");
            }
        }
        // List by subject: another principal is refused; a workspace lists only this tenant.
        for other in ["alice", "bob"].iter().filter(|o| **o != p.principal) {
            let (status, r) = send(
                &w.router,
                "GET",
                &format!("/v1/memories?type=principal&principal_id={other}"),
                key,
                None,
            )
            .await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{r}");
            assert_eq!(error_code(&r), "subject_not_permitted");
        }
        let (status, r) = send(
            &w.router,
            "GET",
            &format!("/v1/memories?type=workspace&workspace_id={WORKSPACE}"),
            key,
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{r}");
        for entry in r.as_array().expect("list") {
            let id = entry["record_id"].as_str().expect("id");
            assert!(may_see(&written, id, &p.tenant, &p.principal));
        }
        // Export: only what this principal may see.
        let (status, raw, _) =
            crate::common::send_raw(&w.router, "GET", "/v1/export", key, None).await;
        assert_eq!(status, StatusCode::OK);
        let text = String::from_utf8(raw).expect("utf8");
        assert!(!text.is_empty());
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).expect("json line");
            let id = v["data"]["record"]["record_id"].as_str().expect("id");
            assert!(
                may_see(&written, id, &p.tenant, &p.principal),
                "exported foreign {id}"
            );
        }
        // Verify another tenant's proposal: 404.
        for (id, (t, _, _)) in &written.owner {
            if t != &p.tenant {
                let (status, _, _) = crate::common::send_raw(
                    &w.router,
                    "GET",
                    &format!("/v1/memories/{id}"),
                    key,
                    None,
                )
                .await;
                assert_eq!(status, StatusCode::NOT_FOUND);
            }
        }
    }
    // Consents of other principals cannot be withdrawn by anyone else.
    let (a, b) = (&w.principals[0], &w.principals[3]);
    let (status, r) = send(
        &w.router,
        "POST",
        &format!("/v1/consents/{}/withdraw", b.consent),
        Some(&a.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{r}");
    // Nor by another principal of the same tenant: the service's ownership
    // check over the store's consents answers exactly as for a digest
    // nobody gave.
    let same_tenant = &w.principals[1];
    assert_eq!(same_tenant.tenant, a.tenant);
    let withdraw = |digest: String| {
        let router = w.router.clone();
        let key = a.key.clone();
        async move {
            send(
                &router,
                "POST",
                &format!("/v1/consents/{digest}/withdraw"),
                Some(&key),
                Some(json!({})),
            )
            .await
        }
    };
    let (status, foreign) = withdraw(same_tenant.consent.clone()).await;
    let (missing_status, missing) = withdraw("ab".repeat(32)).await;
    assert_eq!(
        (status, missing_status),
        (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND)
    );
    assert_eq!(
        crate::common::error_code(&foreign),
        crate::common::error_code(&missing)
    );
    // The consent is untouched: its owner still withdraws it.
    let (status, r) = send(
        &w.router,
        "POST",
        &format!("/v1/consents/{}/withdraw", same_tenant.consent),
        Some(&same_tenant.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
}

#[tokio::test]
async fn a_body_naming_another_tenant_or_principal_is_refused() {
    let w = world();
    let p = &w.principals[0];
    let mut request = serde_json::to_value(preference(
        "x",
        &p.principal,
        "tea",
        Some(p.consent.clone()),
    ))
    .expect("json");
    request["tenant_id"] = json!("tenant-b");
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&p.key),
        Some(request.clone()),
    )
    .await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::FORBIDDEN, "tenant_mismatch")
    );
    request["tenant_id"] = json!(p.tenant);
    request["principal_id"] = json!("bob");
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&p.key),
        Some(request),
    )
    .await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::FORBIDDEN, "principal_mismatch")
    );
    // A subject naming another principal is refused the same way.
    let about_bob = serde_json::to_value(preference("y", "bob", "tea", None)).expect("json");
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&p.key),
        Some(about_bob),
    )
    .await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::FORBIDDEN, "principal_mismatch")
    );
    for body in [
        json!({"tenant_id": "tenant-b"}),
        json!({"principal_id": "bob"}),
    ] {
        let (status, r) = send(&w.router, "POST", "/v1/recall", Some(&p.key), Some(body)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{r}");
    }
    // The same identities are accepted when they are the credential's own.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&p.key),
        Some(json!({"tenant_id": p.tenant, "principal_id": p.principal})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    // The admin key reads and writes no memory.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&w.admin_key),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::FORBIDDEN, "principal_required")
    );
    // A principal key cannot administer.
    let (status, r) = send(&w.router, "GET", "/v1/admin/keys", Some(&p.key), None).await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::FORBIDDEN, "admin_required")
    );
    // A workspace outside the grant is refused.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&p.key),
        Some(json!({"workspace_id": "ws-other"})),
    )
    .await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::FORBIDDEN, "workspace_not_granted")
    );
}

/// The ids of `list` named by their content (ids differ between worlds;
/// the content written does not).
fn by_content(written: &Written, list: &Value) -> Value {
    let mut texts: Vec<String> = list
        .as_array()
        .expect("ids")
        .iter()
        .map(|id| written.content[id.as_str().expect("id")].clone())
        .collect();
    texts.sort();
    json!(texts)
}

/// What tenant B reads that could carry a revocation generation or a
/// count: `/health` without a key (whole), its recall's snapshot
/// generation and selection, its listing, then its own revocation's
/// generations (answer and deletion receipt) and its recall after it.
async fn what_tenant_b_reads(w: &World, written: &Written) -> Vec<(String, Value)> {
    let b = &w.principals[2];
    let key = Some(b.key.as_str());
    let mut seen = Vec::new();
    let (_, health) = send(&w.router, "GET", "/health", None, None).await;
    seen.push(("health".to_owned(), health));
    let recall = json!({"query": "green tea morning", "max_records": 50});
    let (status, r) = send(&w.router, "POST", "/v1/recall", key, Some(recall.clone())).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    seen.push((
        "recall".to_owned(),
        json!([
            r["snapshot"]["revocation_generation"],
            by_content(written, &r["selected_record_ids"])
        ]),
    ));
    let (status, listed) = send(
        &w.router,
        "GET",
        &format!("/v1/memories?type=principal&principal_id={}", b.principal),
        key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let listed: Vec<Value> = listed
        .as_array()
        .expect("list")
        .iter()
        .map(|e| {
            let id = e["record_id"].as_str().expect("id");
            json!([written.content[id], e["state"]])
        })
        .collect();
    seen.push(("listing".to_owned(), json!(listed)));
    // The same memory in both worlds (ids differ between them).
    let own = written
        .owner
        .iter()
        .find(|(id, (t, p, private))| {
            t == &b.tenant
                && p == &b.principal
                && *private
                && written.content[id.as_str()].contains("likes green tea")
        })
        .map(|(id, _)| id.clone())
        .expect("b's own memory");
    let (status, revoked) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{own}/revoke"),
        key,
        Some(json!({"authority_ref": "ticket-b"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert_eq!(revoked["stage"], "finalized", "{revoked}");
    let receipt = &revoked["deletion_receipt"]["body"];
    seen.push((
        "revocation".to_owned(),
        json!([
            revoked["revocation_generation"],
            receipt["revocation_generation"],
            receipt["stores"]
                .as_array()
                .expect("stores")
                .iter()
                .map(|s| s["acknowledged_generation"].clone())
                .collect::<Vec<_>>(),
        ]),
    ));
    let (_, r) = send(&w.router, "POST", "/v1/recall", key, Some(recall)).await;
    seen.push((
        "recall after".to_owned(),
        json!([
            r["snapshot"]["revocation_generation"],
            by_content(written, &r["selected_record_ids"])
        ]),
    ));
    seen
}

/// Tenant A's revocations leave no trace in what tenant B reads: the
/// same reads give the same answers (each field that is not a time or a
/// fresh id) with and without A's revocation. Layers: the service's
/// tenant revocation generation (`Store::tenant_revocation_generation`:
/// recall snapshots, revocation answers and deletion receipts carry the
/// tenant's generation, not the store's), and `/health`, which anyone may
/// read and which tells nothing that moves with a tenant's memory.
#[tokio::test]
async fn another_tenants_revocation_leaves_no_trace_in_what_a_tenant_reads() {
    let mut answers = Vec::new();
    for a_revokes in [false, true] {
        let w = world();
        let written = write_everything(&w).await;
        let a = &w.principals[0];
        if a_revokes {
            for (id, (t, p, _)) in &written.owner {
                if t == &a.tenant && p == &a.principal {
                    let (status, revoked) = send(
                        &w.router,
                        "POST",
                        &format!("/v1/memories/{id}/revoke"),
                        Some(&a.key),
                        Some(json!({"authority_ref": "ticket-a"})),
                    )
                    .await;
                    assert_eq!(status, StatusCode::OK, "{revoked}");
                }
            }
            // A sees its own revocations move its generation.
            let (_, r) = send(
                &w.router,
                "POST",
                "/v1/recall",
                Some(&a.key),
                Some(json!({"query": "green tea"})),
            )
            .await;
            assert!(
                r["snapshot"]["revocation_generation"].as_u64() >= Some(1),
                "{r}"
            );
        }
        answers.push(what_tenant_b_reads(&w, &written).await);
    }
    let (without, with) = (&answers[0], &answers[1]);
    for ((what, before), (_, after)) in without.iter().zip(with) {
        assert_eq!(
            before, after,
            "{what} moved with another tenant's revocation"
        );
    }
    // B's own revocation is its tenant's first.
    assert_eq!(with[3].1[0], json!(1), "{:?}", with[3]);
}
