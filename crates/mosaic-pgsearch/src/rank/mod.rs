//! The shared ranker's candidate source over the PostgreSQL targets.
//!
//! [`PgCandidates`] implements `mosaic_index::fusion::CandidateSource`, so
//! a read over PostgreSQL is ranked by the same fusion as a read over the
//! in-memory targets (`mosaic_index::fusion::fuse`, ranker release
//! `mosaic_index::funnel::RANKER_RELEASE`), from the same inputs:
//!
//! * BM25 over turn windows, computed here by
//!   `mosaic_index::lexical::bm25_scores` from what each lexical row stores
//!   (the analyzer's terms and frequencies, the document length), with the
//!   statistics of the subjects the eligible records belong to: document
//!   count and total length of every live row of those subjects, and each
//!   query term's document frequency among them, as the in-memory index
//!   keeps them per subject partition. Turn windows run over the eligible
//!   records of a subject ordered by creation time, then publication
//!   sequence (the in-memory index orders equal times by publication too).
//! * Vector similarity with the in-memory kernel (`mosaic_index::ann::dot`)
//!   over every eligible stored vector, read with the eligible rows (an
//!   exact scan, never the approximate HNSW index). Equally similar
//!   records are kept in publication order (each vector row has a
//!   publication sequence number), as the in-memory scan keeps them in doc
//!   order. The in-memory index also scans exactly up to
//!   `AnnConfig::exact_limit` eligible records; above that it uses its
//!   graph and the two may differ.
//! * Claim keys, speaker labels and roles, creation times and neighbours
//!   from the eligible lexical rows.
//!
//! Everything is read in one read-only, repeatable-read transaction as the
//! reading tenant (row-level security applies, and every statement also
//! names the tenant and policy), so a read sees one state of both tables.
//! Only live rows exist in the document tables: the generation fence
//! ([`crate::fence`]) deletes a record's row when it applies its tombstone.
//!
//! A reader may keep the eligible rows it read, with their timelines, in a
//! [`KeptReads`] (see [`recall_kept`]): the next read of the same eligible
//! set, or of a set derived from it by a change
//! (`SealedEntries::derived_from`), reads the tenant's clock
//! (`pgsearch_clock`, [`crate::schema`]) in its own transaction and loads
//! again only the records the clock says changed since and those the
//! change named: an unchanged scope is ranked without reading its rows.
//!
//! # Layout
//!
//! `rows` reads the eligible lexical and vector rows, `kept` holds the
//! reads a reader keeps, `candidates` is the candidate source over them,
//! `statements` the read's statements, prepared once per connection
//! ([`ReadStatements`]); this module holds the entry points ([`recall`],
//! [`recall_on`], [`recall_kept`], [`recall_prepared`]).
//!
//! An unchanged read of a kept scope makes five round trips: the
//! transaction's start, entering the tenant, the clock (with the stored
//! vector dimension when the read ranks vectors), the term query, and the
//! end of the transaction.

mod candidates;
mod kept;
mod rows;
mod statements;

use mosaic_index::IndexError;
use mosaic_index::funnel::{
    FunnelConfig, Recall, RecallQuery, RetrievalMode, feature_release_of, query_digest,
};
use mosaic_index::fusion::{fuse, gather};
use postgres::Client;

use crate::PgLexicalIndex;
use crate::error::PgSearchError;

pub use candidates::PgCandidates;
use kept::ReadState;
pub use kept::{KEPT_BYTES, KEPT_IDLE, KEPT_READS, KeptReads, LOAD_WAIT, LinesRead};
use rows::{Lines, Row, Vectors, advance, advance_vectors, load_rows, load_vectors};
pub use statements::{ReadStatements, TERMS as TERM_QUERY};

/// Rows the write guard's and the search targets' callers may fetch beyond
/// a candidate depth by pgvector's distance before scoring them again with
/// the in-memory kernel (the ranked read itself scores every eligible
/// vector).
pub const VECTOR_MARGIN: usize = 32;

/// Ranks `query` over the PostgreSQL targets with the shared ranker on
/// `lexical`'s connection (see [`recall_on`]).
pub fn recall(
    lexical: &mut PgLexicalIndex,
    config: &FunnelConfig,
    query: &RecallQuery<'_>,
    query_vector: Option<&[f32]>,
    embedder_release: &str,
) -> Result<Recall, IndexError> {
    recall_on(
        lexical.client_mut(),
        config,
        query,
        query_vector,
        embedder_release,
    )
}

/// Ranks `query` over the PostgreSQL targets with the shared ranker: the
/// candidates of [`PgCandidates`] (one read-only transaction on `client`,
/// any connection as the application role that sees the current search
/// schema, see [`crate::schema::check_open`]: a pooled one, so that reads
/// share no connection), then `mosaic_index::fusion::fuse` with `config`.
/// `query_vector` is the embedded query (`None` skips vectors);
/// `embedder_release` names the embedder that made it and the stored
/// vectors. The receipt's query digest and feature release are computed as
/// the in-memory retriever computes them, so both paths give the same
/// receipt for the same data.
pub fn recall_on(
    client: &mut Client,
    config: &FunnelConfig,
    query: &RecallQuery<'_>,
    query_vector: Option<&[f32]>,
    embedder_release: &str,
) -> Result<Recall, IndexError> {
    recall_with(
        client,
        None,
        None,
        config,
        query,
        query_vector,
        embedder_release,
    )
    .map(|(recall, _)| recall)
}

/// [`recall_on`], keeping the eligible rows it read in `kept` and using
/// those kept for the same eligible entries, or for the entries they were
/// derived from, after checking in the read's own transaction what changed
/// since (see [`KeptReads`]): the same results and receipt as
/// [`recall_on`]. Also says how the rows were found.
pub fn recall_kept(
    client: &mut Client,
    kept: &KeptReads,
    config: &FunnelConfig,
    query: &RecallQuery<'_>,
    query_vector: Option<&[f32]>,
    embedder_release: &str,
) -> Result<(Recall, LinesRead), IndexError> {
    recall_with(
        client,
        None,
        Some(kept),
        config,
        query,
        query_vector,
        embedder_release,
    )
}

/// [`recall_kept`] with the `statements` prepared on `client` (see
/// [`ReadStatements`]): the same results and receipt, in fewer round trips.
pub fn recall_prepared(
    client: &mut Client,
    statements: &ReadStatements,
    kept: &KeptReads,
    config: &FunnelConfig,
    query: &RecallQuery<'_>,
    query_vector: Option<&[f32]>,
    embedder_release: &str,
) -> Result<(Recall, LinesRead), IndexError> {
    recall_with(
        client,
        Some(statements),
        Some(kept),
        config,
        query,
        query_vector,
        embedder_release,
    )
}

fn recall_with(
    client: &mut Client,
    statements: Option<&ReadStatements>,
    kept: Option<&KeptReads>,
    config: &FunnelConfig,
    query: &RecallQuery<'_>,
    query_vector: Option<&[f32]>,
    embedder_release: &str,
) -> Result<(Recall, LinesRead), IndexError> {
    let feature_release = feature_release_of(embedder_release);
    let query_sha256 = query_digest(query, query.eligible.sha256(), config, &feature_release)?;
    // The ids are borrowed from the sealed set, not copied per read.
    let ids: Vec<&str> = query
        .eligible
        .entries()
        .iter()
        .map(|e| e.record_id)
        .collect();
    let mut source = PgCandidates::open_kept(
        client,
        statements,
        query.tenant_id,
        query.policy_sha256,
        ids,
        kept.map(|k| (k, query.eligible.sealed_entries())),
        // The fusion asks for vector hits only then.
        query_vector.is_some() && query.mode != RetrievalMode::Lexical,
    )
    .map_err(PgSearchError::into_index_error)?;
    let candidates = gather(&mut source, config, query, query_vector)?;
    let recall = fuse(
        config,
        query,
        candidates,
        &source,
        &query_sha256,
        feature_release,
    )?;
    Ok((recall, source.how))
}
