//! Dispatch: after a claim, build the agent's envelope (window, idempotency key,
//! time context, execution memory, completed and uncertain steps) and start the
//! attempt on the runner.

use super::{Engine, Result, Running};
use crate::agent::envelope::{
    Envelope, EnvelopeWindow, MemoryEntry, TimeContext, idempotency_key, local_rfc3339,
};
use crate::agent::runner::AttemptSpec;
use crate::config::model::TriggerConfig;
use crate::core::event::Event;
use crate::store::types::{Claim, NewEvent, RunReason, ScheduleState};
use crate::time::rfc3339;
use chrono::{DateTime, Utc};
use serde_json::json;

impl Engine {
    /// An uncertain side-effect step is never blindly repeated: an agent that
    /// can verify is first asked whether it landed. This is the step to ask
    /// about, given the run's uncertain steps.
    /// The uncertain side-effect step an agent that can verify is asked about
    /// first. Deliveries check themselves (see agent::delivery); only the
    /// agent's own side-effect steps need its verify mode.
    pub(crate) fn verify_step(&self, idx: usize, uncertain: &[String]) -> Option<String> {
        let s = self.schedule(idx);
        let agent = self.cfg.agents.get(&s.agent)?;
        uncertain
            .iter()
            .find(|st| agent.is_side_effect(st) && !s.deliveries.iter().any(|d| d.name == **st))
            .filter(|_| agent.verify)
            .cloned()
    }

    /// Starts a claimed attempt. `state`: the schedule's state as the claim
    /// left it, if the caller has it (else it is read).
    pub(crate) fn dispatch(
        &mut self,
        idx: usize,
        claim: Claim,
        state: Option<ScheduleState>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        // The config is shared (an Arc), not copied per run.
        let cfg = self.cfg.clone();
        let s = &cfg.schedules[idx];
        let run = &claim.run;
        let Some(agent) = self.cfg.agents.get(&s.agent).cloned() else {
            // The loader guarantees the agent exists; be safe anyway.
            return Ok(());
        };
        let memory_n = self.cfg.scheduler.memory_runs;
        let (completed, uncertain, last_success, memory) = self.store.read(|tx| {
            // Steps are journalled by attempts: a first attempt has none yet.
            let (completed, uncertain) = if claim.attempt > 1 {
                (tx.completed_steps(run.id)?, tx.uncertain_steps(run.id)?)
            } else {
                (vec![], vec![])
            };
            // All the envelope reads of the schedule's state.
            let last_success = match state {
                Some(st) => st.last_success,
                None => tx.last_success(&run.schedule)?,
            };
            // Kept by the store as its runs finish (read once per schedule).
            let memory = tx.execution_memory(&run.tenant, &run.schedule, memory_n)?;
            Ok((completed, uncertain, last_success, memory))
        })?;
        let verify_step = self.verify_step(idx, &uncertain);
        let reason = if verify_step.is_some() {
            RunReason::Verify
        } else {
            claim.run.reason
        };
        // A posted event's payload goes into the envelope.
        let mut event_payload = None;
        if let TriggerConfig::OnEvent { event } | TriggerConfig::AfterEvent { event, .. } = &s.trigger
            && let Some(ev) = self.store.read(|tx| tx.posted_event(event, &run.window_key))?
        {
            event_payload = Some(json!({"name": ev.name, "id": ev.event_id, "payload": ev.payload,
                                        "arrived_at": rfc3339(ev.arrived_at)}));
        }
        let (run_id, due_at, pool) = (run.id, run.due_at, run.pool);
        let lease_until = run.lease_expires.unwrap_or(now + self.lease());
        let token = claim.fencing_token;
        let attempt = claim.attempt;
        let mut timeout = agent.timeout;
        if let Some(max) = s.budget.max_runtime {
            timeout = timeout.min(max);
        }
        // Written when the runner reports the agent running (see
        // `started`), stamped then; `now` is the claim's instant.
        let started = NewEvent::of(
            now,
            Event::Started {
                attempt,
                token,
                reason,
                agent: s.agent.clone(),
                verify_step: verify_step.clone(),
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                // Known once the agent runs (`Engine::started`).
                lateness_ms: None,
            },
        )
        .for_run(run);
        // Made now: its text goes into its attempt row in the claim's
        // transaction, before the agent starts.
        let envelope = {
            let run = claim.run;
            let business_day = s
                .calendar
                .as_ref()
                .and_then(|c| cfg.calendars.get(c))
                .is_none_or(|cal| {
                    cal.is_business_day(run.window_start.with_timezone(&s.timezone).date_naive())
                });
            let mut payload = s.payload.clone();
            if let Some(ev_json) = event_payload {
                match payload.as_object_mut() {
                    Some(map) => {
                        map.insert("event".into(), ev_json);
                    }
                    None => payload = json!({"value": payload, "event": ev_json}),
                }
            }
            Envelope {
                run_id: run.id,
                idempotency_key: idempotency_key(&run.tenant, &run.schedule, &run.window_key),
                window: EnvelopeWindow::new(&run.window_key, run.window_start, run.window_end, s.timezone),
                tenant: run.tenant,
                schedule: run.schedule,
                attempt,
                reason,
                now: local_rfc3339(now, s.timezone),
                context: TimeContext::new(now, s.timezone, business_day, last_success),
                memory: memory
                    .iter()
                    .filter(|m| m.run_id != run.id)
                    .map(|m| MemoryEntry {
                        window: m.window_key.clone(),
                        state: m.state,
                        summary: m.summary.clone(),
                    })
                    .collect(),
                completed_steps: completed,
                uncertain_steps: uncertain,
                verify_step: verify_step.clone(),
                resume_after: run.resume_after,
                payload,
            }
        };
        let text = envelope.to_json();
        self.store
            .write(|tx| tx.set_attempt_envelope(run_id, attempt, &text))?;
        let envelope = std::sync::Arc::new(envelope);
        let spec = AttemptSpec {
            run_id,
            token,
            attempt,
            agent,
            envelope,
            timeout,
            config_dir: self.cfg.dir.clone(),
            log_limit: self.opts.log_limit,
            // Set when it starts, from the lease then left (see start_pending).
            lease: None,
        };
        self.pending_starts.push((
            spec,
            Running {
                run_id,
                token,
                attempt,
                schedule: idx,
                pool,
                handle: crate::agent::runner::AttemptHandle::detached(),
                result: None,
                verify_step,
                cancel: None,
                last_heartbeat_event: None,
                rate_limited: false,
                broken_result: None,
                journaled: false,
                lease_until,
                started: Some(Box::new(started)),
                due_at,
            },
            due_at,
        ));
        self.after_start(idx, now);
        Ok(())
    }

    /// Starts the attempts claimed by a batch that has committed. Each agent's
    /// supervisor enforces the lease as committed: what is left of it now.
    pub(crate) fn start_pending(&mut self) {
        let kill_grace = self.lease_kill_grace();
        let committed = self.clock.now();
        // Drained, not taken: the list keeps its room for the next chunk.
        let mut starts = std::mem::take(&mut self.pending_starts);
        for (mut spec, mut running, due) in starts.drain(..) {
            if self.opts.record_claim_commits {
                self.commit_lateness.record(due, committed);
            }
            spec.lease = Some(crate::agent::runner::AttemptLease {
                valid_for: (running.lease_until - self.clock.now())
                    .to_std()
                    .unwrap_or_default(),
                kill_grace,
            });
            running.handle = self.runner.start(spec, self.reports_tx.clone());
            self.running.insert(running);
        }
        if self.pending_starts.is_empty() {
            self.pending_starts = starts;
        }
    }
}

/// How late claims committed (the batch's commit instant − the window's due
/// instant), the newest [`CommitLateness::KEPT`]: what a claim's durable
/// lateness really was, where the `claimed` event's stamp is the instant it
/// was decided, a chunk (at most [`super::pipeline::CLAIM_CHUNK`] decisions)
/// before its commit.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommitLateness {
    /// (due, committed), a ring once full.
    samples: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    next: usize,
}

impl CommitLateness {
    const KEPT: usize = 1 << 20;

    fn record(&mut self, due: DateTime<Utc>, committed: DateTime<Utc>) {
        if self.samples.len() < Self::KEPT {
            self.samples.push((due, committed));
        } else {
            self.samples[self.next] = (due, committed);
            self.next = (self.next + 1) % Self::KEPT;
        }
    }
}

impl Engine {
    /// The runner says the attempt's agent runs since `at` (its monotonic
    /// instant): its `started` event and its row's `started_at` are written
    /// now, stamped with that instant on the engine's clock (never before
    /// the claim). A virtual clock has no relation to real time: its
    /// stamp is the instant the report is handled.
    pub(crate) fn started(
        &mut self,
        now: DateTime<Utc>,
        run_id: i64,
        token: i64,
        at: std::time::Instant,
    ) -> Result<()> {
        let Some(r) = self.running.get_mut(&run_id).filter(|r| r.token == token) else {
            return Ok(());
        };
        let Some(mut event) = r.started.take() else {
            return Ok(());
        };
        let ago = if self.clock.is_virtual() {
            std::time::Duration::ZERO
        } else {
            at.elapsed()
        };
        let stamp = chrono::TimeDelta::from_std(ago)
            .ok()
            .and_then(|ago| now.checked_sub_signed(ago))
            .unwrap_or(now)
            .max(event.at);
        event.at = stamp;
        let due = r.due_at;
        if let Some(Event::Started { lateness_ms, .. }) = event.typed_mut() {
            *lateness_ms = Some((stamp - due).num_milliseconds());
        }
        // Not for an attempt that ended meanwhile (swept as lost by another
        // scheduler while we could not hear its report).
        self.store.write(|tx| {
            if tx.attempt_started_at(run_id, token, stamp)? {
                tx.append_event(&event)?;
            }
            Ok(())
        })?;
        Ok(())
    }
}

impl Engine {
    /// (due, committed) of the newest claims this engine made (up to about a
    /// million, oldest first), with `EngineOptions::record_claim_commits`:
    /// how late each claim was durable, which the lateness bench reports as
    /// commit − due.
    pub fn claim_commits(&self) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
        let (s, next) = (&self.commit_lateness.samples, self.commit_lateness.next);
        s[next..].iter().chain(&s[..next]).copied().collect()
    }
}
