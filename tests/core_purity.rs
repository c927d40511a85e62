//! `src/core/` is the pure core (STYLE.md "Pure core, thin shell"): no SQLite,
//! no async runtime, no HTTP, no files, processes, threads or sockets, no clock
//! reads, and no reaching into the modules that do those things. Time arrives as
//! an argument; facts arrive as values.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What the core must not name: IO crates and std modules, clock reads, and
/// the crate's own IO layers.
const FORBIDDEN: &[&str] = &[
    "rusqlite",
    "tokio",
    "ureq",
    "std::fs",
    "std::process",
    "std::thread",
    "std::net",
    "std::io",
    "Utc::now",
    "Local::now",
    "SystemTime",
    "Instant::now",
    "crate::store",
    "crate::engine",
    "crate::gates",
    "crate::agent::runner",
    "crate::agent::delivery",
    "crate::console",
    "crate::cli",
    "crate::operator",
    "crate::rehearsal",
    "crate::recovery::alert",
    "SystemClock",
];

/// Each line of `text` that names something forbidden, ignoring comments.
fn offences(text: &str) -> Vec<(usize, String)> {
    let mut found = vec![];
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for word in FORBIDDEN {
            if code.contains(word) {
                found.push((i + 1, format!("{word}: {}", line.trim())));
            }
        }
    }
    found
}

#[test]
fn the_core_does_no_io_and_reads_no_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = vec![];
    rust_files(&root, &mut files);
    assert!(files.len() >= 5, "src/core/ has its modules: {files:?}");
    let mut all = vec![];
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, what) in offences(&text) {
            all.push(format!("{}:{line}: {what}", file.display()));
        }
    }
    assert!(
        all.is_empty(),
        "IO or clock reads in src/core:\n{}",
        all.join("\n")
    );
}

#[test]
fn the_check_sees_what_it_forbids() {
    // The scanner itself: a forbidden name in code is found, in a comment it is not.
    assert_eq!(offences("use rusqlite::Connection;").len(), 1);
    assert_eq!(offences("let now = Utc::now();").len(), 1);
    assert_eq!(offences("// the store (crate::store) applies it").len(), 0);
    assert_eq!(offences("let t = now + TimeDelta::seconds(1);").len(), 0);
}
