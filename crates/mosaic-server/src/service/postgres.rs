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
/// first one records its embedder in the catalog, the others must match it.
pub(super) fn check_shared_embedder(
    catalog: &Catalog,
    kind: crate::embedder::EmbedderKind,
    embedder: &dyn Embedder,
) -> ServiceResult<()> {
    let identity = EmbedderIdentity::of(kind, embedder);
    let encoded =
        serde_json::to_string(&identity).map_err(|e| ServiceError::Internal(e.to_string()))?;
    let stored = catalog.setting_or_insert("embedder", &encoded)?;
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
        })
    }

    /// The relevance receipt of a recall over the PostgreSQL targets:
    /// full-text and nearest-neighbour candidates inside the eligible set,
    /// fused by reciprocal rank in fixed point (ties by record id), ranked
    /// by the harness's `rank_relevance`.
    /// Ranks `set` for `query`; `vector` is the embedded query (`None`
    /// for a lexical query).
    pub(super) fn relevance(
        &mut self,
        query: &RecallQuery<'_>,
        set: &EligibleSet,
        vector: Option<&[f32]>,
    ) -> ServiceResult<mosaic_harness::memory_scope::RelevanceReceipt> {
        let search = |e: mosaic_pgsearch::PgSearchError| {
            ServiceError::Internal(format!("PostgreSQL search: {e}"))
        };
        let ids: Vec<String> = set.entries.iter().map(|e| e.record_id.clone()).collect();
        let eligible = mosaic_index::Eligible::Records(&ids);
        let k = query.max_results.saturating_mul(4).max(20);
        let mut lists = Vec::new();
        if query.mode != RetrievalMode::Vector {
            lists.push(
                self.lexical
                    .search_text(
                        query.text,
                        &eligible,
                        query.tenant_id,
                        query.policy_sha256,
                        k,
                    )
                    .map_err(search)?,
            );
        }
        if let Some(vector) = vector.filter(|_| query.mode != RetrievalMode::Lexical) {
            lists.push(
                self.vector
                    .search_embedding(vector, &eligible, query.tenant_id, query.policy_sha256, k)
                    .map_err(search)?,
            );
        }
        let mut fused: BTreeMap<String, u64> = BTreeMap::new();
        for list in &lists {
            for (rank, hit) in list.iter().enumerate() {
                let rank = u64::try_from(rank).unwrap_or(u64::MAX);
                *fused.entry(hit.record_id.clone()).or_default() +=
                    1_000_000 / (RRF_K.saturating_add(rank).saturating_add(1));
            }
        }
        let feature_release = format!("pg-fts-english+{}", self.vector.embedder().release());
        let query_sha256 = domain_digest(
            PG_QUERY_DOMAIN,
            &serde_json::json!({
                "text": query.text,
                "mode": query.mode,
                "max_results": query.max_results,
                "eligible_set_sha256": set.digest()?,
                "feature_release": feature_release,
            }),
        )?;
        let input = RelevanceInput {
            query_sha256,
            eligible: set.clone(),
            feature_release,
            ranker_release: PG_RANKER_RELEASE.to_owned(),
            scores: fused
                .into_iter()
                .map(|(record_id, score)| ScoredCandidate { record_id, score })
                .collect(),
            max_results: query.max_results,
        };
        rank_relevance(&input).map_err(|e| ServiceError::Internal(format!("relevance: {e}")))
    }
}
