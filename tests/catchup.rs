//! Catch-up after downtime and clock jumps (DESIGN.md "Catch-up"), on a virtual
//! clock with simulated agents.

#[path = "store_support.rs"]
mod store_support;
mod support;

use agentcron::rehearsal::driver::Driver;
use agentcron::rehearsal::sim::SimAttempt;
use agentcron::store::types::*;
use chrono::{DateTime, TimeDelta, Utc};
use support::*;

/// The catch-up window of every schedule in these tests.
const CATCHUP_WINDOW: TimeDelta = TimeDelta::hours(36);

fn config_for(policy: &str) -> String {
    format!(
        r#"{BASE}
[[schedule]]
id = "five"
agent = "sim"
every = "5m"
close_after = "5m"
check_every = "1m"
catchup = "{policy}"
catchup_window = "36h"
overlap = "allow"
max_concurrency = 4

[[schedule]]
id = "hourly"
agent = "sim"
cron = "0 * * * *"
close_after = "10m"
catchup = "{policy}"
catchup_window = "36h"

[[schedule]]
id = "daily"
agent = "sim"
cron = "0 9 * * *"
close_after = "1h"
catchup = "{policy}"
catchup_window = "36h"
"#
    )
}

fn agents() -> Vec<(&'static str, agentcron::rehearsal::sim::SimAgent)> {
    let quick = || {
        sim_agent(vec![SimAttempt {
            latency: TimeDelta::seconds(30),
            ..Default::default()
        }])
    };
    vec![("five", quick()), ("hourly", quick()), ("daily", quick())]
}

struct Outage {
    down: DateTime<Utc>,
    up: DateTime<Utc>,
    end: DateTime<Utc>,
    store: agentcron::store::Store,
}

/// Up from 2026-06-01 00:00Z, down at 01:30Z for exactly 72 h, restarted
/// (nothing run yet at the restart instant): (dir, driver, down, up).
fn restarted(policy: &str) -> (tempfile::TempDir, Driver, DateTime<Utc>, DateTime<Utc>) {
    restarted_with(&config_for(policy))
}

/// [`restarted`] with the config `toml`.
fn restarted_with(toml: &str) -> (tempfile::TempDir, Driver, DateTime<Utc>, DateTime<Utc>) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, toml);
    let mut d = driver(&dir, cfg, "2026-06-01T00:00:00Z", agents(), vec![]);
    let (down, up) = down_for(&mut d, TimeDelta::hours(72));
    (dir, d, down, up)
}

/// Runs `d` to 01:30Z, crashes it, jumps the clock by `outage` and
/// restarts it (nothing run yet at the restart instant): (down, up).
fn down_for(d: &mut Driver, outage: TimeDelta) -> (DateTime<Utc>, DateTime<Utc>) {
    let down = t("2026-06-01T01:30:00Z");
    d.run_until(down).unwrap();
    d.crash("main");
    let up = down + outage;
    d.jump_clock(up).unwrap();
    d.restart("main").unwrap();
    (down, up)
}

/// The 72 h outage of [`restarted`], then up again for 8 h.
fn outage(policy: &str) -> (tempfile::TempDir, Outage) {
    let (dir, mut d, down, up) = restarted(policy);
    let end = up + TimeDelta::hours(8);
    d.run_until(end).unwrap();
    let store = d.store().unwrap();
    (dir, Outage { down, up, end, store })
}

/// After the drain: no range is left, "five" has each planned window once,
/// and each window of the outage is expired (older than the catch-up window
/// at the restart) or succeeded. Returns the ones that succeeded.
fn drained_five(
    store: &agentcron::store::Store,
    down: DateTime<Utc>,
    up: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Vec<Run> {
    assert_eq!(store.read(|tx| tx.backlogs()).unwrap(), vec![], "all queued");
    let five = runs(store, "five");
    let starts: Vec<DateTime<Utc>> = five.iter().map(|r| r.window_start).collect();
    assert_eq!(starts, planned_starts("five", end), "each window once");
    let mut ran = vec![];
    for r in five
        .into_iter()
        .filter(|r| r.window_start > down && r.window_end <= up)
    {
        let what = format!("{} {:?} {:?}", r.window_key, r.state, r.state_reason);
        if r.window_start + CATCHUP_WINDOW <= up {
            assert_eq!(r.state, RunState::Expired, "{what}");
        } else {
            assert_eq!(r.state, RunState::Succeeded, "{what}");
            ran.push(r);
        }
    }
    ran
}

/// Every window start each schedule should have from the start of the test to
/// `end`: computed here from the triggers, independently of the engine.
fn planned_starts(schedule: &str, end: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let (first, step) = match schedule {
        "five" => (t("2026-06-01T00:00:00Z"), TimeDelta::minutes(5)),
        "hourly" => (t("2026-06-01T00:00:00Z"), TimeDelta::hours(1)),
        // 09:00 Asia/Shanghai.
        "daily" => (t("2026-06-01T01:00:00Z"), TimeDelta::days(1)),
        other => panic!("{other}"),
    };
    let mut out = vec![];
    let mut at = first;
    while at <= end {
        out.push(at);
        at += step;
    }
    out
}

/// A window of the outage: opened while the scheduler was down and closed
/// before it came back.
fn in_gap(o: &Outage, r: &Run) -> bool {
    r.window_start > o.down && r.window_end <= o.up
}

fn expired_by_rule(o: &Outage, r: &Run) -> bool {
    r.window_start + CATCHUP_WINDOW <= o.up
}

fn claimed_at(store: &agentcron::store::Store, run: &Run) -> Option<DateTime<Utc>> {
    events(store, run.id)
        .into_iter()
        .find(|e| e.kind == "claimed")
        .map(|e| e.at)
}

/// Exactly the planned windows, each once, and the outage's windows in the
/// state the policy gives them; windows too old are expired, never run.
fn check_policy(policy: &str) -> Outage {
    let (_dir, o) = outage(policy);
    for sched in ["five", "hourly", "daily"] {
        let runs = runs(&o.store, sched);
        let starts: Vec<DateTime<Utc>> = runs.iter().map(|r| r.window_start).collect();
        assert_eq!(
            starts,
            planned_starts(sched, o.end),
            "{sched}: the planned windows, each once"
        );
        let gap: Vec<&Run> = runs.iter().filter(|r| in_gap(&o, r)).collect();
        assert!(!gap.is_empty(), "{sched}");
        let (expired, recent): (Vec<&Run>, Vec<&Run>) = gap.iter().partition(|r| expired_by_rule(&o, r));
        for r in &expired {
            assert_eq!(r.state, RunState::Expired, "{policy} {sched} {}", r.window_key);
            assert_eq!(r.attempts, 0);
        }
        // "latest": the newest window due by the restart runs (which may be the
        // one due at the restart instant itself); the older ones are coalesced.
        let newest = runs.iter().map(|r| r.window_start).filter(|s| *s <= o.up).max();
        for r in &recent {
            let what = format!("{policy} {sched} {}: {:?}", r.window_key, r.state_reason);
            match policy {
                "all" => {
                    assert_eq!((r.reason, r.pool), (RunReason::Catchup, Pool::Backfill), "{what}");
                    assert_eq!(r.state, RunState::Succeeded, "{what}");
                }
                "latest" if Some(r.window_start) == newest => {
                    assert_eq!(r.state, RunState::Succeeded, "{what}");
                    assert_eq!(r.attempts, 1, "{what}");
                }
                "latest" => {
                    assert_eq!(r.state, RunState::Skipped, "{what}");
                    assert!(
                        r.state_reason.as_deref().unwrap().starts_with("coalesced"),
                        "{what}"
                    );
                }
                "none" => {
                    assert_eq!(r.state, RunState::Skipped, "{what}");
                    assert_eq!(r.attempts, 0, "{what}");
                    assert!(r.state_reason.is_some(), "{what}");
                }
                other => panic!("{other}"),
            }
        }
        // Everything before the outage and after the restart ran on time.
        for r in runs
            .iter()
            .filter(|r| r.window_end <= o.down || r.window_start >= o.up)
        {
            if r.window_end <= o.end {
                assert_eq!(r.state, RunState::Succeeded, "{policy} {sched} {}", r.window_key);
                assert_eq!(
                    r.reason,
                    RunReason::Scheduled,
                    "{policy} {sched} {}",
                    r.window_key
                );
            }
        }
        // An alert names what was expired (and, for "none", what was dropped).
        let alerts = schedule_events(&o.store, sched, "alert");
        assert!(
            alerts.iter().any(|a| a.detail["what"] == "catchup"),
            "{policy} {sched}: {alerts:?}"
        );
    }
    o
}

#[test]
fn policy_all_catches_up_oldest_first_in_the_backfill_pool_and_expires_the_rest() {
    let o = check_policy("all");
    for sched in ["five", "hourly", "daily"] {
        // Oldest first: claim instants follow window order.
        let caught_up: Vec<Run> = runs(&o.store, sched)
            .into_iter()
            .filter(|r| r.reason == RunReason::Catchup && r.attempts > 0)
            .collect();
        assert!(!caught_up.is_empty(), "{sched}");
        let claims: Vec<DateTime<Utc>> = caught_up
            .iter()
            .map(|r| claimed_at(&o.store, r).unwrap())
            .collect();
        assert!(
            claims.windows(2).all(|w| w[0] <= w[1]),
            "{sched}: catch-up must drain oldest first"
        );
    }
    // 36 h of five-minute windows before the restart, minus the one due the
    // very instant the scheduler came back (on time).
    let five = runs(&o.store, "five");
    let caught_up = five
        .iter()
        .filter(|r| r.reason == RunReason::Catchup && r.attempts > 0)
        .count();
    assert_eq!(caught_up, 36 * 12 - 1);
    // Back up at 06-04 01:30Z: 06-03's daily window (09:00 Shanghai = 01:00Z) is
    // caught up; 06-02's is past the catch-up window; 06-04's was still open.
    let daily = runs(&o.store, "daily");
    let by_key = |k: &str| daily.iter().find(|r| r.window_key == k).unwrap();
    assert_eq!(
        by_key("2026-06-01").state,
        RunState::Succeeded,
        "ran before the outage"
    );
    assert_eq!(by_key("2026-06-02").state, RunState::Expired);
    assert_eq!(by_key("2026-06-03").state, RunState::Succeeded);
    assert_eq!(by_key("2026-06-03").reason, RunReason::Catchup);
    assert_eq!(by_key("2026-06-04").state, RunState::Succeeded);
    // 06-04's window was still open at the restart but came due at 01:00Z,
    // while the scheduler was down: a catch-up run too, after 06-03's.
    assert_eq!(by_key("2026-06-04").pool, Pool::Backfill);
    assert_eq!(by_key("2026-06-04").reason, RunReason::Catchup);
    assert!(claimed_at(&o.store, by_key("2026-06-04")) >= claimed_at(&o.store, by_key("2026-06-03")));
}

#[test]
fn on_time_runs_are_not_delayed_while_the_backfill_drains() {
    let (_dir, o) = outage("all");
    // The backfill of ~430 five-minute windows takes hours with 2 workers;
    // every on-time window after the restart is claimed the instant it is due.
    let mut checked = 0;
    for sched in ["five", "hourly"] {
        for r in runs(&o.store, sched) {
            if r.reason == RunReason::Scheduled && r.window_start >= o.up {
                let claimed = events(&o.store, r.id)
                    .into_iter()
                    .find(|e| e.kind == "claimed")
                    .unwrap();
                assert_eq!(
                    claimed.detail["lateness_ms"], 0,
                    "{sched} {} was late",
                    r.window_key
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 90, "{checked}");
    let last_catchup = runs(&o.store, "five")
        .into_iter()
        .filter(|r| r.reason == RunReason::Catchup && r.attempts > 0)
        .filter_map(|r| claimed_at(&o.store, &r))
        .max()
        .unwrap();
    assert!(
        last_catchup > o.up + TimeDelta::hours(1),
        "the drain overlapped on-time windows"
    );
}

#[test]
fn policy_latest_runs_only_the_newest_and_coalesces_the_rest() {
    check_policy("latest");
}

#[test]
fn policy_none_skips_missed_windows_and_alerts() {
    let o = check_policy("none");
    let alerts = schedule_events(&o.store, "hourly", "alert");
    assert!(alerts.iter().any(|a| {
        a.detail["message"]
            .as_str()
            .unwrap()
            .contains("catchup = \"none\"")
    }));
}

#[test]
fn forward_clock_jump_plans_the_skipped_windows_and_backward_fires_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &config_for("all"));
    let mut d = driver(&dir, cfg, "2026-06-01T00:00:00Z", agents(), vec![]);
    d.run_until(t("2026-06-01T02:00:00Z")).unwrap();
    d.jump_clock(t("2026-06-01T05:00:00Z")).unwrap();
    d.run_until(t("2026-06-01T06:00:00Z")).unwrap();
    let store = d.store().unwrap();
    assert!(
        !store
            .read(|tx| tx.events(&EventFilter {
                kinds: vec!["clock_jump".into()],
                ..EventFilter::default()
            }))
            .unwrap()
            .is_empty()
    );
    let planned = schedule_events(&store, "hourly", "catchup_planned");
    assert!(!planned.is_empty(), "a forward jump plans the windows it skipped");
    let hourly = runs(&store, "hourly");
    for h in ["2026-06-01T11:00+08:00", "2026-06-01T12:00+08:00"] {
        let r = hourly.iter().find(|r| r.window_key == h).unwrap();
        assert_eq!(
            (r.reason, r.state),
            (RunReason::Catchup, RunState::Succeeded),
            "{h}"
        );
    }
    // Back one hour: the same windows come round again on the wall clock.
    let before = runs(&store, "five").len();
    d.jump_clock(t("2026-06-01T05:00:00Z")).unwrap();
    d.run_until(t("2026-06-01T07:00:00Z")).unwrap();
    let store = d.store().unwrap();
    for sched in ["five", "hourly"] {
        for r in runs(&store, sched) {
            let claims = events(&store, r.id)
                .iter()
                .filter(|e| e.kind == "claimed")
                .count();
            assert!(claims <= 1, "{sched} {} claimed {claims} times", r.window_key);
        }
    }
    let after = runs(&store, "five").len();
    // 06:00 → 07:00 adds only the windows after the newest one already opened.
    assert_eq!(
        after - before,
        12,
        "one hour of new 5-minute windows, nothing repeated"
    );
}

/// A long outage is planned as one backlog range per schedule: only
/// `max_concurrency` catch-up runs are queued at the restart, the rest are
/// queued oldest first as runs finish, `explain` says a not-yet-queued window
/// waits its turn, and a crash in the middle of the drain loses nothing and
/// queues nothing twice.
#[test]
fn a_long_backlog_is_queued_as_it_drains_and_survives_a_crash() {
    let (dir, mut d, down, up) = restarted("all");
    d.settle().unwrap();
    let store = d.store().unwrap();

    // "five" (every 5 min, max_concurrency 4) missed 36 h of live windows:
    // 4 are queued, the rest are one backlog row.
    let backlog = store
        .read(|tx| tx.backlog("five"))
        .unwrap()
        .expect("a backlog row");
    let queued: Vec<Run> = runs(&store, "five")
        .into_iter()
        .filter(|r| r.reason == RunReason::Catchup && r.state != RunState::Expired)
        .collect();
    assert_eq!(queued.len(), 4, "{queued:?}");
    let newest_queued = queued.iter().map(|r| r.window_start).max().unwrap();
    assert_eq!(backlog.next, newest_queued + TimeDelta::minutes(5));
    assert_eq!(
        backlog.until,
        up - TimeDelta::minutes(5),
        "the newest closed window"
    );
    let planned = schedule_events(&store, "five", "catchup_planned");
    assert_eq!(planned.len(), 1);
    assert_eq!(planned[0].detail["queued_later"], 36 * 12 - 1 - 4);

    // explain on a window of the backlog, through the real binary.
    let key = backlog.next.with_timezone(&chrono_tz::Asia::Shanghai);
    let key = key.format("%Y-%m-%dT%H:%M%:z").to_string();
    let out = assert_cmd::cargo::cargo_bin_cmd!("agentcron")
        .args([
            "--config",
            &dir.path().join("agentcron.toml").display().to_string(),
        ])
        .args(["--db", &dir.path().join("test.db").display().to_string()])
        .args(["explain", "five", "--window", &key])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("planned for catch-up, waiting to be queued"),
        "{key}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Drain for a while, crash, come back at once, drain to the end.
    let crash_at = up + TimeDelta::hours(1);
    d.run_until(crash_at).unwrap();
    let mid = store
        .read(|tx| tx.backlog("five"))
        .unwrap()
        .expect("still draining");
    assert!(mid.next > backlog.next, "the backlog moved on: {mid:?}");
    let unfinished = runs(&store, "five")
        .iter()
        .filter(|r| r.pool == Pool::Backfill && !r.state.is_terminal())
        .count();
    assert!(
        unfinished <= 4,
        "never more than max_concurrency queued: {unfinished}"
    );
    d.crash("main");
    d.restart("main").unwrap();
    let end = up + TimeDelta::hours(8);
    d.run_until(end).unwrap();
    let store = d.store().unwrap();
    for r in drained_five(&store, down, up, end) {
        // The one running at the crash is retried once its lease expires.
        assert!(r.attempts == 1 || r.window_start < crash_at, "{}", r.window_key);
    }
}

/// Backlog windows whose catch-up window ends before their turn comes expire
/// at that instant, with the alert, as queued runs would.
#[test]
fn backlog_windows_expire_when_their_catch_up_window_ends_before_their_turn() {
    let dir = tempfile::tempdir().unwrap();
    // One catch-up at a time, 50 min each, for windows every 30 min: the queue
    // falls behind and its tail reaches the end of the 8 h catch-up window.
    let toml = format!(
        "{BASE}\n[[schedule]]\nid = \"slow\"\nagent = \"sim\"\nevery = \"30m\"\nclose_after = \"10m\"\n\
         check_every = \"1m\"\ncatchup = \"all\"\ncatchup_window = \"8h\"\nmax_concurrency = 1\n"
    );
    let window = TimeDelta::hours(8);
    let cfg = config(&dir, &toml);
    let slow = sim_agent(vec![SimAttempt {
        latency: TimeDelta::minutes(50),
        ..Default::default()
    }]);
    let mut d = driver(&dir, cfg, "2026-06-01T00:00:00Z", vec![("slow", slow)], vec![]);
    let down = t("2026-06-01T00:15:00Z");
    d.run_until(down).unwrap();
    d.crash("main");
    let up = down + TimeDelta::hours(30);
    d.jump_clock(up).unwrap();
    d.restart("main").unwrap();
    assert!(
        d.store()
            .unwrap()
            .read(|tx| tx.backlog("slow"))
            .unwrap()
            .is_none()
    );
    d.settle().unwrap();
    assert!(
        d.store()
            .unwrap()
            .read(|tx| tx.backlog("slow"))
            .unwrap()
            .is_some(),
        "planned as a backlog"
    );
    let end = up + TimeDelta::hours(12);
    d.run_until(end).unwrap();
    let store = d.store().unwrap();
    // The windows still inside their catch-up window at the restart.
    let live: Vec<Run> = runs(&store, "slow")
        .into_iter()
        .filter(|r| r.window_start > down && r.window_end <= up && r.window_start + window > up)
        .collect();
    assert_eq!(live.len(), 16, "every missed window has a run");
    let mut claims = vec![];
    let mut expired = vec![];
    for r in &live {
        let evs = events(&store, r.id);
        match r.state {
            RunState::Succeeded => claims.push(evs.iter().find(|e| e.kind == "claimed").unwrap().at),
            RunState::Expired => {
                // Expired the instant its catch-up window ended, not when reached.
                let at = evs.iter().find(|e| e.kind == "expired").unwrap().at;
                assert_eq!(at, r.window_start + window, "{}: expired on time", r.window_key);
                expired.push(r);
            }
            other => panic!("{}: {other:?}", r.window_key),
        }
    }
    assert!(
        claims.len() >= 2 && !expired.is_empty(),
        "some ran, some expired: {live:?}"
    );
    assert!(claims.windows(2).all(|w| w[0] < w[1]), "oldest first: {claims:?}");
    let alerts = schedule_events(&store, "slow", "alert");
    assert!(
        alerts.iter().filter(|a| a.detail["what"] == "expired").count() >= expired.len(),
        "{alerts:?}"
    );
}

/// A second scheduler on the same database finds a catch-up range another
/// one planned, and drains it alone once the planner is gone: nothing is
/// queued twice, nothing is left behind.
#[test]
fn another_scheduler_drains_the_range_after_the_planner_dies() {
    let (_dir, mut d, down, up) = restarted("all");
    d.settle().unwrap();
    let store = d.store().unwrap();
    assert!(store.read(|tx| tx.backlog("five")).unwrap().is_some());
    // The standby starts after the plan, works beside main for ten minutes
    // (sharing the backlog, the two drain most of it within the hour), then alone.
    d.run_until(up + TimeDelta::minutes(10)).unwrap();
    d.add_scheduler("standby").unwrap();
    let main_gone = up + TimeDelta::minutes(20);
    d.run_until(main_gone).unwrap();
    d.crash("main");
    let end = up + TimeDelta::hours(8);
    d.run_until(end).unwrap();

    let mut by_standby_after = 0;
    for r in drained_five(&store, down, up, end) {
        let what = &r.window_key;
        let claims: Vec<Event> = events(&store, r.id)
            .into_iter()
            .filter(|e| e.kind == "claimed")
            .collect();
        // A run main was running when it died is retried once, by the standby.
        assert!(claims.len() == 1 || r.attempts == 2, "{what}: {claims:?}");
        if claims
            .iter()
            .any(|e| e.detail["owner"] == "standby" && e.at > main_gone)
        {
            by_standby_after += 1;
        }
    }
    assert!(
        by_standby_after > 100,
        "the standby drained the rest: {by_standby_after}"
    );
}

/// `run_until` does not settle again an instant its last step left quiet;
/// that changes nothing: stepping by hand writes the same ledger, event for
/// event and owner for owner, with two schedulers sharing a drain (which of
/// them goes first at each instant must not change either).
#[test]
fn run_until_writes_the_same_ledger_as_stepping_by_hand() {
    let ledger = |by_hand: bool| {
        let (_dir, mut d, _down, up) = restarted("all");
        let go = |d: &mut Driver, to: DateTime<Utc>| {
            if by_hand {
                while d.step(to).unwrap().is_some() {}
            } else {
                d.run_until(to).unwrap();
            }
        };
        go(&mut d, up + TimeDelta::minutes(10));
        d.add_scheduler("standby").unwrap();
        go(&mut d, up + TimeDelta::hours(1));
        d.crash("main");
        go(&mut d, up + TimeDelta::hours(2));
        let events = d
            .store()
            .unwrap()
            .read(|tx| tx.events(&EventFilter::default()))
            .unwrap();
        events
            .into_iter()
            .map(|e| format!("{} {} {:?} {}", e.at, e.kind, e.run_id, e.detail))
            .collect::<Vec<_>>()
    };
    let (until, by_hand) = (ledger(false), ledger(true));
    let standby = until
        .iter()
        .filter(|e| e.contains("claimed") && e.contains("standby"))
        .count();
    assert!(standby > 50, "the standby claims: {standby}");
    assert_eq!(until.len(), by_hand.len());
    for (a, b) in until.iter().zip(&by_hand) {
        assert_eq!(a, b);
    }
}

/// The catch-up planner's own alert (windows expired after a gap) is not only
/// in the trace: it reaches the configured sink, with what and which schedule.
#[test]
fn a_catchup_alert_is_sent_to_the_sink_not_only_recorded() {
    let toml = config_for("all").replace(
        "[scheduler]\n",
        "[scheduler]\nalert = { kind = \"file\", path = \"alerts.jsonl\" }\n",
    );
    let (dir, mut d, _down, up) = restarted_with(&toml);
    d.run_until(up + TimeDelta::minutes(1)).unwrap();
    let text = std::fs::read_to_string(dir.path().join("alerts.jsonl")).unwrap_or_default();
    let sent: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|a: &serde_json::Value| a["what"] == "catchup")
        .collect();
    assert!(
        sent.iter()
            .any(|a| a["schedule"] == "five" && a["message"].as_str().is_some_and(|m| m.contains("expired"))),
        "{text}"
    );
}

/// A catch-up run that ends elsewhere (here an operator's connection skips
/// one) frees its place in the schedule's backlog: the scheduler sees it at
/// its next poll (`check_every`), with no end of its own to prompt it.
#[test]
fn a_catch_up_run_ended_elsewhere_makes_room_at_the_next_poll() {
    let (_dir, mut d, _down, up) = restarted("all");
    let other = d.store().unwrap();
    // Nothing is claimed, so nothing ends here: only the poll can see room.
    other
        .write(|tx| tx.set_switch("kill", true, "ops", "rehearsing", up))
        .unwrap();
    d.settle().unwrap();
    let queued = |s: &agentcron::store::Store| -> Vec<Run> {
        runs(s, "five")
            .into_iter()
            .filter(|r| r.reason == RunReason::Catchup && !r.state.is_terminal())
            .collect()
    };
    let before = queued(&other);
    assert_eq!(before.len(), 4, "max_concurrency queued: {before:?}");
    let next = other
        .read(|tx| tx.backlog("five"))
        .unwrap()
        .expect("a backlog")
        .next;
    // Polls with nothing written elsewhere come and go.
    let ids = |runs: &[Run]| runs.iter().map(|r| r.id).collect::<Vec<_>>();
    d.run_until(up + TimeDelta::minutes(3)).unwrap();
    assert_eq!(ids(&queued(&other)), ids(&before));
    let r = &before[0];
    let skip = Change {
        state_reason: Some("skipped by hand".into()),
        ..Change::default()
    };
    let now = d.now();
    other
        .write(|tx| tx.transition(r.id, r.state, RunState::Skipped, &skip, now, &[]))
        .unwrap();
    d.run_until(now + TimeDelta::minutes(1)).unwrap();
    let after = queued(&other);
    assert_eq!(after.len(), 4, "the freed place is taken: {after:?}");
    assert!(
        after.iter().any(|r| r.window_start == next),
        "by the backlog's next window"
    );
}

/// A long backlog is queued as places of the backfill pool free up, the
/// oldest window first: a run queued from a backlog finds a place (it may
/// still wait for its schedule's on-time run, or a place taken meanwhile),
/// never a pool already full at its first decision, nor its schedule's
/// previous catch-up run still running (overlap = skip runs them one at a
/// time); each schedule's catch-up runs start in window order.
#[test]
fn a_backlog_is_queued_as_places_free_oldest_window_first() {
    let ids = ["s0", "s1", "s2", "s3", "s4", "s5"];
    let (_dir, mut d, _cfg, up) = three_hours_down(&ids.map(|id| (id, 30)), "max_concurrency = 2\n", 2);
    d.run_until(up + TimeDelta::hours(3)).unwrap();
    let store = d.store().unwrap();
    assert_eq!(store.read(|tx| tx.backlogs()).unwrap(), vec![], "all queued");
    let mut from_backlog = 0;
    for s in ids {
        let mut claims = vec![];
        for r in runs(&store, s) {
            if r.reason != RunReason::Catchup {
                continue;
            }
            assert_eq!(r.state, RunState::Succeeded, "{r:?}");
            let evs = events(&store, r.id);
            claims.push((
                evs.iter().find(|e| e.kind == "claimed").unwrap().at,
                r.window_start,
            ));
            // The plan queued max_concurrency runs of each schedule at once;
            // the rest were queued later, from the backlog.
            if r.created_at > up {
                from_backlog += 1;
                let first_hold = evs.iter().find(|e| e.kind == "switch_held");
                assert!(
                    first_hold.is_none_or(|e| e.detail["switch"] != "quota"),
                    "queued from the backlog into a full pool: {evs:?}"
                );
                // Nor given a place while its schedule's catch-up run still
                // ran (overlap holds it behind that one, the place idle).
                let behind_catch_up = |m: &str| {
                    m.strip_prefix("waits for window ")
                        .and_then(|m| m.split(' ').next())
                        .and_then(|k| chrono::DateTime::parse_from_str(k, "%Y-%m-%dT%H:%M%:z").ok())
                        .is_some_and(|w| w < up)
                };
                assert!(
                    !evs.iter().any(|e| e.kind == "switch_held"
                        && e.detail["reason"].as_str().is_some_and(behind_catch_up)),
                    "queued behind its schedule's running catch-up run: {evs:?}"
                );
            }
        }
        claims.sort();
        assert!(
            claims.windows(2).all(|w| w[0].1 < w[1].1),
            "{s}: oldest first: {claims:?}"
        );
    }
    assert!(from_backlog > 150, "{from_backlog}");
}

/// A backlog window given a free place while no older catch-up run waits
/// is opened already claimed, as an on-time window is: its opening, its
/// decision and its claim are one trace row (no pending row of it was
/// written, decided and claimed in turn), with the same events as before.
#[test]
fn a_backlog_window_given_a_place_is_opened_claimed() {
    let (_dir, mut d, _cfg, up) = three_hours_down(&[("a", 30), ("b", 30), ("c", 30)], "", 2);
    d.run_until(up + TimeDelta::hours(1)).unwrap();
    let store = d.store().unwrap();
    let (mut later, mut fused) = (0, 0);
    for s in ["a", "b", "c"] {
        for r in runs(&store, s) {
            if r.reason != RunReason::Catchup || r.created_at <= up {
                continue;
            }
            later += 1;
            let evs = events(&store, r.id);
            let kinds: Vec<&str> = evs.iter().map(|e| e.kind.as_str()).collect();
            let at = |k: &str| kinds.iter().position(|&x| x == k);
            assert!(
                at("window_opened") < at("decision") && at("decision") < at("claimed"),
                "{kinds:?}"
            );
            let id = |k: &str| evs.iter().find(|e| e.kind == k).map(|e| e.id);
            if id("window_opened") == id("claimed") {
                fused += 1;
            }
        }
    }
    println!("{fused} of {later} catch-up runs queued from the backlog were opened claimed");
    assert!(later > 20, "{later}");
    assert!(fused * 2 > later, "{fused} of {later}");
}

/// A place given to a window whose run is then held (here its schedule is
/// paused) is offered again: another schedule's backlog keeps draining.
#[test]
fn a_place_left_by_a_held_catch_up_run_goes_to_another_backlog() {
    let (_dir, mut d, cfg, up) = three_hours_down(&[("x", 240), ("y", 30)], "", 1);
    d.run_until(up + TimeDelta::minutes(1)).unwrap();
    let other = d.store().unwrap();
    agentcron::operator::pause(&other, &cfg, "x", "ops", "rehearsing", d.now()).unwrap();
    d.run_until(up + TimeDelta::hours(1)).unwrap();
    let y_ran = runs(&other, "y")
        .into_iter()
        .filter(|r| r.reason == RunReason::Catchup && r.state == RunState::Succeeded)
        .count();
    // y's 36 missed windows, 30 s each, one place: all within the hour.
    assert!(
        y_ran > 30,
        "y's backlog stalled: {y_ran} catch-up runs in an hour"
    );
}

/// `ids` every five minutes (`extra` config lines each) on `BASE` with
/// `backfill_workers`, each agent taking its latency in seconds; up from
/// 2026-06-01 00:00Z, down at 01:30Z for 3 h and restarted:
/// (dir, driver, config, up).
fn three_hours_down(
    ids: &[(&'static str, i64)],
    extra: &str,
    backfill_workers: usize,
) -> (
    tempfile::TempDir,
    Driver,
    std::sync::Arc<agentcron::config::Config>,
    DateTime<Utc>,
) {
    let dir = tempfile::tempdir().unwrap();
    let mut toml = BASE.replace(
        "backfill_workers = 2",
        &format!("backfill_workers = {backfill_workers}"),
    );
    for (id, _) in ids {
        toml.push_str(&format!(
            "\n[[schedule]]\nid = \"{id}\"\nagent = \"sim\"\nevery = \"5m\"\nclose_after = \"5m\"\n\
             check_every = \"1m\"\ncatchup = \"all\"\ncatchup_window = \"36h\"\n{extra}"
        ));
    }
    let cfg = config(&dir, &toml);
    let agent = |secs: i64| {
        sim_agent(vec![SimAttempt {
            latency: TimeDelta::seconds(secs),
            ..Default::default()
        }])
    };
    let agents = ids.iter().map(|&(id, secs)| (id, agent(secs))).collect();
    let mut d = driver(&dir, cfg.clone(), "2026-06-01T00:00:00Z", agents, vec![]);
    let (_, up) = down_for(&mut d, TimeDelta::hours(3));
    (dir, d, cfg, up)
}

/// A backlog window given a place at the instant an on-time run opens for
/// a posted event (after the tick's own windows) does not take the last
/// place of their tenant before it: catch-up never goes before on time
/// (found in review: the window given a place was claimed at once, before
/// the event's run was decided).
#[test]
fn a_catch_up_window_does_not_take_a_tenants_place_before_an_on_time_run_opened_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        r#"{BASE}
[tenants.t]
max_concurrent = 1

[[schedule]]
id = "a"
tenant = "t"
agent = "sim"
cron = "*/5 2-3 * * *"
timezone = "UTC"
close_after = "5m"
check_every = "1m"
catchup = "all"
catchup_window = "36h"

[[schedule]]
id = "ev"
tenant = "t"
agent = "sim"
on_event = "go"
"#
    );
    let cfg = config(&dir, &toml);
    let agent = |secs: i64| {
        let mut a = sim_agent(vec![SimAttempt {
            latency: TimeDelta::seconds(secs),
            ..Default::default()
        }]);
        a.steps.clear();
        a
    };
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:00:00Z",
        vec![("a", agent(7)), ("ev", agent(7))],
        vec![],
    );
    down_for(&mut d, TimeDelta::hours(3));
    d.settle().unwrap();
    let store = d.store().unwrap();
    let mut i = 0;
    for _ in 0..10_000 {
        let next = d.next_event().unwrap().expect("something to do");
        let running = store.read(|tx| tx.running_runs(None)).unwrap();
        let backlog = store.read(|tx| tx.backlogs()).unwrap();
        if d.sim.next_due() == Some(next)
            && running.len() == 1
            && running[0].pool == Pool::Backfill
            && !backlog.is_empty()
        {
            i += 1;
            let key = format!("e{i}");
            agentcron::operator::post_event(&store, "go", Some(&key), &serde_json::json!({}), next).unwrap();
            d.clock.set(next);
            d.settle().unwrap();
            let ended =
                store.read(|tx| tx.try_run(running[0].id)).unwrap().unwrap().state != RunState::Running;
            let ev = run_by_key(&store, "ev", &key);
            let now_running = store.read(|tx| tx.running_runs(None)).unwrap();
            println!(
                "{next}: catch-up {} ended={ended}; ev {:?} {:?}; running {:?}",
                running[0].window_key,
                ev.state,
                ev.state_reason,
                now_running
                    .iter()
                    .map(|r| (r.schedule.clone(), r.pool, r.window_key.clone()))
                    .collect::<Vec<_>>()
            );
            if ended {
                assert_eq!(
                    ev.state,
                    RunState::Running,
                    "on-time event run delayed by catch-up: {:?}",
                    ev.state_reason
                );
                return;
            }
            continue;
        }
        d.step(next).unwrap();
    }
    panic!("no such instant");
}

/// A schedule's running catch-up run holds its own backlog's only place
/// (`overlap` skip: one catch-up run at a time): a look at its backlog while
/// it runs (here the poll, due because another connection wrote) leaves it
/// full, and free places of the pool do not queue a second window of it.
#[test]
fn a_running_catch_up_run_holds_its_schedules_backlog_place() {
    // 4-minute runs of `a`, three places in the backfill pool.
    let (_dir, mut d, cfg, up) = three_hours_down(&[("a", 240), ("b", 30)], "", 3);
    let other = d.store().unwrap();
    let mut seen_running = 0;
    for minute in 1..=40 {
        // Another connection writes: every backlog's poll must read it again.
        agentcron::operator::pause(&other, &cfg, "b", "ops", "rehearsing", d.now()).unwrap();
        agentcron::operator::resume(&other, &cfg, "b", "ops", "rehearsing", d.now()).unwrap();
        d.run_until(up + TimeDelta::minutes(minute)).unwrap();
        let unfinished: Vec<Run> = runs(&other, "a")
            .into_iter()
            .filter(|r| r.reason == RunReason::Catchup && !r.state.is_terminal())
            .collect();
        if unfinished.iter().any(|r| r.state == RunState::Running) {
            seen_running += 1;
        }
        assert!(
            unfinished.len() <= 1,
            "minute {minute}: {} catch-up runs of one schedule queued at once: {:?}",
            unfinished.len(),
            unfinished
                .iter()
                .map(|r| (&r.window_key, r.state))
                .collect::<Vec<_>>()
        );
    }
    // (Its on-time runs, 4 minutes of every 5, go first.)
    assert!(
        seen_running > 10,
        "the backlog did not drain: running at {seen_running} of 40 minutes"
    );
}

/// A scheduler on a PostgreSQL ledger stopped and started again after
/// downtime catches up the windows it missed: every statement of the
/// catch-up path (offering places to a backlog, counting the places the
/// due catch-up runs take) is one PostgreSQL 15 takes (issue 44, 1: a
/// subquery without a name made the restarted scheduler exit at once).
#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn a_scheduler_restarted_after_downtime_catches_up_on_postgresql() {
    let Some(url) =
        store_support::pg_database("catchup::a_scheduler_restarted_after_downtime_catches_up_on_postgresql")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "{BASE}\n[[schedule]]\nid = \"five\"\nagent = \"sim\"\nevery = \"5m\"\nclose_after = \"5m\"\n\
         check_every = \"1m\"\ncatchup = \"all\"\ncatchup_window = \"36h\"\n"
    );
    let cfg = config(&dir, &toml);
    let agent = sim_agent(vec![SimAttempt {
        latency: TimeDelta::seconds(30),
        ..Default::default()
    }]);
    let agents = [("five".to_string(), agent)].into_iter().collect();
    let mut d = Driver::new(
        cfg,
        std::path::Path::new(&url),
        t("2026-06-01T00:00:00Z"),
        agents,
        Box::new(|cfg: &agentcron::config::Config| cfg.schedules.iter().map(|_| vec![]).collect()),
    )
    .unwrap();
    let down = t("2026-06-01T00:30:00Z");
    d.run_until(down).unwrap();
    d.crash("main");
    let up = down + TimeDelta::hours(1);
    d.jump_clock(up).unwrap();
    d.restart("main").unwrap();
    d.run_until(up + TimeDelta::minutes(30)).unwrap();
    let store = d.store().unwrap();
    let end = up + TimeDelta::minutes(30);
    let all: Vec<Run> = runs(&store, "five")
        .into_iter()
        .filter(|r| r.window_start < end)
        .collect();
    // Every window to 01:55 ran once and succeeded: the one running at the
    // stop (00:30) as a retry, those that came due while it was down
    // (00:35 … 01:25) as catch-up runs, the rest on time.
    let starts: Vec<DateTime<Utc>> = all.iter().map(|r| r.window_start).collect();
    let expected: Vec<DateTime<Utc>> = (0..24)
        .map(|i| t("2026-06-01T00:00:00Z") + TimeDelta::minutes(5 * i))
        .collect();
    assert_eq!(starts, expected, "{all:#?}");
    assert!(all.iter().all(|r| r.state == RunState::Succeeded), "{all:#?}");
    let caught_up: Vec<DateTime<Utc>> = all
        .iter()
        .filter(|r| r.reason == RunReason::Catchup)
        .map(|r| r.window_start)
        .collect();
    assert_eq!(
        caught_up,
        expected
            .iter()
            .copied()
            .filter(|&w| w > down && w < up)
            .collect::<Vec<_>>()
    );
}
