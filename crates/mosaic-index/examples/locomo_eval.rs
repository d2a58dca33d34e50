//! Evidence-retrieval evaluation on the normalized LoCoMo form.
//!
//! ```text
//! cargo run --release -p mosaic-index --example locomo_eval -- \
//!     CONVERSATIONS.jsonl QUESTIONS.jsonl [--embedder hash|minilm] [--model-dir DIR]
//!     [--neighbour-permille N]
//! ```
//!
//! Each conversation is one principal; each turn one episodic record with
//! text `[session date] speaker: text`, ordered in time. Each question is
//! searched only within its own conversation (its eligible set). Reports
//! evidence recall@1/5/10 and nDCG@10 per category (1-4; 5 is adversarial
//! and skipped) for lexical-only, vector-only and hybrid retrieval, with and
//! without neighbouring-record context. Questions with no evidence and
//! evidence ids that name no turn are reported, not silently dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_scope::{EligibleEntry, EligibleSet};
use mosaic_index::{
    AnnConfig, Embedder, FunnelConfig, HashEmbedder, IndexTarget, PublishMessage, RecallQuery,
    RetrievalMode, Retriever, ScopeKeys,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Conversation {
    conversation_id: String,
    sessions: Vec<Session>,
}

#[derive(Deserialize)]
struct Session {
    date_time: String,
    turns: Vec<Turn>,
}

#[derive(Deserialize)]
struct Turn {
    turn_id: String,
    speaker: String,
    text: String,
}

#[derive(Deserialize)]
struct Question {
    conversation_id: String,
    question_id: String,
    question: String,
    category: u8,
    evidence: Vec<String>,
}

#[derive(Default, Clone)]
struct Sums {
    n: usize,
    r1: f64,
    r5: f64,
    r10: f64,
    ndcg: f64,
}

fn fail(message: String) -> ! {
    eprintln!("locomo_eval: {message}");
    std::process::exit(2);
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &str) -> Vec<T> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| fail(format!("{path}: {e}")));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| fail(format!("{path}:{}: {e}", i + 1)))
        })
        .collect()
}

fn make_embedder(kind: &str, model_dir: Option<&str>) -> Arc<dyn Embedder> {
    match kind {
        "hash" => Arc::new(HashEmbedder::new(384)),
        "minilm" => load_minilm(
            model_dir.unwrap_or_else(|| fail("--embedder minilm needs --model-dir DIR".into())),
        ),
        other => fail(format!("unknown embedder {other}; use hash or minilm")),
    }
}

#[cfg(feature = "local-model")]
fn load_minilm(dir: &str) -> Arc<dyn Embedder> {
    match mosaic_index::local_model::MiniLmEmbedder::load(std::path::Path::new(dir)) {
        Ok(e) => Arc::new(e),
        Err(e) => fail(e.to_string()),
    }
}

#[cfg(not(feature = "local-model"))]
fn load_minilm(dir: &str) -> Arc<dyn Embedder> {
    if let Err(e) = mosaic_index::local_model::verify_model_dir(std::path::Path::new(dir)) {
        fail(e.to_string());
    }
    fail(mosaic_index::ModelError::FeatureDisabled.to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut positional = Vec::new();
    let mut embedder_kind = "hash".to_string();
    let mut model_dir: Option<String> = None;
    let mut neighbour: u64 = FunnelConfig::default().neighbour_permille;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--embedder" => {
                embedder_kind = it
                    .next()
                    .cloned()
                    .unwrap_or_else(|| fail("--embedder needs a value".into()))
            }
            "--model-dir" => model_dir = it.next().cloned(),
            "--neighbour-permille" => {
                neighbour = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| fail("--neighbour-permille needs an integer".into()))
            }
            _ => positional.push(a.clone()),
        }
    }
    if positional.len() != 2 {
        fail("usage: locomo_eval CONVERSATIONS.jsonl QUESTIONS.jsonl [--embedder hash|minilm --model-dir DIR]".into());
    }
    let conversations: Vec<Conversation> = read_jsonl(&positional[0]);
    let questions: Vec<Question> = read_jsonl(&positional[1]);
    let embedder = make_embedder(&embedder_kind, model_dir.as_deref());
    let policy = sha256_hex(b"locomo evaluation policy");
    let tenant = "tenant-eval";

    // Ingest: one principal per conversation, one record per turn.
    let mut retriever = Retriever::new(
        embedder.clone(),
        AnnConfig::default(),
        FunnelConfig::default(),
    );
    let mut eligible_by_conv: BTreeMap<String, EligibleSet> = BTreeMap::new();
    let mut turn_ids: BTreeSet<String> = BTreeSet::new();
    let started = Instant::now();
    let mut n_turns = 0usize;
    for conv in &conversations {
        let mut messages = Vec::new();
        let mut position = 0u64;
        for (s_idx, session) in conv.sessions.iter().enumerate() {
            for turn in &session.turns {
                position += 1;
                let record_id = format!("{}:{}", conv.conversation_id, turn.turn_id);
                let text = format!("[{}] {}: {}", session.date_time, turn.speaker, turn.text);
                messages.push(PublishMessage {
                    record_id: record_id.clone(),
                    generation: 1,
                    revocation_generation: 0,
                    scope: ScopeKeys {
                        tenant_id: tenant.into(),
                        policy_sha256: policy.clone(),
                        subject_key: format!("principal:{}", conv.conversation_id),
                        kind: MemoryKind::Episodic,
                    },
                    // Time order: session, then turn (sessions are dated;
                    // turns inside a session keep their order).
                    created_at_unix_ms: (s_idx as u64 + 1) * 1_000_000 + position,
                    claim_keys: Vec::new(),
                    text,
                });
                turn_ids.insert(record_id);
            }
        }
        n_turns += messages.len();
        for chunk in messages.chunks(64) {
            for r in retriever.lexical.publish_batch(chunk) {
                r.unwrap_or_else(|e| fail(e.to_string()));
            }
            for r in retriever.vector.publish_batch(chunk) {
                r.unwrap_or_else(|e| fail(e.to_string()));
            }
        }
        let mut entries: Vec<EligibleEntry> = messages
            .iter()
            .map(|m| EligibleEntry {
                record_id: m.record_id.clone(),
                content_sha256: sha256_hex(m.text.as_bytes()),
            })
            .collect();
        entries.sort();
        eligible_by_conv.insert(
            conv.conversation_id.clone(),
            EligibleSet {
                read_context_sha256: sha256_hex(conv.conversation_id.as_bytes()),
                entries,
            },
        );
    }
    eprintln!(
        "ingested {n_turns} turns of {} conversations in {:.1}s with {}",
        conversations.len(),
        started.elapsed().as_secs_f64(),
        embedder.release()
    );

    // Questions (category 5 adversarial skipped), flaws reported.
    let mut no_evidence = Vec::new();
    let mut unknown_evidence = Vec::new();
    let mut selected: Vec<&Question> = Vec::new();
    for q in questions.iter().filter(|q| q.category != 5) {
        if q.evidence.is_empty() {
            no_evidence.push(q.question_id.clone());
            continue;
        }
        for e in &q.evidence {
            if !turn_ids.contains(&format!("{}:{e}", q.conversation_id)) {
                unknown_evidence.push(format!("{} {e}", q.question_id));
            }
        }
        selected.push(q);
    }
    let started = Instant::now();
    let texts: Vec<&str> = selected.iter().map(|q| q.question.as_str()).collect();
    let mut query_vectors = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(64) {
        query_vectors.extend(
            embedder
                .embed_batch(chunk)
                .unwrap_or_else(|e| fail(e.to_string())),
        );
    }
    eprintln!(
        "embedded {} questions in {:.1}s",
        texts.len(),
        started.elapsed().as_secs_f64()
    );

    let variants: [(&str, RetrievalMode, u64); 5] = [
        ("lexical (BM25)", RetrievalMode::Lexical, 0),
        ("vector", RetrievalMode::Vector, 0),
        ("hybrid RRF", RetrievalMode::Hybrid, 0),
        ("lexical + neighbours", RetrievalMode::Lexical, neighbour),
        ("hybrid RRF + neighbours", RetrievalMode::Hybrid, neighbour),
    ];
    println!("embedder: {}", embedder.release());
    println!("questions scored: {} (categories 1-4)", selected.len());
    println!(
        "flawed, reported: {} with empty evidence (excluded: {}); {} evidence ids naming no turn (kept, count as misses: {})",
        no_evidence.len(),
        no_evidence.join(", "),
        unknown_evidence.len(),
        unknown_evidence.join(", ")
    );
    println!();
    println!("| variant | category | n | recall@1 | recall@5 | recall@10 | nDCG@10 |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (name, mode, neighbour_permille) in variants {
        retriever.set_config(FunnelConfig {
            neighbour_permille,
            ..FunnelConfig::default()
        });
        let mut by_cat: BTreeMap<u8, Sums> = BTreeMap::new();
        let started = Instant::now();
        for (q, qv) in selected.iter().zip(&query_vectors) {
            let Some(eligible) = eligible_by_conv.get(&q.conversation_id) else {
                fail(format!("{} names an unknown conversation", q.question_id));
            };
            let query = RecallQuery {
                tenant_id: tenant,
                policy_sha256: &policy,
                selector_release: "locomo-eval",
                read_subject: &q.conversation_id,
                revocation_generation: 0,
                text: &q.question,
                claim_keys: &[],
                eligible,
                max_results: 10,
                mode,
            };
            let recall = retriever
                .recall_embedded(&query, Some(qv))
                .unwrap_or_else(|e| fail(e.to_string()));
            let ranked: Vec<&str> = recall.record_ids();
            let evidence: BTreeSet<String> = q
                .evidence
                .iter()
                .map(|e| format!("{}:{e}", q.conversation_id))
                .collect();
            let found_at = |k: usize| {
                ranked
                    .iter()
                    .take(k)
                    .filter(|id| evidence.contains(**id))
                    .count() as f64
                    / evidence.len() as f64
            };
            let dcg: f64 = ranked
                .iter()
                .take(10)
                .enumerate()
                .filter(|(_, id)| evidence.contains(**id))
                .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
                .sum();
            let ideal: f64 = (0..evidence.len().min(10))
                .map(|i| 1.0 / ((i + 2) as f64).log2())
                .sum();
            for cat in [q.category, 0] {
                let s = by_cat.entry(cat).or_default();
                s.n += 1;
                s.r1 += found_at(1);
                s.r5 += found_at(5);
                s.r10 += found_at(10);
                s.ndcg += dcg / ideal;
            }
        }
        let per_query_ms = started.elapsed().as_secs_f64() * 1000.0 / selected.len().max(1) as f64;
        for (cat, s) in &by_cat {
            let label = match cat {
                0 => format!("all ({per_query_ms:.2} ms/query)"),
                1 => "1 multi-hop".into(),
                2 => "2 temporal".into(),
                3 => "3 open-domain".into(),
                4 => "4 single-hop".into(),
                other => other.to_string(),
            };
            let n = s.n as f64;
            println!(
                "| {name} | {label} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
                s.n,
                s.r1 / n,
                s.r5 / n,
                s.r10 / n,
                s.ndcg / n
            );
        }
    }
}
