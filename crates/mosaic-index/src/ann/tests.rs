use mosaic_kernels::dots;

use super::graph::Scored;
use super::search::{plan_costs, search_ef};
use super::vectors::{Probe, byte_bound, byte_error};
use super::*;
use crate::scope::DocSet;

#[test]
fn dot_matches_a_plain_sum_at_every_length() {
    for n in [0usize, 1, 7, 8, 9, 24, 255, 256, 384] {
        let a: Vec<f32> = (0..n).map(|i| ((i * 37) % 11) as f32 / 7.0 - 0.5).collect();
        let b: Vec<f32> = (0..n).map(|i| ((i * 13) % 5) as f32 / 3.0 - 0.7).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(
            (dot(&a, &b) - plain).abs() <= 1e-4 * (1.0 + plain.abs()),
            "n={n}"
        );
    }
}

#[test]
fn a_group_of_four_has_the_bits_of_dot() {
    for n in [0usize, 1, 7, 8, 9, 24, 255, 256, 383, 384] {
        let v: Vec<Vec<f32>> = (0..5)
            .map(|j| {
                (0..n)
                    .map(|i| (((i + 3) * (j * 7 + 31)) % 101) as f32 / 37.0 - 1.3)
                    .collect()
            })
            .collect();
        let four = dots(&v[4], [&v[0], &v[1], &v[2], &v[3]]);
        for j in 0..4 {
            assert_eq!(
                four[j].to_bits(),
                dot(&v[4], &v[j]).to_bits(),
                "n={n} j={j}"
            );
        }
    }
}

fn plan_of(config: &AnnConfig, live: usize, levels: usize, eligible: usize) -> SearchPlan {
    let (scan, graph) = plan_costs(config, 256, live, levels, eligible);
    if eligible <= config.exact_limit || scan <= graph {
        SearchPlan::ExactScan
    } else {
        SearchPlan::FilteredGraph
    }
}

#[test]
fn the_planner_scans_unless_the_graph_is_estimated_cheaper() {
    let c = AnnConfig::default();
    // 256-d, default graph: up to a few hundred thousand eligible docs
    // the scan is cheaper (and exact).
    assert_eq!(plan_of(&c, 100_000, 5, 50_000), SearchPlan::ExactScan);
    assert_eq!(plan_of(&c, 100_000, 5, 1_000), SearchPlan::ExactScan);
    assert_eq!(plan_of(&c, 1_000_000, 6, 10_000), SearchPlan::ExactScan);
    assert_eq!(plan_of(&c, 1_000_000, 6, 100), SearchPlan::ExactScan);
    // Half of a million docs: the scan reads 500,000 vectors, the graph
    // is estimated cheaper.
    assert_eq!(
        plan_of(&c, 1_000_000, 6, 500_000),
        SearchPlan::FilteredGraph
    );
    assert_eq!(
        plan_of(&c, 1_000_000, 6, 1_000_000),
        SearchPlan::FilteredGraph
    );
    // The beam widens with 1/selectivity, bounded.
    assert_eq!(search_ef(&c, 1_000_000, 1_000_000, 10), 256);
    assert_eq!(search_ef(&c, 1_000_000, 500_000, 10), 512);
    assert_eq!(search_ef(&c, 1_000_000, 250_000, 10), 1024);
    assert_eq!(search_ef(&c, 1_000_000, 100, 10), 256 * 8);
    assert_eq!(search_ef(&c, 1_000, 1_000, 300), 300);
}

#[test]
fn exact_keeps_the_best_k_in_similarity_then_doc_order() {
    let dim = 4;
    let mut ann = AnnIndex::new(dim, AnnConfig::default());
    // Docs 0..200: doc d points at angle d; docs 200.. repeat 0..50
    // (equal scores, so ties go to the lower doc).
    for d in 0..250u32 {
        let a = f64::from(d % 200) * 0.01;
        ann.insert(d, &[a.cos() as f32, a.sin() as f32, 0.0, 0.0]);
    }
    ann.remove(3);
    let mut set = DocSet::with_capacity(250);
    for d in (0..250).rev() {
        set.insert(d);
    }
    let q = [1.0, 0.0, 0.0, 0.0];
    let got: Vec<DocId> = ann.exact(&q, &set, 6).iter().map(|x| x.0).collect();
    assert_eq!(got, vec![0, 200, 1, 201, 2, 202]);
    let mut plain: Vec<Scored> = (0..250)
        .filter(|d| *d != 3)
        .map(|d| Scored(dot(&q, ann.vector(d)), d))
        .collect();
    plain.sort_by(|a, b| b.cmp(a));
    let want: Vec<DocId> = plain.iter().take(40).map(|s| s.1).collect();
    let got: Vec<DocId> = ann.exact(&q, &set, 40).iter().map(|x| x.0).collect();
    assert_eq!(got, want);
    assert!(ann.exact(&q, &set, 0).is_empty());
}

/// Few links per node, so that lists fill and get pruned in a small
/// graph.
fn few_links() -> AnnConfig {
    AnnConfig {
        m: 4,
        m0: 8,
        ..AnnConfig::default()
    }
}

#[test]
fn link_lists_stay_within_the_lazy_pruning_bound() {
    let dim = 8;
    let mut ann = AnnIndex::new(dim, few_links());
    for d in 0..600u32 {
        let mut v: Vec<f32> = (0..dim)
            .map(|i| ((d as usize * 31 + i * 17) % 29) as f32 - 14.0)
            .collect();
        crate::embed::l2_normalise(&mut v);
        ann.insert(d, &v);
    }
    let mut longest = [0usize; 2];
    for doc in 0..600u32 {
        for level in 0..=ann.node_level(doc).expect("every doc is linked") {
            let i = usize::from(level > 0);
            longest[i] = longest[i].max(ann.neighbours(doc, level).len());
        }
    }
    // Lists reach past their size (so pruning really is lazy) but
    // never past 1.5x.
    assert!(longest[0] > 8 && longest[0] <= 12, "{longest:?}");
    assert!(longest[1] <= 6, "{longest:?}");
}

/// After inserts, removals and replacements (a doc number linked,
/// removed and linked again), every list holds only docs in the graph
/// on that layer, none twice and not the doc itself, within the
/// lazy-pruning bound; a removed doc has no list left; and the graph
/// attached from its snapshot to a fresh index is the same graph.
#[test]
fn a_graph_after_removals_and_replacements_links_only_its_nodes() {
    let dim = 16;
    let mut ann = AnnIndex::new(dim, few_links());
    let vector = |seed: u64| {
        let mut v = noise(seed, dim);
        crate::embed::l2_normalise(&mut v);
        v
    };
    let mut removed = Vec::new();
    for d in 0..1_200u32 {
        ann.insert(d, &vector(u64::from(d)));
        if d % 7 == 3 && d > 10 {
            ann.remove(d - 5);
            removed.push(d - 5);
        }
        if d % 11 == 0 && d > 20 {
            ann.insert(d - 13, &vector(u64::from(d) + 100_000));
        }
    }
    let mut lists = 0;
    for doc in 0..1_200u32 {
        let Some(top) = ann.node_level(doc) else {
            assert!(!ann.is_live(doc));
            assert!(ann.neighbours(doc, 0).is_empty());
            continue;
        };
        for level in 0..=top {
            let list = ann.neighbours(doc, level);
            let max = ann.max_links(level);
            assert!(list.len() <= max + max / 2, "{doc} {level} {list:?}");
            let mut sorted = list.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), list.len(), "{doc} {level} {list:?}");
            for &n in list {
                assert_ne!(n, doc);
                assert!(ann.node_level(n).is_some_and(|t| t >= level), "{doc} {n}");
            }
            lists += usize::from(!list.is_empty());
        }
    }
    assert!(lists > 1_000, "{lists}");
    assert!(removed.iter().any(|&d| ann.node_level(d).is_none()));
    let order: Vec<DocId> = (0..1_200u32).filter(|&d| ann.is_live(d)).collect();
    let graph = ann.graph_snapshot(&order).expect("the live docs");
    let mut fresh = AnnIndex::new(dim, few_links());
    for (i, &doc) in order.iter().enumerate() {
        fresh.insert_pending(i as DocId, ann.vector(doc));
    }
    fresh.attach_graph(&graph).expect("the graph fits");
    let all: Vec<DocId> = (0..order.len() as DocId).collect();
    assert_eq!(fresh.graph_snapshot(&all), Some(graph));
}

/// What a walk asks the memory for ahead of expanding a node covers
/// what expanding it reads: every 64-byte line of its layer-0 slot (its
/// list's length and the list), and nothing outside the slot, for slots
/// of any length and wherever one starts in a line.
#[test]
fn the_lines_asked_for_ahead_are_those_of_the_slot() {
    let line = |p: *const DocId| p as usize / 64;
    for m0 in [2usize, 8, 10, 11, 16, 21, 32, 43] {
        let dim = 8;
        let mut ann = AnnIndex::new(
            dim,
            AnnConfig {
                m: m0.div_ceil(2).max(2),
                m0,
                ..AnnConfig::default()
            },
        );
        for d in 0..80u32 {
            let mut v = noise(u64::from(d) + 7, dim);
            crate::embed::l2_normalise(&mut v);
            ann.insert(d, &v);
        }
        let slot = ann.slot0();
        for doc in 0..80u32 {
            let mut asked = std::collections::BTreeSet::new();
            ann.each_slot_line(doc, |e| {
                asked.insert(line(e));
            });
            let start = &ann.layer0[doc as usize * slot] as *const DocId;
            let end = &ann.layer0[doc as usize * slot + slot - 1] as *const DocId;
            let spanned: std::collections::BTreeSet<usize> = (line(start)..=line(end)).collect();
            assert_eq!(asked, spanned, "m0 {m0} doc {doc}");
            let list = ann.neighbours(doc, 0);
            assert!(!list.is_empty(), "m0 {m0} doc {doc}");
            for e in list {
                assert!(asked.contains(&line(e)), "m0 {m0} doc {doc}");
            }
        }
        // A doc the index never held asks for nothing (and does not
        // panic), on any layer.
        let mut none = 0;
        ann.each_slot_line(1_000, |_| none += 1);
        assert_eq!(none, 0);
        ann.prefetch_links(1_000, 0);
        ann.prefetch_links(3, 5);
    }
}

/// Seeded pseudo-random values in [-0.5, 0.5).
fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut z = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            (z >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

/// The byte scan's bound holds for every pair tried, among them the
/// one built to be furthest from its byte score (a doc along the
/// query's own rounding error), and vectors of any length.
#[test]
fn a_byte_score_lies_within_its_bound() {
    for dim in [7usize, 48, 384, 1_024] {
        let mut ann = AnnIndex::new(dim, AnnConfig::default());
        let mut queries: Vec<Vec<f32>> = (0..20).map(|s| noise(900 + s, dim)).collect();
        let spiky: Vec<f32> = (0..dim).map(|i| if i == 0 { 40.0 } else { 0.01 }).collect();
        queries.push(spiky.clone());
        let mut docs: Vec<Vec<f32>> = (0..200u64)
            .map(|s| {
                let mut v = noise(s, dim);
                // Lengths from 0.01 to 100.
                let len = 10f32.powf((s % 5) as f32 - 2.0);
                v.iter_mut().for_each(|x| *x *= len);
                v
            })
            .collect();
        docs.push(spiky);
        for q in &queries {
            // Along q - q': the query's rounding counts in full.
            let probe = Probe::of(q);
            let along: Vec<f32> = q
                .iter()
                .zip(&probe.codes)
                .map(|(v, &c)| v - probe.scale * f32::from(c))
                .collect();
            docs.push(along);
        }
        for (d, v) in docs.iter().enumerate() {
            ann.insert(d as DocId, v);
        }
        let all: Vec<DocId> = (0..docs.len() as DocId).collect();
        for q in &queries {
            let probe = Probe::of(q);
            let (q_off, q_bytes) = byte_error(q, &probe.codes, probe.scale);
            for &d in &all {
                let exact = dot(q, ann.vector(d));
                let a = ann.approx(&probe, d);
                let e = byte_bound((q_off, q_bytes), ann.byte_bounds[d as usize]);
                assert!(
                    (exact - a).abs() <= e * 1.000_01 + 1e-30,
                    "dim {dim} doc {d}: exact {exact} bytes {a} bound {e}"
                );
            }
        }
    }
}

/// The exact top-k is the f32 scan's, doc for doc and bit for bit,
/// over every kind of eligible set, lengths, near ties, duplicates, a
/// zero and a non-finite vector; and the byte pass leaves most docs
/// unscored when the set is large.
#[test]
fn the_byte_pruned_scan_returns_the_f32_scan() {
    let dim = 96;
    let mut ann = AnnIndex::new(dim, AnnConfig::default());
    let mut n: DocId = 0;
    let mut add = |ann: &mut AnnIndex, v: Vec<f32>| {
        ann.insert(n, &v);
        n += 1;
    };
    for s in 0..2_000u64 {
        let mut v = noise(s, dim);
        crate::embed::l2_normalise(&mut v);
        add(&mut ann, v);
    }
    // Duplicates and near ties of one vector, of other lengths.
    let base = ann.vector(17).to_vec();
    for i in 0..40 {
        let tweak = noise(10_000 + i, dim);
        let v: Vec<f32> = base
            .iter()
            .zip(&tweak)
            .map(|(b, t)| b * (1.0 + (i % 3) as f32) + t * 1e-6 * (i % 2) as f32)
            .collect();
        add(&mut ann, v);
    }
    add(&mut ann, vec![0.0; dim]);
    let mut bad = vec![0.1; dim];
    bad[3] = f32::NAN;
    add(&mut ann, bad);
    ann.remove(5);
    let total = n;
    let mut pruned = 0;
    for (qi, every) in [1usize, 2, 3, 7, 50].into_iter().enumerate() {
        let mut docs = DocSet::with_capacity(total as usize);
        for d in (qi as DocId..total).step_by(every) {
            docs.insert(d);
        }
        for s in 0..12u64 {
            let mut q = noise(50_000 + s, dim);
            if s % 3 == 0 {
                q = base.iter().zip(&q).map(|(b, x)| b + x * 0.01).collect();
            }
            for k in [1, 10, 37, 5_000] {
                let want = ann.exact_f32(&q, &docs, k);
                let got = ann.exact(&q, &docs, k);
                let bits = |r: &[(DocId, f32)]| {
                    r.iter().map(|(d, s)| (*d, s.to_bits())).collect::<Vec<_>>()
                };
                assert_eq!(bits(&got), bits(&want), "every {every}, query {s}, k {k}");
            }
            let eligible = ann.eligible(&docs);
            if let Some(c) = ann.byte_candidates(&q, &eligible, 10)
                && eligible.len() >= 1_000
                && c.len() * 4 < eligible.len()
            {
                pruned += 1;
            }
        }
    }
    assert!(pruned > 0, "the byte pass must leave docs unscored");
    let q = vec![f32::NAN; dim];
    let all = {
        let mut d = DocSet::with_capacity(total as usize);
        (0..total).for_each(|x| d.insert(x));
        d
    };
    assert_eq!(ann.exact(&q, &all, 3).len(), 3);
    assert!(ann.byte_candidates(&q, &ann.eligible(&all), 3).is_none());
}

/// The graph walks on bytes, but what a search returns is scored
/// exactly: every score is [`dot`] of the query and the doc's f32
/// vector, to the bit, in exact order; the walk's own (byte) scores
/// differ from them; and a removed doc's bytes are zeroed with its
/// vector.
#[test]
fn graph_searches_walk_on_bytes_and_return_exact_scores() {
    let dim = 48;
    let config = AnnConfig {
        exact_limit: 0,
        ..AnnConfig::default()
    };
    let mut ann = AnnIndex::new(dim, config);
    let vector = |seed: usize| {
        let mut v: Vec<f32> = (0..dim)
            .map(|i| ((seed * 7919 + i * 104_729) % 1_009) as f32 / 1_009.0 - 0.5)
            .collect();
        crate::embed::l2_normalise(&mut v);
        v
    };
    for d in 0..1_500u32 {
        ann.insert(d, &vector(d as usize));
    }
    let mut differs = 0;
    for seed in 5_000..5_020 {
        let q = vector(seed);
        let found = ann.graph_filtered(&q, None, 10);
        assert_eq!(found.len(), 10);
        for pair in found.windows(2) {
            assert!(pair[0].1 >= pair[1].1, "{found:?}");
        }
        let probe = Probe::of(&q);
        for &(doc, score) in &found {
            assert_eq!(score.to_bits(), dot(&q, ann.vector(doc)).to_bits());
            differs += usize::from(ann.approx(&probe, doc).to_bits() != score.to_bits());
        }
    }
    assert!(differs > 0, "the byte scores are approximations");
    ann.remove(3);
    assert!(ann.code(3).iter().all(|&c| c == 0));
    assert_eq!(ann.scales[3], 0.0);
}

/// The graph state two indexes must share to be the same graph: every
/// doc's neighbour lists on every layer it is on (not the room a layer-0
/// slot keeps past its list), the entry point, the pending docs.
fn graph_state(ann: &AnnIndex) -> impl PartialEq + std::fmt::Debug {
    let lists: Vec<Option<Vec<Vec<DocId>>>> = (0..ann.links.len() as DocId)
        .map(|doc| {
            ann.node_level(doc)
                .map(|top| (0..=top).map(|l| ann.neighbours(doc, l).to_vec()).collect())
        })
        .collect();
    (
        lists,
        ann.entry,
        ann.max_level,
        ann.pending.clone(),
        ann.live,
    )
}

/// A copy that was given each linking's recorded decisions, between the
/// same inserts and removals, holds the graph the linking built, list for
/// list (and a copy not given them does not).
#[test]
fn a_copy_given_the_recorded_linkings_holds_the_same_graph() {
    let dim = 16;
    let vector = |seed: u64| {
        let mut v = noise(seed, dim);
        crate::embed::l2_normalise(&mut v);
        v
    };
    let mut ann = AnnIndex::new(dim, few_links());
    for d in 0..300u32 {
        ann.insert_pending(d, &vector(u64::from(d)));
    }
    ann.absorb(100);
    let mut copy = ann.clone();
    let untouched = ann.clone();
    let mut linked = 0;
    for round in 0..40u32 {
        // What a pass does to both copies: new vectors, a removal.
        for d in 0..5u32 {
            let doc = 300 + round * 5 + d;
            for index in [&mut ann, &mut copy] {
                index.insert_pending(doc, &vector(u64::from(doc)));
            }
        }
        if round % 3 == 1 {
            let gone = round * 7 + 2;
            ann.remove(gone);
            copy.remove(gone);
        }
        // What the linker does to one, recorded and applied to the other.
        let (_, delta) = ann.absorb_recorded(16);
        linked += delta.linked();
        copy.apply_delta(&delta);
        assert_eq!(graph_state(&ann), graph_state(&copy), "round {round}");
    }
    assert!(linked > 300, "{linked}");
    assert_eq!(ann.pending(), 0);
    assert_ne!(graph_state(&ann), graph_state(&untouched));
    let q = vector(7);
    let mut all = DocSet::with_capacity(500);
    for d in (0..500u32).filter(|&d| ann.is_live(d)) {
        all.insert(d);
    }
    assert_eq!(ann.search(&q, &all, 10), copy.search(&q, &all, 10));
}

/// A beam as wide as the index walks every reachable doc, so the graph's
/// top k is the exact scan's (what `graph_with_beam` is measured
/// against); a beam narrower than `k` still returns `k` docs.
#[test]
fn a_beam_over_every_doc_finds_the_exact_top_k() {
    let dim = 32;
    let mut ann = AnnIndex::new(dim, AnnConfig::default());
    let n = 600u32;
    let mut all = DocSet::with_capacity(n as usize);
    for d in 0..n {
        let mut v = noise(u64::from(d) + 1, dim);
        crate::embed::l2_normalise(&mut v);
        ann.insert(d, &v);
        all.insert(d);
    }
    for seed in 10_000..10_010u64 {
        let mut q = noise(seed, dim);
        crate::embed::l2_normalise(&mut q);
        for k in [1, 10, 100] {
            let exact = ann.exact(&q, &all, k);
            let wide = ann.graph_with_beam(&q, k, n as usize);
            assert_eq!(wide, exact, "seed {seed} k {k}");
            assert_eq!(ann.graph_with_beam(&q, k, 1).len(), k, "seed {seed} k {k}");
        }
    }
}

/// 400 docs in two islands, 0..200 about axis 0 and 200..400 about
/// axis 1, every link between the islands cut, so a walk never crosses
/// from one to the other; graph searches planned whatever the size.
/// Returns the index and the island the descent reaches (the entry's).
fn two_islands(ef: usize, search_seeds: usize) -> (AnnIndex, u32) {
    let dim = 16;
    let config = AnnConfig {
        exact_limit: 0,
        graph_cost_permille: 0,
        ef_search: ef,
        ef_search_seeded: ef,
        search_seeds,
        ..AnnConfig::default()
    };
    let mut ann = AnnIndex::new(dim, config);
    for d in 0..400u32 {
        let mut v: Vec<f32> = noise(u64::from(d) + 3, dim)
            .iter()
            .map(|x| x * 0.6)
            .collect();
        v[(d / 200) as usize] += 1.0;
        crate::embed::l2_normalise(&mut v);
        ann.insert(d, &v);
    }
    for d in 0..400u32 {
        for level in 0..=ann.node_level(d).expect("linked") {
            let kept: Vec<DocId> = ann
                .neighbours(d, level)
                .iter()
                .copied()
                .filter(|n| n / 200 == d / 200)
                .collect();
            ann.set_neighbours(d, level, &kept);
        }
    }
    let island = ann.entry.expect("an entry") / 200;
    (ann, island)
}

/// A query about the island the descent does not reach: the plain walk
/// finds none of its exact top 10, the walk also started from one doc of
/// that island finds all of them, and still finds what the plain walk
/// finds about the other island.
#[test]
fn a_seed_reaches_what_the_descent_cannot() {
    let (ann, reached) = two_islands(300, 100);
    let other = 1 - reached;
    let mut all = DocSet::with_capacity(400);
    (0..400).for_each(|d| all.insert(d));
    let about = |island: u32, seed: u64| {
        let mut q: Vec<f32> = noise(seed, 16).iter().map(|x| x * 0.2).collect();
        q[island as usize] += 1.0;
        crate::embed::l2_normalise(&mut q);
        q
    };
    let (mut plain_hits, mut seeded_hits) = (0, 0);
    for s in 0..10u64 {
        let q = about(other, 1_000 + s);
        let exact = ann.exact(&q, &all, 10);
        assert!(exact.iter().all(|e| e.0 / 200 == other));
        let (plan, plain) = ann.search(&q, &all, 10);
        assert_eq!(plan, SearchPlan::FilteredGraph);
        assert!(plain.iter().all(|p| p.0 / 200 == reached), "{plain:?}");
        let seed = [other * 200 + 17];
        assert_eq!(ann.search_seeded(&q, &all, 10, &seed).1, exact, "query {s}");
        // Both islands asked for: the seeded walk keeps the reached
        // island's docs the plain walk found and adds the other's.
        let mut both = about(reached, 2_000 + s);
        both.iter_mut().zip(&q).for_each(|(b, x)| *b += x);
        crate::embed::l2_normalise(&mut both);
        let (_, plain) = ann.search(&both, &all, 20);
        let (_, seeded) = ann.search_seeded(&both, &all, 20, &seed);
        let exact = ann.exact(&both, &all, 20);
        let hits = |found: &[(DocId, f32)]| exact.iter().filter(|e| found.contains(e)).count();
        (plain_hits, seeded_hits) = (plain_hits + hits(&plain), seeded_hits + hits(&seeded));
        for p in plain.iter().filter(|p| exact.contains(p)) {
            assert!(seeded.contains(p), "query {s}: {p:?}");
        }
    }
    assert!(seeded_hits > plain_hits, "{seeded_hits} {plain_hits}");
}

/// Seeds that cannot start a walk (a removed doc, a pending doc, one
/// outside the eligible set, one the index never held) are left out: the
/// answer is the plain search's; a pending doc is returned once, by the
/// scan beside the graph.
#[test]
fn unusable_seeds_are_left_out() {
    let (mut ann, reached) = two_islands(50, 100);
    let other = 1 - reached;
    let (removed, outside) = (other * 200 + 5, other * 200 + 7);
    ann.remove(removed);
    let mut pending = vec![0.0; 16];
    pending[other as usize] = 1.0;
    ann.insert_pending(400, &pending);
    let mut docs = DocSet::with_capacity(401);
    (0..=400)
        .filter(|&d| d != outside)
        .for_each(|d| docs.insert(d));
    let unusable = [removed, 400, outside, 1_000_000];
    for s in 0..20u64 {
        let mut q = noise(500 + s, 16);
        q[(s % 2) as usize] += 1.0;
        crate::embed::l2_normalise(&mut q);
        assert_eq!(
            ann.search_seeded(&q, &docs, 10, &unusable),
            ann.search(&q, &docs, 10),
            "query {s}"
        );
    }
    let (_, found) = ann.search_seeded(&pending, &docs, 10, &unusable);
    assert_eq!(found.iter().filter(|f| f.0 == 400).count(), 1);
    assert_eq!(found[0].0, 400);
    assert!(found.iter().all(|f| f.0 != removed && f.0 != outside));
    // The usable seed among them changes the answer.
    let with_one = [removed, 400, outside, other * 200 + 20];
    assert_ne!(
        ann.search_seeded(&pending, &docs, 10, &with_one),
        ann.search(&pending, &docs, 10)
    );
}

/// No seeds: the plain search, result for result. Seeds: the same answer
/// in any order, and only the first `search_seeds` of them count.
#[test]
fn seeds_only_add_starting_points() {
    let (ann, reached) = two_islands(20, 2);
    let other = 1 - reached;
    let mut all = DocSet::with_capacity(400);
    (0..400).for_each(|d| all.insert(d));
    for s in 0..20u64 {
        let mut q: Vec<f32> = noise(700 + s, 16).iter().map(|x| x * 0.2).collect();
        q[other as usize] += 1.0;
        crate::embed::l2_normalise(&mut q);
        let plain = ann.search(&q, &all, 10);
        assert_eq!(ann.search_seeded(&q, &all, 10, &[]), plain);
        let seeds = [reached * 200 + s as DocId, other * 200 + 3 * s as DocId];
        let seeded = ann.search_seeded(&q, &all, 10, &seeds);
        assert_ne!(seeded, plain, "query {s}");
        let reversed = [seeds[1], seeds[0]];
        assert_eq!(ann.search_seeded(&q, &all, 10, &reversed), seeded);
        // A third seed is past `search_seeds`.
        let third = [seeds[0], seeds[1], other * 200 + 150];
        assert_eq!(ann.search_seeded(&q, &all, 10, &third), seeded);
        let first_only = [seeds[0], other * 200 + 150];
        assert_ne!(ann.search_seeded(&q, &all, 10, &first_only), plain);
    }
}
