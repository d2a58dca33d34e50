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
//! Reported per retrieval mode and category (1-4; category 5, adversarial,
//! is skipped): evidence recall@1/5/10 (the fraction of a question's
//! evidence turns among the first k recalled) and nDCG@10. Questions with
//! empty evidence are excluded and listed; evidence ids that name no turn
//! are kept (they count as misses) and listed. Memory ids and contents are
//! never printed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::MemoryPurpose;
use mosaic_harness::{MemoryKind, MemorySource, MemorySubject};
use mosaic_index::RetrievalMode;
use mosaic_index::eval_metrics::{
    MetricSums, category_label, category_name, score_ranking, table_header,
};
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
    category: u8,
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
    for (line, question) in &questions {
        if !by_id.contains_key(question.conversation_id.as_str()) {
            bail!(
                "{}: line {line}: question {:?} names conversation {:?}, which is not in {}",
                options.questions.display(),
                question.question_id,
                question.conversation_id,
                options.conversations.display()
            );
        }
        if !(1..=5).contains(&question.category) {
            bail!(
                "{}: line {line}: question {:?} has category {}, not 1-5",
                options.questions.display(),
                question.question_id,
                question.category
            );
        }
    }
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
                let response = service.propose(&credential, &request).map_err(|e| {
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
    bar.finish_and_clear();

    // Questions: category 5 skipped, empty evidence excluded, evidence ids
    // naming no turn kept as misses.
    let mut adversarial = 0usize;
    let mut empty_evidence: Vec<String> = Vec::new();
    let mut unknown_evidence: Vec<String> = Vec::new();
    let mut scored: Vec<(usize, &Question)> = Vec::new();
    for (_, question) in &questions {
        if question.category == 5 {
            adversarial += 1;
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
        scored.push((index, question));
    }
    let summary = json!({
        "conversations": conversations.len(),
        "turns": n_turns,
        "turns_rejected": rejected_turns,
        "embedder": report.embedder.identity.release,
        "k": options.k,
        "questions": questions.len(),
        "questions_scored": scored.len(),
        "adversarial_skipped": adversarial,
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
        println!(
            "questions: {} scored (categories 1-4), {adversarial} adversarial skipped; {} with empty evidence excluded{}; {} evidence ids naming no turn kept as misses{}",
            scored.len(),
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
    let mut rows: Vec<(RetrievalMode, u8, MetricSums)> = Vec::new();
    for &mode in &options.modes {
        let mut by_category: BTreeMap<u8, MetricSums> = BTreeMap::new();
        for (index, question) in &scored {
            let Some(conversation) = ingested.get(*index) else {
                bail!("conversation {index} was not ingested");
            };
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
            for category in [question.category, 0] {
                by_category.entry(category).or_default().add(&figures);
            }
            bar.inc(1);
        }
        for (category, sums) in by_category {
            rows.push((mode, category, sums));
        }
    }
    bar.finish_and_clear();
    // Categories 1-4 first, then all.
    rows.sort_by_key(|(mode, category, _)| {
        (
            options.modes.iter().position(|m| m == mode),
            *category == 0,
            *category,
        )
    });
    if !options.json {
        println!();
        println!("{}", table_header("mode"));
    }
    for (mode, category, sums) in rows {
        if options.json {
            let m = sums.mean();
            print_line(
                "eval",
                &json!({
                    "mode": mode_name(mode),
                    "category": category,
                    "category_name": category_name(category),
                    "n": sums.n,
                    "recall_at_1": round(m.recall_at_1),
                    "recall_at_5": round(m.recall_at_5),
                    "recall_at_10": round(m.recall_at_10),
                    "ndcg_at_10": round(m.ndcg_at_10),
                }),
            );
        } else {
            println!(
                "{}",
                sums.table_row(mode_name(mode), &category_label(category))
            );
        }
    }
    Ok(ExitCode::SUCCESS)
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
}
