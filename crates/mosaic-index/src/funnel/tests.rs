use super::*;
use crate::HashEmbedder;
use crate::ann::AnnConfig;
use crate::target::{IndexTarget, PublishMessage, ScopeKeys};
use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_scope::{
    EligibleEntry, EligibleSet, RelevanceReceipt, SealedEligibleSet,
};
use std::collections::BTreeMap;
use std::sync::Arc;

const POLICY: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn loaded(lines: &[&str]) -> (Retriever, SealedEligibleSet) {
    let mut r = Retriever::new(
        Arc::new(HashEmbedder::new(64)),
        AnnConfig::default(),
        FunnelConfig::default(),
    );
    let mut entries = Vec::new();
    for (i, text) in lines.iter().enumerate() {
        let m = line(i, 1, text);
        r.lexical.publish(&m).unwrap();
        r.vector.publish(&m).unwrap();
        entries.push(EligibleEntry {
            record_id: m.record_id.clone(),
            content_sha256: sha256_hex(text.as_bytes()),
        });
    }
    let eligible = SealedEligibleSet::seal(EligibleSet {
        scope_commitments: Vec::new(),
        read_context_sha256: sha256_hex(b"read"),
        entries,
    })
    .unwrap();
    (r, eligible)
}

/// Line `i` of a conversation at `generation`.
fn line(i: usize, generation: u64, text: &str) -> PublishMessage {
    PublishMessage {
        record_id: format!("line-{i}"),
        generation,
        revocation_generation: 0,
        scope: ScopeKeys {
            tenant_id: "tenant".into(),
            policy_sha256: POLICY.into(),
            subject_key: "principal:p".into(),
            kind: MemoryKind::Episodic,
        },
        created_at_unix_ms: 1_000 + i as u64,
        claim_keys: Vec::new(),
        text: text.to_owned(),
    }
}

/// The score `recall`'s receipt gives `id`.
fn score(recall: &Recall, id: &str) -> u64 {
    recall
        .receipt
        .results
        .iter()
        .find(|x| x.record_id == id)
        .map(|x| x.score)
        .unwrap()
}

/// The tests' query: ten results for the tenant's `p`.
fn query<'a>(
    eligible: &'a SealedEligibleSet,
    text: &'a str,
    mode: RetrievalMode,
) -> RecallQuery<'a> {
    RecallQuery {
        tenant_id: "tenant",
        policy_sha256: POLICY,
        selector_release: "test",
        read_subject: "p",
        revocation_generation: 0,
        text,
        claim_keys: &[],
        eligible,
        max_results: 10,
        mode,
    }
}

fn ask(r: &Retriever, eligible: &SealedEligibleSet, text: &str, mode: RetrievalMode) -> Recall {
    r.recall(&query(eligible, text, mode)).unwrap()
}

const LINES: [&str; 3] = [
    "[8 May, 2023] Caroline: Melanie went hiking and hiking and hiking at the lake.",
    "[8 May, 2023] Melanie: I hiked.",
    "[8 May, 2023] Joanna: we go on Friday.",
];

#[test]
fn the_speaker_prior_prefers_the_lines_of_a_speaker_the_query_names() {
    let (mut r, eligible) = loaded(&LINES);
    let question = "Where did Melanie go hiking?";
    // Reciprocal ranks keep neighbouring scores close. Without the
    // prior, the line that talks about Melanie most wins.
    r.set_config(FunnelConfig {
        speaker_permille: 0,
        lexical_window_permille: 0,
        fusion: Fusion::ReciprocalRank,
        ..FunnelConfig::default()
    });
    let plain = ask(&r, &eligible, question, RetrievalMode::Lexical);
    assert_eq!(plain.record_ids(), ["line-0", "line-1", "line-2"]);
    assert!(plain.explanations.iter().all(|e| e.speaker_bonus == 0));
    let before: BTreeMap<&str, u64> = plain
        .receipt
        .results
        .iter()
        .map(|x| (x.record_id.as_str(), x.score))
        .collect();

    // With it, Melanie's own line gains half its score and comes first;
    // a line that only mentions her, or another speaker's, gains nothing.
    r.set_config(FunnelConfig {
        lexical_window_permille: 0,
        fusion: Fusion::ReciprocalRank,
        ..FunnelConfig::default()
    });
    let recall = ask(&r, &eligible, question, RetrievalMode::Lexical);
    assert_eq!(recall.record_ids(), ["line-1", "line-0", "line-2"]);
    for (result, e) in recall.receipt.results.iter().zip(&recall.explanations) {
        let old = before[result.record_id.as_str()];
        let bonus = if result.record_id == "line-1" {
            old / 2
        } else {
            0
        };
        assert_eq!(e.speaker_bonus, bonus, "{}", result.record_id);
        assert_eq!(result.score, old + bonus, "{}", result.record_id);
    }
    assert!(recall.explanations[0].speaker_bonus > 0);
}

#[test]
fn the_speaker_prior_ignores_dates_and_unnamed_speakers() {
    let (r, eligible) = loaded(&LINES);
    for mode in [RetrievalMode::Lexical, RetrievalMode::Hybrid] {
        // "May" is in every line's date prefix, not in a speaker label.
        let recall = ask(&r, &eligible, "what happened in May 2023", mode);
        assert!(recall.explanations.iter().all(|e| e.speaker_bonus == 0));
        // No speaker named: no bonus, whatever matches.
        let recall = ask(&r, &eligible, "hiking at the lake", mode);
        assert!(!recall.record_ids().is_empty());
        assert!(recall.explanations.iter().all(|e| e.speaker_bonus == 0));
    }
}

// The last line is the weakest match of every query below: the floor
// of the lexical list, which scores 0 in standard-score fusion and so
// gains no multiplicative bonus.
const ROLE_LINES: [&str; 5] = [
    "[1 March, 2025] user: Our shop is hosted on Heroku.",
    "[1 March, 2025] assistant: Heroku hosting works; the shop's files vanish on restart.",
    "[20 April, 2025] user: We moved the shop hosting to Fly.io.",
    "[20 April, 2025] assistant: Fly.io hosting suits the shop.",
    "[21 April, 2025] user: A long unrelated note about bread, flour, ovens and the shop.",
];

#[test]
fn role_labels_are_chosen_by_the_questions_person_not_by_its_words() {
    let (r, eligible) = loaded(&ROLE_LINES);
    let bonus = |text: &str| -> Vec<(String, bool)> {
        let recall = ask(&r, &eligible, text, RetrievalMode::Lexical);
        let mut v: Vec<(String, bool)> = recall
            .explanations
            .iter()
            .map(|e| (e.record_id.clone(), e.speaker_bonus > 0))
            .collect();
        v.sort();
        v
    };
    fn user_lines(v: &[(String, bool)]) -> Vec<&str> {
        v.iter()
            .filter(|(_, b)| *b)
            .map(|(id, _)| id.as_str())
            .collect()
    }
    // First person: the user's lines.
    assert_eq!(
        user_lines(&bonus("where is my shop hosting?")),
        ["line-0", "line-2"]
    );
    // Second person only: the assistant's lines.
    assert_eq!(
        user_lines(&bonus("what did you say about shop hosting?")),
        ["line-1", "line-3"]
    );
    // Naming a role is not naming a speaker, and no person, no prior.
    assert!(user_lines(&bonus("shop hosting assistant user")).is_empty());
    // Switched off, a role label is an ordinary label again.
    let mut r = r;
    r.set_config(FunnelConfig {
        speaker_roles: false,
        ..FunnelConfig::default()
    });
    let recall = ask(
        &r,
        &eligible,
        "what did the user say about hosting",
        RetrievalMode::Lexical,
    );
    let named: Vec<&str> = recall
        .explanations
        .iter()
        .filter(|e| e.speaker_bonus > 0)
        .map(|e| e.record_id.as_str())
        .collect();
    assert!(
        named.contains(&"line-0") && named.contains(&"line-2"),
        "{named:?}"
    );
    assert!(!named.contains(&"line-1"), "{named:?}");
}

/// Lines `(speaker, text)` of one subject, in time order, with the
/// default configuration and the hashing embedder (64 dimensions).
fn updates(lines: &[&str]) -> (Retriever, SealedEligibleSet) {
    loaded(lines)
}

fn order(recall: &Recall, ids: &[&str]) -> Vec<String> {
    recall
        .record_ids()
        .iter()
        .filter(|id| ids.contains(id))
        .map(|id| id.to_string())
        .collect()
}

#[test]
fn the_newer_of_two_values_ranks_first_when_its_line_states_the_change() {
    // Pairs the hashing embedder finds alike (their words overlap): its
    // similarity is word overlap, and the default band (0.6) is read
    // from MiniLM, which finds "I live in Lisbon" and "I moved to Porto"
    // alike (0.69) where hashing does not (0.48 here).
    let cases: [(&[&str], &str, &str, &str); 5] = [
        (
            &[
                "user: I live in Lisbon.",
                "user: Green tea is my favourite drink.",
                "user: I moved, I live in Porto now.",
            ],
            "where does the user live",
            "line-2",
            "line-0",
        ),
        (
            &[
                "user: I live in Montreal.",
                "user: Green tea is my favourite drink.",
                "user: I moved, I live in Vancouver now.",
            ],
            "where does the user live",
            "line-2",
            "line-0",
        ),
        (
            &[
                "user: I work as a baker at the corner bakery.",
                "user: I quit the bakery, I work as a nurse at the hospital now.",
            ],
            "what is my work",
            "line-1",
            "line-0",
        ),
        (
            &[
                "user: Our cat is called Luna.",
                "user: We renamed our cat, she is called Milo now.",
            ],
            "what is our cat called",
            "line-1",
            "line-0",
        ),
        (
            &[
                "user: My budget for the trip is 2000 euros.",
                "user: My budget for the trip is 3000 euros now.",
            ],
            "what is my budget for the trip",
            "line-1",
            "line-0",
        ),
    ];
    for (lines, question, newer, older) in cases {
        let (mut r, eligible) = updates(lines);
        r.set_config(FunnelConfig {
            update_head: 0,
            ..FunnelConfig::default()
        });
        // Without update pairs the older line, which says more of the
        // question's words, ranks first.
        let before = ask(&r, &eligible, question, RetrievalMode::Hybrid);
        assert_eq!(
            order(&before, &[newer, older]),
            [older, newer],
            "{question}: {:?}",
            before.receipt.results
        );
        for mode in [
            RetrievalMode::Hybrid,
            RetrievalMode::Lexical,
            RetrievalMode::Vector,
        ] {
            r.set_config(FunnelConfig {
                update_head: 0,
                ..FunnelConfig::default()
            });
            let mut plain: Vec<String> = ask(&r, &eligible, question, mode)
                .record_ids()
                .iter()
                .map(|s| s.to_string())
                .collect();
            r.set_config(FunnelConfig::default());
            let after = ask(&r, &eligible, question, mode);
            let mut ids: Vec<String> = after.record_ids().iter().map(|s| s.to_string()).collect();
            // Which records are returned does not change, only their order.
            plain.sort();
            ids.sort();
            assert_eq!(plain, ids, "{question} {mode:?}");
            if mode == RetrievalMode::Lexical {
                // No vector list, no similarity: no update pairs.
                assert!(after.explanations.iter().all(|e| e.update_lift == 0));
                continue;
            }
            if !(ids.iter().any(|i| i == newer) && ids.iter().any(|i| i == older)) {
                continue;
            }
            assert_eq!(
                order(&after, &[newer, older]),
                [newer, older],
                "{question} {mode:?}: {:?}",
                after.receipt.results
            );
            // Placed one point above the older value, no further.
            let lifted = after
                .explanations
                .iter()
                .find(|e| e.record_id == newer)
                .unwrap();
            if lifted.update_lift > 0 {
                assert_eq!(score(&after, newer), score(&after, older) + 1);
            }
        }
    }
}

#[test]
fn values_that_are_not_an_update_keep_their_relevance_order() {
    // Neither line states a change: two values that both hold.
    let (r, eligible) = updates(&[
        "user: I love hiking in the Alps.",
        "user: I also love hiking in Norway with my friends on long summer weekends.",
    ]);
    let recall = ask(
        &r,
        &eligible,
        "where do I love hiking",
        RetrievalMode::Hybrid,
    );
    assert_eq!(order(&recall, &["line-0", "line-1"]), ["line-0", "line-1"]);
    assert!(recall.explanations.iter().all(|e| e.update_lift == 0));

    // Another speaker's newer line is not the user's new value.
    let (r, eligible) = updates(&[
        "user: I live in Lisbon, in a flat near the river.",
        "assistant: Many people moved to Porto, flats near the river are cheaper now.",
    ]);
    let recall = ask(
        &r,
        &eligible,
        "where is the user's flat near the river",
        RetrievalMode::Hybrid,
    );
    assert_eq!(order(&recall, &["line-0", "line-1"]), ["line-0", "line-1"]);
    assert!(recall.explanations.iter().all(|e| e.update_lift == 0));

    // A question about the past wants the older value as it ranks.
    let (r, eligible) = updates(&[
        "user: I live in Lisbon.",
        "user: I moved, I live in Porto now.",
    ]);
    for question in [
        "where did the user live before",
        "where did the user live first",
        "when did the user live in Lisbon",
    ] {
        let recall = ask(&r, &eligible, question, RetrievalMode::Hybrid);
        assert!(
            recall.explanations.iter().all(|e| e.update_lift == 0),
            "{question}"
        );
    }

    // Stored vectors less alike than the band are not a pair (the
    // default band pairs these two lines: see the test above).
    let (mut r, eligible) = updates(&[
        "user: I live in Lisbon.",
        "user: I moved, I live in Porto now.",
    ]);
    r.set_config(FunnelConfig {
        update_band_permille: 1_000,
        ..FunnelConfig::default()
    });
    let recall = ask(
        &r,
        &eligible,
        "where does the user live",
        RetrievalMode::Hybrid,
    );
    assert_eq!(order(&recall, &["line-0", "line-1"]), ["line-0", "line-1"]);
    assert!(recall.explanations.iter().all(|e| e.update_lift == 0));
}

#[test]
fn a_chain_of_changes_ends_newest_first() {
    let (r, eligible) = updates(&[
        "user: My home is in Lisbon.",
        "user: My home is in Porto now.",
        "user: I moved again, my home is in Braga now.",
    ]);
    let recall = ask(&r, &eligible, "where is my home", RetrievalMode::Hybrid);
    assert_eq!(
        order(&recall, &["line-0", "line-1", "line-2"]),
        ["line-2", "line-1", "line-0"],
        "{:?}",
        recall.receipt.results
    );
}

#[test]
fn recency_favours_later_records_only_for_questions_about_now() {
    let (mut r, eligible) = loaded(&ROLE_LINES);
    r.set_config(FunnelConfig {
        speaker_roles: false,
        fusion: Fusion::ReciprocalRank,
        ..FunnelConfig::default()
    });
    // Without a current-state cue, no recency bonus at all.
    let plain = ask(&r, &eligible, "shop hosting", RetrievalMode::Lexical);
    assert!(plain.explanations.iter().all(|e| e.recency_bonus == 0));
    let now = ask(
        &r,
        &eligible,
        "where is the shop hosting now",
        RetrievalMode::Lexical,
    );
    let by_id: BTreeMap<&str, &Explanation> = now
        .explanations
        .iter()
        .map(|e| (e.record_id.as_str(), e))
        .collect();
    // The oldest candidate gains nothing, the newest a quarter, the
    // others in proportion to their place in time (line-3 at 3/4).
    assert_eq!(by_id["line-0"].recency_bonus, 0);
    for (id, place) in [("line-4", 1.0), ("line-3", 0.75)] {
        let before = score(&plain, id);
        assert_eq!(
            by_id[id].recency_bonus,
            (before as f64 * 0.25 * place).round() as u64,
            "{id}"
        );
        assert_eq!(score(&now, id), before + by_id[id].recency_bonus, "{id}");
    }
    // A question naming its own date is not about now.
    let dated = ask(
        &r,
        &eligible,
        "where was the shop hosting currently in March 2025",
        RetrievalMode::Lexical,
    );
    assert!(dated.explanations.iter().all(|e| e.recency_bonus == 0));
    mosaic_harness::memory_scope::verify_relevance_receipt(
        &now.relevance_input(&eligible.to_set()).unwrap(),
        &now.receipt,
    )
    .unwrap();
}

#[test]
fn a_question_asking_when_prefers_lines_that_place_it_in_time() {
    const LINES: [&str; 5] = [
        "[3 July, 2023] Caroline: The pride parade was full of energy and love.",
        "[3 July, 2023] Caroline: I went to a parade last Friday, it was amazing and I felt at home.",
        "[3 July, 2023] Melanie: Pride parades are so much fun, the parade music too.",
        "[3 July, 2023] Caroline: The parade had a great pride choir.",
        "[3 July, 2023] Melanie: Work, the kids, the garden, the weather, the food, a parade.",
    ];
    let (mut r, eligible) = loaded(&LINES);
    r.set_config(FunnelConfig {
        speaker_permille: 0,
        ..FunnelConfig::default()
    });
    let timed = |recall: &Recall| -> Vec<String> {
        recall
            .explanations
            .iter()
            .filter(|e| e.time_bonus > 0)
            .map(|e| e.record_id.clone())
            .collect()
    };
    // Without the prior the line that says when is not first.
    let mut off = r.config().clone();
    off.time_permille = 0;
    r.set_config(off.clone());
    let plain = ask(
        &r,
        &eligible,
        "When did Caroline go to the pride parade?",
        RetrievalMode::Lexical,
    );
    assert_ne!(plain.record_ids()[0], "line-1", "{:?}", plain.explanations);
    assert!(timed(&plain).is_empty());
    // With it, that line (and only it) gains half its score and leads.
    r.set_config(FunnelConfig {
        time_permille: 500,
        ..off
    });
    let when = ask(
        &r,
        &eligible,
        "When did Caroline go to the pride parade?",
        RetrievalMode::Lexical,
    );
    assert_eq!(timed(&when), vec!["line-1".to_owned()]);
    assert_eq!(when.record_ids()[0], "line-1");
    assert_eq!(score(&when, "line-1"), score(&plain, "line-1") * 3 / 2);
    // A question that does not ask when gets no time bonus.
    let what = ask(
        &r,
        &eligible,
        "What was the pride parade like?",
        RetrievalMode::Lexical,
    );
    assert!(timed(&what).is_empty());
    mosaic_harness::memory_scope::verify_relevance_receipt(
        &when.relevance_input(&eligible.to_set()).unwrap(),
        &when.receipt,
    )
    .unwrap();
}

#[test]
fn standard_score_fusion_keeps_each_lists_order_and_weighs_a_standout() {
    let (mut r, eligible) = loaded(&LINES);
    r.set_config(FunnelConfig {
        speaker_permille: 0,
        ..FunnelConfig::default()
    });
    // One list alone: its order is kept below the mean too (no ties at
    // zero broken by record id).
    let lexical = ask(
        &r,
        &eligible,
        "Melanie hiking lake Friday",
        RetrievalMode::Lexical,
    );
    let scores: Vec<u64> = lexical.receipt.results.iter().map(|x| x.score).collect();
    assert!(scores.windows(2).all(|w| w[0] > w[1]), "{scores:?}");
    assert_eq!(
        *scores.last().unwrap(),
        0,
        "the lowest candidate is the floor"
    );
}

#[test]
fn an_eligible_set_resolved_once_follows_every_change_of_the_index() {
    let (mut r, eligible) = loaded(&LINES);
    let found = |r: &Retriever, text: &str, mode| -> Vec<String> {
        ask(r, &eligible, text, mode)
            .receipt
            .results
            .iter()
            .map(|x| x.record_id.clone())
            .collect()
    };
    for mode in [RetrievalMode::Lexical, RetrievalMode::Vector] {
        assert!(found(&r, "Melanie hiking lake", mode).contains(&"line-0".to_owned()));
    }
    // The same record published again at a newer generation, with the
    // same text (so the same eligible set): a new doc in each target,
    // which a resolution kept from before would not name.
    let again = line(0, 2, LINES[0]);
    r.lexical.publish(&again).unwrap();
    r.vector.publish(&again).unwrap();
    for mode in [RetrievalMode::Lexical, RetrievalMode::Vector] {
        assert!(
            found(&r, "Caroline Melanie hiking", mode).contains(&"line-0".to_owned()),
            "{mode:?}"
        );
    }
    // Tombstoned: never found again through the same set.
    r.lexical.tombstone("line-0", 3).unwrap();
    r.vector.tombstone("line-0", 3).unwrap();
    for mode in [RetrievalMode::Lexical, RetrievalMode::Vector] {
        assert!(!found(&r, "Melanie hiking at the lake", mode).contains(&"line-0".to_owned()));
    }
}

#[test]
fn the_result_cache_keeps_receipts_not_the_reads_eligible_set() {
    let (r, eligible) = loaded(&LINES);
    let first = ask(&r, &eligible, "Melanie hiking", RetrievalMode::Hybrid);
    let again = ask(&r, &eligible, "Melanie hiking", RetrievalMode::Hybrid);
    assert!(!first.cache_hit && again.cache_hit);
    // The computed read keeps its scores (so its input can be
    // rebuilt); the cache entry keeps the receipt only, so it grows
    // with neither the eligible set nor the candidates.
    let input = first.relevance_input(&eligible.to_set()).unwrap();
    mosaic_harness::memory_scope::verify_relevance_receipt(&input, &first.receipt).unwrap();
    assert!(again.ranked.is_none());
    assert!(again.relevance_input(&eligible.to_set()).is_none());
    assert_eq!(again.receipt, first.receipt);
    assert_eq!(again.explanations, first.explanations);
}

#[test]
fn a_receipt_is_verified_against_what_was_ranked_not_against_itself() {
    use mosaic_harness::memory_scope::verify_relevance_receipt;
    let (r, eligible) = loaded(&LINES);
    let recall = ask(&r, &eligible, "Melanie hiking", RetrievalMode::Hybrid);
    let input = recall.relevance_input(&eligible.to_set()).unwrap();
    verify_relevance_receipt(&input, &recall.receipt).unwrap();
    // Each field the receipt states about the ranking, changed in the
    // recall's own receipt and resealed (so its digest still checks
    // out): the input is rebuilt from what was ranked, not from that
    // receipt, so every change is caught.
    type Forgery = (&'static str, fn(&mut RelevanceReceipt));
    let forgeries: [Forgery; 4] = [
        ("query", |x| x.query_sha256 = "0".repeat(64)),
        ("features", |x| x.feature_release.push_str("-other")),
        ("ranker", |x| x.ranker_release.push_str("-other")),
        ("max results", |x| x.max_results += 1),
    ];
    for (what, forge) in forgeries {
        let mut forged = recall.clone();
        forge(&mut forged.receipt);
        forged.receipt.receipt_sha256 = forged.receipt.compute_digest().unwrap();
        let input = forged.relevance_input(&eligible.to_set()).unwrap();
        assert!(
            verify_relevance_receipt(&input, &forged.receipt).is_err(),
            "a receipt with another {what} verified"
        );
    }
}

#[test]
fn the_speaker_prior_keeps_the_receipt_verifiable() {
    let (r, eligible) = loaded(&LINES);
    let recall = ask(&r, &eligible, "Melanie hiking", RetrievalMode::Hybrid);
    mosaic_harness::memory_scope::verify_relevance_receipt(
        &recall.relevance_input(&eligible.to_set()).unwrap(),
        &recall.receipt,
    )
    .unwrap();
    assert_eq!(recall.receipt.ranker_release, RANKER_RELEASE);
}

/// The features a read's candidate source answers from the docs its lists
/// handed through are those the lexical target answers for each record
/// looked up by id, for records the lexical list found, records only the
/// vector list found, and records neither found, whether or not the two
/// targets number their docs alike.
#[test]
fn features_read_by_the_lists_docs_are_those_looked_up_by_id() {
    // Both targets numbering alike, then the lexical target's numbers one
    // above the vector target's.
    for apart in [false, true] {
        features_match_lookups_by_id(apart);
    }
}

fn features_match_lookups_by_id(apart: bool) {
    use crate::fusion::{CandidateSource, MemorySource};
    let lines = [
        "[8 May, 2023] Caroline: I moved to Porto last week.",
        "[8 May, 2023] Melanie: I went hiking at the lake yesterday.",
        "user: I changed my job instead of moving.",
        "assistant: Porto is a fine city for hiking.",
        "Joanna likes the lake.",
        "[9 May, 2023] Caroline: hiking again today.",
        "Nothing here is like anything else.",
    ];
    let mut r = Retriever::new(
        Arc::new(HashEmbedder::new(64)),
        AnnConfig::default(),
        FunnelConfig::default(),
    );
    // A record in the lexical target only, first: every line's lexical
    // doc is then one above its vector doc.
    if apart {
        r.lexical
            .publish(&line(99, 1, "Elsewhere, hiking."))
            .unwrap();
    }
    for (i, text) in lines.iter().enumerate() {
        r.lexical.publish(&line(i, 1, text)).unwrap();
        r.vector.publish(&line(i, 1, text)).unwrap();
    }
    let eligible = SealedEligibleSet::seal(EligibleSet {
        scope_commitments: Vec::new(),
        read_context_sha256: sha256_hex(b"read"),
        entries: (0..lines.len())
            .map(|i| EligibleEntry {
                record_id: format!("line-{i}"),
                content_sha256: sha256_hex(lines[i].as_bytes()),
            })
            .collect(),
    })
    .unwrap();
    let text = "Where did Caroline go hiking after Porto?";
    let q = query(&eligible, text, RetrievalMode::Hybrid);
    let terms = crate::text::terms(text);
    let mut source = MemorySource::new(&r.lexical, &r.vector, &q, true);
    let lexical = source
        .lexical_hits(&terms, 2, &crate::lexical::LexicalParams::default())
        .unwrap();
    let vector_query = r.vector.embedder().embed(text).unwrap();
    let (_, vector) = source
        .vector_hits_seeded(&vector_query, 3, &lexical)
        .unwrap();
    let lexical_ids: Vec<&str> = lexical.iter().map(|h| h.record_id.as_str()).collect();
    let vector_ids: Vec<&str> = vector.iter().map(|h| h.record_id.as_str()).collect();
    // Some records found by one list only, some by neither.
    assert!(vector_ids.iter().any(|id| !lexical_ids.contains(id)));
    let ids: Vec<String> = (0..lines.len() + 1).map(|i| format!("line-{i}")).collect();
    assert!(
        ids.iter().any(|id| {
            !lexical_ids.contains(&id.as_str()) && !vector_ids.contains(&id.as_str())
        })
    );
    let docs = r.lexical.resolve_eligible(&eligible, "tenant", POLICY);
    let lex = &r.lexical;
    let by_id = |id: &str| lex.doc_of(id);
    for id in &ids {
        let doc = by_id(id);
        for person in [None, Some(None), Some(Some(crate::text::Role::User))] {
            assert_eq!(
                source.speaker_named(id, &terms, person),
                doc.is_some_and(|d| lex.speaker_named(d, &terms, person)),
                "{id}"
            );
        }
        assert_eq!(source.created_at(id), doc.and_then(|d| lex.created_at(d)));
        assert_eq!(
            source.speaker_role(id),
            doc.and_then(|d| lex.speaker_role(d))
        );
        assert_eq!(
            source.places_in_time(id),
            doc.is_some_and(|d| lex.places_in_time(d))
        );
        assert_eq!(
            source.neighbours(id),
            doc.map_or_else(Vec::new, |d| lex.neighbours(d, &docs))
        );
        assert_eq!(
            source.holds_query_term(id, &terms),
            doc.is_some_and(|d| lex.holds_any(d, &terms))
        );
        assert_eq!(
            source.states_change(id),
            doc.is_some_and(|d| lex.states_change(d))
        );
        assert_eq!(
            source.recorded_order(id),
            doc.and_then(|d| lex.recorded_order(d))
        );
        for other in &ids {
            assert_eq!(
                source.same_speaker(id, other),
                match (doc, by_id(other)) {
                    (Some(a), Some(b)) => lex.same_speaker(a, b),
                    _ => false,
                },
                "{id} {other}"
            );
        }
    }
}
