//! No client number produces a 5xx: every numeric field of every request
//! type (HTTP bodies, import lines, MCP tool arguments) at 2^53-1, 2^53,
//! 2^63, 2^64-1, 2^64 and negatives. Beyond ±(2^53-1) the decoder
//! (`numbers::check_json_integers`, run by `decode_json`) answers `400
//! integer_out_of_range` before any service work; at 2^53-1 the service
//! answers a 2xx or a 4xx with a stable code, never `500 internal`.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use mosaic_server::mcp::MCP_PATH;
use mosaic_service::examples::preference;
use serde_json::{Value, json};

use crate::common::{Principal, error_code, send, send_raw, world};

const MAX: u64 = (1 << 53) - 1;

/// The boundary values, as JSON text (2^64 does not fit a u64).
fn boundaries() -> Vec<(String, Expect)> {
    vec![
        (MAX.to_string(), Expect::NoServerError),
        ((MAX + 1).to_string(), Expect::OutOfRange),
        ((1u64 << 63).to_string(), Expect::OutOfRange),
        (u64::MAX.to_string(), Expect::OutOfRange),
        ("18446744073709551616".into(), Expect::OutOfRange),
        ("1e300".into(), Expect::OutOfRange),
        ("-1".into(), Expect::BadRequest),
        (format!("-{MAX}"), Expect::BadRequest),
        (format!("-{}", MAX + 1), Expect::OutOfRange),
        ("-9223372036854775808".into(), Expect::OutOfRange),
    ]
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    /// A 2xx, or a 4xx JSON error whose code is not `internal`.
    NoServerError,
    /// 400 `integer_out_of_range`.
    OutOfRange,
    /// A 400 JSON error.
    BadRequest,
}

/// JSON pointers of every number in `value`, with the field name each sits in.
fn numeric_leaves(value: &Value, pointer: String, out: &mut Vec<(String, String)>) {
    match value {
        Value::Number(_) => {
            let name = pointer
                .rsplit('/')
                .find(|s| s.parse::<usize>().is_err())
                .unwrap_or("")
                .to_owned();
            out.push((pointer, name));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                numeric_leaves(item, format!("{pointer}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                numeric_leaves(v, format!("{pointer}/{k}"), out);
            }
        }
        _ => {}
    }
}

/// `body` as JSON text with the number at `pointer` replaced by `raw`.
fn with_number(body: &Value, pointer: &str, raw: &str) -> Vec<u8> {
    const MARK: &str = "@@NUMBER@@";
    let mut marked = body.clone();
    *marked.pointer_mut(pointer).expect("pointer") = json!(MARK);
    marked
        .to_string()
        .replace(&format!("\"{MARK}\""), raw)
        .into_bytes()
}

fn check(what: &str, expect: Expect, status: StatusCode, body: &Value, raw: &[u8]) {
    let shown = || format!("{what}: {status} {}", String::from_utf8_lossy(raw));
    assert!(status.as_u16() < 500, "{}", shown());
    if !status.is_success() {
        assert!(!body.is_null(), "non-JSON error {}", shown());
        assert_ne!(error_code(body), "internal", "{}", shown());
    }
    match expect {
        Expect::NoServerError => {}
        Expect::OutOfRange => {
            assert_eq!(status, StatusCode::BAD_REQUEST, "{}", shown());
            assert_eq!(error_code(body), "integer_out_of_range", "{}", shown());
        }
        Expect::BadRequest => assert_eq!(status, StatusCode::BAD_REQUEST, "{}", shown()),
    }
}

fn proposal(p: &Principal, label: &str, content: &str) -> Value {
    serde_json::to_value(preference(
        label,
        &p.principal,
        content,
        Some(p.consent.clone()),
    ))
    .expect("json")
}

#[tokio::test]
async fn every_numeric_field_of_every_request_at_the_boundaries_is_a_4xx_never_a_5xx() {
    let w = world();
    let alice = &w.principals[0];
    let admin = w.admin_key.as_str();

    // Real objects whose numbers the sweep then replaces.
    let (status, existing) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(proposal(alice, "existing", "alice drinks green tea")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{existing}");
    let existing_id = existing["record_id"].as_str().expect("id").to_owned();
    let (_, doomed) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(proposal(alice, "doomed", "alice reads at night")),
    )
    .await;
    let (status, revoked) = send(
        &w.router,
        "POST",
        &format!(
            "/v1/memories/{}/revoke",
            doomed["record_id"].as_str().expect("id")
        ),
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    let receipt = revoked["deletion_receipt"].clone();
    assert!(receipt.is_object(), "{revoked}");
    let (_, export, _) = send_raw(&w.router, "GET", "/v1/export", Some(&alice.key), None).await;
    let export_line: Value = serde_json::from_slice(
        export
            .split(|b| *b == b'\n')
            .find(|l| !l.is_empty())
            .expect("one exported line"),
    )
    .expect("export line is JSON");

    let mut with_ttl = proposal(alice, "ttl", "alice likes oolong");
    with_ttl["ttl_ms"] = json!(60_000);
    with_ttl["token_count"] = json!(3);
    let mut with_claim = proposal(alice, "claim", "alice prefers short answers");
    with_claim["claims"] = json!([{
        "claim_id": "c1",
        "subject": format!("principal:{}", alice.principal),
        "predicate": "answer_length",
        "object": "short",
        "qualifiers": {},
        "valid_from_unix_ms": 1,
        "valid_until_unix_ms": 2,
        "source_ids": ["src-claim"]
    }]);
    let mut superseding = proposal(alice, "supersede", "alice drinks black tea");
    superseding["supersedes_record_id"] = json!(existing_id);
    superseding["expected_line_generation"] = json!(1);
    let mut procedure = proposal(alice, "procedure", "retry twice then escalate");
    procedure["procedure_evaluation"] = json!({
        "suite_sha256": "a".repeat(64),
        "candidate_release": "proc-v1",
        "passed_cases": 20,
        "total_cases": 20,
        "severe_regressions": 0
    });
    let policy = json!({"max_ttl_ms": 86_400_000, "minimum_procedure_eval_cases": 3});
    let grant =
        json!({"allowed_workspace_ids": ["ws-main"], "expires_at_unix_ms": 4_000_000_000_000u64});

    // (method, path, key, body) of every request type with a number.
    let requests: Vec<(&str, String, &str, Value)> = vec![
        ("POST", "/v1/memories".into(), &alice.key, with_ttl.clone()),
        ("POST", "/v1/memories".into(), &alice.key, with_claim),
        ("POST", "/v1/memories".into(), &alice.key, superseding),
        ("POST", "/v1/memories".into(), &alice.key, procedure),
        (
            "POST",
            "/v1/recall".into(),
            &alice.key,
            json!({"query": "tea", "max_records": 5, "token_budget": 100}),
        ),
        (
            "POST",
            "/v1/recall".into(),
            &alice.key,
            json!({"max_records": 5, "token_budget": 100}),
        ),
        (
            "POST",
            "/v1/verify".into(),
            &alice.key,
            json!({"kind": "deletion", "receipt": receipt}),
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            admin,
            json!({"tenant_id": "tenant-numbers", "policy": policy}),
        ),
        (
            "PUT",
            "/v1/admin/tenants/tenant-b/policy".into(),
            admin,
            policy.clone(),
        ),
        (
            "PUT",
            "/v1/admin/tenants/tenant-a/principals/carol/grant".into(),
            admin,
            grant.clone(),
        ),
        (
            "POST",
            "/v1/admin/keys".into(),
            admin,
            json!({"tenant_id": "tenant-a", "principal_id": "dave", "grant": grant}),
        ),
        (
            "POST",
            "/v1/admin/review/case-nope".into(),
            admin,
            json!({"action": "accept_narrower", "proposal": with_ttl}),
        ),
    ];
    let mut fields = BTreeSet::new();
    let mut sent = 0usize;
    for (method, path, key, body) in &requests {
        let mut leaves = Vec::new();
        numeric_leaves(body, String::new(), &mut leaves);
        assert!(!leaves.is_empty(), "{method} {path} has numbers");
        for (pointer, name) in leaves {
            fields.insert(name);
            for (raw, expect) in boundaries() {
                let bytes = with_number(body, &pointer, &raw);
                let (status, answer, json) =
                    send_raw(&w.router, method, path, Some(key), Some(bytes)).await;
                check(
                    &format!("{method} {path} {pointer}={raw}"),
                    expect,
                    status,
                    &json,
                    &answer,
                );
                sent += 1;
            }
        }
    }
    // Every numeric field of the request types was swept.
    for field in [
        "ttl_ms",
        "token_count",
        "expected_line_generation",
        "valid_from_unix_ms",
        "valid_until_unix_ms",
        "passed_cases",
        "total_cases",
        "severe_regressions",
        "max_records",
        "token_budget",
        "max_ttl_ms",
        "minimum_procedure_eval_cases",
        "expires_at_unix_ms",
        "revocation_generation",
        "finalized_at_unix_ms",
        "schema_version",
    ] {
        assert!(fields.contains(field), "{field} not swept: {fields:?}");
    }

    // Import lines: each number of an exported memory, one line each.
    let mut leaves = Vec::new();
    numeric_leaves(&export_line, String::new(), &mut leaves);
    assert!(leaves.len() >= 3, "{export_line}");
    for (pointer, _) in leaves {
        for (raw, expect) in boundaries() {
            // A good line first: a body whose every line fails is refused
            // whole (400 malformed_body), which would hide the line's code.
            let mut bytes = export_line.to_string().into_bytes();
            bytes.push(b'\n');
            bytes.extend(with_number(&export_line, &pointer, &raw));
            bytes.push(b'\n');
            let (status, answer, json) = send_raw(
                &w.router,
                "POST",
                "/v1/import",
                Some(&alice.key),
                Some(bytes),
            )
            .await;
            let what = format!("import {pointer}={raw}");
            check(&what, Expect::NoServerError, status, &json, &answer);
            let codes: Vec<&str> = json["errors"]
                .as_object()
                .map(|m| m.values().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            assert!(!codes.contains(&"internal"), "{what}: {json}");
            if matches!(expect, Expect::OutOfRange) {
                assert_eq!(codes, ["integer_out_of_range"], "{what}: {json}");
            }
            sent += 1;
        }
    }

    // A policy at the top of the range, then proposals at the top of it.
    let (status, raw, r) = send_raw(
        &w.router,
        "PUT",
        "/v1/admin/tenants/tenant-a/policy",
        Some(admin),
        Some(format!("{{\"max_ttl_ms\": {MAX}}}").into_bytes()),
    )
    .await;
    check(
        "policy max_ttl_ms=2^53-1",
        Expect::NoServerError,
        status,
        &r,
        &raw,
    );
    for (label, ttl) in [
        ("top", Some(MAX)),
        ("default", None),
        ("near", Some(MAX - 1)),
    ] {
        let mut body = proposal(alice, label, &format!("alice keeps {label} notes"));
        if let Some(ttl) = ttl {
            body["ttl_ms"] = json!(ttl);
        }
        let (status, answer, json) = send_raw(
            &w.router,
            "POST",
            "/v1/memories",
            Some(&alice.key),
            Some(body.to_string().into_bytes()),
        )
        .await;
        check(
            &format!("propose ttl {ttl:?} under max policy"),
            Expect::NoServerError,
            status,
            &json,
            &answer,
        );
    }
    assert!(sent > 300, "sweep too small: {sent}");

    // Nothing from the sweep is recalled: only the two accepted originals
    // (and what the max policy allowed) may be live.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
}

/// MCP tool arguments go through the same decoder: an out-of-range number
/// is a tool error with the same code, not a transport failure.
#[tokio::test]
async fn mcp_tool_arguments_at_the_boundaries_are_tool_errors_never_5xx() {
    let w = world();
    let alice = &w.principals[0];
    let session = mcp_session(&w.router, &alice.key).await;
    let remember = proposal(alice, "mcp-number", "alice likes jasmine tea");
    let calls = [
        ("remember", {
            let mut r = remember.clone();
            r.as_object_mut().expect("object").remove("tenant_id");
            r.as_object_mut().expect("object").remove("principal_id");
            r["ttl_ms"] = json!(1000);
            r
        }),
        ("recall", json!({"max_records": 3, "token_budget": 50})),
        ("explain", json!({"max_records": 3})),
    ];
    for (tool, arguments) in calls {
        let arguments = strip_nulls(arguments);
        let mut leaves = Vec::new();
        numeric_leaves(&arguments, String::new(), &mut leaves);
        for (pointer, _) in leaves {
            for (raw, expect) in boundaries() {
                let args =
                    String::from_utf8(with_number(&arguments, &pointer, &raw)).expect("utf8");
                let body = format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{args}}}}}"
                );
                let (status, message) = mcp_post(&w.router, &alice.key, &session, body).await;
                let what = format!("mcp {tool} {pointer}={raw}");
                assert!(status.is_success(), "{what}: {status} {message}");
                let result = &message["result"];
                if result["isError"] == json!(true) {
                    let code = result["structuredContent"]["error"]["code"]
                        .as_str()
                        .unwrap_or_default();
                    assert_ne!(code, "internal", "{what}: {message}");
                    if matches!(expect, Expect::OutOfRange) {
                        assert_eq!(code, "integer_out_of_range", "{what}: {message}");
                    }
                } else {
                    assert!(
                        matches!(expect, Expect::NoServerError) && result.is_object(),
                        "{what}: {message}"
                    );
                }
            }
        }
    }
}

fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Initializes a streamable-HTTP MCP session and returns its id.
pub async fn mcp_session(router: &axum::Router, key: &str) -> String {
    let init = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}
        }
    });
    let response = mcp_request(
        router,
        key,
        None,
        init.to_string().into_bytes(),
        "application/json",
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("session id")
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = mcp_request(
        router,
        key,
        Some(&session),
        initialized.to_string().into_bytes(),
        "application/json",
    )
    .await;
    assert!(response.status().is_success(), "{}", response.status());
    session
}

pub async fn mcp_request(
    router: &axum::Router,
    key: &str,
    session: Option<&str>,
    body: Vec<u8>,
    content_type: &str,
) -> axum::response::Response {
    let mut builder = axum::http::Request::builder()
        .method("POST")
        .uri(MCP_PATH)
        .header("host", "memory.example")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", content_type)
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        builder = builder.header("mcp-session-id", session);
    }
    let request = builder.body(axum::body::Body::from(body)).expect("request");
    tower::ServiceExt::oneshot(router.clone(), request)
        .await
        .expect("router answers")
}

/// Posts one JSON-RPC message in a session; returns the status and the
/// JSON-RPC answer (from the event stream or a JSON body).
pub async fn mcp_post(
    router: &axum::Router,
    key: &str,
    session: &str,
    body: String,
) -> (StatusCode, Value) {
    let response = mcp_request(
        router,
        key,
        Some(session),
        body.into_bytes(),
        "application/json",
    )
    .await;
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    let text = String::from_utf8_lossy(&bytes);
    let message = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("id").is_some())
        .or_else(|| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null);
    (status, message)
}
