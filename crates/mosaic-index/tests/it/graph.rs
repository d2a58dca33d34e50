//! The vector target's saved HNSW graph: a restore attaches it instead of
//! inserting every vector again, and searches exactly like the index that
//! saved it; a graph that does not decode or does not fit its vectors is
//! never used (the vectors stay pending, found by an exact scan, and are
//! linked in later to the graph an insert-every-vector restore builds);
//! vectors replayed after the snapshot stay pending and are found too.
//! Layer under test: `ann` (`GraphSnapshot`, `AnnIndex::attach_graph`,
//! pending docs) through `vector` (`VectorIndex::restore_saved`).

use mosaic_index::ann::GraphSnapshot;
use mosaic_index::vector::EmbeddingSnapshot;
use mosaic_index::{
    AnnConfig, Eligible, IndexTarget, PublishMessage, SearchPlan, TargetSnapshot, VectorIndex,
};

use crate::common::{embedder, policy, publish};

/// A graph searched for every eligible set (no exact-scan shortcut).
fn graph_config() -> AnnConfig {
    AnnConfig {
        m: 6,
        m0: 12,
        ef_construction: 40,
        ef_search: 16,
        exact_limit: 0,
        graph_cost_permille: 0,
        ..AnnConfig::default()
    }
}

fn index() -> VectorIndex {
    VectorIndex::new(embedder(), graph_config())
}

fn message(i: usize, generation: u64) -> PublishMessage {
    publish(
        &format!("r{i:04}"),
        generation,
        0,
        &format!(
            "note {i} at {generation}: the heron by lake {} waits",
            i % 37
        ),
    )
}

/// A live index with removals and replacements, so its doc numbers have
/// holes and its link lists point at docs that are gone.
fn live() -> VectorIndex {
    let mut v = index();
    let first: Vec<PublishMessage> = (0..400).map(|i| message(i, 1)).collect();
    for r in v.publish_batch(&first) {
        r.unwrap();
    }
    for i in (0..400).step_by(7) {
        v.tombstone(&format!("r{i:04}"), 2).unwrap();
    }
    let again: Vec<PublishMessage> = (0..400).step_by(5).map(|i| message(i, 3)).collect();
    for r in v.publish_batch(&again) {
        r.unwrap();
    }
    v
}

/// The three files a save writes for the vector target.
fn saved(v: &VectorIndex) -> (TargetSnapshot, Vec<u8>, Vec<u8>) {
    let embeddings = v.embedding_snapshot().to_bytes().unwrap();
    let binding = EmbeddingSnapshot::binding_of(&embeddings).unwrap();
    let graph = v.graph_snapshot().unwrap().to_bytes(&binding).unwrap();
    (v.snapshot(), embeddings, graph)
}

fn restored(
    snapshot: &TargetSnapshot,
    embeddings: &[u8],
    graph: Option<&GraphSnapshot>,
) -> (VectorIndex, mosaic_index::vector::SavedRestore) {
    let mut v = index();
    let embeddings = EmbeddingSnapshot::from_bytes(embeddings).unwrap();
    let report = v.restore_saved(snapshot, Some(&embeddings), graph).unwrap();
    (v, report)
}

fn ids(v: &VectorIndex) -> Vec<String> {
    v.snapshot()
        .slots
        .into_iter()
        .filter(|(_, s)| s.live.is_some())
        .map(|(id, _)| id)
        .collect()
}

fn search(v: &VectorIndex, query: &str, k: usize) -> (SearchPlan, Vec<(String, f32)>) {
    let q = v.embedder().embed(query).unwrap();
    let ids = ids(v);
    let (plan, hits) = v.search_vector(&q, &Eligible::Records(&ids), "tenant-a", &policy(), k);
    (
        plan,
        hits.into_iter().map(|h| (h.record_id, h.score)).collect(),
    )
}

/// The exact top-`k` by a plain scan over every live vector.
fn exact(v: &VectorIndex, query: &str, k: usize) -> Vec<String> {
    let q = v.embedder().embed(query).unwrap();
    let mut scored: Vec<(f32, String)> = ids(v)
        .into_iter()
        .map(|id| {
            let s: f32 = v
                .vector_of(&id)
                .unwrap()
                .iter()
                .zip(&q)
                .map(|(a, b)| a * b)
                .sum();
            (s, id)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, id)| id).collect()
}

const QUERIES: [&str; 5] = [
    "heron by lake 3",
    "note 17 waits",
    "lake 30 heron",
    "note 399",
    "the heron waits at 3",
];

#[test]
fn a_restore_attaches_the_saved_graph_and_searches_like_the_saving_index() {
    let v = live();
    let (snapshot, embeddings, graph) = saved(&v);
    let binding = EmbeddingSnapshot::binding_of(&embeddings).unwrap();
    let graph = GraphSnapshot::from_bytes(&graph, &binding).unwrap();
    let (r, report) = restored(&snapshot, &embeddings, Some(&graph));
    assert!(report.graph_attached, "{report:?}");
    assert_eq!((report.embedded, report.pending), (0, 0));
    // The same graph, node for node (dead links left out), and the same
    // answers.
    assert_eq!(r.graph_snapshot(), v.graph_snapshot());
    for q in QUERIES {
        let (plan, hits) = search(&r, q, 10);
        assert_eq!(plan, SearchPlan::FilteredGraph);
        assert_eq!((plan, hits), search(&v, q, 10), "{q}");
    }
    // Saved again, the restored index writes the same bytes.
    assert_eq!(saved(&r).2, saved(&v).2);
}

#[test]
fn a_graph_that_does_not_decode_or_does_not_fit_is_never_used() {
    let v = live();
    let (snapshot, embeddings, graph_bytes) = saved(&v);
    let binding = EmbeddingSnapshot::binding_of(&embeddings).unwrap();
    // Not decoded: a flipped body byte, a truncation, trailing bytes, or a
    // graph saved with other vectors.
    let mut flipped = graph_bytes.clone();
    let last = flipped.len() - 3;
    flipped[last] ^= 1;
    assert!(GraphSnapshot::from_bytes(&flipped, &binding).is_err());
    assert!(GraphSnapshot::from_bytes(&graph_bytes[..graph_bytes.len() - 1], &binding).is_err());
    let mut longer = graph_bytes.clone();
    longer.push(0);
    assert!(GraphSnapshot::from_bytes(&longer, &binding).is_err());
    let mut other = live();
    other.tombstone("r0001", 9).unwrap();
    let other_binding =
        EmbeddingSnapshot::binding_of(&other.embedding_snapshot().to_bytes().unwrap()).unwrap();
    assert_ne!(other_binding, binding);
    assert!(GraphSnapshot::from_bytes(&graph_bytes, &other_binding).is_err());

    // Decoded but not this index's graph: refused at attach.
    let good = GraphSnapshot::from_bytes(&graph_bytes, &binding).unwrap();
    let n = good.nodes.len();
    let mut dangling = good.clone();
    dangling.nodes[0][0].push(u32::try_from(n).unwrap());
    let mut self_link = good.clone();
    self_link.nodes[1][0].push(1);
    let mut other_m = good.clone();
    other_m.m0 += 1;
    let mut fewer = good.clone();
    fewer.nodes.pop();
    let mut bad_entry = good.clone();
    bad_entry.entry = bad_entry
        .nodes
        .iter()
        .position(|l| l.len() == 1)
        .map(|p| u32::try_from(p).unwrap());
    let mut too_long = good.clone();
    let fill: Vec<u32> = (0..n as u32).filter(|&d| d != 2).take(19).collect();
    too_long.nodes[2][0] = fill;
    let from_other = other.graph_snapshot().unwrap();

    let (full, _) = restored(&snapshot, &embeddings, None);
    let mut rebuilt = index();
    rebuilt
        .restore_with_embeddings(
            &snapshot,
            Some(&EmbeddingSnapshot::from_bytes(&embeddings).unwrap()),
        )
        .unwrap();
    for (name, bad) in [
        ("a link past the last node", &dangling),
        ("a self link", &self_link),
        ("other link counts", &other_m),
        ("a node short", &fewer),
        ("an entry below the top layer", &bad_entry),
        ("a list past its bound", &too_long),
        ("another index's graph", &from_other),
    ] {
        let (mut r, report) = restored(&snapshot, &embeddings, Some(bad));
        assert!(!report.graph_attached, "{name}");
        assert_eq!(report.pending, n, "{name}");
        // Pending vectors are scanned exactly: nothing is missed.
        for q in QUERIES {
            let hits: Vec<String> = search(&r, q, 10).1.into_iter().map(|h| h.0).collect();
            assert_eq!(hits, exact(&r, q, 10), "{name}: {q}");
        }
        // Linked in later, in doc order: the graph a restore that inserts
        // every vector builds.
        assert_eq!(r.absorb_pending(50), n - 50);
        assert_eq!(r.absorb_pending(usize::MAX), 0);
        assert_eq!(r.graph_snapshot(), rebuilt.graph_snapshot(), "{name}");
    }
    // And with no graph at all, the same.
    assert_eq!(full.pending_graph(), n);
}

#[test]
fn vectors_replayed_after_the_snapshot_stay_pending_and_are_found() {
    let v = live();
    let (snapshot, embeddings, graph_bytes) = saved(&v);
    let binding = EmbeddingSnapshot::binding_of(&embeddings).unwrap();
    let graph = GraphSnapshot::from_bytes(&graph_bytes, &binding).unwrap();
    let (mut r, report) = restored(&snapshot, &embeddings, Some(&graph));
    assert!(report.graph_attached);
    // The journal's publications (with their saved vectors), one replacing
    // a record the graph holds, one tombstoning another.
    let replayed: Vec<PublishMessage> = (400..460)
        .map(|i| message(i, 1))
        .chain([message(11, 7)])
        .collect();
    let vectors = replayed
        .iter()
        .map(|m| Ok(r.embedder().embed(&m.text).unwrap()))
        .collect();
    for res in r.publish_batch_prepared(&replayed, vectors) {
        res.unwrap();
    }
    r.tombstone("r0012", 9).unwrap();
    assert_eq!(r.pending_graph(), 61);
    for i in [455, 402, 11] {
        let m = replayed
            .iter()
            .find(|m| m.record_id == format!("r{i:04}"))
            .unwrap();
        let (plan, hits) = search(&r, &m.text, 10);
        assert_eq!(plan, SearchPlan::FilteredGraph);
        assert_eq!(hits[0].0, m.record_id);
        assert_eq!(exact(&r, &m.text, 1), std::slice::from_ref(&m.record_id));
    }
    assert!(r.vector_of("r0012").is_none());
    // After the restore, publications are linked as they arrive.
    r.finish_restore();
    r.publish(&message(500, 1)).unwrap();
    assert_eq!(r.pending_graph(), 61);
    assert_eq!(r.absorb_pending(usize::MAX), 0);
}
