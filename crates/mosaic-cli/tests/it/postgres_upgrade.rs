//! PostgreSQL: a database as the release before store schema 11 left it
//! (the proposals' owners, export copies, captured messages and extraction
//! jobs in that release's own `mosaic_server_*` tables, under their row
//! security; the store at schema 10) is taken in by `mosaic migrate`, and
//! a server on it serves what those tables held: a retried proposal
//! replays, a captured message is cited by id, the export keeps the copy
//! of each request. Skips like `postgres.rs`.

use mosaic_service::examples::preference;
use serde_json::{Value, json};

use crate::postgres::{call, in_schema, serve, urls};
use crate::postgres_erasure::migrated_schema;

/// The earlier release's tables, filled from the store's rows (as that
/// release wrote them), and the store taken back to schema 10.
const AS_PREVIOUS_RELEASE: &str = "
CREATE TABLE mosaic_server_proposals (proposal_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL, record_id TEXT NOT NULL, accepted BIGINT NOT NULL,
    decided_at_ms BIGINT NOT NULL);
CREATE TABLE mosaic_server_memories (record_id TEXT PRIMARY KEY, proposal_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL, writer_principal_id TEXT NOT NULL, subject_key TEXT NOT NULL,
    subject_principal_id TEXT, kind TEXT NOT NULL, created_at_ms BIGINT NOT NULL, request_json TEXT);
CREATE TABLE mosaic_server_messages (tenant_id TEXT NOT NULL, principal_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL, message_id TEXT NOT NULL, record_id TEXT NOT NULL,
    content_sha256 TEXT NOT NULL, provenance_sha256 TEXT NOT NULL, locator_sha256 TEXT NOT NULL,
    captured_at_ms BIGINT NOT NULL, PRIMARY KEY (tenant_id, principal_id, conversation_id, message_id));
CREATE TABLE mosaic_server_extraction_jobs (job_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL, key_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
    message_ids_json TEXT NOT NULL, state TEXT NOT NULL, attempts BIGINT NOT NULL DEFAULT 0,
    next_attempt_ms BIGINT NOT NULL, last_error TEXT, report_json TEXT, created_at_ms BIGINT NOT NULL);
CREATE TABLE mosaic_server_consents (consent_sha256 TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL);
SELECT set_config('mosaic.tenant_id', 'tenant-a', false);
INSERT INTO mosaic_server_proposals SELECT proposal_id, tenant_id, principal_id, record_id,
    CASE WHEN accepted THEN 1 ELSE 0 END, decided_at_ms FROM proposals;
INSERT INTO mosaic_server_memories SELECT c.record_id, c.proposal_id, c.tenant_id,
    c.proposer_principal_id, c.subject_type || ':' || c.subject_a, NULL, c.kind, c.created_at_ms,
    e.request_json FROM record_catalog c LEFT JOIN export_requests e ON e.record_id = c.record_id;
INSERT INTO mosaic_server_messages SELECT tenant_id, principal_id, conversation_id, message_id,
    record_id, content_sha256, provenance_sha256, locator_sha256, captured_at_ms FROM captured_messages;
INSERT INTO mosaic_server_extraction_jobs VALUES ('x-old', 'tenant-a', 'alice', 'k', 'chat-pg',
    '[\"m1\"]', 'pending', 0, 0, NULL, NULL, 0);
SELECT set_config('mosaic.tenant_id', '', false);
DO $$
DECLARE t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['proposals', 'messages', 'extraction_jobs'] LOOP
        EXECUTE format('ALTER TABLE mosaic_server_%s ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE mosaic_server_%s FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY mosaic_server_%s_tenant ON mosaic_server_%s USING
            (tenant_id = current_setting(''mosaic.tenant_id'', true)
             OR current_setting(''mosaic.catalog_scope'', true) = ''directory'')', t, t);
    END LOOP;
    ALTER TABLE mosaic_server_memories ENABLE ROW LEVEL SECURITY;
    ALTER TABLE mosaic_server_memories FORCE ROW LEVEL SECURITY;
    CREATE POLICY mosaic_server_memories_tenant ON mosaic_server_memories USING
        (tenant_id = current_setting('mosaic.tenant_id', true));
END $$;
DROP TABLE captured_messages; DROP TABLE extraction_jobs; DROP TABLE export_requests;
ALTER TABLE proposals DROP COLUMN principal_id;
DELETE FROM meta WHERE key = 'intake_imported';
DROP TABLE scope_entries; DROP TABLE scope_pages; DROP TABLE scope_heads;
DELETE FROM schema_migrations WHERE version >= 11;
";

fn export_requests(server: &crate::postgres::Server, key: &str) -> Vec<Value> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent
        .get(&format!("{}/v1/export", server.url))
        .header("Authorization", &format!("Bearer {key}"))
        .call()
        .expect("export");
    let text = response.body_mut().read_to_string().expect("body");
    text.lines()
        .map(|l| {
            let line: Value = serde_json::from_str(l).expect("export line");
            line["data"]["request"].clone()
        })
        .collect()
}

#[test]
fn a_previous_release_database_is_migrated_and_served() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "upgrade_v10_test");
    let dir = tempfile::tempdir().expect("tempdir");
    let app = in_schema(&app_url, &schema.name);
    let server = serve(&dir.path().join("one"), &app);
    let admin_key = std::fs::read_to_string(dir.path().join("one").join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned();
    let (status, r) = call(
        &server,
        &admin_key,
        "POST",
        "/v1/admin/tenants",
        Some(json!({"tenant_id": "tenant-a"})),
    );
    assert_eq!(status, 200, "{r}");
    let (status, r) = call(
        &server,
        &admin_key,
        "POST",
        "/v1/admin/keys",
        Some(json!({"tenant_id": "tenant-a", "principal_id": "alice"})),
    );
    assert_eq!(status, 200, "{r}");
    let alice = r["key"].as_str().expect("key").to_owned();
    let (status, r) = call(
        &server,
        &admin_key,
        "POST",
        "/v1/admin/keys",
        Some(json!({"tenant_id": "tenant-a", "principal_id": "bob"})),
    );
    assert_eq!(status, 200, "{r}");
    let bob = r["key"].as_str().expect("key").to_owned();
    let consent = |key: &str| {
        let (status, c) = call(
            &server,
            key,
            "POST",
            "/v1/consents",
            Some(json!({"purpose": "personalization", "ui_release": "consent-ui-v1"})),
        );
        assert_eq!(status, 200, "{c}");
        c["consent_sha256"].as_str().map(str::to_owned)
    };
    let (alice_consent, bob_consent) = (consent(&alice), consent(&bob));
    let request = serde_json::to_value(preference(
        "pg-upgrade",
        "alice",
        "alice likes green tea",
        alice_consent.clone(),
    ))
    .expect("json");
    let (status, first) = call(
        &server,
        &alice,
        "POST",
        "/v1/memories",
        Some(request.clone()),
    );
    assert_eq!(
        (status, first["decision"].as_str()),
        (200, Some("accepted")),
        "{first}"
    );
    let (status, ingested) = call(
        &server,
        &alice,
        "POST",
        "/v1/conversations/chat-pg/messages",
        Some(
            json!({"messages": [{"id": "m1", "role": "user", "content": "I drink green tea daily."}]}),
        ),
    );
    assert_eq!(status, 200, "{ingested}");
    let exported_before = export_requests(&server, &alice);
    assert!(server.terminate().success());

    // The schema as the previous release left it, then migrated again.
    let owner_in = in_schema(&owner_url, &schema.name);
    let mut owner = postgres::Client::connect(&owner_in, postgres::NoTls).expect("owner");
    owner
        .batch_execute(AS_PREVIOUS_RELEASE)
        .expect("previous release layout");
    let app_role = app_url
        .parse::<postgres::Config>()
        .ok()
        .and_then(|c| c.get_user().map(str::to_owned))
        .expect("app user");
    let migrated = std::process::Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(["migrate", "--postgres", &owner_in, "--app-role", &app_role])
        .env("MOSAIC_EMBEDDER", "hash")
        .output()
        .expect("run mosaic migrate");
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let left: i64 = owner
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_tables
             WHERE schemaname = current_schema() AND tablename LIKE 'mosaic_server_%'",
            &[],
        )
        .expect("tables")
        .get(0);
    assert_eq!(
        left, 0,
        "the earlier tables are dropped, consents' copies included"
    );

    let server = serve(&dir.path().join("two"), &app);
    // The retry replays the first decision.
    let (status, retried) = call(&server, &alice, "POST", "/v1/memories", Some(request));
    assert_eq!(status, 200, "{retried}");
    assert_eq!(retried["replayed"], true, "{retried}");
    assert_eq!(retried["record_id"], first["record_id"]);
    assert_eq!(retried["receipt"], first["receipt"]);
    // The captured message is cited by id.
    let mut cited = serde_json::to_value(preference(
        "pg-cited",
        "alice",
        "I drink green tea daily.",
        alice_consent,
    ))
    .expect("json");
    cited["sources"] = json!([]);
    cited["source_texts"] = json!({});
    cited["cites"] = json!([{"conversation_id": "chat-pg", "message_id": "m1"}]);
    let (status, r) = call(&server, &alice, "POST", "/v1/memories", Some(cited.clone()));
    assert_eq!(
        (status, r["decision"].as_str()),
        (200, Some("accepted")),
        "{r}"
    );
    // Another principal's cite of it answers like a missing message.
    cited["subject"] = json!({"type": "principal", "principal_id": "bob"});
    cited["consent_receipt_sha256"] = json!(bob_consent);
    let (status, r) = call(&server, &bob, "POST", "/v1/memories", Some(cited.clone()));
    assert_eq!(
        (status, r["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{r}"
    );
    cited["cites"] = json!([{"conversation_id": "chat-pg", "message_id": "m-none"}]);
    let (missing, m) = call(&server, &bob, "POST", "/v1/memories", Some(cited));
    assert_eq!(
        (missing, m["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{m}"
    );
    // The export copies came along.
    let exported_after = export_requests(&server, &alice);
    for request in &exported_before {
        assert!(exported_after.contains(request), "{request} lost");
    }
    assert!(
        exported_before
            .iter()
            .any(|r| r["source_texts"].as_object().is_some_and(|t| !t.is_empty())),
        "an export copy holds source texts"
    );
    // The earlier release's pending job is the store's.
    let (status, report) = call(&server, &admin_key, "GET", "/v1/admin/extraction", None);
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["counts"]["pending"], 1, "{report}");
}
