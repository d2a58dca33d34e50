//! Index persistence: snapshots, saved embeddings, load at startup and rebuild from the store.

use super::*;

/// What the service has saved of its in-process indexes.
#[derive(Default)]
pub(in crate::service) struct Persist {
    /// Changes applied since the last save.
    dirty: bool,
}

/// The records an outbox pass (or a repair) changed, per target: what
/// persistence must save.
#[derive(Default)]
pub(in crate::service) struct Changes {
    ids: BTreeSet<(&'static str, String)>,
}

impl Changes {
    pub(in crate::service) fn note(&mut self, target: &'static str, record_id: &str) {
        self.ids.insert((target, record_id.to_owned()));
    }

    /// The changed records (read back from the indexes, so what is saved
    /// is what the index holds).
    pub(in crate::service) fn entries(&self, _ix: &Indexes) -> Vec<(&'static str, String)> {
        self.ids.iter().cloned().collect()
    }
}

impl ServiceCore {
    pub(super) fn index_path(&self, target: &str) -> PathBuf {
        self.config
            .data_dir
            .join("index")
            .join(format!("{target}.json"))
    }

    /// Saves what changed (the interim: marks the indexes for the next
    /// snapshot).
    pub(super) fn persist_changes(
        &self,
        changes: Vec<(&'static str, String)>,
    ) -> ServiceResult<()> {
        if !changes.is_empty() {
            lock(&self.persist)?.dirty = true;
        }
        Ok(())
    }

    /// Writes the snapshots when anything changed since the last save.
    pub(super) fn save_if_due(&self, _force: bool) -> ServiceResult<()> {
        let mut persist = lock(&self.persist)?;
        if !persist.dirty {
            return Ok(());
        }
        self.save_indexes()?;
        persist.dirty = false;
        Ok(())
    }

    /// Writes both snapshots and the saved embeddings. The snapshots are
    /// taken under the read lock; the files are written without it.
    pub(super) fn save_indexes(&self) -> ServiceResult<()> {
        let (lexical, vector, embeddings) = {
            let ix = self.read_indexes();
            if ix.pg.is_some() {
                // The indexes live in PostgreSQL: nothing to snapshot.
                return Ok(());
            }
            (
                ix.retriever.lexical.snapshot(),
                ix.retriever.vector.snapshot(),
                ix.retriever.vector.embedding_snapshot(),
            )
        };
        lexical.save(&self.index_path("lexical"))?;
        vector.save(&self.index_path("vector"))?;
        embeddings.save(&self.embeddings_path())?;
        self.save_embedder_identity()
    }

    /// The vectors of the vector snapshot's live records (a restart
    /// restores them rather than embedding every text again).
    pub(super) fn embeddings_path(&self) -> PathBuf {
        self.config
            .data_dir
            .join("index")
            .join(VECTOR_EMBEDDINGS_FILE)
    }

    pub(super) fn save_embedder_identity(&self) -> ServiceResult<()> {
        self.embedder_identity()
            .save(&self.config.data_dir)
            .map_err(|e| ServiceError::Internal(format!("cannot save the embedder identity: {e}")))
    }

    /// Saves the index snapshots now (also done by reconcile when dirty).
    pub fn flush(&self) -> ServiceResult<()> {
        let _pass = lock(&self.pass)?;
        self.save_indexes()?;
        lock(&self.persist)?.dirty = false;
        Ok(())
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
        let lexical = TargetSnapshot::load(&self.index_path("lexical"));
        let vector = TargetSnapshot::load(&self.index_path("vector"));
        // Missing, corrupt, stale or another embedder's: whatever it cannot
        // vouch for is embedded again.
        let embeddings = EmbeddingSnapshot::load(&self.embeddings_path()).ok();
        if let (Ok(lexical), Ok(vector)) = (lexical, vector) {
            let mut retriever = new_retriever(&self.embedder);
            if retriever.lexical.restore(&lexical).is_ok()
                && retriever
                    .vector
                    .restore_with_embeddings(&vector, embeddings.as_ref())
                    .is_ok()
            {
                // Lock order: a reader before the indexes, never after.
                let mut reader = self.reader()?;
                let mut ix = self.write_indexes();
                ix.retriever = retriever;
                let problems = index_problems(&mut reader, &mut ix)?;
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
        drop(inner);
        self.write_indexes().retriever = retriever;
        self.save_indexes()?;
        lock(&self.persist)?.dirty = false;
        Ok(report)
    }
}
