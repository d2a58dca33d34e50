use std::collections::BTreeMap;

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;

use std::collections::{HashMap, HashSet};

use super::scoring::{ByBound, Pruning, ReadScores, TopScores, WindowBm25, window_places};
use super::sharing::gallop;
use super::*;
use crate::scope::DocSet;
use crate::target::DocId;
use crate::target::IndexTarget;
use crate::text::terms;
use crate::{PublishMessage, ScopeKeys};

/// The walk [`LexicalIndex::best_shared`] bounds: every posting of every
/// list, each doc's weights added rarest list first.
fn walk_everything(
    idx: &LexicalIndex,
    lists: &[(u32, &[(DocId, u32)])],
    weights: &[f64],
) -> Vec<(f64, DocId)> {
    let mut order: Vec<usize> = (0..lists.len()).collect();
    order.sort_by_key(|&i| (lists[i].1.len(), i));
    let mut sums: BTreeMap<DocId, f64> = BTreeMap::new();
    for i in order {
        for (doc, _) in lists[i].1 {
            *sums.entry(*doc).or_insert(0.0) += weights[i];
        }
    }
    sums.into_iter()
        .filter(|(doc, _)| idx.record_of(*doc).is_some())
        .map(|(doc, w)| (w, doc))
        .collect()
}

/// The best `limit` of a list of (weight, doc), ties by doc.
fn best(mut all: Vec<(f64, DocId)>, limit: usize) -> Vec<(u64, DocId)> {
    all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    all.truncate(limit);
    all.into_iter().map(|(w, d)| (w.to_bits(), d)).collect()
}

/// The window the old timeline walk gave: the eligible docs before
/// `doc` in its partition's timeline, nearest first, then those after.
fn walked_window(
    idx: &LexicalIndex,
    doc: DocId,
    docs: &DocSet,
    radius: usize,
) -> Vec<(DocId, usize)> {
    let b = &idx.backend;
    let Some(d) = b.docs.get(doc as usize).and_then(|x| x.as_ref()) else {
        return Vec::new();
    };
    let timeline = &b.partitions[d.partition as usize].timeline;
    let key = (d.created_at_unix_ms, doc);
    let before = timeline
        .range(..key)
        .rev()
        .filter(|(_, x)| docs.contains(*x))
        .take(radius);
    let after = timeline
        .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
        .filter(|(_, x)| docs.contains(*x))
        .take(radius);
    before
        .enumerate()
        .chain(after.enumerate())
        .map(|(i, (_, x))| (*x, i + 1))
        .collect()
}

/// The eligible docs before `doc` in its partition's timeline (nearest
/// first) and after it, up to `radius` each, walked from the timeline, with
/// each doc's length.
#[allow(clippy::type_complexity)]
fn walked_sides(
    idx: &LexicalIndex,
    doc: DocId,
    docs: &DocSet,
    radius: usize,
) -> [Vec<(DocId, u32)>; 2] {
    let b = &idx.backend;
    let Some(d) = b.docs.get(doc as usize).and_then(|x| x.as_ref()) else {
        return [Vec::new(), Vec::new()];
    };
    let timeline = &b.partitions[d.partition as usize].timeline;
    let key = (d.created_at_unix_ms, doc);
    let with_len = |(_, x): &(u64, DocId)| (*x, b.docs[*x as usize].as_ref().unwrap().len);
    let before = timeline
        .range(..key)
        .rev()
        .filter(|(_, x)| docs.contains(*x))
        .take(radius)
        .map(with_len)
        .collect();
    let after = timeline
        .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
        .filter(|(_, x)| docs.contains(*x))
        .take(radius)
        .map(with_len)
        .collect();
    [before, after]
}

/// What the doc lines give for `doc`, as [`walked_sides`] gives it, and
/// its own length.
#[allow(clippy::type_complexity)]
fn lined_sides(
    idx: &LexicalIndex,
    doc: DocId,
    docs: &DocSet,
    radius: usize,
) -> ([Vec<(DocId, u32)>; 2], u32) {
    let mut sides = [Vec::new(), Vec::new()];
    for (side, out) in sides.iter_mut().enumerate() {
        idx.walk_side(doc, docs, side, radius, |d, len| out.push((d, len)));
    }
    (sides, idx.backend.len_of(doc))
}

/// One generated record: subject, creation time, words (indexes into
/// `WORDS`).
type GenRecord = (usize, u64, Vec<usize>);

const WORDS: [&str; 12] = [
    "apple", "river", "garden", "violin", "pottery", "camping", "sunset", "novel", "puppy",
    "museum", "forest", "guitar",
];

fn message(id: &str, generation: u64, subject: usize, at: u64, text: String) -> PublishMessage {
    message_in(id, generation, &format!("s{subject}"), at, text)
}

/// An episodic memory of tenant `t` in subject `subject_key`.
fn message_in(
    id: &str,
    generation: u64,
    subject_key: &str,
    at: u64,
    text: String,
) -> PublishMessage {
    PublishMessage {
        record_id: id.to_owned(),
        generation,
        revocation_generation: 0,
        scope: ScopeKeys {
            tenant_id: "t".into(),
            policy_sha256: sha256_hex(b"policy"),
            subject_key: subject_key.to_owned(),
            kind: MemoryKind::Episodic,
        },
        created_at_unix_ms: at,
        claim_keys: Vec::new(),
        text,
    }
}

/// An index of `records` (record ids not in publication order, so ties
/// by record id are not ties by doc), then `changes`: per record, 1
/// tombstones it and 2 publishes it again with its words reversed (a
/// new doc, placed in the timeline among older ones). The eligible docs
/// are the live ones `eligible` marks.
fn generated(records: &[GenRecord], changes: &[u8], eligible: &[bool]) -> (LexicalIndex, DocSet) {
    generated_with(records, changes, eligible, &WORDS)
}

/// `WORDS` and a word for nearly every record.
const WORDS_AND_COMMON: [&str; 13] = [
    "apple", "river", "garden", "violin", "pottery", "camping", "sunset", "novel", "puppy",
    "museum", "forest", "guitar", "avery",
];

/// [`generated`], the records' words drawn from `vocab`.
fn generated_with(
    records: &[GenRecord],
    changes: &[u8],
    eligible: &[bool],
    vocab: &[&str],
) -> (LexicalIndex, DocSet) {
    let mut idx = LexicalIndex::new();
    let id = |i: usize| {
        if i < 1009 {
            format!("r{:04}", (i * 37) % 1009)
        } else {
            format!("q{i:05}")
        }
    };
    let text = |words: &[usize]| {
        words
            .iter()
            .map(|w| vocab[*w % vocab.len()])
            .collect::<Vec<_>>()
            .join(" ")
    };
    for (i, (subject, at, words)) in records.iter().enumerate() {
        idx.publish(&message(&id(i), 1, *subject, *at, text(words)))
            .unwrap();
    }
    for (i, (subject, at, words)) in records.iter().enumerate() {
        match changes.get(i).copied().unwrap_or(0) % 4 {
            1 => {
                idx.tombstone(&id(i), 2).unwrap();
            }
            2 => {
                let mut words = words.clone();
                words.reverse();
                idx.publish(&message(&id(i), 2, *subject, *at, text(&words)))
                    .unwrap();
            }
            _ => {}
        }
    }
    let mut docs = DocSet::with_capacity(idx.fence.doc_capacity());
    for i in 0..records.len() {
        if eligible.get(i).copied().unwrap_or(true)
            && let Some(doc) = idx.fence.doc_of(&id(i))
        {
            docs.insert(doc);
        }
    }
    (idx, docs)
}

/// The query of `text` as `search_with` builds it.
fn query_of(idx: &LexicalIndex, text: &str) -> Vec<(u32, f32)> {
    let mut unique = terms(text);
    unique.sort();
    unique.dedup();
    unique
        .iter()
        .filter_map(|t| idx.backend.vocab.get(t.as_str()).map(|tid| (*tid, 1.0)))
        .collect()
}

/// The pruned and the exhaustive best `k`, as (doc, score bits), and
/// the pruned read's work.
#[allow(clippy::type_complexity)]
fn both(
    idx: &LexicalIndex,
    docs: &DocSet,
    text: &str,
    params: &LexicalParams,
    k: usize,
) -> (Vec<(DocId, u32)>, Vec<(DocId, u32)>, Pruning) {
    let Some(stats) = idx.stats(docs) else {
        return (Vec::new(), Vec::new(), Pruning::default());
    };
    let query = query_of(idx, text);
    let bits = |v: Vec<(DocId, f32)>| v.into_iter().map(|(d, s)| (d, s.to_bits())).collect();
    let (pruned, work) = idx.score_pruned(&query, docs, &stats, params, k);
    let exhaustive = idx.score_exhaustive(&query, docs, &stats, params, k);
    (bits(pruned), bits(exhaustive), work)
}

/// A window stepped along the timeline's links is the one walked from
/// the partition's timeline: same docs, same order, same distances,
/// across subjects, creation-time ties, records published out of time
/// order, tombstoned and published again, ineligible docs between
/// eligible ones and windows cut short at either end.
#[test]
fn a_linked_window_is_the_walked_one() {
    let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
    let records: Vec<GenRecord> = (0..150)
        .map(|_| (next(3) as usize, next(40), vec![next(12) as usize]))
        .collect();
    let changes: Vec<u8> = (0..150).map(|_| next(6) as u8).collect();
    let eligible: Vec<bool> = (0..150).map(|_| next(10) < 7).collect();
    let (idx, docs) = generated(&records, &changes, &eligible);
    let mut compared = 0;
    for doc in 0..idx.fence.doc_capacity() as DocId + 2 {
        for radius in 0..=4 {
            let walked = walked_window(&idx, doc, &docs, radius);
            assert_eq!(idx.window_docs(doc, &docs, radius), walked, "doc {doc}");
            compared += usize::from(!walked.is_empty());
        }
    }
    assert!(compared > 300, "{compared}");
}

/// Layer: the index's resolution of eligible sets. Over a chain of
/// random index changes (publications, new versions, tombstones, ids
/// eligible before they are indexed, across three subjects) and eligible
/// sets each derived from the last by a change, the resolution brought up
/// to date from the kept one is exactly a fresh resolution of the set's
/// ids, and the partition counts it carried over from the kept one (and
/// the statistics read from them) are exactly those counted afresh.
#[test]
fn a_derived_eligible_set_resolves_as_a_fresh_one() {
    use mosaic_harness::memory_scope::{EligibleEntry, SealedEligibleSet, SealedEntries};
    let mut seed: u64 = 7;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let policy = sha256_hex(b"policy");
    let id = |i: u64| format!("r{i:02}");
    let mut idx = LexicalIndex::new();
    let mut generation = [0u64; 40];
    let mut eligible: std::collections::BTreeSet<u64> = Default::default();
    let sealed = |ids: &std::collections::BTreeSet<u64>, parent: Option<(u64, Vec<String>)>| {
        let entries: Vec<EligibleEntry> = ids
            .iter()
            .map(|i| EligibleEntry {
                record_id: id(*i),
                content_sha256: sha256_hex(id(*i).as_bytes()),
            })
            .collect();
        let entries = match parent {
            Some((parent, changed)) => SealedEntries::seal_derived(entries, parent, changed),
            None => SealedEntries::seal(entries).unwrap(),
        };
        SealedEligibleSet::of_entries(sha256_hex(b"ctx"), std::sync::Arc::new(entries)).unwrap()
    };
    let fresh = |idx: &LexicalIndex, set: &SealedEligibleSet| {
        idx.resolve_ids(set.entries().iter().map(|e| e.record_id), "t", &policy)
    };
    let mut set = sealed(&eligible, None);
    let mut advanced = 0;
    let mut carried = 0;
    for step in 0..200 {
        // Index changes, some of ids not (yet) eligible.
        for _ in 0..next(4) {
            let i = next(40);
            generation[i as usize] += 1;
            let g = generation[i as usize];
            if next(4) == 0 {
                idx.tombstone(&id(i), g).unwrap();
            } else {
                idx.publish(&message(
                    &id(i),
                    g,
                    (i % 3) as usize,
                    step,
                    format!("apple {step}"),
                ))
                .unwrap();
            }
        }
        // An eligibility change, derived from the last set.
        let mut changed = Vec::new();
        for _ in 0..next(4) {
            let i = next(40);
            if !eligible.remove(&i) {
                eligible.insert(i);
            }
            changed.push(id(i));
        }
        let parent = set.sealed_entries().seal_number();
        let before = idx.fence.snapshot_generation();
        // Resolved (and its partitions counted by a read) once before the
        // change, so a kept resolution exists.
        let kept = idx.resolve_eligible(&set, "t", &policy);
        idx.stats(&kept);
        set = sealed(&eligible, Some((parent, changed)));
        let resolved = idx.resolve_eligible(&set, "t", &policy);
        let made_afresh = fresh(&idx, &set);
        assert_eq!(
            resolved.docs().collect::<Vec<_>>(),
            made_afresh.docs().collect::<Vec<_>>(),
            "step {step}"
        );
        assert_eq!(resolved.len(), made_afresh.len(), "step {step}");
        let counted = resolved.counted_partitions().map(<[_]>::to_vec);
        let stats = |docs: &DocSet| idx.stats(docs).map(|s| (s.partitions, s.n, s.avgdl));
        assert_eq!(stats(&resolved), stats(&made_afresh), "step {step}");
        if let Some(counted) = counted {
            assert_eq!(
                Some(&counted[..]),
                made_afresh.counted_partitions(),
                "step {step}"
            );
            carried += 1;
        }
        advanced += usize::from(idx.fence.changes_since(before).is_some());
    }
    assert!(advanced > 150, "{advanced}");
    assert!(carried > 150, "{carried}");
}

/// Layer: the index's resolution of eligible sets. When more slots
/// changed since a kept resolution than the fence remembers, the fence
/// says so (`changes_since` is `None`) and the set is resolved afresh,
/// still exactly.
#[test]
fn a_resolution_older_than_the_remembered_changes_is_made_afresh() {
    use mosaic_harness::memory_scope::{EligibleEntry, SealedEligibleSet, SealedEntries};
    let policy = sha256_hex(b"policy");
    let mut idx = LexicalIndex::new();
    let ids: Vec<String> = (0..8).map(|i| format!("r{i}")).collect();
    for id in &ids {
        idx.publish(&message(id, 1, 0, 1, "apple".into())).unwrap();
    }
    let entries: Vec<EligibleEntry> = ids
        .iter()
        .map(|id| EligibleEntry {
            record_id: id.clone(),
            content_sha256: sha256_hex(id.as_bytes()),
        })
        .collect();
    let set = SealedEligibleSet::of_entries(
        sha256_hex(b"ctx"),
        std::sync::Arc::new(SealedEntries::seal(entries).unwrap()),
    )
    .unwrap();
    idx.resolve_eligible(&set, "t", &policy);
    let then = idx.fence.snapshot_generation();
    // More changes than remembered: new versions of the eligible ids.
    for generation in 2..(2 + crate::target::RECENT_CHANGES as u64 / 8 + 2) {
        for id in &ids {
            idx.publish(&message(id, generation, 0, 1, "apple".into()))
                .unwrap();
        }
    }
    assert!(idx.fence.changes_since(then).is_none());
    let mut resolved = idx
        .resolve_eligible(&set, "t", &policy)
        .docs()
        .collect::<Vec<_>>();
    resolved.sort_unstable();
    let mut fresh = idx
        .resolve_ids(ids.iter().map(String::as_str), "t", &policy)
        .docs()
        .collect::<Vec<_>>();
    fresh.sort_unstable();
    assert_eq!(resolved, fresh);
    assert_eq!(resolved.len(), ids.len());
}

/// A set's subjects are kept with it after a read, and found again once
/// a doc is added: the statistics then cover the new doc's subject.
#[test]
fn a_set_grown_after_a_read_counts_its_new_subject() {
    let records: Vec<GenRecord> = vec![(0, 1, vec![0, 1]), (1, 2, vec![2]), (1, 3, vec![3, 4])];
    let (idx, all) = generated(&records, &[], &[]);
    let mut docs = DocSet::with_capacity(idx.fence.doc_capacity());
    docs.insert(all.docs().next().unwrap());
    let first = idx.stats(&docs).unwrap();
    assert_eq!((first.partitions.len(), first.n), (1, 1));
    docs.insert(all.docs().nth(1).unwrap());
    let grown = idx.stats(&docs).unwrap();
    assert_eq!((grown.partitions.len(), grown.n), (2, 3));
}

/// The per-doc and per-term bounds the pruned scorer relies on hold for
/// every window of a generated corpus, and the per-doc bound is met by a
/// doc scored alone.
#[test]
fn the_pruning_bounds_hold_for_every_window() {
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
    let records: Vec<GenRecord> = (0..200)
        .map(|_| {
            let len = 1 + next(9) as usize;
            (
                next(2) as usize,
                next(100),
                (0..len).map(|_| next(12) as usize).collect(),
            )
        })
        .collect();
    let eligible: Vec<bool> = (0..200).map(|_| next(10) < 8).collect();
    let (idx, docs) = generated(&records, &[], &eligible);
    let stats = idx.stats(&docs).unwrap();
    let mut tighter = 0;
    for params in [
        LexicalParams::default(),
        LexicalParams {
            window_permille: 500,
            window_radius: 2,
            ..LexicalParams::default()
        },
        LexicalParams {
            k1_permille: 2_000,
            b_permille: 1_000,
            window_permille: 1_000,
            window_radius: 3,
        },
    ] {
        let scorer = WindowBm25::new(&params, stats.avgdl);
        for text in [
            "apple river",
            "violin violin puppy museum",
            "forest",
            "guitar sunset novel apple",
        ] {
            let query = query_of(&idx, text);
            let idfs: Vec<f32> = query.iter().map(|(t, _)| idx.idf(&stats, *t)).collect();
            let gains: f64 = idfs.iter().map(|i| scorer.gain(*i)).sum();
            let mut read = ReadScores {
                index: &idx,
                query: &query,
                idfs: &idfs,
                scorer,
                docs: &docs,
                top: TopScores::new(1),
                scored: Vec::new(),
                seen: HashSet::default(),
                tfs: HashMap::default(),
                window_tf: vec![0.0; query.len()],
            };
            // Each doc's bound: its terms scored alone.
            let solo = |doc: DocId| -> f64 {
                let d = idx.backend.docs[doc as usize].as_ref().unwrap();
                query
                    .iter()
                    .zip(&idfs)
                    .filter_map(|((tid, _), idf)| {
                        let tf = d.terms.iter().find(|(t, _)| t == tid)?.1;
                        Some(scorer.solo(*idf, tf, d.len))
                    })
                    .sum()
            };
            for doc in docs.docs() {
                let window = idx.window_docs(doc, &docs, scorer.radius);
                read.score_window(doc, &window, None);
                let score = f64::from(read.scored.last().unwrap().1);
                let bound: f64 = solo(doc) + window.iter().map(|(d, _)| solo(*d)).sum::<f64>();
                assert!(score <= bound * (1.0 + 1e-6), "{score} > {bound}");
                assert!(score <= gains * (1.0 + 1e-6), "{score} > {gains}");
                if bound < gains {
                    tighter += 1;
                }
                if window.is_empty() {
                    assert!((score - bound).abs() <= 1e-5 * bound.max(1.0));
                }
            }
        }
    }
    // The per-doc bound is the tighter one for most windows.
    assert!(tighter > 1_000, "{tighter}");
}

/// On a large subject where one query term is in every record (a
/// speaker's name) and the others are rare, the pruned read walks
/// neither the common term's postings nor most windows, and answers
/// what scoring everything answers.
#[test]
fn a_large_subject_is_not_scored_whole() {
    let mut next = xorshift(0x1234_5678_9ABC_DEF1u64);
    let mut idx = LexicalIndex::new();
    let vocab: Vec<String> = (0..400).map(|i| format!("zq{i}x")).collect();
    for r in 0..3_000u64 {
        let words: Vec<&str> = (0..4 + next(8))
            .map(|_| vocab[next(400) as usize].as_str())
            .collect();
        idx.publish(&message(
            &format!("r{r:05}"),
            1,
            0,
            r,
            format!("Avery: {}", words.join(" ")),
        ))
        .unwrap();
    }
    let mut docs = DocSet::with_capacity(idx.fence.doc_capacity());
    for r in 0..3_000u64 {
        docs.insert(idx.fence.doc_of(&format!("r{r:05}")).unwrap());
    }
    let windows = LexicalParams {
        window_permille: 500,
        window_radius: 2,
        ..LexicalParams::default()
    };
    let mut skipped = 0;
    for q in 0..20 {
        let text = format!(
            "avery {} {} {}",
            vocab[next(400) as usize],
            vocab[next(400) as usize],
            vocab[next(400) as usize]
        );
        for (params, k) in [
            (&windows, 10),
            (&windows, 100),
            (&LexicalParams::default(), 10),
        ] {
            let (pruned, exhaustive, work) = both(&idx, &docs, &text, params, k);
            assert_eq!(pruned, exhaustive, "query {q}: {text}, k {k}");
            assert_eq!(pruned.len(), k);
            // The best 10 need a few of the windows around the hits.
            if k == 10 {
                let windows = work.hits * (1 + 2 * params.window_radius.max(1));
                assert!(work.scored * 4 < windows, "{work:?}");
            }
            if work.terms_walked < query_of(&idx, &text).len() {
                skipped += 1;
            }
        }
    }
    assert!(skipped >= 40, "{skipped}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// The pruned best `k` is the exhaustive best `k`: same docs, same
    /// scores to the bit, same order with ties by record id, on random
    /// corpora (a small vocabulary, so many ties), eligibility masks,
    /// tombstones and republished records, queries (words outside the
    /// corpus included) and parameters (windows on and off, any radius,
    /// `b` above 1, which is not pruned).
    #[test]
    fn the_pruned_top_k_is_the_exhaustive_top_k(
        records in proptest::collection::vec(
            (0..3usize, 0..25u64, proptest::collection::vec(0..10usize, 0..7)),
            1..70,
        ),
        changes in proptest::collection::vec(0..4u8, 0..70),
        eligible in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..70),
        query in proptest::collection::vec(0..12usize, 1..6),
        window_permille in proptest::prop_oneof![
            proptest::strategy::Just(0u64),
            proptest::strategy::Just(250),
            proptest::strategy::Just(500),
            proptest::strategy::Just(1_000),
        ],
        window_radius in 0..4usize,
        k1_permille in proptest::prop_oneof![
            proptest::strategy::Just(0u64),
            proptest::strategy::Just(1_200),
            proptest::strategy::Just(3_000),
        ],
        b_permille in proptest::prop_oneof![
            proptest::strategy::Just(0u64),
            proptest::strategy::Just(750),
            proptest::strategy::Just(1_000),
            proptest::strategy::Just(1_500),
        ],
        k in 1..25usize,
    ) {
        let (idx, docs) = generated(&records, &changes, &eligible);
        let text: Vec<&str> = query.iter().map(|w| WORDS[*w]).collect();
        let params = LexicalParams { k1_permille, b_permille, window_permille, window_radius };
        let (pruned, exhaustive, _) = both(&idx, &docs, &text.join(" "), &params, k);
        proptest::prop_assert_eq!(pruned, exhaustive);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Each doc's line (its nearest docs on either side of it in its
    /// subject's timeline, with their lengths) is what the timeline gives,
    /// after any run of publications (out of time order, with creation
    /// time ties), tombstones and new versions across subjects: every
    /// eligible window of every radius read off the lines, past ineligible
    /// docs and past the lines' own reach, is the one walked from the
    /// timeline, each doc with its length.
    #[test]
    fn a_window_read_off_the_lines_is_the_walked_one(
        records in proptest::collection::vec(
            (0..3usize, 0..25u64, proptest::collection::vec(0..10usize, 0..7)),
            1..60,
        ),
        changes in proptest::collection::vec(0..4u8, 0..60),
        eligible in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..60),
    ) {
        let (idx, docs) = generated(&records, &changes, &eligible);
        for doc in 0..idx.fence.doc_capacity() as DocId + 2 {
            for radius in 0..=10 {
                let (lined, own) = lined_sides(&idx, doc, &docs, radius);
                proptest::prop_assert_eq!(&lined, &walked_sides(&idx, doc, &docs, radius));
                proptest::prop_assert_eq!(own as f32, idx.doc_len(doc));
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// The pruned best `k` is the exhaustive best `k` on subjects of over
    /// a thousand records where one query word is in nearly all of them:
    /// the common word's postings are long enough that the pruned read
    /// may leave them unwalked, so the bounds carry what the terms not
    /// walked can add.
    #[test]
    fn the_pruned_top_k_is_the_exhaustive_top_k_with_terms_left(
        seed in proptest::prelude::any::<u64>(),
        records in 1_100..1_300usize,
        query in proptest::collection::vec(0..12usize, 1..4),
        window_radius in 0..4usize,
        window_permille in proptest::prop_oneof![
            proptest::strategy::Just(0u64),
            proptest::strategy::Just(500),
            proptest::strategy::Just(1_000),
        ],
        k in 1..40usize,
    ) {
        let mut state = seed | 1;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let generated_records: Vec<GenRecord> = (0..records)
            .map(|_| {
                let mut words = vec![12usize; usize::from(next(40) != 0)];
                words.extend((0..next(5)).map(|_| next(12) as usize));
                (next(2) as usize, next(400), words)
            })
            .collect();
        let changes: Vec<u8> = (0..records).map(|_| (next(16) % 3) as u8).collect();
        let eligible: Vec<bool> = (0..records).map(|_| next(10) < 8).collect();
        let (idx, docs) = generated_with(&generated_records, &changes, &eligible, &WORDS_AND_COMMON);
        let mut text: Vec<&str> = query.iter().map(|w| WORDS[*w]).collect();
        text.push(WORDS_AND_COMMON[12]);
        let params = LexicalParams { window_permille, window_radius, ..LexicalParams::default() };
        let (pruned, exhaustive, _) = both(&idx, &docs, &text.join(" "), &params, k);
        proptest::prop_assert_eq!(pruned, exhaustive);
    }
}

/// Lengths a line cannot hold (65,535 terms and more) are read from the
/// lengths kept apart, and scores over windows holding such docs are the
/// exhaustive scorer's.
#[test]
fn a_long_doc_keeps_its_length() {
    let mut idx = LexicalIndex::new();
    let lens = [3usize, 65_534, 65_535, 65_536, 2, 70_000, 5, 1];
    for (i, len) in lens.iter().enumerate() {
        let text = vec![WORDS[i % 3]; *len].join(" ");
        idx.publish(&message(&format!("r{i}"), 1, 0, i as u64, text))
            .unwrap();
    }
    let mut docs = DocSet::with_capacity(idx.fence.doc_capacity());
    for i in 0..lens.len() {
        docs.insert(idx.fence.doc_of(&format!("r{i}")).unwrap());
    }
    for (i, len) in lens.iter().enumerate() {
        let doc = idx.fence.doc_of(&format!("r{i}")).unwrap();
        let (lined, own) = lined_sides(&idx, doc, &docs, 8);
        assert_eq!(own as usize, *len);
        assert_eq!(lined, walked_sides(&idx, doc, &docs, 8), "doc {doc}");
    }
    let windows = LexicalParams {
        window_permille: 500,
        window_radius: 2,
        ..LexicalParams::default()
    };
    for k in [1, 3, 8] {
        let (pruned, exhaustive, _) = both(&idx, &docs, "apple garden", &windows, k);
        assert_eq!(pruned, exhaustive, "k {k}");
        assert_eq!(pruned.len(), k);
    }
}

#[test]
fn gallop_finds_the_first_place_not_below() {
    let list: Vec<(DocId, u32)> = [2u32, 3, 5, 8, 13, 21, 34, 55, 89]
        .iter()
        .map(|d| (*d, 1))
        .collect();
    for from in 0..=list.len() {
        for doc in 0..100 {
            let expected = from + list[from..].partition_point(|(d, _)| *d < doc);
            assert_eq!(gallop(&list, from, doc), expected, "from {from}, doc {doc}");
        }
    }
    assert_eq!(gallop(&[], 0, 7), 0);
}

#[test]
fn the_bounded_walk_finds_what_walking_everything_finds() {
    let mut idx = LexicalIndex::new();
    // A small vocabulary with a skewed spread: some terms in a few
    // records, some in a third of them, as a large subject's are.
    let words: Vec<String> = (0..40).map(|i| format!("w{i}x")).collect();
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
    for r in 0..1_500u64 {
        let len = 4 + next(10) as usize;
        let text: Vec<&str> = (0..len)
            .map(|_| {
                // Term i drawn with weight about 1/(i+1).
                let pick = next(1_000_000) as f64 / 1_000_000.0;
                let i = ((40.0f64).powf(pick) - 1.0) as usize;
                words[i.min(39)].as_str()
            })
            .collect();
        idx.publish(&message_in(&format!("r{r:05}"), 1, "s", r, text.join(" ")))
            .unwrap();
        if r % 7 == 3 {
            idx.tombstone(&format!("r{:05}", r / 2), 2).unwrap();
        }
    }
    let b = &idx.backend;
    let partition = &b.partitions[0];
    let mut stopped_early = 0;
    for q in 0..200 {
        let len = 1 + next(12) as usize;
        let mut tids: Vec<u32> = (0..len)
            .filter_map(|_| b.vocab.get(words[next(40) as usize].as_str()).copied())
            .collect();
        tids.sort_unstable();
        tids.dedup();
        let lists: Vec<(u32, &[(DocId, u32)])> = tids
            .iter()
            .filter_map(|t| partition.postings.get(t).map(|l| (*t, l.as_slice())))
            .collect();
        let n = partition.n_docs as f64;
        let weights: Vec<f64> = lists
            .iter()
            .map(|(_, l)| (1.0 + n / l.len() as f64).ln())
            .collect();
        let limit = [1, 5, 32, 200][q % 4];
        let bounded = idx.best_shared(&lists, &weights, limit);
        let everything = walk_everything(&idx, &lists, &weights);
        if bounded.len() < everything.len() {
            stopped_early += 1;
        }
        assert_eq!(
            best(bounded, limit),
            best(everything, limit),
            "query {q}, limit {limit}"
        );
    }
    // The bound did cut walks short, or this compared nothing new.
    assert!(stopped_early > 50, "{stopped_early}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// A window's length read off a line, as the pruned walk bounds a hit
    /// with it, is the float the scorer sums over the window's places
    /// (the doc, then those before it nearest first, then those after
    /// it), for any radius, weight and lengths.
    #[test]
    fn a_window_length_read_off_a_line_is_the_scorers(
        lens in proptest::collection::vec(1..70_000u32, 1..14),
        window_permille in 1..1_000u64,
        window_radius in 1..12usize,
        avgdl in 1.0f32..40.0,
    ) {
        let params = LexicalParams {
            window_permille,
            window_radius,
            ..LexicalParams::default()
        };
        let scorer = WindowBm25::new(&params, avgdl);
        let line: Vec<(DocId, u32)> = lens.iter().enumerate().map(|(i, l)| (i as DocId, *l)).collect();
        let w = window_permille as f32 / 1000.0;
        let mut around = Vec::new();
        for i in 0..line.len() {
            window_places(i, window_radius, line.len(), &mut around);
            let mut want = line[i].1 as f32;
            for &(x, dist) in &around {
                want += w.powi(dist as i32) * line[x].1 as f32;
            }
            proptest::prop_assert_eq!(scorer.line_window_len(&line, i).to_bits(), want.to_bits());
        }
    }

    /// The best `k` scores kept while a read scores docs are the `k`
    /// highest of every score pushed, ties included, whatever the order.
    #[test]
    fn the_kept_scores_are_the_best_k_pushed(
        scores in proptest::collection::vec(0..40u8, 0..200),
        k in 1..30usize,
    ) {
        let mut top = TopScores::new(k);
        for s in &scores {
            top.push(f32::from(*s) / 4.0);
        }
        let mut want: Vec<f32> = scores.iter().map(|s| f32::from(*s) / 4.0).collect();
        want.sort_by(|a, b| b.total_cmp(a));
        want.truncate(k);
        // Below the k-th best kept (and only then): what `below` answers.
        if let Some(kth) = want.get(k - 1) {
            proptest::prop_assert!(top.below(f64::from(*kth) - 0.01));
            proptest::prop_assert!(!top.below(f64::from(*kth)));
        } else {
            proptest::prop_assert!(!top.below(-1.0));
        }
    }

    /// Hits are taken off the heap in the order sorting them gives:
    /// highest bound first, ties by lowest doc.
    #[test]
    fn hits_leave_the_heap_in_bound_order(
        hits in proptest::collection::btree_map(0..500u32, 0..8u8, 0..120),
    ) {
        let mut sorted: Vec<(f64, DocId)> = hits.iter().map(|(d, b)| (f64::from(*b) / 3.0, *d)).collect();
        sorted.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        let mut heap: std::collections::BinaryHeap<ByBound> =
            sorted.iter().rev().map(|(b, d)| ByBound(*b, *d)).collect();
        let mut popped = Vec::new();
        while let Some(ByBound(b, d)) = heap.pop() {
            popped.push((b, d));
        }
        proptest::prop_assert_eq!(popped, sorted);
    }
}

/// What the write guard is given: the records `sharing_terms` names are
/// those an exhaustive walk of every posting ranks best (by weight, ties
/// by record id), in that order, for texts of rare terms, of a speaker's
/// name most records hold, of common terms alone that tie most records,
/// and after republished and tombstoned records (docs without a record
/// or with a new number), in two subjects.
#[test]
fn the_guards_candidates_are_those_an_exhaustive_walk_ranks_best() {
    let mut idx = LexicalIndex::new();
    let words: Vec<String> = (0..300).map(|i| format!("v{i}q")).collect();
    let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
    let text = |next: &mut dyn FnMut(u64) -> u64, r: u64| {
        let mut t: Vec<&str> = vec![["Avery", "Blake"][(r % 2) as usize]];
        // Mostly uniform words, a few from a short common head.
        for _ in 0..(3 + next(12)) {
            let i = if next(5) == 0 { next(6) } else { next(300) };
            t.push(words[i as usize].as_str());
        }
        t.join(" ")
    };
    // Each record's generation, and the tombstoned ones.
    let mut generations: HashMap<u64, u64> = HashMap::new();
    let mut gone: HashSet<u64> = HashSet::new();
    for r in 0..3_000u64 {
        generations.insert(r, 1);
        let subject = if r % 5 == 4 { "other" } else { "s" };
        let content = text(&mut next, r);
        idx.publish(&message_in(&format!("r{r:05}"), 1, subject, r, content))
            .unwrap();
        if r % 11 == 5 && gone.insert(r / 3) {
            let generation = generations[&(r / 3)] + 1;
            idx.tombstone(&format!("r{:05}", r / 3), generation)
                .unwrap();
        }
        let again = r / 2;
        if r % 13 == 7 && !gone.contains(&again) {
            // A republished record: a new doc number, the old one gone.
            let generation = generations[&again] + 1;
            generations.insert(again, generation);
            idx.publish(&message_in(
                &format!("r{again:05}"),
                generation,
                if again % 5 == 4 { "other" } else { "s" },
                again,
                text(&mut next, again),
            ))
            .unwrap();
        }
    }
    let exhaustive = |idx: &LexicalIndex, subject: &str, text: &str, limit: usize| {
        let b = &idx.backend;
        let pid = b.partition_ids[&("t".to_owned(), subject.to_owned())];
        let partition = &b.partitions[pid as usize];
        let mut tids: Vec<u32> = terms(text)
            .iter()
            .filter_map(|t| b.vocab.get(t.as_str()).copied())
            .collect();
        tids.sort_unstable();
        tids.dedup();
        let all: Vec<(u32, &[(DocId, u32)])> = tids
            .iter()
            .filter_map(|t| partition.postings.get(t).map(|l| (*t, l.as_slice())))
            .collect();
        let rare: Vec<(u32, &[(DocId, u32)])> = all
            .iter()
            .copied()
            .filter(|(_, l)| l.len() * 2 <= partition.n_docs as usize)
            .collect();
        let lists = if rare.is_empty() { all } else { rare };
        let n = partition.n_docs as f64;
        let weights: Vec<f64> = lists
            .iter()
            .map(|(_, l)| (1.0 + n / l.len().max(1) as f64).ln())
            .collect();
        let mut ranked: Vec<(f64, String)> = walk_everything(idx, &lists, &weights)
            .into_iter()
            .map(|(w, doc)| (w, idx.record_of(doc).unwrap().to_owned()))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        ranked.truncate(limit);
        ranked.into_iter().map(|(_, id)| id).collect::<Vec<_>>()
    };
    let mut asked = 0;
    for q in 0..400u64 {
        let subject = if q % 4 == 3 { "other" } else { "s" };
        let query = match q % 5 {
            // The common head and a name alone: most records tie.
            0 => format!(
                "Avery {} {}",
                words[next(6) as usize],
                words[next(6) as usize]
            ),
            1 => "Blake".to_owned(),
            _ => text(&mut next, q),
        };
        let limit = [1, 5, 32, 200][(q % 4) as usize];
        let found = idx.sharing_terms("t", subject, &query, limit).unwrap();
        assert_eq!(
            found,
            exhaustive(&idx, subject, &query, limit),
            "query {q} {query:?}, limit {limit}"
        );
        asked += usize::from(found.len() == limit);
    }
    assert!(asked > 300, "{asked}");
}

/// A xorshift generator from `state`: each call gives a number below `m`
/// (the tests' texts and orders, the same on every run).
fn xorshift(mut state: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m
    }
}
