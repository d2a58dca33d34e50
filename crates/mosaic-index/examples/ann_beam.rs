//! The graph's recall of the exact top `k` against its beam width, on
//! texts of your own, with the hashing embedder or MiniLM.
//!
//! ```text
//! cargo run --release -p mosaic-index --example ann_beam -- TEXTS QUERIES \
//!     [--dim 256] [--beams 10,20,50,100,128,160,200,256] [--ks 10,100] \
//!     [--model-dir DIR [--int8]] [--ef-construction 100] [--seeds 0,10,20]
//! ```
//!
//! With `--model-dir` (a `--features local-model` build) the texts are
//! embedded with MiniLM (`--int8`: its int8 weights), else with the
//! hashing embedder of `--dim` dimensions.
//!
//! `TEXTS` and `QUERIES` hold one text a line. Every text is embedded and
//! linked into an index with the default [`AnnConfig`], its construction
//! beam set by `--ef-construction` (the mean time per link is printed
//! for each tenth of the run, so its growth with the graph's size
//! shows); then, for each `k` and each beam, every query's
//! graph top `k` is compared with its exact top `k`
//! ([`AnnIndex::exact`]): the mean fraction found, the worst query's, and
//! the mean time per search. The planner's beam for `k` is marked.
//!
//! `--seeds` (default 0): for each count `n` above 0, the walk is also
//! started from the query's best `n` lexical hits
//! ([`AnnIndex::graph_with_beam_seeded`]), as a hybrid read seeds it: the
//! texts are published into a [`LexicalIndex`] in order (record `i`
//! created at the time `scripts/recall-scale.py` gives its `i`-th turn:
//! sessions of 500 turns a second apart, on days cycling through 28), and
//! each query's hits are the funnel's lexical list (BM25 over turn
//! windows with the default [`FunnelConfig`]); the time a search is
//! reported for is the graph's alone.

mod common;

use std::sync::Arc;
use std::time::Instant;

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_index::lexical::LexicalParams;
use mosaic_index::scope::DocSet;
use mosaic_index::{
    AnnConfig, AnnIndex, Eligible, Embedder, FunnelConfig, HashEmbedder, IndexTarget, LexicalIndex,
    ScopePredicate,
};

use common::arg;

fn list(args: &[String], name: &str, default: &[usize]) -> Vec<usize> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn lines(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| {
            eprintln!("ann_beam: {path}: {e}");
            std::process::exit(2)
        })
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

#[cfg(feature = "local-model")]
fn load_minilm(dir: &str, int8: bool) -> Arc<dyn Embedder> {
    let dir = std::path::Path::new(dir);
    let loaded = if int8 {
        mosaic_index::local_model::MiniLmEmbedder::load_int8(dir)
    } else {
        mosaic_index::local_model::MiniLmEmbedder::load(dir)
    };
    loaded
        .map(|e| Arc::new(e) as Arc<dyn Embedder>)
        .unwrap_or_else(|e| {
            eprintln!("ann_beam: {e}");
            std::process::exit(2)
        })
}

#[cfg(not(feature = "local-model"))]
fn load_minilm(_dir: &str, _int8: bool) -> Arc<dyn Embedder> {
    eprintln!("ann_beam: {}", mosaic_index::ModelError::FeatureDisabled);
    std::process::exit(2)
}

/// Each query's funnel lexical list (at most `depth` hits) as doc
/// numbers, the texts published as records `r0000000`, ... in order.
fn lexical_lists(texts: &[String], queries: &[String], depth: usize) -> Vec<Vec<u32>> {
    let policy = sha256_hex(b"bench policy");
    let (tenant, subject) = ("tenant-bench", "principal-bench");
    let mut index = LexicalIndex::new();
    for (i, text) in texts.iter().enumerate() {
        let (session, turn) = (i / 500, i % 500);
        let day = 1 + (session % 28) as u64;
        let message = common::episodic_turn(
            format!("r{i:07}"),
            tenant,
            &policy,
            subject,
            ((day * 24 + 10) * 3_600 + turn as u64) * 1_000,
            text.clone(),
        );
        if let Err(e) = index.publish(&message) {
            eprintln!("ann_beam: publish failed: {e}");
            std::process::exit(2)
        }
    }
    let predicate = ScopePredicate {
        subject_keys: [subject.to_owned()].into(),
        kinds: [MemoryKind::Episodic].into(),
    };
    let docs = index.eligible_docs(&Eligible::Scope(&predicate), tenant, &policy);
    let defaults = FunnelConfig::default();
    let params = LexicalParams {
        k1_permille: defaults.bm25_k1_permille,
        b_permille: defaults.bm25_b_permille,
        window_permille: defaults.lexical_window_permille,
        window_radius: defaults.lexical_window_radius,
    };
    queries
        .iter()
        .map(|q| {
            index
                .search_docs_params(q, &docs, depth, &params)
                .iter()
                .filter_map(|h| h.record_id.strip_prefix('r')?.parse().ok())
                .collect()
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: ann_beam TEXTS QUERIES [--dim 256] [--beams ...] [--ks 10,100]");
        std::process::exit(2);
    }
    let texts = lines(&args[0]);
    let queries = lines(&args[1]);
    let dim = arg(&args, "--dim", 256).max(1);
    let beams = list(&args, "--beams", &[10, 20, 50, 100, 128, 160, 200, 256]);
    let ks = list(&args, "--ks", &[10, 100]);
    let seed_counts = list(&args, "--seeds", &[0]);
    let embedder: Arc<dyn Embedder> = match value(&args, "--model-dir") {
        Some(dir) => load_minilm(dir, args.iter().any(|a| a == "--int8")),
        None => Arc::new(HashEmbedder::new(dim)),
    };
    let dim = embedder.dimension();
    let embed_all = |texts: &[String]| -> Vec<Vec<f32>> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(64) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            out.extend(embedder.embed_batch(&refs).unwrap_or_else(|e| {
                eprintln!("ann_beam: embedding failed: {e}");
                std::process::exit(2)
            }));
        }
        out
    };
    let started = Instant::now();
    let vectors = embed_all(&texts);
    println!(
        "embedded {} texts in {:.1} s",
        texts.len(),
        started.elapsed().as_secs_f64()
    );
    let defaults = AnnConfig::default();
    let config = AnnConfig {
        ef_construction: arg(&args, "--ef-construction", defaults.ef_construction).max(1),
        ..defaults
    };
    let mut index = AnnIndex::new(dim, config);
    let tenth = (texts.len() / 10).max(1);
    let mut lap = Instant::now();
    for (i, v) in vectors.iter().enumerate() {
        index.insert(i as u32, v);
        if (i + 1) % tenth == 0 {
            println!(
                "docs {:>7} to {:>7}: {:.1} us to link each",
                i + 1 - tenth,
                i + 1,
                lap.elapsed().as_secs_f64() * 1e6 / tenth as f64
            );
            lap = Instant::now();
        }
    }
    let mut all = DocSet::with_capacity(texts.len());
    (0..texts.len() as u32).for_each(|d| all.insert(d));
    let probes = embed_all(&queries);
    println!(
        "{} docs, {} queries, dim {dim}, plan {:?}",
        texts.len(),
        probes.len(),
        index.plan(all.len())
    );
    let most_seeds = seed_counts.iter().copied().max().unwrap_or(0);
    let lexical = if most_seeds > 0 {
        let started = Instant::now();
        let lists = lexical_lists(&texts, &queries, most_seeds);
        let mean = lists.iter().map(Vec::len).sum::<usize>() as f64 / lists.len().max(1) as f64;
        println!(
            "lexical lists of at most {most_seeds} ({mean:.1} hits a query) in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        lists
    } else {
        vec![Vec::new(); queries.len()]
    };
    for &k in &ks {
        let started = Instant::now();
        let exact: Vec<Vec<(u32, f32)>> = probes.iter().map(|q| index.exact(q, &all, k)).collect();
        println!(
            "k {k:>4} exact scan: {:.0} us a search",
            started.elapsed().as_secs_f64() * 1e6 / probes.len().max(1) as f64
        );
        if most_seeds > 0 {
            // How much of the exact top k the lexical list names itself.
            let named: f64 = exact
                .iter()
                .zip(&lexical)
                .map(|(e, hits)| {
                    let hit = e.iter().filter(|d| hits.contains(&d.0)).count();
                    hit as f64 / e.len().max(1) as f64
                })
                .sum();
            println!(
                "k {k:>4} lexical list of {most_seeds} holds {:.4} of the exact top {k}",
                named / exact.len().max(1) as f64
            );
        }
        let planned = index.search_ef(all.len(), k);
        for (&seeds, &beam) in seed_counts
            .iter()
            .flat_map(|s| beams.iter().map(move |b| (s, b)))
        {
            if beam < k {
                continue;
            }
            let started = Instant::now();
            let found: Vec<Vec<(u32, f32)>> = probes
                .iter()
                .zip(&lexical)
                .map(|(q, hits)| {
                    let seeds = &hits[..seeds.min(hits.len())];
                    index.graph_with_beam_seeded(q, k, beam, seeds)
                })
                .collect();
            let us = started.elapsed().as_secs_f64() * 1e6 / probes.len().max(1) as f64;
            // Of the exact top k, the fraction found; and, as ties in
            // score make any of the tied docs a right answer, the fraction
            // of the graph's k that score at least the exact k-th score.
            let (mut ids, mut scores, mut worst) = (0.0, 0.0, 1.0f64);
            for (e, f) in exact.iter().zip(&found) {
                let hit = e.iter().filter(|d| f.iter().any(|g| g.0 == d.0)).count();
                let kth = e.last().map_or(f32::NEG_INFINITY, |h| h.1);
                let good = f.iter().filter(|g| g.1 >= kth).count();
                let fraction = hit as f64 / e.len().max(1) as f64;
                ids += fraction;
                scores += good as f64 / e.len().max(1) as f64;
                worst = worst.min(fraction);
            }
            let m = exact.len().max(1) as f64;
            let (mean, by_score) = (ids / m, scores / m);
            println!(
                "k {k:>4} seeds {seeds:>3} beam {beam:>4}{}: recall {mean:.4} (worst query {worst:.2}; by score {by_score:.4}), {us:.0} us a search",
                if beam == planned { " (planned)" } else { "" }
            );
        }
    }
}
