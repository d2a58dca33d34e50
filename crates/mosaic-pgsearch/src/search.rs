//! One search interface over the in-memory targets of `mosaic-index` and
//! the PostgreSQL targets of this crate, so one conformance suite runs
//! against both.

use std::collections::BTreeSet;

use mosaic_index::{Eligible, IndexTarget, LexicalIndex, VectorIndex};

use crate::error::PgSearchResult;

/// Scores are fixed-point: millionths of the backend's float score, so that
/// ordering and ties (broken by record id) are exact and reproducible.
pub const SCORE_SCALE: f64 = 1_000_000.0;

/// A scored hit with a fixed-point score (higher is better).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankedHit {
    /// The record.
    pub record_id: String,
    /// `round(score * SCORE_SCALE)`.
    pub score: i64,
}

/// Converts a float score to [`RankedHit::score`].
pub fn fixed_point(score: f64) -> i64 {
    if score.is_finite() {
        // `as` saturates; scores are small.
        (score * SCORE_SCALE).round() as i64
    } else {
        0
    }
}

/// Best first, equal scores by record id.
pub fn sort_ranked(hits: &mut [RankedHit]) {
    hits.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then_with(|| a.record_id.cmp(&b.record_id))
    });
}

/// What the suite asks of every target besides [`IndexTarget`].
pub trait SearchTarget: IndexTarget {
    /// The acknowledged generation of a live record (`None` when absent or
    /// tombstoned).
    fn live_generation_of(&mut self, record_id: &str) -> PgSearchResult<Option<u64>>;
}

/// Full-text search inside an eligible set.
pub trait LexicalSearch: SearchTarget {
    /// Top-`k` eligible records of `tenant_id` under `policy_sha256` for
    /// `query`, best first, ties by record id. Records without a matching
    /// term are not returned.
    fn search_text(
        &mut self,
        query: &str,
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
    ) -> PgSearchResult<Vec<RankedHit>>;
}

/// Nearest-neighbour search inside an eligible set.
pub trait VectorSearch: SearchTarget {
    /// Top-`k` eligible records of `tenant_id` under `policy_sha256` by
    /// cosine similarity to `query`, best first, ties by record id.
    fn search_embedding(
        &mut self,
        query: &[f32],
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
    ) -> PgSearchResult<Vec<RankedHit>>;
}

fn ranked(hits: Vec<mosaic_index::Hit>) -> Vec<RankedHit> {
    let mut out: Vec<RankedHit> = hits
        .into_iter()
        .map(|h| RankedHit {
            record_id: h.record_id,
            score: fixed_point(f64::from(h.score)),
        })
        .collect();
    sort_ranked(&mut out);
    out
}

impl SearchTarget for LexicalIndex {
    fn live_generation_of(&mut self, record_id: &str) -> PgSearchResult<Option<u64>> {
        Ok(self.live_generation(record_id))
    }
}

impl LexicalSearch for LexicalIndex {
    fn search_text(
        &mut self,
        query: &str,
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
    ) -> PgSearchResult<Vec<RankedHit>> {
        Ok(ranked(
            self.search(query, eligible, tenant_id, policy_sha256, k)
                .into_iter()
                .filter(|h| h.score > 0.0)
                .collect(),
        ))
    }
}

impl SearchTarget for VectorIndex {
    fn live_generation_of(&mut self, record_id: &str) -> PgSearchResult<Option<u64>> {
        Ok(self.live_generation(record_id))
    }
}

impl VectorSearch for VectorIndex {
    fn search_embedding(
        &mut self,
        query: &[f32],
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
    ) -> PgSearchResult<Vec<RankedHit>> {
        let (_, hits) = self.search_vector(query, eligible, tenant_id, policy_sha256, k);
        Ok(ranked(hits))
    }
}

/// The eligibility as SQL parameters: exact record ids, or subject keys and
/// kind names.
pub(crate) enum EligibleParams {
    Records(Vec<String>),
    Scope(Vec<String>, Vec<String>),
}

impl EligibleParams {
    pub(crate) fn of(eligible: &Eligible<'_>) -> Self {
        match eligible {
            Eligible::Records(ids) => EligibleParams::Records(
                ids.iter()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect(),
            ),
            Eligible::Scope(predicate) => EligibleParams::Scope(
                predicate.subject_keys.iter().cloned().collect(),
                predicate
                    .kinds
                    .iter()
                    .map(|k| k.as_str().to_owned())
                    .collect(),
            ),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match self {
            EligibleParams::Records(ids) => ids.is_empty(),
            EligibleParams::Scope(subjects, kinds) => subjects.is_empty() || kinds.is_empty(),
        }
    }
}
