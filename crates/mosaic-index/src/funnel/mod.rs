//! The retrieval funnel:
//!
//! ```text
//! eligible set (from the read selector)          ── never widened
//!   → lexical (BM25) + semantic (vectors) + structured (claim keys)
//!     (BM25 over turn windows: a record plus its eligible neighbours)
//!   → weighted standard-score fusion (or min-max, or reciprocal-rank) in
//!     integers, speaker prior (records whose speaker the query names, or
//!     whose role its person names), recency for questions about the
//!     current state, a time prior for questions asking when (records that
//!     place something in time), optional neighbouring-record bonus, no
//!     rank for a candidate with no evidence of relevance (no term matched,
//!     vector similarity under a floor), ties by record id
//!   → RelevanceInput → rank_relevance → RelevanceReceipt
//!   → select_memory_ranked → context handoff (the core's
//!     `mosaic_harness::memory_scope::hand_off`, re-exported as [`crate::hand_off`])
//! ```
//!
//! Results are cached under every identity that can change them: tenant,
//! policy, both targets' snapshot generations, the index and store
//! revocation generations, selector release, read subject and the digest of
//! the complete query (text, parameters, eligible-set digest). A new
//! snapshot generation drops every older cached entry.
//!
//! What lives where:
//! * `config`: the retrieval modes, fusion methods and funnel parameters.
//! * `recall`: a read's query and what the funnel answers (ranked records,
//!   their explanations, the relevance input they hand on).
//! * `cache`: the result cache and the identities a result is kept under
//!   (cache key, query digest, feature release).
//! * `retriever`: the two targets with the funnel and its cache: recall,
//!   cached or computed.
//! * `tests`: the unit tests.

mod cache;
mod config;
mod recall;
mod retriever;

#[cfg(test)]
mod tests;

pub use cache::{CacheKey, ResultCache, feature_release_of, query_digest};
pub use config::{FunnelConfig, Fusion, RetrievalMode};
pub use recall::{Explanation, Ranked, Recall, RecallQuery};
pub use retriever::Retriever;

/// Domain tag of the query digest.
pub const QUERY_DOMAIN: &str = "mosaic.index.recall_query.v1";
/// Release of the funnel (its candidate lists and their fusion); bound
/// into every relevance receipt. v9: a hybrid read starts the vector
/// graph's walk from its best lexical hits as well (`AnnConfig::
/// search_seeds`), so at graph scale its vector list can differ from
/// v8's on the same data; the fusion is v8's.
pub const RANKER_RELEASE: &str =
    "funnel-zscore-window-speaker-recency-time-floor-updates-dialogue-seeded-v9";
