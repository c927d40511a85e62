//! Claims, leases and attempts, and the step journal.
//!
//! A claim is one conditional `UPDATE` of the run: whoever changes the row owns
//! the attempt, and the attempt is identified from then on by its fencing token
//! (store-wide, strictly increasing). Everything an attempt reports later is
//! checked against that token, so a zombie's late words cannot overwrite the
//! attempt that replaced it.

use super::exec::stmt;
use super::sql::{Ms, attempt_from_cols, stored};
use super::types::*;
use super::{Result, StoreError, Tx};
use crate::agent::log::BoundedLog;
use crate::core::event::Event;
use chrono::{DateTime, Utc};
use rusqlite::params;

/// What `end_attempt` appends of `AttemptEnd::log` at most (the caller's
/// streamed log goes through `append_attempt_log` with its own bound).
const END_LOG_MAX: usize = 256 * 1024;

pub(crate) const HOT_QUERIES: &[(&str, &str)] = &[
    ("claim", super::sqlite::attempts::CLAIM),
    ("insert_claimed_row", super::sqlite::attempts::INSERT_CLAIMED_RUN),
    ("renew_lease", super::sqlite::attempts::RENEW_LEASE),
    ("end_attempt", super::sqlite::attempts::END_ATTEMPT),
    ("attempts", super::sqlite::attempts::ATTEMPTS_OF_RUN),
    ("add_usage", super::sqlite::attempts::ADD_USAGE),
    ("run usage", super::sqlite::attempts::RUN_USAGE),
    ("schedule_cost_between", super::sqlite::attempts::SCHEDULE_COST),
    ("attempt log", super::sqlite::attempts::LOG_OF_ATTEMPT),
    ("record_step", super::sqlite::attempts::RECORD_STEP),
    ("attempt_started_at", super::sqlite::attempts::SET_STARTED_AT),
    ("record_step_fenced", super::sqlite::attempts::RECORD_STEP_FENCED),
    ("steps", super::sqlite::attempts::STEPS_OF_RUN),
];

/// The status an attempt ends with when the caller does not say: success
/// only without an error class and with exit code 0 (or none).
fn inferred_status(end: &AttemptEnd) -> AttemptStatus {
    match (end.error_class, end.exit_code) {
        (None, None | Some(0)) => AttemptStatus::Succeeded,
        _ => AttemptStatus::Failed,
    }
}

/// The log as shown: head, a marker naming the dropped bytes, tail (the one
/// bounded-log algorithm is [`BoundedLog`]).
pub(crate) fn render_log(head: &str, tail: &str, dropped: i64) -> String {
    crate::agent::log::render(head, tail, u64::try_from(dropped).unwrap_or(0))
}

/// A claim's attempt row, inserted with its claim.
#[derive(Debug, Clone)]
pub(crate) struct NewAttempt {
    run_id: i64,
    n: u32,
    token: i64,
    tenant: String,
    schedule: String,
    owner: String,
    reason: RunReason,
    started_at: DateTime<Utc>,
}

impl NewAttempt {
    /// Inserts the row (running, no envelope yet).
    pub(crate) fn insert(&self, conn: super::exec::Conn<'_>) -> Result<()> {
        conn.exec(
            stmt!(attempts::INSERT_ATTEMPT),
            rusqlite::params![
                self.run_id,
                self.n,
                self.token,
                self.tenant,
                self.schedule,
                self.owner,
                self.reason,
                Ms(self.started_at),
            ],
        )?;
        Ok(())
    }
}

impl Tx<'_> {
    /// Claims a pending / retry_wait run for one attempt: one conditional
    /// `UPDATE … WHERE id = ? AND state = from`. `Ok(None)` when the run is no
    /// longer in `from` (another scheduler won, or it moved on); any `from`
    /// other than pending / retry_wait → `IllegalTransition`.
    ///
    /// On success: a new fencing token (store-wide, strictly increasing), the
    /// attempt row (running, no envelope yet), and a `claimed` event with
    /// `{due, claimed, owner, attempt, token, lateness_ms}` (instants RFC 3339
    /// with milliseconds). The run's `state_reason`, `not_before` and
    /// `next_check_at` are cleared, `reason` is set.
    #[allow(clippy::too_many_arguments)]
    pub fn claim(
        &self,
        run_id: i64,
        from: RunState,
        owner: &str,
        lease_until: DateTime<Utc>,
        reason: RunReason,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Option<Claim>> {
        let Some(run) = self.claim_row(run_id, from, owner, lease_until, reason, now)? else {
            return Ok(None);
        };
        self.append_claimed(&run, owner, due, now, Vec::new())?;
        Ok(Some(Claim {
            attempt: run.attempts,
            fencing_token: run.fencing_token,
            run,
        }))
    }

    /// [`Tx::claim`] without its `claimed` event (the writer appends it after
    /// the decision that led to it).
    pub(crate) fn claim_row(
        &self,
        run_id: i64,
        from: RunState,
        owner: &str,
        lease_until: DateTime<Utc>,
        reason: RunReason,
        now: DateTime<Utc>,
    ) -> Result<Option<Run>> {
        let claimable = matches!(from, RunState::Pending | RunState::RetryWait);
        if !claimable || !from.can_become(RunState::Running, false) {
            return Err(StoreError::IllegalTransition {
                run: run_id,
                from,
                to: RunState::Running,
            });
        }
        // The claim takes the counter's next value from its row.
        super::db::flush_fencing(self.conn(), self.model)?;
        let claimed = self.exec(
            stmt!(attempts::CLAIM),
            params![run_id, from, owner, Ms(lease_until), reason, Ms(now)],
        )?;
        let run = if claimed == 1 { self.try_run(run_id)? } else { None };
        let Some(run) = run else {
            return Ok(None);
        };
        self.attempt_started(&run, Some(from), owner, reason, now)?;
        Ok(Some(run))
    }

    /// What follows a claim's row, whichever way it was written: the kept
    /// counts, the fencing counter moved to the run's token, the attempt row.
    fn attempt_started(
        &self,
        run: &Run,
        from: Option<RunState>,
        owner: &str,
        reason: RunReason,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.counts.moved(from, run.state);
        self.model
            .running_moved(&run.tenant, &run.schedule, run.pool, true);
        self.model.fencing_moved(run.fencing_token);
        NewAttempt {
            run_id: run.id,
            n: run.attempts,
            token: run.fencing_token,
            tenant: run.tenant.clone(),
            schedule: run.schedule.clone(),
            owner: owner.to_string(),
            reason,
            started_at: now,
        }
        .insert(self.conn())?;
        Ok(())
    }

    /// A pending window opened and claimed at `now` in one insert: the run
    /// row, fencing token and attempt row that [`Tx::insert_run`] then
    /// [`Tx::claim_row`] would write, without the pending row in between.
    /// `run` is the row `new`'s insert would write (`opened_run`), made the
    /// claimed row. `Ok(None)` when the window's run exists (another
    /// scheduler opened it first); nothing is written then.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert_claimed_row(
        &self,
        new: &NewRun,
        mut run: Run,
        owner: &str,
        lease_until: DateTime<Utc>,
        reason: RunReason,
        now: DateTime<Utc>,
    ) -> Result<Option<Run>> {
        if new.state != RunState::Pending {
            return Err(StoreError::IllegalTransition {
                run: 0,
                from: new.state,
                to: RunState::Running,
            });
        }
        // PostgreSQL: the counter read from its row at every claim (under
        // the write lock), never from what this connection kept.
        let kept = if self.on.pg().is_some() {
            super::db::flush_fencing(self.conn(), self.model)?;
            None
        } else {
            self.model.fencing()
        };
        let token = match kept {
            Some(t) => t,
            None => {
                let t = self
                    .opt(stmt!(attempts::FENCING_TOKEN), params![], |r| r.get::<i64>(0))?
                    .unwrap_or(0);
                self.model.keep_fencing(t);
                t
            }
        } + 1;
        let (inserted, id) = self.insert(
            stmt!(attempts::INSERT_CLAIMED_RUN),
            params![
                new.tenant,
                new.schedule,
                new.window_key,
                Ms(new.window_start),
                Ms(new.window_end),
                Ms(new.due_at),
                reason,
                new.pool,
                owner,
                Ms(lease_until),
                token,
                Ms(run.created_at),
                Ms(now),
            ],
        )?;
        if inserted != 1 {
            return Ok(None);
        }
        // The row as written, built here (as insert_run and claim_row
        // would leave it), not read back.
        run.id = id;
        run.state = RunState::Running;
        run.reason = reason;
        run.state_reason = None;
        run.attempts = 1;
        run.next_check_at = None;
        run.lease_owner = Some(owner.to_string());
        run.lease_expires = Some(stored(lease_until));
        run.fencing_token = token;
        run.updated_at = stored(now);
        self.model.keep_claimed(&run);
        self.attempt_started(&run, None, owner, reason, now)?;
        Ok(Some(run))
    }

    /// The `claimed` event of a claim: due, claimed at, owner, attempt, token,
    /// lateness.
    /// `folded`: the events recorded on the way to the claim (the window's
    /// opening, the decision), written in the claim's row
    /// ([`NewEvent::folding`]).
    pub(crate) fn append_claimed(
        &self,
        run: &Run,
        owner: &str,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
        folded: Vec<NewEvent>,
    ) -> Result<()> {
        let claimed = Event::Claimed {
            due,
            claimed: now,
            owner: owner.to_string(),
            attempt: run.attempts,
            token: run.fencing_token,
            lateness_ms: (now - due).num_milliseconds(),
        };
        self.write_claimed(NewEvent::of(now, claimed).for_run(run), folded)
    }

    /// The fencing counter as stored: the newest token any claim took.
    pub fn fencing_counter(&self) -> Result<i64> {
        super::db::flush_fencing(self.conn(), self.model)?;
        Ok(self
            .opt(stmt!(attempts::FENCING_TOKEN), params![], |r| r.get::<i64>(0))?
            .unwrap_or(0))
    }

    /// Extends the lease to `until` if `token` is still the run's token and
    /// the run is running; `false` = stale (the attempt lost its claim).
    pub fn renew_lease(&self, run_id: i64, token: i64, until: DateTime<Utc>) -> Result<bool> {
        self.model.forget_claimed(run_id);
        Ok(self.exec(stmt!(attempts::RENEW_LEASE), params![run_id, token, Ms(until)])? == 1)
    }

    /// Asks the scheduler running the attempt with `token` to cancel it: a
    /// newer window (`why`, its key) superseded it. No-op once it has ended.
    pub fn request_cancel(&self, run_id: i64, token: i64, why: &str) -> Result<bool> {
        self.model.forget_claimed(run_id);
        Ok(self.exec(stmt!(attempts::REQUEST_CANCEL), params![run_id, token, why])? == 1)
    }

    /// The cancel requests for attempts `owner` runs: (run, token, why).
    pub fn cancel_requests(&self, owner: &str) -> Result<Vec<(i64, i64, String)>> {
        self.all(stmt!(attempts::CANCEL_REQUESTS), params![owner], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
    }

    /// Stores the JSON envelope attempt `attempt` received. No such attempt: no-op.
    pub fn set_attempt_envelope(&self, run_id: i64, attempt: u32, envelope: &str) -> Result<()> {
        self.exec(stmt!(attempts::SET_ENVELOPE), params![run_id, attempt, envelope])?;
        Ok(())
    }

    /// The attempt with this fencing token runs since `at` (its agent's
    /// process was started then): its row's `started_at`, which its claim
    /// set to the claim's instant. `false` if the attempt has no row or already ended
    /// (another scheduler swept it as lost: its start is no news any more).
    pub fn attempt_started_at(&self, run_id: i64, token: i64, at: DateTime<Utc>) -> Result<bool> {
        Ok(self.exec(stmt!(attempts::SET_STARTED_AT), params![run_id, token, Ms(at)])? == 1)
    }

    /// Records the end of the attempt with this fencing token; `false` if there
    /// is no such attempt or it already ended (a late result from a lost
    /// attempt). `end.status` `None` is inferred: succeeded without an error
    /// class and with exit code 0 or none, failed otherwise. A non-empty
    /// `end.log` is appended to the attempt's log. The run's state is not
    /// touched: that is [`Tx::transition`]'s job.
    pub fn end_attempt(&self, run_id: i64, token: i64, end: &AttemptEnd, now: DateTime<Utc>) -> Result<bool> {
        let status = end.status.unwrap_or_else(|| inferred_status(end));
        let changed = self.exec(
            stmt!(attempts::END_ATTEMPT),
            params![
                run_id,
                token,
                Ms(now),
                status,
                end.error_class,
                end.exit_code,
                end.summary,
                end.processed,
                end.message,
            ],
        )?;
        if changed == 0 {
            return Ok(false);
        }
        self.model
            .attempt_ended(run_id, token, end.summary.clone().or_else(|| end.message.clone()));
        if !end.log.is_empty() {
            self.append_attempt_log(run_id, token, &end.log, END_LOG_MAX)?;
        }
        Ok(true)
    }

    /// Ends attempt `n` of `run` (running, holding `n`'s claim) when its row
    /// was never written: a ledger left by an earlier agentcron build (whose
    /// claims committed their attempt rows in a later transaction, after the
    /// agents started) by a scheduler that stopped in between. Claims now
    /// commit with their attempt rows; this only ends such old runs. The row
    /// is written from the run (started when it was claimed) and ended with
    /// `end`, its message saying so; `false` if the attempt has a row (it
    /// already ended).
    pub(crate) fn end_unwritten_attempt(
        &self,
        run: &Run,
        n: u32,
        end: &AttemptEnd,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        if run.state != RunState::Running || run.attempts != n {
            return Ok(false);
        }
        let row = NewAttempt {
            run_id: run.id,
            n,
            token: run.fencing_token,
            tenant: run.tenant.clone(),
            schedule: run.schedule.clone(),
            owner: run.lease_owner.clone().unwrap_or_default(),
            reason: run.reason,
            started_at: run.updated_at,
        };
        let inserted = self.exec(
            stmt!(attempts::INSERT_UNWRITTEN_ATTEMPT),
            params![
                row.run_id,
                row.n,
                row.token,
                row.tenant,
                row.schedule,
                row.owner,
                row.reason,
                Ms(row.started_at),
            ],
        )?;
        if inserted != 1 {
            return Ok(false);
        }
        let note = "its attempt row and its claim's trace row were not written before its scheduler stopped";
        let end = AttemptEnd {
            message: Some(match &end.message {
                Some(m) => format!("{m} ({note})"),
                None => note.to_string(),
            }),
            ..end.clone()
        };
        self.end_attempt(run.id, run.fencing_token, &end, now)
    }

    /// The run's attempts, first first.
    pub fn attempts(&self, run_id: i64) -> Result<Vec<Attempt>> {
        self.all(stmt!(attempts::ATTEMPTS_OF_RUN), params![run_id], |r| {
            attempt_from_cols(r)
        })
    }

    /// Adds reported usage to the attempt with this fencing token and returns
    /// the run's totals over all attempts; `None` if no attempt has that token.
    /// Usage is accepted even after the attempt ended or lost its lease: the
    /// money was spent, and the daily cost cap must see it.
    pub fn add_usage(
        &self,
        run_id: i64,
        token: i64,
        tokens: i64,
        cost_usd: f64,
    ) -> Result<Option<(i64, f64)>> {
        let changed = self.exec(
            stmt!(attempts::ADD_USAGE),
            params![run_id, token, tokens, cost_usd],
        )?;
        if changed == 0 {
            return Ok(None);
        }
        self.model.forget_costs();
        Ok(Some(self.one(
            stmt!(attempts::RUN_USAGE),
            params![run_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?))
    }

    /// Sum of `cost_usd` of the schedule's attempts started in `[from, to)`.
    /// Read once, then kept in the engine's model until usage is added (see
    /// `engine::model::Model`).
    pub fn schedule_cost_between(
        &self,
        tenant: &str,
        schedule: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<f64> {
        let (from, to) = (from.timestamp_millis(), to.timestamp_millis());
        if let Some(spent) = self.model.cost(tenant, schedule, from, to) {
            return Ok(spent);
        }
        let spent = self.one(
            stmt!(attempts::SCHEDULE_COST),
            params![tenant, schedule, from, to],
            |r| r.get(0),
        )?;
        self.model.keep_cost(tenant, schedule, from, to, spent);
        Ok(spent)
    }

    /// Appends non-protocol output to the log of the attempt with this fencing
    /// token (even after it ended: a zombie's output still explains it). The
    /// log keeps at most `max_bytes`: the first half as written, then the most
    /// recent bytes, with `…[truncated N bytes]…` between them when anything
    /// was dropped. No such attempt: no-op.
    pub fn append_attempt_log(&self, run_id: i64, token: i64, text: &str, max_bytes: usize) -> Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let current = self.opt(stmt!(attempts::LOG_OF_ATTEMPT), params![run_id, token], |r| {
            Ok((r.get::<String>(0)?, r.get::<String>(1)?, r.get::<i64>(2)?))
        })?;
        let Some((head, tail, dropped)) = current else {
            return Ok(());
        };
        let mut log = BoundedLog::from_parts(head, tail, u64::try_from(dropped).unwrap_or(0), max_bytes);
        log.push(text);
        let (head, tail, dropped) = log.into_parts();
        let dropped = i64::try_from(dropped).unwrap_or(i64::MAX);
        self.exec(stmt!(attempts::SET_LOG), params![token, head, tail, dropped])?;
        Ok(())
    }

    /// Journals a step of the live attempt `attempt` holding `token`; `false`
    /// if that attempt is stale (token replaced, attempt ended, run no longer
    /// running) or the attempt number does not match.
    #[allow(clippy::too_many_arguments)]
    pub fn record_step(
        &self,
        run_id: i64,
        token: i64,
        attempt: u32,
        name: &str,
        status: StepStatus,
        side_effect: bool,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let changed = self.exec(
            stmt!(attempts::RECORD_STEP),
            params![run_id, token, attempt, name, status, side_effect, Ms(now)],
        )?;
        Ok(changed == 1)
    }

    /// The step handshake's one store operation: journals step `name` of the
    /// live attempt holding `token` only if that attempt still holds its lease
    /// at `now` (run running, token current, attempt not ended, lease not
    /// expired), in one statement of the caller's transaction. `true` = the
    /// step is journaled and the agent may be acked once this commits.
    #[allow(clippy::too_many_arguments)]
    pub fn record_step_fenced(
        &self,
        run_id: i64,
        token: i64,
        attempt: u32,
        name: &str,
        status: StepStatus,
        side_effect: bool,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let changed = self.exec(
            stmt!(attempts::RECORD_STEP_FENCED),
            params![
                run_id,
                token,
                attempt,
                name,
                status,
                side_effect,
                Ms(now),
                Ms(now)
            ],
        )?;
        Ok(changed == 1)
    }

    /// The run's step journal across attempts, in the order written.
    pub fn steps(&self, run_id: i64) -> Result<Vec<Step>> {
        self.all(stmt!(attempts::STEPS_OF_RUN), params![run_id], |r| {
            super::sql::step_from_cols(r)
        })
    }

    /// Names of steps with a `done` entry in any attempt, in first-done order.
    pub fn completed_steps(&self, run_id: i64) -> Result<Vec<String>> {
        let mut names: Vec<String> = Vec::new();
        for step in self.steps(run_id)? {
            if step.status == StepStatus::Done && !names.contains(&step.name) {
                names.push(step.name);
            }
        }
        Ok(names)
    }

    /// Names of steps whose latest journal entry, across all attempts, is
    /// `started`: begun and never confirmed, so the outside world must be
    /// checked before acting again. Ordered by each step's first entry. A step
    /// may be both completed (done in an earlier attempt) and uncertain
    /// (started again later without a result).
    pub fn uncertain_steps(&self, run_id: i64) -> Result<Vec<String>> {
        // Latest status per name, names kept in first-seen order.
        let mut latest: Vec<(String, StepStatus)> = Vec::new();
        for step in self.steps(run_id)? {
            match latest.iter_mut().find(|(name, _)| *name == step.name) {
                Some(slot) => slot.1 = step.status,
                None => latest.push((step.name, step.status)),
            }
        }
        Ok(latest
            .into_iter()
            .filter(|(_, status)| *status == StepStatus::Started)
            .map(|(name, _)| name)
            .collect())
    }
}
