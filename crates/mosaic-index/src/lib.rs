//! # mosaic-index
//!
//! The retrieval layer of Mosaic Memory. It is fed only by the store's
//! outbox and answers only inside an eligible set the read selector
//! computed; ranking never widens eligibility.
//!
//! * [`target`]: the [`IndexTarget`] interface outbox workers call
//!   (`publish`, `tombstone`, idempotent by `(record_id, generation,
//!   target)`, generation-fenced so nothing revoked comes back),
//!   snapshots and `rebuild_from`.
//! * [`lexical`]: BM25 over an in-memory inverted index partitioned by
//!   scope, with deletions, claim keys and per-subject timelines.
//! * [`embed`]: the [`Embedder`] trait and a deterministic hashing
//!   embedder; [`local_model`]: all-MiniLM-L6-v2. Embedders that call a
//!   service implement the trait outside this crate (the server's HTTP
//!   embedder).
//! * [`ann`] and [`vector`]: exact scan and a filter-aware HNSW graph,
//!   planned per query.
//! * [`eval_metrics`]: evidence recall@k and nDCG@10, shared by the
//!   evaluation tools.
//! * [`journal`]: an append-only, checksummed journal per target, so a
//!   target persists as its last snapshot plus what was applied since; the
//!   bytes written per change do not grow with the index.
//! * [`funnel`]: candidates → integer fusion → relevance receipt, with a
//!   result cache; the receipt goes to the core's selection and context
//!   handoff ([`hand_off`], re-exported from `mosaic-harness`).
//! * [`fusion`]: ranking in one place: the candidate-source trait the
//!   in-memory and the PostgreSQL targets implement, and the one fusion
//!   both use.
//!
//! I/O: snapshots, journals and model files are read and written at paths
//! the caller gives. Nothing else: no network, no clock, no environment,
//! no logging of memory content.
//!
//! ## Persistence: snapshots and journals
//! Useful for: a single process that owns its index files and changes them
//! often. Each applied message is appended to the target's
//! [`IndexJournal`] (size independent of the index), a restart restores the
//! last snapshot and replays the journal through the generation fence
//! (idempotent, no re-embedding), and a periodic compaction writes a fresh
//! snapshot and discards the journal prefix it covers (crash-safe in the
//! order given in [`journal`]).
//! Not useful for: durability of record truth (the store owns it; an
//! unsynced append lost in a power cut is repaired by rebuilding from the
//! store), several writers of one file (the file is locked to one owner),
//! or prompt erasure on disk by itself (a tombstoned text stays in the
//! journal and the last snapshot until the next compaction).
//!
//! ## Feature flags
//! * `local-model` (off): the all-MiniLM-L6-v2 embedder (own encoder).
//!
//! Non-features: persistence of record truth (the store owns it; these
//! indexes are derived and rebuildable), authorization (the caller supplies
//! the eligible set), approximate search inside tiny scopes (exact scan).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod ann;
pub mod embed;
pub mod error;
pub mod eval_metrics;
pub mod fence;
pub mod fenced;
pub mod funnel;
pub mod fusion;
pub mod journal;
pub mod lexical;
pub mod local_model;
pub mod scope;
pub mod target;
pub mod text;
pub mod vector;

pub use ann::{AnnConfig, AnnIndex, GraphDelta, SearchPlan};
pub use embed::{Embedder, HashEmbedder};
pub use error::{IndexError, ModelError, StaleReason};
pub use funnel::{
    CacheKey, FunnelConfig, Fusion, Ranked, Recall, RecallQuery, RetrievalMode, Retriever,
};
pub use journal::{
    IndexJournal, JournalDamage, JournalEntry, JournalHeader, JournalRecovery, ReplayReport,
    apply_to_lexical, apply_to_vector,
};
pub use lexical::{Hit, LexicalIndex};
/// The context handoff at the end of the funnel lives in the core;
/// re-exported for callers of the funnel.
pub use mosaic_harness::memory_scope::{Handoff, HandoffError, hand_off};
pub use scope::{DocSet, Eligible, ScopePredicate};
pub use target::{
    AckOutcome, Acknowledgement, IndexTarget, PublishMessage, RebuildEntry, ScopeKeys,
    TargetSnapshot,
};
pub use vector::VectorIndex;
