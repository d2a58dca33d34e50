//! # mosaic-server
//!
//! The Mosaic Memory service: one [`service::Service`] layer with every
//! operation (propose, recall, get, list, revoke, consent, erasure, verify,
//! export, import, policies, grants, keys, review, reconcile, reindex) as
//! plain synchronous functions over a [`auth::Credential`], and the HTTP JSON
//! API over it ([`http::app`]). An MCP server can call the same functions.
//!
//! * **Authentication.** API keys (32 random bytes, shown once, stored as
//!   SHA-256) resolve to the admin or to one principal of one tenant. Tenant
//!   and principal come only from the key; a body naming others gets 403.
//! * **Evidence** is never taken from the proposer as is: the server runs
//!   its own verbatim verifier over source texts the request carries,
//!   accepts other evidence only when signed by a verifier the admin
//!   registered for the tenant, and scans stored claims for conflicts
//!   itself ([`evidence`]).
//! * **Writes** run the store's chapter 8 transaction (which runs the pure
//!   gate) and commit with their outbox rows; the `mosaic-outbox` worker
//!   thread then publishes them to the lexical and vector index targets
//!   (in process, or in PostgreSQL), and a proposal waits for that pass at
//!   most `index_wait_ms` to answer whether it is `readable`. A periodic
//!   reconcile publishes anything left pending and advances deletions.
//! * **Reads** take the store's eligibility query, rank with the index
//!   funnel when a query is given, select with the pure selector and hand
//!   off escaped `<recalled-memory>` blocks with every receipt.
//! * **Limits**: body size, per-key token-bucket rate, request timeout.
//! * **Metrics** in Prometheus text at `/metrics`, an OpenAPI 3 document at
//!   `/openapi.json`.
//!
//! I/O: the data directory (SQLite store, index snapshots, the bootstrap
//! admin key file) and the listening socket.
//! Nothing is logged that carries memory content or secrets.
//!
//! With `--postgres URL` the store, the indexes (full-text search and
//! pgvector HNSW) live in PostgreSQL, so any number of
//! stateless servers can share one database (`mosaic migrate` as the
//! schema owner first, then serve as an application role).
//!
//! Review cases take all five store actions; the two that write
//! (`accept_narrower`, `supersede`) carry a proposal that goes through the
//! propose path's evidence checks and the gate like any other write.
//!
//! Non-features (this release): TLS (terminate it in front).
// The OpenAPI document is one `json!` literal, deeper than the default limit.
#![recursion_limit = "256"]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod api;
pub mod auth;
pub mod config;
pub mod console;
pub mod embedder;
mod error;
pub mod error_codes;
pub mod evidence;
pub mod examples;
pub mod extraction;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod http;
pub mod http_embedder;
pub mod instants;
pub mod mcp;
pub mod mem0;
pub mod metrics;
pub mod numbers;
pub mod openapi;
pub mod priority;
pub mod receipts;
pub mod service;
pub mod settings;
pub mod signing;

pub use config::ServerConfig;
pub use error::{ErrorBody, ErrorDetail, ServiceError, ServiceResult};
pub use http::app;
pub use service::{INDEX_TARGETS, Service, VECTOR_TARGET};
