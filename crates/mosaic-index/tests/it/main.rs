//! Integration tests of mosaic-index (one binary).

mod common;
mod embedders;
mod funnel;
mod graph;
mod hygiene;
mod journal;
mod lexical;
mod outbox;
mod passages;
mod prepared;
mod snapshot;
mod vector_recall;

/// Skipped suites, listed after the test command (`testing/skip.rs`).
#[path = "../../../../testing/skip.rs"]
mod skip;
