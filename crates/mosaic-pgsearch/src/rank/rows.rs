//! Reading the eligible rows: the lexical lines and the vectors of a read,
//! loaded fresh or brought forward from an earlier read by its changes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use mosaic_harness::memory_scope::Entries;
use mosaic_index::text::{ANALYZER_RELEASE, Role};
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

/// The eligible vector rows of a read: per record, its publication
/// sequence number (`i64::MAX` when published before schema version 2) and
/// its stored vector.
pub(super) type Vectors = HashMap<String, (i64, Arc<[f32]>)>;

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
pub(super) fn advance_vectors(
    tx: &mut Transaction<'_>,
    tenant_id: &str,
    policy_sha256: &str,
    base: &Arc<Vectors>,
    entries: Entries<'_>,
    changed: &HashSet<&str>,
) -> PgSearchResult<Option<(Arc<Vectors>, Vec<String>)>> {
    let (changed, reload) =
        match to_read_again(changed, |id| base.contains_key(id), base.len(), entries) {
            ToReadAgain::Nothing => return Ok(Some((base.clone(), Vec::new()))),
            ToReadAgain::All => return Ok(None),
            ToReadAgain::These { changed, reload } => (changed, reload),
        };
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
}
