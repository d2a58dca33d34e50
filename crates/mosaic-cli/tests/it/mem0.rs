//! The mem0-compatible surface, driven with the request and response
//! shapes of mem0's open-source REST server (`server/main.py`: MemoryCreate,
//! SearchRequest, `{"results": [...]}` lists of `{id, memory, hash,
//! metadata, score?, created_at, updated_at, user_id}`, history events
//! `ADD`/`UPDATE`/`DELETE`, `{"message": ...}` acknowledgements).
//! Negative cases name the layer: the compat layer's user check (403), the
//! strict decoder (400), the service's visibility (404).

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::{World, error_code, send, world};

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
        Some(
            json!({"query": "what can I cook, as I am allergic?", "user_id": "alice", "limit": 2}),
        ),
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
        Some(json!({"query": "what does she like to drink", "user_id": "app1:ann"})),
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
    let (status, body) = send(r, "GET", "/memories?run_id=trip", key, None).await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::BAD_REQUEST, "user_required")
    );
}

/// mem0's server lists for someone: `GET /memories` naming nobody is
/// refused by the compat layer (400 `identifier_required`), with either
/// kind of key, before any memory is read.
#[tokio::test]
async fn listing_without_an_identifier_is_refused_like_mem0s_server() {
    let w = world();
    let r = &w.router;
    let key = Some(w.principals[0].key.as_str());
    let (status, body) = send(
        r,
        "POST",
        "/memories",
        key,
        Some(json!({"messages": "A fact to list.", "user_id": "alice"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for path in ["/memories", "/memories?limit=5"] {
        let (status, body) = send(r, "GET", path, key, None).await;
        assert_eq!(
            (status, error_code(&body).as_str()),
            (StatusCode::BAD_REQUEST, "identifier_required"),
            "{path}: {body}"
        );
    }
    let (status, body) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["results"].as_array().map(Vec::len), Some(1), "{body}");
}

fn ids_of(list: &Value) -> Vec<String> {
    list["results"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| m["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Adds each of `texts` as a memory of user `alice` (`POST /v3/memories/add/`),
/// asserting each is added; their ids in order.
async fn add_for_alice(r: &axum::Router, key: Option<&str>, texts: &[&str]) -> Vec<String> {
    let mut ids = Vec::new();
    for text in texts {
        let (status, added) = send(
            r,
            "POST",
            "/v3/memories/add/",
            key,
            Some(json!({"messages": text, "user_id": "alice"})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{added}");
        ids.push(ids_of(&added).remove(0));
    }
    ids
}

/// The routes mem0's platform client (`MemoryClient`, mem0ai 2.2.1) calls,
/// with its trailing slashes and bodies: each answers as the open-source
/// route it maps onto, and names every body field it does not read.
#[tokio::test]
async fn mem0s_platform_client_routes_map_onto_the_open_source_ones() {
    let w = world();
    let r = &w.router;
    let key = Some(w.principals[0].key.as_str());

    // client.add(messages, user_id=..., metadata=..., app_id=...)
    let (status, added) = send(
        r,
        "POST",
        "/v3/memories/add/",
        key,
        Some(json!({
            "messages": [
                {"role": "user", "content": "I am vegetarian."},
                {"role": "user", "content": "I live in Lisbon."},
                {"role": "user", "content": "I play the cello."}
            ],
            "user_id": "alice",
            "run_id": "trip",
            "metadata": {"topic": "profile"},
            "app_id": "app-x",
            "version": "v2"
        })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{added}");
    assert_eq!(
        added["results"].as_array().map(Vec::len),
        Some(3),
        "{added}"
    );
    // metadata is stored (mem0.rs); what is not read is named.
    assert_eq!(added["ignored"], json!(["app_id", "version"]));
    let ids: Vec<String> = ids_of(&added);

    // client.search(query, filters={"user_id": ...}, top_k=..., rerank=...)
    let (status, found) = send(
        r,
        "POST",
        "/v3/memories/search/",
        key,
        Some(
            json!({"query": "what do I eat as a vegetarian", "filters": {"user_id": "alice"},
                    "top_k": 2, "rerank": true}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let hits = found["results"].as_array().expect("results");
    assert!(!hits.is_empty() && hits.len() <= 2, "{found}");
    assert!(
        hits.iter()
            .all(|h| h["score"].as_f64().is_some_and(|s| (0.0..1.0).contains(&s))),
        "{found}"
    );
    assert_eq!(found["ignored"], json!(["rerank"]));

    // client.get_all(filters=..., page=..., page_size=...)
    let page = |n: u32| format!("/v3/memories/?page={n}&page_size=2");
    let (status, first) = send(
        r,
        "POST",
        &page(1),
        key,
        Some(json!({"filters": {"AND": [{"user_id": "alice"}, {"run_id": "trip"}]}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["count"], 3, "{first}");
    assert_eq!(first["next"], json!(page(2)));
    assert_eq!(first["previous"], Value::Null);
    let (_, second) = send(
        r,
        "POST",
        &page(2),
        key,
        Some(json!({"filters": {"user_id": "alice"}})),
    )
    .await;
    assert_eq!(second["next"], Value::Null, "{second}");
    assert_eq!(second["previous"], json!(page(1)));
    let mut listed = ids_of(&first);
    listed.extend(ids_of(&second));
    listed.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(listed, expected, "the pages list every memory once");

    // client.get(id), client.update(id, text=..., metadata=...),
    // client.history(id)
    let lisbon = &ids[1];
    let (status, got) = send(r, "GET", &format!("/v1/memories/{lisbon}/"), key, None).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["memory"], "user: I live in Lisbon.");
    let (status, updated) = send(
        r,
        "PUT",
        &format!("/v1/memories/{lisbon}/"),
        key,
        Some(json!({"text": "I live in Porto.", "metadata": {"k": 1},
                    "expiration_date": null})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(
        updated["ignored"],
        json!(["expiration_date", "metadata"]),
        "a null the service does not read is named too"
    );
    let porto = updated["id"].as_str().expect("new id").to_owned();
    let (status, history) = send(
        r,
        "GET",
        &format!("/v1/memories/{porto}/history/"),
        key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let events: Vec<&str> = history
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["event"].as_str())
        .collect();
    assert_eq!(events, vec!["ADD", "UPDATE"]);

    // client.users(): the acting user and its runs.
    let (status, entities) = send(r, "GET", "/v1/entities/", key, None).await;
    assert_eq!(status, StatusCode::OK, "{entities}");
    let named: Vec<(String, String, u64)> = entities["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_owned(),
                e["name"].as_str().unwrap_or("").to_owned(),
                e["total_memories"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        named,
        vec![
            ("user".to_owned(), "alice".to_owned(), 3),
            ("run".to_owned(), "trip".to_owned(), 2)
        ],
        "the updated memory came from no message of the run"
    );

    // client.batch_update / batch_delete
    let (status, batch) = send(
        r,
        "PUT",
        "/v1/batch/",
        key,
        Some(
            json!({"memories": [{"memory_id": ids[0], "text": "I am vegan.",
                                   "metadata": {"k": 2}}]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{batch}");
    assert_eq!(batch["message"], "Successfully updated 1 memories");
    assert_eq!(batch["ignored"], json!(["memories[0].metadata"]));
    let vegan = batch["results"][0]["id"].as_str().expect("id").to_owned();
    let (status, gone) = send(
        r,
        "DELETE",
        "/v1/batch/",
        key,
        Some(json!({"memories": [{"memory_id": vegan}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{gone}");
    assert_eq!(
        gone["deleted"].as_array().map(Vec::len),
        Some(2),
        "the line goes: both versions, {gone}"
    );

    // client.delete(id, delete_linked=True): the whole line, as always.
    let (status, deleted) = send(
        r,
        "DELETE",
        &format!("/v1/memories/{porto}/?delete_linked=true"),
        key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["deleted"].as_array().map(Vec::len), Some(2));

    // client.delete_users(run_id=...) and client.delete_all(user_id=...)
    let (status, cleared) = send(r, "DELETE", "/v2/entities/run/trip/", key, None).await;
    assert_eq!(status, StatusCode::OK, "{cleared}");
    assert_eq!(cleared["deleted"].as_array().map(Vec::len), Some(1));
    let (_, more) = send(
        r,
        "POST",
        "/v3/memories/add/",
        key,
        Some(json!({"messages": "Another fact.", "user_id": "alice"})),
    )
    .await;
    assert_eq!(more["results"].as_array().map(Vec::len), Some(1), "{more}");
    let (status, cleared) = send(r, "DELETE", "/v1/memories/?user_id=alice", key, None).await;
    assert_eq!(status, StatusCode::OK, "{cleared}");
    assert_eq!(cleared["deleted"].as_array().map(Vec::len), Some(1));
    let (_, none) = send(
        r,
        "POST",
        "/v3/memories/",
        key,
        Some(json!({"filters": {"user_id": "alice"}})),
    )
    .await;
    assert_eq!(
        (none["count"].as_u64(), none["results"].clone()),
        (Some(0), json!([]))
    );
}

/// Another principal's memory answers every platform route exactly like a
/// missing one (the service's visibility layer), and a batch naming one
/// changes nothing (the compat layer checks every memory first).
#[tokio::test]
async fn platform_routes_treat_anothers_memory_as_missing_and_batches_as_one() {
    let w = world();
    let r = &w.router;
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let (status, added) = send(
        r,
        "POST",
        "/v3/memories/add/",
        Some(&alice.key),
        Some(json!({"messages": "Alice's secret.", "user_id": "alice"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{added}");
    let secret = ids_of(&added).remove(0);
    let (status, own) = send(
        r,
        "POST",
        "/v3/memories/add/",
        Some(&bob.key),
        Some(json!({"messages": "Bob's note.", "user_id": "bob"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{own}");
    let note = ids_of(&own).remove(0);
    let missing = "rec-does-not-exist";
    let bob_key = Some(bob.key.as_str());
    for id in [secret.as_str(), missing] {
        for (method, path, body) in [
            ("GET", format!("/v1/memories/{id}/"), None),
            ("GET", format!("/v1/memories/{id}/history/"), None),
            (
                "PUT",
                format!("/v1/memories/{id}/"),
                Some(json!({"text": "x"})),
            ),
            ("DELETE", format!("/v1/memories/{id}/"), None),
        ] {
            let (status, answer) = send(r, method, &path, bob_key, body).await;
            assert_eq!(
                (status, error_code(&answer).as_str()),
                (StatusCode::NOT_FOUND, "not_found"),
                "{method} {path}: {answer}"
            );
        }
        // A batch naming it next to Bob's own memory: 404, nothing written.
        for method in ["PUT", "DELETE"] {
            let (status, answer) = send(
                r,
                method,
                "/v1/batch/",
                bob_key,
                Some(json!({"memories": [{"memory_id": note, "text": "changed"},
                                          {"memory_id": id, "text": "changed"}]})),
            )
            .await;
            assert_eq!(
                (status, error_code(&answer).as_str()),
                (StatusCode::NOT_FOUND, "not_found"),
                "{method} batch: {answer}"
            );
        }
    }
    let (_, still) = send(r, "GET", &format!("/v1/memories/{note}/"), bob_key, None).await;
    assert_eq!(still["memory"], "user: Bob's note.", "{still}");
    let (_, kept) = send(
        r,
        "GET",
        &format!("/v1/memories/{secret}/"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(kept["memory"], "user: Alice's secret.", "{kept}");
    // Naming Alice's user is refused by the compat layer's user check.
    let (status, answer) = send(r, "DELETE", "/v2/entities/user/alice/", bob_key, None).await;
    assert_eq!(
        (status, error_code(&answer).as_str()),
        (StatusCode::FORBIDDEN, "user_mismatch")
    );
}

/// A batch update whose later memory the update would refuse (blank new
/// text, or a memory an earlier update superseded) is refused whole by the
/// compat layer's check of every memory before the first write: the
/// earlier memory of the batch keeps its text and no new memory appears.
#[tokio::test]
async fn a_batch_update_the_update_would_refuse_part_of_writes_nothing() {
    let w = world();
    let r = &w.router;
    let alice = &w.principals[0];
    let key = Some(alice.key.as_str());
    let ids = add_for_alice(
        r,
        key,
        &["The codename is Heron.", "The launch is in March."],
    )
    .await;
    let (first, second) = (ids[0].clone(), ids[1].clone());
    // The second memory is updated once: its first version is superseded.
    let (status, updated) = send(
        r,
        "PUT",
        &format!("/v1/memories/{second}/"),
        key,
        Some(json!({"text": "The launch is in April."})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    let current = updated["id"].as_str().expect("new id").to_owned();
    let listed = |body: &Value| -> Vec<String> {
        let mut texts: Vec<String> = body["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|m| m["memory"].as_str().expect("memory").to_owned())
            .collect();
        texts.sort();
        texts
    };
    let (_, before) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    let cases = [
        (
            json!({"text": "   \n\t "}),
            current.as_str(),
            StatusCode::BAD_REQUEST,
            "invalid_message",
        ),
        (
            json!({"text": "The launch is in May."}),
            second.as_str(),
            StatusCode::CONFLICT,
            "stale_generation",
        ),
    ];
    for (later, id, status_wanted, code) in cases {
        let mut named = later.clone();
        named["memory_id"] = json!(id);
        let (status, answer) = send(
            r,
            "PUT",
            "/v1/batch/",
            key,
            Some(json!({"memories": [
                {"memory_id": first, "text": "The codename is Egret."},
                named,
            ]})),
        )
        .await;
        assert_eq!(
            (status, error_code(&answer).as_str()),
            (status_wanted, code),
            "{later}: {answer}"
        );
        let (_, kept) = send(r, "GET", &format!("/v1/memories/{first}/"), key, None).await;
        assert_eq!(
            kept["memory"], "user: The codename is Heron.",
            "{code}: {kept}"
        );
        let (_, after) = send(r, "GET", "/memories?user_id=alice", key, None).await;
        assert_eq!(
            listed(&after),
            listed(&before),
            "{code}: a memory was written"
        );
    }
}

/// A batch update whose later memory the write gate refuses (its new text
/// duplicates another memory: the server's text guard) writes nothing:
/// every update of the batch is decided in one store transaction, which
/// rolls back on the refusal (the store's all-or-nothing batch). The
/// earlier memory keeps its text, through mem0's routes and Mosaic's own.
#[tokio::test]
async fn a_batch_update_the_gate_refuses_part_of_writes_nothing() {
    let w = world();
    let r = &w.router;
    let alice = &w.principals[0];
    let key = Some(alice.key.as_str());
    let ids = add_for_alice(
        r,
        key,
        &[
            "The codename is Heron.",
            "The launch is in March.",
            "The budget is twelve thousand euros for the whole quarter.",
        ],
    )
    .await;
    let duplicate = "user: The budget is twelve thousand euros for the whole quarter.";
    // The gate refuses the second update alone.
    let (status, alone) = send(
        r,
        "PUT",
        &format!("/v1/memories/{}/", ids[1]),
        key,
        Some(json!({"text": duplicate})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{alone}");
    assert!(alone["previous_id"].is_null(), "not refused alone: {alone}");
    let (_, before) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    let (status, answer) = send(
        r,
        "PUT",
        "/v1/batch/",
        key,
        Some(json!({"memories": [
            {"memory_id": ids[0], "text": "The codename is Egret."},
            {"memory_id": ids[1], "text": duplicate},
        ]})),
    )
    .await;
    assert_eq!(
        (status, error_code(&answer).as_str()),
        (StatusCode::CONFLICT, "write_refused"),
        "{answer}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("memories[1]")),
        "{answer}"
    );
    let (_, kept) = send(r, "GET", &format!("/v1/memories/{}/", ids[0]), key, None).await;
    assert_eq!(kept["memory"], "user: The codename is Heron.", "{kept}");
    let (status, own) = send(r, "GET", &format!("/v1/memories/{}", ids[0]), key, None).await;
    assert_eq!(status, StatusCode::OK, "{own}");
    assert_eq!(own["state"], "active", "{own}");
    let (_, after) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    assert_eq!(after["results"], before["results"], "a memory was written");
    // Without the refused memory the same update goes through.
    let (status, alone) = send(
        r,
        "PUT",
        "/v1/batch/",
        key,
        Some(json!({"memories": [{"memory_id": ids[0], "text": "The codename is Egret."}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{alone}");
    assert_eq!(alone["results"][0]["previous_id"], json!(ids[0]), "{alone}");
}

/// What the platform routes refuse, each at the compat layer, before any
/// memory is read or written.
#[tokio::test]
async fn platform_routes_refuse_what_they_cannot_map() {
    let w = world();
    let r = &w.router;
    let key = Some(w.principals[0].key.as_str());
    let cases: Vec<(&str, &str, Option<Value>, StatusCode, &str)> = vec![
        (
            "POST",
            "/v3/memories/",
            Some(json!({})),
            StatusCode::BAD_REQUEST,
            "identifier_required",
        ),
        (
            "POST",
            "/v3/memories/",
            Some(json!({"filters": {"app_id": "a"}})),
            StatusCode::BAD_REQUEST,
            "unsupported_filter",
        ),
        (
            "POST",
            "/v3/memories/?page=0",
            Some(json!({"filters": {"user_id": "alice"}})),
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "POST",
            "/v3/memories/?page_size=1001",
            Some(json!({"filters": {"user_id": "alice"}})),
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "POST",
            "/v3/memories/?cursor=1",
            Some(json!({"filters": {"user_id": "alice"}})),
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "POST",
            "/v3/memories/add/",
            Some(json!(["not", "an", "object"])),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "POST",
            "/v3/memories/search/",
            Some(json!({"filters": {"user_id": "alice"}})),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "DELETE",
            "/v1/memories/",
            None,
            StatusCode::BAD_REQUEST,
            "identifier_required",
        ),
        (
            "DELETE",
            "/v1/memories/?app_id=a",
            None,
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "DELETE",
            "/v2/entities/app/a/",
            None,
            StatusCode::BAD_REQUEST,
            "invalid_path",
        ),
        (
            "PUT",
            "/v1/memories/rec-x/",
            Some(json!({"metadata": {"k": 1}})),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/batch/",
            Some(json!({"memories": []})),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/batch/",
            Some(json!({"memories": [{"text": "x"}]})),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/batch/",
            Some(json!({"memories": [{"memory_id": "a", "text": "x"},
                                                       {"memory_id": "a", "text": "y"}]})),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "DELETE",
            "/v1/batch/",
            Some(json!({"memories": vec![json!({"memory_id": "a"}); 101]})),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        // Out of scope: exports, summaries, feedback, profiles, webhooks,
        // organization and project management.
        (
            "POST",
            "/v1/exports/",
            Some(json!({"schema": "{}"})),
            StatusCode::NOT_IMPLEMENTED,
            "not_supported",
        ),
        (
            "POST",
            "/v1/exports/get/",
            Some(json!({})),
            StatusCode::NOT_IMPLEMENTED,
            "not_supported",
        ),
        (
            "POST",
            "/v1/summary/",
            Some(json!({})),
            StatusCode::NOT_IMPLEMENTED,
            "not_supported",
        ),
        (
            "POST",
            "/v1/feedback/",
            Some(json!({})),
            StatusCode::NOT_IMPLEMENTED,
            "not_supported",
        ),
        (
            "GET",
            "/v2/entities/user/alice/profile/",
            None,
            StatusCode::NOT_IMPLEMENTED,
            "not_supported",
        ),
        (
            "GET",
            "/v2/profiles/settings/",
            None,
            StatusCode::NOT_IMPLEMENTED,
            "not_supported",
        ),
        (
            "GET",
            "/api/v1/webhooks/projects/p1/",
            None,
            StatusCode::NOT_IMPLEMENTED,
            "not_supported",
        ),
        (
            "GET",
            "/api/v1/orgs/organizations/o/projects/p/",
            None,
            StatusCode::NOT_IMPLEMENTED,
            "not_supported",
        ),
        // A path no product has is still 404.
        (
            "GET",
            "/v9/nothing/",
            None,
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ];
    for (method, path, body, want_status, want_code) in cases {
        let (status, answer) = send(r, method, path, key, body).await;
        assert_eq!(
            (status, error_code(&answer).as_str()),
            (want_status, want_code),
            "{method} {path}: {answer}"
        );
    }
    let (status, answer) = send(r, "POST", "/v1/summary/", key, Some(json!({}))).await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED);
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("summaries are not offered")),
        "{answer}"
    );
}

/// mem0's delete-all names whose memories go: without an identifier (or
/// with a body that is not an empty JSON object) the compat layer refuses
/// the call and revokes nothing. With one it deletes exactly what
/// `GET /memories` lists, never a shared workspace record the principal
/// wrote and another principal reads.
#[tokio::test]
async fn delete_all_needs_an_identifier_and_deletes_only_what_get_lists() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let r = &w.router;
    let key = Some(alice.key.as_str());
    let (status, body) = send(
        r,
        "POST",
        "/memories",
        key,
        Some(json!({"messages": "I keep bees on the roof.", "user_id": "alice"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let shared = crate::common::propose(
        r,
        &alice.key,
        &crate::common::distinct_fact("shared-hives", "The team's hives are checked on Mondays"),
    )
    .await;
    assert_eq!(shared["decision"], "accepted", "{shared}");
    let shared_id = shared["record_id"].as_str().expect("record id").to_owned();
    let (status, _) = send(
        r,
        "GET",
        &format!("/v1/memories/{shared_id}"),
        Some(&bob.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "bob reads the shared record");

    // Refused by the compat layer: no identifier, a malformed body, a body
    // that is not empty.
    for (path, body, code) in [
        ("/memories", None, "identifier_required"),
        ("/memories?limit=5", None, "identifier_required"),
        ("/memories?user_id=alice", Some(&b"{"[..]), "malformed_json"),
        (
            "/memories?user_id=alice",
            Some(&br#"{"user_id":"alice"}"#[..]),
            "unknown_field",
        ),
    ] {
        let (status, _, answer) =
            crate::common::send_raw(r, "DELETE", path, key, body.map(<[u8]>::to_vec)).await;
        assert_eq!(
            (status, error_code(&answer).as_str()),
            (StatusCode::BAD_REQUEST, code),
            "{path}: {answer}"
        );
    }
    let (_, listed) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    assert_eq!(
        listed["results"].as_array().map(Vec::len),
        Some(1),
        "nothing was revoked by a refused call: {listed}"
    );

    let (status, cleared) = send(r, "DELETE", "/memories?user_id=alice", key, None).await;
    assert_eq!(status, StatusCode::OK, "{cleared}");
    let listed_id = listed["results"][0]["id"].as_str().expect("id");
    let deleted: Vec<&str> = cleared["deleted"]
        .as_array()
        .expect("deleted")
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert_eq!(deleted, vec![listed_id], "{cleared}");
    assert_eq!(cleared["complete"], true, "{cleared}");
    let (status, _) = send(
        r,
        "GET",
        &format!("/v1/memories/{shared_id}"),
        Some(&bob.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "the shared record is untouched");
}

/// Deleting a memory through the mem0 routes deletes its whole line: the
/// text an update replaced is no longer readable by id, in the browse
/// listing, or in any file of the data directory, and the answer lists
/// every version with its deletion receipt.
#[tokio::test]
async fn deleting_a_memory_deletes_every_version_of_it() {
    let w = world();
    let alice = &w.principals[0];
    let r = &w.router;
    let key = Some(alice.key.as_str());
    let data = w._dir.path().join("data");
    // Words no stemmer changes and no other test writes.
    let (old_word, new_word, other_word) = ("vorpqualm", "snickerzat", "glimbrook");

    let mut lines = Vec::new();
    for (first, second) in [
        (
            format!("My locker word is {old_word}."),
            format!("My locker word is {new_word} now."),
        ),
        (
            "The garden shed has a blue door.".to_owned(),
            format!("The garden shed door is painted {other_word} green."),
        ),
    ] {
        let (status, added) = send(
            r,
            "POST",
            "/memories",
            key,
            Some(json!({"messages": first, "user_id": "alice"})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{added}");
        let old = added["results"][0]["id"].as_str().expect("id").to_owned();
        let (status, updated) = send(
            r,
            "PUT",
            &format!("/memories/{old}"),
            key,
            Some(json!({"text": second})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{updated}");
        assert_eq!(
            updated["message"], "Memory updated successfully!",
            "{updated}"
        );
        let new = updated["id"].as_str().expect("new id").to_owned();
        lines.push((old, new));
    }
    let (old, new) = lines[0].clone();
    let (status, _) = send(r, "GET", &format!("/memories/{old}"), key, None).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the replaced version is kept as history"
    );
    w.service.flush().expect("save indexes");
    let before: std::collections::BTreeSet<&str> =
        crate::erasure_bytes::holding_any(&data, &[old_word, new_word, other_word])
            .into_iter()
            .map(|(_, word)| word)
            .collect();
    assert_eq!(
        before.len(),
        3,
        "every text is on disk before deletion (else the scan proves nothing): {before:?}"
    );

    // Deleting the current version takes the replaced one with it.
    let (status, deleted) = send(r, "DELETE", &format!("/memories/{new}"), key, None).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["complete"], true, "{deleted}");
    assert_eq!(deleted["message"], "Memory deleted successfully!");
    let versions: Vec<(&str, &str)> = deleted["deleted"]
        .as_array()
        .expect("deleted")
        .iter()
        .map(|d| {
            assert!(
                d["deletion_receipt_sha256"]
                    .as_str()
                    .is_some_and(|s| s.len() == 64),
                "{d}"
            );
            (
                d["id"].as_str().unwrap_or(""),
                d["stage"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        versions,
        vec![(new.as_str(), "finalized"), (old.as_str(), "finalized")],
        "{deleted}"
    );
    for id in [&old, &new] {
        let (status, body) = send(r, "GET", &format!("/memories/{id}"), key, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}: {body}");
        let (status, _) = send(r, "GET", &format!("/v1/memories/{id}"), key, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}");
    }
    let (status, page) = send(r, "GET", "/v1/browse?limit=100", key, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        !page.to_string().contains(old_word) && !page.to_string().contains(new_word),
        "{page}"
    );
    let left = crate::erasure_bytes::holding_any(&data, &[old_word, new_word]);
    assert!(left.is_empty(), "deleted text on disk: {left:?}");
    // Deleting it again: nothing left to delete, as for a missing memory.
    let (status, _) = send(r, "DELETE", &format!("/memories/{old}"), key, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Delete-all takes the other line whole too, from its old version's
    // side as much as its new one's.
    let (other_old, other_new) = lines[1].clone();
    let (status, cleared) = send(r, "DELETE", "/memories?user_id=alice", key, None).await;
    assert_eq!(status, StatusCode::OK, "{cleared}");
    let mut ids: Vec<&str> = cleared["deleted"]
        .as_array()
        .expect("deleted")
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    ids.sort_unstable();
    let mut expected = vec![other_old.as_str(), other_new.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected, "{cleared}");
    let (status, _) = send(r, "GET", &format!("/memories/{other_old}"), key, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let left = crate::erasure_bytes::holding_any(&data, &[other_word]);
    assert!(left.is_empty(), "deleted text on disk: {left:?}");
}

/// One request with the given headers (no `Authorization` unless named).
async fn with_headers(
    router: &axum::Router,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
) -> (StatusCode, Value) {
    use tower::ServiceExt;
    let mut request = axum::http::Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = router
        .clone()
        .oneshot(request.body(axum::body::Body::empty()).expect("request"))
        .await
        .expect("answer");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// mem0's clients send the key as `X-API-Key` (its server) or
/// `Authorization: Token` (its platform client) and check it at
/// `GET /v1/ping/`: each authenticates exactly like `Authorization:
/// Bearer`, and the authentication layer refuses a wrong key, two
/// different keys and an unknown scheme.
#[tokio::test]
async fn mem0_key_headers_and_ping_authenticate_like_bearer() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let r = &w.router;
    for headers in [
        vec![("x-api-key", alice.key.clone())],
        vec![("authorization", format!("Token {}", alice.key))],
        vec![("authorization", format!("Bearer {}", alice.key))],
        vec![
            ("authorization", format!("Bearer {}", alice.key)),
            ("x-api-key", alice.key.clone()),
        ],
    ] {
        let (status, body) = with_headers(r, "GET", "/memories?user_id=alice", &headers).await;
        assert_eq!(status, StatusCode::OK, "{headers:?}: {body}");
        for path in ["/v1/ping/", "/v1/ping", "/v1/ping/?org_id=o&project_id=p"] {
            let (status, body) = with_headers(r, "GET", path, &headers).await;
            assert_eq!(status, StatusCode::OK, "{path}: {body}");
            assert_eq!(body["status"], "ok", "{body}");
            // mem0's client needs both set; they name the key's tenant
            // and principal.
            assert_eq!(
                (&body["org_id"], &body["project_id"]),
                (&json!("tenant-a"), &json!("alice")),
                "{body}"
            );
        }
    }
    for (headers, code) in [
        (vec![], "missing_key"),
        (vec![("x-api-key", "mk_nonsense".to_owned())], "invalid_key"),
        (
            vec![
                ("authorization", format!("Bearer {}", alice.key)),
                ("x-api-key", bob.key.clone()),
            ],
            "invalid_key",
        ),
        (
            vec![("authorization", format!("Basic {}", alice.key))],
            "invalid_key",
        ),
    ] {
        for path in ["/v1/ping/", "/memories?user_id=alice"] {
            let (status, body) = with_headers(r, "GET", path, &headers).await;
            assert_eq!(
                (status, error_code(&body).as_str()),
                (StatusCode::UNAUTHORIZED, code),
                "{path} {headers:?}"
            );
        }
    }
    // X-API-Key is bob's key, not alice's: alice's user is refused.
    let (status, body) = with_headers(
        r,
        "GET",
        "/memories?user_id=alice",
        &[("x-api-key", bob.key.clone())],
    )
    .await;
    assert_eq!(
        (status, error_code(&body).as_str()),
        (StatusCode::FORBIDDEN, "user_mismatch")
    );
}

/// The request shapes of mem0's current server and clients: `top_k`,
/// `filters` and `threshold` on search, `expiration_date`, `memory_type`,
/// `prompt`, `infer` and `metadata` on add. What maps is mapped (and
/// shown to take effect); what does not is named in `ignored` (a filter
/// condition that cannot be applied is refused instead).
#[tokio::test]
async fn mem0s_current_request_fields_map_or_are_named_as_ignored() {
    let w = world();
    let alice = &w.principals[0];
    let r = &w.router;
    let key = Some(alice.key.as_str());
    let now_ms = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");
    let day_ms = 86_400_000;
    let in_ten_days = now_ms / day_ms * day_ms + 10 * day_ms;
    let date = mosaic_service::instants::rfc3339(in_ten_days)[..10].to_owned();
    let (status, added) = send(
        r,
        "POST",
        "/memories",
        key,
        Some(json!({
            "messages": [
                {"role": "user", "content": "Book the ferry to Bergen for Friday."},
                {"role": "assistant", "content": ""},
                {"role": "user", "content": "Window seat on the ferry, please."}
            ],
            "user_id": "alice",
            "run_id": "travel",
            "expiration_date": date,
            "memory_type": "episodic",
            "prompt": "extract travel plans",
            "infer": false,
            "metadata": {"topic": "travel"}
        })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{added}");
    assert_eq!(
        added["ignored"],
        json!(["infer", "memory_type", "prompt"]),
        "{added}"
    );
    assert_eq!(
        added["skipped"],
        json!([{"index": 1, "reason": "empty_content"}]),
        "{added}"
    );
    let ids: Vec<String> = added["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 2, "{added}");
    // expiration_date is the memory's expiry: the end of that UTC day.
    let end_of_day = in_ten_days + day_ms;
    for id in &ids {
        let (status, view) = send(r, "GET", &format!("/v1/memories/{id}"), key, None).await;
        assert_eq!(status, StatusCode::OK, "{view}");
        let expires = view["record"]["expires_at_unix_ms"]
            .as_u64()
            .expect("expiry");
        assert!(
            expires >= end_of_day && expires - end_of_day < 60_000,
            "expires {expires}, end of {date} is {end_of_day}"
        );
    }
    let (status, other) = send(
        r,
        "POST",
        "/memories",
        key,
        Some(json!({"messages": "I collect old ferry tickets.", "user_id": "alice"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    for bad in ["2001-01-01", "2030-02-30", "tomorrow"] {
        let (status, body) = send(
            r,
            "POST",
            "/memories",
            key,
            Some(json!({"messages": "x y z", "user_id": "alice", "expiration_date": bad})),
        )
        .await;
        assert_eq!(
            (status, error_code(&body).as_str()),
            (StatusCode::BAD_REQUEST, "invalid_field"),
            "{bad}: {body}"
        );
    }

    // search: top_k, filters (alone or under AND), threshold; score 0-1.
    let search = |body: Value| send(r, "POST", "/search", key, Some(body));
    let (status, found) = search(json!({
        "query": "ferry", "top_k": 5, "filters": {"user_id": "alice"}
    }))
    .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let hits = found["results"].as_array().expect("results");
    assert_eq!(hits.len(), 3, "{found}");
    assert!(found.get("ignored").is_none(), "{found}");
    // The score is the stated mapping of the native recall's score.
    let (_, native) = send(
        r,
        "POST",
        "/v1/recall",
        key,
        Some(json!({"query": "ferry", "max_records": 5})),
    )
    .await;
    for hit in hits {
        let score = hit["score"].as_f64().expect("score");
        assert!((0.0..1.0).contains(&score), "{hit}");
        let fused = native["memories"]
            .as_array()
            .expect("memories")
            .iter()
            .find(|m| m["record_id"] == hit["id"])
            .and_then(|m| m["score"].as_f64())
            .expect("recalled natively too");
        assert!(
            (score - mosaic_server::mem0::mem0_score(fused)).abs() < 1e-12
                && (score - fused / (fused + 10.0)).abs() < 1e-12,
            "{score} vs {fused}"
        );
    }
    let (_, one) = search(json!({"query": "ferry", "top_k": 1})).await;
    assert_eq!(one["results"].as_array().map(Vec::len), Some(1), "{one}");
    let (_, travel) = search(json!({
        "query": "ferry",
        "filters": {"AND": [{"user_id": "alice"}, {"run_id": "travel"}], "topic": {"in": ["travel"]}}
    }))
    .await;
    let mut travel_ids: Vec<&str> = travel["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    travel_ids.sort_unstable();
    let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(travel_ids, expected, "{travel}");
    assert!(travel.get("ignored").is_none(), "{travel}");
    // threshold cuts on the 0-1 score.
    let scores: Vec<f64> = hits.iter().filter_map(|h| h["score"].as_f64()).collect();
    assert!(scores.iter().any(|s| *s > 0.0), "{scores:?}");
    let cut = (scores.iter().cloned().fold(f64::MIN, f64::max)
        + scores.iter().cloned().fold(f64::MAX, f64::min))
        / 2.0;
    let (_, above) = search(json!({"query": "ferry", "threshold": cut})).await;
    let kept: Vec<f64> = above["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|h| h["score"].as_f64())
        .collect();
    assert_eq!(
        kept.len(),
        scores.iter().filter(|s| **s >= cut).count(),
        "{above}"
    );
    assert!(kept.iter().all(|s| *s >= cut), "{above}");
    for (body, what) in [
        (json!({"query": "ferry", "threshold": 1.5}), "threshold"),
        (json!({"query": "ferry", "top_k": 0}), "top_k"),
        (
            json!({"query": "ferry", "top_k": 2, "limit": 3}),
            "top_k and limit",
        ),
        (
            json!({"query": "ferry", "user_id": "alice", "filters": {"user_id": "bob"}}),
            "two users",
        ),
    ] {
        let (status, answer) = search(body).await;
        assert_eq!(
            (status, error_code(&answer).as_str()),
            (StatusCode::BAD_REQUEST, "invalid_field"),
            "{what}: {answer}"
        );
    }
    let (status, answer) = search(json!({"query": "ferry", "filters": ["user_id"]})).await;
    assert_eq!(
        (status, error_code(&answer).as_str()),
        (StatusCode::BAD_REQUEST, "invalid_filter"),
        "{answer}"
    );
}

/// mem0's `filters` on metadata and `created_at` restrict a search before
/// ranking, on the open-source route and the platform's v2 and v3 routes,
/// and the platform listing before paging. The one memory a filter keeps
/// ranks last for the query, so `top_k: 1` finds it only if the filter ran
/// inside eligibility: a post-filter on the top one would answer nothing.
#[tokio::test]
async fn mem0_filters_restrict_the_memories_before_ranking_and_paging() {
    mem0_filters_restrict_the_memories_before_ranking_and_paging_on(&world()).await;
}

pub(crate) async fn mem0_filters_restrict_the_memories_before_ranking_and_paging_on(w: &World) {
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let r = &w.router;
    let key = Some(alice.key.as_str());
    let add = |who: &'static str, key: &str, text: String, metadata: Value| {
        let key = key.to_owned();
        async move {
            let (status, added) = send(
                r,
                "POST",
                "/memories",
                Some(key.as_str()),
                Some(json!({"messages": text, "user_id": who, "metadata": metadata})),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{added}");
            added["results"][0]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("accepted: {added}"))
                .to_owned()
        }
    };
    let ferries = [
        "The ferry to Bergen leaves at dawn; ferry tickets are cheap.",
        "Ferry crossings to Oslo take a night; the ferry has cabins.",
        "On the Hamburg ferry the ferry cafe sells coffee.",
        "The island ferry runs hourly; ferry fares went up.",
        "Ferry strikes in Calais delayed the ferry by a day.",
        "Our ferry to Tallinn was late; that ferry is always late.",
        "The ferry deck is windy; bring a jacket on any ferry.",
        "Night ferry from Kiel: the ferry buffet is good.",
    ];
    for (i, text) in ferries.into_iter().enumerate() {
        add(
            "alice",
            &alice.key,
            text.to_owned(),
            json!({"topic": "travel", "priority": i}),
        )
        .await;
    }
    let rare = add(
        "alice",
        &alice.key,
        "Grandmother's recipe book mentions a ferry once, among many soups.".to_owned(),
        json!({"topic": "Family Recipes", "priority": 9, "tags": ["soup", "old"]}),
    )
    .await;
    // Bob's memory carries the same metadata: no filter reaches it.
    add(
        "bob",
        &bob.key,
        "Bob's ferry recipe notes.".to_owned(),
        json!({"topic": "Family Recipes", "priority": 9}),
    )
    .await;

    let ids = |answer: &Value| -> Vec<String> {
        let mut ids: Vec<String> = answer["results"]
            .as_array()
            .unwrap_or_else(|| panic!("results: {answer}"))
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_owned))
            .collect();
        ids.sort();
        ids
    };
    let (_, unfiltered) = send(
        r,
        "POST",
        "/search",
        key,
        Some(json!({"query": "ferry", "user_id": "alice", "top_k": 1})),
    )
    .await;
    assert_ne!(ids(&unfiltered), vec![rare.clone()], "{unfiltered}");
    let tomorrow = mosaic_service::instants::rfc3339(
        u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_millis(),
        )
        .expect("ms")
            + 86_400_000,
    );
    let day_after = &tomorrow[..10];
    let keeping_rare = [
        json!({"topic": "Family Recipes"}),
        json!({"AND": [{"user_id": "alice"}, {"topic": {"eq": "Family Recipes"}}]}),
        json!({"metadata": {"topic": "Family Recipes"}}),
        json!({"topic": {"icontains": "recipes"}}),
        json!({"topic": {"contains": "Family"}}),
        json!({"tags": {"contains": "soup"}}),
        json!({"tags": "*"}),
        json!({"priority": {"gte": 9}}),
        json!({"priority": {"in": [9, 10]}}),
        json!({"OR": [{"topic": "nothing"}, {"priority": 9}]}),
        json!({"NOT": [{"topic": "travel"}]}),
        json!({"NOT": {"topic": {"ne": "Family Recipes"}}}),
        json!({"topic": {"nin": ["travel"]}, "created_at": {"lt": day_after}}),
        json!({"AND": [{"priority": {"gt": 8}}, {"created_at": {"gte": "2020-01-01", "lte": tomorrow}}]}),
    ];
    for filters in &keeping_rare {
        for path in ["/search", "/v2/memories/search/", "/v3/memories/search/"] {
            let mut body = json!({"query": "ferry", "top_k": 1, "filters": filters});
            if path == "/search" {
                body["user_id"] = json!("alice");
            } else {
                body["filters"] = json!({"AND": [{"user_id": "alice"}, filters]});
            }
            let (status, found) = send(r, "POST", path, key, Some(body)).await;
            assert_eq!(status, StatusCode::OK, "{path} {filters}: {found}");
            assert_eq!(ids(&found), vec![rare.clone()], "{path} {filters}: {found}");
            assert!(found.get("ignored").is_none(), "{found}");
        }
        for path in ["/v2/memories/", "/v3/memories/"] {
            let (status, page) = send(
                r,
                "POST",
                path,
                key,
                Some(json!({"filters": {"AND": [{"user_id": "alice"}, filters]}})),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{path} {filters}: {page}");
            assert_eq!(page["count"], 1, "{path} {filters}: {page}");
            assert_eq!(ids(&page), vec![rare.clone()], "{path} {filters}: {page}");
        }
    }
    // The other side: a filter the travel memories match leaves the rare
    // one out; one nothing matches finds nothing (and lists nothing).
    let (_, travel) = send(
        r,
        "POST",
        "/v3/memories/?page_size=3",
        key,
        Some(json!({"filters": {"user_id": "alice", "topic": "travel", "priority": {"lt": 6}}})),
    )
    .await;
    assert_eq!(travel["count"], 6, "{travel}");
    assert_eq!(
        travel["results"].as_array().map(Vec::len),
        Some(3),
        "{travel}"
    );
    assert!(travel["next"].is_string(), "{travel}");
    for filters in [
        json!({"created_at": {"gte": day_after}}),
        json!({"topic": "Family Recipes", "priority": 8}),
        json!({"missing": "*"}),
    ] {
        let (_, none) = send(
            r,
            "POST",
            "/search",
            key,
            Some(json!({"query": "ferry", "user_id": "alice", "filters": filters})),
        )
        .await;
        assert_eq!(none["results"], json!([]), "{filters}: {none}");
        let (_, listed) = send(
            r,
            "POST",
            "/v3/memories/",
            key,
            Some(json!({"filters": {"AND": [{"user_id": "alice"}, filters]}})),
        )
        .await;
        assert_eq!(listed["count"], 0, "{filters}: {listed}");
    }

    // Refused before any memory is read: a field there is no value for or
    // an identifier that would widen the read (the compat layer's
    // translation, 400 unsupported_filter), and a malformed condition (the
    // server's read filter check, 400 invalid_filter).
    for (filters, code) in [
        (json!({"app_id": "a"}), "unsupported_filter"),
        (
            json!({"updated_at": {"gte": "2024-01-01"}}),
            "unsupported_filter",
        ),
        (
            json!({"categories": {"contains": "food"}}),
            "unsupported_filter",
        ),
        (json!({"keywords": "x"}), "unsupported_filter"),
        (
            json!({"OR": [{"topic": "x"}, {"user_id": "bob"}]}),
            "unsupported_filter",
        ),
        (json!({"NOT": {"user_id": "bob"}}), "unsupported_filter"),
        (
            json!({"user_id": {"in": ["alice", "bob"]}}),
            "unsupported_filter",
        ),
        (json!({"topic": {"like": "x"}}), "invalid_filter"),
        (json!({"priority": {"gt": 0.5}}), "invalid_filter"),
        (
            json!({"created_at": {"gte": "yesterday"}}),
            "invalid_filter",
        ),
        (json!({"OR": []}), "invalid_filter"),
        (json!({"NOT": []}), "invalid_filter"),
        (json!({"metadata": "topic"}), "invalid_filter"),
        (json!({"OR": [{}]}), "invalid_filter"),
    ] {
        for (path, body) in [
            (
                "/search",
                json!({"query": "ferry", "user_id": "alice", "filters": filters}),
            ),
            (
                "/v3/memories/search/",
                json!({"query": "ferry", "filters": {"AND": [{"user_id": "alice"}, filters]}}),
            ),
            (
                "/v3/memories/",
                json!({"filters": {"AND": [{"user_id": "alice"}, filters]}}),
            ),
        ] {
            let (status, answer) = send(r, "POST", path, key, Some(body)).await;
            assert_eq!(
                (status, error_code(&answer).as_str()),
                (StatusCode::BAD_REQUEST, code),
                "{path} {filters}: {answer}"
            );
        }
    }
    // Bob's filter with alice's metadata finds only his own memory.
    let (_, bobs) = send(
        r,
        "POST",
        "/search",
        Some(bob.key.as_str()),
        Some(json!({"query": "ferry recipe", "user_id": "bob", "filters": {"topic": "Family Recipes"}})),
    )
    .await;
    assert_eq!(bobs["results"].as_array().map(Vec::len), Some(1), "{bobs}");
    assert_ne!(ids(&bobs), vec![rare], "{bobs}");
}

/// mem0's `run_id` (else `agent_id`) narrows a search to one conversation
/// inside the read's eligibility, before ranking: a conversation's memory
/// that ranks below more than 100 better matches of other conversations is
/// still found with `top_k: 1` (a narrowing applied to the ranked head
/// would miss it), and listing by `run_id` names only that conversation.
#[tokio::test]
async fn run_id_narrows_the_search_before_ranking() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let r = &w.router;
    let key = Some(alice.key.as_str());
    let places = [
        "Bergen",
        "Oslo",
        "Hamburg",
        "Calais",
        "Tallinn",
        "Kiel",
        "Dover",
        "Helsinki",
        "Gdansk",
        "Riga",
        "Malmo",
        "Visby",
        "Turku",
        "Aarhus",
        "Bodo",
        "Stavanger",
    ];
    let things = [
        "tickets",
        "cabins",
        "coffee",
        "fares",
        "delays",
        "decks",
        "buffets",
        "timetables",
        "crews",
        "engines",
        "harbours",
    ];
    let mut kept = 0;
    for (i, place) in places.iter().enumerate() {
        for (j, thing) in things.iter().enumerate() {
            let text = format!(
                "Ferry {i}{j}: the ferry to {place} has {thing}; ferry {thing} near {place} \
                 are noted on day {}.",
                i * 11 + j
            );
            let (status, added) = send(
                r,
                "POST",
                "/memories",
                key,
                Some(json!({"messages": text, "user_id": "alice", "run_id": format!("trip-{i}")})),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{added}");
            if added["results"][0]["id"].is_string() {
                kept += 1;
            }
        }
    }
    assert!(
        kept > 100,
        "the better matches must outnumber the old head of 100: {kept}"
    );
    let (status, added) = send(
        r,
        "POST",
        "/memories",
        key,
        Some(json!({
            "messages": "Grandmother's soup book mentions a ferry once.",
            "user_id": "alice",
            "run_id": "recipes"
        })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{added}");
    let rare = added["results"][0]["id"].as_str().expect("kept").to_owned();
    // Bob's conversation of the same name is his own.
    let (status, _) = send(
        r,
        "POST",
        "/memories",
        Some(bob.key.as_str()),
        Some(json!({"messages": "A ferry recipe.", "user_id": "bob", "run_id": "recipes"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let found_ids = |answer: &Value| -> Vec<String> {
        answer["results"]
            .as_array()
            .unwrap_or_else(|| panic!("results: {answer}"))
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_owned))
            .collect()
    };
    let (_, head) = send(
        r,
        "POST",
        "/search",
        key,
        Some(json!({"query": "ferry", "user_id": "alice", "top_k": 100})),
    )
    .await;
    assert!(
        !found_ids(&head).contains(&rare),
        "the recipe must rank below the first 100: {head}"
    );
    for body in [
        json!({"query": "ferry", "user_id": "alice", "run_id": "recipes", "top_k": 1}),
        json!({"query": "ferry", "user_id": "alice", "agent_id": "recipes", "top_k": 1}),
        json!({"query": "ferry", "filters": {"AND": [{"user_id": "alice"}, {"run_id": "recipes"}]}, "top_k": 1}),
    ] {
        let (status, found) = send(r, "POST", "/search", key, Some(body.clone())).await;
        assert_eq!(status, StatusCode::OK, "{body}: {found}");
        assert_eq!(found_ids(&found), vec![rare.clone()], "{body}: {found}");
    }
    let (_, trip) = send(
        r,
        "POST",
        "/search",
        key,
        Some(
            json!({"query": "Bergen tickets", "user_id": "alice", "run_id": "trip-0", "top_k": 20}),
        ),
    )
    .await;
    assert_eq!(found_ids(&trip).len(), 11, "{trip}");
    let (_, listed) = send(
        r,
        "GET",
        "/memories?user_id=alice&run_id=recipes",
        key,
        None,
    )
    .await;
    assert_eq!(found_ids(&listed), vec![rare], "{listed}");
}

/// A batch update cannot slip a duplicate past the text guard by giving
/// two of its memories the same new text: the later one is related to the
/// earlier one of the batch (the service's text guard within the call)
/// and the gate refuses it in the batch's transaction, so neither memory
/// is updated.
#[tokio::test]
async fn a_batch_update_giving_two_memories_one_text_is_refused_whole() {
    let w = world();
    let r = &w.router;
    let key = Some(w.principals[0].key.as_str());
    let ids = add_for_alice(
        r,
        key,
        &["The codename is Heron.", "The launch is in March."],
    )
    .await;
    let (_, before) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    let same = "The budget is twelve thousand euros for the whole quarter.";
    let (status, answer) = send(
        r,
        "PUT",
        "/v1/batch/",
        key,
        Some(json!({"memories": [
            {"memory_id": ids[0], "text": same},
            {"memory_id": ids[1], "text": same},
        ]})),
    )
    .await;
    assert_eq!(
        (status, error_code(&answer).as_str()),
        (StatusCode::CONFLICT, "write_refused"),
        "{answer}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("memories[1]") && m.contains("duplicate_memory")),
        "{answer}"
    );
    let (_, after) = send(r, "GET", "/memories?user_id=alice", key, None).await;
    assert_eq!(after["results"], before["results"], "a memory was written");
}
