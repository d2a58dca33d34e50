//! `mosaic eval`: evidence-retrieval quality of the product on a
//! conversational dataset (the normalized LoCoMo form: a conversations
//! JSONL file and a questions JSONL file), measured at its door.
//!
//! Every call crosses the HTTP API, as a client's would: of a fresh
//! `mosaic serve` this binary starts in a temporary data directory on
//! loopback (the embedder flags apply to it), or of a running server
//! (`--server URL` with an admin key), where the evaluation creates a tenant
//! of its own. Each conversation is one principal of that tenant (its own
//! key). By default each session is one call to the conversation endpoint
//! (`--ingest sessions`); `--ingest turns` proposes each turn as an
//! episodic memory whose one source is the turn itself
//! (`[session date] speaker: text`). Either way the gate decides each
//! memory in the store's write transaction, and the indexes publish it
//! before the call returns. Each question is then recalled with the key of
//! its own conversation's principal, so it can only see that conversation.
//! `--conversations FIRST-LAST` scores one split of the file (0-based, file
//! order); `--leave-out-question-turns` keeps a question's own turn and its
//! reference reply (`query_turn_id`, `answer_turn_id`) out of the history,
//! for sets whose questions are turns of it.
//!
//! A question's category is a number or a string (`2`, `"preference"`).
//! Which categories are scored is an option ([`CategoryFilter`]): by
//! default every category is, except the number 5 (LoCoMo's adversarial
//! questions, whose evidence is a turn that does not answer them).
//!
//! Reported per retrieval mode and category: evidence recall@1/5/10 (the
//! fraction of a question's evidence turns among the first k recalled),
//! any-hit@10 (at least one evidence turn among the first 10) and nDCG@10;
//! and the latency at the client: each ingest call (gate, store
//! transaction, index publication, embedding included) and each question's
//! recall per mode (query embedding included). Questions with empty
//! evidence are excluded and listed; evidence ids that name no turn are
//! kept (they count as misses) and listed. Memory ids and contents are
//! never printed.

mod door;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use mosaic_harness::canonical::sha256_hex;
use mosaic_index::RetrievalMode;
use mosaic_index::eval_metrics::{MetricSums, score_ranking};
use serde::Deserialize;
use serde_json::{Value, json};

use door::Door;
pub use door::Target;

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
    /// How the turns reach the server.
    pub ingest: Ingest,
    /// Only these conversations (0-based, both ends included).
    pub split: Option<(usize, usize)>,
    /// Keep each question's own turn and reference reply out.
    pub leave_out_question_turns: bool,
    /// Ingest every turn, and take each question's own turn and reference
    /// reply out of that question's ranking only.
    pub hide_own_turns: bool,
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
    /// The turn that asks the question, where it is one of the history.
    #[serde(default)]
    query_turn_id: Option<String>,
    /// The turn that answered it (its reference reply).
    #[serde(default)]
    answer_turn_id: Option<String>,
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

/// How the turns reach the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ingest {
    /// Each session one call to the conversation endpoint
    /// (`POST /v1/conversations/{id}/messages`), as a chat application
    /// sends it.
    Sessions,
    /// Each turn one proposal (`POST /v1/memories`): an episodic memory
    /// whose one source is the turn itself.
    Turns,
}

impl std::str::FromStr for Ingest {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "sessions" => Ok(Ingest::Sessions),
            "turns" => Ok(Ingest::Turns),
            other => Err(format!("{other:?} is not sessions or turns")),
        }
    }
}

/// Parses `--conversations FIRST-LAST` (0-based, both ends included).
pub fn parse_split(spec: &str) -> Result<(usize, usize)> {
    let parsed = spec
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
    match parsed {
        Some((first, last)) if first <= last => Ok((first, last)),
        _ => bail!("--conversations takes FIRST-LAST (0-based, FIRST <= LAST), not {spec:?}"),
    }
}

/// The conversation id as one URL path segment.
fn path_segment(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// A tenant id no earlier evaluation on the same server used.
fn fresh_tenant() -> Result<String> {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).map_err(|e| anyhow!("no randomness: {e}"))?;
    Ok(format!("{TENANT}-{}", hex::encode(bytes)))
}

/// Runs the evaluation through `target`.
pub fn run(target: &Target, options: &EvalOptions) -> Result<ExitCode> {
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
    if let Some((_, last)) = options.split
        && last >= conversations.len()
    {
        bail!(
            "--conversations: {} holds {} conversations (0 to {})",
            options.conversations.display(),
            conversations.len(),
            conversations.len().saturating_sub(1)
        );
    }
    let in_split = |index: usize| {
        options
            .split
            .is_none_or(|(first, last)| (first..=last).contains(&index))
    };
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
    // A question's own turn and its reference reply, left out of the
    // history when asked (sets whose questions are turns of it).
    let left_out: BTreeSet<(&str, &str)> = if options.leave_out_question_turns {
        questions
            .iter()
            .flat_map(|(_, q)| {
                [q.query_turn_id.as_deref(), q.answer_turn_id.as_deref()]
                    .into_iter()
                    .flatten()
                    .map(|turn| (q.conversation_id.as_str(), turn))
            })
            .collect()
    } else {
        BTreeSet::new()
    };
    let label = |category: &Category| -> String {
        match (category, category_names.get(category)) {
            (Category::Number(n), Some(name)) => format!("{n} {name}"),
            (c, _) => c.key(),
        }
    };
    let hidden = options.json || !std::io::stderr().is_terminal();

    let door = Door::open(target)?;
    let tenant = match target {
        Target::Spawn { .. } => TENANT.to_owned(),
        Target::Server { .. } => fresh_tenant()?,
    };
    door.call(
        door.admin(),
        "/v1/admin/tenants",
        &json!({"tenant_id": tenant, "policy": {"max_ttl_ms": 3650 * DAY_MS}}),
    )
    .context("cannot create the evaluation's tenant")?;

    // Ingest: every turn through the gate, as the chosen route sends it.
    let kept: Vec<usize> = (0..conversations.len()).filter(|&i| in_split(i)).collect();
    let sent = |index: usize, turn: &Turn| {
        !left_out.contains(&(
            conversations[index].1.conversation_id.as_str(),
            turn.turn_id.as_str(),
        ))
    };
    let n_turns: usize = kept
        .iter()
        .map(|&i| {
            conversations[i]
                .1
                .sessions
                .iter()
                .flat_map(|s| &s.turns)
                .filter(|t| sent(i, t))
                .count()
        })
        .sum();
    let bar = progress(n_turns, hidden, "ingest");
    let mut keys: HashMap<usize, String> = HashMap::new();
    // (conversation index, turn id) -> record id; and back.
    let mut record_of_turn: HashMap<(usize, String), String> = HashMap::new();
    let mut turn_of_record: HashMap<String, (usize, String)> = HashMap::new();
    let mut rejected_turns: Vec<String> = Vec::new();
    let mut ingest_ms: Vec<f64> = Vec::new();
    let ingest_started = Instant::now();
    for &index in &kept {
        let conversation = &conversations[index].1;
        let principal = format!("conversation-{}", index + 1);
        let key = door
            .call(
                door.admin(),
                "/v1/admin/keys",
                &json!({"tenant_id": tenant, "principal_id": principal}),
            )?
            .get("key")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("the server's key answer has no key"))?;
        let mut accepted = |turn_id: &str, record_id: Option<&str>| match record_id {
            Some(record_id) => {
                record_of_turn.insert((index, turn_id.to_owned()), record_id.to_owned());
                turn_of_record.insert(record_id.to_owned(), (index, turn_id.to_owned()));
            }
            None => rejected_turns.push(format!("{} {turn_id}", conversation.conversation_id)),
        };
        for session in &conversation.sessions {
            let turns: Vec<&Turn> = session.turns.iter().filter(|t| sent(index, t)).collect();
            if turns.is_empty() {
                continue;
            }
            match options.ingest {
                Ingest::Sessions => {
                    let messages: Vec<Value> = turns
                        .iter()
                        .map(|t| {
                            let mut m = json!({"id": t.turn_id, "role": "user",
                                               "name": t.speaker, "content": t.text});
                            if !session.date_time.trim().is_empty() {
                                m["created_at"] = json!(session.date_time);
                            }
                            m
                        })
                        .collect();
                    let path = format!(
                        "/v1/conversations/{}/messages",
                        path_segment(&conversation.conversation_id)
                    );
                    let started = Instant::now();
                    let answer = door
                        .call(&key, &path, &json!({ "messages": messages }))
                        .with_context(|| {
                            format!("conversation {:?}", conversation.conversation_id)
                        })?;
                    ingest_ms.push(started.elapsed().as_secs_f64() * 1e3);
                    let mut answered: HashMap<usize, &Value> = HashMap::new();
                    for m in answer["messages"].as_array().into_iter().flatten() {
                        if let Some(i) = m["index"].as_u64() {
                            answered.insert(i as usize, m);
                        }
                    }
                    for (i, turn) in turns.iter().enumerate() {
                        // An empty turn is skipped by the server and
                        // counts as not kept.
                        let record = answered
                            .get(&i)
                            .filter(|m| m["decision"] == "accepted")
                            .and_then(|m| m["record_id"].as_str());
                        accepted(&turn.turn_id, record);
                    }
                    bar.inc(turns.len() as u64);
                }
                Ingest::Turns => {
                    for turn in turns {
                        let text =
                            format!("[{}] {}: {}", session.date_time, turn.speaker, turn.text);
                        let started = Instant::now();
                        let answer = door
                            .call(
                                &key,
                                "/v1/memories",
                                &turn_proposal(&principal, &turn.turn_id, &text),
                            )
                            .with_context(|| {
                                format!(
                                    "conversation {:?} turn {:?}",
                                    conversation.conversation_id, turn.turn_id
                                )
                            })?;
                        ingest_ms.push(started.elapsed().as_secs_f64() * 1e3);
                        let record = (answer["decision"] == "accepted")
                            .then(|| answer["record_id"].as_str())
                            .flatten();
                        accepted(&turn.turn_id, record);
                        bar.inc(1);
                    }
                }
            }
        }
        keys.insert(index, key);
    }
    let ingest_secs = ingest_started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    // Questions: categories filtered, empty evidence excluded, evidence
    // ids naming no kept turn kept as misses.
    let mut skipped: BTreeMap<Category, usize> = BTreeMap::new();
    let mut empty_evidence: Vec<String> = Vec::new();
    let mut unknown_evidence: Vec<String> = Vec::new();
    let mut scored: Vec<(usize, &Question, &Category)> = Vec::new();
    let mut scored_categories: BTreeSet<&Category> = BTreeSet::new();
    for ((_, question), category) in questions.iter().zip(&categories) {
        let Some(&index) = by_id.get(question.conversation_id.as_str()) else {
            continue;
        };
        if !in_split(index) {
            continue;
        }
        if !options.categories.scores(category) {
            *skipped.entry(category.clone()).or_default() += 1;
            continue;
        }
        if question.evidence.is_empty() {
            empty_evidence.push(question.question_id.clone());
            continue;
        }
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
    let ingest_label = match options.ingest {
        Ingest::Sessions => "sessions",
        Ingest::Turns => "turns",
    };
    let summary = json!({
        "conversations": kept.len(),
        "conversations_split": options.split.map(|(a, b)| json!([a, b])),
        "ingest": ingest_label,
        "turns": n_turns,
        "turns_rejected": rejected_turns,
        "question_turns_left_out": left_out.len(),
        "own_turns_hidden": options.hide_own_turns,
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
            "mosaic eval: {} conversations, {n_turns} turns ingested through the gate over HTTP, one {} a call ({} rejected{}){}",
            kept.len(),
            match options.ingest {
                Ingest::Sessions => "session",
                Ingest::Turns => "turn",
            },
            rejected_turns.len(),
            if rejected_turns.is_empty() {
                String::new()
            } else {
                format!(": {}", rejected_turns.join(", "))
            },
            if left_out.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} question turns and reference replies left out",
                    left_out.len()
                )
            },
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
    let mut recall_ms: Vec<(RetrievalMode, Vec<f64>, Option<String>)> = Vec::new();
    for &mode in &options.modes {
        let mut by_category: BTreeMap<Option<Category>, (MetricSums, usize)> = BTreeMap::new();
        let mut times = Vec::with_capacity(scored.len());
        let mut feature_release = None;
        for (index, question, category) in &scored {
            let Some(key) = keys.get(index) else {
                bail!("conversation {index} was not ingested");
            };
            // A question's own two turns, when hidden from its ranking: two
            // more are asked for, so k remain after they are taken out.
            let own: Vec<&str> = if options.hide_own_turns {
                [
                    question.query_turn_id.as_deref(),
                    question.answer_turn_id.as_deref(),
                ]
                .into_iter()
                .flatten()
                .collect()
            } else {
                Vec::new()
            };
            let started = Instant::now();
            let recall = door
                .call(
                    key,
                    "/v1/recall",
                    &json!({"kinds": ["episodic"], "max_records": options.k + own.len(),
                            "query": question.question, "mode": mode_name(mode)}),
                )
                .with_context(|| format!("question {:?}", question.question_id))?;
            times.push(started.elapsed().as_secs_f64() * 1e3);
            if feature_release.is_none() {
                feature_release = recall["relevance_receipt"]["feature_release"]
                    .as_str()
                    .map(str::to_owned);
            }
            // Best first: the relevance ranking, restricted to what the
            // selector and the context handoff let through.
            let selected: BTreeSet<&str> = recall["selected_record_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let ranked: Vec<&str> = recall["relevance_receipt"]["results"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["record_id"].as_str())
                .filter(|id| selected.contains(id))
                .filter(|id| {
                    !turn_of_record
                        .get(*id)
                        .is_some_and(|(i, turn)| i == index && own.contains(&turn.as_str()))
                })
                .take(options.k)
                .collect();
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
        recall_ms.push((mode, times, feature_release));
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

    // Latency at the client: ingest calls, then recalls per mode.
    let mut latency = vec![(
        "ingest".to_owned(),
        Value::Null,
        ingest_ms,
        Some(n_turns as f64 / ingest_secs.max(1e-9)),
        None,
    )];
    for (mode, times, release) in recall_ms {
        latency.push((
            "recall".to_owned(),
            json!(mode_name(mode)),
            times,
            None,
            release,
        ));
    }
    if !options.json {
        println!();
        println!("| latency at the client | n | mean ms | p50 ms | p95 ms | p99 ms | max ms |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
    }
    for (stage, mode, mut times, rate, release) in latency {
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
                    "feature_release": release,
                }),
            );
        } else {
            let what = match (mode.as_str(), rate) {
                (Some("lexical"), _) => "recall, lexical".to_owned(),
                (Some(mode), _) => format!(
                    "recall, {mode} (query embedding included; {})",
                    release.as_deref().unwrap_or("no vector release")
                ),
                (None, Some(rate)) => format!(
                    "ingest, one {} a call ({rate:.1} turns/s)",
                    match options.ingest {
                        Ingest::Sessions => "session",
                        Ingest::Turns => "turn",
                    }
                ),
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
/// so the server's verbatim verifier supports it (`POST /v1/memories`).
fn turn_proposal(principal: &str, turn_id: &str, text: &str) -> Value {
    let source_id = format!(
        "turn-{}",
        sha256_hex(turn_id.as_bytes()).get(..16).unwrap_or("")
    );
    json!({
        "content": text,
        "kind": "episodic",
        "purpose": "personalization",
        "subject": {"type": "principal", "principal_id": principal},
        "sources": [{
            "source_id": source_id,
            "content_sha256": sha256_hex(text.as_bytes()),
            "provenance_sha256": sha256_hex(format!("mosaic-eval/provenance/{principal}").as_bytes()),
            "locator_sha256": sha256_hex(format!("mosaic-eval/locator/{principal}/{turn_id}").as_bytes()),
        }],
        "source_texts": {source_id.clone(): text},
        "ttl_ms": 3650 * DAY_MS,
        "writer_release": "mosaic-eval-v1",
    })
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
