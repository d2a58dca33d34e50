//! The surfaces an evaluation ingests and asks through (the native API,
//! mem0's open-source routes, mem0's platform routes): one principal per
//! conversation and surface, each conversation's calls in order.

use super::*;

/// A surface of the server the evaluation ingests and asks through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Surface {
    /// The native API: the conversation endpoint (or one proposal a turn)
    /// and `POST /v1/recall`, in each retrieval mode.
    Native,
    /// mem0's REST shape: `POST /memories` (one call a session) and
    /// `POST /search`.
    Mem0,
    /// The routes mem0's platform client calls: `POST /v3/memories/add/`
    /// and `POST /v3/memories/search/`.
    Mem0Platform,
}

impl Surface {
    /// As named on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Surface::Native => "native",
            Surface::Mem0 => "mem0",
            Surface::Mem0Platform => "mem0-platform",
        }
    }

    /// The route its questions are asked through.
    pub(super) fn search_route(self) -> &'static str {
        match self {
            Surface::Native => "/v1/recall",
            Surface::Mem0 => "/search",
            Surface::Mem0Platform => "/v3/memories/search/",
        }
    }
}

/// Parses a `--surfaces` value such as `native,mem0`: in the order
/// native, mem0, mem0-platform, each once.
pub fn parse_surfaces(spec: &str) -> Result<Vec<Surface>> {
    let mut asked = Vec::new();
    for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        asked.push(match name {
            "native" => Surface::Native,
            "mem0" => Surface::Mem0,
            "mem0-platform" => Surface::Mem0Platform,
            other => bail!("--surfaces: {other:?} is not one of native, mem0, mem0-platform"),
        });
    }
    if asked.is_empty() {
        bail!("--surfaces names no surface (native, mem0, mem0-platform)");
    }
    Ok([Surface::Native, Surface::Mem0, Surface::Mem0Platform]
        .into_iter()
        .filter(|s| asked.contains(s))
        .collect())
}

/// One surface's ingest: its keys, which record each kept turn became,
/// and what the ingest took at the client and in the server.
pub(super) struct SurfaceRun {
    pub(super) surface: Surface,
    pub(super) keys: HashMap<usize, String>,
    /// (conversation index, turn id) -> record id; and back.
    pub(super) record_of_turn: HashMap<(usize, String), String>,
    pub(super) turn_of_record: HashMap<String, (usize, String)>,
    pub(super) rejected_turns: Vec<String>,
    pub(super) turns: usize,
    pub(super) clients: usize,
    pub(super) ingest_ms: Vec<f64>,
    /// The ingest's time at the client, the questions asked during it
    /// (`--as-asked`) left out.
    pub(super) ingest_secs: f64,
    /// The server's account of the ingest (its `/metrics`).
    pub(super) server: Value,
    /// The server's `/metrics` before and after the ingest: with
    /// `--as-asked` the searches of the questions asked during it are
    /// read from these.
    pub(super) metrics_before: HashMap<String, f64>,
    pub(super) metrics_after: HashMap<String, f64>,
}

impl SurfaceRun {
    /// The principal (and mem0 `user_id`) of conversation `index` on this
    /// surface: each surface's own, so no surface sees another's memories.
    pub(super) fn principal(&self, index: usize) -> String {
        surface_principal(self.surface, index)
    }

    /// The ingest half of the surface's summary line.
    pub(super) fn summary(&self) -> Value {
        let mut calls = self.ingest_ms.clone();
        calls.sort_by(f64::total_cmp);
        let mut line = json!({
            "surface": self.surface.name(),
            "turns": self.turns,
            "ingest_calls": calls.len(),
            "ingest_clients": self.clients,
            "ingest_seconds": round(self.ingest_secs),
            "ingest_turns_per_second": round(self.turns as f64 / self.ingest_secs.max(1e-9)),
            "ingest_call_p50_ms": round(percentile(&calls, 0.50)),
            "ingest_call_p95_ms": round(percentile(&calls, 0.95)),
        });
        if let (Some(line), Some(server)) = (line.as_object_mut(), self.server.as_object()) {
            line.extend(server.clone());
        }
        line
    }
}

pub(super) fn surface_principal(surface: Surface, index: usize) -> String {
    match surface {
        Surface::Native => format!("conversation-{}", index + 1),
        other => format!("{}-conversation-{}", other.name(), index + 1),
    }
}

/// What one conversation's ingest answered: each call's latency, each
/// sent turn with the record it became (none when not kept), and the time
/// spent asking questions between its calls (`--as-asked`).
pub(super) struct Ingested {
    calls_ms: Vec<f64>,
    turns: Vec<(String, Option<String>)>,
    asking_secs: f64,
}

/// Questions asked between a conversation's ingest calls (`--as-asked`):
/// for each conversation, the positions (its turns counted from 0 in file
/// order, every session's turns in turn) before which a question is
/// asked, and what asks them: `ask(surface, conversation index, key,
/// position)` asks every question placed at that position, once every turn
/// before it and none at or after it is in memory.
pub(super) struct Pauses<'a> {
    pub(super) points: &'a HashMap<usize, BTreeSet<usize>>,
    pub(super) ask: &'a (dyn Fn(Surface, usize, &str, usize) -> Result<()> + Sync),
}

/// The questions of one conversation still to ask, in position order.
struct Asker<'a> {
    pending: std::iter::Peekable<std::collections::btree_set::Iter<'a, usize>>,
    ask: Option<&'a dyn Fn(usize) -> Result<()>>,
    secs: f64,
}

impl Asker<'_> {
    /// Asks the questions placed at or before `position`: called before
    /// the call whose first turn is at `position` is sent.
    fn before(&mut self, position: usize) -> Result<()> {
        while let Some(&&at) = self.pending.peek() {
            if at > position {
                break;
            }
            self.pending.next();
            if let Some(ask) = self.ask {
                let started = Instant::now();
                ask(at)?;
                self.secs += started.elapsed().as_secs_f64();
            }
        }
        Ok(())
    }
}

/// `call` cut wherever a question is asked between two of its turns (a
/// position `p` with `pos(previous) < p <= pos(next)`), so that no call
/// holds turns from both sides of a question.
fn split_at<'c, T>(
    call: &'c [T],
    pos: impl Fn(&T) -> usize,
    cuts: &BTreeSet<usize>,
) -> Vec<&'c [T]> {
    let mut parts = Vec::new();
    let mut start = 0;
    for i in 1..call.len() {
        let (previous, next) = (pos(&call[i - 1]), pos(&call[i]));
        if previous < next && cuts.range(previous + 1..=next).next().is_some() {
            parts.push(&call[start..i]);
            start = i;
        }
    }
    if start < call.len() {
        parts.push(&call[start..]);
    }
    parts
}

/// Ingests the `kept` conversations through `surface`: a key per
/// conversation, then `options.parallel` clients, each taking the next
/// conversation and sending its turns in order, one call at a time.
#[allow(clippy::too_many_arguments)]
pub(super) fn ingest_surface(
    door: &Door,
    tenant: &str,
    surface: Surface,
    options: &EvalOptions,
    conversations: &[(usize, Conversation)],
    kept: &[usize],
    sent: &(dyn Fn(usize, &Turn) -> bool + Sync),
    pauses: Option<&Pauses<'_>>,
    bar: &ProgressBar,
) -> Result<SurfaceRun> {
    let mut keys: HashMap<usize, String> = HashMap::new();
    for &index in kept {
        let key = door
            .call(
                door.admin(),
                "/v1/admin/keys",
                &json!({"tenant_id": tenant, "principal_id": surface_principal(surface, index)}),
            )?
            .get("key")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("the server's key answer has no key"))?;
        keys.insert(index, key);
    }
    let phases = ["prepare", "commit", "index_wait"]
        .map(|p| format!("mosaic_write_phase_seconds{{phase=\"{p}\"}}"));
    let acknowledge = "mosaic_outbox_acknowledge_seconds";
    let before = door.metrics();
    let clients = options.parallel.clamp(1, kept.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    let answers: Vec<Result<Vec<(usize, Ingested)>>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&index) = kept.get(at) else {
                            return Ok(done);
                        };
                        let key = keys.get(&index).map(String::as_str).unwrap_or_default();
                        let conversation = &conversations[index].1;
                        let ask = |position: usize| match pauses {
                            Some(p) => (p.ask)(surface, index, key, position),
                            None => Ok(()),
                        };
                        let no_cuts = BTreeSet::new();
                        let cuts = pauses
                            .and_then(|p| p.points.get(&index))
                            .unwrap_or(&no_cuts);
                        let ingested = ingest_conversation(
                            door,
                            surface,
                            options,
                            conversation,
                            &surface_principal(surface, index),
                            key,
                            &|turn| sent(index, turn),
                            cuts,
                            &ask,
                            bar,
                        )
                        .with_context(|| {
                            format!("conversation {:?}", conversation.conversation_id)
                        });
                        match ingested {
                            Ok(ingested) => done.push((index, ingested)),
                            Err(e) => {
                                // The other clients stop after their call.
                                next.store(kept.len(), std::sync::atomic::Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow!("an ingest client failed")))
            })
            .collect()
    });
    let wall_secs = started.elapsed().as_secs_f64();
    let after = door.metrics();
    let mut done: Vec<(usize, Ingested)> = Vec::new();
    for answer in answers {
        done.extend(answer?);
    }
    // The questions asked between the calls are not ingest time (one
    // client when they are asked: `--as-asked` takes no `--parallel`).
    let asking_secs: f64 = done.iter().map(|(_, d)| d.asking_secs).sum();
    let ingest_secs = (wall_secs - asking_secs).max(0.0);
    // File order, whatever order the clients finished in.
    done.sort_by_key(|(index, _)| *index);
    let mut run = SurfaceRun {
        surface,
        keys,
        record_of_turn: HashMap::new(),
        turn_of_record: HashMap::new(),
        rejected_turns: Vec::new(),
        turns: 0,
        clients,
        ingest_ms: Vec::new(),
        ingest_secs,
        server: json!({
            "ingest_server_phase_mean_ms": {
                "prepare": server_mean(&before, &after, &phases[0]),
                "commit": server_mean(&before, &after, &phases[1]),
                "index_wait": server_mean(&before, &after, &phases[2]),
            },
            "ingest_acknowledgement_mean_ms": server_mean(&before, &after, acknowledge),
            "ingest_acknowledgements": server_count(&before, &after, acknowledge),
        }),
        metrics_before: before,
        metrics_after: after,
    };
    for (index, ingested) in done {
        run.ingest_ms.extend(ingested.calls_ms);
        for (turn_id, record_id) in ingested.turns {
            run.turns += 1;
            match record_id {
                Some(record_id) => {
                    run.record_of_turn
                        .insert((index, turn_id.clone()), record_id.clone());
                    run.turn_of_record.insert(record_id, (index, turn_id));
                }
                None => run.rejected_turns.push(format!(
                    "{} {turn_id}",
                    conversations[index].1.conversation_id
                )),
            }
        }
    }
    Ok(run)
}

/// Turns with their position in their conversation.
type Positioned<'t> = Vec<(usize, &'t Turn)>;

/// One conversation's turns through `surface`, in order, one call at a time.
#[allow(clippy::too_many_arguments)]
pub(super) fn ingest_conversation(
    door: &Door,
    surface: Surface,
    options: &EvalOptions,
    conversation: &Conversation,
    principal: &str,
    key: &str,
    sent: &dyn Fn(&Turn) -> bool,
    cuts: &BTreeSet<usize>,
    ask: &dyn Fn(usize) -> Result<()>,
    bar: &ProgressBar,
) -> Result<Ingested> {
    let mut out = Ingested {
        calls_ms: Vec::new(),
        turns: Vec::new(),
        asking_secs: 0.0,
    };
    let mut asker = Asker {
        pending: cuts.iter().peekable(),
        ask: (!cuts.is_empty()).then_some(ask),
        secs: 0.0,
    };
    // Each turn's position in the conversation: its turns counted in file
    // order, the unsent ones included.
    let mut position = 0usize;
    let positioned: Vec<Positioned<'_>> = conversation
        .sessions
        .iter()
        .map(|s| {
            s.turns
                .iter()
                .map(|t| {
                    position += 1;
                    (position - 1, t)
                })
                .collect()
        })
        .collect();
    // The calls: each session's sent turns (with their session), or with
    // --batch N calls of N consecutive turns across the sessions; either
    // way cut where a question is asked (`--as-asked`).
    let sessions: Vec<(usize, &Session, Positioned<'_>)> = conversation
        .sessions
        .iter()
        .zip(&positioned)
        .enumerate()
        .map(|(n, (s, turns))| {
            let sent: Vec<(usize, &Turn)> =
                turns.iter().copied().filter(|(_, t)| sent(t)).collect();
            (n, s, sent)
        })
        .filter(|(_, _, turns)| !turns.is_empty())
        .collect();
    match (surface, options.ingest) {
        (Surface::Native, Ingest::Sessions) => {
            let flat: Vec<(&Session, usize, &Turn)> = sessions
                .iter()
                .flat_map(|(_, s, turns)| turns.iter().map(move |(p, t)| (*s, *p, *t)))
                .collect();
            let calls: Vec<&[(&Session, usize, &Turn)]> = match options.batch {
                Some(n) => flat.chunks(n.max(1)).collect(),
                None => {
                    let mut calls = Vec::new();
                    let mut rest = flat.as_slice();
                    for (_, _, turns) in &sessions {
                        let (call, tail) = rest.split_at(turns.len().min(rest.len()));
                        calls.push(call);
                        rest = tail;
                    }
                    calls
                }
            };
            let calls: Vec<&[(&Session, usize, &Turn)]> = calls
                .into_iter()
                .flat_map(|call| split_at(call, |(_, p, _)| *p, cuts))
                .collect();
            let path = format!(
                "/v1/conversations/{}/messages",
                path_segment(&conversation.conversation_id)
            );
            for call in calls {
                if let Some((_, first, _)) = call.first() {
                    asker.before(*first)?;
                }
                let messages: Vec<Value> = call
                    .iter()
                    .map(|(session, _, t)| {
                        let mut m = json!({"id": t.turn_id, "role": "user",
                                           "name": t.speaker, "content": t.text});
                        if !session.date_time.trim().is_empty() {
                            m["created_at"] = json!(session.date_time);
                        }
                        m
                    })
                    .collect();
                let started = Instant::now();
                let answer = door.call(key, &path, &json!({ "messages": messages }))?;
                out.calls_ms.push(started.elapsed().as_secs_f64() * 1e3);
                let mut answered: HashMap<usize, &Value> = HashMap::new();
                for m in answer["messages"].as_array().into_iter().flatten() {
                    if let Some(i) = m["index"].as_u64() {
                        answered.insert(i as usize, m);
                    }
                }
                for (i, (_, _, turn)) in call.iter().enumerate() {
                    // An empty turn is skipped by the server and counts as
                    // not kept.
                    let record = answered
                        .get(&i)
                        .filter(|m| m["decision"] == "accepted")
                        .and_then(|m| m["record_id"].as_str())
                        .map(str::to_owned);
                    out.turns.push((turn.turn_id.clone(), record));
                }
                bar.inc(call.len() as u64);
            }
        }
        (Surface::Native, Ingest::Turns) => {
            for (_, session, turns) in &sessions {
                for (at, turn) in turns {
                    asker.before(*at)?;
                    let text = format!("[{}] {}: {}", session.date_time, turn.speaker, turn.text);
                    let started = Instant::now();
                    let answer = door
                        .call(
                            key,
                            "/v1/memories",
                            &turn_proposal(principal, &turn.turn_id, &text),
                        )
                        .with_context(|| format!("turn {:?}", turn.turn_id))?;
                    out.calls_ms.push(started.elapsed().as_secs_f64() * 1e3);
                    let record = (answer["decision"] == "accepted")
                        .then(|| answer["record_id"].as_str())
                        .flatten()
                        .map(str::to_owned);
                    out.turns.push((turn.turn_id.clone(), record));
                    bar.inc(1);
                }
            }
        }
        (_, _) => {
            let path = match surface {
                Surface::Mem0 => "/memories",
                _ => "/v3/memories/add/",
            };
            for (n, session, turns) in &sessions {
                let session_id = if session.session_id.trim().is_empty() {
                    format!("S{}", n + 1)
                } else {
                    session.session_id.clone()
                };
                // mem0's shape: one call a session (cut where a question
                // is asked), the conversation's user and the session's run.
                for part in split_at(turns, |(p, _)| *p, cuts) {
                    if let Some((first, _)) = part.first() {
                        asker.before(*first)?;
                    }
                    let messages: Vec<Value> = part
                        .iter()
                        .map(|(_, t)| json!({"role": "user", "name": t.speaker, "content": t.text}))
                        .collect();
                    let body = json!({
                        "messages": messages,
                        "user_id": principal,
                        "run_id": format!("{}-{session_id}", conversation.conversation_id),
                    });
                    let started = Instant::now();
                    let answer = door.call(key, path, &body)?;
                    out.calls_ms.push(started.elapsed().as_secs_f64() * 1e3);
                    // `results` are the kept messages in order: every
                    // position but the refused and the skipped ones.
                    let not_kept: BTreeSet<u64> = ["refused", "skipped"]
                        .iter()
                        .flat_map(|field| answer[*field].as_array().into_iter().flatten())
                        .filter_map(|m| m["index"].as_u64())
                        .collect();
                    let mut results = answer["results"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r["id"].as_str());
                    for (i, (_, turn)) in part.iter().enumerate() {
                        let record = if not_kept.contains(&(i as u64)) {
                            None
                        } else {
                            results.next().map(str::to_owned)
                        };
                        out.turns.push((turn.turn_id.clone(), record));
                    }
                    bar.inc(part.len() as u64);
                }
            }
        }
    }
    // Questions placed after the last sent turn (or at no sent turn) are
    // asked once the whole conversation is in memory.
    asker.before(usize::MAX)?;
    out.asking_secs = asker.secs;
    Ok(out)
}
