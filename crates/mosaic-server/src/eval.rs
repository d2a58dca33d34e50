//! `mosaic eval`: evidence-retrieval quality of the real product path on a
//! conversational dataset (the normalized LoCoMo form: a conversations
//! JSONL file and a questions JSONL file).
//!
//! A fresh embedded service runs in a temporary data directory. Each
//! conversation is one principal of one tenant; each turn is proposed as an
//! episodic memory of that principal whose one source is the turn itself
//! (`[session date] speaker: text`), judged by the server's built-in
//! verbatim verifier, decided by the gate in the store's write transaction
//! and published to the indexes through the outbox. Each question is then
//! asked through the service's recall path with the key of its own
//! conversation's principal, so it can only see that conversation.
//!
//! A question's category is a number or a string (`2`, `"preference"`).
//! Which categories are scored is an option ([`CategoryFilter`]): by
//! default every category is, except the number 5 (LoCoMo's adversarial
//! questions, whose evidence is a turn that does not answer them).
//!
//! Reported per retrieval mode and category: evidence recall@1/5/10 (the
//! fraction of a question's evidence turns among the first k recalled),
//! any-hit@10 (at least one evidence turn among the first 10) and nDCG@10;
//! and the latency of the product path: each turn's proposal (gate, store
//! transaction, index publication, embedding included) and each question's
//! recall per mode (query embedding included). Questions with empty
//! evidence are excluded and listed; evidence ids that name no turn are
//! kept (they count as misses) and listed. Memory ids and contents are
//! never printed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::MemoryPurpose;
use mosaic_harness::{MemoryKind, MemorySource, MemorySubject};
use mosaic_index::RetrievalMode;
use mosaic_index::eval_metrics::{MetricSums, score_ranking};
use mosaic_server::ServerConfig;
use mosaic_server::Service;
use mosaic_server::api::{
    CreateKeyRequest, CreateTenantRequest, PolicyRequest, ProposeRequest, RecallRequest,
};
use mosaic_server::auth::Credential;
use mosaic_server::service::ADMIN_KEY_FILE;
use serde::Deserialize;
use serde_json::{Value, json};

const TENANT: &str = "eval";
const DAY_MS: u64 = 86_400_000;

/// What `mosaic eval` was asked to do.
pub struct EvalOptions {
    /// Conversations JSONL file.
    pub conversations: PathBuf,
    /// Questions JSONL file.
    pub questions: PathBuf,
    /// Retrieval modes to score, in order.
    pub modes: Vec<RetrievalMode>,
    /// Most memories recalled per question.
    pub k: usize,
    /// JSON lines instead of a table.
    pub json: bool,
    /// Which categories are scored.
    pub categories: CategoryFilter,
}

/// A question's category: a number (LoCoMo's 1-5) or a name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// A non-negative integer.
    Number(u64),
    /// A non-empty name.
    Name(String),
}

impl Category {
    /// Reads a category from its JSON value: a non-negative integer or a
    /// non-empty string (trimmed).
    fn from_json(value: &Value) -> std::result::Result<Category, String> {
        match value {
            Value::Number(n) => n
                .as_u64()
                .map(Category::Number)
                .ok_or_else(|| format!("category {n} is not a non-negative integer or a string")),
            Value::String(s) if !s.trim().is_empty() => Ok(Category::Name(s.trim().to_owned())),
            Value::String(_) => Err("category is an empty string".to_owned()),
            other => Err(format!(
                "category {other} is not a non-negative integer or a string"
            )),
        }
    }

    /// As written on the command line and in the tables: `2`, `preference`.
    fn key(&self) -> String {
        match self {
            Category::Number(n) => n.to_string(),
            Category::Name(s) => s.clone(),
        }
    }

    /// As printed in the JSON lines: a number stays a number.
    fn json(&self) -> Value {
        match self {
            Category::Number(n) => json!(n),
            Category::Name(s) => json!(s),
        }
    }
}

/// Which categories `mosaic eval` scores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CategoryFilter {
    /// Score only these (by [`Category::key`]); `None` scores all.
    pub only: Option<Vec<String>>,
    /// Skip these; `None` skips the number 5 (LoCoMo's adversarial
    /// category) and nothing else.
    pub skip: Option<Vec<String>>,
}

impl CategoryFilter {
    /// Parses the `--categories` and `--skip-categories` values
    /// (comma-separated category numbers or names; `--skip-categories ""`
    /// skips nothing).
    pub fn parse(only: Option<&str>, skip: Option<&str>) -> Result<CategoryFilter> {
        let list = |spec: &str| -> Vec<String> {
            spec.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let only = only.map(list);
        if only.as_ref().is_some_and(Vec::is_empty) {
            bail!("--categories names no category");
        }
        Ok(CategoryFilter {
            only,
            skip: skip.map(list),
        })
    }

    fn scores(&self, category: &Category) -> bool {
        let key = category.key();
        let listed = |names: &[String]| names.contains(&key);
        if self.only.as_deref().is_some_and(|only| !listed(only)) {
            return false;
        }
        match &self.skip {
            Some(skip) => !listed(skip),
            None => *category != Category::Number(5),
        }
    }
}

#[derive(Deserialize)]
struct Conversation {
    conversation_id: String,
    sessions: Vec<Session>,
}

#[derive(Deserialize)]
struct Session {
    #[serde(default)]
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
    category: Value,
    #[serde(default)]
    category_name: Option<String>,
    evidence: Vec<String>,
}

/// Parses a `--modes` value such as `lexical,vector,hybrid`.
pub fn parse_modes(spec: &str) -> Result<Vec<RetrievalMode>> {
    let mut modes = Vec::new();
    for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mode = match name {
            "lexical" => RetrievalMode::Lexical,
            "vector" => RetrievalMode::Vector,
            "hybrid" => RetrievalMode::Hybrid,
            other => bail!("--modes: {other:?} is not one of lexical, vector, hybrid"),
        };
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    if modes.is_empty() {
        bail!("--modes names no mode (lexical, vector, hybrid)");
    }
    Ok(modes)
}

fn mode_name(mode: RetrievalMode) -> &'static str {
    match mode {
        RetrievalMode::Lexical => "lexical",
        RetrievalMode::Vector => "vector",
        RetrievalMode::Hybrid => "hybrid",
    }
}

/// Reads a JSON lines file; blank lines are skipped, and an error names the
/// file and the line.
fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path, what: &str) -> Result<Vec<(usize, T)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str(line)
            .map_err(|e| anyhow!("{}: line {}: not a {what}: {e}", path.display(), index + 1))?;
        out.push((index + 1, value));
    }
    Ok(out)
}

fn progress(len: usize, hidden: bool, label: &str) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} {elapsed}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(label.to_owned());
    bar
}

fn print_line(kind: &str, data: &Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", json!({"type": kind, "data": data}));
}

fn service_error(err: mosaic_server::ServiceError) -> anyhow::Error {
    anyhow!("{err}")
}

/// One conversation as ingested: its principal's credential.
struct Ingested {
    credential: Credential,
}

/// Runs the evaluation. `config` carries the embedder settings; its data
/// directory is replaced by a temporary one.
pub fn run(mut config: ServerConfig, options: &EvalOptions) -> Result<ExitCode> {
    let conversations: Vec<(usize, Conversation)> =
        read_jsonl(&options.conversations, "conversation")?;
    let questions: Vec<(usize, Question)> = read_jsonl(&options.questions, "question")?;
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (index, (line, conversation)) in conversations.iter().enumerate() {
        if by_id
            .insert(conversation.conversation_id.as_str(), index)
            .is_some()
        {
            bail!(
                "{}: line {line}: conversation {:?} appears twice",
                options.conversations.display(),
                conversation.conversation_id
            );
        }
    }
    let mut categories: Vec<Category> = Vec::with_capacity(questions.len());
    // A category's display name: the first non-empty `category_name` of
    // its questions.
    let mut category_names: BTreeMap<Category, String> = BTreeMap::new();
    for (line, question) in &questions {
        let category = Category::from_json(&question.category).map_err(|e| {
            anyhow!(
                "{}: line {line}: question {:?}: {e}",
                options.questions.display(),
                question.question_id
            )
        })?;
        if let Some(name) = question
            .category_name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            category_names
                .entry(category.clone())
                .or_insert_with(|| name.to_owned());
        }
        categories.push(category);
        if !by_id.contains_key(question.conversation_id.as_str()) {
            bail!(
                "{}: line {line}: question {:?} names conversation {:?}, which is not in {}",
                options.questions.display(),
                question.question_id,
                question.conversation_id,
                options.conversations.display()
            );
        }
    }
    if let Some(only) = &options.categories.only {
        for name in only {
            if !categories.iter().any(|c| c.key() == *name) {
                bail!(
                    "--categories: no question of {} has category {name:?}",
                    options.questions.display()
                );
            }
        }
    }
    let label = |category: &Category| -> String {
        match (category, category_names.get(category)) {
            (Category::Number(n), Some(name)) => format!("{n} {name}"),
            (c, _) => c.key(),
        }
    };
    let hidden = options.json || !std::io::stderr().is_terminal();

    // A fresh service in a temporary directory; the model directory keeps
    // its configured (or default) place.
    if config.model_dir.is_none() {
        config.model_dir = Some(mosaic_server::embedder::model_dir(&config));
    }
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    config.data_dir = dir.path().join("data");
    config.postgres = None;
    let (service, report) = Service::open(config.clone()).map_err(service_error)?;
    let admin_key = std::fs::read_to_string(config.data_dir.join(ADMIN_KEY_FILE))
        .context("cannot read the temporary service's admin key")?;
    let admin = service
        .authenticate(Some(admin_key.trim()))
        .map_err(service_error)?;
    service
        .create_tenant(
            &admin,
            &CreateTenantRequest {
                tenant_id: TENANT.into(),
                policy: Some(PolicyRequest {
                    allowed_kinds: None,
                    max_ttl_ms: Some(3650 * DAY_MS),
                    require_consent_for_principal_semantic: None,
                    minimum_procedure_eval_cases: None,
                    claim_updates: None,
                    write_guards: None,
                }),
            },
        )
        .map_err(service_error)?;

    // Ingest: every turn through the gate.
    let n_turns: usize = conversations
        .iter()
        .map(|(_, c)| c.sessions.iter().map(|s| s.turns.len()).sum::<usize>())
        .sum();
    let bar = progress(n_turns, hidden, "ingest");
    let mut ingested = Vec::with_capacity(conversations.len());
    // (conversation index, turn id) -> record id; and back.
    let mut record_of_turn: HashMap<(usize, String), String> = HashMap::new();
    let mut turn_of_record: HashMap<String, (usize, String)> = HashMap::new();
    let mut rejected_turns: Vec<String> = Vec::new();
    let mut ingest_ms: Vec<f64> = Vec::with_capacity(n_turns);
    let ingest_started = Instant::now();
    for (index, (_, conversation)) in conversations.iter().enumerate() {
        let principal = format!("conversation-{}", index + 1);
        let key = service
            .create_key(
                &admin,
                &CreateKeyRequest {
                    tenant_id: TENANT.into(),
                    principal_id: principal.clone(),
                    grant: None,
                },
            )
            .map_err(service_error)?;
        let credential = service
            .authenticate(Some(&key.key))
            .map_err(service_error)?;
        for session in &conversation.sessions {
            for turn in &session.turns {
                let source_text =
                    format!("[{}] {}: {}", session.date_time, turn.speaker, turn.text);
                let request = turn_proposal(&principal, &turn.turn_id, &source_text);
                let started = Instant::now();
                let proposed = service.propose(&credential, &request);
                ingest_ms.push(started.elapsed().as_secs_f64() * 1e3);
                let response = proposed.map_err(|e| {
                    anyhow!(
                        "conversation {:?} turn {:?}: {e}",
                        conversation.conversation_id,
                        turn.turn_id
                    )
                })?;
                if response.decision == "accepted" {
                    record_of_turn
                        .insert((index, turn.turn_id.clone()), response.record_id.clone());
                    turn_of_record.insert(response.record_id, (index, turn.turn_id.clone()));
                } else {
                    rejected_turns
                        .push(format!("{} {}", conversation.conversation_id, turn.turn_id));
                }
                bar.inc(1);
            }
        }
        ingested.push(Ingested { credential });
    }
    let ingest_secs = ingest_started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    // Questions: categories filtered, empty evidence excluded, evidence
    // ids naming no turn kept as misses.
    let mut skipped: BTreeMap<Category, usize> = BTreeMap::new();
    let mut empty_evidence: Vec<String> = Vec::new();
    let mut unknown_evidence: Vec<String> = Vec::new();
    let mut scored: Vec<(usize, &Question, &Category)> = Vec::new();
    let mut scored_categories: BTreeSet<&Category> = BTreeSet::new();
    for ((_, question), category) in questions.iter().zip(&categories) {
        if !options.categories.scores(category) {
            *skipped.entry(category.clone()).or_default() += 1;
            continue;
        }
        if question.evidence.is_empty() {
            empty_evidence.push(question.question_id.clone());
            continue;
        }
        let Some(&index) = by_id.get(question.conversation_id.as_str()) else {
            continue;
        };
        for evidence in &question.evidence {
            if !record_of_turn.contains_key(&(index, evidence.clone())) {
                unknown_evidence.push(format!("{} {evidence}", question.question_id));
            }
        }
        scored_categories.insert(category);
        scored.push((index, question, category));
    }
    let n_skipped: usize = skipped.values().sum();
    let skipped_labels: Vec<String> = skipped.keys().map(&label).collect();
    let summary = json!({
        "conversations": conversations.len(),
        "turns": n_turns,
        "turns_rejected": rejected_turns,
        "embedder": report.embedder.identity.release,
        "k": options.k,
        "questions": questions.len(),
        "questions_scored": scored.len(),
        "categories_scored": scored_categories.iter().map(|c| c.json()).collect::<Vec<_>>(),
        "categories_skipped": skipped.keys().map(Category::json).collect::<Vec<_>>(),
        "questions_skipped_by_category": n_skipped,
        "empty_evidence_excluded": empty_evidence,
        "unknown_evidence_kept_as_misses": unknown_evidence,
    });
    if options.json {
        print_line("eval_dataset", &summary);
    } else {
        println!(
            "mosaic eval: {} conversations, {n_turns} turns ingested through the gate ({} rejected{}), embedder {}",
            conversations.len(),
            rejected_turns.len(),
            if rejected_turns.is_empty() {
                String::new()
            } else {
                format!(": {}", rejected_turns.join(", "))
            },
            report.embedder.identity.release
        );
        let scored_labels: Vec<String> = scored_categories.iter().map(|c| label(c)).collect();
        println!(
            "questions: {} scored (categories {}), {n_skipped} skipped (categories {}); {} with empty evidence excluded{}; {} evidence ids naming no turn kept as misses{}",
            scored.len(),
            scored_labels.join(", "),
            if skipped_labels.is_empty() {
                "none".to_owned()
            } else {
                skipped_labels.join(", ")
            },
            empty_evidence.len(),
            list_suffix(&empty_evidence),
            unknown_evidence.len(),
            list_suffix(&unknown_evidence),
        );
    }
    if scored.is_empty() {
        if options.json {
            print_line("eval_empty", &json!({"questions_scored": 0}));
        } else {
            println!("no question to score");
        }
        return Ok(ExitCode::from(1));
    }

    let bar = progress(scored.len() * options.modes.len(), hidden, "questions");
    // `None` stands for all categories together.
    let mut rows: Vec<(RetrievalMode, Option<Category>, MetricSums, usize)> = Vec::new();
    let mut recall_ms: Vec<(RetrievalMode, Vec<f64>)> = Vec::new();
    for &mode in &options.modes {
        let mut by_category: BTreeMap<Option<Category>, (MetricSums, usize)> = BTreeMap::new();
        let mut times = Vec::with_capacity(scored.len());
        for (index, question, category) in &scored {
            let Some(conversation) = ingested.get(*index) else {
                bail!("conversation {index} was not ingested");
            };
            let started = Instant::now();
            let recall = service
                .recall(
                    &conversation.credential,
                    &RecallRequest {
                        kinds: Some(vec![MemoryKind::Episodic]),
                        max_records: Some(options.k),
                        query: Some(question.question.clone()),
                        mode: Some(mode),
                        ..RecallRequest::default()
                    },
                )
                .map_err(|e| anyhow!("question {:?}: {e}", question.question_id))?;
            times.push(started.elapsed().as_secs_f64() * 1e3);
            // Best first: the relevance ranking, restricted to what the
            // selector and the context handoff let through.
            let selected: BTreeSet<&str> = recall
                .selected_record_ids
                .iter()
                .map(String::as_str)
                .collect();
            let ranked: Vec<&str> = recall
                .relevance_receipt
                .as_ref()
                .map(|r| {
                    r.results
                        .iter()
                        .map(|x| x.record_id.as_str())
                        .filter(|id| selected.contains(id))
                        .collect()
                })
                .unwrap_or_default();
            let evidence: BTreeSet<&str> = question.evidence.iter().map(String::as_str).collect();
            let hits: Vec<bool> = ranked
                .iter()
                .map(|id| {
                    turn_of_record
                        .get(*id)
                        .is_some_and(|(i, turn)| i == index && evidence.contains(turn.as_str()))
                })
                .collect();
            let figures = score_ranking(&hits, evidence.len());
            let any_hit = usize::from(hits.iter().take(10).any(|h| *h));
            for key in [Some((*category).clone()), None] {
                let (sums, any) = by_category.entry(key).or_default();
                sums.add(&figures);
                *any += any_hit;
            }
            bar.inc(1);
        }
        recall_ms.push((mode, times));
        // Categories in order (numbers, then names), then all.
        let all = by_category.remove(&None);
        for (category, (sums, any)) in by_category {
            rows.push((mode, category, sums, any));
        }
        if let Some((sums, any)) = all {
            rows.push((mode, None, sums, any));
        }
    }
    bar.finish_and_clear();
    if !options.json {
        println!();
        println!(
            "| mode | category | n | recall@1 | recall@5 | recall@10 | nDCG@10 | any-hit@10 |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|");
    }
    for (mode, category, sums, any) in &rows {
        let any_hit = *any as f64 / sums.n.max(1) as f64;
        if options.json {
            let m = sums.mean();
            print_line(
                "eval",
                &json!({
                    "mode": mode_name(*mode),
                    "category": category.as_ref().map_or(json!(0), Category::json),
                    "category_name": category.as_ref().map_or_else(
                        || "all".to_owned(),
                        |c| category_names.get(c).cloned().unwrap_or_else(|| c.key()),
                    ),
                    "n": sums.n,
                    "recall_at_1": round(m.recall_at_1),
                    "recall_at_5": round(m.recall_at_5),
                    "recall_at_10": round(m.recall_at_10),
                    "any_hit_at_10": round(any_hit),
                    "ndcg_at_10": round(m.ndcg_at_10),
                }),
            );
        } else {
            let name = category.as_ref().map_or_else(|| "all".to_owned(), &label);
            println!(
                "{} {:.3} |",
                sums.table_row(mode_name(*mode), &name),
                any_hit
            );
        }
    }

    // Latency of the product path: proposals, then recalls per mode.
    let mut latency = vec![(
        "ingest".to_owned(),
        Value::Null,
        ingest_ms,
        Some(n_turns as f64 / ingest_secs.max(1e-9)),
    )];
    for (mode, times) in recall_ms {
        latency.push(("recall".to_owned(), json!(mode_name(mode)), times, None));
    }
    if !options.json {
        println!();
        println!("| latency | n | mean ms | p50 ms | p95 ms | p99 ms | max ms |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
    }
    for (stage, mode, mut times, rate) in latency {
        times.sort_by(f64::total_cmp);
        let n = times.len();
        let mean = times.iter().sum::<f64>() / n.max(1) as f64;
        let p = |q: f64| percentile(&times, q);
        if options.json {
            print_line(
                "eval_latency",
                &json!({
                    "stage": stage,
                    "mode": mode,
                    "n": n,
                    "mean_ms": round(mean),
                    "p50_ms": round(p(0.50)),
                    "p95_ms": round(p(0.95)),
                    "p99_ms": round(p(0.99)),
                    "max_ms": round(p(1.0)),
                    "per_second": rate.map(round),
                }),
            );
        } else {
            let what = match (mode.as_str(), rate) {
                (Some("lexical"), _) => "recall, lexical".to_owned(),
                (Some(mode), _) => format!("recall, {mode} (query embedding included)"),
                (None, Some(rate)) => {
                    format!("ingest, one proposal a turn ({rate:.1} turns/s)")
                }
                (None, None) => stage,
            };
            println!(
                "| {what} | {n} | {mean:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                p(0.50),
                p(0.95),
                p(0.99),
                p(1.0)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The `q` quantile (nearest rank) of sorted figures; 0 for none.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn list_suffix(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(" ({})", items.join(", "))
    }
}

/// Six decimals: stable JSON figures.
fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// An episodic memory of `principal` whose one source is the turn itself,
/// so the server's verbatim verifier supports it.
fn turn_proposal(principal: &str, turn_id: &str, text: &str) -> ProposeRequest {
    let source = MemorySource {
        source_id: format!(
            "turn-{}",
            sha256_hex(turn_id.as_bytes()).get(..16).unwrap_or("")
        ),
        content_sha256: sha256_hex(text.as_bytes()),
        provenance_sha256: sha256_hex(format!("mosaic-eval/provenance/{principal}").as_bytes()),
        locator_sha256: sha256_hex(format!("mosaic-eval/locator/{principal}/{turn_id}").as_bytes()),
    };
    ProposeRequest {
        content: text.to_owned(),
        kind: MemoryKind::Episodic,
        purpose: MemoryPurpose::Personalization,
        subject: MemorySubject::Principal {
            principal_id: principal.to_owned(),
        },
        source_texts: BTreeMap::from([(source.source_id.clone(), text.to_owned())]),
        sources: vec![source],
        judgments: Vec::new(),
        adjudications: Vec::new(),
        conflicts: Vec::new(),
        procedure_evaluation: None,
        consent_receipt_sha256: None,
        claims: Vec::new(),
        summary: None,
        cites: Vec::new(),
        derived_from: Vec::new(),
        supersedes_record_id: None,
        expected_line_generation: None,
        record_id: None,
        proposal_id: None,
        ttl_ms: Some(3650 * DAY_MS),
        token_count: None,
        token_counter_release: None,
        provenance_sha256: None,
        writer_release: Some("mosaic-eval-v1".into()),
        tenant_id: None,
        principal_id: None,
        metadata: None,
        namespace: None,
        key: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_modes() {
        assert!(
            parse_modes("lexical,hybrid")
                .is_ok_and(|m| m == vec![RetrievalMode::Lexical, RetrievalMode::Hybrid])
        );
        assert!(parse_modes("bm25").is_err());
        assert!(parse_modes(",").is_err());
    }

    #[test]
    fn categories_are_numbers_or_names() {
        assert_eq!(Category::from_json(&json!(2)), Ok(Category::Number(2)));
        assert_eq!(
            Category::from_json(&json!(" preference ")),
            Ok(Category::Name("preference".into()))
        );
        for bad in [json!(-1), json!(1.5), json!(""), json!(null), json!([1])] {
            assert!(Category::from_json(&bad).is_err(), "{bad}");
        }
        // Numbers sort before names, numbers by value.
        let mut c = [
            Category::Name("b".into()),
            Category::Number(10),
            Category::Name("a".into()),
            Category::Number(2),
        ];
        c.sort();
        assert_eq!(
            c.iter().map(Category::key).collect::<Vec<_>>(),
            ["2", "10", "a", "b"]
        );
    }

    #[test]
    fn the_default_filter_skips_only_locomo_adversarial_questions() {
        let default = CategoryFilter::default();
        assert!(default.scores(&Category::Number(1)));
        assert!(default.scores(&Category::Number(7)));
        assert!(!default.scores(&Category::Number(5)));
        // A name "5" is not LoCoMo's number 5.
        assert!(default.scores(&Category::Name("5".into())));
        let skip_none = CategoryFilter::parse(None, Some("")).unwrap_or_default();
        assert!(skip_none.scores(&Category::Number(5)));
        let only = CategoryFilter::parse(Some("preference, 2"), Some("2")).unwrap_or_default();
        assert!(only.scores(&Category::Name("preference".into())));
        assert!(!only.scores(&Category::Number(2)));
        assert!(!only.scores(&Category::Name("update".into())));
        assert!(CategoryFilter::parse(Some(" , "), None).is_err());
    }
}
