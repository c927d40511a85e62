//! Shared helpers for the `console_*` tests: a fixed `now`, a config, runs in
//! any state, a hand-built [`Snapshot`] covering every pane, a model fed with
//! it, and rendering into ratatui's `TestBackend`. Included with `#[path]` by
//! the other files; compiled alone it is an empty test crate.
#![allow(dead_code)]

use agentcron::config::model::ErrorClass;
use agentcron::config::{Config, load_str};
use agentcron::console::app::{Cmd, Init, Model, Msg, update};
use agentcron::console::panes::gates::latest_decision;
use agentcron::console::rehearsal::Progress;
use agentcron::console::snapshot::*;
use agentcron::console::theme::Theme;
use agentcron::console::view::view;
use agentcron::rehearsal::Verdict;
use agentcron::rehearsal::run::Line as TimelineLine;
use agentcron::store::*;
use chrono::{DateTime, Duration, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use std::path::Path;

pub fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("test instant")
        .with_timezone(&Utc)
}

/// Monday 2026-06-08 01:30:00 UTC = 09:30 in Shanghai: the console's "now".
pub fn now() -> DateTime<Utc> {
    t("2026-06-08T01:30:00Z")
}

pub const CONFIG: &str = r#"
[scheduler]
timezone = "Asia/Shanghai"
workers = 4
backfill_workers = 2

[tenants.acme]
max_concurrent = 2

[agents.reporter]
kind = "command"
command = ["echo"]
steps = [{ name = "fetch" }, { name = "summarize" }, { name = "deliver", side_effect = true }]

[[schedule]]
id = "daily-sales-report"
tenant = "acme"
agent = "reporter"
cron = "0 9 * * MON-FRI"
timezone = "Asia/Shanghai"
close_after = "1h"
catchup_window = "72h"
retry = { max_attempts = 3 }
budget = { max_cost_per_day = 5.0 }

[[schedule.gate]]
kind = "previous_run_finished"

[[schedule.gate]]
kind = "command"
name = "upstream_ready"
command = ["true"]

[[schedule]]
id = "hourly-sync"
tenant = "acme"
agent = "reporter"
every = "1h"
catchup_window = "24h"
retry = { max_attempts = 5 }

[[schedule]]
id = "ticket-followup"
agent = "reporter"
after_event = "ticket.created"
delay = "30m"

[[schedule]]
id = "inbox-triage"
agent = "reporter"
cron = "*/15 * * * *"

[[maintenance]]
name = "nightly-db"
cron = "0 2 * * *"
duration = "1h"
timezone = "Asia/Shanghai"
reason = "warehouse vacuum"
"#;

pub fn config() -> Config {
    load_str(CONFIG, Path::new("/nonexistent/agentcron.toml")).expect("test config is valid")
}

/// A run of `schedule` for window `key` starting at `start`, in `state`.
pub fn run(id: i64, schedule: &str, key: &str, start: DateTime<Utc>, state: RunState) -> Run {
    let tenant = if schedule == "ticket-followup" || schedule == "inbox-triage" {
        "default"
    } else {
        "acme"
    };
    Run {
        id,
        tenant: tenant.into(),
        schedule: schedule.into(),
        window_key: key.into(),
        window_start: start,
        window_end: start + Duration::hours(1),
        due_at: start,
        state,
        reason: RunReason::Scheduled,
        pool: Pool::OnTime,
        state_reason: None,
        attempts: u32::from(!matches!(
            state,
            RunState::Pending | RunState::Skipped | RunState::Missed
        )),
        not_before: None,
        next_check_at: None,
        lease_owner: None,
        lease_expires: None,
        fencing_token: id,
        error_class: None,
        last_error: None,
        resume_after: None,
        created_at: start,
        updated_at: start + Duration::minutes(5),
        hold: None,
    }
}

fn ev(id: i64, at: DateTime<Utc>, kind: &str, run: &Run, detail: serde_json::Value) -> Event {
    Event {
        id,
        at,
        kind: kind.into(),
        tenant: Some(run.tenant.clone()),
        schedule: Some(run.schedule.clone()),
        run_id: Some(run.id),
        detail,
    }
}

/// The run every pane focuses on first: today's daily report, waiting on a gate.
pub const FOCUS_RUN: i64 = 105;

/// The trace of [`FOCUS_RUN`]: window opened, two evaluations, the latest
/// waiting on `upstream_ready` and held by maintenance.
pub fn focus_events(r: &Run) -> Vec<Event> {
    let open = r.window_start;
    let second = open + Duration::minutes(5);
    vec![
        ev(1, open, "window_opened", r, json!({"window_key": r.window_key})),
        ev(
            2,
            open,
            "gate",
            r,
            json!({"name": "previous_run_finished", "result": "pass", "reason": "previous window succeeded", "ms": 1}),
        ),
        ev(
            3,
            open,
            "gate",
            r,
            json!({"name": "upstream_ready", "result": "wait", "reason": "exit 75: partition not landed", "ms": 41}),
        ),
        ev(
            4,
            open,
            "decision",
            r,
            json!({"time": "window 09:00–10:00 open", "verdict": "wait", "reason": "gate upstream_ready waits: exit 75: partition not landed",
            "switches": [{"name": "kill", "held": false, "reason": "off"}],
            "gates": [
                {"name": "previous_run_finished", "kind": "previous_run_finished", "verdict": "pass", "reason": "previous window succeeded", "elapsed_ms": 1, "on_fail": "fail"},
                {"name": "upstream_ready", "kind": "command", "verdict": "wait", "reason": "exit 75: partition not landed", "elapsed_ms": 41, "on_fail": "fail"}]}),
        ),
        ev(
            5,
            second,
            "gate",
            r,
            json!({"name": "previous_run_finished", "result": "pass", "reason": "previous window succeeded", "ms": 2}),
        ),
        ev(
            6,
            second,
            "gate",
            r,
            json!({"name": "upstream_ready", "result": "wait", "reason": "exit 75: partition 2026-06-07 has 0 rows", "ms": 38}),
        ),
        ev(
            7,
            second,
            "switch_held",
            r,
            json!({"switch": "maintenance", "reason": "nightly-db until 03:00", "verdict": "wait"}),
        ),
        ev(
            8,
            second,
            "decision",
            r,
            json!({"time": "window 09:00–10:00 open", "verdict": "wait", "reason": "gate upstream_ready waits: exit 75: partition 2026-06-07 has 0 rows",
            "switches": [{"name": "kill", "held": false, "reason": "off"}, {"name": "maintenance", "held": true, "reason": "nightly-db until 03:00"}],
            "gates": [
                {"name": "previous_run_finished", "kind": "previous_run_finished", "verdict": "pass", "reason": "previous window succeeded", "elapsed_ms": 2, "on_fail": "fail"},
                {"name": "upstream_ready", "kind": "command", "verdict": "wait", "reason": "exit 75: partition 2026-06-07 has 0 rows", "elapsed_ms": 38, "on_fail": "fail"}]}),
        ),
    ]
}

fn step(
    run: i64,
    attempt: u32,
    name: &str,
    status: StepStatus,
    side_effect: bool,
    at: DateTime<Utc>,
) -> Step {
    Step {
        run_id: run,
        attempt,
        name: name.into(),
        status,
        side_effect,
        at,
    }
}

/// A snapshot that exercises every pane: the kill switch ON, a paused
/// schedule, an open circuit, retries, approvals, backfill, maintenance.
pub fn fixed_snapshot() -> Snapshot {
    let now = now();
    let day = |d: i64| t("2026-06-08T01:00:00Z") - Duration::days(d);
    let mut daily: Vec<Run> = (1..=4)
        .map(|i| {
            let start = day(5 - i);
            let state = match i {
                2 => RunState::Failed,
                3 => RunState::Skipped,
                _ => RunState::Succeeded,
            };
            run(
                100 + i,
                "daily-sales-report",
                &start.format("%Y-%m-%d").to_string(),
                start,
                state,
            )
        })
        .collect();
    let mut focus = run(
        FOCUS_RUN,
        "daily-sales-report",
        "2026-06-08",
        day(0),
        RunState::Pending,
    );
    focus.state_reason = Some("gate upstream_ready waits".into());
    focus.attempts = 0;
    daily.push(focus.clone());

    let hour = |h: i64| t("2026-06-08T01:00:00Z") - Duration::hours(h);
    let hourly: Vec<Run> = (0..30)
        .rev()
        .map(|h| {
            let state = match h {
                0 => RunState::Running,
                1 => RunState::RetryWait,
                2 => RunState::NeedsHuman,
                5 | 6 => RunState::Dead,
                9 => RunState::Missed,
                12 => RunState::Expired,
                _ => RunState::Succeeded,
            };
            let start = hour(h);
            let key = start
                .with_timezone(&chrono_tz::Asia::Shanghai)
                .format("%Y-%m-%dT%H:%M%:z")
                .to_string();
            run(200 + (30 - h), "hourly-sync", &key, start, state)
        })
        .collect();
    let mut retry = hourly
        .iter()
        .find(|r| r.state == RunState::RetryWait)
        .cloned()
        .expect("retry run");
    retry.attempts = 2;
    retry.error_class = Some(ErrorClass::Retryable);
    retry.last_error = Some("upstream 503 Service Unavailable".into());
    retry.not_before = Some(now + Duration::seconds(252));
    let mut human = hourly
        .iter()
        .find(|r| r.state == RunState::NeedsHuman)
        .cloned()
        .expect("human run");
    human.attempts = 1;
    human.error_class = Some(ErrorClass::NeedsHuman);
    human.last_error = Some("deliver: webhook timed out after sending; outcome unknown".into());
    human.state_reason = Some("uncertain side-effect step deliver".into());
    let hourly: Vec<Run> = hourly
        .into_iter()
        .map(|r| match r.id {
            id if id == retry.id => retry.clone(),
            id if id == human.id => human.clone(),
            _ => r,
        })
        .collect();

    let mut backfill_a = run(
        301,
        "inbox-triage",
        "2026-06-06T10:00+08:00",
        t("2026-06-06T02:00:00Z"),
        RunState::Pending,
    );
    backfill_a.pool = Pool::Backfill;
    backfill_a.reason = RunReason::Catchup;
    backfill_a.state_reason = Some("catch-up after downtime".into());
    let mut backfill_b = run(
        302,
        "inbox-triage",
        "2026-06-07T23:45+08:00",
        t("2026-06-07T15:45:00Z"),
        RunState::Pending,
    );
    backfill_b.pool = Pool::Backfill;
    backfill_b.reason = RunReason::Catchup;
    let triage = vec![backfill_a.clone(), backfill_b.clone()];
    // Hours 5 and 6 of the hourly lane died: the dead-letter queue, newest first.
    let dead: Vec<RetryRow> = hourly
        .iter()
        .rev()
        .filter(|r| r.state == RunState::Dead)
        .map(|r| {
            let mut run = r.clone();
            run.attempts = 5;
            run.error_class = Some(ErrorClass::Retryable);
            run.last_error = Some("upstream 503 five times".into());
            RetryRow { run, max_attempts: 5 }
        })
        .collect();

    let follow = vec![run(
        401,
        "ticket-followup",
        "T-1042",
        t("2026-06-07T08:12:00Z"),
        RunState::Succeeded,
    )];

    let schedules = vec![
        schedule_row(
            "daily-sales-report",
            "acme",
            "cron 0 9 * * MON-FRI",
            Some(t("2026-06-09T01:00:00Z")),
            &daily,
            CircuitState::Closed,
            false,
        ),
        schedule_row(
            "hourly-sync",
            "acme",
            "every 1h",
            Some(t("2026-06-08T02:00:00Z")),
            &hourly,
            CircuitState::Open,
            false,
        ),
        schedule_row(
            "ticket-followup",
            "default",
            "after ticket.created +30m",
            None,
            &follow,
            CircuitState::Closed,
            false,
        ),
        schedule_row(
            "inbox-triage",
            "default",
            "cron */15 * * * *",
            Some(t("2026-06-08T01:45:00Z")),
            &triage,
            CircuitState::Closed,
            true,
        ),
    ];
    // What the loader derives per schedule: dead letters and approvals by
    // schedule, the oldest gate wait in the lane (the focus run waits on upstream_ready).
    let mut schedules = schedules;
    for row in &mut schedules {
        row.health.dead = dead.iter().filter(|d| d.run.schedule == row.id).count();
        row.health.needs_human = usize::from(row.id == human.schedule);
    }
    schedules[0].health.gate_wait = Some(("upstream_ready".into(), now - Duration::minutes(12)));
    let lanes = vec![
        lane("daily-sales-report", "acme", daily),
        lane("hourly-sync", "acme", hourly),
        lane("ticket-followup", "default", follow),
        lane("inbox-triage", "default", triage),
    ];
    let human_steps = vec![
        step(
            human.id,
            1,
            "fetch",
            StepStatus::Started,
            false,
            human.window_start + Duration::minutes(1),
        ),
        step(
            human.id,
            1,
            "fetch",
            StepStatus::Done,
            false,
            human.window_start + Duration::minutes(2),
        ),
        step(
            human.id,
            1,
            "deliver",
            StepStatus::Started,
            true,
            human.window_start + Duration::minutes(3),
        ),
    ];
    let events = focus_events(&focus);
    let decision = latest_decision(&events);
    Snapshot {
        source: 0,
        taken_at: now,
        last_event_id: 500,
        counts: vec![
            (RunState::Pending, 3),
            (RunState::Running, 1),
            (RunState::RetryWait, 1),
            (RunState::NeedsHuman, 1),
            (RunState::Succeeded, 27),
            (RunState::Failed, 1),
            (RunState::Dead, 2),
            (RunState::Skipped, 1),
            (RunState::Missed, 1),
            (RunState::Expired, 1),
        ],
        counts_at: Some(now),
        // The last 24 h: fewer finished runs than all time.
        recent_counts: vec![
            (RunState::Succeeded, 9),
            (RunState::Failed, 1),
            (RunState::Dead, 2),
            (RunState::Missed, 1),
        ],
        liveness: None,
        backlogs: vec![],
        schedules,
        lanes,
        retries: vec![RetryRow {
            run: retry,
            max_attempts: 5,
        }],
        dead,
        approvals: vec![ApprovalRow {
            run: human,
            steps: human_steps,
            log_tail: vec![
                "fetched 42 refunds".into(),
                "POST https://hooks.example/refunds … (no answer after 30s)".into(),
            ],
            deadline: Some(now + Duration::hours(3) + Duration::minutes(20)),
            owner: Some("finance@acme.example".into()),
        }],
        backfill: vec![
            BackfillRow {
                expires_at: Some(backfill_a.window_start + Duration::hours(72)),
                run: backfill_a,
            },
            BackfillRow {
                expires_at: Some(backfill_b.window_start + Duration::hours(72)),
                run: backfill_b,
            },
        ],
        queue_truncated: false,
        switches: SwitchBoard {
            kill: Some(Switch {
                name: "kill".into(),
                on: true,
                actor: "alice".into(),
                reason: "incident 4711: upstream sending duplicates".into(),
                at: now - Duration::minutes(12),
            }),
            others: vec![],
            paused: vec![PausedRow {
                schedule: "inbox-triage".into(),
                reason: Some("mailbox migration".into()),
            }],
            circuits: vec![CircuitRow {
                schedule: "hourly-sync".into(),
                state: CircuitState::Open,
                since: Some(now - Duration::hours(2)),
                consecutive_failures: 3,
            }],
            maintenance: vec![MaintenanceRow {
                name: "nightly-db".into(),
                from: t("2026-06-08T18:00:00Z"),
                to: t("2026-06-08T19:00:00Z"),
                reason: "warehouse vacuum".into(),
                schedules: vec![],
                active: false,
            }],
            quotas: vec![
                QuotaRow {
                    scope: "pool on_time".into(),
                    used: "1".into(),
                    limit: "4".into(),
                    full: false,
                },
                QuotaRow {
                    scope: "tenant acme".into(),
                    used: "1".into(),
                    limit: "2".into(),
                    full: false,
                },
                QuotaRow {
                    scope: "budget daily-sales-report".into(),
                    used: "$1.25".into(),
                    limit: "$5.00/day".into(),
                    full: false,
                },
            ],
        },
        focus: Some(FocusRun {
            run: focus,
            events,
            decision,
        }),
        ..Snapshot::default()
    }
}

#[allow(clippy::too_many_arguments)]
fn schedule_row(
    id: &str,
    tenant: &str,
    trigger: &str,
    next: Option<DateTime<Utc>>,
    runs: &[Run],
    circuit: CircuitState,
    paused: bool,
) -> ScheduleRow {
    ScheduleRow {
        id: id.into(),
        loaded: true,
        tenant: tenant.into(),
        trigger: trigger.into(),
        timezone: chrono_tz::Asia::Shanghai,
        next_fire: next.map(|at| NextFire {
            at,
            window_key: "k".into(),
            note: None,
        }),
        last: runs.last().map(|r| LastRun {
            id: r.id,
            state: r.state,
            window_key: r.window_key.clone(),
            updated_at: r.updated_at,
        }),
        last_terminal: runs
            .iter()
            .rev()
            .find(|r| r.state.is_terminal())
            .map(|r| LastRun {
                id: r.id,
                state: r.state,
                window_key: r.window_key.clone(),
                updated_at: r.updated_at,
            }),
        health: Health::default(),
        circuit,
        circuit_since: None,
        consecutive_failures: if circuit == CircuitState::Open { 3 } else { 0 },
        paused,
        paused_reason: paused.then(|| "mailbox migration".to_string()),
        max_attempts: 3,
        overdue: None,
        catchup_window: Duration::hours(72),
    }
}

fn lane(schedule: &str, tenant: &str, runs: Vec<Run>) -> Lane {
    Lane {
        schedule: schedule.into(),
        tenant: tenant.into(),
        loaded: true,
        runs,
    }
}

/// A fresh model at 80×24 (or `w`×`h`).
pub fn model_sized(w: u16, h: u16, read_only: bool) -> Model {
    Model::new(init(w, h, read_only))
}

pub fn init(w: u16, h: u16, read_only: bool) -> Init {
    Init {
        now: now(),
        tz: chrono_tz::Asia::Shanghai,
        mode_label: "LIVE".into(),
        read_only,
        theme_name: "dark".into(),
        width: w,
        height: h,
        rehearsal: None,
        embedded: None,
    }
}

/// A model that received [`fixed_snapshot`].
pub fn loaded_model(w: u16, h: u16) -> Model {
    let mut m = model_sized(w, h, false);
    update(&mut m, Msg::Snapshot(Box::new(fixed_snapshot())));
    m
}

/// The rehearsal fixture: the data-delay scenario half-way, its store showing
/// [`fixed_snapshot`] (kill switch off), one expectation held, one broken, two
/// pending, and what the last step did.
pub fn progress(source: u64) -> Progress {
    let verdict = |text: &str, passed: Option<bool>, detail: &str| Verdict {
        text: text.into(),
        passed,
        detail: detail.into(),
    };
    let at = t("2026-06-08T01:40:00Z");
    Progress {
        source,
        name: "data delay".into(),
        tz: chrono_tz::Asia::Shanghai,
        start: t("2026-06-08T00:30:00Z"),
        end: t("2026-06-08T03:00:00Z"),
        now: at,
        steps: 12,
        finished: false,
        verdicts: vec![
            verdict(
                "the partition gate waited (not a failure) while the data was late",
                Some(true),
                "at 2026-06-08T01:00:00Z: gate upstream_partition_ready wait",
            ),
            verdict(
                "daily-sales-report window 2026-06-08 ends succeeded",
                None,
                "now running",
            ),
            verdict(
                "daily-sales-report window 2026-06-08 takes exactly 1 attempt(s)",
                Some(false),
                "2 attempts",
            ),
            verdict(
                "side effect deliver of daily-sales-report window 2026-06-08 lands exactly 1 time(s)",
                None,
                "0 so far",
            ),
        ],
        happened: vec![
            TimelineLine {
                at,
                kind: "gate".into(),
                schedule: Some("daily-sales-report".into()),
                window: None,
                text: "gate upstream_partition_ready pass: partition landed".into(),
            },
            TimelineLine {
                at,
                kind: "claimed".into(),
                schedule: Some("daily-sales-report".into()),
                window: None,
                text: "claimed by main (attempt 1)".into(),
            },
        ],
    }
}

/// A console in rehearsal mode at `w`×`h`: opened with `:rehearse` from the
/// live console (`nested`) or started as `rehearse FILE --console`, the
/// rehearsal started ([`progress`]) and its store loaded.
pub fn rehearsal_model(w: u16, h: u16, nested: bool) -> Model {
    let mut m = if nested {
        let mut m = loaded_model(w, h);
        update(&mut m, ch(':'));
        type_text(&mut m, "rehearse rehearsals/data-delay.toml");
        update(&mut m, key(KeyCode::Enter));
        m
    } else {
        Model::new(Init {
            rehearsal: Some("rehearsals/data-delay.toml".into()),
            ..init(w, h, false)
        })
    };
    let source = m.source;
    update(&mut m, Msg::Rehearsal(Box::new(progress(source))));
    let mut snap = fixed_snapshot();
    snap.source = source;
    snap.switches.kill = None;
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    m.status = None;
    m
}

pub fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn ch(c: char) -> Msg {
    let mods = if c.is_ascii_uppercase() {
        KeyModifiers::SHIFT
    } else {
        KeyModifiers::NONE
    };
    Msg::Key(KeyEvent::new(KeyCode::Char(c), mods))
}

pub fn ctrl(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

/// Sends every character of `text` as a key press.
pub fn type_text(m: &mut Model, text: &str) -> Vec<Cmd> {
    text.chars().flat_map(|c| update(m, ch(c))).collect()
}

/// The screen as text, one quoted line per row (ratatui's buffer view).
pub fn render(m: &Model, theme: &Theme, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    term.draw(|f| view(m, theme, f)).expect("draw");
    term.backend().to_string()
}

/// Renders and returns the backend (for style checks).
pub fn render_backend(m: &Model, theme: &Theme, w: u16, h: u16) -> TestBackend {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    term.draw(|f| view(m, theme, f)).expect("draw");
    term.backend().clone()
}
