//! The run timeline: one lane per schedule, one cell per recent window (newest
//! on the right) marked by the run's state glyph and colour, like Airflow's
//! grid; below it the selected run and its events in order.
//!
//! The selection is a lane and a run id, so the same window stays selected
//! while new windows push it to the left.

use super::{RowKey, filter_match_in, glyph_span, note_line, pane_block, run_matches};
use crate::console::app::{GridCursor, Model};
use crate::console::format::{event_summary, event_time, fit, local_short};
use crate::console::keymap::Action;
use crate::console::marks;
use crate::console::snapshot::Lane;
use crate::console::theme::{Theme, Token};
use crate::store::{Run, RunState};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Width of a lane's schedule label.
const LABEL: usize = 16;
/// Each cell: the glyph and a space.
const CELL: usize = 2;

fn lanes(m: &Model) -> impl Iterator<Item = &Lane> {
    m.snapshot.lanes.iter().filter(|l| {
        filter_match_in(&m.filter, &[&l.schedule, &l.tenant], Some(&l.tenant))
            || l.runs.iter().any(|r| run_matches(&m.filter, r))
    })
}

/// The listed lanes (schedule ids), in order.
pub fn lane_keys(m: &Model) -> Vec<RowKey> {
    lanes(m).map(|l| RowKey::Name(l.schedule.clone())).collect()
}

/// The listed lanes' schedule ids, borrowed (see [`super::ListCursor::resolve_names`]).
pub fn lane_names(m: &Model) -> impl Iterator<Item = &str> {
    lanes(m).map(|l| l.schedule.as_str())
}

fn selected_lane(m: &Model) -> Option<&Lane> {
    let name = m.timeline.lane.selected_name(|| lane_names(m))?;
    m.snapshot.lane(name)
}

/// The index (oldest first) of the selected window in `lane`.
fn cell_index(c: &GridCursor, lane: &Lane) -> Option<usize> {
    if lane.runs.is_empty() {
        return None;
    }
    if let Some(id) = c.run
        && let Some(i) = lane.runs.iter().position(|r| r.id == id)
    {
        return Some(i);
    }
    let last = lane.runs.len() - 1;
    Some(last - c.from_newest.min(last))
}

/// The selected run.
pub fn selected_run(m: &Model) -> Option<&Run> {
    let lane = selected_lane(m)?;
    cell_index(&m.timeline, lane).map(|i| &lane.runs[i])
}

fn select_cell(c: &mut GridCursor, lane: &Lane, i: usize) {
    if let Some(r) = lane.runs.get(i) {
        c.run = Some(r.id);
        c.from_newest = lane.runs.len() - 1 - i;
    } else {
        c.run = None;
    }
}

/// Re-anchors the cursor after new data: same lane, same run if still shown.
pub fn settle(m: &mut Model) {
    let keys = lane_keys(m);
    m.timeline.lane.settle(&keys);
    let Some(name) = m
        .timeline
        .lane
        .selected(&keys)
        .and_then(|k| k.name())
        .map(str::to_string)
    else {
        return;
    };
    if let Some(lane) = m.snapshot.lane(&name) {
        let mut c = m.timeline.clone();
        if let Some(i) = cell_index(&c, lane) {
            select_cell(&mut c, lane, i);
        }
        m.timeline = c;
    }
}

/// Moves between lanes (up/down, keeping the column) and windows (left/right).
pub fn navigate(m: &mut Model, action: Action, page: usize) {
    let mut c = m.timeline.clone();
    c.lane.navigate_names(|| lane_names(m), action, page);
    let Some(lane) = c
        .lane
        .selected_name(|| lane_names(m))
        .and_then(|n| m.snapshot.lane(n))
    else {
        m.timeline = c;
        return;
    };
    match action {
        Action::Left | Action::Right => {
            if let Some(i) = cell_index(&c, lane) {
                let next = if action == Action::Left {
                    i.saturating_sub(1)
                } else {
                    (i + 1).min(lane.runs.len() - 1)
                };
                select_cell(&mut c, lane, next);
            }
        }
        _ => {
            // Another lane: keep the column, not the run (it belongs to the old lane).
            if !lane.runs.is_empty() {
                let last = lane.runs.len() - 1;
                let i = last - c.from_newest.min(last);
                select_cell(&mut c, lane, i);
            } else {
                c.run = None;
            }
        }
    }
    m.timeline = c;
}

fn legend(t: &Theme) -> Line<'static> {
    let mut spans = Vec::new();
    for s in RunState::ALL {
        let mk = marks::run_state(s);
        spans.push(Span::styled(
            format!("{} {} ", mk.glyph, mk.word),
            t.style(mk.token),
        ));
    }
    Line::from(spans)
}

/// One lane: the label, then a cell per window. The selected cell is
/// bracketed (`✓[✗]»`) as well as highlighted, so it shows without colour; the
/// brackets take the separating spaces, so cells stay aligned across lanes.
fn lane_line(
    m: &Model,
    t: &Theme,
    lane: &Lane,
    selected: bool,
    cells: usize,
    focused: bool,
) -> Line<'static> {
    let label_style = if selected && focused {
        t.style(Token::Focus)
    } else if selected {
        t.style(Token::Accent)
    } else {
        t.style(Token::Fg)
    };
    let mut spans = vec![Span::styled(
        format!("{:<w$}", fit(&lane.schedule, LABEL), w = LABEL),
        label_style,
    )];
    let n = lane.runs.len();
    let sel = if selected {
        cell_index(&m.timeline, lane)
    } else {
        None
    };
    // The newest `cells` windows, shifted left if the selection is older.
    let end = match sel {
        Some(i) if n - i > cells => i + cells,
        _ => n,
    };
    let start = end.saturating_sub(cells);
    if start == end {
        let note = if lane.loaded { " no runs yet" } else { " …" };
        spans.push(Span::styled(note, t.style(Token::Muted)));
        return Line::from(spans);
    }
    let bracket = t.style(Token::Focus);
    for (i, r) in lane.runs.iter().enumerate().take(end).skip(start) {
        let sep = if Some(i) == sel {
            Span::styled("[", bracket)
        } else if i > 0 && Some(i - 1) == sel {
            Span::styled("]", bracket)
        } else {
            Span::raw(" ")
        };
        spans.push(sep);
        let mut g = glyph_span(marks::run_state(r.state), t);
        if Some(i) == sel {
            g = g.patch_style(t.style(Token::Selection));
        }
        spans.push(g);
    }
    if sel == Some(end - 1) {
        spans.push(Span::styled("]", bracket));
    }
    Line::from(spans)
}

/// The selected run in one line: id, schedule, window, state word, attempts.
pub fn run_summary(m: &Model, t: &Theme, run: &Run) -> Line<'static> {
    let mk = marks::run_state(run.state);
    let mut spans = vec![
        Span::styled(format!("#{} ", run.id), t.style(Token::Accent)),
        Span::raw(format!("{} {} · ", run.schedule, run.window_key)),
        Span::styled(format!("{} {}", mk.glyph, mk.word), t.style(mk.token)),
        Span::raw(format!(
            " · attempt {} · {} · due {}",
            run.attempts,
            run.reason.as_str(),
            local_short(run.due_at, m.tz)
        )),
    ];
    if let Some(r) = &run.state_reason {
        let r = crate::time::in_zone(r, m.tz);
        spans.push(Span::styled(format!(" · {r}"), t.style(Token::Muted)));
    }
    Line::from(spans)
}

pub fn render(m: &Model, t: &Theme, f: &mut Frame, area: Rect, focused: bool) {
    let shown: Vec<&Lane> = lanes(m).collect();
    let block = pane_block(format!("2 Timeline ({} schedules)", shown.len()), focused, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    if !m.loaded || shown.is_empty() {
        let text = if !m.loaded {
            "loading…"
        } else {
            "no schedule matches"
        };
        f.render_widget(Paragraph::new(note_line(text, t)), inner);
        return;
    }
    let with_legend = inner.height >= 8;
    let grid_rows = u16::try_from(shown.len())
        .unwrap_or(u16::MAX)
        .min((inner.height.saturating_sub(u16::from(with_legend))) / 2)
        .max(1);
    let [legend_area, grid, summary, events] = Layout::vertical([
        Constraint::Length(u16::from(with_legend)),
        Constraint::Length(grid_rows),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(inner);
    if with_legend {
        f.render_widget(Paragraph::new(legend(t)), legend_area);
    }
    let sel_lane = m
        .timeline
        .lane
        .resolve_names(shown.iter().map(|l| l.schedule.as_str()));
    let cells = (usize::from(grid.width).saturating_sub(LABEL + 1) / CELL).max(1);
    let rows = usize::from(grid.height);
    let offset = super::scroll_offset(sel_lane, rows);
    let lines: Vec<Line> = shown
        .iter()
        .enumerate()
        .skip(offset)
        .take(rows)
        .map(|(i, lane)| lane_line(m, t, lane, Some(i) == sel_lane, cells, focused))
        .collect();
    f.render_widget(Paragraph::new(lines), grid);

    let Some(run) = selected_run(m) else {
        f.render_widget(Paragraph::new(note_line("no run selected", t)), summary);
        return;
    };
    f.render_widget(Paragraph::new(run_summary(m, t, run)), summary);
    render_events(m, t, f, events, run.id);
}

/// The selected run's events, oldest first, the newest ones that fit.
pub fn render_events(m: &Model, t: &Theme, f: &mut Frame, area: Rect, run: i64) {
    if area.height == 0 {
        return;
    }
    let Some(focus) = m.snapshot.focus_of(run) else {
        f.render_widget(Paragraph::new(note_line("loading events…", t)), area);
        return;
    };
    if focus.events.is_empty() {
        f.render_widget(Paragraph::new(note_line("no events for this run", t)), area);
        return;
    }
    let rows = usize::from(area.height);
    let skip = focus.events.len().saturating_sub(rows);
    let lines: Vec<Line> = focus
        .events
        .iter()
        .skip(skip)
        .map(|e| {
            let mk = marks::event_kind(&e.kind);
            Line::from(vec![
                Span::styled(
                    format!("{} ", event_time(e.at, m.now, m.tz)),
                    t.style(Token::Muted),
                ),
                Span::styled(
                    format!("{} {:<16} ", mk.glyph, fit(&e.kind, 16)),
                    t.style(mk.token),
                ),
                Span::raw(event_summary(e, m.tz)),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines), area);
}
