//! Ids are tenant-local and a record the key may not see answers exactly
//! like a missing one: two tenants, two principals each, one client-chosen
//! id used by all four, and every route that names a record or proposal
//! (get, deletion, revoke, verify, derived_from, supersedes) answered
//! identically for a hidden id and an id that never existed.

use axum::http::StatusCode;
use mosaic_service::examples::{distinct_note, preference, workspace_fact};
use serde_json::{Value, json};

use crate::common::{Principal, WORKSPACE, World, error_code, propose, send, world};

const CLIENT_RECORD_ID: &str = "shared-record";
const CLIENT_PROPOSAL_ID: &str = "shared-proposal";

/// A private memory with the shared client ids.
fn private(p: &Principal) -> Value {
    let mut body = serde_json::to_value(preference(
        &format!("oracle-{}-{}", p.tenant, p.principal),
        &p.principal,
        &format!("{} of {} keeps a private note", p.principal, p.tenant),
        Some(p.consent.clone()),
    ))
    .expect("json");
    body["record_id"] = json!(CLIENT_RECORD_ID);
    body["proposal_id"] = json!(CLIENT_PROPOSAL_ID);
    body
}

/// The answer, with `id` replaced by a placeholder, so a hidden id and a
/// missing one compare equal exactly when they answer alike.
async fn answer(
    w: &World,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
    id: &str,
) -> (StatusCode, String) {
    let path = path.replace("{id}", id);
    let body =
        body.map(|b| serde_json::from_str(&b.to_string().replace("{id}", id)).expect("json"));
    let (status, r) = send(&w.router, method, &path, Some(key), body).await;
    (status, r.to_string().replace(id, "<id>"))
}

/// A proposal that names `{id}` as its lineage (declared as a source too).
fn deriving(p: &Principal) -> Value {
    let mut body = serde_json::to_value(workspace_fact(
        &format!("derive-{}-{}", p.tenant, p.principal),
        WORKSPACE,
        "the summary of a note",
    ))
    .expect("json");
    let mut source = body["sources"][0].clone();
    source["source_id"] = json!("{id}");
    body["sources"]
        .as_array_mut()
        .expect("sources")
        .push(source);
    body["derived_from"] = json!(["{id}"]);
    body
}

fn superseding(p: &Principal) -> Value {
    let mut body = serde_json::to_value(preference(
        &format!("supersede-{}-{}", p.tenant, p.principal),
        &p.principal,
        "a correction of a note",
        Some(p.consent.clone()),
    ))
    .expect("json");
    body["supersedes_record_id"] = json!("{id}");
    body["expected_line_generation"] = json!(1);
    body
}

#[tokio::test]
async fn client_ids_are_tenant_local_and_hidden_records_answer_like_missing_ones() {
    let w = world();
    // All four principals use the same client-chosen ids: each is accepted
    // and gets its own stored ids (no 409, no squatting across tenants or
    // principals).
    let mut ids = Vec::new();
    for p in &w.principals {
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/memories",
            Some(&p.key),
            Some(private(p)),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{}/{}: {r}", p.tenant, p.principal);
        assert_eq!(r["decision"], "accepted", "{r}");
        assert_eq!(r["replayed"], false, "{r}");
        let record = r["record_id"].as_str().expect("record id").to_owned();
        let proposal = r["proposal_id"].as_str().expect("proposal id").to_owned();
        assert_ne!(record, CLIENT_RECORD_ID);
        ids.push((record, proposal));
    }
    for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
            assert_ne!(a.0, b.0, "record ids collide");
            assert_ne!(a.1, b.1, "proposal ids collide");
        }
    }
    // The same key replays its own decision.
    let owner = &w.principals[0];
    let (_, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&owner.key),
        Some(private(owner)),
    )
    .await;
    assert_eq!(r["replayed"], true, "{r}");
    assert_eq!(r["record_id"].as_str(), Some(ids[0].0.as_str()));
    let replayed = r;

    let (hidden_record, hidden_proposal) = ids[0].clone();
    let missing_record = "m-00000000000000000000000000000000";
    let missing_proposal = "p-00000000000000000000000000000000";
    // Same tenant other principal, and other tenant same principal name.
    let probers = [&w.principals[1], &w.principals[2]];
    for prober in probers {
        let who = format!("{}/{}", prober.tenant, prober.principal);
        let record_routes: Vec<(&str, &str, Option<Value>)> = vec![
            ("GET", "/v1/memories/{id}", None),
            ("GET", "/v1/memories/{id}/deletion", None),
            ("POST", "/v1/memories/{id}/revoke", Some(json!({}))),
            ("POST", "/v1/memories", Some(deriving(prober))),
            ("POST", "/v1/memories", Some(superseding(prober))),
        ];
        for (method, path, body) in record_routes {
            let hidden = answer(&w, method, path, &prober.key, body.clone(), &hidden_record).await;
            let missing = answer(&w, method, path, &prober.key, body, missing_record).await;
            assert_eq!(
                hidden, missing,
                "{who} {method} {path}: hidden differs from missing"
            );
            assert_eq!(
                hidden.0,
                StatusCode::NOT_FOUND,
                "{who} {method} {path}: {}",
                hidden.1
            );
        }
        // Verified alone, or with the owner's receipt and signature held
        // (taken from the owner's answer): the held receipt tells nothing
        // about a proposal the prober may not see.
        let verifies = [
            json!({"kind": "write", "proposal_id": "{id}"}),
            json!({"kind": "write", "proposal_id": "{id}",
                   "receipt": replayed["receipt"],
                   "receipt_signature": replayed["receipt_signature"]}),
        ];
        for verify in verifies {
            let hidden = answer(
                &w,
                "POST",
                "/v1/verify",
                &prober.key,
                Some(verify.clone()),
                &hidden_proposal,
            )
            .await;
            let missing = answer(
                &w,
                "POST",
                "/v1/verify",
                &prober.key,
                Some(verify),
                missing_proposal,
            )
            .await;
            assert_eq!(hidden, missing, "{who} verify: hidden differs from missing");
            assert_eq!(hidden.0, StatusCode::NOT_FOUND);
        }
        // Naming the owner's *client* ids reaches only the prober's own.
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/verify",
            Some(&prober.key),
            Some(json!({"kind": "write", "proposal_id": CLIENT_PROPOSAL_ID})),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{r}");
        error_code(&r);
    }
    // The owner still sees, verifies and holds its record: no probe revoked
    // or superseded it.
    let (status, r) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{hidden_record}"),
        Some(&owner.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["state"], "active", "{r}");
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&owner.key),
        Some(json!({"kind": "write", "proposal_id": hidden_proposal})),
    )
    .await;
    assert_eq!(
        (status, r["valid"].clone()),
        (StatusCode::OK, json!(true)),
        "{r}"
    );
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&owner.key),
        Some(json!({"kind": "write", "proposal_id": hidden_proposal,
                    "receipt": replayed["receipt"],
                    "receipt_signature": replayed["receipt_signature"]})),
    )
    .await;
    assert_eq!(
        (status, r),
        (StatusCode::OK, json!({"valid": true, "problem": null}))
    );
}

/// A shared (workspace) record stays verifiable by the other principals
/// who may read it: visibility, not authorship, decides.
#[tokio::test]
async fn a_readable_workspace_record_verifies_for_its_readers_only() {
    let w = world();
    let (alice, bob, other) = (&w.principals[0], &w.principals[1], &w.principals[2]);
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(
            serde_json::to_value(workspace_fact(
                "shared",
                WORKSPACE,
                "the build runs nightly",
            ))
            .expect("json"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let proposal = r["proposal_id"].clone();
    let verify = json!({"kind": "write", "proposal_id": proposal});
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&bob.key),
        Some(verify.clone()),
    )
    .await;
    assert_eq!(
        (status, r["valid"].clone()),
        (StatusCode::OK, json!(true)),
        "{r}"
    );
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&other.key),
        Some(verify),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{r}");
}

/// `body` with one flaw a check after the named records' resolution would
/// catch, by name; `None` when the flaw does not apply to this proposal.
fn flawed(body: &Value, flaw: &str) -> Option<Value> {
    let mut body = body.clone();
    match flaw {
        "none" => {}
        // The service's lifetime check: 400 integer_out_of_range.
        "ttl_beyond_2^53" => body["ttl_ms"] = json!(9_007_199_254_740_991_u64),
        // The cite resolution: 404 for the message.
        "unknown_cite" => {
            body["cites"] = json!([{"conversation_id": "nowhere", "message_id": "none"}]);
        }
        // The verbatim verifier: 400 on a source text that is not the source.
        "wrong_source_text" => {
            let source = body["sources"][0]["source_id"].as_str()?.to_owned();
            body["source_texts"][source] = json!("a text the source never held");
        }
        // The write gate: rejected for want of consent.
        "no_consent" => {
            body.get("consent_receipt_sha256")?.as_str()?;
            body["consent_receipt_sha256"] = Value::Null;
        }
        // The store's generation fence: 409 stale generation.
        "stale_generation" => {
            body.get("supersedes_record_id")?.as_str()?;
            body["expected_line_generation"] = json!(99);
        }
        // The store's lineage check: 400, a lineage that is no declared source.
        "undeclared_lineage" => {
            body["derived_from"].as_array()?.first()?;
            let sources = body["sources"].as_array_mut()?;
            sources.retain(|s| s["source_id"] != "{id}");
        }
        // The request decoder: 400 on an unknown kind.
        "bad_kind" => body["kind"] = json!("gossip"),
        // The provenance guard (under the default write guards): 403
        // independent_evidence_required for a workspace fact the writer
        // only quoted.
        "own_quote_only" => {
            body["subject"]["workspace_id"].as_str()?;
        }
        other => panic!("no flaw {other}"),
    }
    Some(body)
}

/// A proposal naming a record the key may not see (another principal's in
/// its tenant, or any record of another tenant) answers exactly like one
/// naming a record that never existed, whatever else is wrong with it: the
/// service resolves the named records (`prepare_write`, before the lifetime,
/// cite, evidence, guard, store and gate checks) and answers 404 for both,
/// so no later check can tell them apart.
#[tokio::test]
async fn a_flawed_proposal_naming_a_hidden_record_answers_like_one_naming_a_missing_one() {
    let w = world();
    let mut ids = Vec::new();
    for p in &w.principals {
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/memories",
            Some(&p.key),
            Some(private(p)),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{r}");
        ids.push(r["record_id"].as_str().expect("record id").to_owned());
    }
    let prober = &w.principals[1];
    assert_eq!(prober.tenant, w.principals[0].tenant);
    assert_ne!(prober.tenant, w.principals[2].tenant);
    let other_principals = ids[0].clone();
    let other_tenants = ids[2].clone();
    let missing = "m-00000000000000000000000000000000";
    let flaws = [
        "none",
        "ttl_beyond_2^53",
        "unknown_cite",
        "wrong_source_text",
        "no_consent",
        "stale_generation",
        "undeclared_lineage",
        "bad_kind",
        "own_quote_only",
    ];
    let mut compared = 0;
    for guards in ["any evidence", "default guards"] {
        if guards == "default guards" {
            // The provenance guard's own check runs under the default
            // write guards only.
            let (status, r) = send(
                &w.router,
                "PUT",
                &format!("/v1/admin/tenants/{}/policy", prober.tenant),
                Some(&w.admin_key),
                Some(json!({"write_guards": {}})),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{r}");
        }
        for base in [deriving(prober), superseding(prober)] {
            for flaw in flaws {
                let Some(body) = flawed(&base, flaw) else {
                    continue;
                };
                let path = "/v1/memories";
                let key = &prober.key;
                let answer_missing =
                    answer(&w, "POST", path, key, Some(body.clone()), missing).await;
                let principal_answer =
                    answer(&w, "POST", path, key, Some(body.clone()), &other_principals).await;
                let tenant_answer =
                    answer(&w, "POST", path, key, Some(body.clone()), &other_tenants).await;
                assert_eq!(
                    principal_answer, answer_missing,
                    "{guards}, flaw {flaw}: another principal's record answers unlike a missing one"
                );
                assert_eq!(
                    tenant_answer, answer_missing,
                    "{guards}, flaw {flaw}: another tenant's record answers unlike a missing one"
                );
                // Only the decoder runs before the resolution; after it,
                // every answer is the resolution's 404 for the record.
                if flaw == "bad_kind" {
                    assert_eq!(answer_missing.0, StatusCode::BAD_REQUEST, "{flaw}");
                } else {
                    assert_eq!(
                        answer_missing.0,
                        StatusCode::NOT_FOUND,
                        "{guards}, flaw {flaw}: {}",
                        answer_missing.1
                    );
                    assert!(answer_missing.1.contains("<id>"), "{}", answer_missing.1);
                }
                compared += 1;
            }
        }
    }
    assert!(compared >= 20, "every flaw was compared: {compared}");
    // The flaws are real: without a named record, each one fails on its own.
    let unnamed = |mut body: Value| {
        body["supersedes_record_id"] = Value::Null;
        body["expected_line_generation"] = Value::Null;
        if let Some(derived) = body["derived_from"].as_array_mut() {
            derived.clear();
        }
        if let Some(sources) = body["sources"].as_array_mut() {
            sources.retain(|s| s["source_id"] != "{id}");
        }
        body
    };
    let expectations = [
        (
            superseding(prober),
            "ttl_beyond_2^53",
            "integer_out_of_range",
        ),
        (superseding(prober), "unknown_cite", "not_found"),
        (superseding(prober), "wrong_source_text", "invalid_digest"),
        (
            deriving(prober),
            "own_quote_only",
            "independent_evidence_required",
        ),
    ];
    for (base, flaw, code) in expectations {
        let body = unnamed(flawed(&base, flaw).expect("applies"));
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/memories",
            Some(&prober.key),
            Some(body),
        )
        .await;
        assert!(status.is_client_error(), "{flaw}: {status} {r}");
        assert_eq!(error_code(&r), code, "{flaw}: {r}");
    }
    let body = unnamed(flawed(&superseding(prober), "no_consent").expect("applies"));
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&prober.key),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["decision"], "rejected", "{r}");
}

/// The other surfaces that take a record id in a write answer alike for a
/// hidden record and a missing one: mem0's update and delete (the service's
/// `visible_row`, reached through `update_text` and `revoke`), and the MCP
/// tools `remember` with `supersedes`, `forget` and `explain` (the same
/// service functions, their errors as tool results).
#[tokio::test]
async fn mem0_and_mcp_writes_naming_a_hidden_record_answer_like_a_missing_one() {
    let w = world();
    let mut ids = Vec::new();
    for p in &w.principals {
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/memories",
            Some(&p.key),
            Some(private(p)),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{r}");
        ids.push(r["record_id"].as_str().expect("record id").to_owned());
    }
    let prober = &w.principals[1];
    let missing = "m-00000000000000000000000000000000";
    let named = [
        ("another principal's", ids[0].as_str()),
        ("another tenant's", ids[2].as_str()),
    ];
    let mem0: Vec<(&str, &str, Option<Value>)> = vec![
        (
            "PUT",
            "/memories/{id}",
            Some(json!({"text": "bob now likes coffee"})),
        ),
        ("DELETE", "/memories/{id}", None),
    ];
    for (method, path, body) in mem0 {
        let expected = answer(&w, method, path, &prober.key, body.clone(), missing).await;
        assert_eq!(
            expected.0,
            StatusCode::NOT_FOUND,
            "{method} {path}: {}",
            expected.1
        );
        for (whose, id) in named {
            let got = answer(&w, method, path, &prober.key, body.clone(), id).await;
            assert_eq!(got, expected, "mem0 {method} {path}: {whose} record");
        }
    }
    let session = crate::numbers::mcp_session(&w.router, &prober.key).await;
    let tool = |name: &str, arguments: Value, id: &str| {
        let arguments = arguments.to_string().replace("{id}", id);
        json!({
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": name, "arguments": serde_json::from_str::<Value>(&arguments).expect("json")}
        })
        .to_string()
    };
    let calls = [
        (
            "remember",
            json!({"text": "bob now likes coffee", "supersedes": "{id}"}),
        ),
        ("forget", json!({"record_id": "{id}"})),
        ("explain", json!({"record_id": "{id}"})),
    ];
    for (name, arguments) in calls {
        let (status, r) = crate::numbers::mcp_post(
            &w.router,
            &prober.key,
            &session,
            tool(name, arguments.clone(), missing),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{r}");
        let expected = comparable(name, &r["result"]).replace(missing, "<id>");
        if name != "explain" {
            assert_eq!(r["result"]["isError"], true, "{name}: {r}");
            assert!(expected.contains("not_found"), "{name}: {expected}");
        }
        for (whose, id) in named {
            let (status, r) = crate::numbers::mcp_post(
                &w.router,
                &prober.key,
                &session,
                tool(name, arguments.clone(), id),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{r}");
            assert_eq!(
                comparable(name, &r["result"]).replace(id, "<id>"),
                expected,
                "MCP {name}: {whose} record answers unlike a missing one"
            );
        }
    }
}

/// What of a tool result depends on the record named: all of it, except
/// for `explain`, whose recall part carries receipts of its own read
/// instant; there the record's part (structured, and the text before the
/// recall's lines).
fn comparable(tool: &str, result: &Value) -> String {
    if tool != "explain" {
        return result.to_string();
    }
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let record_lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("recall") && !l.contains("receipt "))
        .collect();
    let structured = &result["structuredContent"];
    json!({
        "isError": result["isError"],
        "record": structured["record"],
        "write_receipt": structured["write_receipt"],
        "revocation": structured["revocation"],
        "text": record_lines,
    })
    .to_string()
}

/// `GET /v1/browse` answers a principal exactly as it did before another
/// principal of its tenant wrote private memories: the same entries, the
/// same `scanned` count and the same `next_after` cursor, for every
/// filter and cursor. The store's walk (`RecordFilter::visible_to`) stops
/// it: the rows of a subject the caller may not read are never examined,
/// so they cannot be counted, end a page as its cursor, or be bisected by
/// moving `after`.
#[tokio::test]
async fn browse_answers_alike_whether_or_not_another_principal_holds_memories() {
    let w = world();
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let shared = workspace_fact("browse-shared", WORKSPACE, "The team meets on Mondays");
    let r = propose(&w.router, &bob.key, &shared).await;
    assert_eq!(r["decision"], "accepted", "{r}");
    let queries = [
        "/v1/browse",
        "/v1/browse?limit=1",
        "/v1/browse?q=the",
        "/v1/browse?state=active",
        "/v1/browse?kind=semantic",
        "/v1/browse?after=m-0",
        "/v1/browse?after=m-8",
    ];
    let browse_all = |key: String| {
        let router = w.router.clone();
        async move {
            let mut pages = Vec::new();
            for path in queries {
                let (status, page) = send(&router, "GET", path, Some(&key), None).await;
                assert_eq!(status, StatusCode::OK, "{path}: {page}");
                pages.push((path, page));
            }
            pages
        }
    };
    let before = browse_all(bob.key.clone()).await;
    for i in 0..6 {
        let request = preference(
            &format!("browse-private-{i}"),
            &alice.principal,
            &distinct_note(i),
            Some(alice.consent.clone()),
        );
        let r = propose(&w.router, &alice.key, &request).await;
        assert_eq!(r["decision"], "accepted", "{r}");
    }
    let after = browse_all(bob.key.clone()).await;
    for ((path, was), (_, now)) in before.iter().zip(&after) {
        assert_eq!(was, now, "{path}: bob's page changed when alice wrote");
    }
    // Alice's own page does show her memories and the shared one (the
    // filter narrows to what a principal may read, not to nothing).
    let (_, own) = send(&w.router, "GET", "/v1/browse", Some(&alice.key), None).await;
    assert_eq!(own["entries"].as_array().map(Vec::len), Some(7), "{own}");
    assert_eq!(
        own["scanned"],
        json!(7),
        "her six and the shared one: {own}"
    );
}
