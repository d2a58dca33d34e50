//! SQLite-specific guarantees: migrations, query plans, tampering, faults.

use mosaic_harness::memory_scope::{MemoryReadContext, verify_memory_selection};
use mosaic_harness::{MEMORY_SCHEMA_VERSION, MemoryKind};
use mosaic_store::audit::{AuditProblem, AuditVerification};
use mosaic_store::conformance::fixtures::{self, Spec, T0};
use mosaic_store::conformance::{erase_as_alice, publish_all, test_config};
use mosaic_store::read::{eligibility_query, select_from_store};
use mosaic_store::revocation::RevocationState;
use mosaic_store::sqlite::schema::SCHEMA_VERSION;
use mosaic_store::{
    Durability, EligibilityQuery, IndexAck, ReviewAction, RevocationReason, SqliteStore, Store,
    StoreError, WriteDecision,
};
use rusqlite::Connection;

fn seeded() -> (tempfile::TempDir, std::path::PathBuf, SqliteStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.sqlite");
    let mut store = SqliteStore::open(&path, test_config()).expect("open");
    fixtures::seed(&mut store, fixtures::TENANT_A, &["alice", "bob"]).expect("seed");
    (dir, path, store)
}

fn raw(path: &std::path::Path) -> Connection {
    Connection::open(path).expect("raw connection")
}

#[test]
fn opens_in_wal_with_full_sync_and_current_schema() {
    let (_dir, path, mut store) = seeded();
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let conn = raw(&path);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("mode");
    assert_eq!(mode, "wal");
    // synchronous is per connection: ask the store's own connection.
    assert_eq!(
        store.synchronous_level().expect("synchronous"),
        mosaic_store::sqlite::SYNCHRONOUS_FULL
    );
    assert_eq!(
        store.checkpoint_pages().expect("checkpoint"),
        mosaic_store::sqlite::WAL_CHECKPOINT_PAGES
    );
    // A server that checkpoints from a connection of its own turns the
    // store's automatic checkpoints off, and bounds the log file.
    store
        .leave_checkpoints_to_another_connection(1 << 20)
        .expect("leave checkpoints");
    assert_eq!(store.checkpoint_pages().expect("checkpoint"), 0);
    // A reopen keeps the data.
    drop(store);
    let mut again = SqliteStore::open(&path, test_config()).expect("reopen");
    assert_eq!(again.schema_version().expect("version"), SCHEMA_VERSION);
}

#[test]
fn a_cached_statement_with_a_bound_limit_runs_without_being_compiled_again() {
    let (_dir, path, store) = seeded();
    assert!(store.plans_stable().expect("plans stable"));
    // What the store's connections are opened with, on a connection of
    // the same SQLite: a cached statement whose LIMIT is bound (the
    // outbox's read of pending rows is one) runs again as it was compiled.
    // The control, without it, is compiled again on every run after the
    // first: that is what the setting is for.
    const SQL: &str = "SELECT key FROM meta ORDER BY key LIMIT ?1";
    let recompiled = |stable: bool| {
        let conn = raw(&path);
        if stable {
            mosaic_store::sqlite::keep_plans_stable(&conn).expect("keep plans stable");
        }
        for limit in [10_000i64, 10_000, 5] {
            let mut stmt = conn.prepare_cached(SQL).expect("prepare");
            let ids = stmt
                .query_map([limit], |r| r.get::<_, String>(0))
                .expect("query")
                .collect::<Result<Vec<_>, _>>()
                .expect("rows");
            assert!(!ids.is_empty());
        }
        conn.prepare_cached(SQL)
            .expect("cached")
            .get_status(rusqlite::StatementStatus::RePrepare)
    };
    assert_eq!(recompiled(true), 0);
    assert!(
        recompiled(false) >= 2,
        "without the setting SQLite compiles a bound LIMIT's statement again on every run"
    );
}

#[test]
fn version_1_files_gain_a_record_catalog_with_their_proposers() {
    let (_dir, path, mut store) = seeded();
    let request = Spec::workspace(fixtures::TENANT_A, "bob", "r-old").build();
    assert!(store.write(&request).expect("write").is_accepted());
    drop(store);
    // What a version 1 file looked like: no catalog, no audit-trail index.
    let conn = raw(&path);
    conn.execute_batch(&format!(
        "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} DROP INDEX idx_records_address; ALTER TABLE records DROP COLUMN address_key;
             ALTER TABLE records DROP COLUMN address_namespace;
             DROP TABLE record_claims; DROP TABLE record_catalog; DROP INDEX idx_audit_ref;
         DELETE FROM meta WHERE key = 'latest_created_at';
         PRAGMA user_version = 1;"
    ))
    .expect("downgrade");
    drop(conn);
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let indexed: i64 = raw(&path)
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'idx_audit_ref'",
            [],
            |r| r.get(0),
        )
        .expect("index lookup");
    assert_eq!(indexed, 1, "the migration adds the audit-trail index");
    assert!(
        store
            .record_audit_trail("r-old")
            .expect("trail")
            .iter()
            .any(|e| e.kind == mosaic_store::audit::AuditKind::RecordAccepted),
        "the record's events survive the migration"
    );
    let page = store
        .list_records(&mosaic_store::RecordFilter::tenant(fixtures::TENANT_A, 10))
        .expect("list");
    assert_eq!(page.records.len(), 1);
    assert_eq!(page.records[0].record_id, "r-old");
    assert_eq!(page.records[0].proposer_principal_id, "bob");
    assert_eq!(page.records[0].state, mosaic_store::ListedState::Publishing);
}

#[test]
fn version_3_files_gain_the_claims_of_their_records() {
    let (_dir, path, mut store) = seeded();
    let subject = format!("workspace:{}", fixtures::WORKSPACE);
    let mut claimed = Spec::workspace(fixtures::TENANT_A, "alice", "r-claimed").build();
    fixtures::with_claim(&mut claimed, "c1", &subject, "deploy_day", "tuesday");
    let mut erased = Spec::workspace(fixtures::TENANT_A, "alice", "r-erased").build();
    fixtures::with_claim(&mut erased, "c1", &subject, "deploy_day", "friday");
    let plain = Spec::workspace(fixtures::TENANT_A, "alice", "r-plain").build();
    for request in [&claimed, &erased, &plain] {
        assert!(store.write(request).expect("write").is_accepted());
    }
    // Erase one: its claims must not come back from the migration.
    let auth = fixtures::authorization("ops");
    let token = store
        .revoke(
            "r-erased",
            &mosaic_store::RevocationReason::Requested,
            &auth,
            T0 + 1,
        )
        .expect("revoke");
    let requested = store.request_deletion(token, T0 + 2).expect("request");
    for target in ["lexical", "vector"] {
        for task in store.pending_outbox(target, 100).expect("outbox") {
            if task.record_id == "r-erased" {
                store
                    .acknowledge_index("r-erased", task.generation, target, T0 + 3)
                    .expect("ack");
            }
        }
    }
    let acknowledged = store
        .confirm_indexes_acknowledged(requested, T0 + 4)
        .expect("confirm");
    store.erase(acknowledged, T0 + 5).expect("erase");
    drop(store);
    // What a version 3 file looked like: claims only inside the stored
    // gate inputs.
    raw(&path)
        .execute_batch(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} DROP INDEX idx_records_address; ALTER TABLE records DROP COLUMN address_key;
             ALTER TABLE records DROP COLUMN address_namespace;
             DROP TABLE record_claims; DELETE FROM meta WHERE key = 'latest_created_at';
             PRAGMA user_version = 3;"
        ))
        .expect("downgrade");
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    assert_eq!(
        store
            .claims_by_key(fixtures::TENANT_A, &subject, "deploy_day")
            .expect("claims"),
        vec![("r-claimed".to_owned(), claimed.proposal.claims[0].clone())]
    );
    assert!(store.record_claims("r-plain").expect("claims").is_empty());
    assert!(store.record_claims("r-erased").expect("claims").is_empty());
    let report = store.integrity_check().expect("check");
    assert!(report.is_ok(), "{report:?}");
}

#[test]
fn version_5_files_lose_the_unused_line_index_and_the_catalog_id_key() {
    let (_dir, path, mut store) = seeded();
    for (principal, id) in [("alice", "r-2"), ("bob", "r-1"), ("alice", "r-3")] {
        let request = Spec::workspace(fixtures::TENANT_A, principal, id).build();
        assert!(store.write(&request).expect("write").is_accepted());
    }
    drop(store);
    // What a version 5 file looked like: the line index, and a catalog
    // keyed by the record id.
    raw(&path)
        .execute_batch(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} DROP INDEX idx_records_address; ALTER TABLE records DROP COLUMN address_key;
             ALTER TABLE records DROP COLUMN address_namespace;
             CREATE INDEX idx_records_line ON records (line_id, line_generation);
             CREATE TABLE c5 (
                 record_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, kind TEXT NOT NULL,
                 subject_type TEXT NOT NULL, subject_a TEXT NOT NULL, subject_b TEXT NOT NULL,
                 proposer_principal_id TEXT NOT NULL, proposal_id TEXT NOT NULL,
                 created_at_ms INTEGER NOT NULL) STRICT;
             INSERT INTO c5 SELECT * FROM record_catalog;
             DROP TABLE record_catalog;
             ALTER TABLE c5 RENAME TO record_catalog;
             CREATE INDEX idx_catalog_tenant ON record_catalog (tenant_id, record_id);
             CREATE INDEX idx_catalog_subject ON record_catalog
                 (tenant_id, subject_type, subject_a, subject_b, record_id);
             CREATE INDEX idx_catalog_proposer ON record_catalog
                 (tenant_id, proposer_principal_id, record_id);
             DELETE FROM meta WHERE key = 'latest_created_at';
             PRAGMA user_version = 5;"
        ))
        .expect("downgrade");
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let conn = raw(&path);
    let indexes: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('records', 'record_catalog')
             ORDER BY name",
        )
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert!(
        !indexes.iter().any(|n| n == "idx_records_line"),
        "{indexes:?}"
    );
    assert!(
        !indexes
            .iter()
            .any(|n| n.starts_with("sqlite_autoindex_record_catalog")),
        "{indexes:?}"
    );
    for name in [
        "idx_catalog_tenant",
        "idx_catalog_subject",
        "idx_catalog_proposer",
    ] {
        assert!(indexes.iter().any(|n| n == name), "{name} in {indexes:?}");
    }
    // The tenant and record id stay unique.
    assert!(
        conn.execute(
            "INSERT INTO record_catalog SELECT * FROM record_catalog WHERE record_id = 'r-1'",
            [],
        )
        .is_err()
    );
    let page = store
        .list_records(&mosaic_store::RecordFilter::tenant(fixtures::TENANT_A, 10))
        .expect("list");
    let listed: Vec<(&str, &str)> = page
        .records
        .iter()
        .map(|r| (r.record_id.as_str(), r.proposer_principal_id.as_str()))
        .collect();
    assert_eq!(listed, [("r-1", "bob"), ("r-2", "alice"), ("r-3", "alice")]);
    let report = store.integrity_check().expect("check");
    assert!(report.is_ok(), "{report:?}");
    // A new record still lands in the catalog.
    let request = Spec::workspace(fixtures::TENANT_A, "bob", "r-0").build();
    assert!(store.write(&request).expect("write").is_accepted());
    let page = store
        .list_records(&mosaic_store::RecordFilter::tenant(fixtures::TENANT_A, 10))
        .expect("list");
    assert_eq!(
        page.records.first().map(|r| r.record_id.as_str()),
        Some("r-0")
    );
}

/// What a version 6 file looked like: no latest creation instant.
fn as_version_6(path: &std::path::Path) {
    raw(path)
        .execute_batch(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} DROP INDEX idx_records_address; ALTER TABLE records DROP COLUMN address_key;
             ALTER TABLE records DROP COLUMN address_namespace;
             DELETE FROM meta WHERE key = 'latest_created_at';
             PRAGMA user_version = 6;"
        ))
        .expect("downgrade");
}

#[test]
fn version_6_files_gain_the_latest_creation_instant_of_their_records() {
    let (_dir, path, mut store) = seeded();
    for (id, now) in [("r-1", T0 + 30), ("r-2", T0 + 70), ("r-3", T0 + 50)] {
        let mut spec = Spec::workspace(fixtures::TENANT_A, "alice", id);
        spec.now = now;
        assert!(store.write(&spec.build()).expect("write").is_accepted());
    }
    let latest = store
        .get_record("r-2")
        .expect("read")
        .expect("stored")
        .record
        .created_at_unix_ms;
    assert_eq!(store.latest_created_at().expect("latest"), latest);
    drop(store);
    as_version_6(&path);
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    assert_eq!(store.latest_created_at().expect("latest"), latest);
    // And an empty version 6 file starts from 0.
    let empty = tempfile::tempdir().expect("tempdir");
    let path = empty.path().join("store.sqlite");
    drop(SqliteStore::open(&path, test_config()).expect("open"));
    as_version_6(&path);
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.latest_created_at().expect("latest"), 0);
}

/// What a version 7 file looked like: records without addresses.
fn as_version_7(path: &std::path::Path) {
    raw(path)
        .execute_batch(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} {UNDO_V8} PRAGMA user_version = 7;"
        ))
        .expect("downgrade");
}

/// What version 12 added: the read scopes' commitments (their trees in
/// pages since version 15).
const UNDO_V12: &str = "DROP TABLE scope_entries; DROP TABLE scope_pages; DROP TABLE scope_heads;";

/// What version 11 added: the server's front-door tables.
const UNDO_V11: &str = "DROP TABLE captured_messages; DROP TABLE extraction_jobs;
    DROP TABLE export_requests; ALTER TABLE proposals DROP COLUMN principal_id;
    DELETE FROM meta WHERE key = 'intake_imported';";

/// What version 10 added: the audit log's leaf hashes and tree.
const UNDO_V10: &str = "ALTER TABLE audit_events DROP COLUMN leaf_sha256;
    DELETE FROM meta WHERE key = 'audit_tree';";

/// What a version 8 file lacked: the directory tables.
const UNDO_V9: &str = "DROP TABLE api_keys; DROP TABLE tenant_settings; DROP TABLE policy_history;
    DROP TABLE verifiers; DROP TABLE server_settings;
    DELETE FROM meta WHERE key = 'catalog_imported';";

#[test]
fn version_8_files_gain_the_directory_in_place() {
    let (_dir, path, mut store) = seeded();
    assert!(
        store
            .write(&Spec::workspace(fixtures::TENANT_A, "alice", "r-old").build())
            .expect("write")
            .is_accepted()
    );
    drop(store);
    raw(&path)
        .execute_batch(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} PRAGMA user_version = 8;"
        ))
        .expect("downgrade");
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    // Every tenant with a policy is listed, its policy noted in its
    // history; nothing of an earlier server's own file is imported yet.
    assert_eq!(store.tenant_ids().expect("tenants"), [fixtures::TENANT_A]);
    let a = store
        .tenant_settings(fixtures::TENANT_A)
        .expect("settings")
        .expect("tenant a");
    assert_eq!((a.claim_updates, a.write_guards_json), (None, None));
    let mut next = fixtures::policy(fixtures::TENANT_A);
    next.policy_sha256 = fixtures::label("policy/tenant-a/v2");
    store.put_policy(&next, fixtures::T0).expect("policy");
    assert_eq!(
        store
            .earlier_policies(fixtures::TENANT_A, &next.policy_sha256, 5)
            .expect("history"),
        [fixtures::policy(fixtures::TENANT_A).policy_sha256]
    );
    assert!(!store.directory_imported().expect("flag"));
    assert_eq!(store.api_keys().expect("keys"), []);
    assert!(store.get_record("r-old").expect("read").is_some());
}

const UNDO_V8: &str = "DROP INDEX idx_records_address; ALTER TABLE records DROP COLUMN address_key;
    ALTER TABLE records DROP COLUMN address_namespace;";

#[test]
fn version_7_files_gain_addresses_in_place() {
    let (_dir, path, mut store) = seeded();
    let old = Spec::workspace(fixtures::TENANT_A, "alice", "r-old").build();
    assert!(store.write(&old).expect("write").is_accepted());
    drop(store);
    as_version_7(&path);
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    // The earlier record reads back unchanged, without an address.
    let stored = store.get_record("r-old").expect("read").expect("stored");
    assert_eq!(stored.record.address, None);
    assert_eq!(stored.record.metadata, None);
    let mut addressed = Spec::workspace(fixtures::TENANT_A, "alice", "r-new").build();
    let here = mosaic_harness::MemoryAddress {
        namespace: vec!["notes".into()],
        key: "k".into(),
    };
    addressed.proposal.address = Some(here.clone());
    assert!(store.write(&addressed).expect("write").is_accepted());
    let workspace = mosaic_harness::MemorySubject::Workspace {
        workspace_id: fixtures::WORKSPACE.into(),
    };
    assert_eq!(
        store
            .record_at_address(fixtures::TENANT_A, &workspace, &here)
            .expect("lookup"),
        Some(("r-new".to_owned(), 1))
    );
    drop(store);
    // The lookup is one read of the address index.
    let plan: Vec<String> = raw(&path)
        .prepare(
            "EXPLAIN QUERY PLAN SELECT record_id, line_generation FROM records
             WHERE tenant_id = 'a' AND subject_type = 'workspace' AND subject_a = 'w'
               AND subject_b = '' AND address_namespace = 'n' AND address_key = 'k'
               AND state IN ('active', 'publishing')
             ORDER BY created_at_ms DESC, line_generation DESC, record_id LIMIT 1",
        )
        .expect("plan")
        .query_map([], |row| row.get::<_, String>(3))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("plan rows");
    assert!(
        plan.iter().any(|line| line.contains("idx_records_address")),
        "{plan:?}"
    );
    let report = SqliteStore::open(&path, test_config())
        .expect("open")
        .integrity_check()
        .expect("check");
    assert!(report.is_ok(), "{report:?}");
}

#[test]
fn newer_schema_is_a_typed_error_and_leaves_the_file_alone() {
    let (_dir, path, store) = seeded();
    drop(store);
    raw(&path)
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .expect("bump");
    let before = std::fs::read(&path).expect("read");
    match SqliteStore::open(&path, test_config()) {
        Err(StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).expect("read"), before);
}

#[test]
fn foreign_database_is_not_a_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("other.sqlite");
    raw(&path)
        .execute_batch("CREATE TABLE t (x INTEGER);")
        .expect("create");
    assert!(matches!(
        SqliteStore::open(&path, test_config()),
        Err(StoreError::NotAStore(_))
    ));
}

#[test]
fn eligibility_query_uses_the_index() {
    let (_dir, _path, mut store) = seeded();
    let q = EligibilityQuery {
        tenant_id: fixtures::TENANT_A.into(),
        policy_sha256: fixtures::policy(fixtures::TENANT_A).policy_sha256,
        principal_id: "alice".into(),
        workspace_id: fixtures::WORKSPACE.into(),
        run_id: "run-1".into(),
        now_unix_ms: T0,
        kinds: MemoryKind::ALL.to_vec(),
    };
    let plan = store.explain_eligibility(&q).expect("plan");
    let on_records: Vec<_> = plan.iter().filter(|l| l.contains(" r ")).collect();
    assert_eq!(
        on_records.len(),
        5,
        "one lookup per subject shape: {plan:?}"
    );
    for line in &on_records {
        assert!(
            // Covering: the identities come from the index, no record row
            // (body and content) is visited.
            line.starts_with("SEARCH r USING COVERING INDEX idx_records_eligibility"),
            "{line}"
        );
    }
    assert!(!plan.iter().any(|l| l.starts_with("SCAN")), "{plan:?}");
}

fn read_context(principal: &str, now: u64) -> MemoryReadContext {
    MemoryReadContext {
        schema_version: MEMORY_SCHEMA_VERSION,
        selector_release: "selector-v1".into(),
        tenant_id: fixtures::TENANT_A.into(),
        policy_sha256: fixtures::policy(fixtures::TENANT_A).policy_sha256,
        policy_valid_from_unix_ms: T0 - fixtures::DAY_MS,
        policy_valid_until_unix_ms: None,
        principal_id: principal.into(),
        workspace_id: fixtures::WORKSPACE.into(),
        run_id: "run-1".into(),
        now_unix_ms: now,
        allowed_kinds: MemoryKind::ALL.to_vec(),
        max_records: 10,
        filter: None,
    }
}

#[test]
fn store_read_feeds_the_pure_selector_with_a_verifiable_receipt() {
    let (_dir, _path, mut store) = seeded();
    for spec in [
        Spec::principal(fixtures::TENANT_A, "alice", "m-alice"),
        Spec::principal(fixtures::TENANT_A, "bob", "m-bob"),
        Spec::workspace(fixtures::TENANT_A, "alice", "m-ws"),
        Spec::run(fixtures::TENANT_A, "alice", "m-run", "run-1"),
    ] {
        assert!(store.write(&spec.build()).expect("write").is_accepted());
    }
    publish_all(&mut store, &test_config().required_index_targets, T0).expect("publish");
    let ctx = read_context("alice", T0 + 10);
    let read = select_from_store(&mut store, &ctx).expect("select");
    let mut selected = read.selection.selected_ids().to_vec();
    selected.sort();
    assert_eq!(selected, ["m-alice", "m-run", "m-ws"]);
    let records: Vec<_> = read
        .eligible
        .records
        .iter()
        .map(|r| r.record.clone())
        .collect();
    verify_memory_selection(&ctx, &records, None, &read.selection.receipt).expect("verify");
    // The snapshot moves with the revocation generation.
    store
        .revoke(
            "m-ws",
            &RevocationReason::Requested,
            &fixtures::authorization("ops"),
            T0 + 20,
        )
        .expect("revoke");
    let again = select_from_store(&mut store, &ctx).expect("select");
    assert_ne!(again.eligible.snapshot, read.eligible.snapshot);
    assert_ne!(
        again.receipt.read_receipt_sha256,
        read.receipt.read_receipt_sha256
    );
    assert_eq!(
        read.receipt.selection_receipt_sha256,
        read.selection.receipt.receipt_sha256
    );
    assert_eq!(
        again.eligible.snapshot.revocation_generation,
        read.eligible.snapshot.revocation_generation + 1
    );
    assert_eq!(eligibility_query(&ctx).tenant_id, fixtures::TENANT_A);
}

fn populated() -> (tempfile::TempDir, std::path::PathBuf, SqliteStore) {
    let (dir, path, mut store) = seeded();
    for id in ["a1", "a2", "a3"] {
        store
            .write(&Spec::principal(fixtures::TENANT_A, "alice", id).build())
            .expect("write");
    }
    publish_all(&mut store, &test_config().required_index_targets, T0).expect("publish");
    (dir, path, store)
}

fn broken_at(store: &mut SqliteStore) -> (u64, AuditProblem) {
    match store.verify_audit_chain().expect("verify") {
        AuditVerification::Broken { seq, problem } => (seq, problem),
        intact => panic!("tampering not detected: {intact:?}"),
    }
}

#[test]
fn audit_chain_detects_an_edited_event() {
    let (_dir, path, mut store) = populated();
    assert!(matches!(
        store.verify_audit_chain().expect("verify"),
        AuditVerification::Intact { .. }
    ));
    raw(&path)
        .execute(
            "UPDATE audit_events SET payload_json = '{\"forged\":true}' WHERE seq = 5",
            [],
        )
        .expect("tamper");
    assert_eq!(broken_at(&mut store), (5, AuditProblem::DigestMismatch));
}

#[test]
fn audit_chain_detects_a_deleted_event() {
    let (_dir, path, mut store) = populated();
    raw(&path)
        .execute("DELETE FROM audit_events WHERE seq = 4", [])
        .expect("tamper");
    assert_eq!(
        broken_at(&mut store),
        (5, AuditProblem::Gap { expected: 4 })
    );
}

#[test]
fn audit_chain_detects_reordered_events() {
    let (_dir, path, mut store) = populated();
    // Swap the bodies (and digests) of events 6 and 7, keeping seq numbers.
    let conn = raw(&path);
    conn.execute_batch(
        "UPDATE audit_events SET seq = -6 WHERE seq = 6;
         UPDATE audit_events SET seq = 6 WHERE seq = 7;
         UPDATE audit_events SET seq = 7 WHERE seq = -6;",
    )
    .expect("tamper");
    let (seq, problem) = broken_at(&mut store);
    assert_eq!(seq, 6);
    assert!(matches!(
        problem,
        AuditProblem::BadLink | AuditProblem::DigestMismatch
    ));
}

#[test]
fn audit_chain_detects_tail_truncation() {
    let (_dir, path, mut store) = populated();
    raw(&path)
        .execute(
            "DELETE FROM audit_events WHERE seq = (SELECT max(seq) FROM audit_events)",
            [],
        )
        .expect("tamper");
    assert!(matches!(
        broken_at(&mut store).1,
        AuditProblem::HeadMismatch { .. }
    ));
}

#[test]
fn stored_receipt_mutation_is_detected() {
    let (_dir, path, mut store) = populated();
    store.verify_write_receipt("p-a1").expect("intact receipt");
    raw(&path)
        .execute(
            "UPDATE proposals SET input_json = replace(input_json, 'extractor-v1', 'extractor-v2')
             WHERE proposal_id = 'p-a1'",
            [],
        )
        .expect("tamper");
    assert!(matches!(
        store.verify_write_receipt("p-a1"),
        Err(StoreError::ReceiptMismatch(_))
    ));
}

/// Every table's rows, in rowid order, as text.
pub(crate) fn dump(path: &std::path::Path) -> Vec<String> {
    let conn = raw(path);
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("tables")
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    let mut out = Vec::new();
    for table in tables {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {table} ORDER BY rowid"))
            .expect("select");
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                let mut line = format!("{table}:");
                for idx in 0..n {
                    line.push_str(&format!("{:?}|", r.get_ref(idx)?));
                }
                Ok(line)
            })
            .expect("rows");
        for row in rows {
            out.push(row.expect("row"));
        }
    }
    out
}

type Op = fn(&mut SqliteStore) -> Result<(), StoreError>;

fn supersede(store: &mut SqliteStore) -> Result<(), StoreError> {
    let mut spec = Spec::principal(fixtures::TENANT_A, "alice", "a1-v2");
    spec.supersedes = Some(("a1".into(), 1));
    match store.write(&spec.build())?.decision {
        WriteDecision::Accepted { .. } => Ok(()),
        other => panic!("supersession rejected: {other:?}"),
    }
}

fn batch(store: &mut SqliteStore) -> Result<(), StoreError> {
    let requests: Vec<_> = ["b1", "b2", "b3"]
        .iter()
        .map(|id| Spec::workspace(fixtures::TENANT_A, "alice", id).build())
        .collect();
    store.write_batch(&requests).map(|_| ())
}

/// A policy change with its settings and the re-binding of both grants.
fn tenant_policy(store: &mut SqliteStore) -> Result<(), StoreError> {
    let mut policy = fixtures::policy(fixtures::TENANT_A);
    policy.policy_sha256 = fixtures::label("policy/tenant-a/v2");
    store.put_tenant_policy(&mosaic_store::directory::TenantPolicyUpdate {
        policy,
        at_ms: T0 + 5,
        claim_updates: Some("review".into()),
        write_guards_json: Some("{}".into()),
    })
}

/// An earlier server's keys, tenant settings and verifier.
fn import_directory(store: &mut SqliteStore) -> Result<(), StoreError> {
    use mosaic_store::directory::{ApiKey, DirectoryImport, StoredVerifier, TenantSettings};
    let key = |id: &str, role: &str, tenant: Option<&str>| ApiKey {
        key_id: id.into(),
        key_sha256: fixtures::label(id),
        role: role.into(),
        tenant_id: tenant.map(Into::into),
        principal_id: tenant.map(|_| "alice".to_owned()),
        bounds_json: None,
        created_at_ms: T0,
        disabled: false,
    };
    let imported = store.import_directory(&DirectoryImport {
        keys: vec![
            key("k-admin", "admin", None),
            key("k-alice", "principal", Some(fixtures::TENANT_A)),
        ],
        tenants: vec![TenantSettings {
            tenant_id: fixtures::TENANT_A.into(),
            policy_valid_from_ms: T0 - 1,
            claim_updates: Some("review".into()),
            write_guards_json: None,
        }],
        policy_history: vec![(fixtures::TENANT_A.into(), fixtures::label("old"), T0 - 9)],
        verifiers: vec![StoredVerifier {
            tenant_id: fixtures::TENANT_A.into(),
            verifier_id: "v1".into(),
            verifier_release: "checker-1".into(),
            public_key_hex: "ab".repeat(32),
            created_at_ms: T0,
            disabled: false,
        }],
        settings: vec![("embedder".into(), "e-old".into())],
    })?;
    assert!(imported, "a new store has an earlier file to import");
    Ok(())
}

fn withdraw(store: &mut SqliteStore) -> Result<(), StoreError> {
    let digest = fixtures::consent_digest(&fixtures::consent(fixtures::TENANT_A, "alice"));
    store
        .withdraw_consent(
            fixtures::TENANT_A,
            &digest,
            &fixtures::authorization("alice"),
            T0 + 5,
        )
        .map(|_| ())
}

fn full_deletion(store: &mut SqliteStore) -> Result<(), StoreError> {
    let token = store.revoke(
        "a2",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0 + 5,
    )?;
    let requested = store.request_deletion(token, T0 + 6)?;
    publish_all(store, &test_config().required_index_targets, T0 + 7)?;
    let acknowledged = store.confirm_indexes_acknowledged(requested, T0 + 8)?;
    let erased = store.erase(acknowledged, T0 + 9)?;
    store.finalize_deletion(erased, T0 + 10).map(|_| ())
}

fn review(store: &mut SqliteStore) -> Result<(), StoreError> {
    let mut spec = Spec::principal(fixtures::TENANT_A, "alice", "c1");
    spec.conflicts = vec![mosaic_harness::memory_write::ConflictObservation {
        observation_id: "obs".into(),
        existing_record_id: "a3".into(),
        relation: mosaic_harness::memory_write::ConflictRelation::Contradicts,
        detector_release: "detector-v1".into(),
        existing_claim: None,
    }];
    let outcome = store.write(&spec.build())?;
    let WriteDecision::Rejected {
        review_case_ids, ..
    } = outcome.decision
    else {
        panic!("conflict must reject");
    };
    store
        .resolve_review(
            &review_case_ids[0],
            ReviewAction::ContestExisting,
            &fixtures::authorization("reviewer"),
            T0 + 11,
        )
        .map(|_| ())
}

/// Fails the n-th statement for n = 1, 2, ... until the operation succeeds,
/// and checks each failure left the database exactly as before (and each
/// single-transaction success moved it). Multi-transaction operations
/// (`full_deletion`) check that every prefix of committed steps is a
/// consistent state instead.
#[test]
fn injected_faults_are_all_or_nothing() {
    let cases: [(&str, Op, bool); 7] = [
        ("supersede", supersede, true),
        ("tenant_policy", tenant_policy, true),
        ("import_directory", import_directory, true),
        ("batch", batch, true),
        ("withdraw_consent", withdraw, true),
        ("review", review, false),
        ("full_deletion", full_deletion, false),
    ];
    let (_dir, base_path, base) = populated();
    drop(base);
    for (name, op, single_tx) in cases {
        let mut n = 1;
        loop {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("store.sqlite");
            std::fs::copy(&base_path, &path).expect("copy");
            let before = dump(&path);
            let mut store = SqliteStore::open(&path, test_config()).expect("open");
            store.inject_fault_at(Some(n));
            let result = op(&mut store);
            drop(store);
            let mut reopened = SqliteStore::open(&path, test_config()).expect("reopen");
            let report = reopened.integrity_check().expect("integrity");
            assert!(report.is_ok(), "{name} fault {n}: {report:?}");
            match result {
                Err(StoreError::InjectedFault(at)) => {
                    assert_eq!(at, n);
                    if single_tx {
                        assert_eq!(
                            dump(&path),
                            before,
                            "{name}: fault {n} left a partial write"
                        );
                    }
                }
                Ok(()) => {
                    assert_ne!(dump(&path), before, "{name}: success changed nothing");
                    assert!(n > 3, "{name}: suspiciously few statements");
                    break;
                }
                Err(other) => panic!("{name} fault {n}: unexpected {other:?}"),
            }
            n += 1;
            assert!(n < 500, "{name}: never succeeded");
        }
    }
}

#[test]
fn resumed_revocation_continues_after_restart() {
    let (_dir, path, mut store) = populated();
    let token = store
        .revoke(
            "a1",
            &RevocationReason::Requested,
            &fixtures::authorization("alice"),
            T0 + 5,
        )
        .expect("revoke");
    store.request_deletion(token, T0 + 6).expect("request");
    drop(store);
    let mut store = SqliteStore::open(&path, test_config()).expect("reopen");
    publish_all(&mut store, &test_config().required_index_targets, T0 + 7).expect("acks");
    let Some(RevocationState::DeletionRequested(token)) =
        store.resume_revocation("a1").expect("resume")
    else {
        panic!("stage lost across restart");
    };
    let acknowledged = store
        .confirm_indexes_acknowledged(token, T0 + 8)
        .expect("confirm");
    let erased = store.erase(acknowledged, T0 + 9).expect("erase");
    let receipt = store.finalize_deletion(erased, T0 + 10).expect("finalize");
    assert!(receipt.verify());
    // No content survives anywhere in the file's tables.
    let content = Spec::principal(fixtures::TENANT_A, "alice", "a1").content();
    assert!(!dump(&path).iter().any(|row| row.contains(&content)));
}

#[test]
fn every_error_variant_formats() {
    let errors = [
        StoreError::SchemaTooNew {
            found: 2,
            supported: 1,
        },
        StoreError::NotAStore("x".into()),
        StoreError::Backend("x".into()),
        StoreError::InjectedFault(3),
        StoreError::Corrupt("x".into()),
        StoreError::ContentDigestMismatch,
        StoreError::Gate("x".into()),
        StoreError::NotFound {
            what: "record",
            id: "r".into(),
        },
        StoreError::ProposalIdReused("p".into()),
        StoreError::StaleGeneration {
            line_id: "l".into(),
            expected_record_id: "a".into(),
            expected_generation: 1,
            found_record_id: "b".into(),
            found_generation: 2,
        },
        StoreError::InvalidState {
            record_id: "r".into(),
            state: "revoked".into(),
            operation: "revoke",
        },
        StoreError::StaleIndexGeneration {
            record_id: "r".into(),
            target: "lexical".into(),
            held: 1,
            current: 2,
        },
        StoreError::RevocationNotReady {
            record_id: "r".into(),
            reason: "x".into(),
        },
        StoreError::RecordIdInUse("r".into()),
        StoreError::ReceiptMismatch("x".into()),
        StoreError::InvalidBatch("x".into()),
        StoreError::InvalidArgument("x".into()),
    ];
    for error in errors {
        assert!(!error.to_string().is_empty(), "{error:?}");
    }
}

/// A deferred commit runs at `synchronous = NORMAL` and leaves the
/// connection at FULL again, whether it committed or failed: otherwise
/// every later write of the connection would return before the disk has it.
#[test]
fn a_deferred_acknowledgement_leaves_the_connection_synced() {
    let (_dir, _path, mut store) = seeded();
    let config = test_config();
    store
        .write(&Spec::principal(fixtures::TENANT_A, "alice", "r1").build())
        .expect("write");
    let acks = |store: &mut SqliteStore| -> Vec<IndexAck> {
        config
            .required_index_targets
            .iter()
            .flat_map(|target| {
                store
                    .pending_outbox(target, 10)
                    .expect("pending")
                    .into_iter()
                    .map(|task| IndexAck {
                        record_id: task.record_id,
                        generation: task.generation,
                        target: task.target,
                    })
            })
            .collect()
    };
    let pending = acks(&mut store);
    assert_eq!(pending.len(), config.required_index_targets.len());
    // A failed deferred transaction: rolled back, the level restored.
    store.inject_fault_at(Some(1));
    assert!(matches!(
        store.acknowledge_indexes(&pending, T0 + 1, Durability::Deferred),
        Err(StoreError::InjectedFault(1))
    ));
    store.inject_fault_at(None);
    assert_eq!(
        store.synchronous_level().expect("synchronous"),
        mosaic_store::sqlite::SYNCHRONOUS_FULL
    );
    assert_eq!(acks(&mut store), pending, "nothing was acknowledged");
    // A committed one: the record is active, the level restored.
    let results = store
        .acknowledge_indexes(&pending, T0 + 2, Durability::Deferred)
        .expect("acknowledge");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(
        store
            .record_states_of(fixtures::TENANT_A, &["r1".to_owned()])
            .expect("states"),
        vec![("r1".to_owned(), mosaic_store::RecordState::Active)]
    );
    assert_eq!(
        store.synchronous_level().expect("synchronous"),
        mosaic_store::sqlite::SYNCHRONOUS_FULL
    );
}

#[test]
fn version_8_files_gain_the_audit_tree_in_place() {
    use mosaic_harness::merkle;
    let (_dir, path, mut store) = populated();
    let AuditVerification::Intact {
        events,
        root_sha256,
        ..
    } = store.verify_audit_chain().expect("verify")
    else {
        panic!("intact");
    };
    drop(store);
    raw(&path)
        .execute_batch(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} PRAGMA user_version = 8;"
        ))
        .expect("downgrade");
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    // The tree over the earlier events is the one the log had grown.
    let head = store.audit_tree_head().expect("head");
    assert_eq!((head.tree_size, &head.root_sha256), (events, &root_sha256));
    assert!(matches!(
        store.verify_audit_chain().expect("verify"),
        AuditVerification::Intact { .. }
    ));
    // And it keeps growing by appends only.
    store
        .write(&Spec::principal(fixtures::TENANT_A, "alice", "r-after").build())
        .expect("write");
    let later = store.audit_tree_head().expect("head");
    assert!(later.tree_size > events);
    let (proof, ..) = store
        .audit_consistency_proof(events, later.tree_size)
        .expect("proof");
    let hash = |h: &str| merkle::from_hex(h).expect("hex");
    assert_eq!(
        proof.verify(&hash(&root_sha256), &hash(&later.root_sha256)),
        Ok(())
    );
    // An empty version 8 file starts with the empty tree.
    let empty = tempfile::tempdir().expect("tempdir");
    let path = empty.path().join("store.sqlite");
    drop(SqliteStore::open(&path, test_config()).expect("open"));
    raw(&path)
        .execute_batch(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} PRAGMA user_version = 8;"
        ))
        .expect("downgrade");
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    let head = store.audit_tree_head().expect("head");
    assert_eq!(head.tree_size, 0);
    assert_eq!(head.root_sha256, merkle::to_hex(&merkle::empty_root()));
}

#[test]
fn audit_tree_detects_an_edited_leaf_and_a_rewritten_tree() {
    let (_dir, path, mut store) = populated();
    let conn = raw(&path);
    let (size, range): (i64, String) = conn
        .query_row(
            "SELECT int_value, text_value FROM meta WHERE key = 'audit_tree'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("tree");
    let leaf: String = conn
        .query_row(
            "SELECT leaf_sha256 FROM audit_events WHERE seq = 3",
            [],
            |r| r.get(0),
        )
        .expect("leaf");
    // A leaf hash that is not its body's.
    conn.execute(
        "UPDATE audit_events SET leaf_sha256 = ?1 WHERE seq = 3",
        [&leaf.replace(&leaf[..1], if &leaf[..1] == "0" { "1" } else { "0" })],
    )
    .expect("tamper");
    assert_eq!(broken_at(&mut store), (3, AuditProblem::LeafMismatch));
    conn.execute(
        "UPDATE audit_events SET leaf_sha256 = ?1 WHERE seq = 3",
        [&leaf],
    )
    .expect("restore");
    assert!(matches!(
        store.verify_audit_chain().expect("verify"),
        AuditVerification::Intact { .. }
    ));
    // A stored tree that is not the tree of the leaves.
    let forged = range.replacen(&range[..1], if &range[..1] == "0" { "1" } else { "0" }, 1);
    conn.execute(
        "UPDATE meta SET text_value = ?1 WHERE key = 'audit_tree'",
        [&forged],
    )
    .expect("tamper");
    assert_eq!(
        broken_at(&mut store),
        (
            u64::try_from(size).expect("size"),
            AuditProblem::TreeMismatch
        )
    );
    // A tree whose size is not the chain's refuses the next append, which
    // changes nothing.
    conn.execute(
        "UPDATE meta SET int_value = int_value - 1, text_value = ?1 WHERE key = 'audit_tree'",
        [&range],
    )
    .expect("tamper");
    let before: i64 = conn
        .query_row("SELECT count(*) FROM audit_events", [], |r| r.get(0))
        .expect("count");
    assert!(
        store
            .write(&Spec::principal(fixtures::TENANT_A, "alice", "r-x").build())
            .is_err()
    );
    let after: i64 = conn
        .query_row("SELECT count(*) FROM audit_events", [], |r| r.get(0))
        .expect("count");
    assert_eq!(before, after);
}

#[test]
fn version_10_files_gain_proposal_owners_in_place() {
    let (_dir, path, mut store) = seeded();
    let kept = Spec::workspace(fixtures::TENANT_A, "bob", "r-kept").build();
    let gone = Spec::principal(fixtures::TENANT_A, "alice", "r-gone").build();
    for request in [&kept, &gone] {
        assert!(store.write(request).expect("write").is_accepted());
    }
    // An erased record's proposal keeps no gate input to name its principal.
    let config = test_config();
    publish_all(&mut store, &config.required_index_targets, T0).expect("publish");
    erase_as_alice(&mut store, "r-gone", &config.required_index_targets, T0 + 1).expect("erase");
    drop(store);
    raw(&path)
        .execute_batch(&format!("{UNDO_V12} {UNDO_V11} PRAGMA user_version = 10;"))
        .expect("downgrade");
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let owner = |store: &mut SqliteStore, id: &str| {
        store
            .proposal_owner(id)
            .expect("owner")
            .and_then(|o| o.principal_id)
    };
    assert_eq!(
        owner(&mut store, &kept.proposal.proposal_id).as_deref(),
        Some("bob"),
        "from the stored gate input"
    );
    assert_eq!(
        owner(&mut store, &gone.proposal.proposal_id).as_deref(),
        Some("alice"),
        "from the record catalog"
    );
    // An earlier server's own file is still to be imported.
    assert!(!store.intake_imported().expect("flag"));
    assert_eq!(
        store
            .export_request(fixtures::TENANT_A, "r-kept")
            .expect("copy"),
        None
    );
}

/// A version 11 file (before the read scopes' commitments) gains them in
/// place: every record's entry in its scope, in the state it has (active,
/// superseded, revoked; an erased record in none), and roots equal to the
/// roots recomputed from the records; later changes keep them so.
#[test]
fn version_11_files_gain_scope_commitments_in_place() {
    let config = test_config();
    let (_dir, path, mut store) = seeded();
    for id in ["old-1", "old-2", "old-3"] {
        store
            .write(&Spec::principal(fixtures::TENANT_A, "alice", id).build())
            .expect("write");
    }
    store
        .write(&Spec::workspace(fixtures::TENANT_A, "alice", "old-w").build())
        .expect("write");
    publish_all(&mut store, &config.required_index_targets, T0).expect("publish");
    let mut next = Spec::principal(fixtures::TENANT_A, "alice", "old-4");
    next.supersedes = Some(("old-1".into(), 1));
    store.write(&next.build()).expect("supersede");
    store
        .revoke(
            "old-2",
            &mosaic_store::RevocationReason::Requested,
            &fixtures::authorization("alice"),
            T0 + 1,
        )
        .expect("revoke");
    let before = mosaic_store::conformance::assert_scope_roots(&mut store, fixtures::TENANT_A)
        .expect("roots");
    drop(store);
    raw(&path)
        .execute_batch(&format!("{UNDO_V12} PRAGMA user_version = 11;"))
        .expect("downgrade");
    let mut store = SqliteStore::open(&path, config.clone()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let after = mosaic_store::conformance::assert_scope_roots(&mut store, fixtures::TENANT_A)
        .expect("roots");
    // The same roots; a backfilled scope's generation counts its records.
    let roots = |c: &[mosaic_harness::memory_scope::ScopeCommitment]| {
        c.iter().map(|c| c.root_sha256.clone()).collect::<Vec<_>>()
    };
    assert_eq!(roots(&after), roots(&before));
    let principal = after
        .iter()
        .find(|c| {
            c.scope
                == mosaic_harness::memory_scope::ReadScope::Principal {
                    principal_id: "alice".into(),
                }
        })
        .expect("alice's scope");
    assert_eq!(principal.generation, 4);
    let q = alice_query(T0 + 10);
    let (found, _) = store.eligible_unknown(&q, &|_| true).expect("read");
    store
        .write(&Spec::principal(fixtures::TENANT_A, "alice", "new-1").build())
        .expect("write");
    mosaic_store::conformance::assert_scope_roots(&mut store, fixtures::TENANT_A)
        .expect("roots after a write");
    // The backfilled entries are marked as changed at no generation: only
    // the later write is a change.
    let (changes, _) = store
        .eligible_changes(&q, &found.scope_commitments, &|_| true)
        .expect("changes")
        .expect("incremental");
    assert_eq!(changes.changed, ["new-1"]);
}

/// Alice's eligibility query in tenant A's workspace, run 1, at `now`.
fn alice_query(now: u64) -> EligibilityQuery {
    EligibilityQuery {
        tenant_id: fixtures::TENANT_A.into(),
        policy_sha256: fixtures::policy(fixtures::TENANT_A).policy_sha256,
        principal_id: "alice".into(),
        workspace_id: fixtures::WORKSPACE.into(),
        run_id: "run-1".into(),
        now_unix_ms: now,
        kinds: MemoryKind::ALL.to_vec(),
    }
}

/// What version 13 added: the scope entries' change markers and the
/// heads' removal generations.
const UNDO_V13: &str = "DROP INDEX idx_scope_entries_changed;
    ALTER TABLE scope_entries DROP COLUMN changed_generation;
    ALTER TABLE scope_heads DROP COLUMN removed_generation;";

/// A version 12 file gains the change markers in place: its entries are
/// marked at generation 0, so a reader whose commitments were read before
/// the upgrade (or after it) is told of the later changes only, an
/// erasure after the upgrade is noticed, and the file checks clean.
#[test]
fn version_12_files_gain_scope_change_markers_in_place() {
    let config = test_config();
    let (_dir, path, mut store) = seeded();
    for id in ["old-1", "old-2", "old-3"] {
        store
            .write(&Spec::principal(fixtures::TENANT_A, "alice", id).build())
            .expect("write");
    }
    publish_all(&mut store, &config.required_index_targets, T0).expect("publish");
    let q = alice_query(T0 + 10);
    let (before, _) = store.eligible_unknown(&q, &|_| true).expect("read");
    assert_eq!(before.ids.len(), 3);
    drop(store);
    let conn = raw(&path);
    undo_v15(&conn);
    conn.execute_batch(&format!("{UNDO_V13} PRAGMA user_version = 12;"))
        .expect("downgrade");
    drop(conn);
    let mut store = SqliteStore::open(&path, config.clone()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let (after, _) = store.eligible_unknown(&q, &|_| true).expect("read");
    assert_eq!(after, before, "the migration changes no answer");
    let (nothing, _) = store
        .eligible_changes(&q, &before.scope_commitments, &|_| true)
        .expect("changes")
        .expect("incremental");
    assert_eq!(nothing.changed, Vec::<String>::new());
    store
        .write(&Spec::principal(fixtures::TENANT_A, "alice", "new-1").build())
        .expect("write");
    let auth = fixtures::authorization("alice");
    store
        .revoke("old-1", &RevocationReason::Requested, &auth, T0 + 1)
        .expect("revoke");
    let (changes, _) = store
        .eligible_changes(&q, &before.scope_commitments, &|_| true)
        .expect("changes")
        .expect("incremental");
    assert_eq!(changes.changed, ["new-1", "old-1"]);
    erase_as_alice(&mut store, "old-2", &config.required_index_targets, T0 + 2).expect("erase");
    assert_eq!(
        store
            .eligible_changes(&q, &changes.scope_commitments, &|_| true)
            .expect("changes"),
        None,
        "an erasure since"
    );
    let report = store.integrity_check().expect("check");
    assert!(report.is_ok(), "{report:?}");
}

/// What version 14 added: the store's access generation.
const UNDO_V14: &str = "DELETE FROM meta WHERE key = 'access_generation';";

/// A version 13 file gains the access generation in place, at 0, and a
/// grant put afterwards advances it (a file without the row would make
/// every access check answer `Corrupt`).
#[test]
fn version_13_files_gain_the_access_generation_in_place() {
    let (_dir, path, store) = seeded();
    drop(store);
    let conn = raw(&path);
    undo_v15(&conn);
    conn.execute_batch(&format!("{UNDO_V14} PRAGMA user_version = 13;"))
        .expect("downgrade");
    drop(conn);
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let first = store.access_stamp().expect("access stamp");
    assert_eq!(first.access_generation, 0);
    let mut narrowed = fixtures::grant(fixtures::TENANT_A, "alice");
    narrowed.grant_id = "grant-alice-after-upgrade".into();
    store.put_grant(&narrowed, T0).expect("grant");
    let after = store.access_stamp().expect("access stamp");
    assert_eq!(after.access_generation, 1);
    assert_ne!(after.change, first.change);
}

/// A scope page row: `(tenant, scope_type, scope_a, scope_b, page, hashes)`.
type PageRow = (String, String, String, String, i64, Vec<u8>);

/// The file's scope pages, `rest` appended to the statement (a filter, an
/// order).
fn scope_pages(conn: &Connection, rest: &str) -> Vec<PageRow> {
    conn.prepare(&format!(
        "SELECT tenant_id, scope_type, scope_a, scope_b, page, hashes FROM scope_pages {rest}"
    ))
    .expect("prepare")
    .query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        ))
    })
    .expect("pages")
    .collect::<Result<_, _>>()
    .expect("pages")
}

/// Takes a file's scope trees back to one row per node, as version 14
/// kept them (`scope_nodes`, a node never written absent), from the pages
/// version 15 keeps.
fn undo_v15(conn: &Connection) {
    conn.execute_batch(
        "CREATE TABLE scope_nodes (
            tenant_id TEXT NOT NULL,
            scope_type TEXT NOT NULL,
            scope_a TEXT NOT NULL,
            scope_b TEXT NOT NULL,
            level INTEGER NOT NULL,
            idx INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            PRIMARY KEY (tenant_id, scope_type, scope_a, scope_b, level, idx)
        ) STRICT;",
    )
    .expect("nodes table");
    let pages = scope_pages(conn, "");
    for (tenant, st, a, b, page, hashes) in pages {
        for (level, idx, sha256) in crate::common::nodes_of_page(page, &hashes) {
            conn.execute(
                "INSERT INTO scope_nodes VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                rusqlite::params![tenant, st, a, b, level, idx, sha256],
            )
            .expect("node");
        }
    }
    conn.execute_batch("DROP TABLE scope_pages;")
        .expect("drop pages");
}

/// A version 14 file, its trees' nodes one row each, gains the pages in
/// place: every scope's root and every record's inclusion proof read the
/// same before and after (an erased record's emptied subtree among them),
/// the file checks clean, and a write after the upgrade keeps its scope's
/// root that of its records.
#[test]
fn version_14_files_gain_the_scope_pages_in_place() {
    let (_dir, path, mut store) = seeded();
    let ids = crate::common::fill_scopes(&mut store);
    let before = crate::common::scope_proofs(&mut store, &ids);
    assert!(before.1[0].is_none() && before.1[1..].iter().all(Option::is_some));
    drop(store);
    let conn = raw(&path);
    undo_v15(&conn);
    conn.execute_batch("PRAGMA user_version = 14;")
        .expect("downgrade");
    let roots: i64 = conn
        .query_row(
            "SELECT count(*) FROM scope_nodes n JOIN scope_heads h USING (tenant_id, scope_type, scope_a, scope_b) WHERE n.level = 10",
            [],
            |r| r.get(0),
        )
        .expect("roots");
    assert_eq!(roots, 3, "one root node per scope");
    drop(conn);
    let mut store = SqliteStore::open(&path, test_config()).expect("migrate");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    assert_eq!(crate::common::scope_proofs(&mut store, &ids), before);
    let report = store.integrity_check().expect("check");
    assert!(report.is_ok(), "{report:?}");
    let tables: Vec<String> = raw(&path)
        .prepare("SELECT name FROM sqlite_master WHERE name LIKE 'scope_%' AND type = 'table' ORDER BY name")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("tables")
        .collect::<Result<_, _>>()
        .expect("tables");
    assert_eq!(tables, ["scope_entries", "scope_heads", "scope_pages"]);
    store
        .write(&Spec::principal(fixtures::TENANT_A, "alice", "after-upgrade").build())
        .expect("write");
    mosaic_store::conformance::assert_scope_roots(&mut store, fixtures::TENANT_A).expect("roots");
    assert!(store.integrity_check().expect("check").is_ok());
}

/// `integrity_check` recomputes every read scope's tree from the records
/// as stored and names each stored head, node and entry that differs
/// (what `mosaic doctor` reports). Layer: the store's cross-table check,
/// against a file edited behind the store's back.
#[test]
fn integrity_check_names_a_scope_commitment_that_is_not_its_records() {
    let (_dir, path, mut store) = seeded();
    for (principal, id) in [("alice", "r-2"), ("bob", "r-1"), ("alice", "r-3")] {
        let request = Spec::workspace(fixtures::TENANT_A, principal, id).build();
        assert!(store.write(&request).expect("write").is_accepted());
    }
    let report = store.integrity_check().expect("check");
    assert!(report.is_ok(), "{report:?}");
    assert!(report.scope_commitment_mismatches.is_empty());
    let conn = raw(&path);
    let edit = |sql: &str| {
        conn.execute_batch(sql).expect("edit");
    };
    let findings = |store: &mut SqliteStore| {
        let report = store.integrity_check().expect("check");
        assert_eq!(
            report.is_ok(),
            report.scope_commitment_mismatches.is_empty()
        );
        report.scope_commitment_mismatches
    };
    let other = "ab".repeat(32);
    // One inner node of one scope's tree: the first level-3 node written
    // in a lower page (levels 0 to 4 below a node of level 5).
    let pages = scope_pages(
        &conn,
        "WHERE page > 0 ORDER BY tenant_id, scope_type, scope_a, scope_b, page",
    );
    let (tenant, st, a, b, page, kept) = pages[0].clone();
    let scope = format!("{st}:{a}");
    let slot = (56..60)
        .find(|slot| kept[32 * slot..32 * (slot + 1)].iter().any(|x| *x != 0))
        .expect("a level-3 node");
    let (level, idx) = crate::common::node_of_slot(page, slot);
    assert_eq!(level, 3);
    let put = |hashes: &[u8]| {
        conn.execute(
            "UPDATE scope_pages SET hashes = ?1 WHERE tenant_id = ?2 AND scope_type = ?3
             AND scope_a = ?4 AND scope_b = ?5 AND page = ?6",
            rusqlite::params![hashes, tenant, st, a, b, page],
        )
        .expect("edit a page");
    };
    let mut edited = kept.clone();
    edited[32 * slot..32 * (slot + 1)].copy_from_slice(&[0xab; 32]);
    put(&edited);
    let found = findings(&mut store);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains(&format!("node ({level}, {idx})")) && found[0].contains(&scope),
        "{found:?}"
    );
    // The node zeroed: never written, and so missing.
    edited[32 * slot..32 * (slot + 1)].copy_from_slice(&[0; 32]);
    put(&edited);
    let found = findings(&mut store);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains(&format!("node ({level}, {idx}) is missing")),
        "{found:?}"
    );
    // A page cut short: not a page, and its nodes missing. A read of the
    // scope's tree through it answers `Corrupt`, not a panic.
    put(&kept[..kept.len() - 1]);
    let found = findings(&mut store);
    assert!(
        found
            .iter()
            .any(|f| f.contains(&format!("page {page}")) && f.contains(&scope)),
        "{found:?}"
    );
    let bucket_node = (0..32)
        .find(|slot| kept[32 * slot..32 * (slot + 1)].iter().any(|x| *x != 0))
        .map(|slot| crate::common::node_of_slot(page, slot).1)
        .expect("a bucket");
    let in_bucket: String = conn
        .query_row(
            "SELECT record_id FROM scope_entries WHERE tenant_id = ?1 AND scope_type = ?2
             AND scope_a = ?3 AND scope_b = ?4 AND bucket = ?5 LIMIT 1",
            rusqlite::params![tenant, st, a, b, bucket_node],
            |r| r.get(0),
        )
        .expect("an entry of the bucket");
    assert!(matches!(
        store.scope_inclusion(&tenant, &in_bucket),
        Err(StoreError::Corrupt(_))
    ));
    put(&kept);
    assert!(findings(&mut store).is_empty());
    // One record's entry in another state than the record's.
    let state: String = conn
        .query_row(
            "SELECT state FROM scope_entries WHERE record_id = 'r-1'",
            [],
            |r| r.get(0),
        )
        .expect("entry");
    edit("UPDATE scope_entries SET state = 'revoked' WHERE record_id = 'r-1'");
    let found = findings(&mut store);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("entry of r-1"), "{found:?}");
    edit(&format!(
        "UPDATE scope_entries SET state = '{state}' WHERE record_id = 'r-1'"
    ));
    assert!(findings(&mut store).is_empty());
    // An entry gone: the record has none.
    let saved: String = conn
        .query_row(
            "SELECT entry_sha256 FROM scope_entries WHERE record_id = 'r-2'",
            [],
            |r| r.get(0),
        )
        .expect("entry");
    edit("CREATE TABLE kept_entry AS SELECT * FROM scope_entries WHERE record_id = 'r-2'");
    edit("DELETE FROM scope_entries WHERE record_id = 'r-2'");
    let found = findings(&mut store);
    assert!(
        found.iter().any(|f| f.contains("record r-2 has no entry")),
        "{found:?}"
    );
    edit("INSERT INTO scope_entries SELECT * FROM kept_entry; DROP TABLE kept_entry");
    assert_eq!(saved.len(), 64);
    // A head whose root is another tree's.
    edit(&format!(
        "UPDATE scope_heads SET root_sha256 = '{other}'
         WHERE rowid = (SELECT MIN(rowid) FROM scope_heads)"
    ));
    let found = findings(&mut store);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("stored root") && found[0].contains(&other),
        "{found:?}"
    );
    // A record's body edited: its entry, the nodes above it and the root
    // are no longer its own.
    edit(
        "UPDATE scope_heads SET root_sha256 = (SELECT lower(hex(substr(p.hashes, 1, 32))) FROM scope_pages p WHERE p.page = 0 AND p.tenant_id = scope_heads.tenant_id AND p.scope_type = scope_heads.scope_type AND p.scope_a = scope_heads.scope_a AND p.scope_b = scope_heads.scope_b)",
    );
    assert!(findings(&mut store).is_empty());
    edit(
        "UPDATE records SET record_json = replace(record_json, '\"token_count\":', '\"token_count\":1') WHERE record_id = 'r-3'",
    );
    let found = findings(&mut store);
    assert!(
        found.iter().any(|f| f.contains("entry of r-3")),
        "{found:?}"
    );
    assert!(found.iter().any(|f| f.contains("stored root")), "{found:?}");
}

/// The incremental eligibility read costs the changes, not the scope:
/// after one write into a scope of a hundred records it names that one
/// record, and its statements are a range read of the change index per
/// scope and the eligibility statements restricted to the changed records,
/// each planned as primary-key lookups of them, with no scan of a table.
#[test]
fn eligible_changes_read_the_change_index_and_the_changed_records_only() {
    let (_dir, _path, mut store) = seeded();
    let batch: Vec<_> = (0..100)
        .map(|n| Spec::principal(fixtures::TENANT_A, "alice", &format!("old-{n:03}")).build())
        .collect();
    for outcome in store.write_batch(&batch).expect("batch") {
        assert!(outcome.is_accepted());
    }
    let targets = test_config().required_index_targets;
    publish_all(&mut store, &targets, T0).expect("publish");
    let q = EligibilityQuery {
        tenant_id: fixtures::TENANT_A.into(),
        policy_sha256: fixtures::policy(fixtures::TENANT_A).policy_sha256,
        principal_id: "alice".into(),
        workspace_id: fixtures::WORKSPACE.into(),
        run_id: "run-1".into(),
        now_unix_ms: T0 + 10,
        kinds: MemoryKind::ALL.to_vec(),
    };
    let (found, _) = store.eligible_unknown(&q, &|_| true).expect("full read");
    assert_eq!(found.ids.len(), 100);
    store
        .write(&Spec::principal(fixtures::TENANT_A, "alice", "new").build())
        .expect("write");
    publish_all(&mut store, &targets, T0).expect("publish");
    let (changes, bodies) = store
        .eligible_changes(&q, &found.scope_commitments, &|_| false)
        .expect("changes")
        .expect("incremental");
    assert_eq!(changes.changed, ["new"]);
    assert_eq!(changes.eligible, [("new".to_owned(), 1)]);
    assert_eq!(bodies.len(), 1);
    let plan = store
        .explain_eligible_changes(&q, &found.scope_commitments, &changes.changed)
        .expect("plan");
    let on_entries: Vec<_> = plan
        .iter()
        .filter(|l| l.contains("scope_entries"))
        .collect();
    assert_eq!(on_entries.len(), 4, "one per reader scope: {plan:?}");
    for line in on_entries {
        assert_eq!(
            line,
            "SEARCH scope_entries USING COVERING INDEX idx_scope_entries_changed \
             (tenant_id=? AND scope_type=? AND scope_a=? AND scope_b=? AND changed_generation>?)",
        );
    }
    // The eligibility statement and that of `stable_until` (every subject
    // shape in one), restricted to the changed ids: each a lookup of
    // the changed ids by primary key, never a range of the eligibility
    // index (that would read the scope).
    let on_records: Vec<_> = plan.iter().filter(|l| l.contains(" r ")).collect();
    assert_eq!(on_records.len(), 2, "{plan:?}");
    for line in on_records {
        assert_eq!(
            line, "SEARCH r USING INDEX sqlite_autoindex_records_1 (record_id=?)",
            "{plan:?}"
        );
    }
    assert!(
        !plan
            .iter()
            .any(|l| l.starts_with("SCAN") && !l.starts_with("SCAN keys VIRTUAL TABLE")),
        "{plan:?}"
    );
}
