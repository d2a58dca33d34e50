//! `mosaic mcp` next to a running `mosaic serve` on one data directory:
//! two real processes. Stdio mode over the directory is refused while the
//! server holds it (its recall would never see the writes); `--server`
//! relays to the server's `/mcp`, so a memory written through MCP is in the
//! server's recall at once. A data directory that does not exist is refused
//! rather than created.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic");

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Served {
    _child: Killed,
    url: String,
    agent: ureq::Agent,
}

impl Served {
    fn start(data: &std::path::Path) -> Served {
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--embedder", "hash"])
            .arg("--data-dir")
            .arg(data)
            .env_remove("MOSAIC_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().expect("a line").expect("utf8");
        // Keep reading: the server prints more, and a closed pipe would
        // end it.
        std::thread::spawn(move || lines.for_each(drop));
        let url = first.trim_start_matches("mosaic: serving on ").to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{first}");
        Served {
            _child: Killed(child),
            url,
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
        }
    }

    fn get(&self, path: &str, key: &str) -> (u16, Value) {
        let mut r = self
            .agent
            .get(&format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {key}"))
            .call()
            .expect("get");
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn post(&self, path: &str, key: &str, body: &Value) -> (u16, Value) {
        let mut r = self
            .agent
            .post(&format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {key}"))
            .header("Content-Type", "application/json")
            .send(body.to_string().as_bytes())
            .expect("post");
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

fn admin_key(data: &std::path::Path) -> String {
    std::fs::read_to_string(data.join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned()
}

/// Admin setup through the running server: a tenant and a principal key.
fn provision(served: &Served, data: &std::path::Path) -> String {
    let admin = std::fs::read_to_string(data.join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned();
    let (status, body) = served.post("/v1/admin/tenants", &admin, &json!({"tenant_id": "acme", "policy": {"write_guards": {"shared_semantic_evidence": "any"}}}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = served.post(
        "/v1/admin/keys",
        &admin,
        &json!({"tenant_id": "acme", "principal_id": "agent"}),
    );
    assert_eq!(status, 200, "{body}");
    body["key"].as_str().expect("key").to_owned()
}

struct Client {
    child: Killed,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Client {
    fn relay(url: &str, key: &str) -> Client {
        Client::relay_as(url, key, None)
    }

    fn relay_as(url: &str, key: &str, user: Option<&str>) -> Client {
        let mut command = Command::new(BIN);
        command
            .args(["mcp", "--server", url])
            .env_remove("MOSAIC_USER");
        if let Some(user) = user {
            command.args(["--user", user]);
        }
        let mut child = command
            .env("MOSAIC_KEY", key)
            .env_remove("MOSAIC_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mcp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Client {
            child: Killed(child),
            stdin,
            stdout,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends a request and returns its response (skipping anything else).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read");
            assert!(n > 0, "the relay closed stdout before answering {method}");
            let message: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if message["id"] == id {
                return message;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let answer = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "relay-test", "version": "1"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer
    }

    /// Closes stdin and waits for a clean exit.
    fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.0.try_wait().expect("wait") {
                assert!(
                    status.success(),
                    "the relay exits 0 at end of input: {status}"
                );
                return;
            }
            assert!(Instant::now() < deadline, "the relay did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `remember` arguments for whichever tool schema the server offers: plain
/// text when the tool takes it, else a full proposal.
/// `remember` arguments for `text`: an episode of the key's principal,
/// which needs no consent.
fn remember_arguments(tools: &Value, text: &str) -> Value {
    let remember = tools["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "remember")
        .expect("a remember tool");
    assert!(
        remember["inputSchema"]["properties"].get("text").is_some(),
        "{remember}"
    );
    json!({"text": text, "kind": "episodic"})
}

#[test]
fn mcp_next_to_a_running_server_relays_to_it_and_never_splits_recall() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let served = Served::start(&data);
    let key = provision(&served, &data);

    // Stdio mode over the directory the server holds is refused with a
    // clear message naming --server (the CLI's journal-lock check, before
    // anything is opened).
    let out = Command::new(BIN)
        .args(["mcp", "--embedder", "hash", "--data-dir"])
        .arg(&data)
        .env("MOSAIC_KEY", &key)
        .env_remove("MOSAIC_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run mcp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--server"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on the protocol stream");
    // So is a second server on the same directory.
    let out = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--embedder",
            "hash",
            "--data-dir",
        ])
        .arg(&data)
        .env_remove("MOSAIC_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run serve");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another process"));

    // Through the relay, a memory written by MCP is in the server's recall
    // at once, and one written through the API is in MCP's recall.
    let mut client = Client::relay(&served.url, &key);
    let init = client.initialize();
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    let tools = client.request("tools/list", json!({}));
    let text = "The relay writes through the running server";
    let written = client.request(
        "tools/call",
        json!({"name": "remember", "arguments": remember_arguments(&tools, text)}),
    );
    assert_ne!(written["result"]["isError"], true, "{written}");
    assert_eq!(
        written["result"]["structuredContent"]["decision"], "accepted",
        "{written}"
    );
    let started = Instant::now();
    let (status, recalled) = served.post(
        "/v1/recall",
        &key,
        &json!({"query": "relay running server"}),
    );
    assert_eq!(status, 200, "{recalled}");
    assert!(
        recalled["context"]
            .as_str()
            .unwrap_or_default()
            .contains(text),
        "the server recalls what MCP wrote: {recalled}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));

    let (status, body) = served.post(
        "/v1/memories",
        &key,
        &serde_json::to_value(mosaic_service::api::ProposeRequest {
            metadata: Some(serde_json::from_value(json!({"via": "api"})).expect("metadata object")),
            ..mosaic_service::examples::workspace_fact(
                "api",
                "default",
                "The API write is visible to the MCP client",
            )
        })
        .expect("json"),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["decision"], "accepted", "{body}");
    let found = client.request(
        "tools/call",
        json!({"name": "recall", "arguments": {"query": "API write visible MCP client"}}),
    );
    assert!(
        found
            .to_string()
            .contains("The API write is visible to the MCP client"),
        "{found}"
    );
    // MCP's recall shows what the application attached to the memory.
    assert!(
        found["result"]["structuredContent"]["attached"]
            .as_array()
            .is_some_and(|all| all.iter().any(|m| m["metadata"] == json!({"via": "api"}))),
        "{found}"
    );
    // Both tools declare a filter, and it runs before ranking: a filter the
    // API write matches keeps it, one it does not match leaves it out.
    let tools = client.request("tools/list", json!({}));
    for name in ["recall", "list"] {
        assert!(
            tools["result"]["tools"].as_array().is_some_and(|all| {
                all.iter().any(|t| {
                    t["name"] == name && t["inputSchema"]["properties"]["filter"].is_object()
                })
            }),
            "{name} declares filter: {tools}"
        );
    }
    // recall: the API write carries metadata; list: the MCP write (the
    // principal's own memory, the one list shows) is episodic.
    let api_text = "The API write is visible to the MCP client";
    for (tool, arguments, wanted, matching, other) in [
        (
            "recall",
            json!({"query": "API write visible MCP client"}),
            api_text,
            json!({"via": {"eq": "api"}}),
            json!({"via": {"eq": "elsewhere"}}),
        ),
        (
            "list",
            json!({}),
            text,
            json!({"kind": {"eq": "episodic"}}),
            json!({"NOT": {"kind": {"eq": "episodic"}}}),
        ),
    ] {
        let mut with = arguments.clone();
        with["filter"] = matching;
        let kept = client.request("tools/call", json!({"name": tool, "arguments": with}));
        assert!(
            kept.to_string().contains(wanted),
            "{tool} with a matching filter: {kept}"
        );
        let mut without = arguments;
        without["filter"] = other;
        let left_out = client.request("tools/call", json!({"name": tool, "arguments": without}));
        assert_ne!(left_out["result"]["isError"], true, "{left_out}");
        assert!(
            !left_out.to_string().contains(wanted),
            "{tool} with a filter it does not match: {left_out}"
        );
    }
    // A malformed filter is the API's 400, as a tool error.
    let bad = client.request(
        "tools/call",
        json!({"name": "list", "arguments": {"filter": {"via": {"near": 1}}}}),
    );
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert!(bad.to_string().contains("invalid_filter"), "{bad}");
    client.finish();

    // A key the server refuses becomes a JSON-RPC error, not a hang.
    let mut refused = Client::relay(&served.url, &format!("mk_{}", "0".repeat(64)));
    let answer = refused.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "relay-test", "version": "1"}}),
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("401")),
        "{answer}"
    );
    refused.finish();

    // An application key relays for the user named with --user; without
    // one the server refuses it (400 user_required, as a JSON-RPC error).
    let (status, created) = served.post(
        "/v1/admin/application-keys",
        &admin_key(&data),
        &json!({"tenant_id": "acme", "application_id": "app1", "users": ["app1:*"]}),
    );
    assert_eq!(status, 200, "{created}");
    let app = created["key"].as_str().expect("key").to_owned();
    let mut as_user = Client::relay_as(&served.url, &app, Some("app1:ana"));
    as_user.initialize();
    let found = as_user.request(
        "tools/call",
        json!({"name": "recall", "arguments": {"query": "API write visible MCP client"}}),
    );
    assert_ne!(found["result"]["isError"], true, "{found}");
    assert!(
        found
            .to_string()
            .contains("The API write is visible to the MCP client"),
        "the app user reads the default workspace it was granted: {found}"
    );
    as_user.finish();
    let mut nobody = Client::relay_as(&served.url, &app, None);
    let answer = nobody.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "relay-test", "version": "1"}}),
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("400") && m.contains("user")),
        "{answer}"
    );
    nobody.finish();
}

#[test]
fn mcp_refuses_a_data_directory_that_does_not_exist() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-data");
    let out = Command::new(BIN)
        .args(["mcp", "--embedder", "hash", "--data-dir"])
        .arg(&missing)
        .env("MOSAIC_KEY", format!("mk_{}", "0".repeat(64)))
        .env_remove("MOSAIC_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run mcp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!missing.exists(), "nothing was created");
    assert!(out.stdout.is_empty());
    // The embedder flags `serve` takes are accepted (a bad value is
    // refused by the same parser, not as an unknown flag).
    let out = Command::new(BIN)
        .args(["mcp", "--embedder", "nonsense", "--data-dir"])
        .arg(&missing)
        .env("MOSAIC_KEY", format!("mk_{}", "0".repeat(64)))
        .stdin(Stdio::null())
        .output()
        .expect("run mcp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("unexpected argument"), "{stderr}");
    assert!(stderr.contains("nonsense"), "{stderr}");
}

/// `remember` over MCP takes the JSON API's `metadata` and address
/// (`namespace` + `key`), declared in its schema: the API reads the memory
/// back at its address with its metadata, a second statement at the
/// address supersedes the first, and a malformed attachment is refused
/// with the code the JSON API gives the same value (the shared strict
/// decoder, or the proposal's attachment check), as a tool error that
/// writes nothing.
#[test]
fn mcp_remember_carries_metadata_and_an_address_like_the_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let served = Served::start(&data);
    let key = provision(&served, &data);
    let mut client = Client::relay(&served.url, &key);
    client.initialize();
    let tools = client.request("tools/list", json!({}));
    let remember = tools["result"]["tools"]
        .as_array()
        .and_then(|all| all.iter().find(|t| t["name"] == "remember"))
        .unwrap_or_else(|| panic!("a remember tool: {tools}"));
    for argument in ["metadata", "namespace", "key"] {
        assert!(
            remember["inputSchema"]["properties"][argument].is_object(),
            "remember declares {argument}: {remember}"
        );
    }
    let call = |client: &mut Client, arguments: Value| {
        client.request(
            "tools/call",
            json!({"name": "remember", "arguments": arguments}),
        )
    };
    let first = call(
        &mut client,
        json!({"text": "Home city is Lisbon", "kind": "episodic",
               "metadata": {"topic": "home"}, "namespace": ["profile"], "key": "city"}),
    );
    assert_ne!(first["result"]["isError"], true, "{first}");
    let first = &first["result"]["structuredContent"];
    assert_eq!(first["decision"], "accepted", "{first}");
    let (status, item) = served.get("/v1/items?namespace=profile&key=city", &key);
    assert_eq!(status, 200, "{item}");
    assert!(item.to_string().contains("Home city is Lisbon"), "{item}");
    assert!(item.to_string().contains(r#""topic":"home""#), "{item}");
    let second = call(
        &mut client,
        json!({"text": "Home city is Porto", "kind": "episodic",
               "metadata": {"topic": "home", "moved": 2026}, "namespace": ["profile"], "key": "city"}),
    );
    let second = &second["result"]["structuredContent"];
    assert_eq!(second["decision"], "accepted", "{second}");
    assert_eq!(second["line_id"], first["line_id"], "one line: {second}");
    assert_eq!(second["line_generation"], 2, "{second}");
    let (status, item) = served.get("/v1/items?namespace=profile&key=city", &key);
    assert_eq!(status, 200, "{item}");
    assert!(
        item.to_string().contains("Home city is Porto") && !item.to_string().contains("Lisbon"),
        "the address holds the newer statement: {item}"
    );
    // The list filter sees the metadata MCP wrote.
    let listed = client.request(
        "tools/call",
        json!({"name": "list", "arguments": {"filter": {"moved": {"gte": 2026}}}}),
    );
    assert!(
        listed.to_string().contains("Home city is Porto"),
        "{listed}"
    );

    // Malformed attachments: the JSON API's code for the same value.
    let proposal = |attachments: Value| {
        let mut body = serde_json::to_value(mosaic_service::examples::workspace_fact(
            "api",
            "default",
            "A fact with a malformed attachment",
        ))
        .expect("json");
        for (name, value) in attachments.as_object().expect("object") {
            body[name] = value.clone();
        }
        body
    };
    for bad in [
        json!({"metadata": "home"}),
        json!({"metadata": {"score": 0.5}}),
        json!({"namespace": ["a/b"], "key": "k"}),
        json!({"key": "k"}),
        json!({"namespace": [], "key": "k"}),
    ] {
        let (status, api) = served.post("/v1/memories", &key, &proposal(bad.clone()));
        assert_eq!(status, 400, "{bad}: {api}");
        let code = api["error"]["code"].as_str().expect("a code").to_owned();
        let mut arguments = json!({"text": "Never written", "kind": "episodic"});
        for (name, value) in bad.as_object().expect("object") {
            arguments[name] = value.clone();
        }
        let refused = call(&mut client, arguments);
        assert_eq!(refused["result"]["isError"], true, "{bad}: {refused}");
        assert_eq!(
            refused["result"]["structuredContent"]["error"]["code"], code,
            "{bad}: {refused} (the API answers {api})"
        );
    }
    let everything = client.request("tools/call", json!({"name": "list", "arguments": {}}));
    assert!(
        !everything.to_string().contains("Never written"),
        "{everything}"
    );
    // With supersedes, an attachment is refused (the address replaces).
    let refused = call(
        &mut client,
        json!({"text": "x", "supersedes": second["record_id"], "metadata": {"a": 1}}),
    );
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(refused.to_string().contains("invalid_field"), "{refused}");
    client.finish();
}
