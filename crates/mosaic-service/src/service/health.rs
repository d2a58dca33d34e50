//! Health and `mosaic doctor` (the audit log's heads and proofs are in
//! `audit_log`).

use super::*;

impl ServiceCore {
    // ------------------------------------------------------------ health, doctor

    /// Liveness: the store answers, at its schema version. Anyone may ask
    /// (no key), so it tells nothing that moves with what any tenant
    /// stores or revokes (the store's revocation generation is the
    /// operator's: `GET /v1/admin/outbox`).
    pub fn health(&self) -> ServiceResult<HealthResponse> {
        let store_schema_version = lock(&self.health_reader)?.store.schema_version()?;
        Ok(HealthResponse {
            status: "ok".to_owned(),
            store_schema_version,
            version: env!("CARGO_PKG_VERSION").to_owned(),
        })
    }

    /// Everything `mosaic doctor` checks on an open service, as a list of
    /// `(check, problem)`; empty when healthy.
    pub fn doctor(&self) -> ServiceResult<Vec<(String, String)>> {
        let mut problems = Vec::new();
        let mut inner = self.reader()?;
        let version = inner.store.schema_version()?;
        let expected = match self.config.postgres {
            Some(_) => mosaic_store::postgres::schema::SCHEMA_VERSION,
            None => mosaic_store::sqlite::schema::SCHEMA_VERSION,
        };
        if version != expected {
            problems.push((
                "store schema".to_owned(),
                format!("version {version}, expected {expected}"),
            ));
        }
        let mut integrity = inner.store.integrity_check()?;
        // Each read scope whose stored commitment is not its records' is a
        // finding of its own.
        let scopes = std::mem::take(&mut integrity.scope_commitment_mismatches);
        if !integrity.is_ok() {
            problems.push(("store integrity".to_owned(), format!("{integrity:?}")));
        }
        problems.extend(
            scopes
                .into_iter()
                .map(|finding| ("scope commitment".to_owned(), finding)),
        );
        match inner.store.verify_audit_chain()? {
            mosaic_store::audit::AuditVerification::Intact { .. } => {}
            broken => problems.push(("audit chain".to_owned(), format!("{broken:?}"))),
        }
        if inner.store.enabled_admin_keys()? == 0 {
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
        let problems_found = index_problems(&mut inner, &mut self.write_indexes())?;
        for (record, problem) in problems_found {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// `/health` waits on no request: it answers while every pooled read
    /// connection is taken and an outbox pass holds the index write lock.
    #[test]
    fn health_answers_while_the_read_pool_and_the_index_write_lock_are_held()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let service = Service::for_test(dir.path(), |c| c.read_connections = 2)?;
        let core = &service.core;
        let before = core.health()?;
        let held = [core.reader()?, core.reader()?];
        let ix = core.write_indexes();
        let (tx, rx) = std::sync::mpsc::channel();
        let answered = std::thread::scope(|s| {
            s.spawn(|| tx.send(core.health().map(|h| h.status)));
            let answered = rx.recv_timeout(Duration::from_secs(5));
            drop(ix);
            drop(held);
            answered
        });
        match answered {
            Ok(Ok(status)) => assert_eq!(status, before.status),
            other => panic!("health did not answer at once: {other:?}"),
        }
        Ok(())
    }
}
