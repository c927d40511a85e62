//! Schedules: id (ellipsised, wider on wide terminals), tenant, trigger, the
//! HEALTH column — the worst unresolved state (`✗ 7 dead`, `⊘ circuit open`,
//! `? 1 needs human`, `‖ paused`, `◷ gate upstream waits 12m`), else running
//! or ok — how it last ended, next fire (relative and absolute, in the
//! console's zone, as every time on its screens), circuit, paused. Only the rows on screen are built (there
//! may be ten thousand).

use super::{RowKey, drawn, filter_match_in, list_rows, mark_span, note_line, pane_block, selected_style};
use crate::console::app::Model;
use crate::console::format::{duration_short, fit, relative};
use crate::console::marks;
use crate::console::snapshot::ScheduleRow;
use crate::console::theme::{Theme, Token};
use crate::store::{CircuitState, RunState};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

fn visible(m: &Model) -> impl Iterator<Item = &ScheduleRow> {
    m.snapshot
        .schedules
        .iter()
        .filter(|s| filter_match_in(&m.filter, &[&s.id, &s.tenant, &s.trigger], Some(&s.tenant)))
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

/// `in 23h30m Tue 09:00` in the console's zone, the header's (with the date
/// when wide): one zone per screen, whatever zone the schedule fires in.
fn next_fire(m: &Model, t: &Theme, s: &ScheduleRow, wide: bool) -> Line<'static> {
    if let Some(o) = &s.overdue {
        // A fire passed and no scheduler was alive to evaluate it.
        let local = o.due.with_timezone(&m.tz);
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
            let local = f.at.with_timezone(&m.tz);
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

/// The worst unresolved state of a schedule, as glyph + words + token, and
/// how many other troubles it has; the words fit in `room` characters (a long
/// gate name is cut before the time it has waited).
pub fn health(m: &Model, s: &ScheduleRow, room: usize) -> (&'static str, String, Token, usize) {
    let h = &s.health;
    let mut found: Vec<(&'static str, String, Token)> = Vec::new();
    if h.dead > 0 {
        found.push(("✗", format!("{} dead", h.dead), Token::Error));
    }
    match s.circuit {
        CircuitState::Open => found.push(("⊘", "circuit open".into(), Token::Error)),
        CircuitState::HalfOpen => found.push(("◐", "circuit half-open".into(), Token::Warn)),
        CircuitState::Closed => {}
    }
    if h.needs_human > 0 {
        found.push(("?", format!("{} needs human", h.needs_human), Token::Warn));
    }
    if s.paused {
        found.push(("‖", "paused".into(), Token::Paused));
    }
    if let Some((gate, since)) = &h.gate_wait {
        let secs = (m.now - *since).num_seconds().max(0);
        // Minutes are enough to say how long a gate has held a window.
        let waited = if (60..3600).contains(&secs) {
            format!("{}m", secs / 60)
        } else {
            duration_short(secs)
        };
        let full = format!("gate {gate} waits {waited}");
        let words = if full.chars().count() <= room {
            full
        } else {
            let name_room = room.saturating_sub(waited.chars().count() + 6).max(4);
            format!("gate {} {waited}", fit(gate, name_room))
        };
        found.push(("◷", words, Token::Gated));
    }
    let more = found.len().saturating_sub(1);
    match found.into_iter().next() {
        Some((g, w, t)) => (g, w, t, more),
        None if s.last.as_ref().is_some_and(|l| l.state == RunState::Running) => {
            ("►", "running".into(), Token::Accent, 0)
        }
        None => ("✓", "ok".into(), Token::Ok, 0),
    }
}

fn health_cell(m: &Model, s: &ScheduleRow, width: usize, t: &Theme) -> Cell<'static> {
    if !s.loaded {
        return Cell::from(Span::styled("…", t.style(Token::Muted)));
    }
    // Room for the words: the glyph and a space, and a ` +N` for the others.
    let (mut glyph, mut words, mut token, more) = health(m, s, width.saturating_sub(2));
    if more > 0 {
        (glyph, words, token, _) = health(m, s, width.saturating_sub(5));
    }
    let more = if more > 0 {
        format!(" +{more}")
    } else {
        String::new()
    };
    let room = width.saturating_sub(2 + more.chars().count());
    Cell::from(Line::from(vec![
        Span::styled(format!("{glyph} {}", fit(&words, room)), t.style(token)),
        Span::styled(more, t.style(Token::Muted)),
    ]))
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
    // Tenant, trigger, circuit and paused get their own columns only where
    // that still leaves the id room (the health column names an open circuit
    // and a pause anyway).
    let wide = area.width >= 150;
    let roomy = area.width >= 90;
    let health_w: u16 = if wide { 30 } else { 22 };
    let next_w: u16 = if roomy { 26 } else { 20 };
    let mut header = vec!["SCHEDULE"];
    let mut fixed: Vec<u16> = Vec::new();
    if wide {
        header.extend(["TENANT"]);
        fixed.push(10);
    }
    header.extend(["HEALTH", "LAST ENDED", "NEXT FIRE"]);
    fixed.extend([health_w, 13, next_w]);
    if wide {
        header.extend(["CIRCUIT", "PAUSED"]);
        fixed.extend([12, 9]);
    }
    // What is left for the id (and, wide, the trigger): borders, the
    // highlight mark and one space between columns are taken first.
    let columns = fixed.len() + if wide { 2 } else { 1 };
    let used: u16 = fixed.iter().sum::<u16>() + 3 + u16::try_from(columns - 1).unwrap_or(0);
    let rest = area.width.saturating_sub(used);
    let longest = rows.iter().map(|s| s.id.chars().count()).max().unwrap_or(8);
    let longest = u16::try_from(longest).unwrap_or(u16::MAX).max(8);
    let (id_w, trigger_w, health_w) = if wide {
        // The id gets what it needs up to two thirds; the trigger the rest.
        let id_w = longest.min(rest * 2 / 3).max(rest.min(8));
        (id_w, rest.saturating_sub(id_w), health_w)
    } else {
        // Room the ids do not need goes to the health words (up to 10 more).
        let spare = rest.saturating_sub(longest + 2).min(10);
        (rest - spare, 0, health_w + spare)
    };
    if !wide {
        fixed[0] = health_w;
    }
    let mut widths = vec![Constraint::Length(id_w)];
    if wide {
        widths.push(Constraint::Length(fixed[0]));
        widths.push(Constraint::Length(trigger_w));
        header.insert(2, "TRIGGER");
        widths.extend(fixed[1..].iter().map(|w| Constraint::Length(*w)));
    } else {
        widths.extend(fixed.iter().map(|w| Constraint::Length(*w)));
    }
    let selected = m.schedules.resolve_names(names(m));
    let visible_rows = list_rows(area);
    let (offset, shown) = drawn(selected, visible_rows);
    let table_rows = rows.iter().skip(offset).take(visible_rows).map(|s| {
        let mut cells = vec![Cell::from(fit(&s.id, usize::from(id_w)))];
        if wide {
            cells.push(Cell::from(fit(&s.tenant, 10)));
            cells.push(Cell::from(Span::styled(
                fit(&s.trigger, usize::from(trigger_w)),
                t.style(Token::Muted),
            )));
        }
        cells.push(health_cell(m, s, usize::from(health_w), t));
        cells.push(match &s.last_terminal {
            _ if !s.loaded => Cell::from(Span::styled("…", t.style(Token::Muted))),
            Some(l) => Cell::from(mark_span(marks::run_state(l.state), t)),
            None => Cell::from(Span::styled("· none", t.style(Token::Muted))),
        });
        cells.push(Cell::from(next_fire(m, t, s, roomy)));
        if wide {
            cells.push(Cell::from(mark_span(marks::circuit(s.circuit), t)));
            cells.push(Cell::from(mark_span(marks::paused(s.paused), t)));
        }
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
