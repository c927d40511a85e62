//! The reason dialog: the target, the effect, a text area for the reason (when
//! the action takes one) and Cancel / action buttons.
//!
//! Enter in the text area goes to the buttons — onto Cancel for dangerous
//! actions, onto the action otherwise; Enter on a button presses it. The action
//! refuses an empty reason.

use super::{Field, Intent, Outcome, buttons, centered, dialog_action, reason_box, styled_box, typed};
use crate::console::keymap::Action;
use crate::console::theme::{Theme, Token};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use tui_textarea::TextArea;

#[derive(Debug, Clone)]
pub struct ReasonDialog {
    pub intent: Intent,
    /// `None` for actions without a reason (resume, trigger).
    pub reason: Option<TextArea<'static>>,
    pub focus: Field,
    /// Why the last confirm was refused.
    pub error: Option<String>,
}

impl ReasonDialog {
    pub fn new(intent: Intent) -> Self {
        let reason = intent
            .needs_reason()
            .then(|| reason_box("why? (recorded with your name)"));
        let focus = if reason.is_some() {
            Field::Reason
        } else {
            Field::Cancel
        };
        Self {
            intent,
            reason,
            focus,
            error: None,
        }
    }

    fn fields(&self) -> Vec<Field> {
        let mut f = Vec::with_capacity(3);
        if self.reason.is_some() {
            f.push(Field::Reason);
        }
        f.extend([Field::Cancel, Field::Confirm]);
        f
    }

    fn cycle(&mut self, forward: bool) {
        let fields = self.fields();
        let i = fields.iter().position(|f| *f == self.focus).unwrap_or(0);
        let n = fields.len();
        self.focus = fields[if forward { (i + 1) % n } else { (i + n - 1) % n }];
    }

    /// The reason as typed (trimmed), empty if there is no box.
    pub fn reason_text(&self) -> String {
        self.reason.as_ref().map(typed).unwrap_or_default()
    }

    fn can_confirm(&self) -> bool {
        self.reason.is_none() || !self.reason_text().is_empty()
    }

    pub fn handle_key(&mut self, key: &KeyEvent) -> Outcome {
        let on_text = self.focus == Field::Reason;
        match dialog_action(key, on_text) {
            Some(Action::Cancel) => Outcome::Cancel,
            Some(Action::NextField) => {
                self.cycle(true);
                Outcome::Continue
            }
            Some(Action::PrevField) => {
                self.cycle(false);
                Outcome::Continue
            }
            Some(Action::Confirm) => match self.focus {
                Field::Reason => {
                    self.focus = if self.intent.dangerous() {
                        Field::Cancel
                    } else {
                        Field::Confirm
                    };
                    Outcome::Continue
                }
                Field::Cancel => Outcome::Cancel,
                Field::Confirm | Field::Word => {
                    if self.can_confirm() {
                        Outcome::Submit(self.intent.clone().into_cmd(self.reason_text()))
                    } else {
                        self.error = Some("a reason is required".into());
                        self.focus = Field::Reason;
                        Outcome::Continue
                    }
                }
            },
            Some(_) => Outcome::Continue,
            None => {
                if let (Field::Reason, Some(ta)) = (self.focus, self.reason.as_mut()) {
                    ta.input(*key);
                    self.error = None;
                }
                Outcome::Continue
            }
        }
    }

    pub fn render(&self, theme: &Theme, frame: &mut Frame, screen: Rect) {
        let height = if self.reason.is_some() { 13 } else { 9 };
        let area = centered(screen, 64, height);
        frame.render_widget(Clear, area);
        let title_style = if self.intent.dangerous() {
            theme.style(Token::Error)
        } else {
            theme.style(Token::Accent)
        };
        let block = Block::bordered()
            .border_style(title_style)
            .title(Span::styled(format!(" {} ", self.intent.title()), title_style))
            .style(theme.base());
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let reason_rows = if self.reason.is_some() { 5 } else { 0 };
        let [effect, reason, error, button_row] = Layout::vertical([
            Constraint::Min(2),
            Constraint::Length(reason_rows),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(inner);
        frame.render_widget(
            Paragraph::new(Line::from(self.intent.effect())).wrap(Wrap { trim: true }),
            effect,
        );
        if let Some(ta) = &self.reason {
            let styled = styled_box(ta, "reason", self.focus == Field::Reason, theme);
            frame.render_widget(&styled, reason);
        }
        if let Some(e) = &self.error {
            frame.render_widget(
                Paragraph::new(Span::styled(format!("✗ {e}"), theme.style(Token::Error))),
                error,
            );
        }
        frame.render_widget(
            buttons(self.focus, self.intent.button(), self.can_confirm(), theme),
            button_row,
        );
    }
}
