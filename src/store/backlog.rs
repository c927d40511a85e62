//! The catch-up backlog: per schedule, the range of missed windows that are
//! planned for catch-up but not yet queued as runs (see schema V4). The engine
//! queues them oldest first, as many as the schedule may run at once.

use super::exec::Row;
use super::exec::stmt;
use super::sql::{Ms, ts};
use super::{Result, Tx};
use chrono::{DateTime, Utc};
use rusqlite::params;

/// Windows of `schedule` due from `next` to `until` (inclusive) wait to be queued.
#[derive(Debug, Clone, PartialEq)]
pub struct Backlog {
    pub schedule: String,
    pub next: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub planned_at: DateTime<Utc>,
}

fn backlog_from_row(r: &Row<'_>) -> rusqlite::Result<Backlog> {
    backlog_from_cols(r)
}

pub(crate) fn backlog_from_cols<R: super::sql::Cols + ?Sized>(r: &R) -> rusqlite::Result<Backlog> {
    Ok(Backlog {
        schedule: r.col(0)?,
        next: ts(r, 1)?,
        until: ts(r, 2)?,
        planned_at: ts(r, 3)?,
    })
}

impl Tx<'_> {
    /// Every schedule's backlog, by schedule.
    pub fn backlogs(&self) -> Result<Vec<Backlog>> {
        self.all(stmt!(backlog::ALL), params![], backlog_from_row)
    }

    /// The backlog of `schedule`, if it has one.
    pub fn backlog(&self, schedule: &str) -> Result<Option<Backlog>> {
        if let Some(kept) = self.model.backlog(schedule) {
            // Tests (debug builds) prove the kept row is the stored one.
            #[cfg(debug_assertions)]
            {
                let stored = self.opt(stmt!(backlog::ONE), params![schedule], backlog_from_row)?;
                assert_eq!(stored, kept, "the backlog kept differs from its row");
            }
            return Ok(kept);
        }
        let b = self.opt(stmt!(backlog::ONE), params![schedule], backlog_from_row)?;
        self.model.keep_backlog(schedule, b.clone());
        Ok(b)
    }

    /// Sets (or replaces) the backlog of `b.schedule`.
    pub fn put_backlog(&self, b: &Backlog) -> Result<()> {
        self.exec(
            stmt!(backlog::PUT_BACKLOG),
            params![b.schedule, Ms(b.next), Ms(b.until), Ms(b.planned_at)],
        )?;
        self.model.keep_backlog(&b.schedule, Some(b.clone()));
        Ok(())
    }

    /// The backlog of `schedule` now starts at `next` (its windows before
    /// it are queued). `false` if it has no backlog.
    pub fn advance_backlog(&self, schedule: &str, next: DateTime<Utc>) -> Result<bool> {
        let changed = self.exec(stmt!(backlog::ADVANCE_BACKLOG), params![schedule, Ms(next)])?;
        match self.model.backlog(schedule) {
            Some(Some(b)) if changed == 1 => self.model.keep_backlog(schedule, Some(Backlog { next, ..b })),
            _ => self.model.forget_backlog(schedule),
        }
        Ok(changed == 1)
    }

    /// The backlog of `schedule` is all queued.
    pub fn clear_backlog(&self, schedule: &str) -> Result<()> {
        self.exec(stmt!(backlog::CLEAR_BACKLOG), params![schedule])?;
        self.model.keep_backlog(schedule, None);
        Ok(())
    }

    /// Catch-up runs of `schedule` queued and not finished: running, or
    /// waiting / retrying for a window older than `older_than` (the backlog's
    /// next window).
    pub fn unfinished_catchup(&self, schedule: &str, older_than: DateTime<Utc>) -> Result<usize> {
        // Waiting catch-up runs of windows younger than the backlog (an on-time
        // window missed since) do not hold its place: older windows go first.
        let waiting: i64 = self.one(
            stmt!(backlog::UNFINISHED_CATCHUP),
            params![schedule, Ms(older_than)],
            |r| r.get(0),
        )?;
        // Running: from the counts kept in memory (one pass over the running
        // runs when another connection has written since).
        let counts = self.running_by_schedule()?;
        let on_time = counts.on_time_by_schedule.get(schedule).copied().unwrap_or(0);
        let running = i64::from(counts.of_schedule(schedule).saturating_sub(on_time));
        Ok(usize::try_from(waiting + running).unwrap_or(0))
    }
}
