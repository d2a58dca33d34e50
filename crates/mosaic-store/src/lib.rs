//! # mosaic-store
//!
//! Durable state of Mosaic Memory behind one synchronous [`Store`] trait,
//! and its embedded backend [`SqliteStore`] (one SQLite file, WAL,
//! `synchronous=FULL`).
//!
//! What the store guarantees (chapter 8, "Transaction and publication
//! protocol"):
//!
//! * **One transaction per write.** [`Store::write`] begins an immediate
//!   transaction, re-reads the tenant's policy, the principal's grant, the
//!   consent receipt and the supersession line head *from the store*, checks
//!   the content bytes against `proposal.content_sha256`, runs the pure gate
//!   (`mosaic_harness::memory_write::evaluate_memory_write`) and persists
//!   only what the gate's `GateOutcome` says: record, receipt, source edges,
//!   consent link, lineage, audit event and one outbox row per required
//!   index, or just the rejection receipt (plus a review case for a
//!   conflict). Retrying a proposal id returns the stored decision.
//! * **Publication.** A record is unreadable (`publishing`) until every
//!   required index acknowledged its generation through
//!   [`Store::acknowledge_index`].
//! * **Generation fences.** Supersession is a compare-and-swap on the line
//!   head; the loser of a race gets [`StoreError::StaleGeneration`]. A
//!   store-wide revocation generation is carried by reads
//!   ([`SnapshotIdentity`]) and index messages; a worker holding an older one
//!   is refused.
//! * **Revocation** is a typed state machine ([`revocation`]) ending in a
//!   canonical [`DeletionReceipt`]; consent withdrawal and lineage cascade in
//!   the same transaction.
//! * **Incremental reads.** Each read scope's commitment is kept in the
//!   transaction of every change, each scope entry marked with the
//!   generation of its last change and each scope head with that of its
//!   last erasure, so [`Store::eligible_changes`] answers what changed in
//!   a reader's scopes since an earlier read from the changes alone (or
//!   `None`, when they cannot give the answer).
//! * **Audit** events are hash-chained ([`audit`]); tampering is detected by
//!   [`Store::verify_audit_chain`].
//!
//! Both backends run one implementation of every operation (validation,
//! decisions, receipt, audit and outbox rows, the revocation steps, the
//! order of checks) over a small transaction interface; a backend supplies
//! only what differs: statement execution and placeholders, row access,
//! locking, tenant context and the few tables whose columns differ.
//!
//! Feature `conformance` (off by default): the `conformance` module, the
//! backend-independent test suite and its fixtures; a new backend passes it
//! by implementing `conformance::StoreFactory`. Only tests, the crash
//! harness and benchmarks turn it on.
//!
//! Feature `postgres` (on by default): [`PostgresStore`], the same
//! interface on PostgreSQL, passing the same suite, with tenant isolation
//! also enforced by row-level security (see [`postgres`]).
//!
//! Non-features: no network service, no index implementation (workers live
//! in `mosaic-index`), no logging of memory content.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod audit;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod directory;
mod error;
pub mod intake;
mod ops;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod read;
pub mod revocation;
pub mod sqlite;
mod store;
mod types;

pub use error::{StoreError, StoreResult};
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;
pub use store::Store;
pub use types::*;
