//! The HTTP JSON API: [`app`] builds the whole router. Handlers decode,
//! authenticate, call one [`Service`] function on a blocking thread and
//! encode; every failure is a JSON error with a stable code.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRequestParts, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post, put};
use serde::Serialize;

use crate::mem0;
use mosaic_service::api::*;
use mosaic_service::error::{ServiceError, ServiceResult};
use mosaic_service::service::Service;

mod extract;

use extract::BodyLimit;
pub use extract::{
    ApiError, ApiJson, ApiPath, ApiQuery, ApiText, Auth, Empty, KeyAuth, USER_HEADER, decode_json,
};

/// Shared state of the router.
pub type AppState = Arc<Service>;

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ServiceResult<T> + Send + 'static,
) -> Result<T, ApiError> {
    let f = move || {
        mosaic_service::priority::bulk_thread();
        f()
    };
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result.map_err(ApiError),
        Err(_) => Err(ApiError(ServiceError::Internal(
            "worker task failed".into(),
        ))),
    }
}

pub(crate) type Reply<T> = Result<axum::Json<T>, ApiError>;

pub(crate) async fn call<T: Serialize + Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&Service) -> ServiceResult<T> + Send + 'static,
) -> Reply<T> {
    let service = state.clone();
    blocking(move || f(&service)).await.map(axum::Json)
}

fn json_lines<T: Serialize>(items: &[T]) -> Result<Response, ApiError> {
    let mut out = String::new();
    for item in items {
        out.push_str(
            &serde_json::to_string(item)
                .map_err(|e| ApiError(ServiceError::Internal(e.to_string())))?,
        );
        out.push('\n');
    }
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], out).into_response())
}

// ---------------------------------------------------------------- handlers

async fn health(State(s): State<AppState>) -> Reply<HealthResponse> {
    if s.config().postgres.is_some() {
        // The PostgreSQL client blocks on the network: the blocking pool.
        return call(&s, |s| s.health()).await;
    }
    // Embedded, health is two indexed reads on its own SQLite connection
    // (tens of microseconds, never waiting on a request's lock; a WAL
    // reader never waits for the writer), answered on the async worker
    // itself: under load a hop to the blocking pool queues for the cores
    // behind the busy request threads, which was most of health's p99.
    s.health().map(axum::Json).map_err(ApiError)
}

/// The Prometheus text: the admin key only (its counters move with every
/// tenant's writes, recalls and deletions), checked as every admin route
/// checks it, unless the server was started to answer it without a key.
async fn metrics(State(s): State<AppState>, request: Request) -> Result<Response, ApiError> {
    if !s.config().metrics_without_key {
        let (mut parts, _) = request.into_parts();
        let Auth(c) = Auth::from_request_parts(&mut parts, &s).await?;
        c.require_admin()?;
    }
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.render_metrics(),
    )
        .into_response())
}

async fn openapi() -> axum::Json<serde_json::Value> {
    axum::Json(crate::openapi::document())
}

async fn whoami(State(s): State<AppState>, Auth(c): Auth) -> Reply<WhoAmI> {
    call(&s, move |s| s.whoami(&c)).await
}

async fn propose(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(r): ApiJson<ProposeRequest>,
) -> Reply<ProposeResponse> {
    call(&s, move |s| s.propose(&c, &r)).await
}

async fn extraction_report(State(s): State<AppState>, Auth(c): Auth) -> Reply<ExtractionReport> {
    call(&s, move |s| s.extraction_report(&c)).await
}

async fn ingest(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(conversation_id): ApiPath<String>,
    ApiJson(r): ApiJson<IngestRequest>,
) -> Reply<IngestResponse> {
    call(&s, move |s| s.ingest_conversation(&c, &conversation_id, &r)).await
}

async fn add_fact(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(r): ApiJson<FactRequest>,
) -> Reply<ProposeResponse> {
    call(&s, move |s| s.add_fact(&c, &r)).await
}

async fn list_memories(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Reply<Vec<ListEntry>> {
    call(&s, move |s| s.list_by_subject(&c, &q)).await
}

async fn browse(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiQuery(q): ApiQuery<BrowseQuery>,
) -> Reply<BrowsePage> {
    call(&s, move |s| s.browse(&c, &q)).await
}

async fn memory_history(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(id): ApiPath<String>,
) -> Reply<MemoryHistory> {
    call(&s, move |s| s.memory_history(&c, &id)).await
}

async fn list_consents(
    State(s): State<AppState>,
    Auth(c): Auth,
) -> Reply<Vec<mosaic_store::StoredConsent>> {
    call(&s, move |s| s.list_consents(&c)).await
}

async fn outbox_state(State(s): State<AppState>, Auth(c): Auth) -> Reply<OutboxState> {
    call(&s, move |s| s.outbox_state(&c)).await
}

async fn item_at_address(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiQuery(q): ApiQuery<AddressQuery>,
) -> Reply<MemoryView> {
    call(&s, move |s| s.memory_at_address(&c, &q)).await
}

async fn put_item(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(r): ApiJson<ItemWrite>,
) -> Reply<ProposeResponse> {
    call(&s, move |s| s.put_item(&c, &r)).await
}

async fn delete_item(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiQuery(q): ApiQuery<AddressQuery>,
) -> Reply<ItemDeletion> {
    call(&s, move |s| s.delete_item(&c, &q)).await
}

async fn namespaces(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiQuery(q): ApiQuery<NamespacesQuery>,
) -> Reply<NamespacesPage> {
    call(&s, move |s| s.namespaces(&c, &q)).await
}

async fn get_memory(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(id): ApiPath<String>,
) -> Reply<MemoryView> {
    call(&s, move |s| s.get_memory(&c, &id)).await
}

async fn revoke(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(id): ApiPath<String>,
    ApiJson(r): ApiJson<RevokeRequest>,
) -> Reply<RevocationResponse> {
    call(&s, move |s| s.revoke(&c, &id, &r)).await
}

async fn deletion(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(id): ApiPath<String>,
) -> Reply<RevocationResponse> {
    call(&s, move |s| s.deletion_status(&c, &id)).await
}

async fn inclusion(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<InclusionQuery>,
) -> Reply<InclusionResponse> {
    call(&s, move |s| s.memory_inclusion(&c, &id, &q)).await
}

async fn recall(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(r): ApiJson<RecallRequest>,
) -> Reply<RecallResponse> {
    call(&s, move |s| s.recall(&c, &r)).await
}

async fn consent(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(r): ApiJson<ConsentRequest>,
) -> Reply<ConsentResponse> {
    call(&s, move |s| s.give_consent(&c, &r)).await
}

async fn withdraw(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(sha): ApiPath<String>,
    ApiJson(Empty {}): ApiJson<Empty>,
) -> Reply<WithdrawResponse> {
    call(&s, move |s| s.withdraw_consent(&c, &sha)).await
}

async fn erasure(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(Empty {}): ApiJson<Empty>,
) -> Reply<ErasureResponse> {
    call(&s, move |s| s.erase_self(&c)).await
}

async fn verify(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(r): ApiJson<VerifyRequest>,
) -> Reply<VerifyResponse> {
    call(&s, move |s| s.verify(&c, &r)).await
}

async fn export(State(s): State<AppState>, Auth(c): Auth) -> Result<Response, ApiError> {
    let service = s.clone();
    let lines = blocking(move || service.export(&c, None)).await?;
    json_lines(&lines)
}

async fn import(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiText(body): ApiText,
) -> Reply<ImportResponse> {
    call(&s, move |s| s.import(&c, &body)).await
}

async fn policy(
    State(s): State<AppState>,
    Auth(c): Auth,
) -> Reply<mosaic_harness::memory_write::MemoryWritePolicy> {
    call(&s, move |s| s.get_policy(&c, None)).await
}

async fn list_tenants(State(s): State<AppState>, Auth(c): Auth) -> Reply<Vec<String>> {
    call(&s, move |s| s.list_tenants(&c)).await
}

async fn create_tenant(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(r): ApiJson<CreateTenantRequest>,
) -> Reply<mosaic_harness::memory_write::MemoryWritePolicy> {
    call(&s, move |s| s.create_tenant(&c, &r)).await
}

async fn tenant_policy(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(t): ApiPath<String>,
) -> Reply<mosaic_harness::memory_write::MemoryWritePolicy> {
    call(&s, move |s| {
        c.require_admin()?;
        s.get_policy(&c, Some(&t))
    })
    .await
}

async fn put_policy(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(t): ApiPath<String>,
    ApiJson(r): ApiJson<PolicyRequest>,
) -> Reply<mosaic_harness::memory_write::MemoryWritePolicy> {
    call(&s, move |s| s.put_policy(&c, &t, &r, false)).await
}

async fn put_grant(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath((t, p)): ApiPath<(String, String)>,
    ApiJson(r): ApiJson<GrantRequest>,
) -> Reply<mosaic_harness::memory_write::MemoryWriteGrant> {
    call(&s, move |s| s.put_grant(&c, &t, &p, &r)).await
}

async fn erase_principal(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath((t, p)): ApiPath<(String, String)>,
    ApiJson(Empty {}): ApiJson<Empty>,
) -> Reply<ErasureResponse> {
    call(&s, move |s| s.erase_principal(&c, &t, &p)).await
}

async fn review(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(t): ApiPath<String>,
) -> Reply<ReviewList> {
    call(&s, move |s| s.review_cases(&c, &t)).await
}

async fn tenant_export(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(t): ApiPath<String>,
) -> Result<Response, ApiError> {
    let service = s.clone();
    let lines = blocking(move || {
        c.require_admin()?;
        service.export(&c, Some(&t))
    })
    .await?;
    json_lines(&lines)
}

async fn resolve_review(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(case): ApiPath<String>,
    ApiJson(r): ApiJson<ReviewActionRequest>,
) -> Reply<ReviewReceiptView> {
    call(&s, move |s| s.resolve_review(&c, &case, &r)).await
}

async fn list_keys(
    State(s): State<AppState>,
    Auth(c): Auth,
) -> Reply<Vec<mosaic_service::auth::KeyInfo>> {
    call(&s, move |s| s.list_keys(&c)).await
}

async fn create_key(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(r): ApiJson<CreateKeyRequest>,
) -> Reply<CreateKeyResponse> {
    call(&s, move |s| s.create_key(&c, &r)).await
}

async fn create_application_key(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(r): ApiJson<CreateApplicationKeyRequest>,
) -> Reply<CreateApplicationKeyResponse> {
    call(&s, move |s| s.create_application_key(&c, &r)).await
}

async fn carry_policy(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(t): ApiPath<String>,
    ApiJson(Empty {}): ApiJson<Empty>,
) -> Reply<CarryPolicyResponse> {
    call(&s, move |s| s.carry_policy(&c, &t)).await
}

async fn delete_key(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(id): ApiPath<String>,
) -> Reply<serde_json::Value> {
    call(&s, move |s| {
        s.disable_key(&c, &id)?;
        Ok(serde_json::json!({"key_id": id, "disabled": true}))
    })
    .await
}

async fn list_verifiers(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(t): ApiPath<String>,
) -> Reply<Vec<VerifierView>> {
    call(&s, move |s| s.list_verifiers(&c, &t)).await
}

async fn register_verifier(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath(t): ApiPath<String>,
    ApiJson(r): ApiJson<RegisterVerifierRequest>,
) -> Reply<VerifierView> {
    call(&s, move |s| s.register_verifier(&c, &t, &r)).await
}

async fn disable_verifier(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiPath((t, v)): ApiPath<(String, String)>,
) -> Reply<VerifierView> {
    call(&s, move |s| s.disable_verifier(&c, &t, &v)).await
}

async fn reconcile(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(Empty {}): ApiJson<Empty>,
) -> Reply<ReconcileReport> {
    call(&s, move |s| {
        c.require_admin()?;
        s.reconcile_and_repair()
    })
    .await
}

async fn reindex(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiJson(Empty {}): ApiJson<Empty>,
) -> Reply<ReindexReport> {
    call(&s, move |s| {
        c.require_admin()?;
        s.reindex(None)
    })
    .await
}

async fn audit_head(State(s): State<AppState>, Auth(c): Auth) -> Reply<SignedAuditHead> {
    call(&s, move |s| {
        c.require_admin()?;
        s.signed_audit_head()
    })
    .await
}

async fn audit_inclusion(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiQuery(q): ApiQuery<AuditInclusionQuery>,
) -> Reply<AuditInclusionResponse> {
    call(&s, move |s| {
        c.require_admin()?;
        s.audit_inclusion(&q)
    })
    .await
}

async fn audit_consistency(
    State(s): State<AppState>,
    Auth(c): Auth,
    ApiQuery(q): ApiQuery<AuditConsistencyQuery>,
) -> Reply<AuditConsistencyResponse> {
    call(&s, move |s| {
        c.require_admin()?;
        s.audit_consistency(&q)
    })
    .await
}

/// The receipt-signing public keys: no credential, anyone may check a
/// receipt.
async fn receipt_keys(State(s): State<AppState>) -> Reply<mosaic_service::signing::KeysResponse> {
    call(&s, |s| Ok(s.receipt_keys())).await
}

async fn route_not_found(uri: axum::http::Uri) -> ApiError {
    if let Some(feature) = mem0::unsupported_platform_feature(uri.path()) {
        return ApiError(ServiceError::NotSupported(format!(
            "mem0's platform {feature} are not offered by this service; \
             its memory routes are (see the README)"
        )));
    }
    ApiError(ServiceError::NotFound {
        what: "route",
        id: "no such path".into(),
    })
}

async fn method_not_allowed() -> Response {
    let body = ServiceError::bad_request(
        "method_not_allowed",
        "this path does not accept this method",
    )
    .body();
    (StatusCode::METHOD_NOT_ALLOWED, axum::Json(body)).into_response()
}

// ---------------------------------------------------------------- middleware

/// Longest request target (path and query) the API reads, in bytes.
/// hyper answers a target longer than 65534 bytes itself (414 with an
/// empty body) before any of this code runs; up to that, a target over
/// this limit is answered here, as JSON.
pub const MAX_URI_BYTES: usize = 16 * 1024;

/// Most header fields a request may carry. hyper answers more than 100
/// itself (431 with an empty body); up to that, more than this many are
/// answered here, as JSON.
pub const MAX_HEADER_FIELDS: usize = 64;

/// Most bytes of header names and values a request may carry. hyper
/// answers a head larger than its read buffer (about 400 KiB) itself (431
/// with an empty body); up to that, a larger head is answered here.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// The request head's size against the limits above: the product's JSON
/// error (414 `uri_too_long`, 431 `headers_too_large`) when it is over.
fn head_refusal(req: &Request) -> Option<ApiError> {
    let uri = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if uri > MAX_URI_BYTES {
        return Some(ApiError(ServiceError::UriTooLong {
            limit: MAX_URI_BYTES,
        }));
    }
    let headers = req.headers();
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    (headers.len() > MAX_HEADER_FIELDS || bytes > MAX_HEADER_BYTES).then_some(ApiError(
        ServiceError::HeadersTooLarge {
            fields: MAX_HEADER_FIELDS,
            bytes: MAX_HEADER_BYTES,
        },
    ))
}

async fn limits(State(s): State<AppState>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    if let Some(refusal) = head_refusal(&req) {
        return refusal.into_response();
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    req.extensions_mut()
        .insert(BodyLimit(s.config().body_limit_bytes));
    let timeout = Duration::from_millis(s.config().request_timeout_ms);
    let response = match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError(ServiceError::Timeout(s.config().request_timeout_ms)).into_response(),
    };
    let status = response.status().as_u16().to_string();
    s.metrics().incr(
        "mosaic_http_requests_total",
        &[
            ("route", &route),
            ("method", method.as_str()),
            ("status", &status),
        ],
    );
    s.metrics().observe(
        "mosaic_http_request_duration_seconds",
        &[("route", &route)],
        started.elapsed().as_secs_f64(),
    );
    response
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    let body = ServiceError::Internal("the request handler failed".into()).body();
    let mut response = (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Records every `(method, path)` as the router is built, so tests can
/// compare the routes with the OpenAPI document.
struct Routes {
    router: Router<AppState>,
    registered: Vec<(String, String)>,
}

impl Routes {
    fn add(
        mut self,
        path: &'static str,
        methods: &[Method],
        handler: MethodRouter<AppState>,
    ) -> Self {
        for m in methods {
            self.registered
                .push((m.as_str().to_owned(), path.to_owned()));
        }
        self.router = self.router.route(path, handler);
        self
    }
}

fn routes() -> Routes {
    let routes = Routes {
        router: Router::new(),
        registered: Vec::new(),
    };
    routes
        .add("/health", &[Method::GET], get(health))
        .add("/metrics", &[Method::GET], get(metrics))
        .add("/v1/keys", &[Method::GET], get(receipt_keys))
        .add("/openapi.json", &[Method::GET], get(openapi))
        .add("/v1/whoami", &[Method::GET], get(whoami))
        .add(
            "/v1/memories",
            &[Method::POST, Method::GET],
            post(propose).get(list_memories),
        )
        .add("/v1/browse", &[Method::GET], get(browse))
        .add(
            "/v1/items",
            &[Method::GET, Method::PUT, Method::DELETE],
            get(item_at_address).put(put_item).delete(delete_item),
        )
        .add("/v1/namespaces", &[Method::GET], get(namespaces))
        .add("/v1/memories/{record_id}", &[Method::GET], get(get_memory))
        .add(
            "/v1/memories/{record_id}/history",
            &[Method::GET],
            get(memory_history),
        )
        .add(
            "/v1/memories/{record_id}/revoke",
            &[Method::POST],
            post(revoke),
        )
        .add(
            "/v1/memories/{record_id}/deletion",
            &[Method::GET],
            get(deletion),
        )
        .add(
            "/v1/memories/{record_id}/inclusion",
            &[Method::GET],
            get(inclusion),
        )
        .add(
            "/v1/conversations/{conversation_id}/messages",
            &[Method::POST],
            post(ingest),
        )
        .add("/v1/facts", &[Method::POST], post(add_fact))
        .add("/v1/recall", &[Method::POST], post(recall))
        .add(
            "/memories",
            &[Method::POST, Method::GET, Method::DELETE],
            post(mem0::add_memories)
                .get(mem0::get_all_memories)
                .delete(mem0::delete_all_memories),
        )
        .add(
            "/memories/{memory_id}",
            &[Method::GET, Method::PUT, Method::DELETE],
            get(mem0::get_one)
                .put(mem0::update_memory)
                .delete(mem0::delete_memory),
        )
        .add(
            "/memories/{memory_id}/history",
            &[Method::GET],
            get(mem0::memory_history),
        )
        .add("/search", &[Method::POST], post(mem0::search_memories))
        .add("/v1/ping/", &[Method::GET], get(mem0::ping))
        .add(
            "/v3/memories/add/",
            &[Method::POST],
            post(mem0::platform_add_memories),
        )
        .add(
            "/v3/memories/search/",
            &[Method::POST],
            post(mem0::platform_search_memories),
        )
        .add(
            "/v3/memories/",
            &[Method::POST],
            post(mem0::platform_list_memories),
        )
        // mem0's platform API v2 (older clients): the same bodies.
        .add(
            "/v2/memories/search/",
            &[Method::POST],
            post(mem0::platform_search_memories),
        )
        .add(
            "/v2/memories/",
            &[Method::POST],
            post(mem0::platform_list_memories),
        )
        .add(
            "/v1/memories/",
            &[Method::DELETE],
            delete(mem0::delete_all_memories),
        )
        .add(
            "/v1/memories/{record_id}/",
            &[Method::GET, Method::PUT, Method::DELETE],
            get(mem0::get_one)
                .put(mem0::platform_update_memory)
                .delete(mem0::platform_delete_memory),
        )
        .add(
            "/v1/memories/{record_id}/history/",
            &[Method::GET],
            get(mem0::memory_history),
        )
        .add(
            "/v1/entities/",
            &[Method::GET],
            get(mem0::platform_entities),
        )
        .add(
            "/v2/entities/{entity_type}/{entity_name}/",
            &[Method::DELETE],
            delete(mem0::platform_delete_entity),
        )
        .add(
            "/v1/batch/",
            &[Method::PUT, Method::DELETE],
            put(mem0::platform_batch_update).delete(mem0::platform_batch_delete),
        )
        .add("/v1/ping", &[Method::GET], get(mem0::ping))
        .add(
            "/v1/consents",
            &[Method::POST, Method::GET],
            post(consent).get(list_consents),
        )
        .add(
            "/v1/consents/{consent_sha256}/withdraw",
            &[Method::POST],
            post(withdraw),
        )
        .add("/v1/erasure", &[Method::POST], post(erasure))
        .add("/v1/verify", &[Method::POST], post(verify))
        .add("/v1/export", &[Method::GET], get(export))
        .add("/v1/import", &[Method::POST], post(import))
        .add("/v1/policy", &[Method::GET], get(policy))
        .add(
            "/v1/admin/tenants",
            &[Method::GET, Method::POST],
            get(list_tenants).post(create_tenant),
        )
        .add(
            "/v1/admin/tenants/{tenant_id}/policy",
            &[Method::GET, Method::PUT],
            get(tenant_policy).put(put_policy),
        )
        .add(
            "/v1/admin/tenants/{tenant_id}/policy/carry",
            &[Method::POST],
            post(carry_policy),
        )
        .add(
            "/v1/admin/tenants/{tenant_id}/principals/{principal_id}/grant",
            &[Method::PUT],
            put(put_grant),
        )
        .add(
            "/v1/admin/tenants/{tenant_id}/principals/{principal_id}/erase",
            &[Method::POST],
            post(erase_principal),
        )
        .add(
            "/v1/admin/tenants/{tenant_id}/review",
            &[Method::GET],
            get(review),
        )
        .add(
            "/v1/admin/tenants/{tenant_id}/export",
            &[Method::GET],
            get(tenant_export),
        )
        .add(
            "/v1/admin/tenants/{tenant_id}/verifiers",
            &[Method::GET, Method::POST],
            get(list_verifiers).post(register_verifier),
        )
        .add(
            "/v1/admin/tenants/{tenant_id}/verifiers/{verifier_id}",
            &[Method::DELETE],
            delete(disable_verifier),
        )
        .add(
            "/v1/admin/review/{case_id}",
            &[Method::POST],
            post(resolve_review),
        )
        .add(
            "/v1/admin/keys",
            &[Method::GET, Method::POST],
            get(list_keys).post(create_key),
        )
        .add(
            "/v1/admin/keys/{key_id}",
            &[Method::DELETE],
            delete(delete_key),
        )
        .add(
            "/v1/admin/application-keys",
            &[Method::POST],
            post(create_application_key),
        )
        .add("/v1/admin/reconcile", &[Method::POST], post(reconcile))
        .add("/v1/admin/reindex", &[Method::POST], post(reindex))
        .add("/v1/admin/audit/head", &[Method::GET], get(audit_head))
        .add(
            "/v1/admin/audit/proof/inclusion",
            &[Method::GET],
            get(audit_inclusion),
        )
        .add(
            "/v1/admin/audit/proof/consistency",
            &[Method::GET],
            get(audit_consistency),
        )
        .add(
            "/v1/admin/extraction",
            &[Method::GET],
            get(extraction_report),
        )
        .add("/v1/admin/outbox", &[Method::GET], get(outbox_state))
}

/// Every `(METHOD, path)` the router serves.
pub fn registered_routes() -> Vec<(String, String)> {
    routes().registered
}

/// The whole HTTP API over one service.
pub fn app(state: AppState) -> Router {
    let body_limit = state.config().body_limit_bytes;
    routes()
        .router
        .merge(crate::console::routes())
        .merge(crate::mcp::routes(state.clone()))
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), limits))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ))
        .with_state(state)
}

/// Runs the background reconcile loop until the returned handle is aborted.
pub fn spawn_reconciler(state: AppState) -> tokio::task::JoinHandle<()> {
    let interval = Duration::from_millis(state.config().reconcile_interval_ms);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        loop {
            ticker.tick().await;
            let service = state.clone();
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || service.reconcile()).await {
                tracing::warn!(code = e.code(), "reconcile pass failed");
            }
        }
    })
}
