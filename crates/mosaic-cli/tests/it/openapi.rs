//! Point 3: the OpenAPI document matches the router exactly.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use mosaic_server::http::registered_routes;
use mosaic_server::openapi::{OPERATIONS, document};

use crate::common::{send, world};

#[test]
fn every_route_is_documented_and_every_documented_route_exists() {
    let documented: BTreeSet<(String, String)> = OPERATIONS
        .iter()
        .map(|o| (o.method.to_owned(), o.path.to_owned()))
        .collect();
    let routed: BTreeSet<(String, String)> = registered_routes().into_iter().collect();
    assert_eq!(documented, routed);
    let doc = document();
    assert_eq!(doc["openapi"], "3.0.3");
    let paths = doc["paths"].as_object().expect("paths");
    let in_doc: BTreeSet<(String, String)> = paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .expect("path item")
                .keys()
                .map(move |m| (m.to_ascii_uppercase(), path.clone()))
        })
        .collect();
    assert_eq!(in_doc, documented);
}

#[tokio::test]
async fn every_documented_operation_is_served_by_the_router() {
    let w = world();
    for op in OPERATIONS {
        let path: String = op
            .path
            .split('/')
            .map(|seg| if seg.starts_with('{') { "x" } else { seg })
            .collect::<Vec<_>>()
            .join("/");
        let (status, body) = send(&w.router, op.method, &path, Some(&w.admin_key), None).await;
        assert_ne!(
            status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{} {}",
            op.method,
            op.path
        );
        if status == StatusCode::NOT_FOUND {
            assert_ne!(
                body["error"]["message"], "route not found: no such path",
                "{} {} is not routed",
                op.method, op.path
            );
        }
        assert!(
            status.as_u16() < 500,
            "{} {}: {status} {body}",
            op.method,
            op.path
        );
    }
    let (status, doc) = send(&w.router, "GET", "/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc, document());
}

/// Every `$ref` in a JSON value.
fn refs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::String(r)) = map.get("$ref") {
                out.push(r.clone());
            }
            map.values().for_each(|v| refs(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_operation_is_typed_with_a_generator_friendly_id() {
    use mosaic_server::openapi::TYPED;
    let typed: BTreeSet<(String, String)> = TYPED
        .iter()
        .map(|t| (t.method.to_owned(), t.path.to_owned()))
        .collect();
    let documented: BTreeSet<(String, String)> = OPERATIONS
        .iter()
        .map(|o| (o.method.to_owned(), o.path.to_owned()))
        .collect();
    assert_eq!(
        typed, documented,
        "TYPED and OPERATIONS name the same routes"
    );
    assert_eq!(typed.len(), TYPED.len(), "one entry per route");
    let ids: BTreeSet<&str> = TYPED.iter().map(|t| t.operation_id).collect();
    assert_eq!(ids.len(), TYPED.len(), "operation ids are unique");
    for t in TYPED {
        let id = t.operation_id;
        assert!(
            id.starts_with(|c: char| c.is_ascii_lowercase())
                && id.chars().all(|c| c.is_ascii_alphanumeric()),
            "{id} is not an identifier a generator can use"
        );
        let op = OPERATIONS
            .iter()
            .find(|o| o.method == t.method && o.path == t.path)
            .expect("documented");
        // A JSON body has its Rust type (the import body is export lines).
        match op.body {
            Some("ExportLines") => assert!(t.request.is_none()),
            Some(_) => assert!(t.request.is_some(), "{} {} body untyped", t.method, t.path),
            None => assert!(t.request.is_none(), "{} {} takes no body", t.method, t.path),
        }
    }
}

#[test]
fn every_schema_is_generated_and_every_reference_resolves() {
    let doc = document();
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(found.len() > 50, "the document refers to its schemas");
    for r in &found {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{r} is not a component reference"));
        assert!(schemas.contains_key(name), "{r} does not resolve");
    }
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let content = op["responses"]["200"]["content"]
                .as_object()
                .expect("content");
            assert_eq!(content.len(), 1, "{method} {path}");
            let (media, body) = content.iter().next().expect("one media type");
            match path.as_str() {
                "/metrics" => assert_eq!(media, "text/plain; version=0.0.4"),
                "/v1/export" | "/v1/admin/tenants/{tenant_id}/export" => {
                    assert_eq!(media, "application/x-ndjson")
                }
                "/openapi.json" => assert_eq!(media, "application/json"),
                _ => {
                    assert_eq!(media, "application/json", "{method} {path}");
                    let schema = &body["schema"];
                    let typed = schema.get("$ref").is_some()
                        || schema["items"].get("$ref").is_some()
                        || schema["items"]["type"] == "string"
                        || schema.get("properties").is_some();
                    assert!(typed, "{method} {path} answers an untyped {schema}");
                }
            }
            for status in [
                "400", "401", "403", "404", "409", "413", "429", "500", "503",
            ] {
                assert_eq!(
                    op["responses"][status]["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorBody",
                    "{method} {path} {status}"
                );
            }
            if let Some(body) = op.get("requestBody") {
                let content = body["content"].as_object().expect("content");
                let (_, media) = content.iter().next().expect("one media type");
                assert!(
                    media["schema"].get("$ref").is_some() || media["schema"]["type"] == "string",
                    "{method} {path} takes an untyped body"
                );
            }
        }
    }
    // The list's query string is declared, from the type that decodes it.
    let list = &doc["paths"]["/v1/memories"]["get"]["parameters"];
    let names: BTreeSet<&str> = list
        .as_array()
        .expect("parameters")
        .iter()
        .map(|p| {
            assert_eq!(p["in"], "query");
            p["name"].as_str().expect("name")
        })
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "type",
            "principal_id",
            "workspace_id",
            "run_id",
            "filter",
            "procedure_id"
        ])
    );
    assert!(
        list.as_array()
            .expect("parameters")
            .iter()
            .any(|p| p["name"] == "type" && p["required"] == true)
    );
    // The schemas are the Rust types' own (doc comments become
    // descriptions; strict decoding forbids unknown members).
    let fact = &schemas["FactRequest"];
    assert_eq!(fact["additionalProperties"], false);
    assert_eq!(fact["required"], serde_json::json!(["content", "cites"]));
    assert!(fact["properties"]["cites"]["description"].is_string());
    let recall = &schemas["RecallResponse"];
    for field in [
        "context",
        "blocks",
        "selected_record_ids",
        "selection_receipt",
    ] {
        assert!(
            recall["properties"].get(field).is_some(),
            "RecallResponse.{field}"
        );
    }
    let judgment = &schemas["SignedSourceJudgment"];
    assert_eq!(
        judgment["properties"]["signature"]["$ref"],
        "#/components/schemas/EvidenceSignature"
    );
}
