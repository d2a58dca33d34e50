//! BM25 over a small in-memory inverted index, with postings partitioned by
//! scope (tenant + subject) so a selective read touches only its own
//! partitions, and statistics (document count, average length, document
//! frequency) computed over the partitions searched, so one tenant's data
//! never shapes another's scores.
//!
//! Turn windows (used by the funnel): a record can be scored over its own
//! terms plus those of its eligible neighbours in the subject's timeline,
//! down-weighted by distance, so a reply that answers a question without
//! repeating its words is still found. Ineligible records never lend terms.
//!
//! Speaker labels (`Caroline: ...`, see `text::speaker_label`) are kept
//! per record, so the funnel can prefer the lines of a speaker a query
//! names.
//!
//! Useful for: exact words, names, rare terms; claim-key exact matches; a
//! subject's records in time order (neighbouring-record context).
//! Not useful for: paraphrase (see the vector index).

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::error::IndexError;
use crate::fenced::{Backend, FencedIndex};
use crate::scope::{DocSet, Eligible};
use crate::target::{DocId, LiveEntry};
use crate::text::{Role, places_in_time, speaker_label, speaker_role, states_change, terms};

/// BM25 `k1` (per-mille) of plain searches and of the default funnel.
pub const BM25_K1_PERMILLE: u64 = 1_200;
/// BM25 `b` (per-mille) of plain searches and of the default funnel.
pub const BM25_B_PERMILLE: u64 = 750;

#[derive(Default)]
struct Partition {
    /// By term id (numbered in order of first appearance, not chosen by
    /// any client): a fast hash.
    postings: HashMap<u32, Vec<(DocId, u32)>, foldhash::fast::RandomState>,
    n_docs: u64,
    total_len: u64,
    timeline: BTreeSet<(u64, DocId)>,
}

struct LexDoc {
    partition: u32,
    len: u32,
    created_at_unix_ms: u64,
    terms: Vec<(u32, u32)>,
    /// Term ids of the speaker label, sorted.
    speaker: Vec<u32>,
    /// The role the speaker label names (`user:`, `assistant:`), if any.
    role: Option<Role>,
    /// Whether the line places something in time (`text::places_in_time`).
    timed: bool,
    /// Whether the line states a change (`text::states_change`).
    changes: bool,
    claims: Vec<(String, String)>,
}

/// Corpus statistics of the partitions one search touches.
struct Stats {
    partitions: Vec<u32>,
    n: u64,
    avgdl: f32,
}

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

/// The BM25 backend.
#[derive(Default)]
pub struct LexicalBackend {
    /// Looked up once per term of every text published and every query,
    /// and per query term and candidate for the speaker prior: hashed with
    /// foldhash (randomly seeded per process, as the fence's slots are)
    /// rather than SipHash.
    vocab: HashMap<String, u32, foldhash::quality::RandomState>,
    partition_ids: HashMap<(String, String), u32>,
    partitions: Vec<Partition>,
    docs: Vec<Option<LexDoc>>,
    /// By doc: the docs just before and just after it in its subject's
    /// timeline ([`NO_DOC`] at either end), so a turn window is a few steps
    /// along these links rather than two walks into the timeline.
    links: Vec<[DocId; 2]>,
    /// By doc: its length (1 for a doc not held), read for every doc of
    /// every window scored, so kept apart from the rest of a doc.
    lens: Vec<u32>,
    claims: HashMap<(String, String), BTreeSet<DocId>>,
}

/// No doc: the end of a timeline's links.
const NO_DOC: DocId = DocId::MAX;

/// Prepared lexical document: what BM25 and the speaker prior need of a
/// text, as the analyzer (`text::terms`) gives it. The PostgreSQL lexical
/// target stores exactly this, so both rank alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexPrepared {
    /// Distinct terms with their frequencies, sorted by term.
    pub terms: Vec<(String, u32)>,
    /// Number of terms (the document length).
    pub len: u32,
    /// Distinct terms of the speaker label, sorted.
    pub speaker: Vec<String>,
    /// The role the speaker label names, if any.
    pub role: Option<Role>,
    /// Whether the text places something in time (`text::places_in_time`).
    pub timed: bool,
    /// Whether the text states a change (`text::states_change`).
    pub changes: bool,
}

/// Analyses one text for the lexical index.
pub fn analyse(text: &str) -> LexPrepared {
    let all = terms(text);
    let label = speaker_label(text);
    let role = speaker_role(label);
    let mut speaker = terms(label);
    speaker.sort();
    speaker.dedup();
    let len = u32::try_from(all.len()).unwrap_or(u32::MAX);
    let mut counts: HashMap<String, u32> = HashMap::new();
    for t in all {
        *counts.entry(t).or_default() += 1;
    }
    let mut terms: Vec<(String, u32)> = counts.into_iter().collect();
    terms.sort();
    LexPrepared {
        terms,
        len,
        speaker,
        role,
        timed: places_in_time(text),
        changes: states_change(text),
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
    radius: usize,
    /// The length a window is normalised by: the average doc length, times
    /// the window's mass with windows.
    avg: f32,
}

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
            let weight = self.w.powi(dist as i32);
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
    fn solo(&self, idf: f32, tf: u32, len: u32) -> f64 {
        let (k1, b, avg) = (f64::from(self.k1), f64::from(self.b), f64::from(self.avg));
        let tf = f64::from(tf);
        f64::from(idf) * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * f64::from(len) / avg))
    }

    /// The most a term of inverse frequency `idf` can add to any window's
    /// score: BM25 saturates below `k1 + 1`.
    fn gain(&self, idf: f32) -> f64 {
        f64::from(idf) * (f64::from(self.k1) + 1.0)
    }
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

/// Room a bound is given over the score it is compared with: far above
/// the rounding of the `f32` sums a score is made of.
const BOUND_SLACK: f64 = 1e-4;

/// The `k` best scores found in one read, lowest on top.
struct TopScores {
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
    fn new(k: usize) -> Self {
        TopScores {
            k,
            heap: std::collections::BinaryHeap::with_capacity(k + 1),
        }
    }

    fn push(&mut self, score: f32) {
        self.heap.push(std::cmp::Reverse(TotalF32(score)));
        if self.heap.len() > self.k {
            self.heap.pop();
        }
    }

    /// Whether a doc whose score is at most `bound` cannot be among the
    /// best `k`: `k` docs already score above it, rounding allowed for. A
    /// bound equal to the `k`th best is not below it (the doc could tie
    /// and come first by record id).
    fn below(&self, bound: f64) -> bool {
        self.heap.len() >= self.k
            && self.heap.peek().is_some_and(|std::cmp::Reverse(kth)| {
                bound * (1.0 + BOUND_SLACK) + BOUND_SLACK < f64::from(kth.0)
            })
    }
}

/// How much of the work a pruned lexical read did (for tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pruning {
    /// Query terms whose postings were walked.
    terms_walked: usize,
    /// Eligible docs holding a walked term.
    hits: usize,
    /// Hits whose windows were looked at.
    hits_opened: usize,
    /// Docs scored.
    scored: usize,
}

/// The eligible docs holding a walked query term, in one pruned read.
struct Hits {
    /// A hit's place in `tfs` and `solo`.
    at: HashMap<DocId, u32, foldhash::fast::RandomState>,
    /// Per hit, its frequency of each query term (in query-term order; 0
    /// for a term not walked), as the postings give it.
    tfs: Vec<f32>,
    /// Per hit, what its walked terms score alone ([`WindowBm25::solo`]).
    solo: Vec<f64>,
    /// Query terms.
    terms: usize,
}

impl Hits {
    fn new(terms: usize) -> Self {
        Hits {
            at: HashMap::default(),
            tfs: Vec::new(),
            solo: Vec::new(),
            terms,
        }
    }

    fn add(&mut self, doc: DocId, term: usize, tf: u32, solo: f64) {
        let next = u32::try_from(self.solo.len()).unwrap_or(u32::MAX);
        let i = *self.at.entry(doc).or_insert(next) as usize;
        if i == self.solo.len() {
            self.tfs.resize(self.tfs.len() + self.terms, 0.0);
            self.solo.push(0.0);
        }
        self.tfs[i * self.terms + term] += tf as f32;
        self.solo[i] += solo;
    }

    /// What `doc`'s walked terms score alone (0 for a doc holding none).
    fn solo(&self, doc: DocId) -> f64 {
        self.at.get(&doc).map_or(0.0, |i| self.solo[*i as usize])
    }

    /// `doc`'s frequencies of the query terms, `None` for a doc holding none
    /// of the walked ones.
    fn tfs(&self, doc: DocId) -> Option<&[f32]> {
        let i = *self.at.get(&doc)? as usize;
        self.tfs.get(i * self.terms..(i + 1) * self.terms)
    }
}

/// The scoring state of one pruned lexical read.
struct ReadScores<'r> {
    index: &'r LexicalIndex,
    query: &'r [(u32, f32)],
    idfs: &'r [f32],
    scorer: WindowBm25,
    docs: &'r DocSet,
    top: TopScores,
    /// Every doc scored, with its score.
    scored: Vec<(DocId, f32)>,
    seen: HashSet<DocId, foldhash::fast::RandomState>,
    /// Docs' frequencies of the query terms, read off their own terms
    /// (while some terms are not walked).
    tfs: HashMap<DocId, Option<Vec<f32>>, foldhash::fast::RandomState>,
    window_tf: Vec<f32>,
}

impl ReadScores<'_> {
    /// Scores `doc` over its eligible `window` (as `window_docs` gives it).
    /// `complete`: the hits of every query term, which then give every
    /// doc's frequencies; else they are read off each doc's own terms.
    fn score_window(&mut self, doc: DocId, window: &[(DocId, usize)], complete: Option<&Hits>) {
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

/// Batches at least this long are analysed on two threads.
const PARALLEL_PREPARE: usize = 4096;

impl Backend for LexicalBackend {
    type Prepared = LexPrepared;

    fn prepare(&self, entries: &[&LiveEntry]) -> Vec<Result<LexPrepared, IndexError>> {
        // A large batch (a restore or rebuild) is analysed on two threads:
        // analysis is a pure function of each text, and the order is kept.
        if entries.len() < PARALLEL_PREPARE {
            return entries.iter().map(|e| Ok(analyse(&e.text))).collect();
        }
        let (first, second) = entries.split_at(entries.len() / 2);
        let analyse_all = |part: &[&LiveEntry]| -> Vec<Result<LexPrepared, IndexError>> {
            part.iter().map(|e| Ok(analyse(&e.text))).collect()
        };
        std::thread::scope(|s| {
            let other = s.spawn(|| analyse_all(second));
            let mut out = analyse_all(first);
            match other.join() {
                Ok(rest) => out.extend(rest),
                // Unreachable (analysis does not panic); analysed here then.
                Err(_) => out.extend(analyse_all(second)),
            }
            out
        })
    }

    fn insert(&mut self, doc: DocId, entry: &LiveEntry, prepared: LexPrepared) {
        let key = (
            entry.scope.tenant_id.clone(),
            entry.scope.subject_key.clone(),
        );
        let next = u32::try_from(self.partitions.len()).unwrap_or(u32::MAX);
        let pid = *self.partition_ids.entry(key).or_insert(next);
        if pid as usize == self.partitions.len() {
            self.partitions.push(Partition::default());
        }
        let mut term_ids = Vec::with_capacity(prepared.terms.len());
        for (term, tf) in prepared.terms {
            let next = u32::try_from(self.vocab.len()).unwrap_or(u32::MAX);
            let tid = *self.vocab.entry(term).or_insert(next);
            term_ids.push((tid, tf));
        }
        let mut speaker: Vec<u32> = prepared
            .speaker
            .iter()
            .filter_map(|t| self.vocab.get(t).copied())
            .collect();
        speaker.sort_unstable();
        let partition = &mut self.partitions[pid as usize];
        for &(tid, tf) in &term_ids {
            let list = partition.postings.entry(tid).or_default();
            // Postings stay in doc order (`best_shared` relies on it): every
            // insert is of a freshly allocated, highest doc.
            debug_assert!(list.last().is_none_or(|(last, _)| *last < doc));
            list.push((doc, tf));
        }
        partition.n_docs += 1;
        partition.total_len += u64::from(prepared.len);
        let key = (entry.created_at_unix_ms, doc);
        partition.timeline.insert(key);
        let prev = partition
            .timeline
            .range(..key)
            .next_back()
            .map_or(NO_DOC, |(_, d)| *d);
        let next = partition
            .timeline
            .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
            .next()
            .map_or(NO_DOC, |(_, d)| *d);
        if self.links.len() <= doc as usize {
            self.links.resize(doc as usize + 1, [NO_DOC; 2]);
        }
        self.links[doc as usize] = [prev, next];
        if self.lens.len() <= doc as usize {
            self.lens.resize(doc as usize + 1, 1);
        }
        self.lens[doc as usize] = prepared.len;
        if let Some(l) = self.links.get_mut(prev as usize) {
            l[1] = doc;
        }
        if let Some(l) = self.links.get_mut(next as usize) {
            l[0] = doc;
        }
        for claim in &entry.claim_keys {
            self.claims
                .entry((entry.scope.tenant_id.clone(), claim.clone()))
                .or_default()
                .insert(doc);
        }
        let idx = doc as usize;
        if self.docs.len() <= idx {
            self.docs.resize_with(idx + 1, || None);
        }
        self.docs[idx] = Some(LexDoc {
            partition: pid,
            len: prepared.len,
            created_at_unix_ms: entry.created_at_unix_ms,
            terms: term_ids,
            speaker,
            role: prepared.role,
            timed: prepared.timed,
            changes: prepared.changes,
            claims: entry
                .claim_keys
                .iter()
                .map(|c| (entry.scope.tenant_id.clone(), c.clone()))
                .collect(),
        });
    }

    fn remove(&mut self, doc: DocId) {
        let Some(old) = self.docs.get_mut(doc as usize).and_then(Option::take) else {
            return;
        };
        let partition = &mut self.partitions[old.partition as usize];
        for (tid, _) in &old.terms {
            if let Some(list) = partition.postings.get_mut(tid) {
                list.retain(|(d, _)| *d != doc);
                if list.is_empty() {
                    partition.postings.remove(tid);
                }
            }
        }
        partition.n_docs = partition.n_docs.saturating_sub(1);
        partition.total_len = partition.total_len.saturating_sub(u64::from(old.len));
        partition.timeline.remove(&(old.created_at_unix_ms, doc));
        if let Some([prev, next]) = self.links.get(doc as usize).copied() {
            if let Some(l) = self.links.get_mut(prev as usize) {
                l[1] = next;
            }
            if let Some(l) = self.links.get_mut(next as usize) {
                l[0] = prev;
            }
            self.links[doc as usize] = [NO_DOC; 2];
        }
        if let Some(len) = self.lens.get_mut(doc as usize) {
            *len = 1;
        }
        for key in &old.claims {
            if let Some(docs) = self.claims.get_mut(key) {
                docs.remove(&doc);
                if docs.is_empty() {
                    self.claims.remove(key);
                }
            }
        }
    }

    fn subject_docs(&self, tenant_id: &str, subject_key: &str) -> Vec<DocId> {
        self.partition_ids
            .get(&(tenant_id.to_owned(), subject_key.to_owned()))
            .map(|pid| {
                self.partitions[*pid as usize]
                    .timeline
                    .iter()
                    .map(|(_, d)| *d)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A scored hit: record id and a score (higher is better).
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The record.
    pub record_id: String,
    /// Score (BM25 or cosine similarity).
    pub score: f32,
}

/// The lexical target (outbox target name `lexical`).
pub type LexicalIndex = FencedIndex<LexicalBackend>;

impl LexicalIndex {
    /// An empty lexical target.
    pub fn new() -> Self {
        FencedIndex::with_backend("lexical", LexicalBackend::default())
    }

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

    /// The live records of one subject (`tenant_id`, `subject_key`) that
    /// share the most index terms with `text`, weighting each shared term by
    /// its rarity in the subject (`ln(1 + n / df)`), best first (ties by
    /// record id), at most `limit`: the texts a write guard compares a new
    /// one with. A near-duplicate or a restatement shares most of its terms,
    /// the rare ones included, so it ranks among these however many records
    /// the subject holds, while a word every record has (a speaker's name)
    /// weighs little (and is not walked at all when the text has a term
    /// fewer than half of the records hold). The cost is the postings of
    /// `text`'s own rare terms in that subject, rarest first, and only as
    /// long as they can still change the answer (see `best_shared`). `None`
    /// when `text` has no index term (stopwords only): the index cannot
    /// tell its neighbours.
    pub fn sharing_terms(
        &self,
        tenant_id: &str,
        subject_key: &str,
        text: &str,
        limit: usize,
    ) -> Option<Vec<String>> {
        let text_terms = terms(text);
        if text_terms.is_empty() {
            return None;
        }
        let b = &self.backend;
        let Some(&pid) = b
            .partition_ids
            .get(&(tenant_id.to_owned(), subject_key.to_owned()))
        else {
            return Some(Vec::new());
        };
        let partition = &b.partitions[pid as usize];
        let mut term_ids: Vec<u32> = text_terms
            .iter()
            .filter_map(|t| b.vocab.get(t.as_str()).copied())
            .collect();
        term_ids.sort_unstable();
        term_ids.dedup();
        let n = partition.n_docs as f64;
        let postings: Vec<(u32, &[(DocId, u32)])> = term_ids
            .iter()
            .filter_map(|tid| partition.postings.get(tid).map(|l| (*tid, l.as_slice())))
            .collect();
        // A term most of the subject's records hold (a speaker's name)
        // tells none of them apart: its postings are walked only when the
        // text has no rarer term, so the cost is the rare terms' postings.
        let rare: Vec<(u32, &[(DocId, u32)])> = postings
            .iter()
            .copied()
            .filter(|(_, p)| p.len() * 2 <= partition.n_docs as usize)
            .collect();
        let walked = if rare.is_empty() { postings } else { rare };
        if limit == 0 {
            return Some(Vec::new());
        }
        let weights: Vec<f64> = walked
            .iter()
            .map(|(_, list)| (1.0 + n / list.len().max(1) as f64).ln())
            .collect();
        let mut shared = self.best_shared(&walked, &weights, limit);
        // The best `limit` by weight, ties by record id: the weight at the
        // cut is found on numbers alone, and only the records tied at it
        // compare their ids (most records of a large subject share one
        // common term and tie).
        if shared.len() > limit {
            let by_weight = |a: &(f64, DocId), b: &(f64, DocId)| b.0.total_cmp(&a.0);
            shared.select_nth_unstable_by(limit - 1, by_weight);
            let cut = shared[limit - 1].0;
            let above = shared[..limit]
                .iter()
                .filter(|(w, _)| w.total_cmp(&cut).is_gt())
                .count();
            let mut kept: Vec<(f64, DocId)> = Vec::with_capacity(limit);
            let mut tied: Vec<(f64, DocId)> = Vec::new();
            for entry in shared {
                match entry.0.total_cmp(&cut) {
                    std::cmp::Ordering::Greater => kept.push(entry),
                    std::cmp::Ordering::Equal => tied.push(entry),
                    std::cmp::Ordering::Less => {}
                }
            }
            let mut tied: Vec<(f64, &str)> = tied
                .into_iter()
                .filter_map(|(w, doc)| Some((w, self.record_of(doc)?)))
                .collect();
            let room = limit - above;
            if tied.len() > room && room > 0 {
                tied.select_nth_unstable_by(room - 1, |a, b| a.1.cmp(b.1));
            }
            tied.truncate(room);
            let mut ranked: Vec<(f64, &str)> = kept
                .into_iter()
                .filter_map(|(w, doc)| Some((w, self.record_of(doc)?)))
                .chain(tied)
                .collect();
            ranked.sort_by(rank_order);
            return Some(ranked.into_iter().map(|(_, id)| id.to_owned()).collect());
        }
        let mut ranked: Vec<(f64, &str)> = shared
            .into_iter()
            .filter_map(|(w, doc)| Some((w, self.record_of(doc)?)))
            .collect();
        ranked.sort_by(rank_order);
        Some(ranked.into_iter().map(|(_, id)| id.to_owned()).collect())
    }

    /// The live docs of `lists` (term ids with their postings) that can be
    /// among the best `limit` by weight, with their weight: the sum of the
    /// `weights` of the lists holding them, added rarest list first (the
    /// shortest; ties in list order).
    ///
    /// The lists are walked in that order, and the walk stops once `limit`
    /// docs found weigh more than all the lists left together: a doc none
    /// of the walked lists holds cannot reach them (the max-score bound of
    /// top-k retrieval). The docs found then add the weights of the lists
    /// left that hold them. So a term half of a large subject's records
    /// hold (a speaker's name), thousands of postings, is walked only when
    /// it can still change the answer, and the answer is the one a walk of
    /// every list gives.
    fn best_shared(
        &self,
        lists: &[(u32, &[(DocId, u32)])],
        weights: &[f64],
        limit: usize,
    ) -> Vec<(f64, DocId)> {
        // Bounds are sums in another order than the weights they are
        // compared with: compared with this much room (far above the
        // rounding of a few additions).
        const SLACK: f64 = 1e-9;
        let mut order: Vec<usize> = (0..lists.len()).collect();
        order.sort_by_key(|&i| (lists[i].1.len(), i));
        // left[j]: what the lists order[j..] weigh together.
        let mut left = vec![0.0f64; order.len() + 1];
        for (j, &i) in order.iter().enumerate().rev() {
            left[j] = left[j + 1] + weights[i];
        }
        // The docs found with their weights, in doc order: postings are in
        // doc order (docs are numbered as published, and a republished
        // record gets a new number), so each list walked is merged in, in
        // one pass over both, each doc's weights added in the order of the
        // lists as before (the same sums, to the bit: a doc's first weight
        // is the list's, as `0.0 + weight` was). A hash map of the
        // docs cost a random probe per posting; the merge reads both in
        // order.
        let mut found: Vec<(DocId, f64)> = Vec::new();
        let mut merged: Vec<(DocId, f64)> = Vec::new();
        let mut walked = order.len();
        // The most any doc found weighs.
        let mut heaviest = 0.0f64;
        for (j, &i) in order.iter().enumerate() {
            // Stop once `limit` docs found weigh more than all the lists
            // left: no doc not found yet can reach them. (Only counted once
            // the lists walked outweigh those left and some doc does, or
            // none can: counting is a pass over every doc found, and where
            // no term is rarer than the rest it would not stop the walk.)
            let bar = left[j] * (1.0 + SLACK);
            if found.len() >= limit
                && left[0] - left[j] > bar
                && heaviest > bar
                && found.iter().filter(|(_, w)| *w > bar).count() >= limit
            {
                walked = j;
                break;
            }
            let (list, weight) = (lists[i].1, weights[i]);
            merged.clear();
            merged.reserve(found.len() + list.len());
            let (mut a, mut b) = (0, 0);
            while let (Some(&(doc, sum)), Some(&(posted, _))) = (found.get(a), list.get(b)) {
                match doc.cmp(&posted) {
                    std::cmp::Ordering::Less => {
                        merged.push((doc, sum));
                        a += 1;
                    }
                    std::cmp::Ordering::Greater => {
                        merged.push((posted, weight));
                        heaviest = heaviest.max(weight);
                        b += 1;
                    }
                    std::cmp::Ordering::Equal => {
                        merged.push((doc, sum + weight));
                        heaviest = heaviest.max(sum + weight);
                        a += 1;
                        b += 1;
                    }
                }
            }
            merged.extend_from_slice(found.get(a..).unwrap_or_default());
            let unmatched = list.get(b..).unwrap_or_default();
            if !unmatched.is_empty() {
                heaviest = heaviest.max(weight);
            }
            merged.extend(unmatched.iter().map(|(posted, _)| (*posted, weight)));
            std::mem::swap(&mut found, &mut merged);
        }
        // The lists left, for the docs found: in doc order, looked up in
        // each list by galloping from the last one's place.
        for &i in &order[walked..] {
            let list = lists[i].1;
            let mut from = 0;
            for (doc, weight) in &mut found {
                from = gallop(list, from, *doc);
                if list.get(from).is_some_and(|(d, _)| d == doc) {
                    *weight += weights[i];
                }
            }
        }
        // A doc leaves the postings as its record leaves the fence (both on
        // the publish that replaces it or the tombstone), so every doc here
        // has a record; checked in doc order, as a consistency guard.
        found
            .into_iter()
            .filter(|(doc, _)| self.record_of(*doc).is_some())
            .map(|(doc, weight)| (weight, doc))
            .collect()
    }

    pub(crate) fn search_docs(&self, query_terms: &[String], docs: &DocSet, k: usize) -> Vec<Hit> {
        self.search_with(query_terms, docs, k, &LexicalParams::default())
    }

    /// BM25, optionally over turn windows.
    pub(crate) fn search_with(
        &self,
        query_terms: &[String],
        docs: &DocSet,
        k: usize,
        params: &LexicalParams,
    ) -> Vec<Hit> {
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
                self.record_of(doc).map(|r| Hit {
                    record_id: r.to_owned(),
                    score,
                })
            })
            .collect()
    }

    fn stats(&self, docs: &DocSet) -> Option<Stats> {
        let b = &self.backend;
        // A doc keeps its partition while it lives, and a set is resolved
        // again when the fence moves, so the set can keep them.
        let partitions = docs
            .partitions(|| {
                let mut partitions: Vec<u32> = Vec::new();
                for d in docs.docs() {
                    if let Some(p) = b.docs.get(*d as usize).and_then(|x| x.as_ref())
                        && partitions.last() != Some(&p.partition)
                    {
                        partitions.push(p.partition);
                    }
                }
                partitions.sort_unstable();
                partitions.dedup();
                partitions
            })
            .to_vec();
        let n: u64 = partitions
            .iter()
            .map(|p| b.partitions[*p as usize].n_docs)
            .sum();
        let total_len: u64 = partitions
            .iter()
            .map(|p| b.partitions[*p as usize].total_len)
            .sum();
        if n == 0 {
            return None;
        }
        let avgdl = bm25_avgdl(n, total_len);
        Some(Stats {
            partitions,
            n,
            avgdl,
        })
    }

    fn idf(&self, stats: &Stats, tid: u32) -> f32 {
        let df: u64 = stats
            .partitions
            .iter()
            .filter_map(|p| self.backend.partitions[*p as usize].postings.get(&tid))
            .map(|l| l.len() as u64)
            .sum();
        bm25_idf(stats.n, df)
    }

    /// A doc's length (1 for a doc not held).
    fn doc_len(&self, doc: DocId) -> f32 {
        self.backend.lens.get(doc as usize).copied().unwrap_or(1) as f32
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
    /// - per doc, what its walked terms score alone ([`WindowBm25::solo`]):
    ///   a window scores at most the sum of its docs' bounds plus the
    ///   terms not walked. A hit's bound sums the docs within twice the
    ///   radius of it, so it bounds every window holding it; hits are taken
    ///   highest bound first, and the walk stops at the first whose bound
    ///   is below the `k`th best score found. Each window around a hit is
    ///   bounded again on its own docs before its score is computed.
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
    fn score_pruned(
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
        let mut hits = Hits::new(query.len());
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
                for &(doc, tf) in list {
                    if docs.contains(doc) {
                        let len = b.lens.get(doc as usize).copied().unwrap_or(1);
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
        // Every window holding a hit lies within twice the radius of it.
        let (mut before, mut after) = (Vec::new(), Vec::new());
        let mut ranked: Vec<(f64, DocId)> = Vec::with_capacity(hits.solo.len());
        for (&doc, &i) in &hits.at {
            self.window_sides(doc, docs, 2 * radius, &mut before, &mut after);
            let near: f64 = before.iter().chain(&after).map(|d| hits.solo(*d)).sum();
            ranked.push((hits.solo[i as usize] + near + left, doc));
        }
        ranked.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        pruning.hits = ranked.len();
        // A hit's stretch of the timeline (its eligible docs within twice
        // the radius, in time order): the window of each doc within the
        // radius of the hit is read off it.
        let mut line: Vec<DocId> = Vec::new();
        let mut around: Vec<(DocId, usize)> = Vec::new();
        for (hit_bound, hit) in ranked {
            if read.top.below(hit_bound) {
                break;
            }
            pruning.hits_opened += 1;
            self.window_sides(hit, docs, 2 * radius, &mut before, &mut after);
            line.clear();
            line.extend(before.iter().rev());
            let at = line.len();
            line.push(hit);
            line.extend(&after);
            let first = at - before.len().min(radius);
            let last = at + after.len().min(radius);
            for i in first..=last {
                let target = line[i];
                if read.seen.contains(&target) {
                    continue;
                }
                around.clear();
                around.extend(
                    line[i.saturating_sub(radius)..i]
                        .iter()
                        .rev()
                        .enumerate()
                        .map(|(d, x)| (*x, d + 1)),
                );
                let end = (i + 1 + radius).min(line.len());
                around.extend(
                    line[i + 1..end]
                        .iter()
                        .enumerate()
                        .map(|(d, x)| (*x, d + 1)),
                );
                let most = hits.solo(target)
                    + around.iter().map(|(d, _)| hits.solo(*d)).sum::<f64>()
                    + left;
                if read.top.below(most) {
                    continue;
                }
                read.score_window(target, &around, complete);
            }
        }
        pruning.scored = read.scored.len();
        let scored = std::mem::take(&mut read.scored);
        (self.best_k(scored, k), pruning)
    }

    /// Scores every eligible doc matching a query term (and, with windows,
    /// their eligible neighbours); the best `k`, best first, ties by record
    /// id. The reference [`LexicalIndex::score`] is checked against, and
    /// what it answers when BM25's `b` is above 1 (no pruning bound holds).
    fn score_exhaustive(
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

    /// Up to `radius` eligible docs on each side of `doc` in its subject's
    /// timeline, with their distance (1 = adjacent): those before it,
    /// nearest first, then those after it.
    fn window_docs(&self, doc: DocId, docs: &DocSet, radius: usize) -> Vec<(DocId, usize)> {
        let (mut before, mut after) = (Vec::new(), Vec::new());
        self.window_sides(doc, docs, radius, &mut before, &mut after);
        before
            .iter()
            .enumerate()
            .chain(after.iter().enumerate())
            .map(|(i, d)| (*d, i + 1))
            .collect()
    }

    /// Up to `radius` eligible docs before `doc` in its subject's timeline
    /// and up to `radius` after it, each side nearest first, into `before`
    /// and `after` (cleared first). Steps along the timeline's links, past
    /// ineligible docs.
    fn window_sides(
        &self,
        doc: DocId,
        docs: &DocSet,
        radius: usize,
        before: &mut Vec<DocId>,
        after: &mut Vec<DocId>,
    ) {
        let links = &self.backend.links;
        for (side, out) in [(0, before), (1, after)] {
            out.clear();
            let mut at = doc;
            while out.len() < radius {
                match links.get(at as usize) {
                    Some(l) if l[side] != NO_DOC => at = l[side],
                    _ => break,
                }
                if docs.contains(at) {
                    out.push(at);
                }
            }
        }
    }

    /// The eligible docs just before and just after `doc` in its subject's
    /// timeline.
    fn neighbour_docs(&self, doc: DocId, docs: &DocSet) -> [Option<DocId>; 2] {
        let b = &self.backend;
        let Some(d) = b.docs.get(doc as usize).and_then(|x| x.as_ref()) else {
            return [None, None];
        };
        let timeline = &b.partitions[d.partition as usize].timeline;
        let key = (d.created_at_unix_ms, doc);
        let before = timeline
            .range(..key)
            .rev()
            .find(|(_, x)| docs.contains(*x))
            .map(|(_, x)| *x);
        let after = timeline
            .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
            .find(|(_, x)| docs.contains(*x))
            .map(|(_, x)| *x);
        [before, after]
    }

    /// Eligible records carrying exactly `claim_key`, sorted by record id.
    pub(crate) fn claim_docs(
        &self,
        tenant_id: &str,
        claim_key: &str,
        docs: &DocSet,
    ) -> Vec<String> {
        let mut out: Vec<String> = self
            .backend
            .claims
            .get(&(tenant_id.to_owned(), claim_key.to_owned()))
            .into_iter()
            .flatten()
            .filter(|d| docs.contains(**d))
            .filter_map(|d| self.record_of(*d).map(str::to_owned))
            .collect();
        out.sort();
        out
    }

    /// Whether the speaker label of `record_id` (see `text::speaker_label`)
    /// holds one of `query_terms` (analysed terms, as `text::terms` gives).
    ///
    /// With `person` (see `text::query_person`: whom a question in the first
    /// or second person asks about), a record whose label is a role
    /// (`user:`, `assistant:`) is named when its role is that person, and
    /// never by a query term: a role is not a name.
    pub(crate) fn speaker_named(
        &self,
        record_id: &str,
        query_terms: &[String],
        person: Option<Option<Role>>,
    ) -> bool {
        let Some(d) = self
            .fence
            .doc_of(record_id)
            .and_then(|doc| self.backend.docs.get(doc as usize))
            .and_then(|x| x.as_ref())
        else {
            return false;
        };
        if let (Some(person), Some(role)) = (person, d.role) {
            return person == Some(role);
        }
        !d.speaker.is_empty()
            && query_terms.iter().any(|t| {
                self.backend
                    .vocab
                    .get(t.as_str())
                    .is_some_and(|tid| d.speaker.binary_search(tid).is_ok())
            })
    }

    /// The role `record_id`'s speaker label names (`user:`,
    /// `assistant:`), if it names one.
    pub(crate) fn speaker_role(&self, record_id: &str) -> Option<Role> {
        self.fence
            .doc_of(record_id)
            .and_then(|doc| self.backend.docs.get(doc as usize))
            .and_then(|x| x.as_ref())
            .and_then(|d| d.role)
    }

    /// Whether `record_id`'s text places something in time
    /// (`text::places_in_time`).
    pub(crate) fn places_in_time(&self, record_id: &str) -> bool {
        self.fence
            .doc_of(record_id)
            .and_then(|doc| self.backend.docs.get(doc as usize))
            .and_then(|x| x.as_ref())
            .is_some_and(|d| d.timed)
    }

    /// Whether `record_id` states a current value: its text states a
    /// change (`text::states_change`), or it carries a claim key (an
    /// eligible record holding a claim is its line's current value: the
    /// values it replaced are superseded).
    pub(crate) fn states_change(&self, record_id: &str) -> bool {
        self.doc(record_id)
            .is_some_and(|d| d.changes || !d.claims.is_empty())
    }

    /// `record_id`'s place in time: its creation time, then its
    /// publication order (the order of its subject's timeline).
    pub(crate) fn recorded_order(&self, record_id: &str) -> Option<(u64, u64)> {
        let doc = self.fence.doc_of(record_id)?;
        let d = self.backend.docs.get(doc as usize)?.as_ref()?;
        Some((d.created_at_unix_ms, u64::from(doc)))
    }

    /// Whether two records are lines of one speaker in one subject's
    /// timeline: the same subject, and the same speaker label and role,
    /// or a record with no label (a statement about the subject itself,
    /// as a fact is) on either side.
    pub(crate) fn same_speaker(&self, a: &str, b: &str) -> bool {
        let (Some(x), Some(y)) = (self.doc(a), self.doc(b)) else {
            return false;
        };
        x.partition == y.partition
            && (x.speaker.is_empty()
                || y.speaker.is_empty()
                || (x.speaker == y.speaker && x.role == y.role))
    }

    fn doc(&self, record_id: &str) -> Option<&LexDoc> {
        self.fence
            .doc_of(record_id)
            .and_then(|doc| self.backend.docs.get(doc as usize))
            .and_then(|x| x.as_ref())
    }

    /// Whether `record_id`'s own text (not its turn window) holds one of
    /// `query_terms`.
    pub(crate) fn holds_any(&self, record_id: &str, query_terms: &[String]) -> bool {
        let Some(d) = self
            .fence
            .doc_of(record_id)
            .and_then(|doc| self.backend.docs.get(doc as usize))
            .and_then(|x| x.as_ref())
        else {
            return false;
        };
        query_terms.iter().any(|t| {
            self.backend
                .vocab
                .get(t.as_str())
                .is_some_and(|tid| d.terms.iter().any(|(x, _)| x == tid))
        })
    }

    /// The creation time of `record_id`, if it is indexed.
    pub(crate) fn created_at(&self, record_id: &str) -> Option<u64> {
        self.fence
            .doc_of(record_id)
            .and_then(|doc| self.backend.docs.get(doc as usize))
            .and_then(|x| x.as_ref())
            .map(|d| d.created_at_unix_ms)
    }

    /// The eligible records just before and just after `record_id` in its
    /// subject's timeline (creation time, then doc order).
    pub(crate) fn neighbours(&self, record_id: &str, docs: &DocSet) -> Vec<String> {
        let Some(doc) = self.fence.doc_of(record_id) else {
            return Vec::new();
        };
        self.neighbour_docs(doc, docs)
            .into_iter()
            .flatten()
            .filter_map(|x| self.record_of(x).map(str::to_owned))
            .collect()
    }
}

impl Default for LexicalIndex {
    fn default() -> Self {
        Self::new()
    }
}

/// Best first; equal scores by record id.
pub(crate) fn sort_hits(hits: &mut [Hit]) {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.record_id.cmp(&b.record_id))
    });
}

/// The first place at or after `from` in `list` (sorted by doc) whose doc
/// is not below `doc`: steps of 1, 2, 4, ... from `from`, then a binary
/// search within the last step, so a run of ascending lookups costs about
/// the logarithm of each gap, not of the list.
fn gallop(list: &[(DocId, u32)], from: usize, doc: DocId) -> usize {
    let below = |at: usize| list.get(at).is_some_and(|(d, _)| *d < doc);
    if !below(from) {
        return from;
    }
    // list[lo] is below `doc`; find hi with list[hi] not below (or the end).
    let (mut lo, mut step) = (from, 1);
    let hi = loop {
        let next = lo + step;
        if next >= list.len() {
            break list.len();
        }
        if !below(next) {
            break next;
        }
        lo = next;
        step *= 2;
    };
    lo + 1 + list[lo + 1..hi].partition_point(|(d, _)| *d < doc)
}

/// Weight first (highest first), then record id: the write guard's
/// candidate order.
fn rank_order(a: &(f64, &str), b: &(f64, &str)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(b.1))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use mosaic_harness::MemoryKind;
    use mosaic_harness::canonical::sha256_hex;

    use super::*;
    use crate::target::IndexTarget;
    use crate::{PublishMessage, ScopeKeys};

    /// The walk [`LexicalIndex::best_shared`] bounds: every posting of every
    /// list, each doc's weights added rarest list first.
    fn walk_everything(
        idx: &LexicalIndex,
        lists: &[(u32, &[(DocId, u32)])],
        weights: &[f64],
    ) -> Vec<(f64, DocId)> {
        let mut order: Vec<usize> = (0..lists.len()).collect();
        order.sort_by_key(|&i| (lists[i].1.len(), i));
        let mut sums: BTreeMap<DocId, f64> = BTreeMap::new();
        for i in order {
            for (doc, _) in lists[i].1 {
                *sums.entry(*doc).or_insert(0.0) += weights[i];
            }
        }
        sums.into_iter()
            .filter(|(doc, _)| idx.record_of(*doc).is_some())
            .map(|(doc, w)| (w, doc))
            .collect()
    }

    /// The best `limit` of a list of (weight, doc), ties by doc.
    fn best(mut all: Vec<(f64, DocId)>, limit: usize) -> Vec<(u64, DocId)> {
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        all.truncate(limit);
        all.into_iter().map(|(w, d)| (w.to_bits(), d)).collect()
    }

    /// The window the old timeline walk gave: the eligible docs before
    /// `doc` in its partition's timeline, nearest first, then those after.
    fn walked_window(
        idx: &LexicalIndex,
        doc: DocId,
        docs: &DocSet,
        radius: usize,
    ) -> Vec<(DocId, usize)> {
        let b = &idx.backend;
        let Some(d) = b.docs.get(doc as usize).and_then(|x| x.as_ref()) else {
            return Vec::new();
        };
        let timeline = &b.partitions[d.partition as usize].timeline;
        let key = (d.created_at_unix_ms, doc);
        let before = timeline
            .range(..key)
            .rev()
            .filter(|(_, x)| docs.contains(*x))
            .take(radius);
        let after = timeline
            .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
            .filter(|(_, x)| docs.contains(*x))
            .take(radius);
        before
            .enumerate()
            .chain(after.enumerate())
            .map(|(i, (_, x))| (*x, i + 1))
            .collect()
    }

    /// One generated record: subject, creation time, words (indexes into
    /// `WORDS`).
    type GenRecord = (usize, u64, Vec<usize>);

    const WORDS: [&str; 12] = [
        "apple", "river", "garden", "violin", "pottery", "camping", "sunset", "novel", "puppy",
        "museum", "forest", "guitar",
    ];

    fn message(id: &str, generation: u64, subject: usize, at: u64, text: String) -> PublishMessage {
        PublishMessage {
            record_id: id.to_owned(),
            generation,
            revocation_generation: 0,
            scope: ScopeKeys {
                tenant_id: "t".into(),
                policy_sha256: sha256_hex(b"policy"),
                subject_key: format!("s{subject}"),
                kind: MemoryKind::Episodic,
            },
            created_at_unix_ms: at,
            claim_keys: Vec::new(),
            text,
        }
    }

    /// An index of `records` (record ids not in publication order, so ties
    /// by record id are not ties by doc), then `changes`: per record, 1
    /// tombstones it and 2 publishes it again with its words reversed (a
    /// new doc, placed in the timeline among older ones). The eligible docs
    /// are the live ones `eligible` marks.
    fn generated(
        records: &[GenRecord],
        changes: &[u8],
        eligible: &[bool],
    ) -> (LexicalIndex, DocSet) {
        let mut idx = LexicalIndex::new();
        let id = |i: usize| format!("r{:04}", (i * 37) % 1009);
        let text = |words: &[usize]| {
            words
                .iter()
                .map(|w| WORDS[*w % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
        };
        for (i, (subject, at, words)) in records.iter().enumerate() {
            idx.publish(&message(&id(i), 1, *subject, *at, text(words)))
                .unwrap();
        }
        for (i, (subject, at, words)) in records.iter().enumerate() {
            match changes.get(i).copied().unwrap_or(0) % 4 {
                1 => {
                    idx.tombstone(&id(i), 2).unwrap();
                }
                2 => {
                    let mut words = words.clone();
                    words.reverse();
                    idx.publish(&message(&id(i), 2, *subject, *at, text(&words)))
                        .unwrap();
                }
                _ => {}
            }
        }
        let mut docs = DocSet::with_capacity(idx.fence.doc_capacity());
        for i in 0..records.len() {
            if eligible.get(i).copied().unwrap_or(true)
                && let Some(doc) = idx.fence.doc_of(&id(i))
            {
                docs.insert(doc);
            }
        }
        (idx, docs)
    }

    /// The query of `text` as `search_with` builds it.
    fn query_of(idx: &LexicalIndex, text: &str) -> Vec<(u32, f32)> {
        let mut unique = terms(text);
        unique.sort();
        unique.dedup();
        unique
            .iter()
            .filter_map(|t| idx.backend.vocab.get(t.as_str()).map(|tid| (*tid, 1.0)))
            .collect()
    }

    /// The pruned and the exhaustive best `k`, as (doc, score bits), and
    /// the pruned read's work.
    #[allow(clippy::type_complexity)]
    fn both(
        idx: &LexicalIndex,
        docs: &DocSet,
        text: &str,
        params: &LexicalParams,
        k: usize,
    ) -> (Vec<(DocId, u32)>, Vec<(DocId, u32)>, Pruning) {
        let Some(stats) = idx.stats(docs) else {
            return (Vec::new(), Vec::new(), Pruning::default());
        };
        let query = query_of(idx, text);
        let bits = |v: Vec<(DocId, f32)>| v.into_iter().map(|(d, s)| (d, s.to_bits())).collect();
        let (pruned, work) = idx.score_pruned(&query, docs, &stats, params, k);
        let exhaustive = idx.score_exhaustive(&query, docs, &stats, params, k);
        (bits(pruned), bits(exhaustive), work)
    }

    /// A window stepped along the timeline's links is the one walked from
    /// the partition's timeline: same docs, same order, same distances,
    /// across subjects, creation-time ties, records published out of time
    /// order, tombstoned and published again, ineligible docs between
    /// eligible ones and windows cut short at either end.
    #[test]
    fn a_linked_window_is_the_walked_one() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let records: Vec<GenRecord> = (0..150)
            .map(|_| (next(3) as usize, next(40), vec![next(12) as usize]))
            .collect();
        let changes: Vec<u8> = (0..150).map(|_| next(6) as u8).collect();
        let eligible: Vec<bool> = (0..150).map(|_| next(10) < 7).collect();
        let (idx, docs) = generated(&records, &changes, &eligible);
        let mut compared = 0;
        for doc in 0..idx.fence.doc_capacity() as DocId + 2 {
            for radius in 0..=4 {
                let walked = walked_window(&idx, doc, &docs, radius);
                assert_eq!(idx.window_docs(doc, &docs, radius), walked, "doc {doc}");
                compared += usize::from(!walked.is_empty());
            }
        }
        assert!(compared > 300, "{compared}");
    }

    /// Layer: the index's resolution of eligible sets. Over a chain of
    /// random index changes (publications, new versions, tombstones, ids
    /// eligible before they are indexed) and eligible sets each derived
    /// from the last by a change, the resolution brought up to date from
    /// the kept one is exactly a fresh resolution of the set's ids.
    #[test]
    fn a_derived_eligible_set_resolves_as_a_fresh_one() {
        use mosaic_harness::memory_scope::{EligibleEntry, SealedEligibleSet, SealedEntries};
        let mut seed: u64 = 7;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let policy = sha256_hex(b"policy");
        let id = |i: u64| format!("r{i:02}");
        let mut idx = LexicalIndex::new();
        let mut generation = [0u64; 40];
        let mut eligible: std::collections::BTreeSet<u64> = Default::default();
        let sealed = |ids: &std::collections::BTreeSet<u64>, parent: Option<(u64, Vec<String>)>| {
            let entries: Vec<EligibleEntry> = ids
                .iter()
                .map(|i| EligibleEntry {
                    record_id: id(*i),
                    content_sha256: sha256_hex(id(*i).as_bytes()),
                })
                .collect();
            let entries = match parent {
                Some((parent, changed)) => SealedEntries::seal_derived(entries, parent, changed),
                None => SealedEntries::seal(entries).unwrap(),
            };
            SealedEligibleSet::of_entries(sha256_hex(b"ctx"), std::sync::Arc::new(entries)).unwrap()
        };
        let fresh = |idx: &LexicalIndex, set: &SealedEligibleSet| {
            let mut docs = idx
                .resolve_ids(set.entries().iter().map(|e| e.record_id), "t", &policy)
                .docs()
                .to_vec();
            docs.sort_unstable();
            docs
        };
        let mut set = sealed(&eligible, None);
        let mut advanced = 0;
        for step in 0..200 {
            // Index changes, some of ids not (yet) eligible.
            for _ in 0..next(4) {
                let i = next(40);
                generation[i as usize] += 1;
                let g = generation[i as usize];
                if next(4) == 0 {
                    idx.tombstone(&id(i), g).unwrap();
                } else {
                    idx.publish(&message(&id(i), g, 0, step, format!("apple {step}")))
                        .unwrap();
                }
            }
            // An eligibility change, derived from the last set.
            let mut changed = Vec::new();
            for _ in 0..next(4) {
                let i = next(40);
                if !eligible.remove(&i) {
                    eligible.insert(i);
                }
                changed.push(id(i));
            }
            let parent = set.sealed_entries().seal_number();
            let before = idx.fence.snapshot_generation();
            // Resolved once before the change, so a kept resolution exists.
            idx.resolve_eligible(&set, "t", &policy);
            set = sealed(&eligible, Some((parent, changed)));
            let mut resolved = idx.resolve_eligible(&set, "t", &policy).docs().to_vec();
            resolved.sort_unstable();
            assert_eq!(resolved, fresh(&idx, &set), "step {step}");
            advanced += usize::from(idx.fence.changes_since(before).is_some());
        }
        assert!(advanced > 150, "{advanced}");
    }

    /// Layer: the index's resolution of eligible sets. When more slots
    /// changed since a kept resolution than the fence remembers, the fence
    /// says so (`changes_since` is `None`) and the set is resolved afresh,
    /// still exactly.
    #[test]
    fn a_resolution_older_than_the_remembered_changes_is_made_afresh() {
        use mosaic_harness::memory_scope::{EligibleEntry, SealedEligibleSet, SealedEntries};
        let policy = sha256_hex(b"policy");
        let mut idx = LexicalIndex::new();
        let ids: Vec<String> = (0..8).map(|i| format!("r{i}")).collect();
        for id in &ids {
            idx.publish(&message(id, 1, 0, 1, "apple".into())).unwrap();
        }
        let entries: Vec<EligibleEntry> = ids
            .iter()
            .map(|id| EligibleEntry {
                record_id: id.clone(),
                content_sha256: sha256_hex(id.as_bytes()),
            })
            .collect();
        let set = SealedEligibleSet::of_entries(
            sha256_hex(b"ctx"),
            std::sync::Arc::new(SealedEntries::seal(entries).unwrap()),
        )
        .unwrap();
        idx.resolve_eligible(&set, "t", &policy);
        let then = idx.fence.snapshot_generation();
        // More changes than remembered: new versions of the eligible ids.
        for generation in 2..(2 + crate::target::RECENT_CHANGES as u64 / 8 + 2) {
            for id in &ids {
                idx.publish(&message(id, generation, 0, 1, "apple".into()))
                    .unwrap();
            }
        }
        assert!(idx.fence.changes_since(then).is_none());
        let mut resolved = idx.resolve_eligible(&set, "t", &policy).docs().to_vec();
        resolved.sort_unstable();
        let mut fresh = idx
            .resolve_ids(ids.iter().map(String::as_str), "t", &policy)
            .docs()
            .to_vec();
        fresh.sort_unstable();
        assert_eq!(resolved, fresh);
        assert_eq!(resolved.len(), ids.len());
    }

    /// A set's subjects are kept with it after a read, and found again once
    /// a doc is added: the statistics then cover the new doc's subject.
    #[test]
    fn a_set_grown_after_a_read_counts_its_new_subject() {
        let records: Vec<GenRecord> = vec![(0, 1, vec![0, 1]), (1, 2, vec![2]), (1, 3, vec![3, 4])];
        let (idx, all) = generated(&records, &[], &[]);
        let mut docs = DocSet::with_capacity(idx.fence.doc_capacity());
        docs.insert(all.docs()[0]);
        let first = idx.stats(&docs).unwrap();
        assert_eq!((first.partitions.len(), first.n), (1, 1));
        docs.insert(all.docs()[1]);
        let grown = idx.stats(&docs).unwrap();
        assert_eq!((grown.partitions.len(), grown.n), (2, 3));
    }

    /// The per-doc and per-term bounds the pruned scorer relies on hold for
    /// every window of a generated corpus, and the per-doc bound is met by a
    /// doc scored alone.
    #[test]
    fn the_pruning_bounds_hold_for_every_window() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let records: Vec<GenRecord> = (0..200)
            .map(|_| {
                let len = 1 + next(9) as usize;
                (
                    next(2) as usize,
                    next(100),
                    (0..len).map(|_| next(12) as usize).collect(),
                )
            })
            .collect();
        let eligible: Vec<bool> = (0..200).map(|_| next(10) < 8).collect();
        let (idx, docs) = generated(&records, &[], &eligible);
        let stats = idx.stats(&docs).unwrap();
        let mut tighter = 0;
        for params in [
            LexicalParams::default(),
            LexicalParams {
                window_permille: 500,
                window_radius: 2,
                ..LexicalParams::default()
            },
            LexicalParams {
                k1_permille: 2_000,
                b_permille: 1_000,
                window_permille: 1_000,
                window_radius: 3,
            },
        ] {
            let scorer = WindowBm25::new(&params, stats.avgdl);
            for text in [
                "apple river",
                "violin violin puppy museum",
                "forest",
                "guitar sunset novel apple",
            ] {
                let query = query_of(&idx, text);
                let idfs: Vec<f32> = query.iter().map(|(t, _)| idx.idf(&stats, *t)).collect();
                let gains: f64 = idfs.iter().map(|i| scorer.gain(*i)).sum();
                let mut read = ReadScores {
                    index: &idx,
                    query: &query,
                    idfs: &idfs,
                    scorer,
                    docs: &docs,
                    top: TopScores::new(1),
                    scored: Vec::new(),
                    seen: HashSet::default(),
                    tfs: HashMap::default(),
                    window_tf: vec![0.0; query.len()],
                };
                // Each doc's bound: its terms scored alone.
                let solo = |doc: DocId| -> f64 {
                    let d = idx.backend.docs[doc as usize].as_ref().unwrap();
                    query
                        .iter()
                        .zip(&idfs)
                        .filter_map(|((tid, _), idf)| {
                            let tf = d.terms.iter().find(|(t, _)| t == tid)?.1;
                            Some(scorer.solo(*idf, tf, d.len))
                        })
                        .sum()
                };
                for &doc in docs.docs() {
                    let window = idx.window_docs(doc, &docs, scorer.radius);
                    read.score_window(doc, &window, None);
                    let score = f64::from(read.scored.last().unwrap().1);
                    let bound: f64 = solo(doc) + window.iter().map(|(d, _)| solo(*d)).sum::<f64>();
                    assert!(score <= bound * (1.0 + 1e-6), "{score} > {bound}");
                    assert!(score <= gains * (1.0 + 1e-6), "{score} > {gains}");
                    if bound < gains {
                        tighter += 1;
                    }
                    if window.is_empty() {
                        assert!((score - bound).abs() <= 1e-5 * bound.max(1.0));
                    }
                }
            }
        }
        // The per-doc bound is the tighter one for most windows.
        assert!(tighter > 1_000, "{tighter}");
    }

    /// On a large subject where one query term is in every record (a
    /// speaker's name) and the others are rare, the pruned read walks
    /// neither the common term's postings nor most windows, and answers
    /// what scoring everything answers.
    #[test]
    fn a_large_subject_is_not_scored_whole() {
        let mut state = 0x1234_5678_9ABC_DEF1u64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let mut idx = LexicalIndex::new();
        let vocab: Vec<String> = (0..400).map(|i| format!("zq{i}x")).collect();
        for r in 0..3_000u64 {
            let words: Vec<&str> = (0..4 + next(8))
                .map(|_| vocab[next(400) as usize].as_str())
                .collect();
            idx.publish(&message(
                &format!("r{r:05}"),
                1,
                0,
                r,
                format!("Avery: {}", words.join(" ")),
            ))
            .unwrap();
        }
        let mut docs = DocSet::with_capacity(idx.fence.doc_capacity());
        for r in 0..3_000u64 {
            docs.insert(idx.fence.doc_of(&format!("r{r:05}")).unwrap());
        }
        let windows = LexicalParams {
            window_permille: 500,
            window_radius: 2,
            ..LexicalParams::default()
        };
        let mut skipped = 0;
        for q in 0..20 {
            let text = format!(
                "avery {} {} {}",
                vocab[next(400) as usize],
                vocab[next(400) as usize],
                vocab[next(400) as usize]
            );
            for (params, k) in [
                (&windows, 10),
                (&windows, 100),
                (&LexicalParams::default(), 10),
            ] {
                let (pruned, exhaustive, work) = both(&idx, &docs, &text, params, k);
                assert_eq!(pruned, exhaustive, "query {q}: {text}, k {k}");
                assert_eq!(pruned.len(), k);
                // The best 10 need a few of the windows around the hits.
                if k == 10 {
                    let windows = work.hits * (1 + 2 * params.window_radius.max(1));
                    assert!(work.scored * 4 < windows, "{work:?}");
                }
                if work.terms_walked < query_of(&idx, &text).len() {
                    skipped += 1;
                }
            }
        }
        assert!(skipped >= 40, "{skipped}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// The pruned best `k` is the exhaustive best `k`: same docs, same
        /// scores to the bit, same order with ties by record id, on random
        /// corpora (a small vocabulary, so many ties), eligibility masks,
        /// tombstones and republished records, queries (words outside the
        /// corpus included) and parameters (windows on and off, any radius,
        /// `b` above 1, which is not pruned).
        #[test]
        fn the_pruned_top_k_is_the_exhaustive_top_k(
            records in proptest::collection::vec(
                (0..3usize, 0..25u64, proptest::collection::vec(0..10usize, 0..7)),
                1..70,
            ),
            changes in proptest::collection::vec(0..4u8, 0..70),
            eligible in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..70),
            query in proptest::collection::vec(0..12usize, 1..6),
            window_permille in proptest::prop_oneof![
                proptest::strategy::Just(0u64),
                proptest::strategy::Just(250),
                proptest::strategy::Just(500),
                proptest::strategy::Just(1_000),
            ],
            window_radius in 0..4usize,
            k1_permille in proptest::prop_oneof![
                proptest::strategy::Just(0u64),
                proptest::strategy::Just(1_200),
                proptest::strategy::Just(3_000),
            ],
            b_permille in proptest::prop_oneof![
                proptest::strategy::Just(0u64),
                proptest::strategy::Just(750),
                proptest::strategy::Just(1_000),
                proptest::strategy::Just(1_500),
            ],
            k in 1..25usize,
        ) {
            let (idx, docs) = generated(&records, &changes, &eligible);
            let text: Vec<&str> = query.iter().map(|w| WORDS[*w]).collect();
            let params = LexicalParams { k1_permille, b_permille, window_permille, window_radius };
            let (pruned, exhaustive, _) = both(&idx, &docs, &text.join(" "), &params, k);
            proptest::prop_assert_eq!(pruned, exhaustive);
        }
    }

    #[test]
    fn gallop_finds_the_first_place_not_below() {
        let list: Vec<(DocId, u32)> = [2u32, 3, 5, 8, 13, 21, 34, 55, 89]
            .iter()
            .map(|d| (*d, 1))
            .collect();
        for from in 0..=list.len() {
            for doc in 0..100 {
                let expected = from + list[from..].partition_point(|(d, _)| *d < doc);
                assert_eq!(gallop(&list, from, doc), expected, "from {from}, doc {doc}");
            }
        }
        assert_eq!(gallop(&[], 0, 7), 0);
    }

    #[test]
    fn the_bounded_walk_finds_what_walking_everything_finds() {
        let mut idx = LexicalIndex::new();
        // A small vocabulary with a skewed spread: some terms in a few
        // records, some in a third of them, as a large subject's are.
        let words: Vec<String> = (0..40).map(|i| format!("w{i}x")).collect();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for r in 0..1_500u64 {
            let len = 4 + next(10) as usize;
            let text: Vec<&str> = (0..len)
                .map(|_| {
                    // Term i drawn with weight about 1/(i+1).
                    let pick = next(1_000_000) as f64 / 1_000_000.0;
                    let i = ((40.0f64).powf(pick) - 1.0) as usize;
                    words[i.min(39)].as_str()
                })
                .collect();
            idx.publish(&PublishMessage {
                record_id: format!("r{r:05}"),
                generation: 1,
                revocation_generation: 0,
                scope: ScopeKeys {
                    tenant_id: "t".into(),
                    policy_sha256: sha256_hex(b"policy"),
                    subject_key: "s".into(),
                    kind: MemoryKind::Episodic,
                },
                created_at_unix_ms: r,
                claim_keys: Vec::new(),
                text: text.join(" "),
            })
            .unwrap();
            if r % 7 == 3 {
                idx.tombstone(&format!("r{:05}", r / 2), 2).unwrap();
            }
        }
        let b = &idx.backend;
        let partition = &b.partitions[0];
        let mut stopped_early = 0;
        for q in 0..200 {
            let len = 1 + next(12) as usize;
            let mut tids: Vec<u32> = (0..len)
                .filter_map(|_| b.vocab.get(words[next(40) as usize].as_str()).copied())
                .collect();
            tids.sort_unstable();
            tids.dedup();
            let lists: Vec<(u32, &[(DocId, u32)])> = tids
                .iter()
                .filter_map(|t| partition.postings.get(t).map(|l| (*t, l.as_slice())))
                .collect();
            let n = partition.n_docs as f64;
            let weights: Vec<f64> = lists
                .iter()
                .map(|(_, l)| (1.0 + n / l.len() as f64).ln())
                .collect();
            let limit = [1, 5, 32, 200][q % 4];
            let bounded = idx.best_shared(&lists, &weights, limit);
            let everything = walk_everything(&idx, &lists, &weights);
            if bounded.len() < everything.len() {
                stopped_early += 1;
            }
            assert_eq!(
                best(bounded, limit),
                best(everything, limit),
                "query {q}, limit {limit}"
            );
        }
        // The bound did cut walks short, or this compared nothing new.
        assert!(stopped_early > 50, "{stopped_early}");
    }
}
