//! What the PostgreSQL backend runs differently from the shared operations
//! ([`crate::ops`]): the eligibility statements, which bind the wanted
//! kinds as one array.

use crate::error::StoreResult;
use crate::ops::read::RECORD_COLUMNS;
use crate::ops::{Arg, i};
use crate::types::EligibilityQuery;

/// The statements (and their parameters) of one eligibility read: one
/// indexed equality lookup per subject shape the reader may see. The
/// tenant predicate stays although row-level security implies it: it is the
/// index prefix.
pub(crate) fn eligibility_statements(q: &EligibilityQuery) -> StoreResult<Vec<(String, Vec<Arg>)>> {
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
        let mut params = vec![
            Arg::Text(q.tenant_id.clone()),
            Arg::Text(q.policy_sha256.clone()),
            Arg::Text(subject_type.to_owned()),
            Arg::Text(a.to_owned()),
            Arg::Int(now),
            Arg::TextSet(kinds.clone()),
        ];
        let mut sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r
             WHERE r.tenant_id = ?1 AND r.policy_sha256 = ?2 AND r.state = 'active'
               AND r.subject_type = ?3 AND r.subject_a = ?4
               AND r.created_at_ms <= ?5 AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?5)
               AND r.kind = ANY(?6)"
        );
        if let Some(b) = b {
            sql.push_str(" AND r.subject_b = ?7");
            params.push(Arg::Text(b.to_owned()));
        }
        out.push((sql, params));
    }
    Ok(out)
}
