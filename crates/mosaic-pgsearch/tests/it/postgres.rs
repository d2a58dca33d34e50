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
    LexicalSearch, PgLexicalIndex, PgSearchError, PgSearchResult, PgVectorIndex, VectorSearch,
    VectorSearchConfig,
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
            eprintln!("skipped: PostgreSQL not available (run under scripts/with-postgres.sh)");
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
        let all: i64 = admin
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .and_then(|r| r.try_get(0))
            .expect("admin count");
        assert_eq!(all, 3, "{table} holds both tenants' rows");
        assert_eq!(
            count_as(
                &mut app,
                Some(TENANT_A),
                &format!("SELECT count(*) FROM {table}")
            ),
            2,
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
