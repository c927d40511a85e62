//! Runs: creation (deduped per window), lookups for the engine's hot paths, and
//! [`Tx::transition`], the one function that changes a run's state.

use super::exec::stmt;
use super::exec::{Dialect, Params, Row, Sql};
use super::sql::{Ms, limit, ms_opt, run_cols, run_from_cols, stored};
use super::types::*;
use super::{Result, StoreError, Tx};
use chrono::{DateTime, Utc};
use rusqlite::params;
use rusqlite::types::{ToSql, Value};
use std::collections::HashMap;

/// States a run may be created in: a live window, or one already decided by
/// the calendar, catch-up or expiry. Anything else needs an attempt first.
const CREATABLE: [RunState; 4] = [
    RunState::Pending,
    RunState::Skipped,
    RunState::Missed,
    RunState::Expired,
];

/// The queries the engine runs every tick, named for [`Tx::hot_query_plans`].
pub(crate) const HOT_QUERIES: &[(&str, &str)] = &[
    ("due_runs (on time)", super::sqlite::runs::DUE_ON_TIME),
    (
        "due_runs (catch-up, by check)",
        super::sqlite::runs::DUE_BACKFILL_BY_CHECK,
    ),
    ("next_due_check (on time)", super::sqlite::runs::NEXT_DUE_ON_TIME),
    (
        "next_due_check (catch-up)",
        super::sqlite::runs::NEXT_DUE_BACKFILL,
    ),
    ("previous_run", super::sqlite::runs::PREVIOUS_RUN),
    ("previous_run (running)", super::sqlite::runs::PREVIOUS_RUNNING),
    ("count_running", super::sqlite::runs::COUNT_RUNNING),
    ("running_counts", super::sqlite::runs::RUNNING_PAIRS),
    ("running_runs", super::sqlite::runs::RUNNING_RUNS),
    ("expired_leases", super::sqlite::runs::EXPIRED_LEASES),
    ("recent_runs", super::sqlite::runs::RECENT_RUNS),
    ("execution_memory", super::sqlite::runs::EXECUTION_MEMORY),
    ("run", super::sqlite::runs::RUN_BY_ID),
    ("transition (a running run ends)", super::sqlite::runs::END_RUN),
    ("find_run", super::sqlite::runs::RUN_BY_WINDOW),
];

/// When a new run is first looked at: a pending run without
/// `next_check_at` at its due instant.
fn first_check(new: &NewRun) -> Option<DateTime<Utc>> {
    match new.state {
        RunState::Pending => Some(new.next_check_at.unwrap_or(new.due_at)),
        RunState::Missed => new.next_check_at,
        _ => None,
    }
}

/// The run [`Tx::insert_run`] writes for `new` at `now` under `id`, as
/// stored (instants to the millisecond): what the engine decides a window
/// that opens now by before its row exists (see [`Tx::open_claimed`]).
pub fn opened_run(new: &NewRun, id: i64, now: DateTime<Utc>) -> Run {
    Run {
        id,
        tenant: new.tenant.clone(),
        schedule: new.schedule.clone(),
        window_key: new.window_key.clone(),
        window_start: stored(new.window_start),
        window_end: stored(new.window_end),
        due_at: stored(new.due_at),
        state: new.state,
        reason: new.reason,
        pool: new.pool,
        state_reason: new.state_reason.clone(),
        attempts: 0,
        not_before: None,
        next_check_at: first_check(new).map(stored),
        lease_owner: None,
        lease_expires: None,
        fencing_token: 0,
        error_class: None,
        last_error: None,
        resume_after: None,
        created_at: stored(now),
        updated_at: stored(now),
        hold: None,
    }
}

fn run_from_row(r: &Row<'_>) -> rusqlite::Result<Run> {
    run_from_cols(r)
}

impl Tx<'_> {
    fn query_runs<'s>(&self, sql: impl Into<Sql<'s>>, params: Params<'_>) -> Result<Vec<Run>> {
        self.all(sql, params, run_from_row)
    }

    /// Creates the run for a window unless one exists (unique on tenant,
    /// schedule, window key): `Some(run)` if created, `None` if it existed.
    /// A pending run without `next_check_at` is first checked at `due_at`.
    /// Only pending, skipped, missed and expired are valid starting states;
    /// others → `IllegalTransition` (from pending). Appends no events.
    pub fn insert_run(&self, new: &NewRun, now: DateTime<Utc>) -> Result<Option<Run>> {
        if !CREATABLE.contains(&new.state) {
            return Err(StoreError::IllegalTransition {
                run: 0,
                from: RunState::Pending,
                to: new.state,
            });
        }
        let next_check = first_check(new);
        let (inserted, id) = self.insert(
            stmt!(runs::INSERT_RUN),
            params![
                new.tenant,
                new.schedule,
                new.window_key,
                Ms(new.window_start),
                Ms(new.window_end),
                Ms(new.due_at),
                new.state,
                new.reason,
                new.pool,
                new.state_reason,
                ms_opt(next_check),
                Ms(now),
            ],
        )?;
        // The new row is exactly what was written: built here, not read back.
        let run = (inserted == 1).then(|| opened_run(new, id, now));
        if let Some(r) = &run {
            self.counts.moved(None, r.state);
            if r.state.is_terminal() {
                self.model.run_finished(r);
            }
        }
        Ok(run)
    }

    /// The run, or `RunNotFound`.
    pub fn run(&self, id: i64) -> Result<Run> {
        self.try_run(id)?.ok_or(StoreError::RunNotFound(id))
    }

    /// The run, or `None` if there is no such id.
    pub fn try_run(&self, id: i64) -> Result<Option<Run>> {
        let changes = self.conn().total_changes();
        if let Some(run) = self.model.run_as_read(id, changes) {
            return Ok(Some(run));
        }
        if let Some(run) = self.model.claimed_run(id) {
            self.check_kept_claimed(&run)?;
            return Ok(Some(run));
        }
        let run = self.opt(stmt!(runs::RUN_BY_ID), params![id], run_from_row)?;
        if let Some(r) = &run {
            self.model.read_run(changes, r);
        }
        Ok(run)
    }

    /// [`Tx::try_run`] for a caller about to write the run's row: a claimed
    /// run kept as written is moved out (the write would forget it), not
    /// copied.
    pub(crate) fn take_run(&self, id: i64) -> Result<Option<Run>> {
        let Some(run) = self.model.take_claimed(id) else {
            return self.try_run(id);
        };
        self.check_kept_claimed(&run)?;
        Ok(Some(run))
    }

    /// Tests (debug builds) prove a claimed run kept as written is the
    /// stored row; nothing in release builds.
    fn check_kept_claimed(&self, run: &Run) -> Result<()> {
        #[cfg(debug_assertions)]
        {
            let stored = self.opt(stmt!(runs::RUN_BY_ID), params![run.id], run_from_row)?;
            assert_eq!(
                stored.as_ref(),
                Some(run),
                "the claimed run kept differs from its row"
            );
        }
        let _ = run;
        Ok(())
    }

    pub fn find_run(&self, tenant: &str, schedule: &str, window_key: &str) -> Result<Option<Run>> {
        self.opt(
            stmt!(runs::RUN_BY_WINDOW),
            params![tenant, schedule, window_key],
            run_from_row,
        )
    }

    /// Runs matching the filter, by window start (oldest first unless
    /// `newest_first`), ties by id.
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>> {
        list_runs(self.dialect(), filter, |sql, params| {
            let params: Vec<&dyn ToSql> = params.iter().map(|v| v as &dyn ToSql).collect();
            self.query_runs(Sql::Text(sql), &params)
        })
    }

    /// Pending / retry_wait runs with `next_check_at <= now`, oldest check first.
    /// Each pool has its own due index: the two are read in check order and
    /// merged.
    pub fn due_runs(&self, now: DateTime<Utc>, limit_to: usize) -> Result<Vec<Run>> {
        let mut due = self.query_runs(
            &self.limited(stmt!(runs::DUE_ON_TIME), 2, limit_to),
            params![Ms(now)],
        )?;
        due.extend(self.query_runs(
            &self.limited(stmt!(runs::DUE_BACKFILL_BY_CHECK), 2, limit_to),
            params![Ms(now)],
        )?);
        due.sort_by_key(|r| (r.next_check_at, r.id));
        due.truncate(limit_to);
        Ok(due)
    }

    /// Due runs of one pool, at most `limit_to`: on-time runs by next check,
    /// catch-up runs oldest window first.
    pub fn due_runs_in_pool(&self, pool: Pool, now: DateTime<Utc>, limit_to: usize) -> Result<Vec<Run>> {
        let sql = match pool {
            Pool::OnTime => stmt!(runs::DUE_ON_TIME),
            Pool::Backfill => stmt!(runs::DUE_BACKFILL),
        };
        self.query_runs(&self.limited(sql, 2, limit_to), params![Ms(now)])
    }

    /// How many catch-up runs due at `now` may take a free place of the
    /// backfill pool ([`DUE_BACKFILL_COUNT`]), counted up to `at_most`.
    pub fn due_catchup_count(&self, now: DateTime<Utc>, at_most: usize) -> Result<usize> {
        // The limit in the text: bound, it made SQLite prepare the
        // statement again at every execution (a place takes a few values).
        let n: i64 = self.one(
            &self.limited(stmt!(runs::DUE_BACKFILL_COUNT), 2, at_most),
            params![Ms(now)],
            |r| r.get(0),
        )?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// The earliest `next_check_at` among pending / retry_wait runs of one pool.
    pub fn next_due_check_in_pool(&self, pool: Pool) -> Result<Option<DateTime<Utc>>> {
        let sql = match pool {
            Pool::OnTime => stmt!(runs::NEXT_DUE_ON_TIME),
            Pool::Backfill => stmt!(runs::NEXT_DUE_BACKFILL),
        };
        let at = self.opt(sql, params![], |r| r.get::<Ms>(0))?;
        Ok(at.map(|m| m.0))
    }

    /// The earliest `next_check_at` among pending / retry_wait runs.
    pub fn next_due_check(&self) -> Result<Option<DateTime<Utc>>> {
        let on_time = self.next_due_check_in_pool(Pool::OnTime)?;
        let backfill = self.next_due_check_in_pool(Pool::Backfill)?;
        Ok(on_time.into_iter().chain(backfill).min())
    }

    /// The run of the same tenant and schedule with the greatest
    /// `window_start < before`, in any state.
    pub fn previous_run(&self, tenant: &str, schedule: &str, before: DateTime<Utc>) -> Result<Option<Run>> {
        let mut newest = None::<Run>;
        for sql in [stmt!(runs::PREVIOUS_RUN), stmt!(runs::PREVIOUS_RUNNING)] {
            let run = self.opt(sql, params![tenant, schedule, Ms(before)], run_from_row)?;
            if let Some(run) = run
                && newest
                    .as_ref()
                    .is_none_or(|n| (run.window_start, run.id) > (n.window_start, n.id))
            {
                newest = Some(run);
            }
        }
        Ok(newest)
    }

    /// How many runs are running per (tenant, schedule), in one pass over the
    /// running runs; pairs with none are absent.
    pub fn running_counts(&self) -> Result<HashMap<(String, String), u32>> {
        let mut counts = HashMap::new();
        self.each(stmt!(runs::RUNNING_PAIRS), params![], |row| {
            *counts.entry((row.get(0)?, row.get(1)?)).or_insert(0) += 1;
            Ok(true)
        })?;
        Ok(counts)
    }

    /// Running runs, optionally only of one schedule, tenant and/or pool.
    pub fn count_running(
        &self,
        schedule: Option<&str>,
        tenant: Option<&str>,
        pool: Option<Pool>,
    ) -> Result<u32> {
        let n: i64 = self.one(stmt!(runs::COUNT_RUNNING), params![schedule, tenant, pool], |r| {
            r.get(0)
        })?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Running runs (optionally of one schedule), the soonest lease expiry first.
    pub fn running_runs(&self, schedule: Option<&str>) -> Result<Vec<Run>> {
        self.query_runs(stmt!(runs::RUNNING_RUNS), params![schedule])
    }

    /// Running runs whose lease expired before `now` (zombies), oldest lease first.
    pub fn expired_leases(&self, now: DateTime<Utc>) -> Result<Vec<Run>> {
        self.query_runs(stmt!(runs::EXPIRED_LEASES), params![Ms(now)])
    }

    /// How many runs are in each state, for every state (zeros included), in
    /// [`RunState::ALL`] order.
    pub fn count_by_state(&self) -> Result<Vec<(RunState, u64)>> {
        let mut stored: Vec<(RunState, i64)> = RunState::ALL.iter().map(|s| (*s, 0)).collect();
        self.each(stmt!(runs::COUNT_BY_STATE), params![], |r| {
            let (state, n) = (r.get::<RunState>(0)?, r.get::<i64>(1)?);
            if let Some(slot) = stored.iter_mut().find(|(s, _)| *s == state) {
                slot.1 = n;
            }
            Ok(true)
        })?;
        // With what this transaction changed and has not written yet.
        Ok(stored
            .into_iter()
            .map(|(s, n)| {
                (
                    s,
                    u64::try_from(n + self.counts.pending(s, self.on.pg().is_some())).unwrap_or(0),
                )
            })
            .collect())
    }

    /// Runs by state among those whose state changed at or after `since`, in
    /// [`RunState::ALL`] order: the console header's last 24 hours. A scan of
    /// the runs table (no index on `updated_at`), so callers read it rarely.
    pub fn count_by_state_since(&self, since: DateTime<Utc>) -> Result<Vec<(RunState, u64)>> {
        let mut counts: Vec<(RunState, u64)> = RunState::ALL.iter().map(|s| (*s, 0)).collect();
        self.each(stmt!(runs::COUNT_BY_STATE_SINCE), params![Ms(since)], |r| {
            let (state, n) = (r.get::<RunState>(0)?, r.get::<i64>(1)?);
            if let Some(slot) = counts.iter_mut().find(|(s, _)| *s == state) {
                slot.1 = u64::try_from(n).unwrap_or(0);
            }
            Ok(true)
        })?;
        Ok(counts)
    }

    /// The last `n` finished (terminal) runs of a schedule, newest window first:
    /// the execution memory.
    pub fn recent_runs(&self, tenant: &str, schedule: &str, n: usize) -> Result<Vec<Run>> {
        self.query_runs(
            &self.limited(stmt!(runs::RECENT_RUNS), 3, n),
            params![tenant, schedule],
        )
    }

    /// The newest `n` finished runs of a schedule as an envelope's execution
    /// memory, newest window first: each with its last attempt's summary, or
    /// that attempt's message, or the run's state reason. Read once, then
    /// kept by this connection as its own writes finish runs (and read again
    /// after another connection commits, or when a finish's word is not known
    /// here): one query per schedule, not one per dispatch.
    pub fn execution_memory(
        &self,
        tenant: &str,
        schedule: &str,
        n: usize,
    ) -> Result<std::sync::Arc<Vec<RunMemory>>> {
        if let Some(kept) = self.model.memory(tenant, schedule, n) {
            return Ok(kept);
        }
        let read = std::sync::Arc::new(self.read_execution_memory(tenant, schedule, n)?);
        self.model.keep_memory(tenant, schedule, n, &read);
        Ok(read)
    }

    fn read_execution_memory(&self, tenant: &str, schedule: &str, n: usize) -> Result<Vec<RunMemory>> {
        self.all(
            &self.limited(stmt!(runs::EXECUTION_MEMORY), 3, n),
            params![tenant, schedule],
            |r| {
                Ok(RunMemory {
                    run_id: r.get(0)?,
                    window_key: r.get::<String>(1)?.into(),
                    state: r.get(2)?,
                    summary: r.get::<Option<String>>(3)?.map(Into::into),
                    window_start: r.get::<Ms>(4)?.0,
                })
            },
        )
    }

    /// THE state-changing function. Refuses what [`RunState::can_become`]
    /// refuses (`by_operator` = `change.operator.is_some()`) with
    /// `IllegalTransition`; then changes the run only if it is still in `from`
    /// (`StateConflict` with the actual state otherwise, or `RunNotFound`).
    ///
    /// `Some` fields of `change` are set. Leaving `running` clears the lease;
    /// entering `running` or a terminal state clears `not_before` and
    /// `next_check_at`. `updated_at = now`. The `events` are appended in the
    /// same transaction, with run id, tenant and schedule filled in where
    /// missing. The operator's name is not stored on the run: the caller's
    /// events (approved, rejected, requeued) carry who and why.
    pub fn transition(
        &self,
        run_id: i64,
        from: RunState,
        to: RunState,
        change: &Change,
        now: DateTime<Utc>,
        events: &[NewEvent],
    ) -> Result<Run> {
        let run = self.transition_fenced(run_id, from, to, change, None, now, None)?;
        for ev in events {
            self.append_event_for(ev, &run)?;
        }
        Ok(run)
    }

    /// [`Tx::transition`] without events, and with the attempt's fencing
    /// token as part of the expected state when given: a plan about an attempt
    /// holds only while that attempt is still the run's (`StateConflict`
    /// otherwise, with the run's actual state). `before`: the run as this
    /// transaction already holds it (read in it, with nothing written to the
    /// row since), from which the changed run is built rather than read back.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn transition_fenced(
        &self,
        run_id: i64,
        from: RunState,
        to: RunState,
        change: &Change,
        token: Option<i64>,
        now: DateTime<Utc>,
        before: Option<Run>,
    ) -> Result<Run> {
        if !from.can_become(to, change.operator.is_some()) {
            return Err(StoreError::IllegalTransition {
                run: run_id,
                from,
                to,
            });
        }
        self.model.forget_claimed(run_id);
        let clears_schedule = to == RunState::Running || to.is_terminal();
        let leaves_running = from == RunState::Running && to != RunState::Running;
        let ends =
            from == RunState::Running && to.is_terminal() && change.reason.is_none() && change.pool.is_none();
        let changed = if ends {
            self.exec(
                stmt!(runs::END_RUN),
                params![
                    run_id,
                    token,
                    to,
                    change.state_reason,
                    change.error_class,
                    change.last_error,
                    change.resume_after,
                    Ms(now),
                ],
            )?
        } else {
            self.exec(
                stmt!(runs::TRANSITION),
                params![
                    run_id,
                    from,
                    to,
                    change.state_reason,
                    ms_opt(change.not_before),
                    ms_opt(change.next_check_at),
                    change.error_class,
                    change.last_error,
                    change.resume_after,
                    change.reason,
                    change.pool,
                    clears_schedule,
                    leaves_running,
                    Ms(now),
                    token,
                ],
            )?
        };
        let run = match before {
            _ if changed != 1 => None,
            Some(b) if b.id == run_id && b.state == from => Some(after_transition(
                b,
                to,
                change,
                clears_schedule,
                leaves_running,
                now,
            )),
            _ => self.try_run(run_id)?,
        };
        let Some(run) = run else {
            let actual = self.opt(stmt!(runs::RUN_STATE), params![run_id], |r| r.get::<RunState>(0))?;
            return Err(match actual {
                Some(actual) => StoreError::StateConflict {
                    run: run_id,
                    expected: from,
                    actual,
                },
                None => StoreError::RunNotFound(run_id),
            });
        };
        self.counts.moved(Some(from), run.state);
        if from.is_terminal() {
            self.model.forget_memory(&run.tenant, &run.schedule);
        } else if run.state.is_terminal() {
            self.model.run_finished(&run);
        }
        if leaves_running {
            match change.pool {
                None => self
                    .model
                    .running_moved(&run.tenant, &run.schedule, run.pool, false),
                // It ran in the pool it had before: not known here.
                Some(_) => self.model.forget_running(),
            }
        }
        Ok(run)
    }

    /// Moves the next evaluation of a pending / retry_wait run (and, if given,
    /// its hold reason) without changing its state. `false` if the run is no
    /// longer pending / retry_wait (it moved on) or does not exist.
    pub fn set_next_check(&self, run_id: i64, at: DateTime<Utc>, state_reason: Option<&str>) -> Result<bool> {
        Ok(self.exec(stmt!(runs::SET_NEXT_CHECK), params![run_id, Ms(at), state_reason])? == 1)
    }

    /// A pending / retry_wait run waits: its next evaluation, why (prose) and
    /// what holds it (the machine's word, `None` for a plain backoff). `false`
    /// if the run is no longer pending / retry_wait or does not exist.
    pub fn hold_until(
        &self,
        run_id: i64,
        at: DateTime<Utc>,
        reason: &str,
        hold: Option<crate::core::decision::HoldKind>,
    ) -> Result<bool> {
        Ok(self.exec(stmt!(runs::HOLD), params![run_id, Ms(at), reason, hold])? == 1)
    }

    /// A plan's recheck of a run decided in `state`: next evaluation at `at`,
    /// and (when given) its hold's prose and kind. `false` if the run is no
    /// longer in `state`.
    pub(crate) fn recheck(
        &self,
        run_id: i64,
        state: RunState,
        at: DateTime<Utc>,
        why: Option<(&str, Option<crate::core::decision::HoldKind>)>,
    ) -> Result<bool> {
        let (set, reason, hold) = match why {
            Some((reason, hold)) => (true, Some(reason), hold),
            None => (false, None, None),
        };
        Ok(self.exec(
            stmt!(runs::RECHECK),
            params![run_id, state, Ms(at), set, reason, hold],
        )? == 1)
    }

    /// Appends `ev` with the run's id, tenant and schedule where it has none.
    pub(crate) fn append_event_for(&self, ev: &NewEvent, run: &Run) -> Result<i64> {
        self.insert_event(
            ev.at,
            &ev.kind,
            Some(ev.tenant.as_deref().unwrap_or(&run.tenant)),
            Some(ev.schedule.as_deref().unwrap_or(&run.schedule)),
            Some(ev.run_id.unwrap_or(run.id)),
            &ev.detail_text(),
        )
    }
}

/// The row `TRANSITION` leaves, computed from the row before it: the same
/// rules as its SQL (set what the change gives, keep the rest; clear the
/// next check entering running or a terminal state, the lease leaving
/// running, the hold once running or waiting again).
fn after_transition(
    mut r: Run,
    to: RunState,
    change: &Change,
    clears_schedule: bool,
    leaves_running: bool,
    now: DateTime<Utc>,
) -> Run {
    r.state = to;
    if let Some(v) = &change.state_reason {
        r.state_reason = Some(v.clone());
    }
    if clears_schedule {
        r.not_before = None;
        r.next_check_at = None;
    } else {
        r.not_before = change.not_before.map(stored).or(r.not_before);
        r.next_check_at = change.next_check_at.map(stored).or(r.next_check_at);
    }
    r.error_class = change.error_class.or(r.error_class);
    if let Some(v) = &change.last_error {
        r.last_error = Some(v.clone());
    }
    if let Some(v) = &change.resume_after {
        r.resume_after = Some(v.clone());
    }
    r.reason = change.reason.unwrap_or(r.reason);
    r.pool = change.pool.unwrap_or(r.pool);
    if leaves_running {
        r.lease_owner = None;
        r.lease_expires = None;
    }
    if matches!(to, RunState::Pending | RunState::RetryWait | RunState::Running) {
        r.hold = None;
    }
    r.updated_at = stored(now);
    r
}

/// [`Tx::runs`] over any store: `fetch` runs one query (SQL with `?N`
/// placeholders, its values) and maps its rows.
pub(crate) fn list_runs(
    d: Dialect,
    filter: &RunFilter,
    mut fetch: impl FnMut(&str, Vec<Value>) -> Result<Vec<Run>>,
) -> Result<Vec<Run>> {
    // One schedule's runs are indexed in two halves (schema 16): those
    // not running (`runs_window`) and the running ones (`runs_running`).
    // Each half asked is read through its index; two are put together in
    // the listing's order.
    if filter.schedule.is_none() {
        let (sql, params) = runs_sql(d, filter, "");
        return fetch(&sql, params);
    }
    let wants = |running: bool| {
        filter.states.is_empty() || filter.states.iter().any(|s| (*s == RunState::Running) == running)
    };
    let mut runs = Vec::new();
    if wants(false) {
        let (sql, params) = runs_sql(d, filter, " AND state <> 'running'");
        runs = fetch(&sql, params)?;
    }
    if wants(true) {
        let (sql, params) = runs_sql(d, filter, " AND state = 'running'");
        let running = fetch(&sql, params)?;
        if runs.is_empty() {
            return Ok(running);
        }
        if running.is_empty() {
            return Ok(runs);
        }
        runs.extend(running);
        runs.sort_by(|a, b| {
            let order = (a.window_start, a.id).cmp(&(b.window_start, b.id));
            if filter.newest_first {
                order.reverse()
            } else {
                order
            }
        });
        if let Some(n) = filter.limit {
            runs.truncate(n);
        }
    }
    Ok(runs)
}

/// The query of [`list_runs`] with `side` (an SQL condition, or nothing) added.
fn runs_sql(d: Dialect, filter: &RunFilter, side: &str) -> (String, Vec<Value>) {
    let mut sql = String::from(concat!("SELECT ", run_cols!(), " FROM runs WHERE 1 = 1"));
    sql.push_str(side);
    let mut params: Vec<Value> = Vec::new();
    if let Some(schedule) = &filter.schedule {
        params.push(Value::Text(schedule.clone()));
        sql.push_str(&format!(" AND schedule = {}", d.mark(params.len())));
    }
    if let Some(tenant) = &filter.tenant {
        params.push(Value::Text(tenant.clone()));
        sql.push_str(&format!(" AND tenant = {}", d.mark(params.len())));
    }
    if !filter.states.is_empty() {
        let mut marks = Vec::with_capacity(filter.states.len());
        for st in &filter.states {
            params.push(Value::Text(st.as_str().to_string()));
            marks.push(d.mark(params.len()));
        }
        sql.push_str(&format!(" AND state IN ({})", marks.join(", ")));
    }
    if filter.newest_first {
        sql.push_str(" ORDER BY window_start DESC, id DESC");
    } else {
        sql.push_str(" ORDER BY window_start, id");
    }
    if let Some(n) = filter.limit {
        // A literal: a bound LIMIT re-prepares the statement every time.
        sql.push_str(&format!(" LIMIT {}", limit(n)));
    }
    (sql, params)
}
