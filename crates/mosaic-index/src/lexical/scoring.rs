//! BM25 scoring: plain and over turn windows, the pruned top-`k` walk
//! and the exhaustive scorer it is checked against.

use std::collections::{HashMap, HashSet};

use super::postings::Stats;
use super::{Hit, LexicalIndex};
use crate::scope::{DocSet, Eligible};
use crate::target::DocId;
use crate::text::terms;

/// BM25 `k1` (per-mille) of plain searches and of the default funnel.
pub const BM25_K1_PERMILLE: u64 = 1_200;
/// BM25 `b` (per-mille) of plain searches and of the default funnel.
pub const BM25_B_PERMILLE: u64 = 750;

/// Lexical ranking options (see `FunnelConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexicalParams {
    /// BM25 `k1`, per-mille.
    pub k1_permille: u64,
    /// BM25 `b`, per-mille.
    pub b_permille: u64,
    /// Weight (per-mille) of each neighbouring turn in a turn window; 0
    /// scores each record alone.
    pub window_permille: u64,
    /// Neighbours on each side in a turn window (at least 1 when windows
    /// are on); the one at distance d weighs `window_permille`^d.
    pub window_radius: usize,
}

impl Default for LexicalParams {
    /// Plain BM25, each record alone.
    fn default() -> Self {
        LexicalParams {
            k1_permille: BM25_K1_PERMILLE,
            b_permille: BM25_B_PERMILLE,
            window_permille: 0,
            window_radius: 0,
        }
    }
}

/// BM25 inverse document frequency of a term found in `df` of `n` docs.
pub fn bm25_idf(n: u64, df: u64) -> f32 {
    if df == 0 {
        return 0.0;
    }
    (1.0 + (n as f32 - df as f32 + 0.5) / (df as f32 + 0.5)).ln()
}

/// Average document length of `n` docs of `total_len` terms (at least 1).
pub fn bm25_avgdl(n: u64, total_len: u64) -> f32 {
    (total_len as f32 / n as f32).max(1.0)
}

/// BM25 over turn windows as one read computes it: [`bm25_scores`] and the
/// in-memory target's pruned top-k score a doc with the same operations in
/// the same order, so both give the same floats.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowBm25 {
    k1: f32,
    b: f32,
    /// Weight of a neighbour at distance 1 (0 without windows).
    w: f32,
    /// Neighbours on each side (0 without windows).
    pub(super) radius: usize,
    /// The length a window is normalised by: the average doc length, times
    /// the window's mass with windows.
    avg: f32,
    /// `w.powi(d)` for `d < WEIGHTS`: a neighbour's weight is read, not
    /// computed again for every neighbour of every window (the same
    /// floats: the table holds what `powi` gives).
    weights: [f32; WEIGHTS],
}

/// Distances whose weight [`WindowBm25`] keeps in a table.
const WEIGHTS: usize = 9;

impl WindowBm25 {
    pub(crate) fn new(params: &LexicalParams, avgdl: f32) -> Self {
        let k1 = params.k1_permille as f32 / 1000.0;
        let b = params.b_permille as f32 / 1000.0;
        if params.window_permille == 0 {
            return WindowBm25 {
                k1,
                b,
                w: 0.0,
                radius: 0,
                avg: avgdl,
                weights: std::array::from_fn(|d| 0.0f32.powi(d as i32)),
            };
        }
        // A turn window: the doc plus up to `window_radius` eligible
        // neighbours on each side in its subject's timeline; a neighbour at
        // distance d weighs w^d in term counts and length.
        let w = params.window_permille as f32 / 1000.0;
        let radius = params.window_radius.max(1);
        let side_mass: f32 = (1..=radius).map(|d| w.powi(d as i32)).sum();
        WindowBm25 {
            k1,
            b,
            w,
            radius,
            avg: avgdl * (1.0 + 2.0 * side_mass),
            weights: std::array::from_fn(|d| w.powi(d as i32)),
        }
    }

    /// The weight of a neighbour at distance `dist`: `w.powi(dist)`.
    #[inline]
    fn weight(&self, dist: usize) -> f32 {
        match self.weights.get(dist) {
            Some(w) => *w,
            None => self.w.powi(dist as i32),
        }
    }

    fn bm25(&self, tf: f32, len: f32) -> f32 {
        tf * (self.k1 + 1.0) / (tf + self.k1 * (1.0 - self.b + self.b * len / self.avg))
    }

    /// The score of `doc` over its window `around` (eligible neighbours
    /// with their distance, as [`LexicalIndex::window_docs`] lists them):
    /// `tf` gives a doc's frequency of each query term (in query-term
    /// order, `idfs`' order), `None` for a doc holding none.
    pub(crate) fn score<'t, D: Copy>(
        &self,
        idfs: &[f32],
        window_tf: &mut [f32],
        doc: D,
        around: &[(D, usize)],
        doc_len: impl Fn(D) -> f32,
        tf: impl Fn(D) -> Option<&'t [f32]>,
    ) -> f32 {
        window_tf.fill(0.0);
        let mut len = doc_len(doc);
        if let Some(own) = tf(doc) {
            window_tf.iter_mut().zip(own).for_each(|(t, x)| *t += x);
        }
        for &(d, dist) in around {
            let weight = self.weight(dist);
            len += weight * doc_len(d);
            if let Some(tf) = tf(d) {
                window_tf
                    .iter_mut()
                    .zip(tf)
                    .for_each(|(t, x)| *t += weight * x);
            }
        }
        window_tf
            .iter()
            .zip(idfs)
            .filter(|(tf, _)| **tf > 0.0)
            .map(|(tf, idf)| idf * self.bm25(*tf, len))
            .sum()
    }

    /// The most one doc's terms can add to the score of any window holding
    /// it, at any distance: `idf * bm25(tf, len)` of the doc alone, per
    /// term, in `f64`. BM25 is concave in a window's term count (so the
    /// count's parts add at most their own scores), falls as the window
    /// grows (a window is at least as long as any of its docs' weighted
    /// length), and a doc's own weighted count and length score at most
    /// what it scores at weight 1. Needs `b <= 1`.
    pub(super) fn solo(&self, idf: f32, tf: u32, len: u32) -> f64 {
        let (k1, b, avg) = (f64::from(self.k1), f64::from(self.b), f64::from(self.avg));
        let tf = f64::from(tf);
        f64::from(idf) * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * f64::from(len) / avg))
    }

    /// The most a term of inverse frequency `idf` can add to any window's
    /// score: BM25 saturates below `k1 + 1`.
    pub(super) fn gain(&self, idf: f32) -> f64 {
        f64::from(idf) * (f64::from(self.k1) + 1.0)
    }

    /// The length of the window of the doc at `target` in `line` (a
    /// stretch of a timeline's eligible docs with their lengths) as
    /// [`WindowBm25::score`] sums it over the places [`window_places`]
    /// lists: the same operations in the same order (the doc, then those
    /// before it nearest first, then those after it), so the same float.
    pub(super) fn line_window_len(&self, line: &[(DocId, u32)], target: usize) -> f32 {
        let len = |x: usize| line[x].1 as f32;
        let mut out = len(target);
        for dist in 1..=self.radius.min(target) {
            out += self.weight(dist) * len(target - dist);
        }
        for dist in 1..=self.radius.min(line.len() - 1 - target) {
            out += self.weight(dist) * len(target + dist);
        }
        out
    }

    /// The most a window at least `len` long, holding each query term at
    /// most `tfs` times (in query-term order), can score for those terms,
    /// in `f64`: BM25 rises with a term's count and falls as the window
    /// grows (`b >= 0`).
    fn capped(&self, idfs: &[f32], tfs: &[f32], len: f32) -> f64 {
        let (k1, b, avg) = (f64::from(self.k1), f64::from(self.b), f64::from(self.avg));
        let norm = k1 * (1.0 - b + b * f64::from(len) / avg);
        idfs.iter()
            .zip(tfs)
            .filter(|(_, tf)| **tf > 0.0)
            .map(|(idf, tf)| {
                let tf = f64::from(*tf);
                f64::from(*idf) * tf * (k1 + 1.0) / (tf + norm)
            })
            .sum()
    }
}

/// The places in a stretch of `len` docs of the window of radius `radius`
/// of the doc at `i`, with their distance, as
/// [`LexicalIndex::window_docs`] lists them: those before it, nearest
/// first, then those after it.
pub(super) fn window_places(i: usize, radius: usize, len: usize, around: &mut Vec<(usize, usize)>) {
    around.clear();
    around.extend(
        (i.saturating_sub(radius)..i)
            .rev()
            .enumerate()
            .map(|(d, x)| (x, d + 1)),
    );
    let end = (i + 1 + radius).min(len);
    around.extend((i + 1..end).enumerate().map(|(d, x)| (x, d + 1)));
}

/// BM25 scores, optionally over turn windows, of every doc in `tfs` (the
/// eligible docs matching a query term: their frequency of each query
/// term, in query-term order) and, with windows, of their window docs.
/// `doc_len` gives a doc's length, `window` a doc's eligible window docs
/// with their distance. Unsorted. Shared by the in-memory index (as the
/// reference its pruned top-k is checked against) and the PostgreSQL
/// candidate source, so both compute the same floats.
pub fn bm25_scores<D: Copy + Eq + std::hash::Hash + Ord, S: std::hash::BuildHasher + Default>(
    tfs: &HashMap<D, Vec<f32>, S>,
    idfs: &[f32],
    avgdl: f32,
    params: &LexicalParams,
    doc_len: impl Fn(D) -> f32,
    window: impl Fn(D, usize) -> Vec<(D, usize)>,
) -> Vec<(D, f32)> {
    let scorer = WindowBm25::new(params, avgdl);
    let mut window_tf = vec![0.0f32; idfs.len()];
    let tf = |d: D| tfs.get(&d).map(Vec::as_slice);
    if scorer.radius == 0 {
        return tfs
            .keys()
            .map(|doc| {
                let s = scorer.score(idfs, &mut window_tf, *doc, &[], &doc_len, tf);
                (*doc, s)
            })
            .collect();
    }
    let radius = scorer.radius;
    // The windows of the matching docs are asked for once: they name the
    // targets, then score them.
    let mut targets: Vec<D> = Vec::with_capacity(tfs.len() * (1 + 2 * radius));
    let mut windows: HashMap<D, Vec<(D, usize)>, S> =
        HashMap::with_capacity_and_hasher(tfs.len(), S::default());
    for doc in tfs.keys() {
        let around = window(*doc, radius);
        targets.push(*doc);
        targets.extend(around.iter().map(|(d, _)| *d));
        windows.insert(*doc, around);
    }
    targets.sort_unstable();
    targets.dedup();
    let mut asked: Vec<(D, usize)> = Vec::new();
    targets
        .iter()
        .map(|doc| {
            let around = match windows.get(doc) {
                Some(known) => known,
                None => {
                    asked = window(*doc, radius);
                    &asked
                }
            };
            let s = scorer.score(idfs, &mut window_tf, *doc, around, &doc_len, tf);
            (*doc, s)
        })
        .collect()
}

/// A query term with at least this many postings in the partitions a read
/// searches is walked only if the terms left can still change the best `k`
/// (see [`LexicalIndex::score`]): deciding costs scoring the best hits
/// found so far, worth it only to skip a long list.
const LONG_POSTINGS: usize = 1_024;

/// Postings the walk asks the `Near` lines of ahead of the one it reads.
const PREFETCH_AHEAD: usize = 16;

/// Room a bound is given over the score it is compared with: far above
/// the rounding of the `f32` sums a score is made of.
const BOUND_SLACK: f64 = 1e-4;

/// The `k` best scores found in one read, lowest on top.
pub(super) struct TopScores {
    k: usize,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<TotalF32>>,
}

/// An `f32` ordered by `total_cmp`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct TotalF32(f32);

impl Eq for TotalF32 {}

impl PartialOrd for TotalF32 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TotalF32 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl TopScores {
    pub(super) fn new(k: usize) -> Self {
        TopScores {
            k,
            heap: std::collections::BinaryHeap::with_capacity(k + 1),
        }
    }

    pub(super) fn push(&mut self, score: f32) {
        // A full heap whose lowest is not below `score` keeps the same
        // scores whether `score` is pushed and the lowest popped or not.
        if self.heap.len() >= self.k
            && self
                .heap
                .peek()
                .is_some_and(|std::cmp::Reverse(kth)| TotalF32(score) <= *kth)
        {
            return;
        }
        self.heap.push(std::cmp::Reverse(TotalF32(score)));
        if self.heap.len() > self.k {
            self.heap.pop();
        }
    }

    /// Whether a doc whose score is at most `bound` cannot be among the
    /// best `k`: `k` docs already score above it, rounding allowed for. A
    /// bound equal to the `k`th best is not below it (the doc could tie
    /// and come first by record id).
    pub(super) fn below(&self, bound: f64) -> bool {
        self.heap.len() >= self.k
            && self.heap.peek().is_some_and(|std::cmp::Reverse(kth)| {
                bound * (1.0 + BOUND_SLACK) + BOUND_SLACK < f64::from(kth.0)
            })
    }
}

/// A hit and its bound, greatest first: highest bound, then lowest doc
/// (no two are equal: a doc is ranked once).
pub(super) struct ByBound(pub(super) f64, pub(super) DocId);

impl PartialEq for ByBound {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for ByBound {}

impl PartialOrd for ByBound {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByBound {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
    }
}

/// How much of the work a pruned lexical read did (for tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Pruning {
    /// Query terms whose postings were walked.
    pub(super) terms_walked: usize,
    /// Eligible docs holding a walked term.
    pub(super) hits: usize,
    /// Hits whose windows were looked at.
    pub(super) hits_opened: usize,
    /// Docs scored.
    pub(super) scored: usize,
}

/// The eligible docs holding a walked query term, in one pruned read.
pub(super) struct Hits {
    /// A hit's place in `tfs` and `solo`.
    at: HashMap<DocId, u32, foldhash::fast::RandomState>,
    /// The hits, in the order they were first found.
    found: Vec<DocId>,
    /// By doc, whether it is a hit: most docs a window or a bound looks
    /// at are not, and a bit answers that sooner than `at`.
    bits: Vec<u64>,
    /// Per hit, its frequency of each query term (in query-term order; 0
    /// for a term not walked), as the postings give it.
    tfs: Vec<f32>,
    /// Per hit, what its walked terms score alone ([`WindowBm25::solo`]).
    solo: Vec<f64>,
    /// Query terms.
    terms: usize,
}

impl Hits {
    /// Room for `hits` hits among docs numbered below `docs` (a read
    /// knows both before its walk: its postings' length and the index's
    /// doc count), so the walk does not grow them as it goes.
    fn with_capacity(terms: usize, hits: usize, docs: usize) -> Self {
        Hits {
            at: HashMap::with_capacity_and_hasher(hits, Default::default()),
            found: Vec::with_capacity(hits),
            bits: vec![0; docs.div_ceil(64)],
            tfs: Vec::with_capacity(hits * terms),
            solo: Vec::with_capacity(hits),
            terms,
        }
    }

    fn add(&mut self, doc: DocId, term: usize, tf: u32, solo: f64) {
        let next = u32::try_from(self.solo.len()).unwrap_or(u32::MAX);
        let i = *self.at.entry(doc).or_insert(next) as usize;
        if i == self.solo.len() {
            self.found.push(doc);
            self.tfs.resize(self.tfs.len() + self.terms, 0.0);
            self.solo.push(0.0);
            let word = (doc / 64) as usize;
            if self.bits.len() <= word {
                self.bits.resize(word + 1, 0);
            }
            self.bits[word] |= 1 << (doc % 64);
        }
        self.tfs[i * self.terms + term] += tf as f32;
        self.solo[i] += solo;
    }

    /// Whether `doc` holds a walked term.
    #[inline]
    fn holds(&self, doc: DocId) -> bool {
        self.bits
            .get((doc / 64) as usize)
            .is_some_and(|w| w & (1 << (doc % 64)) != 0)
    }

    /// What `doc`'s walked terms score alone (0 for a doc holding none).
    #[inline]
    fn solo(&self, doc: DocId) -> f64 {
        if !self.holds(doc) {
            return 0.0;
        }
        self.at.get(&doc).map_or(0.0, |i| self.solo[*i as usize])
    }

    /// `doc`'s frequencies of the query terms, `None` for a doc holding none
    /// of the walked ones.
    #[inline]
    fn tfs(&self, doc: DocId) -> Option<&[f32]> {
        self.get(doc).map(|(tfs, _)| tfs)
    }

    /// [`Hits::tfs`] and [`Hits::solo`] of a doc holding a walked term, in
    /// one lookup.
    #[inline]
    fn get(&self, doc: DocId) -> Option<(&[f32], f64)> {
        if !self.holds(doc) {
            return None;
        }
        let i = *self.at.get(&doc)? as usize;
        Some((
            self.tfs.get(i * self.terms..(i + 1) * self.terms)?,
            *self.solo.get(i)?,
        ))
    }
}

/// The scoring state of one pruned lexical read.
pub(super) struct ReadScores<'r> {
    pub(super) index: &'r LexicalIndex,
    pub(super) query: &'r [(u32, f32)],
    pub(super) idfs: &'r [f32],
    pub(super) scorer: WindowBm25,
    pub(super) docs: &'r DocSet,
    pub(super) top: TopScores,
    /// Every doc scored, with its score.
    pub(super) scored: Vec<(DocId, f32)>,
    pub(super) seen: HashSet<DocId, foldhash::fast::RandomState>,
    /// Docs' frequencies of the query terms, read off their own terms
    /// (while some terms are not walked).
    pub(super) tfs: HashMap<DocId, Option<Vec<f32>>, foldhash::fast::RandomState>,
    pub(super) window_tf: Vec<f32>,
}

impl ReadScores<'_> {
    /// Scores `doc` over its eligible `window` (as `window_docs` gives it).
    /// `complete`: the hits of every query term, which then give every
    /// doc's frequencies; else they are read off each doc's own terms.
    pub(super) fn score_window(
        &mut self,
        doc: DocId,
        window: &[(DocId, usize)],
        complete: Option<&Hits>,
    ) {
        let index = self.index;
        let score = match complete {
            Some(hits) => self.scorer.score(
                self.idfs,
                &mut self.window_tf,
                doc,
                window,
                |d| index.doc_len(d),
                |d| hits.tfs(d),
            ),
            None => {
                for d in std::iter::once(doc).chain(window.iter().map(|(d, _)| *d)) {
                    if !self.tfs.contains_key(&d) {
                        let tf = self.query_tfs(d);
                        self.tfs.insert(d, tf);
                    }
                }
                let tfs = &self.tfs;
                self.scorer.score(
                    self.idfs,
                    &mut self.window_tf,
                    doc,
                    window,
                    |d| index.doc_len(d),
                    |d| tfs.get(&d).and_then(|x| x.as_deref()),
                )
            }
        };
        self.seen.insert(doc);
        self.scored.push((doc, score));
        self.top.push(score);
    }

    /// Scores the doc at `target` in `line` (a stretch of a timeline's
    /// eligible docs, in time order, each with its length) over its window
    /// `around` (places in `line` with their distance, as
    /// [`LexicalIndex::window_docs`] lists them): the same operations as
    /// [`ReadScores::score_window`], the lengths read off the line.
    fn score_line(
        &mut self,
        line: &[(DocId, u32)],
        target: usize,
        around: &[(usize, usize)],
        complete: Option<&Hits>,
    ) {
        let doc_len = |i: usize| line[i].1 as f32;
        let score = match complete {
            Some(hits) => self.scorer.score(
                self.idfs,
                &mut self.window_tf,
                target,
                around,
                doc_len,
                |i| hits.tfs(line[i].0),
            ),
            None => {
                for i in std::iter::once(target).chain(around.iter().map(|(i, _)| *i)) {
                    let d = line[i].0;
                    if !self.tfs.contains_key(&d) {
                        let tf = self.query_tfs(d);
                        self.tfs.insert(d, tf);
                    }
                }
                let tfs = &self.tfs;
                self.scorer.score(
                    self.idfs,
                    &mut self.window_tf,
                    target,
                    around,
                    doc_len,
                    |i| tfs.get(&line[i].0).and_then(|x| x.as_deref()),
                )
            }
        };
        let doc = line[target].0;
        self.seen.insert(doc);
        self.scored.push((doc, score));
        self.top.push(score);
    }

    /// `doc`'s frequency of each query term (as the postings give it), or
    /// `None` when it holds none.
    fn query_tfs(&self, doc: DocId) -> Option<Vec<f32>> {
        let d = self.index.backend.docs.get(doc as usize)?.as_ref()?;
        let mut out: Option<Vec<f32>> = None;
        for (tid, tf) in &d.terms {
            if let Some(qi) = self.query.iter().position(|(q, _)| q == tid) {
                out.get_or_insert_with(|| vec![0.0; self.query.len()])[qi] += *tf as f32;
            }
        }
        out
    }

    /// Scores the windows of the `k` hits that score highest alone, so the
    /// `k`th best score is a bar the terms not walked yet can be held to.
    fn score_best(&mut self, hits: &Hits, k: usize) {
        let mut best: Vec<(f64, DocId)> = hits
            .at
            .iter()
            .map(|(d, i)| (hits.solo[*i as usize], *d))
            .collect();
        let order = |x: &(f64, DocId), y: &(f64, DocId)| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1));
        if best.len() > k {
            best.select_nth_unstable_by(k - 1, order);
            best.truncate(k);
        }
        for (_, doc) in best {
            if !self.seen.contains(&doc) {
                let window = self.index.window_docs(doc, self.docs, self.scorer.radius);
                self.score_window(doc, &window, None);
            }
        }
    }
}

impl LexicalIndex {
    /// BM25 top-`k` among `eligible` records of `tenant_id`/`policy`.
    /// Ties are broken by record id.
    pub fn search(
        &self,
        query: &str,
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
    ) -> Vec<Hit> {
        let docs = self.resolve(eligible, tenant_id, policy_sha256);
        self.search_docs(&terms(query), &docs, k)
    }

    pub(crate) fn search_docs(&self, query_terms: &[String], docs: &DocSet, k: usize) -> Vec<Hit> {
        self.search_with(query_terms, docs, k, &LexicalParams::default())
    }

    /// The docs `eligible` resolves to here (live records of `tenant_id`
    /// under `policy_sha256`), to search many times with
    /// [`LexicalIndex::search_docs_params`], as a read of an unchanged
    /// scope keeps them.
    pub fn eligible_docs(
        &self,
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
    ) -> DocSet {
        self.resolve(eligible, tenant_id, policy_sha256)
    }

    /// BM25 top-`k` among `docs` (see [`LexicalIndex::eligible_docs`]),
    /// over turn windows with `params`' windows: the funnel's lexical list,
    /// on its own. Ties are broken by record id.
    pub fn search_docs_params(
        &self,
        query: &str,
        docs: &DocSet,
        k: usize,
        params: &LexicalParams,
    ) -> Vec<Hit> {
        self.search_with(&terms(query), docs, k, params)
    }

    /// BM25, optionally over turn windows.
    pub(crate) fn search_with(
        &self,
        query_terms: &[String],
        docs: &DocSet,
        k: usize,
        params: &LexicalParams,
    ) -> Vec<Hit> {
        self.search_with_docs(query_terms, docs, k, params)
            .into_iter()
            .map(|(_, hit)| hit)
            .collect()
    }

    /// [`LexicalIndex::search_with`], each hit with its doc.
    pub(crate) fn search_with_docs(
        &self,
        query_terms: &[String],
        docs: &DocSet,
        k: usize,
        params: &LexicalParams,
    ) -> Vec<(DocId, Hit)> {
        let Some(stats) = self.stats(docs) else {
            return Vec::new();
        };
        let mut query: Vec<(u32, f32)> = Vec::new();
        let mut unique: Vec<&String> = query_terms.iter().collect();
        unique.sort();
        unique.dedup();
        for term in unique {
            if let Some(tid) = self.backend.vocab.get(term.as_str()) {
                query.push((*tid, 1.0));
            }
        }
        self.score(&query, docs, &stats, params, k)
            .into_iter()
            .filter_map(|(doc, score)| {
                self.record_of(doc).map(|r| {
                    (
                        doc,
                        Hit {
                            record_id: r.to_owned(),
                            score,
                        },
                    )
                })
            })
            .collect()
    }

    /// The best `k` eligible docs by BM25 (over turn windows with
    /// `params`' windows), best first, ties by record id: the exhaustive
    /// scorer's answer ([`LexicalIndex::score_exhaustive`]), to the bit,
    /// with only the docs that can still be among the best `k` scored.
    ///
    /// Dynamic pruning in the manner of MaxScore, with bounds that hold for
    /// a turn window whatever its neighbours lend it:
    ///
    /// - per term, `idf (k1 + 1)` ([`WindowBm25::gain`]): no window scores
    ///   more for a term. Terms are walked highest bound first; before a
    ///   long posting list is walked, the best hits so far are scored, and
    ///   once the `k`th best score found is above what the terms not walked
    ///   can give together, they are not walked at all (a speaker's name
    ///   that half of a subject's records hold). The docs found are still
    ///   scored for every query term, read off their own terms.
    /// - per hit, over its line (its eligible docs within twice the
    ///   radius, which hold every window holding it), the tighter of: what
    ///   the line's docs' walked terms score alone, added
    ///   ([`WindowBm25::solo`]); and BM25 of the line's count of each
    ///   walked term at the length of the shortest window holding the hit
    ///   (a window counts a term at most as often as the line, and is at
    ///   least that long). Plus what the terms not walked can add. A line
    ///   is read off the docs' `Near` lines, a cache line each, with the
    ///   docs' lengths. Hits are taken highest bound first, and the walk
    ///   stops at the first whose bound is below the `k`th best score
    ///   found. Each window around a hit is bounded again on its own docs
    ///   before its score is computed.
    ///
    /// A doc none of whose windows could reach the `k`th best is never
    /// scored, so it could not have been among the best `k`; every score
    /// computed is the exhaustive one (the same [`WindowBm25::score`] over
    /// the same window). Bounds are compared with room for rounding.
    fn score(
        &self,
        query: &[(u32, f32)],
        docs: &DocSet,
        stats: &Stats,
        params: &LexicalParams,
        k: usize,
    ) -> Vec<(DocId, f32)> {
        self.score_pruned(query, docs, stats, params, k).0
    }

    /// [`LexicalIndex::score`], with how much of the work it did.
    pub(super) fn score_pruned(
        &self,
        query: &[(u32, f32)],
        docs: &DocSet,
        stats: &Stats,
        params: &LexicalParams,
        k: usize,
    ) -> (Vec<(DocId, f32)>, Pruning) {
        if k == 0 || query.is_empty() {
            return (Vec::new(), Pruning::default());
        }
        // The per-doc bound needs BM25 to fall as a window grows (b <= 1).
        if params.b_permille > 1_000 {
            let scored = self.score_exhaustive(query, docs, stats, params, k);
            return (scored, Pruning::default());
        }
        let b = &self.backend;
        let scorer = WindowBm25::new(params, stats.avgdl);
        let radius = scorer.radius;
        let idfs: Vec<f32> = query.iter().map(|(tid, _)| self.idf(stats, *tid)).collect();
        let gains: Vec<f64> = idfs.iter().map(|idf| scorer.gain(*idf)).collect();
        let mut order: Vec<usize> = (0..query.len()).collect();
        order.sort_by(|x, y| gains[*y].total_cmp(&gains[*x]).then(x.cmp(y)));
        let mut walked = vec![false; query.len()];
        let mut pruning = Pruning::default();
        let mut read = ReadScores {
            index: self,
            query,
            idfs: &idfs,
            scorer,
            docs,
            top: TopScores::new(k),
            scored: Vec::new(),
            seen: HashSet::default(),
            tfs: HashMap::default(),
            window_tf: vec![0.0; query.len()],
        };
        // Each eligible doc holding a walked term: its frequencies and what
        // its walked terms score alone.
        let most_hits: usize = order
            .iter()
            .map(|qi| {
                stats
                    .partitions
                    .iter()
                    .filter_map(|p| b.partitions[*p as usize].postings.get(&query[*qi].0))
                    .map(Vec::len)
                    .sum::<usize>()
            })
            .sum();
        let mut hits = Hits::with_capacity(query.len(), most_hits, b.docs.len());
        for &qi in &order {
            let tid = query[qi].0;
            let lists: Vec<&[(DocId, u32)]> = stats
                .partitions
                .iter()
                .filter_map(|p| b.partitions[*p as usize].postings.get(&tid))
                .map(Vec::as_slice)
                .collect();
            let postings: usize = lists.iter().map(|l| l.len()).sum();
            if postings >= LONG_POSTINGS {
                // The best hits so far, scored, set the bar the terms left
                // must clear.
                read.score_best(&hits, k);
                let left: f64 = order
                    .iter()
                    .filter(|i| !walked[**i])
                    .map(|i| gains[*i])
                    .sum();
                if read.top.below(left) {
                    break;
                }
            }
            walked[qi] = true;
            pruning.terms_walked += 1;
            for list in lists {
                for (j, &(doc, tf)) in list.iter().enumerate() {
                    // A doc's length is on its `Near` line, at a random
                    // place of a large array: the lines of the postings a
                    // little ahead are asked for before they are needed,
                    // so their misses overlap.
                    if let Some(ahead) = list.get(j + PREFETCH_AHEAD)
                        && let Some(near) = b.near.get(ahead.0 as usize)
                    {
                        mosaic_kernels::prefetch(near);
                    }
                    if docs.contains(doc) {
                        let len = b.len_of(doc);
                        hits.add(doc, qi, tf, scorer.solo(idfs[qi], tf, len));
                    }
                }
            }
        }
        // What the terms not walked can add to any window.
        let left: f64 = (0..query.len())
            .filter(|i| !walked[*i])
            .map(|i| gains[i])
            .sum();
        // With every term walked the hits hold every doc's frequencies.
        let complete = walked.iter().all(|w| *w).then_some(&hits);
        // Every window holding a hit lies within twice the radius of it:
        // the hit's line, its eligible docs within twice the radius, in
        // time order, with their lengths. A hit is bounded by the tighter
        // of two bounds on the windows of the docs within the radius of
        // it: what the line's docs score alone, added; and BM25 of the
        // line's counts of each walked term, added, at the shortest of
        // those windows (a window holds each term at most as often as the
        // whole line, weights being at most 1, and is at least as long as
        // the shortest).
        let mut line: Vec<(DocId, u32)> = Vec::new();
        let mut around: Vec<(usize, usize)> = Vec::new();
        let mut line_tf = vec![0.0f32; query.len()];
        let mut ranked: Vec<(f64, DocId)> = Vec::with_capacity(hits.solo.len());
        for (j, &doc) in hits.found.iter().enumerate() {
            // The lines a little ahead are asked for before they are read
            // (see the postings walk).
            if let Some(ahead) = hits.found.get(j + PREFETCH_AHEAD)
                && let Some(near) = b.near.get(*ahead as usize)
            {
                mosaic_kernels::prefetch(near);
            }
            let at = self.line_of(doc, docs, 2 * radius, &mut line);
            let (first, last) = (at - at.min(radius), (at + radius).min(line.len() - 1));
            let mut alone = 0.0;
            line_tf.fill(0.0);
            for (d, _) in &line {
                if let Some((tf, solo)) = hits.get(*d) {
                    line_tf.iter_mut().zip(tf).for_each(|(t, x)| *t += x);
                    alone += solo;
                }
            }
            let mut shortest = f32::INFINITY;
            for i in first..=last {
                shortest = shortest.min(scorer.line_window_len(&line, i));
            }
            let capped = scorer.capped(&idfs, &line_tf, shortest);
            ranked.push((alone.min(capped) + left, doc));
        }
        // Taken highest bound first, ties by doc, off a heap: the walk
        // stops after a few of them, so most are never put in order.
        pruning.hits = ranked.len();
        let mut ranked: std::collections::BinaryHeap<ByBound> =
            ranked.into_iter().map(|(b, d)| ByBound(b, d)).collect();
        while let Some(ByBound(hit_bound, hit)) = ranked.pop() {
            if read.top.below(hit_bound) {
                break;
            }
            pruning.hits_opened += 1;
            let at = self.line_of(hit, docs, 2 * radius, &mut line);
            let (first, last) = (at - at.min(radius), (at + radius).min(line.len() - 1));
            for i in first..=last {
                if read.seen.contains(&line[i].0) {
                    continue;
                }
                window_places(i, radius, line.len(), &mut around);
                let most = hits.solo(line[i].0)
                    + around
                        .iter()
                        .map(|(x, _)| hits.solo(line[*x].0))
                        .sum::<f64>()
                    + left;
                if read.top.below(most) {
                    continue;
                }
                read.score_line(&line, i, &around, complete);
            }
        }
        pruning.scored = read.scored.len();
        let scored = std::mem::take(&mut read.scored);
        (self.best_k(scored, k), pruning)
    }

    /// `doc`'s line: up to `reach` eligible docs on each side of it in its
    /// subject's timeline, and it, in time order, each with its length,
    /// into `line` (cleared first); the place of `doc` in it.
    fn line_of(
        &self,
        doc: DocId,
        docs: &DocSet,
        reach: usize,
        line: &mut Vec<(DocId, u32)>,
    ) -> usize {
        line.clear();
        self.walk_side(doc, docs, 0, reach, |d, len| line.push((d, len)));
        let at = line.len();
        line.reverse();
        line.push((doc, self.backend.len_of(doc)));
        self.walk_side(doc, docs, 1, reach, |d, len| line.push((d, len)));
        at
    }

    /// Scores every eligible doc matching a query term (and, with windows,
    /// their eligible neighbours); the best `k`, best first, ties by record
    /// id. The reference [`LexicalIndex::score`] is checked against, and
    /// what it answers when BM25's `b` is above 1 (no pruning bound holds).
    pub(super) fn score_exhaustive(
        &self,
        query: &[(u32, f32)],
        docs: &DocSet,
        stats: &Stats,
        params: &LexicalParams,
        k: usize,
    ) -> Vec<(DocId, f32)> {
        let b = &self.backend;
        // Term frequencies of the eligible matching docs, per query term
        // (looked up once per window neighbour: a fast hash of the id).
        let mut tfs: HashMap<DocId, Vec<f32>, foldhash::fast::RandomState> = HashMap::default();
        let mut idfs = Vec::with_capacity(query.len());
        for (qi, &(tid, _)) in query.iter().enumerate() {
            idfs.push(self.idf(stats, tid));
            for p in &stats.partitions {
                let Some(list) = b.partitions[*p as usize].postings.get(&tid) else {
                    continue;
                };
                for &(doc, tf) in list {
                    if docs.contains(doc) {
                        tfs.entry(doc).or_insert_with(|| vec![0.0; query.len()])[qi] += tf as f32;
                    }
                }
            }
        }
        let scored = bm25_scores(
            &tfs,
            &idfs,
            stats.avgdl,
            params,
            |d| self.doc_len(d),
            |d, radius| self.window_docs(d, docs, radius),
        );
        self.best_k(scored, k)
    }

    /// The best `k` of `scored`, best first; equal scores by record id (a
    /// total order: a doc has one record id), so the best `k` are picked
    /// before they are sorted, rather than sorting every scored doc.
    fn best_k(&self, mut scored: Vec<(DocId, f32)>, k: usize) -> Vec<(DocId, f32)> {
        let order = |a: &(DocId, f32), b: &(DocId, f32)| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.record_of(a.0).cmp(&self.record_of(b.0)))
        };
        if scored.len() > k {
            if k == 0 {
                return Vec::new();
            }
            scored.select_nth_unstable_by(k - 1, order);
            scored.truncate(k);
        }
        scored.sort_by(order);
        scored
    }
}

/// Best first; equal scores by record id; `hit` gives each item's hit.
pub(crate) fn sort_hits_by<T>(items: &mut [T], hit: impl Fn(&T) -> &Hit) {
    items.sort_by(|a, b| {
        let (a, b) = (hit(a), hit(b));
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.record_id.cmp(&b.record_id))
    });
}
