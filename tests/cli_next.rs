//! `agentcron next` on the real binary: the issue-2 acceptance commands with
//! exact output, a configured schedule with calendar notes, and every error path
//! (one clear line on stderr, DESIGN.md's exit code, never a panic).
//!
//! Every date below was checked independently of agentcron (`date`, `zdump`):
//! 2026-06-05 is a Friday; New York springs forward 2026-03-08 at 02:00 EST
//! (07:00Z) and falls back 2026-11-01 at 02:00 EDT (06:00Z); 2026-09-27 is a
//! Sunday, 2026-10-01 a Thursday, 2026-10-05 a Monday.

use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

const NY: &str = "America/New_York";

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Output {
    let out = cargo_bin_cmd!("agentcron").args(args).output().unwrap();
    let out = Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !out.stderr.contains("panicked"),
        "agentcron {args:?} panicked:\n{}",
        out.stderr
    );
    out
}

/// `next ARGS` that must succeed quietly; returns stdout.
fn next_ok(args: &[&str]) -> String {
    let out = run(&[&["next"], args].concat());
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (0, ""),
        "next {args:?} failed; stdout:\n{}",
        out.stdout
    );
    out.stdout
}

/// One fire as `next --json` prints it.
#[derive(Debug, PartialEq)]
struct Fire {
    utc: String,
    local: String,
    window_key: String,
    note: Option<String>,
}

/// A fire as the tests spell it: (utc, local, window key, note).
fn fire(utc: &str, local: &str, window_key: &str, note: Option<&str>) -> Fire {
    Fire {
        utc: utc.into(),
        local: local.into(),
        window_key: window_key.into(),
        note: note.map(Into::into),
    }
}

/// `next ARGS --json`, checked against DESIGN's shape: an array of objects with
/// exactly `utc`, `local`, `window_key` (strings) and `note` (null or string).
fn next_json(args: &[&str]) -> Vec<Fire> {
    let stdout = next_ok(&[args, &["--json"]].concat());
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{stdout}"));
    let rows = v.as_array().unwrap_or_else(|| panic!("not an array:\n{stdout}"));
    rows.iter()
        .map(|row| {
            let obj = row.as_object().unwrap_or_else(|| panic!("not an object: {row}"));
            let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(keys, ["local", "note", "utc", "window_key"], "{row}");
            let text = |k: &str| {
                obj[k]
                    .as_str()
                    .unwrap_or_else(|| panic!("{k} is not a string: {row}"))
                    .to_string()
            };
            Fire {
                utc: text("utc"),
                local: text("local"),
                window_key: text("window_key"),
                note: match &obj["note"] {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => panic!("note is neither null nor a string: {other}"),
                },
            }
        })
        .collect()
}

/// `next --cron EXPR --tz ZONE --after AFTER --count N [EXTRA…] --json`.
fn cron_json(expr: &str, tz: &str, after: &str, count: usize, extra: &[&str]) -> Vec<Fire> {
    let count = count.to_string();
    let args = [
        &["--cron", expr, "--tz", tz, "--after", after, "--count", &count],
        extra,
    ]
    .concat();
    next_json(&args)
}

/// `next ARGS` that must fail with `code` and one stderr line naming `phrases`;
/// returns that line.
fn next_fails(args: &[&str], code: i32, phrases: &[&str]) -> String {
    let out = run(&[&["next"], args].concat());
    assert_eq!(
        out.code, code,
        "next {args:?}: exit code\nstderr:\n{}",
        out.stderr
    );
    assert_eq!(out.stdout, "", "next {args:?}: stdout must stay empty");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "next {args:?}: not one line:\n{}", out.stderr);
    for p in phrases {
        assert!(lines[0].contains(p), "missing {p:?} in: {}", lines[0]);
    }
    lines[0].to_string()
}

// ---------------------------------------------------------------- --cron

#[test]
fn weekdays_in_shanghai_as_a_table() {
    let stdout = next_ok(&[
        "--cron",
        "0 17 * * 1-5",
        "--tz",
        "Asia/Shanghai",
        "--after",
        "2026-06-05T00:00:00Z",
        "--count",
        "5",
    ]);
    assert_eq!(
        stdout,
        "\
UTC                   LOCAL                           WINDOW      NOTE
2026-06-05T09:00:00Z  Fri 2026-06-05 17:00:00 +08:00  2026-06-05
2026-06-08T09:00:00Z  Mon 2026-06-08 17:00:00 +08:00  2026-06-08
2026-06-09T09:00:00Z  Tue 2026-06-09 17:00:00 +08:00  2026-06-09
2026-06-10T09:00:00Z  Wed 2026-06-10 17:00:00 +08:00  2026-06-10
2026-06-11T09:00:00Z  Thu 2026-06-11 17:00:00 +08:00  2026-06-11
"
    );
}

#[test]
fn weekdays_in_shanghai_as_json() {
    let fires = cron_json("0 17 * * 1-5", "Asia/Shanghai", "2026-06-05T00:00:00Z", 5, &[]);
    let expected: Vec<Fire> = ["05", "08", "09", "10", "11"]
        .iter()
        .map(|d| {
            fire(
                &format!("2026-06-{d}T09:00:00Z"),
                &format!("2026-06-{d}T17:00:00+08:00"),
                &format!("2026-06-{d}"),
                None,
            )
        })
        .collect();
    assert_eq!(fires, expected);
}

#[test]
fn fires_are_strictly_after_the_after_instant() {
    // --after exactly at Friday's 17:00 Shanghai: Friday is not listed.
    let fires = cron_json(
        "0 17 * * 1-5",
        "Asia/Shanghai",
        "2026-06-05T17:00:00+08:00",
        1,
        &[],
    );
    assert_eq!(fires[0].utc, "2026-06-08T09:00:00Z");
}

#[test]
fn spring_forward_pinned_shifts_by_default_and_skip_drops_it() {
    let after = "2026-03-07T00:00:00-05:00";
    let shifted = cron_json("30 2 * * *", NY, after, 3, &[]);
    assert_eq!(
        shifted,
        [
            fire(
                "2026-03-07T07:30:00Z",
                "2026-03-07T02:30:00-05:00",
                "2026-03-07",
                None
            ),
            fire(
                "2026-03-08T07:00:00Z",
                "2026-03-08T03:00:00-04:00",
                "2026-03-08",
                Some("dst_shifted")
            ),
            fire(
                "2026-03-09T06:30:00Z",
                "2026-03-09T02:30:00-04:00",
                "2026-03-09",
                None
            ),
        ]
    );
    // `shift` spelled out is the default.
    assert_eq!(
        cron_json("30 2 * * *", NY, after, 3, &["--dst-gap", "shift"]),
        shifted
    );

    let skipped = cron_json("30 2 * * *", NY, after, 3, &["--dst-gap", "skip"]);
    let days: Vec<&str> = skipped.iter().map(|f| f.window_key.as_str()).collect();
    assert_eq!(days, ["2026-03-07", "2026-03-09", "2026-03-10"]);
    assert!(skipped.iter().all(|f| f.note.is_none()), "{skipped:?}");
}

#[test]
fn spring_forward_hourly_continues_in_real_time() {
    let fires = cron_json("0 * * * *", NY, "2026-03-08T00:30:00-05:00", 3, &[]);
    assert_eq!(
        fires,
        [
            fire(
                "2026-03-08T06:00:00Z",
                "2026-03-08T01:00:00-05:00",
                "2026-03-08T01:00-05:00",
                None
            ),
            fire(
                "2026-03-08T07:00:00Z",
                "2026-03-08T03:00:00-04:00",
                "2026-03-08T03:00-04:00",
                None
            ),
            fire(
                "2026-03-08T08:00:00Z",
                "2026-03-08T04:00:00-04:00",
                "2026-03-08T04:00-04:00",
                None
            ),
        ]
    );
}

#[test]
fn fall_back_pinned_fires_once_per_fold_policy() {
    let after = "2026-10-31T12:00:00-04:00";
    let edt = || {
        fire(
            "2026-11-01T05:30:00Z",
            "2026-11-01T01:30:00-04:00",
            "2026-11-01",
            None,
        )
    };
    let est = || {
        fire(
            "2026-11-01T06:30:00Z",
            "2026-11-01T01:30:00-05:00",
            "2026-11-01",
            None,
        )
    };
    let next_day = || {
        fire(
            "2026-11-02T06:30:00Z",
            "2026-11-02T01:30:00-05:00",
            "2026-11-02",
            None,
        )
    };
    let noted = |f: Fire| Fire {
        note: Some("dst_fold_skipped".into()),
        ..f
    };

    // Default (= first): one fire that day, the EDT one; the other is noted.
    let first = vec![noted(edt()), next_day()];
    assert_eq!(cron_json("30 1 * * *", NY, after, 2, &[]), first);
    assert_eq!(
        cron_json("30 1 * * *", NY, after, 2, &["--dst-fold", "first"]),
        first
    );

    assert_eq!(
        cron_json("30 1 * * *", NY, after, 2, &["--dst-fold", "last"]),
        [noted(est()), next_day()]
    );

    // Both: two fires, two distinct windows.
    let both = cron_json("30 1 * * *", NY, after, 3, &["--dst-fold", "both"]);
    assert_eq!(
        both,
        [
            edt(),
            Fire {
                window_key: "2026-11-01T01:30-05:00".into(),
                ..est()
            },
            next_day(),
        ]
    );
    assert_ne!(both[0].window_key, both[1].window_key);
}

#[test]
fn fall_back_hourly_fires_both_one_oclocks_as_distinct_windows() {
    let fires = cron_json("0 * * * *", NY, "2026-11-01T00:30:00-04:00", 3, &[]);
    assert_eq!(
        fires,
        [
            fire(
                "2026-11-01T05:00:00Z",
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T01:00-04:00",
                None
            ),
            fire(
                "2026-11-01T06:00:00Z",
                "2026-11-01T01:00:00-05:00",
                "2026-11-01T01:00-05:00",
                None
            ),
            fire(
                "2026-11-01T07:00:00Z",
                "2026-11-01T02:00:00-05:00",
                "2026-11-01T02:00-05:00",
                None
            ),
        ]
    );
}

// ---------------------------------------------------------------- SCHEDULE

/// `report` daily 09:00 Shanghai on calendar `cn` (non-business days skipped;
/// Sunday 2026-09-27 a make-up workday; 10-01 and 10-02 holidays); `payroll`
/// weekdays 09:00 on the same calendar, moved to the next business day;
/// `follow-up` on an event.
const CONFIG: &str = r#"
[agents.sim]
kind = "command"
command = ["true"]

[calendars.cn]
weekend = ["SAT", "SUN"]
holidays = ["2026-10-01", "2026-10-02"]
workdays = ["2026-09-27"]

[[schedule]]
id = "report"
agent = "sim"
cron = "0 9 * * *"
timezone = "Asia/Shanghai"
calendar = "cn"

[[schedule]]
id = "payroll"
agent = "sim"
cron = "0 9 * * MON-FRI"
timezone = "Asia/Shanghai"
calendar = "cn"
non_business_day = "next_business_day"

[[schedule]]
id = "follow-up"
agent = "sim"
after_event = "ticket.created"
delay = "30m"
"#;

struct Config {
    _dir: TempDir,
    path: PathBuf,
}

fn config() -> Config {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentcron.toml");
    std::fs::write(&path, CONFIG).unwrap();
    Config { _dir: dir, path }
}

fn path_arg(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// `--config C next ARGS` (global flags may follow the verb).
fn with_config<'a>(c: &'a Config, args: &[&'a str]) -> Vec<&'a str> {
    [args, &["--config", path_arg(&c.path)]].concat()
}

#[test]
fn schedule_with_calendar_notes_skipped_days() {
    let c = config();
    let fires = next_json(&with_config(
        &c,
        &["report", "--after", "2026-09-25T12:00:00+08:00", "--count", "8"],
    ));
    let days: Vec<(&str, Option<&str>)> = fires
        .iter()
        .map(|f| (f.window_key.as_str(), f.note.as_deref()))
        .collect();
    let skipped = Some("calendar_skipped");
    assert_eq!(
        days,
        [
            ("2026-09-26", skipped), // Saturday
            ("2026-09-27", None),    // Sunday, make-up workday
            ("2026-09-28", None),
            ("2026-09-29", None),
            ("2026-09-30", None),
            ("2026-10-01", skipped), // holiday
            ("2026-10-02", skipped), // holiday
            ("2026-10-03", skipped), // Saturday
        ]
    );
    assert_eq!(
        fires[0],
        fire(
            "2026-09-26T01:00:00Z",
            "2026-09-26T09:00:00+08:00",
            "2026-09-26",
            skipped
        )
    );
}

#[test]
fn schedule_with_calendar_moves_holidays_to_the_next_business_day() {
    let c = config();
    let args = with_config(
        &c,
        &["payroll", "--after", "2026-09-30T12:00:00+08:00", "--count", "3"],
    );
    let moved = |key: &str| {
        fire(
            "2026-10-05T01:00:00Z",
            "2026-10-05T09:00:00+08:00",
            key,
            Some("calendar_moved"),
        )
    };
    // Each holiday keeps its own window, opened on Monday 10-05, then Monday's own.
    assert_eq!(
        next_json(&args),
        [
            moved("2026-10-01"),
            moved("2026-10-02"),
            fire(
                "2026-10-05T01:00:00Z",
                "2026-10-05T09:00:00+08:00",
                "2026-10-05",
                None
            ),
        ]
    );
    assert_eq!(
        next_ok(&args),
        "\
UTC                   LOCAL                           WINDOW      NOTE
2026-10-05T01:00:00Z  Mon 2026-10-05 09:00:00 +08:00  2026-10-01  calendar_moved
2026-10-05T01:00:00Z  Mon 2026-10-05 09:00:00 +08:00  2026-10-02  calendar_moved
2026-10-05T01:00:00Z  Mon 2026-10-05 09:00:00 +08:00  2026-10-05
"
    );
}

#[test]
fn event_triggered_schedule_has_no_fixed_fires() {
    let c = config();
    assert_eq!(next_json(&with_config(&c, &["follow-up"])), []);
    let stdout = next_ok(&with_config(&c, &["follow-up"]));
    assert!(stdout.contains("event trigger"), "{stdout}");
}

// ---------------------------------------------------------------- errors

const HOURLY: [&str; 2] = ["--cron", "0 * * * *"];

#[test]
fn bad_after_is_a_usage_error() {
    for bad in ["yesterday", "2026-13-01T00:00:00Z"] {
        next_fails(
            &[&HOURLY[..], &["--after", bad]].concat(),
            2,
            &["agentcron next:", bad, "RFC 3339"],
        );
    }
}

#[test]
fn unknown_zone_is_a_usage_error() {
    next_fails(
        &[&HOURLY[..], &["--tz", "Mars/Olympus"]].concat(),
        2,
        &["unknown time zone", "Mars/Olympus", "IANA"],
    );
}

#[test]
fn invalid_expressions_are_usage_errors() {
    for (expr, says) in [
        ("0 25 * * *", "invalid cron expression"),
        ("bogus", "has 1 fields"),
        ("0 0 0 1 1 * 2026 5", "has 8 fields"),
        ("0 0 30 2 *", "never fires"),
    ] {
        next_fails(
            &["--cron", expr, "--after", "2026-01-01T00:00:00Z"],
            2,
            &["agentcron next:", expr, says],
        );
    }
}

#[test]
fn unknown_schedule_does_not_hold_and_lists_the_ids() {
    let c = config();
    next_fails(
        &with_config(&c, &["nosuch"]),
        1,
        &["no schedule `nosuch`", "report, payroll, follow-up"],
    );
}

#[test]
fn missing_config_cannot_be_opened() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.toml");
    next_fails(
        &["report", "--config", path_arg(&missing)],
        2,
        &["cannot read config", "absent.toml"],
    );
}

#[test]
fn neither_schedule_nor_cron_is_a_usage_error() {
    // clap's own error: its first line says what is missing, usage lines follow.
    let out = run(&["next", "--count", "3"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stdout, "");
    let first = out.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error:") && out.stderr.contains("<SCHEDULE|--cron <CRON>>"),
        "{}",
        out.stderr
    );
}

#[test]
fn cron_flags_with_a_schedule_are_a_usage_error_not_ignored() {
    let c = config();
    let line = next_fails(
        &with_config(&c, &["report", "--tz", "UTC"]),
        2,
        &[
            "--tz applies only to --cron",
            "schedule `report`",
            "configured timezone",
        ],
    );
    assert!(!line.contains("--dst"), "{line}");
    next_fails(
        &with_config(&c, &["report", "--dst-gap", "skip", "--dst-fold", "both"]),
        2,
        &["--dst-gap, --dst-fold apply only to --cron", "DST policy"],
    );
}

#[test]
fn count_is_capped_at_ten_thousand() {
    let after = ["--after", "2026-01-01T00:00:00Z"];
    let fires = next_json(&[&HOURLY[..], &after, &["--count", "10000"]].concat());
    assert_eq!(fires.len(), 10_000);
    // Hourly in UTC: the 10,000th fire is 10,000 hours after midnight.
    assert_eq!(fires[9_999].utc, "2027-02-21T16:00:00Z");
    next_fails(
        &[&HOURLY[..], &after, &["--count", "10001"]].concat(),
        2,
        &["--count 10001", "10000"],
    );
}
