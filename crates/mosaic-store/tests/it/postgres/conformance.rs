//! The backend-independent suite, run against PostgreSQL as the
//! application role: one test per check.

use super::PgFactory;

conformance_tests!(PgFactory, PgFactory::from_env());
