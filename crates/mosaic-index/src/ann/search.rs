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
    widened_ef(config, config.ef_search, live, eligible, k)
}

/// `beam` (at least `k`) widened for `eligible` of `live` docs: divided
/// by the eligible fraction, at most `max_ef_widening` times.
fn widened_ef(config: &AnnConfig, beam: usize, live: usize, eligible: usize, k: usize) -> usize {
    let base = beam.max(k);
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
        let (q_off, q_bytes) = byte_error(q, &probe.codes, probe.scale);
        if k == 0 || eligible.len() <= k || !q_off.is_finite() || !q_bytes.is_finite() {
            return None;
        }
        // ||q|| is at most ||q'|| + ||q - q'||.
        let q_len = q_bytes + q_off;
        // A sum of `dim` products in f32, in any order, lies within
        // `dim` units of its last place (2^-23 each, twice the rounding)
        // of |q||x| from the exact sum.
        let rounding = (self.dim as f32 + 2.0) * f32::EPSILON;
        let bound = |doc: DocId, product: i32| {
            let a = product as f32 * (probe.scale * self.scales[doc as usize]);
            let (x_off, x_len) = self.byte_bounds[doc as usize];
            let e = byte_bound((q_off, q_bytes), (x_off, x_len));
            // The exact score's rounding (|x| is at most ||x'|| +
            // ||x - x'||), then that of `a` and of the sums below.
            let slack = rounding * q_len * (x_len + x_off) + 1e-6 * (a.abs() + e);
            (a, e + slack + f32::MIN_POSITIVE)
        };
        let mut bounds: Vec<(f32, f32)> = Vec::with_capacity(eligible.len());
        self.each_product(&probe, eligible, |d, p| bounds.push(bound(d, p)));
        let mut lows: Vec<f32> = bounds.iter().map(|(a, e)| a - e).collect();
        let (_, &mut t, _) = lows.select_nth_unstable_by(k - 1, |x, y| y.total_cmp(x));
        Some(
            eligible
                .iter()
                .zip(&bounds)
                .filter(|(_, (a, e))| {
                    let high = a + e;
                    !high.is_finite() || high.total_cmp(&t).is_ge()
                })
                .map(|(&d, _)| d)
                .collect(),
        )
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
        self.graph_with_ef(q, docs, k, ef, &[])
    }

    /// Graph top-`k` over every live doc with a beam of `beam` (at least
    /// `k`) rather than the configured one: for measuring the graph's
    /// recall against [`AnnIndex::exact`] at several beam widths.
    pub fn graph_with_beam(&self, q: &[f32], k: usize, beam: usize) -> Vec<(DocId, f32)> {
        self.graph_with_ef(q, None, k, beam, &[])
    }

    /// [`AnnIndex::graph_with_beam`] with the layer-0 walk also started
    /// from `seeds` (see [`AnnIndex::search_seeded`]).
    pub fn graph_with_beam_seeded(
        &self,
        q: &[f32],
        k: usize,
        beam: usize,
        seeds: &[DocId],
    ) -> Vec<(DocId, f32)> {
        self.graph_with_ef(q, None, k, beam, seeds)
    }

    /// Graph top-`k` among `docs`, the layer-0 beam started from the
    /// greedy descent's doc and from every doc of `seeds` that is a graph
    /// node and in `docs` (the others are left out: a removed or pending
    /// doc, one outside `docs`, one the index never held). Seeds only add
    /// starting points: the answer is the same whatever their order, and
    /// with no usable seed it is the plain walk's.
    fn graph_with_ef(
        &self,
        q: &[f32],
        docs: Option<&DocSet>,
        k: usize,
        ef: usize,
        seeds: &[DocId],
    ) -> Vec<(DocId, f32)> {
        let mut found = match self.entry {
            Some(mut entry) => {
                let probe = Probe::of(q);
                for l in (1..=self.max_level).rev() {
                    entry = self.greedy(&probe, entry, l);
                }
                let mut entries = vec![entry];
                entries.extend(seeds.iter().copied().filter(|&s| {
                    self.is_live(s)
                        && self.node_level(s).is_some()
                        && docs.is_none_or(|f| f.contains(s))
                }));
                let walked = self.search_layer(&probe, &entries, ef.max(k), 0, docs, None);
                // The walk's scores are the bytes': every doc it found is
                // scored again exactly, as a scan would score it.
                for s in &walked {
                    if let Some(first) = self.vector(s.1).first() {
                        mosaic_kernels::prefetch(first);
                    }
                }
                walked
                    .iter()
                    .map(|s| Scored(dot(q, self.vector(s.1)), s.1))
                    .collect()
            }
            None => Vec::new(),
        };
        // The pending docs are not in the graph: scanned exactly, merged.
        found.extend(
            self.pending
                .iter()
                .filter(|d| docs.is_none_or(|f| f.contains(**d)))
                .map(|&d| Scored(dot(q, self.vector(d)), d)),
        );
        found.sort_by(|a, b| b.cmp(a));
        found.truncate(k);
        found.into_iter().map(|s| (s.1, s.0)).collect()
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

    /// [`AnnIndex::search`] with starting points for the graph's walk:
    /// when the plan is the graph and `seeds` is not empty, the layer-0
    /// beam starts from the greedy descent's doc and from the seeds that
    /// are eligible graph nodes (a read's best lexical hits: docs sharing
    /// the query's words, in parts of the graph the single descent
    /// reaches only by luck), with a beam of `ef_search_seeded` widened
    /// for the eligible fraction as [`AnnIndex::search_ef`] widens
    /// `ef_search`. At most `search_seeds` seeds are used, the first
    /// ones. The exact scan ignores the seeds; without seeds this is
    /// [`AnnIndex::search`].
    pub fn search_seeded(
        &self,
        q: &[f32],
        docs: &DocSet,
        k: usize,
        seeds: &[DocId],
    ) -> (SearchPlan, Vec<(DocId, f32)>) {
        let seeds = &seeds[..seeds.len().min(self.config.search_seeds)];
        if seeds.is_empty() {
            return self.search(q, docs, k);
        }
        match self.plan(docs.len()) {
            SearchPlan::ExactScan => (SearchPlan::ExactScan, self.exact(q, docs, k)),
            SearchPlan::FilteredGraph => {
                let ef = widened_ef(
                    &self.config,
                    self.config.ef_search_seeded,
                    self.live,
                    docs.len(),
                    k,
                );
                (
                    SearchPlan::FilteredGraph,
                    self.graph_with_ef(q, Some(docs), k, ef, seeds),
                )
            }
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
