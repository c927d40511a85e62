//! Issue 19's "one zone per output" and "right words", through the real
//! binary over a database the real engine wrote on a virtual clock: `explain`,
//! `events` and `show` tell every time of a block in one zone (the schedule's,
//! the scheduler's for global events, or UTC with `--utc`), and a back-filled,
//! a triggered, a caught-up and a needs-human run are each told as what they
//! were.

mod support;

use agentcron::config::model::ErrorClass;
use agentcron::operator;
use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
use agentcron::rehearsal::sim_gate::SimGateRule;
use agentcron::store::types::RunState;
use assert_cmd::cargo::cargo_bin_cmd;
use support::{config, driver, run_by_key, sim_agent, t};
use tempfile::TempDir;

/// `broken` fails for good every 10 minutes (its circuit opens after 2),
/// `late` misses its 10-minute window behind a gate and is caught up in the
/// backfill pool, `report` is back-filled and triggered by hand, `money`
/// dies with its side effect in flight (a question for a human).
fn scenario(dir: &TempDir) {
    let base = support::BASE.replace("[scheduler]\n", "[scheduler]\ndatabase = \"test.db\"\n");
    let toml = format!(
        r#"{base}
[[schedule]]
id = "broken"
agent = "sim"
every = "10m"
retry = {{ max_attempts = 1 }}
circuit = {{ open_after = 2, cool_down = "1h" }}

[[schedule]]
id = "late"
agent = "sim"
cron = "0 9 * * *"
check_every = "2m"
close_after = "10m"
catchup = "all"
catchup_window = "1h"

[[schedule.gate]]
kind = "command"
name = "upstream"
command = ["true"]

[[schedule]]
id = "report"
agent = "sim"
cron = "0 9 * * *"

[[schedule]]
id = "money"
agent = "sim"
cron = "30 9 * * *"
"#
    );
    let cfg = config(dir, &toml);
    let ok = || sim_agent(vec![SimAttempt::default()]);
    let mut d = driver(
        dir,
        cfg.clone(),
        "2026-06-06T00:30:00Z",
        vec![
            (
                "broken",
                sim_agent(vec![SimAttempt {
                    end: SimEnd::Fail(ErrorClass::NonRetryable),
                    ..Default::default()
                }]),
            ),
            ("late", ok()),
            ("report", ok()),
            (
                "money",
                sim_agent(vec![SimAttempt {
                    end: SimEnd::CrashAfterStarting("deliver".into()),
                    ..Default::default()
                }]),
            ),
        ],
        vec![(
            "late",
            "upstream",
            SimGateRule::PassFrom(t("2026-06-06T01:20:00Z")),
        )],
    );
    d.run_until(t("2026-06-06T01:40:00Z")).unwrap();
    let store = d.store().unwrap();
    let now = d.now();
    operator::backfill(
        &store,
        &cfg,
        "report",
        t("2026-06-03T00:00:00Z"),
        t("2026-06-04T02:00:00Z"),
        false,
        "alice",
        now,
    )
    .unwrap();
    operator::trigger(&store, &cfg, "report", None, "bob", now).unwrap();
    d.run_until(t("2026-06-06T02:00:00Z")).unwrap();
}

struct Out {
    code: i32,
    stdout: String,
}

fn cli(dir: &TempDir, args: &[&str]) -> Out {
    let out = cargo_bin_cmd!("agentcron")
        .arg("--config")
        .arg(dir.path().join("agentcron.toml"))
        .args(args)
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

/// Every instant written out in `text`: RFC 3339 ones (`…T01:00:00.000Z`,
/// `…T09:00:00+08:00`) and table ones (`2026-06-06 09:00:00 +08:00`), as the
/// zone each names (`Z` is `+00:00`). Window keys are identifiers, not times:
/// daily ones have no time, sub-daily ones no seconds here, manual ones are
/// one word; they are left out.
fn zones(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = vec![];
    for i in 0..b.len().saturating_sub(19) {
        let d = |k: usize| b[i + k].is_ascii_digit();
        let date = d(0)
            && d(1)
            && d(2)
            && d(3)
            && b[i + 4] == b'-'
            && d(5)
            && d(6)
            && b[i + 7] == b'-'
            && d(8)
            && d(9);
        let time = (b[i + 10] == b'T' || b[i + 10] == b' ')
            && d(11)
            && d(12)
            && b[i + 13] == b':'
            && d(14)
            && d(15)
            && b[i + 16] == b':'
            && d(17)
            && d(18);
        // A manual window key's stamp (`manual-2026-…Z`) is part of the key.
        let in_word = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if !(date && time) || in_word {
            continue;
        }
        let mut j = i + 19;
        if b.get(j) == Some(&b'.') {
            j += 1;
            while b.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
        }
        if b.get(j) == Some(&b' ') {
            j += 1;
        }
        match b.get(j) {
            Some(b'Z') => out.push("+00:00".to_string()),
            Some(b'+' | b'-') if j + 6 <= b.len() => out.push(text[j..j + 6].to_string()),
            _ => out.push(format!("no zone at `{}`", &text[i..(i + 25).min(text.len())])),
        }
    }
    out
}

/// `text` names times in `zone` only, and some.
fn one_zone(what: &str, text: &str, zone: &str) {
    let found = zones(text);
    assert!(!found.is_empty(), "{what}: no times with a zone in:\n{text}");
    let other: Vec<&String> = found.iter().filter(|z| *z != zone).collect();
    assert!(
        other.is_empty(),
        "{what}: times in {other:?} beside {zone}:\n{text}"
    );
}

#[test]
fn explain_and_events_print_one_zone_per_block() {
    let dir = tempfile::tempdir().unwrap();
    scenario(&dir);

    // The circuit's hold names when it probes (stored as UTC): told in the
    // schedule's zone beside the story's own times, or all in UTC.
    let x = cli(&dir, &["explain", "broken"]);
    assert_eq!(x.code, 0, "{}", x.stdout);
    assert!(x.stdout.contains("probe after"), "{}", x.stdout);
    one_zone("explain broken", &x.stdout, "+08:00");
    let x = cli(&dir, &["explain", "broken", "--utc"]);
    assert!(x.stdout.contains("(UTC)"), "{}", x.stdout);
    one_zone("explain broken --utc", &x.stdout, "+00:00");

    // A missed window queued for catch-up: its deadline in the events' zone.
    let late = cli(&dir, &["events", "--schedule", "late", "--limit", "0"]);
    assert!(late.stdout.contains("catchup_queued"), "{}", late.stdout);
    one_zone("events --schedule late", &late.stdout, "+08:00");
    let late = cli(&dir, &["events", "--schedule", "late", "--limit", "0", "--utc"]);
    one_zone("events --schedule late --utc", &late.stdout, "+00:00");
    // The time layer's own reasons ("window closed at …") too.
    let x = cli(&dir, &["explain", "late", "--window", "2026-06-06"]);
    assert!(
        x.stdout.contains("window closed at 2026-06-06 09:10:00 +08:00"),
        "{}",
        x.stdout
    );
    one_zone("explain late", &x.stdout, "+08:00");
    let x = cli(&dir, &["explain", "late", "--window", "2026-06-06", "--utc"]);
    assert!(
        x.stdout.contains("window closed at 2026-06-06 01:10:00 +00:00"),
        "{}",
        x.stdout
    );
    one_zone("explain late --utc", &x.stdout, "+00:00");

    // Everything, global events (scheduler_started, ticks) included: the
    // scheduler's zone, not +00:00 for the events of no schedule.
    let all = cli(&dir, &["events", "--limit", "0"]);
    assert!(all.stdout.contains("scheduler_started"), "{}", all.stdout);
    one_zone("events", &all.stdout, "+08:00");
    let all = cli(&dir, &["events", "--limit", "0", "--utc"]);
    one_zone("events --utc", &all.stdout, "+00:00");

    let store = agentcron::store::Store::open_read_only(&dir.path().join("test.db")).unwrap();
    let broken = support::runs(&store, "broken");
    let show = cli(&dir, &["show", &broken.last().unwrap().id.to_string()]);
    one_zone("show", &show.stdout, "+08:00");
    let show = cli(&dir, &["show", &broken.last().unwrap().id.to_string(), "--utc"]);
    one_zone("show --utc", &show.stdout, "+00:00");

    // status: the scheduler's zone for every schedule's next fire, or UTC.
    let st = cli(&dir, &["status"]);
    assert!(st.stdout.contains("NEXT FIRE"), "{}", st.stdout);
    one_zone("status", &st.stdout, "+08:00");
    let st = cli(&dir, &["status", "--utc"]);
    one_zone("status --utc", &st.stdout, "+00:00");
}

#[test]
fn backfill_manual_catch_up_and_needs_human_are_told_as_what_they_were() {
    let dir = tempfile::tempdir().unwrap();
    scenario(&dir);

    let x = cli(&dir, &["explain", "report", "--window", "2026-06-03"]);
    assert_eq!(x.code, 0, "{}", x.stdout);
    assert!(
        x.stdout.contains(
            "window due 09:00 back-filled 2026-06-06 09:40 by alice (agentcron backfill, backfill pool)"
        ),
        "{}",
        x.stdout
    );
    for wrong in ["opened late", "no scheduler had run"] {
        assert!(
            !x.stdout.contains(wrong),
            "a backfill told as `{wrong}`:\n{}",
            x.stdout
        );
    }

    let store = agentcron::store::Store::open_read_only(&dir.path().join("test.db")).unwrap();
    let manual = support::runs(&store, "report")
        .into_iter()
        .find(|r| r.window_key.starts_with("manual-"))
        .expect("the triggered run");
    let x = cli(&dir, &["explain", "report", "--window", &manual.window_key]);
    assert!(
        x.stdout
            .contains("window opened 09:40 by a manual trigger by bob"),
        "{}",
        x.stdout
    );

    let x = cli(&dir, &["explain", "late", "--window", "2026-06-06"]);
    assert!(
        x.stdout
            .contains("queued for catch-up in the backfill pool until"),
        "{}",
        x.stdout
    );
    assert!(!x.stdout.contains("no scheduler had run"), "{}", x.stdout);

    // A retryable crash with an unverifiable side effect in flight is a
    // question for a human: the attempt says so too, never `retryable`.
    let money = run_by_key(&store, "money", "2026-06-06");
    assert_eq!(money.state, RunState::NeedsHuman);
    let attempts = store.read(|tx| tx.attempts(money.id)).unwrap();
    assert_eq!(attempts[0].error_class, Some(ErrorClass::NeedsHuman));
    let show = cli(&dir, &["show", &money.id.to_string()]);
    assert!(show.stdout.contains("#1 failed (needs_human)"), "{}", show.stdout);
    let x = cli(&dir, &["explain", "money"]);
    for text in [&show.stdout, &x.stdout] {
        assert!(
            !text.contains("retryable"),
            "needs_human told as retryable:\n{text}"
        );
    }
    assert!(x.stdout.contains("(needs_human)"), "{}", x.stdout);
}

/// A rehearsal's timeline and expectations are told in the scenario's zone:
/// the simulated gate's "not ready until …" and the expectation details
/// (which were UTC beside the timeline's local times).
#[test]
fn a_rehearsal_prints_one_zone() {
    let out = cargo_bin_cmd!("agentcron")
        .args(["rehearse", "sample-config/rehearsals/data-delay.toml"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("not ready until 2026-06-08 09:40:00 +08:00"),
        "{text}"
    );
    assert!(text.contains("succeeded at 2026-06-08 09:43:00 +08:00"), "{text}");
    one_zone("rehearse data-delay", &text, "+08:00");
}
