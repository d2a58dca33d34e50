//! Degraded activation: with the vector index optional, a record whose
//! vector publication fails (the embedding endpoint is down) becomes
//! readable through the lexical index, the store's activation event names
//! the omitted index and a ranked read says it ran without it; without that
//! policy the same failure keeps the record unreadable (the layer that stops
//! it: the store's activation gate).

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use mosaic_index::RetrievalMode;
use mosaic_service::api::RecallRequest;
use mosaic_service::examples::workspace_fact;
use mosaic_service::{Service, VECTOR_TARGET};
use mosaic_store::audit::AuditKind;
use mosaic_store::{PostgresStore, SqliteStore, Store, StoreConfig};
use serde_json::Value;

use crate::common::{WORKSPACE, World, world_with};
use crate::embedder::{FakeEndpoint, close, fake_endpoint};
use crate::postgres::{Schema, in_schema, urls};

fn propose(service: &Service, key: &str, label: &str, content: &str) -> String {
    let credential = service.authenticate(Some(key)).expect("key");
    let response = service
        .propose(&credential, &workspace_fact(label, WORKSPACE, content))
        .expect("propose");
    let value = serde_json::to_value(response).expect("json");
    assert_eq!(value["decision"], "accepted", "{value}");
    value["record_id"].as_str().expect("record id").to_owned()
}

fn recall(service: &Service, key: &str, query: Option<&str>) -> Result<Value, String> {
    let credential = service.authenticate(Some(key)).expect("key");
    service
        .recall(
            &credential,
            &RecallRequest {
                workspace_id: Some(WORKSPACE.to_owned()),
                query: query.map(str::to_owned),
                mode: Some(RetrievalMode::Hybrid),
                ..RecallRequest::default()
            },
        )
        .map(|r| serde_json::to_value(r).expect("json"))
        .map_err(|e| e.to_string())
}

fn selected(recalled: &Value) -> Vec<String> {
    recalled["selected_record_ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_str().expect("id").to_owned())
        .collect()
}

/// A service on the HTTP embedder (on PostgreSQL when `postgres` names a
/// database) whose endpoint then goes down, and one memory proposed during
/// the outage.
fn proposed_during_outage(
    vector_index_optional: bool,
    postgres: Option<String>,
) -> (FakeEndpoint, World, String, String) {
    let endpoint = fake_endpoint();
    let w = world_with(|c| {
        endpoint.configure(c);
        c.vector_index_optional = vector_index_optional;
        c.postgres = postgres;
    });
    let key = w.principals[0].key.clone();
    endpoint.up.store(false, Ordering::SeqCst);
    let record = propose(
        &w.service,
        &key,
        "esc",
        "Escalations go to the on-call lead",
    );
    (endpoint, w, key, record)
}

/// With the vector index optional: the record proposed during the outage
/// is readable, a ranked read runs lexically and says so; after recovery
/// the queued vector publication lands and reads are whole again. Returns
/// the closed world's directory.
fn degrade_then_recover(
    endpoint: &FakeEndpoint,
    w: World,
    key: &str,
    record: &str,
) -> tempfile::TempDir {
    let plain = recall(&w.service, key, None).expect("selection without a query");
    assert_eq!(selected(&plain), vec![record.to_owned()]);
    let ranked = recall(&w.service, key, Some("who takes escalations")).expect("degraded read");
    assert_eq!(selected(&ranked), vec![record.to_owned()], "{ranked}");
    assert_eq!(
        ranked["omitted_indexes"],
        serde_json::json!([VECTOR_TARGET])
    );
    let metrics = w.service.metrics().render();
    assert!(
        metrics.contains("mosaic_degraded_activations_total{target=\"vector\"} 1"),
        "{metrics}"
    );

    endpoint.up.store(true, Ordering::SeqCst);
    let report = w.service.reconcile().expect("reconcile");
    assert!(report.published >= 1, "{report:?}");
    // No word in common with the memory: only the vectors link them.
    let whole = recall(&w.service, key, Some("whom should I page tonight")).expect("read");
    assert_eq!(selected(&whole), vec![record.to_owned()], "{whole}");
    assert!(whole.get("omitted_indexes").is_none(), "{whole}");
    let (dir, _, _) = close(w);
    dir
}

/// The store's activation event names the omitted index, and nothing is
/// left queued for it.
fn assert_activation_recorded_the_omission(store: &mut dyn Store, record: &str) {
    let trail = store.record_audit_trail(record).expect("trail");
    let activation = trail
        .iter()
        .find(|e| e.kind == AuditKind::RecordActivated)
        .expect("activation event");
    assert_eq!(activation.payload["degraded"], serde_json::json!(true));
    assert_eq!(
        activation.payload["omitted_targets"],
        serde_json::json!([VECTOR_TARGET])
    );
    assert!(
        store
            .pending_outbox(VECTOR_TARGET, 10)
            .expect("outbox")
            .is_empty()
    );
}

#[test]
fn an_optional_vector_index_that_fails_degrades_activation_and_says_so() {
    let (endpoint, w, key, record) = proposed_during_outage(true, None);
    let dir = degrade_then_recover(&endpoint, w, &key, &record);
    let mut store = SqliteStore::open(
        dir.path().join("data").join("store.sqlite"),
        StoreConfig::default(),
    )
    .expect("store");
    assert_activation_recorded_the_omission(&mut store, &record);
}

#[test]
fn degraded_activation_and_reads_on_postgres() {
    let Some((owner_url, _)) = urls() else {
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let schema = Schema {
        name: format!("degraded_test_{}_{nanos}", std::process::id()),
        owner_url: owner_url.clone(),
    };
    let mut owner = postgres::Client::connect(&owner_url, postgres::NoTls).expect("owner");
    owner
        .batch_execute(&format!("CREATE SCHEMA \"{}\"", schema.name))
        .expect("schema");
    drop(owner);
    let url = in_schema(&owner_url, &schema.name);
    let (endpoint, w, key, record) = proposed_during_outage(true, Some(url.clone()));
    let _dir = degrade_then_recover(&endpoint, w, &key, &record);
    let mut store = PostgresStore::connect(&url, StoreConfig::default()).expect("store");
    assert_activation_recorded_the_omission(&mut store, &record);
}

#[test]
fn without_the_policy_a_failed_vector_index_keeps_the_record_unreadable() {
    let (endpoint, w, key, record) = proposed_during_outage(false, None);
    let plain = recall(&w.service, &key, None).expect("selection without a query");
    assert!(selected(&plain).is_empty(), "{plain}");
    // No silent degradation of reads either.
    assert!(recall(&w.service, &key, Some("who takes escalations")).is_err());
    let report = w.service.reconcile().expect("reconcile");
    assert!(
        report.failures >= 1 && report.degraded_activations == 0,
        "{report:?}"
    );

    endpoint.up.store(true, Ordering::SeqCst);
    w.service.reconcile().expect("reconcile");
    let plain = recall(&w.service, &key, None).expect("read");
    assert_eq!(selected(&plain), vec![record]);
}
