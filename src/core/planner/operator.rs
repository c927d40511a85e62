//! Operator actions as plans: approve, reject and requeue a run; pause,
//! resume and close the circuit of a schedule. The same rules as the engine's
//! (a rejected run counts for the circuit, a requeue is the one way out of
//! `failed` / `dead`), refused plainly when the run or schedule is not in a
//! state the action applies to.

use super::{delta, paused_changed, target};
use crate::config::model::ScheduleConfig;
use crate::core::event::Event;
use crate::core::plan::{Effect, Plan, Scope, Step};
use crate::core::records::{Approval, Change, Pool, Run, RunState};
use chrono::{DateTime, Utc};

/// An operator's action on a run.
#[derive(Debug, Clone, PartialEq)]
pub enum RunAction {
    Approve { resume_after: Option<String> },
    Reject,
    Requeue,
}

/// An operator's action on a schedule or the whole store.
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleAction {
    Pause,
    Resume,
    CloseCircuit,
}

/// Who acted and why (operator actions).
#[derive(Debug, Clone, PartialEq)]
pub struct Actor<'a> {
    pub name: &'a str,
    pub reason: &'a str,
}

/// An operator action refused by the rules (exit 1): not waiting, already closed …
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// Operator actions that change something need a reason (DESIGN.md: recorded
/// with who and why).
pub fn require_reason(who: &Actor<'_>) -> Result<(), Refused> {
    if who.reason.trim().is_empty() {
        return Err(Refused("a reason is required".into()));
    }
    Ok(())
}

/// Plans an operator's action on a run. `schedule`: its configuration, when
/// the caller has one (a reject counts for the circuit only then).
pub fn run_action(
    run: &Run,
    action: RunAction,
    who: &Actor<'_>,
    schedule: Option<&ScheduleConfig>,
    now: DateTime<Utc>,
) -> Result<Plan, Refused> {
    require_reason(who)?;
    let not_waiting = || {
        Refused(format!(
            "run {} is {}, not waiting for approval (needs_human)",
            run.id, run.state
        ))
    };
    let mut plan = Plan {
        target: Some(target(run, None)),
        ..Plan::default()
    };
    match action {
        RunAction::Approve { resume_after } => {
            if run.state != RunState::NeedsHuman {
                return Err(not_waiting());
            }
            let to = if run.attempts > 0 {
                RunState::RetryWait
            } else {
                RunState::Pending
            };
            plan.steps.push(Step::Transition {
                to,
                change: Change {
                    not_before: Some(now),
                    next_check_at: Some(now),
                    resume_after: resume_after.clone(),
                    state_reason: Some(format!("approved by {}: {}", who.name, who.reason)),
                    operator: Some(who.name.to_string()),
                    ..Change::default()
                },
            });
            plan.approval = Some(Approval {
                run_id: run.id,
                approved: true,
                actor: who.name.to_string(),
                reason: who.reason.to_string(),
                resume_after: resume_after.clone(),
                at: now,
            });
            plan.event(
                Scope::Run,
                Event::Approved {
                    by: who.name.to_string(),
                    reason: who.reason.to_string(),
                    resume_after,
                    at: now,
                },
            );
        }
        RunAction::Reject => {
            if run.state != RunState::NeedsHuman {
                return Err(not_waiting());
            }
            plan.steps.push(Step::Transition {
                to: RunState::Failed,
                change: Change {
                    state_reason: Some(format!("rejected by {}: {}", who.name, who.reason)),
                    operator: Some(who.name.to_string()),
                    ..Change::default()
                },
            });
            plan.approval = Some(Approval {
                run_id: run.id,
                approved: false,
                actor: who.name.to_string(),
                reason: who.reason.to_string(),
                resume_after: None,
                at: now,
            });
            plan.event(
                Scope::Run,
                Event::Rejected {
                    by: who.name.to_string(),
                    reason: who.reason.to_string(),
                    at: now,
                },
            );
            // A rejected run is a failed run for the circuit breaker: it counts
            // toward `open_after`, and a rejected half-open probe reopens it.
            if let Some(s) = schedule {
                let mut sd = delta(s);
                sd.finished = Some((false, s.circuit.clone()));
                plan.schedule = Some(sd);
            }
            if run.pool == Pool::Backfill {
                // It leaves the catch-up queue: the next window of its schedule may go.
                plan.effects.push(Effect::WakeHeld {
                    schedule: run.schedule.clone(),
                    slots: Some(1),
                });
            }
        }
        RunAction::Requeue => {
            if !matches!(run.state, RunState::Failed | RunState::Dead) {
                return Err(Refused(format!(
                    "run {} is {}; only failed or dead runs can be requeued",
                    run.id, run.state
                )));
            }
            plan.steps.push(Step::Transition {
                to: RunState::RetryWait,
                change: Change {
                    not_before: Some(now),
                    next_check_at: Some(now),
                    state_reason: Some(format!("requeued by {}: {}", who.name, who.reason)),
                    operator: Some(who.name.to_string()),
                    ..Change::default()
                },
            });
            plan.event(
                Scope::Run,
                Event::Requeued {
                    by: who.name.to_string(),
                    reason: who.reason.to_string(),
                    from: run.state.as_str().to_string(),
                    at: now,
                },
            );
        }
    }
    Ok(plan)
}

/// A schedule action that is already in effect — pause a paused schedule,
/// resume one that is not paused, close a closed circuit — and what to say
/// instead of acting: nothing changes, the first reason is kept, and it is
/// not a failure (the command line exits 0; the console says it).
pub fn schedule_already(
    s: &ScheduleConfig,
    state: &crate::core::records::ScheduleState,
    action: &ScheduleAction,
) -> Option<String> {
    match action {
        ScheduleAction::Pause if state.paused => Some(format!(
            "{} is already paused ({}); the first reason is kept",
            s.id,
            state.paused_reason.clone().unwrap_or_default()
        )),
        ScheduleAction::Resume if !state.paused => Some(format!("{} is already resumed (not paused)", s.id)),
        ScheduleAction::CloseCircuit if state.circuit == crate::core::records::CircuitState::Closed => {
            Some(format!("the circuit of {} is already closed", s.id))
        }
        _ => None,
    }
}

/// Plans an operator's action on a schedule, given its current state.
pub fn schedule_action(
    s: &ScheduleConfig,
    state: &crate::core::records::ScheduleState,
    action: ScheduleAction,
    who: &Actor<'_>,
) -> Result<Plan, Refused> {
    let mut plan = Plan::default();
    let mut sd = delta(s);
    match action {
        ScheduleAction::Pause => {
            require_reason(who)?;
            sd.pause = Some(Some(format!("by {}: {}", who.name, who.reason)));
            plan.event(
                Scope::Schedule,
                paused_changed(Some(&s.id), true, who.name, who.reason),
            );
        }
        ScheduleAction::Resume => {
            if !state.paused {
                return Err(Refused(format!("{} is not paused", s.id)));
            }
            sd.pause = Some(None);
            plan.event(
                Scope::Schedule,
                paused_changed(Some(&s.id), false, who.name, who.reason),
            );
            // Held windows are checked again now rather than at their next tick.
            plan.effects.push(Effect::RecheckAll {
                schedule: Some(s.id.clone()),
            });
        }
        ScheduleAction::CloseCircuit => {
            require_reason(who)?;
            if state.circuit == crate::core::records::CircuitState::Closed {
                return Err(Refused(format!("the circuit of {} is already closed", s.id)));
            }
            sd.circuit = Some((
                crate::core::records::CircuitState::Closed,
                who.reason.to_string(),
                Some(who.name.to_string()),
            ));
            // Runs held for the probe (catch-up ones wait to be woken) go now.
            plan.effects.push(Effect::WakeHeld {
                schedule: s.id.clone(),
                slots: Some((s.max_concurrency as usize).max(1)),
            });
        }
    }
    plan.schedule = Some(sd);
    Ok(plan)
}
