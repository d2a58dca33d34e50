//! The tables' row types and the helpers that write their entries.

use schemars::SchemaGenerator;
use serde_json::{Value, json};

#[cfg(doc)]
use super::OPERATIONS;

/// One documented operation.
#[derive(Clone, Copy, Debug)]
pub struct Operation {
    /// HTTP method, upper case.
    pub method: &'static str,
    /// Path template (`{name}` for parameters).
    pub path: &'static str,
    /// One line.
    pub summary: &'static str,
    /// `none`, `principal`, `admin` or `any` key.
    pub auth: &'static str,
    /// Request body schema name, if the operation takes a JSON body.
    pub body: Option<&'static str>,
}

pub(super) const fn op(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    auth: &'static str,
    body: Option<&'static str>,
) -> Operation {
    Operation {
        method,
        path,
        summary,
        auth,
        body,
    }
}

/// Builds one component schema (and those it refers to) in the
/// generator; returns the reference to it.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Value;

pub(super) fn schema_of<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

pub(super) fn list_of<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<Vec<T>>().to_value()
}

pub(super) fn disabled_key(_: &mut SchemaGenerator) -> Value {
    json!({"type": "object", "required": ["key_id", "disabled"], "properties": {
        "key_id": {"type": "string"}, "disabled": {"type": "boolean"}}})
}

/// What an operation answers with on success.
#[derive(Clone, Copy)]
pub enum Answer {
    /// `application/json` of a Rust type's schema.
    Json(SchemaFn),
    /// `application/x-ndjson`: one export line per memory.
    JsonLines,
    /// Prometheus text exposition (`text/plain; version=0.0.4`).
    Metrics,
    /// This OpenAPI document.
    Document,
}

/// The types of one operation: its `operationId`, its request body's Rust
/// type (the body named in [`OPERATIONS`]) and its answer. A test checks
/// that this table and [`OPERATIONS`] name the same routes.
#[derive(Clone, Copy)]
pub struct Typed {
    /// HTTP method, upper case.
    pub method: &'static str,
    /// Path template.
    pub path: &'static str,
    /// A name code generators use for the operation.
    pub operation_id: &'static str,
    /// The JSON request body's schema.
    pub request: Option<SchemaFn>,
    /// The success answer.
    pub answer: Answer,
}

pub(super) const fn typed(
    method: &'static str,
    path: &'static str,
    operation_id: &'static str,
    request: Option<SchemaFn>,
    answer: Answer,
) -> Typed {
    Typed {
        method,
        path,
        operation_id,
        request,
        answer,
    }
}
