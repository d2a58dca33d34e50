//! Vector search: exact scan and a filter-aware HNSW graph.
//!
//! The graph filters *during* traversal: every node is walked through, but
//! only eligible nodes enter the result set, and the search does not stop
//! until it holds `ef` eligible results or runs out of reachable nodes. It
//! is never a post-filter of a global top-k, which returns nothing useful
//! for a small subject. [`AnnIndex::search`] plans per query by estimated
//! cost: an exact scan over the eligible docs (recall 1.0) unless the graph
//! is estimated cheaper, which takes a very large eligible set; the graph's
//! beam then widens as the eligible fraction falls (see [`AnnIndex::plan`]).
//!
//! Useful for: paraphrase recall over many records of large scopes.
//! Not useful for: exact identifiers (see the lexical index).

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap};

use mosaic_kernels::dots;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::scope::DocSet;
use crate::target::DocId;

/// Graph and planner parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnnConfig {
    /// Links per node above layer 0 (a list may grow to 1.5x this before
    /// the diversity heuristic prunes it back).
    pub m: usize,
    /// Links per node on layer 0 (likewise up to 1.5x between prunings).
    pub m0: usize,
    /// Beam width while building.
    pub ef_construction: usize,
    /// Beam width while searching (at least `k`) when every live doc is
    /// eligible; a filtered search widens it with 1/selectivity, up to
    /// `max_ef_widening` times.
    pub ef_search: usize,
    /// Exact scan whenever the eligible set has at most this many docs.
    pub exact_limit: usize,
    /// Weight of the graph's cost estimate against the scan's, per mille
    /// (1000: the plain estimates of [`AnnIndex::plan_costs`]; lower values
    /// favour the graph).
    pub graph_cost_permille: usize,
    /// Most times `ef_search` a filtered graph search may widen its beam.
    pub max_ef_widening: usize,
}

impl Default for AnnConfig {
    fn default() -> Self {
        AnnConfig {
            m: 16,
            m0: 32,
            ef_construction: 100,
            ef_search: 256,
            exact_limit: 2048,
            graph_cost_permille: 1000,
            max_ef_widening: 8,
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
///
/// The graph is built and walked on a byte copy of each vector
/// ([`mosaic_kernels::quantize_i8`], a quarter of the f32 vector's bytes):
/// a beam search is bound by fetching its neighbours' vectors from memory,
/// and once the vectors outgrow the CPU's caches a quarter of the bytes is
/// most of a quarter of the wait. The byte scores only steer the walk and
/// choose the links; every score a search returns is the exact f32 one.
pub struct AnnIndex {
    dim: usize,
    config: AnnConfig,
    vectors: Vec<f32>,
    /// `dim` bytes per doc: the vector quantized, for the graph.
    codes: Vec<i8>,
    /// Per doc, the scale of its bytes (0 for a removed doc).
    scales: Vec<f32>,
    /// Per doc, `(||x - x'||, ||x'||)` of its vector `x` and its bytes
    /// scaled, `x'`, rounded up: what bounds how far a byte score may lie
    /// from the exact one (see [`AnnIndex::exact`]). Infinite for a vector
    /// that is not finite.
    byte_bounds: Vec<(f32, f32)>,
    /// Per doc, its neighbour lists above layer 0 (`links[doc][l - 1]`
    /// for layer `l`), `None` for a doc not in the graph.
    links: Vec<Option<Vec<Vec<DocId>>>>,
    /// Per doc, its layer-0 neighbours in a slot of its own (see
    /// [`AnnIndex::slot0`]): the length, then up to `m0 + m0 / 2` docs.
    /// Every layer-0 step of a walk reads a list; in one flat array it is
    /// one load at a computed address, where a list of its own is two
    /// pointers to follow, each a miss once the graph outgrows the caches.
    layer0: Vec<DocId>,
    entry: Option<DocId>,
    max_level: usize,
    live: usize,
    /// One bit per doc: live (graph node or pending).
    live_bits: Vec<u64>,
    /// Live docs whose vector is held but that are not in the graph yet
    /// (restored or replayed without graph work; see
    /// [`AnnIndex::insert_pending`]). A graph search scans them exactly.
    pending: BTreeSet<DocId>,
}

/// Inner product of L2-normalised vectors (their cosine): the similarity
/// kernel of every vector search, [`mosaic_kernels::dots`] of one vector
/// (the same bits on every CPU), exposed so that a candidate source outside
/// this crate scores exactly alike.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let [s] = dots(a, [b]);
    s
}

/// `(||x - x'||, ||x'||)` for a vector `x` and its bytes `codes` at
/// `scale` (`x' = scale * codes`), computed in f64 and rounded up to the
/// next f32; infinite when `x` is not finite.
fn byte_error(x: &[f32], codes: &[i8], scale: f32) -> (f32, f32) {
    let (mut off, mut len) = (0.0f64, 0.0f64);
    for (&v, &c) in x.iter().zip(codes) {
        let scaled = f64::from(scale) * f64::from(c);
        off += (f64::from(v) - scaled).powi(2);
        len += scaled * scaled;
    }
    let up = |v: f64| {
        let r = (v.sqrt() * (1.0 + 1e-9)) as f32;
        if r.is_finite() {
            r.next_up()
        } else {
            f32::INFINITY
        }
    };
    if x.iter().all(|v| v.is_finite()) {
        (up(off), up(len))
    } else {
        (f32::INFINITY, f32::INFINITY)
    }
}

/// How far `q.x` can lie from the byte score `q'.x'` in exact arithmetic,
/// given [`byte_error`] of each:
/// `||q|| ||x - x'|| + ||q - q'|| ||x'||`, with `||q||` at most
/// `||q'|| + ||q - q'||`.
fn byte_bound((q_off, q_bytes): (f32, f32), (x_off, x_bytes): (f32, f32)) -> f32 {
    (q_bytes + q_off) * x_off + q_off * x_bytes
}

/// A vector as the graph walks with it: its bytes and their scale.
struct Probe {
    codes: Vec<i8>,
    scale: f32,
}

impl Probe {
    fn of(vector: &[f32]) -> Self {
        let mut codes = vec![0i8; vector.len()];
        let scale = mosaic_kernels::quantize_i8(vector, &mut codes);
        Probe { codes, scale }
    }
}

/// The beam width of a filtered graph search over `eligible` of `live`
/// docs (see [`AnnIndex::search_ef`]).
fn search_ef(config: &AnnConfig, live: usize, eligible: usize, k: usize) -> usize {
    let base = config.ef_search.max(k);
    let live = live.max(1);
    let widened = base.saturating_mul(live).div_ceil(eligible.clamp(1, live));
    widened
        .min(base.saturating_mul(config.max_ef_widening.max(1)))
        .max(base)
}

/// Estimated (scan, graph) costs (see [`AnnIndex::plan_costs`]) for an
/// index of `live` docs of `dim` dimensions with `levels` graph layers.
fn plan_costs(
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

/// A visited-doc bitset for one layer search.
struct Visited(Vec<u64>);

impl Visited {
    fn new(capacity: usize) -> Self {
        Visited(vec![0; capacity.div_ceil(64)])
    }

    /// Marks `doc`; true when it was not marked before.
    fn insert(&mut self, doc: DocId) -> bool {
        let (word, bit) = ((doc / 64) as usize, 1u64 << (doc % 64));
        if word >= self.0.len() {
            self.0.resize(word + 1, 0);
        }
        let fresh = self.0[word] & bit == 0;
        self.0[word] |= bit;
        fresh
    }
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
            codes: Vec::new(),
            scales: Vec::new(),
            byte_bounds: Vec::new(),
            links: Vec::new(),
            layer0: Vec::new(),
            entry: None,
            max_level: 0,
            live: 0,
            live_bits: Vec::new(),
            pending: BTreeSet::new(),
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

    /// The stored vector of a live doc.
    pub fn vector_of(&self, doc: DocId) -> Option<&[f32]> {
        self.is_live(doc).then(|| self.vector(doc))
    }

    fn vector(&self, doc: DocId) -> &[f32] {
        let start = doc as usize * self.dim;
        &self.vectors[start..start + self.dim]
    }

    fn code(&self, doc: DocId) -> &[i8] {
        let start = doc as usize * self.dim;
        &self.codes[start..start + self.dim]
    }

    /// The graph's similarity of `q` and `doc`: their bytes' exact integer
    /// product, scaled (the same value on every CPU).
    fn approx(&self, q: &Probe, doc: DocId) -> f32 {
        let [p] = mosaic_kernels::dots_i8(&q.codes, [self.code(doc)]);
        p as f32 * (q.scale * self.scales[doc as usize])
    }

    /// [`AnnIndex::approx`] of two stored docs.
    fn approx_pair(&self, a: DocId, b: DocId) -> f32 {
        let [p] = mosaic_kernels::dots_i8(self.code(a), [self.code(b)]);
        p as f32 * (self.scales[a as usize] * self.scales[b as usize])
    }

    /// The stored `doc` as a probe.
    fn probe_of(&self, doc: DocId) -> Probe {
        Probe {
            codes: self.code(doc).to_vec(),
            scale: self.scales[doc as usize],
        }
    }

    /// Zeroes the removed `doc`'s vector and bytes.
    fn erase_vector(&mut self, doc: DocId) {
        let start = doc as usize * self.dim;
        self.vectors[start..start + self.dim].fill(0.0);
        self.codes[start..start + self.dim].fill(0);
        self.scales[doc as usize] = 0.0;
        self.byte_bounds[doc as usize] = (0.0, 0.0);
    }

    fn is_live(&self, doc: DocId) -> bool {
        self.live_bits
            .get((doc / 64) as usize)
            .is_some_and(|w| w & (1 << (doc % 64)) != 0)
    }

    fn set_live(&mut self, doc: DocId, live: bool) {
        let word = (doc / 64) as usize;
        if word >= self.live_bits.len() {
            self.live_bits.resize(word + 1, 0);
        }
        if live {
            self.live_bits[word] |= 1 << (doc % 64);
        } else {
            self.live_bits[word] &= !(1 << (doc % 64));
        }
    }

    fn max_links(&self, level: usize) -> usize {
        if level == 0 {
            self.config.m0
        } else {
            self.config.m
        }
    }

    /// Entries per doc in `layer0`: the list's length, then room for the
    /// longest list lazy pruning lets grow (see [`AnnIndex::connect`]).
    fn slot0(&self) -> usize {
        1 + self.config.m0 + self.config.m0 / 2
    }

    /// The top layer of `doc` when it is in the graph.
    fn node_level(&self, doc: DocId) -> Option<usize> {
        self.links.get(doc as usize)?.as_ref().map(Vec::len)
    }

    /// The neighbours of `doc` on `level` (none when it is not in the
    /// graph on that layer).
    fn neighbours(&self, doc: DocId, level: usize) -> &[DocId] {
        let Some(Some(upper)) = self.links.get(doc as usize) else {
            return &[];
        };
        if level > 0 {
            return upper.get(level - 1).map_or(&[][..], Vec::as_slice);
        }
        let start = doc as usize * self.slot0();
        let len = self.layer0.get(start).map_or(0, |&n| n as usize);
        self.layer0
            .get(start + 1..start + 1 + len)
            .unwrap_or_default()
    }

    /// Makes `list` the neighbours of `doc` on `level`, for a doc in the
    /// graph on that layer, its list within the lazy-pruning bound.
    fn set_neighbours(&mut self, doc: DocId, level: usize, list: &[DocId]) {
        if level > 0 {
            if let Some(Some(upper)) = self.links.get_mut(doc as usize)
                && let Some(l) = upper.get_mut(level - 1)
            {
                l.clear();
                l.extend_from_slice(list);
            }
            return;
        }
        let slot = self.slot0();
        let start = doc as usize * slot;
        debug_assert!(list.len() < slot, "a layer-0 list past its slot");
        let len = list.len().min(slot - 1);
        if let Some(s) = self.layer0.get_mut(start..start + slot) {
            s[0] = len as DocId;
            s[1..=len].copy_from_slice(&list[..len]);
        }
    }

    /// Appends `to` to the neighbours of `doc` on `level`, for a doc in the
    /// graph on that layer whose list has room (see
    /// [`AnnIndex::connect`]).
    fn push_neighbour(&mut self, doc: DocId, level: usize, to: DocId) {
        if level > 0 {
            if let Some(Some(upper)) = self.links.get_mut(doc as usize)
                && let Some(l) = upper.get_mut(level - 1)
            {
                l.push(to);
            }
            return;
        }
        let slot = self.slot0();
        let start = doc as usize * slot;
        if let Some(s) = self.layer0.get_mut(start..start + slot)
            && (s[0] as usize) < slot - 1
        {
            s[0] += 1;
            s[s[0] as usize] = to;
        }
    }

    /// Stores `vector` as the live `doc` (replacing a live one), not yet
    /// linked into the graph.
    fn store(&mut self, doc: DocId, vector: &[f32]) {
        let idx = doc as usize;
        if self.links.len() <= idx {
            self.links.resize_with(idx + 1, || None);
            self.vectors.resize((idx + 1) * self.dim, 0.0);
            self.codes.resize((idx + 1) * self.dim, 0);
            self.scales.resize(idx + 1, 0.0);
            self.byte_bounds.resize(idx + 1, (0.0, 0.0));
            self.layer0.resize((idx + 1) * self.slot0(), 0);
        }
        if self.is_live(doc) {
            self.remove(doc);
        }
        self.vectors[idx * self.dim..(idx + 1) * self.dim].copy_from_slice(vector);
        self.scales[idx] = mosaic_kernels::quantize_i8(
            vector,
            &mut self.codes[idx * self.dim..(idx + 1) * self.dim],
        );
        self.byte_bounds[idx] = byte_error(vector, self.code(doc), self.scales[idx]);
        self.set_live(doc, true);
        self.live += 1;
    }

    /// Inserts `vector` (of the index dimension) as `doc`.
    pub fn insert(&mut self, doc: DocId, vector: &[f32]) {
        self.store(doc, vector);
        self.link(doc);
    }

    /// Stores `vector` as `doc` without linking it into the graph: every
    /// search finds it (an exact scan reads it like any other; a graph
    /// search scans the pending docs exactly beside the graph) until
    /// [`AnnIndex::absorb`] or [`AnnIndex::attach_graph`] makes it a graph
    /// node. What a restart uses, so it does no graph work.
    pub fn insert_pending(&mut self, doc: DocId, vector: &[f32]) {
        self.store(doc, vector);
        self.pending.insert(doc);
    }

    /// Live docs not in the graph yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Links up to `budget` pending docs into the graph, lowest doc first
    /// (so absorbing everything builds the graph a restore that inserted
    /// every doc in order would have built); returns how many remain.
    pub fn absorb(&mut self, budget: usize) -> usize {
        for _ in 0..budget {
            let Some(doc) = self.pending.pop_first() else {
                break;
            };
            self.link(doc);
        }
        self.pending.len()
    }

    /// Links the stored, live `doc` into the graph.
    fn link(&mut self, doc: DocId) {
        let idx = doc as usize;
        let level = level_for(doc, self.config.m);
        self.links[idx] = Some(vec![Vec::new(); level]);
        self.set_neighbours(doc, 0, &[]);
        let Some(mut entry) = self.entry else {
            self.entry = Some(doc);
            self.max_level = level;
            return;
        };
        let q = self.probe_of(doc);
        for l in (level + 1..=self.max_level).rev() {
            entry = self.greedy(&q, entry, l);
        }
        let mut eps = vec![entry];
        for l in (0..=level.min(self.max_level)).rev() {
            let found =
                self.search_layer(&q, &eps, self.config.ef_construction, l, None, Some(doc));
            let chosen = self.select(&found, self.max_links(l));
            self.set_neighbours(doc, l, &chosen);
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
        if self.node_level(from).is_none_or(|top| top < level) {
            return;
        }
        let list = self.neighbours(from, level);
        if list.contains(&to) {
            return;
        }
        // Lazy pruning: a list may grow to 1.5x its size before the
        // diversity heuristic cuts it back, so the heuristic (quadratic in
        // the list length) runs once per `max / 2` new links instead of on
        // every one.
        if list.len() < max + max / 2 {
            self.push_neighbour(from, level, to);
            return;
        }
        let mut pool = list.to_vec();
        pool.push(to);
        let mut scored: Vec<Scored> = pool
            .iter()
            .filter(|d| self.is_live(**d))
            .map(|d| Scored(self.approx_pair(from, *d), *d))
            .collect();
        scored.sort_by(|a, b| b.cmp(a));
        let kept = self.select(&scored, max);
        self.set_neighbours(from, level, &kept);
    }

    /// Heuristic neighbour selection (diverse first, then fill by
    /// similarity); `candidates` sorted best first.
    fn select(&self, candidates: &[Scored], max: usize) -> Vec<DocId> {
        let mut kept: Vec<DocId> = Vec::with_capacity(max);
        let mut skipped = Vec::new();
        for c in candidates {
            if kept.len() >= max {
                break;
            }
            if kept.iter().all(|k| self.approx_pair(c.1, *k) < c.0) {
                kept.push(c.1);
            } else {
                skipped.push(c.1);
            }
        }
        for s in skipped {
            if kept.len() >= max {
                break;
            }
            kept.push(s);
        }
        kept
    }

    fn greedy(&self, q: &Probe, mut current: DocId, level: usize) -> DocId {
        let mut best = self.approx(q, current);
        loop {
            let mut improved = false;
            let neighbours = self.neighbours(current, level);
            let mut next = current;
            for &n in neighbours {
                if !self.is_live(n) {
                    continue;
                }
                let s = self.approx(q, n);
                if s > best {
                    best = s;
                    next = n;
                    improved = true;
                }
            }
            current = next;
            if !improved {
                return current;
            }
        }
    }

    /// `scores[i] = approx(q, docs[i])`, four docs at a time with
    /// [`mosaic_kernels::dots_i8`]. A graph search scores the neighbours of
    /// a node, which lie anywhere in memory: one at a time, each waits for
    /// its bytes to arrive before the next one's loads start; in a group of
    /// four, their loads are in flight together.
    fn scores(&self, q: &Probe, docs: &[DocId], scores: &mut Vec<f32>) {
        scores.clear();
        // Each vector's first load is a miss at a random address: ask for
        // all of them before the first is needed, so they overlap (the
        // lines after each first one follow in order, which the CPU's
        // own prefetcher sees).
        for &d in docs {
            let v = self.code(d);
            if let Some(first) = v.first() {
                mosaic_kernels::prefetch(first);
            }
            if let Some(next) = v.get(64) {
                mosaic_kernels::prefetch(next);
            }
        }
        self.each_product(q, docs, |d, p| {
            scores.push(p as f32 * (q.scale * self.scales[d as usize]));
        });
    }

    /// Calls `f` with each of `docs` and its bytes' integer product with
    /// `q`'s, in order, four docs per [`mosaic_kernels::dots_i8`] call.
    fn each_product(&self, q: &Probe, docs: &[DocId], mut f: impl FnMut(DocId, i32)) {
        let mut groups = docs.chunks_exact(4);
        for g in &mut groups {
            let products = mosaic_kernels::dots_i8(
                &q.codes,
                [
                    self.code(g[0]),
                    self.code(g[1]),
                    self.code(g[2]),
                    self.code(g[3]),
                ],
            );
            g.iter().zip(products).for_each(|(&d, p)| f(d, p));
        }
        for &d in groups.remainder() {
            let [p] = mosaic_kernels::dots_i8(&q.codes, [self.code(d)]);
            f(d, p);
        }
    }

    /// Beam search on one layer; only docs passing `filter` enter the
    /// results, every live doc may be walked through. Best first.
    fn search_layer(
        &self,
        q: &Probe,
        entry_points: &[DocId],
        ef: usize,
        level: usize,
        filter: Option<&DocSet>,
        exclude: Option<DocId>,
    ) -> Vec<Scored> {
        let passes = |d: DocId| filter.is_none_or(|f| f.contains(d)) && Some(d) != exclude;
        let mut visited = Visited::new(self.links.len());
        let mut candidates: BinaryHeap<Scored> = BinaryHeap::new();
        let mut results: BinaryHeap<std::cmp::Reverse<Scored>> = BinaryHeap::new();
        let (mut fresh, mut scores): (Vec<DocId>, Vec<f32>) = (Vec::new(), Vec::new());
        for &ep in entry_points {
            if !self.is_live(ep) || !visited.insert(ep) {
                continue;
            }
            let s = Scored(self.approx(q, ep), ep);
            candidates.push(s);
            if passes(ep) {
                results.push(std::cmp::Reverse(s));
            }
        }
        while let Some(c) = candidates.pop() {
            if results.len() >= ef
                && let Some(std::cmp::Reverse(worst)) = results.peek()
                && c.0 < worst.0
            {
                break;
            }
            let neighbours = self.neighbours(c.1, level);
            // The fresh neighbours first, then their scores in groups
            // (see `dots`), then each in list order as before.
            fresh.clear();
            fresh.extend(
                neighbours
                    .iter()
                    .copied()
                    .filter(|&n| self.is_live(n) && visited.insert(n)),
            );
            self.scores(q, &fresh, &mut scores);
            for (&n, &score) in fresh.iter().zip(&scores) {
                let s = Scored(score, n);
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
        if self.pending.remove(&doc) {
            self.set_live(doc, false);
            self.live -= 1;
            self.erase_vector(doc);
            return;
        }
        let Some(top) = self.node_level(doc) else {
            return;
        };
        let levels: Vec<Vec<DocId>> = (0..=top)
            .map(|l| self.neighbours(doc, l).to_vec())
            .collect();
        self.set_neighbours(doc, 0, &[]);
        self.links[doc as usize] = None;
        self.set_live(doc, false);
        self.live -= 1;
        for (level, neighbours) in levels.iter().enumerate() {
            for &n in neighbours {
                if self.node_level(n).is_none_or(|t| t < level) {
                    continue;
                }
                let mut pool: Vec<DocId> = self
                    .neighbours(n, level)
                    .iter()
                    .copied()
                    .filter(|d| *d != doc)
                    .collect();
                for &c in neighbours {
                    if c != n && !pool.contains(&c) && self.is_live(c) {
                        pool.push(c);
                    }
                }
                let mut scored: Vec<Scored> = pool
                    .iter()
                    .filter(|d| self.is_live(**d))
                    .map(|d| Scored(self.approx_pair(n, *d), *d))
                    .collect();
                scored.sort_by(|a, b| b.cmp(a));
                let repaired = self.select(&scored, self.max_links(level));
                self.set_neighbours(n, level, &repaired);
            }
        }
        self.erase_vector(doc);
        if self.entry == Some(doc) {
            self.entry = None;
            self.max_level = 0;
            for (d, l) in self.links.iter().enumerate() {
                if let Some(l) = l
                    && (self.entry.is_none() || l.len() > self.max_level)
                {
                    self.entry = DocId::try_from(d).ok();
                    self.max_level = l.len();
                }
            }
        }
    }

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
    fn byte_candidates(&self, q: &[f32], eligible: &[DocId], k: usize) -> Option<Vec<DocId>> {
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
    fn eligible(&self, docs: &DocSet) -> Vec<DocId> {
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
        let mut found = match self.entry {
            Some(mut entry) => {
                let probe = Probe::of(q);
                for l in (1..=self.max_level).rev() {
                    entry = self.greedy(&probe, entry, l);
                }
                let walked = self.search_layer(&probe, &[entry], ef.max(k), 0, docs, None);
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

/// The graph of an [`AnnIndex`] over docs renumbered `0..n` (its live docs
/// in an order the caller chooses, see [`AnnIndex::graph_snapshot`]):
/// per node its neighbour lists, one per layer, or none for a doc that is
/// not in the graph yet. Saved beside the vectors so that a restart
/// attaches it ([`AnnIndex::attach_graph`]) instead of inserting every
/// vector again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphSnapshot {
    /// Links per node above layer 0 the graph was built with.
    pub m: usize,
    /// Links per node on layer 0 the graph was built with.
    pub m0: usize,
    /// The entry node, when any node is in the graph.
    pub entry: Option<u32>,
    /// Per node, its neighbour lists from layer 0 up (empty: not in the
    /// graph).
    pub nodes: Vec<Vec<Vec<u32>>>,
}

/// Magic line that opens a graph file.
const GRAPH_MAGIC: &[u8] = b"mosaic-graph-v1\n";
/// Most layers a node may have (see `level_for`).
const MAX_LAYERS: usize = 17;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphHeader {
    /// What the graph's vectors are (the caller's binding, for instance a
    /// digest of the vector file the node numbers refer to).
    binding: String,
    m: usize,
    m0: usize,
    nodes: usize,
    entry: Option<u32>,
    body_sha256: String,
}

fn graph_error(problem: &str) -> crate::error::IndexError {
    crate::error::IndexError::Snapshot(format!("graph snapshot: {problem}"))
}

fn graph_take<'a>(
    bytes: &'a [u8],
    at: &mut usize,
    n: usize,
) -> Result<&'a [u8], crate::error::IndexError> {
    let end = at
        .checked_add(n)
        .filter(|end| *end <= bytes.len())
        .ok_or_else(|| graph_error("truncated"))?;
    let out = &bytes[*at..end];
    *at = end;
    Ok(out)
}

fn graph_u32(bytes: &[u8], at: &mut usize) -> Result<u32, crate::error::IndexError> {
    let raw = graph_take(bytes, at, 4)?;
    Ok(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]))
}

impl GraphSnapshot {
    /// Encodes the graph bound to `binding`.
    ///
    /// Layout: the magic line `mosaic-graph-v1`, a little-endian `u32`
    /// header length, the header (strict JSON: `binding`, `m`, `m0`,
    /// `nodes`, `entry`, `body_sha256`), then the body: per node one byte,
    /// its layer count (0: not in the graph), and per layer a little-endian
    /// `u32` list length and that many little-endian `u32` node numbers.
    pub fn to_bytes(&self, binding: &str) -> Result<Vec<u8>, crate::error::IndexError> {
        let mut body = Vec::with_capacity(self.nodes.len() * 160);
        for levels in &self.nodes {
            let layers = u8::try_from(levels.len()).map_err(|_| graph_error("too many layers"))?;
            body.push(layers);
            for list in levels {
                let len = u32::try_from(list.len()).map_err(|_| graph_error("list too long"))?;
                body.extend_from_slice(&len.to_le_bytes());
                for n in list {
                    body.extend_from_slice(&n.to_le_bytes());
                }
            }
        }
        let header = serde_json::to_vec(&GraphHeader {
            binding: binding.to_owned(),
            m: self.m,
            m0: self.m0,
            nodes: self.nodes.len(),
            entry: self.entry,
            body_sha256: hex::encode(Sha256::digest(&body)),
        })
        .map_err(|e| graph_error(&e.to_string()))?;
        let header_len = u32::try_from(header.len()).map_err(|_| graph_error("header too long"))?;
        let mut out = Vec::with_capacity(GRAPH_MAGIC.len() + 4 + header.len() + body.len());
        out.extend_from_slice(GRAPH_MAGIC);
        out.extend_from_slice(&header_len.to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Decodes a graph, strictly (magic, header with exactly its fields, a
    /// body matching its SHA-256, nothing after the last node), and checks
    /// that it is bound to `binding`. The structure is checked when it is
    /// attached ([`AnnIndex::attach_graph`]).
    pub fn from_bytes(bytes: &[u8], binding: &str) -> Result<Self, crate::error::IndexError> {
        let mut at = 0;
        if graph_take(bytes, &mut at, GRAPH_MAGIC.len())? != GRAPH_MAGIC {
            return Err(graph_error("not a graph snapshot"));
        }
        let header_len = graph_u32(bytes, &mut at)? as usize;
        let header: GraphHeader = serde_json::from_slice(graph_take(bytes, &mut at, header_len)?)
            .map_err(|e| graph_error(&format!("header: {e}")))?;
        if header.binding != binding {
            return Err(graph_error("built over other vectors"));
        }
        let body = &bytes[at..];
        if hex::encode(Sha256::digest(body)) != header.body_sha256 {
            return Err(graph_error("body does not match its SHA-256"));
        }
        let mut at = 0;
        let mut nodes = Vec::with_capacity(header.nodes.min(body.len()));
        for _ in 0..header.nodes {
            let layers = usize::from(graph_take(body, &mut at, 1)?[0]);
            let mut levels = Vec::with_capacity(layers);
            for _ in 0..layers {
                let len = graph_u32(body, &mut at)? as usize;
                let raw = graph_take(
                    body,
                    &mut at,
                    len.checked_mul(4).ok_or_else(|| graph_error("length"))?,
                )?;
                levels.push(
                    raw.chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                );
            }
            nodes.push(levels);
        }
        if at != body.len() {
            return Err(graph_error("trailing bytes"));
        }
        Ok(GraphSnapshot {
            m: header.m,
            m0: header.m0,
            entry: header.entry,
            nodes,
        })
    }
}

impl AnnIndex {
    /// The graph over `order` (every live doc exactly once; node `i` of the
    /// snapshot is `order[i]`). Links to docs no longer live are left out
    /// (a search skips them anyway); a pending doc is a node with no
    /// layers. `None` when `order` is not the live docs.
    pub fn graph_snapshot(&self, order: &[DocId]) -> Option<GraphSnapshot> {
        if order.len() != self.live {
            return None;
        }
        let mut position = vec![u32::MAX; self.links.len()];
        for (i, &doc) in order.iter().enumerate() {
            let slot = position.get_mut(doc as usize)?;
            if !self.is_live(doc) || *slot != u32::MAX {
                return None;
            }
            *slot = u32::try_from(i).ok()?;
        }
        let nodes = order
            .iter()
            .map(|&doc| match self.node_level(doc) {
                Some(top) => (0..=top)
                    .map(|level| {
                        self.neighbours(doc, level)
                            .iter()
                            .map(|&n| position.get(n as usize).copied().unwrap_or(u32::MAX))
                            .filter(|&p| p != u32::MAX)
                            .collect()
                    })
                    .collect(),
                None => Vec::new(),
            })
            .collect();
        let entry = self.entry.map(|e| position[e as usize]);
        Some(GraphSnapshot {
            m: self.config.m,
            m0: self.config.m0,
            entry,
            nodes,
        })
    }

    /// Makes docs `0..n` (all live, all pending, nothing in the graph yet:
    /// a restore that stored the snapshot's vectors in its node order)
    /// the graph of `graph`, after checking that it is one this index could
    /// have built: the same `m` and `m0`, `n` nodes, every link to another
    /// node that has that layer, lists within the lazy-pruning bound, and
    /// an entry node on the top layer. On any failure nothing changes and
    /// the docs stay pending (searched exactly, absorbed later): a graph
    /// that does not fit is never used.
    pub fn attach_graph(&mut self, graph: &GraphSnapshot) -> Result<(), &'static str> {
        let n = graph.nodes.len();
        if graph.m != self.config.m || graph.m0 != self.config.m0 {
            return Err("built with other link counts");
        }
        if self.entry.is_some() || self.pending.len() != n || self.live != n {
            return Err("the index is not freshly restored");
        }
        if n > 0
            && self
                .pending
                .last()
                .is_none_or(|last| *last as usize != n - 1)
        {
            return Err("the restored docs are not 0..n");
        }
        let mut top: Option<usize> = None;
        for (node, levels) in graph.nodes.iter().enumerate() {
            if levels.len() > MAX_LAYERS {
                return Err("too many layers");
            }
            for (layer, list) in levels.iter().enumerate() {
                let max = self.max_links(layer);
                if list.len() > max + max / 2 {
                    return Err("a neighbour list past its bound");
                }
                for &other in list {
                    let ok = (other as usize) != node
                        && graph
                            .nodes
                            .get(other as usize)
                            .is_some_and(|o| o.len() > layer);
                    if !ok {
                        return Err("a link to a node without that layer");
                    }
                }
            }
            if !levels.is_empty() {
                top = Some(top.map_or(levels.len() - 1, |t| t.max(levels.len() - 1)));
            }
        }
        let max_level = match (graph.entry, top) {
            (None, None) => 0,
            (Some(e), Some(top))
                if graph
                    .nodes
                    .get(e as usize)
                    .is_some_and(|l| l.len() == top + 1) =>
            {
                top
            }
            _ => return Err("the entry node is not on the top layer"),
        };
        for (node, levels) in graph.nodes.iter().enumerate() {
            if levels.is_empty() {
                continue;
            }
            let doc = node as DocId;
            self.links[node] = Some(levels[1..].to_vec());
            self.set_neighbours(doc, 0, &levels[0]);
            self.pending.remove(&doc);
        }
        self.entry = graph.entry;
        self.max_level = max_level;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_a_plain_sum_at_every_length() {
        for n in [0usize, 1, 7, 8, 9, 24, 255, 256, 384] {
            let a: Vec<f32> = (0..n).map(|i| ((i * 37) % 11) as f32 / 7.0 - 0.5).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 13) % 5) as f32 / 3.0 - 0.7).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!(
                (dot(&a, &b) - plain).abs() <= 1e-4 * (1.0 + plain.abs()),
                "n={n}"
            );
        }
    }

    #[test]
    fn a_group_of_four_has_the_bits_of_dot() {
        for n in [0usize, 1, 7, 8, 9, 24, 255, 256, 383, 384] {
            let v: Vec<Vec<f32>> = (0..5)
                .map(|j| {
                    (0..n)
                        .map(|i| (((i + 3) * (j * 7 + 31)) % 101) as f32 / 37.0 - 1.3)
                        .collect()
                })
                .collect();
            let four = dots(&v[4], [&v[0], &v[1], &v[2], &v[3]]);
            for j in 0..4 {
                assert_eq!(
                    four[j].to_bits(),
                    dot(&v[4], &v[j]).to_bits(),
                    "n={n} j={j}"
                );
            }
        }
    }

    fn plan_of(config: &AnnConfig, live: usize, levels: usize, eligible: usize) -> SearchPlan {
        let (scan, graph) = plan_costs(config, 256, live, levels, eligible);
        if eligible <= config.exact_limit || scan <= graph {
            SearchPlan::ExactScan
        } else {
            SearchPlan::FilteredGraph
        }
    }

    #[test]
    fn the_planner_scans_unless_the_graph_is_estimated_cheaper() {
        let c = AnnConfig::default();
        // 256-d, default graph: up to a few hundred thousand eligible docs
        // the scan is cheaper (and exact).
        assert_eq!(plan_of(&c, 100_000, 5, 50_000), SearchPlan::ExactScan);
        assert_eq!(plan_of(&c, 100_000, 5, 1_000), SearchPlan::ExactScan);
        assert_eq!(plan_of(&c, 1_000_000, 6, 10_000), SearchPlan::ExactScan);
        assert_eq!(plan_of(&c, 1_000_000, 6, 100), SearchPlan::ExactScan);
        // Half of a million docs: the scan reads 500,000 vectors, the graph
        // is estimated cheaper.
        assert_eq!(
            plan_of(&c, 1_000_000, 6, 500_000),
            SearchPlan::FilteredGraph
        );
        assert_eq!(
            plan_of(&c, 1_000_000, 6, 1_000_000),
            SearchPlan::FilteredGraph
        );
        // The beam widens with 1/selectivity, bounded.
        assert_eq!(search_ef(&c, 1_000_000, 1_000_000, 10), 256);
        assert_eq!(search_ef(&c, 1_000_000, 500_000, 10), 512);
        assert_eq!(search_ef(&c, 1_000_000, 250_000, 10), 1024);
        assert_eq!(search_ef(&c, 1_000_000, 100, 10), 256 * 8);
        assert_eq!(search_ef(&c, 1_000, 1_000, 300), 300);
    }

    #[test]
    fn exact_keeps_the_best_k_in_similarity_then_doc_order() {
        let dim = 4;
        let mut ann = AnnIndex::new(dim, AnnConfig::default());
        // Docs 0..200: doc d points at angle d; docs 200.. repeat 0..50
        // (equal scores, so ties go to the lower doc).
        for d in 0..250u32 {
            let a = f64::from(d % 200) * 0.01;
            ann.insert(d, &[a.cos() as f32, a.sin() as f32, 0.0, 0.0]);
        }
        ann.remove(3);
        let mut set = DocSet::with_capacity(250);
        for d in (0..250).rev() {
            set.insert(d);
        }
        let q = [1.0, 0.0, 0.0, 0.0];
        let got: Vec<DocId> = ann.exact(&q, &set, 6).iter().map(|x| x.0).collect();
        assert_eq!(got, vec![0, 200, 1, 201, 2, 202]);
        let mut plain: Vec<Scored> = (0..250)
            .filter(|d| *d != 3)
            .map(|d| Scored(dot(&q, ann.vector(d)), d))
            .collect();
        plain.sort_by(|a, b| b.cmp(a));
        let want: Vec<DocId> = plain.iter().take(40).map(|s| s.1).collect();
        let got: Vec<DocId> = ann.exact(&q, &set, 40).iter().map(|x| x.0).collect();
        assert_eq!(got, want);
        assert!(ann.exact(&q, &set, 0).is_empty());
    }

    /// Few links per node, so that lists fill and get pruned in a small
    /// graph.
    fn few_links() -> AnnConfig {
        AnnConfig {
            m: 4,
            m0: 8,
            ..AnnConfig::default()
        }
    }

    #[test]
    fn link_lists_stay_within_the_lazy_pruning_bound() {
        let dim = 8;
        let mut ann = AnnIndex::new(dim, few_links());
        for d in 0..600u32 {
            let mut v: Vec<f32> = (0..dim)
                .map(|i| ((d as usize * 31 + i * 17) % 29) as f32 - 14.0)
                .collect();
            crate::embed::l2_normalise(&mut v);
            ann.insert(d, &v);
        }
        let mut longest = [0usize; 2];
        for doc in 0..600u32 {
            for level in 0..=ann.node_level(doc).expect("every doc is linked") {
                let i = usize::from(level > 0);
                longest[i] = longest[i].max(ann.neighbours(doc, level).len());
            }
        }
        // Lists reach past their size (so pruning really is lazy) but
        // never past 1.5x.
        assert!(longest[0] > 8 && longest[0] <= 12, "{longest:?}");
        assert!(longest[1] <= 6, "{longest:?}");
    }

    /// After inserts, removals and replacements (a doc number linked,
    /// removed and linked again), every list holds only docs in the graph
    /// on that layer, none twice and not the doc itself, within the
    /// lazy-pruning bound; a removed doc has no list left; and the graph
    /// attached from its snapshot to a fresh index is the same graph.
    #[test]
    fn a_graph_after_removals_and_replacements_links_only_its_nodes() {
        let dim = 16;
        let mut ann = AnnIndex::new(dim, few_links());
        let vector = |seed: u64| {
            let mut v = noise(seed, dim);
            crate::embed::l2_normalise(&mut v);
            v
        };
        let mut removed = Vec::new();
        for d in 0..1_200u32 {
            ann.insert(d, &vector(u64::from(d)));
            if d % 7 == 3 && d > 10 {
                ann.remove(d - 5);
                removed.push(d - 5);
            }
            if d % 11 == 0 && d > 20 {
                ann.insert(d - 13, &vector(u64::from(d) + 100_000));
            }
        }
        let mut lists = 0;
        for doc in 0..1_200u32 {
            let Some(top) = ann.node_level(doc) else {
                assert!(!ann.is_live(doc));
                assert!(ann.neighbours(doc, 0).is_empty());
                continue;
            };
            for level in 0..=top {
                let list = ann.neighbours(doc, level);
                let max = ann.max_links(level);
                assert!(list.len() <= max + max / 2, "{doc} {level} {list:?}");
                let mut sorted = list.to_vec();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), list.len(), "{doc} {level} {list:?}");
                for &n in list {
                    assert_ne!(n, doc);
                    assert!(ann.node_level(n).is_some_and(|t| t >= level), "{doc} {n}");
                }
                lists += usize::from(!list.is_empty());
            }
        }
        assert!(lists > 1_000, "{lists}");
        assert!(removed.iter().any(|&d| ann.node_level(d).is_none()));
        let order: Vec<DocId> = (0..1_200u32).filter(|&d| ann.is_live(d)).collect();
        let graph = ann.graph_snapshot(&order).expect("the live docs");
        let mut fresh = AnnIndex::new(dim, few_links());
        for (i, &doc) in order.iter().enumerate() {
            fresh.insert_pending(i as DocId, ann.vector(doc));
        }
        fresh.attach_graph(&graph).expect("the graph fits");
        let all: Vec<DocId> = (0..order.len() as DocId).collect();
        assert_eq!(fresh.graph_snapshot(&all), Some(graph));
    }

    /// Seeded pseudo-random values in [-0.5, 0.5).
    fn noise(seed: u64, n: usize) -> Vec<f32> {
        let mut z = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                z ^= z << 13;
                z ^= z >> 7;
                z ^= z << 17;
                (z >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// The byte scan's bound holds for every pair tried, among them the
    /// one built to be furthest from its byte score (a doc along the
    /// query's own rounding error), and vectors of any length.
    #[test]
    fn a_byte_score_lies_within_its_bound() {
        for dim in [7usize, 48, 384, 1_024] {
            let mut ann = AnnIndex::new(dim, AnnConfig::default());
            let mut queries: Vec<Vec<f32>> = (0..20).map(|s| noise(900 + s, dim)).collect();
            let spiky: Vec<f32> = (0..dim).map(|i| if i == 0 { 40.0 } else { 0.01 }).collect();
            queries.push(spiky.clone());
            let mut docs: Vec<Vec<f32>> = (0..200u64)
                .map(|s| {
                    let mut v = noise(s, dim);
                    // Lengths from 0.01 to 100.
                    let len = 10f32.powf((s % 5) as f32 - 2.0);
                    v.iter_mut().for_each(|x| *x *= len);
                    v
                })
                .collect();
            docs.push(spiky);
            for q in &queries {
                // Along q - q': the query's rounding counts in full.
                let probe = Probe::of(q);
                let along: Vec<f32> = q
                    .iter()
                    .zip(&probe.codes)
                    .map(|(v, &c)| v - probe.scale * f32::from(c))
                    .collect();
                docs.push(along);
            }
            for (d, v) in docs.iter().enumerate() {
                ann.insert(d as DocId, v);
            }
            let all: Vec<DocId> = (0..docs.len() as DocId).collect();
            for q in &queries {
                let probe = Probe::of(q);
                let (q_off, q_bytes) = byte_error(q, &probe.codes, probe.scale);
                for &d in &all {
                    let exact = dot(q, ann.vector(d));
                    let a = ann.approx(&probe, d);
                    let e = byte_bound((q_off, q_bytes), ann.byte_bounds[d as usize]);
                    assert!(
                        (exact - a).abs() <= e * 1.000_01 + 1e-30,
                        "dim {dim} doc {d}: exact {exact} bytes {a} bound {e}"
                    );
                }
            }
        }
    }

    /// The exact top-k is the f32 scan's, doc for doc and bit for bit,
    /// over every kind of eligible set, lengths, near ties, duplicates, a
    /// zero and a non-finite vector; and the byte pass leaves most docs
    /// unscored when the set is large.
    #[test]
    fn the_byte_pruned_scan_returns_the_f32_scan() {
        let dim = 96;
        let mut ann = AnnIndex::new(dim, AnnConfig::default());
        let mut n: DocId = 0;
        let mut add = |ann: &mut AnnIndex, v: Vec<f32>| {
            ann.insert(n, &v);
            n += 1;
        };
        for s in 0..2_000u64 {
            let mut v = noise(s, dim);
            crate::embed::l2_normalise(&mut v);
            add(&mut ann, v);
        }
        // Duplicates and near ties of one vector, of other lengths.
        let base = ann.vector(17).to_vec();
        for i in 0..40 {
            let tweak = noise(10_000 + i, dim);
            let v: Vec<f32> = base
                .iter()
                .zip(&tweak)
                .map(|(b, t)| b * (1.0 + (i % 3) as f32) + t * 1e-6 * (i % 2) as f32)
                .collect();
            add(&mut ann, v);
        }
        add(&mut ann, vec![0.0; dim]);
        let mut bad = vec![0.1; dim];
        bad[3] = f32::NAN;
        add(&mut ann, bad);
        ann.remove(5);
        let total = n;
        let mut pruned = 0;
        for (qi, every) in [1usize, 2, 3, 7, 50].into_iter().enumerate() {
            let mut docs = DocSet::with_capacity(total as usize);
            for d in (qi as DocId..total).step_by(every) {
                docs.insert(d);
            }
            for s in 0..12u64 {
                let mut q = noise(50_000 + s, dim);
                if s % 3 == 0 {
                    q = base.iter().zip(&q).map(|(b, x)| b + x * 0.01).collect();
                }
                for k in [1, 10, 37, 5_000] {
                    let want = ann.exact_f32(&q, &docs, k);
                    let got = ann.exact(&q, &docs, k);
                    let bits = |r: &[(DocId, f32)]| {
                        r.iter().map(|(d, s)| (*d, s.to_bits())).collect::<Vec<_>>()
                    };
                    assert_eq!(bits(&got), bits(&want), "every {every}, query {s}, k {k}");
                }
                let eligible = ann.eligible(&docs);
                if let Some(c) = ann.byte_candidates(&q, &eligible, 10)
                    && eligible.len() >= 1_000
                    && c.len() * 4 < eligible.len()
                {
                    pruned += 1;
                }
            }
        }
        assert!(pruned > 0, "the byte pass must leave docs unscored");
        let q = vec![f32::NAN; dim];
        let all = {
            let mut d = DocSet::with_capacity(total as usize);
            (0..total).for_each(|x| d.insert(x));
            d
        };
        assert_eq!(ann.exact(&q, &all, 3).len(), 3);
        assert!(ann.byte_candidates(&q, &ann.eligible(&all), 3).is_none());
    }

    /// The graph walks on bytes, but what a search returns is scored
    /// exactly: every score is [`dot`] of the query and the doc's f32
    /// vector, to the bit, in exact order; the walk's own (byte) scores
    /// differ from them; and a removed doc's bytes are zeroed with its
    /// vector.
    #[test]
    fn graph_searches_walk_on_bytes_and_return_exact_scores() {
        let dim = 48;
        let config = AnnConfig {
            exact_limit: 0,
            ..AnnConfig::default()
        };
        let mut ann = AnnIndex::new(dim, config);
        let vector = |seed: usize| {
            let mut v: Vec<f32> = (0..dim)
                .map(|i| ((seed * 7919 + i * 104_729) % 1_009) as f32 / 1_009.0 - 0.5)
                .collect();
            crate::embed::l2_normalise(&mut v);
            v
        };
        for d in 0..1_500u32 {
            ann.insert(d, &vector(d as usize));
        }
        let mut differs = 0;
        for seed in 5_000..5_020 {
            let q = vector(seed);
            let found = ann.graph_filtered(&q, None, 10);
            assert_eq!(found.len(), 10);
            for pair in found.windows(2) {
                assert!(pair[0].1 >= pair[1].1, "{found:?}");
            }
            let probe = Probe::of(&q);
            for &(doc, score) in &found {
                assert_eq!(score.to_bits(), dot(&q, ann.vector(doc)).to_bits());
                differs += usize::from(ann.approx(&probe, doc).to_bits() != score.to_bits());
            }
        }
        assert!(differs > 0, "the byte scores are approximations");
        ann.remove(3);
        assert!(ann.code(3).iter().all(|&c| c == 0));
        assert_eq!(ann.scales[3], 0.0);
    }
}
