//! Gates: why the selected run is (or is not) running, layer by layer — the
//! time layer (its window), the readiness gates of the latest decision (glyph,
//! name, result, reason, duration, checked at) and the switches that held it.
//!
//! The decision itself is read from the run's trace by
//! [`crate::trace::latest_decision`] (loaded with the snapshot); this pane
//! only lays it out.

use super::{mark_span, note_line, pane_block};
use crate::console::app::Model;
use crate::console::format::{countdown, event_time, fit, relative};
use crate::console::marks;
use crate::console::theme::{Theme, Token};
use crate::store::Run;
use crate::time::in_zone;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

pub use crate::trace::{DecisionView, GateRow, SwitchHold, latest_decision};

/// `06-08 09:00–10:00` (or both dates when the window spans days) in `m.tz`.
fn window_text(m: &Model, run: &Run) -> String {
    let (start, end) = (
        run.window_start.with_timezone(&m.tz),
        run.window_end.with_timezone(&m.tz),
    );
    if start.date_naive() == end.date_naive() {
        format!("{}–{}", start.format("%m-%d %H:%M"), end.format("%H:%M"))
    } else {
        format!("{} – {}", start.format("%m-%d %H:%M"), end.format("%m-%d %H:%M"))
    }
}

/// The time layer now: is the run's window open?
fn time_layer(m: &Model, run: &Run) -> (String, Token) {
    let (start, end) = (run.window_start, run.window_end);
    if m.now < start {
        (
            format!("◷ not yet: opens {}", relative(m.now, start)),
            Token::Gated,
        )
    } else if m.now < end {
        (format!("✓ open, closes in {}", countdown(m.now, end)), Token::Ok)
    } else {
        (format!("× closed {}", relative(m.now, end)), Token::Muted)
    }
}

fn label(text: &str, t: &Theme) -> Span<'static> {
    Span::styled(format!("{text:<10}"), t.style(Token::Muted))
}

/// Every line of the pane for `run`.
pub fn lines(m: &Model, t: &Theme, run: &Run, view: Option<&DecisionView>) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mk = marks::run_state(run.state);
    out.push(Line::from(vec![
        Span::styled(format!("#{} ", run.id), t.style(Token::Accent)),
        Span::raw(format!("{} {} · ", run.schedule, run.window_key)),
        Span::styled(format!("{} {}", mk.glyph, mk.word), t.style(mk.token)),
    ]));
    let (now_text, now_token) = time_layer(m, run);
    out.push(Line::from(vec![
        label("time", t),
        Span::raw(format!("window {} ", window_text(m, run))),
        Span::styled(now_text, t.style(now_token)),
    ]));
    let Some(view) = view else {
        out.push(note_line("no decision recorded for this run yet", t));
        return out;
    };
    if let Some(tv) = &view.time {
        out.push(Line::from(vec![
            label("", t),
            Span::styled(
                format!("engine said: {}", in_zone(tv, m.tz)),
                t.style(Token::Muted),
            ),
        ]));
    }
    match (&view.verdict, view.at) {
        (Some(v), Some(at)) => {
            let mut spans = vec![label("decision", t), mark_span(marks::verdict(v), t)];
            spans.push(Span::styled(
                format!(
                    " @{} ({})",
                    event_time(at, m.now, m.tz).trim_start(),
                    relative(m.now, at)
                ),
                t.style(Token::Muted),
            ));
            out.push(Line::from(spans));
            if let Some(r) = &view.reason {
                out.push(Line::from(vec![label("", t), Span::raw(in_zone(r, m.tz))]));
            }
        }
        _ => out.push(Line::from(vec![
            label("decision", t),
            Span::styled("none yet (gates still being checked)", t.style(Token::Muted)),
        ])),
    }
    out.push(Line::from(""));
    out.push(Line::from(Span::styled(
        format!("GATES ({}, in order)", view.gates.len()),
        t.style(Token::Muted),
    )));
    if view.gates.is_empty() {
        out.push(note_line("  no gate was checked", t));
    }
    let name_w = view
        .gates
        .iter()
        .map(|g| g.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 28);
    for g in &view.gates {
        let mk = marks::gate_result(&g.result);
        let ms = g.ms.map_or("-".to_string(), |ms| format!("{ms} ms"));
        out.push(Line::from(vec![
            Span::styled(format!("{} ", mk.glyph), t.style(mk.token)),
            Span::raw(format!("{:<name_w$}  ", fit(&g.name, name_w))),
            Span::styled(format!("{:<5}", mk.word), t.style(mk.token)),
            Span::styled(
                format!(" {ms:>6} @{}", event_time(g.at, m.now, m.tz).trim_start()),
                t.style(Token::Muted),
            ),
        ]));
        if !g.reason.is_empty() {
            out.push(Line::from(format!("    {}", in_zone(&g.reason, m.tz))));
        }
    }
    out.push(Line::from(""));
    let held: Vec<&SwitchHold> = view.switches.iter().filter(|s| s.held).collect();
    if held.is_empty() {
        out.push(Line::from(vec![
            label("switches", t),
            Span::styled("✓ none held this run", t.style(Token::Ok)),
        ]));
    } else {
        out.push(Line::from(Span::styled(
            "SWITCHES THAT HELD IT",
            t.style(Token::Muted),
        )));
        for h in held {
            out.push(Line::from(vec![
                Span::styled(format!("‖ {:<12} held", fit(&h.name, 12)), t.style(Token::Paused)),
                Span::styled(
                    format!(" @{}", event_time(h.at, m.now, m.tz).trim_start()),
                    t.style(Token::Muted),
                ),
            ]));
            if !h.reason.is_empty() {
                out.push(Line::from(format!("    {}", in_zone(&h.reason, m.tz))));
            }
        }
    }
    out
}

pub fn render(m: &Model, t: &Theme, f: &mut Frame, area: Rect, focused: bool) {
    let block = pane_block("3 Gates (selected run)".to_string(), focused, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let Some(run_id) = m.focus_run() else {
        f.render_widget(
            Paragraph::new(note_line("select a run (timeline, queues) to see its gates", t)),
            inner,
        );
        return;
    };
    let Some(focus) = m.snapshot.focus_of(run_id) else {
        f.render_widget(
            Paragraph::new(note_line(format!("loading run #{run_id}…"), t)),
            inner,
        );
        return;
    };
    let text = lines(m, t, &focus.run, focus.decision.as_ref());
    let max = super::wrapped_height(&text, inner.width).saturating_sub(inner.height);
    f.render_widget(
        Paragraph::new(text)
            .wrap(Wrap { trim: false })
            .scroll((m.gates_scroll.min(max), 0)),
        inner,
    );
}
