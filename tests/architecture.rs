//! Crate layering that the compiler does not enforce, checked by reading `src/`.

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

/// Whether Rust source reaches into the config module: a `crate::config` or
/// `super::config` path, also inside a grouped `use crate::{…}`.
fn mentions_config(text: &str) -> bool {
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if squeezed.contains("crate::config") || squeezed.contains("super::config") {
        return true;
    }
    squeezed.match_indices("crate::{").any(|(at, _)| {
        let group = &squeezed[at + "crate::{".len()..];
        let mut depth = 1;
        let end = group
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(group.len(), |(i, _)| i);
        group[..end]
            .split([',', '{'])
            .any(|part| part == "config" || part.starts_with("config::"))
    })
}

/// Time is the lower layer: config reads time's types (policies, cron, fire
/// rules) and builds fire rules from schedules, never the other way round, so
/// the time code can be tested and reused without a config.
#[test]
fn time_does_not_depend_on_config() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/time"),
        &mut files,
    );
    assert!(files.len() > 3, "found the time module's files: {files:?}");
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| mentions_config(&std::fs::read_to_string(f).unwrap()))
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "src/time/ must not use crate::config: {offenders:?}"
    );
}

#[test]
fn the_config_check_sees_every_spelling() {
    assert!(mentions_config("use crate::config::model::DstGap;"));
    assert!(mentions_config("fn f(s: &crate::config::ScheduleConfig) {}"));
    assert!(mentions_config("use super::config;"));
    assert!(mentions_config(
        "use crate::{\n    config::model::Anchor,\n    time::cron,\n};"
    ));
    assert!(mentions_config("use crate::{time::{cron, fire}, config};"));
    assert!(!mentions_config("use crate::time::duration::parse_duration;"));
    assert!(!mentions_config(
        "/// Formats a duration the way it is written in config."
    ));
    assert!(!mentions_config("use crate::{time::cron, configure};"));
}

/// Lines of `src/` (outside `src/store/apply.rs` and the store's own
/// definitions) that call the state-changing functions, ignoring comments.
fn state_writers_outside_apply() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found = vec![];
    for file in files {
        let rel = file.strip_prefix(&root).unwrap().display().to_string();
        if rel == "store/apply.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let calls = [
                ".transition(",
                ".transition_fenced(",
                ".claim(",
                ".claim_row(",
                ".insert_claimed_row(",
            ]
            .iter()
            .any(|c| code.contains(c));
            // `Tx::transition` itself is `transition_fenced` plus its events,
            // `Tx::claim` is `claim_row` plus its event.
            let delegation = (rel == "store/runs.rs"
                && code.contains("self.transition_fenced(run_id, from, to, change, None, now, None)"))
                || (rel == "store/attempts.rs"
                    && code.contains("self.claim_row(run_id, from, owner, lease_until, reason, now)"));
            if calls && !delegation {
                found.push(format!("src/{rel}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

/// "One owner per fact": a run changes state only through `Tx::apply`, which
/// writes a core plan whole or not at all — so nothing can change a run and
/// forget the alert, the circuit count or the wake-up that goes with it, or
/// do those after losing the race.
#[test]
fn only_store_apply_changes_run_state() {
    let writers = state_writers_outside_apply();
    assert!(
        writers.is_empty(),
        "Tx::transition / Tx::claim called outside store::apply:\n{}",
        writers.join("\n")
    );
}
