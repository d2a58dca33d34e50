//! The document itself: assembled from the tables, with the query
//! parameters and error statuses every operation shares.

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use super::types::{Answer, SchemaFn, schema_of};
use super::{OPERATIONS, TYPED};
use mosaic_service::api as a;

fn parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

/// Query parameters of an operation: the fields of a Rust type decoded
/// from the query string.
pub const QUERIES: &[(&str, &str, SchemaFn)] = &[
    ("GET", "/v1/memories", schema_of::<a::ListQuery>),
    ("GET", "/v1/browse", schema_of::<a::BrowseQuery>),
    ("GET", "/v1/items", schema_of::<a::AddressQuery>),
    ("DELETE", "/v1/items", schema_of::<a::AddressQuery>),
    ("GET", "/v1/namespaces", schema_of::<a::NamespacesQuery>),
    (
        "GET",
        "/v1/memories/{record_id}/inclusion",
        schema_of::<a::InclusionQuery>,
    ),
    (
        "GET",
        "/v1/admin/audit/proof/inclusion",
        schema_of::<a::AuditInclusionQuery>,
    ),
    (
        "GET",
        "/v1/admin/audit/proof/consistency",
        schema_of::<a::AuditConsistencyQuery>,
    ),
    ("GET", "/memories", schema_of::<crate::mem0::Scope>),
    ("DELETE", "/memories", schema_of::<crate::mem0::Scope>),
];

/// The error statuses an operation may answer with, each with
/// [`mosaic_service::error::ErrorBody`].
pub const ERROR_STATUSES: &[(&str, &str)] = &[
    (
        "400",
        "Malformed request (`malformed_json`, `unknown_field`, `invalid_identifier`, ...)",
    ),
    (
        "401",
        "No key (`missing_key`) or an unknown one (`invalid_key`)",
    ),
    (
        "403",
        "The key may not do this (`tenant_mismatch`, `unverified_evidence`, ...)",
    ),
    (
        "404",
        "No such object, or not visible to this key (`not_found`)",
    ),
    (
        "409",
        "Conflicts with stored state (`stale_generation`, `message_id_in_use`, ...)",
    ),
    ("413", "Body over the limit (`body_too_large`)"),
    (
        "429",
        "Rate limit (`rate_limited`); `Retry-After` says in how many seconds to retry",
    ),
    ("500", "Internal failure (`internal`)"),
    (
        "503",
        "Unavailable backend (`unavailable`), timeout (`request_timeout`), or every pooled PostgreSQL read connection in use (`busy`, with `Retry-After`)",
    ),
];

/// Query parameters from a type's schema (resolved in the generator).
fn query_parameters(generator: &mut SchemaGenerator, schema: SchemaFn) -> Vec<Value> {
    let reference = schema(generator);
    let name = reference["$ref"]
        .as_str()
        .and_then(|r| r.rsplit('/').next())
        .unwrap_or_default()
        .to_owned();
    let resolved = generator
        .definitions()
        .get(&name)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = resolved["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    resolved["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .map(|(field, schema)| {
                    let mut schema = schema.clone();
                    let description = schema.as_object_mut().and_then(|o| {
                        // An absent parameter is the `None` of an optional
                        // field: no `null` type, no `null` default.
                        if o.get("default") == Some(&Value::Null) {
                            o.remove("default");
                        }
                        if let Some(Value::Array(types)) = o.get("type") {
                            let single = types.iter().find(|t| *t != "null").cloned();
                            if let Some(single) = single {
                                o.insert("type".to_owned(), single);
                            }
                        }
                        o.remove("description")
                    });
                    let mut parameter = json!({"name": field, "in": "query",
                        "required": required.contains(&field.as_str()), "schema": schema});
                    if let Some(d) = description {
                        parameter["description"] = d;
                    }
                    parameter
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The OpenAPI 3.0 document. Every schema is generated from the Rust
/// types the handlers decode and encode (`schemars`, OpenAPI 3.0
/// settings); the operations come from [`OPERATIONS`] and [`TYPED`].
pub fn document() -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let error = schema_of::<mosaic_service::error::ErrorBody>(&mut generator);
    let mut paths = serde_json::Map::new();
    for operation in OPERATIONS {
        let types = TYPED
            .iter()
            .find(|t| t.method == operation.method && t.path == operation.path);
        let operation_id = types.map_or_else(
            || format!("{} {}", operation.method, operation.path),
            |t| t.operation_id.to_owned(),
        );
        let ok = match types.map(|t| t.answer) {
            Some(Answer::Json(schema)) => {
                json!({"application/json": {"schema": schema(&mut generator)}})
            }
            Some(Answer::JsonLines) => {
                json!({"application/x-ndjson": {"schema": {"type": "string", "description": "One JSON object per line: {\"type\":\"memory\",\"data\":{record,state,request}}"}}})
            }
            Some(Answer::Metrics) => {
                json!({"text/plain; version=0.0.4": {"schema": {"type": "string"}}})
            }
            Some(Answer::Document) => {
                json!({"application/json": {"schema": {"type": "object", "description": "This OpenAPI 3.0 document"}}})
            }
            None => json!({"application/json": {"schema": {"type": "object"}}}),
        };
        let mut parameters = parameters(operation.path);
        for (_, _, query) in QUERIES
            .iter()
            .filter(|(m, p, _)| *m == operation.method && *p == operation.path)
        {
            parameters.extend(query_parameters(&mut generator, *query));
        }
        let mut responses = json!({"200": {"description": "Success", "content": ok}});
        for (status, description) in ERROR_STATUSES {
            responses[*status] = json!({"description": description,
                "content": {"application/json": {"schema": error.clone()}}});
        }
        responses["429"]["headers"] = json!({"Retry-After": {
            "description": "Whole seconds until the key's next request fits its rate",
            "schema": {"type": "integer", "minimum": 1}
        }});
        responses["503"]["headers"] = json!({"Retry-After": {
            "description": "With `busy`: whole seconds to wait before retrying",
            "schema": {"type": "integer", "minimum": 1}
        }});
        let mut item = json!({
            "summary": operation.summary,
            "operationId": operation_id,
            "parameters": parameters,
            "responses": responses,
            "x-mosaic-auth": operation.auth,
        });
        if operation.auth != "none" {
            item["security"] = json!([{"bearer": []}, {"apiKey": []}]);
        }
        if let Some(body) = operation.body {
            let (media, schema) = match types.and_then(|t| t.request) {
                Some(schema) => ("application/json", schema(&mut generator)),
                None if body == "ExportLines" => (
                    "application/x-ndjson",
                    json!({"type": "string", "description": "Export lines, as GET /v1/export answers"}),
                ),
                None => (
                    "application/json",
                    json!({"$ref": format!("#/components/schemas/{body}")}),
                ),
            };
            item["requestBody"] = json!({
                "required": body != "Empty" && body != "RevokeRequest",
                "content": {media: {"schema": schema}}
            });
        }
        let entry = paths
            .entry(operation.path.to_owned())
            .or_insert_with(|| json!({}));
        entry[operation.method.to_ascii_lowercase()] = item;
    }
    let mut schemas = Value::Object(generator.take_definitions(true));
    openapi30(&mut schemas);
    if let Some(code) = schemas.pointer_mut("/ErrorDetail/properties/code") {
        code["description"] = json!(
            "Stable machine-readable code: one of `x-error-codes` (docs/ERRORS.md lists each with its status and meaning)"
        );
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Mosaic Memory",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Governed long-term memory for LLM agents. Tenant and principal always come from the API key, never from the request body (an application key acts for the user its request names in the X-Mosaic-User header, within the key's bounds; any other key may name only its own principal there). Every error is {\"error\":{\"code\",\"message\"}} with a stable code."
        },
        "paths": paths,
        "x-error-codes": mosaic_service::error_codes::ERROR_CODES,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "mk_ followed by 64 hex digits (`Authorization: Token <key>` is taken too, as mem0's platform client sends it)"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "The same key in mem0's header; with `Authorization` too, both must name the same key"}
            },
            "schemas": schemas
        }
    })
}

/// Rewrites what JSON Schema allows but OpenAPI 3.0's schema object does
/// not: `patternProperties` (a map with integer keys) becomes
/// `additionalProperties`.
fn openapi30(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(patterns)) = map.remove("patternProperties") {
                let values: Vec<Value> = patterns.into_iter().map(|(_, v)| v).collect();
                let additional = match <[Value; 1]>::try_from(values) {
                    Ok([only]) => only,
                    Err(_) => json!({}),
                };
                map.insert("additionalProperties".to_owned(), additional);
            }
            map.values_mut().for_each(openapi30);
        }
        Value::Array(items) => items.iter_mut().for_each(openapi30),
        _ => {}
    }
}
