//! The run detail screen (Enter on a run): the run's summary, then one section
//! at a time — attempts (with approvals), steps, events, the bounded log, the
//! envelope the agent received, and why it ran (or not) as `agentcron explain`
//! tells it. Tab switches section, j/k scroll, Esc returns.

use super::app::{DetailSection, DetailState, Model};
use super::format::{event_summary, event_time, fit, local_short, relative};
use super::marks;
use super::panes::{
    approvals::journal, mark_span, note_line, pane_block, timeline::run_summary, wrapped_height,
};
use super::snapshot::RunDetail;
use super::theme::{Theme, Token};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Tabs, Wrap};

fn attempts(m: &Model, t: &Theme, d: &RunDetail) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if d.attempts.is_empty() {
        out.push(note_line("no attempt started yet", t));
    }
    for a in &d.attempts {
        let ended = a.ended_at.map_or("running".to_string(), |e| {
            format!("ended {}", local_short(e, m.tz))
        });
        let mut spans = vec![
            Span::styled(format!("attempt {:<3}", a.n), t.style(Token::Accent)),
            mark_span(marks::attempt_status(a.status), t),
            Span::raw(format!(
                "  started {}  {ended}  by {}  reason {}",
                local_short(a.started_at, m.tz),
                a.owner,
                a.reason.as_str()
            )),
        ];
        if let Some(c) = a.exit_code {
            spans.push(Span::raw(format!("  exit {c}")));
        }
        if let Some(c) = a.error_class {
            spans.push(Span::styled(format!("  {}", c.as_str()), t.style(Token::Warn)));
        }
        out.push(Line::from(spans));
        let mut facts = vec![
            format!("tokens {}", a.tokens),
            format!("cost {}", crate::core::money::usd_text(a.cost_usd)),
        ];
        if let Some(p) = a.processed {
            facts.push(format!("processed {p}"));
        }
        out.push(Line::from(Span::styled(
            format!("    {}", facts.join(" · ")),
            t.style(Token::Muted),
        )));
        if let Some(s) = &a.summary {
            out.push(Line::from(format!("    summary: {s}")));
        }
        if let Some(msg) = &a.message {
            out.push(Line::from(Span::styled(
                format!("    message: {msg}"),
                t.style(Token::Error),
            )));
        }
    }
    if !d.approvals.is_empty() {
        out.push(Line::from(""));
        out.push(Line::from(Span::styled("approvals", t.style(Token::Muted))));
        for a in &d.approvals {
            let mk = if a.approved {
                Span::styled("✓ approved", t.style(Token::Ok))
            } else {
                Span::styled("✗ rejected", t.style(Token::Error))
            };
            let resume = a
                .resume_after
                .as_ref()
                .map(|s| format!(" (resume after {s})"))
                .unwrap_or_default();
            out.push(Line::from(vec![
                Span::raw("    "),
                mk,
                Span::raw(format!(
                    " by {} {}{resume}: {}",
                    a.actor,
                    local_short(a.at, m.tz),
                    a.reason
                )),
            ]));
        }
    }
    out
}

fn events(m: &Model, t: &Theme, d: &RunDetail) -> Vec<Line<'static>> {
    if d.events.is_empty() {
        return vec![note_line("no events", t)];
    }
    d.events
        .iter()
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
        .collect()
}

fn log(t: &Theme, d: &RunDetail) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for a in &d.attempts {
        out.push(Line::from(Span::styled(
            format!("── attempt {} ({}) ──", a.n, a.status.as_str()),
            t.style(Token::Muted),
        )));
        if a.log.is_empty() {
            out.push(note_line("(empty)", t));
        }
        out.extend(a.log.lines().map(|l| Line::from(l.replace('\t', "    "))));
    }
    if out.is_empty() {
        out.push(note_line("no attempt, no log", t));
    }
    out
}

fn envelope(t: &Theme, d: &RunDetail) -> Vec<Line<'static>> {
    let Some(a) = d.attempts.iter().rev().find(|a| a.envelope.is_some()) else {
        return vec![note_line("no envelope recorded", t)];
    };
    let raw = a.envelope.clone().unwrap_or_default();
    let pretty = serde_json::from_str::<serde_json::Value>(&raw)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or(raw);
    let mut out = vec![Line::from(Span::styled(
        format!("── envelope of attempt {} ──", a.n),
        t.style(Token::Muted),
    ))];
    out.extend(pretty.lines().map(|l| Line::from(l.to_string())));
    out
}

/// The explanation loaded with the detail: headline, then one clause a line.
fn explain(t: &Theme, d: &RunDetail) -> Vec<Line<'static>> {
    let Some(x) = &d.explanation else {
        return vec![note_line("no explanation loaded", t)];
    };
    x.lines()
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            0 => Line::from(Span::styled(l, t.style(Token::Accent))),
            _ if l.starts_with("note: ") => Line::from(Span::styled(l, t.style(Token::Muted))),
            _ => Line::from(l),
        })
        .collect()
}

/// The lines of the current section.
pub fn section_lines(m: &Model, t: &Theme, section: DetailSection, d: &RunDetail) -> Vec<Line<'static>> {
    match section {
        DetailSection::Attempts => attempts(m, t, d),
        DetailSection::Steps => journal(m, t, &d.steps),
        DetailSection::Events => events(m, t, d),
        DetailSection::Log => log(t, d),
        DetailSection::Envelope => envelope(t, d),
        DetailSection::Explain => explain(t, d),
    }
}

pub fn render(m: &Model, state: &DetailState, t: &Theme, f: &mut Frame, area: Rect) {
    let block = pane_block(format!("Run #{} — Esc back", state.run), true, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let Some(d) = &state.detail else {
        let text = match &state.error {
            Some(e) => format!("cannot load run #{}: {e}", state.run),
            None => format!("loading run #{}…", state.run),
        };
        f.render_widget(Paragraph::new(note_line(text, t)), inner);
        return;
    };
    let [summary, error, tabs, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(inner);
    f.render_widget(Paragraph::new(run_summary(m, t, &d.run)), summary);
    let err = match (&d.run.error_class, &d.run.last_error) {
        (None, None) => Line::from(Span::styled(
            format!(
                "window {} – {} · updated {}",
                local_short(d.run.window_start, m.tz),
                local_short(d.run.window_end, m.tz),
                relative(m.now, d.run.updated_at)
            ),
            t.style(Token::Muted),
        )),
        (class, msg) => Line::from(vec![
            Span::styled("error ", t.style(Token::Muted)),
            Span::styled(
                format!(
                    "{}: {}",
                    class.map_or("-", |c| c.as_str()),
                    msg.as_deref().unwrap_or("-")
                ),
                t.style(Token::Error),
            ),
        ]),
    };
    f.render_widget(Paragraph::new(err), error);
    let selected = DetailSection::ALL
        .iter()
        .position(|s| *s == state.section)
        .unwrap_or(0);
    f.render_widget(
        Tabs::new(DetailSection::ALL.iter().map(|s| s.title()))
            .select(selected)
            .style(t.style(Token::Muted))
            .highlight_style(t.style(Token::Focus).patch(t.style(Token::Selection))),
        tabs,
    );
    let lines = section_lines(m, t, state.section, d);
    let max = wrapped_height(&lines, body.width).saturating_sub(body.height);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((state.scroll.min(max), 0)),
        body,
    );
}
