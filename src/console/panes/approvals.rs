//! Approvals: `needs_human` runs, oldest window first, with what a human needs
//! to decide: the deadline (`approval_ttl`) and its countdown, the owner, the
//! error that parked them (and why it waits, when that says more), the step
//! journal (side-effect steps that started but never finished are the
//! uncertain ones a human must check) and the last lines of the agent's log.

use super::{RowKey, drawn, mark_span, note_line, pane_block, run_matches, selected_style};
use crate::console::app::Model;
use crate::console::format::{countdown, first_line, local_minute, local_short, relative};
use crate::console::marks;
use crate::console::snapshot::ApprovalRow;
use crate::console::theme::{Theme, Token};
use crate::store::{Step, StepStatus};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState, Wrap};

fn visible(m: &Model) -> impl Iterator<Item = &ApprovalRow> {
    m.snapshot
        .approvals
        .iter()
        .filter(|r| run_matches(&m.filter, &r.run))
}

pub fn keys(m: &Model) -> Vec<RowKey> {
    visible(m).map(|r| RowKey::Run(r.run.id)).collect()
}

/// Started and never done nor failed in the same attempt.
fn uncertain(steps: &[Step], s: &Step) -> bool {
    s.status == StepStatus::Started
        && !steps
            .iter()
            .any(|o| o.attempt == s.attempt && o.name == s.name && o.status != StepStatus::Started)
}

/// The step journal as lines (also used by the run detail).
pub fn journal(m: &Model, t: &Theme, steps: &[Step]) -> Vec<Line<'static>> {
    if steps.is_empty() {
        return vec![note_line("no steps journaled", t)];
    }
    steps
        .iter()
        .map(|s| {
            let mut spans = vec![
                Span::styled(format!("{} ", local_short(s.at, m.tz)), t.style(Token::Muted)),
                Span::raw(format!("try {} {:<12} ", s.attempt, s.name)),
                mark_span(marks::step_status(s.status), t),
            ];
            if s.side_effect {
                spans.push(Span::styled("  side effect", t.style(Token::Accent)));
            }
            if s.side_effect && uncertain(steps, s) {
                spans.push(Span::styled("  ! uncertain", t.style(Token::Error)));
            }
            Line::from(spans)
        })
        .collect()
}

pub fn render(m: &Model, t: &Theme, f: &mut Frame, area: Rect, focused: bool) {
    let rows: Vec<&ApprovalRow> = visible(m).collect();
    let block = pane_block(format!("5 Approvals ({} need a human)", rows.len()), focused, t);
    if rows.is_empty() {
        let text = if m.loaded {
            "no run needs a human"
        } else {
            "loading…"
        };
        f.render_widget(Paragraph::new(note_line(text, t)).block(block), area);
        return;
    }
    let inner = block.inner(area);
    f.render_widget(block, area);
    let list_h = (u16::try_from(rows.len()).unwrap_or(u16::MAX) + 1)
        .min(inner.height / 2)
        .max(2);
    let [list, detail] = Layout::vertical([Constraint::Length(list_h), Constraint::Min(0)]).areas(inner);
    let wide = area.width >= 120;
    let keys = keys(m);
    let selected = m.approvals.resolve(&keys);
    let visible_rows = usize::from(list.height.saturating_sub(1));
    let (offset, shown) = drawn(selected, visible_rows);
    let table_rows = rows.iter().skip(offset).take(visible_rows).map(|r| {
        let run = &r.run;
        let mut cells = vec![
            Cell::from(format!("#{}", run.id)),
            Cell::from(run.schedule.clone()),
            Cell::from(run.window_key.clone()),
            Cell::from(Span::styled(
                run.error_class.map_or("-", |c| c.as_str()).to_string(),
                t.style(Token::Warn),
            )),
            Cell::from(Span::styled(
                relative(m.now, run.updated_at),
                t.style(Token::Muted),
            )),
            Cell::from(match r.deadline {
                Some(d) => Span::styled(countdown(m.now, d), t.style(Token::Warn)),
                None => Span::styled("-", t.style(Token::Muted)),
            }),
        ];
        if wide {
            cells.push(Cell::from(
                first_line(run.last_error.as_deref().unwrap_or("")).to_string(),
            ));
        }
        Row::new(cells)
    });
    let mut widths = vec![
        Constraint::Length(6),
        Constraint::Fill(2),
        Constraint::Fill(3),
        Constraint::Length(13),
        Constraint::Length(11),
        Constraint::Length(9),
    ];
    let mut header = vec!["RUN", "SCHEDULE", "WINDOW", "CLASS", "PARKED", "DECIDE IN"];
    if wide {
        widths.push(Constraint::Fill(3));
        header.push("ERROR");
    }
    let mut state = TableState::default().with_selected(shown);
    let table = Table::new(table_rows, widths)
        .header(Row::new(header).style(t.style(Token::Muted)))
        .row_highlight_style(if focused {
            selected_style(t)
        } else {
            t.style(Token::Fg)
        })
        .highlight_symbol("▌");
    f.render_stateful_widget(table, list, &mut state);

    let Some(row) = selected.and_then(|i| rows.get(i)) else {
        return;
    };
    let mut lines = vec![Line::from(Span::styled(
        format!("── run #{} ──", row.run.id),
        t.style(Token::Muted),
    ))];
    lines.push(Line::from(vec![
        Span::styled("decide ", t.style(Token::Muted)),
        match row.deadline {
            Some(d) if d > m.now => Span::styled(
                format!(
                    "by {} · {} left, then it fails (approval_ttl)",
                    local_minute(d, m.tz),
                    countdown(m.now, d)
                ),
                t.style(Token::Warn),
            ),
            Some(d) => Span::styled(
                format!(
                    "deadline {} passed: it fails at the next check",
                    local_minute(d, m.tz)
                ),
                t.style(Token::Error),
            ),
            None => Span::styled("no deadline (no approval_ttl)", t.style(Token::Muted)),
        },
    ]));
    lines.push(Line::from(vec![
        Span::styled("owner  ", t.style(Token::Muted)),
        Span::raw(
            row.owner
                .clone()
                .unwrap_or_else(|| "- (no owner in the config)".into()),
        ),
    ]));
    let error = row.run.last_error.clone();
    lines.push(Line::from(vec![
        Span::styled("error  ", t.style(Token::Muted)),
        Span::styled(error.clone().unwrap_or_else(|| "-".into()), t.style(Token::Error)),
    ]));
    // The reason it waits, when it says more than the agent's error.
    if let Some(r) = row
        .run
        .state_reason
        .as_ref()
        .filter(|r| Some(*r) != error.as_ref())
    {
        lines.push(Line::from(vec![
            Span::styled("why    ", t.style(Token::Muted)),
            Span::raw(crate::time::in_zone(r, m.tz)),
        ]));
    }
    lines.push(Line::from(Span::styled("steps", t.style(Token::Muted))));
    lines.extend(journal(m, t, &row.steps));
    lines.push(Line::from(Span::styled(
        "log (latest attempt, last lines)",
        t.style(Token::Muted),
    )));
    if row.log_tail.is_empty() {
        lines.push(note_line("no log", t));
    }
    for l in &row.log_tail {
        lines.push(Line::from(Span::raw(format!("  {l}"))));
    }
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), detail);
}
