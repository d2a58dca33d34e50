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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use mosaic_harness::memory_scope::{Entries, SealedEntries};
use mosaic_index::ann::dot;
use mosaic_index::embed::check_embedding;
use mosaic_index::funnel::{FunnelConfig, Recall, RecallQuery, feature_release_of, query_digest};
use mosaic_index::fusion::{CandidateSource, fuse, gather};
use mosaic_index::lexical::{LexicalParams, bm25_avgdl, bm25_idf, bm25_scores};
use mosaic_index::text::{ANALYZER_RELEASE, Role};
use mosaic_index::{Hit, IndexError, SearchPlan};
use pgvector::Vector;
use postgres::{Client, IsolationLevel, Transaction};

use crate::PgLexicalIndex;
use crate::error::{PgSearchError, PgSearchResult};
use crate::fence::{changed_since, enter_tenant, read_clock};
use crate::schema;

/// Rows the write guard's and the search targets' callers may fetch beyond
/// a candidate depth by pgvector's distance before scoring them again with
/// the in-memory kernel (the ranked read itself scores every eligible
/// vector).
pub const VECTOR_MARGIN: usize = 32;

/// One eligible lexical row.
#[derive(Clone)]
struct Row {
    record_id: String,
    subject_key: String,
    /// Its subject's place in [`Lines::subjects`].
    subject: usize,
    created_at_ms: i64,
    seq: i64,
    doc_len: u32,
    speaker: Vec<String>,
    role: Option<Role>,
    claim_keys: Vec<String>,
    timed: bool,
    changes: bool,
}

/// The eligible lexical rows of a read, sorted by record id, with each
/// subject's timeline: what a read ranks from, and what [`KeptReads`]
/// keeps.
struct Lines {
    rows: Vec<Row>,
    by_id: HashMap<String, usize>,
    subjects: Vec<String>,
    /// Per row: its place in its subject's eligible timeline.
    place: Vec<usize>,
    /// Per subject: its eligible rows in time order.
    timelines: Vec<Vec<usize>>,
}

impl Lines {
    /// The lines of `rows` (any order, one per record).
    fn of(mut rows: Vec<Row>) -> Lines {
        rows.sort_unstable_by(|a, b| a.record_id.cmp(&b.record_id));
        let mut subject_ids: HashMap<String, usize> = HashMap::new();
        let mut subjects: Vec<String> = Vec::new();
        for row in &mut rows {
            let next = subjects.len();
            let subject = *subject_ids.entry(row.subject_key.clone()).or_insert(next);
            if subject == next {
                subjects.push(row.subject_key.clone());
            }
            row.subject = subject;
        }
        let mut timelines: Vec<Vec<usize>> = vec![Vec::new(); subjects.len()];
        for (i, row) in rows.iter().enumerate() {
            timelines[row.subject].push(i);
        }
        let mut place = vec![0; rows.len()];
        for timeline in &mut timelines {
            timeline.sort_by_key(|&i| (rows[i].created_at_ms, rows[i].seq));
            for (p, &i) in timeline.iter().enumerate() {
                place[i] = p;
            }
        }
        let by_id = rows
            .iter()
            .enumerate()
            .map(|(i, r)| (r.record_id.clone(), i))
            .collect();
        Lines {
            rows,
            by_id,
            subjects,
            place,
            timelines,
        }
    }
}

/// The eligible vector rows of a read: per record, its publication
/// sequence number (`i64::MAX` when published before schema version 2) and
/// its stored vector.
type Vectors = HashMap<String, (i64, Arc<[f32]>)>;

/// What one read of the eligible rows found, at one tenant clock: the
/// lines, the vectors and, once a read asked, the BM25 statistics of the
/// lines' subjects (document count and total length of every live row of
/// those subjects).
#[derive(Clone)]
struct ReadState {
    clock: i64,
    lines: Arc<Lines>,
    vectors: Arc<Vectors>,
    stats: Arc<OnceLock<(u64, u64)>>,
}

impl ReadState {
    /// Roughly the bytes it holds.
    fn weight(&self) -> usize {
        let vector = self
            .vectors
            .values()
            .next()
            .map_or(0, |(_, v)| v.len() * std::mem::size_of::<f32>());
        self.lines.rows.len() * 256 + self.vectors.len() * (vector + 64)
    }
}

/// One kept read.
struct Kept {
    tenant_id: String,
    policy_sha256: String,
    /// The seal number of the eligible entries read.
    seal: u64,
    state: ReadState,
}

/// How many reads a [`KeptReads`] keeps by default.
pub const KEPT_READS: usize = 16;

/// Roughly how many bytes of eligible rows and vectors a [`KeptReads`]
/// keeps in all, by default.
pub const KEPT_BYTES: usize = 256 << 20;

/// The eligible lexical rows of the last reads, per tenant, policy and
/// sealing of the eligible entries (`SealedEntries::seal_number`), each at
/// the tenant clock it was read at (see the module documentation). A read
/// uses a kept one only after checking, in its own transaction, which
/// records changed since; so a kept read is never stale, whichever server
/// wrote. Up to a number of reads and of bytes in all, the least recently
/// used leaving first. Shared by the reads of one process.
pub struct KeptReads {
    kept: Mutex<VecDeque<Kept>>,
    reads: usize,
    bytes: usize,
}

impl std::fmt::Debug for KeptReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptReads")
            .field("reads", &self.reads)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl Default for KeptReads {
    fn default() -> Self {
        KeptReads::new(KEPT_READS, KEPT_BYTES)
    }
}

/// How a read found its lines (for tests and metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinesRead {
    /// Every eligible row read.
    Fresh,
    /// A kept read, unchanged since.
    Kept,
    /// A kept read brought up to date by reading again the rows of this
    /// many records.
    Advanced(usize),
}

impl KeptReads {
    /// Keeps up to `reads` reads and roughly `bytes` of rows in all.
    pub fn new(reads: usize, bytes: usize) -> Self {
        KeptReads {
            kept: Mutex::new(VecDeque::new()),
            reads,
            bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Kept>> {
        // Whole entries pushed and removed: a poisoned lock still guards a
        // consistent list.
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The kept read of these entries at `clock`; else the newest kept
    /// read, at `clock` or before, of these entries or of those they were
    /// derived from, with its seal number.
    fn find(
        &self,
        tenant_id: &str,
        policy_sha256: &str,
        entries: &SealedEntries,
        clock: i64,
    ) -> Option<(u64, ReadState)> {
        let seal = entries.seal_number();
        let parent = entries.derived_from().map(|(parent, _)| parent);
        let mut kept = self.lock();
        let at = kept
            .iter()
            .enumerate()
            .filter(|(_, k)| {
                k.tenant_id == tenant_id
                    && k.policy_sha256 == policy_sha256
                    && k.state.clock <= clock
                    && (k.seal == seal || Some(k.seal) == parent)
            })
            .max_by_key(|(_, k)| (k.seal == seal && k.state.clock == clock, k.state.clock))
            .map(|(i, _)| i)?;
        // Most recently used last.
        let found = kept.remove(at)?;
        let out = (found.seal, found.state.clone());
        kept.push_back(found);
        Some(out)
    }

    /// Keeps `state` as the read of these entries, in place of any older
    /// read of them or of the entries they were derived from.
    fn keep(
        &self,
        tenant_id: &str,
        policy_sha256: &str,
        entries: &SealedEntries,
        state: ReadState,
    ) {
        let seal = entries.seal_number();
        let parent = entries.derived_from().map(|(parent, _)| parent);
        let mut kept = self.lock();
        if kept.iter().any(|k| {
            k.seal == seal
                && k.tenant_id == tenant_id
                && k.policy_sha256 == policy_sha256
                && k.state.clock > state.clock
        }) {
            return;
        }
        kept.retain(|k| {
            !(k.tenant_id == tenant_id
                && k.policy_sha256 == policy_sha256
                && (k.seal == seal || Some(k.seal) == parent))
        });
        if state.weight() > self.bytes || self.reads == 0 {
            return;
        }
        kept.push_back(Kept {
            tenant_id: tenant_id.to_owned(),
            policy_sha256: policy_sha256.to_owned(),
            seal,
            state,
        });
        while kept.len() > self.reads
            || kept.iter().map(|k| k.state.weight()).sum::<usize>() > self.bytes
        {
            kept.pop_front();
        }
    }

    /// Drops every kept read of `tenant_id`. Called when this process
    /// erases one of the tenant's records, so no row or vector of it stays
    /// in memory until the tenant's next read (a kept read would drop it
    /// then, after checking the clock). Returns how many reads it dropped.
    pub fn forget_tenant(&self, tenant_id: &str) -> usize {
        let mut kept = self.lock();
        let before = kept.len();
        kept.retain(|k| k.tenant_id != tenant_id);
        before - kept.len()
    }

    /// How many reads are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One read's candidates over the PostgreSQL targets (see the module
/// documentation). Holds the read's transaction until dropped.
pub struct PgCandidates<'a> {
    tx: Transaction<'a>,
    tenant_id: &'a str,
    policy_sha256: &'a str,
    /// The eligible ids, sorted and distinct, borrowed from the read.
    ids: Vec<&'a str>,
    lines: Arc<Lines>,
    vectors: Arc<Vectors>,
    stats: Arc<OnceLock<(u64, u64)>>,
    how: LinesRead,
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

fn parse_role(name: Option<String>) -> PgSearchResult<Option<Role>> {
    match name.as_deref() {
        None => Ok(None),
        Some("user") => Ok(Some(Role::User)),
        Some("assistant") => Ok(Some(Role::Assistant)),
        Some(other) => Err(PgSearchError::Database(format!(
            "unknown stored speaker role {other:?}"
        ))),
    }
}

/// The columns of a lexical row the ranker reads, for [`load_rows`].
const ROW_COLUMNS: &str = "record_id, subject_key, created_at_ms, seq, doc_len, speaker, \
     speaker_role, claim_keys, analyzer, timed, changes";

/// The lexical rows of `tenant_id` under `policy_sha256` among `ids`.
/// Refuses with [`PgSearchError::Schema`] a row indexed by another analyzer
/// release (or before schema version 2): its terms would not be
/// comparable, so it must be published again.
fn load_rows(
    tx: &mut Transaction<'_>,
    tenant_id: &str,
    policy_sha256: &str,
    ids: &[&str],
) -> PgSearchResult<Vec<Row>> {
    let found = tx.query(
        &format!(
            "SELECT {ROW_COLUMNS} FROM pgsearch_lexical
             WHERE tenant_id = $1 AND policy_sha256 = $2 AND record_id = ANY($3)"
        ),
        &[&tenant_id, &policy_sha256, &ids],
    )?;
    let mut rows = Vec::with_capacity(found.len());
    for r in &found {
        let analyzer: Option<String> = r.try_get(8)?;
        if analyzer.as_deref() != Some(ANALYZER_RELEASE) {
            return Err(PgSearchError::Schema(format!(
                "an eligible record was indexed by analyzer {analyzer:?}, not \
                 {ANALYZER_RELEASE}: publish the lexical target again"
            )));
        }
        let seq: Option<i64> = r.try_get(3)?;
        let doc_len: Option<i32> = r.try_get(4)?;
        let speaker: Option<Vec<String>> = r.try_get(5)?;
        let claim_keys: Option<Vec<String>> = r.try_get(7)?;
        // Published before schema 3: unknown, read as not timed.
        let timed: Option<bool> = r.try_get(9)?;
        // Published before schema 4: read as stating no change.
        let changes: Option<bool> = r.try_get(10)?;
        rows.push(Row {
            record_id: r.try_get(0)?,
            subject_key: r.try_get(1)?,
            subject: 0,
            created_at_ms: r.try_get(2)?,
            seq: seq.unwrap_or(0),
            doc_len: doc_len.and_then(|l| u32::try_from(l).ok()).unwrap_or(0),
            speaker: speaker.unwrap_or_default(),
            role: parse_role(r.try_get(6)?)?,
            claim_keys: claim_keys.unwrap_or_default(),
            timed: timed.unwrap_or(false),
            changes: changes.unwrap_or(false),
        });
    }
    Ok(rows)
}

/// The vector rows of `tenant_id` under `policy_sha256` among `ids`.
fn load_vectors(
    tx: &mut Transaction<'_>,
    tenant_id: &str,
    policy_sha256: &str,
    ids: &[&str],
) -> PgSearchResult<Vectors> {
    let mut out = Vectors::with_capacity(ids.len());
    for r in tx.query(
        "SELECT record_id, seq, embedding FROM pgsearch_vector
         WHERE tenant_id = $1 AND policy_sha256 = $2 AND record_id = ANY($3)",
        &[&tenant_id, &policy_sha256, &ids],
    )? {
        let seq: Option<i64> = r.try_get(1)?;
        let embedding: Vector = r.try_get(2)?;
        out.insert(
            r.try_get(0)?,
            (seq.unwrap_or(i64::MAX), embedding.to_vec().into()),
        );
    }
    Ok(out)
}

/// `base`, the vectors of some eligible entries at an earlier clock,
/// brought to those of `entries` now, where `changed` names every record
/// whose vector row may differ since (see [`advance`]).
fn advance_vectors(
    tx: &mut Transaction<'_>,
    tenant_id: &str,
    policy_sha256: &str,
    base: &Arc<Vectors>,
    entries: Entries<'_>,
    changed: &HashSet<&str>,
) -> PgSearchResult<Option<(Arc<Vectors>, Vec<String>)>> {
    let changed: Vec<&str> = changed
        .iter()
        .copied()
        .filter(|id| base.contains_key(*id) || entries.contains_sorted(id))
        .collect();
    if changed.is_empty() {
        return Ok(Some((base.clone(), Vec::new())));
    }
    if changed.len() > base.len() / 2 + 64 {
        return Ok(None);
    }
    let mut reload: Vec<&str> = changed
        .iter()
        .copied()
        .filter(|id| entries.contains_sorted(id))
        .collect();
    reload.sort_unstable();
    let loaded = load_vectors(tx, tenant_id, policy_sha256, &reload)?;
    let mut vectors: Vectors = (**base).clone();
    for id in &changed {
        vectors.remove(*id);
    }
    vectors.extend(loaded);
    Ok(Some((
        Arc::new(vectors),
        changed.into_iter().map(str::to_owned).collect(),
    )))
}

/// `base`, the lines of some eligible entries at an earlier clock, brought
/// to the lines of `entries` now: `changed` names every record whose row
/// may differ since (the clock's changes, and the records the change from
/// those entries to `entries` named). Only the changed records still
/// eligible are read again. `None` when so many changed that a fresh read
/// costs less.
fn advance(
    tx: &mut Transaction<'_>,
    tenant_id: &str,
    policy_sha256: &str,
    base: &Arc<Lines>,
    entries: Entries<'_>,
    changed: &HashSet<&str>,
) -> PgSearchResult<Option<(Arc<Lines>, Vec<String>)>> {
    let changed: Vec<&str> = changed
        .iter()
        .copied()
        .filter(|id| base.by_id.contains_key(*id) || entries.contains_sorted(id))
        .collect();
    if changed.is_empty() {
        return Ok(Some((base.clone(), Vec::new())));
    }
    if changed.len() > base.rows.len() / 2 + 64 {
        return Ok(None);
    }
    let mut reload: Vec<&str> = changed
        .iter()
        .copied()
        .filter(|id| entries.contains_sorted(id))
        .collect();
    reload.sort_unstable();
    let loaded = load_rows(tx, tenant_id, policy_sha256, &reload)?;
    let gone: HashSet<&str> = changed.iter().copied().collect();
    let mut rows: Vec<Row> = base
        .rows
        .iter()
        .filter(|r| !gone.contains(r.record_id.as_str()))
        .cloned()
        .collect();
    rows.extend(loaded);
    Ok(Some((
        Arc::new(Lines::of(rows)),
        changed.into_iter().map(str::to_owned).collect(),
    )))
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
        Self::open_kept(client, tenant_id, policy_sha256, ids, None)
    }

    /// [`PgCandidates::open`], using and keeping the lines in `kept` for
    /// the sealed `entries` (whose ids are `ids`).
    fn open_kept(
        client: &'a mut Client,
        tenant_id: &'a str,
        policy_sha256: &'a str,
        mut ids: Vec<&'a str>,
        kept: Option<(&KeptReads, &SealedEntries)>,
    ) -> PgSearchResult<Self> {
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        enter_tenant(&mut tx, tenant_id)?;
        // An eligible set comes sorted by id: checked, not sorted again.
        // Entries out of order are never kept nor advanced (a kept read
        // looks its changed records up in them by binary search).
        let mut kept = kept;
        if !ids.windows(2).all(|w| w[0] < w[1]) {
            ids.sort_unstable();
            ids.dedup();
            kept = None;
        }
        let clock = read_clock(&mut tx, tenant_id)?;
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
                let stats = self.tx.query_one(
                    "SELECT count(*)::BIGINT, coalesce(sum(doc_len), 0)::BIGINT
                     FROM pgsearch_lexical WHERE tenant_id = $1 AND subject_key = ANY($2)",
                    &[&self.tenant_id, &lines.subjects],
                )?;
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
        // One read of the rows of the eligible rows' subjects holding a
        // query term (the terms' index): each query term's document
        // frequency among them, and the term frequencies of the eligible
        // ones (every eligible row is of those subjects), so no eligible id
        // is sent.
        let mut df = vec![0u64; query.len()];
        let mut tfs: HashMap<usize, Vec<f32>> = HashMap::new();
        for r in self.tx.query(
            "SELECT record_id, terms, tfs, policy_sha256 = $4 FROM pgsearch_lexical
             WHERE tenant_id = $1 AND subject_key = ANY($2) AND terms && $3",
            &[
                &self.tenant_id,
                &lines.subjects,
                &query,
                &self.policy_sha256,
            ],
        )? {
            let terms: Vec<String> = r.try_get(1)?;
            let counts: Vec<i32> = r.try_get(2)?;
            let mut tf = vec![0.0f32; query.len()];
            for (term, count) in terms.iter().zip(&counts) {
                if let Ok(qi) = query.binary_search(term) {
                    df[qi] += 1;
                    tf[qi] += u32::try_from(*count).unwrap_or(0) as f32;
                }
            }
            let record_id: String = r.try_get(0)?;
            let same_policy: bool = r.try_get(3)?;
            let Some(&row) = lines.by_id.get(&record_id).filter(|_| same_policy) else {
                continue;
            };
            self.matched.insert(row);
            tfs.insert(row, tf);
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
        let dimension = schema::stored_dimension(&mut self.tx)?;
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
    recall_with(client, None, config, query, query_vector, embedder_release)
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
        Some(kept),
        config,
        query,
        query_vector,
        embedder_release,
    )
}

fn recall_with(
    client: &mut Client,
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
        query.tenant_id,
        query.policy_sha256,
        ids,
        kept.map(|k| (k, query.eligible.sealed_entries())),
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

/// Keeps [`role_name`] and [`parse_role`] inverse to each other.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexical::role_name;

    #[test]
    fn stored_role_names_read_back() {
        for role in [Role::User, Role::Assistant] {
            assert_eq!(
                parse_role(Some(role_name(role).to_owned())).ok().flatten(),
                Some(role)
            );
        }
        assert!(parse_role(Some("moderator".into())).is_err());
        assert_eq!(parse_role(None).ok().flatten(), None);
    }
}
