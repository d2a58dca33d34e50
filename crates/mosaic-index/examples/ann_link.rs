//! Cost of linking vectors into the HNSW graph, the work of the server's
//! graph linker, without a server.
//!
//! ```text
//! cargo run --release -p mosaic-index --example ann_link -- [--vectors 20000] [--dim 384]
//! ```
//!
//! Seeded, clustered unit vectors (50 centres, noise around each), linked
//! one at a time into an index with the default [`AnnConfig`]; prints the
//! mean time per vector for each quarter of the run, so the growth with
//! the graph's size shows, then, with every doc eligible and with one in
//! 2, 4 and 10, the recall@10 of graph searches against exact scans (200
//! more vectors of the same kind as queries), the time per query of each
//! (the exact scan as searches run it, pruned by byte scores, and scoring
//! every doc in f32, which must return the same), and the planner's
//! estimate and choice for that many eligible docs.

mod common;

use std::time::Instant;

use mosaic_index::scope::DocSet;
use mosaic_index::{AnnConfig, AnnIndex};

use common::arg;

struct Rng(u64);

impl Rng {
    fn float(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = arg(&args, "--vectors", 20_000).max(4);
    let dim = arg(&args, "--dim", 384).max(1);
    let mut rng = Rng(7);
    let centres: Vec<Vec<f32>> = (0..50)
        .map(|_| (0..dim).map(|_| rng.float()).collect())
        .collect();
    let queries = 200;
    let vectors: Vec<Vec<f32>> = (0..n + queries)
        .map(|i| {
            let mut v: Vec<f32> = centres[i % centres.len()]
                .iter()
                .map(|c| c + 0.6 * rng.float())
                .collect();
            let norm = v
                .iter()
                .map(|x| x * x)
                .sum::<f32>()
                .sqrt()
                .max(f32::MIN_POSITIVE);
            v.iter_mut().for_each(|x| *x /= norm);
            v
        })
        .collect();
    let mut index = AnnIndex::new(dim, AnnConfig::default());
    let quarter = n / 4;
    let started = Instant::now();
    let mut lap = Instant::now();
    let (vectors, probes) = vectors.split_at(n);
    for (i, v) in vectors.iter().enumerate() {
        index.insert(i as u32, v);
        if (i + 1) % quarter == 0 {
            println!(
                "vectors {:>7} to {:>7}: {:.1} us each",
                i + 1 - quarter,
                i + 1,
                lap.elapsed().as_secs_f64() * 1e6 / quarter as f64
            );
            lap = Instant::now();
        }
    }
    let total = started.elapsed().as_secs_f64();
    println!(
        "{n} vectors of {dim} dimensions linked in {total:.3} s: {:.1} us each",
        total * 1e6 / n as f64
    );
    // Every doc eligible, then one in 2, 4 and 10: the recall of graph
    // searches against exact scans, each one's time per query, and what
    // the planner estimates and picks for that many eligible docs.
    for every in [1, 2, 4, 10] {
        let mut eligible = DocSet::with_capacity(n);
        for d in (0..n).step_by(every) {
            eligible.insert(d as u32);
        }
        let (mut f32_s, mut exact_s, mut graph_s, mut found) = (0.0, 0.0, 0.0, 0);
        for q in probes {
            let at = Instant::now();
            let every_doc = index.exact_f32(q, &eligible, 10);
            f32_s += at.elapsed().as_secs_f64();
            let at = Instant::now();
            let truth = index.exact(q, &eligible, 10);
            exact_s += at.elapsed().as_secs_f64();
            assert_eq!(
                truth, every_doc,
                "the byte-pruned scan differs from the f32 scan"
            );
            let at = Instant::now();
            let graph = index.graph_filtered(q, Some(&eligible), 10);
            graph_s += at.elapsed().as_secs_f64();
            found += graph
                .iter()
                .filter(|g| truth.iter().any(|t| t.0 == g.0))
                .count();
        }
        let per = |s: f64| s * 1e3 / probes.len() as f64;
        let (scan_cost, graph_cost) = index.plan_costs(eligible.len());
        println!(
            "{} eligible: graph recall@10 against exact scans {:.4} ({found} of {}); \
             per query: exact {:.3} ms (every doc in f32: {:.3} ms), graph {:.3} ms; \
             estimated graph / scan cost {:.2}, plan {:?}",
            eligible.len(),
            found as f64 / (10 * probes.len()) as f64,
            10 * probes.len(),
            per(exact_s),
            per(f32_s),
            per(graph_s),
            graph_cost / scan_cost,
            index.plan(eligible.len()),
        );
    }
}
