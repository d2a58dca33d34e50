//! Time is always injected. The core never reads a clock; it offers a
//! [`Clock`] trait for callers and a [`ManualClock`] for tests.

/// A source of "now" in Unix milliseconds.
pub trait Clock {
    /// The current instant.
    fn now_unix_ms(&self) -> u64;
}

/// A clock that only moves when told to. Deterministic by construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManualClock {
    now_unix_ms: u64,
}

impl ManualClock {
    /// A clock stopped at `now_unix_ms`.
    pub fn at(now_unix_ms: u64) -> Self {
        ManualClock { now_unix_ms }
    }

    /// Moves the clock forward by `delta_ms`, saturating at `u64::MAX`.
    pub fn advance(&mut self, delta_ms: u64) {
        self.now_unix_ms = self.now_unix_ms.saturating_add(delta_ms);
    }

    /// Sets the clock to `now_unix_ms` (which may move it backwards, for
    /// replaying an earlier read).
    pub fn set(&mut self, now_unix_ms: u64) {
        self.now_unix_ms = now_unix_ms;
    }
}

impl Clock for ManualClock {
    fn now_unix_ms(&self) -> u64 {
        self.now_unix_ms
    }
}
