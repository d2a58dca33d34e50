//! PostgreSQL: the server catalog's tenant-bearing tables have forced
//! row-level security like the store's. As the application role a
//! statement sees only the tenant its session names, the identity tables
//! answer a `directory` scope, and the content table (export copies)
//! never answers outside a tenant. Structured claims are not the
//! catalog's (the store holds them): the catalog has no claims table.
//! Skips like `postgres.rs`.

use mosaic_server::examples::preference;
use serde_json::json;

use crate::postgres::{call, in_schema, serve, urls};
use crate::postgres_erasure::migrated_schema;

const TENANT_TABLES: [&str; 2] = ["proposals", "memories"];

fn count(c: &mut postgres::Client, table: &str) -> i64 {
    c.query_one(&format!("SELECT count(*) FROM mosaic_server_{table}"), &[])
        .expect("count")
        .get(0)
}

fn scope(c: &mut postgres::Client, tenant: &str, catalog_scope: &str) {
    c.execute(
        "SELECT set_config('mosaic.tenant_id', $1, false), set_config('mosaic.catalog_scope', $2, false)",
        &[&tenant, &catalog_scope],
    )
    .expect("scope");
}

#[test]
fn catalog_tables_have_forced_row_level_security_for_the_application_role() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "catalog_rls_test");
    let dir = tempfile::tempdir().expect("tempdir");
    let app = in_schema(&app_url, &schema.name);
    let server = serve(&dir.path().join("one"), &app);
    let admin_key = std::fs::read_to_string(dir.path().join("one").join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned();
    let mut exported = Vec::new();
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
            Some(
                json!({"tenant_id": tenant, "principal_id": "alice", "grant": {"allowed_workspace_ids": ["ws-main"]}}),
            ),
        );
        assert_eq!(status, 200, "{r}");
        let key = r["key"].as_str().expect("key").to_owned();
        let (status, consent) = call(
            &server,
            &key,
            "POST",
            "/v1/consents",
            Some(json!({"purpose": "personalization", "ui_release": "consent-ui-v1"})),
        );
        assert_eq!(status, 200, "{consent}");
        let request = preference(
            &format!("rls-{tenant}"),
            "alice",
            &format!("alice of {tenant} likes tea"),
            consent["consent_sha256"].as_str().map(str::to_owned),
        );
        let (status, r) = call(
            &server,
            &key,
            "POST",
            "/v1/memories",
            Some(serde_json::to_value(&request).expect("json")),
        );
        assert_eq!(
            (status, r["decision"].as_str()),
            (200, Some("accepted")),
            "{r}"
        );
        // The export reads the export copy through the tenant scope.
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
        assert!(
            text.contains(&format!("alice of {tenant} likes tea")),
            "{text}"
        );
        exported.push(text);
    }

    // Forced on every tenant-bearing table, as the owner sees it.
    let mut owner =
        postgres::Client::connect(&in_schema(&owner_url, &schema.name), postgres::NoTls)
            .expect("owner");
    for table in TENANT_TABLES {
        let row = owner
            .query_one(
                "SELECT relrowsecurity, relforcerowsecurity FROM pg_class
                 WHERE oid = to_regclass($1)",
                &[&format!("mosaic_server_{table}")],
            )
            .expect("pg_class");
        assert_eq!(
            (row.get::<_, bool>(0), row.get::<_, bool>(1)),
            (true, true),
            "{table}"
        );
    }

    // As the application role.
    let mut c = postgres::Client::connect(&app, postgres::NoTls).expect("app role");
    // No scope: nothing at all.
    for table in TENANT_TABLES {
        assert_eq!(count(&mut c, table), 0, "{table} without a scope");
    }
    // A tenant's scope: only its rows, whatever the query's predicate.
    scope(&mut c, "tenant-a", "");
    assert_eq!(count(&mut c, "memories"), 1);
    let foreign: i64 = c
        .query_one(
            "SELECT count(*) FROM mosaic_server_memories WHERE tenant_id <> 'tenant-a'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(foreign, 0);
    assert_eq!(count(&mut c, "proposals"), 1, "tenant-a's proposal only");
    // Writing another tenant's row from a tenant's scope is refused.
    let refused = c.execute(
        "INSERT INTO mosaic_server_memories (record_id, proposal_id, tenant_id, writer_principal_id, subject_key, subject_principal_id, kind, created_at_ms, request_json)
         VALUES ('m-planted', 'p-planted', 'tenant-b', 'mallory', 'principal:alice', 'alice', 'semantic', 1, '{}')",
        &[],
    );
    let message = refused
        .map(|n| format!("written: {n}"))
        .unwrap_or_else(|e| {
            e.as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_owned())
        });
    assert!(
        message.contains("row-level security"),
        "a row of another tenant is refused by the policy: {message}"
    );
    // The directory scope: identity tables of every tenant, no content.
    scope(&mut c, "", "directory");
    assert_eq!(count(&mut c, "proposals"), 2, "both tenants' proposals");
    assert_eq!(
        count(&mut c, "memories"),
        0,
        "content never in the directory scope"
    );
    let claims_table: bool = c
        .query_one(
            "SELECT to_regclass('mosaic_server_claims') IS NOT NULL",
            &[],
        )
        .expect("lookup")
        .get(0);
    assert!(!claims_table, "the catalog keeps no copy of claims");
    // Keys, tenants, grants, verifiers and consents are the store's
    // tables: the server keeps no copy of its own.
    for moved in [
        "api_keys",
        "tenants",
        "grants",
        "verifiers",
        "settings",
        "consents",
        "consent_terms",
    ] {
        let exists: bool = c
            .query_one(
                &format!("SELECT to_regclass('mosaic_server_{moved}') IS NOT NULL"),
                &[],
            )
            .expect("lookup")
            .get(0);
        assert!(!exists, "mosaic_server_{moved} is gone");
    }
    let keys: i64 = c
        .query_one("SELECT count(*) FROM api_keys", &[])
        .expect("keys")
        .get(0);
    assert!(keys >= 3, "admin and both tenants' keys, in the store");
    assert_eq!(exported.len(), 2);
}

/// A database of the release before consents were the store's alone keeps
/// its catalog's copies until the schema owner migrates it again; the
/// migration drops them (the store's consent receipts hold every fact they
/// held) and leaves the store's consents as they were.
#[test]
fn migrating_again_drops_the_catalogs_copies_of_consents() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "catalog_copies_test");
    let owner_in = in_schema(&owner_url, &schema.name);
    let mut owner = postgres::Client::connect(&owner_in, postgres::NoTls).expect("owner");
    owner
        .batch_execute(
            "CREATE TABLE mosaic_server_consents (consent_sha256 TEXT PRIMARY KEY,
                 tenant_id TEXT NOT NULL, principal_id TEXT NOT NULL);
             CREATE TABLE mosaic_server_consent_terms (consent_sha256 TEXT PRIMARY KEY,
                 tenant_id TEXT NOT NULL, principal_id TEXT NOT NULL, purpose TEXT NOT NULL,
                 policy_sha256 TEXT NOT NULL, granted_at_ms BIGINT NOT NULL);
             INSERT INTO mosaic_server_consents VALUES ('c1', 'tenant-a', 'alice');",
        )
        .expect("the earlier release's tables");
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
    for table in ["consents", "consent_terms"] {
        let exists: bool = owner
            .query_one(
                &format!("SELECT to_regclass('mosaic_server_{table}') IS NOT NULL"),
                &[],
            )
            .expect("lookup")
            .get(0);
        assert!(!exists, "mosaic_server_{table} is dropped");
    }
    let store_consents: bool = owner
        .query_one("SELECT to_regclass('consents') IS NOT NULL", &[])
        .expect("lookup")
        .get(0);
    assert!(store_consents, "the store's consents stay");
}
