//! `agentcron check`: validate the config and report every problem, located;
//! a valid config may still get warnings (programs and files that do not exist).

use crate::config::{Config, LoadError, load_file};
use std::path::Path;

/// Loads `config`: prints a one-line summary and returns 0 when valid; prints every
/// diagnostic to stderr and returns 1 when invalid; returns 2 when it cannot be read.
pub fn run(config: &Path) -> i32 {
    match load_file(config) {
        Ok(c) => {
            let text = std::fs::read_to_string(config).unwrap_or_default();
            let found = warnings(&text, &c.dir);
            for w in &found {
                eprintln!(
                    "{}:{}:{}: warning: {}",
                    config.display(),
                    w.line,
                    w.col,
                    w.message
                );
            }
            let note = if found.is_empty() {
                String::new()
            } else {
                format!(" ({})", count(found.len(), "warning", "warnings"))
            };
            println!("ok: {}: {}{note}", config.display(), summary(&c));
            super::exit::OK
        }
        Err(e) => report_load_error(config, &e),
    }
}

/// Prints why `config` could not be loaded (every diagnostic, then a count) to
/// stderr and returns the exit code: 1 invalid, 2 unreadable. Other verbs that
/// need the config report through this too, so all of them read alike.
pub fn report_load_error(config: &Path, err: &LoadError) -> i32 {
    match err {
        LoadError::Invalid(diags) => {
            for d in diags {
                eprintln!("{d}");
            }
            eprintln!(
                "agentcron: {} is not valid: {}",
                config.display(),
                count(diags.len(), "error", "errors")
            );
            super::exit::DOES_NOT_HOLD
        }
        LoadError::Io { .. } => {
            eprintln!("agentcron: {err}");
            super::exit::USAGE
        }
    }
}

/// `7 schedules, 4 agents, 1 calendar`.
fn summary(c: &Config) -> String {
    let mut parts = vec![
        count(c.schedules.len(), "schedule", "schedules"),
        count(c.agents.len(), "agent", "agents"),
        count(c.calendars.len(), "calendar", "calendars"),
    ];
    if !c.maintenance.is_empty() {
        parts.push(count(
            c.maintenance.len(),
            "maintenance window",
            "maintenance windows",
        ));
    }
    parts.join(", ")
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A problem that does not make the config invalid but will bite at run time:
/// an agent program, a gate database or a gate file that does not exist (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// The warnings of a valid config: every `command` program (agents and
/// command gates) that is neither a file (a path with a `/`, resolved against
/// the config's folder) nor on `PATH`, and every `sqlite_query` database,
/// `file_exists` path and `credential_valid` file that does not exist. Each
/// points at its value in `text`.
pub fn warnings(text: &str, dir: &Path) -> Vec<Warning> {
    use toml::de::{DeTable, DeValue};
    let Ok(root) = DeTable::parse(text) else {
        return vec![];
    };
    let locate = |offset: usize| {
        let before = &text[..offset.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    };
    let mut out = Vec::new();
    let mut warn = |offset: usize, message: String| {
        let (line, col) = locate(offset);
        out.push(Warning { line, col, message });
    };
    let string = |t: &DeTable<'_>, key: &str| match t.get(key).map(|v| (v.get_ref(), v.span().start)) {
        Some((DeValue::String(s), at)) => Some((s.to_string(), at)),
        _ => None,
    };
    let program = |t: &DeTable<'_>| match t.get("command").map(|v| v.get_ref()) {
        Some(DeValue::Array(items)) => items.iter().next().and_then(|v| match v.get_ref() {
            DeValue::String(s) => Some((s.to_string(), v.span().start)),
            _ => None,
        }),
        _ => None,
    };
    let root = root.get_ref();
    if let Some(DeValue::Table(agents)) = root.get("agents").map(|v| v.get_ref()) {
        for (name, agent) in agents.iter() {
            if let DeValue::Table(a) = agent.get_ref()
                && let Some((prog, at)) = program(a)
                && !program_exists(&prog, dir)
            {
                warn(
                    at,
                    format!(
                        "agent `{}`: program `{prog}` {}",
                        name.get_ref(),
                        missing_program(&prog, dir)
                    ),
                );
            }
        }
    }
    for s in tables(root.get("schedule")) {
        let id = string(s, "id").map_or_else(|| "?".to_string(), |(id, _)| id);
        for g in tables(s.get("gate")) {
            let kind = string(g, "kind").map(|(k, _)| k).unwrap_or_default();
            let name = string(g, "name").map_or_else(|| kind.clone(), |(n, _)| n);
            let what = format!("schedule `{id}`, gate `{name}`");
            match kind.as_str() {
                "command" => {
                    if let Some((prog, at)) = program(g)
                        && !program_exists(&prog, dir)
                    {
                        warn(
                            at,
                            format!("{what}: program `{prog}` {}", missing_program(&prog, dir)),
                        );
                    }
                }
                "sqlite_query" | "file_exists" | "credential_valid" => {
                    let key = match kind.as_str() {
                        "sqlite_query" => "database",
                        "file_exists" => "path",
                        _ => "file",
                    };
                    if let Some((path, at)) = string(g, key) {
                        let full = dir.join(&path);
                        if !full.exists() {
                            warn(
                                at,
                                format!(
                                    "{what}: {key} `{path}` does not exist (yet): {} ({}); the gate waits or fails until it does",
                                    full.display(),
                                    if kind == "sqlite_query" {
                                        "cannot open the database"
                                    } else {
                                        "no such file"
                                    }
                                ),
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The tables of an array of tables (`[[schedule]]`, `[[schedule.gate]]`).
fn tables<'a, 'i>(v: Option<&'a toml::Spanned<toml::de::DeValue<'i>>>) -> Vec<&'a toml::de::DeTable<'i>> {
    match v.map(|v| v.get_ref()) {
        Some(toml::de::DeValue::Array(items)) => items
            .iter()
            .filter_map(|i| match i.get_ref() {
                toml::de::DeValue::Table(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

/// A program as an argv starts it: a path with a `/` (against `dir`), else a
/// name on `PATH`.
fn program_exists(prog: &str, dir: &Path) -> bool {
    if prog.contains('/') {
        return dir.join(prog).is_file();
    }
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|p| p.join(prog).is_file()))
}

fn missing_program(prog: &str, dir: &Path) -> String {
    if prog.contains('/') {
        format!("does not exist: {}", dir.join(prog).display())
    } else {
        "is not on PATH".to_string()
    }
}
