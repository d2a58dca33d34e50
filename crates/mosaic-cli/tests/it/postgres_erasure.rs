//! PostgreSQL: after a complete erasure no live row of any table of the
//! schema (store, search documents, catalog) holds the erased text, and an
//! index-only full-text lookup finds nothing (docs/ERASURE.md says what
//! VACUUM does and does not add). Skips like `postgres.rs` without a server.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use mosaic_service::examples::{preference, workspace_fact};
use serde_json::json;

use crate::postgres::{Schema, call, in_schema, serve, urls};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic");
const SECRETS: [&str; 2] = ["kwyjibo", "zorblatt"];

/// A fresh schema migrated by the owner for the application role.
pub(crate) fn migrated_schema(owner_url: &str, app_url: &str, label: &str) -> Schema {
    migrated_schema_with(owner_url, app_url, label, &[("MOSAIC_EMBEDDER", "hash")])
}

/// [`migrated_schema`] with `mosaic migrate` run under `env` (the embedder
/// the servers on the schema will use).
pub(crate) fn migrated_schema_with(
    owner_url: &str,
    app_url: &str,
    label: &str,
    env: &[(&str, &str)],
) -> Schema {
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
        name: format!("{label}_{}_{nanos}", std::process::id()),
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
        .envs(env.iter().copied())
        .output()
        .expect("run mosaic migrate");
    assert!(
        migrated.status.success(),
        "mosaic migrate as the owner: {}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    schema
}

/// `(table, rows holding a secret)` for every table of the schema.
fn rows_holding(client: &mut postgres::Client, schema: &str) -> Vec<(String, i64)> {
    let tables: Vec<String> = client
        .query(
            "SELECT table_name FROM information_schema.tables
             WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY table_name",
            &[&schema],
        )
        .expect("tables")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(tables.len() >= 10, "the schema has its tables: {tables:?}");
    let mut found = Vec::new();
    for table in tables {
        for secret in SECRETS {
            // The whole row as text: every column, JSON and tsvector included.
            let n: i64 = client
                .query_one(
                    &format!(
                        "SELECT count(*) FROM \"{schema}\".\"{table}\" t WHERE t::text ILIKE $1"
                    ),
                    &[&format!("%{secret}%")],
                )
                .expect("scan")
                .get(0);
            if n > 0 {
                found.push((format!("{table} ({secret})"), n));
            }
        }
    }
    found
}

#[test]
fn after_a_complete_erasure_no_live_row_or_index_lookup_holds_the_text() {
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner_url, &app_url, "erasure_test");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = serve(&dir.path().join("one"), &in_schema(&app_url, &schema.name));
    let admin_key = std::fs::read_to_string(dir.path().join("one").join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned();
    let (status, r) = call(
        &server,
        &admin_key,
        "POST",
        "/v1/admin/tenants",
        // Self-quoted workspace facts allowed (the default needs a verifier).
        Some(
            json!({"tenant_id": "tenant-a", "policy": {"write_guards": {"shared_semantic_evidence": "any"}}}),
        ),
    );
    assert_eq!(status, 200, "{r}");
    let mut keys = Vec::new();
    for principal in ["alice", "bob"] {
        let (status, r) = call(
            &server,
            &admin_key,
            "POST",
            "/v1/admin/keys",
            Some(json!({"tenant_id": "tenant-a", "principal_id": principal,
                        "grant": {"allowed_workspace_ids": ["ws-main"]}})),
        );
        assert_eq!(status, 200, "{r}");
        keys.push(r["key"].as_str().expect("key").to_owned());
    }
    let (alice, bob) = (&keys[0], &keys[1]);
    let (status, consent) = call(
        &server,
        alice,
        "POST",
        "/v1/consents",
        Some(json!({"purpose": "personalization", "ui_release": "consent-ui-v1"})),
    );
    assert_eq!(status, 200, "{consent}");
    let secret = format!("alice hides the {} under the {}", SECRETS[0], SECRETS[1]);
    let request = preference(
        "pg-erase",
        "alice",
        &secret,
        consent["consent_sha256"].as_str().map(str::to_owned),
    );
    let (status, r) = call(
        &server,
        alice,
        "POST",
        "/v1/memories",
        Some(serde_json::to_value(&request).expect("json")),
    );
    assert_eq!(
        (status, r["decision"].as_str()),
        (200, Some("accepted")),
        "{r}"
    );
    let alice_record = r["record_id"].as_str().expect("record id").to_owned();
    let kept = workspace_fact("pg-keep", "ws-main", "the harbour walk starts at noon");
    let (status, r) = call(
        &server,
        bob,
        "POST",
        "/v1/memories",
        Some(serde_json::to_value(&kept).expect("json")),
    );
    assert_eq!(
        (status, r["decision"].as_str()),
        (200, Some("accepted")),
        "{r}"
    );
    let (status, r) = call(
        &server,
        alice,
        "POST",
        "/v1/recall",
        Some(json!({"query": SECRETS[0]})),
    );
    assert_eq!(status, 200, "{r}");
    assert!(
        r["context"].as_str().unwrap_or("").contains(SECRETS[0]),
        "{r}"
    );

    let mut owner = postgres::Client::connect(&owner_url, postgres::NoTls).expect("owner");
    let before = rows_holding(&mut owner, &schema.name);
    assert!(
        !before.is_empty(),
        "the text is in the database before erasure"
    );

    let (status, erased) = call(&server, alice, "POST", "/v1/erasure", Some(json!({})));
    assert_eq!(status, 200, "{erased}");
    assert_eq!(erased["complete"], true, "{erased}");

    // No live row, seen by the superuser (row-level security bypassed).
    let after = rows_holding(&mut owner, &schema.name);
    assert!(
        after.is_empty(),
        "live rows keep the erased text: {after:?}"
    );
    // No index lookup: the GIN index alone answers the full-text query.
    let mut tx = owner.transaction().expect("tx");
    tx.batch_execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = on")
        .expect("planner");
    for secret in SECRETS {
        let n: i64 = tx
            .query_one(
                &format!(
                    "SELECT count(*) FROM \"{}\".pgsearch_lexical WHERE document @@ plainto_tsquery('english', $1)",
                    schema.name
                ),
                &[&secret],
            )
            .expect("lookup")
            .get(0);
        assert_eq!(n, 0, "the full-text index still finds {secret}");
    }
    // The kept memory is still found by that same index path.
    let n: i64 = tx
        .query_one(
            &format!(
                "SELECT count(*) FROM \"{}\".pgsearch_lexical WHERE document @@ plainto_tsquery('english', 'harbour')",
                schema.name
            ),
            &[],
        )
        .expect("lookup")
        .get(0);
    assert_eq!(n, 1, "the index lookup finds what was not erased");
    tx.commit().expect("commit");

    // On PostgreSQL too, the erased record's deletion is proven in a signed
    // tree head over every tenant's events (row security notwithstanding),
    // and the proofs verify offline.
    let (_, keys) = call(&server, alice, "GET", "/v1/keys", None);
    let keys = mosaic_service::signing::parse_public_keys(&keys.to_string()).expect("keys");
    let (status, deletion) = call(
        &server,
        alice,
        "GET",
        &format!("/v1/memories/{alice_record}/deletion"),
        None,
    );
    assert_eq!(status, 200, "{deletion}");
    let verdict = mosaic_service::receipts::verify_document(&deletion, &keys).expect("deletion");
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(
        verdict.checked,
        ["deletion", "audit_head", "inclusion_proof"]
    );
    for seq in [1, 2] {
        let (status, proof) = call(
            &server,
            &admin_key,
            "GET",
            &format!("/v1/admin/audit/proof/inclusion?seq={seq}"),
            None,
        );
        assert_eq!(status, 200, "{proof}");
        let verdict = mosaic_service::receipts::verify_document(&proof, &keys).expect("proof");
        assert!(verdict.valid, "{verdict:?}");
    }
}
