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
