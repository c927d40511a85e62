//! `update()` driven by synthetic keys: every binding of the keymap table does
//! what its row says in its layer, plus the console conventions (Esc never
//! quits, Ctrl-C always does, selection follows run ids, read-only refuses
//! actions, the filter and command bars, dialogs).

#[path = "console_support.rs"]
mod support;

use agentcron::console::app::{
    Bar, Cmd, DetailSection, DetailState, Level, Model, Msg, Overlay, Screen, update,
};
use agentcron::console::dialogs::{Dialog, Field, Intent};
use agentcron::console::input::LineInput;
use agentcron::console::keymap::{self, Action, KEYMAP, Layer};
use agentcron::console::panes::{Pane, RowKey, schedules, switches, timeline};
use agentcron::console::snapshot::RunDetail;
use agentcron::store::RunState;
use ratatui::crossterm::event::KeyCode;
use support::*;

fn detail_of(m: &Model, run: i64) -> RunDetail {
    let r = m.snapshot.find_run(run).cloned().expect("run in the fixture");
    RunDetail {
        run: r,
        attempts: vec![],
        steps: vec![],
        events: vec![],
        approvals: vec![],
    }
}

fn open_detail(m: &mut Model, run: i64) {
    let d = detail_of(m, run);
    m.screen = Screen::Detail(DetailState {
        run,
        detail: Some(Box::new(d)),
        error: None,
        section: DetailSection::Events,
        scroll: 5,
    });
}

fn select_schedule(m: &mut Model, id: &str) {
    let keys = schedules::keys(m);
    assert!(m.schedules.select(&keys, &RowKey::Name(id.into())), "{id} listed");
}

fn select_switch(m: &mut Model, key: &str) {
    let keys = switches::keys(m);
    assert!(
        m.switches.select(&keys, &RowKey::Name(key.into())),
        "{key} listed"
    );
}

/// Selects run `id` in the timeline (its lane and cell).
fn select_timeline_run(m: &mut Model, id: i64) {
    let schedule = m.snapshot.find_run(id).expect("run").schedule.clone();
    let keys = timeline::lane_keys(m);
    assert!(m.timeline.lane.select(&keys, &RowKey::Name(schedule)));
    m.timeline.run = Some(id);
    timeline::settle(m);
    assert_eq!(timeline::selected_run(m).map(|r| r.id), Some(id));
}

fn reason_dialog(intent: Intent, reason: &str, focus: Field) -> Overlay {
    let mut d = Dialog::open(intent);
    if let Dialog::Reason(r) = &mut d {
        if let Some(ta) = r.reason.as_mut() {
            ta.insert_str(reason);
        }
        r.focus = focus;
    }
    Overlay::Dialog(Box::new(d))
}

/// A loaded model in which `b` (pressed with its key) has a visible effect.
fn context_for(layer: Layer, action: Action) -> Model {
    let mut m = loaded_model(80, 24);
    let human = m.snapshot.approvals[0].run.id;
    match layer {
        Layer::Global => {
            m.pane = Pane::Timeline;
            if action == Action::Back {
                m.filter = "sync".into();
            }
        }
        Layer::Navigation => {
            m.pane = Pane::Schedules;
            let keys = schedules::keys(&m);
            m.schedules.select(&keys, &keys[1].clone());
        }
        Layer::Schedules => {
            m.pane = Pane::Schedules;
            let id = match action {
                Action::Resume => "inbox-triage",
                Action::CloseCircuit => "hourly-sync",
                _ => "daily-sales-report",
            };
            select_schedule(&mut m, id);
        }
        Layer::Timeline => {
            m.pane = Pane::Timeline;
            // 102 failed (requeue-able) and sits between older and newer windows.
            select_timeline_run(&mut m, 102);
        }
        Layer::Approvals => {
            m.pane = Pane::Approvals;
        }
        Layer::Switches => {
            m.pane = Pane::Switches;
            let key = if action == Action::Resume {
                "paused:inbox-triage"
            } else {
                "circuit:hourly-sync"
            };
            select_switch(&mut m, key);
        }
        Layer::Detail => {
            let run = match action {
                Action::Approve | Action::Reject => human,
                _ => 102,
            };
            open_detail(&mut m, run);
        }
        Layer::Help => m.overlay = Overlay::Help { scroll: 3 },
        Layer::Input => {
            m.bar = Some(Bar::Filter(LineInput::with_text("sync")));
            m.filter = "sync".into();
        }
        Layer::Dialog => {
            let label = "hourly-sync x".to_string();
            let focus = match action {
                // Left/Right switch buttons; on the text field they move the cursor.
                Action::NextField | Action::PrevField => Field::Cancel,
                _ => Field::Confirm,
            };
            m.overlay = reason_dialog(
                Intent::Approve { run: human, label },
                "checked the webhook",
                focus,
            );
        }
    }
    m
}

fn dialog_intent(m: &Model) -> Option<&Intent> {
    match &m.overlay {
        Overlay::Dialog(d) => Some(d.intent()),
        _ => None,
    }
}

fn dialog_focus(m: &Model) -> Option<Field> {
    match &m.overlay {
        Overlay::Dialog(d) => match d.as_ref() {
            Dialog::Reason(r) => Some(r.focus),
            Dialog::Confirm(c) => Some(c.focus),
        },
        _ => None,
    }
}

fn detail(m: &Model) -> Option<&DetailState> {
    match &m.screen {
        Screen::Detail(d) => Some(d),
        Screen::Main => None,
    }
}

/// Asserts the effect of `action` pressed in `layer`.
fn check(layer: Layer, action: Action, key: &str, before: &Model, after: &Model, cmds: &[Cmd]) {
    let ctx = format!("{key} ({action:?} in {layer:?})");
    match action {
        Action::ForceQuit | Action::Quit => {
            assert!(cmds.contains(&Cmd::Quit), "{ctx}: {cmds:?}");
            assert!(after.quitting, "{ctx}");
        }
        Action::Help => assert!(matches!(after.overlay, Overlay::Help { .. }), "{ctx}"),
        Action::Back => match layer {
            Layer::Help => assert!(matches!(after.overlay, Overlay::None), "{ctx}"),
            _ => {
                assert!(after.filter.is_empty(), "{ctx}: Esc clears the filter");
                assert!(!cmds.contains(&Cmd::Quit), "{ctx}: Esc never quits");
            }
        },
        Action::Filter => assert!(matches!(after.bar, Some(Bar::Filter(_))), "{ctx}"),
        Action::Command => assert!(matches!(after.bar, Some(Bar::Command(_))), "{ctx}"),
        Action::Refresh => assert!(cmds.contains(&Cmd::Refresh), "{ctx}"),
        Action::NextPane => assert_eq!(after.pane, before.pane.next(), "{ctx}"),
        Action::PrevPane => assert_eq!(after.pane, before.pane.prev(), "{ctx}"),
        Action::GotoPane(p) => assert_eq!(after.pane, p, "{ctx}"),
        Action::Down | Action::Up | Action::Top | Action::Bottom | Action::PageDown | Action::PageUp => {
            match layer {
                Layer::Detail => assert_ne!(
                    detail(after).map(|d| d.scroll),
                    detail(before).map(|d| d.scroll),
                    "{ctx}"
                ),
                Layer::Help => {
                    let scroll = |m: &Model| match m.overlay {
                        Overlay::Help { scroll } => scroll,
                        _ => u16::MAX - 1,
                    };
                    assert_ne!(scroll(after), scroll(before), "{ctx}");
                }
                _ => assert_ne!(after.schedules, before.schedules, "{ctx}"),
            }
        }
        Action::Left | Action::Right => assert_ne!(
            timeline::selected_run(after).map(|r| r.id),
            timeline::selected_run(before).map(|r| r.id),
            "{ctx}"
        ),
        Action::Open => {
            assert!(detail(after).is_some(), "{ctx}");
            assert!(cmds.iter().any(|c| matches!(c, Cmd::LoadRunDetail(_))), "{ctx}");
        }
        Action::NextSection | Action::PrevSection => assert_ne!(
            detail(after).map(|d| d.section),
            detail(before).map(|d| d.section),
            "{ctx}"
        ),
        Action::Approve => assert!(
            matches!(dialog_intent(after), Some(Intent::Approve { .. })),
            "{ctx}"
        ),
        Action::Reject => assert!(
            matches!(dialog_intent(after), Some(Intent::Reject { .. })),
            "{ctx}"
        ),
        Action::Requeue => assert!(
            matches!(dialog_intent(after), Some(Intent::Requeue { run: 102, .. })),
            "{ctx}"
        ),
        Action::Pause => assert!(
            matches!(dialog_intent(after), Some(Intent::Pause { .. })),
            "{ctx}"
        ),
        Action::Resume => assert_eq!(
            dialog_intent(after),
            Some(&Intent::Resume {
                schedule: "inbox-triage".into()
            }),
            "{ctx}"
        ),
        Action::Trigger => assert!(
            matches!(dialog_intent(after), Some(Intent::Trigger { .. })),
            "{ctx}"
        ),
        Action::CloseCircuit => assert_eq!(
            dialog_intent(after),
            Some(&Intent::CloseCircuit {
                schedule: "hourly-sync".into()
            }),
            "{ctx}"
        ),
        // The fixture's kill switch is on: K offers to turn it off.
        Action::Kill => assert_eq!(dialog_intent(after), Some(&Intent::KillOff), "{ctx}"),
        Action::NextField | Action::PrevField => {
            assert_ne!(dialog_focus(after), dialog_focus(before), "{ctx}")
        }
        Action::Confirm => {
            assert!(matches!(after.overlay, Overlay::None), "{ctx}");
            assert!(
                cmds.iter()
                    .any(|c| matches!(c, Cmd::Approve { reason, .. } if reason == "checked the webhook")),
                "{ctx}: {cmds:?}"
            );
        }
        Action::Cancel => match layer {
            Layer::Input => {
                assert!(after.bar.is_none(), "{ctx}");
                assert!(after.filter.is_empty(), "{ctx}");
            }
            _ => {
                assert!(matches!(after.overlay, Overlay::None), "{ctx}");
                assert!(cmds.iter().all(|c| !c.is_operator_action()), "{ctx}");
            }
        },
        Action::Accept => {
            assert!(after.bar.is_none(), "{ctx}");
            assert_eq!(after.filter, "sync", "{ctx}");
        }
    }
}

#[test]
fn every_binding_in_the_keymap_does_what_its_row_says() {
    let mut checked = 0;
    for b in KEYMAP {
        for k in b.keys {
            let mut m = context_for(b.layer, b.action);
            assert_eq!(
                keymap::lookup(&m.layers(), &k.event(), false),
                Some(b.action),
                "{} is not reachable in {:?}",
                k.label(),
                b.layer
            );
            let before = m.clone();
            let cmds = update(&mut m, Msg::Key(k.event()));
            check(b.layer, b.action, &k.label(), &before, &m, &cmds);
            checked += 1;
        }
    }
    assert!(checked >= KEYMAP.len());
}

#[test]
fn read_only_refuses_and_hides_every_operator_action() {
    for b in KEYMAP.iter().filter(|b| b.action.is_operator_action()) {
        for k in b.keys {
            let mut m = context_for(b.layer, b.action);
            m.read_only = true;
            let cmds = update(&mut m, Msg::Key(k.event()));
            assert!(
                matches!(m.overlay, Overlay::None),
                "{} opened a dialog",
                k.label()
            );
            assert!(cmds.iter().all(|c| !c.is_operator_action()));
            assert_eq!(m.status.as_ref().map(|s| s.level), Some(Level::Error));
        }
    }
    for layers in [
        vec![Layer::Schedules, Layer::Navigation, Layer::Global],
        vec![Layer::Approvals, Layer::Navigation, Layer::Global],
        vec![Layer::Detail, Layer::Global],
    ] {
        assert!(
            keymap::footer(&layers, true)
                .iter()
                .all(|b| !b.action.is_operator_action())
        );
        assert!(
            keymap::footer(&layers, false)
                .iter()
                .any(|b| b.action.is_operator_action())
        );
    }
    for (_, bindings) in keymap::help_sections(true) {
        assert!(bindings.iter().all(|b| !b.action.is_operator_action()));
    }
    // Commands too.
    let mut m = loaded_model(80, 24);
    m.read_only = true;
    update(&mut m, ch(':'));
    type_text(&mut m, "pause daily-sales-report");
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert!(matches!(m.overlay, Overlay::None));
    assert!(cmds.iter().all(|c| !c.is_operator_action()));
}

#[test]
fn esc_never_quits_and_ctrl_c_always_does() {
    let contexts: Vec<Model> = [
        Layer::Global,
        Layer::Navigation,
        Layer::Detail,
        Layer::Help,
        Layer::Input,
        Layer::Dialog,
    ]
    .into_iter()
    .map(|l| context_for(l, Action::Down))
    .collect();
    for m in &contexts {
        let mut esc = m.clone();
        for _ in 0..5 {
            let cmds = update(&mut esc, key(KeyCode::Esc));
            assert!(!cmds.contains(&Cmd::Quit) && !esc.quitting);
        }
        let mut c = m.clone();
        assert!(update(&mut c, ctrl('c')).contains(&Cmd::Quit));
        assert!(c.quitting);
    }
}

#[test]
fn q_types_into_bars_and_dialogs_instead_of_quitting() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('/'));
    update(&mut m, ch('q'));
    assert!(!m.quitting);
    assert_eq!(m.filter, "q");
    let mut m = context_for(Layer::Dialog, Action::Down);
    if let Overlay::Dialog(d) = &mut m.overlay
        && let Dialog::Reason(r) = d.as_mut()
    {
        r.focus = Field::Reason;
    }
    update(&mut m, ch('q'));
    assert!(!m.quitting);
}

#[test]
fn selection_stays_on_the_same_run_while_data_moves() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('2'));
    select_timeline_run(&mut m, 102);
    // Two new windows arrive in the lane and an old one drops off.
    let mut snap = fixed_snapshot();
    let lane = &mut snap.lanes[0];
    lane.runs.remove(0);
    let mut newer = lane.runs.last().cloned().expect("runs");
    newer.id = 900;
    newer.window_key = "2026-06-09".into();
    lane.runs.push(newer.clone());
    newer.id = 901;
    lane.runs.push(newer);
    snap.last_event_id += 10;
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    assert_eq!(timeline::selected_run(&m).map(|r| r.id), Some(102));

    // Lists too: the retry row keeps its id when another row comes before it.
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('4'));
    let id = m.snapshot.retries[0].run.id;
    let mut snap = fixed_snapshot();
    let mut other = snap.retries[0].clone();
    other.run.id = 777;
    snap.retries.insert(0, other);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    assert_eq!(m.selected_run(), Some(id));
    // A selected row that disappears leaves the cursor near where it was.
    let mut snap = fixed_snapshot();
    snap.retries.clear();
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    assert_eq!(m.selected_run(), None);
}

#[test]
fn the_selected_run_is_sent_as_focus_when_it_changes() {
    let mut m = model_sized(80, 24, false);
    let cmds = update(&mut m, Msg::Snapshot(Box::new(fixed_snapshot())));
    // Schedules pane: the first schedule's newest run.
    assert!(cmds.contains(&Cmd::Focus(Some(FOCUS_RUN))), "{cmds:?}");
    let cmds = update(&mut m, ch('j'));
    let hourly_last = m
        .snapshot
        .schedule("hourly-sync")
        .and_then(|s| s.last.as_ref())
        .map(|l| l.id);
    assert!(cmds.contains(&Cmd::Focus(hourly_last)));
    // Same selection: nothing sent.
    assert!(
        !update(&mut m, Msg::Tick { now: now() })
            .iter()
            .any(|c| matches!(c, Cmd::Focus(_)))
    );
    // The gates pane keeps showing the last selected run.
    update(&mut m, ch('3'));
    assert_eq!(m.focus_run(), hourly_last);
}

#[test]
fn filter_narrows_lists_and_esc_clears_it() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('/'));
    type_text(&mut m, "hourly");
    assert_eq!(schedules::keys(&m), vec![RowKey::Name("hourly-sync".into())]);
    update(&mut m, key(KeyCode::Enter));
    assert!(m.bar.is_none());
    assert_eq!(m.filter, "hourly");
    update(&mut m, ch('2'));
    assert_eq!(timeline::lane_keys(&m).len(), 1);
    update(&mut m, key(KeyCode::Esc));
    assert!(m.filter.is_empty());
    assert_eq!(schedules::keys(&m).len(), 4);
    // Runs are found by id and window too.
    m.filter = "#301".into();
    update(&mut m, ch('6'));
    assert_eq!(m.selected_run(), Some(301));
}

fn command(m: &mut Model, text: &str) -> Vec<Cmd> {
    update(m, ch(':'));
    let mut cmds = type_text(m, text);
    cmds.extend(update(m, key(KeyCode::Enter)));
    cmds
}

#[test]
fn command_mode_parses_into_cmds_and_dialogs() {
    let mut m = loaded_model(80, 24);
    command(&mut m, "pause daily-sales-report");
    assert_eq!(
        dialog_intent(&m),
        Some(&Intent::Pause {
            schedule: "daily-sales-report".into()
        })
    );
    let mut m = loaded_model(80, 24);
    let cmds = command(&mut m, "goto #105");
    assert!(cmds.contains(&Cmd::LoadRunDetail(105)));
    assert_eq!(detail(&m).map(|d| d.run), Some(105));
    let mut m = loaded_model(80, 24);
    assert!(command(&mut m, "theme light").contains(&Cmd::SetTheme("light".into())));
    assert!(command(&mut m, "rehearse dst.toml").contains(&Cmd::Rehearse("dst.toml".into())));
    assert!(command(&mut m, "q").contains(&Cmd::Quit));
    let mut m = loaded_model(80, 24);
    // The kill switch is on in the fixture: :kill says so, :unkill asks.
    command(&mut m, "kill");
    assert!(matches!(m.overlay, Overlay::None));
    command(&mut m, "unkill");
    assert_eq!(dialog_intent(&m), Some(&Intent::KillOff));
    let mut m = loaded_model(80, 24);
    command(&mut m, "pause nope");
    assert_eq!(m.status.as_ref().map(|s| s.level), Some(Level::Error));
    command(&mut m, "frobnicate");
    assert!(
        m.status
            .as_ref()
            .is_some_and(|s| s.text.contains("unknown command"))
    );
    // Esc leaves the bar without running anything.
    update(&mut m, ch(':'));
    type_text(&mut m, "q");
    assert!(update(&mut m, key(KeyCode::Esc)).is_empty());
    assert!(!m.quitting && m.bar.is_none());
}

#[test]
fn reason_dialogs_require_a_reason_and_dangerous_ones_default_to_cancel() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('5'));
    update(&mut m, ch('x'));
    assert!(matches!(dialog_intent(&m), Some(Intent::Reject { .. })));
    // Enter without a reason: to the buttons, onto Cancel (reject is dangerous).
    update(&mut m, key(KeyCode::Enter));
    assert_eq!(dialog_focus(&m), Some(Field::Cancel));
    update(&mut m, key(KeyCode::Right));
    assert_eq!(dialog_focus(&m), Some(Field::Confirm));
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert!(cmds.is_empty(), "empty reason refused");
    assert_eq!(dialog_focus(&m), Some(Field::Reason));
    type_text(&mut m, "duplicate delivery");
    update(&mut m, key(KeyCode::Enter));
    // Enter on Cancel cancels.
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert!(cmds.is_empty());
    assert!(matches!(m.overlay, Overlay::None));

    // Approve is not dangerous: Enter from the reason goes to the action.
    update(&mut m, ch('a'));
    type_text(&mut m, "verified: not delivered");
    update(&mut m, key(KeyCode::Enter));
    let cmds = update(&mut m, key(KeyCode::Enter));
    let human = m.snapshot.approvals[0].run.id;
    assert!(cmds.contains(&Cmd::Approve {
        run: human,
        reason: "verified: not delivered".into()
    }));

    // An action's result shows in the status line.
    update(
        &mut m,
        Msg::ActionResult(Err("approve: action not available yet".into())),
    );
    assert_eq!(
        m.status.as_ref().map(|s| s.text.as_str()),
        Some("approve: action not available yet")
    );
}

#[test]
fn the_kill_switch_asks_to_type_its_name() {
    let mut snap = fixed_snapshot();
    snap.switches.kill = None;
    let mut m = model_sized(80, 24, false);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    update(&mut m, ch('K'));
    assert_eq!(dialog_intent(&m), Some(&Intent::KillOn));
    type_text(&mut m, "incident 4711");
    update(&mut m, key(KeyCode::Enter)); // to the name field
    type_text(&mut m, "kil");
    update(&mut m, key(KeyCode::Enter)); // to Cancel, never straight to Kill
    assert_eq!(dialog_focus(&m), Some(Field::Cancel));
    update(&mut m, key(KeyCode::Tab));
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert!(cmds.is_empty(), "wrong word refused");
    assert_eq!(dialog_focus(&m), Some(Field::Word));
    type_text(&mut m, "l");
    update(&mut m, key(KeyCode::Enter));
    update(&mut m, key(KeyCode::Tab));
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert_eq!(
        cmds,
        vec![Cmd::SetKill {
            on: true,
            reason: "incident 4711".into()
        }]
    );
}

#[test]
fn actions_refuse_runs_in_the_wrong_state() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('2'));
    select_timeline_run(&mut m, FOCUS_RUN);
    update(&mut m, ch('r'));
    assert!(matches!(m.overlay, Overlay::None));
    assert!(
        m.status
            .as_ref()
            .is_some_and(|s| s.text.contains("only failed or dead"))
    );
    // Pausing a paused schedule, closing a closed circuit.
    let mut m = loaded_model(80, 24);
    select_schedule(&mut m, "inbox-triage");
    update(&mut m, ch('p'));
    assert!(matches!(m.overlay, Overlay::None));
    select_schedule(&mut m, "daily-sales-report");
    update(&mut m, ch('c'));
    assert!(matches!(m.overlay, Overlay::None));
    // Approving from the detail of a run that does not need a human.
    let mut m = loaded_model(80, 24);
    open_detail(&mut m, 101);
    update(&mut m, ch('a'));
    assert!(matches!(m.overlay, Overlay::None));
    assert_eq!(
        m.snapshot.find_run(101).map(|r| r.state),
        Some(RunState::Succeeded)
    );
}

#[test]
fn the_detail_reloads_when_the_trace_moves_and_esc_goes_back() {
    let mut m = loaded_model(80, 24);
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert!(cmds.contains(&Cmd::LoadRunDetail(FOCUS_RUN)));
    let d = detail_of(&m, FOCUS_RUN);
    update(&mut m, Msg::RunDetail(Box::new(d)));
    // Same event id: no reload; a new event: reload.
    assert!(
        !update(&mut m, Msg::Snapshot(Box::new(fixed_snapshot()))).contains(&Cmd::LoadRunDetail(FOCUS_RUN))
    );
    let mut snap = fixed_snapshot();
    snap.last_event_id += 1;
    assert!(update(&mut m, Msg::Snapshot(Box::new(snap))).contains(&Cmd::LoadRunDetail(FOCUS_RUN)));
    update(
        &mut m,
        Msg::RunDetailFailed {
            run: FOCUS_RUN,
            error: "run 105 not found".into(),
        },
    );
    assert!(detail(&m).and_then(|d| d.error.as_deref()).is_some());
    update(&mut m, key(KeyCode::Esc));
    assert!(matches!(m.screen, Screen::Main));
}

#[test]
fn ticks_move_the_clock_and_expire_the_status_line() {
    let mut m = loaded_model(80, 24);
    update(&mut m, Msg::ActionResult(Ok("paused".into())));
    assert!(m.status.is_some());
    let later = now() + chrono::Duration::seconds(11);
    update(&mut m, Msg::Tick { now: later });
    assert_eq!(m.now, later);
    assert!(m.status.is_none());
    update(
        &mut m,
        Msg::Resize {
            width: 120,
            height: 40,
        },
    );
    assert_eq!((m.width, m.height), (120, 40));
    update(&mut m, Msg::ThemeChanged(Ok("light".into())));
    assert_eq!(m.theme_name, "light");
}
