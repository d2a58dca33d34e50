//! The retriever: both targets, the funnel and its result cache.

use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    CacheKey, FunnelConfig, Recall, RecallQuery, ResultCache, RetrievalMode, feature_release_of,
    query_digest,
};
use crate::ann::AnnConfig;
use crate::embed::Embedder;
use crate::error::IndexError;
use crate::fusion::{MemorySource, fuse, gather, lexical_needed};
use crate::lexical::LexicalIndex;
use crate::vector::VectorIndex;

/// Both targets plus the funnel and its cache.
///
/// Recall takes `&self`: the result cache sits behind a mutex held only
/// to look a result up or store one, never while a recall is computed, so
/// concurrent readers share one retriever (it is `Send + Sync`).
///
/// A clone holds copies of both targets and shares the result cache with
/// the original: a service keeping two copies (one readers see, one it
/// changes) empties one cache for both, and a result is kept under the
/// targets' generations, which copies in the same state share.
#[derive(Clone)]
pub struct Retriever {
    /// The lexical target (fed by the `lexical` outbox).
    pub lexical: LexicalIndex,
    /// The vector target (fed by the `vector` outbox).
    pub vector: VectorIndex,
    config: FunnelConfig,
    cache: Arc<Mutex<ResultCache>>,
}

impl Retriever {
    /// A retriever with empty targets.
    pub fn new(embedder: Arc<dyn Embedder>, ann: AnnConfig, config: FunnelConfig) -> Self {
        let cache = ResultCache {
            capacity: config.cache_capacity,
            ..ResultCache::default()
        };
        Retriever {
            lexical: LexicalIndex::new(),
            vector: VectorIndex::new(embedder, ann),
            config,
            cache: Arc::new(Mutex::new(cache)),
        }
    }

    /// Replaces the fusion parameters (and empties the cache).
    pub fn set_config(&mut self, config: FunnelConfig) {
        *self.cache_lock() = ResultCache {
            capacity: config.cache_capacity,
            ..ResultCache::default()
        };
        self.config = config;
    }

    /// The fusion parameters.
    pub fn config(&self) -> &FunnelConfig {
        &self.config
    }

    /// The result cache, locked. A poisoned lock is recovered: the cache
    /// holds only finished results, each inserted whole.
    fn cache_lock(&self) -> MutexGuard<'_, ResultCache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops every cached result (a deletion purges the cache before its
    /// receipt names it); returns how many there were.
    pub fn clear_cache(&self) -> usize {
        let mut cache = self.cache_lock();
        let dropped = cache.entries.len();
        cache.entries.clear();
        dropped
    }

    /// Number of cached results.
    pub fn cache_len(&self) -> usize {
        self.cache_lock().len()
    }

    /// Analyzer and embedder releases.
    /// An embedder with a window adds how texts are cut into passages.
    pub fn feature_release(&self) -> String {
        let embedder = self.vector.embedder();
        let mut release = feature_release_of(embedder.release());
        if let Some(window) = embedder.window() {
            release.push_str(&format!(
                "+passages-w{window}-o{}",
                window / crate::embed::PASSAGE_OVERLAP_DIVISOR
            ));
        }
        release
    }

    /// Embeds a query (exposed so callers can time it separately).
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, IndexError> {
        self.vector.embedder().embed(text)
    }

    /// Runs the funnel, embedding the query if vectors are needed.
    pub fn recall(&self, query: &RecallQuery<'_>) -> Result<Recall, IndexError> {
        let vector = match query.mode {
            RetrievalMode::Lexical => None,
            _ => Some(self.embed_query(query.text)?),
        };
        self.recall_embedded(query, vector.as_deref())
    }

    /// The cache key of `query` against the current snapshot.
    pub fn cache_key(&self, query: &RecallQuery<'_>) -> Result<CacheKey, IndexError> {
        self.cache_key_with(query, query.eligible.sha256())
    }

    /// [`Retriever::cache_key`] with the eligible-set digest computed once
    /// by the caller (it goes into the receipt too).
    fn cache_key_with(
        &self,
        query: &RecallQuery<'_>,
        eligible_set_sha256: &str,
    ) -> Result<CacheKey, IndexError> {
        let query_sha256 = query_digest(
            query,
            eligible_set_sha256,
            &self.config,
            &self.feature_release(),
        )?;
        Ok(CacheKey {
            tenant_id: query.tenant_id.to_owned(),
            policy_sha256: query.policy_sha256.to_owned(),
            index_snapshot_generation: (
                self.lexical.snapshot_generation(),
                self.vector.snapshot_generation(),
            ),
            index_revocation_generation: self.lexical.revocation_epoch()
                + self.vector.revocation_epoch(),
            store_revocation_generation: query.revocation_generation,
            selector_release: query.selector_release.to_owned(),
            read_subject: query.read_subject.to_owned(),
            query_sha256,
        })
    }

    /// Runs the funnel with a precomputed query vector (`None` skips the
    /// vector generator).
    pub fn recall_embedded(
        &self,
        query: &RecallQuery<'_>,
        query_vector: Option<&[f32]>,
    ) -> Result<Recall, IndexError> {
        // The eligible set was sealed with its digest once for the read: it
        // names the set in the cache key here and in the relevance receipt.
        let key = self.cache_key_with(query, query.eligible.sha256())?;
        // The lock is held for the lookup and for the insertion only; two
        // readers missing the same key both compute it, identically.
        let cached = self.cache_lock().get(&key).cloned();
        if let Some(mut hit) = cached {
            hit.cache_hit = true;
            return Ok(hit);
        }
        let recall = self.compute(query, query_vector, &key.query_sha256)?;
        let kept = Recall {
            ranked: None,
            ..recall.clone()
        };
        self.cache_lock().put(key, kept);
        Ok(recall)
    }

    fn compute(
        &self,
        query: &RecallQuery<'_>,
        query_vector: Option<&[f32]>,
        query_sha256: &str,
    ) -> Result<Recall, IndexError> {
        // The lexical docs serve BM25, claim keys and neighbours; a pure
        // vector read without those never resolves them.
        let needed = lexical_needed(&self.config, query);
        let mut source = MemorySource::new(&self.lexical, &self.vector, query, needed);
        let candidates = gather(&mut source, &self.config, query, query_vector)?;
        fuse(
            &self.config,
            query,
            candidates,
            &source,
            query_sha256,
            self.feature_release(),
        )
    }
}
