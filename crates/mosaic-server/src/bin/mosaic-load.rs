//! `mosaic-load`: a bounded load test of the HTTP API on loopback.
//!
//! Starts `mosaic serve` on 127.0.0.1 (port 0) in a temporary data
//! directory, provisions one tenant and `--principals` keys (each with a
//! consent) through the admin API, then runs `--clients` concurrent clients
//! for `--duration` seconds. Each client uses one principal's key and mixes
//! proposals (`--write-percent`) with ranked recalls. It reports throughput,
//! p50/p99/max latency per operation, the error count (any non-200 answer,
//! rejected proposal or transport failure) and the server's resident memory
//! (VmRSS from /proc/PID/status) sampled every `--sample-ms`.
//!
//! Bounded by construction: at most 1024 clients and 3600 s, loopback only,
//! and the server and its data directory are removed at the end.
//! Exit codes: 0 no errors, 2 errors or failure. `--json` prints one
//! summary object instead of the report.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mosaic_server::examples::preference;
use serde_json::{Value, json};

/// Bounded load test of a local `mosaic serve`.
#[derive(Parser, Debug)]
#[command(name = "mosaic-load", version, about)]
struct Args {
    /// Concurrent clients (1..=1024).
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Seconds of load after setup (1..=3600).
    #[arg(long, default_value_t = 120)]
    duration: u64,
    /// Principals (one key each); clients share them round-robin
    /// (default: one per client).
    #[arg(long)]
    principals: Option<usize>,
    /// Share of operations that are proposals (the rest are recalls).
    #[arg(long, default_value_t = 50)]
    write_percent: u32,
    /// Resident-memory sampling interval in milliseconds.
    #[arg(long, default_value_t = 1000)]
    sample_ms: u64,
    /// The `mosaic` binary (default: next to this one).
    #[arg(long)]
    mosaic_bin: Option<PathBuf>,
    /// Print one JSON summary instead of the report.
    #[arg(long)]
    json: bool,
}

const TENANT: &str = "load";
const MAX_CLIENTS: usize = 1024;
const MAX_SECONDS: u64 = 3600;
const TOPICS: [&str; 8] = [
    "coffee", "deploys", "invoices", "hiking", "jazz", "rust", "tea", "travel",
];

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

fn start_server(bin: &Path, data_dir: &Path) -> Result<Server> {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        // The load is many keys at full speed: lift the per-key rate limit.
        .args(["--rate-limit-per-second", "1000000"])
        .args(["--rate-limit-burst", "1000000"])
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

struct Principal {
    key: String,
    principal_id: String,
    consent: String,
}

async fn provision(
    client: &HttpClient,
    server: &Server,
    principals: usize,
) -> Result<Vec<Principal>> {
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
    if status != 200 {
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
        });
    }
    Ok(out)
}

/// Latencies in microseconds and the error count of one operation.
#[derive(Default)]
struct OpStats {
    latencies_us: Vec<u64>,
    errors: u64,
}

impl OpStats {
    fn merge(&mut self, other: OpStats) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
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
    first_error: Option<String>,
}

/// xorshift64*: a dependency-free, seeded choice of operation and topic.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

async fn run_client(
    client: HttpClient,
    base: String,
    principal: (String, String, String),
    client_idx: usize,
    write_percent: u32,
    deadline: Instant,
) -> ClientResult {
    let (key, principal_id, consent) = principal;
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ (client_idx as u64 + 1).wrapping_mul(0xff51_afd7);
    let mut result = ClientResult {
        propose: OpStats::default(),
        recall: OpStats::default(),
        first_error: None,
    };
    let propose_url = format!("{base}/v1/memories");
    let recall_url = format!("{base}/v1/recall");
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let roll = next_random(&mut state);
        let topic = TOPICS[(roll >> 8) as usize % TOPICS.len()];
        let is_write = (roll % 100) < u64::from(write_percent);
        let started = Instant::now();
        let outcome = if is_write {
            let label = format!("c{client_idx}-n{n}");
            let content = format!("{principal_id} noted {topic} item {n} from client {client_idx}");
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
        } else {
            &mut result.recall
        };
        match outcome {
            Ok((true, _, _)) => stats.latencies_us.push(elapsed),
            Ok((false, status, body)) => {
                stats.errors += 1;
                if result.first_error.is_none() {
                    // The error code only: a body can echo memory content.
                    let code = body["error"]["code"]
                        .as_str()
                        .or(body["decision"].as_str())
                        .unwrap_or("?");
                    result.first_error = Some(format!("HTTP {status} {code}"));
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
            "no mosaic binary next to {}; build it (cargo build -p mosaic-server) or pass --mosaic-bin",
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
    if args.write_percent > 100 {
        bail!("--write-percent must be 0..=100");
    }
    let principals = args
        .principals
        .unwrap_or(args.clients)
        .clamp(1, args.clients);
    let bin = locate_mosaic(args.mosaic_bin.clone())?;
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let server = start_server(&bin, &dir.path().join("data"))?;
    let pid = server.child.id();
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(MAX_CLIENTS)
        .build_http();
    let setup_started = Instant::now();
    let keys = provision(&client, &server, principals).await?;
    let setup_seconds = setup_started.elapsed().as_secs_f64();
    let rss_start = rss_kib(pid);
    if !args.json {
        eprintln!(
            "mosaic-load: {} clients, {} principals, {}% proposals, {} s against {} (pid {pid}); setup {setup_seconds:.1} s",
            args.clients, principals, args.write_percent, args.duration, server.url
        );
    }

    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.duration);
    let mut tasks = Vec::with_capacity(args.clients);
    for idx in 0..args.clients {
        let p = &keys[idx % keys.len()];
        tasks.push(tokio::spawn(run_client(
            client.clone(),
            server.url.clone(),
            (p.key.clone(), p.principal_id.clone(), p.consent.clone()),
            idx,
            args.write_percent,
            deadline,
        )));
    }
    // Resident memory over time, while the clients run.
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let interval = Duration::from_millis(args.sample_ms.max(50));
    let mut ticker = tokio::time::interval(interval);
    while Instant::now() < deadline {
        ticker.tick().await;
        if let Some(kib) = rss_kib(pid) {
            samples.push((started.elapsed().as_secs_f64(), kib));
        }
    }
    let mut propose = OpStats::default();
    let mut recall = OpStats::default();
    let mut first_error = None;
    let mut failed_clients = 0u64;
    for task in tasks {
        match task.await {
            Ok(r) => {
                propose.merge(r.propose);
                recall.merge(r.recall);
                if first_error.is_none() {
                    first_error = r.first_error;
                }
            }
            Err(_) => failed_clients += 1,
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let rss_end = rss_kib(pid);
    let total = propose.latencies_us.len() + recall.latencies_us.len();
    let errors = propose.errors + recall.errors + failed_clients;
    let rss_max = samples.iter().map(|s| s.1).max();
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
        "rss_kib": {"before_load": rss_start, "max": rss_max, "end": rss_end},
        "rss_samples": samples.iter().map(|(t, kib)| json!([(*t * 10.0).round() / 10.0, kib])).collect::<Vec<_>>(),
    }))
}

fn print_report(summary: &Value) {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    println!(
        "mosaic-load: {} clients x {:.1} s: {} operations, {:.0} ops/s, {} errors",
        summary["clients"],
        f(&summary["duration_s"]),
        summary["operations"],
        f(&summary["per_second"]),
        summary["errors"]
    );
    for op in ["propose", "recall"] {
        let s = &summary[op];
        println!(
            "  {op:<8} {:>8} ops {:>8.0}/s  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>8.2} ms  errors {}",
            s["count"],
            f(&s["per_second"]),
            f(&s["p50_ms"]),
            f(&s["p99_ms"]),
            f(&s["max_ms"]),
            s["errors"]
        );
    }
    if let Some(e) = summary["first_error"].as_str() {
        println!("  first error: {e}");
    }
    let mib = |v: &Value| {
        v.as_f64()
            .map_or("?".to_owned(), |k| format!("{:.1}", k / 1024.0))
    };
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
