//! Liveness through the real binary (issue 17): two headless schedulers on one
//! database, `kill -9` one — the other records `scheduler_lost` and alerts
//! once; the only scheduler killed — `status` exits 1 and says no scheduler is
//! alive within three heartbeats. Heartbeat 1 s here, so alive = seen
//! within 3 s. Everything polls the database or the CLI with a deadline.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::process::{Scheduler, bin, cli, wait_within};

const DEADLINE: Duration = Duration::from_secs(60);

fn write_config(dir: &Path) {
    std::fs::write(
        dir.join("agentcron.toml"),
        r#"
[scheduler]
database = "test.db"
lease = "10s"
shutdown_grace = "2s"
heartbeat = "1s"
alert = { kind = "file", path = "alerts.jsonl" }

[agents.quick]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; echo '{\"event\":\"result\",\"status\":\"success\"}'"]
timeout = "30s"

[[schedule]]
id = "every-second"
agent = "quick"
every = "1s"
"#,
    )
    .unwrap();
}

fn start(dir: &Path, log: &str) -> Scheduler {
    let log = std::fs::File::create(dir.join(log)).unwrap();
    Scheduler(
        Command::new(bin())
            .args(["run", "--headless", "--config"])
            .arg(dir.join("agentcron.toml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

fn status(dir: &Path) -> Option<(i32, Value)> {
    let out = cli(dir, &["status", "--json"]);
    let v = serde_json::from_slice(&out.stdout).ok()?;
    Some((out.status.code()?, v))
}

fn wait_for<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait_within(DEADLINE, what, f)
}

fn lost_events(dir: &Path) -> Vec<Value> {
    let out = cli(dir, &["events", "--kind", "scheduler_lost", "--json"]);
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap_or_default()
}

/// Alerts that `owner` was lost. (A survivor stalled on a loaded machine for
/// three heartbeats would be reported too, and come back: not counted here.)
fn lost_alerts(dir: &Path, owner: &str) -> usize {
    std::fs::read_to_string(dir.join("alerts.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"scheduler_lost\"") && l.contains(&format!("scheduler {owner} ")))
        .count()
}

fn lost_of(events: &[Value], owner: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["detail"]["owner"] == owner)
        .cloned()
        .collect()
}

#[test]
fn kill_9_one_of_two_schedulers_and_the_other_records_it_lost_and_alerts_once() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path());
    let mut a = start(dir.path(), "a.log");
    wait_for("the first scheduler alive", || {
        status(dir.path()).filter(|(_, v)| v["schedulers"]["alive"] == 1)
    });
    let _b = start(dir.path(), "b.log");
    let (code, both) = wait_for("two schedulers alive", || {
        status(dir.path()).filter(|(_, v)| v["schedulers"]["alive"] == 2)
    });
    assert_eq!(code, 0);
    let victim = both["schedulers"]["list"][0]["owner"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        victim.ends_with(&format!(":{}", a.0.id())),
        "the oldest row is the first scheduler: {both}"
    );

    a.0.kill().unwrap(); // SIGKILL: no clean stop, no last word
    a.0.wait().unwrap();
    let lost = wait_for("scheduler_lost", || {
        let e = lost_of(&lost_events(dir.path()), &victim);
        (!e.is_empty()).then_some(e)
    });
    assert_eq!(lost[0]["detail"]["owner"], victim.as_str());
    assert_ne!(lost[0]["detail"]["by"], victim.as_str());

    // Let the survivor heartbeat on for well over three more heartbeats: still
    // one loss recorded, one alert sent.
    let seen_then = |v: &Value| {
        v["schedulers"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["state"] == "alive")
            .and_then(|r| r["last_seen"].as_str().map(str::to_string))
    };
    let at_loss = wait_for("the survivor's heartbeat", || {
        status(dir.path()).and_then(|(_, v)| seen_then(&v))
    });
    let mut beats = 0;
    let mut last = at_loss;
    wait_for("four more heartbeats of the survivor", || {
        let now = status(dir.path()).and_then(|(_, v)| seen_then(&v))?;
        if now != last {
            beats += 1;
            last = now;
        }
        (beats >= 4).then_some(())
    });
    assert_eq!(
        lost_of(&lost_events(dir.path()), &victim).len(),
        1,
        "recorded once"
    );
    assert_eq!(lost_alerts(dir.path(), &victim), 1, "alerted once");
    let (code, v) = status(dir.path()).unwrap();
    assert_eq!(code, 0, "one scheduler is still alive: {v}");
    assert_eq!(
        (v["schedulers"]["alive"].clone(), v["schedulers"]["lost"].clone()),
        (1.into(), 1.into())
    );
    let row = v["schedulers"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["owner"] == victim.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["state"], "lost");
    assert_eq!(row["lost_by"], lost[0]["detail"]["by"]);
}

#[test]
fn kill_9_the_only_scheduler_and_status_says_none_is_alive_within_three_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path());
    let mut a = start(dir.path(), "a.log");
    wait_for("the scheduler alive", || {
        status(dir.path()).filter(|(code, _)| *code == 0)
    });
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    let killed = Instant::now();
    let (code, v) = wait_for("status exit 1", || {
        status(dir.path()).filter(|(code, _)| *code == 1)
    });
    // Three heartbeats of 1 s, plus the time a debug `status` takes to run.
    assert!(
        killed.elapsed() < Duration::from_secs(10),
        "{:?}",
        killed.elapsed()
    );
    assert_eq!(code, 1);
    assert_eq!(v["schedulers"]["alive"], 0);
    assert!(v["no_scheduler_alive"]["last_seen"].is_string(), "{v}");
    let text = cli(dir.path(), &["status"]);
    assert_eq!(text.status.code(), Some(1));
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(out.contains("NO SCHEDULER ALIVE: last seen"), "{out}");
    // Nobody is left to record the loss: no scheduler_lost, no alert.
    assert!(lost_events(dir.path()).is_empty());
    // Windows keep falling due: status counts them and marks the schedule overdue.
    let (_, v) = wait_for("an overdue window", || {
        status(dir.path()).filter(|(_, v)| v["no_scheduler_alive"]["windows_due_since"].as_u64() > Some(0))
    });
    assert_eq!(v["schedules"][0]["id"], "every-second");
    assert!(v["schedules"][0]["overdue"]["due"].is_string(), "{v}");
}
