//! mem0's `filters` grammar translated to the recall's read filter: the
//! identifiers narrow the subject, metadata fields and `created_at` (with
//! mem0's operators, `AND` / `OR` / `NOT` and `*`) become conditions
//! applied inside eligibility, and a field there is no value for is
//! refused, never dropped.

use serde_json::Value;

use mosaic_service::error::{ServiceError, ServiceResult};

/// The fields of mem0's filter grammar this service has no value for,
/// each with the reason: a filter naming one is refused (400
/// `unsupported_filter`) rather than dropped, since dropping it would
/// answer more than was asked.
pub const UNSUPPORTED_FILTER_FIELDS: &[(&str, &str)] = &[
    ("app_id", "there are no apps: a key acts for one user"),
    (
        "updated_at",
        "a memory is never changed in place: an update is a new memory with its own created_at",
    ),
    ("categories", "no categories are inferred for a memory"),
    ("keywords", "no keywords are inferred for a memory"),
];

/// mem0's `filters`, translated: `user_id`, `agent_id` and `run_id` (at the
/// top level or under `AND`; `*` for any) fill `ids` and name whose memories
/// are read; every other condition becomes the server's read filter
/// (`mosaic_harness::filter`), which the read applies inside eligibility,
/// before ranking. A name other than `created_at`, `metadata` (an object of
/// metadata conditions, the platform's shape) and the unsupported ones is a
/// metadata field, as in mem0's open-source filters; `"*"` asks that the
/// field exists; `NOT` takes a filter or a list of them (none may hold);
/// the operators (`eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `in`, `nin`,
/// `contains`, `icontains`) keep their names. A malformed filter is 400
/// `invalid_filter`; a field this service cannot map is 400
/// `unsupported_filter`.
pub(crate) fn translate_filters(
    filters: &Value,
    ids: &mut [(&'static str, Option<String>); 3],
) -> ServiceResult<Option<Value>> {
    let mut parts = Vec::new();
    conditions(filters, true, ids, &mut parts)?;
    Ok(match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(serde_json::json!({ "AND": parts })),
    })
}

fn invalid_filter(message: impl Into<String>) -> ServiceError {
    ServiceError::bad_request("invalid_filter", message)
}

/// One mem0 filter object as a conjunction of the server's conditions
/// (pushed onto `parts`). `conjunctive` says whether the object holds for
/// the whole read (the top level, or under `AND` only), where the
/// identifiers may stand.
fn conditions(
    node: &Value,
    conjunctive: bool,
    ids: &mut [(&'static str, Option<String>); 3],
    parts: &mut Vec<Value>,
) -> ServiceResult<()> {
    let Value::Object(map) = node else {
        return Err(invalid_filter("filters is a JSON object (mem0's shape)"));
    };
    if map.is_empty() && !conjunctive {
        return Err(invalid_filter(
            "a filter under OR or NOT names at least one condition",
        ));
    }
    for (name, value) in map {
        match name.as_str() {
            "AND" | "OR" => {
                let Value::Array(items) = value else {
                    return Err(invalid_filter(format!("{name} takes a list of filters")));
                };
                if items.is_empty() {
                    return Err(invalid_filter(format!("{name} takes at least one filter")));
                }
                if name == "AND" {
                    for item in items {
                        conditions(item, conjunctive, ids, parts)?;
                    }
                } else {
                    let branches = items
                        .iter()
                        .map(|item| branch(item, ids))
                        .collect::<ServiceResult<Vec<Value>>>()?;
                    parts.push(serde_json::json!({ "OR": branches }));
                }
            }
            "NOT" => {
                let items = match value {
                    Value::Array(items) if !items.is_empty() => items.as_slice(),
                    Value::Object(_) => std::slice::from_ref(value),
                    _ => {
                        return Err(invalid_filter(
                            "NOT takes a filter or a non-empty list of filters",
                        ));
                    }
                };
                for item in items {
                    parts.push(serde_json::json!({ "NOT": branch(item, ids)? }));
                }
            }
            "user_id" | "agent_id" | "run_id" => {
                if !conjunctive {
                    return Err(ServiceError::bad_request(
                        "unsupported_filter",
                        format!(
                            "filters.{name} names whose memories are read: give it at the top \
                             level or under AND, not under OR or NOT"
                        ),
                    ));
                }
                let given = match value {
                    Value::String(any) if any == "*" => continue,
                    Value::String(given) => given,
                    _ => {
                        return Err(ServiceError::bad_request(
                            "unsupported_filter",
                            format!("filters.{name} takes one value (or \"*\")"),
                        ));
                    }
                };
                let slot = ids
                    .iter_mut()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v)
                    .ok_or_else(|| ServiceError::Internal("filter slot".into()))?;
                match slot {
                    Some(other) if other != given => {
                        return Err(ServiceError::bad_request(
                            "invalid_field",
                            format!("filters name {name} twice, with different values"),
                        ));
                    }
                    _ => *slot = Some(given.clone()),
                }
            }
            "metadata" => {
                let Value::Object(fields) = value else {
                    return Err(invalid_filter(
                        "filters.metadata is an object of metadata conditions",
                    ));
                };
                for (field, condition) in fields {
                    parts.push(metadata_condition(field, condition));
                }
            }
            "created_at" => parts.push(serde_json::json!({ "created_at": wildcard(value) })),
            field => {
                if let Some((_, why)) = UNSUPPORTED_FILTER_FIELDS.iter().find(|(f, _)| *f == field)
                {
                    return Err(ServiceError::bad_request(
                        "unsupported_filter",
                        format!("filters.{field} cannot be applied: {why}"),
                    ));
                }
                parts.push(metadata_condition(field, value));
            }
        }
    }
    Ok(())
}

/// A filter under `OR` or `NOT` as one condition of the server's filter.
fn branch(item: &Value, ids: &mut [(&'static str, Option<String>); 3]) -> ServiceResult<Value> {
    let mut parts = Vec::new();
    conditions(item, false, ids, &mut parts)?;
    Ok(match parts.len() {
        1 => parts.pop().unwrap_or_default(),
        _ => serde_json::json!({ "AND": parts }),
    })
}

/// mem0's `"*"` (any value) asks that the field exists.
fn wildcard(condition: &Value) -> Value {
    if condition == "*" {
        serde_json::json!({ "exists": true })
    } else {
        condition.clone()
    }
}

fn metadata_condition(field: &str, condition: &Value) -> Value {
    let mut one = serde_json::Map::new();
    one.insert(format!("metadata.{field}"), wildcard(condition));
    Value::Object(one)
}
