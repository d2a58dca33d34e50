//! The crate's error type.

use mosaic_index::IndexError;
use mosaic_store::postgres::runner::Refusal;

/// Everything this crate can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgSearchError {
    /// The index refused or failed (stale generation, conflicting
    /// publication, malformed message, bad embedding, ...).
    #[error(transparent)]
    Index(#[from] IndexError),
    /// PostgreSQL failed.
    #[error("postgres: {0}")]
    Database(String),
    /// The schema is missing, older or newer than this release, or was made
    /// for another vector dimension.
    #[error("schema: {0}")]
    Schema(String),
    /// An argument is malformed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl From<postgres::Error> for PgSearchError {
    fn from(err: postgres::Error) -> Self {
        match err.as_db_error() {
            Some(db) => PgSearchError::Database(format!("{}: {}", db.code().code(), db.message())),
            None => PgSearchError::Database(err.to_string()),
        }
    }
}

impl From<Refusal> for PgSearchError {
    fn from(refusal: Refusal) -> Self {
        PgSearchError::Schema(match refusal {
            Refusal::TooNew { found, supported } => {
                format!("search schema version {found} is newer than this release ({supported})")
            }
            Refusal::Negative(found) => format!("search schema version {found}"),
            Refusal::Unledgered { ledger } => {
                format!("the schema has search tables but no {ledger}")
            }
        })
    }
}

impl PgSearchError {
    /// The error as the [`IndexError`] an [`mosaic_index::IndexTarget`]
    /// returns. `mosaic-index` has no backend-failure variant yet, so a
    /// database failure travels as [`IndexError::Snapshot`] with a
    /// `postgres:` prefix (the worker retries; nothing was acknowledged).
    pub fn into_index_error(self) -> IndexError {
        match self {
            PgSearchError::Index(e) => e,
            other => IndexError::Snapshot(other.to_string()),
        }
    }
}

/// Shorthand for this crate's results.
pub type PgSearchResult<T> = Result<T, PgSearchError>;
