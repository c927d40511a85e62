//! The durable ledger: one SQLite file (WAL), or a PostgreSQL database several
//! schedulers share, holding runs, attempts, steps, events, per-schedule
//! state, switches, approvals, maintenance windows and posted events. [`Tx::transition`] is the one function that changes a run's state;
//! [`Tx::claim`] is the only other writer of `runs.state`, and only for
//! `pending`/`retry_wait` → `running`.
//!
//! Every write goes through [`Store::write`] (a `BEGIN IMMEDIATE` transaction) so
//! that two processes on one file serialize their writes instead of failing a
//! read-then-write with SQLITE_BUSY; claims are single conditional statements
//! whose changed-row count decides the winner.
//!
//! Every statement runs through `exec`: a named statement (`stmt!(runs::RUN_BY_ID)`)
//! whose text each database has in its own words (`sqlite::runs::RUN_BY_ID`,
//! `pg::sql::runs::RUN_BY_ID`), and one row mapper. The store's logic is one for
//! both databases; its SQL is each database's own, and nothing is translated
//! from one dialect into the other at run time.
//!
//! Layout: `db` (opening, transactions, lock retries), `file` (the ledger
//! file itself: whether it is still the one opened, a full disk), `exec` (running a
//! statement on either database), `schema` (versioned
//! migrations), `sql` (value conversions and row mapping), `runs` (runs and the
//! state transition), `attempts` (claims, leases, attempts, steps), `events`
//! (the trace and posted events), `operator` (schedule state, switches,
//! approvals, maintenance), `backlog` (catch-up windows not yet queued),
//! `registry` (the scheduler registry), `config_versions` (stored
//! configurations and schedule versions), `status` (reads for status and metrics),
//! `read` (what the read verbs ask of a ledger), `sqlite` (every statement in
//! SQLite's words), `pg` (the PostgreSQL ledger: its session, schema, every
//! statement in its words (`pg::sql`), the protocol's own statements, `db copy`).

mod apply;
pub(crate) mod attempts;
pub(crate) mod backlog;
pub(crate) mod config_versions;
mod db;
pub(crate) mod engine_queries;
pub(crate) mod events;
pub(crate) mod exec;
mod file;
mod fxmap;
pub(crate) mod operator;
pub mod pg;
pub mod read;
pub(crate) mod registry;
pub(crate) mod runs;
mod schema;
pub(crate) mod sql;
pub(crate) mod sqlite;
pub(crate) mod status;
pub mod types;

pub use apply::{Applied, opens_claimed};
pub use backlog::Backlog;
pub use config_versions::{ConfigStatus, ConfigVersion, ScheduleVersion};
pub use db::{CLOCK_READINGS, ClockReading, Store, Tx};
pub use fxmap::{FastMap, FxHasher};
pub use runs::opened_run;
pub use schema::SCHEMA_VERSION;
pub use status::Oldest;
pub use types::*;

/// Where the ledger at `path` is, as shown to people: a file's path, or a
/// PostgreSQL URL without its password.
pub fn shown_database(path: &std::path::Path) -> String {
    match path.to_str() {
        Some(url) if pg::is_url(url) => pg::shown_url(url),
        _ => crate::secrets::redact_urls(&path.display().to_string()),
    }
}

/// Errors from the store, named plainly for operators.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open database {path}: {message}")]
    Open { path: String, message: String },
    #[error(
        "database {path} was written by a newer agentcron (schema {found}, this build knows up to {known}); upgrade agentcron"
    )]
    TooNew { path: String, found: i64, known: i64 },
    #[error("database {path} is not an agentcron database or is corrupt: {message}")]
    Corrupt { path: String, message: String },
    #[error("database is locked by another process (gave up after {waited_ms} ms)")]
    Locked { waited_ms: u64 },
    #[error("run {0} not found")]
    RunNotFound(i64),
    #[error("run {run}: {from} → {to} is not allowed by the run state machine")]
    IllegalTransition { run: i64, from: RunState, to: RunState },
    #[error("run {run} is {actual}, not {expected}: someone else changed it")]
    StateConflict {
        run: i64,
        expected: RunState,
        actual: RunState,
    },
    /// A rule the store relies on did not hold (a bug, never bad input).
    #[error("store invariant broken: {0}")]
    Invariant(String),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A PostgreSQL ledger's error (its URL shown without the password).
    #[error("PostgreSQL {0}")]
    Pg(String),
    /// The PostgreSQL ledger could not be reached, or the transaction was
    /// lost with its connection or gave up waiting for the write lock:
    /// nothing of it was committed, and the same work may be tried again.
    #[error("PostgreSQL {0} (nothing of the transaction was committed; trying again)")]
    Unavailable(String),
    /// The disk holding the ledger is full (SQLite's SQLITE_FULL, or an I/O
    /// error while the file system has no space left): nothing of the
    /// transaction was written, and it may be tried again once there is room.
    #[error("database {path}: the disk is full ({message}); nothing of the transaction was written")]
    DiskFull { path: String, message: String },
    /// A verb that must not create a ledger found no file at its path.
    #[error(
        "no ledger at {path} (start the scheduler with `agentcron run --headless` or the console first, or pass --db)"
    )]
    NoLedger { path: String },
    /// The file at the ledger's path is no longer the one this process
    /// opened: deleted or moved away ([`LedgerFile::Missing`]), or another
    /// file put in its place ([`LedgerFile::Replaced`]).
    #[error("{0}")]
    FileChanged(LedgerFile),
}

/// What became of the file a store opened (see [`Store::check_file`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerFile {
    #[error(
        "the ledger {path} was deleted or moved away while this process had it open: nothing it writes would be seen"
    )]
    Missing { path: String },
    #[error(
        "the ledger {path} was replaced by another file while this process had it open: its writes would go to the old one"
    )]
    Replaced { path: String },
}

impl LedgerFile {
    /// The alert's `what`: `ledger_missing` or `ledger_replaced`.
    pub fn alert_kind(&self) -> &'static str {
        match self {
            LedgerFile::Missing { .. } => "ledger_missing",
            LedgerFile::Replaced { .. } => "ledger_replaced",
        }
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

impl StoreError {
    /// Whether the same work may simply be tried again: another process held
    /// the database too long, a PostgreSQL ledger was unreachable or lost
    /// the transaction, or the disk was full. Nothing of the failed
    /// transaction was written.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Locked { .. } | StoreError::Unavailable(_) | StoreError::DiskFull { .. }
        )
    }
}
