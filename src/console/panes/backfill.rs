//! The backfill queue: pending catch-up runs (pool `backfill`), oldest window
//! first, with the countdown to expiry (`window_start + catchup_window`).

use super::{RowKey, drawn, list_rows, note_line, pane_block, run_matches, selected_style};
use crate::console::app::Model;
use crate::console::format::{countdown, local_short};
use crate::console::snapshot::BackfillRow;
use crate::console::theme::{Theme, Token};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

/// Expiring within this long is shown as a warning.
const SOON_SECS: i64 = 3600;

fn visible(m: &Model) -> impl Iterator<Item = &BackfillRow> {
    m.snapshot
        .backfill
        .iter()
        .filter(|r| run_matches(&m.filter, &r.run))
}

pub fn keys(m: &Model) -> Vec<RowKey> {
    visible(m).map(|r| RowKey::Run(r.run.id)).collect()
}

pub fn render(m: &Model, t: &Theme, f: &mut Frame, area: Rect, focused: bool) {
    let rows: Vec<&BackfillRow> = visible(m).collect();
    let more = if m.snapshot.queue_truncated { "+" } else { "" };
    let planned = match m.snapshot.backlogs.len() {
        0 => String::new(),
        1 => "; 1 schedule has more planned".to_string(),
        n => format!("; {n} schedules have more planned"),
    };
    let block = pane_block(
        format!("6 Backfill queue ({}{more}{planned})", rows.len()),
        focused,
        t,
    );
    if rows.is_empty() {
        let text = if !m.loaded {
            "loading…".to_string()
        } else if let Some(b) = m.snapshot.backlogs.first() {
            format!(
                "{}: windows {} – {} wait to be queued",
                b.schedule,
                local_short(b.next, m.tz),
                local_short(b.until, m.tz)
            )
        } else {
            "no catch-up window is waiting".to_string()
        };
        f.render_widget(Paragraph::new(note_line(&text, t)).block(block), area);
        return;
    }
    let wide = area.width >= 100;
    let keys = keys(m);
    let selected = m.backfill.resolve(&keys);
    let visible_rows = list_rows(area);
    let (offset, shown) = drawn(selected, visible_rows);
    let table_rows = rows.iter().skip(offset).take(visible_rows).map(|r| {
        let run = &r.run;
        let expiry = match r.expires_at {
            Some(at) => {
                let left = (at - m.now).num_seconds();
                let token = if left <= 0 {
                    Token::Error
                } else if left < SOON_SECS {
                    Token::Warn
                } else {
                    Token::Fg
                };
                let text = if left <= 0 {
                    "× expired".to_string()
                } else {
                    format!("◷ {}", countdown(m.now, at))
                };
                Span::styled(text, t.style(token))
            }
            None => Span::styled("?", t.style(Token::Muted)),
        };
        let mut cells = vec![
            Cell::from(format!("#{}", run.id)),
            Cell::from(run.schedule.clone()),
            Cell::from(run.window_key.clone()),
        ];
        if wide {
            cells.push(Cell::from(Span::styled(
                local_short(run.window_start, m.tz),
                t.style(Token::Muted),
            )));
        }
        cells.push(Cell::from(expiry));
        cells.push(Cell::from(crate::time::in_zone(
            run.state_reason.as_deref().unwrap_or_default(),
            m.tz,
        )));
        Row::new(cells)
    });
    let mut widths = vec![Constraint::Length(6), Constraint::Fill(2), Constraint::Fill(3)];
    let mut header = vec!["RUN", "SCHEDULE", "WINDOW"];
    if wide {
        widths.push(Constraint::Length(14));
        header.push("START");
    }
    widths.extend([Constraint::Length(11), Constraint::Fill(2)]);
    header.extend(["EXPIRES IN", "REASON"]);
    let mut state = TableState::default().with_selected(shown);
    let table = Table::new(table_rows, widths)
        .header(Row::new(header).style(t.style(Token::Muted)))
        .row_highlight_style(if focused {
            selected_style(t)
        } else {
            t.style(Token::Fg)
        })
        .highlight_symbol("▌")
        .block(block);
    f.render_stateful_widget(table, area, &mut state);
}
