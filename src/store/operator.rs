//! What operators and the recovery rules set around runs: per-schedule state
//! (last evaluated instant, circuit, pause, concurrency divisor), switches,
//! approvals and ad-hoc maintenance windows.

use super::exec::Row;
use super::sql::{Ms, json_value, ms_opt, stored, ts, ts_opt};
use super::types::*;
use super::{Result, StoreError, Tx};
use crate::core::event::Event;
use chrono::{DateTime, Utc};
use rusqlite::params;

macro_rules! schedule_state_cols {
    () => {
        "schedule, last_evaluated, circuit, circuit_changed_at, consecutive_failures, paused, \
         paused_reason, concurrency_divisor, last_start, last_success"
    };
}
const SCHEDULE_STATE: &str = concat!(
    "SELECT ",
    schedule_state_cols!(),
    " FROM schedule_state WHERE schedule = ?1"
);
pub(crate) const ALL_SCHEDULE_STATES: &str = concat!(
    "SELECT ",
    schedule_state_cols!(),
    " FROM schedule_state ORDER BY schedule"
);
const PUT_SCHEDULE_STATE: &str = "INSERT INTO schedule_state (schedule, last_evaluated, circuit, \
     circuit_changed_at, consecutive_failures, paused, paused_reason, concurrency_divisor, \
     last_start, last_success) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
     ON CONFLICT (schedule) DO UPDATE SET last_evaluated = excluded.last_evaluated, \
     circuit = excluded.circuit, circuit_changed_at = excluded.circuit_changed_at, \
     consecutive_failures = excluded.consecutive_failures, paused = excluded.paused, \
     paused_reason = excluded.paused_reason, concurrency_divisor = excluded.concurrency_divisor, \
     last_start = excluded.last_start, last_success = excluded.last_success";
// The row exists but for a schedule's first write: a plain UPDATE first (an
// upsert looks for the conflict through the key before updating).
const UPDATE_SCHEDULE_STATE: &str = "UPDATE schedule_state SET last_evaluated = ?2, circuit = ?3, \
     circuit_changed_at = ?4, consecutive_failures = ?5, paused = ?6, paused_reason = ?7, \
     concurrency_divisor = ?8, last_start = ?9, last_success = ?10 WHERE schedule = ?1";
const UPDATE_LAST_EVALUATED: &str = "UPDATE schedule_state SET last_evaluated = ?2 WHERE schedule = ?1";
/// A run's success in the steady state: the only column that moves.
const UPDATE_LAST_SUCCESS: &str = "UPDATE schedule_state SET last_success = ?2 WHERE schedule = ?1";
const SET_LAST_EVALUATED: &str = "INSERT INTO schedule_state (schedule, last_evaluated) \
     VALUES (?1, ?2) ON CONFLICT (schedule) DO UPDATE SET last_evaluated = excluded.last_evaluated";
const SET_BORN: &str = "INSERT INTO schedule_state (schedule, last_evaluated, born_at) \
     VALUES (?1, ?2, ?3) ON CONFLICT (schedule) DO UPDATE SET last_evaluated = excluded.last_evaluated, \
     born_at = COALESCE(schedule_state.born_at, excluded.born_at)";
pub(crate) const BORN_AT: &str = "SELECT born_at FROM schedule_state WHERE schedule = ?1";
pub(crate) const SWITCH: &str = r#"SELECT name, "on", actor, reason, at FROM switches WHERE name = ?1"#;
const SWITCHES: &str = r#"SELECT name, "on", actor, reason, at FROM switches ORDER BY name"#;
const SET_SWITCH: &str = r#"INSERT INTO switches (name, "on", actor, reason, at) VALUES (?1, ?2, ?3, ?4, ?5)
     ON CONFLICT (name) DO UPDATE SET "on" = excluded."on", actor = excluded.actor,
     reason = excluded.reason, at = excluded.at"#;
const RUN_EXISTS: &str = "SELECT 1 FROM runs WHERE id = ?1";
const INSERT_APPROVAL: &str = "INSERT INTO approvals \
     (run_id, approved, actor, reason, resume_after, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const APPROVALS_OF_RUN: &str = "SELECT run_id, approved, actor, reason, resume_after, at \
     FROM approvals WHERE run_id = ?1 ORDER BY id";
const MAINTENANCE_AT: &str = "SELECT id, from_at, to_at, reason, actor, schedules \
     FROM maintenance WHERE to_at > ?1 AND from_at <= ?1 ORDER BY from_at, id";
const MAINTENANCE_LIST: &str = "SELECT id, from_at, to_at, reason, actor, schedules \
     FROM maintenance ORDER BY from_at, id";
const INSERT_MAINTENANCE: &str = "INSERT INTO maintenance \
     (from_at, to_at, reason, actor, schedules, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

fn schedule_state_from_row(r: &Row<'_>) -> rusqlite::Result<ScheduleState> {
    schedule_state_from_row_cols(r)
}

pub(crate) fn schedule_state_from_row_cols<R: super::sql::Cols + ?Sized>(
    r: &R,
) -> rusqlite::Result<ScheduleState> {
    Ok(ScheduleState {
        schedule: r.col(0)?,
        last_evaluated: ts_opt(r, 1)?,
        circuit: r.col(2)?,
        circuit_changed_at: ts_opt(r, 3)?,
        consecutive_failures: r.col(4)?,
        paused: r.col(5)?,
        paused_reason: r.col(6)?,
        concurrency_divisor: r.col(7)?,
        last_start: ts_opt(r, 8)?,
        last_success: ts_opt(r, 9)?,
    })
}

fn switch_from_row(r: &Row<'_>) -> rusqlite::Result<Switch> {
    switch_from_row_cols(r)
}

pub(crate) fn switch_from_row_cols<R: super::sql::Cols + ?Sized>(r: &R) -> rusqlite::Result<Switch> {
    Ok(Switch {
        name: r.col(0)?,
        on: r.col(1)?,
        actor: r.col(2)?,
        reason: r.col(3)?,
        at: ts(r, 4)?,
    })
}

fn maintenance_from_row(r: &Row<'_>) -> rusqlite::Result<Maintenance> {
    let schedules = match json_value(r.get(5)?) {
        serde_json::Value::Array(items) => items
            .into_iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    Ok(Maintenance {
        id: r.get(0)?,
        from: ts(r, 1)?,
        to: ts(r, 2)?,
        reason: r.get(3)?,
        actor: r.get(4)?,
        schedules,
    })
}

impl Tx<'_> {
    /// The schedule's durable state; the default (closed, not paused, divisor
    /// 1, never evaluated) if none was stored yet. Read once, then kept while no other connection writes (see
    /// `db::StateCache`).
    pub fn schedule_state(&self, schedule: &str) -> Result<ScheduleState> {
        if let Some(st) = self.states.get(schedule) {
            return Ok(st);
        }
        let st = self.opt(SCHEDULE_STATE, params![schedule], schedule_state_from_row)?;
        let st = st.unwrap_or_else(|| ScheduleState::new(schedule));
        self.states.put(&st);
        Ok(st)
    }

    /// The schedule's last success as [`Tx::schedule_state`] has it, without
    /// copying the whole state when it is kept.
    pub fn last_success(&self, schedule: &str) -> Result<Option<DateTime<Utc>>> {
        match self.states.last_success(schedule) {
            Some(at) => Ok(at),
            None => Ok(self.schedule_state(schedule)?.last_success),
        }
    }

    /// The states of `schedules`, in that order: the kept ones as they are,
    /// the others read one by one, or, when more than a few are not kept
    /// (a first tick of thousands), all rows in one pass.
    pub fn schedule_states(&self, schedules: &[&str]) -> Result<Vec<ScheduleState>> {
        const FEW: usize = 64;
        let missing = schedules.iter().filter(|s| !self.states.contains(s)).count();
        if missing > FEW {
            self.all_schedule_states()?;
        }
        schedules.iter().map(|s| self.schedule_state(s)).collect()
    }

    /// Every stored schedule state, by schedule name.
    pub fn all_schedule_states(&self) -> Result<Vec<ScheduleState>> {
        let all = self.all(ALL_SCHEDULE_STATES, params![], schedule_state_from_row)?;
        for st in &all {
            self.states.put(st);
        }
        Ok(all)
    }

    /// Stores the whole state of `st.schedule` (insert or replace).
    pub fn put_schedule_state(&self, st: &ScheduleState) -> Result<()> {
        // Only the last success moved from the state kept as stored (a run's
        // success, most of the time): that column alone.
        if self.states.differs_in_last_success_only(st)
            && self.exec(UPDATE_LAST_SUCCESS, params![st.schedule, ms_opt(st.last_success)])? == 1
        {
            self.states.put(st);
            return Ok(());
        }
        let params = params![
            st.schedule,
            ms_opt(st.last_evaluated),
            st.circuit,
            ms_opt(st.circuit_changed_at),
            st.consecutive_failures,
            st.paused,
            st.paused_reason,
            st.concurrency_divisor,
            ms_opt(st.last_start),
            ms_opt(st.last_success),
        ];
        if self.exec(UPDATE_SCHEDULE_STATE, params)? == 0 {
            self.exec(PUT_SCHEDULE_STATE, params)?;
        }
        self.states.put(st);
        Ok(())
    }

    /// Records that an attempt of `schedule` started at `at`.
    pub fn set_last_start(&self, schedule: &str, at: DateTime<Utc>) -> Result<()> {
        self.exec(
            "INSERT INTO schedule_state (schedule, last_start) VALUES (?1, ?2) \
             ON CONFLICT (schedule) DO UPDATE SET last_start = excluded.last_start",
            params![schedule, Ms(at)],
        )?;
        self.states
            .update(schedule, |st| st.last_start = Some(stored(at)));
        Ok(())
    }

    /// Records the last instant the time layer of `schedule` was evaluated up
    /// to, leaving the rest of its state alone.
    pub fn set_last_evaluated(&self, schedule: &str, at: DateTime<Utc>) -> Result<()> {
        write_last_evaluated(self.conn(), schedule, at)?;
        self.states
            .update(schedule, |st| st.last_evaluated = Some(stored(at)));
        Ok(())
    }

    /// A schedule first evaluated at `at` (its birth), with its cursor.
    pub fn set_born(&self, schedule: &str, cursor: DateTime<Utc>, at: DateTime<Utc>) -> Result<()> {
        self.exec(SET_BORN, params![schedule, Ms(cursor), Ms(at)])?;
        self.states
            .update(schedule, |st| st.last_evaluated = Some(stored(cursor)));
        Ok(())
    }

    /// When the schedule was first evaluated, if it ever was.
    pub fn born_at(&self, schedule: &str) -> Result<Option<DateTime<Utc>>> {
        let at = self
            .opt(BORN_AT, params![schedule], |r| r.get::<Option<Ms>>(0))?
            .flatten();
        Ok(at.map(|m| m.0))
    }

    /// The switch, if it was ever set.
    pub fn switch(&self, name: &str) -> Result<Option<Switch>> {
        self.opt(SWITCH, params![name], switch_from_row)
    }

    /// Every switch ever set, by name.
    pub fn switches(&self) -> Result<Vec<Switch>> {
        self.all(SWITCHES, params![], switch_from_row)
    }

    /// Turns a switch on or off (the global kill switch is `kill`) and appends
    /// a `switch_changed` event `{name, on, actor, reason}`.
    pub fn set_switch(
        &self,
        name: &str,
        on: bool,
        actor: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.exec(SET_SWITCH, params![name, on, actor, reason, Ms(now)])?;
        let changed = crate::core::planner::switch_changed(name, None, on, actor, reason);
        self.append_event(&NewEvent::of(now, changed))?;
        Ok(())
    }

    /// Records an approve / reject decision (who, why, when). Appends no event:
    /// the caller's transition carries `approved` / `rejected`. Unknown run →
    /// `RunNotFound`.
    pub fn record_approval(&self, a: &Approval) -> Result<()> {
        let exists = self.opt(RUN_EXISTS, params![a.run_id], |_| Ok(()))?;
        if exists.is_none() {
            return Err(StoreError::RunNotFound(a.run_id));
        }
        self.exec(
            INSERT_APPROVAL,
            params![a.run_id, a.approved, a.actor, a.reason, a.resume_after, Ms(a.at)],
        )?;
        Ok(())
    }

    /// The run's approval decisions, oldest first.
    pub fn approvals(&self, run_id: i64) -> Result<Vec<Approval>> {
        self.all(APPROVALS_OF_RUN, params![run_id], |r| {
            Ok(Approval {
                run_id: r.get(0)?,
                approved: r.get(1)?,
                actor: r.get(2)?,
                reason: r.get(3)?,
                resume_after: r.get(4)?,
                at: ts(r, 5)?,
            })
        })
    }

    /// Adds an ad-hoc maintenance window `[from, to)` for `schedules` (empty =
    /// all) and appends a `switch_changed` event naming it (`name` =
    /// `"maintenance"`), so the trace explains the runs it holds. Returns its id.
    pub fn add_maintenance(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        reason: &str,
        actor: &str,
        schedules: &[String],
        now: DateTime<Utc>,
    ) -> Result<i64> {
        let list = serde_json::Value::from(schedules.to_vec()).to_string();
        let (_, id) = self.insert(
            INSERT_MAINTENANCE,
            params![Ms(from), Ms(to), reason, actor, list, Ms(now)],
        )?;
        self.append_event(&NewEvent::of(
            now,
            Event::SwitchChanged {
                name: "maintenance".into(),
                schedule: None,
                on: true,
                actor: actor.to_string(),
                reason: reason.to_string(),
                maintenance_id: Some(id),
                from: Some(from),
                to: Some(to),
                schedules: Some(schedules.to_vec()),
            },
        ))?;
        Ok(id)
    }

    /// Maintenance windows in force at `at` (`from <= at < to`).
    pub fn maintenance_at(&self, at: DateTime<Utc>) -> Result<Vec<Maintenance>> {
        self.all(MAINTENANCE_AT, params![Ms(at)], maintenance_from_row)
    }

    /// Every ad-hoc maintenance window, by start.
    pub fn maintenance_list(&self) -> Result<Vec<Maintenance>> {
        self.all(MAINTENANCE_LIST, params![], maintenance_from_row)
    }
}

/// Writes `schedule`'s cursor alone (the row made if missing).
pub(crate) fn write_last_evaluated(
    conn: super::exec::Conn<'_>,
    schedule: &str,
    at: DateTime<Utc>,
) -> Result<()> {
    let params = rusqlite::params![schedule, Ms(at)];
    if conn.exec(UPDATE_LAST_EVALUATED, params)? == 0 {
        conn.exec(SET_LAST_EVALUATED, params)?;
    }
    Ok(())
}
