//! Point 4: every bad input is a JSON error with a stable code and a 4xx
//! status, never a 5xx, never a partial write.

use axum::http::StatusCode;
use mosaic_server::openapi::OPERATIONS;
use mosaic_service::api::admin::{CreateKeyRequest, GrantRequest};
use mosaic_service::examples::preference;
use serde_json::{Value, json};

use crate::common::{error_code, send, send_raw, world, world_with};

fn concrete(path: &str) -> String {
    path.split('/')
        .map(|seg| if seg.starts_with('{') { "nope" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

fn malformed_bodies(valid: &Value) -> Vec<(String, Vec<u8>)> {
    let text = valid.to_string();
    let mut corpus = vec![
        (
            "truncated".to_owned(),
            text.as_bytes()[..text.len() / 2].to_vec(),
        ),
        ("not json".to_owned(), b"this is not json".to_vec()),
        ("array".to_owned(), b"[1,2,3]".to_vec()),
        ("number".to_owned(), b"42".to_vec()),
        (
            "unknown field".to_owned(),
            json!({"surprise": true}).to_string().into_bytes(),
        ),
        ("nul bytes".to_owned(), vec![0, 0, 0, 123]),
        ("invalid utf8".to_owned(), vec![0xff, 0xfe, b'{', b'}']),
        (
            "huge".to_owned(),
            format!("{{\"content\":\"{}\"}}", "x".repeat(200 * 1024)).into_bytes(),
        ),
        (
            "deep nesting".to_owned(),
            format!("{}{}", "[".repeat(5000), "]".repeat(5000)).into_bytes(),
        ),
    ];
    if let Value::Object(map) = valid {
        for (field, value) in map {
            let mut wrong = valid.clone();
            wrong[field] = match value {
                Value::String(_) => json!(12345),
                _ => json!("wrong type"),
            };
            corpus.push((
                format!("wrong type {field}"),
                wrong.to_string().into_bytes(),
            ));
            let mut extra = valid.clone();
            extra["unexpected_field"] = json!(1);
            corpus.push((
                "unknown field beside valid".to_owned(),
                extra.to_string().into_bytes(),
            ));
        }
    }
    corpus
}

#[tokio::test]
async fn malformed_corpus_against_every_route_gets_json_4xx() {
    let w = world();
    let principal = &w.principals[0];
    let valid_propose = serde_json::to_value(preference(
        "corpus",
        &principal.principal,
        "tea",
        Some(principal.consent.clone()),
    ))
    .expect("json");
    let mut checked = 0usize;
    for op in OPERATIONS {
        let path = concrete(op.path);
        let keys: Vec<Option<&str>> = vec![
            None,
            Some("mk_short"),
            Some(&principal.key),
            Some(&w.admin_key),
        ];
        // Wrong methods.
        for method in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
            if OPERATIONS
                .iter()
                .any(|o| o.path == op.path && o.method == method)
            {
                continue;
            }
            let (status, _, body) = send_raw(
                &w.router,
                method,
                &path,
                Some(&principal.key),
                Some(b"{}".to_vec()),
            )
            .await;
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            assert_eq!(error_code(&body), "method_not_allowed");
            checked += 1;
        }
        if op.body.is_none() {
            for key in &keys {
                let (status, raw, _) = send_raw(
                    &w.router,
                    op.method,
                    &format!("{path}?bogus=%ZZ&type=%00"),
                    *key,
                    None,
                )
                .await;
                assert!(status.as_u16() < 500, "{} {path}: {status}", op.method);
                if status.is_client_error() {
                    let body: Value = serde_json::from_slice(&raw)
                        .unwrap_or_else(|_| panic!("{} {path} answered non-JSON", op.method));
                    error_code(&body);
                }
                checked += 1;
            }
            continue;
        }
        let valid = if op.path == "/v1/memories" {
            valid_propose.clone()
        } else if op.path == "/v1/admin/review/{case_id}" {
            json!({"action": "accept_narrower", "authority_ref": "ticket-1", "proposal": valid_propose.clone()})
        } else {
            json!({})
        };
        for key in &keys {
            for (what, bytes) in malformed_bodies(&valid) {
                let (status, raw, body) =
                    send_raw(&w.router, op.method, &path, *key, Some(bytes)).await;
                assert!(
                    status.is_client_error(),
                    "{} {path} [{what}] with key {key:?}: {status} {}",
                    op.method,
                    String::from_utf8_lossy(&raw)
                );
                if body.is_null() {
                    panic!(
                        "{} {path} [{what}]: non-JSON answer {}",
                        op.method,
                        String::from_utf8_lossy(&raw)
                    );
                }
                error_code(&body);
                checked += 1;
            }
        }
    }
    assert!(checked > 500, "corpus too small: {checked}");
    // Nothing was written by the corpus.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&principal.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(r["selected_record_ids"], json!([]));
}

#[tokio::test]
async fn each_error_has_its_status_and_code() {
    let w = world();
    let p = &w.principals[0];
    let valid = serde_json::to_value(preference(
        "codes",
        &p.principal,
        "tea",
        Some(p.consent.clone()),
    ))
    .expect("json");
    type Case<'a> = (
        &'a str,
        Option<Vec<u8>>,
        Option<&'a str>,
        StatusCode,
        &'a str,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "/v1/memories",
            Some(b"{\"content\": ".to_vec()),
            Some(&p.key),
            StatusCode::BAD_REQUEST,
            "malformed_json",
        ),
        (
            "/v1/memories",
            Some({
                let mut v = valid.clone();
                v["extra"] = json!(1);
                v.to_string().into_bytes()
            }),
            Some(&p.key),
            StatusCode::BAD_REQUEST,
            "unknown_field",
        ),
        (
            "/v1/memories",
            Some({
                let mut v = valid.clone();
                v["content"] = json!(7);
                v.to_string().into_bytes()
            }),
            Some(&p.key),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "/v1/memories",
            Some({
                let mut v = valid.clone();
                v["sources"][0]["content_sha256"] = json!("abc");
                v.to_string().into_bytes()
            }),
            Some(&p.key),
            StatusCode::BAD_REQUEST,
            "invalid_digest",
        ),
        (
            "/v1/memories",
            Some({
                let mut v = valid.clone();
                v["consent_receipt_sha256"] = json!("Z".repeat(64));
                v.to_string().into_bytes()
            }),
            Some(&p.key),
            StatusCode::BAD_REQUEST,
            "invalid_digest",
        ),
        (
            "/v1/memories",
            Some({
                let mut v = valid.clone();
                v["source_texts"]["src-codes"] = json!("not the declared source text");
                v.to_string().into_bytes()
            }),
            Some(&p.key),
            StatusCode::BAD_REQUEST,
            "invalid_digest",
        ),
        (
            "/v1/memories",
            Some({
                let mut v = valid.clone();
                v["source_texts"]["src-undeclared"] = json!("tea");
                v.to_string().into_bytes()
            }),
            Some(&p.key),
            StatusCode::BAD_REQUEST,
            "unknown_source",
        ),
        (
            "/v1/memories",
            Some({
                let mut v = valid.clone();
                v["judgments"] = json!([{
                    "source_id": "src-codes",
                    "claim_id": null,
                    "source_content_sha256": v["sources"][0]["content_sha256"],
                    "supports_proposal": true,
                    "verifier_release": "verifier-v1",
                    "judgment_sha256": "a".repeat(64)
                }]);
                v.to_string().into_bytes()
            }),
            Some(&p.key),
            StatusCode::FORBIDDEN,
            "unverified_evidence",
        ),
        (
            "/v1/memories",
            Some(format!("{{\"content\":\"{}\"}}", "x".repeat(100 * 1024)).into_bytes()),
            Some(&p.key),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        (
            "/v1/memories",
            Some(valid.to_string().into_bytes()),
            None,
            StatusCode::UNAUTHORIZED,
            "missing_key",
        ),
        (
            "/v1/memories",
            Some(valid.to_string().into_bytes()),
            Some("mk_0000000000000000000000000000000000000000000000000000000000000000"),
            StatusCode::UNAUTHORIZED,
            "invalid_key",
        ),
        (
            "/v1/memories",
            Some(valid.to_string().into_bytes()),
            Some("Basic abc"),
            StatusCode::UNAUTHORIZED,
            "invalid_key",
        ),
    ];
    for (path, body, key, status, code) in cases {
        let (got, raw, json) = send_raw(&w.router, "POST", path, key, body).await;
        assert_eq!(got, status, "{code}: {}", String::from_utf8_lossy(&raw));
        assert_eq!(error_code(&json), code);
    }
    // Unknown records.
    let (status, r) = send(
        &w.router,
        "GET",
        "/v1/memories/m-does-not-exist",
        Some(&p.key),
        None,
    )
    .await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let (status, r) = send(&w.router, "GET", "/v1/no/such/route", Some(&p.key), None).await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&p.key),
        Some(json!({"kind": "write", "proposal_id": "p-nope"})),
    )
    .await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    // Nothing was written by any of them.
    let (_, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&p.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(r["selected_record_ids"], json!([]));
}

/// The `Authorization` scheme is case-insensitive (RFC 9110, section
/// 11.1): `bearer` and `TOKEN` carry the key as `Bearer` and `Token` do;
/// any other scheme, or a scheme with no key, is 401 `invalid_key`. The
/// layer: the transport's key extraction (`presented_key`).
#[tokio::test]
async fn authorization_schemes_are_case_insensitive() {
    use tower::ServiceExt;
    let w = world();
    let key = &w.principals[0].key;
    let answer = |authorization: String| {
        let router = w.router.clone();
        async move {
            let request = axum::http::Request::builder()
                .method("GET")
                .uri("/v1/whoami")
                .header("authorization", authorization)
                .body(axum::body::Body::empty())
                .expect("request");
            let response = router.oneshot(request).await.expect("answers");
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("body");
            (
                status,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            )
        }
    };
    for scheme in ["Bearer", "bearer", "BEARER", "Token", "token"] {
        let (status, body) = answer(format!("{scheme} {key}")).await;
        assert_eq!(status, StatusCode::OK, "{scheme}: {body}");
    }
    for header in [
        format!("Basic {key}"),
        format!("Bearer{key}"),
        "bearer".to_owned(),
    ] {
        let (status, body) = answer(header.clone()).await;
        assert_eq!(
            (status, error_code(&body).as_str()),
            (StatusCode::UNAUTHORIZED, "invalid_key"),
            "{header}"
        );
    }
}

/// A principal's grant naming a workspace or run id no record can carry
/// (empty, whitespace, control characters) is refused, 400
/// `invalid_field`, through `PUT .../grant` and `POST /v1/admin/keys`
/// alike, and no key is made. The layer: the service's grant check
/// (`put_grant_locked`), before any write.
#[tokio::test]
async fn a_grant_naming_an_id_no_record_can_carry_is_refused_and_nothing_stored() {
    let w = world();
    let (_, keys_before) = send(&w.router, "GET", "/v1/admin/keys", Some(&w.admin_key), None).await;
    for (field, bad) in [
        ("allowed_workspace_ids", ""),
        ("allowed_workspace_ids", "team one"),
        ("allowed_run_ids", "run\u{0}"),
    ] {
        let grant = json!({ field: [bad] });
        let key = json!({"tenant_id": "tenant-a", "principal_id": "carol", "grant": grant});
        for (method, path, body) in [
            (
                "PUT",
                "/v1/admin/tenants/tenant-a/principals/carol/grant",
                grant,
            ),
            ("POST", "/v1/admin/keys", key),
        ] {
            let (status, body) =
                send(&w.router, method, path, Some(&w.admin_key), Some(body)).await;
            assert_eq!(
                (status, error_code(&body).as_str()),
                (StatusCode::BAD_REQUEST, "invalid_field"),
                "{path} {field} {bad:?}: {body}"
            );
        }
    }
    let (_, keys_after) = send(&w.router, "GET", "/v1/admin/keys", Some(&w.admin_key), None).await;
    assert_eq!(keys_after, keys_before, "no key was made");
    // A valid id is taken.
    let (status, body) = send(
        &w.router,
        "PUT",
        "/v1/admin/tenants/tenant-a/principals/carol/grant",
        Some(&w.admin_key),
        Some(json!({"allowed_workspace_ids": ["team-one"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// The conversation `statements` holds what a principal remembers one
/// statement at a time (MCP's and mem0's single memories): messages
/// ingested into it are refused, 400 `invalid_field`, before anything is
/// written, so they are never taken for statements. The layer: the
/// conversation use case's id check.
#[tokio::test]
async fn the_reserved_statements_conversation_takes_no_ingested_messages() {
    let w = world();
    let alice = &w.principals[0];
    let messages = json!({"messages": [{"id": "m1", "role": "user", "content": "I keep bees."}]});
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/conversations/statements/messages",
        Some(&alice.key),
        Some(messages.clone()),
    )
    .await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::BAD_REQUEST, "invalid_field"),
        "{body}"
    );
    let export = || async {
        let (status, raw, _) =
            send_raw(&w.router, "GET", "/v1/export", Some(&alice.key), None).await;
        assert_eq!(status, StatusCode::OK);
        String::from_utf8(raw).expect("utf-8")
    };
    assert!(
        !export().await.contains("I keep bees"),
        "nothing was written"
    );
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/conversations/statement-log/messages",
        Some(&alice.key),
        Some(messages),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        export().await.contains("I keep bees"),
        "another name is taken"
    );
}

#[tokio::test]
async fn expired_grant_is_forbidden() {
    let w = world();
    let admin = w.service.authenticate(Some(&w.admin_key)).expect("admin");
    let key = w
        .service
        .create_key(
            &admin,
            &CreateKeyRequest {
                tenant_id: "tenant-a".into(),
                principal_id: "carol".into(),
                grant: Some(GrantRequest {
                    allowed_kinds: None,
                    allowed_purposes: None,
                    allowed_workspace_ids: None,
                    allowed_run_ids: None,
                    expires_at_unix_ms: Some(1),
                }),
            },
        )
        .expect("key");
    let request = serde_json::to_value(preference("exp", "carol", "tea", None)).expect("json");
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&key.key),
        Some(request),
    )
    .await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::FORBIDDEN, "grant_expired")
    );
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&key.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::FORBIDDEN, "grant_expired")
    );
}

#[tokio::test]
async fn rate_limit_answers_429_per_key() {
    let w = world_with(|c| {
        c.rate_limit_per_second = 1;
        c.rate_limit_burst = 3;
    });
    let (a, b) = (&w.principals[0], &w.principals[1]);
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let (status, _) = send(&w.router, "GET", "/v1/whoami", Some(&a.key), None).await;
        statuses.push(status);
    }
    assert!(
        statuses[..3].iter().all(|s| *s == StatusCode::OK),
        "{statuses:?}"
    );
    let (status, r) = send(&w.router, "GET", "/v1/whoami", Some(&a.key), None).await;
    assert_eq!(
        (status, error_code(&r).as_str()),
        (StatusCode::TOO_MANY_REQUESTS, "rate_limited")
    );
    // Another key has its own bucket.
    let (status, _) = send(&w.router, "GET", "/v1/whoami", Some(&b.key), None).await;
    assert_eq!(status, StatusCode::OK);
}

/// Every 429 carries `Retry-After` (whole seconds until the key's bucket
/// holds a request again), whichever surface the key exhausted its bucket
/// on: the native API, the mem0-compatible routes and the MCP endpoint
/// all answer from the same rate limit (the HTTP layer's key check).
#[tokio::test]
async fn every_429_says_when_to_retry() {
    use tower::ServiceExt;
    let w = world_with(|c| {
        c.rate_limit_per_second = 1;
        c.rate_limit_burst = 1;
    });
    let requests: [(&str, &str, Option<&str>); 3] = [
        ("GET", "/v1/whoami", None),
        ("POST", "/search", Some(r#"{"query":"x"}"#)),
        (
            "POST",
            "/mcp",
            Some(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
        ),
    ];
    for (i, (method, path, body)) in requests.into_iter().enumerate() {
        // One key per surface (the world has four), so each surface
        // exhausts its own bucket here.
        let key = &w.principals[i].key;
        let mut limited = None;
        for _ in 0..5 {
            let mut request = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header("authorization", format!("Bearer {key}"))
                .header("accept", "application/json, text/event-stream");
            if body.is_some() {
                request = request.header("content-type", "application/json");
            }
            let request = request
                .body(body.map_or_else(axum::body::Body::empty, |b| {
                    axum::body::Body::from(b.to_owned())
                }))
                .expect("request");
            let response = w.router.clone().oneshot(request).await.expect("answer");
            if response.status() == StatusCode::TOO_MANY_REQUESTS {
                limited = Some(response);
                break;
            }
        }
        let response = limited.unwrap_or_else(|| panic!("{path}: never rate limited"));
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        assert!(
            retry_after.is_some_and(|s| (1..=2).contains(&s)),
            "{path}: Retry-After {:?}",
            response.headers().get("retry-after")
        );
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let body: Value = serde_json::from_slice(&bytes).expect("JSON error");
        assert_eq!(error_code(&body), "rate_limited", "{path}");
    }
}

/// Not async: the blocking PostgreSQL client must not be opened inside a
/// runtime's async context (the server opens its store before the runtime).
#[test]
fn unreachable_postgres_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = crate::common::config(dir.path());
    config.postgres = Some("postgres://mosaic@127.0.0.1:1/mosaic".into());
    match mosaic_service::Service::open(config) {
        Err(e) => {
            assert_eq!(e.code(), "unavailable");
            assert!(e.to_string().contains("PostgreSQL"), "{e}");
        }
        Ok(_) => panic!("an unreachable PostgreSQL must be a clear error"),
    }
}

/// `/mcp` answers malformed requests with the JSON error body every other
/// route gives (the MCP route's body check, before the transport).
#[tokio::test]
async fn mcp_endpoint_answers_malformed_bodies_with_json_errors() {
    use crate::numbers::mcp_request;
    let w = world();
    let key = w.principals[0].key.clone();
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"pad\":\"{}\"}}",
        "x".repeat(100 * 1024)
    );
    let cases: Vec<(&str, Vec<u8>, &str, StatusCode, &str)> = vec![
        (
            "wrong content type",
            b"{}".to_vec(),
            "text/plain",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        (
            "too large",
            huge.into_bytes(),
            "application/json",
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        (
            "bad json",
            b"{\"jsonrpc\": ".to_vec(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "malformed_json",
        ),
        (
            "not a JSON-RPC message, no session",
            b"{\"hello\": 1}".to_vec(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "",
        ),
        (
            "unknown session",
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#.to_vec(),
            "application/json",
            StatusCode::NOT_FOUND,
            "",
        ),
    ];
    for (what, body, content_type, status, code) in cases {
        let session = (what == "unknown session").then_some("no-such-session");
        let response = mcp_request(&w.router, &key, session, body, content_type).await;
        let got = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert!(
            got.is_client_error(),
            "{what}: {got} {}",
            String::from_utf8_lossy(&bytes)
        );
        if status == StatusCode::BAD_REQUEST || status == StatusCode::NOT_FOUND {
            // The transport's own refusal: any 4xx, but as a JSON error.
            assert!(
                !json.is_null(),
                "{what}: not JSON: {}",
                String::from_utf8_lossy(&bytes)
            );
            let got_code = error_code(&json);
            if !code.is_empty() {
                assert_eq!(got_code, code, "{what}");
            }
        } else {
            assert_eq!(got, status, "{what}: {json}");
            assert_eq!(error_code(&json), code, "{what}");
        }
    }
}

/// A JSON body with a JSON content type that is not a JSON-RPC message
/// (an array, another `jsonrpc` version, an id that is neither a number
/// nor a string, a lone surrogate escape), with a session or without, is
/// a malformed request: 400
/// `bad_request`, never 415 `unsupported_media_type`, which would tell the
/// client to change a content type that was right. Layer: the MCP route's
/// answer rewrite (`json_error_response`), after its body check.
#[tokio::test]
async fn mcp_endpoint_answers_json_that_is_not_json_rpc_as_a_bad_request() {
    use crate::numbers::{mcp_request, mcp_session};
    let w = world();
    let key = w.principals[0].key.clone();
    let session = mcp_session(&w.router, &key).await;
    let bodies: [&[u8]; 4] = [
        br#"[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#,
        br#"{"jsonrpc":"1.0","id":2,"method":"tools/list"}"#,
        br#"{"jsonrpc":"2.0","id":true,"method":"tools/list"}"#,
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"recall","arguments":{"query":"\ud800"}}}"#,
    ];
    for body in bodies {
        let shown = String::from_utf8_lossy(body).into_owned();
        for session in [None, Some(session.as_str())] {
            let response =
                mcp_request(&w.router, &key, session, body.to_vec(), "application/json").await;
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("body");
            let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            assert_eq!(
                (status, error_code(&json).as_str()),
                (StatusCode::BAD_REQUEST, "bad_request"),
                "{shown} (session {session:?}): {}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
}
