//! The attempt log: non-protocol output, bounded so a chatty agent cannot fill
//! the database. Keeps the head (how it started) and the tail (how it ended).

use std::fmt::Write as _;

/// Room reserved for the truncation marker (text plus a 20-digit count).
const MARKER_MAX: usize = 64;

#[derive(Debug)]
pub(crate) struct BoundedLog {
    limit: usize,
    head_cap: usize,
    head: String,
    /// Recent text after the head; trimmed lazily, so it may hold up to twice `limit`.
    tail: String,
    /// Bytes cut from the front of `tail` so far.
    dropped: usize,
}

impl BoundedLog {
    pub(crate) fn new(limit: usize) -> Self {
        // Too small for a marker: keep only the head.
        let head_cap = if limit < 2 * MARKER_MAX {
            limit
        } else {
            (limit - MARKER_MAX) / 2
        };
        Self {
            limit,
            head_cap,
            head: String::new(),
            tail: String::new(),
            dropped: 0,
        }
    }

    pub(crate) fn push_line(&mut self, line: &str) {
        self.push(line);
        self.push("\n");
    }

    pub(crate) fn push(&mut self, mut text: &str) {
        if self.head.len() < self.head_cap {
            let cut = floor_boundary(text, self.head_cap - self.head.len());
            self.head.push_str(&text[..cut]);
            text = &text[cut..];
        }
        if text.is_empty() {
            return;
        }
        if self.head_cap == self.limit {
            self.dropped += text.len();
            return;
        }
        self.tail.push_str(text);
        if self.tail.len() > 2 * self.limit {
            let cut = ceil_boundary(&self.tail, self.tail.len() - self.limit);
            self.tail.drain(..cut);
            self.dropped += cut;
        }
    }

    /// The log as stored: at most `limit` bytes.
    pub(crate) fn render(&self) -> String {
        let total = self.head.len() + self.tail.len();
        if self.dropped == 0 && total <= self.limit {
            return format!("{}{}", self.head, self.tail);
        }
        if self.head_cap == self.limit {
            return self.head.clone();
        }
        let keep = self.limit - self.head.len() - MARKER_MAX;
        let start = ceil_boundary(&self.tail, self.tail.len().saturating_sub(keep));
        let dropped = self.dropped + start;
        let mut out = String::with_capacity(self.limit);
        out.push_str(&self.head);
        // Writing to a String cannot fail.
        let _ = write!(out, "\n… [{dropped} bytes truncated] …\n");
        out.push_str(&self.tail[start..]);
        out
    }
}

/// The largest char boundary ≤ `at`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest char boundary ≥ `at`.
fn ceil_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_logs_are_kept_whole() {
        let mut log = BoundedLog::new(1000);
        log.push_line("one");
        log.push_line("two");
        assert_eq!(log.render(), "one\ntwo\n");
    }

    #[test]
    fn long_logs_keep_head_and_tail_within_limit() {
        for limit in [0, 1, 10, 127, 128, 200, 1000, 4096] {
            let mut log = BoundedLog::new(limit);
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
    fn exactly_at_limit_is_not_truncated() {
        let mut log = BoundedLog::new(200);
        let text = "x".repeat(200);
        log.push(&text);
        assert_eq!(log.render(), text);
    }
}
