//! The indexed eligibility read: the statements (the backend runs them)
//! that find the records a reader may see, their ids and the changes since
//! a stamp, and the bodies of those the caller does not hold yet.

use super::{RECORD_COLUMNS, RECORDS_PER_READ, get_records, record_decode, record_from_row};
use crate::error::{StoreError, StoreResult};
use crate::ops::{Arg, Tx, i, params, revocation_generation, u, vals};
use crate::types::{
    ChangeStamp, EligibilityQuery, EligibleChanges, EligibleIds, EligibleSet, SnapshotIdentity,
    StoredRecord, body_matches_query,
};

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
    stamp_of(audit_seq, generation)
}

/// The store's [`AccessStamp`](crate::types::AccessStamp): its change
/// stamp and access generation in one statement.
pub(crate) fn access_stamp<C: Tx>(c: &C) -> StoreResult<crate::types::AccessStamp> {
    let (audit_seq, generation, access) = c
        .row(
            "SELECT (SELECT int_value FROM meta WHERE key = 'audit_head_seq'),
                    (SELECT int_value FROM meta WHERE key = 'revocation_generation'),
                    (SELECT int_value FROM meta WHERE key = 'access_generation')",
            params![],
            |r| r.cols::<(Option<i64>, Option<i64>, Option<i64>)>(),
        )?
        .ok_or_else(|| StoreError::Corrupt("meta is empty".into()))?;
    Ok(crate::types::AccessStamp {
        change: stamp_of(audit_seq, generation)?,
        access_generation: access_generation_of(access)?,
    })
}

/// The access generation as read from meta.
pub(crate) fn access_generation_of(value: Option<i64>) -> StoreResult<u64> {
    u(value.ok_or_else(|| StoreError::Corrupt("meta.access_generation missing".into()))?)
}

/// The [`ChangeStamp`] of meta's two values as read.
pub(crate) fn stamp_of(
    audit_seq: Option<i64>,
    generation: Option<i64>,
) -> StoreResult<ChangeStamp> {
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
        scope_commitments: crate::ops::scope::commitments(c, &q.tenant_id, &scopes)?,
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
    let heads = crate::ops::scope::heads(c, &q.tenant_id, &scopes)?;
    let mut changed: Vec<String> = Vec::new();
    for ((now, removed), before) in heads.iter().zip(since) {
        if before.generation > now.generation
            || (before.generation == now.generation && before.root_sha256 != now.root_sha256)
            || *removed > before.generation
        {
            return Ok(None);
        }
        if now.generation > before.generation {
            changed.extend(crate::ops::scope::changed_since(
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
        .map(|s| crate::ops::scope::changed_since_statement(&q.tenant_id, &s.scope, s.generation))
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
