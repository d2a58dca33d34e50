//! The crate's one error type.

use mosaic_harness::canonical::CanonicalError;

/// Everything a [`crate::Store`] operation can fail with.
///
/// Expected *decisions* are not errors: a gate rejection is a stored
/// [`crate::WriteDecision::Rejected`]. Errors are execution failures, typed
/// refusals of a stale or out-of-order operation, and integrity findings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database file was written by a newer schema than this release
    /// understands. Nothing was changed; upgrade the binary.
    #[error(
        "database schema version {found} is newer than the newest this release knows ({supported})"
    )]
    SchemaTooNew {
        /// Version stored in the file.
        found: i64,
        /// Newest version this release can read and write.
        supported: i64,
    },
    /// The file is not a Mosaic store (it has tables but no schema version).
    #[error("database is not a Mosaic store: {0}")]
    NotAStore(String),
    /// The backend failed (I/O, constraint, lock timeout, ...).
    #[error("backend error: {0}")]
    Backend(String),
    /// A test-only fault injected at the given statement count.
    #[error("injected fault at statement {0}")]
    InjectedFault(u64),
    /// A stored value does not decode (schema drift or tampering).
    #[error("stored value does not decode: {0}")]
    Corrupt(String),
    /// Canonical encoding failed.
    #[error("canonical encoding failed: {0}")]
    Canonical(#[from] CanonicalError),
    /// The supplied content does not hash to the proposal's `content_sha256`.
    #[error("content digest does not match the proposal's content_sha256")]
    ContentDigestMismatch,
    /// The gate refused to decide (malformed input); nothing was stored.
    #[error("write gate execution error: {0}")]
    Gate(String),
    /// A required object is missing.
    #[error("{what} not found: {id}")]
    NotFound {
        /// Which kind of object.
        what: &'static str,
        /// Its identity.
        id: String,
    },
    /// A proposal id was reused with a different request.
    #[error("proposal {0} was already decided for a different request")]
    ProposalIdReused(String),
    /// Two writers raced on one subject line; this one lost. Re-run conflict
    /// verification against the new head and propose again.
    #[error(
        "stale generation on line {line_id}: expected head {expected_record_id} at {expected_generation}, found {found_record_id} at {found_generation}"
    )]
    StaleGeneration {
        /// The line (subject/claim lineage) being advanced.
        line_id: String,
        /// The head the writer observed.
        expected_record_id: String,
        /// The generation the writer observed.
        expected_generation: u64,
        /// The head now stored.
        found_record_id: String,
        /// The generation now stored.
        found_generation: u64,
    },
    /// The record is in a state that does not allow the operation.
    #[error("record {record_id} is {state}; cannot {operation}")]
    InvalidState {
        /// The record.
        record_id: String,
        /// Its current state.
        state: String,
        /// The refused operation.
        operation: &'static str,
    },
    /// An index acknowledgement carried an older generation than the one the
    /// outbox now requires (for example a publish after a revocation).
    #[error(
        "stale index acknowledgement for {record_id} on {target}: held generation {held}, current {current}"
    )]
    StaleIndexGeneration {
        /// The record.
        record_id: String,
        /// The index target.
        target: String,
        /// Generation the worker held.
        held: u64,
        /// Generation the outbox requires.
        current: u64,
    },
    /// A revocation step was attempted before its precondition holds (for
    /// example confirming index removal while acknowledgements are pending).
    #[error("revocation of {record_id} cannot advance: {reason}")]
    RevocationNotReady {
        /// The record.
        record_id: String,
        /// What is still missing.
        reason: String,
    },
    /// Degraded activation was refused: the target is required by policy,
    /// or the record is not waiting on that target alone.
    #[error("degraded activation of {record_id} without {target} refused: {reason}")]
    DegradedActivationRefused {
        /// The record.
        record_id: String,
        /// The target the caller asked to omit.
        target: String,
        /// Why it was refused.
        reason: String,
    },
    /// The proposed record id already names a record or a tombstone.
    #[error("record id {0} is already in use")]
    RecordIdInUse(String),
    /// A stored write receipt does not re-verify from its stored inputs.
    #[error("stored write receipt does not verify: {0}")]
    ReceiptMismatch(String),
    /// The gate refused request `index` of an all-or-nothing batch, so the
    /// batch's transaction rolled back.
    #[error("request {index} of the batch was refused; nothing was written")]
    BatchRefused {
        /// The refused request's place in the batch.
        index: usize,
    },
    /// A batch was empty or too large.
    #[error("invalid batch: {0}")]
    InvalidBatch(String),
    /// An argument is malformed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        StoreError::Backend(err.to_string())
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        StoreError::Corrupt(err.to_string())
    }
}

/// Shorthand for this crate's results.
pub type StoreResult<T> = Result<T, StoreError>;
