//! Extraction off the request path: an ingest with extraction on queues a
//! job (the store's `extraction_jobs`, no content); the `mosaic-extract`
//! worker runs due jobs, one at a time, outside every lock but the reads
//! and the proposals it makes:
//!
//! 1. read the job's captured texts from the store (messages whose episode
//!    was revoked since are skipped: their text is gone);
//! 2. ask the extractor for facts citing message ids, and check what it
//!    answered ([`crate::extraction::parse_facts`]);
//! 3. ask the fact verifier, per fact, whether the cited messages support
//!    it, and sign its verdict as a judgment with the key this server
//!    registered for the tenant (release `mosaic.model-verifier.v1:MODEL`);
//! 4. propose each fact through the gate as the capturing key would
//!    (`POST /v1/facts`): cited by message id, its claims valid from the
//!    latest cited capture, written by `mosaic.extractor.v1:MODEL`.
//!
//! An endpoint that is down or answers malformed output leaves the job
//! pending with a growing delay (doubling from `extraction_retry_ms`, at
//! most ten minutes) for [`MAX_ATTEMPTS`] attempts, then failed; nothing
//! is lost, and `GET /v1/admin/extraction` reports every job's state,
//! attempts, last error code and counts (never content).

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use mosaic_harness::memory_write::StructuredClaim;
use serde_json::json;

use super::*;
use crate::evidence::{public_key_hex, sign_evidence, verifier_id};
use crate::extraction::{
    ChatClient, EXTRACTOR_PROMPT, ModelError, ShownMessage, VERIFIER_PROMPT, extraction_input,
    parse_facts, parse_verdict, verification_input,
};
use mosaic_store::intake::ExtractionJob;

/// Attempts before a job is marked failed.
pub const MAX_ATTEMPTS: u64 = 6;
/// File (in the data directory) of the secret the model verifier's
/// per-tenant signing keys derive from.
pub const MODEL_VERIFIER_KEY_FILE: &str = "model-verifier.key";
/// Domain of a tenant's model-verifier signing key.
const VERIFIER_KEY_DOMAIN: &str = "mosaic.server.model_verifier_key.v1";
/// Domain of an extraction job's id.
const JOB_ID_DOMAIN: &str = "mosaic.server.extraction_job.v1";

/// The extraction side of a running service.
pub(super) struct Extraction {
    extractor: ChatClient,
    verifier: ChatClient,
    secret: [u8; 32],
    wake: Mutex<(bool, bool)>,
    signal: Condvar,
}

impl Extraction {
    /// Extraction over `config`'s endpoints, its signing secret read from
    /// (or created in) the data directory.
    pub(super) fn open(config: &ServerConfig) -> ServiceResult<Option<Self>> {
        let Some((extractor, verifier)) = config.extraction_endpoints() else {
            return Ok(None);
        };
        let timeout = Duration::from_millis(config.extraction_timeout_ms);
        Ok(Some(Extraction {
            extractor: ChatClient::new(extractor, timeout),
            verifier: ChatClient::new(verifier, timeout),
            secret: load_secret(&config.data_dir.join(MODEL_VERIFIER_KEY_FILE))?,
            wake: Mutex::new((false, false)),
            signal: Condvar::new(),
        }))
    }

    fn notify(&self) {
        held(&self.wake).0 = true;
        self.signal.notify_all();
    }

    pub(super) fn stop(&self) {
        held(&self.wake).1 = true;
        self.signal.notify_all();
    }

    /// Waits for work or `idle`; false once stopped.
    fn wait(&self, idle: Duration) -> bool {
        let mut state = held(&self.wake);
        if !state.0 && !state.1 {
            state = self
                .signal
                .wait_timeout(state, idle)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        state.0 = false;
        !state.1
    }

    fn verifier_release(&self) -> String {
        format!("mosaic.model-verifier.v1:{}", self.verifier.model())
    }

    fn writer_release(&self) -> String {
        format!("mosaic.extractor.v1:{}", self.extractor.model())
    }

    /// The tenant's signing key: derived from the server's secret, so each
    /// tenant's judgments verify only under that tenant's registration.
    fn tenant_secret(&self, tenant: &str) -> [u8; 32] {
        let digest = sha256_hex(
            format!(
                "{VERIFIER_KEY_DOMAIN}\n{}\n{tenant}",
                hex::encode(self.secret)
            )
            .as_bytes(),
        );
        let mut out = [0u8; 32];
        if let Ok(bytes) = hex::decode(digest) {
            out.copy_from_slice(&bytes[..32]);
        }
        out
    }
}

/// A lock that outlives a panic of its holder (the flags stay meaningful).
fn held<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn load_secret(path: &Path) -> ServiceResult<[u8; 32]> {
    let io = |e: std::io::Error| ServiceError::Internal(format!("model verifier key: {e}"));
    if let Ok(text) = std::fs::read_to_string(path) {
        let bytes = hex::decode(text.trim())
            .map_err(|_| ServiceError::Internal("model verifier key is not hex".into()))?;
        let mut out = [0u8; 32];
        if bytes.len() != 32 {
            return Err(ServiceError::Internal(
                "model verifier key is not 32 bytes".into(),
            ));
        }
        out.copy_from_slice(&bytes);
        return Ok(out);
    }
    let mut out = [0u8; 32];
    getrandom::fill(&mut out)
        .map_err(|e| ServiceError::Internal(format!("random source failed: {e}")))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    use std::io::Write;
    let mut file = options.open(path).map_err(io)?;
    file.write_all(hex::encode(out).as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(out)
}

/// Starts the extraction worker.
pub(super) fn spawn_extractor(
    core: Arc<ServiceCore>,
) -> ServiceResult<Option<std::thread::JoinHandle<()>>> {
    if core.extraction.is_none() {
        return Ok(None);
    }
    std::thread::Builder::new()
        .name("mosaic-extract".to_owned())
        .spawn(move || {
            crate::priority::bulk_thread();
            let idle = Duration::from_millis(core.config.extraction_retry_ms.clamp(10, 1_000));
            let Some(extraction) = core.extraction.as_ref() else {
                return;
            };
            while extraction.wait(idle) {
                let pass = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    core.extraction_pass()
                }));
                if !matches!(pass, Ok(Ok(_))) {
                    core.metrics
                        .incr("mosaic_extraction_pass_failures_total", &[]);
                    tracing::warn!("extraction pass failed");
                }
            }
        })
        .map(Some)
        .map_err(|e| ServiceError::Internal(format!("cannot start the extractor: {e}")))
}

#[derive(serde::Serialize)]
struct JobIdentity<'a> {
    tenant_id: &'a str,
    principal_id: &'a str,
    conversation_id: &'a str,
    message_ids: &'a [String],
}

impl ServiceCore {
    /// Queues extraction of `message_ids` (the accepted messages of one
    /// ingest call) when extraction is on; returns the job id.
    pub(super) fn queue_extraction(
        &self,
        credential: &Credential,
        conversation_id: &str,
        message_ids: Vec<String>,
    ) -> ServiceResult<Option<String>> {
        let Some(extraction) = &self.extraction else {
            return Ok(None);
        };
        if message_ids.is_empty() {
            return Ok(None);
        }
        let (tenant, principal) = credential.principal()?;
        let digest = domain_digest(
            JOB_ID_DOMAIN,
            &JobIdentity {
                tenant_id: tenant,
                principal_id: principal,
                conversation_id,
                message_ids: &message_ids,
            },
        )?;
        let now = self.now();
        let job = ExtractionJob {
            job_id: format!("x-{}", digest.get(..32).unwrap_or(&digest)),
            tenant_id: tenant.to_owned(),
            principal_id: principal.to_owned(),
            key_id: credential.key_id().to_owned(),
            conversation_id: conversation_id.to_owned(),
            message_ids,
            state: "pending".to_owned(),
            attempts: 0,
            next_attempt_ms: now,
            last_error: None,
            report_json: None,
            created_at_ms: now,
        };
        self.writer()?.store.queue_extraction_job(&job)?;
        extraction.notify();
        Ok(Some(job.job_id))
    }

    /// Runs every due job once; returns how many ran.
    pub fn extraction_pass(&self) -> ServiceResult<usize> {
        let Some(extraction) = &self.extraction else {
            return Ok(0);
        };
        let now = self.now();
        let jobs = self.reader()?.store.due_extraction_jobs(now, 8)?;
        for mut job in jobs.iter().cloned() {
            job.attempts += 1;
            match self.run_job(extraction, &job) {
                Ok(report) => {
                    job.state = "done".to_owned();
                    job.last_error = None;
                    job.report_json = serde_json::to_string(&report).ok();
                    self.metrics
                        .incr("mosaic_extraction_jobs_total", &[("outcome", "done")]);
                }
                Err(e) => {
                    let code = e.code();
                    job.last_error = Some(code.to_owned());
                    if job.attempts >= MAX_ATTEMPTS {
                        job.state = "failed".to_owned();
                        self.metrics
                            .incr("mosaic_extraction_jobs_total", &[("outcome", "failed")]);
                    } else {
                        let shift = u32::try_from(job.attempts - 1).unwrap_or(20).min(20);
                        let delay = self
                            .config
                            .extraction_retry_ms
                            .saturating_mul(1 << shift)
                            .min(600_000);
                        job.next_attempt_ms = self.now().saturating_add(delay);
                        self.metrics
                            .incr("mosaic_extraction_jobs_total", &[("outcome", "retry")]);
                    }
                    tracing::info!(job = %job.job_id, error = code, attempts = job.attempts, "extraction attempt failed");
                }
            }
            self.writer()?.store.update_extraction_job(&job)?;
        }
        Ok(jobs.len())
    }

    /// One job: extract, verify, sign, propose. An endpoint failure or
    /// malformed output fails the attempt before anything is proposed.
    fn run_job(
        &self,
        extraction: &Extraction,
        job: &ExtractionJob,
    ) -> Result<ExtractionRun, ModelError> {
        let internal = |e: ServiceError| ModelError::Unavailable(format!("service: {}", e.code()));
        let credential = Credential::Principal {
            key_id: job.key_id.clone(),
            tenant_id: job.tenant_id.clone(),
            principal_id: job.principal_id.clone(),
        };
        // The captured texts, and the latest capture instant.
        let mut shown = Vec::new();
        let mut captured = BTreeMap::new();
        let mut latest = 0u64;
        {
            let mut reader = self.reader().map_err(internal)?;
            for message_id in &job.message_ids {
                let Some(row) = reader
                    .store
                    .captured_message(
                        &job.tenant_id,
                        &job.principal_id,
                        &job.conversation_id,
                        message_id,
                    )
                    .map_err(|e| internal(e.into()))?
                else {
                    continue;
                };
                let stored = reader
                    .store
                    .get_record(&row.record_id)
                    .map_err(|e| internal(e.into()))?;
                let Some(stored) = stored
                    .filter(|s| matches!(s.state, RecordState::Active | RecordState::Publishing))
                else {
                    continue;
                };
                latest = latest.max(row.captured_at_ms);
                captured.insert(message_id.clone(), row);
                shown.push(ShownMessage {
                    message_id: message_id.clone(),
                    text: stored.content,
                });
            }
        }
        if shown.is_empty() {
            return Ok(ExtractionRun {
                note: Some("no captured text left".to_owned()),
                ..ExtractionRun::default()
            });
        }
        let ids: Vec<String> = shown.iter().map(|m| m.message_id.clone()).collect();
        let answer = extraction
            .extractor
            .complete_json(EXTRACTOR_PROMPT, &extraction_input(&shown))?;
        let (facts, refused) = parse_facts(&answer, &ids)?;
        // Verify every fact before proposing any, so an unreachable
        // verifier fails the attempt with nothing written.
        let mut verdicts = Vec::with_capacity(facts.len());
        for fact in &facts {
            let evidence: Vec<ShownMessage> = shown
                .iter()
                .filter(|m| fact.cites.contains(&m.message_id))
                .cloned()
                .collect();
            let verdict = extraction
                .verifier
                .complete_json(VERIFIER_PROMPT, &verification_input(fact, &evidence))?;
            verdicts.push(parse_verdict(&verdict)?);
        }
        let release = extraction.verifier_release();
        let secret = extraction.tenant_secret(&job.tenant_id);
        self.register_model_verifier(&job.tenant_id, &release, &secret)
            .map_err(internal)?;
        let (mut accepted, mut rejected) = (0u64, 0u64);
        let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
        for (fact, supported) in facts.iter().zip(verdicts) {
            let source_ids: Vec<String> = fact
                .cites
                .iter()
                .map(|m| mosaic_harness::record::message_source_id(&job.conversation_id, m))
                .collect();
            let claims: Vec<StructuredClaim> = fact
                .claims
                .iter()
                .enumerate()
                .map(|(i, c)| StructuredClaim {
                    claim_id: format!("c{}", i + 1),
                    subject: claim_subject(&c.subject, &job.principal_id),
                    predicate: claim_predicate(&c.predicate),
                    object: c.object.trim().to_owned(),
                    qualifiers: Default::default(),
                    valid_from_unix_ms: latest,
                    valid_until_unix_ms: None,
                    source_ids: source_ids.clone(),
                })
                .collect();
            let content_sha256 = sha256_hex(fact.content.as_bytes());
            let proposition = Proposition {
                tenant_id: &job.tenant_id,
                content_sha256: &content_sha256,
                claims: &claims,
            };
            let mut judgments = Vec::new();
            let claim_ids: Vec<Option<String>> = if claims.is_empty() {
                vec![None]
            } else {
                claims.iter().map(|c| Some(c.claim_id.clone())).collect()
            };
            for cite in &fact.cites {
                let Some(row) = captured.get(cite) else {
                    continue;
                };
                for claim_id in &claim_ids {
                    let judgment = SourceJudgment {
                        source_id: mosaic_harness::record::message_source_id(
                            &job.conversation_id,
                            cite,
                        ),
                        claim_id: claim_id.clone(),
                        source_content_sha256: row.content_sha256.clone(),
                        supports_proposal: supported,
                        verifier_release: release.clone(),
                        judgment_sha256: domain_digest(
                            "mosaic.server.model_judgment.v1",
                            &json!({
                                "tenant_id": job.tenant_id,
                                "content_sha256": content_sha256,
                                "source_content_sha256": row.content_sha256,
                                "claim_id": claim_id,
                                "supports_proposal": supported,
                                "verifier_release": release,
                            }),
                        )
                        .map_err(|e| internal(e.into()))?,
                    };
                    judgments.push(
                        sign_evidence(
                            &proposition,
                            EvidenceKind::SourceJudgment,
                            judgment,
                            &secret,
                        )
                        .map_err(|e| internal(e.into()))?,
                    );
                }
            }
            let request = FactRequest {
                content: fact.content.clone(),
                cites: fact
                    .cites
                    .iter()
                    .map(|m| CitedMessage {
                        conversation_id: job.conversation_id.clone(),
                        message_id: m.clone(),
                    })
                    .collect(),
                claims,
                workspace_id: None,
                consent_receipt_sha256: None,
                judgments,
                supersedes_record_id: None,
                expected_line_generation: None,
                ttl_ms: None,
                metadata: None,
                namespace: None,
                key: None,
            };
            match self.propose_fact(&credential, &request, Some(extraction.writer_release())) {
                Ok(response) if response.decision == "accepted" => accepted += 1,
                Ok(response) => {
                    rejected += 1;
                    for v in &response.violations {
                        *reasons.entry(v.code()).or_insert(0) += 1;
                    }
                }
                Err(e) => {
                    rejected += 1;
                    *reasons.entry(e.code().to_owned()).or_insert(0) += 1;
                }
            }
        }
        Ok(ExtractionRun {
            facts: facts.len(),
            accepted,
            rejected,
            gate_reasons: reasons,
            refused_before_gate: refused.iter().map(|r| r.reason.to_owned()).collect(),
            note: None,
        })
    }

    /// Registers this server's model verifier for `tenant` (once).
    fn register_model_verifier(
        &self,
        tenant: &str,
        release: &str,
        secret: &[u8; 32],
    ) -> ServiceResult<()> {
        let public = public_key_hex(secret);
        let Some(key) = crate::evidence::parse_public_key(&public) else {
            return Err(ServiceError::Internal("model verifier key".into()));
        };
        let id = verifier_id(&key);
        let mut inner = self.writer()?;
        if super::directory::verifier(inner.store.as_mut(), tenant, &id)?.is_some() {
            return Ok(());
        }
        super::directory::insert_verifier(
            inner.store.as_mut(),
            &VerifierView {
                tenant_id: tenant.to_owned(),
                verifier_id: id,
                verifier_release: release.to_owned(),
                public_key_hex: public,
                created_at_unix_ms: self.now(),
                disabled: false,
            },
        )?;
        Ok(())
    }

    /// Every extraction job's state (admin).
    pub fn extraction_report(&self, credential: &Credential) -> ServiceResult<ExtractionReport> {
        credential.require_admin()?;
        let mut reader = self.reader()?;
        let counts = reader.store.extraction_job_counts()?.into_iter().collect();
        let jobs = reader
            .store
            .recent_extraction_jobs(100)?
            .into_iter()
            .map(|j| ExtractionJobView {
                messages: j.message_ids.len(),
                report: j.report_json.and_then(|r| serde_json::from_str(&r).ok()),
                job_id: j.job_id,
                tenant_id: j.tenant_id,
                conversation_id: j.conversation_id,
                state: j.state,
                attempts: j.attempts,
                next_attempt_ms: j.next_attempt_ms,
                last_error: j.last_error,
            })
            .collect();
        Ok(ExtractionReport {
            enabled: self.extraction.is_some(),
            counts,
            jobs,
        })
    }
}

/// `user` (and `me`, `i`) is the job's principal; any other subject an
/// entity, lower-cased.
fn claim_subject(subject: &str, principal: &str) -> String {
    match subject.trim().to_lowercase().as_str() {
        "user" | "me" | "i" | "the user" => format!("principal:{principal}"),
        other => format!("entity:{other}"),
    }
}

/// A predicate as a `snake_case` word.
fn claim_predicate(predicate: &str) -> String {
    predicate
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect()
}
