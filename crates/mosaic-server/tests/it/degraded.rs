//! Degraded activation: with the vector index optional, a record whose
//! vector publication fails (the embedding endpoint is down) becomes
//! readable through the lexical index, the store's activation event names
//! the omitted index and a ranked read says it ran without it; without that
//! policy the same failure keeps the record unreadable (the layer that stops
//! it: the store's activation gate).

use std::sync::atomic::Ordering;

use mosaic_index::RetrievalMode;
use mosaic_server::api::RecallRequest;
use mosaic_server::embedder::{EmbedderKind, Secret};
use mosaic_server::examples::workspace_fact;
use mosaic_server::{Service, VECTOR_TARGET};
use mosaic_store::audit::AuditKind;
use mosaic_store::{SqliteStore, Store, StoreConfig};
use serde_json::Value;

use crate::common::{WORKSPACE, World, world_with};
use crate::embedder::{FakeEndpoint, close, fake_endpoint};

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

/// A service on the HTTP embedder whose endpoint then goes down, and one
/// memory proposed during the outage.
fn proposed_during_outage(vector_index_optional: bool) -> (FakeEndpoint, World, String, String) {
    let endpoint = fake_endpoint();
    let url = endpoint.url.clone();
    let w = world_with(move |c| {
        c.embedder = EmbedderKind::Http;
        c.embedder_url = Some(url);
        c.embedder_model = Some("fake-embed".to_owned());
        c.embedding_dim = 8;
        c.embedder_api_key = Some(Secret::new("sk-test-key"));
        c.vector_index_optional = vector_index_optional;
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

#[test]
fn an_optional_vector_index_that_fails_degrades_activation_and_says_so() {
    // The vector publication fails; the record activates on the lexical
    // index alone.
    let (endpoint, w, key, record) = proposed_during_outage(true);
    let plain = recall(&w.service, &key, None).expect("selection without a query");
    assert_eq!(selected(&plain), vec![record.clone()]);
    // A ranked read cannot embed its query: it runs on the lexical index
    // and says which index it ran without.
    let ranked = recall(&w.service, &key, Some("who takes escalations")).expect("degraded read");
    assert_eq!(selected(&ranked), vec![record.clone()], "{ranked}");
    assert_eq!(
        ranked["omitted_indexes"],
        serde_json::json!([VECTOR_TARGET])
    );
    let metrics = w.service.metrics().render();
    assert!(
        metrics.contains("mosaic_degraded_activations_total{target=\"vector\"} 1"),
        "{metrics}"
    );

    // The endpoint recovers: the queued vector publication is applied and
    // reads are whole again.
    endpoint.up.store(true, Ordering::SeqCst);
    let report = w.service.reconcile().expect("reconcile");
    assert!(report.published >= 1, "{report:?}");
    let whole = recall(&w.service, &key, Some("whom should I page tonight")).expect("read");
    assert_eq!(selected(&whole), vec![record.clone()], "{whole}");
    assert!(whole.get("omitted_indexes").is_none(), "{whole}");

    // The store's activation event records the omission.
    let (_dir, config, _) = close(w);
    let mut store = SqliteStore::open(config.data_dir.join("store.sqlite"), StoreConfig::default())
        .expect("store");
    let trail = store.record_audit_trail(&record).expect("trail");
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
fn without_the_policy_a_failed_vector_index_keeps_the_record_unreadable() {
    let (endpoint, w, key, record) = proposed_during_outage(false);
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
