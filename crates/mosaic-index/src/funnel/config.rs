//! The funnel's parameters: which candidate generators run, how their
//! lists are fused, and the weights and priors of the fusion.

use serde::{Deserialize, Serialize};

use crate::lexical::{BM25_B_PERMILLE, BM25_K1_PERMILLE};

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
