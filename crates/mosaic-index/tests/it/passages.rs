//! A record longer than the embedder's window is indexed as several
//! overlapping passages, scored by its best one, and stays one record: one
//! hit, one tombstone, one entry in the receipt, whose explanation names
//! the passage that matched. Restores and journal replays hold the same
//! passages; an embedder without a window (hashing) embeds every text whole.
//! Layers under test: `embed::passage_windows` / `embed_passages` /
//! `complete_passages`, the vector target (`VectorIndex`) and the funnel's
//! explanations.

use std::collections::BTreeSet;
use std::sync::Arc;

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_scope::{EligibleEntry, EligibleSet, SealedEligibleSet};
use mosaic_index::embed::{Span, passage_windows};
use mosaic_index::vector::EmbeddingSnapshot;
use mosaic_index::{
    AnnConfig, Eligible, Embedder, FunnelConfig, HashEmbedder, IndexError, IndexTarget,
    RecallQuery, RetrievalMode, Retriever, ScopePredicate, TargetSnapshot, VectorIndex,
};

use crate::common::{policy, publish};

/// Window of the test embedder, in words; two are reserved, as a BERT
/// model's `[CLS]` and `[SEP]`, so a passage holds eight words.
const WINDOW: usize = 10;

/// A hashing embedder that, like a transformer, sees only the first
/// `WINDOW - 2` words of a text.
struct Windowed(HashEmbedder);

fn word_offsets(text: &str) -> Vec<(usize, usize)> {
    let mut offsets = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                offsets.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        offsets.push((s, text.len()));
    }
    offsets
}

impl Embedder for Windowed {
    fn release(&self) -> &str {
        "windowed-hash-v1"
    }

    fn dimension(&self) -> usize {
        self.0.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        let seen: Vec<&str> = texts
            .iter()
            .map(|t| match word_offsets(t).get(WINDOW - 2) {
                Some((cut, _)) => &t[..*cut],
                None => *t,
            })
            .collect();
        self.0.embed_batch(&seen)
    }

    fn window(&self) -> Option<usize> {
        Some(WINDOW)
    }

    fn passages(&self, text: &str) -> Vec<Span> {
        passage_windows(&word_offsets(text), text.len(), WINDOW, 2)
    }
}

fn windowed() -> Arc<Windowed> {
    Arc::new(Windowed(HashEmbedder::new(256)))
}

/// Twenty-four words of filler, then what the query asks about.
const TEXTS: [(&str, &str); 3] = [
    ("r-long", LONG),
    ("r-weather", "the weather report says sunny"),
    ("r-budget", "weekly budget numbers for the team"),
];

const LONG: &str = "we talked about the weekly grocery list and the recipe for \
    lentil soup with carrots onions garlic cumin and a little lemon juice \
    before dinner then later the zebra giraffe safari booking in Kenya";

fn load(index: &mut VectorIndex) {
    for (id, text) in TEXTS {
        index.publish(&publish(id, 1, 0, text)).unwrap();
    }
}

fn search(index: &VectorIndex, query: &str) -> Vec<(String, i64)> {
    let predicate = ScopePredicate {
        subject_keys: BTreeSet::from(["principal:alice".to_owned()]),
        kinds: BTreeSet::from([MemoryKind::Episodic]),
    };
    let q = index.embedder().embed(query).unwrap();
    let (_, hits) =
        index.search_vector(&q, &Eligible::Scope(&predicate), "tenant-a", &policy(), 10);
    hits.into_iter()
        .map(|h| (h.record_id, (f64::from(h.score) * 1e6) as i64))
        .collect()
}

#[test]
fn passage_windows_cover_the_text_and_overlap() {
    let text = "a b c d e f g h i j k l m n o p q r s t";
    let offsets = word_offsets(text);
    let spans = passage_windows(&offsets, text.len(), WINDOW, 2);
    // 20 words, 8 a passage, 1 shared (10 / 8): starts at words 0, 7, 14.
    assert_eq!(spans.len(), 3);
    assert_eq!(spans[0].start, 0);
    assert_eq!(spans.last().unwrap().end, text.len());
    assert_eq!(&text[spans[0].start..spans[0].end], "a b c d e f g h");
    assert_eq!(&text[spans[1].start..spans[1].end], "h i j k l m n o");
    assert_eq!(&text[spans[2].start..spans[2].end], "o p q r s t");
    // A text that fits is one passage, the whole text.
    let short = "a b c";
    assert_eq!(
        passage_windows(&word_offsets(short), short.len(), WINDOW, 2),
        vec![Span {
            start: 0,
            end: short.len()
        }]
    );
}

#[test]
fn a_long_record_is_found_by_its_best_passage_and_stays_one_record() {
    let mut index = VectorIndex::new(windowed(), AnnConfig::default());
    load(&mut index);
    // 34 words, 8 a passage, neighbours sharing one: 5 passages.
    assert_eq!(
        index.passage_counts(),
        (1, 4),
        "r-long: 5 passages, 4 beyond the first"
    );
    let hits = search(&index, "zebra giraffe safari in Kenya");
    assert_eq!(hits[0].0, "r-long", "{hits:?}");
    assert_eq!(hits.iter().filter(|(id, _)| id == "r-long").count(), 1);
    // What its first passage alone scores (the model's truncated view):
    // without the later passages the record would not stand out.
    let q = index
        .embedder()
        .embed("zebra giraffe safari in Kenya")
        .unwrap();
    let first = mosaic_index::ann::dot(&q, index.vector_of("r-long").unwrap());
    assert!(
        (hits[0].1 as f64 / 1e6) > f64::from(first) + 0.2,
        "best passage {} vs first {first}",
        hits[0].1
    );
    let m = index.passage_match("r-long", &q).unwrap();
    assert_eq!((m.index, m.passages), (4, 5));
    assert!(LONG[m.span.start..m.span.end].contains("zebra giraffe safari"));
    // A short record has no passages to name.
    assert!(index.passage_match("r-weather", &q).is_none());
    // A query about the start is matched by the first passage.
    let soup = index
        .embedder()
        .embed("weekly grocery list recipe")
        .unwrap();
    assert_eq!(index.passage_match("r-long", &soup).unwrap().index, 0);
}

#[test]
fn a_tombstone_removes_every_passage() {
    let mut index = VectorIndex::new(windowed(), AnnConfig::default());
    load(&mut index);
    index.tombstone("r-long", 2).unwrap();
    assert_eq!(index.passage_counts(), (0, 0));
    let hits = search(&index, "zebra giraffe safari in Kenya");
    assert!(hits.iter().all(|(id, _)| id != "r-long"), "{hits:?}");
}

#[test]
fn restores_and_replays_hold_the_same_passages() {
    let mut original = VectorIndex::new(windowed(), AnnConfig::default());
    load(&mut original);
    let queries = [
        "zebra giraffe safari in Kenya",
        "lentil soup",
        "sunny weather",
    ];
    let answers = |index: &VectorIndex| -> Vec<Vec<(String, i64)>> {
        queries.iter().map(|q| search(index, q)).collect()
    };
    // From a snapshot whose saved vectors are the first passages.
    let snapshot = TargetSnapshot::from_bytes(&original.snapshot().to_bytes().unwrap()).unwrap();
    let embeddings =
        EmbeddingSnapshot::from_bytes(&original.embedding_snapshot().to_bytes().unwrap()).unwrap();
    let mut restored = VectorIndex::new(windowed(), AnnConfig::default());
    assert_eq!(
        restored
            .restore_with_embeddings(&snapshot, Some(&embeddings))
            .unwrap(),
        0,
        "no record embedded whole again"
    );
    assert_eq!(restored.passage_counts(), original.passage_counts());
    assert_eq!(answers(&restored), answers(&original));
    // A journal replay carries the first vector; the rest are embedded.
    let mut replayed = VectorIndex::new(windowed(), AnnConfig::default());
    let messages: Vec<_> = TEXTS
        .iter()
        .map(|(id, text)| publish(id, 1, 0, text))
        .collect();
    let vectors = messages
        .iter()
        .map(|m| Ok(original.vector_of(&m.record_id).unwrap().to_vec()))
        .collect();
    assert!(
        replayed
            .publish_batch_prepared(&messages, vectors)
            .iter()
            .all(Result::is_ok)
    );
    assert_eq!(replayed.passage_counts(), original.passage_counts());
    assert_eq!(answers(&replayed), answers(&original));
}

#[test]
fn passages_whose_spans_do_not_fit_the_text_are_refused() {
    let mut index = VectorIndex::new(windowed(), AnnConfig::default());
    let m = publish("r-x", 1, 0, "short text");
    let v = index.embedder().embed("short text").unwrap();
    let bad = mosaic_index::embed::Passages {
        spans: vec![Span { start: 0, end: 999 }],
        vectors: vec![v.clone()],
    };
    assert!(index.publish_batch_passages(std::slice::from_ref(&m), vec![Ok(bad)])[0].is_err());
    let uneven = mosaic_index::embed::Passages {
        spans: vec![Span { start: 0, end: 5 }],
        vectors: vec![v.clone(), v],
    };
    assert!(index.publish_batch_passages(&[m], vec![Ok(uneven)])[0].is_err());
    assert_eq!(index.live_count(), 0, "nothing applied");
}

#[test]
fn the_hashing_embedder_sees_every_text_whole() {
    let hashing = HashEmbedder::new(64);
    assert_eq!(hashing.window(), None);
    let long = "word ".repeat(5_000);
    assert_eq!(hashing.passages(&long).len(), 1);
    let mut index = crate::common::vector_index();
    index.publish(&publish("r-long", 1, 0, LONG)).unwrap();
    assert_eq!(index.passage_counts(), (0, 0));
    let r = crate::common::retriever();
    assert!(!r.feature_release().contains("passages"));
}

#[test]
fn the_explanation_names_the_passage_that_matched() {
    let mut r = Retriever::new(windowed(), AnnConfig::default(), FunnelConfig::default());
    assert!(r.feature_release().contains("+passages-w10-o1"));
    let ids = TEXTS.map(|(id, _)| id);
    for (id, text) in TEXTS {
        let m = publish(id, 1, 0, text);
        r.lexical.publish(&m).unwrap();
        r.vector.publish(&m).unwrap();
    }
    let set = SealedEligibleSet::seal(EligibleSet {
        scope_commitments: Vec::new(),
        read_context_sha256: sha256_hex(b"read"),
        entries: ids
            .iter()
            .map(|id| EligibleEntry {
                record_id: (*id).into(),
                content_sha256: sha256_hex(id.as_bytes()),
            })
            .collect(),
    })
    .unwrap();
    let policy = policy();
    let query = RecallQuery {
        tenant_id: "tenant-a",
        policy_sha256: &policy,
        selector_release: "s",
        read_subject: "r",
        revocation_generation: 0,
        text: "safari in Kenya",
        claim_keys: &[],
        eligible: &set,
        max_results: 10,
        mode: RetrievalMode::Vector,
    };
    let recall = r.recall(&query).unwrap();
    assert_eq!(recall.receipt.results[0].record_id, "r-long");
    let e = &recall.explanations[0];
    let m = e.vector_passage.expect("the long record names its passage");
    assert_eq!((m.index, m.passages), (4, 5));
    assert!(LONG[m.span.start..m.span.end].contains("Kenya"));
    assert!(
        recall.explanations[1..]
            .iter()
            .all(|e| e.vector_passage.is_none())
    );
}
