//! A gate that takes longer than the lease does not cost a running attempt
//! its lease: gates that do IO are checked off the engine's thread, which
//! keeps renewing the leases of the attempts it runs meanwhile.

mod support;

use agentcron::core::layers::gates::GateOutcome;
use agentcron::engine::{Engine, EngineOptions};
use agentcron::gates::{Gate, GateContext};
use agentcron::rehearsal::sim::SimRunner;
use agentcron::store::Store;
use agentcron::store::types::*;
use agentcron::time::{Clock, VirtualClock};
use chrono::TimeDelta;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

/// A gate whose check takes three leases of (virtual) time: it moves the
/// clock on a tenth of the lease at a time, and after each step waits — a
/// bounded poll of the store, not a sleep — for the running attempt's lease to
/// be ahead of the clock again, noting every step where it fell behind.
struct SlowGate {
    clock: VirtualClock,
    db: PathBuf,
    lease: TimeDelta,
    behind: Arc<Mutex<Vec<String>>>,
}

impl Gate for SlowGate {
    fn name(&self) -> &str {
        "warehouse"
    }

    fn kind(&self) -> &'static str {
        "sqlite_query"
    }

    fn check(&self, _ctx: &GateContext<'_>) -> GateOutcome {
        let store = Store::open(&self.db).unwrap();
        for step in 1..=30 {
            self.clock.advance(self.lease / 10);
            let now = self.clock.now();
            let deadline = Instant::now() + Duration::from_secs(2);
            loop {
                let expires = store
                    .read(|tx| tx.running_runs(Some("long")))
                    .unwrap()
                    .first()
                    .and_then(|r| r.lease_expires);
                if expires.is_some_and(|e| e > now) {
                    break;
                }
                if Instant::now() >= deadline {
                    self.behind
                        .lock()
                        .unwrap()
                        .push(format!("step {step} at {now}: lease {expires:?}"));
                    return GateOutcome::pass("gave up watching the lease");
                }
                std::thread::yield_now();
            }
        }
        GateOutcome::pass("landed")
    }
}

#[test]
fn a_gate_slower_than_the_lease_does_not_cost_a_running_attempt_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            r#"{}
[[schedule]]
id = "long"
agent = "sim"
cron = "0 9 * * *"
close_after = "1h"

[[schedule]]
id = "slow"
agent = "sim"
cron = "1 9 * * *"
close_after = "1h"

[[schedule.gate]]
kind = "command"
name = "warehouse"
command = ["true"]
"#,
            BASE.replace("lease = \"60s\"", "lease = \"30s\"")
        ),
    );
    let db = dir.path().join("slow.db");
    let clock = VirtualClock::new(t("2026-06-06T00:59:00Z"));
    let behind = Arc::new(Mutex::new(vec![]));
    let gate = SlowGate {
        clock: clock.clone(),
        db: db.clone(),
        lease: TimeDelta::seconds(30),
        behind: behind.clone(),
    };
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    // Simulated agents report only when released: "long" runs until the end.
    let runner = Arc::new(SimRunner::new(shared.clone(), BTreeMap::new()));
    let gates: Vec<Vec<Box<dyn Gate>>> = vec![vec![], vec![Box::new(gate)]];
    let mut engine = Engine::with_gates(
        cfg,
        Arc::new(Store::open(&db).unwrap()),
        shared,
        runner,
        EngineOptions {
            owner: "main".into(),
            ..EngineOptions::default()
        },
        gates,
    );
    engine.tick().unwrap();
    clock.set(t("2026-06-06T01:00:00Z"));
    engine.tick().unwrap();
    let store = Store::open(&db).unwrap();
    assert_eq!(run_by_key(&store, "long", "2026-06-06").state, RunState::Running);
    // The slow gate's window: its check takes 90 s of a 30 s lease.
    clock.set(t("2026-06-06T01:01:00Z"));
    engine.tick().unwrap();
    let behind = behind.lock().unwrap().clone();
    assert!(
        behind.is_empty(),
        "the running attempt's lease fell behind the clock: {behind:?}"
    );
    let long = run_by_key(&store, "long", "2026-06-06");
    assert_eq!(long.state, RunState::Running);
    assert!(long.lease_expires.unwrap() > clock.now(), "{long:?}");
    // Another scheduler sweeping now finds no lost attempt.
    let mut other = Engine::with_gates(
        engine.config().clone().into(),
        Arc::new(Store::open(&db).unwrap()),
        Arc::new(clock.clone()),
        Arc::new(SimRunner::new(Arc::new(clock.clone()), BTreeMap::new())),
        EngineOptions {
            owner: "other".into(),
            ..EngineOptions::default()
        },
        vec![vec![], vec![]],
    );
    other.tick().unwrap();
    assert!(of_kind(&store, long.id, "lost").is_empty());
    assert_eq!(run_by_key(&store, "slow", "2026-06-06").state, RunState::Running);
}

fn of_kind(store: &Store, run: i64, kind: &str) -> Vec<Event> {
    events(store, run)
        .into_iter()
        .filter(|e| e.kind == kind)
        .collect()
}
