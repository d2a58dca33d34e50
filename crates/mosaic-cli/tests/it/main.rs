//! Integration tests of the service, its transports and the `mosaic`
//! binary: one test binary, one module per concern.

mod addresses;
mod application_keys;
mod audit_proofs;
mod audit_witness;
mod chaos;
mod claims;
mod cli;
mod clients;
mod common;
mod concurrency;
mod console;
mod conversation;
mod crash;
mod degraded;
mod deploy;
mod embedder;
mod erasure_bytes;
mod error_codes;
mod errors;
mod eval;
mod evidence;
mod expiry;
mod export_import;
mod extraction;
mod fuzz;
mod http_embedder;
mod hygiene;
mod isolation;
mod lifecycle;
mod load;
mod mcp;
mod mcp_relay;
mod mem0;
mod metrics_access;
mod numbers;
mod openapi;
mod oracles;
mod persistence;
mod poisoning;
mod policy_carry;
mod postgres;
mod postgres_addresses;
mod postgres_erasure;
mod postgres_reads;
mod postgres_upgrade;
mod receipt_signatures;
mod reconcile;
mod review;
mod roundtrip;
mod scope_commitments;
mod scope_reads;
mod upgrade;

/// Skipped suites, listed after the test command (`testing/skip.rs`).
#[path = "../../../../testing/skip.rs"]
mod skip;
