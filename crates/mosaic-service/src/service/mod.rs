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
    Arc, LockResult, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    TryLockError, TryLockResult,
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
    Authorization, DeletionReceipt, IndexAck, ListedRecord, ListedState, MAX_LIST_LIMIT, OutboxOp,
    OutboxTask, RecordFilter, RecordState, ReviewAction, RevocationReason, SqliteStore, Store,
    StoreConfig, StoreError, WriteDecision, WriteOutcome, WriteRequest,
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

mod admin;
mod audit_log;
mod browse;
mod carry;
mod checkpoint;
pub(crate) mod conversation;
mod directory;
pub use conversation::{STATEMENTS, StatementAttachments};
mod extract;
mod guard_vectors;
mod guards;
mod health;
mod ids;
mod items;
mod outbox;
mod persistence;
mod postgres;
mod propose;
mod read_model;
mod recall;
pub use recall::checked_filter;
mod revocation;
mod sync;

pub use browse::{BROWSE_DEFAULT_LIMIT, BROWSE_MAX_LIMIT, BROWSE_MAX_SCAN};
pub use ids::REQUEST_ID_DOMAIN;
pub use items::{NAMESPACES_DEFAULT_LIMIT, NAMESPACES_MAX_LIMIT, NAMESPACES_MAX_SCAN};
pub use postgres::migrate_postgres;
use postgres::*;

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

/// The index targets: in process (`retriever`) or, with PostgreSQL, inside
/// the database (`pg`; the in-process retriever then stays empty).
struct Indexes {
    retriever: Retriever,
    /// Behind a mutex of its own so that `Indexes` is `Sync` (its clients
    /// are not); reached only through `&mut Indexes` (the index write
    /// lock): reads take [`PgReads`]' pooled connections instead.
    pg: Option<Mutex<PgTargets>>,
}

impl Indexes {
    /// The PostgreSQL targets, or (`None`) the in-process retriever.
    fn targets(&mut self) -> Result<&mut PgTargets, &mut Retriever> {
        match self.pg.as_mut() {
            Some(m) => Ok(m.get_mut().unwrap_or_else(PoisonError::into_inner)),
            None => Err(&mut self.retriever),
        }
    }
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
    /// Most vectors a pass may leave unlinked, in place of the service's
    /// bound: a graph linker that has fallen that far behind.
    fn max_unlinked(&self) -> Option<usize> {
        None
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

/// Past this many keys' rate state, the state of keys whose bucket is full
/// again (indistinguishable from a fresh one) is dropped.
const RATE_KEYS_KEPT: usize = 10_000;

/// The running service: a handle that owns the outbox worker thread and
/// dereferences to the shared [`ServiceCore`], whose methods are the
/// product's operations. Dropping it stops the worker and saves the
/// indexes.
pub struct Service {
    core: Arc<ServiceCore>,
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
        if ix.retriever.vector.pending_graph() <= sync::SHUTDOWN_LINK_LIMIT {
            ix.retriever
                .vector
                .absorb_pending(sync::SHUTDOWN_LINK_LIMIT);
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
    /// The indexes: ranking takes the read side; an outbox pass takes the
    /// write side only to apply deliveries it prepared (embedded) before.
    indexes: RwLock<Indexes>,
    /// Requests and passes waiting for `indexes` (the graph linker, which
    /// is background work, lets go of it when one does).
    index_waiters: AtomicUsize,
    /// The indexed record count `/health` last read, answered while an
    /// outbox pass holds the index write lock (health never waits on it).
    indexed_records: std::sync::atomic::AtomicUsize,
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

/// The digest a policy document is named by (its canonical form with the
/// digest field empty and its kinds sorted, each once).
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

    /// A service on a new data directory below `dir` with the hashing
    /// embedder, its configuration `adjust`ed (the service's unit tests).
    #[cfg(test)]
    pub(crate) fn for_test(
        dir: &Path,
        adjust: impl FnOnce(&mut ServerConfig),
    ) -> ServiceResult<Self> {
        let mut config = ServerConfig {
            data_dir: dir.join("data"),
            embedder: crate::embedder::EmbedderKind::Hash,
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
                        check_shared_embedder(store.as_mut(), config.embedder, embedder.as_ref())?;
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
            Some(url) => Some(Mutex::new(PgTargets::connect(url, embedder.clone())?)),
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
        let core = ServiceCore {
            writer: Mutex::new(writer),
            readers: sync::Pool::new(readers),
            health_reader,
            pg_reads,
            indexes: RwLock::new(Indexes { retriever, pg }),
            index_waiters: AtomicUsize::new(0),
            indexed_records: std::sync::atomic::AtomicUsize::new(0),
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
            signer,
            config,
            embedder,
            guard_vectors: Arc::default(),
            ahead_workers: sync::Workers::new("mosaic-embed-ahead"),
        };
        let admin_key_file = core.bootstrap_admin_key()?;
        let switched_from = core.load_indexes()?;
        // The count `/health` answers while the index lock is taken, until
        // it reads one itself.
        core.indexed_records.store(
            core.read_indexes().retriever.lexical.live_count(),
            std::sync::atomic::Ordering::Relaxed,
        );
        let identity = core.embedder_identity();
        let core = Arc::new(core);
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

    fn bootstrap_admin_key(&self) -> ServiceResult<Option<PathBuf>> {
        let mut inner = lock(&self.writer)?;
        if inner.store.enabled_admin_keys()? > 0 {
            return Ok(None);
        }
        let key = auth::generate_key()?;
        let path = self.config.data_dir.join(ADMIN_KEY_FILE);
        write_secret_file(&path, &key)?;
        let sha = auth::key_sha256(&key);
        directory::insert_key(
            inner.store.as_mut(),
            &sha,
            &auth::key_id(&sha),
            None,
            self.now(),
        )?;
        Ok(Some(path))
    }

    // ------------------------------------------------------------ auth, limits

    /// Resolves a presented bearer key to its credential: from the key
    /// cache when this server saw the key in the last second, else from the
    /// store.
    pub fn authenticate(&self, presented: Option<&str>) -> ServiceResult<Credential> {
        let key = presented.ok_or(ServiceError::MissingKey)?;
        if !auth::well_formed(key) {
            return Err(ServiceError::InvalidKey);
        }
        let digest = auth::key_sha256(key);
        if let Some(credential) = self.keys.get(&digest) {
            return Ok(credential);
        }
        let credential = directory::credential(self.reader()?.store.as_mut(), &digest)?
            .ok_or(ServiceError::InvalidKey)?;
        self.keys.insert(digest, credential.clone());
        Ok(credential)
    }

    /// Forgets every cached key: called when this server disables keys, so
    /// they stop working here at once (elsewhere within [`KEY_CACHE_TTL`]).
    pub(crate) fn forget_cached_keys(&self) {
        self.keys.invalidate_all();
    }

    /// Takes one request from the credential's rate, or 429 with the
    /// seconds until it allows one again.
    pub fn check_rate(&self, credential: &Credential) -> ServiceResult<()> {
        let key_id = credential.key_id().to_owned();
        match self.rate.check_key(&key_id) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                self.metrics.incr("mosaic_rate_limited_total", &[]);
                if self.rate.len() > RATE_KEYS_KEPT {
                    self.rate.retain_recent();
                }
                let wait = not_until.wait_time_from(governor::clock::Clock::now(
                    &governor::clock::DefaultClock::default(),
                ));
                // Whole seconds, rounded up, at least one.
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                Err(ServiceError::RateLimited {
                    retry_after_secs: secs.clamp(1, 3600),
                })
            }
        }
    }

    /// The tenant's policy and the principal's grant in force, both as the
    /// store's write path re-reads them (with the instant the policy came
    /// into force, from the tenant's settings).
    fn tenant_and_grant(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
    ) -> ServiceResult<(crate::settings::TenantRow, MemoryWriteGrant)> {
        let not_configured = || {
            ServiceError::forbidden(
                "tenant_not_configured",
                "the credential's tenant has no policy",
            )
        };
        let tenant_row =
            directory::tenant(inner.store.as_mut(), tenant)?.ok_or_else(not_configured)?;
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

/// Whether the lexical index holds a live record with other claim keys
/// than `claims` (the store's claims of that record) give: an index
/// written before the messages carried them, or a journal that lost them.
fn claim_keys_differ(ix: &mut Indexes, record_id: &str, claims: &[StructuredClaim]) -> bool {
    let Err(retriever) = ix.targets() else {
        return false;
    };
    retriever
        .lexical
        .live_entry(record_id)
        .is_some_and(|e| e.claim_keys != mosaic_harness::memory_write::claim_index_keys(claims))
}

/// Records whose index state disagrees with the store: active but not live
/// in a target, revoked/erased but still live, or live with other claim
/// keys than the store's. Reads per tenant one query for every record's
/// state and one for all its claims, not a read per record.
fn index_problems(inner: &mut Inner, ix: &mut Indexes) -> ServiceResult<Vec<(String, String)>> {
    let mut problems = Vec::new();
    // Publications still pending per target: a target that already
    // acknowledged a record must hold it, even before the record is active
    // (a crash after the acknowledgement loses what the snapshot missed).
    let mut pending: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for target in INDEX_TARGETS {
        let rows = inner.store.pending_outbox(target, usize::MAX)?;
        pending.insert(target, rows.into_iter().map(|t| t.record_id).collect());
    }
    for tenant in inner.store.tenant_ids()? {
        let rows = inner.store.record_states(&tenant)?;
        let mut claims: HashMap<String, Vec<StructuredClaim>> = HashMap::new();
        for (record_id, claim) in inner.store.tenant_claims(&tenant)? {
            claims.entry(record_id).or_default().push(claim);
        }
        for (record_id, state) in rows {
            let lexical = live_in(ix, "lexical", &record_id)?;
            let vector = live_in(ix, "vector", &record_id)?;
            let live_in_store = matches!(state, ListedState::Active | ListedState::Publishing);
            let stored_claims = claims.get(&record_id).map_or(&[][..], Vec::as_slice);
            if live_in_store && lexical && claim_keys_differ(ix, &record_id, stored_claims) {
                problems.push((
                    record_id.clone(),
                    "claim keys in the lexical index differ from the store's".to_owned(),
                ));
            }
            match state {
                ListedState::Active => {
                    if !lexical || !vector {
                        problems.push((
                            record_id.clone(),
                            "active in the store but missing from an index".to_owned(),
                        ));
                    }
                }
                ListedState::Publishing => {
                    let acknowledged_but_missing = [("lexical", lexical), ("vector", vector)]
                        .iter()
                        .any(|(target, live)| {
                            !live && !pending.get(target).is_some_and(|p| p.contains(&record_id))
                        });
                    if acknowledged_but_missing {
                        problems.push((
                            record_id.clone(),
                            "acknowledged by an index that does not hold it".to_owned(),
                        ));
                    }
                }
                ListedState::Superseded | ListedState::Contested | ListedState::Quarantined => {}
                ListedState::Revoked | ListedState::Erased => {
                    if lexical || vector {
                        problems.push((
                            record_id.clone(),
                            "revoked or erased but still live in an index".to_owned(),
                        ));
                    }
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

/// Every record of every tenant (the tenants list is the store's tenant
/// settings), as the store lists them.
fn all_records(inner: &mut Inner) -> ServiceResult<Vec<ListedRecord>> {
    let mut out = Vec::new();
    for tenant in inner.store.tenant_ids()? {
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

/// A propose request rebuilt from a stored record and its stored claims,
/// for the export of a record an earlier release wrote without keeping
/// its export copy (its two databases were written apart; this release
/// commits the copy with the record): the source texts and signed
/// evidence are not known, so an import judges it without them.
fn request_from_record(
    store: &mut dyn Store,
    record: &mosaic_harness::MemoryRecord,
    proposal_id: &str,
) -> ServiceResult<ProposeRequest> {
    let purpose = conversation::purpose_of(&record.subject);
    Ok(ProposeRequest {
        claims: store.record_claims(&record.record_id)?,
        sources: record.sources.clone(),
        summary: record.summary.clone(),
        record_id: Some(record.record_id.clone()),
        proposal_id: Some(proposal_id.to_owned()),
        token_count: Some(record.token_count),
        token_counter_release: Some(record.token_counter_release.clone()),
        provenance_sha256: Some(record.provenance_sha256.clone()),
        writer_release: Some(record.writer_release.clone()),
        ..ProposeRequest::new("", record.kind, purpose, record.subject.clone())
    })
}

/// The outbox target named `target` (`lexical` or `vector`): in PostgreSQL
/// when the service runs on it, in process otherwise.
fn index_target<'a>(ix: &'a mut Indexes, target: &str) -> &'a mut dyn IndexTarget {
    match (ix.targets(), target) {
        (Ok(pg), "lexical") => &mut pg.lexical,
        (Ok(pg), _) => &mut pg.vector,
        (Err(retriever), "lexical") => &mut retriever.lexical,
        (Err(retriever), _) => &mut retriever.vector,
    }
}

/// Hands one message to the `target` index; a publication to the vector
/// target uses `vector` when the caller embedded it.
fn deliver(
    ix: &mut Indexes,
    target: &str,
    delivery: &IndexDelivery,
    vector: Option<Result<mosaic_index::embed::Passages, IndexError>>,
) -> Result<(), ()> {
    if let (IndexDelivery::Publish(message), Some(vector), Ok(pg)) =
        (delivery, &vector, ix.targets())
        && target == VECTOR_TARGET
    {
        // One vector per record here: the first passage's.
        let first = vector.clone().and_then(|p| {
            p.vectors
                .into_iter()
                .next()
                .ok_or(IndexError::BadEmbedding {
                    expected: 1,
                    actual: 0,
                })
        });
        return pg
            .vector
            .publish_prepared(message, first)
            .map(|_| ())
            .map_err(|_| ());
    }
    if let (IndexDelivery::Publish(message), Some(vector), None) = (delivery, &vector, &ix.pg)
        && target == VECTOR_TARGET
    {
        return match ix
            .retriever
            .vector
            .publish_batch_passages(std::slice::from_ref(message), vec![vector.clone()])
            .pop()
        {
            Some(Ok(_)) => Ok(()),
            _ => Err(()),
        };
    }
    let index = index_target(ix, target);
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
fn live_in(ix: &mut Indexes, target: &str, record_id: &str) -> ServiceResult<bool> {
    Ok(live_generation(ix, target, record_id)?.is_some())
}

/// The generation a target holds for a record (live or tombstoned), if any.
fn live_generation(ix: &mut Indexes, target: &str, record_id: &str) -> ServiceResult<Option<u64>> {
    match (ix.targets(), target) {
        (Ok(pg), "lexical") => pg.lexical.live_generation_of(record_id),
        (Ok(pg), _) => pg.vector.live_generation_of(record_id),
        (Err(retriever), "lexical") => return Ok(retriever.lexical.live_generation(record_id)),
        (Err(retriever), _) => return Ok(retriever.vector.live_generation(record_id)),
    }
    .map_err(|e| ServiceError::Internal(format!("PostgreSQL index: {e}")))
}

/// The index keys of a record's structured claims, as the store holds
/// them (written in the record's own transaction): what recall's
/// `claim_keys` matches.
fn stored_claim_keys(store: &mut dyn Store, record_id: &str) -> ServiceResult<Vec<String>> {
    Ok(mosaic_harness::memory_write::claim_index_keys(
        &store.record_claims(record_id)?,
    ))
}

/// The index message that publishes `record` with `text` and its claim
/// keys at `generation`.
fn publish_message(
    record: &mosaic_harness::MemoryRecord,
    claim_keys: Vec<String>,
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
        claim_keys,
        text,
    }
}

/// The fusion parameters of every recall, embedded or over PostgreSQL.
fn funnel_config() -> FunnelConfig {
    FunnelConfig::default()
}

fn new_retriever(embedder: &Arc<dyn Embedder>) -> Retriever {
    Retriever::new(embedder.clone(), AnnConfig::default(), funnel_config())
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

/// The per-key rate of `config`: `rate_limit_per_second` sustained, bursts
/// of `rate_limit_burst` (both checked positive when the config loads).
fn rate_quota(config: &ServerConfig) -> governor::Quota {
    let per_second = std::num::NonZeroU32::new(config.rate_limit_per_second)
        .unwrap_or(std::num::NonZeroU32::MIN);
    let burst =
        std::num::NonZeroU32::new(config.rate_limit_burst).unwrap_or(std::num::NonZeroU32::MIN);
    governor::Quota::per_second(per_second).allow_burst(burst)
}

/// Checks one signed item against the tenant's registered verifiers and
/// returns the item; 403 `unverified_evidence` otherwise.
fn authenticated<T: serde::Serialize + Clone>(
    store: &mut dyn Store,
    proposition: &Proposition<'_>,
    kind: EvidenceKind,
    index: usize,
    signed: &Signed<T>,
    named_release: Option<&str>,
) -> ServiceResult<T> {
    let verifier = match &signed.signature {
        Some(signature) => {
            directory::verifier(store, proposition.tenant_id, &signature.verifier_id)?
                .filter(|v| !v.disabled)
                .and_then(|v| {
                    evidence::parse_public_key(&v.public_key_hex).map(|public_key| {
                        RegisteredVerifier {
                            verifier_id: v.verifier_id,
                            verifier_release: v.verifier_release,
                            public_key,
                        }
                    })
                })
        }
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
    store: &mut dyn Store,
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
            store,
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
            store,
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
            store,
            proposition,
            EvidenceKind::ConflictObservation,
            idx,
            signed,
            release,
        )?);
    }
    if let Some(signed) = &request.procedure_evaluation {
        out.procedure_evaluation = Some(authenticated(
            store,
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

impl ServiceCore {
    /// The indexes for ranking (shared with other readers). Counted in
    /// `index_waiters` while it waits.
    fn read_indexes(&self) -> RwLockReadGuard<'_, Indexes> {
        self.counted_wait(self.indexes.try_read(), || self.indexes.read())
    }

    /// The indexes for applying deliveries (held without I/O or embedding).
    /// Counted in `index_waiters` while it waits.
    fn write_indexes(&self) -> RwLockWriteGuard<'_, Indexes> {
        self.counted_wait(self.indexes.try_write(), || self.indexes.write())
    }

    /// The guard `attempt` got at once, else `wait`'s, counted in
    /// `index_waiters` meanwhile (a poisoned lock is taken over).
    fn counted_wait<G>(
        &self,
        attempt: TryLockResult<G>,
        wait: impl FnOnce() -> LockResult<G>,
    ) -> G {
        match attempt {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let _waiting = Waiting::on(&self.index_waiters);
                wait().unwrap_or_else(PoisonError::into_inner)
            }
        }
    }

    /// Whether a request or a pass waits for the indexes.
    fn index_wanted(&self) -> bool {
        self.index_waiters.load(Ordering::Acquire) > 0
    }
}

/// One waiter counted while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn on(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
