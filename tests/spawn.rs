//! Starting agents (issue 47): many agents of one instant start through the
//! fork server and still die with their scheduler (kill -9), an agent whose
//! program does not exist fails with the OS error and never `started`, and
//! an attempt's `started` is the instant its runner reported the agent
//! running, not its claim. Waits poll with a deadline.

mod support;

use agentcron::agent::runner::{AgentRunner, AttemptHandle, AttemptReport, AttemptSignal, AttemptSpec};
use agentcron::config::load_str;
use agentcron::engine::{Engine, EngineOptions};
use agentcron::store::Store;
use agentcron::store::types::*;
use agentcron::time::clock::VirtualClock;
use chrono::{DateTime, TimeDelta, Utc};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::process::{Scheduler, cli, store, wait_within};
use tokio::sync::mpsc;

/// Alive and able to act: a zombie (or a process on its way out) is gone.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
}

fn pids_in(dir: &Path) -> Vec<i32> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

fn post(dir: &Path, id: &str) {
    let out = cli(dir, &["event", "post", "go", "--id", id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_hundred_agents_and_their_children_die_within_2_s_of_kill_9_of_their_scheduler() {
    const AGENTS: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("pids")).unwrap();
    // Each agent records its pid and its child's, in one file written whole.
    std::fs::write(
        d.join("agent.sh"),
        "sleep 60 &\nprintf '%s\\n%s\\n' $$ $! > pids/.$AGENTCRON_RUN_ID\n\
         mv pids/.$AGENTCRON_RUN_ID pids/$AGENTCRON_RUN_ID\nwait\n",
    )
    .unwrap();
    let mut toml = String::from(
        "[scheduler]\ndatabase = \"test.db\"\nworkers = 200\nlease = \"60s\"\n\n\
         [agents.sleeper]\nkind = \"command\"\ncommand = [\"sh\", \"agent.sh\"]\ntimeout = \"5m\"\n",
    );
    for i in 0..AGENTS {
        let _ = write!(
            toml,
            "\n[[schedule]]\nid = \"s{i:03}\"\nagent = \"sleeper\"\non_event = \"go\"\nclose_after = \"1h\"\n"
        );
    }
    std::fs::write(d.join("agentcron.toml"), toml).unwrap();
    let mut scheduler = Scheduler::headless(d, "scheduler.log");
    wait_within(Duration::from_secs(30), "the database", || store(d));
    post(d, "w1");
    let pids = wait_within(Duration::from_secs(60), "every agent and its child", || {
        let pids = pids_in(&d.join("pids"));
        (pids.len() == 2 * AGENTS).then_some(pids)
    });
    // SAFETY: kill(2) of our own child.
    unsafe {
        libc::kill(scheduler.0.id() as i32, libc::SIGKILL);
    }
    let _ = scheduler.0.wait();
    wait_within(
        Duration::from_secs(2),
        "every agent process gone 2 s after kill -9 of their scheduler",
        || pids.iter().all(|&p| !alive(p)).then_some(()),
    );
}

/// The children of `pid` whose command line contains `word`.
fn children_running(pid: u32, word: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            ppid == Some(pid) && String::from_utf8_lossy(&cmdline).contains(word)
        })
        .collect()
}

/// The first instant's agents do not wait for the fork server's exec: a live
/// scheduler starts it as its loop starts, with no agent due (none is until
/// an event is posted).
#[test]
fn a_live_scheduler_has_its_fork_server_before_its_first_agent_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("agentcron.toml"),
        "[scheduler]\ndatabase = \"test.db\"\n\n\
         [agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n\n\
         [[schedule]]\nid = \"later\"\nagent = \"a\"\non_event = \"go\"\nclose_after = \"1h\"\n",
    )
    .unwrap();
    let scheduler = Scheduler::headless(d, "scheduler.log");
    let pid = scheduler.0.id();
    wait_within(Duration::from_secs(30), "the scheduler's fork server", || {
        (!children_running(pid, "__spawner").is_empty()).then_some(())
    });
    let store = wait_within(Duration::from_secs(30), "the database", || store(d));
    let started = store
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["started".into()],
                ..EventFilter::default()
            })
        })
        .unwrap();
    assert!(started.is_empty(), "an agent started: {started:?}");
}

#[test]
fn an_agent_whose_program_does_not_exist_fails_with_the_os_error_and_never_started() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("agentcron.toml"),
        "[scheduler]\ndatabase = \"test.db\"\n\n\
         [agents.ghost]\nkind = \"command\"\ncommand = [\"/nonexistent/agentcron-ghost\"]\ntimeout = \"1m\"\n\n\
         [[schedule]]\nid = \"job\"\nagent = \"ghost\"\non_event = \"go\"\nclose_after = \"1h\"\n",
    )
    .unwrap();
    let _scheduler = Scheduler::headless(d, "scheduler.log");
    wait_within(Duration::from_secs(30), "the database", || store(d));
    post(d, "w1");
    let (run, attempt) = wait_within(Duration::from_secs(30), "the attempt to end", || {
        let s = store(d)?;
        let run = s.read(|tx| tx.runs(&RunFilter::default())).ok()?.pop()?;
        let attempt = s.read(|tx| tx.attempts(run.id)).ok()?.pop()?;
        attempt.ended_at.is_some().then_some((run, attempt))
    });
    assert_eq!(attempt.status, AttemptStatus::Failed);
    assert_eq!(
        attempt.error_class,
        Some(agentcron::config::model::ErrorClass::NonRetryable)
    );
    let message = attempt.message.clone().unwrap_or_default();
    assert!(
        message.contains("No such file or directory") && message.contains("/nonexistent/agentcron-ghost"),
        "{attempt:?}"
    );
    let kinds: Vec<String> = store(d)
        .unwrap()
        .read(|tx| {
            tx.events(&EventFilter {
                run_id: Some(run.id),
                ..EventFilter::default()
            })
        })
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(kinds.contains(&"claimed".to_string()), "{kinds:?}");
    assert!(!kinds.contains(&"started".to_string()), "{kinds:?}");
}

/// Keeps every start's report channel; reports nothing by itself.
type Started = (AttemptSpec, mpsc::UnboundedSender<AttemptReport>);

#[derive(Clone, Default)]
struct Later(Arc<Mutex<Vec<Started>>>);

impl AgentRunner for Later {
    fn start(&self, spec: AttemptSpec, reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        self.0.lock().unwrap().push((spec, reports));
        AttemptHandle::detached()
    }
}

fn events_of(store: &Store, run_id: i64, kind: &str) -> Vec<DateTime<Utc>> {
    store
        .read(|tx| {
            tx.events(&EventFilter {
                run_id: Some(run_id),
                kinds: vec![kind.into()],
                ..EventFilter::default()
            })
        })
        .unwrap()
        .into_iter()
        .map(|e| e.at)
        .collect()
}

#[test]
fn started_is_the_instant_the_runner_reports_the_agent_running_not_the_claim() {
    let dir = tempfile::tempdir().unwrap();
    let toml = "[scheduler]\ntimezone = \"UTC\"\nlease = \"60s\"\n\n\
                [agents.a]\nkind = \"command\"\ncommand = [\"true\"]\ntimeout = \"1m\"\n\n\
                [[schedule]]\nid = \"job\"\nagent = \"a\"\nevery = \"1m\"\nclose_after = \"1m\"\n";
    let cfg = load_str(toml, &dir.path().join("agentcron.toml")).unwrap();
    let store = Arc::new(Store::open(&dir.path().join("t.db")).unwrap());
    let clock = VirtualClock::new("2026-06-01T00:00:30Z".parse().unwrap());
    let runner = Later::default();
    let cfg = Arc::new(cfg);
    let mut engine = Engine::new(
        cfg.clone(),
        store.clone(),
        Arc::new(clock.clone()),
        Arc::new(runner.clone()),
        EngineOptions::default(),
    );
    engine.tick().unwrap();
    let claimed_at: DateTime<Utc> = "2026-06-01T00:01:00Z".parse().unwrap();
    clock.set(claimed_at);
    engine.tick().unwrap();
    let (spec, reports) = runner.0.lock().unwrap().pop().expect("the attempt was started");
    let run_id = spec.run_id;
    assert_eq!(events_of(&store, run_id, "claimed"), [claimed_at]);
    assert!(
        events_of(&store, run_id, "started").is_empty(),
        "`started` before the agent was reported running"
    );

    // The agent reports running 3 s (of the engine's clock) after its claim.
    let started_at = claimed_at + TimeDelta::seconds(3);
    clock.set(started_at);
    reports
        .send(AttemptReport {
            run_id,
            token: spec.token,
            signal: AttemptSignal::Started { at: Instant::now() },
        })
        .unwrap();
    assert_eq!(engine.drain_reports().unwrap(), 1);
    assert_eq!(events_of(&store, run_id, "started"), [started_at]);
    assert_eq!(events_of(&store, run_id, "claimed"), [claimed_at]);
    let attempts = store.read(|tx| tx.attempts(run_id)).unwrap();
    assert_eq!(attempts[0].started_at, started_at);
    // The start's lateness is the agent's (3 s after a claim on time), and
    // it is what `start_lateness` counts; the claim counts nothing.
    let rows = store
        .read(|tx| {
            tx.events(&EventFilter {
                run_id: Some(run_id),
                ..EventFilter::default()
            })
        })
        .unwrap();
    let started = rows.iter().find(|e| e.kind == "started").unwrap().event();
    assert!(
        matches!(
            started,
            agentcron::core::event::Event::Started {
                lateness_ms: Some(3000),
                ..
            }
        ),
        "{started:?}"
    );
    let counted: Vec<_> = rows
        .iter()
        .flat_map(|e| agentcron::trace::tally::tally(&e.event(), e.run_id))
        .filter_map(|c| match c {
            agentcron::trace::tally::Count::StartLateness(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(counted, [3.0]);
    // Explain tells when the agent really started.
    let story = store
        .read(|tx| agentcron::trace::explain(tx, Some(&cfg), "job", None, started_at))
        .unwrap()
        .text();
    assert!(
        story.contains("agent started 00:01:03, 3s after its claim"),
        "{story}"
    );

    // A second report of the same attempt changes nothing.
    clock.set(started_at + TimeDelta::seconds(5));
    reports
        .send(AttemptReport {
            run_id,
            token: spec.token,
            signal: AttemptSignal::Started { at: Instant::now() },
        })
        .unwrap();
    engine.drain_reports().unwrap();
    assert_eq!(events_of(&store, run_id, "started"), [started_at]);
    assert_eq!(
        store.read(|tx| tx.attempts(run_id)).unwrap()[0].started_at,
        started_at
    );
}
