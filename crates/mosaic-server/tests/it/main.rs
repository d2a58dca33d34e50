//! Integration tests of mosaic-server: one binary, one module per concern.

mod audit_witness;
mod chaos;
mod cli;
mod clients;
mod common;
mod concurrency;
mod conversation;
mod degraded;
mod deploy;
mod embedder;
mod error_codes;
mod errors;
mod eval;
mod evidence;
mod hygiene;
mod isolation;
mod lifecycle;
mod load;
mod mcp;
mod openapi;
mod persistence;
mod postgres;
mod reconcile;
mod review;
mod roundtrip;
mod store_truth;
