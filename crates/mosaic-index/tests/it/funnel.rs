//! Point 5: the funnel from eligibility to context handoff, and the cache.

use std::collections::{BTreeMap, BTreeSet};

use mosaic_harness::MemoryRecord;
use mosaic_harness::fixtures::{scoped_selection_context, scoped_selection_records};
use mosaic_harness::memory_scope::{
    ContextBudget, EligibleSet, SealedEligibleSet, eligible_set, verify_relevance_receipt,
};
use mosaic_index::{
    FunnelConfig, Fusion, IndexTarget, PublishMessage, RecallQuery, RetrievalMode, Retriever,
    ScopeKeys, hand_off,
};

use crate::common::retriever;

fn sealed(set: EligibleSet) -> SealedEligibleSet {
    SealedEligibleSet::seal(set).unwrap()
}

fn message(record: &MemoryRecord, content: &str, claim_keys: Vec<String>) -> PublishMessage {
    PublishMessage {
        record_id: record.record_id.clone(),
        generation: 1,
        revocation_generation: 0,
        scope: ScopeKeys {
            tenant_id: record.tenant_id.clone(),
            policy_sha256: record.policy_sha256.clone(),
            subject_key: record.subject.key(),
            kind: record.kind,
        },
        created_at_unix_ms: record.created_at_unix_ms,
        claim_keys,
        text: content.to_owned(),
    }
}

fn loaded() -> (Retriever, Vec<MemoryRecord>, BTreeMap<String, String>) {
    let mut r = retriever();
    let fixture = scoped_selection_records();
    let mut records = Vec::new();
    let mut contents = BTreeMap::new();
    for (record, content) in fixture {
        let claims = if record.record_id == "semantic-user" {
            vec!["principal:user-vinay|response_detail_preference|surface=alerts".to_string()]
        } else {
            Vec::new()
        };
        let m = message(&record, &content, claims);
        r.lexical.publish(&m).unwrap();
        r.vector.publish(&m).unwrap();
        contents.insert(record.record_id.clone(), content);
        records.push(record);
    }
    (r, records, contents)
}

fn query<'a>(
    text: &'a str,
    eligible: &'a SealedEligibleSet,
    claims: &'a [String],
    revocation_generation: u64,
) -> RecallQuery<'a> {
    RecallQuery {
        tenant_id: mosaic_harness::fixtures::FIXTURE_TENANT,
        policy_sha256: "",
        selector_release: "memory-scope-v1",
        read_subject: "user-vinay/ws-rust/run-current",
        revocation_generation,
        text,
        claim_keys: claims,
        eligible,
        max_results: 8,
        mode: RetrievalMode::Hybrid,
    }
}

#[test]
fn funnel_ranks_only_eligible_records_and_hands_off() {
    let (r, records, contents) = loaded();
    let ctx = scoped_selection_context();
    let eligible = sealed(eligible_set(&ctx, &records).unwrap());
    let mut q = query(
        "how do I build and test the cargo workspace",
        &eligible,
        &[],
        0,
    );
    q.policy_sha256 = &ctx.policy_sha256;
    let recall = r.recall(&q).unwrap();
    let eligible_ids: BTreeSet<&str> = eligible.entries().iter().map(|e| e.record_id).collect();
    assert!(!recall.receipt.results.is_empty());
    assert!(
        recall
            .record_ids()
            .iter()
            .all(|id| eligible_ids.contains(id))
    );
    assert_eq!(recall.record_ids()[0], "procedure-build");
    let input = recall.relevance_input(&eligible.to_set()).unwrap();
    verify_relevance_receipt(&input, &recall.receipt).unwrap();
    // The revoked deploy procedure is indexed but never eligible.
    assert!(!recall.record_ids().contains(&"procedure-revoked"));

    let budget = ContextBudget {
        token_counter_release: "whitespace-v1".into(),
        total_tokens: 1_000,
        lane_limits: BTreeMap::new(),
    };
    let handoff = hand_off(&ctx, &records, &contents, &recall.receipt, &[], &budget).unwrap();
    assert_eq!(handoff.selection.selected_ids()[0], "procedure-build");
    assert_eq!(handoff.blocks.len(), handoff.report.included_memory.len());
    assert!(handoff.blocks[0].starts_with(
        "<recalled-memory kind=\"procedural\" record=\"procedure-build\" trust=\"model_generated\">"
    ));
}

#[test]
fn claim_key_matches_are_structured_candidates() {
    let (r, records, _) = loaded();
    let ctx = scoped_selection_context();
    let eligible = sealed(eligible_set(&ctx, &records).unwrap());
    let claims = vec!["principal:user-vinay|response_detail_preference|surface=alerts".to_string()];
    let mut q = query("unrelated words entirely", &eligible, &claims, 0);
    q.policy_sha256 = &ctx.policy_sha256;
    q.mode = RetrievalMode::Lexical;
    let recall = r.recall(&q).unwrap();
    assert_eq!(recall.record_ids()[0], "semantic-user");
    assert!(recall.explanations[0].structured);
}

#[test]
fn revocation_invalidates_cached_results() {
    let (mut r, records, _) = loaded();
    let ctx = scoped_selection_context();
    let eligible = sealed(eligible_set(&ctx, &records).unwrap());
    let mut q = query("cargo build test", &eligible, &[], 7);
    q.policy_sha256 = &ctx.policy_sha256;
    let first = r.recall(&q).unwrap();
    assert!(!first.cache_hit);
    assert!(first.record_ids().contains(&"procedure-build"));
    let second = r.recall(&q).unwrap();
    assert!(second.cache_hit);
    assert_eq!(second.receipt, first.receipt);
    assert_eq!(r.cache_len(), 1);

    // The store's revocation generation moves: the cached entry is not used.
    q.revocation_generation = 8;
    assert!(!r.recall(&q).unwrap().cache_hit);

    // The index tombstones the record (same query, same eligible set as a
    // stale caller might still hold): the cache misses and it is gone.
    r.lexical.tombstone("procedure-build", 2).unwrap();
    r.vector.tombstone("procedure-build", 2).unwrap();
    let after = r.recall(&q).unwrap();
    assert!(!after.cache_hit);
    assert!(!after.record_ids().contains(&"procedure-build"));
    assert!(r.cache_len() <= 1, "older snapshot entries are dropped");
}

#[test]
fn near_identical_memories_of_other_tenants_and_principals_never_cross() {
    let mut r = retriever();
    let fixture = scoped_selection_records();
    let (base, content) = fixture
        .into_iter()
        .find(|(rec, _)| rec.record_id == "semantic-user")
        .unwrap();
    let mut twins = Vec::new();
    for (id, tenant, principal) in [
        ("mine", "tenant-acme", "user-vinay"),
        ("other-tenant", "tenant-evil", "user-vinay"),
        ("other-user", "tenant-acme", "user-other"),
    ] {
        let mut rec = base.clone();
        rec.record_id = id.into();
        rec.tenant_id = tenant.into();
        rec.subject = mosaic_harness::MemorySubject::Principal {
            principal_id: principal.into(),
        };
        let m = message(&rec, &content, Vec::new());
        r.lexical.publish(&m).unwrap();
        r.vector.publish(&m).unwrap();
        twins.push(rec);
    }
    let ctx = scoped_selection_context();
    let eligible = sealed(eligible_set(&ctx, &twins).unwrap());
    assert_eq!(eligible.entries().len(), 1);
    for mode in [
        RetrievalMode::Lexical,
        RetrievalMode::Vector,
        RetrievalMode::Hybrid,
    ] {
        let mut q = query("concise alerts response", &eligible, &[], 0);
        q.policy_sha256 = &ctx.policy_sha256;
        q.mode = mode;
        assert_eq!(r.recall(&q).unwrap().record_ids(), vec!["mine"], "{mode:?}");
    }
}

fn three_turns(r: &mut Retriever, turns: &[&str]) -> Vec<MemoryRecord> {
    let fixture = scoped_selection_records();
    let (base, _) = fixture
        .into_iter()
        .find(|(rec, _)| rec.record_id == "episode-user")
        .unwrap();
    let mut recs = Vec::new();
    for (i, text) in turns.iter().enumerate() {
        let mut rec = base.clone();
        rec.record_id = format!("turn-{i}");
        rec.created_at_unix_ms = base.created_at_unix_ms + i as u64;
        let m = message(&rec, text, Vec::new());
        r.lexical.publish(&m).unwrap();
        r.vector.publish(&m).unwrap();
        recs.push(rec);
    }
    recs
}

const TURNS: [&str; 4] = [
    "Did you finish the painting you started?",
    "Yes! It is a sunset over the lake, took me three weeks.",
    "The weather turned cold yesterday.",
    "Shall we walk the dog tomorrow morning?",
];

#[test]
fn neighbouring_records_lend_context() {
    let mut r = retriever();
    r.set_config(FunnelConfig {
        lexical_window_permille: 0,
        neighbour_permille: 150,
        ..FunnelConfig::default()
    });
    let recs = three_turns(&mut r, &TURNS);
    let ctx = scoped_selection_context();
    let eligible = sealed(eligible_set(&ctx, &recs).unwrap());
    let mut q = query("painting", &eligible, &[], 0);
    q.policy_sha256 = &ctx.policy_sha256;
    q.mode = RetrievalMode::Lexical;
    let recall = r.recall(&q).unwrap();
    // The answer turn has no query word but follows the matching turn.
    assert_eq!(recall.record_ids()[..2], ["turn-0", "turn-1"]);
    assert!(recall.explanations[1].neighbour_bonus > 0);
}

#[test]
fn turn_windows_reach_the_reply_and_fade_with_distance() {
    let mut r = retriever();
    let recs = three_turns(&mut r, &TURNS);
    let ctx = scoped_selection_context();
    let eligible = sealed(eligible_set(&ctx, &recs).unwrap());
    let mut q = query("painting", &eligible, &[], 0);
    q.policy_sha256 = &ctx.policy_sha256;
    q.mode = RetrievalMode::Lexical;
    // Default: windows of two records each side, weights 1/2 and 1/4.
    let recall = r.recall(&q).unwrap();
    assert_eq!(recall.record_ids(), ["turn-0", "turn-1", "turn-2"]);
    let scores: Vec<u64> = recall.receipt.results.iter().map(|x| x.score).collect();
    assert!(scores[0] > scores[1] && scores[1] > scores[2], "{scores:?}");
    assert!(recall.explanations.iter().all(|e| e.neighbour_bonus == 0));

    // Without windows only the matching turn is found.
    r.set_config(FunnelConfig {
        lexical_window_permille: 0,
        ..FunnelConfig::default()
    });
    assert_eq!(r.recall(&q).unwrap().record_ids(), ["turn-0"]);
}

#[test]
fn turn_windows_never_read_ineligible_neighbours() {
    let mut r = retriever();
    let recs = three_turns(&mut r, &TURNS);
    let ctx = scoped_selection_context();
    // turn-0 (the only one mentioning painting) is not eligible.
    let eligible = sealed(eligible_set(&ctx, &recs[1..]).unwrap());
    let mut q = query("painting", &eligible, &[], 0);
    q.policy_sha256 = &ctx.policy_sha256;
    q.mode = RetrievalMode::Lexical;
    let recall = r.recall(&q).unwrap();
    assert!(
        recall.record_ids().is_empty(),
        "an ineligible record lent its words: {:?}",
        recall.record_ids()
    );
}

#[test]
fn every_fusion_ranks_a_match_of_both_lists_first() {
    let mut r = retriever();
    let recs = three_turns(&mut r, &TURNS);
    let ctx = scoped_selection_context();
    let eligible = sealed(eligible_set(&ctx, &recs).unwrap());
    let mut q = query("walk the dog tomorrow", &eligible, &[], 0);
    q.policy_sha256 = &ctx.policy_sha256;
    for fusion in [Fusion::ZScore, Fusion::MinMaxScore, Fusion::ReciprocalRank] {
        r.set_config(FunnelConfig {
            fusion,
            ..FunnelConfig::default()
        });
        let recall = r.recall(&q).unwrap();
        assert_eq!(recall.record_ids()[0], "turn-3", "{fusion:?}");
        let e = &recall.explanations[0];
        assert_eq!((e.lexical_rank, e.vector_rank), (Some(0), Some(0)));
    }
}

#[test]
fn recall_through_a_shared_reference_from_many_threads_matches_and_caches() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    let (r, records, _) = loaded();
    send_sync(&r);
    let ctx = scoped_selection_context();
    let eligible = sealed(eligible_set(&ctx, &records).unwrap());
    let mut q = query("cargo build test", &eligible, &[], 0);
    q.policy_sha256 = &ctx.policy_sha256;
    // The reference answer comes from a fresh retriever, so no cache helps.
    let expected = loaded().0.recall(&q).unwrap();
    assert!(!expected.cache_hit);
    let shared = &r;
    let q = &q;
    let answers: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(move || {
                    (0..3)
                        .map(|_| shared.recall(q).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(answers.len(), 12);
    for a in &answers {
        assert_eq!(a.receipt, expected.receipt);
        assert_eq!(a.explanations, expected.explanations);
    }
    // Each thread's second and third reads are served from the cache.
    assert!(answers.iter().filter(|a| a.cache_hit).count() >= 8);
    assert_eq!(r.cache_len(), 1);
}
