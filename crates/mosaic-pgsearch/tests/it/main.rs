//! Integration tests: the retrieval conformance suite against the in-memory
//! targets and against PostgreSQL, and PostgreSQL-only guarantees.

mod memory;
mod postgres;

/// Skipped suites, listed after the test command (`testing/skip.rs`).
#[path = "../../../../testing/skip.rs"]
mod skip;
