//! The SQL of every store operation on PostgreSQL. Each function runs
//! inside the transaction its caller opened, under the tenant the caller
//! (or the function, for requests that carry one) entered; SQL-row mapping
//! stays in this file. The logic mirrors the SQLite backend statement for
//! statement, so both pass one conformance suite.

use std::collections::BTreeSet;

use mosaic_harness::memory_write::{MemoryWriteGrant, MemoryWritePolicy};
use mosaic_harness::{MemoryRecord, MemoryStatus, MemorySubject};
use postgres::Row;
use postgres::types::ToSql;

use super::Ctx;
use crate::error::{StoreError, StoreResult};

type PgResult<T> = Result<T, postgres::Error>;
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
use crate::ops::{decode, i, parse_stage, parse_state, subject_columns, u};
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

fn record_from_row(r: &Row) -> PgResult<RecordRow> {
    Ok((
        r.try_get(0)?,
        r.try_get(1)?,
        r.try_get(2)?,
        r.try_get(3)?,
        r.try_get(4)?,
        r.try_get(5)?,
        r.try_get(6)?,
        r.try_get(7)?,
        r.try_get(8)?,
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

/// Owned parameters of one statement.
pub(crate) type OwnedParams = Vec<Box<dyn ToSql + Sync>>;

/// Borrows [`OwnedParams`] as the driver wants them.
pub(crate) fn param_refs(params: &OwnedParams) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// The statements (and their parameters) of one eligibility read: one
/// indexed equality lookup per subject shape the reader may see. The
/// tenant predicate stays although row-level security implies it: it is the
/// index prefix.
pub(crate) fn eligibility_statements(
    q: &EligibilityQuery,
) -> StoreResult<Vec<(String, OwnedParams)>> {
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
    let mut out = Vec::new();
    for (subject_type, a, b) in subjects {
        let mut params: OwnedParams = vec![
            Box::new(q.tenant_id.clone()),
            Box::new(q.policy_sha256.clone()),
            Box::new(subject_type.to_owned()),
            Box::new(a.to_owned()),
            Box::new(now),
            Box::new(kinds.clone()),
        ];
        let mut sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r
             WHERE r.tenant_id = $1 AND r.policy_sha256 = $2 AND r.state = 'active'
               AND r.subject_type = $3 AND r.subject_a = $4
               AND r.created_at_ms <= $5 AND (r.expires_at_ms IS NULL OR r.expires_at_ms > $5)
               AND r.kind = ANY($6)"
        );
        if let Some(b) = b {
            sql.push_str(" AND r.subject_b = $7");
            params.push(Box::new(b.to_owned()));
        }
        out.push((sql, params));
    }
    Ok(out)
}

pub(crate) fn eligible_records(c: &Ctx<'_>, q: &EligibilityQuery) -> StoreResult<EligibleSet> {
    let generation = revocation_generation(c)?;
    let mut records = Vec::new();
    for (sql, params) in eligibility_statements(q)? {
        let rows = c.rows(&sql, &param_refs(&params), record_from_row)?;
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
        &format!("SELECT {RECORD_COLUMNS} FROM records r WHERE r.record_id = $1"),
        &[&record_id],
        record_from_row,
    )?
    .map(record_decode)
    .transpose()
}

// ---------------------------------------------------------------- listing

/// The tenant's policy in force (the caller entered the tenant).
pub(crate) fn current_policy(
    c: &Ctx<'_>,
    tenant_id: &str,
) -> StoreResult<Option<MemoryWritePolicy>> {
    c.row(
        "SELECT policy_json FROM policies WHERE tenant_id = $1",
        &[&tenant_id],
        |r| r.try_get::<_, String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// The grant in force for `(tenant, principal)` (the caller entered the
/// tenant).
pub(crate) fn current_grant(
    c: &Ctx<'_>,
    tenant_id: &str,
    principal_id: &str,
) -> StoreResult<Option<MemoryWriteGrant>> {
    c.row(
        "SELECT grant_json FROM grants WHERE tenant_id = $1 AND principal_id = $2",
        &[&tenant_id, &principal_id],
        |r| r.try_get::<_, String>(0),
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

/// One page of the tenant's record catalog (the caller entered the tenant;
/// the tenant predicate stays as the index prefix).
pub(crate) fn list_records(c: &Ctx<'_>, f: &RecordFilter) -> StoreResult<RecordPage> {
    f.validate()?;
    let mut params: OwnedParams = vec![Box::new(f.tenant_id.clone())];
    let mut sql = String::from(
        "SELECT c.record_id, c.tenant_id, c.kind, c.subject_type, c.subject_a, c.subject_b,
                c.proposer_principal_id, c.proposal_id, c.created_at_ms,
                r.state, r.line_id, r.line_generation, v.stage,
                CASE WHEN r.state IS NOT NULL AND r.state <> 'revoked' THEN r.content END
         FROM record_catalog c
         LEFT JOIN records r ON r.record_id = c.record_id
         LEFT JOIN revocations v ON v.record_id = c.record_id
         WHERE c.tenant_id = $1",
    );
    fn push(
        sql: &mut String,
        params: &mut OwnedParams,
        clause: &str,
        value: Box<dyn ToSql + Sync>,
    ) {
        params.push(value);
        sql.push_str(&clause.replace('#', &format!("${}", params.len())));
    }
    if let Some(subject) = &f.subject {
        let (t, a, b) = subject_columns(subject);
        push(
            &mut sql,
            &mut params,
            " AND c.subject_type = #",
            Box::new(t.to_owned()),
        );
        push(
            &mut sql,
            &mut params,
            " AND c.subject_a = #",
            Box::new(a.to_owned()),
        );
        push(
            &mut sql,
            &mut params,
            " AND c.subject_b = #",
            Box::new(b.to_owned()),
        );
    }
    if let Some(proposer) = &f.proposer_principal_id {
        push(
            &mut sql,
            &mut params,
            " AND c.proposer_principal_id = #",
            Box::new(proposer.clone()),
        );
    }
    if let Some(after) = &f.after_record_id {
        push(
            &mut sql,
            &mut params,
            " AND c.record_id > #",
            Box::new(after.clone()),
        );
    }
    if !f.kinds.is_empty() {
        let kinds: Vec<String> = f.kinds.iter().map(|k| k.as_str().to_owned()).collect();
        push(
            &mut sql,
            &mut params,
            " AND c.kind = ANY(#)",
            Box::new(kinds),
        );
    }
    if !f.states.is_empty() {
        let states: Vec<String> = f.states.iter().map(|s| s.as_str().to_owned()).collect();
        push(
            &mut sql,
            &mut params,
            " AND coalesce(r.state, 'erased') = ANY(#)",
            Box::new(states),
        );
    }
    let fetch = i64::try_from(f.limit + 1).unwrap_or(i64::MAX);
    push(
        &mut sql,
        &mut params,
        " ORDER BY c.record_id LIMIT #",
        Box::new(fetch),
    );
    let rows: Vec<ListRow> = c.rows(&sql, &param_refs(&params), |r| {
        Ok((
            r.try_get(0)?,
            r.try_get(1)?,
            r.try_get(2)?,
            r.try_get(3)?,
            r.try_get(4)?,
            r.try_get(5)?,
            r.try_get(6)?,
            r.try_get(7)?,
            r.try_get(8)?,
            r.try_get(9)?,
            r.try_get(10)?,
            r.try_get(11)?,
            r.try_get(12)?,
            r.try_get(13)?,
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

/// Cross-table invariants per tenant, plus what PostgreSQL can say about
/// the storage itself: every index of the schema is valid, row-level
/// security is still on and forced on every tenant table, and the tenant
/// directory agrees with the records and proposals.
pub(crate) fn cross_table_check(c: &Ctx<'_>) -> StoreResult<IntegrityReport> {
    let mut problems: Vec<String> = Vec::new();
    let invalid_indexes: Vec<String> = c.rows(
        "SELECT i.indexrelid::regclass::text FROM pg_catalog.pg_index i
         JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
         WHERE t.relnamespace = current_schema()::regnamespace AND NOT (i.indisvalid AND i.indisready)
         ORDER BY 1",
        &[],
        |r| r.try_get(0),
    )?;
    problems.extend(
        invalid_indexes
            .into_iter()
            .map(|i| format!("index {i} is not valid")),
    );
    let tables: Vec<String> = super::schema::TENANT_TABLES
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
    let unprotected: Vec<String> = c.rows(
        "SELECT t.name FROM unnest($1::text[]) AS t(name)
         LEFT JOIN pg_catalog.pg_class k
           ON k.relname = t.name AND k.relnamespace = current_schema()::regnamespace
         WHERE NOT coalesce(k.relrowsecurity AND k.relforcerowsecurity, false)
         ORDER BY 1",
        &[&tables],
        |r| r.try_get(0),
    )?;
    problems.extend(
        unprotected
            .into_iter()
            .map(|t| format!("row-level security is not forced on {t}")),
    );

    let mut records_missing_outbox = Vec::new();
    let mut proposals_missing_record = Vec::new();
    for tenant in c.tenants()? {
        c.enter_tenant(&tenant)?;
        let undirected: Vec<String> = c.rows(
            "SELECT r.record_id FROM records r
             WHERE NOT EXISTS (SELECT 1 FROM object_tenants d
                 WHERE d.kind = 'record' AND d.object_id = r.record_id AND d.tenant_id = r.tenant_id)
             UNION ALL
             SELECT p.proposal_id FROM proposals p
             WHERE NOT EXISTS (SELECT 1 FROM object_tenants d
                 WHERE d.kind = 'proposal' AND d.object_id = p.proposal_id AND d.tenant_id = p.tenant_id)
             ORDER BY 1",
            &[],
            |r| r.try_get(0),
        )?;
        problems.extend(
            undirected
                .into_iter()
                .map(|id| format!("{id} of {tenant} is missing from the tenant directory")),
        );
        let records: Vec<(String, String)> = c.rows(
            "SELECT record_id, required_targets FROM records ORDER BY record_id",
            &[],
            |r| Ok((r.try_get(0)?, r.try_get(1)?)),
        )?;
        for (record_id, targets) in records {
            let targets: Vec<String> = decode(&targets)?;
            let present: BTreeSet<String> = c
                .rows(
                    "SELECT target FROM outbox WHERE record_id = $1",
                    &[&record_id],
                    |r| r.try_get(0),
                )?
                .into_iter()
                .collect();
            if targets.iter().any(|t| !present.contains(t)) {
                records_missing_outbox.push(record_id);
            }
        }
        proposals_missing_record.extend(c.rows(
            "SELECT p.proposal_id FROM proposals p
             WHERE p.accepted
               AND NOT EXISTS (SELECT 1 FROM records r WHERE r.record_id = p.record_id)
               AND NOT EXISTS (SELECT 1 FROM revocations v WHERE v.record_id = p.record_id)
             ORDER BY p.proposal_id",
            &[],
            |r| r.try_get::<_, String>(0),
        )?);
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
    })
}
