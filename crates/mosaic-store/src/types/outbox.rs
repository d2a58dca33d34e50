//! The index outbox: the tasks a write leaves for index workers and their
//! acknowledgements.

use serde::{Deserialize, Serialize};

use super::RecordState;

/// What an outbox message asks an index worker to do.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutboxOp {
    /// Index the record's content.
    Publish,
    /// Remove every trace of the record from the index.
    Erase,
}

impl OutboxOp {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxOp::Publish => "publish",
            OutboxOp::Erase => "erase",
        }
    }

    /// Parses [`OutboxOp::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "publish" => Some(OutboxOp::Publish),
            "erase" => Some(OutboxOp::Erase),
            _ => None,
        }
    }
}

/// When a commit returns, relative to the disk.
///
/// Both SQLite's write-ahead log and PostgreSQL's are written in commit
/// order, and a synced commit syncs the log up to itself: a commit made
/// [`Durability::Deferred`] is never lost while a later synced commit
/// survives, and losing it loses no other commit's effect (the database is
/// as if it had not been made).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Returns once the commit is on disk: it survives a power cut.
    Synced,
    /// Returns once the commit is in the database's log, not yet synced:
    /// it survives the process's crash (`kill -9`), and a power cut before
    /// the next synced commit or checkpoint may lose it. For what the
    /// database can be told again, such as an index acknowledgement the
    /// outbox delivers again when it is missing.
    Deferred,
}

/// One outbox acknowledgement of [`crate::Store::acknowledge_indexes`]:
/// `target` applied `record_id` at `generation`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexAck {
    /// The record.
    pub record_id: String,
    /// The outbox generation the target applied.
    pub generation: u64,
    /// The index target.
    pub target: String,
}

/// One pending outbox message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxTask {
    /// The record.
    pub record_id: String,
    /// Tenant (indexes partition by it).
    pub tenant_id: String,
    /// The index target.
    pub target: String,
    /// Publish or erase.
    pub op: OutboxOp,
    /// The revocation generation the message was issued at; the worker must
    /// acknowledge exactly this generation.
    pub generation: u64,
    /// Content to index (publish only).
    pub content: Option<String>,
}

/// Result of an index acknowledgement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckOutcome {
    /// The record's state after the acknowledgement.
    pub record_state: Option<RecordState>,
    /// True when this acknowledgement made the record readable.
    pub activated: bool,
    /// True when it was already acknowledged (idempotent retry).
    pub duplicate: bool,
}
