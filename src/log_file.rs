//! The scheduler's log file: beside the database, rotated by size, for the
//! console's embedded scheduler.
//! A console owns the terminal, so its embedded scheduler cannot log to
//! stderr as `run --headless` does; without this its warnings (`lost`,
//! `alert_failed`, "database locked") would go nowhere.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A log file grows to this size, then moves to `FILE.1` (and `FILE.1` to
/// `FILE.2`, …): at most [`KEEP`] old files besides the current one.
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Old files kept: `FILE.1` … `FILE.KEEP`.
pub const KEEP: usize = 2;

/// An append-only file that rotates by size. Each `write` is one whole log
/// line (tracing's formatter writes an event at once), so a line is never
/// split across two files.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
    max: u64,
    keep: usize,
}

impl RotatingFile {
    /// Opens (creating it and its folder) `path` for appending.
    pub fn open(path: &Path, max: u64, keep: usize) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(Self {
            path: path.to_path_buf(),
            file,
            size,
            max,
            keep,
        })
    }

    fn numbered(&self, n: usize) -> PathBuf {
        let mut s = self.path.clone().into_os_string();
        s.push(format!(".{n}"));
        PathBuf::from(s)
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        if self.keep == 0 {
            self.file.set_len(0)?;
            self.size = 0;
            return Ok(());
        }
        for n in (1..self.keep).rev() {
            let from = self.numbered(n);
            if from.exists() {
                std::fs::rename(&from, self.numbered(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.numbered(1))?;
        self.file = OpenOptions::new().create(true).append(true).open(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.size > 0 && self.size + buf.len() as u64 > self.max {
            self.rotate()?;
        }
        self.file.write_all(buf)?;
        self.size += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The last `n` lines of a log file (the console's `:log`). Reads at most the
/// file's last 256 KiB, so a large log costs no more than a small one.
pub fn tail(path: &Path, n: usize) -> io::Result<Vec<String>> {
    use std::io::{Read, Seek, SeekFrom};
    const WINDOW: u64 = 256 * 1024;
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(WINDOW);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    // A window that starts mid-file starts mid-line: drop that part line.
    if start > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    let from = lines.len().saturating_sub(n);
    Ok(lines[from..].iter().map(|l| (*l).to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_by_size_keeping_whole_lines_and_at_most_keep_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs").join("agentcron.log");
        let mut f = RotatingFile::open(&path, 100, 2).unwrap();
        for i in 0..20 {
            f.write_all(format!("line {i:02} ........................\n").as_bytes())
                .unwrap();
        }
        f.flush().unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let current = read(&path);
        let one = read(&dir.path().join("logs/agentcron.log.1"));
        let two = read(&dir.path().join("logs/agentcron.log.2"));
        assert!(!dir.path().join("logs/agentcron.log.3").exists());
        for text in [&current, &one, &two] {
            assert!(text.len() <= 100, "{text}");
            assert!(
                text.ends_with('\n') && text.lines().all(|l| l.starts_with("line ")),
                "{text}"
            );
        }
        // The newest lines are in the current file, the ones before in .1, .2.
        assert!(current.contains("line 19"), "{current}");
        let last = |t: &str| t.lines().last().map(|l| l[5..7].parse::<u32>().unwrap()).unwrap();
        let first = |t: &str| t.lines().next().map(|l| l[5..7].parse::<u32>().unwrap()).unwrap();
        assert_eq!(last(&one) + 1, first(&current));
        assert_eq!(last(&two) + 1, first(&one));
    }

    #[test]
    fn a_reopened_log_appends_and_counts_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        std::fs::write(&path, "x".repeat(90) + "\n").unwrap();
        let mut f = RotatingFile::open(&path, 100, 1).unwrap();
        f.write_all(b"0123456789 more\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0123456789 more\n");
        assert!(
            std::fs::read_to_string(dir.path().join("a.log.1"))
                .unwrap()
                .starts_with("xxx")
        );
    }

    #[test]
    fn tail_gives_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        assert_eq!(tail(&path, 2).unwrap(), vec!["line 998", "line 999"]);
        assert_eq!(tail(&path, 5000).unwrap().len(), 1000);
        assert!(tail(&dir.path().join("none.log"), 3).is_err());
    }
}
