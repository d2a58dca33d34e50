//! Bulk work yields the CPU to the HTTP front.
//!
//! The tokio worker threads accept connections, parse requests, answer
//! `/health` and write responses; each takes microseconds. The rest of a
//! request (embedding, ranking, the write gate, commits) runs on the
//! blocking pool, beside the outbox worker, the graph linker and the
//! threads that embed ahead. On a machine with few cores those keep every
//! core busy under load, and a worker woken by a new connection or a
//! `/health` probe would wait its turn behind them. So every thread of
//! bulk work lowers its own scheduling priority by [`BULK_NICENESS`]
//! below the process's when it starts: between bulk threads nothing
//! changes (they are all lowered alike), and the front, which uses little
//! CPU, gets a core as soon as it wakes. Linux only (a thread's nice value
//! is its own there); a no-op elsewhere, and when lowering fails. The
//! main thread never runs bulk work, so its nice value is the process's.

use std::cell::Cell;

/// How much lower than the process a bulk thread runs (nice steps: each
/// is about 1.25x less CPU weight, so 5 is about a third of the weight).
pub const BULK_NICENESS: i32 = 5;

thread_local! {
    static LOWERED: Cell<bool> = const { Cell::new(false) };
}

/// Lowers the calling thread's priority to [`BULK_NICENESS`] below the
/// process's main thread, once per thread (later calls do nothing; pooled
/// threads call it per task). A thread spawned by a bulk thread inherits
/// its priority, and lowering it again leaves it there.
pub fn bulk_thread() {
    if LOWERED.with(|lowered| lowered.replace(true)) {
        return;
    }
    lower_this_thread(BULK_NICENESS);
}

#[cfg(target_os = "linux")]
fn lower_this_thread(by: i32) {
    use rustix::process::{getpid, getpriority_process, setpriority_process};
    // The main thread's id is the process id, and it is never lowered:
    // relative to it, an operator's own `nice` stays in force.
    let (Ok(base), tid) = (
        getpriority_process(Some(getpid())),
        Some(rustix::thread::gettid()),
    ) else {
        return;
    };
    let target = (base + by).min(19);
    if getpriority_process(tid).is_ok_and(|now| now < target) {
        let _ = setpriority_process(tid, target);
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_this_thread(_by: i32) {}

/// The calling thread's nice value (Linux), for tests.
#[cfg(all(test, target_os = "linux"))]
fn niceness() -> i32 {
    rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap_or(i32::MIN)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn joined<T>(handle: std::thread::JoinHandle<T>) -> Result<T, String> {
        handle.join().map_err(|_| "the thread panicked".to_owned())
    }

    #[test]
    fn a_bulk_thread_runs_lower_than_the_rest_and_is_lowered_once() -> Result<(), String> {
        let main = rustix::process::getpriority_process(Some(rustix::process::getpid()))
            .map_err(|e| e.to_string())?;
        let target = (main + BULK_NICENESS).min(19);
        let (front, bulk, again, spawned) = joined(std::thread::spawn(|| {
            let front = niceness();
            bulk_thread();
            let bulk = niceness();
            bulk_thread();
            let again = niceness();
            // A thread it spawns inherits the priority; lowering it again
            // leaves it there.
            let spawned = joined(std::thread::spawn(|| {
                bulk_thread();
                niceness()
            }));
            (front, bulk, again, spawned)
        }))?;
        assert_eq!(front, main);
        assert_eq!(bulk, target);
        assert_eq!(again, target, "lowered once per thread");
        assert_eq!(spawned?, target, "not lowered twice");
        // Other threads keep their priority.
        assert_eq!(joined(std::thread::spawn(niceness))?, main);
        Ok(())
    }
}
