//! The read path: records by id, the indexed eligibility read (its
//! statements are the backend's), governance state in force, the paged
//! record catalog, and the cross-table integrity check.

use std::collections::BTreeSet;

use mosaic_harness::memory_write::{MemoryWriteGrant, MemoryWritePolicy, StructuredClaim};
use mosaic_harness::{MemoryAddress, MemoryKind, MemoryRecord, MemoryStatus, MemorySubject};

use super::{
    Arg, SqlRow, Tx, decode, i, params, parse_stage, parse_state, revocation_generation,
    subject_columns, u, vals, verify_audit_chain,
};
use crate::error::{StoreError, StoreResult};
use crate::types::{
    ChangeStamp, EligibilityQuery, EligibleChanges, EligibleIds, EligibleSet, IntegrityReport,
    ListedRecord, ListedState, RecordFilter, RecordPage, RecordState, SnapshotIdentity,
    StoredConsent, StoredRecord, body_matches_query,
};

/// The columns [`record_from_row`] reads, of `records r`.
pub(crate) const RECORD_COLUMNS: &str = "r.record_id, r.state, r.superseded_by, r.line_id, r.line_generation, r.proposal_id,
     r.record_json, r.content, (SELECT revoked_at_ms FROM revocations v WHERE v.record_id = r.record_id)";

type RecordRow = (
    String,
    String,
    Option<String>,
    String,
    i64,
    String,
    String,
    String,
    Option<i64>,
);

/// One `RECORD_COLUMNS` row.
pub(crate) fn record_from_row(r: &dyn SqlRow) -> StoreResult<RecordRow> {
    r.cols()
}

fn record_decode(row: RecordRow) -> StoreResult<StoredRecord> {
    let (
        record_id,
        state,
        superseded_by,
        line_id,
        line_generation,
        proposal_id,
        json,
        content,
        revoked_at,
    ) = row;
    let mut record: MemoryRecord = decode(&json)?;
    if record.record_id != record_id {
        return Err(StoreError::Corrupt(format!(
            "record {record_id} body names {}",
            record.record_id
        )));
    }
    let state = parse_state(&state)?;
    record.status = status_of(state, superseded_by, revoked_at)?;
    Ok(StoredRecord {
        record,
        content,
        state,
        line_id,
        line_generation: u(line_generation)?,
        proposal_id,
    })
}

/// A record's status as read, from its state, its replacement and its
/// revocation instant (a stored body keeps the status it was written with).
pub(crate) fn status_of(
    state: RecordState,
    superseded_by: Option<String>,
    revoked_at: Option<i64>,
) -> StoreResult<MemoryStatus> {
    Ok(match state {
        RecordState::Publishing | RecordState::Active => MemoryStatus::Verified,
        RecordState::Contested | RecordState::Quarantined => MemoryStatus::Contested,
        RecordState::Superseded => MemoryStatus::Superseded {
            replacement_id: superseded_by.unwrap_or_default(),
        },
        RecordState::Revoked => MemoryStatus::Revoked {
            revoked_at_unix_ms: revoked_at.map(u).transpose()?.unwrap_or(0),
        },
    })
}

/// The statements (with `?N` placeholders) and parameters of one
/// eligibility read: one indexed equality lookup per subject shape the
/// reader may see. The tenant predicate stays although PostgreSQL's
/// row-level security implies it: it is the index prefix.
pub(crate) fn eligibility_statements<C: Tx>(
    q: &EligibilityQuery,
    columns: &str,
) -> StoreResult<Vec<(String, Vec<Arg>)>> {
    scope_statements::<C>(q, columns, ELIGIBLE_AT, None)
}

/// The time predicate of [`eligibility_statements`] (`?5` is the query's
/// instant).
const ELIGIBLE_AT: &str =
    "r.created_at_ms <= ?5 AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?5)";

/// The time predicate of the records of the scope that come of age after
/// the query's instant (what `stable_until` reads of them).
const OF_AGE_LATER: &str = "r.created_at_ms > ?5";

/// The statements of [`eligibility_statements`] with another time
/// predicate (`?5` is the query's instant) and, given `ids`, restricted to
/// the records among them (read by primary key: the cost is in the ids,
/// not in the scope).
fn scope_statements<C: Tx>(
    q: &EligibilityQuery,
    columns: &str,
    time_predicate: &str,
    ids: Option<&[String]>,
) -> StoreResult<Vec<(String, Vec<Arg>)>> {
    let mut kinds: Vec<String> = q.kinds.iter().map(|k| k.as_str().to_owned()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let now = i(q.now_unix_ms)?;
    let subjects: [(&str, &str, Option<&str>); 5] = [
        ("run", &q.run_id, None),
        ("principal", &q.principal_id, None),
        (
            "principal_in_workspace",
            &q.workspace_id,
            Some(&q.principal_id),
        ),
        ("workspace", &q.workspace_id, None),
        ("procedure", &q.workspace_id, None),
    ];
    // `?1` the tenant, `?2` the policy, `?5` the instant; each subject
    // shape's type and subject at `?3`, `?4` (and `?6` its second subject)
    // in a statement of its own, or, restricted to `ids`, all shapes in one
    // statement (one lookup of each id, whichever shape it has), the first
    // at `?3`, `?4` and the others' after the instant.
    let mut out: Vec<(String, Vec<Arg>)> = Vec::new();
    let mut shapes: Vec<String> = Vec::new();
    let mut args: Vec<Arg> = Vec::new();
    for (subject_type, a, b) in subjects {
        if ids.is_none() || args.is_empty() {
            args = vec![
                Arg::Text(q.tenant_id.clone()),
                Arg::Text(q.policy_sha256.clone()),
                Arg::Text(subject_type.to_owned()),
                Arg::Text(a.to_owned()),
                Arg::Int(now),
            ];
            shapes.push("r.subject_type = ?3 AND r.subject_a = ?4".to_owned());
        } else {
            args.push(Arg::Text(subject_type.to_owned()));
            args.push(Arg::Text(a.to_owned()));
            shapes.push(format!(
                "r.subject_type = ?{} AND r.subject_a = ?{}",
                args.len() - 1,
                args.len()
            ));
        }
        if let Some(b) = b {
            args.push(Arg::Text(b.to_owned()));
            if let Some(shape) = shapes.last_mut() {
                shape.push_str(&format!(" AND r.subject_b = ?{}", args.len()));
            }
        }
        if ids.is_none() {
            let shape = shapes.pop().unwrap_or_default();
            out.push(shape_statement::<C>(
                columns,
                time_predicate,
                &shape,
                std::mem::take(&mut args),
                &kinds,
                None,
            ));
        }
    }
    if let Some(ids) = ids {
        let shape = shapes
            .iter()
            .map(|s| format!("({s})"))
            .collect::<Vec<_>>()
            .join(" OR ");
        out.push(shape_statement::<C>(
            columns,
            time_predicate,
            &format!("({shape})"),
            args,
            &kinds,
            Some(ids),
        ));
    }
    Ok(out)
}

/// One statement of [`scope_statements`]: `args` bind `?1` (tenant), `?2`
/// (policy), `?5` (instant) and the placeholders of `subject`; the kinds
/// and, given them, the ids are bound after them.
fn shape_statement<C: Tx>(
    columns: &str,
    time_predicate: &str,
    subject: &str,
    mut args: Vec<Arg>,
    kinds: &[String],
    ids: Option<&[String]>,
) -> (String, Vec<Arg>) {
    let mut predicates = format!(
        "r.tenant_id = ?1 AND r.policy_sha256 = ?2 AND r.state = 'active'
           AND {subject}
           AND {time_predicate}"
    );
    let (clause, kind_args) = C::in_list("r.kind", args.len() + 1, kinds.to_vec());
    predicates.push_str(&format!(" AND {clause}"));
    args.extend(kind_args);
    let from = match ids {
        None => "records r".to_owned(),
        Some(ids) => {
            args.push(Arg::TextSet(ids.to_vec()));
            C::joined_to_set("records r", "r.record_id", &format!("?{}", args.len()))
        }
    };
    (
        format!("SELECT {columns} FROM {from} WHERE {predicates}"),
        args,
    )
}

pub(crate) fn eligible_records<C: Tx>(c: &C, q: &EligibilityQuery) -> StoreResult<EligibleSet> {
    let generation = revocation_generation(c)?;
    let mut records = Vec::new();
    for (sql, args) in eligibility_statements::<C>(q, RECORD_COLUMNS)? {
        let rows = c.rows(&sql, &vals(&args), record_from_row)?;
        for row in rows {
            let stored = record_decode(row)?;
            // Defense in depth: the body must agree with the indexed columns.
            if !body_matches_query(&stored.record, q) {
                return Err(StoreError::Corrupt(format!(
                    "record {} body disagrees with its indexed columns",
                    stored.record.record_id
                )));
            }
            records.push(stored);
        }
    }
    records.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
    let snapshot = SnapshotIdentity::compute(q, generation, &records)?;
    Ok(EligibleSet { records, snapshot })
}

/// The columns of [`eligible_ids`] (the read recall runs).
pub(crate) const ELIGIBLE_ID_COLUMNS: &str = "r.record_id, r.line_generation, r.expires_at_ms";

/// The store's [`ChangeStamp`].
pub(crate) fn change_stamp<C: Tx>(c: &C) -> StoreResult<ChangeStamp> {
    let (audit_seq, generation) = c
        .row(
            "SELECT (SELECT int_value FROM meta WHERE key = 'audit_head_seq'),
                    (SELECT int_value FROM meta WHERE key = 'revocation_generation')",
            params![],
            |r| r.cols::<(Option<i64>, Option<i64>)>(),
        )?
        .ok_or_else(|| StoreError::Corrupt("meta is empty".into()))?;
    match (audit_seq, generation) {
        (Some(audit_seq), Some(generation)) => Ok(ChangeStamp {
            audit_seq: u(audit_seq)?,
            revocation_generation: u(generation)?,
        }),
        _ => Err(StoreError::Corrupt(
            "meta.audit_head_seq or meta.revocation_generation missing".into(),
        )),
    }
}

/// The latest creation instant any stored record was given (0 before the
/// first).
pub(crate) fn latest_created_at<C: Tx>(c: &C) -> StoreResult<u64> {
    let v: Option<i64> = c
        .row(
            "SELECT int_value FROM meta WHERE key = 'latest_created_at'",
            params![],
            |r| r.get(0),
        )?
        .ok_or_else(|| StoreError::Corrupt("meta.latest_created_at missing".into()))?;
    u(v.ok_or_else(|| StoreError::Corrupt("meta.latest_created_at is null".into()))?)
}

/// The eligibility read answering identities only: the same statements as
/// [`eligible_records`] selecting `(record_id, line_generation)`, so a
/// reader that keeps decoded bodies by id (they never change once written)
/// decodes none of them again.
pub(crate) fn eligible_ids<C: Tx>(c: &C, q: &EligibilityQuery) -> StoreResult<EligibleIds> {
    // The stamp first: should a change commit between this statement and
    // the next ones (a backend whose statements see different snapshots),
    // the answer is newer than its stamp, never older, so a reader that
    // keeps it while the stamp holds keeps nothing stale.
    let stamp = change_stamp(c)?;
    let (mut ids, stable_until) = eligible_id_rows(c, q, None)?;
    ids.sort();
    let sorted: Vec<(&str, u64)> = ids.iter().map(|(id, g)| (id.as_str(), *g)).collect();
    let records_sha256 = SnapshotIdentity::records_digest(&sorted)?;
    let snapshot =
        SnapshotIdentity::of_records_digest(q, stamp.revocation_generation, &records_sha256)?;
    let scopes = mosaic_harness::memory_scope::ReadScope::of_reader(
        &q.principal_id,
        &q.workspace_id,
        &q.run_id,
    );
    Ok(EligibleIds {
        ids,
        snapshot,
        records_sha256,
        stamp,
        stable_until_unix_ms: stable_until,
        scope_commitments: super::scope::commitments(c, &q.tenant_id, &scopes)?,
    })
}

/// The earliest instant time alone changes an eligibility answer, if any.
type StableUntil = Option<u64>;

/// `(record_id, line_generation)` of the records [`eligibility_statements`]
/// finds (restricted to `ids`, given them), unsorted, and the earliest
/// instant after the query's at which time alone changes that answer: a
/// found record expires, or an active record of the scope (among `ids`)
/// created later than the query's instant comes of age.
fn eligible_id_rows<C: Tx>(
    c: &C,
    q: &EligibilityQuery,
    ids: Option<&[String]>,
) -> StoreResult<(Vec<(String, u64)>, StableUntil)> {
    let mut found: Vec<(String, u64)> = Vec::new();
    let mut stable_until: Option<u64> = None;
    let mut until = |at: u64| stable_until = Some(stable_until.map_or(at, |s| s.min(at)));
    for (sql, args) in scope_statements::<C>(q, ELIGIBLE_ID_COLUMNS, ELIGIBLE_AT, ids)? {
        let rows = c.rows(&sql, &vals(&args), |r| {
            r.cols::<(String, i64, Option<i64>)>()
        })?;
        for (id, line_generation, expires_at) in rows {
            if let Some(expires_at) = expires_at {
                until(u(expires_at)?);
            }
            found.push((id, u(line_generation)?));
        }
    }
    for (sql, args) in scope_statements::<C>(q, "MIN(r.created_at_ms)", OF_AGE_LATER, ids)? {
        let rows = c.rows(&sql, &vals(&args), |r| r.get::<Option<i64>>(0))?;
        for created_at in rows.into_iter().flatten() {
            until(u(created_at)?);
        }
    }
    Ok((found, stable_until))
}

/// What changed in the reader's scopes of `q` since a read that saw the
/// scope commitments `since` (see [`crate::Store::eligible_changes`]);
/// `None` when the changes alone cannot give the answer: `since` does not
/// name exactly the reader's scopes, a scope's generation in it is ahead
/// of the store's (another database, or a restored one), or at the same
/// generation its root differs, or an entry of a scope was removed (a
/// record erased) after `since`'s generation.
///
/// The statements: the stamp, each scope's head, one range read of
/// `idx_scope_entries_changed` per scope that moved, and the statements of
/// [`eligible_ids`] (the eligibility statements and those of its
/// `stable_until`) restricted to the changed ids, each a primary-key
/// lookup of them, so nothing reads a record that did not change.
pub(crate) fn eligible_changes<C: Tx>(
    c: &C,
    q: &EligibilityQuery,
    since: &[mosaic_harness::memory_scope::ScopeCommitment],
) -> StoreResult<Option<EligibleChanges>> {
    use mosaic_harness::memory_scope::ReadScope;
    // The stamp first, as `eligible_ids` reads it.
    let stamp = change_stamp(c)?;
    let scopes = ReadScope::of_reader(&q.principal_id, &q.workspace_id, &q.run_id);
    if since.len() != scopes.len() || since.iter().zip(&scopes).any(|(s, r)| s.scope != *r) {
        return Ok(None);
    }
    let heads = super::scope::heads(c, &q.tenant_id, &scopes)?;
    let mut changed: Vec<String> = Vec::new();
    for ((now, removed), before) in heads.iter().zip(since) {
        if before.generation > now.generation
            || (before.generation == now.generation && before.root_sha256 != now.root_sha256)
            || *removed > before.generation
        {
            return Ok(None);
        }
        if now.generation > before.generation {
            changed.extend(super::scope::changed_since(
                c,
                &q.tenant_id,
                &now.scope,
                before.generation,
            )?);
        }
    }
    changed.sort();
    changed.dedup();
    let mut eligible: Vec<(String, u64)> = Vec::new();
    let mut stable_until: Option<u64> = None;
    for chunk in changed.chunks(RECORDS_PER_READ) {
        let (found, until) = eligible_id_rows(c, q, Some(chunk))?;
        eligible.extend(found);
        stable_until = match (stable_until, until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    eligible.sort();
    Ok(Some(EligibleChanges {
        stamp,
        scope_commitments: heads.into_iter().map(|(c, _)| c).collect(),
        changed,
        eligible,
        stable_until_unix_ms: stable_until,
    }))
}

/// The records among the eligible `ids` that `known` answers false for,
/// each body held to `q` (defence in depth, as for [`eligible_records`]:
/// the body must agree with the indexed columns that found it).
pub(crate) fn unknown_bodies<C: Tx>(
    c: &C,
    q: &EligibilityQuery,
    ids: &[(String, u64)],
    known: &dyn Fn(&str) -> bool,
) -> StoreResult<Vec<StoredRecord>> {
    let unknown: Vec<String> = ids
        .iter()
        .filter(|(id, _)| !known(id))
        .map(|(id, _)| id.clone())
        .collect();
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let records = get_records(c, &q.tenant_id, &unknown)?;
    for stored in &records {
        if !body_matches_query(&stored.record, q) {
            return Err(StoreError::Corrupt(format!(
                "record {} body disagrees with its indexed columns",
                stored.record.record_id
            )));
        }
    }
    Ok(records)
}

/// The statements [`eligible_changes`] runs after the heads, given the
/// heads it found and the ids the first ones answer (for plans in tests).
pub(crate) fn eligible_changes_statements<C: Tx>(
    q: &EligibilityQuery,
    since: &[mosaic_harness::memory_scope::ScopeCommitment],
    changed: &[String],
) -> StoreResult<Vec<(String, Vec<Arg>)>> {
    let mut out = since
        .iter()
        .map(|s| super::scope::changed_since_statement(&q.tenant_id, &s.scope, s.generation))
        .collect::<StoreResult<Vec<_>>>()?;
    out.extend(scope_statements::<C>(
        q,
        ELIGIBLE_ID_COLUMNS,
        ELIGIBLE_AT,
        Some(changed),
    )?);
    out.extend(scope_statements::<C>(
        q,
        "MIN(r.created_at_ms)",
        OF_AGE_LATER,
        Some(changed),
    )?);
    Ok(out)
}

/// The rows of `records r` among `ids`, `columns` of each mapped by
/// `map`: read by primary key only (a tenant predicate could lead the
/// planner to the eligibility index's tenant prefix, a scan of the
/// tenant), so the caller checks the tenant on each row.
fn records_by_id<C: Tx, T>(
    c: &C,
    columns: &str,
    ids: &[String],
    mut map: impl FnMut(&dyn SqlRow) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(RECORDS_PER_READ) {
        let sql = format!(
            "SELECT {columns} FROM records r WHERE {}",
            C::in_set("r.record_id", "?1")
        );
        let args = [Arg::TextSet(chunk.to_vec())];
        out.extend(c.rows(&sql, &vals(&args), &mut map)?);
    }
    Ok(out)
}

/// A tenant's records with these ids, in any state, sorted by record id;
/// unknown, foreign and erased ids are absent.
pub(crate) fn get_records<C: Tx>(
    c: &C,
    tenant_id: &str,
    ids: &[String],
) -> StoreResult<Vec<StoredRecord>> {
    let mut out = Vec::with_capacity(ids.len());
    for row in records_by_id(c, RECORD_COLUMNS, ids, record_from_row)? {
        let stored = record_decode(row)?;
        if stored.record.tenant_id == tenant_id {
            out.push(stored);
        }
    }
    out.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
    Ok(out)
}

/// `(record_id, content)` of a tenant's records among `ids`, in any state,
/// sorted by record id; unknown, foreign and erased ids are absent. No
/// record body is read or decoded.
pub(crate) fn contents_of<C: Tx>(
    c: &C,
    tenant_id: &str,
    ids: &[String],
) -> StoreResult<Vec<(String, String)>> {
    column_of(c, tenant_id, "r.content", ids, Ok)
}

/// `(record_id, state)` of a tenant's records among `ids`, sorted by
/// record id; unknown, foreign and erased ids are absent.
pub(crate) fn record_states_of<C: Tx>(
    c: &C,
    tenant_id: &str,
    ids: &[String],
) -> StoreResult<Vec<(String, RecordState)>> {
    column_of(c, tenant_id, "r.state", ids, |state| parse_state(&state))
}

/// `(record_id, parse(column))` of a tenant's records among `ids`, sorted
/// by record id, each id once; unknown, foreign and erased ids are absent.
fn column_of<C: Tx, T>(
    c: &C,
    tenant_id: &str,
    column: &str,
    ids: &[String],
    parse: impl Fn(String) -> StoreResult<T>,
) -> StoreResult<Vec<(String, T)>> {
    let columns = format!("r.record_id, r.tenant_id, {column}");
    let mut out = Vec::with_capacity(ids.len());
    for (id, tenant, value) in
        records_by_id(c, &columns, ids, |r| r.cols::<(String, String, String)>())?
    {
        if tenant == tenant_id {
            out.push((id, parse(value)?));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    Ok(out)
}

/// The columns [`live_contents`] reads, of `records r`.
type LiveRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
);

/// `(record_id, content)` of the live records among `ids` that are the
/// tenant's and of `kind` and `subject`, sorted by record id. Read by
/// primary key only, as [`get_records`] is, the other columns compared on
/// each row; no record body is decoded.
pub(crate) fn live_contents<C: Tx>(
    c: &C,
    tenant_id: &str,
    ids: &[String],
    kind: MemoryKind,
    subject: &MemorySubject,
) -> StoreResult<Vec<(String, String)>> {
    let wanted = subject_columns(subject);
    let mut out = Vec::with_capacity(ids.len());
    for (id, tenant, row_kind, subject_type, a, b, state, content) in records_by_id(
        c,
        "r.record_id, r.tenant_id, r.kind, r.subject_type, r.subject_a, r.subject_b,
         r.state, r.content",
        ids,
        |r| r.cols::<LiveRow>(),
    )? {
        let live = matches!(
            parse_state(&state)?,
            RecordState::Active | RecordState::Publishing
        );
        if live
            && tenant == tenant_id
            && row_kind == kind.as_str()
            && (subject_type.as_str(), a.as_str(), b.as_str()) == wanted
        {
            out.push((id, content));
        }
    }
    out.sort();
    Ok(out)
}

/// Most ids bound to one statement of [`get_records`].
const RECORDS_PER_READ: usize = 2_000;

pub(crate) fn get_record<C: Tx>(c: &C, record_id: &str) -> StoreResult<Option<StoredRecord>> {
    c.row(
        &format!("SELECT {RECORD_COLUMNS} FROM records r WHERE r.record_id = ?1"),
        params![record_id],
        record_from_row,
    )?
    .map(record_decode)
    .transpose()
}

/// The structured claims of a record, by claim id (none once erased).
pub(crate) fn record_claims<C: Tx>(c: &C, record_id: &str) -> StoreResult<Vec<StructuredClaim>> {
    c.rows(
        "SELECT claim_json FROM record_claims WHERE record_id = ?1 ORDER BY claim_id",
        params![record_id],
        |r| r.get::<String>(0),
    )?
    .iter()
    .map(|json| decode(json))
    .collect()
}

/// Every record of a tenant with its listed state, sorted by record id
/// (the state column of [`list_records`], in one query).
pub(crate) fn record_states<C: Tx>(
    c: &C,
    tenant_id: &str,
) -> StoreResult<Vec<(String, ListedState)>> {
    c.rows(
        "SELECT c.record_id, r.state FROM record_catalog c
         LEFT JOIN records r ON r.record_id = c.record_id
         WHERE c.tenant_id = ?1 ORDER BY c.record_id",
        params![tenant_id],
        |r| r.cols::<(String, Option<String>)>(),
    )?
    .into_iter()
    .map(|(record_id, state)| {
        let state = match state {
            Some(s) => ListedState::from(parse_state(&s)?),
            None => ListedState::Erased,
        };
        Ok((record_id, state))
    })
    .collect()
}

/// Every stored claim of a tenant, as `(record_id, claim)`, sorted by
/// record and claim id.
pub(crate) fn tenant_claims<C: Tx>(
    c: &C,
    tenant_id: &str,
) -> StoreResult<Vec<(String, StructuredClaim)>> {
    c.rows(
        "SELECT record_id, claim_json FROM record_claims WHERE tenant_id = ?1
         ORDER BY record_id, claim_id",
        params![tenant_id],
        |r| r.cols::<(String, String)>(),
    )?
    .into_iter()
    .map(|(record_id, json)| Ok((record_id, decode(&json)?)))
    .collect()
}

/// A tenant's stored claims with this subject and predicate, as
/// `(record_id, claim)`, sorted by record and claim id.
pub(crate) fn claims_by_key<C: Tx>(
    c: &C,
    tenant_id: &str,
    subject: &str,
    predicate: &str,
) -> StoreResult<Vec<(String, StructuredClaim)>> {
    c.rows(
        "SELECT record_id, claim_json FROM record_claims
         WHERE tenant_id = ?1 AND claim_subject = ?2 AND claim_predicate = ?3
         ORDER BY record_id, claim_id",
        params![tenant_id, subject, predicate],
        |r| r.cols::<(String, String)>(),
    )?
    .into_iter()
    .map(|(record_id, json)| Ok((record_id, decode(&json)?)))
    .collect()
}

/// The current record at an application address: the newest record of
/// `tenant_id` about `subject` at `address` that is active or publishing,
/// as `(record_id, line_generation)`. One lookup on `idx_records_address`.
pub(crate) fn record_at_address<C: Tx>(
    c: &C,
    tenant_id: &str,
    subject: &MemorySubject,
    address: &MemoryAddress,
) -> StoreResult<Option<(String, u64)>> {
    let (subject_type, subject_a, subject_b) = subject_columns(subject);
    let found = c.row(
        "SELECT record_id, line_generation FROM records
         WHERE tenant_id = ?1 AND subject_type = ?2 AND subject_a = ?3 AND subject_b = ?4
           AND address_namespace = ?5 AND address_key = ?6
           AND state IN ('active', 'publishing')
         ORDER BY created_at_ms DESC, line_generation DESC, record_id
         LIMIT 1",
        params![
            tenant_id,
            subject_type,
            subject_a,
            subject_b,
            address.namespace_path(),
            address.key
        ],
        |r| r.cols::<(String, i64)>(),
    )?;
    found
        .map(|(id, generation)| Ok((id, u(generation)?)))
        .transpose()
}

/// The distinct namespaces (paths joined by `/`) of the current records of
/// `tenant_id` about `subject` that have an address: active or
/// publishing, and unexpired at `now_ms`. With `prefix`, only that path
/// and the paths below it (whole segments). Sorted by path, at most
/// `limit`. A range read of `idx_records_address`.
pub(crate) fn address_namespaces<C: Tx>(
    c: &C,
    tenant_id: &str,
    subject: &MemorySubject,
    prefix: Option<&str>,
    now_ms: u64,
    limit: usize,
) -> StoreResult<Vec<String>> {
    let (subject_type, subject_a, subject_b) = subject_columns(subject);
    // Below `p`: `p` itself and the paths from `p/` up to `p0` ('0'
    // follows '/'); without a prefix, every path.
    let (exact, low, high) = match prefix {
        Some(p) => (p.to_owned(), format!("{p}/"), format!("{p}0")),
        None => Default::default(),
    };
    let below = if prefix.is_some() {
        "AND (address_namespace = ?6 OR (address_namespace >= ?7 AND address_namespace < ?8))"
    } else {
        "AND ?6 = ?7 AND ?7 = ?8"
    };
    c.rows(
        &format!(
            "SELECT DISTINCT address_namespace FROM records
             WHERE tenant_id = ?1 AND subject_type = ?2 AND subject_a = ?3 AND subject_b = ?4
               AND address_key IS NOT NULL
               AND state IN ('active', 'publishing')
               AND (expires_at_ms IS NULL OR expires_at_ms > ?5)
               {below}
             ORDER BY address_namespace
             LIMIT ?9"
        ),
        params![
            tenant_id,
            subject_type,
            subject_a,
            subject_b,
            i(now_ms)?,
            exact,
            low,
            high,
            i(limit as u64)?
        ],
        |r| r.get::<String>(0),
    )
}

// ---------------------------------------------------------------- listing

/// The tenant's policy in force.
pub(crate) fn current_policy<C: Tx>(
    c: &C,
    tenant_id: &str,
) -> StoreResult<Option<MemoryWritePolicy>> {
    c.row(
        "SELECT policy_json FROM policies WHERE tenant_id = ?1",
        params![tenant_id],
        |r| r.get::<String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// The grant in force for `(tenant, principal)`.
pub(crate) fn current_grant<C: Tx>(
    c: &C,
    tenant_id: &str,
    principal_id: &str,
) -> StoreResult<Option<MemoryWriteGrant>> {
    c.row(
        "SELECT grant_json FROM grants WHERE tenant_id = ?1 AND principal_id = ?2",
        params![tenant_id, principal_id],
        |r| r.get::<String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// The stored gate receipt of a proposal.
pub(crate) fn write_receipt<C: Tx>(
    c: &C,
    proposal_id: &str,
) -> StoreResult<Option<mosaic_harness::memory_write::MemoryWriteReceipt>> {
    c.row(
        "SELECT receipt_json FROM proposals WHERE proposal_id = ?1",
        params![proposal_id],
        |r| r.get::<String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// Every consent a principal gave, sorted by digest.
pub(crate) fn consents_of<C: Tx>(
    c: &C,
    tenant_id: &str,
    principal_id: &str,
) -> StoreResult<Vec<StoredConsent>> {
    let rows: Vec<(String, String, i64, Option<i64>)> = c.rows(
        "SELECT consent_sha256, receipt_json, stored_at_ms, withdrawn_at_ms FROM consents
         WHERE tenant_id = ?1 AND principal_id = ?2 ORDER BY consent_sha256",
        params![tenant_id, principal_id],
        |r| r.cols(),
    )?;
    rows.into_iter()
        .map(|(consent_sha256, receipt, stored, withdrawn)| {
            Ok(StoredConsent {
                consent_sha256,
                receipt: decode(&receipt)?,
                stored_at_unix_ms: u(stored)?,
                withdrawn_at_unix_ms: withdrawn.map(u).transpose()?,
            })
        })
        .collect()
}

type ListRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
);

/// One page of the tenant's record catalog (see [`crate::Store::list_records`]).
pub(crate) fn list_records<C: Tx>(c: &C, f: &RecordFilter) -> StoreResult<RecordPage> {
    f.validate()?;
    let mut args: Vec<Arg> = vec![Arg::Text(f.tenant_id.clone())];
    let mut sql = String::from(
        "SELECT c.record_id, c.tenant_id, c.kind, c.subject_type, c.subject_a, c.subject_b,
                c.proposer_principal_id, c.proposal_id, c.created_at_ms,
                r.state, r.line_id, r.line_generation, v.stage,
                CASE WHEN r.state IS NOT NULL AND r.state != 'revoked' THEN r.content END
         FROM record_catalog c
         LEFT JOIN records r ON r.record_id = c.record_id
         LEFT JOIN revocations v ON v.record_id = c.record_id
         WHERE c.tenant_id = ?1",
    );
    // Appends `clause` with `#` standing for the next placeholder.
    let mut push = |clause: &str, value: Arg, args: &mut Vec<Arg>| {
        args.push(value);
        sql.push_str(&clause.replace('#', &format!("?{}", args.len())));
    };
    if let Some(subject) = &f.subject {
        let (t, a, b) = subject_columns(subject);
        push(
            " AND c.subject_type = #",
            Arg::Text(t.to_owned()),
            &mut args,
        );
        push(" AND c.subject_a = #", Arg::Text(a.to_owned()), &mut args);
        push(" AND c.subject_b = #", Arg::Text(b.to_owned()), &mut args);
    }
    if let Some(proposer) = &f.proposer_principal_id {
        push(
            " AND c.proposer_principal_id = #",
            Arg::Text(proposer.clone()),
            &mut args,
        );
    }
    if let Some(after) = &f.after_record_id {
        push(" AND c.record_id > #", Arg::Text(after.clone()), &mut args);
    }
    if !f.kinds.is_empty() {
        let kinds = f.kinds.iter().map(|k| k.as_str().to_owned()).collect();
        push(
            &format!(" AND {}", C::in_set("c.kind", "#")),
            Arg::TextSet(kinds),
            &mut args,
        );
    }
    if !f.states.is_empty() {
        let states = f.states.iter().map(|s| s.as_str().to_owned()).collect();
        push(
            &format!(" AND {}", C::in_set("coalesce(r.state, 'erased')", "#")),
            Arg::TextSet(states),
            &mut args,
        );
    }
    let fetch = i64::try_from(f.limit + 1).unwrap_or(i64::MAX);
    push(" ORDER BY c.record_id LIMIT #", Arg::Int(fetch), &mut args);
    let rows: Vec<ListRow> = c.rows(&sql, &vals(&args), |r| r.cols())?;
    let mut records = Vec::with_capacity(rows.len());
    for row in rows {
        records.push(listed_decode(row, f.include_content)?);
    }
    let next_after = if records.len() > f.limit {
        records.truncate(f.limit);
        records.last().map(|r| r.record_id.clone())
    } else {
        None
    };
    Ok(RecordPage {
        records,
        next_after,
    })
}

fn listed_decode(row: ListRow, include_content: bool) -> StoreResult<ListedRecord> {
    let (
        record_id,
        tenant_id,
        kind,
        subject_type,
        a,
        b,
        proposer_principal_id,
        proposal_id,
        created_at,
        state,
        line_id,
        line_generation,
        stage,
        content,
    ) = row;
    let state = match state {
        Some(s) => ListedState::from(parse_state(&s)?),
        None => ListedState::Erased,
    };
    let line = match (line_id, line_generation) {
        (Some(id), Some(generation)) => Some((id, u(generation)?)),
        _ => None,
    };
    Ok(ListedRecord {
        record_id,
        tenant_id,
        kind: crate::types::kind_from_str(&kind)?,
        subject: crate::types::subject_from_columns(&subject_type, a, b)?,
        proposer_principal_id,
        proposal_id,
        created_at_unix_ms: u(created_at)?,
        state,
        revocation_stage: stage.as_deref().map(parse_stage).transpose()?,
        line,
        content: content.filter(|_| include_content && state != ListedState::Revoked),
    })
}

// ---------------------------------------------------------------- integrity

/// Cross-table invariants, per tenant, plus the backend's own findings
/// about its storage (none on SQLite, whose `PRAGMA integrity_check` runs
/// outside the transaction).
pub(crate) fn cross_table_check<C: Tx>(c: &C) -> StoreResult<IntegrityReport> {
    enum Finding {
        MissingOutbox(String),
        MissingRecord(String),
        Scope(String),
    }
    let problems = c.storage_problems()?;
    let findings = c.each_tenant(|| {
        let mut found = Vec::new();
        let records: Vec<(String, String)> = c.rows(
            "SELECT record_id, required_targets FROM records ORDER BY record_id",
            params![],
            |r| r.cols(),
        )?;
        for (record_id, targets) in records {
            let targets: Vec<String> = decode(&targets)?;
            let present: BTreeSet<String> = c
                .rows(
                    "SELECT target FROM outbox WHERE record_id = ?1",
                    params![&record_id],
                    |r| r.get(0),
                )?
                .into_iter()
                .collect();
            if targets.iter().any(|t| !present.contains(t)) {
                found.push(Finding::MissingOutbox(record_id));
            }
        }
        let missing: Vec<String> = c.rows(
            "SELECT p.proposal_id FROM proposals p
             WHERE p.accepted = ?1
               AND NOT EXISTS (SELECT 1 FROM records r WHERE r.record_id = p.record_id)
               AND NOT EXISTS (SELECT 1 FROM revocations v WHERE v.record_id = p.record_id)
             ORDER BY p.proposal_id",
            params![true],
            |r| r.get(0),
        )?;
        found.extend(missing.into_iter().map(Finding::MissingRecord));
        found.extend(super::scope::recheck(c)?.into_iter().map(Finding::Scope));
        Ok(found)
    })?;
    let mut records_missing_outbox = Vec::new();
    let mut proposals_missing_record = Vec::new();
    let mut scope_commitment_mismatches = Vec::new();
    for finding in findings {
        match finding {
            Finding::MissingOutbox(id) => records_missing_outbox.push(id),
            Finding::MissingRecord(id) => proposals_missing_record.push(id),
            Finding::Scope(finding) => scope_commitment_mismatches.push(finding),
        }
    }
    records_missing_outbox.sort();
    proposals_missing_record.sort();
    let storage_ok = problems.is_empty();
    Ok(IntegrityReport {
        storage_ok,
        storage_detail: if storage_ok {
            "ok".to_owned()
        } else {
            problems.join("; ")
        },
        records_missing_outbox,
        proposals_missing_record,
        audit: verify_audit_chain(c)?,
        scope_commitment_mismatches,
    })
}
