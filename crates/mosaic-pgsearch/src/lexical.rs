//! The lexical target over PostgreSQL full-text search: a `tsvector`
//! (`english` configuration) per live record under a GIN index, ranked by
//! `ts_rank_cd` (cover density, length-normalised) converted to fixed point
//! for [`LexicalSearch`]. Each row also holds the analyzer's terms of the
//! text (`mosaic_index::lexical::analyse`), from which the shared ranker
//! computes BM25 exactly as the in-memory index does (see [`crate::rank`]).
//!
//! A query matches any of its words (an `OR` of the words, built from
//! letters and digits only, so no query text can inject `tsquery` syntax).
//! `ts_rank_cd` uses no corpus statistics, so one tenant's documents never
//! shape another tenant's scores.

use mosaic_index::lexical::analyse;
use mosaic_index::text::{ANALYZER_RELEASE, Role};
use mosaic_index::{Acknowledgement, Eligible, IndexError, IndexTarget, PublishMessage};
use postgres::types::ToSql;
use postgres::{Client, IsolationLevel};

use crate::error::{PgSearchError, PgSearchResult};
use crate::fence::{self, enter_tenant, int};
use crate::schema;
use crate::search::{EligibleParams, LexicalSearch, RankedHit, SearchTarget, sort_ranked};

/// The outbox target name.
pub const TARGET: &str = "lexical";

/// `ts_rank_cd` normalisation: divide by `1 + log(document length)`.
pub const RANK_NORMALIZATION: i32 = 1;

/// The lexical target on one connection (as the application role).
pub struct PgLexicalIndex {
    client: Client,
}

impl std::fmt::Debug for PgLexicalIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLexicalIndex").finish_non_exhaustive()
    }
}

/// The words of `query` joined for `websearch_to_tsquery` as an `OR`:
/// letters and digits only, lower-cased.
pub fn or_query(query: &str) -> String {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| w != "or")
        .collect::<Vec<_>>()
        .join(" or ")
}

impl PgLexicalIndex {
    /// Wraps a connection after checking the search schema version.
    pub fn open(mut client: Client) -> PgSearchResult<Self> {
        schema::check_open(&mut client)?;
        Ok(PgLexicalIndex { client })
    }

    fn publish_inner(&mut self, m: &PublishMessage) -> PgSearchResult<Acknowledgement> {
        let analysed = analyse(&m.text);
        let (terms, tfs): (Vec<String>, Vec<i32>) = analysed
            .terms
            .into_iter()
            .map(|(t, f)| (t, i32::try_from(f).unwrap_or(i32::MAX)))
            .unzip();
        let doc_len = i32::try_from(analysed.len).unwrap_or(i32::MAX);
        let role = analysed.role.map(role_name);
        fence::publish(&mut self.client, TARGET, m, |tx| {
            tx.execute(
                "INSERT INTO pgsearch_lexical (record_id, tenant_id, policy_sha256, subject_key, kind,
                     created_at_ms, generation, document, seq, analyzer, doc_len, terms, tfs,
                     speaker, speaker_role, claim_keys, timed, changes)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, to_tsvector('english', $8),
                     nextval('pgsearch_lexical_seq'), $9, $10, $11, $12, $13, $14, $15, $16, $17)
                 ON CONFLICT (record_id) DO UPDATE SET tenant_id = excluded.tenant_id,
                     policy_sha256 = excluded.policy_sha256, subject_key = excluded.subject_key,
                     kind = excluded.kind, created_at_ms = excluded.created_at_ms,
                     generation = excluded.generation, document = excluded.document,
                     seq = excluded.seq, analyzer = excluded.analyzer,
                     doc_len = excluded.doc_len, terms = excluded.terms, tfs = excluded.tfs,
                     speaker = excluded.speaker, speaker_role = excluded.speaker_role,
                     claim_keys = excluded.claim_keys, timed = excluded.timed,
                     changes = excluded.changes",
                &[
                    &m.record_id,
                    &m.scope.tenant_id,
                    &m.scope.policy_sha256,
                    &m.scope.subject_key,
                    &m.scope.kind.as_str(),
                    &int(m.created_at_unix_ms)?,
                    &int(m.generation)?,
                    &m.text,
                    &ANALYZER_RELEASE,
                    &doc_len,
                    &terms,
                    &tfs,
                    &analysed.speaker,
                    &role,
                    &m.claim_keys,
                    &analysed.timed,
                    &analysed.changes,
                ],
            )?;
            Ok(())
        })
    }

    /// This target's connection (for [`crate::rank::recall`]).
    pub(crate) fn client_mut(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Opens a read of the shared ranker's candidates (see [`crate::rank`])
    /// on this target's connection: one read-only, repeatable-read
    /// transaction as `tenant_id`, over the live records among `ids` under
    /// `policy_sha256`.
    pub fn candidates<'a>(
        &'a mut self,
        tenant_id: &'a str,
        policy_sha256: &'a str,
        ids: Vec<&'a str>,
    ) -> PgSearchResult<crate::rank::PgCandidates<'a>> {
        crate::rank::PgCandidates::open(&mut self.client, tenant_id, policy_sha256, ids)
    }
}

/// The stored name of a speaker role.
pub(crate) fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

impl IndexTarget for PgLexicalIndex {
    fn target_name(&self) -> &str {
        TARGET
    }

    fn publish(&mut self, message: &PublishMessage) -> Result<Acknowledgement, IndexError> {
        self.publish_inner(message)
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
            "pgsearch_lexical",
            record_id,
            generation,
        )
        .map_err(PgSearchError::into_index_error)
    }
}

impl SearchTarget for PgLexicalIndex {
    fn live_generation_of(&mut self, record_id: &str) -> PgSearchResult<Option<u64>> {
        fence::live_generation(&mut self.client, TARGET, record_id)
    }
}

impl LexicalSearch for PgLexicalIndex {
    fn search_text(
        &mut self,
        query: &str,
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
        k: usize,
    ) -> PgSearchResult<Vec<RankedHit>> {
        let words = or_query(query);
        let eligible = EligibleParams::of(eligible);
        if words.is_empty() || k == 0 || eligible.is_empty() {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(k).unwrap_or(i64::MAX);
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        enter_tenant(&mut tx, tenant_id)?;
        let select = "SELECT d.record_id,
                    (ts_rank_cd(d.document, q.query, $5) * 1000000)::bigint AS score
             FROM pgsearch_lexical d, websearch_to_tsquery('english', $1) AS q(query)
             WHERE d.tenant_id = $2 AND d.policy_sha256 = $3 AND d.document @@ q.query";
        let normalization = RANK_NORMALIZATION;
        let rows = match &eligible {
            EligibleParams::Records(ids) => {
                let params: [&(dyn ToSql + Sync); 6] = [
                    &words,
                    &tenant_id,
                    &policy_sha256,
                    ids,
                    &normalization,
                    &limit,
                ];
                tx.query(
                    &format!(
                        "{select} AND d.record_id = ANY($4)
                         ORDER BY score DESC, d.record_id LIMIT $6"
                    ),
                    &params,
                )?
            }
            EligibleParams::Scope(subjects, kinds) => {
                let params: [&(dyn ToSql + Sync); 7] = [
                    &words,
                    &tenant_id,
                    &policy_sha256,
                    subjects,
                    &normalization,
                    &limit,
                    kinds,
                ];
                tx.query(
                    &format!(
                        "{select} AND d.subject_key = ANY($4) AND d.kind = ANY($7)
                         ORDER BY score DESC, d.record_id LIMIT $6"
                    ),
                    &params,
                )?
            }
        };
        tx.commit()?;
        let mut hits = rows
            .iter()
            .map(|r| {
                Ok(RankedHit {
                    record_id: r.try_get(0)?,
                    score: r.try_get(1)?,
                })
            })
            .collect::<Result<Vec<_>, postgres::Error>>()?;
        sort_ranked(&mut hits);
        Ok(hits)
    }
}
