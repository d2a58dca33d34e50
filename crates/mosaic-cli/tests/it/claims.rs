//! Structured claims live in the store, committed with their record: the
//! conflict scan reads them there (so a restart, or the files of an
//! earlier release, even one that lost a record's export copy, change
//! nothing), and the
//! index messages carry their keys, so `claim_keys` on `POST /v1/recall`
//! finds the claimed record through the server, on first publication and
//! after a rebuild, on the in-process indexes and through `mosaic serve
//! --postgres`.

use std::sync::Arc;

use axum::http::StatusCode;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::{SourceJudgment, StructuredClaim};
use mosaic_server::app;
use mosaic_service::Service;
use mosaic_service::api::ProposeRequest;
use mosaic_service::evidence::{
    CONFLICT_SCANNER_RELEASE, EvidenceKind, Proposition, public_key_hex, sign_evidence,
};
use mosaic_service::examples::workspace_fact;
use serde_json::{Value, json};

use crate::common::{WORKSPACE, config, propose, send, send_raw, world};

const CHECKER: [u8; 32] = [0xc7; 32];
const CHECKER_RELEASE: &str = "claims-checker-v1";
const TENANT: &str = "tenant-a";
const SUBJECT: &str = "service:billing";
const PREDICATE: &str = "owned_by";

/// A workspace fact "billing is owned by `owner`" with the structured
/// claim `service:billing owned_by owner`, its judgment signed by the
/// tenant's registered checker.
fn owner_fact(label: &str, owner: &str) -> ProposeRequest {
    let mut request = workspace_fact(
        label,
        WORKSPACE,
        &format!("The billing service is owned by {owner}"),
    );
    request.source_texts.clear();
    let source = request.sources[0].clone();
    request.claims = vec![StructuredClaim {
        claim_id: "owner".into(),
        subject: SUBJECT.into(),
        predicate: PREDICATE.into(),
        object: owner.into(),
        qualifiers: Default::default(),
        valid_from_unix_ms: 0,
        valid_until_unix_ms: None,
        source_ids: vec![source.source_id.clone()],
    }];
    let content_sha256 = sha256_hex(request.content.as_bytes());
    let proposition = Proposition {
        tenant_id: TENANT,
        content_sha256: &content_sha256,
        claims: &request.claims,
    };
    let judgment = SourceJudgment {
        source_id: source.source_id.clone(),
        claim_id: Some("owner".into()),
        source_content_sha256: source.content_sha256.clone(),
        supports_proposal: true,
        verifier_release: CHECKER_RELEASE.to_owned(),
        judgment_sha256: sha256_hex(format!("judgment/{}", request.content).as_bytes()),
    };
    request.judgments = vec![
        sign_evidence(
            &proposition,
            EvidenceKind::SourceJudgment,
            judgment,
            &CHECKER,
        )
        .expect("signs"),
    ];
    request
}

async fn register_checker(router: &axum::Router, admin_key: &str) {
    let (status, body) = send(
        router,
        "POST",
        &format!("/v1/admin/tenants/{TENANT}/verifiers"),
        Some(admin_key),
        Some(json!({"verifier_release": CHECKER_RELEASE, "public_key_hex": public_key_hex(&CHECKER)})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

fn record_id(response: &Value) -> String {
    assert_eq!(response["decision"], "accepted", "{response}");
    response["record_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no record id: {response}"))
        .to_owned()
}

/// A ranked lexical recall of `query` in the workspace, with `claim_keys`.
async fn recall(router: &axum::Router, key: &str, query: &str, claim_keys: &[&str]) -> Value {
    let (status, body) = send(
        router,
        "POST",
        "/v1/recall",
        Some(key),
        Some(json!({
            "query": query,
            "workspace_id": WORKSPACE,
            "mode": "lexical",
            "claim_keys": claim_keys,
            "max_records": 5,
        })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn selected(body: &Value) -> Vec<String> {
    body["selected_record_ids"]
        .as_array()
        .unwrap_or_else(|| panic!("no selection: {body}"))
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn violations(response: &Value) -> Vec<String> {
    response["violations"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v["violation"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn claim_keys_on_recall_find_the_claimed_record_through_the_server() {
    let w = world();
    register_checker(&w.router, &w.admin_key).await;
    let alice = &w.principals[0];
    let claimed =
        record_id(&propose(&w.router, &alice.key, &owner_fact("owner", "team-payments")).await);
    let plain = record_id(
        &propose(
            &w.router,
            &alice.key,
            &workspace_fact(
                "plain",
                WORKSPACE,
                "The billing service deploys on Tuesdays",
            ),
        )
        .await,
    );
    let key = format!("{SUBJECT}|{PREDICATE}");
    // The claimed fact was prepared and committed under the writer lock
    // (its conflict scan sees every earlier record), the plain one in a
    // group commit: each is timed as such at /metrics.
    let (status, raw, _) = send_raw(&w.router, "GET", "/metrics", Some(&w.admin_key), None).await;
    assert_eq!(status, StatusCode::OK);
    let metrics = String::from_utf8(raw).expect("utf8");
    // [prepare, commit, index_wait, locked]
    assert_eq!(
        crate::common::write_phases(&metrics),
        [1, 1, 2, 1],
        "{metrics}"
    );

    // Words in neither memory: only the claim key can bring one in, and
    // only the claimed one.
    let body = recall(&w.router, &alice.key, "zebra quartz", &[&key]).await;
    assert_eq!(selected(&body), std::slice::from_ref(&claimed), "{body}");
    // The control: the same query without the key finds nothing, and a
    // key no record carries brings nothing in.
    let body = recall(&w.router, &alice.key, "zebra quartz", &[]).await;
    assert!(selected(&body).is_empty(), "{body}");
    let body = recall(
        &w.router,
        &alice.key,
        "zebra quartz",
        &["service:billing|deploy_day"],
    )
    .await;
    assert!(selected(&body).is_empty(), "{body}");
    // A query both memories match: the key ranks the claimed one first,
    // the other is still found by its words, not boosted.
    let body = recall(&w.router, &alice.key, "billing service", &[&key]).await;
    let ids = selected(&body);
    assert_eq!(ids.first(), Some(&claimed), "{body}");
    assert!(ids.contains(&plain), "{body}");
    // Another tenant holding the same claim key sees only its own record.
    let other = &w.principals[2];
    assert_eq!(other.tenant, "tenant-b");
    let body = recall(&w.router, &other.key, "zebra quartz", &[&key]).await;
    assert!(selected(&body).is_empty(), "{body}");

    // A rebuild of the indexes from the store keeps the keys.
    let (status, report) = send(
        &w.router,
        "POST",
        "/v1/admin/reindex",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let body = recall(&w.router, &alice.key, "zebra quartz", &[&key]).await;
    assert_eq!(selected(&body), [claimed], "after reindex: {body}");
}

/// Writes the claim, then stops the service and reopens it on the same
/// data after `damage` changed the files.
async fn claim_then_restart(damage: impl FnOnce(&std::path::Path, &str)) -> Restarted {
    let w = world();
    register_checker(&w.router, &w.admin_key).await;
    let (alice, bob) = (w.principals[0].key.clone(), w.principals[1].key.clone());
    let existing =
        record_id(&propose(&w.router, &alice, &owner_fact("owner", "team-payments")).await);
    let (dir, service, _) = w.into_service();
    drop(service);
    damage(&dir.path().join("data"), &existing);
    let (service, _) = Service::open(config(dir.path())).expect("reopen");
    Restarted {
        dir,
        router: app(Arc::new(service)),
        alice,
        bob,
        existing,
    }
}

/// A service reopened on the data of an earlier one.
struct Restarted {
    dir: tempfile::TempDir,
    router: axum::Router,
    alice: String,
    bob: String,
    /// Alice's record claiming `team-payments`.
    existing: String,
}

/// Bob's contradicting claim is refused, and the server's structured
/// conflict scan (not only the text guard) is what related it to Alice's
/// claim: its observation names her record and her stored claim.
async fn contradiction_is_caught(r: &Restarted) {
    let response = propose(&r.router, &r.bob, &owner_fact("mallory", "team-mallory")).await;
    assert_eq!(response["decision"], "rejected", "{response}");
    assert!(
        violations(&response).iter().any(|v| v == "contradiction"),
        "{response}"
    );
    let structured: Vec<&Value> = response["server_conflicts"]
        .as_array()
        .unwrap_or_else(|| panic!("no server conflicts: {response}"))
        .iter()
        .filter(|o| o["detector_release"] == CONFLICT_SCANNER_RELEASE)
        .collect();
    assert_eq!(structured.len(), 1, "{response}");
    assert_eq!(structured[0]["existing_record_id"], r.existing.as_str());
    assert_eq!(structured[0]["relation"], "contradicts");
    assert_eq!(structured[0]["existing_claim"]["object"], "team-payments");
}

#[tokio::test]
async fn conflict_scan_reads_claims_from_the_store_across_a_restart() {
    let r = claim_then_restart(|_, _| {}).await;
    contradiction_is_caught(&r).await;
}

#[tokio::test]
async fn conflict_scan_and_export_hold_for_a_record_an_earlier_release_kept_no_copy_of() {
    // An earlier release wrote its export copies in a second database after
    // the store's commit: a crash between the two left a record (and, in
    // the same transaction, its claim) without its copy.
    let r = claim_then_restart(|data, record| {
        crate::common::as_released_v10(data);
        let catalog = rusqlite::Connection::open(data.join("catalog.sqlite")).expect("catalog");
        let deleted = catalog
            .execute("DELETE FROM memories WHERE record_id = ?1", [record])
            .expect("delete");
        assert_eq!(deleted, 1, "the catalog had the row before");
    })
    .await;
    contradiction_is_caught(&r).await;
    // The export rebuilds the request from the store: with its claim.
    let (status, raw, _) = send_raw(&r.router, "GET", "/v1/export", Some(&r.alice), None).await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<Value> = String::from_utf8(raw)
        .expect("utf8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("export line"))
        .collect();
    let exported: Vec<&Value> = lines
        .iter()
        .filter(|l| l["data"]["record"]["record_id"] == r.existing.as_str())
        .collect();
    assert_eq!(exported.len(), 1, "{lines:?}");
    let claims = &exported[0]["data"]["request"]["claims"];
    assert_eq!(claims.as_array().map(Vec::len), Some(1), "{claims}");
    assert_eq!(claims[0]["object"], "team-payments");
    assert_eq!(claims[0]["predicate"], PREDICATE);
}

#[tokio::test]
async fn files_of_the_previous_release_open_with_their_claims() {
    // The previous release: store schema 3 (claims only inside the stored
    // gate input), catalog schema 2 with its own claims table, which the
    // crash window left without the record's row.
    let r = claim_then_restart(|data, record| {
        // Keys, tenants and verifiers in the catalog file, store schema 8.
        crate::common::as_released(data);
        let store = rusqlite::Connection::open(data.join("store.sqlite")).expect("store");
        store
            .execute_batch(
                "DROP TABLE record_claims; DELETE FROM meta WHERE key = 'latest_created_at';
                 DROP INDEX idx_records_address; ALTER TABLE records DROP COLUMN address_key;
                 ALTER TABLE records DROP COLUMN address_namespace;
                 PRAGMA user_version = 3;",
            )
            .expect("store downgrade");
        drop(store);
        let catalog = rusqlite::Connection::open(data.join("catalog.sqlite")).expect("catalog");
        catalog
            .execute_batch(
                "CREATE TABLE claims (
                    record_id TEXT NOT NULL, claim_id TEXT NOT NULL, tenant_id TEXT NOT NULL,
                    claim_subject TEXT NOT NULL, claim_predicate TEXT NOT NULL,
                    claim_json TEXT NOT NULL, PRIMARY KEY (record_id, claim_id));
                 PRAGMA user_version = 2;",
            )
            .expect("catalog downgrade");
        catalog
            .execute("DELETE FROM memories WHERE record_id = ?1", [record])
            .expect("delete");
    })
    .await;
    contradiction_is_caught(&r).await;
    // The earlier file, with its copy of the claims, is gone with the
    // upgrade; the store has the claim.
    let data = r.dir.path().join("data");
    assert!(
        !data.join("catalog.sqlite").exists(),
        "no copy of claims is kept"
    );
    let store = rusqlite::Connection::open(data.join("store.sqlite")).expect("store");
    let claims: i64 = store
        .query_row("SELECT count(*) FROM record_claims", [], |r| r.get(0))
        .expect("count");
    assert_eq!(
        claims, 1,
        "the migration restored the claim from the gate input"
    );
    let key = format!("{SUBJECT}|{PREDICATE}");
    let body = recall(&r.router, &r.alice, "zebra quartz", &[&key]).await;
    assert_eq!(selected(&body).len(), 1, "{body}");
}

#[tokio::test]
async fn indexes_reopened_with_other_claim_keys_than_the_store_are_rebuilt() {
    // The index journals hold the record with its claim key; the store no
    // longer has the claim. At open the indexes are checked against the
    // store and rebuilt from it: the key stops matching.
    let r = claim_then_restart(|data, _| {
        let store = rusqlite::Connection::open(data.join("store.sqlite")).expect("store");
        let deleted = store
            .execute("DELETE FROM record_claims", [])
            .expect("delete");
        assert_eq!(deleted, 1, "the store had the claim before");
    })
    .await;
    let key = format!("{SUBJECT}|{PREDICATE}");
    let body = recall(&r.router, &r.alice, "zebra quartz", &[&key]).await;
    assert!(selected(&body).is_empty(), "{body}");
    // The record itself is still found by its words.
    let body = recall(&r.router, &r.alice, "billing team-payments", &[]).await;
    assert_eq!(selected(&body).len(), 1, "{body}");
}

#[test]
fn with_postgres_a_claim_written_through_one_server_stops_a_contradiction_on_another() {
    use crate::postgres::{call, in_schema, serve, urls};
    use crate::postgres_erasure::migrated_schema;

    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "claims_test");
    let dir = tempfile::tempdir().expect("tempdir");
    let app = in_schema(&app_url, &schema.name);
    let one = serve(&dir.path().join("one"), &app);
    let admin = std::fs::read_to_string(dir.path().join("one").join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned();
    let two = serve(&dir.path().join("two"), &app);
    let (status, r) = call(
        &one,
        &admin,
        "POST",
        "/v1/admin/tenants",
        Some(json!({"tenant_id": TENANT})),
    );
    assert_eq!(status, 200, "{r}");
    let (status, r) = call(
        &one,
        &admin,
        "POST",
        &format!("/v1/admin/tenants/{TENANT}/verifiers"),
        Some(
            json!({"verifier_release": CHECKER_RELEASE, "public_key_hex": public_key_hex(&CHECKER)}),
        ),
    );
    assert_eq!(status, 200, "{r}");
    let mut keys = Vec::new();
    for principal in ["alice", "bob"] {
        let (status, r) = call(
            &one,
            &admin,
            "POST",
            "/v1/admin/keys",
            Some(json!({"tenant_id": TENANT, "principal_id": principal,
                        "grant": {"allowed_workspace_ids": [WORKSPACE]}})),
        );
        assert_eq!(status, 200, "{r}");
        keys.push(r["key"].as_str().expect("key").to_owned());
    }
    let propose_on = |server, key: &str, request: &ProposeRequest| {
        let (status, r) = call(
            server,
            key,
            "POST",
            "/v1/memories",
            Some(serde_json::to_value(request).expect("json")),
        );
        assert_eq!(status, 200, "{r}");
        r
    };
    let existing = record_id(&propose_on(
        &one,
        &keys[0],
        &owner_fact("owner", "team-payments"),
    ));
    // The second server reads the claim from the shared store.
    let response = propose_on(&two, &keys[1], &owner_fact("mallory", "team-mallory"));
    assert_eq!(response["decision"], "rejected", "{response}");
    let structured: Vec<&Value> = response["server_conflicts"]
        .as_array()
        .unwrap_or_else(|| panic!("no server conflicts: {response}"))
        .iter()
        .filter(|o| o["detector_release"] == CONFLICT_SCANNER_RELEASE)
        .collect();
    assert_eq!(structured.len(), 1, "{response}");
    assert_eq!(structured[0]["existing_record_id"], existing.as_str());
    assert_eq!(structured[0]["relation"], "contradicts");
    // The claim is in the store's table (under its row security), and no
    // server table holds a copy.
    let mut owner =
        postgres::Client::connect(&in_schema(&owner_url, &schema.name), postgres::NoTls)
            .expect("owner");
    let (claims, catalog_copy): (i64, bool) = {
        let row = owner
            .query_one(
                "SELECT (SELECT count(*) FROM record_claims),
                        to_regclass('mosaic_server_claims') IS NOT NULL",
                &[],
            )
            .expect("lookup");
        (row.get(0), row.get(1))
    };
    assert_eq!((claims, catalog_copy), (1, false));
}

/// The same through a real `mosaic serve --postgres` (the store, the
/// catalog and both indexes in PostgreSQL, run as the application role):
/// the published index rows carry the claim keys and the shared ranker
/// brings the claimed record in by its key alone, only for its tenant.
/// Skips without PostgreSQL (see `postgres.rs`), except under `CI=true`.
#[test]
fn claim_keys_on_recall_find_the_claimed_record_through_a_postgres_server() {
    use crate::postgres::{call, in_schema, serve, urls};
    use crate::postgres_erasure::migrated_schema;
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "claim_keys_test");
    let app = in_schema(&app_url, &schema.name);
    let dir = tempfile::tempdir().expect("tempdir");
    let server = serve(&dir.path().join("data"), &app);
    let admin = std::fs::read_to_string(dir.path().join("data").join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned();
    let mut keys = Vec::new();
    for tenant in [TENANT, "tenant-b"] {
        let (status, r) = call(
            &server,
            &admin,
            "POST",
            "/v1/admin/tenants",
            Some(json!({"tenant_id": tenant,
                        "policy": {"write_guards": {"shared_semantic_evidence": "any"}}})),
        );
        assert_eq!(status, 200, "{r}");
        let (status, r) = call(
            &server,
            &admin,
            "POST",
            &format!("/v1/admin/tenants/{tenant}/verifiers"),
            Some(json!({"verifier_release": CHECKER_RELEASE,
                        "public_key_hex": public_key_hex(&CHECKER)})),
        );
        assert_eq!(status, 200, "{r}");
        let (status, r) = call(
            &server,
            &admin,
            "POST",
            "/v1/admin/keys",
            Some(json!({"tenant_id": tenant, "principal_id": "alice",
                        "grant": {"allowed_workspace_ids": [WORKSPACE]}})),
        );
        assert_eq!(status, 200, "{r}");
        keys.push(r["key"].as_str().expect("key").to_owned());
    }
    let propose = |key: &str, request: &ProposeRequest| -> Value {
        let (status, r) = call(
            &server,
            key,
            "POST",
            "/v1/memories",
            Some(serde_json::to_value(request).expect("json")),
        );
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["readable"], true, "{r}");
        r
    };
    let recall = |key: &str, query: &str, claim_keys: &[&str]| -> Vec<String> {
        let (status, r) = call(
            &server,
            key,
            "POST",
            "/v1/recall",
            Some(
                json!({"query": query, "workspace_id": WORKSPACE, "mode": "lexical",
                        "claim_keys": claim_keys, "max_records": 5}),
            ),
        );
        assert_eq!(status, 200, "{r}");
        selected(&r)
    };
    let claimed = record_id(&propose(&keys[0], &owner_fact("owner", "team-payments")));
    let plain = record_id(&propose(
        &keys[0],
        &workspace_fact(
            "plain",
            WORKSPACE,
            "The billing service deploys on Tuesdays",
        ),
    ));
    let key = format!("{SUBJECT}|{PREDICATE}");
    // Words in neither memory: only the claim key brings one in.
    assert_eq!(
        recall(&keys[0], "zebra quartz", &[&key]),
        std::slice::from_ref(&claimed)
    );
    assert!(recall(&keys[0], "zebra quartz", &[]).is_empty());
    assert!(recall(&keys[0], "zebra quartz", &["service:billing|deploy_day"]).is_empty());
    // Both match the words: the key ranks the claimed one first.
    let ids = recall(&keys[0], "billing service", &[&key]);
    assert_eq!(ids.first(), Some(&claimed), "{ids:?}");
    assert!(ids.contains(&plain), "{ids:?}");
    // Another tenant with the same key in the same database sees nothing.
    assert!(recall(&keys[1], "zebra quartz", &[&key]).is_empty());
    drop(server);
    drop(schema);
}
