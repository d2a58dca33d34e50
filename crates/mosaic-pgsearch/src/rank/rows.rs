//! Reading the eligible rows: the lexical lines and the vectors of a read,
//! loaded fresh or brought forward from an earlier read by its changes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use mosaic_harness::memory_scope::Entries;
use mosaic_index::target::DocId;
use mosaic_index::text::{ANALYZER_RELEASE, Role};
use mosaic_index::{AnnConfig, AnnIndex, DocSet};
use pgvector::Vector;
use postgres::Transaction;

#[cfg(doc)]
use super::KeptReads;
use crate::error::{PgSearchError, PgSearchResult};

/// One eligible lexical row.
#[derive(Clone)]
pub(super) struct Row {
    pub(super) record_id: String,
    pub(super) subject_key: String,
    /// Its subject's place in [`Lines::subjects`].
    pub(super) subject: usize,
    pub(super) created_at_ms: i64,
    pub(super) seq: i64,
    pub(super) doc_len: u32,
    pub(super) speaker: Vec<String>,
    pub(super) role: Option<Role>,
    pub(super) claim_keys: Vec<String>,
    pub(super) timed: bool,
    pub(super) changes: bool,
}

/// The eligible lexical rows of a read, sorted by record id, with each
/// subject's timeline: what a read ranks from, and what [`KeptReads`]
/// keeps.
pub(super) struct Lines {
    pub(super) rows: Vec<Row>,
    pub(super) by_id: HashMap<String, usize>,
    pub(super) subjects: Vec<String>,
    /// Per row: its place in its subject's eligible timeline.
    pub(super) place: Vec<usize>,
    /// Per subject: its eligible rows in time order.
    pub(super) timelines: Vec<Vec<usize>>,
}

impl Lines {
    /// The lines of `rows` (any order, one per record).
    pub(super) fn of(mut rows: Vec<Row>) -> Lines {
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

/// The eligible vector rows of a read, held as the embedded index holds
/// its vectors (`mosaic_index::AnnIndex`: one contiguous f32 array and a
/// byte copy), so that a read scores them with the embedded exact scan
/// ([`AnnIndex::exact`]: the same docs and scores as scoring every one in
/// f32, reading a quarter of the bytes) instead of visiting a separately
/// allocated vector per record. Docs are numbered in the order equally
/// similar records rank in: publication sequence number (`i64::MAX` when
/// published before schema version 2), then record id; the scan's ties go
/// to the lower doc, so they go by that order, as the in-memory scan keeps
/// them in doc order.
pub(super) struct Vectors {
    index: AnnIndex,
    /// Every doc.
    docs: DocSet,
    /// Per doc (a removed one too): its record id and publication
    /// sequence number, in doc order, which is their order.
    records: Vec<(String, i64)>,
    /// The live docs.
    by_id: HashMap<String, DocId>,
}

impl Vectors {
    /// The vectors of `rows` (record id, publication sequence number,
    /// vector; one per record, any order). Refuses vectors of different
    /// dimensions (the stored column holds one).
    fn of(mut rows: Vec<(String, i64, Vector)>) -> PgSearchResult<Vectors> {
        rows.sort_unstable_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        Vectors::build(rows.iter().map(|(id, seq, v)| (id, *seq, v.as_slice())))
    }

    /// The vectors of `rows`, sorted by sequence number then record id.
    fn build<'r>(
        rows: impl ExactSizeIterator<Item = (&'r String, i64, &'r [f32])>,
    ) -> PgSearchResult<Vectors> {
        let mut rows = rows.peekable();
        let dim = rows.peek().map_or(0, |(_, _, v)| v.len());
        let n = rows.len();
        let mut index = AnnIndex::new(dim, AnnConfig::default());
        let mut docs = DocSet::with_capacity(n);
        let mut records = Vec::with_capacity(n);
        let mut by_id = HashMap::with_capacity(n);
        for (doc, (id, seq, vector)) in rows.enumerate() {
            if vector.len() != dim {
                return Err(PgSearchError::Schema(format!(
                    "stored vectors of {dim} and {} dimensions",
                    vector.len()
                )));
            }
            let doc = DocId::try_from(doc)
                .map_err(|_| PgSearchError::Database(format!("{n} vector rows")))?;
            index.insert_pending(doc, vector);
            docs.insert(doc);
            records.push((id.clone(), seq));
            by_id.insert(id.clone(), doc);
        }
        Ok(Vectors {
            index,
            docs,
            records,
            by_id,
        })
    }

    /// These vectors without those of the records `gone`, with `loaded`
    /// (record id, publication sequence number, vector; each id among
    /// `gone` or new). When every loaded row sorts after every doc (by
    /// publication number, then id: a turn published since does), the
    /// index is kept (copied), the gone docs removed and the loaded ones
    /// appended, so only they are quantized; otherwise, or once removed
    /// docs would outnumber the live ones, it is built again.
    fn advanced(
        &self,
        gone: &HashSet<&str>,
        mut loaded: Vec<(String, i64, Vector)>,
    ) -> PgSearchResult<Vectors> {
        loaded.sort_unstable_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let last = self.records.last().map(|(id, seq)| (*seq, id.as_str()));
        let after = match (loaded.first(), last) {
            (None, _) => true,
            (Some((id, seq, _)), Some(last)) => (*seq, id.as_str()) > last,
            (Some(_), None) => false,
        };
        let fits = loaded
            .iter()
            .all(|(_, _, v)| v.as_slice().len() == self.dim());
        let removed = self.records.len() - self.by_id.len() + gone.len();
        if after && fits && removed <= self.by_id.len() {
            let mut next = Vectors {
                index: self.index.clone(),
                docs: self.docs.clone(),
                records: self.records.clone(),
                by_id: self.by_id.clone(),
            };
            let mut dropped = Vec::new();
            for id in gone {
                if let Some(doc) = next.by_id.remove(*id) {
                    next.index.remove(doc);
                    dropped.push(doc);
                }
            }
            next.docs.remove_all(dropped);
            for (id, seq, vector) in loaded {
                let doc = DocId::try_from(next.records.len()).map_err(|_| {
                    PgSearchError::Database(format!("{} vector rows", next.records.len()))
                })?;
                next.index.insert_pending(doc, vector.as_slice());
                next.docs.insert(doc);
                next.by_id.insert(id.clone(), doc);
                next.records.push((id, seq));
            }
            return Ok(next);
        }
        // The live docs that stay and the rows read again, merged in doc
        // order.
        let mut rows: Vec<(&String, i64, &[f32])> = self
            .records
            .iter()
            .enumerate()
            .filter_map(|(doc, (id, seq))| {
                let doc = DocId::try_from(doc).ok()?;
                let live = self.by_id.get(id) == Some(&doc) && !gone.contains(id.as_str());
                Some((id, *seq, self.vector(doc).filter(|_| live)?))
            })
            .chain(loaded.iter().map(|(id, seq, v)| (id, *seq, v.as_slice())))
            .collect();
        rows.sort_unstable_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        Vectors::build(rows.into_iter())
    }

    /// How many records have a vector.
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no record has one.
    pub(super) fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The vectors' dimension (0 when there are none).
    pub(super) fn dim(&self) -> usize {
        self.index.dim()
    }

    /// The stored vector of `doc`.
    pub(super) fn vector(&self, doc: DocId) -> Option<&[f32]> {
        self.index.vector_of(doc)
    }

    /// The record id of `doc`.
    pub(super) fn record_id(&self, doc: DocId) -> &str {
        &self.records[doc as usize].0
    }

    /// The best `k` docs by the in-memory kernel's similarity to `query`
    /// (of the vectors' dimension), best first, equal similarities in doc
    /// order: the embedded exact scan over every doc.
    pub(super) fn nearest(&self, query: &[f32], k: usize) -> Vec<(DocId, f32)> {
        self.index.exact(query, &self.docs, k)
    }
}

pub(super) fn parse_role(name: Option<String>) -> PgSearchResult<Option<Role>> {
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
pub(super) const ROW_COLUMNS: &str = "record_id, subject_key, created_at_ms, seq, doc_len, speaker, \
     speaker_role, claim_keys, analyzer, timed, changes";

/// The lexical rows of `tenant_id` under `policy_sha256` among `ids`.
/// Refuses with [`PgSearchError::Schema`] a row indexed by another analyzer
/// release (or before schema version 2): its terms would not be
/// comparable, so it must be published again.
pub(super) fn load_rows(
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
pub(super) fn load_vectors(
    tx: &mut Transaction<'_>,
    tenant_id: &str,
    policy_sha256: &str,
    ids: &[&str],
) -> PgSearchResult<Vectors> {
    Vectors::of(read_vectors(tx, tenant_id, policy_sha256, ids)?)
}

/// The vector rows of `tenant_id` under `policy_sha256` among `ids`, as
/// read: record id, publication sequence number, vector.
fn read_vectors(
    tx: &mut Transaction<'_>,
    tenant_id: &str,
    policy_sha256: &str,
    ids: &[&str],
) -> PgSearchResult<Vec<(String, i64, Vector)>> {
    let mut out = Vec::with_capacity(ids.len());
    for r in tx.query(
        "SELECT record_id, seq, embedding FROM pgsearch_vector
         WHERE tenant_id = $1 AND policy_sha256 = $2 AND record_id = ANY($3)",
        &[&tenant_id, &policy_sha256, &ids],
    )? {
        let seq: Option<i64> = r.try_get(1)?;
        out.push((r.try_get(0)?, seq.unwrap_or(i64::MAX), r.try_get(2)?));
    }
    Ok(out)
}

/// `base`, the vectors of some eligible entries at an earlier clock,
/// brought to those of `entries` now, where `changed` names every record
/// whose vector row may differ since (see [`advance`]).
pub(super) fn advance_vectors(
    tx: &mut Transaction<'_>,
    tenant_id: &str,
    policy_sha256: &str,
    base: &Arc<Vectors>,
    entries: Entries<'_>,
    changed: &HashSet<&str>,
) -> PgSearchResult<Option<(Arc<Vectors>, Vec<String>)>> {
    let (changed, reload) = match to_read_again(
        changed,
        |id| base.by_id.contains_key(id),
        base.len(),
        entries,
    ) {
        ToReadAgain::Nothing => return Ok(Some((base.clone(), Vec::new()))),
        ToReadAgain::All => return Ok(None),
        ToReadAgain::These { changed, reload } => (changed, reload),
    };
    let loaded = read_vectors(tx, tenant_id, policy_sha256, &reload)?;
    let gone: HashSet<&str> = changed.iter().copied().collect();
    Ok(Some((
        Arc::new(base.advanced(&gone, loaded)?),
        changed.into_iter().map(str::to_owned).collect(),
    )))
}

/// `base`, the lines of some eligible entries at an earlier clock, brought
/// to the lines of `entries` now: `changed` names every record whose row
/// may differ since (the clock's changes, and the records the change from
/// those entries to `entries` named). Only the changed records still
/// eligible are read again. `None` when so many changed that a fresh read
/// costs less.
pub(super) fn advance(
    tx: &mut Transaction<'_>,
    tenant_id: &str,
    policy_sha256: &str,
    base: &Arc<Lines>,
    entries: Entries<'_>,
    changed: &HashSet<&str>,
) -> PgSearchResult<Option<(Arc<Lines>, Vec<String>)>> {
    let (changed, reload) = match to_read_again(
        changed,
        |id| base.by_id.contains_key(id),
        base.rows.len(),
        entries,
    ) {
        ToReadAgain::Nothing => return Ok(Some((base.clone(), Vec::new()))),
        ToReadAgain::All => return Ok(None),
        ToReadAgain::These { changed, reload } => (changed, reload),
    };
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

/// What bringing a kept read up to date must read again.
enum ToReadAgain<'c> {
    /// No changed record is kept or eligible: the kept read stands.
    Nothing,
    /// So many changed that a fresh read costs less.
    All,
    /// `changed`: the changed records kept or eligible (each leaves the
    /// kept read); `reload`: those of them eligible now, sorted (each is
    /// read again).
    These {
        changed: Vec<&'c str>,
        reload: Vec<&'c str>,
    },
}

/// Which of `changed` a kept read of `kept_len` records (`kept` tells
/// whether it holds one) must drop and read again to be the read of
/// `entries`.
fn to_read_again<'c>(
    changed: &HashSet<&'c str>,
    kept: impl Fn(&str) -> bool,
    kept_len: usize,
    entries: Entries<'_>,
) -> ToReadAgain<'c> {
    let changed: Vec<&str> = changed
        .iter()
        .copied()
        .filter(|id| kept(id) || entries.contains_sorted(id))
        .collect();
    if changed.is_empty() {
        return ToReadAgain::Nothing;
    }
    if changed.len() > kept_len / 2 + 64 {
        return ToReadAgain::All;
    }
    let mut reload: Vec<&str> = changed
        .iter()
        .copied()
        .filter(|id| entries.contains_sorted(id))
        .collect();
    reload.sort_unstable();
    ToReadAgain::These { changed, reload }
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

    fn unit(v: Vec<f32>) -> Vec<f32> {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / norm).collect()
    }

    fn rows(items: &[(&str, i64, &[f32])]) -> Vec<(String, i64, Vector)> {
        items
            .iter()
            .map(|(id, seq, v)| ((*id).to_owned(), *seq, Vector::from(v.to_vec())))
            .collect()
    }

    /// What the ranked read answered before its vectors were held as the
    /// embedded index holds them: every vector scored with the kernel, the
    /// best `k` by similarity, then publication order, then record id.
    fn every_vector_scored(
        rows: &[(String, i64, Vector)],
        q: &[f32],
        k: usize,
    ) -> Vec<(String, f32)> {
        let mut scored: Vec<(f32, i64, &str)> = rows
            .iter()
            .map(|(id, seq, v)| (mosaic_index::ann::dot(q, v.as_slice()), *seq, id.as_str()))
            .collect();
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.cmp(&b.1))
                .then_with(|| a.2.cmp(b.2))
        });
        scored.truncate(k);
        scored
            .into_iter()
            .map(|(s, _, id)| (id.to_owned(), s))
            .collect()
    }

    fn nearest(vectors: &Vectors, q: &[f32], k: usize) -> Vec<(String, f32)> {
        vectors
            .nearest(q, k)
            .into_iter()
            .map(|(doc, s)| (vectors.record_id(doc).to_owned(), s))
            .collect()
    }

    #[test]
    fn equally_similar_vectors_rank_in_publication_order_then_by_id() {
        let v = unit(vec![1.0, 2.0, 3.0, 4.0]);
        let w = unit(vec![4.0, -3.0, 2.0, 1.0]);
        let read = rows(&[
            ("d", 3, &v),
            ("c", 1, &v),
            ("b", 2, &v),
            ("a", 2, &v),
            ("e", 0, &w),
        ]);
        let vectors = Vectors::of(read.clone()).expect("vectors");
        let found = nearest(&vectors, &v, 3);
        let ids: Vec<&str> = found.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["c", "a", "b"]);
        assert_eq!(found, every_vector_scored(&read, &v, 3));
    }

    #[test]
    fn the_scan_answers_what_scoring_every_vector_answers() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let dim = 24;
        let random_unit = |next: &mut dyn FnMut() -> u64| {
            unit(
                (0..dim)
                    .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
                    .collect(),
            )
        };
        let mut read = Vec::new();
        for i in 0..600u64 {
            // Some vectors repeated, so some similarities tie; publication
            // numbers repeated and out of id order.
            let v = if i % 7 == 3 {
                read.last()
                    .map(|(_, _, v): &(String, i64, Vector)| v.as_slice().to_vec())
                    .unwrap_or_else(|| random_unit(&mut next))
            } else {
                random_unit(&mut next)
            };
            let seq = i64::try_from(next() % 400).unwrap_or(0);
            read.push((format!("r{:04}", next() % 10_000), seq, Vector::from(v)));
        }
        read.sort_by(|a, b| a.0.cmp(&b.0));
        read.dedup_by(|a, b| a.0 == b.0);
        let vectors = Vectors::of(read.clone()).expect("vectors");
        for round in 0..40 {
            let q = if round % 5 == 0 {
                read[round].2.as_slice().to_vec()
            } else {
                random_unit(&mut next)
            };
            for k in [1, 10, 100, read.len() + 5] {
                assert_eq!(
                    nearest(&vectors, &q, k),
                    every_vector_scored(&read, &q, k),
                    "round {round}, k {k}"
                );
            }
        }
    }

    #[test]
    fn advanced_vectors_answer_what_vectors_read_afresh_answer() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let dim = 16;
        let mut random_unit = || -> Vector {
            Vector::from(unit(
                (0..dim)
                    .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
                    .collect(),
            ))
        };
        let base_rows: Vec<(String, i64, Vector)> = (0..300)
            .map(|i| (format!("r{i:04}"), i64::from(i % 150), random_unit()))
            .collect();
        let base = Vectors::of(base_rows.clone()).expect("vectors");
        let query = random_unit();
        let q = query.as_slice();
        // Each change: the ids that leave, the rows read again (some of
        // them the same ids, published again), and whether they all sort
        // after the kept ones (the index kept and appended to).
        type Change = (Vec<String>, Vec<(String, i64, Vector)>, bool);
        let changes: Vec<Change> = vec![
            (
                vec!["r0007".into(), "r0100".into(), "r0001".into()],
                vec![
                    ("r0100".into(), 500, random_unit()),
                    ("r9000".into(), 501, random_unit()),
                    // The same vector as a kept doc: a tie, broken by
                    // publication order.
                    ("r0001".into(), 502, base_rows[3].2.clone()),
                ],
                true,
            ),
            (
                vec!["r0050".into()],
                vec![("r0050".into(), 3, random_unit())],
                false,
            ),
            (vec!["r0200".into(), "r0201".into()], Vec::new(), true),
        ];
        for (gone, loaded, appended) in changes {
            let gone_set: HashSet<&str> = gone.iter().map(String::as_str).collect();
            let mut expected: Vec<(String, i64, Vector)> = base_rows
                .iter()
                .filter(|(id, _, _)| !gone_set.contains(id.as_str()))
                .cloned()
                .collect();
            expected.retain(|(id, _, _)| !loaded.iter().any(|(l, _, _)| l == id));
            expected.extend(loaded.iter().cloned());
            let advanced = base.advanced(&gone_set, loaded).expect("advanced");
            assert_eq!(advanced.len(), expected.len());
            assert_eq!(
                advanced.records.len() > advanced.len(),
                appended && !gone.is_empty(),
                "kept and appended to: {appended}"
            );
            for k in [1, 5, 40, 400] {
                assert_eq!(
                    nearest(&advanced, q, k),
                    every_vector_scored(&expected, q, k),
                    "gone {gone:?}, k {k}"
                );
            }
            for (id, _, _) in &expected {
                let doc = advanced.by_id[id];
                assert_eq!(advanced.record_id(doc), id);
            }
        }
    }

    #[test]
    fn vectors_of_different_dimensions_are_refused() {
        let read = rows(&[("a", 1, &[1.0, 0.0, 0.0]), ("b", 2, &[0.0, 1.0])]);
        assert!(matches!(Vectors::of(read), Err(PgSearchError::Schema(_))));
    }
}
