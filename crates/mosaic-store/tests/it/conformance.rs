//! The backend-independent suite, run against SQLite: one test per check.

use mosaic_store::conformance::{self, StoreFactory};

use crate::common::SqliteFactory;

conformance_tests!(SqliteFactory, Some(SqliteFactory));

#[test]
fn run_all_passes() {
    let _ = <SqliteFactory as StoreFactory>::fresh(&SqliteFactory).expect("fresh");
    conformance::run_all(&SqliteFactory).expect("suite");
}
