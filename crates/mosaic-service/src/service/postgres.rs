//! The PostgreSQL deployment: opening and migrating the shared database and
//! its index targets.

use mosaic_pgsearch::rank::ReadStatements;
use r2d2_postgres::PostgresConnectionManager;

use super::*;

/// Opens the PostgreSQL store as the serving (application) role; the
/// schema must have been migrated by its owner ([`migrate_postgres`]).
pub(super) fn open_postgres(
    url: &str,
    store_config: StoreConfig,
) -> ServiceResult<mosaic_store::PostgresStore> {
    mosaic_store::PostgresStore::connect(url, store_config).map_err(|e| {
        ServiceError::Unavailable(format!(
            "cannot use the PostgreSQL store (migrate it as the schema owner first): {e}"
        ))
    })
}

/// The embedder identity a database records (the first server on it
/// stored it, [`check_shared_embedder`]), read as the serving role before
/// anything is built or migrated: `None` for a database without one (new,
/// or not migrated yet). An earlier release's `mosaic_server_settings` is
/// read when the store's own table is not there yet (its migration takes
/// that table in).
pub(super) fn recorded_embedder(url: &str) -> ServiceResult<Option<EmbedderIdentity>> {
    let unavailable = |e: &dyn std::fmt::Display| {
        ServiceError::Unavailable(format!(
            "cannot read the embedder the PostgreSQL database records: {e}"
        ))
    };
    let mut client =
        ::postgres::Client::connect(url, ::postgres::NoTls).map_err(|e| unavailable(&e))?;
    let tables = client
        .query_one(
            "SELECT to_regclass('server_settings') IS NOT NULL,
                    to_regclass('mosaic_server_settings') IS NOT NULL",
            &[],
        )
        .map_err(|e| unavailable(&e))?;
    let table = match (tables.get::<_, bool>(0), tables.get::<_, bool>(1)) {
        (true, _) => "server_settings",
        (false, true) => "mosaic_server_settings",
        (false, false) => return Ok(None),
    };
    let row = client
        .query_opt(
            &format!("SELECT value FROM {table} WHERE name = 'embedder'"),
            &[],
        )
        .map_err(|e| unavailable(&e))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let value: String = row.get(0);
    serde_json::from_str(&value)
        .map(Some)
        .map_err(|e| ServiceError::Internal(format!("stored embedder identity: {e}")))
}

/// Every server sharing a database must embed into one vector space: the
/// first one records its embedder in the store, the others must match it.
pub(super) fn check_shared_embedder(
    store: &mut dyn Store,
    kind: crate::embedder::EmbedderKind,
    embedder: &dyn Embedder,
) -> ServiceResult<()> {
    let identity = EmbedderIdentity::of(kind, embedder);
    let encoded =
        serde_json::to_string(&identity).map_err(|e| ServiceError::Internal(e.to_string()))?;
    let stored = store.setting_or_insert("embedder", &encoded)?;
    let stored: EmbedderIdentity = serde_json::from_str(&stored)
        .map_err(|e| ServiceError::Internal(format!("stored embedder identity: {e}")))?;
    if stored.same_space(&identity) {
        return Ok(());
    }
    Err(ServiceError::Unavailable(format!(
        "the database's vectors were made by embedder {} ({} dimensions); this server runs {} \
         ({} dimensions): every server sharing a database must run the same embedder",
        stored.release, stored.dimension, identity.release, identity.dimension
    )))
}

/// Brings a PostgreSQL database up to date as the owner of its schema: the
/// store's tables (which take in an earlier release's `mosaic_server_*`
/// tables) and the search tables for vectors of `embedding_dim`; then
/// grants `app_role` (the role `mosaic serve` connects as) what it needs,
/// when given.
pub fn migrate_postgres(
    owner_url: &str,
    app_role: Option<&str>,
    embedding_dim: usize,
) -> ServiceResult<()> {
    let failed = |e: &dyn std::fmt::Display| {
        ServiceError::Unavailable(format!("cannot migrate the PostgreSQL database: {e}"))
    };
    let mut owner =
        ::postgres::Client::connect(owner_url, ::postgres::NoTls).map_err(|e| failed(&e))?;
    mosaic_store::postgres::schema::migrate(&mut owner).map_err(|e| failed(&e))?;
    mosaic_pgsearch::schema::migrate(&mut owner, embedding_dim).map_err(|e| failed(&e))?;
    if let Some(role) = app_role {
        mosaic_store::postgres::schema::grant_application_role(&mut owner, role)
            .map_err(|e| failed(&e))?;
        mosaic_pgsearch::schema::grant_application_role(&mut owner, role)
            .map_err(|e| failed(&e))?;
    }
    Ok(())
}

impl PgTargets {
    pub(super) fn connect(url: &str, embedder: Arc<dyn Embedder>) -> ServiceResult<Self> {
        let unavailable = |e: &dyn std::fmt::Display| {
            ServiceError::Unavailable(format!("cannot use the PostgreSQL indexes: {e}"))
        };
        let client =
            || ::postgres::Client::connect(url, ::postgres::NoTls).map_err(|e| unavailable(&e));
        Ok(PgTargets {
            lexical: PgLexicalIndex::open(client()?).map_err(|e| unavailable(&e))?,
            vector: PgVectorIndex::open(client()?, embedder, VectorSearchConfig::default())
                .map_err(|e| unavailable(&e))?,
        })
    }
}

/// A pooled PostgreSQL read connection; back in the pool when dropped.
type PgConnection = r2d2::PooledConnection<PostgresConnectionManager<::postgres::NoTls>>;

/// The reads of the PostgreSQL targets: ranked recall and the vector write
/// guard's distance query. Each takes a connection of its own from a
/// bounded pool for its one read-only transaction and holds no lock of the
/// service meanwhile, so reads on one server run side by side (the outbox
/// pass writes through the targets' own connections, under the index write
/// lock). r2d2: blocking, like the request handlers and the `postgres`
/// client the search code runs on.
pub(super) struct PgReads {
    pool: r2d2::Pool<PostgresConnectionManager<::postgres::NoTls>>,
    /// How long a read waits for a connection while all are in use.
    wait: std::time::Duration,
    /// The fusion parameters: those of the embedded retriever
    /// ([`funnel_config`]), so both deployments rank alike.
    config: FunnelConfig,
    /// The release of the embedder every server on the database runs.
    release: String,
    /// The vector target's dimension and search settings.
    vector: (usize, VectorSearchConfig),
    /// The eligible rows of the last ranked reads, per eligible set, kept
    /// and checked against the tenant's clock in each read's own
    /// transaction (`mosaic_pgsearch::rank::KeptReads`): a recall over an
    /// unchanged scope reads none of its rows again, one after a write
    /// only the records changed since, whichever server wrote them.
    kept: mosaic_pgsearch::rank::KeptReads,
}

/// Connection failures of the pool, logged without the connection string.
#[derive(Debug)]
struct PoolErrors;

impl r2d2::HandleError<::postgres::Error> for PoolErrors {
    fn handle_error(&self, error: ::postgres::Error) {
        tracing::warn!(error = %error, "a pooled PostgreSQL read connection failed");
    }
}

impl PgReads {
    /// Opens the pool (one connection at once, the rest as reads need
    /// them) and checks the search schema on it.
    pub(super) fn open(
        url: &str,
        config: &ServerConfig,
        embedder: &dyn Embedder,
    ) -> ServiceResult<Self> {
        let unavailable = |e: &dyn std::fmt::Display| {
            ServiceError::Unavailable(format!("cannot read the PostgreSQL indexes: {e}"))
        };
        let parsed: ::postgres::Config = url.parse().map_err(|e| unavailable(&e))?;
        let size = u32::try_from(config.pg_read_connections.max(1)).unwrap_or(256);
        let wait = config.pg_read_wait();
        let pool = r2d2::Pool::builder()
            .max_size(size)
            .min_idle(Some(1))
            .connection_timeout(wait)
            .error_handler(Box::new(PoolErrors))
            .build(PostgresConnectionManager::new(parsed, ::postgres::NoTls))
            .map_err(|e| unavailable(&e))?;
        let reads = PgReads {
            pool,
            wait,
            config: funnel_config(),
            release: embedder.release().to_owned(),
            vector: (embedder.dimension(), VectorSearchConfig::default()),
            kept: mosaic_pgsearch::rank::KeptReads::with_idle(
                mosaic_pgsearch::rank::KEPT_READS,
                mosaic_pgsearch::rank::KEPT_BYTES,
                std::time::Duration::from_millis(config.pg_kept_read_idle_ms),
            ),
        };
        let mut connection = reads.connection()?;
        mosaic_pgsearch::schema::check_open(&mut *connection).map_err(|e| unavailable(&e))?;
        Ok(reads)
    }

    /// A connection of the pool, waiting at most `pg_read_wait_ms` while
    /// all are in use: then 503 `busy` (a connection that cannot be opened
    /// is 503 `unavailable`).
    pub(super) fn connection(&self) -> ServiceResult<PgConnection> {
        self.pool.get_timeout(self.wait).map_err(|e| {
            let state = self.pool.state();
            if state.idle_connections == 0 && state.connections >= self.pool.max_size() {
                ServiceError::Busy(format!(
                    "all {} PostgreSQL read connections stayed in use for {} ms; retry",
                    self.pool.max_size(),
                    self.wait.as_millis()
                ))
            } else {
                ServiceError::Unavailable(format!("cannot read the PostgreSQL indexes: {e}"))
            }
        })
    }

    /// The relevance receipt of a recall over the PostgreSQL targets, by
    /// the same ranker as an embedded recall (`mosaic_index::fusion`, fed by
    /// `mosaic_pgsearch::rank`'s candidate source): BM25 over turn windows,
    /// vector similarity, claim keys, the speaker prior and recency, inside
    /// the eligible set `set` (the query's). `vector` is the embedded query
    /// (`None` for a lexical query). On a pooled connection (`connection`),
    /// with the eligible rows kept from earlier reads when the tenant's
    /// clock says they are still those of this read.
    pub(super) fn relevance(
        &self,
        connection: &mut PgConnection,
        query: &RecallQuery<'_>,
        set: &mosaic_harness::memory_scope::SealedEligibleSet,
        vector: Option<&[f32]>,
    ) -> ServiceResult<mosaic_harness::memory_scope::RelevanceReceipt> {
        let query = RecallQuery {
            eligible: set,
            ..query.clone()
        };
        // The read's statements live with the pooled connection they were
        // prepared on (r2d2's per-connection extensions): each prepared on
        // its first use there, then sent as one round trip. Put back only
        // after a read that succeeded, so after a failed read (a dropped
        // connection, a migrated schema) they are prepared again.
        let statements = r2d2::PooledConnection::extensions_mut(connection)
            .remove::<ReadStatements>()
            .unwrap_or_default();
        let (recall, _) = mosaic_pgsearch::rank::recall_prepared(
            connection,
            &statements,
            &self.kept,
            &self.config,
            &query,
            vector,
            &self.release,
        )?;
        r2d2::PooledConnection::extensions_mut(connection).insert(statements);
        Ok(recall.receipt)
    }

    /// Drops the kept reads unused for longer than `pg_kept_read_idle_ms`.
    pub(super) fn drop_idle(&self) -> usize {
        self.kept.drop_idle()
    }

    /// How many tenants have a kept read, and roughly its bytes.
    pub(super) fn kept_footprint(&self) -> (usize, usize) {
        self.kept.footprint()
    }

    /// Drops the kept reads of `tenant`: this process erased one of its
    /// records, and none of its rows or vectors may stay in memory.
    pub(super) fn forget_tenant(&self, tenant: &str) {
        self.kept.forget_tenant(tenant);
    }

    /// The `k` indexed records of `tenant` with this subject and kind
    /// nearest to `vector` (the vector write guard's distance query), on a
    /// pooled connection.
    pub(super) fn nearest_in_subject(
        &self,
        connection: &mut PgConnection,
        vector: &[f32],
        tenant: &str,
        subject: (&str, MemoryKind),
        k: usize,
    ) -> ServiceResult<Vec<mosaic_pgsearch::RankedHit>> {
        mosaic_pgsearch::vector::nearest_in_subject_on(
            connection,
            self.vector,
            vector,
            tenant,
            subject,
            k,
        )
        .map_err(|e| ServiceError::Unavailable(format!("PostgreSQL vector index: {e}")))
    }
}
