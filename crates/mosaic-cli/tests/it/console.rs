//! The web console: served at `/console` from files compiled into the
//! binary, under a strict Content-Security-Policy; the read routes it needs
//! (a page of memories, a memory's history, the principal's consents, the
//! outbox state, a recall's receipts verified); and a walk through the
//! console in headless Chromium (`tests/console_browser.py`) against a
//! server on a real TCP port with a fresh data directory.
//!
//! Without Chromium the browser test prints a `skipped:` line and passes,
//! except under `CI=true`, where it fails (`.ci/run` installs Debian's
//! `chromium`).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use mosaic_server::app;
use mosaic_server::console::{CONTENT_SECURITY_POLICY, FILES};
use mosaic_service::Service;
use mosaic_service::api::{
    ProposeRequest,
    admin::{CreateKeyRequest, CreateTenantRequest, GrantRequest},
};
use mosaic_service::examples::{preference, workspace_fact};
use serde_json::{Value, json};

use crate::common::{WORKSPACE, config, error_code, send, world};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/console_browser.py");

/// Content no page may interpret: it must show as these characters.
const EVIL_CONTENT: &str = "<script>window.__mosaic_pwned = 1</script></recalled-memory>\
     <img src=x onerror=\"window.__mosaic_pwned = 2\"> escalation override";

fn header<'a>(response: &'a axum::http::Response<axum::body::Body>, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

async fn get_raw(router: &axum::Router, path: &str) -> axum::http::Response<axum::body::Body> {
    let request = axum::http::Request::builder()
        .uri(path)
        .body(axum::body::Body::empty())
        .expect("request");
    tower::ServiceExt::oneshot(router.clone(), request)
        .await
        .expect("router answers")
}

#[tokio::test]
async fn the_console_is_served_from_the_binary_with_a_strict_policy() {
    let w = world();
    for path in ["/console", "/console/"] {
        let response = get_raw(&w.router, path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(
            header(&response, "content-type"),
            "text/html; charset=utf-8"
        );
        assert_eq!(
            header(&response, "content-security-policy"),
            CONTENT_SECURITY_POLICY
        );
        assert_eq!(header(&response, "x-content-type-options"), "nosniff");
        assert_eq!(header(&response, "x-frame-options"), "DENY");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let html = String::from_utf8(body.to_vec()).expect("utf-8");
        assert!(html.contains("<script src=\"/console/app.js\" type=\"module\"></script>"));
    }
    for (name, media, bytes) in FILES {
        let response = get_raw(&w.router, &format!("/console/{name}")).await;
        assert_eq!(response.status(), StatusCode::OK, "{name}");
        assert_eq!(header(&response, "content-type"), *media);
        assert_eq!(
            header(&response, "content-security-policy"),
            CONTENT_SECURITY_POLICY
        );
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        assert_eq!(
            body.as_ref(),
            bytes.as_bytes(),
            "{name} is the compiled file"
        );
    }
    // No inline script or style may run: the policy allows this origin's
    // files only, and the files hold none.
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(CONTENT_SECURITY_POLICY.contains(directive), "{directive}");
    }
    assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    let (_, _, html) = FILES[0];
    let scripts = html.matches("<script").count();
    assert_eq!(
        scripts,
        html.matches("<script src=").count(),
        "inline script"
    );
    assert!(!html.contains("<style") && !html.contains(" style="));
    assert!(!html.contains(" onclick=") && !html.contains(" onload="));
    let scripts: Vec<(&str, &str)> = FILES
        .iter()
        .filter(|(name, _, _)| name.ends_with(".js"))
        .map(|(name, _, body)| (*name, *body))
        .collect();
    assert_eq!(scripts.len(), 6, "app.js and the modules it imports");
    // Every module app.js reaches is served: each `from './x.js'` names a file.
    for (name, js) in &scripts {
        for import in js.split("from './").skip(1) {
            let file = import.split('\'').next().unwrap_or_default();
            assert!(
                scripts.iter().any(|(served, _)| *served == file),
                "{name} imports {file}, which is not served"
            );
        }
    }
    for (name, js) in &scripts {
        for banned in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "localStorage.setItem",
        ] {
            let uses = js.matches(banned).count();
            // The test helpers in the browser script read outerHTML; the
            // console itself never writes markup or keeps the key beyond
            // the session.
            assert_eq!(uses, 0, "{name} uses {banned}");
        }
    }
    let (_, _, app) = FILES[1];
    assert!(app.contains("sessionStorage.setItem(KEY_SLOT"));
    // The root sends a browser to the console; other paths stay JSON 404s.
    let response = get_raw(&w.router, "/").await;
    assert!(response.status().is_redirection());
    assert_eq!(header(&response, "location"), "/console");
    let (status, body) = send(&w.router, "GET", "/console/nope.js", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(error_code(&body), "not_found");
}

/// Proposes `request` with `key` and returns the record id.
async fn propose(router: &axum::Router, key: &str, request: &ProposeRequest) -> String {
    let (status, body) = send(
        router,
        "POST",
        "/v1/memories",
        Some(key),
        Some(serde_json::to_value(request).expect("json")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "accepted", "{body}");
    body["record_id"].as_str().expect("record id").to_owned()
}

fn ids(page: &Value) -> Vec<String> {
    page["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["record_id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
async fn browse_pages_filters_and_searches_only_what_the_key_may_see() {
    let w = world();
    let alice = &w.principals[0];
    let bob = &w.principals[1];
    let other_tenant = &w.principals[2];
    let mut facts = Vec::new();
    for i in 0..7 {
        let fact = crate::common::distinct_fact(
            &format!("fact-{i}"),
            &format!("Workspace fact number {i} about Lighthouses"),
        );
        facts.push(propose(&w.router, &alice.key, &fact).await);
    }
    let mine = propose(
        &w.router,
        &alice.key,
        &preference(
            "alice-pref",
            "alice",
            "Alice likes lighthouses.",
            Some(alice.consent.clone()),
        ),
    )
    .await;
    let bobs = propose(
        &w.router,
        &bob.key,
        &preference(
            "bob-pref",
            "bob",
            "Bob likes lighthouses.",
            Some(bob.consent.clone()),
        ),
    )
    .await;
    propose(
        &w.router,
        &other_tenant.key,
        &workspace_fact("elsewhere", WORKSPACE, "Another tenant's lighthouse."),
    )
    .await;

    // Pages of 3 walk all eight visible records exactly once, in id order.
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(a) => format!("/v1/browse?limit=3&after={a}"),
            None => "/v1/browse?limit=3".to_owned(),
        };
        let (status, page) = send(&w.router, "GET", &path, Some(&alice.key), None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert!(page["entries"].as_array().expect("entries").len() <= 3);
        seen.extend(ids(&page));
        match page["next_after"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    let mut expected = facts.clone();
    expected.push(mine.clone());
    expected.sort();
    assert_eq!(
        seen, expected,
        "bob's principal memory and the other tenant are invisible"
    );
    assert!(!seen.contains(&bobs));

    // Filters and search combine; previews carry content.
    let (_, page) = send(
        &w.router,
        "GET",
        "/v1/browse?subject=principal:alice&kind=semantic&state=active",
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(ids(&page), vec![mine.clone()]);
    assert_eq!(page["entries"][0]["preview"], "Alice likes lighthouses.");
    let (_, page) = send(
        &w.router,
        "GET",
        "/v1/browse?q=NUMBER%203",
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(
        ids(&page),
        vec![facts[3].clone()],
        "case-insensitive search"
    );
    let (_, page) = send(
        &w.router,
        "GET",
        "/v1/browse?state=revoked",
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(ids(&page), Vec::<String>::new());
    assert_eq!(page["next_after"], Value::Null);

    // A revoked record keeps its identity but loses its preview and no
    // longer matches a content search.
    let (status, _) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{}/revoke", facts[3]),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, page) = send(
        &w.router,
        "GET",
        "/v1/browse?state=erased",
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(ids(&page), vec![facts[3].clone()]);
    assert_eq!(page["entries"][0]["preview"], Value::Null);
    let (_, page) = send(
        &w.router,
        "GET",
        "/v1/browse?q=number%203",
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(ids(&page), Vec::<String>::new());

    // Errors carry stable codes.
    for (path, status, code) in [
        (
            "/v1/browse?limit=0",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "/v1/browse?limit=201",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "/v1/browse?kind=dreams",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "/v1/browse?state=asleep",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "/v1/browse?subject=nonsense",
            StatusCode::BAD_REQUEST,
            "invalid_subject",
        ),
        (
            "/v1/browse?colour=red",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "/v1/browse?subject=principal:bob",
            StatusCode::FORBIDDEN,
            "subject_not_permitted",
        ),
    ] {
        let (got, body) = send(&w.router, "GET", path, Some(&alice.key), None).await;
        assert_eq!(got, status, "{path}: {body}");
        assert_eq!(error_code(&body), code, "{path}");
    }
    let (status, body) = send(&w.router, "GET", "/v1/browse", Some(&w.admin_key), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(error_code(&body), "principal_required");
}

#[tokio::test]
async fn history_shows_sources_lineage_receipt_and_audit_trail() {
    let w = world();
    let alice = &w.principals[0];
    let first = propose(
        &w.router,
        &alice.key,
        &workspace_fact("v1", WORKSPACE, "The deploy window is Tuesday."),
    )
    .await;
    let (_, view) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{first}"),
        Some(&alice.key),
        None,
    )
    .await;
    let mut newer = workspace_fact("v2", WORKSPACE, "The deploy window is Thursday.");
    newer.supersedes_record_id = Some(first.clone());
    newer.expected_line_generation = view["line_generation"].as_u64();
    let second = propose(&w.router, &alice.key, &newer).await;

    let (status, history) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{second}/history"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{history}");
    assert_eq!(history["state"], "active");
    assert_eq!(history["supersedes"], first.as_str());
    assert_eq!(
        history["source_texts"]["src-v2"],
        "The deploy window is Thursday."
    );
    assert_eq!(history["write_receipt"]["decision"], "accepted");
    let kinds: Vec<&str> = history["audit_trail"]
        .as_array()
        .expect("trail")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["record_accepted", "record_activated"]);
    let (_, old) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{first}/history"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(old["state"], "superseded");
    assert_eq!(old["superseded_by"], second.as_str());

    // After revocation: the identity, receipt and trail stay, the texts go.
    let (status, _) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{second}/revoke"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, gone) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{second}/history"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{gone}");
    assert_eq!(gone["state"], "erased");
    assert_eq!(gone["source_texts"], json!({}));
    assert_eq!(gone["line_id"], Value::Null);
    assert!(gone["write_receipt"]["receipt_sha256"].is_string());
    let trail = gone["audit_trail"].to_string();
    for kind in ["record_ineligible", "erased", "deletion_finalized"] {
        assert!(trail.contains(kind), "{kind} in {trail}");
    }
    assert!(
        !trail.contains("Thursday"),
        "the audit trail holds no content"
    );

    // Another tenant's key and an unknown id answer alike: 404.
    for (key, id) in [
        (&w.principals[2].key, &first),
        (&alice.key, &"nope".to_owned()),
    ] {
        let (status, body) = send(
            &w.router,
            "GET",
            &format!("/v1/memories/{id}/history"),
            Some(key),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(error_code(&body), "not_found");
    }
}

#[tokio::test]
async fn consents_outbox_and_recall_receipts() {
    let w = world();
    let alice = &w.principals[0];
    let (status, consents) = send(&w.router, "GET", "/v1/consents", Some(&alice.key), None).await;
    assert_eq!(status, StatusCode::OK, "{consents}");
    assert_eq!(consents.as_array().expect("list").len(), 1);
    assert_eq!(consents[0]["consent_sha256"], alice.consent.as_str());
    assert_eq!(consents[0]["receipt"]["purpose"], "personalization");
    assert_eq!(consents[0]["withdrawn_at_unix_ms"], Value::Null);
    let (status, _) = send(
        &w.router,
        "POST",
        &format!("/v1/consents/{}/withdraw", alice.consent),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, consents) = send(&w.router, "GET", "/v1/consents", Some(&alice.key), None).await;
    assert!(consents[0]["withdrawn_at_unix_ms"].is_u64(), "{consents}");
    let (status, body) = send(&w.router, "GET", "/v1/consents", Some(&w.admin_key), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(error_code(&body), "principal_required");

    // The outbox state is the admin's.
    let (status, body) = send(&w.router, "GET", "/v1/admin/outbox", Some(&alice.key), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(error_code(&body), "admin_required");
    let (status, _) = send(
        &w.router,
        "POST",
        "/v1/admin/reconcile",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, state) = send(
        &w.router,
        "GET",
        "/v1/admin/outbox",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{state}");
    let targets: Vec<&str> = state["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| t["target"].as_str().expect("target"))
        .collect();
    assert_eq!(targets, ["lexical", "vector"]);
    assert_eq!(state["targets"][0]["pending"], 0);
    assert_eq!(state["pending_deletions"], json!([]));
    assert_eq!(state["last_reconcile"]["pass"], "repair");

    // A recall's receipts verify as returned and fail once tampered with.
    for i in 0..3 {
        propose(
            &w.router,
            &alice.key,
            &workspace_fact(&format!("r{i}"), WORKSPACE, &format!("Rotation rule {i}.")),
        )
        .await;
    }
    let (_, recall) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "rotation rule 1", "max_records": 1, "explain": true})),
    )
    .await;
    let request = json!({
        "kind": "recall",
        "selection_receipt": recall["selection_receipt"],
        "relevance_receipt": recall["relevance_receipt"],
        "selection_signature": recall["selection_signature"],
        "relevance_signature": recall["relevance_signature"],
    });
    let (status, verdict) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&alice.key),
        Some(request.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{verdict}");
    assert_eq!(verdict, json!({"valid": true, "problem": null}));
    let mut tampered = request.clone();
    tampered["selection_receipt"]["selected_record_ids"] = json!([]);
    let (_, verdict) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&alice.key),
        Some(tampered),
    )
    .await;
    assert_eq!(verdict["valid"], false);
    // An explained recall's decisions verify against the receipt that
    // commits to them; an edited decision does not.
    let mut explained = request.clone();
    explained["decisions"] = recall["decisions"].clone();
    let (_, verdict) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&alice.key),
        Some(explained.clone()),
    )
    .await;
    assert_eq!(verdict, json!({"valid": true, "problem": null}));
    let dropped = explained["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .position(|d| d["outcome"]["decision"] == "dropped")
        .expect("a dropped decision");
    explained["decisions"][dropped]["outcome"] =
        json!({"decision": "dropped", "reason": "revoked"});
    let (_, verdict) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&alice.key),
        Some(explained),
    )
    .await;
    assert_eq!(verdict["valid"], false, "{verdict}");
    let mut recounted = request.clone();
    recounted["selection_receipt"]["decision_counts"]["selected"] = json!(0);
    let (_, verdict) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&alice.key),
        Some(recounted),
    )
    .await;
    assert_eq!(verdict["valid"], false, "{verdict}");
    let mut unbound = request;
    unbound["relevance_receipt"] = Value::Null;
    let (_, verdict) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&alice.key),
        Some(unbound),
    )
    .await;
    assert_eq!(verdict["valid"], false, "{verdict}");
}

#[test]
fn browsing_ten_thousand_memories_is_paged_on_the_server() {
    const TOTAL: usize = 10_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.index_wait_ms = 0;
    let (service, _) = Service::open(cfg.clone()).expect("open");
    let admin_key =
        std::fs::read_to_string(cfg.data_dir.join(mosaic_service::service::ADMIN_KEY_FILE))
            .expect("admin key");
    let admin = service.authenticate(Some(admin_key.trim())).expect("admin");
    service
        .create_tenant(
            &admin,
            &CreateTenantRequest {
                tenant_id: "big".into(),
                policy: crate::common::self_quoting_policy(),
            },
        )
        .expect("tenant");
    let key = service
        .create_key(
            &admin,
            &CreateKeyRequest {
                tenant_id: "big".into(),
                principal_id: "p".into(),
                grant: Some(GrantRequest {
                    allowed_kinds: None,
                    allowed_purposes: None,
                    allowed_workspace_ids: Some(vec!["w".into()]),
                    allowed_run_ids: None,
                    expires_at_unix_ms: None,
                }),
            },
        )
        .expect("key")
        .key;
    let credential = service.authenticate(Some(&key)).expect("principal");
    let service = Arc::new(service);
    // Eight writers: their proposals share group commits and outbox
    // passes, the fastest way to seed through the gate here.
    const WRITERS: usize = 8;
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..WRITERS {
            let service = service.clone();
            let credential = credential.clone();
            scope.spawn(move || {
                for i in (t..TOTAL).step_by(WRITERS) {
                    let word = if i == 7_777 { "needle" } else { "hay" };
                    let request = workspace_fact(
                        &format!("m{i}"),
                        "w",
                        &format!(
                            "Memory {i} of the big tenant holds {word} ({}).",
                            crate::common::distinct(&format!("m{i}"))
                        ),
                    );
                    let response = service.propose(&credential, &request).expect("propose");
                    assert_eq!(response.decision, "accepted");
                }
            });
        }
    });
    eprintln!("proposed {TOTAL} memories in {:?}", started.elapsed());
    let router = app(service.clone());
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        // The first page, a page deep in the listing, and a search that
        // must examine the whole tenant: each a bounded amount of work.
        let timed = |path: String| {
            let router = router.clone();
            let key = key.clone();
            async move {
                let started = Instant::now();
                let (status, page) = send(&router, "GET", &path, Some(&key), None).await;
                assert_eq!(status, StatusCode::OK, "{page}");
                (page, started.elapsed())
            }
        };
        let (first, t_first) = timed("/v1/browse?limit=50".into()).await;
        assert_eq!(first["entries"].as_array().expect("entries").len(), 50);
        let after = first["next_after"].as_str().expect("more").to_owned();
        let (second, t_second) = timed(format!("/v1/browse?limit=50&after={after}")).await;
        assert_eq!(second["entries"].as_array().expect("entries").len(), 50);
        assert!(ids(&second)[0] > after);
        let mut found = Vec::new();
        let mut scans = 0;
        let mut cursor: Option<String> = None;
        let mut t_search = Duration::ZERO;
        loop {
            let path = match &cursor {
                Some(c) => format!("/v1/browse?q=needle&after={c}"),
                None => "/v1/browse?q=needle".to_owned(),
            };
            let (page, took) = timed(path).await;
            t_search = t_search.max(took);
            scans += 1;
            assert!(page["scanned"].as_u64() <= Some(5_000));
            found.extend(ids(&page));
            match page["next_after"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        assert_eq!(found.len(), 1, "one needle among {TOTAL}");
        assert_eq!(scans, 2, "a search examines at most 5000 records per request");
        eprintln!("browse: first page {t_first:?}, next page {t_second:?}, slowest search page {t_search:?}");
        let limit = Duration::from_secs(2);
        for (what, took) in [("first page", t_first), ("next page", t_second), ("search page", t_search)] {
            assert!(took < limit, "{what} took {took:?} on {TOTAL} memories");
        }
    });
}

// ------------------------------------------------------------ the browser

/// Whether to run the browser walk: `Ok(Some(binary))` run it, `Ok(None)`
/// skip, `Err` fail (Chromium is missing under CI).
fn chromium_decision(found: Option<String>, ci: Option<&str>) -> Result<Option<String>, String> {
    match (found, ci) {
        (Some(binary), _) => Ok(Some(binary)),
        (None, Some(v)) if v.eq_ignore_ascii_case("true") || v == "1" => {
            Err("CI=true but Chromium is not installed (.ci/run installs Debian's chromium)".into())
        }
        (None, _) => Ok(None),
    }
}

fn find_chromium() -> Option<String> {
    let candidates = match std::env::var("MOSAIC_CHROMIUM") {
        Ok(v) if !v.is_empty() => vec![v],
        _ => vec!["chromium".to_owned(), "chromium-browser".to_owned()],
    };
    candidates.into_iter().find(|binary| {
        Command::new(binary)
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success())
    })
}

#[test]
fn missing_chromium_skips_locally_and_fails_under_ci() {
    let found = Some("chromium".to_owned());
    assert_eq!(
        chromium_decision(found.clone(), Some("true")),
        Ok(found.clone())
    );
    assert_eq!(chromium_decision(found.clone(), None), Ok(found));
    assert_eq!(chromium_decision(None, None), Ok(None));
    assert_eq!(chromium_decision(None, Some("false")), Ok(None));
    assert!(chromium_decision(None, Some("true")).is_err());
}

/// A `mosaic serve` process on a free loopback port, its output going to
/// files so the test can read what it logged.
struct Served {
    child: std::process::Child,
    url: String,
    log: std::path::PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn start(data_dir: &std::path::Path, log: std::path::PathBuf) -> Served {
        use std::io::{BufRead, BufReader, Write};
        // Both the child's stderr and the copy of its stdout append, so
        // neither overwrites what the other wrote (a plain `create` handle
        // writes at its own offset, over lines appended by the other).
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_mosaic"))
            .args(["serve", "--listen", "127.0.0.1:0", "--embedder", "hash"])
            .args([
                "--rate-limit-per-second",
                "10000",
                "--rate-limit-burst",
                "10000",
            ])
            .arg("--data-dir")
            .arg(data_dir)
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn mosaic serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().expect("a line").expect("utf-8");
        let url = first.trim_start_matches("mosaic: serving on ").to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{first}");
        let mut out = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("log file");
        let _ = writeln!(out, "{first}");
        // Keep draining stdout (into the log) so the server never blocks.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = writeln!(out, "{line}");
            }
        });
        Served { child, url, log }
    }

    fn call(&self, key: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let url = format!("{}{path}", self.url);
        let auth = format!("Bearer {key}");
        let result = match (method, body) {
            ("GET", _) => agent.get(&url).header("Authorization", &auth).call(),
            (_, Some(b)) => agent
                .post(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(b.to_string().as_bytes()),
            (_, None) => agent.post(&url).header("Authorization", &auth).send_empty(),
        };
        let mut response = result.expect("server answers");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The bootstrap admin key (read from `data_dir`), and the key of
    /// principal `vinay` of tenant `acme` (workspace `support`, run
    /// `run-1`), provisioned through the API as an operator would.
    fn provision(&self, data_dir: &std::path::Path) -> (String, String) {
        let admin_key =
            std::fs::read_to_string(data_dir.join(mosaic_service::service::ADMIN_KEY_FILE))
                .expect("admin key")
                .trim()
                .to_owned();
        let (status, _) = self.call(
            &admin_key,
            "POST",
            "/v1/admin/tenants",
            Some(json!({"tenant_id": "acme", "policy": {"write_guards": {"shared_semantic_evidence": "any"}}})),
        );
        assert_eq!(status, 200);
        let (status, created) = self.call(
            &admin_key,
            "POST",
            "/v1/admin/keys",
            Some(json!({"tenant_id": "acme", "principal_id": "vinay",
                        "grant": {"allowed_workspace_ids": ["support"], "allowed_run_ids": ["run-1"]}})),
        );
        assert_eq!(status, 200, "{created}");
        let key = created["key"].as_str().expect("key").to_owned();
        (admin_key, key)
    }

    fn propose(&self, key: &str, request: &ProposeRequest) -> String {
        let body = serde_json::to_value(request).expect("json");
        let (status, r) = self.call(key, "POST", "/v1/memories", Some(body));
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["decision"], "accepted", "{r}");
        r["record_id"].as_str().expect("record id").to_owned()
    }
}

#[test]
fn a_person_signs_in_recalls_revokes_and_sees_it_gone_in_chromium() {
    let binary = match chromium_decision(find_chromium(), std::env::var("CI").ok().as_deref()) {
        Ok(Some(binary)) => binary,
        Ok(None) => {
            crate::skip::skipped(
                "web console in Chromium",
                "Chromium is not installed",
                "apt-get install chromium, or set MOSAIC_CHROMIUM",
            );
            return;
        }
        Err(problem) => panic!("{problem}"),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = Served::start(&data, dir.path().join("serve.log"));
    let (admin_key, key) = server.provision(&data);
    let (_, consent) = server.call(
        &key,
        "POST",
        "/v1/consents",
        Some(json!({"purpose": "personalization", "ui_release": "consent-ui-v1"})),
    );
    let consent = consent["consent_sha256"]
        .as_str()
        .expect("consent")
        .to_owned();
    let target_text = "Escalations go to the on-call lead after thirty minutes.";
    let target = server.propose(&key, &workspace_fact("escalation", "support", target_text));
    let places = ["kitchen", "archive", "lobby", "garage", "attic", "vault"];
    for i in 0..30 {
        let place = places[i % places.len()];
        server.propose(
            &key,
            &workspace_fact(
                &format!("note-{i}"),
                "support",
                &format!(
                    "Support note {i}: the spare charger is kept in the {place} ({}).",
                    crate::common::distinct(&format!("note-{i}"))
                ),
            ),
        );
    }
    let evil = server.propose(&key, &workspace_fact("markup", "support", EVIL_CONTENT));
    server.propose(
        &key,
        &preference(
            "pref",
            "vinay",
            "Vinay prefers short answers with the ticket number first.",
            Some(consent),
        ),
    );

    let shots = std::env::var("MOSAIC_CONSOLE_SCREENSHOTS")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| dir.path().join("shots").display().to_string());
    let started = Instant::now();
    let out = Command::new("python3")
        .arg(SCRIPT)
        .env("MOSAIC_CHROMIUM", binary)
        .env("MOSAIC_CONSOLE_URL", &server.url)
        .env("MOSAIC_CONSOLE_KEY", &key)
        .env("MOSAIC_CONSOLE_ADMIN", &admin_key)
        .env("MOSAIC_CONSOLE_REVOKE", &target)
        .env("MOSAIC_CONSOLE_EVIL", &evil)
        .env("MOSAIC_CONSOLE_EVIL_CONTENT", EVIL_CONTENT)
        .env(
            "MOSAIC_CONSOLE_QUERY",
            "who handles escalations on-call lead",
        )
        .env("MOSAIC_CONSOLE_SHOTS", &shots)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "console_browser.py failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("console_browser: ok"), "{stdout}");
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the walk is bounded"
    );
    for name in [
        "memories",
        "recall",
        "memory",
        "revoked",
        "memories-390",
        "recall-390",
        "admin-outbox",
    ] {
        let path = std::path::Path::new(&shots).join(format!("{name}.png"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(bytes.starts_with(b"\x89PNG"), "{name} is a PNG");
    }
    // The server logged the walk's requests, and no content or key.
    let log = std::fs::read_to_string(&server.log).expect("server log");
    assert!(log.contains("mosaic: serving on"), "{log}");
    for secret in [
        target_text,
        EVIL_CONTENT,
        "spare charger",
        key.as_str(),
        admin_key.as_str(),
    ] {
        assert!(
            !log.contains(secret),
            "the server log holds {secret:?}:\n{log}"
        );
    }
}

/// Runs `console_browser.py` showing the kept recall answer `held`, and
/// asserts the browser's signature check and the server's verification
/// read exactly `signatures` and `verified`.
fn show_held_recall(
    binary: &str,
    server: &Served,
    key: &str,
    held: &Value,
    signatures: &str,
    verified: &str,
) {
    let out = Command::new("python3")
        .arg(SCRIPT)
        .env("MOSAIC_CHROMIUM", binary)
        .env("MOSAIC_CONSOLE_URL", &server.url)
        .env("MOSAIC_CONSOLE_KEY", key)
        .env("MOSAIC_CONSOLE_HELD_RECALL", held.to_string())
        .env("MOSAIC_CONSOLE_EXPECT_SIGNATURES", signatures)
        .env("MOSAIC_CONSOLE_EXPECT_VERIFY", verified)
        .env_remove("MOSAIC_CONSOLE_SHOTS")
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("console_browser: ok"),
        "console_browser.py (kept recall, expecting {signatures:?}) failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

/// The console checks a v2 signature's signing instant against its key's
/// window as `GET /v1/keys` publishes it. A recall answer kept from before
/// a rotation that retired its key at the instant the answer was signed
/// shows "Not verified" in the browser, naming the instant, the key and
/// its retirement, and the server's verification says the same; the same
/// answer shown while the key was current shows "Verified". Layer: the
/// browser's window check in `receipts.js` (`signatureProblem`), and the
/// service's (`signature_window_problem`) for the server's verdict. The
/// rotation is the product's own (`signing::rotate`, what `mosaic keys
/// rotate` runs), dated back to the signing instant: the command retires
/// a key at the moment it runs, after every receipt the key signed, so no
/// receipt a server signs falls outside its key's window otherwise.
#[test]
fn a_signature_made_after_its_key_was_retired_shows_not_verified_in_chromium() {
    let binary = match chromium_decision(find_chromium(), std::env::var("CI").ok().as_deref()) {
        Ok(Some(binary)) => binary,
        Ok(None) => {
            crate::skip::skipped(
                "the console's key window check in Chromium",
                "Chromium is not installed",
                "apt-get install chromium, or set MOSAIC_CHROMIUM",
            );
            return;
        }
        Err(problem) => panic!("{problem}"),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = Served::start(&data, dir.path().join("serve.log"));
    let (_, key) = server.provision(&data);
    server.propose(
        &key,
        &workspace_fact("window", "support", "The night shift hands over at six."),
    );
    // The answer the console would show, kept: an explained recall, as the
    // console asks for.
    let (status, held) = server.call(
        &key,
        "POST",
        "/v1/recall",
        Some(
            json!({"query": "night shift handover", "workspace_id": "support",
                    "explain": true, "mode": "hybrid", "max_records": 10}),
        ),
    );
    assert_eq!(status, 200, "{held}");
    let signed_at = held["selection_signature"]["signed_at_unix_ms"]
        .as_u64()
        .expect("the selection signature tells its instant");
    let key_id = held["selection_signature"]["key_id"]
        .as_str()
        .expect("key id")
        .to_owned();

    // While its key is current, the answer verifies in the browser and on
    // the server.
    show_held_recall(
        &binary,
        &server,
        &key,
        &held,
        &format!("Verified in this browser (key {key_id})"),
        "Verified",
    );

    // The key retired at the instant it signed the answer.
    let path = data.join(mosaic_service::signing::SIGNING_KEY_FILE);
    let rotated = mosaic_service::signing::rotate(&path, signed_at).expect("rotates");
    assert_eq!(rotated.keys[0].key_id, key_id);
    assert_eq!(rotated.keys[0].valid_until_unix_ms, Some(signed_at));
    let (_, published) = server.call(&key, "GET", "/v1/keys", None);
    assert_eq!(published, serde_json::to_value(&rotated).expect("json"));
    let window = format!("signed at {signed_at}, after key {key_id} was retired at {signed_at}");
    show_held_recall(
        &binary,
        &server,
        &key,
        &held,
        &format!("Not verified: selection receipt: {window}"),
        &format!("Does not verify: selection receipt signature: {window}"),
    );
}
