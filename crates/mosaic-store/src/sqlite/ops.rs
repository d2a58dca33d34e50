//! The SQL of every store operation. Each function runs inside the
//! transaction its caller opened; SQL-row mapping stays in this file.

use std::collections::BTreeSet;

use mosaic_harness::memory_write::{MemoryWriteGrant, MemoryWritePolicy};
use mosaic_harness::{MemoryRecord, MemoryStatus, MemorySubject};

use super::Ctx;
use crate::error::{StoreError, StoreResult};
use crate::types::{
    EligibilityQuery, EligibleSet, IntegrityReport, ListedRecord, ListedState, RecordFilter,
    RecordPage, RecordState, SnapshotIdentity, StoredRecord,
};

pub(crate) use crate::ops::review::{open_review_cases, resolve_review, review_case};
pub(crate) use crate::ops::revocation::{
    acknowledge_index, confirm_indexes_acknowledged, erase, finalize_deletion, pending_deletions,
    pending_outbox, request_deletion, resume_revocation, revoke, tombstone, withdraw_consent,
};
pub(crate) use crate::ops::write::{
    put_consent, put_grant, put_policy, verify_write_receipt, write_one,
};
use crate::ops::{decode, encode, i, parse_stage, parse_state, subject_columns, u};
pub(crate) use crate::ops::{revocation_generation, verify_audit_chain};

// ---------------------------------------------------------------- read path

const RECORD_COLUMNS: &str = "r.record_id, r.state, r.superseded_by, r.line_id, r.line_generation, r.proposal_id,
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

fn record_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RecordRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
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
    record.status = match state {
        RecordState::Publishing | RecordState::Active => MemoryStatus::Verified,
        RecordState::Contested | RecordState::Quarantined => MemoryStatus::Contested,
        RecordState::Superseded => MemoryStatus::Superseded {
            replacement_id: superseded_by.unwrap_or_default(),
        },
        RecordState::Revoked => MemoryStatus::Revoked {
            revoked_at_unix_ms: revoked_at.map(u).transpose()?.unwrap_or(0),
        },
    };
    Ok(StoredRecord {
        record,
        content,
        state,
        line_id,
        line_generation: u(line_generation)?,
        proposal_id,
    })
}

/// The statements (and their parameters) of one eligibility read: one
/// indexed equality lookup per subject shape the reader may see.
pub(crate) fn eligibility_statements(
    q: &EligibilityQuery,
) -> StoreResult<Vec<(String, Vec<rusqlite::types::Value>)>> {
    use rusqlite::types::Value;
    let mut kinds: Vec<&str> = q.kinds.iter().map(|k| k.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let now = Value::Integer(i(q.now_unix_ms)?);
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
    let mut out = Vec::new();
    for (subject_type, a, b) in subjects {
        let mut params = vec![
            Value::Text(q.tenant_id.clone()),
            Value::Text(q.policy_sha256.clone()),
            Value::Text(subject_type.to_owned()),
            Value::Text(a.to_owned()),
            now.clone(),
        ];
        let mut sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r
             WHERE r.tenant_id = ?1 AND r.policy_sha256 = ?2 AND r.state = 'active'
               AND r.subject_type = ?3 AND r.subject_a = ?4
               AND r.created_at_ms <= ?5 AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?5)"
        );
        let mut next = 6;
        if let Some(b) = b {
            sql.push_str(&format!(" AND r.subject_b = ?{next}"));
            params.push(Value::Text(b.to_owned()));
            next += 1;
        }
        let placeholders: Vec<String> =
            (0..kinds.len()).map(|k| format!("?{}", next + k)).collect();
        sql.push_str(&format!(" AND r.kind IN ({})", placeholders.join(", ")));
        params.extend(kinds.iter().map(|k| Value::Text((*k).to_owned())));
        out.push((sql, params));
    }
    Ok(out)
}

pub(crate) fn eligible_records(c: &Ctx<'_>, q: &EligibilityQuery) -> StoreResult<EligibleSet> {
    let generation = revocation_generation(c)?;
    let mut records = Vec::new();
    for (sql, params) in eligibility_statements(q)? {
        let rows = c.rows(
            &sql,
            rusqlite::params_from_iter(params.iter()),
            record_from_row,
        )?;
        for row in rows {
            let stored = record_decode(row)?;
            // Defense in depth: the body must agree with the indexed columns.
            let rec = &stored.record;
            let subject_ok = match &rec.subject {
                MemorySubject::Run { run_id } => run_id == &q.run_id,
                MemorySubject::Principal { principal_id } => principal_id == &q.principal_id,
                MemorySubject::PrincipalInWorkspace {
                    workspace_id,
                    principal_id,
                } => workspace_id == &q.workspace_id && principal_id == &q.principal_id,
                MemorySubject::Workspace { workspace_id }
                | MemorySubject::Procedure { workspace_id, .. } => workspace_id == &q.workspace_id,
            };
            if !subject_ok || rec.tenant_id != q.tenant_id || rec.policy_sha256 != q.policy_sha256 {
                return Err(StoreError::Corrupt(format!(
                    "record {} body disagrees with its indexed columns",
                    rec.record_id
                )));
            }
            records.push(stored);
        }
    }
    records.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
    let snapshot = SnapshotIdentity::compute(q, generation, &records)?;
    Ok(EligibleSet { records, snapshot })
}

pub(crate) fn get_record(c: &Ctx<'_>, record_id: &str) -> StoreResult<Option<StoredRecord>> {
    c.row(
        &format!("SELECT {RECORD_COLUMNS} FROM records r WHERE r.record_id = ?1"),
        [record_id],
        record_from_row,
    )?
    .map(record_decode)
    .transpose()
}

// ---------------------------------------------------------------- listing

/// The tenant's policy in force.
pub(crate) fn current_policy(
    c: &Ctx<'_>,
    tenant_id: &str,
) -> StoreResult<Option<MemoryWritePolicy>> {
    c.row(
        "SELECT policy_json FROM policies WHERE tenant_id = ?1",
        [tenant_id],
        |r| r.get::<_, String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// The grant in force for `(tenant, principal)`.
pub(crate) fn current_grant(
    c: &Ctx<'_>,
    tenant_id: &str,
    principal_id: &str,
) -> StoreResult<Option<MemoryWriteGrant>> {
    c.row(
        "SELECT grant_json FROM grants WHERE tenant_id = ?1 AND principal_id = ?2",
        [tenant_id, principal_id],
        |r| r.get::<_, String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
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
pub(crate) fn list_records(c: &Ctx<'_>, f: &RecordFilter) -> StoreResult<RecordPage> {
    use rusqlite::types::Value;
    f.validate()?;
    let mut params: Vec<Value> = vec![Value::Text(f.tenant_id.clone())];
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
    let mut push = |clause: &str, value: Value, params: &mut Vec<Value>| {
        params.push(value);
        sql.push_str(&clause.replace('#', &format!("?{}", params.len())));
    };
    if let Some(subject) = &f.subject {
        let (t, a, b) = subject_columns(subject);
        push(
            " AND c.subject_type = #",
            Value::Text(t.to_owned()),
            &mut params,
        );
        push(
            " AND c.subject_a = #",
            Value::Text(a.to_owned()),
            &mut params,
        );
        push(
            " AND c.subject_b = #",
            Value::Text(b.to_owned()),
            &mut params,
        );
    }
    if let Some(proposer) = &f.proposer_principal_id {
        push(
            " AND c.proposer_principal_id = #",
            Value::Text(proposer.clone()),
            &mut params,
        );
    }
    if let Some(after) = &f.after_record_id {
        push(
            " AND c.record_id > #",
            Value::Text(after.clone()),
            &mut params,
        );
    }
    if !f.kinds.is_empty() {
        let kinds: Vec<&str> = f.kinds.iter().map(|k| k.as_str()).collect();
        push(
            " AND c.kind IN (SELECT value FROM json_each(#))",
            Value::Text(encode(&kinds)?),
            &mut params,
        );
    }
    if !f.states.is_empty() {
        let states: Vec<&str> = f.states.iter().map(|s| s.as_str()).collect();
        push(
            " AND coalesce(r.state, 'erased') IN (SELECT value FROM json_each(#))",
            Value::Text(encode(&states)?),
            &mut params,
        );
    }
    let fetch = i64::try_from(f.limit + 1).unwrap_or(i64::MAX);
    push(
        " ORDER BY c.record_id LIMIT #",
        Value::Integer(fetch),
        &mut params,
    );
    let rows: Vec<ListRow> = c.rows(&sql, rusqlite::params_from_iter(params.iter()), |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
            r.get(9)?,
            r.get(10)?,
            r.get(11)?,
            r.get(12)?,
            r.get(13)?,
        ))
    })?;
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

pub(crate) fn cross_table_check(c: &Ctx<'_>) -> StoreResult<IntegrityReport> {
    let records: Vec<(String, String)> = c.rows(
        "SELECT record_id, required_targets FROM records ORDER BY record_id",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut records_missing_outbox = Vec::new();
    for (record_id, targets) in records {
        let targets: Vec<String> = decode(&targets)?;
        let present: BTreeSet<String> = c
            .rows(
                "SELECT target FROM outbox WHERE record_id = ?1",
                [&record_id],
                |r| r.get(0),
            )?
            .into_iter()
            .collect();
        if targets.iter().any(|t| !present.contains(t)) {
            records_missing_outbox.push(record_id);
        }
    }
    let proposals_missing_record: Vec<String> = c.rows(
        "SELECT p.proposal_id FROM proposals p
         WHERE p.accepted = 1
           AND NOT EXISTS (SELECT 1 FROM records r WHERE r.record_id = p.record_id)
           AND NOT EXISTS (SELECT 1 FROM revocations v WHERE v.record_id = p.record_id)
         ORDER BY p.proposal_id",
        [],
        |r| r.get(0),
    )?;
    Ok(IntegrityReport {
        storage_ok: false,
        storage_detail: String::new(),
        records_missing_outbox,
        proposals_missing_record,
        audit: verify_audit_chain(c)?,
    })
}
