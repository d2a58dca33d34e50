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

/// A search for fewer hits than match is the head of a longer one: the best
/// `limit`, those tied at the cut chosen by record id, whatever order the
/// records were published in (the index picks the best before sorting
/// them, rather than sorting every scored doc).
#[test]
fn a_short_search_is_the_head_of_a_long_one() {
    let mut idx = lexical_index();
    let mut ids = Vec::new();
    // Published in descending id order, so no order comes from publishing.
    for i in (0..12).rev() {
        let id = format!("t{i:02}");
        idx.publish(&publish(&id, 1, 0, "walnut lantern")).unwrap();
        ids.push(id);
    }
    for i in (0..3).rev() {
        let id = format!("w{i}");
        idx.publish(&publish(&id, 1, 0, "walnut lantern walnut orchid"))
            .unwrap();
        ids.push(id);
    }
    for i in 0..20 {
        let id = format!("f{i:02}");
        idx.publish(&publish(&id, 1, 0, &format!("filler {i} tide")))
            .unwrap();
        ids.push(id);
    }
    let search = |limit| {
        idx.search(
            "walnut lantern orchid",
            &Eligible::Records(&ids),
            "tenant-a",
            &policy(),
            limit,
        )
    };
    let long = search(100);
    assert!(long.len() >= 15, "{long:?}");
    // Best first, equal scores by record id.
    assert!(
        long.windows(2).all(|p| p[0].score > p[1].score
            || (p[0].score == p[1].score && p[0].record_id < p[1].record_id)),
        "{long:?}"
    );
    // Some cut falls inside a run of equal scores.
    let inside_a_tie = (1..long.len())
        .find(|&i| long[i - 1].score == long[i].score)
        .expect("tied scores");
    for limit in [0, 1, 2, inside_a_tie, inside_a_tie + 1, 7, long.len()] {
        let short = search(limit);
        assert_eq!(short, long[..limit], "limit {limit}");
    }
}

/// The write guard's candidates: the subject's records sharing the most
/// rarity-weighted terms, a word every record holds weighing nothing, other
/// subjects never, at most `limit`, and none once tombstoned.
#[test]
fn sharing_terms_finds_the_closest_texts_of_one_subject() {
    let mut idx = lexical_index();
    for i in 0..60 {
        idx.publish(&publish(
            &format!("r{i:02}"),
            1,
            0,
            &format!("Caroline: note {} about parcel {}", i * 7, i * 11),
        ))
        .unwrap();
    }
    idx.publish(&publish(
        "target",
        1,
        0,
        "Caroline: the zebra quokka parade",
    ))
    .unwrap();
    let mut other = publish("elsewhere", 1, 0, "Caroline: the zebra quokka parade");
    other.scope = scope("tenant-a", "principal:bob");
    idx.publish(&other).unwrap();
    let found = idx
        .sharing_terms(
            "tenant-a",
            "principal:alice",
            "Caroline: the zebra quokka parade again",
            5,
        )
        .unwrap_or_default();
    assert_eq!(
        found.first().map(String::as_str),
        Some("target"),
        "{found:?}"
    );
    assert!(found.len() <= 5);
    assert!(!found.iter().any(|id| id == "elsewhere"));
    // Only the name in common: the name is walked (no rarer term), and
    // every record shares it equally.
    let by_name = idx
        .sharing_terms("tenant-a", "principal:alice", "Caroline", 3)
        .unwrap_or_default();
    assert_eq!(by_name, ["r00", "r01", "r02"], "ties by record id");
    assert!(
        idx.sharing_terms("tenant-b", "principal:alice", "zebra", 5)
            .is_some_and(|ids| ids.is_empty())
    );
    idx.tombstone("target", 2).unwrap();
    let after = idx
        .sharing_terms("tenant-a", "principal:alice", "zebra quokka parade", 5)
        .unwrap_or_default();
    assert!(!after.iter().any(|id| id == "target"), "{after:?}");
    // A text of stopwords only gives the index nothing to go by.
    assert_eq!(
        idx.sharing_terms("tenant-a", "principal:alice", "it is what it is", 5),
        None
    );
}

/// The cut among the guard's candidates: every record weighing more than
/// the `limit`-th is kept, and those tied with it are chosen by record id,
/// whatever order they were published in.
#[test]
fn sharing_terms_breaks_ties_at_the_cut_by_record_id() {
    let mut idx = lexical_index();
    // Filler the query shares nothing with, so its terms stay rare.
    for i in 0..40 {
        idx.publish(&publish(
            &format!("f{i:02}"),
            1,
            0,
            &format!("filler {i} tide"),
        ))
        .unwrap();
    }
    // Published in descending id order: the order must come from the ids.
    for i in (0..9).rev() {
        idx.publish(&publish(
            &format!("b{i}"),
            1,
            0,
            &format!("walnut lantern {i}"),
        ))
        .unwrap();
    }
    for i in (0..3).rev() {
        idx.publish(&publish(
            &format!("z{i}"),
            1,
            0,
            &format!("walnut lantern orchid {i}"),
        ))
        .unwrap();
    }
    let found = idx
        .sharing_terms("tenant-a", "principal:alice", "walnut lantern orchid", 6)
        .unwrap_or_default();
    assert_eq!(found, ["z0", "z1", "z2", "b0", "b1", "b2"]);
    let all = idx
        .sharing_terms("tenant-a", "principal:alice", "walnut lantern orchid", 50)
        .unwrap_or_default();
    assert_eq!(all.len(), 12, "{all:?}");
    assert_eq!(&all[..4], ["z0", "z1", "z2", "b0"]);
    assert!(
        idx.sharing_terms("tenant-a", "principal:alice", "walnut", 0)
            .is_some_and(|ids| ids.is_empty())
    );
}
