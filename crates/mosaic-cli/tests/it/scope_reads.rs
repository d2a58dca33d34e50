//! A recall of an unchanged scope reuses the scope's last eligible read
//! (one stamp read instead of every eligible identity), a recall after a
//! change applies the store's changes to it (a read of what changed, not of
//! every identity), and neither is ever stale. The layer under test is the
//! service's read path (`ScopeCache`): each case below changes the answer
//! in one way (time alone, a clock set back, activation, revocation,
//! erasure) and the next recall must see it; a kept read never answers
//! another principal's recall.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::StatusCode;
use mosaic_service::examples::preference;
use mosaic_service::service::ServiceClock;
use serde_json::{Value, json};

use crate::common::{World, counter, send, send_raw, world_with_clock};

/// A clock the test sets.
struct ManualClock(AtomicU64);

impl ServiceClock for ManualClock {
    fn now_unix_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

const T0: u64 = 1_790_000_000_000;

async fn propose(w: &World, label: &str, content: &str, ttl_ms: Option<u64>) -> String {
    let p = &w.principals[0];
    let mut request = preference(label, &p.principal, content, Some(p.consent.clone()));
    request.ttl_ms = ttl_ms;
    let r = crate::common::propose(&w.router, &p.key, &request).await;
    assert_eq!(r["decision"], "accepted", "{r}");
    r["record_id"].as_str().expect("id").to_owned()
}

/// The first principal's recalled ids (a recall with no query: every
/// eligible record up to the limit) and the snapshot identity.
async fn recall(w: &World) -> (Vec<String>, Value) {
    recall_as(w, 0).await
}

/// [`recall`] with the key of principal `at`.
async fn recall_as(w: &World, at: usize) -> (Vec<String>, Value) {
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&w.principals[at].key),
        Some(json!({"max_records": 50})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let ids = serde_json::from_value(r["selected_record_ids"].clone()).expect("ids");
    (sorted(ids), r["snapshot"].clone())
}

/// How many recalls read the store's eligible identities (`read`), how
/// many reused a kept read (`kept`) and how many applied the store's
/// changes to a kept read (`changed`).
async fn scope_reads(w: &World) -> (u64, u64) {
    let (read, kept, _) = scope_reads_changed(w).await;
    (read, kept)
}

/// [`scope_reads`] with the reads made by applying changes.
async fn scope_reads_changed(w: &World) -> (u64, u64, u64) {
    let (_, raw, _) = send_raw(&w.router, "GET", "/metrics", Some(&w.admin_key), None).await;
    let text = String::from_utf8(raw).expect("utf8");
    (
        counter(&text, "mosaic_scope_reads_total{outcome=\"read\"}"),
        counter(&text, "mosaic_scope_reads_total{outcome=\"kept\"}"),
        counter(&text, "mosaic_scope_reads_total{outcome=\"changed\"}"),
    )
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

#[tokio::test]
async fn a_kept_scope_read_never_outlives_a_change() {
    let clock = Arc::new(ManualClock(AtomicU64::new(T0)));
    let w = world_with_clock(clock.clone(), |_| {});
    let short = propose(&w, "short", "Alice is in Lisbon this week", Some(60_000)).await;
    let long = propose(&w, "long", "Alice prefers aisle seats", None).await;
    clock.0.store(T0 + 1_000, Ordering::SeqCst);

    let (first, first_snapshot) = recall(&w).await;
    assert_eq!(first, sorted(vec![short.clone(), long.clone()]));
    let (again, again_snapshot) = recall(&w).await;
    assert_eq!(again, first);
    assert_eq!(
        scope_reads(&w).await,
        (1, 1),
        "the second recall reuses the first read"
    );
    // A kept read is its scope's alone: another principal of the tenant
    // (whose grant names the same workspace) recalls none of it, and reads
    // its own scope.
    let (bob, _) = recall_as(&w, 1).await;
    assert_eq!(bob, Vec::<String>::new());
    assert_eq!(scope_reads(&w).await, (2, 1));
    // The kept read still names the instant of each recall.
    assert_eq!(
        first_snapshot["revocation_generation"],
        again_snapshot["revocation_generation"]
    );

    // Time alone: the short memory expires with no write in between.
    clock.0.store(T0 + 61_000, Ordering::SeqCst);
    let (expired, _) = recall(&w).await;
    assert_eq!(
        expired,
        vec![long.clone()],
        "an expired memory is never recalled"
    );
    assert_eq!(scope_reads(&w).await, (3, 1));

    // A clock set back before the kept read is not trusted to it.
    clock.0.store(T0 + 30_000, Ordering::SeqCst);
    let (back, _) = recall(&w).await;
    assert_eq!(back, sorted(vec![short.clone(), long.clone()]));
    assert_eq!(scope_reads(&w).await, (4, 1));
    clock.0.store(T0 + 61_000, Ordering::SeqCst);

    // Activation of a new memory (the kept read expired with the short
    // memory: a whole read).
    let added = propose(&w, "added", "Alice's flight leaves at nine", None).await;
    let (with_added, _) = recall(&w).await;
    assert_eq!(with_added, sorted(vec![long.clone(), added.clone()]));
    assert_eq!(scope_reads_changed(&w).await, (5, 1, 0));

    // Another: applied to the kept read as a change.
    let seat = propose(&w, "seat", "Alice sits by the window", None).await;
    let (with_seat, _) = recall(&w).await;
    assert_eq!(
        with_seat,
        sorted(vec![long.clone(), added.clone(), seat.clone()])
    );
    assert_eq!(scope_reads_changed(&w).await, (5, 1, 1));
    let (again, _) = recall(&w).await;
    assert_eq!(again, with_seat);
    assert_eq!(scope_reads_changed(&w).await, (5, 2, 1), "and kept");

    // Revocation.
    let (status, r) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{long}/revoke"),
        Some(&w.principals[0].key),
        Some(json!({"authority_ref": "ticket-1"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let (after_revocation, _) = recall(&w).await;
    assert_eq!(
        after_revocation,
        sorted(vec![added.clone(), seat.clone()]),
        "a revoked memory is never recalled"
    );
    let (kept, _) = recall(&w).await;
    assert_eq!(kept, after_revocation);
    // Revocation drives the memory to erasure: the kept reads are
    // forgotten and the scope is read whole, then kept.
    assert_eq!(
        scope_reads_changed(&w).await,
        (6, 3, 1),
        "a whole read after the erasure, then reused"
    );

    // A write after it is a change again.
    let meal = propose(&w, "meal", "Alice eats no meat", None).await;
    let (with_meal, _) = recall(&w).await;
    assert_eq!(with_meal, sorted(vec![added, seat, meal]));
    assert_eq!(scope_reads_changed(&w).await, (6, 3, 2));
}

/// Three of the first principal's preferences, each answered readable;
/// their record ids in the order proposed.
async fn propose_three(w: &World) -> Vec<String> {
    let mut ids = Vec::new();
    for (label, content) in [
        ("first", "Alice prefers aisle seats"),
        ("second", "Alice's flight leaves at nine"),
        ("third", "Alice is allergic to peanuts"),
    ] {
        let p = &w.principals[0];
        let request = preference(label, &p.principal, content, Some(p.consent.clone()));
        let r = crate::common::propose(&w.router, &p.key, &request).await;
        assert_eq!(r["decision"], "accepted", "{r}");
        assert_eq!(r["readable"], true, "{r}");
        ids.push(r["record_id"].as_str().expect("id").to_owned());
    }
    ids
}

/// Decisions within one millisecond are placed a millisecond apart, ahead
/// of the clock (so they keep their order); a record is eligible from its
/// creation instant on. A recall right after the calls, with the clock
/// not yet there, still recalls every record the calls answered as
/// readable. The layer under test is the read context's instant
/// (`ServiceCore::read_instant`): at the bare clock only the first record
/// was recalled.
#[tokio::test]
async fn a_record_answered_readable_is_recalled_while_decisions_run_ahead_of_the_clock() {
    let clock = Arc::new(ManualClock(AtomicU64::new(T0)));
    let w = world_with_clock(clock.clone(), |_| {});
    let ids = propose_three(&w).await;
    // The clock has not moved: the second and third were created ahead
    // of it.
    assert_eq!(clock.0.load(Ordering::SeqCst), T0);
    let (recalled, _) = recall(&w).await;
    assert_eq!(recalled, sorted(ids.clone()));
    // And with a query, ranked among the same eligible set.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&w.principals[0].key),
        Some(json!({"query": "Alice's flight", "max_records": 50})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let ranked: Vec<String> =
        serde_json::from_value(r["selected_record_ids"].clone()).expect("ids");
    assert!(ranked.contains(&ids[1]), "{r}");
    // Another principal still recalls none of them.
    let (bob, _) = recall_as(&w, 1).await;
    assert_eq!(bob, Vec::<String>::new());
}

/// A record's creation instant, as its owner reads it.
async fn created_at(w: &World, id: &str) -> u64 {
    let (status, memory) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{id}"),
        Some(&w.principals[0].key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{memory}");
    memory["record"]["created_at_unix_ms"]
        .as_u64()
        .expect("instant")
}

/// The same after a restart: the service reopens with the clock still
/// behind the instants its previous process decided at, recalls every
/// record, and places its next decision after them. The layer under test
/// is where the decision instants start when the service opens (the
/// store's latest creation instant, `Store::latest_created_at`): from the
/// bare clock, only the first record was recalled and the new record was
/// created before the third.
#[tokio::test]
async fn decisions_ahead_of_the_clock_stay_readable_and_ordered_across_a_restart() {
    let clock = Arc::new(ManualClock(AtomicU64::new(T0)));
    let w = world_with_clock(clock.clone(), |_| {});
    let ids = propose_three(&w).await;
    let third_at = created_at(&w, &ids[2]).await;
    assert!(third_at > T0, "decided ahead of the frozen clock");
    let (dir, service, principals) = w.into_service();
    drop(service);
    let config = crate::common::config(dir.path());
    let (service, _) =
        mosaic_service::Service::open_with_clock(config, clock.clone()).expect("reopen");
    let service = Arc::new(service);
    let w = World {
        _dir: dir,
        router: mosaic_server::app(service.clone()),
        service,
        admin_key: String::new(),
        principals,
    };
    assert_eq!(clock.0.load(Ordering::SeqCst), T0);
    let (recalled, _) = recall(&w).await;
    assert_eq!(recalled, sorted(ids.clone()));
    let fourth = propose(&w, "fourth", "Alice works from Lisbon", None).await;
    assert!(created_at(&w, &fourth).await > third_at);
}
