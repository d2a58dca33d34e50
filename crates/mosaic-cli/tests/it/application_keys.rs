//! Application keys: a key that acts for the end users of one application
//! inside its tenant, each request naming its user (`X-Mosaic-User`).
//! Every isolation case names the layer that stops it.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use mosaic_service::examples::preference;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common::{WORKSPACE, World, error_code, send, world};

/// One request with an optional `X-Mosaic-User` header.
async fn send_as(
    w: &World,
    method: &str,
    path: &str,
    key: &str,
    user: Option<&[u8]>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {key}"));
    if let Some(user) = user {
        builder = builder.header(
            "x-mosaic-user",
            axum::http::HeaderValue::from_bytes(user).expect("header value"),
        );
    }
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .expect("request");
    let response = w.router.clone().oneshot(request).await.expect("answers");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn app_key(w: &World, tenant: &str, users: Value) -> (String, String) {
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/admin/application-keys",
        Some(&w.admin_key),
        Some(json!({
            "tenant_id": tenant,
            "application_id": "app1",
            "users": users,
            "grant": {"allowed_workspace_ids": [WORKSPACE]}
        })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    (
        body["key"].as_str().expect("key").to_owned(),
        body["key_id"].as_str().expect("key id").to_owned(),
    )
}

/// The user gives consent and writes a principal-scoped preference;
/// returns its record id.
async fn remember_as(w: &World, key: &str, user: &str, text: &str) -> String {
    let (status, consent) = send_as(
        w,
        "POST",
        "/v1/consents",
        key,
        Some(user.as_bytes()),
        Some(json!({"purpose": "personalization", "ui_release": "consent-ui-v1"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{consent}");
    let request = preference(
        &format!("pref-{user}"),
        user,
        text,
        consent["consent_sha256"].as_str().map(str::to_owned),
    );
    let (status, body) = send_as(
        w,
        "POST",
        "/v1/memories",
        key,
        Some(user.as_bytes()),
        Some(serde_json::to_value(&request).expect("json")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "accepted", "{body}");
    body["record_id"].as_str().expect("record id").to_owned()
}

async fn recalled(w: &World, key: &str, user: Option<&str>, query: &str) -> Vec<String> {
    let (status, body) = send_as(
        w,
        "POST",
        "/v1/recall",
        key,
        user.map(str::as_bytes),
        Some(json!({"query": query, "max_records": 50})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_value(body["selected_record_ids"].clone()).expect("ids")
}

#[tokio::test]
async fn an_application_key_acts_for_each_named_user_and_they_stay_apart() {
    let w = world();
    let (key, _) = app_key(&w, "tenant-a", json!(["app1:*"])).await;
    let u1 = remember_as(&w, &key, "app1:u1", "u1 drinks oolong tea every morning").await;
    let u2 = remember_as(&w, &key, "app1:u2", "u2 drinks oolong tea every evening").await;

    // Each user recalls their own memory; never the other's, although both
    // act through one key (the read selector's principal check: a
    // principal-scoped record is visible only to its principal).
    assert_eq!(
        recalled(&w, &key, Some("app1:u1"), "oolong tea").await,
        [u1.as_str()]
    );
    assert_eq!(
        recalled(&w, &key, Some("app1:u2"), "oolong tea").await,
        [u2.as_str()]
    );
    let (status, body) = send_as(
        &w,
        "GET",
        &format!("/v1/memories/{u1}"),
        &key,
        Some(b"app1:u2"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, list) = send_as(
        &w,
        "GET",
        "/v1/memories?type=principal&principal_id=app1:u2",
        &key,
        Some(b"app1:u2"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert!(list.to_string().contains(&u2), "{list}");
    assert!(!list.to_string().contains(&u1), "{list}");
    // Listing the other user's subject is refused (the service's subject
    // check against the acting user's grant).
    let (status, list) = send_as(
        &w,
        "GET",
        "/v1/memories?type=principal&principal_id=app1:u1",
        &key,
        Some(b"app1:u2"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{list}");
    assert_eq!(error_code(&list), "subject_not_permitted");

    // The user is the principal; its grant was made on first use from the
    // key's bounds.
    let (status, me) = send_as(&w, "GET", "/v1/whoami", &key, Some(b"app1:u1"), None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["credential"]["role"], "principal");
    assert_eq!(me["credential"]["principal_id"], "app1:u1");
    assert_eq!(me["credential"]["tenant_id"], "tenant-a");
    assert_eq!(me["grant"]["allowed_workspace_ids"], json!([WORKSPACE]));

    // Without a user an application key does nothing (the HTTP extractor,
    // Credential::acting_for).
    let (status, body) = send_as(&w, "POST", "/v1/recall", &key, None, Some(json!({}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_code(&body), "user_required");

    // Nor can it administer, even naming a user (the service's admin check).
    let (status, body) = send_as(&w, "GET", "/v1/admin/keys", &key, Some(b"app1:u1"), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(error_code(&body), "admin_required");
}

#[tokio::test]
async fn an_application_key_never_acts_outside_its_users_or_its_tenant() {
    let w = world();
    let (key, _) = app_key(&w, "tenant-a", json!(["app1:*", "carol"])).await;

    // Existing principals of its own tenant and of the other tenant, and
    // ids that only look like the pattern, are outside the bounds
    // (Credential::acting_for, before any service function runs).
    for user in ["alice", "bob", "app1:", "app10:x", "app1", "carol2"] {
        let (status, body) = send_as(
            &w,
            "POST",
            "/v1/recall",
            &key,
            Some(user.as_bytes()),
            Some(json!({})),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{user}: {body}");
        assert_eq!(error_code(&body), "user_not_allowed", "{user}");
    }
    // A user id that is not an identifier, and a header that is not text.
    for user in [&b"app1:two words"[..], b"\xff\xfe"] {
        let (status, body) =
            send_as(&w, "POST", "/v1/recall", &key, Some(user), Some(json!({}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(error_code(&body), "invalid_user");
    }

    // The same user id exists in tenant-b with its own memory: the tenant
    // comes from the key, so acting for "app1:carol" reaches tenant-a's
    // user of that name, never tenant-b's (the credential binds the
    // tenant; the store's eligibility query and the selector filter by it).
    let (status, created) = send(
        &w.router,
        "POST",
        "/v1/admin/keys",
        Some(&w.admin_key),
        Some(
            json!({"tenant_id": "tenant-b", "principal_id": "app1:carol",
                    "grant": {"allowed_workspace_ids": [WORKSPACE]}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let b_key = created["key"].as_str().expect("key").to_owned();
    let foreign = remember_as(&w, &b_key, "app1:carol", "carol keeps a red bicycle").await;
    assert_eq!(
        recalled(&w, &b_key, None, "red bicycle").await,
        [foreign.as_str()]
    );
    assert!(
        recalled(&w, &key, Some("app1:carol"), "red bicycle")
            .await
            .is_empty()
    );
    let (status, body) = send_as(
        &w,
        "GET",
        &format!("/v1/memories/{foreign}"),
        &key,
        Some(b"app1:carol"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // Naming the other tenant in a body is refused like for any key (the
    // service's identity check).
    let (status, body) = send_as(
        &w,
        "POST",
        "/v1/recall",
        &key,
        Some(b"app1:carol"),
        Some(json!({"tenant_id": "tenant-b"})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // A user who already holds a grant wider than the key's bounds (here:
    // another workspace, granted by the admin) is not acted for.
    let (status, body) = send(
        &w.router,
        "PUT",
        "/v1/admin/tenants/tenant-a/principals/app1:wide/grant",
        Some(&w.admin_key),
        Some(json!({"allowed_workspace_ids": [WORKSPACE, "ws-other"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = send_as(
        &w,
        "POST",
        "/v1/recall",
        &key,
        Some(b"app1:wide"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(error_code(&body), "grant_outside_key_bounds");
}

#[tokio::test]
async fn a_user_key_never_reaches_another_user() {
    let w = world();
    let alice = &w.principals[0];
    let bob = &w.principals[1];
    assert_eq!(
        (alice.principal.as_str(), bob.principal.as_str()),
        ("alice", "bob")
    );
    let bobs = remember_as(&w, &bob.key, "bob", "bob collects blue stamps").await;
    // Naming another user with a principal key is refused before any
    // service function runs (Credential::acting_for).
    for user in ["bob", "app1:bob"] {
        let (status, body) = send_as(
            &w,
            "POST",
            "/v1/recall",
            &alice.key,
            Some(user.as_bytes()),
            Some(json!({"query": "blue stamps"})),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(error_code(&body), "user_mismatch");
    }
    let (status, body) = send_as(
        &w,
        "GET",
        &format!("/v1/memories/{bobs}"),
        &alice.key,
        Some(b"bob"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // Naming itself changes nothing.
    assert!(
        !recalled(&w, &alice.key, Some("alice"), "blue stamps")
            .await
            .contains(&bobs)
    );
    // The admin key acts for nobody.
    let (status, body) = send_as(&w, "GET", "/v1/whoami", &w.admin_key, Some(b"alice"), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(error_code(&body), "user_mismatch");
}

#[tokio::test]
async fn application_keys_are_bounded_listed_and_revocable() {
    let w = world();
    // Bad requests are refused by the admin service before a key exists.
    for (body, status, code) in [
        (
            json!({"tenant_id": "tenant-a", "application_id": "app1", "users": []}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            json!({"tenant_id": "tenant-a", "application_id": "app1", "users": ["a*b"]}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            json!({"tenant_id": "tenant-a", "application_id": "app1", "users": ["**"]}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            json!({"tenant_id": "nowhere", "application_id": "app1", "users": ["u"]}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ] {
        let (got, answer) = send(
            &w.router,
            "POST",
            "/v1/admin/application-keys",
            Some(&w.admin_key),
            Some(body.clone()),
        )
        .await;
        assert_eq!(got, status, "{body}: {answer}");
        assert_eq!(error_code(&answer), code, "{body}");
    }
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/admin/application-keys",
        Some(&w.principals[0].key),
        Some(json!({"tenant_id": "tenant-a", "application_id": "app1", "users": ["u"]})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(error_code(&body), "admin_required");

    // Never wider than the tenant policy: kinds the policy does not allow
    // are refused at creation, and a user's grant made after the policy
    // narrowed holds only what the policy allows.
    let (status, body) = send(
        &w.router,
        "PUT",
        "/v1/admin/tenants/tenant-a/policy",
        Some(&w.admin_key),
        Some(json!({"allowed_kinds": ["episodic", "semantic"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/admin/application-keys",
        Some(&w.admin_key),
        Some(
            json!({"tenant_id": "tenant-a", "application_id": "app1", "users": ["u"],
                    "grant": {"allowed_kinds": ["procedural"]}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_code(&body), "kinds_outside_policy");
    let (key, key_id) = app_key(&w, "tenant-a", json!(["app1:*"])).await;
    let (status, body) = send(
        &w.router,
        "PUT",
        "/v1/admin/tenants/tenant-a/policy",
        Some(&w.admin_key),
        Some(json!({"allowed_kinds": ["semantic"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, me) = send_as(&w, "GET", "/v1/whoami", &key, Some(b"app1:late"), None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["grant"]["allowed_kinds"], json!(["semantic"]), "{me}");

    // Listed with its bounds, and disabled like any key.
    let (status, keys) = send(&w.router, "GET", "/v1/admin/keys", Some(&w.admin_key), None).await;
    assert_eq!(status, StatusCode::OK, "{keys}");
    let listed = keys
        .as_array()
        .expect("keys")
        .iter()
        .find(|k| k["key_id"] == key_id.as_str())
        .expect("listed");
    assert_eq!(listed["role"], "application");
    assert_eq!(listed["tenant_id"], "tenant-a");
    assert_eq!(listed["application"]["users"], json!(["app1:*"]));
    assert!(!keys.to_string().contains(&key), "no secret in the listing");
    let (status, body) = send(
        &w.router,
        "DELETE",
        &format!("/v1/admin/keys/{key_id}"),
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = send_as(&w, "GET", "/v1/whoami", &key, Some(b"app1:late"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
}
