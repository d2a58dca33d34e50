//! Throughput of the pure core on this machine.
//!
//! Run: `cargo run --release -p mosaic-harness --example harness_bench -- [RECORDS] [PRINCIPALS]`
//! (defaults: 1,000,000 records over 10,000 principals). Single-threaded.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use mosaic_harness::fixtures::{fixture_record, scoped_selection_context};
use mosaic_harness::memory_scope::{
    CheckedRecord, EligibilityPass, Listing, ReadScope, RecordSet, ScopeCommitment,
    ScoredCandidate, SelectionError, eligibility, select_memory, select_memory_ranked_set,
    select_memory_set,
};
use mosaic_harness::memory_write::{MemoryWriteDecision, evaluate_memory_write, reference};
use mosaic_harness::{MemoryKind, MemoryRecord, MemoryStatus, MemorySubject};

fn generate(n_records: usize, n_principals: usize) -> Vec<MemoryRecord> {
    let ctx = scoped_selection_context();
    (0..n_records)
        .map(|idx| {
            let principal = if idx % n_principals == 0 {
                ctx.principal_id.clone()
            } else {
                format!("user-{:05}", idx % n_principals)
            };
            let (kind, subject) = match idx % 4 {
                0 => (
                    MemoryKind::Semantic,
                    MemorySubject::Principal {
                        principal_id: principal,
                    },
                ),
                1 => (
                    MemoryKind::Episodic,
                    MemorySubject::Principal {
                        principal_id: principal,
                    },
                ),
                2 => (
                    MemoryKind::Working,
                    MemorySubject::Run {
                        run_id: format!("run-{}", idx % 7),
                    },
                ),
                _ => (
                    MemoryKind::Semantic,
                    MemorySubject::Workspace {
                        workspace_id: format!("ws-{}", idx % 3),
                    },
                ),
            };
            let mut record = fixture_record(
                &format!("rec-{idx:08}"),
                kind,
                subject,
                "generated",
                ctx.now_unix_ms - 1_000 - (idx as u64 % 86_400_000),
            );
            if idx % 97 == 0 {
                record.status = MemoryStatus::Contested;
            }
            record
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n_records: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let n_principals: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000)
        .max(1);
    eprintln!("generating {n_records} records over {n_principals} principals...");
    let records = generate(n_records, n_principals);
    let ctx = scoped_selection_context();

    // 1. The decision kernel: one eligibility decision per record.
    let rounds = 5;
    let start = Instant::now();
    let mut eligible = 0usize;
    for _ in 0..rounds {
        for record in &records {
            if eligibility(black_box(&ctx), black_box(record)).is_ok() {
                eligible += 1;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let decisions = (rounds * records.len()) as f64;
    println!(
        "eligibility decisions/s      {:>14.0}   ({} decisions, {} eligible per round, {:.3} s)",
        decisions / secs,
        rounds * records.len(),
        eligible / rounds,
        secs
    );

    // 2. A full selection over every record: validation, decisions,
    //    ordering, canonical record-set digest and receipt.
    let start = Instant::now();
    let selection = match select_memory(&ctx, &records) {
        Ok(selection) => selection,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(2);
        }
    };
    let secs = start.elapsed().as_secs_f64();
    println!(
        "full select_memory           {:>14.0} records/s ({} records, {} selected, {:.3} s incl. receipt)",
        records.len() as f64 / secs,
        records.len(),
        selection.selected_ids().len(),
        secs
    );

    // 3. Typical reads: 200 candidate records each, receipt included.
    let window = 200.min(records.len()).max(1);
    let reads = 2_000;
    let start = Instant::now();
    for read in 0..reads {
        let offset = (read * window) % records.len().saturating_sub(window).max(1);
        let slice = &records[offset..offset + window.min(records.len())];
        black_box(
            select_memory(&ctx, slice)
                .map(|s| s.receipt.receipt_sha256.len())
                .ok(),
        );
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "receipted reads of {window} records  {:>10.0} reads/s ({:.1} µs each)",
        reads as f64 / secs,
        secs * 1e6 / reads as f64
    );

    // 4. A fresh read of a sealed set (what a reader does once after each
    //    change): seal the records and select, counted only, with the
    //    receipt over the record set's digest (v2) and over the read
    //    scopes' roots in its place (v5), then the same ranked over the
    //    pass's eligible set (ten scored records). Sealing checks the set;
    //    v2 hashes every record into the set's digest, which records are
    //    decided on, and the eligible entries for the ranked read; v5
    //    hashes none of them.
    let checked: Vec<Arc<CheckedRecord>> = match records
        .iter()
        .cloned()
        .map(|r| CheckedRecord::new(r).map(Arc::new))
        .collect()
    {
        Ok(checked) => checked,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(2);
        }
    };
    let roots: Vec<ScopeCommitment> = ReadScope::of_context(&ctx)
        .into_iter()
        .map(|scope| ScopeCommitment {
            scope,
            generation: 1,
            root_sha256: "00".repeat(32),
        })
        .collect();
    let scores: Vec<ScoredCandidate> = records
        .iter()
        .filter(|r| eligibility(&ctx, r).is_ok())
        .take(10)
        .enumerate()
        .map(|(at, r)| ScoredCandidate {
            record_id: r.record_id.clone(),
            score: 1_000 - at as u64,
        })
        .collect();
    let query_sha256 = "ab".repeat(32);
    for (label, bind, ranked) in [
        ("v2, record set", false, false),
        ("v2, record set, ranked", false, true),
        ("scope roots", true, false),
        ("scope roots, ranked", true, true),
    ] {
        let rounds = 5;
        let start = Instant::now();
        for _ in 0..rounds {
            let fresh = || -> Result<String, SelectionError> {
                let mut set = RecordSet::new(checked.clone())?;
                if bind {
                    set = set.with_scope_commitments(roots.clone());
                }
                let pass = EligibilityPass::new(&ctx, &set)?;
                let selection = if ranked {
                    let eligible = pass.eligible_set(&ctx)?;
                    let relevance = eligible
                        .rank(&query_sha256, "bench-v1", "bench-v1", &scores, 10)
                        .map_err(|e| SelectionError::RelevanceMismatch(e.to_string()))?;
                    select_memory_ranked_set(
                        &ctx,
                        &set,
                        &pass,
                        &relevance,
                        &eligible,
                        Listing::CountsOnly,
                    )?
                } else {
                    select_memory_set(&ctx, &set, &pass, Listing::CountsOnly)?
                };
                Ok(selection.receipt.receipt_sha256)
            };
            if let Err(err) = black_box(fresh()) {
                eprintln!("error: {err}");
                std::process::exit(2);
            }
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "fresh sealed read ({label}) {:>8.2} ms ({} records)",
            secs * 1e3 / rounds as f64,
            records.len()
        );
    }

    // 5. The ranking a recall makes over a kept sealed set: 200 scored
    //    records each looked up among the eligible ones. Each ranking
    //    names other records, spread over the whole set, so the lookups
    //    read what a recall's would, not what the last ranking left in
    //    the cache.
    let kept = || -> Result<_, SelectionError> {
        let set = RecordSet::new(checked.clone())?;
        let pass = EligibilityPass::new(&ctx, &set)?;
        pass.eligible_set(&ctx)
    };
    let kept = match kept() {
        Ok(kept) => kept,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(2);
        }
    };
    let eligible_ids: Vec<String> = kept
        .entries()
        .iter()
        .map(|e| e.record_id.to_owned())
        .collect();
    let (per_rank, lists) = (200usize, 500usize);
    let rankings: Vec<Vec<ScoredCandidate>> = (0..lists)
        .map(|list| {
            (0..per_rank)
                .filter_map(|at| {
                    let pick = (list + at * lists) * 7_919 % eligible_ids.len().max(1);
                    eligible_ids.get(pick)
                })
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .enumerate()
                .map(|(at, id)| ScoredCandidate {
                    record_id: id.clone(),
                    score: 1_000 + at as u64,
                })
                .collect()
        })
        .collect();
    let rounds = 4;
    let start = Instant::now();
    for _ in 0..rounds {
        for scores in &rankings {
            if let Err(err) =
                black_box(kept.rank(&query_sha256, "bench-v1", "bench-v1", scores, 10))
            {
                eprintln!("error: {err}");
                std::process::exit(2);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "rank {per_rank} scored over a kept set {:>8.1} µs each ({} eligible of {} records)",
        secs * 1e6 / (rounds * lists) as f64,
        eligible_ids.len(),
        records.len()
    );

    // 6. Write-gate decisions: the reference proposal (accepted) and one
    //    rejected mutation, each with its full receipt.
    let accepted = match reference::baseline_input() {
        Ok(input) => input,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(2);
        }
    };
    let mut rejected = accepted.clone();
    rejected.proposal.tenant_id = "tenant-other".into();
    let gate_rounds = 20_000;
    for (label, input) in [("accepted", &accepted), ("rejected", &rejected)] {
        let start = Instant::now();
        let mut n_accepted = 0usize;
        for _ in 0..gate_rounds {
            if let Ok(outcome) = evaluate_memory_write(black_box(input))
                && matches!(outcome.decision(), MemoryWriteDecision::Accepted { .. })
            {
                n_accepted += 1;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "gate decisions/s ({label})    {:>10.0}   ({:.1} µs each, receipt included, {n_accepted} accepted)",
            gate_rounds as f64 / secs,
            secs * 1e6 / gate_rounds as f64
        );
    }
}
