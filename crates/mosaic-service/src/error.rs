//! The crate's one error type and its stable wire codes.

use mosaic_store::StoreError;
use serde::Serialize;

/// Everything a service operation can fail with. Each variant has a stable
/// machine-readable [`ServiceError::code`] and an HTTP [`ServiceError::status`];
/// the message is for humans and never carries memory content or secrets.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// No credential was presented.
    #[error("missing API key: send `Authorization: Bearer <key>` (or `X-API-Key: <key>`)")]
    MissingKey,
    /// The presented credential is unknown or disabled.
    #[error("invalid API key")]
    InvalidKey,
    /// The credential may not do this.
    #[error("{message}")]
    Forbidden {
        /// Stable code (`tenant_mismatch`, `principal_mismatch`, ...).
        code: &'static str,
        /// Human explanation.
        message: String,
    },
    /// The request is malformed.
    #[error("{message}")]
    BadRequest {
        /// Stable code (`malformed_json`, `unknown_field`, ...).
        code: &'static str,
        /// Human explanation.
        message: String,
    },
    /// The request body exceeds the configured limit.
    #[error("request body exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The request target (path and query) is longer than the API reads.
    #[error("the request target exceeds the limit of {limit} bytes")]
    UriTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// The request carries more header fields, or more header bytes, than
    /// the API reads.
    #[error("the request headers exceed the limit of {fields} fields or {bytes} bytes")]
    HeadersTooLarge {
        /// The most header fields.
        fields: usize,
        /// The most bytes of header names and values.
        bytes: usize,
    },
    /// An object does not exist (or is not visible to this credential).
    #[error("{what} not found: {id}")]
    NotFound {
        /// Which kind of object.
        what: &'static str,
        /// Its identity.
        id: String,
    },
    /// The request conflicts with stored state.
    #[error("{message}")]
    Conflict {
        /// Stable code (`proposal_id_reused`, `stale_generation`, ...).
        code: &'static str,
        /// Human explanation.
        message: String,
    },
    /// The credential exceeded its request rate. The answer carries a
    /// `Retry-After` header with the seconds until its next request fits.
    #[error("rate limit exceeded; retry after {retry_after_secs} s")]
    RateLimited {
        /// Whole seconds until the key's bucket holds a request again
        /// (at least 1).
        retry_after_secs: u64,
    },
    /// The request took longer than the configured timeout. Its work may
    /// still finish: a proposal replayed with the same proposal id (or the
    /// same body) returns what was decided.
    #[error(
        "request timed out after {0} ms; a write may still complete: replay it (same proposal_id) to learn its outcome"
    )]
    Timeout(u64),
    /// A required backend is not available in this build or configuration.
    #[error("{0}")]
    Unavailable(String),
    /// Every connection of a bounded pool stayed in use for as long as a
    /// request may wait for one; nothing was changed. Retry.
    #[error("{0}")]
    Busy(String),
    /// A route of another product's API (mem0's platform) this service
    /// knows and does not offer.
    #[error("{0}")]
    NotSupported(String),
    /// An internal failure (storage, index, encoding). Details are in the
    /// message, never memory content.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ServiceError {
    /// A 403 with a stable code.
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        ServiceError::Forbidden {
            code,
            message: message.into(),
        }
    }

    /// A 400 with a stable code.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ServiceError::BadRequest {
            code,
            message: message.into(),
        }
    }

    /// A 404.
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        ServiceError::NotFound {
            what,
            id: id.into(),
        }
    }

    /// The stable error code sent on the wire.
    pub fn code(&self) -> &'static str {
        match self {
            ServiceError::MissingKey => "missing_key",
            ServiceError::InvalidKey => "invalid_key",
            ServiceError::Forbidden { code, .. }
            | ServiceError::BadRequest { code, .. }
            | ServiceError::Conflict { code, .. } => code,
            ServiceError::BodyTooLarge { .. } => "body_too_large",
            ServiceError::UriTooLong { .. } => "uri_too_long",
            ServiceError::HeadersTooLarge { .. } => "headers_too_large",
            ServiceError::NotFound { .. } => "not_found",
            ServiceError::RateLimited { .. } => "rate_limited",
            ServiceError::Timeout(_) => "request_timeout",
            ServiceError::Unavailable(_) => "unavailable",
            ServiceError::Busy(_) => "busy",
            ServiceError::NotSupported(_) => "not_supported",
            ServiceError::Internal(_) => "internal",
        }
    }

    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            ServiceError::MissingKey | ServiceError::InvalidKey => 401,
            ServiceError::Forbidden { .. } => 403,
            ServiceError::BadRequest { .. } => 400,
            ServiceError::BodyTooLarge { .. } => 413,
            ServiceError::UriTooLong { .. } => 414,
            ServiceError::HeadersTooLarge { .. } => 431,
            ServiceError::NotFound { .. } => 404,
            ServiceError::Conflict { .. } => 409,
            ServiceError::RateLimited { .. } => 429,
            ServiceError::Timeout(_) => 503,
            ServiceError::Unavailable(_) | ServiceError::Busy(_) => 503,
            ServiceError::NotSupported(_) => 501,
            ServiceError::Internal(_) => 500,
        }
    }

    /// The `Retry-After` seconds the answer carries: a 429, a 503 `busy`.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ServiceError::RateLimited { retry_after_secs } => Some(*retry_after_secs),
            ServiceError::Busy(_) => Some(1),
            _ => None,
        }
    }

    /// The JSON body `{"error":{"code","message"}}`.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code().to_owned(),
                message: self.to_string(),
            },
        }
    }
}

/// The wire shape of every error.
#[derive(Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// Code and message of an error.
#[derive(Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code.
    pub code: String,
    /// Human explanation.
    pub message: String,
}

impl From<StoreError> for ServiceError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { what, id } => ServiceError::NotFound { what, id },
            StoreError::ContentDigestMismatch => ServiceError::bad_request(
                "content_digest_mismatch",
                "content does not hash to the proposal's content_sha256",
            ),
            StoreError::Gate(m) => ServiceError::bad_request("invalid_proposal", m),
            StoreError::InvalidArgument(m) => ServiceError::bad_request("invalid_argument", m),
            StoreError::InvalidBatch(m) => ServiceError::bad_request("invalid_batch", m),
            StoreError::ProposalIdReused(id) => ServiceError::Conflict {
                code: "proposal_id_reused",
                message: format!("proposal {id} was already decided for a different request"),
            },
            e @ StoreError::StaleGeneration { .. } => ServiceError::Conflict {
                code: "stale_generation",
                message: e.to_string(),
            },
            e @ StoreError::InvalidState { .. } => ServiceError::Conflict {
                code: "invalid_state",
                message: e.to_string(),
            },
            e @ StoreError::RevocationNotReady { .. } => ServiceError::Conflict {
                code: "revocation_not_ready",
                message: e.to_string(),
            },
            e @ StoreError::DegradedActivationRefused { .. } => ServiceError::Conflict {
                code: "degraded_activation_refused",
                message: e.to_string(),
            },
            StoreError::RecordIdInUse(id) => ServiceError::Conflict {
                code: "record_id_in_use",
                message: format!("record id {id} is already in use"),
            },
            other => ServiceError::Internal(other.to_string()),
        }
    }
}

impl From<rusqlite::Error> for ServiceError {
    fn from(err: rusqlite::Error) -> Self {
        ServiceError::Internal(format!("sqlite: {err}"))
    }
}

impl From<mosaic_index::IndexError> for ServiceError {
    fn from(err: mosaic_index::IndexError) -> Self {
        match err {
            // The embedder is down or answered nonsense: the request that
            // needed it fails alone, without the endpoint's detail.
            mosaic_index::IndexError::EmbeddingService(_)
            | mosaic_index::IndexError::BadEmbedding { .. } => ServiceError::Unavailable(
                "the embedding service is unavailable; retry later (lexical recall works)"
                    .to_owned(),
            ),
            other => ServiceError::Internal(format!("index: {other}")),
        }
    }
}

impl From<mosaic_harness::memory_scope::HandoffError> for ServiceError {
    fn from(err: mosaic_harness::memory_scope::HandoffError) -> Self {
        // The server builds every input of the handoff itself: a failure is
        // its own fault, never the client's.
        ServiceError::Internal(format!("context handoff: {err}"))
    }
}

impl From<mosaic_harness::canonical::CanonicalError> for ServiceError {
    fn from(err: mosaic_harness::canonical::CanonicalError) -> Self {
        ServiceError::Internal(format!("canonical encoding: {err}"))
    }
}

/// Shorthand for this crate's results.
pub type ServiceResult<T> = Result<T, ServiceError>;
