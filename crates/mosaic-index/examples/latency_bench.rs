//! Recall latency and ingest throughput with the hashing embedder.
//!
//! ```text
//! cargo run --release -p mosaic-index --example latency_bench -- \
//!     [--records 100000] [--principals 10000] [--queries 2000]
//! ```
//!
//! Synthetic records (12 words each from a 5,000-word vocabulary) spread
//! evenly over the principals of one tenant. Measures ingest throughput
//! (both targets), query-embedding latency on its own, and funnel latency
//! (hybrid, neighbour context, cache bypassed by distinct queries) for
//! principal-scoped reads and for a few large-scope reads (half of all
//! records eligible, which plans the filtered graph).

use std::sync::Arc;
use std::time::{Duration, Instant};

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_scope::{EligibleEntry, EligibleSet};
use mosaic_index::{
    AnnConfig, Embedder, FunnelConfig, HashEmbedder, IndexTarget, PublishMessage, RecallQuery,
    RetrievalMode, Retriever, ScopeKeys, SearchPlan,
};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 17
    }
    fn word(&mut self) -> String {
        // Zipf-like: small ids far more frequent.
        let r = self.next() % 5_000;
        let id = (r * r) / 5_000;
        format!("w{id}")
    }
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx].as_secs_f64() * 1000.0
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name}: n={} p50={:.3} ms p99={:.3} ms",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.99)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n_records = arg(&args, "--records", 100_000);
    let n_principals = arg(&args, "--principals", 10_000).max(1);
    let n_queries = arg(&args, "--queries", 2_000);
    let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(256));
    let policy = sha256_hex(b"bench policy");
    let tenant = "tenant-bench";
    let mut retriever = Retriever::new(
        embedder.clone(),
        AnnConfig::default(),
        FunnelConfig::default(),
    );
    let mut rng = Rng(42);

    let mut per_principal: Vec<Vec<EligibleEntry>> = vec![Vec::new(); n_principals];
    let started = Instant::now();
    let mut batch = Vec::with_capacity(256);
    for i in 0..n_records {
        let principal = i % n_principals;
        let text: Vec<String> = (0..12).map(|_| rng.word()).collect();
        let text = text.join(" ");
        let record_id = format!("rec-{i:07}");
        per_principal[principal].push(EligibleEntry {
            record_id: record_id.clone(),
            content_sha256: sha256_hex(text.as_bytes()),
        });
        batch.push(PublishMessage {
            record_id,
            generation: 1,
            revocation_generation: 0,
            scope: ScopeKeys {
                tenant_id: tenant.into(),
                policy_sha256: policy.clone(),
                subject_key: format!("principal:p{principal}"),
                kind: MemoryKind::Episodic,
            },
            created_at_unix_ms: i as u64,
            claim_keys: Vec::new(),
            text,
        });
        if batch.len() == 256 || i + 1 == n_records {
            for r in retriever.lexical.publish_batch(&batch) {
                if let Err(e) = r {
                    eprintln!("latency_bench: {e}");
                    std::process::exit(2);
                }
            }
            for r in retriever.vector.publish_batch(&batch) {
                if let Err(e) = r {
                    eprintln!("latency_bench: {e}");
                    std::process::exit(2);
                }
            }
            batch.clear();
        }
    }
    let ingest = started.elapsed().as_secs_f64();
    println!(
        "ingest: {n_records} records over {n_principals} principals in {ingest:.1} s = {:.0} records/s (lexical + vector targets, HNSW built)",
        n_records as f64 / ingest
    );

    let eligible: Vec<EligibleSet> = per_principal
        .into_iter()
        .enumerate()
        .map(|(p, mut entries)| {
            entries.sort();
            EligibleSet {
                read_context_sha256: sha256_hex(format!("p{p}").as_bytes()),
                entries,
            }
        })
        .collect();
    let queries: Vec<String> = (0..n_queries)
        .map(|_| (0..4).map(|_| rng.word()).collect::<Vec<_>>().join(" "))
        .collect();

    let mut embed_times = Vec::with_capacity(n_queries);
    let mut vectors = Vec::with_capacity(n_queries);
    for q in &queries {
        let t = Instant::now();
        let v = retriever.embed_query(q).unwrap_or_default();
        embed_times.push(t.elapsed());
        vectors.push(v);
    }
    report("query embedding (hash, alone)", embed_times);

    let mut recall_times = Vec::with_capacity(n_queries);
    for (i, (q, v)) in queries.iter().zip(&vectors).enumerate() {
        let set = &eligible[(i * 7919) % n_principals];
        let read_subject = format!("p{i}");
        let query = RecallQuery {
            tenant_id: tenant,
            policy_sha256: &policy,
            selector_release: "bench",
            read_subject: &read_subject,
            revocation_generation: 0,
            text: q,
            claim_keys: &[],
            eligible: set,
            max_results: 10,
            mode: RetrievalMode::Hybrid,
        };
        let t = Instant::now();
        let r = retriever.recall_embedded(&query, Some(v));
        recall_times.push(t.elapsed());
        if let Err(e) = r {
            eprintln!("latency_bench: {e}");
            std::process::exit(2);
        }
    }
    report(
        &format!(
            "recall, principal scope (~{} records), hybrid, excluding embedding",
            n_records / n_principals
        ),
        recall_times,
    );

    // Large scope: every other principal's records (half the store).
    let mut big: Vec<EligibleEntry> = eligible
        .iter()
        .step_by(2)
        .flat_map(|s| s.entries.iter().cloned())
        .collect();
    big.sort();
    let big = EligibleSet {
        read_context_sha256: sha256_hex(b"half"),
        entries: big,
    };
    let mut big_times = Vec::new();
    let mut plan = None;
    for (i, (q, v)) in queries.iter().zip(&vectors).take(50).enumerate() {
        let read_subject = format!("big{i}");
        let query = RecallQuery {
            tenant_id: tenant,
            policy_sha256: &policy,
            selector_release: "bench",
            read_subject: &read_subject,
            revocation_generation: 0,
            text: q,
            claim_keys: &[],
            eligible: &big,
            max_results: 10,
            mode: RetrievalMode::Vector,
        };
        let t = Instant::now();
        match retriever.recall_embedded(&query, Some(v)) {
            Ok(r) => plan = r.vector_plan,
            Err(e) => {
                eprintln!("latency_bench: {e}");
                std::process::exit(2);
            }
        }
        big_times.push(t.elapsed());
    }
    report(
        &format!(
            "recall, half-store scope ({} records), vector only, plan {:?}",
            big.entries.len(),
            plan.unwrap_or(SearchPlan::ExactScan)
        ),
        big_times,
    );
}
