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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use mosaic_harness::canonical::domain_digest;
use mosaic_harness::memory_scope::{
    EligibleSet, RelevanceInput, RelevanceReceipt, ScoredCandidate, SealedEligibleSet,
};
use serde::{Deserialize, Serialize};

use crate::ann::{AnnConfig, SearchPlan};
use crate::embed::Embedder;
use crate::error::IndexError;
use crate::fusion::{MemorySource, fuse, gather, lexical_needed};
use crate::lexical::{BM25_B_PERMILLE, BM25_K1_PERMILLE, LexicalIndex};
use crate::text::ANALYZER_RELEASE;
use crate::vector::VectorIndex;

/// Domain tag of the query digest.
pub const QUERY_DOMAIN: &str = "mosaic.index.recall_query.v1";
/// Release of the fusion below; bound into every relevance receipt.
pub const RANKER_RELEASE: &str =
    "funnel-zscore-window-speaker-recency-time-floor-updates-dialogue-v8";

/// Which candidate generators run.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetrievalMode {
    /// BM25 (+ structured) only.
    Lexical,
    /// Vectors (+ structured) only.
    Vector,
    /// Both, fused.
    Hybrid,
}

/// How the lexical and vector candidate lists are combined.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// Weighted reciprocal rank: `weight / (rrf_k + rank)`.
    ReciprocalRank,
    /// Weighted sum of each list's scores scaled to 0..1 by the list's own
    /// minimum and maximum (CombSUM with min-max normalisation), in the same
    /// units as a first reciprocal rank, so structured matches weigh alike.
    MinMaxScore,
    /// Weighted sum of each list's scores in standard deviations: how many
    /// standard deviations of its list's candidate scores a candidate
    /// stands above the list's lowest candidate, a third of a first
    /// reciprocal rank per deviation. A list whose best candidates stand
    /// out from the rest weighs more for that query than a list whose
    /// scores are flat, whatever each list's scale; every candidate keeps
    /// its list's order.
    ZScore,
}

/// Fusion parameters (integers, so fusion is exact and reproducible).
/// Fields missing from a serialized form take their default.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
#[serde(default)]
pub struct FunnelConfig {
    /// Candidates taken from each generator.
    pub candidate_depth: usize,
    /// Reciprocal-rank constant `k` in `w / (k + rank)`.
    pub rrf_k: u64,
    /// Weight of the lexical list.
    pub lexical_weight: u64,
    /// Weight of the vector list.
    pub vector_weight: u64,
    /// Weight of an exact claim-key match.
    pub structured_weight: u64,
    /// Per-mille of the mean of a record's two neighbours' scores (the
    /// records just before and after it in its subject's timeline) added to
    /// its own; 0 disables neighbouring-record context.
    pub neighbour_permille: u64,
    /// Most cached results.
    pub cache_capacity: usize,
    /// How the lexical and vector lists are combined.
    pub fusion: Fusion,
    /// BM25 over turn windows: the per-mille weight of each eligible
    /// neighbouring record's terms and length when scoring a record (the
    /// record itself is still what is returned); 0 scores records alone.
    pub lexical_window_permille: u64,
    /// Records on each side of a record in its turn window; the one at
    /// distance d weighs `lexical_window_permille`^d (geometric decay).
    pub lexical_window_radius: usize,
    /// BM25 `k1`, per-mille.
    pub bm25_k1_permille: u64,
    /// BM25 `b`, per-mille.
    pub bm25_b_permille: u64,
    /// Speaker prior: per-mille added to the fused score of a record whose
    /// speaker label (`Caroline: ...`, see `text::speaker_label`) holds a
    /// query term, so "what did Caroline ..." prefers Caroline's own lines;
    /// 0 disables it.
    pub speaker_permille: u64,
    /// Speakers that are roles (`user:`, `assistant:`) are never named by a
    /// query term; the speaker prior instead prefers the user's lines for a
    /// question in the first person and the assistant's for one in the
    /// second (`text::query_person`).
    pub speaker_roles: bool,
    /// Recency for questions about the current state (`text::asks_current_state`):
    /// a candidate gains this per-mille of its score times its place in
    /// time among the candidates (0 for the oldest, 1 for the newest); 0
    /// disables it.
    pub recency_permille: u64,
    /// For a question asking when (`text::asks_when`): per-mille added to
    /// the score of a candidate that places something in time
    /// (`text::places_in_time`); 0 disables it.
    pub time_permille: u64,
    /// Relevance floor, per-mille of vector similarity: a candidate that
    /// no query term matched (no lexical score), no claim key matched, and
    /// whose vector similarity to the query is below this is not ranked at
    /// all, so a scope's unrelated memories are not returned at relevance
    /// 0; 0 disables it.
    pub relevance_floor_permille: u64,
    /// Update pairs: how many of the ranking's best candidates are looked
    /// at for two values of one thing, the newer placed just above the
    /// older (see `fusion::update_lifts`; not for a question about the
    /// past, `text::asks_about_the_past`); 0 disables it.
    pub update_head: usize,
    /// Least similarity, per-mille, of the stored vectors of an update
    /// pair's two records.
    pub update_band_permille: u64,
    /// Weight of the vector list when most candidates are lines of a user
    /// and an assistant (speakers that are roles, `text::speaker_role`)
    /// rather than of people named in the text; `vector_weight` otherwise.
    pub dialogue_vector_weight: u64,
}

impl Default for FunnelConfig {
    /// The configuration chosen on the LoCoMo tuning split and checked on
    /// its held-out split and on the assistant-sessions set (see the
    /// benchmarks): standard-score fusion with the vector list at 60% of
    /// the lexical weight, 100 candidates a list, BM25 over turn windows of
    /// two records on each side (weights 1/2 and 1/4), plain BM25 `k1` and
    /// `b`, records of a speaker the query names at 1.5 times their score
    /// (speakers that are roles chosen by the question's person), later
    /// records up to 1.25 times their score for a question about the
    /// current state, records that place something in time at 1.5 times
    /// their score for a question asking when, no extra neighbour bonus;
    /// candidates with no term matched below a vector similarity of 0.25
    /// not ranked (the 90th percentile of MiniLM's similarity between a
    /// question and another conversation's turns); among the ten best
    /// candidates, a newer line of one speaker that states a change placed
    /// just above an older line at least 0.6 alike (MiniLM: above the 99th
    /// percentile of two lines of one RealMem user, 0.595) that it
    /// replaces, unless the question asks about the past (chosen on the
    /// tuning splits: see the benchmarks); when most candidates are lines
    /// of a user and an assistant, the two lists weigh alike (the neutral
    /// choice, not tuned: see `fusion::is_dialogue`).
    fn default() -> Self {
        FunnelConfig {
            candidate_depth: 100,
            rrf_k: 60,
            lexical_weight: 1_000,
            vector_weight: 600,
            structured_weight: 2_000,
            neighbour_permille: 0,
            cache_capacity: 4_096,
            fusion: Fusion::ZScore,
            lexical_window_permille: 500,
            lexical_window_radius: 2,
            bm25_k1_permille: BM25_K1_PERMILLE,
            bm25_b_permille: BM25_B_PERMILLE,
            speaker_permille: 500,
            speaker_roles: true,
            recency_permille: 250,
            time_permille: 500,
            relevance_floor_permille: 250,
            update_head: 10,
            update_band_permille: 600,
            dialogue_vector_weight: 1_000,
        }
    }
}

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

/// The identity a cached result is stored under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Tenant.
    pub tenant_id: String,
    /// Policy digest.
    pub policy_sha256: String,
    /// Snapshot generations of the lexical and vector targets.
    pub index_snapshot_generation: (u64, u64),
    /// Tombstones applied by the targets (index revocation generation).
    pub index_revocation_generation: u64,
    /// The store's revocation generation.
    pub store_revocation_generation: u64,
    /// Selector release.
    pub selector_release: String,
    /// Read subject.
    pub read_subject: String,
    /// Digest of the complete query.
    pub query_sha256: String,
}

/// A bounded result cache that forgets everything older than the newest
/// snapshot it has seen.
#[derive(Default)]
pub struct ResultCache {
    entries: HashMap<CacheKey, Recall>,
    snapshot: (u64, u64, u64),
    capacity: usize,
}

impl ResultCache {
    fn get(&self, key: &CacheKey) -> Option<&Recall> {
        self.entries.get(key)
    }

    fn put(&mut self, key: CacheKey, value: Recall) {
        let snapshot = (
            key.index_snapshot_generation.0,
            key.index_snapshot_generation.1,
            key.index_revocation_generation,
        );
        if snapshot != self.snapshot || self.entries.len() >= self.capacity {
            self.entries.clear();
            self.snapshot = snapshot;
        }
        if self.capacity > 0 {
            self.entries.insert(key, value);
        }
    }

    /// Cached entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Both targets plus the funnel and its cache.
///
/// Recall takes `&self`: the result cache sits behind a mutex held only
/// to look a result up or store one, never while a recall is computed, so
/// concurrent readers share one retriever (it is `Send + Sync`).
pub struct Retriever {
    /// The lexical target (fed by the `lexical` outbox).
    pub lexical: LexicalIndex,
    /// The vector target (fed by the `vector` outbox).
    pub vector: VectorIndex,
    config: FunnelConfig,
    cache: Mutex<ResultCache>,
}

#[derive(Serialize)]
struct QueryBody<'a> {
    text: &'a str,
    claim_keys: &'a [String],
    eligible_set_sha256: &'a str,
    max_results: usize,
    mode: RetrievalMode,
    config: &'a FunnelConfig,
    feature_release: &'a str,
}

/// The digest of a complete query (text, claim keys, eligible-set digest,
/// result count, mode, fusion parameters and feature release): the
/// `query_sha256` of its relevance receipt, whichever candidate source
/// answered it.
pub fn query_digest(
    query: &RecallQuery<'_>,
    eligible_set_sha256: &str,
    config: &FunnelConfig,
    feature_release: &str,
) -> Result<String, IndexError> {
    Ok(domain_digest(
        QUERY_DOMAIN,
        &QueryBody {
            text: query.text,
            claim_keys: query.claim_keys,
            eligible_set_sha256,
            max_results: query.max_results,
            mode: query.mode,
            config,
            feature_release,
        },
    )?)
}

/// The feature release of a reading: the analyzer's and the embedder's.
pub fn feature_release_of(embedder_release: &str) -> String {
    format!("{ANALYZER_RELEASE}+{embedder_release}")
}

impl Retriever {
    /// A retriever with empty targets.
    pub fn new(embedder: Arc<dyn Embedder>, ann: AnnConfig, config: FunnelConfig) -> Self {
        let cache = ResultCache {
            capacity: config.cache_capacity,
            ..ResultCache::default()
        };
        Retriever {
            lexical: LexicalIndex::new(),
            vector: VectorIndex::new(embedder, ann),
            config,
            cache: Mutex::new(cache),
        }
    }

    /// Replaces the fusion parameters (and empties the cache).
    pub fn set_config(&mut self, config: FunnelConfig) {
        *self
            .cache
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = ResultCache {
            capacity: config.cache_capacity,
            ..ResultCache::default()
        };
        self.config = config;
    }

    /// The fusion parameters.
    pub fn config(&self) -> &FunnelConfig {
        &self.config
    }

    /// The result cache, locked. A poisoned lock is recovered: the cache
    /// holds only finished results, each inserted whole.
    fn cache_lock(&self) -> MutexGuard<'_, ResultCache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops every cached result (a deletion purges the cache before its
    /// receipt names it); returns how many there were.
    pub fn clear_cache(&self) -> usize {
        let mut cache = self.cache_lock();
        let dropped = cache.entries.len();
        cache.entries.clear();
        dropped
    }

    /// Number of cached results.
    pub fn cache_len(&self) -> usize {
        self.cache_lock().len()
    }

    /// Analyzer and embedder releases.
    /// An embedder with a window adds how texts are cut into passages.
    pub fn feature_release(&self) -> String {
        let embedder = self.vector.embedder();
        let mut release = feature_release_of(embedder.release());
        if let Some(window) = embedder.window() {
            release.push_str(&format!(
                "+passages-w{window}-o{}",
                window / crate::embed::PASSAGE_OVERLAP_DIVISOR
            ));
        }
        release
    }

    /// Embeds a query (exposed so callers can time it separately).
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, IndexError> {
        self.vector.embedder().embed(text)
    }

    /// Runs the funnel, embedding the query if vectors are needed.
    pub fn recall(&self, query: &RecallQuery<'_>) -> Result<Recall, IndexError> {
        let vector = match query.mode {
            RetrievalMode::Lexical => None,
            _ => Some(self.embed_query(query.text)?),
        };
        self.recall_embedded(query, vector.as_deref())
    }

    /// The cache key of `query` against the current snapshot.
    pub fn cache_key(&self, query: &RecallQuery<'_>) -> Result<CacheKey, IndexError> {
        self.cache_key_with(query, query.eligible.sha256())
    }

    /// [`Retriever::cache_key`] with the eligible-set digest computed once
    /// by the caller (it goes into the receipt too).
    fn cache_key_with(
        &self,
        query: &RecallQuery<'_>,
        eligible_set_sha256: &str,
    ) -> Result<CacheKey, IndexError> {
        let query_sha256 = query_digest(
            query,
            eligible_set_sha256,
            &self.config,
            &self.feature_release(),
        )?;
        Ok(CacheKey {
            tenant_id: query.tenant_id.to_owned(),
            policy_sha256: query.policy_sha256.to_owned(),
            index_snapshot_generation: (
                self.lexical.snapshot_generation(),
                self.vector.snapshot_generation(),
            ),
            index_revocation_generation: self.lexical.revocation_epoch()
                + self.vector.revocation_epoch(),
            store_revocation_generation: query.revocation_generation,
            selector_release: query.selector_release.to_owned(),
            read_subject: query.read_subject.to_owned(),
            query_sha256,
        })
    }

    /// Runs the funnel with a precomputed query vector (`None` skips the
    /// vector generator).
    pub fn recall_embedded(
        &self,
        query: &RecallQuery<'_>,
        query_vector: Option<&[f32]>,
    ) -> Result<Recall, IndexError> {
        // The eligible set was sealed with its digest once for the read: it
        // names the set in the cache key here and in the relevance receipt.
        let key = self.cache_key_with(query, query.eligible.sha256())?;
        // The lock is held for the lookup and for the insertion only; two
        // readers missing the same key both compute it, identically.
        let cached = self.cache_lock().get(&key).cloned();
        if let Some(mut hit) = cached {
            hit.cache_hit = true;
            return Ok(hit);
        }
        let recall = self.compute(query, query_vector, &key.query_sha256)?;
        let kept = Recall {
            ranked: None,
            ..recall.clone()
        };
        self.cache_lock().put(key, kept);
        Ok(recall)
    }

    fn compute(
        &self,
        query: &RecallQuery<'_>,
        query_vector: Option<&[f32]>,
        query_sha256: &str,
    ) -> Result<Recall, IndexError> {
        // The lexical docs serve BM25, claim keys and neighbours; a pure
        // vector read without those never resolves them.
        let needed = lexical_needed(&self.config, query);
        let mut source = MemorySource::new(&self.lexical, &self.vector, query, needed);
        let candidates = gather(&mut source, &self.config, query, query_vector)?;
        fuse(
            &self.config,
            query,
            candidates,
            &source,
            query_sha256,
            self.feature_release(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HashEmbedder;
    use crate::target::{IndexTarget, PublishMessage, ScopeKeys};
    use mosaic_harness::MemoryKind;
    use mosaic_harness::canonical::sha256_hex;
    use mosaic_harness::memory_scope::{EligibleEntry, EligibleSet};
    use std::collections::BTreeMap;

    const POLICY: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    fn loaded(lines: &[&str]) -> (Retriever, SealedEligibleSet) {
        let mut r = Retriever::new(
            Arc::new(HashEmbedder::new(64)),
            AnnConfig::default(),
            FunnelConfig::default(),
        );
        let mut entries = Vec::new();
        for (i, text) in lines.iter().enumerate() {
            let m = line(i, 1, text);
            r.lexical.publish(&m).unwrap();
            r.vector.publish(&m).unwrap();
            entries.push(EligibleEntry {
                record_id: m.record_id.clone(),
                content_sha256: sha256_hex(text.as_bytes()),
            });
        }
        let eligible = SealedEligibleSet::seal(EligibleSet {
            scope_commitments: Vec::new(),
            read_context_sha256: sha256_hex(b"read"),
            entries,
        })
        .unwrap();
        (r, eligible)
    }

    /// Line `i` of a conversation at `generation`.
    fn line(i: usize, generation: u64, text: &str) -> PublishMessage {
        PublishMessage {
            record_id: format!("line-{i}"),
            generation,
            revocation_generation: 0,
            scope: ScopeKeys {
                tenant_id: "tenant".into(),
                policy_sha256: POLICY.into(),
                subject_key: "principal:p".into(),
                kind: MemoryKind::Episodic,
            },
            created_at_unix_ms: 1_000 + i as u64,
            claim_keys: Vec::new(),
            text: text.to_owned(),
        }
    }

    /// The score `recall`'s receipt gives `id`.
    fn score(recall: &Recall, id: &str) -> u64 {
        recall
            .receipt
            .results
            .iter()
            .find(|x| x.record_id == id)
            .map(|x| x.score)
            .unwrap()
    }

    fn ask(r: &Retriever, eligible: &SealedEligibleSet, text: &str, mode: RetrievalMode) -> Recall {
        let q = RecallQuery {
            tenant_id: "tenant",
            policy_sha256: POLICY,
            selector_release: "test",
            read_subject: "p",
            revocation_generation: 0,
            text,
            claim_keys: &[],
            eligible,
            max_results: 10,
            mode,
        };
        r.recall(&q).unwrap()
    }

    const LINES: [&str; 3] = [
        "[8 May, 2023] Caroline: Melanie went hiking and hiking and hiking at the lake.",
        "[8 May, 2023] Melanie: I hiked.",
        "[8 May, 2023] Joanna: we go on Friday.",
    ];

    #[test]
    fn the_speaker_prior_prefers_the_lines_of_a_speaker_the_query_names() {
        let (mut r, eligible) = loaded(&LINES);
        let question = "Where did Melanie go hiking?";
        // Reciprocal ranks keep neighbouring scores close. Without the
        // prior, the line that talks about Melanie most wins.
        r.set_config(FunnelConfig {
            speaker_permille: 0,
            lexical_window_permille: 0,
            fusion: Fusion::ReciprocalRank,
            ..FunnelConfig::default()
        });
        let plain = ask(&r, &eligible, question, RetrievalMode::Lexical);
        assert_eq!(plain.record_ids(), ["line-0", "line-1", "line-2"]);
        assert!(plain.explanations.iter().all(|e| e.speaker_bonus == 0));
        let before: BTreeMap<&str, u64> = plain
            .receipt
            .results
            .iter()
            .map(|x| (x.record_id.as_str(), x.score))
            .collect();

        // With it, Melanie's own line gains half its score and comes first;
        // a line that only mentions her, or another speaker's, gains nothing.
        r.set_config(FunnelConfig {
            lexical_window_permille: 0,
            fusion: Fusion::ReciprocalRank,
            ..FunnelConfig::default()
        });
        let recall = ask(&r, &eligible, question, RetrievalMode::Lexical);
        assert_eq!(recall.record_ids(), ["line-1", "line-0", "line-2"]);
        for (result, e) in recall.receipt.results.iter().zip(&recall.explanations) {
            let old = before[result.record_id.as_str()];
            let bonus = if result.record_id == "line-1" {
                old / 2
            } else {
                0
            };
            assert_eq!(e.speaker_bonus, bonus, "{}", result.record_id);
            assert_eq!(result.score, old + bonus, "{}", result.record_id);
        }
        assert!(recall.explanations[0].speaker_bonus > 0);
    }

    #[test]
    fn the_speaker_prior_ignores_dates_and_unnamed_speakers() {
        let (r, eligible) = loaded(&LINES);
        for mode in [RetrievalMode::Lexical, RetrievalMode::Hybrid] {
            // "May" is in every line's date prefix, not in a speaker label.
            let recall = ask(&r, &eligible, "what happened in May 2023", mode);
            assert!(recall.explanations.iter().all(|e| e.speaker_bonus == 0));
            // No speaker named: no bonus, whatever matches.
            let recall = ask(&r, &eligible, "hiking at the lake", mode);
            assert!(!recall.record_ids().is_empty());
            assert!(recall.explanations.iter().all(|e| e.speaker_bonus == 0));
        }
    }

    // The last line is the weakest match of every query below: the floor
    // of the lexical list, which scores 0 in standard-score fusion and so
    // gains no multiplicative bonus.
    const ROLE_LINES: [&str; 5] = [
        "[1 March, 2025] user: Our shop is hosted on Heroku.",
        "[1 March, 2025] assistant: Heroku hosting works; the shop's files vanish on restart.",
        "[20 April, 2025] user: We moved the shop hosting to Fly.io.",
        "[20 April, 2025] assistant: Fly.io hosting suits the shop.",
        "[21 April, 2025] user: A long unrelated note about bread, flour, ovens and the shop.",
    ];

    #[test]
    fn role_labels_are_chosen_by_the_questions_person_not_by_its_words() {
        let (r, eligible) = loaded(&ROLE_LINES);
        let bonus = |text: &str| -> Vec<(String, bool)> {
            let recall = ask(&r, &eligible, text, RetrievalMode::Lexical);
            let mut v: Vec<(String, bool)> = recall
                .explanations
                .iter()
                .map(|e| (e.record_id.clone(), e.speaker_bonus > 0))
                .collect();
            v.sort();
            v
        };
        fn user_lines(v: &[(String, bool)]) -> Vec<&str> {
            v.iter()
                .filter(|(_, b)| *b)
                .map(|(id, _)| id.as_str())
                .collect()
        }
        // First person: the user's lines.
        assert_eq!(
            user_lines(&bonus("where is my shop hosting?")),
            ["line-0", "line-2"]
        );
        // Second person only: the assistant's lines.
        assert_eq!(
            user_lines(&bonus("what did you say about shop hosting?")),
            ["line-1", "line-3"]
        );
        // Naming a role is not naming a speaker, and no person, no prior.
        assert!(user_lines(&bonus("shop hosting assistant user")).is_empty());
        // Switched off, a role label is an ordinary label again.
        let mut r = r;
        r.set_config(FunnelConfig {
            speaker_roles: false,
            ..FunnelConfig::default()
        });
        let recall = ask(
            &r,
            &eligible,
            "what did the user say about hosting",
            RetrievalMode::Lexical,
        );
        let named: Vec<&str> = recall
            .explanations
            .iter()
            .filter(|e| e.speaker_bonus > 0)
            .map(|e| e.record_id.as_str())
            .collect();
        assert!(
            named.contains(&"line-0") && named.contains(&"line-2"),
            "{named:?}"
        );
        assert!(!named.contains(&"line-1"), "{named:?}");
    }

    /// Lines `(speaker, text)` of one subject, in time order, with the
    /// default configuration and the hashing embedder (64 dimensions).
    fn updates(lines: &[&str]) -> (Retriever, SealedEligibleSet) {
        loaded(lines)
    }

    fn order(recall: &Recall, ids: &[&str]) -> Vec<String> {
        recall
            .record_ids()
            .iter()
            .filter(|id| ids.contains(id))
            .map(|id| id.to_string())
            .collect()
    }

    #[test]
    fn the_newer_of_two_values_ranks_first_when_its_line_states_the_change() {
        // Pairs the hashing embedder finds alike (their words overlap): its
        // similarity is word overlap, and the default band (0.6) is read
        // from MiniLM, which finds "I live in Lisbon" and "I moved to Porto"
        // alike (0.69) where hashing does not (0.48 here).
        let cases: [(&[&str], &str, &str, &str); 5] = [
            (
                &[
                    "user: I live in Lisbon.",
                    "user: Green tea is my favourite drink.",
                    "user: I moved, I live in Porto now.",
                ],
                "where does the user live",
                "line-2",
                "line-0",
            ),
            (
                &[
                    "user: I live in Montreal.",
                    "user: Green tea is my favourite drink.",
                    "user: I moved, I live in Vancouver now.",
                ],
                "where does the user live",
                "line-2",
                "line-0",
            ),
            (
                &[
                    "user: I work as a baker at the corner bakery.",
                    "user: I quit the bakery, I work as a nurse at the hospital now.",
                ],
                "what is my work",
                "line-1",
                "line-0",
            ),
            (
                &[
                    "user: Our cat is called Luna.",
                    "user: We renamed our cat, she is called Milo now.",
                ],
                "what is our cat called",
                "line-1",
                "line-0",
            ),
            (
                &[
                    "user: My budget for the trip is 2000 euros.",
                    "user: My budget for the trip is 3000 euros now.",
                ],
                "what is my budget for the trip",
                "line-1",
                "line-0",
            ),
        ];
        for (lines, question, newer, older) in cases {
            let (mut r, eligible) = updates(lines);
            r.set_config(FunnelConfig {
                update_head: 0,
                ..FunnelConfig::default()
            });
            // Without update pairs the older line, which says more of the
            // question's words, ranks first.
            let before = ask(&r, &eligible, question, RetrievalMode::Hybrid);
            assert_eq!(
                order(&before, &[newer, older]),
                [older, newer],
                "{question}: {:?}",
                before.receipt.results
            );
            for mode in [
                RetrievalMode::Hybrid,
                RetrievalMode::Lexical,
                RetrievalMode::Vector,
            ] {
                r.set_config(FunnelConfig {
                    update_head: 0,
                    ..FunnelConfig::default()
                });
                let mut plain: Vec<String> = ask(&r, &eligible, question, mode)
                    .record_ids()
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                r.set_config(FunnelConfig::default());
                let after = ask(&r, &eligible, question, mode);
                let mut ids: Vec<String> =
                    after.record_ids().iter().map(|s| s.to_string()).collect();
                // Which records are returned does not change, only their order.
                plain.sort();
                ids.sort();
                assert_eq!(plain, ids, "{question} {mode:?}");
                if mode == RetrievalMode::Lexical {
                    // No vector list, no similarity: no update pairs.
                    assert!(after.explanations.iter().all(|e| e.update_lift == 0));
                    continue;
                }
                if !(ids.iter().any(|i| i == newer) && ids.iter().any(|i| i == older)) {
                    continue;
                }
                assert_eq!(
                    order(&after, &[newer, older]),
                    [newer, older],
                    "{question} {mode:?}: {:?}",
                    after.receipt.results
                );
                // Placed one point above the older value, no further.
                let lifted = after
                    .explanations
                    .iter()
                    .find(|e| e.record_id == newer)
                    .unwrap();
                if lifted.update_lift > 0 {
                    assert_eq!(score(&after, newer), score(&after, older) + 1);
                }
            }
        }
    }

    #[test]
    fn values_that_are_not_an_update_keep_their_relevance_order() {
        // Neither line states a change: two values that both hold.
        let (r, eligible) = updates(&[
            "user: I love hiking in the Alps.",
            "user: I also love hiking in Norway with my friends on long summer weekends.",
        ]);
        let recall = ask(
            &r,
            &eligible,
            "where do I love hiking",
            RetrievalMode::Hybrid,
        );
        assert_eq!(order(&recall, &["line-0", "line-1"]), ["line-0", "line-1"]);
        assert!(recall.explanations.iter().all(|e| e.update_lift == 0));

        // Another speaker's newer line is not the user's new value.
        let (r, eligible) = updates(&[
            "user: I live in Lisbon, in a flat near the river.",
            "assistant: Many people moved to Porto, flats near the river are cheaper now.",
        ]);
        let recall = ask(
            &r,
            &eligible,
            "where is the user's flat near the river",
            RetrievalMode::Hybrid,
        );
        assert_eq!(order(&recall, &["line-0", "line-1"]), ["line-0", "line-1"]);
        assert!(recall.explanations.iter().all(|e| e.update_lift == 0));

        // A question about the past wants the older value as it ranks.
        let (r, eligible) = updates(&[
            "user: I live in Lisbon.",
            "user: I moved, I live in Porto now.",
        ]);
        for question in [
            "where did the user live before",
            "where did the user live first",
            "when did the user live in Lisbon",
        ] {
            let recall = ask(&r, &eligible, question, RetrievalMode::Hybrid);
            assert!(
                recall.explanations.iter().all(|e| e.update_lift == 0),
                "{question}"
            );
        }

        // Stored vectors less alike than the band are not a pair (the
        // default band pairs these two lines: see the test above).
        let (mut r, eligible) = updates(&[
            "user: I live in Lisbon.",
            "user: I moved, I live in Porto now.",
        ]);
        r.set_config(FunnelConfig {
            update_band_permille: 1_000,
            ..FunnelConfig::default()
        });
        let recall = ask(
            &r,
            &eligible,
            "where does the user live",
            RetrievalMode::Hybrid,
        );
        assert_eq!(order(&recall, &["line-0", "line-1"]), ["line-0", "line-1"]);
        assert!(recall.explanations.iter().all(|e| e.update_lift == 0));
    }

    #[test]
    fn a_chain_of_changes_ends_newest_first() {
        let (r, eligible) = updates(&[
            "user: My home is in Lisbon.",
            "user: My home is in Porto now.",
            "user: I moved again, my home is in Braga now.",
        ]);
        let recall = ask(&r, &eligible, "where is my home", RetrievalMode::Hybrid);
        assert_eq!(
            order(&recall, &["line-0", "line-1", "line-2"]),
            ["line-2", "line-1", "line-0"],
            "{:?}",
            recall.receipt.results
        );
    }

    #[test]
    fn recency_favours_later_records_only_for_questions_about_now() {
        let (mut r, eligible) = loaded(&ROLE_LINES);
        r.set_config(FunnelConfig {
            speaker_roles: false,
            fusion: Fusion::ReciprocalRank,
            ..FunnelConfig::default()
        });
        // Without a current-state cue, no recency bonus at all.
        let plain = ask(&r, &eligible, "shop hosting", RetrievalMode::Lexical);
        assert!(plain.explanations.iter().all(|e| e.recency_bonus == 0));
        let now = ask(
            &r,
            &eligible,
            "where is the shop hosting now",
            RetrievalMode::Lexical,
        );
        let by_id: BTreeMap<&str, &Explanation> = now
            .explanations
            .iter()
            .map(|e| (e.record_id.as_str(), e))
            .collect();
        // The oldest candidate gains nothing, the newest a quarter, the
        // others in proportion to their place in time (line-3 at 3/4).
        assert_eq!(by_id["line-0"].recency_bonus, 0);
        for (id, place) in [("line-4", 1.0), ("line-3", 0.75)] {
            let before = score(&plain, id);
            assert_eq!(
                by_id[id].recency_bonus,
                (before as f64 * 0.25 * place).round() as u64,
                "{id}"
            );
            assert_eq!(score(&now, id), before + by_id[id].recency_bonus, "{id}");
        }
        // A question naming its own date is not about now.
        let dated = ask(
            &r,
            &eligible,
            "where was the shop hosting currently in March 2025",
            RetrievalMode::Lexical,
        );
        assert!(dated.explanations.iter().all(|e| e.recency_bonus == 0));
        mosaic_harness::memory_scope::verify_relevance_receipt(
            &now.relevance_input(&eligible.to_set()).unwrap(),
            &now.receipt,
        )
        .unwrap();
    }

    #[test]
    fn a_question_asking_when_prefers_lines_that_place_it_in_time() {
        const LINES: [&str; 5] = [
            "[3 July, 2023] Caroline: The pride parade was full of energy and love.",
            "[3 July, 2023] Caroline: I went to a parade last Friday, it was amazing and I felt at home.",
            "[3 July, 2023] Melanie: Pride parades are so much fun, the parade music too.",
            "[3 July, 2023] Caroline: The parade had a great pride choir.",
            "[3 July, 2023] Melanie: Work, the kids, the garden, the weather, the food, a parade.",
        ];
        let (mut r, eligible) = loaded(&LINES);
        r.set_config(FunnelConfig {
            speaker_permille: 0,
            ..FunnelConfig::default()
        });
        let timed = |recall: &Recall| -> Vec<String> {
            recall
                .explanations
                .iter()
                .filter(|e| e.time_bonus > 0)
                .map(|e| e.record_id.clone())
                .collect()
        };
        // Without the prior the line that says when is not first.
        let mut off = r.config().clone();
        off.time_permille = 0;
        r.set_config(off.clone());
        let plain = ask(
            &r,
            &eligible,
            "When did Caroline go to the pride parade?",
            RetrievalMode::Lexical,
        );
        assert_ne!(plain.record_ids()[0], "line-1", "{:?}", plain.explanations);
        assert!(timed(&plain).is_empty());
        // With it, that line (and only it) gains half its score and leads.
        r.set_config(FunnelConfig {
            time_permille: 500,
            ..off
        });
        let when = ask(
            &r,
            &eligible,
            "When did Caroline go to the pride parade?",
            RetrievalMode::Lexical,
        );
        assert_eq!(timed(&when), vec!["line-1".to_owned()]);
        assert_eq!(when.record_ids()[0], "line-1");
        assert_eq!(score(&when, "line-1"), score(&plain, "line-1") * 3 / 2);
        // A question that does not ask when gets no time bonus.
        let what = ask(
            &r,
            &eligible,
            "What was the pride parade like?",
            RetrievalMode::Lexical,
        );
        assert!(timed(&what).is_empty());
        mosaic_harness::memory_scope::verify_relevance_receipt(
            &when.relevance_input(&eligible.to_set()).unwrap(),
            &when.receipt,
        )
        .unwrap();
    }

    #[test]
    fn standard_score_fusion_keeps_each_lists_order_and_weighs_a_standout() {
        let (mut r, eligible) = loaded(&LINES);
        r.set_config(FunnelConfig {
            speaker_permille: 0,
            ..FunnelConfig::default()
        });
        // One list alone: its order is kept below the mean too (no ties at
        // zero broken by record id).
        let lexical = ask(
            &r,
            &eligible,
            "Melanie hiking lake Friday",
            RetrievalMode::Lexical,
        );
        let scores: Vec<u64> = lexical.receipt.results.iter().map(|x| x.score).collect();
        assert!(scores.windows(2).all(|w| w[0] > w[1]), "{scores:?}");
        assert_eq!(
            *scores.last().unwrap(),
            0,
            "the lowest candidate is the floor"
        );
    }

    #[test]
    fn an_eligible_set_resolved_once_follows_every_change_of_the_index() {
        let (mut r, eligible) = loaded(&LINES);
        let found = |r: &Retriever, text: &str, mode| -> Vec<String> {
            ask(r, &eligible, text, mode)
                .receipt
                .results
                .iter()
                .map(|x| x.record_id.clone())
                .collect()
        };
        for mode in [RetrievalMode::Lexical, RetrievalMode::Vector] {
            assert!(found(&r, "Melanie hiking lake", mode).contains(&"line-0".to_owned()));
        }
        // The same record published again at a newer generation, with the
        // same text (so the same eligible set): a new doc in each target,
        // which a resolution kept from before would not name.
        let again = line(0, 2, LINES[0]);
        r.lexical.publish(&again).unwrap();
        r.vector.publish(&again).unwrap();
        for mode in [RetrievalMode::Lexical, RetrievalMode::Vector] {
            assert!(
                found(&r, "Caroline Melanie hiking", mode).contains(&"line-0".to_owned()),
                "{mode:?}"
            );
        }
        // Tombstoned: never found again through the same set.
        r.lexical.tombstone("line-0", 3).unwrap();
        r.vector.tombstone("line-0", 3).unwrap();
        for mode in [RetrievalMode::Lexical, RetrievalMode::Vector] {
            assert!(!found(&r, "Melanie hiking at the lake", mode).contains(&"line-0".to_owned()));
        }
    }

    #[test]
    fn the_result_cache_keeps_receipts_not_the_reads_eligible_set() {
        let (r, eligible) = loaded(&LINES);
        let first = ask(&r, &eligible, "Melanie hiking", RetrievalMode::Hybrid);
        let again = ask(&r, &eligible, "Melanie hiking", RetrievalMode::Hybrid);
        assert!(!first.cache_hit && again.cache_hit);
        // The computed read keeps its scores (so its input can be
        // rebuilt); the cache entry keeps the receipt only, so it grows
        // with neither the eligible set nor the candidates.
        let input = first.relevance_input(&eligible.to_set()).unwrap();
        mosaic_harness::memory_scope::verify_relevance_receipt(&input, &first.receipt).unwrap();
        assert!(again.ranked.is_none());
        assert!(again.relevance_input(&eligible.to_set()).is_none());
        assert_eq!(again.receipt, first.receipt);
        assert_eq!(again.explanations, first.explanations);
    }

    #[test]
    fn a_receipt_is_verified_against_what_was_ranked_not_against_itself() {
        use mosaic_harness::memory_scope::verify_relevance_receipt;
        let (r, eligible) = loaded(&LINES);
        let recall = ask(&r, &eligible, "Melanie hiking", RetrievalMode::Hybrid);
        let input = recall.relevance_input(&eligible.to_set()).unwrap();
        verify_relevance_receipt(&input, &recall.receipt).unwrap();
        // Each field the receipt states about the ranking, changed in the
        // recall's own receipt and resealed (so its digest still checks
        // out): the input is rebuilt from what was ranked, not from that
        // receipt, so every change is caught.
        type Forgery = (&'static str, fn(&mut RelevanceReceipt));
        let forgeries: [Forgery; 4] = [
            ("query", |x| x.query_sha256 = "0".repeat(64)),
            ("features", |x| x.feature_release.push_str("-other")),
            ("ranker", |x| x.ranker_release.push_str("-other")),
            ("max results", |x| x.max_results += 1),
        ];
        for (what, forge) in forgeries {
            let mut forged = recall.clone();
            forge(&mut forged.receipt);
            forged.receipt.receipt_sha256 = forged.receipt.compute_digest().unwrap();
            let input = forged.relevance_input(&eligible.to_set()).unwrap();
            assert!(
                verify_relevance_receipt(&input, &forged.receipt).is_err(),
                "a receipt with another {what} verified"
            );
        }
    }

    #[test]
    fn the_speaker_prior_keeps_the_receipt_verifiable() {
        let (r, eligible) = loaded(&LINES);
        let recall = ask(&r, &eligible, "Melanie hiking", RetrievalMode::Hybrid);
        mosaic_harness::memory_scope::verify_relevance_receipt(
            &recall.relevance_input(&eligible.to_set()).unwrap(),
            &recall.receipt,
        )
        .unwrap();
        assert_eq!(recall.receipt.ranker_release, RANKER_RELEASE);
    }
}
