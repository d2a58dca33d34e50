//! Integration tests of mosaic-store: one binary, one module per area.

mod common;
mod conformance;
mod crash;
mod model;
mod postgres;
mod sqlite;
