//! `agentcron check`: validate the config.

use std::path::Path;

/// Placeholder until the config loader lands: reports that checking is not built.
pub fn run(_config: &Path) -> i32 {
    eprintln!("agentcron: check is not implemented yet");
    super::exit::USAGE
}
