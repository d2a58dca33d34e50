//! Row-level security, checked while connected as the application role
//! (not the owner, `NOSUPERUSER NOBYPASSRLS`): with tenant A set, raw SQL
//! sees none of tenant B's rows and cannot write any; the store API never
//! hands B's data to A; the role cannot switch the policies off.

use mosaic_harness::memory_write::{ConflictObservation, ConflictRelation};
use mosaic_store::audit::AuditVerification;
use mosaic_store::conformance::fixtures::{self, Spec, T0, TENANT_A, TENANT_B};
use mosaic_store::conformance::{StoreFactory, erase_as_alice, publish_all, test_config};
use mosaic_store::intake::{CapturedMessage, ExtractionJob, KeptWithRecord};
use mosaic_store::postgres::schema::{self, SCHEMA_VERSION, TENANT_TABLES};
use mosaic_store::{
    PostgresStore, ReviewAction, RevocationReason, Store, StoreError, WriteDecision,
};
use postgres::error::SqlState;
use postgres::{Client, Transaction};

use super::{PgDb, PgFactory};

/// Two tenants with rows in every tenant-bearing table: records, a derived
/// record (lineage), a revocation, a review case with an action.
fn seeded(factory: &PgFactory) -> (PgDb, PostgresStore) {
    let config = test_config();
    let db = factory.fresh().expect("fresh schema");
    let mut store = factory.connect(&db, &config).expect("connect as app role");
    for tenant in [TENANT_A, TENANT_B] {
        fixtures::seed(&mut store, tenant, &["alice"]).expect("seed");
        store
            .insert_verifier(&mosaic_store::directory::StoredVerifier {
                tenant_id: tenant.into(),
                verifier_id: "v1".into(),
                verifier_release: "checker-1".into(),
                public_key_hex: "ab".repeat(32),
                created_at_ms: T0,
                disabled: false,
            })
            .expect("verifier");
        let prefix = if tenant == TENANT_A { "a" } else { "b" };
        let writes = [
            Spec::principal(tenant, "alice", &format!("{prefix}1")),
            Spec::workspace(tenant, "alice", &format!("{prefix}-ws")),
            {
                let mut derived = Spec::workspace(tenant, "alice", &format!("{prefix}-sum"));
                derived.derived_from = vec![format!("{prefix}-ws")];
                derived
            },
        ];
        for (n, spec) in writes.into_iter().enumerate() {
            let mut request = spec.build();
            if n == 0 {
                // The rows a server keeps with a record, and a job.
                request.kept = KeptWithRecord {
                    export_request_json: Some("{}".into()),
                    message: Some(CapturedMessage {
                        tenant_id: tenant.into(),
                        principal_id: "alice".into(),
                        conversation_id: "conv".into(),
                        message_id: "m1".into(),
                        record_id: request.proposal.record_id.clone(),
                        content_sha256: "ab".repeat(32),
                        provenance_sha256: "cd".repeat(32),
                        locator_sha256: "ef".repeat(32),
                        captured_at_ms: T0,
                    }),
                };
            }
            assert!(store.write(&request).expect("write").is_accepted());
        }
        assert!(
            store
                .queue_extraction_job(&ExtractionJob {
                    job_id: format!("x-{prefix}"),
                    tenant_id: tenant.into(),
                    principal_id: "alice".into(),
                    key_id: "k".into(),
                    conversation_id: "conv".into(),
                    message_ids: vec!["m1".into()],
                    state: "pending".into(),
                    attempts: 0,
                    next_attempt_ms: T0,
                    last_error: None,
                    report_json: None,
                    created_at_ms: T0,
                })
                .expect("job")
        );
        let mut conflicting = Spec::principal(tenant, "alice", &format!("{prefix}-conflict"));
        conflicting.conflicts = vec![ConflictObservation {
            observation_id: format!("obs-{prefix}"),
            existing_record_id: format!("{prefix}1"),
            relation: ConflictRelation::Contradicts,
            detector_release: "detector-v1".into(),
            existing_claim: None,
        }];
        let outcome = store.write(&conflicting.build()).expect("conflict");
        let WriteDecision::Rejected {
            review_case_ids, ..
        } = outcome.decision
        else {
            panic!("conflict must reject");
        };
        store
            .resolve_review(
                &review_case_ids[0],
                ReviewAction::RequestEvidence,
                &fixtures::authorization("reviewer"),
                T0 + 1,
            )
            .expect("review action");
    }
    publish_all(&mut store, &config.required_index_targets, T0 + 2).expect("publish");
    for tenant in [TENANT_A, TENANT_B] {
        let pending = Spec::workspace(tenant, "alice", &format!("{tenant}-pending"));
        assert!(store.write(&pending.build()).expect("write").is_accepted());
        let prefix = if tenant == TENANT_A { "a" } else { "b" };
        let mut claimed = Spec::workspace(tenant, "alice", &format!("{prefix}-claim")).build();
        fixtures::with_claim(
            &mut claimed,
            "c1",
            "workspace:ws-main",
            "deploy_day",
            "tuesday",
        );
        assert!(store.write(&claimed).expect("write").is_accepted());
    }
    for record_id in ["a-ws", "b-ws"] {
        store
            .revoke(
                record_id,
                &RevocationReason::Requested,
                &fixtures::authorization("ops"),
                T0 + 3,
            )
            .expect("revoke");
    }
    (db, store)
}

/// A transaction of the raw application-role client, as `tenant`.
fn as_tenant<'c>(client: &'c mut Client, tenant: Option<&str>) -> Transaction<'c> {
    let mut tx = client.transaction().expect("begin");
    if let Some(tenant) = tenant {
        tx.execute(
            "SELECT set_config('mosaic.tenant_id', $1, true)",
            &[&tenant],
        )
        .expect("set tenant");
    }
    tx
}

fn count(tx: &mut Transaction<'_>, sql: &str) -> i64 {
    tx.query_one(sql, &[])
        .and_then(|row| row.try_get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Runs `sql` in its own transaction as tenant A and returns its error code.
fn refused(app: &mut Client, sql: &str) -> Option<SqlState> {
    let mut tx = as_tenant(app, Some(TENANT_A));
    match tx.execute(sql, &[]) {
        Ok(n) => panic!("{sql}: expected a refusal, changed {n} rows"),
        Err(e) => e.code().cloned(),
    }
}

#[test]
fn app_role_sees_only_the_current_tenants_rows() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, _store) = seeded(&factory);
    let mut admin = factory.admin(&db).expect("admin");
    let mut app = factory.app(&db).expect("app");
    for table in TENANT_TABLES {
        // The data is there (seen by the superuser), so the checks below
        // can fail.
        let b_rows: i64 = admin
            .query_one(
                &format!("SELECT count(*) FROM {table} WHERE tenant_id = $1"),
                &[&TENANT_B],
            )
            .and_then(|r| r.try_get(0))
            .expect("admin count");
        assert!(b_rows > 0, "{table} has no rows of tenant B to hide");

        let mut tx = as_tenant(&mut app, Some(TENANT_A));
        assert!(
            count(&mut tx, &format!("SELECT count(*) FROM {table}")) > 0,
            "{table}: tenant A must see its own rows"
        );
        assert_eq!(
            count(
                &mut tx,
                &format!("SELECT count(*) FROM {table} WHERE tenant_id = 'tenant-b'")
            ),
            0,
            "{table}: tenant B's rows are visible to tenant A"
        );
        assert_eq!(
            count(
                &mut tx,
                &format!("SELECT count(*) FROM {table} WHERE tenant_id <> 'tenant-a'")
            ),
            0,
            "{table}: another tenant's rows are visible to tenant A"
        );
        tx.commit().expect("commit");

        let mut tx = as_tenant(&mut app, None);
        assert_eq!(
            count(&mut tx, &format!("SELECT count(*) FROM {table}")),
            0,
            "{table}: rows are visible with no tenant set"
        );
        tx.commit().expect("commit");
    }
    let mut tx = as_tenant(&mut app, Some(TENANT_A));
    let stolen = tx
        .query("SELECT content FROM records WHERE record_id = 'b1'", &[])
        .expect("select");
    assert!(stolen.is_empty(), "tenant B's content read as tenant A");
}

#[test]
fn app_role_cannot_write_rows_of_another_tenant() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, _store) = seeded(&factory);
    let mut app = factory.app(&db).expect("app");
    let rls = Some(SqlState::INSUFFICIENT_PRIVILEGE);
    for sql in [
        "INSERT INTO review_cases (case_id, tenant_id, trigger_kind, proposal_id, proposed_record_id,
             existing_record_id, status, opened_at_ms)
         VALUES ('case-forged', 'tenant-b', '\"duplicate\"', 'p', 'r', 'b1', 'open', 0)",
        "INSERT INTO policies (tenant_id, policy_sha256, policy_json, updated_at_ms)
         VALUES ('tenant-c', 'x', '{}', 0)",
        "INSERT INTO audit_events (seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256, event_sha256)
         VALUES (1000000, 0, '\"policy_put\"', 'tenant-b', 'x', '{}', 'x', 'x')",
        "INSERT INTO object_tenants (kind, object_id, tenant_id) VALUES ('record', 'forged', 'tenant-b')",
        "INSERT INTO tenants (tenant_id) VALUES ('tenant-c')",
        "UPDATE records SET tenant_id = 'tenant-b' WHERE record_id = 'a1'",
    ] {
        assert_eq!(refused(&mut app, sql), rls, "{sql}");
    }
    // Another tenant's rows cannot even be found to change or delete.
    let mut tx = as_tenant(&mut app, Some(TENANT_A));
    for sql in [
        "UPDATE records SET content = 'stolen' WHERE tenant_id = 'tenant-b'",
        "UPDATE records SET content = 'stolen' WHERE record_id = 'b1'",
        "DELETE FROM outbox WHERE tenant_id = 'tenant-b'",
        "UPDATE lines SET generation = generation + 1 WHERE tenant_id = 'tenant-b'",
    ] {
        assert_eq!(tx.execute(sql, &[]).expect(sql), 0, "{sql}");
    }
    tx.commit().expect("commit");
    // Nothing of B changed (the superuser sees the truth).
    let mut admin = factory.admin(&db).expect("admin");
    let content: String = admin
        .query_one("SELECT content FROM records WHERE record_id = 'b1'", &[])
        .and_then(|r| r.try_get(0))
        .expect("b1");
    assert_eq!(content, Spec::principal(TENANT_B, "alice", "b1").content());
    let outbox: i64 = admin
        .query_one(
            "SELECT count(*) FROM outbox WHERE tenant_id = 'tenant-b'",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .expect("outbox");
    assert!(outbox > 0);
}

#[test]
fn store_api_never_returns_another_tenants_data() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (_db, mut store) = seeded(&factory);
    let mut q = mosaic_store::EligibilityQuery {
        tenant_id: TENANT_A.into(),
        policy_sha256: fixtures::policy(TENANT_A).policy_sha256,
        principal_id: "alice".into(),
        workspace_id: fixtures::WORKSPACE.into(),
        run_id: "run-1".into(),
        now_unix_ms: T0 + 10,
        kinds: mosaic_harness::MemoryKind::ALL.to_vec(),
    };
    let ids: Vec<String> = store
        .eligible_records(&q)
        .expect("read")
        .records
        .into_iter()
        .map(|r| r.record.record_id)
        .collect();
    assert_eq!(ids, ["a1"]);
    // Tenant A asking with tenant B's policy digest sees nothing.
    q.policy_sha256 = fixtures::policy(TENANT_B).policy_sha256;
    assert!(store.eligible_records(&q).expect("read").records.is_empty());

    let claims_a = store
        .claims_by_key(TENANT_A, "workspace:ws-main", "deploy_day")
        .expect("claims");
    let claim_ids: Vec<&str> = claims_a.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(claim_ids, ["a-claim"]);

    let cases_a = store.open_review_cases(TENANT_A).expect("cases");
    assert_eq!(cases_a.len(), 1);
    assert!(cases_a.iter().all(|c| c.tenant_id == TENANT_A));
    let b_consent = fixtures::consent_digest(&fixtures::consent(TENANT_B, "alice"));
    assert!(matches!(
        store.withdraw_consent(
            TENANT_A,
            &b_consent,
            &fixtures::authorization("alice"),
            T0 + 20
        ),
        Err(StoreError::NotFound { .. })
    ));
    // A write of tenant A cannot supersede, derive from or reuse B's ids.
    let mut supersede = Spec::principal(TENANT_A, "alice", "a-over-b");
    supersede.supersedes = Some(("b1".into(), 1));
    assert!(matches!(
        store.write(&supersede.build()),
        Err(StoreError::NotFound { .. })
    ));
    let mut derive = Spec::workspace(TENANT_A, "alice", "a-from-b");
    derive.derived_from = vec!["b1".into()];
    assert!(matches!(
        store.write(&derive.build()),
        Err(StoreError::NotFound { .. })
    ));
    let mut reuse_proposal = Spec::principal(TENANT_A, "alice", "a-new").build();
    reuse_proposal.proposal.proposal_id = "p-b1".into();
    assert!(matches!(
        store.write(&reuse_proposal),
        Err(StoreError::ProposalIdReused(_))
    ));
    let mut reuse_record = Spec::principal(TENANT_A, "alice", "b1").build();
    reuse_record.proposal.proposal_id = "p-a-takes-b1".into();
    assert!(matches!(
        store.write(&reuse_record),
        Err(StoreError::RecordIdInUse(_))
    ));
    let b1 = store.get_record("b1").expect("get").expect("b1 kept");
    assert_eq!(b1.record.tenant_id, TENANT_B);
    assert_eq!(
        b1.content,
        Spec::principal(TENANT_B, "alice", "b1").content()
    );
    // Workers see both tenants' messages, each labelled with its own tenant.
    let tasks = store.pending_outbox("lexical", 100).expect("outbox");
    let mut tenants: Vec<&str> = tasks.iter().map(|t| t.tenant_id.as_str()).collect();
    tenants.sort();
    assert_eq!(tenants, [TENANT_A, TENANT_A, TENANT_B, TENANT_B]);
    for task in &tasks {
        let record = store
            .get_record(&task.record_id)
            .expect("get")
            .expect("record");
        assert_eq!(record.record.tenant_id, task.tenant_id);
        assert_eq!(task.content.as_deref(), Some(record.content.as_str()));
    }
}

#[test]
fn app_role_cannot_bypass_or_disable_row_security() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, _store) = seeded(&factory);
    let mut app = factory.app(&db).expect("app");
    let (superuser, bypass): (bool, bool) = app
        .query_one(
            "SELECT rolsuper, rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = current_user",
            &[],
        )
        .and_then(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .expect("role");
    assert!(
        !superuser && !bypass,
        "the application role must be subject to RLS"
    );
    let owned: i64 = app
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_tables
             WHERE schemaname = current_schema() AND tableowner = current_user",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .expect("owner");
    assert_eq!(owned, 0, "the application role must not own the tables");
    let denied = Some(SqlState::INSUFFICIENT_PRIVILEGE);
    for sql in [
        "ALTER TABLE records DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE records NO FORCE ROW LEVEL SECURITY",
        "DROP POLICY tenant_isolation ON records",
        "UPDATE audit_events SET kind = kind",
        "DELETE FROM audit_events",
        "TRUNCATE records",
        "UPDATE object_tenants SET tenant_id = 'tenant-a'",
        "UPDATE schema_migrations SET version = version",
    ] {
        assert_eq!(refused(&mut app, sql), denied, "{sql}");
    }
}

#[test]
fn every_tenant_bearing_table_forces_row_level_security() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let db = factory.fresh().expect("fresh");
    let mut admin = factory.admin(&db).expect("admin");
    let rows = admin
        .query(
            "SELECT c.relname::text, c.relrowsecurity, c.relforcerowsecurity,
                    EXISTS (SELECT 1 FROM information_schema.columns col
                            WHERE col.table_schema = current_schema() AND col.table_name = c.relname
                              AND col.column_name = 'tenant_id'),
                    (SELECT count(*) FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid)
             FROM pg_catalog.pg_class c
             WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
             ORDER BY 1",
            &[],
        )
        .expect("catalog");
    let mut with_tenant = Vec::new();
    for row in &rows {
        let name: String = row.get(0);
        let (enabled, forced, has_tenant, policies): (bool, bool, bool, i64) =
            (row.get(1), row.get(2), row.get(3), row.get(4));
        if has_tenant {
            assert!(
                enabled && forced,
                "{name}: row-level security not enabled and forced"
            );
            assert!(policies > 0, "{name}: no policy");
            with_tenant.push(name);
        }
    }
    let mut expected: Vec<String> = TENANT_TABLES.iter().map(|t| (*t).to_owned()).collect();
    expected
        .extend(["object_tenants", "tenants", "tenant_settings", "api_keys"].map(str::to_owned));
    expected.sort();
    assert_eq!(with_tenant, expected);
}

#[test]
fn integrity_check_reports_row_security_switched_off() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, mut store) = seeded(&factory);
    let report = store.integrity_check().expect("check");
    assert!(report.is_ok(), "{report:?}");
    let mut admin = factory.admin(&db).expect("admin");
    admin
        .batch_execute("ALTER TABLE records NO FORCE ROW LEVEL SECURITY")
        .expect("owner can alter");
    let report = store.integrity_check().expect("check");
    assert!(!report.storage_ok);
    assert!(report.storage_detail.contains("records"), "{report:?}");
}

#[test]
fn newer_schema_is_refused_and_left_alone() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let db = factory.fresh().expect("fresh");
    let mut admin = factory.admin(&db).expect("admin");
    admin
        .execute(
            "INSERT INTO schema_migrations (version) VALUES ($1)",
            &[&(SCHEMA_VERSION + 1)],
        )
        .expect("bump");
    let expect_too_new = |result: Result<_, StoreError>| match result {
        Err(StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
        }
        Err(other) => panic!("expected SchemaTooNew, got {other:?}"),
        Ok(_) => panic!("expected SchemaTooNew, got a store"),
    };
    expect_too_new(factory.connect(&db, &test_config()).map(|_| ()));
    expect_too_new(schema::migrate(&mut admin).map(|_| ()));
    let versions: i64 = admin
        .query_one("SELECT count(*) FROM schema_migrations", &[])
        .and_then(|r| r.try_get(0))
        .expect("versions");
    assert_eq!(versions, SCHEMA_VERSION + 1, "nothing was migrated");
}

#[test]
fn migration_is_idempotent_and_refuses_foreign_schemas() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let db = factory.fresh().expect("fresh");
    let mut admin = factory.admin(&db).expect("admin");
    assert_eq!(schema::migrate(&mut admin).expect("again"), SCHEMA_VERSION);
    let mut store = factory.connect(&db, &test_config()).expect("connect");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);

    let foreign = factory.fresh_empty().expect("empty schema");
    let mut admin = factory.admin(&foreign).expect("admin");
    assert!(matches!(
        PostgresStore::open(factory.admin(&foreign).expect("admin"), test_config()),
        Err(StoreError::NotAStore(_))
    ));
    admin
        .batch_execute("CREATE TABLE unrelated (x BIGINT)")
        .expect("foreign table");
    assert!(matches!(
        schema::migrate(&mut admin),
        Err(StoreError::NotAStore(_))
    ));
}

#[test]
fn version_3_schemas_gain_the_claims_of_their_records() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, mut store) = seeded(&factory);
    let latest = store.latest_created_at().expect("latest");
    assert!(latest > 0);
    drop(store);
    // What a version 3 schema looked like: claims only inside the stored
    // gate inputs, and no latest creation instant.
    let mut admin = factory.admin(&db).expect("admin");
    admin
        .batch_execute(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V9} DROP TABLE record_claims; DELETE FROM meta WHERE key = 'latest_created_at';
                 DELETE FROM schema_migrations WHERE version >= 4;"
        ))
        .expect("downgrade");
    assert_eq!(
        schema::migrate(&mut admin).expect("migrate"),
        SCHEMA_VERSION
    );
    schema::grant_application_role(&mut admin, &factory.app_role).expect("grant");
    let mut store = factory.connect(&db, &test_config()).expect("connect");
    // Taken over every tenant's records, row security notwithstanding.
    assert_eq!(store.latest_created_at().expect("latest"), latest);
    for (tenant, record) in [(TENANT_A, "a-claim"), (TENANT_B, "b-claim")] {
        let found = store
            .claims_by_key(tenant, "workspace:ws-main", "deploy_day")
            .expect("claims");
        let ids: Vec<&str> = found.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, [record], "{tenant}");
        assert_eq!(found[0].1.object, "tuesday");
        assert_eq!(store.record_claims(record).expect("claims").len(), 1);
    }
    // The backfilled table is under forced row security like the others.
    let mut app = factory.app(&db).expect("app");
    let mut tx = as_tenant(&mut app, Some(TENANT_A));
    assert_eq!(count(&mut tx, "SELECT count(*) FROM record_claims"), 1);
    drop(tx);
    let mut tx = as_tenant(&mut app, None);
    assert_eq!(count(&mut tx, "SELECT count(*) FROM record_claims"), 0);
}

/// What version 11 added: the server's front-door tables.
const UNDO_V11: &str = "DROP TABLE captured_messages; DROP TABLE extraction_jobs;
    DROP TABLE export_requests; ALTER TABLE proposals DROP COLUMN principal_id;
    DELETE FROM meta WHERE key = 'intake_imported';";

/// What version 12 added: the read scopes' commitments (their trees in
/// pages since version 15).
const UNDO_V12: &str = "DROP TABLE scope_entries; DROP TABLE scope_pages; DROP TABLE scope_heads;";

/// What version 10 added: the audit log's leaf hashes and tree.
const UNDO_V10: &str = "ALTER TABLE audit_events DROP COLUMN leaf_sha256;
    DELETE FROM meta WHERE key = 'audit_tree';";

const UNDO_V9: &str = "DROP TABLE api_keys; DROP TABLE tenant_settings; DROP TABLE policy_history;
    DROP TABLE verifiers; DROP TABLE server_settings;
    DELETE FROM meta WHERE key = 'catalog_imported';";

/// The server's own tables of the release before schema 9 (their
/// PostgreSQL form, row security included), with one row each.
const RELEASED_SERVER_TABLES: &str = "
CREATE TABLE mosaic_server_tenants (tenant_id TEXT PRIMARY KEY, policy_json TEXT NOT NULL,
    policy_sha256 TEXT NOT NULL, policy_valid_from_ms BIGINT NOT NULL, created_at_ms BIGINT NOT NULL);
CREATE TABLE mosaic_server_api_keys (key_id TEXT PRIMARY KEY, key_sha256 TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL, tenant_id TEXT, principal_id TEXT, created_at_ms BIGINT NOT NULL,
    disabled BIGINT NOT NULL DEFAULT 0);
CREATE TABLE mosaic_server_grants (tenant_id TEXT NOT NULL, principal_id TEXT NOT NULL,
    grant_json TEXT NOT NULL, PRIMARY KEY (tenant_id, principal_id));
CREATE TABLE mosaic_server_verifiers (tenant_id TEXT NOT NULL, verifier_id TEXT NOT NULL,
    verifier_release TEXT NOT NULL, public_key_hex TEXT NOT NULL, created_at_ms BIGINT NOT NULL,
    disabled BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (tenant_id, verifier_id));
CREATE TABLE mosaic_server_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE mosaic_server_policy_history (tenant_id TEXT NOT NULL, policy_sha256 TEXT NOT NULL,
    noted_at_ms BIGINT NOT NULL, PRIMARY KEY (tenant_id, policy_sha256));
CREATE TABLE mosaic_server_application_keys (key_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,
    bounds_json TEXT NOT NULL);
CREATE TABLE mosaic_server_tenant_options (tenant_id TEXT PRIMARY KEY, claim_updates TEXT NOT NULL);
CREATE TABLE mosaic_server_write_guards (tenant_id TEXT PRIMARY KEY, guards_json TEXT NOT NULL);
INSERT INTO mosaic_server_tenants VALUES ('tenant-a', '{}', 'old-sha', 1000, 900);
INSERT INTO mosaic_server_api_keys VALUES
    ('k-admin', 'sha-admin', 'admin', NULL, NULL, 5, 0),
    ('k-alice', 'sha-alice', 'principal', 'tenant-a', 'alice', 6, 1),
    ('k-app', 'sha-app', 'application', 'tenant-b', NULL, 7, 0);
INSERT INTO mosaic_server_application_keys VALUES ('k-app', 'tenant-b', '{\"kinds\":[]}');
INSERT INTO mosaic_server_verifiers VALUES ('tenant-b', 'v-old', 'checker-0', 'cd', 8, 0);
INSERT INTO mosaic_server_settings VALUES ('embedder', 'e-old');
INSERT INTO mosaic_server_policy_history VALUES ('tenant-a', 'old-sha', 700);
INSERT INTO mosaic_server_tenant_options VALUES ('tenant-a', 'review');
INSERT INTO mosaic_server_write_guards VALUES ('tenant-a', '{\"near_duplicate_permille\":800}');
DO $$
DECLARE t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenants', 'api_keys', 'grants', 'verifiers', 'policy_history',
        'application_keys', 'tenant_options', 'write_guards'] LOOP
        EXECUTE format('ALTER TABLE mosaic_server_%s ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE mosaic_server_%s FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY mosaic_server_%s_tenant ON mosaic_server_%s USING
            (tenant_id = current_setting(''mosaic.tenant_id'', true)
             OR current_setting(''mosaic.catalog_scope'', true) = ''directory'')', t, t);
    END LOOP;
END $$;
";

#[test]
fn version_8_schemas_take_in_the_servers_own_tables() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, store) = seeded(&factory);
    drop(store);
    let mut admin = factory.admin(&db).expect("admin");
    admin
        .batch_execute(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} DELETE FROM schema_migrations WHERE version >= 9; {RELEASED_SERVER_TABLES}"
        ))
        .expect("downgrade");
    assert_eq!(
        schema::migrate(&mut admin).expect("migrate"),
        SCHEMA_VERSION
    );
    schema::grant_application_role(&mut admin, &factory.app_role).expect("grant");
    // The earlier tables are gone, their rows moved.
    let left: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_tables
             WHERE schemaname = current_schema() AND tablename LIKE 'mosaic_server_%'",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .expect("tables");
    assert_eq!(left, 0);
    let mut store = factory.connect(&db, &test_config()).expect("connect");
    assert!(
        store.directory_imported().expect("flag"),
        "nothing left to import"
    );
    let keys = store.api_keys().expect("keys");
    let ids: Vec<&str> = keys.iter().map(|k| k.key_id.as_str()).collect();
    assert_eq!(ids, ["k-admin", "k-alice", "k-app"]);
    assert!(keys[1].disabled && !keys[0].disabled);
    assert_eq!(keys[2].bounds_json.as_deref(), Some("{\"kinds\":[]}"));
    assert_eq!(
        store
            .api_key_by_sha256("sha-alice")
            .expect("key")
            .map(|k| k.principal_id),
        Some(Some("alice".to_owned()))
    );
    assert_eq!(store.enabled_admin_keys().expect("admins"), 1);
    let a = store
        .tenant_settings(TENANT_A)
        .expect("a")
        .expect("tenant a");
    assert_eq!(a.policy_valid_from_ms, 1000);
    assert_eq!(a.claim_updates.as_deref(), Some("review"));
    assert!(a.write_guards_json.is_some());
    // Tenant B had a policy in the store and no row of its own: listed.
    assert_eq!(store.tenant_ids().expect("tenants"), [TENANT_A, TENANT_B]);
    assert_eq!(
        store
            .verifiers(TENANT_B, Some("v-old"))
            .expect("verifiers")
            .len(),
        1
    );
    assert_eq!(
        store.verifiers(TENANT_A, Some("v-old")).expect("verifiers"),
        [],
        "a verifier stays its tenant's"
    );
    assert_eq!(
        store
            .setting_or_insert("embedder", "e-new")
            .expect("setting"),
        "e-old"
    );
    let current = fixtures::policy(TENANT_A).policy_sha256;
    assert_eq!(
        store
            .earlier_policies(TENANT_A, &current, 5)
            .expect("history"),
        ["old-sha"]
    );
    // Migrating again changes nothing.
    assert_eq!(schema::migrate(&mut admin).expect("again"), SCHEMA_VERSION);
}

#[test]
fn version_7_schemas_gain_addresses_in_place() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, store) = seeded(&factory);
    drop(store);
    // What a version 7 schema looked like: records without addresses.
    let mut admin = factory.admin(&db).expect("admin");
    admin
        .batch_execute(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V9} DROP INDEX idx_records_address; ALTER TABLE records DROP COLUMN address_key;
                 ALTER TABLE records DROP COLUMN address_namespace;
                 DELETE FROM schema_migrations WHERE version >= 8;"
        ))
        .expect("downgrade");
    assert_eq!(
        schema::migrate(&mut admin).expect("migrate"),
        SCHEMA_VERSION
    );
    schema::grant_application_role(&mut admin, &factory.app_role).expect("grant");
    let mut store = factory.connect(&db, &test_config()).expect("connect");
    let old = store.get_record("a-ws").expect("read").expect("stored");
    assert_eq!(old.record.address, None);
    let here = mosaic_harness::MemoryAddress {
        namespace: vec!["notes".into()],
        key: "k".into(),
    };
    let mut addressed = Spec::workspace(TENANT_A, "alice", "a-addr");
    addressed.now = T0 + 50;
    let mut request = addressed.build();
    request.proposal.address = Some(here.clone());
    assert!(store.write(&request).expect("write").is_accepted());
    let workspace = mosaic_harness::MemorySubject::Workspace {
        workspace_id: fixtures::WORKSPACE.into(),
    };
    assert_eq!(
        store
            .record_at_address(TENANT_A, &workspace, &here)
            .expect("lookup"),
        Some(("a-addr".to_owned(), 1))
    );
    // Row security: the other tenant's lookup of the same address finds
    // nothing.
    assert_eq!(
        store
            .record_at_address(TENANT_B, &workspace, &here)
            .expect("lookup"),
        None
    );
}

#[test]
fn version_8_schemas_gain_the_audit_tree_in_place() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, mut store) = seeded(&factory);
    let AuditVerification::Intact {
        events,
        root_sha256,
        ..
    } = store.verify_audit_chain().expect("verify")
    else {
        panic!("intact");
    };
    drop(store);
    // What a version 8 schema looked like: a hash chain without a tree (and
    // without the tables version 9 added).
    let mut admin = factory.admin(&db).expect("admin");
    admin
        .batch_execute(&format!(
            "{UNDO_V12} {UNDO_V11} {UNDO_V10} {UNDO_V9} DELETE FROM schema_migrations WHERE version >= 9;"
        ))
        .expect("downgrade");
    assert_eq!(
        schema::migrate(&mut admin).expect("migrate"),
        SCHEMA_VERSION
    );
    schema::grant_application_role(&mut admin, &factory.app_role).expect("grant");
    let mut store = factory.connect(&db, &test_config()).expect("connect");
    // Every tenant's events are in the tree, row security notwithstanding:
    // it is the tree the log had grown.
    let head = store.audit_tree_head().expect("head");
    assert_eq!((head.tree_size, &head.root_sha256), (events, &root_sha256));
    assert!(matches!(
        store.verify_audit_chain().expect("verify"),
        AuditVerification::Intact { .. }
    ));
    let (proof, first, second) = store.audit_consistency_proof(1, events).expect("proof");
    let hash = |h: &str| mosaic_harness::merkle::from_hex(h).expect("hex");
    assert_eq!(proof.verify(&hash(&first), &hash(&second)), Ok(()));
    // Row security is forced on the events again.
    let mut app = factory.app(&db).expect("app");
    let mut tx = as_tenant(&mut app, None);
    assert_eq!(count(&mut tx, "SELECT count(*) FROM audit_events"), 0);
    drop(tx);
    let mut tx = as_tenant(&mut app, Some(TENANT_A));
    assert!(count(&mut tx, "SELECT count(*) FROM audit_events") > 0);
    drop(tx);
    let forced: bool = admin
        .query_one(
            "SELECT relforcerowsecurity FROM pg_class WHERE oid = 'audit_events'::regclass",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .expect("forced");
    assert!(forced);
}

#[test]
fn eligibility_query_is_served_by_its_index() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, _store) = seeded(&factory);
    // Tiny tables favour sequential scans; forbid them to see which index
    // the planner can use.
    let mut store = factory
        .connect_with_options(&db, &test_config(), "-c enable_seqscan=off")
        .expect("connect");
    let q = mosaic_store::EligibilityQuery {
        tenant_id: TENANT_A.into(),
        policy_sha256: fixtures::policy(TENANT_A).policy_sha256,
        principal_id: "alice".into(),
        workspace_id: fixtures::WORKSPACE.into(),
        run_id: "run-1".into(),
        now_unix_ms: T0 + 10,
        kinds: mosaic_harness::MemoryKind::ALL.to_vec(),
    };
    let plan = store.explain_eligibility(&q).expect("explain");
    let uses_index = plan
        .iter()
        .filter(|line| line.contains("idx_records_eligibility"))
        .count();
    assert_eq!(uses_index, 5, "{}", plan.join("\n"));
}

/// Alice's eligibility query in tenant A's workspace, run 1, at `now`.
fn alice_query(now: u64) -> mosaic_store::EligibilityQuery {
    mosaic_store::EligibilityQuery {
        tenant_id: TENANT_A.into(),
        policy_sha256: fixtures::policy(TENANT_A).policy_sha256,
        principal_id: "alice".into(),
        workspace_id: fixtures::WORKSPACE.into(),
        run_id: "run-1".into(),
        now_unix_ms: now,
        kinds: mosaic_harness::MemoryKind::ALL.to_vec(),
    }
}

/// The incremental eligibility read costs the changes, not the scope:
/// after one write it names that one record, and the planner serves its
/// statements with the change index (one range per reader scope, the
/// record ids from the index alone) and, for the eligibility statements
/// restricted to the changed records, the records' primary key only.
#[test]
fn eligible_changes_are_served_by_the_change_index() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, mut store) = seeded(&factory);
    let batch: Vec<_> = (0..100)
        .map(|n| Spec::principal(TENANT_A, "alice", &format!("old-{n:03}")).build())
        .collect();
    for outcome in store.write_batch(&batch).expect("batch") {
        assert!(outcome.is_accepted());
    }
    let targets = test_config().required_index_targets;
    publish_all(&mut store, &targets, T0).expect("publish");
    let q = alice_query(T0 + 10);
    let (found, _) = store.eligible_unknown(&q, &|_| true).expect("full read");
    assert!(found.ids.len() > 100, "{}", found.ids.len());
    store
        .write(&Spec::principal(TENANT_A, "alice", "new").build())
        .expect("write");
    publish_all(&mut store, &targets, T0).expect("publish");
    let (changes, bodies) = store
        .eligible_changes(&q, &found.scope_commitments, &|_| false)
        .expect("changes")
        .expect("incremental");
    assert_eq!(changes.changed, ["new"]);
    assert_eq!(changes.eligible, [("new".to_owned(), 1)]);
    assert_eq!(bodies.len(), 1);
    // Planned with the statistics a database in use has (autovacuum keeps
    // them); tiny tables favour sequential scans, so forbid them to see
    // which index the planner picks.
    factory
        .admin(&db)
        .expect("admin")
        .batch_execute("ANALYZE scope_entries; ANALYZE records;")
        .expect("analyze");
    let mut planned = factory
        .connect_with_options(&db, &test_config(), "-c enable_seqscan=off")
        .expect("connect");
    let plan = planned
        .explain_eligible_changes(&q, &found.scope_commitments, &changes.changed)
        .expect("explain");
    let text = plan.join("\n");
    // Alice's principal scope holds the hundred records: its changes are a
    // range of the change index, the record ids read from the index alone
    // (the scopes holding a record or none cost the same either way).
    let range = plan.windows(2).any(|pair| {
        pair[0].contains("Index Only Scan using idx_scope_entries_changed")
            && pair[1].contains("(scope_type = 'principal'::text)")
            && pair[1].contains("(changed_generation > ")
    });
    assert!(range, "{text}");
    assert_eq!(
        plan.iter()
            .filter(|l| l.contains("Index Cond: ((tenant_id = 'tenant-a'"))
            .count(),
        4,
        "each reader scope read by an index:\n{text}"
    );
    // The eligibility statement and that of `stable_until` (every subject
    // shape in one), restricted to the changed ids: each a lookup of
    // the changed ids by primary key, never a range of the eligibility
    // index (that would read the scope).
    assert_eq!(
        plan.iter()
            .filter(|l| l.contains("Index Scan using records_pkey on records r"))
            .count(),
        2,
        "{text}"
    );
    assert!(
        !plan.iter().any(|l| l.contains("idx_records_eligibility")),
        "{text}"
    );
    assert!(!plan.iter().any(|l| l.contains("Seq Scan")), "{text}");
}

/// The server's own front-door tables of the release before schema 11
/// (their PostgreSQL form, row security included: the export copies only
/// in a tenant's scope), with rows for tenant A's first record.
const RELEASED_INTAKE_TABLES: &str = "
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
INSERT INTO mosaic_server_proposals (proposal_id, tenant_id, principal_id, record_id, accepted, decided_at_ms)
    SELECT proposal_id, tenant_id, 'alice-of-the-catalog', record_id, 1, decided_at_ms FROM proposals
    WHERE record_id = 'a1';
INSERT INTO mosaic_server_memories VALUES
    ('a1', 'p', 'tenant-a', 'alice', 'principal:alice', 'alice', 'episodic', 1, '{\"kept\":1}'),
    ('a-gone', 'p2', 'tenant-a', 'alice', 'principal:alice', 'alice', 'episodic', 1, '{\"kept\":2}'),
    ('b1', 'p3', 'tenant-b', 'alice', 'principal:alice', 'alice', 'episodic', 1, NULL);
INSERT INTO mosaic_server_messages VALUES
    ('tenant-a', 'alice', 'conv-old', 'm-old', 'a1', 'aa', 'bb', 'cc', 77);
INSERT INTO mosaic_server_extraction_jobs VALUES
    ('x-old', 'tenant-b', 'alice', 'k-alice', 'conv-old', '[\"m-old\"]', 'pending', 2, 50, 'model_unavailable',
     NULL, 40);
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
";

#[test]
fn version_10_schemas_take_in_the_servers_front_door_tables() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, store) = seeded(&factory);
    drop(store);
    let mut admin = factory.admin(&db).expect("admin");
    admin
        .batch_execute(&format!(
            "{UNDO_V12} {UNDO_V11} DELETE FROM schema_migrations WHERE version >= 11; {RELEASED_INTAKE_TABLES}"
        ))
        .expect("downgrade");
    let proposal_a1: String = admin
        .query_one(
            "SELECT proposal_id FROM proposals WHERE record_id = 'a1'",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .expect("proposal");
    assert_eq!(
        schema::migrate(&mut admin).expect("migrate"),
        SCHEMA_VERSION
    );
    schema::grant_application_role(&mut admin, &factory.app_role).expect("grant");
    let left: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_tables
             WHERE schemaname = current_schema() AND tablename LIKE 'mosaic_server_%'",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .expect("tables");
    assert_eq!(left, 0, "the earlier tables are dropped");
    let mut store = factory.connect(&db, &test_config()).expect("connect");
    assert!(
        store.intake_imported().expect("flag"),
        "nothing left to import"
    );
    // The catalog's owner of a proposal; every other proposal's from its
    // stored gate input.
    let owner = store
        .proposal_owner(&proposal_a1)
        .expect("owner")
        .expect("known");
    assert_eq!(owner.principal_id.as_deref(), Some("alice-of-the-catalog"));
    assert!(owner.accepted);
    let message = store
        .captured_message(TENANT_A, "alice", "conv-old", "m-old")
        .expect("message")
        .expect("moved");
    assert_eq!(
        (message.record_id.as_str(), message.captured_at_ms),
        ("a1", 77)
    );
    // Tenant B's principal cannot find it (another tenant's row).
    assert_eq!(
        store
            .captured_message(TENANT_B, "alice", "conv-old", "m-old")
            .expect("lookup"),
        None
    );
    let due = store.due_extraction_jobs(1_000, 10).expect("due");
    assert_eq!(due.len(), 1);
    assert_eq!(
        (
            due[0].job_id.as_str(),
            due[0].tenant_id.as_str(),
            due[0].attempts
        ),
        ("x-old", TENANT_B, 2)
    );
    // The export copy of a held record moves; one of a record the store
    // does not hold, or an erased one's, does not.
    assert_eq!(
        store
            .export_request(TENANT_A, "a1")
            .expect("copy")
            .as_deref(),
        Some("{\"kept\":1}")
    );
    assert_eq!(
        store.export_request(TENANT_A, "a-gone").expect("copy"),
        None
    );
    assert_eq!(store.export_request(TENANT_B, "b1").expect("copy"), None);
    // Every proposal has its owner.
    let mut app = factory.app(&db).expect("app");
    for tenant in [TENANT_A, TENANT_B] {
        let mut tx = as_tenant(&mut app, Some(tenant));
        assert_eq!(
            count(
                &mut tx,
                "SELECT count(*) FROM proposals WHERE principal_id IS NULL"
            ),
            0
        );
    }
}

/// A version 11 schema gains the read scopes' commitments in place: every
/// tenant's records (row security notwithstanding) in their scopes, roots
/// equal to the roots recomputed from the records, row security forced
/// on the new tables.
#[test]
fn version_11_schemas_gain_scope_commitments_in_place() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, mut store) = seeded(&factory);
    let before: Vec<_> = [TENANT_A, TENANT_B]
        .iter()
        .map(|t| mosaic_store::conformance::assert_scope_roots(&mut store, t).expect("roots"))
        .collect();
    drop(store);
    let mut admin = factory.admin(&db).expect("admin");
    admin
        .batch_execute(&format!(
            "{UNDO_V12} DELETE FROM schema_migrations WHERE version >= 12;"
        ))
        .expect("downgrade");
    assert_eq!(
        schema::migrate(&mut admin).expect("migrate"),
        SCHEMA_VERSION
    );
    schema::grant_application_role(&mut admin, &factory.app_role).expect("grant");
    let mut store = factory.connect(&db, &test_config()).expect("connect");
    for (tenant, before) in [TENANT_A, TENANT_B].iter().zip(before) {
        let after =
            mosaic_store::conformance::assert_scope_roots(&mut store, tenant).expect("roots");
        let roots = |c: &[mosaic_harness::memory_scope::ScopeCommitment]| {
            c.iter().map(|c| c.root_sha256.clone()).collect::<Vec<_>>()
        };
        assert_eq!(roots(&after), roots(&before), "{tenant}");
        assert!(after.iter().any(|c| c.generation > 0), "{tenant}");
    }
    let mut app = factory.app(&db).expect("app");
    let mut tx = as_tenant(&mut app, None);
    assert_eq!(count(&mut tx, "SELECT count(*) FROM scope_entries"), 0);
    drop(tx);
    let mut tx = as_tenant(&mut app, Some(TENANT_A));
    assert!(count(&mut tx, "SELECT count(*) FROM scope_entries") > 0);
    drop(tx);
    for table in [
        "records",
        "revocations",
        "scope_entries",
        "scope_pages",
        "scope_heads",
    ] {
        let forced: bool = admin
            .query_one(
                &format!(
                    "SELECT relforcerowsecurity FROM pg_class WHERE oid = '{table}'::regclass"
                ),
                &[],
            )
            .and_then(|r| r.try_get(0))
            .expect("forced");
        assert!(forced, "{table}");
    }
}

/// What version 13 added: the scope entries' change markers and the
/// heads' removal generations.
const UNDO_V13: &str = "DROP INDEX idx_scope_entries_changed;
    ALTER TABLE scope_entries DROP COLUMN changed_generation;
    ALTER TABLE scope_heads DROP COLUMN removed_generation;";

/// A version 12 schema gains the change markers in place: its entries are
/// marked at generation 0, so a reader whose commitments were read before
/// the upgrade is told of the later changes only, and an erasure after it
/// is noticed by another connection.
#[test]
fn version_12_schemas_gain_scope_change_markers_in_place() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, mut store) = seeded(&factory);
    let q = alice_query(T0 + 10);
    let (before, _) = store.eligible_unknown(&q, &|_| true).expect("read");
    assert!(!before.ids.is_empty());
    drop(store);
    let mut admin = factory.admin(&db).expect("admin");
    undo_v15(&mut admin);
    admin
        .batch_execute(&format!(
            "{UNDO_V13} DELETE FROM schema_migrations WHERE version >= 13;"
        ))
        .expect("downgrade");
    assert_eq!(
        schema::migrate(&mut admin).expect("migrate"),
        SCHEMA_VERSION
    );
    schema::grant_application_role(&mut admin, &factory.app_role).expect("grant");
    let mut store = factory.connect(&db, &test_config()).expect("connect");
    let (after, _) = store.eligible_unknown(&q, &|_| true).expect("read");
    assert_eq!(after, before, "the migration changes no answer");
    let (nothing, _) = store
        .eligible_changes(&q, &before.scope_commitments, &|_| true)
        .expect("changes")
        .expect("incremental");
    assert_eq!(nothing.changed, Vec::<String>::new());
    store
        .write(&Spec::principal(TENANT_A, "alice", "new-1").build())
        .expect("write");
    let (changes, _) = store
        .eligible_changes(&q, &before.scope_commitments, &|_| true)
        .expect("changes")
        .expect("incremental");
    assert_eq!(changes.changed, ["new-1"]);
    // Another connection (another server on the same database) erases a
    // record of alice's workspace: this one is told to read everything.
    let mut other = factory.connect(&db, &test_config()).expect("connect");
    erase_as_alice(
        &mut other,
        "a1",
        &test_config().required_index_targets,
        T0 + 2,
    )
    .expect("erase");
    drop(other);
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

/// Takes a schema's scope trees back to one row per node, as version 14
/// kept them (`scope_nodes` under forced row security, a node never
/// written absent), from the pages version 15 keeps. As the superuser.
fn undo_v15(admin: &mut Client) {
    admin
        .batch_execute(
            r#"CREATE TABLE scope_nodes (
                tenant_id TEXT COLLATE "C" NOT NULL,
                scope_type TEXT COLLATE "C" NOT NULL,
                scope_a TEXT COLLATE "C" NOT NULL,
                scope_b TEXT COLLATE "C" NOT NULL,
                level BIGINT NOT NULL,
                idx BIGINT NOT NULL,
                sha256 TEXT COLLATE "C" NOT NULL,
                PRIMARY KEY (tenant_id, scope_type, scope_a, scope_b, level, idx)
            );
            ALTER TABLE scope_nodes ENABLE ROW LEVEL SECURITY;
            ALTER TABLE scope_nodes FORCE ROW LEVEL SECURITY;
            CREATE POLICY tenant_isolation ON scope_nodes
                USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
                WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));"#,
        )
        .expect("nodes table");
    let pages = admin
        .query(
            "SELECT tenant_id, scope_type, scope_a, scope_b, page, hashes FROM scope_pages",
            &[],
        )
        .expect("pages");
    for row in pages {
        let (tenant, st, a, b): (String, String, String, String) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let (page, hashes): (i64, Vec<u8>) = (row.get(4), row.get(5));
        for (level, idx, sha256) in crate::common::nodes_of_page(page, &hashes) {
            admin
                .execute(
                    "INSERT INTO scope_nodes VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    &[&tenant, &st, &a, &b, &level, &idx, &sha256],
                )
                .expect("node");
        }
    }
    admin
        .batch_execute("DROP TABLE scope_pages;")
        .expect("drop pages");
}

/// A version 14 schema, its trees' nodes one row each, gains the pages in
/// place: every scope's root and every record's inclusion proof read the
/// same before and after (an erased record's emptied subtree among them),
/// under forced row security (another tenant sees no page), and the
/// schema checks clean.
#[test]
fn version_14_schemas_gain_the_scope_pages_in_place() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, mut store) = seeded(&factory);
    let ids = crate::common::fill_scopes(&mut store);
    let before = crate::common::scope_proofs(&mut store, &ids);
    assert!(before.1[0].is_none() && before.1[1..].iter().all(Option::is_some));
    drop(store);
    let mut admin = factory.admin(&db).expect("admin");
    undo_v15(&mut admin);
    admin
        .batch_execute("DELETE FROM schema_migrations WHERE version >= 15;")
        .expect("downgrade");
    let nodes: i64 = admin
        .query_one("SELECT count(*) FROM scope_nodes", &[])
        .and_then(|r| r.try_get(0))
        .expect("nodes");
    assert!(nodes > 90, "{nodes}");
    assert_eq!(
        schema::migrate(&mut admin).expect("migrate"),
        SCHEMA_VERSION
    );
    schema::grant_application_role(&mut admin, &factory.app_role).expect("grant");
    let mut store = factory.connect(&db, &test_config()).expect("connect");
    assert_eq!(crate::common::scope_proofs(&mut store, &ids), before);
    let report = store.integrity_check().expect("check");
    assert!(report.is_ok(), "{report:?}");
    store
        .write(&Spec::principal(TENANT_A, "alice", "after-upgrade").build())
        .expect("write");
    mosaic_store::conformance::assert_scope_roots(&mut store, TENANT_A).expect("roots");
    let gone: Option<String> = admin
        .query_one("SELECT to_regclass('scope_nodes')::text", &[])
        .and_then(|r| r.try_get(0))
        .expect("regclass");
    assert_eq!(gone, None);
    let mut app = factory.app(&db).expect("app");
    let mut tx = as_tenant(&mut app, Some(TENANT_B));
    let a_pages = count(
        &mut tx,
        &format!("SELECT count(*) FROM scope_pages WHERE tenant_id = '{TENANT_A}'"),
    );
    assert_eq!(a_pages, 0);
    drop(tx);
    let mut tx = as_tenant(&mut app, Some(TENANT_A));
    assert!(count(&mut tx, "SELECT count(*) FROM scope_pages") > 0);
}
