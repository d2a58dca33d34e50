//! `GET /metrics` through a real `mosaic serve`: its counters move with
//! every tenant's writes, recalls and deletions, so it answers only to the
//! admin key, refusing every other caller exactly as an admin route does;
//! `--metrics-without-key` opens it to a scraper that cannot send a key,
//! and says so at start.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic");

/// The line the server logs at start when `/metrics` needs no key.
const OPEN_WARNING: &str = "GET /metrics answers without a key";

/// The server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A started server: its URL, admin key and the stderr lines it printed.
struct Started {
    _server: Server,
    url: String,
    admin_key: String,
    stderr: mpsc::Receiver<String>,
}

fn start(dir: &std::path::Path, extra: &[&str]) -> Started {
    let data = dir.join("data");
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--embedder", "hash"])
        .arg("--data-dir")
        .arg(&data)
        .args(extra)
        .env_remove("MOSAIC_CONFIG")
        .env_remove("MOSAIC_METRICS_WITHOUT_KEY")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let server = Server(child);
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    let mut out = BufReader::new(stdout).lines();
    let first = out.next().expect("a line").expect("utf8");
    let url = first.trim_start_matches("mosaic: serving on ").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    // Keep reading stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in out.by_ref() {});
    let admin_key = std::fs::read_to_string(data.join("admin.key"))
        .expect("the server writes the admin key")
        .trim()
        .to_owned();
    Started {
        _server: server,
        url,
        admin_key,
        stderr: lines,
    }
}

/// `(status, content type, body)` of one request with these headers.
fn get(url: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.get(&format!("{url}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.call().expect("the server answers");
    let status = response.status().as_u16();
    let media = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = response.body_mut().read_to_string().expect("body");
    (status, media, body)
}

fn post(url: &str, path: &str, key: &str, body: &Value) -> Value {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent
        .post(&format!("{url}{path}"))
        .header("Authorization", &format!("Bearer {key}"))
        .header("Content-Type", "application/json")
        .send(body.to_string().as_bytes())
        .expect("the server answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("body");
    assert_eq!(status, 200, "{path}: {text}");
    serde_json::from_str(&text).expect("json")
}

/// The stderr lines the server printed within `wait`.
fn stderr_lines(started: &Started, wait: std::time::Duration) -> Vec<String> {
    let deadline = std::time::Instant::now() + wait;
    let mut lines = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match started.stderr.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => break,
        }
    }
    lines
}

/// No key, a principal key and an application key (naming no user, and
/// naming a user it may act for) are each refused at `/metrics` with the
/// status and body an admin route gives them: the refusal is the admin
/// routes' own (the HTTP layer's key check, `Auth`, then the service's
/// `Credential::require_admin`), and none of them sees a counter. The
/// admin key reads the metrics text, and no warning is logged.
#[test]
fn metrics_answer_only_the_admin_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path(), &[]);
    post(
        &s.url,
        "/v1/admin/tenants",
        &s.admin_key,
        &json!({"tenant_id": "acme"}),
    );
    let principal = post(
        &s.url,
        "/v1/admin/keys",
        &s.admin_key,
        &json!({"tenant_id": "acme", "principal_id": "vinay"}),
    )["key"]
        .as_str()
        .expect("key")
        .to_owned();
    let application = post(
        &s.url,
        "/v1/admin/application-keys",
        &s.admin_key,
        &json!({"tenant_id": "acme", "application_id": "app1", "users": ["app1:*"],
                "grant": {"allowed_workspace_ids": ["default"]}}),
    )["key"]
        .as_str()
        .expect("key")
        .to_owned();
    let bearer = |key: &str| format!("Bearer {key}");
    let (principal_auth, application_auth) = (bearer(&principal), bearer(&application));
    let refused: [(&str, Vec<(&str, &str)>); 4] = [
        ("no key", vec![]),
        ("a principal key", vec![("Authorization", &principal_auth)]),
        (
            "an application key",
            vec![("Authorization", &application_auth)],
        ),
        (
            "an application key acting for a user",
            vec![
                ("Authorization", &application_auth),
                ("X-Mosaic-User", "app1:alice"),
            ],
        ),
    ];
    for (who, headers) in &refused {
        let (status, media, body) = get(&s.url, "/metrics", headers);
        let (admin_status, _, admin_body) = get(&s.url, "/v1/admin/tenants", headers);
        assert!(
            (400..500).contains(&status),
            "{who}: /metrics answered {status}: {body}"
        );
        assert!(media.starts_with("application/json"), "{who}: {media}");
        assert!(!body.contains("mosaic_"), "{who} saw counters: {body}");
        assert_eq!(
            (status, serde_json::from_str::<Value>(&body).expect("json")),
            (
                admin_status,
                serde_json::from_str::<Value>(&admin_body).expect("json")
            ),
            "{who}: /metrics refuses as the admin routes do"
        );
    }
    // The codes themselves: no key is 401, a non-admin credential 403.
    let (status, _, body) = get(&s.url, "/metrics", &[]);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("missing_key"), "{body}");
    let (status, _, body) = get(&s.url, "/metrics", &[("Authorization", &principal_auth)]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("admin_required"), "{body}");

    let admin_auth = bearer(&s.admin_key);
    let (status, media, body) = get(&s.url, "/metrics", &[("Authorization", &admin_auth)]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(media, "text/plain; version=0.0.4");
    assert!(body.contains("mosaic_http_requests_total"), "{body}");
    // mem0's header carries the same admin key.
    let (status, _, body) = get(&s.url, "/metrics", &[("X-API-Key", &s.admin_key)]);
    assert_eq!(status, 200, "{body}");

    let logged = stderr_lines(&s, std::time::Duration::from_millis(300));
    assert!(
        !logged.iter().any(|l| l.contains(OPEN_WARNING)),
        "{logged:?}"
    );
}

/// `--metrics-without-key`: `/metrics` answers with no key, the admin
/// routes still refuse one, and the server warns once at start.
#[test]
fn metrics_without_key_is_an_explicit_opt_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path(), &["--metrics-without-key"]);
    let (status, _, body) = get(&s.url, "/health", &[]);
    assert_eq!(status, 200, "{body}");
    let (status, media, body) = get(&s.url, "/metrics", &[]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(media, "text/plain; version=0.0.4");
    assert!(body.contains("mosaic_http_requests_total"), "{body}");
    let (status, _, body) = get(&s.url, "/v1/admin/tenants", &[]);
    assert_eq!(status, 401, "{body}");

    let logged = stderr_lines(&s, std::time::Duration::from_millis(300));
    let warnings: Vec<&String> = logged.iter().filter(|l| l.contains(OPEN_WARNING)).collect();
    assert_eq!(warnings.len(), 1, "{logged:?}");
    assert!(warnings[0].contains("WARN"), "{logged:?}");
}
