//! The PostgreSQL deployment: opening and migrating the shared database and
//! its index targets.

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
/// store's tables, the search tables for vectors of `embedding_dim`, and
/// the server catalog's `mosaic_server_*` tables; then grants `app_role`
/// (the role `mosaic serve` connects as) what it needs, when given.
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
    crate::catalog::migrate_postgres(&mut owner, app_role)?;
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
            config: funnel_config(),
        })
    }

    /// The relevance receipt of a recall over the PostgreSQL targets, by
    /// the same ranker as an embedded recall (`mosaic_index::fusion`, fed by
    /// `mosaic_pgsearch::rank`'s candidate source): BM25 over turn windows,
    /// vector similarity, claim keys, the speaker prior and recency, inside
    /// the eligible set `set` (the query's). `vector` is the embedded query
    /// (`None` for a lexical query).
    pub(super) fn relevance(
        &mut self,
        query: &RecallQuery<'_>,
        set: &mosaic_harness::memory_scope::SealedEligibleSet,
        vector: Option<&[f32]>,
    ) -> ServiceResult<mosaic_harness::memory_scope::RelevanceReceipt> {
        let query = RecallQuery {
            eligible: set,
            ..query.clone()
        };
        let release = self.vector.embedder().release().to_owned();
        let recall = mosaic_pgsearch::rank::recall(
            &mut self.lexical,
            &self.config,
            &query,
            vector,
            &release,
        )?;
        Ok(recall.receipt)
    }
}
