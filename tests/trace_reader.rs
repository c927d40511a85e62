//! `src/trace/` is the one reader of the typed trace: no other module digs
//! into an event's detail JSON to find out what the event says (tests, and
//! `src/core/event.rs`, which defines the schema, may).

use std::path::{Path, PathBuf};

/// Ways of reading a field out of an event's detail JSON.
const DIGS: [&str; 3] = [".detail.get(", "detail[\"", ".detail["];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file before its unit tests (`#[cfg(test)]` to the end).
fn code(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |i| &text[..i])
}

#[test]
fn only_the_trace_reads_event_details() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![];
    sources(&root.join("src"), &mut files);
    files.sort();
    assert!(files.len() > 50, "found the sources: {}", files.len());
    let allowed = |p: &Path| p.starts_with(root.join("src/trace")) || p == root.join("src/core/event.rs");
    let mut found = vec![];
    for f in files.iter().filter(|f| !allowed(f)) {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in code(&text).lines().enumerate() {
            if DIGS.iter().any(|d| line.contains(d)) {
                found.push(format!(
                    "{}:{}: {}",
                    f.strip_prefix(root).unwrap().display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "read events through agentcron::trace (or add a method there), not their detail JSON:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_a_detail_read() {
    let sample = "let x = e.detail.get(\"reason\");\n#[cfg(test)]\nmod tests { e.detail[\"x\"] }";
    let hits: Vec<&str> = code(sample)
        .lines()
        .filter(|l| DIGS.iter().any(|d| l.contains(d)))
        .collect();
    assert_eq!(hits, ["let x = e.detail.get(\"reason\");"]);
}
