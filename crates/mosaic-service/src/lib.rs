//! # mosaic-service
//!
//! The Mosaic Memory use cases, without a transport: one
//! [`service::Service`] layer with every operation (propose, recall, get,
//! list, revoke, consent, erasure, verify, export, import, policies,
//! grants, keys, review, reconcile, reindex) as plain synchronous functions
//! over a [`auth::Credential`]. The transports (`mosaic-server`: HTTP,
//! mem0, MCP, the console) decode, call one of these and encode; nothing
//! here knows an HTTP type.
//!
//! * **Authentication.** API keys (32 random bytes, shown once, stored as
//!   SHA-256) resolve to the admin or to one principal of one tenant. Tenant
//!   and principal come only from the key; a body naming others is
//!   refused ([`ServiceError::Forbidden`]).
//! * **Evidence** is never taken from the proposer as is: the service runs
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
//! * **Errors** carry a stable code and the HTTP status a transport answers
//!   with, as a number ([`error_codes`]).
//! * **Metrics** recorded per service, rendered in Prometheus text
//!   ([`metrics`]).
//!
//! I/O: the data directory (SQLite store, index snapshots, the bootstrap
//! admin key file), the embedding and extraction endpoints when
//! configured. Nothing is logged that carries memory content or secrets.
//!
//! With a PostgreSQL URL the store, the indexes (full-text search and
//! pgvector HNSW) live in PostgreSQL, so any number of stateless servers
//! can share one database.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod api;
pub mod auth;
pub mod config;
pub mod embedder;
pub mod error;
pub mod error_codes;
pub mod evidence;
pub mod examples;
pub mod extraction;
pub mod http_embedder;
pub mod instants;
pub mod metrics;
pub mod numbers;
pub mod priority;
pub mod receipts;
pub mod service;
pub mod settings;
pub mod signing;

pub use config::ServerConfig;
pub use error::{ErrorBody, ErrorDetail, ServiceError, ServiceResult};
pub use service::{INDEX_TARGETS, Service, VECTOR_TARGET};
