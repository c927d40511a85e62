//! The scheduler's side of a supervised program. The scheduler starts one
//! fork server (`agentcron __spawner`, see `crate::supervisor::serve`) as its
//! live loop starts ([`prestart`]; else at the first agent start) and sends
//! it, per attempt, the program's argv,
//! working directory, environment and limits with four descriptors: the
//! attempt's control socket and the program's three pipes (the program
//! inherits them, so its output reaches us directly). The server forks the
//! attempt's supervisor, which talks to us on the control socket in lines:
//!
//! - to the supervisor: `renew MS` (the lease now ends MS from receipt),
//!   `stop` (TERM, grace, KILL of the whole tree);
//! - from it: `{"started":PID,"supervisor":PID,"mono_ns":N}` (after the
//!   program's exec succeeded, at CLOCK_MONOTONIC N) or
//!   `{"spawn_error":…,"errno":N}` first, and
//!   `{"ended":"exited"|"timeout"|"lease"|"stopped","status":RAW}` once every
//!   process of the tree is gone.
//!
//! Requests are sent without waiting for earlier ones to start: the agents of
//! one instant start together. When this process dies, the sockets close (and
//! the server dies of its parent-death signal, its supervisors of theirs) and
//! each supervisor ends its tree: no agent outlives its scheduler, however it
//! died. A server that died is started again by the next request.

use super::*;
use crate::supervisor::{REQUEST_FDS, SpawnRequest, monotonic_ns};
use serde::Deserialize;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

/// The supervisor reads orders from and writes reports to this fd; the fork
/// server reads requests from it.
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
        supervisor: Option<u32>,
        mono_ns: Option<u64>,
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

/// What the first report says: the program runs (since that instant, under
/// that supervisor), or it could not be started.
type Start = io::Result<(Instant, Option<Group>)>;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The running fork server: its control socket, and the process to reap.
struct Server {
    control: OwnedFd,
    process: std::process::Child,
}

static SERVER: Mutex<Option<Server>> = Mutex::new(None);

/// Starts `program` under a supervisor forked by the fork server `binary`;
/// see [`super::start_with`].
pub(super) async fn start(
    binary: &Path,
    program: &Program,
    limits: Limits,
) -> Result<(Pipes, Running), ProcessError> {
    let spawn_error = |source| ProcessError::Spawn {
        program: program.name(),
        source,
    };
    let request = SpawnRequest {
        argv: std::iter::once(program.program.to_string_lossy().into_owned())
            .chain(program.args.iter().cloned())
            .collect(),
        env: program.env.clone(),
        cwd: program.cwd.as_ref().map(|d| d.to_string_lossy().into_owned()),
        timeout_ms: millis(limits.timeout),
        lease_ms: limits.lease.map(millis),
        term_grace_ms: millis(KILL_GRACE),
        lease_grace_ms: millis(limits.lease_kill_grace),
    };
    let payload = serde_json::to_vec(&request).map_err(|e| spawn_error(io::Error::other(e)))?;
    let (ours, theirs) = UnixStream::pair().map_err(spawn_error)?;
    let (stdin_r, stdin_w) = pipe().map_err(spawn_error)?;
    let (stdout_r, stdout_w) = pipe().map_err(spawn_error)?;
    let (stderr_r, stderr_w) = pipe().map_err(spawn_error)?;
    let theirs = OwnedFd::from(theirs);
    let handed = [&theirs, &stdin_r, &stdout_w, &stderr_w].map(AsRawFd::as_raw_fd);
    request_start(binary, &payload, &handed).map_err(spawn_error)?;
    // Only the supervisor (and the program) hold their ends now: their death
    // closes the socket and the pipes.
    drop((theirs, stdin_r, stdout_w, stderr_w));

    let (notes, rx) = mpsc::channel();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<Start>();
    let reading = ours.try_clone().and_then(|reader| {
        let notes = notes.clone();
        thread::Builder::new()
            .name("supervisor-reports".into())
            .spawn(move || read_reports(reader, started_tx, notes))
    });
    // Without a reader nobody hears the supervisor: closing our end makes it
    // end the tree.
    reading.map_err(spawn_error)?;
    let (started, shim) = started_rx
        .await
        .unwrap_or_else(|_| Err(io::Error::other("the supervisor ended without a word")))
        .map_err(spawn_error)?;

    // A failure here drops our end of the control socket: the supervisor ends the tree.
    let stdin =
        tokio::process::ChildStdin::from_std(std::process::ChildStdin::from(stdin_w)).map_err(spawn_error)?;
    let stdout = tokio::process::ChildStdout::from_std(std::process::ChildStdout::from(stdout_r))
        .map_err(spawn_error)?;
    let stderr = tokio::process::ChildStderr::from_std(std::process::ChildStderr::from(stderr_r))
        .map_err(spawn_error)?;
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
        // Its control socket closed with the watcher: the supervisor ends the tree.
        return Err(ProcessError::Wait {
            program: program.name(),
            source,
        });
    }
    let pipes = Pipes {
        stdin: Some(stdin),
        stdout: Some(stdout),
        stderr: Some(stderr),
        output: OutputOpen(notes.clone()),
    };
    Ok((
        pipes,
        Running {
            stopper: Stopper(notes),
            ended,
            started,
        },
    ))
}

/// A pipe (read end, write end), both close-on-exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two fds into the array, which we then own.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

/// Starts the fork server now if it is not running, so that the first
/// agents to start do not wait for its exec (a 22 MB binary: ~5-10 ms).
pub(super) fn prestart(binary: &Path) -> io::Result<()> {
    let mut server = SERVER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if server.is_none() {
        *server = Some(start_server(binary)?);
    }
    Ok(())
}

/// Sends one request to the fork server, starting it first if it is not
/// running (or died: then once more to a new one).
fn request_start(binary: &Path, payload: &[u8], fds: &[i32; REQUEST_FDS]) -> io::Result<()> {
    let mut server = SERVER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut tries = 0;
    loop {
        if server.is_none() {
            *server = Some(start_server(binary)?);
        }
        let Some(running) = server.as_mut() else {
            continue;
        };
        match send_with_fds(running.control.as_raw_fd(), payload, fds) {
            Ok(()) => return Ok(()),
            Err(e)
                if tries == 0
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EPIPE | libc::ECONNRESET | libc::ECONNREFUSED | libc::ENOTCONN)
                    ) =>
            {
                // The server is gone (killed): reap it, start another.
                tries += 1;
                if let Some(mut dead) = server.take() {
                    let _ = dead.process.kill();
                    let _ = dead.process.wait();
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Starts `binary __spawner` with its control socket on fd 3, in a group of
/// its own (a terminal's ^C is the scheduler's to handle), dying with us.
fn start_server(binary: &Path) -> io::Result<Server> {
    let mut pair = [0; 2];
    // SAFETY: socketpair(2) writes two fds into the array, which we then own.
    let (ours, theirs) = unsafe {
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1]))
    };
    let mut cmd = std::process::Command::new(binary);
    cmd.arg0("agentcron")
        .arg("__spawner")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let theirs_fd = theirs.as_raw_fd();
    let parent = std::process::id();
    // The supervisors and the agents they start get the limit we started with.
    let open_files = started_with_open_files();
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if !dies_with(parent, libc::SIGKILL) {
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
    // From the spawner thread: PR_SET_PDEATHSIG follows the forking thread.
    let process = spawn_blocking(cmd)?;
    drop(theirs);
    Ok(Server {
        control: ours,
        process,
    })
}

/// One `sendmsg(2)` of `payload` with `fds` (SCM_RIGHTS).
fn send_with_fds(socket: i32, payload: &[u8], fds: &[i32; REQUEST_FDS]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr().cast_mut().cast(),
        iov_len: payload.len(),
    };
    // u64s: aligned for cmsghdr.
    let mut control = [0u64; 8];
    let fds_len = std::mem::size_of_val(fds);
    // SAFETY: the msghdr points at buffers that outlive the call; the control
    // buffer has room for one SCM_RIGHTS message of REQUEST_FDS ints
    // (CMSG_SPACE(16) = 32 bytes ≤ 64), filled in with the libc macros.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(fds_len as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fds_len as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast::<i32>(), fds.len());
        loop {
            let n = libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL);
            if n >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Where on our timeline a CLOCK_MONOTONIC instant of another process is.
fn on_our_clock(mono_ns: Option<u64>) -> Instant {
    let now = Instant::now();
    let Some(at) = mono_ns else {
        return now;
    };
    let ago = Duration::from_nanos(monotonic_ns().saturating_sub(at));
    now.checked_sub(ago).unwrap_or(now)
}

/// Reads the supervisor's reports: the first (started or not) to `started`,
/// the last (how it ended) to the watcher. A socket closed without a final
/// report means the supervisor itself was killed.
fn read_reports(reader: UnixStream, started: tokio::sync::oneshot::Sender<Start>, notes: mpsc::Sender<Note>) {
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
            Ok(Report::Started {
                supervisor, mono_ns, ..
            }) => {
                if let Some(tx) = started.take() {
                    let shim = supervisor.and_then(Group::of);
                    let _ = tx.send(Ok((on_our_clock(mono_ns), shim)));
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
    /// The supervisor's group (it leads one), from its first report.
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
                // The supervisor is the fork server's child, not ours.
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
