//! The HNSW graph: link lists per layer, insertion (at once or deferred
//! and absorbed later), the layer walk, and removal with link repair.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vectors::Probe;
use super::{AnnIndex, GraphDelta};
use crate::scope::DocSet;
use crate::target::DocId;

#[derive(Clone, Copy, PartialEq)]
pub(super) struct Scored(pub(super) f32, pub(super) DocId);

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
    pub(super) fn max_links(&self, level: usize) -> usize {
        if level == 0 {
            self.config.m0
        } else {
            self.config.m
        }
    }

    /// Entries per doc in `layer0`: the list's length, then room for the
    /// longest list lazy pruning lets grow (see [`AnnIndex::connect`]).
    pub(super) fn slot0(&self) -> usize {
        1 + self.config.m0 + self.config.m0 / 2
    }

    /// The top layer of `doc` when it is in the graph.
    pub(super) fn node_level(&self, doc: DocId) -> Option<usize> {
        self.links.get(doc as usize)?.as_ref().map(Vec::len)
    }

    /// The neighbours of `doc` on `level` (none when it is not in the
    /// graph on that layer).
    pub(super) fn neighbours(&self, doc: DocId, level: usize) -> &[DocId] {
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

    /// Asks the memory for what [`AnnIndex::neighbours`] of `doc` on
    /// `level` reads, without waiting: the doc's link entry and, on layer
    /// 0, every cache line of its slot. Changes nothing.
    pub(super) fn prefetch_links(&self, doc: DocId, level: usize) {
        if let Some(entry) = self.links.get(doc as usize) {
            mosaic_kernels::prefetch(entry);
        }
        if level == 0 {
            self.each_slot_line(doc, mosaic_kernels::prefetch);
        }
    }

    /// Calls `f` with an entry in each 64-byte line of `doc`'s layer-0
    /// slot: every 16th entry from the first (four bytes each, so no line
    /// between the first and the last is skipped) and the last (with the
    /// default slot of 49 entries: 0, 16, 32 and 48).
    pub(super) fn each_slot_line(&self, doc: DocId, mut f: impl FnMut(&DocId)) {
        let slot = self.slot0();
        let start = doc as usize * slot;
        if let Some(list) = self.layer0.get(start..start + slot) {
            list.iter().step_by(16).for_each(&mut f);
            if !(slot - 1).is_multiple_of(16)
                && let Some(last) = list.last()
            {
                f(last);
            }
        }
    }

    /// Makes `list` the neighbours of `doc` on `level`, for a doc in the
    /// graph on that layer, its list within the lazy-pruning bound.
    pub(super) fn set_neighbours(&mut self, doc: DocId, level: usize, list: &[DocId]) {
        if let Some(touched) = self.touched.as_mut() {
            touched.push((doc, level));
        }
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
        if let Some(touched) = self.touched.as_mut() {
            touched.push((doc, level));
        }
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

    /// [`AnnIndex::absorb`], also telling what it decided, so that a copy
    /// of this index as it was before takes the same graph through
    /// [`AnnIndex::apply_delta`] without the neighbour searches.
    pub fn absorb_recorded(&mut self, budget: usize) -> (usize, GraphDelta) {
        self.touched = Some(Vec::new());
        let mut linked = Vec::new();
        for _ in 0..budget {
            let Some(doc) = self.pending.pop_first() else {
                break;
            };
            self.link(doc);
            linked.push((doc, self.node_level(doc).unwrap_or(0)));
        }
        let mut touched = self.touched.take().unwrap_or_default();
        touched.sort_unstable();
        touched.dedup();
        let lists = touched
            .into_iter()
            .map(|(doc, level)| (doc, level, self.neighbours(doc, level).to_vec()))
            .collect();
        let delta = GraphDelta {
            linked,
            lists,
            entry: self.entry,
            max_level: self.max_level,
        };
        (self.pending.len(), delta)
    }

    /// Makes this index the graph `delta` was recorded on
    /// ([`AnnIndex::absorb_recorded`]), given that it held the same
    /// vectors and graph as that index did before the linking.
    pub fn apply_delta(&mut self, delta: &GraphDelta) {
        for &(doc, level) in &delta.linked {
            let idx = doc as usize;
            if idx >= self.links.len() || !self.pending.remove(&doc) {
                continue;
            }
            self.links[idx] = Some(vec![Vec::new(); level]);
            self.set_neighbours(doc, 0, &[]);
        }
        for (doc, level, list) in &delta.lists {
            self.set_neighbours(*doc, *level, list);
        }
        self.entry = delta.entry;
        self.max_level = delta.max_level;
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

    pub(super) fn greedy(&self, q: &Probe, mut current: DocId, level: usize) -> DocId {
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
        // A doc's scale lies in an array of its own, at a place as random
        // as its bytes': asked for with them, or each score waits for a
        // second miss after its product.
        for &d in docs {
            let v = self.code(d);
            if let Some(first) = v.first() {
                mosaic_kernels::prefetch(first);
            }
            if let Some(next) = v.get(64) {
                mosaic_kernels::prefetch(next);
            }
            if let Some(scale) = self.scales.get(d as usize) {
                mosaic_kernels::prefetch(scale);
            }
        }
        self.each_product(q, docs, |d, p| {
            scores.push(p as f32 * (q.scale * self.scales[d as usize]));
        });
    }

    /// Calls `f` with each of `docs` and its bytes' integer product with
    /// `q`'s, in order, four docs per [`mosaic_kernels::dots_i8`] call.
    pub(super) fn each_product(&self, q: &Probe, docs: &[DocId], mut f: impl FnMut(DocId, i32)) {
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
    pub(super) fn search_layer(
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
        // More entry points than the beam: the beam keeps the best.
        while results.len() > ef {
            results.pop();
        }
        while let Some(c) = candidates.pop() {
            if results.len() >= ef
                && let Some(std::cmp::Reverse(worst)) = results.peek()
                && c.0 < worst.0
            {
                break;
            }
            // The best candidate left is most likely the next one
            // expanded: its link entry and list are asked for now, so
            // their misses overlap this one's scoring instead of
            // starting the next step (hnswlib does the same). A hint
            // only: the walk is the same whatever arrives when.
            if let Some(next) = candidates.peek() {
                self.prefetch_links(next.1, level);
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
}
