//! Properties of the pure planner (`core::planner`), over random sequences of
//! inputs: no plan takes a step DESIGN.md's state machine forbids, a terminal
//! run never moves by itself, retries never exceed `max_attempts`, and a plan
//! applied to a run that moved on (a lost race) writes nothing and yields no
//! effects.

mod support;

use agentcron::config::model::ErrorClass;
use agentcron::core::decision::{Decision, Verdict};
use agentcron::core::layers::gates::{GateResult, GateVerdict};
use agentcron::core::plan::{Plan, Step};
use agentcron::core::planner::{self, Actor, Cancel, Ended, Facts, Input, Policy, RunAction};
use agentcron::core::recovery::classify::Outcome;
use agentcron::store::types::*;
use agentcron::store::{Applied, EventFilter, Store};
use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;
use support::*;

const TOML: &str = r#"
[scheduler]
lease = "60s"

[agents.a]
kind = "command"
command = ["true"]
steps = [{ name = "deliver", side_effect = true }]

[[schedule]]
id = "s"
agent = "a"
cron = "0 9 * * *"
close_after = "1h"
approval_ttl = "2h"
retry = { max_attempts = 3, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }
"#;

/// What can happen to a run, as the planner's inputs.
#[derive(Debug, Clone)]
enum Act {
    Decide(u8),
    NotYetDue,
    End {
        fail: Option<u8>,
        rate_limited: bool,
        kill: bool,
        uncertain: bool,
    },
    LeaseExpired,
    ApprovalExpired,
    Approve,
    Reject,
    Requeue,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        (0u8..7).prop_map(Act::Decide),
        Just(Act::NotYetDue),
        (
            proptest::option::of(0u8..3),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(fail, rate_limited, kill, uncertain)| Act::End {
                fail,
                rate_limited,
                kill,
                uncertain
            }),
        Just(Act::LeaseExpired),
        Just(Act::ApprovalExpired),
        Just(Act::Approve),
        Just(Act::Reject),
        Just(Act::Requeue),
    ]
}

fn decision(v: u8) -> Decision {
    let gate = |verdict, on_fail: &str| GateResult {
        name: "g".into(),
        kind: "command".into(),
        verdict,
        reason: "r".into(),
        elapsed_ms: 1,
        on_fail: on_fail.into(),
    };
    let by_time = |verdict| Decision::by_time("t".into(), verdict, "time says".into());
    match v {
        0 => Decision::from_gates("t".into(), vec![], vec![gate(GateVerdict::Pass, "fail")]),
        1 => Decision::from_gates("t".into(), vec![], vec![gate(GateVerdict::Wait, "fail")]),
        2 => Decision::from_gates("t".into(), vec![], vec![gate(GateVerdict::Fail, "skip")]),
        3 => Decision::from_gates("t".into(), vec![], vec![gate(GateVerdict::Fail, "fail")]),
        4 => Decision::from_gates("t".into(), vec![], vec![gate(GateVerdict::Fail, "human")]),
        5 => by_time(Verdict::Missed),
        _ => by_time(Verdict::Expired),
    }
}

fn run0(now: DateTime<Utc>) -> Run {
    Run {
        id: 1,
        tenant: "default".into(),
        schedule: "s".into(),
        window_key: "2026-06-06".into(),
        window_start: now,
        window_end: now + TimeDelta::hours(1),
        due_at: now,
        state: RunState::Pending,
        reason: RunReason::Scheduled,
        pool: Pool::OnTime,
        state_reason: None,
        attempts: 0,
        not_before: None,
        next_check_at: Some(now),
        lease_owner: None,
        lease_expires: None,
        fencing_token: 0,
        error_class: None,
        last_error: None,
        resume_after: None,
        created_at: now,
        updated_at: now,
        hold: None,
    }
}

/// The plan for `act` on `run`: the engine's inputs through `plan`, the
/// operator's through `run_action` (refused ones plan nothing).
fn plan_for(run: &Run, act: &Act, policy: &Policy<'_>, now: DateTime<Utc>) -> (Plan, bool) {
    let who = Actor {
        name: "ops",
        reason: "checked",
    };
    let mut facts = Facts::default();
    let input = match act {
        Act::Decide(v) => Input::Decided {
            decision: decision(*v),
            probe: false,
            lease: ("me".into(), now + TimeDelta::minutes(1)),
        },
        Act::NotYetDue => Input::NotYetDue {
            not_before: now + TimeDelta::minutes(1),
        },
        Act::End {
            fail,
            rate_limited,
            kill,
            uncertain,
        } => {
            if *uncertain {
                facts.uncertain_steps = vec!["deliver".into()];
            }
            Input::AttemptEnded(Ended {
                attempt: run.attempts,
                token: run.fencing_token,
                outcome: match fail {
                    None => Outcome::Success {
                        summary: None,
                        processed: None,
                    },
                    Some(c) => Outcome::Failure {
                        class: [
                            ErrorClass::Retryable,
                            ErrorClass::NonRetryable,
                            ErrorClass::NeedsHuman,
                        ][*c as usize],
                        reason: "x".into(),
                    },
                },
                end: AttemptEnd::default(),
                rate_limited: *rate_limited,
                cancel: kill.then_some(Cancel::Kill),
                verify_step: None,
                verified: None,
            })
        }
        Act::LeaseExpired => Input::LeaseExpired,
        Act::ApprovalExpired => Input::ApprovalExpired,
        Act::Approve | Act::Reject | Act::Requeue => {
            let action = match act {
                Act::Approve => RunAction::Approve { resume_after: None },
                Act::Reject => RunAction::Reject,
                _ => RunAction::Requeue,
            };
            let plan = planner::run_action(run, action, &who, Some(policy.schedule), now).unwrap_or_default();
            return (plan, true);
        }
    };
    (planner::plan(run, input, policy, &facts, now), false)
}

/// Walks a plan's steps over `run` as the store would, checking each against
/// the state machine. Returns why a step was illegal, if one was.
fn walk(run: &mut Run, plan: &Plan) -> Result<(), String> {
    for step in &plan.steps {
        match step {
            Step::Transition { to, change } => {
                if !run.state.can_become(*to, change.operator.is_some()) {
                    return Err(format!("{} → {to}", run.state));
                }
                run.state = *to;
            }
            Step::Claim { .. } => {
                if !matches!(run.state, RunState::Pending | RunState::RetryWait) {
                    return Err(format!("claim from {}", run.state));
                }
                run.state = RunState::Running;
                run.attempts += 1;
                run.fencing_token += 1;
            }
            Step::Recheck { .. } => {
                if !matches!(run.state, RunState::Pending | RunState::RetryWait) {
                    return Err(format!("recheck of a {} run", run.state));
                }
            }
            Step::EndAttempt { .. } => {
                if run.state != RunState::Running {
                    return Err(format!("attempt end of a {} run", run.state));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn plans_follow_the_state_machine(acts in proptest::collection::vec(act(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(&dir, TOML);
        let s = &cfg.schedules[0];
        let policy = Policy { schedule: s, agent: cfg.agents.get(&s.agent).map(|a| &**a) };
        let now = t("2026-06-06T01:00:00Z");
        let mut run = run0(now);
        for act in &acts {
            let before = run.clone();
            let (plan, by_operator) = plan_for(&run, act, &policy, now);
            if before.state.is_terminal() && !by_operator {
                prop_assert!(plan.is_empty(), "a terminal run planned {plan:?} for {act:?}");
            }
            walk(&mut run, &plan).map_err(|e| TestCaseError::fail(format!("{act:?} on {}: {e}", before.state)))?;
            // Retries never exceed max_attempts: no attempt beyond the third
            // is ever queued by the rules (only an operator's requeue or
            // approval adds one: DESIGN.md "an operator approves (a new attempt)").
            if run.state == RunState::RetryWait && !by_operator {
                prop_assert!(run.attempts < s.retry.max_attempts, "retry after attempt {}", run.attempts);
            }
            if by_operator
                && matches!(act, Act::Requeue | Act::Approve)
                && plan.final_state() == Some(RunState::RetryWait)
            {
                // The requeued or approved run gets exactly one more attempt.
                run.attempts = run.attempts.min(s.retry.max_attempts - 1);
            }
        }
    }

    #[test]
    fn a_lost_race_writes_nothing_and_yields_no_effects(
        (planned_in, act) in prop_oneof![
            (0u8..7).prop_map(|v| (RunState::Pending, Act::Decide(v))),
            (proptest::option::of(0u8..3), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
                |(fail, rate_limited, kill, uncertain)| (RunState::Running, Act::End { fail, rate_limited, kill, uncertain })
            ),
            Just((RunState::Running, Act::LeaseExpired)),
            Just((RunState::NeedsHuman, Act::ApprovalExpired)),
            Just((RunState::NeedsHuman, Act::Approve)),
            Just((RunState::NeedsHuman, Act::Reject)),
        ],
        actual in prop_oneof![Just(RunState::Succeeded), Just(RunState::Failed), Just(RunState::Skipped), Just(RunState::RetryWait)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(&dir, TOML);
        let s = &cfg.schedules[0];
        let policy = Policy { schedule: s, agent: cfg.agents.get(&s.agent).map(|a| &**a) };
        let now = t("2026-06-06T01:00:00Z");
        let store = Store::open_in_memory().unwrap();
        // The run as this scheduler read it, and as it really is by now.
        let stored = store.write(|tx| {
            let new = NewRun {
                tenant: "default".into(),
                schedule: "s".into(),
                window_key: "2026-06-06".into(),
                window_start: now,
                window_end: now + TimeDelta::hours(1),
                due_at: now,
                state: RunState::Pending,
                reason: RunReason::Scheduled,
                pool: Pool::OnTime,
                state_reason: None,
                next_check_at: Some(now),
            };
            let r = tx.insert_run(&new, now)?.unwrap();
            // Move it through legal states to `actual`.
            let path: &[RunState] = match actual {
                RunState::Succeeded => &[RunState::Running, RunState::Succeeded],
                RunState::Failed => &[RunState::Failed],
                RunState::Skipped => &[RunState::Skipped],
                _ => &[RunState::Running, RunState::RetryWait],
            };
            let mut state = r.state;
            for to in path {
                if *to == RunState::Running {
                    tx.claim(r.id, state, "other", now + TimeDelta::minutes(1), RunReason::Scheduled, now, now)?;
                } else {
                    tx.transition(r.id, state, *to, &Change::default(), now, &[])?;
                }
                state = *to;
            }
            tx.run(r.id)
        }).unwrap();
        let mut snapshot = stored.clone();
        snapshot.state = planned_in;
        if planned_in == RunState::Running {
            snapshot.attempts = snapshot.attempts.max(1);
        }
        let (plan, _) = plan_for(&snapshot, &act, &policy, now);
        prop_assume!(!plan.steps.is_empty());
        let events_before = store.read(|tx| tx.events(&EventFilter::default())).unwrap().len();
        let state_before = store.read(|tx| tx.schedule_state("s")).unwrap();
        let applied = store.write(|tx| tx.apply(&plan, now)).unwrap();
        prop_assert!(matches!(applied, Applied::Conflict { .. }), "{applied:?} for a run that is {actual}");
        prop_assert_eq!(store.read(|tx| tx.events(&EventFilter::default())).unwrap().len(), events_before);
        prop_assert_eq!(store.read(|tx| tx.schedule_state("s")).unwrap(), state_before);
        prop_assert_eq!(store.read(|tx| tx.run(stored.id)).unwrap(), stored);
    }
}

/// A run queued behind a slot is woken alone, as the head of its schedule's
/// queue: a head that does not take the slot (its window closed, a gate
/// waits or fails) passes the wake-up on; one that claims it, or is held
/// again, does not. A hold of the kind the run already has is not recorded
/// again, whatever its reason now names (issue 44: O(N²) trace rows).
#[test]
fn a_queued_head_that_does_not_take_its_slot_passes_it_on_and_a_hold_is_recorded_once() {
    use agentcron::core::decision::{Hold, HoldKind, SwitchCheck, SwitchName};
    use agentcron::core::plan::Effect;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, TOML);
    let s = &cfg.schedules[0];
    let policy = Policy {
        schedule: s,
        agent: cfg.agents.get(&s.agent).map(|a| &**a),
    };
    let now = t("2026-06-06T01:00:00Z");
    let mut queued = run0(now);
    queued.hold = Some(HoldKind::Overlap);
    queued.state_reason = Some("overlap: waits its turn behind window a".into());
    let plan = |run: &Run, decision: Decision| {
        let lease = ("me".to_string(), now + TimeDelta::minutes(1));
        let input = Input::Decided {
            decision,
            probe: false,
            lease,
        };
        planner::plan(run, input, &policy, &Facts::default(), now)
    };
    let wakes = |p: &Plan| p.effects.iter().any(|e| matches!(e, Effect::WakeHeld { .. }));
    for (v, what) in [(5, "window closed"), (1, "a gate waits"), (2, "a gate failed")] {
        assert!(
            wakes(&plan(&queued, decision(v))),
            "{what}: the next in line goes"
        );
    }
    assert!(!wakes(&plan(&queued, decision(0))), "it claims the slot");
    let behind = |window: &str| {
        let check = SwitchCheck {
            name: SwitchName::Overlap,
            held: true,
            reason: format!("waits its turn behind window {window}").into(),
        };
        Decision::with_switches("t", &[(check, Hold::Wait)]).unwrap()
    };
    let again = plan(&queued, behind("b"));
    assert!(!wakes(&again), "held again: nothing to pass on");
    assert!(again.events.is_empty(), "{:?}", again.events);
    let first = plan(&run0(now), behind("a"));
    let kinds: Vec<&str> = first.events.iter().map(|(_, e)| e.kind()).collect();
    assert_eq!(kinds, ["switch_held", "decision"], "its first hold is recorded");
}
