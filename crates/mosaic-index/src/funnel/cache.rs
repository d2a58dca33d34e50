//! The result cache and the identities a result is kept under: the cache
//! key, the digest of a complete query and the feature release.

use std::collections::HashMap;

use mosaic_harness::canonical::domain_digest;
use serde::Serialize;

use super::{FunnelConfig, QUERY_DOMAIN, Recall, RecallQuery, RetrievalMode};
use crate::error::IndexError;
use crate::text::ANALYZER_RELEASE;

/// The identity a cached result is stored under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Tenant.
    pub tenant_id: String,
    /// Policy digest.
    pub policy_sha256: String,
    /// Snapshot generations of the lexical and vector targets.
    pub index_snapshot_generation: (u64, u64),
    /// Tombstones applied by the targets (index revocation generation).
    pub index_revocation_generation: u64,
    /// The store's revocation generation.
    pub store_revocation_generation: u64,
    /// Selector release.
    pub selector_release: String,
    /// Read subject.
    pub read_subject: String,
    /// Digest of the complete query.
    pub query_sha256: String,
}

/// A bounded result cache that forgets everything older than the newest
/// snapshot it has seen.
#[derive(Default)]
pub struct ResultCache {
    pub(super) entries: HashMap<CacheKey, Recall>,
    pub(super) snapshot: (u64, u64, u64),
    pub(super) capacity: usize,
}

impl ResultCache {
    pub(super) fn get(&self, key: &CacheKey) -> Option<&Recall> {
        self.entries.get(key)
    }

    pub(super) fn put(&mut self, key: CacheKey, value: Recall) {
        let snapshot = (
            key.index_snapshot_generation.0,
            key.index_snapshot_generation.1,
            key.index_revocation_generation,
        );
        if snapshot != self.snapshot || self.entries.len() >= self.capacity {
            self.entries.clear();
            self.snapshot = snapshot;
        }
        if self.capacity > 0 {
            self.entries.insert(key, value);
        }
    }

    /// Cached entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[derive(Serialize)]
struct QueryBody<'a> {
    text: &'a str,
    claim_keys: &'a [String],
    eligible_set_sha256: &'a str,
    max_results: usize,
    mode: RetrievalMode,
    config: &'a FunnelConfig,
    feature_release: &'a str,
}

/// The digest of a complete query (text, claim keys, eligible-set digest,
/// result count, mode, fusion parameters and feature release): the
/// `query_sha256` of its relevance receipt, whichever candidate source
/// answered it.
pub fn query_digest(
    query: &RecallQuery<'_>,
    eligible_set_sha256: &str,
    config: &FunnelConfig,
    feature_release: &str,
) -> Result<String, IndexError> {
    Ok(domain_digest(
        QUERY_DOMAIN,
        &QueryBody {
            text: query.text,
            claim_keys: query.claim_keys,
            eligible_set_sha256,
            max_results: query.max_results,
            mode: query.mode,
            config,
            feature_release,
        },
    )?)
}

/// The feature release of a reading: the analyzer's and the embedder's.
pub fn feature_release_of(embedder_release: &str) -> String {
    format!("{ANALYZER_RELEASE}+{embedder_release}")
}
