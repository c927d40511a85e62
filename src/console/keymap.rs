//! The keymap as data: every binding is a row (`keys, action, description,
//! layer, dangerous`). `update` resolves keys through this table, and the help
//! overlay and the footer are generated from it, so they cannot drift apart.
//!
//! Input goes to the topmost layer first: dialog > text input (filter and
//! command bars) > help > run detail > rehearsal mode > focused pane >
//! navigation > global.

use super::panes::Pane;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Anywhere on the main screen and in the run detail.
    Global,
    /// Moving in the focused list.
    Navigation,
    Schedules,
    Timeline,
    Retries,
    Approvals,
    Switches,
    /// While a rehearsal is open.
    Rehearsal,
    Detail,
    Help,
    /// The filter and command bars.
    Input,
    /// Every dialog, wherever its focus is.
    Dialog,
    /// A dialog's text box has the focus.
    DialogText,
    /// A dialog's choice (approve: the step to resume after) has the focus.
    DialogChoice,
    /// A dialog's buttons have the focus.
    DialogButtons,
    /// Quitting, waiting for the embedded scheduler's attempts.
    Quitting,
}

impl Layer {
    pub fn title(self) -> &'static str {
        match self {
            Layer::Global => "Everywhere",
            Layer::Navigation => "Lists",
            Layer::Schedules => "Schedules pane",
            Layer::Timeline => "Timeline pane",
            Layer::Retries => "Retry queue pane (and dead letters)",
            Layer::Approvals => "Approvals pane",
            Layer::Switches => "Switches pane",
            Layer::Rehearsal => "Rehearsal mode",
            Layer::Detail => "Run detail",
            Layer::Help => "Help",
            Layer::Input => "Filter / command bar",
            Layer::Dialog => "Dialogs (every one: the buttons start on Cancel)",
            Layer::DialogText => "Dialogs: in a text box (Enter never confirms)",
            Layer::DialogChoice => "Dialogs: on a choice",
            Layer::DialogButtons => "Dialogs: on the buttons",
            Layer::Quitting => "Quitting: waiting for running attempts",
        }
    }

    /// The layer of a pane's own keys, if it has any.
    pub fn of_pane(pane: Pane) -> Option<Layer> {
        match pane {
            Pane::Schedules => Some(Layer::Schedules),
            Pane::Timeline => Some(Layer::Timeline),
            Pane::Retries => Some(Layer::Retries),
            Pane::Approvals => Some(Layer::Approvals),
            Pane::Switches => Some(Layer::Switches),
            Pane::Gates | Pane::Backfill => None,
        }
    }
}

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Ctrl-C: quits from anywhere, dialogs included.
    ForceQuit,
    Quit,
    Help,
    /// Esc: closes, clears or goes back; never quits.
    Back,
    Filter,
    Command,
    Refresh,
    NextPane,
    PrevPane,
    GotoPane(Pane),
    Down,
    Up,
    Left,
    Right,
    Top,
    Bottom,
    PageDown,
    PageUp,
    Open,
    NextSection,
    PrevSection,
    // Operator actions (hidden and refused by --read-only).
    Approve,
    Reject,
    Requeue,
    Pause,
    Resume,
    Trigger,
    CloseCircuit,
    Kill,
    // Rehearsal mode.
    /// Advance the rehearsal to its next event.
    Step,
    /// Play / pause.
    Play,
    Faster,
    Slower,
    /// Back to the live console (or quit, when started as `rehearse --console`).
    LeaveRehearsal,
    // Dialogs and bars.
    NextField,
    PrevField,
    /// Enter in a text box or on a choice: the next one, after the last the
    /// buttons (on Cancel); it never confirms.
    NextInput,
    PrevButton,
    NextButton,
    /// While quitting waits for running attempts: stop them now (Ctrl-C).
    StopNow,
    /// The next / previous option of a choice field (approve: resume after).
    NextChoice,
    PrevChoice,
    Confirm,
    Cancel,
    Accept,
    /// Tab in the command bar: complete the command or its argument.
    Complete,
}

impl Action {
    /// Changes the world (performed by the executor); `--read-only` hides these.
    pub fn is_operator_action(self) -> bool {
        matches!(
            self,
            Action::Approve
                | Action::Reject
                | Action::Requeue
                | Action::Pause
                | Action::Resume
                | Action::Trigger
                | Action::CloseCircuit
                | Action::Kill
        )
    }
}

/// One key: a code and the modifiers that must be held (Shift is implied by
/// upper-case characters and BackTab, and ignored when matching those).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    pub code: KeyCode,
    pub mods: KeyModifiers,
}

impl KeySpec {
    pub const fn plain(code: KeyCode) -> Self {
        Self {
            code,
            mods: KeyModifiers::NONE,
        }
    }

    pub const fn ctrl(c: char) -> Self {
        Self {
            code: KeyCode::Char(c),
            mods: KeyModifiers::CONTROL,
        }
    }

    pub fn matches(&self, ev: &KeyEvent) -> bool {
        let strip = |m: KeyModifiers| m.difference(KeyModifiers::SHIFT);
        let code_eq = match (self.code, ev.code) {
            // Terminals differ on whether Ctrl-letters arrive upper- or lower-case.
            (KeyCode::Char(a), KeyCode::Char(b)) if self.mods.contains(KeyModifiers::CONTROL) => {
                a.eq_ignore_ascii_case(&b)
            }
            (a, b) => a == b,
        };
        code_eq && strip(self.mods) == strip(ev.modifiers)
    }

    /// The synthetic event that presses this key (tests, the help screen).
    pub fn event(&self) -> KeyEvent {
        let mut mods = self.mods;
        if matches!(self.code, KeyCode::Char(c) if c.is_ascii_uppercase()) || self.code == KeyCode::BackTab {
            mods |= KeyModifiers::SHIFT;
        }
        KeyEvent::new(self.code, mods)
    }

    pub fn label(&self) -> String {
        let base = match self.code {
            KeyCode::Char(' ') => "Space".to_string(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Enter => "Enter".into(),
            KeyCode::Esc => "Esc".into(),
            KeyCode::Tab => "Tab".into(),
            KeyCode::BackTab => "S-Tab".into(),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::Left => "←".into(),
            KeyCode::Right => "→".into(),
            KeyCode::Home => "Home".into(),
            KeyCode::End => "End".into(),
            KeyCode::PageUp => "PgUp".into(),
            KeyCode::PageDown => "PgDn".into(),
            KeyCode::Backspace => "Bksp".into(),
            KeyCode::F(n) => format!("F{n}"),
            other => format!("{other:?}"),
        };
        if self.mods.contains(KeyModifiers::CONTROL) {
            format!("C-{base}")
        } else {
            base
        }
    }
}

/// One row of the keymap.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub keys: &'static [KeySpec],
    pub action: Action,
    pub description: &'static str,
    pub layer: Layer,
    /// Asks to confirm; shown marked in help.
    pub dangerous: bool,
}

impl Binding {
    pub fn keys_label(&self) -> String {
        self.keys.iter().map(KeySpec::label).collect::<Vec<_>>().join("/")
    }
}

const fn ch(c: char) -> KeySpec {
    KeySpec::plain(KeyCode::Char(c))
}

const fn code(c: KeyCode) -> KeySpec {
    KeySpec::plain(c)
}

const fn bind(
    keys: &'static [KeySpec],
    action: Action,
    description: &'static str,
    layer: Layer,
    dangerous: bool,
) -> Binding {
    Binding {
        keys,
        action,
        description,
        layer,
        dangerous,
    }
}

use Action as A;
use Layer as L;

/// The whole keymap.
pub const KEYMAP: &[Binding] = &[
    // Global.
    bind(
        &[KeySpec::ctrl('c')],
        A::ForceQuit,
        "quit (twice: stop running attempts)",
        L::Global,
        false,
    ),
    bind(&[ch('q')], A::Quit, "quit", L::Global, false),
    bind(&[ch('?')], A::Help, "help", L::Global, false),
    bind(&[code(KeyCode::Esc)], A::Back, "back", L::Global, false),
    bind(&[ch('/')], A::Filter, "filter", L::Global, false),
    bind(&[ch(':')], A::Command, "command", L::Global, false),
    bind(
        &[KeySpec::ctrl('r'), code(KeyCode::F(5))],
        A::Refresh,
        "reload",
        L::Global,
        false,
    ),
    bind(&[code(KeyCode::Tab)], A::NextPane, "next pane", L::Global, false),
    bind(
        &[code(KeyCode::BackTab)],
        A::PrevPane,
        "previous pane",
        L::Global,
        false,
    ),
    bind(
        &[ch('1')],
        A::GotoPane(Pane::Schedules),
        "schedules pane",
        L::Global,
        false,
    ),
    bind(
        &[ch('2')],
        A::GotoPane(Pane::Timeline),
        "timeline pane",
        L::Global,
        false,
    ),
    bind(
        &[ch('3')],
        A::GotoPane(Pane::Gates),
        "gates pane",
        L::Global,
        false,
    ),
    bind(
        &[ch('4')],
        A::GotoPane(Pane::Retries),
        "retry queue pane",
        L::Global,
        false,
    ),
    bind(
        &[ch('5')],
        A::GotoPane(Pane::Approvals),
        "approvals pane",
        L::Global,
        false,
    ),
    bind(
        &[ch('6')],
        A::GotoPane(Pane::Backfill),
        "backfill queue pane",
        L::Global,
        false,
    ),
    bind(
        &[ch('7')],
        A::GotoPane(Pane::Switches),
        "switches pane",
        L::Global,
        false,
    ),
    bind(&[ch('K')], A::Kill, "kill switch", L::Global, true),
    // Lists.
    bind(
        &[ch('j'), code(KeyCode::Down)],
        A::Down,
        "down",
        L::Navigation,
        false,
    ),
    bind(&[ch('k'), code(KeyCode::Up)], A::Up, "up", L::Navigation, false),
    bind(
        &[ch('g'), code(KeyCode::Home)],
        A::Top,
        "first",
        L::Navigation,
        false,
    ),
    bind(
        &[ch('G'), code(KeyCode::End)],
        A::Bottom,
        "last",
        L::Navigation,
        false,
    ),
    bind(
        &[code(KeyCode::PageDown), KeySpec::ctrl('d')],
        A::PageDown,
        "page down",
        L::Navigation,
        false,
    ),
    bind(
        &[code(KeyCode::PageUp), KeySpec::ctrl('u')],
        A::PageUp,
        "page up",
        L::Navigation,
        false,
    ),
    bind(&[code(KeyCode::Enter)], A::Open, "open run", L::Navigation, false),
    // Panes.
    bind(&[ch('p')], A::Pause, "pause", L::Schedules, false),
    bind(&[ch('u')], A::Resume, "resume", L::Schedules, false),
    bind(&[ch('t')], A::Trigger, "trigger now", L::Schedules, false),
    bind(&[ch('c')], A::CloseCircuit, "close circuit", L::Schedules, false),
    bind(
        &[ch('h'), code(KeyCode::Left)],
        A::Left,
        "older",
        L::Timeline,
        false,
    ),
    bind(
        &[ch('l'), code(KeyCode::Right)],
        A::Right,
        "newer",
        L::Timeline,
        false,
    ),
    bind(&[ch('r')], A::Requeue, "requeue", L::Timeline, true),
    bind(&[ch('r')], A::Requeue, "requeue dead letter", L::Retries, true),
    bind(&[ch('a')], A::Approve, "approve", L::Approvals, false),
    bind(&[ch('x')], A::Reject, "reject", L::Approvals, true),
    bind(&[ch('u')], A::Resume, "resume", L::Switches, false),
    bind(&[ch('c')], A::CloseCircuit, "close circuit", L::Switches, false),
    // Rehearsal mode.
    bind(&[ch('n')], A::Step, "next event", L::Rehearsal, false),
    bind(&[ch(' ')], A::Play, "play / pause", L::Rehearsal, false),
    bind(&[ch('+'), ch('=')], A::Faster, "faster", L::Rehearsal, false),
    bind(&[ch('-')], A::Slower, "slower", L::Rehearsal, false),
    bind(
        &[ch('q')],
        A::LeaveRehearsal,
        "leave rehearsal",
        L::Rehearsal,
        false,
    ),
    // Run detail.
    bind(
        &[code(KeyCode::Tab)],
        A::NextSection,
        "next section",
        L::Detail,
        false,
    ),
    bind(
        &[code(KeyCode::BackTab)],
        A::PrevSection,
        "previous section",
        L::Detail,
        false,
    ),
    bind(
        &[ch('j'), code(KeyCode::Down)],
        A::Down,
        "scroll down",
        L::Detail,
        false,
    ),
    bind(
        &[ch('k'), code(KeyCode::Up)],
        A::Up,
        "scroll up",
        L::Detail,
        false,
    ),
    bind(&[ch('g'), code(KeyCode::Home)], A::Top, "top", L::Detail, false),
    bind(
        &[ch('G'), code(KeyCode::End)],
        A::Bottom,
        "bottom",
        L::Detail,
        false,
    ),
    bind(
        &[code(KeyCode::PageDown), KeySpec::ctrl('d')],
        A::PageDown,
        "page down",
        L::Detail,
        false,
    ),
    bind(
        &[code(KeyCode::PageUp), KeySpec::ctrl('u')],
        A::PageUp,
        "page up",
        L::Detail,
        false,
    ),
    bind(&[ch('a')], A::Approve, "approve", L::Detail, false),
    bind(&[ch('x')], A::Reject, "reject", L::Detail, true),
    bind(&[ch('r')], A::Requeue, "requeue", L::Detail, true),
    // Help.
    bind(
        &[ch('j'), code(KeyCode::Down)],
        A::Down,
        "scroll down",
        L::Help,
        false,
    ),
    bind(&[ch('k'), code(KeyCode::Up)], A::Up, "scroll up", L::Help, false),
    bind(
        &[code(KeyCode::PageDown)],
        A::PageDown,
        "page down",
        L::Help,
        false,
    ),
    bind(&[code(KeyCode::PageUp)], A::PageUp, "page up", L::Help, false),
    bind(
        &[code(KeyCode::Esc), ch('?'), ch('q')],
        A::Back,
        "close help",
        L::Help,
        false,
    ),
    // Bars.
    bind(&[code(KeyCode::Enter)], A::Accept, "apply", L::Input, false),
    bind(
        &[code(KeyCode::Tab)],
        A::Complete,
        "complete (: commands, schedules, runs)",
        L::Input,
        false,
    ),
    bind(&[code(KeyCode::Esc)], A::Cancel, "cancel", L::Input, false),
    // Dialogs: one grammar. The buttons start on Cancel; Enter in a text box
    // moves on and never confirms; Enter on a button presses it.
    bind(&[code(KeyCode::Esc)], A::Cancel, "cancel", L::Dialog, false),
    bind(
        &[code(KeyCode::Tab)],
        A::NextField,
        "next field",
        L::Dialog,
        false,
    ),
    bind(
        &[code(KeyCode::BackTab)],
        A::PrevField,
        "previous field",
        L::Dialog,
        false,
    ),
    bind(
        &[code(KeyCode::Enter)],
        A::NextInput,
        "next box / the buttons",
        L::DialogText,
        false,
    ),
    bind(
        &[code(KeyCode::Down)],
        A::NextChoice,
        "next step to resume after",
        L::DialogChoice,
        false,
    ),
    bind(
        &[code(KeyCode::Up)],
        A::PrevChoice,
        "previous step",
        L::DialogChoice,
        false,
    ),
    bind(
        &[code(KeyCode::Enter)],
        A::NextInput,
        "to the buttons",
        L::DialogChoice,
        false,
    ),
    bind(
        &[code(KeyCode::Left)],
        A::PrevButton,
        "left",
        L::DialogButtons,
        false,
    ),
    bind(
        &[code(KeyCode::Right)],
        A::NextButton,
        "right",
        L::DialogButtons,
        false,
    ),
    bind(
        &[code(KeyCode::Enter)],
        A::Confirm,
        "press",
        L::DialogButtons,
        false,
    ),
    bind(
        &[KeySpec::ctrl('c')],
        A::StopNow,
        "stop them now (the runs retry)",
        L::Quitting,
        false,
    ),
];

/// The action bound to `key` in the first of `layers` that binds it.
/// Key releases never act.
pub fn lookup(layers: &[Layer], key: &KeyEvent, read_only: bool) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    for layer in layers {
        let hit = KEYMAP
            .iter()
            .filter(|b| b.layer == *layer)
            .filter(|b| !(read_only && b.action.is_operator_action()))
            .find(|b| b.keys.iter().any(|k| k.matches(key)));
        if let Some(b) = hit {
            return Some(b.action);
        }
    }
    None
}

/// Bindings shown in the footer for `layers`, in order, without duplicates of
/// an action already listed, without keys an upper layer takes (rehearsal
/// mode's `q`), without the digit keys (the tab bar shows them) and without
/// operator actions in read-only mode.
pub fn footer(layers: &[Layer], read_only: bool) -> Vec<&'static Binding> {
    let mut out: Vec<&'static Binding> = Vec::new();
    for layer in layers {
        for b in KEYMAP.iter().filter(|b| b.layer == *layer) {
            let shadowed = b
                .keys
                .iter()
                .all(|k| out.iter().any(|o| o.layer != b.layer && o.keys.contains(k)));
            let hidden = matches!(b.action, Action::GotoPane(_) | Action::ForceQuit)
                || (read_only && b.action.is_operator_action())
                || shadowed
                || out.iter().any(|o| o.action == b.action);
            if !hidden {
                out.push(b);
            }
        }
    }
    // What this place is for first, then how to get help and out, then moving.
    out.sort_by_key(|b| match (b.layer, b.action) {
        (Layer::Global, Action::Help | Action::Quit | Action::Back) => 1,
        (_, Action::Open) => 2,
        (
            Layer::Navigation | Layer::Detail | Layer::Help,
            Action::Down | Action::Up | Action::Top | Action::Bottom | Action::PageDown | Action::PageUp,
        ) => 3,
        (Layer::Global | Layer::Navigation, _) => 3,
        _ => 0,
    });
    out
}

/// The help screen's sections: each layer with its bindings, in table order.
pub fn help_sections(read_only: bool) -> Vec<(Layer, Vec<&'static Binding>)> {
    let mut sections: Vec<(Layer, Vec<&'static Binding>)> = Vec::new();
    for b in KEYMAP {
        if read_only && b.action.is_operator_action() {
            continue;
        }
        match sections.iter_mut().find(|(l, _)| *l == b.layer) {
            Some((_, list)) => list.push(b),
            None => sections.push((b.layer, vec![b])),
        }
    }
    sections
}
