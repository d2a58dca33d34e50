//! Vector search: exact scan and a filter-aware HNSW graph.
//!
//! The graph filters *during* traversal: every node is walked through, but
//! only eligible nodes enter the result set, and the search does not stop
//! until it holds `ef` eligible results or runs out of reachable nodes. It
//! is never a post-filter of a global top-k, which returns nothing useful
//! for a small subject. [`AnnIndex::search`] plans per query: an exact scan
//! over the eligible docs when they are few (or a small fraction), the
//! filtered graph otherwise.
//!
//! Useful for: paraphrase recall over many records of large scopes.
//! Not useful for: exact identifiers (see the lexical index).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

use crate::scope::DocSet;
use crate::target::DocId;

/// Graph and planner parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnnConfig {
    /// Links per node above layer 0.
    pub m: usize,
    /// Links per node on layer 0.
    pub m0: usize,
    /// Beam width while building.
    pub ef_construction: usize,
    /// Beam width while searching (at least `k`).
    pub ef_search: usize,
    /// Exact scan when the eligible set has at most this many docs...
    pub exact_limit: usize,
    /// ...or is at most this many per-mille of all live docs.
    pub exact_permille: usize,
}

impl Default for AnnConfig {
    fn default() -> Self {
        AnnConfig {
            m: 16,
            m0: 32,
            ef_construction: 100,
            ef_search: 128,
            exact_limit: 2048,
            exact_permille: 20,
        }
    }
}

/// Which plan a search used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchPlan {
    /// Exact scan over the eligible docs.
    ExactScan,
    /// Graph search filtering during traversal.
    FilteredGraph,
}

#[derive(Clone, Copy, PartialEq)]
struct Scored(f32, DocId);

impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    // Higher similarity first; lower doc id wins ties (deterministic).
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.cmp(&self.1))
    }
}

/// Vectors (inner product on L2-normalised vectors = cosine) plus the graph.
pub struct AnnIndex {
    dim: usize,
    config: AnnConfig,
    vectors: Vec<f32>,
    links: Vec<Option<Vec<Vec<DocId>>>>,
    entry: Option<DocId>,
    max_level: usize,
    live: usize,
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn level_for(doc: DocId, m: usize) -> usize {
    // splitmix64 of the doc number: reproducible levels.
    let mut z = u64::from(doc).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let u = ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let ml = 1.0 / (m.max(2) as f64).ln();
    ((-u.ln() * ml).floor() as usize).min(16)
}

impl AnnIndex {
    /// An empty index of `dim`-dimensional vectors.
    pub fn new(dim: usize, config: AnnConfig) -> Self {
        AnnIndex {
            dim,
            config,
            vectors: Vec::new(),
            links: Vec::new(),
            entry: None,
            max_level: 0,
            live: 0,
        }
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Live vectors.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no vector is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn vector(&self, doc: DocId) -> &[f32] {
        let start = doc as usize * self.dim;
        &self.vectors[start..start + self.dim]
    }

    fn is_live(&self, doc: DocId) -> bool {
        self.links.get(doc as usize).is_some_and(Option::is_some)
    }

    fn max_links(&self, level: usize) -> usize {
        if level == 0 {
            self.config.m0
        } else {
            self.config.m
        }
    }

    /// Inserts `vector` (of the index dimension) as `doc`.
    pub fn insert(&mut self, doc: DocId, vector: &[f32]) {
        let idx = doc as usize;
        if self.links.len() <= idx {
            self.links.resize_with(idx + 1, || None);
            self.vectors.resize((idx + 1) * self.dim, 0.0);
        }
        if self.is_live(doc) {
            self.remove(doc);
        }
        self.vectors[idx * self.dim..(idx + 1) * self.dim].copy_from_slice(vector);
        let level = level_for(doc, self.config.m);
        self.links[idx] = Some(vec![Vec::new(); level + 1]);
        self.live += 1;
        let Some(mut entry) = self.entry else {
            self.entry = Some(doc);
            self.max_level = level;
            return;
        };
        let q = vector.to_vec();
        for l in (level + 1..=self.max_level).rev() {
            entry = self.greedy(&q, entry, l);
        }
        let mut eps = vec![entry];
        for l in (0..=level.min(self.max_level)).rev() {
            let found =
                self.search_layer(&q, &eps, self.config.ef_construction, l, None, Some(doc));
            let chosen = self.select(&q, &found, self.max_links(l));
            if let Some(Some(levels)) = self.links.get_mut(idx) {
                levels[l] = chosen.clone();
            }
            for n in chosen {
                self.connect(n, doc, l);
            }
            eps = found.iter().map(|s| s.1).collect();
        }
        if level > self.max_level {
            self.max_level = level;
            self.entry = Some(doc);
        }
    }

    fn connect(&mut self, from: DocId, to: DocId, level: usize) {
        let max = self.max_links(level);
        let Some(Some(levels)) = self.links.get(from as usize) else {
            return;
        };
        let Some(list) = levels.get(level) else {
            return;
        };
        if list.contains(&to) {
            return;
        }
        let mut list = list.clone();
        list.push(to);
        if list.len() > max {
            let base = self.vector(from).to_vec();
            let mut scored: Vec<Scored> = list
                .iter()
                .filter(|d| self.is_live(**d))
                .map(|d| Scored(dot(&base, self.vector(*d)), *d))
                .collect();
            scored.sort_by(|a, b| b.cmp(a));
            list = self.select(&base, &scored, max);
        }
        if let Some(Some(levels)) = self.links.get_mut(from as usize) {
            levels[level] = list;
        }
    }

    /// Heuristic neighbour selection (diverse first, then fill by
    /// similarity); `candidates` sorted best first.
    fn select(&self, q: &[f32], candidates: &[Scored], max: usize) -> Vec<DocId> {
        let mut kept: Vec<DocId> = Vec::with_capacity(max);
        let mut skipped = Vec::new();
        for c in candidates {
            if kept.len() >= max {
                break;
            }
            let v = self.vector(c.1);
            if kept.iter().all(|k| dot(v, self.vector(*k)) < c.0) {
                kept.push(c.1);
            } else {
                skipped.push(c.1);
            }
        }
        let _ = q;
        for s in skipped {
            if kept.len() >= max {
                break;
            }
            kept.push(s);
        }
        kept
    }

    fn greedy(&self, q: &[f32], mut current: DocId, level: usize) -> DocId {
        let mut best = dot(q, self.vector(current));
        loop {
            let mut improved = false;
            let neighbours = self
                .links
                .get(current as usize)
                .and_then(|l| l.as_ref())
                .and_then(|l| l.get(level))
                .cloned()
                .unwrap_or_default();
            for n in neighbours {
                if !self.is_live(n) {
                    continue;
                }
                let s = dot(q, self.vector(n));
                if s > best {
                    best = s;
                    current = n;
                    improved = true;
                }
            }
            if !improved {
                return current;
            }
        }
    }

    /// Beam search on one layer; only docs passing `filter` enter the
    /// results, every live doc may be walked through. Best first.
    fn search_layer(
        &self,
        q: &[f32],
        entry_points: &[DocId],
        ef: usize,
        level: usize,
        filter: Option<&DocSet>,
        exclude: Option<DocId>,
    ) -> Vec<Scored> {
        let passes = |d: DocId| filter.is_none_or(|f| f.contains(d)) && Some(d) != exclude;
        let mut visited: HashSet<DocId> = HashSet::new();
        let mut candidates: BinaryHeap<Scored> = BinaryHeap::new();
        let mut results: BinaryHeap<std::cmp::Reverse<Scored>> = BinaryHeap::new();
        for &ep in entry_points {
            if !self.is_live(ep) || !visited.insert(ep) {
                continue;
            }
            let s = Scored(dot(q, self.vector(ep)), ep);
            candidates.push(s);
            if passes(ep) {
                results.push(std::cmp::Reverse(s));
            }
        }
        while let Some(c) = candidates.pop() {
            if results.len() >= ef {
                if let Some(std::cmp::Reverse(worst)) = results.peek() {
                    if c.0 < worst.0 {
                        break;
                    }
                }
            }
            let Some(Some(levels)) = self.links.get(c.1 as usize) else {
                continue;
            };
            let Some(neighbours) = levels.get(level) else {
                continue;
            };
            for &n in neighbours {
                if !self.is_live(n) || !visited.insert(n) {
                    continue;
                }
                let s = Scored(dot(q, self.vector(n)), n);
                let worst = results.peek().map(|r| r.0.0);
                if results.len() < ef || worst.is_none_or(|w| s.0 > w) {
                    candidates.push(s);
                    if passes(n) {
                        results.push(std::cmp::Reverse(s));
                        if results.len() > ef {
                            results.pop();
                        }
                    }
                }
            }
        }
        let mut out: Vec<Scored> = results.into_iter().map(|r| r.0).collect();
        out.sort_by(|a, b| b.cmp(a));
        out
    }

    /// Removes `doc`: repairs its neighbours' links, then erases its vector.
    pub fn remove(&mut self, doc: DocId) {
        let Some(levels) = self.links.get_mut(doc as usize).and_then(Option::take) else {
            return;
        };
        self.live -= 1;
        for (level, neighbours) in levels.iter().enumerate() {
            for &n in neighbours {
                let Some(Some(n_levels)) = self.links.get(n as usize) else {
                    continue;
                };
                let Some(list) = n_levels.get(level) else {
                    continue;
                };
                let mut pool: Vec<DocId> = list.iter().copied().filter(|d| *d != doc).collect();
                for &c in neighbours {
                    if c != n && !pool.contains(&c) && self.is_live(c) {
                        pool.push(c);
                    }
                }
                let base = self.vector(n).to_vec();
                let mut scored: Vec<Scored> = pool
                    .iter()
                    .filter(|d| self.is_live(**d))
                    .map(|d| Scored(dot(&base, self.vector(*d)), *d))
                    .collect();
                scored.sort_by(|a, b| b.cmp(a));
                let repaired = self.select(&base, &scored, self.max_links(level));
                if let Some(Some(n_levels)) = self.links.get_mut(n as usize) {
                    n_levels[level] = repaired;
                }
            }
        }
        let start = doc as usize * self.dim;
        self.vectors[start..start + self.dim].fill(0.0);
        if self.entry == Some(doc) {
            self.entry = None;
            self.max_level = 0;
            for (d, l) in self.links.iter().enumerate() {
                if let Some(l) = l {
                    if self.entry.is_none() || l.len() - 1 > self.max_level {
                        self.entry = DocId::try_from(d).ok();
                        self.max_level = l.len() - 1;
                    }
                }
            }
        }
    }

    /// Exact top-`k` over `docs`.
    pub fn exact(&self, q: &[f32], docs: &DocSet, k: usize) -> Vec<(DocId, f32)> {
        let mut scored: Vec<Scored> = docs
            .docs()
            .iter()
            .filter(|d| self.is_live(**d))
            .map(|d| Scored(dot(q, self.vector(*d)), *d))
            .collect();
        scored.sort_by(|a, b| b.cmp(a));
        scored.truncate(k);
        scored.into_iter().map(|s| (s.1, s.0)).collect()
    }

    /// Graph top-`k` with the filter applied during traversal.
    pub fn graph_filtered(&self, q: &[f32], docs: Option<&DocSet>, k: usize) -> Vec<(DocId, f32)> {
        let Some(mut entry) = self.entry else {
            return Vec::new();
        };
        for l in (1..=self.max_level).rev() {
            entry = self.greedy(q, entry, l);
        }
        let ef = self.config.ef_search.max(k);
        let mut found = self.search_layer(q, &[entry], ef, 0, docs, None);
        found.truncate(k);
        found.into_iter().map(|s| (s.1, s.0)).collect()
    }

    /// The naive baseline: global top-`ef` from the graph, then filtered.
    /// Kept only to measure what post-filtering loses.
    pub fn post_filter_baseline(&self, q: &[f32], docs: &DocSet, k: usize) -> Vec<(DocId, f32)> {
        let mut global = self.graph_filtered(q, None, self.config.ef_search.max(k));
        global.retain(|(d, _)| docs.contains(*d));
        global.truncate(k);
        global
    }

    /// The plan [`AnnIndex::search`] picks for `eligible` docs.
    pub fn plan(&self, eligible: usize) -> SearchPlan {
        let fraction_limit = self.live.saturating_mul(self.config.exact_permille) / 1000;
        if eligible <= self.config.exact_limit.max(fraction_limit) {
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
