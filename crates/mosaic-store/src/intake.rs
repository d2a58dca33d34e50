//! What a server keeps beside the records of its front door: the
//! messages it captured (digests and the record holding each text), the
//! extraction jobs queued over them, and the export copy of each accepted
//! proposal's request. Each is written through the store's own
//! transactions: a captured message and an export copy commit in the write
//! transaction of the record they belong to ([`WriteRequest::kept`]), so
//! neither exists without its record nor a record without them.
//!
//! [`WriteRequest::kept`]: crate::WriteRequest::kept

use serde::{Deserialize, Serialize};

/// A message the server captured: where its text is kept (the episodic
/// record `record_id`, so erasing the record erases the text) and the
/// digests computed at capture. No content.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapturedMessage {
    /// Tenant of the capturing key.
    pub tenant_id: String,
    /// Principal of the capturing key.
    pub principal_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// The message within it.
    pub message_id: String,
    /// The episodic record holding the captured text.
    pub record_id: String,
    /// SHA-256 of the captured text.
    pub content_sha256: String,
    /// Digest of the capture's provenance.
    pub provenance_sha256: String,
    /// Digest of the message's locator.
    pub locator_sha256: String,
    /// When it was captured.
    pub captured_at_ms: u64,
}

/// What an accepted write keeps beside its record, in its own transaction
/// (nothing for a rejected one, nothing again on a replay).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeptWithRecord {
    /// The request as the server received it, without its content (what an
    /// export hands back): deleted when the record is erased.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_request_json: Option<String>,
    /// The captured message this record holds the text of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<CapturedMessage>,
}

impl KeptWithRecord {
    /// Whether there is nothing to keep.
    pub fn is_empty(&self) -> bool {
        self.export_request_json.is_none() && self.message.is_none()
    }
}

/// One extraction job: the messages of one ingest call, to extract facts
/// from. No content: the texts are read from the store when it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractionJob {
    /// Identity (derived from tenant, principal, conversation and messages).
    pub job_id: String,
    /// Tenant of the capturing key.
    pub tenant_id: String,
    /// Principal of the capturing key.
    pub principal_id: String,
    /// The capturing key (the facts are proposed as it).
    pub key_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// The captured messages.
    pub message_ids: Vec<String>,
    /// `pending`, `done` or `failed`.
    pub state: String,
    /// Attempts so far.
    pub attempts: u64,
    /// When it may run next.
    pub next_attempt_ms: u64,
    /// The last failure's stable code.
    pub last_error: Option<String>,
    /// What the last run did (JSON: counts and reasons, no content).
    pub report_json: Option<String>,
    /// When it was queued.
    pub created_at_ms: u64,
}

/// The states an [`ExtractionJob`] may have.
pub const EXTRACTION_JOB_STATES: [&str; 3] = ["pending", "done", "failed"];

/// Who decided a proposal, and what: the store's row of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalOwner {
    /// The proposal's tenant.
    pub tenant_id: String,
    /// The proposing principal (`None` for a proposal an earlier release
    /// decided whose principal nothing recorded).
    pub principal_id: Option<String>,
    /// The record it names.
    pub record_id: String,
    /// Whether it was accepted.
    pub accepted: bool,
    /// When it was first decided.
    pub decided_at_ms: u64,
}

/// What an earlier server kept in a database of its own about proposals,
/// captured messages, extraction jobs and export copies, imported into the
/// store once ([`crate::Store::import_intake`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntakeImport {
    /// `(proposal_id, tenant_id, principal_id)` of every decided proposal.
    pub proposal_owners: Vec<(String, String, String)>,
    /// Every captured message.
    pub messages: Vec<CapturedMessage>,
    /// Every extraction job.
    pub jobs: Vec<ExtractionJob>,
    /// `(record_id, tenant_id, request_json)` of every export copy still
    /// held (an erased record's is not imported).
    pub export_requests: Vec<(String, String, String)>,
}
