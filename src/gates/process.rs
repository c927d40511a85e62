//! Runs a gate's command (argv, never a shell string) in its own process group with
//! a deadline. Shared by the `command` and `credential_valid` gates.
//!
//! Waiting and reading happen on helper threads so the caller can give up at the
//! deadline; on timeout the whole group is killed, so a script's children (a
//! `sleep`, a `curl`) do not outlive the check.

use super::GateContext;
use crate::time::rfc3339_secs as rfc3339;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// Bytes of a pipe looked at for its first line; the rest is drained unread.
const FIRST_LINE_LIMIT: u64 = 4096;

/// A command that ran to its end.
#[derive(Debug)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    /// First non-empty stdout line, trimmed.
    pub stdout_line: Option<String>,
    /// First non-empty stderr line, trimmed.
    pub stderr_line: Option<String>,
}

impl Finished {
    /// `exit code N` or `killed by signal N`, plus the stderr line when there is one.
    pub fn describe_exit(&self) -> String {
        let code = match (self.status.code(), self.status.signal()) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "ended without an exit code".to_string(),
        };
        match &self.stderr_line {
            Some(line) => format!("{code}: {line}"),
            None => code,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ProcessError {
    #[error("empty command")]
    Empty,
    #[error("cannot start {program}: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("waiting for {program}: {source}")]
    Wait { program: String, source: io::Error },
    #[error("timed out after {}", crate::time::duration::format_duration(*.0))]
    TimedOut(Duration),
}

/// The window, as environment variables for gate commands.
pub(crate) fn window_env(ctx: &GateContext<'_>) -> Vec<(&'static str, String)> {
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

/// Runs `argv` with `env` added, stdin closed, until it exits or `timeout` passes.
pub(crate) fn run(
    argv: &[String],
    env: &[(&'static str, String)],
    timeout: Duration,
    cwd: Option<&std::path::Path>,
) -> Result<Finished, ProcessError> {
    let (program, args) = argv.split_first().ok_or(ProcessError::Empty)?;
    let deadline = Instant::now() + timeout;
    let mut command = Command::new(program);
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let mut child = command
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| ProcessError::Spawn {
            program: program.clone(),
            source,
        })?;
    // pid_t is i32 and Linux pids stay far below i32::MAX.
    let pgid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    let stdout = child.stdout.take().map(first_line_reader);
    let stderr = child.stderr.take().map(first_line_reader);

    let (exit_tx, exit_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = exit_tx.send(child.wait());
    });
    let status = match exit_rx.recv_timeout(timeout) {
        Ok(Ok(status)) => status,
        Ok(Err(source)) => {
            kill_group(pgid);
            return Err(ProcessError::Wait {
                program: program.clone(),
                source,
            });
        }
        Err(RecvTimeoutError::Timeout) => {
            kill_group(pgid);
            // Reap the leader; SIGKILL cannot be ignored, so this is quick.
            let _ = exit_rx.recv_timeout(Duration::from_secs(5));
            return Err(ProcessError::TimedOut(timeout));
        }
        Err(RecvTimeoutError::Disconnected) => {
            kill_group(pgid);
            return Err(ProcessError::Wait {
                program: program.clone(),
                source: io::Error::other("waiter thread ended"),
            });
        }
    };
    // A background child may still hold a pipe open; give it until the deadline.
    let line = |rx: Option<mpsc::Receiver<Option<String>>>| {
        let rx = rx?;
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => line,
            Err(_) => {
                kill_group(pgid);
                None
            }
        }
    };
    let stdout_line = line(stdout);
    let stderr_line = line(stderr);
    Ok(Finished {
        status,
        stdout_line,
        stderr_line,
    })
}

/// Sends the first non-empty line of `pipe` as soon as it is known, then drains the
/// rest so the child never blocks on (or dies of) a full or closed pipe.
fn first_line_reader(pipe: impl Read + Send + 'static) -> mpsc::Receiver<Option<String>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut found = None;
        let mut budget = (&mut reader).take(FIRST_LINE_LIMIT);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match budget.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&buf);
                    let trimmed = text.trim();
                    if !trimmed.is_empty() {
                        found = Some(trimmed.to_string());
                        break;
                    }
                }
            }
        }
        let _ = tx.send(found);
        let _ = io::copy(&mut reader, &mut io::sink());
    });
    rx
}

fn kill_group(pgid: i32) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) with a negative pid only sends a signal to the process group
    // we created for this child (process_group(0) makes its pid the pgid); it
    // touches no memory. An already-empty group just yields ESRCH.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}
