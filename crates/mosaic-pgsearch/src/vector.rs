//! The vector target over pgvector: a `vector(N)` per live record under an
//! HNSW index (`vector_cosine_ops`).
//!
//! A search is one statement whose `WHERE` clause carries the whole scope
//! (tenant, policy, eligible records or subjects and kinds), ordered by
//! cosine distance with a `LIMIT`. With `hnsw.iterative_scan` on, pgvector
//! filters *during* the index scan and keeps scanning until `k` eligible
//! rows are found (or `hnsw.max_scan_tuples` is reached), so a selective
//! scope never degrades into a post-filter of a global top-`k`. The
//! planner may also answer a very selective scope exactly through the scope
//! index; both are correct. `hnsw.ef_search` and the scan mode are set per
//! query (`SET LOCAL`); with relaxed order the rows are re-sorted by exact
//! distance (ties by record id) before they are returned.

use std::sync::Arc;

use mosaic_index::embed::check_embedding;
use mosaic_index::{Acknowledgement, Eligible, Embedder, IndexError, IndexTarget, PublishMessage};
use pgvector::Vector;
use postgres::types::ToSql;
use postgres::{Client, IsolationLevel};

use crate::error::{PgSearchError, PgSearchResult};
use crate::fence::{self, enter_tenant, int};
use crate::schema;
use crate::search::{
    EligibleParams, RankedHit, SearchTarget, VectorSearch, fixed_point, sort_ranked,
};

/// The outbox target name.
pub const TARGET: &str = "vector";

/// How pgvector continues an HNSW scan whose rows the filter removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IterativeScan {
    /// Results may be slightly out of order inside the scan; this target
    /// re-sorts them. Faster.
    RelaxedOrder,
    /// Results come in exact distance order.
    StrictOrder,
}

impl IterativeScan {
    fn as_str(self) -> &'static str {
        match self {
            IterativeScan::RelaxedOrder => "relaxed_order",
            IterativeScan::StrictOrder => "strict_order",
        }
    }
}

/// Per-query search settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorSearchConfig {
    /// `hnsw.ef_search` floor; each query uses `max(ef_search, k)`, capped
    /// at 1000 (pgvector's maximum).
    pub ef_search: u32,
    /// `hnsw.iterative_scan`.
    pub iterative_scan: IterativeScan,
    /// `hnsw.max_scan_tuples`: how many tuples an iterative scan may visit.
    pub max_scan_tuples: u32,
}

impl Default for VectorSearchConfig {
    fn default() -> Self {
        VectorSearchConfig {
            ef_search: 100,
            iterative_scan: IterativeScan::RelaxedOrder,
            max_scan_tuples: 20_000,
        }
    }
}

/// The vector target on one connection (as the application role).
pub struct PgVectorIndex {
    client: Client,
    embedder: Arc<dyn Embedder>,
    dimension: usize,
    config: VectorSearchConfig,
}

impl std::fmt::Debug for PgVectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgVectorIndex")
            .field("embedder", &self.embedder.release())
            .field("dimension", &self.dimension)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PgVectorIndex {
    /// Wraps a connection after checking the search schema version and that
    /// its vectors have the embedder's dimension.
    pub fn open(
        mut client: Client,
        embedder: Arc<dyn Embedder>,
        config: VectorSearchConfig,
    ) -> PgSearchResult<Self> {
        schema::check_open(&mut client)?;
        let dimension = schema::stored_dimension(&mut client)?;
        if dimension != embedder.dimension() {
            return Err(PgSearchError::Schema(format!(
                "the search schema holds {dimension}-dimensional vectors; the embedder makes {}",
                embedder.dimension()
            )));
        }
        Ok(PgVectorIndex {
            client,
            embedder,
            dimension,
            config,
        })
    }

    /// The embedder publications are embedded with.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// `EXPLAIN` lines of the search statement for a scope query (for tests
    /// that the HNSW index serves it), planned as `tenant_id`.
    pub fn explain_scope_search(
        &mut self,
        query: &[f32],
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
    ) -> PgSearchResult<Vec<String>> {
        let rows = self.run_search(query, eligible, tenant_id, policy_sha256, k, true)?;
        rows.iter()
            .map(|r| r.try_get::<_, String>(0).map_err(PgSearchError::from))
            .collect()
    }

    /// The `k` live records of `tenant_id` with `subject_key` and `kind`
    /// nearest to `query` by cosine similarity, best first, ties by record
    /// id, whatever their policy: what the write guard compares a proposal
    /// with (`mosaic_index::VectorIndex::nearest_in_subject` in process).
    /// Run as the tenant (row-level security applies), on this target's
    /// connection (see [`nearest_in_subject_on`] for another one).
    pub fn nearest_in_subject(
        &mut self,
        query: &[f32],
        tenant_id: &str,
        subject_key: &str,
        kind: mosaic_harness::MemoryKind,
        k: usize,
    ) -> PgSearchResult<Vec<RankedHit>> {
        let settings = (self.dimension, self.config);
        nearest_in_subject_on(
            &mut self.client,
            settings,
            query,
            tenant_id,
            (subject_key, kind),
            k,
        )
    }

    /// Publishes `message` with a vector its caller embedded (the write
    /// guard's, say) instead of embedding its text again; `Err` from the
    /// embedding fails the delivery as an embedding failure here would.
    pub fn publish_prepared(
        &mut self,
        message: &PublishMessage,
        embedding: Result<Vec<f32>, IndexError>,
    ) -> Result<Acknowledgement, IndexError> {
        fence::validate(message)?;
        self.publish_embedded(message, embedding?)
            .map_err(PgSearchError::into_index_error)
    }

    fn publish_embedded(
        &mut self,
        m: &PublishMessage,
        embedding: Vec<f32>,
    ) -> PgSearchResult<Acknowledgement> {
        check_embedding(&embedding, self.dimension)?;
        let vector = Vector::from(embedding);
        fence::publish(&mut self.client, TARGET, m, |tx| {
            tx.execute(
                "INSERT INTO pgsearch_vector (record_id, tenant_id, policy_sha256, subject_key, kind,
                     created_at_ms, generation, embedding, seq)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nextval('pgsearch_vector_seq'))
                 ON CONFLICT (record_id) DO UPDATE SET tenant_id = excluded.tenant_id,
                     policy_sha256 = excluded.policy_sha256, subject_key = excluded.subject_key,
                     kind = excluded.kind, created_at_ms = excluded.created_at_ms,
                     generation = excluded.generation, embedding = excluded.embedding,
                     seq = excluded.seq",
                &[
                    &m.record_id,
                    &m.scope.tenant_id,
                    &m.scope.policy_sha256,
                    &m.scope.subject_key,
                    &m.scope.kind.as_str(),
                    &int(m.created_at_unix_ms)?,
                    &int(m.generation)?,
                    &vector,
                ],
            )?;
            Ok(())
        })
    }

    /// A read-only snapshot entered as `tenant_id`, with the HNSW search
    /// settings for `k` results (both searches run in one).
    fn search_tx(
        &mut self,
        tenant_id: &str,
        k: usize,
    ) -> PgSearchResult<postgres::Transaction<'_>> {
        search_tx_on(&mut self.client, &self.config, tenant_id, k)
    }

    fn run_search(
        &mut self,
        query: &[f32],
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
        explain: bool,
    ) -> PgSearchResult<Vec<postgres::Row>> {
        check_embedding(query, self.dimension)?;
        let eligible = EligibleParams::of(eligible);
        if k == 0 || eligible.is_empty() {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(k).unwrap_or(i64::MAX);
        let vector = Vector::from(query.to_vec());
        let mut tx = self.search_tx(tenant_id, k)?;
        let filter = match &eligible {
            EligibleParams::Records(_) => "d.record_id = ANY($4)",
            EligibleParams::Scope(..) => "d.subject_key = ANY($4) AND d.kind = ANY($6)",
        };
        let inner = format!(
            "SELECT d.record_id, d.embedding <=> $1 AS distance FROM pgsearch_vector d
             WHERE d.tenant_id = $2 AND d.policy_sha256 = $3 AND {filter}
             ORDER BY d.embedding <=> $1 LIMIT $5"
        );
        let sql = if explain {
            format!("EXPLAIN {inner}")
        } else {
            format!(
                "WITH hits AS MATERIALIZED ({inner})
                 SELECT record_id, distance FROM hits ORDER BY distance, record_id"
            )
        };
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&vector, &tenant_id, &policy_sha256];
        match &eligible {
            EligibleParams::Records(ids) => params.extend([ids as &(dyn ToSql + Sync), &limit]),
            EligibleParams::Scope(subjects, kinds) => {
                params.extend([subjects as &(dyn ToSql + Sync), &limit, kinds]);
            }
        }
        let rows = tx.query(&sql, &params)?;
        tx.commit()?;
        Ok(rows)
    }
}

impl IndexTarget for PgVectorIndex {
    fn target_name(&self) -> &str {
        TARGET
    }

    fn publish(&mut self, message: &PublishMessage) -> Result<Acknowledgement, IndexError> {
        fence::validate(message)?;
        let embedding = self.embedder.embed(&message.text)?;
        self.publish_embedded(message, embedding)
            .map_err(PgSearchError::into_index_error)
    }

    fn tombstone(
        &mut self,
        record_id: &str,
        generation: u64,
    ) -> Result<Acknowledgement, IndexError> {
        fence::tombstone(
            &mut self.client,
            TARGET,
            "pgsearch_vector",
            record_id,
            generation,
        )
        .map_err(PgSearchError::into_index_error)
    }

    /// Embeds every text in one call, then applies the messages one by one
    /// (each in its own transaction, each fenced).
    fn publish_batch(
        &mut self,
        messages: &[PublishMessage],
    ) -> Vec<Result<Acknowledgement, IndexError>> {
        let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
        match self.embedder.embed_batch(&texts) {
            Ok(vectors) if vectors.len() == messages.len() => messages
                .iter()
                .zip(vectors)
                .map(|(m, v)| {
                    fence::validate(m)?;
                    self.publish_embedded(m, v)
                        .map_err(PgSearchError::into_index_error)
                })
                .collect(),
            Ok(vectors) => messages
                .iter()
                .map(|_| {
                    Err(IndexError::BadEmbedding {
                        expected: messages.len(),
                        actual: vectors.len(),
                    })
                })
                .collect(),
            Err(e) => messages.iter().map(|_| Err(e.clone())).collect(),
        }
    }
}

impl SearchTarget for PgVectorIndex {
    fn live_generation_of(&mut self, record_id: &str) -> PgSearchResult<Option<u64>> {
        fence::live_generation(&mut self.client, TARGET, record_id)
    }
}

impl VectorSearch for PgVectorIndex {
    fn search_embedding(
        &mut self,
        query: &[f32],
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
    ) -> PgSearchResult<Vec<RankedHit>> {
        let rows = self.run_search(query, eligible, tenant_id, policy_sha256, k, false)?;
        ranked_hits(&rows)
    }
}

/// `(record_id, cosine distance)` rows as hits scored by cosine similarity,
/// best first.
/// [`PgVectorIndex::nearest_in_subject`] on any connection as the
/// application role (a pooled read connection, so that write guards share
/// no connection), with the vector target's `(dimension, config)`;
/// `(subject_key, kind)` is the proposal's subject and kind.
pub fn nearest_in_subject_on(
    client: &mut Client,
    (dimension, config): (usize, VectorSearchConfig),
    query: &[f32],
    tenant_id: &str,
    (subject_key, kind): (&str, mosaic_harness::MemoryKind),
    k: usize,
) -> PgSearchResult<Vec<RankedHit>> {
    check_embedding(query, dimension)?;
    if k == 0 {
        return Ok(Vec::new());
    }
    let limit = i64::try_from(k).unwrap_or(i64::MAX);
    let vector = Vector::from(query.to_vec());
    let mut tx = search_tx_on(client, &config, tenant_id, k)?;
    let rows = tx.query(
        "WITH hits AS MATERIALIZED (
             SELECT d.record_id, d.embedding <=> $1 AS distance FROM pgsearch_vector d
             WHERE d.tenant_id = $2 AND d.subject_key = $3 AND d.kind = $4
             ORDER BY d.embedding <=> $1 LIMIT $5)
         SELECT record_id, distance FROM hits ORDER BY distance, record_id",
        &[&vector, &tenant_id, &subject_key, &kind.as_str(), &limit],
    )?;
    tx.commit()?;
    ranked_hits(&rows)
}

/// A read-only snapshot on `client` entered as `tenant_id`, with the HNSW
/// search settings of `config` for `k` results.
fn search_tx_on<'c>(
    client: &'c mut Client,
    config: &VectorSearchConfig,
    tenant_id: &str,
    k: usize,
) -> PgSearchResult<postgres::Transaction<'c>> {
    let ef_search = u32::try_from(k)
        .unwrap_or(u32::MAX)
        .max(config.ef_search)
        .clamp(1, 1000)
        .to_string();
    let max_scan = config.max_scan_tuples.max(1).to_string();
    let iterative_scan = config.iterative_scan.as_str().to_owned();
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    enter_tenant(&mut tx, tenant_id)?;
    tx.execute(
        "SELECT set_config('hnsw.ef_search', $1, true),
                set_config('hnsw.iterative_scan', $2, true),
                set_config('hnsw.max_scan_tuples', $3, true)",
        &[&ef_search, &iterative_scan, &max_scan],
    )?;
    Ok(tx)
}

fn ranked_hits(rows: &[postgres::Row]) -> PgSearchResult<Vec<RankedHit>> {
    let mut hits = rows
        .iter()
        .map(|r| {
            let distance: f64 = r.try_get(1)?;
            Ok(RankedHit {
                record_id: r.try_get(0)?,
                score: fixed_point(1.0 - distance),
            })
        })
        .collect::<Result<Vec<_>, postgres::Error>>()?;
    sort_ranked(&mut hits);
    Ok(hits)
}
