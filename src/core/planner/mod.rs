//! The pure planner: which step a run takes for one input, and everything
//! that follows from it (events, alerts, the circuit count, the schedule's
//! pause or halved concurrency, wake-ups, the approval deadline), as one
//! [`Plan`]. Every rule of DESIGN.md "Run state machine" and "Recovery rules"
//! that moves a run is decided here and only here; the engine and the
//! operator verbs gather the facts, `store::apply` writes the plan.
//!
//! The inputs: the layers' [`Decision`] for a waiting run, an attempt that
//! ended, a lease that expired, an approval deadline; an operator's action
//! ([`operator`]).

mod operator;
pub mod retire;

pub use operator::{
    Actor, Refused, RunAction, ScheduleAction, require_reason, run_action, schedule_action, schedule_already,
};

use crate::config::model::{AgentConfig, Catchup, DeliveryKind, ErrorClass, ScheduleConfig};
use crate::core::decision::{Decision, HoldKind, Verdict};
use crate::core::event::{Alert, DecisionRecord, Event, SkipCause, Stopped};
use crate::core::layers::gates::GateVerdict;
use crate::core::plan::{Effect, Plan, ScheduleDelta, Scope, Step, Target};
use crate::core::records::{AttemptEnd, AttemptStatus, Change, Pool, Run, RunReason, RunState};
use crate::core::recovery::classify::Outcome;
use crate::core::recovery::retry::{self, RetryPlan};
use crate::time::duration::{format_duration, to_delta};
use crate::time::rfc3339;
use chrono::{DateTime, TimeDelta, Utc};

/// The configuration a plan follows.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    pub schedule: &'a ScheduleConfig,
    pub agent: Option<&'a AgentConfig>,
}

/// Facts from the store the rules need, read before planning.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The run's side-effect steps started and never confirmed, across attempts.
    pub uncertain_steps: Vec<String>,
    /// A newer window of the schedule has a run (for `catchup = "latest"`).
    pub newer_run: bool,
}

/// Why the engine itself stopped an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancel {
    /// The global kill switch with `--cancel-running`.
    Kill,
    /// `overlap = "cancel_previous"`: a newer window superseded it.
    Superseded(String),
    /// A budget was exceeded.
    Budget(String),
    /// Our lease was taken over (fencing): the attempt is already lost.
    Fenced,
    /// The operator quit the console that embeds this scheduler and chose to
    /// stop running attempts (at this instant): they retry, whatever their count.
    OperatorQuit(DateTime<Utc>),
    /// The scheduler was stopped (SIGTERM or SIGINT of `run --headless`,
    /// SIGTERM or SIGHUP of the console) and its grace period ran out (at this
    /// instant): the attempt ends now, retryable by the usual rules, instead
    /// of being left to lease expiry and told later as lost.
    Shutdown(DateTime<Utc>),
}

/// An attempt's end as the recovery rules see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    pub attempt: u32,
    pub token: i64,
    pub outcome: Outcome,
    pub end: AttemptEnd,
    pub rate_limited: bool,
    pub cancel: Option<Cancel>,
    /// A verify attempt: the uncertain step it was asked about, and its answer.
    pub verify_step: Option<String>,
    pub verified: Option<bool>,
}

/// What a plan is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The three layers were evaluated for a pending / retry_wait run. A
    /// claim runs under `lease` (owner, until); `probe`: the claim is the
    /// half-open circuit's probe.
    Decided {
        decision: Decision,
        probe: bool,
        lease: (String, DateTime<Utc>),
    },
    /// A retry checked before its `not_before`: it waits until then.
    NotYetDue {
        not_before: DateTime<Utc>,
    },
    AttemptEnded(Ended),
    /// A running run's lease expired: its attempt is lost.
    LeaseExpired,
    /// A `needs_human` run reached its `approval_ttl`.
    ApprovalExpired,
}

pub(super) fn target(run: &Run, token: Option<i64>) -> Target {
    Target {
        run_id: run.id,
        tenant: run.tenant.clone(),
        schedule: run.schedule.clone(),
        state: run.state,
        token,
    }
}

pub(super) fn delta(s: &ScheduleConfig) -> ScheduleDelta {
    ScheduleDelta {
        tenant: s.tenant.clone(),
        schedule: s.id.clone(),
        owner: s.owner.clone(),
        ..ScheduleDelta::default()
    }
}

fn alert(s: &ScheduleConfig, run: Option<&Run>, what: &str, message: &str, now: DateTime<Utc>) -> Alert {
    Alert {
        what: what.to_string(),
        message: message.to_string(),
        owner: s.owner.clone(),
        at: now,
        tenant: run.map_or_else(|| s.tenant.clone(), |r| r.tenant.clone()),
        schedule: run.map_or_else(|| s.id.clone(), |r| r.schedule.clone()),
        run: run.map(|r| r.id),
    }
}

fn reason_change(reason: &str) -> Change {
    Change {
        state_reason: Some(reason.to_string()),
        ..Change::default()
    }
}

/// The uncertain side-effect step an agent that can verify is asked about
/// first. Deliveries check themselves; only the agent's own side-effect steps
/// need its verify mode.
pub fn verify_step(p: &Policy<'_>, uncertain: &[String]) -> Option<String> {
    let agent = p.agent?;
    uncertain
        .iter()
        .find(|st| agent.is_side_effect(st) && !p.schedule.deliveries.iter().any(|d| d.name == **st))
        .filter(|_| agent.verify)
        .cloned()
}

/// Plans `input` for `run`. A run no longer in a state the input applies to
/// plans nothing (a terminal run never moves by itself).
pub fn plan(run: &Run, input: Input, p: &Policy<'_>, facts: &Facts, now: DateTime<Utc>) -> Plan {
    let mut plan = match input {
        // Time decides `missed` / `expired` for windows only: a retry has no
        // window deadline (its `not_before` is durable backoff).
        Input::Decided { decision, .. }
            if run.state == RunState::RetryWait
                && matches!(decision.verdict, Verdict::Missed | Verdict::Expired) =>
        {
            return Plan::nothing();
        }
        Input::Decided {
            decision,
            probe,
            lease,
        } if matches!(run.state, RunState::Pending | RunState::RetryWait) => {
            decided(run, decision, probe, lease, p, facts, now)
        }
        Input::NotYetDue { not_before } if matches!(run.state, RunState::RetryWait) => Plan {
            target: Some(target(run, None)),
            steps: vec![Step::Recheck {
                at: not_before,
                why: None,
            }],
            ..Plan::default()
        },
        Input::AttemptEnded(ended) if run.state == RunState::Running => {
            attempt_ended(run, ended, p, facts, now)
        }
        Input::LeaseExpired if run.state == RunState::Running => lease_expired(run, p, facts, now),
        Input::ApprovalExpired if run.state == RunState::NeedsHuman => approval_expired(run, p, now),
        _ => return Plan::nothing(),
    };
    // A catch-up run that leaves the queue makes room for the next of its
    // schedule (an attempt's end wakes the schedule in any case).
    if run.pool == Pool::Backfill
        && plan.final_state().is_some_and(RunState::is_terminal)
        && !plan.effects.iter().any(|e| matches!(e, Effect::WakeHeld { .. }))
    {
        plan.effects.push(Effect::WakeHeld {
            schedule: run.schedule.clone(),
            slots: None,
        });
    }
    plan
}

fn decided(
    run: &Run,
    mut d: Decision,
    probe: bool,
    (owner, lease_until): (String, DateTime<Utc>),
    p: &Policy<'_>,
    facts: &Facts,
    now: DateTime<Utc>,
) -> Plan {
    let s = p.schedule;
    let mut plan = Plan {
        target: Some(target(run, None)),
        ..Plan::default()
    };
    for g in &d.gates {
        plan.event(Scope::Run, Event::Gate(g.into()));
    }
    let held = d.switches.iter().find(|c| c.held);
    let hold = d.hold();
    // A hold is recorded once per run and hold kind: the run's stored kind
    // says whether this one is new. Its reason may name the window running
    // now, which changes with every run that goes ahead of it; recorded
    // again for that, a queue of N runs wrote O(N²) rows. The reason's
    // latest words are still the run's `state_reason`.
    let newly_held = match hold {
        Some(h) => run.hold != Some(h),
        _ => run.state_reason.as_deref() != Some(d.reason.as_str()),
    };
    if let Some(c) = held
        && newly_held
    {
        plan.event(
            Scope::Run,
            Event::SwitchHeld {
                switch: c.name,
                reason: c.reason.to_string(),
                verdict: d.verdict,
            },
        );
    }
    // Every evaluation with gates is recorded; a hold of the kind already recorded is not.
    if !d.gates.is_empty() || newly_held || d.verdict != Verdict::Wait {
        let record = if d.verdict == Verdict::Claim {
            // A claim reads nothing of its decision below: its texts move
            // into the record instead of being copied.
            DecisionRecord {
                time: std::mem::take(&mut d.time),
                switches: std::mem::take(&mut d.switches),
                gates: d.gates.iter().map(Into::into).collect(),
                verdict: d.verdict,
                reason: std::mem::take(&mut d.reason),
            }
        } else {
            (&d).into()
        };
        plan.event(Scope::Run, Event::Decision(record));
    }
    // A freed slot wakes only the head of its schedule's queue
    // (`Tx::recheck_held`): a head that does not take it, and is not held
    // by what holds every run of its schedule alike, passes the wake-up on.
    let passes_slot_on = run.pool == Pool::OnTime
        && run.hold.is_some_and(HoldKind::woken_by_an_end)
        && match d.verdict {
            Verdict::Claim => false,
            Verdict::Wait => hold == Some(HoldKind::Gate),
            _ => true,
        };
    if passes_slot_on {
        plan.effects.push(Effect::WakeHeld {
            schedule: run.schedule.clone(),
            slots: None,
        });
    }
    match d.verdict {
        Verdict::Claim => {
            // The attempt records why it runs: a retry that only checks an
            // uncertain side effect is a verify attempt (as its envelope says).
            let reason = match run.state {
                RunState::RetryWait => match verify_step(p, &facts.uncertain_steps) {
                    Some(_) => RunReason::Verify,
                    None => RunReason::Retry,
                },
                _ => run.reason,
            };
            plan.steps.push(Step::Claim {
                owner,
                lease_until,
                reason,
                due: run.due_at,
            });
            // Only `anchor = "last_start"` reads the last start (to resume its
            // cadence after a restart): a write per claim for it alone.
            let last_start = matches!(
                s.trigger,
                crate::config::model::TriggerConfig::Every {
                    anchor: crate::config::model::Anchor::LastStart,
                    ..
                }
            );
            // Most claims change nothing of their schedule: no delta made.
            if last_start || probe {
                let mut sd = delta(s);
                if last_start {
                    sd.last_start = Some(now);
                }
                if probe {
                    sd.circuit = Some((
                        crate::core::records::CircuitState::HalfOpen,
                        "cool-down over; probe run claimed".into(),
                        None,
                    ));
                }
                plan.schedule = Some(sd);
            }
            plan.effects.push(Effect::Dispatch);
        }
        Verdict::Wait => {
            let check = TimeDelta::from_std(s.check_every).unwrap_or(TimeDelta::minutes(1));
            let mut next = now + check;
            if run.state == RunState::Pending {
                let end = match run.reason {
                    RunReason::Catchup => run.window_start + to_delta(s.catchup_window),
                    RunReason::Manual => run.created_at + to_delta(s.catchup_window),
                    _ => run.window_end,
                };
                // A catch-up run waiting for a slot (its schedule's running
                // run, a quota, the probe) is woken when a run of its schedule
                // ends; otherwise it is looked at again only when it would
                // expire, so a backlog is not re-decided every check_every.
                if run.pool == Pool::Backfill && hold.is_some_and(HoldKind::is_slot) && end > now {
                    next = end;
                }
                if end > now {
                    next = next.min(end);
                }
            }
            plan.steps.push(Step::Recheck {
                at: next,
                why: Some((d.reason.clone(), hold)),
            });
        }
        Verdict::Skip => {
            plan.event(Scope::Run, skipped(&d.reason, SkipCause::of(&d)));
            plan.steps.push(Step::Transition {
                to: RunState::Skipped,
                change: reason_change(&d.reason),
            });
            // A gate that fails (expired credential, …) needs the owner's
            // attention even when the window is only skipped.
            if d.gates.iter().any(|g| g.verdict == GateVerdict::Fail) {
                plan.alert(alert(s, Some(run), "gate_failed", &d.reason, now));
            }
        }
        Verdict::Fail => {
            plan.event(
                Scope::Run,
                Event::Failed {
                    attempt: None,
                    class: ErrorClass::NonRetryable,
                    reason: d.reason.clone(),
                    is_final: Some(true),
                    stopped: None,
                },
            );
            let mut c = reason_change(&d.reason);
            c.error_class = Some(ErrorClass::NonRetryable);
            c.last_error = Some(d.reason.clone());
            plan.steps.push(Step::Transition {
                to: RunState::Failed,
                change: c,
            });
            plan.alert(alert(s, Some(run), "failed", &d.reason, now));
            let mut sd = delta(s);
            sd.finished = Some((false, s.circuit.clone()));
            plan.schedule = Some(sd);
        }
        Verdict::Human => {
            plan.event(
                Scope::Run,
                Event::ParkedForHuman {
                    reason: d.reason.clone(),
                },
            );
            let mut c = reason_change(&d.reason);
            c.error_class = Some(ErrorClass::NeedsHuman);
            c.last_error = Some(d.reason.clone());
            plan.steps.push(Step::Transition {
                to: RunState::NeedsHuman,
                change: c,
            });
            park(&mut plan, s, now);
            plan.alert(alert(s, Some(run), "needs_human", &d.reason, now));
        }
        Verdict::Expired => {
            plan.event(Scope::Run, expired(&d.reason));
            plan.steps.push(Step::Transition {
                to: RunState::Expired,
                change: reason_change(&d.reason),
            });
            plan.alert(alert(s, Some(run), "expired", &d.reason, now));
        }
        Verdict::Missed => {
            plan.event(
                Scope::Run,
                Event::Missed {
                    reason: d.reason.clone(),
                    window_end: run.window_end,
                },
            );
            plan.steps.push(Step::Transition {
                to: RunState::Missed,
                change: reason_change(&d.reason),
            });
            catch_up_missed(&mut plan, run, p, facts, now);
        }
    }
    plan
}

/// A window closed before its gates passed: the catch-up rules take it.
fn catch_up_missed(plan: &mut Plan, run: &Run, p: &Policy<'_>, facts: &Facts, now: DateTime<Utc>) {
    let s = p.schedule;
    let expires = run.window_start + to_delta(s.catchup_window);
    if now >= expires {
        let why = "expired: older than the catch-up window".to_string();
        plan.event(Scope::Run, expired(&why));
        plan.steps.push(Step::Transition {
            to: RunState::Expired,
            change: reason_change(&why),
        });
        plan.alert(alert(s, Some(run), "expired", &why, now));
        return;
    }
    match s.catchup {
        Catchup::All | Catchup::Latest if s.catchup == Catchup::All || !facts.newer_run => {
            plan.event(
                Scope::Run,
                Event::CatchupQueued {
                    window_key: run.window_key.clone(),
                    pool: Pool::Backfill,
                    expires,
                },
            );
            plan.steps.push(Step::Transition {
                to: RunState::Pending,
                change: Change {
                    reason: Some(RunReason::Catchup),
                    pool: Some(Pool::Backfill),
                    next_check_at: Some(now),
                    state_reason: Some(format!("catch-up of missed window until {}", rfc3339(expires))),
                    ..Change::default()
                },
            });
        }
        Catchup::Latest => {
            let why = "coalesced: a newer window runs instead (catchup = \"latest\")".to_string();
            plan.event(Scope::Run, skipped(&why, SkipCause::Coalesced));
            plan.steps.push(Step::Transition {
                to: RunState::Skipped,
                change: reason_change(&why),
            });
        }
        _ => {
            let why = "missed and not caught up (catchup = \"none\")".to_string();
            plan.event(Scope::Run, skipped(&why, SkipCause::NotCaughtUp));
            plan.steps.push(Step::Transition {
                to: RunState::Skipped,
                change: reason_change(&why),
            });
            plan.alert(alert(s, Some(run), "missed", &why, now));
        }
    }
}

fn attempt_ended(run: &Run, mut f: Ended, p: &Policy<'_>, facts: &Facts, now: DateTime<Utc>) -> Plan {
    let s = p.schedule;
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
    let verified = f.verify_step.clone().zip(f.verified);
    let mut plan = Plan {
        target: Some(target(run, Some(f.token))),
        steps: vec![Step::EndAttempt {
            attempt: f.attempt,
            end: f.end.clone(),
            verified: verified.clone(),
        }],
        ..Plan::default()
    };
    if let Some((step, landed)) = &verified {
        plan.event(
            Scope::Run,
            Event::Step {
                name: step.clone(),
                status: if *landed {
                    crate::core::records::StepStatus::Done
                } else {
                    crate::core::records::StepStatus::Failed
                },
                attempt: f.attempt,
                side_effect: true,
                verified: Some(*landed),
            },
        );
    }
    // One attempt ended: runs it held may go.
    plan.effects.push(Effect::WakeHeld {
        schedule: run.schedule.clone(),
        slots: None,
    });
    // A verify attempt that answered goes straight on to a normal attempt.
    if verified.is_some() && matches!(f.outcome, Outcome::Success { .. }) {
        plan.event(
            Scope::Run,
            Event::RetryScheduled {
                not_before: now,
                after: Some("verify".into()),
                attempt: f.attempt,
                next_attempt: f.attempt + 1,
                max_attempts: None,
            },
        );
        plan.steps.push(Step::Transition {
            to: RunState::RetryWait,
            change: Change {
                not_before: Some(now),
                next_check_at: Some(now),
                state_reason: Some("verified; continuing with a normal attempt".into()),
                ..Change::default()
            },
        });
        return plan;
    }
    match f.outcome {
        Outcome::Success { summary, processed } => {
            plan.event(
                Scope::Run,
                Event::Succeeded {
                    attempt: f.attempt,
                    summary,
                    processed,
                },
            );
            plan.steps.push(Step::Transition {
                to: RunState::Succeeded,
                change: Change::default(),
            });
            let mut sd = delta(s);
            sd.finished = Some((true, s.circuit.clone()));
            plan.schedule = Some(sd);
        }
        Outcome::Failure { class, reason } => {
            fail(
                &mut plan,
                run,
                f.attempt,
                class,
                &reason,
                f.rate_limited,
                f.cancel.as_ref(),
                p,
                facts,
                now,
            );
            if let Some(Cancel::Budget(why)) = &f.cancel {
                let reason = format!("budget: {why}");
                plan.schedule.get_or_insert_with(|| delta(s)).pause = Some(Some(reason.clone()));
                plan.event(Scope::Schedule, paused_changed(None, true, "agentcron", &reason));
                plan.alert(alert(
                    s,
                    None,
                    "budget",
                    &format!("{} paused: {reason}", s.id),
                    now,
                ));
            }
        }
    }
    plan
}

fn lease_expired(run: &Run, p: &Policy<'_>, facts: &Facts, now: DateTime<Utc>) -> Plan {
    let reason = format!(
        "lease held by {} expired at {}: attempt lost (scheduler crash or hang)",
        run.lease_owner.clone().unwrap_or_default(),
        run.lease_expires.map(rfc3339).unwrap_or_default()
    );
    let mut plan = Plan {
        target: Some(target(run, Some(run.fencing_token))),
        steps: vec![Step::EndAttempt {
            attempt: run.attempts,
            end: AttemptEnd {
                status: Some(AttemptStatus::Lost),
                error_class: Some(ErrorClass::Retryable),
                message: Some(reason.clone()),
                ..AttemptEnd::default()
            },
            verified: None,
        }],
        ..Plan::default()
    };
    plan.event(
        Scope::Run,
        Event::Lost {
            attempt: run.attempts,
            token: run.fencing_token,
            reason: reason.clone(),
        },
    );
    fail(
        &mut plan,
        run,
        run.attempts,
        ErrorClass::Retryable,
        &reason,
        false,
        None,
        p,
        facts,
        now,
    );
    plan
}

fn approval_expired(run: &Run, p: &Policy<'_>, now: DateTime<Utc>) -> Plan {
    let s = p.schedule;
    let Some(ttl) = s.approval_ttl else {
        return Plan::nothing();
    };
    let why = format!("approval_ttl: no approval within {}", format_duration(ttl));
    let mut plan = Plan {
        target: Some(target(run, None)),
        steps: vec![Step::Transition {
            to: RunState::Failed,
            change: reason_change(&why),
        }],
        ..Plan::default()
    };
    plan.event(
        Scope::Run,
        Event::Failed {
            attempt: None,
            class: ErrorClass::NeedsHuman,
            reason: why.clone(),
            is_final: Some(true),
            stopped: None,
        },
    );
    plan.alert(alert(s, Some(run), "approval_ttl", &why, now));
    // A run nobody approved failed: it counts for the circuit (and a parked
    // half-open probe reopens it).
    let mut sd = delta(s);
    sd.finished = Some((false, s.circuit.clone()));
    plan.schedule = Some(sd);
    plan
}

/// The recovery rules for a failed attempt of a running run (its end is
/// already the plan's first step).
#[allow(clippy::too_many_arguments)]
fn fail(
    plan: &mut Plan,
    run: &Run,
    attempt: u32,
    class: ErrorClass,
    reason: &str,
    rate_limited: bool,
    cancel: Option<&Cancel>,
    p: &Policy<'_>,
    facts: &Facts,
    now: DateTime<Utc>,
) {
    let s = p.schedule;
    // Side effects whose outcome is unknown and that nobody can check: the
    // agent's own steps when it cannot verify, and command deliveries.
    // (File and webhook deliveries check themselves on the next attempt.)
    let can_verify = p.agent.is_some_and(|a| a.verify);
    let uncertain: Vec<&String> = facts
        .uncertain_steps
        .iter()
        .filter(|st| match s.deliveries.iter().find(|d| d.name == **st) {
            Some(d) => matches!(d.kind, DeliveryKind::Command { .. }),
            None => !can_verify && p.agent.is_some_and(|a| a.is_side_effect(st)),
        })
        .collect();
    let mut class = class;
    let mut reason = reason.to_string();
    if class == ErrorClass::Retryable && !uncertain.is_empty() {
        class = ErrorClass::NeedsHuman;
        let names: Vec<&str> = uncertain.iter().map(|s| s.as_str()).collect();
        reason = format!(
            "{reason}; side-effect step {} started but was not confirmed and cannot be verified",
            names.join(", ")
        );
    }
    // The attempt is told as what it became: a retryable failure that left an
    // unverifiable side effect is a question for a human, not a retry.
    for st in &mut plan.steps {
        if let Step::EndAttempt { attempt: n, end, .. } = st
            && *n == attempt
            && end.error_class.is_some()
        {
            end.error_class = Some(class);
        }
    }
    let is_final = (class == ErrorClass::NonRetryable).then_some(true);
    let stopped = cancel.and_then(|c| match c {
        Cancel::OperatorQuit(_) => Some(Stopped::OperatorQuit),
        Cancel::Shutdown(_) => Some(Stopped::Shutdown),
        Cancel::Kill => Some(Stopped::KillSwitch),
        Cancel::Superseded(_) => Some(Stopped::Superseded),
        Cancel::Budget(_) => Some(Stopped::Budget),
        Cancel::Fenced => None,
    });
    plan.event(
        Scope::Run,
        Event::Failed {
            attempt: Some(attempt),
            class,
            reason: reason.clone(),
            is_final,
            stopped,
        },
    );
    let mut change = Change {
        error_class: Some(class),
        last_error: Some(reason.clone()),
        state_reason: Some(reason.clone()),
        ..Change::default()
    };
    if rate_limited {
        plan.schedule.get_or_insert_with(|| delta(s)).halve_concurrency = Some(s.max_concurrency);
    }
    match class {
        ErrorClass::NeedsHuman => {
            plan.event(
                Scope::Run,
                Event::ParkedForHuman {
                    reason: reason.clone(),
                },
            );
            plan.steps.push(Step::Transition {
                to: RunState::NeedsHuman,
                change,
            });
            park(plan, s, now);
            plan.alert(alert(s, Some(run), "needs_human", &reason, now));
        }
        ErrorClass::NonRetryable => {
            plan.steps.push(Step::Transition {
                to: RunState::Failed,
                change,
            });
            plan.alert(alert(s, Some(run), "failed", &reason, now));
            // A cancellation by overlap is not the schedule failing.
            if !matches!(cancel, Some(Cancel::Superseded(_))) {
                plan.schedule.get_or_insert_with(|| delta(s)).finished = Some((false, s.circuit.clone()));
            }
        }
        ErrorClass::Retryable => {
            let kill = matches!(cancel, Some(Cancel::Kill));
            let quit = matches!(cancel, Some(Cancel::OperatorQuit(_)));
            // An attempt the operator stopped by quitting did not fail: it
            // retries at once even when it was the last one allowed.
            let retry = if quit || (kill && attempt < s.retry.max_attempts) {
                RetryPlan::At(now)
            } else {
                retry::plan(&s.retry, run.id, attempt, now)
            };
            match retry {
                RetryPlan::At(t) => {
                    plan.event(
                        Scope::Run,
                        Event::RetryScheduled {
                            not_before: t,
                            after: None,
                            attempt,
                            next_attempt: attempt + 1,
                            max_attempts: Some(s.retry.max_attempts),
                        },
                    );
                    change.not_before = Some(t);
                    change.next_check_at = Some(t);
                    plan.steps.push(Step::Transition {
                        to: RunState::RetryWait,
                        change,
                    });
                }
                RetryPlan::Exhausted => {
                    plan.event(
                        Scope::Run,
                        Event::DeadLettered {
                            attempts: attempt,
                            max_attempts: s.retry.max_attempts,
                            reason: reason.clone(),
                        },
                    );
                    plan.steps.push(Step::Transition {
                        to: RunState::Dead,
                        change,
                    });
                    plan.alert(alert(
                        s,
                        Some(run),
                        "dead_lettered",
                        &format!("retries exhausted after {attempt} attempts: {reason}"),
                        now,
                    ));
                    plan.schedule.get_or_insert_with(|| delta(s)).finished = Some((false, s.circuit.clone()));
                }
            }
        }
    }
}

/// A run of `s` parked for a human now: its `approval_ttl` deadline.
fn park(plan: &mut Plan, s: &ScheduleConfig, now: DateTime<Utc>) {
    if let Some(ttl) = s.approval_ttl {
        plan.effects.push(Effect::ApprovalDeadline(now + to_delta(ttl)));
    }
}

/// A `skipped` event of a layer's decision (the run has the window facts).
pub fn skipped(reason: &str, cause: SkipCause) -> Event {
    Event::Skipped {
        reason: reason.to_string(),
        cause: Some(cause),
        run_reason: None,
        window: None,
    }
}

/// An `expired` event of a decision.
pub fn expired(reason: &str) -> Event {
    Event::Expired {
        reason: reason.to_string(),
        run_reason: None,
        window: None,
    }
}

/// The `switch_changed` event of a schedule's pause turning on or off.
pub fn paused_changed(schedule: Option<&str>, on: bool, actor: &str, reason: &str) -> Event {
    switch_changed("paused", schedule, on, actor, reason)
}

/// A `switch_changed` event of a named switch.
pub fn switch_changed(name: &str, schedule: Option<&str>, on: bool, actor: &str, reason: &str) -> Event {
    Event::SwitchChanged {
        name: name.to_string(),
        schedule: schedule.map(str::to_string),
        on,
        actor: actor.to_string(),
        reason: reason.to_string(),
        maintenance_id: None,
        from: None,
        to: None,
        schedules: None,
    }
}
