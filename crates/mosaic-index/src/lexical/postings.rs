//! The inverted index: partitions by scope, postings, per-doc facts and
//! each doc's nearest timeline neighbours; what a publish adds and a tombstone removes; and the
//! corpus statistics of the partitions one read searches.

use std::collections::{BTreeSet, HashMap};

use super::LexicalIndex;
use super::scoring::{bm25_avgdl, bm25_idf};
use crate::error::IndexError;
use crate::fenced::Backend;
use crate::scope::DocSet;
use crate::target::{DocId, LiveEntry};
use crate::text::{Role, places_in_time, speaker_label, speaker_role, states_change, terms};

#[derive(Clone, Default)]
pub(super) struct Partition {
    /// By term id (numbered in order of first appearance, not chosen by
    /// any client): a fast hash.
    pub(super) postings: HashMap<u32, Vec<(DocId, u32)>, foldhash::fast::RandomState>,
    pub(super) n_docs: u64,
    pub(super) total_len: u64,
    pub(super) timeline: BTreeSet<(u64, DocId)>,
}

#[derive(Clone)]
pub(super) struct LexDoc {
    pub(super) partition: u32,
    pub(super) len: u32,
    pub(super) created_at_unix_ms: u64,
    pub(super) terms: Vec<(u32, u32)>,
    /// Term ids of the speaker label, sorted.
    pub(super) speaker: Vec<u32>,
    /// The role the speaker label names (`user:`, `assistant:`), if any.
    pub(super) role: Option<Role>,
    /// Whether the line places something in time (`text::places_in_time`).
    pub(super) timed: bool,
    /// Whether the line states a change (`text::states_change`).
    pub(super) changes: bool,
    pub(super) claims: Vec<(String, String)>,
}

/// Corpus statistics of the partitions one search touches.
pub(super) struct Stats {
    pub(super) partitions: Vec<u32>,
    pub(super) n: u64,
    pub(super) avgdl: f32,
}

/// The BM25 backend.
#[derive(Clone, Default)]
pub struct LexicalBackend {
    /// Looked up once per term of every text published and every query,
    /// and per query term and candidate for the speaker prior: hashed with
    /// foldhash (randomly seeded per process, as the fence's slots are)
    /// rather than SipHash.
    pub(super) vocab: HashMap<String, u32, foldhash::quality::RandomState>,
    pub(super) partition_ids: HashMap<(String, String), u32>,
    pub(super) partitions: Vec<Partition>,
    pub(super) docs: Vec<Option<LexDoc>>,
    /// By doc: its place in its subject's timeline ([`Near`]), so a turn
    /// window is read off one cache line rather than walked doc by doc.
    pub(super) near: Vec<Near>,
    /// By doc: its length (1 for a doc not held), read for every doc of
    /// every window scored, so kept apart from the rest of a doc.
    pub(super) lens: Vec<u32>,
    /// By doc: its partition, kept after the doc is removed (doc numbers
    /// are never handed out twice), so a kept eligible set's partition
    /// counts can take out a doc no longer held (see `DocSet::changed`).
    pub(super) doc_partitions: Vec<u32>,
    pub(super) claims: HashMap<(String, String), BTreeSet<DocId>>,
}

/// No doc: past either end of a timeline.
pub(super) const NO_DOC: DocId = DocId::MAX;

/// Docs a [`Near`] holds on each side of its doc.
pub(super) const NEAR: usize = 4;

/// A length too long for a [`Near`]'s lengths: read from `lens` then.
const LONG_DOC: u16 = u16::MAX;

/// A doc's place in its subject's timeline: the [`NEAR`] docs just before
/// it, nearest first, then the [`NEAR`] just after it ([`NO_DOC`] past
/// either end), and their lengths and its own, in one cache line. The
/// timeline's neighbours are far apart in doc order (records are
/// published out of time order, and a new version takes a new doc), so
/// stepping doc by doc along links missed the cache at every step; a
/// window, and the walk that bounds one, reads one line per doc instead,
/// and steps on from the last doc of a side when ineligible docs make it
/// reach further.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct Near {
    /// Before (nearest first), then after (nearest first).
    pub(super) docs: [DocId; 2 * NEAR],
    /// The length of each of `docs`, then the doc's own; [`LONG_DOC`]
    /// for one that does not fit.
    lens: [u16; 2 * NEAR + 1],
}

impl Near {
    /// No neighbours: a doc not held, or alone in its timeline.
    const NONE: Near = Near {
        docs: [NO_DOC; 2 * NEAR],
        lens: [1; 2 * NEAR + 1],
    };

    /// The length of `docs[i]` (`i < 2 * NEAR`), or of the doc itself
    /// (`i == 2 * NEAR`), from the line when it fits.
    #[inline]
    pub(super) fn len(&self, i: usize, doc: DocId, lens: &[u32]) -> u32 {
        match self.lens[i] {
            LONG_DOC => lens.get(doc as usize).copied().unwrap_or(1),
            short => u32::from(short),
        }
    }
}

/// `len` as a [`Near`] keeps it.
fn short_len(len: u32) -> u16 {
    u16::try_from(len)
        .ok()
        .filter(|l| *l != LONG_DOC)
        .unwrap_or(LONG_DOC)
}

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

/// Batches at least this long are analysed on two threads.
const PARALLEL_PREPARE: usize = 4096;

impl LexicalBackend {
    /// Brings up to date the [`Near`] of the docs within [`NEAR`] of
    /// `key` in `pid`'s timeline, and of `key`'s doc if the timeline holds
    /// it: after `key` is put in or taken out. Each is read off the
    /// stretch of the timeline [`NEAR`] further on either side.
    fn place(&mut self, pid: u32, key: (u64, DocId)) {
        let timeline = &self.partitions[pid as usize].timeline;
        let mut run: Vec<DocId> = timeline
            .range(..key)
            .rev()
            .take(2 * NEAR)
            .map(|(_, d)| *d)
            .collect();
        // Fewer than asked: the run starts at the timeline's start.
        let starts = run.len() < 2 * NEAR;
        run.reverse();
        let first = run.len().saturating_sub(NEAR);
        let held = timeline.contains(&key);
        if held {
            run.push(key.1);
        }
        let before = run.len();
        run.extend(
            timeline
                .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
                .take(2 * NEAR)
                .map(|(_, d)| *d),
        );
        let ends = run.len() - before < 2 * NEAR;
        let last = (before + NEAR).min(run.len());
        let len = |d: DocId| self.lens.get(d as usize).copied().unwrap_or(1);
        let top = run.iter().copied().max().map_or(0, |d| d as usize + 1);
        if self.near.len() < top {
            self.near.resize(top, Near::NONE);
        }
        for i in first..last {
            let mut near = Near::NONE;
            for j in 0..NEAR {
                // Before: run[i - 1 - j]; past the run's start only when
                // it is the timeline's (else the run reaches further).
                if let Some(d) = i.checked_sub(1 + j).map(|x| run[x]) {
                    near.docs[j] = d;
                    near.lens[j] = short_len(len(d));
                } else {
                    debug_assert!(starts);
                }
                if let Some(&d) = run.get(i + 1 + j) {
                    near.docs[NEAR + j] = d;
                    near.lens[NEAR + j] = short_len(len(d));
                } else {
                    debug_assert!(ends);
                }
            }
            near.lens[2 * NEAR] = short_len(len(run[i]));
            self.near[run[i] as usize] = near;
        }
    }

    /// A doc's length (1 for a doc not held), off its [`Near`] line when
    /// it fits there.
    #[inline]
    pub(super) fn len_of(&self, doc: DocId) -> u32 {
        match self.near.get(doc as usize) {
            Some(near) => near.len(2 * NEAR, doc, &self.lens),
            None => 1,
        }
    }
}

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
        let idx = doc as usize;
        if self.doc_partitions.len() <= idx {
            self.doc_partitions.resize(idx + 1, u32::MAX);
        }
        self.doc_partitions[idx] = pid;
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
        if self.lens.len() <= doc as usize {
            self.lens.resize(doc as usize + 1, 1);
        }
        self.lens[doc as usize] = prepared.len;
        self.place(pid, key);
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
        let key = (old.created_at_unix_ms, doc);
        partition.timeline.remove(&key);
        if let Some(near) = self.near.get_mut(doc as usize) {
            *near = Near::NONE;
        }
        self.place(old.partition, key);
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

    fn partition_of(&self, doc: DocId) -> Option<u32> {
        self.doc_partitions
            .get(doc as usize)
            .copied()
            .filter(|p| *p != u32::MAX)
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

impl LexicalIndex {
    pub(super) fn stats(&self, docs: &DocSet) -> Option<Stats> {
        let b = &self.backend;
        // A doc keeps its partition while it lives, and a set is resolved
        // again when the fence moves, so the set can keep them.
        let partitions: Vec<u32> = docs
            .partitions(|| {
                let mut counts: Vec<(u32, u32)> = Vec::new();
                for d in docs.docs() {
                    let Some(p) = b.docs.get(d as usize).and_then(|x| x.as_ref()) else {
                        continue;
                    };
                    match counts.last_mut() {
                        Some((last, n)) if *last == p.partition => *n += 1,
                        _ => counts.push((p.partition, 1)),
                    }
                }
                counts.sort_unstable_by_key(|(p, _)| *p);
                counts.dedup_by(|x, y| {
                    let same = x.0 == y.0;
                    if same {
                        y.1 += x.1;
                    }
                    same
                });
                counts
            })
            .iter()
            .map(|(p, _)| *p)
            .collect();
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

    pub(super) fn idf(&self, stats: &Stats, tid: u32) -> f32 {
        let df: u64 = stats
            .partitions
            .iter()
            .filter_map(|p| self.backend.partitions[*p as usize].postings.get(&tid))
            .map(|l| l.len() as u64)
            .sum();
        bm25_idf(stats.n, df)
    }

    /// A doc's length (1 for a doc not held).
    pub(super) fn doc_len(&self, doc: DocId) -> f32 {
        self.backend.lens.get(doc as usize).copied().unwrap_or(1) as f32
    }
}
