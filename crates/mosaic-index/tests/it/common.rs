use std::sync::Arc;

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_index::{
    AnnConfig, FunnelConfig, HashEmbedder, LexicalIndex, PublishMessage, Retriever, ScopeKeys,
    VectorIndex,
};

pub fn policy() -> String {
    sha256_hex(b"test policy")
}

pub fn scope(tenant: &str, subject: &str) -> ScopeKeys {
    ScopeKeys {
        tenant_id: tenant.into(),
        policy_sha256: policy(),
        subject_key: subject.into(),
        kind: MemoryKind::Episodic,
    }
}

pub fn publish(record: &str, generation: u64, revoked: u64, text: &str) -> PublishMessage {
    PublishMessage {
        record_id: record.into(),
        generation,
        revocation_generation: revoked,
        scope: scope("tenant-a", "principal:alice"),
        created_at_unix_ms: 1_000 + generation,
        claim_keys: Vec::new(),
        text: text.into(),
    }
}

pub fn embedder() -> Arc<HashEmbedder> {
    Arc::new(HashEmbedder::new(64))
}

pub fn vector_index() -> VectorIndex {
    VectorIndex::new(embedder(), AnnConfig::default())
}

pub fn lexical_index() -> LexicalIndex {
    LexicalIndex::new()
}

pub fn retriever() -> Retriever {
    Retriever::new(embedder(), AnnConfig::default(), FunnelConfig::default())
}

/// A deterministic permutation of 0..n.
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for i in (1..n).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = (state >> 33) as usize % (i + 1);
        order.swap(i, j);
    }
    order
}
