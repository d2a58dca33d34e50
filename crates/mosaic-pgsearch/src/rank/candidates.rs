//! [`PgCandidates`]: one read's candidates, the shared ranker's
//! `CandidateSource` over the PostgreSQL targets.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use mosaic_harness::memory_scope::SealedEntries;
use mosaic_index::ann::dot;
use mosaic_index::embed::check_embedding;
use mosaic_index::fusion::CandidateSource;
use mosaic_index::lexical::{LexicalParams, bm25_avgdl, bm25_idf, bm25_scores};
use mosaic_index::text::Role;
use mosaic_index::{Hit, IndexError, SearchPlan};
use postgres::{Client, IsolationLevel, Transaction};

use crate::error::{PgSearchError, PgSearchResult};
use crate::fence::changed_since;
use crate::schema;

use super::statements::{self, ReadStatements, run};
use super::{
    KeptReads, Lines, LinesRead, ReadState, Row, Vectors, advance, advance_vectors, load_rows,
    load_vectors,
};

/// One read's candidates over the PostgreSQL targets (see the module
/// documentation). Holds the read's transaction until dropped.
pub struct PgCandidates<'a> {
    tx: Transaction<'a>,
    tenant_id: &'a str,
    policy_sha256: &'a str,
    /// The statements prepared on the read's connection, if any.
    statements: Option<&'a ReadStatements>,
    /// The stored vector dimension, read with the clock for a read with
    /// vectors (`None`: not read, or the schema holds none).
    dimension: Option<i64>,
    /// The eligible ids, sorted and distinct, borrowed from the read.
    ids: Vec<&'a str>,
    lines: Arc<Lines>,
    vectors: Arc<Vectors>,
    stats: Arc<OnceLock<(u64, u64)>>,
    pub(super) how: LinesRead,
    /// The rows holding a query term themselves (not only in their turn
    /// window), once the lexical list ran.
    matched: HashSet<usize>,
    /// The stored vectors of the vector list's hits, once it ran (the
    /// records an update pair's similarity is known for).
    hit_vectors: HashMap<String, Arc<[f32]>>,
}

impl std::fmt::Debug for PgCandidates<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgCandidates")
            .field("eligible_rows", &self.lines.rows.len())
            .field("read", &self.how)
            .finish_non_exhaustive()
    }
}

impl<'a> PgCandidates<'a> {
    /// Opens the read and loads the eligible lexical rows among `ids`.
    /// Refuses with [`PgSearchError::Schema`] when an eligible row was
    /// indexed by another analyzer release (or before schema version 2):
    /// its terms would not be comparable, so it must be published again.
    pub(crate) fn open(
        client: &'a mut Client,
        tenant_id: &'a str,
        policy_sha256: &'a str,
        ids: Vec<&'a str>,
    ) -> PgSearchResult<Self> {
        Self::open_kept(client, None, tenant_id, policy_sha256, ids, None, false)
    }

    /// [`PgCandidates::open`], using and keeping the lines in `kept` for
    /// the sealed `entries` (whose ids are `ids`), with the `statements`
    /// prepared on `client` when given; `vectors`: the read will rank
    /// vectors (the stored dimension is read with the clock).
    pub(super) fn open_kept(
        client: &'a mut Client,
        statements: Option<&'a ReadStatements>,
        tenant_id: &'a str,
        policy_sha256: &'a str,
        mut ids: Vec<&'a str>,
        kept: Option<(&KeptReads, &SealedEntries)>,
        vectors: bool,
    ) -> PgSearchResult<Self> {
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        run(
            &mut tx,
            statements.map(|s| &s.enter),
            statements::ENTER,
            &[&tenant_id],
        )?;
        // An eligible set comes sorted by id: checked, not sorted again.
        // Entries out of order are never kept nor advanced (a kept read
        // looks its changed records up in them by binary search).
        let mut kept = kept;
        if !ids.windows(2).all(|w| w[0] < w[1]) {
            ids.sort_unstable();
            ids.dedup();
            kept = None;
        }
        // The tenant's clock (0 before its first change), and the stored
        // dimension for a read with vectors, in one round trip.
        let (clock, dimension) = {
            let (prepared, text) = if vectors {
                (
                    statements.map(|s| &s.clock_dimension),
                    statements::CLOCK_DIMENSION,
                )
            } else {
                (statements.map(|s| &s.clock), statements::CLOCK)
            };
            let rows = run(&mut tx, prepared, text, &[&tenant_id])?;
            let row = rows.first().ok_or_else(|| {
                PgSearchError::Database("the clock query returned no row".to_owned())
            })?;
            (
                row.try_get::<_, Option<i64>>(0)?.unwrap_or(0),
                row.try_get::<_, Option<i64>>(1)?,
            )
        };
        let mut how = LinesRead::Fresh;
        let mut state = None;
        if let Some((kept, entries)) = kept
            && let Some((base_seal, base)) = kept.find(tenant_id, policy_sha256, entries, clock)
        {
            if base_seal == entries.seal_number() && base.clock == clock {
                how = LinesRead::Kept;
                state = Some(base);
            } else {
                // What the change of eligible set named, and what each
                // target changed since the kept clock.
                let named: &[String] = match entries.derived_from() {
                    Some((parent, named))
                        if parent == base_seal && base_seal != entries.seal_number() =>
                    {
                        named
                    }
                    _ => &[],
                };
                let lexical =
                    changed_since(&mut tx, crate::lexical::TARGET, tenant_id, base.clock)?;
                let vector = changed_since(&mut tx, crate::vector::TARGET, tenant_id, base.clock)?;
                let changed_in = |since: &[String]| -> HashSet<String> {
                    since.iter().chain(named).cloned().collect()
                };
                let (lexical, vector) = (changed_in(&lexical), changed_in(&vector));
                let entries_now = entries.entries();
                let lines = advance(
                    &mut tx,
                    tenant_id,
                    policy_sha256,
                    &base.lines,
                    entries_now,
                    &lexical.iter().map(String::as_str).collect(),
                )?;
                let vectors = advance_vectors(
                    &mut tx,
                    tenant_id,
                    policy_sha256,
                    &base.vectors,
                    entries_now,
                    &vector.iter().map(String::as_str).collect(),
                )?;
                if let (Some((lines, lines_again)), Some((vectors, vectors_again))) =
                    (lines, vectors)
                {
                    let read_again: HashSet<String> =
                        lines_again.into_iter().chain(vectors_again).collect();
                    how = LinesRead::Advanced(read_again.len());
                    // The same lines at the same clock keep their
                    // statistics; any change may have moved them.
                    let stats = if base.clock == clock && Arc::ptr_eq(&lines, &base.lines) {
                        base.stats.clone()
                    } else {
                        Arc::new(OnceLock::new())
                    };
                    state = Some(ReadState {
                        clock,
                        lines,
                        vectors,
                        stats,
                    });
                }
            }
        }
        // A first read of these entries waits for another read loading
        // them at the moment; then (or once it is the one to load them, in
        // case a read kept them since it looked) it takes a kept read of
        // this clock if there is one, else it loads them itself, holding
        // `_loading` until it has kept its read.
        let mut _loading = None;
        if state.is_none()
            && let Some((kept, entries)) = kept
        {
            _loading = kept.load_or_wait(tenant_id, policy_sha256, entries);
            if let Some((seal, base)) = kept.find(tenant_id, policy_sha256, entries, clock)
                && seal == entries.seal_number()
                && base.clock == clock
            {
                how = LinesRead::Kept;
                state = Some(base);
            }
        }
        let state = match state {
            Some(state) => state,
            None => ReadState {
                clock,
                lines: Arc::new(Lines::of(load_rows(
                    &mut tx,
                    tenant_id,
                    policy_sha256,
                    &ids,
                )?)),
                vectors: Arc::new(load_vectors(&mut tx, tenant_id, policy_sha256, &ids)?),
                stats: Arc::new(OnceLock::new()),
            },
        };
        if let Some((kept, entries)) = kept
            && how != LinesRead::Kept
        {
            kept.keep(tenant_id, policy_sha256, entries, state.clone());
        }
        Ok(PgCandidates {
            tx,
            tenant_id,
            policy_sha256,
            statements,
            dimension,
            ids,
            lines: state.lines,
            vectors: state.vectors,
            stats: state.stats,
            how,
            matched: HashSet::new(),
            hit_vectors: HashMap::new(),
        })
    }

    /// How this read found its eligible rows.
    pub fn lines_read(&self) -> LinesRead {
        self.how
    }

    /// Number of eligible lexical rows.
    pub fn eligible_rows(&self) -> usize {
        self.lines.rows.len()
    }

    /// Up to `radius` eligible rows on each side of `row` in its subject's
    /// timeline, with their distance (1 = adjacent).
    fn window(&self, row: usize, radius: usize) -> Vec<(usize, usize)> {
        let lines = &self.lines;
        let timeline = &lines.timelines[lines.rows[row].subject];
        let p = lines.place[row];
        let before = timeline[..p].iter().rev().take(radius);
        let after = timeline[p + 1..].iter().take(radius);
        before
            .enumerate()
            .chain(after.enumerate())
            .map(|(i, &x)| (x, i + 1))
            .collect()
    }

    fn bm25(
        &mut self,
        query_terms: &[String],
        depth: usize,
        params: &LexicalParams,
    ) -> PgSearchResult<Vec<Hit>> {
        let mut query: Vec<String> = query_terms.to_vec();
        query.sort();
        query.dedup();
        if self.lines.rows.is_empty() || query.is_empty() || depth == 0 {
            return Ok(Vec::new());
        }
        let lines = self.lines.clone();
        // The statistics are those of this clock's rows: kept with the
        // lines while the tenant's clock stays.
        let (n, total_len) = match self.stats.get() {
            Some(&stats) => stats,
            None => {
                let rows = run(
                    &mut self.tx,
                    self.statements.map(|s| &s.stats),
                    statements::STATS,
                    &[&self.tenant_id, &lines.subjects],
                )?;
                let stats = rows.first().ok_or_else(|| {
                    PgSearchError::Database("the statistics query returned no row".to_owned())
                })?;
                let stats = (
                    u64::try_from(stats.try_get::<_, i64>(0)?).unwrap_or(0),
                    u64::try_from(stats.try_get::<_, i64>(1)?).unwrap_or(0),
                );
                *self.stats.get_or_init(|| stats)
            }
        };
        if n == 0 {
            return Ok(Vec::new());
        }
        // One read of the query terms held by the rows of the eligible
        // rows' subjects (the terms' index, one result row per row and
        // term; a row's terms are distinct): each query term's document
        // frequency among them, and the term frequencies of the eligible
        // ones (every eligible row is of those subjects), so no eligible id
        // is sent.
        let mut df = vec![0u64; query.len()];
        let mut tfs: HashMap<usize, Vec<f32>> = HashMap::new();
        for r in run(
            &mut self.tx,
            self.statements.map(|s| &s.terms),
            statements::TERMS,
            &[
                &self.tenant_id,
                &lines.subjects,
                &query,
                &self.policy_sha256,
            ],
        )? {
            let term: &str = r.try_get(1)?;
            let Ok(qi) = query.binary_search_by(|q| q.as_str().cmp(term)) else {
                continue;
            };
            df[qi] += 1;
            let record_id: &str = r.try_get(0)?;
            let same_policy: bool = r.try_get(3)?;
            let Some(&row) = lines.by_id.get(record_id).filter(|_| same_policy) else {
                continue;
            };
            let count: i32 = r.try_get(2)?;
            self.matched.insert(row);
            tfs.entry(row).or_insert_with(|| vec![0.0f32; query.len()])[qi] +=
                u32::try_from(count).unwrap_or(0) as f32;
        }
        let idfs: Vec<f32> = df.iter().map(|&d| bm25_idf(n, d)).collect();
        let avgdl = bm25_avgdl(n, total_len);
        let mut scored = bm25_scores(
            &tfs,
            &idfs,
            avgdl,
            params,
            |d| lines.rows[d].doc_len as f32,
            |d, radius| self.window(d, radius),
        );
        scored.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| lines.rows[a.0].record_id.cmp(&lines.rows[b.0].record_id))
        });
        scored.truncate(depth);
        Ok(scored
            .into_iter()
            .map(|(d, score)| Hit {
                record_id: lines.rows[d].record_id.clone(),
                score,
            })
            .collect())
    }

    fn nearest(&mut self, query_vector: &[f32], depth: usize) -> PgSearchResult<Vec<Hit>> {
        // Read with the clock, in the same snapshot; else read now.
        let dimension = match self.dimension {
            Some(dimension) => usize::try_from(dimension)
                .map_err(|_| PgSearchError::Schema(format!("stored dimension {dimension}")))?,
            None => schema::stored_dimension(&mut self.tx)?,
        };
        check_embedding(query_vector, dimension)?;
        if depth == 0 || self.ids.is_empty() {
            return Ok(Vec::new());
        }
        // Every eligible vector scored with the in-memory kernel; the best
        // `depth`, equal similarities by publication order (as the
        // in-memory scan keeps them), then by record id.
        let vectors = self.vectors.clone();
        let mut scored: Vec<(f32, i64, &str, &Arc<[f32]>)> = vectors
            .iter()
            .map(|(id, (seq, v))| (dot(query_vector, v), *seq, id.as_str(), v))
            .collect();
        let order = |a: &(f32, i64, &str, &Arc<[f32]>), b: &(f32, i64, &str, &Arc<[f32]>)| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.cmp(&b.1))
                .then_with(|| a.2.cmp(b.2))
        };
        if scored.len() > depth {
            scored.select_nth_unstable_by(depth - 1, order);
            scored.truncate(depth);
        }
        scored.sort_by(order);
        let mut hits = Vec::with_capacity(scored.len());
        for (score, _, id, v) in scored {
            self.hit_vectors.insert(id.to_owned(), v.clone());
            hits.push(Hit {
                record_id: id.to_owned(),
                score,
            });
        }
        // Best first, ties by record id.
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.record_id.cmp(&b.record_id))
        });
        Ok(hits)
    }

    fn row(&self, record_id: &str) -> Option<&Row> {
        self.lines
            .by_id
            .get(record_id)
            .map(|&i| &self.lines.rows[i])
    }
}

impl CandidateSource for PgCandidates<'_> {
    fn lexical_hits(
        &mut self,
        query_terms: &[String],
        depth: usize,
        params: &LexicalParams,
    ) -> Result<Vec<Hit>, IndexError> {
        self.bm25(query_terms, depth, params)
            .map_err(PgSearchError::into_index_error)
    }

    fn vector_hits(
        &mut self,
        query_vector: &[f32],
        depth: usize,
    ) -> Result<(SearchPlan, Vec<Hit>), IndexError> {
        self.nearest(query_vector, depth)
            .map(|hits| (SearchPlan::ExactScan, hits))
            .map_err(PgSearchError::into_index_error)
    }

    fn claim_records(&mut self, claim_key: &str) -> Result<Vec<String>, IndexError> {
        let mut out: Vec<String> = self
            .lines
            .rows
            .iter()
            .filter(|r| r.claim_keys.iter().any(|k| k == claim_key))
            .map(|r| r.record_id.clone())
            .collect();
        out.sort();
        Ok(out)
    }

    fn speaker_named(
        &self,
        record_id: &str,
        query_terms: &[String],
        person: Option<Option<Role>>,
    ) -> bool {
        let Some(row) = self.row(record_id) else {
            return false;
        };
        if let (Some(person), Some(role)) = (person, row.role) {
            return person == Some(role);
        }
        !row.speaker.is_empty() && query_terms.iter().any(|t| row.speaker.contains(t))
    }

    fn created_at(&self, record_id: &str) -> Option<u64> {
        self.row(record_id)
            .and_then(|r| u64::try_from(r.created_at_ms).ok())
    }

    fn speaker_role(&self, record_id: &str) -> Option<Role> {
        self.row(record_id).and_then(|r| r.role)
    }

    fn places_in_time(&self, record_id: &str) -> bool {
        self.row(record_id).is_some_and(|r| r.timed)
    }

    fn holds_query_term(&self, record_id: &str, _query_terms: &[String]) -> bool {
        self.lines
            .by_id
            .get(record_id)
            .is_some_and(|row| self.matched.contains(row))
    }

    fn states_change(&self, record_id: &str) -> bool {
        self.row(record_id)
            .is_some_and(|r| r.changes || !r.claim_keys.is_empty())
    }

    fn recorded_order(&self, record_id: &str) -> Option<(u64, u64)> {
        let r = self.row(record_id)?;
        Some((
            u64::try_from(r.created_at_ms).ok()?,
            u64::try_from(r.seq).ok()?,
        ))
    }

    fn same_speaker(&self, a: &str, b: &str) -> bool {
        let (Some(x), Some(y)) = (self.row(a), self.row(b)) else {
            return false;
        };
        x.subject == y.subject
            && (x.speaker.is_empty()
                || y.speaker.is_empty()
                || (x.speaker == y.speaker && x.role == y.role))
    }

    fn similarity(&self, a: &str, b: &str) -> Option<f32> {
        Some(dot(self.hit_vectors.get(a)?, self.hit_vectors.get(b)?))
    }

    fn neighbours(&self, record_id: &str) -> Vec<String> {
        let lines = &self.lines;
        let Some(&i) = lines.by_id.get(record_id) else {
            return Vec::new();
        };
        let timeline = &lines.timelines[lines.rows[i].subject];
        let p = lines.place[i];
        let before = p.checked_sub(1).map(|q| timeline[q]);
        let after = timeline.get(p + 1).copied();
        [before, after]
            .into_iter()
            .flatten()
            .map(|x| lines.rows[x].record_id.clone())
            .collect()
    }
}
