//! mem0's hosted platform routes, as mem0's `MemoryClient` and
//! `AsyncMemoryClient` call them (`/v3/memories/...`,
//! `/v1/memories/{id}/`, `/v1/entities/`, `/v2/entities/{type}/{name}/`,
//! `/v1/batch/`, `/v1/ping/`, with trailing slashes). Each maps onto the
//! open-source route's function in the parent module; a body field none of
//! them reads is named in the answer's `ignored`.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::*;

/// The fields of a platform request body that `known` lists, and the
/// names of the others (to be reported under `ignored`, a `null` one too:
/// mem0's `expiration_date: null` asks for a change). A known field that
/// is `null` counts as absent.
fn split_known(
    body: Value,
    known: &[&str],
) -> ServiceResult<(serde_json::Map<String, Value>, Vec<String>)> {
    let Value::Object(map) = body else {
        return Err(ServiceError::bad_request(
            "invalid_field",
            "the body must be a JSON object",
        ));
    };
    let mut kept = serde_json::Map::new();
    let mut ignored = Vec::new();
    for (name, value) in map {
        if !known.contains(&name.as_str()) {
            ignored.push(name);
        } else if !value.is_null() {
            kept.insert(name, value);
        }
    }
    Ok((kept, ignored))
}

/// Decodes the known fields as the open-source route's request (the same
/// strict decoding and error codes as a body).
fn decode_known<T: serde::de::DeserializeOwned>(
    kept: serde_json::Map<String, Value>,
) -> ServiceResult<T> {
    let bytes = serde_json::to_vec(&Value::Object(kept))
        .map_err(|e| ServiceError::Internal(format!("re-encoding a body: {e}")))?;
    crate::http::decode_json(&bytes)
}

fn merge_ignored(into: &mut Vec<String>, more: Vec<String>) {
    for name in more {
        if !into.contains(&name) {
            into.push(name);
        }
    }
}

const ADD_FIELDS: &[&str] = &[
    "messages",
    "user_id",
    "agent_id",
    "run_id",
    "metadata",
    "infer",
    "expiration_date",
    "memory_type",
    "prompt",
];

/// An answer that names the request fields it did not use.
trait NamesIgnored {
    fn ignored_mut(&mut self) -> &mut Vec<String>;
}

impl NamesIgnored for AddResponse {
    fn ignored_mut(&mut self) -> &mut Vec<String> {
        &mut self.ignored
    }
}

impl NamesIgnored for ListResponse {
    fn ignored_mut(&mut self) -> &mut Vec<String> {
        &mut self.ignored
    }
}

/// A platform body through the open-source route `route`: the fields
/// `known` lists decoded strictly as its request, the others named in its
/// answer's `ignored`.
fn through_open_source_route<T, R>(
    body: Value,
    known: &[&str],
    route: impl FnOnce(T) -> ServiceResult<R>,
) -> ServiceResult<R>
where
    T: serde::de::DeserializeOwned,
    R: NamesIgnored,
{
    let (kept, ignored) = split_known(body, known)?;
    let mut response = route(decode_known(kept)?)?;
    merge_ignored(response.ignored_mut(), ignored);
    Ok(response)
}

/// `POST /v3/memories/add/`: `POST /memories` with mem0's platform body.
fn platform_add(service: &Service, key: &KeyAuth, body: Value) -> ServiceResult<AddResponse> {
    through_open_source_route(body, ADD_FIELDS, |request| add(service, key, request))
}

const SEARCH_FIELDS: &[&str] = &[
    "query",
    "user_id",
    "agent_id",
    "run_id",
    "filters",
    "top_k",
    "limit",
    "threshold",
];

/// `POST /v3/memories/search/`: `POST /search` with mem0's platform body.
fn platform_search(service: &Service, key: &KeyAuth, body: Value) -> ServiceResult<ListResponse> {
    through_open_source_route(body, SEARCH_FIELDS, |request| search(service, key, request))
}

/// `POST /v3/memories/`'s query: mem0's pagination.
#[derive(Deserialize, Debug, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// The page, from 1 (default 1).
    #[serde(default)]
    page: Option<usize>,
    /// Memories a page (1 to 1000, default 100).
    #[serde(default)]
    page_size: Option<usize>,
}

/// `POST /v3/memories/`'s body: `filters` as search takes them (naming
/// `user_id`, `agent_id` or `run_id`, one of which is required, and
/// conditions on metadata and `created_at`).
#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageRequest {
    #[serde(default)]
    filters: Option<Value>,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
}

/// `POST /v3/memories/`'s answer: one page of what `GET /memories` lists,
/// newest first, in mem0's paginated shape.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct PageResponse {
    /// Memories listed in all pages.
    count: usize,
    /// The next page's path, when there is one.
    next: Option<String>,
    /// The previous page's path, when there is one.
    previous: Option<String>,
    results: Vec<Mem0Item>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignored: Vec<String>,
}

fn platform_list(
    service: &Service,
    key: &KeyAuth,
    page: PageQuery,
    body: Value,
) -> ServiceResult<PageResponse> {
    let (kept, ignored) = split_known(body, &["filters", "user_id", "agent_id", "run_id"])?;
    let request: PageRequest = decode_known(kept)?;
    let mut ids = [
        ("user_id", request.user_id),
        ("agent_id", request.agent_id),
        ("run_id", request.run_id),
    ];
    let filter = match &request.filters {
        Some(filters) => translate_filters(filters, &mut ids)?,
        None => None,
    };
    let [(_, user_id), (_, agent_id), (_, run_id)] = ids;
    let scope = Scope {
        user_id,
        agent_id,
        run_id,
        limit: None,
    };
    require_identifier(&scope, "list")?;
    let size = page.page_size.unwrap_or(100);
    let number = page.page.unwrap_or(1);
    if size == 0 || size > MAX_LISTED || number == 0 {
        return Err(ServiceError::bad_request(
            "invalid_query",
            format!("page starts at 1 and page_size is 1 to {MAX_LISTED}"),
        ));
    }
    let credential = as_user(service, key, scope.user_id.as_deref())?;
    let listed = active_ids(service, &credential, &scope, filter.as_ref())?;
    let count = listed.len();
    let start = (number - 1).saturating_mul(size);
    let mut results = Vec::new();
    for id in listed.iter().skip(start).take(size) {
        results.push(item(service, &credential, id)?);
    }
    let link = |n: usize| format!("/v3/memories/?page={n}&page_size={size}");
    Ok(PageResponse {
        count,
        next: (start.saturating_add(size) < count).then(|| link(number + 1)),
        previous: (number > 1).then(|| link(number - 1)),
        results,
        ignored,
    })
}

/// `PUT /v1/memories/{id}/`: `PUT /memories/{memory_id}` with mem0's
/// platform body (`text`; `metadata`, `timestamp` and `expiration_date`
/// are named in `ignored`).
fn platform_update(
    service: &Service,
    key: &KeyAuth,
    record_id: &str,
    body: Value,
) -> ServiceResult<UpdateResponse> {
    let (kept, ignored) = split_known(body, &["text", "data", "memory"])?;
    if kept.is_empty() {
        return Err(ServiceError::bad_request(
            "invalid_field",
            format!(
                "send the new text as `text`; this service does not store {}",
                if ignored.is_empty() {
                    "anything else".to_owned()
                } else {
                    ignored.join(", ")
                }
            ),
        ));
    }
    let credential = as_user(service, key, None)?;
    let mut response = update(service, &credential, record_id, decode_known(kept)?)?;
    response.ignored = ignored;
    Ok(response)
}

/// `DELETE /v1/memories/{id}/`'s query. The whole line is always deleted,
/// so `delete_linked` (mem0's "the memories this one superseded too") is
/// what happens either way.
#[derive(Deserialize, Debug, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    #[serde(default)]
    delete_linked: Option<bool>,
}

/// `GET /v1/entities/`'s answer: the acting user and the conversations
/// (mem0's runs) its active memories were captured in.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct EntitiesResponse {
    count: usize,
    results: Vec<Entity>,
}

/// One entity in mem0's shape.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct Entity {
    id: String,
    name: String,
    /// `user` or `run`.
    #[serde(rename = "type")]
    kind: String,
    total_memories: usize,
}

fn entities(service: &Service, key: &KeyAuth) -> ServiceResult<EntitiesResponse> {
    let credential = as_user(service, key, None)?;
    let (_, principal) = credential.principal()?;
    let active = service.active_memories(&credential)?;
    let mut runs: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for entry in &active {
        let view = service.get_memory(&credential, &entry.record_id)?;
        let mut named = std::collections::BTreeSet::new();
        for source in &view.record.sources {
            // Not runs: mem0's default conversation (no `run_id` or
            // `agent_id`) and the statements remembered one by one.
            if let Some(conversation) =
                mosaic_harness::record::message_conversation(&source.source_id)
                && conversation != "mem0"
                && conversation != mosaic_service::service::STATEMENTS
            {
                named.insert(conversation.to_owned());
            }
        }
        for conversation in named {
            *runs.entry(conversation).or_default() += 1;
        }
    }
    let mut results = vec![Entity {
        id: principal.to_owned(),
        name: principal.to_owned(),
        kind: "user".to_owned(),
        total_memories: active.len(),
    }];
    results.extend(runs.into_iter().map(|(name, total_memories)| Entity {
        id: name.clone(),
        name,
        kind: "run".to_owned(),
        total_memories,
    }));
    Ok(EntitiesResponse {
        count: results.len(),
        results,
    })
}

/// `DELETE /v2/entities/{type}/{name}/`: mem0's delete-all for one user,
/// agent or run (`DELETE /memories?user_id=...`).
fn delete_entity(
    service: &Service,
    key: &KeyAuth,
    kind: &str,
    name: String,
) -> ServiceResult<DeleteAllResponse> {
    let mut scope = Scope::default();
    match kind {
        "user" => scope.user_id = Some(name),
        "agent" => scope.agent_id = Some(name),
        "run" => scope.run_id = Some(name),
        _ => {
            return Err(ServiceError::bad_request(
                "invalid_path",
                "the entity type must be user, agent or run",
            ));
        }
    }
    delete_all(service, key, scope)
}

/// Most memories one batch names (mem0's platform takes up to 1000).
pub const MAX_BATCH: usize = 100;

/// The `memories` of a batch body, each with its `memory_id` and the
/// fields `known` lists; other fields are named as `memories[i].field`.
#[allow(clippy::type_complexity)]
fn batch_items(
    body: Value,
    known: &[&str],
) -> ServiceResult<(Vec<(String, serde_json::Map<String, Value>)>, Vec<String>)> {
    let invalid = |m: &str| ServiceError::bad_request("invalid_field", m.to_owned());
    let (mut kept, mut ignored) = split_known(body, &["memories"])?;
    let Some(Value::Array(list)) = kept.remove("memories") else {
        return Err(invalid("memories must be a list of objects with memory_id"));
    };
    if list.is_empty() || list.len() > MAX_BATCH {
        return Err(invalid(&format!("a batch names 1 to {MAX_BATCH} memories")));
    }
    let mut items = Vec::new();
    for (i, entry) in list.into_iter().enumerate() {
        let mut fields: Vec<&str> = known.to_vec();
        fields.push("memory_id");
        let (mut kept, extra) = split_known(entry, &fields)?;
        let Some(Value::String(id)) = kept.remove("memory_id") else {
            return Err(invalid("every memory in a batch needs its memory_id"));
        };
        if items.iter().any(|(seen, _)| *seen == id) {
            return Err(invalid("a batch names a memory twice"));
        }
        ignored.extend(extra.into_iter().map(|f| format!("memories[{i}].{f}")));
        items.push((id, kept));
    }
    Ok((items, ignored))
}

/// `PUT` and `DELETE /v1/batch/`'s body, as mem0's platform client sends
/// it (the server reads it field by field: [`batch_items`]).
#[derive(Debug, schemars::JsonSchema)]
pub struct BatchRequest {
    /// 1 to [`MAX_BATCH`] memories.
    pub memories: Vec<BatchItem>,
}

/// One memory of a batch.
#[derive(Debug, schemars::JsonSchema)]
pub struct BatchItem {
    /// The memory.
    pub memory_id: String,
    /// The new text (`PUT` only; required there).
    pub text: Option<String>,
}

/// `PUT /v1/batch/`'s answer: each memory's update, in order.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct BatchUpdateResponse {
    message: String,
    results: Vec<UpdateResponse>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignored: Vec<String>,
}

/// `PUT /v1/batch/`: every memory is checked first (it exists for the
/// caller, is its line's current memory, and has new text that is not
/// blank), so a batch naming a missing, superseded or blank one changes
/// nothing; then every memory is updated as `PUT /memories/{memory_id}`
/// does, all in one store transaction: when the gate refuses one, none is
/// updated (409 `write_refused`, naming it and the gate's violations).
fn batch_update(
    service: &Service,
    key: &KeyAuth,
    body: Value,
) -> ServiceResult<BatchUpdateResponse> {
    let (items, ignored) = batch_items(body, &["text"])?;
    let credential = as_user(service, key, None)?;
    let mut requests = Vec::new();
    for (id, kept) in items {
        if !kept.contains_key("text") {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "every memory in a batch update needs its new text",
            ));
        }
        let current = service.get_memory(&credential, &id)?;
        let request = decode_known::<UpdateRequest>(kept)?;
        // What the update itself would refuse, refused before any memory
        // of the batch is written.
        if request.text.as_deref().is_none_or(|t| t.trim().is_empty()) {
            return Err(ServiceError::bad_request(
                "invalid_message",
                format!("memories[{}] has no text to remember", requests.len()),
            ));
        }
        if current.state != "active" {
            return Err(ServiceError::Conflict {
                code: "stale_generation",
                message: format!(
                    "memories[{}] names a memory that is no longer its line's current one \
                     (it is {}): update the current memory",
                    requests.len(),
                    current.state
                ),
            });
        }
        requests.push((id, request));
    }
    let mut updates = Vec::with_capacity(requests.len());
    for (id, request) in requests {
        let Some(text) = request.text.or(request.data).or(request.memory) else {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "send the new text as `text`",
            ));
        };
        updates.push((id, text));
    }
    // One store transaction: when the gate refuses a later memory, the
    // earlier ones are not updated either.
    let responses = match service.update_texts(&credential, &updates)? {
        Ok(responses) => responses,
        Err((index, refused)) => {
            let codes: Vec<String> = refused.violations.iter().map(|v| v.code()).collect();
            return Err(ServiceError::Conflict {
                code: "write_refused",
                message: format!(
                    "the write gate refused memories[{index}] ({}): no memory of the batch \
                     was updated",
                    codes.join(", ")
                ),
            });
        }
    };
    let results: Vec<UpdateResponse> = updates
        .iter()
        .zip(responses)
        .map(|((id, _), response)| UpdateResponse {
            message: "Memory updated successfully!".to_owned(),
            id: response.record_id,
            previous_id: Some(id.clone()),
            violations: Vec::new(),
            review_case_ids: Vec::new(),
            expires_at: response.expires_at,
            ignored: Vec::new(),
        })
        .collect();
    let updated = results.len();
    Ok(BatchUpdateResponse {
        message: format!("Successfully updated {updated} memories"),
        results,
        ignored,
    })
}

/// `DELETE /v1/batch/`: every memory is checked first (a batch naming a
/// missing one deletes nothing); then each memory's whole line is
/// deleted as `DELETE /memories/{memory_id}` does.
fn batch_delete(service: &Service, key: &KeyAuth, body: Value) -> ServiceResult<DeleteAllResponse> {
    let (items, _) = batch_items(body, &[])?;
    let credential = as_user(service, key, None)?;
    for (id, _) in &items {
        service.get_memory(&credential, id)?;
    }
    let mut deleted: Vec<Deleted> = Vec::new();
    for (id, _) in items {
        // A memory on a line an earlier one of the batch shared is gone.
        if deleted.iter().any(|d| d.id == id) {
            continue;
        }
        deleted.extend(delete_one(service, &credential, &id)?.deleted);
    }
    let complete = deleted.iter().all(|d| d.deletion_receipt_sha256.is_some());
    Ok(DeleteAllResponse {
        message: if complete {
            "Successfully deleted the memories"
        } else {
            "Deletion started; some memories are still being erased"
        }
        .to_owned(),
        complete,
        deleted,
    })
}

/// The feature a platform route of mem0's serves that this service does
/// not offer, if `path` is one (answered `501 not_supported`).
pub fn unsupported_platform_feature(path: &str) -> Option<&'static str> {
    let features: &[(&str, &str)] = &[
        ("/v1/exports/", "memory exports"),
        ("/v1/summary/", "summaries"),
        ("/v1/feedback/", "feedback"),
        ("/v2/profiles/", "profiles"),
        ("/api/v1/webhooks/", "webhooks"),
        ("/api/v1/orgs/", "organization and project management"),
    ];
    if let Some((_, feature)) = features.iter().find(|(p, _)| path.starts_with(p)) {
        return Some(feature);
    }
    if path.starts_with("/v2/entities/") && path.contains("/profile") {
        return Some("profiles");
    }
    None
}

/// `GET /v1/ping/`'s answer: what mem0's platform answers a valid key
/// with, so mem0's `MemoryClient(api_key=..., host=...)` constructs (it
/// checks the key here first, and needs an organization and a project).
/// This service has neither: `org_id` is the key's tenant and
/// `project_id` its principal (for an application or the admin key, the
/// key's id); nothing the key could not learn from `GET /v1/whoami`.
/// There is no e-mail address.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct PingResponse {
    status: String,
    message: String,
    org_id: String,
    project_id: String,
    user_email: Option<String>,
}

/// `GET /v1/ping/` (and `/v1/ping`): the key authenticates (any scheme
/// the API takes) and is within its rate; its query (mem0's client sends
/// its organization and project when it has them) is not read.
pub(crate) async fn ping(key: KeyAuth) -> axum::Json<PingResponse> {
    let (org_id, project_id) = match &key.credential {
        Credential::Principal {
            tenant_id,
            principal_id,
            ..
        } => (tenant_id.clone(), principal_id.clone()),
        Credential::Application {
            tenant_id, key_id, ..
        } => (tenant_id.clone(), key_id.clone()),
        Credential::Admin { key_id } => ("admin".to_owned(), key_id.clone()),
    };
    axum::Json(PingResponse {
        status: "ok".to_owned(),
        message: "pong".to_owned(),
        org_id,
        project_id,
        user_email: None,
    })
}

pub(crate) async fn platform_add_memories(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiJson(body): ApiJson<Value>,
) -> Reply<AddResponse> {
    call(&s, move |s| platform_add(s, &key, body)).await
}

pub(crate) async fn platform_search_memories(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiJson(body): ApiJson<Value>,
) -> Reply<ListResponse> {
    call(&s, move |s| platform_search(s, &key, body)).await
}

pub(crate) async fn platform_list_memories(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiQuery(q): ApiQuery<PageQuery>,
    ApiJson(body): ApiJson<Value>,
) -> Reply<PageResponse> {
    call(&s, move |s| platform_list(s, &key, q, body)).await
}

pub(crate) async fn platform_update_memory(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<Value>,
) -> Reply<UpdateResponse> {
    call(&s, move |s| platform_update(s, &key, &id, body)).await
}

pub(crate) async fn platform_delete_memory(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<DeleteQuery>,
) -> Reply<DeleteResponse> {
    // The whole line goes either way (see `DeleteQuery`).
    let _whole_line_either_way = q.delete_linked;
    call(&s, move |s| delete_one(s, &as_user(s, &key, None)?, &id)).await
}

pub(crate) async fn platform_entities(
    State(s): State<AppState>,
    key: KeyAuth,
) -> Reply<EntitiesResponse> {
    call(&s, move |s| entities(s, &key)).await
}

pub(crate) async fn platform_delete_entity(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiPath((kind, name)): ApiPath<(String, String)>,
) -> Reply<DeleteAllResponse> {
    call(&s, move |s| delete_entity(s, &key, &kind, name)).await
}

pub(crate) async fn platform_batch_update(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiJson(body): ApiJson<Value>,
) -> Reply<BatchUpdateResponse> {
    call(&s, move |s| batch_update(s, &key, body)).await
}

pub(crate) async fn platform_batch_delete(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiJson(body): ApiJson<Value>,
) -> Reply<DeleteAllResponse> {
    call(&s, move |s| batch_delete(s, &key, body)).await
}
