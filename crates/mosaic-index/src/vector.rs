//! The vector target (outbox target name `vector`): embeddings of live
//! records in an [`AnnIndex`], planned per query.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ann::{AnnConfig, AnnIndex, GraphSnapshot, SearchPlan};
use crate::embed::{Embedder, Passages, Span, check_embedding, complete_passages, embed_passages};
use crate::error::IndexError;
use crate::fenced::{Backend, FencedIndex};
use crate::lexical::{Hit, sort_hits_by};
use crate::scope::{DocSet, Eligible};
use crate::target::{Acknowledgement, DocId, LiveEntry, PublishMessage, TargetSnapshot};

/// The passages of a record longer than the embedder's window.
#[derive(Clone)]
struct LongRecord {
    spans: Vec<Span>,
    /// Vectors of passages 1.. (passage 0's is in the graph).
    rest: Vec<Vec<f32>>,
}

/// Which passage of a record matched a query best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PassageMatch {
    /// The passage, from 0.
    pub index: usize,
    /// How many passages the record was indexed as.
    pub passages: usize,
    /// Its byte span in the record's text.
    pub span: Span,
}

/// The vector backend.
#[derive(Clone)]
pub struct VectorBackend {
    embedder: Arc<dyn Embedder>,
    ann: AnnIndex,
    subjects: HashMap<(String, String), BTreeSet<DocId>>,
    doc_subject: HashMap<DocId, (String, String)>,
    /// Records longer than the embedder's window: every passage's span,
    /// and the vectors of the passages after the first (the first is the
    /// record's vector in `ann`, so candidate generation, snapshots and
    /// graphs work as for a short record).
    passages: HashMap<DocId, LongRecord>,
    /// Store inserted vectors without linking them into the graph (while
    /// restoring: see [`VectorIndex::restore_saved`]).
    defer_graph: bool,
}

impl Backend for VectorBackend {
    type Prepared = Passages;

    fn prepare(&self, entries: &[&LiveEntry]) -> Vec<Result<Passages, IndexError>> {
        let texts: Vec<&str> = entries.iter().map(|e| e.text.as_str()).collect();
        embed_passages(self.embedder.as_ref(), &texts)
    }

    fn insert(&mut self, doc: DocId, entry: &LiveEntry, prepared: Passages) {
        let Passages { spans, vectors } = prepared;
        let mut vectors = vectors.into_iter();
        let first = vectors.next().unwrap_or_default();
        if self.defer_graph {
            self.ann.insert_pending(doc, &first);
        } else {
            self.ann.insert(doc, &first);
        }
        let rest: Vec<Vec<f32>> = vectors.collect();
        if rest.is_empty() {
            self.passages.remove(&doc);
        } else {
            self.passages.insert(doc, LongRecord { spans, rest });
        }
        let key = (
            entry.scope.tenant_id.clone(),
            entry.scope.subject_key.clone(),
        );
        self.subjects.entry(key.clone()).or_default().insert(doc);
        self.doc_subject.insert(doc, key);
    }

    fn remove(&mut self, doc: DocId) {
        self.ann.remove(doc);
        self.passages.remove(&doc);
        if let Some(key) = self.doc_subject.remove(&doc)
            && let Some(set) = self.subjects.get_mut(&key)
        {
            set.remove(&doc);
            if set.is_empty() {
                self.subjects.remove(&key);
            }
        }
    }

    fn subject_docs(&self, tenant_id: &str, subject_key: &str) -> Vec<DocId> {
        self.subjects
            .get(&(tenant_id.to_owned(), subject_key.to_owned()))
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// The vector target.
pub type VectorIndex = FencedIndex<VectorBackend>;

impl VectorIndex {
    /// An empty vector target embedding with `embedder`.
    pub fn new(embedder: Arc<dyn Embedder>, config: AnnConfig) -> Self {
        let dim = embedder.dimension();
        FencedIndex::with_backend(
            "vector",
            VectorBackend {
                embedder,
                ann: AnnIndex::new(dim, config),
                subjects: HashMap::new(),
                doc_subject: HashMap::new(),
                passages: HashMap::new(),
                defer_graph: false,
            },
        )
    }

    /// The embedder.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.backend.embedder
    }

    /// The vector dimension of this target (its embedder's).
    pub fn dimension(&self) -> usize {
        self.backend.ann.dim()
    }

    /// The vector stored for a live record (`None` for an unknown or
    /// tombstoned record).
    pub fn vector_of(&self, record_id: &str) -> Option<&[f32]> {
        self.backend.ann.vector_of(self.fence.doc_of(record_id)?)
    }

    /// [`IndexTarget::publish_batch`](crate::IndexTarget::publish_batch)
    /// with the embeddings computed by the caller (typically with
    /// [`VectorIndex::embedder`], outside the lock that guards this index):
    /// `vectors[i]` is the embedding of `messages[i].text`. Each vector is
    /// checked with [`check_embedding`] against [`VectorIndex::dimension`];
    /// a bad one, or an `Err` in its place, fails only its own message, and
    /// only if the fence would apply that message. A duplicate ignores its
    /// vector; a stale message reports the fence's refusal. If `vectors`
    /// does not hold exactly one entry per message, every message fails
    /// and nothing is applied.
    ///
    /// A text longer than the embedder's window has its later passages
    /// embedded here ([`complete_passages`]); a caller that holds a lock
    /// over this index embeds them first and calls
    /// [`VectorIndex::publish_batch_passages`].
    pub fn publish_batch_prepared(
        &mut self,
        messages: &[PublishMessage],
        vectors: Vec<Result<Vec<f32>, IndexError>>,
    ) -> Vec<Result<Acknowledgement, IndexError>> {
        if vectors.len() != messages.len() {
            // Every message fails (publish_batch_with's count check).
            let wrong = vectors
                .into_iter()
                .map(|v| v.map(|v| Passages::whole(0, v)))
                .collect();
            return self.publish_batch_with(messages, wrong);
        }
        let dim = self.dimension();
        let embedder = self.backend.embedder.clone();
        let passages = messages
            .iter()
            .zip(vectors)
            .map(|(m, v)| {
                v.and_then(|v| check_embedding(&v, dim).map(|()| v))
                    .and_then(|v| complete_passages(embedder.as_ref(), &m.text, v))
            })
            .collect();
        self.publish_batch_passages(messages, passages)
    }

    /// [`VectorIndex::publish_batch_prepared`] with every passage of each
    /// text embedded by the caller (see [`crate::embed::embed_passages`]
    /// and [`complete_passages`]): each vector is checked against the
    /// dimension, and the spans must be one per vector and inside the
    /// text, else the message fails.
    pub fn publish_batch_passages(
        &mut self,
        messages: &[PublishMessage],
        passages: Vec<Result<Passages, IndexError>>,
    ) -> Vec<Result<Acknowledgement, IndexError>> {
        let dim = self.dimension();
        let checked = if passages.len() == messages.len() {
            messages
                .iter()
                .zip(passages)
                .map(|(m, p)| p.and_then(|p| check_passages(&p, m.text.len(), dim).map(|()| p)))
                .collect()
        } else {
            passages
        };
        self.publish_batch_with(messages, checked)
    }

    /// Top-`k` eligible records by cosine similarity to `query_vector`, and
    /// the plan used. Ties by record id.
    pub fn search_vector(
        &self,
        query_vector: &[f32],
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
    ) -> (SearchPlan, Vec<Hit>) {
        let docs = self.resolve(eligible, tenant_id, policy_sha256);
        self.search_docs(query_vector, &docs, k)
    }

    /// Top-`k` live records of one tenant's subject and kind by cosine
    /// similarity to `query_vector`, whatever policy they were published
    /// under: the write guards' vector candidates (the subject's own docs,
    /// as [`LexicalIndex::sharing_terms`](crate::LexicalIndex::sharing_terms)
    /// finds the lexical ones), searched exactly or through the filtered
    /// graph by the same plan as a ranked query.
    pub fn nearest_in_subject(
        &self,
        query_vector: &[f32],
        tenant_id: &str,
        subject_key: &str,
        kind: mosaic_harness::MemoryKind,
        k: usize,
    ) -> Vec<Hit> {
        let mut docs = DocSet::with_capacity(self.fence.doc_capacity());
        for doc in self.backend.subject_docs(tenant_id, subject_key) {
            let same_kind = self
                .fence
                .record_of(doc)
                .and_then(|r| self.fence.live_entry(r))
                .is_some_and(|l| l.scope.kind == kind && l.scope.tenant_id == tenant_id);
            if same_kind {
                docs.insert(doc);
            }
        }
        if docs.is_empty() || query_vector.len() != self.dimension() {
            return Vec::new();
        }
        self.search_docs(query_vector, &docs, k).1
    }

    pub(crate) fn search_docs(
        &self,
        query_vector: &[f32],
        docs: &DocSet,
        k: usize,
    ) -> (SearchPlan, Vec<Hit>) {
        self.search_docs_seeded(query_vector, docs, k, &[])
    }

    /// [`VectorIndex::search_docs`] with records to start the graph's walk
    /// from besides its own entry (see [`AnnIndex::search_seeded`]): the
    /// first `search_seeds` of `seeds` (record ids, best first) that this
    /// target holds; with none, or when the plan is the exact scan, the
    /// same answer as without.
    pub(crate) fn search_docs_seeded(
        &self,
        query_vector: &[f32],
        docs: &DocSet,
        k: usize,
        seeds: &[&str],
    ) -> (SearchPlan, Vec<Hit>) {
        let (plan, hits) =
            self.search_docs_seeded_hinted(query_vector, docs, k, seeds.len(), |i| {
                self.fence.doc_of(seeds[i])
            });
        (plan, hits.into_iter().map(|(_, hit)| hit).collect())
    }

    /// [`FencedIndex::search_docs_seeded`] with each hit's doc; the seeds
    /// are records with a doc each may have here (see
    /// [`FencedIndex::docs_of_hinted`]).
    pub(crate) fn search_docs_seeded_docs(
        &self,
        query_vector: &[f32],
        docs: &DocSet,
        k: usize,
        seeds: &[(DocId, &str)],
    ) -> (SearchPlan, Vec<(DocId, Hit)>) {
        let mut resolved: Vec<Option<DocId>> = Vec::new();
        let wanted = seeds.len().min(self.backend.ann.config().search_seeds);
        if self.backend.ann.plan(docs.len()) == SearchPlan::FilteredGraph {
            resolved = self.docs_of_hinted(&seeds[..wanted]);
        }
        self.search_docs_seeded_hinted(query_vector, docs, k, resolved.len(), |i| resolved[i])
    }

    /// The seeded search, the doc of seed `i` (of `seeds`) given by
    /// `seed_doc`, asked only when the plan is the graph.
    fn search_docs_seeded_hinted(
        &self,
        query_vector: &[f32],
        docs: &DocSet,
        k: usize,
        seeds: usize,
        seed_doc: impl Fn(usize) -> Option<DocId>,
    ) -> (SearchPlan, Vec<(DocId, Hit)>) {
        let ann = &self.backend.ann;
        let seeds: Vec<DocId> = if ann.plan(docs.len()) == SearchPlan::FilteredGraph {
            (0..seeds)
                .take(ann.config().search_seeds)
                .filter_map(seed_doc)
                .collect()
        } else {
            Vec::new()
        };
        let (plan, mut found) = ann.search_seeded(query_vector, docs, k, &seeds);
        self.best_passages(query_vector, docs, k, &mut found);
        let mut hits: Vec<(DocId, Hit)> = found
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
            .collect();
        sort_hits_by(&mut hits, |(_, hit)| hit);
        (plan, hits)
    }
}

/// Checks a record's passages: one span per vector, at least one, spans
/// inside the text, vectors of the dimension and finite.
fn check_passages(p: &Passages, text_len: usize, dim: usize) -> Result<(), IndexError> {
    if p.vectors.is_empty()
        || p.spans.len() != p.vectors.len()
        || p.spans.iter().any(|s| s.start > s.end || s.end > text_len)
    {
        return Err(IndexError::BadEmbedding {
            expected: p.spans.len().max(1),
            actual: p.vectors.len(),
        });
    }
    p.vectors.iter().try_for_each(|v| check_embedding(v, dim))
}

impl VectorIndex {
    /// A record longer than the embedder's window scores by its best
    /// passage: `found` (the graph's or the exact scan's top `k` by each
    /// record's first passage) is merged with the eligible long records'
    /// later passages, scanned exactly (there is one entry per long record,
    /// so the scan is over the long records, or over `docs` when fewer).
    /// Each record appears once, with its best passage's similarity; best
    /// first, ties by doc, at most `k`.
    fn best_passages(&self, q: &[f32], docs: &DocSet, k: usize, found: &mut Vec<(DocId, f32)>) {
        let long = &self.backend.passages;
        if long.is_empty() || k == 0 {
            return;
        }
        let mut best: HashMap<DocId, f32> = found.iter().copied().collect();
        let mut consider = |doc: DocId, record: &LongRecord| {
            let Some(first) = self.backend.ann.vector_of(doc) else {
                return;
            };
            let score = record
                .rest
                .iter()
                .map(|v| crate::ann::dot(q, v))
                .fold(crate::ann::dot(q, first), f32::max);
            best.insert(doc, score);
        };
        if long.len() <= docs.len() {
            for (doc, record) in long {
                if docs.contains(*doc) {
                    consider(*doc, record);
                }
            }
        } else {
            for doc in docs.docs() {
                if let Some(record) = long.get(&doc) {
                    consider(doc, record);
                }
            }
        }
        let mut merged: Vec<(DocId, f32)> = best.into_iter().collect();
        merged.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        merged.truncate(k);
        *found = merged;
    }

    /// The passage of `record_id` most similar to `query_vector`, for a
    /// record indexed as several passages (`None` for one passage, or an
    /// unknown record).
    pub fn passage_match(&self, record_id: &str, query_vector: &[f32]) -> Option<PassageMatch> {
        // Without a record of several passages (an embedder without a
        // window, or only short texts), no id is looked up.
        if self.backend.passages.is_empty() {
            return None;
        }
        let doc = self.fence.doc_of(record_id)?;
        let record = self.backend.passages.get(&doc)?;
        let first = self.backend.ann.vector_of(doc)?;
        if query_vector.len() != first.len() {
            return None;
        }
        let mut index = 0;
        let mut top = crate::ann::dot(query_vector, first);
        for (i, v) in record.rest.iter().enumerate() {
            let score = crate::ann::dot(query_vector, v);
            if score > top {
                top = score;
                index = i + 1;
            }
        }
        Some(PassageMatch {
            index,
            passages: record.spans.len(),
            span: *record.spans.get(index)?,
        })
    }

    /// Live records indexed as several passages, and the vectors their
    /// later passages add (what chunking costs in index size).
    pub fn passage_counts(&self) -> (usize, usize) {
        let long = &self.backend.passages;
        (long.len(), long.values().map(|r| r.rest.len()).sum())
    }
}

impl VectorIndex {
    /// The vectors of every live record, bound to this target's embedder,
    /// so a restart can restore them instead of embedding every text again.
    pub fn embedding_snapshot(&self) -> EmbeddingSnapshot {
        let vectors = self
            .fence
            .live_slots()
            .filter_map(|(id, doc, entry)| {
                let v = self.backend.ann.vector_of(doc)?;
                Some((id.to_owned(), (entry.text_sha256.clone(), v.to_vec())))
            })
            .collect();
        EmbeddingSnapshot {
            release: self.backend.embedder.release().to_owned(),
            dimension: self.backend.ann.dim(),
            vectors,
        }
    }

    /// Loads a snapshot into this (empty) target, reusing the saved vector
    /// of every live record whose text digest matches, when `embeddings`
    /// come from this embedder release and dimension; everything else is
    /// embedded again. Returns how many texts were embedded.
    pub fn restore_with_embeddings(
        &mut self,
        snapshot: &TargetSnapshot,
        embeddings: Option<&EmbeddingSnapshot>,
    ) -> Result<usize, IndexError> {
        let dim = self.backend.ann.dim();
        let usable = embeddings
            .filter(|e| e.release == self.backend.embedder.release() && e.dimension == dim);
        let embedder = self.backend.embedder.clone();
        let saved = |id: &str, entry: &LiveEntry| -> Option<Vec<f32>> {
            let (text_sha256, vector) = usable?.vectors.get(id)?;
            (*text_sha256 == entry.text_sha256 && check_embedding(vector, dim).is_ok())
                .then(|| vector.clone())
        };
        // A saved vector is the record's first passage; the later passages
        // of records longer than the window are embedded again, in one
        // batch (a record whose passages fail is embedded whole below).
        let mut long: Vec<(&str, Vec<Span>)> = Vec::new();
        for (id, slot) in &snapshot.slots {
            if let Some(entry) = &slot.live
                && saved(id, entry).is_some()
            {
                let spans = embedder.passages(&entry.text);
                if spans.len() > 1 {
                    long.push((id.as_str(), spans));
                }
            }
        }
        let mut rest: HashMap<&str, Vec<Vec<f32>>> = HashMap::new();
        if !long.is_empty() {
            let texts: Vec<&str> = long
                .iter()
                .flat_map(|(id, spans)| {
                    let text = snapshot.slots[*id]
                        .live
                        .as_ref()
                        .map_or("", |l| l.text.as_str());
                    spans[1..]
                        .iter()
                        .map(move |s| text.get(s.start..s.end).unwrap_or(""))
                })
                .collect();
            let mut vectors = crate::embed::embed_checked(embedder.as_ref(), &texts).into_iter();
            for (id, spans) in &long {
                let mine: Result<Vec<Vec<f32>>, IndexError> =
                    vectors.by_ref().take(spans.len() - 1).collect();
                if let Ok(mine) = mine {
                    rest.insert(id, mine);
                }
            }
        }
        let long: HashMap<&str, Vec<Span>> = long.into_iter().collect();
        self.restore_with(snapshot, |id, entry| {
            let first = saved(id, entry)?;
            match long.get(id) {
                None => Some(Passages::whole(entry.text.len(), first)),
                Some(spans) => {
                    let mut vectors = vec![first];
                    vectors.extend(rest.get(id)?.iter().cloned());
                    Some(Passages {
                        spans: spans.clone(),
                        vectors,
                    })
                }
            }
        })
    }
}

/// What [`VectorIndex::restore_saved`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SavedRestore {
    /// Texts embedded (no saved vector fit them).
    pub embedded: usize,
    /// Whether the saved graph was attached.
    pub graph_attached: bool,
    /// Live records not in the graph yet (searched exactly beside it until
    /// [`VectorIndex::absorb_pending`] links them in).
    pub pending: usize,
}

impl VectorIndex {
    /// The graph over the live records in record-id order, the order of
    /// [`VectorIndex::embedding_snapshot`]'s vectors (take both under the
    /// same lock, so node `i` is the `i`-th saved vector).
    pub fn graph_snapshot(&self) -> Option<GraphSnapshot> {
        let mut live: Vec<(&str, DocId)> = self
            .fence
            .live_slots()
            .map(|(id, doc, _)| (id, doc))
            .collect();
        live.sort_unstable();
        let order: Vec<DocId> = live.into_iter().map(|(_, doc)| doc).collect();
        self.backend.ann.graph_snapshot(&order)
    }

    /// [`VectorIndex::restore_with_embeddings`] without graph work: every
    /// vector is stored as pending, then `graph` (saved with `embeddings`)
    /// is attached when every live record took its saved vector, so its
    /// node `i` is the `i`-th record; otherwise, or when the graph does not
    /// check out, the records stay pending (exact scan) until absorbed.
    /// Later publications (a journal replay) stay pending too, until
    /// [`VectorIndex::finish_restore`].
    pub fn restore_saved(
        &mut self,
        snapshot: &TargetSnapshot,
        embeddings: Option<&EmbeddingSnapshot>,
        graph: Option<&GraphSnapshot>,
    ) -> Result<SavedRestore, IndexError> {
        self.backend.defer_graph = true;
        let embedded = self.restore_with_embeddings(snapshot, embeddings)?;
        let all_saved =
            embedded == 0 && embeddings.is_some_and(|e| e.vectors.len() == self.backend.ann.len());
        let graph_attached = match graph {
            Some(g) if all_saved => self.backend.ann.attach_graph(g).is_ok(),
            _ => false,
        };
        Ok(SavedRestore {
            embedded,
            graph_attached,
            pending: self.backend.ann.pending(),
        })
    }

    /// Ends a [`VectorIndex::restore_saved`]: publications from now on are
    /// linked into the graph as they arrive.
    pub fn finish_restore(&mut self) {
        self.backend.defer_graph = false;
    }

    /// From now on publications are stored pending: searched exactly
    /// beside the graph until [`VectorIndex::absorb_pending`] links them.
    /// For a service that links them on a thread of its own, so that a
    /// publication never waits for graph work.
    pub fn defer_linking(&mut self) {
        self.backend.defer_graph = true;
    }

    /// Links up to `budget` pending records into the graph (lowest doc
    /// first); returns how many remain pending.
    pub fn absorb_pending(&mut self, budget: usize) -> usize {
        self.backend.ann.absorb(budget)
    }

    /// [`VectorIndex::absorb_pending`], also telling what the linking
    /// decided, for [`VectorIndex::apply_graph_delta`] on a copy of this
    /// target as it was before.
    pub fn absorb_pending_recorded(&mut self, budget: usize) -> (usize, crate::ann::GraphDelta) {
        self.backend.ann.absorb_recorded(budget)
    }

    /// Links what [`VectorIndex::absorb_pending_recorded`] linked on a
    /// target that held what this one holds, as it did, without searching
    /// for neighbours again.
    pub fn apply_graph_delta(&mut self, delta: &crate::ann::GraphDelta) {
        self.backend.ann.apply_delta(delta);
    }

    /// Live records not in the graph yet.
    pub fn pending_graph(&self) -> usize {
        self.backend.ann.pending()
    }
}

/// Magic line that opens an embedding snapshot file.
const EMBEDDINGS_MAGIC: &[u8] = b"mosaic-embeddings-v1\n";

/// The vectors of a vector target's live records, bound to the embedder
/// release and dimension that produced them.
///
/// File layout: the magic line `mosaic-embeddings-v1`, a little-endian
/// `u32` header length, the header (strict JSON: `release`, `dimension`,
/// `count`, `body_sha256`), then the body: per record in record-id order a
/// little-endian `u32` id length, the id in UTF-8, the 32-byte SHA-256 of
/// the embedded text, and `dimension` little-endian `f32`s. The body's
/// SHA-256 is checked on load; trailing bytes are errors.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingSnapshot {
    /// The embedder release that produced the vectors.
    pub release: String,
    /// Vector dimension.
    pub dimension: usize,
    /// Record id to (SHA-256 hex of the embedded text, vector).
    pub vectors: BTreeMap<String, (String, Vec<f32>)>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmbeddingHeader {
    release: String,
    dimension: usize,
    count: usize,
    body_sha256: String,
}

fn snapshot_error(problem: &str) -> IndexError {
    IndexError::Snapshot(format!("embedding snapshot: {problem}"))
}

/// Reads `n` bytes at `*at`, advancing it.
fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], IndexError> {
    let end = at
        .checked_add(n)
        .filter(|end| *end <= bytes.len())
        .ok_or_else(|| snapshot_error("truncated"))?;
    let out = &bytes[*at..end];
    *at = end;
    Ok(out)
}

fn read_u32(bytes: &[u8], at: &mut usize) -> Result<usize, IndexError> {
    let raw = take(bytes, at, 4)?;
    let mut le = [0u8; 4];
    le.copy_from_slice(raw);
    usize::try_from(u32::from_le_bytes(le)).map_err(|_| snapshot_error("length"))
}

impl EmbeddingSnapshot {
    /// Encodes the snapshot (see the type's documentation for the layout).
    pub fn to_bytes(&self) -> Result<Vec<u8>, IndexError> {
        let mut body = Vec::with_capacity(self.vectors.len() * (48 + 4 * self.dimension));
        for (id, (text_sha256, vector)) in &self.vectors {
            if vector.len() != self.dimension {
                return Err(snapshot_error("vector of the wrong dimension"));
            }
            let digest = hex::decode(text_sha256)
                .ok()
                .filter(|d| d.len() == 32)
                .ok_or_else(|| snapshot_error("text digest is not SHA-256 hex"))?;
            let len = u32::try_from(id.len()).map_err(|_| snapshot_error("record id too long"))?;
            body.extend_from_slice(&len.to_le_bytes());
            body.extend_from_slice(id.as_bytes());
            body.extend_from_slice(&digest);
            for x in vector {
                body.extend_from_slice(&x.to_le_bytes());
            }
        }
        let header = serde_json::to_vec(&EmbeddingHeader {
            release: self.release.clone(),
            dimension: self.dimension,
            count: self.vectors.len(),
            body_sha256: hex::encode(Sha256::digest(&body)),
        })
        .map_err(|e| IndexError::Snapshot(e.to_string()))?;
        let header_len =
            u32::try_from(header.len()).map_err(|_| snapshot_error("header too long"))?;
        let mut out = Vec::with_capacity(EMBEDDINGS_MAGIC.len() + 4 + header.len() + body.len());
        out.extend_from_slice(EMBEDDINGS_MAGIC);
        out.extend_from_slice(&header_len.to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// What a graph saved with the snapshot file `bytes` is bound to: the
    /// SHA-256 of the file up to the end of its header, which commits to
    /// the body through `body_sha256` (checked by
    /// [`EmbeddingSnapshot::from_bytes`]). `None` for bytes that do not
    /// open like a snapshot.
    pub fn binding_of(bytes: &[u8]) -> Option<String> {
        let mut at = 0;
        if take(bytes, &mut at, EMBEDDINGS_MAGIC.len()).ok()? != EMBEDDINGS_MAGIC {
            return None;
        }
        let header_len = read_u32(bytes, &mut at).ok()?;
        take(bytes, &mut at, header_len).ok()?;
        Some(hex::encode(Sha256::digest(&bytes[..at])))
    }

    /// Decodes a snapshot, strictly: the magic line, a header with exactly
    /// its fields, a body matching the header's SHA-256, record ids in
    /// increasing order, and nothing after the last vector.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, IndexError> {
        let mut at = 0;
        if take(bytes, &mut at, EMBEDDINGS_MAGIC.len())? != EMBEDDINGS_MAGIC {
            return Err(snapshot_error("not an embedding snapshot"));
        }
        let header_len = read_u32(bytes, &mut at)?;
        let header: EmbeddingHeader = serde_json::from_slice(take(bytes, &mut at, header_len)?)
            .map_err(|e| IndexError::Snapshot(format!("embedding snapshot header: {e}")))?;
        let body = &bytes[at..];
        if hex::encode(Sha256::digest(body)) != header.body_sha256 {
            return Err(snapshot_error("body does not match its SHA-256"));
        }
        if header.dimension == 0 {
            return Err(snapshot_error("dimension 0"));
        }
        let mut at = 0;
        let mut vectors = BTreeMap::new();
        let mut previous: Option<String> = None;
        for _ in 0..header.count {
            let len = read_u32(body, &mut at)?;
            let id = std::str::from_utf8(take(body, &mut at, len)?)
                .map_err(|_| snapshot_error("record id is not UTF-8"))?
                .to_owned();
            if id.is_empty() || previous.as_ref().is_some_and(|p| *p >= id) {
                return Err(snapshot_error("record ids empty or out of order"));
            }
            let text_sha256 = hex::encode(take(body, &mut at, 32)?);
            let raw = take(body, &mut at, 4 * header.dimension)?;
            let vector: Vec<f32> = raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            previous = Some(id.clone());
            vectors.insert(id, (text_sha256, vector));
        }
        if at != body.len() {
            return Err(snapshot_error("trailing bytes"));
        }
        Ok(EmbeddingSnapshot {
            release: header.release,
            dimension: header.dimension,
            vectors,
        })
    }

    /// Writes the snapshot atomically (temporary file, then rename).
    pub fn save(&self, path: &std::path::Path) -> Result<(), IndexError> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, self.to_bytes()?).map_err(|e| IndexError::Snapshot(e.to_string()))?;
        std::fs::rename(&tmp, path).map_err(|e| IndexError::Snapshot(e.to_string()))
    }

    /// Reads a snapshot written by [`EmbeddingSnapshot::save`].
    pub fn load(path: &std::path::Path) -> Result<Self, IndexError> {
        let bytes = std::fs::read(path).map_err(|e| IndexError::Snapshot(e.to_string()))?;
        Self::from_bytes(&bytes)
    }
}
