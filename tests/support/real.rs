//! Real agent processes on a virtual clock: the real [`Engine`] with the
//! [`DefaultRunner`], stepped from one thing-to-do to the next. While agents run
//! the virtual clock stands still and the loop waits (in real time, bounded) for
//! their reports, so every event of an attempt carries its start instant.

use super::{config, t};
use agentcron::agent::runner::DefaultRunner;
use agentcron::config::Config;
use agentcron::engine::{Engine, EngineOptions};
use agentcron::store::Store;
use agentcron::store::types::*;
use agentcron::time::{Clock, VirtualClock};
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

/// Safety net for one agent report; agents in these tests answer in well under a second.
const REPORT_LIMIT: Duration = Duration::from_secs(30);

/// The ledger-writing test agent (see the fixture's docstring).
pub fn agent_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recovery/agent.py")
}

/// `[scheduler]` (alerts to `alerts.jsonl`) and `[agents.bot]`: the fixture agent
/// with steps fetch and deliver (a side effect), its script in `script.json` and
/// its ledger in `ledger.txt` of the config folder.
pub fn base(timeout: &str, verify: bool) -> String {
    format!(
        r#"
[scheduler]
timezone = "UTC"
lease = "60s"
workers = 8
alert = {{ kind = "file", path = "alerts.jsonl" }}

[agents.bot]
kind = "command"
command = ["python3", "{agent}"]
timeout = "{timeout}"
verify = {verify}
env = {{ LEDGER = "ledger.txt", SCRIPT = "script.json" }}
steps = [{{ name = "fetch" }}, {{ name = "deliver", side_effect = true }}]
"#,
        agent = agent_path().display()
    )
}

/// One engine on a virtual clock over a database in a temp folder (or a
/// PostgreSQL ledger, [`Real::on_postgres`]).
pub struct Real {
    pub dir: TempDir,
    pub cfg: Arc<Config>,
    pub clock: VirtualClock,
    pub store: Arc<Store>,
    pub engine: Engine,
    /// The ledger: the folder's `test.db`, or a PostgreSQL URL.
    pub db: std::path::PathBuf,
}

impl Real {
    pub fn new(toml: &str, start: &str) -> Self {
        Self::new_with(toml, start, |_| {})
    }

    /// Like [`Real::new`], with `prepare` filling the config folder first (files
    /// the config refers to, such as a holidays file).
    pub fn new_with(toml: &str, start: &str, prepare: impl FnOnce(&std::path::Path)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path());
        let db = dir.path().join("test.db");
        Self::on(dir, toml, start, db)
    }

    /// Like [`Real::new`] on the PostgreSQL ledger at `url` (a fresh database).
    pub fn on_postgres(toml: &str, start: &str, url: &str) -> Self {
        Self::on(
            tempfile::tempdir().unwrap(),
            toml,
            start,
            std::path::PathBuf::from(url),
        )
    }

    fn on(dir: TempDir, toml: &str, start: &str, db: std::path::PathBuf) -> Self {
        let cfg = config(&dir, toml);
        let clock = VirtualClock::new(t(start));
        let store = Arc::new(Store::open(&db).unwrap());
        let engine = Self::build(&cfg, &clock, store.clone(), "a");
        Self {
            dir,
            cfg,
            clock,
            store,
            engine,
            db,
        }
    }

    fn build(cfg: &Arc<Config>, clock: &VirtualClock, store: Arc<Store>, owner: &str) -> Engine {
        let clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let opts = EngineOptions {
            owner: owner.to_string(),
            ..EngineOptions::default()
        };
        Engine::new(cfg.clone(), store, clock, Arc::new(DefaultRunner), opts)
    }

    /// Another scheduler process on the same database and clock.
    pub fn second_engine(&self, owner: &str) -> Engine {
        let store = Arc::new(Store::open(&self.db).unwrap());
        Self::build(&self.cfg, &self.clock, store, owner)
    }

    /// Writes the agent's script (see the fixture): attempt behaviours by key.
    pub fn script(&self, script: serde_json::Value) {
        std::fs::write(self.dir.path().join("script.json"), script.to_string()).unwrap();
    }

    /// Ledger lines: `IDEMPOTENCY_KEY STEP attempt=N`, one per side effect.
    pub fn ledger(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("ledger.txt"))
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Lines of the alert sink file, parsed.
    pub fn alert_lines(&self) -> Vec<serde_json::Value> {
        super::alert_lines(self.dir.path())
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Handles everything due now, waiting for every agent it starts to end.
    pub async fn settle(&mut self) {
        settle(&mut self.engine).await;
    }

    /// Steps the clock from one wakeup to the next until `end`, settling each.
    pub async fn run_until(&mut self, end: &str) {
        let end = t(end);
        let mut rounds_here = 0;
        loop {
            self.settle().await;
            let now = self.clock.now();
            match self.engine.next_wakeup().unwrap() {
                Some(next) if next <= end => {
                    if next <= now {
                        rounds_here += 1;
                        assert!(
                            rounds_here < 1000,
                            "engine keeps waking at {now} without progress"
                        );
                    } else {
                        rounds_here = 0;
                    }
                    self.clock.set(next.max(now));
                }
                _ => {
                    if end > now {
                        self.clock.set(end);
                        self.settle().await;
                    }
                    return;
                }
            }
        }
    }

    pub fn run(&self, id: i64) -> Run {
        self.store.read(|tx| tx.run(id)).unwrap()
    }

    pub fn attempts(&self, run_id: i64) -> Vec<Attempt> {
        self.store.read(|tx| tx.attempts(run_id)).unwrap()
    }

    pub fn steps(&self, run_id: i64) -> Vec<Step> {
        self.store.read(|tx| tx.steps(run_id)).unwrap()
    }

    pub fn schedule_state(&self, schedule: &str) -> ScheduleState {
        self.store.read(|tx| tx.schedule_state(schedule)).unwrap()
    }

    /// The envelope attempt `n` (1-based) received.
    pub fn envelope(&self, run_id: i64, n: usize) -> serde_json::Value {
        let a = &self.attempts(run_id)[n - 1];
        serde_json::from_str(a.envelope.as_deref().expect("envelope stored")).unwrap()
    }
}

/// Ticks `engine`; while it runs attempts, waits for their reports (real time,
/// bounded) and ticks again, so an attempt's whole life happens at one instant.
pub async fn settle(engine: &mut Engine) {
    engine.tick().unwrap();
    while engine.running_count() > 0 {
        let got = tokio::time::timeout(REPORT_LIMIT, engine.wait_report())
            .await
            .expect("an agent report within the safety limit")
            .unwrap();
        assert!(got, "report channel closed");
        engine.tick().unwrap();
    }
}

/// A run's trail without decisions, gates and heartbeats: `kind`, and for steps
/// `step NAME STATUS`.
pub fn trail(store: &Store, run_id: i64) -> Vec<String> {
    super::events(store, run_id)
        .into_iter()
        .filter(|e| !matches!(e.kind.as_str(), "decision" | "gate" | "heartbeat"))
        .map(|e| match e.kind.as_str() {
            "step" => format!(
                "step {} {}",
                e.detail["name"].as_str().unwrap_or_default(),
                e.detail["status"].as_str().unwrap_or_default()
            ),
            k => k.to_string(),
        })
        .collect()
}

/// The run's events of one kind.
pub fn of_kind(store: &Store, run_id: i64, kind: &str) -> Vec<Event> {
    super::events(store, run_id)
        .into_iter()
        .filter(|e| e.kind == kind)
        .collect()
}
