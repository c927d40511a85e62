//! The scheduler's side of a supervised program: it starts the supervisor
//! (`agentcron __supervise …`, see `crate::supervisor`) with the program's
//! argv, working directory and environment, hands it the three pipes (the
//! program inherits them, so its output reaches us directly) and a control
//! socket on fd 3, and talks to it in lines:
//!
//! - to the supervisor: `renew MS` (the lease now ends MS from receipt),
//!   `stop` (TERM, grace, KILL of the whole tree);
//! - from it: `{"started":PID}` or `{"spawn_error":…,"errno":N}` first, and
//!   `{"ended":"exited"|"timeout"|"lease"|"stopped","status":RAW}` once every
//!   process of the tree is gone.
//!
//! When this process dies, the socket closes and the supervisor ends the tree:
//! no agent outlives its scheduler, however it died.

use super::*;
use serde::Deserialize;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

/// The supervisor reads orders from and writes reports to this fd.
pub(crate) const CONTROL_FD: i32 = 3;

/// How much longer than the program's timeout we wait for the supervisor's
/// report before we give up on it and kill it (it reports within its grace).
const REPORT_SLACK: Duration = Duration::from_secs(10);

/// One report line of the supervisor.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Report {
    Started {
        #[allow(dead_code)] // read for the log only
        started: u32,
    },
    SpawnError {
        spawn_error: String,
        errno: Option<i32>,
    },
    Ended {
        ended: String,
        status: Option<i32>,
    },
}

fn millis(d: Duration) -> String {
    d.as_millis().to_string()
}

/// Starts `program` under the supervisor `binary`; see [`super::start_with`].
pub(super) async fn start(
    binary: &Path,
    program: &Program,
    limits: Limits,
) -> Result<(Pipes, Running), ProcessError> {
    let spawn_error = |source| ProcessError::Spawn {
        program: program.name(),
        source,
    };
    let (ours, theirs) = UnixStream::pair().map_err(spawn_error)?;
    let mut cmd = std::process::Command::new(binary);
    cmd.arg0("agentcron")
        .arg("__supervise")
        .arg("--timeout-ms")
        .arg(millis(limits.timeout))
        .arg("--term-grace-ms")
        .arg(millis(KILL_GRACE))
        .arg("--lease-grace-ms")
        .arg(millis(limits.lease_kill_grace));
    if let Some(lease) = limits.lease {
        cmd.arg("--lease-ms").arg(millis(lease));
    }
    cmd.arg("--")
        .arg(&program.program)
        .args(&program.args)
        .envs(program.env.iter().map(|(k, v)| (k, v)))
        .process_group(0);
    if let Some(dir) = &program.cwd {
        cmd.current_dir(dir);
    }
    let theirs_fd = theirs.as_raw_fd();
    let parent = std::process::id();
    // The supervisor and the agent it starts get the limit we started with.
    let open_files = started_with_open_files();
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // A supervisor whose scheduler died first hears SIGHUP (besides its
            // control socket closing) and ends the tree.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGHUP);
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            give_back_open_files(open_files);
            // dup2 clears close-on-exec on the copy; an fd already at 3 keeps it.
            if theirs_fd == CONTROL_FD {
                if libc::fcntl(CONTROL_FD, libc::F_SETFD, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(theirs_fd, CONTROL_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let handle = tokio::runtime::Handle::current();
    let (reply, answer) = tokio::sync::oneshot::channel();
    on_spawner_thread(Box::new(move || {
        let _guard = handle.enter();
        let _ = reply.send(cmd.spawn());
    }))
    .map_err(spawn_error)?;
    let mut child = answer
        .await
        .map_err(|_| spawner_gone())
        .and_then(|spawned| spawned)
        .map_err(spawn_error)?;
    // Only the supervisor holds its end now: its death closes the socket.
    drop(theirs);
    let shim = child.id().and_then(Group::of);

    let (notes, rx) = mpsc::channel();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<io::Result<()>>();
    let reading = ours.try_clone().and_then(|reader| {
        let notes = notes.clone();
        thread::Builder::new()
            .name("supervisor-reports".into())
            .spawn(move || read_reports(reader, started_tx, notes))
    });
    if let Err(source) = reading {
        Group::signal(shim, libc::SIGKILL);
        let _ = child.wait().await;
        return Err(spawn_error(source));
    }
    let started = started_rx
        .await
        .unwrap_or_else(|_| Err(io::Error::other("the supervisor ended without a word")));
    if let Err(source) = started {
        Group::signal(shim, libc::SIGKILL);
        let _ = child.wait().await;
        return Err(spawn_error(source));
    }

    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let watcher = Watcher {
        control: ours,
        shim,
        give_up: limits
            .timeout
            .checked_add(KILL_GRACE * 2 + REPORT_SLACK)
            .and_then(|d| Instant::now().checked_add(d)),
        notes: rx,
        outputs: 1,
    };
    let (report, ended) = tokio::sync::oneshot::channel();
    let watching = thread::Builder::new()
        .name("supervisor-watcher".into())
        .spawn(move || {
            let _ = report.send(watcher.watch());
        });
    if let Err(source) = watching {
        Group::signal(shim, libc::SIGKILL);
        let _ = child.wait().await;
        return Err(ProcessError::Wait {
            program: program.name(),
            source,
        });
    }
    let waiter = notes.clone();
    tokio::spawn(async move {
        let _ = waiter.send(Note::Exited(child.wait().await));
    });
    let pipes = Pipes {
        stdin,
        stdout,
        stderr,
        output: OutputOpen(notes.clone()),
    };
    Ok((
        pipes,
        Running {
            stopper: Stopper(notes),
            ended,
        },
    ))
}

/// Reads the supervisor's reports: the first (started or not) to `started`,
/// the last (how it ended) to the watcher. A socket closed without a final
/// report means the supervisor itself was killed.
fn read_reports(
    reader: UnixStream,
    started: tokio::sync::oneshot::Sender<io::Result<()>>,
    notes: mpsc::Sender<Note>,
) {
    let mut started = Some(started);
    let mut lines = BufReader::new(reader);
    let mut line = String::new();
    loop {
        line.clear();
        match lines.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        match serde_json::from_str::<Report>(line.trim()) {
            Ok(Report::Started { .. }) => {
                if let Some(tx) = started.take() {
                    let _ = tx.send(Ok(()));
                }
            }
            Ok(Report::SpawnError { spawn_error, errno }) => {
                let error = match errno {
                    Some(n) => io::Error::from_raw_os_error(n),
                    None => io::Error::other(spawn_error),
                };
                if let Some(tx) = started.take() {
                    let _ = tx.send(Err(error));
                }
                return;
            }
            Ok(Report::Ended { ended, status }) => {
                let status = status.map(ExitStatus::from_raw);
                let exit = match (ended.as_str(), status) {
                    ("exited", Some(status)) => Exit::Exited(status),
                    ("timeout", _) => Exit::TimedOut,
                    ("lease", _) => Exit::LeaseExpired,
                    ("stopped", _) => Exit::Stopped,
                    (other, _) => Exit::Lost(io::Error::other(format!("the supervisor reported `{other}`"))),
                };
                let _ = notes.send(Note::Reported(exit));
                return;
            }
            // Not ours to understand: ignored (it is never expected).
            Err(_) => {}
        }
    }
    if let Some(tx) = started.take() {
        let _ = tx.send(Err(io::Error::other(
            "the supervisor ended before it started the program",
        )));
    }
    let _ = notes.send(Note::Reported(Exit::Lost(io::Error::other(
        "the supervisor ended without reporting (killed?)",
    ))));
}

/// Forwards stops and renewals to the supervisor and waits for its report and
/// for the program's output to close.
struct Watcher {
    control: UnixStream,
    shim: Option<Group>,
    /// Past this without a report the supervisor is killed and the end `Lost`.
    give_up: Option<Instant>,
    notes: mpsc::Receiver<Note>,
    outputs: usize,
}

impl Watcher {
    fn order(&self, line: &str) {
        let bytes = format!("{line}\n");
        // SAFETY: send(2) on our socket with a valid buffer; MSG_NOSIGNAL turns
        // a gone supervisor into EPIPE instead of SIGPIPE. A failed order is
        // fine: a gone supervisor has already ended the tree.
        unsafe {
            libc::send(
                self.control.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL,
            );
        }
    }

    fn watch(mut self) -> Exit {
        let exit = loop {
            let note = match self.give_up {
                Some(at) => self
                    .notes
                    .recv_timeout(at.saturating_duration_since(Instant::now())),
                None => self.notes.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match note {
                Ok(Note::Stop) => self.order("stop"),
                Ok(Note::Renew(valid_for)) => self.order(&format!("renew {}", valid_for.as_millis())),
                Ok(Note::Reported(exit)) => break exit,
                Ok(Note::OutputClosed) => self.outputs = self.outputs.saturating_sub(1),
                // The supervisor reports before it exits; the report follows.
                Ok(Note::Exited(_)) => {}
                Err(RecvTimeoutError::Timeout) => {
                    Group::signal(self.shim, libc::SIGKILL);
                    break Exit::Lost(io::Error::other("the supervisor did not report in time"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    break Exit::Lost(io::Error::other("lost track of the supervisor"));
                }
            }
        };
        // Every process that held the output is gone; read what they wrote.
        let until = Instant::now() + KILL_GRACE;
        while self.outputs > 0 {
            match self
                .notes
                .recv_timeout(until.saturating_duration_since(Instant::now()))
            {
                Ok(Note::OutputClosed) => self.outputs -= 1,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        exit
    }
}
