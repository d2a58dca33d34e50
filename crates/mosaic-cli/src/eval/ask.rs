//! How a question is asked: the modes a surface is asked in, where
//! `--as-asked` places a question in its history, and one question asked
//! through a surface.

use super::*;

/// The retrieval modes a surface is asked in, in pass order: the native
/// surface in each scored mode, a mem0 surface through its one search.
pub(super) fn surface_modes(surface: Surface, options: &EvalOptions) -> Vec<Option<RetrievalMode>> {
    match surface {
        Surface::Native => options.modes.iter().copied().map(Some).collect(),
        _ => vec![None],
    }
}

/// Where `--as-asked` asks `question` in its conversation: the position
/// (the conversation's turns counted from 0 in file order, every session's
/// turns in turn) of its own turn, `query_turn_id`, or when it names none
/// of its reference reply, `answer_turn_id`. The question is asked once
/// every turn before that position is in memory and none at or after it:
/// the history its user had recorded when asking. File order, not the
/// sessions' dates: the order the dataset gives the history in (RealMem's
/// dates step back in places; its evidence always lies earlier in the
/// file). `None` when the question names no turn of its own (LoCoMo's
/// questions come after the whole conversation): it is asked after the
/// whole history. An id that names no turn of the conversation is an
/// error: the question cannot be placed.
pub(super) fn ask_point(conversation: &Conversation, question: &Question) -> Result<Option<usize>> {
    let Some(own) = question
        .query_turn_id
        .as_deref()
        .or(question.answer_turn_id.as_deref())
    else {
        return Ok(None);
    };
    conversation
        .sessions
        .iter()
        .flat_map(|s| &s.turns)
        .position(|t| t.turn_id == own)
        .map(Some)
        .ok_or_else(|| {
            anyhow!(
                "--as-asked: question {:?} is asked at turn {own:?}, which is not a turn of conversation {:?}",
                question.question_id,
                conversation.conversation_id
            )
        })
}

/// A question's answer through a surface: the record ids, best first, the
/// time at the client, and (native) the ranker's feature release.
pub(super) struct Answer {
    pub(super) ids: Vec<String>,
    pub(super) ms: f64,
    pub(super) release: Option<String>,
}

/// Asks `question` through `surface` (the native one in `mode`) with the
/// key of its conversation's principal, for `asked` records. The native
/// answer's order is the relevance ranking, restricted to what the
/// selector and the context handoff let through.
pub(super) fn ask(
    door: &Door,
    surface: Surface,
    key: &str,
    principal: &str,
    question: &Question,
    mode: Option<RetrievalMode>,
    asked: usize,
) -> Result<Answer> {
    let started = Instant::now();
    let answer = match (surface, mode) {
        (Surface::Native, Some(mode)) => door.call(
            key,
            "/v1/recall",
            &json!({"kinds": ["episodic"], "max_records": asked,
                    "query": question.question, "mode": mode_name(mode)}),
        ),
        (Surface::Native, None) => bail!("the native surface is asked in a retrieval mode"),
        (Surface::Mem0, _) => door.call(
            key,
            "/search",
            &json!({"query": question.question, "user_id": principal, "limit": asked}),
        ),
        (Surface::Mem0Platform, _) => door.call(
            key,
            "/v3/memories/search/",
            &json!({"query": question.question,
                    "filters": {"user_id": principal}, "top_k": asked}),
        ),
    }?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let strings = |values: &Value, field: &str| -> Vec<String> {
        values
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r[field].as_str())
            .map(str::to_owned)
            .collect()
    };
    if surface != Surface::Native {
        return Ok(Answer {
            ids: strings(&answer["results"], "id"),
            ms,
            release: None,
        });
    }
    let selected: BTreeSet<&str> = answer["selected_record_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let ids = strings(&answer["relevance_receipt"]["results"], "record_id")
        .into_iter()
        .filter(|id| selected.contains(id.as_str()))
        .collect();
    Ok(Answer {
        ids,
        ms,
        release: answer["relevance_receipt"]["feature_release"]
            .as_str()
            .map(str::to_owned),
    })
}
