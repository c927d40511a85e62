//! A tick with many due runs claims them a chunk per transaction and starts
//! each chunk's agents right after its commit: the first agents start before
//! the last runs are decided, and no agent ever starts on a claim that is not
//! yet committed (another connection to the file already sees it running).

use agentcron::agent::runner::{AgentRunner, AttemptHandle, AttemptReport, AttemptSignal, AttemptSpec};
use agentcron::config::load_str;
use agentcron::engine::{Engine, EngineOptions};
use agentcron::store::Store;
use agentcron::store::types::{AttemptStatus, EventFilter, NewRun, Pool, RunFilter, RunReason, RunState};
use agentcron::time::clock::VirtualClock;
use chrono::{DateTime, TimeDelta, Utc};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// What another connection saw when an agent started: (its run was running
/// there, how many runs were running there, how many runs there were).
type Seen = Arc<Mutex<Vec<(bool, u64, u64)>>>;

/// Looks at the database through a connection of its own at every start, and
/// never reports (the attempts stay running).
struct Watching {
    db: PathBuf,
    seen: Seen,
}

impl AgentRunner for Watching {
    fn start(&self, spec: AttemptSpec, _reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        let other = Store::open(&self.db).unwrap();
        let (mine, running, all) = other
            .read(|tx| {
                let mine = tx.run(spec.run_id)?.state == RunState::Running;
                let counts = tx.count_by_state()?;
                let running = counts
                    .iter()
                    .find(|(s, _)| *s == RunState::Running)
                    .map_or(0, |(_, n)| *n);
                Ok((mine, running, counts.iter().map(|(_, n)| *n).sum()))
            })
            .unwrap();
        self.seen.lock().unwrap().push((mine, running, all));
        AttemptHandle::detached()
    }
}

/// The config's `[scheduler]` and agent, `workers` of them, then `rest`.
fn config(workers: u32, rest: &str) -> String {
    format!(
        "[scheduler]\ntimezone = \"UTC\"\nworkers = {workers}\nlease = \"60s\"\n\n\
         [agents.noop]\nkind = \"command\"\ncommand = [\"true\"]\ntimeout = \"1m\"\n{rest}"
    )
}

/// The kinds of run `run_id`'s events, oldest first.
fn kinds(store: &Store, run_id: i64) -> Vec<String> {
    let events = store.read(|tx| {
        tx.events(&EventFilter {
            run_id: Some(run_id),
            ..EventFilter::default()
        })
    });
    events.unwrap().into_iter().map(|e| e.kind).collect()
}

/// `schedules` schedules every minute, and workers for all of them.
fn every_minute(schedules: usize) -> String {
    let mut toml = config(1000, "");
    for i in 0..schedules {
        let _ = write!(
            toml,
            "\n[[schedule]]\nid = \"s{i:04}\"\nagent = \"noop\"\nevery = \"1m\"\nclose_after = \"1m\"\n"
        );
    }
    toml
}

/// An engine on `toml` with the file database `chunks.db`, a virtual clock
/// at 00:00:30 and the agents of `runner(the database's path)`.
fn engine_with(
    dir: &tempfile::TempDir,
    toml: &str,
    runner: impl FnOnce(PathBuf) -> Arc<dyn AgentRunner>,
    opts: EngineOptions,
) -> (Arc<Store>, VirtualClock, Engine) {
    let cfg = load_str(toml, &dir.path().join("agentcron.toml")).unwrap();
    let db = dir.path().join("chunks.db");
    let store = Arc::new(Store::open(&db).unwrap());
    let clock = VirtualClock::new("2026-06-01T00:00:30Z".parse().unwrap());
    let engine = Engine::new(
        Arc::new(cfg),
        store.clone(),
        Arc::new(clock.clone()),
        runner(db),
        opts,
    );
    (store, clock, engine)
}

/// [`engine_with`] the watching agent recording into `seen`.
fn engine(
    dir: &tempfile::TempDir,
    toml: &str,
    seen: &Seen,
    opts: EngineOptions,
) -> (Arc<Store>, VirtualClock, Engine) {
    let seen = seen.clone();
    engine_with(dir, toml, |db| Arc::new(Watching { db, seen }), opts)
}

#[test]
fn a_big_tick_starts_agents_chunk_by_chunk_and_only_on_committed_claims() {
    const SCHEDULES: u64 = 600;
    let dir = tempfile::tempdir().unwrap();
    let toml = every_minute(SCHEDULES as usize);
    let seen: Seen = Arc::default();
    let opts = EngineOptions {
        record_claim_commits: true,
        ..EngineOptions::default()
    };
    let (_store, clock, mut engine) = engine(&dir, &toml, &seen, opts);
    engine.tick().unwrap();
    // The first evaluation: every schedule is born now, nothing is due yet.
    assert!(seen.lock().unwrap().is_empty());
    clock.set("2026-06-01T00:01:00Z".parse().unwrap());
    engine.tick().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len() as u64,
        SCHEDULES,
        "every due window was claimed and started in one tick"
    );
    assert!(
        seen.iter().all(|(mine, _, _)| *mine),
        "an agent started on a claim another connection could not see yet"
    );
    let first = seen[0].1;
    assert!(
        first < SCHEDULES,
        "the first agent started only after all {SCHEDULES} claims had committed"
    );
    // Chunk by chunk: what the other connection sees only grows, in a few steps.
    assert!(seen.windows(2).all(|w| w[0].1 <= w[1].1));
    let mut steps: Vec<u64> = seen.iter().map(|(_, n, _)| *n).collect();
    steps.dedup();
    assert!(steps.len() >= 2, "claims committed in one piece: {steps:?}");
    assert_eq!(steps.last(), Some(&SCHEDULES));
    // Opened with them: the first agents start before the last windows are
    // even opened, and every run there is then is claimed.
    assert!(
        seen[0].2 < SCHEDULES,
        "all {SCHEDULES} windows were opened before the first claim committed"
    );
    assert!(seen.iter().all(|(_, running, all)| running == all));
    // Every claim's commit is kept for the lateness bench: all due at 00:01,
    // committed then (a virtual clock does not move inside a tick).
    let commits = engine.claim_commits();
    assert_eq!(commits.len() as u64, SCHEDULES);
    let due: DateTime<Utc> = "2026-06-01T00:01:00Z".parse().unwrap();
    assert!(
        commits.iter().all(|(d, c)| *d == due && *c == due),
        "{:?}",
        &commits[..3]
    );
}

/// Windows opening now are decided in the transaction that opens them only
/// when no other on-time run is due: a run due before them keeps its turn.
#[test]
fn a_run_due_before_the_windows_opening_now_keeps_its_turn_at_a_quota() {
    let dir = tempfile::tempdir().unwrap();
    let mut toml = config(10, "\n[tenants.t]\nmax_concurrent = 1\n");
    for id in ["a", "b"] {
        let _ = write!(
            toml,
            "\n[[schedule]]\nid = \"{id}\"\ntenant = \"t\"\nagent = \"noop\"\nevery = \"1m\"\nclose_after = \"1m\"\n"
        );
    }
    let (store, clock, mut engine) = engine(&dir, &toml, &Arc::default(), EngineOptions::default());
    engine.tick().unwrap();
    // A run of `a` due at 00:00:50, not yet decided when 00:01 comes.
    let early: DateTime<Utc> = "2026-06-01T00:00:50Z".parse().unwrap();
    let manual = store
        .write(|tx| {
            tx.insert_run(
                &NewRun {
                    tenant: "t".into(),
                    schedule: "a".into(),
                    window_key: "manual-1".into(),
                    window_start: early,
                    window_end: early + TimeDelta::minutes(5),
                    due_at: early,
                    state: RunState::Pending,
                    reason: RunReason::Manual,
                    pool: Pool::OnTime,
                    state_reason: None,
                    next_check_at: Some(early),
                },
                early,
            )
        })
        .unwrap()
        .unwrap();
    clock.set("2026-06-01T00:01:00Z".parse().unwrap());
    engine.tick().unwrap();
    let runs = store.read(|tx| tx.runs(&RunFilter::default())).unwrap();
    let running: Vec<&str> = runs
        .iter()
        .filter(|r| r.state == RunState::Running)
        .map(|r| r.window_key.as_str())
        .collect();
    assert_eq!(running, ["manual-1"], "the earlier run lost its turn: {runs:?}");
    assert_eq!(
        store.read(|tx| tx.run(manual.id)).unwrap().state,
        RunState::Running
    );
    assert_eq!(runs.len(), 3, "both windows of 00:01 were opened");
}

/// Starts nothing and never reports (the attempts stay running); counts the starts.
struct Detached(Arc<std::sync::atomic::AtomicUsize>);

impl AgentRunner for Detached {
    fn start(&self, _spec: AttemptSpec, _reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        AttemptHandle::detached()
    }
}

/// A quota counts the claims of the instant's earlier chunks: 600 windows of
/// one tenant due at once (three chunks) and a tenant cap of 300 (past the
/// first chunk's 256) claim exactly 300 and hold the rest for the quota.
#[test]
fn a_tenant_quota_counts_the_claims_of_the_instants_earlier_chunks() {
    const SCHEDULES: usize = 600;
    const CAP: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let mut toml = config(1000, &format!("\n[tenants.t]\nmax_concurrent = {CAP}\n"));
    for i in 0..SCHEDULES {
        let _ = write!(
            toml,
            "\n[[schedule]]\nid = \"s{i:04}\"\ntenant = \"t\"\nagent = \"noop\"\nevery = \"1m\"\nclose_after = \"1m\"\n"
        );
    }
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let runner = {
        let started = started.clone();
        move |_db: PathBuf| Arc::new(Detached(started)) as Arc<dyn AgentRunner>
    };
    let (store, clock, mut engine) = engine_with(&dir, &toml, runner, EngineOptions::default());
    engine.tick().unwrap();
    clock.set("2026-06-01T00:01:00Z".parse().unwrap());
    engine.tick().unwrap();

    let runs = store.read(|tx| tx.runs(&RunFilter::default())).unwrap();
    assert_eq!(runs.len(), SCHEDULES, "every due window was opened");
    let running = runs.iter().filter(|r| r.state == RunState::Running).count();
    assert_eq!(running, CAP, "claims past the tenant's cap (or short of it)");
    assert_eq!(started.load(std::sync::atomic::Ordering::Relaxed), CAP);
    let held: Vec<_> = runs.iter().filter(|r| r.state != RunState::Running).collect();
    assert!(
        held.iter().all(|r| r.state == RunState::Pending
            && r.state_reason
                .as_deref()
                .is_some_and(|why| why.contains("tenant t at 300/300"))),
        "a window over the cap is not held by the quota: {:?}",
        held.first()
    );
}

/// What another connection saw of a run when its agent started: how many
/// attempt rows it had there, and the kinds of its events.
type RowsSeen = Arc<Mutex<Vec<(usize, Vec<String>)>>>;

/// Looks at the agent's own run through a connection of its own at every
/// start, and never reports.
struct RowsAtStart {
    db: PathBuf,
    seen: RowsSeen,
}

impl AgentRunner for RowsAtStart {
    fn start(&self, spec: AttemptSpec, reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        let other = Store::open(&self.db).unwrap();
        let rows = other
            .read(|tx| {
                let events = tx.events(&EventFilter {
                    run_id: Some(spec.run_id),
                    ..EventFilter::default()
                })?;
                let kinds = events.into_iter().map(|e| e.kind).collect();
                Ok((tx.attempts(spec.run_id)?.len(), kinds))
            })
            .unwrap();
        self.seen.lock().unwrap().push(rows);
        let _ = reports.send(AttemptReport {
            run_id: spec.run_id,
            token: spec.token,
            signal: AttemptSignal::Started {
                at: std::time::Instant::now(),
            },
        });
        AttemptHandle::detached()
    }
}

/// A chunk's commit holds its claims with their attempt rows and their
/// whole trace: another connection sees each run's attempt row and its
/// `window_opened`, `decision` and `claimed` events before its agent
/// starts (a scheduler that dies once an agent runs leaves its claim
/// traced), and after the tick every claim has its attempt (with the
/// envelope its agent received) and its `claimed` and `started` events.
#[test]
fn a_big_tick_commits_its_claims_attempt_and_trace_rows_before_their_agents_start() {
    const SCHEDULES: usize = 600;
    let dir = tempfile::tempdir().unwrap();
    let seen: RowsSeen = Arc::default();
    let rows_seen = seen.clone();
    let (_store, clock, mut engine) = engine_with(
        &dir,
        &every_minute(SCHEDULES),
        |db| Arc::new(RowsAtStart { db, seen: rows_seen }),
        EngineOptions::default(),
    );
    let db = dir.path().join("chunks.db");
    engine.tick().unwrap();
    clock.set("2026-06-01T00:01:00Z".parse().unwrap());
    engine.tick().unwrap();
    // The agents say they run: their `started` events.
    assert_eq!(engine.drain_reports().unwrap(), SCHEDULES);

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), SCHEDULES, "every due window was claimed and started");
    let traced = |(attempts, kinds): &(usize, Vec<String>)| {
        *attempts == 1 && kinds.as_slice() == ["window_opened", "decision", "claimed"]
    };
    assert!(
        seen.iter().all(traced),
        "an agent started before its claim's attempt or trace rows committed: {:?}",
        seen.iter().filter(|r| !traced(r)).take(3).collect::<Vec<_>>()
    );
    // After the tick, on another connection: every claim's rows are there.
    let other = Store::open(&db).unwrap();
    let runs = other.read(|tx| tx.runs(&RunFilter::default())).unwrap();
    assert_eq!(runs.len(), SCHEDULES);
    for run in &runs {
        assert_eq!(run.state, RunState::Running);
        let attempts = other.read(|tx| tx.attempts(run.id)).unwrap();
        assert_eq!(attempts.len(), 1, "run {}", run.id);
        assert_eq!(attempts[0].fencing_token, run.fencing_token);
        let envelope: serde_json::Value =
            serde_json::from_str(attempts[0].envelope.as_deref().expect("the envelope is stored")).unwrap();
        assert_eq!(envelope["run_id"], run.id);
        let kinds = kinds(&other, run.id);
        for kind in ["claimed", "started"] {
            assert_eq!(
                kinds.iter().filter(|k| *k == kind).count(),
                1,
                "run {}: {kinds:?}",
                run.id
            );
        }
    }
}

/// An engine on one hourly schedule `report` (retried every minute, three
/// attempts) that has had its first tick at 00:00:30.
fn one_hourly_schedule() -> (tempfile::TempDir, Arc<Store>, VirtualClock, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let toml = config(
        10,
        "\n[[schedule]]\nid = \"report\"\nagent = \"noop\"\nevery = \"1h\"\nclose_after = \"1h\"\n\
         retry = { max_attempts = 3, backoff = \"fixed\", initial = \"1m\", max = \"1m\", jitter = 0.0 }\n",
    );
    let (store, clock, mut engine) = engine(&dir, &toml, &Arc::default(), EngineOptions::default());
    engine.tick().unwrap();
    (dir, store, clock, engine)
}

/// A window of `report` due at 00:00 claimed by another scheduler ("other",
/// lease to 00:01) on its own connection, its attempt row then removed as an
/// earlier build (which wrote a claim's attempt and trace rows in a later
/// transaction) left it when it died in between: that connection and the
/// claim.
fn claimed_by_another(dir: &tempfile::TempDir) -> (Store, agentcron::store::types::Claim) {
    let due: DateTime<Utc> = "2026-06-01T00:00:00Z".parse().unwrap();
    let other = Store::open(&dir.path().join("chunks.db")).unwrap();
    let claim = other
        .batch(|| {
            other.write(|tx| {
                let new = NewRun {
                    tenant: "default".into(),
                    schedule: "report".into(),
                    window_key: "manual-1".into(),
                    window_start: due,
                    window_end: due + TimeDelta::hours(1),
                    due_at: due,
                    state: RunState::Pending,
                    reason: RunReason::Manual,
                    pool: Pool::OnTime,
                    state_reason: None,
                    next_check_at: Some(due),
                };
                let run = tx.insert_run(&new, due)?.expect("a new window");
                let lease = "2026-06-01T00:01:00Z".parse().unwrap();
                Ok(tx
                    .claim(
                        run.id,
                        RunState::Pending,
                        "other",
                        lease,
                        RunReason::Manual,
                        due,
                        due,
                    )?
                    .expect("claimed"))
            })
        })
        .unwrap();
    let raw = rusqlite::Connection::open(dir.path().join("chunks.db")).unwrap();
    raw.execute("DELETE FROM attempts WHERE run_id = ?1", [claim.run.id])
        .unwrap();
    (other, claim)
}

/// A ledger an earlier build left with a running run without an attempt
/// row (its scheduler died after the claim committed and before the row was
/// written). Once its lease (and the takeover grace) is past,
/// the lost-lease sweep writes that attempt as lost, saying its rows were
/// never written, and the recovery rules schedule a retry.
#[test]
fn a_claim_whose_attempt_row_was_never_written_is_swept_lost_and_retried() {
    let (dir, store, clock, mut engine) = one_hourly_schedule();
    // Another scheduler's claim of a window, as it committed before it died.
    let (_, claim) = claimed_by_another(&dir);
    let run_id = claim.run.id;
    assert!(store.read(|tx| tx.attempts(run_id)).unwrap().is_empty());
    clock.set("2026-06-01T00:05:00Z".parse().unwrap());
    engine.tick().unwrap();

    let attempts = store.read(|tx| tx.attempts(run_id)).unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let lost = &attempts[0];
    assert_eq!(lost.status, AttemptStatus::Lost);
    assert_eq!((lost.n, lost.fencing_token), (1, claim.fencing_token));
    assert_eq!(lost.owner, "other");
    assert!(lost.ended_at.is_some());
    let message = lost.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("expired") && message.contains("were not written before its scheduler stopped"),
        "{message}"
    );
    let run = store.read(|tx| tx.run(run_id)).unwrap();
    assert_eq!(run.state, RunState::RetryWait, "{run:?}");
    let kinds = kinds(&store, run_id);
    for kind in ["lost", "retry_scheduled"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind}: {kinds:?}");
    }
}
