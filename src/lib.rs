//! agentcron: a scheduler for AI-agent tasks. See DESIGN.md for the behaviour
//! contract; the module tree follows it.

pub mod agent;
pub mod api;
pub mod cli;
pub mod config;
pub mod console;
pub mod control;
pub mod core;
pub mod engine;
pub mod gates;
mod http;
pub mod log_file;
pub mod operator;
pub mod process;
pub mod recovery;
pub mod rehearsal;
pub mod secrets;
pub mod status;
pub mod store;
pub mod supervisor;
pub mod time;
pub mod trace;

/// The git commit this binary was built from (`build.rs`), or "unknown"
/// when built without git.
pub const COMMIT: &str = env!("AGENTCRON_COMMIT");

/// The version with its commit, as `--version`, `status` and the scheduler
/// registry tell it: two builds of one version are told apart.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("AGENTCRON_COMMIT"),
    ")"
);
