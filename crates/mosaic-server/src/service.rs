//! The service layer: every operation of the product as a plain synchronous
//! function over a [`Credential`]. The HTTP handlers (and an MCP server)
//! only decode, call one of these, and encode. No axum types here.
//!
//! **Invariant.** Tenant and principal of every data operation come from
//! the credential. A request that names another tenant or principal is
//! refused (`tenant_mismatch`, `principal_mismatch`); a record that the
//! credential may not see answers exactly like a record that does not
//! exist (404).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use mosaic_harness::canonical::{domain_digest, is_sha256_hex, sha256_hex};
use mosaic_harness::memory_scope::{
    ContextBudget, MemoryReadContext, RECALLED_MEMORY_NOTICE, allocate_selected_memory,
    eligible_set, render_recalled_memory, select_memory,
};
use mosaic_harness::memory_scope::{EligibleSet, RelevanceInput, ScoredCandidate, rank_relevance};
use mosaic_harness::memory_write::{
    Adjudication, ConflictObservation, ConsentReceipt, MemoryPurpose, MemoryWriteGrant,
    MemoryWritePolicy, MemoryWriteProposal, ProcedureEvaluation, SourceJudgment,
};
use mosaic_harness::{MEMORY_SCHEMA_VERSION, MemoryKind, MemorySubject};
use mosaic_index::vector::EmbeddingSnapshot;
use mosaic_index::{
    AnnConfig, Embedder, FunnelConfig, IndexTarget, PublishMessage, RebuildEntry, RecallQuery,
    RetrievalMode, Retriever, ScopeKeys, TargetSnapshot, hand_off,
};
use mosaic_pgsearch::{
    LexicalSearch, PgLexicalIndex, PgVectorIndex, SearchTarget, VectorSearch, VectorSearchConfig,
};
use mosaic_store::read::eligibility_query;
use mosaic_store::revocation::RevocationState;
use mosaic_store::{
    Authorization, DeletionReceipt, ListedRecord, ListedState, MAX_LIST_LIMIT, OutboxOp,
    OutboxTask, RecordFilter, RecordState, ReviewAction, RevocationReason, SqliteStore, Store,
    StoreConfig, StoreError, WriteDecision, WriteRequest,
};

use crate::api::*;
use crate::auth::{self, Credential};
use crate::catalog::{Catalog, MemoryRow};
use crate::config::ServerConfig;
use crate::embedder::{self, EmbedderIdentity, EmbedderReport};
use crate::error::{ServiceError, ServiceResult};
use crate::evidence::{
    self, EvidenceError, EvidenceKind, Proposition, RegisteredVerifier, SourceTextError,
};
use crate::metrics::Metrics;

/// Release of the read selector configuration this server runs.
pub const SELECTOR_RELEASE: &str = "mosaic-server-selector-v1";
/// Token counter assumed when a proposal names none (and the recall budget's).
pub const DEFAULT_TOKEN_COUNTER: &str = "whitespace-v1";
/// Writer release assumed when a proposal names none.
pub const DEFAULT_WRITER: &str = "api-client-v1";
/// Domain tag of a server-computed policy digest.
pub const POLICY_DOCUMENT_DOMAIN: &str = "mosaic.server.policy_document.v1";
/// Domain tag of derived proposal and record ids.
pub const REQUEST_ID_DOMAIN: &str = "mosaic.server.propose_request.v1";
/// The vector index's saved embeddings, beside its snapshot.
pub const VECTOR_EMBEDDINGS_FILE: &str = "vector.embeddings";
/// Index targets every record must reach before it is readable.
pub const INDEX_TARGETS: [&str; 2] = ["lexical", VECTOR_TARGET];

/// The vector index target: the one the policy may make optional
/// ([`ServerConfig::vector_index_optional`]).
pub const VECTOR_TARGET: &str = "vector";
/// Default workspace of a grant made without one.
pub const DEFAULT_WORKSPACE: &str = "default";
/// Run id used by a recall that names no run (working memory is not read).
pub const NO_RUN: &str = "no-run";
/// The review actions, as the API names them.
pub const REVIEW_ACTIONS: [&str; 5] = [
    "reject_proposal",
    "contest_existing",
    "accept_narrower",
    "supersede",
    "request_evidence",
];

const DAY_MS: u64 = 86_400_000;
const STORE_FILE: &str = "store.sqlite";
const CATALOG_FILE: &str = "catalog.sqlite";
/// File (in the data directory) the bootstrap admin key is written to.
pub const ADMIN_KEY_FILE: &str = "admin.key";

/// Where the service's clock comes from.
pub trait ServiceClock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_unix_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl ServiceClock for SystemClock {
    fn now_unix_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

struct Inner {
    store: Box<dyn Store>,
    catalog: Catalog,
    retriever: Retriever,
    /// With PostgreSQL: the index targets inside the database (the
    /// in-process `retriever` then stays empty).
    pg: Option<PgTargets>,
    index_dirty: bool,
    /// Injected outbox faults (tests only; `None` in the product).
    faults: Option<Arc<dyn OutboxFaults>>,
}

/// One message the outbox worker hands an index target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexDelivery {
    /// Publish one generation of a record.
    Publish(PublishMessage),
    /// Remove the record's content at this generation.
    Tombstone {
        /// The record.
        record_id: String,
        /// The tombstone generation.
        generation: u64,
    },
}

/// What an injected fault does to one outbox delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutboxFault {
    /// Apply, then acknowledge (no fault).
    Deliver,
    /// The target refuses it: nothing applied, the row stays pending.
    Refuse,
    /// Applied, then the worker dies before acknowledging: the row stays
    /// pending and is delivered again later.
    ApplyWithoutAck,
    /// Applied twice (a duplicated delivery), then acknowledged.
    DeliverTwice,
}

/// Fault injection for the outbox worker, so tests can drive the real
/// service through failed, duplicated, reordered and stale deliveries.
/// Nothing in the product installs one.
pub trait OutboxFaults: Send + Sync {
    /// The delivery order of one pending batch of `target`: indices into
    /// `batch`; an omitted row stays pending, a repeated one is delivered
    /// again.
    fn schedule(&self, target: &str, batch: &[OutboxTask]) -> Vec<usize>;
    /// The fault for one delivery (called for every delivery).
    fn fault(&self, target: &str, delivery: &IndexDelivery) -> OutboxFault;
    /// Old messages a slow or restarted worker still holds, delivered to
    /// `target` after the batch and never acknowledged.
    fn stale(&self, target: &str) -> Vec<IndexDelivery>;
}

/// The lexical and vector targets inside PostgreSQL, shared by every
/// server on the database.
struct PgTargets {
    lexical: PgLexicalIndex,
    vector: PgVectorIndex,
}

/// Release of the PostgreSQL recall path's fusion (reciprocal-rank fusion
/// in fixed point, ties by record id).
pub const PG_RANKER_RELEASE: &str = "mosaic-server-pg-rrf-v1";
/// Domain tag of a PostgreSQL recall's query digest.
pub const PG_QUERY_DOMAIN: &str = "mosaic.server.pg_recall_query.v1";
/// Reciprocal-rank fusion constant.
const RRF_K: u64 = 60;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The running service: store, catalog, indexes, limits and metrics.
pub struct Service {
    inner: Mutex<Inner>,
    buckets: Mutex<HashMap<String, Bucket>>,
    clock: Arc<dyn ServiceClock>,
    config: ServerConfig,
    metrics: Metrics,
    embedder: Arc<dyn Embedder>,
}

/// A proposal made ready for the store's write transaction.
struct PreparedWrite {
    /// The write request, with the server's own and the authenticated
    /// external evidence.
    write: WriteRequest,
    record_id: String,
    proposal_id: String,
    /// The decision instant.
    now: u64,
    server_judgments: Vec<SourceJudgment>,
    server_conflicts: Vec<ConflictObservation>,
}

/// What opening a data directory did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReport {
    /// Where a freshly generated bootstrap admin key was written (first
    /// start only). The key itself is never returned or logged.
    pub admin_key_file: Option<PathBuf>,
    /// Whether the data directory was created.
    pub created_data_dir: bool,
    /// The embedder in force, and the one the stored index was built with
    /// when that differed (the indexes were then rebuilt).
    pub embedder: EmbedderReport,
}

fn lock<T>(m: &Mutex<T>) -> ServiceResult<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| ServiceError::Internal("service state lock poisoned".into()))
}

fn invalid_digest(field: &str) -> ServiceError {
    ServiceError::bad_request(
        "invalid_digest",
        format!("{field} is not a SHA-256 digest (64 lowercase hex digits)"),
    )
}

fn check_digest(field: &str, value: &str) -> ServiceResult<()> {
    if is_sha256_hex(value) {
        Ok(())
    } else {
        Err(invalid_digest(field))
    }
}

fn check_identity(
    cred_tenant: &str,
    cred_principal: &str,
    tenant: &Option<String>,
    principal: &Option<String>,
) -> ServiceResult<()> {
    if tenant.as_deref().is_some_and(|t| t != cred_tenant) {
        return Err(ServiceError::forbidden(
            "tenant_mismatch",
            "the request names a tenant other than the credential's",
        ));
    }
    if principal.as_deref().is_some_and(|p| p != cred_principal) {
        return Err(ServiceError::forbidden(
            "principal_mismatch",
            "the request names a principal other than the credential's",
        ));
    }
    Ok(())
}

fn stage_name(state: &RevocationState) -> &'static str {
    match state {
        RevocationState::Ineligible(_) => "ineligible",
        RevocationState::DeletionRequested(_) => "deletion_requested",
        RevocationState::IndexesAcknowledged(_) => "derived_indexes_acknowledged",
        RevocationState::Erased(_) => "erased",
        RevocationState::Finalized(_) => "finalized",
    }
}

fn receipt_view(receipt: &DeletionReceipt) -> DeletionReceiptView {
    DeletionReceiptView {
        body: receipt.body.clone(),
        receipt_sha256: receipt.receipt_sha256.clone(),
    }
}

/// Whether a credential's grant lets it see memories about `subject`.
fn subject_visible(principal_id: &str, grant: &MemoryWriteGrant, subject: &MemorySubject) -> bool {
    let workspace_ok = |w: &str| grant.allowed_workspace_ids.iter().any(|g| g == w);
    match subject {
        MemorySubject::Principal { principal_id: p } => p == principal_id,
        MemorySubject::PrincipalInWorkspace {
            workspace_id,
            principal_id: p,
        } => p == principal_id && workspace_ok(workspace_id),
        MemorySubject::Workspace { workspace_id }
        | MemorySubject::Procedure { workspace_id, .. } => workspace_ok(workspace_id),
        MemorySubject::Run { run_id } => grant.allowed_run_ids.iter().any(|r| r == run_id),
    }
}

/// Whether a catalog row (by its subject key) is visible: the catalog keeps
/// keys, the check needs the subject, so the stored record supplies it.
fn policy_digest(policy: &MemoryWritePolicy) -> ServiceResult<String> {
    let mut doc = policy.clone();
    doc.policy_sha256 = String::new();
    doc.allowed_kinds.sort();
    doc.allowed_kinds.dedup();
    Ok(domain_digest(POLICY_DOCUMENT_DOMAIN, &doc)?)
}

impl Service {
    /// Opens (creating if missing) the data directory named by `config`
    /// and starts the service state. On first start a bootstrap admin key is
    /// generated into `ADMIN_KEY_FILE` (mode 0600).
    pub fn open(config: ServerConfig) -> ServiceResult<(Self, OpenReport)> {
        Self::open_with_clock(config, Arc::new(SystemClock))
    }

    /// [`Service::open`] with an explicit clock.
    pub fn open_with_clock(
        config: ServerConfig,
        clock: Arc<dyn ServiceClock>,
    ) -> ServiceResult<(Self, OpenReport)> {
        if let Err(problems) = config.validate() {
            return Err(ServiceError::bad_request(
                "invalid_config",
                problems.join("; "),
            ));
        }
        // Before touching the data directory: a missing or corrupt model
        // refuses to start with the command that fixes it.
        let embedder =
            embedder::build(&config).map_err(|e| ServiceError::Unavailable(e.to_string()))?;
        let created_data_dir = !config.data_dir.exists();
        std::fs::create_dir_all(config.data_dir.join("index")).map_err(|e| {
            ServiceError::Internal(format!(
                "cannot create data directory {}: {e}",
                config.data_dir.display()
            ))
        })?;
        let store_config = StoreConfig {
            required_index_targets: INDEX_TARGETS.iter().map(|t| (*t).to_owned()).collect(),
            optional_index_targets: if config.vector_index_optional {
                vec![VECTOR_TARGET.to_owned()]
            } else {
                Vec::new()
            },
            ..StoreConfig::default()
        };
        let (store, catalog, pg): (Box<dyn Store>, Catalog, Option<PgTargets>) =
            match &config.postgres {
                Some(url) => {
                    // A database nobody migrated yet is migrated by the
                    // connecting role (which must then own the schema);
                    // replicas serving as an application role find it done.
                    let catalog = match Catalog::open_postgres(url) {
                        Ok(catalog) => catalog,
                        Err(_) => {
                            migrate_postgres(url, None, embedder.dimension())?;
                            Catalog::open_postgres(url)?
                        }
                    };
                    check_shared_embedder(&catalog, config.embedder, embedder.as_ref())?;
                    (
                        Box::new(open_postgres(url, store_config)?),
                        catalog,
                        Some(PgTargets::connect(url, embedder.clone())?),
                    )
                }
                None => (
                    Box::new(SqliteStore::open(
                        config.data_dir.join(STORE_FILE),
                        store_config,
                    )?),
                    Catalog::open(&config.data_dir.join(CATALOG_FILE))?,
                    None,
                ),
            };
        let retriever = new_retriever(&embedder);
        let service = Service {
            inner: Mutex::new(Inner {
                store,
                catalog,
                retriever,
                pg,
                index_dirty: false,
                faults: None,
            }),
            buckets: Mutex::new(HashMap::new()),
            clock,
            metrics: Metrics::default(),
            config,
            embedder,
        };
        let admin_key_file = service.bootstrap_admin_key()?;
        let switched_from = service.load_indexes()?;
        let identity = service.embedder_identity();
        Ok((
            service,
            OpenReport {
                admin_key_file,
                created_data_dir,
                embedder: EmbedderReport {
                    identity,
                    switched_from,
                },
            },
        ))
    }

    /// The configuration in force.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The identity of the embedder in force.
    pub fn embedder_identity(&self) -> EmbedderIdentity {
        EmbedderIdentity::of(self.config.embedder, self.embedder.as_ref())
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Now, from the service clock.
    pub fn now(&self) -> u64 {
        self.clock.now_unix_ms()
    }

    fn bootstrap_admin_key(&self) -> ServiceResult<Option<PathBuf>> {
        let inner = lock(&self.inner)?;
        if inner.catalog.admin_key_count()? > 0 {
            return Ok(None);
        }
        let key = auth::generate_key()?;
        let path = self.config.data_dir.join(ADMIN_KEY_FILE);
        write_secret_file(&path, &key)?;
        let sha = auth::key_sha256(&key);
        inner
            .catalog
            .insert_key(&sha, &auth::key_id(&sha), None, self.now())?;
        Ok(Some(path))
    }

    // ------------------------------------------------------------ auth, limits

    /// Resolves a presented bearer key to its credential.
    pub fn authenticate(&self, presented: Option<&str>) -> ServiceResult<Credential> {
        let key = presented.ok_or(ServiceError::MissingKey)?;
        if !auth::well_formed(key) {
            return Err(ServiceError::InvalidKey);
        }
        let inner = lock(&self.inner)?;
        inner
            .catalog
            .credential(&auth::key_sha256(key))?
            .ok_or(ServiceError::InvalidKey)
    }

    /// Takes one token from the credential's bucket, or 429.
    pub fn check_rate(&self, credential: &Credential) -> ServiceResult<()> {
        let rate = f64::from(self.config.rate_limit_per_second);
        let burst = f64::from(self.config.rate_limit_burst);
        let mut buckets = lock(&self.buckets)?;
        let now = Instant::now();
        let bucket = buckets
            .entry(credential.key_id().to_owned())
            .or_insert(Bucket {
                tokens: burst,
                at: now,
            });
        let elapsed = now.duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            self.metrics.incr("mosaic_rate_limited_total", &[]);
            Err(ServiceError::RateLimited)
        }
    }

    /// The tenant's policy and the principal's grant in force, both as the
    /// store's write path re-reads them (the catalog adds only the instant
    /// the policy came into force).
    fn tenant_and_grant(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
    ) -> ServiceResult<(crate::catalog::TenantRow, MemoryWriteGrant)> {
        let not_configured = || {
            ServiceError::forbidden(
                "tenant_not_configured",
                "the credential's tenant has no policy",
            )
        };
        let valid_from = inner
            .catalog
            .tenant(tenant)?
            .ok_or_else(not_configured)?
            .policy_valid_from_ms;
        let policy = inner
            .store
            .current_policy(tenant)?
            .ok_or_else(not_configured)?;
        let tenant_row = crate::catalog::TenantRow {
            policy,
            policy_valid_from_ms: valid_from,
        };
        let grant = inner
            .store
            .current_grant(tenant, principal)?
            .ok_or_else(|| {
                ServiceError::forbidden("no_grant", "the credential's principal has no grant")
            })?;
        if self.now() >= grant.expires_at_unix_ms {
            return Err(ServiceError::forbidden(
                "grant_expired",
                "the credential's grant has expired",
            ));
        }
        Ok((tenant_row, grant))
    }

    // ------------------------------------------------------------ propose

    /// Runs one proposal through the store's write transaction (which runs
    /// the gate), then publishes it to the indexes.
    pub fn propose(
        &self,
        credential: &Credential,
        request: &ProposeRequest,
    ) -> ServiceResult<ProposeResponse> {
        let (tenant, principal) = credential.principal()?;
        let mut inner = lock(&self.inner)?;
        let response = self.propose_locked(&mut inner, tenant, principal, request)?;
        self.publish_pending(&mut inner)?;
        Ok(response)
    }

    fn propose_locked(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        request: &ProposeRequest,
    ) -> ServiceResult<ProposeResponse> {
        let prepared = self.prepare_write(inner, tenant, principal, request)?;
        let outcome = inner.store.write(&prepared.write)?;
        let accepted = outcome.is_accepted();
        self.record_decision(inner, tenant, principal, request, &prepared, accepted)?;
        let mut response = ProposeResponse {
            proposal_id: prepared.proposal_id,
            record_id: prepared.record_id,
            decision: if accepted { "accepted" } else { "rejected" }.to_owned(),
            violations: Vec::new(),
            review_case_ids: Vec::new(),
            line_id: None,
            line_generation: None,
            replayed: outcome.replayed,
            receipt: outcome.receipt.clone(),
            server_judgments: prepared.server_judgments,
            server_conflicts: prepared.server_conflicts,
        };
        match outcome.decision {
            WriteDecision::Accepted {
                line_id,
                line_generation,
                ..
            } => {
                response.line_id = Some(line_id);
                response.line_generation = Some(line_generation);
            }
            WriteDecision::Rejected {
                violations,
                review_case_ids,
            } => {
                response.violations = violations;
                response.review_case_ids = review_case_ids;
            }
        }
        self.metrics.incr(
            "mosaic_write_decisions_total",
            &[("decision", &response.decision)],
        );
        Ok(response)
    }

    /// Everything the propose path does before the store's write
    /// transaction: identity checks, derived ids, the server's own
    /// verbatim judgments, external evidence only when signed by a
    /// registered verifier, and the server's conflict scan. Review writes
    /// (`accept_narrower`, `supersede`) go through it too, so a reviewer
    /// never bypasses the evidence rules or the gate.
    fn prepare_write(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        request: &ProposeRequest,
    ) -> ServiceResult<PreparedWrite> {
        check_identity(tenant, principal, &request.tenant_id, &request.principal_id)?;
        if request
            .subject
            .principal_id()
            .is_some_and(|p| p != principal)
        {
            return Err(ServiceError::forbidden(
                "principal_mismatch",
                "the subject names a principal other than the credential's",
            ));
        }
        validate_digests(request)?;
        let (tenant_row, grant) = self.tenant_and_grant(inner, tenant, principal)?;
        let policy = &tenant_row.policy;
        let now = self.now();
        let content_sha256 = sha256_hex(request.content.as_bytes());
        let mut id_basis = request.clone();
        id_basis.content = content_sha256.clone();
        id_basis.tenant_id = Some(tenant.to_owned());
        id_basis.principal_id = Some(principal.to_owned());
        let basis = domain_digest(REQUEST_ID_DOMAIN, &id_basis)?;
        let short = basis.get(..32).unwrap_or(&basis);
        let record_id = request
            .record_id
            .clone()
            .unwrap_or_else(|| format!("m-{short}"));
        let proposal_id = request
            .proposal_id
            .clone()
            .unwrap_or_else(|| format!("p-{short}"));
        let writer_release = request
            .writer_release
            .clone()
            .unwrap_or_else(|| DEFAULT_WRITER.to_owned());
        let ttl = request
            .ttl_ms
            .unwrap_or_else(|| (30 * DAY_MS).min(policy.max_ttl_ms));
        // A retry keeps the first decision's expiry so the store replays it.
        let first_decided = inner
            .catalog
            .proposal_decided_at(&proposal_id, tenant, principal)?
            .unwrap_or(now);
        let token_count = match request.token_count {
            Some(n) => n,
            None => u32::try_from(request.content.split_whitespace().count()).unwrap_or(u32::MAX),
        };
        // Evidence: the server's own verbatim judgments (400 on a source
        // text that is not the declared source), external evidence only
        // when signed by a registered verifier (403), and the server's own
        // conflict scan. All before anything is written.
        let proposition = Proposition {
            tenant_id: tenant,
            content_sha256: &content_sha256,
            claims: &request.claims,
        };
        let server_judgments = evidence::verbatim_judgments(
            &proposition,
            &request.content,
            &request.sources,
            &request.source_texts,
        )
        .map_err(source_text_error)?;
        let external = authenticate_evidence(&inner.catalog, &proposition, request)?;
        let server_conflicts =
            self.conflict_scan(inner, tenant, principal, &grant, &record_id, request)?;
        let provenance_sha256 = match &request.provenance_sha256 {
            Some(p) => p.clone(),
            None => sha256_hex(
                format!("mosaic.server.provenance.v1\n{tenant}\n{principal}\n{writer_release}")
                    .as_bytes(),
            ),
        };
        let proposal = MemoryWriteProposal {
            proposal_id: proposal_id.clone(),
            record_id: record_id.clone(),
            kind: request.kind,
            purpose: request.purpose,
            tenant_id: tenant.to_owned(),
            policy_sha256: policy.policy_sha256.clone(),
            subject: request.subject.clone(),
            content_sha256: content_sha256.clone(),
            provenance_sha256,
            token_count,
            token_counter_release: request
                .token_counter_release
                .clone()
                .unwrap_or_else(|| DEFAULT_TOKEN_COUNTER.to_owned()),
            proposed_at_unix_ms: now,
            requested_expiry_unix_ms: first_decided.saturating_add(ttl),
            writer_release,
            sources: request.sources.clone(),
            summary: request.summary.clone(),
            consent_receipt_sha256: request.consent_receipt_sha256.clone(),
            procedure_evaluation: external.procedure_evaluation.clone(),
            supersedes_record_id: request.supersedes_record_id.clone(),
            claims: request.claims.clone(),
        };
        let write = WriteRequest {
            tenant_id: tenant.to_owned(),
            principal_id: principal.to_owned(),
            proposal,
            content: request.content.clone(),
            judgments: server_judgments
                .iter()
                .cloned()
                .chain(external.judgments)
                .collect(),
            adjudications: external.adjudications,
            conflicts: server_conflicts
                .iter()
                .cloned()
                .chain(external.conflicts)
                .collect(),
            procedure_evaluation: external.procedure_evaluation,
            derived_from: request.derived_from.clone(),
            expected_line_generation: request.expected_line_generation,
            now_unix_ms: now,
        };
        Ok(PreparedWrite {
            write,
            record_id,
            proposal_id,
            now,
            server_judgments,
            server_conflicts,
        })
    }

    /// The catalog's side of a decided proposal: the proposal row, and for
    /// an accepted one the export copy and its structured claims.
    fn record_decision(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        request: &ProposeRequest,
        prepared: &PreparedWrite,
        accepted: bool,
    ) -> ServiceResult<()> {
        let (record_id, proposal_id, now) =
            (&prepared.record_id, &prepared.proposal_id, prepared.now);
        inner
            .catalog
            .insert_proposal(proposal_id, tenant, principal, record_id, accepted, now)?;
        if accepted {
            let mut export_copy = request.clone();
            export_copy.content = String::new();
            export_copy.record_id = Some(record_id.clone());
            export_copy.proposal_id = Some(proposal_id.clone());
            inner.catalog.insert_memory(&MemoryRow {
                record_id: record_id.clone(),
                proposal_id: proposal_id.clone(),
                tenant_id: tenant.to_owned(),
                writer_principal_id: principal.to_owned(),
                subject_key: request.subject.key(),
                subject_principal_id: request.subject.principal_id().map(str::to_owned),
                kind: request.kind.as_str().to_owned(),
                created_at_ms: now,
                request_json: Some(
                    serde_json::to_string(&export_copy)
                        .map_err(|e| ServiceError::Internal(e.to_string()))?,
                ),
            })?;
            inner
                .catalog
                .insert_claims(record_id, tenant, &request.claims)?;
        }
        Ok(())
    }

    /// The server's own conflict observations for a proposal: the
    /// structured scan over stored claims sharing a proposed claim's subject
    /// and predicate, and a declared supersession the server can confirm.
    /// Only records of the tenant that are live and visible to the key take
    /// part, so a scan never reveals a record the key could not read.
    fn conflict_scan(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        grant: &MemoryWriteGrant,
        record_id: &str,
        request: &ProposeRequest,
    ) -> ServiceResult<Vec<ConflictObservation>> {
        let keys: BTreeSet<(&str, &str)> = request
            .claims
            .iter()
            .map(|c| (c.subject.as_str(), c.predicate.as_str()))
            .collect();
        let mut existing = Vec::new();
        for (subject, predicate) in keys {
            for (existing_id, claim) in inner.catalog.claims_by_key(tenant, subject, predicate)? {
                if existing_id != record_id
                    && live_visible(inner, tenant, principal, grant, &existing_id, false)?.is_some()
                {
                    existing.push((existing_id, claim));
                }
            }
        }
        let mut observations = evidence::scan_claims(record_id, &request.claims, &existing)?;
        if let Some(superseded) = request.supersedes_record_id.as_deref() {
            let same_subject = superseded != record_id
                && live_visible(inner, tenant, principal, grant, superseded, true)?
                    .is_some_and(|subject| subject == request.subject);
            if same_subject {
                observations.push(evidence::supersession_observation(record_id, superseded)?);
            }
        }
        Ok(observations)
    }

    // ------------------------------------------------------------ recall

    /// Store eligibility → (query: index funnel) → selector → context handoff.
    pub fn recall(
        &self,
        credential: &Credential,
        request: &RecallRequest,
    ) -> ServiceResult<RecallResponse> {
        let (tenant, principal) = credential.principal()?;
        check_identity(tenant, principal, &request.tenant_id, &request.principal_id)?;
        let mut inner = lock(&self.inner)?;
        let (tenant_row, grant) = self.tenant_and_grant(&mut inner, tenant, principal)?;
        let workspace_id = match &request.workspace_id {
            Some(w) => w.clone(),
            None => grant
                .allowed_workspace_ids
                .first()
                .cloned()
                .unwrap_or_else(|| DEFAULT_WORKSPACE.to_owned()),
        };
        if !grant.allowed_workspace_ids.contains(&workspace_id) {
            return Err(ServiceError::forbidden(
                "workspace_not_granted",
                "the credential's grant does not include this workspace",
            ));
        }
        let mut kinds = request
            .kinds
            .clone()
            .unwrap_or_else(|| MemoryKind::ALL.to_vec());
        let run_id = match &request.run_id {
            Some(r) if grant.allowed_run_ids.contains(r) => r.clone(),
            Some(_) => {
                return Err(ServiceError::forbidden(
                    "run_not_granted",
                    "the credential's grant does not include this run",
                ));
            }
            None => {
                kinds.retain(|k| *k != MemoryKind::Working);
                NO_RUN.to_owned()
            }
        };
        let max_records = request.max_records.unwrap_or(10);
        let ctx = MemoryReadContext {
            schema_version: MEMORY_SCHEMA_VERSION,
            selector_release: SELECTOR_RELEASE.to_owned(),
            tenant_id: tenant.to_owned(),
            policy_sha256: tenant_row.policy.policy_sha256.clone(),
            policy_valid_from_unix_ms: tenant_row.policy_valid_from_ms,
            policy_valid_until_unix_ms: None,
            principal_id: principal.to_owned(),
            workspace_id: workspace_id.clone(),
            run_id: run_id.clone(),
            now_unix_ms: self.now(),
            allowed_kinds: kinds,
            max_records,
        };
        if let Err(problems) = ctx.validate() {
            return Err(ServiceError::bad_request(
                "invalid_read_context",
                format!("the read context is invalid: {problems:?}"),
            ));
        }
        let eligible = inner.store.eligible_records(&eligibility_query(&ctx))?;
        let records: Vec<_> = eligible.records.iter().map(|r| r.record.clone()).collect();
        let contents: BTreeMap<String, String> = eligible
            .records
            .iter()
            .map(|r| (r.record.record_id.clone(), r.content.clone()))
            .collect();
        let budget = ContextBudget {
            token_counter_release: DEFAULT_TOKEN_COUNTER.to_owned(),
            total_tokens: request.token_budget.unwrap_or(4096),
            lane_limits: BTreeMap::new(),
        };
        let internal = |e: &dyn std::fmt::Display| ServiceError::Internal(e.to_string());
        let query_text = request.query.as_deref().filter(|q| !q.trim().is_empty());
        let mut omitted_indexes = Vec::new();
        let (selection, relevance, report, blocks) = match query_text {
            Some(text) => {
                let set = eligible_set(&ctx, &records).map_err(|e| internal(&e))?;
                let read_subject = format!("{principal}/{workspace_id}/{run_id}");
                let mut query = RecallQuery {
                    tenant_id: tenant,
                    policy_sha256: &ctx.policy_sha256,
                    selector_release: SELECTOR_RELEASE,
                    read_subject: &read_subject,
                    revocation_generation: eligible.snapshot.revocation_generation,
                    text,
                    claim_keys: &request.claim_keys,
                    eligible: &set,
                    max_results: max_records,
                    mode: request.mode.unwrap_or(RetrievalMode::Hybrid),
                };
                let vector = match query.mode {
                    RetrievalMode::Lexical => None,
                    _ => {
                        let embedded = match &inner.pg {
                            Some(pg) => pg.vector.embedder().embed(text),
                            None => inner.retriever.embed_query(text),
                        };
                        match embedded {
                            Ok(v) => Some(v),
                            // Degraded read: the optional vector index is
                            // skipped and the query ranked as a lexical
                            // one, which the response says.
                            Err(_) if self.config.vector_index_optional => {
                                omitted_indexes.push(VECTOR_TARGET.to_owned());
                                query.mode = RetrievalMode::Lexical;
                                self.metrics.incr(
                                    "mosaic_degraded_reads_total",
                                    &[("target", VECTOR_TARGET)],
                                );
                                None
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                };
                let receipt = match &mut inner.pg {
                    Some(pg) => pg.relevance(&query, &set, vector.as_deref())?,
                    None => {
                        inner
                            .retriever
                            .recall_embedded(&query, vector.as_deref())?
                            .receipt
                    }
                };
                let handoff = hand_off(&ctx, &records, &contents, &receipt, &[], &budget)?;
                (
                    handoff.selection,
                    Some(receipt),
                    handoff.report,
                    handoff.blocks,
                )
            }
            None => {
                let selection = select_memory(&ctx, &records).map_err(|e| internal(&e))?;
                let (_, report) =
                    allocate_selected_memory(&selection.receipt, &records, &[], &budget)
                        .map_err(|e| internal(&e))?;
                let by_id: BTreeMap<&str, &mosaic_harness::MemoryRecord> =
                    records.iter().map(|r| (r.record_id.as_str(), r)).collect();
                let mut blocks = Vec::new();
                for id in &report.included_memory {
                    let (Some(record), Some(content)) = (by_id.get(id.as_str()), contents.get(id))
                    else {
                        return Err(ServiceError::Internal(format!(
                            "selected record {id} not supplied"
                        )));
                    };
                    blocks.push(render_recalled_memory(record, content).map_err(|e| internal(&e))?);
                }
                (selection, None, report, blocks)
            }
        };
        let context = if blocks.is_empty() {
            String::new()
        } else {
            format!("{RECALLED_MEMORY_NOTICE}\n\n{}", blocks.join("\n\n"))
        };
        self.metrics.incr("mosaic_recalls_total", &[]);
        self.metrics.add(
            "mosaic_recall_selected_total",
            &[],
            selection.receipt.selected_record_ids.len() as u64,
        );
        Ok(RecallResponse {
            context,
            blocks,
            selected_record_ids: selection.receipt.selected_record_ids.clone(),
            decisions: selection.receipt.decisions.clone(),
            selection_receipt: selection.receipt,
            relevance_receipt: relevance,
            context_report: report,
            snapshot: eligible.snapshot,
            omitted_indexes,
        })
    }

    // ------------------------------------------------------------ get, list

    /// The store's listing of a record the credential may see, else 404
    /// (erased records included: their identity stays listed).
    fn visible_row(
        &self,
        inner: &mut Inner,
        credential: &Credential,
        record_id: &str,
    ) -> ServiceResult<ListedRecord> {
        let missing = || ServiceError::not_found("memory", record_id);
        let tenant = match credential {
            Credential::Principal { tenant_id, .. } => tenant_id.clone(),
            Credential::Admin { .. } => match inner.store.get_record(record_id)? {
                Some(stored) => stored.record.tenant_id,
                None => {
                    inner
                        .store
                        .tombstone(record_id)?
                        .ok_or_else(missing)?
                        .tenant_id
                }
            },
        };
        let listed = find_listed(inner.store.as_mut(), &tenant, record_id)?.ok_or_else(missing)?;
        if let Credential::Principal { principal_id, .. } = credential {
            let visible = inner
                .store
                .current_grant(&tenant, principal_id)?
                .is_some_and(|grant| subject_visible(principal_id, &grant, &listed.subject));
            if !visible {
                return Err(missing());
            }
        }
        Ok(listed)
    }

    /// One memory with its content and state.
    pub fn get_memory(
        &self,
        credential: &Credential,
        record_id: &str,
    ) -> ServiceResult<MemoryView> {
        let mut inner = lock(&self.inner)?;
        if let Credential::Principal {
            tenant_id,
            principal_id,
            ..
        } = credential
        {
            self.tenant_and_grant(&mut inner, tenant_id, principal_id)?;
        }
        self.visible_row(&mut inner, credential, record_id)?;
        let stored = inner
            .store
            .get_record(record_id)?
            .ok_or_else(|| ServiceError::not_found("memory", record_id))?;
        Ok(MemoryView {
            record: stored.record,
            state: stored.state.as_str().to_owned(),
            content: stored.content,
            line_id: stored.line_id,
            line_generation: stored.line_generation,
            proposal_id: stored.proposal_id,
        })
    }

    /// Memories about one subject (any state), identities only.
    pub fn list_by_subject(
        &self,
        credential: &Credential,
        query: &ListQuery,
    ) -> ServiceResult<Vec<ListEntry>> {
        let (tenant, principal) = credential.principal()?;
        let subject = subject_from_query(query)?;
        let mut inner = lock(&self.inner)?;
        let (_, grant) = self.tenant_and_grant(&mut inner, tenant, principal)?;
        if !subject_visible(principal, &grant, &subject) {
            return Err(ServiceError::forbidden(
                "subject_not_permitted",
                "the credential may not read memories about this subject",
            ));
        }
        let filter = RecordFilter {
            subject: Some(subject),
            ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
        };
        Ok(list_all(inner.store.as_mut(), filter)?
            .into_iter()
            .map(|row| ListEntry {
                record_id: row.record_id,
                state: row.state.as_str().to_owned(),
                kind: row.kind.as_str().to_owned(),
                subject_key: row.subject.key(),
                created_at_unix_ms: row.created_at_unix_ms,
            })
            .collect())
    }

    // ------------------------------------------------------------ revocation

    /// Revokes a record (ineligible in the same transaction) and drives its
    /// deletion to a finalized receipt.
    pub fn revoke(
        &self,
        credential: &Credential,
        record_id: &str,
        request: &RevokeRequest,
    ) -> ServiceResult<RevocationResponse> {
        let (tenant, principal) = credential.principal()?;
        let mut inner = lock(&self.inner)?;
        self.tenant_and_grant(&mut inner, tenant, principal)?;
        self.visible_row(&mut inner, credential, record_id)?;
        let authorization = Authorization {
            actor_id: principal.to_owned(),
            authority_ref: request
                .authority_ref
                .clone()
                .unwrap_or_else(|| credential.key_id().to_owned()),
        };
        self.revoke_and_drive(&mut inner, record_id, &authorization)
    }

    fn revoke_and_drive(
        &self,
        inner: &mut Inner,
        record_id: &str,
        authorization: &Authorization,
    ) -> ServiceResult<RevocationResponse> {
        let (state, committed) = match inner.store.resume_revocation(record_id)? {
            Some(state) => (state, None),
            None => {
                let token = inner.store.revoke(
                    record_id,
                    &RevocationReason::Requested,
                    authorization,
                    self.now(),
                )?;
                self.metrics.incr("mosaic_revocations_total", &[]);
                (RevocationState::Ineligible(token), Some(Instant::now()))
            }
        };
        self.drive_timed(inner, record_id, state, committed)
    }

    /// Advances a revocation as far as it can go now.
    fn drive(
        &self,
        inner: &mut Inner,
        record_id: &str,
        state: RevocationState,
    ) -> ServiceResult<RevocationResponse> {
        self.drive_timed(inner, record_id, state, None)
    }

    /// [`Service::drive`]; when the ineligibility committed at
    /// `committed` (in this call), the time until every index acknowledged
    /// the tombstone goes to `mosaic_deletion_index_ack_seconds`.
    fn drive_timed(
        &self,
        inner: &mut Inner,
        record_id: &str,
        mut state: RevocationState,
        committed: Option<Instant>,
    ) -> ServiceResult<RevocationResponse> {
        let generation = |s: &RevocationState| match s {
            RevocationState::Ineligible(t) => t.revocation_generation(),
            RevocationState::DeletionRequested(t) => t.revocation_generation(),
            RevocationState::IndexesAcknowledged(t) => t.revocation_generation(),
            RevocationState::Erased(t) => t.revocation_generation(),
            RevocationState::Finalized(r) => r.body.revocation_generation,
        };
        // Another worker (another server's reconcile on a shared database)
        // may advance the same deletion between two of these steps; the
        // store then refuses the spent token and the deletion continues
        // from the stage the store holds.
        let mut resumes = 0;
        loop {
            let now = self.now();
            let step: Result<RevocationState, StoreError> = match state {
                RevocationState::Ineligible(token) => inner
                    .store
                    .request_deletion(token, now)
                    .map(RevocationState::DeletionRequested),
                RevocationState::DeletionRequested(token) => {
                    self.publish_pending(inner)?;
                    match inner.store.confirm_indexes_acknowledged(token, now) {
                        Ok(next) => {
                            if let Some(at) = committed {
                                self.metrics.observe(
                                    "mosaic_deletion_index_ack_seconds",
                                    &[],
                                    at.elapsed().as_secs_f64(),
                                );
                            }
                            Ok(RevocationState::IndexesAcknowledged(next))
                        }
                        Err(StoreError::RevocationNotReady { .. }) => {
                            let current = inner.store.resume_revocation(record_id)?;
                            let stage = current.as_ref().map_or("deletion_requested", stage_name);
                            return Ok(RevocationResponse {
                                record_id: record_id.to_owned(),
                                stage: stage.to_owned(),
                                revocation_generation: current.as_ref().map_or(0, generation),
                                tombstone: inner.store.tombstone(record_id)?,
                                deletion_receipt: None,
                            });
                        }
                        Err(e) => Err(e),
                    }
                }
                RevocationState::IndexesAcknowledged(token) => {
                    match inner.store.erase(token, now) {
                        Ok(erased) => {
                            inner.catalog.clear_request(record_id)?;
                            Ok(RevocationState::Erased(erased))
                        }
                        Err(e) => Err(e),
                    }
                }
                RevocationState::Erased(token) => match inner.store.finalize_deletion(token, now) {
                    Ok(receipt) => {
                        self.metrics.incr("mosaic_deletions_finalized_total", &[]);
                        Ok(RevocationState::Finalized(Box::new(receipt)))
                    }
                    Err(e) => Err(e),
                },
                RevocationState::Finalized(receipt) => {
                    return Ok(RevocationResponse {
                        record_id: record_id.to_owned(),
                        stage: "finalized".to_owned(),
                        revocation_generation: receipt.body.revocation_generation,
                        tombstone: Some(receipt.body.tombstone.clone()),
                        deletion_receipt: Some(receipt_view(&receipt)),
                    });
                }
            };
            state = match step {
                Ok(next) => next,
                Err(StoreError::InvalidState { .. }) if resumes < 4 => {
                    resumes += 1;
                    match inner.store.resume_revocation(record_id)? {
                        Some(current) => current,
                        None => return Err(ServiceError::not_found("revocation", record_id)),
                    }
                }
                Err(e) => return Err(e.into()),
            };
        }
    }

    /// The revocation stage (and receipt) of a visible record.
    pub fn deletion_status(
        &self,
        credential: &Credential,
        record_id: &str,
    ) -> ServiceResult<RevocationResponse> {
        let mut inner = lock(&self.inner)?;
        self.visible_row(&mut inner, credential, record_id)?;
        match inner.store.resume_revocation(record_id)? {
            Some(state) => self.drive(&mut inner, record_id, state),
            None => Err(ServiceError::not_found("revocation", record_id)),
        }
    }

    // ------------------------------------------------------------ consent

    /// Stores the credential principal's consent.
    pub fn give_consent(
        &self,
        credential: &Credential,
        request: &ConsentRequest,
    ) -> ServiceResult<ConsentResponse> {
        let (tenant, principal) = credential.principal()?;
        let mut inner = lock(&self.inner)?;
        let (tenant_row, _) = self.tenant_and_grant(&mut inner, tenant, principal)?;
        let now = self.now();
        let consent = ConsentReceipt {
            consent_id: request
                .consent_id
                .clone()
                .unwrap_or_else(|| format!("consent-{principal}-{now}")),
            tenant_id: tenant.to_owned(),
            policy_sha256: tenant_row.policy.policy_sha256.clone(),
            principal_id: principal.to_owned(),
            purpose: request.purpose,
            ui_release: request.ui_release.clone(),
            granted_at_unix_ms: now,
            revoked_at_unix_ms: None,
        };
        let consent_sha256 = inner.store.put_consent(&consent, now)?;
        inner
            .catalog
            .insert_consent(&consent_sha256, tenant, principal)?;
        Ok(ConsentResponse { consent_sha256 })
    }

    /// Withdraws one of the principal's consents: every dependent record is
    /// revoked in that transaction, then deleted to a receipt.
    pub fn withdraw_consent(
        &self,
        credential: &Credential,
        consent_sha256: &str,
    ) -> ServiceResult<WithdrawResponse> {
        let (tenant, principal) = credential.principal()?;
        check_digest("consent_sha256", consent_sha256)?;
        let mut inner = lock(&self.inner)?;
        self.tenant_and_grant(&mut inner, tenant, principal)?;
        match inner.catalog.consent_owner(consent_sha256)? {
            Some((t, p)) if t == tenant && p == principal => {}
            _ => return Err(ServiceError::not_found("consent", consent_sha256)),
        }
        let authorization = Authorization {
            actor_id: principal.to_owned(),
            authority_ref: credential.key_id().to_owned(),
        };
        self.withdraw_locked(&mut inner, tenant, consent_sha256, &authorization)
    }

    fn withdraw_locked(
        &self,
        inner: &mut Inner,
        tenant: &str,
        consent_sha256: &str,
        authorization: &Authorization,
    ) -> ServiceResult<WithdrawResponse> {
        let withdrawal =
            inner
                .store
                .withdraw_consent(tenant, consent_sha256, authorization, self.now())?;
        let mut revocations = Vec::new();
        for token in withdrawal.revoked {
            let record_id = token.record_id().to_owned();
            revocations.push(self.drive(
                inner,
                &record_id,
                RevocationState::DeletionRequested(token),
            )?);
        }
        Ok(WithdrawResponse {
            consent_sha256: withdrawal.consent_sha256,
            revocation_generation: withdrawal.revocation_generation,
            revocations,
            quarantined: withdrawal.quarantined,
        })
    }

    /// Right to erasure for the credential's own principal.
    pub fn erase_self(&self, credential: &Credential) -> ServiceResult<ErasureResponse> {
        let (tenant, principal) = credential.principal()?;
        let mut inner = lock(&self.inner)?;
        let authorization = Authorization {
            actor_id: principal.to_owned(),
            authority_ref: credential.key_id().to_owned(),
        };
        self.erase_locked(&mut inner, tenant, principal, &authorization)
    }

    /// Right to erasure by the admin; also disables the principal's keys.
    pub fn erase_principal(
        &self,
        credential: &Credential,
        tenant: &str,
        principal: &str,
    ) -> ServiceResult<ErasureResponse> {
        credential.require_admin()?;
        let mut inner = lock(&self.inner)?;
        if inner.catalog.tenant(tenant)?.is_none() {
            return Err(ServiceError::not_found("tenant", tenant));
        }
        let authorization = Authorization {
            actor_id: "admin".to_owned(),
            authority_ref: credential.key_id().to_owned(),
        };
        let response = self.erase_locked(&mut inner, tenant, principal, &authorization)?;
        inner.catalog.disable_principal_keys(tenant, principal)?;
        Ok(response)
    }

    fn erase_locked(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        authorization: &Authorization,
    ) -> ServiceResult<ErasureResponse> {
        let mut consents_withdrawn = Vec::new();
        let mut revocations = Vec::new();
        for consent in inner.catalog.consents_of(tenant, principal)? {
            match self.withdraw_locked(inner, tenant, &consent, authorization) {
                Ok(w) => {
                    consents_withdrawn.push(consent);
                    revocations.extend(w.revocations);
                }
                // Already withdrawn (or never stored): nothing depends on it any more.
                Err(
                    ServiceError::Conflict { .. }
                    | ServiceError::NotFound { .. }
                    | ServiceError::BadRequest { .. },
                ) => {}
                Err(e) => return Err(e),
            }
        }
        for row in records_of_principal(inner.store.as_mut(), tenant, principal)? {
            if revocations
                .iter()
                .any(|r: &RevocationResponse| r.record_id == row.record_id)
            {
                continue;
            }
            let exists = inner.store.get_record(&row.record_id)?.is_some();
            let revoked = inner.store.resume_revocation(&row.record_id)?;
            if !exists && revoked.is_none() {
                continue;
            }
            revocations.push(self.revoke_and_drive(inner, &row.record_id, authorization)?);
        }
        revocations.sort_by(|a, b| a.record_id.cmp(&b.record_id));
        let complete = revocations.iter().all(|r| r.deletion_receipt.is_some());
        Ok(ErasureResponse {
            tenant_id: tenant.to_owned(),
            principal_id: principal.to_owned(),
            revocations,
            consents_withdrawn,
            complete,
        })
    }

    // ------------------------------------------------------------ verify

    /// Verifies a write receipt (from stored inputs) or a deletion receipt.
    pub fn verify(
        &self,
        credential: &Credential,
        request: &VerifyRequest,
    ) -> ServiceResult<VerifyResponse> {
        match request {
            VerifyRequest::Write { proposal_id } => {
                let mut inner = lock(&self.inner)?;
                let owner = inner.catalog.proposal_owner(proposal_id)?;
                let allowed = match (credential, &owner) {
                    (Credential::Admin { .. }, _) => true,
                    (Credential::Principal { tenant_id, .. }, Some((t, _))) => t == tenant_id,
                    _ => false,
                };
                if !allowed {
                    return Err(ServiceError::not_found("proposal", proposal_id.as_str()));
                }
                match inner.store.verify_write_receipt(proposal_id) {
                    Ok(()) => Ok(VerifyResponse {
                        valid: true,
                        problem: None,
                    }),
                    Err(StoreError::ReceiptMismatch(problem)) => Ok(VerifyResponse {
                        valid: false,
                        problem: Some(problem),
                    }),
                    Err(e) => Err(e.into()),
                }
            }
            VerifyRequest::Deletion { receipt } => {
                check_digest("receipt.receipt_sha256", &receipt.receipt_sha256)?;
                let receipt = DeletionReceipt {
                    body: receipt.body.clone(),
                    receipt_sha256: receipt.receipt_sha256.clone(),
                };
                let valid = receipt.verify();
                Ok(VerifyResponse {
                    valid,
                    problem: (!valid)
                        .then(|| "receipt_sha256 does not match the canonical body".to_owned()),
                })
            }
        }
    }

    // ------------------------------------------------------------ export, import

    /// The credential's memories (principal: about or by them; admin: a
    /// whole tenant) that are still readable or publishing, as export lines.
    pub fn export(
        &self,
        credential: &Credential,
        tenant_for_admin: Option<&str>,
    ) -> ServiceResult<Vec<ExportLine>> {
        let mut inner = lock(&self.inner)?;
        let live = vec![ListedState::Active, ListedState::Publishing];
        let filter = match credential {
            Credential::Principal {
                tenant_id,
                principal_id,
                ..
            } => {
                self.tenant_and_grant(&mut inner, tenant_id, principal_id)?;
                RecordFilter {
                    proposer_principal_id: Some(principal_id.clone()),
                    states: live,
                    include_content: true,
                    ..RecordFilter::tenant(tenant_id, MAX_LIST_LIMIT)
                }
            }
            Credential::Admin { .. } => {
                let tenant = tenant_for_admin.ok_or_else(|| {
                    ServiceError::bad_request("missing_tenant", "the admin export needs a tenant")
                })?;
                RecordFilter {
                    states: live,
                    include_content: true,
                    ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
                }
            }
        };
        let grant = match credential {
            Credential::Principal {
                tenant_id,
                principal_id,
                ..
            } => inner.store.current_grant(tenant_id, principal_id)?,
            Credential::Admin { .. } => None,
        };
        let mut lines = Vec::new();
        for row in list_all(inner.store.as_mut(), filter)? {
            if let (Credential::Principal { principal_id, .. }, Some(grant)) = (credential, &grant)
                && !subject_visible(principal_id, grant, &row.subject)
            {
                continue;
            }
            let Some(content) = row.content else {
                continue;
            };
            let Some(stored) = inner.store.get_record(&row.record_id)? else {
                continue;
            };
            if !matches!(stored.state, RecordState::Active | RecordState::Publishing) {
                continue;
            }
            let mut request = match inner
                .catalog
                .memory(&row.record_id)?
                .and_then(|m| m.request_json)
            {
                Some(json) => serde_json::from_str::<ProposeRequest>(&json).map_err(|e| {
                    ServiceError::Internal(format!("catalog request does not decode: {e}"))
                })?,
                // No export copy (the catalog write after the store commit
                // did not happen): rebuild the request from the record.
                None => request_from_record(&stored.record, &row.proposal_id),
            };
            request.content = content;
            lines.push(ExportLine::Memory(Box::new(ExportedMemory {
                record: stored.record,
                state: stored.state.as_str().to_owned(),
                request,
            })));
        }
        drop(inner);
        Ok(lines)
    }

    /// Imports JSON lines: every line's request is proposed again under the
    /// credential (the gate decides each one afresh).
    pub fn import(&self, credential: &Credential, body: &str) -> ServiceResult<ImportResponse> {
        let (tenant, principal) = credential.principal()?;
        let mut report = ImportResponse {
            lines: 0,
            accepted: 0,
            rejected: 0,
            errors: BTreeMap::new(),
        };
        let mut inner = lock(&self.inner)?;
        for (idx, line) in body.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            report.lines += 1;
            let line_no = idx + 1;
            let mut request = match serde_json::from_str::<ExportLine>(line) {
                Ok(ExportLine::Memory(m)) => m.request,
                Err(_) => {
                    report.errors.insert(line_no, "malformed_line".to_owned());
                    continue;
                }
            };
            // Identities are derived afresh under the importing credential.
            request.record_id = None;
            request.proposal_id = None;
            match self.propose_locked(&mut inner, tenant, principal, &request) {
                Ok(r) if r.decision == "accepted" => report.accepted += 1,
                Ok(_) => report.rejected += 1,
                Err(e) => {
                    report.errors.insert(line_no, e.code().to_owned());
                }
            }
        }
        self.publish_pending(&mut inner)?;
        if report.lines == 0 || report.errors.len() == report.lines {
            return Err(ServiceError::bad_request(
                "malformed_body",
                "the body holds no importable line (one {\"type\":\"memory\",\"data\":{...}} object per line)",
            ));
        }
        Ok(report)
    }

    // ------------------------------------------------------------ admin

    /// Creates a tenant with its policy.
    pub fn create_tenant(
        &self,
        credential: &Credential,
        request: &CreateTenantRequest,
    ) -> ServiceResult<MemoryWritePolicy> {
        credential.require_admin()?;
        if !mosaic_harness::record::is_identifier(&request.tenant_id) {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "tenant_id is not a valid identifier",
            ));
        }
        {
            let inner = lock(&self.inner)?;
            if inner.catalog.tenant(&request.tenant_id)?.is_some() {
                return Err(ServiceError::Conflict {
                    code: "tenant_exists",
                    message: format!("tenant {} already exists", request.tenant_id),
                });
            }
        }
        let policy = request.policy.clone().unwrap_or(PolicyRequest {
            allowed_kinds: None,
            max_ttl_ms: None,
            require_consent_for_principal_semantic: None,
            minimum_procedure_eval_cases: None,
        });
        self.put_policy(credential, &request.tenant_id, &policy, true)
    }

    /// Replaces a tenant's policy (grants are re-bound to the new digest;
    /// records written under the old policy stop being readable).
    pub fn put_policy(
        &self,
        credential: &Credential,
        tenant: &str,
        request: &PolicyRequest,
        create: bool,
    ) -> ServiceResult<MemoryWritePolicy> {
        credential.require_admin()?;
        let mut inner = lock(&self.inner)?;
        if !create && inner.catalog.tenant(tenant)?.is_none() {
            return Err(ServiceError::not_found("tenant", tenant));
        }
        let mut policy = MemoryWritePolicy {
            tenant_id: tenant.to_owned(),
            policy_sha256: String::new(),
            allowed_kinds: request
                .allowed_kinds
                .clone()
                .unwrap_or_else(|| MemoryKind::ALL.to_vec()),
            max_ttl_ms: request.max_ttl_ms.unwrap_or(365 * DAY_MS),
            require_consent_for_principal_semantic: request
                .require_consent_for_principal_semantic
                .unwrap_or(true),
            minimum_procedure_eval_cases: request.minimum_procedure_eval_cases.unwrap_or(20),
        };
        policy.policy_sha256 = policy_digest(&policy)?;
        let now = self.now();
        inner.store.put_policy(&policy, now)?;
        inner.catalog.put_tenant(&policy, now)?;
        for principal in inner.catalog.grant_principals(tenant)? {
            let Some(mut grant) = inner.store.current_grant(tenant, &principal)? else {
                continue;
            };
            if grant.policy_sha256 != policy.policy_sha256 {
                grant.policy_sha256 = policy.policy_sha256.clone();
                inner.store.put_grant(&grant, now)?;
                inner.catalog.put_grant(&grant)?;
            }
        }
        Ok(policy)
    }

    /// The current policy of the credential's tenant (admin: of `tenant`).
    pub fn get_policy(
        &self,
        credential: &Credential,
        tenant: Option<&str>,
    ) -> ServiceResult<MemoryWritePolicy> {
        let tenant = match credential {
            Credential::Principal { tenant_id, .. } => tenant_id.as_str(),
            Credential::Admin { .. } => tenant
                .ok_or_else(|| ServiceError::bad_request("missing_tenant", "name a tenant"))?,
        };
        let mut inner = lock(&self.inner)?;
        if inner.catalog.tenant(tenant)?.is_none() {
            return Err(ServiceError::not_found("tenant", tenant));
        }
        inner
            .store
            .current_policy(tenant)?
            .ok_or_else(|| ServiceError::not_found("tenant", tenant))
    }

    /// Every tenant id.
    pub fn list_tenants(&self, credential: &Credential) -> ServiceResult<Vec<String>> {
        credential.require_admin()?;
        lock(&self.inner)?.catalog.tenant_ids()
    }

    /// Stores the grant in force for a principal.
    pub fn put_grant(
        &self,
        credential: &Credential,
        tenant: &str,
        principal: &str,
        request: &GrantRequest,
    ) -> ServiceResult<MemoryWriteGrant> {
        credential.require_admin()?;
        let mut inner = lock(&self.inner)?;
        self.put_grant_locked(&mut inner, tenant, principal, request)
    }

    fn put_grant_locked(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        request: &GrantRequest,
    ) -> ServiceResult<MemoryWriteGrant> {
        if !mosaic_harness::record::is_identifier(principal) {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "principal_id is not a valid identifier",
            ));
        }
        let tenant_row = inner
            .catalog
            .tenant(tenant)?
            .ok_or_else(|| ServiceError::not_found("tenant", tenant))?;
        let now = self.now();
        let grant = MemoryWriteGrant {
            grant_id: format!("grant-{tenant}-{principal}-{now}"),
            tenant_id: tenant.to_owned(),
            policy_sha256: tenant_row.policy.policy_sha256,
            principal_id: principal.to_owned(),
            allowed_kinds: request.allowed_kinds.clone().unwrap_or_else(|| {
                vec![
                    MemoryKind::Working,
                    MemoryKind::Episodic,
                    MemoryKind::Semantic,
                ]
            }),
            allowed_purposes: request.allowed_purposes.clone().unwrap_or_else(|| {
                vec![
                    MemoryPurpose::RunContinuity,
                    MemoryPurpose::Personalization,
                    MemoryPurpose::WorkspaceKnowledge,
                ]
            }),
            allowed_workspace_ids: request
                .allowed_workspace_ids
                .clone()
                .unwrap_or_else(|| vec![DEFAULT_WORKSPACE.to_owned()]),
            allowed_run_ids: request.allowed_run_ids.clone().unwrap_or_default(),
            expires_at_unix_ms: request
                .expires_at_unix_ms
                .unwrap_or(now.saturating_add(365 * DAY_MS)),
        };
        inner.store.put_grant(&grant, now)?;
        inner.catalog.put_grant(&grant)?;
        Ok(grant)
    }

    /// Creates a principal key (and stores its grant). The key is returned
    /// once; only its hash is kept.
    pub fn create_key(
        &self,
        credential: &Credential,
        request: &CreateKeyRequest,
    ) -> ServiceResult<CreateKeyResponse> {
        credential.require_admin()?;
        let mut inner = lock(&self.inner)?;
        let grant_request = request.grant.clone().unwrap_or(GrantRequest {
            allowed_kinds: None,
            allowed_purposes: None,
            allowed_workspace_ids: None,
            allowed_run_ids: None,
            expires_at_unix_ms: None,
        });
        let grant = self.put_grant_locked(
            &mut inner,
            &request.tenant_id,
            &request.principal_id,
            &grant_request,
        )?;
        let key = auth::generate_key()?;
        let sha = auth::key_sha256(&key);
        let key_id = auth::key_id(&sha);
        inner.catalog.insert_key(
            &sha,
            &key_id,
            Some((&request.tenant_id, &request.principal_id)),
            self.now(),
        )?;
        Ok(CreateKeyResponse {
            key_id,
            key,
            tenant_id: request.tenant_id.clone(),
            principal_id: request.principal_id.clone(),
            grant,
        })
    }

    /// Registers an external verifier (release and Ed25519 public key) for
    /// a tenant: evidence it signs is accepted in that tenant's proposals.
    pub fn register_verifier(
        &self,
        credential: &Credential,
        tenant: &str,
        request: &RegisterVerifierRequest,
    ) -> ServiceResult<VerifierView> {
        credential.require_admin()?;
        if !mosaic_harness::record::is_identifier(&request.verifier_release) {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "verifier_release is not a valid identifier",
            ));
        }
        if evidence::RESERVED_RELEASES.contains(&request.verifier_release.as_str()) {
            return Err(ServiceError::bad_request(
                "reserved_release",
                format!(
                    "verifier release {} belongs to the server",
                    request.verifier_release
                ),
            ));
        }
        let public_key = evidence::parse_public_key(&request.public_key_hex).ok_or_else(|| {
            ServiceError::bad_request(
                "invalid_public_key",
                "public_key_hex is not a 32-byte Ed25519 public key in hex",
            )
        })?;
        let inner = lock(&self.inner)?;
        if inner.catalog.tenant(tenant)?.is_none() {
            return Err(ServiceError::not_found("tenant", tenant));
        }
        let view = VerifierView {
            verifier_id: evidence::verifier_id(&public_key),
            tenant_id: tenant.to_owned(),
            verifier_release: request.verifier_release.clone(),
            public_key_hex: hex::encode(public_key),
            created_at_unix_ms: self.now(),
            disabled: false,
        };
        if !inner.catalog.insert_verifier(&view)? {
            return Err(ServiceError::Conflict {
                code: "verifier_exists",
                message: format!(
                    "verifier {} is already registered for tenant {tenant}",
                    view.verifier_id
                ),
            });
        }
        Ok(view)
    }

    /// Every verifier registered for a tenant.
    pub fn list_verifiers(
        &self,
        credential: &Credential,
        tenant: &str,
    ) -> ServiceResult<Vec<VerifierView>> {
        credential.require_admin()?;
        let inner = lock(&self.inner)?;
        if inner.catalog.tenant(tenant)?.is_none() {
            return Err(ServiceError::not_found("tenant", tenant));
        }
        inner.catalog.verifiers_of_tenant(tenant)
    }

    /// Disables a verifier: evidence it signs is refused from now on.
    pub fn disable_verifier(
        &self,
        credential: &Credential,
        tenant: &str,
        verifier_id: &str,
    ) -> ServiceResult<VerifierView> {
        credential.require_admin()?;
        let inner = lock(&self.inner)?;
        inner.catalog.disable_verifier(tenant, verifier_id)?;
        inner
            .catalog
            .verifier(tenant, verifier_id)?
            .ok_or_else(|| ServiceError::not_found("verifier", verifier_id))
    }

    /// Disables a key.
    pub fn disable_key(&self, credential: &Credential, key_id: &str) -> ServiceResult<()> {
        credential.require_admin()?;
        if lock(&self.inner)?.catalog.disable_key(key_id)? {
            Ok(())
        } else {
            Err(ServiceError::not_found("key", key_id))
        }
    }

    /// Every key's public description.
    pub fn list_keys(
        &self,
        credential: &Credential,
    ) -> ServiceResult<Vec<crate::catalog::KeyInfo>> {
        credential.require_admin()?;
        lock(&self.inner)?.catalog.keys()
    }

    /// Who the credential is, with its grant.
    pub fn whoami(&self, credential: &Credential) -> ServiceResult<WhoAmI> {
        let grant = match credential {
            Credential::Principal {
                tenant_id,
                principal_id,
                ..
            } => lock(&self.inner)?
                .store
                .current_grant(tenant_id, principal_id)?,
            Credential::Admin { .. } => None,
        };
        Ok(WhoAmI {
            credential: credential.clone(),
            grant,
        })
    }

    /// Open review cases of a tenant.
    pub fn review_cases(&self, credential: &Credential, tenant: &str) -> ServiceResult<ReviewList> {
        credential.require_admin()?;
        let mut inner = lock(&self.inner)?;
        Ok(ReviewList {
            cases: inner.store.open_review_cases(tenant)?,
        })
    }

    /// Applies a review action. `accept_narrower` and `supersede` carry a
    /// proposal that is written on behalf of the case's proposer through
    /// the propose path (identity checks, the server's verbatim verifier,
    /// signed external evidence only, the conflict scan) and decided by
    /// the gate inside the store's review transaction; the reviewer cannot
    /// vouch for it. A `supersede` proposal that names no record
    /// supersedes the case's existing record.
    pub fn resolve_review(
        &self,
        credential: &Credential,
        case_id: &str,
        request: &ReviewActionRequest,
    ) -> ServiceResult<ReviewReceiptView> {
        credential.require_admin()?;
        let writes = matches!(request.action.as_str(), "accept_narrower" | "supersede");
        if !REVIEW_ACTIONS.contains(&request.action.as_str()) {
            return Err(ServiceError::bad_request(
                "unsupported_action",
                format!(
                    "review action {:?} is not one of {}",
                    request.action,
                    REVIEW_ACTIONS.join(", ")
                ),
            ));
        }
        match (writes, &request.proposal) {
            (true, None) => {
                return Err(ServiceError::bad_request(
                    "missing_proposal",
                    format!(
                        "review action {} needs a proposal (the record to write)",
                        request.action
                    ),
                ));
            }
            (false, Some(_)) => {
                return Err(ServiceError::bad_request(
                    "unexpected_proposal",
                    format!("review action {} takes no proposal", request.action),
                ));
            }
            _ => {}
        }
        let reviewer = Authorization {
            actor_id: "admin".to_owned(),
            authority_ref: request
                .authority_ref
                .clone()
                .unwrap_or_else(|| credential.key_id().to_owned()),
        };
        let mut inner = lock(&self.inner)?;
        let Some(proposal) = &request.proposal else {
            let action = match request.action.as_str() {
                "reject_proposal" => ReviewAction::RejectProposal,
                "contest_existing" => ReviewAction::ContestExisting,
                _ => ReviewAction::RequestEvidence,
            };
            let receipt = inner
                .store
                .resolve_review(case_id, action, &reviewer, self.now())?;
            return Ok(ReviewReceiptView {
                body: receipt.body,
                receipt_sha256: receipt.receipt_sha256,
                record_id: None,
            });
        };
        let case = inner
            .store
            .review_case(case_id)?
            .ok_or_else(|| ServiceError::not_found("review case", case_id))?;
        let (tenant, principal) = inner
            .catalog
            .proposal_owner(&case.proposal_id)?
            .filter(|(tenant, _)| *tenant == case.tenant_id)
            .ok_or_else(|| ServiceError::Conflict {
                code: "no_proposer",
                message: format!(
                    "review case {case_id} has no proposing principal to write for; use reject_proposal, contest_existing or request_evidence"
                ),
            })?;
        let mut proposal = proposal.clone();
        let supersede = request.action == "supersede";
        if supersede && proposal.supersedes_record_id.is_none() {
            proposal.supersedes_record_id = Some(case.existing_record_id.clone());
        }
        let prepared = self.prepare_write(&mut inner, &tenant, &principal, &proposal)?;
        let write = Box::new(prepared.write.clone());
        let action = if supersede {
            ReviewAction::Supersede(write)
        } else {
            ReviewAction::AcceptNarrower(write)
        };
        let receipt = inner
            .store
            .resolve_review(case_id, action, &reviewer, self.now())?;
        if let Some(accepted) = receipt.body.new_proposal_accepted {
            self.record_decision(
                &mut inner, &tenant, &principal, &proposal, &prepared, accepted,
            )?;
            self.metrics.incr(
                "mosaic_write_decisions_total",
                &[("decision", if accepted { "accepted" } else { "rejected" })],
            );
        }
        self.publish_pending(&mut inner)?;
        Ok(ReviewReceiptView {
            body: receipt.body,
            receipt_sha256: receipt.receipt_sha256,
            record_id: Some(prepared.record_id),
        })
    }

    // ------------------------------------------------------------ outbox, indexes

    /// One reconcile pass: publish every pending outbox row, then advance
    /// every unfinished deletion. The background worker calls it
    /// periodically; it is idempotent.
    pub fn reconcile(&self) -> ServiceResult<ReconcileReport> {
        let mut inner = lock(&self.inner)?;
        let mut report = self.publish_pending(&mut inner)?;
        for pending in inner.store.pending_deletions(self.now())? {
            if let Some(state) = inner.store.resume_revocation(&pending.record_id)? {
                let done = self.drive(&mut inner, &pending.record_id, state)?;
                if done.deletion_receipt.is_some() {
                    report.deletions_finalized += 1;
                }
            }
        }
        if inner.index_dirty {
            self.save_indexes(&inner)?;
            inner.index_dirty = false;
        }
        Ok(report)
    }

    /// [`Service::reconcile`] plus a full comparison of the store with each
    /// index: active records missing from an index are published again,
    /// and index entries without an active record behind them (revoked,
    /// erased, or unknown to the store: ghosts) are removed. It invents no
    /// memory decision; the store stays the truth. With PostgreSQL only the
    /// store's records are compared (the database targets cannot be listed).
    pub fn reconcile_and_repair(&self) -> ServiceResult<ReconcileReport> {
        let mut report = self.reconcile()?;
        let mut inner = lock(&self.inner)?;
        let rows = all_records(&mut inner)?;
        let mut active = BTreeMap::new();
        let mut known: BTreeSet<String> = BTreeSet::new();
        for row in &rows {
            known.insert(row.record_id.clone());
            if let Some(stored) = inner.store.get_record(&row.record_id)?
                && stored.state == RecordState::Active
            {
                active.insert(row.record_id.clone(), stored);
            }
        }
        let floor = inner.store.revocation_generation()? + 1;
        for target in INDEX_TARGETS {
            // Ghosts: live in the index, not active in the store.
            let mut live_ids: Vec<String> = match &inner.pg {
                None => {
                    let snapshot = match target {
                        "lexical" => inner.retriever.lexical.snapshot(),
                        _ => inner.retriever.vector.snapshot(),
                    };
                    snapshot
                        .slots
                        .into_iter()
                        .filter(|(_, slot)| slot.live.is_some())
                        .map(|(id, _)| id)
                        .collect()
                }
                Some(_) => Vec::new(),
            };
            for id in &known {
                if !active.contains_key(id) && live_in(&mut inner, target, id)? {
                    live_ids.push(id.clone());
                }
            }
            live_ids.sort();
            live_ids.dedup();
            for id in live_ids {
                report.checked += 1;
                if active.contains_key(&id) {
                    continue;
                }
                let generation = live_generation(&mut inner, target, &id)?.unwrap_or(floor);
                match index_target(&mut inner, target).tombstone(&id, generation.max(floor)) {
                    Ok(_) => {
                        report.ghosts_removed += 1;
                        inner.index_dirty = true;
                    }
                    Err(_) => report.failures += 1,
                }
            }
            // Missing: active in the store, not live in the index.
            for (id, view) in &active {
                report.checked += 1;
                if live_in(&mut inner, target, id)? {
                    continue;
                }
                let generation = live_generation(&mut inner, target, id)?
                    .map_or(floor, |g| g.saturating_add(1).max(floor));
                let message = publish_message(&view.record, generation, view.content.clone());
                match index_target(&mut inner, target).publish(&message) {
                    Ok(_) => {
                        report.republished += 1;
                        inner.index_dirty = true;
                    }
                    Err(_) => report.failures += 1,
                }
            }
        }
        if inner.index_dirty {
            self.save_indexes(&inner)?;
            inner.index_dirty = false;
        }
        self.metrics.add(
            "mosaic_reconcile_ghosts_removed_total",
            &[],
            report.ghosts_removed as u64,
        );
        self.metrics.add(
            "mosaic_reconcile_republished_total",
            &[],
            report.republished as u64,
        );
        Ok(report)
    }

    /// Installs (or with `None` removes) injected outbox faults; see
    /// [`OutboxFaults`]. For fault-injection tests only.
    pub fn set_outbox_faults(&self, faults: Option<Arc<dyn OutboxFaults>>) -> ServiceResult<()> {
        lock(&self.inner)?.faults = faults;
        Ok(())
    }

    /// The logical state of the in-process lexical and vector indexes
    /// (`None` with PostgreSQL, whose indexes live in the database).
    pub fn index_snapshots(&self) -> ServiceResult<Option<(TargetSnapshot, TargetSnapshot)>> {
        let inner = lock(&self.inner)?;
        if inner.pg.is_some() {
            return Ok(None);
        }
        Ok(Some((
            inner.retriever.lexical.snapshot(),
            inner.retriever.vector.snapshot(),
        )))
    }

    /// Publishes pending outbox rows to the indexes and acknowledges them.
    fn publish_pending(&self, inner: &mut Inner) -> ServiceResult<ReconcileReport> {
        let mut report = ReconcileReport::default();
        let faults = inner.faults.clone();
        let mut failed_optional: Vec<(String, u64, &str)> = Vec::new();
        for target in INDEX_TARGETS {
            let tasks = inner.store.pending_outbox(target, 10_000)?;
            let order: Vec<usize> = match &faults {
                Some(f) => f
                    .schedule(target, &tasks)
                    .into_iter()
                    .filter(|i| *i < tasks.len())
                    .collect(),
                None => (0..tasks.len()).collect(),
            };
            for idx in order {
                let task = &tasks[idx];
                let delivery = match task.op {
                    OutboxOp::Publish => {
                        let Some(stored) = inner.store.get_record(&task.record_id)? else {
                            report.failures += 1;
                            continue;
                        };
                        IndexDelivery::Publish(publish_message(
                            &stored.record,
                            task.generation + 1,
                            task.content.clone().unwrap_or(stored.content),
                        ))
                    }
                    OutboxOp::Erase => IndexDelivery::Tombstone {
                        record_id: task.record_id.clone(),
                        generation: task.generation + 1,
                    },
                };
                let fault = faults
                    .as_ref()
                    .map_or(OutboxFault::Deliver, |f| f.fault(target, &delivery));
                let mut applied = match fault {
                    OutboxFault::Refuse => Err(()),
                    _ => deliver(inner, target, &delivery),
                };
                if fault == OutboxFault::DeliverTwice && applied.is_ok() {
                    applied = deliver(inner, target, &delivery);
                }
                if applied.is_err()
                    && fault != OutboxFault::Refuse
                    && task.op == OutboxOp::Erase
                    && !live_in(inner, target, &task.record_id)?
                {
                    // The target already holds a newer tombstone (after a
                    // rebuild, say): the erasure is in effect.
                    applied = Ok(());
                }
                if applied.is_err() {
                    report.failures += 1;
                    self.metrics
                        .incr("mosaic_outbox_failures_total", &[("target", target)]);
                    if task.op == OutboxOp::Publish && self.optional_target(target) {
                        failed_optional.push((task.record_id.clone(), task.generation, target));
                    }
                    continue;
                }
                inner.index_dirty = true;
                if fault == OutboxFault::ApplyWithoutAck {
                    continue;
                }
                match inner.store.acknowledge_index(
                    &task.record_id,
                    task.generation,
                    target,
                    self.now(),
                ) {
                    Ok(_) => {
                        let op = task.op.as_str();
                        self.metrics.incr(
                            "mosaic_outbox_applied_total",
                            &[("target", target), ("op", op)],
                        );
                        match task.op {
                            OutboxOp::Publish => report.published += 1,
                            OutboxOp::Erase => report.erased += 1,
                        }
                    }
                    Err(_) => {
                        report.failures += 1;
                        self.metrics
                            .incr("mosaic_outbox_failures_total", &[("target", target)]);
                    }
                }
            }
            if let Some(f) = &faults {
                for old in f.stale(target) {
                    // A stale copy is refused by the fence or is a
                    // duplicate; either way nothing is acknowledged.
                    if deliver(inner, target, &old).is_ok() {
                        inner.index_dirty = true;
                    }
                }
            }
        }
        // Degraded activation: an optional index failed to take a
        // publication; the record becomes readable on the others, the store
        // records the omission, and the publication stays queued for the
        // next pass. Refused (the record stays unreadable) while any other
        // index has not acknowledged.
        for (record_id, generation, target) in failed_optional {
            match inner
                .store
                .activate_degraded(&record_id, generation, &[target], self.now())
            {
                Ok(outcome) if outcome.activated => {
                    report.degraded_activations += 1;
                    self.metrics
                        .incr("mosaic_degraded_activations_total", &[("target", target)]);
                }
                Ok(_) | Err(StoreError::DegradedActivationRefused { .. }) => {}
                Err(StoreError::InvalidState { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(report)
    }

    /// True when the policy lets records activate without `target`.
    fn optional_target(&self, target: &str) -> bool {
        self.config.vector_index_optional && target == VECTOR_TARGET
    }

    fn index_path(&self, target: &str) -> PathBuf {
        self.config
            .data_dir
            .join("index")
            .join(format!("{target}.json"))
    }

    fn save_indexes(&self, inner: &Inner) -> ServiceResult<()> {
        if inner.pg.is_some() {
            // The indexes live in PostgreSQL: nothing to snapshot.
            return Ok(());
        }
        inner
            .retriever
            .lexical
            .snapshot()
            .save(&self.index_path("lexical"))?;
        inner
            .retriever
            .vector
            .snapshot()
            .save(&self.index_path("vector"))?;
        inner
            .retriever
            .vector
            .embedding_snapshot()
            .save(&self.embeddings_path())?;
        self.save_embedder_identity()
    }

    /// The vectors of the vector snapshot's live records (a restart
    /// restores them rather than embedding every text again).
    fn embeddings_path(&self) -> PathBuf {
        self.config
            .data_dir
            .join("index")
            .join(VECTOR_EMBEDDINGS_FILE)
    }

    fn save_embedder_identity(&self) -> ServiceResult<()> {
        self.embedder_identity()
            .save(&self.config.data_dir)
            .map_err(|e| ServiceError::Internal(format!("cannot save the embedder identity: {e}")))
    }

    /// Saves the index snapshots now (also done by reconcile when dirty).
    pub fn flush(&self) -> ServiceResult<()> {
        let inner = lock(&self.inner)?;
        self.save_indexes(&inner)
    }

    /// Loads saved snapshots (when both decode), then rebuilds from the
    /// store when they are missing or disagree with it, or when they were
    /// built with another embedder (returned: vectors of two embedders
    /// never share an index).
    fn load_indexes(&self) -> ServiceResult<Option<EmbedderIdentity>> {
        if lock(&self.inner)?.pg.is_some() {
            // The indexes live in PostgreSQL, fed by the shared outbox.
            return Ok(None);
        }
        let current = self.embedder_identity();
        let switched_from = EmbedderIdentity::load(&self.config.data_dir)
            .filter(|stored| !stored.same_space(&current));
        if switched_from.is_some() {
            self.reindex(None)?;
            return Ok(switched_from);
        }
        let lexical = TargetSnapshot::load(&self.index_path("lexical"));
        let vector = TargetSnapshot::load(&self.index_path("vector"));
        // Missing, corrupt, stale or another embedder's: whatever it cannot
        // vouch for is embedded again.
        let embeddings = EmbeddingSnapshot::load(&self.embeddings_path()).ok();
        if let (Ok(lexical), Ok(vector)) = (lexical, vector) {
            let mut inner = lock(&self.inner)?;
            let mut retriever = new_retriever(&self.embedder);
            if retriever.lexical.restore(&lexical).is_ok()
                && retriever
                    .vector
                    .restore_with_embeddings(&vector, embeddings.as_ref())
                    .is_ok()
            {
                inner.retriever = retriever;
                let problems = index_problems(&mut inner)?;
                if problems.is_empty() {
                    self.save_embedder_identity()?;
                    return Ok(None);
                }
            }
        }
        self.reindex(None)?;
        Ok(None)
    }

    /// Rebuilds both indexes from the store (every active record live,
    /// every revoked record a tombstone). `progress` is told each record.
    pub fn reindex(&self, progress: Option<&dyn Fn(usize, usize)>) -> ServiceResult<ReindexReport> {
        let mut inner = lock(&self.inner)?;
        if inner.pg.is_some() {
            return Err(ServiceError::Conflict {
                code: "indexes_in_database",
                message: "with PostgreSQL the indexes live in the database and are fed by the \
                          outbox; run reconcile"
                    .to_owned(),
            });
        }
        let rows = all_records(&mut inner)?;
        let generation = inner.store.revocation_generation()? + 1;
        // A record still publishing is live in the targets that already
        // acknowledged it (their outbox row is done and will not come
        // again); the others receive it from their pending row.
        let mut pending: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for target in INDEX_TARGETS {
            let tasks = inner.store.pending_outbox(target, usize::MAX)?;
            pending.insert(target, tasks.into_iter().map(|t| t.record_id).collect());
        }
        let mut lexical = Vec::new();
        let mut vector = Vec::new();
        let mut report = ReindexReport::default();
        for (idx, row) in rows.iter().enumerate() {
            if let Some(p) = progress {
                p(idx + 1, rows.len());
            }
            match inner.store.get_record(&row.record_id)? {
                Some(stored) if stored.state == RecordState::Active => {
                    report.live += 1;
                    let entry = RebuildEntry::Live(publish_message(
                        &stored.record,
                        generation,
                        stored.content,
                    ));
                    lexical.push(entry.clone());
                    vector.push(entry);
                }
                Some(stored) if stored.state == RecordState::Publishing => {
                    let entry = RebuildEntry::Live(publish_message(
                        &stored.record,
                        generation,
                        stored.content,
                    ));
                    for (target, entries) in [("lexical", &mut lexical), ("vector", &mut vector)] {
                        if !pending
                            .get(target)
                            .is_some_and(|p| p.contains(&row.record_id))
                        {
                            entries.push(entry.clone());
                        }
                    }
                }
                Some(stored) if stored.state != RecordState::Revoked => {}
                _ => {
                    report.tombstones += 1;
                    let entry = RebuildEntry::Tombstone {
                        record_id: row.record_id.clone(),
                        generation,
                    };
                    lexical.push(entry.clone());
                    vector.push(entry);
                }
            }
        }
        let mut retriever = new_retriever(&self.embedder);
        retriever.lexical.rebuild_from(&lexical)?;
        retriever.vector.rebuild_from(&vector)?;
        inner.retriever = retriever;
        self.save_indexes(&inner)?;
        inner.index_dirty = false;
        Ok(report)
    }

    // ------------------------------------------------------------ health, doctor

    /// Liveness and a few numbers.
    pub fn health(&self) -> ServiceResult<HealthResponse> {
        let mut inner = lock(&self.inner)?;
        Ok(HealthResponse {
            status: "ok".to_owned(),
            store_schema_version: inner.store.schema_version()?,
            revocation_generation: inner.store.revocation_generation()?,
            indexed_records: inner.retriever.lexical.live_count(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        })
    }

    /// The audit chain's head after walking the whole chain (refused when
    /// the chain does not verify). Publish it to an external witness.
    pub fn audit_head(&self) -> ServiceResult<AuditHead> {
        let mut inner = lock(&self.inner)?;
        match inner.store.verify_audit_chain()? {
            mosaic_store::audit::AuditVerification::Intact {
                events,
                head_sha256,
            } => Ok(AuditHead {
                seq: events,
                sha256: head_sha256,
            }),
            broken => Err(ServiceError::Conflict {
                code: "audit_chain_broken",
                message: format!("the audit chain does not verify: {broken:?}"),
            }),
        }
    }

    /// Checks a head published earlier: the chain verifies and still holds
    /// that event with that digest. `None` when it does; otherwise what is
    /// wrong. This catches what the chain cannot catch alone: the chain
    /// rewritten or truncated together with its stored head.
    pub fn check_audit_witness(&self, witness: &AuditHead) -> ServiceResult<Option<String>> {
        let head = match self.audit_head() {
            Ok(head) => head,
            Err(ServiceError::Conflict { message, .. }) => return Ok(Some(message)),
            Err(e) => return Err(e),
        };
        let stored = lock(&self.inner)?.store.audit_event_sha256(witness.seq)?;
        Ok(match stored {
            Some(digest) if digest == witness.sha256 => None,
            Some(digest) => Some(format!(
                "event {} has digest {digest} but the witness recorded {}: the chain was rewritten",
                witness.seq, witness.sha256
            )),
            None => Some(format!(
                "event {} is missing (the chain ends at {}): the chain was truncated",
                witness.seq, head.seq
            )),
        })
    }

    /// Everything `mosaic doctor` checks on an open service, as a list of
    /// `(check, problem)`; empty when healthy.
    pub fn doctor(&self) -> ServiceResult<Vec<(String, String)>> {
        let mut problems = Vec::new();
        let mut inner = lock(&self.inner)?;
        let version = inner.store.schema_version()?;
        let expected = match inner.pg {
            Some(_) => mosaic_store::postgres::schema::SCHEMA_VERSION,
            None => mosaic_store::sqlite::schema::SCHEMA_VERSION,
        };
        if version != expected {
            problems.push((
                "store schema".to_owned(),
                format!("version {version}, expected {expected}"),
            ));
        }
        let integrity = inner.store.integrity_check()?;
        if !integrity.is_ok() {
            problems.push(("store integrity".to_owned(), format!("{integrity:?}")));
        }
        match inner.store.verify_audit_chain()? {
            mosaic_store::audit::AuditVerification::Intact { .. } => {}
            broken => problems.push(("audit chain".to_owned(), format!("{broken:?}"))),
        }
        let catalog = inner.catalog.integrity_check()?;
        if catalog != "ok" {
            problems.push(("catalog integrity".to_owned(), catalog));
        }
        if inner.catalog.admin_key_count()? == 0 {
            problems.push(("admin key".to_owned(), "no enabled admin key".to_owned()));
        }
        for target in INDEX_TARGETS {
            let pending = inner.store.pending_outbox(target, 10_000)?.len();
            if pending > 0 {
                problems.push((
                    format!("outbox {target}"),
                    format!("{pending} messages pending (run `mosaic reconcile`)"),
                ));
            }
        }
        for (record, problem) in index_problems(&mut inner)? {
            problems.push(("index state".to_owned(), format!("{record}: {problem}")));
        }
        for target in INDEX_TARGETS
            .iter()
            .filter(|_| self.config.postgres.is_none())
        {
            let path = self.index_path(target);
            if let Err(e) = TargetSnapshot::load(&path) {
                problems.push((format!("index snapshot {target}"), format!("{e}")));
            }
        }
        Ok(problems)
    }
}

/// The subject of a record of `tenant` the principal may see, when the
/// store holds it live (active; or publishing unless `active_only`).
fn live_visible(
    inner: &mut Inner,
    tenant: &str,
    principal: &str,
    grant: &MemoryWriteGrant,
    record_id: &str,
    active_only: bool,
) -> ServiceResult<Option<MemorySubject>> {
    let Some(stored) = inner.store.get_record(record_id)? else {
        return Ok(None);
    };
    let subject = stored.record.subject;
    let live = match stored.state {
        RecordState::Active => true,
        RecordState::Publishing => !active_only,
        _ => false,
    };
    let visible = stored.record.tenant_id == tenant && subject_visible(principal, grant, &subject);
    Ok((live && visible).then_some(subject))
}

/// Records whose index state disagrees with the store: active but not live
/// in a target, or revoked/erased but still live.
fn index_problems(inner: &mut Inner) -> ServiceResult<Vec<(String, String)>> {
    let mut problems = Vec::new();
    // Publications still pending per target: a target that already
    // acknowledged a record must hold it, even before the record is active
    // (a crash after the acknowledgement loses what the snapshot missed).
    let mut pending: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for target in INDEX_TARGETS {
        let rows = inner.store.pending_outbox(target, usize::MAX)?;
        pending.insert(target, rows.into_iter().map(|t| t.record_id).collect());
    }
    for row in all_records(inner)? {
        let stored = inner.store.get_record(&row.record_id)?;
        let lexical = live_in(inner, "lexical", &row.record_id)?;
        let vector = live_in(inner, "vector", &row.record_id)?;
        match stored {
            Some(s) if s.state == RecordState::Active => {
                if !lexical || !vector {
                    problems.push((
                        row.record_id.clone(),
                        "active in the store but missing from an index".to_owned(),
                    ));
                }
            }
            Some(s) if s.state == RecordState::Publishing => {
                let acknowledged_but_missing = [("lexical", lexical), ("vector", vector)]
                    .iter()
                    .any(|(target, live)| {
                        !live
                            && !pending
                                .get(target)
                                .is_some_and(|p| p.contains(&row.record_id))
                    });
                if acknowledged_but_missing {
                    problems.push((
                        row.record_id.clone(),
                        "acknowledged by an index that does not hold it".to_owned(),
                    ));
                }
            }
            Some(s) if s.state != RecordState::Revoked => {}
            _ => {
                if lexical || vector {
                    problems.push((
                        row.record_id.clone(),
                        "revoked or erased but still live in an index".to_owned(),
                    ));
                }
            }
        }
    }
    Ok(problems)
}

/// Every record matching `filter`, paging through the store's listing.
fn list_all(store: &mut dyn Store, mut filter: RecordFilter) -> ServiceResult<Vec<ListedRecord>> {
    let mut out = Vec::new();
    loop {
        let page = store.list_records(&filter)?;
        out.extend(page.records);
        match page.next_after {
            Some(next) => filter.after_record_id = Some(next),
            None => return Ok(out),
        }
    }
}

/// Every record of every tenant (the tenants list is the catalog's), as
/// the store lists them.
fn all_records(inner: &mut Inner) -> ServiceResult<Vec<ListedRecord>> {
    let mut out = Vec::new();
    for tenant in inner.catalog.tenant_ids()? {
        out.extend(list_all(
            inner.store.as_mut(),
            RecordFilter::tenant(&tenant, MAX_LIST_LIMIT),
        )?);
    }
    Ok(out)
}

/// The records a principal's erasure covers: those they proposed and those
/// about them (any workspace), sorted by record id, each once.
fn records_of_principal(
    store: &mut dyn Store,
    tenant: &str,
    principal: &str,
) -> ServiceResult<Vec<ListedRecord>> {
    let mut by_id = BTreeMap::new();
    let proposed = RecordFilter {
        proposer_principal_id: Some(principal.to_owned()),
        ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
    };
    for row in list_all(store, proposed)? {
        by_id.insert(row.record_id.clone(), row);
    }
    // A subject names a principal either alone or within a workspace; the
    // listing filters exact subjects, so the workspace form is matched here.
    for row in list_all(store, RecordFilter::tenant(tenant, MAX_LIST_LIMIT))? {
        if row.subject.principal_id() == Some(principal) {
            by_id.entry(row.record_id.clone()).or_insert(row);
        }
    }
    Ok(by_id.into_values().collect())
}

/// The store's listing of one record of `tenant`, if it has one. Pages from
/// the id without its last character, which sorts just before it.
fn find_listed(
    store: &mut dyn Store,
    tenant: &str,
    record_id: &str,
) -> ServiceResult<Option<ListedRecord>> {
    let Some((last, _)) = record_id.char_indices().last() else {
        return Ok(None);
    };
    let mut filter = RecordFilter {
        after_record_id: record_id.get(..last).map(str::to_owned),
        ..RecordFilter::tenant(tenant, 64)
    };
    loop {
        let page = store.list_records(&filter)?;
        for row in page.records {
            match row.record_id.as_str().cmp(record_id) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Ok(Some(row)),
                std::cmp::Ordering::Greater => return Ok(None),
            }
        }
        match page.next_after {
            Some(next) => filter.after_record_id = Some(next),
            None => return Ok(None),
        }
    }
}

/// A propose request rebuilt from a stored record, for the export of a
/// record whose export copy the catalog lacks: the source texts and signed
/// evidence are not known, so an import judges it without them.
fn request_from_record(record: &mosaic_harness::MemoryRecord, proposal_id: &str) -> ProposeRequest {
    let purpose = match record.subject {
        MemorySubject::Run { .. } => MemoryPurpose::RunContinuity,
        MemorySubject::Principal { .. } | MemorySubject::PrincipalInWorkspace { .. } => {
            MemoryPurpose::Personalization
        }
        MemorySubject::Workspace { .. } => MemoryPurpose::WorkspaceKnowledge,
        MemorySubject::Procedure { .. } => MemoryPurpose::ProcedureImprovement,
    };
    ProposeRequest {
        content: String::new(),
        kind: record.kind,
        purpose,
        subject: record.subject.clone(),
        sources: record.sources.clone(),
        source_texts: BTreeMap::new(),
        judgments: Vec::new(),
        adjudications: Vec::new(),
        conflicts: Vec::new(),
        procedure_evaluation: None,
        consent_receipt_sha256: None,
        claims: Vec::new(),
        summary: record.summary.clone(),
        derived_from: Vec::new(),
        supersedes_record_id: None,
        expected_line_generation: None,
        record_id: Some(record.record_id.clone()),
        proposal_id: Some(proposal_id.to_owned()),
        ttl_ms: None,
        token_count: Some(record.token_count),
        token_counter_release: Some(record.token_counter_release.clone()),
        provenance_sha256: Some(record.provenance_sha256.clone()),
        writer_release: Some(record.writer_release.clone()),
        tenant_id: None,
        principal_id: None,
    }
}

/// Opens the PostgreSQL store as the serving (application) role; the
/// schema must have been migrated by its owner ([`migrate_postgres`]).
fn open_postgres(
    url: &str,
    store_config: StoreConfig,
) -> ServiceResult<mosaic_store::PostgresStore> {
    mosaic_store::PostgresStore::connect(url, store_config).map_err(|e| {
        ServiceError::Unavailable(format!(
            "cannot use the PostgreSQL store (migrate it as the schema owner first): {e}"
        ))
    })
}

/// Every server sharing a database must embed into one vector space: the
/// first one records its embedder in the catalog, the others must match it.
fn check_shared_embedder(
    catalog: &Catalog,
    kind: crate::embedder::EmbedderKind,
    embedder: &dyn Embedder,
) -> ServiceResult<()> {
    let identity = EmbedderIdentity::of(kind, embedder);
    let encoded =
        serde_json::to_string(&identity).map_err(|e| ServiceError::Internal(e.to_string()))?;
    let stored = catalog.setting_or_insert("embedder", &encoded)?;
    let stored: EmbedderIdentity = serde_json::from_str(&stored)
        .map_err(|e| ServiceError::Internal(format!("stored embedder identity: {e}")))?;
    if stored.same_space(&identity) {
        return Ok(());
    }
    Err(ServiceError::Unavailable(format!(
        "the database's vectors were made by embedder {} ({} dimensions); this server runs {} \
         ({} dimensions): every server sharing a database must run the same embedder",
        stored.release, stored.dimension, identity.release, identity.dimension
    )))
}

/// Brings a PostgreSQL database up to date as the owner of its schema: the
/// store's tables, the search tables for vectors of `embedding_dim`, and
/// the server catalog's `mosaic_server_*` tables; then grants `app_role`
/// (the role `mosaic serve` connects as) what it needs, when given.
pub fn migrate_postgres(
    owner_url: &str,
    app_role: Option<&str>,
    embedding_dim: usize,
) -> ServiceResult<()> {
    let failed = |e: &dyn std::fmt::Display| {
        ServiceError::Unavailable(format!("cannot migrate the PostgreSQL database: {e}"))
    };
    let mut owner =
        postgres::Client::connect(owner_url, postgres::NoTls).map_err(|e| failed(&e))?;
    mosaic_store::postgres::schema::migrate(&mut owner).map_err(|e| failed(&e))?;
    mosaic_pgsearch::schema::migrate(&mut owner, embedding_dim).map_err(|e| failed(&e))?;
    crate::catalog::migrate_postgres(&mut owner, app_role)?;
    if let Some(role) = app_role {
        mosaic_store::postgres::schema::grant_application_role(&mut owner, role)
            .map_err(|e| failed(&e))?;
        mosaic_pgsearch::schema::grant_application_role(&mut owner, role)
            .map_err(|e| failed(&e))?;
    }
    Ok(())
}

impl PgTargets {
    fn connect(url: &str, embedder: Arc<dyn Embedder>) -> ServiceResult<Self> {
        let unavailable = |e: &dyn std::fmt::Display| {
            ServiceError::Unavailable(format!("cannot use the PostgreSQL indexes: {e}"))
        };
        let client =
            || postgres::Client::connect(url, postgres::NoTls).map_err(|e| unavailable(&e));
        Ok(PgTargets {
            lexical: PgLexicalIndex::open(client()?).map_err(|e| unavailable(&e))?,
            vector: PgVectorIndex::open(client()?, embedder, VectorSearchConfig::default())
                .map_err(|e| unavailable(&e))?,
        })
    }

    /// The relevance receipt of a recall over the PostgreSQL targets:
    /// full-text and nearest-neighbour candidates inside the eligible set,
    /// fused by reciprocal rank in fixed point (ties by record id), ranked
    /// by the harness's `rank_relevance`.
    /// Ranks `set` for `query`; `vector` is the embedded query (`None`
    /// for a lexical query).
    fn relevance(
        &mut self,
        query: &RecallQuery<'_>,
        set: &EligibleSet,
        vector: Option<&[f32]>,
    ) -> ServiceResult<mosaic_harness::memory_scope::RelevanceReceipt> {
        let search = |e: mosaic_pgsearch::PgSearchError| {
            ServiceError::Internal(format!("PostgreSQL search: {e}"))
        };
        let ids: Vec<String> = set.entries.iter().map(|e| e.record_id.clone()).collect();
        let eligible = mosaic_index::Eligible::Records(&ids);
        let k = query.max_results.saturating_mul(4).max(20);
        let mut lists = Vec::new();
        if query.mode != RetrievalMode::Vector {
            lists.push(
                self.lexical
                    .search_text(
                        query.text,
                        &eligible,
                        query.tenant_id,
                        query.policy_sha256,
                        k,
                    )
                    .map_err(search)?,
            );
        }
        if let Some(vector) = vector.filter(|_| query.mode != RetrievalMode::Lexical) {
            lists.push(
                self.vector
                    .search_embedding(vector, &eligible, query.tenant_id, query.policy_sha256, k)
                    .map_err(search)?,
            );
        }
        let mut fused: BTreeMap<String, u64> = BTreeMap::new();
        for list in &lists {
            for (rank, hit) in list.iter().enumerate() {
                let rank = u64::try_from(rank).unwrap_or(u64::MAX);
                *fused.entry(hit.record_id.clone()).or_default() +=
                    1_000_000 / (RRF_K.saturating_add(rank).saturating_add(1));
            }
        }
        let feature_release = format!("pg-fts-english+{}", self.vector.embedder().release());
        let query_sha256 = domain_digest(
            PG_QUERY_DOMAIN,
            &serde_json::json!({
                "text": query.text,
                "mode": query.mode,
                "max_results": query.max_results,
                "eligible_set_sha256": set.digest()?,
                "feature_release": feature_release,
            }),
        )?;
        let input = RelevanceInput {
            query_sha256,
            eligible: set.clone(),
            feature_release,
            ranker_release: PG_RANKER_RELEASE.to_owned(),
            scores: fused
                .into_iter()
                .map(|(record_id, score)| ScoredCandidate { record_id, score })
                .collect(),
            max_results: query.max_results,
        };
        rank_relevance(&input).map_err(|e| ServiceError::Internal(format!("relevance: {e}")))
    }
}

/// The outbox target named `target` (`lexical` or `vector`): in PostgreSQL
/// when the service runs on it, in process otherwise.
fn index_target<'a>(inner: &'a mut Inner, target: &str) -> &'a mut dyn IndexTarget {
    match (&mut inner.pg, target) {
        (Some(pg), "lexical") => &mut pg.lexical,
        (Some(pg), _) => &mut pg.vector,
        (None, "lexical") => &mut inner.retriever.lexical,
        (None, _) => &mut inner.retriever.vector,
    }
}

/// Hands one message to the `target` index.
fn deliver(inner: &mut Inner, target: &str, delivery: &IndexDelivery) -> Result<(), ()> {
    let index = index_target(inner, target);
    match delivery {
        IndexDelivery::Publish(message) => index.publish(message).map(|_| ()).map_err(|_| ()),
        IndexDelivery::Tombstone {
            record_id,
            generation,
        } => index
            .tombstone(record_id, *generation)
            .map(|_| ())
            .map_err(|_| ()),
    }
}

/// Whether a record is live in the `target` index.
fn live_in(inner: &mut Inner, target: &str, record_id: &str) -> ServiceResult<bool> {
    let live = match (&mut inner.pg, target) {
        (Some(pg), "lexical") => pg.lexical.live_generation_of(record_id),
        (Some(pg), _) => pg.vector.live_generation_of(record_id),
        (None, "lexical") => {
            return Ok(inner.retriever.lexical.live_generation(record_id).is_some());
        }
        (None, _) => return Ok(inner.retriever.vector.live_generation(record_id).is_some()),
    };
    live.map(|g| g.is_some())
        .map_err(|e| ServiceError::Internal(format!("PostgreSQL index: {e}")))
}

/// The generation a target holds for a record (live or tombstoned), if any.
fn live_generation(inner: &mut Inner, target: &str, record_id: &str) -> ServiceResult<Option<u64>> {
    match (&mut inner.pg, target) {
        (Some(pg), "lexical") => pg.lexical.live_generation_of(record_id),
        (Some(pg), _) => pg.vector.live_generation_of(record_id),
        (None, "lexical") => return Ok(inner.retriever.lexical.live_generation(record_id)),
        (None, _) => return Ok(inner.retriever.vector.live_generation(record_id)),
    }
    .map_err(|e| ServiceError::Internal(format!("PostgreSQL index: {e}")))
}

/// The index message that publishes `record` with `text` at `generation`.
fn publish_message(
    record: &mosaic_harness::MemoryRecord,
    generation: u64,
    text: String,
) -> PublishMessage {
    PublishMessage {
        record_id: record.record_id.clone(),
        generation,
        revocation_generation: 0,
        scope: ScopeKeys {
            tenant_id: record.tenant_id.clone(),
            policy_sha256: record.policy_sha256.clone(),
            subject_key: record.subject.key(),
            kind: record.kind,
        },
        created_at_unix_ms: record.created_at_unix_ms,
        claim_keys: Vec::new(),
        text,
    }
}

fn new_retriever(embedder: &Arc<dyn Embedder>) -> Retriever {
    Retriever::new(
        embedder.clone(),
        AnnConfig::default(),
        FunnelConfig::default(),
    )
}

fn validate_digests(request: &ProposeRequest) -> ServiceResult<()> {
    for (idx, source) in request.sources.iter().enumerate() {
        check_digest(
            &format!("sources[{idx}].content_sha256"),
            &source.content_sha256,
        )?;
        check_digest(
            &format!("sources[{idx}].provenance_sha256"),
            &source.provenance_sha256,
        )?;
        check_digest(
            &format!("sources[{idx}].locator_sha256"),
            &source.locator_sha256,
        )?;
    }
    for (idx, judgment) in request.judgments.iter().map(|j| &j.item).enumerate() {
        check_digest(
            &format!("judgments[{idx}].source_content_sha256"),
            &judgment.source_content_sha256,
        )?;
        check_digest(
            &format!("judgments[{idx}].judgment_sha256"),
            &judgment.judgment_sha256,
        )?;
    }
    for (idx, adjudication) in request.adjudications.iter().map(|a| &a.item).enumerate() {
        for d in &adjudication.disputed_judgment_sha256 {
            check_digest(&format!("adjudications[{idx}].disputed_judgment_sha256"), d)?;
        }
    }
    if let Some(c) = &request.consent_receipt_sha256 {
        check_digest("consent_receipt_sha256", c)?;
    }
    if let Some(p) = &request.provenance_sha256 {
        check_digest("provenance_sha256", p)?;
    }
    if let Some(s) = &request.summary {
        check_digest("summary.source_set_sha256", &s.source_set_sha256)?;
    }
    if let Some(e) = &request.procedure_evaluation {
        check_digest("procedure_evaluation.suite_sha256", &e.item.suite_sha256)?;
    }
    Ok(())
}

fn source_text_error(err: SourceTextError) -> ServiceError {
    match err {
        SourceTextError::UnknownSource(_) => {
            ServiceError::bad_request("unknown_source", err.to_string())
        }
        SourceTextError::DigestMismatch(_) => {
            ServiceError::bad_request("invalid_digest", err.to_string())
        }
        SourceTextError::Canonical(e) => e.into(),
    }
}

/// External evidence of a request, every item signed by a verifier
/// registered for the tenant.
struct ExternalEvidence {
    judgments: Vec<SourceJudgment>,
    adjudications: Vec<Adjudication>,
    conflicts: Vec<ConflictObservation>,
    procedure_evaluation: Option<ProcedureEvaluation>,
}

/// Checks one signed item against the tenant's registered verifiers and
/// returns the item; 403 `unverified_evidence` otherwise.
fn authenticated<T: serde::Serialize + Clone>(
    catalog: &Catalog,
    proposition: &Proposition<'_>,
    kind: EvidenceKind,
    index: usize,
    signed: &Signed<T>,
    named_release: Option<&str>,
) -> ServiceResult<T> {
    let verifier = match &signed.signature {
        Some(signature) => catalog
            .verifier(proposition.tenant_id, &signature.verifier_id)?
            .filter(|v| !v.disabled)
            .and_then(|v| {
                evidence::parse_public_key(&v.public_key_hex).map(|public_key| RegisteredVerifier {
                    verifier_id: v.verifier_id,
                    verifier_release: v.verifier_release,
                    public_key,
                })
            }),
        None => None,
    };
    match evidence::verify_signed(
        proposition,
        kind,
        index,
        signed,
        verifier.as_ref(),
        named_release,
    ) {
        Ok(()) => Ok(signed.item.clone()),
        Err(EvidenceError::Canonical(e)) => Err(e.into()),
        Err(e) => Err(ServiceError::forbidden(
            "unverified_evidence",
            e.to_string(),
        )),
    }
}

fn authenticate_evidence(
    catalog: &Catalog,
    proposition: &Proposition<'_>,
    request: &ProposeRequest,
) -> ServiceResult<ExternalEvidence> {
    let mut out = ExternalEvidence {
        judgments: Vec::with_capacity(request.judgments.len()),
        adjudications: Vec::with_capacity(request.adjudications.len()),
        conflicts: Vec::with_capacity(request.conflicts.len()),
        procedure_evaluation: None,
    };
    for (idx, signed) in request.judgments.iter().enumerate() {
        let release = Some(signed.item.verifier_release.as_str());
        out.judgments.push(authenticated(
            catalog,
            proposition,
            EvidenceKind::SourceJudgment,
            idx,
            signed,
            release,
        )?);
    }
    for (idx, signed) in request.adjudications.iter().enumerate() {
        let release = Some(signed.item.adjudicator_release.as_str());
        out.adjudications.push(authenticated(
            catalog,
            proposition,
            EvidenceKind::Adjudication,
            idx,
            signed,
            release,
        )?);
    }
    for (idx, signed) in request.conflicts.iter().enumerate() {
        let release = Some(signed.item.detector_release.as_str());
        out.conflicts.push(authenticated(
            catalog,
            proposition,
            EvidenceKind::ConflictObservation,
            idx,
            signed,
            release,
        )?);
    }
    if let Some(signed) = &request.procedure_evaluation {
        out.procedure_evaluation = Some(authenticated(
            catalog,
            proposition,
            EvidenceKind::ProcedureEvaluation,
            0,
            signed,
            None,
        )?);
    }
    Ok(out)
}

/// Inverse of `MemorySubject::key()`.
pub fn parse_subject_key(key: &str) -> Option<MemorySubject> {
    let (kind, rest) = key.split_once(':')?;
    let two = || {
        rest.split_once('/')
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    };
    Some(match kind {
        "run" => MemorySubject::Run {
            run_id: rest.to_owned(),
        },
        "principal" => MemorySubject::Principal {
            principal_id: rest.to_owned(),
        },
        "principal_in_workspace" => {
            let (workspace_id, principal_id) = two()?;
            MemorySubject::PrincipalInWorkspace {
                workspace_id,
                principal_id,
            }
        }
        "workspace" => MemorySubject::Workspace {
            workspace_id: rest.to_owned(),
        },
        "procedure" => {
            let (workspace_id, procedure_id) = two()?;
            MemorySubject::Procedure {
                workspace_id,
                procedure_id,
            }
        }
        _ => return None,
    })
}

fn subject_from_query(q: &ListQuery) -> ServiceResult<MemorySubject> {
    let need = |field: &'static str, v: &Option<String>| {
        v.clone().ok_or_else(|| {
            ServiceError::bad_request(
                "invalid_subject",
                format!("subject type {} needs {field}", q.subject_type),
            )
        })
    };
    Ok(match q.subject_type.as_str() {
        "run" => MemorySubject::Run {
            run_id: need("run_id", &q.run_id)?,
        },
        "principal" => MemorySubject::Principal {
            principal_id: need("principal_id", &q.principal_id)?,
        },
        "principal_in_workspace" => MemorySubject::PrincipalInWorkspace {
            workspace_id: need("workspace_id", &q.workspace_id)?,
            principal_id: need("principal_id", &q.principal_id)?,
        },
        "workspace" => MemorySubject::Workspace {
            workspace_id: need("workspace_id", &q.workspace_id)?,
        },
        "procedure" => MemorySubject::Procedure {
            workspace_id: need("workspace_id", &q.workspace_id)?,
            procedure_id: need("procedure_id", &q.procedure_id)?,
        },
        other => {
            return Err(ServiceError::bad_request(
                "invalid_subject",
                format!("unknown subject type {other:?}"),
            ));
        }
    })
}

/// Writes `secret` to `path` readable by the owner only (0600), refusing to
/// overwrite an existing file.
pub fn write_secret_file(path: &Path, secret: &str) -> ServiceResult<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .map_err(|e| ServiceError::Internal(format!("cannot create {}: {e}", path.display())))?;
    file.write_all(format!("{secret}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| ServiceError::Internal(format!("cannot write {}: {e}", path.display())))
}
