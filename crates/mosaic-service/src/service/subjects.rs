//! Subjects named by text: a subject key, and the subject fields of a
//! list query.

use super::*;

/// Inverse of `MemorySubject::key()`.
pub fn parse_subject_key(key: &str) -> Option<MemorySubject> {
    let (kind, rest) = key.split_once(':')?;
    let two = || {
        rest.split_once('/')
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    };
    Some(match kind {
        "run" => MemorySubject::Run {
            run_id: rest.to_owned(),
        },
        "principal" => MemorySubject::Principal {
            principal_id: rest.to_owned(),
        },
        "principal_in_workspace" => {
            let (workspace_id, principal_id) = two()?;
            MemorySubject::PrincipalInWorkspace {
                workspace_id,
                principal_id,
            }
        }
        "workspace" => MemorySubject::Workspace {
            workspace_id: rest.to_owned(),
        },
        "procedure" => {
            let (workspace_id, procedure_id) = two()?;
            MemorySubject::Procedure {
                workspace_id,
                procedure_id,
            }
        }
        _ => return None,
    })
}

pub(super) fn subject_from_query(q: &ListQuery) -> ServiceResult<MemorySubject> {
    let need = |field: &'static str, v: &Option<String>| {
        v.clone().ok_or_else(|| {
            ServiceError::bad_request(
                "invalid_subject",
                format!("subject type {} needs {field}", q.subject_type),
            )
        })
    };
    Ok(match q.subject_type.as_str() {
        "run" => MemorySubject::Run {
            run_id: need("run_id", &q.run_id)?,
        },
        "principal" => MemorySubject::Principal {
            principal_id: need("principal_id", &q.principal_id)?,
        },
        "principal_in_workspace" => MemorySubject::PrincipalInWorkspace {
            workspace_id: need("workspace_id", &q.workspace_id)?,
            principal_id: need("principal_id", &q.principal_id)?,
        },
        "workspace" => MemorySubject::Workspace {
            workspace_id: need("workspace_id", &q.workspace_id)?,
        },
        "procedure" => MemorySubject::Procedure {
            workspace_id: need("workspace_id", &q.workspace_id)?,
            procedure_id: need("procedure_id", &q.procedure_id)?,
        },
        other => {
            return Err(ServiceError::bad_request(
                "invalid_subject",
                format!("unknown subject type {other:?}"),
            ));
        }
    })
}
