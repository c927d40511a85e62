//! `agentcron check`: validate the config and report every problem, located.

use crate::config::{Config, LoadError, load_file};
use std::path::Path;

/// Loads `config`: prints a one-line summary and returns 0 when valid; prints every
/// diagnostic to stderr and returns 1 when invalid; returns 2 when it cannot be read.
pub fn run(config: &Path) -> i32 {
    match load_file(config) {
        Ok(c) => {
            println!("ok: {}: {}", config.display(), summary(&c));
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
