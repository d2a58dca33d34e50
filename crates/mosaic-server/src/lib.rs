//! # mosaic-server
//!
//! The Mosaic Memory transports over one service layer
//! (`mosaic-service`, re-exported here: [`service::Service`] and every
//! operation as a synchronous function over an [`auth::Credential`]): the
//! HTTP JSON API ([`http::app`]), mem0's REST routes ([`mem0`]), MCP over
//! stdio and streamable HTTP ([`mcp`]), the web console ([`console`]), the
//! OpenAPI 3 document ([`openapi`]), and [`serve`], which runs them on a
//! listening socket until a signal.
//!
//! * **Handlers** decode, authenticate, call one service function on the
//!   blocking pool and encode; a service error becomes its stable code and
//!   HTTP status. A body naming another tenant or principal than the key's
//!   gets 403.
//! * **Limits**: body size, per-key token-bucket rate, request timeout.
//! * **Metrics** in Prometheus text at `/metrics`, an OpenAPI 3 document at
//!   `/openapi.json`.
//!
//! I/O: the listening socket (and, through the service, the data
//! directory). Nothing is logged that carries memory content or secrets.
//!
//! Non-features (this release): TLS (terminate it in front).
// The OpenAPI document is one `json!` literal, deeper than the default limit.
#![recursion_limit = "256"]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod console;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod http;
pub mod mcp;
pub mod mem0;
pub mod openapi;
pub mod serve;

// The use cases, under the paths the transports (and this crate's users)
// have always named them by.
use mosaic_service::error;
pub use mosaic_service::{ErrorBody, ErrorDetail, ServerConfig, ServiceError, ServiceResult};
pub use mosaic_service::{
    INDEX_TARGETS, Service, VECTOR_TARGET, api, auth, config, embedder, error_codes, evidence,
    examples, extraction, http_embedder, instants, metrics, numbers, priority, receipts, service,
    settings, signing,
};

pub use http::app;
