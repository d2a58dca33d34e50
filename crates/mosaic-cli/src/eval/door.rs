//! The door `mosaic eval` measures through: a `mosaic serve` it starts
//! (this same binary, in a temporary data directory, on loopback) or a
//! running server named by URL, reached over HTTP as any client would.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use mosaic_service::service::ADMIN_KEY_FILE;

/// What `mosaic serve` prints first, followed by its address.
const SERVING: &str = "mosaic: serving on ";

/// Where the evaluation runs.
pub enum Target {
    /// A fresh `mosaic serve` child with these extra arguments (embedder
    /// settings); its data directory is removed at the end.
    Spawn {
        /// Arguments after `serve --listen 127.0.0.1:0 --data-dir DIR`.
        serve_args: Vec<String>,
    },
    /// A running server and an admin key of it.
    Server {
        /// Its base URL, e.g. `http://127.0.0.1:8080`.
        url: String,
        /// An admin key.
        admin_key: String,
    },
}

/// A server reached over HTTP, and the child process when this evaluation
/// started it (killed, its directory removed, on drop).
pub struct Door {
    url: String,
    admin: String,
    agent: ureq::Agent,
    child: Option<Child>,
    _dir: Option<tempfile::TempDir>,
}

impl Door {
    /// Starts or reaches the server.
    pub fn open(target: &Target) -> Result<Door> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(600)))
            .build()
            .into();
        match target {
            Target::Server { url, admin_key } => Ok(Door {
                url: url.trim_end_matches('/').to_owned(),
                admin: admin_key.trim().to_owned(),
                agent,
                child: None,
                _dir: None,
            }),
            Target::Spawn { serve_args } => {
                let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
                let data = dir.path().join("data");
                let binary = std::env::current_exe().context("cannot find the mosaic binary")?;
                let mut child = Command::new(binary)
                    .arg("serve")
                    .args(["--listen", "127.0.0.1:0", "--data-dir"])
                    .arg(&data)
                    // A measuring client, not a load test: the per-key rate
                    // limit and the body limit are lifted.
                    .args(["--rate-limit-per-second", "1000000"])
                    .args(["--rate-limit-burst", "1000000"])
                    .args(["--body-limit-bytes", "16777216"])
                    .args(serve_args)
                    // The data directory is this evaluation's own.
                    .env_remove("MOSAIC_DATA_DIR")
                    .env_remove("MOSAIC_POSTGRES")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    // The server's log is kept off this command's output; its
                    // last lines explain a failed start.
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("cannot start mosaic serve")?;
                let stdout = child
                    .stdout
                    .take()
                    .ok_or_else(|| anyhow!("mosaic serve has no stdout"))?;
                let log = child
                    .stderr
                    .take()
                    .map(|stderr| drain(BufReader::new(stderr), 20));
                let mut lines = BufReader::new(stdout);
                let mut first = String::new();
                lines
                    .read_line(&mut first)
                    .context("cannot read what mosaic serve printed")?;
                let Some(url) = first.trim().strip_prefix(SERVING).map(str::to_owned) else {
                    let _ = child.kill();
                    let _ = child.wait();
                    let said = log
                        .and_then(|l| l.join().ok())
                        .map(|lines| lines.join("\n"))
                        .unwrap_or_default();
                    bail!("mosaic serve did not start:\n{said}");
                };
                // Keep reading what the server prints, so its pipe never fills.
                drain(lines, 0);
                let admin = std::fs::read_to_string(data.join(ADMIN_KEY_FILE))
                    .context("cannot read the server's admin key")?;
                Ok(Door {
                    url: url.trim_end_matches('/').to_owned(),
                    admin: admin.trim().to_owned(),
                    agent,
                    child: Some(child),
                    _dir: Some(dir),
                })
            }
        }
    }

    /// The admin key.
    pub fn admin(&self) -> &str {
        &self.admin
    }

    /// `POST path` with `key`: the answer's status and JSON body.
    pub fn post(&self, key: &str, path: &str, body: &Value) -> Result<(u16, Value)> {
        let mut response = self
            .agent
            .post(&format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {key}"))
            .header("Content-Type", "application/json")
            .send(body.to_string().as_bytes())
            .with_context(|| format!("cannot reach {}", self.url))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_string()
            .context("cannot read the server's answer")?;
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|_| json!({"error": {"code": "bad_response", "message": text}}));
        Ok((status, value))
    }

    /// The server's `/metrics` samples (`name{labels}` as printed -> value);
    /// empty when it exports none or cannot be read: its account is an
    /// extra, never a reason to fail.
    pub fn metrics(&self) -> HashMap<String, f64> {
        let text = self
            .agent
            .get(&format!("{}/metrics", self.url))
            .header("Authorization", &format!("Bearer {}", self.admin))
            .call()
            .ok()
            .filter(|r| r.status().as_u16() == 200)
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default();
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| {
                let (series, value) = line.trim().rsplit_once(' ')?;
                Some((series.trim().to_owned(), value.parse().ok()?))
            })
            .collect()
    }

    /// `POST path` with `key`, which must answer 200: its JSON body.
    pub fn call(&self, key: &str, path: &str, body: &Value) -> Result<Value> {
        let (status, value) = self.post(key, path, body)?;
        if status != 200 {
            bail!(
                "{path} answered {status} {}: {}",
                value["error"]["code"].as_str().unwrap_or("http_error"),
                value["error"]["message"].as_str().unwrap_or("")
            );
        }
        Ok(value)
    }
}

/// Reads `reader` to its end on a thread of its own (so the child's pipe
/// never fills); the thread returns the last `keep` lines.
fn drain<R: BufRead + Send + 'static>(
    mut reader: R,
    keep: usize,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut last = std::collections::VecDeque::with_capacity(keep);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            if keep > 0 {
                if last.len() == keep {
                    last.pop_front();
                }
                last.push_back(line.trim_end().to_owned());
            }
            line.clear();
        }
        last.into()
    })
}

impl Drop for Door {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
