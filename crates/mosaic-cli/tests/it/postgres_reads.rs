//! PostgreSQL: ranked recalls take a pooled read connection each and no
//! lock of the service, so one recall stuck inside the database does not
//! hold up another on the same server, and a recall that finds every
//! pooled connection in use for `pg_read_wait_ms` answers 503 `busy`
//! instead of waiting. A recall is stuck on purpose by the schema owner
//! holding an exclusive lock on the search schema's meta table: a hybrid
//! recall reads it, a lexical one does not. Skips like `postgres.rs`
//! without a server.

use std::time::{Duration, Instant};

use mosaic_service::examples::workspace_fact;
use serde_json::{Value, json};

use crate::postgres::{Server, call, in_schema, serve_with, urls};
use crate::postgres_erasure::migrated_schema;

/// One ranked recall's answer: status, body and `Retry-After`, with a
/// client timeout so that a recall that hangs fails the test instead.
fn recall(server_url: &str, key: &str, query: &str, mode: &str) -> (u16, Value, Option<String>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let mut response = agent
        .post(&format!("{server_url}/v1/recall"))
        .header("Authorization", &format!("Bearer {key}"))
        .header("Content-Type", "application/json")
        .send(
            json!({"query": query, "workspace_id": "ws-main", "mode": mode})
                .to_string()
                .as_bytes(),
        )
        .expect("the server answers within 20 s");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = response.body_mut().read_to_string().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::Null),
        retry_after,
    )
}

/// What a recall answered: the selected records and the ranked scores.
fn answer(body: &Value) -> (Value, Value) {
    (
        body["selected_record_ids"].clone(),
        body["relevance_receipt"]["results"].clone(),
    )
}

/// A server on a fresh schema with a tenant, a key and three indexed
/// memories; returns the server, the key and the owner's URL in the schema.
fn seeded(
    owner_url: &str,
    app_url: &str,
    schema: &str,
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (Server, String, String) {
    let app = in_schema(app_url, schema);
    let server = serve_with(dir, &app, env);
    let admin_key = std::fs::read_to_string(dir.join("admin.key"))
        .expect("the server writes the admin key")
        .trim()
        .to_owned();
    let (status, r) = call(
        &server,
        &admin_key,
        "POST",
        "/v1/admin/tenants",
        Some(
            json!({"tenant_id": "tenant-a", "policy": {"write_guards": {"shared_semantic_evidence": "any"}}}),
        ),
    );
    assert_eq!(status, 200, "{r}");
    let (status, r) = call(
        &server,
        &admin_key,
        "POST",
        "/v1/admin/keys",
        Some(json!({"tenant_id": "tenant-a", "principal_id": "alice",
                    "grant": {"allowed_workspace_ids": ["ws-main"]}})),
    );
    assert_eq!(status, 200, "{r}");
    let key = r["key"].as_str().expect("key").to_owned();
    for (label, text) in [
        (
            "pool-1",
            "The staging database is restored every Sunday night",
        ),
        (
            "pool-2",
            "Release notes are drafted by the on-call engineer",
        ),
        ("pool-3", "The staging cluster runs in the Frankfurt region"),
    ] {
        let proposal = workspace_fact(label, "ws-main", text);
        let (status, r) = call(
            &server,
            &key,
            "POST",
            "/v1/memories",
            Some(serde_json::to_value(&proposal).expect("json")),
        );
        assert_eq!(
            (status, r["decision"].as_str(), r["readable"].as_bool()),
            (200, Some("accepted"), Some(true)),
            "{r}"
        );
    }
    (server, key, in_schema(owner_url, schema))
}

/// The owner's transaction holding the search schema's meta table
/// exclusively (every vector or hybrid ranked read checks the stored
/// vector dimension there; a lexical one does not read it, and a kept read
/// reads no vector row), and a hybrid recall started behind it, seen
/// waiting for that lock inside the database (so it holds its pooled
/// connection).
struct StuckRecall {
    owner: postgres::Client,
    recall: std::thread::JoinHandle<(u16, Value, Option<String>)>,
}

fn stuck_hybrid_recall(server: &Server, key: &str, owner_in_schema: &str) -> StuckRecall {
    let mut owner = postgres::Client::connect(owner_in_schema, postgres::NoTls).expect("owner");
    owner
        .batch_execute("BEGIN; LOCK TABLE pgsearch_meta IN ACCESS EXCLUSIVE MODE")
        .expect("lock the meta table");
    let url = server.url.clone();
    let key = key.to_owned();
    let recall = std::thread::spawn(move || {
        recall(
            &url,
            &key,
            "when is the staging database restored",
            "hybrid",
        )
    });
    let mut watcher = postgres::Client::connect(owner_in_schema, postgres::NoTls).expect("owner");
    let started = Instant::now();
    loop {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE wait_event_type = 'Lock' AND query LIKE '%pgsearch_meta%'
                   AND pid <> pg_backend_pid()",
                &[],
            )
            .expect("pg_stat_activity")
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the hybrid recall never reached the locked meta table"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    StuckRecall { owner, recall }
}

impl StuckRecall {
    /// Lets go of the lock; the stuck recall's answer.
    fn release(mut self) -> (u16, Value, Option<String>) {
        self.owner.batch_execute("ROLLBACK").expect("unlock");
        self.recall.join().expect("the stuck recall's thread")
    }
}

/// The layer under test is the service's ranked read path
/// (`PgReads::connection` in `service/postgres.rs`): were a recall to take
/// the index write lock, or a connection shared under a lock, again, the
/// lexical recall below would wait behind the stuck hybrid one and this
/// test would fail (a 503 `request_timeout`, or the client's timeout).
#[test]
fn postgres_ranked_recalls_run_beside_a_recall_stuck_in_the_database() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "pool_side_by_side");
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, key, owner_in_schema) = seeded(
        &owner_url,
        &app_url,
        &schema.name,
        dir.path(),
        &[
            ("MOSAIC_EMBEDDER", "hash"),
            ("MOSAIC_PG_READ_CONNECTIONS", "4"),
        ],
    );
    let lexical_query = "who drafts the release notes";
    let (status, before_lexical, _) = recall(&server.url, &key, lexical_query, "lexical");
    assert_eq!(status, 200, "{before_lexical}");
    let (status, before_hybrid, _) = recall(
        &server.url,
        &key,
        "when is the staging database restored",
        "hybrid",
    );
    assert_eq!(status, 200, "{before_hybrid}");
    assert!(
        before_lexical["context"]
            .as_str()
            .is_some_and(|c| c.contains("on-call engineer")),
        "{before_lexical}"
    );

    let stuck = stuck_hybrid_recall(&server, &key, &owner_in_schema);
    let started = Instant::now();
    for _ in 0..3 {
        let (status, during, _) = recall(&server.url, &key, lexical_query, "lexical");
        assert_eq!(status, 200, "a recall beside the stuck one: {during}");
        assert_eq!(answer(&during), answer(&before_lexical));
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "three lexical recalls took {:?} beside the stuck one",
        started.elapsed()
    );
    let (status, after_hybrid, _) = stuck.release();
    assert_eq!(status, 200, "the stuck recall completes: {after_hybrid}");
    assert_eq!(answer(&after_hybrid), answer(&before_hybrid));
}

/// Negative: with every pooled connection held, a ranked recall waits
/// `pg_read_wait_ms` and answers 503 `busy` with `Retry-After`, stopped by
/// the pool (`PgReads::connection`), never a hang; once the connection is
/// back, recalls answer again.
#[test]
fn postgres_ranked_recall_answers_busy_when_the_read_pool_stays_in_use() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "pool_busy");
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, key, owner_in_schema) = seeded(
        &owner_url,
        &app_url,
        &schema.name,
        dir.path(),
        &[
            ("MOSAIC_EMBEDDER", "hash"),
            ("MOSAIC_PG_READ_CONNECTIONS", "1"),
            ("MOSAIC_PG_READ_WAIT_MS", "300"),
        ],
    );
    let query = "who drafts the release notes";
    let (status, before, _) = recall(&server.url, &key, query, "lexical");
    assert_eq!(status, 200, "{before}");

    let stuck = stuck_hybrid_recall(&server, &key, &owner_in_schema);
    let started = Instant::now();
    let (status, refused, retry_after) = recall(&server.url, &key, query, "lexical");
    let waited = started.elapsed();
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (503, Some("busy")),
        "{refused}"
    );
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(5),
        "the busy answer came after {waited:?}"
    );
    let (status, stuck_answer, _) = stuck.release();
    assert_eq!(status, 200, "{stuck_answer}");
    let (status, after, _) = recall(&server.url, &key, query, "lexical");
    assert_eq!(status, 200, "{after}");
    assert_eq!(answer(&after), answer(&before));
}

/// The admin key the server of `dir` wrote at its first start.
fn admin_key(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("admin.key"))
        .expect("the server writes the admin key")
        .trim()
        .to_owned()
}

/// A gauge's value in the server's `/metrics` text (read with the admin
/// key), if it is there.
pub(crate) fn gauge(server_url: &str, admin_key: &str, name: &str) -> Option<f64> {
    let mut response = ureq::get(&format!("{server_url}/metrics"))
        .header("Authorization", &format!("Bearer {admin_key}"))
        .call()
        .expect("the metrics answer");
    let text = response.body_mut().read_to_string().expect("body");
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// The server's gauges of its kept reads follow them: a ranked recall
/// keeps a read of the tenant, and an erasure this server carries out
/// drops every kept read of the tenant (the outbox's erase calls
/// `KeptReads::forget_tenant`), so no row or vector of the erased records
/// stays in memory. Layer: the outbox's erase delivery. The gauges name
/// no tenant.
#[test]
fn postgres_kept_read_gauges_rise_with_a_recall_and_drop_with_an_erasure() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "kept_read_gauges");
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, key, _) = seeded(
        &owner_url,
        &app_url,
        &schema.name,
        dir.path(),
        &[("MOSAIC_EMBEDDER", "hash")],
    );
    let admin = admin_key(dir.path());
    let tenants = "mosaic_pg_kept_read_tenants";
    let bytes = "mosaic_pg_kept_read_bytes";
    assert_eq!(gauge(&server.url, &admin, tenants), Some(0.0));
    assert_eq!(gauge(&server.url, &admin, bytes), Some(0.0));
    let (status, body, _) = recall(&server.url, &key, "staging database Sunday", "hybrid");
    assert_eq!(status, 200, "{body}");
    assert!(
        !body["selected_record_ids"]
            .as_array()
            .expect("ids")
            .is_empty(),
        "{body}"
    );
    assert_eq!(gauge(&server.url, &admin, tenants), Some(1.0));
    assert!(gauge(&server.url, &admin, bytes).is_some_and(|b| b > 0.0));
    let mut response = ureq::get(&format!("{}/metrics", server.url))
        .header("Authorization", &format!("Bearer {admin}"))
        .call()
        .expect("metrics");
    let text = response.body_mut().read_to_string().expect("body");
    assert!(!text.contains("tenant-a"), "a tenant id in the metrics");

    let (status, erased) = call(&server, &key, "POST", "/v1/erasure", Some(json!({})));
    assert_eq!(status, 200, "{erased}");
    assert_eq!(erased["complete"], true, "{erased}");
    assert_eq!(gauge(&server.url, &admin, tenants), Some(0.0));
    assert_eq!(gauge(&server.url, &admin, bytes), Some(0.0));
}

/// A kept read no read uses is dropped after `pg_kept_read_idle_ms`, by
/// the reconciler's pass, with no further read of the tenant: a server
/// that did not carry out an erasure holds the erased record's terms and
/// vectors no longer than that. Layer: `KeptReads::drop_idle`, run by
/// every reconcile pass (and every read).
#[test]
fn postgres_a_kept_read_left_idle_is_dropped() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "kept_read_idle");
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, key, _) = seeded(
        &owner_url,
        &app_url,
        &schema.name,
        dir.path(),
        &[
            ("MOSAIC_EMBEDDER", "hash"),
            ("MOSAIC_PG_KEPT_READ_IDLE_MS", "1500"),
            ("MOSAIC_RECONCILE_INTERVAL_MS", "200"),
        ],
    );
    let admin = admin_key(dir.path());
    let tenants = "mosaic_pg_kept_read_tenants";
    let (status, body, _) = recall(&server.url, &key, "staging database Sunday", "hybrid");
    assert_eq!(status, 200, "{body}");
    let kept_at = Instant::now();
    assert_eq!(gauge(&server.url, &admin, tenants), Some(1.0));
    let dropped = loop {
        let value = gauge(&server.url, &admin, tenants);
        if value == Some(0.0) {
            break kept_at.elapsed();
        }
        assert_eq!(value, Some(1.0));
        assert!(
            kept_at.elapsed() < Duration::from_secs(20),
            "the idle kept read was not dropped"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(dropped >= Duration::from_millis(1_500), "{dropped:?}");
    // Read again, the tenant is kept again.
    let (status, again, _) = recall(&server.url, &key, "staging database Sunday", "hybrid");
    assert_eq!(status, 200, "{again}");
    assert_eq!(answer(&again), answer(&body));
    assert_eq!(gauge(&server.url, &admin, tenants), Some(1.0));
}
