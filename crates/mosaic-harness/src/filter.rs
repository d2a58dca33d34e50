//! Read filters: a condition on a record's metadata, address, kind,
//! creation instant and subject that a read binds into its read context.
//! The selector decides it with eligibility, so a filter restricts the
//! eligible set before any ranking, and the selection receipt commits to it
//! through the read context's digest.
//!
//! The JSON shape follows mem0's filters:
//!
//! - `{"AND": [f, ...]}`, `{"OR": [f, ...]}`, `{"NOT": f}`;
//! - otherwise an object of fields, all of which must hold, each mapped to
//!   a value (equality) or to an object of operators: `eq`, `ne`, `gt`,
//!   `gte`, `lt`, `lte` (integers with integers, strings with strings),
//!   `in`, `nin` (an array of values), `contains` (a string within a
//!   string, or a value among an array's items), `icontains` (the same,
//!   comparing strings case-insensitively), `exists` (`true`: the record
//!   has the field; `false`: it has not), and for `namespace` only
//!   `prefix` (whole segments: `a/b` is a prefix of `a/b` and `a/b/c`, not
//!   of `a/bc`). Operators may be written with a leading `$`.
//!
//! Fields: `created_at` (Unix milliseconds; a string operand is an
//! instant: a UTC day `YYYY-MM-DD`, its first millisecond, or an RFC 3339
//! date-time `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`), `kind`, `namespace` (segments
//! joined by `/`), `key`, `user_id` (the subject's principal), `run_id`
//! (the subject's run), `workspace_id` (the subject's workspace),
//! `conversation_id` (a conversation one of the record's sources is a
//! captured message of: a record cited from several conversations has
//! several values, and a condition holds if it holds for one of them, `ne`
//! and `nin` if they hold for all), and `metadata.NAME` or any other name:
//! the metadata member `NAME`. A record without the field matches only
//! `ne`, `nin` and `exists: false`.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::canonical_json;
use crate::record::{MemoryRecord, message_conversation};

/// Most canonical bytes a filter may take.
pub const MAX_FILTER_BYTES: usize = 4096;
/// Deepest nesting of `AND` / `OR` / `NOT`.
pub const MAX_FILTER_DEPTH: usize = 8;
/// Most conditions (field operators) one filter may hold.
pub const MAX_FILTER_CONDITIONS: usize = 64;

/// A checked read filter (see the module documentation).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(transparent)]
pub struct ReadFilter(pub Value);

impl std::hash::Hash for ReadFilter {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        serde_json::to_string(&self.0)
            .unwrap_or_default()
            .hash(state);
    }
}

const OPERATORS: [&str; 12] = [
    "eq",
    "ne",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "nin",
    "contains",
    "icontains",
    "exists",
    "prefix",
];

impl ReadFilter {
    /// The first problem of the filter's shape or size, named, or `Ok`.
    pub fn check(&self) -> Result<(), String> {
        let bytes = canonical_json(&self.0).map_err(|e| {
            format!("a filter holds integers of magnitude at most 2^53-1 and no fractions ({e})")
        })?;
        if bytes.len() > MAX_FILTER_BYTES {
            return Err(format!(
                "a filter takes at most {MAX_FILTER_BYTES} canonical bytes"
            ));
        }
        let mut conditions = 0;
        check_node(&self.0, 1, &mut conditions)?;
        if conditions > MAX_FILTER_CONDITIONS {
            return Err(format!(
                "a filter holds at most {MAX_FILTER_CONDITIONS} conditions"
            ));
        }
        Ok(())
    }

    /// Whether `record` satisfies the filter. A filter that fails
    /// [`ReadFilter::check`] matches nothing.
    pub fn matches(&self, record: &MemoryRecord) -> bool {
        node_matches(&self.0, record)
    }
}

fn check_node(node: &Value, depth: usize, conditions: &mut usize) -> Result<(), String> {
    if depth > MAX_FILTER_DEPTH {
        return Err(format!(
            "a filter nests AND / OR / NOT at most {MAX_FILTER_DEPTH} deep"
        ));
    }
    let Value::Object(members) = node else {
        return Err("a filter is a JSON object".into());
    };
    if members.is_empty() {
        return Err("a filter names at least one field or AND / OR / NOT".into());
    }
    for (name, value) in members {
        match name.as_str() {
            "AND" | "OR" => {
                let Value::Array(items) = value else {
                    return Err(format!("{name} takes an array of filters"));
                };
                if items.is_empty() {
                    return Err(format!("{name} takes at least one filter"));
                }
                for item in items {
                    check_node(item, depth + 1, conditions)?;
                }
            }
            "NOT" => check_node(value, depth + 1, conditions)?,
            field => check_condition(field, value, conditions)?,
        }
    }
    Ok(())
}

fn operator(name: &str) -> Option<&str> {
    let bare = name.strip_prefix('$').unwrap_or(name);
    OPERATORS.contains(&bare).then_some(bare)
}

fn check_condition(field: &str, value: &Value, conditions: &mut usize) -> Result<(), String> {
    if field.is_empty() || field == "metadata." {
        return Err("a filter field name is not empty".into());
    }
    if field == "created_at" {
        check_instants(value)?;
    }
    let Value::Object(ops) = value else {
        *conditions += 1;
        return Ok(());
    };
    if ops.is_empty() {
        return Err(format!(
            "{field}: an operator object names at least one operator"
        ));
    }
    for (name, operand) in ops {
        *conditions += 1;
        let Some(op) = operator(name) else {
            return Err(format!(
                "{field}: unknown operator {name:?} (eq, ne, gt, gte, lt, lte, in, nin, \
                 contains, icontains, exists, prefix)"
            ));
        };
        match op {
            "in" | "nin" if !operand.is_array() => {
                return Err(format!("{field}: {op} takes an array"));
            }
            "gt" | "gte" | "lt" | "lte"
                if !(operand.is_i64() || operand.is_u64() || operand.is_string()) =>
            {
                return Err(format!("{field}: {op} takes an integer or a string"));
            }
            "icontains" if !operand.is_string() => {
                return Err(format!("{field}: icontains takes a string"));
            }
            "exists" if !operand.is_boolean() => {
                return Err(format!("{field}: exists takes true or false"));
            }
            "prefix" if field != "namespace" || !operand.is_string() => {
                return Err(format!(
                    "{field}: prefix applies to namespace, with a string"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every string in a `created_at` condition (its value, an operator's
/// operand, an item of `in` / `nin`) is an instant [`instant_ms`] reads.
fn check_instants(value: &Value) -> Result<(), String> {
    match value {
        Value::String(text) if instant_ms(text).is_none() => Err(format!(
            "created_at: {text:?} is not a day YYYY-MM-DD or an RFC 3339 date-time"
        )),
        Value::Array(items) => items.iter().try_for_each(check_instants),
        Value::Object(ops) => ops.values().try_for_each(check_instants),
        _ => Ok(()),
    }
}

/// A `created_at` operand as Unix milliseconds: an instant string becomes
/// its number (items of an array too); anything else stays as given.
fn instant_operand(value: &Value) -> Value {
    match value {
        Value::String(text) => instant_ms(text).map_or_else(|| value.clone(), Value::from),
        Value::Array(items) => Value::Array(items.iter().map(instant_operand).collect()),
        other => other.clone(),
    }
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's
/// `days_from_civil`), for a valid date from 1970 on.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> Option<i64> {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if !(1..=days_in_month).contains(&day) || !(1970..=9999).contains(&year) {
        return None;
    }
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// Unix milliseconds of `YYYY-MM-DD` (the day's first millisecond, UTC)
/// or of an RFC 3339 date-time `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)` (`t`
/// and `z` too, a space for `T`). `None` for anything else or an instant
/// before 1970.
pub fn instant_ms(text: &str) -> Option<u64> {
    let digits = |s: &str| -> Option<i64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let date = text.get(..10)?;
    let (y, m, d) = (date.get(..4)?, date.get(5..7)?, date.get(8..10)?);
    if date.as_bytes()[4] != b'-' || date.as_bytes()[7] != b'-' {
        return None;
    }
    let days = days_from_civil(digits(y)?, digits(m)?, digits(d)?)?;
    let rest = &text[10..];
    let mut ms = days.checked_mul(86_400_000)?;
    if !rest.is_empty() {
        let rest = rest
            .strip_prefix('T')
            .or_else(|| rest.strip_prefix('t'))
            .or_else(|| rest.strip_prefix(' '))?;
        let time = rest.get(..8)?;
        let b = time.as_bytes();
        if b[2] != b':' || b[5] != b':' {
            return None;
        }
        let (h, mi, s) = (
            digits(&time[..2])?,
            digits(&time[3..5])?,
            digits(&time[6..8])?,
        );
        if h > 23 || mi > 59 || s > 60 {
            return None;
        }
        let mut zone = &rest[8..];
        let mut millis = 0;
        if let Some(fraction) = zone.strip_prefix('.') {
            let end = fraction
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(fraction.len());
            if end == 0 {
                return None;
            }
            let first3 = format!("{:0<3}", &fraction[..end.min(3)]);
            millis = digits(&first3)?;
            zone = &fraction[end..];
        }
        let offset_min = match zone {
            "Z" | "z" => 0,
            _ => {
                let sign = match zone.as_bytes().first()? {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                let b = zone.as_bytes();
                if zone.len() != 6 || b[3] != b':' {
                    return None;
                }
                let (oh, om) = (digits(zone.get(1..3)?)?, digits(zone.get(4..6)?)?);
                if oh > 23 || om > 59 {
                    return None;
                }
                sign * (oh * 60 + om)
            }
        };
        ms = ms.checked_add(((h * 60 + mi - offset_min) * 60 + s) * 1000 + millis)?;
    }
    u64::try_from(ms).ok()
}

fn node_matches(node: &Value, record: &MemoryRecord) -> bool {
    let Value::Object(members) = node else {
        return false;
    };
    !members.is_empty()
        && members.iter().all(|(name, value)| match name.as_str() {
            "AND" => value
                .as_array()
                .is_some_and(|items| items.iter().all(|f| node_matches(f, record))),
            "OR" => value
                .as_array()
                .is_some_and(|items| items.iter().any(|f| node_matches(f, record))),
            "NOT" => !node_matches(value, record),
            field => condition_matches(field, value, record),
        })
}

/// The record's value of `field`, if it has one.
fn field_value(field: &str, record: &MemoryRecord) -> Option<Value> {
    match field {
        "created_at" => Some(Value::from(record.created_at_unix_ms)),
        "kind" => Some(Value::from(record.kind.as_str())),
        "namespace" => record
            .address
            .as_ref()
            .map(|a| Value::from(a.namespace_path())),
        "key" => record.address.as_ref().map(|a| Value::from(a.key.as_str())),
        "user_id" => record.subject.principal_id().map(Value::from),
        "run_id" => record.subject.run_id().map(Value::from),
        "workspace_id" => record.subject.workspace_id().map(Value::from),
        other => {
            let name = other.strip_prefix("metadata.").unwrap_or(other);
            record.metadata.as_ref()?.0.get(name).cloned()
        }
    }
}

fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(a), Some(b)) => Some(a.cmp(&b)),
            _ => match (a.as_u64(), b.as_u64()) {
                (Some(a), Some(b)) => Some(a.cmp(&b)),
                _ => None,
            },
        },
        _ => None,
    }
}

fn condition_matches(field: &str, condition: &Value, record: &MemoryRecord) -> bool {
    if field == "conversation_id" {
        return conversation_matches(condition, record);
    }
    let found = field_value(field, record);
    if field != "created_at" {
        return decide(found, condition);
    }
    // Instants given as strings compare as the milliseconds they name.
    let condition = match condition {
        Value::Object(ops) => Value::Object(
            ops.iter()
                .map(|(op, operand)| (op.clone(), instant_operand(operand)))
                .collect(),
        ),
        other => instant_operand(other),
    };
    decide(found, &condition)
}

/// A `conversation_id` condition: each operator holds for one of the
/// record's conversations (`ne` and `nin` for all of them).
fn conversation_matches(condition: &Value, record: &MemoryRecord) -> bool {
    let mut conversations: Vec<Value> = record
        .sources
        .iter()
        .filter_map(|s| message_conversation(&s.source_id))
        .map(Value::from)
        .collect();
    conversations.dedup();
    if conversations.is_empty() {
        return decide(None, condition);
    }
    let Value::Object(ops) = condition else {
        return conversations.contains(condition);
    };
    !ops.is_empty()
        && ops.iter().all(|(name, operand)| {
            let one = Value::Object([(name.clone(), operand.clone())].into_iter().collect());
            let holds = |c: &Value| decide(Some(c.clone()), &one);
            if matches!(operator(name), Some("ne" | "nin")) {
                conversations.iter().all(holds)
            } else {
                conversations.iter().any(holds)
            }
        })
}

fn decide(found: Option<Value>, condition: &Value) -> bool {
    let Value::Object(ops) = condition else {
        return found.as_ref() == Some(condition);
    };
    !ops.is_empty()
        && ops.iter().all(|(name, operand)| {
            let Some(op) = operator(name) else {
                return false;
            };
            let Some(found) = found.as_ref() else {
                return matches!(op, "ne" | "nin") || (op == "exists" && operand == false);
            };
            match op {
                "exists" => operand == true,
                "contains" => match found {
                    Value::String(text) => operand.as_str().is_some_and(|part| text.contains(part)),
                    Value::Array(items) => items.contains(operand),
                    _ => false,
                },
                "icontains" => {
                    let Some(part) = operand.as_str().map(str::to_lowercase) else {
                        return false;
                    };
                    match found {
                        Value::String(text) => text.to_lowercase().contains(&part),
                        Value::Array(items) => items
                            .iter()
                            .any(|item| item.as_str().is_some_and(|s| s.to_lowercase() == part)),
                        _ => false,
                    }
                }
                "eq" => found == operand,
                "ne" => found != operand,
                "gt" => order(found, operand) == Some(Ordering::Greater),
                "gte" => matches!(
                    order(found, operand),
                    Some(Ordering::Greater | Ordering::Equal)
                ),
                "lt" => order(found, operand) == Some(Ordering::Less),
                "lte" => matches!(
                    order(found, operand),
                    Some(Ordering::Less | Ordering::Equal)
                ),
                "in" => operand
                    .as_array()
                    .is_some_and(|items| items.contains(found)),
                "nin" => operand
                    .as_array()
                    .is_some_and(|items| !items.contains(found)),
                "prefix" => match (found.as_str(), operand.as_str()) {
                    (Some(path), Some(prefix)) => {
                        path == prefix
                            || path
                                .strip_prefix(prefix)
                                .is_some_and(|rest| rest.starts_with('/'))
                    }
                    _ => false,
                },
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::record;
    use crate::record::{MemoryAddress, MemoryKind, MemorySubject, message_source_id};
    use serde_json::json;

    fn rec() -> MemoryRecord {
        let mut r = record(
            "r1",
            MemoryKind::Semantic,
            MemorySubject::Principal {
                principal_id: "alice".into(),
            },
        );
        r.metadata = Some(
            serde_json::from_value(json!({
                "team": "infra",
                "priority": 3,
                "tags": "ops",
                "labels": ["red", "blue"]
            }))
            .unwrap(),
        );
        r.address = Some(MemoryAddress {
            namespace: vec!["notes".into(), "office".into()],
            key: "k1".into(),
        });
        r
    }

    fn f(v: Value) -> ReadFilter {
        let filter = ReadFilter(v);
        filter.check().unwrap();
        filter
    }

    #[test]
    fn filter_conditions_decide_as_documented() {
        let r = rec();
        let mut plain = r.clone();
        plain.metadata = None;
        plain.address = None;
        for (filter, on_record, on_plain) in [
            (json!({"team": "infra"}), true, false),
            (json!({"metadata.team": {"eq": "infra"}}), true, false),
            (json!({"team": {"ne": "infra"}}), false, true),
            (json!({"priority": {"gte": 3, "lt": 5}}), true, false),
            (json!({"priority": {"$gt": 3}}), false, false),
            (json!({"team": {"in": ["infra", "web"]}}), true, false),
            (json!({"team": {"nin": ["infra"]}}), false, true),
            (
                json!({"created_at": {"gte": 1000, "lte": 1000}}),
                true,
                true,
            ),
            (json!({"kind": "semantic", "user_id": "alice"}), true, true),
            (json!({"namespace": {"prefix": "notes"}}), true, false),
            (
                json!({"namespace": {"prefix": "notes/office"}}),
                true,
                false,
            ),
            (json!({"namespace": {"prefix": "note"}}), false, false),
            (json!({"key": "k1"}), true, false),
            (json!({"OR": [{"team": "web"}, {"key": "k1"}]}), true, false),
            (
                json!({"AND": [{"team": "infra"}, {"key": "k2"}]}),
                false,
                false,
            ),
            (json!({"NOT": {"team": "infra"}}), false, true),
            (json!({"priority": {"gt": "a"}}), false, false),
            (json!({"team": {"contains": "nfr"}}), true, false),
            (json!({"team": {"contains": "NFR"}}), false, false),
            (json!({"team": {"icontains": "NFR"}}), true, false),
            (json!({"labels": {"contains": "blue"}}), true, false),
            (json!({"labels": {"icontains": "RED"}}), true, false),
            (json!({"labels": {"contains": "re"}}), false, false),
            (json!({"priority": {"contains": 3}}), false, false),
            (json!({"team": {"exists": true}}), true, false),
            (json!({"team": {"exists": false}}), false, true),
            (json!({"namespace": {"exists": true}}), true, false),
            // The fixture's record was created at 1000 ms.
            (json!({"created_at": {"gte": "1970-01-01"}}), true, true),
            (
                json!({"created_at": {"gt": "1970-01-01T00:00:01Z"}}),
                false,
                false,
            ),
            (
                json!({"created_at": "1970-01-01T00:00:01.000Z"}),
                true,
                true,
            ),
            (
                json!({"created_at": {"in": ["1970-01-01T01:00:01+01:00"]}}),
                true,
                true,
            ),
            (json!({"created_at": {"lt": "1970-01-02"}}), true, true),
        ] {
            let filter = f(filter.clone());
            assert_eq!(
                filter.matches(&r),
                on_record,
                "{:?} on the record",
                filter.0
            );
            assert_eq!(
                filter.matches(&plain),
                on_plain,
                "{:?} on a plain record",
                filter.0
            );
        }
    }

    #[test]
    fn conversation_id_names_the_conversations_a_record_was_captured_in() {
        let mut two = rec();
        two.sources[0].source_id = message_source_id("chat-1", "m1");
        let mut other = two.sources[0].clone();
        other.source_id = message_source_id("chat-2", "m7");
        two.sources.push(other);
        let mut one = rec();
        one.sources[0].source_id = message_source_id("chat-1", "m2");
        // The fixture's own source is no captured message.
        let none = rec();
        for (filter, on_two, on_one, on_none) in [
            (json!({"conversation_id": "chat-2"}), true, false, false),
            (json!({"conversation_id": "chat-1"}), true, true, false),
            (json!({"conversation_id": "chat"}), false, false, false),
            (
                json!({"conversation_id": {"ne": "chat-2"}}),
                false,
                true,
                true,
            ),
            (
                json!({"conversation_id": {"in": ["x", "chat-2"]}}),
                true,
                false,
                false,
            ),
            (
                json!({"conversation_id": {"nin": ["chat-2"]}}),
                false,
                true,
                true,
            ),
            (
                json!({"conversation_id": {"exists": true}}),
                true,
                true,
                false,
            ),
            (
                json!({"conversation_id": {"exists": false}}),
                false,
                false,
                true,
            ),
            (
                json!({"NOT": {"conversation_id": "chat-1"}}),
                false,
                false,
                true,
            ),
            // Metadata of that name is reached by its prefix.
            (
                json!({"metadata.conversation_id": "chat-1"}),
                false,
                false,
                false,
            ),
        ] {
            let filter = f(filter);
            assert_eq!(filter.matches(&two), on_two, "{:?} on two", filter.0);
            assert_eq!(filter.matches(&one), on_one, "{:?} on one", filter.0);
            assert_eq!(filter.matches(&none), on_none, "{:?} on none", filter.0);
        }
        assert_eq!(message_conversation("msg:a.b:c/m-1"), Some("a.b:c"));
        assert_eq!(message_conversation("stmt:a/m-1"), None);
        assert_eq!(message_conversation("msg:no-message"), None);
    }

    #[test]
    fn instants_read_as_documented() {
        for (text, ms) in [
            ("1970-01-01", Some(0)),
            ("2024-07-01", Some(1_719_792_000_000)),
            ("2024-02-29", Some(1_709_164_800_000)),
            ("2024-07-01T12:30:00Z", Some(1_719_837_000_000)),
            ("2024-07-01t12:30:00.5z", Some(1_719_837_000_500)),
            ("2024-07-01 12:30:00.123456+02:00", Some(1_719_829_800_123)),
            ("2024-07-01T12:30:00-00:30", Some(1_719_838_800_000)),
            ("2023-02-29", None),
            ("1969-12-31", None),
            ("2024-07-01T12:30Z", None),
            ("2024-07-01T12:30:00", None),
            ("2024-07-01T12:30:00.Z", None),
            ("2024-07-01T12:30:00+2:00", None),
            ("2024-7-01", None),
            ("2024-07-01x", None),
            ("2024-07-01T12:30:00+é:00", None),
            ("", None),
        ] {
            assert_eq!(instant_ms(text), ms, "{text}");
        }
    }

    #[test]
    fn filter_shapes_and_limits_are_named() {
        for (bad, named) in [
            (json!([]), "JSON object"),
            (json!({}), "at least one"),
            (json!({"AND": {}}), "array"),
            (json!({"team": {"like": "x"}}), "unknown operator"),
            (json!({"team": {"in": "x"}}), "array"),
            (json!({"team": {"gt": true}}), "integer or a string"),
            (json!({"team": {"prefix": "x"}}), "namespace"),
            (
                json!({"team": {"icontains": 1}}),
                "icontains takes a string",
            ),
            (json!({"team": {"exists": "yes"}}), "true or false"),
            (json!({"created_at": {"gte": "yesterday"}}), "YYYY-MM-DD"),
            (json!({"created_at": {"in": ["2024-02-30"]}}), "RFC 3339"),
            (json!({"created_at": "2024-01-01T25:00:00Z"}), "RFC 3339"),
            (json!({"score": 0.5}), "no fractions"),
            (json!({"big": "x".repeat(MAX_FILTER_BYTES)}), "4096"),
        ] {
            let err = ReadFilter(bad.clone()).check().unwrap_err();
            assert!(err.contains(named), "{bad}: {err}");
        }
        let mut deep = json!({"team": "infra"});
        for _ in 0..MAX_FILTER_DEPTH {
            deep = json!({ "NOT": deep });
        }
        assert!(ReadFilter(deep).check().unwrap_err().contains("deep"));
        let many: serde_json::Map<String, Value> = (0..=MAX_FILTER_CONDITIONS)
            .map(|i| (format!("f{i}"), json!(i)))
            .collect();
        assert!(
            ReadFilter(Value::Object(many))
                .check()
                .unwrap_err()
                .contains("conditions")
        );
    }
}
