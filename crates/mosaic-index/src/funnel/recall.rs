//! A read's query and the funnel's answer: ranked records with their
//! explanations, and the relevance input handed to the core.

use std::sync::Arc;

use mosaic_harness::memory_scope::{
    EligibleSet, RelevanceInput, RelevanceReceipt, ScoredCandidate, SealedEligibleSet,
};

use super::RetrievalMode;
use crate::ann::SearchPlan;

/// One read's query.
#[derive(Clone, Debug)]
pub struct RecallQuery<'a> {
    /// Reading tenant.
    pub tenant_id: &'a str,
    /// Current policy digest.
    pub policy_sha256: &'a str,
    /// Selector release of the read context.
    pub selector_release: &'a str,
    /// The read subject (principal, workspace and run of the read context).
    pub read_subject: &'a str,
    /// The store's current revocation generation.
    pub revocation_generation: u64,
    /// Query text (never logged, never stored: only its digest).
    pub text: &'a str,
    /// Claim keys to match exactly.
    pub claim_keys: &'a [String],
    /// The eligible set of this read (see
    /// `mosaic_harness::memory_scope::eligible_set`).
    pub eligible: &'a SealedEligibleSet,
    /// Keep at most this many results.
    pub max_results: usize,
    /// Generators to run.
    pub mode: RetrievalMode,
}

/// Why a record was ranked where it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The record.
    pub record_id: String,
    /// Rank in the lexical list (0-based), if present.
    pub lexical_rank: Option<usize>,
    /// Rank in the vector list (0-based), if present.
    pub vector_rank: Option<usize>,
    /// Matched a claim key exactly.
    pub structured: bool,
    /// Score added from neighbouring records.
    pub neighbour_bonus: u64,
    /// Score added by the speaker prior (the query names the record's
    /// speaker).
    pub speaker_bonus: u64,
    /// Score added by recency (a question about the current state).
    pub recency_bonus: u64,
    /// Score added for placing something in time (a question asking when).
    pub time_bonus: u64,
    /// Score added to place a newer value just above the older one it
    /// replaces (an update pair at the head of the ranking).
    pub update_lift: u64,
    /// For a record indexed as several passages (longer than the
    /// embedder's window) that the vector list found: the passage that
    /// matched, which gave the record its vector score.
    pub vector_passage: Option<crate::vector::PassageMatch>,
}

/// What one ranking ranked with, besides the eligible set: kept from the
/// ranking itself rather than read back from its receipt, so a receipt
/// checked against it ([`Recall::relevance_input`]) is checked in every
/// field, its query digest and releases included.
#[derive(Clone, Debug)]
pub struct Ranked {
    /// Digest of the complete query the ranker was given.
    pub query_sha256: String,
    /// Release of the features (analyzer, embedder) it ranked with.
    pub feature_release: String,
    /// Release of the ranker.
    pub ranker_release: String,
    /// Its scores, one per scored candidate.
    pub scores: Vec<ScoredCandidate>,
    /// How many results it kept at most.
    pub max_results: usize,
}

/// A recall: the ranker's scores, the relevance receipt and explanations.
#[derive(Clone, Debug)]
pub struct Recall {
    /// What the ranker ranked with, when this read computed it; `None` on
    /// a cache hit, whose entry keeps the receipt only. With the read's
    /// eligible set it rebuilds the relevance input
    /// ([`Recall::relevance_input`]).
    pub ranked: Option<Arc<Ranked>>,
    /// The receipt (ordered results).
    pub receipt: RelevanceReceipt,
    /// One explanation per result, in result order.
    pub explanations: Vec<Explanation>,
    /// The vector plan used, if vectors ran.
    pub vector_plan: Option<SearchPlan>,
    /// Served from the cache.
    pub cache_hit: bool,
}

impl Recall {
    /// The relevance input this read ranked: what the ranker ranked with
    /// ([`Ranked`]) and `eligible` (the set the read ranked over), for
    /// [`verify_relevance_receipt`]; `None` on a cache hit. The read itself
    /// does not build it: the input holds the whole eligible set, which
    /// would be copied per read.
    ///
    /// [`verify_relevance_receipt`]: mosaic_harness::memory_scope::verify_relevance_receipt
    pub fn relevance_input(&self, eligible: &EligibleSet) -> Option<RelevanceInput> {
        let ranked = self.ranked.as_deref()?;
        Some(RelevanceInput {
            query_sha256: ranked.query_sha256.clone(),
            eligible: eligible.clone(),
            feature_release: ranked.feature_release.clone(),
            ranker_release: ranked.ranker_release.clone(),
            scores: ranked.scores.clone(),
            max_results: ranked.max_results,
        })
    }

    /// Result record ids, best first.
    pub fn record_ids(&self) -> Vec<&str> {
        self.receipt
            .results
            .iter()
            .map(|r| r.record_id.as_str())
            .collect()
    }
}
