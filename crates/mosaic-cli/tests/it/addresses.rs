//! Memory that applications address: metadata carried and returned, writes
//! to an application address `(namespace, key)` superseding its current
//! record, the text guards left to unaddressed memory, and reads by
//! address that never cross a principal, subject or tenant.

use axum::http::StatusCode;
use mosaic_service::api::ProposeRequest;
use serde_json::{Value, json};

use crate::common::{WORKSPACE, World, error_code, send, world};

async fn propose(w: &World, key: &str, request: &ProposeRequest) -> (StatusCode, Value) {
    let body = serde_json::to_value(request).expect("json");
    send(&w.router, "POST", "/v1/memories", Some(key), Some(body)).await
}

/// A workspace fact at `(namespace, key)` with `metadata`.
fn addressed(
    label: &str,
    text: &str,
    namespace: &[&str],
    key: &str,
    metadata: Value,
) -> ProposeRequest {
    let mut request = mosaic_service::examples::workspace_fact(label, WORKSPACE, text);
    request.namespace = Some(namespace.iter().map(|s| (*s).to_owned()).collect());
    request.key = Some(key.to_owned());
    request.metadata = Some(serde_json::from_value(metadata).expect("metadata object"));
    request
}

fn violations(response: &Value) -> Vec<String> {
    response["violations"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v["violation"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn item(w: &World, key: &str, query: &str) -> (StatusCode, Value) {
    send(
        &w.router,
        "GET",
        &format!("/v1/items?{query}"),
        Some(key),
        None,
    )
    .await
}

/// The template of a keyed note store: texts the text guard finds
/// near-identical.
fn templated(i: usize) -> String {
    format!("Reminder note {i}: water the office plants on Friday before leaving.")
}

#[tokio::test]
async fn templated_notes_under_distinct_keys_are_distinct_items_and_unaddressed_repeats_stay_guarded()
 {
    templated_notes_under_distinct_keys_are_distinct_items_and_unaddressed_repeats_stay_guarded_on(
        &world(),
    )
    .await;
}

pub(crate) async fn templated_notes_under_distinct_keys_are_distinct_items_and_unaddressed_repeats_stay_guarded_on(
    w: &World,
) {
    let alice = &w.principals[0];
    for i in 0..12 {
        let request = addressed(
            &format!("note-{i}"),
            &templated(i),
            &["notes", "office"],
            &format!("note-{i}"),
            json!({"n": i}),
        );
        let (status, body) = propose(w, &alice.key, &request).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["decision"], "accepted", "note {i}: {body}");
        assert_eq!(
            body["line_generation"], 1,
            "a new key starts a line: {body}"
        );
    }
    // The same template without an address: the text guard (the layer that
    // protects unaddressed memory) still refuses the near-duplicate.
    let plain = |i: usize| {
        mosaic_service::examples::workspace_fact(&format!("plain-{i}"), WORKSPACE, &templated(i))
    };
    let (_, first) = propose(w, &alice.key, &plain(100)).await;
    assert_eq!(first["decision"], "rejected", "{first}");
    let found = violations(&first);
    assert!(
        !found.is_empty() && found.iter().all(|v| v == "duplicate_memory"),
        "{first}"
    );
    assert_eq!(
        first["server_conflicts"][0]["detector_release"], "mosaic.text-guard.v1",
        "{first}"
    );
}

#[tokio::test]
async fn a_write_to_an_address_supersedes_its_current_record_through_the_gate() {
    a_write_to_an_address_supersedes_its_current_record_through_the_gate_on(&world()).await;
}

pub(crate) async fn a_write_to_an_address_supersedes_its_current_record_through_the_gate_on(
    w: &World,
) {
    let alice = &w.principals[0];
    let at = ["prefs", "ui"];
    let (_, v1) = propose(
        w,
        &alice.key,
        &addressed(
            "theme-1",
            "The team theme is dark.",
            &at,
            "theme",
            json!({"v": 1}),
        ),
    )
    .await;
    assert_eq!(v1["decision"], "accepted", "{v1}");
    let v1_id = v1["record_id"].as_str().expect("id").to_owned();
    let (_, v2) = propose(
        w,
        &alice.key,
        &addressed(
            "theme-2",
            "The team theme is dark now.",
            &at,
            "theme",
            json!({"v": 2}),
        ),
    )
    .await;
    // Never refused as a duplicate of the record it replaces: it supersedes
    // it on the same line, with the gate's receipt.
    assert_eq!(v2["decision"], "accepted", "{v2}");
    assert_eq!(v2["line_id"], v1["line_id"], "{v2}");
    assert_eq!(v2["line_generation"], 2, "{v2}");
    assert!(v2["receipt"]["receipt_sha256"].is_string(), "{v2}");
    assert!(
        v2["server_conflicts"]
            .as_array()
            .expect("conflicts")
            .iter()
            .any(|c| c["existing_record_id"] == v1_id.as_str() && c["relation"] == "supersedes"),
        "the supersession is the server's observation: {v2}"
    );
    let v2_id = v2["record_id"].as_str().expect("id").to_owned();
    let (status, old) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{v1_id}"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{old}");
    assert_eq!(old["state"], "superseded", "{old}");
    // The address reads the current record, with its metadata and address.
    let query = "namespace=prefs/ui&key=theme&type=workspace&workspace_id=ws-main";
    let (status, current) = item(w, &alice.key, query).await;
    assert_eq!(status, StatusCode::OK, "{current}");
    assert_eq!(current["record"]["record_id"], v2_id.as_str());
    assert_eq!(current["content"], "The team theme is dark now.");
    assert_eq!(current["record"]["metadata"], json!({"v": 2}));
    assert_eq!(
        current["record"]["address"],
        json!({"namespace": ["prefs", "ui"], "key": "theme"})
    );
    // Writing the first text back is a third generation, not a replay of
    // the first proposal nor a duplicate.
    let (_, v3) = propose(
        w,
        &alice.key,
        &addressed(
            "theme-1",
            "The team theme is dark.",
            &at,
            "theme",
            json!({"v": 1}),
        ),
    )
    .await;
    assert_eq!(v3["decision"], "accepted", "{v3}");
    assert_eq!(v3["replayed"], false, "{v3}");
    assert_eq!(v3["line_generation"], 3, "{v3}");
    let (_, current) = item(w, &alice.key, query).await;
    assert_eq!(current["record"]["record_id"], v3["record_id"]);
}

#[tokio::test]
async fn metadata_is_returned_by_every_read_and_bounded_with_named_limits() {
    metadata_is_returned_by_every_read_and_bounded_with_named_limits_on(&world()).await;
}

pub(crate) async fn metadata_is_returned_by_every_read_and_bounded_with_named_limits_on(w: &World) {
    let alice = &w.principals[0];
    let (_, body) = propose(
        w,
        &alice.key,
        &addressed(
            "deploy",
            "Deploys happen on Tuesday mornings.",
            &["ops"],
            "deploy-day",
            json!({"team": "infra", "tags": ["ops"], "priority": 2}),
        ),
    )
    .await;
    assert_eq!(body["decision"], "accepted", "{body}");
    let id = body["record_id"].as_str().expect("id").to_owned();
    let expected = json!({"team": "infra", "tags": ["ops"], "priority": 2});
    let (_, got) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{id}"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(got["record"]["metadata"], expected, "{got}");
    let (status, recalled) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "when are deploys", "workspace_id": WORKSPACE})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{recalled}");
    let hit = recalled["memories"]
        .as_array()
        .expect("memories")
        .iter()
        .find(|m| m["record_id"] == id.as_str())
        .cloned()
        .expect("recalled");
    assert_eq!(hit["metadata"], expected, "{hit}");
    assert_eq!(hit["address"]["key"], "deploy-day", "{hit}");

    // Each limit is a 400 naming it, before anything is written.
    let cases = [
        (
            json!({"a": {"b": {"c": {"d": {"e": 1}}}}}),
            "invalid_metadata",
            "deeper than 4",
        ),
        (json!({"score": 0.5}), "invalid_metadata", "integers"),
        (
            json!({"big": "x".repeat(16 * 1024)}),
            "invalid_metadata",
            "16384",
        ),
    ];
    for (i, (metadata, code, named)) in cases.into_iter().enumerate() {
        let request = addressed(
            &format!("bad-{i}"),
            &format!("A bounded note {i}."),
            &["ops"],
            &format!("bad-{i}"),
            metadata,
        );
        let (status, body) = propose(w, &alice.key, &request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(error_code(&body), code);
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(named), "{message} names {named}");
    }
    let mut lone_key = addressed("lone", "A lone key.", &["ops"], "k", json!({}));
    lone_key.namespace = None;
    let (status, body) = propose(w, &alice.key, &lone_key).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_code(&body), "invalid_address");
    for bad in [vec!["a/b"], vec![""], vec!["x"; 9]] {
        let request = addressed("bad-ns", "A bad namespace.", &bad, "k", json!({}));
        let (status, body) = propose(w, &alice.key, &request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {body}");
        assert_eq!(error_code(&body), "invalid_address");
    }
    let (status, body) = item(w, &alice.key, "namespace=ops//x&key=k").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_code(&body), "invalid_address");
    // mem0's metadata must be an object.
    let (status, body) = send(
        &w.router,
        "POST",
        "/memories",
        Some(&alice.key),
        Some(json!({"messages": "hello", "metadata": ["not", "an", "object"]})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_code(&body), "invalid_metadata");
}

/// Layer: the read's subject check (the key's grant) and the store's
/// tenant-scoped lookup. An address the key may not read answers exactly
/// like an address that holds nothing.
#[tokio::test]
async fn an_address_never_reads_across_principals_subjects_or_tenants() {
    an_address_never_reads_across_principals_subjects_or_tenants_on(&world()).await;
}

pub(crate) async fn an_address_never_reads_across_principals_subjects_or_tenants_on(w: &World) {
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let other_tenant = w
        .principals
        .iter()
        .find(|p| p.tenant != alice.tenant)
        .expect("a principal of the other tenant");
    let mut mine = mosaic_service::examples::preference(
        "secret-pref",
        &alice.principal,
        "I prefer window seats.",
        Some(alice.consent.clone()),
    );
    mine.namespace = Some(vec!["travel".into()]);
    mine.key = Some("seat".into());
    let (_, body) = propose(w, &alice.key, &mine).await;
    assert_eq!(body["decision"], "accepted", "{body}");
    let (status, own) = item(w, &alice.key, "namespace=travel&key=seat").await;
    assert_eq!(status, StatusCode::OK, "{own}");
    assert_eq!(own["content"], "I prefer window seats.");

    let (status, missing) = item(w, &bob.key, "namespace=travel&key=nothing-here").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
    // Bob's own principal subject holds nothing at alice's address.
    let (status, body) = item(w, &bob.key, "namespace=travel&key=seat").await;
    assert_eq!((status, &body), (StatusCode::NOT_FOUND, &missing));
    // A subject bob may not read answers like a missing address.
    let (status, body) = item(
        w,
        &bob.key,
        "namespace=travel&key=seat&type=workspace&workspace_id=ws-not-granted",
    )
    .await;
    assert_eq!((status, &body), (StatusCode::NOT_FOUND, &missing));
    // Another tenant at the same address and subject shape.
    let (status, body) = item(w, &other_tenant.key, "namespace=travel&key=seat").await;
    assert_eq!((status, &body), (StatusCode::NOT_FOUND, &missing));
    // A namespace prefix is not the address.
    let (status, body) = item(w, &alice.key, "namespace=trav&key=seat").await;
    assert_eq!((status, &body), (StatusCode::NOT_FOUND, &missing));
}

/// Filters restrict the eligible set before ranking (a record the filter
/// excludes is `filtered_out`, never ranked), and the read context the
/// selection receipt commits to names the filter.
#[tokio::test]
async fn a_recall_filter_restricts_the_eligible_set_and_is_bound_into_the_receipt() {
    a_recall_filter_restricts_the_eligible_set_and_is_bound_into_the_receipt_on(&world()).await;
}

pub(crate) async fn a_recall_filter_restricts_the_eligible_set_and_is_bound_into_the_receipt_on(
    w: &World,
) {
    let alice = &w.principals[0];
    let teams = ["infra", "web", "infra", "web", "data", "infra"];
    let mut web_ids = Vec::new();
    for (i, team) in teams.iter().enumerate() {
        let request = addressed(
            &format!("deploy-{i}"),
            &format!(
                "Deploy window {i} for the {team} team is Tuesday morning ({}).",
                crate::common::distinct(&format!("d{i}"))
            ),
            &["ops", team],
            &format!("deploy-{i}"),
            json!({"team": team, "priority": i}),
        );
        let (_, body) = propose(w, &alice.key, &request).await;
        assert_eq!(body["decision"], "accepted", "{body}");
        if *team == "web" {
            web_ids.push(body["record_id"].as_str().expect("id").to_owned());
        }
    }
    let recall = |filter: Option<Value>| {
        let mut body =
            json!({"query": "deploy window tuesday", "workspace_id": WORKSPACE, "max_records": 10});
        if let Some(filter) = filter {
            body["filter"] = filter;
        }
        send(
            &w.router,
            "POST",
            "/v1/recall",
            Some(&alice.key),
            Some(body),
        )
    };
    let (status, all) = recall(None).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    let (status, web) = recall(Some(json!({"team": "web"}))).await;
    assert_eq!(status, StatusCode::OK, "{web}");
    let mut got: Vec<String> = web["memories"]
        .as_array()
        .expect("memories")
        .iter()
        .map(|m| m["record_id"].as_str().expect("id").to_owned())
        .collect();
    got.sort();
    web_ids.sort();
    assert_eq!(got, web_ids, "{web}");
    assert_eq!(web["drop_reasons"]["filtered_out"], 4, "{web}");
    assert_ne!(
        web["selection_receipt"]["read_context_sha256"],
        all["selection_receipt"]["read_context_sha256"],
        "the receipt commits to the filter"
    );
    // Ranges, membership, namespace prefix and boolean structure.
    let (_, some) = recall(Some(json!({"AND": [
        {"priority": {"gte": 1, "lt": 5}},
        {"NOT": {"team": {"in": ["data"]}}},
        {"namespace": {"prefix": "ops/infra"}}
    ]})))
    .await;
    let teams_found: Vec<&str> = some["memories"]
        .as_array()
        .expect("memories")
        .iter()
        .map(|m| m["metadata"]["team"].as_str().expect("team"))
        .collect();
    assert_eq!(
        teams_found,
        ["infra"],
        "only priority 2 is infra in 1..5: {some}"
    );
    let (status, body) = recall(Some(json!({"team": {"like": "w%"}}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_code(&body), "invalid_filter");
}

/// `GET /v1/memories` takes the same filter, as JSON text.
#[tokio::test]
async fn a_list_filter_lists_only_matching_memories() {
    a_list_filter_lists_only_matching_memories_on(&world()).await;
}

pub(crate) async fn a_list_filter_lists_only_matching_memories_on(w: &World) {
    let alice = &w.principals[0];
    let mut ids = Vec::new();
    for (i, team) in ["infra", "web", "infra"].iter().enumerate() {
        let request = addressed(
            &format!("list-{i}"),
            &format!(
                "Listed note {i} ({}).",
                crate::common::distinct(&format!("l{i}"))
            ),
            &["lists"],
            &format!("list-{i}"),
            json!({"team": team}),
        );
        let (_, body) = propose(w, &alice.key, &request).await;
        assert_eq!(body["decision"], "accepted", "{body}");
        ids.push(body["record_id"].as_str().expect("id").to_owned());
    }
    let list = |filter: &str| {
        format!(
            "/v1/memories?type=workspace&workspace_id={WORKSPACE}&filter={}",
            urlencode(filter)
        )
    };
    let (status, body) = send(
        &w.router,
        "GET",
        &list(r#"{"team": {"ne": "infra"}}"#),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed: Vec<&str> = body
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["record_id"].as_str().expect("id"))
        .collect();
    assert_eq!(listed, [ids[1].as_str()], "{body}");
    let (status, body) = send(&w.router, "GET", &list("not json"), Some(&alice.key), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_code(&body), "invalid_filter");
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn put_item(w: &World, key: &str, body: Value) -> (StatusCode, Value) {
    send(&w.router, "PUT", "/v1/items", Some(key), Some(body)).await
}

async fn namespaces(w: &World, key: &str, query: &str) -> (StatusCode, Value) {
    send(
        &w.router,
        "GET",
        &format!("/v1/namespaces?{query}"),
        Some(key),
        None,
    )
    .await
}

/// `PUT /v1/items` writes an address in one request (the server builds the
/// source and names the consent), supersedes its current record, and
/// `DELETE /v1/items` revokes every
/// version at the address. Layer for the negative cases: the read's subject
/// check and the store's tenant-scoped address lookup; a delete the key may
/// not make answers exactly like a delete of an empty address.
#[tokio::test]
async fn items_are_written_and_deleted_by_address_in_one_request() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let other_tenant = w
        .principals
        .iter()
        .find(|p| p.tenant != alice.tenant)
        .expect("a principal of the other tenant");
    let at = |content: &str| json!({"namespace": ["prefs", "ui"], "key": "theme", "content": content, "metadata": {"v": 1}});
    let (status, v1) = put_item(&w, &alice.key, at("Alice prefers dark mode.")).await;
    assert_eq!(status, StatusCode::OK, "{v1}");
    assert_eq!(v1["decision"], "accepted", "{v1}");
    assert_eq!(v1["line_generation"], 1, "{v1}");
    let (status, v2) = put_item(&w, &alice.key, at("Alice now prefers light mode.")).await;
    assert_eq!(status, StatusCode::OK, "{v2}");
    assert_eq!(v2["decision"], "accepted", "{v2}");
    assert_eq!(v2["line_id"], v1["line_id"], "{v2}");
    assert_eq!(v2["line_generation"], 2, "{v2}");
    let (status, current) = item(&w, &alice.key, "namespace=prefs/ui&key=theme").await;
    assert_eq!(status, StatusCode::OK, "{current}");
    assert_eq!(current["content"], "Alice now prefers light mode.");
    assert_eq!(current["record"]["metadata"], json!({"v": 1}));
    // The same content again is a new write (a key-value store's put).
    let (_, v3) = put_item(&w, &alice.key, at("Alice now prefers light mode.")).await;
    assert_eq!(v3["decision"], "accepted", "{v3}");
    assert_eq!(v3["line_generation"], 3, "{v3}");
    assert_ne!(v3["record_id"], v2["record_id"], "{v3}");

    // Nobody else deletes it: bob's own subject holds nothing there, a
    // workspace bob may not read and another tenant answer alike.
    let delete = |key: &str, query: &str| delete_item(&w, key.to_owned(), query.to_owned());
    let (status, missing) = delete(&alice.key, "namespace=prefs/ui&key=nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
    for (key, query) in [
        (&bob.key, "namespace=prefs/ui&key=theme"),
        (
            &bob.key,
            "namespace=prefs/ui&key=theme&type=workspace&workspace_id=ws-not-granted",
        ),
        (&other_tenant.key, "namespace=prefs/ui&key=theme"),
    ] {
        let (status, body) = delete(key, query).await;
        assert_eq!((status, &body), (StatusCode::NOT_FOUND, &missing));
    }
    let (status, still) = item(&w, &alice.key, "namespace=prefs/ui&key=theme").await;
    assert_eq!(status, StatusCode::OK, "{still}");

    let (status, deleted) = delete(&alice.key, "namespace=prefs/ui&key=theme").await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    let revocations = deleted["revocations"].as_array().expect("revocations");
    assert_eq!(
        revocations.len(),
        3,
        "every version at the address: {deleted}"
    );
    let (status, gone) = item(&w, &alice.key, "namespace=prefs/ui&key=theme").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");
    let (status, body) = delete(&alice.key, "namespace=prefs/ui&key=theme").await;
    assert_eq!((status, &body), (StatusCode::NOT_FOUND, &missing));
    // The address can be written again: a new line.
    let (_, fresh) = put_item(&w, &alice.key, at("Alice prefers dark mode.")).await;
    assert_eq!(fresh["decision"], "accepted", "{fresh}");
    assert_eq!(fresh["line_generation"], 1, "{fresh}");

    // Malformed writes are 400s naming the field, before anything is kept.
    for (body, code) in [
        (at("   "), "invalid_field"),
        (
            json!({"namespace": ["a/b"], "key": "k", "content": "x"}),
            "invalid_address",
        ),
        (
            json!({"namespace": ["a"], "key": "k", "content": "x", "metadata": {"f": 0.5}}),
            "invalid_metadata",
        ),
        (
            json!({"namespace": ["a"], "key": "k", "content": "x", "extra": 1}),
            "unknown_field",
        ),
    ] {
        let (status, answer) = put_item(&w, &alice.key, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(error_code(&answer), code, "{answer}");
    }
}

async fn delete_item(w: &World, key: String, query: String) -> (StatusCode, Value) {
    send(
        &w.router,
        "DELETE",
        &format!("/v1/items?{query}"),
        Some(&key),
        None,
    )
    .await
}

async fn write(w: &World, key: &str, ns: &[&str], k: &str) {
    let body = json!({"namespace": ns, "key": k, "content": format!("Item {k} at {ns:?}.")});
    let (status, answer) = put_item(w, key, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["decision"], "accepted", "{answer}");
}

fn listed(page: &Value) -> Vec<Vec<String>> {
    serde_json::from_value(page["namespaces"].clone()).expect("namespaces")
}

fn paths(list: &[&[&str]]) -> Vec<Vec<String>> {
    list.iter()
        .map(|ns| ns.iter().map(|s| (*s).to_owned()).collect())
        .collect()
}

/// `GET /v1/namespaces` lists the namespaces of the caller's current
/// addressed memories, with prefix, suffix (`*` any one segment), depth and
/// paging. Layer: the subject check (a subject the key may not read lists
/// nothing) and the store's tenant- and subject-scoped query (another
/// principal's and another tenant's namespaces never show).
#[tokio::test]
async fn namespaces_list_only_the_callers_current_addresses() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let other_tenant = w
        .principals
        .iter()
        .find(|p| p.tenant != alice.tenant)
        .expect("a principal of the other tenant");
    write(&w, &alice.key, &["prefs", "ui"], "theme").await;
    write(&w, &alice.key, &["prefs", "ui"], "font").await;
    write(&w, &alice.key, &["prefs", "audio"], "volume").await;
    write(&w, &alice.key, &["notes"], "n1").await;
    write(&w, &alice.key, &["a", "b", "c"], "deep").await;
    write(&w, &bob.key, &["bob-only"], "k").await;
    write(&w, &other_tenant.key, &["other-tenant"], "k").await;
    let mine = |query: &'static str| namespaces(&w, &alice.key, query);
    let (status, all) = mine("").await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(
        listed(&all),
        paths(&[
            &["a", "b", "c"],
            &["notes"],
            &["prefs", "audio"],
            &["prefs", "ui"]
        ])
    );
    let cases: [(&str, &[&[&str]]); 6] = [
        ("prefix=prefs", &[&["prefs", "audio"], &["prefs", "ui"]]),
        ("suffix=ui", &[&["prefs", "ui"]]),
        ("prefix=*/b", &[&["a", "b", "c"]]),
        ("max_depth=1", &[&["a"], &["notes"], &["prefs"]]),
        ("limit=1&offset=1", &[&["notes"]]),
        ("prefix=pref", &[]),
    ];
    for (query, expected) in cases {
        let (status, page) = mine(query).await;
        assert_eq!(status, StatusCode::OK, "{query}: {page}");
        assert_eq!(listed(&page), paths(expected), "{query}");
    }
    // Nobody sees another's namespaces.
    let (_, bobs) = namespaces(&w, &bob.key, "").await;
    assert_eq!(listed(&bobs), paths(&[&["bob-only"]]));
    let (_, theirs) = namespaces(&w, &other_tenant.key, "").await;
    assert_eq!(listed(&theirs), paths(&[&["other-tenant"]]));
    let (status, none) =
        namespaces(&w, &bob.key, "type=workspace&workspace_id=ws-not-granted").await;
    assert_eq!(status, StatusCode::OK, "{none}");
    assert_eq!(listed(&none), paths(&[]));
    let (_, empty_ws) = namespaces(
        &w,
        &bob.key,
        &format!("type=workspace&workspace_id={WORKSPACE}"),
    )
    .await;
    assert_eq!(
        none, empty_ws,
        "an unreadable subject lists like an empty one"
    );
    // A deleted item's namespace goes when it was the last one there.
    let (status, _) = send(
        &w.router,
        "DELETE",
        "/v1/items?namespace=notes&key=n1",
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, after) = mine("").await;
    assert_eq!(
        listed(&after),
        paths(&[&["a", "b", "c"], &["prefs", "audio"], &["prefs", "ui"]])
    );
    for (query, code) in [
        ("limit=0", "invalid_field"),
        ("limit=1001", "invalid_field"),
        ("max_depth=0", "invalid_field"),
        ("prefix=a//b", "invalid_address"),
        ("type=galaxy", "invalid_subject"),
    ] {
        let (status, body) = namespaces(&w, &alice.key, query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(error_code(&body), code, "{query}");
    }
}

/// A workspace item is written with `workspace_id` and read, listed and
/// deleted with `type=workspace`: every key granted the workspace sees it,
/// a key of another tenant with the same workspace name does not (layer:
/// the store's tenant-scoped address lookup and namespace query).
#[tokio::test]
async fn workspace_items_are_shared_within_the_workspace_and_tenant_only() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let other_tenant = w
        .principals
        .iter()
        .find(|p| p.tenant != alice.tenant)
        .expect("a principal of the other tenant");
    let body = json!({"namespace": ["runbooks"], "key": "deploy", "workspace_id": WORKSPACE,
        "content": "Deploy from the release branch only."});
    let (status, written) = put_item(&w, &alice.key, body).await;
    assert_eq!(status, StatusCode::OK, "{written}");
    assert_eq!(written["decision"], "accepted", "{written}");
    let query = format!("namespace=runbooks&key=deploy&type=workspace&workspace_id={WORKSPACE}");
    let (status, seen) = item(&w, &bob.key, &query).await;
    assert_eq!(status, StatusCode::OK, "{seen}");
    assert_eq!(seen["content"], "Deploy from the release branch only.");
    let listing = format!("type=workspace&workspace_id={WORKSPACE}");
    let (_, listed_by_bob) = namespaces(&w, &bob.key, &listing).await;
    assert_eq!(listed(&listed_by_bob), paths(&[&["runbooks"]]));
    // Not the principal's own namespaces, and nothing in the other tenant.
    let (_, own) = namespaces(&w, &alice.key, "").await;
    assert_eq!(listed(&own), paths(&[]));
    let (_, theirs) = namespaces(&w, &other_tenant.key, &listing).await;
    assert_eq!(listed(&theirs), paths(&[]));
    let (status, _) = item(&w, &other_tenant.key, &query).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, deleted) = delete_item(&w, other_tenant.key.clone(), query.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{deleted}");
    let (status, deleted) = delete_item(&w, bob.key.clone(), query.clone()).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    let (status, _) = item(&w, &alice.key, &query).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
