//! The background checkpointer: copies the SQLite write-ahead log of the
//! store into its file from a connection of its own, so the committing
//! writer never runs a checkpoint.
//!
//! Why: a commit writes every page it touched to the log; a checkpoint
//! writes each logged page to the file once, however many commits touched
//! it in between. A long log therefore writes fewer bytes per record (a
//! page of a digest-keyed index takes many records between two
//! checkpoints), but when the committing writer runs the checkpoint, as
//! SQLite's automatic checkpoint does, a long log stalls it. Here the
//! writer's connections have automatic checkpoints off and this thread
//! checkpoints once [`CHECKPOINT_FRAMES`] frames are waiting, `PASSIVE`
//! (it never waits for, nor blocks, readers or the writer). The log starts
//! over (SQLite restarts it) only at a commit after a checkpoint that
//! copied all of it, which commits that never pause do not allow: so the
//! thread then copies what was committed meanwhile, `PASSIVE` again while
//! much is left, and once at most [`RESIDUE_FRAMES`] are (SQLite's own
//! automatic threshold) with a `RESTART` checkpoint, which waits for the
//! writer (bounded by [`RESTART_WAIT`]) and makes the log start over.
//! Should the writer outrun the copying to [`RESTART_FRAMES`], a `RESTART`
//! checkpoint copies whatever is left.
//!
//! Durability is the log's whatever this thread does: a commit is synced to
//! the log before it returns; a crash leaves frames in the log that the
//! next open reads. Erasure truncates the logs itself (`persistence.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::*;

/// Frames (pages) waiting in a log before a checkpoint starts: 64 MiB of
/// 4 KiB pages.
pub(super) const CHECKPOINT_FRAMES: i64 = 16_384;

/// Frames left to copy after a checkpoint at which the next one waits for
/// the writer, so that the log starts over: SQLite's own automatic
/// checkpoint threshold, so the writer waits no longer than it did when it
/// checkpointed itself. Commits that never pause would otherwise keep a
/// few frames ahead of every `PASSIVE` checkpoint, and the log would never
/// start over.
pub(super) const RESIDUE_FRAMES: i64 = mosaic_store::sqlite::WAL_CHECKPOINT_PAGES;

/// Frames in a log at which a checkpoint waits for the writer whatever is
/// left (256 MiB): a bound on the log's size should the writer outrun the
/// copying.
pub(super) const RESTART_FRAMES: i64 = 4 * CHECKPOINT_FRAMES;

/// The size a log file is cut back to when it starts over (bytes): the
/// log is reused, not grown again, below it.
pub(super) const LOG_FILE_LIMIT: i64 = CHECKPOINT_FRAMES * 4096;

/// When the checkpointer copies a log, in frames.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Waiting frames that start a checkpoint.
    pub checkpoint: i64,
    /// Frames left after a checkpoint below which the next one waits for
    /// the writer.
    pub residue: i64,
    /// Frames at which a checkpoint waits for the writer.
    pub restart: i64,
}

/// The limits the service runs with.
pub(super) const LIMITS: Limits = Limits {
    checkpoint: CHECKPOINT_FRAMES,
    residue: RESIDUE_FRAMES,
    restart: RESTART_FRAMES,
};

/// How long a `RESTART` checkpoint waits for the writer and readers.
const RESTART_WAIT: Duration = Duration::from_secs(2);

/// How long the checkpointer sleeps when no commit wakes it. Proposals'
/// commits and outbox passes' acknowledgements wake it; other writes
/// (administration, revocations) are seen at the latest after this.
const IDLE: Duration = Duration::from_secs(1);

/// What the checkpointer does with a log of `frames` frames of which
/// `copied` are in the file already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Nothing: too little waiting, or all of it copied (the next commit
    /// starts the log over).
    Wait,
    /// Copy what no reader still needs, without waiting for anyone.
    Passive,
    /// Copy everything, waiting for the writer, and start the log over.
    Restart,
}

pub(super) fn step(frames: i64, copied: i64, limits: Limits) -> Step {
    if copied > 0 && frames == copied {
        // All copied, however long: nothing to do until a commit.
        Step::Wait
    } else if frames >= limits.restart {
        Step::Restart
    } else if copied > 0 && frames > copied {
        // Catching up on what was committed during the last checkpoint:
        // once little is left, copy it waiting for the writer, so the log
        // starts over at its next commit.
        if frames - copied <= limits.residue {
            Step::Restart
        } else {
            Step::Passive
        }
    } else if copied <= 0 && frames >= limits.checkpoint {
        Step::Passive
    } else {
        Step::Wait
    }
}

/// One log the checkpointer looks after.
struct Log {
    /// For metrics: `store`.
    name: &'static str,
    conn: rusqlite::Connection,
}

impl Log {
    /// `PRAGMA wal_checkpoint(mode)`: (busy, frames in the log, frames
    /// copied to the file).
    fn checkpoint(&self, mode: &str) -> rusqlite::Result<(i64, i64, i64)> {
        self.conn
            .query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
    }

    fn tend(&self, limits: Limits, metrics: &Metrics) -> rusqlite::Result<()> {
        let (_, frames, copied) = self.checkpoint("NOOP")?;
        let mode = match step(frames, copied, limits) {
            Step::Wait => return Ok(()),
            Step::Passive => "PASSIVE",
            Step::Restart => "RESTART",
        };
        let (busy, _, _) = self.checkpoint(mode)?;
        metrics.incr(
            "mosaic_wal_checkpoints_total",
            &[
                ("file", self.name),
                ("mode", mode),
                ("outcome", if busy == 0 { "done" } else { "busy" }),
            ],
        );
        Ok(())
    }
}

/// Starts the checkpointer for `files` (a name for metrics, the database
/// file); it stops with the service.
pub(super) fn spawn_checkpointer(
    core: Arc<ServiceCore>,
    files: [(&'static str, PathBuf); 1],
) -> ServiceResult<std::thread::JoinHandle<()>> {
    let mut logs = Vec::with_capacity(files.len());
    for (name, path) in files {
        let conn = rusqlite::Connection::open(&path)?;
        // Only a RESTART checkpoint waits; PASSIVE never calls the busy
        // handler.
        conn.busy_timeout(RESTART_WAIT)?;
        logs.push(Log { name, conn });
    }
    std::thread::Builder::new()
        .name("mosaic-checkpoint".to_owned())
        .spawn(move || {
            crate::priority::bulk_thread();
            // Whether the last attempt on each log failed: a failure is
            // logged once, not at every wake.
            let mut failing = vec![false; logs.len()];
            while !core.progress.stopped() {
                for (log, failing) in logs.iter().zip(failing.iter_mut()) {
                    // Nothing else checkpoints these logs, so a panic must
                    // not end the thread.
                    let tended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        log.tend(LIMITS, &core.metrics)
                    }));
                    let error = match tended {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(e.to_string()),
                        Err(_) => Some("the checkpoint panicked".to_owned()),
                    };
                    match error {
                        None => *failing = false,
                        Some(e) => {
                            // A busy database or a full disk: the writer
                            // goes on (its log grows) and the next wake
                            // tries again.
                            core.metrics.incr(
                                "mosaic_wal_checkpoint_failures_total",
                                &[("file", log.name)],
                            );
                            if !*failing {
                                tracing::warn!(file = log.name, error = %e, "a checkpoint failed");
                            }
                            *failing = true;
                        }
                    }
                }
                // Looking at a log is cheap (a `NOOP` checkpoint reads
                // its length from the shared index, without I/O), so it is
                // done after every commit.
                core.log_wake.wait(IDLE);
            }
        })
        .map_err(|e| ServiceError::Internal(format!("cannot start the checkpointer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(frames: i64, copied: i64) -> Step {
        step(frames, copied, LIMITS)
    }

    #[test]
    fn a_short_log_waits_and_a_long_one_is_copied() {
        assert_eq!(at(0, 0), Step::Wait);
        assert_eq!(at(CHECKPOINT_FRAMES - 1, 0), Step::Wait);
        assert_eq!(at(CHECKPOINT_FRAMES, 0), Step::Passive);
    }

    #[test]
    fn after_a_checkpoint_what_was_committed_meanwhile_is_copied_until_the_log_starts_over() {
        // Copied in full: the next commit starts the log over.
        assert_eq!(at(CHECKPOINT_FRAMES, CHECKPOINT_FRAMES), Step::Wait);
        // Much committed meanwhile: copy it without waiting for anyone.
        let much = CHECKPOINT_FRAMES + RESIDUE_FRAMES + 1;
        assert_eq!(at(much, CHECKPOINT_FRAMES), Step::Passive);
        // Little: copy it waiting for the writer, so the log starts over.
        assert_eq!(at(much, much - RESIDUE_FRAMES), Step::Restart);
        assert_eq!(at(much, much - 1), Step::Restart);
    }

    #[test]
    fn a_log_that_writes_outran_starts_over_waiting_for_the_writer() {
        assert_eq!(at(RESTART_FRAMES, RESTART_FRAMES - 10), Step::Restart);
        assert_eq!(at(RESTART_FRAMES, 0), Step::Restart);
        // An idle log copied in full waits, however long it is.
        assert_eq!(at(RESTART_FRAMES, RESTART_FRAMES), Step::Wait);
    }

    /// Against SQLite itself: a writer without automatic checkpoints, the
    /// checkpointer's connection copying its log, and the log starting
    /// over at the writer's next commit.
    #[test]
    fn the_writers_log_is_copied_by_the_checkpointer_and_starts_over()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("t.sqlite");
        let writer = rusqlite::Connection::open(&path)?;
        let _: String = writer.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        writer.pragma_update(None, "wal_autocheckpoint", 0)?;
        writer.execute_batch("CREATE TABLE t (k BLOB PRIMARY KEY, v BLOB)")?;
        let commit = |n: usize| -> rusqlite::Result<()> {
            for _ in 0..n {
                writer.execute("INSERT INTO t VALUES (randomblob(32), zeroblob(3000))", [])?;
            }
            Ok(())
        };
        let log = Log {
            name: "test",
            conn: rusqlite::Connection::open(&path)?,
        };
        let limits = Limits {
            checkpoint: 64,
            residue: 16,
            restart: 100_000,
        };
        let metrics = Metrics::default();
        commit(10)?;
        let (_, short, copied) = log.checkpoint("NOOP")?;
        assert!(short > 0 && short < limits.checkpoint, "{short}");
        assert_eq!(copied, 0);
        log.tend(limits, &metrics)?;
        assert_eq!(log.checkpoint("NOOP")?.2, 0, "too short to copy");
        // The writer's commits alone never copy the log.
        commit(80)?;
        let (_, long, copied) = log.checkpoint("NOOP")?;
        assert!(long >= limits.checkpoint, "{long}");
        assert_eq!(copied, 0, "the writer ran no checkpoint");
        log.tend(limits, &metrics)?;
        let (_, frames, copied) = log.checkpoint("NOOP")?;
        assert_eq!((frames, copied), (long, long), "copied in full");
        // The next commit starts the log over.
        commit(1)?;
        let (_, frames, copied) = log.checkpoint("NOOP")?;
        assert!(frames < limits.checkpoint, "started over: {frames}");
        assert_eq!(copied, 0);
        // Frames a checkpoint could not copy (here: newer than a reader's
        // snapshot, as commits during a checkpoint are): the few left are
        // copied waiting for the writer, and the log starts over.
        commit(80)?;
        let reader = rusqlite::Connection::open(&path)?;
        reader.execute_batch("BEGIN")?;
        let _: i64 = reader.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
        commit(2)?;
        log.tend(limits, &metrics)?;
        reader.execute_batch("COMMIT")?;
        let (_, frames, copied) = log.checkpoint("NOOP")?;
        assert!(
            frames > copied && copied > 0 && frames - copied <= limits.residue,
            "{frames} {copied}"
        );
        log.tend(limits, &metrics)?;
        assert_eq!(log.checkpoint("NOOP")?.2, frames, "the rest copied");
        commit(1)?;
        let (_, frames, copied) = log.checkpoint("NOOP")?;
        assert!(frames < limits.checkpoint, "started over: {frames}");
        assert_eq!(copied, 0);
        let text = metrics.render();
        for line in [
            "mosaic_wal_checkpoints_total{file=\"test\",mode=\"PASSIVE\",outcome=\"done\"} 2",
            "mosaic_wal_checkpoints_total{file=\"test\",mode=\"RESTART\",outcome=\"done\"} 1",
        ] {
            assert!(text.contains(line), "{text}");
        }
        Ok(())
    }
}
