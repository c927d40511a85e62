//! What operators and the recovery rules set around runs: per-schedule state
//! (last evaluated instant, circuit, pause, concurrency divisor), switches,
//! approvals and ad-hoc maintenance windows.

use super::exec::Row;
use super::exec::stmt;
use super::sql::{Ms, json_value, ms_opt, stored, ts, ts_opt};
use super::types::*;
use super::{Result, StoreError, Tx};
use crate::core::event::Event;
use chrono::{DateTime, Utc};
use rusqlite::params;

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
    /// 1, never evaluated) if none was stored yet. Read once, then kept in the
    /// engine's model while nothing else writes (see `engine::model::Model`).
    pub fn schedule_state(&self, schedule: &str) -> Result<ScheduleState> {
        if let Some(st) = self.model.get(schedule) {
            return Ok(st);
        }
        let st = self.opt(
            stmt!(operator::SCHEDULE_STATE),
            params![schedule],
            schedule_state_from_row,
        )?;
        let st = st.unwrap_or_else(|| ScheduleState::new(schedule));
        self.model.put(&st);
        Ok(st)
    }

    /// The schedule's last success as [`Tx::schedule_state`] has it, without
    /// copying the whole state when it is kept.
    pub fn last_success(&self, schedule: &str) -> Result<Option<DateTime<Utc>>> {
        match self.model.last_success(schedule) {
            Some(at) => Ok(at),
            None => Ok(self.schedule_state(schedule)?.last_success),
        }
    }

    /// The states of `schedules`, in that order: the kept ones as they are,
    /// the others read one by one, or, when more than a few are not kept
    /// (a first tick of thousands), all rows in one pass.
    pub fn schedule_states(&self, schedules: &[&str]) -> Result<Vec<ScheduleState>> {
        const FEW: usize = 64;
        let missing = schedules.iter().filter(|s| !self.model.contains(s)).count();
        if missing > FEW {
            self.all_schedule_states()?;
        }
        schedules.iter().map(|s| self.schedule_state(s)).collect()
    }

    /// Every stored schedule state, by schedule name.
    pub fn all_schedule_states(&self) -> Result<Vec<ScheduleState>> {
        let all = self.all(
            stmt!(operator::ALL_SCHEDULE_STATES),
            params![],
            schedule_state_from_row,
        )?;
        for st in &all {
            self.model.put(st);
        }
        Ok(all)
    }

    /// Stores the whole state of `st.schedule` (insert or replace).
    pub fn put_schedule_state(&self, st: &ScheduleState) -> Result<()> {
        // Only the last success moved from the state kept as stored (a run's
        // success, most of the time): that column alone.
        if self.model.differs_in_last_success_only(st)
            && self.exec(
                stmt!(operator::UPDATE_LAST_SUCCESS),
                params![st.schedule, ms_opt(st.last_success)],
            )? == 1
        {
            self.model.put(st);
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
        if self.exec(stmt!(operator::UPDATE_SCHEDULE_STATE), params)? == 0 {
            self.exec(stmt!(operator::PUT_SCHEDULE_STATE), params)?;
        }
        self.model.put(st);
        Ok(())
    }

    /// Records that an attempt of `schedule` started at `at`.
    pub fn set_last_start(&self, schedule: &str, at: DateTime<Utc>) -> Result<()> {
        self.exec(stmt!(operator::SET_LAST_START), params![schedule, Ms(at)])?;
        self.model.update(schedule, |st| st.last_start = Some(stored(at)));
        Ok(())
    }

    /// Records the last instant the time layer of `schedule` was evaluated up
    /// to, leaving the rest of its state alone.
    pub fn set_last_evaluated(&self, schedule: &str, at: DateTime<Utc>) -> Result<()> {
        write_last_evaluated(self.conn(), schedule, at)?;
        self.model
            .update(schedule, |st| st.last_evaluated = Some(stored(at)));
        Ok(())
    }

    /// A schedule first evaluated at `at` (its birth), with its cursor.
    pub fn set_born(&self, schedule: &str, cursor: DateTime<Utc>, at: DateTime<Utc>) -> Result<()> {
        self.exec(stmt!(operator::SET_BORN), params![schedule, Ms(cursor), Ms(at)])?;
        self.model
            .update(schedule, |st| st.last_evaluated = Some(stored(cursor)));
        Ok(())
    }

    /// When the schedule was first evaluated, if it ever was.
    pub fn born_at(&self, schedule: &str) -> Result<Option<DateTime<Utc>>> {
        let at = self
            .opt(stmt!(operator::BORN_AT), params![schedule], |r| {
                r.get::<Option<Ms>>(0)
            })?
            .flatten();
        Ok(at.map(|m| m.0))
    }

    /// The switch, if it was ever set.
    pub fn switch(&self, name: &str) -> Result<Option<Switch>> {
        self.opt(stmt!(operator::SWITCH), params![name], switch_from_row)
    }

    /// Every switch ever set, by name.
    pub fn switches(&self) -> Result<Vec<Switch>> {
        self.all(stmt!(operator::SWITCHES), params![], switch_from_row)
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
        self.exec(
            stmt!(operator::SET_SWITCH),
            params![name, on, actor, reason, Ms(now)],
        )?;
        let changed = crate::core::planner::switch_changed(name, None, on, actor, reason);
        self.append_event(&NewEvent::of(now, changed))?;
        Ok(())
    }

    /// Records an approve / reject decision (who, why, when). Appends no event:
    /// the caller's transition carries `approved` / `rejected`. Unknown run →
    /// `RunNotFound`.
    pub fn record_approval(&self, a: &Approval) -> Result<()> {
        let exists = self.opt(stmt!(operator::RUN_EXISTS), params![a.run_id], |_| Ok(()))?;
        if exists.is_none() {
            return Err(StoreError::RunNotFound(a.run_id));
        }
        self.exec(
            stmt!(operator::INSERT_APPROVAL),
            params![a.run_id, a.approved, a.actor, a.reason, a.resume_after, Ms(a.at)],
        )?;
        Ok(())
    }

    /// The run's approval decisions, oldest first.
    pub fn approvals(&self, run_id: i64) -> Result<Vec<Approval>> {
        self.all(stmt!(operator::APPROVALS_OF_RUN), params![run_id], |r| {
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
            stmt!(operator::INSERT_MAINTENANCE),
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
        self.all(
            stmt!(operator::MAINTENANCE_AT),
            params![Ms(at)],
            maintenance_from_row,
        )
    }

    /// Every ad-hoc maintenance window, by start.
    pub fn maintenance_list(&self) -> Result<Vec<Maintenance>> {
        self.all(stmt!(operator::MAINTENANCE_LIST), params![], maintenance_from_row)
    }
}

/// Writes `schedule`'s cursor alone (the row made if missing).
pub(crate) fn write_last_evaluated(
    conn: super::exec::Conn<'_>,
    schedule: &str,
    at: DateTime<Utc>,
) -> Result<()> {
    let params = rusqlite::params![schedule, Ms(at)];
    if conn.exec(stmt!(operator::UPDATE_LAST_EVALUATED), params)? == 0 {
        conn.exec(stmt!(operator::SET_LAST_EVALUATED), params)?;
    }
    Ok(())
}
