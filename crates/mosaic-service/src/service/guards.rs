//! Write guards over a memory's text: duplicates and near-duplicates of a
//! live record of the same subject and kind, prose contradictions of one,
//! and which evidence may create shared semantic memory.
//!
//! Each check is deterministic over the proposal and the store's live
//! records; what it finds is fed to the gate as the server's own conflict
//! observation (`duplicate`, `contradicts`), so the gate rejects the
//! proposal and opens a review case exactly as for a structured claim.

use mosaic_harness::memory_write::ConflictRelation;

use super::*;
use crate::settings::{SharedSemanticEvidence, WriteGuards};

mod text;

use text::{GuardedText, StoredText, is_structured, normalized_words};

/// Detector release of the text guards (named in every observation).
pub const TEXT_GUARD_RELEASE: &str = "mosaic.text-guard.v1";

/// Detector release of the vector guard: cosine similarity of the
/// proposal's embedding with a live record's stored one (the embedder in
/// force is the server's, bound into every relevance receipt).
pub const VECTOR_GUARD_RELEASE: &str = "mosaic.vector-guard.v1";

/// How many of the subject's nearest records by embedding the vector guard
/// reads back from the store.
pub const VECTOR_GUARD_CANDIDATES: usize = 8;

/// How long a proposal waits for the http embedder's answer before its
/// vector guard is skipped (the lexical guard has run).
pub const GUARD_EMBED_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long the guard leaves an embedder alone after it failed or did not
/// answer in time (proposals meanwhile run the lexical guard only).
pub const GUARD_EMBED_PAUSE: std::time::Duration = std::time::Duration::from_secs(10);

/// Most live records of one subject and kind a proposal's text is compared
/// with when the store is scanned (see [`ServiceCore::text_scan`]).
pub const TEXT_SCAN_LIMIT: usize = 256;

/// How many of the subject's records sharing the most (rarity-weighted)
/// index terms with a proposal's text are compared with it. A duplicate or
/// near-duplicate shares nearly all of them and ranks first; the rest leave
/// room for restatements that share the subject and predicate only.
pub const GUARD_CANDIDATES: usize = 32;

/// The stored texts the text guard read during one call, by record id,
/// for one kind and subject: one conversation call's messages are
/// compared with largely the same records, each then read from the store
/// and split into words once. `None`: the record was not live for that
/// kind and subject when read. Holding them for the call is no staler than
/// before: every proposal of a call is prepared before any is committed.
#[derive(Default)]
pub(super) struct GuardTexts {
    /// The kind and subject key the texts were read for.
    scope: Option<(MemoryKind, String)>,
    texts: HashMap<String, Option<Arc<StoredText>>>,
}

/// Most bytes of stored text the [`ParsedTexts`] hold (their lower-case
/// copies), and the longest text they take: what a subject's candidates
/// share between calls fits many times over.
pub const PARSED_TEXTS_BYTES: usize = 8 << 20;
const PARSED_TEXT_MAX_BYTES: usize = 64 << 10;

/// Stored texts split into words, by the text itself, shared by every
/// call: single proposals of one subject are compared with largely the
/// same stored records, one call after another, and each call read them
/// from the store only to split the same texts into words again. Keyed by
/// the content, so an entry is [`StoredText::of`] that content whatever
/// record holds it, never stale; which records are live is still read from
/// the store on every call. Emptied whole when full, and by an erasure
/// (`purge_erased_bytes`, docs/ERASURE.md), so an erased text is not kept:
/// texts read from the store before an emptying are not kept after it.
#[derive(Default)]
pub(super) struct ParsedTexts {
    held: Mutex<ParsedHeld>,
}

#[derive(Default)]
struct ParsedHeld {
    texts: HashMap<String, Arc<StoredText>, foldhash::fast::RandomState>,
    bytes: usize,
    /// How many times an erasure emptied them.
    emptied: u64,
}

impl ParsedTexts {
    /// What [`ParsedTexts::of`] is given with texts read after this call.
    fn read_at(&self) -> u64 {
        lock_parsed(&self.held).emptied
    }

    /// [`StoredText::of`] each of `contents`, in order: those held are
    /// taken, the others split (outside the lock) and kept unless an
    /// erasure emptied the texts since `read_at` (when `contents` were
    /// read from the store).
    fn of(&self, contents: Vec<String>, read_at: u64) -> Vec<Arc<StoredText>> {
        let mut out: Vec<Option<Arc<StoredText>>> = {
            let held = lock_parsed(&self.held);
            contents
                .iter()
                .map(|content| held.texts.get(content.as_str()).cloned())
                .collect()
        };
        let mut new = Vec::new();
        for (slot, content) in out.iter_mut().zip(contents) {
            if slot.is_none() {
                let text = Arc::new(StoredText::of(&content));
                *slot = Some(Arc::clone(&text));
                if content.len() <= PARSED_TEXT_MAX_BYTES {
                    new.push((content, text));
                }
            }
        }
        if !new.is_empty() {
            let mut held = lock_parsed(&self.held);
            if held.emptied == read_at {
                for (content, text) in new {
                    if held.bytes + content.len() > PARSED_TEXTS_BYTES {
                        held.texts.clear();
                        held.bytes = 0;
                    }
                    let len = content.len();
                    if held.texts.insert(content, text).is_none() {
                        held.bytes += len;
                    }
                }
            }
        }
        out.into_iter().flatten().collect()
    }

    /// Forgets every text held, and those read before and not yet kept.
    pub(super) fn clear(&self) {
        let mut held = lock_parsed(&self.held);
        held.texts.clear();
        held.bytes = 0;
        held.emptied += 1;
    }

    /// How many texts are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock_parsed(&self.held).texts.len()
    }
}

/// Locks the parsed texts; a panic while they were held left them whole
/// (an insert or a clear), so the lock is taken over.
fn lock_parsed(held: &Mutex<ParsedHeld>) -> MutexGuard<'_, ParsedHeld> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

impl GuardTexts {
    /// The texts of `ids` live for `kind` and `subject`, in the order of
    /// `ids`; those not read yet are read with `read` (the live ones'
    /// contents among the ids it is given), once per call.
    fn live<'a>(
        &'a mut self,
        (kind, subject): (MemoryKind, &MemorySubject),
        ids: &'a [String],
        parsed: &ParsedTexts,
        read: impl FnOnce(&[String]) -> ServiceResult<Vec<(String, String)>>,
    ) -> ServiceResult<Vec<(&'a str, &'a StoredText)>> {
        let scope = (kind, subject.key());
        if self.scope.as_ref() != Some(&scope) {
            self.texts.clear();
            self.scope = Some(scope);
        }
        let missing: Vec<String> = ids
            .iter()
            .filter(|id| !self.texts.contains_key(id.as_str()))
            .cloned()
            .collect();
        if !missing.is_empty() {
            let read_at = parsed.read_at();
            let (found, contents): (Vec<String>, Vec<String>) = read(&missing)?.into_iter().unzip();
            let mut found: HashMap<String, Arc<StoredText>> = found
                .into_iter()
                .zip(parsed.of(contents, read_at))
                .collect();
            for id in missing {
                let text = found.remove(&id);
                self.texts.insert(id, text);
            }
        }
        let texts = &self.texts;
        Ok(ids
            .iter()
            .filter_map(|id| Some((id.as_str(), &**texts.get(id.as_str())?.as_ref()?)))
            .collect())
    }
}

impl ServiceCore {
    /// The text guards' observations for a proposal: every live record of
    /// the same tenant, subject and kind, visible to the key, whose
    /// normalised text equals the proposal's, is a near-duplicate by token
    /// Jaccard at the tenant's threshold, or contradicts it by a
    /// deterministic pattern. The proposal's own record (a replay) and the
    /// record it declares it supersedes take no part.
    ///
    /// The texts compared are the `GUARD_CANDIDATES` indexed records of the
    /// subject sharing the most rarity-weighted index terms with the
    /// proposal (the lexical index's postings of the proposal's own terms),
    /// each then read from the store so only live ones of the same kind
    /// count: a duplicate, a near-duplicate or a restatement of the same
    /// subject and predicate shares most of its terms, so it is found
    /// whatever the subject's size, at a cost that does not grow with it. A
    /// text without index terms (stopwords only), and the PostgreSQL
    /// indexes, fall back to the first `TEXT_SCAN_LIMIT` live records of the
    /// subject and kind in the store.
    ///
    /// With `vector` (the proposal's embedding, computed before any lock
    /// by [`ServiceCore::guard_embed`]) the vector guard runs too: the
    /// subject's `VECTOR_GUARD_CANDIDATES` live records of the kind nearest
    /// to it in the vector index (in process, or PostgreSQL's vector table;
    /// see [`ServiceCore::guard_nearest`]), read back from the store, are
    /// duplicates when their cosine similarity reaches the tenant's
    /// `near_duplicate_cosine_permille` (1000: off).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn text_scan(
        &self,
        inner: &mut Inner,
        guards: &WriteGuards,
        tenant: &str,
        principal: &str,
        grant: &MemoryWriteGrant,
        (record_id, supersedes): (&str, Option<&str>),
        request: &ProposeRequest,
        vector: Option<&[f32]>,
        texts: &mut GuardTexts,
    ) -> ServiceResult<Vec<ConflictObservation>> {
        if !subject_visible(principal, grant, &request.subject) {
            return Ok(Vec::new());
        }
        let filter = RecordFilter {
            subject: Some(request.subject.clone()),
            kinds: vec![request.kind],
            states: vec![ListedState::Active, ListedState::Publishing],
            include_content: true,
            ..RecordFilter::tenant(tenant, TEXT_SCAN_LIMIT)
        };
        let new = normalized_words(&request.content);
        let guarded = GuardedText::new(&new);
        let mut out = Vec::new();
        let (candidates, scanned): (Vec<String>, Vec<(String, StoredText)>);
        let rows: Vec<(&str, &StoredText)> = match self.guard_candidates(tenant, request) {
            Some(ids) => {
                // The live ones' texts alone (no record decoded), read
                // once per call, compared in the index's order.
                candidates = ids;
                texts.live(
                    (request.kind, &request.subject),
                    &candidates,
                    &self.parsed_texts,
                    |ids| {
                        Ok(inner.store.live_contents(
                            tenant,
                            ids,
                            request.kind,
                            &request.subject,
                        )?)
                    },
                )?
            }
            // Bounded: the first TEXT_SCAN_LIMIT live records of the
            // subject and kind (by record id, a digest: an arbitrary sample).
            None => {
                scanned = inner
                    .store
                    .list_records(&filter)?
                    .records
                    .into_iter()
                    .filter_map(|row| Some((row.record_id, StoredText::of(&row.content?))))
                    .collect();
                scanned
                    .iter()
                    .map(|(id, text)| (id.as_str(), text))
                    .collect()
            }
        };
        for (existing_id, old) in rows {
            if existing_id == record_id || supersedes == Some(existing_id) {
                continue;
            }
            out.extend(text_observation(
                guards,
                &guarded,
                record_id,
                existing_id,
                old,
            )?);
        }
        if let Some(vector) = vector
            && vector_guard_compares(guards, request.kind, &request.subject)
        {
            self.vector_scan(
                inner,
                tenant,
                (record_id, supersedes),
                request,
                vector,
                guards.near_duplicate_cosine_permille,
                &mut out,
            )?;
        }
        Ok(out)
    }

    /// The vector guard's observations (see [`ServiceCore::text_scan`]),
    /// appended to `out` for records it does not already relate.
    #[allow(clippy::too_many_arguments)]
    fn vector_scan(
        &self,
        inner: &mut Inner,
        tenant: &str,
        (record_id, supersedes): (&str, Option<&str>),
        request: &ProposeRequest,
        vector: &[f32],
        cosine_permille: u32,
        out: &mut Vec<ConflictObservation>,
    ) -> ServiceResult<()> {
        if is_structured(&request.content) {
            return Ok(());
        }
        // The hits at the threshold the guard does not already relate,
        // best first; then the live ones of the proposal's kind and subject
        // among them, in one read (the text guard's, `live_contents`).
        let near: Vec<String> = self
            .guard_nearest(tenant, request, vector)?
            .into_iter()
            .take_while(|(_, cosine)| cosine * 1000.0 >= f64::from(cosine_permille))
            .map(|(id, _)| id)
            .filter(|id| {
                id != record_id
                    && supersedes != Some(id.as_str())
                    && !out.iter().any(|o| o.existing_record_id == *id)
            })
            .collect();
        if near.is_empty() {
            return Ok(());
        }
        let live: BTreeSet<String> = inner
            .store
            .live_contents(tenant, &near, request.kind, &request.subject)?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        for existing_id in near.into_iter().filter(|id| live.contains(id)) {
            self.metrics
                .incr("mosaic_vector_guard_duplicates_total", &[]);
            out.push(guard_observation(
                "mosaic.vector-guard.observation.v1",
                VECTOR_GUARD_RELEASE,
                record_id,
                existing_id,
                ConflictRelation::Duplicate,
            )?);
        }
        Ok(())
    }

    /// The subject's `VECTOR_GUARD_CANDIDATES` indexed records of the
    /// proposal's tenant and kind nearest to `vector`, with their cosine
    /// similarity, best first: from the in-process vector index, or with
    /// PostgreSQL from its vector table (one distance query run as the
    /// tenant, on a pooled read connection taken before the read side of
    /// `pg_apply`, which it then holds for that query so that it sees no
    /// outbox pass half applied).
    fn guard_nearest(
        &self,
        tenant: &str,
        request: &ProposeRequest,
        vector: &[f32],
    ) -> ServiceResult<Vec<(String, f64)>> {
        let subject = request.subject.key();
        let pooled = match &self.pg_reads {
            Some(reads) => Some((reads, reads.connection()?)),
            None => None,
        };
        let Some((reads, mut connection)) = pooled else {
            // Vectors are unit length: their dot product is the cosine.
            return Ok(self
                .read_indexes()
                .vector
                .nearest_in_subject(
                    vector,
                    tenant,
                    &subject,
                    request.kind,
                    VECTOR_GUARD_CANDIDATES,
                )
                .into_iter()
                .map(|h| (h.record_id, f64::from(h.score)))
                .collect());
        };
        let applying = self.pg_apply.read().unwrap_or_else(PoisonError::into_inner);
        let hits = reads.nearest_in_subject(
            &mut connection,
            vector,
            tenant,
            (&subject, request.kind),
            VECTOR_GUARD_CANDIDATES,
        )?;
        drop(applying);
        Ok(hits
            .into_iter()
            .map(|h| {
                (
                    h.record_id,
                    h.score as f64 / mosaic_pgsearch::search::SCORE_SCALE,
                )
            })
            .collect())
    }

    /// The embeddings a batch of proposals of one kind and subject (a
    /// conversation call's messages) needs before it is prepared: when the
    /// vector guard compares them, every text embedded now (see
    /// [`ServiceCore::guard_embed`]). When it does not, with an in-process
    /// embedder (which cannot hang) and the embedded indexes, the texts
    /// are embedded ahead on a thread of their own while the batch is
    /// prepared and committed, and the outbox's publication waits for
    /// their vectors (`None` here: no guard compares them). Otherwise
    /// every text is embedded now, as the guard's batch.
    pub(super) fn embed_for_batch(
        &self,
        tenant: &str,
        (kind, subject): (MemoryKind, &MemorySubject),
        texts: &[&str],
    ) -> ServiceResult<Vec<Option<Vec<f32>>>> {
        let in_process = !matches!(
            self.config.embedder_kind(),
            crate::embedder::EmbedderKind::Http
        );
        if !in_process || self.config.postgres.is_some() || texts.is_empty() {
            return Ok(self.guard_embed(texts));
        }
        let guards = super::directory::write_guards(self.reader()?.store.as_mut(), tenant)?;
        // The hashing embedder's vectors are never compared (see
        // `guard_embed`).
        let hashing = self.config.embedder_kind() == crate::embedder::EmbedderKind::Hash;
        let compared = !hashing && vector_guard_compares(&guards, kind, subject);
        if !compared && self.embed_ahead(texts.iter().map(|t| (*t).to_owned()).collect()) {
            return Ok(vec![None; texts.len()]);
        }
        Ok(self.guard_embed(texts))
    }

    /// Starts embedding `texts` on a thread of the embed-ahead workers
    /// (see [`sync::Workers`] for why not a thread of its own), their keys
    /// pending in the guard's vectors until it is done; `false` when no
    /// thread could take it (nothing is pending then: dropping the job
    /// settles its keys).
    fn embed_ahead(&self, texts: Vec<String>) -> bool {
        let release = self.embedder.release().to_owned();
        let keys = texts
            .iter()
            .map(|t| guard_vectors::key(&release, t))
            .collect();
        let ahead = self.guard_vectors.ahead(keys);
        let embedder = self.embedder.clone();
        let started = self.ahead_workers.run(Box::new(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = mosaic_index::embed::embed_checked(embedder.as_ref(), &refs)
                .into_iter()
                .map(Result::ok)
                .collect();
            ahead.finish(vectors);
        }));
        if started.is_ok() {
            self.metrics.incr("mosaic_embeddings_ahead_total", &[]);
        }
        started.is_ok()
    }

    /// Embeds proposal texts for the vector guard before any lock is
    /// taken, one batch, and keeps each vector for the outbox's vector
    /// publication of the same text (so a text is embedded once). `None`
    /// for a text the guard has no vector for: when the embedder fails, or when
    /// the http embedder does not answer within `GUARD_EMBED_WAIT` (its
    /// late answer is still kept for the publication). After a failure or
    /// a timeout the guard leaves the embedder alone for
    /// `GUARD_EMBED_PAUSE`. Then proposals run the lexical guard only and
    /// succeed as before; the publication degrades as it always has.
    pub(super) fn guard_embed(&self, texts: &[&str]) -> Vec<Option<Vec<f32>>> {
        let none = || texts.iter().map(|_| None).collect();
        // The hashing embedder's cosine is word and trigram overlap, which
        // the lexical guard measures already; its vectors are no evidence
        // of a paraphrase.
        if texts.is_empty() || self.config.embedder_kind() == crate::embedder::EmbedderKind::Hash {
            return none();
        }
        if self.guard_vectors.paused() {
            self.metrics.add(
                "mosaic_vector_guard_skipped_total",
                &[("reason", "paused")],
                texts.len() as u64,
            );
            return none();
        }
        let release = self.embedder.release().to_owned();
        let keys: Vec<String> = texts
            .iter()
            .map(|t| guard_vectors::key(&release, t))
            .collect();
        let embedded: Option<Vec<Result<Vec<f32>, IndexError>>> =
            if self.config.embedder_kind() == crate::embedder::EmbedderKind::Http {
                // A service may hang: wait a bounded time on another thread,
                // which keeps a late answer for the publication.
                let (tx, rx) = std::sync::mpsc::sync_channel(1);
                let embedder = self.embedder.clone();
                let cache = self.guard_vectors.clone();
                let owned: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
                let keys = keys.clone();
                let spawned = std::thread::Builder::new()
                    .name("mosaic-guard-embed".into())
                    .spawn(move || {
                        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
                        let vectors = mosaic_index::embed::embed_checked(embedder.as_ref(), &refs);
                        if let Err(std::sync::mpsc::TrySendError::Disconnected(vectors)) =
                            tx.try_send(vectors)
                        {
                            for (key, v) in keys.into_iter().zip(vectors) {
                                if let Ok(v) = v {
                                    cache.insert(key, v);
                                }
                            }
                        }
                    });
                match spawned {
                    Ok(_) => rx.recv_timeout(GUARD_EMBED_WAIT).ok(),
                    Err(_) => None,
                }
            } else {
                Some(mosaic_index::embed::embed_checked(
                    self.embedder.as_ref(),
                    texts,
                ))
            };
        let Some(embedded) = embedded else {
            self.guard_vectors.pause(GUARD_EMBED_PAUSE);
            self.metrics.add(
                "mosaic_vector_guard_skipped_total",
                &[("reason", "embedder_timeout")],
                texts.len() as u64,
            );
            return none();
        };
        let mut out = Vec::with_capacity(texts.len());
        for (key, v) in keys.into_iter().zip(embedded) {
            match v {
                Ok(v) => {
                    self.guard_vectors.insert(key, v.clone());
                    out.push(Some(v));
                }
                Err(_) => {
                    self.guard_vectors.pause(GUARD_EMBED_PAUSE);
                    self.metrics.incr(
                        "mosaic_vector_guard_skipped_total",
                        &[("reason", "embedder_error")],
                    );
                    out.push(None);
                }
            }
        }
        out
    }
}

impl ServiceCore {
    /// The indexed records of the proposal's subject sharing the most
    /// rarity-weighted index terms with its text, from the embedded lexical
    /// index; `None` when that index cannot answer (PostgreSQL indexes, or
    /// a text without index terms).
    fn guard_candidates(&self, tenant: &str, request: &ProposeRequest) -> Option<Vec<String>> {
        if self.config.postgres.is_some() {
            return None;
        }
        self.read_indexes().lexical.sharing_terms(
            tenant,
            &request.subject.key(),
            &request.content,
            GUARD_CANDIDATES,
        )
    }
}

/// The text guard within one all-or-nothing call: an observation for
/// `request` (whose record is `record_id`) against each earlier proposal
/// of the call (`earlier`: its record id and request) of the same kind
/// and subject whose text it duplicates (or contradicts, when the tenant
/// guards prose contradictions), as [`ServiceCore::text_scan`] relates a
/// stored text. The earlier records are not stored when the call is
/// prepared; the gate decides in the call's one transaction, where they
/// are. Addressed proposals are left out, as by the text scan.
pub(super) fn call_text_observations(
    guards: &WriteGuards,
    record_id: &str,
    request: &ProposeRequest,
    earlier: &[(String, &ProposeRequest)],
) -> ServiceResult<Vec<ConflictObservation>> {
    let addressed = |r: &ProposeRequest| r.key.is_some() || r.namespace.is_some();
    if addressed(request) {
        return Ok(Vec::new());
    }
    let new = normalized_words(&request.content);
    let guarded = GuardedText::new(&new);
    let mut out = Vec::new();
    for (existing_id, other) in earlier {
        if addressed(other) || other.kind != request.kind || other.subject != request.subject {
            continue;
        }
        let other = StoredText::of(&other.content);
        out.extend(text_observation(
            guards,
            &guarded,
            record_id,
            existing_id,
            &other,
        )?);
    }
    Ok(out)
}

/// The text guard's observation that `record_id` (the proposal's text,
/// `guarded`) relates to `existing_id`'s text `old`: none when the texts
/// are unrelated, or contradict while the tenant does not guard prose
/// contradictions.
fn text_observation(
    guards: &WriteGuards,
    guarded: &GuardedText<'_>,
    record_id: &str,
    existing_id: &str,
    old: &StoredText,
) -> ServiceResult<Option<ConflictObservation>> {
    let Some(relation) = guarded.relation(old, guards.near_duplicate_permille) else {
        return Ok(None);
    };
    if relation == ConflictRelation::Contradicts && !guards.prose_contradictions {
        return Ok(None);
    }
    guard_observation(
        "mosaic.text-guard.observation.v1",
        TEXT_GUARD_RELEASE,
        record_id,
        existing_id.to_owned(),
        relation,
    )
    .map(Some)
}

/// A guard's observation that the proposal's record relates to
/// `existing_id`, its id a digest under `domain` of the three.
fn guard_observation(
    domain: &str,
    detector_release: &str,
    record_id: &str,
    existing_id: String,
    relation: ConflictRelation,
) -> ServiceResult<ConflictObservation> {
    let id = domain_digest(
        domain,
        &serde_json::json!({
            "record_id": record_id,
            "existing_record_id": existing_id,
            "relation": relation,
        }),
    )?;
    Ok(ConflictObservation {
        observation_id: format!("obs-{}", id.get(..32).unwrap_or(&id)),
        existing_record_id: existing_id,
        relation,
        detector_release: detector_release.to_owned(),
        existing_claim: None,
    })
}

/// Whether the vector guard compares the embedding of a proposal of this
/// kind and subject with stored ones: when the tenant's cosine threshold
/// is on and the guard applies to it.
fn vector_guard_compares(guards: &WriteGuards, kind: MemoryKind, subject: &MemorySubject) -> bool {
    guards.near_duplicate_cosine_permille < 1000 && vector_guard_applies(guards, kind, subject)
}

/// Whether the vector guard compares a proposal of this kind and subject:
/// always, except a principal's own episodic memory unless the tenant
/// asks for it (see [`WriteGuards::vector_guard_private_episodic`]).
fn vector_guard_applies(guards: &WriteGuards, kind: MemoryKind, subject: &MemorySubject) -> bool {
    let shared = matches!(
        subject,
        MemorySubject::Workspace { .. } | MemorySubject::Procedure { .. }
    );
    kind != MemoryKind::Episodic || shared || guards.vector_guard_private_episodic
}

/// Refuses shared (workspace) semantic memory whose only evidence is the
/// principal quoting itself, unless the tenant allows it: it needs a
/// judgment signed by a registered verifier that supports it.
pub(super) fn check_shared_provenance(
    guards: &WriteGuards,
    request: &ProposeRequest,
    external_judgments: &[SourceJudgment],
) -> ServiceResult<()> {
    let shared = matches!(request.subject, MemorySubject::Workspace { .. });
    if !shared
        || request.kind != MemoryKind::Semantic
        || guards.shared_semantic_evidence == SharedSemanticEvidence::Any
    {
        return Ok(());
    }
    let independent = external_judgments.iter().any(|j| j.supports_proposal);
    if independent {
        return Ok(());
    }
    Err(ServiceError::forbidden(
        "independent_evidence_required",
        "shared semantic memory needs a supporting judgment from a registered verifier; a principal's own quotation is not enough under this tenant's policy",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call reads each candidate's text once, remembers that one was not
    /// live, keeps the index's order, and reads again for another kind or
    /// subject.
    #[test]
    fn guard_texts_read_each_record_once_per_kind_and_subject() -> ServiceResult<()> {
        let subject = MemorySubject::Principal {
            principal_id: "p".into(),
        };
        let other = MemorySubject::Principal {
            principal_id: "q".into(),
        };
        let store: BTreeMap<&str, &str> = [("m-1", "one"), ("m-2", "two"), ("m-3", "three")].into();
        let reads = std::cell::RefCell::new(Vec::<Vec<String>>::new());
        let read = |ids: &[String]| -> ServiceResult<Vec<(String, String)>> {
            reads.borrow_mut().push(ids.to_vec());
            Ok(ids
                .iter()
                .filter_map(|id| Some((id.clone(), store.get(id.as_str())?.to_string())))
                .collect())
        };
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let words = |found: Vec<(&str, &StoredText)>| -> Vec<(String, String)> {
            found
                .into_iter()
                .map(|(id, text)| (id.to_owned(), text.words().collect::<Vec<_>>().join(" ")))
                .collect()
        };
        let mut texts = GuardTexts::default();
        let parsed = ParsedTexts::default();
        let first = ids(&["m-2", "m-gone", "m-1"]);
        let found = words(texts.live((MemoryKind::Episodic, &subject), &first, &parsed, read)?);
        assert_eq!(
            found,
            [("m-2".into(), "two".into()), ("m-1".into(), "one".into())]
        );
        let second = ids(&["m-3", "m-1", "m-gone"]);
        let found = words(texts.live((MemoryKind::Episodic, &subject), &second, &parsed, read)?);
        assert_eq!(
            found,
            [("m-3".into(), "three".into()), ("m-1".into(), "one".into())]
        );
        // Another subject, then another kind: read again.
        texts.live((MemoryKind::Episodic, &other), &second, &parsed, read)?;
        texts.live((MemoryKind::Semantic, &other), &second, &parsed, read)?;
        assert_eq!(
            *reads.borrow(),
            [
                ids(&["m-2", "m-gone", "m-1"]),
                ids(&["m-3"]),
                second.clone(),
                second.clone(),
            ]
        );
        Ok(())
    }

    /// The texts split once are those `StoredText::of` gives, taken again
    /// by text whatever record holds them, and the bytes held are bounded.
    #[test]
    fn parsed_texts_are_the_split_texts_and_bounded() {
        let parsed = ParsedTexts::default();
        let words = |t: &StoredText| t.words().collect::<Vec<_>>().join(" ");
        let contents = ["The Deploy IS owned by Ana", "ünïcode Wörds, here", ""];
        let first = parsed.of(contents.iter().map(|c| c.to_string()).collect(), 0);
        for (content, text) in contents.iter().zip(&first) {
            assert_eq!(words(text), words(&StoredText::of(content)));
        }
        assert_eq!(parsed.len(), 3);
        let again = parsed.of(vec![contents[1].to_string(), contents[0].to_string()], 0);
        assert!(Arc::ptr_eq(&again[0], &first[1]));
        assert!(Arc::ptr_eq(&again[1], &first[0]));
        assert_eq!(parsed.len(), 3);
        // Texts longer than the bound on one are split, not held.
        let long = "word ".repeat(PARSED_TEXT_MAX_BYTES);
        let split = parsed.of(vec![long.clone()], 0);
        assert_eq!(split[0].words().count(), PARSED_TEXT_MAX_BYTES);
        assert_eq!(parsed.len(), 3);
        // Filling past the bound on all empties what was held first.
        let each = PARSED_TEXT_MAX_BYTES - 8;
        let fill: Vec<String> = (0..=PARSED_TEXTS_BYTES / each)
            .map(|i| format!("{i:08}{}", "x".repeat(each - 8)))
            .collect();
        parsed.of(fill, 0);
        assert!(parsed.len() < 4 + PARSED_TEXTS_BYTES / each);
        let after = parsed.of(vec![contents[0].to_string()], 0);
        assert!(!Arc::ptr_eq(&after[0], &first[0]));
        // An erasure's emptying: texts read before it are split for
        // their call but not kept; texts read after it are.
        let before_erasure = parsed.read_at();
        parsed.clear();
        assert_eq!(parsed.len(), 0);
        let late = parsed.of(vec![contents[1].to_string()], before_erasure);
        assert_eq!(words(&late[0]), words(&StoredText::of(contents[1])));
        assert_eq!(parsed.len(), 0);
        parsed.of(vec![contents[1].to_string()], parsed.read_at());
        assert_eq!(parsed.len(), 1);
    }
}
