//! The vector target (outbox target name `vector`): embeddings of live
//! records in an [`AnnIndex`], planned per query.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::ann::{AnnConfig, AnnIndex, SearchPlan};
use crate::embed::{Embedder, check_embedding};
use crate::error::IndexError;
use crate::fenced::{Backend, FencedIndex};
use crate::lexical::{Hit, sort_hits};
use crate::scope::{DocSet, Eligible};
use crate::target::{DocId, LiveEntry};

/// The vector backend.
pub struct VectorBackend {
    embedder: Arc<dyn Embedder>,
    ann: AnnIndex,
    subjects: HashMap<(String, String), BTreeSet<DocId>>,
    doc_subject: HashMap<DocId, (String, String)>,
}

impl Backend for VectorBackend {
    type Prepared = Vec<f32>;

    fn prepare(&self, entries: &[&LiveEntry]) -> Vec<Result<Vec<f32>, IndexError>> {
        let texts: Vec<&str> = entries.iter().map(|e| e.text.as_str()).collect();
        match self.embedder.embed_batch(&texts) {
            Ok(vectors) if vectors.len() == texts.len() => vectors
                .into_iter()
                .map(|v| check_embedding(&v, self.ann.dim()).map(|()| v))
                .collect(),
            Ok(vectors) => texts
                .iter()
                .map(|_| {
                    Err(IndexError::BadEmbedding {
                        expected: texts.len(),
                        actual: vectors.len(),
                    })
                })
                .collect(),
            Err(e) => texts.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    fn insert(&mut self, doc: DocId, entry: &LiveEntry, prepared: Vec<f32>) {
        self.ann.insert(doc, &prepared);
        let key = (
            entry.scope.tenant_id.clone(),
            entry.scope.subject_key.clone(),
        );
        self.subjects.entry(key.clone()).or_default().insert(doc);
        self.doc_subject.insert(doc, key);
    }

    fn remove(&mut self, doc: DocId) {
        self.ann.remove(doc);
        if let Some(key) = self.doc_subject.remove(&doc) {
            if let Some(set) = self.subjects.get_mut(&key) {
                set.remove(&doc);
                if set.is_empty() {
                    self.subjects.remove(&key);
                }
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
            },
        )
    }

    /// The embedder.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.backend.embedder
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

    pub(crate) fn search_docs(
        &self,
        query_vector: &[f32],
        docs: &DocSet,
        k: usize,
    ) -> (SearchPlan, Vec<Hit>) {
        let (plan, found) = self.backend.ann.search(query_vector, docs, k);
        let mut hits: Vec<Hit> = found
            .into_iter()
            .filter_map(|(doc, score)| {
                self.record_of(doc).map(|r| Hit {
                    record_id: r.to_owned(),
                    score,
                })
            })
            .collect();
        sort_hits(&mut hits);
        (plan, hits)
    }
}
