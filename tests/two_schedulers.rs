//! Two schedulers on one database decide the same run at the same instant.
//! Only one plan applies; the other finds the run moved on and drops its
//! effects: one `failed`, one alert, one circuit count — not two.

#[path = "store_support.rs"]
mod store_support;
mod support;

use agentcron::core::layers::gates::GateOutcome;
use agentcron::engine::{Engine, EngineOptions};
use agentcron::gates::{Gate, GateContext};
use agentcron::rehearsal::sim::SimRunner;
use agentcron::store::Store;
use agentcron::store::types::*;
use agentcron::time::{Clock, VirtualClock};
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use support::*;

/// A gate that fails, but only once both schedulers are checking it: each
/// waits at the barrier, so both have read the run as pending before either
/// writes. Its kind is not a local one, so the engine checks it outside any
/// write transaction (as it does every gate that does IO).
struct RendezvousGate {
    barrier: Arc<Barrier>,
}

impl Gate for RendezvousGate {
    fn name(&self) -> &str {
        "upstream"
    }

    fn kind(&self) -> &'static str {
        "command"
    }

    fn check(&self, _ctx: &GateContext<'_>) -> GateOutcome {
        self.barrier.wait();
        GateOutcome::fail("upstream export is corrupt")
    }
}

#[test]
fn a_run_failed_by_two_schedulers_at_once_alerts_and_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    failed_once_by_two_schedulers(&dir, &db);
}

/// The same two schedulers on one PostgreSQL ledger (two connections).
#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn a_run_failed_by_two_schedulers_at_once_on_postgresql_alerts_and_counts_once() {
    let Some(url) = store_support::pg_database(
        "two_schedulers::a_run_failed_by_two_schedulers_at_once_on_postgresql_alerts_and_counts_once",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    failed_once_by_two_schedulers(&dir, std::path::Path::new(&url));
}

fn failed_once_by_two_schedulers(dir: &tempfile::TempDir, db: &std::path::Path) {
    let cfg = config(
        dir,
        &format!(
            r#"{}
[[schedule]]
id = "report"
agent = "sim"
cron = "0 9 * * *"
close_after = "1h"
circuit = {{ open_after = 3, cool_down = "30m" }}

[[schedule.gate]]
kind = "command"
name = "upstream"
command = ["true"]
on_fail = "fail"
"#,
            BASE.replace(
                "[scheduler]\n",
                "[scheduler]\nalert = { kind = \"file\", path = \"alerts.jsonl\" }\n"
            )
        ),
    );
    let clock = VirtualClock::new(t("2026-06-06T00:59:00Z"));
    let barrier = Arc::new(Barrier::new(2));
    let engine = |owner: &str| {
        let clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let runner = Arc::new(SimRunner::new(clock.clone(), BTreeMap::new()));
        let gates: Vec<Vec<Box<dyn Gate>>> = vec![vec![Box::new(RendezvousGate {
            barrier: barrier.clone(),
        })]];
        Engine::with_gates(
            cfg.clone(),
            Arc::new(Store::open(db).unwrap()),
            clock,
            runner,
            EngineOptions {
                owner: owner.into(),
                ..EngineOptions::default()
            },
            gates,
        )
    };
    let (mut a, mut b) = (engine("a"), engine("b"));
    // Both start before the window, so neither opens it late or plans a gap.
    a.tick().unwrap();
    b.tick().unwrap();
    clock.set(t("2026-06-06T01:00:00Z"));
    // The window opens; both schedulers see it due and check its gate together.
    std::thread::scope(|s| {
        let ta = s.spawn(|| a.tick().unwrap());
        let tb = s.spawn(|| b.tick().unwrap());
        ta.join().unwrap();
        tb.join().unwrap();
    });

    let store = Store::open(db).unwrap();
    let run = run_by_key(&store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::Failed);
    let kinds = kinds(&store, run.id);
    let count = |k: &str| kinds.iter().filter(|x| *x == k).count();
    assert_eq!(
        count("gate"),
        1,
        "the loser's evaluation is dropped with its plan: {kinds:?}"
    );
    assert_eq!(count("failed"), 1, "{kinds:?}");
    assert_eq!(count("alert"), 1, "{kinds:?}");
    let lines = alert_lines(dir.path());
    assert_eq!(lines.len(), 1, "one alert sent: {lines:?}");
    assert_eq!(lines[0]["what"], "failed");
    let st = store.read(|tx| tx.schedule_state("report")).unwrap();
    assert_eq!(
        st.consecutive_failures, 1,
        "the circuit counted the failed run once"
    );
}
