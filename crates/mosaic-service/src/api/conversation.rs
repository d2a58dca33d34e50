//! Conversation bodies: captured messages, ingests and the facts that
//! cite them.

use mosaic_harness::MemoryMetadata;
use mosaic_harness::memory_write::{MemoryWriteViolation, SourceJudgment, StructuredClaim};
use serde::{Deserialize, Serialize};

use super::signed::Signed;

/// A captured message, named by its conversation and message ids.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct CitedMessage {
    /// The conversation.
    pub conversation_id: String,
    /// The message within it.
    pub message_id: String,
}

/// Who said a message.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    /// The end user.
    User,
    /// The agent or model.
    Assistant,
    /// A system prompt or notice.
    System,
    /// A tool's output.
    Tool,
}

impl MessageRole {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
            MessageRole::System => "system",
            MessageRole::Tool => "tool",
        }
    }
}

/// One message of a conversation, as a chat API carries it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationMessage {
    /// The client's message id, unique within the conversation (default:
    /// derived from role, name, time and content, so an identical message
    /// replayed is the same message).
    #[serde(default)]
    pub id: Option<String>,
    /// Who said it.
    pub role: MessageRole,
    /// What was said.
    pub content: String,
    /// The speaker's display name (default: the role).
    #[serde(default)]
    pub name: Option<String>,
    /// When it was said, as the client writes it (e.g. an RFC 3339
    /// instant or `8 May 2023`); it prefixes the remembered text.
    #[serde(default)]
    pub created_at: Option<String>,
}

/// Messages of one conversation of the credential's principal.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestRequest {
    /// The messages, in conversation order.
    pub messages: Vec<ConversationMessage>,
    /// A granted workspace: the episodes then belong to the principal in
    /// that workspace only (default: to the principal across workspaces).
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// When the episodes expire (exclusive, Unix ms; default: the
    /// policy's default TTL). It must lie ahead; the gate refuses one
    /// beyond the policy's longest TTL. A message replayed with the same
    /// value replays exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_unix_ms: Option<u64>,
    /// Application metadata every episode of these messages carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
}

/// What became of one message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct IngestedMessage {
    /// The message's position in the request's `messages`.
    #[serde(default)]
    pub index: usize,
    /// The message id (the client's, or the derived one).
    pub message_id: String,
    /// The captured source's id, as facts citing it carry it.
    pub source_id: String,
    /// SHA-256 of the captured text (what a verifier judging the message
    /// names as `source_content_sha256`).
    pub source_content_sha256: String,
    /// The episodic memory's record id.
    pub record_id: String,
    /// `accepted` or `rejected` (the gate's decision on the episode).
    pub decision: String,
    /// True when the message had been captured before (a replay).
    pub replayed: bool,
    /// True when the episode was readable when the call returned.
    pub readable: bool,
    /// Why the gate refused it.
    pub violations: Vec<MemoryWriteViolation>,
    /// When the episode expires, in Unix milliseconds (the tenant policy's
    /// `max_ttl_ms` after capture); null when refused.
    #[serde(default)]
    pub expires_at_unix_ms: Option<u64>,
    /// The same instant in RFC 3339 UTC; null when refused.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// A message an ingest skipped.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct SkippedMessage {
    /// Its position in the request's `messages`.
    pub index: usize,
    /// Why: `empty_content` (empty or whitespace-only content).
    pub reason: String,
}

/// What a conversation ingest kept and refused.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct IngestResponse {
    /// The conversation.
    pub conversation_id: String,
    /// Messages whose episode the gate accepted (replays included).
    pub kept: usize,
    /// Messages the gate refused.
    pub refused: usize,
    /// One entry per message with text, in request order (`index` is its
    /// position in the request).
    pub messages: Vec<IngestedMessage>,
    /// Messages skipped because they have no text (empty or whitespace
    /// content: a tool-call or image-only turn), each with its position;
    /// the call keeps the others.
    #[serde(default)]
    pub skipped: Vec<SkippedMessage>,
    /// The extraction job queued for the newly kept messages, when the
    /// server runs an extractor (`GET /v1/admin/extraction` reports it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extraction_job_id: Option<String>,
}

/// A fact (semantic memory) resting on captured messages. The server
/// fills in kind, purpose, subject and the sources: the principal's own
/// memory by default, a workspace's with `workspace_id`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FactRequest {
    /// The fact, in the words of the cited messages (a span quote is
    /// supported by the capture verifier; a paraphrase needs `judgments`
    /// of a registered verifier).
    pub content: String,
    /// The captured messages it rests on.
    pub cites: Vec<CitedMessage>,
    /// Structured claims it asserts (they need registered verifiers'
    /// judgments; a new value for a claim the principal stated before
    /// supersedes it when the tenant's policy says newer wins).
    #[serde(default)]
    pub claims: Vec<StructuredClaim>,
    /// A granted workspace: the fact is then workspace knowledge.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// The consent it relies on (default: the principal's latest consent,
    /// for principal facts when the policy needs one).
    #[serde(default)]
    pub consent_receipt_sha256: Option<String>,
    /// Judgments of registered verifiers (paraphrases, claims).
    #[serde(default)]
    pub judgments: Vec<Signed<SourceJudgment>>,
    /// A record this fact replaces.
    #[serde(default)]
    pub supersedes_record_id: Option<String>,
    /// The line generation observed for the replaced record.
    #[serde(default)]
    pub expected_line_generation: Option<u64>,
    /// Requested lifetime in milliseconds.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// Application metadata the fact carries (see [`ProposeRequest`](super::ProposeRequest)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
    /// Application namespace of the fact (see [`ProposeRequest`](super::ProposeRequest)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Vec<String>>,
    /// Application key of the fact within `namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}
