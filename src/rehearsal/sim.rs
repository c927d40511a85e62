//! Simulated agents on a virtual clock, injected through the same
//! [`AgentRunner`] interface the real process and HTTP runners implement.
//!
//! A simulated attempt is a script: steps reported at offsets from its start,
//! usage, then a result or an exit code at `latency`, or nothing (a hang) until
//! the agent's timeout kills it. Reports are queued with their virtual due
//! instant; the driver releases them as it moves the clock. Side effects land in
//! a ledger so expectations can prove nothing happened twice.

use crate::agent::envelope::Envelope;
use crate::agent::protocol::{AgentLine, AgentResult, ResultStatus};
use crate::agent::runner::{AgentRunner, AttemptHandle, AttemptReport, AttemptSignal, AttemptSpec, Ending};
use crate::config::model::ErrorClass;
use crate::store::types::{RunReason, StepStatus};
use crate::time::Clock;
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// How one simulated attempt ends.
#[derive(Debug, Clone, PartialEq)]
pub enum SimEnd {
    /// `{"event":"result","status":"success"}` and exit 0.
    Success,
    /// A result line with this class, then exit 1.
    Fail(ErrorClass),
    /// No result line; exit with this code (75 retryable, 77 needs_human, …).
    Exit(i32),
    /// A rate-limited failure (`rate_limited: true`, retryable).
    RateLimited,
    /// Never finishes: killed at the agent's timeout.
    Hang,
    /// The agent process dies right after the named step started (side effect
    /// in flight), exiting with a signal.
    CrashAfterStarting(String),
}

/// The script of one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct SimAttempt {
    pub latency: TimeDelta,
    pub end: SimEnd,
    pub tokens: i64,
    pub cost_usd: f64,
}

impl Default for SimAttempt {
    fn default() -> Self {
        Self {
            latency: TimeDelta::seconds(30),
            end: SimEnd::Success,
            tokens: 0,
            cost_usd: 0.0,
        }
    }
}

/// A simulated agent: its steps and one script per attempt (the last repeats).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimAgent {
    /// `(name, side_effect)` in order.
    pub steps: Vec<(String, bool)>,
    pub attempts: Vec<SimAttempt>,
    /// From each instant on, attempts follow another script (e.g. the upstream
    /// gets fixed at 13:00). Sorted by instant.
    pub phases: Vec<(DateTime<Utc>, Vec<SimAttempt>)>,
}

struct Queued {
    due: DateTime<Utc>,
    seq: u64,
    tx: mpsc::UnboundedSender<AttemptReport>,
    report: AttemptReport,
    /// Side effect that lands when this report is released.
    ledger: Option<String>,
}

#[derive(Default)]
struct State {
    queue: Vec<Queued>,
    seq: u64,
    generation: u64,
    ledger: Vec<(DateTime<Utc>, String)>,
    /// Attempts started per schedule, for per-attempt scripts.
    started: HashMap<(i64, u32), String>,
}

/// The simulated runner. Cloning shares the queue and the ledger.
#[derive(Clone)]
pub struct SimRunner {
    clock: Arc<dyn Clock>,
    agents: Arc<BTreeMap<String, SimAgent>>,
    state: Arc<Mutex<State>>,
}

impl SimRunner {
    /// `agents` is keyed by schedule id.
    pub fn new(clock: Arc<dyn Clock>, agents: BTreeMap<String, SimAgent>) -> Self {
        Self {
            clock,
            agents: Arc::new(agents),
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next instant a queued report is due.
    pub fn next_due(&self) -> Option<DateTime<Utc>> {
        self.lock().queue.iter().map(|q| q.due).min()
    }

    /// Sends every report due at or before `now`, in due order. Returns how many.
    pub fn release_due(&self, now: DateTime<Utc>) -> usize {
        let mut st = self.lock();
        let mut due: Vec<Queued> = vec![];
        let mut rest = vec![];
        for q in st.queue.drain(..) {
            if q.due <= now { due.push(q) } else { rest.push(q) }
        }
        st.queue = rest;
        due.sort_by_key(|q| (q.due, q.seq));
        let n = due.len();
        for q in due {
            // An agent whose scheduler is gone died with it (parent-death signal):
            // nothing it would have done afterwards lands.
            if q.tx.is_closed() {
                continue;
            }
            if let Some(effect) = q.ledger {
                st.ledger.push((q.due, effect));
            }
            let _ = q.tx.send(q.report);
        }
        n
    }

    /// A scheduler crash: its agents die with it; queued reports are dropped.
    pub fn crash(&self) {
        let mut st = self.lock();
        st.generation += 1;
        st.queue.clear();
    }

    /// Side effects that landed, in order: `idempotency_key step`.
    pub fn ledger(&self) -> Vec<(DateTime<Utc>, String)> {
        self.lock().ledger.clone()
    }

    fn script(&self, schedule: &str, attempt: u32) -> (Vec<(String, bool)>, SimAttempt) {
        let agent = self.agents.get(schedule).cloned().unwrap_or_default();
        let idx = (attempt as usize).saturating_sub(1);
        let now = self.clock.now();
        let attempts = agent
            .phases
            .iter()
            .rev()
            .find(|(from, _)| now >= *from)
            .map(|(_, a)| a.clone())
            .unwrap_or(agent.attempts.clone());
        let a = attempts.get(idx).or(attempts.last()).cloned().unwrap_or_default();
        (agent.steps, a)
    }

    fn landed(&self, key: &str, step: &str) -> bool {
        let effect = format!("{key} {step}");
        let st = self.lock();
        st.ledger.iter().any(|(_, e)| *e == effect)
            || st.queue.iter().any(|q| q.ledger.as_deref() == Some(&effect))
    }
}

impl AgentRunner for SimRunner {
    fn start(&self, spec: AttemptSpec, reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        let now = self.clock.now();
        let env: &Envelope = &spec.envelope;
        let (steps, script) = self.script(&env.schedule, spec.attempt);
        let timeout = TimeDelta::from_std(spec.timeout).unwrap_or(TimeDelta::hours(1));
        let mut out: Vec<(DateTime<Utc>, AttemptSignal, Option<String>)> = vec![];
        let line = |l: AgentLine| AttemptSignal::Line(l);
        let result = |status: ResultStatus, class: Option<ErrorClass>, rate: bool, verified: Option<bool>| {
            AttemptSignal::Line(AgentLine::Result(AgentResult {
                status,
                error_class: class,
                summary: Some(format!("simulated attempt {}", spec.attempt)),
                processed: Some(1),
                message: None,
                verified,
                rate_limited: rate.then_some(true),
            }))
        };
        let end_at = now + script.latency.min(timeout);
        if env.reason == RunReason::Verify {
            // Verify mode: check the outside world (the ledger) for the step.
            let step = env.verify_step.clone().unwrap_or_default();
            let landed = self.landed(&env.idempotency_key, &step);
            out.push((
                end_at,
                result(ResultStatus::Success, None, false, Some(landed)),
                None,
            ));
            out.push((
                end_at,
                AttemptSignal::Ended {
                    ending: exit(0),
                    log: String::new(),
                },
                None,
            ));
        } else {
            // Steps spread over the first half of the attempt; completed ones skipped.
            let todo: Vec<&(String, bool)> = steps
                .iter()
                .filter(|(n, _)| !env.completed_steps.contains(n))
                .collect();
            let slice = if todo.is_empty() {
                TimeDelta::zero()
            } else {
                script.latency / (2 * todo.len() as i32).max(1)
            };
            let mut t = now;
            let mut crashed = false;
            for (name, side_effect) in todo {
                if t >= now + timeout {
                    break;
                }
                out.push((
                    t,
                    line(AgentLine::Step {
                        name: name.clone(),
                        status: StepStatus::Started,
                    }),
                    None,
                ));
                if script.end == SimEnd::CrashAfterStarting(name.clone()) {
                    // The side effect may or may not have landed; here it did.
                    let effect = side_effect.then(|| format!("{} {}", env.idempotency_key, name));
                    out.push((t + slice, line(AgentLine::Heartbeat), effect));
                    out.push((
                        t + slice,
                        AttemptSignal::Ended {
                            ending: Ending::Exited {
                                code: None,
                                signal: Some(9),
                            },
                            log: String::new(),
                        },
                        None,
                    ));
                    crashed = true;
                    break;
                }
                t += slice;
                if t > now + timeout {
                    break;
                }
                let effect = side_effect.then(|| format!("{} {}", env.idempotency_key, name));
                out.push((
                    t,
                    line(AgentLine::Step {
                        name: name.clone(),
                        status: StepStatus::Done,
                    }),
                    effect,
                ));
            }
            if !crashed {
                if script.tokens > 0 || script.cost_usd > 0.0 {
                    out.push((
                        t.min(end_at),
                        line(AgentLine::Usage {
                            tokens: Some(script.tokens),
                            cost_usd: Some(script.cost_usd),
                        }),
                        None,
                    ));
                }
                let timed_out = script.end == SimEnd::Hang || script.latency > timeout;
                if timed_out {
                    out.retain(|(at, _, _)| *at < now + timeout);
                    out.push((
                        now + timeout,
                        AttemptSignal::Ended {
                            ending: Ending::TimedOut,
                            log: String::new(),
                        },
                        None,
                    ));
                } else {
                    match &script.end {
                        SimEnd::Success => {
                            out.push((end_at, result(ResultStatus::Success, None, false, None), None));
                            out.push((
                                end_at,
                                AttemptSignal::Ended {
                                    ending: exit(0),
                                    log: String::new(),
                                },
                                None,
                            ));
                        }
                        SimEnd::Fail(class) => {
                            out.push((
                                end_at,
                                result(ResultStatus::Failure, Some(*class), false, None),
                                None,
                            ));
                            out.push((
                                end_at,
                                AttemptSignal::Ended {
                                    ending: exit(1),
                                    log: String::new(),
                                },
                                None,
                            ));
                        }
                        SimEnd::RateLimited => {
                            out.push((
                                end_at,
                                result(ResultStatus::Failure, Some(ErrorClass::Retryable), true, None),
                                None,
                            ));
                            out.push((
                                end_at,
                                AttemptSignal::Ended {
                                    ending: exit(1),
                                    log: String::new(),
                                },
                                None,
                            ));
                        }
                        SimEnd::Exit(code) => {
                            out.push((
                                end_at,
                                AttemptSignal::Ended {
                                    ending: exit(*code),
                                    log: String::new(),
                                },
                                None,
                            ));
                        }
                        SimEnd::Hang | SimEnd::CrashAfterStarting(_) => {}
                    }
                }
            }
        }
        // A simulated agent runs from the instant it is started.
        out.insert(
            0,
            (
                now,
                AttemptSignal::Started {
                    at: std::time::Instant::now(),
                },
                None,
            ),
        );
        let mut st = self.lock();
        st.started
            .insert((spec.run_id, spec.attempt), env.schedule.clone());
        for (due, signal, ledger) in out {
            st.seq += 1;
            let seq = st.seq;
            st.queue.push(Queued {
                due,
                seq,
                tx: reports.clone(),
                report: AttemptReport {
                    run_id: spec.run_id,
                    token: spec.token,
                    signal,
                },
                ledger,
            });
        }
        drop(st);
        // Cancellation is driven through `cancel_attempt` by the driver's handle.
        let runner = self.clone();
        let (run_id, token) = (spec.run_id, spec.token);
        AttemptHandle::from_fn(move || runner.cancel_attempt(run_id, token, reports.clone()))
    }
}

impl SimRunner {
    /// Drops the attempt's remaining reports and ends it as cancelled now.
    fn cancel_attempt(&self, run_id: i64, token: i64, tx: mpsc::UnboundedSender<AttemptReport>) {
        let now = self.clock.now();
        let mut st = self.lock();
        let before = st.queue.len();
        st.queue
            .retain(|q| !(q.report.run_id == run_id && q.report.token == token));
        if st.queue.len() == before {
            return; // already ended
        }
        st.seq += 1;
        let seq = st.seq;
        st.queue.push(Queued {
            due: now,
            seq,
            tx,
            report: AttemptReport {
                run_id,
                token,
                signal: AttemptSignal::Ended {
                    ending: Ending::Cancelled,
                    log: String::new(),
                },
            },
            ledger: None,
        });
    }
}

fn exit(code: i32) -> Ending {
    Ending::Exited {
        code: Some(code),
        signal: None,
    }
}
