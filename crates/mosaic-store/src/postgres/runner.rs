//! The one migration runner of every PostgreSQL component: the store's
//! tables ([`super::schema::migrate`]) and the search tables of
//! `mosaic-pgsearch`, which may share one schema.
//!
//! A component is its ordered steps (`steps[i]` upgrades version `i` to
//! `i + 1`; a step is SQL, optionally followed by code, such as the
//! store's tree builds), its version ledger (a table of one row per
//! applied version, `max(version)` the schema's version) and the name of
//! its advisory lock. [`migrate_in`] applies every missing step in the
//! caller's transaction under the component's transaction-scoped advisory
//! lock (`hashtext(lock || current_schema())`), so two migrators of one
//! schema serialize and a failure leaves it as it was (PostgreSQL DDL is
//! transactional). Before anything is written it refuses a schema newer
//! than the steps ([`Refusal::TooNew`]) and one that holds the component's
//! tables but no ledger ([`Refusal::Unledgered`]).

use postgres::{GenericClient, Transaction};

/// Code a step runs after its SQL, in the migration's transaction.
pub type StepCode<E> = fn(&mut Transaction<'_>) -> Result<(), E>;

/// One migration step: the SQL that brings version `i` to `i + 1`, and
/// the code (if any) that completes it.
pub struct Step<E> {
    /// The statements, run as one batch.
    pub sql: String,
    /// Run after `sql`, before the version is recorded.
    pub then: Option<StepCode<E>>,
}

impl<E> Step<E> {
    /// A step of SQL only.
    pub fn sql(sql: impl Into<String>) -> Step<E> {
        Step {
            sql: sql.into(),
            then: None,
        }
    }

    /// A step of SQL followed by code.
    pub fn sql_then(sql: impl Into<String>, then: StepCode<E>) -> Step<E> {
        Step {
            sql: sql.into(),
            then: Some(then),
        }
    }
}

/// One component's migrations.
pub struct Component<'a, E> {
    /// The version ledger table (created by the first step), e.g.
    /// `schema_migrations`. A constant of the component, never input.
    pub ledger: &'a str,
    /// The advisory lock's name, to which `current_schema()` is appended.
    pub lock: &'a str,
    /// A `LIKE` pattern of the component's table names in
    /// `current_schema()`: any such table without a ledger is refused.
    pub tables: &'a str,
    /// `steps[i]` upgrades version `i` to `i + 1`; the newest version is
    /// `steps.len()`.
    pub steps: Vec<Step<E>>,
}

impl<E> Component<'_, E> {
    /// The newest version the steps reach.
    pub fn newest(&self) -> i64 {
        i64::try_from(self.steps.len()).unwrap_or(i64::MAX)
    }
}

/// Why the runner refused a schema; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The ledger says a version newer than the component's steps reach.
    TooNew {
        /// The ledger's version.
        found: i64,
        /// The newest version of the steps.
        supported: i64,
    },
    /// The ledger holds a negative version.
    Negative(i64),
    /// The schema has the component's tables but no ledger.
    Unledgered {
        /// The missing ledger table.
        ledger: String,
    },
}

/// Refuses a stored version newer than `supported` or negative.
pub fn check_version(found: i64, supported: i64) -> Result<(), Refusal> {
    if found > supported {
        return Err(Refusal::TooNew { found, supported });
    }
    if found < 0 {
        return Err(Refusal::Negative(found));
    }
    Ok(())
}

/// The version in `ledger`, `None` when `current_schema()` has no such
/// table.
pub fn ledger_version(
    client: &mut impl GenericClient,
    ledger: &str,
) -> Result<Option<i64>, postgres::Error> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass(quote_ident(current_schema()) || '.' || quote_ident($1::text)) IS NOT NULL",
            &[&ledger],
        )?
        .try_get(0)?;
    if !exists {
        return Ok(None);
    }
    let version: i64 = client
        .query_one(
            &format!("SELECT coalesce(max(version), 0)::BIGINT FROM {ledger}"),
            &[],
        )?
        .try_get(0)?;
    Ok(Some(version))
}

/// Brings `component` in `current_schema()` to its newest version inside
/// `tx` (which the caller commits), under the component's advisory lock,
/// and returns the version. Idempotent. Refuses (see [`Refusal`]) before
/// writing anything.
pub fn migrate_in<E>(tx: &mut Transaction<'_>, component: &Component<'_, E>) -> Result<i64, E>
where
    E: From<postgres::Error> + From<Refusal>,
{
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1::text || current_schema()))",
        &[&component.lock],
    )?;
    let newest = component.newest();
    let current = match ledger_version(tx, component.ledger)? {
        Some(found) => found,
        None => {
            let tables: i64 = tx
                .query_one(
                    "SELECT count(*) FROM pg_catalog.pg_tables
                     WHERE schemaname = current_schema() AND tablename LIKE $1::text",
                    &[&component.tables],
                )?
                .try_get(0)?;
            if tables > 0 {
                return Err(Refusal::Unledgered {
                    ledger: component.ledger.to_owned(),
                }
                .into());
            }
            0
        }
    };
    check_version(current, newest)?;
    let mut version = current;
    // `current` lies in 0..=newest: the steps from it on are missing.
    let done = usize::try_from(current).unwrap_or(usize::MAX);
    for step in component.steps.iter().skip(done) {
        tx.batch_execute(&step.sql)?;
        if let Some(then) = step.then {
            then(tx)?;
        }
        version += 1;
        tx.execute(
            &format!("INSERT INTO {} (version) VALUES ($1)", component.ledger),
            &[&version],
        )?;
    }
    Ok(version)
}

/// [`migrate_in`] in a transaction of its own, committed when every step
/// succeeded.
pub fn migrate<E>(owner: &mut postgres::Client, component: &Component<'_, E>) -> Result<i64, E>
where
    E: From<postgres::Error> + From<Refusal>,
{
    let mut tx = owner.transaction()?;
    let version = migrate_in(&mut tx, component)?;
    tx.commit()?;
    Ok(version)
}

impl From<Refusal> for crate::error::StoreError {
    fn from(refusal: Refusal) -> Self {
        use crate::error::StoreError;
        match refusal {
            Refusal::TooNew { found, supported } => StoreError::SchemaTooNew { found, supported },
            Refusal::Negative(found) => StoreError::NotAStore(format!("schema version {found}")),
            Refusal::Unledgered { ledger } => {
                StoreError::NotAStore(format!("the schema has tables but no {ledger}"))
            }
        }
    }
}
