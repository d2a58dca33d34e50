//! Incremental index persistence: each accepted record appends a bounded
//! number of bytes to the index journals, whatever the store holds; a
//! revocation rewrites the snapshots so the erased text leaves the index
//! files; a restart replays the journals without a rebuild.

use mosaic_service::api::{RecallRequest, RevokeRequest};
use mosaic_service::examples::workspace_fact;
use mosaic_service::service::ADMIN_KEY_FILE;
use mosaic_service::{Service, ServiceError};

use crate::common::{WORKSPACE, config, distinct_fact, world};

fn journal_bytes(dir: &std::path::Path) -> u64 {
    ["lexical", "vector"]
        .iter()
        .map(|t| {
            std::fs::metadata(dir.join("data/index").join(format!("{t}.journal")))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum()
}

fn index_files_contain(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for entry in std::fs::read_dir(dir.join("data/index")).expect("index dir") {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).expect("read");
        if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            hits.push(path.display().to_string());
        }
    }
    hits
}

#[test]
fn journals_grow_per_record_not_per_store_size_and_survive_a_restart() -> Result<(), ServiceError> {
    let (dir, service, principals) = world().into_service();
    let credential = principals[0].credential.clone();
    let propose = |service: &Service, i: usize| -> Result<String, ServiceError> {
        let fact = distinct_fact(
            &format!("n{i:05}"),
            &format!("note {i:05}: the kettle descaling is due on day {i:05}"),
        );
        let response = service.propose(&credential, &fact)?;
        assert!(response.readable, "{:?}", response.violations);
        Ok(response.record_id)
    };
    // Bytes appended for 20 records at 20 stored, then at 300 stored.
    let mut ids = Vec::new();
    let before = journal_bytes(dir.path());
    for i in 0..20 {
        ids.push(propose(&service, i)?);
    }
    let first = journal_bytes(dir.path()) - before;
    for i in 20..280 {
        ids.push(propose(&service, i)?);
    }
    let counted = |name: &str| crate::common::counter(&service.metrics().render(), name);
    let (before, counted_before) = (
        journal_bytes(dir.path()),
        counted("mosaic_index_journal_bytes_total"),
    );
    for i in 280..300 {
        ids.push(propose(&service, i)?);
    }
    let last = journal_bytes(dir.path()) - before;
    // What index persistence writes is counted for `/metrics`: every
    // journal byte appended, and each snapshot as the files it wrote.
    assert_eq!(
        counted("mosaic_index_journal_bytes_total") - counted_before,
        last
    );
    assert!(first > 0, "the journals were not written");
    assert_eq!(
        first, last,
        "bytes per record depend on the store size ({first} at 20 records, {last} at 300)"
    );
    let before = counted("mosaic_index_snapshot_bytes_total");
    service.flush()?;
    let snapshots: u64 = std::fs::read_dir(dir.path().join("data/index"))
        .expect("index dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e != "journal"))
        .map(|path| std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0))
        .sum();
    assert!(snapshots > 0, "no snapshot was written");
    assert_eq!(
        counted("mosaic_index_snapshot_bytes_total") - before,
        snapshots
    );
    // A revocation: after reconcile no index file holds the text.
    let gone = format!(
        "note 00007: the kettle descaling is due on day 00007 ({}).",
        crate::common::distinct("n00007")
    );
    let gone = gone.as_str();
    assert!(!index_files_contain(dir.path(), gone).is_empty());
    service.revoke(&credential, &ids[7], &RevokeRequest::default())?;
    service.reconcile()?;
    assert_eq!(index_files_contain(dir.path(), gone), Vec::<String>::new());
    // A restart replays the journals: every live record is recalled and
    // the index agrees with the store.
    drop(service);
    let (service, _) = Service::open(config(dir.path()))?;
    let credential = service.authenticate(Some(&principals[0].key))?;
    let recalled = service.recall(
        &credential,
        &RecallRequest {
            workspace_id: Some(WORKSPACE.to_owned()),
            query: Some("note 00299 kettle".to_owned()),
            max_records: Some(3),
            ..RecallRequest::default()
        },
    )?;
    assert_eq!(recalled.selected_record_ids.first(), Some(&ids[299]));
    assert_eq!(service.doctor()?, Vec::<(String, String)>::new());
    Ok(())
}

/// The top records of one recall, by id.
fn top(service: &Service, key: &str, query: &str) -> Result<Vec<String>, ServiceError> {
    let credential = service.authenticate(Some(key))?;
    Ok(service
        .recall(
            &credential,
            &RecallRequest {
                workspace_id: Some(WORKSPACE.to_owned()),
                query: Some(query.to_owned()),
                max_records: Some(5),
                ..RecallRequest::default()
            },
        )?
        .selected_record_ids)
}

/// Waits (bounded) until the background absorber has linked every vector.
fn absorbed(service: &Service) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while service.vector_graph_pending() > 0 {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

#[test]
fn a_restart_attaches_the_saved_graph_and_never_one_that_does_not_fit() -> Result<(), ServiceError>
{
    let (dir, service, principals) = world().into_service();
    let key = principals[0].key.clone();
    let credential = principals[0].credential.clone();
    let propose = |service: &Service, credential: &_, i: usize| -> Result<(), ServiceError> {
        let fact = workspace_fact(
            &format!("g{i:03}"),
            WORKSPACE,
            &format!(
                "heron {i:03} waits by the north jetty ({}).",
                crate::common::distinct(&format!("g{i:03}"))
            ),
        );
        assert!(service.propose(credential, &fact)?.readable);
        Ok(())
    };
    for i in 0..40 {
        propose(&service, &credential, i)?;
    }
    let query = "heron 017 north jetty";
    let want = top(&service, &key, query)?;
    assert_eq!(want.len(), 5);
    // The shutdown save writes the graph beside the vectors; the restart
    // attaches it: nothing is left to link.
    drop(service);
    let graph = dir.path().join("data/index/vector.graph");
    let saved = std::fs::read(&graph).expect("the graph was saved");
    let (service, _) = Service::open(config(dir.path()))?;
    assert!(service.restored_vector_graph());
    assert_eq!(service.vector_graph_pending(), 0);
    assert_eq!(top(&service, &key, query)?, want);
    drop(service);

    // A corrupt graph is refused (service layer: the graph is not
    // attached): every vector is searched exactly, then linked in the
    // background, and the answers do not change.
    let mut corrupt = saved.clone();
    let at = corrupt.len() - 2;
    corrupt[at] ^= 0x40;
    std::fs::write(&graph, &corrupt).expect("write");
    let (service, _) = Service::open(config(dir.path()))?;
    assert!(!service.restored_vector_graph());
    assert_eq!(top(&service, &key, query)?, want);
    assert!(absorbed(&service), "the vectors were never linked");
    assert_eq!(top(&service, &key, query)?, want);
    assert_eq!(service.doctor()?, Vec::<(String, String)>::new());
    // The linked graph was saved (no record was written meanwhile): the
    // next restart attaches it.
    drop(service);
    assert_ne!(std::fs::read(&graph).expect("graph"), corrupt);
    let (service, _) = Service::open(config(dir.path()))?;
    assert!(service.restored_vector_graph());
    assert_eq!(top(&service, &key, query)?, want);
    // More records change the vectors: the next save's graph is bound to
    // them, so the earlier graph put back in its place does not fit.
    let credential = service.authenticate(Some(&key))?;
    for i in 40..45 {
        propose(&service, &credential, i)?;
    }
    let want = top(&service, &key, query)?;
    drop(service);
    std::fs::write(&graph, &saved).expect("write");
    let (service, _) = Service::open(config(dir.path()))?;
    assert!(!service.restored_vector_graph());
    assert_eq!(top(&service, &key, query)?, want);
    assert!(absorbed(&service), "the vectors were never linked");
    Ok(())
}

/// The service's writer runs no checkpoint: its log grows past SQLite's
/// automatic threshold with nothing copied, left to the checkpointer
/// (which starts at 64 MiB). Were the writer's automatic checkpoint on,
/// the log would be copied and start over at about 1,000 frames.
#[test]
fn the_writer_leaves_its_log_to_the_checkpointer() -> Result<(), ServiceError> {
    let (dir, service, principals) = world().into_service();
    let credential = principals[0].credential.clone();
    let store = dir.path().join("data/store.sqlite");
    let log = rusqlite::Connection::open(&store).expect("open");
    let frames = || -> (i64, i64) {
        log.query_row("PRAGMA wal_checkpoint(NOOP)", [], |r| {
            Ok((r.get(1)?, r.get(2)?))
        })
        .expect("noop")
    };
    let past = mosaic_store::sqlite::WAL_CHECKPOINT_PAGES + 500;
    let mut i = 0;
    while frames().0 < past {
        assert!(
            i < 2_000,
            "the log never grew past {past} frames: {:?}",
            frames()
        );
        let fact = distinct_fact(
            &format!("w{i:05}"),
            &format!("note {i:05}: the boiler check is due on day {i:05}"),
        );
        assert!(service.propose(&credential, &fact)?.readable);
        i += 1;
    }
    let (log_frames, copied) = frames();
    assert_eq!(
        copied, 0,
        "{log_frames} frames, {copied} copied by the writer"
    );
    Ok(())
}

/// A leaked admin key's emergency stop (README, "Using the service"):
/// disabling it with the key itself refuses it at once, and the next
/// start, finding no enabled admin key, writes a new one that works. The
/// layers: the key directory (the disabled row) and the bootstrap at open.
#[test]
fn a_disabled_admin_key_is_refused_at_once_and_the_next_start_writes_a_new_one()
-> Result<(), ServiceError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("data").join(ADMIN_KEY_FILE);
    let read = || {
        std::fs::read_to_string(&path)
            .expect("admin key file")
            .trim()
            .to_owned()
    };
    let (service, _) = Service::open(config(dir.path()))?;
    let old = read();
    let admin = service.authenticate(Some(&old))?;
    service.disable_key(&admin, admin.key_id())?;
    assert!(matches!(
        service.authenticate(Some(&old)),
        Err(ServiceError::InvalidKey)
    ));
    drop(service);
    let (service, report) = Service::open(config(dir.path()))?;
    assert_eq!(report.admin_key_file.as_deref(), Some(path.as_path()));
    let new = read();
    assert_ne!(new, old);
    let admin = service.authenticate(Some(&new))?;
    let keys = service.list_keys(&admin)?;
    let mut admins: Vec<bool> = keys
        .iter()
        .filter(|k| k.role == "admin")
        .map(|k| k.disabled)
        .collect();
    admins.sort();
    assert_eq!(admins, [false, true], "the new key and the disabled one");
    assert!(matches!(
        service.authenticate(Some(&old)),
        Err(ServiceError::InvalidKey)
    ));
    Ok(())
}
