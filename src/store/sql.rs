//! Conversions between agentcron's records and SQLite values: enums are stored
//! as their snake_case words, instants as INTEGER milliseconds since the Unix
//! epoch (UTC), JSON as TEXT. Row mappers for the wide records live here so the
//! column lists and the mappers cannot drift apart.

use super::types::*;
use crate::config::model::ErrorClass;
use crate::core::decision::HoldKind;
use chrono::{DateTime, Utc};
use rusqlite::Row;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

macro_rules! text_enum {
    ($($t:ty),* $(,)?) => {$(
        impl ToSql for $t {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $t {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                let s = value.as_str()?;
                <$t>::parse(s).ok_or_else(|| {
                    FromSqlError::Other(format!("unknown {} {s:?}", stringify!($t)).into())
                })
            }
        }
    )*};
}

text_enum!(
    HoldKind,
    RunState,
    RunReason,
    Pool,
    AttemptStatus,
    StepStatus,
    CircuitState,
    ErrorClass
);

/// An instant as stored: milliseconds since the Unix epoch, UTC. Sub-millisecond
/// precision is dropped on the way in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ms(pub DateTime<Utc>);

impl ToSql for Ms {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.0.timestamp_millis()))
    }
}

impl FromSql for Ms {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let v = value.as_i64()?;
        DateTime::from_timestamp_millis(v)
            .map(Ms)
            .ok_or(FromSqlError::OutOfRange(v))
    }
}

/// `t` as it reads back once stored (whole milliseconds).
pub(crate) fn stored(t: DateTime<Utc>) -> DateTime<Utc> {
    // Whole milliseconds already (as nearly every instant is): itself,
    // without the trip through a date.
    let nanos = t.timestamp_subsec_nanos();
    if nanos < 1_000_000_000 && nanos.is_multiple_of(1_000_000) {
        return t;
    }
    DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}

pub(crate) fn ms_opt(t: Option<DateTime<Utc>>) -> Option<Ms> {
    t.map(Ms)
}

pub(crate) fn json_text(v: &serde_json::Value) -> String {
    v.to_string()
}

/// Parses stored JSON; text that is not JSON (written by hand or by an older
/// build) comes back as a JSON string rather than failing the whole listing.
pub(crate) fn json_value(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
}

/// A row's columns by position, as the record mappers below read them: a
/// SQLite row, or the values of a row another store read (PostgreSQL's, as
/// `Value`s in the same column order), so one mapper serves both.
pub(crate) trait Cols {
    fn col<T: FromSql>(&self, idx: usize) -> rusqlite::Result<T>;
}

impl Cols for Row<'_> {
    fn col<T: FromSql>(&self, idx: usize) -> rusqlite::Result<T> {
        self.get(idx)
    }
}

impl Cols for [rusqlite::types::Value] {
    fn col<T: FromSql>(&self, idx: usize) -> rusqlite::Result<T> {
        let value = self.get(idx).ok_or(rusqlite::Error::InvalidColumnIndex(idx))?;
        T::column_result(ValueRef::from(value)).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(idx, ValueRef::from(value).data_type(), Box::new(e))
        })
    }
}

pub(crate) fn ts<R: Cols + ?Sized>(row: &R, idx: usize) -> rusqlite::Result<DateTime<Utc>> {
    Ok(row.col::<Ms>(idx)?.0)
}

pub(crate) fn ts_opt<R: Cols + ?Sized>(row: &R, idx: usize) -> rusqlite::Result<Option<DateTime<Utc>>> {
    Ok(row.col::<Option<Ms>>(idx)?.map(|m| m.0))
}

/// `sql` with its `LIMIT ?N` made a literal. A bound LIMIT makes SQLite
/// re-prepare the statement on every execution (the planner uses its value),
/// which cost more than the query itself on the engine's hot paths.
pub(crate) fn with_limit(sql: &str, placeholder: &str, n: usize) -> String {
    sql.replace(&format!("LIMIT {placeholder}"), &format!("LIMIT {}", limit(n)))
}

/// Counts and limits are i64 in SQLite; anything beyond is "no limit" anyway.
pub(crate) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Column list of `runs`, in the order [`run_from_cols`] reads it.
macro_rules! run_cols {
    () => {
        "id, tenant, schedule, window_key, window_start, window_end, due_at, state, reason, pool, \
         state_reason, attempts, not_before, next_check_at, lease_owner, lease_expires, \
         fencing_token, error_class, last_error, resume_after, created_at, updated_at, hold"
    };
}
pub(crate) use run_cols;

pub(crate) fn run_from_cols<R: Cols + ?Sized>(row: &R) -> rusqlite::Result<Run> {
    Ok(Run {
        id: row.col(0)?,
        tenant: row.col(1)?,
        schedule: row.col(2)?,
        window_key: row.col(3)?,
        window_start: ts(row, 4)?,
        window_end: ts(row, 5)?,
        due_at: ts(row, 6)?,
        state: row.col(7)?,
        reason: row.col(8)?,
        pool: row.col(9)?,
        state_reason: row.col(10)?,
        attempts: row.col(11)?,
        not_before: ts_opt(row, 12)?,
        next_check_at: ts_opt(row, 13)?,
        lease_owner: row.col(14)?,
        lease_expires: ts_opt(row, 15)?,
        fencing_token: row.col(16)?,
        error_class: row.col(17)?,
        last_error: row.col(18)?,
        resume_after: row.col(19)?,
        created_at: ts(row, 20)?,
        updated_at: ts(row, 21)?,
        hold: row.col(22)?,
    })
}

/// Column list of `attempts`, in the order [`attempt_from_cols`] reads it.
macro_rules! attempt_cols {
    () => {
        "run_id, n, fencing_token, owner, reason, started_at, ended_at, status, error_class, \
         exit_code, summary, processed, message, tokens, cost_usd, log_head, log_tail, \
         log_dropped, envelope"
    };
}
pub(crate) use attempt_cols;

pub(crate) fn attempt_from_cols<R: Cols + ?Sized>(row: &R) -> rusqlite::Result<Attempt> {
    let head: String = row.col(15)?;
    let tail: String = row.col(16)?;
    let dropped: i64 = row.col(17)?;
    Ok(Attempt {
        run_id: row.col(0)?,
        n: row.col(1)?,
        fencing_token: row.col(2)?,
        owner: row.col(3)?,
        reason: row.col(4)?,
        started_at: ts(row, 5)?,
        ended_at: ts_opt(row, 6)?,
        status: row.col(7)?,
        error_class: row.col(8)?,
        exit_code: row.col(9)?,
        summary: row.col(10)?,
        processed: row.col(11)?,
        message: row.col(12)?,
        tokens: row.col(13)?,
        cost_usd: row.col(14)?,
        log: super::attempts::render_log(&head, &tail, dropped),
        envelope: row.col(18)?,
    })
}

pub(crate) fn event_from_cols<R: Cols + ?Sized>(row: &R) -> rusqlite::Result<Event> {
    Ok(Event {
        id: row.col(0)?,
        at: ts(row, 1)?,
        kind: row.col(2)?,
        tenant: row.col(3)?,
        schedule: row.col(4)?,
        run_id: row.col(5)?,
        detail: json_value(row.col(6)?),
    })
}

/// A row of `STEPS_OF_RUN` (attempts.rs).
pub(crate) fn step_from_cols<R: Cols + ?Sized>(row: &R) -> rusqlite::Result<Step> {
    Ok(Step {
        run_id: row.col(0)?,
        attempt: row.col(1)?,
        name: row.col(2)?,
        status: row.col(3)?,
        side_effect: row.col(4)?,
        at: ts(row, 5)?,
    })
}

/// A row of `POSTED_EVENT` (engine_queries.rs).
pub(crate) fn posted_from_cols<R: Cols + ?Sized>(row: &R) -> rusqlite::Result<PostedEvent> {
    Ok(PostedEvent {
        seq: row.col(0)?,
        name: row.col(1)?,
        event_id: row.col(2)?,
        payload: json_value(row.col(3)?),
        arrived_at: ts(row, 4)?,
    })
}
