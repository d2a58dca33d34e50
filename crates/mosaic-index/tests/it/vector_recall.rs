//! Point 4: filter-aware planning. recall@10 against exact search at scope
//! selectivities 50%, 1% and 0.01%, beside a naive post-filter baseline.

use mosaic_index::embed::l2_normalise;
use mosaic_index::{AnnConfig, AnnIndex, DocSet, SearchPlan};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn unit(&mut self) -> f32 {
        (self.next() % 1_000_000) as f32 / 1_000_000.0
    }
    fn gauss(&mut self) -> f32 {
        // Irwin-Hall approximation: deterministic and good enough.
        (0..6).map(|_| self.unit()).sum::<f32>() - 3.0
    }
}

pub fn clustered(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng(seed);
    let centres: Vec<Vec<f32>> = (0..32)
        .map(|_| (0..dim).map(|_| rng.gauss()).collect())
        .collect();
    (0..n)
        .map(|i| {
            let c = &centres[i % centres.len()];
            let mut v: Vec<f32> = c.iter().map(|x| x + 0.6 * rng.gauss()).collect();
            l2_normalise(&mut v);
            v
        })
        .collect()
}

fn recall(found: &[(u32, f32)], truth: &[(u32, f32)]) -> f64 {
    if truth.is_empty() {
        return 1.0;
    }
    let hit = found
        .iter()
        .filter(|(d, _)| truth.iter().any(|(t, _)| t == d))
        .count();
    hit as f64 / truth.len() as f64
}

#[test]
fn filtered_search_keeps_recall_at_every_selectivity() {
    let n = 4_000;
    let dim = 24;
    let data = clustered(n, dim, 7);
    // At this size the scan is always estimated cheaper: the default
    // planner scans even half the corpus.
    let mut default = AnnIndex::new(dim, AnnConfig::default());
    // A low exact-scan limit and a graph estimate weighted down so this
    // small corpus exercises the graph.
    let config = AnnConfig {
        exact_limit: 256,
        graph_cost_permille: 1,
        ..AnnConfig::default()
    };
    let mut ann = AnnIndex::new(dim, config);
    for (i, v) in data.iter().enumerate() {
        ann.insert(i as u32, v);
        default.insert(i as u32, v);
    }
    assert_eq!(default.plan(n / 2), SearchPlan::ExactScan);
    assert_eq!(default.plan(n), SearchPlan::ExactScan);
    assert_eq!(ann.plan(n / 2), SearchPlan::FilteredGraph);
    let queries = clustered(40, dim, 99);
    // (selectivity in 1/10000, expected plan)
    for (per_10k, plan) in [
        (5_000u32, SearchPlan::FilteredGraph),
        (100, SearchPlan::ExactScan),
        (1, SearchPlan::ExactScan),
    ] {
        let mut planned = 0.0;
        let mut forced_graph = 0.0;
        let mut baseline = 0.0;
        for (qi, q) in queries.iter().enumerate() {
            let mut set = DocSet::with_capacity(n);
            // A different eligible subset per query; at least one doc.
            let stride = (10_000 / per_10k).max(1) as usize;
            for d in ((qi % stride)..n).step_by(stride) {
                set.insert(d as u32);
            }
            let truth = ann.exact(q, &set, 10);
            let (used, found) = ann.search(q, &set, 10);
            assert_eq!(used, plan, "plan at {per_10k}/10000");
            planned += recall(&found, &truth);
            forced_graph += recall(&ann.graph_filtered(q, Some(&set), 10), &truth);
            baseline += recall(&ann.post_filter_baseline(q, &set, 10), &truth);
        }
        let m = queries.len() as f64;
        let (planned, forced_graph, baseline) = (planned / m, forced_graph / m, baseline / m);
        println!(
            "selectivity {:>6.2}%: planned recall@10 {planned:.4}, filtered graph {forced_graph:.4}, post-filter baseline {baseline:.4}",
            f64::from(per_10k) / 100.0
        );
        assert!(
            planned >= 0.99,
            "planned recall {planned} at {per_10k}/10000"
        );
        assert!(
            forced_graph >= 0.95,
            "filtered graph recall {forced_graph} at {per_10k}/10000"
        );
        if per_10k <= 100 {
            assert!(
                baseline < 0.5,
                "post-filter baseline should collapse, got {baseline}"
            );
        }
    }
}

#[test]
fn deleted_vectors_are_erased_and_never_returned() {
    let dim = 16;
    let data = clustered(600, dim, 3);
    let mut ann = AnnIndex::new(dim, AnnConfig::default());
    for (i, v) in data.iter().enumerate() {
        ann.insert(i as u32, v);
    }
    for d in (0..600).step_by(3) {
        ann.remove(d);
    }
    assert_eq!(ann.len(), 400);
    let mut all = DocSet::with_capacity(600);
    for d in 0..600 {
        all.insert(d);
    }
    let mut total = 0.0;
    for q in clustered(20, dim, 5) {
        let found = ann.graph_filtered(&q, Some(&all), 10);
        assert!(
            found.iter().all(|(d, _)| d % 3 != 0),
            "a deleted vector was returned"
        );
        total += recall(&found, &ann.exact(&q, &all, 10));
    }
    assert!(
        total / 20.0 >= 0.95,
        "recall after deletions {}",
        total / 20.0
    );
}
