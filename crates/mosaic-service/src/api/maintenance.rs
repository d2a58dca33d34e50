//! Maintenance bodies: export and import, reconcile and reindex, the
//! outbox and the extraction jobs.

use std::collections::BTreeMap;

use mosaic_harness::{MemoryMetadata, MemoryRecord};
use serde::{Deserialize, Serialize};

use super::ProposeRequest;

/// One export line (`{"type":"message","data":{...}}` or
/// `{"type":"memory","data":{...}}`). An export lists the captured
/// messages first, then the other memories, so an import captures every
/// message before the facts that cite it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(
    tag = "type",
    content = "data",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum ExportLine {
    /// A message captured from a conversation (its episodic memory): an
    /// import captures it again as the conversation endpoint does, under
    /// the importing key.
    Message(Box<ExportedMessage>),
    /// A memory and the request that created it (with content), so an
    /// import re-runs the gate on it.
    Memory(Box<ExportedMemory>),
}

/// An exported captured message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportedMessage {
    /// The conversation it was captured in.
    pub conversation_id: String,
    /// Its id within the conversation (facts cite it by the two ids).
    pub message_id: String,
    /// The text as captured, the transcript line its episodic memory
    /// holds (`[created_at] speaker: content`).
    pub text: String,
    /// The workspace of the principal's episode, when it was captured
    /// with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// The application metadata it was captured with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
    /// The expiry it was captured with (Unix ms), when the capture set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_unix_ms: Option<u64>,
}

/// An exported memory.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportedMemory {
    /// The record as stored.
    pub record: MemoryRecord,
    /// Store state.
    pub state: String,
    /// The propose request, content included.
    pub request: ProposeRequest,
}

/// What an import did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ImportResponse {
    /// Lines read.
    pub lines: usize,
    /// Accepted proposals (new records).
    pub accepted: usize,
    /// Rejected proposals (the gate refused them, duplicates of stored
    /// records included).
    pub rejected: usize,
    /// Lines whose decision the server already held (the same message
    /// or proposal imported or written before): nothing was written again.
    #[serde(default)]
    pub replayed: usize,
    /// Lines that failed (line number → error code).
    pub errors: BTreeMap<usize, String>,
    /// What happened to each line, in order.
    #[serde(default)]
    pub results: Vec<ImportedLine>,
}

/// What an import did with one line.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ImportedLine {
    /// The line number (from 1).
    pub line: usize,
    /// `message` or `memory`; null for a line that could not be read.
    pub kind: Option<String>,
    /// `accepted`, `rejected`, `replayed` or `error`.
    pub outcome: String,
    /// The record the line's proposal has (or would have had); null for
    /// an error.
    pub record_id: Option<String>,
    /// The error code (outcome `error`) or the gate's violation codes,
    /// comma-separated (outcome `rejected`); null otherwise.
    pub code: Option<String>,
}

/// What a reconcile pass did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct ReconcileReport {
    /// Publications applied and acknowledged.
    pub published: usize,
    /// Erasures applied and acknowledged.
    pub erased: usize,
    /// Deletions finalized.
    pub deletions_finalized: usize,
    /// Outbox messages that failed (retried next pass).
    pub failures: usize,
    /// Records compared between the store and each index (full pass only).
    #[serde(default)]
    pub checked: usize,
    /// Active records missing from an index, published again (full pass only).
    #[serde(default)]
    pub republished: usize,
    /// Index entries with no active record behind them (revoked, erased or
    /// unknown to the store), removed (full pass only).
    #[serde(default)]
    pub ghosts_removed: usize,
    /// Records made readable without an optional index whose publication
    /// failed (degraded activation; the store's activation event names it).
    #[serde(default)]
    pub degraded_activations: usize,
}

/// What a reindex did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct ReindexReport {
    /// Records indexed.
    pub live: usize,
    /// Tombstones applied.
    pub tombstones: usize,
}

/// One outbox row waiting for its index target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutboxRow {
    /// The record.
    pub record_id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// `publish` or `erase`.
    pub op: String,
    /// The revocation generation the message was issued at.
    pub generation: u64,
}

/// One index target's queue.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutboxTargetState {
    /// `lexical` or `vector`.
    pub target: String,
    /// Pending rows (counted up to [`OUTBOX_COUNT_LIMIT`]).
    pub pending: usize,
    /// True when there are more pending rows than were counted.
    pub more: bool,
    /// The oldest pending rows (at most 20).
    pub oldest: Vec<OutboxRow>,
}

/// Most outbox rows counted per target by `GET /v1/admin/outbox`.
pub const OUTBOX_COUNT_LIMIT: usize = 10_000;

/// A deletion that has not reached its receipt yet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct PendingDeletionView {
    /// The record.
    pub record_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Where it is (`ineligible`, `deletion_requested`, ...).
    pub stage: mosaic_store::RevocationStage,
    /// Milliseconds since it became ineligible.
    pub age_ms: u64,
    /// The declared objective.
    pub deadline_ms: u64,
    /// `age_ms > deadline_ms`.
    pub deadline_exceeded: bool,
    /// Index targets that have not acknowledged the erase yet.
    pub unacknowledged_targets: Vec<String>,
}

/// The last reconcile pass the server ran.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ReconcileRun {
    /// When it finished.
    pub at_unix_ms: u64,
    /// `background` (the periodic pass) or `repair` (`POST /v1/admin/reconcile`).
    pub pass: String,
    /// What it did.
    pub report: ReconcileReport,
}

/// The outbox and reconcile state (`GET /v1/admin/outbox`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutboxState {
    /// One queue per index target.
    pub targets: Vec<OutboxTargetState>,
    /// Deletions not finalized yet, sorted by record id.
    pub pending_deletions: Vec<PendingDeletionView>,
    /// The store's revocation generation.
    pub revocation_generation: u64,
    /// The last reconcile pass, if one ran since the server started.
    pub last_reconcile: Option<ReconcileRun>,
}

/// The extraction jobs (`GET /v1/admin/extraction`): no content.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ExtractionReport {
    /// Whether this server runs an extractor.
    pub enabled: bool,
    /// Jobs per state (`pending`, `done`, `failed`).
    pub counts: BTreeMap<String, u64>,
    /// The latest jobs, newest first.
    pub jobs: Vec<ExtractionJobView>,
}

/// One extraction job.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ExtractionJobView {
    /// Its id (the ingest answer's `extraction_job_id`).
    pub job_id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// How many messages it covers.
    pub messages: usize,
    /// `pending`, `done` or `failed`.
    pub state: String,
    /// Attempts so far.
    pub attempts: u64,
    /// When it may run next (Unix ms).
    pub next_attempt_ms: u64,
    /// The last failure's code (`endpoint_unavailable`, `malformed_output`).
    pub last_error: Option<String>,
    /// What its last successful run did.
    pub report: Option<ExtractionRun>,
}

/// What one extraction run did: counts and reasons, no content.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct ExtractionRun {
    /// Facts the extractor proposed that passed the checks before the gate.
    pub facts: usize,
    /// Of those, accepted by the gate.
    pub accepted: u64,
    /// Of those, rejected (or failed), by reason.
    pub rejected: u64,
    /// The gate's violations (or error codes) of the rejected ones.
    pub gate_reasons: BTreeMap<String, u64>,
    /// Facts refused before the gate, by reason, in answer order.
    pub refused_before_gate: Vec<String>,
    /// Why nothing ran, when nothing did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
