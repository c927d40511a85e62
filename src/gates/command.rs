//! `command`: a script decides. Exit 0 pass, 75 (EX_TEMPFAIL) wait, anything else
//! fail; the first stdout line is the reason. The window arrives in
//! `AGENTCRON_WINDOW_KEY`, `_START`, `_END` (RFC 3339 UTC), `AGENTCRON_SCHEDULE`,
//! `AGENTCRON_TENANT` and `AGENTCRON_NOW`.
//!
//! Program paths were resolved against the config folder by the config loader,
//! and the command runs in the config folder, like agents, so relative arguments
//! mean the same thing wherever agentcron was started.

use super::{Gate, GateContext, GateOutcome};
use crate::process::{self, Finished, ProcessError, Program};
use crate::time::rfc3339_secs as rfc3339;
use std::path::Path;

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
        let done = match run(&self.command, ctx, self.dir.as_deref()) {
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

/// Runs a gate's command (`command`, or `credential_valid`'s expiry command):
/// the window in its environment, stdin closed, in `dir`, within the gate's
/// timeout; the whole process group is stopped at the timeout.
pub(crate) fn run(
    argv: &[String],
    ctx: &GateContext<'_>,
    dir: Option<&Path>,
) -> Result<Finished, ProcessError> {
    let mut program = Program::from_argv(argv)?.envs(window_env(ctx));
    if let Some(dir) = dir {
        program = program.current_dir(dir);
    }
    process::run(&program, None, ctx.timeout)
}

/// The window, as environment variables for gate commands.
fn window_env(ctx: &GateContext<'_>) -> Vec<(&'static str, String)> {
    vec![
        ("AGENTCRON_WINDOW_KEY", ctx.window_key.to_string()),
        ("AGENTCRON_WINDOW_START", rfc3339(ctx.window_start)),
        ("AGENTCRON_WINDOW_END", rfc3339(ctx.window_end)),
        ("AGENTCRON_SCHEDULE", ctx.schedule.id.clone()),
        ("AGENTCRON_TENANT", ctx.tenant.to_string()),
        // The engine's now, so a script on a rehearsal's virtual clock can agree with it.
        ("AGENTCRON_NOW", rfc3339(ctx.now)),
    ]
}
