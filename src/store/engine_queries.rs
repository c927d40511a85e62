//! Small queries the engine's loop needs besides the core ledger API: waking
//! runs held by a freed slot, the next lease to expire, one posted event.

use super::exec::Row;
use super::sql::{Ms, ts, with_limit};
use super::types::*;
use super::{Result, Tx};
use chrono::{DateTime, Utc};
use rusqlite::params;

/// Holds an attempt's end may lift; see `HoldKind::woken_by_an_end`.
macro_rules! slot_holds {
    () => {
        "'quota', 'overlap', 'circuit', 'on_time'"
    };
}
macro_rules! slot_holds_but_quota {
    () => {
        "'overlap', 'circuit', 'on_time'"
    };
}
const SLOT_HOLDS: &str = concat!("hold IN (", slot_holds!(), ")");
const SLOT_HOLDS_BUT_QUOTA: &str = concat!("hold IN (", slot_holds_but_quota!(), ")");
/// Whether a schedule has runs [`Tx::recheck_held`] would wake.
macro_rules! waiting_probe_sql {
    ($holds:expr) => {
        concat!(
            "SELECT 1 FROM runs INDEXED BY runs_waiting \
             WHERE schedule = ?2 AND state IN ('pending', 'retry_wait') AND next_check_at > ?1 \
               AND hold IN (",
            $holds,
            ") LIMIT 1"
        )
    };
}
const WAITING_PROBE: &str = waiting_probe_sql!(slot_holds!());
const WAITING_PROBE_BUT_QUOTA: &str = waiting_probe_sql!(slot_holds_but_quota!());

/// The quota-held runs of one pool (with `schedule = ?1`, of one schedule),
/// the pool and the limit written into the text: with the limit bound
/// (`LIMIT ?1`), SQLite prepared the statement again at every execution
/// (`sqlite3Reprepare`, an eighth of the outage drain's time).
macro_rules! quota_held_sql {
    ($index:literal, $schedule:literal, $pool:literal, $limit:literal) => {
        concat!(
            "SELECT id, schedule, due_at FROM runs INDEXED BY ",
            $index,
            " WHERE ",
            $schedule,
            "pool = '",
            $pool,
            "' AND state IN ('pending', 'retry_wait') \
             AND next_check_at IS NOT NULL AND hold = 'quota' ORDER BY due_at, id LIMIT ",
            $limit
        )
    };
}
const QUOTA_HELD_ON_TIME: &str = quota_held_sql!("runs_quota_held", "", "on_time", "?1");
const QUOTA_HELD_BACKFILL: &str = quota_held_sql!("runs_quota_held", "", "backfill", "?1");
const QUOTA_HELD_OF_ON_TIME: &str = quota_held_sql!(
    "runs_quota_held_by_schedule",
    "schedule = ?1 AND ",
    "on_time",
    "?2"
);
const QUOTA_HELD_OF_BACKFILL: &str = quota_held_sql!(
    "runs_quota_held_by_schedule",
    "schedule = ?1 AND ",
    "backfill",
    "?2"
);

/// Pending runs of a schedule held by an overlap buffer, oldest first
/// (`runs_window`, whose half of the runs they are: schema 16).
const BUFFERED_RUNS: &str = "SELECT id FROM runs WHERE tenant = ?1 AND schedule = ?2 \
     AND state = 'pending' AND state <> 'running' AND hold = 'overlap' ORDER BY window_start, id";
/// A run of the schedule with a newer window, in either half of its runs.
const HAS_NEWER_RUN: &str = "SELECT 1 FROM runs WHERE tenant = ?1 AND schedule = ?2 \
     AND window_start > ?3 AND state <> 'running' \
     UNION ALL SELECT 1 FROM runs WHERE tenant = ?1 AND schedule = ?2 \
     AND window_start > ?3 AND state = 'running' LIMIT 1";

/// The engine's hot queries here, for [`Tx::hot_query_plans`].
pub(crate) const HOT_QUERIES: &[(&str, &str)] = &[
    ("buffered_runs", BUFFERED_RUNS),
    ("has_newer_run", HAS_NEWER_RUN),
    ("quota_held (on time)", QUOTA_HELD_ON_TIME),
    ("quota_held (backfill)", QUOTA_HELD_BACKFILL),
    ("quota_held_of (on time)", QUOTA_HELD_OF_ON_TIME),
    ("quota_held_of (backfill)", QUOTA_HELD_OF_BACKFILL),
];

/// One posted event by its name and id.
pub(crate) const POSTED_EVENT: &str = "SELECT seq, name, event_id, payload, arrived_at FROM posted_events \
     WHERE name = ?1 AND event_id = ?2";

impl Tx<'_> {
    /// Brings forward to `now` the next check of the runs a freed slot of
    /// `schedule` may admit: the oldest `backfill` of its on-time runs held
    /// by overlap, a quota or the circuit probe (the head of its queue), and
    /// the oldest `backfill` of its catch-up backlog; with
    /// `quota`, also the `backfill` runs of any schedule held by a quota longest
    /// (on-time by next check, catch-up by window). Waking everything held on every attempt
    /// end re-decided whole backlogs each time. Does not touch their state.
    /// Without `own_quota`, the schedule's own runs held by a quota are left
    /// to the caller, which wakes only those a free place admits
    /// ([`Tx::quota_held_of`]): woken here, all but one of them were decided
    /// again only to be held again (after an outage, most of the drain's
    /// decisions). Returns (runs woken, of them held by a quota).
    pub fn recheck_held(
        &self,
        schedule: &str,
        backfill: usize,
        quota: bool,
        own_quota: bool,
        now: DateTime<Utc>,
    ) -> Result<(usize, usize)> {
        let holds = if own_quota {
            SLOT_HOLDS
        } else {
            SLOT_HOLDS_BUT_QUOTA
        };
        // The oldest catch-up runs so held: of one schedule through its waiting
        // runs (runs_waiting), of any schedule in window order.
        let oldest = |index: &str, only: &str| {
            format!(
                "UPDATE runs SET next_check_at = ?1 WHERE next_check_at > ?1 AND id IN ( \
                   SELECT id FROM runs INDEXED BY {index} \
                   WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill' AND {only} \
                   ORDER BY window_start, id LIMIT ?3)"
            )
        };
        // Most ends free a slot nobody waits for (or only runs left to the
        // caller): one read of the index answers that, where the UPDATEs
        // open write cursors on every index of `runs` even when they change
        // nothing.
        let probe = if own_quota {
            WAITING_PROBE
        } else {
            WAITING_PROBE_BUT_QUOTA
        };
        let waiting = self.opt(probe, params![Ms(now), schedule], |_| Ok(()))?.is_some();
        let mut woken = 0;
        if waiting {
            // One statement per index: an UPDATE with ORs made SQLite scan every run.
            // Only the head of the on-time queue (its `backfill` oldest runs,
            // a retry only once its backoff is over): waking every waiting
            // run re-decided a queue of N runs at each of its N ends.
            let own = format!(
                "UPDATE runs SET next_check_at = ?1 WHERE next_check_at > ?1 AND id IN ( \
                   SELECT id FROM runs INDEXED BY runs_waiting \
                   WHERE schedule = ?2 AND state IN ('pending', 'retry_wait') AND pool = 'on_time' \
                     AND {holds} AND (state = 'pending' OR not_before IS NULL OR not_before <= ?1) \
                   ORDER BY id LIMIT ?3)"
            );
            woken += self.exec(&with_limit(&own, "?3", backfill), params![Ms(now), schedule])?;
            woken += self.exec(
                &with_limit(
                    &oldest("runs_waiting", &format!("schedule = ?2 AND {holds}")),
                    "?3",
                    backfill,
                ),
                params![Ms(now), schedule],
            )?;
        }
        let mut by_quota = 0;
        if quota {
            by_quota += self.exec(
                &with_limit(
                    "UPDATE runs SET next_check_at = ?1 WHERE id IN ( \
                       SELECT id FROM runs INDEXED BY runs_due_on_time \
                       WHERE state IN ('pending', 'retry_wait') AND pool = 'on_time' \
                         AND next_check_at > ?1 AND hold = 'quota' \
                       ORDER BY next_check_at, id LIMIT ?3)",
                    "?3",
                    backfill,
                ),
                params![Ms(now)],
            )?;
            by_quota += self.exec(
                &with_limit(&oldest("runs_due_backfill", "hold = 'quota'"), "?3", backfill),
                params![Ms(now)],
            )?;
        }
        Ok((woken + by_quota, by_quota))
    }

    /// Waiting runs of `pool` held by a quota, longest waiting (earliest
    /// due) first, at most `n`: the candidates for a freed slot. Only what
    /// choosing among them needs: after an outage this is read at every
    /// attempt's end, and decoding whole runs was most of its cost.
    pub fn quota_held(&self, pool: Pool, n: usize) -> Result<Vec<HeldRun>> {
        let sql = match pool {
            Pool::OnTime => QUOTA_HELD_ON_TIME,
            Pool::Backfill => QUOTA_HELD_BACKFILL,
        };
        // The limit in the text too (a handful of distinct values).
        self.all(&with_limit(sql, "?1", n), params![], |r| held_run(r, pool))
    }

    /// The waiting runs of `schedule` in `pool` held by a quota, longest
    /// waiting first, at most `n`: a freed slot's own schedule's candidates,
    /// as [`Tx::quota_held`] reads them.
    pub fn quota_held_of(&self, schedule: &str, pool: Pool, n: usize) -> Result<Vec<HeldRun>> {
        // The pool and the limit in the text, as in `quota_held`.
        let sql = match pool {
            Pool::OnTime => QUOTA_HELD_OF_ON_TIME,
            Pool::Backfill => QUOTA_HELD_OF_BACKFILL,
        };
        self.all(&with_limit(sql, "?2", n), params![schedule], |r| {
            held_run(r, pool)
        })
    }

    /// Brings the next check of these waiting runs forward to `now`.
    pub fn wake_runs(&self, ids: &[i64], now: DateTime<Utc>) -> Result<usize> {
        let sql = "UPDATE runs SET next_check_at = ?1 WHERE id = ?2 \
             AND state IN ('pending', 'retry_wait') AND next_check_at > ?1";
        let mut n = 0;
        for id in ids {
            n += self.exec(sql, params![Ms(now), id])?;
        }
        Ok(n)
    }

    /// The soonest lease expiry among running runs (for the zombie sweep's wake-up).
    pub fn next_lease_expiry(&self) -> Result<Option<DateTime<Utc>>> {
        let at = self.opt(
            "SELECT lease_expires FROM runs WHERE state = 'running' AND lease_expires IS NOT NULL \
             ORDER BY lease_expires LIMIT 1",
            params![],
            |r| r.get::<Ms>(0),
        )?;
        Ok(at.map(|m| m.0))
    }

    /// One posted event by name and id.
    pub fn posted_event(&self, name: &str, event_id: &str) -> Result<Option<PostedEvent>> {
        self.opt(POSTED_EVENT, params![name, event_id], |r| {
            super::sql::posted_from_cols(r)
        })
    }

    /// Pending runs of a schedule held by an overlap buffer, oldest first.
    pub fn buffered_runs(&self, tenant: &str, schedule: &str) -> Result<Vec<i64>> {
        self.all(BUFFERED_RUNS, params![tenant, schedule], |r| r.get(0))
    }

    /// The window key of a pending on-time window of the schedule, if one is
    /// waiting (catch-up runs of the schedule wait for it: on-time first).
    pub fn pending_on_time(&self, schedule: &str) -> Result<Option<String>> {
        self.opt(
            "SELECT window_key FROM runs INDEXED BY runs_waiting \
             WHERE schedule = ?1 AND state IN ('pending', 'retry_wait') AND state = 'pending' \
             AND pool = 'on_time' ORDER BY next_check_at LIMIT 1",
            params![schedule],
            |r| r.get(0),
        )
    }

    /// Running runs by schedule and tenant: counted in one pass over the
    /// running runs, then kept up by this store's claims and ends for as long
    /// as no other connection writes (see `db::StateCache`). Hold the answer
    /// only briefly: while it is held, each claim or end copies the counts.
    pub fn running_by_schedule(&self) -> Result<std::sync::Arc<RunningCounts>> {
        if let Some(kept) = self.states.running() {
            return Ok(kept);
        }
        let mut counts = RunningCounts::default();
        self.each(
            "SELECT tenant, schedule, pool FROM runs WHERE state = 'running'",
            params![],
            |row| {
                let (tenant, schedule, pool): (String, String, Pool) =
                    (row.get(0)?, row.get(1)?, row.get(2)?);
                counts.add(&tenant, &schedule, pool, true);
                Ok(true)
            },
        )?;
        Ok(self.states.keep_running(counts))
    }

    /// Whether a newer window than `after` exists for the schedule (catch-up `latest`).
    pub fn has_newer_run(&self, tenant: &str, schedule: &str, after: DateTime<Utc>) -> Result<bool> {
        Ok(self
            .opt(HAS_NEWER_RUN, params![tenant, schedule, Ms(after)], |_| Ok(()))?
            .is_some())
    }
}

impl Tx<'_> {
    /// Brings forward the next check of every pending / retry_wait run of a
    /// schedule (`None`: of all schedules) to `now`, after a resume or unkill.
    /// Does not touch their state; a retry still waits for its `not_before`.
    pub fn recheck_all(&self, schedule: Option<&str>, now: DateTime<Utc>) -> Result<usize> {
        self.exec(
            "UPDATE runs SET next_check_at = ?1 WHERE state IN ('pending', 'retry_wait') \
             AND (schedule = ?2 OR ?2 IS NULL) AND next_check_at > ?1",
            params![Ms(now), schedule],
        )
    }
}

/// A [`HeldRun`] from its columns (id, schedule, due_at).
fn held_run(r: &Row<'_>, pool: Pool) -> rusqlite::Result<HeldRun> {
    Ok(HeldRun {
        id: r.get(0)?,
        schedule: r.get(1)?,
        pool,
        due_at: ts(r, 2)?,
    })
}
