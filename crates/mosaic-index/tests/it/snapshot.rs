//! A vector snapshot restores from its saved embeddings without embedding
//! any text again, answers exactly like the original, and falls back to
//! embedding only what the saved vectors cannot vouch for: another
//! embedder, another text, a corrupt file.
//! Layer under test: `VectorIndex::embedding_snapshot` /
//! `restore_with_embeddings` and the `EmbeddingSnapshot` file format.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mosaic_harness::MemoryKind;
use mosaic_index::vector::EmbeddingSnapshot;
use mosaic_index::{
    AnnConfig, Eligible, Embedder, HashEmbedder, IndexError, IndexTarget, ScopePredicate,
    TargetSnapshot, VectorIndex,
};

use crate::common::{policy, publish};

/// Counts the texts it embeds.
struct Counting {
    inner: HashEmbedder,
    release: String,
    texts: AtomicUsize,
}

impl Counting {
    fn new(release: &str) -> Arc<Self> {
        Arc::new(Counting {
            inner: HashEmbedder::new(64),
            release: release.to_owned(),
            texts: AtomicUsize::new(0),
        })
    }

    fn embedded(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

impl Embedder for Counting {
    fn release(&self) -> &str {
        &self.release
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed_batch(texts)
    }
}

const RECORDS: usize = 300;

/// A vector target with `RECORDS` records, some replaced by a newer
/// generation and some tombstoned.
fn populated(embedder: Arc<Counting>) -> VectorIndex {
    let mut index = VectorIndex::new(embedder, AnnConfig::default());
    for i in 0..RECORDS {
        let text = format!(
            "note {i}: the deploy of service {} failed at {}",
            i % 17,
            i % 5
        );
        index
            .publish(&publish(&format!("r{i:04}"), 1, 0, &text))
            .expect("publish");
    }
    for i in (0..RECORDS).step_by(7) {
        index
            .publish(&publish(
                &format!("r{i:04}"),
                2,
                0,
                &format!("revised note {i}"),
            ))
            .expect("republish");
    }
    for i in (3..RECORDS).step_by(11) {
        index.tombstone(&format!("r{i:04}"), 3).expect("tombstone");
    }
    index
}

fn answers(index: &VectorIndex, queries: &[Vec<f32>]) -> Vec<Vec<(String, i64)>> {
    let predicate = ScopePredicate {
        subject_keys: BTreeSet::from(["principal:alice".to_owned()]),
        kinds: BTreeSet::from([MemoryKind::Episodic]),
    };
    queries
        .iter()
        .map(|q| {
            let (_, hits) =
                index.search_vector(q, &Eligible::Scope(&predicate), "tenant-a", &policy(), 10);
            hits.into_iter()
                .map(|h| (h.record_id, (f64::from(h.score) * 1e6) as i64))
                .collect()
        })
        .collect()
}

fn queries() -> Vec<Vec<f32>> {
    let embedder = HashEmbedder::new(64);
    ["deploy failed", "service 3", "revised note", "note 42 at 2"]
        .iter()
        .map(|q| embedder.embed(q).expect("embed"))
        .collect()
}

fn round_trip(index: &VectorIndex) -> (TargetSnapshot, EmbeddingSnapshot) {
    let snapshot =
        TargetSnapshot::from_bytes(&index.snapshot().to_bytes().expect("encode")).expect("decode");
    let embeddings =
        EmbeddingSnapshot::from_bytes(&index.embedding_snapshot().to_bytes().expect("encode"))
            .expect("decode");
    (snapshot, embeddings)
}

#[test]
fn restoring_from_saved_embeddings_embeds_nothing_and_answers_the_same() {
    let original = populated(Counting::new("counting-v1"));
    let (snapshot, embeddings) = round_trip(&original);
    assert_eq!(embeddings.vectors.len(), original.live_count());

    let embedder = Counting::new("counting-v1");
    let mut restored = VectorIndex::new(embedder.clone(), AnnConfig::default());
    let embedded = restored
        .restore_with_embeddings(&snapshot, Some(&embeddings))
        .expect("restore");
    assert_eq!(embedded, 0);
    assert_eq!(embedder.embedded(), 0, "no text embedded on restore");
    assert_eq!(restored.snapshot(), original.snapshot());
    assert_eq!(restored.embedding_snapshot(), original.embedding_snapshot());
    let q = queries();
    assert!(answers(&original, &q).iter().all(|a| !a.is_empty()));
    assert_eq!(answers(&restored, &q), answers(&original, &q));

    // Without saved embeddings (an older data directory) it embeds every
    // live text, and still answers the same.
    let embedder = Counting::new("counting-v1");
    let mut rebuilt = VectorIndex::new(embedder.clone(), AnnConfig::default());
    rebuilt
        .restore_with_embeddings(&snapshot, None)
        .expect("restore");
    assert_eq!(embedder.embedded(), original.live_count());
    assert_eq!(answers(&rebuilt, &q), answers(&original, &q));
}

#[test]
fn another_embedder_or_another_text_is_embedded_again() {
    let original = populated(Counting::new("counting-v1"));
    let (mut snapshot, embeddings) = round_trip(&original);

    // Another release: nothing saved is trusted.
    let embedder = Counting::new("counting-v2");
    let mut other = VectorIndex::new(embedder.clone(), AnnConfig::default());
    let embedded = other
        .restore_with_embeddings(&snapshot, Some(&embeddings))
        .expect("restore");
    assert_eq!(embedded, original.live_count());
    assert_eq!(embedder.embedded(), original.live_count());

    // A live entry whose text no longer matches its saved vector (the
    // snapshot was written after the embeddings): only that one is
    // embedded again.
    let (id, slot) = snapshot
        .slots
        .iter_mut()
        .find(|(_, s)| s.live.is_some())
        .expect("a live slot");
    let id = id.clone();
    let live = slot.live.as_mut().expect("live");
    live.text = "a text written after the embeddings".to_owned();
    live.text_sha256 = mosaic_harness::canonical::sha256_hex(live.text.as_bytes());
    let embedder = Counting::new("counting-v1");
    let mut restored = VectorIndex::new(embedder.clone(), AnnConfig::default());
    let embedded = restored
        .restore_with_embeddings(&snapshot, Some(&embeddings))
        .expect("restore");
    assert_eq!((embedded, embedder.embedded()), (1, 1));
    let fresh = restored.embedding_snapshot();
    assert_eq!(
        fresh.vectors[&id].1,
        HashEmbedder::new(64)
            .embed("a text written after the embeddings")
            .expect("embed")
    );
}

#[test]
fn embedding_snapshots_decode_strictly() {
    let original = populated(Counting::new("counting-v1"));
    let bytes = original.embedding_snapshot().to_bytes().expect("encode");
    assert!(EmbeddingSnapshot::from_bytes(&bytes).is_ok());

    // Any flipped byte is refused (magic, header or body digest).
    for at in [0, 25, bytes.len() / 2, bytes.len() - 1] {
        let mut corrupt = bytes.clone();
        corrupt[at] ^= 0x01;
        assert!(
            EmbeddingSnapshot::from_bytes(&corrupt).is_err(),
            "flipped byte {at} accepted"
        );
    }
    // Truncated, or with trailing data.
    assert!(EmbeddingSnapshot::from_bytes(&bytes[..bytes.len() - 4]).is_err());
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0, 0, 0, 0]);
    assert!(EmbeddingSnapshot::from_bytes(&longer).is_err());

    // A header with an unknown field is refused even when the digest holds.
    let magic_len = b"mosaic-embeddings-v1\n".len();
    let header_len =
        u32::from_le_bytes(bytes[magic_len..magic_len + 4].try_into().expect("4 bytes")) as usize;
    let header_at = magic_len + 4;
    let mut header: serde_json::Value =
        serde_json::from_slice(&bytes[header_at..header_at + header_len]).expect("header");
    header["extra"] = serde_json::json!(1);
    let header = serde_json::to_vec(&header).expect("json");
    let mut forged = bytes[..magic_len].to_vec();
    forged.extend_from_slice(&(header.len() as u32).to_le_bytes());
    forged.extend_from_slice(&header);
    forged.extend_from_slice(&bytes[header_at + header_len..]);
    let err = EmbeddingSnapshot::from_bytes(&forged).expect_err("unknown field");
    assert!(err.to_string().contains("extra"), "{err}");
}
