//! Point 2: BM25 with deletions and scope partitions.

use mosaic_harness::MemoryKind;
use mosaic_index::{Eligible, IndexTarget, ScopePredicate};

use crate::common::{lexical_index, policy, publish, scope};

#[test]
fn bm25_prefers_rarer_and_denser_matches() {
    let mut idx = lexical_index();
    idx.publish(&publish("a", 1, 0, "we went hiking in the mountains"))
        .unwrap();
    idx.publish(&publish("b", 1, 0, "the weather was nice today"))
        .unwrap();
    idx.publish(&publish(
        "c",
        1,
        0,
        "hiking hiking every weekend, hiking is life",
    ))
    .unwrap();
    idx.publish(&publish("d", 1, 0, "nice day for a walk"))
        .unwrap();
    let ids: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    let hits = idx.search("hikes", &Eligible::Records(&ids), "tenant-a", &policy(), 10);
    let order: Vec<&str> = hits.iter().map(|h| h.record_id.as_str()).collect();
    assert_eq!(order, vec!["c", "a"]);
    assert!(hits[0].score > hits[1].score);
}

#[test]
fn deletions_remove_postings_and_statistics() {
    let mut idx = lexical_index();
    idx.publish(&publish("a", 1, 0, "alpha beta")).unwrap();
    idx.publish(&publish("b", 1, 0, "alpha gamma")).unwrap();
    let ids: Vec<String> = ["a", "b"].map(String::from).to_vec();
    idx.tombstone("a", 2).unwrap();
    let hits = idx.search(
        "alpha beta",
        &Eligible::Records(&ids),
        "tenant-a",
        &policy(),
        10,
    );
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].record_id, "b");
    assert!(idx.live_entry("a").is_none());
    assert!(
        idx.snapshot().slots["a"].live.is_none(),
        "tombstone keeps no text"
    );
}

#[test]
fn eligibility_and_tenant_bound_every_result() {
    let mut idx = lexical_index();
    let mut other_tenant = publish("t2-rec", 1, 0, "secret launch plan");
    other_tenant.scope = scope("tenant-b", "principal:alice");
    idx.publish(&other_tenant).unwrap();
    let mut other_principal = publish("bob-rec", 1, 0, "secret launch plan");
    other_principal.scope = scope("tenant-a", "principal:bob");
    idx.publish(&other_principal).unwrap();
    idx.publish(&publish("alice-rec", 1, 0, "secret launch plan"))
        .unwrap();
    // Even if a caller lists another tenant's record, tenant and policy
    // of the query bound the result.
    let ids: Vec<String> = ["t2-rec", "alice-rec"].map(String::from).to_vec();
    let hits = idx.search(
        "secret launch",
        &Eligible::Records(&ids),
        "tenant-a",
        &policy(),
        10,
    );
    assert_eq!(
        hits.iter()
            .map(|h| h.record_id.as_str())
            .collect::<Vec<_>>(),
        vec!["alice-rec"]
    );
    let predicate = ScopePredicate {
        subject_keys: ["principal:bob".to_string()].into(),
        kinds: [MemoryKind::Episodic].into(),
    };
    let hits = idx.search(
        "secret",
        &Eligible::Scope(&predicate),
        "tenant-a",
        &policy(),
        10,
    );
    assert_eq!(
        hits.iter()
            .map(|h| h.record_id.as_str())
            .collect::<Vec<_>>(),
        vec!["bob-rec"]
    );
    let wrong_kind = ScopePredicate {
        subject_keys: ["principal:bob".to_string()].into(),
        kinds: [MemoryKind::Semantic].into(),
    };
    assert!(
        idx.search(
            "secret",
            &Eligible::Scope(&wrong_kind),
            "tenant-a",
            &policy(),
            10
        )
        .is_empty()
    );
}

#[test]
fn equal_scores_tie_by_record_id() {
    let mut idx = lexical_index();
    for id in ["z", "m", "a"] {
        idx.publish(&publish(id, 1, 0, "same words here")).unwrap();
    }
    let ids: Vec<String> = ["z", "m", "a"].map(String::from).to_vec();
    let hits = idx.search("words", &Eligible::Records(&ids), "tenant-a", &policy(), 10);
    assert_eq!(
        hits.iter()
            .map(|h| h.record_id.as_str())
            .collect::<Vec<_>>(),
        vec!["a", "m", "z"]
    );
}
