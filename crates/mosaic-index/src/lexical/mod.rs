//! BM25 over a small in-memory inverted index, with postings partitioned by
//! scope (tenant + subject) so a selective read touches only its own
//! partitions, and statistics (document count, average length, document
//! frequency) computed over the partitions searched, so one tenant's data
//! never shapes another's scores.
//!
//! Turn windows (used by the funnel): a record can be scored over its own
//! terms plus those of its eligible neighbours in the subject's timeline,
//! down-weighted by distance, so a reply that answers a question without
//! repeating its words is still found. Ineligible records never lend terms.
//!
//! Speaker labels (`Caroline: ...`, see `text::speaker_label`) are kept
//! per record, so the funnel can prefer the lines of a speaker a query
//! names.
//!
//! Useful for: exact words, names, rare terms; claim-key exact matches; a
//! subject's records in time order (neighbouring-record context).
//! Not useful for: paraphrase (see the vector index).
//!
//! What lives where:
//! * `postings`: the inverted index itself (partitions, postings, per-doc
//!   facts, each doc's nearest neighbours in its timeline), what a
//!   publish adds and a tombstone removes, and the corpus statistics of
//!   the partitions a read searches.
//! * `scoring`: BM25 (plain and over turn windows), the pruned top-`k`
//!   walk and the exhaustive scorer it is checked against.
//! * `sharing`: the write guard's query, the records of a subject that
//!   share the most rare terms with a text.
//! * `timeline`: a record's eligible neighbours in its subject's timeline.
//! * `records`: per-record facts the funnel reads (claim keys, speaker,
//!   timing, creation time).
//! * `tests`: the unit tests.

use crate::fenced::FencedIndex;

mod postings;
mod records;
mod scoring;
mod sharing;
mod timeline;

#[cfg(test)]
mod tests;

pub use postings::{LexPrepared, LexicalBackend, analyse};
pub(crate) use scoring::sort_hits_by;
pub use scoring::{
    BM25_B_PERMILLE, BM25_K1_PERMILLE, LexicalParams, bm25_avgdl, bm25_idf, bm25_scores,
};

/// A scored hit: record id and a score (higher is better).
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The record.
    pub record_id: String,
    /// Score (BM25 or cosine similarity).
    pub score: f32,
}

/// The lexical target (outbox target name `lexical`).
pub type LexicalIndex = FencedIndex<LexicalBackend>;

impl LexicalIndex {
    /// An empty lexical target.
    pub fn new() -> Self {
        FencedIndex::with_backend("lexical", LexicalBackend::default())
    }
}

impl Default for LexicalIndex {
    fn default() -> Self {
        Self::new()
    }
}
