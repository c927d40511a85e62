//! The panes of the main screen, one file each. A pane owns two things: the
//! rows it lists (in display order, filtered — `update` moves cursors over the
//! same list the view draws) and how it draws them.

pub mod approvals;
pub mod backfill;
pub mod expectations;
pub mod gates;
pub mod retries;
pub mod schedules;
pub mod switches;
pub mod timeline;

use super::keymap::Action;
use super::marks::Mark;
use super::theme::{Theme, Token};
use crate::store::Run;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pane {
    Schedules,
    Timeline,
    Gates,
    Retries,
    Approvals,
    Backfill,
    Switches,
}

impl Pane {
    pub const ALL: [Pane; 7] = [
        Pane::Schedules,
        Pane::Timeline,
        Pane::Gates,
        Pane::Retries,
        Pane::Approvals,
        Pane::Backfill,
        Pane::Switches,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Pane::Schedules => "Schedules",
            Pane::Timeline => "Timeline",
            Pane::Gates => "Gates",
            Pane::Retries => "Retries",
            Pane::Approvals => "Approvals",
            Pane::Backfill => "Backfill",
            Pane::Switches => "Switches",
        }
    }

    /// 0-based position; the digit key is `index + 1`.
    pub fn index(self) -> usize {
        Pane::ALL.iter().position(|p| *p == self).unwrap_or(0)
    }

    pub fn next(self) -> Pane {
        Pane::ALL[(self.index() + 1) % Pane::ALL.len()]
    }

    pub fn prev(self) -> Pane {
        Pane::ALL[(self.index() + Pane::ALL.len() - 1) % Pane::ALL.len()]
    }

    /// Panes whose rows are runs (selecting a row selects a run).
    pub fn lists_runs(self) -> bool {
        matches!(
            self,
            Pane::Timeline | Pane::Retries | Pane::Approvals | Pane::Backfill
        )
    }
}

/// What a list row is, so a selection survives data moving under it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RowKey {
    Run(i64),
    Name(String),
}

impl RowKey {
    pub fn run(&self) -> Option<i64> {
        match self {
            RowKey::Run(id) => Some(*id),
            RowKey::Name(_) => None,
        }
    }

    pub fn name(&self) -> Option<&str> {
        match self {
            RowKey::Name(n) => Some(n),
            RowKey::Run(_) => None,
        }
    }
}

/// A selection in a list: the row's key, and its last index (used when the
/// row disappears, so the cursor stays near where it was).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListCursor {
    pub key: Option<RowKey>,
    pub index: usize,
}

impl ListCursor {
    /// The index of the selected row in `keys`: the same key if it is still
    /// there, else the old index clamped; `None` for an empty list.
    pub fn resolve(&self, keys: &[RowKey]) -> Option<usize> {
        if keys.is_empty() {
            return None;
        }
        if let Some(k) = &self.key
            && let Some(i) = keys.iter().position(|x| x == k)
        {
            return Some(i);
        }
        Some(self.index.min(keys.len() - 1))
    }

    /// [`ListCursor::resolve`] over the names of a list, without building its
    /// keys: the schedules list may hold ten thousand rows, and this runs for
    /// every frame.
    pub fn resolve_names<'a>(&self, names: impl Iterator<Item = &'a str>) -> Option<usize> {
        let want = self.key.as_ref().and_then(RowKey::name);
        let mut len = 0;
        for (i, name) in names.enumerate() {
            if Some(name) == want {
                return Some(i);
            }
            len = i + 1;
        }
        (len > 0).then(|| self.index.min(len - 1))
    }

    /// The selected name of a list (see [`ListCursor::resolve_names`]).
    pub fn selected_name<'a, I>(&self, names: impl Fn() -> I) -> Option<&'a str>
    where
        I: Iterator<Item = &'a str>,
    {
        let i = self.resolve_names(names())?;
        names().nth(i)
    }

    /// Moves like [`ListCursor::move_by`], [`ListCursor::top`] and
    /// [`ListCursor::bottom`] do, over the names of a list.
    pub fn navigate_names<'a, I>(&mut self, names: impl Fn() -> I, action: Action, page: usize)
    where
        I: Iterator<Item = &'a str>,
    {
        let Some(cur) = self.resolve_names(names()) else {
            return;
        };
        let last = names().count().saturating_sub(1);
        let next = match action {
            Action::Down => cur + 1,
            Action::Up => cur.saturating_sub(1),
            Action::PageDown => cur + page,
            Action::PageUp => cur.saturating_sub(page),
            Action::Top => 0,
            Action::Bottom => last,
            _ => return,
        }
        .min(last);
        if let Some(name) = names().nth(next) {
            self.key = Some(RowKey::Name(name.to_string()));
            self.index = next;
        }
    }

    /// The selected key in `keys` (see [`ListCursor::resolve`]).
    pub fn selected<'k>(&self, keys: &'k [RowKey]) -> Option<&'k RowKey> {
        self.resolve(keys).map(|i| &keys[i])
    }

    fn set(&mut self, keys: &[RowKey], i: usize) {
        if let Some(k) = keys.get(i) {
            self.key = Some(k.clone());
            self.index = i;
        }
    }

    /// Moves by `delta` rows, stopping at the ends.
    pub fn move_by(&mut self, keys: &[RowKey], delta: isize) {
        let Some(cur) = self.resolve(keys) else {
            return;
        };
        let last = keys.len() - 1;
        let next = cur.saturating_add_signed(delta).min(last);
        self.set(keys, next);
    }

    pub fn top(&mut self, keys: &[RowKey]) {
        self.set(keys, 0);
    }

    pub fn bottom(&mut self, keys: &[RowKey]) {
        self.set(keys, keys.len().saturating_sub(1));
    }

    /// Re-anchors on the resolved row after the data changed.
    pub fn settle(&mut self, keys: &[RowKey]) {
        if let Some(i) = self.resolve(keys) {
            self.set(keys, i);
        }
    }

    /// Selects `key` if it is listed.
    pub fn select(&mut self, keys: &[RowKey], key: &RowKey) -> bool {
        match keys.iter().position(|k| k == key) {
            Some(i) => {
                self.set(keys, i);
                true
            }
            None => false,
        }
    }
}

/// Case-insensitive substring filter over a row's words; empty matches all.
pub fn filter_match(filter: &str, words: &[&str]) -> bool {
    filter_match_in(filter, words, None)
}

/// The filter as typed: words separated by spaces, all of which must match. A
/// word `tenant:T` matches rows of tenant `T` (exactly, any case); any other
/// word is a case-insensitive substring of one of `words`.
pub fn filter_match_in(filter: &str, words: &[&str], tenant: Option<&str>) -> bool {
    filter.split_whitespace().all(|term| {
        let term = term.to_lowercase();
        match term.strip_prefix("tenant:") {
            Some(t) => tenant.is_some_and(|have| have.to_lowercase() == t),
            None => words.iter().any(|w| w.to_lowercase().contains(&term)),
        }
    })
}

/// The words a run is found by: id (`42`, `#42`), schedule, tenant, window, state.
pub fn run_matches(filter: &str, run: &Run) -> bool {
    let id = format!("#{}", run.id);
    filter_match_in(
        filter,
        &[
            &id,
            &run.schedule,
            &run.tenant,
            &run.window_key,
            run.state.as_str(),
        ],
        Some(&run.tenant),
    )
}

/// The bordered block of a pane; the focused one wears the focus token.
pub fn pane_block<'a>(title: String, focused: bool, theme: &Theme) -> Block<'a> {
    let (border, title_style) = if focused {
        (theme.style(Token::Focus), theme.style(Token::Focus))
    } else {
        (theme.style(Token::Muted), theme.style(Token::Fg))
    };
    Block::bordered()
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(border)
        .title(Span::styled(format!(" {title} "), title_style))
}

/// `glyph word` in the mark's style.
pub fn mark_span(mark: Mark, theme: &Theme) -> Span<'static> {
    Span::styled(format!("{} {}", mark.glyph, mark.word), theme.style(mark.token))
}

/// The glyph alone, in the mark's style (grids; the legend carries the words).
pub fn glyph_span(mark: Mark, theme: &Theme) -> Span<'static> {
    Span::styled(mark.glyph.to_string(), theme.style(mark.token))
}

/// A muted one-line message inside a pane (empty lists, loading).
pub fn note_line(text: impl Into<String>, theme: &Theme) -> Line<'static> {
    Line::from(Span::styled(text.into(), theme.style(Token::Muted)))
}

/// How many rows of a list fit in `area` inside borders and a header row.
pub fn list_rows(area: Rect) -> usize {
    usize::from(area.height.saturating_sub(3))
}

/// The first row to draw so that `selected` is visible in `visible` rows.
pub fn scroll_offset(selected: Option<usize>, visible: usize) -> usize {
    match selected {
        Some(i) if visible > 0 && i >= visible => i + 1 - visible,
        _ => 0,
    }
}

/// Which rows of a list are drawn, so that only those are built (lists can be
/// long): the first one, and the selection counted from it.
pub fn drawn(selected: Option<usize>, visible: usize) -> (usize, Option<usize>) {
    let offset = scroll_offset(selected, visible);
    (offset, selected.map(|i| i - offset))
}

/// Rows `lines` take when wrapped at `width` (an estimate: character wrap).
pub fn wrapped_height(lines: &[Line<'_>], width: u16) -> u16 {
    let w = usize::from(width.max(1));
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(w).max(1)).sum();
    u16::try_from(rows).unwrap_or(u16::MAX)
}

/// The selection style over a row's own style.
pub fn selected_style(theme: &Theme) -> Style {
    theme.style(Token::Selection)
}
