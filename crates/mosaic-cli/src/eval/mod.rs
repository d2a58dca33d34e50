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
//! for sets whose questions are turns of it. `--as-asked` asks each such
//! question where its user asked it: a conversation's turns are ingested in
//! file order, its calls cut where a question falls, and the question is
//! asked (in every mode, through every surface) right after the last turn
//! before its own is ingested, so its recall sees the history up to that
//! point and nothing of its own turn, its reply or what came after
//! ([`ask_point`]). A question with no turn of its own is asked after the
//! whole history, as without the flag.
//!
//! `--surfaces` adds the mem0-compatible routes beside the native one:
//! `mem0` ingests each session with `POST /memories` (one call a session,
//! the conversation's `user_id`, the session's `run_id`) and asks with
//! `POST /search`; `mem0-platform` the same through `POST
//! /v3/memories/add/` and `POST /v3/memories/search/`. Each surface has its
//! own principal per conversation, and its answers are mapped back to
//! turns from the record ids its add calls answered, so every surface is
//! scored alike. `--parallel N` has N clients ingest N conversations at a
//! time (each conversation's calls in order); `--batch N` makes the native
//! calls N consecutive turns of a conversation; `--write-guards` sets the
//! tenant's guards.
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
//! recall per mode (query embedding included); per surface, ingest
//! turns/s, call and search percentiles, recall@k, and the server's own
//! account read from its `/metrics` (a figure it does not export is null,
//! never a failure). Questions with empty
//! evidence are excluded and listed; evidence ids that name no turn are
//! kept (they count as misses) and listed. Memory ids and contents are
//! never printed.

mod ask;
mod dataset;
mod door;
mod stats;
mod surfaces;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use mosaic_harness::canonical::sha256_hex;
use mosaic_index::RetrievalMode;
use mosaic_index::eval_metrics::{MetricSums, score_ranking};
use serde_json::{Value, json};

use ask::{Answer, ask, ask_point, surface_modes};
pub use dataset::{Category, CategoryFilter};
use dataset::{Conversation, Question, Session, Turn, read_jsonl};
use door::Door;
pub use door::Target;
use stats::{list_suffix, percentile, round, server_count, server_mean, server_mean_over};
use surfaces::{Pauses, SurfaceRun, ingest_surface, surface_principal};
pub use surfaces::{Surface, parse_surfaces};

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
    /// Also time a native recall with no query per question (`--modes
    /// ...,none`): the eligible set and the handoff, without ranking.
    pub no_query: bool,
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
    /// The surfaces ingested and asked, in order (native, mem0,
    /// mem0-platform).
    pub surfaces: Vec<Surface>,
    /// Clients ingesting at once, one conversation each.
    pub parallel: usize,
    /// The tenant's write guards (its policy's `write_guards`); `None`
    /// keeps the server's.
    pub write_guards: Option<Value>,
    /// Native sessions ingest: calls of this many consecutive turns of a
    /// conversation, across its sessions, instead of one session a call.
    pub batch: Option<usize>,
    /// Ask each question at its place in the history: right after the last
    /// turn recorded before its own turn is ingested ([`ask_point`]).
    pub as_asked: bool,
}

/// Parses a `--modes` value such as `lexical,vector,hybrid,none`: the
/// retrieval modes scored, in order, and whether `none` (a recall with no
/// query, timed only) was named.
pub fn parse_modes(spec: &str) -> Result<(Vec<RetrievalMode>, bool)> {
    let mut modes = Vec::new();
    let mut no_query = false;
    for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mode = match name {
            "lexical" => RetrievalMode::Lexical,
            "vector" => RetrievalMode::Vector,
            "hybrid" => RetrievalMode::Hybrid,
            "none" => {
                no_query = true;
                continue;
            }
            other => bail!("--modes: {other:?} is not one of lexical, vector, hybrid, none"),
        };
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    if modes.is_empty() {
        bail!("--modes names no scored mode (lexical, vector, hybrid; none is timed beside them)");
    }
    Ok((modes, no_query))
}

fn mode_name(mode: RetrievalMode) -> &'static str {
    match mode {
        RetrievalMode::Lexical => "lexical",
        RetrievalMode::Vector => "vector",
        RetrievalMode::Hybrid => "hybrid",
    }
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

    // Questions: categories filtered, empty evidence excluded.
    let mut skipped: BTreeMap<Category, usize> = BTreeMap::new();
    let mut empty_evidence: Vec<String> = Vec::new();
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
        scored_categories.insert(category);
        scored.push((index, question, category));
    }
    // `--as-asked`: where each scored question is asked (conversation ->
    // position -> the questions asked there); a question with no turn of
    // its own is asked after the whole history, as without the flag.
    let mut placed: HashMap<usize, BTreeMap<usize, Vec<usize>>> = HashMap::new();
    if options.as_asked {
        for (at, (index, question, _)) in scored.iter().enumerate() {
            if let Some(position) = ask_point(&conversations[*index].1, question)? {
                placed
                    .entry(*index)
                    .or_default()
                    .entry(position)
                    .or_default()
                    .push(at);
            }
        }
    }
    let n_placed: usize = placed.values().flat_map(|p| p.values()).map(Vec::len).sum();
    let points: HashMap<usize, BTreeSet<usize>> = placed
        .iter()
        .map(|(index, at)| (*index, at.keys().copied().collect()))
        .collect();

    let door = Door::open(target)?;
    let tenant = match target {
        Target::Spawn { .. } => TENANT.to_owned(),
        Target::Server { .. } => fresh_tenant()?,
    };
    let mut policy = json!({"max_ttl_ms": 3650 * DAY_MS});
    if let Some(guards) = &options.write_guards {
        policy["write_guards"] = guards.clone();
    }
    door.call(
        door.admin(),
        "/v1/admin/tenants",
        &json!({"tenant_id": tenant, "policy": policy}),
    )
    .context("cannot create the evaluation's tenant")?;

    // Ingest: every turn through the gate, as each surface sends it.
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
    // The answers to the questions asked during the ingest, by (surface,
    // scored question, pass).
    let asked_early: std::sync::Mutex<HashMap<(Surface, usize, usize), Answer>> =
        std::sync::Mutex::new(HashMap::new());
    let ask_at = |surface: Surface, index: usize, key: &str, position: usize| -> Result<()> {
        let here = placed.get(&index).and_then(|p| p.get(&position));
        for &at in here.into_iter().flatten() {
            let question = scored[at].1;
            for (pass, mode) in surface_modes(surface, options).into_iter().enumerate() {
                let principal = surface_principal(surface, index);
                let answer = ask(&door, surface, key, &principal, question, mode, options.k)
                    .with_context(|| format!("question {:?}", question.question_id))?;
                asked_early
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert((surface, at, pass), answer);
            }
        }
        Ok(())
    };
    let pauses = Pauses {
        points: &points,
        ask: &ask_at,
    };
    let mut runs: Vec<SurfaceRun> = Vec::with_capacity(options.surfaces.len());
    for &surface in &options.surfaces {
        let bar = progress(n_turns, hidden, surface.name());
        let run = ingest_surface(
            &door,
            &tenant,
            surface,
            options,
            &conversations,
            &kept,
            &sent,
            options.as_asked.then_some(&pauses),
            &bar,
        )?;
        bar.finish_and_clear();
        runs.push(run);
    }
    let Some(first) = runs.first() else {
        bail!("--surfaces names no surface");
    };

    // Evidence ids naming no kept turn are kept as misses.
    let mut unknown_evidence: Vec<String> = Vec::new();
    for (index, question, _) in &scored {
        for evidence in &question.evidence {
            if !first
                .record_of_turn
                .contains_key(&(*index, evidence.clone()))
            {
                unknown_evidence.push(format!("{} {evidence}", question.question_id));
            }
        }
    }
    let n_skipped: usize = skipped.values().sum();
    let skipped_labels: Vec<String> = skipped.keys().map(&label).collect();
    let ingest_label = match options.ingest {
        Ingest::Sessions => "sessions",
        Ingest::Turns => "turns",
    };
    let per_call = match (options.ingest, options.batch) {
        (Ingest::Turns, _) => "one turn a call".to_owned(),
        (Ingest::Sessions, Some(n)) => format!("{n} consecutive turns a call"),
        (Ingest::Sessions, None) => "one session a call".to_owned(),
    };
    let summary = json!({
        "conversations": kept.len(),
        "conversations_split": options.split.map(|(a, b)| json!([a, b])),
        "ingest": ingest_label,
        "batch": options.batch,
        "surfaces": options.surfaces.iter().map(|s| s.name()).collect::<Vec<_>>(),
        "ingest_clients": options.parallel,
        "turns": n_turns,
        "turns_rejected": first.rejected_turns,
        "question_turns_left_out": left_out.len(),
        "own_turns_hidden": options.hide_own_turns,
        "as_asked": options.as_asked,
        "questions_asked_in_the_history": n_placed,
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
            "mosaic eval: {} conversations, {n_turns} turns ingested through the gate over HTTP ({}), {per_call} ({} rejected{}){}",
            kept.len(),
            options
                .surfaces
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", "),
            first.rejected_turns.len(),
            if first.rejected_turns.is_empty() {
                String::new()
            } else {
                format!(": {}", first.rejected_turns.join(", "))
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
        if options.as_asked {
            println!(
                "as asked: {n_placed} questions asked at their place in the history (only the turns before their own in memory), {} after their whole conversation",
                scored.len() - n_placed
            );
        }
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

    // Every surface's questions: the native one in each retrieval mode,
    // the mem0 ones through their search.
    let passes: usize = runs
        .iter()
        .map(|r| match r.surface {
            Surface::Native => options.modes.len() + usize::from(options.no_query),
            _ => 1,
        })
        .sum();
    let bar = progress(scored.len() * passes, hidden, "questions");
    // `None` stands for all categories together.
    let mut rows = Vec::new();
    let mut recall_ms: Vec<(RetrievalMode, Vec<f64>, Option<String>)> = Vec::new();
    let mut surface_lines: Vec<Value> = Vec::new();
    let mut no_query_ms: Option<Vec<f64>> = None;
    let mut asked_early = asked_early
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for run in &runs {
        let modes = surface_modes(run.surface, options);
        let timed = [
            format!(
                "mosaic_http_request_duration_seconds{{route=\"{}\"}}",
                run.surface.search_route()
            ),
            "mosaic_query_embedding_seconds".to_owned(),
        ];
        let before = door.metrics();
        // The surface's search pass: every question, in every mode.
        let mut searches: Vec<f64> = Vec::new();
        // Recall@k and any-hit@k of the first mode, as the summary gives them.
        let (mut recall_k, mut any_k) = (0.0f64, 0usize);
        for (pass, &mode) in modes.iter().enumerate() {
            let mut by_category: BTreeMap<Option<Category>, (MetricSums, usize)> = BTreeMap::new();
            let mut times = Vec::with_capacity(scored.len());
            let mut feature_release = None;
            for (at, (index, question, category)) in scored.iter().enumerate() {
                let Some(key) = run.keys.get(index) else {
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
                let asked = options.k + own.len();
                let answer = match asked_early.remove(&(run.surface, at, pass)) {
                    Some(answer) => answer,
                    None => ask(
                        &door,
                        run.surface,
                        key,
                        &run.principal(*index),
                        question,
                        mode,
                        asked,
                    )
                    .with_context(|| format!("question {:?}", question.question_id))?,
                };
                times.push(answer.ms);
                if feature_release.is_none() {
                    feature_release = answer.release;
                }
                let ids = answer.ids.iter().map(String::as_str);
                let ranked: Vec<&str> = ids
                    .into_iter()
                    .filter(|id| {
                        !run.turn_of_record
                            .get(*id)
                            .is_some_and(|(i, turn)| i == index && own.contains(&turn.as_str()))
                    })
                    .take(options.k)
                    .collect();
                let evidence: BTreeSet<&str> =
                    question.evidence.iter().map(String::as_str).collect();
                let hits: Vec<bool> = ranked
                    .iter()
                    .map(|id| {
                        run.turn_of_record
                            .get(*id)
                            .is_some_and(|(i, turn)| i == index && evidence.contains(turn.as_str()))
                    })
                    .collect();
                let figures = score_ranking(&hits, evidence.len());
                let any_hit = usize::from(hits.iter().take(10).any(|h| *h));
                if pass == 0 {
                    let found = hits.iter().filter(|h| **h).count();
                    recall_k += found as f64 / evidence.len().max(1) as f64;
                    any_k += usize::from(found > 0);
                }
                for key in [Some((*category).clone()), None] {
                    let (sums, any) = by_category.entry(key).or_default();
                    sums.add(&figures);
                    *any += any_hit;
                }
                bar.inc(1);
            }
            searches.extend(&times);
            if let Some(mode) = mode {
                recall_ms.push((mode, times, feature_release));
            }
            // Categories in order (numbers, then names), then all.
            let all = by_category.remove(&None);
            for (category, (sums, any)) in by_category {
                rows.push((run.surface, mode, category, sums, any));
            }
            if let Some((sums, any)) = all {
                rows.push((run.surface, mode, None, sums, any));
            }
        }
        let after = door.metrics();
        if run.surface == Surface::Native && options.no_query {
            // Timed after the server's account was read, so its search
            // figures stay those of the scored recalls.
            let mut times = Vec::with_capacity(scored.len());
            for (index, question, _) in &scored {
                let Some(key) = run.keys.get(index) else {
                    bail!("conversation {index} was not ingested");
                };
                let started = Instant::now();
                door.call(
                    key,
                    "/v1/recall",
                    &json!({"kinds": ["episodic"], "max_records": options.k}),
                )
                .with_context(|| format!("question {:?} (no query)", question.question_id))?;
                times.push(started.elapsed().as_secs_f64() * 1e3);
                bar.inc(1);
            }
            no_query_ms = Some(times);
        }
        let n = scored.len().max(1) as f64;
        let mut line = run.summary();
        searches.sort_by(f64::total_cmp);
        line["search_p50_ms"] = json!(round(percentile(&searches, 0.50)));
        line["search_p95_ms"] = json!(round(percentile(&searches, 0.95)));
        line["search_mean_ms"] = json!(round(
            searches.iter().sum::<f64>() / searches.len().max(1) as f64
        ));
        // With `--as-asked` most questions were asked during the ingest:
        // the server's account of them is read over its window too.
        let mut windows = vec![(&before, &after)];
        if options.as_asked {
            windows.push((&run.metrics_before, &run.metrics_after));
        }
        line["search_server_mean_ms"] = json!(server_mean_over(&windows, &timed[0]));
        line["search_embedding_mean_ms"] = json!(server_mean_over(&windows, &timed[1]));
        line["recall_at_k"] = json!(round(recall_k / n));
        line["any_hit_at_k"] = json!(round(any_k as f64 / n));
        surface_lines.push(line);
    }
    bar.finish_and_clear();
    if !options.json {
        println!();
        println!(
            "| mode | category | n | recall@1 | recall@5 | recall@10 | nDCG@10 | any-hit@10 |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|");
    }
    for (surface, mode, category, sums, any) in &rows {
        let any_hit = *any as f64 / sums.n.max(1) as f64;
        // The native surface's rows name their retrieval mode; a mem0
        // surface's, the surface (its search has no mode).
        let shown = mode.map_or(surface.name(), mode_name);
        if options.json {
            let m = sums.mean();
            print_line(
                "eval",
                &json!({
                    "surface": surface.name(),
                    "mode": mode.map(mode_name),
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
            println!("{} {:.3} |", sums.table_row(shown, &name), any_hit);
        }
    }

    // Latency at the client: ingest calls, then recalls per mode.
    let mut latency: Vec<_> = runs
        .iter()
        .filter(|r| r.surface == Surface::Native)
        .map(|r| {
            (
                "ingest".to_owned(),
                Value::Null,
                r.ingest_ms.clone(),
                Some(n_turns as f64 / r.ingest_secs.max(1e-9)),
                None,
            )
        })
        .collect();
    for (mode, times, release) in recall_ms {
        latency.push((
            "recall".to_owned(),
            json!(mode_name(mode)),
            times,
            None,
            release,
        ));
    }
    if let Some(times) = no_query_ms {
        latency.push(("recall".to_owned(), json!("none"), times, None, None));
    }
    if !options.json && !latency.is_empty() {
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
                (Some("none"), _) => {
                    "recall, no query (the eligible set and the handoff, no ranking)".to_owned()
                }
                (Some(mode), _) => format!(
                    "recall, {mode} (query embedding included; {})",
                    release.as_deref().unwrap_or("no vector release")
                ),
                (None, Some(rate)) => format!("ingest, {per_call} ({rate:.1} turns/s)"),
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

    // Each surface side by side: its ingest and its search pass, at the
    // client and in the server's own account.
    if !options.json {
        println!();
        println!(
            "| surface | turns | calls | clients | ingest turns/s | call p50 ms | call p95 ms | search p50 ms | search p95 ms | search mean ms | recall@{k} | any-hit@{k} |",
            k = options.k
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    }
    for line in &surface_lines {
        if options.json {
            print_line("eval_surface", line);
            continue;
        }
        let f = |name: &str| match line[name].as_f64() {
            Some(v) => format!("{v:.2}"),
            None => "n/a".to_owned(),
        };
        println!(
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {:.3} | {:.3} |",
            line["surface"].as_str().unwrap_or(""),
            line["turns"],
            line["ingest_calls"],
            line["ingest_clients"],
            line["ingest_turns_per_second"].as_f64().unwrap_or(0.0),
            f("ingest_call_p50_ms"),
            f("ingest_call_p95_ms"),
            f("search_p50_ms"),
            f("search_p95_ms"),
            f("search_mean_ms"),
            line["recall_at_k"].as_f64().unwrap_or(0.0),
            line["any_hit_at_k"].as_f64().unwrap_or(0.0),
        );
    }
    if !options.json {
        for line in &surface_lines {
            let f = |v: &Value| {
                v.as_f64()
                    .map_or("n/a".to_owned(), |v| format!("{v:.2} ms"))
            };
            let phases = &line["ingest_server_phase_mean_ms"];
            println!(
                "{}: in the server (its /metrics): ingest call means: prepare {}, commit {}, index_wait {}; {} index acknowledgements of {} each; search request mean {}, of which the query's embedding {}",
                line["surface"].as_str().unwrap_or(""),
                f(&phases["prepare"]),
                f(&phases["commit"]),
                f(&phases["index_wait"]),
                line["ingest_acknowledgements"]
                    .as_u64()
                    .map_or("n/a".to_owned(), |n| n.to_string()),
                f(&line["ingest_acknowledgement_mean_ms"]),
                f(&line["search_server_mean_ms"]),
                f(&line["search_embedding_mean_ms"]),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
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
                .is_ok_and(|m| m == (vec![RetrievalMode::Lexical, RetrievalMode::Hybrid], false))
        );
        assert!(
            parse_modes("none, hybrid,none")
                .is_ok_and(|m| m == (vec![RetrievalMode::Hybrid], true))
        );
        assert!(parse_modes("bm25").is_err());
        assert!(parse_modes(",").is_err());
        assert!(parse_modes("none").is_err(), "nothing scored");
    }

    #[test]
    fn parses_surfaces_in_their_one_order() {
        assert!(
            parse_surfaces(" mem0-platform,native , mem0,native")
                .is_ok_and(|s| s == [Surface::Native, Surface::Mem0, Surface::Mem0Platform])
        );
        assert!(parse_surfaces("mem0").is_ok_and(|s| s == [Surface::Mem0]));
        for bad in ["", " , ", "mem0,platform", "Native"] {
            assert!(parse_surfaces(bad).is_err(), "{bad:?}");
        }
    }
}
