//! Evidence-retrieval evaluation on the normalized LoCoMo form.
//!
//! ```text
//! cargo run --release -p mosaic-index --example locomo_eval -- \
//!     CONVERSATIONS.jsonl QUESTIONS.jsonl [--embedder hash|minilm|minilm-int8] [--model-dir DIR]
//!     [--embedding-cache FILE] [--variant NAME:MODE[:key=value,...]]...
//!     [--split tuning|held-out|all] [--tables] [--latency] [--batch 64|session]
//!     [--conversations FIRST-LAST]
//!     [--leave-out-question-turns | --hide-own-turns [--own-turns-ineligible] | --before-question]
//!     [--dump FILE]
//! ```
//!
//! Each conversation is one principal; each turn one episodic record with
//! text `[session date] speaker: text`, ordered in time. Each question is
//! searched only within its own conversation (its eligible set). Reports
//! evidence recall@1/5/10, nDCG@10 and any-hit@10 per category. A category
//! is a number (LoCoMo's 1-5: 5 is adversarial and skipped) or a name
//! (every named category is scored). Questions with no evidence and
//! evidence ids that name no turn are reported, not silently dropped.
//!
//! Generalisation check: the first five conversations of the file are the
//! tuning split, the last five the held-out split; recall@10 is reported for
//! each split and for all ten. `--split tuning` scores only the tuning
//! split's questions (so a search over variants never sees the held-out
//! figures); `--split held-out` only the others.
//!
//! A variant is a retrieval mode (`lexical`, `vector`, `hybrid`) plus
//! overrides of the default `FunnelConfig` fields, for example
//! `--variant bm25:lexical:neighbour_permille=0`. Without `--variant`, the
//! default configuration runs in every mode. `--embedding-cache FILE` keeps
//! embeddings (by SHA-256 of the text) between runs, so a model is run only
//! once per text. `--latency` then times every question end to end with the
//! default configuration in hybrid mode, one at a time: query embedding by
//! the model itself (never the cache), then the funnel; with `--idle-ms N`
//! the process sleeps N milliseconds before each question, as a server
//! between one client's requests does (the questions otherwise follow one
//! another with no pause, which keeps the cores busy). `--batch` is the
//! ingest batch (records per publish and per embedding call); `--batch
//! session` makes each session one batch, as `mosaic serve` receives them
//! when a client sends a session per `POST /v1/conversations/{id}/messages`
//! (`mosaic eval`), so the embedding time it reports is the
//! embedding-only figure for that ingest. `--conversations FIRST-LAST`
//! keeps only those conversations (0-based, file order) and their
//! questions, and `--leave-out-question-turns` ingests neither a
//! question's own turn nor its reference reply (`query_turn_id`,
//! `answer_turn_id`: RealMem asks inside the history) of any question,
//! so a question whose evidence is another question's turn misses it;
//! `--hide-own-turns` ingests every turn and takes each question's own two
//! out of that question's ranking only. Both as `mosaic eval --ingest
//! turns` does with the same flags.
//!
//! Two more forms, for diagnosis only (`mosaic eval` has neither):
//! `--own-turns-ineligible` (with `--hide-own-turns`) also takes a
//! question's own two turns out of its eligible set, so they lend no terms
//! to their neighbours through the lexical turn windows either; and
//! `--before-question` ingests every turn and ranks each question over the
//! turns recorded before its own turn only (the history its user had when
//! asking; a question with no turn of its own ranks over everything).
//! `--dump FILE` writes each question's ranking per variant as JSON lines
//! (`variant`, `question_id`, `category`, `evidence`, and `ranked`: the
//! first 50 as `[record id, score, lexical rank, vector rank]`, the
//! question's own turns left out when hidden).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_scope::{EligibleEntry, EligibleSet, SealedEligibleSet};
use mosaic_index::eval_metrics::{MetricSums, category_label, score_ranking};
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
    category: serde_json::Value,
    evidence: Vec<String>,
    /// The turn that asks the question, when it sits inside the history
    /// (RealMem); left out of the ingest with `--leave-out-question-turns`.
    #[serde(default)]
    query_turn_id: Option<String>,
    /// The reference reply to the question (RealMem), left out alike.
    #[serde(default)]
    answer_turn_id: Option<String>,
}

/// A category as a sortable key: LoCoMo's numbers first (`1 multi-hop`),
/// then names; `None` for a number past 199 or any other JSON value.
fn category_key(value: &serde_json::Value) -> Option<(u8, String)> {
    match value {
        serde_json::Value::Number(n) => {
            let n = u8::try_from(n.as_u64()?).ok().filter(|n| *n < 200)?;
            Some((n, category_label(n)))
        }
        serde_json::Value::String(s) if !s.trim().is_empty() => Some((252, s.trim().to_owned())),
        _ => None,
    }
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
        "minilm" | "minilm-int8" => load_minilm(
            model_dir.unwrap_or_else(|| fail(format!("--embedder {kind} needs --model-dir DIR"))),
            kind == "minilm-int8",
        ),
        other => fail(format!(
            "unknown embedder {other}; use hash, minilm or minilm-int8"
        )),
    }
}

#[cfg(feature = "local-model")]
fn load_minilm(dir: &str, int8: bool) -> Arc<dyn Embedder> {
    let dir = std::path::Path::new(dir);
    let loaded = if int8 {
        mosaic_index::local_model::MiniLmEmbedder::load_int8(dir)
    } else {
        mosaic_index::local_model::MiniLmEmbedder::load(dir)
    };
    match loaded {
        Ok(e) => Arc::new(e),
        Err(e) => fail(e.to_string()),
    }
}

#[cfg(not(feature = "local-model"))]
fn load_minilm(dir: &str, _int8: bool) -> Arc<dyn Embedder> {
    if let Err(e) = mosaic_index::local_model::verify_model_dir(std::path::Path::new(dir)) {
        fail(e.to_string());
    }
    fail(mosaic_index::ModelError::FeatureDisabled.to_string())
}

/// An embedder that remembers vectors by SHA-256 of the text and keeps
/// them in a file between runs.
struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    path: Option<std::path::PathBuf>,
    map: Mutex<HashMap<[u8; 32], Vec<f32>>>,
    misses: AtomicUsize,
}

fn text_key(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

impl CachedEmbedder {
    fn open(inner: Arc<dyn Embedder>, path: Option<&str>) -> Self {
        let mut map = HashMap::new();
        let dim = inner.dimension();
        let path = path.map(std::path::PathBuf::from);
        if let Some(bytes) = path.as_ref().and_then(|p| std::fs::read(p).ok()) {
            let header = inner.release().as_bytes();
            let record = 32 + 4 * dim;
            if bytes.len() > header.len() && &bytes[..header.len()] == header {
                for chunk in bytes[header.len() + 1..].chunks_exact(record) {
                    let mut key = [0u8; 32];
                    key.copy_from_slice(&chunk[..32]);
                    let v: Vec<f32> = chunk[32..]
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect();
                    map.insert(key, v);
                }
            }
        }
        CachedEmbedder {
            inner,
            path,
            map: Mutex::new(map),
            misses: AtomicUsize::new(0),
        }
    }

    fn save(&self) {
        let Some(path) = &self.path else { return };
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let mut bytes = self.inner.release().as_bytes().to_vec();
        bytes.push(b'\n');
        let mut keys: Vec<&[u8; 32]> = map.keys().collect();
        keys.sort();
        for k in keys {
            bytes.extend_from_slice(k);
            for x in &map[k] {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        if let Err(e) = std::fs::write(path, bytes) {
            eprintln!("locomo_eval: cannot write {}: {e}", path.display());
        }
    }
}

impl Embedder for CachedEmbedder {
    fn release(&self) -> &str {
        self.inner.release()
    }

    fn window(&self) -> Option<usize> {
        self.inner.window()
    }

    fn passages(&self, text: &str) -> Vec<mosaic_index::embed::Span> {
        self.inner.passages(text)
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, mosaic_index::IndexError> {
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| text_key(t)).collect();
        let missing: Vec<usize> = {
            let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            (0..texts.len())
                .filter(|i| !map.contains_key(&keys[*i]))
                .collect()
        };
        if !missing.is_empty() {
            let batch: Vec<&str> = missing.iter().map(|i| texts[*i]).collect();
            let vectors = self.inner.embed_batch(&batch)?;
            self.misses.fetch_add(batch.len(), Ordering::Relaxed);
            let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            for (i, v) in missing.iter().zip(vectors) {
                map.insert(keys[*i], v);
            }
        }
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        Ok(keys
            .iter()
            .map(|k| map.get(k).cloned().unwrap_or_default())
            .collect())
    }
}

struct Variant {
    name: String,
    mode: RetrievalMode,
    config: FunnelConfig,
}

fn parse_variant(spec: &str) -> Variant {
    let mut parts = spec.splitn(3, ':');
    let name = parts.next().unwrap_or_default().to_string();
    let mode = match parts.next() {
        Some("lexical") => RetrievalMode::Lexical,
        Some("vector") => RetrievalMode::Vector,
        Some("hybrid") => RetrievalMode::Hybrid,
        other => fail(format!(
            "variant {spec}: mode {other:?} is not lexical, vector or hybrid"
        )),
    };
    let mut config =
        serde_json::to_value(FunnelConfig::default()).unwrap_or_else(|e| fail(e.to_string()));
    for kv in parts
        .next()
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let Some((k, v)) = kv.split_once('=') else {
            fail(format!("variant {spec}: {kv} is not key=value"));
        };
        let value: serde_json::Value =
            serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
        match config.get_mut(k) {
            Some(slot) => *slot = value,
            None => fail(format!("variant {spec}: FunnelConfig has no field {k}")),
        }
    }
    let config: FunnelConfig =
        serde_json::from_value(config).unwrap_or_else(|e| fail(format!("variant {spec}: {e}")));
    Variant { name, mode, config }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut positional = Vec::new();
    let mut embedder_kind = "hash".to_string();
    let mut model_dir: Option<String> = None;
    let mut cache_path: Option<String> = None;
    let mut variants: Vec<Variant> = Vec::new();
    let mut tables = false;
    let mut latency = false;
    let mut idle_ms = 0u64;
    // None: one batch per session.
    let mut batch = Some(64usize);
    let mut split: Option<bool> = None;
    let mut keep: Option<(usize, usize)> = None;
    let mut leave_out_question_turns = false;
    let mut hide_own_turns = false;
    let mut own_turns_ineligible = false;
    let mut before_question = false;
    let mut dump: Option<std::io::BufWriter<std::fs::File>> = None;
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
            "--embedding-cache" => cache_path = it.next().cloned(),
            "--variant" => variants.push(parse_variant(
                it.next()
                    .unwrap_or_else(|| fail("--variant needs a value".into())),
            )),
            "--tables" => tables = true,
            "--split" => {
                split = match it.next().map(String::as_str) {
                    Some("tuning") => Some(true),
                    Some("held-out") => Some(false),
                    Some("all") => None,
                    _ => fail("--split needs tuning, held-out or all".into()),
                }
            }
            "--latency" => latency = true,
            "--conversations" => {
                keep = Some(
                    it.next()
                        .and_then(|v| v.split_once('-'))
                        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                        .filter(|(a, b): &(usize, usize)| a <= b)
                        .unwrap_or_else(|| {
                            fail("--conversations needs FIRST-LAST (0-based)".into())
                        }),
                )
            }
            "--leave-out-question-turns" => leave_out_question_turns = true,
            "--hide-own-turns" => hide_own_turns = true,
            "--own-turns-ineligible" => own_turns_ineligible = true,
            "--before-question" => before_question = true,
            "--dump" => {
                let path = it
                    .next()
                    .unwrap_or_else(|| fail("--dump needs a file".into()));
                let file =
                    std::fs::File::create(path).unwrap_or_else(|e| fail(format!("{path}: {e}")));
                dump = Some(std::io::BufWriter::new(file));
            }
            "--idle-ms" => {
                idle_ms = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|ms| *ms <= 60_000)
                    .unwrap_or_else(|| fail("--idle-ms needs milliseconds (0 to 60000)".into()))
            }
            "--batch" => {
                batch = match it.next().map(String::as_str) {
                    Some("session") => None,
                    value => Some(
                        value
                            .and_then(|v| v.parse().ok())
                            .filter(|b: &usize| *b > 0)
                            .unwrap_or_else(|| {
                                fail("--batch needs a positive integer or `session`".into())
                            }),
                    ),
                }
            }
            _ => positional.push(a.clone()),
        }
    }
    if positional.len() != 2 {
        fail("usage: locomo_eval CONVERSATIONS.jsonl QUESTIONS.jsonl [--embedder hash|minilm|minilm-int8 --model-dir DIR] [--embedding-cache FILE] [--variant NAME:MODE[:key=value,...]]... [--split tuning|held-out|all] [--tables] [--latency [--idle-ms N]] [--batch N|session] [--conversations FIRST-LAST] [--leave-out-question-turns | --hide-own-turns [--own-turns-ineligible] | --before-question] [--dump FILE]".into());
    }
    if idle_ms > 0 && !latency {
        fail("--idle-ms applies to --latency's questions: add --latency".into());
    }
    if variants.is_empty() {
        variants = ["lexical", "vector", "hybrid"]
            .iter()
            .map(|m| parse_variant(&format!("{m} (default):{m}")))
            .collect();
        tables = true;
    }
    let mut conversations: Vec<Conversation> = read_jsonl(&positional[0]);
    let mut questions: Vec<Question> = read_jsonl(&positional[1]);
    // `--conversations FIRST-LAST`: only those conversations (file order,
    // both ends included) and their questions, as `mosaic eval`.
    if let Some((first, last)) = keep {
        conversations = conversations
            .into_iter()
            .skip(first)
            .take(last - first + 1)
            .collect();
        let kept: BTreeSet<&str> = conversations
            .iter()
            .map(|c| c.conversation_id.as_str())
            .collect();
        questions.retain(|q| kept.contains(q.conversation_id.as_str()));
    }
    // A question asked inside the history (RealMem): its own turn and its
    // reference reply are not memories to recall.
    if leave_out_question_turns && hide_own_turns {
        fail("--leave-out-question-turns and --hide-own-turns exclude each other".into());
    }
    if own_turns_ineligible && !hide_own_turns {
        fail("--own-turns-ineligible applies to --hide-own-turns: add it".into());
    }
    if before_question && (leave_out_question_turns || hide_own_turns) {
        fail("--before-question excludes --leave-out-question-turns and --hide-own-turns".into());
    }
    let left_out: BTreeSet<(String, String)> = if leave_out_question_turns {
        questions
            .iter()
            .flat_map(|q| {
                [&q.query_turn_id, &q.answer_turn_id]
                    .into_iter()
                    .flatten()
                    .map(|t| (q.conversation_id.clone(), t.clone()))
            })
            .collect()
    } else {
        BTreeSet::new()
    };
    let embedder = Arc::new(CachedEmbedder::open(
        make_embedder(&embedder_kind, model_dir.as_deref()),
        cache_path.as_deref(),
    ));
    let policy = sha256_hex(b"locomo evaluation policy");
    let tenant = "tenant-eval";
    let tuning: BTreeSet<String> = conversations
        .iter()
        .take(conversations.len() / 2)
        .map(|c| c.conversation_id.clone())
        .collect();

    // Ingest: one principal per conversation, one record per turn.
    let mut retriever = Retriever::new(
        embedder.clone(),
        AnnConfig::default(),
        FunnelConfig::default(),
    );
    let mut eligible_by_conv: BTreeMap<String, SealedEligibleSet> = BTreeMap::new();
    // Each record's place in its conversation's time (`--before-question`).
    let mut recorded_at: HashMap<String, u64> = HashMap::new();
    let mut turn_ids: BTreeSet<String> = BTreeSet::new();
    let started = Instant::now();
    let mut n_turns = 0usize;
    let mut embed_secs = 0.0;
    for conv in &conversations {
        let mut messages = Vec::new();
        let mut session_ends = Vec::new();
        let mut position = 0u64;
        for (s_idx, session) in conv.sessions.iter().enumerate() {
            for turn in &session.turns {
                if left_out.contains(&(conv.conversation_id.clone(), turn.turn_id.clone())) {
                    continue;
                }
                position += 1;
                let record_id = format!("{}:{}", conv.conversation_id, turn.turn_id);
                let text = format!("[{}] {}: {}", session.date_time, turn.speaker, turn.text);
                // Time order: session, then turn (sessions are dated;
                // turns inside a session keep their order).
                let at = (s_idx as u64 + 1) * 1_000_000 + position;
                recorded_at.insert(record_id.clone(), at);
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
                    created_at_unix_ms: at,
                    claim_keys: Vec::new(),
                    text,
                });
                turn_ids.insert(record_id);
            }
            session_ends.push(messages.len());
        }
        n_turns += messages.len();
        let chunks: Vec<&[PublishMessage]> = match batch {
            Some(batch) => messages.chunks(batch).collect(),
            None => session_ends
                .iter()
                .scan(0, |start, &end| {
                    let chunk = &messages[*start..end];
                    *start = end;
                    Some(chunk)
                })
                .filter(|chunk| !chunk.is_empty())
                .collect(),
        };
        for chunk in chunks {
            for r in retriever.lexical.publish_batch(chunk) {
                r.unwrap_or_else(|e| fail(e.to_string()));
            }
            let t = Instant::now();
            // Embed first (timed apart from the graph insertions).
            let texts: Vec<&str> = chunk.iter().map(|m| m.text.as_str()).collect();
            embedder
                .embed_batch(&texts)
                .unwrap_or_else(|e| fail(e.to_string()));
            embed_secs += t.elapsed().as_secs_f64();
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
            SealedEligibleSet::seal(EligibleSet {
                scope_commitments: Vec::new(),
                read_context_sha256: sha256_hex(conv.conversation_id.as_bytes()),
                entries,
            })
            .unwrap_or_else(|e| panic!("eligible set digest: {e}")),
        );
    }
    let misses = embedder.misses.load(Ordering::Relaxed);
    eprintln!(
        "ingested {n_turns} turns of {} conversations in {:.1}s with {} (embedding {:.1}s, {} texts embedded, {} from the cache)",
        conversations.len(),
        started.elapsed().as_secs_f64(),
        embedder.release(),
        embed_secs,
        misses,
        n_turns.saturating_sub(misses),
    );
    embedder.save();

    // Questions (category 5 adversarial skipped), flaws reported.
    let mut no_evidence = Vec::new();
    let mut unknown_evidence = Vec::new();
    let mut selected: Vec<&Question> = Vec::new();
    for q in questions.iter() {
        match category_key(&q.category) {
            None => fail(format!(
                "{}: category {} is not a number or a name",
                q.question_id, q.category
            )),
            Some((5, _)) => continue,
            Some(_) => {}
        }
        if split.is_some_and(|t| t != tuning.contains(&q.conversation_id)) {
            continue;
        }
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
    embedder.save();

    println!("embedder: {}", embedder.release());
    println!(
        "questions scored: {} (every category but LoCoMo's adversarial 5)",
        selected.len()
    );
    println!(
        "flawed, reported: {} with empty evidence (excluded: {}); {} evidence ids naming no turn (kept, count as misses: {})",
        no_evidence.len(),
        no_evidence.join(", "),
        unknown_evidence.len(),
        unknown_evidence.join(", ")
    );
    println!(
        "tuning split: {}; held-out split: the other {}",
        tuning.iter().cloned().collect::<Vec<_>>().join(", "),
        conversations.len() - tuning.len()
    );
    // A question's own eligible set, when it ranks over less than its
    // conversation: `--own-turns-ineligible` takes its own two turns out
    // (they then lend no terms to their neighbours' turn windows either),
    // `--before-question` keeps only the turns recorded before its own.
    let narrowed: Vec<Option<SealedEligibleSet>> = selected
        .iter()
        .map(|q| {
            let own: Vec<String> = [&q.query_turn_id, &q.answer_turn_id]
                .into_iter()
                .flatten()
                .map(|t| format!("{}:{t}", q.conversation_id))
                .collect();
            let asked_at = own.first().and_then(|id| recorded_at.get(id)).copied();
            let keep = |id: &str| {
                if own_turns_ineligible {
                    !own.iter().any(|o| o == id)
                } else if before_question {
                    asked_at.is_none_or(|t| recorded_at.get(id).is_some_and(|r| *r < t))
                } else {
                    true
                }
            };
            if !(own_turns_ineligible || before_question) {
                return None;
            }
            let all = eligible_by_conv.get(&q.conversation_id)?;
            let entries: Vec<EligibleEntry> = all
                .entries()
                .iter()
                .filter(|e| keep(e.record_id))
                .map(|e| e.to_owned_entry())
                .collect();
            Some(
                SealedEligibleSet::seal(EligibleSet {
                    read_context_sha256: sha256_hex(q.question_id.as_bytes()),
                    entries,
                    scope_commitments: Vec::new(),
                })
                .unwrap_or_else(|e| fail(format!("eligible set digest: {e}"))),
            )
        })
        .collect();
    let mut summary = Vec::new();
    let mut table = Vec::new();
    for variant in &variants {
        retriever.set_config(variant.config.clone());
        // (1.., a category), (253, all), (254, tuning split), (254, held-out split).
        let mut by_cat: BTreeMap<(u8, String), (MetricSums, usize)> = BTreeMap::new();
        let started = Instant::now();
        for ((q, qv), narrowed) in selected.iter().zip(&query_vectors).zip(&narrowed) {
            let Some(eligible) = narrowed
                .as_ref()
                .or_else(|| eligible_by_conv.get(&q.conversation_id))
            else {
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
                // Two more when the question's own turns are taken out;
                // `--dump` keeps the first 50 (the first ten are the same).
                max_results: usize::from(hide_own_turns) * 2 + if dump.is_some() { 50 } else { 10 },
                mode: variant.mode,
            };
            let recall = retriever
                .recall_embedded(&query, Some(qv))
                .unwrap_or_else(|e| fail(e.to_string()));
            let evidence: BTreeSet<String> = q
                .evidence
                .iter()
                .map(|e| format!("{}:{e}", q.conversation_id))
                .collect();
            let own: Vec<String> = if hide_own_turns {
                [&q.query_turn_id, &q.answer_turn_id]
                    .into_iter()
                    .flatten()
                    .map(|t| format!("{}:{t}", q.conversation_id))
                    .collect()
            } else {
                Vec::new()
            };
            let hits: Vec<bool> = recall
                .record_ids()
                .iter()
                .filter(|id| !own.iter().any(|o| o == *id))
                .take(10)
                .map(|id| evidence.contains(*id))
                .collect();
            if let Some(out) = dump.as_mut() {
                use std::io::Write;
                let ranked: Vec<serde_json::Value> = recall
                    .receipt
                    .results
                    .iter()
                    .zip(&recall.explanations)
                    .filter(|(r, _)| !own.contains(&r.record_id))
                    .map(|(r, e)| {
                        serde_json::json!([r.record_id, r.score, e.lexical_rank, e.vector_rank])
                    })
                    .collect();
                let line = serde_json::json!({
                    "variant": variant.name,
                    "question_id": q.question_id,
                    "category": q.category,
                    "evidence": evidence,
                    "ranked": ranked,
                });
                writeln!(out, "{line}").unwrap_or_else(|e| fail(e.to_string()));
            }
            let score = score_ranking(&hits, evidence.len());
            let any = usize::from(hits.iter().take(10).any(|h| *h));
            let split = if tuning.contains(&q.conversation_id) {
                "tuning"
            } else {
                "held-out"
            };
            let category = category_key(&q.category).unwrap_or_default();
            for cat in [category, (253, "all".into()), (254, split.into())] {
                let (sums, hit) = by_cat.entry(cat).or_default();
                sums.add(&score);
                *hit += any;
            }
        }
        let per_query_ms = started.elapsed().as_secs_f64() * 1000.0 / selected.len().max(1) as f64;
        let r10 = |c: (u8, &str)| {
            by_cat
                .get(&(c.0, c.1.to_owned()))
                .map_or(0.0, |s| s.0.mean().recall_at_10)
        };
        let categories: Vec<&(u8, String)> = by_cat.keys().filter(|c| c.0 < 253).collect();
        if summary.is_empty() {
            let names: Vec<&str> = categories.iter().map(|c| c.1.as_str()).collect();
            summary.push(format!(
                "| variant | R@10 tuning | R@10 held-out | R@10 all | {} | ms/query |",
                names.join(" | ")
            ));
            summary.push(format!(
                "|---|---:|---:|---:|{}---:|",
                "---:|".repeat(names.len())
            ));
        }
        let per_category: Vec<String> = categories
            .iter()
            .map(|c| format!("{:.3}", r10((c.0, &c.1))))
            .collect();
        summary.push(format!(
            "| {} | {:.3} | {:.3} | {:.3} | {} | {per_query_ms:.2} |",
            variant.name,
            r10((254, "tuning")),
            r10((254, "held-out")),
            r10((253, "all")),
            per_category.join(" | ")
        ));
        for ((c, label), (s, any)) in by_cat.iter().filter(|(c, _)| c.0 != 254) {
            let label = if *c == 253 { "all" } else { label.as_str() };
            table.push(format!(
                "{} {:.3} |",
                s.table_row(&variant.name, label),
                *any as f64 / s.n.max(1) as f64
            ));
        }
    }
    println!();
    for line in summary {
        println!("{line}");
    }
    if let Some(mut out) = dump.take() {
        use std::io::Write;
        out.flush().unwrap_or_else(|e| fail(format!("--dump: {e}")));
    }
    if tables {
        println!();
        println!(
            "| variant | category | n | recall@1 | recall@5 | recall@10 | nDCG@10 | any-hit@10 |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|");
        for line in table {
            println!("{line}");
        }
    }
    if latency && !selected.is_empty() {
        retriever.set_config(FunnelConfig::default());
        let (mut embed_ms, mut recall_ms, mut total_ms) = (Vec::new(), Vec::new(), Vec::new());
        for q in &selected {
            let Some(eligible) = eligible_by_conv.get(&q.conversation_id) else {
                fail(format!("{} names an unknown conversation", q.question_id));
            };
            let query = RecallQuery {
                tenant_id: tenant,
                policy_sha256: &policy,
                selector_release: "locomo-eval-latency",
                read_subject: &q.question_id,
                revocation_generation: 0,
                text: &q.question,
                claim_keys: &[],
                eligible,
                max_results: 10,
                mode: RetrievalMode::Hybrid,
            };
            if idle_ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(idle_ms));
            }
            let t0 = Instant::now();
            let v = embedder
                .inner
                .embed(&q.question)
                .unwrap_or_else(|e| fail(e.to_string()));
            let t1 = Instant::now();
            let recall = retriever
                .recall_embedded(&query, Some(&v))
                .unwrap_or_else(|e| fail(e.to_string()));
            let t2 = Instant::now();
            if recall.cache_hit {
                fail("latency run hit the result cache".into());
            }
            embed_ms.push((t1 - t0).as_secs_f64() * 1000.0);
            recall_ms.push((t2 - t1).as_secs_f64() * 1000.0);
            total_ms.push((t2 - t0).as_secs_f64() * 1000.0);
        }
        println!();
        println!(
            "| end-to-end search, one question at a time ({} questions) | p50 ms | p95 ms | p99 ms |",
            total_ms.len()
        );
        println!("|---|---:|---:|---:|");
        for (name, mut v) in [
            ("query embedding", embed_ms),
            ("funnel (hybrid, default configuration)", recall_ms),
            ("total", total_ms),
        ] {
            v.sort_by(f64::total_cmp);
            let p = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
            println!(
                "| {name} | {:.2} | {:.2} | {:.2} |",
                p(0.5),
                p(0.95),
                p(0.99)
            );
        }
    }
}
