//! # mosaic-pgsearch
//!
//! Retrieval inside PostgreSQL, so that any number of stateless servers can
//! share one database: the indexes live next to the store's tables instead
//! of in each server's memory.
//!
//! * [`PgLexicalIndex`]: the `lexical` outbox target over full-text search
//!   (`tsvector` + GIN, `ts_rank_cd` scores in fixed point).
//! * [`PgVectorIndex`]: the `vector` outbox target over pgvector (HNSW,
//!   filtered iterative index scans with `hnsw.ef_search` set per query).
//! * Both implement `mosaic-index`'s [`mosaic_index::IndexTarget`] with the
//!   same generation fence as the in-memory targets (see [`fence`]):
//!   idempotent by `(record_id, generation)`, stale generations refused,
//!   tombstones and the revocation watermark keep revoked content out.
//!   Tenant isolation is enforced a second time by row-level security on
//!   their tables ([`schema`]).
//! * [`search`]: one search interface over these and the in-memory
//!   targets; `conformance` (feature `conformance`, off by default, for
//!   tests): the retrieval suite both pass.
//! * [`rank`]: the shared ranker's candidate source over these tables, so
//!   a read over PostgreSQL is ranked by `mosaic_index::fusion` exactly as
//!   a read over the in-memory targets.
//!
//! I/O: the PostgreSQL connections the caller opens, and the embedder the
//! caller gives the vector target. Nothing else: no clock, no environment,
//! no logging of memory content.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
pub mod fence;
pub mod lexical;
pub mod rank;
pub mod schema;
pub mod search;
pub mod vector;

pub use error::{PgSearchError, PgSearchResult};
pub use lexical::PgLexicalIndex;
pub use rank::PgCandidates;
pub use search::{LexicalSearch, RankedHit, SearchTarget, VectorSearch};
pub use vector::{IterativeScan, PgVectorIndex, VectorSearchConfig};
