//! kill -9 of a real `mosaic serve` under concurrent writes: every write
//! the service acknowledged survives with what the store keeps beside its
//! record (the captured message can still be cited, so its row and the
//! record both made it), and becomes readable again after the restart.
//! Group commit shares the syncs; it must not weaken this.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic");

struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(data: &Path) -> Served {
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--embedder", "hash"])
        .args([
            "--rate-limit-per-second",
            "100000",
            "--rate-limit-burst",
            "100000",
        ])
        .arg("--data-dir")
        .arg(data)
        .env_remove("MOSAIC_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().expect("a line").expect("utf8");
    let url = first.trim_start_matches("mosaic: serving on ").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Served { child, url }
}

fn call(
    url: &str,
    key: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Option<(u16, Value)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let target = format!("{url}{path}");
    let auth = format!("Bearer {key}");
    let result = match (method, body) {
        ("GET", _) => agent.get(&target).header("Authorization", &auth).call(),
        (_, Some(b)) => agent
            .post(&target)
            .header("Authorization", &auth)
            .header("Content-Type", "application/json")
            .send(b.to_string().as_bytes()),
        (_, None) => agent
            .post(&target)
            .header("Authorization", &auth)
            .send_empty(),
    };
    // A connection the kill cut is no answer.
    let mut response = result.ok()?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().ok()?;
    Some((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

#[test]
fn every_acknowledged_write_survives_kill_9_with_its_captured_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = serve(&data);
    let admin = std::fs::read_to_string(data.join("admin.key")).expect("admin key");
    let admin = admin.trim();
    let ok = |r: Option<(u16, Value)>| {
        let (status, body) = r.expect("answer");
        assert_eq!(status, 200, "{body}");
        body
    };
    ok(call(
        &server.url,
        admin,
        "POST",
        "/v1/admin/tenants",
        Some(json!({"tenant_id": "crash"})),
    ));
    let key = ok(call(
        &server.url,
        admin,
        "POST",
        "/v1/admin/keys",
        Some(json!({"tenant_id": "crash", "principal_id": "writer"})),
    ))["key"]
        .as_str()
        .expect("key")
        .to_owned();
    ok(call(
        &server.url,
        &key,
        "POST",
        "/v1/consents",
        Some(json!({"purpose": "personalization", "ui_release": "crash-test-v1"})),
    ));

    // Four clients write until the kill; each keeps what was acknowledged.
    let acknowledged: Arc<Mutex<Vec<(String, String, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for client in 0..4 {
        let (url, key, acknowledged, stop) = (
            server.url.clone(),
            key.clone(),
            acknowledged.clone(),
            stop.clone(),
        );
        clients.push(std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let conversation = format!("chat-{client}");
                let message = format!("m{i}");
                // Distinct words, so the write guards see no near-duplicates.
                let body = json!({"messages": [{"id": message, "role": "user", "content": format!("about rivers: {}", crate::common::distinct(&format!("{client}-{i}")))}]});
                if let Some((200, answer)) = call(&url, &key, "POST", &format!("/v1/conversations/{conversation}/messages"), Some(body))
                    && answer["messages"][0]["decision"] == "accepted"
                {
                    let record = answer["messages"][0]["record_id"].as_str().unwrap_or_default().to_owned();
                    acknowledged.lock().expect("list").push((conversation, message, record));
                }
                i += 1;
            }
        }));
    }
    let started = Instant::now();
    while acknowledged.lock().expect("list").len() < 40
        && started.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(server); // SIGKILL, mid-write
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.join().expect("client");
    }
    let acknowledged = acknowledged.lock().expect("list").clone();
    assert!(
        acknowledged.len() >= 40,
        "writes were acknowledged before the kill: {}",
        acknowledged.len()
    );

    let server = serve(&data);
    for (conversation, message, record) in &acknowledged {
        let (status, memory) = call(
            &server.url,
            &key,
            "GET",
            &format!("/v1/memories/{record}"),
            None,
        )
        .expect("answer");
        assert_eq!(
            status, 200,
            "acknowledged {record} is in the store: {memory}"
        );
        assert!(
            memory["content"]
                .as_str()
                .is_some_and(|c| c.contains("about rivers")),
            "{memory}"
        );
        let _ = (conversation, message);
    }
    // The store kept the captures: a sample of acknowledged messages can
    // be cited by id alone (message row and record both survived).
    for (conversation, message, _) in acknowledged
        .iter()
        .step_by((acknowledged.len() / 10).max(1))
    {
        let (status, fact) = call(
            &server.url,
            &key,
            "POST",
            "/v1/facts",
            Some(json!({"content": "about rivers", "cites": [{"conversation_id": conversation, "message_id": message}]})),
        )
        .expect("answer");
        assert_eq!(
            status, 200,
            "{conversation}/{message} is still citable: {fact}"
        );
    }
    // And every acknowledged episode becomes readable again.
    let started = Instant::now();
    loop {
        let (_, recalled) = call(
            &server.url,
            &key,
            "POST",
            "/v1/recall",
            Some(json!({"kinds": ["episodic"], "max_records": 1000, "token_budget": 1000000})),
        )
        .expect("answer");
        let selected: std::collections::BTreeSet<String> = recalled["selected_record_ids"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let missing = acknowledged
            .iter()
            .filter(|(_, _, r)| !selected.contains(r))
            .count();
        if missing == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{missing} acknowledged episodes never became readable"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
