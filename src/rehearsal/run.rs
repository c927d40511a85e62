//! Running a scenario: the production engine, store and policies on a virtual
//! clock with simulated agents and gates; faults and operator actions applied at
//! their instants; expectations checked against the store and the side-effect
//! ledger. Deterministic: the same file gives the same timeline.
//!
//! Longer than most modules (~900 lines) because the runner and the
//! expectation checks share one scenario state (driver, ledger, notes) and
//! each expectation kind is one arm of one verdict match; splitting them would
//! pass that state through a second module for no gain in reading.

use super::driver::{Driver, GateFactory};
use super::scenario::{self, ExpectSpec, Scenario};
use super::sim::{SimAgent, SimAttempt, SimEnd};
use super::sim_gate::{SimGate, SimGateRule};
use crate::config::model::{ErrorClass, GateKind};
use crate::engine::EngineError;
use crate::operator;
use crate::store::Store;
use crate::store::types::*;
use crate::time::rfc3339;
use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The verdict on one expectation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub text: String,
    /// `None` while it cannot be decided yet (the console shows it pending).
    pub passed: Option<bool>,
    pub detail: String,
}

/// A note on the timeline that is not a store event (faults, operator actions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub at: DateTime<Utc>,
    pub text: String,
}

/// One line of the rehearsal's timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    pub at: DateTime<Utc>,
    pub kind: String,
    pub schedule: Option<String>,
    pub window: Option<String>,
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RehearsalError {
    #[error(transparent)]
    Engine(#[from] EngineError),
}

enum Item {
    Fault(scenario::FaultSpec),
    Restart(String),
    Action(scenario::ActionSpec),
}

/// A scenario in progress.
pub struct Rehearsal {
    pub scenario: Scenario,
    pub driver: Driver,
    db: PathBuf,
    items: Vec<(DateTime<Utc>, usize, Item)>,
    pub notes: Vec<Note>,
    finished: bool,
}

impl Drop for Rehearsal {
    fn drop(&mut self) {
        // An in-memory database goes with its last connection; a file asked
        // for (`--db`) is kept.
        if self.scenario.keep_db.is_some() {
            return;
        }
        for suffix in ["", "-wal", "-shm"] {
            let mut p = self.db.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

fn sim_agents(sc: &Scenario) -> BTreeMap<String, SimAgent> {
    let mut out = BTreeMap::new();
    for s in &sc.config.schedules {
        let spec = sc.sim.agents.get(&s.id).cloned().unwrap_or_default();
        let steps = match &spec.steps {
            Some(steps) => steps.iter().map(|st| (st.name.clone(), st.side_effect)).collect(),
            None => sc
                .config
                .agents
                .get(&s.agent)
                .map(|a| {
                    a.steps
                        .iter()
                        .map(|st| (st.name.clone(), st.side_effect))
                        .collect()
                })
                .unwrap_or_default(),
        };
        let convert = |list: &[scenario::AttemptSpecToml]| -> Vec<SimAttempt> {
            list.iter()
                .map(|a| {
                    let end = if let Some(code) = a.exit {
                        SimEnd::Exit(code)
                    } else if a.hang {
                        SimEnd::Hang
                    } else if let Some(step) = &a.crash_after_starting {
                        SimEnd::CrashAfterStarting(step.clone())
                    } else if a.rate_limited {
                        SimEnd::RateLimited
                    } else if a.result.as_deref() == Some("failure") {
                        SimEnd::Fail(a.class.as_deref().and_then(ErrorClass::parse).unwrap_or_default())
                    } else {
                        SimEnd::Success
                    };
                    SimAttempt {
                        latency: scenario::delta(&a.latency, TimeDelta::seconds(30)),
                        end,
                        tokens: a.tokens,
                        cost_usd: a.cost_usd,
                    }
                })
                .collect()
        };
        let attempts = convert(&spec.attempts);
        let mut phases: Vec<(DateTime<Utc>, Vec<SimAttempt>)> = spec
            .phases
            .iter()
            .map(|p| (p.from.utc(), convert(&p.attempts)))
            .collect();
        phases.sort_by_key(|(t, _)| *t);
        out.insert(
            s.id.clone(),
            SimAgent {
                steps,
                attempts,
                phases,
            },
        );
    }
    out
}

fn gate_factory(sc: &Scenario) -> GateFactory {
    let overrides: Vec<scenario::SimGateSpec> = sc.sim.gate.clone();
    Box::new(move |cfg| {
        cfg.schedules
            .iter()
            .map(|s| {
                s.gates
                    .iter()
                    .map(|g| {
                        if let Some(o) = overrides.iter().find(|o| o.schedule == s.id && o.name == g.name) {
                            let rule = if let Some(t) = &o.pass_from {
                                SimGateRule::PassFrom(t.utc())
                            } else if let Some(t) = &o.fail_from {
                                SimGateRule::FailFrom(
                                    t.utc(),
                                    o.fail.clone().unwrap_or_else(|| "failed".into()),
                                )
                            } else if let Some(why) = &o.fail {
                                SimGateRule::Fail(why.clone())
                            } else {
                                SimGateRule::Pass
                            };
                            return Box::new(SimGate {
                                name: g.name.clone(),
                                kind: "simulated",
                                rule,
                            }) as Box<dyn crate::gates::Gate>;
                        }
                        match g.kind {
                            // Internal gates are real; anything touching the outside
                            // world is simulated as ready unless the scenario says otherwise.
                            GateKind::PreviousRunFinished | GateKind::Calendar { .. } => {
                                crate::gates::build(g)
                            }
                            _ => Box::new(SimGate {
                                name: g.name.clone(),
                                kind: "simulated",
                                rule: SimGateRule::Pass,
                            }),
                        }
                    })
                    .collect()
            })
            .collect()
    })
}

impl Rehearsal {
    pub fn new(scenario: Scenario) -> Result<Self, RehearsalError> {
        Self::start(scenario, false)
    }

    /// [`Rehearsal::new`] with the engine model's oracle: every fact the
    /// engines decide on read from the ledger (see
    /// [`crate::engine::model::EngineStore::forgetful`]). For tests.
    pub fn with_forgetful_model(scenario: Scenario) -> Result<Self, RehearsalError> {
        Self::start(scenario, true)
    }

    fn start(scenario: Scenario, forgetful_model: bool) -> Result<Self, RehearsalError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        // In memory unless asked for a file to inspect afterwards.
        let db = match &scenario.keep_db {
            Some(file) => file.clone(),
            None => {
                super::driver::memory_database(&format!("agentcron-rehearsal-{}-{nanos}", std::process::id()))
            }
        };
        let mut cfg = scenario.config.clone();
        cfg.scheduler.database = db.clone();
        // Alerts go to the trace only: a rehearsal never writes to the real sink.
        cfg.scheduler.alert = None;
        let driver = Driver::new(
            Arc::new(cfg),
            &db,
            scenario.start,
            sim_agents(&scenario),
            gate_factory(&scenario),
        )?;
        let mut items: Vec<(DateTime<Utc>, usize, Item)> = vec![];
        for (i, f) in scenario.faults.iter().enumerate() {
            items.push((f.at.utc(), i, Item::Fault(f.clone())));
            if let Some(r) = &f.restart_at {
                items.push((
                    r.utc(),
                    i,
                    Item::Restart(f.scheduler.clone().unwrap_or_else(|| "main".into())),
                ));
            }
        }
        for (i, a) in scenario.actions.iter().enumerate() {
            items.push((a.at.utc(), 1000 + i, Item::Action(a.clone())));
        }
        items.sort_by_key(|(at, seq, _)| (*at, *seq));
        let mut driver = driver;
        if forgetful_model {
            driver.use_forgetful_model()?;
        }
        // Start the engines at the start instant so their first windows are known.
        driver.settle()?;
        Ok(Self {
            scenario,
            driver,
            db,
            items,
            notes: vec![],
            finished: false,
        })
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.driver.now()
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Advances to the next instant where something happens (an engine event, a
    /// simulated agent report, a fault or an action) and handles it. Returns
    /// false once the scenario's end is reached.
    pub fn step(&mut self) -> Result<bool, RehearsalError> {
        if self.finished {
            return Ok(false);
        }
        let end = self.scenario.end;
        let next_item = self.items.first().map(|(at, _, _)| *at);
        let next_event = self.driver.next_event()?;
        match (next_item, next_event) {
            (Some(it), ev) if it <= end && ev.is_none_or(|e| it <= e) => {
                self.driver.step(it)?;
                if self.driver.now() >= it {
                    let (_, _, item) = self.items.remove(0);
                    self.apply(item)?;
                }
                Ok(true)
            }
            (_, Some(ev)) if ev <= end => {
                self.driver.step(end)?;
                Ok(true)
            }
            _ => {
                if self.driver.step(end)?.is_none() {
                    self.finished = true;
                }
                Ok(!self.finished)
            }
        }
    }

    pub fn run_to_end(&mut self) -> Result<(), RehearsalError> {
        while self.step()? {}
        Ok(())
    }

    fn note(&mut self, text: String) {
        let at = self.driver.now();
        self.notes.push(Note { at, text });
    }

    fn apply(&mut self, item: Item) -> Result<(), RehearsalError> {
        match item {
            Item::Fault(f) => {
                let name = f.scheduler.clone().unwrap_or_else(|| "main".into());
                match f.kind.as_str() {
                    "crash" => {
                        self.driver.crash(&name);
                        self.note(format!(
                            "FAULT scheduler {name} crashed (in-memory state and its agents lost)"
                        ));
                    }
                    "restart" => {
                        self.driver.restart(&name)?;
                        self.note(format!("FAULT scheduler {name} restarted (database reopened)"));
                    }
                    "second_scheduler" => {
                        self.driver.add_scheduler(&name)?;
                        self.note(format!(
                            "FAULT second scheduler {name} started on the same database"
                        ));
                    }
                    "clock_jump" => {
                        let from = self.driver.now();
                        // The loader refuses a clock_jump without `to`.
                        let to = f.to.as_ref().map_or(from, |t| t.utc());
                        self.note(format!(
                            "FAULT wall clock jumps from {} to {}",
                            rfc3339(from),
                            rfc3339(to)
                        ));
                        self.driver.jump_clock(to)?;
                        // Items scheduled before the new "now" happen at once, in order.
                    }
                    _ => {}
                }
            }
            Item::Restart(name) => {
                self.driver.restart(&name)?;
                self.note(format!(
                    "FAULT scheduler {name} restarted after downtime (database reopened)"
                ));
            }
            Item::Action(a) => {
                let text = self.act(&a)?;
                self.note(text);
            }
        }
        self.driver.settle()?;
        Ok(())
    }

    fn act(&self, a: &scenario::ActionSpec) -> Result<String, RehearsalError> {
        let store = self.driver.store()?;
        let now = self.driver.now();
        let by = a.by.clone().unwrap_or_else(|| "rehearsal".into());
        let reason = a
            .reason
            .clone()
            .unwrap_or_else(|| format!("rehearsal {}", a.kind));
        let cfg = &self.driver.cfg;
        let find = || -> Result<i64, String> {
            let s = a.schedule.as_deref().ok_or("needs `schedule`")?;
            let w = a.window.as_deref().ok_or("needs `window`")?;
            let sched = cfg.schedule(s).ok_or(format!("no schedule {s}"))?;
            store
                .read(|tx| tx.find_run(&sched.tenant, s, w))
                .ok()
                .flatten()
                .map(|r| r.id)
                .ok_or(format!("no run for {s} window {w}"))
        };
        let result: Result<String, String> = match a.kind.as_str() {
            "approve" => find().and_then(|id| {
                operator::approve_checked(
                    &store,
                    Some(cfg),
                    id,
                    &by,
                    &reason,
                    a.resume_after.as_deref(),
                    now,
                )
                .map(|_| format!("ACTION {by} approved run {id}: {reason}"))
                .map_err(|e| e.to_string())
            }),
            "reject" => find().and_then(|id| {
                operator::reject(&store, Some(cfg), id, &by, &reason, now)
                    .map(|_| format!("ACTION {by} rejected run {id}: {reason}"))
                    .map_err(|e| e.to_string())
            }),
            "requeue" => find().and_then(|id| {
                operator::requeue(&store, id, &by, &reason, now)
                    .map(|_| format!("ACTION {by} requeued run {id}: {reason}"))
                    .map_err(|e| e.to_string())
            }),
            "kill" => operator::kill(&store, &by, &reason, a.cancel_running, now)
                .map(|_| format!("ACTION {by} pulled the kill switch: {reason}"))
                .map_err(|e| e.to_string()),
            "unkill" => operator::unkill(&store, &by, &reason, now)
                .map(|_| format!("ACTION {by} released the kill switch: {reason}"))
                .map_err(|e| e.to_string()),
            "pause" => operator::pause(
                &store,
                cfg,
                a.schedule.as_deref().unwrap_or_default(),
                &by,
                &reason,
                now,
            )
            .map(|_| format!("ACTION {by} paused {}", a.schedule.as_deref().unwrap_or_default()))
            .map_err(|e| e.to_string()),
            "resume" => operator::resume(
                &store,
                cfg,
                a.schedule.as_deref().unwrap_or_default(),
                &by,
                &reason,
                now,
            )
            .map(|_| {
                format!(
                    "ACTION {by} resumed {}",
                    a.schedule.as_deref().unwrap_or_default()
                )
            })
            .map_err(|e| e.to_string()),
            "trigger" => operator::trigger(
                &store,
                cfg,
                a.schedule.as_deref().unwrap_or_default(),
                a.window.as_deref(),
                &by,
                now,
            )
            .map(|r| format!("ACTION {by} triggered {} window {}", r.schedule, r.window_key))
            .map_err(|e| e.to_string()),
            "post_event" => operator::post_event(
                &store,
                a.event.as_deref().unwrap_or_default(),
                a.id.as_deref(),
                &serde_json::json!({}),
                now,
            )
            .map(|(id, _)| {
                format!(
                    "ACTION posted event {} {id}",
                    a.event.as_deref().unwrap_or_default()
                )
            })
            .map_err(|e| e.to_string()),
            other => Err(format!("unknown action {other}")),
        };
        Ok(result.unwrap_or_else(|e| format!("ACTION {} refused: {e}", a.kind)))
    }

    /// The timeline so far: store events and notes, in time order.
    pub fn timeline(&self) -> Result<Vec<Line>, RehearsalError> {
        let store = self.driver.store()?;
        let (events, runs) = store
            .read(|tx| {
                Ok((
                    tx.events(&EventFilter::default())?,
                    tx.runs(&RunFilter::default())?,
                ))
            })
            .map_err(EngineError::from)?;
        let keys: BTreeMap<i64, String> = runs.into_iter().map(|r| (r.id, r.window_key)).collect();
        let mut lines: Vec<Line> = events
            .into_iter()
            .filter(|e| !matches!(e.kind.as_str(), "decision" | "tick" | "heartbeat"))
            .map(|e| Line {
                at: e.at,
                text: describe(&e),
                kind: e.kind,
                schedule: e.schedule,
                window: e.run_id.and_then(|id| keys.get(&id).cloned()),
            })
            .collect();
        for n in &self.notes {
            lines.push(Line {
                at: n.at,
                kind: "rehearsal".into(),
                schedule: None,
                window: None,
                text: n.text.clone(),
            });
        }
        lines.sort_by_key(|l| l.at);
        Ok(lines)
    }

    /// Checks every expectation; before the end, undecided ones are pending.
    pub fn verdicts(&self) -> Result<Vec<Verdict>, RehearsalError> {
        let store = self.driver.store()?;
        let ledger: Vec<String> = self.driver.sim.ledger().into_iter().map(|(_, e)| e).collect();
        let final_ = self.finished;
        let now = self.driver.now();
        Ok(self
            .scenario
            .expect
            .iter()
            .map(|e| check(e, &store, &self.driver.cfg, &ledger, now, final_))
            .collect())
    }
}

/// A one-line description of an event for the timeline (the trace's
/// [`crate::trace::Style::Timeline`] reading).
pub fn describe(e: &Event) -> String {
    crate::trace::describe(&e.event(), crate::trace::Style::Timeline)
}

fn terminal_event(events: &[Event]) -> Option<&Event> {
    use crate::core::event::Event as E;
    events.iter().rev().find(|e| {
        matches!(
            e.event(),
            E::Succeeded { .. }
                | E::DeadLettered { .. }
                | E::Skipped { .. }
                | E::Expired { .. }
                | E::Rejected { .. }
                | E::Failed {
                    is_final: Some(true),
                    ..
                }
        )
    })
}

fn check(
    e: &ExpectSpec,
    store: &Store,
    cfg: &crate::config::Config,
    ledger: &[String],
    now: DateTime<Utc>,
    final_: bool,
) -> Verdict {
    let target = match (&e.schedule, &e.window) {
        (Some(s), Some(w)) => format!("{s} window {w}"),
        (Some(s), None) => s.clone(),
        _ => "the rehearsal".into(),
    };
    let run = match (&e.schedule, &e.window) {
        (Some(s), Some(w)) => {
            let tenant = cfg
                .schedule(s)
                .map(|x| x.tenant.clone())
                .unwrap_or_else(|| "default".into());
            store.read(|tx| tx.find_run(&tenant, s, w)).ok().flatten()
        }
        _ => None,
    };
    let run_events = run
        .as_ref()
        .and_then(|r| {
            store
                .read(|tx| {
                    tx.events(&EventFilter {
                        run_id: Some(r.id),
                        ..EventFilter::default()
                    })
                })
                .ok()
        })
        .unwrap_or_default();
    let pending = |text: String, detail: String| Verdict {
        text,
        passed: None,
        detail,
    };
    let decide = |text: String, ok: bool, detail: String| Verdict {
        text,
        passed: Some(ok),
        detail,
    };
    let undecided = |text: String, detail: String| {
        if final_ {
            decide(text, false, detail)
        } else {
            pending(text, detail)
        }
    };
    let text = |default: String| e.text.clone().unwrap_or(default);

    if let Some(state) = &e.state {
        let t = text(format!("{target} ends {state}"));
        return match &run {
            None => undecided(t, "no run was ever opened for that window".into()),
            Some(r) if r.state.as_str() == state => {
                if r.state.is_terminal() || final_ {
                    decide(
                        t,
                        true,
                        format!("{} ({})", r.state, r.state_reason.clone().unwrap_or_default()),
                    )
                } else {
                    pending(t, format!("now {}", r.state))
                }
            }
            Some(r) if r.state.is_terminal() || final_ => decide(
                t,
                false,
                format!(
                    "it ended {} instead ({})",
                    r.state,
                    r.state_reason
                        .clone()
                        .or(r.last_error.clone())
                        .unwrap_or_default()
                ),
            ),
            Some(r) => pending(t, format!("now {}", r.state)),
        };
    }
    if let Some(n) = e.attempts {
        let t = text(format!("{target} takes exactly {n} attempt(s)"));
        return match &run {
            None => undecided(t, "no run".into()),
            Some(r) if r.attempts > n => decide(t, false, format!("{} attempts", r.attempts)),
            Some(r) if r.state.is_terminal() || final_ => decide(
                t,
                r.attempts == n,
                format!("{} attempt(s), {}", r.attempts, r.state),
            ),
            Some(r) => pending(t, format!("{} so far", r.attempts)),
        };
    }
    if let Some(step) = &e.side_effect {
        let want = e.count.unwrap_or(1);
        let prefix = match (&e.schedule, &e.window) {
            (Some(s), Some(w)) => {
                let tenant = cfg
                    .schedule(s)
                    .map(|x| x.tenant.clone())
                    .unwrap_or_else(|| "default".into());
                Some(format!("{tenant}/{s}/{w} "))
            }
            _ => None,
        };
        let n = ledger
            .iter()
            .filter(|l| {
                l.ends_with(&format!(" {step}")) && prefix.as_ref().is_none_or(|p| l.starts_with(p.as_str()))
            })
            .count();
        let t = text(format!(
            "side effect {step} of {target} lands exactly {want} time(s)"
        ));
        return if n > want {
            decide(t, false, format!("it landed {n} times"))
        } else if final_ {
            decide(t, n == want, format!("it landed {n} time(s)"))
        } else {
            pending(t, format!("{n} so far"))
        };
    }
    if let Some(step) = &e.step {
        let want = e.count.unwrap_or(1);
        let t = text(format!("step {step} of {target} starts exactly {want} time(s)"));
        let n = run_events
            .iter()
            .filter(|ev| {
                matches!(ev.event(), crate::core::event::Event::Step {
                    name,
                    status: crate::store::StepStatus::Started,
                    ..
                } if name == *step)
            })
            .count();
        let ended = run.as_ref().is_some_and(|r| r.state.is_terminal());
        return if n > want {
            decide(t, false, format!("it started {n} times"))
        } else if ended || final_ {
            decide(t, n == want, format!("it started {n} time(s)"))
        } else {
            pending(t, format!("{n} so far"))
        };
    }
    if let Some(before) = &e.finished_before {
        let limit = before.utc();
        let t = text(format!("{target} finishes before {before}"));
        return match terminal_event(&run_events) {
            Some(ev) => decide(
                t,
                ev.at < limit && ev.kind == "succeeded",
                format!("{} at {}", ev.kind, rfc3339(ev.at)),
            ),
            None if now >= limit || final_ => decide(t, false, "not finished".into()),
            None => pending(t, "not finished yet".into()),
        };
    }
    if e.no_unexplained_skips {
        let t = text("nothing is skipped without a reason".into());
        let runs = store
            .read(|tx| tx.runs(&RunFilter::default()))
            .unwrap_or_default();
        let bad: Vec<String> = runs
            .iter()
            .filter(|r| matches!(r.state, RunState::Skipped | RunState::Missed | RunState::Expired))
            .filter(|r| r.state_reason.as_deref().is_none_or(|x| x.trim().is_empty()))
            .map(|r| format!("{} {}", r.schedule, r.window_key))
            .collect();
        let skipped = runs
            .iter()
            .filter(|r| matches!(r.state, RunState::Skipped | RunState::Missed | RunState::Expired))
            .count();
        return if !bad.is_empty() {
            decide(t, false, format!("no reason for: {}", bad.join(", ")))
        } else if final_ {
            decide(
                t,
                true,
                format!("{skipped} skipped/missed/expired run(s), each with a reason"),
            )
        } else {
            pending(t, format!("{skipped} so far, all explained"))
        };
    }
    if e.no_double_claim {
        let t = text("no window is claimed twice for one attempt; no side effect runs twice".into());
        let runs = store
            .read(|tx| tx.runs(&RunFilter::default()))
            .unwrap_or_default();
        let mut bad = vec![];
        for r in &runs {
            let claims = store
                .read(|tx| {
                    tx.events(&EventFilter {
                        run_id: Some(r.id),
                        kinds: vec!["claimed".into()],
                        ..EventFilter::default()
                    })
                })
                .map(|v| v.len())
                .unwrap_or(0);
            if claims != r.attempts as usize {
                bad.push(format!(
                    "{} {}: {claims} claims for {} attempts",
                    r.schedule, r.window_key, r.attempts
                ));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for l in ledger {
            if !seen.insert(l) {
                bad.push(format!("side effect twice: {l}"));
            }
        }
        let owners: std::collections::BTreeSet<String> =
            runs.iter().filter_map(|r| r.lease_owner.clone()).collect();
        return if !bad.is_empty() {
            decide(t, false, bad.join("; "))
        } else if final_ {
            decide(
                t,
                true,
                format!(
                    "{} runs, {} side effects, no duplicates{}",
                    runs.len(),
                    ledger.len(),
                    if owners.len() > 1 {
                        format!(
                            " (claimed by {})",
                            owners.into_iter().collect::<Vec<_>>().join(", ")
                        )
                    } else {
                        String::new()
                    }
                ),
            )
        } else {
            pending(t, "no duplicate so far".into())
        };
    }
    if let Some(kind) = &e.event {
        let contains = e.detail_contains.clone().unwrap_or_default();
        let t = text(format!(
            "an event {kind}{} exists for {target}",
            if contains.is_empty() {
                String::new()
            } else {
                format!(" mentioning \"{contains}\"")
            }
        ));
        let pool: Vec<Event> = if run.is_some() {
            run_events.clone()
        } else {
            store
                .read(|tx| {
                    tx.events(&EventFilter {
                        schedule: e.schedule.clone(),
                        kinds: vec![kind.clone()],
                        ..EventFilter::default()
                    })
                })
                .unwrap_or_default()
        };
        let found = pool
            .iter()
            .find(|ev| ev.kind == *kind && ev.detail.to_string().contains(&contains));
        return match found {
            Some(ev) => decide(t, true, format!("at {}: {}", rfc3339(ev.at), describe(ev))),
            None => undecided(t, format!("no such event (saw {} event(s))", pool.len())),
        };
    }
    if let (Some(order), Some(s)) = (&e.claimed_in_order, &e.schedule) {
        let t = text(format!(
            "{s} windows {} are claimed in this order",
            order.join(", ")
        ));
        let tenant = cfg
            .schedule(s)
            .map(|x| x.tenant.clone())
            .unwrap_or_else(|| "default".into());
        let mut times = vec![];
        for w in order {
            let at = store
                .read(|tx| tx.find_run(&tenant, s, w))
                .ok()
                .flatten()
                .and_then(|r| {
                    store
                        .read(|tx| {
                            tx.events(&EventFilter {
                                run_id: Some(r.id),
                                kinds: vec!["claimed".into()],
                                ..EventFilter::default()
                            })
                        })
                        .ok()
                })
                .and_then(|v| v.first().map(|e| e.at));
            times.push((w.clone(), at));
        }
        if times.iter().any(|(_, at)| at.is_none()) {
            let missing: Vec<String> = times
                .iter()
                .filter(|(_, at)| at.is_none())
                .map(|(w, _)| w.clone())
                .collect();
            return undecided(t, format!("not claimed: {}", missing.join(", ")));
        }
        let ordered = times.windows(2).all(|p| p[0].1 <= p[1].1);
        let detail = times
            .iter()
            .map(|(w, at)| format!("{w} at {}", at.map(rfc3339).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(", ");
        return decide(t, ordered, detail);
    }
    if let (Some(s), true) = (&e.schedule, e.run_count.is_some() || e.windows.is_some()) {
        let mut runs = store
            .read(|tx| {
                tx.runs(&RunFilter {
                    schedule: Some(s.clone()),
                    ..RunFilter::default()
                })
            })
            .unwrap_or_default();
        runs.sort_by_key(|r| (r.window_start, r.id));
        let keys: Vec<String> = runs.iter().map(|r| r.window_key.clone()).collect();
        let t = text(match (&e.windows, e.run_count) {
            (Some(w), _) => format!("{s} opens exactly the windows {}", w.join(", ")),
            (None, Some(n)) => format!("{s} opens exactly {n} window(s)"),
            _ => unreachable!("guarded above"),
        });
        let ok = e.windows.as_ref().is_none_or(|w| *w == keys) && e.run_count.is_none_or(|n| n == keys.len());
        let detail = format!("{} window(s): {}", keys.len(), keys.join(", "));
        return if final_ || !ok {
            decide(t, ok, detail)
        } else {
            pending(t, detail)
        };
    }
    decide(
        text("(empty expectation)".into()),
        false,
        "the expectation sets nothing to check".into(),
    )
}

/// Summary of a finished rehearsal (`rehearse --json` prints this per file).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub passed: bool,
    pub expectations: Vec<ReportLine>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReportLine {
    pub text: String,
    pub passed: bool,
    pub detail: String,
}

impl Report {
    pub fn from_verdicts(name: &str, verdicts: &[Verdict]) -> Self {
        let expectations: Vec<ReportLine> = verdicts
            .iter()
            .map(|v| ReportLine {
                text: v.text.clone(),
                passed: v.passed == Some(true),
                detail: v.detail.clone(),
            })
            .collect();
        Self {
            scenario: name.to_string(),
            passed: expectations.iter().all(|e| e.passed),
            expectations,
        }
    }
}
