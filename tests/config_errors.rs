//! The config loader from the outside: every file in `tests/bad-configs/` must be
//! refused with located diagnostics (exact line and column), the files in
//! `tests/good-configs/` must load with the documented defaults and resolved paths,
//! and `agentcron check` must turn both into the right exit codes and output.

use agentcron::config::{
    AgentKind, AlertSink, Anchor, Backoff, Catchup, CompareOp, CredentialSource, DeliveryKind, Diagnostic,
    DstFold, DstGap, ErrorClass, ExpectValue, GateKind, LoadError, NonBusinessDay, OnFail, Overlap,
    TriggerConfig, load_file, load_str,
};
use assert_cmd::cargo::cargo_bin_cmd;
use chrono::{NaiveDate, Weekday};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn corpus(dir: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir)
        .join(name)
}

fn bad(name: &str) -> Vec<Diagnostic> {
    let path = corpus("bad-configs", &format!("{name}.toml"));
    match load_file(&path) {
        Ok(_) => panic!("{name}.toml loaded but should be refused"),
        Err(LoadError::Invalid(diags)) => diags,
        Err(e) => panic!("{name}.toml: expected diagnostics, got {e}"),
    }
}

/// The single diagnostic of a file that has exactly one problem.
fn only(name: &str) -> Diagnostic {
    let diags = bad(name);
    assert_eq!(
        diags.len(),
        1,
        "{name}.toml should have exactly one problem, got:\n{}",
        render(&diags)
    );
    diags.into_iter().next().unwrap()
}

fn render(diags: &[Diagnostic]) -> String {
    diags.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")
}

#[track_caller]
fn assert_diag(d: &Diagnostic, line: usize, col: usize, message: &str) {
    assert_eq!((d.line, d.col), (line, col), "wrong location for: {d}");
    assert!(
        d.message.contains(message),
        "message of `{d}` should contain `{message}`"
    );
}

#[track_caller]
fn assert_help(d: &Diagnostic, help: &str) {
    let got = d.help.as_deref().unwrap_or("");
    assert!(got.contains(help), "help of `{d}` should contain `{help}`");
}

// ----- one problem per file ---------------------------------------------------------

#[test]
fn unknown_top_level_key() {
    let d = only("unknown-top-key");
    assert_diag(&d, 5, 3, "unknown key `schedules`");
    assert_help(&d, "did you mean `schedule`?");
}

#[test]
fn misspelled_schedule_key_suggests_the_right_one() {
    let d = only("unknown-schedule-key");
    assert_diag(&d, 9, 1, "unknown key `chek_every` in schedule `daily`");
    assert_eq!(d.help.as_deref(), Some("did you mean `check_every`?"));
}

#[test]
fn unknown_gate_key() {
    let d = only("unknown-gate-key");
    assert_diag(&d, 12, 1, "unknown key `timout`");
    assert_help(&d, "did you mean `timeout`?");
}

#[test]
fn key_of_another_gate_kind() {
    let d = only("gate-key-wrong-kind");
    assert_diag(
        &d,
        13,
        1,
        "`query` does not apply to a gate of kind `file_exists`",
    );
    assert_help(&d, "`path`");
}

#[test]
fn unknown_gate_kind() {
    let d = only("unknown-gate-kind");
    assert_diag(&d, 11, 8, "`file_exist` is not a valid `kind`");
    assert_help(&d, "did you mean `file_exists`?");
}

#[test]
fn bad_duration() {
    assert_diag(&only("bad-duration"), 9, 15, "unknown unit `x` in duration `5x`");
}

#[test]
fn duration_written_as_integer() {
    let d = only("duration-as-integer");
    assert_diag(&d, 2, 9, "`lease` must be a duration string");
    assert_help(&d, "lease = \"60s\"");
}

#[test]
fn bad_zone_with_suggestion() {
    let d = only("bad-zone");
    assert_diag(&d, 9, 12, "unknown time zone `Asia/Shangai`");
    assert_eq!(d.help.as_deref(), Some("did you mean `Asia/Shanghai`?"));
    let d = only("bad-scheduler-zone");
    assert_diag(&d, 2, 12, "unknown time zone `Europe/Berln`");
    assert_help(&d, "`Europe/Berlin`");
}

#[test]
fn bad_cron() {
    assert_diag(&only("bad-cron"), 8, 8, "invalid cron expression `0 25 * * *`");
}

#[test]
fn duplicate_schedule_id_points_at_the_second() {
    let d = only("duplicate-id");
    assert_diag(&d, 11, 6, "duplicate schedule id `daily`");
    assert_help(&d, "line 6");
}

#[test]
fn missing_agent() {
    let d = only("missing-agent");
    assert_diag(&d, 7, 9, "unknown agent `reportr`");
    assert_help(&d, "did you mean `reporter`?");
}

#[test]
fn missing_calendar() {
    let d = only("missing-calendar");
    assert_diag(&d, 12, 12, "unknown calendar `us-workdays`");
    assert_help(&d, "`cn-workdays`");
}

#[test]
fn undeclared_tenant() {
    let d = only("undeclared-tenant");
    assert_diag(&d, 7, 10, "tenant `acme` is not declared");
    assert_help(&d, "[tenants.acme]");
}

#[test]
fn two_trigger_kinds() {
    assert_diag(&only("two-triggers"), 5, 1, "has 2 triggers (`cron`, `every`)");
}

#[test]
fn no_trigger() {
    let d = only("no-trigger");
    assert_diag(&d, 5, 1, "schedule `daily` has no trigger");
    assert_help(&d, "`cron`, `every`, `after_event`");
}

#[test]
fn anchor_without_every() {
    assert_diag(
        &only("anchor-without-every"),
        9,
        1,
        "`anchor` only applies to an `every` trigger",
    );
}

#[test]
fn delay_without_after_event() {
    assert_diag(
        &only("delay-without-after-event"),
        9,
        1,
        "`delay` only applies to an `after_event` trigger",
    );
}

#[test]
fn after_event_without_delay() {
    assert_diag(
        &only("after-event-without-delay"),
        5,
        1,
        "has `after_event` but no `delay`",
    );
}

#[test]
fn close_after_shorter_than_check_every() {
    assert_diag(
        &only("close-after-short"),
        10,
        15,
        "`close_after` (1m) is shorter than `check_every` (5m)",
    );
}

#[test]
fn bad_enum_lists_the_allowed_values() {
    let d = only("bad-enum");
    assert_diag(&d, 9, 11, "`sometimes` is not a valid `overlap`");
    assert_help(
        &d,
        "`skip`, `buffer_one`, `buffer_all`, `cancel_previous`, `allow`",
    );
}

#[test]
fn jitter_out_of_range() {
    assert_diag(
        &only("jitter-too-large"),
        9,
        38,
        "`jitter` must be between 0 and 1",
    );
}

#[test]
fn max_attempts_zero() {
    assert_diag(
        &only("max-attempts-zero"),
        11,
        16,
        "`max_attempts` must be at least 1",
    );
}

#[test]
fn retry_initial_over_max() {
    assert_diag(
        &only("retry-initial-over-max"),
        9,
        21,
        "`retry.initial` (2h) is longer than `retry.max` (1h)",
    );
}

#[test]
fn circuit_open_after_zero() {
    assert_diag(
        &only("circuit-open-after-zero"),
        9,
        26,
        "`open_after` must be at least 1",
    );
}

#[test]
fn budget_values_must_be_positive() {
    let d = bad("budget-zero");
    assert_eq!(d.len(), 2, "{}", render(&d));
    assert_diag(&d[0], 9, 25, "`max_tokens` must be at least 1");
    assert_diag(&d[1], 9, 47, "`max_cost_per_day` must be greater than 0");
}

#[test]
fn bad_expect() {
    assert_diag(
        &only("bad-expect"),
        14,
        10,
        "expect `more than 0` must start with a comparison",
    );
}

#[test]
fn empty_command_argv() {
    assert_diag(&only("empty-argv"), 3, 11, "`command` must not be empty");
}

#[test]
fn command_as_shell_string() {
    let d = only("command-as-string");
    assert_diag(&d, 3, 11, "`command` must be an argv array, not a string");
    assert_help(&d, r#"command = ["python3", "report.py"]"#);
}

#[test]
fn toml_syntax_error() {
    assert_diag(&only("syntax-error"), 6, 12, "invalid TOML");
}

#[test]
fn holidays_file_errors_point_into_that_file() {
    let d = only("bad-holidays-file");
    assert!(
        d.file.ends_with("bad-configs/bad-holidays.txt"),
        "{}",
        d.file.display()
    );
    assert_diag(&d, 4, 3, "`2026-1O-03` is not a date");
}

#[test]
fn wrong_value_type() {
    assert_diag(
        &only("wrong-type"),
        2,
        11,
        "`workers` must be an integer, not a string",
    );
}

#[test]
fn workers_zero() {
    assert_diag(&only("workers-zero"), 2, 11, "`workers` must be at least 1");
}

#[test]
fn missing_required_key_points_at_the_table() {
    assert_diag(
        &only("missing-required-key"),
        5,
        1,
        "schedule `daily` is missing the required key `agent`",
    );
}

#[test]
fn duplicate_gate_name() {
    let d = only("duplicate-gate-name");
    assert_diag(&d, 13, 1, "gate name `previous_run_finished` is used twice");
    assert_help(&d, "line 10");
}

#[test]
fn credential_gate_with_both_sources() {
    assert_diag(
        &only("credential-both"),
        13,
        1,
        "takes `file` or `command`, not both",
    );
}

#[test]
fn calendar_gate_without_a_calendar() {
    assert_diag(
        &only("calendar-gate-without-calendar"),
        10,
        1,
        "has no calendar to check",
    );
}

#[test]
fn maintenance_names_an_unknown_schedule() {
    assert_diag(
        &only("maintenance-unknown-schedule"),
        14,
        23,
        "unknown schedule `dialy-x`",
    );
}

#[test]
fn schedule_written_with_single_brackets() {
    let d = only("schedule-single-brackets");
    assert_diag(&d, 5, 1, "`schedule` must be an array of tables");
    assert_help(&d, "[[schedule]]");
}

#[test]
fn every_problem_in_a_file_is_reported_in_file_order() {
    let d = bad("many-problems");
    let got: Vec<(usize, usize)> = d.iter().map(|d| (d.line, d.col)).collect();
    assert_eq!(
        got,
        vec![
            (2, 12),
            (3, 1),
            (7, 11),
            (9, 1),
            (14, 11),
            (15, 26),
            (15, 38),
            (21, 10),
            (24, 6),
            (25, 9),
            (27, 15)
        ],
        "{}",
        render(&d)
    );
    assert_diag(&d[0], 2, 12, "unknown time zone `Mars/Olympus`");
    assert_diag(&d[1], 3, 1, "unknown key `wrokers`");
    assert_diag(&d[3], 9, 1, "2 triggers");
    assert_diag(&d[8], 24, 6, "duplicate schedule id `daily`");
    assert_diag(&d[9], 25, 9, "unknown agent `ghost`");
}

#[test]
fn corpus_is_large_and_every_file_is_refused() {
    let dir = corpus("bad-configs", "");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let err = load_file(&path).expect_err(&path.display().to_string());
            let LoadError::Invalid(diags) = err else {
                panic!("{}: not a diagnostic", path.display())
            };
            assert!(!diags.is_empty());
            for d in &diags {
                assert!(d.line >= 1 && d.col >= 1, "{d}");
                assert!(d.to_string().contains(": error: "), "{d}");
            }
            n += 1;
        }
    }
    assert!(n >= 20, "only {n} broken configs");
}

// ----- valid configs ----------------------------------------------------------------

#[test]
fn full_config_parses_with_defaults_and_resolved_paths() {
    let path = corpus("good-configs", "full.toml");
    let dir = corpus("good-configs", "");
    let dir = dir.as_path();
    let c = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.dir, dir);

    let s = &c.scheduler;
    assert_eq!(s.timezone, chrono_tz::Asia::Shanghai);
    assert_eq!(s.database, dir.join("state/agentcron.db"));
    assert_eq!((s.workers, s.backfill_workers), (6, 3));
    assert_eq!(s.lease, Duration::from_secs(90));
    assert_eq!(s.memory_runs, 10);
    assert_eq!(s.shutdown_grace, Duration::from_secs(45));
    assert_eq!(
        s.alert,
        Some(AlertSink::File {
            path: dir.join("alerts.jsonl")
        })
    );

    let cal = &c.calendars["cn-workdays"];
    assert!(cal.weekend[Weekday::Sat.num_days_from_monday() as usize]);
    assert!(cal.weekend[Weekday::Sun.num_days_from_monday() as usize]);
    assert!(!cal.weekend[Weekday::Mon.num_days_from_monday() as usize]);
    let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    for h in ["2026-10-01", "2026-10-02", "2026-10-05", "2026-10-08"] {
        assert!(cal.holidays.contains(&day(h)), "{h}");
    }
    assert!(cal.workdays.contains(&day("2026-09-27")));
    assert_eq!(c.calendars["plain"].weekend, {
        let mut w = [false; 7];
        w[5] = true;
        w[6] = true;
        w
    });
    assert_eq!(c.tenants["acme"].max_concurrent, Some(4));

    let reporter = &c.agents["sales-reporter"];
    assert_eq!(
        reporter.kind,
        AgentKind::Command {
            command: vec!["python3".into(), "agents/report.py".into()]
        }
    );
    assert_eq!(reporter.timeout, Duration::from_secs(900));
    assert_eq!(reporter.env["CHANNEL"], "ops");
    assert!(reporter.verify);
    assert!(reporter.is_side_effect("deliver") && !reporter.is_side_effect("fetch"));
    let local = &c.agents["local-script"];
    let program = dir.join("bin/agent.sh").to_string_lossy().into_owned();
    assert_eq!(
        local.kind,
        AgentKind::Command {
            command: vec![program, "--flag".into()]
        }
    );
    let minimal = &c.agents["minimal"];
    assert_eq!(minimal.timeout, Duration::from_secs(600));
    assert!(!minimal.verify && minimal.env.is_empty() && minimal.steps.is_empty());
    assert_eq!(
        c.agents["remote"].kind,
        AgentKind::Http {
            url: "http://127.0.0.1:8700/agent".into()
        }
    );

    let daily = c.schedule("daily-sales-report").unwrap();
    assert_eq!(daily.tenant, "acme");
    assert_eq!(daily.owner.as_deref(), Some("ops@acme.example"));
    assert_eq!(
        daily.payload,
        serde_json::json!({"report": "sales", "limits": [1, 2.5], "nested": {"on": true}})
    );
    assert!(matches!(&daily.trigger, TriggerConfig::Cron(c) if c.expr() == "0 9 * * MON-FRI"));
    assert_eq!(daily.timezone, chrono_tz::Europe::Berlin);
    assert_eq!(daily.calendar.as_deref(), Some("cn-workdays"));
    assert_eq!(daily.non_business_day, NonBusinessDay::NextBusinessDay);
    assert_eq!((daily.dst_gap, daily.dst_fold), (DstGap::Skip, DstFold::Both));
    assert_eq!(daily.check_every, Duration::from_secs(300));
    assert_eq!(daily.close_after, Duration::from_secs(3600));
    assert_eq!(daily.overlap, Overlap::BufferOne);
    assert_eq!(daily.max_concurrency, 2);
    assert_eq!(daily.catchup, Catchup::Latest);
    assert_eq!(daily.catchup_window, Duration::from_secs(24 * 3600));
    assert_eq!(daily.default_error_class, ErrorClass::NonRetryable);
    assert_eq!(daily.retry.max_attempts, 5);
    assert_eq!(daily.retry.backoff, Backoff::Fixed);
    assert_eq!(
        (daily.retry.initial, daily.retry.max),
        (Duration::from_secs(300), Duration::from_secs(3600))
    );
    assert_eq!(daily.retry.jitter, 0.2);
    assert_eq!(
        (daily.circuit.open_after, daily.circuit.cool_down),
        (4, Duration::from_secs(600))
    );
    assert_eq!(daily.budget.max_runtime, Some(Duration::from_secs(900)));
    assert_eq!(daily.budget.max_tokens, Some(200_000));
    assert_eq!(daily.budget.max_cost_per_day, Some(5.0));
    assert_eq!(daily.budget.runtime_error_class, ErrorClass::NeedsHuman);
    assert_eq!(daily.approval_ttl, Some(Duration::from_secs(8 * 3600)));

    let names: Vec<&str> = daily.gates.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "previous_run_finished",
            "upstream_partition_ready",
            "command",
            "file_exists",
            "http",
            "credential_valid",
            "cli-token",
            "calendar"
        ]
    );
    let g = &daily.gates;
    assert_eq!(
        (g[0].on_fail, g[0].timeout),
        (OnFail::Fail, Duration::from_secs(30))
    );
    assert_eq!(
        (g[1].on_fail, g[1].timeout),
        (OnFail::Human, Duration::from_secs(10))
    );
    match &g[1].kind {
        GateKind::SqliteQuery {
            database,
            query,
            expect,
        } => {
            assert_eq!(database, &dir.join("warehouse.db"));
            assert!(query.contains(":window_start"));
            assert_eq!(
                (expect.op, &expect.value),
                (CompareOp::Gt, &ExpectValue::Number(0.0))
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(g[2].on_fail, OnFail::Skip);
    assert_eq!(
        g[2].kind,
        GateKind::Command {
            command: vec!["sh".into(), "agents/check-token.sh".into()]
        }
    );
    assert_eq!(
        g[3].kind,
        GateKind::FileExists {
            path: "/data/export.csv".into(),
            min_size: Some(10),
            newer_than_window: true
        }
    );
    match &g[4].kind {
        GateKind::Http {
            url,
            status,
            json_pointer,
            expect,
            ..
        } => {
            assert_eq!(url, "https://example.com/health");
            assert_eq!(*status, 200);
            assert_eq!(json_pointer.as_deref(), Some("/status"));
            assert_eq!(
                expect.as_ref().map(|e| &e.value),
                Some(&ExpectValue::Text("ready".into()))
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        g[5].kind,
        GateKind::CredentialValid {
            source: CredentialSource::File(dir.join("secrets/token.expiry")),
            min_remaining: Duration::from_secs(3600)
        }
    );
    let expiry = dir.join("tools/expiry").to_string_lossy().into_owned();
    assert_eq!(
        g[6].kind,
        GateKind::CredentialValid {
            source: CredentialSource::Command(vec![expiry, "--json".into()]),
            min_remaining: Duration::ZERO
        }
    );
    assert_eq!(g[7].kind, GateKind::Calendar { calendar: None });

    let deliveries: Vec<(&str, &DeliveryKind)> = daily
        .deliveries
        .iter()
        .map(|d| (d.name.as_str(), &d.kind))
        .collect();
    assert_eq!(deliveries[0].0, "deliver");
    assert!(
        matches!(deliveries[0].1, DeliveryKind::Webhook { url, headers } if url == "http://127.0.0.1:8700/hook" && headers["Authorization"] == "Bearer x")
    );
    assert_eq!(
        deliveries[1],
        (
            "deliver-2",
            &DeliveryKind::File {
                path: dir.join("out/reports.jsonl")
            }
        )
    );
    assert_eq!(
        deliveries[2],
        (
            "notify",
            &DeliveryKind::Command {
                command: vec!["notify-send".into()]
            }
        )
    );

    // Defaults of a schedule that sets almost nothing.
    let poll = c.schedule("poll").unwrap();
    assert!(matches!(
        poll.trigger,
        TriggerConfig::Every { interval, anchor: Anchor::LastStart } if interval == Duration::from_secs(600)
    ));
    assert_eq!(poll.tenant, "default");
    assert_eq!(
        poll.timezone,
        chrono_tz::Asia::Shanghai,
        "schedules default to the scheduler zone"
    );
    assert_eq!(poll.calendar, None);
    assert_eq!(
        (poll.check_every, poll.close_after),
        (Duration::from_secs(60), Duration::from_secs(60))
    );
    assert_eq!(poll.overlap, Overlap::Skip);
    assert_eq!(poll.max_concurrency, 1);
    assert_eq!(poll.catchup, Catchup::All);
    assert_eq!(poll.catchup_window, Duration::from_secs(72 * 3600));
    assert_eq!(poll.default_error_class, ErrorClass::Retryable);
    assert_eq!(poll.retry, Default::default());
    assert_eq!(poll.circuit, Default::default());
    assert_eq!(poll.budget, Default::default());
    assert_eq!(poll.approval_ttl, None);
    assert_eq!(poll.payload, serde_json::json!({}));
    assert!(poll.gates.is_empty() && poll.deliveries.is_empty());

    let follow = c.schedule("follow-up").unwrap();
    assert!(matches!(
        &follow.trigger,
        TriggerConfig::AfterEvent { event, delay } if event == "ticket_opened" && *delay == Duration::from_secs(1800)
    ));
    let on_demand = c.schedule("on-demand").unwrap();
    assert!(matches!(&on_demand.trigger, TriggerConfig::OnEvent { event } if event == "deploy"));
    assert_eq!(on_demand.payload, serde_json::json!("just a string"));

    assert_eq!(c.maintenance.len(), 2);
    let m = &c.maintenance[0];
    assert_eq!(m.name, "db-upgrade");
    assert_eq!(m.cron.expr(), "0 2 * * SUN");
    assert_eq!(m.duration, Duration::from_secs(7200));
    assert_eq!(m.timezone, chrono_tz::Asia::Shanghai);
    assert_eq!(m.schedules, ["poll", "on-demand"]);
    assert_eq!(m.reason, "weekly database maintenance");
    assert_eq!(c.maintenance[1].timezone, chrono_tz::UTC);
    assert!(c.maintenance[1].schedules.is_empty());
}

#[test]
fn empty_config_gets_scheduler_defaults() {
    let c = load_str("", Path::new("/etc/agentcron/agentcron.toml")).unwrap();
    assert_eq!(c.scheduler.timezone, chrono_tz::UTC);
    assert_eq!(c.scheduler.database, PathBuf::from("/etc/agentcron/agentcron.db"));
    assert_eq!((c.scheduler.workers, c.scheduler.backfill_workers), (8, 4));
    assert_eq!(c.scheduler.lease, Duration::from_secs(60));
    assert_eq!(c.scheduler.alert, None);
    assert!(c.schedules.is_empty() && c.agents.is_empty());
}

#[test]
fn load_str_names_the_given_path_in_diagnostics() {
    let Err(LoadError::Invalid(d)) = load_str("[scheduler]\nworkers = 0\n", Path::new("conf/x.toml")) else {
        panic!("expected diagnostics")
    };
    assert_eq!(d[0].file, PathBuf::from("conf/x.toml"));
    assert_eq!(
        d[0].to_string(),
        "conf/x.toml:2:11: error: `workers` must be at least 1, not 0"
    );
}

#[test]
fn missing_file_is_an_io_error() {
    let path = corpus("good-configs", "does-not-exist.toml");
    match load_file(&path) {
        Err(LoadError::Io { path: p, message }) => {
            assert_eq!(p, path);
            assert!(!message.is_empty());
        }
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn invalid_utf8_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentcron.toml");
    std::fs::write(&path, b"[scheduler]\nworkers = \"\xff\"\n").unwrap();
    let Err(LoadError::Invalid(d)) = load_file(&path) else {
        panic!("expected diagnostics")
    };
    assert_diag(&d[0], 2, 12, "not valid UTF-8");
}

// ----- agentcron check ----------------------------------------------------------------

#[test]
fn check_valid_config_exits_0_with_summary() {
    let path = corpus("good-configs", "full.toml");
    let out = cargo_bin_cmd!("agentcron")
        .arg("check")
        .arg("--config")
        .arg(&path)
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    // Issue 19: valid, but the agent program and three gate files it names do
    // not exist here — warnings (exit 0), each at its value's FILE:LINE:COL.
    assert_eq!(
        stdout.trim_end(),
        format!(
            "ok: {}: 4 schedules, 4 agents, 2 calendars, 2 maintenance windows (4 warnings)",
            path.display()
        )
    );
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let p = path.display();
    for want in [
        format!("{p}:32:12: warning: agent `local-script`: program `./bin/agent.sh` does not exist: "),
        format!(
            "{p}:72:12: warning: schedule `daily-sales-report`, gate `upstream_partition_ready`: database `warehouse.db` does not exist (yet): "
        ),
        format!(
            "{p}:85:8: warning: schedule `daily-sales-report`, gate `file_exists`: path `/data/export.csv` does not exist (yet)"
        ),
        format!(
            "{p}:97:8: warning: schedule `daily-sales-report`, gate `credential_valid`: file `secrets/token.expiry` does not exist (yet)"
        ),
    ] {
        assert!(stderr.contains(&want), "missing `{want}` in:\n{stderr}");
    }

    let path = corpus("good-configs", "minimal.toml");
    let out = cargo_bin_cmd!("agentcron")
        .args(["check", "--config"])
        .arg(&path)
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.ends_with("1 schedule, 1 agent, 0 calendars\n"), "{stdout}");
}

#[test]
fn check_invalid_config_exits_1_with_located_errors() {
    let path = corpus("bad-configs", "many-problems.toml");
    let out = cargo_bin_cmd!("agentcron")
        .args(["check", "--config"])
        .arg(&path)
        .assert()
        .code(1);
    let output = out.get_output();
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let prefix = format!("{}:", path.display());
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with(&prefix)).collect();
    assert_eq!(errors.len(), 11, "{stderr}");
    assert!(
        errors[0].starts_with(&format!("{}:2:12: error: unknown time zone", path.display())),
        "{stderr}"
    );
    assert!(stderr.contains("\n  help: did you mean `workers`?\n"), "{stderr}");
    assert!(stderr.trim_end().ends_with("11 errors"), "{stderr}");
}

#[test]
fn check_missing_file_exits_2() {
    let path = corpus("good-configs", "nope.toml");
    let out = cargo_bin_cmd!("agentcron")
        .args(["check", "--config"])
        .arg(&path)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(stderr.contains("nope.toml"), "{stderr}");
}

#[test]
fn calendar_gate_does_not_repeat_a_bad_schedule_calendar() {
    let text = "[agents.a]\nkind = \"command\"\ncommand = [\"x\"]\n\n[[schedule]]\nid = \"s\"\nagent = \"a\"\non_event = \"e\"\ncalendar = \"nope\"\n\n[[schedule.gate]]\nkind = \"calendar\"\n";
    let Err(LoadError::Invalid(d)) = load_str(text, Path::new("a.toml")) else {
        panic!("expected diagnostics")
    };
    assert_eq!(d.len(), 1, "{}", render(&d));
    assert_diag(&d[0], 9, 12, "unknown calendar `nope`");
}

#[test]
fn key_of_another_agent_kind_reads_well() {
    let text = "[agents.a]\nkind = \"command\"\ncommand = [\"x\"]\nurl = \"http://x\"\n";
    let Err(LoadError::Invalid(d)) = load_str(text, Path::new("a.toml")) else {
        panic!("expected diagnostics")
    };
    assert_diag(&d[0], 4, 1, "`url` does not apply to an agent of kind `command`");
}

/// No input makes the loader panic: every prefix of the full config, and the full
/// config with each line removed or replaced by junk, loads or is refused cleanly.
#[test]
fn no_panic_on_truncated_or_mangled_configs() {
    let text = std::fs::read_to_string(corpus("good-configs", "full.toml")).unwrap();
    let path = corpus("good-configs", "full.toml");
    // Every line end and every 9th byte: enough to cut each token somewhere.
    for (i, c) in text.char_indices().filter(|(i, c)| i % 9 == 0 || *c == '\n') {
        let _ = load_str(&text[..i], &path);
        let _ = load_str(&text[..i + c.len_utf8()], &path);
    }
    let lines: Vec<&str> = text.lines().collect();
    for i in 0..lines.len() {
        for junk in ["", "x = 1", "id = []", "[[schedule.gate]]"] {
            let mut mangled = lines.clone();
            mangled[i] = junk;
            let _ = load_str(&mangled.join("\n"), &path);
        }
    }
}
