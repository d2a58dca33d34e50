//! A service in a temporary directory with two tenants and two principals
//! each, and a helper that sends one request through the router.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use mosaic_harness::memory_write::MemoryPurpose;
use mosaic_server::app;
use mosaic_service::api::{
    ConsentRequest,
    admin::{CreateKeyRequest, CreateTenantRequest, GrantRequest, PolicyRequest},
};
use mosaic_service::auth::Credential;
use mosaic_service::service::{ADMIN_KEY_FILE, ServiceClock, SystemClock};
use mosaic_service::settings::{SharedSemanticEvidence, WriteGuards};
use mosaic_service::{ServerConfig, Service};
use serde_json::Value;
use tower::ServiceExt;

pub const TENANTS: [&str; 2] = ["tenant-a", "tenant-b"];
pub const PRINCIPALS: [&str; 2] = ["alice", "bob"];
pub const WORKSPACE: &str = "ws-main";

pub struct Principal {
    pub tenant: String,
    pub principal: String,
    pub key: String,
    #[allow(dead_code)]
    pub credential: Credential,
    pub consent: String,
}

pub struct World {
    pub _dir: tempfile::TempDir,
    pub service: Arc<Service>,
    pub router: axum::Router,
    pub admin_key: String,
    pub principals: Vec<Principal>,
}

pub fn config(dir: &std::path::Path) -> ServerConfig {
    ServerConfig {
        data_dir: dir.join("data"),
        rate_limit_per_second: 10_000,
        rate_limit_burst: 10_000,
        body_limit_bytes: 64 * 1024,
        // Deterministic in every build; the model is not under test here.
        embedder: Some(mosaic_service::embedder::EmbedderKind::Hash),
        ..ServerConfig::default()
    }
}

pub fn world_with(adjust: impl FnOnce(&mut ServerConfig)) -> World {
    world_with_clock(Arc::new(SystemClock), adjust)
}

/// [`world_with`] on the service clock `clock`.
pub fn world_with_clock(
    clock: Arc<dyn ServiceClock>,
    adjust: impl FnOnce(&mut ServerConfig),
) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    adjust(&mut config);
    let (service, report) = Service::open_with_clock(config.clone(), clock).expect("open service");
    assert!(
        report.admin_key_file.is_some(),
        "first start writes the admin key"
    );
    let admin_key = std::fs::read_to_string(config.data_dir.join(ADMIN_KEY_FILE))
        .expect("admin key file")
        .trim()
        .to_owned();
    let admin = service
        .authenticate(Some(&admin_key))
        .expect("admin key works");
    let mut principals = Vec::new();
    for tenant in TENANTS {
        service
            .create_tenant(
                &admin,
                &CreateTenantRequest {
                    tenant_id: tenant.into(),
                    // These tenants let a principal's own quotation create
                    // workspace facts, so the tests of other layers can
                    // write them; the provenance guard's tests
                    // (`provenance.rs`) run under the default.
                    policy: Some(PolicyRequest {
                        write_guards: Some(WriteGuards {
                            shared_semantic_evidence: SharedSemanticEvidence::Any,
                            ..WriteGuards::default()
                        }),
                        ..PolicyRequest::default()
                    }),
                },
            )
            .expect("tenant");
        for principal in PRINCIPALS {
            let key = service
                .create_key(
                    &admin,
                    &CreateKeyRequest {
                        tenant_id: tenant.into(),
                        principal_id: principal.into(),
                        grant: Some(GrantRequest {
                            allowed_kinds: None,
                            allowed_purposes: None,
                            allowed_workspace_ids: Some(vec![WORKSPACE.into()]),
                            allowed_run_ids: Some(vec![format!("run-{principal}")]),
                            expires_at_unix_ms: None,
                        }),
                    },
                )
                .expect("key");
            let credential = service
                .authenticate(Some(&key.key))
                .expect("principal key works");
            let consent = service
                .give_consent(
                    &credential,
                    &ConsentRequest {
                        purpose: MemoryPurpose::Personalization,
                        ui_release: "consent-ui-v1".into(),
                        consent_id: None,
                    },
                )
                .expect("consent")
                .consent_sha256;
            principals.push(Principal {
                tenant: tenant.into(),
                principal: principal.into(),
                key: key.key,
                credential,
                consent,
            });
        }
    }
    let service = Arc::new(service);
    let router = app(service.clone());
    World {
        _dir: dir,
        service,
        router,
        admin_key,
        principals,
    }
}

impl World {
    /// The data directory, the service itself (the router dropped, so the
    /// test is its sole owner and can stop and reopen it) and the
    /// principals.
    pub fn into_service(self) -> (tempfile::TempDir, Service, Vec<Principal>) {
        drop(self.router);
        let service = Arc::into_inner(self.service).expect("sole owner");
        (self._dir, service, self.principals)
    }
}

pub fn world() -> World {
    world_with(|_| {})
}

/// Sends one request; returns status, raw body and the body as JSON (Null
/// when it is not JSON).
pub async fn send_raw(
    router: &axum::Router,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<Vec<u8>>,
) -> (StatusCode, Vec<u8>, Value) {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(key) = key {
        builder = builder.header("authorization", format!("Bearer {key}"));
    }
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder
        .body(body.map_or_else(Body::empty, Body::from))
        .expect("request");
    let response = router
        .clone()
        .oneshot(request)
        .await
        .expect("router answers");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body")
        .to_vec();
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, bytes, json)
}

pub async fn send(
    router: &axum::Router,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let (status, _, json) = send_raw(
        router,
        method,
        path,
        key,
        body.map(|b| b.to_string().into_bytes()),
    )
    .await;
    (status, json)
}

/// Proposes `request` through the router as `key`; the answer, which must
/// be 200 (the decision may still be a rejection).
pub async fn propose(
    router: &axum::Router,
    key: &str,
    request: &mosaic_service::api::ProposeRequest,
) -> Value {
    let body = serde_json::to_value(request).expect("json");
    let (status, body) = send(router, "POST", "/v1/memories", Some(key), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Asserts the body is `{"error":{"code","message"}}` and returns the code.
pub fn error_code(body: &Value) -> String {
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not a JSON error: {body}"));
    assert!(
        body["error"]["message"].is_string(),
        "error without message: {body}"
    );
    code.to_owned()
}

/// A policy whose tenant lets a principal's own quotation create workspace
/// facts (the default needs a registered verifier's judgment), for tests of
/// other layers that write such facts.
pub fn self_quoting_policy() -> Option<PolicyRequest> {
    Some(PolicyRequest {
        write_guards: Some(WriteGuards {
            shared_semantic_evidence: SharedSemanticEvidence::Any,
            ..WriteGuards::default()
        }),
        ..PolicyRequest::default()
    })
}

/// A supported workspace fact labelled `label`: `text` followed by the
/// label's [`distinct`] words in brackets and a full stop, so every label
/// gives a text the write guards find new.
pub fn distinct_fact(label: &str, text: &str) -> mosaic_service::api::ProposeRequest {
    mosaic_service::examples::workspace_fact(
        label,
        WORKSPACE,
        &format!("{text} ({}).", distinct(label)),
    )
}

/// Four words no other seed shares (hex digits of the seed's digest), so
/// templated test contents are not near-duplicates of each other.
pub fn distinct(seed: &str) -> String {
    let digest = mosaic_harness::canonical::sha256_hex(seed.as_bytes());
    (0..4)
        .map(|i| &digest[i * 8..i * 8 + 8])
        .collect::<Vec<_>>()
        .join(" ")
}

/// An OpenAI-compatible embedding endpoint on 127.0.0.1 answering with the
/// real all-MiniLM-L6-v2 (from `MOSAIC_MODEL_DIR`), so a service can run
/// the real model through its `http` embedder in every build. While
/// `hang` is set it holds every answer back (an embedder that hangs).
pub struct MiniLmEndpoint {
    pub url: String,
    pub hang: Arc<std::sync::atomic::AtomicBool>,
    /// How many texts it has embedded.
    pub texts: Arc<std::sync::atomic::AtomicUsize>,
}

/// The endpoint, or `None` (after saying so) when `MOSAIC_MODEL_DIR` is not
/// set; under `CI=true` a missing model fails the test instead.
pub fn minilm_endpoint() -> Option<MiniLmEndpoint> {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::Ordering;
    let Some(dir) = std::env::var_os("MOSAIC_MODEL_DIR") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but MOSAIC_MODEL_DIR is not set"
        );
        crate::skip::skipped(
            "the service's tests with the real MiniLM model (mosaic-cli)",
            "MOSAIC_MODEL_DIR is not set",
            "scripts/fetch-model.sh crates/mosaic-index/models/all-minilm-l6-v2, then export MOSAIC_MODEL_DIR=$PWD/crates/mosaic-index/models/all-minilm-l6-v2",
        );
        return None;
    };
    let model = Arc::new(
        mosaic_index::local_model::MiniLmEmbedder::load(std::path::Path::new(&dir))
            .expect("the model in MOSAIC_MODEL_DIR loads"),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let hang = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let held = hang.clone();
    let texts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = texts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (model, hang, counted) = (model.clone(), held.clone(), counted.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut length = 0usize;
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    return;
                }
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                    if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                while hang.load(Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let texts: Vec<&str> = request["input"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                counted.fetch_add(texts.len(), Ordering::SeqCst);
                use mosaic_index::Embedder;
                let vectors = model.embed_batch(&texts).expect("embed");
                let data: Vec<Value> = vectors
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| serde_json::json!({"index": i, "embedding": v}))
                    .collect();
                let reply = serde_json::json!({"data": data}).to_string();
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            });
        }
    });
    Some(MiniLmEndpoint { url, hang, texts })
}

/// [`world_with`] embedding with the real MiniLM through `endpoint`.
pub fn minilm_world(endpoint: &MiniLmEndpoint, adjust: impl FnOnce(&mut ServerConfig)) -> World {
    let url = endpoint.url.clone();
    world_with(move |c| {
        c.embedder = Some(mosaic_service::embedder::EmbedderKind::Http);
        c.embedder_url = Some(url);
        c.embedder_model = Some("all-minilm-l6-v2".into());
        c.embedding_dim = 384;
        adjust(c);
    })
}

/// The value of an unlabelled counter in a metrics rendering (0 when absent).
pub fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

/// How many calls `/metrics` text timed in each write phase:
/// `[prepare, commit, index_wait, locked]`.
pub fn write_phases(metrics: &str) -> [u64; 4] {
    ["prepare", "commit", "index_wait", "locked"].map(|phase| {
        counter(
            metrics,
            &format!("mosaic_write_phase_seconds_count{{phase=\"{phase}\"}}"),
        )
    })
}

/// The earlier release's catalog tables that this one moves into the
/// store, as that release created them.
const RELEASED_CATALOG: &str = "
CREATE TABLE tenants (tenant_id TEXT PRIMARY KEY, policy_json TEXT NOT NULL,
    policy_sha256 TEXT NOT NULL, policy_valid_from_ms INTEGER NOT NULL, created_at_ms INTEGER NOT NULL);
CREATE TABLE api_keys (key_id TEXT PRIMARY KEY, key_sha256 TEXT NOT NULL UNIQUE, role TEXT NOT NULL,
    tenant_id TEXT, principal_id TEXT, created_at_ms INTEGER NOT NULL, disabled INTEGER NOT NULL DEFAULT 0);
CREATE TABLE grants (tenant_id TEXT NOT NULL, principal_id TEXT NOT NULL, grant_json TEXT NOT NULL,
    PRIMARY KEY (tenant_id, principal_id));
CREATE TABLE verifiers (tenant_id TEXT NOT NULL, verifier_id TEXT NOT NULL, verifier_release TEXT NOT NULL,
    public_key_hex TEXT NOT NULL, created_at_ms INTEGER NOT NULL, disabled INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, verifier_id));
CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE policy_history (tenant_id TEXT NOT NULL, policy_sha256 TEXT NOT NULL,
    noted_at_ms INTEGER NOT NULL, PRIMARY KEY (tenant_id, policy_sha256));
CREATE TABLE application_keys (key_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, bounds_json TEXT NOT NULL);
CREATE TABLE tenant_options (tenant_id TEXT PRIMARY KEY, claim_updates TEXT NOT NULL);
CREATE TABLE write_guards (tenant_id TEXT PRIMARY KEY, guards_json TEXT NOT NULL);
";

/// The earlier release's own tables about its front door (catalog schema
/// 3), as that release created them in `catalog.sqlite`.
const RELEASED_INTAKE: &str = "
CREATE TABLE proposals (proposal_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL, record_id TEXT NOT NULL, accepted INTEGER NOT NULL,
    decided_at_ms INTEGER NOT NULL);
CREATE TABLE memories (record_id TEXT PRIMARY KEY, proposal_id TEXT NOT NULL, tenant_id TEXT NOT NULL,
    writer_principal_id TEXT NOT NULL, subject_key TEXT NOT NULL, subject_principal_id TEXT,
    kind TEXT NOT NULL, created_at_ms INTEGER NOT NULL, request_json TEXT);
CREATE TABLE messages (tenant_id TEXT NOT NULL, principal_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL, message_id TEXT NOT NULL, record_id TEXT NOT NULL,
    content_sha256 TEXT NOT NULL, provenance_sha256 TEXT NOT NULL, locator_sha256 TEXT NOT NULL,
    captured_at_ms INTEGER NOT NULL, PRIMARY KEY (tenant_id, principal_id, conversation_id, message_id));
CREATE TABLE extraction_jobs (job_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL, key_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
    message_ids_json TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms INTEGER NOT NULL, last_error TEXT, report_json TEXT, created_at_ms INTEGER NOT NULL);
";

/// Lays `data` out as the release before store schema 11 kept it: the
/// proposals' owners, captured messages, extraction jobs and export copies
/// in its own `catalog.sqlite` (catalog schema 3), taken out of the
/// store's tables, and the store taken back to schema 10.
pub fn as_released_v10(data: &std::path::Path) {
    let store = rusqlite::Connection::open(data.join("store.sqlite")).expect("store");
    store
        .execute_batch(&format!(
            "ATTACH DATABASE '{}' AS old;",
            data.join("catalog.sqlite").display()
        ))
        .expect("attach");
    let tables = RELEASED_INTAKE.replace("CREATE TABLE ", "CREATE TABLE old.");
    store.execute_batch(&tables).expect("released tables");
    store
        .execute_batch(
            "INSERT INTO old.proposals SELECT proposal_id, tenant_id, principal_id, record_id,
                 accepted, decided_at_ms FROM proposals;
             INSERT INTO old.memories SELECT c.record_id, c.proposal_id, c.tenant_id,
                 c.proposer_principal_id, c.subject_type || ':' || c.subject_a,
                 CASE WHEN c.subject_type = 'principal' THEN c.subject_a END, c.kind,
                 c.created_at_ms, e.request_json
                 FROM record_catalog c LEFT JOIN export_requests e ON e.record_id = c.record_id;
             INSERT INTO old.messages SELECT tenant_id, principal_id, conversation_id, message_id,
                 record_id, content_sha256, provenance_sha256, locator_sha256, captured_at_ms
                 FROM captured_messages;
             INSERT INTO old.extraction_jobs SELECT job_id, tenant_id, principal_id, key_id,
                 conversation_id, message_ids_json, state, attempts, next_attempt_ms, last_error,
                 report_json, created_at_ms FROM extraction_jobs;
             PRAGMA old.user_version = 3;
             DETACH DATABASE old;
             DROP TABLE captured_messages; DROP TABLE extraction_jobs; DROP TABLE export_requests;
             ALTER TABLE proposals DROP COLUMN principal_id;
             DELETE FROM meta WHERE key = 'intake_imported';
             DROP TABLE scope_entries; DROP TABLE scope_pages; DROP TABLE scope_heads;
             UPDATE meta SET int_value = 10 WHERE key = 'schema_version';
             PRAGMA user_version = 10;",
        )
        .expect("released layout");
}

/// Lays `data` out as the release before store schema 9 kept it: the
/// store's directory rows copied into the catalog file's tables (the
/// policy and grant documents from the store's own) beside its front-door
/// tables ([`as_released_v10`]), the store taken back to schema 8.
pub fn as_released(data: &std::path::Path) {
    as_released_v10(data);
    let store = rusqlite::Connection::open(data.join("store.sqlite")).expect("store");
    store
        .execute_batch(&format!(
            "ATTACH DATABASE '{}' AS old;",
            data.join("catalog.sqlite").display()
        ))
        .expect("attach");
    let tables = RELEASED_CATALOG.replace("CREATE TABLE ", "CREATE TABLE old.");
    store.execute_batch(&tables).expect("released tables");
    store
        .execute_batch(
            "INSERT INTO old.tenants SELECT s.tenant_id, p.policy_json, p.policy_sha256, s.policy_valid_from_ms, s.created_at_ms
                 FROM tenant_settings s JOIN policies p ON p.tenant_id = s.tenant_id;
             INSERT INTO old.api_keys SELECT key_id, key_sha256, role, tenant_id, principal_id, created_at_ms, disabled FROM api_keys;
             INSERT INTO old.application_keys SELECT key_id, tenant_id, bounds_json FROM api_keys WHERE role = 'application';
             INSERT INTO old.grants SELECT tenant_id, principal_id, grant_json FROM grants;
             INSERT INTO old.verifiers SELECT * FROM verifiers;
             INSERT INTO old.settings SELECT * FROM server_settings;
             INSERT INTO old.policy_history SELECT * FROM policy_history;
             INSERT INTO old.tenant_options SELECT tenant_id, claim_updates FROM tenant_settings WHERE claim_updates IS NOT NULL;
             INSERT INTO old.write_guards SELECT tenant_id, write_guards_json FROM tenant_settings WHERE write_guards_json IS NOT NULL;
             DETACH DATABASE old;
             DROP TABLE api_keys; DROP TABLE tenant_settings; DROP TABLE policy_history;
             DROP TABLE verifiers; DROP TABLE server_settings;
             DELETE FROM meta WHERE key = 'catalog_imported';
             ALTER TABLE audit_events DROP COLUMN leaf_sha256;
             DELETE FROM meta WHERE key = 'audit_tree';
             UPDATE meta SET int_value = 8 WHERE key = 'schema_version';
             PRAGMA user_version = 8;",
        )
        .expect("released layout");
}

/// The `src` directories of the crates the product is built from: the
/// service, the transports and the `mosaic` binary.
pub fn product_sources() -> Vec<std::path::PathBuf> {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    ["mosaic-service", "mosaic-server", "mosaic-cli"]
        .iter()
        .map(|name| crates.join(name).join("src"))
        .collect()
}
