//! The read path: records by id and at an address, their claims and
//! states. The eligibility read, governance state in force, the paged
//! record catalog and the integrity check live in the submodules.

mod catalog;
mod eligibility;
mod governance;
mod integrity;

pub(crate) use catalog::list_records;
pub(crate) use eligibility::{
    ELIGIBLE_ID_COLUMNS, access_generation_of, access_stamp, change_stamp, eligibility_statements,
    eligible_changes, eligible_changes_statements, eligible_ids, eligible_records,
    latest_created_at, stamp_of, unknown_bodies,
};
pub(crate) use governance::{consents_of, current_grant, current_policy, write_receipt};
pub(crate) use integrity::cross_table_check;

use mosaic_harness::memory_write::StructuredClaim;
use mosaic_harness::{MemoryAddress, MemoryKind, MemoryRecord, MemoryStatus, MemorySubject};

use crate::error::{StoreError, StoreResult};
use crate::ops::{Arg, SqlRow, Tx, decode, i, params, parse_state, subject_columns, u, vals};
use crate::types::{ListedState, RecordState, StoredRecord};

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

pub(super) fn record_decode(row: RecordRow) -> StoreResult<StoredRecord> {
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
pub(super) const RECORDS_PER_READ: usize = 2_000;

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
