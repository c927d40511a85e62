//! The reason dialog: the target, the effect, a text area for the reason (when
//! the action takes one) and Cancel / action buttons.
//!
//! Enter in the text area goes to the buttons — onto Cancel for dangerous
//! actions, onto the action otherwise; Enter on a button presses it. The action
//! refuses an empty reason, and (resume, backfill) a plan that has not arrived
//! or has nothing to do.

use super::{
    Field, Intent, Outcome, PreviewState, buttons, centered, dialog_action, reason_box, styled_box, typed,
};
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
    /// The plan shown before confirming (resume, backfill).
    pub preview: PreviewState,
}

/// Plan lines shown at most; the rest is summarised in one line.
const PLAN_LINES: usize = 8;

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
        let preview = if intent.needs_preview() {
            PreviewState::Loading
        } else {
            PreviewState::NotNeeded
        };
        Self {
            intent,
            reason,
            focus,
            error: None,
            preview,
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
        (self.reason.is_none() || !self.reason_text().is_empty()) && self.preview.blocks().is_none()
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
                    } else if let Some(why) = self.preview.blocks() {
                        self.error = Some(why);
                        Outcome::Continue
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

    /// The plan as lines for the plan box (empty when there is none).
    fn plan_lines(&self, theme: &Theme) -> Vec<Line<'static>> {
        match &self.preview {
            PreviewState::NotNeeded => vec![],
            PreviewState::Loading => vec![Line::from(Span::styled(
                "loading the plan…",
                theme.style(Token::Muted),
            ))],
            PreviewState::Failed(e) => vec![Line::from(Span::styled(
                format!("✗ {e}"),
                theme.style(Token::Error),
            ))],
            PreviewState::Ready(p) => {
                let mut out: Vec<Line<'static>> = p
                    .lines
                    .iter()
                    .take(PLAN_LINES)
                    .map(|l| Line::from(l.clone()))
                    .collect();
                if p.lines.len() > PLAN_LINES {
                    out.push(Line::from(Span::styled(
                        format!("… and {} more", p.lines.len() - PLAN_LINES),
                        theme.style(Token::Muted),
                    )));
                }
                out
            }
        }
    }

    pub fn render(&self, theme: &Theme, frame: &mut Frame, screen: Rect) {
        let plan = self.plan_lines(theme);
        let plan_rows = if plan.is_empty() {
            0
        } else {
            u16::try_from(plan.len()).unwrap_or(u16::MAX).saturating_add(2)
        };
        let base: u16 = match (self.reason.is_some(), plan.is_empty()) {
            (true, _) => 13,
            (false, true) => 9,
            // The plan box says the rest.
            (false, false) => 7,
        };
        let area = centered(screen, 64, base.saturating_add(plan_rows));
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
        let [effect, plan_area, reason, error, button_row] = Layout::vertical([
            Constraint::Min(2),
            Constraint::Length(plan_rows),
            Constraint::Length(reason_rows),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(inner);
        frame.render_widget(
            Paragraph::new(Line::from(self.intent.effect())).wrap(Wrap { trim: true }),
            effect,
        );
        if !plan.is_empty() {
            let block = Block::bordered()
                .border_style(theme.style(Token::Muted))
                .title(Span::styled(" plan ", theme.style(Token::Muted)));
            frame.render_widget(Paragraph::new(plan).block(block), plan_area);
        }
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
