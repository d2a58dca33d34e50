//! No memory expires silently: without a requested lifetime a memory lives
//! the tenant policy's `max_ttl_ms` (365 days unless the tenant sets it),
//! and every write answer (JSON API, facts' and conversation's endpoints,
//! mem0) says when it expires, as the stored record does.

use axum::http::StatusCode;
use mosaic_service::examples::{preference, workspace_fact};
use mosaic_service::instants::rfc3339;
use serde_json::{Value, json};

use crate::common::{Principal, WORKSPACE, World, send, world};

const DAY_MS: u64 = 86_400_000;

/// The stored record's `(created_at, expires_at)`.
async fn stored(w: &World, p: &Principal, record_id: &str) -> (u64, u64) {
    let (status, r) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}"),
        Some(&p.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    (
        r["record"]["created_at_unix_ms"].as_u64().expect("created"),
        r["record"]["expires_at_unix_ms"].as_u64().expect("expires"),
    )
}

/// Checks that a write answer's expiry is the stored record's, and
/// returns the record's lifetime.
async fn lifetime(w: &World, p: &Principal, answer: &Value) -> u64 {
    let record_id = answer["record_id"].as_str().expect("record id");
    let (created, expires) = stored(w, p, record_id).await;
    assert_eq!(answer["expires_at_unix_ms"], json!(expires), "{answer}");
    assert_eq!(answer["expires_at"], json!(rfc3339(expires)), "{answer}");
    expires - created
}

#[tokio::test]
async fn a_memory_lives_the_policys_lifetime_and_every_write_answer_says_until_when() {
    let w = world();
    let alice = &w.principals[0];
    // Without ttl_ms: the policy's max_ttl_ms, 365 days by default, not a
    // month.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(
            serde_json::to_value(preference(
                "lifetime-default",
                &alice.principal,
                "alice takes her coffee black",
                Some(alice.consent.clone()),
            ))
            .expect("json"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["decision"], "accepted", "{r}");
    assert_eq!(lifetime(&w, alice, &r).await, 365 * DAY_MS);
    // A requested lifetime is kept, and said.
    let mut body = serde_json::to_value(workspace_fact(
        "lifetime-asked",
        WORKSPACE,
        "the staging database is rebuilt every night",
    ))
    .expect("json");
    body["ttl_ms"] = json!(2 * DAY_MS);
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(lifetime(&w, alice, &r).await, 2 * DAY_MS);
    // A rejection expires nothing.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(
            serde_json::to_value(preference(
                "lifetime-refused",
                &alice.principal,
                "alice speaks Portuguese at home",
                None,
            ))
            .expect("json"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["decision"], "rejected", "{r}");
    assert_eq!(
        (&r["expires_at_unix_ms"], &r["expires_at"]),
        (&Value::Null, &Value::Null)
    );

    // Conversation messages live as long, and each says so.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/conversations/lifetimes/messages",
        Some(&alice.key),
        Some(json!({"messages": [{"role": "user", "content": "I moved to Porto last spring."}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let message = &r["messages"][0];
    assert_eq!(message["decision"], "accepted", "{r}");
    assert_eq!(lifetime(&w, alice, message).await, 365 * DAY_MS);

    // mem0's add and update say it too (RFC 3339).
    let (status, r) = send(
        &w.router,
        "POST",
        "/memories",
        Some(&alice.key),
        Some(json!({"messages": "I cycle to work.", "user_id": alice.principal})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let added = &r["results"][0];
    let id = added["id"].as_str().expect("id").to_owned();
    let (_, expires) = stored(&w, alice, &id).await;
    assert_eq!(added["expires_at"], json!(rfc3339(expires)), "{r}");
    let (status, r) = send(
        &w.router,
        "PUT",
        &format!("/memories/{id}"),
        Some(&alice.key),
        Some(json!({"text": "I take the train to work."})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let new_id = r["id"].as_str().expect("id").to_owned();
    assert_ne!(new_id, id, "{r}");
    let (created, expires) = stored(&w, alice, &new_id).await;
    assert_eq!(r["expires_at"], json!(rfc3339(expires)), "{r}");
    assert_eq!(expires - created, 365 * DAY_MS);

    // The tenant decides: a shorter max_ttl_ms is the new default.
    let (status, r) = send(
        &w.router,
        "PUT",
        &format!("/v1/admin/tenants/{}/policy", alice.tenant),
        Some(&w.admin_key),
        Some(json!({"max_ttl_ms": 10 * DAY_MS})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(
            serde_json::to_value(workspace_fact(
                "lifetime-tenant",
                WORKSPACE,
                "the release train leaves on Thursdays",
            ))
            .expect("json"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["decision"], "accepted", "{r}");
    assert_eq!(lifetime(&w, alice, &r).await, 10 * DAY_MS);

    // Carried to the new policy, a record keeps its remaining lifetime, at
    // most the new cap: none is refused for living longer than it allows.
    let (status, report) = send(
        &w.router,
        "POST",
        &format!("/v1/admin/tenants/{}/policy/carry", alice.tenant),
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert!(report["accepted"].as_u64() >= Some(2), "{report}");
    assert_eq!(
        report["refused_reasons"]["ttl_exceeds_policy"],
        Value::Null,
        "{report}"
    );
    let (status, history) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{new_id}/history"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let carried = history["superseded_by"].as_str().expect("carried");
    let (created, expires) = stored(&w, alice, carried).await;
    assert_eq!(expires - created, 10 * DAY_MS);
}
