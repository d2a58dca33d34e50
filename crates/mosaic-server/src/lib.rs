//! # mosaic-server
//!
//! The Mosaic Memory transports over one service layer
//! (`mosaic-service`: [`Service`] and every operation as a synchronous
//! function over a [`Credential`]): the
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
//! * **Metrics** in Prometheus text at `/metrics` (the admin key only,
//!   unless the server is configured with `metrics_without_key`), an
//!   OpenAPI 3 document at `/openapi.json`.
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

// The service types this crate's own functions take and answer (`app`'s
// state is an `Arc<Service>`; `serve_*` and `mcp` take a service and a
// credential and answer a `ServiceResult`), so a user of the transports
// can call them without naming `mosaic-service`. Everything else of the
// service is named from `mosaic_service` itself.
pub use mosaic_service::auth::Credential;
pub use mosaic_service::{Service, ServiceError, ServiceResult};

pub use http::app;
