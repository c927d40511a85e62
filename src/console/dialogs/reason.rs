//! The reason dialog: the target, the effect, what it touches (the held runs
//! unkill releases), a text area for the reason (when the action takes one),
//! for approve a resume-after choice among the completed steps, and Cancel /
//! action buttons.
//!
//! The grammar of every dialog (see [`super`]): the focus starts in the
//! reason box, or without one (resume, trigger, backfill, reload) on Cancel;
//! Enter in the box or on the choice moves on, to the buttons on Cancel, and
//! never confirms; Enter on a button presses it; Esc cancels. The action
//! refuses an empty reason, and (resume, backfill) a plan that has not
//! arrived or has nothing to do, saying why.

use super::{
    DIALOG_WIDTH, Field, Intent, Outcome, PreviewState, buttons, centered, dialog_action, inner_width,
    next_input, other_button, reason_box, styled_box, target_lines, typed, wrap_words,
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
    /// Approve: the steps the agent may resume after (the completed ones);
    /// empty: no choice is offered.
    pub choices: Vec<String>,
    /// 0: from the start (no resume-after); `i`: after `choices[i - 1]`.
    pub choice: usize,
    /// What the action touches, one line each (unkill: the held runs it releases).
    pub targets: Vec<String>,
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
            choices: vec![],
            choice: 0,
            targets: vec![],
        }
    }

    /// Offers the resume-after choice among `steps` (approve), preselecting
    /// the intent's step if it names one.
    pub fn with_choices(mut self, steps: Vec<String>) -> Self {
        let wanted = match &self.intent {
            Intent::Approve { resume_after, .. } => resume_after.clone(),
            _ => None,
        };
        self.choices = steps;
        if let Some(w) = wanted {
            if !self.choices.contains(&w) {
                self.choices.push(w.clone());
            }
            self.choice = self.choices.iter().position(|c| *c == w).map_or(0, |i| i + 1);
        }
        self
    }

    pub fn with_targets(mut self, targets: Vec<String>) -> Self {
        self.targets = targets;
        self
    }

    /// The chosen resume-after step, if the dialog offers the choice.
    pub fn resume_after(&self) -> Option<String> {
        self.choice
            .checked_sub(1)
            .and_then(|i| self.choices.get(i).cloned())
    }

    fn fields(&self) -> Vec<Field> {
        let mut f = Vec::with_capacity(4);
        f.extend(self.inputs());
        f.extend([Field::Cancel, Field::Confirm]);
        f
    }

    /// The fields typed or chosen in, in order (Enter on the last one goes to
    /// the buttons).
    fn inputs(&self) -> Vec<Field> {
        let mut f = Vec::with_capacity(2);
        if self.reason.is_some() {
            f.push(Field::Reason);
        }
        if !self.choices.is_empty() {
            f.push(Field::Choice);
        }
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

    /// Presses the action: submits, or says why not and goes where the fix is.
    fn confirm(&mut self) -> Outcome {
        if self.can_confirm() {
            let mut intent = self.intent.clone();
            if !self.choices.is_empty()
                && let Intent::Approve { resume_after, .. } = &mut intent
            {
                *resume_after = self.resume_after();
            }
            Outcome::Submit(intent.into_cmd(self.reason_text()))
        } else if let Some(why) = self.preview.blocks() {
            self.error = Some(why);
            Outcome::Continue
        } else {
            self.error = Some("a reason is required".into());
            self.focus = Field::Reason;
            Outcome::Continue
        }
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
                self.focus = next_input(&self.inputs(), self.focus);
                Outcome::Continue
            }
            Some(Action::PrevButton | Action::NextButton) => {
                self.focus = other_button(self.focus);
                Outcome::Continue
            }
            Some(a @ (Action::NextChoice | Action::PrevChoice)) => {
                let n = self.choices.len() + 1;
                self.choice = if a == Action::NextChoice {
                    (self.choice + 1) % n
                } else {
                    (self.choice + n - 1) % n
                };
                Outcome::Continue
            }
            Some(Action::Confirm) => match self.focus {
                Field::Confirm => self.confirm(),
                _ => Outcome::Cancel,
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

    /// The title: the intent's, without a resume-after step the choice shows.
    fn title(&self) -> String {
        match &self.intent {
            Intent::Approve { run, label, .. } if !self.choices.is_empty() => {
                format!("Approve run #{run} ({label})")
            }
            other => other.title(),
        }
    }

    /// The plan as lines for the plan box, `width` columns wide (empty when
    /// there is none): each line wrapped at words, continued indented.
    fn plan_lines(&self, width: usize, theme: &Theme) -> Vec<Line<'static>> {
        let wrapped = |text: &str, style: ratatui::style::Style| -> Vec<Line<'static>> {
            if text.chars().count() <= width {
                return vec![Line::from(Span::styled(text.to_string(), style))];
            }
            // A line's own indent is kept; what wraps goes two further in.
            let indent = text.len() - text.trim_start().len();
            let lead = " ".repeat(indent);
            wrap_words(text, width.saturating_sub(indent + 2))
                .into_iter()
                .enumerate()
                .map(|(i, part)| {
                    let part = if i == 0 {
                        format!("{lead}{part}")
                    } else {
                        format!("{lead}  {part}")
                    };
                    Line::from(Span::styled(part, style))
                })
                .collect()
        };
        match &self.preview {
            PreviewState::NotNeeded => vec![],
            PreviewState::Loading => vec![Line::from(Span::styled(
                "loading the plan…",
                theme.style(Token::Muted),
            ))],
            PreviewState::Failed(e) => wrapped(&format!("✗ {e}"), theme.style(Token::Error)),
            PreviewState::Ready(p) => {
                let mut out: Vec<Line<'static>> = p
                    .lines
                    .iter()
                    .take(PLAN_LINES)
                    .flat_map(|l| wrapped(l, theme.style(Token::Fg)))
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
        // The plan box's borders take two columns of the dialog's.
        let plan = self.plan_lines(inner_width(screen).saturating_sub(2), theme);
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
        let target_text = target_lines(&self.targets, inner_width(screen), theme);
        let target_rows = u16::try_from(target_text.len()).unwrap_or(u16::MAX);
        let choice_rows = u16::from(!self.choices.is_empty());
        let area = centered(
            screen,
            DIALOG_WIDTH,
            base.saturating_add(plan_rows)
                .saturating_add(target_rows)
                .saturating_add(choice_rows),
        );
        frame.render_widget(Clear, area);
        let title_style = if self.intent.dangerous() {
            theme.style(Token::Error)
        } else {
            theme.style(Token::Accent)
        };
        let block = Block::bordered()
            .border_style(title_style)
            .title(Span::styled(format!(" {} ", self.title()), title_style))
            .style(theme.base());
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let reason_rows = if self.reason.is_some() { 5 } else { 0 };
        let [effect, targets, plan_area, reason, choice, error, button_row] = Layout::vertical([
            Constraint::Min(2),
            Constraint::Length(target_rows),
            Constraint::Length(plan_rows),
            Constraint::Length(reason_rows),
            Constraint::Length(choice_rows),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(inner);
        if target_rows > 0 {
            frame.render_widget(Paragraph::new(target_text), targets);
        }
        if !self.choices.is_empty() {
            let focused = self.focus == Field::Choice;
            let value = match self.resume_after() {
                Some(step) => format!("after step {step}"),
                None => "from the start".to_string(),
            };
            let style = if focused {
                theme
                    .style(Token::Selection)
                    .add_modifier(ratatui::style::Modifier::BOLD)
            } else {
                theme.style(Token::Fg)
            };
            frame.render_widget(
                Paragraph::new(Line::from(vec![
                    Span::styled("resume: ", theme.style(Token::Muted)),
                    Span::styled(format!("‹ {value} ›"), style),
                    Span::styled(
                        format!("  ↑/↓ choose · completed: {}", self.choices.join(", ")),
                        theme.style(Token::Muted),
                    ),
                ])),
                choice,
            );
        }
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
