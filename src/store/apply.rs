//! [`Tx::apply`]: the one writer of run state. A [`Plan`] from the core is
//! carried out whole — its events, the run's steps (through
//! [`Tx::transition`] and [`Tx::claim`], which nothing else calls), the
//! operator's approval record, the schedule-state delta — or, when the run is
//! no longer what the plan expected, not at all: a conflict, and the caller
//! drops the plan's effects.

use super::types::*;
use super::{Result, StoreError, Tx};
use crate::core::plan::{Effect, Plan, Scope, Settled, Step, settle_schedule};
use chrono::{DateTime, Utc};

/// What applying a plan came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// Written. The run as it is now (if the plan had one), the new attempt
    /// (if it claimed), and the effects to perform: the plan's, then those the
    /// schedule delta raised (the circuit opened → its alert).
    Done {
        run: Option<Box<Run>>,
        claim: Option<Box<Claim>>,
        effects: Vec<Effect>,
    },
    /// The run moved on first (another scheduler, an operator, a late report):
    /// nothing was written.
    Conflict { run_id: i64, why: String },
}

impl Applied {
    pub fn is_conflict(&self) -> bool {
        matches!(self, Applied::Conflict { .. })
    }
}

impl Tx<'_> {
    /// Applies `plan` at `now` in one savepoint of this transaction. A plan
    /// about a run that does not exist → `RunNotFound`; one the state machine
    /// refuses → `IllegalTransition` (a planner bug, never rolled forward).
    pub fn apply(&self, plan: &Plan, now: DateTime<Utc>) -> Result<Applied> {
        self.conn.execute_batch("SAVEPOINT agentcron_apply")?;
        match self.apply_steps(plan, now) {
            Ok(Applied::Conflict { run_id, why }) => {
                self.conn
                    .execute_batch("ROLLBACK TO agentcron_apply; RELEASE agentcron_apply")?;
                Ok(Applied::Conflict { run_id, why })
            }
            Ok(done) => {
                self.conn.execute_batch("RELEASE agentcron_apply")?;
                Ok(done)
            }
            Err(e) => {
                let _ = self
                    .conn
                    .execute_batch("ROLLBACK TO agentcron_apply; RELEASE agentcron_apply");
                Err(e)
            }
        }
    }

    fn apply_steps(&self, plan: &Plan, now: DateTime<Utc>) -> Result<Applied> {
        // Events first: they precede the rows they explain in the trace (a
        // decision before its claim), and roll back with them.
        for (scope, event) in &plan.events {
            let mut ev = NewEvent::of(now, event.clone());
            match (scope, &plan.target, &plan.schedule) {
                (Scope::Run, Some(t), _) => {
                    ev = ev.for_schedule(&t.tenant, &t.schedule).with_run_id(t.run_id);
                }
                (Scope::Schedule, Some(t), _) => ev = ev.for_schedule(&t.tenant, &t.schedule),
                (Scope::Schedule, None, Some(d)) => ev = ev.for_schedule(&d.tenant, &d.schedule),
                _ => {}
            }
            self.append_event(&ev)?;
        }
        let mut run = None;
        let mut claim = None;
        if let Some(t) = &plan.target {
            let conflict = |why: String| Applied::Conflict {
                run_id: t.run_id,
                why,
            };
            let mut state = t.state;
            for step in &plan.steps {
                match step {
                    Step::Transition { to, change } => {
                        match self.transition_fenced(t.run_id, state, *to, change, t.token, now) {
                            Ok(r) => {
                                state = r.state;
                                run = Some(Box::new(r));
                            }
                            Err(StoreError::StateConflict { actual, .. }) => {
                                return Ok(conflict(format!("run is {actual}, not {state}")));
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    Step::Claim {
                        owner,
                        lease_until,
                        reason,
                        due,
                    } => match self.claim(t.run_id, state, owner, *lease_until, *reason, *due, now)? {
                        Some(c) => {
                            state = RunState::Running;
                            run = Some(Box::new(c.run.clone()));
                            claim = Some(Box::new(c));
                        }
                        None => return Ok(conflict("claimed by someone else first".into())),
                    },
                    Step::Recheck { at, why } => {
                        let why = why.as_ref().map(|(reason, hold)| (reason.as_str(), *hold));
                        let held = self.recheck(t.run_id, state, *at, why)?;
                        if !held {
                            return Ok(conflict("no longer waiting".into()));
                        }
                    }
                    Step::EndAttempt {
                        attempt,
                        end,
                        verified,
                    } => {
                        let token = t.token.unwrap_or_default();
                        if let Some((step, landed)) = verified {
                            let status = if *landed {
                                StepStatus::Done
                            } else {
                                StepStatus::Failed
                            };
                            if !self.record_step(t.run_id, token, *attempt, step, status, true, now)? {
                                return Ok(conflict("the attempt is no longer current".into()));
                            }
                        }
                        if !self.end_attempt(t.run_id, token, end, now)? {
                            return Ok(conflict("the attempt already ended".into()));
                        }
                    }
                }
            }
            if let Some(a) = &plan.approval {
                self.record_approval(a)?;
            }
        }
        let mut effects = plan.effects.clone();
        if let Some(delta) = &plan.schedule {
            let mut st = self.schedule_state(&delta.schedule)?;
            let before = st.clone();
            let Settled {
                events,
                effects: raised,
            } = settle_schedule(&mut st, delta, now);
            if st != before {
                self.put_schedule_state(&st)?;
            }
            for e in events {
                let mut ev = NewEvent::of(now, e.clone()).for_schedule(&delta.tenant, &delta.schedule);
                // The halving is the failed run's own consequence; the circuit
                // and the pause belong to the schedule.
                if let (crate::core::event::Event::ConcurrencyHalved { .. }, Some(t)) = (&e, &plan.target) {
                    ev = ev.with_run_id(t.run_id);
                }
                self.append_event(&ev)?;
            }
            effects.extend(raised);
        }
        Ok(Applied::Done { run, claim, effects })
    }
}
