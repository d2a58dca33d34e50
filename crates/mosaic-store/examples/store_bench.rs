//! Store benchmark: durable accepted writes per second (single and
//! batched), eligibility-query latency at N records over M principals, a
//! read right after a write (every eligible id, or what changed since the
//! last read) and revoke-to-ineligible latency.
//!
//! ```text
//! cargo run --release -p mosaic-store --example store_bench -- \
//!     [--records N] [--principals M] [--batch B] [--single W] [--queries Q] [--revokes R]
//!     [--changes C]
//! ```
//!
//! Defaults are small (N=20000, M=200). The large run documented in
//! BENCHMARKS.md is `--records 1000000 --principals 10000`.
//! Every commit is durable (WAL, synchronous=FULL): the numbers include the
//! fsync of each transaction.

use std::time::{Duration, Instant};

use mosaic_store::conformance::fixtures::{self, Spec, T0};
use mosaic_store::{
    EligibilityQuery, RevocationReason, SqliteStore, Store, StoreConfig, StoreResult, WriteRequest,
};

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|idx| args.get(idx + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[idx.min(samples.len() - 1)]
}

fn principal(idx: u64) -> String {
    format!("p{idx:06}")
}

/// A principal-scoped semantic record for principal `p` (policy without the
/// consent requirement, so M principals need only M grants).
fn request(id: &str, p: &str) -> WriteRequest {
    let mut spec = Spec::principal(fixtures::TENANT_A, p, id);
    spec.with_consent = false;
    spec.build()
}

fn open(
    dir: &std::path::Path,
    name: &str,
    targets: &[&str],
    principals: u64,
) -> StoreResult<SqliteStore> {
    let config = StoreConfig {
        required_index_targets: targets.iter().map(|t| (*t).to_owned()).collect(),
        ..StoreConfig::default()
    };
    let mut store = SqliteStore::open(dir.join(name), config)?;
    let mut policy = fixtures::policy(fixtures::TENANT_A);
    policy.require_consent_for_principal_semantic = false;
    store.put_policy(&policy, T0 - 1)?;
    for idx in 0..principals {
        store.put_grant(
            &fixtures::grant(fixtures::TENANT_A, &principal(idx)),
            T0 - 1,
        )?;
    }
    Ok(store)
}

fn main() -> StoreResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let records = arg(&args, "--records", 20_000);
    let principals = arg(&args, "--principals", 200).max(1);
    let batch = arg(&args, "--batch", 256).clamp(1, 1024);
    let single = arg(&args, "--single", 300);
    let queries = arg(&args, "--queries", 500);
    let revokes = arg(&args, "--revokes", 100);
    let changes = arg(&args, "--changes", 100);
    let dir = tempfile::tempdir().map_err(|e| mosaic_store::StoreError::Backend(e.to_string()))?;
    println!("records {records} principals {principals} batch {batch}");

    // 1. Single durable writes (two index targets: record + receipt + outbox + audit).
    let mut store = open(
        dir.path(),
        "single.sqlite",
        &["lexical", "vector"],
        principals,
    )?;
    let started = Instant::now();
    for idx in 0..single {
        let outcome = store.write(&request(&format!("s{idx}"), &principal(idx % principals)))?;
        assert!(outcome.is_accepted());
    }
    let elapsed = started.elapsed();
    println!(
        "single_writes {single} in {:.3}s = {:.0} accepted writes/s",
        elapsed.as_secs_f64(),
        single as f64 / elapsed.as_secs_f64()
    );
    drop(store);

    // 2. Batched durable writes, building the N-record store for reads.
    // No index targets here so records are readable without simulating the
    // workers (the write path is otherwise identical).
    let mut store = open(dir.path(), "bulk.sqlite", &[], principals)?;
    let started = Instant::now();
    let mut next = 0u64;
    while next < records {
        let end = (next + batch).min(records);
        let requests: Vec<_> = (next..end)
            .map(|idx| request(&format!("r{idx:08}"), &principal(idx % principals)))
            .collect();
        let outcomes = store.write_batch(&requests)?;
        assert!(outcomes.iter().all(|o| o.is_accepted()));
        next = end;
    }
    let elapsed = started.elapsed();
    println!(
        "batched_writes {records} in {:.3}s = {:.0} accepted writes/s (batch {batch})",
        elapsed.as_secs_f64(),
        records as f64 / elapsed.as_secs_f64()
    );

    // 3. Eligibility query latency.
    let query = |p: &str| EligibilityQuery {
        tenant_id: fixtures::TENANT_A.into(),
        policy_sha256: fixtures::policy(fixtures::TENANT_A).policy_sha256,
        principal_id: p.into(),
        workspace_id: fixtures::WORKSPACE.into(),
        run_id: "run-1".into(),
        now_unix_ms: T0 + 10,
        kinds: mosaic_harness::MemoryKind::ALL.to_vec(),
    };
    let mut samples = Vec::with_capacity(queries as usize);
    let mut returned = 0usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..queries {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let p = principal(state % principals);
        let started = Instant::now();
        let set = store.eligible_records(&query(&p))?;
        samples.push(started.elapsed());
        returned += set.records.len();
    }
    println!(
        "eligibility_query p50 {:?} p95 {:?} p99 {:?} (avg {} records returned)",
        percentile(&mut samples, 0.50),
        percentile(&mut samples, 0.95),
        percentile(&mut samples, 0.99),
        returned / queries.max(1) as usize
    );

    // 4. A read right after a write (a live assistant's turn): the full
    // eligible-ids read against the read of what changed since the last
    // one, both answering the same ids, for one principal.
    let p = principal(0);
    let q = query(&p);
    let (first, _) = store.eligible_unknown(&q, &|_| true)?;
    let mut kept: std::collections::BTreeMap<String, u64> = first.ids.into_iter().collect();
    let mut since = first.scope_commitments;
    let (mut full, mut incremental) = (Vec::new(), Vec::new());
    for idx in 0..changes {
        let outcome = store.write(&request(&format!("turn{idx:06}"), &p))?;
        assert!(outcome.is_accepted());
        let started = Instant::now();
        let Some((found, _)) = store.eligible_changes(&q, &since, &|_| true)? else {
            panic!("no erasure, the reader's own scopes: the changes give the answer");
        };
        for id in &found.changed {
            kept.remove(id);
        }
        kept.extend(found.eligible);
        since = found.scope_commitments;
        incremental.push(started.elapsed());
        let started = Instant::now();
        let (all, _) = store.eligible_unknown(&q, &|_| true)?;
        full.push(started.elapsed());
        let kept_ids: Vec<(String, u64)> = kept.iter().map(|(id, g)| (id.clone(), *g)).collect();
        assert_eq!(all.ids, kept_ids, "the same answer");
    }
    println!(
        "read_after_write {} eligible: full ids p50 {:?} p95 {:?}; changes since p50 {:?} p95 {:?} ({changes} writes)",
        kept.len(),
        percentile(&mut full, 0.50),
        percentile(&mut full, 0.95),
        percentile(&mut incremental, 0.50),
        percentile(&mut incremental, 0.95),
    );

    // 5. Revoke-to-ineligible: the revoke transaction, then a read that no
    // longer returns the record.
    let mut samples = Vec::with_capacity(revokes as usize);
    for idx in 0..revokes.min(records) {
        let id = format!("r{idx:08}");
        let p = principal(idx % principals);
        let started = Instant::now();
        store.revoke(
            &id,
            &RevocationReason::Requested,
            &fixtures::authorization("bench"),
            T0 + 20,
        )?;
        let set = store.eligible_records(&query(&p))?;
        samples.push(started.elapsed());
        assert!(!set.records.iter().any(|r| r.record.record_id == id));
    }
    println!(
        "revoke_to_ineligible p50 {:?} p95 {:?} p99 {:?}",
        percentile(&mut samples, 0.50),
        percentile(&mut samples, 0.95),
        percentile(&mut samples, 0.99)
    );
    Ok(())
}
