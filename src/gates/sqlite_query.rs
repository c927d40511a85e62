//! `sqlite_query`: upstream data is ready when a query's answer meets `expect`,
//! e.g. `SELECT count(*) FROM orders WHERE day = date(:window_start, '-1 day')`
//! with `expect = "> 0"`.
//!
//! Bound parameters (only those the query names; `:`, `@` and `$` prefixes alike):
//! - `:window_start`, `:window_end` — UTC, as `YYYY-MM-DD HH:MM:SS`
//!   (e.g. `2026-06-06 01:00:00`). That is SQLite's own datetime format: every date
//!   function (`date()`, `datetime()`, `strftime()`, `julianday()`) parses it, and
//!   it compares as text with values written by `datetime('now')` or
//!   `CURRENT_TIMESTAMP`. To compare with an RFC 3339 column (`…T…Z`), normalize
//!   one side, e.g. `datetime(created_at) >= :window_start`.
//! - `:window_key` — the window key as text (`2026-06-06`).
//!
//! The database is opened read-only; a gate cannot change what it checks.

use super::{Gate, GateContext, GateOutcome, compare, expect_text, value_text};
use crate::config::model::Expect;
use crate::time::duration::format_duration;
use chrono::{DateTime, Utc};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, InterruptHandle, OpenFlags};
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// What a query may name, for error reasons.
const BOUND: &str = "only :window_start, :window_end and :window_key are bound";

/// The `:window_start` / `:window_end` format (see the module doc).
pub const TIMESTAMP_FORMAT: &str = "%Y-%m-%d %H:%M:%S";

pub struct SqliteQuery {
    name: String,
    database: PathBuf,
    query: String,
    expect: Expect,
}

impl SqliteQuery {
    pub fn new(name: String, database: PathBuf, query: String, expect: Expect) -> Self {
        Self {
            name,
            database,
            query,
            expect,
        }
    }

    /// The first column of the first row, with the column's name.
    fn first_value(
        &self,
        conn: &Connection,
        ctx: &GateContext<'_>,
    ) -> Result<Option<(String, serde_json::Value)>, String> {
        let mut stmt = conn.prepare(&self.query).map_err(|e| e.to_string())?;
        let names: Vec<Option<String>> = (1..=stmt.parameter_count())
            .map(|i| stmt.parameter_name(i).map(str::to_string))
            .collect();
        for (i, name) in names.iter().enumerate() {
            let index = i + 1;
            let Some(name) = name else {
                return Err(format!("positional parameters (?) are not bound; {BOUND}"));
            };
            // SQLite keeps the prefix in the name: `:x`, `@x` or `$x`.
            let value = match name.get(1..) {
                Some("window_start") => sql_time(ctx.window_start),
                Some("window_end") => sql_time(ctx.window_end),
                Some("window_key") => ctx.window_key.to_string(),
                _ => {
                    return Err(format!("unknown parameter {name}; {BOUND}"));
                }
            };
            stmt.raw_bind_parameter(index, value).map_err(|e| e.to_string())?;
        }
        if stmt.column_count() == 0 {
            return Err("the query returns no columns".into());
        }
        let column = stmt.column_name(0).map_err(|e| e.to_string())?.to_string();
        let mut rows = stmt.raw_query();
        let Some(row) = rows.next().map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let value = match row.get_ref(0).map_err(|e| e.to_string())? {
            ValueRef::Null => serde_json::Value::Null,
            ValueRef::Integer(i) => serde_json::Value::from(i),
            // NaN and infinities have no JSON form; they become null (a mismatch).
            ValueRef::Real(f) => serde_json::Value::from(f),
            ValueRef::Text(t) => serde_json::Value::String(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => {
                return Err(format!("{column} is a blob ({} bytes), not comparable", b.len()));
            }
        };
        Ok(Some((column, value)))
    }
}

impl Gate for SqliteQuery {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "sqlite_query"
    }

    fn check(&self, ctx: &GateContext<'_>) -> GateOutcome {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match Connection::open_with_flags(&self.database, flags) {
            Ok(c) => c,
            Err(e) => {
                return GateOutcome::wait(format!("cannot open {}: {e}", self.database.display()));
            }
        };
        // A writer holding a lock makes us wait at most the gate's timeout.
        if let Err(e) = conn.busy_timeout(ctx.timeout) {
            return GateOutcome::wait(e.to_string());
        }
        let watchdog = Watchdog::start(conn.get_interrupt_handle(), ctx.timeout);
        let result = self.first_value(&conn, ctx);
        let fired = watchdog.stop();
        let expected = expect_text(&self.expect);
        match result {
            Err(_) if fired => GateOutcome::wait(format!("timed out after {}", format_duration(ctx.timeout))),
            Err(e) => GateOutcome::wait(e),
            Ok(None) => GateOutcome::wait(format!("the query returned no rows (expected {expected})")),
            Ok(Some((column, value))) => {
                let measured = format!("{column} = {}", value_text(&value));
                match compare(&self.expect, &value) {
                    Ok(true) => GateOutcome::pass(format!("{measured} (expected {expected})")),
                    Ok(false) => GateOutcome::wait(format!("{measured} (expected {expected})")),
                    Err(e) => GateOutcome::wait(format!("{column}: {e}")),
                }
            }
        }
    }
}

fn sql_time(t: DateTime<Utc>) -> String {
    t.format(TIMESTAMP_FORMAT).to_string()
}

/// Interrupts the connection's running statement when the timeout passes. A
/// timer thread, because the progress-handler hook needs a rusqlite feature the
/// crate does not enable.
struct Watchdog {
    done: mpsc::Sender<()>,
    thread: JoinHandle<bool>,
}

impl Watchdog {
    fn start(handle: InterruptHandle, timeout: Duration) -> Self {
        let (done, rx) = mpsc::channel::<()>();
        let thread = thread::spawn(move || match rx.recv_timeout(timeout) {
            Err(RecvTimeoutError::Timeout) => {
                handle.interrupt();
                true
            }
            _ => false,
        });
        Self { done, thread }
    }

    /// Stops the timer; true when it had already interrupted the query.
    fn stop(self) -> bool {
        let _ = self.done.send(());
        self.thread.join().unwrap_or(false)
    }
}
