//! A service in a temporary directory with two tenants and two principals
//! each, and a helper that sends one request through the router.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use mosaic_harness::memory_write::MemoryPurpose;
use mosaic_server::api::{
    ConsentRequest, CreateKeyRequest, CreateTenantRequest, GrantRequest, PolicyRequest,
};
use mosaic_server::auth::Credential;
use mosaic_server::catalog::{SharedSemanticEvidence, WriteGuards};
use mosaic_server::service::ADMIN_KEY_FILE;
use mosaic_server::{ServerConfig, Service, app};
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
        embedder: mosaic_server::embedder::EmbedderKind::Hash,
        ..ServerConfig::default()
    }
}

pub fn world_with(adjust: impl FnOnce(&mut ServerConfig)) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    adjust(&mut config);
    let (service, report) = Service::open(config.clone()).expect("open service");
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

/// Four words no other seed shares (hex digits of the seed's digest), so
/// templated test contents are not near-duplicates of each other.
pub fn distinct(seed: &str) -> String {
    let digest = mosaic_harness::canonical::sha256_hex(seed.as_bytes());
    (0..4)
        .map(|i| &digest[i * 8..i * 8 + 8])
        .collect::<Vec<_>>()
        .join(" ")
}
