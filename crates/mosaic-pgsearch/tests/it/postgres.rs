//! The retrieval suite and row-level security against a real PostgreSQL
//! with pgvector.
//!
//! The server comes from the environment: `MOSAIC_TEST_POSTGRES_URL` (a
//! superuser: creates one schema per test, migrates as its owner, drops it)
//! and `MOSAIC_TEST_POSTGRES_APP_URL` (the application role the targets
//! connect as, without `BYPASSRLS`). `scripts/with-postgres.sh` starts a
//! throwaway server and sets both. Without them the tests print a skip
//! line and pass, except under `CI=true`, where they fail.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use mosaic_harness::MemoryKind;
use mosaic_index::{Eligible, Embedder, IndexTarget, ScopePredicate};
use mosaic_pgsearch::conformance::{
    self, RetrievalFactory, SUITE_DIMENSION, TENANT_A, TENANT_B, message, policy, scope,
    suite_embedder,
};
use mosaic_pgsearch::schema::{self, TENANT_TABLES, quote_identifier};
use mosaic_pgsearch::{
    LexicalSearch, PgLexicalIndex, PgSearchError, PgSearchResult, PgVectorIndex, SearchTarget,
    VectorSearch, VectorSearchConfig,
};
use postgres::{Client, NoTls};

/// Superuser and application-role URLs, or `None` (skip).
fn urls() -> Option<(String, String)> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let under_ci = var("CI").is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    match (
        var("MOSAIC_TEST_POSTGRES_URL"),
        var("MOSAIC_TEST_POSTGRES_APP_URL"),
    ) {
        (Some(admin), Some(app)) => Some((admin, app)),
        (None, None) if !under_ci => {
            crate::skip::skipped(
                "mosaic-pgsearch PostgreSQL tests",
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

/// One schema per database, owned by the superuser, used by the app role.
pub struct PgFactory {
    admin_url: String,
    app_url: String,
    app_role: String,
}

/// One schema; dropped with everything in it.
pub struct PgDb {
    schema: String,
    admin_url: String,
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let dropped = Client::connect(&self.admin_url, NoTls).and_then(|mut admin| {
            admin.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                quote_identifier(&self.schema)
            ))
        });
        if let Err(e) = dropped {
            eprintln!("could not drop test schema {}: {e}", self.schema);
        }
    }
}

fn connect_in(url: &str, schema: &str) -> PgSearchResult<Client> {
    connect_with(url, schema, "")
}

fn connect_with(url: &str, schema: &str, extra: &str) -> PgSearchResult<Client> {
    let mut config: postgres::Config = url
        .parse()
        .map_err(|e: postgres::Error| PgSearchError::InvalidArgument(e.to_string()))?;
    // The vector extension lives in `public`.
    config.options(&format!("-c search_path={schema},public {extra}"));
    Ok(config.connect(NoTls)?)
}

impl PgFactory {
    fn from_env() -> Option<PgFactory> {
        let (admin_url, app_url) = urls()?;
        let app_role = app_url
            .parse::<postgres::Config>()
            .ok()
            .and_then(|c| c.get_user().map(str::to_owned))
            .unwrap_or_else(|| panic!("MOSAIC_TEST_POSTGRES_APP_URL names no user"));
        Some(PgFactory {
            admin_url,
            app_url,
            app_role,
        })
    }

    fn admin(&self, db: &PgDb) -> PgSearchResult<Client> {
        connect_in(&self.admin_url, &db.schema)
    }

    fn app(&self, db: &PgDb) -> PgSearchResult<Client> {
        connect_in(&self.app_url, &db.schema)
    }
}

fn unique_schema() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "pgsearch_test_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl RetrievalFactory for PgFactory {
    type Lexical = PgLexicalIndex;
    type Vector = PgVectorIndex;
    type Db = PgDb;

    fn fresh(&self) -> PgSearchResult<PgDb> {
        let schema = unique_schema();
        let mut admin = Client::connect(&self.admin_url, NoTls)?;
        admin.batch_execute(&format!("CREATE SCHEMA {}", quote_identifier(&schema)))?;
        let db = PgDb {
            schema,
            admin_url: self.admin_url.clone(),
        };
        let mut owner = self.admin(&db)?;
        schema::migrate(&mut owner, SUITE_DIMENSION)?;
        schema::grant_application_role(&mut owner, &self.app_role)?;
        Ok(db)
    }

    fn lexical(&self, db: &PgDb) -> PgSearchResult<PgLexicalIndex> {
        PgLexicalIndex::open(self.app(db)?)
    }

    fn vector(&self, db: &PgDb) -> PgSearchResult<PgVectorIndex> {
        PgVectorIndex::open(
            self.app(db)?,
            suite_embedder(),
            VectorSearchConfig::default(),
        )
    }
}

macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let Some(factory) = PgFactory::from_env() else { return };
                conformance::$name(&factory).expect(stringify!($name));
            }
        )*

        #[test]
        fn every_retrieval_check_has_a_test() {
            let listed: Vec<&str> = conformance::all_checks::<PgFactory>()
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            assert_eq!(listed, vec![$(stringify!($name)),*]);
        }
    };
}

checks!(
    replay_once_is_idempotent,
    replay_twice_is_idempotent,
    replay_thrice_is_idempotent,
    out_of_order_delivery_converges,
    no_resurrection_after_tombstone_or_revocation,
    tenant_and_subject_scopes_never_cross,
    filtered_vector_recall_at_one_percent,
    lexical_ranking_is_sane,
);

fn seeded(factory: &PgFactory) -> (PgDb, PgLexicalIndex, PgVectorIndex) {
    let db = factory.fresh().expect("fresh");
    let mut lexical = factory.lexical(&db).expect("lexical");
    let mut vector = factory.vector(&db).expect("vector");
    for (id, tenant) in [("a1", TENANT_A), ("a2", TENANT_A), ("b1", TENANT_B)] {
        let m = message(
            id,
            1,
            0,
            scope(tenant, "principal:alice"),
            "shared secret plan",
        );
        lexical.publish(&m).expect("publish lexical");
        vector.publish(&m).expect("publish vector");
    }
    (db, lexical, vector)
}

fn count_as(client: &mut Client, tenant: Option<&str>, sql: &str) -> i64 {
    let mut tx = client.transaction().expect("tx");
    tx.execute(
        "SELECT set_config('mosaic.tenant_id', $1, true)",
        &[&tenant.unwrap_or("")],
    )
    .expect("tenant");
    let n: i64 = tx
        .query_one(sql, &[])
        .and_then(|r| r.try_get(0))
        .expect("count");
    tx.commit().expect("commit");
    n
}

#[test]
fn row_level_security_hides_other_tenants_documents() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, _lexical, _vector) = seeded(&factory);
    let mut admin = factory.admin(&db).expect("admin");
    let mut app = factory.app(&db).expect("app");
    for table in TENANT_TABLES {
        let count = |admin: &mut Client, filter: &str| -> i64 {
            admin
                .query_one(&format!("SELECT count(*) FROM {table} {filter}"), &[])
                .and_then(|r| r.try_get(0))
                .expect("admin count")
        };
        let of_a = count(&mut admin, "WHERE tenant_id = 'tenant-a'");
        let of_b = count(&mut admin, "WHERE tenant_id = 'tenant-b'");
        assert!(of_a > 0 && of_b > 0, "{table} holds both tenants' rows");
        assert_eq!(count(&mut admin, ""), of_a + of_b, "{table}");
        assert_eq!(
            count_as(
                &mut app,
                Some(TENANT_A),
                &format!("SELECT count(*) FROM {table}")
            ),
            of_a,
            "{table} as tenant A"
        );
        assert_eq!(
            count_as(
                &mut app,
                Some(TENANT_A),
                &format!("SELECT count(*) FROM {table} WHERE tenant_id = 'tenant-b'")
            ),
            0,
            "{table}: tenant B's rows visible to tenant A"
        );
        assert_eq!(
            count_as(&mut app, None, &format!("SELECT count(*) FROM {table}")),
            0,
            "{table}: rows visible with no tenant set"
        );
        let forced: bool = admin
            .query_one(
                "SELECT relrowsecurity AND relforcerowsecurity FROM pg_catalog.pg_class
                 WHERE relname = $1 AND relnamespace = current_schema()::regnamespace",
                &[table],
            )
            .and_then(|r| r.try_get(0))
            .expect("relation");
        assert!(forced, "row-level security is not forced on {table}");
    }
    // The tenant clocks: each tenant sees its own (two writes to each of
    // its two targets), none without a tenant; another tenant's clock
    // cannot be advanced (row-level security on `pgsearch_clock`).
    assert_eq!(
        count_as(
            &mut app,
            Some(TENANT_A),
            "SELECT sum(clock)::BIGINT FROM pgsearch_clock"
        ),
        4
    );
    assert_eq!(
        count_as(
            &mut app,
            Some(TENANT_A),
            "SELECT count(*) FROM pgsearch_clock"
        ),
        1
    );
    assert_eq!(
        count_as(&mut app, None, "SELECT count(*) FROM pgsearch_clock"),
        0
    );
    assert_eq!(
        count_as(
            &mut app,
            Some(TENANT_A),
            "WITH moved AS (UPDATE pgsearch_clock SET clock = clock + 1
                 WHERE tenant_id = 'tenant-b' RETURNING 1) SELECT count(*) FROM moved"
        ),
        0,
        "tenant A advanced tenant B's clock"
    );
    // The application role cannot write a row for another tenant.
    let mut tx = app.transaction().expect("tx");
    tx.execute(
        "SELECT set_config('mosaic.tenant_id', 'tenant-a', true)",
        &[],
    )
    .expect("tenant");
    let refused = tx.execute(
        "INSERT INTO pgsearch_lexical (record_id, tenant_id, policy_sha256, subject_key, kind,
             created_at_ms, generation, document)
         VALUES ('x', 'tenant-b', 'p', 's', 'episodic', 0, 1, to_tsvector('english', 'x'))",
        &[],
    );
    assert!(refused.is_err(), "wrote a row of tenant B as tenant A");
}

#[test]
fn a_record_cannot_move_between_tenants() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (_db, mut lexical, mut vector) = seeded(&factory);
    let hijack = message("a1", 2, 0, scope(TENANT_B, "principal:alice"), "hijacked");
    assert!(lexical.publish(&hijack).is_err());
    assert!(vector.publish(&hijack).is_err());
    let eligible = vec!["a1".to_owned()];
    let hits = lexical
        .search_text(
            "hijacked",
            &Eligible::Records(&eligible),
            TENANT_B,
            &policy(),
            10,
        )
        .expect("search");
    assert!(hits.is_empty());
}

#[test]
fn stateless_servers_share_one_database() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let (db, _lexical, mut vector) = seeded(&factory);
    // A second "server": its own connections, no state of its own.
    let mut lexical2 = factory.lexical(&db).expect("lexical");
    let mut vector2 = factory.vector(&db).expect("vector");
    let eligible = Eligible::Records(&[]);
    assert!(
        lexical2
            .search_text("secret", &eligible, TENANT_A, &policy(), 10)
            .expect("search")
            .is_empty()
    );
    let ids = vec!["a1".to_owned(), "a2".to_owned()];
    let found = lexical2
        .search_text(
            "secret plan",
            &Eligible::Records(&ids),
            TENANT_A,
            &policy(),
            10,
        )
        .expect("search");
    assert_eq!(found.len(), 2);
    // A tombstone applied by one server is seen by the other at once, and
    // a duplicate delivery to the other is recognised.
    vector.tombstone("a1", 2).expect("tombstone");
    let q = suite_embedder().embed("secret plan").expect("embed");
    let hits = vector2
        .search_embedding(&q, &Eligible::Records(&ids), TENANT_A, &policy(), 10)
        .expect("search");
    let got: Vec<&str> = hits.iter().map(|h| h.record_id.as_str()).collect();
    assert_eq!(got, ["a2"]);
    assert_eq!(
        vector2.tombstone("a1", 2).expect("again").outcome,
        mosaic_index::AckOutcome::AlreadyApplied
    );
}

#[test]
fn broad_scope_search_uses_the_hnsw_index() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let db = factory.fresh().expect("fresh");
    // A table this small is cheaper to scan sequentially or through the
    // scope index; without those the plan shows how the HNSW index serves a
    // filtered query: the scope is a filter of the index scan itself.
    let client = connect_with(
        &factory.app_url,
        &db.schema,
        "-c enable_seqscan=off -c enable_bitmapscan=off -c enable_indexscan=on",
    )
    .expect("connect");
    let mut vector = PgVectorIndex::open(client, suite_embedder(), VectorSearchConfig::default())
        .expect("vector");
    let messages: Vec<_> = (0..600)
        .map(|i| {
            message(
                &format!("v{i:04}"),
                1,
                0,
                scope(TENANT_A, &format!("principal:p{}", i % 2)),
                &format!("note {i} about topic {}", i % 17),
            )
        })
        .collect();
    for r in vector.publish_batch(&messages) {
        r.expect("publish");
    }
    let mut admin = factory.admin(&db).expect("admin");
    // Without the scope index, the only index that can order by distance.
    admin
        .batch_execute("DROP INDEX pgsearch_vector_scope; ANALYZE pgsearch_vector")
        .expect("analyze");
    let predicate = ScopePredicate {
        subject_keys: ["principal:p0".to_owned(), "principal:p1".to_owned()].into(),
        kinds: MemoryKind::ALL.into_iter().collect(),
    };
    let q = suite_embedder().embed("topic 3").expect("embed");
    let plan = vector
        .explain_scope_search(&q, &Eligible::Scope(&predicate), TENANT_A, &policy(), 10)
        .expect("explain")
        .join("\n");
    let scan = plan
        .lines()
        .position(|l| l.contains("Index Scan using pgsearch_vector_hnsw"))
        .unwrap_or_else(|| panic!("no HNSW index scan in plan:\n{plan}"));
    assert!(
        plan.lines()
            .skip(scan + 1)
            .take_while(|l| !l.contains("->"))
            .any(|l| l.contains("Filter:") && l.contains("subject_key")),
        "the scope is not a filter of the HNSW scan:\n{plan}"
    );
}

/// The ranked read's term query finds the rows holding a query term by
/// term equality in `pgsearch_terms`' index, as the application role under
/// row-level security, reading only the rows it returns: the overlap of
/// the lexical rows' term arrays (before search schema version 6) could
/// not use its GIN index under the tenant policy (the operator is not
/// leakproof), and tested every row of the reader's subjects.
#[test]
fn the_term_query_reads_only_the_rows_holding_a_query_term() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let db = factory.fresh().expect("fresh");
    let mut lexical = factory.lexical(&db).expect("lexical");
    // 1,000 rows of one subject of tenant A, each with a word of its own
    // and fifteen of 400 shared words, and the same in tenant B: one rare
    // term is held by one row of each tenant.
    let word = |i: usize| -> String {
        let letters = b"bcdfghjklmnprstvz";
        let (mut n, mut w) = (i, String::from("q"));
        for _ in 0..3 {
            w.push(letters[n % letters.len()] as char);
            w.push('a');
            n /= letters.len();
        }
        w
    };
    let messages: Vec<_> = [TENANT_A, TENANT_B]
        .into_iter()
        .flat_map(|tenant| {
            (0..1000).map(move |i| {
                message(
                    &format!("{tenant}-t{i:05}"),
                    1,
                    0,
                    scope(tenant, "principal:alice"),
                    &std::iter::once(word(i))
                        .chain((0..15).map(|j| word(1000 + (i * 7 + j * 13) % 400)))
                        .collect::<Vec<_>>()
                        .join(" "),
                )
            })
        })
        .collect();
    for r in lexical.publish_batch(&messages) {
        r.expect("publish");
    }
    let rare = mosaic_index::text::terms(&word(734));
    assert_eq!(rare.len(), 1, "{rare:?}");
    let mut app = factory.app(&db).expect("app");
    let subjects = vec!["principal:alice".to_owned()];
    let params: [&(dyn postgres::types::ToSql + Sync); 4] =
        [&TENANT_A, &subjects, &rare, &policy()];
    let mut tx = app.transaction().expect("tx");
    tx.execute(
        "SELECT set_config('mosaic.tenant_id', $1, true)",
        &[&TENANT_A],
    )
    .expect("tenant");
    let found = tx
        .query(mosaic_pgsearch::rank::TERM_QUERY, &params)
        .expect("term query");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].get::<_, String>(0), "tenant-a-t00734");
    assert_eq!(found[0].get::<_, String>(1), rare[0]);
    assert_eq!(found[0].get::<_, i32>(2), 1);
    assert!(found[0].get::<_, bool>(3));
    let plan: Vec<String> = tx
        .query(
            &format!(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {}",
                mosaic_pgsearch::rank::TERM_QUERY
            ),
            &params,
        )
        .expect("explain")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let plan = plan.join("\n");
    assert!(
        plan.contains("pgsearch_terms_lookup"),
        "the term query does not read the terms' index:\n{plan}"
    );
    let removed: u64 = plan
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Rows Removed by Filter: "))
        .filter_map(|n| n.trim().parse::<f64>().ok())
        .map(|n| n as u64)
        .sum();
    assert_eq!(removed, 0, "rows read and dropped:\n{plan}");
    tx.rollback().expect("rollback");
    // Tenant B's row holding the term is not tenant A's to read, even
    // named: the tenant the transaction entered binds.
    let mut tx = app.transaction().expect("tx");
    tx.execute(
        "SELECT set_config('mosaic.tenant_id', $1, true)",
        &[&TENANT_A],
    )
    .expect("tenant");
    let crossed = tx
        .query(
            mosaic_pgsearch::rank::TERM_QUERY,
            &[&TENANT_B, &subjects, &rare, &policy()],
        )
        .expect("term query naming tenant B");
    assert!(crossed.is_empty(), "tenant A read tenant B's terms");
    tx.rollback().expect("rollback");
    // A deleted lexical row takes its terms with it.
    let mut owner = factory.admin(&db).expect("admin");
    owner
        .batch_execute("DELETE FROM pgsearch_lexical WHERE record_id = 'tenant-a-t00734'")
        .expect("delete");
    let left: i64 = owner
        .query_one(
            "SELECT count(*) FROM pgsearch_terms WHERE record_id = 'tenant-a-t00734'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(left, 0);
}

/// An empty schema of its own (no tables), dropped with the returned
/// [`PgDb`].
fn empty_schema(factory: &PgFactory) -> PgDb {
    let schema = unique_schema();
    let mut admin = Client::connect(&factory.admin_url, NoTls).expect("admin");
    admin
        .batch_execute(&format!("CREATE SCHEMA {}", quote_identifier(&schema)))
        .expect("create schema");
    PgDb {
        schema,
        admin_url: factory.admin_url.clone(),
    }
}

/// The search tables' versions in `pgsearch_migrations`, in order.
fn ledger(owner: &mut Client) -> Vec<i64> {
    owner
        .query(
            "SELECT version FROM pgsearch_migrations ORDER BY version",
            &[],
        )
        .expect("ledger")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// A schema made by each earlier release (version 1 to 4: the store's
/// runner given only that release's steps, as that release ran them)
/// migrates in place through the one runner to the current version, each
/// missing version recorded once, and serves both targets afterwards.
#[test]
fn a_search_schema_at_each_older_version_migrates_through_the_shared_runner() {
    use mosaic_store::postgres::runner;

    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    for old in 1..schema::SCHEMA_VERSION {
        let db = empty_schema(&factory);
        let mut owner = factory.admin(&db).expect("admin");
        let mut earlier = schema::component(SUITE_DIMENSION);
        earlier
            .steps
            .truncate(usize::try_from(old).expect("version"));
        assert_eq!(
            runner::migrate::<PgSearchError>(&mut owner, &earlier).expect("earlier release"),
            old
        );
        assert_eq!(ledger(&mut owner), (1..=old).collect::<Vec<_>>());
        if old >= 2 {
            owner
                .batch_execute(
                    "INSERT INTO pgsearch_lexical (record_id, tenant_id, policy_sha256,
                         subject_key, kind, created_at_ms, generation, document, terms, tfs)
                     VALUES ('before', 'tenant-a', 'p', 's', 'episodic', 0, 1,
                         to_tsvector('english', 'x'), '{harbour,ledger}', '{2,1}')",
                )
                .expect("a lexical row of the earlier release");
        }
        // The serving role refuses the older schema until it is migrated.
        assert!(matches!(
            PgLexicalIndex::open(factory.app(&db).expect("app")),
            Err(PgSearchError::Schema(_))
        ));
        assert_eq!(
            schema::migrate(&mut owner, SUITE_DIMENSION).expect("upgrade"),
            schema::SCHEMA_VERSION,
            "from version {old}"
        );
        assert_eq!(
            ledger(&mut owner),
            (1..=schema::SCHEMA_VERSION).collect::<Vec<_>>(),
            "from version {old}"
        );
        // What the last version added is there.
        let clock: bool = owner
            .query_one(
                "SELECT to_regclass(quote_ident(current_schema()) || '.pgsearch_clock') IS NOT NULL",
                &[],
            )
            .expect("clock table")
            .get(0);
        assert!(clock, "from version {old}");
        // The lexical rows written before version 6 have their terms in
        // `pgsearch_terms` (filled by the migration).
        if old >= 2 {
            let terms: i64 = owner
                .query_one(
                    "SELECT count(*) FROM pgsearch_terms
                     WHERE record_id = 'before' AND tenant_id = 'tenant-a'
                       AND subject_key = 's' AND policy_sha256 = 'p'
                       AND ((term = 'harbour' AND tf = 2) OR (term = 'ledger' AND tf = 1))",
                    &[],
                )
                .expect("terms")
                .get(0);
            assert_eq!(terms, 2, "from version {old}");
        }
        schema::grant_application_role(&mut owner, &factory.app_role).expect("grant");
        factory.lexical(&db).expect("lexical opens");
        factory.vector(&db).expect("vector opens");
        // Migrating again changes nothing.
        assert_eq!(
            schema::migrate(&mut owner, SUITE_DIMENSION).expect("again"),
            schema::SCHEMA_VERSION
        );
        assert_eq!(ledger(&mut owner).len() as i64, schema::SCHEMA_VERSION);
    }
}

/// The runner refuses, before writing anything, a search schema newer than
/// this release and search tables without their ledger (the layer that
/// stops both: `mosaic_store::postgres::runner`, under the lock); the
/// store's tables beside them are not the search tables' concern.
#[test]
fn the_runner_refuses_a_newer_search_schema_and_search_tables_without_a_ledger() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let db = factory.fresh().expect("fresh");
    let mut owner = factory.admin(&db).expect("admin");
    let newer = schema::SCHEMA_VERSION + 1;
    owner
        .execute(
            "INSERT INTO pgsearch_migrations (version) VALUES ($1)",
            &[&newer],
        )
        .expect("a newer release's row");
    let refused = schema::migrate(&mut owner, SUITE_DIMENSION);
    assert!(
        matches!(&refused, Err(PgSearchError::Schema(m)) if m.contains("newer than this release")),
        "{refused:?}"
    );
    assert_eq!(ledger(&mut owner).last(), Some(&newer));
    owner
        .batch_execute("DROP TABLE pgsearch_migrations")
        .expect("drop the ledger");
    let refused = schema::migrate(&mut owner, SUITE_DIMENSION);
    assert!(
        matches!(&refused, Err(PgSearchError::Schema(m)) if m.contains("no pgsearch_migrations")),
        "{refused:?}"
    );
    // A schema holding only another component's tables is not refused.
    let db = empty_schema(&factory);
    let mut owner = factory.admin(&db).expect("admin");
    owner
        .batch_execute("CREATE TABLE records (record_id TEXT PRIMARY KEY)")
        .expect("another component's table");
    assert_eq!(
        schema::migrate(&mut owner, SUITE_DIMENSION).expect("beside another component"),
        schema::SCHEMA_VERSION
    );
}

#[test]
fn schema_for_another_dimension_is_refused() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let db = factory.fresh().expect("fresh");
    let mut owner = factory.admin(&db).expect("admin");
    assert!(matches!(
        schema::migrate(&mut owner, SUITE_DIMENSION + 1),
        Err(PgSearchError::Schema(_))
    ));
    assert_eq!(
        schema::migrate(&mut owner, SUITE_DIMENSION).expect("idempotent"),
        schema::SCHEMA_VERSION
    );
    let wrong = std::sync::Arc::new(mosaic_index::HashEmbedder::new(SUITE_DIMENSION * 2));
    assert!(matches!(
        PgVectorIndex::open(
            factory.app(&db).expect("app"),
            wrong,
            VectorSearchConfig::default()
        ),
        Err(PgSearchError::Schema(_))
    ));
}

/// The shared ranker over PostgreSQL against the in-memory retriever on the
/// same conversation.
mod shared_ranker {
    use super::*;
    use std::collections::BTreeSet;

    use mosaic_harness::canonical::sha256_hex;
    use mosaic_harness::memory_scope::{EligibleEntry, EligibleSet, SealedEligibleSet};
    use mosaic_index::funnel::RANKER_RELEASE;
    use mosaic_index::{
        AnnConfig, FunnelConfig, PublishMessage, Recall, RecallQuery, RetrievalMode, Retriever,
    };
    use mosaic_pgsearch::rank;

    const SUBJECT: &str = "principal:alice";
    const ASSISTANT_SUBJECT: &str = "principal:bob";

    const TOPICS: [&str; 16] = [
        "went hiking at the lake with the kids",
        "called the adoption agency about the interview",
        "signed up for a pottery class on Tuesdays",
        "painted a sunset over the harbour",
        "went camping in the mountains last weekend",
        "ran the charity race for the shelter",
        "started a new job at the city library",
        "took guitar lessons from an old friend",
        "joined the support group that meets on Fridays",
        "moved the shop hosting to Fly.io",
        "kept the shop on Heroku for now",
        "booked a trip to Paris in the summer",
        "adopted a dog named Biscuit",
        "finished reading a novel about sailors",
        "volunteered at the animal shelter",
        "watched the school play with her parents",
    ];
    const REPLIES: [&str; 6] = [
        "That sounds wonderful, tell me more!",
        "Wow, I am so proud of you.",
        "How did that make you feel?",
        "Yes, it was the best day in a long time.",
        "I would love to see pictures of it.",
        "Thanks, it really means a lot.",
    ];

    /// A small deterministic generator (64-bit LCG).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % n as u64) as usize
        }
    }

    /// Turns of two named speakers (about `SUBJECT`), of a user and an
    /// assistant (about `ASSISTANT_SUBJECT`), and another tenant's turns
    /// under the same subject key. Every tenth turn shares its
    /// predecessor's creation time; some turns carry claim keys.
    fn conversation() -> Vec<PublishMessage> {
        let mut rng = Lcg(7);
        let mut out = Vec::new();
        let mut at = 1_700_000_000_000u64;
        let plan = [
            (TENANT_A, SUBJECT, ["Caroline", "Melanie"], 220),
            (TENANT_A, ASSISTANT_SUBJECT, ["user", "assistant"], 100),
            (TENANT_B, SUBJECT, ["Caroline", "Joanna"], 60),
        ];
        for (tenant, subject, speakers, turns) in plan {
            for i in 0..turns {
                if i % 10 != 9 {
                    at += 60_000;
                }
                let day = 1 + (i / 12) % 28;
                let speaker = speakers[i % 2];
                let body = if rng.next(3) == 0 {
                    REPLIES[rng.next(REPLIES.len())].to_owned()
                } else {
                    let a = TOPICS[rng.next(TOPICS.len())];
                    if rng.next(2) == 0 {
                        format!("I {a}.")
                    } else {
                        format!("I {a}, and then {}.", TOPICS[rng.next(TOPICS.len())])
                    }
                };
                let mut m = message(
                    &format!("{tenant}-{subject}-{i:03}"),
                    1,
                    0,
                    scope(tenant, subject),
                    &format!("[{day} May, 2023] {speaker}: {body}"),
                );
                m.created_at_unix_ms = at;
                if body.contains("Biscuit") {
                    m.claim_keys = vec!["pet.name".into()];
                } else if body.contains("hosting") {
                    m.claim_keys = vec!["shop.hosting".into()];
                }
                out.push(m);
            }
        }
        out
    }

    const QUESTIONS: [&str; 21] = [
        "Where did Melanie go hiking?",
        "What did Caroline paint?",
        "When did Caroline call the adoption agency?",
        "How long ago did Melanie go camping in the mountains?",
        "What class did Melanie sign up for?",
        "What is the name of Melanie's dog?",
        "Where is my shop hosting now?",
        "What did you say about the shop on Heroku?",
        "Which race did Caroline run, and for whom?",
        "What book is Melanie reading?",
        "Who does Caroline take guitar lessons from?",
        "Where is Melanie travelling in the summer?",
        "What does Caroline do at the library currently?",
        "How did Melanie feel about the school play?",
        "What support group did Caroline join?",
        "Did Melanie volunteer at the shelter?",
        "camping mountains weekend",
        "pictures",
        "What is the latest news about the pottery class?",
        "Which pet did they adopt?",
        "proud wonderful feel",
    ];

    /// Tenant A's turns, or only those of the subjects whose record ids
    /// start with `only`.
    fn eligible(
        messages: &[PublishMessage],
        removed: &BTreeSet<String>,
        only: Option<&str>,
    ) -> SealedEligibleSet {
        // Every eleventh turn of tenant A is outside the read (its terms
        // still count in the subject's statistics, as in memory).
        let entries = messages
            .iter()
            .enumerate()
            .filter(|(i, m)| {
                m.scope.tenant_id == TENANT_A
                    && i % 11 != 4
                    && !removed.contains(&m.record_id)
                    && only.is_none_or(|prefix| m.record_id.starts_with(prefix))
            })
            .map(|(_, m)| EligibleEntry {
                record_id: m.record_id.clone(),
                content_sha256: sha256_hex(m.text.as_bytes()),
            })
            .collect();
        SealedEligibleSet::seal(EligibleSet {
            scope_commitments: Vec::new(),
            read_context_sha256: sha256_hex(b"shared ranker read"),
            entries,
        })
        .unwrap()
    }

    fn query<'a>(
        text: &'a str,
        eligible: &'a SealedEligibleSet,
        claim_keys: &'a [String],
        mode: RetrievalMode,
        policy: &'a str,
    ) -> RecallQuery<'a> {
        RecallQuery {
            tenant_id: TENANT_A,
            policy_sha256: policy,
            selector_release: "test",
            read_subject: "alice",
            revocation_generation: 0,
            text,
            claim_keys,
            eligible,
            max_results: 10,
            mode,
        }
    }

    #[test]
    fn postgresql_and_memory_rank_a_conversation_alike() {
        let Some(factory) = PgFactory::from_env() else {
            return;
        };
        let db = factory.fresh().expect("fresh");
        let mut pg_lexical = factory.lexical(&db).expect("lexical");
        let mut pg_vector = factory.vector(&db).expect("vector");
        let embedder = suite_embedder();
        let mut memory = Retriever::new(
            embedder.clone(),
            AnnConfig::default(),
            FunnelConfig::default(),
        );
        let messages = conversation();
        for m in &messages {
            memory.lexical.publish(m).expect("memory lexical");
            memory.vector.publish(m).expect("memory vector");
            pg_lexical.publish(m).expect("pg lexical");
            pg_vector.publish(m).expect("pg vector");
        }
        // The fence on both sides: a tombstone removes a turn, a later
        // generation replaces another's text.
        let mut removed = BTreeSet::new();
        for m in messages
            .iter()
            .filter(|m| m.scope.tenant_id == TENANT_A)
            .step_by(37)
        {
            memory
                .lexical
                .tombstone(&m.record_id, 2)
                .expect("tombstone");
            memory.vector.tombstone(&m.record_id, 2).expect("tombstone");
            pg_lexical.tombstone(&m.record_id, 2).expect("tombstone");
            pg_vector.tombstone(&m.record_id, 2).expect("tombstone");
            removed.insert(m.record_id.clone());
        }
        let mut replaced = messages[50].clone();
        replaced.generation = 2;
        replaced.text = "[5 May, 2023] Melanie: I went hiking at the lake again today.".into();
        for result in [
            memory.lexical.publish(&replaced),
            memory.vector.publish(&replaced),
            pg_lexical.publish(&replaced),
            pg_vector.publish(&replaced),
        ] {
            result.expect("republish");
        }
        let mut messages = messages;
        messages[50] = replaced;
        let shared = eligible(&messages, &removed, None);
        // A read of the user and the assistant alone: every candidate is a
        // role line, so the lists weigh alike (PostgreSQL must read the
        // roles as memory does, or the scores differ).
        let dialogue = eligible(
            &messages,
            &removed,
            Some(&format!("{TENANT_A}-{ASSISTANT_SUBJECT}-")),
        );
        let policy = policy();
        let claims = ["pet.name".to_owned(), "shop.hosting".to_owned()];
        let mut compared = 0;
        let (mut speaker, mut recency, mut timed, mut structured, mut vector_only) =
            (0, 0, 0, 0, 0);
        let mut updated = 0;
        for (i, (text, set)) in QUESTIONS
            .iter()
            .map(|t| (t, &shared))
            .chain(QUESTIONS.iter().map(|t| (t, &dialogue)))
            .enumerate()
        {
            let vector = embedder.embed(text).expect("embed");
            let claim_keys: &[String] = if i % 4 == 0 {
                &claims[i / 4 % 2..][..1]
            } else {
                &[]
            };
            for mode in [
                RetrievalMode::Lexical,
                RetrievalMode::Vector,
                RetrievalMode::Hybrid,
            ] {
                let q = query(text, set, claim_keys, mode, &policy);
                let v = (mode != RetrievalMode::Lexical).then_some(vector.as_slice());
                let mem: Recall = memory.recall_embedded(&q, v).expect("memory recall");
                let pg: Recall =
                    rank::recall(&mut pg_lexical, memory.config(), &q, v, embedder.release())
                        .expect("pg recall");
                assert!(
                    !mem.record_ids().is_empty(),
                    "{text:?} {mode:?}: nothing found"
                );
                assert_eq!(
                    pg.record_ids(),
                    mem.record_ids(),
                    "{text:?} {mode:?}: top-10s differ"
                );
                assert_eq!(
                    pg.receipt, mem.receipt,
                    "{text:?} {mode:?}: receipts differ"
                );
                assert_eq!(pg.explanations, mem.explanations, "{text:?} {mode:?}");
                assert_eq!(pg.receipt.ranker_release, RANKER_RELEASE);
                for e in &mem.explanations {
                    speaker += usize::from(e.speaker_bonus > 0);
                    recency += usize::from(e.recency_bonus > 0);
                    timed += usize::from(e.time_bonus > 0);
                    structured += usize::from(e.structured);
                    vector_only += usize::from(e.vector_rank.is_some() && e.lexical_rank.is_none());
                    updated += usize::from(e.update_lift > 0);
                }
                for id in pg.record_ids() {
                    assert!(!removed.contains(id), "a tombstoned turn was ranked");
                    assert!(id.starts_with(TENANT_A), "another tenant's turn was ranked");
                }
                compared += 1;
            }
        }
        assert_eq!(compared, QUESTIONS.len() * 2 * 3);
        // The comparison exercised every part of the fusion.
        assert!(
            speaker > 0
                && recency > 0
                && timed > 0
                && structured > 0
                && vector_only > 0
                && updated > 0,
            "speaker {speaker}, recency {recency}, time {timed}, structured {structured}, \
             vector {vector_only}, update pairs {updated}"
        );
    }

    #[test]
    fn a_version_1_schema_is_upgraded_and_its_old_rows_are_refused_until_republished() {
        let Some(factory) = PgFactory::from_env() else {
            return;
        };
        let db = factory.fresh().expect("fresh");
        let mut owner = factory.admin(&db).expect("admin");
        // Back to version 1: without what the shared ranker needs.
        owner
            .batch_execute(
                "DROP TRIGGER pgsearch_terms_sync ON pgsearch_lexical;
                 DROP FUNCTION pgsearch_terms_sync(); DROP TABLE pgsearch_terms;
                 DROP INDEX pgsearch_lexical_partition;
                 ALTER TABLE pgsearch_lexical DROP COLUMN seq, DROP COLUMN analyzer,
                     DROP COLUMN doc_len, DROP COLUMN terms, DROP COLUMN tfs,
                     DROP COLUMN speaker, DROP COLUMN speaker_role, DROP COLUMN claim_keys,
                     DROP COLUMN timed, DROP COLUMN changes;
                 ALTER TABLE pgsearch_vector DROP COLUMN seq;
                 DROP SEQUENCE pgsearch_lexical_seq; DROP SEQUENCE pgsearch_vector_seq;
                 DROP TABLE pgsearch_clock; DROP INDEX pgsearch_fence_clock;
                 ALTER TABLE pgsearch_fence DROP COLUMN tenant_clock;
                 DELETE FROM pgsearch_migrations WHERE version >= 2;",
            )
            .expect("downgrade");
        // The serving role refuses a version-1 schema.
        assert!(matches!(
            PgLexicalIndex::open(factory.app(&db).expect("app")),
            Err(PgSearchError::Schema(_))
        ));
        let messages: Vec<PublishMessage> = conversation().into_iter().take(12).collect();
        owner
            .execute(
                "INSERT INTO pgsearch_lexical (record_id, tenant_id, policy_sha256, subject_key,
                     kind, created_at_ms, generation, document)
                 VALUES ($1, $2, $3, $4, 'episodic', 1, 1, to_tsvector('english', $5))",
                &[
                    &messages[0].record_id,
                    &TENANT_A,
                    &policy(),
                    &SUBJECT,
                    &messages[0].text,
                ],
            )
            .expect("a version-1 row");
        assert_eq!(
            schema::migrate(&mut owner, SUITE_DIMENSION).expect("upgrade"),
            schema::SCHEMA_VERSION
        );
        schema::grant_application_role(&mut owner, &factory.app_role).expect("grant");
        let mut pg_lexical = factory.lexical(&db).expect("lexical");
        let set = eligible(&messages, &BTreeSet::new(), None);
        let policy = policy();
        let config = FunnelConfig::default();
        let q = query(
            "Where did Melanie go hiking?",
            &set,
            &[],
            RetrievalMode::Lexical,
            &policy,
        );
        // The row from version 1 has no analyzer terms: ranking is refused.
        let refused = rank::recall(&mut pg_lexical, &config, &q, None, "hash");
        assert!(
            matches!(&refused, Err(e) if e.to_string().contains("publish the lexical target again")),
            "{refused:?}"
        );
        // Published again (a later generation), every row ranks.
        let mut again = messages[0].clone();
        again.generation = 2;
        pg_lexical.publish(&again).expect("republish");
        for m in &messages[1..] {
            pg_lexical.publish(m).expect("publish");
        }
        rank::recall(&mut pg_lexical, &config, &q, None, "hash").expect("recall");
    }

    /// Publishes the first `n` of tenant A's turns that `keep` keeps.
    fn publish_turns_of_a(
        pg_lexical: &mut PgLexicalIndex,
        keep: impl Fn(&PublishMessage) -> bool,
        n: usize,
    ) -> Vec<PublishMessage> {
        let messages: Vec<PublishMessage> = conversation()
            .into_iter()
            .filter(|m| m.scope.tenant_id == TENANT_A && keep(m))
            .take(n)
            .collect();
        for m in &messages {
            pg_lexical.publish(m).expect("publish");
        }
        messages
    }

    #[test]
    fn a_version_2_schema_is_upgraded_and_its_rows_rank_as_placing_nothing_in_time() {
        let Some(factory) = PgFactory::from_env() else {
            return;
        };
        let db = factory.fresh().expect("fresh");
        let mut pg_lexical = factory.lexical(&db).expect("lexical");
        let messages = publish_turns_of_a(&mut pg_lexical, |m| m.text.contains("last weekend"), 3);
        assert!(!messages.is_empty());
        let set = eligible(&messages, &BTreeSet::new(), None);
        let policy = policy();
        let config = FunnelConfig::default();
        let q = query(
            "When did Melanie go camping in the mountains?",
            &set,
            &[],
            RetrievalMode::Lexical,
            &policy,
        );
        let timed = |r: &Recall| r.explanations.iter().filter(|e| e.time_bonus > 0).count();
        let fresh = rank::recall(&mut pg_lexical, &config, &q, None, "hash").expect("recall");
        // (The lowest candidate's standard score is 0, and so its bonus.)
        assert!(timed(&fresh) > 0, "{:?}", fresh.explanations);
        // Back to version 2: the rows lose what version 3 added.
        let mut owner = factory.admin(&db).expect("admin");
        owner
            .batch_execute(
                "DROP TRIGGER pgsearch_terms_sync ON pgsearch_lexical;
                 DROP FUNCTION pgsearch_terms_sync(); DROP TABLE pgsearch_terms;
                 CREATE INDEX pgsearch_lexical_terms ON pgsearch_lexical USING gin (terms);
                 ALTER TABLE pgsearch_lexical DROP COLUMN timed, DROP COLUMN changes;
                 DROP TABLE pgsearch_clock; DROP INDEX pgsearch_fence_clock;
                 ALTER TABLE pgsearch_fence DROP COLUMN tenant_clock;
                 DELETE FROM pgsearch_migrations WHERE version >= 3;",
            )
            .expect("downgrade");
        assert_eq!(
            schema::migrate(&mut owner, SUITE_DIMENSION).expect("upgrade"),
            schema::SCHEMA_VERSION
        );
        schema::grant_application_role(&mut owner, &factory.app_role).expect("grant");
        let mut pg_lexical = factory.lexical(&db).expect("lexical");
        // A row from before version 3 is ranked, without the time prior.
        let old = rank::recall(&mut pg_lexical, &config, &q, None, "hash").expect("recall");
        assert_eq!(old.record_ids(), fresh.record_ids());
        assert_eq!(timed(&old), 0);
        // Published again, it gains it.
        for m in &messages {
            let mut again = m.clone();
            again.generation = 2;
            pg_lexical.publish(&again).expect("republish");
        }
        let again = rank::recall(&mut pg_lexical, &config, &q, None, "hash").expect("recall");
        assert_eq!(timed(&again), timed(&fresh));
    }

    /// A read kept by [`rank::KeptReads`] ranks exactly as a fresh read of
    /// the same state after every kind of change: a write read through a
    /// set derived from the kept one, a write outside the eligible set in
    /// the same subject (it moves the BM25 statistics), a new generation of
    /// an eligible record (supersession), a tombstone (revocation,
    /// erasure) with and without a derived set, writes through other
    /// connections and another tenant's writes. The reader's connection is
    /// never the writers'. The layer that keeps a stale read out: the
    /// tenant clock read in the read's own transaction (`rank`), and the
    /// tenant in the kept read's key (a record of another tenant is never
    /// ranked, as with row-level security).
    #[test]
    fn a_kept_read_ranks_exactly_as_a_fresh_read_after_every_change() {
        use mosaic_harness::memory_scope::SealedEntries;
        use mosaic_pgsearch::rank::{KeptReads, LinesRead, ReadStatements};
        use std::sync::Arc;

        let Some(factory) = PgFactory::from_env() else {
            return;
        };
        let db = factory.fresh().expect("fresh");
        // Two writers (as two servers would be) and two readers: one keeps
        // its reads, the other reads afresh every time.
        let mut writer = (
            factory.lexical(&db).expect("lexical"),
            factory.vector(&db).expect("vector"),
        );
        let mut other_writer = (
            factory.lexical(&db).expect("lexical"),
            factory.vector(&db).expect("vector"),
        );
        let mut kept_reader = factory.app(&db).expect("app");
        let mut fresh_reader = factory.app(&db).expect("app");
        // The kept reader runs the statements prepared on its connection;
        // the fresh reader sends their text each time.
        let statements = ReadStatements::new();
        let embedder = suite_embedder();
        let config = FunnelConfig::default();
        let policy = policy();
        let kept = KeptReads::default();
        let mut messages = conversation();
        // The last turns of tenant A's first subject arrive later.
        let late: Vec<PublishMessage> = messages.drain(200..220).collect();
        for m in &messages {
            writer.0.publish(m).expect("lexical");
            writer.1.publish(m).expect("vector");
        }
        let read_context = sha256_hex(b"shared ranker read");
        // Sorted by record id, as every eligible set is.
        let entries_of = |messages: &[PublishMessage], removed: &BTreeSet<String>| {
            let mut entries = eligible(messages, removed, None).entries().to_vec();
            entries.sort_by(|a, b| a.record_id.cmp(&b.record_id));
            entries
        };
        // A set derived from `parent` by a change naming `changed`.
        let derived = |parent: &SealedEligibleSet, entries, changed: Vec<String>| {
            SealedEligibleSet::of_entries(
                read_context.clone(),
                Arc::new(SealedEntries::seal_derived(
                    entries,
                    parent.sealed_entries().seal_number(),
                    changed,
                )),
            )
            .expect("seal")
        };
        let questions = [
            "Where did Melanie go hiking?",
            "What is the name of Melanie's dog?",
            "camping mountains weekend",
            "What did you say about the shop on Heroku?",
        ];
        // Every question in every mode: the kept read's recall equals the
        // fresh one's (results, receipt, explanations). How the kept
        // reader found its rows, first question first.
        let mut check = |set: &SealedEligibleSet, step: &str| -> Vec<LinesRead> {
            let mut how = Vec::new();
            for text in questions {
                let vector = embedder.embed(text).expect("embed");
                for mode in [
                    RetrievalMode::Lexical,
                    RetrievalMode::Vector,
                    RetrievalMode::Hybrid,
                ] {
                    let q = query(text, set, &[], mode, &policy);
                    let v = (mode != RetrievalMode::Lexical).then_some(vector.as_slice());
                    let (got, read) = rank::recall_prepared(
                        &mut kept_reader,
                        &statements,
                        &kept,
                        &config,
                        &q,
                        v,
                        embedder.release(),
                    )
                    .expect("kept recall");
                    let fresh =
                        rank::recall_on(&mut fresh_reader, &config, &q, v, embedder.release())
                            .expect("fresh recall");
                    assert_eq!(got.receipt, fresh.receipt, "{step}: {text:?} {mode:?}");
                    assert_eq!(
                        got.explanations, fresh.explanations,
                        "{step}: {text:?} {mode:?}"
                    );
                    how.push(read);
                }
            }
            how
        };
        let mut removed = BTreeSet::new();
        let first = eligible(&messages, &removed, None);
        let how = check(&first, "first read");
        assert_eq!(how[0], LinesRead::Fresh);
        assert!(how[1..].iter().all(|h| *h == LinesRead::Kept), "{how:?}");

        // A write by another server, read through a set derived from the
        // kept one: only the new record is read.
        other_writer.0.publish(&late[0]).expect("lexical");
        other_writer.1.publish(&late[0]).expect("vector");
        messages.push(late[0].clone());
        let second = derived(
            &first,
            entries_of(&messages, &removed),
            vec![late[0].record_id.clone()],
        );
        let how = check(&second, "a write");
        assert_eq!(how[0], LinesRead::Advanced(1));
        assert!(how[1..].iter().all(|h| *h == LinesRead::Kept), "{how:?}");

        // Turns written but not (yet) eligible, in the same subject: the
        // kept rows stay, the statistics they move are read again.
        for m in &late[1..6] {
            other_writer.0.publish(m).expect("lexical");
            other_writer.1.publish(m).expect("vector");
        }
        let how = check(&second, "writes outside the set");
        assert_eq!(how[0], LinesRead::Advanced(0));

        // A new generation of an eligible record (its content replaced).
        // (Every eleventh turn is outside the set, see `eligible`.)
        let at = (0..messages.len())
            .find(|&i| {
                i % 11 != 4
                    && messages[i].scope.tenant_id == TENANT_A
                    && messages[i].text.contains("hiking")
            })
            .expect("an eligible hiking turn");
        let mut replaced = messages[at].clone();
        replaced.generation = 2;
        replaced.text = "[5 May, 2023] Melanie: I adopted a dog named Biscuit, not hiking.".into();
        writer.0.publish(&replaced).expect("lexical");
        writer.1.publish(&replaced).expect("vector");
        messages[at] = replaced;
        let how = check(&second, "a supersession");
        assert_eq!(how[0], LinesRead::Advanced(1));

        // A tombstone read through the same set (the index ahead of the
        // read), then through a set derived without the record.
        let gone = messages
            .iter()
            .enumerate()
            .find(|(i, m)| {
                i % 11 != 4 && m.scope.tenant_id == TENANT_A && m.text.contains("Heroku")
            })
            .expect("an eligible Heroku turn")
            .1
            .record_id
            .clone();
        writer.0.tombstone(&gone, 3).expect("tombstone");
        writer.1.tombstone(&gone, 3).expect("tombstone");
        let how = check(&second, "a tombstone");
        assert_eq!(how[0], LinesRead::Advanced(1));
        removed.insert(gone.clone());
        let third = derived(&second, entries_of(&messages, &removed), vec![gone.clone()]);
        // (Its row was already gone from the kept read.)
        let how = check(&third, "an erasure");
        assert_eq!(how[0], LinesRead::Advanced(0));

        // Another tenant's writes leave tenant A's clock, and its kept read,
        // as they were.
        let mut b = message(
            "tenant-b-late",
            1,
            0,
            scope(TENANT_B, SUBJECT),
            "[6 May, 2023] Caroline: I went hiking at the lake with the kids.",
        );
        b.created_at_unix_ms = 1_700_100_000_000;
        other_writer.0.publish(&b).expect("lexical");
        other_writer.1.publish(&b).expect("vector");
        let how = check(&third, "another tenant's write");
        assert!(how.iter().all(|h| *h == LinesRead::Kept), "{how:?}");

        // Forgetting tenant B keeps tenant A's read; forgetting tenant A
        // drops it, and its next read reads every eligible row again.
        kept.forget_tenant(TENANT_B);
        let how = check(&third, "tenant B forgotten");
        assert!(how.iter().all(|h| *h == LinesRead::Kept), "{how:?}");
        assert!(kept.forget_tenant(TENANT_A) > 0);
        assert!(kept.is_empty());
        let how = check(&third, "tenant A forgotten");
        assert_eq!(how[0], LinesRead::Fresh);

        // Tenant B reading tenant A's record ids with tenant A's sealed
        // entries: the kept read is tenant A's, never handed to B.
        let q = query(questions[0], &third, &[], RetrievalMode::Lexical, &policy);
        let mut as_b = q.clone();
        as_b.tenant_id = TENANT_B;
        let (nothing, read) =
            rank::recall_kept(&mut kept_reader, &kept, &config, &as_b, None, "hash")
                .expect("recall as B");
        assert_eq!(read, LinesRead::Fresh);
        assert!(
            nothing.record_ids().is_empty(),
            "{:?}",
            nothing.record_ids()
        );
        assert!(!kept.is_empty());

        // Statements prepared on one connection, run on another: the
        // database refuses them (the statement names only the connection
        // it was prepared on), the read fails and ranks nothing.
        let q = query(questions[0], &third, &[], RetrievalMode::Lexical, &policy);
        let elsewhere = rank::recall_prepared(
            &mut fresh_reader,
            &statements,
            &KeptReads::default(),
            &config,
            &q,
            None,
            "hash",
        );
        assert!(elsewhere.is_err(), "statements of another connection ran");
    }

    /// Eight first reads of one eligible set at once: one loads the rows
    /// and vectors, the others wait for it and take its kept read (so a
    /// burst of clients holds one copy of the set, not eight), and every
    /// one ranks as a fresh read does.
    #[test]
    fn concurrent_first_reads_of_one_set_load_it_once() {
        use mosaic_pgsearch::rank::{KeptReads, LinesRead};
        use std::sync::Barrier;

        let Some(factory) = PgFactory::from_env() else {
            return;
        };
        let db = factory.fresh().expect("fresh");
        let mut writer = (
            factory.lexical(&db).expect("lexical"),
            factory.vector(&db).expect("vector"),
        );
        let messages = conversation();
        for m in &messages {
            writer.0.publish(m).expect("lexical");
            writer.1.publish(m).expect("vector");
        }
        let embedder = suite_embedder();
        let config = FunnelConfig::default();
        let policy = policy();
        let set = eligible(&messages, &BTreeSet::new(), None);
        let text = "Where did Melanie go hiking?";
        let vector = embedder.embed(text).expect("embed");
        let q = query(text, &set, &[], RetrievalMode::Hybrid, &policy);
        let mut fresh_reader = factory.app(&db).expect("app");
        let fresh = rank::recall_on(
            &mut fresh_reader,
            &config,
            &q,
            Some(&vector),
            embedder.release(),
        )
        .expect("fresh recall");
        let kept = KeptReads::default();
        let readers = 8;
        let barrier = Barrier::new(readers);
        let clients: Vec<_> = (0..readers)
            .map(|_| factory.app(&db).expect("app"))
            .collect();
        let reads: Vec<LinesRead> = std::thread::scope(|scope| {
            let handles: Vec<_> = clients
                .into_iter()
                .map(|mut client| {
                    let (kept, config, q, vector, barrier) =
                        (&kept, &config, &q, &vector, &barrier);
                    let (fresh, release) = (&fresh, embedder.release());
                    scope.spawn(move || {
                        barrier.wait();
                        let (got, read) =
                            rank::recall_kept(&mut client, kept, config, q, Some(vector), release)
                                .expect("kept recall");
                        assert_eq!(got.receipt, fresh.receipt);
                        read
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("reader"))
                .collect()
        });
        let loaded = reads.iter().filter(|r| **r == LinesRead::Fresh).count();
        assert_eq!(loaded, 1, "{reads:?}");
        assert!(
            reads
                .iter()
                .all(|r| matches!(r, LinesRead::Fresh | LinesRead::Kept)),
            "{reads:?}"
        );
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn rows_of_another_analyzer_or_tenant_are_never_ranked() {
        let Some(factory) = PgFactory::from_env() else {
            return;
        };
        let db = factory.fresh().expect("fresh");
        let mut pg_lexical = factory.lexical(&db).expect("lexical");
        let messages = publish_turns_of_a(&mut pg_lexical, |_| true, 30);
        let set = eligible(&messages, &BTreeSet::new(), None);
        let policy = policy();
        let config = FunnelConfig::default();
        let q = query(
            "Where did Melanie go hiking?",
            &set,
            &[],
            RetrievalMode::Lexical,
            &policy,
        );
        let found = rank::recall(&mut pg_lexical, &config, &q, None, "hash").expect("recall");
        assert!(!found.record_ids().is_empty());

        // Another tenant reading the same record ids: the statements' tenant
        // filter and row-level security leave it nothing.
        let mut other = q.clone();
        other.tenant_id = TENANT_B;
        let nothing = rank::recall(&mut pg_lexical, &config, &other, None, "hash").expect("recall");
        assert!(nothing.record_ids().is_empty());

        // A row indexed by another analyzer release: the candidate source
        // refuses to rank (its terms are not comparable).
        let mut admin = factory.admin(&db).expect("admin");
        admin
            .execute(
                "UPDATE pgsearch_lexical SET analyzer = 'analyzer-v0' WHERE record_id = $1",
                &[&messages[3].record_id],
            )
            .expect("update");
        let refused = rank::recall(&mut pg_lexical, &config, &q, None, "hash");
        assert!(
            matches!(&refused, Err(e) if e.to_string().contains("publish the lexical target again")),
            "{refused:?}"
        );
    }
}

/// The write guard's distance query: the live rows of one tenant, subject
/// and kind nearest to a vector, best first; rows of another tenant (the
/// `WHERE` clause and row-level security), another subject, another kind
/// or tombstoned take no part. A prepared vector is stored as given (not
/// the text's embedding); a failed or malformed one stores nothing.
#[test]
fn nearest_in_subject_keeps_to_its_tenant_subject_and_kind() {
    let Some(factory) = PgFactory::from_env() else {
        return;
    };
    let db = factory.fresh().expect("fresh");
    let mut vector = factory.vector(&db).expect("vector");
    let unit = |hot: &[usize]| {
        let mut v = vec![0.0f32; SUITE_DIMENSION];
        for &i in hot {
            v[i] = 1.0 / (hot.len() as f32).sqrt();
        }
        v
    };
    let alice = "principal:alice";
    let semantic = |s: mosaic_index::ScopeKeys| mosaic_index::ScopeKeys {
        kind: MemoryKind::Semantic,
        ..s
    };
    let rows = [
        ("a-same", scope(TENANT_A, alice), unit(&[0])),
        ("a-near", scope(TENANT_A, alice), unit(&[0, 1])),
        ("a-kind", semantic(scope(TENANT_A, alice)), unit(&[0])),
        ("a-subject", scope(TENANT_A, "principal:bob"), unit(&[0])),
        ("b-same", scope(TENANT_B, alice), unit(&[0])),
        ("a-gone", scope(TENANT_A, alice), unit(&[0])),
    ];
    for (id, s, v) in rows {
        vector
            .publish_prepared(&message(id, 1, 0, s, "unrelated words"), Ok(v))
            .expect("publish prepared");
    }
    vector.tombstone("a-gone", 2).expect("tombstone");
    let hits = vector
        .nearest_in_subject(&unit(&[0]), TENANT_A, alice, MemoryKind::Episodic, 8)
        .expect("nearest");
    let ids: Vec<&str> = hits.iter().map(|h| h.record_id.as_str()).collect();
    assert_eq!(ids, ["a-same", "a-near"], "{hits:?}");
    // The stored vector is the one given: cosine 1, then 1/sqrt(2).
    assert_eq!(hits[0].score, 1_000_000, "{hits:?}");
    assert_eq!(hits[1].score, 707_107, "{hits:?}");
    let hits = vector
        .nearest_in_subject(&unit(&[0]), TENANT_B, alice, MemoryKind::Episodic, 8)
        .expect("nearest");
    let ids: Vec<&str> = hits.iter().map(|h| h.record_id.as_str()).collect();
    assert_eq!(ids, ["b-same"]);
    assert!(
        vector
            .nearest_in_subject(&unit(&[0]), TENANT_A, alice, MemoryKind::Episodic, 0)
            .expect("k = 0")
            .is_empty()
    );
    // A query of the wrong dimension is refused before any SQL.
    assert!(
        vector
            .nearest_in_subject(&[1.0], TENANT_A, alice, MemoryKind::Episodic, 8)
            .is_err()
    );
    // A failed embedding or one of the wrong dimension stores nothing.
    let failed = mosaic_index::IndexError::BadEmbedding {
        expected: 1,
        actual: 0,
    };
    for (id, v) in [("a-failed", Err(failed)), ("a-short", Ok(vec![1.0f32]))] {
        assert!(
            vector
                .publish_prepared(&message(id, 1, 0, scope(TENANT_A, alice), "x"), v)
                .is_err()
        );
        assert_eq!(vector.live_generation_of(id).expect("fence"), None, "{id}");
    }
}
