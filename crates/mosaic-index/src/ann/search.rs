//! Searching: exact scans (byte-pruned, and plain f32), the filtered
//! graph search, and the planner that picks one per query.

use std::collections::BinaryHeap;

use super::graph::Scored;
use super::vectors::{Probe, byte_bound, byte_error};
use super::{AnnConfig, AnnIndex, SearchPlan, dot};
use crate::scope::DocSet;
use crate::target::DocId;

/// The beam width of a filtered graph search over `eligible` of `live`
/// docs (see [`AnnIndex::search_ef`]).
pub(super) fn search_ef(config: &AnnConfig, live: usize, eligible: usize, k: usize) -> usize {
    let base = config.ef_search.max(k);
    let live = live.max(1);
    let widened = base.saturating_mul(live).div_ceil(eligible.clamp(1, live));
    widened
        .min(base.saturating_mul(config.max_ef_widening.max(1)))
        .max(base)
}

/// Estimated (scan, graph) costs (see [`AnnIndex::plan_costs`]) for an
/// index of `live` docs of `dim` dimensions with `levels` graph layers.
pub(super) fn plan_costs(
    config: &AnnConfig,
    dim: usize,
    live: usize,
    levels: usize,
    eligible: usize,
) -> (f64, f64) {
    let dim = dim as f64;
    let scan = eligible as f64 * dim;
    let selectivity = (eligible.max(1) as f64 / live.max(1) as f64).min(1.0);
    let ef = search_ef(config, live, eligible, 10) as f64;
    let graph = ef * config.m0 as f64 * levels as f64 * dim / selectivity
        * config.graph_cost_permille as f64
        / 1000.0;
    (scan, graph)
}

/// What bounds how far a query's exact score of a doc may lie from its
/// byte score (see [`AnnIndex::exact`]).
pub(super) struct QueryBounds {
    q_off: f32,
    q_bytes: f32,
    q_len: f32,
    rounding: f32,
}

impl QueryBounds {
    /// `(a, e)`: `doc`'s byte score `a` ([`AnnIndex::byte_score`]) and a
    /// bound `e` on how far its exact score lies from `a`, the rounding of
    /// both included.
    #[inline]
    pub(super) fn of(&self, ann: &AnnIndex, doc: DocId, a: f32) -> (f32, f32) {
        let (x_off, x_len) = ann.byte_bounds[doc as usize];
        let e = byte_bound((self.q_off, self.q_bytes), (x_off, x_len));
        // The exact score's rounding (|x| is at most ||x'|| +
        // ||x - x'||), then that of `a` and of the sums below.
        let slack = self.rounding * self.q_len * (x_len + x_off) + 1e-6 * (a.abs() + e);
        (a, e + slack + f32::MIN_POSITIVE)
    }
}

impl AnnIndex {
    /// Exact top-`k` over `docs`, the same docs and scores as scoring
    /// every eligible doc in f32 ([`AnnIndex::exact_f32`]), reading a
    /// quarter of the bytes: a first pass over the eligible docs' bytes
    /// (in doc order, so in memory order) gives each a byte score `a` and
    /// a bound `e` on how far its exact score can lie from it; with `t`
    /// the `k`-th largest `a - e`, at least `k` docs score `t` or more,
    /// so no doc with `a + e < t` is among the best `k`, and only the
    /// others are scored exactly. The bound, for a query `q` of bytes
    /// `q'` and a doc `x` of bytes `x'`:
    /// `|q.x - q'.x'| <= ||q|| ||x - x'|| + ||q - q'|| ||x'||`, plus
    /// the rounding of both products. When `docs` holds at most `k` live
    /// docs, or the query is not finite, every doc is scored exactly.
    pub fn exact(&self, q: &[f32], docs: &DocSet, k: usize) -> Vec<(DocId, f32)> {
        if k == 0 {
            return Vec::new();
        }
        let eligible = self.eligible(docs);
        match self.byte_candidates(q, &eligible, k) {
            Some(candidates) => self.best(q, candidates.into_iter(), k),
            None => self.best(q, eligible.into_iter(), k),
        }
    }

    /// The docs of `eligible` (live, in doc order) that may be among the
    /// best `k` by exact score (see [`AnnIndex::exact`]); `None` when
    /// every doc is to be scored: `eligible` holds at most `k` docs, or
    /// the query is not finite.
    pub(super) fn byte_candidates(
        &self,
        q: &[f32],
        eligible: &[DocId],
        k: usize,
    ) -> Option<Vec<DocId>> {
        let probe = Probe::of(q);
        if k == 0 || eligible.len() <= k {
            return None;
        }
        let bounds = self.query_bounds(q, &probe)?;
        let mut scored: Vec<(f32, f32)> = Vec::with_capacity(eligible.len());
        self.each_product(&probe, eligible, |d, p| {
            scored.push(bounds.of(self, d, self.byte_score(&probe, d, p)));
        });
        let mut lows: Vec<f32> = scored.iter().map(|(a, e)| a - e).collect();
        let (_, &mut t, _) = lows.select_nth_unstable_by(k - 1, |x, y| y.total_cmp(x));
        Some(
            eligible
                .iter()
                .zip(&scored)
                .filter(|(_, (a, e))| {
                    let high = a + e;
                    !high.is_finite() || high.total_cmp(&t).is_ge()
                })
                .map(|(&d, _)| d)
                .collect(),
        )
    }

    /// A doc's byte score from its bytes' integer product `product` with
    /// the probe's: the score the graph walks on ([`AnnIndex::approx`]),
    /// the same operations, so the same float.
    #[inline]
    pub(super) fn byte_score(&self, probe: &Probe, doc: DocId, product: i32) -> f32 {
        product as f32 * (probe.scale * self.scales[doc as usize])
    }

    /// What bounds the exact scores of `q` (probed as `probe`) given its
    /// docs' byte scores; `None` when the query is not finite.
    pub(super) fn query_bounds(&self, q: &[f32], probe: &Probe) -> Option<QueryBounds> {
        let (q_off, q_bytes) = byte_error(q, &probe.codes, probe.scale);
        if !q_off.is_finite() || !q_bytes.is_finite() {
            return None;
        }
        Some(QueryBounds {
            q_off,
            q_bytes,
            // ||q|| is at most ||q'|| + ||q - q'||.
            q_len: q_bytes + q_off,
            // A sum of `dim` products in f32, in any order, lies within
            // `dim` units of its last place (2^-23 each, twice the
            // rounding) of |q||x| from the exact sum.
            rounding: (self.dim as f32 + 2.0) * f32::EPSILON,
        })
    }

    /// [`AnnIndex::exact`] by scoring every eligible doc in f32: the
    /// reference it must equal.
    pub fn exact_f32(&self, q: &[f32], docs: &DocSet, k: usize) -> Vec<(DocId, f32)> {
        if k == 0 {
            return Vec::new();
        }
        self.best(q, self.eligible(docs).into_iter(), k)
    }

    /// The live docs of `docs`, in doc order.
    pub(super) fn eligible(&self, docs: &DocSet) -> Vec<DocId> {
        let mut out = Vec::with_capacity(docs.len().min(self.live));
        for (w, (&eligible, &live)) in docs.words().iter().zip(&self.live_bits).enumerate() {
            let mut word = eligible & live;
            while word != 0 {
                out.push((w * 64) as DocId + word.trailing_zeros());
                word &= word - 1;
            }
        }
        out
    }

    /// The best `k` of `docs` by exact f32 score, best first (ties by doc
    /// id).
    fn best(&self, q: &[f32], docs: impl Iterator<Item = DocId>, k: usize) -> Vec<(DocId, f32)> {
        let mut top: BinaryHeap<std::cmp::Reverse<Scored>> = BinaryHeap::with_capacity(k + 1);
        for doc in docs {
            let s = Scored(dot(q, self.vector(doc)), doc);
            if top.len() < k {
                top.push(std::cmp::Reverse(s));
            } else if top.peek().is_some_and(|worst| s > worst.0) {
                top.pop();
                top.push(std::cmp::Reverse(s));
            }
        }
        let mut out: Vec<Scored> = top.into_iter().map(|r| r.0).collect();
        out.sort_by(|a, b| b.cmp(a));
        out.into_iter().map(|s| (s.1, s.0)).collect()
    }

    /// Graph top-`k` with the filter applied during traversal, its beam
    /// widened for the eligible fraction (see [`AnnIndex::search_ef`]).
    pub fn graph_filtered(&self, q: &[f32], docs: Option<&DocSet>, k: usize) -> Vec<(DocId, f32)> {
        let ef = match docs {
            Some(d) => self.search_ef(d.len(), k),
            None => self.config.ef_search.max(k),
        };
        self.graph_with_ef(q, docs, k, ef)
    }

    fn graph_with_ef(
        &self,
        q: &[f32],
        docs: Option<&DocSet>,
        k: usize,
        ef: usize,
    ) -> Vec<(DocId, f32)> {
        self.graph_search(q, docs, k, ef).0
    }

    /// The walk of a graph search: the (up to) `ef` best docs of the
    /// bottom layer passing `docs`, by byte score, best first.
    fn walk(&self, probe: &Probe, docs: Option<&DocSet>, k: usize, ef: usize) -> Vec<Scored> {
        let Some(mut entry) = self.entry else {
            return Vec::new();
        };
        for l in (1..=self.max_level).rev() {
            entry = self.greedy(probe, entry, l);
        }
        self.search_layer(probe, &[entry], ef.max(k), 0, docs, None)
    }

    /// The pending docs passing `docs`, scored exactly: they are not in
    /// the graph, so a graph search scans them.
    fn pending_scored(&self, q: &[f32], docs: Option<&DocSet>) -> Vec<Scored> {
        self.pending
            .iter()
            .filter(|d| docs.is_none_or(|f| f.contains(**d)))
            .map(|&d| Scored(dot(q, self.vector(d)), d))
            .collect()
    }

    /// [`AnnIndex::graph_with_ef`], and how many of the walked docs it
    /// scored exactly. The walk's scores are the bytes'; the search
    /// returns the best `k` of the walked and pending docs by exact score,
    /// as scoring every walked doc exactly would, but scores only the
    /// walked docs that can be among them: with `t` the `k`th largest
    /// lower bound (a walked doc's byte score less its bound, a pending
    /// doc's exact score), at least `k` docs score `t` or more, so a
    /// walked doc whose byte score plus its bound is below `t` scores
    /// below `k` others (the bound of [`AnnIndex::exact`]). Each exact
    /// score left out is a read of four times the doc's bytes at a random
    /// place, which a large index holds far outside the CPU's caches.
    pub(super) fn graph_search(
        &self,
        q: &[f32],
        docs: Option<&DocSet>,
        k: usize,
        ef: usize,
    ) -> (Vec<(DocId, f32)>, usize) {
        let probe = Probe::of(q);
        let walked = self.walk(&probe, docs, k, ef);
        let mut found = self.pending_scored(q, docs);
        let rescored: Vec<DocId> = match self.worth_scoring(q, &probe, &walked, &found, k) {
            Some(docs) => docs,
            None => walked.iter().map(|s| s.1).collect(),
        };
        for &d in &rescored {
            if let Some(first) = self.vector(d).first() {
                mosaic_kernels::prefetch(first);
            }
        }
        found.extend(rescored.iter().map(|&d| Scored(dot(q, self.vector(d)), d)));
        found.sort_by(|a, b| b.cmp(a));
        found.truncate(k);
        (
            found.into_iter().map(|s| (s.1, s.0)).collect(),
            rescored.len(),
        )
    }

    /// The walked docs that can be among the best `k` of `walked` and
    /// `pending` by exact score (see [`AnnIndex::graph_search`]), in walk
    /// order; `None` when every walked doc is to be scored: no more than
    /// `k` docs in all, a query that is not finite, or a bound that is
    /// not (a vector is checked finite before it is stored, so in
    /// practice never).
    fn worth_scoring(
        &self,
        q: &[f32],
        probe: &Probe,
        walked: &[Scored],
        pending: &[Scored],
        k: usize,
    ) -> Option<Vec<DocId>> {
        if k == 0 || walked.len() + pending.len() <= k {
            return None;
        }
        let bounds = self.query_bounds(q, probe)?;
        let scored: Vec<(f32, f32)> = walked.iter().map(|s| bounds.of(self, s.1, s.0)).collect();
        let mut lows: Vec<f32> = scored
            .iter()
            .map(|(a, e)| a - e)
            .chain(pending.iter().map(|s| s.0))
            .collect();
        if !lows.iter().all(|x| x.is_finite()) {
            return None;
        }
        let (_, &mut t, _) = lows.select_nth_unstable_by(k - 1, |x, y| y.total_cmp(x));
        Some(
            walked
                .iter()
                .zip(&scored)
                .filter(|(_, (a, e))| {
                    let high = a + e;
                    !high.is_finite() || high.total_cmp(&t).is_ge()
                })
                .map(|(s, _)| s.1)
                .collect(),
        )
    }

    /// [`AnnIndex::graph_search`] scoring every walked doc exactly: the
    /// reference it must equal.
    #[cfg(test)]
    pub(super) fn graph_search_scoring_all(
        &self,
        q: &[f32],
        docs: Option<&DocSet>,
        k: usize,
        ef: usize,
    ) -> (Vec<(DocId, f32)>, usize) {
        let walked = self.walk(&Probe::of(q), docs, k, ef);
        let mut found = self.pending_scored(q, docs);
        found.extend(walked.iter().map(|s| Scored(dot(q, self.vector(s.1)), s.1)));
        found.sort_by(|a, b| b.cmp(a));
        found.truncate(k);
        (
            found.into_iter().map(|s| (s.1, s.0)).collect(),
            walked.len(),
        )
    }

    /// The beam width of a filtered graph search over `eligible` docs:
    /// `ef_search` divided by the eligible fraction of the live docs, at
    /// most `max_ef_widening` times `ef_search`, at least `k`.
    pub fn search_ef(&self, eligible: usize, k: usize) -> usize {
        search_ef(&self.config, self.live, eligible, k)
    }

    /// Estimated costs, in multiply-adds, of an exact scan and of a
    /// filtered graph search over `eligible` docs (top 10):
    /// the scan reads every eligible vector, `eligible x dim`; the graph
    /// scores about `ef x m0` neighbours per layer it descends, and must
    /// walk past 1/selectivity docs for every eligible one it keeps,
    /// `ef x m0 x levels x dim / selectivity` (times `graph_cost_permille`
    /// / 1000).
    pub fn plan_costs(&self, eligible: usize) -> (f64, f64) {
        plan_costs(
            &self.config,
            self.dim,
            self.live,
            self.max_level + 1,
            eligible,
        )
    }

    /// The naive baseline: global top-`ef` from the graph, then filtered.
    /// Kept only to measure what post-filtering loses.
    pub fn post_filter_baseline(&self, q: &[f32], docs: &DocSet, k: usize) -> Vec<(DocId, f32)> {
        let mut global = self.graph_filtered(q, None, self.config.ef_search.max(k));
        global.retain(|(d, _)| docs.contains(*d));
        global.truncate(k);
        global
    }

    /// The plan [`AnnIndex::search`] picks for `eligible` docs: the exact
    /// scan for at most `exact_limit` docs or whenever its estimated cost
    /// is not above the filtered graph's (see [`AnnIndex::plan_costs`]).
    pub fn plan(&self, eligible: usize) -> SearchPlan {
        if eligible <= self.config.exact_limit {
            return SearchPlan::ExactScan;
        }
        let (scan, graph) = self.plan_costs(eligible);
        if scan <= graph {
            SearchPlan::ExactScan
        } else {
            SearchPlan::FilteredGraph
        }
    }

    /// Planned top-`k` among `docs`.
    pub fn search(&self, q: &[f32], docs: &DocSet, k: usize) -> (SearchPlan, Vec<(DocId, f32)>) {
        match self.plan(docs.len()) {
            SearchPlan::ExactScan => (SearchPlan::ExactScan, self.exact(q, docs, k)),
            SearchPlan::FilteredGraph => (
                SearchPlan::FilteredGraph,
                self.graph_filtered(q, Some(docs), k),
            ),
        }
    }
}
