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
//!   extraction runs (`infer` is accepted and ignored).
//! - `POST /search` is a hybrid recall; `score` is the relevance score.
//! - `PUT /memories/{memory_id}` supersedes the memory with the new text
//!   (the old one stays as history); `DELETE` revokes, with the deletion
//!   receipt; `DELETE /memories` revokes every active memory of the user.
//! - Errors are this service's JSON errors with stable codes.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{ConversationMessage, IngestRequest, MessageRole, RecallRequest, RevokeRequest};
use crate::auth::Credential;
use crate::error::{ServiceError, ServiceResult};
use crate::http::{ApiJson, ApiPath, ApiQuery, AppState, KeyAuth, Reply, call};
use crate::service::Service;

/// Most memories `GET /memories` returns.
pub const MAX_LISTED: usize = 1000;

/// A message as mem0 takes it.
#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mem0Message {
    role: MessageRole,
    content: String,
    #[serde(default)]
    name: Option<String>,
}

/// mem0 accepts a list of messages or one string (a user message).
#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Mem0Messages {
    /// Chat messages.
    List(Vec<Mem0Message>),
    /// One user message.
    Text(String),
}

/// `POST /memories`.
#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddRequest {
    messages: Mem0Messages,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    infer: Option<bool>,
}

/// `POST /search`.
#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    query: String,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    filters: Option<Value>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    threshold: Option<f64>,
}

/// The identifiers of `GET` and `DELETE /memories`.
#[derive(Deserialize, Debug, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `PUT /memories/{memory_id}`: the new text (mem0's clients send `text`;
/// `data` and `memory` are accepted too).
#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    memory: Option<String>,
}

/// One memory in mem0's shape.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct Mem0Item {
    id: String,
    memory: String,
    hash: String,
    metadata: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    created_at: String,
    updated_at: Option<String>,
    user_id: String,
    kind: String,
}

/// `POST /memories`'s answer: mem0's `results` (event `ADD` for a new
/// memory, `NONE` for a replay), plus what the gate refused and which
/// request fields were not used.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct AddResponse {
    results: Vec<AddEvent>,
    refused: Vec<Refused>,
    ignored: Vec<String>,
}

/// One kept message.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct AddEvent {
    id: String,
    memory: String,
    event: String,
}

/// One refused message: its position and the gate's reasons.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct Refused {
    index: usize,
    violations: Vec<mosaic_harness::memory_write::MemoryWriteViolation>,
}

/// `GET /memories` and `POST /search`: mem0's `results`.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct ListResponse {
    results: Vec<Mem0Item>,
    /// Request fields not used (search ranks over the user's memories).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignored: Vec<String>,
}

/// `PUT /memories/{memory_id}`'s answer.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct UpdateResponse {
    message: String,
    /// The new record (or the old one, when refused).
    id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    violations: Vec<mosaic_harness::memory_write::MemoryWriteViolation>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    review_case_ids: Vec<String>,
}

/// `DELETE /memories/{memory_id}`'s answer, with the deletion receipt.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct DeleteResponse {
    message: String,
    deletion_receipt_sha256: Option<String>,
}

/// `DELETE /memories`'s answer: every memory revoked, with its receipt.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct DeleteAllResponse {
    message: String,
    deleted: Vec<Deleted>,
}

/// One revoked memory.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct Deleted {
    id: String,
    deletion_receipt_sha256: Option<String>,
}

/// One event of a memory's history, in mem0's shape.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct HistoryEvent {
    id: String,
    memory_id: String,
    old_memory: Option<String>,
    new_memory: Option<String>,
    event: String,
    created_at: String,
    updated_at: Option<String>,
    is_deleted: bool,
}

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

/// An RFC 3339 UTC instant of a Unix time in milliseconds.
pub fn rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        unix_ms % 1000
    )
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
        .or(request.agent_id)
        .unwrap_or_else(|| "mem0".to_owned());
    let ingested = service.ingest_conversation(
        &credential,
        &conversation,
        &IngestRequest {
            messages,
            workspace_id: None,
            metadata,
        },
    )?;
    let mut results = Vec::new();
    let mut refused = Vec::new();
    for (index, message) in ingested.messages.into_iter().enumerate() {
        if message.decision == "accepted" {
            let memory = service.get_memory(&credential, &message.record_id)?;
            results.push(AddEvent {
                id: message.record_id,
                memory: memory.content,
                event: if message.replayed { "NONE" } else { "ADD" }.to_owned(),
            });
        } else {
            refused.push(Refused {
                index,
                violations: message.violations,
            });
        }
    }
    let mut ignored = Vec::new();
    if request.infer.is_some() {
        ignored.push("infer".to_owned());
    }
    Ok(AddResponse {
        results,
        refused,
        ignored,
    })
}

fn search(service: &Service, key: &KeyAuth, request: SearchRequest) -> ServiceResult<ListResponse> {
    let credential = as_user(service, key, request.user_id.as_deref())?;
    let limit = request.limit.unwrap_or(10);
    if limit == 0 || limit > 100 {
        return Err(ServiceError::bad_request(
            "invalid_field",
            "limit must be 1 to 100",
        ));
    }
    let recalled = service.recall(
        &credential,
        &RecallRequest {
            query: Some(request.query),
            max_records: Some(limit),
            min_score: request.threshold,
            ..RecallRequest::default()
        },
    )?;
    let (_, principal) = credential.principal()?;
    let results: Vec<Mem0Item> = recalled
        .memories
        .into_iter()
        .map(|m| Mem0Item {
            hash: mosaic_harness::canonical::sha256_hex(m.content.as_bytes()),
            id: m.record_id,
            memory: m.content,
            metadata: metadata_value(m.metadata),
            score: m.score,
            created_at: rfc3339(m.created_at_unix_ms),
            updated_at: None,
            user_id: principal.to_owned(),
            kind: m.kind.as_str().to_owned(),
        })
        .collect();
    let ignored = [
        ("agent_id", request.agent_id.is_some()),
        ("run_id", request.run_id.is_some()),
        ("filters", request.filters.is_some()),
    ]
    .into_iter()
    .filter(|(_, given)| *given)
    .map(|(name, _)| name.to_owned())
    .collect();
    Ok(ListResponse { results, ignored })
}

/// The user's active memories (of one conversation, with `run_id` or
/// `agent_id`), newest first.
fn active_ids(
    service: &Service,
    credential: &Credential,
    scope: &Scope,
) -> ServiceResult<Vec<String>> {
    let entries = service.active_memories(credential)?;
    let conversation = scope.run_id.as_deref().or(scope.agent_id.as_deref());
    let mut ids = Vec::new();
    for entry in entries {
        if let Some(conversation) = conversation {
            let view = service.get_memory(credential, &entry.record_id)?;
            let prefix = format!("msg:{conversation}/");
            if !view
                .record
                .sources
                .iter()
                .any(|s| s.source_id.starts_with(&prefix))
            {
                continue;
            }
        }
        ids.push(entry.record_id);
    }
    Ok(ids)
}

fn get_all(service: &Service, key: &KeyAuth, scope: Scope) -> ServiceResult<ListResponse> {
    let credential = as_user(service, key, scope.user_id.as_deref())?;
    let limit = scope.limit.unwrap_or(100).min(MAX_LISTED);
    let mut results = Vec::new();
    for id in active_ids(service, &credential, &scope)?
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
        });
    }
    Ok(UpdateResponse {
        message: "Memory updated successfully!".to_owned(),
        id: response.record_id,
        previous_id: Some(record_id.to_owned()),
        violations: Vec::new(),
        review_case_ids: Vec::new(),
    })
}

fn delete_one(
    service: &Service,
    credential: &Credential,
    record_id: &str,
) -> ServiceResult<DeleteResponse> {
    let revoked = service.revoke(credential, record_id, &RevokeRequest::default())?;
    Ok(DeleteResponse {
        message: "Memory deleted successfully!".to_owned(),
        deletion_receipt_sha256: revoked.deletion_receipt.map(|r| r.receipt_sha256),
    })
}

fn delete_all(service: &Service, key: &KeyAuth, scope: Scope) -> ServiceResult<DeleteAllResponse> {
    let credential = as_user(service, key, scope.user_id.as_deref())?;
    let revoked = if scope.run_id.is_some() || scope.agent_id.is_some() {
        let mut out = Vec::new();
        for id in active_ids(service, &credential, &scope)? {
            out.push(service.revoke(&credential, &id, &RevokeRequest::default())?);
        }
        out
    } else {
        service.forget_all(&credential)?
    };
    Ok(DeleteAllResponse {
        message: "All relevant memories deleted".to_owned(),
        deleted: revoked
            .into_iter()
            .map(|r| Deleted {
                id: r.record_id,
                deletion_receipt_sha256: r.deletion_receipt.map(|d| d.receipt_sha256),
            })
            .collect(),
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
) -> Reply<DeleteAllResponse> {
    call(&s, move |s| delete_all(s, &key, q)).await
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn instants_print_as_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
    }
}
