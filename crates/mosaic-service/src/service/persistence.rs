//! Index persistence: snapshots, saved embeddings, load at startup and rebuild from the store.

use mosaic_index::ann::GraphSnapshot;
use mosaic_index::journal::write_durably;
use mosaic_index::{IndexJournal, JournalEntry, JournalHeader, apply_to_lexical, apply_to_vector};

use super::*;

/// What the service keeps of its in-process indexes between snapshots: an
/// append-only journal per target (`index/<target>.journal`), so the bytes
/// written per accepted record do not depend on how many records exist.
/// A snapshot is rewritten only when a journal has grown past the last
/// snapshot's size (amortised constant bytes per record), when it holds a
/// tombstone (erased text leaves the files within a reconcile interval),
/// and at shutdown; never on a request's path.
#[derive(Default)]
pub(in crate::service) struct Persist {
    /// The journals, when this process holds them (another process on the
    /// same data directory holds them first: this one then saves whole
    /// snapshots, as before journals).
    journals: Option<Journals>,
    /// Changes applied since the last save (for the snapshot-only mode).
    dirty: bool,
    /// Bytes of the last snapshot written (both targets and embeddings).
    snapshot_bytes: u64,
    /// Bytes appended to the journals since the last snapshot.
    appended_bytes: u64,
    /// The open left vectors out of the graph (no saved graph fitted, as
    /// with files of an earlier release; a partial one; journal replays):
    /// the next save is due whatever the journals hold, so a later restart
    /// attaches the whole graph.
    graph_stale: bool,
}

pub(in crate::service) struct Journals {
    lexical: IndexJournal,
    vector: IndexJournal,
}

/// The journal entries of an outbox pass (or a repair), per target, in the
/// order the index applied them.
#[derive(Default)]
pub(in crate::service) struct Changes {
    entries: Vec<(&'static str, JournalEntry)>,
}

impl Changes {
    /// Notes a delivery `ix` applied to `target` (read back from the index,
    /// so the vector journaled is the one it stored).
    pub(in crate::service) fn applied(
        &mut self,
        ix: &Indexes,
        target: &'static str,
        delivery: &IndexDelivery,
    ) {
        if ix.pg.is_some() {
            return;
        }
        let entry = match delivery {
            IndexDelivery::Publish(message) => JournalEntry::Publish {
                message: message.clone(),
                vector: (target == VECTOR_TARGET)
                    .then(|| ix.retriever.vector.vector_of(&message.record_id))
                    .flatten()
                    .map(<[f32]>::to_vec),
            },
            IndexDelivery::Tombstone {
                record_id,
                generation,
            } => JournalEntry::Tombstone {
                record_id: record_id.clone(),
                generation: *generation,
            },
        };
        self.entries.push((target, entry));
    }
}

fn journal_path(data_dir: &Path, target: &str) -> PathBuf {
    data_dir.join("index").join(format!("{target}.journal"))
}

impl ServiceCore {
    pub(super) fn index_path(&self, target: &str) -> PathBuf {
        self.config
            .data_dir
            .join("index")
            .join(format!("{target}.json"))
    }

    /// Appends what an outbox pass changed to the journals (one write per
    /// target, no sync: the indexes are derived, and what a power cut loses
    /// the startup check finds and publishes again).
    pub(super) fn persist_changes(&self, changes: Changes) -> ServiceResult<()> {
        if changes.entries.is_empty() {
            return Ok(());
        }
        let mut persist = lock(&self.persist)?;
        let Some(journals) = persist.journals.as_mut() else {
            persist.dirty = true;
            return Ok(());
        };
        let (lexical, vector): (Vec<_>, Vec<_>) = changes
            .entries
            .into_iter()
            .partition(|(target, _)| *target != VECTOR_TARGET);
        let lexical: Vec<JournalEntry> = lexical.into_iter().map(|(_, e)| e).collect();
        let vector: Vec<JournalEntry> = vector.into_iter().map(|(_, e)| e).collect();
        let mut written = 0;
        if !lexical.is_empty() {
            written += journals.lexical.append(&lexical)?;
        }
        if !vector.is_empty() {
            written += journals.vector.append(&vector)?;
        }
        persist.appended_bytes += written;
        self.metrics
            .add("mosaic_index_journal_bytes_total", &[], written);
        Ok(())
    }

    /// Writes fresh snapshots when the journals call for it (grown past
    /// the last snapshot, or holding a tombstone) or when `force`d, then
    /// drops the journal entries the snapshots hold.
    pub(super) fn save_if_due(&self, force: bool) -> ServiceResult<()> {
        let marks = {
            let persist = lock(&self.persist)?;
            let due = match &persist.journals {
                Some(j) => {
                    force && (j.lexical.entries() + j.vector.entries() > 0 || persist.graph_stale)
                        || j.lexical.tombstones() + j.vector.tombstones() > 0
                        || persist.appended_bytes > persist.snapshot_bytes.max(1 << 20)
                }
                None => persist.dirty || persist.graph_stale,
            };
            if !due {
                return Ok(());
            }
            // Every entry up to these marks is already in the indexes, so
            // the snapshots taken after hold them.
            persist
                .journals
                .as_ref()
                .map(|j| (j.lexical.mark(), j.vector.mark()))
        };
        let bytes = self.save_indexes()?;
        let mut persist = lock(&self.persist)?;
        persist.snapshot_bytes = bytes;
        persist.dirty = false;
        persist.graph_stale = false;
        if let (Some(journals), Some((lexical, vector))) = (persist.journals.as_mut(), marks) {
            journals.lexical.discard_through(lexical)?;
            journals.vector.discard_through(vector)?;
            persist.appended_bytes = journals.lexical.len_bytes() + journals.vector.len_bytes();
            // Each journal was written again with what the snapshots did
            // not hold yet.
            self.metrics.add(
                "mosaic_index_journal_bytes_total",
                &[],
                persist.appended_bytes,
            );
        }
        Ok(())
    }

    /// Writes both snapshots and the saved embeddings durably (temporary
    /// file, sync, rename); returns their size. The snapshots are taken
    /// under the read lock; the files are written without it.
    pub(super) fn save_indexes(&self) -> ServiceResult<u64> {
        // One writer of the snapshot files at a time (a compaction from the
        // reconciler may meet a rebuild or a shutdown flush).
        let _snapshots = lock(&self.snapshots)?;
        if self.config.postgres.is_some() {
            // The indexes live in PostgreSQL: nothing to snapshot.
            return Ok(0);
        }
        let (lexical, vector, embeddings, graph) = {
            let ix = self.read_indexes();
            (
                ix.lexical.snapshot().to_bytes()?,
                ix.vector.snapshot().to_bytes()?,
                ix.vector.embedding_snapshot().to_bytes()?,
                // Taken from the same copy as the vectors: node i is the
                // i-th saved vector.
                ix.vector.graph_snapshot(),
            )
        };
        // The graph is bound to this vectors file: a crash between the two
        // writes leaves a graph that no longer fits, which a restart
        // refuses (and rebuilds in the background).
        let graph = match (graph, EmbeddingSnapshot::binding_of(&embeddings)) {
            (Some(graph), Some(binding)) => graph.to_bytes(&binding)?,
            _ => Vec::new(),
        };
        write_durably(&self.index_path("lexical"), &lexical)?;
        write_durably(&self.index_path("vector"), &vector)?;
        write_durably(&self.embeddings_path(), &embeddings)?;
        write_durably(&self.graph_path(), &graph)?;
        let identity = self.save_embedder_identity()?;
        let bytes = (lexical.len() + vector.len() + embeddings.len() + graph.len()) as u64;
        // With the journals' bytes, what index persistence writes: a
        // client can measure it per record through `/metrics`.
        self.metrics
            .add("mosaic_index_snapshot_bytes_total", &[], bytes + identity);
        Ok(bytes)
    }

    /// The vector target's graph, bound to [`ServiceCore::embeddings_path`].
    pub(super) fn graph_path(&self) -> PathBuf {
        self.config.data_dir.join("index").join(VECTOR_GRAPH_FILE)
    }

    /// Opens the journals (replaying them into the restored indexes when
    /// `replay`); `false` when an entry cannot be replayed (the caller
    /// rebuilds). Another process holding them leaves this one without.
    fn open_journals(&self, replay: bool) -> ServiceResult<bool> {
        let mut ix = self.write_indexes();
        let headers = (
            JournalHeader::for_lexical(&ix.retriever.lexical),
            JournalHeader::for_vector(&ix.retriever.vector),
        );
        let data_dir = &self.config.data_dir;
        let open = |target: &str, header: JournalHeader| {
            let path = journal_path(data_dir, target);
            match IndexJournal::open(&path, header.clone()) {
                Err(e) if path.exists() && !matches!(e, IndexError::JournalLocked(_)) => {
                    // Another embedder's, or not a journal: what it held is
                    // rebuilt from the store.
                    let _ = std::fs::remove_file(&path);
                    IndexJournal::open(&path, header).map(|(j, _)| (j, Vec::new(), false))
                }
                other => other.map(|(j, entries)| (j, entries, true)),
            }
        };
        let (lexical, vector) = match (open("lexical", headers.0), open("vector", headers.1)) {
            (Ok(l), Ok(v)) => (l, v),
            (l, v) => {
                let problem = l
                    .err()
                    .or(v.err())
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                tracing::warn!(%problem, "index journals unavailable; saving whole snapshots");
                return Ok(true);
            }
        };
        let mut intact = lexical.2 && vector.2;
        if replay {
            let retriever = ix.retriever_mut();
            intact &= apply_to_lexical(&mut retriever.lexical, &lexical.1).is_ok()
                && apply_to_vector(&mut retriever.vector, &vector.1).is_ok();
        }
        let mut persist = lock(&self.persist)?;
        persist.appended_bytes = lexical.0.len_bytes() + vector.0.len_bytes();
        persist.journals = Some(Journals {
            lexical: lexical.0,
            vector: vector.0,
        });
        Ok(intact)
    }

    /// The vectors of the vector snapshot's live records (a restart
    /// restores them rather than embedding every text again).
    pub(super) fn embeddings_path(&self) -> PathBuf {
        self.config
            .data_dir
            .join("index")
            .join(VECTOR_EMBEDDINGS_FILE)
    }

    pub(super) fn save_embedder_identity(&self) -> ServiceResult<u64> {
        self.embedder_identity()
            .save(&self.config.data_dir)
            .map_err(|e| ServiceError::Internal(format!("cannot save the embedder identity: {e}")))
    }

    /// Makes an erasure reach the bytes before its receipt: index
    /// snapshots rewritten and journals compacted once they hold a
    /// tombstone, the SQLite write-ahead log of the store checkpointed and
    /// truncated (their older frames still hold the
    /// deleted pages; `secure_delete` has zeroed them in the main files),
    /// and the in-process result cache and the write guard's split texts
    /// emptied. Returns the stores outside
    /// the outbox this purged, for the deletion receipt to name. With
    /// PostgreSQL nothing of this lives in the process (docs/ERASURE.md).
    pub(super) fn purge_erased_bytes(&self) -> ServiceResult<Vec<&'static str>> {
        if self.config.postgres.is_some() {
            return Ok(Vec::new());
        }
        {
            let _pass = lock(&self.pass)?;
            self.save_if_due(false)?;
        }
        {
            // No write of this process appends frames while the logs are
            // checkpointed; a reader (or another process) that holds a
            // snapshot is waited for, within a bounded time.
            let _writer = self.writer()?;
            truncate_wal_within(&self.config.data_dir.join(STORE_FILE), WAL_TRUNCATE_WAIT)?;
        }
        // One cache, shared by both copies.
        self.read_indexes().clear_cache();
        // Held by text, whichever record holds it: emptied whole, after
        // the readers that may have read the erased rows are gone (the
        // text guard of the embedded store alone fills it).
        self.parsed_texts.clear();
        Ok(vec![RESULT_CACHE_STORE])
    }

    /// Whether this service's open attached the saved HNSW graph of the
    /// vector index (rather than leaving every vector to be linked again).
    pub fn restored_vector_graph(&self) -> bool {
        self.restored_graph
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Live vectors not linked into the HNSW graph yet: those a restart
    /// could not attach a saved graph for, and publications the graph
    /// linker has not reached yet (searches scan them exactly meanwhile).
    pub fn vector_graph_pending(&self) -> usize {
        self.read_indexes().vector.pending_graph()
    }

    /// Saves the snapshots (with the graph) when the open left vectors out
    /// of the graph: called once the graph linker has linked every
    /// vector, so the next restart attaches the whole graph.
    pub(super) fn save_graph_if_stale(&self) -> ServiceResult<()> {
        // Most calls find nothing to save: they do not queue for a pass.
        if !lock(&self.persist)?.graph_stale {
            return Ok(());
        }
        let _pass = lock(&self.pass)?;
        if !lock(&self.persist)?.graph_stale {
            return Ok(());
        }
        self.save_if_due(true)
    }

    /// Saves the index snapshots now (also done by reconcile when dirty).
    pub fn flush(&self) -> ServiceResult<()> {
        let _pass = lock(&self.pass)?;
        self.save_if_due(true)
    }

    /// Loads saved snapshots (when both decode), then rebuilds from the
    /// store when they are missing or disagree with it, or when they were
    /// built with another embedder (returned: vectors of two embedders
    /// never share an index).
    pub(super) fn load_indexes(&self) -> ServiceResult<Option<EmbedderIdentity>> {
        if self.config.postgres.is_some() {
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
        // The two targets are decoded and restored on two threads (they
        // share nothing); each logs its time, never content.
        let mut retriever = new_retriever(&self.embedder);
        let (lexical_path, vector_path) = (self.index_path("lexical"), self.index_path("vector"));
        let (embeddings_path, graph_path) = (self.embeddings_path(), self.graph_path());
        let started = std::time::Instant::now();
        let ms = |t: std::time::Instant| t.elapsed().as_millis() as u64;
        let (lexical_index, vector_index) = (&mut retriever.lexical, &mut retriever.vector);
        let (lexical_ok, restored) = std::thread::scope(|s| {
            let lexical = s.spawn(move || {
                let t = std::time::Instant::now();
                let snapshot = TargetSnapshot::load(&lexical_path);
                let decoded = ms(t);
                let ok = snapshot.and_then(|s| lexical_index.restore(&s)).is_ok();
                tracing::info!(
                    decode_ms = decoded,
                    total_ms = ms(t),
                    ok,
                    "lexical index restored"
                );
                ok
            });
            let vector = s.spawn(move || {
                let t = std::time::Instant::now();
                let snapshot = TargetSnapshot::load(&vector_path).ok()?;
                // Missing, corrupt, stale or another embedder's: whatever
                // it cannot vouch for is embedded again.
                let bytes = std::fs::read(&embeddings_path).unwrap_or_default();
                let embeddings = EmbeddingSnapshot::from_bytes(&bytes).ok();
                // The saved graph, when it is bound to exactly these
                // vectors; any other (missing, corrupt, older) is not used.
                let graph = embeddings
                    .as_ref()
                    .and_then(|_| EmbeddingSnapshot::binding_of(&bytes))
                    .and_then(|binding| {
                        let bytes = std::fs::read(&graph_path).ok()?;
                        GraphSnapshot::from_bytes(&bytes, &binding).ok()
                    });
                drop(bytes);
                let decoded = ms(t);
                let restored = vector_index
                    .restore_saved(&snapshot, embeddings.as_ref(), graph.as_ref())
                    .ok()?;
                tracing::info!(
                    decode_ms = decoded,
                    total_ms = ms(t),
                    embedded = restored.embedded,
                    graph_attached = restored.graph_attached,
                    pending = restored.pending,
                    "vector index restored"
                );
                Some(restored)
            });
            (
                lexical.join().unwrap_or(false),
                vector.join().ok().flatten(),
            )
        });
        if lexical_ok && let Some(restored) = restored {
            self.restored_graph.store(
                restored.graph_attached,
                std::sync::atomic::Ordering::Relaxed,
            );
            self.write_indexes().replace(retriever);
            let journals = self.open_journals(true)?;
            // Replayed publications stayed out of the graph, and so do new
            // ones: the graph linker links them all.
            self.write_indexes()
                .call(|retriever| retriever.vector.defer_linking());
            // Vectors left out of the graph (no saved graph fitted, or
            // the saved one was partial, or the journal replayed them):
            // once the linker has linked them, the next save is due.
            let pending = self.read_indexes().vector.pending_graph();
            lock(&self.persist)?.graph_stale = pending > 0;
            tracing::info!(ms = ms(started), "index journals replayed");
            if journals {
                // Lock order: a reader before the indexes, never after.
                let mut reader = self.reader()?;
                let problems = index_problems(&mut reader, &mut self.write_indexes())?;
                drop(reader);
                tracing::info!(ms = ms(started), "indexes checked against the store");
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
        if self.config.postgres.is_some() {
            return Err(ServiceError::Conflict {
                code: "indexes_in_database",
                message: "with PostgreSQL the indexes live in the database and are fed by the \
                          outbox; run reconcile"
                    .to_owned(),
            });
        }
        let _pass = lock(&self.pass)?;
        let mut inner = self.reader()?;
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
                        stored_claim_keys(&mut *inner.store, &row.record_id)?,
                        generation,
                        stored.content,
                    ));
                    lexical.push(entry.clone());
                    vector.push(entry);
                }
                Some(stored) if stored.state == RecordState::Publishing => {
                    let entry = RebuildEntry::Live(publish_message(
                        &stored.record,
                        stored_claim_keys(&mut *inner.store, &row.record_id)?,
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
        // Rebuilt linked; later publications go to the graph linker.
        retriever.vector.defer_linking();
        drop(inner);
        self.write_indexes().replace(retriever);
        let bytes = self.save_indexes()?;
        if lock(&self.persist)?.journals.is_none() {
            self.open_journals(false)?;
        }
        let mut persist = lock(&self.persist)?;
        persist.snapshot_bytes = bytes;
        persist.dirty = false;
        persist.appended_bytes = 0;
        if let Some(journals) = persist.journals.as_mut() {
            // The rebuilt snapshot holds everything: the journals restart.
            journals.lexical.reset()?;
            journals.vector.reset()?;
        }
        Ok(report)
    }
}

/// The name a deletion receipt gives the in-process recall result cache.
pub const RESULT_CACHE_STORE: &str = "result_cache";

/// How long an erasure keeps trying to truncate a write-ahead log before it
/// leaves the deletion at `erased` for reconcile to finish: attempts wait
/// up to [`WAL_TRUNCATE_BUSY`] for readers and the writer, and one that
/// finds another checkpoint under way (the checkpointer's) fails at once
/// and is tried again shortly.
const WAL_TRUNCATE_WAIT: std::time::Duration = std::time::Duration::from_secs(6);
const WAL_TRUNCATE_BUSY: std::time::Duration = std::time::Duration::from_secs(2);

/// [`truncate_wal`], tried again while the log is busy (a reader's
/// snapshot, or another checkpoint under way) until `wait` has passed.
fn truncate_wal_within(path: &Path, wait: std::time::Duration) -> ServiceResult<()> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match truncate_wal(path) {
            Err(ServiceError::Unavailable(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

/// Checkpoints the SQLite database at `path` and truncates its WAL to zero
/// bytes. Fails with `Unavailable` (the deletion waits for reconcile) when
/// a reader or another checkpoint keeps it from finishing.
fn truncate_wal(path: &Path) -> ServiceResult<()> {
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(WAL_TRUNCATE_BUSY)?;
    let checkpoint = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    });
    let busy = match checkpoint {
        Ok((busy, _, _)) => busy != 0,
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            true
        }
        Err(e) => return Err(e.into()),
    };
    if busy {
        return Err(ServiceError::Unavailable(format!(
            "the write-ahead log of {} could not be truncated yet (a reader holds it)",
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        )));
    }
    Ok(())
}
