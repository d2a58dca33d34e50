//! BM25 over a small in-memory inverted index, with postings partitioned by
//! scope (tenant + subject) so a selective read touches only its own
//! partitions, and statistics (document count, average length, document
//! frequency) computed over the partitions searched, so one tenant's data
//! never shapes another's scores.
//!
//! Useful for: exact words, names, rare terms; claim-key exact matches; a
//! subject's records in time order (neighbouring-record context).
//! Not useful for: paraphrase (see the vector index).

use std::collections::{BTreeSet, HashMap};

use crate::error::IndexError;
use crate::fenced::{Backend, FencedIndex};
use crate::scope::{DocSet, Eligible};
use crate::target::{DocId, LiveEntry};
use crate::text::terms;

/// BM25 `k1`.
pub const BM25_K1: f32 = 1.2;
/// BM25 `b`.
pub const BM25_B: f32 = 0.75;

#[derive(Default)]
struct Partition {
    postings: HashMap<u32, Vec<(DocId, u32)>>,
    n_docs: u64,
    total_len: u64,
    timeline: BTreeSet<(u64, DocId)>,
}

struct LexDoc {
    partition: u32,
    len: u32,
    created_at_unix_ms: u64,
    terms: Vec<(u32, u32)>,
    claims: Vec<(String, String)>,
}

/// The BM25 backend.
#[derive(Default)]
pub struct LexicalBackend {
    vocab: HashMap<String, u32>,
    partition_ids: HashMap<(String, String), u32>,
    partitions: Vec<Partition>,
    docs: Vec<Option<LexDoc>>,
    claims: HashMap<(String, String), BTreeSet<DocId>>,
}

/// Prepared lexical document: term frequencies.
pub struct LexPrepared {
    terms: Vec<(String, u32)>,
    len: u32,
}

impl Backend for LexicalBackend {
    type Prepared = LexPrepared;

    fn prepare(&self, entries: &[&LiveEntry]) -> Vec<Result<LexPrepared, IndexError>> {
        entries
            .iter()
            .map(|e| {
                let all = terms(&e.text);
                let len = u32::try_from(all.len()).unwrap_or(u32::MAX);
                let mut counts: HashMap<String, u32> = HashMap::new();
                for t in all {
                    *counts.entry(t).or_default() += 1;
                }
                let mut terms: Vec<(String, u32)> = counts.into_iter().collect();
                terms.sort();
                Ok(LexPrepared { terms, len })
            })
            .collect()
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
        let partition = &mut self.partitions[pid as usize];
        for &(tid, tf) in &term_ids {
            partition.postings.entry(tid).or_default().push((doc, tf));
        }
        partition.n_docs += 1;
        partition.total_len += u64::from(prepared.len);
        partition.timeline.insert((entry.created_at_unix_ms, doc));
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

    pub(crate) fn search_docs(&self, query_terms: &[String], docs: &DocSet, k: usize) -> Vec<Hit> {
        let b = &self.backend;
        let mut partitions: Vec<u32> = docs
            .docs()
            .iter()
            .filter_map(|d| {
                b.docs
                    .get(*d as usize)
                    .and_then(|x| x.as_ref())
                    .map(|x| x.partition)
            })
            .collect();
        partitions.sort_unstable();
        partitions.dedup();
        let n: u64 = partitions
            .iter()
            .map(|p| b.partitions[*p as usize].n_docs)
            .sum();
        let total_len: u64 = partitions
            .iter()
            .map(|p| b.partitions[*p as usize].total_len)
            .sum();
        if n == 0 {
            return Vec::new();
        }
        let avgdl = (total_len as f32 / n as f32).max(1.0);
        let mut unique: Vec<&String> = query_terms.iter().collect();
        unique.sort();
        unique.dedup();
        let mut scores: HashMap<DocId, f32> = HashMap::new();
        for term in unique {
            let Some(tid) = b.vocab.get(term.as_str()) else {
                continue;
            };
            let df: u64 = partitions
                .iter()
                .filter_map(|p| b.partitions[*p as usize].postings.get(tid))
                .map(|l| l.len() as u64)
                .sum();
            if df == 0 {
                continue;
            }
            let idf = (1.0 + (n as f32 - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
            for p in &partitions {
                let Some(list) = b.partitions[*p as usize].postings.get(tid) else {
                    continue;
                };
                for &(doc, tf) in list {
                    if !docs.contains(doc) {
                        continue;
                    }
                    let len = b.docs[doc as usize].as_ref().map_or(1, |d| d.len) as f32;
                    let tf = tf as f32;
                    let s = idf * tf * (BM25_K1 + 1.0)
                        / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * len / avgdl));
                    *scores.entry(doc).or_default() += s;
                }
            }
        }
        let mut hits: Vec<Hit> = scores
            .into_iter()
            .filter_map(|(doc, score)| {
                self.record_of(doc).map(|r| Hit {
                    record_id: r.to_owned(),
                    score,
                })
            })
            .collect();
        sort_hits(&mut hits);
        hits.truncate(k);
        hits
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

    /// The eligible records just before and just after `record_id` in its
    /// subject's timeline (creation time, then doc order).
    pub(crate) fn neighbours(&self, record_id: &str, docs: &DocSet) -> Vec<String> {
        let Some(doc) = self.fence.doc_of(record_id) else {
            return Vec::new();
        };
        let b = &self.backend;
        let Some(d) = b.docs.get(doc as usize).and_then(|x| x.as_ref()) else {
            return Vec::new();
        };
        let timeline = &b.partitions[d.partition as usize].timeline;
        let key = (d.created_at_unix_ms, doc);
        let before = timeline.range(..key).rev().find(|(_, x)| docs.contains(*x));
        let after = timeline
            .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
            .find(|(_, x)| docs.contains(*x));
        [before, after]
            .into_iter()
            .flatten()
            .filter_map(|(_, x)| self.record_of(*x).map(str::to_owned))
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
