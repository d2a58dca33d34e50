//! Crash harness: kills a writer process with SIGKILL at random points and
//! checks that no acknowledged write is lost and nothing partial remains.
//!
//! ```text
//! mosaic-crash-harness run --dir DIR [--kills N] [--seed S]
//! mosaic-crash-harness writer --db FILE --start K     (internal: the child)
//! ```
//!
//! `run` starts a writer child, lets it write for a random 5–60 ms, kills
//! it, reopens the store and checks: every write the child acknowledged on
//! stdout is present and its gate receipt re-verifies; `PRAGMA
//! integrity_check` is ok; every committed record has its outbox rows; no
//! accepted proposal lacks its record; the audit chain verifies. Every
//! write also keeps a captured message and an export copy beside its
//! record (`WriteRequest::kept`): for every write attempted since the
//! previous kill, the record, its message, its export copy and its
//! proposal's owner exist all together or none of them (a write where
//! they differ is counted as half-written). It prints `attempted`,
//! `acknowledged`, `present`, `lost` and `half_written`, and exits 1 when
//! anything was lost, half-written or is inconsistent, 2 on a usage or
//! setup error.
//!
//! The full run is `cargo run --release -p mosaic-store --features
//! conformance --bin mosaic-crash-harness -- run --dir target/crash --kills 200`
//! (it uses the conformance suite's fixtures, hence the feature).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mosaic_store::conformance::fixtures::{self, Spec, T0};
use mosaic_store::conformance::{publish_all, test_config};
use mosaic_store::intake::{CapturedMessage, KeptWithRecord};
use mosaic_store::{SqliteStore, Store, WriteRequest};

/// A small xorshift generator: the harness's only source of randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|idx| args.get(idx + 1))
            .cloned()
    };
    let result = match args.first().map(String::as_str) {
        Some("writer") => match (flag("--db"), flag("--start")) {
            (Some(db), Some(start)) => match start.parse::<u64>() {
                Ok(start) => writer(Path::new(&db), start),
                Err(e) => Err(format!("--start: {e}")),
            },
            _ => Err("writer needs --db and --start".into()),
        },
        Some("run") => {
            let Some(dir) = flag("--dir") else {
                eprintln!("run needs --dir");
                return ExitCode::from(2);
            };
            let kills = flag("--kills").and_then(|k| k.parse().ok()).unwrap_or(20);
            let seed = flag("--seed")
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| {
                    SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map(|d| d.as_nanos() as u64)
                        .unwrap_or(1)
                        | 1
                });
            return match run(Path::new(&dir), kills, seed) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            };
        }
        _ => Err("usage: mosaic-crash-harness run --dir DIR [--kills N] [--seed S]".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `request` (record `id`, by `principal`) with a captured message and an
/// export copy to commit beside its record.
fn with_kept(mut request: WriteRequest, principal: &str, id: &str) -> WriteRequest {
    request.kept = KeptWithRecord {
        export_request_json: Some(format!("{{\"record\":\"{id}\"}}")),
        message: Some(CapturedMessage {
            tenant_id: fixtures::TENANT_A.to_owned(),
            principal_id: principal.to_owned(),
            conversation_id: "conv".to_owned(),
            message_id: id.to_owned(),
            record_id: request.proposal.record_id.clone(),
            content_sha256: request.proposal.content_sha256.clone(),
            provenance_sha256: request.proposal.provenance_sha256.clone(),
            locator_sha256: fixtures::label(id),
            captured_at_ms: request.now_unix_ms,
        }),
    };
    request
}

/// The child: writes forever (single writes, batches, publications),
/// printing `try <id>` before and `ack <id>` after each durable commit.
fn writer(db: &Path, start: u64) -> Result<(), String> {
    let config = test_config();
    let mut store = SqliteStore::open(db, config.clone()).map_err(|e| e.to_string())?;
    fixtures::seed(&mut store, fixtures::TENANT_A, &["alice", "bob"]).map_err(|e| e.to_string())?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut idx = start;
    loop {
        let principal = if idx.is_multiple_of(2) {
            "alice"
        } else {
            "bob"
        };
        if idx.is_multiple_of(5) {
            let ids: Vec<String> = (0..4).map(|k| format!("w{}", idx + k)).collect();
            for id in &ids {
                writeln!(out, "try {id}").map_err(|e| e.to_string())?;
            }
            out.flush().map_err(|e| e.to_string())?;
            let batch: Vec<_> = ids
                .iter()
                .map(|id| {
                    with_kept(
                        Spec::workspace(fixtures::TENANT_A, principal, id).build(),
                        principal,
                        id,
                    )
                })
                .collect();
            store.write_batch(&batch).map_err(|e| e.to_string())?;
            for id in &ids {
                writeln!(out, "ack {id}").map_err(|e| e.to_string())?;
            }
            idx += 4;
        } else {
            let id = format!("w{idx}");
            writeln!(out, "try {id}").map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())?;
            let request = with_kept(
                Spec::principal(fixtures::TENANT_A, principal, &id).build(),
                principal,
                &id,
            );
            store.write(&request).map_err(|e| e.to_string())?;
            writeln!(out, "ack {id}").map_err(|e| e.to_string())?;
            idx += 1;
        }
        out.flush().map_err(|e| e.to_string())?;
        if idx.is_multiple_of(7) {
            publish_all(&mut store, &config.required_index_targets, T0 + idx)
                .map_err(|e| e.to_string())?;
        }
    }
}

fn run(dir: &Path, kills: u64, seed: u64) -> Result<bool, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let db: PathBuf = dir.join("crash.sqlite");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut rng = Rng(seed);
    let attempted = Arc::new(Mutex::new(Vec::<String>::new()));
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut verified = 0usize;
    let mut examined = 0usize;
    let mut half_written = 0usize;
    println!("seed {seed}");
    for round in 0..kills {
        let mut child = Command::new(&exe)
            .args(["writer", "--db"])
            .arg(&db)
            .args(["--start", &(round * 1_000_000).to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no child stdout")?;
        let (tries, acks) = (Arc::clone(&attempted), Arc::clone(&acknowledged));
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(id) = line.strip_prefix("ack ") {
                    acks.lock().map(|mut a| a.push(id.to_owned())).ok();
                } else if let Some(id) = line.strip_prefix("try ") {
                    tries.lock().map(|mut t| t.push(id.to_owned())).ok();
                }
            }
        });
        std::thread::sleep(Duration::from_millis(rng.range(5, 60)));
        // Child::kill sends SIGKILL on Unix: no destructor, no flush.
        child.kill().map_err(|e| e.to_string())?;
        child.wait().map_err(|e| e.to_string())?;
        reader.join().map_err(|_| "reader thread panicked")?;
        if !check(&db, &acknowledged, &mut verified)? {
            println!("inconsistent after kill {}", round + 1);
            return Ok(false);
        }
        let tried: Vec<String> = attempted.lock().map(|t| t.clone()).unwrap_or_default();
        half_written += check_kept(&db, tried.get(examined..).unwrap_or_default())?;
        examined = tried.len();
    }
    let attempted = attempted.lock().map(|a| a.len()).unwrap_or(0);
    let acked: Vec<String> = acknowledged.lock().map(|a| a.clone()).unwrap_or_default();
    let mut store = SqliteStore::open(&db, test_config()).map_err(|e| e.to_string())?;
    let mut present = 0usize;
    for id in &acked {
        if store.get_record(id).map_err(|e| e.to_string())?.is_some() {
            present += 1;
        }
    }
    let lost = acked.len() - present;
    println!("kills {kills}");
    println!("attempted {attempted}");
    println!("acknowledged {}", acked.len());
    println!("present {present}");
    println!("lost {lost}");
    println!("half_written {half_written}");
    Ok(lost == 0 && half_written == 0)
}

/// How many of the writes `ids` are half-written: the record, its
/// captured message, its export copy and its proposal's owner are not
/// either all present or all absent.
fn check_kept(db: &Path, ids: &[String]) -> Result<usize, String> {
    let mut store = SqliteStore::open(db, test_config()).map_err(|e| e.to_string())?;
    let err = |e: mosaic_store::StoreError| e.to_string();
    let mut half = 0usize;
    for id in ids {
        let record = store.get_record(id).map_err(err)?.is_some();
        let copy = store
            .export_request(fixtures::TENANT_A, id)
            .map_err(err)?
            .is_some();
        let mut message = false;
        for principal in ["alice", "bob"] {
            message |= store
                .captured_message(fixtures::TENANT_A, principal, "conv", id)
                .map_err(err)?
                .is_some_and(|m| m.record_id == *id);
        }
        let owner = store
            .proposal_owner(&format!("p-{id}"))
            .map_err(err)?
            .is_some_and(|o| o.principal_id.is_some());
        if !(record == copy && record == message && record == owner) {
            println!(
                "half-written {id}: record {record}, message {message}, export copy {copy}, owner {owner}"
            );
            half += 1;
        }
    }
    Ok(half)
}

/// Reopens after a kill and checks every invariant. Receipts of writes
/// acknowledged since the previous check are re-verified (`verified` counts
/// those already done); presence is checked for all of them every time.
fn check(
    db: &Path,
    acknowledged: &Mutex<Vec<String>>,
    verified: &mut usize,
) -> Result<bool, String> {
    let mut store = SqliteStore::open(db, test_config()).map_err(|e| e.to_string())?;
    let report = store.integrity_check().map_err(|e| e.to_string())?;
    if !report.is_ok() {
        println!("integrity: {report:?}");
        return Ok(false);
    }
    let acked = acknowledged.lock().map(|a| a.clone()).unwrap_or_default();
    for (idx, id) in acked.iter().enumerate() {
        if store.get_record(id).map_err(|e| e.to_string())?.is_none() {
            println!("lost acknowledged write {id}");
            return Ok(false);
        }
        if idx >= *verified
            && let Err(e) = store.verify_write_receipt(&format!("p-{id}"))
        {
            println!("receipt of {id} does not verify: {e}");
            return Ok(false);
        }
    }
    *verified = acked.len();
    Ok(true)
}
