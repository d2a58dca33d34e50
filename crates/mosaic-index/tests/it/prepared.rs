//! Publishing with vectors embedded outside the index gives the same
//! target as letting the index embed, and a bad vector fails only its own
//! message.
//! Layer under test: `VectorIndex::publish_batch_prepared`, `vector_of`.

use mosaic_index::{AckOutcome, Embedder, IndexError, IndexTarget, PublishMessage};

use crate::common::{embedder, publish, vector_index};

/// New records, a newer generation of one, a duplicate, a stale message,
/// a message at a revoked generation and one conflicting publication.
fn messages() -> Vec<PublishMessage> {
    let mut out: Vec<PublishMessage> = (0..20)
        .map(|i| {
            publish(
                &format!("r{i:02}"),
                2,
                0,
                &format!("memory number {i} about lakes"),
            )
        })
        .collect();
    out.push(publish("r03", 3, 0, "r03 rewritten at generation three"));
    out.push(publish("r05", 2, 0, "memory number 5 about lakes"));
    out.push(publish("r07", 1, 0, "an older generation of r07"));
    out.push(publish(
        "r09",
        2,
        0,
        "a conflicting text at the same generation",
    ));
    out.push(publish("r11", 4, 3, "r11 at generation four"));
    out.push(publish("r11", 3, 0, "r11 at a revoked generation"));
    out
}

fn vectors(messages: &[PublishMessage]) -> Vec<Result<Vec<f32>, IndexError>> {
    let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
    embedder()
        .embed_batch(&texts)
        .unwrap()
        .into_iter()
        .map(Ok)
        .collect()
}

#[test]
fn prepared_vectors_give_the_same_index_as_embedding_inside() {
    let messages = messages();
    let mut inside = vector_index();
    let mut outside = vector_index();
    inside.tombstone("r13", 5).unwrap();
    outside.tombstone("r13", 5).unwrap();
    let a = inside.publish_batch(&messages);
    let b = outside.publish_batch_prepared(&messages, vectors(&messages));
    assert_eq!(a, b);
    // The batch holds every kind of outcome, so the comparison means something.
    assert!(
        a.iter()
            .any(|r| matches!(r, Ok(x) if x.outcome == AckOutcome::Applied))
    );
    assert!(
        a.iter()
            .any(|r| matches!(r, Ok(x) if x.outcome == AckOutcome::AlreadyApplied))
    );
    assert!(
        a.iter()
            .any(|r| matches!(r, Err(IndexError::StaleGeneration { .. })))
    );
    assert!(
        a.iter()
            .any(|r| matches!(r, Err(IndexError::GenerationConflict { .. })))
    );
    assert_eq!(inside.snapshot(), outside.snapshot());
    assert_eq!(inside.embedding_snapshot(), outside.embedding_snapshot());
    assert_eq!(outside.live_count(), 20 - 1);
    // The stored vector is the one handed in.
    let r03 = embedder()
        .embed("r03 rewritten at generation three")
        .unwrap();
    assert_eq!(outside.vector_of("r03"), Some(r03.as_slice()));
    assert_eq!(outside.vector_of("r13"), None);
    assert_eq!(outside.vector_of("nobody"), None);
}

#[test]
fn a_bad_vector_fails_only_its_own_message() {
    let messages: Vec<PublishMessage> = (0..4)
        .map(|i| publish(&format!("r{i}"), 1, 0, &format!("text {i}")))
        .collect();
    let mut vs = vectors(&messages);
    let dim = vs[0].as_ref().unwrap().len();
    vs[1] = Ok(vec![0.5; dim + 1]);
    vs[2] = Ok(vec![f32::NAN; dim]);
    let mut index = vector_index();
    let results = index.publish_batch_prepared(&messages, vs);
    assert!(results[0].is_ok() && results[3].is_ok(), "{results:?}");
    assert!(matches!(
        results[1],
        Err(IndexError::BadEmbedding { expected, actual }) if expected == dim && actual == dim + 1
    ));
    assert!(matches!(results[2], Err(IndexError::BadEmbedding { .. })));
    assert_eq!(index.live_count(), 2);
    assert!(index.live_entry("r1").is_none() && index.live_entry("r2").is_none());

    // A duplicate ignores its vector, even a bad or missing one.
    let again = index.publish_batch_prepared(
        &messages[..1],
        vec![Err(IndexError::EmbeddingService("down".into()))],
    );
    assert_eq!(
        again[0].as_ref().unwrap().outcome,
        AckOutcome::AlreadyApplied
    );
    // A failed message can be delivered again with a good vector.
    let retry = index.publish_batch_prepared(&messages[1..2], vectors(&messages[1..2]));
    assert_eq!(retry[0].as_ref().unwrap().outcome, AckOutcome::Applied);
}

#[test]
fn a_vector_count_that_does_not_match_applies_nothing() {
    let messages: Vec<PublishMessage> = (0..3)
        .map(|i| publish(&format!("r{i}"), 1, 0, &format!("text {i}")))
        .collect();
    let mut index = vector_index();
    let results = index.publish_batch_prepared(&messages, vectors(&messages[..2]));
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(Result::is_err));
    assert_eq!(index.live_count(), 0);
}

/// `nearest_in_subject` (the write guards' vector candidates) ranks only
/// live records of the one tenant, subject and kind asked for, whatever
/// policy they were published under, nearest first.
#[test]
fn nearest_in_subject_keeps_to_its_tenant_subject_and_kind() {
    use mosaic_harness::MemoryKind;
    let mut index = vector_index();
    let text = "the refund portal moved to a new address";
    let mut messages = vec![
        publish("same", 1, 0, text),
        publish("near", 1, 0, "the refund portal moved to another address"),
        publish("far", 1, 0, "lunch is served at noon on weekdays"),
    ];
    let mut other_tenant = publish("other-tenant", 1, 0, text);
    other_tenant.scope.tenant_id = "tenant-b".into();
    let mut other_subject = publish("other-subject", 1, 0, text);
    other_subject.scope.subject_key = "principal:bob".into();
    let mut other_kind = publish("other-kind", 1, 0, text);
    other_kind.scope.kind = MemoryKind::Semantic;
    let mut other_policy = publish("other-policy", 1, 0, text);
    other_policy.scope.policy_sha256 = "0".repeat(64);
    let revoked = publish("revoked", 1, 0, text);
    messages.extend([
        other_tenant,
        other_subject,
        other_kind,
        other_policy,
        revoked,
    ]);
    for m in &messages {
        index.publish(m).expect("publish");
    }
    index.tombstone("revoked", 2).expect("tombstone");
    let query = embedder().embed(text).expect("embed");
    let hits = index.nearest_in_subject(
        &query,
        "tenant-a",
        "principal:alice",
        MemoryKind::Episodic,
        10,
    );
    let ids: Vec<&str> = hits.iter().map(|h| h.record_id.as_str()).collect();
    assert_eq!(ids[..2], ["other-policy", "same"], "{ids:?}");
    assert_eq!(ids[2..], ["near", "far"], "{ids:?}");
    assert!((hits[0].score - 1.0).abs() < 1e-5, "{}", hits[0].score);
    assert!(hits[2].score > hits[3].score);
    // A vector of another dimension finds nothing rather than failing.
    assert!(
        index
            .nearest_in_subject(
                &[1.0],
                "tenant-a",
                "principal:alice",
                MemoryKind::Episodic,
                10
            )
            .is_empty()
    );
}
