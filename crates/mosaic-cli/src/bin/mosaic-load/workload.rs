//! The clients' workload and what it measures: proposals mixed with
//! ranked recalls per client, latency per operation, and the `/health`
//! prober beside them.

use super::*;

/// Latencies in microseconds and the error count of one operation.
#[derive(Default)]
pub(super) struct OpStats {
    pub(super) latencies_us: Vec<u64>,
    pub(super) errors: u64,
    /// Of the errors, proposals answered 200 and not accepted (the gate
    /// refused them: a write guard, a policy).
    pub(super) refused: u64,
}

impl OpStats {
    pub(super) fn merge(&mut self, other: OpStats) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
        self.refused += other.refused;
    }

    pub(super) fn summary(&mut self, seconds: f64) -> Value {
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

pub(super) struct ClientResult {
    pub(super) propose: OpStats,
    pub(super) recall: OpStats,
    /// Recalls after `writes_until` (the `--then-recall` phase).
    pub(super) recall_after: OpStats,
    pub(super) first_error: Option<String>,
}

/// xorshift64*: a dependency-free, seeded choice of operation and topic.
pub(super) fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// When a client stops writing (it recalls only from then on) and when it
/// stops.
#[derive(Clone, Copy)]
pub(super) struct Phases {
    pub(super) writes_until: Instant,
    pub(super) deadline: Instant,
}

pub(super) async fn run_client(
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

/// `GET /health` on `url` (`http://127.0.0.1:PORT`) every 10 ms until
/// `deadline` or `stop`, over one kept-alive connection (opened again
/// after a failure), with blocking reads: the latency of each 200 answer,
/// from writing the request to reading the body's last byte, and every
/// other outcome counted as an error. Plain HTTP/1.1 by hand: the CLI's
/// client (`ureq`) added about 0.45 ms to every probe's p50 here.
pub(super) fn probe_health(url: &str, deadline: Instant, stop: &AtomicBool) -> OpStats {
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

pub(super) fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros().min(u128::from(u64::MAX)) as u64
}
