//! Small queries the engine's loop needs besides the core ledger API: waking
//! runs held by a freed slot, the next lease to expire, one posted event.

use super::sql::{Ms, json_value, ts};
use super::types::*;
use super::{Result, Tx};
use chrono::{DateTime, Utc};
use rusqlite::OptionalExtension;

/// Hold reasons that end when a running attempt ends (a slot frees up).
const SLOT_HOLDS: &str = "(state_reason LIKE 'quota:%' OR state_reason LIKE 'overlap:%' \
     OR state_reason LIKE 'circuit:%')";

impl Tx<'_> {
    /// Brings forward to `now` the next check of the runs a freed slot may
    /// admit: every on-time run held by a quota, overlap or circuit probe, and
    /// of the catch-up backlog only the oldest `backfill` so held (of
    /// `schedule`, and of any schedule for a quota) — waking a backlog of
    /// thousands on every attempt end would re-decide all of it each time.
    /// Does not touch their state. Returns how many were woken.
    pub fn recheck_held(&self, schedule: &str, backfill: usize, now: DateTime<Utc>) -> Result<usize> {
        // Three statements, each on its own index: one UPDATE with ORs made
        // SQLite scan the whole runs table.
        let on_time = format!(
            "UPDATE runs INDEXED BY runs_due_on_time SET next_check_at = ?1 \
             WHERE state IN ('pending', 'retry_wait') AND pool = 'on_time' \
               AND next_check_at > ?1 AND {SLOT_HOLDS}"
        );
        let oldest = |only: &str| {
            format!(
                "UPDATE runs SET next_check_at = ?1 WHERE next_check_at > ?1 AND id IN ( \
                   SELECT id FROM runs INDEXED BY runs_due_backfill \
                   WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill' AND {only} \
                   ORDER BY window_start, id LIMIT ?2)"
            )
        };
        let of_schedule = oldest(&format!("schedule = ?3 AND {SLOT_HOLDS}"));
        let by_quota = oldest("state_reason LIKE 'quota:%' AND ?3 IS NOT NULL");
        let n = i64::try_from(backfill).unwrap_or(i64::MAX);
        let mut woken = self
            .conn
            .prepare_cached(&on_time)?
            .execute(rusqlite::params![Ms(now)])?;
        for sql in [of_schedule, by_quota] {
            woken += self
                .conn
                .prepare_cached(&sql)?
                .execute(rusqlite::params![Ms(now), n, schedule])?;
        }
        Ok(woken)
    }

    /// The soonest lease expiry among running runs (for the zombie sweep's wake-up).
    pub fn next_lease_expiry(&self) -> Result<Option<DateTime<Utc>>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT lease_expires FROM runs WHERE state = 'running' AND lease_expires IS NOT NULL \
             ORDER BY lease_expires LIMIT 1",
        )?;
        Ok(stmt.query_row([], |r| r.get::<_, Ms>(0)).optional()?.map(|m| m.0))
    }

    /// One posted event by name and id.
    pub fn posted_event(&self, name: &str, event_id: &str) -> Result<Option<PostedEvent>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, name, event_id, payload, arrived_at FROM posted_events \
             WHERE name = ?1 AND event_id = ?2",
        )?;
        Ok(stmt
            .query_row(rusqlite::params![name, event_id], |r| {
                Ok(PostedEvent {
                    seq: r.get(0)?,
                    name: r.get(1)?,
                    event_id: r.get(2)?,
                    payload: json_value(r.get(3)?),
                    arrived_at: ts(r, 4)?,
                })
            })
            .optional()?)
    }

    /// Pending runs of a schedule held by an overlap buffer, oldest first.
    pub fn buffered_runs(&self, tenant: &str, schedule: &str) -> Result<Vec<i64>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id FROM runs WHERE tenant = ?1 AND schedule = ?2 AND state = 'pending' \
             AND state_reason LIKE 'overlap:%' ORDER BY window_start, id",
        )?;
        let rows = stmt.query_map(rusqlite::params![tenant, schedule], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<i64>>>()?)
    }

    /// Whether a newer window than `after` exists for the schedule (catch-up `latest`).
    pub fn has_newer_run(&self, tenant: &str, schedule: &str, after: DateTime<Utc>) -> Result<bool> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT 1 FROM runs WHERE tenant = ?1 AND schedule = ?2 AND window_start > ?3 LIMIT 1",
        )?;
        Ok(stmt
            .query_row(rusqlite::params![tenant, schedule, Ms(after)], |_| Ok(()))
            .optional()?
            .is_some())
    }
}

impl Tx<'_> {
    /// Brings forward the next check of every pending / retry_wait run of a
    /// schedule (`None`: of all schedules) to `now`, after a resume or unkill.
    /// Does not touch their state; a retry still waits for its `not_before`.
    pub fn recheck_all(&self, schedule: Option<&str>, now: DateTime<Utc>) -> Result<usize> {
        let mut stmt = self.conn.prepare_cached(
            "UPDATE runs SET next_check_at = ?1 WHERE state IN ('pending', 'retry_wait') \
             AND (?2 IS NULL OR schedule = ?2) AND next_check_at > ?1",
        )?;
        Ok(stmt.execute(rusqlite::params![Ms(now), schedule])?)
    }
}
