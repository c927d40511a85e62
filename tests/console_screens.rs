//! Whole screens rendered into ratatui's `TestBackend` and compared with the
//! accepted insta snapshots in tests/snapshots/ (CI never writes them), plus a
//! no-panic size matrix over every pane, screen and overlay, and style checks
//! that the monochrome theme keeps bold and reverse.

#[path = "console_support.rs"]
mod support;

use agentcron::config::model::ErrorClass;
use agentcron::console::app::{DetailSection, DetailState, Model, Msg, Overlay, Screen, update};
use agentcron::console::dialogs::{Dialog, Intent, Preview};
use agentcron::console::panes::Pane;
use agentcron::console::snapshot::RunDetail;
use agentcron::console::theme::{Theme, builtin_names};
use agentcron::store::*;
use chrono::Duration;
use ratatui::crossterm::event::KeyCode;
use ratatui::style::Modifier;
use support::*;

fn dark() -> Theme {
    Theme::builtin("dark").expect("dark theme")
}

fn screen(m: &Model, w: u16, h: u16) -> String {
    render(m, &dark(), w, h)
}

fn at_pane(p: Pane, w: u16, h: u16) -> Model {
    let mut m = loaded_model(w, h);
    update(&mut m, ch(char::from(b'1' + p.index() as u8)));
    m
}

#[test]
fn main_screen_80x24() {
    insta::assert_snapshot!("main_80x24", screen(&loaded_model(80, 24), 80, 24));
}

#[test]
fn main_screen_160x48() {
    insta::assert_snapshot!("main_160x48", screen(&loaded_model(160, 48), 160, 48));
}

#[test]
fn every_pane_at_80x24() {
    for p in Pane::ALL {
        let m = at_pane(p, 80, 24);
        insta::assert_snapshot!(
            format!("pane_{}_80x24", p.title().to_lowercase()),
            screen(&m, 80, 24)
        );
    }
}

#[test]
fn timeline_and_approvals_at_160x48() {
    for p in [Pane::Timeline, Pane::Approvals] {
        let m = at_pane(p, 160, 48);
        insta::assert_snapshot!(
            format!("pane_{}_160x48", p.title().to_lowercase()),
            screen(&m, 160, 48)
        );
    }
}

fn detail_fixture(m: &Model) -> RunDetail {
    let human = m.snapshot.approvals[0].clone();
    let run = human.run.clone();
    let start = run.window_start;
    let attempt = |n: u32, status: AttemptStatus, class: Option<ErrorClass>, msg: Option<&str>| Attempt {
        run_id: run.id,
        n,
        fencing_token: 40 + i64::from(n),
        owner: "worker-1".into(),
        reason: if n == 1 {
            RunReason::Scheduled
        } else {
            RunReason::Retry
        },
        started_at: start + Duration::minutes(i64::from(n) * 2),
        ended_at: Some(start + Duration::minutes(i64::from(n) * 2 + 1)),
        status,
        error_class: class,
        exit_code: Some(if n == 1 { 75 } else { 77 }),
        summary: None,
        processed: None,
        message: msg.map(str::to_string),
        tokens: 1200 * i64::from(n),
        cost_usd: 0.0125 * f64::from(n),
        log: format!("fetching orders\nattempt {n} working\n\twebhook POST /hook\n"),
        envelope: Some(format!(
            r#"{{"run_id":{},"tenant":"acme","schedule":"hourly-sync","attempt":{n},"reason":"retry","window":{{"key":"{}"}}}}"#,
            run.id, run.window_key
        )),
    };
    let events = vec![
        Event {
            id: 11,
            at: start,
            kind: "window_opened".into(),
            tenant: Some("acme".into()),
            schedule: Some("hourly-sync".into()),
            run_id: Some(run.id),
            detail: serde_json::json!({"window_key": run.window_key}),
        },
        Event {
            id: 12,
            at: start + Duration::minutes(3),
            kind: "failed".into(),
            tenant: Some("acme".into()),
            schedule: Some("hourly-sync".into()),
            run_id: Some(run.id),
            detail: serde_json::json!({"attempt": 1, "class": "retryable", "reason": "upstream 503"}),
        },
        Event {
            id: 13,
            at: start + Duration::minutes(5),
            kind: "parked_for_human".into(),
            tenant: Some("acme".into()),
            schedule: Some("hourly-sync".into()),
            run_id: Some(run.id),
            detail: serde_json::json!({"reason": "uncertain side-effect step deliver"}),
        },
    ];
    let attempts = vec![
        attempt(
            1,
            AttemptStatus::Failed,
            Some(ErrorClass::Retryable),
            Some("upstream 503"),
        ),
        attempt(
            2,
            AttemptStatus::Failed,
            Some(ErrorClass::NeedsHuman),
            Some("deliver outcome unknown"),
        ),
    ];
    RunDetail {
        run,
        attempts,
        steps: human.steps,
        events,
        approvals: vec![],
        explanation: None,
    }
}

fn detail_model(w: u16, h: u16, section: DetailSection) -> Model {
    let mut m = loaded_model(w, h);
    let d = detail_fixture(&m);
    m.screen = Screen::Detail(DetailState {
        run: d.run.id,
        detail: Some(Box::new(d)),
        error: None,
        section,
        scroll: 0,
    });
    m
}

#[test]
fn run_detail() {
    for s in DetailSection::ALL {
        let m = detail_model(100, 30, s);
        insta::assert_snapshot!(
            format!("detail_{}_100x30", s.title().to_lowercase()),
            screen(&m, 100, 30)
        );
    }
}

#[test]
fn help_overlay() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('?'));
    insta::assert_snapshot!("help_80x24", screen(&m, 80, 24));
    let mut m = loaded_model(100, 60);
    m.read_only = true;
    update(&mut m, ch('?'));
    insta::assert_snapshot!("help_read_only_100x60", screen(&m, 100, 60));
}

#[test]
fn reason_dialog() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('5'));
    update(&mut m, ch('x'));
    type_text(&mut m, "duplicate delivery confirmed by the customer");
    insta::assert_snapshot!("reject_dialog_80x24", screen(&m, 80, 24));
}

#[test]
fn approval_dialog() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('5'));
    update(&mut m, ch('a'));
    type_text(&mut m, "checked the refund list with finance");
    insta::assert_snapshot!("approve_dialog_80x24", screen(&m, 80, 24));
}

#[test]
fn kill_type_to_confirm_dialog() {
    let mut snap = fixed_snapshot();
    snap.switches.kill = None;
    let mut m = model_sized(80, 24, false);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    update(&mut m, ch('K'));
    type_text(&mut m, "incident 4711");
    update(&mut m, key(KeyCode::Enter));
    type_text(&mut m, "ki");
    insta::assert_snapshot!("kill_confirm_80x24", screen(&m, 80, 24));
}

#[test]
fn rehearsal_mode_with_expectations() {
    for (w, h) in [(80, 24), (160, 48)] {
        let mut m = rehearsal_model(w, h, true);
        update(&mut m, ch('2'));
        insta::assert_snapshot!(format!("rehearsal_{w}x{h}"), screen(&m, w, h));
    }
    // Started as `rehearse FILE --console`, playing.
    let mut m = rehearsal_model(100, 30, false);
    update(&mut m, ch(' '));
    m.status = None;
    insta::assert_snapshot!("rehearsal_standalone_playing_100x30", screen(&m, 100, 30));
}

/// The resume dialog of inbox-triage with its plan (`held` windows).
fn resume_dialog(held: usize) -> Dialog {
    let intent = Intent::Resume {
        schedule: "inbox-triage".into(),
    };
    let mut d = Dialog::open(intent.clone());
    let mut lines = vec![
        "paused by alice: mailbox migration".to_string(),
        format!("{held} held window(s) are evaluated at once, oldest first:"),
    ];
    lines.extend((0..held).map(|i| {
        format!(
            "  #{} 2026-06-0{}T10:00+08:00  pending  catchup (backfill)",
            301 + i,
            6 + i % 3
        )
    }));
    d.set_preview(
        &intent,
        Ok(Preview {
            lines,
            actionable: true,
        }),
    );
    d
}

#[test]
fn resume_and_backfill_dialogs_show_their_plan() {
    let mut m = loaded_model(80, 24);
    m.overlay = Overlay::Dialog(Box::new(resume_dialog(2)));
    insta::assert_snapshot!("resume_plan_80x24", screen(&m, 80, 24));
    let mut m = loaded_model(80, 30);
    update(&mut m, ch(':'));
    type_text(&mut m, "backfill inbox-triage 2026-06-06 2026-06-06");
    update(&mut m, key(KeyCode::Enter));
    let intent = match &m.overlay {
        Overlay::Dialog(d) => d.intent().clone(),
        _ => panic!("no dialog: {:?}", m.status),
    };
    let mut lines = vec![
        "range 2026-06-06 00:00 → 2026-06-06 23:59 Asia/Shanghai".to_string(),
        "94 window(s) will be queued, 2 left alone:".to_string(),
    ];
    lines.extend((0..12).map(|i| format!("  2026-06-06T{:02}:{:02}+08:00  queue", i / 4, (i % 4) * 15)));
    update(
        &mut m,
        Msg::Preview {
            intent,
            result: Ok(Preview {
                lines,
                actionable: true,
            }),
        },
    );
    insta::assert_snapshot!("backfill_plan_80x30", screen(&m, 80, 30));
}

#[test]
fn long_lists_draw_the_rows_around_the_cursor() {
    // Five hundred schedules, the last one selected: it is on screen, selected,
    // and schedules not loaded yet show … instead of a made-up state.
    let mut snap = fixed_snapshot();
    let template = snap.schedules[1].clone();
    for i in 0..496 {
        let mut row = template.clone();
        row.id = format!("job-{i:03}");
        row.loaded = i < 490;
        if !row.loaded {
            row.last = None;
            row.next_fire = None;
        }
        snap.schedules.push(row);
    }
    let mut m = model_sized(80, 24, false);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    update(&mut m, ch('G'));
    let out = screen(&m, 80, 24);
    let row = out
        .lines()
        .find(|l| l.contains("job-495"))
        .unwrap_or_else(|| panic!("last row not drawn:\n{out}"));
    assert!(row.contains('▌'), "not marked selected: {row}");
    assert!(row.contains('…'), "not loaded, shown as …: {row}");
    // (Issue 19: a loaded row shows its health, here the template's dead letters.)
    assert!(out.contains("job-489") && out.contains("✗ 2 dead"), "{out}");
    assert!(!out.contains("daily-sales-report"), "scrolled away:\n{out}");
}

#[test]
fn too_small_keeps_the_kill_switch_visible() {
    let m = loaded_model(40, 10);
    insta::assert_snapshot!("too_small_40x10", screen(&m, 40, 10));
    let tiny = screen(&m, 1, 1);
    assert!(tiny.contains('■'), "{tiny}");
}

#[test]
fn filter_and_read_only_footer() {
    let mut m = loaded_model(100, 24);
    m.read_only = true;
    update(&mut m, ch('/'));
    type_text(&mut m, "sync");
    insta::assert_snapshot!("filter_read_only_100x24", screen(&m, 100, 24));
}

/// Every pane, screen and overlay at sizes from 1×1 up: nothing panics, and
/// the kill switch state is on screen at every size.
#[test]
fn no_panic_size_matrix() {
    let sizes = [
        (1, 1),
        (2, 1),
        (10, 3),
        (40, 10),
        (59, 14),
        (60, 15),
        (80, 24),
        (139, 35),
        (140, 36),
        (200, 60),
    ];
    let theme = dark();
    for (w, h) in sizes {
        let mut models: Vec<Model> = Vec::new();
        for p in Pane::ALL {
            models.push(at_pane(p, w, h));
            let mut empty = model_sized(w, h, false);
            update(&mut empty, ch(char::from(b'1' + p.index() as u8)));
            models.push(empty);
        }
        for s in DetailSection::ALL {
            models.push(detail_model(w, h, s));
        }
        let mut loading = detail_model(w, h, DetailSection::Log);
        if let Screen::Detail(d) = &mut loading.screen {
            d.detail = None;
        }
        models.push(loading);
        let mut help = loaded_model(w, h);
        help.overlay = Overlay::Help { scroll: 500 };
        models.push(help);
        for intent in [
            Intent::KillOn {
                cancel_running: false,
            },
            Intent::Resume {
                schedule: "inbox-triage".into(),
            },
            Intent::Reject {
                run: 1,
                label: "x".repeat(300),
            },
        ] {
            let mut d = loaded_model(w, h);
            d.overlay = Overlay::Dialog(Box::new(Dialog::open(intent)));
            models.push(d);
        }
        for nested in [true, false] {
            let mut r = rehearsal_model(w, h, nested);
            models.push(r.clone());
            update(&mut r, key(KeyCode::Enter));
            models.push(r);
        }
        let mut loading = model_sized(w, h, false);
        loading.rehearsal = rehearsal_model(w, h, false).rehearsal.map(|mut r| {
            r.progress = None;
            r
        });
        models.push(loading);
        let mut plan = loaded_model(w, h);
        plan.overlay = Overlay::Dialog(Box::new(resume_dialog(30)));
        models.push(plan);
        for m in &models {
            let out = render(m, &theme, w, h);
            if m.loaded {
                let glyph = if m.snapshot.kill_on() { '■' } else { '○' };
                assert!(out.contains(glyph), "kill switch missing at {w}x{h}:\n{out}");
            }
        }
    }
}

#[test]
fn every_theme_renders_every_pane() {
    for name in builtin_names() {
        let theme = Theme::builtin(name).expect("builtin");
        for p in Pane::ALL {
            let _ = render(&at_pane(p, 100, 30), &theme, 100, 30);
        }
    }
}

#[test]
fn mono_keeps_bold_and_reverse() {
    let mono = Theme::builtin("mono").expect("mono");
    let m = loaded_model(80, 24);
    let backend = render_backend(&m, &mono, 80, 24);
    let buf = backend.buffer();
    // The kill switch (on) is bold and reversed in the header.
    let kill = (0..80)
        .map(|x| &buf[(x, 0)])
        .find(|c| c.symbol() == "■")
        .expect("kill glyph in the header");
    assert!(kill.modifier.contains(Modifier::BOLD | Modifier::REVERSED));
    // The selected schedule row is reversed.
    let row = (0..24)
        .find(|y| {
            (0..80)
                .map(|x| buf[(x, *y)].symbol())
                .collect::<String>()
                .contains("daily-sales")
        })
        .expect("row");
    assert!((0..80).any(|x| buf[(x, row)].modifier.contains(Modifier::REVERSED)));
    // And there is no colour at all.
    for c in buf.content() {
        assert!(
            matches!(c.fg, ratatui::style::Color::Reset) && matches!(c.bg, ratatui::style::Color::Reset),
            "colour in mono: {c:?}"
        );
    }
}

#[test]
fn states_are_glyph_word_and_colour() {
    let dark = dark();
    let m = at_pane(Pane::Schedules, 80, 24);
    let out = render(&m, &dark, 80, 24);
    // Words next to glyphs, not colour alone (issue 19: the HEALTH column and
    // how each schedule last ended replace circuit / paused at 80 columns).
    for word in [
        "✗ 2 dead",
        "‖ paused",
        "◷ gate upstream_r… 12m",
        "✓ ok",
        "✓ succeeded",
        "· none",
    ] {
        assert!(out.contains(word), "missing `{word}`:\n{out}");
    }
}

/// Windows still in a catch-up range (not yet queued as runs) show in the
/// backfill pane: counted in its title, named when no run is queued.
#[test]
fn the_backfill_pane_shows_catch_up_ranges_not_yet_queued() {
    let mut m = at_pane(Pane::Backfill, 120, 30);
    let now = m.snapshot.taken_at;
    let range = Backlog {
        schedule: "inbox-triage".into(),
        next: now - Duration::hours(30),
        until: now - Duration::hours(1),
        planned_at: now,
    };
    m.snapshot.backlogs = vec![range.clone()];
    let text = screen(&m, 120, 30);
    assert!(text.contains("1 schedule has more planned"), "{text}");
    m.snapshot.backfill.clear();
    let text = screen(&m, 120, 30);
    assert!(text.contains("inbox-triage: windows"), "{text}");
    assert!(text.contains("wait to be queued"), "{text}");
    m.snapshot.backlogs = vec![
        range.clone(),
        Backlog {
            schedule: "daily-sales-report".into(),
            ..range
        },
    ];
    assert!(screen(&m, 120, 30).contains("2 schedules have more planned"));
}

/// Issue 19: the schedules pane names what is wrong — dead letters, a run
/// waiting for a human, a gate holding a window, an open circuit — beside how
/// each schedule last ended; a long id is ellipsised at 80 columns and shown
/// whole when the terminal is wide.
fn troubled_model(w: u16, h: u16) -> Model {
    let mut snap = fixed_snapshot();
    let template = snap.schedules[2].clone(); // ticket-followup: healthy
    let row = |id: &str, f: &dyn Fn(&mut agentcron::console::snapshot::ScheduleRow)| {
        let mut r = template.clone();
        r.id = id.to_string();
        r.health = Default::default();
        f(&mut r);
        r
    };
    let now = snap.taken_at;
    snap.schedules = vec![
        row("nightly-ledger-export", &|r| r.health.dead = 7),
        row("refund-review", &|r| r.health.needs_human = 1),
        row("daily-sales-report", &|r| {
            r.health.gate_wait = Some(("upstream".into(), now - Duration::minutes(12)))
        }),
        row("mcp-health-check", &|r| r.circuit = CircuitState::Open),
        row("acme-emea-quarterly-revenue-reconciliation-ledger", &|r| {
            r.health.dead = 1;
            r.circuit = CircuitState::Open;
        }),
        row("ticket-follow-up", &|_| {}),
    ];
    let mut m = model_sized(w, h, false);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    m
}

#[test]
fn schedules_pane_health_at_80x24_and_200x60() {
    let narrow = screen(&troubled_model(80, 24), 80, 24);
    for want in [
        "✗ 7 dead",
        "? 1 needs human",
        "◷ gate upstream 12m",
        "⊘ circuit open",
        "✓ ok",
        "HEALTH",
        "LAST ENDED",
        "acme-emea-quarterl…",
    ] {
        assert!(narrow.contains(want), "missing `{want}` at 80x24:\n{narrow}");
    }
    // The long id's other trouble is counted, not hidden.
    assert!(narrow.contains("✗ 1 dead +1"), "{narrow}");
    insta::assert_snapshot!("schedules_health_80x24", narrow);
    let wide = screen(&troubled_model(200, 60), 200, 60);
    assert!(
        wide.contains("acme-emea-quarterly-revenue-reconciliation-ledger"),
        "the whole id on a wide terminal:\n{wide}"
    );
    insta::assert_snapshot!("schedules_health_200x60", wide);
}

#[test]
fn approvals_pane_shows_deadline_owner_log_and_error() {
    let m = at_pane(Pane::Approvals, 80, 24);
    let out = screen(&m, 80, 24);
    for want in [
        "DECIDE IN",
        "3h20m left, then it fails (approval_ttl)",
        "owner  finance@acme.example",
        "error  deliver: webhook timed out",
        "why    uncertain side-effect step deliver",
        "POST https://hooks.example/refunds",
    ] {
        assert!(out.contains(want), "missing `{want}`:\n{out}");
    }
    // When the reason is the error, it is said once.
    let mut m = at_pane(Pane::Approvals, 80, 24);
    let mut snap = m.snapshot.clone();
    snap.approvals[0].run.state_reason = snap.approvals[0].run.last_error.clone();
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    let out = screen(&m, 80, 24);
    assert!(!out.contains("why    "), "{out}");
}

/// Issue 52 (item 8): the help's key column was 18 wide, so `:approve-config
/// VERSION` ran into its description. It is as wide as the longest key text
/// and a gap.
#[test]
fn help_keys_never_run_into_their_descriptions() {
    use agentcron::console::dialogs::help;
    for read_only in [false, true] {
        let lines = help::lines(read_only, &[], &dark());
        let mut keyed = 0;
        for l in &lines {
            // A key row: an indented key span, then the description span.
            if l.spans.len() < 2 || !l.spans[0].content.starts_with("  ") {
                continue;
            }
            keyed += 1;
            let key = l.spans[0].content.trim_end();
            assert!(
                l.spans[0].content.len() >= key.len() + 2,
                "{key:?} runs into {:?}",
                l.spans[1].content
            );
        }
        assert!(keyed > 40, "{keyed} key rows");
        // And `:approve-config VERSION` in particular is followed by a gap.
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        assert!(
            text.iter().any(|l| l.contains(":approve-config VERSION  ")) || read_only,
            "{text:#?}"
        );
    }
}

/// Issue 52 (item 8): the switches pane read "○ kill switch of".
#[test]
fn the_kill_switch_state_reads_whole_in_the_switches_pane() {
    let mut snap = fixed_snapshot();
    snap.switches.kill = None;
    // Focused at 80 columns, and beside the focused pane at 160 (where its
    // state column was cut).
    for (w, h) in [(80, 24), (160, 48)] {
        let mut m = model_sized(w, h, false);
        update(&mut m, Msg::Snapshot(Box::new(snap.clone())));
        if w == 80 {
            update(&mut m, ch('7'));
        }
        let s = screen(&m, w, h);
        // The pane's row (the header shows the mark too).
        let row = s
            .lines()
            .find(|l| l.contains("global"))
            .unwrap_or_else(|| panic!("the kill switch row:\n{s}"));
        assert!(row.contains("○ kill switch off "), "{row}");
    }
    let m = at_pane(Pane::Switches, 80, 24);
    let s = screen(&m, 80, 24);
    let row = s.lines().find(|l| l.contains("global")).unwrap_or_default();
    assert!(row.contains("■ KILL SWITCH ON "), "{row}");
}

/// Issue 52 (item 8): the unkill dialog's list of released runs was cut
/// mid-word at the dialog's edge; it wraps at word boundaries.
#[test]
fn unkill_lists_the_released_runs_wrapped_at_words() {
    let mut m = loaded_model(80, 24);
    let mut held = m.snapshot.lanes[0].runs[0].clone();
    held.schedule = "a-schedule-with-a-rather-long-name-for-its-runs".into();
    held.window_key = "2026-06-08T09:00:00+08:00".into();
    m.snapshot.kill_held = vec![held.clone()];
    update(&mut m, ch('K'));
    assert!(matches!(&m.overlay, Overlay::Dialog(d) if *d.intent() == Intent::KillOff));
    let s = screen(&m, 80, 24);
    // Every word of the target is whole on screen.
    let words = format!(
        "#{} {} {} ({}) is released",
        held.id, held.schedule, held.window_key, held.state
    );
    let shown: Vec<&str> = s
        .split(|c: char| c.is_whitespace() || c == '│' || c == '"')
        .collect();
    for w in words.split_whitespace() {
        assert!(shown.contains(&w), "{w:?} whole in\n{s}");
    }
}
