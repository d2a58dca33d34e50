//! The mem0-compatible surface, driven with the request and response
//! shapes of mem0's open-source REST server (`server/main.py`: MemoryCreate,
//! SearchRequest, `{"results": [...]}` lists of `{id, memory, hash,
//! metadata, score?, created_at, updated_at, user_id}`, history events
//! `ADD`/`UPDATE`/`DELETE`, `{"message": ...}` acknowledgements).
//! Negative cases name the layer: the compat layer's user check (403), the
//! strict decoder (400), the service's visibility (404).

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::{error_code, send, world};

fn is_rfc3339(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 24 && s.ends_with('Z') && s.as_bytes()[4] == b'-' && s.as_bytes()[10] == b'T'
    })
}

#[tokio::test]
async fn an_application_written_against_mem0_works_by_changing_its_base_url_and_key() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let r = &w.router;
    let key = Some(alice.key.as_str());

    // add(messages, user_id=...)
    let body = json!({
        "messages": [
            {"role": "user", "content": "I am vegetarian and allergic to nuts."},
            {"role": "assistant", "content": "Noted: vegetarian, no nuts."}
        ],
        "user_id": "alice",
        "metadata": {"category": "food"}
    });
    let (status, added) = send(r, "POST", "/memories", key, Some(body.clone())).await;
    assert_eq!(status, StatusCode::OK, "{added}");
    let results = added["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{added}");
    assert!(
        results
            .iter()
            .all(|x| x["event"] == "ADD" && x["id"].is_string())
    );
    assert_eq!(
        results[0]["memory"],
        "user: I am vegetarian and allergic to nuts."
    );
    assert_eq!(added["ignored"], json!([]), "metadata is stored: {added}");
    // Replayed: nothing new.
    let (_, again) = send(r, "POST", "/memories", key, Some(body)).await;
    assert!(
        again["results"]
            .as_array()
            .expect("results")
            .iter()
            .all(|x| x["event"] == "NONE"),
        "{again}"
    );
    // A string is one user message.
    let (status, one) = send(
        r,
        "POST",
        "/memories",
        key,
        Some(json!({"messages": "I live in Lisbon.", "user_id": "alice", "run_id": "trip"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["results"][0]["memory"], "user: I live in Lisbon.");
    let lisbon = one["results"][0]["id"].as_str().expect("id").to_owned();

    // search(query, user_id=...)
    let (status, found) = send(
        r,
        "POST",
        "/search",
        key,
        Some(json!({"query": "what can I cook, any allergies?", "user_id": "alice", "limit": 2})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let hits = found["results"].as_array().expect("results");
    assert!(!hits.is_empty() && hits.len() <= 2, "{found}");
    let top = &hits[0];
    for field in ["id", "memory", "hash", "user_id"] {
        assert!(top[field].is_string(), "{field}: {top}");
    }
    assert!(top["score"].is_number(), "{top}");
    assert!(is_rfc3339(&top["created_at"]), "{top}");
    assert_eq!(top["user_id"], "alice");

    // get_all(user_id=...), get(id), narrowed by run_id
    let (status, all) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(all["results"].as_array().map(Vec::len), Some(3), "{all}");
    // The metadata each add carried comes back on every read.
    for item in all["results"].as_array().expect("results") {
        let expected = if item["id"] == lisbon.as_str() {
            Value::Null
        } else {
            json!({"category": "food"})
        };
        assert_eq!(item["metadata"], expected, "{item}");
    }
    assert_eq!(top["metadata"], json!({"category": "food"}), "{top}");
    let (_, trip) = send(r, "GET", "/memories?user_id=alice&run_id=trip", key, None).await;
    assert_eq!(trip["results"].as_array().map(Vec::len), Some(1), "{trip}");
    let (status, got) = send(r, "GET", &format!("/memories/{lisbon}"), key, None).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(
        (got["id"].as_str(), got["memory"].as_str()),
        (Some(lisbon.as_str()), Some("user: I live in Lisbon."))
    );

    // update(memory_id, text=...) supersedes; history shows both.
    let (status, updated) = send(
        r,
        "PUT",
        &format!("/memories/{lisbon}"),
        key,
        Some(json!({"text": "I live in Porto now."})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(
        updated["message"], "Memory updated successfully!",
        "{updated}"
    );
    let porto = updated["id"].as_str().expect("new id").to_owned();
    let (status, history) = send(r, "GET", &format!("/memories/{porto}/history"), key, None).await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let events: Vec<(&str, &str)> = history
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap_or(""),
                e["new_memory"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        events,
        vec![
            ("ADD", "user: I live in Lisbon."),
            ("UPDATE", "I live in Porto now.")
        ]
    );
    let (_, all) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    let texts: Vec<&str> = all["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|m| m["memory"].as_str())
        .collect();
    assert!(
        texts.contains(&"I live in Porto now.") && !texts.contains(&"user: I live in Lisbon."),
        "{texts:?}"
    );

    // Another user's id is refused at the compat layer; another user's
    // memory is not found.
    let (status, body) = send(
        r,
        "POST",
        "/search",
        key,
        Some(json!({"query": "x", "user_id": "bob"})),
    )
    .await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "user_mismatch")
    );
    let (status, _) = send(
        r,
        "GET",
        &format!("/memories/{porto}"),
        Some(&bob.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(
        r,
        "DELETE",
        &format!("/memories/{porto}"),
        Some(&bob.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = send(
        r,
        "POST",
        "/memories",
        key,
        Some(json!({"messages": [], "user_id": "alice", "surprise": 1})),
    )
    .await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::BAD_REQUEST, "unknown_field")
    );

    // delete(memory_id), then delete_all(user_id=...)
    let (status, deleted) = send(r, "DELETE", &format!("/memories/{porto}"), key, None).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["message"], "Memory deleted successfully!");
    assert!(
        deleted["deletion_receipt_sha256"]
            .as_str()
            .is_some_and(|d| d.len() == 64),
        "{deleted}"
    );
    let (status, cleared) = send(r, "DELETE", "/memories?user_id=alice", key, None).await;
    assert_eq!(status, StatusCode::OK, "{cleared}");
    assert_eq!(
        cleared["deleted"].as_array().map(Vec::len),
        Some(2),
        "{cleared}"
    );
    let (_, none) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    assert_eq!(none["results"], json!([]));
    // The key still works: delete-all is not erasure of the user.
    let (status, _) = send(
        r,
        "POST",
        "/memories",
        key,
        Some(json!({"messages": "Still here.", "user_id": "alice"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn an_application_key_names_its_users_in_mem0s_user_id() {
    let w = world();
    let r = &w.router;
    let (status, created) = send(
        r,
        "POST",
        "/v1/admin/application-keys",
        Some(&w.admin_key),
        Some(json!({"tenant_id": "tenant-a", "application_id": "app1", "users": ["app1:*"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let app = created["key"].as_str().expect("key").to_owned();
    let key = Some(app.as_str());
    for (user, text) in [
        ("app1:ann", "Ann likes tea."),
        ("app1:ben", "Ben likes coffee."),
    ] {
        let (status, body) = send(
            r,
            "POST",
            "/memories",
            key,
            Some(json!({"messages": text, "user_id": user})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, ann) = send(
        r,
        "POST",
        "/search",
        key,
        Some(json!({"query": "what does she drink", "user_id": "app1:ann"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{ann}");
    let texts: Vec<&str> = ann["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|m| m["memory"].as_str())
        .collect();
    assert_eq!(
        texts,
        vec!["user: Ann likes tea."],
        "one user never recalls another's"
    );
    // Outside the key's bounds, and without a user: refused by the
    // application key's bounds (auth layer).
    let (status, body) = send(
        r,
        "POST",
        "/search",
        key,
        Some(json!({"query": "x", "user_id": "other:zed"})),
    )
    .await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "user_not_allowed")
    );
    let (status, body) = send(r, "GET", "/memories", key, None).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::BAD_REQUEST, "user_required")
    );
}
