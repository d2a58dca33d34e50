//! Point 5: the `mosaic` binary: serve on port 0, client verbs over HTTP,
//! exit codes, JSON lines, doctor and demo.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mosaic");

pub(crate) struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mosaic(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    // Only what a test names reaches the binary.
    for name in [
        "MOSAIC_URL",
        "MOSAIC_KEY",
        "MOSAIC_ADMIN_KEY",
        "MOSAIC_LISTEN",
        "MOSAIC_DATA_DIR",
    ] {
        cmd.env_remove(name);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run mosaic");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn serve_and_talk_to_it_with_the_client_verbs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let data_str = data.to_str().expect("utf8 path");
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir", data_str])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().expect("a line").expect("utf8");
    let url = first.trim_start_matches("mosaic: serving on ").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    let second = lines.next().expect("a line").expect("utf8");
    assert!(second.contains("data directory"), "{second}");
    let third = lines.next().expect("a line").expect("utf8");
    assert!(
        third.contains("admin.key") && !third.contains("mk_"),
        "the key itself is never printed: {third}"
    );
    let admin_key = std::fs::read_to_string(data.join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned();

    // Admin setup through the API.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = |path: &str, key: &str, body: &str| -> Value {
        let mut r = agent
            .post(&format!("{url}{path}"))
            .header("Authorization", &format!("Bearer {key}"))
            .send(body.as_bytes())
            .expect("post");
        serde_json::from_str(&r.body_mut().read_to_string().expect("body")).expect("json")
    };
    // The tenant lets a principal's own quotation create workspace facts
    // (the default needs a registered verifier's judgment).
    post(
        "/v1/admin/tenants",
        &admin_key,
        r#"{"tenant_id":"acme","policy":{"write_guards":{"shared_semantic_evidence":"any"}}}"#,
    );
    let created = post(
        "/v1/admin/keys",
        &admin_key,
        r#"{"tenant_id":"acme","principal_id":"vinay"}"#,
    );
    let key = created["key"].as_str().expect("key").to_owned();
    let env = [("MOSAIC_URL", url.as_str()), ("MOSAIC_KEY", key.as_str())];

    // Nothing to recall yet: exit 1.
    let (code, _, _) = mosaic(&["recall"], &env);
    assert_eq!(code, 1);
    // Propose from a file.
    // The source text travels in its own file (--source-text), not in the
    // request: the server's verbatim verifier judges it.
    let mut request = mosaic_service::examples::workspace_fact(
        "cli",
        "default",
        "The CLI talks to the server over HTTP",
    );
    let texts = std::mem::take(&mut request.source_texts);
    let (source_id, text) = texts.iter().next().expect("one source text");
    let text_file = dir.path().join("source.txt");
    std::fs::write(&text_file, text).expect("write");
    let file = dir.path().join("proposal.json");
    std::fs::write(&file, serde_json::to_string(&request).expect("json")).expect("write");
    // Without the text the proposal has no evidence: the gate rejects it.
    let (code, out, err) = mosaic(&["--json", "propose", file.to_str().expect("path")], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("incomplete_evidence"), "{out}");
    let source_text = format!("{source_id}={}", text_file.to_str().expect("path"));
    let (code, out, err) = mosaic(
        &[
            "--json",
            "propose",
            file.to_str().expect("path"),
            "--source-text",
            &source_text,
        ],
        &env,
    );
    assert_eq!(code, 0, "{out}{err}");
    let line: Value = serde_json::from_str(out.trim()).expect("json line");
    assert_eq!(line["type"], "propose");
    assert_eq!(line["data"]["decision"], "accepted");
    let record_id = line["data"]["record_id"].as_str().expect("id").to_owned();
    let proposal_id = line["data"]["proposal_id"].as_str().expect("id").to_owned();
    // Recall finds it (human output carries the block).
    let (code, out, _) = mosaic(&["recall", "--query", "CLI server"], &env);
    assert_eq!(code, 0);
    assert!(
        out.contains("<recalled-memory") && out.contains("over HTTP"),
        "{out}"
    );
    let (code, out, _) = mosaic(&["verify", "--proposal", &proposal_id], &env);
    assert_eq!((code, out.trim()), (0, "valid"));
    // Export, then revoke, then recall finds nothing.
    let export = dir.path().join("export.jsonl");
    let (code, _, _) = mosaic(&["export", "--out", export.to_str().expect("path")], &env);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read_to_string(&export)
            .expect("export")
            .lines()
            .count(),
        1
    );
    let (code, out, _) = mosaic(&["--json", "revoke", &record_id], &env);
    assert_eq!(code, 0, "{out}");
    let line: Value = serde_json::from_str(out.trim()).expect("json line");
    assert_eq!(line["data"]["stage"], "finalized");
    let (code, _, _) = mosaic(&["recall", "--query", "CLI server"], &env);
    assert_eq!(code, 1);
    // Import the export again: the gate accepts it anew.
    let (code, out, err) = mosaic(&["--json", "import", export.to_str().expect("path")], &env);
    assert_eq!(code, 0, "{out}{err}");
    // Maintenance verbs with the admin key.
    let admin_env = [
        ("MOSAIC_URL", url.as_str()),
        ("MOSAIC_KEY", admin_key.as_str()),
    ];
    for verb in ["reconcile", "reindex"] {
        let (code, out, err) = mosaic(&["--json", verb], &admin_env);
        assert_eq!(code, 0, "{verb}: {out}{err}");
    }
    // Errors: a bad key is exit 2 with a JSON error line.
    let (code, out, _) = mosaic(
        &["--json", "recall"],
        &[("MOSAIC_URL", url.as_str()), ("MOSAIC_KEY", "mk_bad")],
    );
    assert_eq!(code, 2);
    assert!(out.contains("invalid_key"), "{out}");
    drop(server);
    // Offline: doctor is happy with the stopped server's data directory.
    let (code, out, _) = mosaic(&["doctor", "--data-dir", data_str], &[]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn doctor_reports_problems_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing");
    let (code, out, _) = mosaic(
        &["doctor", "--data-dir", missing.to_str().expect("path")],
        &[],
    );
    assert_eq!(code, 2);
    assert!(out.contains("does not exist"), "{out}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "listen = 12\nnot_a_key = true\n").expect("write");
    let (code, out, _) = mosaic(&["doctor", "--config", bad.to_str().expect("path")], &[]);
    assert_eq!(code, 2);
    assert!(out.contains("config"), "{out}");
}

#[test]
fn unreachable_postgres_flag_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let (code, _, err) = mosaic(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().expect("path"),
            "--postgres",
            "postgres://mosaic@127.0.0.1:1/x",
        ],
        &[],
    );
    assert_eq!(code, 2);
    assert!(err.contains("PostgreSQL"), "{err}");
}

#[test]
fn demo_runs_the_whole_story() {
    let (code, out, err) = mosaic(&["--json", "demo"], &[]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let decisions: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "propose")
        .map(|l| l["data"]["decision"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(decisions.iter().filter(|d| **d == "accepted").count(), 1);
    assert!(decisions.iter().filter(|d| **d == "rejected").count() >= 3);
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "deletion" && l["data"]["stage"] == "finalized")
    );
    let last_recall = lines
        .iter()
        .rev()
        .find(|l| l["type"] == "recall")
        .expect("recall");
    assert_eq!(last_recall["data"]["selected"], serde_json::json!([]));
}

/// Starts `mosaic serve` on a free port over `data`; returns it and its URL.
pub(crate) fn start_server(data: &std::path::Path) -> (Server, String) {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().expect("utf8 path"),
        ])
        .env_remove("MOSAIC_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().expect("a line").expect("utf8");
    let url = first.trim_start_matches("mosaic: serving on ").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    // Keep reading, so the server's later lines never meet a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (server, url)
}

/// The one `quickstart` JSON line.
fn quickstart_line(out: &str) -> Value {
    let line: Value = serde_json::from_str(out.trim()).expect("one JSON line");
    assert_eq!(line["type"], "quickstart", "{out}");
    line["data"].clone()
}

/// Runs a printed shell snippet (it needs `curl`); returns its stdout.
fn run_snippet(snippet: &str) -> Option<String> {
    let curl = Command::new("curl").arg("--version").output();
    if !curl.is_ok_and(|o| o.status.success()) {
        return None;
    }
    let out = Command::new("sh")
        .args(["-c", snippet])
        .output()
        .expect("run sh");
    assert!(out.status.success(), "{snippet}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a printed Python snippet against the client in clients/python,
/// when `python3` with `httpx` is here; returns its stdout.
fn run_python_snippet(snippet: &str) -> Option<String> {
    let httpx = Command::new("python3")
        .args(["-c", "import httpx"])
        .output();
    if !httpx.is_ok_and(|o| o.status.success()) {
        return None;
    }
    let client = concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients/python/src");
    let out = Command::new("python3")
        .args(["-c", snippet])
        .env("PYTHONPATH", client)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{snippet}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs the printed curl snippet (its recall must name Berlin); without
/// `curl` here, sends the snippet's conversation through the API instead.
fn add_first_chat(snippet: &str, url: &str, key: &str) {
    if let Some(printed) = run_snippet(snippet) {
        assert!(printed.contains("Berlin"), "{printed}");
        return;
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let r = agent
        .post(&format!("{url}/v1/conversations/first-chat/messages"))
        .header("Authorization", &format!("Bearer {key}"))
        .send(
            r#"{"messages": [{"id": "m1", "role": "user", "content": "I moved to Berlin last month."}]}"#
                .as_bytes(),
        )
        .expect("ingest");
    assert_eq!(r.status().as_u16(), 200);
}

/// Recalls through the JSON API with `key`; returns the context.
fn recall_context(url: &str, key: &str, query: &str) -> String {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = agent
        .post(&format!("{url}/v1/recall"))
        .header("Authorization", &format!("Bearer {key}"))
        .send(serde_json::json!({ "query": query }).to_string().as_bytes())
        .expect("recall");
    assert_eq!(r.status().as_u16(), 200);
    let body: Value =
        serde_json::from_str(&r.body_mut().read_to_string().expect("body")).expect("json");
    body["context"].as_str().expect("context").to_owned()
}

#[test]
fn quickstart_on_a_running_server_gives_a_key_whose_snippet_recalls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let data_str = data.to_str().expect("utf8 path");
    let (_server, url) = start_server(&data);
    let admin_key = std::fs::read_to_string(data.join("admin.key")).expect("admin key");

    // The admin key comes from the data directory the server holds.
    let (code, out, err) = mosaic(
        &[
            "--json",
            "quickstart",
            "--url",
            &url,
            "--data-dir",
            data_str,
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        !out.contains(admin_key.trim()),
        "the admin key is never printed"
    );
    let first = quickstart_line(&out);
    assert_eq!(first["tenant_id"], "quickstart");
    assert_eq!(first["tenant_existed"], false);
    assert_eq!(first["principal_id"], "me");
    assert_eq!(first["data_dir_set_up"], Value::Null);
    let key = first["key"].as_str().expect("key").to_owned();
    let curl = first["curl"].as_str().expect("curl");
    let python = first["python"].as_str().expect("python");
    for snippet in [curl, python] {
        assert!(
            snippet.contains(&key) && snippet.contains(&url),
            "{snippet}"
        );
    }
    // Nothing recalled before the snippet adds the conversation.
    assert!(
        !recall_context(&url, &key, "where does the user live").contains("Berlin"),
        "a new principal starts empty"
    );
    add_first_chat(curl, &url, &key);
    assert!(recall_context(&url, &key, "where does the user live").contains("Berlin"));
    // The Python snippet, with the client in clients/python (when httpx is
    // installed here), recalls it too.
    if let Some(printed) = run_python_snippet(python) {
        assert!(
            printed.contains("<recalled-memory") && printed.contains("Berlin"),
            "{printed}"
        );
    }

    // Again: the tenant is reused and a second key is made; its snippet
    // replays the conversation (nothing added) and recalls the same.
    let (code, out, err) = mosaic(
        &["--json", "quickstart", "--url", &url],
        &[("MOSAIC_ADMIN_KEY", admin_key.trim())],
    );
    assert_eq!(code, 0, "{out}{err}");
    let second = quickstart_line(&out);
    assert_eq!(second["tenant_existed"], true);
    let key2 = second["key"].as_str().expect("key").to_owned();
    assert_ne!(key2, key, "each run makes a new key");
    add_first_chat(second["curl"].as_str().expect("curl"), &url, &key2);
    assert!(recall_context(&url, &key2, "where does the user live").contains("Berlin"));

    // Human output: the key and both snippets, never the admin key.
    let (code, out, _) = mosaic(
        &[
            "quickstart",
            "--url",
            &url,
            "--tenant",
            "other",
            "--principal",
            "ana",
        ],
        &[("MOSAIC_ADMIN_KEY", admin_key.trim())],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("tenant other (created), principal ana")
            && out.contains("curl -s")
            && out.contains("from mosaic_memory import Mosaic")
            && !out.contains(admin_key.trim()),
        "{out}"
    );
}

#[test]
fn quickstart_refuses_a_key_that_is_not_the_admin_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let (_server, url) = start_server(&data);
    let admin_key = std::fs::read_to_string(data.join("admin.key")).expect("admin key");
    let (code, out, err) = mosaic(
        &["--json", "quickstart", "--url", &url],
        &[("MOSAIC_ADMIN_KEY", admin_key.trim())],
    );
    assert_eq!(code, 0, "{out}{err}");
    let principal_key = quickstart_line(&out)["key"]
        .as_str()
        .expect("key")
        .to_owned();
    // A principal's key is stopped by the service's admin check
    // (`require_admin`): no tenant, no key.
    let (code, out, err) = mosaic(
        &["quickstart", "--url", &url, "--tenant", "stolen"],
        &[("MOSAIC_ADMIN_KEY", principal_key.as_str())],
    );
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("admin_required"), "{err}");
    assert!(!out.contains("mk_"), "no key printed: {out}");
    // An unknown key is stopped by authentication (`invalid_key`).
    let unknown = format!("mk_{}", "0".repeat(64));
    let (code, _, err) = mosaic(
        &["quickstart", "--url", &url, "--tenant", "stolen"],
        &[("MOSAIC_ADMIN_KEY", unknown.as_str())],
    );
    assert_eq!(code, 2);
    assert!(err.contains("invalid_key"), "{err}");
    // Neither created the tenant.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = agent
        .get(&format!("{url}/v1/admin/tenants"))
        .header("Authorization", &format!("Bearer {}", admin_key.trim()))
        .call()
        .expect("tenants");
    let tenants: Value =
        serde_json::from_str(&r.body_mut().read_to_string().expect("body")).expect("json");
    assert_eq!(tenants, serde_json::json!(["quickstart"]));
    // A URL given where nothing answers is an error, not a set-up.
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let nobody = format!("http://{}", free.local_addr().expect("addr"));
    drop(free);
    let (code, _, err) = mosaic(&["quickstart", "--url", &nobody], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("no server answers"), "{err}");
}

#[test]
fn quickstart_without_a_server_sets_up_a_fresh_data_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("fresh");
    let data_str = data.to_str().expect("utf8 path");
    // Nothing listens on this address (the default URL follows it).
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let listen = free.local_addr().expect("addr").to_string();
    drop(free);
    let (code, out, err) = mosaic(
        &["--json", "quickstart", "--data-dir", data_str],
        &[("MOSAIC_LISTEN", listen.as_str())],
    );
    assert_eq!(code, 0, "{out}{err}");
    let created = quickstart_line(&out);
    assert_eq!(created["data_dir_set_up"], data_str);
    assert_eq!(created["url"], format!("http://{listen}"));
    let key = created["key"].as_str().expect("key").to_owned();
    // The server started on that directory knows the key.
    let (_server, url) = start_server(&data);
    let curl = created["curl"]
        .as_str()
        .expect("curl")
        .replace(&format!("http://{listen}"), &url);
    assert!(
        !recall_context(&url, &key, "where does the user live").contains("Berlin"),
        "a new principal starts empty"
    );
    add_first_chat(&curl, &url, &key);
    assert!(recall_context(&url, &key, "where does the user live").contains("Berlin"));
    // While that server holds the directory, setting it up directly is
    // refused (split-brain guard), with the way to reach the server.
    let (code, _, err) = mosaic(
        &["quickstart", "--data-dir", data_str],
        &[("MOSAIC_LISTEN", listen.as_str())],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("has the data directory") && err.contains("--url"),
        "{err}"
    );
}

#[test]
fn serve_refuses_a_taken_address_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let other = dir.path().join("other");
    let (server, pid, mut lines) = spawn_serve(&data);
    let first = lines.next().expect("a line").expect("utf8");
    let addr = first
        .trim_start_matches("mosaic: serving on http://")
        .to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{first}");

    // The serve loop's bind: a second server on the same address is a
    // clear error (exit 2) naming the address, not a panic.
    let other_str = other.to_str().expect("utf8 path");
    let (code, out, err) = mosaic(&["serve", "--listen", &addr, "--data-dir", other_str], &[]);
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains(&format!("cannot listen on {addr}")),
        "stderr names the address: {err}"
    );
    assert!(!out.contains("serving on"), "{out}");

    // SIGTERM ends the serve loop gracefully: the snapshots are saved and
    // the binary says so and exits 0.
    stops_cleanly_on_sigterm(server, &pid, lines, "the first start");
}

/// One raw HTTP/1.1 request over TCP (`head` holds the request line and
/// headers, without the blank line): the answer's status and body ("" when
/// the server closed without answering).
fn raw_request(addr: &str, head: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .expect("timeout");
    // The server may answer and close before it has read all of a large
    // head: a failed write still leaves its answer to read.
    let _ = stream.write_all(format!("{head}\r\nConnection: close\r\n\r\n").as_bytes());
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

/// Refusals of a request's head reach a real TCP client as the product's
/// JSON error, not an empty body: a target or headers over the API's own
/// limits are refused by the `limits` layer (414 `uri_too_long`, 431
/// `headers_too_large`), an unknown path by the router's fallback (404),
/// a method the path does not take by its method fallback (405). Past
/// hyper's own limits (a target over 65534 bytes, more than 100 header
/// fields) hyper answers before any of the product's code runs, with an
/// empty body: that is asserted too, so a change there is noticed.
#[test]
fn serve_answers_refused_heads_with_json_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, pid, mut lines) = spawn_serve(&dir.path().join("data"));
    let first = lines.next().expect("a line").expect("utf8");
    let addr = first
        .trim_start_matches("mosaic: serving on http://")
        .to_owned();
    let host = format!("Host: {addr}");
    let many_headers = |n: usize| {
        (0..n)
            .map(|i| format!("X-Filler-{i}: {i}"))
            .collect::<Vec<_>>()
            .join("\r\n")
    };
    let json_cases = [
        (
            format!("GET /health?q={} HTTP/1.1\r\n{host}", "a".repeat(20_000)),
            414,
            "uri_too_long",
        ),
        (
            format!("GET /health HTTP/1.1\r\n{host}\r\n{}", many_headers(80)),
            431,
            "headers_too_large",
        ),
        (
            format!(
                "GET /health HTTP/1.1\r\n{host}\r\nX-Big: {}",
                "b".repeat(40_000)
            ),
            431,
            "headers_too_large",
        ),
        (
            format!("GET /no/such/path HTTP/1.1\r\n{host}"),
            404,
            "not_found",
        ),
        (
            format!("DELETE /health HTTP/1.1\r\n{host}"),
            405,
            "method_not_allowed",
        ),
    ];
    for (head, status, code) in &json_cases {
        let (got, body) = raw_request(&addr, head);
        let parsed: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{code}: not JSON ({e}): {body:?}"));
        assert_eq!(
            (got, parsed["error"]["code"].as_str()),
            (*status, Some(*code)),
            "{body}"
        );
    }
    // hyper's own refusals, before the router: status only.
    let hyper_cases = [
        (
            format!("GET /health?q={} HTTP/1.1\r\n{host}", "a".repeat(70_000)),
            414,
        ),
        (
            format!("GET /health HTTP/1.1\r\n{host}\r\n{}", many_headers(120)),
            431,
        ),
    ];
    for (head, status) in &hyper_cases {
        let (got, body) = raw_request(&addr, head);
        assert_eq!(
            (got, body.as_str()),
            (*status, ""),
            "hyper's answer changed"
        );
    }
    // The server still serves.
    let (got, body) = raw_request(&addr, &format!("GET /health HTTP/1.1\r\n{host}"));
    assert_eq!(got, 200, "{body}");
    stops_cleanly_on_sigterm(server, &pid, lines, "after the refused heads");
}

/// `mosaic serve` on `data` at a free loopback port (stderr dropped): the
/// server, its pid and the lines of its stdout.
fn spawn_serve(
    data: &std::path::Path,
) -> (
    Server,
    String,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
) {
    spawn_serve_with(data, |_| {})
}

/// [`spawn_serve`] with the command `configure`d first (more arguments,
/// the environment, stderr kept).
fn spawn_serve_with(
    data: &std::path::Path,
    configure: impl FnOnce(&mut Command),
) -> (
    Server,
    String,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
) {
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    configure(&mut command);
    let mut child = command.spawn().expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let pid = child.id().to_string();
    (Server(child), pid, BufReader::new(stdout).lines())
}

/// Sends SIGTERM to `pid` (the serve process `server` holds, whose
/// stdout `lines` reads) and requires its last line to say it stopped and
/// its exit to be a success.
fn stops_cleanly_on_sigterm(
    mut server: Server,
    pid: &str,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    what: &str,
) {
    let sent = Command::new("kill")
        .args(["-TERM", pid])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert_eq!(
        rest.last().map(String::as_str),
        Some("mosaic: stopped"),
        "{what}: {rest:?}"
    );
    let status = server.0.wait().expect("wait");
    assert!(
        status.success(),
        "{what}: a clean stop on SIGTERM: {status:?}"
    );
}

/// A SIGTERM sent the moment `mosaic serve` says it serves stops it
/// cleanly: the stop signals are taken over before that line is printed,
/// so the signal cannot fall in a window where its default action (end
/// the process, no snapshots saved) still applies. Three starts, each
/// signalled as soon as its line is read. Layer: the serve loop.
#[test]
fn serve_stops_cleanly_on_a_sigterm_sent_as_soon_as_it_serves() {
    for round in 0..3 {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, pid, mut lines) = spawn_serve(&dir.path().join("data"));
        let serving = lines
            .by_ref()
            .map_while(Result::ok)
            .find(|l| l.starts_with("mosaic: serving on "));
        assert!(serving.is_some(), "round {round}: the server started");
        stops_cleanly_on_sigterm(server, &pid, lines, &format!("round {round}"));
    }
}

/// `mosaic serve`'s log honours `RUST_LOG`: at the default level the
/// service's start is logged at INFO; with `RUST_LOG=warn` it is not.
/// Layer: the binary's log setup.
#[test]
fn serve_logs_at_the_level_rust_log_names() {
    let start_log = |rust_log: Option<&str>| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG");
        if let Some(level) = rust_log {
            command.env("RUST_LOG", level);
        }
        let mut child = command.spawn().expect("spawn serve");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let pid = child.id().to_string();
        let server = Server(child);
        // Serving: every start-up line was written before this one.
        let first = BufReader::new(stdout).lines().next();
        assert!(first.is_some(), "the server started");
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success());
        let mut server = server;
        server.0.wait().expect("wait");
        let log: Vec<String> = BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect();
        log.join("\n")
    };
    let default = start_log(None);
    assert!(default.contains("INFO"), "{default}");
    let warn = start_log(Some("warn"));
    assert!(!warn.contains("INFO"), "{warn}");
}

/// `mosaic serve` logs no memory text at any `RUST_LOG` level: with the
/// most verbose filters an operator may set (`trace`, and the MCP
/// transport's own target at `trace`), a statement remembered and a
/// query recalled over MCP appear nowhere in the log, nor does the key.
/// Layer: the binary's log setup, which keeps the MCP transport's events
/// (they print every tool call's arguments and result) at `warn`.
#[test]
fn serve_logs_no_memory_text_at_any_level() {
    for rust_log in ["trace", "rmcp=trace,rmcp::service=trace,debug"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let (mut server, pid, mut lines) = spawn_serve_with(&data, |command| {
            command
                .args(["--embedder", "hash"])
                .env("RUST_LOG", rust_log)
                .stderr(Stdio::piped());
        });
        let stderr = server.0.stderr.take().expect("stderr");
        let url = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("mosaic: serving on ").map(str::to_owned))
            .expect("the server started");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let admin = std::fs::read_to_string(data.join("admin.key")).expect("admin key");
        let post = |path: &str, key: &str, session: Option<&str>, body: Value| {
            let mut request = agent
                .post(&format!("{url}{path}"))
                .header("Authorization", &format!("Bearer {}", key.trim()))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
            if let Some(session) = session {
                request = request.header("mcp-session-id", session);
            }
            let mut response = request.send(body.to_string().as_bytes()).expect("request");
            let session = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let text = response.body_mut().read_to_string().expect("body");
            (response.status().as_u16(), session, text)
        };
        let (status, _, text) = post(
            "/v1/admin/tenants",
            &admin,
            None,
            serde_json::json!({"tenant_id": "logs"}),
        );
        assert_eq!(status, 200, "{text}");
        let (status, _, text) = post(
            "/v1/admin/keys",
            &admin,
            None,
            serde_json::json!({"tenant_id": "logs", "principal_id": "alice"}),
        );
        assert_eq!(status, 200, "{text}");
        let key: Value = serde_json::from_str(&text).expect("key json");
        let key = key["key"].as_str().expect("key").to_owned();
        let (status, session, text) = post(
            "/mcp",
            &key,
            None,
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                           "clientInfo": {"name": "log-test", "version": "1"}}}),
        );
        assert_eq!(status, 200, "{text}");
        let session = session.expect("a session");
        post(
            "/mcp",
            &key,
            Some(&session),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        let secret = "the locker code is nine-four-one-seven";
        for (id, tool, arguments) in [
            (2, "remember", serde_json::json!({"text": secret})),
            (
                3,
                "recall",
                serde_json::json!({"query": "which locker code nine-four"}),
            ),
        ] {
            let (status, _, text) = post(
                "/mcp",
                &key,
                Some(&session),
                serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}}),
            );
            assert_eq!(status, 200, "{tool}: {text}");
        }
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success());
        server.0.wait().expect("wait");
        let log: String = BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            log.contains("INFO"),
            "{rust_log}: the service logged: {log}"
        );
        for leaked in ["nine-four", "locker", key.as_str(), admin.trim()] {
            assert!(
                !log.contains(leaked),
                "{rust_log}: the log holds {leaked:?}:\n{log}"
            );
        }
    }
}

/// `mosaic verify --receipt FILE`: the write receipt and signature the
/// caller holds (a proposal's answer, a memory's history, or the `--json`
/// line of `mosaic propose`) are sent to `POST /v1/verify` kind `write`,
/// which checks they are the stored receipt, signed by the server inside
/// its key's window. Every changed field of the held receipt or of its
/// signature is refused with exit 2 and the server's reason (or its 400
/// error code for a field that no longer parses). Layer: the server's
/// held-receipt check (`held_write_problem`); the CLI must send what the
/// file holds, unchanged.
#[test]
fn verify_checks_the_write_receipt_the_caller_holds() {
    use crate::receipt_signatures::{at, changed, leaf_paths};
    use serde_json::json;

    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let (_server, url) = start_server(&data);
    let admin_key = std::fs::read_to_string(data.join("admin.key")).expect("admin key");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let call = |method: &str, path: &str, key: &str, body: Option<Value>| -> Value {
        let auth = format!("Bearer {}", key.trim());
        let mut r = match body {
            Some(body) => agent
                .post(&format!("{url}{path}"))
                .header("Authorization", &auth)
                .send(body.to_string().as_bytes()),
            None => agent
                .get(&format!("{url}{path}"))
                .header("Authorization", &auth)
                .call(),
        }
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        serde_json::from_str(&r.body_mut().read_to_string().expect("body")).expect("json")
    };
    call(
        "POST",
        "/v1/admin/tenants",
        &admin_key,
        Some(
            json!({"tenant_id": "acme", "policy": {"write_guards": {"shared_semantic_evidence": "any"}}}),
        ),
    );
    let created = call(
        "POST",
        "/v1/admin/keys",
        &admin_key,
        Some(json!({"tenant_id": "acme", "principal_id": "vinay"})),
    );
    let key = created["key"].as_str().expect("key").to_owned();
    let propose = |name: &str, text: &str| {
        let request = mosaic_service::examples::workspace_fact(name, "default", text);
        let answer = call(
            "POST",
            "/v1/memories",
            &key,
            Some(serde_json::to_value(&request).expect("json")),
        );
        assert_eq!(answer["decision"], "accepted", "{answer}");
        answer
    };
    let answer = propose("held", "The fire drill is on the second Tuesday");
    let other = propose("other", "The badge office opens at eight");
    let record_id = answer["record_id"].as_str().expect("record id");
    let proposal_id = answer["proposal_id"].as_str().expect("proposal id");
    let history = call(
        "GET",
        &format!("/v1/memories/{record_id}/history"),
        &key,
        None,
    );
    assert_eq!(history["write_receipt"], answer["receipt"], "{history}");

    let env = [("MOSAIC_URL", url.as_str()), ("MOSAIC_KEY", key.as_str())];
    let file = |name: &str, value: &Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, value.to_string()).expect("write");
        path.to_str().expect("utf-8 path").to_owned()
    };
    let verify = |doc: &Value, extra: &[&str]| {
        let path = file("held.json", doc);
        let mut args = vec!["verify", "--receipt", path.as_str()];
        args.extend_from_slice(extra);
        mosaic(&args, &env)
    };

    // As the answer, the history and `mosaic --json propose`'s line hold
    // it, with the proposal named by the file or by --proposal.
    let line = json!({"type": "propose", "data": answer});
    for (what, doc, extra) in [
        ("the answer", &answer, &[][..]),
        (
            "the answer, --proposal",
            &answer,
            &["--proposal", proposal_id][..],
        ),
        ("the history", &history, &[][..]),
        ("the --json line", &line, &[][..]),
    ] {
        let (code, out, err) = verify(doc, extra);
        assert_eq!((code, out.trim()), (0, "valid"), "{what}: {err}");
    }
    let (code, out, err) = verify(&answer, &["--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let verdict: Value = serde_json::from_str(out.trim()).expect("a JSON line");
    assert_eq!(verdict["data"], json!({"valid": true, "problem": null}));

    // Refused, with the server's words.
    let key_id = answer["receipt_signature"]["key_id"]
        .as_str()
        .expect("key id")
        .to_owned();
    let mut recomputed: mosaic_harness::memory_write::MemoryWriteReceipt =
        serde_json::from_value(answer["receipt"].clone()).expect("a write receipt");
    recomputed.judgments_sha256 = "0".repeat(64);
    recomputed.receipt_sha256 = recomputed.compute_digest().expect("digest");
    let mut stale = answer.clone();
    stale["receipt"]["judgments_sha256"] = json!("0".repeat(64));
    let mut unsigned = answer.clone();
    unsigned
        .as_object_mut()
        .expect("answer")
        .remove("receipt_signature");
    let mut flipped = answer.clone();
    let hex = answer["receipt_signature"]["signature_hex"]
        .as_str()
        .expect("hex");
    flipped["receipt_signature"]["signature_hex"] = json!(format!(
        "{}{}",
        if hex.starts_with('0') { "1" } else { "0" },
        &hex[1..]
    ));
    let cases = [
        (
            json!({"proposal_id": proposal_id, "receipt": recomputed, "receipt_signature": answer["receipt_signature"]}),
            "INVALID: the write receipt is not the one stored for this proposal (differing: judgments_sha256)".to_owned(),
        ),
        (
            stale,
            "INVALID: write receipt_sha256 does not match the canonical body".to_owned(),
        ),
        (
            flipped,
            format!("INVALID: write signature: the signature does not verify under key {key_id}"),
        ),
        (
            unsigned,
            "INVALID: the write receipt carries no signature".to_owned(),
        ),
        (
            json!({"proposal_id": proposal_id, "receipt": answer["receipt"], "receipt_signature": other["receipt_signature"]}),
            "INVALID: write signature: the signature names another receipt_sha256 than the receipt's".to_owned(),
        ),
    ];
    for (doc, expected) in cases {
        let (code, out, err) = verify(&doc, &[]);
        assert_eq!((code, out.trim()), (2, expected.as_str()), "{doc}: {err}");
    }
    // Another proposal's receipt, named for this proposal: not the stored one.
    let (code, out, _) = verify(&other, &["--proposal", proposal_id]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.starts_with("INVALID: the write receipt is not the one stored for this proposal"),
        "{out}"
    );

    // Every signed leaf of the receipt and its signature, changed in turn.
    let mut paths = Vec::new();
    for member in ["receipt", "receipt_signature"] {
        leaf_paths(&answer[member], vec![member.to_owned()], &mut paths);
    }
    assert!(paths.len() >= 19, "{paths:?}");
    for path in &paths {
        let mut forged = answer.clone();
        let leaf = at(&mut forged, path);
        *leaf = changed(leaf);
        // The proposal stays the one the caller names.
        let (code, out, err) = verify(&forged, &["--proposal", proposal_id]);
        assert_ne!(code, 0, "changing {path:?} still verifies: {out}");
        assert!(
            out.starts_with("INVALID: ") || err.starts_with("error: "),
            "changing {path:?}: {out}{err}"
        );
    }

    // A file that holds no write receipt is a clear error, before any
    // request.
    let (code, out, err) = verify(&json!({"selection_receipt": {}}), &[]);
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("holds no write receipt"), "{err}");
    let (code, _, err) = mosaic(
        &["verify", "--receipt", "-", "--offline", "x", "--keys", "y"],
        &env,
    );
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with"), "{err}");
}
