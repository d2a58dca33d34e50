//! Ids are tenant-local and a record the key may not see answers exactly
//! like a missing one: two tenants, two principals each, one client-chosen
//! id used by all four, and every route that names a record or proposal
//! (get, deletion, revoke, verify, derived_from, supersedes) answered
//! identically for a hidden id and an id that never existed.

use axum::http::StatusCode;
use mosaic_server::examples::{preference, workspace_fact};
use serde_json::{Value, json};

use crate::common::{Principal, WORKSPACE, World, error_code, send, world};

const CLIENT_RECORD_ID: &str = "shared-record";
const CLIENT_PROPOSAL_ID: &str = "shared-proposal";

/// A private memory with the shared client ids.
fn private(p: &Principal) -> Value {
    let mut body = serde_json::to_value(preference(
        &format!("oracle-{}-{}", p.tenant, p.principal),
        &p.principal,
        &format!("{} of {} keeps a private note", p.principal, p.tenant),
        Some(p.consent.clone()),
    ))
    .expect("json");
    body["record_id"] = json!(CLIENT_RECORD_ID);
    body["proposal_id"] = json!(CLIENT_PROPOSAL_ID);
    body
}

/// The answer, with `id` replaced by a placeholder, so a hidden id and a
/// missing one compare equal exactly when they answer alike.
async fn answer(
    w: &World,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
    id: &str,
) -> (StatusCode, String) {
    let path = path.replace("{id}", id);
    let body =
        body.map(|b| serde_json::from_str(&b.to_string().replace("{id}", id)).expect("json"));
    let (status, r) = send(&w.router, method, &path, Some(key), body).await;
    (status, r.to_string().replace(id, "<id>"))
}

/// A proposal that names `{id}` as its lineage (declared as a source too).
fn deriving(p: &Principal) -> Value {
    let mut body = serde_json::to_value(workspace_fact(
        &format!("derive-{}-{}", p.tenant, p.principal),
        WORKSPACE,
        "the summary of a note",
    ))
    .expect("json");
    let mut source = body["sources"][0].clone();
    source["source_id"] = json!("{id}");
    body["sources"]
        .as_array_mut()
        .expect("sources")
        .push(source);
    body["derived_from"] = json!(["{id}"]);
    body
}

fn superseding(p: &Principal) -> Value {
    let mut body = serde_json::to_value(preference(
        &format!("supersede-{}-{}", p.tenant, p.principal),
        &p.principal,
        "a correction of a note",
        Some(p.consent.clone()),
    ))
    .expect("json");
    body["supersedes_record_id"] = json!("{id}");
    body["expected_line_generation"] = json!(1);
    body
}

#[tokio::test]
async fn client_ids_are_tenant_local_and_hidden_records_answer_like_missing_ones() {
    let w = world();
    // All four principals use the same client-chosen ids: each is accepted
    // and gets its own stored ids (no 409, no squatting across tenants or
    // principals).
    let mut ids = Vec::new();
    for p in &w.principals {
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/memories",
            Some(&p.key),
            Some(private(p)),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{}/{}: {r}", p.tenant, p.principal);
        assert_eq!(r["decision"], "accepted", "{r}");
        assert_eq!(r["replayed"], false, "{r}");
        let record = r["record_id"].as_str().expect("record id").to_owned();
        let proposal = r["proposal_id"].as_str().expect("proposal id").to_owned();
        assert_ne!(record, CLIENT_RECORD_ID);
        ids.push((record, proposal));
    }
    for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
            assert_ne!(a.0, b.0, "record ids collide");
            assert_ne!(a.1, b.1, "proposal ids collide");
        }
    }
    // The same key replays its own decision.
    let owner = &w.principals[0];
    let (_, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&owner.key),
        Some(private(owner)),
    )
    .await;
    assert_eq!(r["replayed"], true, "{r}");
    assert_eq!(r["record_id"].as_str(), Some(ids[0].0.as_str()));

    let (hidden_record, hidden_proposal) = ids[0].clone();
    let missing_record = "m-00000000000000000000000000000000";
    let missing_proposal = "p-00000000000000000000000000000000";
    // Same tenant other principal, and other tenant same principal name.
    let probers = [&w.principals[1], &w.principals[2]];
    for prober in probers {
        let who = format!("{}/{}", prober.tenant, prober.principal);
        let record_routes: Vec<(&str, &str, Option<Value>)> = vec![
            ("GET", "/v1/memories/{id}", None),
            ("GET", "/v1/memories/{id}/deletion", None),
            ("POST", "/v1/memories/{id}/revoke", Some(json!({}))),
            ("POST", "/v1/memories", Some(deriving(prober))),
            ("POST", "/v1/memories", Some(superseding(prober))),
        ];
        for (method, path, body) in record_routes {
            let hidden = answer(&w, method, path, &prober.key, body.clone(), &hidden_record).await;
            let missing = answer(&w, method, path, &prober.key, body, missing_record).await;
            assert_eq!(
                hidden, missing,
                "{who} {method} {path}: hidden differs from missing"
            );
            assert_eq!(
                hidden.0,
                StatusCode::NOT_FOUND,
                "{who} {method} {path}: {}",
                hidden.1
            );
        }
        let verify = Some(json!({"kind": "write", "proposal_id": "{id}"}));
        let hidden = answer(
            &w,
            "POST",
            "/v1/verify",
            &prober.key,
            verify.clone(),
            &hidden_proposal,
        )
        .await;
        let missing = answer(
            &w,
            "POST",
            "/v1/verify",
            &prober.key,
            verify,
            missing_proposal,
        )
        .await;
        assert_eq!(hidden, missing, "{who} verify: hidden differs from missing");
        assert_eq!(hidden.0, StatusCode::NOT_FOUND);
        // Naming the owner's *client* ids reaches only the prober's own.
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/verify",
            Some(&prober.key),
            Some(json!({"kind": "write", "proposal_id": CLIENT_PROPOSAL_ID})),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{r}");
        error_code(&r);
    }
    // The owner still sees, verifies and holds its record: no probe revoked
    // or superseded it.
    let (status, r) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{hidden_record}"),
        Some(&owner.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["state"], "active", "{r}");
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&owner.key),
        Some(json!({"kind": "write", "proposal_id": hidden_proposal})),
    )
    .await;
    assert_eq!(
        (status, r["valid"].clone()),
        (StatusCode::OK, json!(true)),
        "{r}"
    );
}

/// A shared (workspace) record stays verifiable by the other principals
/// who may read it: visibility, not authorship, decides.
#[tokio::test]
async fn a_readable_workspace_record_verifies_for_its_readers_only() {
    let w = world();
    let (alice, bob, other) = (&w.principals[0], &w.principals[1], &w.principals[2]);
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(
            serde_json::to_value(workspace_fact(
                "shared",
                WORKSPACE,
                "the build runs nightly",
            ))
            .expect("json"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let proposal = r["proposal_id"].clone();
    let verify = json!({"kind": "write", "proposal_id": proposal});
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&bob.key),
        Some(verify.clone()),
    )
    .await;
    assert_eq!(
        (status, r["valid"].clone()),
        (StatusCode::OK, json!(true)),
        "{r}"
    );
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&other.key),
        Some(verify),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{r}");
}
