//! With `--postgres`, the store, the lexical and vector indexes and the
//! server catalog all live in one PostgreSQL database, so two `mosaic
//! serve` processes on different ports share keys, tenants and memories:
//! each recalls what the other wrote.
//!
//! The server comes from the environment (`scripts/with-postgres.sh`):
//! `MOSAIC_TEST_POSTGRES_URL` (the owner, for the migration) and
//! `MOSAIC_TEST_POSTGRES_APP_URL` (the application role the servers run
//! as). Without them the test prints a `skipped:` line and passes, except
//! under `CI=true`, where it fails.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use mosaic_service::examples::workspace_fact;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic");

/// Owner and application-role URLs, or `None` (skip).
pub(crate) fn urls() -> Option<(String, String)> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let under_ci = var("CI").is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    match (
        var("MOSAIC_TEST_POSTGRES_URL"),
        var("MOSAIC_TEST_POSTGRES_APP_URL"),
    ) {
        (Some(owner), Some(app)) => Some((owner, app)),
        (None, None) if !under_ci => {
            crate::skip::skipped(
                "the service's PostgreSQL tests (mosaic-cli)",
                "MOSAIC_TEST_POSTGRES_URL is not set",
                "run the command under scripts/with-postgres.sh, without MOSAIC_SKIP_POSTGRES=1 (it starts a throwaway PostgreSQL)",
            );
            None
        }
        (None, None) => panic!(
            "CI=true but MOSAIC_TEST_POSTGRES_URL is not set: run the tests under scripts/with-postgres.sh"
        ),
        _ => {
            panic!("set both MOSAIC_TEST_POSTGRES_URL and MOSAIC_TEST_POSTGRES_APP_URL, or neither")
        }
    }
}

/// `url` with its search path set to `schema` (then `public`, where the
/// vector extension lives).
pub(crate) fn in_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-c%20search_path%3D{schema}%2Cpublic")
}

/// One schema, dropped with everything in it.
pub(crate) struct Schema {
    pub(crate) name: String,
    pub(crate) owner_url: String,
}

impl Drop for Schema {
    fn drop(&mut self) {
        let dropped =
            postgres::Client::connect(&self.owner_url, postgres::NoTls).and_then(|mut c| {
                c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name))
            });
        if let Err(e) = dropped {
            eprintln!("could not drop test schema {}: {e}", self.name);
        }
    }
}

pub(crate) struct Server {
    child: Child,
    pub(crate) url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Sends SIGTERM and waits (at most 30 s) for the server to exit.
    pub(crate) fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the server did not stop on SIGTERM"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

pub(crate) fn serve(data_dir: &std::path::Path, postgres: &str) -> Server {
    serve_with(data_dir, postgres, &[("MOSAIC_EMBEDDER", "hash")])
}

/// `mosaic serve --postgres` with these environment variables (the
/// embedder's settings, say).
pub(crate) fn serve_with(
    data_dir: &std::path::Path,
    postgres: &str,
    env: &[(&str, &str)],
) -> Server {
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--postgres", postgres])
        .envs(env.iter().copied())
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().expect("a line").expect("utf8");
    let url = first.trim_start_matches("mosaic: serving on ").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    // Keep reading stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Server { child, url }
}

pub(crate) fn call(
    server: &Server,
    key: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}{path}", server.url);
    let auth = format!("Bearer {key}");
    let result = match (method, body) {
        ("GET", _) => agent.get(&url).header("Authorization", &auth).call(),
        ("DELETE", _) => agent.delete(&url).header("Authorization", &auth).call(),
        ("PUT", Some(b)) => agent
            .put(&url)
            .header("Authorization", &auth)
            .header("Content-Type", "application/json")
            .send(b.to_string().as_bytes()),
        (_, Some(b)) => agent
            .post(&url)
            .header("Authorization", &auth)
            .header("Content-Type", "application/json")
            .send(b.to_string().as_bytes()),
        (_, None) => agent.post(&url).header("Authorization", &auth).send_empty(),
    };
    let mut response = result.expect("server answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn recalled(server: &Server, key: &str, query: &str) -> String {
    let (status, r) = call(
        server,
        key,
        "POST",
        "/v1/recall",
        Some(json!({"query": query, "workspace_id": "ws-main"})),
    );
    assert_eq!(status, 200, "{r}");
    r["context"].as_str().unwrap_or("").to_owned()
}

/// A fresh schema, migrated by the owner with `mosaic migrate`, that the
/// application role may use; dropped with the value.
pub(crate) fn migrated_schema(owner_url: &str, app_url: &str) -> Schema {
    let app_role = app_url
        .parse::<postgres::Config>()
        .ok()
        .and_then(|c| c.get_user().map(str::to_owned))
        .expect("MOSAIC_TEST_POSTGRES_APP_URL names a user");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let schema = Schema {
        name: format!("server_test_{}_{nanos}", std::process::id()),
        owner_url: owner_url.to_owned(),
    };
    let mut owner = postgres::Client::connect(owner_url, postgres::NoTls).expect("owner");
    owner
        .batch_execute(&format!("CREATE SCHEMA \"{}\"", schema.name))
        .expect("schema");
    drop(owner);
    let migrated = Command::new(BIN)
        .args(["migrate", "--postgres", &in_schema(owner_url, &schema.name)])
        .args(["--app-role", &app_role])
        .env("MOSAIC_EMBEDDER", "hash")
        .output()
        .expect("run mosaic migrate");
    assert!(
        migrated.status.success(),
        "mosaic migrate as the owner: {}",
        String::from_utf8_lossy(&migrated.stderr)
    );

    schema
}

#[test]
fn two_servers_on_one_database_recall_what_either_wrote() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url);
    let dir = tempfile::tempdir().expect("tempdir");
    let app = in_schema(&app_url, &schema.name);
    // The deployment's servers share one receipt-signing key file.
    let key_file = dir.path().join("signing-keys.json");
    let env = [
        ("MOSAIC_EMBEDDER", "hash"),
        (
            "MOSAIC_SIGNING_KEY_FILE",
            key_file.to_str().expect("utf-8 path"),
        ),
    ];
    let one = serve_with(&dir.path().join("one"), &app, &env);
    let admin_key = std::fs::read_to_string(dir.path().join("one").join("admin.key"))
        .expect("the first server writes the admin key")
        .trim()
        .to_owned();
    let two = serve_with(&dir.path().join("two"), &app, &env);
    assert!(
        !dir.path().join("two").join("admin.key").exists(),
        "the second server shares the first one's admin key"
    );

    // Set up through server one; the key works on server two.
    let (status, r) = call(
        &one,
        &admin_key,
        "POST",
        "/v1/admin/tenants",
        // Self-quoted workspace facts allowed (the default needs a verifier).
        Some(
            json!({"tenant_id": "tenant-a", "policy": {"write_guards": {"shared_semantic_evidence": "any"}}}),
        ),
    );
    assert_eq!(status, 200, "{r}");
    let (status, r) = call(
        &two,
        &admin_key,
        "POST",
        "/v1/admin/keys",
        Some(json!({"tenant_id": "tenant-a", "principal_id": "alice",
                    "grant": {"allowed_workspace_ids": ["ws-main"]}})),
    );
    assert_eq!(status, 200, "{r}");
    let key = r["key"].as_str().expect("key").to_owned();

    // Server one writes, server two recalls it, and the other way round.
    let first = workspace_fact(
        "pg-one",
        "ws-main",
        "The staging database is restored every Sunday",
    );
    let (status, r) = call(
        &one,
        &key,
        "POST",
        "/v1/memories",
        Some(serde_json::to_value(&first).expect("json")),
    );
    assert_eq!(
        (status, r["decision"].as_str()),
        (200, Some("accepted")),
        "{r}"
    );
    let second = workspace_fact(
        "pg-two",
        "ws-main",
        "Release notes are drafted by the on-call engineer",
    );
    let (status, r) = call(
        &two,
        &key,
        "POST",
        "/v1/memories",
        Some(serde_json::to_value(&second).expect("json")),
    );
    assert_eq!(
        (status, r["decision"].as_str()),
        (200, Some("accepted")),
        "{r}"
    );
    let second_id = r["record_id"].as_str().expect("id").to_owned();

    let context = recalled(&two, &key, "when is the staging database restored");
    assert!(
        context.contains("restored every Sunday"),
        "server two recalls server one's memory: {context}"
    );
    let context = recalled(&one, &key, "who drafts the release notes");
    assert!(
        context.contains("drafted by the on-call engineer"),
        "server one recalls server two's memory: {context}"
    );

    // Both sign with the shared key: server two's receipts verify against
    // server one's published keys, offline and through its verify route.
    assert!(!dir.path().join("one").join("signing-keys.json").exists());
    let (status, recall) = call(
        &two,
        &key,
        "POST",
        "/v1/recall",
        Some(json!({"query": "staging database", "workspace_id": "ws-main"})),
    );
    assert_eq!(status, 200, "{recall}");
    let (status, keys) = call(&one, &key, "GET", "/v1/keys", None);
    assert_eq!(status, 200, "{keys}");
    let verifying =
        mosaic_service::signing::parse_public_keys(&keys.to_string()).expect("the keys parse");
    let verdict = mosaic_service::receipts::verify_document(&recall, &verifying).expect("a recall");
    assert!(verdict.valid, "{verdict:?}");
    let (status, v) = call(
        &one,
        &key,
        "POST",
        "/v1/verify",
        Some(json!({
            "kind": "recall",
            "selection_receipt": recall["selection_receipt"],
            "relevance_receipt": recall["relevance_receipt"],
            "selection_signature": recall["selection_signature"],
            "relevance_signature": recall["relevance_signature"],
        })),
    );
    assert_eq!(
        (status, &v),
        (200, &json!({"valid": true, "problem": null}))
    );

    // A revocation through one server is honoured by the other at once,
    // even where the other kept its last read of the scope (the store's
    // change stamp, in the shared database, moved).
    let context = recalled(&two, &key, "who drafts the release notes");
    assert!(
        context.contains("drafted by the on-call engineer"),
        "{context}"
    );
    let (status, r) = call(
        &one,
        &key,
        "POST",
        &format!("/v1/memories/{second_id}/revoke"),
        Some(json!({})),
    );
    assert_eq!(status, 200, "{r}");
    let context = recalled(&two, &key, "who drafts the release notes");
    assert!(
        !context.contains("on-call engineer"),
        "revoked memory is never recalled: {context}"
    );
    let (status, r) = call(
        &two,
        &key,
        "GET",
        &format!("/v1/memories/{second_id}/deletion"),
        None,
    );
    assert_eq!(status, 200, "{r}");

    // An application key made through one server acts for its users on the
    // other (the bounds live in the shared catalog).
    let (status, r) = call(
        &one,
        &admin_key,
        "POST",
        "/v1/admin/application-keys",
        Some(
            json!({"tenant_id": "tenant-a", "application_id": "app1", "users": ["app1:*"],
                    "grant": {"allowed_workspace_ids": ["ws-main"]}}),
        ),
    );
    assert_eq!(status, 200, "{r}");
    let app_key = r["key"].as_str().expect("key").to_owned();
    let as_user = |user: &str| -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent
            .post(&format!("{}/v1/recall", two.url))
            .header("Authorization", &format!("Bearer {app_key}"))
            .header("X-Mosaic-User", user)
            .header("Content-Type", "application/json")
            .send(json!({"query": "staging database"}).to_string().as_bytes())
            .expect("server answers");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    };
    let (status, r) = as_user("app1:ana");
    assert_eq!(status, 200, "{r}");
    assert!(
        r["context"]
            .as_str()
            .unwrap_or("")
            .contains("restored every Sunday"),
        "an app user reads the workspace it was granted: {r}"
    );
    let (status, r) = as_user("alice");
    assert_eq!(status, 403, "{r}");

    // A policy change hides the record with a reason; carrying it through
    // one server makes it readable on the other.
    let (status, r) = call(
        &one,
        &admin_key,
        "POST",
        "/v1/admin/tenants/tenant-a/policy/carry",
        None,
    );
    assert_eq!((status, r["examined"].as_u64()), (200, Some(0)), "{r}");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let put = agent
        .put(&format!("{}/v1/admin/tenants/tenant-a/policy", one.url))
        .header("Authorization", &format!("Bearer {admin_key}"))
        .header("Content-Type", "application/json")
        .send(
            json!({"max_ttl_ms": 31_536_000_000_u64 / 2})
                .to_string()
                .as_bytes(),
        )
        .expect("server answers");
    assert_eq!(put.status().as_u16(), 200);
    let (status, r) = call(
        &two,
        &key,
        "POST",
        "/v1/recall",
        Some(json!({"workspace_id": "ws-main"})),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["drop_reasons"]["policy_mismatch"], 1, "{r}");
    let (status, r) = call(
        &one,
        &admin_key,
        "POST",
        "/v1/admin/tenants/tenant-a/policy/carry",
        None,
    );
    assert_eq!((status, r["accepted"].as_u64()), (200, Some(1)), "{r}");
    let context = recalled(&two, &key, "when is the staging database restored");
    assert!(context.contains("restored every Sunday"), "{context}");

    // A key disabled through one server stops working there at once, and on
    // the other, which authenticated it a moment ago (its key cache), within
    // the cache's second.
    let (status, me) = call(&two, &key, "GET", "/v1/whoami", None);
    assert_eq!(status, 200, "{me}");
    let key_id = me["credential"]["key_id"]
        .as_str()
        .expect("key id")
        .to_owned();
    let (status, r) = call(
        &one,
        &admin_key,
        "DELETE",
        &format!("/v1/admin/keys/{key_id}"),
        None,
    );
    assert_eq!(status, 200, "{r}");
    let disabled_at = std::time::Instant::now();
    assert_eq!(call(&one, &key, "GET", "/v1/whoami", None).0, 401);
    while call(&two, &key, "GET", "/v1/whoami", None).0 != 401 {
        assert!(
            disabled_at.elapsed() < std::time::Duration::from_millis(1_800),
            "the disabled key still works on the other server"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // A server whose embedder differs from the one the database's vectors
    // were made with refuses to start.
    let mut owner =
        postgres::Client::connect(&in_schema(&owner_url, &schema.name), postgres::NoTls)
            .expect("owner");
    let other = json!({"kind": "hash", "release": "another-embedder-v1", "dimension": 256});
    owner
        .execute(
            "UPDATE server_settings SET value = $1 WHERE name = 'embedder'",
            &[&other.to_string()],
        )
        .expect("pretend another embedder made the vectors");
    let refused = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--postgres", &app])
        .arg("--data-dir")
        .arg(dir.path().join("three"))
        .env("MOSAIC_EMBEDDER", "hash")
        .output()
        .expect("run serve");
    assert!(
        !refused.status.success(),
        "a server with another embedder must not start"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("same embedder"), "{stderr}");

    // SIGTERM stops a PostgreSQL server cleanly (it used to abort: a
    // synchronous client closed inside the tokio runtime).
    for server in [one, two] {
        let status = server.terminate();
        assert!(status.success(), "a clean stop on SIGTERM: {status:?}");
    }
}

/// The value of a counter in a server's `/metrics`, read with the admin
/// key (0 when absent).
fn counter(server: &Server, admin_key: &str, series: &str) -> u64 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let text = agent
        .get(&format!("{}/metrics", server.url))
        .header("Authorization", &format!("Bearer {admin_key}"))
        .call()
        .and_then(|mut r| r.body_mut().read_to_string())
        .unwrap_or_else(|e| panic!("metrics: {e}"));
    text.lines()
        .find_map(|line| line.strip_prefix(series))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// A server keeps a principal's policy and grant while the shared
/// database's change stamp stays the one it read them at: a grant or a
/// policy changed through another server binds this server's very next
/// recall, though its last one used the kept read.
#[test]
fn a_grant_or_policy_changed_through_one_server_binds_the_others_next_recall() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let app = in_schema(&app_url, &schema.name);
    let one = serve(&dir.path().join("one"), &app);
    let admin_key = std::fs::read_to_string(dir.path().join("one").join("admin.key"))
        .unwrap_or_else(|e| panic!("the first server writes the admin key: {e}"))
        .trim()
        .to_owned();
    let two = serve(&dir.path().join("two"), &app);
    let (status, r) = call(
        &one,
        &admin_key,
        "POST",
        "/v1/admin/tenants",
        Some(
            json!({"tenant_id": "tenant-a", "policy": {"write_guards": {"shared_semantic_evidence": "any"}}}),
        ),
    );
    assert_eq!(status, 200, "{r}");
    let (status, r) = call(
        &one,
        &admin_key,
        "POST",
        "/v1/admin/keys",
        Some(json!({"tenant_id": "tenant-a", "principal_id": "alice",
                    "grant": {"allowed_workspace_ids": ["ws-main", "ws-side"]}})),
    );
    assert_eq!(status, 200, "{r}");
    let key = r["key"]
        .as_str()
        .unwrap_or_else(|| panic!("key: {r}"))
        .to_owned();
    let fact = workspace_fact(
        "pg-kept",
        "ws-main",
        "The staging database is restored every Sunday",
    );
    let (status, r) = call(
        &one,
        &key,
        "POST",
        "/v1/memories",
        Some(serde_json::to_value(&fact).unwrap_or_else(|e| panic!("json: {e}"))),
    );
    assert_eq!(
        (status, r["decision"].as_str()),
        (200, Some("accepted")),
        "{r}"
    );

    // Server two recalls twice: the second recall uses its kept read.
    let kept = "mosaic_access_reads_total{outcome=\"kept\"} ";
    for _ in 0..2 {
        let context = recalled(&two, &key, "when is the staging database restored");
        assert!(context.contains("restored every Sunday"), "{context}");
    }
    let kept_before = counter(&two, &admin_key, kept);
    assert!(kept_before >= 1, "server two kept its access read");

    // A memory written through server one moves the store's change stamp
    // but not its access generation: server two keeps its access read and
    // its next recall finds the new memory.
    let second = workspace_fact(
        "pg-kept-2",
        "ws-main",
        "The staging database backup is kept for thirty days",
    );
    let (status, r) = call(
        &one,
        &key,
        "POST",
        "/v1/memories",
        Some(serde_json::to_value(&second).unwrap_or_else(|e| panic!("json: {e}"))),
    );
    assert_eq!(
        (status, r["decision"].as_str()),
        (200, Some("accepted")),
        "{r}"
    );
    let context = recalled(&two, &key, "how long is the staging database backup kept");
    assert!(context.contains("kept for thirty days"), "{context}");
    assert_eq!(
        counter(&two, &admin_key, kept),
        kept_before + 1,
        "a memory's write keeps the access read"
    );

    // The grant narrowed through server one: server two refuses ws-main at
    // once (403 at the service's grant check, as for any ungranted
    // workspace).
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let put = |path: &str, body: Value| {
        let response = agent
            .put(&format!("{}{path}", one.url))
            .header("Authorization", &format!("Bearer {admin_key}"))
            .header("Content-Type", "application/json")
            .send(body.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("server answers: {e}"));
        assert_eq!(response.status().as_u16(), 200, "PUT {path}");
    };
    put(
        "/v1/admin/tenants/tenant-a/principals/alice/grant",
        json!({"allowed_workspace_ids": ["ws-side"]}),
    );
    let (status, r) = call(
        &two,
        &key,
        "POST",
        "/v1/recall",
        Some(json!({"query": "staging database", "workspace_id": "ws-main"})),
    );
    assert_eq!(
        (status, r["error"]["code"].as_str()),
        (403, Some("workspace_not_granted")),
        "{r}"
    );
    let (status, r) = call(
        &two,
        &key,
        "POST",
        "/v1/recall",
        Some(json!({"workspace_id": "ws-side"})),
    );
    assert_eq!(status, 200, "{r}");

    // The grant widened again, then the policy changed through server
    // one: server two's next recall runs under the new policy (the two
    // records written under the old one are dropped as `policy_mismatch`).
    put(
        "/v1/admin/tenants/tenant-a/principals/alice/grant",
        json!({"allowed_workspace_ids": ["ws-main", "ws-side"]}),
    );
    let context = recalled(&two, &key, "when is the staging database restored");
    assert!(context.contains("restored every Sunday"), "{context}");
    put(
        "/v1/admin/tenants/tenant-a/policy",
        json!({"max_ttl_ms": 31_536_000_000_u64 / 2}),
    );
    let (status, r) = call(
        &two,
        &key,
        "POST",
        "/v1/recall",
        Some(json!({"workspace_id": "ws-main"})),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["drop_reasons"]["policy_mismatch"], 2, "{r}");
    assert!(r["context"].as_str().is_some_and(str::is_empty), "{r}");
}

/// The keyed store's routes on PostgreSQL: a write by address, the
/// namespace listing (the store's distinct-namespace query under row
/// security) and a deletion; another tenant's key sees none of it.
#[test]
fn items_and_namespaces_by_address_on_postgres() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url);
    let dir = tempfile::tempdir().expect("tempdir");
    let server = serve(dir.path(), &in_schema(&app_url, &schema.name));
    let admin_key = std::fs::read_to_string(dir.path().join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned();
    let mut keys = Vec::new();
    for tenant in ["tenant-a", "tenant-b"] {
        let (status, r) = call(
            &server,
            &admin_key,
            "POST",
            "/v1/admin/tenants",
            Some(json!({"tenant_id": tenant})),
        );
        assert_eq!(status, 200, "{r}");
        let (status, r) = call(
            &server,
            &admin_key,
            "POST",
            "/v1/admin/keys",
            Some(json!({"tenant_id": tenant, "principal_id": "alice",
                        "grant": {"allowed_workspace_ids": ["ws-main"]}})),
        );
        assert_eq!(status, 200, "{r}");
        let key = r["key"].as_str().expect("key").to_owned();
        let (status, r) = call(
            &server,
            &key,
            "POST",
            "/v1/consents",
            Some(json!({"purpose": "personalization", "ui_release": "pg-test"})),
        );
        assert_eq!(status, 200, "{r}");
        keys.push(key);
    }
    let (a, b) = (&keys[0], &keys[1]);
    for (ns, key, text) in [
        (json!(["prefs", "ui"]), "theme", "Alice prefers dark mode."),
        (
            json!(["prefs", "ui"]),
            "theme",
            "Alice now prefers light mode.",
        ),
        (json!(["notes"]), "n1", "Water the plants on Friday."),
    ] {
        let (status, r) = call(
            &server,
            a,
            "PUT",
            "/v1/items",
            Some(json!({"namespace": ns, "key": key, "content": text})),
        );
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["decision"], "accepted", "{r}");
    }
    let (status, r) = call(&server, a, "GET", "/v1/namespaces", None);
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["namespaces"], json!([["notes"], ["prefs", "ui"]]));
    let (_, r) = call(&server, a, "GET", "/v1/namespaces?prefix=prefs", None);
    assert_eq!(r["namespaces"], json!([["prefs", "ui"]]));
    let (_, r) = call(
        &server,
        a,
        "GET",
        "/v1/items?namespace=prefs/ui&key=theme",
        None,
    );
    assert_eq!(r["content"], "Alice now prefers light mode.", "{r}");
    // Another tenant's principal of the same name sees nothing of it.
    let (_, r) = call(&server, b, "GET", "/v1/namespaces", None);
    assert_eq!(r["namespaces"], json!([]));
    let (status, _) = call(
        &server,
        b,
        "GET",
        "/v1/items?namespace=prefs/ui&key=theme",
        None,
    );
    assert_eq!(status, 404);
    let (status, _) = call(
        &server,
        b,
        "DELETE",
        "/v1/items?namespace=prefs/ui&key=theme",
        None,
    );
    assert_eq!(status, 404);
    let (status, r) = call(
        &server,
        a,
        "DELETE",
        "/v1/items?namespace=prefs/ui&key=theme",
        None,
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["revocations"].as_array().map(Vec::len), Some(2), "{r}");
    let (_, r) = call(&server, a, "GET", "/v1/namespaces", None);
    assert_eq!(r["namespaces"], json!([["notes"]]));
}
