//! Integration tests of mosaic-server: one binary, one module per concern.

mod audit_witness;
mod chaos;
mod cli;
mod common;
mod concurrency;
mod degraded;
mod embedder;
mod erasure_bytes;
mod errors;
mod eval;
mod evidence;
mod hygiene;
mod isolation;
mod lifecycle;
mod load;
mod mcp;
mod numbers;
mod openapi;
mod oracles;
mod persistence;
mod postgres;
mod postgres_erasure;
mod reconcile;
mod review;
mod roundtrip;
mod store_truth;
