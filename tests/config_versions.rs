//! Config versions, reload, stages, approvals and rollback (issue 18, DESIGN.md
//! "Control plane"), on a virtual clock with simulated agents: each invariant
//! of a reload at instant U is tested here, through the real engine, store and
//! `control` apply path.

mod support;

use agentcron::config::load_str;
use agentcron::control::{self, Outcome};
use agentcron::engine::{Engine, EngineOptions, ReloadOutcome, ReloadSource};
use agentcron::rehearsal::sim::{SimAgent, SimAttempt, SimEnd, SimRunner};
use agentcron::store::Store;
use agentcron::store::types::*;
use agentcron::time::{Clock, VirtualClock};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use support::{runs, t};

const HEAD: &str = r#"
[scheduler]
timezone = "UTC"
lease = "60s"
workers = 4
backfill_workers = 2

[agents.sim]
kind = "command"
command = ["true"]
timeout = "10h"
"#;

fn quick() -> SimAgent {
    agent(TimeDelta::seconds(30), SimEnd::Success)
}

fn agent(latency: TimeDelta, end: SimEnd) -> SimAgent {
    SimAgent {
        attempts: vec![SimAttempt {
            latency,
            end,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// One scheduler on a file database, its config file, a virtual clock.
struct Rig {
    dir: tempfile::TempDir,
    path: PathBuf,
    db: PathBuf,
    clock: VirtualClock,
    runner: SimRunner,
    engines: Vec<Engine>,
}

impl Rig {
    fn new(start: &str, text: &str, agents: Vec<(&str, SimAgent)>) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentcron.toml");
        let db = dir.path().join("test.db");
        let clock = VirtualClock::new(t(start));
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        let agents: BTreeMap<String, SimAgent> =
            agents.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let runner = SimRunner::new(shared, agents);
        let mut rig = Rig {
            dir,
            path,
            db,
            clock,
            runner,
            engines: vec![],
        };
        rig.write(text);
        rig.start("main", &rig.path.clone());
        rig
    }

    fn store(&self) -> Store {
        Store::open(&self.db).unwrap()
    }

    fn write(&self, text: &str) {
        std::fs::write(&self.path, text).unwrap();
    }

    /// A scheduler starting on the file at `path`, as `run --headless` does:
    /// the file is proposed, the database's version runs, only its stages.
    fn start(&mut self, owner: &str, path: &Path) {
        let text = std::fs::read_to_string(path).unwrap();
        let file = load_str(&text, path).unwrap();
        let store = Arc::new(self.store());
        control::propose(&store, &file, &text, owner, self.clock.now()).unwrap();
        let (v, mut cfg) = control::load_current(&store, &Default::default())
            .unwrap()
            .unwrap();
        cfg.scheduler.database = self.db.clone();
        let cfg = control::for_stages(&cfg, &file.scheduler.stages);
        let mut engine = Engine::new(
            Arc::new(cfg),
            store,
            Arc::new(self.clock.clone()),
            Arc::new(self.runner.clone()),
            EngineOptions {
                owner: owner.into(),
                reload: Some(ReloadSource::new(path)),
                ..EngineOptions::default()
            },
        );
        engine.set_config_version(Some(v.version));
        self.engines.push(engine);
    }

    fn engine(&mut self) -> &mut Engine {
        &mut self.engines[0]
    }

    /// SIGHUP to the first scheduler: reloads at the clock's now.
    fn hup(&mut self) -> ReloadOutcome {
        let path = self.path.clone();
        self.engine().reload_from(&path).unwrap()
    }

    /// Steps every scheduler through virtual time up to `until`.
    fn run_until(&mut self, until: DateTime<Utc>) {
        loop {
            let now = self.clock.now();
            for e in &mut self.engines {
                e.check_reload().unwrap();
                e.tick().unwrap();
            }
            self.runner.release_due(now);
            for e in &mut self.engines {
                while e.drain_reports().unwrap() > 0 {}
            }
            let mut next = self.runner.next_due();
            for e in &self.engines {
                if let Some(w) = e.next_wakeup().unwrap() {
                    next = Some(next.map_or(w, |n: DateTime<Utc>| n.min(w)));
                }
            }
            let next = next.unwrap_or(until).max(now + TimeDelta::milliseconds(1));
            if next > until {
                self.clock.set(until);
                for e in &mut self.engines {
                    e.tick().unwrap();
                }
                return;
            }
            self.clock.set(next);
        }
    }

    fn version_of(&self, run: &Run) -> (Option<i64>, Vec<(u32, Option<i64>)>) {
        self.store().read(|tx| tx.run_versions(run.id)).unwrap()
    }
}

fn schedule(id: &str, trigger: &str, extra: &str) -> String {
    format!("\n[[schedule]]\nid = \"{id}\"\nagent = \"sim\"\n{trigger}\n{extra}\n")
}

fn config_events(store: &Store, kind: &str) -> Vec<Event> {
    store
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec![kind.into()],
                ..EventFilter::default()
            })
        })
        .unwrap()
}

/// An edit that leaves the trigger alone never runs a window again: window
/// keys hold no version (the keys after the edit are the ones the old
/// version would have used), the window that already ran keeps its one
/// attempt, and runs opened after the reload carry the new schedule version.
#[test]
fn an_edit_never_reruns_a_window_and_new_runs_carry_the_new_version() {
    let v1 = format!("{HEAD}{}", schedule("h", "cron = \"0 * * * *\"", ""));
    let mut rig = Rig::new("2026-06-06T00:30:00Z", &v1, vec![("h", quick())]);
    rig.run_until(t("2026-06-06T02:30:00Z"));
    let v2 = v1.replace(
        "cron = \"0 * * * *\"",
        "cron = \"0 * * * *\"\nretry = { max_attempts = 5 }",
    );
    rig.write(&v2);
    let ReloadOutcome::Applied { version, changes } = rig.hup() else {
        panic!("applied")
    };
    assert_eq!(version, 2);
    assert_eq!(changes[0].fields[0].field, "retry.max_attempts");
    assert!(!changes[0].trigger_changed());
    rig.run_until(t("2026-06-06T04:30:00Z"));
    let store = rig.store();
    let all = runs(&store, "h");
    let keys: Vec<&str> = all.iter().map(|r| r.window_key.as_str()).collect();
    let old = load_str(&v1, &rig.path).unwrap();
    let rule = old.schedules[0].fire_rule(None).unwrap();
    let want: Vec<String> = rule
        .fires_after(t("2026-06-06T00:30:00Z"))
        .take(4)
        .map(|f| f.window_key)
        .collect();
    assert_eq!(keys, want, "the same keys under both versions, each once");
    for r in &all {
        assert_eq!(r.state, RunState::Succeeded, "{}", r.window_key);
        assert_eq!(r.attempts, 1, "{} ran once", r.window_key);
        let (opened, attempts) = rig.version_of(r);
        let want = if r.window_start < t("2026-06-06T02:30:00Z") {
            1
        } else {
            2
        };
        assert_eq!(opened, Some(want), "{}", r.window_key);
        assert_eq!(attempts, vec![(1, Some(want))], "{}", r.window_key);
    }
    let versioned = support::schedule_events(&store, "h", "schedule_versioned");
    assert_eq!(versioned.len(), 2);
    assert_eq!(versioned[1].detail["version"], 2);
}

/// After a reload at U a changed trigger opens only windows with a nominal
/// time ≥ U — even across a downtime, where the unchanged schedule beside it
/// catches its missed windows up as always.
#[test]
fn a_changed_trigger_opens_only_windows_at_or_after_the_reload() {
    let v1 = format!(
        "{HEAD}{}{}",
        schedule("moved", "cron = \"30 * * * *\"", ""),
        schedule("steady", "cron = \"0 * * * *\"", "")
    );
    let mut rig = Rig::new(
        "2026-06-06T00:10:00Z",
        &v1,
        vec![("moved", quick()), ("steady", quick())],
    );
    rig.run_until(t("2026-06-06T02:40:00Z"));
    // Down from 02:40; the file changes meanwhile; back at U = 06:40.
    rig.engines.clear();
    let u = t("2026-06-06T06:40:00Z");
    rig.clock.set(u);
    rig.write(&v1.replace("cron = \"30 * * * *\"", "cron = \"15 * * * *\""));
    let path = rig.path.clone();
    rig.start("main", &path);
    rig.run_until(t("2026-06-06T08:00:00Z"));
    let store = rig.store();
    let moved: Vec<DateTime<Utc>> = runs(&store, "moved").iter().map(|r| r.window_start).collect();
    assert_eq!(
        moved,
        vec![
            t("2026-06-06T00:30:00Z"),
            t("2026-06-06T01:30:00Z"),
            t("2026-06-06T02:30:00Z"),
            t("2026-06-06T07:15:00Z"),
        ],
        "nothing of the new trigger before U, nothing of the old one after the edit"
    );
    let steady = runs(&store, "steady");
    let caught_up: Vec<&Run> = steady.iter().filter(|r| r.reason == RunReason::Catchup).collect();
    assert_eq!(caught_up.len(), 4, "03:00–06:00 caught up: {steady:?}");
}

/// A removed schedule's pending and retry-waiting runs end `skipped` with
/// "schedule removed in vN" (their events kept); its running attempt
/// finishes; it opens no window after the reload.
#[test]
fn a_removed_schedule_skips_its_waiting_runs_and_lets_running_attempts_finish() {
    let gone = schedule(
        "gone",
        "cron = \"0 * * * *\"",
        "overlap = \"buffer_all\"\nclose_after = \"5h\"",
    );
    let flaky = schedule(
        "flaky",
        "cron = \"0 * * * *\"",
        "retry = { max_attempts = 3, backoff = \"fixed\", initial = \"3h\", max = \"4h\" }",
    );
    let keep = schedule("keep", "cron = \"0 * * * *\"", "");
    let late = schedule(
        "late",
        "cron = \"0 * * * *\"",
        "overlap = \"buffer_all\"\nretry = { max_attempts = 3, backoff = \"fixed\", initial = \"1m\", max = \"1m\" }",
    );
    let v1 = format!("{HEAD}{gone}{flaky}{keep}{late}");
    let mut rig = Rig::new(
        "2026-06-06T00:50:00Z",
        &v1,
        vec![
            ("gone", agent(TimeDelta::minutes(100), SimEnd::Success)),
            (
                "flaky",
                agent(
                    TimeDelta::seconds(10),
                    SimEnd::Fail(agentcron::config::model::ErrorClass::Retryable),
                ),
            ),
            ("keep", quick()),
            (
                "late",
                agent(
                    TimeDelta::minutes(100),
                    SimEnd::Fail(agentcron::config::model::ErrorClass::Retryable),
                ),
            ),
        ],
    );
    rig.run_until(t("2026-06-06T02:10:00Z"));
    let store = rig.store();
    let before: Vec<RunState> = runs(&store, "gone").iter().map(|r| r.state).collect();
    assert_eq!(
        before,
        vec![RunState::Running, RunState::Pending],
        "01:00 runs, 02:00 waits its turn"
    );
    assert!(
        runs(&store, "flaky")
            .iter()
            .all(|r| r.state == RunState::RetryWait)
    );
    let waiting_events: Vec<usize> = runs(&store, "flaky")
        .iter()
        .map(|r| support::events(&store, r.id).len())
        .collect();
    rig.write(&format!("{HEAD}{keep}"));
    let ReloadOutcome::Applied { version, .. } = rig.hup() else {
        panic!("applied")
    };
    assert_eq!(version, 2);
    rig.run_until(t("2026-06-06T05:00:00Z"));
    let gone_runs = runs(&store, "gone");
    assert_eq!(gone_runs.len(), 2, "no window of a removed schedule opens");
    assert_eq!(
        gone_runs[0].state,
        RunState::Succeeded,
        "the running attempt finished"
    );
    assert_eq!(gone_runs[1].state, RunState::Skipped);
    assert_eq!(
        gone_runs[1].state_reason.as_deref(),
        Some("schedule removed in v2")
    );
    let flaky_runs = runs(&store, "flaky");
    assert_eq!(flaky_runs.len(), 2);
    for (r, n) in flaky_runs.iter().zip(waiting_events) {
        assert_eq!(
            (r.state, r.state_reason.as_deref()),
            (RunState::Skipped, Some("schedule removed in v2"))
        );
        let evs = support::events(&store, r.id);
        assert_eq!(evs.len(), n + 1, "events kept, one skipped added");
        let last = evs.last().unwrap();
        assert_eq!(
            (last.kind.as_str(), &last.detail["cause"]),
            ("skipped", &serde_json::json!("schedule_removed"))
        );
    }
    assert_eq!(
        runs(&store, "keep").len(),
        5,
        "the kept schedule runs on (01:00–05:00)"
    );
    // An attempt running at the removal that fails after it: no retry of a
    // removed schedule, its run ends skipped too.
    let late = runs(&store, "late");
    assert_eq!(late.len(), 2);
    for r in &late {
        assert_eq!(
            (r.state, r.state_reason.as_deref()),
            (RunState::Skipped, Some("schedule removed in v2")),
            "{}",
            r.window_key
        );
    }
    assert_eq!(
        late[0].attempts, 1,
        "the running attempt finished, no retry started"
    );
    let applied = config_events(&store, "config_applied");
    assert_eq!(
        applied.last().unwrap().detail["removed"],
        serde_json::json!(["flaky", "gone", "late"])
    );
}

/// A rename is a removal and an addition unless `previous_id` says it is the
/// same schedule: then it keeps its runs (a window that ran does not run
/// again) and its version; without it the new id is born at U.
#[test]
fn previous_id_keeps_history_and_a_plain_rename_is_born_at_the_reload() {
    let v1 = format!(
        "{HEAD}{}{}",
        schedule("old", "cron = \"0 * * * *\"", "close_after = \"2h\""),
        schedule("other", "cron = \"0 * * * *\"", "close_after = \"2h\"")
    );
    let agents = vec![
        ("old", quick()),
        ("new", quick()),
        ("other", quick()),
        ("fresh", quick()),
    ];
    let mut rig = Rig::new("2026-06-06T00:50:00Z", &v1, agents);
    rig.run_until(t("2026-06-06T02:30:00Z"));
    let store = rig.store();
    let old_ids: Vec<i64> = runs(&store, "old").iter().map(|r| r.id).collect();
    assert_eq!(old_ids.len(), 2);
    let v2 = v1
        .replace("id = \"old\"", "id = \"new\"\nprevious_id = \"old\"")
        .replace("id = \"other\"", "id = \"fresh\"");
    rig.write(&v2);
    let ReloadOutcome::Applied { changes, .. } = rig.hup() else {
        panic!("applied")
    };
    let kinds: Vec<(&str, agentcron::control::diff::ChangeKind)> =
        changes.iter().map(|c| (c.id.as_str(), c.kind)).collect();
    use agentcron::control::diff::ChangeKind::*;
    assert_eq!(
        kinds,
        vec![("new", Renamed), ("fresh", Added), ("other", Removed)]
    );
    let u = rig.clock.now();
    rig.run_until(t("2026-06-06T04:30:00Z"));
    let renamed = runs(&store, "new");
    assert_eq!(
        renamed.iter().take(2).map(|r| r.id).collect::<Vec<_>>(),
        old_ids,
        "its history moved with it"
    );
    assert_eq!(renamed.len(), 4, "01:00, 02:00 (once each), then 03:00, 04:00");
    assert!(renamed.iter().all(|r| r.attempts == 1));
    assert!(runs(&store, "old").is_empty());
    let (opened, _) = rig.version_of(&renamed[3]);
    assert_eq!(opened, Some(1), "same settings: same version");
    // The plain rename: `other` keeps its runs, `fresh` is born at U.
    assert_eq!(runs(&store, "other").len(), 2);
    let fresh = runs(&store, "fresh");
    assert!(fresh.iter().all(|r| r.window_start >= u), "{fresh:?}");
    assert_eq!(fresh.len(), 2);
    let born = store.read(|tx| tx.born_at("fresh")).unwrap();
    assert_eq!(born, Some(u));
}

/// An added schedule is born at U: no window before the reload is opened,
/// though its cron had fires earlier that day.
#[test]
fn an_added_schedule_is_born_at_the_reload() {
    let v1 = format!("{HEAD}{}", schedule("a", "cron = \"0 * * * *\"", ""));
    let mut rig = Rig::new("2026-06-06T00:30:00Z", &v1, vec![("a", quick()), ("b", quick())]);
    rig.run_until(t("2026-06-06T03:20:00Z"));
    rig.write(&format!(
        "{v1}{}",
        schedule("b", "cron = \"*/30 * * * *\"", "catchup = \"all\"")
    ));
    let u = rig.clock.now();
    assert!(matches!(rig.hup(), ReloadOutcome::Applied { version: 2, .. }));
    rig.run_until(t("2026-06-06T04:40:00Z"));
    let store = rig.store();
    let b: Vec<DateTime<Utc>> = runs(&store, "b").iter().map(|r| r.window_start).collect();
    assert_eq!(
        b,
        vec![
            t("2026-06-06T03:30:00Z"),
            t("2026-06-06T04:00:00Z"),
            t("2026-06-06T04:30:00Z")
        ]
    );
    assert_eq!(store.read(|tx| tx.born_at("b")).unwrap(), Some(u));
}

/// Validate first: a broken file is `config_rejected` with every error at
/// FILE:LINE:COL, and the running version keeps running, unchanged.
#[test]
fn a_broken_file_is_rejected_and_the_old_version_keeps_running() {
    let v1 = format!("{HEAD}{}", schedule("a", "cron = \"0 * * * *\"", ""));
    let mut rig = Rig::new("2026-06-06T00:30:00Z", &v1, vec![("a", quick())]);
    rig.run_until(t("2026-06-06T01:30:00Z"));
    rig.write(&v1.replace("cron = \"0 * * * *\"", "cron = \"0 * * * *\"\novrlap = \"skip\""));
    let ReloadOutcome::Rejected { errors } = rig.hup() else {
        panic!("rejected")
    };
    let at = format!("{}:", rig.path.display());
    assert!(
        errors.iter().any(|e| e.starts_with(&at) && e.contains("ovrlap")),
        "{errors:?}"
    );
    assert_eq!(rig.engine().config_version(), Some(1));
    rig.run_until(t("2026-06-06T03:30:00Z"));
    let store = rig.store();
    assert_eq!(runs(&store, "a").len(), 3, "still running v1");
    let rejected = config_events(&store, "config_rejected");
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].detail["kept_version"], 1);
    assert_eq!(store.read(|tx| tx.config_watch()).unwrap().0, Some(1));
    assert_eq!(
        store.read(|tx| tx.config_versions()).unwrap().len(),
        1,
        "nothing stored"
    );
}

/// Two schedulers of different stages on one database each run only their
/// own schedules; a change of a gated stage's trigger waits for
/// `approve-config` (the old trigger keeps running), then applies.
#[test]
fn stages_split_the_work_and_gated_changes_wait_for_approval() {
    let body = format!(
        "{}{}",
        schedule("p", "cron = \"0 * * * *\"", "stage = \"prod\""),
        schedule("s", "cron = \"0 * * * *\"", "stage = \"staging\"")
    );
    let head = HEAD.replace(
        "backfill_workers = 2\n",
        "backfill_workers = 2\nstages = [\"prod\"]\nrequire_approval_for = [\"prod\"]\n",
    );
    let prod = format!("{head}{body}");
    let mut rig = Rig::new(
        "2026-06-06T00:30:00Z",
        &prod,
        vec![("p", quick()), ("s", quick())],
    );
    let staging_path = rig.dir.path().join("staging.toml");
    std::fs::write(
        &staging_path,
        prod.replace("stages = [\"prod\"]", "stages = [\"staging\"]"),
    )
    .unwrap();
    rig.start("staging", &staging_path);
    rig.run_until(t("2026-06-06T02:30:00Z"));
    let store = rig.store();
    let owners = |id: &str| -> Vec<String> {
        runs(&store, id)
            .iter()
            .map(|r| {
                support::real::of_kind(&store, r.id, "claimed")[0].detail["owner"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(owners("p"), vec!["main", "main"]);
    assert_eq!(owners("s"), vec!["staging", "staging"]);
    // A gated change: p's cron. It waits; both schedulers keep the old one.
    rig.write(&prod.replace(
        "cron = \"0 * * * *\"\nstage = \"prod\"",
        "cron = \"30 * * * *\"\nstage = \"prod\"",
    ));
    let ReloadOutcome::Waiting { version } = rig.hup() else {
        panic!("waits")
    };
    rig.run_until(t("2026-06-06T03:40:00Z"));
    let p: Vec<DateTime<Utc>> = runs(&store, "p").iter().map(|r| r.window_start).collect();
    assert_eq!(
        p.last(),
        Some(&t("2026-06-06T03:00:00Z")),
        "the old trigger runs until approved"
    );
    // `status` says a change waits (the staging scheduler's file, which
    // differs in its `stages` line only, is the version running).
    let st = store
        .read(|tx| agentcron::status::status(tx, None, rig.clock.now()))
        .unwrap();
    assert_eq!(st.config_waiting, Some(version));
    assert_eq!(st.config.as_ref().map(|c| c.0), Some(version - 1));
    let err = control::approve(&store, version, "ops", "", rig.clock.now()).unwrap_err();
    assert!(err.to_string().contains("reason"));
    control::approve(&store, version, "ops", "reviewed", rig.clock.now()).unwrap();
    rig.run_until(t("2026-06-06T05:00:00Z"));
    let p: Vec<DateTime<Utc>> = runs(&store, "p").iter().map(|r| r.window_start).collect();
    assert_eq!(
        p[3..],
        [t("2026-06-06T04:30:00Z")],
        "approved at 03:40: the new trigger from then on, none of its windows before"
    );
    assert!(
        rig.engines.iter().all(|e| e.config_version() == Some(version)),
        "both converged"
    );
    assert_eq!(owners("s").iter().filter(|o| *o == "main").count(), 0);
    let again = control::approve(&store, version, "ops", "twice", rig.clock.now()).unwrap_err();
    assert!(again.to_string().contains("not waiting"), "{again}");
}

/// `rollback VERSION` re-applies an earlier version through the same path:
/// a new version with the old text, whose next fires are the ones `plan`
/// showed for that text.
#[test]
fn rollback_restores_the_earlier_version_and_the_fires_plan_showed() {
    let v1 = format!("{HEAD}{}", schedule("a", "cron = \"0 * * * *\"", ""));
    let mut rig = Rig::new("2026-06-06T00:30:00Z", &v1, vec![("a", quick())]);
    rig.run_until(t("2026-06-06T01:10:00Z"));
    rig.write(&v1.replace("0 * * * *", "45 * * * *"));
    assert!(matches!(rig.hup(), ReloadOutcome::Applied { version: 2, .. }));
    rig.run_until(t("2026-06-06T02:00:00Z"));
    let store = rig.store();
    // What `plan` says of v1's text against the database at v2.
    let old = load_str(&v1, &rig.path).unwrap();
    let preview = store
        .read(|tx| control::preview::preview(tx, &old, &v1, rig.clock.now()))
        .unwrap();
    assert_eq!(preview.current_version, Some(2));
    let fires = preview.schedules[0].fires_after.clone();
    // Applied at 02:00 exactly: a fire at the instant of the change is ≥ U.
    assert_eq!(fires[0], "2026-06-06T02:00:00.000Z");
    let (new, changes) = control::rollback(
        &store,
        1,
        "ops",
        "the 45 broke reports",
        &Default::default(),
        rig.clock.now(),
    )
    .unwrap();
    assert_eq!(new, 3);
    assert_eq!(
        changes[0].fields[0].to_string(),
        "cron \"45 * * * *\" → \"0 * * * *\""
    );
    rig.run_until(t("2026-06-06T04:10:00Z"));
    assert_eq!(rig.engine().config_version(), Some(3));
    let starts: Vec<String> = runs(&store, "a")
        .iter()
        .filter(|r| r.window_start >= t("2026-06-06T02:00:00Z"))
        .map(|r| agentcron::time::rfc3339(r.window_start))
        .collect();
    assert_eq!(starts, fires[..3], "the fires plan showed");
    let v3 = store.read(|tx| tx.config_version(3)).unwrap().unwrap();
    assert_eq!(v3.text, v1);
    assert_eq!(v3.note.as_deref(), Some("rollback to v1: the 45 broke reports"));
    assert!(
        control::rollback(&store, 3, "ops", "again", &Default::default(), rig.clock.now()).is_err(),
        "v3 runs already"
    );
    assert!(matches!(
        control::rollback(&store, 9, "ops", "x", &Default::default(), rig.clock.now()),
        Err(control::ControlError::NotFound(9))
    ));
}

/// The first version a database sees is applied as it is; the same text
/// again stores nothing; a comment changes the config version only.
#[test]
fn versions_are_stored_once_per_text_and_schedules_version_on_their_own_settings() {
    let v1 = format!("{HEAD}{}", schedule("a", "cron = \"0 * * * *\"", ""));
    let rig = Rig::new("2026-06-06T00:30:00Z", &v1, vec![("a", quick())]);
    let store = rig.store();
    let cfg = load_str(&v1, &rig.path).unwrap();
    let now = rig.clock.now();
    assert_eq!(
        control::propose(&store, &cfg, &v1, "x", now).unwrap(),
        Outcome::Unchanged { version: 1 }
    );
    let commented = format!("# a comment\n{v1}");
    let Outcome::Applied { version, changes } = control::propose(&store, &cfg, &commented, "x", now).unwrap()
    else {
        panic!("applied")
    };
    assert_eq!(version, 2);
    assert!(!control::diff::any_change(&changes));
    let current = store.read(|tx| tx.current_schedule_versions()).unwrap();
    assert_eq!(
        current["a"].version, 1,
        "the schedule's own settings did not change"
    );
}

/// `owner` routing: a schedule's alerts go to its owner's route in
/// `[alert.routes]`; an owner without a route (or no owner) falls back to the
/// default sink.
#[test]
fn alerts_go_to_the_owners_route_and_unknown_owners_to_the_default_sink() {
    let head = HEAD.replace(
        "backfill_workers = 2\n",
        "backfill_workers = 2\nalert = { kind = \"file\", path = \"alerts.jsonl\" }\n",
    );
    let routes = "\n[alert.routes]\n\"ops@acme.example\" = { kind = \"file\", path = \"ops.jsonl\" }\n";
    let text = format!(
        "{head}{routes}{}{}",
        schedule("routed", "cron = \"0 * * * *\"", "owner = \"ops@acme.example\""),
        schedule(
            "unrouted",
            "cron = \"0 * * * *\"",
            "owner = \"nobody@acme.example\""
        )
    );
    let fail = || {
        agent(
            TimeDelta::seconds(10),
            SimEnd::Fail(agentcron::config::model::ErrorClass::NonRetryable),
        )
    };
    let mut rig = Rig::new(
        "2026-06-06T00:50:00Z",
        &text,
        vec![("routed", fail()), ("unrouted", fail())],
    );
    rig.run_until(t("2026-06-06T01:10:00Z"));
    let lines = |file: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(rig.dir.path().join(file))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let ops = lines("ops.jsonl");
    let default = lines("alerts.jsonl");
    assert!(
        !ops.is_empty() && ops.iter().all(|a| a["schedule"] == "routed"),
        "{ops:?}"
    );
    assert!(
        !default.is_empty() && default.iter().all(|a| a["schedule"] == "unrouted"),
        "{default:?}"
    );
    assert_eq!(ops[0]["owner"], "ops@acme.example");
}

/// `[alert.routes]` entries are sinks like `[scheduler] alert`: a typo is an
/// error at its line and column.
#[test]
fn a_bad_alert_route_is_an_error_at_its_place() {
    let text = format!(
        "{HEAD}\n[alert.routes]\n\"ops@acme.example\" = {{ kind = \"webhok\", url = \"http://x\" }}\n{}",
        schedule("a", "cron = \"0 * * * *\"", "")
    );
    let err = load_str(&text, Path::new("/tmp/agentcron.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/tmp/agentcron.toml:") && err.contains("webhok"),
        "{err}"
    );
    let text = format!(
        "{HEAD}\n[alert]\nroute = {{}}\n{}",
        schedule("a", "cron = \"0 * * * *\"", "")
    );
    let err = load_str(&text, Path::new("/tmp/agentcron.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("route"), "{err}");
}

/// A run opened under one version and retried under the next says so, with
/// what changed in between — in `show`'s versions and in `explain`.
#[test]
fn a_retry_under_a_new_version_says_what_changed() {
    let v1 = format!(
        "{HEAD}{}",
        schedule(
            "r",
            "cron = \"0 * * * *\"",
            "retry = { max_attempts = 3, backoff = \"fixed\", initial = \"30m\", max = \"30m\" }"
        )
    );
    let script = SimAgent {
        attempts: vec![
            SimAttempt {
                latency: TimeDelta::seconds(10),
                end: SimEnd::Fail(agentcron::config::model::ErrorClass::Retryable),
                ..Default::default()
            },
            SimAttempt {
                latency: TimeDelta::seconds(10),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let mut rig = Rig::new("2026-06-06T00:50:00Z", &v1, vec![("r", script)]);
    rig.run_until(t("2026-06-06T01:10:00Z"));
    rig.write(&v1.replace("timeout = \"10h\"", "timeout = \"5h\""));
    assert!(matches!(rig.hup(), ReloadOutcome::Applied { version: 2, .. }));
    rig.run_until(t("2026-06-06T01:50:00Z"));
    let store = rig.store();
    let run = runs(&store, "r").remove(0);
    assert_eq!((run.state, run.attempts), (RunState::Succeeded, 2));
    let versions = store
        .read(|tx| control::versions::of_run(tx, run.id, "r"))
        .unwrap();
    assert_eq!(
        versions.summary,
        "opened under v1, retried under v2: agent.timeout \"10h\" → \"5h\""
    );
    let explained = store
        .read(|tx| agentcron::trace::explain(tx, None, "r", Some(&run.window_key), rig.clock.now()))
        .unwrap()
        .text();
    assert!(
        explained.contains("opened under v1, retried under v2"),
        "{explained}"
    );
}

/// A `previous_id` that names a schedule still in the file (a typo, or a
/// copy that kept the line) or the schedule itself is an error at its place.
#[test]
fn a_previous_id_that_names_a_schedule_still_in_the_file_is_an_error() {
    let text = format!(
        "{HEAD}{}{}",
        schedule("a", "cron = \"0 * * * *\"", ""),
        schedule("b", "cron = \"0 * * * *\"", "previous_id = \"a\"")
    );
    let err = load_str(&text, Path::new("/tmp/agentcron.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/tmp/agentcron.toml:")
            && err.contains("`previous_id = \"a\"` of schedule `b` names a schedule still in this file"),
        "{err}"
    );
    let own = format!(
        "{HEAD}{}",
        schedule("a", "cron = \"0 * * * *\"", "previous_id = \"a\"")
    );
    let err = load_str(&own, Path::new("/tmp/agentcron.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("is its own id"), "{err}");
}

/// A rename without `previous_id` is remove + add, and a reload that lands on
/// a fire instant the old name has already opened does not open that window
/// again under the new name (issue 44, item 11): one window, one run.
#[test]
fn a_plain_rename_at_a_fire_instant_runs_that_window_once() {
    let v1 = format!(
        "{HEAD}{}",
        schedule("other", "cron = \"0 * * * *\"", "close_after = \"2h\"")
    );
    let agents = vec![("other", quick()), ("fresh", quick())];
    let mut rig = Rig::new("2026-06-06T00:50:00Z", &v1, agents);
    // The tick at 03:00 opens (and runs) window 03:00 under `other`.
    rig.run_until(t("2026-06-06T03:00:00Z"));
    rig.write(&v1.replace("id = \"other\"", "id = \"fresh\""));
    assert!(matches!(rig.hup(), ReloadOutcome::Applied { .. }));
    rig.run_until(t("2026-06-06T05:30:00Z"));
    let store = rig.store();
    let windows =
        |s: &str| -> Vec<DateTime<Utc>> { runs(&store, s).iter().map(|r| r.window_start).collect() };
    assert_eq!(
        windows("other"),
        vec![
            t("2026-06-06T01:00:00Z"),
            t("2026-06-06T02:00:00Z"),
            t("2026-06-06T03:00:00Z")
        ]
    );
    assert_eq!(
        windows("fresh"),
        vec![t("2026-06-06T04:00:00Z"), t("2026-06-06T05:00:00Z")],
        "03:00 ran under `other` already"
    );
}

/// The other order at the same instant: a reload applied before the tick
/// that would open 03:00 leaves that window to the new name, once.
#[test]
fn a_plain_rename_before_a_fire_instant_runs_that_window_under_the_new_name() {
    let v1 = format!(
        "{HEAD}{}",
        schedule("other", "cron = \"0 * * * *\"", "close_after = \"2h\"")
    );
    let agents = vec![("other", quick()), ("fresh", quick())];
    let mut rig = Rig::new("2026-06-06T00:50:00Z", &v1, agents);
    rig.run_until(t("2026-06-06T02:59:59Z"));
    rig.clock.set(t("2026-06-06T03:00:00Z"));
    rig.write(&v1.replace("id = \"other\"", "id = \"fresh\""));
    assert!(matches!(rig.hup(), ReloadOutcome::Applied { .. }));
    rig.run_until(t("2026-06-06T04:30:00Z"));
    let store = rig.store();
    let windows =
        |s: &str| -> Vec<DateTime<Utc>> { runs(&store, s).iter().map(|r| r.window_start).collect() };
    assert_eq!(
        windows("other"),
        vec![t("2026-06-06T01:00:00Z"), t("2026-06-06T02:00:00Z")]
    );
    assert_eq!(
        windows("fresh"),
        vec![t("2026-06-06T03:00:00Z"), t("2026-06-06T04:00:00Z")]
    );
}
