//! The quit dialog of a console that embeds the scheduler: with attempts
//! running, `q` (or Ctrl-C) asks whether to wait for them, stop them now, or
//! not quit at all. Once the operator chose, it stays on screen as the
//! progress of the stop — the attempts still running and the seconds left of
//! `shutdown_grace`, counted down on every tick — until the scheduler has
//! stopped; the screen never goes blank. A second Ctrl-C stops the attempts
//! at once. Its buttons follow every dialog's grammar (see [`super`]): they
//! start on Cancel, ←/→ move, Enter presses.

use super::centered;
use crate::console::app::Cmd;
use crate::console::format::{duration_short, fit};
use crate::console::keymap::{self, Action, Layer};
use crate::console::theme::{Theme, Token};
use chrono::{DateTime, Duration, Utc};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

/// The buttons, left to right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuitButton {
    /// Not quitting after all (where the focus starts).
    Cancel,
    /// Stop claiming, let the running attempts finish (up to `shutdown_grace`).
    Wait,
    /// Stop the running attempts now; they become retries.
    StopNow,
}

const BUTTONS: [QuitButton; 3] = [QuitButton::Cancel, QuitButton::Wait, QuitButton::StopNow];

impl QuitButton {
    pub fn label(self) -> &'static str {
        match self {
            QuitButton::Wait => "Wait for them",
            QuitButton::StopNow => "Stop them now",
            QuitButton::Cancel => "Cancel",
        }
    }
}

/// Where the quit is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuitPhase {
    /// Asking: which button has the focus.
    Ask(QuitButton),
    /// The scheduler was told to stop at `since`; `now`: the attempts are
    /// being stopped rather than waited for.
    Stopping { since: DateTime<Utc>, now: bool },
}

/// One running attempt of the embedded scheduler, as the dialog lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningAttempt {
    pub run: i64,
    pub schedule: String,
    pub window_key: String,
    pub attempt: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuitDialog {
    pub phase: QuitPhase,
    /// `[scheduler] shutdown_grace`.
    pub grace: Duration,
}

/// What a key did to the quit dialog.
#[derive(Debug, Clone, PartialEq)]
pub enum QuitOutcome {
    Continue,
    /// Not quitting after all.
    Cancel,
    /// Tell the scheduler to stop (see [`Cmd::StopScheduler`]).
    Stop(Cmd),
}

impl QuitDialog {
    /// Asking, with the focus on Cancel (as in every dialog).
    pub fn ask(grace: Duration) -> Self {
        Self {
            phase: QuitPhase::Ask(QuitButton::Cancel),
            grace,
        }
    }

    /// The scheduler was told to stop.
    pub fn stopping(grace: Duration, since: DateTime<Utc>, now: bool) -> Self {
        Self {
            phase: QuitPhase::Stopping { since, now },
            grace,
        }
    }

    pub fn focus(&self) -> Option<QuitButton> {
        match self.phase {
            QuitPhase::Ask(b) => Some(b),
            QuitPhase::Stopping { .. } => None,
        }
    }

    /// The keymap layers now: a dialog's buttons while asking; while waiting
    /// for the attempts, Ctrl-C stopping them; nothing once they are stopped.
    pub fn layers(&self) -> Vec<Layer> {
        match self.phase {
            QuitPhase::Ask(_) => super::field_layers(super::Field::Cancel),
            QuitPhase::Stopping { now: false, .. } => vec![Layer::Quitting],
            QuitPhase::Stopping { now: true, .. } => vec![],
        }
    }

    /// Whole seconds of `shutdown_grace` left at `wall` while waiting.
    pub fn seconds_left(&self, wall: DateTime<Utc>) -> Option<i64> {
        match self.phase {
            QuitPhase::Stopping { since, now: false } => {
                Some((since + self.grace - wall).num_seconds().max(0))
            }
            _ => None,
        }
    }

    /// Keys while asking: ←/→ and Tab/S-Tab move between the buttons, Enter
    /// presses, Esc cancels. While stopping only Ctrl-C means anything (the app's).
    pub fn handle_key(&mut self, key: &KeyEvent, wall: DateTime<Utc>) -> QuitOutcome {
        let QuitPhase::Ask(focus) = self.phase else {
            return QuitOutcome::Continue;
        };
        let i = BUTTONS.iter().position(|b| *b == focus).unwrap_or(0);
        let n = BUTTONS.len();
        match keymap::lookup(&self.layers(), key, false) {
            Some(Action::Cancel) => QuitOutcome::Cancel,
            Some(Action::NextField | Action::NextButton) => {
                self.phase = QuitPhase::Ask(BUTTONS[(i + 1) % n]);
                QuitOutcome::Continue
            }
            Some(Action::PrevField | Action::PrevButton) => {
                self.phase = QuitPhase::Ask(BUTTONS[(i + n - 1) % n]);
                QuitOutcome::Continue
            }
            Some(Action::Confirm) => match focus {
                QuitButton::Cancel => QuitOutcome::Cancel,
                QuitButton::Wait | QuitButton::StopNow => {
                    let now = focus == QuitButton::StopNow;
                    self.phase = QuitPhase::Stopping { since: wall, now };
                    QuitOutcome::Stop(Cmd::StopScheduler { now })
                }
            },
            _ => QuitOutcome::Continue,
        }
    }

    /// Draws the dialog over `screen` (below the header).
    pub fn render(
        &self,
        attempts: &[RunningAttempt],
        wall: DateTime<Utc>,
        theme: &Theme,
        frame: &mut Frame,
        screen: Rect,
    ) {
        let shown = attempts.len().min(6);
        let rows = u16::try_from(shown).unwrap_or(6) + u16::from(attempts.len() > shown);
        let area = centered(screen, 72, 9 + rows);
        frame.render_widget(Clear, area);
        let accent = theme.style(Token::Warn);
        let running = match attempts.len() {
            1 => "1 attempt".to_string(),
            n => format!("{n} attempts"),
        };
        // The countdown is in the title too: it is what changes every tick.
        let title = match (self.phase.clone(), self.seconds_left(wall)) {
            (QuitPhase::Ask(_), _) => " Quit agentcron? ".to_string(),
            (QuitPhase::Stopping { now: false, .. }, Some(left)) => format!(
                " Quitting: waiting for running attempts ({running}, {} left) ",
                duration_short(left)
            ),
            (QuitPhase::Stopping { now: false, .. }, None) => {
                " Quitting: waiting for running attempts ".to_string()
            }
            (QuitPhase::Stopping { now: true, .. }, _) => {
                format!(" Quitting: stopping running attempts ({running}) ")
            }
        };
        let block = Block::bordered()
            .border_style(accent)
            .title(Span::styled(title, accent))
            .style(theme.base());
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let [head, list, foot] = Layout::vertical([
            Constraint::Length(2),
            Constraint::Length(rows),
            Constraint::Min(1),
        ])
        .areas(inner);
        let count = match attempts.len() {
            0 => "No attempt of this scheduler is running any more.".to_string(),
            1 => "1 attempt of the embedded scheduler is running:".to_string(),
            n => format!("{n} attempts of the embedded scheduler are running:"),
        };
        frame.render_widget(Paragraph::new(count).wrap(Wrap { trim: true }), head);
        let width = usize::from(list.width).saturating_sub(2);
        let mut lines: Vec<Line<'static>> = attempts
            .iter()
            .take(shown)
            .map(|a| {
                Line::from(vec![
                    Span::styled("► ", theme.style(Token::Accent)),
                    Span::raw(fit(
                        &format!(
                            "#{} {} {} · attempt {}",
                            a.run, a.schedule, a.window_key, a.attempt
                        ),
                        width,
                    )),
                ])
            })
            .collect();
        if attempts.len() > shown {
            lines.push(Line::from(Span::styled(
                format!("  … and {} more", attempts.len() - shown),
                theme.style(Token::Muted),
            )));
        }
        frame.render_widget(Paragraph::new(lines), list);
        let grace = duration_short(self.grace.num_seconds());
        let foot_lines = match self.phase {
            QuitPhase::Ask(focus) => {
                let style = |b: QuitButton| {
                    if focus == b {
                        theme.style(Token::Selection).add_modifier(Modifier::BOLD)
                    } else {
                        theme.style(Token::Fg)
                    }
                };
                let mut buttons = Vec::new();
                for (i, b) in BUTTONS.iter().enumerate() {
                    if i > 0 {
                        buttons.push(Span::raw("  "));
                    }
                    buttons.push(Span::styled(format!("[ {} ]", b.label()), style(*b)));
                }
                vec![
                    Line::from(format!(
                        "Wait: claim nothing new, quit when they end (at most {grace}, shutdown_grace)."
                    )),
                    Line::from("Stop now: stop their agents; the runs retry. Ctrl-C again: stop now."),
                    Line::from(""),
                    Line::from(buttons).centered(),
                ]
            }
            QuitPhase::Stopping { since, now } => {
                let left = (since + self.grace - wall).num_seconds().max(0);
                let text = if now {
                    "Stopping their agents; the runs become retries…".to_string()
                } else {
                    format!(
                        "Claiming nothing new; {} left of shutdown_grace ({grace}), then they are stopped and retry.",
                        duration_short(left)
                    )
                };
                let mut v = vec![Line::from(text)];
                if !now {
                    v.push(Line::from(Span::styled(
                        "Ctrl-C stops them now.",
                        theme.style(Token::Muted),
                    )));
                }
                v
            }
        };
        frame.render_widget(Paragraph::new(foot_lines).wrap(Wrap { trim: true }), foot);
    }
}
