//! `mosaic-load`: a bounded load test of the HTTP API on loopback.
//!
//! Starts `mosaic serve` on 127.0.0.1 (port 0) in a temporary data
//! directory, provisions one tenant and `--principals` keys (each with a
//! consent) through the admin API, then runs `--clients` concurrent clients
//! for `--duration` seconds. Each client uses one principal's key and mixes
//! proposals (`--write-percent`) with ranked recalls. A proposal is the
//! principal's next `examples::distinct_note` (numbered across the clients
//! sharing it): no two of a principal's first thousand are near-duplicates,
//! so the write guards accept them with the real embedder too, and a
//! refusal counts as an error (reported apart as `refused`, with the first
//! one's violation code). It reports throughput,
//! p50/p99/max latency per operation, the error count (any non-200 answer,
//! rejected proposal or transport failure) and the server's resident memory
//! (VmRSS from /proc/PID/status) sampled every `--sample-ms`.
//!
//! With `--then-recall S` the same clients go on for S more seconds with
//! recalls only, on the same server: the record count stops growing, so
//! the resident-memory samples show whether memory stays flat once it
//! does (reported apart, as `then_recall`).
//!
//! A prober reads `/health` every 10 ms meanwhile, on a thread and a
//! connection of its own, and reports its latency beside the operations'
//! (its answers are not counted as operations).
//!
//! With `--deletions N` it also measures deletion propagation: while the
//! clients run, one more principal proposes a memory, checks it is
//! recalled, revokes it, and times (a) from sending the revoke until the
//! service reports that every required index acknowledged the tombstone
//! (the revoke answer's stage, else polling `/deletion`), and (b) until a
//! recall on the last replica no longer selects it; any recall that still
//! selects it after the revoke answered is counted as an error. The
//! servers' own `mosaic_deletion_index_ack_seconds` histogram (ineligible
//! commit to the last index acknowledgement, inside the service) is read
//! from `/metrics` at the end. `--postgres URL --replicas R` runs R
//! servers on one PostgreSQL database: deletions are revoked on the first
//! and recalled on the last.
//!
//! Bounded by construction: at most 1024 clients and 3600 s, loopback only,
//! and the server and its data directory are removed at the end (unless
//! `--data-dir` names one to keep).
//! Exit codes: 0 no errors, 2 errors or failure. `--json` prints one
//! summary object instead of the report.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mosaic_server::examples::{distinct_note, note_topic, preference};
use serde_json::{Value, json};

/// Bounded load test of a local `mosaic serve`.
#[derive(Parser, Debug)]
#[command(name = "mosaic-load", version)]
struct Args {
    /// Concurrent clients (1..=1024).
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Seconds of load after setup (1..=3600).
    #[arg(long, default_value_t = 120)]
    duration: u64,
    /// Principals (one key each, 1 to `--clients`); clients share them
    /// round-robin (default: one per client).
    #[arg(long)]
    principals: Option<usize>,
    /// Share of operations that are proposals (the rest are recalls).
    #[arg(long, default_value_t = 50)]
    write_percent: u32,
    /// Seconds of recalls only after `--duration`, on the same server and
    /// principals (0: none): memory once the record count stops growing.
    #[arg(long, default_value_t = 0)]
    then_recall: u64,
    /// Resident-memory sampling interval in milliseconds (50..=60000).
    #[arg(long, default_value_t = 1000)]
    sample_ms: u64,
    /// The `mosaic` binary (default: next to this one).
    #[arg(long)]
    mosaic_bin: Option<PathBuf>,
    /// Print one JSON summary instead of the report.
    #[arg(long)]
    json: bool,
    /// Measure deletion propagation over this many revocations while the
    /// clients run (0: off; at most 100,000). The clients stop when the
    /// last one is timed.
    #[arg(long, default_value_t = 0)]
    deletions: usize,
    /// Serve on this PostgreSQL database (`mosaic serve --postgres URL`).
    #[arg(long)]
    postgres: Option<String>,
    /// Servers sharing the PostgreSQL database (1..=4; needs --postgres).
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// Keep the (first) server's data directory here instead of a
    /// temporary one. A directory kept by an earlier run is served again
    /// with its memories (its tenant is reused, with new keys), so a
    /// recall-only run (`--write-percent 0`) can follow a run that wrote;
    /// a writing run needs a fresh one. With `--postgres` the memories are
    /// in the database and the directory holds the bootstrap admin key, so
    /// a recall-only run may then use several `--replicas` (the others get
    /// temporary directories).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// One more argument for `mosaic serve` (repeatable), e.g.
    /// `--serve-arg=--embedder --serve-arg=hash`.
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    serve_args: Vec<String>,
}

const TENANT: &str = "load";
const MAX_CLIENTS: usize = 1024;
const MAX_SECONDS: u64 = 3600;
/// Resident-memory sampling interval bounds, in milliseconds.
const SAMPLE_MS: std::ops::RangeInclusive<u64> = 50..=60_000;
/// Most revocations `--deletions` times.
const MAX_DELETIONS: usize = 100_000;

/// The server child: killed and reaped on drop.
struct Server {
    child: Child,
    url: String,
    data_dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(bin: &Path, data_dir: &Path, extra: &[String]) -> Result<Server> {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        // The load is many keys at full speed: lift the per-key rate limit.
        .args(["--rate-limit-per-second", "1000000"])
        .args(["--rate-limit-burst", "1000000"])
        .args(extra)
        .env_remove("MOSAIC_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("no server stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let first = lines
        .next()
        .ok_or_else(|| anyhow!("the server exited before serving"))??;
    let url = first
        .strip_prefix("mosaic: serving on ")
        .ok_or_else(|| anyhow!("unexpected first server line: {first}"))?
        .trim()
        .to_owned();
    if !url.starts_with("http://127.0.0.1:") {
        bail!("the server is not on loopback: {url}");
    }
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok(Server {
        child,
        url,
        data_dir: data_dir.to_path_buf(),
    })
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

async fn request(
    client: &HttpClient,
    method: &str,
    url: &str,
    key: &str,
    body: &Value,
) -> Result<(u16, Value)> {
    let request = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))?;
    let response = client.request(request).await?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

#[derive(Clone)]
struct Principal {
    key: String,
    principal_id: String,
    consent: String,
    /// How many notes its clients have proposed: each takes the next.
    notes: Arc<AtomicU64>,
}

async fn provision(
    client: &HttpClient,
    server: &Server,
    principals: usize,
) -> Result<(Vec<Principal>, bool)> {
    let admin = std::fs::read_to_string(server.data_dir.join("admin.key"))
        .context("cannot read the bootstrap admin key")?;
    let admin = admin.trim();
    let url = |path: &str| format!("{}{path}", server.url);
    let (status, body) = request(
        client,
        "POST",
        &url("/v1/admin/tenants"),
        admin,
        &json!({"tenant_id": TENANT}),
    )
    .await?;
    // 409 `tenant_exists`: a data directory kept by an earlier run.
    let reused = status == 409 && body["error"]["code"] == "tenant_exists";
    if status != 200 && !reused {
        bail!("creating the tenant answered {status}: {body}");
    }
    let mut out = Vec::with_capacity(principals);
    for i in 0..principals {
        let principal_id = format!("p{i:04}");
        let (status, body) = request(
            client,
            "POST",
            &url("/v1/admin/keys"),
            admin,
            &json!({"tenant_id": TENANT, "principal_id": principal_id}),
        )
        .await?;
        let key = match (status, body["key"].as_str()) {
            (200, Some(key)) => key.to_owned(),
            _ => bail!("creating a key answered {status}: {body}"),
        };
        let (status, body) = request(
            client,
            "POST",
            &url("/v1/consents"),
            &key,
            &json!({"purpose": "personalization", "ui_release": "load-ui-v1"}),
        )
        .await?;
        let consent = match (status, body["consent_sha256"].as_str()) {
            (200, Some(sha)) => sha.to_owned(),
            _ => bail!("giving consent answered {status}: {body}"),
        };
        out.push(Principal {
            key,
            principal_id,
            consent,
            notes: Arc::default(),
        });
    }
    Ok((out, reused))
}

/// Latencies in microseconds and the error count of one operation.
#[derive(Default)]
struct OpStats {
    latencies_us: Vec<u64>,
    errors: u64,
    /// Of the errors, proposals answered 200 and not accepted (the gate
    /// refused them: a write guard, a policy).
    refused: u64,
}

impl OpStats {
    fn merge(&mut self, other: OpStats) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
        self.refused += other.refused;
    }

    fn summary(&mut self, seconds: f64) -> Value {
        self.latencies_us.sort_unstable();
        let n = self.latencies_us.len();
        let pick = |q: f64| -> f64 {
            if n == 0 {
                return 0.0;
            }
            let idx = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
            self.latencies_us[idx] as f64 / 1000.0
        };
        json!({
            "count": n,
            "errors": self.errors,
            "refused": self.refused,
            "per_second": if seconds > 0.0 { n as f64 / seconds } else { 0.0 },
            "p50_ms": pick(0.50),
            "p99_ms": pick(0.99),
            "max_ms": pick(1.0),
        })
    }
}

struct ClientResult {
    propose: OpStats,
    recall: OpStats,
    /// Recalls after `writes_until` (the `--then-recall` phase).
    recall_after: OpStats,
    first_error: Option<String>,
}

/// xorshift64*: a dependency-free, seeded choice of operation and topic.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// When a client stops writing (it recalls only from then on) and when it
/// stops.
#[derive(Clone, Copy)]
struct Phases {
    writes_until: Instant,
    deadline: Instant,
}

async fn run_client(
    client: HttpClient,
    base: String,
    principal: Principal,
    client_idx: usize,
    write_percent: u32,
    phases: Phases,
    stop: Arc<AtomicBool>,
) -> ClientResult {
    let Phases {
        writes_until,
        deadline,
    } = phases;
    let Principal {
        key,
        principal_id,
        consent,
        notes,
    } = principal;
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ (client_idx as u64 + 1).wrapping_mul(0xff51_afd7);
    let mut result = ClientResult {
        propose: OpStats::default(),
        recall: OpStats::default(),
        recall_after: OpStats::default(),
        first_error: None,
    };
    let propose_url = format!("{base}/v1/memories");
    let recall_url = format!("{base}/v1/recall");
    let mut n = 0u64;
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        n += 1;
        let roll = next_random(&mut state);
        let topic = note_topic(roll >> 8);
        let started = Instant::now();
        let after = started >= writes_until;
        let is_write = !after && (roll % 100) < u64::from(write_percent);
        let outcome = if is_write {
            let label = format!("c{client_idx}-n{n}");
            // The principal's next note: no two of its first thousand are
            // near-duplicates, lexically or under MiniLM (the write guards
            // refuse those).
            let content = distinct_note(notes.fetch_add(1, Ordering::Relaxed));
            let proposal = preference(&label, &principal_id, &content, Some(consent.clone()));
            match serde_json::to_value(&proposal) {
                Ok(body) => request(&client, "POST", &propose_url, &key, &body)
                    .await
                    .map(|(status, body)| {
                        (
                            status == 200 && body["decision"] == "accepted",
                            status,
                            body,
                        )
                    }),
                Err(e) => Err(e.into()),
            }
        } else {
            let body = json!({"query": format!("what about {topic}"), "max_records": 10});
            request(&client, "POST", &recall_url, &key, &body)
                .await
                .map(|(status, body)| {
                    (
                        status == 200 && body["selection_receipt"]["receipt_sha256"].is_string(),
                        status,
                        body,
                    )
                })
        };
        let elapsed = started.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
        let stats = if is_write {
            &mut result.propose
        } else if after {
            &mut result.recall_after
        } else {
            &mut result.recall
        };
        match outcome {
            Ok((true, _, _)) => stats.latencies_us.push(elapsed),
            Ok((false, status, body)) => {
                stats.errors += 1;
                let refused = status == 200 && body["decision"].is_string();
                stats.refused += u64::from(refused);
                if result.first_error.is_none() {
                    // Codes only: a body can echo memory content.
                    let code = body["error"]["code"]
                        .as_str()
                        .or(body["decision"].as_str())
                        .unwrap_or("?");
                    let why = body["violations"][0]["violation"].as_str();
                    result.first_error = Some(match why {
                        Some(why) => format!("HTTP {status} {code} ({why})"),
                        None => format!("HTTP {status} {code}"),
                    });
                }
            }
            Err(e) => {
                stats.errors += 1;
                if result.first_error.is_none() {
                    result.first_error = Some(format!("transport: {e}"));
                }
            }
        }
    }
    result
}

/// What the deletion prober measured.
#[derive(Default)]
struct DeletionResult {
    /// Revoke sent until every required index acknowledged the tombstone.
    acknowledged: OpStats,
    /// Revoke sent until a recall on the last replica no longer selects it.
    unrecallable: OpStats,
    /// Recalls on the last replica that still selected a memory after its
    /// revoke had answered.
    selected_after_revoke: u64,
    /// Revokes answered 409 (a concurrent write won) and retried.
    revoke_conflicts: u64,
    /// Their error codes.
    conflict_codes: std::collections::BTreeSet<String>,
    first_error: Option<String>,
}

impl DeletionResult {
    fn fail(&mut self, what: String) {
        self.acknowledged.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }
}

/// `GET /health` on `url` (`http://127.0.0.1:PORT`) every 10 ms until
/// `deadline` or `stop`, over one kept-alive connection (opened again
/// after a failure), with blocking reads: the latency of each 200 answer,
/// from writing the request to reading the body's last byte, and every
/// other outcome counted as an error. Plain HTTP/1.1 by hand: the CLI's
/// client (`ureq`) added about 0.45 ms to every probe's p50 here.
fn probe_health(url: &str, deadline: Instant, stop: &AtomicBool) -> OpStats {
    use std::io::{BufRead, BufReader, Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut stats = OpStats::default();
    let mut conn: Option<BufReader<std::net::TcpStream>> = None;
    let mut next = Instant::now();
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        next += Duration::from_millis(10);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t0 = Instant::now();
        let answered = (|| -> std::io::Result<bool> {
            if conn.is_none() {
                let stream = std::net::TcpStream::connect(addr)?;
                stream.set_nodelay(true)?;
                stream.set_read_timeout(Some(Duration::from_secs(10)))?;
                conn = Some(BufReader::new(stream));
            }
            let Some(reader) = conn.as_mut() else {
                return Ok(false);
            };
            reader
                .get_mut()
                .write_all(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")?;
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let ok = line.starts_with("HTTP/1.1 200");
            let mut length = 0usize;
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body)?;
            Ok(ok)
        })();
        match answered {
            Ok(true) => stats.latencies_us.push(micros(t0)),
            Ok(false) => stats.errors += 1,
            Err(_) => {
                stats.errors += 1;
                conn = None;
            }
        }
    }
    stats
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros().min(u128::from(u64::MAX)) as u64
}

/// Whether a recall on `base` with `query` selects `record_id`.
async fn selects(
    client: &HttpClient,
    base: &str,
    key: &str,
    query: &str,
    record_id: &str,
) -> Result<bool> {
    let body = json!({"query": query, "max_records": 10});
    let (status, body) = request(client, "POST", &format!("{base}/v1/recall"), key, &body).await?;
    if status != 200 {
        bail!("recall answered HTTP {status}");
    }
    Ok(body["selected_record_ids"]
        .as_array()
        .is_some_and(|ids| ids.iter().any(|id| id == record_id)))
}

/// Proposes, checks, revokes and times `count` memories one after another:
/// writes and revocations go to `writer`, recalls to `reader`.
async fn run_deleter(
    client: HttpClient,
    writer: String,
    reader: String,
    principal: (String, String, String),
    count: usize,
) -> DeletionResult {
    let (key, principal_id, consent) = principal;
    let mut result = DeletionResult::default();
    const LIMIT: Duration = Duration::from_secs(30);
    for i in 0..count {
        let query = format!("deletion probe{i}x marker");
        let content = format!("{principal_id} deletion probe{i}x marker");
        let proposal = preference(
            &format!("deletion-{i}"),
            &principal_id,
            &content,
            Some(consent.clone()),
        );
        let Ok(body) = serde_json::to_value(&proposal) else {
            result.fail("cannot encode a proposal".into());
            continue;
        };
        let record_id = match request(
            &client,
            "POST",
            &format!("{writer}/v1/memories"),
            &key,
            &body,
        )
        .await
        {
            Ok((200, body)) if body["decision"] == "accepted" => {
                body["record_id"].as_str().unwrap_or_default().to_owned()
            }
            Ok((status, _)) => {
                result.fail(format!("probe proposal answered HTTP {status}"));
                continue;
            }
            Err(e) => {
                result.fail(format!("transport: {e}"));
                continue;
            }
        };
        // Recallable before the revocation (on the reader too).
        let seen = Instant::now();
        loop {
            match selects(&client, &reader, &key, &query, &record_id).await {
                Ok(true) => break,
                Ok(false) if seen.elapsed() < LIMIT => {}
                Ok(false) => {
                    result.fail("a probe never became recallable".into());
                    break;
                }
                Err(e) => {
                    result.fail(format!("{e}"));
                    break;
                }
            }
        }
        let revoke_url = format!("{writer}/v1/memories/{record_id}/revoke");
        let started = Instant::now();
        // A revoke that loses a write conflict (409) is retried, as a
        // client would; the time still runs from the first attempt.
        let mut attempts = 0;
        let stage = loop {
            attempts += 1;
            match request(&client, "POST", &revoke_url, &key, &json!({})).await {
                Ok((200, body)) => {
                    break Some(body["stage"].as_str().unwrap_or_default().to_owned());
                }
                Ok((409, body)) if attempts < 5 => {
                    result.revoke_conflicts += 1;
                    if let Some(code) = body["error"]["code"].as_str() {
                        result.conflict_codes.insert(code.to_owned());
                    }
                }
                Ok((status, body)) => {
                    let code = body["error"]["code"].as_str().unwrap_or("?");
                    result.fail(format!("revoke answered HTTP {status} {code}"));
                    break None;
                }
                Err(e) => {
                    result.fail(format!("transport: {e}"));
                    break None;
                }
            }
        };
        let Some(mut stage) = stage else {
            continue;
        };
        let acked = |stage: &str| matches!(stage, "indexes_acknowledged" | "erased" | "finalized");
        // The service drives the deletion on the request path; when an
        // index did not acknowledge in time the reconcile worker finishes
        // it, and the client polls for that.
        let status_url = format!("{writer}/v1/memories/{record_id}/deletion");
        while !acked(&stage) && started.elapsed() < LIMIT {
            tokio::time::sleep(Duration::from_millis(2)).await;
            if let Ok((200, body)) = request(&client, "GET", &status_url, &key, &Value::Null).await
            {
                stage = body["stage"].as_str().unwrap_or_default().to_owned();
            }
        }
        if acked(&stage) {
            result.acknowledged.latencies_us.push(micros(started));
        } else {
            result.fail("a deletion was not acknowledged within 30 s".into());
        }
        // Then the reader: the first recall after the revoke answered
        // should already miss it.
        loop {
            match selects(&client, &reader, &key, &query, &record_id).await {
                Ok(false) => {
                    result.unrecallable.latencies_us.push(micros(started));
                    break;
                }
                Ok(true) => {
                    result.selected_after_revoke += 1;
                    if started.elapsed() > LIMIT {
                        result.fail("a revoked memory stayed recallable for 30 s".into());
                        break;
                    }
                }
                Err(e) => {
                    result.fail(format!("{e}"));
                    break;
                }
            }
        }
    }
    result
}

/// The `mosaic_deletion_index_ack_seconds` histogram of one server:
/// (upper bound in seconds, cumulative count) pairs, then count and sum.
async fn ack_histogram(client: &HttpClient, base: &str, admin: &str) -> Value {
    let request = hyper::Request::builder()
        .method("GET")
        .uri(format!("{base}/metrics"))
        .header("authorization", format!("Bearer {admin}"))
        .body(Full::new(Bytes::new()));
    let Ok(request) = request else {
        return Value::Null;
    };
    let Ok(response) = client.request(request).await else {
        return Value::Null;
    };
    let Ok(bytes) = response.into_body().collect().await else {
        return Value::Null;
    };
    let text = String::from_utf8_lossy(&bytes.to_bytes()).into_owned();
    let name = "mosaic_deletion_index_ack_seconds";
    let mut buckets = Vec::new();
    let (mut count, mut sum) = (0.0, 0.0);
    for line in text.lines().filter(|l| l.starts_with(name)) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let value: f64 = value.parse().unwrap_or(0.0);
        if let Some(le) = series
            .split("le=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
        {
            buckets.push(json!([le, value]));
        } else if series.ends_with("_count") {
            count = value;
        } else if series.ends_with("_sum") {
            sum = value;
        }
    }
    json!({"buckets": buckets, "count": count, "sum_s": sum,
           "mean_ms": if count > 0.0 { sum / count * 1000.0 } else { 0.0 }})
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

fn locate_mosaic(explicit: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path);
    }
    let me = std::env::current_exe().context("cannot locate this binary")?;
    let sibling = me.with_file_name("mosaic");
    if sibling.exists() {
        Ok(sibling)
    } else {
        bail!(
            "no mosaic binary next to {}; build it (cargo build -p mosaic-cli) or pass --mosaic-bin",
            me.display()
        )
    }
}

async fn run(args: Args) -> Result<Value> {
    if !(1..=MAX_CLIENTS).contains(&args.clients) {
        bail!("--clients must be 1..={MAX_CLIENTS}");
    }
    if !(1..=MAX_SECONDS).contains(&args.duration) {
        bail!("--duration must be 1..={MAX_SECONDS} seconds");
    }
    if args.then_recall > MAX_SECONDS {
        bail!("--then-recall must be 0..={MAX_SECONDS} seconds");
    }
    if args.then_recall > 0 && args.deletions > 0 {
        bail!("--then-recall and --deletions measure apart: use one");
    }
    if args.write_percent > 100 {
        bail!("--write-percent must be 0..=100");
    }
    let principals = args.principals.unwrap_or(args.clients);
    if !(1..=args.clients).contains(&principals) {
        bail!(
            "--principals must be 1..={} (one to --clients)",
            args.clients
        );
    }
    if !SAMPLE_MS.contains(&args.sample_ms) {
        bail!(
            "--sample-ms must be {}..={} milliseconds",
            SAMPLE_MS.start(),
            SAMPLE_MS.end()
        );
    }
    if args.deletions > MAX_DELETIONS {
        bail!("--deletions must be 0..={MAX_DELETIONS}");
    }
    if !(1..=4).contains(&args.replicas) || (args.replicas > 1 && args.postgres.is_none()) {
        bail!("--replicas must be 1..=4, and more than one needs --postgres");
    }
    if args.data_dir.is_some() && args.replicas > 1 && args.postgres.is_none() {
        bail!("--data-dir keeps one server's directory: use one replica");
    }
    let bin = locate_mosaic(args.mosaic_bin.clone())?;
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let mut extra = args.serve_args.clone();
    if let Some(url) = &args.postgres {
        extra.extend(["--postgres".to_owned(), url.clone()]);
    }
    let mut servers = Vec::with_capacity(args.replicas);
    for r in 0..args.replicas {
        let data_dir = match (&args.data_dir, r) {
            (Some(kept), 0) => kept.clone(),
            _ => dir.path().join(format!("data-{r}")),
        };
        // One at a time: the first migrates a fresh database and writes
        // the bootstrap admin key.
        servers.push(start_server(&bin, &data_dir, &extra)?);
    }
    let server = &servers[0];
    let pid = server.child.id();
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(MAX_CLIENTS)
        .build_http();
    let setup_started = Instant::now();
    let prober = usize::from(args.deletions > 0);
    let (keys, reused) = provision(&client, server, principals + prober).await?;
    if reused && args.write_percent > 0 {
        bail!(
            "the load tenant exists already (a kept data directory or database): a writing run \
             numbers its principals' notes from the start, so they would be refused as \
             duplicates of the earlier run's; write into a fresh one, or pass --write-percent 0"
        );
    }
    let setup_seconds = setup_started.elapsed().as_secs_f64();
    let rss_start = rss_kib(pid);
    if !args.json {
        eprintln!(
            "mosaic-load: {} clients, {} principals, {}% proposals, {} s against {} (pid {pid}, {} replica(s)); setup {setup_seconds:.1} s",
            args.clients, principals, args.write_percent, args.duration, server.url, args.replicas
        );
    }

    let started = Instant::now();
    let writes_until = started + Duration::from_secs(args.duration);
    let deadline = writes_until + Duration::from_secs(args.then_recall);
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::with_capacity(args.clients);
    for idx in 0..args.clients {
        let p = &keys[idx % principals];
        // Clients spread over the replicas.
        let base = servers[idx % servers.len()].url.clone();
        tasks.push(tokio::spawn(run_client(
            client.clone(),
            base,
            // Shared with the other clients of the principal, notes too.
            p.clone(),
            idx,
            args.write_percent,
            Phases {
                writes_until,
                deadline,
            },
            stop.clone(),
        )));
    }
    let deleter = (args.deletions > 0).then(|| {
        let p = &keys[principals];
        let stop = stop.clone();
        let future = run_deleter(
            client.clone(),
            servers[0].url.clone(),
            servers[servers.len() - 1].url.clone(),
            (p.key.clone(), p.principal_id.clone(), p.consent.clone()),
            args.deletions,
        );
        tokio::spawn(async move {
            let result = future.await;
            stop.store(true, Ordering::Relaxed);
            result
        })
    });
    // `/health` every 10 ms while the clients run: it must not wait on
    // their writes. On a thread of its own, as a separate prober would be,
    // so its latency is not the load's own tasks waiting for this
    // runtime's workers.
    let health = {
        let (addr, stop) = (server.url.clone(), stop.clone());
        std::thread::Builder::new()
            .name("health-prober".into())
            .spawn(move || probe_health(&addr, deadline, &stop))
            .context("cannot start the health prober")?
    };
    // Resident memory over time, while the clients run.
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let interval = Duration::from_millis(args.sample_ms);
    let mut ticker = tokio::time::interval(interval);
    let mut rss_writes_end = None;
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        ticker.tick().await;
        let now = Instant::now();
        if let Some(kib) = rss_kib(pid) {
            samples.push((started.elapsed().as_secs_f64(), kib));
            if now < writes_until {
                rss_writes_end = Some(kib);
            }
        }
    }
    let mut propose = OpStats::default();
    let mut recall = OpStats::default();
    let mut recall_after = OpStats::default();
    let mut first_error = None;
    let mut failed_clients = 0u64;
    for task in tasks {
        match task.await {
            Ok(r) => {
                propose.merge(r.propose);
                recall.merge(r.recall);
                recall_after.merge(r.recall_after);
                if first_error.is_none() {
                    first_error = r.first_error;
                }
            }
            Err(_) => failed_clients += 1,
        }
    }
    let mut health = health
        .join()
        .map_err(|_| anyhow!("the health prober failed"))?;
    let deletion = match deleter {
        Some(task) => {
            let mut d = task
                .await
                .map_err(|e| anyhow!("the deletion prober failed: {e}"))?;
            let admin = std::fs::read_to_string(server.data_dir.join("admin.key"))
                .context("cannot read the bootstrap admin key")?;
            let mut histograms = Vec::new();
            for s in &servers {
                histograms.push(ack_histogram(&client, &s.url, admin.trim()).await);
            }
            let seconds = started.elapsed().as_secs_f64();
            if first_error.is_none() {
                first_error = d.first_error.take();
            }
            json!({
                "count": args.deletions,
                "acknowledged": d.acknowledged.summary(seconds),
                "unrecallable": d.unrecallable.summary(seconds),
                "selected_after_revoke": d.selected_after_revoke,
                "revoke_conflicts_retried": d.revoke_conflicts,
                "revoke_conflict_codes": d.conflict_codes,
                "errors": d.acknowledged.errors + d.unrecallable.errors,
                "server_index_ack_seconds": histograms,
            })
        }
        None => Value::Null,
    };
    let deletion_errors = deletion["errors"].as_u64().unwrap_or(0);
    let total_seconds = started.elapsed().as_secs_f64();
    let seconds = total_seconds.min(args.duration as f64);
    let rss_end = rss_kib(pid);
    let total = propose.latencies_us.len() + recall.latencies_us.len();
    let errors = propose.errors
        + recall.errors
        + recall_after.errors
        + health.errors
        + failed_clients
        + deletion_errors;
    let rss_max = samples.iter().map(|s| s.1).max();
    // Memory once writes stopped: the samples of the recall-only phase.
    let then_recall = if args.then_recall > 0 {
        let writes_end = args.duration as f64;
        let after: Vec<u64> = samples
            .iter()
            .filter(|s| s.0 >= writes_end)
            .map(|s| s.1)
            .collect();
        json!({
            "seconds": total_seconds - seconds,
            "recall": recall_after.summary(total_seconds - seconds),
            "rss_kib": {
                "writes_end": rss_writes_end,
                "min": after.iter().min(),
                "max": after.iter().max(),
                "end": rss_end,
            },
        })
    } else {
        Value::Null
    };
    Ok(json!({
        "clients": args.clients,
        "principals": principals,
        "write_percent": args.write_percent,
        "duration_s": seconds,
        "setup_s": setup_seconds,
        "operations": total,
        "per_second": total as f64 / seconds,
        "errors": errors,
        "first_error": first_error,
        "propose": propose.summary(seconds),
        "recall": recall.summary(seconds),
        "health": health.summary(total_seconds),
        "then_recall": then_recall,
        "replicas": args.replicas,
        "postgres": args.postgres.is_some(),
        "deletion": deletion,
        "rss_kib": {"before_load": rss_start, "max": rss_max, "end": rss_end},
        "rss_samples": samples.iter().map(|(t, kib)| json!([(*t * 10.0).round() / 10.0, kib])).collect::<Vec<_>>(),
    }))
}

fn print_report(summary: &Value) {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let mib = |v: &Value| {
        v.as_f64()
            .map_or("?".to_owned(), |k| format!("{:.1}", k / 1024.0))
    };
    println!(
        "mosaic-load: {} clients x {:.1} s: {} operations, {:.0} ops/s, {} errors",
        summary["clients"],
        f(&summary["duration_s"]),
        summary["operations"],
        f(&summary["per_second"]),
        summary["errors"]
    );
    for op in ["propose", "recall", "health"] {
        let s = &summary[op];
        println!(
            "  {op:<8} {:>8} ops {:>8.0}/s  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>8.2} ms  errors {}{}",
            s["count"],
            f(&s["per_second"]),
            f(&s["p50_ms"]),
            f(&s["p99_ms"]),
            f(&s["max_ms"]),
            s["errors"],
            match s["refused"].as_u64() {
                Some(n) if n > 0 => format!(" (refused by the gate {n})"),
                _ => String::new(),
            }
        );
    }
    let d = &summary["deletion"];
    if d.is_object() {
        for (what, label) in [
            ("acknowledged", "revoke -> every index acknowledged"),
            ("unrecallable", "revoke -> not recalled on the last replica"),
        ] {
            let s = &d[what];
            println!(
                "  deletion {label}: {} deletions  p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
                s["count"],
                f(&s["p50_ms"]),
                f(&s["p99_ms"]),
                f(&s["max_ms"])
            );
        }
        println!(
            "  deletion: recalls still selecting a revoked memory after its revoke answered: {}; revokes retried after 409: {} {}",
            d["selected_after_revoke"], d["revoke_conflicts_retried"], d["revoke_conflict_codes"]
        );
        if let Some(servers) = d["server_index_ack_seconds"].as_array() {
            for (idx, h) in servers.iter().enumerate() {
                let buckets: Vec<String> = h["buckets"]
                    .as_array()
                    .map(|b| {
                        b.iter()
                            .filter(|p| p[0] != "+Inf")
                            .map(|p| format!("<={}s:{}", p[0].as_str().unwrap_or("?"), p[1]))
                            .collect()
                    })
                    .unwrap_or_default();
                println!(
                    "  replica {idx} ineligible commit -> last index ack (server histogram): {} observations, mean {:.2} ms; {}",
                    h["count"],
                    f(&h["mean_ms"]),
                    buckets.join(" ")
                );
            }
        }
    }
    let then = &summary["then_recall"];
    if then.is_object() {
        let s = &then["recall"];
        let rss = &then["rss_kib"];
        println!(
            "  then recalls only for {:.1} s: {} recalls {:.0}/s  p50 {:.2} ms  p99 {:.2} ms  errors {}; server RSS MiB at the last write {}, then min {} max {} end {}",
            f(&then["seconds"]),
            s["count"],
            f(&s["per_second"]),
            f(&s["p50_ms"]),
            f(&s["p99_ms"]),
            s["errors"],
            mib(&rss["writes_end"]),
            mib(&rss["min"]),
            mib(&rss["max"]),
            mib(&rss["end"]),
        );
    }
    if let Some(e) = summary["first_error"].as_str() {
        println!("  first error: {e}");
    }
    let rss = &summary["rss_kib"];
    println!(
        "  server RSS MiB: before load {}, max {}, end {}",
        mib(&rss["before_load"]),
        mib(&rss["max"]),
        mib(&rss["end"])
    );
    if let Some(samples) = summary["rss_samples"].as_array() {
        // About ten evenly spaced points of the time series.
        let step = samples.len().div_ceil(10).max(1);
        let last = samples.len().saturating_sub(1);
        let points: Vec<String> = samples
            .iter()
            .enumerate()
            .filter(|(i, _)| i % step == 0 || *i == last)
            .map(|(_, s)| format!("{}s {} MiB", s[0], mib(&s[1])))
            .collect();
        println!("  RSS over time: {}", points.join(", "));
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let json = args.json;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(summary) => {
            if json {
                println!("{summary}");
            } else {
                print_report(&summary);
            }
            if summary["errors"].as_u64() == Some(0) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
