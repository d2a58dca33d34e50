//! The crate's one error type.

use mosaic_harness::memory_scope::HandoffError;
use thiserror::Error;

/// Why a stale message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StaleReason {
    /// The index already holds a newer generation of the record.
    OlderThanHeld,
    /// The record was revoked at or after this generation: publishing it
    /// would resurrect revoked content.
    RevokedAtOrAfter,
}

impl StaleReason {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            StaleReason::OlderThanHeld => "older_than_held",
            StaleReason::RevokedAtOrAfter => "revoked_at_or_after",
        }
    }
}

/// What went wrong while loading or running the local embedding model.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A required model file is absent.
    #[error("model file {file} is missing from the model directory; run `{fix}`")]
    MissingFile {
        /// File name inside the model directory.
        file: String,
        /// The command that fetches and verifies the model.
        fix: String,
    },
    /// A model file does not have its pinned digest.
    #[error(
        "model file {file} has sha256 {actual}, expected {expected}; it is corrupt or another model: run `{fix}`"
    )]
    DigestMismatch {
        /// File name inside the model directory.
        file: String,
        /// Pinned digest.
        expected: String,
        /// Digest of the file found.
        actual: String,
        /// The command that fetches and verifies the model.
        fix: String,
    },
    /// The model or tokenizer could not be loaded or run.
    #[error("model runtime error: {0}")]
    Runtime(String),
    /// The crate was built without the `local-model` feature.
    #[error("this build has no local model support; rebuild with `--features local-model`")]
    FeatureDisabled,
}

/// Every failure of this crate.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum IndexError {
    /// A message carried an older generation than the index may apply.
    #[error("stale generation {offered} for {record_id} on {target}: index holds {held} ({})", reason.as_str())]
    StaleGeneration {
        /// The index target.
        target: String,
        /// The record.
        record_id: String,
        /// Generation of the refused message.
        offered: u64,
        /// Generation (or revocation watermark) the index holds.
        held: u64,
        /// Why it is stale.
        reason: StaleReason,
    },
    /// Two different publications claim the same `(record, generation)`.
    #[error("conflicting publication of {record_id} at generation {generation} on {target}")]
    GenerationConflict {
        /// The index target.
        target: String,
        /// The record.
        record_id: String,
        /// The generation claimed twice.
        generation: u64,
    },
    /// A message field is malformed (empty identifier, bad digest, ...).
    #[error("invalid {field}: {problem}")]
    InvalidMessage {
        /// The field.
        field: &'static str,
        /// What is wrong (never contains memory content).
        problem: &'static str,
    },
    /// An embedding has the wrong dimension or is not finite.
    #[error("embedding has dimension {actual}, expected {expected}, or is not finite")]
    BadEmbedding {
        /// Expected dimension.
        expected: usize,
        /// Dimension received.
        actual: usize,
    },
    /// An embedding service (an [`crate::Embedder`] that calls one) failed
    /// or answered malformed JSON.
    #[error("embedding service: {0}")]
    EmbeddingService(String),
    /// The local model failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A snapshot could not be encoded, decoded, read or written.
    #[error("snapshot: {0}")]
    Snapshot(String),
    /// A journal could not be opened, read, written or repaired, or is
    /// bound to another target or embedder.
    #[error("journal: {0}")]
    Journal(String),
    /// The journal's lock is held by another open journal (another
    /// process, or another handle in this one).
    #[error("journal {0} is open elsewhere")]
    JournalLocked(String),
    /// The relevance stage refused the ranking.
    #[error("relevance: {0}")]
    Relevance(#[from] mosaic_harness::memory_scope::RelevanceError),
    /// Selection or context handoff failed (see [`HandoffError`]).
    #[error("selection: {0}")]
    Selection(String),
    /// Canonical encoding failed.
    #[error(transparent)]
    Canonical(#[from] mosaic_harness::canonical::CanonicalError),
}

impl From<HandoffError> for IndexError {
    fn from(err: HandoffError) -> Self {
        IndexError::Selection(err.to_string())
    }
}
