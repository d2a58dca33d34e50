//! Supersession edges: an immutable link from an old record to its
//! replacement. Checked over the whole supplied record set.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{MemoryRecord, MemoryStatus};

/// What is wrong with a supersession edge.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum SupersessionProblem {
    /// The record names itself as its replacement.
    SelfReference,
    /// The replacement is not in the supplied record set.
    UnknownReplacement {
        /// The missing replacement.
        replacement_id: String,
    },
    /// The replacement has another tenant, kind or subject.
    CrossSubject {
        /// The replacement.
        replacement_id: String,
    },
    /// The replacement was created before the record it replaces.
    OlderReplacement {
        /// The replacement.
        replacement_id: String,
    },
    /// Following replacements leads back to this record.
    Cycle {
        /// Every record on the cycle, starting at the smallest id.
        members: Vec<String>,
    },
}

/// Checks every edge; returns the first problem in record-id order.
pub(super) fn validate_edges(
    by_id: &BTreeMap<&str, &MemoryRecord>,
) -> Result<(), (String, SupersessionProblem)> {
    for (&id, record) in by_id {
        let MemoryStatus::Superseded { replacement_id } = &record.status else {
            continue;
        };
        let fail = |problem| Err((id.to_owned(), problem));
        if replacement_id == id {
            return fail(SupersessionProblem::SelfReference);
        }
        let Some(replacement) = by_id.get(replacement_id.as_str()) else {
            return fail(SupersessionProblem::UnknownReplacement {
                replacement_id: replacement_id.clone(),
            });
        };
        if replacement.tenant_id != record.tenant_id
            || replacement.kind != record.kind
            || replacement.subject != record.subject
        {
            return fail(SupersessionProblem::CrossSubject {
                replacement_id: replacement_id.clone(),
            });
        }
        if replacement.created_at_unix_ms < record.created_at_unix_ms {
            return fail(SupersessionProblem::OlderReplacement {
                replacement_id: replacement_id.clone(),
            });
        }
        if let Some(members) = cycle_from(id, by_id) {
            return fail(SupersessionProblem::Cycle { members });
        }
    }
    Ok(())
}

/// Walks replacement links from `start`; returns the cycle's members if the
/// walk comes back to `start`. Each record has at most one replacement, so
/// the walk is linear and ends at a non-superseded record, an unknown id, or
/// a repeat.
fn cycle_from(start: &str, by_id: &BTreeMap<&str, &MemoryRecord>) -> Option<Vec<String>> {
    let mut path = vec![start.to_owned()];
    let mut current = start;
    loop {
        let record = by_id.get(current)?;
        let MemoryStatus::Superseded { replacement_id } = &record.status else {
            return None;
        };
        if replacement_id == start {
            path.sort();
            return Some(path);
        }
        if path.iter().any(|seen| seen == replacement_id) {
            // A cycle that does not include `start`; reported from its own member.
            return None;
        }
        path.push(replacement_id.clone());
        current = replacement_id;
    }
}
