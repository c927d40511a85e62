//! Overlays that take input: the reason dialog (approve, reject, requeue,
//! pause, close circuit, kill switch off), the type-to-confirm dialog (kill
//! switch on) and the help screen.
//!
//! A dialog names the exact target and the effect. Every dialog changes
//! state, and every one speaks one grammar (DESIGN.md "The console"):
//! - the focus starts in its first text box, or, without one, on Cancel; the
//!   buttons start on Cancel either way;
//! - Enter in a text box (or on a choice) moves to the next one and after the
//!   last to the buttons, on Cancel — it never confirms; Enter on a button
//!   presses it; ←/→ move between the buttons, Tab/S-Tab between all fields,
//!   Esc cancels;
//! - the footer lists the keys of the field that has the focus, from the
//!   keymap table ([`Dialog::layers`]).
//!
//! Actions refuse to confirm without a typed reason (and, for the kill
//! switch, without its typed name). Resume and backfill first show their
//! plan (read by the executor, see [`Preview`]) and cannot be confirmed
//! before it arrived. Submitting yields the [`Cmd`] the executor performs;
//! the dialog itself does no IO.

pub mod confirm;
pub mod help;
pub mod quit;
pub mod reason;

use super::app::Cmd;
use super::keymap::{self, Action, Layer};
use super::theme::{Theme, Token};
use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use tui_textarea::{TextArea, WrapMode};

pub use confirm::ConfirmDialog;
pub use reason::ReasonDialog;

/// The operator action a dialog is about to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    Approve {
        run: i64,
        label: String,
        /// `--resume-after STEP`: the steps up to it count as done.
        resume_after: Option<String>,
    },
    Reject {
        run: i64,
        label: String,
    },
    Requeue {
        run: i64,
        label: String,
    },
    Pause {
        schedule: String,
    },
    Resume {
        schedule: String,
    },
    Trigger {
        schedule: String,
    },
    CloseCircuit {
        schedule: String,
    },
    /// With `cancel_running`, running attempts are cancelled too.
    KillOn {
        cancel_running: bool,
    },
    KillOff,
    /// Re-read the config file on every scheduler of the database (`:reload`).
    Reload,
    /// Apply config version `version`, waiting for approval.
    ApproveConfig {
        version: i64,
    },
    /// Queue the windows of `[from, to]`; `range` is how the operator reads it.
    Backfill {
        schedule: String,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        range: String,
    },
}

impl Intent {
    /// The dialog title: the action and its exact target.
    pub fn title(&self) -> String {
        match self {
            Intent::Approve {
                run,
                label,
                resume_after: None,
            } => format!("Approve run #{run} ({label})"),
            Intent::Approve {
                run,
                label,
                resume_after: Some(step),
            } => format!("Approve run #{run} ({label}), resuming after step {step}"),
            Intent::Reject { run, label } => format!("Reject run #{run} ({label})"),
            Intent::Requeue { run, label } => format!("Requeue run #{run} ({label})"),
            Intent::Pause { schedule } => format!("Pause schedule {schedule}"),
            Intent::Resume { schedule } => format!("Resume schedule {schedule}"),
            Intent::Trigger { schedule } => format!("Trigger schedule {schedule} now"),
            Intent::CloseCircuit { schedule } => format!("Close the circuit of {schedule}"),
            Intent::KillOn {
                cancel_running: false,
            } => "Turn the global kill switch ON".to_string(),
            Intent::KillOn { cancel_running: true } => {
                "Turn the global kill switch ON and cancel running attempts".to_string()
            }
            Intent::KillOff => "Turn the global kill switch OFF".to_string(),
            Intent::Reload => "Reload the config file".to_string(),
            Intent::ApproveConfig { version } => format!("Approve config v{version}"),
            Intent::Backfill { schedule, .. } => format!("Backfill {schedule}"),
        }
    }

    /// What will happen, in the operator's words.
    pub fn effect(&self) -> &'static str {
        match self {
            Intent::Approve { .. } => "A new attempt is allowed; the run goes back to the retry queue.",
            Intent::Reject { .. } => "The run becomes failed for good; it will not run again by itself.",
            Intent::Requeue { .. } => "The run reopens as retry_wait and is re-gated before it runs.",
            Intent::Pause { .. } => "New windows of this schedule are held until it is resumed.",
            Intent::Resume { .. } => {
                "Held windows of this schedule are evaluated again at once, oldest first (plan below)."
            }
            Intent::Trigger { .. } => "A manual run is created for the current window and gated as usual.",
            Intent::CloseCircuit { .. } => "New windows of this schedule may run again.",
            Intent::KillOn {
                cancel_running: false,
            } => "No new run is claimed anywhere until the switch is turned off.",
            Intent::KillOn { cancel_running: true } => {
                "No new run is claimed anywhere until the switch is turned off; running attempts \
                 are stopped, fail retryable and retry once it is off."
            }
            Intent::KillOff => "Runs are claimed again on every schedule.",
            Intent::ApproveConfig { .. } => {
                "The waiting version becomes the one every scheduler on this database runs (plan below)."
            }
            Intent::Reload => {
                "Every scheduler on this database re-reads, validates and applies the file \
                 (plan below); an invalid file changes nothing."
            }
            Intent::Backfill { .. } => {
                "Windows without a run are queued in the backfill pool, oldest first; \
                 windows that already have a run are left alone (plan below)."
            }
        }
    }

    /// The label of the confirming button.
    pub fn button(&self) -> &'static str {
        match self {
            Intent::Approve { .. } => "Approve",
            Intent::Reject { .. } => "Reject",
            Intent::Requeue { .. } => "Requeue",
            Intent::Pause { .. } => "Pause",
            Intent::Resume { .. } => "Resume",
            Intent::Trigger { .. } => "Trigger",
            Intent::CloseCircuit { .. } => "Close circuit",
            Intent::KillOn { .. } => "Kill",
            Intent::KillOff => "Turn off",
            Intent::Reload => "Reload",
            Intent::ApproveConfig { .. } => "Approve",
            Intent::Backfill { .. } => "Queue",
        }
    }

    /// Whether a typed reason is required (as on the command line).
    pub fn needs_reason(&self) -> bool {
        !matches!(
            self,
            Intent::Resume { .. } | Intent::Trigger { .. } | Intent::Backfill { .. } | Intent::Reload
        )
    }

    /// Shows a plan read from the store before it can be confirmed.
    pub fn needs_preview(&self) -> bool {
        matches!(
            self,
            Intent::Resume { .. } | Intent::Backfill { .. } | Intent::Reload | Intent::ApproveConfig { .. }
        )
    }

    /// Destructive or global: drawn in the error style (every dialog's
    /// buttons start on Cancel).
    pub fn dangerous(&self) -> bool {
        matches!(
            self,
            Intent::Reject { .. }
                | Intent::Requeue { .. }
                | Intent::KillOn { .. }
                | Intent::KillOff
                | Intent::Resume { .. }
                | Intent::Backfill { .. }
                | Intent::Reload
                | Intent::ApproveConfig { .. }
        )
    }

    /// The word to type before the action is enabled (k9s-style).
    pub fn confirm_word(&self) -> Option<&'static str> {
        match self {
            Intent::KillOn { .. } => Some("kill"),
            _ => None,
        }
    }

    /// The command the executor performs, with the typed reason.
    pub fn into_cmd(self, reason: String) -> Cmd {
        match self {
            Intent::Approve {
                run, resume_after, ..
            } => Cmd::Approve {
                run,
                reason,
                resume_after,
            },
            Intent::Reject { run, .. } => Cmd::Reject { run, reason },
            Intent::Requeue { run, .. } => Cmd::Requeue { run, reason },
            Intent::Pause { schedule } => Cmd::Pause { schedule, reason },
            Intent::Resume { schedule } => Cmd::Resume { schedule },
            Intent::Reload => Cmd::Reload,
            Intent::ApproveConfig { version } => Cmd::ApproveConfig { version, reason },
            Intent::Trigger { schedule } => Cmd::Trigger { schedule },
            Intent::CloseCircuit { schedule } => Cmd::CloseCircuit { schedule, reason },
            Intent::KillOn { cancel_running } => Cmd::SetKill {
                on: true,
                reason,
                cancel_running,
            },
            Intent::KillOff => Cmd::SetKill {
                on: false,
                reason,
                cancel_running: false,
            },
            Intent::Backfill {
                schedule, from, to, ..
            } => Cmd::Backfill { schedule, from, to },
        }
    }
}

/// What an action would do, read from the store before it is confirmed
/// (resume: the held windows; backfill: the dry run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    pub lines: Vec<String>,
    /// False when there is nothing to do (the action button stays disabled).
    pub actionable: bool,
}

/// A dialog's plan: not needed, on its way, there, or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreviewState {
    NotNeeded,
    Loading,
    Ready(Preview),
    Failed(String),
}

impl PreviewState {
    /// Why the action cannot be confirmed yet, if it cannot.
    pub fn blocks(&self) -> Option<String> {
        match self {
            PreviewState::NotNeeded => None,
            PreviewState::Ready(p) if p.actionable => None,
            PreviewState::Ready(_) => Some("nothing to do".into()),
            PreviewState::Loading => Some("the plan is still loading".into()),
            PreviewState::Failed(e) => Some(e.clone()),
        }
    }
}

/// An open dialog.
#[derive(Debug, Clone)]
// One dialog is open at a time, and the model keeps it boxed.
#[allow(clippy::large_enum_variant)]
pub enum Dialog {
    Reason(ReasonDialog),
    Confirm(ConfirmDialog),
}

impl Dialog {
    /// The dialog for `intent`: type-to-confirm when it has a confirm word.
    pub fn open(intent: Intent) -> Dialog {
        if intent.confirm_word().is_some() {
            Dialog::Confirm(ConfirmDialog::new(intent))
        } else {
            Dialog::Reason(ReasonDialog::new(intent))
        }
    }

    pub fn intent(&self) -> &Intent {
        match self {
            Dialog::Reason(d) => &d.intent,
            Dialog::Confirm(d) => &d.intent,
        }
    }

    pub fn handle_key(&mut self, key: &KeyEvent) -> Outcome {
        match self {
            Dialog::Reason(d) => d.handle_key(key),
            Dialog::Confirm(d) => d.handle_key(key),
        }
    }

    /// Which field has the focus.
    pub fn focus(&self) -> Field {
        match self {
            Dialog::Reason(d) => d.focus,
            Dialog::Confirm(d) => d.focus,
        }
    }

    /// The button Enter presses once the focus is on the buttons: the focused
    /// one, else Cancel (where Enter in the last text box goes).
    pub fn button(&self) -> Field {
        match self.focus() {
            Field::Confirm => Field::Confirm,
            _ => Field::Cancel,
        }
    }

    /// The keymap layers of the focused field, topmost first: what its keys
    /// do, and what the footer lists.
    pub fn layers(&self) -> Vec<Layer> {
        field_layers(self.focus())
    }

    /// The plan arrived for `intent`; ignored if this dialog is about something else.
    pub fn set_preview(&mut self, intent: &Intent, result: Result<Preview, String>) {
        if let Dialog::Reason(d) = self
            && d.intent == *intent
        {
            d.preview = match result {
                Ok(p) => PreviewState::Ready(p),
                Err(e) => PreviewState::Failed(e),
            };
        }
    }

    /// Draws the dialog centred in `area` (the screen below the header, so
    /// the kill switch state stays visible).
    pub fn render(&self, theme: &Theme, frame: &mut Frame, area: Rect) {
        match self {
            Dialog::Reason(d) => d.render(theme, frame, area),
            Dialog::Confirm(d) => d.render(theme, frame, area),
        }
    }
}

/// What a key did to a dialog.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Continue,
    Cancel,
    Submit(Cmd),
}

/// Which part of a dialog has the focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Reason,
    /// Approve: which completed step to resume after.
    Choice,
    /// The typed confirmation word.
    Word,
    Cancel,
    Confirm,
}

/// The keymap layers of a dialog whose focus is on `focus`, topmost first.
pub fn field_layers(focus: Field) -> Vec<Layer> {
    let own = match focus {
        Field::Reason | Field::Word => Layer::DialogText,
        Field::Choice => Layer::DialogChoice,
        Field::Cancel | Field::Confirm => Layer::DialogButtons,
    };
    vec![own, Layer::Dialog]
}

/// What a key does on the focused field, from the keymap table: a text box
/// takes every key its layers do not bind (arrows move its cursor).
pub(crate) fn dialog_action(key: &KeyEvent, focus: Field) -> Option<Action> {
    keymap::lookup(&field_layers(focus), key, false)
}

/// Where Enter in a text box or on a choice goes: the next of `inputs`, after
/// the last the buttons, on Cancel.
pub(crate) fn next_input(inputs: &[Field], focus: Field) -> Field {
    match inputs.iter().position(|f| *f == focus) {
        Some(i) if i + 1 < inputs.len() => inputs[i + 1],
        _ => Field::Cancel,
    }
}

/// ←/→ on the buttons: the other one.
pub(crate) fn other_button(focus: Field) -> Field {
    match focus {
        Field::Cancel => Field::Confirm,
        _ => Field::Cancel,
    }
}

/// Targets of a dialog's list shown at most; the rest is summarised.
const TARGET_LINES: usize = 6;

/// A dialog's width on `screen`, borders included.
pub(crate) const DIALOG_WIDTH: u16 = 64;

/// The room for text inside a dialog of [`DIALOG_WIDTH`] on `screen`.
pub(crate) fn inner_width(screen: Rect) -> usize {
    usize::from(DIALOG_WIDTH.min(screen.width).saturating_sub(2))
}

/// The target list in `width` columns: each target wrapped at word
/// boundaries (continuation lines indented under its text), the rest counted.
pub(crate) fn target_lines(targets: &[String], width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = Vec::new();
    for t in targets.iter().take(TARGET_LINES) {
        for (i, part) in wrap_words(t, width.saturating_sub(2)).into_iter().enumerate() {
            let lead = if i == 0 { "• " } else { "  " };
            out.push(Line::from(vec![
                Span::styled(lead, theme.style(Token::Accent)),
                Span::raw(part),
            ]));
        }
    }
    if targets.len() > TARGET_LINES {
        out.push(Line::from(Span::styled(
            format!("… and {} more", targets.len() - TARGET_LINES),
            theme.style(Token::Muted),
        )));
    }
    out
}

/// `text` in lines of at most `width` characters, broken between words; a
/// word longer than a line is cut where it must be.
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    if text.chars().count() <= width {
        return vec![text.to_string()];
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: String = word.to_string();
        loop {
            let len = line.chars().count();
            let w = word.chars().count();
            if len == 0 && w <= width {
                line = word;
                break;
            }
            if len > 0 && len + 1 + w <= width {
                line.push(' ');
                line.push_str(&word);
                break;
            }
            if len > 0 {
                lines.push(std::mem::take(&mut line));
                continue;
            }
            // A word wider than the line: cut it.
            let head: String = word.chars().take(width).collect();
            word = word.chars().skip(width).collect();
            lines.push(head);
            if word.is_empty() {
                break;
            }
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// A one-line-per-row text box for a reason, wrapped at words.
pub(crate) fn reason_box(placeholder: &str) -> TextArea<'static> {
    let mut ta = TextArea::default();
    ta.set_placeholder_text(placeholder);
    ta.set_wrap_mode(WrapMode::WordOrGlyph);
    ta
}

/// The text typed into a box, lines joined with spaces and trimmed.
pub(crate) fn typed(ta: &TextArea<'_>) -> String {
    ta.lines().join(" ").trim().to_string()
}

/// A text box styled for drawing: focused ones show the cursor.
pub(crate) fn styled_box<'a>(
    ta: &TextArea<'a>,
    title: &'a str,
    focused: bool,
    theme: &Theme,
) -> TextArea<'a> {
    let mut ta = ta.clone();
    ta.set_style(theme.base());
    ta.set_cursor_line_style(theme.base());
    ta.set_placeholder_style(theme.style(Token::Muted));
    ta.set_cursor_style(if focused {
        theme.base().add_modifier(Modifier::REVERSED)
    } else {
        theme.base()
    });
    let border = if focused {
        theme.style(Token::Focus)
    } else {
        theme.style(Token::Muted)
    };
    ta.set_block(
        ratatui::widgets::Block::bordered()
            .border_style(border)
            .title(Span::styled(format!(" {title} "), border)),
    );
    ta
}

/// `[ Cancel ]  [ Action ]`, the focused one in the selection style; a
/// disabled action button is muted.
pub(crate) fn buttons(focus: Field, action: &str, enabled: bool, theme: &Theme) -> Line<'static> {
    let style = |f: Field| {
        if focus == f {
            theme.style(Token::Selection).add_modifier(Modifier::BOLD)
        } else if f == Field::Confirm && !enabled {
            theme.style(Token::Muted)
        } else {
            theme.style(Token::Fg)
        }
    };
    Line::from(vec![
        Span::styled("[ Cancel ]", style(Field::Cancel)),
        Span::raw("   "),
        Span::styled(format!("[ {action} ]"), style(Field::Confirm)),
    ])
    .centered()
}

/// A rectangle of at most `w`×`h` centred in `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}
