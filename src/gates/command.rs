//! `command`: a script decides. Exit 0 pass, 75 (EX_TEMPFAIL) wait, anything else
//! fail; the first stdout line is the reason. The window arrives in
//! `AGENTCRON_WINDOW_KEY`, `_START`, `_END` (RFC 3339 UTC), `AGENTCRON_SCHEDULE`,
//! `AGENTCRON_TENANT` and `AGENTCRON_NOW`.
//!
//! Program paths were resolved against the config folder by the config loader,
//! and the command runs in the config folder, like agents, so relative arguments
//! mean the same thing wherever agentcron was started.

use super::process;
use super::{Gate, GateContext, GateOutcome};

/// sysexits EX_TEMPFAIL: "not yet, try again".
const EXIT_WAIT: i32 = 75;

pub struct CommandGate {
    name: String,
    command: Vec<String>,
    dir: Option<std::path::PathBuf>,
}

impl CommandGate {
    pub fn new(name: String, command: Vec<String>) -> Self {
        Self {
            name,
            command,
            dir: None,
        }
    }

    /// Runs the command in `dir` (the config folder).
    pub fn in_dir(mut self, dir: &std::path::Path) -> Self {
        self.dir = Some(dir.to_path_buf());
        self
    }
}

impl Gate for CommandGate {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "command"
    }

    fn check(&self, ctx: &GateContext<'_>) -> GateOutcome {
        let done = match process::run(
            &self.command,
            &process::window_env(ctx),
            ctx.timeout,
            self.dir.as_deref(),
        ) {
            Ok(done) => done,
            // Could not run or did not finish: not a verdict on readiness.
            Err(e) => return GateOutcome::wait(e.to_string()),
        };
        let reason = done.stdout_line.clone().unwrap_or_else(|| done.describe_exit());
        match done.status.code() {
            Some(0) => GateOutcome::pass(reason),
            Some(EXIT_WAIT) => GateOutcome::wait(reason),
            _ => GateOutcome::fail(reason),
        }
    }
}
