//! The retry queue: `retry_wait` runs with attempt n/max, error class, and the
//! countdown to the next attempt (`not_before`), soonest first; below them the
//! dead-letter queue (retries exhausted, newest first), which `r` requeues.

use super::{RowKey, drawn, note_line, pane_block, run_matches, selected_style};
use crate::console::app::Model;
use crate::console::format::{countdown, first_line, local_short, relative};
use crate::console::snapshot::RetryRow;
use crate::console::theme::{Theme, Token};
use crate::store::RunState;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState, Wrap};

/// Waiting retries, then dead letters.
fn visible(m: &Model) -> impl Iterator<Item = &RetryRow> {
    m.snapshot
        .retries
        .iter()
        .chain(m.snapshot.dead.iter())
        .filter(|r| run_matches(&m.filter, &r.run))
}

pub fn keys(m: &Model) -> Vec<RowKey> {
    visible(m).map(|r| RowKey::Run(r.run.id)).collect()
}

pub fn render(m: &Model, t: &Theme, f: &mut Frame, area: Rect, focused: bool) {
    let rows: Vec<&RetryRow> = visible(m).collect();
    let more = if m.snapshot.queue_truncated { "+" } else { "" };
    let dead = rows.iter().filter(|r| r.run.state == RunState::Dead).count();
    let block = pane_block(
        format!(
            "4 Retry queue ({}{more}) · dead letters ({dead})",
            rows.len() - dead
        ),
        focused,
        t,
    );
    if rows.is_empty() {
        let text = if m.loaded {
            "no run waits for a retry; the dead-letter queue is empty"
        } else {
            "loading…"
        };
        f.render_widget(Paragraph::new(note_line(text, t)).block(block), area);
        return;
    }
    let wide = area.width >= 120;
    let inner = block.inner(area);
    f.render_widget(block, area);
    let list_h = (u16::try_from(rows.len()).unwrap_or(u16::MAX) + 1)
        .min(inner.height.saturating_sub(4))
        .max(2);
    let [list, detail] = Layout::vertical([Constraint::Length(list_h), Constraint::Min(0)]).areas(inner);
    let keys = keys(m);
    let selected = m.retries.resolve(&keys);
    let visible_rows = usize::from(list.height.saturating_sub(1));
    let (offset, shown) = drawn(selected, visible_rows);
    let table_rows = rows.iter().skip(offset).take(visible_rows).map(|r| {
        let run = &r.run;
        let next = run.not_before.or(run.next_check_at);
        let class = run.error_class.map_or("-", |c| c.as_str());
        let max = if r.max_attempts > 0 {
            r.max_attempts.to_string()
        } else {
            "?".into()
        };
        let next_cell = if run.state == RunState::Dead {
            Span::styled("† dead", t.style(Token::Error))
        } else {
            let countdown_text = next.map_or("?".to_string(), |at| countdown(m.now, at));
            Span::styled(format!("↻ {countdown_text}"), t.style(Token::Warn))
        };
        let mut cells = vec![
            Cell::from(format!("#{}", run.id)),
            Cell::from(run.schedule.clone()),
            Cell::from(run.window_key.clone()),
            Cell::from(format!("{}/{max}", run.attempts)),
            Cell::from(next_cell),
            Cell::from(Span::styled(class.to_string(), t.style(Token::Warn))),
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
        Constraint::Fill(2),
        Constraint::Length(5),
        Constraint::Length(9),
        Constraint::Length(13),
    ];
    let mut header = vec!["RUN", "SCHEDULE", "WINDOW", "TRIES", "NEXT IN", "CLASS"];
    if wide {
        widths.push(Constraint::Fill(3));
        header.push("LAST ERROR");
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

    let Some(r) = selected.and_then(|i| rows.get(i)) else {
        return;
    };
    let run = &r.run;
    let mut lines = vec![Line::from(Span::styled(
        format!("── run #{} ──", run.id),
        t.style(Token::Muted),
    ))];
    if run.state == RunState::Dead {
        lines.push(Line::from(vec![
            Span::styled("dead   ", t.style(Token::Muted)),
            Span::raw(format!(
                "retries exhausted after {} attempt(s); r requeues it (one more attempt, now)",
                run.attempts
            )),
        ]));
    } else if let Some(at) = run.not_before.or(run.next_check_at) {
        lines.push(Line::from(vec![
            Span::styled("next   ", t.style(Token::Muted)),
            Span::raw(format!(
                "attempt {} not before {} ({}), re-gated first",
                run.attempts + 1,
                local_short(at, m.tz),
                relative(m.now, at)
            )),
        ]));
    }
    lines.push(Line::from(vec![
        Span::styled("error  ", t.style(Token::Muted)),
        Span::styled(
            run.last_error.clone().unwrap_or_else(|| "-".into()),
            t.style(Token::Error),
        ),
    ]));
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), detail);
}
