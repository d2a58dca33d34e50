//! Ranking in one place: candidate generation behind [`CandidateSource`],
//! then one fusion ([`fuse`]) that turns the candidates into scores and the
//! relevance receipt.
//!
//! The in-memory targets ([`MemorySource`], used by the
//! [`Retriever`](crate::Retriever)) and the PostgreSQL targets (in
//! `mosaic-pgsearch`) both implement [`CandidateSource`]: BM25 over turn
//! windows inside the read's eligible set (see [`crate::lexical::bm25_scores`],
//! which both call), vector similarity with the same kernel
//! ([`crate::ann::dot`]), exact claim-key matches, and per-candidate
//! features (whether the query names the record's speaker, its creation
//! time, whether its text places something in time, its eligible
//! neighbours). Everything after that, standard-score fusion, the speaker
//! prior, the time prior for questions asking when, recency for
//! current-state questions and the neighbour bonus, is [`fuse`]: deterministic, no I/O, so both paths rank
//! alike and report the same ranker release.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use mosaic_harness::memory_scope::{ScoredCandidate, SealedEligibleSet, fixed_point_score};

use crate::ann::SearchPlan;
use crate::error::IndexError;
use crate::funnel::{
    Explanation, FunnelConfig, Fusion, RANKER_RELEASE, Ranked, Recall, RecallQuery, RetrievalMode,
};
use crate::lexical::{Hit, LexicalIndex, LexicalParams};
use crate::scope::DocSet;
use crate::target::DocId;
use crate::text::{Role, asks_about_the_past, asks_current_state, asks_when, query_person, terms};
use crate::vector::{PassageMatch, VectorIndex};

/// Where a read's candidates and their features come from. Every method
/// answers inside the eligible set (and the tenant and policy) the source
/// was opened for; nothing outside it is ever returned or lends terms.
pub trait CandidateSource {
    /// BM25 hits for `query_terms` (analysed as `text::terms` gives them),
    /// over turn windows as `params` says, best first, ties by record id,
    /// at most `depth`. Statistics (document count, average length,
    /// document frequency) are those of the subjects (tenant + subject
    /// key) the eligible records belong to.
    fn lexical_hits(
        &mut self,
        query_terms: &[String],
        depth: usize,
        params: &LexicalParams,
    ) -> Result<Vec<Hit>, IndexError>;

    /// The `depth` eligible records most similar to `query_vector`
    /// ([`crate::ann::dot`]), best first, ties by record id, and the plan.
    fn vector_hits(
        &mut self,
        query_vector: &[f32],
        depth: usize,
    ) -> Result<(SearchPlan, Vec<Hit>), IndexError>;

    /// [`CandidateSource::vector_hits`] given the read's lexical hits,
    /// best first, which an approximate search may start from (see
    /// [`crate::AnnIndex::search_seeded`]). A source that cannot use them
    /// answers as without.
    fn vector_hits_seeded(
        &mut self,
        query_vector: &[f32],
        depth: usize,
        _lexical: &[Hit],
    ) -> Result<(SearchPlan, Vec<Hit>), IndexError> {
        self.vector_hits(query_vector, depth)
    }

    /// Eligible records carrying exactly `claim_key`, sorted by record id.
    fn claim_records(&mut self, claim_key: &str) -> Result<Vec<String>, IndexError>;

    /// Whether the query names the speaker of `record_id` (see
    /// [`LexicalIndex`]'s speaker labels and roles).
    fn speaker_named(
        &self,
        record_id: &str,
        query_terms: &[String],
        person: Option<Option<Role>>,
    ) -> bool;

    /// The creation time of `record_id`, if the lexical target holds it.
    fn created_at(&self, record_id: &str) -> Option<u64>;

    /// The role `record_id`'s speaker label names (`user:`, `assistant:`;
    /// see [`crate::text::speaker_role`]), if it names one. A source that
    /// cannot tell answers `None`.
    fn speaker_role(&self, _record_id: &str) -> Option<Role> {
        None
    }

    /// Whether `record_id`'s text places something in time
    /// (`text::places_in_time`).
    fn places_in_time(&self, record_id: &str) -> bool;

    /// The eligible records just before and just after `record_id` in its
    /// subject's timeline (creation time, then publication order).
    fn neighbours(&self, record_id: &str) -> Vec<String>;

    /// For a record indexed as several passages (longer than the
    /// embedder's window), the passage most similar to `query_vector`;
    /// `None` for a record embedded whole, or a source that keeps one
    /// vector per record.
    fn vector_passage(&self, _record_id: &str, _query_vector: &[f32]) -> Option<PassageMatch> {
        None
    }

    /// Whether `record_id`'s own text holds one of `query_terms` (a BM25
    /// hit over turn windows may match only through its neighbours).
    /// Asked after the lexical list ran. A source that cannot tell answers
    /// true, so every lexical hit counts as evidence of relevance.
    fn holds_query_term(&self, _record_id: &str, _query_terms: &[String]) -> bool {
        true
    }

    /// Whether `record_id` states a current value: its text states a
    /// change (`text::states_change`) or it carries a claim key (the
    /// current value of its claim's line). A source that cannot tell
    /// answers false: no update pairs.
    fn states_change(&self, _record_id: &str) -> bool {
        false
    }

    /// `record_id`'s place in time: creation time, then publication order
    /// (the order `neighbours` follows).
    fn recorded_order(&self, record_id: &str) -> Option<(u64, u64)> {
        self.created_at(record_id).map(|t| (t, 0))
    }

    /// Whether two records are lines of one speaker about one subject:
    /// the same subject timeline, and the same speaker label and role, or
    /// no label on either side.
    fn same_speaker(&self, _a: &str, _b: &str) -> bool {
        false
    }

    /// The similarity of two records' stored vectors ([`crate::ann::dot`]),
    /// for two records the vector list found; `None` otherwise (a lexical
    /// read has no update pairs).
    fn similarity(&self, _a: &str, _b: &str) -> Option<f32> {
        None
    }
}

/// The candidate lists of one read.
#[derive(Clone, Debug, Default)]
pub struct Candidates {
    /// Analysed query terms.
    pub query_terms: Vec<String>,
    /// BM25 hits, best first.
    pub lexical: Vec<Hit>,
    /// Vector hits, best first.
    pub vector: Vec<Hit>,
    /// Records matching a claim key, sorted, distinct.
    pub structured: Vec<String>,
    /// The vector plan, if vectors ran.
    pub vector_plan: Option<SearchPlan>,
    /// The passage that matched, for vector hits indexed as several.
    pub passages: BTreeMap<String, PassageMatch>,
}

/// Whether a read needs the lexical target's eligible docs (BM25, claim
/// keys or neighbours).
pub fn lexical_needed(config: &FunnelConfig, query: &RecallQuery<'_>) -> bool {
    query.mode != RetrievalMode::Vector
        || !query.claim_keys.is_empty()
        || config.neighbour_permille > 0
}

/// Runs the generators the query's mode asks for.
pub fn gather<S: CandidateSource + ?Sized>(
    source: &mut S,
    config: &FunnelConfig,
    query: &RecallQuery<'_>,
    query_vector: Option<&[f32]>,
) -> Result<Candidates, IndexError> {
    let depth = config.candidate_depth;
    let query_terms = terms(query.text);
    let lexical = match query.mode {
        RetrievalMode::Vector => Vec::new(),
        _ => source.lexical_hits(
            &query_terms,
            depth,
            &LexicalParams {
                k1_permille: config.bm25_k1_permille,
                b_permille: config.bm25_b_permille,
                window_permille: config.lexical_window_permille,
                window_radius: config.lexical_window_radius,
            },
        )?,
    };
    let mut passages = BTreeMap::new();
    let (vector_plan, vector) = match (query.mode, query_vector) {
        (RetrievalMode::Lexical, _) | (_, None) => (None, Vec::new()),
        (_, Some(v)) => {
            // The lexical hits (none for a vector read) seed the graph's
            // walk where the plan is the graph.
            let (plan, hits) = source.vector_hits_seeded(v, depth, &lexical)?;
            for hit in &hits {
                if let Some(m) = source.vector_passage(&hit.record_id, v) {
                    passages.insert(hit.record_id.clone(), m);
                }
            }
            (Some(plan), hits)
        }
    };
    let mut structured = Vec::new();
    for key in query.claim_keys {
        structured.extend(source.claim_records(key)?);
    }
    structured.sort();
    structured.dedup();
    Ok(Candidates {
        query_terms,
        lexical,
        vector,
        structured,
        vector_plan,
        passages,
    })
}

/// Candidates and features into scores, the relevance input and its
/// receipt (see the module documentation). `features` is the source the
/// candidates came from.
pub fn fuse<S: CandidateSource + ?Sized>(
    config: &FunnelConfig,
    query: &RecallQuery<'_>,
    candidates: Candidates,
    features: &S,
    query_sha256: &str,
    feature_release: String,
) -> Result<Recall, IndexError> {
    let Candidates {
        query_terms,
        lexical: lexical_hits,
        vector: vector_hits,
        structured,
        vector_plan,
        passages,
    } = candidates;
    let c = config;
    let rrf = |weight: u64, rank: usize| -> u64 {
        fixed_point_score(weight, c.rrf_k + rank as u64 + 1).unwrap_or(0)
    };
    let mut base: BTreeMap<String, u64> = BTreeMap::new();
    let mut explain: BTreeMap<String, Explanation> = BTreeMap::new();
    let blank = |id: &str| Explanation {
        record_id: id.to_owned(),
        lexical_rank: None,
        vector_rank: None,
        structured: false,
        neighbour_bonus: 0,
        speaker_bonus: 0,
        recency_bonus: 0,
        time_bonus: 0,
        update_lift: 0,
        vector_passage: None,
    };
    // A list's floor (its lowest candidate's score) and the standard
    // deviation of its candidates' scores.
    let moments = |hits: &[Hit]| -> (f64, f64) {
        let n = hits.len().max(1) as f64;
        let mean = hits.iter().map(|h| f64::from(h.score)).sum::<f64>() / n;
        let var = hits
            .iter()
            .map(|h| (f64::from(h.score) - mean).powi(2))
            .sum::<f64>()
            / n;
        let floor = hits.last().map_or(0.0, |h| f64::from(h.score));
        (floor, var.sqrt())
    };
    let lexical_moments = moments(&lexical_hits);
    let vector_moments = moments(&vector_hits);
    let contribution = |hits: &[Hit], (floor, sd): (f64, f64), weight: u64, rank: usize| -> u64 {
        match c.fusion {
            Fusion::ZScore => {
                let z = if sd > 0.0 {
                    ((f64::from(hits[rank].score) - floor) / sd).max(0.0)
                } else {
                    1.0
                };
                (z * rrf(weight, 0) as f64 / 3.0).round() as u64
            }
            Fusion::ReciprocalRank => rrf(weight, rank),
            Fusion::MinMaxScore => {
                let max = hits.first().map_or(0.0, |h| h.score);
                let min = hits.last().map_or(0.0, |h| h.score);
                let norm = if max > min {
                    (hits[rank].score - min) / (max - min)
                } else {
                    1.0
                };
                (f64::from(norm.clamp(0.0, 1.0)) * rrf(weight, 0) as f64).round() as u64
            }
        }
    };
    for (rank, hit) in lexical_hits.iter().enumerate() {
        *base.entry(hit.record_id.clone()).or_default() +=
            contribution(&lexical_hits, lexical_moments, c.lexical_weight, rank);
        explain
            .entry(hit.record_id.clone())
            .or_insert_with(|| blank(&hit.record_id))
            .lexical_rank = Some(rank);
    }
    let vector_weight = if is_dialogue(&lexical_hits, &vector_hits, features) {
        c.dialogue_vector_weight
    } else {
        c.vector_weight
    };
    for (rank, hit) in vector_hits.iter().enumerate() {
        *base.entry(hit.record_id.clone()).or_default() +=
            contribution(&vector_hits, vector_moments, vector_weight, rank);
        let e = explain
            .entry(hit.record_id.clone())
            .or_insert_with(|| blank(&hit.record_id));
        e.vector_rank = Some(rank);
        e.vector_passage = passages.get(&hit.record_id).copied();
    }
    for id in &structured {
        *base.entry(id.clone()).or_default() += rrf(c.structured_weight, 0);
        explain
            .entry(id.clone())
            .or_insert_with(|| blank(id))
            .structured = true;
    }
    // Relevance floor: a candidate with no evidence of relevance (its own
    // text holds no query term, whatever its turn window holds; no claim
    // key; and its vector similarity is below the floor) is not ranked.
    // Without a vector list (a lexical read) there is no similarity to
    // judge by, and every lexical hit is kept.
    if c.relevance_floor_permille > 0 && vector_plan.is_some() {
        let floor = c.relevance_floor_permille as f32 / 1_000.0;
        let mut evidence: BTreeSet<&str> = lexical_hits
            .iter()
            .filter(|h| h.score > 0.0 && features.holds_query_term(&h.record_id, &query_terms))
            .map(|h| h.record_id.as_str())
            .collect();
        evidence.extend(structured.iter().map(String::as_str));
        evidence.extend(
            vector_hits
                .iter()
                .filter(|h| h.score >= floor)
                .map(|h| h.record_id.as_str()),
        );
        base.retain(|id, _| evidence.contains(id.as_str()));
        explain.retain(|id, _| evidence.contains(id.as_str()));
    }
    // Speaker prior: a record whose speaker the query names gains
    // `speaker_permille` of its fused score (before any neighbour bonus,
    // which then lends the raised score).
    if c.speaker_permille > 0 {
        let person = c.speaker_roles.then(|| query_person(query.text));
        for (id, score) in base.iter_mut() {
            if features.speaker_named(id, &query_terms, person) {
                let bonus = score.saturating_mul(c.speaker_permille) / 1_000;
                *score = score.saturating_add(bonus);
                explain
                    .entry(id.clone())
                    .or_insert_with(|| blank(id))
                    .speaker_bonus = bonus;
            }
        }
    }
    // A question asking when: a candidate that places something in time
    // gains `time_permille` of its score.
    if c.time_permille > 0 && asks_when(query.text) {
        for (id, score) in base.iter_mut() {
            if features.places_in_time(id) {
                let bonus = score.saturating_mul(c.time_permille) / 1_000;
                *score = score.saturating_add(bonus);
                explain
                    .entry(id.clone())
                    .or_insert_with(|| blank(id))
                    .time_bonus = bonus;
            }
        }
    }
    // Recency for a question about the current state: later candidates
    // gain up to `recency_permille` of their score.
    if c.recency_permille > 0 && asks_current_state(query.text) {
        let times: Vec<(String, u64)> = base
            .keys()
            .filter_map(|id| features.created_at(id).map(|t| (id.clone(), t)))
            .collect();
        let oldest = times.iter().map(|(_, t)| *t).min().unwrap_or(0);
        let newest = times.iter().map(|(_, t)| *t).max().unwrap_or(0);
        if newest > oldest {
            for (id, t) in times {
                if let Some(score) = base.get_mut(&id) {
                    let place = (t - oldest) as f64 / (newest - oldest) as f64;
                    let bonus = (*score as f64 * place * c.recency_permille as f64 / 1_000.0)
                        .round() as u64;
                    *score = score.saturating_add(bonus);
                    explain
                        .entry(id.clone())
                        .or_insert_with(|| blank(&id))
                        .recency_bonus = bonus;
                }
            }
        }
    }
    let mut fused = base.clone();
    if c.neighbour_permille > 0 {
        let mut neighbour_cache: HashMap<String, Vec<String>> = HashMap::new();
        let mut targets: Vec<String> = base.keys().cloned().collect();
        for id in base.keys() {
            let n = features.neighbours(id);
            targets.extend(n.iter().cloned());
            neighbour_cache.insert(id.clone(), n);
        }
        targets.sort();
        targets.dedup();
        for id in targets {
            let neighbours = match neighbour_cache.get(&id) {
                Some(n) => n.clone(),
                None => features.neighbours(&id),
            };
            let sum: u64 = neighbours.iter().filter_map(|n| base.get(n)).sum();
            let bonus = sum.saturating_mul(c.neighbour_permille) / 2_000;
            if bonus > 0 {
                *fused.entry(id.clone()).or_default() += bonus;
                explain
                    .entry(id.clone())
                    .or_insert_with(|| blank(&id))
                    .neighbour_bonus = bonus;
            }
        }
    }
    if c.update_head > 0 && !asks_about_the_past(query.text) {
        for (id, lift) in update_lifts(c, &fused, features) {
            if let Some(score) = fused.get_mut(&id) {
                *score = score.saturating_add(lift);
            }
            explain
                .entry(id.clone())
                .or_insert_with(|| blank(&id))
                .update_lift = lift;
        }
    }
    let scores: Vec<ScoredCandidate> = fused
        .into_iter()
        .map(|(record_id, score)| ScoredCandidate { record_id, score })
        .collect();
    // Ranked over the sealed set in place: the read's whole eligible set
    // is not copied into a relevance input (the scores are kept, so the
    // input can be rebuilt to verify the receipt).
    let receipt = query.eligible.rank(
        query_sha256,
        &feature_release,
        RANKER_RELEASE,
        &scores,
        query.max_results,
    )?;
    let explanations = receipt
        .results
        .iter()
        .map(|r| {
            explain
                .remove(&r.record_id)
                .unwrap_or_else(|| blank(&r.record_id))
        })
        .collect();
    Ok(Recall {
        ranked: Some(std::sync::Arc::new(Ranked {
            query_sha256: query_sha256.to_owned(),
            feature_release,
            ranker_release: RANKER_RELEASE.to_owned(),
            scores,
            max_results: query.max_results,
        })),
        receipt,
        explanations,
        vector_plan,
        cache_hit: false,
    })
}

/// Whether a read's candidates are mostly lines of a user and an
/// assistant: more than half of the distinct candidates of both lists
/// have a speaker label that is a role ([`CandidateSource::speaker_role`]).
///
/// The lexical list's lead over the vector list (`vector_weight` below
/// the lexical weight) was chosen on chats between people named in the
/// text, where names, places and other rare words make a shared term
/// strong evidence. An assistant's replies are long and restate the
/// user's own words across many topics, so a shared term is weaker
/// evidence there, and neither list is preferred
/// (`dialogue_vector_weight`). Both lists are read (a vector read has
/// no lexical list and the weight does not matter).
fn is_dialogue<S: CandidateSource + ?Sized>(lexical: &[Hit], vector: &[Hit], features: &S) -> bool {
    if lexical.is_empty() || vector.is_empty() {
        return false;
    }
    let ids: BTreeSet<&str> = lexical
        .iter()
        .chain(vector)
        .map(|h| h.record_id.as_str())
        .collect();
    let roles = ids
        .iter()
        .filter(|id| features.speaker_role(id).is_some())
        .count();
    roles * 2 > ids.len()
}

/// Update pairs at the head of a ranking: the lift each newer value needs
/// to rank just above the older values it replaces.
///
/// Among the `update_head` best candidates (score, then record id, as the
/// receipt orders them), a record and an older one form an update pair
/// when they are lines of one speaker about one subject
/// ([`CandidateSource::same_speaker`]), the newer line states a change
/// ([`CandidateSource::states_change`]: "I moved to Porto", "... instead",
/// "... anymore", or a fact holding a claim, its line's current value) and
/// their stored vectors are related (similarity at
/// least `update_band_permille`). Both already answer the question (they
/// are at its head), so they are two values of the thing it asks about,
/// and the newer one is the current value: it is placed one point above
/// the best of the older values it pairs with, when it is not above it
/// already. Records are visited oldest first, so a chain of changes
/// (Lisbon, Porto, Braga) ends newest first. Only the order within the head
/// changes: a lifted record was in the head and stays there, and no
/// record outside it moves, so which records the head holds is the same.
fn update_lifts<S: CandidateSource + ?Sized>(
    c: &FunnelConfig,
    fused: &BTreeMap<String, u64>,
    features: &S,
) -> Vec<(String, u64)> {
    let mut head: Vec<(&str, u64)> = fused.iter().map(|(id, s)| (id.as_str(), *s)).collect();
    head.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    head.truncate(c.update_head);
    let mut timed: Vec<((u64, u64), usize)> = head
        .iter()
        .enumerate()
        .filter_map(|(i, (id, _))| features.recorded_order(id).map(|t| (t, i)))
        .collect();
    timed.sort();
    let band = c.update_band_permille as f32 / 1_000.0;
    let mut lifts = Vec::new();
    for (k, &(_, newer)) in timed.iter().enumerate() {
        let id = head[newer].0;
        if !features.states_change(id) {
            continue;
        }
        let best_older = timed[..k]
            .iter()
            .filter(|&&(t, older)| {
                t < timed[k].0
                    && features.same_speaker(head[older].0, id)
                    && features
                        .similarity(head[older].0, id)
                        .is_some_and(|s| s >= band)
            })
            .map(|&(_, older)| head[older].1)
            .max();
        if let Some(best) = best_older
            && best >= head[newer].1
        {
            let lift = best + 1 - head[newer].1;
            head[newer].1 = best + 1;
            lifts.push((id.to_owned(), lift));
        }
    }
    lifts
}

/// The in-memory targets as a candidate source for one read.
pub struct MemorySource<'a> {
    lexical: &'a LexicalIndex,
    vector: &'a VectorIndex,
    eligible: &'a SealedEligibleSet,
    tenant_id: &'a str,
    policy_sha256: &'a str,
    /// The eligible docs of the lexical target (empty when the read needs
    /// none of BM25, claim keys or neighbours).
    lex_docs: Arc<DocSet>,
    /// The vector list's hits, once it ran: the records whose similarity
    /// to each other [`CandidateSource::similarity`] answers (as the
    /// PostgreSQL source, which holds only their vectors).
    found: std::collections::HashSet<String>,
    /// The lexical docs of the records the lists found (`None`: not held
    /// by the lexical target): the lexical list hands its hits' docs
    /// through, and each vector hit's is found once, from its vector doc
    /// as a hint (`FencedIndex::docs_of_hinted`), so the features fusion
    /// asks of a candidate, several each, are read by doc number, not each
    /// by a lookup of its id among every record the index holds. A record
    /// found by neither list is looked up as before.
    known: HashMap<String, Option<DocId>, foldhash::fast::RandomState>,
}

impl<'a> MemorySource<'a> {
    /// The source of `query` over these targets; the lexical docs are
    /// resolved only when `lexical_needed`.
    pub fn new(
        lexical: &'a LexicalIndex,
        vector: &'a VectorIndex,
        query: &RecallQuery<'a>,
        lexical_needed: bool,
    ) -> Self {
        let lex_docs = if lexical_needed {
            lexical.resolve_eligible(query.eligible, query.tenant_id, query.policy_sha256)
        } else {
            Arc::new(DocSet::default())
        };
        MemorySource {
            lexical,
            vector,
            eligible: query.eligible,
            tenant_id: query.tenant_id,
            policy_sha256: query.policy_sha256,
            lex_docs,
            found: std::collections::HashSet::new(),
            known: HashMap::default(),
        }
    }

    /// The lexical doc of `record_id`: the one its list handed through,
    /// else the lexical target's.
    fn lex_doc(&self, record_id: &str) -> Option<DocId> {
        match self.known.get(record_id) {
            Some(doc) => *doc,
            None => self.lexical.doc_of(record_id),
        }
    }
}

impl CandidateSource for MemorySource<'_> {
    fn lexical_hits(
        &mut self,
        query_terms: &[String],
        depth: usize,
        params: &LexicalParams,
    ) -> Result<Vec<Hit>, IndexError> {
        let found = self
            .lexical
            .search_with_docs(query_terms, &self.lex_docs, depth, params);
        self.known.reserve(found.len());
        Ok(found
            .into_iter()
            .map(|(doc, hit)| {
                self.known.insert(hit.record_id.clone(), Some(doc));
                hit
            })
            .collect())
    }

    fn vector_hits(
        &mut self,
        query_vector: &[f32],
        depth: usize,
    ) -> Result<(SearchPlan, Vec<Hit>), IndexError> {
        self.vector_hits_seeded(query_vector, depth, &[])
    }

    fn vector_hits_seeded(
        &mut self,
        query_vector: &[f32],
        depth: usize,
        lexical: &[Hit],
    ) -> Result<(SearchPlan, Vec<Hit>), IndexError> {
        let docs = self
            .vector
            .resolve_eligible(self.eligible, self.tenant_id, self.policy_sha256);
        // The lexical hits' docs are the vector target's too when both
        // numbered their records alike: given as hints (see
        // `FencedIndex::docs_of_hinted`).
        let seeds: Vec<(DocId, &str)> = lexical
            .iter()
            .map(|h| {
                let hint = self.known.get(&h.record_id).copied().flatten();
                (hint.unwrap_or(DocId::MAX), h.record_id.as_str())
            })
            .collect();
        let (plan, found) = self
            .vector
            .search_docs_seeded_docs(query_vector, &docs, depth, &seeds);
        self.found
            .extend(found.iter().map(|(_, h)| h.record_id.clone()));
        // Each vector hit's lexical doc, its vector doc as the hint.
        let unknown: Vec<(DocId, &str)> = found
            .iter()
            .filter(|(_, h)| !self.known.contains_key(&h.record_id))
            .map(|(doc, h)| (*doc, h.record_id.as_str()))
            .collect();
        let docs_of = self.lexical.docs_of_hinted(&unknown);
        for ((_, id), doc) in unknown.iter().zip(docs_of) {
            self.known.insert((*id).to_owned(), doc);
        }
        // Fusion reads each candidate's facts next: their misses asked for
        // together rather than met one at a time.
        for doc in self.known.values().flatten() {
            self.lexical.prefetch_doc(*doc);
        }
        let hits = found.into_iter().map(|(_, h)| h).collect();
        Ok((plan, hits))
    }

    fn claim_records(&mut self, claim_key: &str) -> Result<Vec<String>, IndexError> {
        Ok(self
            .lexical
            .claim_docs(self.tenant_id, claim_key, &self.lex_docs))
    }

    fn speaker_named(
        &self,
        record_id: &str,
        query_terms: &[String],
        person: Option<Option<Role>>,
    ) -> bool {
        self.lex_doc(record_id)
            .is_some_and(|d| self.lexical.speaker_named(d, query_terms, person))
    }

    fn created_at(&self, record_id: &str) -> Option<u64> {
        self.lexical.created_at(self.lex_doc(record_id)?)
    }

    fn speaker_role(&self, record_id: &str) -> Option<Role> {
        self.lexical.speaker_role(self.lex_doc(record_id)?)
    }

    fn places_in_time(&self, record_id: &str) -> bool {
        self.lex_doc(record_id)
            .is_some_and(|d| self.lexical.places_in_time(d))
    }

    fn neighbours(&self, record_id: &str) -> Vec<String> {
        self.lex_doc(record_id)
            .map_or_else(Vec::new, |d| self.lexical.neighbours(d, &self.lex_docs))
    }

    fn vector_passage(&self, record_id: &str, query_vector: &[f32]) -> Option<PassageMatch> {
        self.vector.passage_match(record_id, query_vector)
    }

    fn holds_query_term(&self, record_id: &str, query_terms: &[String]) -> bool {
        self.lex_doc(record_id)
            .is_some_and(|d| self.lexical.holds_any(d, query_terms))
    }

    fn states_change(&self, record_id: &str) -> bool {
        self.lex_doc(record_id)
            .is_some_and(|d| self.lexical.states_change(d))
    }

    fn recorded_order(&self, record_id: &str) -> Option<(u64, u64)> {
        self.lexical.recorded_order(self.lex_doc(record_id)?)
    }

    fn same_speaker(&self, a: &str, b: &str) -> bool {
        match (self.lex_doc(a), self.lex_doc(b)) {
            (Some(a), Some(b)) => self.lexical.same_speaker(a, b),
            _ => false,
        }
    }

    fn similarity(&self, a: &str, b: &str) -> Option<f32> {
        if !(self.found.contains(a) && self.found.contains(b)) {
            return None;
        }
        Some(crate::ann::dot(
            self.vector.vector_of(a)?,
            self.vector.vector_of(b)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_harness::canonical::sha256_hex;
    use mosaic_harness::memory_scope::{
        EligibleEntry, EligibleSet, SealedEligibleSet, verify_relevance_receipt,
    };

    /// A source that is not an index: fixed lists and features, and a log
    /// of which generators ran.
    #[derive(Default)]
    struct Scripted {
        calls: Vec<&'static str>,
        /// How many of "a", "b", "c" (in that order) are lines whose
        /// speaker label is a role.
        roles: usize,
        /// The lexical hits the vector list was given to start from.
        seeds: Vec<String>,
    }

    fn hit(id: &str, score: f32) -> Hit {
        Hit {
            record_id: id.into(),
            score,
        }
    }

    impl CandidateSource for Scripted {
        fn lexical_hits(
            &mut self,
            _: &[String],
            depth: usize,
            _: &LexicalParams,
        ) -> Result<Vec<Hit>, IndexError> {
            self.calls.push("lexical");
            let mut hits = vec![hit("a", 3.0), hit("b", 2.0), hit("c", 1.0)];
            hits.truncate(depth);
            Ok(hits)
        }

        fn vector_hits(
            &mut self,
            _: &[f32],
            _: usize,
        ) -> Result<(SearchPlan, Vec<Hit>), IndexError> {
            self.calls.push("vector");
            Ok((
                SearchPlan::ExactScan,
                vec![hit("c", 0.9), hit("a", 0.5), hit("b", 0.1)],
            ))
        }

        fn vector_hits_seeded(
            &mut self,
            query_vector: &[f32],
            depth: usize,
            lexical: &[Hit],
        ) -> Result<(SearchPlan, Vec<Hit>), IndexError> {
            self.seeds = lexical.iter().map(|h| h.record_id.clone()).collect();
            self.vector_hits(query_vector, depth)
        }

        fn claim_records(&mut self, claim_key: &str) -> Result<Vec<String>, IndexError> {
            self.calls.push("claims");
            Ok(if claim_key == "pet.name" {
                vec!["b".into()]
            } else {
                Vec::new()
            })
        }

        fn speaker_named(&self, record_id: &str, _: &[String], _: Option<Option<Role>>) -> bool {
            record_id == "c"
        }

        fn created_at(&self, record_id: &str) -> Option<u64> {
            Some(match record_id {
                "a" => 1,
                "b" => 2,
                _ => 3,
            })
        }

        fn neighbours(&self, _: &str) -> Vec<String> {
            Vec::new()
        }

        fn places_in_time(&self, _: &str) -> bool {
            false
        }

        fn speaker_role(&self, record_id: &str) -> Option<Role> {
            ["a", "b", "c"]
                .iter()
                .take(self.roles)
                .any(|id| *id == record_id)
                .then_some(Role::User)
        }
    }

    fn eligible() -> EligibleSet {
        EligibleSet {
            scope_commitments: Vec::new(),
            read_context_sha256: sha256_hex(b"read"),
            entries: ["a", "b", "c"]
                .iter()
                .map(|id| EligibleEntry {
                    record_id: (*id).into(),
                    content_sha256: sha256_hex(id.as_bytes()),
                })
                .collect(),
        }
    }

    fn run(mode: RetrievalMode, text: &str, claim_keys: &[String]) -> (Vec<&'static str>, Recall) {
        run_with(Scripted::default(), mode, text, claim_keys)
    }

    fn run_with(
        mut source: Scripted,
        mode: RetrievalMode,
        text: &str,
        claim_keys: &[String],
    ) -> (Vec<&'static str>, Recall) {
        let set = SealedEligibleSet::seal(eligible()).unwrap();
        let query = RecallQuery {
            tenant_id: "t",
            policy_sha256: "p",
            selector_release: "s",
            read_subject: "r",
            revocation_generation: 0,
            text,
            claim_keys,
            eligible: &set,
            max_results: 10,
            mode,
        };
        let config = FunnelConfig::default();
        let vector = [1.0f32, 0.0];
        let candidates = gather(&mut source, &config, &query, Some(&vector)).unwrap();
        let recall = fuse(
            &config,
            &query,
            candidates,
            &source,
            &sha256_hex(text.as_bytes()),
            "features".into(),
        )
        .unwrap();
        (source.calls, recall)
    }

    #[test]
    fn only_the_generators_the_mode_asks_for_run() {
        let claims = ["pet.name".to_owned()];
        assert_eq!(run(RetrievalMode::Lexical, "x", &[]).0, ["lexical"]);
        assert_eq!(run(RetrievalMode::Vector, "x", &[]).0, ["vector"]);
        assert_eq!(
            run(RetrievalMode::Hybrid, "x", &claims).0,
            ["lexical", "vector", "claims"]
        );
    }

    /// A hybrid read gives the vector list its lexical hits, best first,
    /// to start an approximate search from; a vector read has none.
    #[test]
    fn the_vector_list_is_given_the_lexical_hits() {
        let seeds = |mode| {
            let set = SealedEligibleSet::seal(eligible()).unwrap();
            let query = RecallQuery {
                tenant_id: "t",
                policy_sha256: "p",
                selector_release: "s",
                read_subject: "r",
                revocation_generation: 0,
                text: "x",
                claim_keys: &[],
                eligible: &set,
                max_results: 10,
                mode,
            };
            let mut source = Scripted::default();
            gather(
                &mut source,
                &FunnelConfig::default(),
                &query,
                Some(&[1.0, 0.0]),
            )
            .unwrap();
            source.seeds
        };
        assert_eq!(seeds(RetrievalMode::Hybrid), ["a", "b", "c"]);
        assert!(seeds(RetrievalMode::Vector).is_empty());
    }

    #[test]
    fn fusion_takes_features_from_whatever_source_answers() {
        let claims = ["pet.name".to_owned()];
        let (_, plain) = run(RetrievalMode::Hybrid, "what happened", &[]);
        let (_, recall) = run(RetrievalMode::Hybrid, "what happened", &claims);
        let by_id = |r: &Recall, id: &str| {
            r.explanations
                .iter()
                .zip(&r.receipt.results)
                .find(|(e, _)| e.record_id == id)
                .map(|(e, s)| (e.clone(), s.score))
                .unwrap()
        };
        // The source names c's speaker: c gains half its score.
        let (c, c_score) = by_id(&recall, "c");
        assert!(c.speaker_bonus > 0);
        assert_eq!(c.speaker_bonus, (c_score - c.speaker_bonus) / 2);
        assert_eq!(by_id(&plain, "a").0.speaker_bonus, 0);
        // b matches the claim key: the structured weight is added.
        let (b, b_score) = by_id(&recall, "b");
        assert!(b.structured && b_score > by_id(&plain, "b").1);
        assert_eq!(recall.receipt.ranker_release, RANKER_RELEASE);
        let input = recall.relevance_input(&eligible()).unwrap();
        verify_relevance_receipt(&input, &recall.receipt).unwrap();
        // A current-state question: the source's newest record gains recency.
        let (_, now) = run(RetrievalMode::Hybrid, "where is it now", &[]);
        assert_eq!(by_id(&now, "a").0.recency_bonus, 0);
        assert!(by_id(&now, "c").0.recency_bonus > 0);
    }

    #[test]
    fn between_a_user_and_an_assistant_the_two_lists_weigh_alike() {
        let score = |roles: usize, id: &str| {
            let source = Scripted {
                roles,
                ..Scripted::default()
            };
            let (_, recall) = run_with(source, RetrievalMode::Hybrid, "what happened", &[]);
            let i = recall.record_ids().iter().position(|r| *r == id).unwrap();
            recall.receipt.results[i].score
        };
        // "c" leads the vector list; "b" is the vector list's floor (it
        // gains nothing from it) and second in the lexical list.
        let named = (score(0, "c"), score(0, "b"));
        let minority = (score(1, "c"), score(1, "b"));
        let dialogue = (score(2, "c"), score(2, "b"));
        // Between named people (or when only a minority of the candidates
        // are role lines) the lexical list keeps its lead.
        assert_eq!(named, minority);
        // When most are lines of a user and an assistant, the vector
        // list's best gains weight (1,000 against 600) and a record the
        // vector list gives nothing is unchanged.
        assert_eq!(dialogue.1, named.1);
        assert!(dialogue.0 > named.0, "{dialogue:?} against {named:?}");
        let c = FunnelConfig::default();
        assert!(c.dialogue_vector_weight > c.vector_weight);
    }

    #[test]
    fn a_candidate_with_no_evidence_of_relevance_is_not_ranked() {
        // "d" is found by the vector list only, at similarity 0.1.
        let set = SealedEligibleSet::seal(EligibleSet {
            scope_commitments: Vec::new(),
            read_context_sha256: sha256_hex(b"read"),
            entries: ["a", "d"]
                .iter()
                .map(|id| EligibleEntry {
                    record_id: (*id).into(),
                    content_sha256: sha256_hex(id.as_bytes()),
                })
                .collect(),
        })
        .unwrap();
        let query = RecallQuery {
            tenant_id: "t",
            policy_sha256: "p",
            selector_release: "s",
            read_subject: "r",
            revocation_generation: 0,
            text: "x",
            claim_keys: &[],
            eligible: &set,
            max_results: 10,
            mode: RetrievalMode::Hybrid,
        };
        let ranked = |config: &FunnelConfig| {
            let candidates = Candidates {
                lexical: vec![hit("a", 2.0)],
                vector: vec![hit("d", 0.1), hit("a", 0.05)],
                vector_plan: Some(SearchPlan::ExactScan),
                ..Candidates::default()
            };
            let recall = fuse(
                config,
                &query,
                candidates,
                &Scripted::default(),
                &sha256_hex(b"x"),
                "features".into(),
            )
            .unwrap();
            recall
                .record_ids()
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        };
        // Below the floor and no term matched: not ranked. "a" matched a
        // term, so its low similarity does not drop it.
        assert_eq!(ranked(&FunnelConfig::default()), ["a"]);
        let off = FunnelConfig {
            relevance_floor_permille: 0,
            ..FunnelConfig::default()
        };
        let mut all = ranked(&off);
        all.sort();
        assert_eq!(all, ["a", "d"]);
    }
}
