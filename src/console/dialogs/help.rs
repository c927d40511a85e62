//! The help overlay (`?`), generated from the keymap table plus the legend of
//! state glyphs, so it always says what the keys really do.

use super::centered;
use crate::console::marks;
use crate::console::theme::{Theme, Token};
use crate::console::{command, keymap};
use crate::store::RunState;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

/// The dialog grammar in words, above the dialog keys.
const DIALOG_GRAMMAR: [&str; 2] = [
    "Focus starts in the first box, else on Cancel. Enter in a box moves on",
    "and never confirms; on the buttons (Cancel first) Enter presses.",
];

/// Spaces between the key column and the descriptions.
const GAP: usize = 2;

/// `:verb ARG` as the help lists a command.
fn usage(c: &command::CommandDoc) -> String {
    if c.arg.is_empty() {
        format!(":{}", c.verb)
    } else {
        format!(":{} {}", c.verb, c.arg)
    }
}

/// The key column's width: the longest key text (or command usage) listed,
/// and a gap, so no key runs into its description.
fn key_column(
    sections: &[(keymap::Layer, Vec<&keymap::Binding>)],
    commands: &[&command::CommandDoc],
) -> usize {
    let keys = sections
        .iter()
        .flat_map(|(_, bs)| bs.iter().map(|b| b.keys_label().chars().count()));
    let usages = commands.iter().map(|c| usage(c).chars().count());
    keys.chain(usages).max().unwrap_or(0) + GAP
}

/// Every line of the help text.
/// `counts`: the runs in the store by state, all time (the header counts
/// finished runs of the last 24 hours only).
pub fn lines(read_only: bool, counts: &[(RunState, u64)], theme: &Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let sections = keymap::help_sections(read_only);
    let commands: Vec<&command::CommandDoc> = command::COMMANDS
        .iter()
        .filter(|c| !(read_only && c.operator))
        .collect();
    let col = key_column(&sections, &commands);
    if read_only {
        out.push(Line::from(Span::styled(
            "read-only console: operator actions are hidden",
            theme.style(Token::Warn),
        )));
        out.push(Line::from(""));
    }
    for (layer, bindings) in sections {
        out.push(Line::from(Span::styled(
            layer.title().to_string(),
            theme.style(Token::Accent),
        )));
        if layer == keymap::Layer::Dialog {
            // The one grammar every dialog speaks (its rows follow).
            for l in DIALOG_GRAMMAR {
                out.push(Line::from(Span::styled(
                    format!("  {l}"),
                    theme.style(Token::Muted),
                )));
            }
        }
        for b in bindings {
            let mut spans = vec![
                Span::styled(format!("  {:<col$}", b.keys_label()), theme.style(Token::Focus)),
                Span::styled(b.description.to_string(), theme.style(Token::Fg)),
            ];
            if b.dangerous {
                spans.push(Span::styled("  ! confirms", theme.style(Token::Error)));
            }
            out.push(Line::from(spans));
        }
        out.push(Line::from(""));
    }
    out.push(Line::from(Span::styled(
        "Commands (:)".to_string(),
        theme.style(Token::Accent),
    )));
    for c in commands {
        out.push(Line::from(vec![
            Span::styled(format!("  {:<col$}", usage(c)), theme.style(Token::Focus)),
            Span::styled(c.description.to_string(), theme.style(Token::Fg)),
        ]));
    }
    out.push(Line::from(""));
    out.push(Line::from(Span::styled(
        "Run states, with all-time counts (the header: waiting now, and the last 24 h)".to_string(),
        theme.style(Token::Accent),
    )));
    for chunk in RunState::ALL.chunks(4) {
        let mut spans = vec![Span::raw("  ")];
        for s in chunk {
            let m = marks::run_state(*s);
            let n = counts.iter().find(|(st, _)| st == s).map_or(0, |(_, n)| *n);
            spans.push(Span::styled(
                format!("{} {:<12}{:>5}  ", m.glyph, m.word, n),
                theme.style(m.token),
            ));
        }
        out.push(Line::from(spans));
    }
    out
}

/// The overlay in `screen` (below the header), scrolled by `scroll` lines.
pub fn render(
    scroll: u16,
    read_only: bool,
    counts: &[(RunState, u64)],
    theme: &Theme,
    frame: &mut Frame,
    screen: Rect,
) {
    let text = lines(read_only, counts, theme);
    // As wide as its longest line (and the borders), so nothing is cut where
    // the screen has room.
    let widest = text.iter().map(Line::width).max().unwrap_or(0) + 2;
    let area = centered(
        screen,
        u16::try_from(widest.max(76)).unwrap_or(u16::MAX),
        screen.height,
    );
    frame.render_widget(Clear, area);
    let visible = area.height.saturating_sub(2);
    let max = u16::try_from(text.len())
        .unwrap_or(u16::MAX)
        .saturating_sub(visible);
    let block = Block::bordered()
        .border_style(theme.style(Token::Focus))
        .title(Span::styled(" Help — Esc closes ", theme.style(Token::Focus)))
        .style(theme.base());
    frame.render_widget(
        Paragraph::new(text).block(block).scroll((scroll.min(max), 0)),
        area,
    );
}

/// The `:log` overlay: the scheduler log's last lines in `screen`, scrolled
/// by `scroll` lines (clamped, so a scroll past the end shows the newest).
pub fn render_log(
    tail: &crate::console::app::LogTail,
    scroll: u16,
    theme: &Theme,
    frame: &mut Frame,
    screen: Rect,
) {
    let area = centered(screen, screen.width, screen.height);
    frame.render_widget(Clear, area);
    let text: Vec<Line<'static>> = if tail.lines.is_empty() {
        vec![Line::from(Span::styled(
            "(the log is empty)",
            theme.style(Token::Muted),
        ))]
    } else {
        tail.lines
            .iter()
            .map(|l| {
                let token = if l.contains(" WARN ") || l.contains("\"level\":\"WARN\"") {
                    Token::Warn
                } else if l.contains(" ERROR ") || l.contains("\"level\":\"ERROR\"") {
                    Token::Error
                } else {
                    Token::Fg
                };
                Line::from(Span::styled(l.clone(), theme.style(token)))
            })
            .collect()
    };
    let visible = area.height.saturating_sub(2);
    let max = u16::try_from(text.len())
        .unwrap_or(u16::MAX)
        .saturating_sub(visible);
    let block = Block::bordered()
        .border_style(theme.style(Token::Focus))
        .title(Span::styled(
            format!(" Log {} — Esc closes ", tail.path),
            theme.style(Token::Focus),
        ))
        .style(theme.base());
    frame.render_widget(
        Paragraph::new(text).block(block).scroll((scroll.min(max), 0)),
        area,
    );
}
