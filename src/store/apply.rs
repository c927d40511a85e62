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
    /// Written. The run as it is now (if the plan had one; a window opened
    /// claimed has it in its claim only), the new attempt (if it claimed),
    /// and the effects to perform: the plan's, then those the schedule delta
    /// raised (the circuit opened → its alert).
    Done {
        run: Option<Box<Run>>,
        claim: Option<Box<Claim>>,
        effects: Vec<Effect>,
        /// The schedule's state as the plan left it, if the plan changed it
        /// (a claim's dispatch needs it: read here, not once more).
        state: Option<Box<ScheduleState>>,
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
    /// Applies `plan` at `now`. The run's first step is the conditional write
    /// that decides: if the run is no longer what the plan expected, nothing
    /// has been written and the answer is a conflict. Later steps follow from
    /// the first (an attempt that just ended was its run's current one), so
    /// one of them conflicting is a broken invariant: an error, which rolls
    /// the caller's whole transaction back. A plan about a run that does not
    /// exist → `RunNotFound`; one the state machine refuses →
    /// `IllegalTransition` (a planner bug).
    pub fn apply(&self, plan: &Plan, now: DateTime<Utc>) -> Result<Applied> {
        let mut run = None;
        let mut claim = None;
        if let Some(t) = &plan.target {
            let mut state = t.state;
            // The run as this transaction holds it, when known: read here
            // for an attempt's end, or left by the last step. A transition
            // from it builds its result instead of reading the row back
            // (nothing else writes the row inside this transaction).
            let mut read_first: Option<Run> = None;
            let mut image_known = true;
            // An attempt's end writes the attempt before the run: check the
            // run's state and fence first, so a conflict writes nothing.
            if matches!(plan.steps.first(), Some(Step::EndAttempt { .. })) {
                let before = self
                    .take_run(t.run_id)?
                    .ok_or(StoreError::RunNotFound(t.run_id))?;
                let (actual, token) = (before.state, before.fencing_token);
                if actual != t.state || t.token.is_some_and(|tok| tok != token) {
                    return Ok(Applied::Conflict {
                        run_id: t.run_id,
                        why: format!("run is {actual} (token {token}), not {}", t.state),
                    });
                }
                read_first = Some(before);
            }
            for (i, step) in plan.steps.iter().enumerate() {
                let held = match step {
                    Step::Transition { to, change } => {
                        // Moved in: the transition's result is built from it.
                        let before = if image_known {
                            run.take().map(|r: Box<Run>| *r).or_else(|| read_first.take())
                        } else {
                            None
                        };
                        match self.transition_fenced(t.run_id, state, *to, change, t.token, now, before) {
                            Ok(r) => {
                                state = r.state;
                                run = Some(Box::new(r));
                                Ok(())
                            }
                            Err(StoreError::StateConflict { actual, .. }) => {
                                Err(format!("run is {actual}, not {state}"))
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    Step::Claim {
                        owner,
                        lease_until,
                        reason,
                        due,
                    } => match self.claim_row(t.run_id, state, owner, *lease_until, *reason, now)? {
                        Some(r) => {
                            state = RunState::Running;
                            claim = Some(Box::new(Claim {
                                attempt: r.attempts,
                                fencing_token: r.fencing_token,
                                run: r.clone(),
                            }));
                            run = Some(Box::new(r));
                            let _ = due;
                            Ok(())
                        }
                        None => Err("claimed by someone else first".to_string()),
                    },
                    Step::Recheck { at, why } => {
                        image_known = false;
                        let why = why.as_ref().map(|(reason, hold)| (reason.as_str(), *hold));
                        if self.recheck(t.run_id, state, *at, why)? {
                            Ok(())
                        } else {
                            Err("no longer waiting".into())
                        }
                    }
                    Step::EndAttempt {
                        attempt,
                        end,
                        verified,
                    } => {
                        let token = t.token.unwrap_or_default();
                        let journaled = match verified {
                            Some((step, landed)) => {
                                let status = if *landed {
                                    StepStatus::Done
                                } else {
                                    StepStatus::Failed
                                };
                                self.record_step(t.run_id, token, *attempt, step, status, true, now)?
                            }
                            None => true,
                        };
                        if !journaled {
                            Err("the attempt is no longer current".into())
                        } else if !self.end_attempt(t.run_id, token, end, now)?
                            && !match &read_first {
                                Some(r) => self.end_unwritten_attempt(r, *attempt, end, now)?,
                                None => false,
                            }
                        {
                            Err("the attempt already ended".into())
                        } else {
                            Ok(())
                        }
                    }
                };
                match held {
                    Ok(()) => {}
                    // Nothing written yet: the run moved on first.
                    Err(why) if i == 0 => {
                        return Ok(Applied::Conflict {
                            run_id: t.run_id,
                            why,
                        });
                    }
                    Err(why) => {
                        return Err(StoreError::Invariant(format!(
                            "run {}: step {} of a plan did not hold after the first did: {why}",
                            t.run_id,
                            i + 1
                        )));
                    }
                }
            }
            if let Some(a) = &plan.approval {
                self.record_approval(a)?;
            }
        }
        // Events: the plan's (a decision before the claim it led to), then
        // the claim's own; a claim's row holds its decision when every event
        // before it is one of its run's that can be folded in.
        let claimed = match (
            &claim,
            plan.steps.iter().find(|s| matches!(s, Step::Claim { .. })),
        ) {
            (Some(c), Some(Step::Claim { owner, due, .. })) => Some((c, owner, *due)),
            _ => None,
        };
        // Room for a claim's own event, folded with them when its start comes.
        let mut events = Vec::with_capacity(plan.events.len() + 1);
        for (scope, event) in &plan.events {
            let mut ev = NewEvent::of_ref(now, event);
            match (scope, &plan.target, &plan.schedule) {
                (Scope::Run, Some(t), _) => {
                    ev = ev.for_schedule(&t.tenant, &t.schedule).with_run_id(t.run_id);
                }
                (Scope::Schedule, Some(t), _) => ev = ev.for_schedule(&t.tenant, &t.schedule),
                (Scope::Schedule, None, Some(d)) => ev = ev.for_schedule(&d.tenant, &d.schedule),
                _ => {}
            }
            events.push(ev);
        }
        match claimed {
            Some((c, owner, due)) if foldable(&plan.events) => {
                self.append_claimed(&c.run, owner, due, now, events)?;
            }
            _ => {
                for ev in &events {
                    self.append_event(ev)?;
                }
                if let Some((c, owner, due)) = claimed {
                    self.append_claimed(&c.run, owner, due, now, Vec::new())?;
                }
            }
        }
        let mut effects = plan.effects.clone();
        let mut state = None;
        if let Some(delta) = &plan.schedule {
            // Read through the cache, which then holds it as it was.
            let mut st = self.schedule_state(&delta.schedule)?;
            let Settled {
                events,
                effects: raised,
            } = settle_schedule(&mut st, delta, now);
            if !self.model.holds(&st) {
                self.put_schedule_state(&st)?;
            }
            for e in events {
                let mut ev = NewEvent::of_ref(now, &e).for_schedule(&delta.tenant, &delta.schedule);
                // The halving is the failed run's own consequence; the circuit
                // and the pause belong to the schedule.
                if let (crate::core::event::Event::ConcurrencyHalved { .. }, Some(t)) = (&e, &plan.target) {
                    ev = ev.with_run_id(t.run_id);
                }
                self.append_event(&ev)?;
            }
            effects.extend(raised);
            state = Some(Box::new(st));
        }
        Ok(Applied::Done {
            run,
            claim,
            effects,
            state,
        })
    }
}

impl Tx<'_> {
    /// Opens a window already claimed: `new` is the pending run of a window
    /// opened at `opened_at` (its `opened` event), and `plan` the claim
    /// decided for it before its row existed (a plan for which
    /// [`opens_claimed`] holds, its target's id unknown yet). Written as
    /// [`Tx::insert_run`] and [`Tx::apply`] would write them — the same run
    /// row, attempt, fencing token and events in the same order — but the
    /// run is inserted claimed, without the pending row and its claim's
    /// update. A window whose run exists already (another scheduler opened
    /// it first) is a conflict, and nothing is written.
    pub fn open_claimed(
        &self,
        new: &NewRun,
        opened: crate::core::event::Event,
        opened_at: DateTime<Utc>,
        plan: Plan,
        now: DateTime<Utc>,
    ) -> Result<Applied> {
        let run = super::opened_run(new, 0, opened_at);
        self.open_claimed_as(new, run, opened, opened_at, plan, now)
    }

    /// [`Tx::open_claimed`] given `run`, the row `new`'s insert at
    /// `opened_at` would write (`opened_run(new, 0, opened_at)`), which the
    /// caller built already: moved in and made the claimed row, not built
    /// again.
    pub(crate) fn open_claimed_as(
        &self,
        new: &NewRun,
        run: Run,
        opened: crate::core::event::Event,
        opened_at: DateTime<Utc>,
        plan: Plan,
        now: DateTime<Utc>,
    ) -> Result<Applied> {
        let (
            Some(t),
            [
                Step::Claim {
                    owner,
                    lease_until,
                    reason,
                    due,
                },
            ],
        ) = (&plan.target, plan.steps.as_slice())
        else {
            return Err(StoreError::Invariant(
                "open_claimed: the plan is not one claim".into(),
            ));
        };
        if !opens_claimed(&plan) || t.state != new.state {
            return Err(StoreError::Invariant(
                "open_claimed: the plan is not a first claim of a pending run".into(),
            ));
        }
        debug_assert_eq!(
            run,
            super::opened_run(new, 0, opened_at),
            "the row built for the window"
        );
        let Some(run) = self.insert_claimed_row(new, run, owner, *lease_until, *reason, now)? else {
            return Ok(Applied::Conflict {
                run_id: 0,
                why: format!(
                    "window {} of {} was opened by someone else first",
                    new.window_key, new.schedule
                ),
            });
        };
        // Its run's tenant, schedule and id: from the claim's row when folded
        // into it, from `run` when written alone (`append_event_for`).
        let (owner, due) = (owner.clone(), *due);
        // Typed: their text is made when the row is written.
        let opened = NewEvent::of(opened_at, opened);
        if foldable(&plan.events) && crate::store::FOLDED_KINDS.contains(&opened.kind.as_ref()) {
            // One row: the opening and the decision folded into the claim.
            // Room for the claim's own event.
            let mut folded = Vec::with_capacity(3 + plan.events.len());
            folded.push(opened);
            folded.extend(plan.events.into_iter().map(|(_, event)| NewEvent::of(now, event)));
            self.append_claimed(&run, &owner, due, now, folded)?;
        } else {
            self.append_event_for(&opened, &run)?;
            for (scope, event) in plan.events {
                let ev = NewEvent::of(now, event);
                let ev = match scope {
                    Scope::Run => ev.for_schedule(&run.tenant, &run.schedule).with_run_id(run.id),
                    Scope::Schedule => ev.for_schedule(&run.tenant, &run.schedule),
                    Scope::Global => ev,
                };
                self.append_event(&ev)?;
            }
            self.append_claimed(&run, &owner, due, now, Vec::new())?;
        }
        // The run as written is the claim's (not copied into `run` too).
        Ok(Applied::Done {
            claim: Some(Box::new(Claim {
                attempt: run.attempts,
                fencing_token: run.fencing_token,
                run,
            })),
            run: None,
            effects: plan.effects,
            state: None,
        })
    }
}

/// Whether the events a plan records before its claim go in the claim's row
/// ([`NewEvent::folding`]): all of them its run's, of the kinds folded.
fn foldable(events: &[(Scope, crate::core::event::Event)]) -> bool {
    events
        .iter()
        .all(|(scope, e)| *scope == Scope::Run && crate::store::FOLDED_KINDS.contains(&e.kind()))
}

/// Whether `plan` is what [`Tx::open_claimed`] writes: a pending run's
/// claim, nothing else changed (no approval, no schedule-state delta).
pub fn opens_claimed(plan: &Plan) -> bool {
    plan.target
        .as_ref()
        .is_some_and(|t| t.state == RunState::Pending && t.token.is_none())
        && matches!(plan.steps.as_slice(), [Step::Claim { .. }])
        && plan.approval.is_none()
        && plan.schedule.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::ErrorClass;
    use chrono::{DateTime, Utc};

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_780_000_000_000 + ms).expect("instant")
            + chrono::Duration::microseconds(321)
    }

    /// A transition given the run as the transaction holds it (as `apply`
    /// gives it) builds the changed run itself: it must be the stored row,
    /// field for field, for every kind of change (set fields, kept fields,
    /// cleared schedule, lease and hold, sub-millisecond instants).
    #[test]
    fn a_built_transition_result_is_the_stored_row() {
        let store = crate::store::Store::open_in_memory().expect("store");
        let cases: Vec<(RunState, Vec<(RunState, Change)>)> = vec![
            (RunState::Running, vec![(RunState::Succeeded, Change::default())]),
            (
                RunState::Running,
                vec![(
                    RunState::Failed,
                    Change {
                        state_reason: Some("exit 3".into()),
                        error_class: Some(ErrorClass::NonRetryable),
                        last_error: Some("bad input".into()),
                        resume_after: Some("fetch".into()),
                        // Cleared on entering a terminal state all the same.
                        next_check_at: Some(at(7_000)),
                        ..Change::default()
                    },
                )],
            ),
            (
                RunState::Running,
                vec![(
                    RunState::Dead,
                    Change {
                        reason: Some(RunReason::Retry),
                        ..Change::default()
                    },
                )],
            ),
            (
                RunState::Running,
                vec![(
                    RunState::RetryWait,
                    Change {
                        state_reason: Some("retry".into()),
                        not_before: Some(at(5_000)),
                        next_check_at: Some(at(5_000)),
                        error_class: Some(ErrorClass::Retryable),
                        last_error: Some("boom".into()),
                        ..Change::default()
                    },
                )],
            ),
            (
                RunState::Running,
                vec![(
                    RunState::NeedsHuman,
                    Change {
                        state_reason: Some("uncertain".into()),
                        resume_after: Some("deliver".into()),
                        ..Change::default()
                    },
                )],
            ),
            (
                RunState::Pending,
                vec![
                    (RunState::Missed, Change::default()),
                    (
                        RunState::Pending,
                        Change {
                            pool: Some(Pool::Backfill),
                            reason: Some(RunReason::Catchup),
                            next_check_at: Some(at(9_000)),
                            ..Change::default()
                        },
                    ),
                ],
            ),
            (
                RunState::Pending,
                vec![(
                    RunState::Skipped,
                    Change {
                        state_reason: Some("calendar".into()),
                        ..Change::default()
                    },
                )],
            ),
        ];
        store
            .write(|tx| {
                for (i, (start, steps)) in cases.iter().enumerate() {
                    let new = NewRun {
                        tenant: "t".into(),
                        schedule: "s".into(),
                        window_key: format!("w{i}"),
                        window_start: at(0),
                        window_end: at(60_000),
                        due_at: at(0),
                        state: RunState::Pending,
                        reason: RunReason::Scheduled,
                        pool: Pool::OnTime,
                        state_reason: Some("held".into()),
                        next_check_at: Some(at(1)),
                    };
                    let mut run = tx.insert_run(&new, at(0))?.expect("new run");
                    if *start == RunState::Running {
                        run = tx
                            .claim_row(run.id, run.state, "me", at(30_000), RunReason::Scheduled, at(2))?
                            .expect("claimed");
                    }
                    for (to, change) in steps {
                        let token = (run.state == RunState::Running).then_some(run.fencing_token);
                        let built = tx.transition_fenced(
                            run.id,
                            run.state,
                            *to,
                            change,
                            token,
                            at(3),
                            Some(run.clone()),
                        )?;
                        let stored = tx.run(run.id)?;
                        assert_eq!(built, stored, "case {i}: {} → {to}", run.state);
                        run = stored;
                    }
                }
                Ok(())
            })
            .expect("transitions");
    }
}
