//! After chaos on the outbox path (refused, duplicated, reordered and stale
//! deliveries, a worker dying between applying and acknowledging, server
//! restarts) and one reconcile, the live indexes equal indexes rebuilt from
//! the store, and no revoked or erased record is live in either or has its
//! text anywhere in them.
//! Layer under test: the service's outbox worker, reconcile and reindex
//! over the embedded SQLite store, driven through `Service` with an
//! injected `OutboxFaults`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use mosaic_index::TargetSnapshot;
use mosaic_index::target::LiveEntry;
use mosaic_index::vector::EmbeddingSnapshot;
use mosaic_service::Service;
use mosaic_service::api::RevokeRequest;
use mosaic_service::auth::Credential;
use mosaic_service::examples::workspace_fact;
use mosaic_service::service::{IndexDelivery, OutboxFault, OutboxFaults, VECTOR_EMBEDDINGS_FILE};
use mosaic_store::OutboxTask;

use crate::common::{WORKSPACE, config, world};

/// SplitMix64: a seeded, dependency-free generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Faults drawn from a seeded generator; remembers every delivery so it can
/// hand old copies back as stale redeliveries.
struct Chaos {
    rng: Mutex<Rng>,
    history: Mutex<Vec<(String, IndexDelivery)>>,
}

impl Chaos {
    fn new(seed: u64) -> Self {
        Chaos {
            rng: Mutex::new(Rng(seed)),
            history: Mutex::new(Vec::new()),
        }
    }
}

impl OutboxFaults for Chaos {
    fn schedule(&self, _target: &str, batch: &[OutboxTask]) -> Vec<usize> {
        let mut rng = self.rng.lock().expect("rng");
        let mut order: Vec<usize> = (0..batch.len()).collect();
        for i in (1..order.len()).rev() {
            let j = rng.below(i + 1);
            order.swap(i, j);
        }
        if !order.is_empty() && rng.chance(15) {
            // Left pending for a later pass.
            let at = rng.below(order.len());
            order.remove(at);
        }
        if !order.is_empty() && rng.chance(15) {
            let again = order[rng.below(order.len())];
            order.push(again);
        }
        order
    }

    fn fault(&self, target: &str, delivery: &IndexDelivery) -> OutboxFault {
        self.history
            .lock()
            .expect("history")
            .push((target.to_owned(), delivery.clone()));
        let roll = self.rng.lock().expect("rng").below(100);
        match roll {
            0..15 => OutboxFault::Refuse,
            15..30 => OutboxFault::ApplyWithoutAck,
            30..40 => OutboxFault::DeliverTwice,
            _ => OutboxFault::Deliver,
        }
    }

    fn stale(&self, target: &str) -> Vec<IndexDelivery> {
        let history = self.history.lock().expect("history");
        let mine: Vec<&IndexDelivery> = history
            .iter()
            .filter(|(t, _)| t == target)
            .map(|(_, d)| d)
            .collect();
        let mut rng = self.rng.lock().expect("rng");
        let n = if mine.is_empty() { 0 } else { rng.below(4) };
        (0..n)
            .map(|_| mine[rng.below(mine.len())].clone())
            .collect()
    }
}

fn live_entries(snapshot: &TargetSnapshot) -> BTreeMap<String, LiveEntry> {
    snapshot
        .slots
        .iter()
        .filter_map(|(id, slot)| slot.live.clone().map(|l| (id.clone(), l)))
        .collect()
}

fn tombstones(snapshot: &TargetSnapshot) -> BTreeSet<String> {
    snapshot
        .slots
        .iter()
        .filter(|(_, slot)| slot.live.is_none())
        .map(|(id, _)| id.clone())
        .collect()
}

/// Every revoked record is a tombstone in `snapshot` and its text is
/// nowhere in it.
fn assert_no_trace(seed: u64, name: &str, snapshot: &TargetSnapshot, gone: &[(String, String)]) {
    let encoded = String::from_utf8(snapshot.to_bytes().expect("encode")).expect("utf-8");
    let dead = tombstones(snapshot);
    for (id, text) in gone {
        assert!(
            dead.contains(id),
            "seed {seed}: {name} holds a tombstone for revoked {id}"
        );
        assert!(
            !encoded.contains(text.as_str()),
            "seed {seed}: {name} still holds the text of revoked {id}"
        );
    }
}

fn snapshots(service: &Service) -> (TargetSnapshot, TargetSnapshot) {
    service
        .index_snapshots()
        .expect("snapshots")
        .expect("in-process indexes")
}

/// What the workload did, as the test saw it.
#[derive(Default)]
struct Ledger {
    /// Accepted, not superseded, not revoked: record id, proposer, text.
    active: Vec<(String, usize, String)>,
    /// Revoked or erased: record id, text.
    gone: Vec<(String, String)>,
    superseded: usize,
    restarts: usize,
}

fn reopen(
    dir: &std::path::Path,
    keys: &[String],
    chaos: &Arc<Chaos>,
) -> (Service, Vec<Credential>) {
    let (service, _) = Service::open(config(dir)).expect("reopen");
    let credentials = keys
        .iter()
        .map(|k| service.authenticate(Some(k)).expect("key survives restart"))
        .collect();
    service
        .set_outbox_faults(Some(chaos.clone() as Arc<dyn OutboxFaults>))
        .expect("faults");
    (service, credentials)
}

fn run_chaos(seed: u64, steps: usize) {
    let (dir, mut service, principals) = world().into_service();
    let keys: Vec<String> = principals.iter().map(|p| p.key.clone()).collect();
    let mut credentials: Vec<Credential> =
        principals.iter().map(|p| p.credential.clone()).collect();
    let chaos = Arc::new(Chaos::new(seed));
    service
        .set_outbox_faults(Some(chaos.clone() as Arc<dyn OutboxFaults>))
        .expect("faults");
    let mut rng = Rng(seed ^ 0xA5A5_A5A5);
    let mut ledger = Ledger::default();
    // The last principal erases itself three quarters of the way through
    // and proposes nothing after that.
    let erased_principal = principals.len() - 1;
    let mut erased = false;

    for step in 0..steps {
        if step == steps * 3 / 4 {
            let erasure = service
                .erase_self(&credentials[erased_principal])
                .expect("erase self");
            assert!(!erasure.revocations.is_empty() || ledger.active.is_empty());
            let (gone, kept): (Vec<_>, Vec<_>) = ledger
                .active
                .drain(..)
                .partition(|(_, who, _)| *who == erased_principal);
            ledger.active = kept;
            ledger
                .gone
                .extend(gone.into_iter().map(|(id, _, text)| (id, text)));
            erased = true;
            continue;
        }
        let roll = rng.below(100);
        let who = loop {
            let p = rng.below(principals.len());
            if !(erased && p == erased_principal) {
                break p;
            }
        };
        match roll {
            0..50 => {
                let text = format!(
                    "Fact {seed}-{step}: the service {} runs on host {}.",
                    rng.below(1000),
                    rng.below(1000)
                );
                let request = workspace_fact(&format!("chaos-{seed}-{step}"), WORKSPACE, &text);
                let response = service
                    .propose(&credentials[who], &request)
                    .expect("propose");
                assert_eq!(response.decision, "accepted", "{response:?}");
                ledger.active.push((response.record_id, who, text));
            }
            50..60 => {
                let mine: Vec<usize> = (0..ledger.active.len())
                    .filter(|i| ledger.active[*i].1 == who)
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let at = mine[rng.below(mine.len())];
                let text = format!(
                    "Fact {seed}-{step}: the service moved to host {}.",
                    rng.below(1000)
                );
                let mut request = workspace_fact(&format!("chaos-{seed}-{step}"), WORKSPACE, &text);
                request.supersedes_record_id = Some(ledger.active[at].0.clone());
                let response = service
                    .propose(&credentials[who], &request)
                    .expect("supersede");
                if response.decision == "accepted" {
                    ledger.active.remove(at);
                    ledger.active.push((response.record_id, who, text));
                    ledger.superseded += 1;
                }
            }
            60..80 => {
                let mine: Vec<usize> = (0..ledger.active.len())
                    .filter(|i| ledger.active[*i].1 == who)
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let at = mine[rng.below(mine.len())];
                let (id, _, text) = ledger.active.remove(at);
                service
                    .revoke(&credentials[who], &id, &RevokeRequest::default())
                    .expect("revoke");
                ledger.gone.push((id, text));
            }
            80..92 => {
                service.reconcile().expect("reconcile under chaos");
            }
            _ => {
                // A restart: whatever the indexes held since the last save
                // is lost, as in a crash.
                drop(service);
                (service, credentials) = reopen(dir.path(), &keys, &chaos);
                ledger.restarts += 1;
            }
        }
    }

    // The chaos ends. Even before any repair, once the outbox is drained
    // nothing revoked is live in an index or has its text there.
    service.set_outbox_faults(None).expect("no faults");
    let drained = service.reconcile().expect("drain the outbox");
    assert_eq!(drained.failures, 0, "seed {seed}: {drained:?}");
    let (lexical, vector) = snapshots(&service);
    for (name, snapshot) in [("lexical", &lexical), ("vector", &vector)] {
        assert_no_trace(seed, name, snapshot, &ledger.gone);
    }

    // One repairing reconcile brings everything in line.
    let repaired = service
        .reconcile_and_repair()
        .expect("reconcile and repair");
    let again = service.reconcile_and_repair().expect("second pass");
    assert_eq!(
        (repaired.failures, repaired.republished),
        (0, 0),
        "seed {seed}: no delivery stays stuck and no acknowledged record is missing \
         from an index, even across restarts: {repaired:?}"
    );
    assert_eq!(
        (again.failures, again.republished, again.ghosts_removed),
        (0, 0, 0),
        "seed {seed}: a second pass finds nothing to do (first: {repaired:?}; second: {again:?})"
    );

    let (live_lexical, live_vector) = snapshots(&service);
    let report = service.reindex(None).expect("reindex");
    let (rebuilt_lexical, rebuilt_vector) = snapshots(&service);

    let live = live_entries(&live_lexical);
    assert_eq!(
        live,
        live_entries(&rebuilt_lexical),
        "seed {seed}: lexical live == rebuilt"
    );
    assert_eq!(
        live_entries(&live_vector),
        live_entries(&rebuilt_vector),
        "seed {seed}: vector live == rebuilt"
    );
    assert_eq!(
        live,
        live_entries(&live_vector),
        "seed {seed}: both targets hold the same records"
    );
    assert_eq!(report.live, live.len(), "seed {seed}: every active record");
    let expected: BTreeSet<&String> = ledger.active.iter().map(|(id, _, _)| id).collect();
    assert_eq!(
        live.keys().collect::<BTreeSet<_>>(),
        expected,
        "seed {seed}: exactly the records the workload left active"
    );

    let all = [
        ("live lexical", &live_lexical),
        ("live vector", &live_vector),
        ("rebuilt lexical", &rebuilt_lexical),
        ("rebuilt vector", &rebuilt_vector),
    ];
    for (name, snapshot) in all {
        assert_no_trace(seed, name, snapshot, &ledger.gone);
    }

    // The rebuilt indexes survive a restart exactly, their vectors restored
    // from the saved embeddings of exactly the live records.
    service.flush().expect("flush");
    let embeddings = EmbeddingSnapshot::load(
        &config(dir.path())
            .data_dir
            .join("index")
            .join(VECTOR_EMBEDDINGS_FILE),
    )
    .expect("saved embeddings");
    assert_eq!(
        embeddings.vectors.keys().collect::<BTreeSet<_>>(),
        live.keys().collect::<BTreeSet<_>>(),
        "seed {seed}: one saved vector per live record"
    );
    drop(service);
    let (service, _) = reopen(dir.path(), &keys, &chaos);
    service.set_outbox_faults(None).expect("no faults");
    let (lexical, vector) = snapshots(&service);
    assert_eq!(lexical, rebuilt_lexical, "seed {seed}: lexical restored");
    assert_eq!(vector, rebuilt_vector, "seed {seed}: vector restored");

    // The workload really did what the test is about.
    assert!(
        !ledger.gone.is_empty(),
        "seed {seed}: something was revoked"
    );
    assert!(
        ledger.superseded > 0,
        "seed {seed}: something was superseded"
    );
    assert!(ledger.restarts > 0, "seed {seed}: the server restarted");
}

#[test]
fn an_index_rebuilt_from_the_store_equals_the_live_one_after_outbox_chaos() {
    for seed in 1..=6 {
        run_chaos(seed, 90);
    }
}
