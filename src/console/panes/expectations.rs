//! Rehearsal mode's expectations pane: every expectation of the scenario with
//! its verdict so far — ✓ pass, ✗ FAIL or … pending, glyph, word and colour —
//! and what the last step did.

use super::{mark_span, note_line, pane_block};
use crate::console::app::Model;
use crate::console::format::{fit, local_short};
use crate::console::marks;
use crate::console::rehearsal::RehearsalView;
use crate::console::theme::{Theme, Token};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Rows the pane wants: one per expectation, the last step's lines, borders.
pub fn wanted_height(view: &RehearsalView) -> u16 {
    let (n, happened) = view
        .progress
        .as_ref()
        .map_or((1, 0), |p| (p.verdicts.len().max(1), p.happened.len().min(2)));
    u16::try_from(n + happened + 2).unwrap_or(u16::MAX)
}

pub fn render(m: &Model, view: &RehearsalView, t: &Theme, f: &mut Frame, area: Rect) {
    let (held, broken, pending) = view.tally();
    let title = format!("Expectations  ✓ {held} pass · ✗ {broken} FAIL · … {pending} pending");
    let block = pane_block(title, false, t);
    let inner = block.inner(area);
    let width = usize::from(inner.width);
    let Some(p) = &view.progress else {
        let text = match &view.error {
            Some(e) => format!("✗ {e}"),
            None => format!("loading {}…", view.file),
        };
        f.render_widget(Paragraph::new(note_line(text, t)).block(block), area);
        return;
    };
    let mut lines: Vec<Line<'static>> = Vec::new();
    // What the last step did first (it is what changes at every `n`), in the
    // rows the verdicts leave.
    let room = usize::from(inner.height).saturating_sub(p.verdicts.len().max(1));
    let last: Vec<_> = p.happened.iter().rev().take(room.min(2)).rev().collect();
    for (i, l) in last.iter().enumerate() {
        let lead = if i == 0 { "last step " } else { "          " };
        let who = l
            .schedule
            .as_deref()
            .map(|s| format!("{s}: "))
            .unwrap_or_default();
        // Most descriptions already name what happened; the others get the kind.
        let what = if l.text.contains(l.kind.as_str()) {
            l.text.clone()
        } else {
            format!("{} {}", l.kind, l.text)
        };
        let text = format!("{} {who}{what}", local_short(l.at, m.tz));
        lines.push(Line::from(vec![
            Span::styled(lead, t.style(Token::Muted)),
            Span::styled(fit(&text, width.saturating_sub(10)), t.style(Token::Accent)),
        ]));
    }
    if p.verdicts.is_empty() {
        lines.push(note_line("the scenario states no expectation", t));
    }
    for v in &p.verdicts {
        let mark = marks::expectation(v.passed);
        let head = mark_span(mark, t);
        let used = head.width() + 2;
        let detail = if v.detail.is_empty() {
            String::new()
        } else {
            format!(" — {}", v.detail)
        };
        let text_w = width.saturating_sub(used);
        let text = fit(&v.text, text_w);
        let rest = fit(&detail, text_w.saturating_sub(text.chars().count()));
        lines.push(Line::from(vec![
            Span::raw(" "),
            head,
            Span::raw(" "),
            Span::styled(
                text,
                if v.passed == Some(false) {
                    t.style(Token::Error)
                } else {
                    t.style(Token::Fg)
                },
            ),
            Span::styled(rest, t.style(Token::Muted)),
        ]));
    }
    f.render_widget(Paragraph::new(lines).block(block), area);
}
