//! What a decision does, as data: the [`Plan`] a pure planner
//! ([`crate::core::machine::plan`]) returns and the store's one writer
//! (`store::apply`) carries out in one transaction — the run's step, the
//! schedule-state delta and the events together — or not at all, when the run
//! is no longer in the state the plan expected (another scheduler, or an
//! operator, moved it first). Then its effects are dropped too: no alert, no
//! circuit count, no wake-up from a race that was lost.

use super::decision::HoldKind;
use super::event::{Alert, Event};
use super::records::{Approval, AttemptEnd, Change, CircuitState, RunReason, RunState, ScheduleState};
use crate::config::model::CircuitPolicy;
use chrono::{DateTime, Utc};

/// The run a plan changes and the state it must still be in.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub run_id: i64,
    pub tenant: String,
    pub schedule: String,
    /// The state the run must be in for the plan to hold.
    pub state: RunState,
    /// For plans about an attempt: its fencing token must still be the run's.
    pub token: Option<i64>,
}

/// One change of the run, in order (a window that closes is `missed`, then
/// queued for catch-up: two steps).
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A state change through the state machine.
    Transition { to: RunState, change: Change },
    /// Pending / retry_wait → running: a new attempt under a new lease.
    Claim {
        owner: String,
        lease_until: DateTime<Utc>,
        reason: RunReason,
        due: DateTime<Utc>,
    },
    /// The run stays where it is and is looked at again at `at`; `why` (the
    /// hold's prose and kind) replaces the old one when given.
    Recheck {
        at: DateTime<Utc>,
        why: Option<(String, Option<HoldKind>)>,
    },
    /// The attempt holding the target's token ended; refused if it already
    /// ended (a late report). `verified` is a verify attempt's answer about
    /// a side-effect step, journaled first.
    EndAttempt {
        attempt: u32,
        end: AttemptEnd,
        verified: Option<(String, bool)>,
    },
}

/// What a plan does to its schedule's durable state. The store applies it to
/// the state it reads inside the transaction (so two schedulers count twice
/// only when two runs really failed) through [`settle_schedule`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScheduleDelta {
    pub tenant: String,
    pub schedule: String,
    pub owner: Option<String>,
    /// A run finished for good: success or failure, for the circuit breaker
    /// (and, on success, the last success and the full concurrency).
    pub finished: Option<(bool, CircuitPolicy)>,
    /// A rate limit halves the concurrency (never below one of max).
    pub halve_concurrency: Option<u32>,
    /// Pause (with the reason) or resume.
    pub pause: Option<Option<String>>,
    /// Set the circuit by hand (`HalfOpen` for a probe, `Closed` by an
    /// operator) with the event's reason and who, if an operator.
    pub circuit: Option<(CircuitState, String, Option<String>)>,
    /// An attempt of the schedule started.
    pub last_start: Option<DateTime<Utc>>,
}

/// Where an event of a plan belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The target run (its id, tenant and schedule).
    Run,
    /// The schedule (tenant and schedule, no run).
    Schedule,
    /// The whole store (kill switch, scheduler events).
    Global,
}

/// Something to do once the plan is applied — or never, if it was not.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Start the attempt the plan's claim created.
    Dispatch,
    /// Send an alert to the configured sink (its event is in the plan).
    Alert(Alert),
    /// Runs of the schedule held by a slot may go now (at most `slots` of its
    /// catch-up backlog; `None`: as many as one freed attempt admits).
    WakeHeld { schedule: String, slots: Option<usize> },
    /// Every waiting run (of one schedule, or all) is checked again now.
    RecheckAll { schedule: Option<String> },
    /// A run was parked for a human: its `approval_ttl` deadline.
    ApprovalDeadline(DateTime<Utc>),
}

/// Everything one input changes, to be applied together or not at all.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub target: Option<Target>,
    pub steps: Vec<Step>,
    /// An operator's approve / reject, recorded with the transition.
    pub approval: Option<Approval>,
    pub schedule: Option<ScheduleDelta>,
    pub events: Vec<(Scope, Event)>,
    pub effects: Vec<Effect>,
}

impl Plan {
    /// A plan that changes nothing.
    pub fn nothing() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.schedule.is_none() && self.events.is_empty() && self.effects.is_empty()
    }

    /// The state the run ends in if the plan applies.
    pub fn final_state(&self) -> Option<RunState> {
        self.steps.iter().rev().find_map(|s| match s {
            Step::Transition { to, .. } => Some(*to),
            Step::Claim { .. } => Some(RunState::Running),
            _ => None,
        })
    }

    pub fn event(&mut self, scope: Scope, e: Event) {
        self.events.push((scope, e));
    }

    /// Records an alert (its event) and sends it once applied.
    pub fn alert(&mut self, a: Alert) {
        let scope = if a.run.is_some() {
            Scope::Run
        } else {
            Scope::Schedule
        };
        self.events.push((scope, Event::Alert(a.clone())));
        self.effects.push(Effect::Alert(a));
    }
}

/// What a schedule delta did, besides the new state: events and effects the
/// state change itself implies (the circuit opened → its event and an alert).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settled {
    pub events: Vec<Event>,
    pub effects: Vec<Effect>,
}

/// Applies `delta` to the schedule state `st` as read inside the writer's
/// transaction. Pure: the store calls it and writes `st` back if it changed.
pub fn settle_schedule(st: &mut ScheduleState, delta: &ScheduleDelta, now: DateTime<Utc>) -> Settled {
    use super::recovery::circuit::{CircuitChange, on_run_finished};
    let mut out = Settled::default();
    if let Some(max) = delta.halve_concurrency {
        let max = max.max(1);
        if st.concurrency_divisor.max(1) < max {
            st.concurrency_divisor = st.concurrency_divisor.max(1) * 2;
        }
        let divisor = st.concurrency_divisor.max(1);
        out.events.push(Event::ConcurrencyHalved {
            max_concurrency: max,
            divisor,
            effective: super::layers::switches::schedule_limit(max, divisor),
        });
    }
    if let Some(at) = delta.last_start {
        st.last_start = Some(at);
    }
    if let Some((to, reason, by)) = &delta.circuit {
        st.circuit = *to;
        st.circuit_changed_at = Some(now);
        if *to == CircuitState::Closed && by.is_some() {
            // Closed by hand: a fresh start for the count.
            st.consecutive_failures = 0;
        }
        out.events.push(match to {
            CircuitState::Closed => Event::CircuitClosed {
                by: by.clone(),
                reason: reason.clone(),
            },
            CircuitState::HalfOpen => Event::CircuitHalfOpen {
                reason: reason.clone(),
            },
            CircuitState::Open => Event::CircuitOpened {
                consecutive_failures: None,
                probe_after: None,
                after: None,
                reason: Some(reason.clone()),
            },
        });
    }
    if let Some((succeeded, policy)) = &delta.finished {
        if *succeeded {
            // A success also resets the concurrency halved by rate limits.
            st.last_success = Some(now);
            st.concurrency_divisor = 1;
        }
        match on_run_finished(st, policy, *succeeded, now) {
            CircuitChange::Opened => {
                out.events.push(Event::CircuitOpened {
                    consecutive_failures: Some(st.consecutive_failures),
                    probe_after: Some(now + crate::time::duration::to_delta(policy.cool_down)),
                    after: None,
                    reason: None,
                });
                out.effects.push(Effect::Alert(Alert {
                    what: "circuit_opened".into(),
                    message: format!(
                        "circuit of {} opened after {} consecutive failed runs; owner {}",
                        delta.schedule,
                        st.consecutive_failures,
                        delta.owner.clone().unwrap_or_else(|| "(none)".into())
                    ),
                    owner: delta.owner.clone(),
                    at: now,
                    tenant: delta.tenant.clone(),
                    schedule: delta.schedule.clone(),
                    run: None,
                }));
            }
            CircuitChange::Closed => out.events.push(Event::CircuitClosed {
                by: None,
                reason: "probe run succeeded".into(),
            }),
            CircuitChange::None => {}
        }
    }
    if let Some(pause) = &delta.pause {
        st.paused = pause.is_some();
        st.paused_reason = pause.clone();
    }
    // Alerts the settled state raised are recorded as events too.
    for e in &out.effects {
        if let Effect::Alert(a) = e {
            out.events.push(Event::Alert(a.clone()));
        }
    }
    out
}
