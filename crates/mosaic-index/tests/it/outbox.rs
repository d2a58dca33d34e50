//! Point 1: idempotent, generation-fenced targets; replay, reordering,
//! crashes and rebuilds converge; nothing revoked is resurrected.

use std::collections::BTreeMap;

use mosaic_index::{
    AckOutcome, Eligible, IndexError, IndexTarget, PublishMessage, RebuildEntry, StaleReason,
    TargetSnapshot,
};

use crate::common::{lexical_index, permutation, policy, publish, vector_index};

#[derive(Clone, Debug)]
enum Msg {
    Publish(PublishMessage),
    Tombstone(String, u64),
}

/// Thirty records with a history: published, some edited, some revoked,
/// some re-published after revocation.
fn history() -> Vec<Msg> {
    let mut msgs = Vec::new();
    for i in 0..30u64 {
        let id = format!("rec-{i:02}");
        msgs.push(Msg::Publish(publish(
            &id,
            1,
            0,
            &format!("first text {i} about hiking"),
        )));
        match i % 5 {
            1 => msgs.push(Msg::Tombstone(id.clone(), 2)),
            2 => msgs.push(Msg::Publish(publish(
                &id,
                2,
                0,
                &format!("edited text {i} about painting"),
            ))),
            3 => {
                msgs.push(Msg::Tombstone(id.clone(), 2));
                msgs.push(Msg::Publish(publish(
                    &id,
                    3,
                    2,
                    &format!("reinstated {i} about sailing"),
                )));
            }
            4 => {
                msgs.push(Msg::Publish(publish(
                    &id,
                    2,
                    0,
                    &format!("edited {i} then revoked"),
                )));
                msgs.push(Msg::Tombstone(id.clone(), 3));
            }
            _ => {}
        }
    }
    msgs
}

fn deliver<T: IndexTarget>(target: &mut T, msg: &Msg) -> Result<u64, IndexError> {
    match msg {
        Msg::Publish(m) => target.publish(m).map(|a| a.generation),
        Msg::Tombstone(id, g) => target.tombstone(id, *g).map(|a| a.generation),
    }
}

/// The expected final state: per record, the message with the greatest
/// (generation, is_tombstone).
fn expected_live(msgs: &[Msg]) -> BTreeMap<String, Option<(u64, String)>> {
    let mut best: BTreeMap<String, (u64, bool, Option<String>)> = BTreeMap::new();
    for m in msgs {
        let (id, key) = match m {
            Msg::Publish(p) => (
                p.record_id.clone(),
                (p.generation, false, Some(p.text.clone())),
            ),
            Msg::Tombstone(id, g) => (id.clone(), (*g, true, None)),
        };
        let entry = best.entry(id).or_insert((0, false, None));
        if (key.0, key.1) > (entry.0, entry.1) {
            *entry = key;
        }
    }
    best.into_iter()
        .map(|(id, (g, _, text))| (id, text.map(|t| (g, t))))
        .collect()
}

fn live_view(snapshot: &TargetSnapshot) -> BTreeMap<String, Option<(u64, String)>> {
    snapshot
        .slots
        .iter()
        .map(|(id, s)| {
            (
                id.clone(),
                s.live.as_ref().map(|l| (s.generation, l.text.clone())),
            )
        })
        .collect()
}

fn run_lexical(order: &[Msg]) -> TargetSnapshot {
    let mut target = lexical_index();
    for m in order {
        let _ = deliver(&mut target, m);
    }
    target.snapshot()
}

#[test]
fn replay_once_twice_thrice_converges() {
    let msgs = history();
    let expected = expected_live(&msgs);
    let once = run_lexical(&msgs);
    assert_eq!(live_view(&once), expected);
    for times in [2, 3] {
        let repeated: Vec<Msg> = msgs
            .iter()
            .flat_map(|m| std::iter::repeat_n(m.clone(), times))
            .collect();
        assert_eq!(run_lexical(&repeated), once, "replayed {times} times");
        let whole: Vec<Msg> = (0..times).flat_map(|_| msgs.clone()).collect();
        assert_eq!(run_lexical(&whole), once, "whole log {times} times");
    }
}

#[test]
fn out_of_order_delivery_converges() {
    let msgs = history();
    let reference = run_lexical(&msgs);
    let mut reversed = msgs.clone();
    reversed.reverse();
    assert_eq!(run_lexical(&reversed), reference);
    for seed in 0..20 {
        let order: Vec<Msg> = permutation(msgs.len(), seed)
            .into_iter()
            .map(|i| msgs[i].clone())
            .collect();
        assert_eq!(run_lexical(&order), reference, "seed {seed}");
    }
}

#[test]
fn duplicate_publish_acknowledges_same_generation() {
    let mut target = lexical_index();
    let m = publish("r1", 4, 0, "hello world");
    let first = target.publish(&m).unwrap();
    let again = target.publish(&m).unwrap();
    assert_eq!((first.generation, first.outcome), (4, AckOutcome::Applied));
    assert_eq!(
        (again.generation, again.outcome),
        (4, AckOutcome::AlreadyApplied)
    );
    assert_eq!(target.target_name(), "lexical");
}

#[test]
fn stale_generations_are_refused() {
    let mut target = lexical_index();
    target.publish(&publish("r1", 5, 0, "v5")).unwrap();
    let older = target.publish(&publish("r1", 4, 0, "v4")).unwrap_err();
    assert!(matches!(
        older,
        IndexError::StaleGeneration {
            offered: 4,
            held: 5,
            reason: StaleReason::OlderThanHeld,
            ..
        }
    ));
    let conflict = target
        .publish(&publish("r1", 5, 0, "different"))
        .unwrap_err();
    assert!(matches!(
        conflict,
        IndexError::GenerationConflict { generation: 5, .. }
    ));
    target.tombstone("r1", 6).unwrap();
    // A delayed publish at or below the revocation generation is refused.
    for g in [5, 6] {
        let err = target.publish(&publish("r1", g, 0, "v5")).unwrap_err();
        assert!(matches!(err, IndexError::StaleGeneration { .. }), "{err}");
    }
    // A publish that itself says it was revoked later is refused.
    let err = target.publish(&publish("r2", 3, 3, "x")).unwrap_err();
    assert!(matches!(
        err,
        IndexError::StaleGeneration {
            reason: StaleReason::RevokedAtOrAfter,
            ..
        }
    ));
    // A stale tombstone is refused too.
    target.publish(&publish("r3", 9, 0, "nine")).unwrap();
    assert!(target.tombstone("r3", 8).is_err());
    // Only a generation newer than the revocation re-publishes.
    assert_eq!(
        target
            .publish(&publish("r1", 7, 6, "v7"))
            .unwrap()
            .generation,
        7
    );
}

#[test]
fn tombstone_before_publish_fences_the_publish() {
    let mut target = vector_index();
    target.tombstone("r1", 2).unwrap();
    assert!(
        target
            .publish(&publish("r1", 1, 0, "late publish"))
            .is_err()
    );
    assert!(
        target
            .publish(&publish("r1", 2, 0, "same generation"))
            .is_err()
    );
    assert_eq!(target.live_count(), 0);
}

/// Crash between applying a publish and acknowledging it: the store
/// redelivers; whether or not the state was persisted, the target ends in
/// the same state and acknowledges the same generation.
#[test]
fn crash_between_publish_and_acknowledgement_converges() {
    let msgs = history();
    let reference = run_lexical(&msgs);
    for crash_at in [0, 7, 19, msgs.len() - 1] {
        for persisted_after_apply in [false, true] {
            let mut target = lexical_index();
            for m in &msgs[..crash_at] {
                let _ = deliver(&mut target, m);
            }
            if persisted_after_apply {
                let _ = deliver(&mut target, &msgs[crash_at]);
            }
            let bytes = target.snapshot().to_bytes().unwrap();
            drop(target);
            let mut restored = lexical_index();
            restored
                .restore(&TargetSnapshot::from_bytes(&bytes).unwrap())
                .unwrap();
            // Unacknowledged message redelivered, then every later one, then
            // the store's reconciliation replays the whole log once more.
            for m in msgs[crash_at..].iter().chain(msgs.iter()) {
                let _ = deliver(&mut restored, m);
            }
            assert_eq!(restored.snapshot(), reference, "crash at {crash_at}");
        }
    }
}

#[test]
fn snapshot_survives_a_file_round_trip() {
    let msgs = history();
    let mut target = vector_index();
    for m in &msgs {
        let _ = deliver(&mut target, m);
    }
    let dir = std::env::temp_dir().join(format!("mosaic-index-snap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vector.json");
    target.snapshot().save(&path).unwrap();
    let mut restored = vector_index();
    restored
        .restore(&TargetSnapshot::load(&path).unwrap())
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(restored.snapshot(), target.snapshot());
    let q = restored.embedder().embed("sailing").unwrap();
    let ids: Vec<String> = (0..30).map(|i| format!("rec-{i:02}")).collect();
    let (_, a) = restored.search_vector(&q, &Eligible::Records(&ids), "tenant-a", &policy(), 30);
    let (_, b) = target.search_vector(&q, &Eligible::Records(&ids), "tenant-a", &policy(), 30);
    assert_eq!(a, b);
}

#[test]
fn strict_snapshot_decoding_rejects_unknown_fields() {
    let err = TargetSnapshot::from_bytes(br#"{"slots":{},"extra":1}"#).unwrap_err();
    assert!(matches!(err, IndexError::Snapshot(_)));
}

#[test]
fn rebuild_from_records_equals_the_live_index() {
    let msgs = history();
    let expected = expected_live(&msgs);
    for make in [0, 1] {
        let (live, rebuilt) = if make == 0 {
            let mut live = lexical_index();
            for m in &msgs {
                let _ = deliver(&mut live, m);
            }
            let mut rebuilt = lexical_index();
            rebuilt
                .rebuild_from(&rebuild_entries(&msgs, &expected))
                .unwrap();
            (live.snapshot(), rebuilt.snapshot())
        } else {
            let mut live = vector_index();
            for m in &msgs {
                let _ = deliver(&mut live, m);
            }
            let mut rebuilt = vector_index();
            rebuilt
                .rebuild_from(&rebuild_entries(&msgs, &expected))
                .unwrap();
            (live.snapshot(), rebuilt.snapshot())
        };
        assert_eq!(live, rebuilt);
    }
}

/// The store's view: each record's current publication (with its
/// revocation generation) or its tombstone.
fn rebuild_entries(
    msgs: &[Msg],
    expected: &BTreeMap<String, Option<(u64, String)>>,
) -> Vec<RebuildEntry> {
    let mut entries = Vec::new();
    for (id, state) in expected {
        let revoked = msgs
            .iter()
            .filter_map(|m| match m {
                Msg::Tombstone(t, g) if t == id => Some(*g),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        match state {
            Some((g, _)) => {
                let m = msgs
                    .iter()
                    .find_map(|m| match m {
                        Msg::Publish(p) if &p.record_id == id && p.generation == *g => {
                            Some(p.clone())
                        }
                        _ => None,
                    })
                    .unwrap();
                let mut m = m;
                m.revocation_generation = revoked.min(g - 1);
                entries.push(RebuildEntry::Live(m));
            }
            None => entries.push(RebuildEntry::Tombstone {
                record_id: id.clone(),
                generation: revoked,
            }),
        }
    }
    entries
}

#[test]
fn revoked_records_are_never_searchable() {
    let msgs = history();
    let expected = expected_live(&msgs);
    let ids: Vec<String> = expected.keys().cloned().collect();
    for seed in 0..5 {
        let mut lexical = lexical_index();
        let mut vector = vector_index();
        let order = permutation(msgs.len(), seed);
        for &i in order.iter().chain(order.iter()) {
            let _ = deliver(&mut lexical, &msgs[i]);
            let _ = deliver(&mut vector, &msgs[i]);
        }
        let hits = lexical.search(
            "text hiking painting sailing revoked edited first reinstated",
            &Eligible::Records(&ids),
            "tenant-a",
            &policy(),
            100,
        );
        let q = vector.embedder().embed("text about hiking").unwrap();
        let (_, vhits) =
            vector.search_vector(&q, &Eligible::Records(&ids), "tenant-a", &policy(), 100);
        for hit in hits.iter().chain(vhits.iter()) {
            assert!(
                expected[&hit.record_id].is_some(),
                "revoked {} resurfaced",
                hit.record_id
            );
        }
        let live = expected.values().filter(|v| v.is_some()).count();
        assert_eq!(vhits.len(), live);
        assert_eq!(lexical.live_count(), live);
    }
}
