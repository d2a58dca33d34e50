//! mem0's request and response bodies, as its open-source REST server
//! takes and answers them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use mosaic_service::api::conversation::MessageRole;

/// A message as mem0 takes it.
#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mem0Message {
    pub(super) role: MessageRole,
    pub(super) content: String,
    #[serde(default)]
    pub(super) name: Option<String>,
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
    pub(super) messages: Mem0Messages,
    #[serde(default)]
    pub(super) user_id: Option<String>,
    #[serde(default)]
    pub(super) agent_id: Option<String>,
    #[serde(default)]
    pub(super) run_id: Option<String>,
    #[serde(default)]
    pub(super) metadata: Option<Value>,
    #[serde(default)]
    pub(super) infer: Option<bool>,
    /// The day after which the memories expire (`YYYY-MM-DD`, UTC; an
    /// RFC 3339 instant is taken to its day).
    #[serde(default)]
    pub(super) expiration_date: Option<String>,
    #[serde(default)]
    pub(super) memory_type: Option<String>,
    #[serde(default)]
    pub(super) prompt: Option<String>,
}

/// `POST /search`.
#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    pub(super) query: String,
    #[serde(default)]
    pub(super) user_id: Option<String>,
    #[serde(default)]
    pub(super) agent_id: Option<String>,
    #[serde(default)]
    pub(super) run_id: Option<String>,
    /// mem0's filters: `user_id`, `agent_id` and `run_id` (alone or under
    /// `AND`) name whose memories; conditions on metadata fields (by name,
    /// or under `metadata`) and `created_at` (a day `YYYY-MM-DD` or an RFC
    /// 3339 date-time) with `eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `in`,
    /// `nin`, `contains`, `icontains` or `*`, combined with `AND`, `OR`
    /// and `NOT`, restrict the memories before ranking. `app_id`,
    /// `updated_at`, `categories` and `keywords` are refused (400
    /// `unsupported_filter`).
    #[serde(default)]
    pub(super) filters: Option<Value>,
    /// How many memories (mem0's newer name for `limit`).
    #[serde(default)]
    pub(super) top_k: Option<usize>,
    #[serde(default)]
    pub(super) limit: Option<usize>,
    /// Lowest `score` (0 to 1) a memory needs.
    #[serde(default)]
    pub(super) threshold: Option<f64>,
}

/// The identifiers of `GET` and `DELETE /memories`.
#[derive(Deserialize, Debug, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    #[serde(default)]
    pub(super) user_id: Option<String>,
    #[serde(default)]
    pub(super) agent_id: Option<String>,
    #[serde(default)]
    pub(super) run_id: Option<String>,
    #[serde(default)]
    pub(super) limit: Option<usize>,
}

/// `PUT /memories/{memory_id}`: the new text (mem0's clients send `text`;
/// `data` and `memory` are accepted too).
#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) data: Option<String>,
    #[serde(default)]
    pub(super) memory: Option<String>,
}

/// One memory in mem0's shape.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct Mem0Item {
    pub(super) id: String,
    pub(super) memory: String,
    pub(super) hash: String,
    pub(super) metadata: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) score: Option<f64>,
    pub(super) created_at: String,
    pub(super) updated_at: Option<String>,
    pub(super) user_id: String,
    pub(super) kind: String,
}

/// `POST /memories`'s answer: mem0's `results` (event `ADD` for a new
/// memory, `NONE` for a replay), plus what the gate refused and which
/// request fields were not used.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct AddResponse {
    pub(super) results: Vec<AddEvent>,
    pub(super) refused: Vec<Refused>,
    /// Messages without text (a tool-call or image-only turn), skipped.
    pub(super) skipped: Vec<mosaic_service::api::conversation::SkippedMessage>,
    pub(super) ignored: Vec<String>,
}

/// One kept message.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct AddEvent {
    pub(super) id: String,
    pub(super) memory: String,
    pub(super) event: String,
    /// When the memory expires: RFC 3339 UTC, or `never`.
    pub(super) expires_at: String,
}

/// One refused message: its position and the gate's reasons.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct Refused {
    pub(super) index: usize,
    pub(super) violations: Vec<mosaic_harness::memory_write::MemoryWriteViolation>,
}

/// `GET /memories` and `POST /search`: mem0's `results`.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct ListResponse {
    pub(super) results: Vec<Mem0Item>,
    /// Request body fields not used (the platform routes name them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) ignored: Vec<String>,
}

/// `PUT /memories/{memory_id}`'s answer.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct UpdateResponse {
    pub(super) message: String,
    /// The new record (or the old one, when refused).
    pub(super) id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) previous_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) violations: Vec<mosaic_harness::memory_write::MemoryWriteViolation>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) review_case_ids: Vec<String>,
    /// When the new memory expires (RFC 3339 UTC, or `never`); absent
    /// when refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) expires_at: Option<String>,
    /// Request fields not used (mem0's platform `metadata`, `timestamp`,
    /// `expiration_date`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) ignored: Vec<String>,
}

/// `DELETE /memories/{memory_id}`'s answer: the memory's whole line was
/// revoked (the version named, the versions it replaced and any that
/// replaced it), each version with its deletion receipt.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct DeleteResponse {
    pub(super) message: String,
    /// The deletion receipt of the version named in the path.
    pub(super) deletion_receipt_sha256: Option<String>,
    /// True when every revoked version has its deletion receipt.
    pub(super) complete: bool,
    /// Every version revoked, newest first.
    pub(super) deleted: Vec<Deleted>,
}

/// `DELETE /memories`'s answer: every memory `GET /memories` lists for
/// the identifier, each with its whole line, every version with its
/// receipt.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct DeleteAllResponse {
    pub(super) message: String,
    /// True when every revoked version has its deletion receipt.
    pub(super) complete: bool,
    pub(super) deleted: Vec<Deleted>,
}

/// One revoked version.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct Deleted {
    pub(super) id: String,
    /// The revocation's stage (`finalized` once deleted everywhere).
    pub(super) stage: String,
    pub(super) deletion_receipt_sha256: Option<String>,
}

impl Deleted {
    pub(super) fn of(revoked: mosaic_service::api::RevocationResponse) -> Self {
        Deleted {
            id: revoked.record_id,
            stage: revoked.stage,
            deletion_receipt_sha256: revoked.deletion_receipt.map(|r| r.receipt_sha256),
        }
    }
}

/// One event of a memory's history, in mem0's shape.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct HistoryEvent {
    pub(super) id: String,
    pub(super) memory_id: String,
    pub(super) old_memory: Option<String>,
    pub(super) new_memory: Option<String>,
    pub(super) event: String,
    pub(super) created_at: String,
    pub(super) updated_at: Option<String>,
    pub(super) is_deleted: bool,
}
