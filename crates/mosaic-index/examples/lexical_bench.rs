//! The lexical list alone, as a recall asks for it, against one subject's
//! record count.
//!
//! ```text
//! cargo run --release -p mosaic-index --example lexical_bench -- \
//!     [--sizes 1000,10000,100000] [--queries 50] [--rounds 20] [--seed 7]
//! ```
//!
//! One subject's records grown to each size in turn, shaped as
//! `scripts/recall-scale.py` shapes its conversation turns: 8 to 24 words
//! drawn from 5,000, two speakers taking turns, a timestamp and speaker
//! label in front, in batches of 500 whose days cycle through 28, so the
//! subject's timeline interleaves batches far apart in publication order.
//! At each size, every record eligible (resolved once, as a kept read is),
//! each of `--queries` questions of 3 to 6 of the words is asked
//! `--rounds` times for the best 100 with the funnel's default turn
//! windows, and the time per search is reported (p50, p90, mean) with a
//! checksum of the answers (equal checksums: equal answers, ids and score
//! bits).

mod common;

use std::time::Instant;

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_index::lexical::LexicalParams;
use mosaic_index::{Eligible, FunnelConfig, IndexTarget, LexicalIndex, ScopePredicate};

use common::arg;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 17
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn vocabulary(rng: &mut Rng, n: usize) -> Vec<String> {
    let (consonants, vowels) = (b"bcdfghjklmnprstvwz", b"aeiou");
    let mut words = std::collections::BTreeSet::new();
    while words.len() < n {
        let syllables = 2 + rng.below(3);
        let word: String = (0..syllables)
            .flat_map(|_| {
                [
                    consonants[rng.below(consonants.len() as u64) as usize] as char,
                    vowels[rng.below(vowels.len() as u64) as usize] as char,
                ]
            })
            .collect();
        words.insert(word);
    }
    words.into_iter().collect()
}

fn sizes(args: &[String]) -> Vec<usize> {
    args.iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000])
}

fn ms(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let queries = arg(&args, "--queries", 50).max(1);
    let rounds = arg(&args, "--rounds", 20).max(1);
    let mut rng = Rng(arg(&args, "--seed", 7) as u64);
    let words = vocabulary(&mut rng, 5_000);
    let questions: Vec<String> = (0..queries)
        .map(|_| {
            let n = 3 + rng.below(4);
            let q: Vec<&str> = (0..n)
                .map(|_| words[rng.below(words.len() as u64) as usize].as_str())
                .collect();
            format!("{}?", q.join(" "))
        })
        .collect();
    let policy = sha256_hex(b"bench policy");
    let (tenant, subject) = ("tenant-bench", "principal-bench");
    let defaults = FunnelConfig::default();
    let params = LexicalParams {
        k1_permille: defaults.bm25_k1_permille,
        b_permille: defaults.bm25_b_permille,
        window_permille: defaults.lexical_window_permille,
        window_radius: defaults.lexical_window_radius,
    };
    let predicate = ScopePredicate {
        subject_keys: [subject.to_owned()].into(),
        kinds: [MemoryKind::Episodic].into(),
    };
    let mut index = LexicalIndex::new();
    let mut stored = 0usize;
    for size in sizes(&args) {
        while stored < size {
            let (session, i) = (stored / 500, stored % 500);
            let day = 1 + (session % 28) as u64;
            let at_ms = ((day * 24 + 10) * 3_600 + i as u64) * 1_000;
            let speaker = ["Avery", "Blake"][stored % 2];
            let n = 8 + rng.below(17);
            let turn: Vec<&str> = (0..n)
                .map(|_| words[rng.below(words.len() as u64) as usize].as_str())
                .collect();
            let text = format!(
                "[2023-05-{day:02}T10:{:02}:{:02}Z] {speaker}: {}.",
                (i / 60) % 60,
                i % 60,
                turn.join(" ")
            );
            let message = common::episodic_turn(
                format!("r{stored:07}"),
                tenant,
                &policy,
                subject,
                at_ms,
                text,
            );
            if let Err(e) = index.publish(&message) {
                eprintln!("publish failed: {e}");
                return;
            }
            stored += 1;
        }
        let docs = index.eligible_docs(&Eligible::Scope(&predicate), tenant, &policy);
        let mut times: Vec<f64> = Vec::with_capacity(queries * rounds);
        let mut checksum = 0u64;
        for round in 0..rounds {
            for q in &questions {
                let started = Instant::now();
                let hits = index.search_docs_params(q, &docs, 100, &params);
                times.push(started.elapsed().as_secs_f64() * 1_000.0);
                if round == 0 {
                    for h in &hits {
                        let digest =
                            sha256_hex(format!("{}:{}", h.record_id, h.score.to_bits()).as_bytes());
                        checksum = checksum
                            .rotate_left(5)
                            .wrapping_add(u64::from_str_radix(&digest[..16], 16).unwrap_or(0));
                    }
                }
            }
        }
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        times.sort_by(f64::total_cmp);
        println!(
            "records {size}: eligible {} searches {} p50 {:.4} ms p90 {:.4} ms mean {:.4} ms answers {checksum:016x}",
            docs.len(),
            times.len(),
            ms(&times, 0.5),
            ms(&times, 0.9),
            mean
        );
    }
}
