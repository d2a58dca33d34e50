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
//! the graph's size shows, then the recall@10 of graph searches over the
//! whole index against exact scans (200 more vectors of the same kind as
//! queries).

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
    let mut all = DocSet::with_capacity(n);
    for d in 0..n {
        all.insert(d as u32);
    }
    let started = Instant::now();
    let mut found = 0;
    for q in probes {
        let truth = index.exact(q, &all, 10);
        let graph = index.graph_filtered(q, Some(&all), 10);
        found += graph
            .iter()
            .filter(|g| truth.iter().any(|t| t.0 == g.0))
            .count();
    }
    println!(
        "graph recall@10 against exact scans: {:.4} ({found} of {}), {:.2} ms per query pair",
        found as f64 / (10 * probes.len()) as f64,
        10 * probes.len(),
        started.elapsed().as_secs_f64() * 1e3 / probes.len() as f64
    );
}
