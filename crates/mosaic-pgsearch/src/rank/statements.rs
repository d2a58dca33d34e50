//! The ranked read's statements ([`ReadStatements`]), prepared once per
//! connection, and the text each runs when a read has none prepared.

use postgres::types::ToSql;
use std::sync::OnceLock;

use postgres::{Statement, Transaction};

use crate::error::PgSearchResult;

/// Enters the tenant for the transaction (row-level security).
pub(super) const ENTER: &str = "SELECT set_config('mosaic.tenant_id', $1, true)";

/// The tenant's clock (NULL before its first change), for a read without
/// vectors (it does not touch the schema's meta table).
pub(super) const CLOCK: &str =
    "SELECT (SELECT clock FROM pgsearch_clock WHERE tenant_id = $1), NULL::BIGINT";

/// The tenant's clock and the stored vector dimension, in one round trip,
/// for a read with vectors.
pub(super) const CLOCK_DIMENSION: &str =
    "SELECT (SELECT clock FROM pgsearch_clock WHERE tenant_id = $1),
            (SELECT int_value FROM pgsearch_meta WHERE key = 'vector_dimension')";

/// Document count and total length of every live row of the subjects.
pub(super) const STATS: &str = "SELECT count(*)::BIGINT, coalesce(sum(doc_len), 0)::BIGINT
     FROM pgsearch_lexical WHERE tenant_id = $1 AND subject_key = ANY($2)";

/// Each query term (`$3`) held by a row of the subjects: the row, the
/// term, its frequency there, and whether the row is of the read's policy;
/// by term equality in `pgsearch_terms`' index (an equality PostgreSQL may
/// test in the index before the tenant policy).
pub const TERMS: &str = "SELECT record_id, term, tf, policy_sha256 = $4 FROM pgsearch_terms
     WHERE tenant_id = $1 AND subject_key = ANY($2) AND term = ANY($3)";

/// The statements of an unchanged ranked read (entering the tenant, the
/// clock, with the stored dimension for a read with vectors, the BM25
/// statistics, the term query), each prepared on its first use by a read
/// on one connection: a read that uses them sends each as one round trip
/// instead of a parse and an execution. (Prepared when first used, not
/// all at once: preparing touches the tables a statement names, and a
/// lexical read must not wait on the vector dimension's table.) They
/// belong to the connection they were prepared on (keep them with it,
/// e.g. in the pool's per-connection extensions); on another connection
/// the database refuses them (a failed read, never another connection's
/// results).
#[derive(Debug, Default)]
pub struct ReadStatements {
    pub(super) enter: OnceLock<Statement>,
    pub(super) clock: OnceLock<Statement>,
    pub(super) clock_dimension: OnceLock<Statement>,
    pub(super) stats: OnceLock<Statement>,
    pub(super) terms: OnceLock<Statement>,
}

impl ReadStatements {
    /// None prepared yet.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Runs `text` as the statement kept in `prepared`, prepared in `tx` on
/// its first use; without a place to keep it, runs the text.
pub(super) fn run(
    tx: &mut Transaction<'_>,
    prepared: Option<&OnceLock<Statement>>,
    text: &str,
    params: &[&(dyn ToSql + Sync)],
) -> PgSearchResult<Vec<postgres::Row>> {
    let Some(cell) = prepared else {
        return Ok(tx.query(text, params)?);
    };
    let statement = match cell.get() {
        Some(statement) => statement.clone(),
        None => {
            let statement = tx.prepare(text)?;
            cell.get_or_init(|| statement).clone()
        }
    };
    Ok(tx.query(&statement, params)?)
}
