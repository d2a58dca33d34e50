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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{
    Arc, LockResult, Mutex, MutexGuard, PoisonError, RwLock, TryLockError, TryLockResult,
};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use mosaic_harness::canonical::{domain_digest, is_sha256_hex, sha256_hex};
use mosaic_harness::memory_scope::{ContextBudget, MemoryReadContext, RECALLED_MEMORY_NOTICE};
use mosaic_harness::memory_write::{
    Adjudication, ConflictObservation, ConsentReceipt, MemoryPurpose, MemoryWriteGrant,
    MemoryWritePolicy, MemoryWriteProposal, ProcedureEvaluation, SourceJudgment, StructuredClaim,
};
use mosaic_harness::receipt_signature::ReceiptKind;
use mosaic_harness::{MEMORY_SCHEMA_VERSION, MemoryKind, MemorySubject};
use mosaic_index::vector::EmbeddingSnapshot;
use mosaic_index::{
    AnnConfig, Embedder, FunnelConfig, IndexError, IndexTarget, PublishMessage, RebuildEntry,
    RecallQuery, RetrievalMode, Retriever, ScopeKeys, TargetSnapshot,
};
use mosaic_pgsearch::{PgLexicalIndex, PgVectorIndex, SearchTarget, VectorSearchConfig};
use mosaic_store::read::eligibility_query;
use mosaic_store::revocation::RevocationState;
use mosaic_store::{
    AllOrNothing, Authorization, DeletionReceipt, IndexAck, ListedRecord, ListedState,
    MAX_LIST_LIMIT, OutboxOp, OutboxTask, RecordFilter, RecordState, RecordVisibility,
    ReviewAction, RevocationReason, SqliteStore, Store, StoreConfig, StoreError, WriteDecision,
    WriteOutcome, WriteRequest,
};

use crate::api::*;
use crate::auth::{self, Credential};
use crate::config::ServerConfig;
use crate::embedder::{self, EmbedderIdentity, EmbedderReport};
use crate::error::{ServiceError, ServiceResult};
use crate::evidence::{
    self, EvidenceError, EvidenceKind, Proposition, RegisteredVerifier, SourceTextError,
};
use crate::metrics::Metrics;

mod access;
mod admin;
mod audit_log;
mod browse;
mod carry;
mod checkpoint;
pub(crate) mod conversation;
mod directory;
mod evidence_checks;
pub use conversation::{STATEMENTS, StatementAttachments};
mod extract;
mod guard_vectors;
mod guards;
mod health;
mod ids;
mod index_access;
mod index_copies;
mod items;
mod listing;
mod outbox;
mod outbox_faults;
mod persistence;
mod postgres;
mod propose;
mod read_model;
mod recall;
pub use recall::checked_filter;
mod revocation;
mod subjects;
mod sync;

pub use browse::{BROWSE_DEFAULT_LIMIT, BROWSE_MAX_LIMIT, BROWSE_MAX_SCAN};
pub use ids::REQUEST_ID_DOMAIN;
pub use items::{NAMESPACES_DEFAULT_LIMIT, NAMESPACES_MAX_LIMIT, NAMESPACES_MAX_SCAN};
pub use postgres::migrate_postgres;
use postgres::*;

use access::rate_quota;
pub use access::write_secret_file;
use evidence_checks::{authenticate_evidence, source_text_error, validate_digests};
use index_access::{
    deliver, funnel_config, index_problems, index_target, live_generation, live_in, new_retriever,
    publish_message,
};
use listing::{
    all_records, find_listed, list_all, live_visible, records_of_principal, request_from_record,
    stored_claim_keys,
};
pub use outbox_faults::{IndexDelivery, OutboxFault, OutboxFaults};
pub use subjects::parse_subject_key;
use subjects::subject_from_query;

/// Release of the read selector configuration this server runs.
pub const SELECTOR_RELEASE: &str = "mosaic-server-selector-v1";
/// Token counter assumed when a proposal names none (and the recall budget's).
pub const DEFAULT_TOKEN_COUNTER: &str = "whitespace-v1";
/// Writer release assumed when a proposal names none.
pub const DEFAULT_WRITER: &str = "api-client-v1";
/// Domain tag of a server-computed policy digest.
pub const POLICY_DOCUMENT_DOMAIN: &str = "mosaic.server.policy_document.v1";
/// The vector index's saved embeddings, beside its snapshot.
pub const VECTOR_EMBEDDINGS_FILE: &str = "vector.embeddings";
/// The vector target's HNSW graph, saved with (and bound to) the vectors
/// file, so a restart attaches it instead of inserting every vector again.
pub const VECTOR_GRAPH_FILE: &str = "vector.graph";
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
/// An earlier release's own database beside the store, imported on open
/// (`directory::import_earlier_catalog`).
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

/// One connection to the durable state. The service holds one as its
/// writer and a few as readers ([`sync::Pool`]).
struct Inner {
    store: Box<dyn Store>,
}

/// The writer's side of the index targets: its copy of the in-process
/// targets (`retriever`; readers rank on the published copy,
/// `index_copies.rs`) or, with PostgreSQL, the targets inside the
/// database (`pg`; the in-process retriever then stays empty).
struct Indexes {
    /// The writer's copy: changed only through the methods of
    /// `index_copies.rs`, which record each change for the other copy.
    retriever: Arc<Retriever>,
    /// Behind a mutex of its own so that `Indexes` is `Sync` (its clients
    /// are not); reached only through `&mut Indexes` (the index write
    /// side): reads take [`PgReads`]' pooled connections instead.
    pg: Option<Mutex<PgTargets>>,
    /// The changes made to `retriever` since it was the published copy.
    log: Vec<index_copies::IndexOp>,
    /// `retriever` changed in a way `log` does not hold: the other copy
    /// becomes a clone of it.
    resync: bool,
}

impl Indexes {
    /// The PostgreSQL targets, when the service runs on them.
    fn pg_mut(&mut self) -> Option<&mut PgTargets> {
        self.pg
            .as_mut()
            .map(|m| m.get_mut().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The lexical and vector targets inside PostgreSQL, shared by every
/// server on the database: what the outbox pass writes through. Reads go
/// through [`PgReads`]' pool instead.
struct PgTargets {
    lexical: PgLexicalIndex,
    vector: PgVectorIndex,
}

/// Per-key request rate: a GCRA limiter keyed by key id, whose state is a
/// concurrent map (no lock shared by every request).
type KeyRate = governor::DefaultKeyedRateLimiter<String>;

/// How long an authenticated key is trusted without asking the store
/// again: a key disabled on another server stops working within this.
const KEY_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// Most access reads kept (one per tenant and principal; a few kilobytes
/// each, no memory content).
const ACCESS_READS_KEPT: u64 = 10_000;

/// Most tenant revocation generations kept (one per tenant and store-wide
/// generation asked about; a few dozen bytes each).
const TENANT_GENERATIONS_KEPT: u64 = 10_000;

/// Past this many keys' rate state, the state of keys whose bucket is full
/// again (indistinguishable from a fresh one) is dropped.
const RATE_KEYS_KEPT: usize = 10_000;

/// The running service: a handle that owns the outbox worker thread and
/// dereferences to the shared [`ServiceCore`], whose methods are the
/// product's operations. Dropping it stops the worker and saves the
/// indexes.
pub struct Service {
    core: Arc<ServiceCore>,
    /// Commits the queued proposals (`sync::GroupQueue`).
    committer: Option<std::thread::JoinHandle<()>>,
    worker: Option<std::thread::JoinHandle<()>>,
    extractor: Option<std::thread::JoinHandle<()>>,
    /// Links published (and restored) vectors into the graph.
    linker: Option<std::thread::JoinHandle<()>>,
    /// Copies the SQLite logs into their files (checkpoint.rs).
    checkpointer: Option<std::thread::JoinHandle<()>>,
}

impl std::ops::Deref for Service {
    type Target = ServiceCore;

    fn deref(&self) -> &ServiceCore {
        &self.core
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.core.progress.stop();
        self.core.group.stop();
        if let Some(committer) = self.committer.take() {
            let _ = committer.join();
        }
        if let Some(extraction) = &self.core.extraction {
            extraction.stop();
        }
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        if let Some(extractor) = self.extractor.take() {
            let _ = extractor.join();
        }
        self.core.graph_wake.notify();
        if let Some(linker) = self.linker.take() {
            let _ = linker.join();
        }
        self.core.log_wake.notify();
        if let Some(checkpointer) = self.checkpointer.take() {
            let _ = checkpointer.join();
        }
        // The few publications the linker had not reached yet are linked
        // now, so the saved graph is whole and the next start attaches all
        // of it. Many more (a restart's vectors whose graph did not fit)
        // are left for the next start's linker: a stop stays quick.
        let mut ix = self.core.write_indexes();
        if ix.pg.is_none() && ix.retriever.vector.pending_graph() <= sync::SHUTDOWN_LINK_LIMIT {
            ix.absorb_pending(sync::SHUTDOWN_LINK_LIMIT);
        }
        drop(ix);
        if let Err(e) = self.core.flush() {
            tracing::warn!(error = %e, "could not save the indexes at shutdown");
        }
    }
}

/// Store, indexes, limits and metrics, shared by request threads
/// and the outbox worker. Who holds what, and what may wait on what, is
/// ARCHITECTURE.md's "Owners" (in full: docs/concurrency.md).
pub struct ServiceCore {
    /// The write connection: every store write, one transaction (or one
    /// group commit) at a time.
    writer: Mutex<Inner>,
    /// Read connections: recall, get, list, authentication, the reads of a
    /// proposal and of an outbox pass. Never wait for the writer.
    readers: sync::Pool<Inner>,
    /// `/health`'s own read connection, so a probe never queues behind the
    /// requests holding the pool's connections.
    health_reader: Mutex<Inner>,
    /// With PostgreSQL, the pool of read connections ranked reads and the
    /// vector write guard take (no lock of the service held meanwhile).
    pg_reads: Option<PgReads>,
    /// The index write side: one writer at a time (an outbox pass applying
    /// deliveries it prepared (embedded) before, a repair, a rebuild, the
    /// graph linker) changes its own copy of the in-process indexes and
    /// publishes it to `published_indexes` (`index_copies.rs`).
    indexes: Mutex<Indexes>,
    /// The in-process indexes readers rank on: an `Arc` loaded without a
    /// lock, never changed while a reader holds it.
    published_indexes: index_copies::Published,
    /// With PostgreSQL, held on its write side with `indexes` (the targets
    /// in the database are written under it) and on its read side by the
    /// vector write guard's distance query, which so sees no outbox pass
    /// half applied.
    pg_apply: RwLock<()>,
    /// Passes and repairs waiting for `indexes` (the graph linker, which
    /// is background work, lets go of it when one does).
    index_waiters: AtomicUsize,
    /// Whether the last open attached the saved vector graph.
    restored_graph: std::sync::atomic::AtomicBool,
    /// Injected outbox faults (tests only; `None` in the product).
    faults: Mutex<Option<Arc<dyn OutboxFaults>>>,
    /// Commits made and outbox passes finished, for proposals that wait to
    /// be readable and for the worker that waits for commits.
    progress: sync::Progress,
    /// Wakes the graph linker when a pass left vectors to link.
    graph_wake: sync::Wake,
    /// Wakes the checkpointer after commits (checkpoint.rs).
    log_wake: sync::Wake,
    /// One outbox pass at a time (the worker, reconcile, a revocation).
    pass: Mutex<()>,
    /// Proposals waiting for the writer: one group commit takes them all.
    group: sync::GroupQueue<propose::GroupJob>,
    /// Incremental persistence of the in-process indexes.
    persist: Mutex<persistence::Persist>,
    /// One writer of the snapshot files at a time.
    snapshots: Mutex<()>,
    /// Per-key request rate.
    rate: KeyRate,
    /// Recently authenticated keys (by SHA-256 of the key), for at most
    /// [`KEY_CACHE_TTL`]; emptied when this server disables a key.
    keys: moka::sync::Cache<String, Credential>,
    /// The last reconcile pass, for the admin's outbox view.
    last_reconcile: Mutex<Option<ReconcileRun>>,
    clock: Arc<dyn ServiceClock>,
    config: ServerConfig,
    metrics: Metrics,
    embedder: Arc<dyn Embedder>,
    /// The vectors the write guard embedded, until their publication.
    guard_vectors: Arc<guard_vectors::GuardVectors>,
    /// The threads that embed a conversation call's texts ahead.
    ahead_workers: Arc<sync::Workers>,
    /// Fact extraction from conversations, when configured.
    extraction: Option<extract::Extraction>,
    /// The last decision instant handed out ([`ServiceCore::decision_instant`]),
    /// from the latest creation instant the store holds on.
    last_decision: std::sync::atomic::AtomicU64,
    /// Checked record bodies by id, for recall.
    read_model: read_model::ReadModel,
    scope_cache: read_model::ScopeCache,
    /// Each tenant's revocation generation at a store-wide one
    /// ([`ServiceCore::tenant_generation`]): a pure function of the two,
    /// so a kept value never goes stale.
    tenant_generations: moka::sync::Cache<(String, u64), u64>,
    /// Stored texts the text guard split into words, by text, shared by
    /// every call (guards.rs); emptied by an erasure.
    parsed_texts: guards::ParsedTexts,
    /// The last access read (policy, settings, grant, earlier policies) of
    /// each tenant and principal, kept while the store's change stamp
    /// stays the one it was read at (access.rs).
    access_reads: moka::sync::Cache<(String, String), Arc<mosaic_store::directory::AccessRead>>,
    /// Signs every receipt the service hands out.
    signer: crate::signing::ReceiptSigner,
}

/// How far decision instants may run ahead of the clock.
pub const MAX_DECISION_LEAD_MS: u64 = 1_000;

/// A proposal made ready for the store's write transaction.
struct PreparedWrite {
    /// The write request, with the server's own and the authenticated
    /// external evidence.
    write: WriteRequest,
    record_id: String,
    proposal_id: String,
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

/// Locks `m`. A request that panicked while holding it does not break
/// later ones: its store transaction rolled back when it unwound, and what
/// the index state may have lost is what reconcile repairs.
fn lock<T>(m: &Mutex<T>) -> ServiceResult<MutexGuard<'_, T>> {
    Ok(m.lock().unwrap_or_else(PoisonError::into_inner))
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

fn receipt_view(
    signer: &crate::signing::ReceiptSigner,
    receipt: &DeletionReceipt,
) -> ServiceResult<DeletionReceiptView> {
    Ok(DeletionReceiptView {
        body: receipt.body.clone(),
        receipt_sha256: receipt.receipt_sha256.clone(),
        signature: Some(signer.sign(ReceiptKind::Deletion, &receipt.receipt_sha256)?),
    })
}

/// Whether a credential's grant lets it see memories about `subject`.
fn subject_visible(principal_id: &str, grant: &MemoryWriteGrant, subject: &MemorySubject) -> bool {
    // The store's rule, which its visibility walk follows in SQL.
    mosaic_store::subject_visible_to(
        principal_id,
        &grant.allowed_workspace_ids,
        &grant.allowed_run_ids,
        subject,
    )
}

/// The digest a policy document is named by (its canonical form with the
/// digest field empty and its kinds sorted, each once).
fn policy_digest(policy: &MemoryWritePolicy) -> ServiceResult<String> {
    let mut doc = policy.clone();
    doc.policy_sha256 = String::new();
    doc.allowed_kinds.sort();
    doc.allowed_kinds.dedup();
    Ok(domain_digest(POLICY_DOCUMENT_DOMAIN, &doc)?)
}

/// Which embedder a service opened with `config` runs, and why: the one
/// chosen (`config.embedder`), else the one the data directory's index
/// (`index/embedder.json`) or the PostgreSQL database records, else the
/// build's default ([`embedder::resolve`]). Reads, never writes.
pub fn resolve_embedder(
    config: &ServerConfig,
) -> ServiceResult<(embedder::EmbedderKind, embedder::EmbedderSource)> {
    if let Some(kind) = config.embedder {
        return Ok(embedder::resolve(Some(kind), None));
    }
    let recorded = match &config.postgres {
        Some(url) => recorded_embedder(url)?,
        None => EmbedderIdentity::load(&config.data_dir),
    };
    Ok(embedder::resolve(None, recorded.map(|r| r.kind)))
}

impl Service {
    /// Opens (creating if missing) the data directory named by `config`
    /// and starts the service state. On first start a bootstrap admin key is
    /// generated into `ADMIN_KEY_FILE` (mode 0600).
    pub fn open(config: ServerConfig) -> ServiceResult<(Self, OpenReport)> {
        Self::open_with_clock(config, Arc::new(SystemClock))
    }

    /// A service on a new data directory below `dir` with the hashing
    /// embedder, its configuration `adjust`ed (the service's unit tests).
    #[cfg(test)]
    pub(crate) fn for_test(
        dir: &Path,
        adjust: impl FnOnce(&mut ServerConfig),
    ) -> ServiceResult<Self> {
        let mut config = ServerConfig {
            data_dir: dir.join("data"),
            embedder: Some(crate::embedder::EmbedderKind::Hash),
            ..ServerConfig::default()
        };
        adjust(&mut config);
        Ok(Self::open(config)?.0)
    }

    /// [`Service::open`] with an explicit clock.
    pub fn open_with_clock(
        config: ServerConfig,
        clock: Arc<dyn ServiceClock>,
    ) -> ServiceResult<(Self, OpenReport)> {
        // The embedder in force: chosen, else the one the data was built
        // with, else the default. From here on the configuration holds it.
        let (kind, source) = resolve_embedder(&config)?;
        let mut config = config;
        config.embedder = Some(kind);
        let recorded = |problem: String| {
            if source != embedder::EmbedderSource::Recorded {
                problem
            } else if config.postgres.is_some() {
                format!(
                    "{problem} (the database's vectors were made with embedder {kind}, which \
                     every server on it runs)"
                )
            } else {
                format!(
                    "{problem} (the existing index was built with embedder {kind}; choosing \
                     another with --embedder rebuilds it)"
                )
            }
        };
        tracing::info!(
            embedder = kind.as_str(),
            source = source.as_str(),
            "embedder in force"
        );
        if let Err(problems) = config.validate() {
            return Err(ServiceError::bad_request(
                "invalid_config",
                recorded(problems.join("; ")),
            ));
        }
        // Before touching the data directory: a missing or corrupt model
        // refuses to start with the command that fixes it.
        let embedder = embedder::build(&config)
            .map_err(|e| ServiceError::Unavailable(recorded(e.to_string())))?;
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
        let open_pair = |first: bool| -> ServiceResult<Inner> {
            Ok(match &config.postgres {
                Some(url) => {
                    // A database nobody migrated yet is migrated by the
                    // connecting role (which must then own the schema);
                    // replicas serving as an application role find it done.
                    let store = match open_postgres(url, store_config.clone()) {
                        Ok(store) => store,
                        Err(e) if first => {
                            if migrate_postgres(url, None, embedder.dimension()).is_err() {
                                return Err(e);
                            }
                            open_postgres(url, store_config.clone())?
                        }
                        Err(e) => return Err(e),
                    };
                    let mut store: Box<dyn Store> = Box::new(store);
                    if first {
                        check_shared_embedder(store.as_mut(), kind, embedder.as_ref())?;
                    }
                    Inner { store }
                }
                None => {
                    // The checkpointer copies the log (checkpoint.rs).
                    let store =
                        SqliteStore::open(config.data_dir.join(STORE_FILE), store_config.clone())?;
                    store.leave_checkpoints_to_another_connection(checkpoint::LOG_FILE_LIMIT)?;
                    let mut store: Box<dyn Store> = Box::new(store);
                    if first {
                        directory::import_earlier_catalog(
                            store.as_mut(),
                            &config.data_dir.join(CATALOG_FILE),
                        )?;
                    }
                    Inner { store }
                }
            })
        };
        let mut writer = open_pair(true)?;
        // Where the previous process's decisions left off: they may have
        // run ahead of the clock (see `decision_instant`), and a read or a
        // new decision starting from the bare clock would not see them, or
        // would be placed before them.
        let latest_decision = writer.store.latest_created_at()?;
        let readers = (0..config.read_connections.max(1))
            .map(|_| open_pair(false))
            .collect::<ServiceResult<Vec<_>>>()?;
        let health_reader = Mutex::new(open_pair(false)?);
        let pg = match &config.postgres {
            Some(url) => Some(PgTargets::connect(url, embedder.clone())?),
            None => None,
        };
        let pg_reads = match &config.postgres {
            Some(url) => Some(PgReads::open(url, &config, embedder.as_ref())?),
            None => None,
        };
        let signer = crate::signing::ReceiptSigner::load_or_create(
            &config.signing_key_path(),
            clock.now_unix_ms(),
        )?;
        let mut retriever = new_retriever(&embedder);
        // The graph linker links publications into the vector graph.
        retriever.vector.defer_linking();
        let (indexes, published_indexes) = Indexes::new(retriever, pg);
        let core = ServiceCore {
            writer: Mutex::new(writer),
            readers: sync::Pool::new(readers),
            health_reader,
            pg_reads,
            indexes: Mutex::new(indexes),
            published_indexes,
            pg_apply: RwLock::new(()),
            index_waiters: AtomicUsize::new(0),
            restored_graph: std::sync::atomic::AtomicBool::new(false),
            faults: Mutex::new(None),
            progress: sync::Progress::default(),
            graph_wake: sync::Wake::default(),
            log_wake: sync::Wake::default(),
            pass: Mutex::new(()),
            group: sync::GroupQueue::default(),
            persist: Mutex::new(persistence::Persist::default()),
            snapshots: Mutex::new(()),
            rate: governor::RateLimiter::keyed(rate_quota(&config)),
            keys: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(KEY_CACHE_TTL)
                .build(),
            last_reconcile: Mutex::new(None),
            clock,
            metrics: Metrics::default(),
            extraction: extract::Extraction::open(&config)?,
            last_decision: std::sync::atomic::AtomicU64::new(latest_decision),
            read_model: read_model::ReadModel::new(read_model::READ_MODEL_CAPACITY),
            scope_cache: read_model::ScopeCache::new(read_model::SCOPE_CACHE_CAPACITY),
            tenant_generations: moka::sync::Cache::builder()
                .max_capacity(TENANT_GENERATIONS_KEPT)
                .build(),
            parsed_texts: guards::ParsedTexts::default(),
            access_reads: moka::sync::Cache::builder()
                .max_capacity(ACCESS_READS_KEPT)
                .build(),
            signer,
            config,
            embedder,
            guard_vectors: Arc::default(),
            ahead_workers: sync::Workers::new("mosaic-embed-ahead"),
        };
        let admin_key_file = core.bootstrap_admin_key()?;
        let switched_from = core.load_indexes()?;
        let identity = core.embedder_identity();
        let core = Arc::new(core);
        let committer = sync::spawn_committer(core.clone())?;
        let worker = sync::spawn_worker(core.clone())?;
        let extractor = extract::spawn_extractor(core.clone())?;
        // With PostgreSQL the vectors live in the database: no graph here.
        let linker = match core.config.postgres {
            None => Some(sync::spawn_graph_linker(core.clone())?),
            Some(_) => None,
        };
        let checkpointer = match core.config.postgres {
            None => {
                let files = [("store", core.config.data_dir.join(STORE_FILE))];
                Some(checkpoint::spawn_checkpointer(core.clone(), files)?)
            }
            Some(_) => None,
        };
        Ok((
            Service {
                core,
                committer: Some(committer),
                worker: Some(worker),
                extractor,
                linker,
                checkpointer,
            },
            OpenReport {
                admin_key_file,
                created_data_dir,
                embedder: EmbedderReport {
                    identity,
                    source,
                    switched_from,
                },
            },
        ))
    }
}

impl ServiceCore {
    /// Signs a receipt's digest with the deployment's current key.
    pub fn sign_receipt(
        &self,
        kind: ReceiptKind,
        receipt_sha256: &str,
    ) -> ServiceResult<mosaic_harness::receipt_signature::ReceiptSignature> {
        self.signer.sign(kind, receipt_sha256)
    }

    /// Signs a receipt's digest with the deployment's current key, the
    /// signing instant (the service clock) inside the signed bytes: for
    /// write, selection and relevance receipts, whose bodies tell none.
    pub fn sign_receipt_now(
        &self,
        kind: ReceiptKind,
        receipt_sha256: &str,
    ) -> ServiceResult<mosaic_harness::receipt_signature::ReceiptSignature> {
        self.signer.sign_at(kind, receipt_sha256, self.now())
    }

    /// The receipt-signing public keys (`GET /v1/keys`).
    pub fn receipt_keys(&self) -> crate::signing::KeysResponse {
        self.signer.keys()
    }

    /// The configuration in force.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The identity of the embedder in force.
    pub fn embedder_identity(&self) -> EmbedderIdentity {
        EmbedderIdentity::of(self.config.embedder_kind(), self.embedder.as_ref())
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The Prometheus text of `/metrics`, its gauges read now: on
    /// PostgreSQL, how many tenants have a read kept in this process
    /// (`mosaic_pg_kept_read_tenants`) and roughly the bytes of rows and
    /// vectors kept (`mosaic_pg_kept_read_bytes`); no tenant is named.
    pub fn render_metrics(&self) -> String {
        if let Some(reads) = &self.pg_reads {
            let (tenants, bytes) = reads.kept_footprint();
            self.metrics
                .set("mosaic_pg_kept_read_tenants", &[], tenants as f64);
            self.metrics
                .set("mosaic_pg_kept_read_bytes", &[], bytes as f64);
        }
        self.metrics.render()
    }

    /// Now, from the service clock.
    pub fn now(&self) -> u64 {
        self.clock.now_unix_ms()
    }

    /// The instant a proposal is decided at: the clock, but never at or
    /// before the previous decision's, so records are created in the order
    /// they were decided (the index's timelines, turn windows and recency
    /// read creation time; a batch of messages decided within one
    /// millisecond would otherwise tie and lose its order). It runs ahead
    /// of the clock by at most [`MAX_DECISION_LEAD_MS`]; past that (over a
    /// thousand decisions a second, sustained) instants may tie again.
    pub(super) fn decision_instant(&self) -> u64 {
        let wall = self.now();
        let mut last = self.last_decision.load(Ordering::Relaxed);
        loop {
            let next = if last >= wall && last < wall.saturating_add(MAX_DECISION_LEAD_MS) {
                last + 1
            } else {
                wall.max(last.min(wall.saturating_add(MAX_DECISION_LEAD_MS)))
            };
            match self.last_decision.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    /// The instant a read sees: the clock, or the latest decision's
    /// instant while decisions run ahead of it (see
    /// [`ServiceCore::decision_instant`]). A record is eligible from its
    /// creation instant on, so a read at the bare clock would miss the
    /// records a call has just answered as readable, for as long as the
    /// decisions' lead (up to [`MAX_DECISION_LEAD_MS`] under a burst of
    /// writes).
    pub(super) fn read_instant(&self) -> u64 {
        self.now().max(self.last_decision.load(Ordering::SeqCst))
    }
}
