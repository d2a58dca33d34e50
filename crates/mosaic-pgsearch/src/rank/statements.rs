//! The ranked read's statements ([`ReadStatements`]), prepared once per
//! connection, and the text each runs when a read has none prepared.

use postgres::types::ToSql;
use postgres::{Client, Statement, Transaction};

use crate::error::PgSearchResult;

/// Enters the tenant for the transaction (row-level security).
pub(super) const ENTER: &str = "SELECT set_config('mosaic.tenant_id', $1, true)";

/// The tenant's clock (NULL before its first change) and the stored
/// vector dimension, in one round trip.
pub(super) const CLOCK: &str = "SELECT (SELECT clock FROM pgsearch_clock WHERE tenant_id = $1),
            (SELECT int_value FROM pgsearch_meta WHERE key = 'vector_dimension')";

/// Document count and total length of every live row of the subjects.
pub(super) const STATS: &str = "SELECT count(*)::BIGINT, coalesce(sum(doc_len), 0)::BIGINT
     FROM pgsearch_lexical WHERE tenant_id = $1 AND subject_key = ANY($2)";

/// The rows of the subjects holding a query term.
pub(super) const TERMS: &str =
    "SELECT record_id, terms, tfs, policy_sha256 = $4 FROM pgsearch_lexical
     WHERE tenant_id = $1 AND subject_key = ANY($2) AND terms && $3";

/// The statements of an unchanged ranked read (entering the tenant, the
/// clock with the stored dimension, the BM25 statistics, the term query),
/// prepared on one connection: a read that uses them sends each as one
/// round trip instead of a parse and an execution. They belong to the
/// connection they were prepared on (keep them with it, e.g. in the
/// pool's per-connection extensions); on another connection the database
/// refuses them (a failed read, never another connection's results).
#[derive(Debug)]
pub struct ReadStatements {
    pub(super) enter: Statement,
    pub(super) clock: Statement,
    pub(super) stats: Statement,
    pub(super) terms: Statement,
}

impl ReadStatements {
    /// Prepares the statements on `client` (one round trip each), a
    /// connection as the application role that sees the current search
    /// schema.
    pub fn prepare(client: &mut Client) -> Result<Self, mosaic_index::IndexError> {
        let mut prepare = |sql: &str| {
            client
                .prepare(sql)
                .map_err(|e| crate::error::PgSearchError::from(e).into_index_error())
        };
        Ok(ReadStatements {
            enter: prepare(ENTER)?,
            clock: prepare(CLOCK)?,
            stats: prepare(STATS)?,
            terms: prepare(TERMS)?,
        })
    }
}

/// Runs the prepared statement when there is one, else its text.
pub(super) fn run(
    tx: &mut Transaction<'_>,
    prepared: Option<&Statement>,
    text: &str,
    params: &[&(dyn ToSql + Sync)],
) -> PgSearchResult<Vec<postgres::Row>> {
    Ok(match prepared {
        Some(statement) => tx.query(statement, params)?,
        None => tx.query(text, params)?,
    })
}
