//! `update()` driven by synthetic keys: every binding of the keymap table does
//! what its row says in its layer, plus the console conventions (Esc never
//! quits, Ctrl-C always does, selection follows run ids, read-only refuses
//! actions, the filter and command bars, dialogs).

#[path = "console_support.rs"]
mod support;

use agentcron::console::app::{
    Bar, Cmd, DetailSection, DetailState, EmbeddedInfo, Init, Level, Model, Msg, Overlay, Screen, update,
};
use agentcron::console::dialogs::quit::{QuitButton, QuitPhase};
use agentcron::console::dialogs::{Dialog, Field, Intent, Preview, PreviewState};
use agentcron::console::input::LineInput;
use agentcron::console::keymap::{self, Action, KEYMAP, Layer};
use agentcron::console::panes::{Pane, RowKey, retries, schedules, switches, timeline};
use agentcron::console::snapshot::RunDetail;
use agentcron::store::RunState;
use ratatui::crossterm::event::KeyCode;
use support::*;

/// The newest run of the dead-letter queue in the fixture.
const DEAD_RUN: i64 = 225;

fn detail_of(m: &Model, run: i64) -> RunDetail {
    let r = m.snapshot.find_run(run).cloned().expect("run in the fixture");
    RunDetail {
        run: r,
        attempts: vec![],
        steps: vec![],
        events: vec![],
        approvals: vec![],
        explanation: None,
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
        Layer::Retries => {
            m.pane = Pane::Retries;
            let keys = retries::keys(&m);
            assert!(
                m.retries.select(&keys, &RowKey::Run(DEAD_RUN)),
                "dead letter listed"
            );
        }
        Layer::Approvals => {
            m.pane = Pane::Approvals;
        }
        Layer::Rehearsal => m = rehearsal_model(80, 24, true),
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
        Layer::Input if action == Action::Complete => {
            m.bar = Some(Bar::Command(LineInput::with_text("pa")));
        }
        Layer::Input => {
            m.bar = Some(Bar::Filter(LineInput::with_text("sync")));
            m.filter = "sync".into();
        }
        Layer::Quitting => {
            m = embedding_model(true);
            update(&mut m, ch('q'));
            update(&mut m, key(KeyCode::Right));
            update(&mut m, key(KeyCode::Enter));
            assert!(matches!(
                quit_phase(&m),
                Some(QuitPhase::Stopping { now: false, .. })
            ));
        }
        Layer::Dialog | Layer::DialogText | Layer::DialogChoice | Layer::DialogButtons => {
            let label = "hourly-sync x".to_string();
            let focus = match (layer, action) {
                (Layer::DialogText, _) => Field::Reason,
                // Up/Down choose the step to resume after; Enter goes on.
                (Layer::DialogChoice, _) => Field::Choice,
                (_, Action::Confirm) => Field::Confirm,
                _ => Field::Cancel,
            };
            m.overlay = reason_dialog(
                Intent::Approve {
                    run: human,
                    label,
                    resume_after: None,
                },
                "checked the webhook",
                focus,
            );
            if let Overlay::Dialog(d) = &mut m.overlay
                && let Dialog::Reason(r) = d.as_mut()
            {
                r.choices = vec!["fetch".into(), "summarize".into()];
            }
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
            // Where the layer's cursor or scroll is: a larger number is further down.
            let pos = |m: &Model| -> Option<usize> {
                match layer {
                    Layer::Detail => detail(m).map(|d| usize::from(d.scroll)),
                    Layer::Help => match m.overlay {
                        Overlay::Help { scroll } => Some(usize::from(scroll)),
                        _ => None,
                    },
                    _ => m.schedules.resolve_names(schedules::names(m)),
                }
            };
            let (b, a) = (pos(before), pos(after));
            assert!(b.is_some() && a.is_some(), "{ctx}: {b:?} -> {a:?}");
            match action {
                Action::Down | Action::PageDown | Action::Bottom => assert!(a > b, "{ctx}: {b:?} -> {a:?}"),
                _ => assert!(a < b, "{ctx}: {b:?} -> {a:?}"),
            }
            if action == Action::Top {
                assert_eq!(a, Some(0), "{ctx}");
            }
            if action == Action::Bottom && !matches!(layer, Layer::Detail | Layer::Help) {
                assert_eq!(a, Some(schedules::names(after).count() - 1), "{ctx}");
            }
        }
        Action::Left | Action::Right => {
            let start = |m: &Model| timeline::selected_run(m).map(|r| r.window_start);
            let (b, a) = (start(before), start(after));
            assert!(b.is_some() && a.is_some(), "{ctx}");
            if action == Action::Left {
                assert!(a < b, "{ctx}: h/← goes to an older window: {b:?} -> {a:?}");
            } else {
                assert!(a > b, "{ctx}: l/→ goes to a newer window: {b:?} -> {a:?}");
            }
        }
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
        Action::Requeue => {
            let want = if layer == Layer::Retries { DEAD_RUN } else { 102 };
            assert!(
                matches!(dialog_intent(after), Some(Intent::Requeue { run, .. }) if *run == want),
                "{ctx}"
            )
        }
        Action::Pause => assert!(
            matches!(dialog_intent(after), Some(Intent::Pause { .. })),
            "{ctx}"
        ),
        Action::Resume => {
            let intent = Intent::Resume {
                schedule: "inbox-triage".into(),
            };
            assert_eq!(dialog_intent(after), Some(&intent), "{ctx}");
            // The plan is asked for; the dialog cannot confirm before it is there.
            assert!(cmds.contains(&Cmd::Preview(intent)), "{ctx}: {cmds:?}");
        }
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
        Action::Step => assert_eq!(cmds, [Cmd::RehearsalStep], "{ctx}"),
        Action::Play => {
            assert!(after.rehearsal.as_ref().is_some_and(|r| r.playing), "{ctx}");
            assert!(cmds.contains(&Cmd::RehearsalPlay(Some(5))), "{ctx}: {cmds:?}");
        }
        Action::Faster | Action::Slower => assert_ne!(
            after.rehearsal.as_ref().map(|r| r.per_second()),
            before.rehearsal.as_ref().map(|r| r.per_second()),
            "{ctx}"
        ),
        Action::LeaveRehearsal => {
            assert!(after.rehearsal.is_none(), "{ctx}");
            assert_eq!(after.mode_label, "LIVE", "{ctx}");
            assert!(
                cmds.contains(&Cmd::LeaveRehearsal {
                    source: before.source + 1
                }),
                "{ctx}: {cmds:?}"
            );
            assert!(!after.quitting, "{ctx}: q leaves the rehearsal, not the console");
        }
        Action::NextField | Action::PrevField | Action::PrevButton | Action::NextButton => {
            assert_ne!(dialog_focus(after), dialog_focus(before), "{ctx}")
        }
        Action::NextInput => {
            // On to the next field, never confirming.
            assert_ne!(dialog_focus(after), dialog_focus(before), "{ctx}");
            assert!(matches!(after.overlay, Overlay::Dialog(_)), "{ctx}");
            assert!(cmds.iter().all(|c| !c.is_operator_action()), "{ctx}");
        }
        Action::Complete => match &after.bar {
            Some(Bar::Command(l)) => assert_eq!(l.text, "pause ", "{ctx}"),
            other => panic!("{ctx}: {other:?}"),
        },
        Action::StopNow => assert_eq!(cmds, [Cmd::StopScheduler { now: true }], "{ctx}"),
        Action::NextChoice | Action::PrevChoice => {
            let resume = |m: &Model| match &m.overlay {
                Overlay::Dialog(d) => match d.as_ref() {
                    Dialog::Reason(r) => r.resume_after(),
                    Dialog::Confirm(_) => None,
                },
                _ => None,
            };
            // From the start, ↓ goes to the first completed step, ↑ to the last.
            let want = if action == Action::NextChoice {
                "fetch"
            } else {
                "summarize"
            };
            assert_eq!(resume(before), None, "{ctx}");
            assert_eq!(resume(after).as_deref(), Some(want), "{ctx}");
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
    snap.dead.clear();
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
    assert!(command(&mut m, "rehearse dst.toml").contains(&Cmd::Rehearse {
        file: "dst.toml".into(),
        source: 1
    }));
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
fn reason_dialogs_require_a_reason_and_enter_in_the_box_never_confirms() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('5'));
    update(&mut m, ch('x'));
    assert!(matches!(dialog_intent(&m), Some(Intent::Reject { .. })));
    // Issue 52: reject fired on the first Enter after the reason. Enter in
    // the box goes to the buttons, on Cancel, and acts on nothing.
    type_text(&mut m, "duplicate delivery");
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert!(cmds.is_empty(), "Enter in the box never confirms: {cmds:?}");
    assert!(matches!(m.overlay, Overlay::Dialog(_)));
    assert_eq!(dialog_focus(&m), Some(Field::Cancel));
    // The action without a reason is refused and goes back to the box.
    update(&mut m, key(KeyCode::BackTab));
    assert_eq!(dialog_focus(&m), Some(Field::Reason));
    for _ in 0.."duplicate delivery".len() {
        update(&mut m, key(KeyCode::Backspace));
    }
    update(&mut m, key(KeyCode::Enter));
    update(&mut m, key(KeyCode::Right));
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert!(cmds.is_empty(), "empty reason refused");
    assert_eq!(dialog_focus(&m), Some(Field::Reason));
    // Cancel cancels.
    type_text(&mut m, "duplicate delivery");
    update(&mut m, key(KeyCode::Enter));
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert!(cmds.is_empty());
    assert!(matches!(m.overlay, Overlay::None));

    // Approve: reason, Enter (to the resume-after choice), Enter (to the
    // buttons, on Cancel), Right, Enter.
    update(&mut m, ch('a'));
    type_text(&mut m, "verified: not delivered");
    update(&mut m, key(KeyCode::Enter));
    assert_eq!(dialog_focus(&m), Some(Field::Choice));
    assert!(update(&mut m, key(KeyCode::Enter)).is_empty());
    assert_eq!(dialog_focus(&m), Some(Field::Cancel));
    update(&mut m, key(KeyCode::Right));
    let cmds = update(&mut m, key(KeyCode::Enter));
    let human = m.snapshot.approvals[0].run.id;
    assert!(cmds.contains(&Cmd::Approve {
        run: human,
        reason: "verified: not delivered".into(),
        resume_after: None,
    }));

    // An action's result shows in the status line; success reloads at once.
    update(
        &mut m,
        Msg::ActionResult(Err("run 230 is failed, not waiting for approval".into())),
    );
    assert_eq!(
        m.status.as_ref().map(|s| (s.level, s.text.as_str())),
        Some((Level::Error, "run 230 is failed, not waiting for approval"))
    );
    let cmds = update(&mut m, Msg::ActionResult(Ok("run #230 approved".into())));
    assert_eq!(m.status.as_ref().map(|s| s.level), Some(Level::Ok));
    assert!(cmds.contains(&Cmd::Refresh));
}

#[test]
fn the_kill_switch_asks_to_type_its_name() {
    let mut snap = fixed_snapshot();
    snap.switches.kill = None;
    let mut m = model_sized(80, 24, false);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    update(&mut m, ch('K'));
    assert_eq!(
        dialog_intent(&m),
        Some(&Intent::KillOn {
            cancel_running: false
        })
    );
    type_text(&mut m, "incident 4711");
    update(&mut m, key(KeyCode::Enter)); // to the name field
    assert_eq!(dialog_focus(&m), Some(Field::Word));
    type_text(&mut m, "kil");
    // Enter on the name (the last box) goes to the buttons, never confirming;
    // the action is refused while the name is wrong, and goes back to it.
    assert!(update(&mut m, key(KeyCode::Enter)).is_empty());
    assert_eq!(dialog_focus(&m), Some(Field::Cancel));
    update(&mut m, key(KeyCode::Right));
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert!(cmds.is_empty(), "wrong word refused");
    assert_eq!(dialog_focus(&m), Some(Field::Word));
    type_text(&mut m, "l");
    let cmds = press_action(&mut m);
    assert_eq!(
        cmds,
        vec![Cmd::SetKill {
            on: true,
            reason: "incident 4711".into(),
            cancel_running: false,
        }]
    );
}

/// `:kill --cancel-running` and `:approve RUN STEP` carry the command line's
/// `--cancel-running` and `--resume-after` into the dialog and the action.
#[test]
fn kill_cancel_running_and_approve_resume_after_from_the_command_bar() {
    let mut snap = fixed_snapshot();
    snap.switches.kill = None;
    let mut m = model_sized(80, 24, false);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    command(&mut m, "kill --cancel-running");
    assert_eq!(dialog_intent(&m), Some(&Intent::KillOn { cancel_running: true }));
    type_text(&mut m, "runaway agent");
    update(&mut m, key(KeyCode::Enter));
    type_text(&mut m, "kill");
    let cmds = press_action(&mut m);
    assert_eq!(
        cmds,
        vec![Cmd::SetKill {
            on: true,
            reason: "runaway agent".into(),
            cancel_running: true,
        }]
    );

    let mut m = loaded_model(80, 24);
    let human = m.snapshot.approvals[0].run.id;
    command(&mut m, &format!("approve {human} deliver"));
    match dialog_intent(&m) {
        Some(Intent::Approve {
            run, resume_after, ..
        }) => {
            assert_eq!((*run, resume_after.as_deref()), (human, Some("deliver")));
        }
        other => panic!("{other:?}"),
    }
    type_text(&mut m, "delivery confirmed by phone");
    let cmds = press_action(&mut m);
    assert_eq!(
        cmds,
        vec![Cmd::Approve {
            run: human,
            reason: "delivery confirmed by phone".into(),
            resume_after: Some("deliver".into()),
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

fn plan(lines: &[&str], actionable: bool) -> Result<Preview, String> {
    Ok(Preview {
        lines: lines.iter().map(|l| l.to_string()).collect(),
        actionable,
    })
}

fn preview_state(m: &Model) -> Option<&PreviewState> {
    match &m.overlay {
        Overlay::Dialog(d) => match d.as_ref() {
            Dialog::Reason(r) => Some(&r.preview),
            Dialog::Confirm(_) => None,
        },
        _ => None,
    }
}

#[test]
fn resume_shows_the_plan_first_and_starts_on_cancel() {
    let mut m = loaded_model(80, 24);
    select_schedule(&mut m, "inbox-triage");
    let cmds = update(&mut m, ch('u'));
    let intent = Intent::Resume {
        schedule: "inbox-triage".into(),
    };
    assert!(cmds.contains(&Cmd::Preview(intent.clone())), "{cmds:?}");
    assert_eq!(dialog_focus(&m), Some(Field::Cancel));
    assert_eq!(preview_state(&m), Some(&PreviewState::Loading));
    // No confirming before the plan is there.
    update(&mut m, key(KeyCode::Right));
    assert!(update(&mut m, key(KeyCode::Enter)).is_empty());
    assert!(matches!(m.overlay, Overlay::Dialog(_)));
    // A plan for something else is ignored; this one arrives.
    update(
        &mut m,
        Msg::Preview {
            intent: Intent::Resume {
                schedule: "hourly-sync".into(),
            },
            result: plan(&["other"], true),
        },
    );
    assert_eq!(preview_state(&m), Some(&PreviewState::Loading));
    update(
        &mut m,
        Msg::Preview {
            intent: intent.clone(),
            result: plan(&["2 held window(s) are evaluated at once"], true),
        },
    );
    assert!(matches!(preview_state(&m), Some(PreviewState::Ready(_))));
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert_eq!(
        cmds,
        vec![Cmd::Resume {
            schedule: "inbox-triage".into()
        }]
    );
    // A refused plan keeps the action disabled.
    update(&mut m, ch('u'));
    update(
        &mut m,
        Msg::Preview {
            intent,
            result: Err("inbox-triage is not paused".into()),
        },
    );
    update(&mut m, key(KeyCode::Right));
    assert!(update(&mut m, key(KeyCode::Enter)).is_empty());
}

#[test]
fn backfill_command_previews_then_queues_the_range() {
    let mut m = loaded_model(80, 24);
    let cmds = command(&mut m, "backfill hourly-sync 2026-06-01 2026-06-02");
    let Some(Intent::Backfill {
        schedule, from, to, ..
    }) = dialog_intent(&m).cloned()
    else {
        panic!("no backfill dialog: {:?}", m.status);
    };
    assert_eq!(schedule, "hourly-sync");
    // Dates are read in the scheduler's zone (Shanghai), the end date inclusive.
    assert_eq!(from, t("2026-05-31T16:00:00Z"));
    assert_eq!(to, t("2026-06-02T15:59:59Z"));
    assert!(
        matches!(&cmds[..], [Cmd::Preview(Intent::Backfill { .. })]),
        "{cmds:?}"
    );
    assert_eq!(
        dialog_focus(&m),
        Some(Field::Cancel),
        "dangerous: starts on Cancel"
    );
    let intent = dialog_intent(&m).cloned().expect("dialog");
    // Nothing to queue: the action stays disabled.
    update(
        &mut m,
        Msg::Preview {
            intent: intent.clone(),
            result: plan(&["0 window(s) will be queued, 48 left alone:"], false),
        },
    );
    update(&mut m, key(KeyCode::Right));
    assert!(update(&mut m, key(KeyCode::Enter)).is_empty());
    update(
        &mut m,
        Msg::Preview {
            intent,
            result: plan(&["3 window(s) will be queued, 45 left alone:"], true),
        },
    );
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert_eq!(
        cmds,
        vec![Cmd::Backfill {
            schedule: "hourly-sync".into(),
            from,
            to
        }]
    );
    // Bad input says why.
    for bad in [
        "backfill nope 2026-06-01 2026-06-02",
        "backfill hourly-sync yesterday 2026-06-02",
        "backfill hourly-sync 2026-06-03 2026-06-02",
    ] {
        let mut m = loaded_model(80, 24);
        let cmds = command(&mut m, bad);
        assert!(cmds.is_empty() && matches!(m.overlay, Overlay::None), "{bad}");
        assert_eq!(m.status.as_ref().map(|s| s.level), Some(Level::Error), "{bad}");
    }
    // Read-only: refused like every action.
    let mut m = loaded_model(80, 24);
    m.read_only = true;
    assert!(command(&mut m, "backfill hourly-sync 2026-06-01 2026-06-02").is_empty());
    assert!(matches!(m.overlay, Overlay::None));
}

#[test]
fn dead_letters_are_listed_and_requeued_from_the_retry_pane() {
    let mut m = loaded_model(80, 24);
    update(&mut m, ch('4'));
    let keys = retries::keys(&m);
    // Waiting retries first, then the dead letters, newest first.
    assert_eq!(
        keys,
        vec![RowKey::Run(229), RowKey::Run(DEAD_RUN), RowKey::Run(224)]
    );
    // `r` on a waiting retry is refused; on a dead letter it asks a reason.
    update(&mut m, ch('r'));
    assert!(matches!(m.overlay, Overlay::None));
    update(&mut m, ch('j'));
    update(&mut m, ch('r'));
    assert!(matches!(
        dialog_intent(&m),
        Some(Intent::Requeue { run: DEAD_RUN, .. })
    ));
    assert_eq!(dialog_focus(&m), Some(Field::Reason));
    type_text(&mut m, "upstream fixed");
    // Enter in the box goes to the buttons (on Cancel); Right Enter acts.
    assert!(update(&mut m, key(KeyCode::Enter)).is_empty());
    assert_eq!(dialog_focus(&m), Some(Field::Cancel));
    update(&mut m, key(KeyCode::Right));
    assert_eq!(
        update(&mut m, key(KeyCode::Enter)),
        vec![Cmd::Requeue {
            run: DEAD_RUN,
            reason: "upstream fixed".into()
        }]
    );
}

#[test]
fn rehearse_opens_the_rehearsal_store_and_esc_returns_to_live() {
    let mut m = loaded_model(80, 24);
    let cmds = command(&mut m, "rehearse rehearsals/data-delay.toml");
    assert!(
        cmds.contains(&Cmd::Rehearse {
            file: "rehearsals/data-delay.toml".into(),
            source: 1
        }),
        "{cmds:?}"
    );
    assert_eq!(m.mode_label, "REHEARSAL");
    assert!(!m.loaded, "the live data is not shown as the rehearsal's");
    // A live snapshot still in flight is dropped; the rehearsal's is shown.
    update(&mut m, Msg::Snapshot(Box::new(fixed_snapshot())));
    assert!(!m.loaded);
    let cmds = update(&mut m, Msg::Rehearsal(Box::new(progress(1))));
    assert!(cmds.contains(&Cmd::Refresh));
    assert_eq!(m.now, progress(1).now, "the header shows the virtual clock");
    let mut snap = fixed_snapshot();
    snap.source = 1;
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    assert!(m.loaded);
    // The wall clock ticks on without moving the virtual one.
    update(
        &mut m,
        Msg::Tick {
            now: now() + chrono::Duration::seconds(3),
        },
    );
    assert_eq!(m.now, progress(1).now);
    // A progress of an older rehearsal is ignored.
    let mut old = progress(0);
    old.steps = 99;
    update(&mut m, Msg::Rehearsal(Box::new(old)));
    assert_eq!(
        m.rehearsal
            .as_ref()
            .and_then(|r| r.progress.as_ref())
            .map(|p| p.steps),
        Some(12)
    );
    // A second :rehearse is refused while one is open.
    assert!(command(&mut m, "rehearse other.toml").is_empty());
    assert_eq!(m.status.as_ref().map(|s| s.level), Some(Level::Error));
    // Esc backs out of the detail first, then leaves the rehearsal.
    update(&mut m, key(KeyCode::Enter));
    assert!(detail(&m).is_some());
    assert!(update(&mut m, key(KeyCode::Esc)).is_empty());
    assert!(m.rehearsal.is_some());
    let cmds = update(&mut m, key(KeyCode::Esc));
    assert!(cmds.contains(&Cmd::LeaveRehearsal { source: 2 }), "{cmds:?}");
    assert!(m.rehearsal.is_none());
    assert_eq!(m.mode_label, "LIVE");
    assert_eq!(m.now, now() + chrono::Duration::seconds(3), "wall clock again");
    assert!(!m.quitting);
}

#[test]
fn rehearsal_steps_plays_and_reports_the_verdict() {
    let mut m = rehearsal_model(80, 24, true);
    // Space plays at the chosen speed; + and - change it while playing.
    assert_eq!(update(&mut m, ch(' ')), vec![Cmd::RehearsalPlay(Some(5))]);
    assert_eq!(update(&mut m, ch('+')), vec![Cmd::RehearsalPlay(Some(10))]);
    assert_eq!(update(&mut m, ch('=')), vec![Cmd::RehearsalPlay(Some(20))]);
    assert_eq!(update(&mut m, ch('-')), vec![Cmd::RehearsalPlay(Some(10))]);
    // n pauses and steps once.
    assert_eq!(
        update(&mut m, ch('n')),
        vec![Cmd::RehearsalPlay(None), Cmd::RehearsalStep]
    );
    assert!(!m.rehearsal.as_ref().is_some_and(|r| r.playing));
    // Speeds stop at the ends.
    for _ in 0..20 {
        update(&mut m, ch('-'));
    }
    assert_eq!(m.rehearsal.as_ref().map(|r| r.per_second()), Some(1));
    // The last step: every expectation decided, playing stops, the verdict shows.
    update(&mut m, ch(' '));
    let mut done = progress(m.source);
    done.finished = true;
    done.steps = 21;
    for v in &mut done.verdicts {
        v.passed = Some(true);
    }
    update(&mut m, Msg::Rehearsal(Box::new(done)));
    let r = m.rehearsal.as_ref().expect("rehearsal");
    assert!(!r.playing);
    assert_eq!(r.tally(), (4, 0, 0));
    assert_eq!(m.status.as_ref().map(|s| s.level), Some(Level::Ok));
    assert!(m.status.as_ref().is_some_and(|s| s.text.contains("PASSED")));
    // Nothing more to step.
    assert!(update(&mut m, ch('n')).is_empty());
    assert!(update(&mut m, ch(' ')).is_empty());
    // Operator actions in rehearsal mode are sent like live ones (the shell
    // applies them to the rehearsal's store at its virtual time).
    update(&mut m, ch('5'));
    update(&mut m, ch('a'));
    type_text(&mut m, "checked in the rehearsal");
    let cmds = press_action(&mut m);
    assert!(matches!(&cmds[..], [Cmd::Approve { .. }]), "{cmds:?}");
}

#[test]
fn a_rehearsal_that_cannot_start_returns_to_live_or_says_why() {
    // From the live console: back to live, with the error.
    let mut m = loaded_model(80, 24);
    command(&mut m, "rehearse missing.toml");
    let cmds = update(
        &mut m,
        Msg::RehearsalFailed {
            source: 1,
            error: "missing.toml: cannot read".into(),
        },
    );
    assert!(m.rehearsal.is_none());
    assert!(cmds.contains(&Cmd::LeaveRehearsal { source: 2 }));
    assert!(m.status.as_ref().is_some_and(|s| s.text.contains("cannot read")));
    // Keys wait for a loading rehearsal.
    let mut m = Model::new(Init {
        rehearsal: Some("slow.toml".into()),
        ..init(80, 24, false)
    });
    assert_eq!(m.mode_label, "REHEARSAL");
    assert!(update(&mut m, ch('n')).is_empty());
    assert!(m.status.as_ref().is_some_and(|s| s.text.contains("loading")));
    // Started as `rehearse --console`: the error stays on screen.
    update(
        &mut m,
        Msg::RehearsalFailed {
            source: 0,
            error: "engine: database locked".into(),
        },
    );
    assert!(m.rehearsal.as_ref().is_some_and(|r| r.error.is_some()));
}

#[test]
fn a_standalone_rehearsal_quits_with_q_and_never_with_esc() {
    let mut m = rehearsal_model(80, 24, false);
    for _ in 0..3 {
        assert!(update(&mut m, key(KeyCode::Esc)).is_empty());
    }
    assert!(m.rehearsal.is_some() && !m.quitting);
    assert_eq!(update(&mut m, ch('q')), vec![Cmd::Quit]);
    assert!(m.quitting);
    // The footer offers q once, as leaving the rehearsal.
    let m = rehearsal_model(80, 24, false);
    let footer = keymap::footer(&m.layers(), false);
    let qs: Vec<_> = footer
        .iter()
        .filter(|b| b.keys.iter().any(|k| k.label() == "q"))
        .map(|b| b.action)
        .collect();
    assert_eq!(qs, vec![Action::LeaveRehearsal]);
    assert!(footer.iter().any(|b| b.action == Action::Step));
}

#[test]
fn the_schedules_in_view_follow_the_cursor() {
    // Five hundred schedules: only those around the cursor are asked for.
    let mut snap = fixed_snapshot();
    let template = snap.schedules[0].clone();
    let lane = snap.lanes[0].clone();
    for i in 0..496 {
        let mut row = template.clone();
        row.id = format!("job-{i:03}");
        snap.schedules.push(row);
        let mut l = lane.clone();
        l.schedule = format!("job-{i:03}");
        l.runs.clear();
        snap.lanes.push(l);
    }
    let mut m = model_sized(80, 24, false);
    let cmds = update(&mut m, Msg::Snapshot(Box::new(snap)));
    let view = cmds
        .iter()
        .find_map(|c| match c {
            Cmd::View(v) => Some(v.clone()),
            _ => None,
        })
        .expect("the view is sent once data is there");
    assert_eq!(view.first().map(String::as_str), Some("daily-sales-report"));
    assert!(view.len() <= 2 * 24 + 1, "{}", view.len());
    assert!(!view.iter().any(|v| v == "job-495"));
    // Nothing moved: nothing sent.
    assert!(
        !update(&mut m, Msg::Tick { now: now() })
            .iter()
            .any(|c| matches!(c, Cmd::View(_)))
    );
    // To the last row: its neighbourhood is asked for.
    let cmds = update(&mut m, ch('G'));
    let view = cmds
        .iter()
        .find_map(|c| match c {
            Cmd::View(v) => Some(v.clone()),
            _ => None,
        })
        .expect("a new view");
    assert!(view.iter().any(|v| v == "job-495"), "{view:?}");
    // The timeline's cursor counts too.
    update(&mut m, ch('2'));
    update(&mut m, ch('g'));
    assert!(m.view_sent.iter().any(|v| v == "daily-sales-report"));
    assert!(m.view_sent.iter().any(|v| v == "job-495"));
}

/// Opens a dialog in a fresh fixture model by its keys.
fn opened(keys: &[Msg], kill_off: bool) -> Model {
    let mut m = if kill_off {
        let mut snap = fixed_snapshot();
        snap.switches.kill = None;
        let mut m = model_sized(80, 24, false);
        update(&mut m, Msg::Snapshot(Box::new(snap)));
        m
    } else {
        loaded_model(80, 24)
    };
    for k in keys {
        update(&mut m, k.clone());
    }
    assert!(matches!(m.overlay, Overlay::Dialog(_)), "{keys:?} opens a dialog");
    m
}

/// The operator actions among `cmds`.
fn acts(cmds: &[Cmd]) -> Vec<Cmd> {
    cmds.iter().filter(|c| c.is_operator_action()).cloned().collect()
}

/// Presses a dialog's action the one way every dialog takes: Enter through
/// its fields to the buttons (on Cancel), Right, Enter.
fn press_action(m: &mut Model) -> Vec<Cmd> {
    let mut cmds = Vec::new();
    for _ in 0..4 {
        if dialog_focus(m) == Some(Field::Cancel) {
            break;
        }
        cmds.extend(update(m, key(KeyCode::Enter)));
    }
    assert_eq!(
        dialog_focus(m),
        Some(Field::Cancel),
        "Enter reaches the buttons on Cancel"
    );
    cmds.extend(update(m, key(KeyCode::Right)));
    cmds.extend(update(m, key(KeyCode::Enter)));
    cmds
}

/// Issue 52: trigger opened on its action and backfill on Cancel, so Right
/// Enter cancelled one and confirmed the other; reject fired on the first
/// Enter after the reason. One grammar now: the buttons start on Cancel,
/// Enter in a text box moves on and never confirms (Enter after Enter lands
/// on Cancel and cancels), Right Enter on the buttons acts, Esc cancels.
#[test]
fn every_dialog_speaks_one_grammar() {
    let human = loaded_model(80, 24).snapshot.approvals[0].run.id;
    let select = |id: &str| -> Vec<Msg> {
        let m = loaded_model(80, 24);
        let names: Vec<String> = schedules::names(&m).map(str::to_string).collect();
        let at = names.iter().position(|n| n == id).expect("listed");
        let mut keys = vec![ch('1')];
        keys.extend(std::iter::repeat_n(ch('j'), at));
        keys
    };
    let with = |mut keys: Vec<Msg>, k: char| {
        keys.push(ch(k));
        keys
    };
    // (what, keys that open it, kill switch off first, typed reason, typed word, the action)
    type Case<'a> = (&'a str, Vec<Msg>, bool, Option<&'a str>, Option<&'a str>, Cmd);
    let cases: Vec<Case> = vec![
        (
            "approve",
            vec![ch('5'), ch('a')],
            false,
            Some("checked"),
            None,
            Cmd::Approve {
                run: human,
                reason: "checked".into(),
                resume_after: None,
            },
        ),
        (
            "reject",
            vec![ch('5'), ch('x')],
            false,
            Some("duplicate"),
            None,
            Cmd::Reject {
                run: human,
                reason: "duplicate".into(),
            },
        ),
        (
            "requeue",
            vec![ch('4'), ch('j'), ch('r')],
            false,
            Some("fixed"),
            None,
            Cmd::Requeue {
                run: DEAD_RUN,
                reason: "fixed".into(),
            },
        ),
        (
            "pause",
            with(select("daily-sales-report"), 'p'),
            false,
            Some("db move"),
            None,
            Cmd::Pause {
                schedule: "daily-sales-report".into(),
                reason: "db move".into(),
            },
        ),
        (
            "close circuit",
            with(select("hourly-sync"), 'c'),
            false,
            Some("upstream back"),
            None,
            Cmd::CloseCircuit {
                schedule: "hourly-sync".into(),
                reason: "upstream back".into(),
            },
        ),
        (
            "trigger",
            with(select("daily-sales-report"), 't'),
            false,
            None,
            None,
            Cmd::Trigger {
                schedule: "daily-sales-report".into(),
            },
        ),
        (
            "unkill",
            vec![ch('K')],
            false,
            Some("incident over"),
            None,
            Cmd::SetKill {
                on: false,
                reason: "incident over".into(),
                cancel_running: false,
            },
        ),
        (
            "kill",
            vec![ch('K')],
            true,
            Some("incident 4711"),
            Some("kill"),
            Cmd::SetKill {
                on: true,
                reason: "incident 4711".into(),
                cancel_running: false,
            },
        ),
    ];
    for (what, keys, kill_off, reason, word, want) in cases {
        let inputs = usize::from(reason.is_some()) + usize::from(word.is_some());
        // Opened: the focus in the first box, or on Cancel; the buttons on Cancel.
        let m = opened(&keys, kill_off);
        let Overlay::Dialog(d) = &m.overlay else {
            unreachable!()
        };
        assert_eq!(d.button(), Field::Cancel, "{what}: the buttons start on Cancel");
        let first = if inputs > 0 { Field::Reason } else { Field::Cancel };
        assert_eq!(d.focus(), first, "{what}");

        // Enter in the boxes moves on and never confirms: filled in, Enter
        // after Enter reaches Cancel, and the next Enter cancels.
        let fill = |m: &mut Model| {
            if let Some(r) = reason {
                type_text(m, r);
            }
            if let Some(w) = word {
                update(m, key(KeyCode::Enter));
                type_text(m, w);
            }
        };
        let mut m = opened(&keys, kill_off);
        fill(&mut m);
        let mut cmds = Vec::new();
        for _ in 0..3 {
            if dialog_focus(&m) == Some(Field::Cancel) {
                break;
            }
            cmds.extend(update(&mut m, key(KeyCode::Enter)));
        }
        assert_eq!(
            dialog_focus(&m),
            Some(Field::Cancel),
            "{what}: Enter goes to the buttons"
        );
        cmds.extend(update(&mut m, key(KeyCode::Enter)));
        assert!(acts(&cmds).is_empty(), "{what}: Enter never confirms: {cmds:?}");
        assert!(
            matches!(m.overlay, Overlay::None),
            "{what}: Enter on Cancel cancels"
        );

        // The same keys act in every dialog: fill in, Enter to the buttons,
        // Right to the action, Enter.
        let mut m = opened(&keys, kill_off);
        fill(&mut m);
        let mut cmds = Vec::new();
        for _ in 0..3 {
            if dialog_focus(&m) == Some(Field::Cancel) {
                break;
            }
            cmds.extend(update(&mut m, key(KeyCode::Enter)));
        }
        cmds.extend(update(&mut m, key(KeyCode::Right)));
        cmds.extend(update(&mut m, key(KeyCode::Enter)));
        assert_eq!(acts(&cmds), vec![want.clone()], "{what}: Right Enter acts once");
        assert!(
            !matches!(m.overlay, Overlay::Dialog(_)),
            "{what}: the dialog closed"
        );

        // Esc at any point cancels, acting on nothing.
        let mut m = opened(&keys, kill_off);
        if let Some(r) = reason {
            type_text(&mut m, r);
        }
        let cmds = update(&mut m, key(KeyCode::Esc));
        assert!(acts(&cmds).is_empty(), "{what}: Esc acts on nothing: {cmds:?}");
        assert!(matches!(m.overlay, Overlay::None), "{what}: Esc closes");
    }
}

/// A console embedding a scheduler whose lease owner is `me`, with one
/// attempt of its own running (and one of another scheduler).
fn embedding_model(own_running: bool) -> Model {
    let mut m = Model::new(Init {
        embedded: Some(EmbeddedInfo {
            owner: "me:1".into(),
            grace: chrono::Duration::seconds(30),
        }),
        ..init(80, 24, false)
    });
    let mut snap = fixed_snapshot();
    let mut mine = snap.lanes[0].runs[0].clone();
    mine.state = RunState::Running;
    mine.lease_owner = Some(if own_running { "me:1" } else { "other:2" }.into());
    let mut theirs = snap.lanes[1].runs[0].clone();
    theirs.state = RunState::Running;
    theirs.lease_owner = Some("other:2".into());
    snap.running = vec![mine, theirs];
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    m
}

fn quit_phase(m: &Model) -> Option<QuitPhase> {
    match &m.overlay {
        Overlay::Quit(d) => Some(d.phase.clone()),
        _ => None,
    }
}

#[test]
fn quitting_with_attempts_running_asks_wait_stop_or_cancel() {
    // No attempt of ours running: q stops the scheduler and quits when it stopped.
    let mut m = embedding_model(false);
    let cmds = update(&mut m, ch('q'));
    assert_eq!(cmds, vec![Cmd::StopScheduler { now: false }]);
    assert!(!m.quitting, "the console stays until the scheduler stopped");
    assert!(matches!(
        quit_phase(&m),
        Some(QuitPhase::Stopping { now: false, .. })
    ));
    assert_eq!(update(&mut m, Msg::SchedulerStopped), vec![Cmd::Quit]);
    assert!(m.quitting);

    // One of ours running: q asks, focus on Cancel (as in every dialog);
    // Enter and Esc cancel.
    let mut m = embedding_model(true);
    assert_eq!(m.own_attempts().len(), 1, "only our attempts are listed");
    assert!(update(&mut m, ch('q')).is_empty());
    assert_eq!(quit_phase(&m), Some(QuitPhase::Ask(QuitButton::Cancel)));
    assert!(update(&mut m, key(KeyCode::Enter)).is_empty());
    assert!(matches!(m.overlay, Overlay::None) && !m.quitting);
    update(&mut m, ch('q'));
    assert!(update(&mut m, key(KeyCode::Esc)).is_empty());
    assert!(matches!(m.overlay, Overlay::None) && !m.quitting);

    // Wait: the scheduler drains; the dialog shows the progress; Ctrl-C then stops now.
    update(&mut m, ch('q'));
    update(&mut m, key(KeyCode::Right));
    assert_eq!(quit_phase(&m), Some(QuitPhase::Ask(QuitButton::Wait)));
    let cmds = update(&mut m, key(KeyCode::Enter));
    assert_eq!(cmds, vec![Cmd::StopScheduler { now: false }]);
    assert!(matches!(
        quit_phase(&m),
        Some(QuitPhase::Stopping { now: false, .. })
    ));
    let screen = render(&m, &agentcron::console::theme::Theme::plain(), 80, 24);
    assert!(
        screen.contains("Quitting: waiting for running attempts"),
        "{screen}"
    );
    assert!(screen.contains("left of shutdown_grace"), "{screen}");
    assert_eq!(update(&mut m, ctrl('c')), vec![Cmd::StopScheduler { now: true }]);
    assert!(update(&mut m, ctrl('c')).is_empty(), "already stopping now");

    // Stop now from the buttons.
    let mut m = embedding_model(true);
    update(&mut m, ch('q'));
    update(&mut m, key(KeyCode::Left));
    assert_eq!(quit_phase(&m), Some(QuitPhase::Ask(QuitButton::StopNow)));
    assert_eq!(
        update(&mut m, key(KeyCode::Enter)),
        vec![Cmd::StopScheduler { now: true }]
    );

    // Ctrl-C: the same dialog; a second Ctrl-C stops at once.
    let mut m = embedding_model(true);
    assert!(update(&mut m, ctrl('c')).is_empty());
    assert_eq!(quit_phase(&m), Some(QuitPhase::Ask(QuitButton::Cancel)));
    let screen = render(&m, &agentcron::console::theme::Theme::plain(), 80, 24);
    assert!(screen.contains("Quit agentcron?"), "{screen}");
    assert!(
        screen.contains("Wait for them") && screen.contains("Stop them now"),
        "{screen}"
    );
    assert_eq!(update(&mut m, ctrl('c')), vec![Cmd::StopScheduler { now: true }]);
    assert!(!m.quitting);
    assert_eq!(update(&mut m, Msg::SchedulerStopped), vec![Cmd::Quit]);
}

/// The index of an intent's kind: exhaustive, so a new kind of dialog must
/// join the table below.
fn intent_kind(i: &Intent) -> usize {
    match i {
        Intent::Approve { .. } => 0,
        Intent::Reject { .. } => 1,
        Intent::Requeue { .. } => 2,
        Intent::Pause { .. } => 3,
        Intent::Resume { .. } => 4,
        Intent::Trigger { .. } => 5,
        Intent::CloseCircuit { .. } => 6,
        Intent::KillOn { .. } => 7,
        Intent::KillOff => 8,
        Intent::Reload => 9,
        Intent::ApproveConfig { .. } => 10,
        Intent::Backfill { .. } => 11,
    }
}

/// Issue 52: trigger opened focused on its action, backfill on Cancel. Every
/// kind of dialog changes state, and every one starts with its buttons on
/// Cancel: the focus is in its first text box, or, without one, on Cancel.
#[test]
fn every_dialog_kind_starts_with_its_buttons_on_cancel() {
    let s = || "daily-sales-report".to_string();
    let table = vec![
        Intent::Approve {
            run: 1,
            label: "x".into(),
            resume_after: None,
        },
        Intent::Reject {
            run: 1,
            label: "x".into(),
        },
        Intent::Requeue {
            run: 1,
            label: "x".into(),
        },
        Intent::Pause { schedule: s() },
        Intent::Resume { schedule: s() },
        Intent::Trigger { schedule: s() },
        Intent::CloseCircuit { schedule: s() },
        Intent::KillOn {
            cancel_running: false,
        },
        Intent::KillOn { cancel_running: true },
        Intent::KillOff,
        Intent::Reload,
        Intent::ApproveConfig { version: 2 },
        Intent::Backfill {
            schedule: s(),
            from: now(),
            to: now(),
            range: "r".into(),
        },
    ];
    let mut seen: Vec<usize> = table.iter().map(intent_kind).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (0..12).collect::<Vec<_>>(), "every kind is in the table");
    for intent in table {
        let d = Dialog::open(intent.clone());
        assert_eq!(
            d.button(),
            Field::Cancel,
            "{intent:?}: the buttons start on Cancel"
        );
        let want = if intent.needs_reason() {
            Field::Reason
        } else {
            Field::Cancel
        };
        assert_eq!(d.focus(), want, "{intent:?}");
        // Its footer is its focused field's: a text box's or the buttons'.
        let own = if want == Field::Reason {
            Layer::DialogText
        } else {
            Layer::DialogButtons
        };
        assert_eq!(d.layers(), vec![own, Layer::Dialog], "{intent:?}");
    }
    // The quit dialog too.
    let mut m = embedding_model(true);
    update(&mut m, ch('q'));
    assert_eq!(quit_phase(&m), Some(QuitPhase::Ask(QuitButton::Cancel)));
}

/// Enter in a text box moves on (the next box, then the buttons on Cancel)
/// and never confirms, however complete the dialog is.
#[test]
fn enter_in_a_text_box_moves_to_the_buttons_and_never_confirms() {
    for intent in [
        Intent::Reject {
            run: 1,
            label: "x".into(),
        },
        Intent::KillOn {
            cancel_running: false,
        },
    ] {
        let mut d = Dialog::open(intent.clone());
        let kill = intent.confirm_word().is_some();
        let press = |d: &mut Dialog, code: KeyCode| {
            d.handle_key(&ratatui::crossterm::event::KeyEvent::new(
                code,
                ratatui::crossterm::event::KeyModifiers::NONE,
            ))
        };
        for c in "because".chars() {
            press(&mut d, KeyCode::Char(c));
        }
        assert_eq!(
            press(&mut d, KeyCode::Enter),
            agentcron::console::dialogs::Outcome::Continue
        );
        if kill {
            assert_eq!(d.focus(), Field::Word, "{intent:?}");
            for c in "kill".chars() {
                press(&mut d, KeyCode::Char(c));
            }
            assert_eq!(
                press(&mut d, KeyCode::Enter),
                agentcron::console::dialogs::Outcome::Continue
            );
        }
        assert_eq!(d.focus(), Field::Cancel, "{intent:?}: Enter lands on Cancel");
        // Enter there cancels; Right Enter acts.
        let mut cancel = d.clone();
        assert_eq!(
            press(&mut cancel, KeyCode::Enter),
            agentcron::console::dialogs::Outcome::Cancel
        );
        press(&mut d, KeyCode::Right);
        assert!(
            matches!(
                press(&mut d, KeyCode::Enter),
                agentcron::console::dialogs::Outcome::Submit(_)
            ),
            "{intent:?}"
        );
    }
}

/// The footer line of `m` rendered at 100×30.
fn footer(m: &Model) -> String {
    let screen = render(m, &agentcron::console::theme::Theme::plain(), 100, 30);
    screen.lines().last().unwrap_or_default().to_string()
}

/// Issue 52: every dialog's footer said "↓ choose (resume after) ↑ choose".
/// Each footer is now generated from the keys of its own dialog's focused
/// field.
#[test]
fn each_dialog_footer_lists_its_own_keys() {
    // Trigger: buttons only.
    let mut m = loaded_model(100, 30);
    select_schedule(&mut m, "daily-sales-report");
    update(&mut m, ch('t'));
    let f = footer(&m);
    for want in ["← left", "→ right", "Enter press", "Esc cancel"] {
        assert!(f.contains(want), "trigger: {want} in {f}");
    }
    for not in ["resume after", "next box", "choose"] {
        assert!(!f.contains(not), "trigger: no {not} in {f}");
    }
    // Reject: in its reason box.
    let mut m = loaded_model(100, 30);
    update(&mut m, ch('5'));
    update(&mut m, ch('x'));
    let f = footer(&m);
    assert!(f.contains("Enter next box / the buttons"), "{f}");
    for not in ["resume after", "press", "← left"] {
        assert!(!f.contains(not), "reject: no {not} in {f}");
    }
    // Approve, on its resume-after choice: only there is a step chosen.
    update(&mut m, key(KeyCode::Esc));
    update(&mut m, ch('a'));
    type_text(&mut m, "ok");
    update(&mut m, key(KeyCode::Enter));
    assert_eq!(dialog_focus(&m), Some(Field::Choice));
    let f = footer(&m);
    assert!(f.contains("↓ next step to resume after"), "{f}");
    assert!(f.contains("↑ previous step"), "{f}");
    // Quitting while waiting: Ctrl-C stops them now; no button keys.
    let mut m = embedding_model(true);
    update(&mut m, ch('q'));
    update(&mut m, key(KeyCode::Right));
    update(&mut m, key(KeyCode::Enter));
    let f = footer(&m);
    assert!(f.contains("C-c stop them now"), "{f}");
    assert!(!f.contains("press"), "{f}");
}

/// Issue 52: "Wait for them" must not leave an unchanged screen for up to
/// `shutdown_grace`: the dialog counts down, with the attempts still running,
/// on every tick (virtual `now` in the message).
#[test]
fn a_waiting_quit_counts_down_with_the_attempts_still_running() {
    let mut m = embedding_model(true);
    let t0 = m.wall;
    update(&mut m, ch('q'));
    update(&mut m, key(KeyCode::Right));
    assert_eq!(
        update(&mut m, key(KeyCode::Enter)),
        vec![Cmd::StopScheduler { now: false }]
    );
    let theme = agentcron::console::theme::Theme::plain();
    let mine = m.own_attempts()[0].clone();
    let mut screens = Vec::new();
    for (secs, left) in [(1, "29s left"), (12, "18s left"), (29, "1s left")] {
        update(
            &mut m,
            Msg::Tick {
                now: t0 + chrono::Duration::seconds(secs),
            },
        );
        let screen = render(&m, &theme, 80, 24);
        assert!(screen.contains(left), "{secs}s after: {left} in\n{screen}");
        assert!(screen.contains("1 attempt"), "{screen}");
        assert!(
            screen.contains(&format!("#{} {}", mine.run, mine.schedule)),
            "the attempt is named:\n{screen}"
        );
        screens.push(screen);
    }
    assert!(screens.windows(2).all(|w| w[0] != w[1]), "re-rendered each tick");
    // The attempt ended: the dialog says so, still counting.
    let mut snap = m.snapshot.clone();
    snap.running.retain(|r| r.lease_owner.as_deref() != Some("me:1"));
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    let screen = render(&m, &theme, 80, 24);
    assert!(
        screen.contains("0 attempts") || screen.contains("No attempt"),
        "{screen}"
    );
}

/// Issue 52 (item 6): the schedules pane told each schedule's next fire in
/// the schedule's own zone, under a header in the console's. One zone per
/// screen: the header's.
#[test]
fn next_fires_are_in_the_console_zone_whatever_the_schedule_fires_in() {
    let mut snap = fixed_snapshot();
    let row = &mut snap.schedules[0];
    let id = row.id.clone();
    row.timezone = chrono_tz::America::New_York;
    // 09:00 in New York (EDT) is 21:00 in Shanghai, the console's zone.
    let at = agentcron::console::snapshot::NextFire {
        at: t("2026-06-08T13:00:00Z"),
        window_key: "2026-06-08".into(),
        note: None,
    };
    row.next_fire = Some(at);
    let mut m = model_sized(100, 24, false);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    let screen = render(&m, &agentcron::console::theme::Theme::plain(), 100, 24);
    assert!(
        screen.lines().next().unwrap_or_default().contains("CST"),
        "{screen}"
    );
    let line = screen
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("{id} listed:\n{screen}"));
    assert!(line.contains("21:00"), "in the console's zone: {line}");
    assert!(!line.contains("09:00"), "not in the schedule's: {line}");
}

/// Issue 52 (item 3): the console follows the config version the database
/// runs: a schedule added by a reload is listed, completed and triggerable in
/// the same console, and the zone follows the version's.
#[test]
fn a_schedule_added_by_a_reload_is_listed_completed_and_triggerable() {
    let mut m = loaded_model(100, 30);
    update(
        &mut m,
        Msg::ConfigApplied {
            version: 1,
            tz: chrono_tz::Asia::Shanghai,
        },
    );
    assert!(m.status.is_none(), "the first version read is not news");
    // The reload applied v2, which adds `added-later`; the poller's next
    // snapshot is read with it.
    update(
        &mut m,
        Msg::ConfigApplied {
            version: 2,
            tz: chrono_tz::Asia::Shanghai,
        },
    );
    assert_eq!(m.config_version, Some(2));
    assert!(
        m.status
            .as_ref()
            .is_some_and(|s| s.text.contains("config v2 applied")),
        "{:?}",
        m.status
    );
    let mut snap = fixed_snapshot();
    let mut row = snap.schedules[0].clone();
    row.id = "added-later".into();
    snap.schedules.push(row);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    let screen = render(&m, &agentcron::console::theme::Theme::plain(), 100, 30);
    assert!(screen.contains("added-later"), "{screen}");
    // `:trigger add` Tab completes it; the command opens its dialog.
    update(&mut m, ch(':'));
    type_text(&mut m, "trigger add");
    update(&mut m, key(KeyCode::Tab));
    assert!(matches!(&m.bar, Some(Bar::Command(l)) if l.text == "trigger added-later "));
    update(&mut m, key(KeyCode::Enter));
    assert_eq!(
        dialog_intent(&m),
        Some(&Intent::Trigger {
            schedule: "added-later".into()
        })
    );
    // And `t` on its row.
    update(&mut m, key(KeyCode::Esc));
    update(&mut m, ch('1'));
    select_schedule(&mut m, "added-later");
    update(&mut m, ch('t'));
    let cmds = press_action(&mut m);
    assert_eq!(
        acts(&cmds),
        vec![Cmd::Trigger {
            schedule: "added-later".into()
        }]
    );
    // A version in another zone moves the console's zone with it.
    update(
        &mut m,
        Msg::ConfigApplied {
            version: 3,
            tz: chrono_tz::Europe::Berlin,
        },
    );
    assert_eq!(m.tz, chrono_tz::Europe::Berlin);
}

/// Tab in the command bar completes command names, then schedule ids and run
/// ids from the model, showing the candidates when there are several.
#[test]
fn tab_completes_commands_schedules_and_runs() {
    let mut m = loaded_model(100, 30);
    update(&mut m, ch(':'));
    type_text(&mut m, "paus");
    update(&mut m, key(KeyCode::Tab));
    assert!(matches!(&m.bar, Some(Bar::Command(l)) if l.text == "pause "));
    update(&mut m, key(KeyCode::Tab));
    assert!(m.completions.len() > 1, "every schedule: {:?}", m.completions);
    let screen = render(&m, &agentcron::console::theme::Theme::plain(), 100, 30);
    let bar = screen.lines().nth(28).unwrap_or_default();
    assert!(
        bar.contains("Tab:") && bar.contains("daily-sales-report"),
        "{bar}"
    );
    // Any other key clears the candidates.
    type_text(&mut m, "d");
    assert!(m.completions.is_empty());
    // Approve completes the runs waiting for a human.
    update(&mut m, key(KeyCode::Esc));
    let human = m.snapshot.approvals[0].run.id;
    update(&mut m, ch(':'));
    type_text(&mut m, "approve ");
    update(&mut m, key(KeyCode::Tab));
    assert!(
        matches!(&m.bar, Some(Bar::Command(l)) if l.text == format!("approve {human} ")),
        "{:?}",
        m.bar
    );
}

/// A quit in progress stays on screen in a terminal below the minimum size:
/// asking, and then counting down.
#[test]
fn a_quit_stays_visible_in_a_small_terminal() {
    let mut m = embedding_model(true);
    let t0 = m.wall;
    let theme = agentcron::console::theme::Theme::plain();
    update(&mut m, ch('q'));
    let screen = render(&m, &theme, 50, 10);
    assert!(screen.contains("quit? 1 running · Cancel"), "{screen}");
    update(&mut m, key(KeyCode::Right));
    update(&mut m, key(KeyCode::Enter));
    update(
        &mut m,
        Msg::Tick {
            now: t0 + chrono::Duration::seconds(5),
        },
    );
    let screen = render(&m, &theme, 50, 10);
    assert!(screen.contains("quitting: 1 running, 25s left"), "{screen}");
}
