//! # mosaic-harness
//!
//! The deterministic core of Mosaic Memory: typed memory records, the scoped
//! read selector ([`memory_scope`]), the verified write gate
//! ([`memory_write`]), their receipts, and the canonical encoding every
//! digest is computed over ([`canonical`]).
//!
//! This crate performs **no I/O**: it reads no files, clock, environment or
//! randomness, opens no sockets and runs no async code. Callers pass `now`,
//! identities and every independent judgment in as values. The same inputs
//! always give the same decisions and the same bytes, in any input order.
//!
//! Non-features: storage, indexing, embedding and transport live in the
//! outer crates (`mosaic-store`, `mosaic-index`, `mosaic-service`, `mosaic-server`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod canonical;
mod canonical_ser;
pub mod filter;
pub mod fixtures;
pub mod memory_scope;
pub mod memory_write;
pub mod merkle;
pub mod receipt_signature;
pub mod record;

pub use record::{
    InvalidField, MEMORY_SCHEMA_VERSION, MemoryAddress, MemoryKind, MemoryMetadata, MemoryRecord,
    MemorySource, MemoryStatus, MemorySubject, SummaryDescriptor,
};
