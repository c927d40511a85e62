//! Window semantics through the real binary (`run --headless`, `event post`,
//! `trigger`): a short downtime catches up every window it missed; a brand-new
//! database opens no window from before the scheduler existed; posted events
//! and manual triggers are never dropped. These wait on the database (polling
//! with a deadline); the downtime is a real stop of the process.

mod support;

use agentcron::store::Store;
use agentcron::store::types::*;
use chrono::{DateTime, TimeDelta, Utc};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::process::{bin, cli, store, wait_within};

fn write_config(dir: &Path, schedules: &str) {
    std::fs::write(
        dir.join("agentcron.toml"),
        format!(
            r#"
[scheduler]
database = "test.db"
lease = "10s"
shutdown_grace = "5s"
workers = 4
backfill_workers = 2

[agents.quick]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; echo '{{\"event\":\"result\",\"status\":\"success\"}}'"]
timeout = "30s"
{schedules}"#
        ),
    )
    .unwrap();
}

fn start(dir: &Path, log: &str) -> Child {
    let log = std::fs::File::create(dir.join(log)).unwrap();
    Command::new(bin())
        .args(["run", "--headless", "--config"])
        .arg(dir.join("agentcron.toml"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn wait_for<T>(what: &str, limit: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_within(limit, what, f)
}

fn stop(child: &mut Child) {
    // SAFETY: kill(2) on the child we spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let _ = child.wait();
}

fn all_runs(s: &Store, schedule: &str) -> Vec<Run> {
    s.read(|tx| {
        tx.runs(&RunFilter {
            schedule: Some(schedule.into()),
            ..RunFilter::default()
        })
    })
    .unwrap()
}

fn events_of(s: &Store, kind: &str) -> Vec<Event> {
    s.read(|tx| {
        tx.events(&EventFilter {
            kinds: vec![kind.into()],
            ..EventFilter::default()
        })
    })
    .unwrap()
}

/// Reproduction 1: `every = "1s"`, default close_after, a scheduler stopped
/// for about 4 s and started again. Every window due while it was stopped is
/// caught up (one run each, succeeded, in order), none is skipped.
#[test]
fn a_short_downtime_of_the_real_scheduler_catches_up_its_windows() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "\n[[schedule]]\nid = \"tick\"\nagent = \"quick\"\nevery = \"1s\"\ncheck_every = \"1s\"\ncatchup = \"all\"\n",
    );
    let mut a = start(dir.path(), "a.log");
    wait_for("two windows run", Duration::from_secs(30), || {
        let s = store(dir.path())?;
        (all_runs(&s, "tick")
            .iter()
            .filter(|r| r.state == RunState::Succeeded)
            .count()
            >= 2)
            .then_some(())
    });
    stop(&mut a);
    let down = wait_for("the stop recorded", Duration::from_secs(10), || {
        let s = store(dir.path())?;
        events_of(&s, "scheduler_stopped").last().map(|e| e.at)
    });
    // Stay down until four more windows have come due.
    let back_after = down + TimeDelta::seconds(4);
    wait_for("four seconds of downtime", Duration::from_secs(20), || {
        (Utc::now() >= back_after).then_some(())
    });
    let mut b = start(dir.path(), "b.log");
    let up = wait_for("the restart", Duration::from_secs(20), || {
        let s = store(dir.path())?;
        let starts = events_of(&s, "scheduler_started");
        (starts.len() >= 2).then(|| starts[1].at)
    });
    let s = store(dir.path()).unwrap();
    wait_for("the downtime caught up", Duration::from_secs(60), || {
        let gap: Vec<Run> = all_runs(&s, "tick")
            .into_iter()
            .filter(|r| r.window_start > down && r.window_start < up)
            .collect();
        (gap.len() >= 3 && gap.iter().all(|r| r.state.is_terminal())).then_some(())
    });
    stop(&mut b);
    let runs = all_runs(&s, "tick");
    let gap: Vec<&Run> = runs
        .iter()
        .filter(|r| r.window_start > down && r.window_start < up)
        .collect();
    // One run per second of the downtime, each caught up and succeeded.
    let expected = (up - down).num_seconds();
    assert!(
        gap.len() as i64 >= expected - 1,
        "{} windows for {expected}s down",
        gap.len()
    );
    for w in gap.windows(2) {
        assert_eq!(
            w[1].window_start - w[0].window_start,
            TimeDelta::seconds(1),
            "no window lost"
        );
    }
    for r in &gap {
        assert_eq!(
            r.state,
            RunState::Succeeded,
            "{} {:?}",
            r.window_key,
            r.state_reason
        );
        assert_eq!(r.reason, RunReason::Catchup, "{}", r.window_key);
    }
    let skipped: Vec<&Run> = runs.iter().filter(|r| r.state == RunState::Skipped).collect();
    assert!(skipped.is_empty(), "nothing skipped: {skipped:?}");
    let planned = events_of(&s, "catchup_planned");
    let last = planned.last().expect("a catch-up plan after the restart");
    assert!(
        last.detail["summary"]["catch_up"].as_u64().unwrap() >= 3,
        "{}",
        last.detail
    );
}

/// Reproduction 2: a brand-new database opens no window from before the
/// scheduler's first start; the first window run is the first due at or after it.
#[test]
fn a_new_database_opens_no_window_from_before_its_first_start() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "\n[[schedule]]\nid = \"tick\"\nagent = \"quick\"\nevery = \"2s\"\ncheck_every = \"2s\"\nclose_after = \"1m\"\n",
    );
    let mut a = start(dir.path(), "a.log");
    let s = wait_for("a window run", Duration::from_secs(30), || {
        let s = store(dir.path())?;
        all_runs(&s, "tick")
            .iter()
            .any(|r| r.state == RunState::Succeeded)
            .then_some(s)
    });
    stop(&mut a);
    let born: DateTime<Utc> = events_of(&s, "scheduler_started")[0].at;
    let runs = all_runs(&s, "tick");
    assert!(!runs.is_empty());
    for r in &runs {
        assert!(
            r.window_start >= born - TimeDelta::milliseconds(1),
            "window {} is from before the first start at {born}",
            r.window_key
        );
        assert_ne!(
            r.state,
            RunState::Skipped,
            "{} {:?}",
            r.window_key,
            r.state_reason
        );
    }
    assert!(events_of(&s, "catchup_planned").is_empty(), "no gap at birth");
}

/// Reproduction 4: eleven events posted in a burst on an `on_event` schedule
/// and eleven manual triggers: every one runs, once; none is skipped for
/// overlap. And an event nobody listens to is refused (exit 1).
#[test]
fn posted_events_and_manual_triggers_are_never_dropped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("slow.sh"),
        "cat >/dev/null\nsleep 0.3\necho '{\"event\":\"result\",\"status\":\"success\"}'\n",
    )
    .unwrap();
    write_config(
        dir.path(),
        &format!(
            "\n[agents.slow]\nkind = \"command\"\ncommand = [\"sh\", \"{}\"]\ntimeout = \"30s\"\n\
             \n[[schedule]]\nid = \"on-deploy\"\nagent = \"slow\"\non_event = \"deploy\"\n\
             \n[[schedule]]\nid = \"manual\"\nagent = \"slow\"\nevery = \"24h\"\n",
            dir.path().join("slow.sh").display()
        ),
    );
    // The scheduler makes the ledger (a verb never does).
    let mut a = start(dir.path(), "a.log");
    wait_for("the database", Duration::from_secs(20), || store(dir.path()));
    let out = cli(dir.path(), &["event", "post", "deplyo", "--id", "x"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no schedule listens to event `deplyo`") && err.contains("deploy"),
        "{err}"
    );
    for i in 0..11 {
        let id = format!("d{i}");
        let out = cli(dir.path(), &["event", "post", "deploy", "--id", &id]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let key = format!("m{i}");
        let out = cli(dir.path(), &["trigger", "manual", "--window", &key]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("queued") && text.contains("expires unrun if it cannot start by"),
            "{text}"
        );
    }
    let s = store(dir.path()).unwrap();
    wait_for("all 22 runs to finish", Duration::from_secs(90), || {
        let done = |sched: &str| {
            all_runs(&s, sched)
                .iter()
                .filter(|r| r.state.is_terminal())
                .count()
        };
        (done("on-deploy") == 11 && done("manual") >= 11).then_some(())
    });
    stop(&mut a);
    for (sched, prefix) in [("on-deploy", "d"), ("manual", "m")] {
        let runs: Vec<Run> = all_runs(&s, sched)
            .into_iter()
            .filter(|r| r.window_key.starts_with(prefix))
            .collect();
        assert_eq!(runs.len(), 11, "{sched}");
        for r in &runs {
            assert_eq!(
                r.state,
                RunState::Succeeded,
                "{sched} {} {:?}",
                r.window_key,
                r.state_reason
            );
            assert_eq!(r.attempts, 1);
        }
    }
}
