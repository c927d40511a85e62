//! Drawing the model: a pure function of the model and the theme.
//!
//! ```text
//! header   mode · kill switch · clock and zone · run counts by state
//! banner   rehearsal mode only: scenario, virtual clock, step, play state
//! tabs     1 Schedules 2 Timeline 3 Gates 4 Retries 5 Approvals 6 Backfill 7 Switches
//! body     the focused pane (wide terminals: plus gates and switches beside it)
//!          or the run detail; in rehearsal mode the expectations below
//! bar      filter / command input, or the status line
//! footer   the keys that work here (from the keymap table)
//! ```
//! Below [`MIN_WIDTH`]×[`MIN_HEIGHT`] only the kill switch state and a
//! "terminal too small" note are drawn.

use super::app::{Bar, Level, Model, Overlay, Screen};
use super::detail;
use super::dialogs::help;
use super::dialogs::quit::QuitPhase;
use super::keymap;
use super::marks;
use super::panes::{self, Pane};
use super::rehearsal::RehearsalView;
use super::theme::{Theme, Token};
use crate::store::RunState;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 15;
/// From this size on, gates and switches are shown beside the focused pane.
pub const WIDE_WIDTH: u16 = 140;
pub const WIDE_HEIGHT: u16 = 36;

/// Counts in the header, most urgent first: the states runs wait in now
/// (whatever their age)…
const NOW_ORDER: [RunState; 4] = [
    RunState::Running,
    RunState::NeedsHuman,
    RunState::RetryWait,
    RunState::Pending,
];
/// …then how runs ended in the last 24 hours (all time: in the help).
const RECENT_ORDER: [RunState; 6] = [
    RunState::Dead,
    RunState::Failed,
    RunState::Missed,
    RunState::Succeeded,
    RunState::Skipped,
    RunState::Expired,
];

pub fn view(m: &Model, t: &Theme, f: &mut Frame) {
    let area = f.area();
    f.render_widget(Block::default().style(t.base()), area);
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(m, t, f, area);
        return;
    }
    let banner_rows = u16::from(m.rehearsal.is_some());
    let [header, banner, tabs, body, bar, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(banner_rows),
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(header_line(m, t, header.width)), header);
    if let Some(r) = &m.rehearsal {
        let style = t
            .style(Token::Warn)
            .add_modifier(Modifier::REVERSED | Modifier::BOLD);
        f.render_widget(
            Paragraph::new(banner_line(m, r, banner.width)).style(style),
            banner,
        );
    }
    f.render_widget(Paragraph::new(tabs_line(m, t, tabs.width)), tabs);
    match (&m.screen, &m.rehearsal) {
        (Screen::Main, Some(r)) => {
            let want = panes::expectations::wanted_height(r);
            let exp_h = want.min(body.height * 2 / 5).max(3.min(body.height));
            let [top, bottom] = Layout::vertical([Constraint::Min(0), Constraint::Length(exp_h)]).areas(body);
            main_body(m, t, f, top);
            panes::expectations::render(m, r, t, f, bottom);
        }
        (Screen::Main, None) => main_body(m, t, f, body),
        (Screen::Detail(d), _) => detail::render(m, d, t, f, body),
    }
    f.render_widget(Paragraph::new(bar_line(m, t)), bar);
    f.render_widget(Paragraph::new(footer_line(m, t, footer.width)), footer);
    // Overlays never cover the header: the kill switch state stays visible.
    let below_header = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    match &m.overlay {
        Overlay::None => {}
        Overlay::Help { scroll } => {
            help::render(*scroll, m.read_only, &m.snapshot.counts, t, f, below_header)
        }
        Overlay::Log { tail, scroll } => help::render_log(tail, *scroll, t, f, below_header),
        Overlay::Dialog(d) => d.render(t, f, below_header),
        Overlay::Quit(d) => d.render(&m.own_attempts(), m.wall, t, f, below_header),
    }
}

/// The kill switch mark: always drawn, whatever the size.
fn kill_span(m: &Model, t: &Theme) -> Span<'static> {
    let mk = marks::kill(m.snapshot.kill_on());
    let style = if m.snapshot.kill_on() {
        t.style(mk.token)
            .add_modifier(Modifier::BOLD | Modifier::REVERSED)
    } else {
        t.style(mk.token)
    };
    Span::styled(format!("{} {}", mk.glyph, mk.word), style)
}

fn too_small(m: &Model, t: &Theme, f: &mut Frame, area: Rect) {
    let mut lines = vec![Line::from(kill_span(m, t))];
    if m.rehearsal.is_some() {
        lines.push(Line::from(Span::styled(
            "REHEARSAL (virtual clock)",
            t.style(Token::Warn)
                .add_modifier(Modifier::REVERSED | Modifier::BOLD),
        )));
    }
    // A quit in progress stays visible, counting down, at any size.
    if let Overlay::Quit(q) = &m.overlay {
        let n = m.own_attempts().len();
        let text = match (&q.phase, q.seconds_left(m.wall)) {
            (QuitPhase::Ask(b), _) => format!("quit? {n} running · {} (←/→ Enter, Esc)", b.label()),
            (QuitPhase::Stopping { now: false, .. }, Some(left)) => {
                format!(
                    "quitting: {n} running, {} left",
                    super::format::duration_short(left)
                )
            }
            _ => format!("quitting: stopping {n} running"),
        };
        lines.push(Line::from(Span::styled(text, t.style(Token::Warn))));
    }
    lines.extend([
        Line::from(Span::styled(
            format!("terminal too small (need {MIN_WIDTH}x{MIN_HEIGHT})"),
            t.style(Token::Warn),
        )),
        Line::from(Span::styled(
            format!("now {}x{}; q quits", area.width, area.height),
            t.style(Token::Muted),
        )),
    ]);
    f.render_widget(Paragraph::new(lines), area);
}

/// Rehearsal mode, unmistakable: the scenario, the virtual clock, how far it
/// got, whether it plays, and the expectations at a glance.
fn banner_line(m: &Model, r: &RehearsalView, w: u16) -> Line<'static> {
    let w = usize::from(w);
    let Some(p) = &r.progress else {
        let what = match &r.error {
            Some(_) => format!("{} did not start", r.file),
            None => format!("loading {}…", r.file),
        };
        return Line::from(super::format::fit(&format!(" REHEARSAL · {what}"), w));
    };
    let state = if p.finished {
        "finished".to_string()
    } else if r.playing {
        format!("► playing {}/s", r.per_second())
    } else {
        format!("‖ paused ({}/s)", r.per_second())
    };
    let (held, broken, pending) = r.tally();
    let tally = format!("✓{held} ✗{broken} …{pending}");
    let clock = format!(
        "virtual clock {}",
        p.now.with_timezone(&m.tz).format("%Y-%m-%d %H:%M:%S %Z")
    );
    let until = format!("until {}", p.end.with_timezone(&m.tz).format("%m-%d %H:%M"));
    let step = format!("step {}", p.steps);
    // The widest that fits: the header already shows the virtual time.
    let candidates = [
        vec![" REHEARSAL", &p.name, &clock, &step, &state, &tally, &until],
        vec![" REHEARSAL", &p.name, &clock, &step, &state, &tally],
        vec![" REHEARSAL", &p.name, &step, &state, &tally],
    ];
    let text = candidates
        .iter()
        .map(|parts| parts.join(" · "))
        .find(|t| t.chars().count() <= w)
        .unwrap_or_else(|| candidates[2].join(" · "));
    Line::from(super::format::fit(&text, w))
}

fn width(spans: &[Span]) -> usize {
    spans.iter().map(Span::width).sum()
}

/// The mode with the registry's word on it: `LIVE · 2 schedulers`, or, in the
/// error style, that none is alive, since when and what fell due since.
fn liveness_span(
    m: &Model,
    t: &Theme,
    l: &crate::console::snapshot::Liveness,
    mode_style: &ratatui::style::Style,
    wide: bool,
) -> Span<'static> {
    if l.alive > 0 {
        let noun = if l.alive == 1 { "scheduler" } else { "schedulers" };
        let mut text = format!(" {} · {} {noun} ", m.mode_label, l.alive);
        // Config changes that have not reached every scheduler yet.
        let older = l.on_older_config;
        if older > 0 {
            text.push_str(&format!("· {older} on an older config "));
        }
        if let Some(v) = l.config_waiting {
            text.push_str(&format!("· config v{v} waits for approval "));
        }
        let style = if older > 0 || l.config_waiting.is_some() {
            t.style(Token::Warn)
                .add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            *mode_style
        };
        return Span::styled(text, style);
    }
    let seen = l
        .last_seen
        .map(|at| at.with_timezone(&m.tz).format("%H:%M:%S").to_string());
    let text = match (seen, wide) {
        (Some(at), true) => format!(
            " NO SCHEDULER ALIVE (last seen {at}, {} windows due since) ",
            l.due_since
        ),
        (Some(at), false) => format!(" NO SCHEDULER ALIVE (seen {at}, {} due) ", l.due_since),
        (None, _) => " NO SCHEDULER ALIVE ".to_string(),
    };
    Span::styled(
        text,
        t.style(Token::Error)
            .add_modifier(Modifier::BOLD | Modifier::REVERSED),
    )
}

fn header_line(m: &Model, t: &Theme, w: u16) -> Line<'static> {
    let w = usize::from(w);
    let wide = w >= usize::from(WIDE_WIDTH);
    let mode_style = if m.mode_label.eq_ignore_ascii_case("live") {
        t.style(Token::Accent)
    } else {
        t.style(Token::Warn)
            .add_modifier(Modifier::BOLD | Modifier::REVERSED)
    };
    let mut spans = match m.snapshot.liveness.as_ref().filter(|_| m.rehearsal.is_none()) {
        Some(l) => vec![liveness_span(m, t, l, &mode_style, wide)],
        None => vec![Span::styled(format!(" {} ", m.mode_label), mode_style)],
    };
    if m.read_only {
        spans.push(Span::styled("READ-ONLY ", t.style(Token::Warn)));
    }
    spans.push(Span::raw("│ "));
    spans.push(kill_span(m, t));
    spans.push(Span::raw(" │ "));
    let clock = if w >= 100 {
        super::format::clock(m.now, m.tz)
    } else {
        m.now.with_timezone(&m.tz).format("%H:%M:%S %Z").to_string()
    };
    spans.push(Span::raw(clock));
    if m.rehearsal.is_some() {
        spans.push(Span::styled(" virtual", t.style(Token::Warn)));
    }
    spans.push(Span::raw(" │"));
    if !m.loaded {
        spans.push(Span::styled(" loading…", t.style(Token::Muted)));
        return Line::from(spans);
    }
    let count =
        |list: &[(RunState, u64)], st: RunState| list.iter().find(|(s, _)| *s == st).map_or(0, |(_, n)| *n);
    let mut any = false;
    let mut full = false;
    type Counts<'a> = &'a [(RunState, u64)];
    let groups: [(&[RunState], Counts); 2] = [
        (&NOW_ORDER, &m.snapshot.counts),
        (&RECENT_ORDER, &m.snapshot.recent_counts),
    ];
    for (i, (order, list)) in groups.into_iter().enumerate() {
        let mut label = (i == 1).then(|| Span::styled(" · 24h", t.style(Token::Muted)));
        for st in order {
            let n = count(list, *st);
            if n == 0 || full {
                continue;
            }
            let mk = marks::run_state(*st);
            let text = if wide {
                format!(" {} {n} {}", mk.glyph, mk.word)
            } else {
                format!(" {}{n}", mk.glyph)
            };
            let span = Span::styled(text, t.style(mk.token));
            let label_w = label.as_ref().map_or(0, Span::width);
            if width(&spans) + label_w + span.width() > w {
                full = true;
                continue;
            }
            if let Some(l) = label.take() {
                spans.push(l);
            }
            spans.push(span);
            any = true;
        }
    }
    if !any {
        spans.push(Span::styled(" no runs (24h)", t.style(Token::Muted)));
    }
    Line::from(spans)
}

fn tab_count(m: &Model, p: Pane) -> usize {
    match p {
        Pane::Retries => m.snapshot.retries.len(),
        Pane::Approvals => m.snapshot.approvals.len(),
        Pane::Backfill => m.snapshot.backfill.len(),
        _ => 0,
    }
}

/// A tab's alarm badge beside its count: dead letters on the retry tab (`†7`),
/// runs waiting for a human on the approvals tab (`?1`).
fn tab_badge(m: &Model, p: Pane) -> Option<(String, Token)> {
    match p {
        Pane::Retries if !m.snapshot.dead.is_empty() => {
            Some((format!("†{}", m.snapshot.dead.len()), Token::Error))
        }
        Pane::Approvals if !m.snapshot.approvals.is_empty() => {
            Some((format!("?{}", m.snapshot.approvals.len()), Token::Warn))
        }
        _ => None,
    }
}

fn short_title(p: Pane) -> &'static str {
    match p {
        Pane::Schedules => "Sched",
        Pane::Timeline => "Time",
        Pane::Gates => "Gates",
        Pane::Retries => "Retry",
        Pane::Approvals => "Approve",
        Pane::Backfill => "Backfill",
        Pane::Switches => "Switch",
    }
}

fn tabs_line(m: &Model, t: &Theme, w: u16) -> Line<'static> {
    let full = w >= 100;
    let in_detail = matches!(m.screen, Screen::Detail(_));
    let mut spans = Vec::new();
    for p in Pane::ALL {
        let title = if full { p.title() } else { short_title(p) };
        let badge = tab_badge(m, p);
        let n = tab_count(m, p);
        // The approvals count is its badge; the retry tab counts waiting retries.
        let count = if n > 0 && p != Pane::Approvals {
            format!("·{n}")
        } else {
            String::new()
        };
        let style = if p == m.pane && !in_detail {
            t.style(Token::Selection).add_modifier(Modifier::BOLD)
        } else if p == m.pane {
            t.style(Token::Focus)
        } else {
            t.style(Token::Muted)
        };
        spans.push(Span::styled(format!(" {} {title}{count}", p.index() + 1), style));
        if let Some((text, token)) = badge {
            let badge_style = if p == m.pane && !in_detail {
                style
            } else {
                t.style(token).add_modifier(Modifier::BOLD)
            };
            spans.push(Span::styled(format!(" {text}"), badge_style));
        }
        spans.push(Span::styled(" ", style));
    }
    Line::from(spans)
}

fn main_body(m: &Model, t: &Theme, f: &mut Frame, area: Rect) {
    if area.width >= WIDE_WIDTH && area.height + 4 >= WIDE_HEIGHT {
        let side_w = area.width * 2 / 5;
        let [main, side] = Layout::horizontal([Constraint::Min(0), Constraint::Length(side_w)]).areas(area);
        render_pane(m, t, f, m.pane, main, true);
        let others: Vec<Pane> = [Pane::Gates, Pane::Switches, Pane::Approvals]
            .into_iter()
            .filter(|p| *p != m.pane)
            .take(2)
            .collect();
        let [top, bottom] =
            Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(side);
        for (p, a) in others.into_iter().zip([top, bottom]) {
            render_pane(m, t, f, p, a, false);
        }
    } else {
        render_pane(m, t, f, m.pane, area, true);
    }
}

fn render_pane(m: &Model, t: &Theme, f: &mut Frame, pane: Pane, area: Rect, focused: bool) {
    match pane {
        Pane::Schedules => panes::schedules::render(m, t, f, area, focused),
        Pane::Timeline => panes::timeline::render(m, t, f, area, focused),
        Pane::Gates => panes::gates::render(m, t, f, area, focused),
        Pane::Retries => panes::retries::render(m, t, f, area, focused),
        Pane::Approvals => panes::approvals::render(m, t, f, area, focused),
        Pane::Backfill => panes::backfill::render(m, t, f, area, focused),
        Pane::Switches => panes::switches::render(m, t, f, area, focused),
    }
}

fn input_spans(prefix: &str, text: &str, cursor: usize, t: &Theme) -> Vec<Span<'static>> {
    let before: String = text.chars().take(cursor).collect();
    let at: String = text
        .chars()
        .nth(cursor)
        .map_or(" ".to_string(), |c| c.to_string());
    let after: String = text.chars().skip(cursor + 1).collect();
    vec![
        Span::styled(prefix.to_string(), t.style(Token::Accent)),
        Span::raw(before),
        Span::styled(at, t.base().add_modifier(Modifier::REVERSED)),
        Span::raw(after),
    ]
}

fn bar_line(m: &Model, t: &Theme) -> Line<'static> {
    match &m.bar {
        Some(Bar::Filter(l)) => return Line::from(input_spans("/", &l.text, l.cursor, t)),
        Some(Bar::Command(l)) => {
            let mut spans = input_spans(":", &l.text, l.cursor, t);
            // What Tab could complete to: as many as fit.
            if !m.completions.is_empty() {
                spans.push(Span::styled("   Tab:", t.style(Token::Muted)));
                let room = usize::from(m.width).saturating_sub(width(&spans));
                let mut used = 0;
                for (i, c) in m.completions.iter().enumerate() {
                    let left = m.completions.len() - i;
                    let more = format!(" +{left} more");
                    let w = c.chars().count() + 1;
                    if used + w + more.len() > room && left > 1 || used + w > room {
                        spans.push(Span::styled(more, t.style(Token::Muted)));
                        break;
                    }
                    spans.push(Span::styled(format!(" {c}"), t.style(Token::Accent)));
                    used += w;
                }
            }
            return Line::from(spans);
        }
        None => {}
    }
    if let Some(s) = &m.status {
        let (glyph, token) = match s.level {
            Level::Info => ("·", Token::Fg),
            Level::Ok => ("✓", Token::Ok),
            Level::Error => ("✗", Token::Error),
        };
        return Line::from(Span::styled(format!(" {glyph} {}", s.text), t.style(token)));
    }
    if let Some(e) = &m.load_error {
        return Line::from(Span::styled(format!(" ✗ store: {e}"), t.style(Token::Error)));
    }
    if !m.filter.is_empty() {
        return Line::from(vec![
            Span::styled(" filter ", t.style(Token::Muted)),
            Span::styled(m.filter.clone(), t.style(Token::Accent)),
            Span::styled("  (/ edits, Esc clears)", t.style(Token::Muted)),
        ]);
    }
    Line::from("")
}

fn footer_line(m: &Model, t: &Theme, w: u16) -> Line<'static> {
    let w = usize::from(w);
    let mut spans: Vec<Span> = Vec::new();
    for b in keymap::footer(&m.layers(), m.read_only) {
        if !crate::console::app::action_applies(m, b.action) {
            continue;
        }
        let key = Span::styled(format!(" {}", b.keys_label()), t.style(Token::Accent));
        let desc = Span::styled(format!(" {} ", b.description), t.style(Token::Muted));
        if width(&spans) + key.width() + desc.width() > w {
            continue;
        }
        spans.push(key);
        spans.push(desc);
    }
    Line::from(spans)
}
