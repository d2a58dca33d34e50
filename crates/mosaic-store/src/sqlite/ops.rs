//! What the SQLite backend runs differently from the shared operations
//! ([`crate::ops`]): the eligibility statements, which list the wanted
//! kinds as separate placeholders so the planner keeps using the
//! eligibility index.

use crate::error::StoreResult;
use crate::ops::read::RECORD_COLUMNS;
use crate::ops::{Arg, i};
use crate::types::EligibilityQuery;

/// The statements (and their parameters) of one eligibility read: one
/// indexed equality lookup per subject shape the reader may see.
pub(crate) fn eligibility_statements(q: &EligibilityQuery) -> StoreResult<Vec<(String, Vec<Arg>)>> {
    let mut kinds: Vec<&str> = q.kinds.iter().map(|k| k.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let now = Arg::Int(i(q.now_unix_ms)?);
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
            params.push(Arg::Text(b.to_owned()));
            next += 1;
        }
        let placeholders: Vec<String> =
            (0..kinds.len()).map(|k| format!("?{}", next + k)).collect();
        sql.push_str(&format!(" AND r.kind IN ({})", placeholders.join(", ")));
        params.extend(kinds.iter().map(|k| Arg::Text((*k).to_owned())));
        out.push((sql, params));
    }
    Ok(out)
}
