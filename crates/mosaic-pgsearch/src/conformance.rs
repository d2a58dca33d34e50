//! The retrieval conformance suite: every check is generic over a
//! [`RetrievalFactory`] and runs against the in-memory targets of
//! `mosaic-index` ([`MemoryFactory`]) and the PostgreSQL targets of this
//! crate. Checks **panic** (`assert!`) on a violated guarantee and return
//! `Err` only when a backend fails unexpectedly.

use std::collections::BTreeSet;
use std::sync::Arc;

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_index::{
    AckOutcome, Acknowledgement, AnnConfig, Eligible, Embedder, HashEmbedder, IndexError,
    IndexTarget, LexicalIndex, PublishMessage, ScopeKeys, ScopePredicate, StaleReason, VectorIndex,
};

use crate::error::PgSearchResult;
use crate::search::{LexicalSearch, RankedHit, SearchTarget, VectorSearch};

/// Dimension of the suite's hashing embedder.
pub const SUITE_DIMENSION: usize = 64;

/// The embedder every vector target in the suite uses.
pub fn suite_embedder() -> Arc<HashEmbedder> {
    Arc::new(HashEmbedder::new(SUITE_DIMENSION))
}

/// Makes empty databases and targets for the suite.
pub trait RetrievalFactory {
    /// The lexical target.
    type Lexical: LexicalSearch;
    /// The vector target.
    type Vector: VectorSearch;
    /// One empty database (dropped at the end of a check).
    type Db;

    /// A new, empty database.
    fn fresh(&self) -> PgSearchResult<Self::Db>;

    /// The lexical target over `db`.
    fn lexical(&self, db: &Self::Db) -> PgSearchResult<Self::Lexical>;

    /// The vector target over `db`, embedding with [`suite_embedder`].
    fn vector(&self, db: &Self::Db) -> PgSearchResult<Self::Vector>;
}

/// The in-memory targets of `mosaic-index`.
pub struct MemoryFactory;

impl RetrievalFactory for MemoryFactory {
    type Lexical = LexicalIndex;
    type Vector = VectorIndex;
    type Db = ();

    fn fresh(&self) -> PgSearchResult<()> {
        Ok(())
    }

    fn lexical(&self, _db: &()) -> PgSearchResult<LexicalIndex> {
        Ok(LexicalIndex::new())
    }

    fn vector(&self, _db: &()) -> PgSearchResult<VectorIndex> {
        Ok(VectorIndex::new(suite_embedder(), AnnConfig::default()))
    }
}

/// One conformance check.
pub type Check<F> = fn(&F) -> PgSearchResult<()>;

/// Every check, by name.
pub fn all_checks<F: RetrievalFactory>() -> Vec<(&'static str, Check<F>)> {
    vec![
        ("replay_once_is_idempotent", replay_once_is_idempotent::<F>),
        (
            "replay_twice_is_idempotent",
            replay_twice_is_idempotent::<F>,
        ),
        (
            "replay_thrice_is_idempotent",
            replay_thrice_is_idempotent::<F>,
        ),
        (
            "out_of_order_delivery_converges",
            out_of_order_delivery_converges::<F>,
        ),
        (
            "no_resurrection_after_tombstone_or_revocation",
            no_resurrection_after_tombstone_or_revocation::<F>,
        ),
        (
            "tenant_and_subject_scopes_never_cross",
            tenant_and_subject_scopes_never_cross::<F>,
        ),
        (
            "filtered_vector_recall_at_one_percent",
            filtered_vector_recall_at_one_percent::<F>,
        ),
        ("lexical_ranking_is_sane", lexical_ranking_is_sane::<F>),
    ]
}

/// Runs every check, stopping at the first failure.
pub fn run_all<F: RetrievalFactory>(factory: &F) -> PgSearchResult<()> {
    for (_, check) in all_checks::<F>() {
        check(factory)?;
    }
    Ok(())
}

// ---------------------------------------------------------------- fixtures

/// Tenant A.
pub const TENANT_A: &str = "tenant-a";
/// Tenant B.
pub const TENANT_B: &str = "tenant-b";

/// The policy digest every suite record is written under.
pub fn policy() -> String {
    sha256_hex(b"retrieval suite policy")
}

/// Scope keys of an episodic record about `subject` in `tenant`.
pub fn scope(tenant: &str, subject: &str) -> ScopeKeys {
    ScopeKeys {
        tenant_id: tenant.into(),
        policy_sha256: policy(),
        subject_key: subject.into(),
        kind: MemoryKind::Episodic,
    }
}

/// A publication.
pub fn message(
    record: &str,
    generation: u64,
    revoked: u64,
    scope: ScopeKeys,
    text: &str,
) -> PublishMessage {
    PublishMessage {
        record_id: record.into(),
        generation,
        revocation_generation: revoked,
        scope,
        created_at_unix_ms: 1_000 + generation,
        claim_keys: Vec::new(),
        text: text.into(),
    }
}

/// One outbox delivery.
#[derive(Clone, Debug)]
pub enum Delivery {
    /// A publication.
    Publish(PublishMessage),
    /// A tombstone `(record, generation)`.
    Tombstone(String, u64),
}

fn deliver<T: IndexTarget + ?Sized>(
    target: &mut T,
    d: &Delivery,
) -> Result<Acknowledgement, IndexError> {
    match d {
        Delivery::Publish(m) => target.publish(m),
        Delivery::Tombstone(id, generation) => target.tombstone(id, *generation),
    }
}

const ALICE: &str = "principal:alice";
const BOB: &str = "principal:bob";

/// A history with republication, tombstones and a watermark.
fn history() -> Vec<Delivery> {
    let a = |s| scope(TENANT_A, s);
    vec![
        Delivery::Publish(message(
            "h1",
            1,
            0,
            a(ALICE),
            "deployment failed because migration seven was missing",
        )),
        Delivery::Publish(message(
            "h2",
            1,
            0,
            a(ALICE),
            "the user prefers concise answers in the morning",
        )),
        Delivery::Publish(message(
            "h3",
            1,
            0,
            a(BOB),
            "bob reviews pull requests on fridays",
        )),
        Delivery::Publish(message(
            "h2",
            2,
            0,
            a(ALICE),
            "the user prefers concise answers with code samples",
        )),
        Delivery::Tombstone("h3".into(), 2),
        Delivery::Publish(message(
            "h4",
            3,
            2,
            a(ALICE),
            "a deployment checklist names every migration",
        )),
        Delivery::Tombstone("h5".into(), 4),
        Delivery::Publish(message(
            "h5",
            2,
            0,
            a(ALICE),
            "revoked deployment note that must never return",
        )),
    ]
}

const HISTORY_IDS: [&str; 5] = ["h1", "h2", "h3", "h4", "h5"];
const QUERIES: [&str; 3] = [
    "deployment migration",
    "concise answers code",
    "pull requests fridays",
];

fn all_scope() -> ScopePredicate {
    ScopePredicate {
        subject_keys: [ALICE, BOB].iter().map(|s| (*s).to_owned()).collect(),
        kinds: MemoryKind::ALL.into_iter().collect(),
    }
}

/// What a target looks like from outside: live generations and answers.
#[derive(Debug, PartialEq, Eq)]
struct Observation {
    live: Vec<(String, Option<u64>)>,
    answers: Vec<Vec<RankedHit>>,
}

fn observe_lexical<L: LexicalSearch>(t: &mut L) -> PgSearchResult<Observation> {
    let mut live = Vec::new();
    for id in HISTORY_IDS {
        live.push((id.to_owned(), t.live_generation_of(id)?));
    }
    let predicate = all_scope();
    let mut answers = Vec::new();
    for q in QUERIES {
        answers.push(t.search_text(q, &Eligible::Scope(&predicate), TENANT_A, &policy(), 10)?);
    }
    Ok(Observation { live, answers })
}

fn observe_vector<V: VectorSearch>(t: &mut V) -> PgSearchResult<Observation> {
    let embedder = suite_embedder();
    let mut live = Vec::new();
    for id in HISTORY_IDS {
        live.push((id.to_owned(), t.live_generation_of(id)?));
    }
    let predicate = all_scope();
    let mut answers = Vec::new();
    for q in QUERIES {
        let v = embedder.embed(q)?;
        answers.push(t.search_embedding(
            &v,
            &Eligible::Scope(&predicate),
            TENANT_A,
            &policy(),
            10,
        )?);
    }
    Ok(Observation { live, answers })
}

fn expected_live() -> Vec<(String, Option<u64>)> {
    [
        ("h1", Some(1)),
        ("h2", Some(2)),
        ("h3", None),
        ("h4", Some(3)),
        ("h5", None),
    ]
    .into_iter()
    .map(|(id, g)| (id.to_owned(), g))
    .collect()
}

fn is_stale(result: &Result<Acknowledgement, IndexError>) -> bool {
    matches!(result, Err(IndexError::StaleGeneration { .. }))
}

/// Delivers `history()` with every message repeated `times` times in a
/// row, then the whole history `times - 1` more times.
fn replay<T: IndexTarget>(target: &mut T, times: usize) {
    let history = history();
    for d in &history {
        let first = deliver(target, d);
        match d {
            // The one publication that arrives after its tombstone.
            Delivery::Publish(m) if m.record_id == "h5" => {
                assert!(is_stale(&first), "h5 resurrected: {first:?}");
            }
            _ => assert!(
                matches!(&first, Ok(a) if a.outcome == AckOutcome::Applied),
                "first delivery of {d:?}: {first:?}"
            ),
        }
        for _ in 1..times {
            let again = deliver(target, d);
            match d {
                Delivery::Publish(m) if m.record_id == "h5" => assert!(is_stale(&again)),
                _ => assert!(
                    matches!(&again, Ok(a) if a.outcome == AckOutcome::AlreadyApplied),
                    "repeated delivery of {d:?}: {again:?}"
                ),
            }
        }
    }
    for _ in 1..times {
        for d in &history {
            let again = deliver(target, d);
            assert!(
                is_stale(&again)
                    || matches!(&again, Ok(a) if a.outcome == AckOutcome::AlreadyApplied),
                "a replayed message changed the index: {d:?}: {again:?}"
            );
        }
    }
}

fn replay_is_idempotent<F: RetrievalFactory>(factory: &F, times: usize) -> PgSearchResult<()> {
    let db = factory.fresh()?;
    let mut lexical = factory.lexical(&db)?;
    let mut vector = factory.vector(&db)?;
    replay(&mut lexical, times);
    replay(&mut vector, times);
    let lex = observe_lexical(&mut lexical)?;
    let vec = observe_vector(&mut vector)?;
    assert_eq!(lex.live, expected_live());
    assert_eq!(vec.live, expected_live());

    // The same history delivered once, into another database: same answers.
    let once = factory.fresh()?;
    let mut lexical1 = factory.lexical(&once)?;
    let mut vector1 = factory.vector(&once)?;
    for d in history() {
        let _ = deliver(&mut lexical1, &d);
        let _ = deliver(&mut vector1, &d);
    }
    assert_eq!(lex, observe_lexical(&mut lexical1)?);
    assert_eq!(vec, observe_vector(&mut vector1)?);
    // Search sees the replayed state, not something else.
    assert!(lex.answers[0].iter().any(|h| h.record_id == "h1"));
    assert!(lex.answers[2].is_empty(), "h3 was tombstoned");
    assert!(
        vec.answers
            .iter()
            .flatten()
            .all(|h| h.record_id != "h3" && h.record_id != "h5"),
        "a tombstoned record was returned"
    );
    Ok(())
}

/// Every message delivered once.
pub fn replay_once_is_idempotent<F: RetrievalFactory>(factory: &F) -> PgSearchResult<()> {
    replay_is_idempotent(factory, 1)
}

/// Every message delivered twice (back to back and as a second pass).
pub fn replay_twice_is_idempotent<F: RetrievalFactory>(factory: &F) -> PgSearchResult<()> {
    replay_is_idempotent(factory, 2)
}

/// Every message delivered three times.
pub fn replay_thrice_is_idempotent<F: RetrievalFactory>(factory: &F) -> PgSearchResult<()> {
    replay_is_idempotent(factory, 3)
}

/// A deterministic permutation of `0..n`.
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    for i in (1..n).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let j = usize::try_from(state >> 33).unwrap_or(0) % (i + 1);
        order.swap(i, j);
    }
    order
}

/// Any delivery order converges to the in-order state: stale messages are
/// refused, nothing else is.
pub fn out_of_order_delivery_converges<F: RetrievalFactory>(factory: &F) -> PgSearchResult<()> {
    let history = history();
    let mut orders: Vec<Vec<usize>> = (1..=4)
        .map(|seed| permutation(history.len(), seed))
        .collect();
    orders.push((0..history.len()).rev().collect());
    for order in orders {
        let db = factory.fresh()?;
        let mut lexical = factory.lexical(&db)?;
        let mut vector = factory.vector(&db)?;
        for &i in &order {
            for result in [
                deliver(&mut lexical, &history[i]),
                deliver(&mut vector, &history[i]),
            ] {
                assert!(
                    result.is_ok() || is_stale(&result),
                    "order {order:?}: {:?} failed: {result:?}",
                    history[i]
                );
            }
        }
        let lex = observe_lexical(&mut lexical)?;
        let vec = observe_vector(&mut vector)?;
        assert_eq!(lex.live, expected_live(), "order {order:?}");
        assert_eq!(vec.live, expected_live(), "order {order:?}");
        let reference = factory.fresh()?;
        let mut lexical_ref = factory.lexical(&reference)?;
        let mut vector_ref = factory.vector(&reference)?;
        for d in &history {
            let _ = deliver(&mut lexical_ref, d);
            let _ = deliver(&mut vector_ref, d);
        }
        assert_eq!(lex, observe_lexical(&mut lexical_ref)?, "order {order:?}");
        assert_eq!(vec, observe_vector(&mut vector_ref)?, "order {order:?}");
    }
    Ok(())
}

fn no_resurrection_on<T: SearchTarget>(
    target: &mut T,
    search: &mut dyn FnMut(&mut T) -> PgSearchResult<Vec<RankedHit>>,
) -> PgSearchResult<()> {
    let a = || scope(TENANT_A, ALICE);
    let text = "the api token rotation procedure for staging";
    target.publish(&message("r1", 1, 0, a(), text))?;
    assert!(search(target)?.iter().any(|h| h.record_id == "r1"));
    target.tombstone("r1", 2)?;
    for (generation, revoked) in [(1, 0), (2, 0), (2, 1)] {
        let refused = target.publish(&message("r1", generation, revoked, a(), text));
        assert!(
            matches!(
                refused,
                Err(IndexError::StaleGeneration {
                    reason: StaleReason::RevokedAtOrAfter,
                    ..
                })
            ),
            "publication at {generation} after a tombstone at 2: {refused:?}"
        );
    }
    // An older tombstone is refused; the same one again is a duplicate.
    assert!(matches!(
        target.tombstone("r1", 1),
        Err(IndexError::StaleGeneration {
            reason: StaleReason::OlderThanHeld,
            ..
        })
    ));
    assert_eq!(
        target.tombstone("r1", 2)?.outcome,
        AckOutcome::AlreadyApplied
    );
    assert_eq!(target.live_generation_of("r1")?, None);
    assert!(search(target)?.iter().all(|h| h.record_id != "r1"));

    // A publication carrying a revocation watermark at or above itself.
    assert!(matches!(
        target.publish(&message("r2", 3, 3, a(), text)),
        Err(IndexError::StaleGeneration { .. })
    ));
    // The watermark a publication carries fences older generations out.
    target.publish(&message("r2", 5, 4, a(), text))?;
    assert!(matches!(
        target.publish(&message("r2", 4, 0, a(), text)),
        Err(IndexError::StaleGeneration { .. })
    ));
    assert_eq!(target.live_generation_of("r2")?, Some(5));
    // A tombstone delivered before its record's first publication.
    target.tombstone("r3", 3)?;
    for generation in [2, 3] {
        assert!(
            target
                .publish(&message("r3", generation, 0, a(), text))
                .is_err()
        );
    }
    assert_eq!(target.live_generation_of("r3")?, None);
    assert!(search(target)?.iter().all(|h| h.record_id != "r3"));
    // A same-generation publication with other content is a conflict.
    assert!(matches!(
        target.publish(&message("r2", 5, 4, a(), "different text")),
        Err(IndexError::GenerationConflict { .. })
    ));
    Ok(())
}

/// Once tombstoned (or fenced by a revocation watermark), a record never
/// comes back through an older or equal publication.
pub fn no_resurrection_after_tombstone_or_revocation<F: RetrievalFactory>(
    factory: &F,
) -> PgSearchResult<()> {
    let db = factory.fresh()?;
    let predicate = all_scope();
    let mut lexical = factory.lexical(&db)?;
    no_resurrection_on(&mut lexical, &mut |t: &mut F::Lexical| {
        t.search_text(
            "token rotation staging",
            &Eligible::Scope(&predicate),
            TENANT_A,
            &policy(),
            10,
        )
    })?;
    let mut vector = factory.vector(&db)?;
    let q = suite_embedder().embed("api token rotation staging")?;
    no_resurrection_on(&mut vector, &mut |t: &mut F::Vector| {
        t.search_embedding(&q, &Eligible::Scope(&predicate), TENANT_A, &policy(), 10)
    })?;
    Ok(())
}

/// Near-identical texts under other tenants, subjects or policies never
/// appear in an answer, whichever form the eligibility takes.
pub fn tenant_and_subject_scopes_never_cross<F: RetrievalFactory>(
    factory: &F,
) -> PgSearchResult<()> {
    let db = factory.fresh()?;
    let mut lexical = factory.lexical(&db)?;
    let mut vector = factory.vector(&db)?;
    let base = "prefers concise answers about the billing migration";
    let mut other_policy = scope(TENANT_A, ALICE);
    other_policy.policy_sha256 = sha256_hex(b"another policy");
    let records = [
        ("a-alice", scope(TENANT_A, ALICE), format!("alice {base}")),
        ("a-bob", scope(TENANT_A, BOB), format!("alice {base}")),
        ("b-alice", scope(TENANT_B, ALICE), format!("alice {base}")),
        ("a-alice-old-policy", other_policy, format!("alice {base}")),
        (
            "a-alice-2",
            scope(TENANT_A, ALICE),
            format!("alice {base} too"),
        ),
    ];
    for (id, scope, text) in &records {
        let m = message(id, 1, 0, scope.clone(), text);
        lexical.publish(&m)?;
        vector.publish(&m)?;
    }
    let q = format!("alice {base}");
    let qv = suite_embedder().embed(&q)?;
    let alice_only = ScopePredicate {
        subject_keys: BTreeSet::from([ALICE.to_owned()]),
        kinds: MemoryKind::ALL.into_iter().collect(),
    };
    let every_id: Vec<String> = records.iter().map(|(id, _, _)| (*id).to_owned()).collect();
    let eligibilities = [
        Eligible::Scope(&alice_only),
        // The caller's list names foreign records: they are still refused.
        Eligible::Records(&every_id),
    ];
    for (n, eligible) in eligibilities.iter().enumerate() {
        let lex = lexical.search_text(&q, eligible, TENANT_A, &policy(), 10)?;
        let vec = vector.search_embedding(&qv, eligible, TENANT_A, &policy(), 10)?;
        let expected: &[&str] = if n == 0 {
            &["a-alice", "a-alice-2"]
        } else {
            &["a-alice", "a-alice-2", "a-bob"]
        };
        for (name, hits) in [("lexical", &lex), ("vector", &vec)] {
            let got: BTreeSet<&str> = hits.iter().map(|h| h.record_id.as_str()).collect();
            assert_eq!(
                got,
                expected.iter().copied().collect(),
                "{name} with eligibility {n}"
            );
        }
        // Tenant B sees only its own copy.
        let lex_b = lexical.search_text(&q, eligible, TENANT_B, &policy(), 10)?;
        let vec_b = vector.search_embedding(&qv, eligible, TENANT_B, &policy(), 10)?;
        for hits in [&lex_b, &vec_b] {
            let got: Vec<&str> = hits.iter().map(|h| h.record_id.as_str()).collect();
            assert_eq!(got, ["b-alice"], "tenant B with eligibility {n}");
        }
    }
    // An unknown tenant or policy sees nothing.
    let everything = Eligible::Records(&every_id);
    assert!(
        lexical
            .search_text(&q, &everything, "tenant-c", &policy(), 10)?
            .is_empty()
    );
    assert!(
        vector
            .search_embedding(&qv, &everything, TENANT_A, &sha256_hex(b"unknown"), 10)?
            .is_empty()
    );
    Ok(())
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

/// Records in the recall check.
pub const RECALL_RECORDS: usize = 3_000;
/// Subjects they are spread over (one subject is 1% of the records).
pub const RECALL_SUBJECTS: usize = 100;

fn recall_text(rng: &mut Rng) -> String {
    const TOPICS: [&str; 12] = [
        "billing",
        "deploy",
        "migration",
        "review",
        "oncall",
        "latency",
        "budget",
        "schema",
        "tokens",
        "release",
        "backup",
        "access",
    ];
    let mut words = Vec::new();
    for _ in 0..8 {
        let topic = TOPICS[usize::try_from(rng.next()).unwrap_or(0) % TOPICS.len()];
        words.push(format!("{topic}{}", rng.next() % 50));
    }
    words.join(" ")
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

/// Filtered vector search inside a 1% scope finds the exact top 10
/// (recall@10 >= 0.99 over 20 queries) among 3,000 hash-embedded records.
pub fn filtered_vector_recall_at_one_percent<F: RetrievalFactory>(
    factory: &F,
) -> PgSearchResult<()> {
    let db = factory.fresh()?;
    let mut vector = factory.vector(&db)?;
    let embedder = suite_embedder();
    let mut rng = Rng(42);
    let mut corpus = Vec::with_capacity(RECALL_RECORDS);
    for i in 0..RECALL_RECORDS {
        let subject = format!("principal:user-{}", i % RECALL_SUBJECTS);
        let text = recall_text(&mut rng);
        corpus.push(message(
            &format!("rec-{i:05}"),
            1,
            0,
            scope(TENANT_A, &subject),
            &text,
        ));
    }
    for chunk in corpus.chunks(500) {
        for result in vector.publish_batch(chunk) {
            result?;
        }
    }
    let texts: Vec<&str> = corpus.iter().map(|m| m.text.as_str()).collect();
    let embedded = embedder.embed_batch(&texts)?;
    let queries = 20;
    let mut total = 0.0;
    for qi in 0..queries {
        let subject = format!("principal:user-{}", (qi * 7) % RECALL_SUBJECTS);
        let q = embedder.embed(&recall_text(&mut rng))?;
        // Exact answer inside the scope.
        let mut truth: Vec<(f64, &str)> = corpus
            .iter()
            .zip(&embedded)
            .filter(|(m, _)| m.scope.subject_key == subject)
            .map(|(m, v)| (cosine(&q, v), m.record_id.as_str()))
            .collect();
        assert_eq!(
            truth.len(),
            RECALL_RECORDS / RECALL_SUBJECTS,
            "1% selectivity"
        );
        truth.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        truth.truncate(10);
        let tenth = truth.last().map_or(f64::NEG_INFINITY, |t| t.0);
        let predicate = ScopePredicate {
            subject_keys: BTreeSet::from([subject.clone()]),
            kinds: MemoryKind::ALL.into_iter().collect(),
        };
        let found =
            vector.search_embedding(&q, &Eligible::Scope(&predicate), TENANT_A, &policy(), 10)?;
        assert!(found.len() <= 10);
        let scoped: BTreeSet<&str> = corpus
            .iter()
            .filter(|m| m.scope.subject_key == subject)
            .map(|m| m.record_id.as_str())
            .collect();
        assert!(
            found.iter().all(|h| scoped.contains(h.record_id.as_str())),
            "a hit outside the scope"
        );
        // A hit counts when it is in the exact top 10 or ties its 10th score.
        let hits = found
            .iter()
            .filter(|h| {
                truth.iter().any(|t| t.1 == h.record_id)
                    || (h.score as f64) / crate::search::SCORE_SCALE >= tenth - 1e-6
            })
            .count();
        total += hits as f64 / truth.len() as f64;
    }
    let recall = total / queries as f64;
    assert!(
        recall >= 0.99,
        "filtered recall@10 at 1% selectivity: {recall}"
    );
    Ok(())
}

/// Full-text ranking: more matching evidence ranks higher, records without
/// a query word are not returned, order is by score then record id, `k`
/// bounds the answer.
pub fn lexical_ranking_is_sane<F: RetrievalFactory>(factory: &F) -> PgSearchResult<()> {
    let db = factory.fresh()?;
    let mut lexical = factory.lexical(&db)?;
    let a = || scope(TENANT_A, ALICE);
    let docs = [
        (
            "d1",
            "the deployment failed because the migration was missing",
        ),
        ("d2", "the deployment succeeded"),
        ("d3", "cats like warm windows in the afternoon"),
        (
            "d4",
            "deployment failed again: migration missing, migration rerun, deployment retried",
        ),
        ("d5", "the deployment succeeded"),
    ];
    for (id, text) in docs {
        lexical.publish(&message(id, 1, 0, a(), text))?;
    }
    let predicate = all_scope();
    let eligible = Eligible::Scope(&predicate);
    let hits = lexical.search_text(
        "deployment migration missing",
        &eligible,
        TENANT_A,
        &policy(),
        10,
    )?;
    let ids: Vec<&str> = hits.iter().map(|h| h.record_id.as_str()).collect();
    assert!(
        !ids.contains(&"d3"),
        "a record without a query word: {ids:?}"
    );
    assert_eq!(ids.len(), 4, "{ids:?}");
    let top: BTreeSet<&str> = ids[..2].iter().copied().collect();
    assert_eq!(top, BTreeSet::from(["d1", "d4"]), "{hits:?}");
    assert_eq!(&ids[2..], ["d2", "d5"], "equal scores break ties by id");
    assert_eq!(hits[2].score, hits[3].score);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(hits.iter().all(|h| h.score > 0));
    let limited = lexical.search_text(
        "deployment migration missing",
        &eligible,
        TENANT_A,
        &policy(),
        2,
    )?;
    assert_eq!(limited, hits[..2].to_vec());
    assert!(
        lexical
            .search_text(
                "afternoon",
                &Eligible::Records(&["d1".to_owned()]),
                TENANT_A,
                &policy(),
                10
            )?
            .is_empty(),
        "eligibility narrows before ranking"
    );
    assert!(
        lexical
            .search_text("", &eligible, TENANT_A, &policy(), 10)?
            .is_empty()
    );
    assert!(
        lexical
            .search_text("' | !( & <-> :*", &eligible, TENANT_A, &policy(), 10)?
            .is_empty(),
        "query syntax characters are only separators"
    );
    Ok(())
}
