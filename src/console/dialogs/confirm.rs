//! Type to confirm (k9s style), for the global kill switch: a reason, then the
//! switch's name typed out. The action button stays disabled until both are
//! there. As in every dialog (see [`super`]), Enter on the reason goes to the
//! name, Enter on the name to the buttons (on Cancel) — never confirming —
//! and Enter on the action presses it once both are there (else it says
//! what is missing and goes there). With `--cancel-running` it lists the
//! attempts it will stop.

use super::{
    DIALOG_WIDTH, Field, Intent, Outcome, buttons, centered, dialog_action, inner_width, next_input,
    other_button, reason_box, styled_box, target_lines, typed,
};
use crate::console::keymap::Action;
use crate::console::theme::{Theme, Token};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use tui_textarea::TextArea;

const FIELDS: [Field; 4] = [Field::Reason, Field::Word, Field::Cancel, Field::Confirm];

#[derive(Debug, Clone)]
pub struct ConfirmDialog {
    pub intent: Intent,
    pub reason: TextArea<'static>,
    pub word: TextArea<'static>,
    pub focus: Field,
    pub error: Option<String>,
    /// What the action touches, one line each (the attempts it stops).
    pub targets: Vec<String>,
}

impl ConfirmDialog {
    pub fn new(intent: Intent) -> Self {
        let expected = intent.confirm_word().unwrap_or("confirm");
        let mut word = TextArea::default();
        word.set_placeholder_text(format!("type {expected}"));
        Self {
            intent,
            reason: reason_box("why? (recorded with your name)"),
            word,
            focus: Field::Reason,
            error: None,
            targets: vec![],
        }
    }

    pub fn with_targets(mut self, targets: Vec<String>) -> Self {
        self.targets = targets;
        self
    }

    /// Presses the action: submits, or says what is missing and goes there.
    fn confirm(&mut self) -> Outcome {
        if self.armed() {
            Outcome::Submit(self.intent.clone().into_cmd(self.reason_text()))
        } else if self.reason_text().is_empty() {
            self.error = Some("a reason is required".into());
            self.focus = Field::Reason;
            Outcome::Continue
        } else {
            self.error = Some(format!("type `{}` to confirm", self.expected()));
            self.focus = Field::Word;
            Outcome::Continue
        }
    }

    fn expected(&self) -> &'static str {
        self.intent.confirm_word().unwrap_or("confirm")
    }

    pub fn reason_text(&self) -> String {
        typed(&self.reason)
    }

    /// The word matches and a reason is given.
    pub fn armed(&self) -> bool {
        typed(&self.word) == self.expected() && !self.reason_text().is_empty()
    }

    fn cycle(&mut self, forward: bool) {
        let i = FIELDS.iter().position(|f| *f == self.focus).unwrap_or(0);
        let n = FIELDS.len();
        self.focus = FIELDS[if forward { (i + 1) % n } else { (i + n - 1) % n }];
    }

    pub fn handle_key(&mut self, key: &KeyEvent) -> Outcome {
        match dialog_action(key, self.focus) {
            Some(Action::Cancel) => Outcome::Cancel,
            Some(Action::NextField) => {
                self.cycle(true);
                Outcome::Continue
            }
            Some(Action::PrevField) => {
                self.cycle(false);
                Outcome::Continue
            }
            Some(Action::NextInput) => {
                self.focus = next_input(&[Field::Reason, Field::Word], self.focus);
                Outcome::Continue
            }
            Some(Action::PrevButton | Action::NextButton) => {
                self.focus = other_button(self.focus);
                Outcome::Continue
            }
            Some(Action::Confirm) => match self.focus {
                Field::Confirm => self.confirm(),
                _ => Outcome::Cancel,
            },
            Some(_) => Outcome::Continue,
            None => {
                match self.focus {
                    Field::Reason => {
                        self.reason.input(*key);
                    }
                    Field::Word => {
                        self.word.input(*key);
                    }
                    Field::Cancel | Field::Confirm | Field::Choice => {}
                }
                self.error = None;
                Outcome::Continue
            }
        }
    }

    pub fn render(&self, theme: &Theme, frame: &mut Frame, screen: Rect) {
        let target_text = target_lines(&self.targets, inner_width(screen), theme);
        let target_rows = u16::try_from(target_text.len()).unwrap_or(u16::MAX);
        let area = centered(screen, DIALOG_WIDTH, 16u16.saturating_add(target_rows));
        frame.render_widget(Clear, area);
        let danger = theme.style(Token::Error);
        let block = Block::bordered()
            .border_style(danger)
            .title(Span::styled(format!(" {} ", self.intent.title()), danger))
            .style(theme.base());
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let [effect, targets, reason, word, error, button_row] = Layout::vertical([
            Constraint::Min(2),
            Constraint::Length(target_rows),
            Constraint::Length(5),
            Constraint::Length(3),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(inner);
        frame.render_widget(
            Paragraph::new(vec![
                Line::from(self.intent.effect()),
                Line::from(vec![
                    Span::raw("Type "),
                    Span::styled(self.expected(), theme.style(Token::Accent)),
                    Span::raw(" below to enable the button."),
                ]),
            ])
            .wrap(Wrap { trim: true }),
            effect,
        );
        if target_rows > 0 {
            frame.render_widget(Paragraph::new(target_text), targets);
        }
        let r = styled_box(&self.reason, "reason", self.focus == Field::Reason, theme);
        frame.render_widget(&r, reason);
        let w = styled_box(&self.word, "confirm", self.focus == Field::Word, theme);
        frame.render_widget(&w, word);
        if let Some(e) = &self.error {
            frame.render_widget(Paragraph::new(Span::styled(format!("✗ {e}"), danger)), error);
        }
        frame.render_widget(
            buttons(self.focus, self.intent.button(), self.armed(), theme),
            button_row,
        );
    }
}
