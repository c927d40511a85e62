//! What comes back from attempts, and the recovery rules applied to it:
//! classification, durable retries, dead letters, the human gate, the circuit
//! breaker, zombies found by lease, alerts.

use super::{CancelCause, Engine, Result, Running};
use crate::agent::protocol::{AgentLine, Reply, ResultStatus};
use crate::agent::runner::{AttemptReport, AttemptSignal, Ending};
use crate::config::model::ErrorClass;
use crate::core::event::Event;
use crate::core::planner::{self, Ended, Facts, Input};
use crate::recovery::classify::{Outcome, Reported, classify, honest, is_rate_limited};
use crate::store::types::*;
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::HashMap;

impl Engine {
    pub(crate) fn handle_report(&mut self, now: DateTime<Utc>, report: AttemptReport) -> Result<()> {
        let AttemptReport {
            run_id,
            token,
            signal,
        } = report;
        let known = self.running.get(&run_id).is_some_and(|r| r.token == token);
        match signal {
            AttemptSignal::Started { at } => self.started(now, run_id, token, at),
            AttemptSignal::Line(line) => {
                if !known {
                    return Ok(());
                }
                self.handle_line(now, run_id, token, line)
            }
            AttemptSignal::Ended { ending, log } => {
                // Self-fencing: an attempt whose lease lapsed on our side (its
                // supervisor ended it for want of a renewal: we were frozen or
                // could not write) or was taken over is lost here.
                if let Some(r) = self.running.get(&run_id).filter(|r| r.token == token)
                    && (r.cancel == Some(CancelCause::Fenced) || ending == Ending::LeaseExpired)
                {
                    let attempt = r.attempt;
                    self.running.remove(run_id);
                    return self.record_fenced_end(now, run_id, token, attempt, &ending, log);
                }
                // A late report of an older attempt leaves the current one be.
                let current = self.running.get(&run_id).is_some_and(|r| r.token == token);
                let Some(r) = current.then(|| self.running.remove(run_id)).flatten() else {
                    let stale = Event::StaleResult {
                        token,
                        attempt: None,
                        ending: Some(format!("{ending:?}")),
                        note: Some("late result of an attempt that is no longer current; ignored".into()),
                    };
                    self.store.write(|tx| {
                        let mut ev = NewEvent::of(now, stale).with_run_id(run_id);
                        if let Some(run) = tx.try_run(run_id)? {
                            ev = ev.for_run(&run);
                        }
                        tx.append_event(&ev).map(|_| ())
                    })?;
                    return Ok(());
                };
                self.finish(now, r, ending, log)
            }
        }
    }

    /// The end of an attempt that is lost on our side (its lease lapsed here,
    /// or another scheduler took it over): recorded as `stale_result`, its log
    /// kept, and nothing planned: the run is swept as lost (after the takeover
    /// grace) like any attempt whose scheduler vanished.
    fn record_fenced_end(
        &mut self,
        now: DateTime<Utc>,
        run_id: i64,
        token: i64,
        attempt: u32,
        ending: &Ending,
        log: String,
    ) -> Result<()> {
        let stale = Event::StaleResult {
            token,
            attempt: Some(attempt),
            ending: Some(format!("{ending:?}")),
            note: Some(
                "the attempt's lease lapsed on this scheduler (not renewed before it expired) \
                 or was taken over: its agent was stopped and its result is not applied"
                    .into(),
            ),
        };
        let log_limit = self.opts.log_limit;
        self.store.write(|tx| {
            let mut ev = NewEvent::of(now, stale).with_run_id(run_id);
            if let Some(run) = tx.try_run(run_id)? {
                ev = ev.for_run(&run);
            }
            tx.append_attempt_log(run_id, token, &log, log_limit)?;
            tx.append_event(&ev).map(|_| ())
        })?;
        Ok(())
    }

    fn handle_line(&mut self, now: DateTime<Utc>, run_id: i64, token: i64, line: AgentLine) -> Result<()> {
        let Some(r) = self.running.get_mut(&run_id) else {
            return Ok(());
        };
        let idx = r.schedule;
        let attempt = r.attempt;
        let fenced = r.cancel == Some(CancelCause::Fenced);
        let (tenant, sched) = {
            let s = &self.cfg.schedules[idx];
            (s.tenant.clone(), s.id.clone())
        };
        let r = match self.running.get_mut(&run_id) {
            Some(r) => r,
            None => return Ok(()),
        };
        match line {
            AgentLine::Heartbeat => {
                // Recorded at most once a minute per attempt; leases are renewed by the loop.
                if r.last_heartbeat_event
                    .is_none_or(|t| now >= t + TimeDelta::minutes(1))
                {
                    r.last_heartbeat_event = Some(now);
                    let ev = NewEvent::of(now, Event::Heartbeat { attempt })
                        .with_run_id(run_id)
                        .for_schedule(&tenant, &sched);
                    self.store.write(|tx| tx.append_event(&ev).map(|_| ()))?;
                }
            }
            AgentLine::Step { name, status } => {
                r.journaled = true;
                let s = self.schedule(idx);
                let delivery = s.deliveries.iter().any(|d| d.name == name);
                let agent = self.cfg.agents.get(&s.agent);
                let side_effect = delivery || agent.is_some_and(|a| a.is_side_effect(&name));
                // The handshake: a handshake agent's side-effect step waits for
                // our answer (deliveries are agentcron's own, never asked).
                let asks = !delivery
                    && side_effect
                    && status == StepStatus::Started
                    && agent.is_some_and(|a| a.handshake);
                let ev = NewEvent::of(
                    now,
                    Event::Step {
                        name: name.clone(),
                        status,
                        attempt,
                        side_effect,
                        verified: None,
                    },
                )
                .with_run_id(run_id)
                .for_schedule(&tenant, &sched);
                let journaled = if asks && fenced {
                    Ok(false)
                } else {
                    self.store.write(|tx| {
                        let journaled = if asks {
                            tx.record_step_fenced(run_id, token, attempt, &name, status, side_effect, now)?
                        } else {
                            tx.record_step(run_id, token, attempt, &name, status, side_effect, now)?
                        };
                        if journaled {
                            tx.append_event(&ev)?;
                        }
                        Ok(journaled)
                    })
                };
                if asks {
                    // Every way this ends answers the agent: an ack under
                    // its fence, or a deny with the reason. A journaling
                    // transaction that failed (transient or not) is a deny
                    // too, at once: the agent waits on us, not on its timeout.
                    let reply = match &journaled {
                        Ok(true) => Reply::Ack {
                            step: name,
                            fence: token,
                        },
                        Ok(false) => Reply::Deny {
                            step: name,
                            reason: format!(
                                "attempt {attempt} no longer holds its lease (fence {token}): do not act"
                            ),
                        },
                        Err(_) => Reply::Deny {
                            step: name,
                            reason: super::NOT_JOURNALED.into(),
                        },
                    };
                    // Sent once this transaction has committed (an ack
                    // becomes a deny if it does not).
                    self.pending_replies.push((run_id, token, reply));
                }
                journaled?;
            }
            AgentLine::Usage { tokens, cost_usd } => {
                // The config is shared (an Arc), not copied per run.
                let cfg = self.cfg.clone();
                let s = &cfg.schedules[idx];
                let totals = self
                    .store
                    .write(|tx| tx.add_usage(run_id, token, tokens.unwrap_or(0), cost_usd.unwrap_or(0.0)))?;
                let mut breach = None;
                if let (Some((run_tokens, _)), Some(max)) = (totals, s.budget.max_tokens)
                    && run_tokens > max as i64
                {
                    breach = Some(format!("token budget exceeded: {run_tokens} > {max} tokens"));
                }
                if breach.is_none()
                    && let Some(cap) = s.budget.max_cost_per_day
                {
                    let (from, to) = crate::core::layers::switches::local_day(now, s.timezone);
                    let spent = self
                        .store
                        .read(|tx| tx.schedule_cost_between(&s.tenant, &s.id, from, to))?;
                    if spent > cap {
                        breach = Some(format!(
                            "daily cost cap exceeded: {} > {}",
                            crate::core::money::usd_text(spent),
                            crate::core::money::usd_text(cap)
                        ));
                    }
                }
                if let Some(b) = breach
                    && let Some(r) = self.running.get_mut(&run_id)
                    && r.cancel.is_none()
                {
                    r.cancel = Some(CancelCause::Budget(b));
                    r.handle.cancel();
                }
            }
            AgentLine::Result(res) => {
                if let Some(r) = self.running.get_mut(&run_id) {
                    r.result = Some(res);
                    r.broken_result = None;
                }
            }
            AgentLine::Malformed { line, error, event } => {
                // The last result line counts, a broken one too: it is a
                // protocol error, never an exit-code success.
                if event.as_deref() == Some("result")
                    && let Some(r) = self.running.get_mut(&run_id)
                {
                    r.result = None;
                    r.broken_result = Some((error.clone(), line.clone()));
                }
                let ev = NewEvent::of(
                    now,
                    Event::AgentOutput {
                        malformed: truncate(&line, 500),
                        error,
                        attempt,
                    },
                )
                .with_run_id(run_id)
                .for_schedule(&tenant, &sched);
                self.store.write(|tx| tx.append_event(&ev).map(|_| ()))?;
            }
            AgentLine::Log(_) => {}
        }
        Ok(())
    }

    fn finish(&mut self, now: DateTime<Utc>, r: Running, ending: Ending, log: String) -> Result<()> {
        let cfg = self.cfg.clone();
        let s = &cfg.schedules[r.schedule];
        let rate_limited =
            r.rate_limited || is_rate_limited(&ending) || r.result.as_ref().is_some_and(rate_limited_result);
        let outcome = classify(
            r.result.as_ref(),
            &ending,
            s.default_error_class,
            s.budget.runtime_error_class,
        );
        // A first attempt that reported no step has an empty journal (steps
        // are journaled by attempts, and by the engine only).
        let no_journal = r.attempt == 1 && !r.journaled;
        let reported = Reported {
            broken_result: r.broken_result.clone(),
            unconfirmed_steps: if no_journal {
                vec![]
            } else {
                self.unconfirmed_steps(&r)?
            },
        };
        let mut outcome = honest(
            outcome,
            r.result.as_ref(),
            &ending,
            &reported,
            s.protocol_error_class,
        );
        match &r.cancel {
            Some(CancelCause::Budget(why)) => {
                outcome = Outcome::Failure {
                    class: ErrorClass::NonRetryable,
                    reason: format!("budget: {why}"),
                }
            }
            Some(CancelCause::Superseded(by)) => {
                outcome = Outcome::Failure {
                    class: ErrorClass::NonRetryable,
                    reason: format!("cancelled: superseded by window {by} (overlap = cancel_previous)"),
                }
            }
            Some(CancelCause::Kill) => {
                outcome = Outcome::Failure {
                    class: ErrorClass::Retryable,
                    reason: "cancelled by the global kill switch".into(),
                }
            }
            Some(CancelCause::OperatorQuit(at)) => {
                outcome = Outcome::Failure {
                    class: ErrorClass::Retryable,
                    reason: format!(
                        "stopped when the operator quit at {}",
                        at.with_timezone(&s.timezone).format("%H:%M %Z")
                    ),
                }
            }
            Some(CancelCause::Shutdown(at)) => {
                outcome = Outcome::Failure {
                    class: ErrorClass::Retryable,
                    reason: format!(
                        "stopped by scheduler shutdown at {}",
                        at.with_timezone(&s.timezone).format("%H:%M:%S %Z")
                    ),
                }
            }
            _ => {}
        }
        if matches!(ending, Ending::TimedOut) && r.cancel.is_none() {
            let limit = s.budget.max_runtime.map_or(
                self.cfg
                    .agents
                    .get(&s.agent)
                    .map(|a| a.timeout)
                    .unwrap_or_default(),
                |m| m.min(self.cfg.agents.get(&s.agent).map(|a| a.timeout).unwrap_or(m)),
            );
            if let Outcome::Failure { reason, .. } = &mut outcome {
                *reason = format!(
                    "timed out after {}",
                    crate::time::duration::format_duration(limit)
                );
            }
        }
        let (exit_code, status) = match (&ending, &outcome) {
            (Ending::Exited { code, .. }, Outcome::Success { .. }) => (*code, AttemptStatus::Succeeded),
            (Ending::Exited { code, .. }, _) => (*code, AttemptStatus::Failed),
            (Ending::TimedOut, _) => (None, AttemptStatus::TimedOut),
            (Ending::Cancelled, _) => (None, AttemptStatus::Cancelled),
            (_, Outcome::Success { .. }) => (None, AttemptStatus::Succeeded),
            _ => (None, AttemptStatus::Failed),
        };
        let (class, message) = match &outcome {
            Outcome::Success { .. } => (None, r.result.as_ref().and_then(|x| x.message.clone())),
            Outcome::Failure { class, reason } => (Some(*class), Some(reason.clone())),
        };
        let end = AttemptEnd {
            status: Some(status),
            error_class: class,
            exit_code,
            summary: r.result.as_ref().and_then(|x| x.summary.clone()),
            processed: r.result.as_ref().and_then(|x| x.processed),
            message,
            log,
        };
        let ended = Ended {
            attempt: r.attempt,
            token: r.token,
            outcome,
            end,
            rate_limited,
            cancel: r.cancel.clone(),
            verify_step: r.verify_step.clone(),
            verified: r.result.as_ref().and_then(|x| x.verified),
        };
        self.apply_ended(now, r.run_id, r.schedule, ended, no_journal)
    }

    /// Side-effect steps this attempt journaled `started` and never finished.
    fn unconfirmed_steps(&self, r: &Running) -> Result<Vec<String>> {
        let steps = self.store.read(|tx| tx.steps(r.run_id))?;
        let mut latest: Vec<(String, StepStatus, bool)> = Vec::new();
        for st in steps.into_iter().filter(|st| st.attempt == r.attempt) {
            match latest.iter_mut().find(|(name, _, _)| *name == st.name) {
                Some(slot) => slot.1 = st.status,
                None => latest.push((st.name, st.status, st.side_effect)),
            }
        }
        Ok(latest
            .into_iter()
            .filter(|(_, status, side_effect)| *side_effect && *status == StepStatus::Started)
            .map(|(name, _, _)| name)
            .collect())
    }

    /// Records an attempt's end and moves its run on per the recovery rules
    /// (planned by the core); a late end of an attempt no longer current is
    /// recorded as `stale_result`.
    pub(crate) fn apply_ended(
        &mut self,
        now: DateTime<Utc>,
        run_id: i64,
        idx: usize,
        ended: Ended,
        no_journal: bool,
    ) -> Result<()> {
        let (token, attempt) = (ended.token, ended.attempt);
        let Some(run) = self.store.read(|tx| tx.try_run(run_id))? else {
            return Ok(());
        };
        let facts = Facts {
            uncertain_steps: if no_journal {
                vec![]
            } else {
                self.store.read(|tx| tx.uncertain_steps(run_id))?
            },
            ..Facts::default()
        };
        let plan = planner::plan(&run, Input::AttemptEnded(ended), &self.policy(idx), &facts, now);
        // Nothing to apply, or the run moved on first: the result is stale.
        if !self.apply_plan(idx, &plan, now)? {
            let stale = Event::StaleResult {
                token,
                attempt: Some(attempt),
                ending: None,
                note: None,
            };
            self.store.write(|tx| {
                tx.append_event(&NewEvent::of(now, stale).for_run(&run))
                    .map(|_| ())
            })?;
        }
        Ok(())
    }

    /// Runs claimed by anyone whose lease expired: the attempt is lost (crash or
    /// hang) and the run goes to retry, or to a human if a side effect is uncertain.
    /// A lease counts as lost only `takeover_grace` after it expired: the lost
    /// attempt's supervisor ends the agent's tree at expiry, and that must be
    /// done before a retry starts.
    pub(crate) fn sweep_zombies(&mut self, now: DateTime<Utc>) -> Result<()> {
        let expired = self
            .store
            .read(|tx| tx.expired_leases(now - self.takeover_grace()))?;
        for run in expired {
            let Some(&idx) = self.index.get(&run.schedule) else {
                continue;
            };
            if self.running.contains_key(&run.id) {
                continue; // ours and alive: the renewal just ran
            }
            let facts = Facts {
                uncertain_steps: self.store.read(|tx| tx.uncertain_steps(run.id))?,
                ..Facts::default()
            };
            let plan = planner::plan(&run, Input::LeaseExpired, &self.policy(idx), &facts, now);
            self.apply_plan(idx, &plan, now)?;
        }
        Ok(())
    }

    /// `needs_human` runs past their schedule's `approval_ttl` fail with that reason.
    pub(crate) fn expire_approvals(&mut self, now: DateTime<Utc>) -> Result<()> {
        if !self.has_approval_ttls {
            return Ok(());
        }
        // Polled every 30 s for runs parked by other schedulers; a deadline we
        // know of is handled on time (a virtual clock jumps straight to it).
        let deadline_reached = self.next_ttl_deadline.is_some_and(|d| now >= d);
        if !deadline_reached
            && self
                .last_ttl_check
                .is_some_and(|t| now < t + TimeDelta::seconds(30))
        {
            return Ok(());
        }
        self.last_ttl_check = Some(now);
        let mut next_deadline: Option<DateTime<Utc>> = None;
        let parked = self.store.read(|tx| {
            tx.runs(&RunFilter {
                states: vec![RunState::NeedsHuman],
                ..RunFilter::default()
            })
        })?;
        for run in parked {
            let Some(&idx) = self.index.get(&run.schedule) else {
                continue;
            };
            let Some(ttl) = self.schedule(idx).approval_ttl else {
                continue;
            };
            let deadline = run.updated_at + crate::time::duration::to_delta(ttl);
            if now < deadline {
                next_deadline = Some(next_deadline.map_or(deadline, |d| d.min(deadline)));
                continue;
            }
            let plan = planner::plan(
                &run,
                Input::ApprovalExpired,
                &self.policy(idx),
                &Facts::default(),
                now,
            );
            self.apply_plan(idx, &plan, now)?;
        }
        self.next_ttl_deadline = next_deadline;
        Ok(())
    }

    /// Kill switch with `--cancel-running`: stop every attempt this process runs.
    pub(crate) fn apply_kill_cancel(&mut self, _now: DateTime<Utc>) -> Result<()> {
        if self.running.is_empty() {
            return Ok(());
        }
        let cancel =
            self.store.read(|tx| {
                Ok(tx.switch("kill")?.is_some_and(|s| s.on)
                    && tx.switch("cancel_running")?.is_some_and(|s| s.on))
            })?;
        if cancel {
            for r in self.running.values_mut() {
                if r.cancel.is_none() {
                    r.cancel = Some(CancelCause::Kill);
                    r.handle.cancel();
                }
            }
        }
        Ok(())
    }

    /// Runs held by a slot (quota, overlap, circuit probe) are checked again
    /// now; with `catchup` (a catch-up run left, or unknown), the schedule's
    /// backlog is looked at too.
    pub(crate) fn wake_held(&self, schedule: &str, catchup: bool, now: DateTime<Utc>) -> Result<()> {
        // One attempt ended: at most that many catch-up runs can start.
        let backfill = self
            .index
            .get(schedule)
            .map_or(1, |&i| self.cfg.schedules[i].max_concurrency.max(1) as usize);
        if catchup {
            self.backfill_freed(self.index.get(schedule).copied(), now);
        }
        // While runs may be held by a quota, the schedule's own are among
        // the candidates that wake_quota_held wakes only if they fit.
        let by_candidates = self.quota_holds.get();
        self.store
            .write(|tx| tx.recheck_held(schedule, backfill, false, !by_candidates, now))?;
        if by_candidates && self.wake_quota_held(schedule, now)? == 0 {
            // Nothing is held by a quota any more: stop looking on every end.
            self.quota_holds.set(false);
        }
        Ok(())
    }

    /// A slot freed: wakes the longest-waiting quota-held runs that can
    /// actually start now (their schedule, tenant and pool quotas allow it),
    /// as many as there is room for; a run that still cannot start does not
    /// take the wake-up from one that can. Returns how many runs a quota holds.
    ///
    /// Each woken run takes a place in its pool, so only runs of pools with
    /// room are read, at most 8 per free place of their pool (64 at most) —
    /// not 64 every time an attempt ends, which after an outage (thousands of
    /// catch-up runs held by a backfill pool with one place free) was the
    /// drain's largest cost.
    fn wake_quota_held(&self, schedule: &str, now: DateTime<Utc>) -> Result<usize> {
        use crate::core::layers::switches::{Quotas, quota_limit};
        const POOLS: [Pool; 2] = [Pool::OnTime, Pool::Backfill];
        // Pools read and found with no held run at all.
        let mut none_held = [false; POOLS.len()];
        let mut candidates = self.store.read(|tx| {
            let mut runs = vec![];
            for (i, pool) in POOLS.into_iter().enumerate() {
                let room = self.pool_room(pool);
                if room > 0 {
                    let held = tx.quota_held(pool, (room * 8).min(64))?;
                    none_held[i] = held.is_empty();
                    runs.extend(held);
                    // The freed slot's own schedule's runs, however many
                    // older runs of other schedules are held. (A few: the
                    // limit is in the statement's text, and a pool's room
                    // takes many values.)
                    runs.extend(tx.quota_held_of(schedule, pool, room.min(8))?);
                }
            }
            Ok(runs)
        })?;
        // Longest waiting first, whichever its pool.
        candidates.sort_by_key(|r| (r.due_at, r.id));
        candidates.dedup_by_key(|r| r.id);
        if candidates.is_empty() {
            // Nothing that could start now; is anything held at all? (Not
            // asked again of a pool just read.)
            let held = self.store.read(|tx| {
                for (i, pool) in POOLS.into_iter().enumerate() {
                    if !none_held[i] && !tx.quota_held(pool, 1)?.is_empty() {
                        return Ok(1);
                    }
                }
                Ok(0)
            })?;
            return Ok(held);
        }
        // The kept counts, read (not copied); the runs woken here are
        // counted on top.
        let counts = self.store.read(|tx| tx.running_by_schedule())?;
        let mut woken = RunningCounts::default();
        let mut pool_used: HashMap<Pool, usize> = [Pool::OnTime, Pool::Backfill]
            .into_iter()
            .map(|p| (p, self.pool_use(p).0))
            .collect();
        let mut divisors: HashMap<String, u32> = HashMap::new();
        let mut wake = vec![];
        for run in &candidates {
            let Some(&idx) = self.index.get(&run.schedule) else {
                continue;
            };
            let s = self.schedule(idx);
            let divisor = match divisors.get(&s.id) {
                Some(d) => *d,
                None => {
                    let d = self
                        .store
                        .read(|tx| tx.schedule_state(&s.id))?
                        .concurrency_divisor;
                    divisors.insert(s.id.clone(), d);
                    d
                }
            };
            let used = pool_used.get(&run.pool).copied().unwrap_or(0);
            let q = Quotas {
                divisor,
                running: counts.of_schedule(&s.id) + woken.of_schedule(&s.id),
                tenant_running: counts.of_tenant(&s.tenant) + woken.of_tenant(&s.tenant),
                tenant_max: self.cfg.tenants.get(&s.tenant).and_then(|t| t.max_concurrent),
                pool_used: used,
                pool_size: self.pool_use(run.pool).1,
            };
            if quota_limit(s, &q).is_none() {
                // It takes its place: the next candidate sees it counted.
                wake.push(run.id);
                woken.add(&s.tenant, &s.id, run.pool, true);
                pool_used.insert(run.pool, used + 1);
            }
        }
        drop(counts);
        if !wake.is_empty() {
            self.store.write(|tx| tx.wake_runs(&wake, now))?;
        }
        Ok(candidates.len())
    }

    /// Records an alert that belongs to no run's plan (the catch-up planner's
    /// summary after a gap) and sends it.
    pub(crate) fn raise_alert(
        &self,
        now: DateTime<Utc>,
        tenant: &str,
        schedule: &str,
        run_id: Option<i64>,
        what: &str,
        message: &str,
    ) -> Result<()> {
        let (alert, ev) =
            crate::recovery::alert::alert_event(&self.cfg, tenant, schedule, run_id, what, message, now);
        self.store.write(|tx| tx.append_event(&ev).map(|_| ()))?;
        self.send_alert(&alert, now);
        Ok(())
    }

    /// Sends an alert (its event is already written) to the configured sink:
    /// files at once; webhooks and commands queued, so they never stall the loop.
    pub(crate) fn send_alert(&self, alert: &crate::core::event::Alert, now: DateTime<Utc>) {
        // The schedule's owner's route (`[alert.routes]`), else the default sink.
        if let Some(sink) = self.cfg.scheduler.sink_for(alert.owner.as_deref()) {
            let detail = serde_json::to_value(alert).unwrap_or_default();
            crate::recovery::alert::dispatch(self.store.shared(), sink, detail, &self.cfg.dir, now);
        }
    }
}

fn rate_limited_result(r: &crate::agent::protocol::AgentResult) -> bool {
    r.rate_limited == Some(true)
        || r.status == ResultStatus::Failure
            && r.message
                .as_deref()
                .is_some_and(|m| m.to_ascii_lowercase().contains("rate limit") || m.contains("429"))
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
