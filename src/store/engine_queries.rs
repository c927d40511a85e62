//! Small queries the engine's loop needs besides the core ledger API: waking
//! runs held by a freed slot, the next lease to expire, one posted event.

use super::exec::Row;
use super::exec::stmt;
use super::sql::{Ms, ts};
use super::types::*;
use super::{Result, Tx};
use chrono::{DateTime, Utc};
use rusqlite::params;

/// The engine's hot queries here, for [`Tx::hot_query_plans`].
pub(crate) const HOT_QUERIES: &[(&str, &str)] = &[
    ("buffered_runs", super::sqlite::engine_queries::BUFFERED_RUNS),
    ("has_newer_run", super::sqlite::engine_queries::HAS_NEWER_RUN),
    (
        "quota_held (on time)",
        super::sqlite::engine_queries::QUOTA_HELD_ON_TIME,
    ),
    (
        "quota_held (backfill)",
        super::sqlite::engine_queries::QUOTA_HELD_BACKFILL,
    ),
    (
        "quota_held_of (on time)",
        super::sqlite::engine_queries::QUOTA_HELD_OF_ON_TIME,
    ),
    (
        "quota_held_of (backfill)",
        super::sqlite::engine_queries::QUOTA_HELD_OF_BACKFILL,
    ),
];

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
        // Most ends free a slot nobody waits for (or only runs left to the
        // caller): one read of the index answers that, where the UPDATEs
        // open write cursors on every index of `runs` even when they change
        // nothing.
        let (probe, head, catchup) = if own_quota {
            (
                stmt!(engine_queries::WAITING_PROBE),
                stmt!(engine_queries::WAKE_HEAD),
                stmt!(engine_queries::WAKE_CATCHUP),
            )
        } else {
            (
                stmt!(engine_queries::WAITING_PROBE_BUT_QUOTA),
                stmt!(engine_queries::WAKE_HEAD_BUT_QUOTA),
                stmt!(engine_queries::WAKE_CATCHUP_BUT_QUOTA),
            )
        };
        let waiting = self.opt(probe, params![Ms(now), schedule], |_| Ok(()))?.is_some();
        let mut woken = 0;
        if waiting {
            // One statement per index: an UPDATE with ORs made SQLite scan every run.
            // Only the head of the on-time queue (its `backfill` oldest runs,
            // a retry only once its backoff is over): waking every waiting
            // run re-decided a queue of N runs at each of its N ends.
            woken += self.exec(&self.limited(head, 3, backfill), params![Ms(now), schedule])?;
            // The oldest catch-up runs so held.
            woken += self.exec(&self.limited(catchup, 3, backfill), params![Ms(now), schedule])?;
        }
        let mut by_quota = 0;
        if quota {
            by_quota += self.exec(
                &self.limited(stmt!(engine_queries::WAKE_QUOTA_ON_TIME), 3, backfill),
                params![Ms(now)],
            )?;
            by_quota += self.exec(
                &self.limited(stmt!(engine_queries::WAKE_QUOTA_CATCHUP), 3, backfill),
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
            Pool::OnTime => stmt!(engine_queries::QUOTA_HELD_ON_TIME),
            Pool::Backfill => stmt!(engine_queries::QUOTA_HELD_BACKFILL),
        };
        // The limit in the text too (a handful of distinct values).
        self.all(&self.limited(sql, 1, n), params![], |r| held_run(r, pool))
    }

    /// The waiting runs of `schedule` in `pool` held by a quota, longest
    /// waiting first, at most `n`: a freed slot's own schedule's candidates,
    /// as [`Tx::quota_held`] reads them.
    pub fn quota_held_of(&self, schedule: &str, pool: Pool, n: usize) -> Result<Vec<HeldRun>> {
        // The pool and the limit in the text, as in `quota_held`.
        let sql = match pool {
            Pool::OnTime => stmt!(engine_queries::QUOTA_HELD_OF_ON_TIME),
            Pool::Backfill => stmt!(engine_queries::QUOTA_HELD_OF_BACKFILL),
        };
        self.all(&self.limited(sql, 2, n), params![schedule], |r| held_run(r, pool))
    }

    /// Brings the next check of these waiting runs forward to `now`.
    pub fn wake_runs(&self, ids: &[i64], now: DateTime<Utc>) -> Result<usize> {
        let mut n = 0;
        for id in ids {
            n += self.exec(stmt!(engine_queries::WAKE_RUN), params![Ms(now), id])?;
        }
        Ok(n)
    }

    /// The soonest lease expiry among running runs (for the zombie sweep's wake-up).
    pub fn next_lease_expiry(&self) -> Result<Option<DateTime<Utc>>> {
        let at = self.opt(stmt!(engine_queries::NEXT_LEASE_EXPIRY), params![], |r| {
            r.get::<Ms>(0)
        })?;
        Ok(at.map(|m| m.0))
    }

    /// One posted event by name and id.
    pub fn posted_event(&self, name: &str, event_id: &str) -> Result<Option<PostedEvent>> {
        self.opt(
            stmt!(engine_queries::POSTED_EVENT),
            params![name, event_id],
            |r| super::sql::posted_from_cols(r),
        )
    }

    /// Pending runs of a schedule held by an overlap buffer, oldest first.
    pub fn buffered_runs(&self, tenant: &str, schedule: &str) -> Result<Vec<i64>> {
        self.all(
            stmt!(engine_queries::BUFFERED_RUNS),
            params![tenant, schedule],
            |r| r.get(0),
        )
    }

    /// The window key of a pending on-time window of the schedule, if one is
    /// waiting (catch-up runs of the schedule wait for it: on-time first).
    pub fn pending_on_time(&self, schedule: &str) -> Result<Option<String>> {
        self.opt(stmt!(engine_queries::PENDING_ON_TIME), params![schedule], |r| {
            r.get(0)
        })
    }

    /// Running runs by schedule and tenant: counted in one pass over the
    /// running runs, then kept up in the engine's model by its claims and
    /// ends for as long as nothing else writes (see `engine::model::Model`).
    /// Hold the answer only briefly: while it is held, each claim or end
    /// copies the counts.
    pub fn running_by_schedule(&self) -> Result<std::sync::Arc<RunningCounts>> {
        if let Some(kept) = self.model.running() {
            return Ok(kept);
        }
        let mut counts = RunningCounts::default();
        self.each(stmt!(engine_queries::RUNNING_BY_SCHEDULE), params![], |row| {
            let (tenant, schedule, pool): (String, String, Pool) = (row.get(0)?, row.get(1)?, row.get(2)?);
            counts.add(&tenant, &schedule, pool, true);
            Ok(true)
        })?;
        Ok(self.model.keep_running(counts))
    }

    /// Whether a newer window than `after` exists for the schedule (catch-up `latest`).
    pub fn has_newer_run(&self, tenant: &str, schedule: &str, after: DateTime<Utc>) -> Result<bool> {
        Ok(self
            .opt(
                stmt!(engine_queries::HAS_NEWER_RUN),
                params![tenant, schedule, Ms(after)],
                |_| Ok(()),
            )?
            .is_some())
    }
}

impl Tx<'_> {
    /// Brings forward the next check of every pending / retry_wait run of a
    /// schedule (`None`: of all schedules) to `now`, after a resume or unkill.
    /// Does not touch their state; a retry still waits for its `not_before`.
    pub fn recheck_all(&self, schedule: Option<&str>, now: DateTime<Utc>) -> Result<usize> {
        self.exec(stmt!(engine_queries::RECHECK_ALL), params![Ms(now), schedule])
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
