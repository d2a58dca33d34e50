//! Recall latency and ingest throughput with the hashing embedder.
//!
//! ```text
//! cargo run --release -p mosaic-index --example latency_bench -- \
//!     [--records 100000] [--principals 10000] [--queries 2000] [--ef-construction N] [--ef-search N]
//!     [--big-reads 50] [--graph-cost-permille 1000]
//! ```
//!
//! Synthetic records (12 words each from a 5,000-word vocabulary) spread
//! evenly over the principals of one tenant. Measures ingest throughput
//! (both targets), query-embedding latency on its own, and funnel latency
//! (hybrid, neighbour context, cache bypassed by distinct queries) for
//! principal-scoped reads and for a few large-scope reads (half of all
//! records eligible; the planner picks the exact scan or the filtered graph
//! by estimated cost, `--graph-cost-permille 1` forces the graph).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_scope::{EligibleEntry, EligibleSet, SealedEligibleSet};
use mosaic_index::{
    AnnConfig, Embedder, FunnelConfig, HashEmbedder, IndexTarget, PublishMessage, RecallQuery,
    RetrievalMode, Retriever, ScopeKeys, SearchPlan,
};

use common::arg;

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
    let defaults = AnnConfig::default();
    let ann = AnnConfig {
        ef_construction: arg(&args, "--ef-construction", defaults.ef_construction),
        ef_search: arg(&args, "--ef-search", defaults.ef_search),
        graph_cost_permille: arg(&args, "--graph-cost-permille", defaults.graph_cost_permille),
        ..defaults
    };
    let mut retriever = Retriever::new(embedder.clone(), ann, FunnelConfig::default());
    let mut rng = Rng(42);

    let mut per_principal: Vec<Vec<EligibleEntry>> = vec![Vec::new(); n_principals];
    // Texts of the half-store scope, for exact ground truth below.
    let mut half_store_texts: Vec<(String, String)> = Vec::new();
    let started = Instant::now();
    let mut batch = Vec::with_capacity(256);
    let (mut lexical_secs, mut embed_secs, mut vector_secs) = (0.0, 0.0, 0.0);
    let progress_every = (n_records / 10).max(1);
    for i in 0..n_records {
        if i > 0 && i % progress_every == 0 {
            eprintln!(
                "latency_bench: ingested {i}/{n_records} records ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
        }
        let principal = i % n_principals;
        let text: Vec<String> = (0..12).map(|_| rng.word()).collect();
        let text = text.join(" ");
        let record_id = format!("rec-{i:07}");
        if principal.is_multiple_of(2) {
            half_store_texts.push((record_id.clone(), text.clone()));
        }
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
            let t = Instant::now();
            for r in retriever.lexical.publish_batch(&batch) {
                if let Err(e) = r {
                    eprintln!("latency_bench: {e}");
                    std::process::exit(2);
                }
            }
            lexical_secs += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let texts: Vec<&str> = batch.iter().map(|m| m.text.as_str()).collect();
            if let Err(e) = embedder.embed_batch(&texts) {
                eprintln!("latency_bench: {e}");
                std::process::exit(2);
            }
            embed_secs += t.elapsed().as_secs_f64();
            let t = Instant::now();
            for r in retriever.vector.publish_batch(&batch) {
                if let Err(e) = r {
                    eprintln!("latency_bench: {e}");
                    std::process::exit(2);
                }
            }
            vector_secs += t.elapsed().as_secs_f64();
            batch.clear();
        }
    }
    let ingest = started.elapsed().as_secs_f64();
    println!(
        "ingest: {n_records} records over {n_principals} principals in {ingest:.1} s = {:.0} records/s (lexical + vector targets, HNSW built)",
        n_records as f64 / ingest
    );
    println!(
        "ingest split: lexical target {lexical_secs:.1} s; vector target {vector_secs:.1} s, of which embedding about {embed_secs:.1} s (timed apart: the target embeds again); the rest is record generation"
    );

    let eligible: Vec<SealedEligibleSet> = per_principal
        .into_iter()
        .enumerate()
        .map(|(p, mut entries)| {
            entries.sort();
            seal(EligibleSet {
                scope_commitments: Vec::new(),
                read_context_sha256: sha256_hex(format!("p{p}").as_bytes()),
                entries,
            })
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
        .flat_map(|s| s.entries().to_vec())
        .collect();
    big.sort();
    let big = seal(EligibleSet {
        scope_commitments: Vec::new(),
        read_context_sha256: sha256_hex(b"half"),
        entries: big,
    });
    let mut big_times = Vec::new();
    let mut found: Vec<Vec<String>> = Vec::new();
    let mut plan = None;
    let big_reads = arg(&args, "--big-reads", 50);
    for (i, (q, v)) in queries.iter().zip(&vectors).take(big_reads).enumerate() {
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
            Ok(r) => {
                plan = r.vector_plan;
                found.push(r.record_ids().iter().map(|s| s.to_string()).collect());
            }
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
            big.entries().len(),
            plan.unwrap_or(SearchPlan::ExactScan)
        ),
        big_times,
    );
    // Recall@10 of those reads against an exact scan of the same scope.
    let half_vectors: Vec<(String, Vec<f32>)> = half_store_texts
        .iter()
        .map(|(id, text)| (id.clone(), retriever.embed_query(text).unwrap_or_default()))
        .collect();
    let mut hit = 0usize;
    let mut total = 0usize;
    for (v, got) in vectors.iter().zip(&found) {
        let mut scored: Vec<(f32, &str)> = half_vectors
            .iter()
            .map(|(id, x)| {
                (
                    x.iter().zip(v).map(|(a, b)| a * b).sum::<f32>(),
                    id.as_str(),
                )
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let truth: Vec<&str> = scored.iter().take(10).map(|(_, id)| *id).collect();
        total += truth.len();
        hit += truth.iter().filter(|t| got.iter().any(|g| g == *t)).count();
    }
    println!(
        "half-store reads: recall@10 against an exact scan {:.3} ({hit}/{total})",
        hit as f64 / total.max(1) as f64
    );
}

/// `set` with its digest (a set of generated ids always has one).
fn seal(set: EligibleSet) -> SealedEligibleSet {
    SealedEligibleSet::seal(set).unwrap_or_else(|e| panic!("eligible set digest: {e}"))
}
