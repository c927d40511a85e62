//! Switches (layer 3): the global kill switch, other named switches, paused
//! schedules, open circuits, maintenance windows, quotas and budgets.

use super::{
    RowKey, filter_match, list_rows, mark_span, note_line, pane_block, scroll_offset, selected_style,
};
use crate::console::app::Model;
use crate::console::format::{local_short, relative};
use crate::console::marks::{self, Mark};
use crate::console::theme::{Theme, Token};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

/// One row of the pane.
struct SwitchRow {
    key: String,
    kind: &'static str,
    name: String,
    mark: Mark,
    detail: String,
}

/// The schedule a row is about (`paused:ID`, `circuit:ID`), for resume and close.
pub fn schedule_of(key: &str) -> Option<&str> {
    key.strip_prefix("paused:")
        .or_else(|| key.strip_prefix("circuit:"))
}

fn rows(m: &Model) -> Vec<SwitchRow> {
    let b = &m.snapshot.switches;
    let mut out = Vec::new();
    let kill_on = m.snapshot.kill_on();
    let kill_detail = match &b.kill {
        Some(s) => format!(
            "{} by {} {}: {}",
            if s.on { "on" } else { "off" },
            s.actor,
            relative(m.now, s.at),
            s.reason
        ),
        None => "never set".to_string(),
    };
    out.push(SwitchRow {
        key: "kill".into(),
        kind: "global",
        name: "kill".into(),
        mark: marks::kill(kill_on),
        detail: kill_detail,
    });
    for s in &b.others {
        out.push(SwitchRow {
            key: format!("switch:{}", s.name),
            kind: "switch",
            name: s.name.clone(),
            mark: marks::switch_on(s.on),
            detail: format!("by {} {}: {}", s.actor, relative(m.now, s.at), s.reason),
        });
    }
    for p in &b.paused {
        out.push(SwitchRow {
            key: format!("paused:{}", p.schedule),
            kind: "paused",
            name: p.schedule.clone(),
            mark: marks::paused(true),
            detail: p.reason.clone().unwrap_or_default(),
        });
    }
    for c in &b.circuits {
        let since = c
            .since
            .map(|s| format!(" since {}", relative(m.now, s)))
            .unwrap_or_default();
        out.push(SwitchRow {
            key: format!("circuit:{}", c.schedule),
            kind: "circuit",
            name: c.schedule.clone(),
            mark: marks::circuit(c.state),
            detail: format!("{} consecutive failures{since}", c.consecutive_failures),
        });
    }
    for w in &b.maintenance {
        let scope = if w.schedules.is_empty() {
            "all schedules".to_string()
        } else {
            w.schedules.join(", ")
        };
        let when = if w.active {
            format!("until {}", local_short(w.to, m.tz))
        } else {
            format!("{} → {}", local_short(w.from, m.tz), local_short(w.to, m.tz))
        };
        out.push(SwitchRow {
            key: format!("maint:{}", w.name),
            kind: "maint",
            name: w.name.clone(),
            mark: if w.active {
                Mark {
                    glyph: "‖",
                    word: "active",
                    token: Token::Paused,
                }
            } else {
                Mark {
                    glyph: "◷",
                    word: "scheduled",
                    token: Token::Muted,
                }
            },
            detail: format!("{when} · {scope} · {}", w.reason),
        });
    }
    for q in &b.quotas {
        out.push(SwitchRow {
            key: format!("quota:{}", q.scope),
            kind: "quota",
            name: q.scope.clone(),
            mark: if q.full {
                Mark {
                    glyph: "■",
                    word: "full",
                    token: Token::Warn,
                }
            } else {
                Mark {
                    glyph: "□",
                    word: "room",
                    token: Token::Ok,
                }
            },
            detail: format!("{} / {}", q.used, q.limit),
        });
    }
    out.retain(|r| r.key == "kill" || filter_match(&m.filter, &[&r.name, r.kind, &r.detail]));
    out
}

pub fn keys(m: &Model) -> Vec<RowKey> {
    rows(m).into_iter().map(|r| RowKey::Name(r.key)).collect()
}

pub fn render(m: &Model, t: &Theme, f: &mut Frame, area: Rect, focused: bool) {
    let block = pane_block("7 Switches".to_string(), focused, t);
    if !m.loaded {
        f.render_widget(Paragraph::new(note_line("loading…", t)).block(block), area);
        return;
    }
    let rows = rows(m);
    let table_rows = rows.iter().map(|r| {
        Row::new(vec![
            Cell::from(Span::styled(r.kind, t.style(Token::Muted))),
            Cell::from(r.name.clone()),
            Cell::from(mark_span(r.mark, t)),
            Cell::from(r.detail.clone()),
        ])
    });
    // The state column is as wide as its widest mark: `○ kill switch off`
    // reads whole.
    let state_w = rows
        .iter()
        .map(|r| mark_span(r.mark, t).width())
        .max()
        .unwrap_or(0)
        .max("STATE".len());
    let widths = [
        Constraint::Length(7),
        Constraint::Fill(3),
        Constraint::Length(u16::try_from(state_w).unwrap_or(u16::MAX)),
        Constraint::Fill(4),
    ];
    let keys: Vec<RowKey> = rows.iter().map(|r| RowKey::Name(r.key.clone())).collect();
    let selected = m.switches.resolve(&keys);
    let mut state = TableState::default()
        .with_selected(selected)
        .with_offset(scroll_offset(selected, list_rows(area)));
    let table = Table::new(table_rows, widths)
        .header(Row::new(["KIND", "NAME", "STATE", "DETAIL"]).style(t.style(Token::Muted)))
        .row_highlight_style(if focused {
            selected_style(t)
        } else {
            t.style(Token::Fg)
        })
        .highlight_symbol("▌")
        .block(block);
    f.render_stateful_widget(table, area, &mut state);
}
