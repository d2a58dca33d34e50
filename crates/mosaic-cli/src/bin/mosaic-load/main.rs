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

mod deletions;
mod report;
mod requests;
mod server;
mod workload;

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
use mosaic_service::examples::{distinct_note, note_topic, preference};
use serde_json::{Value, json};

use deletions::run_deleter;
use report::print_report;
use requests::{HttpClient, Principal, ack_histogram, provision, request};
use server::{Server, locate_mosaic, rss_kib, start_server};
use workload::{OpStats, Phases, micros, probe_health, run_client};

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
