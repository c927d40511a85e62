//! Schedules: id, tenant, next fire (relative and absolute, in the schedule's
//! zone), the newest run's state, circuit, paused. Only the rows on screen are
//! built (there may be ten thousand).

use super::{RowKey, drawn, filter_match, list_rows, mark_span, note_line, pane_block, selected_style};
use crate::console::app::Model;
use crate::console::format::{fit, relative};
use crate::console::marks;
use crate::console::snapshot::ScheduleRow;
use crate::console::theme::{Theme, Token};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

fn visible(m: &Model) -> impl Iterator<Item = &ScheduleRow> {
    m.snapshot
        .schedules
        .iter()
        .filter(|s| filter_match(&m.filter, &[&s.id, &s.tenant, &s.trigger]))
}

/// The listed schedules, in order.
pub fn keys(m: &Model) -> Vec<RowKey> {
    visible(m).map(|s| RowKey::Name(s.id.clone())).collect()
}

/// The listed schedule ids, in order, borrowed (see [`super::ListCursor::resolve_names`]).
pub fn names(m: &Model) -> impl Iterator<Item = &str> {
    visible(m).map(|s| s.id.as_str())
}

/// The selected schedule's id.
pub fn selected(m: &Model) -> Option<&str> {
    m.schedules.selected_name(|| names(m))
}

/// `in 23h30m Tue 09:00` in the schedule's own zone (with the date when wide).
fn next_fire(m: &Model, t: &Theme, s: &ScheduleRow, wide: bool) -> Line<'static> {
    if let Some(o) = &s.overdue {
        // A fire passed and no scheduler was alive to evaluate it.
        let local = o.due.with_timezone(&s.timezone);
        let abs = if wide {
            local.format("%m-%d %H:%M")
        } else {
            local.format("%H:%M")
        };
        return Line::from(Span::styled(
            format!("⚠ overdue {abs}"),
            t.style(Token::Error).add_modifier(ratatui::style::Modifier::BOLD),
        ));
    }
    match &s.next_fire {
        _ if !s.loaded => Line::from(Span::raw("…")),
        Some(f) => {
            let local = f.at.with_timezone(&s.timezone);
            let abs = if wide {
                local.format("%a %m-%d %H:%M")
            } else {
                local.format("%a %H:%M")
            };
            Line::from(vec![
                Span::raw(format!("{:<10}", relative(m.now, f.at))),
                Span::raw(abs.to_string()),
            ])
        }
        None => Line::from(Span::raw(fit(&s.trigger, if wide { 26 } else { 20 }))),
    }
}

pub fn render(m: &Model, t: &Theme, f: &mut Frame, area: Rect, focused: bool) {
    let rows: Vec<&ScheduleRow> = visible(m).collect();
    let title = format!("1 Schedules ({})", rows.len());
    let block = pane_block(title, focused, t);
    if !m.loaded || rows.is_empty() {
        let text = if !m.loaded {
            "loading…"
        } else if m.filter.is_empty() {
            "no schedules in the config"
        } else {
            "no schedule matches the filter"
        };
        f.render_widget(Paragraph::new(note_line(text, t)).block(block), area);
        return;
    }
    let wide = area.width >= 110;
    let roomy = area.width >= 90;
    let mut header = vec!["SCHEDULE"];
    if wide {
        header.extend(["TENANT", "TRIGGER"]);
    }
    header.extend(["NEXT FIRE", "LAST RUN", "CIRCUIT", "PAUSED"]);
    let mut widths = vec![Constraint::Fill(2)];
    if wide {
        widths.extend([Constraint::Length(10), Constraint::Fill(2)]);
    }
    widths.extend([
        Constraint::Length(if roomy { 26 } else { 20 }),
        Constraint::Length(14),
        Constraint::Length(12),
        Constraint::Length(9),
    ]);
    let selected = m.schedules.resolve_names(names(m));
    let visible_rows = list_rows(area);
    let (offset, shown) = drawn(selected, visible_rows);
    let table_rows = rows.iter().skip(offset).take(visible_rows).map(|s| {
        let mut cells = vec![Cell::from(s.id.clone())];
        if wide {
            cells.push(Cell::from(s.tenant.clone()));
            cells.push(Cell::from(Span::styled(s.trigger.clone(), t.style(Token::Muted))));
        }
        cells.push(Cell::from(next_fire(m, t, s, roomy)));
        cells.push(match &s.last {
            _ if !s.loaded => Cell::from(Span::styled("…", t.style(Token::Muted))),
            Some(l) => Cell::from(mark_span(marks::run_state(l.state), t)),
            None => Cell::from(Span::styled("· none", t.style(Token::Muted))),
        });
        cells.push(Cell::from(mark_span(marks::circuit(s.circuit), t)));
        cells.push(Cell::from(mark_span(marks::paused(s.paused), t)));
        Row::new(cells)
    });
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
