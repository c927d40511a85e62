//! What comes back from attempts, and the recovery rules applied to it:
//! classification, durable retries, dead letters, the human gate, the circuit
//! breaker, zombies found by lease, alerts.

use super::pipeline::change_reason;
use super::{CancelCause, Engine, Result, Running};
use crate::agent::protocol::{AgentLine, ResultStatus};
use crate::agent::runner::{AttemptReport, AttemptSignal, Ending};
use crate::config::model::ErrorClass;
use crate::core::event::Event;
use crate::recovery::circuit::{self, CircuitChange};
use crate::recovery::classify::{Outcome, classify, is_rate_limited};
use crate::recovery::retry::{self, RetryPlan};
use crate::store::types::*;
use crate::time::rfc3339;
use chrono::{DateTime, TimeDelta, Utc};

/// An attempt's end as the recovery rules see it.
pub(crate) struct Finished {
    pub run_id: i64,
    pub token: i64,
    pub attempt: u32,
    pub schedule: usize,
    pub outcome: Outcome,
    pub rate_limited: bool,
    pub end: AttemptEnd,
    pub cancel: Option<CancelCause>,
    pub verify_step: Option<String>,
    pub verified: Option<bool>,
}

impl Engine {
    pub(crate) fn handle_report(&mut self, now: DateTime<Utc>, report: AttemptReport) -> Result<()> {
        let AttemptReport {
            run_id,
            token,
            signal,
        } = report;
        let known = self.running.get(&run_id).is_some_and(|r| r.token == token);
        match signal {
            AttemptSignal::Line(line) => {
                if !known {
                    return Ok(());
                }
                self.handle_line(now, run_id, token, line)
            }
            AttemptSignal::Ended { ending, log } => {
                let Some(r) = self.running.remove(&run_id).filter(|r| r.token == token) else {
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

    fn handle_line(&mut self, now: DateTime<Utc>, run_id: i64, token: i64, line: AgentLine) -> Result<()> {
        let Some(r) = self.running.get_mut(&run_id) else {
            return Ok(());
        };
        let idx = r.schedule;
        let attempt = r.attempt;
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
                let s = self.schedule(idx);
                let side_effect = s.deliveries.iter().any(|d| d.name == name)
                    || self
                        .cfg
                        .agents
                        .get(&s.agent)
                        .is_some_and(|a| a.is_side_effect(&name));
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
                self.store.write(|tx| {
                    if tx.record_step(run_id, token, attempt, &name, status, side_effect, now)? {
                        tx.append_event(&ev)?;
                    }
                    Ok(())
                })?;
            }
            AgentLine::Usage { tokens, cost_usd } => {
                let s = self.schedule(idx).clone();
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
                        breach = Some(format!("daily cost cap exceeded: ${spent:.2} > ${cap:.2}"));
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
                }
            }
            AgentLine::Malformed { line, error } => {
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
        let s = self.schedule(r.schedule).clone();
        let rate_limited =
            r.rate_limited || is_rate_limited(&ending) || r.result.as_ref().is_some_and(rate_limited_result);
        let mut outcome = classify(
            r.result.as_ref(),
            &ending,
            s.default_error_class,
            s.budget.runtime_error_class,
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
        let verified = r.result.as_ref().and_then(|x| x.verified);
        let f = Finished {
            run_id: r.run_id,
            token: r.token,
            attempt: r.attempt,
            schedule: r.schedule,
            outcome,
            rate_limited,
            end,
            cancel: r.cancel.clone(),
            verify_step: r.verify_step.clone(),
            verified,
        };
        self.apply_finished(now, f)
    }

    /// Records an attempt's end and moves its run on per the recovery rules.
    pub(crate) fn apply_finished(&mut self, now: DateTime<Utc>, f: Finished) -> Result<()> {
        let idx = f.schedule;
        let s = self.schedule(idx).clone();
        let mut f = f;
        // A verify attempt must say whether the step landed; "success" alone
        // says nothing about the outside world, and the remaining steps never ran.
        if f.verify_step.is_some() && f.verified.is_none() && matches!(f.outcome, Outcome::Success { .. }) {
            f.outcome = Outcome::Failure {
                class: ErrorClass::NeedsHuman,
                reason: format!(
                    "verify attempt for step {} gave no `verified` answer",
                    f.verify_step.clone().unwrap_or_default()
                ),
            };
        }
        let verify_answer = f.verify_step.as_ref().zip(f.verified);
        let ended = self.store.write(|tx| {
            // Verify mode: journal what the agent found before the attempt ends.
            if let Some((step, landed)) = &verify_answer {
                let status = if *landed {
                    StepStatus::Done
                } else {
                    StepStatus::Failed
                };
                if tx.record_step(f.run_id, f.token, f.attempt, step, status, true, now)? {
                    tx.append_event(
                        &NewEvent::of(
                            now,
                            Event::Step {
                                name: step.to_string(),
                                status,
                                attempt: f.attempt,
                                side_effect: true,
                                verified: Some(*landed),
                            },
                        )
                        .with_run_id(f.run_id)
                        .for_schedule(&s.tenant, &s.id),
                    )?;
                }
            }
            tx.end_attempt(f.run_id, f.token, &f.end, now)
        })?;
        if !ended {
            let ev = NewEvent::of(
                now,
                Event::StaleResult {
                    token: f.token,
                    attempt: Some(f.attempt),
                    ending: None,
                    note: None,
                },
            )
            .with_run_id(f.run_id)
            .for_schedule(&s.tenant, &s.id);
            self.store.write(|tx| tx.append_event(&ev).map(|_| ()))?;
            return Ok(());
        }
        let run = self.store.read(|tx| tx.run(f.run_id))?;
        if run.state != RunState::Running || run.fencing_token != f.token {
            return Ok(());
        }
        self.wake_held(&run.schedule, now)?;
        // A verify attempt that answered goes straight on to a normal attempt.
        if verify_answer.is_some() && matches!(f.outcome, Outcome::Success { .. }) {
            let ev = NewEvent::of(
                now,
                Event::RetryScheduled {
                    not_before: now,
                    after: Some("verify".into()),
                    attempt: f.attempt,
                    next_attempt: f.attempt + 1,
                    max_attempts: None,
                },
            )
            .for_run(&run);
            let c = Change {
                not_before: Some(now),
                next_check_at: Some(now),
                state_reason: Some("verified; continuing with a normal attempt".into()),
                ..Change::default()
            };
            self.transition(&run, RunState::RetryWait, c, now, &[ev])?;
            return Ok(());
        }
        match f.outcome {
            Outcome::Success { summary, processed } => {
                let ev = NewEvent::of(
                    now,
                    Event::Succeeded {
                        attempt: f.attempt,
                        summary,
                        processed,
                    },
                )
                .for_run(&run);
                self.transition(&run, RunState::Succeeded, Change::default(), now, &[ev])?;
                self.circuit_after_run(idx, true, now)?;
            }
            Outcome::Failure { class, reason } => {
                self.fail_run(
                    now,
                    idx,
                    &run,
                    f.attempt,
                    class,
                    &reason,
                    f.rate_limited,
                    f.cancel.as_ref(),
                )?;
                if let Some(CancelCause::Budget(why)) = &f.cancel {
                    self.pause_for_budget(now, idx, why)?;
                }
                let _ = &s;
            }
        }
        Ok(())
    }

    /// Applies the recovery rules to a failed attempt of a running run.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fail_run(
        &mut self,
        now: DateTime<Utc>,
        idx: usize,
        run: &Run,
        attempt: u32,
        class: ErrorClass,
        reason: &str,
        rate_limited: bool,
        cancel: Option<&CancelCause>,
    ) -> Result<()> {
        let s = self.schedule(idx).clone();
        let agent = self.cfg.agents.get(&s.agent).cloned();
        // Side effects whose outcome is unknown and that nobody can check: the
        // agent's own steps when it cannot verify, and command deliveries.
        // (File and webhook deliveries check themselves on the next attempt.)
        let can_verify = agent.as_ref().is_some_and(|a| a.verify);
        let uncertain: Vec<String> = self
            .store
            .read(|tx| tx.uncertain_steps(run.id))?
            .into_iter()
            .filter(|st| match s.deliveries.iter().find(|d| d.name == *st) {
                Some(d) => matches!(d.kind, crate::config::model::DeliveryKind::Command { .. }),
                None => !can_verify && agent.as_ref().is_some_and(|a| a.is_side_effect(st)),
            })
            .collect();
        let mut class = class;
        let mut reason = reason.to_string();
        if class == ErrorClass::Retryable && !uncertain.is_empty() {
            class = ErrorClass::NeedsHuman;
            reason = format!(
                "{reason}; side-effect step {} started but was not confirmed and cannot be verified",
                uncertain.join(", ")
            );
        }
        let mut events = vec![
            NewEvent::of(
                now,
                Event::Failed {
                    attempt: Some(attempt),
                    class,
                    reason: reason.clone(),
                    is_final: None,
                },
            )
            .for_run(run),
        ];
        let mut change = Change {
            error_class: Some(class),
            last_error: Some(reason.clone()),
            state_reason: Some(reason.clone()),
            ..Change::default()
        };
        if rate_limited {
            let divisor = self.store.write(|tx| {
                let mut st = tx.schedule_state(&run.schedule)?;
                let max = s.max_concurrency.max(1);
                if st.concurrency_divisor.max(1) < max {
                    st.concurrency_divisor = st.concurrency_divisor.max(1) * 2;
                }
                tx.put_schedule_state(&st)?;
                Ok(st.concurrency_divisor)
            })?;
            events.push(
                NewEvent::of(
                    now,
                    Event::ConcurrencyHalved {
                        max_concurrency: s.max_concurrency,
                        divisor,
                        effective: (s.max_concurrency / divisor.max(1)).max(1),
                    },
                )
                .for_run(run),
            );
        }
        match class {
            ErrorClass::NeedsHuman => {
                events.push(
                    NewEvent::of(
                        now,
                        Event::ParkedForHuman {
                            reason: reason.clone(),
                        },
                    )
                    .for_run(run),
                );
                self.transition(run, RunState::NeedsHuman, change, now, &events)?;
                self.note_parked(idx, now);
                self.raise_alert(
                    now,
                    &run.tenant,
                    &run.schedule,
                    Some(run.id),
                    "needs_human",
                    &reason,
                )?;
            }
            ErrorClass::NonRetryable => {
                events[0] = NewEvent::of(
                    now,
                    Event::Failed {
                        attempt: Some(attempt),
                        class,
                        reason: reason.clone(),
                        is_final: Some(true),
                    },
                )
                .for_run(run);
                self.transition(run, RunState::Failed, change, now, &events)?;
                self.raise_alert(now, &run.tenant, &run.schedule, Some(run.id), "failed", &reason)?;
                // A cancellation by overlap is not the schedule failing.
                if !matches!(cancel, Some(CancelCause::Superseded(_))) {
                    self.circuit_after_run(idx, false, now)?;
                }
            }
            ErrorClass::Retryable => {
                let kill = matches!(cancel, Some(CancelCause::Kill));
                let plan = if kill && attempt < s.retry.max_attempts {
                    RetryPlan::At(now)
                } else {
                    retry::plan(&s.retry, run.id, attempt, now)
                };
                match plan {
                    RetryPlan::At(t) => {
                        events.push(
                            NewEvent::of(
                                now,
                                Event::RetryScheduled {
                                    not_before: t,
                                    after: None,
                                    attempt,
                                    next_attempt: attempt + 1,
                                    max_attempts: Some(s.retry.max_attempts),
                                },
                            )
                            .for_run(run),
                        );
                        change.not_before = Some(t);
                        change.next_check_at = Some(t);
                        self.transition(run, RunState::RetryWait, change, now, &events)?;
                    }
                    RetryPlan::Exhausted => {
                        events.push(
                            NewEvent::of(
                                now,
                                Event::DeadLettered {
                                    attempts: attempt,
                                    max_attempts: s.retry.max_attempts,
                                    reason: reason.clone(),
                                },
                            )
                            .for_run(run),
                        );
                        self.transition(run, RunState::Dead, change, now, &events)?;
                        self.raise_alert(
                            now,
                            &run.tenant,
                            &run.schedule,
                            Some(run.id),
                            "dead_lettered",
                            &format!("retries exhausted after {attempt} attempts: {reason}"),
                        )?;
                        self.circuit_after_run(idx, false, now)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs claimed by anyone whose lease expired: the attempt is lost (crash or
    /// hang) and the run goes to retry, or to a human if a side effect is uncertain.
    pub(crate) fn sweep_zombies(&mut self, now: DateTime<Utc>) -> Result<()> {
        let expired = self.store.read(|tx| tx.expired_leases(now))?;
        for run in expired {
            let Some(&idx) = self.index.get(&run.schedule) else {
                continue;
            };
            if self.running.contains_key(&run.id) {
                continue; // ours and alive: the renewal just ran
            }
            let end = AttemptEnd {
                status: Some(AttemptStatus::Lost),
                error_class: Some(ErrorClass::Retryable),
                message: Some(format!(
                    "lease held by {} expired at {}: attempt lost (scheduler crash or hang)",
                    run.lease_owner.clone().unwrap_or_default(),
                    run.lease_expires.map(rfc3339).unwrap_or_default()
                )),
                ..AttemptEnd::default()
            };
            let reason = end.message.clone().unwrap_or_default();
            let lost = self.store.write(|tx| {
                let ok = tx.end_attempt(run.id, run.fencing_token, &end, now)?;
                if ok {
                    tx.append_event(
                        &NewEvent::of(
                            now,
                            Event::Lost {
                                attempt: run.attempts,
                                token: run.fencing_token,
                                reason: reason.clone(),
                            },
                        )
                        .for_run(&run),
                    )?;
                }
                Ok(ok)
            })?;
            if lost {
                self.fail_run(
                    now,
                    idx,
                    &run,
                    run.attempts,
                    ErrorClass::Retryable,
                    &reason,
                    false,
                    None,
                )?;
            }
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
            let why = format!(
                "approval_ttl: no approval within {}",
                crate::time::duration::format_duration(ttl)
            );
            let ev = NewEvent::of(
                now,
                Event::Failed {
                    attempt: None,
                    class: ErrorClass::NeedsHuman,
                    reason: why.clone(),
                    is_final: Some(true),
                },
            )
            .for_run(&run);
            self.transition(&run, RunState::Failed, change_reason(&why), now, &[ev])?;
            self.raise_alert(
                now,
                &run.tenant,
                &run.schedule,
                Some(run.id),
                "approval_ttl",
                &why,
            )?;
            // A run nobody approved failed: it counts for the circuit (and a
            // parked half-open probe reopens it).
            self.circuit_after_run(idx, false, now)?;
        }
        self.next_ttl_deadline = next_deadline;
        Ok(())
    }

    /// A run of schedule `idx` was parked for a human at `now`: its
    /// `approval_ttl` deadline becomes a wakeup of the engine.
    pub(crate) fn note_parked(&mut self, idx: usize, now: DateTime<Utc>) {
        if let Some(ttl) = self.schedule(idx).approval_ttl {
            let deadline = now + crate::time::duration::to_delta(ttl);
            self.next_ttl_deadline = Some(self.next_ttl_deadline.map_or(deadline, |d| d.min(deadline)));
        }
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

    /// A run of schedule `idx` finished: its success time (on success) and
    /// the circuit breaker's count, in one write of the schedule's state.
    pub(crate) fn circuit_after_run(
        &mut self,
        idx: usize,
        succeeded: bool,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let s = self.schedule(idx).clone();
        let (change, st) = self.store.write(|tx| {
            let mut st = tx.schedule_state(&s.id)?;
            let before = st.clone();
            if succeeded {
                // A success also resets the concurrency halved by rate limits.
                st.last_success = Some(now);
                st.concurrency_divisor = 1;
            }
            let change = circuit::on_run_finished(&mut st, &s.circuit, succeeded, now);
            if st != before {
                tx.put_schedule_state(&st)?;
            }
            let ev = match change {
                CircuitChange::Opened => Some(NewEvent::of(
                    now,
                    Event::CircuitOpened {
                        consecutive_failures: Some(st.consecutive_failures),
                        probe_after: Some(now + crate::time::duration::to_delta(s.circuit.cool_down)),
                        after: None,
                        reason: None,
                    },
                )),
                CircuitChange::Closed => Some(NewEvent::of(
                    now,
                    Event::CircuitClosed {
                        by: None,
                        reason: "probe run succeeded".into(),
                    },
                )),
                CircuitChange::None => None,
            };
            if let Some(ev) = ev {
                tx.append_event(&ev.for_schedule(&s.tenant, &s.id))?;
            }
            Ok((change, st))
        })?;
        if change == CircuitChange::Opened {
            self.raise_alert(
                now,
                &s.tenant,
                &s.id,
                None,
                "circuit_opened",
                &format!(
                    "circuit of {} opened after {} consecutive failed runs; owner {}",
                    s.id,
                    st.consecutive_failures,
                    s.owner.clone().unwrap_or_else(|| "(none)".into())
                ),
            )?;
        }
        Ok(())
    }

    pub(crate) fn set_circuit(
        &mut self,
        idx: usize,
        to: CircuitState,
        now: DateTime<Utc>,
        why: &str,
    ) -> Result<()> {
        let s = self.schedule(idx).clone();
        self.store.write(|tx| {
            let mut st = tx.schedule_state(&s.id)?;
            st.circuit = to;
            st.circuit_changed_at = Some(now);
            tx.put_schedule_state(&st)?;
            let reason = why.to_string();
            let ev = match to {
                CircuitState::Closed => Event::CircuitClosed { by: None, reason },
                CircuitState::Open => Event::CircuitOpened {
                    consecutive_failures: None,
                    probe_after: None,
                    after: None,
                    reason: Some(reason),
                },
                CircuitState::HalfOpen => Event::CircuitHalfOpen { reason },
            };
            tx.append_event(&NewEvent::of(now, ev).for_schedule(&s.tenant, &s.id))?;
            Ok(())
        })?;
        Ok(())
    }

    fn pause_for_budget(&mut self, now: DateTime<Utc>, idx: usize, why: &str) -> Result<()> {
        let s = self.schedule(idx).clone();
        let reason = format!("budget: {why}");
        self.store.write(|tx| {
            let mut st = tx.schedule_state(&s.id)?;
            st.paused = true;
            st.paused_reason = Some(reason.clone());
            tx.put_schedule_state(&st)?;
            tx.append_event(
                &NewEvent::of(
                    now,
                    crate::operator::paused_changed(None, true, "agentcron", &reason),
                )
                .for_schedule(&s.tenant, &s.id),
            )?;
            Ok(())
        })?;
        self.raise_alert(
            now,
            &s.tenant,
            &s.id,
            None,
            "budget",
            &format!("{} paused: {reason}", s.id),
        )
    }

    /// Runs held by a slot (quota, overlap, circuit probe) are checked again now.
    pub(crate) fn wake_held(&self, schedule: &str, now: DateTime<Utc>) -> Result<()> {
        // One attempt ended: at most that many catch-up runs can start.
        let backfill = self
            .index
            .get(schedule)
            .map_or(1, |&i| self.cfg.schedules[i].max_concurrency.max(1) as usize);
        if let Some(&idx) = self.index.get(schedule) {
            self.backlog_room(idx, now);
        }
        let quota = self.quota_holds.get();
        let (_, by_quota) = self
            .store
            .write(|tx| tx.recheck_held(schedule, backfill, quota, now))?;
        if quota && by_quota == 0 {
            // Nothing is held by a quota any more: stop looking on every end.
            self.quota_holds.set(false);
        }
        Ok(())
    }

    /// Records an alert event and sends it to the configured sink.
    pub(crate) fn raise_alert(
        &self,
        now: DateTime<Utc>,
        tenant: &str,
        schedule: &str,
        run_id: Option<i64>,
        what: &str,
        message: &str,
    ) -> Result<()> {
        use crate::recovery::alert::{alert_event, dispatch};
        let (detail, ev) = alert_event(&self.cfg, tenant, schedule, run_id, what, message, now);
        self.store.write(|tx| tx.append_event(&ev).map(|_| ()))?;
        if let Some(sink) = &self.cfg.scheduler.alert {
            // Files at once; webhooks and commands queued, so they never stall the loop.
            dispatch(&self.store, sink, detail, &self.cfg.dir, now);
        }
        Ok(())
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
