//! A mem0-compatible surface beside the native API: the routes and shapes
//! of mem0's open-source REST server (`POST /memories`, `POST /search`,
//! `GET /memories`, `GET /memories/{memory_id}`, its history, `PUT`,
//! `DELETE` one and all), with this service's authentication, so an
//! application written against mem0 works by changing its base URL and
//! key. Everything goes through the same service functions (and the same
//! gate) as the native API.
//!
//! What maps how:
//! - `user_id` names the principal: with an application key, the user
//!   it acts for (within its bounds; the `X-Mosaic-User` header works
//!   too); with a principal's key it must be that principal (or absent),
//!   `403 user_mismatch` otherwise.
//! - `POST /memories`: the messages are one conversation ingest
//!   (`run_id`, else `agent_id`, else `mem0` names the conversation); each
//!   message is kept as an episodic memory. `event` is `ADD` for a new
//!   memory and `NONE` for a replay; refused messages are listed under
//!   `refused` with the gate's reasons (mem0 has no such list). `metadata`
//!   (a JSON object, within the limits of docs/ENCODING.md) is stored
//!   with every memory of the call and returned by every read; no LLM
//!   extraction runs (`infer`, `memory_type` and `prompt` are accepted and
//!   named in `ignored`).
//! - `POST /search` is a hybrid recall. `top_k` (or `limit`) is how many;
//!   `user_id`, `agent_id` and `run_id` (top level, or as `filters`
//!   conditions, alone or under `AND`) narrow it like `GET /memories`;
//!   other `filters` conditions (metadata fields and `created_at`, with
//!   mem0's operators, `AND` / `OR` / `NOT` and `*`) become the recall's
//!   read filter, applied inside eligibility before ranking
//!   ([`translate_filters`]); a field there is no value for is refused
//!   (400 `unsupported_filter`), never dropped. `score` is on
//!   mem0's 0-1 scale: `s / (s + 10)` of the hybrid recall's fused score
//!   `s` ([`mem0_score`], monotone), and `threshold` keeps the memories
//!   whose `score` reaches it.
//! - `POST /memories` also takes mem0's `expiration_date` (`YYYY-MM-DD`:
//!   the memories expire at the end of that UTC day, through the gate's
//!   TTL limit); `memory_type` and `prompt` are accepted and named in
//!   `ignored`, like `infer`. A message without text (a
//!   tool-call or image-only turn) is skipped and listed under `skipped`.
//! - The key may come as `Authorization: Bearer KEY`, `Authorization:
//!   Token KEY` (mem0's platform client) or `X-API-Key: KEY` (mem0's
//!   server); `GET /v1/ping/` answers a valid key as mem0's platform does,
//!   so mem0's `MemoryClient` constructs against this server.
//! - mem0's platform client's routes (`/v3/memories/add/`,
//!   `/v3/memories/search/`, `/v3/memories/` paginated,
//!   `/v1/memories/{id}/` and its history, `DELETE /v1/memories/`,
//!   `/v1/entities/`, `DELETE /v2/entities/{type}/{name}/`, `/v1/batch/`)
//!   map onto the open-source routes' functions; body fields none of them
//!   reads are named under `ignored`. The platform's other features
//!   (exports, summaries, feedback, profiles, webhooks, organizations and
//!   projects) answer `501 not_supported`.
//! - `GET /memories` needs `user_id`, `agent_id` or `run_id`, as mem0's
//!   server does (400 `identifier_required`).
//! - `PUT /memories/{memory_id}` supersedes the memory with the new text
//!   (the old one stays as history). `DELETE /memories/{memory_id}`
//!   deletes the memory's whole line (every version, so no replaced text
//!   stays readable), each version to its deletion receipt, all listed in
//!   the answer. `DELETE /memories` needs `user_id`, `agent_id` or
//!   `run_id` in the query (400 `identifier_required` otherwise) and
//!   deletes exactly what `GET /memories` lists for them, line by line.
//! - Errors are this service's JSON errors with stable codes.

use axum::extract::State;
use serde_json::Value;

use crate::http::{ApiJson, ApiPath, ApiQuery, AppState, Empty, KeyAuth, Reply, call};
use mosaic_service::api::{
    RecallRequest,
    conversation::{ConversationMessage, IngestRequest, MessageRole},
};
use mosaic_service::auth::Credential;
use mosaic_service::error::{ServiceError, ServiceResult};
use mosaic_service::instants::rfc3339;
use mosaic_service::service::Service;

mod bodies;
mod filters;
mod platform;
pub use bodies::{
    AddEvent, AddRequest, AddResponse, DeleteAllResponse, DeleteResponse, Deleted, HistoryEvent,
    ListResponse, Mem0Item, Mem0Message, Mem0Messages, Refused, Scope, SearchRequest,
    UpdateRequest, UpdateResponse,
};
pub use filters::UNSUPPORTED_FILTER_FIELDS;
pub(crate) use filters::translate_filters;
pub use platform::{
    BatchItem, BatchRequest, BatchUpdateResponse, DeleteQuery, EntitiesResponse, Entity, PageQuery,
    PageRequest, PageResponse, PingResponse, unsupported_platform_feature,
};
pub(crate) use platform::{
    ping, platform_add_memories, platform_batch_delete, platform_batch_update,
    platform_delete_entity, platform_delete_memory, platform_entities, platform_list_memories,
    platform_search_memories, platform_update_memory,
};

/// Most memories `GET /memories` returns.
pub const MAX_LISTED: usize = 1000;

/// The credential acting as mem0's `user_id` (the body's or query's, else
/// the `X-Mosaic-User` header's): an application key becomes that user
/// within its bounds; a principal's key must name itself or nobody (403
/// `user_mismatch`).
fn as_user(service: &Service, key: &KeyAuth, user_id: Option<&str>) -> ServiceResult<Credential> {
    let user = match (user_id, key.user.as_deref()) {
        (Some(a), Some(b)) if a != b => {
            return Err(ServiceError::forbidden(
                "user_mismatch",
                "user_id and the X-Mosaic-User header name different users",
            ));
        }
        (Some(a), _) => Some(a),
        (None, b) => b,
    };
    match &key.credential {
        Credential::Application { .. } => service.acting_for(&key.credential, user),
        other => other.acting_for(user),
    }
}

/// A memory's metadata as mem0 shows it: the object, or `null`.
fn metadata_value(metadata: Option<mosaic_harness::MemoryMetadata>) -> Option<Value> {
    metadata.map(|m| Value::Object(m.0))
}

fn item(service: &Service, credential: &Credential, record_id: &str) -> ServiceResult<Mem0Item> {
    let (_, principal) = credential.principal()?;
    let view = service.get_memory(credential, record_id)?;
    Ok(Mem0Item {
        id: record_id.to_owned(),
        memory: view.content,
        hash: view.record.content_sha256,
        metadata: metadata_value(view.record.metadata),
        score: None,
        created_at: rfc3339(view.record.created_at_unix_ms),
        updated_at: None,
        user_id: principal.to_owned(),
        kind: view.record.kind.as_str().to_owned(),
    })
}

fn add(service: &Service, key: &KeyAuth, request: AddRequest) -> ServiceResult<AddResponse> {
    let credential = as_user(service, key, request.user_id.as_deref())?;
    let messages: Vec<ConversationMessage> = match request.messages {
        Mem0Messages::Text(text) => vec![ConversationMessage {
            id: None,
            role: MessageRole::User,
            content: text,
            name: None,
            created_at: None,
        }],
        Mem0Messages::List(list) => list
            .into_iter()
            .map(|m| ConversationMessage {
                id: None,
                role: m.role,
                content: m.content,
                name: m.name,
                created_at: None,
            })
            .collect(),
    };
    let expires_at_unix_ms = match request.expiration_date.as_deref() {
        None => None,
        Some(date) => Some(end_of_day(date, service.now())?),
    };
    let metadata = match request.metadata {
        None | Some(Value::Null) => None,
        Some(Value::Object(members)) => Some(mosaic_harness::MemoryMetadata(members)),
        Some(_) => {
            return Err(ServiceError::bad_request(
                "invalid_metadata",
                "metadata is a JSON object",
            ));
        }
    };
    let conversation = request
        .run_id
        .clone()
        .or(request.agent_id.clone())
        .unwrap_or_else(|| "mem0".to_owned());
    let ingested = service.ingest_conversation(
        &credential,
        &conversation,
        &IngestRequest {
            messages,
            workspace_id: None,
            expires_at_unix_ms,
            metadata,
        },
    )?;
    let mut results = Vec::new();
    let mut refused = Vec::new();
    for message in ingested.messages {
        if message.decision == "accepted" {
            let memory = service.get_memory(&credential, &message.record_id)?;
            results.push(AddEvent {
                id: message.record_id,
                memory: memory.content,
                event: if message.replayed { "NONE" } else { "ADD" }.to_owned(),
                expires_at: mosaic_service::instants::expiry(memory.record.expires_at_unix_ms),
            });
        } else {
            refused.push(Refused {
                index: message.index,
                violations: message.violations,
            });
        }
    }
    let ignored = [
        ("infer", request.infer.is_some()),
        ("memory_type", request.memory_type.is_some()),
        ("prompt", request.prompt.is_some()),
    ]
    .into_iter()
    .filter(|(_, given)| *given)
    .map(|(name, _)| name.to_owned())
    .collect();
    Ok(AddResponse {
        results,
        refused,
        skipped: ingested.skipped,
        ignored,
    })
}

/// The constant of mem0's `score`: a memory's hybrid recall score `s`
/// (a fused reciprocal-rank score, 0 or more) is reported as
/// `s / (s + SCORE_HALF)`, monotone in `s`, 0 at 0, 0.5 at `SCORE_HALF`
/// and below 1 for every `s`; `threshold` cuts on that value.
pub const SCORE_HALF: f64 = 10.0;

/// mem0's 0-1 `score` of a hybrid recall score.
pub fn mem0_score(fused: f64) -> f64 {
    let s = fused.max(0.0);
    s / (s + SCORE_HALF)
}

fn search(service: &Service, key: &KeyAuth, request: SearchRequest) -> ServiceResult<ListResponse> {
    let mut ids = [
        ("user_id", request.user_id.clone()),
        ("agent_id", request.agent_id.clone()),
        ("run_id", request.run_id.clone()),
    ];
    let filter = match &request.filters {
        Some(filters) => translate_filters(filters, &mut ids)?,
        None => None,
    };
    let [(_, user_id), (_, agent_id), (_, run_id)] = ids;
    let limit = match (request.top_k, request.limit) {
        (Some(a), Some(b)) if a != b => {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "top_k and limit differ: send one",
            ));
        }
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => 10,
    };
    if limit == 0 || limit > 100 {
        return Err(ServiceError::bad_request(
            "invalid_field",
            "top_k (limit) must be 1 to 100",
        ));
    }
    if let Some(t) = request.threshold
        && !(0.0..=1.0).contains(&t)
    {
        return Err(ServiceError::bad_request(
            "invalid_field",
            "threshold must be 0 to 1 (it applies to the 0-1 score)",
        ));
    }
    let credential = as_user(service, key, user_id.as_deref())?;
    let conversation = run_id.as_deref().or(agent_id.as_deref());
    let recalled = service.recall(
        &credential,
        &RecallRequest {
            query: Some(request.query),
            max_records: Some(limit),
            filter: in_conversation(filter, conversation),
            ..RecallRequest::default()
        },
    )?;
    let (_, principal) = credential.principal()?;
    let mut results = Vec::new();
    for m in recalled.memories {
        let score = m.score.map(mem0_score);
        if let (Some(t), Some(s)) = (request.threshold, score)
            && s < t
        {
            continue;
        }
        results.push(Mem0Item {
            hash: mosaic_harness::canonical::sha256_hex(m.content.as_bytes()),
            id: m.record_id,
            memory: m.content,
            metadata: metadata_value(m.metadata),
            score,
            created_at: rfc3339(m.created_at_unix_ms),
            updated_at: None,
            user_id: principal.to_owned(),
            kind: m.kind.as_str().to_owned(),
        });
        if results.len() == limit {
            break;
        }
    }
    Ok(ListResponse {
        results,
        ignored: Vec::new(),
    })
}

/// `filter` narrowed to the memories captured in `conversation` (mem0's
/// `run_id`, else `agent_id`, names the conversation a message is ingested
/// into): the read filter's `conversation_id`, decided inside eligibility,
/// before ranking and paging.
fn in_conversation(filter: Option<Value>, conversation: Option<&str>) -> Option<Value> {
    let Some(conversation) = conversation else {
        return filter;
    };
    let narrow = serde_json::json!({ "conversation_id": conversation });
    Some(match filter {
        None => narrow,
        Some(filter) => serde_json::json!({ "AND": [filter, narrow] }),
    })
}

/// The end (exclusive, Unix ms) of the UTC day `date` names
/// (`YYYY-MM-DD`, or an RFC 3339 instant, of which the day counts), which
/// must lie after `now_ms`: mem0's memories expire after their
/// `expiration_date`.
fn end_of_day(date: &str, now_ms: u64) -> ServiceResult<u64> {
    let invalid = || {
        ServiceError::bad_request(
            "invalid_field",
            "expiration_date must be a date YYYY-MM-DD (UTC)",
        )
    };
    let day = date.get(..10).ok_or_else(invalid)?;
    let rest = &date[10..];
    if !(rest.is_empty() || rest.starts_with('T') || rest.starts_with(' ')) {
        return Err(invalid());
    }
    let parts: Vec<&str> = day.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return Err(invalid());
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return Err(invalid());
    }
    let days = mosaic_harness::filter::days_from_civil(
        y.parse().map_err(|_| invalid())?,
        m.parse().map_err(|_| invalid())?,
        d.parse().map_err(|_| invalid())?,
    )
    .ok_or_else(invalid)?;
    let end_ms = u64::try_from(days + 1)
        .ok()
        .and_then(|d| d.checked_mul(86_400_000))
        .ok_or_else(invalid)?;
    if end_ms <= now_ms {
        return Err(ServiceError::bad_request(
            "invalid_field",
            "expiration_date has passed",
        ));
    }
    Ok(end_ms)
}

/// The user's active memories (of one conversation, with `run_id` or
/// `agent_id`; matching `filter`, the server's read filter), newest first.
fn active_ids(
    service: &Service,
    credential: &Credential,
    scope: &Scope,
    filter: Option<&Value>,
) -> ServiceResult<Vec<String>> {
    let conversation = scope.run_id.as_deref().or(scope.agent_id.as_deref());
    let filter = in_conversation(filter.cloned(), conversation);
    let entries = service.active_memories_matching(credential, filter.as_ref())?;
    Ok(entries.into_iter().map(|entry| entry.record_id).collect())
}

/// mem0's server lists and deletes for someone: `user_id`, `agent_id` or
/// `run_id` is required (400 `identifier_required`).
fn require_identifier(scope: &Scope, what: &str) -> ServiceResult<()> {
    if scope.user_id.is_none() && scope.agent_id.is_none() && scope.run_id.is_none() {
        return Err(ServiceError::bad_request(
            "identifier_required",
            format!("name whose memories to {what}: user_id, agent_id or run_id"),
        ));
    }
    Ok(())
}

fn get_all(service: &Service, key: &KeyAuth, scope: Scope) -> ServiceResult<ListResponse> {
    require_identifier(&scope, "list")?;
    let credential = as_user(service, key, scope.user_id.as_deref())?;
    let limit = scope.limit.unwrap_or(100).min(MAX_LISTED);
    let mut results = Vec::new();
    for id in active_ids(service, &credential, &scope, None)?
        .into_iter()
        .take(limit)
    {
        results.push(item(service, &credential, &id)?);
    }
    Ok(ListResponse {
        results,
        ignored: Vec::new(),
    })
}

fn history(
    service: &Service,
    credential: &Credential,
    record_id: &str,
) -> ServiceResult<Vec<HistoryEvent>> {
    // The record's line, oldest generation first: walk the supersession
    // links the server keeps (`Service::memory_history`), back to the
    // first record, then forward, instead of reading every record the
    // principal has.
    let mut first = service.memory_history(credential, record_id)?;
    let mut seen = std::collections::BTreeSet::from([first.record_id.clone()]);
    while let Some(older) = first.supersedes.clone() {
        if !seen.insert(older.clone()) {
            break;
        }
        match service.memory_history(credential, &older) {
            Ok(h) => first = h,
            Err(ServiceError::NotFound { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    let mut line = Vec::new();
    let mut walked = std::collections::BTreeSet::new();
    let mut next = Some(first);
    while let Some(h) = next.take() {
        if !walked.insert(h.record_id.clone()) {
            break;
        }
        match service.get_memory(credential, &h.record_id) {
            Ok(view) => line.push((h.state.clone(), view)),
            Err(ServiceError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        if let Some(newer) = h.superseded_by {
            next = match service.memory_history(credential, &newer) {
                Ok(h) => Some(h),
                Err(ServiceError::NotFound { .. }) => None,
                Err(e) => return Err(e),
            };
        }
    }
    let mut events = Vec::new();
    let mut previous: Option<String> = None;
    for (state, view) in &line {
        let at = rfc3339(view.record.created_at_unix_ms);
        events.push(HistoryEvent {
            id: format!("{}#{}", view.line_id, view.line_generation),
            memory_id: view.record.record_id.clone(),
            old_memory: previous.clone(),
            new_memory: Some(view.content.clone()),
            event: if previous.is_none() { "ADD" } else { "UPDATE" }.to_owned(),
            created_at: at.clone(),
            updated_at: None,
            is_deleted: false,
        });
        if state != "active" && state != "superseded" && state != "publishing" {
            events.push(HistoryEvent {
                id: format!("{}#{}-deleted", view.line_id, view.line_generation),
                memory_id: view.record.record_id.clone(),
                old_memory: Some(view.content.clone()),
                new_memory: None,
                event: "DELETE".to_owned(),
                created_at: at,
                updated_at: None,
                is_deleted: true,
            });
        }
        previous = Some(view.content.clone());
    }
    Ok(events)
}

fn update(
    service: &Service,
    credential: &Credential,
    record_id: &str,
    request: UpdateRequest,
) -> ServiceResult<UpdateResponse> {
    let Some(text) = request.text.or(request.data).or(request.memory) else {
        return Err(ServiceError::bad_request(
            "invalid_field",
            "send the new text as `text`",
        ));
    };
    let response = service.update_text(credential, record_id, &text)?;
    if response.decision != "accepted" {
        return Ok(UpdateResponse {
            message: "Memory not updated: the write gate refused it".to_owned(),
            id: record_id.to_owned(),
            previous_id: None,
            violations: response.violations,
            review_case_ids: response.review_case_ids,
            expires_at: None,
            ignored: Vec::new(),
        });
    }
    Ok(UpdateResponse {
        message: "Memory updated successfully!".to_owned(),
        id: response.record_id,
        previous_id: Some(record_id.to_owned()),
        violations: Vec::new(),
        review_case_ids: Vec::new(),
        expires_at: response.expires_at,
        ignored: Vec::new(),
    })
}

fn delete_one(
    service: &Service,
    credential: &Credential,
    record_id: &str,
) -> ServiceResult<DeleteResponse> {
    let deleted: Vec<Deleted> = service
        .forget_line(credential, record_id)?
        .into_iter()
        .map(Deleted::of)
        .collect();
    let complete = deleted.iter().all(|d| d.deletion_receipt_sha256.is_some());
    let receipt = deleted
        .iter()
        .find(|d| d.id == record_id)
        .and_then(|d| d.deletion_receipt_sha256.clone());
    Ok(DeleteResponse {
        message: if complete {
            "Memory deleted successfully!"
        } else {
            "Memory deletion started; some versions are still being erased"
        }
        .to_owned(),
        deletion_receipt_sha256: receipt,
        complete,
        deleted,
    })
}

/// mem0's delete-all: at least one identifier in the query (as mem0's
/// server requires), an empty body, and exactly what `GET /memories`
/// lists for those identifiers, each memory with its whole line.
fn delete_all(service: &Service, key: &KeyAuth, scope: Scope) -> ServiceResult<DeleteAllResponse> {
    require_identifier(&scope, "delete")?;
    let credential = as_user(service, key, scope.user_id.as_deref())?;
    let mut deleted = Vec::new();
    // Every memory listed (a `limit`, when given, as `GET` takes it).
    let listed = active_ids(service, &credential, &scope, None)?;
    for id in listed.into_iter().take(scope.limit.unwrap_or(usize::MAX)) {
        // A line revoked with an earlier memory of this list is not
        // listed twice.
        if deleted.iter().any(|d: &Deleted| d.id == id) {
            continue;
        }
        deleted.extend(
            service
                .forget_line(&credential, &id)?
                .into_iter()
                .map(Deleted::of),
        );
    }
    let complete = deleted.iter().all(|d| d.deletion_receipt_sha256.is_some());
    Ok(DeleteAllResponse {
        message: if complete {
            "All relevant memories deleted"
        } else {
            "Deletion started; some memories are still being erased"
        }
        .to_owned(),
        complete,
        deleted,
    })
}

// ---------------------------------------------------------------- handlers

pub(crate) async fn add_memories(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiJson(r): ApiJson<AddRequest>,
) -> Reply<AddResponse> {
    call(&s, move |s| add(s, &key, r)).await
}

pub(crate) async fn search_memories(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiJson(r): ApiJson<SearchRequest>,
) -> Reply<ListResponse> {
    call(&s, move |s| search(s, &key, r)).await
}

pub(crate) async fn get_all_memories(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiQuery(q): ApiQuery<Scope>,
) -> Reply<ListResponse> {
    call(&s, move |s| get_all(s, &key, q)).await
}

pub(crate) async fn get_one(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiPath(id): ApiPath<String>,
) -> Reply<Mem0Item> {
    call(&s, move |s| item(s, &as_user(s, &key, None)?, &id)).await
}

pub(crate) async fn memory_history(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiPath(id): ApiPath<String>,
) -> Reply<Vec<HistoryEvent>> {
    call(&s, move |s| history(s, &as_user(s, &key, None)?, &id)).await
}

pub(crate) async fn update_memory(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiPath(id): ApiPath<String>,
    ApiJson(r): ApiJson<UpdateRequest>,
) -> Reply<UpdateResponse> {
    call(&s, move |s| update(s, &as_user(s, &key, None)?, &id, r)).await
}

pub(crate) async fn delete_memory(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiPath(id): ApiPath<String>,
) -> Reply<DeleteResponse> {
    call(&s, move |s| delete_one(s, &as_user(s, &key, None)?, &id)).await
}

pub(crate) async fn delete_all_memories(
    State(s): State<AppState>,
    key: KeyAuth,
    ApiQuery(q): ApiQuery<Scope>,
    ApiJson(Empty {}): ApiJson<Empty>,
) -> Reply<DeleteAllResponse> {
    call(&s, move |s| delete_all(s, &key, q)).await
}
