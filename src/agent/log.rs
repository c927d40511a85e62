//! The attempt log: non-protocol output, bounded so a chatty agent cannot fill
//! the database. It keeps the head (how it started), the tail (how it ended) and
//! the count of bytes dropped between them.
//!
//! One algorithm, [`BoundedLog`], for both places that bound it: the store
//! (the attempts table's `log_head`, `log_tail`, `log_dropped`) and the runners
//! (an attempt's output as reported when it ends, [`ReportedLog`]).

use std::fmt::Write as _;

/// Room reserved in a [`ReportedLog`] for its marker (text plus a 20-digit count).
const MARKER_MAX: usize = 64;

/// Head, tail and the bytes dropped between them. Head plus tail never exceed
/// `max` bytes; cuts fall on character boundaries.
///
/// The head takes the first `max / 2` bytes and is closed once any byte went
/// past it, so text never lands in the head out of order. The tail keeps the
/// most recent bytes that fit beside the head.
#[derive(Debug, Clone)]
pub(crate) struct BoundedLog {
    max: usize,
    head: String,
    /// Text after the head. Trimmed lazily (cutting on every push would move the
    /// whole tail for each line), so it may hold more than fits until read.
    tail: String,
    /// Bytes cut from the front of `tail` so far.
    dropped: u64,
}

impl BoundedLog {
    pub(crate) fn new(max: usize) -> Self {
        Self::from_parts(String::new(), String::new(), 0, max)
    }

    /// A log as stored, to append to.
    pub(crate) fn from_parts(head: String, tail: String, dropped: u64, max: usize) -> Self {
        Self {
            max,
            head,
            tail,
            dropped,
        }
    }

    pub(crate) fn push_line(&mut self, line: &str) {
        self.push(line);
        self.push("\n");
    }

    pub(crate) fn push(&mut self, text: &str) {
        let mut rest = text;
        if self.tail.is_empty() && self.dropped == 0 {
            let room = (self.max / 2).saturating_sub(self.head.len());
            let take = rest.floor_char_boundary(room);
            self.head.push_str(&rest[..take]);
            rest = &rest[take..];
        }
        if rest.is_empty() {
            return;
        }
        self.tail.push_str(rest);
        if self.tail.len() > self.tail_room().saturating_mul(2) {
            self.trim();
        }
    }

    /// Head, tail and dropped bytes with the tail cut to fit, as stored.
    pub(crate) fn into_parts(mut self) -> (String, String, u64) {
        self.trim();
        (self.head, self.tail, self.dropped)
    }

    fn tail_room(&self) -> usize {
        self.max.saturating_sub(self.head.len())
    }

    /// Where the kept tail starts in `tail`.
    fn cut(&self) -> usize {
        let over = self.tail.len().saturating_sub(self.tail_room());
        self.tail.ceil_char_boundary(over)
    }

    fn kept_tail(&self) -> (&str, u64) {
        let cut = self.cut();
        (&self.tail[cut..], self.dropped + cut as u64)
    }

    fn trim(&mut self) {
        let cut = self.cut();
        self.tail.drain(..cut);
        self.dropped += cut as u64;
    }
}

/// A stored log as shown: `head`, then `\n…[truncated N bytes]…\n` and the
/// tail when anything was dropped. The marker comes on top of the log's `max`.
pub(crate) fn render(head: &str, tail: &str, dropped: u64) -> String {
    if dropped > 0 {
        format!("{head}\n…[truncated {dropped} bytes]…\n{tail}")
    } else {
        format!("{head}{tail}")
    }
}

/// An attempt's output as a runner reports it: at most `limit` bytes, marker
/// included, so the report itself is bounded. The store appends the report to
/// the attempt's [`BoundedLog`] as text.
#[derive(Debug)]
pub(crate) struct ReportedLog {
    limit: usize,
    log: BoundedLog,
}

impl ReportedLog {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            log: BoundedLog::new(limit.saturating_sub(MARKER_MAX)),
        }
    }

    pub(crate) fn push_line(&mut self, line: &str) {
        self.log.push_line(line);
    }

    /// Head, `\n… [N bytes truncated] …\n`, tail; below [`MARKER_MAX`] bytes there
    /// is no room for a marker and only the text that fits is kept.
    pub(crate) fn render(&self) -> String {
        let (tail, dropped) = self.log.kept_tail();
        let head = &self.log.head;
        let mut out = String::with_capacity(head.len() + tail.len() + MARKER_MAX);
        out.push_str(head);
        if dropped > 0 && self.limit >= MARKER_MAX {
            // Writing to a String cannot fail.
            let _ = write!(out, "\n… [{dropped} bytes truncated] …\n");
        }
        out.push_str(tail);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Through the store's path: every append read back from its parts.
    fn stored(parts: &[&str], max: usize) -> String {
        let (mut head, mut tail, mut dropped) = (String::new(), String::new(), 0);
        for part in parts {
            let mut log = BoundedLog::from_parts(head, tail, dropped, max);
            log.push(part);
            (head, tail, dropped) = log.into_parts();
            assert!(head.len() + tail.len() <= max);
        }
        render(&head, &tail, dropped)
    }

    #[test]
    fn short_logs_are_kept_whole() {
        assert_eq!(stored(&["ab", "cd", "ef"], 10), "abcdef");
        let mut log = ReportedLog::new(1000);
        log.push_line("one");
        log.push_line("two");
        assert_eq!(log.render(), "one\ntwo\n");
    }

    #[test]
    fn long_logs_keep_head_and_tail_and_count_the_rest() {
        assert_eq!(
            stored(&["0123456789", "abcdefghij"], 10),
            "01234\n…[truncated 10 bytes]…\nfghij"
        );
        assert_eq!(
            stored(&["01", "23", "45", "67", "89", "ab"], 6),
            "012\n…[truncated 6 bytes]…\n9ab"
        );
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        // Head room is 3 bytes, which holds one 2-byte 'é'.
        assert_eq!(stored(&["ééééé", "ééééé"], 7), "é\n…[truncated 14 bytes]…\néé");
    }

    #[test]
    fn text_after_a_closed_head_never_lands_in_it() {
        // The second 'é' does not fit the 3-byte head and closes it; "a" is later.
        assert_eq!(stored(&["éé", "a"], 6), "ééa");
        assert_eq!(stored(&["éé", "abcdef"], 6), "é\n…[truncated 4 bytes]…\ncdef");
    }

    #[test]
    fn reported_logs_fit_their_limit_marker_included() {
        for limit in [0, 1, 10, 63, 64, 127, 128, 200, 1000, 4096] {
            let mut log = ReportedLog::new(limit);
            for i in 0..5000 {
                log.push_line(&format!("line {i} ünïcödé"));
            }
            let out = log.render();
            assert!(out.len() <= limit, "limit {limit}: {}", out.len());
            if limit >= 200 {
                assert!(out.starts_with("line 0 "), "{out}");
                assert!(out.ends_with("line 4999 ünïcödé\n"), "{out}");
                assert!(out.contains("bytes truncated"));
            }
        }
    }

    #[test]
    fn a_reported_log_exactly_at_its_room_is_not_truncated() {
        let mut log = ReportedLog::new(200 + MARKER_MAX);
        let text = "x".repeat(200);
        log.log.push(&text);
        assert_eq!(log.render(), text);
    }

    /// What the log must hold, computed from the whole text at once.
    fn expected(total: &str, max: usize) -> (String, String, u64) {
        let head_end = total.floor_char_boundary(max / 2);
        let room = max - head_end;
        let tail_start = total
            .ceil_char_boundary(total.len().saturating_sub(room))
            .max(head_end);
        (
            total[..head_end].to_string(),
            total[tail_start..].to_string(),
            (tail_start - head_end) as u64,
        )
    }

    proptest! {
        #[test]
        fn any_split_keeps_the_first_half_and_the_latest_bytes(
            parts in proptest::collection::vec("[a-zé€😀\n]{0,12}", 0..40),
            max in 0usize..80,
        ) {
            let total: String = parts.concat();
            let want = expected(&total, max);
            // Lazily trimmed (the runner's way) and trimmed on every append (the store's).
            let mut lazy = BoundedLog::new(max);
            let (mut head, mut tail, mut dropped) = (String::new(), String::new(), 0);
            for part in &parts {
                lazy.push(part);
                let mut log = BoundedLog::from_parts(head, tail, dropped, max);
                log.push(part);
                (head, tail, dropped) = log.into_parts();
                prop_assert!(head.len() + tail.len() <= max);
            }
            // Read without trimming (how a reported log renders), then trimmed.
            let (kept, dropped_so_far) = lazy.kept_tail();
            prop_assert_eq!((lazy.head.clone(), kept.to_string(), dropped_so_far), want.clone());
            prop_assert_eq!(lazy.into_parts(), want.clone());
            prop_assert_eq!((head, tail, dropped), want);
        }
    }
}
