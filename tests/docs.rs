//! The docs stay true to the code (issue 51): every config key the loader
//! accepts is in docs/CONFIG.md, every verb and flag of the real binary is in
//! docs/CLI.md, the README's `agentcron …` lines parse (and the harmless ones
//! run), and the docs' relative links resolve. Each list is derived from the
//! code or the binary, never copied by hand, so a key, verb or flag added
//! without its doc fails here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agentcron");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

// ---------------------------------------------------------------- config keys

/// The `## ` sections of a Markdown file: (heading, text including the heading).
fn sections(md: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![];
    for line in md.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            out.push((h.to_string(), String::new()));
        }
        if let Some((_, text)) = out.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// A heading's table path: "`[[schedule.gate]]`" → "schedule.gate".
fn heading_table(h: &str) -> String {
    h.trim_matches(|c: char| c == '`' || c == '[' || c == ']' || c.is_whitespace())
        .to_string()
}

/// The CONFIG.md section that documents a table: the longest heading whose
/// table is the table or one of its parents (`schedule.retry` lives in
/// `[[schedule]]`), or a heading under it (`[alert]`'s one key is documented as
/// `[alert.routes]`).
fn section_for<'a>(secs: &'a [(String, String)], table: &str) -> Option<&'a str> {
    let tables: Vec<(String, &'a str)> = secs
        .iter()
        .filter(|(h, _)| h.starts_with('`'))
        .map(|(h, text)| (heading_table(h), text.as_str()))
        .collect();
    let exact = tables.iter().find(|(t, _)| t == table);
    let parent = tables
        .iter()
        .filter(|(t, _)| table.starts_with(&format!("{t}.")))
        .max_by_key(|(t, _)| t.len());
    let child = tables.iter().find(|(t, _)| t.starts_with(&format!("{table}.")));
    exact.or(parent).or(child).map(|(_, text)| *text)
}

/// Missing config keys and kinds in a CONFIG.md text (empty: all documented).
fn undocumented_config(md: &str) -> Vec<String> {
    let secs = sections(md);
    let mut missing = vec![];
    for k in agentcron::config::load::accepted_keys() {
        if k.table.is_empty() {
            // A top-level table: documented by a heading that names it.
            let named = secs.iter().any(|(h, _)| {
                let t = heading_table(h);
                t == k.key || t.starts_with(&format!("{}.", k.key))
            });
            if !named {
                missing.push(format!("top-level table [{}]", k.key));
            }
            continue;
        }
        let Some(text) = section_for(&secs, k.table) else {
            missing.push(format!("section for [{}]", k.table));
            continue;
        };
        let documented = text.contains(&format!("`{}`", k.key))
            || text.contains(&format!("{} =", k.key))
            || text.contains(&format!(".{}]", k.key));
        if !documented {
            missing.push(format!("[{}] {}", k.table, k.key));
        }
    }
    for (table, kind) in agentcron::config::load::accepted_kinds() {
        let Some(text) = section_for(&secs, table) else {
            missing.push(format!("section for [{table}]"));
            continue;
        };
        if !text.contains(&format!("`{kind}`")) && !text.contains(&format!("\"{kind}\"")) {
            missing.push(format!("[{table}] kind {kind}"));
        }
    }
    missing
}

#[test]
fn every_config_key_the_loader_accepts_is_in_config_md() {
    let keys = agentcron::config::load::accepted_keys();
    assert!(keys.len() > 80, "the loader's key lists: {}", keys.len());
    let missing = undocumented_config(&read("docs/CONFIG.md"));
    assert!(
        missing.is_empty(),
        "docs/CONFIG.md does not document: {missing:#?}"
    );
}

#[test]
fn the_config_check_fails_for_a_key_left_out() {
    let md = read("docs/CONFIG.md");
    // `takeover_grace` ([scheduler]) and `min_remaining` (a gate kind's key) cut out.
    let cut: String = md
        .lines()
        .filter(|l| {
            !l.contains("`takeover_grace`") && !l.contains("`min_remaining`") && !l.contains("min_remaining")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let missing = undocumented_config(&cut);
    assert!(
        missing.contains(&"[scheduler] takeover_grace".to_string()),
        "{missing:?}"
    );
    assert!(missing.iter().any(|m| m.contains("min_remaining")), "{missing:?}");
}

// ---------------------------------------------------------------- the CLI

fn help(path: &[String]) -> String {
    let out = Command::new(BIN)
        .args(path)
        .arg("--help")
        .output()
        .expect("run agentcron --help");
    assert!(out.status.success(), "agentcron {} --help failed", path.join(" "));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines of one block of clap's help ("Commands:", "Options:").
fn block<'a>(help: &'a str, title: &str) -> Vec<&'a str> {
    help.lines()
        .skip_while(|l| l.trim_end() != title)
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect()
}

fn subcommands(help: &str) -> Vec<String> {
    block(help, "Commands:")
        .into_iter()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

fn flags(help: &str) -> BTreeSet<String> {
    block(help, "Options:")
        .into_iter()
        .filter_map(|l| {
            let t = l.trim_start();
            let t = if t.starts_with('-') && !t.starts_with("--") {
                t.split_once(", ").map(|(_, rest)| rest)?
            } else {
                t
            };
            let f = t.strip_prefix("--")?;
            let name: String = f
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            Some(format!("--{name}"))
        })
        .filter(|f| f != "--help" && f != "--version")
        .collect()
}

/// Every verb path of the binary with its own flags (the global ones under the
/// empty path), walked through `--help`.
fn cli_tree() -> Vec<(Vec<String>, BTreeSet<String>)> {
    let top = help(&[]);
    let global = flags(&top);
    let mut out = vec![(vec![], global.clone())];
    let mut todo: Vec<Vec<String>> = subcommands(&top).into_iter().map(|c| vec![c]).collect();
    while let Some(path) = todo.pop() {
        let h = help(&path);
        for c in subcommands(&h) {
            let mut p = path.clone();
            p.push(c);
            todo.push(p);
        }
        let own: BTreeSet<String> = flags(&h).difference(&global).cloned().collect();
        out.push((path, own));
    }
    out
}

/// What CLI.md's synopsis leaves out: a verb with no `agentcron VERB …` line,
/// a flag on none of its verb's lines.
fn undocumented_cli(md: &str, tree: &[(Vec<String>, BTreeSet<String>)]) -> Vec<String> {
    let synopsis: Vec<&str> = md.lines().filter(|l| l.starts_with("agentcron ")).collect();
    let mut missing = vec![];
    for (path, own) in tree {
        // A verb's lines: "agentcron dlq [list …" holds `dlq list`.
        let lines: Vec<&str> = if path.is_empty() {
            synopsis
                .iter()
                .copied()
                .filter(|l| l.starts_with("agentcron ["))
                .collect()
        } else {
            let head = format!("agentcron {}", path[0]);
            synopsis
                .iter()
                .copied()
                .filter(|l| l.starts_with(&format!("{head} ")) || **l == head)
                .filter(|l| {
                    path[1..].iter().all(|w| {
                        l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                            .any(|x| x == w)
                    })
                })
                .collect()
        };
        if lines.is_empty() {
            missing.push(format!("verb `agentcron {}`", path.join(" ")));
            continue;
        }
        for f in own {
            let on_a_line = lines.iter().any(|l| {
                l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .any(|x| x == f)
            });
            if !on_a_line {
                missing.push(format!("`{f}` of `agentcron {}`", path.join(" ")));
            }
        }
    }
    missing
}

#[test]
fn every_verb_and_flag_of_the_binary_is_in_cli_md() {
    let tree = cli_tree();
    assert!(tree.len() > 25, "verbs found through --help: {tree:?}");
    let missing = undocumented_cli(&read("docs/CLI.md"), &tree);
    assert!(
        missing.is_empty(),
        "docs/CLI.md's synopsis does not document: {missing:#?}"
    );
}

#[test]
fn the_cli_check_fails_for_a_verb_or_flag_left_out() {
    let tree = cli_tree();
    let md = read("docs/CLI.md");
    let cut: String = md
        .lines()
        .filter(|l| !l.starts_with("agentcron reload"))
        .map(|l| format!("{}\n", l.replace("--cancel-running | ", "")))
        .collect();
    let missing = undocumented_cli(&cut, &tree);
    assert!(
        missing.contains(&"verb `agentcron reload`".to_string()),
        "{missing:?}"
    );
    assert!(
        missing.contains(&"`--cancel-running` of `agentcron kill`".to_string()),
        "{missing:?}"
    );
}

// ---------------------------------------------------------------- the README

/// The `agentcron …` command lines of the README's code blocks (a `cargo run
/// … --` prefix read as `agentcron`), without prompts, comments and what
/// follows a pipe or redirection.
fn readme_commands(md: &str) -> Vec<String> {
    let mut out = vec![];
    let mut lang: Option<&str> = None;
    for line in md.lines() {
        if let Some(l) = line.strip_prefix("```") {
            lang = match lang {
                None => Some(l.trim()),
                Some(_) => None,
            };
            continue;
        }
        if !matches!(lang, Some("sh" | "console" | "")) {
            continue;
        }
        let mut l = line.trim().trim_start_matches("$ ").to_string();
        for prefix in ["cargo run --release -- ", "cargo run -q -- ", "cargo run -- "] {
            if let Some(rest) = l.strip_prefix(prefix) {
                l = format!("agentcron {rest}");
            }
        }
        if !l.starts_with("agentcron ") {
            continue;
        }
        for cut in [" #", " |", " >", " <", " &&", " ||"] {
            if let Some(i) = l.find(cut) {
                l.truncate(i);
            }
        }
        out.push(l.trim().to_string());
    }
    out
}

fn sh(line: &str, dir: &Path) -> std::process::Output {
    let bin_dir = Path::new(BIN).parent().expect("the binary's folder");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .arg("-c")
        .arg(line)
        .env("PATH", path)
        .current_dir(dir)
        .output()
        .expect("run sh")
}

#[test]
fn the_readmes_agentcron_lines_parse_and_the_harmless_ones_run() {
    let readme = read("README.md");
    let lines = readme_commands(&readme);
    assert!(lines.len() >= 3, "README command lines found: {lines:?}");
    // Every line parses: clap reads every argument before `--help` and refuses
    // an unknown verb, flag or value (exit 2); a line that parses prints help.
    for line in &lines {
        let out = sh(&format!("{line} --help"), &root());
        assert!(
            out.status.success(),
            "README line does not parse: `{line}`\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The ones that only read (check, --version, completions, man) run as written.
    let harmless: Vec<&String> = lines
        .iter()
        .filter(|l| {
            l.ends_with(" check")
                || l.ends_with("--version")
                || l.contains(" completions ")
                || l.ends_with(" man")
        })
        .collect();
    assert!(!harmless.is_empty(), "{lines:?}");
    for line in harmless {
        let out = sh(line, &root());
        assert!(
            out.status.success(),
            "README line fails: `{line}`\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

// ---------------------------------------------------------------- links

fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(md: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut code = false;
    for line in md.lines() {
        if line.starts_with("```") {
            code = !code;
        }
        if !code && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn the_docs_relative_links_resolve() {
    let mut files = vec![
        "README.md".to_string(),
        "ARCHITECTURE.md".to_string(),
        "BENCHMARKS.md".to_string(),
        "CHANGELOG.md".to_string(),
    ];
    for e in std::fs::read_dir(root().join("docs")).expect("docs/") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    let mut broken = vec![];
    for f in &files {
        let text = read(f);
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let link = &rest[..end];
            if link.contains("://") || link.contains(' ') || link.starts_with("mailto:") {
                continue;
            }
            let (path, frag) = link.split_once('#').unwrap_or((link, ""));
            let base = Path::new(f).parent().unwrap_or(Path::new(""));
            let target = if path.is_empty() {
                PathBuf::from(f)
            } else {
                base.join(path)
            };
            let full = root().join(&target);
            if !full.exists() {
                broken.push(format!("{f}: {link} (no such file)"));
                continue;
            }
            if !frag.is_empty() && target.extension().is_some_and(|x| x == "md") {
                let md = std::fs::read_to_string(&full).unwrap_or_default();
                if !anchors(&md).contains(frag) {
                    broken.push(format!("{f}: {link} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}
