//! The store, not the server catalog, says which records exist: a record
//! committed to the store whose catalog row never got written (a crash
//! between the store commit and the catalog write) is still listed,
//! exported and erased.

use axum::http::StatusCode;
use mosaic_server::examples::workspace_fact;
use serde_json::{Value, json};

use crate::common::{WORKSPACE, send, send_raw, world};

fn listed(body: &Value) -> Vec<(String, String)> {
    body.as_array()
        .unwrap_or_else(|| panic!("not a list: {body}"))
        .iter()
        .map(|e| {
            (
                e["record_id"].as_str().unwrap_or("").to_owned(),
                e["state"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_record_missing_from_the_catalog_is_listed_exported_and_erased() {
    let w = world();
    let alice = &w.principals[0];
    let request = workspace_fact("crash-window", WORKSPACE, "The deploy key rotates monthly");
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(serde_json::to_value(&request).expect("json")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["decision"], "accepted", "{r}");
    let record_id = r["record_id"].as_str().expect("record id").to_owned();

    // The crash window: the store committed, the catalog row is gone.
    let catalog = rusqlite::Connection::open(w._dir.path().join("data").join("catalog.sqlite"))
        .expect("open catalog");
    let deleted = catalog
        .execute("DELETE FROM memories WHERE record_id = ?1", [&record_id])
        .expect("delete catalog row");
    assert_eq!(deleted, 1, "the catalog had the row before");

    // Listed by subject, readable by id.
    let list_path = format!("/v1/memories?type=workspace&workspace_id={WORKSPACE}");
    let (status, list) = send(&w.router, "GET", &list_path, Some(&alice.key), None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(
        listed(&list),
        vec![(record_id.clone(), "active".to_owned())]
    );
    let (status, got) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["content"], "The deploy key rotates monthly");

    // Exported with its content; the request is rebuilt from the record.
    let (status, raw, _) = send_raw(&w.router, "GET", "/v1/export", Some(&alice.key), None).await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<Value> = String::from_utf8(raw)
        .expect("utf8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("export line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let data = &lines[0]["data"];
    assert_eq!(data["record"]["record_id"], record_id.as_str());
    assert_eq!(data["request"]["content"], "The deploy key rotates monthly");
    assert_eq!(
        data["request"]["subject"],
        json!({"type": "workspace", "workspace_id": WORKSPACE})
    );
    let (status, raw, _) = send_raw(
        &w.router,
        "GET",
        "/v1/admin/tenants/tenant-a/export",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        String::from_utf8(raw).expect("utf8").contains(&record_id),
        "the admin export lists it too"
    );

    // Erased with alice, to a deletion receipt.
    let (status, erased) = send(
        &w.router,
        "POST",
        "/v1/admin/tenants/tenant-a/principals/alice/erase",
        Some(&w.admin_key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["complete"], true, "{erased}");
    let revoked: Vec<&str> = erased["revocations"]
        .as_array()
        .expect("revocations")
        .iter()
        .filter_map(|r| r["record_id"].as_str())
        .collect();
    assert_eq!(revoked, vec![record_id.as_str()], "{erased}");
    assert!(erased["revocations"][0]["deletion_receipt"].is_object());

    // The store keeps the identity: bob (same workspace) sees it erased,
    // and the admin still reads its deletion receipt.
    let bob = &w.principals[1];
    let (status, list) = send(&w.router, "GET", &list_path, Some(&bob.key), None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(
        listed(&list),
        vec![(record_id.clone(), "erased".to_owned())]
    );
    let (status, deletion) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}/deletion"),
        Some(&bob.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{deletion}");
    assert_eq!(deletion["stage"], "finalized", "{deletion}");
}

#[tokio::test]
async fn a_record_of_another_tenant_stays_invisible_by_id() {
    let w = world();
    let alice = &w.principals[0];
    let other = &w.principals[2];
    let request = workspace_fact("tenant-a-only", WORKSPACE, "Tenant A's build runs nightly");
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(serde_json::to_value(&request).expect("json")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let record_id = r["record_id"].as_str().expect("record id").to_owned();
    for path in [
        format!("/v1/memories/{record_id}"),
        format!("/v1/memories/{record_id}/deletion"),
    ] {
        let (status, body) = send(&w.router, "GET", &path, Some(&other.key), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }
    let (status, body) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}"),
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the admin finds it through the store: {body}"
    );
}
