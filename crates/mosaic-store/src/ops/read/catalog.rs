//! The paged record catalog of a tenant.

use crate::error::StoreResult;
use crate::ops::{Arg, Tx, parse_stage, parse_state, subject_columns, u, vals};
use crate::types::{ListedRecord, ListedState, RecordFilter, RecordPage};

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
    if let Some(reader) = &f.visible_to {
        // `subject_columns`: (type, a, b) with a principal in a workspace
        // as (workspace, principal) and a procedure as (workspace, id).
        let principal = || Arg::Text(reader.principal_id.clone());
        let workspaces = || Arg::TextSet(reader.workspace_ids.clone());
        push(
            " AND ((c.subject_type = 'principal' AND c.subject_a = #)",
            principal(),
            &mut args,
        );
        push(
            " OR (c.subject_type = 'principal_in_workspace' AND c.subject_b = #",
            principal(),
            &mut args,
        );
        push(
            &format!(" AND {})", C::in_set("c.subject_a", "#")),
            workspaces(),
            &mut args,
        );
        push(
            &format!(
                " OR (c.subject_type IN ('workspace', 'procedure') AND {})",
                C::in_set("c.subject_a", "#")
            ),
            workspaces(),
            &mut args,
        );
        push(
            &format!(
                " OR (c.subject_type = 'run' AND {}))",
                C::in_set("c.subject_a", "#")
            ),
            Arg::TextSet(reader.run_ids.clone()),
            &mut args,
        );
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
