//! Export then import: a principal's memories, the messages captured from
//! conversations and the facts citing them included, come back on the
//! same server (every line a replay, nothing written twice) and on a new
//! one (the same contents with the same evidence), each line decided
//! afresh by the gate under the importing key. Negative cases name the
//! layer that stops them.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::{WORKSPACE, World, error_code, send, send_raw, world};

async fn ingest(w: &World, key: &str, conversation: &str, body: Value) {
    let (status, body) = send(
        &w.router,
        "POST",
        &format!("/v1/conversations/{conversation}/messages"),
        Some(key),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["refused"], 0, "{body}");
}

async fn fact(w: &World, key: &str, body: Value) -> Value {
    let (status, body) = send(&w.router, "POST", "/v1/facts", Some(key), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "accepted", "{body}");
    body
}

async fn export(w: &World, key: &str) -> String {
    let (status, raw, _) = send_raw(&w.router, "GET", "/v1/export", Some(key), None).await;
    assert_eq!(status, StatusCode::OK);
    String::from_utf8(raw).expect("utf8")
}

async fn import(w: &World, key: &str, body: &str) -> (StatusCode, Value) {
    let (status, _, report) = send_raw(
        &w.router,
        "POST",
        "/v1/import",
        Some(key),
        Some(body.as_bytes().to_vec()),
    )
    .await;
    (status, report)
}

/// A conversation of alice's and two facts citing it: one about her
/// (resting on her consent), one workspace fact.
async fn alices_memories(w: &World) {
    let alice = &w.principals[0];
    ingest(
        w,
        &alice.key,
        "chat-1",
        json!({"messages": [
            {"id": "m1", "role": "user", "name": "Dana", "created_at": "2026-05-01", "content": "I moved to Berlin last month."},
            {"id": "m2", "role": "assistant", "content": "Noted: escalations go to the on-call lead."}
        ]}),
    )
    .await;
    fact(
        w,
        &alice.key,
        json!({"content": "I moved to Berlin", "cites": [{"conversation_id": "chat-1", "message_id": "m1"}]}),
    )
    .await;
    fact(
        w,
        &alice.key,
        json!({"content": "escalations go to the on-call lead", "workspace_id": WORKSPACE,
               "cites": [{"conversation_id": "chat-1", "message_id": "m2"}]}),
    )
    .await;
}

fn lines(export: &str) -> Vec<Value> {
    export
        .lines()
        .map(|l| serde_json::from_str(l).expect("an export line is JSON"))
        .collect()
}

/// What an export holds, without ids or instants: each line's type, its
/// text and the sources its record rests on.
fn contents(export: &str) -> BTreeSet<(String, String, Vec<String>)> {
    lines(export)
        .into_iter()
        .map(|l| {
            let kind = l["type"].as_str().expect("type").to_owned();
            let data = &l["data"];
            match kind.as_str() {
                "message" => (
                    kind,
                    data["text"].as_str().expect("text").to_owned(),
                    vec![format!(
                        "msg:{}/{}",
                        data["conversation_id"].as_str().expect("conversation"),
                        data["message_id"].as_str().expect("message")
                    )],
                ),
                _ => (
                    kind,
                    data["request"]["content"]
                        .as_str()
                        .expect("content")
                        .to_owned(),
                    data["record"]["sources"]
                        .as_array()
                        .expect("sources")
                        .iter()
                        .map(|s| s["source_id"].as_str().expect("source id").to_owned())
                        .collect(),
                ),
            }
        })
        .collect()
}

fn outcomes(report: &Value) -> Vec<(String, String)> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or("-").to_owned(),
                r["outcome"].as_str().expect("outcome").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_export_lists_captured_messages_before_the_facts_citing_them() {
    let w = world();
    alices_memories(&w).await;
    let text = export(&w, &w.principals[0].key).await;
    let types: Vec<String> = lines(&text)
        .iter()
        .map(|l| l["type"].as_str().expect("type").to_owned())
        .collect();
    assert_eq!(types, ["message", "message", "memory", "memory"], "{text}");
    let first = &lines(&text)[0]["data"];
    assert_eq!(first["conversation_id"], "chat-1");
    assert_eq!(first["message_id"], "m1");
    assert_eq!(
        first["text"],
        "[2026-05-01] Dana: I moved to Berlin last month."
    );
}

#[tokio::test]
async fn an_import_into_the_same_server_replays_every_line_and_writes_nothing_twice() {
    let w = world();
    alices_memories(&w).await;
    let alice = &w.principals[0];
    let before = export(&w, &alice.key).await;
    let (status, report) = import(&w, &alice.key, &before).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(
        (
            report["lines"].as_u64(),
            report["accepted"].as_u64(),
            report["rejected"].as_u64(),
            report["replayed"].as_u64()
        ),
        (Some(4), Some(0), Some(0), Some(4)),
        "{report}"
    );
    assert_eq!(report["errors"], json!({}), "{report}");
    // Every line says what happened, with the record it names.
    let results = report["results"].as_array().expect("results");
    assert!(
        results
            .iter()
            .all(|r| r["outcome"] == "replayed" && r["record_id"].is_string()),
        "{report}"
    );
    // Nothing was written twice: the export after is the export before.
    assert_eq!(export(&w, &alice.key).await, before);
    // Importing it again answers alike.
    let (status, again) = import(&w, &alice.key, &before).await;
    assert_eq!((status, &again), (StatusCode::OK, &report));
}

#[tokio::test]
async fn an_import_into_a_new_server_restores_the_memories_with_their_evidence() {
    let source = world();
    alices_memories(&source).await;
    let text = export(&source, &source.principals[0].key).await;
    // A new data directory, the same tenant and principal, a key of its own.
    let target = world();
    let alice = &target.principals[0];
    let (status, report) = import(&target, &alice.key, &text).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(
        outcomes(&report),
        [
            ("message".to_owned(), "accepted".to_owned()),
            ("message".to_owned(), "accepted".to_owned()),
            ("memory".to_owned(), "accepted".to_owned()),
            ("memory".to_owned(), "accepted".to_owned()),
        ],
        "{report}"
    );
    assert_eq!(report["accepted"], 4, "{report}");
    // The same contents resting on the same captured messages.
    let restored = export(&target, &alice.key).await;
    assert_eq!(contents(&restored), contents(&text));
    // And recalled as on the source.
    for w in [&source, &target] {
        let (status, recalled) = send(
            &w.router,
            "POST",
            "/v1/recall",
            Some(&w.principals[0].key),
            Some(json!({"query": "where did I move, Berlin"})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{recalled}");
        let found: BTreeSet<&str> = recalled["memories"]
            .as_array()
            .expect("memories")
            .iter()
            .filter_map(|m| m["content"].as_str())
            .collect();
        assert!(found.contains("I moved to Berlin"), "{recalled}");
        assert!(
            found.contains("[2026-05-01] Dana: I moved to Berlin last month."),
            "{recalled}"
        );
    }
    // A second import into the new server replays every line.
    let (status, again) = import(&target, &alice.key, &text).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["replayed"], 4, "{again}");
}

#[tokio::test]
async fn a_poisoned_export_is_refused_as_the_original_write_would_be() {
    let source = world();
    alices_memories(&source).await;
    let text = export(&source, &source.principals[0].key).await;
    let target = world();
    let alice = &target.principals[0];
    // The fact's content no longer quotes the message it cites: the
    // capture verifier does not support it, so the gate rejects it.
    let poisoned = text.replace(
        "\"content\":\"I moved to Berlin\"",
        "\"content\":\"I moved to Paris\"",
    );
    assert_ne!(poisoned, text);
    let (status, report) = import(&target, &alice.key, &poisoned).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let results = report["results"].as_array().expect("results");
    let paris = results
        .iter()
        .find(|r| r["kind"] == "memory" && r["outcome"] != "accepted")
        .expect("the poisoned fact is not accepted");
    assert_eq!(paris["outcome"], "rejected", "{report}");
    assert_eq!(report["accepted"], 3, "{report}");
    // A message id already used for other text is refused, as the
    // conversation endpoint refuses it, and nothing is written.
    let first = text.lines().next().expect("the first message's line");
    let other = first.replace(
        "Dana: I moved to Berlin last month.",
        "Dana: I moved to Rome last month.",
    );
    assert_ne!(other, first);
    let before = export(&target, &alice.key).await;
    let (status, report) = import(&target, &alice.key, &other).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["errors"]["1"], "message_id_in_use", "{report}");
    assert_eq!(export(&target, &alice.key).await, before);
}

#[tokio::test]
async fn an_imported_principal_fact_rests_on_the_importers_own_consent() {
    let source = world();
    alices_memories(&source).await;
    let text = export(&source, &source.principals[0].key).await;
    // On the new server alice withdrew the one consent she gave: the
    // exported digest is no consent of hers here and she holds no other,
    // so the gate rejects her fact about herself (and keeps the others).
    let target = world();
    let alice = &target.principals[0];
    let (status, body) = send(
        &target.router,
        "POST",
        &format!("/v1/consents/{}/withdraw", alice.consent),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, report) = import(&target, &alice.key, &text).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let about_her = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["kind"] == "memory" && r["outcome"] != "accepted")
        .expect("the principal fact is not accepted");
    assert_eq!(about_her["outcome"], "rejected", "{report}");
    assert!(
        about_her["code"]
            .as_str()
            .is_some_and(|c| c.contains("consent")),
        "{report}"
    );
    assert_eq!(report["accepted"], 3, "{report}");
}

#[tokio::test]
async fn another_principal_cannot_cite_alices_messages_through_an_import() {
    let w = world();
    alices_memories(&w).await;
    let text = export(&w, &w.principals[0].key).await;
    let bob = &w.principals[1];
    assert_eq!(bob.tenant, w.principals[0].tenant);
    // Alice's workspace fact (a subject bob may write too), without the
    // messages it cites: the cite lookup is keyed by the importing
    // principal, so alice's capture answers as a message never captured.
    let workspace_fact = text
        .lines()
        .find(|l| l.contains(WORKSPACE) && l.contains("\"type\":\"memory\""))
        .expect("the workspace fact's line");
    let (status, cited) = import(&w, &bob.key, workspace_fact).await;
    let missing = workspace_fact.replace("\"message_id\":\"m2\"", "\"message_id\":\"m-never\"");
    assert_ne!(missing, workspace_fact);
    let (missing_status, never) = import(&w, &bob.key, &missing).await;
    // A readable line refused is a 200 with the line's error, not a 400.
    assert_eq!(status, StatusCode::OK, "{cited}");
    assert_eq!(cited["errors"]["1"], "not_found", "{cited}");
    assert_eq!((missing_status, &never), (status, &cited));
    // Alice's fact about herself names her as its subject: refused for
    // bob whatever it cites.
    let about_alice = text
        .lines()
        .find(|l| l.contains("I moved to Berlin\"") && l.contains("\"type\":\"memory\""))
        .expect("the principal fact's line");
    let (status, report) = import(&w, &bob.key, about_alice).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["errors"]["1"], "principal_mismatch", "{report}");
}

#[tokio::test]
async fn a_malformed_line_among_good_ones_is_reported_and_the_rest_imported() {
    let source = world();
    alices_memories(&source).await;
    let text = export(&source, &source.principals[0].key).await;
    let target = world();
    let alice = &target.principals[0];
    let mixed = format!("{{not json}}\n{text}");
    let (status, report) = import(&target, &alice.key, &mixed).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["errors"], json!({"1": "malformed_line"}), "{report}");
    assert_eq!(report["accepted"], 4, "{report}");
    let first = &report["results"][0];
    assert_eq!(
        (
            first["line"].as_u64(),
            first["kind"].is_null(),
            first["outcome"].as_str()
        ),
        (Some(1), true, Some("error"))
    );
    // No readable line at all: 400 malformed_body.
    let (status, report) = import(&target, &alice.key, "{not json}\n{\"type\":\"nope\"}\n").await;
    assert_eq!(
        (status, error_code(&report).as_str()),
        (StatusCode::BAD_REQUEST, "malformed_body")
    );
}
