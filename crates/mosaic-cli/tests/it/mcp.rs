//! MCP: the official MCP Python SDK client (`tests/mcp_client.py`) drives
//! `mosaic mcp` over stdio and the `/mcp` streamable-HTTP endpoint of a
//! real server; the router refuses the endpoint without the API's bearer
//! key; the tool schemas never take a tenant or principal.
//!
//! Without the `mcp` Python package the client tests print a `skipped:`
//! line and pass, except under `CI=true`, where they fail (`.ci/run`
//! installs the pinned package, and the latest release into the directory
//! `MOSAIC_MCP_LATEST` names; the client runs with both).

use std::path::Path;
use std::process::Command;

use axum::http::StatusCode;
use mosaic_server::app;
use mosaic_server::mcp::{MCP_PATH, TOOL_NAMES, tool_arguments, tools};
use mosaic_service::api::admin::{CreateKeyRequest, CreateTenantRequest, GrantRequest};
use mosaic_service::service::ADMIN_KEY_FILE;
use mosaic_service::{ServerConfig, Service};
use serde_json::json;

use crate::common::{error_code, send_raw, world};

const WORKSPACE: &str = "ws-mcp";
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py");

/// Whether to run the Python client: `Ok(true)` run, `Ok(false)` skip,
/// `Err` fail (the package is missing under CI).
fn python_client_decision(importable: bool, ci: Option<&str>) -> Result<bool, String> {
    match (importable, ci) {
        (true, _) => Ok(true),
        (false, Some("true")) => Err(
            "CI=true but the `mcp` Python package is not importable (.ci/run installs it)".into(),
        ),
        (false, _) => Ok(false),
    }
}

fn python_client_available() -> bool {
    let importable = Command::new("python3")
        .args(["-c", "import mcp.client.stdio, mcp.client.streamable_http"])
        .output()
        .is_ok_and(|out| out.status.success());
    match python_client_decision(importable, std::env::var("CI").ok().as_deref()) {
        Ok(true) => true,
        Ok(false) => {
            crate::skip::skipped(
                "MCP Python SDK client",
                "the `mcp` Python package is not importable",
                "python3 -m pip install 'mcp==1.30.0'",
            );
            false
        }
        Err(problem) => panic!("{problem}"),
    }
}

#[test]
fn missing_python_mcp_skips_locally_and_fails_under_ci() {
    assert_eq!(python_client_decision(true, Some("true")), Ok(true));
    assert_eq!(python_client_decision(true, None), Ok(true));
    assert_eq!(python_client_decision(false, None), Ok(false));
    assert_eq!(python_client_decision(false, Some("false")), Ok(false));
    assert!(python_client_decision(false, Some("true")).is_err());
}

/// A data directory with one tenant and one principal granted
/// [`WORKSPACE`], without consent to personal memory; returns the
/// principal's key. The service is closed again
/// so another process can open the directory.
fn provision(data_dir: &Path) -> String {
    let config = ServerConfig {
        data_dir: data_dir.to_path_buf(),
        ..ServerConfig::default()
    };
    let (service, _) = Service::open(config).expect("open service");
    let admin_key = std::fs::read_to_string(data_dir.join(ADMIN_KEY_FILE)).expect("admin key");
    let admin = service
        .authenticate(Some(admin_key.trim()))
        .expect("admin key works");
    service
        .create_tenant(
            &admin,
            &CreateTenantRequest {
                tenant_id: "tenant-mcp".into(),
                policy: crate::common::self_quoting_policy(),
            },
        )
        .expect("tenant");
    let key = service
        .create_key(
            &admin,
            &CreateKeyRequest {
                tenant_id: "tenant-mcp".into(),
                principal_id: "agent".into(),
                grant: Some(GrantRequest {
                    allowed_kinds: None,
                    allowed_purposes: None,
                    allowed_workspace_ids: Some(vec![WORKSPACE.into()]),
                    allowed_run_ids: None,
                    expires_at_unix_ms: None,
                }),
            },
        )
        .expect("key")
        .key;
    // No consent yet: the client gives it with the `give_consent` tool once
    // `remember` says it is missing.
    service.flush().expect("flush");
    key
}

/// The MCP SDKs the client runs with: the one installed (pinned in
/// `.ci/run`) and, when `MOSAIC_MCP_LATEST` names a directory holding the
/// latest release (`pip install --target`), that one too. CI must test
/// both.
fn sdk_paths() -> Vec<Option<String>> {
    let latest = std::env::var("MOSAIC_MCP_LATEST")
        .ok()
        .filter(|p| !p.is_empty());
    if latest.is_none() && std::env::var("CI").as_deref() == Ok("true") {
        panic!("CI=true but MOSAIC_MCP_LATEST does not name the latest MCP SDK's directory");
    }
    let mut paths = vec![None];
    match latest {
        Some(path) => paths.push(Some(path)),
        None => crate::skip::skipped(
            "MCP Python SDK client with the latest SDK",
            "MOSAIC_MCP_LATEST is not set: the client ran with the installed SDK only",
            "python3 -m pip install --target target/mcp-latest 'mcp==2.3.0', then export \
             MOSAIC_MCP_LATEST=$PWD/target/mcp-latest",
        ),
    }
    paths
}

fn run_client(args: &[&str], key: &str, sdk: Option<&str>) {
    let mut command = Command::new("python3");
    if let Some(path) = sdk {
        command.env("PYTHONPATH", path);
    }
    let out = command
        .arg(CLIENT)
        .args(args)
        .args(["--workspace", WORKSPACE])
        .env("MOSAIC_KEY", key)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mcp_client.py {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("mcp_client: "), "{stdout}");
    // Names the SDK version in the test log.
    eprintln!("{}", stdout.trim());
    assert!(
        !stdout.contains(key) && !stderr.contains(key),
        "the key is never printed"
    );
}

#[test]
fn python_sdk_client_drives_mosaic_mcp_over_stdio() {
    if !python_client_available() {
        return;
    }
    // Each SDK gets a fresh directory: the scenario ends by erasing the
    // principal.
    for sdk in sdk_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let key = provision(&data);
        run_client(
            &[
                "stdio",
                "--mosaic",
                env!("CARGO_BIN_EXE_mosaic"),
                "--data-dir",
                data.to_str().expect("utf-8 path"),
            ],
            &key,
            sdk.as_deref(),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_drives_the_streamable_http_endpoint() {
    if !python_client_available() {
        return;
    }
    for sdk in sdk_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let key = provision(&data);
        let config = ServerConfig {
            data_dir: data,
            ..ServerConfig::default()
        };
        let (service, _) = Service::open(config).expect("reopen service");
        let router = app(std::sync::Arc::new(service));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(axum::serve(listener, router).into_future());
        let url = format!("http://{addr}{MCP_PATH}");
        tokio::task::spawn_blocking(move || {
            run_client(&["http", "--url", &url], &key, sdk.as_deref())
        })
        .await
        .expect("client");
        server.abort();
    }
}

fn initialize_body() -> Vec<u8> {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}
        }
    })
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn the_mcp_endpoint_needs_the_api_bearer_key() {
    let w = world();
    for (key, code) in [(None, "missing_key"), (Some("mk_nonsense"), "invalid_key")] {
        let (status, _, body) =
            send_raw(&w.router, "POST", MCP_PATH, key, Some(initialize_body())).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(error_code(&body), code);
    }
    // The admin key authenticates, but its session can touch no memory.
    let (status, _, _) = send_raw(
        &w.router,
        "POST",
        MCP_PATH,
        Some(&w.admin_key),
        Some(initialize_body()),
    )
    .await;
    assert_ne!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_principal_key_initializes_an_mcp_session() {
    let w = world();
    let request = axum::http::Request::builder()
        .method("POST")
        .uri(MCP_PATH)
        .header("host", "memory.example")
        .header("authorization", format!("Bearer {}", w.principals[0].key))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(axum::body::Body::from(initialize_body()))
        .expect("request");
    let response = tower::ServiceExt::oneshot(w.router.clone(), request)
        .await
        .expect("router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert!(
        headers.contains_key("mcp-session-id"),
        "a session is created: {headers:?}"
    );
}

#[test]
fn tool_schemas_match_the_service_requests_and_never_take_an_identity() {
    let listed: Vec<String> = tools().iter().map(|t| t.name.to_string()).collect();
    assert_eq!(listed, TOOL_NAMES);
    for name in TOOL_NAMES {
        let arguments = tool_arguments(name);
        assert!(!arguments.is_empty(), "{name} declares its arguments");
        for identity in ["tenant_id", "principal_id"] {
            assert!(
                !arguments.iter().any(|a| a == identity),
                "{name} takes {identity}"
            );
        }
    }
    // `remember` takes plain arguments: nothing an LLM would have to
    // compute or invent.
    let mut declared = tool_arguments("remember");
    declared.sort();
    assert_eq!(
        declared,
        [
            "key",
            "kind",
            "metadata",
            "namespace",
            "supersedes",
            "text",
            "workspace_id"
        ]
    );
    assert_eq!(tool_arguments("give_consent"), ["user_agreed"]);
    // `forget` takes `record_id`, as the README says.
    let mut forget = tool_arguments("forget");
    forget.sort();
    assert_eq!(forget, ["authority_ref", "record_id"]);
    for name in TOOL_NAMES {
        for argument in tool_arguments(name) {
            assert!(
                !argument.contains("sha256") && argument != "sources",
                "{name} asks for {argument}"
            );
        }
    }
    // `recall` declares the recall request's fields, less identity.
    // (`filter` is left out of the JSON when unset: set it to see it.)
    let recall = serde_json::to_value(mosaic_service::api::RecallRequest {
        filter: Some(json!({})),
        ..mosaic_service::api::RecallRequest::default()
    })
    .expect("json");
    let mut expected: Vec<String> = recall
        .as_object()
        .expect("object")
        .keys()
        .filter(|k| !["tenant_id", "principal_id"].contains(&k.as_str()))
        .cloned()
        .collect();
    expected.sort();
    let mut declared = tool_arguments("recall");
    declared.sort();
    assert_eq!(declared, expected);
}

/// One request to the MCP endpoint as `key`, naming `session`; the status,
/// the headers and, for an error, the JSON body (a success may be an
/// event stream that stays open, so its body is not read).
async fn mcp_request(
    router: &axum::Router,
    method: &str,
    key: &str,
    session: Option<&str>,
    body: Option<serde_json::Value>,
) -> (StatusCode, axum::http::HeaderMap, serde_json::Value) {
    let mut request = axum::http::Request::builder()
        .method(method)
        .uri(MCP_PATH)
        .header("host", "memory.example")
        .header("authorization", format!("Bearer {key}"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(body.map_or_else(axum::body::Body::empty, |b| {
            axum::body::Body::from(b.to_string())
        }))
        .expect("request");
    let response = tower::ServiceExt::oneshot(router.clone(), request)
        .await
        .expect("router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let json = if status.is_success() {
        serde_json::Value::Null
    } else {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null)
    };
    (status, headers, json)
}

/// A streamable-HTTP session serves only the key that opened it, for
/// every method: another key naming it (to read its stream, end it or
/// call its tools) gets exactly the answer a session id that never
/// existed gets, from the endpoint's session check, and the session goes
/// on for its owner.
#[tokio::test]
async fn an_mcp_session_answers_another_key_as_an_unknown_session() {
    let w = world();
    let (alice, bob) = (&w.principals[0].key, &w.principals[1].key);
    let r = &w.router;
    let initialize: serde_json::Value = serde_json::from_slice(&initialize_body()).expect("json");
    let (status, headers, body) = mcp_request(r, "POST", alice, None, Some(initialize)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session is opened")
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, body) = mcp_request(r, "POST", alice, Some(&session), Some(initialized)).await;
    assert!(status.is_success(), "{status} {body}");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let unknown = "00000000-0000-0000-0000-000000000000";
    for (method, body) in [
        ("GET", None),
        ("DELETE", None),
        ("POST", Some(list.clone())),
    ] {
        let (foreign_status, _, foreign) =
            mcp_request(r, method, bob, Some(&session), body.clone()).await;
        let (unknown_status, _, missing) =
            mcp_request(r, method, bob, Some(unknown), body.clone()).await;
        assert_eq!(
            (foreign_status, error_code(&foreign)),
            (StatusCode::NOT_FOUND, "not_found".to_owned()),
            "{method} by another key: {foreign}"
        );
        assert_eq!(
            (foreign_status, &foreign),
            (unknown_status, &missing),
            "{method}: another key's session answers as an unknown one"
        );
        // The owner's own unknown-session answer is the same too.
        let (_, _, owners_missing) = mcp_request(r, method, alice, Some(unknown), body).await;
        assert_eq!(foreign, owners_missing, "{method}");
    }
    // Bob's DELETE ended nothing: the session goes on for alice.
    let (status, _, body) = mcp_request(r, "POST", alice, Some(&session), Some(list)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, headers, _) = mcp_request(r, "GET", alice, Some(&session), None).await;
    assert_eq!(status, StatusCode::OK, "alice reads her session's stream");
    assert!(
        headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream")),
        "{headers:?}"
    );
    // Her DELETE ends it; then it is unknown to her as well.
    let (status, _, body) = mcp_request(r, "DELETE", alice, Some(&session), None).await;
    assert!(status.is_success(), "{status} {body}");
    let (status, _, body) = mcp_request(r, "GET", alice, Some(&session), None).await;
    assert_eq!(
        (status, error_code(&body)),
        (StatusCode::NOT_FOUND, "not_found".to_owned())
    );
}
