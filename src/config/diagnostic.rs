//! Located config errors: [`Diagnostic`] (`FILE:LINE:COL: error: …`), the
//! [`LoadError`] a loader returns, byte-offset → line/column mapping and the
//! edit-distance "did you mean" used by every unknown-name message.

use std::fmt;
use std::path::PathBuf;

/// One problem in a config file (or in a file it references, such as a holidays
/// file), pointing at the offending key or value. Line and column are 1-based;
/// the column counts characters, not bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
    pub message: String,
    pub help: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: error: {}",
            self.file.display(),
            self.line,
            self.col,
            self.message
        )?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// Why a config could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The config file itself could not be read (missing, unreadable).
    #[error("cannot read config {}: {message}", .path.display())]
    Io { path: PathBuf, message: String },
    /// The file was read but is not a valid config; every problem found, in file order.
    #[error("{}", render_all(.0))]
    Invalid(Vec<Diagnostic>),
}

fn render_all(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(Diagnostic::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Maps byte offsets of one text to 1-based line and column.
pub(crate) struct Source<'a> {
    text: &'a str,
    /// Byte offset where each line starts; the first entry is always 0.
    line_starts: Vec<usize>,
}

impl<'a> Source<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { text, line_starts }
    }

    /// Line and column of `offset` (clamped to the text).
    pub(crate) fn locate(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let idx = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            // line_starts[0] == 0 <= offset, so the insertion point is at least 1.
            Err(i) => i.saturating_sub(1),
        };
        let start = self.line_starts.get(idx).copied().unwrap_or(0);
        let col = self
            .text
            .get(start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(offset - start);
        (idx + 1, col + 1)
    }
}

/// Levenshtein distance over characters.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `word` (ignoring case), if it is close enough to be a
/// plausible typo: at most a third of the word's length, and at least 2 edits allowed.
/// On a tie a singular/plural slip wins (`schedules` → `schedule`, not `scheduler`).
pub(crate) fn closest<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let lower = word.to_lowercase();
    let limit = (lower.chars().count() / 3).max(2);
    let plural_slip = |c: &str| {
        let c = c.to_lowercase();
        lower.strip_suffix('s') == Some(c.as_str()) || c.strip_suffix('s') == Some(lower.as_str())
    };
    candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, &c.to_lowercase()), !plural_slip(c), c))
        .filter(|(d, _, c)| *d <= limit && *c != word)
        .min_by_key(|(d, not_plural, _)| (*d, *not_plural))
        .map(|(_, _, c)| c)
}

/// The "did you mean `…`?" help for a misspelt name, when a candidate is close.
pub(crate) fn did_you_mean<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<String> {
    closest(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_lines_and_columns() {
        let src = Source::new("ab\ncdé\n\nx");
        assert_eq!(src.locate(0), (1, 1));
        assert_eq!(src.locate(1), (1, 2));
        assert_eq!(src.locate(3), (2, 1));
        assert_eq!(src.locate(7), (2, 4)); // after the two-byte é
        assert_eq!(src.locate(8), (3, 1));
        assert_eq!(src.locate(9), (4, 1));
        assert_eq!(src.locate(999), (4, 2));
    }

    #[test]
    fn distance_and_suggestion() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(
            closest("chek_every", ["check_every", "close_after"]),
            Some("check_every")
        );
        assert_eq!(
            closest("Asia/Shangai", ["Asia/Shanghai", "Asia/Seoul"]),
            Some("Asia/Shanghai")
        );
        assert_eq!(closest("utc", ["UTC"]), Some("UTC"));
        assert_eq!(closest("schedules", ["scheduler", "schedule"]), Some("schedule"));
        assert_eq!(closest("zzzzzz", ["check_every"]), None);
    }

    #[test]
    fn display_has_location_and_help() {
        let d = Diagnostic {
            file: "a.toml".into(),
            line: 3,
            col: 5,
            message: "unknown key `x`".into(),
            help: Some("did you mean `y`?".into()),
        };
        assert_eq!(
            d.to_string(),
            "a.toml:3:5: error: unknown key `x`\n  help: did you mean `y`?"
        );
    }
}
