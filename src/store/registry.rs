//! The scheduler registry table (`schedulers`, schema 7): who runs on this
//! database, refreshed every heartbeat. What a row means (alive, stopped,
//! lost) is [`crate::core::registry`]'s to say; this module only reads and
//! writes rows.

use super::exec::Row;
use super::exec::stmt;
use super::sql::{Ms, ts, ts_opt};
use super::{Result, Tx};
use crate::core::registry::SchedulerRecord;
use chrono::{DateTime, TimeDelta, Utc};
use rusqlite::params;

/// Rows of schedulers gone for longer than this are dropped when one registers,
/// so a database restarted daily for years keeps a short registry.
const FORGET_AFTER: TimeDelta = TimeDelta::days(7);

fn from_row(r: &Row<'_>) -> rusqlite::Result<SchedulerRecord> {
    from_row_cols(r)
}

pub(crate) fn from_row_cols<R: super::sql::Cols + ?Sized>(r: &R) -> rusqlite::Result<SchedulerRecord> {
    Ok(SchedulerRecord {
        owner: r.col(0)?,
        host: r.col(1)?,
        pid: r.col(2)?,
        version: r.col(3)?,
        config_hash: r.col(4)?,
        heartbeat_ms: r.col(5)?,
        started_at: ts(r, 6)?,
        last_seen: ts(r, 7)?,
        stopped_at: ts_opt(r, 8)?,
        lost_at: ts_opt(r, 9)?,
        lost_by: r.col(10)?,
    })
}

impl Tx<'_> {
    /// Writes (or rewrites) this scheduler's row at its start.
    pub fn register_scheduler(&self, rec: &SchedulerRecord) -> Result<()> {
        self.exec(
            stmt!(registry::FORGET),
            params![Ms(rec.started_at - FORGET_AFTER)],
        )?;
        self.exec(
            stmt!(registry::REGISTER),
            params![
                rec.owner,
                rec.host,
                rec.pid,
                rec.version,
                rec.config_hash,
                rec.heartbeat_ms,
                Ms(rec.started_at),
                Ms(rec.last_seen),
            ],
        )?;
        Ok(())
    }

    /// Refreshes `last_seen`; `false` when the row is missing or stopped
    /// (someone deleted it: register again).
    pub fn scheduler_seen(&self, owner: &str, now: DateTime<Utc>) -> Result<bool> {
        Ok(self.exec(stmt!(registry::SEEN), params![owner, Ms(now)])? == 1)
    }

    /// A clean stop.
    pub fn scheduler_stopped(&self, owner: &str, now: DateTime<Utc>) -> Result<()> {
        self.exec(stmt!(registry::STOPPED), params![owner, Ms(now)])?;
        Ok(())
    }

    /// Marks `owner` lost as seen by `by`, if it still is as `last_seen` says
    /// and nobody marked it yet; `true` when this call did.
    pub fn mark_scheduler_lost(
        &self,
        owner: &str,
        last_seen: DateTime<Utc>,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        Ok(self.exec(
            stmt!(registry::MARK_LOST),
            params![owner, Ms(last_seen), Ms(now), by],
        )? == 1)
    }

    /// Every registered scheduler, oldest start first.
    pub fn schedulers(&self) -> Result<Vec<SchedulerRecord>> {
        self.all(stmt!(registry::ALL), params![], from_row)
    }
}
