//! The schema and its versioned migrations. `PRAGMA user_version` holds the
//! number of migrations applied; `PRAGMA application_id` marks the file as
//! agentcron's so another program's SQLite file is refused instead of altered.
//!
//! To change the schema, append a script to [`MIGRATIONS`]; never edit one that
//! has shipped.

use super::{Result, StoreError};
use rusqlite::{Connection, TransactionBehavior};

/// `'agcr'` as a big-endian integer.
pub(crate) const APPLICATION_ID: i64 = 0x6167_6372;

/// Ordered migration scripts; script `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14, V15, V16,
];

/// Columns a migration adds, as (script index, table, column, declaration).
/// Added only where missing: SQLite's `ADD COLUMN` has no `IF NOT EXISTS`, and
/// a file rolled back by hand (or a test doing so) may still have them.
const ADDED_COLUMNS: &[(usize, &str, &str, &str)] = &[
    (4, "runs", "hold", "TEXT"),
    (5, "schedule_state", "born_at", "INTEGER"),
    (5, "runs", "cancel_requested", "TEXT"),
    // V9 (config versions): renumber these with it.
    (8, "runs", "schedule_version", "INTEGER"),
    (8, "attempts", "schedule_version", "INTEGER"),
];

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Run counts by state, kept by triggers in the same transaction as every
/// change to `runs`: the console's header reads ten rows instead of scanning
/// every run (a million runs took seconds).
const V2: &str = r#"
CREATE TABLE run_counts (
    state TEXT PRIMARY KEY,
    n     INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO run_counts (state, n)
    SELECT s.state, (SELECT COUNT(*) FROM runs WHERE runs.state = s.state)
    FROM (SELECT 'pending' AS state UNION ALL SELECT 'running' UNION ALL SELECT 'succeeded'
          UNION ALL SELECT 'retry_wait' UNION ALL SELECT 'needs_human' UNION ALL SELECT 'failed'
          UNION ALL SELECT 'dead' UNION ALL SELECT 'skipped' UNION ALL SELECT 'missed'
          UNION ALL SELECT 'expired') AS s;
CREATE TRIGGER run_counts_insert AFTER INSERT ON runs BEGIN
    UPDATE run_counts SET n = n + 1 WHERE state = new.state;
END;
CREATE TRIGGER run_counts_update AFTER UPDATE OF state ON runs WHEN old.state <> new.state BEGIN
    UPDATE run_counts SET n = n - 1 WHERE state = old.state;
    UPDATE run_counts SET n = n + 1 WHERE state = new.state;
END;
CREATE TRIGGER run_counts_delete AFTER DELETE ON runs BEGIN
    UPDATE run_counts SET n = n - 1 WHERE state = old.state;
END;
"#;

/// Due runs per pool: on-time runs by their next check; catch-up runs oldest
/// window first, so the engine reads only as many as its backfill pool can
/// take (a long backlog is not re-read every tick).
const V3: &str = r#"
CREATE INDEX runs_due_on_time ON runs (next_check_at, id)
    WHERE state IN ('pending', 'retry_wait') AND pool = 'on_time';
CREATE INDEX runs_due_backfill ON runs (window_start, id)
    WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill';
CREATE INDEX runs_waiting ON runs (schedule, next_check_at)
    WHERE state IN ('pending', 'retry_wait');
"#;

/// Catch-up windows not yet queued as runs. After a long outage a schedule's
/// backlog is queued a few windows at a time as its runs end, so planning
/// writes one row per schedule instead of one run per missed window: the
/// windows of `schedule` due from `next_at` to `until_at` (both inclusive,
/// epoch ms) still wait to be queued.
const V4: &str = r#"
CREATE TABLE catchup_backlog (
    schedule   TEXT PRIMARY KEY,
    next_at    INTEGER NOT NULL,
    until_at   INTEGER NOT NULL,
    planned_at INTEGER NOT NULL
) WITHOUT ROWID;
"#;

/// What holds a waiting run, as a word a machine reads (`quota`, `overlap`,
/// `circuit`, `kill`, `paused`, `maintenance`, `budget`, `gate`; see
/// `core::decision::HoldKind`), beside the prose `state_reason`: wake-ups
/// select by it instead of matching reason text. A missed or expired run keeps
/// the hold it last had. Rows from before it get theirs from their reason's
/// prefix, once, here — the only place a reason's wording is ever read.
const V5: &str = r#"
UPDATE runs SET hold = CASE
    WHEN state_reason LIKE 'quota:%' THEN 'quota'
    WHEN state_reason LIKE 'overlap:%' THEN 'overlap'
    WHEN state_reason LIKE 'circuit:%' THEN 'circuit'
    WHEN state_reason LIKE 'kill:%' THEN 'kill'
    WHEN state_reason LIKE 'paused:%' THEN 'paused'
    WHEN state_reason LIKE 'maintenance:%' THEN 'maintenance'
    WHEN state_reason LIKE 'budget:%' THEN 'budget'
    WHEN state_reason LIKE 'gate %' THEN 'gate'
    WHEN state_reason LIKE '%(last hold: paused:%' THEN 'paused'
  END
  WHERE state IN ('pending', 'retry_wait', 'missed', 'expired');
"#;

/// A schedule's birth (`schedule_state.born_at`, epoch ms): the instant it
/// was first evaluated; no window due before it is opened automatically, and
/// `explain` says so. A request to cancel a running attempt
/// (`runs.cancel_requested`, the reason), for `overlap = "cancel_previous"`
/// across schedulers: the scheduler that owns the attempt sees it when it
/// renews the lease. Both columns are added by [`ADDED_COLUMNS`]; schedules
/// already known before are born when they were first evaluated.
const V6: &str = r#"
UPDATE schedule_state SET born_at = last_evaluated WHERE born_at IS NULL;
"#;

/// The scheduler registry (DESIGN.md "Status"): one row per scheduler process,
/// keyed by its owner name (`host:pid`), refreshed every heartbeat; a clean
/// stop sets `stopped_at`, a peer that sees it go silent sets `lost_at` (once:
/// the update repeats the `last_seen` it saw). Instants are epoch ms.
const V7: &str = r#"
CREATE TABLE IF NOT EXISTS schedulers (
    owner        TEXT PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    version      TEXT    NOT NULL,
    config_hash  TEXT    NOT NULL,
    heartbeat_ms INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    last_seen    INTEGER NOT NULL,
    stopped_at   INTEGER,
    lost_at      INTEGER,
    lost_by      TEXT
) WITHOUT ROWID;
"#;

/// Leaner writes (the throughput issue). Run counts by state are added by
/// each transaction before it commits (`RunCounts`), not by three triggers
/// on every change of a run.
/// Trace indexes: Every event was indexed by its
/// schedule: an insert at a random place of that index for each of a run's
/// five events, 14 % of a lifecycle's CPU time. A run's events are found by
/// `events_run` (appended in order); only the schedule's own events (circuit,
/// pause, catch-up plans: no run) keep a schedule index, and "the events of a
/// schedule" are those plus the events of its runs, found through
/// `runs_window`, which now leads with the schedule (schedule ids are unique
/// across tenants) so that lookup needs no tenant. The daily cost of a
/// schedule sums only attempts that cost something: only those are indexed
/// (another random-place insert per attempt gone for agents that report no
/// cost).
const V8: &str = r#"
DROP INDEX IF EXISTS events_schedule;
CREATE INDEX IF NOT EXISTS events_schedule_own ON events (schedule) WHERE run_id IS NULL AND schedule IS NOT NULL;
DROP INDEX IF EXISTS runs_window;
CREATE INDEX runs_window ON runs (schedule, window_start);
DROP TRIGGER IF EXISTS run_counts_insert;
DROP TRIGGER IF EXISTS run_counts_update;
DROP TRIGGER IF EXISTS run_counts_delete;
DROP INDEX IF EXISTS attempts_cost;
CREATE INDEX attempts_cost ON attempts (tenant, schedule, started_at) WHERE cost_usd <> 0;
"#;

/// Config versions (DESIGN.md "Control plane", issue 18). Self-contained but
/// for its two `schedule_version` columns (in [`ADDED_COLUMNS`] under index 8,
/// so a file rolled back by hand migrates again): renumber both together.
///
/// - `config_versions`: every configuration loaded, numbered, with its text;
///   `status` is `applied`, `waiting` (for `approve-config`) or `superseded`.
/// - `schedule_versions`: a schedule's version changes only when the hash of
///   its own normalised settings does; `settings` is their JSON (field → TOML
///   value) so `plan` and `show` can say what changed.
/// - `config_current`: the version the database runs and a counter `agentcron
///   reload` bumps; every scheduler on the database watches both.
/// - `schedule_current`: each schedule's current version, stamped on every run
///   and attempt by the statement that inserts it (a subquery in its VALUES:
///   no second write, as a trigger updating the new row would be).
const V9: &str = r#"
CREATE TABLE IF NOT EXISTS config_versions (
    version         INTEGER PRIMARY KEY,
    hash            TEXT    NOT NULL,
    path            TEXT    NOT NULL,
    text            TEXT    NOT NULL,
    loaded_at       INTEGER NOT NULL,
    loaded_by       TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    note            TEXT,
    approved_by     TEXT,
    approved_at     INTEGER,
    approval_reason TEXT
);
CREATE TABLE IF NOT EXISTS schedule_versions (
    schedule       TEXT    NOT NULL,
    version        INTEGER NOT NULL,
    hash           TEXT    NOT NULL,
    settings       TEXT    NOT NULL,
    config_version INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (schedule, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS config_current (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    version    INTEGER,
    reload_seq INTEGER NOT NULL DEFAULT 0
);
INSERT OR IGNORE INTO config_current (id, version, reload_seq) VALUES (1, NULL, 0);
CREATE TABLE IF NOT EXISTS schedule_current (
    schedule TEXT PRIMARY KEY,
    version  INTEGER NOT NULL
) WITHOUT ROWID;
"#;

/// The runs a quota holds, longest waiting first (`quota_held`, asked each
/// time an attempt ends while any is held): before it, that query walked
/// every waiting run and sorted them — after an outage thousands of queued
/// catch-up runs, a third of the drain's time. Only quota-held runs are in it.
const V10: &str = r#"
CREATE INDEX IF NOT EXISTS runs_quota_held ON runs (due_at, id)
    WHERE hold = 'quota' AND state IN ('pending', 'retry_wait') AND next_check_at IS NOT NULL;
"#;

/// The quota-held runs by pool first: the engine asks each pool with room
/// for its own candidates, and a pool with none held (the on-time pool while
/// thousands of catch-up runs wait) must not walk the other pool's entries.
const V11: &str = r#"
DROP INDEX IF EXISTS runs_quota_held;
CREATE INDEX runs_quota_held ON runs (pool, due_at, id)
    WHERE hold = 'quota' AND state IN ('pending', 'retry_wait') AND next_check_at IS NOT NULL;
"#;

/// The due index of every waiting run is gone: on-time runs are found
/// through `runs_due_on_time` (V3), catch-up runs through this index of
/// their own by next check. Each on-time run's insert and claim wrote and
/// deleted one more index entry than needed (an index no hot query of the
/// on-time pool reads).
const V12: &str = r#"
DROP INDEX IF EXISTS runs_due;
CREATE INDEX IF NOT EXISTS runs_due_backfill_check ON runs (next_check_at)
    WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill';
"#;

/// The quota-held runs of one schedule, by pool, longest waiting first
/// (`quota_held_of`: an attempt's end offers the freed place to its own
/// schedule's held runs). Through the waiting-runs index that query sorted
/// every waiting run of the schedule. Only quota-held runs are in it.
const V13: &str = r#"
CREATE INDEX IF NOT EXISTS runs_quota_held_by_schedule ON runs (schedule, pool, due_at, id)
    WHERE hold = 'quota' AND state IN ('pending', 'retry_wait') AND next_check_at IS NOT NULL;
"#;

/// The runs' unique key is led by the window, not the tenant and schedule:
/// the windows one tick opens share a key (the same instant, in a zone) and
/// land side by side at the end of the index, where a schedule-led key put
/// each schedule's new window on a page of its own. With 10,000 schedules a
/// claim chunk of 256 rewrote 256 leaves of that index, all again in the next
/// chunk: most of the 1.5 GB the lateness bench wrote in 15 s (`/proc` io).
/// SQLite cannot change a table's constraint, so the table is rebuilt (with
/// the columns added since schema 1, in their order) and its indexes made
/// again; foreign keys are off around it ([`migrate`]).
const V14: &str = r#"
CREATE TABLE runs_v14 (
    id               INTEGER PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    schedule         TEXT    NOT NULL,
    window_key       TEXT    NOT NULL,
    window_start     INTEGER NOT NULL,
    window_end       INTEGER NOT NULL,
    due_at           INTEGER NOT NULL,
    state            TEXT    NOT NULL,
    reason           TEXT    NOT NULL,
    pool             TEXT    NOT NULL,
    state_reason     TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    not_before       INTEGER,
    next_check_at    INTEGER,
    lease_owner      TEXT,
    lease_expires    INTEGER,
    fencing_token    INTEGER NOT NULL DEFAULT 0,
    error_class      TEXT,
    last_error       TEXT,
    resume_after     TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    hold             TEXT,
    cancel_requested TEXT,
    schedule_version INTEGER,
    UNIQUE (window_key, schedule, tenant)
);
INSERT INTO runs_v14 (id, tenant, schedule, window_key, window_start, window_end, due_at, state,
    reason, pool, state_reason, attempts, not_before, next_check_at, lease_owner, lease_expires,
    fencing_token, error_class, last_error, resume_after, created_at, updated_at, hold,
    cancel_requested, schedule_version)
  SELECT id, tenant, schedule, window_key, window_start, window_end, due_at, state,
    reason, pool, state_reason, attempts, not_before, next_check_at, lease_owner, lease_expires,
    fencing_token, error_class, last_error, resume_after, created_at, updated_at, hold,
    cancel_requested, schedule_version
  FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v14 RENAME TO runs;
CREATE INDEX runs_window ON runs (schedule, window_start);
CREATE INDEX runs_lease ON runs (lease_expires) WHERE state = 'running';
CREATE INDEX runs_due_on_time ON runs (next_check_at, id)
    WHERE state IN ('pending', 'retry_wait') AND pool = 'on_time';
CREATE INDEX runs_due_backfill ON runs (window_start, id)
    WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill';
CREATE INDEX runs_waiting ON runs (schedule, next_check_at)
    WHERE state IN ('pending', 'retry_wait');
CREATE INDEX runs_quota_held ON runs (pool, due_at, id)
    WHERE hold = 'quota' AND state IN ('pending', 'retry_wait') AND next_check_at IS NOT NULL;
CREATE INDEX runs_due_backfill_check ON runs (next_check_at)
    WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill';
CREATE INDEX runs_quota_held_by_schedule ON runs (schedule, pool, due_at, id)
    WHERE hold = 'quota' AND state IN ('pending', 'retry_wait') AND next_check_at IS NOT NULL;
"#;

/// No table changes: from this version a `claimed` or `started` event row
/// may hold the events recorded on the way to it (`NewEvent::folding`), which
/// an older build would not list. The version moves so that such a build
/// refuses this database plainly instead of showing a trace with holes.
const V15: &str = "";

/// A run's place in its schedule's history (`runs_window`, schedule first)
/// is written when it leaves `running`, not by its claim. A claim inserts a
/// running row; an index led by the schedule put each schedule's new entry
/// on a page of its own, so a tick that claimed one window of each of
/// 10,000 schedules rewrote 10,000 pages of that index before the first
/// agent could start: measured with 60 s of history (`cargo bench --bench
/// engine -- claim-floor --history 60`), the run rows of 10,000 claims took
/// 65 ms with it and 33 ms with it partial. The running runs have
/// their own small index (`runs_running`: at most the running runs, a few
/// pages however many schedules there are); a query over one schedule's
/// runs in any state asks both (`Tx::previous_run`, `Tx::runs`).
const V16: &str = r#"
DROP INDEX IF EXISTS runs_window;
CREATE INDEX runs_window ON runs (schedule, window_start) WHERE state <> 'running';
CREATE INDEX IF NOT EXISTS runs_running ON runs (schedule, window_start) WHERE state = 'running';
"#;

const V1: &str = r#"
PRAGMA application_id = 1634165618;

-- One row per window of a schedule. `state` changes only in Tx::transition and Tx::claim.
CREATE TABLE runs (
    id              INTEGER PRIMARY KEY,
    tenant          TEXT    NOT NULL,
    schedule        TEXT    NOT NULL,
    window_key      TEXT    NOT NULL,
    window_start    INTEGER NOT NULL,
    window_end      INTEGER NOT NULL,
    due_at          INTEGER NOT NULL,
    state           TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    pool            TEXT    NOT NULL,
    state_reason    TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,
    not_before      INTEGER,
    next_check_at   INTEGER,
    lease_owner     TEXT,
    lease_expires   INTEGER,
    fencing_token   INTEGER NOT NULL DEFAULT 0,
    error_class     TEXT,
    last_error      TEXT,
    resume_after    TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (tenant, schedule, window_key)
);
-- due_runs / next_due_check: only the runs waiting for evaluation, in check order.
CREATE INDEX runs_due ON runs (next_check_at) WHERE state IN ('pending', 'retry_wait');
-- previous_run / recent_runs.
CREATE INDEX runs_window ON runs (tenant, schedule, window_start);
-- expired_leases / count_running / running_runs: only the running runs, by lease.
CREATE INDEX runs_lease ON runs (lease_expires) WHERE state = 'running';

-- The store-wide fencing counter: one row, bumped by every successful claim.
CREATE TABLE fencing (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    token INTEGER NOT NULL
);
INSERT INTO fencing (id, token) VALUES (1, 0);

-- Keyed by fencing token: unique store-wide and increasing, so new attempts
-- append at the end of the table.
CREATE TABLE attempts (
    fencing_token   INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs (id),
    n               INTEGER NOT NULL,
    -- Copied from the run so the daily cost cap is one index range.
    tenant          TEXT    NOT NULL,
    schedule        TEXT    NOT NULL,
    owner           TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    started_at      INTEGER NOT NULL,
    ended_at        INTEGER,
    status          TEXT    NOT NULL,
    error_class     TEXT,
    exit_code       INTEGER,
    summary         TEXT,
    processed       INTEGER,
    message         TEXT,
    tokens          INTEGER NOT NULL DEFAULT 0,
    cost_usd        REAL    NOT NULL DEFAULT 0,
    -- Bounded log: a fixed head, a sliding tail and the bytes dropped between them.
    log_head        TEXT    NOT NULL DEFAULT '',
    log_tail        TEXT    NOT NULL DEFAULT '',
    log_dropped     INTEGER NOT NULL DEFAULT 0,
    envelope        TEXT,
    UNIQUE (run_id, n)
);
CREATE INDEX attempts_cost ON attempts (tenant, schedule, started_at);

CREATE TABLE steps (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES runs (id),
    attempt     INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    side_effect INTEGER NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX steps_run ON steps (run_id);

-- Append-only trace. No foreign key: the trace also holds schedule- and
-- store-wide events and must never be refused for bookkeeping reasons.
CREATE TABLE events (
    id       INTEGER PRIMARY KEY,
    at       INTEGER NOT NULL,
    kind     TEXT    NOT NULL,
    tenant   TEXT,
    schedule TEXT,
    run_id   INTEGER,
    detail   TEXT    NOT NULL
);
CREATE INDEX events_run ON events (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX events_schedule ON events (schedule) WHERE schedule IS NOT NULL;

CREATE TABLE schedule_state (
    schedule             TEXT PRIMARY KEY,
    last_evaluated       INTEGER,
    circuit              TEXT    NOT NULL DEFAULT 'closed',
    circuit_changed_at   INTEGER,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    paused               INTEGER NOT NULL DEFAULT 0,
    paused_reason        TEXT,
    concurrency_divisor  INTEGER NOT NULL DEFAULT 1,
    last_start           INTEGER,
    last_success         INTEGER
);

CREATE TABLE switches (
    name   TEXT PRIMARY KEY,
    "on"   INTEGER NOT NULL,
    actor  TEXT    NOT NULL,
    reason TEXT    NOT NULL,
    at     INTEGER NOT NULL
);

CREATE TABLE approvals (
    id           INTEGER PRIMARY KEY,
    run_id       INTEGER NOT NULL REFERENCES runs (id),
    approved     INTEGER NOT NULL,
    actor        TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    resume_after TEXT,
    at           INTEGER NOT NULL
);
CREATE INDEX approvals_run ON approvals (run_id);

CREATE TABLE maintenance (
    id         INTEGER PRIMARY KEY,
    from_at    INTEGER NOT NULL,
    to_at      INTEGER NOT NULL,
    reason     TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    -- JSON array of schedule names; empty = all schedules.
    schedules  TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX maintenance_to ON maintenance (to_at);

CREATE TABLE posted_events (
    seq        INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    event_id   TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    arrived_at INTEGER NOT NULL,
    UNIQUE (name, event_id)
);
"#;

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

fn application_id(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA application_id", [], |r| r.get(0))
}

fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = stmt.query_map([], |r| r.get::<_, String>(1))?;
    for name in names {
        if name? == column {
            return Ok(true);
        }
    }
    Ok(false)
}

fn table_count(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
}

/// Refuses a file that is some other program's SQLite database, or a newer agentcron's.
fn check_owner(conn: &Connection, path: &str, version: i64) -> Result<()> {
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_string(),
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    if version == 0 {
        if table_count(conn)? > 0 {
            return Err(StoreError::Corrupt {
                path: path.to_string(),
                message: "it holds tables but no agentcron schema version".into(),
            });
        }
    } else if application_id(conn)? != APPLICATION_ID {
        return Err(StoreError::Corrupt {
            path: path.to_string(),
            message: "it belongs to another application (application_id differs)".into(),
        });
    }
    Ok(())
}

/// [`check_owner`] of an open file, by reading only.
pub(crate) fn check_owner_read(conn: &Connection, path: &str) -> Result<()> {
    checked_version(conn, path).map(|_| ())
}

/// The schema version, checked by [`check_owner`], read from one snapshot.
/// Two separate reads could see no version yet and then the tables another
/// process's migration committed in between, and call a new file someone
/// else's: one of two schedulers started at once on a new file sometimes
/// refused it as "not an agentcron database" and exited.
fn checked_version(conn: &Connection, path: &str) -> Result<i64> {
    let tx = conn.unchecked_transaction()?;
    let version = user_version(&tx)?;
    check_owner(&tx, path, version)?;
    tx.commit()?;
    Ok(version)
}

/// Brings the schema up to [`SCHEMA_VERSION`] in one `BEGIN IMMEDIATE`
/// transaction, so two processes opening a new file never both migrate it.
pub(crate) fn migrate(conn: &mut Connection, path: &str) -> Result<()> {
    // Fast path without the write lock: a current file needs nothing.
    let version = checked_version(conn, path)?;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    // Rebuilding a table (schema 14) drops the old one, which with foreign
    // keys on deletes its rows first and trips every attempt's reference;
    // the pragma cannot change inside a transaction, so it is off around it
    // and the references are checked before the commit instead.
    let keys_on: bool = conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
    conn.pragma_update(None, "foreign_keys", false)?;
    let migrated = migrate_locked(conn, path);
    conn.pragma_update(None, "foreign_keys", keys_on)?;
    migrated
}

fn migrate_locked(conn: &mut Connection, path: &str) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Re-read under the lock: another process may have migrated meanwhile.
    let version = user_version(&tx)?;
    check_owner(&tx, path, version)?;
    // `version` is within 0..=SCHEMA_VERSION here, so the conversion holds.
    let from = usize::try_from(version).unwrap_or(0);
    for (i, script) in MIGRATIONS.iter().enumerate().skip(from) {
        for (_, table, column, decl) in ADDED_COLUMNS.iter().filter(|c| c.0 == i) {
            if !has_column(&tx, table, column)? {
                tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
            }
        }
        tx.execute_batch(script)?;
    }
    let broken: i64 = tx.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))?;
    if broken > 0 {
        return Err(StoreError::Corrupt {
            path: path.to_string(),
            message: format!("{broken} rows refer to rows that do not exist (foreign_key_check)"),
        });
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

/// For read-only opens: the schema must be exactly this build's; nothing is changed.
pub(crate) fn check_read_only(conn: &Connection, path: &str) -> Result<()> {
    let version = user_version(conn)?;
    check_owner(conn, path, version)?;
    if version == 0 {
        return Err(StoreError::Open {
            path: path.to_string(),
            message: "no agentcron schema yet; open it once without --read-only".into(),
        });
    }
    if version < SCHEMA_VERSION {
        return Err(StoreError::Open {
            path: path.to_string(),
            message: format!(
                "schema {version} is older than this build's {SCHEMA_VERSION}; \
                 open it once without --read-only to upgrade"
            ),
        });
    }
    Ok(())
}

/// `EXPLAIN QUERY PLAN` lines of `sql` (parameters unbound), for diagnostics and tests.
pub(crate) fn query_plan(conn: &Connection, sql: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
    // Unbound parameters are NULL, which is all a plan needs.
    let mut rows = stmt.raw_query();
    let mut plan = Vec::new();
    while let Some(row) = rows.next()? {
        plan.push(row.get::<_, String>(3)?);
    }
    Ok(plan)
}
