//! The PostgreSQL backend: the conformance suite and row-level security,
//! against a real server.
//!
//! The server comes from the environment: `MOSAIC_TEST_POSTGRES_URL` (a
//! superuser, used only to create and drop one schema per test and to run
//! the migration as the owner) and `MOSAIC_TEST_POSTGRES_APP_URL` (the
//! application role the store connects as). `scripts/with-postgres.sh`
//! starts a throwaway server and sets both. Without them the tests report
//! themselves skipped and pass, except under `CI=true`, where a missing
//! server fails them: CI can never skip them silently.

#[cfg(feature = "postgres")]
mod conformance;
#[cfg(feature = "postgres")]
mod rls;

/// What the environment says about the PostgreSQL tests.
#[derive(Debug, PartialEq, Eq)]
pub enum PgTarget {
    /// Run against these URLs.
    Run {
        /// Superuser (setup, migration as owner, cleanup).
        admin_url: String,
        /// Application role (what the store connects as).
        app_url: String,
    },
    /// No server: skip.
    Skip,
}

/// The decision table: both URLs run; none skips, unless under CI; half a
/// configuration is always an error.
pub fn pg_target(
    admin_url: Option<String>,
    app_url: Option<String>,
    ci: Option<String>,
) -> Result<PgTarget, String> {
    let under_ci = ci.is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    match (admin_url, app_url) {
        (Some(admin_url), Some(app_url)) => Ok(PgTarget::Run { admin_url, app_url }),
        (None, None) if !under_ci => Ok(PgTarget::Skip),
        (None, None) => Err(
            "CI=true but MOSAIC_TEST_POSTGRES_URL is not set: run the tests under scripts/with-postgres.sh"
                .into(),
        ),
        (Some(_), None) => Err("MOSAIC_TEST_POSTGRES_URL is set but MOSAIC_TEST_POSTGRES_APP_URL is not".into()),
        (None, Some(_)) => Err("MOSAIC_TEST_POSTGRES_APP_URL is set but MOSAIC_TEST_POSTGRES_URL is not".into()),
    }
}

/// [`pg_target`] from the process environment; panics on an error.
#[cfg(feature = "postgres")]
pub fn pg_target_from_env() -> PgTarget {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match pg_target(
        var("MOSAIC_TEST_POSTGRES_URL"),
        var("MOSAIC_TEST_POSTGRES_APP_URL"),
        var("CI"),
    ) {
        Ok(PgTarget::Skip) => {
            crate::skip::skipped(
                "mosaic-store PostgreSQL tests",
                "MOSAIC_TEST_POSTGRES_URL is not set",
                "run the command under scripts/with-postgres.sh, without MOSAIC_SKIP_POSTGRES=1 (it starts a throwaway PostgreSQL)",
            );
            PgTarget::Skip
        }
        Ok(target) => target,
        Err(problem) => panic!("{problem}"),
    }
}

#[test]
fn missing_postgres_skips_locally_and_fails_under_ci() {
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(pg_target(None, None, None), Ok(PgTarget::Skip));
    assert_eq!(pg_target(None, None, some("false")), Ok(PgTarget::Skip));
    assert!(pg_target(None, None, some("true")).is_err());
    assert!(pg_target(None, None, some("1")).is_err());
    assert!(pg_target(some("postgres://a"), None, None).is_err());
    assert!(pg_target(None, some("postgres://b"), None).is_err());
    assert_eq!(
        pg_target(some("postgres://a"), some("postgres://b"), some("true")),
        Ok(PgTarget::Run {
            admin_url: "postgres://a".into(),
            app_url: "postgres://b".into(),
        })
    );
}

/// Built without the backend, CI must notice rather than pass.
#[cfg(not(feature = "postgres"))]
#[test]
fn postgres_backend_is_built_under_ci() {
    let under_ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    assert!(
        !under_ci,
        "CI=true but mosaic-store was built without its `postgres` feature"
    );
    crate::skip::skipped(
        "mosaic-store PostgreSQL backend",
        "mosaic-store was built without its `postgres` feature",
        "cargo test --workspace (the workspace turns the feature on)",
    );
}

#[cfg(feature = "postgres")]
pub use factory::{PgDb, PgFactory};

#[cfg(feature = "postgres")]
mod factory {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{SystemTime, UNIX_EPOCH};

    use mosaic_store::conformance::StoreFactory;
    use mosaic_store::postgres::schema::{self, quote_identifier};
    use mosaic_store::{PostgresStore, StoreConfig, StoreError, StoreResult};
    use postgres::{Client, NoTls};

    use super::{PgTarget, pg_target_from_env};

    /// One schema per fresh database, created as the superuser (who owns
    /// the tables), used by the application role.
    pub struct PgFactory {
        pub admin_url: String,
        pub app_url: String,
        pub app_role: String,
    }

    /// One schema; dropped with everything in it when this is dropped.
    pub struct PgDb {
        pub schema: String,
        admin_url: String,
    }

    fn backend(e: impl std::fmt::Display) -> StoreError {
        StoreError::Backend(e.to_string())
    }

    impl PgFactory {
        /// The factory, or `None` (after printing the skip line) when no
        /// server is configured and this is not CI.
        pub fn from_env() -> Option<PgFactory> {
            match pg_target_from_env() {
                PgTarget::Skip => None,
                PgTarget::Run { admin_url, app_url } => {
                    let app_role = app_url
                        .parse::<postgres::Config>()
                        .ok()
                        .and_then(|c| c.get_user().map(str::to_owned))
                        .unwrap_or_else(|| panic!("MOSAIC_TEST_POSTGRES_APP_URL names no user"));
                    Some(PgFactory {
                        admin_url,
                        app_url,
                        app_role,
                    })
                }
            }
        }

        /// A schema with nothing in it (not migrated).
        pub fn fresh_empty(&self) -> StoreResult<PgDb> {
            let schema = unique_schema();
            let mut admin = Client::connect(&self.admin_url, NoTls)?;
            admin.batch_execute(&format!("CREATE SCHEMA {}", quote_identifier(&schema)))?;
            Ok(PgDb {
                schema,
                admin_url: self.admin_url.clone(),
            })
        }

        /// A superuser connection with `db`'s schema as `search_path`.
        pub fn admin(&self, db: &PgDb) -> StoreResult<Client> {
            connect_in(&self.admin_url, &db.schema, "")
        }

        /// A raw application-role connection with `db`'s schema as
        /// `search_path`.
        pub fn app(&self, db: &PgDb) -> StoreResult<Client> {
            connect_in(&self.app_url, &db.schema, "")
        }

        /// A store whose session carries extra `-c` options.
        pub fn connect_with_options(
            &self,
            db: &PgDb,
            config: &StoreConfig,
            options: &str,
        ) -> StoreResult<PostgresStore> {
            PostgresStore::open(
                connect_in(&self.app_url, &db.schema, options)?,
                config.clone(),
            )
        }
    }

    /// A schema name no other test (or test process) uses.
    fn unique_schema() -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        format!(
            "mosaic_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn connect_in(url: &str, schema: &str, extra: &str) -> StoreResult<Client> {
        let mut config: postgres::Config = url.parse().map_err(backend)?;
        config.options(&format!("-c search_path={schema} {extra}"));
        Ok(config.connect(NoTls)?)
    }

    impl StoreFactory for PgFactory {
        type Store = PostgresStore;
        type Db = PgDb;

        fn fresh(&self) -> StoreResult<PgDb> {
            let db = self.fresh_empty()?;
            let mut owner = self.admin(&db)?;
            schema::migrate(&mut owner)?;
            schema::grant_application_role(&mut owner, &self.app_role)?;
            Ok(db)
        }

        fn connect(&self, db: &PgDb, config: &StoreConfig) -> StoreResult<PostgresStore> {
            self.connect_with_options(db, config, "")
        }

        fn execute_as_owner(&self, db: &PgDb, sql: &str) -> StoreResult<()> {
            self.admin(db)?
                .batch_execute(sql)
                .map_err(|e| mosaic_store::StoreError::Backend(e.to_string()))
        }
    }

    impl Drop for PgDb {
        fn drop(&mut self) {
            let dropped = Client::connect(&self.admin_url, NoTls).and_then(|mut admin| {
                admin.batch_execute(&format!(
                    "DROP SCHEMA IF EXISTS {} CASCADE",
                    quote_identifier(&self.schema)
                ))
            });
            if let Err(e) = dropped {
                eprintln!("could not drop test schema {}: {e}", self.schema);
            }
        }
    }
}
