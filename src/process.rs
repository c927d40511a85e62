//! External processes: the one way agentcron starts a program and makes sure it
//! ends. Agents, gate commands, alert commands and delivery commands all go
//! through here.
//!
//! A [`Program`] is argv (never a shell string), a working directory and extra
//! environment. It starts as the leader of its own process group, with
//! `PR_SET_PDEATHSIG` so the leader dies with the scheduler. From then on a
//! *keeper* owns the group: at the deadline or on [`Stopper::stop`] it sends
//! SIGTERM to the whole group, gives it [`KILL_GRACE`] to exit and close its
//! output, then SIGKILLs the group; after a normal exit it does the same to
//! whatever the program left behind, so no leftover repeats side effects beside
//! the next attempt or holds our pipes open.
//!
//! [`run`] is the blocking entry (gates, alert and delivery commands) and keeps on
//! the caller's thread; [`start`] is the async one (agents) and keeps on a thread
//! of its own. Both feed the keeper the same [`Note`]s, so the deadline and the
//! stop policy exist once. [`start_with`] adds a lease: the program is also
//! stopped when the lease passes without a [`Renewer::renew`].
//!
//! In the `agentcron` binary ([`set_supervisor`]) agents do not run under the
//! in-process keeper but under a per-attempt supervisor process
//! (`crate::supervisor`, forked by one fork server, the binary re-executed
//! once as `agentcron __spawner`): a child subreaper that keeps
//! every descendant of the agent, and ends the whole tree at the deadline, on
//! stop, when the lease lapses without renewal — which a frozen scheduler
//! cannot prevent — and when the scheduler dies (its control socket closes).
//! `supervised` is the scheduler's side of that conversation.

mod supervised;

use crate::time::duration::format_duration;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// How long a signalled group gets to exit and close its output before SIGKILL,
/// and how long its output is drained after that.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// Bytes of a pipe looked at for its first line by [`run`]; the rest is drained unread.
const FIRST_LINE_LIMIT: u64 = 4096;

/// What to run: argv, working directory and environment added to ours.
#[derive(Debug, Clone)]
pub struct Program {
    program: PathBuf,
    args: Vec<String>,
    cwd: Option<PathBuf>,
    env: Vec<(String, String)>,
}

impl Program {
    /// `program` is found through `PATH` unless it contains a `/`.
    pub fn new(program: impl Into<PathBuf>, args: &[String]) -> Self {
        Self {
            program: program.into(),
            args: args.to_vec(),
            cwd: None,
            env: Vec::new(),
        }
    }

    /// `argv[0]` is the program; an empty argv is [`ProcessError::Empty`].
    pub fn from_argv(argv: &[String]) -> Result<Self, ProcessError> {
        let (program, args) = argv.split_first().ok_or(ProcessError::Empty)?;
        Ok(Self::new(program, args))
    }

    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn envs<K: Into<String>, V: Into<String>>(mut self, vars: impl IntoIterator<Item = (K, V)>) -> Self {
        self.env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// The program as named in errors.
    pub fn name(&self) -> String {
        self.program.display().to_string()
    }

    pub fn path(&self) -> &Path {
        &self.program
    }

    /// The command with everything but stdio: own group, dies with its parent.
    fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            // The child's pid becomes the group id, so the whole tree it starts
            // can be signalled at once.
            .process_group(0);
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        // The leader dies with the scheduler (even on kill -9), so an orphaned
        // agent never repeats side effects beside the retry of its lost attempt.
        let parent = std::process::id();
        let open_files = started_with_open_files();
        // SAFETY: only async-signal-safe libc calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if !dies_with(parent, libc::SIGKILL) {
                    libc::_exit(1);
                }
                give_back_open_files(open_files);
                Ok(())
            });
        }
        cmd
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("empty command")]
    Empty,
    #[error("cannot start {program}: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("waiting for {program}: {source}")]
    Wait { program: String, source: io::Error },
    #[error("timed out after {}", format_duration(*.0))]
    TimedOut(Duration),
}

/// How a kept process ended. In every case its group has been stopped since.
#[derive(Debug)]
pub enum Exit {
    /// Exited by itself: an exit code, or the signal that killed it.
    Exited(ExitStatus),
    /// Ran past its deadline.
    TimedOut,
    /// [`Stopper::stop`] came first.
    Stopped,
    /// Its lease passed without a [`Renewer::renew`]: whoever started it may
    /// no longer own the work, so it was stopped before anyone takes it over.
    LeaseExpired,
    /// We lost track of it (waiting failed).
    Lost(io::Error),
}

/// How long a program started by [`start_with`] may run.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout: Duration,
    /// The first lease; `None`: no lease, only the timeout.
    pub lease: Option<Duration>,
    /// TERM → KILL grace when the lease lapses or the scheduler is gone: short,
    /// because another scheduler takes the work over soon after (the takeover
    /// grace). Other stops give [`KILL_GRACE`].
    pub lease_kill_grace: Duration,
}

impl Limits {
    pub fn timeout(timeout: Duration) -> Self {
        Self {
            timeout,
            lease: None,
            lease_kill_grace: KILL_GRACE,
        }
    }
}

/// The `agentcron` binary to run as the fork server of the per-attempt
/// supervisors, once set.
static SUPERVISOR: OnceLock<PathBuf> = OnceLock::new();

/// Runs every program started by [`start`] / [`start_with`] under a
/// supervisor (forked by `binary __spawner`, see `crate::supervisor`) from now on.
/// The `agentcron` binary calls it at start; a library user (tests) may call
/// it with the path of a built `agentcron`. Without it the in-process keeper
/// keeps them. The first call wins.
pub fn set_supervisor(binary: impl Into<PathBuf>) {
    let _ = SUPERVISOR.set(binary.into());
}

/// Starts the fork server of [`set_supervisor`] now, if one is set and not
/// running: a live scheduler calls it as it starts, so its first instant's
/// agents do not wait for the server's exec. A failure here is only logged;
/// the first agent start tries again and reports it.
pub fn prestart_supervisor() {
    if let Some(binary) = supervisor()
        && let Err(e) = supervised::prestart(binary)
    {
        tracing::warn!("cannot start the fork server yet: {e}");
    }
}

/// The supervisor binary, if [`set_supervisor`] was called.
pub fn supervisor() -> Option<&'static Path> {
    SUPERVISOR.get().map(PathBuf::as_path)
}

// ---------------------------------------------------------------------------
// Open files

/// The soft limit on open files this process started with, once
/// [`raise_open_files`] raised it (0: not raised); every program started here
/// gets it back.
static STARTED_WITH_NOFILE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The soft limit on open files before and after [`raise_open_files`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    pub before: u64,
    pub now: u64,
}

/// Raises this process's soft limit on open files to its hard limit. Every
/// HTTP connection, agent pipe and database handle takes one, and a scheduler
/// out of them cannot start its agents; the usual soft limit (1,024) is far
/// below what the system allows. Programs started here get the limit back
/// (see [`Program`]): some break above 1,024 (select(2)).
pub fn raise_open_files() -> io::Result<OpenFiles> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read only the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let _ = STARTED_WITH_NOFILE.compare_exchange(
            0,
            before,
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
        );
    }
    Ok(OpenFiles {
        before,
        now: lim.rlim_cur,
    })
}

/// For a child, between fork and exec: the soft limit on open files this
/// process started with, if it was raised. Only async-signal-safe calls.
fn give_back_open_files(started_with: u64) {
    if started_with == 0 {
        return;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit are system calls on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = started_with.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// What [`give_back_open_files`] gives back; read before the fork.
fn started_with_open_files() -> u64 {
    STARTED_WITH_NOFILE.load(std::sync::atomic::Ordering::SeqCst)
}

// ---------------------------------------------------------------------------
// Blocking entry

/// A program [`run`] saw to its end.
#[derive(Debug)]
pub struct Finished {
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

/// Runs `program` until it exits or `timeout` passes, blocking the caller.
/// `stdin` is written and closed (no `stdin`: closed from the start); of stdout
/// and stderr the first non-empty line is kept, the rest drained so the program
/// never blocks on a full pipe. Past `timeout` the group is stopped and this is
/// [`ProcessError::TimedOut`].
pub fn run(program: &Program, stdin: Option<Vec<u8>>, timeout: Duration) -> Result<Finished, ProcessError> {
    let deadline = Instant::now().checked_add(timeout);
    let mut cmd = program.command();
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let spawn_error = |source| ProcessError::Spawn {
        program: program.name(),
        source,
    };
    let mut child = spawn_blocking(cmd).map_err(spawn_error)?;
    let group = Group::of(child.id());
    let (notes, rx) = mpsc::channel();

    if let (Some(pipe), Some(bytes)) = (child.stdin.take(), stdin) {
        // A program that never reads stdin must not block us on a full pipe: the
        // write has a thread of its own, and its failure (EPIPE) is ignored.
        let _ = thread::Builder::new()
            .name("process-stdin".into())
            .spawn(move || write_ignoring_sigpipe(pipe, &bytes));
    }
    let stdout = child
        .stdout
        .take()
        .map(|pipe| first_line_reader(pipe, OutputOpen(notes.clone())));
    let stderr = child
        .stderr
        .take()
        .map(|pipe| first_line_reader(pipe, OutputOpen(notes.clone())));
    let outputs = usize::from(stdout.is_some()) + usize::from(stderr.is_some());

    let waiter = notes.clone();
    let waiting = thread::Builder::new().name("process-wait".into()).spawn(move || {
        let _ = waiter.send(Note::Exited(child.wait()));
    });
    if let Err(source) = waiting {
        // Without a waiter nobody reaps it: end it now rather than leak it. The
        // child went into the failed closure and is dropped with it, unreaped,
        // so SIGKILL is all that is left to do.
        Group::signal(group, libc::SIGKILL);
        return Err(ProcessError::Wait {
            program: program.name(),
            source,
        });
    }
    drop(notes);

    let keeper = Keeper {
        group,
        deadline,
        lease: None,
        lease_kill_grace: KILL_GRACE,
        notes: rx,
        outputs,
    };
    let line = |rx: Option<mpsc::Receiver<Option<String>>>| rx.and_then(|rx| rx.try_recv().ok().flatten());
    match keeper.keep() {
        Exit::Exited(status) => Ok(Finished {
            status,
            stdout_line: line(stdout),
            stderr_line: line(stderr),
        }),
        Exit::TimedOut => Err(ProcessError::TimedOut(timeout)),
        // Nobody holds a stopper or a lease of a blocking run; kept total anyway.
        Exit::Stopped | Exit::LeaseExpired => Err(ProcessError::Wait {
            program: program.name(),
            source: io::Error::other("stopped"),
        }),
        Exit::Lost(source) => Err(ProcessError::Wait {
            program: program.name(),
            source,
        }),
    }
}

/// Writes `bytes` and closes the pipe. SIGPIPE is blocked on this thread first:
/// the command line restores its default disposition (quiet exit on a closed
/// pipe), and a program that exits without reading must not kill the writer's
/// whole process. A thread-directed pending SIGPIPE is discarded with the thread.
fn write_ignoring_sigpipe(mut pipe: std::process::ChildStdin, bytes: &[u8]) {
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset to initialise;
    // the mask change affects only this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let _ = pipe.write_all(bytes);
}

/// Sends the first non-empty line of `pipe` as soon as it is known, then drains
/// the rest so the program never blocks on (or dies of) a full or closed pipe.
/// `open` is dropped at EOF, telling the keeper this output is closed.
fn first_line_reader(pipe: impl Read + Send + 'static, open: OutputOpen) -> mpsc::Receiver<Option<String>> {
    let (tx, rx) = mpsc::channel();
    // If the thread cannot start, the closure (pipe and `open`) is dropped: the
    // program sees a closed pipe and the keeper a closed output.
    let _ = thread::Builder::new()
        .name("process-output".into())
        .spawn(move || {
            let _open = open;
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

// ---------------------------------------------------------------------------
// Async entry

/// The pipes of a process [`start`] started.
pub struct Pipes {
    pub stdin: Option<tokio::process::ChildStdin>,
    pub stdout: Option<tokio::process::ChildStdout>,
    pub stderr: Option<tokio::process::ChildStderr>,
    /// Hold it while reading stdout and stderr and drop it at EOF of both: the
    /// keeper waits (bounded) for the output to close before it reports the
    /// end, so nothing written before the end is lost.
    pub output: OutputOpen,
}

/// A process [`start`] started: the way to stop it and to its end.
pub struct Running {
    stopper: Stopper,
    ended: tokio::sync::oneshot::Receiver<Exit>,
    /// When the program was running (its exec had succeeded).
    started: Instant,
}

impl Running {
    /// The instant the program was running: its exec had succeeded (as its
    /// supervisor saw it, or as `spawn` returned).
    pub fn started(&self) -> Instant {
        self.started
    }

    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Extends the lease of a process started with one ([`Limits::lease`]).
    pub fn renewer(&self) -> Renewer {
        Renewer(self.stopper.0.clone())
    }

    /// Resolves once the process ended and its group was stopped.
    pub async fn ended(self) -> Exit {
        self.ended
            .await
            .unwrap_or_else(|_| Exit::Lost(io::Error::other("the process keeper thread is gone")))
    }
}

/// Starts `program` with all three pipes, ending it at `timeout` at the latest.
/// Must be called inside a tokio runtime.
pub async fn start(program: &Program, timeout: Duration) -> Result<(Pipes, Running), ProcessError> {
    start_with(program, Limits::timeout(timeout)).await
}

/// [`start`] with a lease: the program is also stopped when `limits.lease`
/// (then each [`Renewer::renew`]) passes without a renewal. Under the
/// supervisor when one is set ([`set_supervisor`]), else under the keeper.
pub async fn start_with(program: &Program, limits: Limits) -> Result<(Pipes, Running), ProcessError> {
    if let Some(binary) = supervisor() {
        return supervised::start(binary, program, limits).await;
    }
    let timeout = limits.timeout;
    let deadline = Instant::now().checked_add(timeout);
    let mut cmd = tokio::process::Command::from(program.command());
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawn_error = |source| ProcessError::Spawn {
        program: program.name(),
        source,
    };
    let handle = tokio::runtime::Handle::current();
    let (reply, answer) = tokio::sync::oneshot::channel();
    on_spawner_thread(Box::new(move || {
        // tokio registers the child with the runtime's process driver.
        let _guard = handle.enter();
        let _ = reply.send(cmd.spawn());
    }))
    .map_err(spawn_error)?;
    let mut child = answer
        .await
        .map_err(|_| spawner_gone())
        .and_then(|spawned| spawned)
        .map_err(spawn_error)?;
    // `spawn` returns once the exec succeeded.
    let started = Instant::now();
    let group = child.id().and_then(Group::of);
    let (notes, rx) = mpsc::channel();
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());

    let keeper = Keeper {
        group,
        deadline,
        lease: limits.lease.and_then(|l| Instant::now().checked_add(l)),
        lease_kill_grace: limits.lease_kill_grace,
        notes: rx,
        outputs: 1,
    };
    let (report, ended) = tokio::sync::oneshot::channel();
    let keeping = thread::Builder::new()
        .name("process-keeper".into())
        .spawn(move || {
            let _ = report.send(keeper.keep());
        });
    if let Err(source) = keeping {
        Group::signal(group, libc::SIGKILL);
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
    let running = Running {
        stopper: Stopper(notes),
        ended,
        started,
    };
    Ok((pipes, running))
}

/// Asks a started process to stop (TERM, grace, KILL of its group). Idempotent;
/// after the end it does nothing.
#[derive(Clone)]
pub struct Stopper(mpsc::Sender<Note>);

impl Stopper {
    pub fn stop(&self) {
        let _ = self.0.send(Note::Stop);
    }
}

/// Extends the lease of a started process. After the end it does nothing.
#[derive(Clone)]
pub struct Renewer(mpsc::Sender<Note>);

impl Renewer {
    /// The lease now ends `valid_for` from now (`ZERO`: at once).
    pub fn renew(&self, valid_for: Duration) {
        let _ = self.0.send(Note::Renew(valid_for));
    }
}

/// One output of a kept process still being read; dropping it says it is closed.
pub struct OutputOpen(mpsc::Sender<Note>);

impl Drop for OutputOpen {
    fn drop(&mut self) {
        let _ = self.0.send(Note::OutputClosed);
    }
}

// ---------------------------------------------------------------------------
// The keeper

/// What the keeper hears about its process.
enum Note {
    /// The leader was reaped (or waiting for it failed).
    Exited(io::Result<ExitStatus>),
    /// One output reached EOF (every holder of that pipe is gone).
    OutputClosed,
    Stop,
    /// The lease now ends this long from now.
    Renew(Duration),
    /// The supervisor's word on how the program ended (its tree is gone).
    Reported(Exit),
}

/// Owns one process group from spawn until it is gone.
struct Keeper {
    group: Option<Group>,
    /// `None`: a timeout too large to represent, i.e. never.
    deadline: Option<Instant>,
    /// When the lease ends without a renewal; `None`: no lease.
    lease: Option<Instant>,
    lease_kill_grace: Duration,
    notes: mpsc::Receiver<Note>,
    /// Outputs not yet closed.
    outputs: usize,
}

impl Keeper {
    /// Waits for the exit, the deadline or a stop, whichever comes first (an exit
    /// already noted wins over a deadline just passed); then stops the group:
    /// SIGTERM, up to [`KILL_GRACE`] for the leader to be reaped and the output to
    /// close, SIGKILL, and up to [`KILL_GRACE`] more for the same. With nothing
    /// left in the group (the usual normal exit) this returns at once.
    fn keep(mut self) -> Exit {
        let mut leader_gone = false;
        let exit = loop {
            let next = match (self.deadline, self.lease) {
                (Some(d), Some(l)) => Some(d.min(l)),
                (d, l) => d.or(l),
            };
            let note = match next {
                Some(deadline) => self
                    .notes
                    .recv_timeout(deadline.saturating_duration_since(Instant::now())),
                None => self.notes.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match note {
                Ok(Note::Exited(Ok(status))) => {
                    leader_gone = true;
                    break Exit::Exited(status);
                }
                Ok(Note::Exited(Err(e))) => {
                    leader_gone = true;
                    break Exit::Lost(e);
                }
                Ok(Note::OutputClosed) => self.outputs = self.outputs.saturating_sub(1),
                Ok(Note::Stop) => break Exit::Stopped,
                Ok(Note::Renew(valid_for)) => {
                    if self.lease.is_some() {
                        self.lease = Instant::now().checked_add(valid_for);
                    }
                }
                // Only the supervisor's watcher hears reports.
                Ok(Note::Reported(_)) => {}
                Err(RecvTimeoutError::Timeout) => {
                    if self.lease.is_some_and(|l| Instant::now() >= l) {
                        break Exit::LeaseExpired;
                    }
                    break Exit::TimedOut;
                }
                // Every waiter is gone without a word (a panic): nobody will reap it.
                Err(RecvTimeoutError::Disconnected) => {
                    break Exit::Lost(io::Error::other("lost track of the process"));
                }
            }
        };
        let grace = match exit {
            Exit::LeaseExpired => self.lease_kill_grace,
            _ => KILL_GRACE,
        };
        Group::signal(self.group, libc::SIGTERM);
        self.settle(&mut leader_gone, grace);
        Group::signal(self.group, libc::SIGKILL);
        self.settle(&mut leader_gone, KILL_GRACE);
        exit
    }

    /// Waits up to `within` for the leader to be reaped and every output to close.
    fn settle(&mut self, leader_gone: &mut bool, within: Duration) {
        let until = Instant::now() + within;
        while !(*leader_gone && self.outputs == 0) {
            match self
                .notes
                .recv_timeout(until.saturating_duration_since(Instant::now()))
            {
                Ok(Note::Exited(_)) => *leader_gone = true,
                Ok(Note::OutputClosed) => self.outputs = self.outputs.saturating_sub(1),
                Ok(Note::Stop | Note::Renew(_) | Note::Reported(_)) => {}
                // Out of time, or nobody left to tell us anything.
                Err(_) => return,
            }
        }
    }
}

/// A process group we created: `process_group(0)` makes the leader's pid its id.
#[derive(Debug, Clone, Copy)]
struct Group(i32);

impl Group {
    /// `None` for ids that would address our own group or every process.
    fn of(leader_pid: u32) -> Option<Self> {
        i32::try_from(leader_pid).ok().filter(|&p| p > 1).map(Self)
    }

    /// Signals every process in the group. Its leader may already be reaped: the
    /// id stays taken while any member lives, and with none left this finds
    /// nothing (ESRCH), which is fine.
    fn signal(group: Option<Self>, signal: i32) {
        if let Some(Self(pgid)) = group {
            // SAFETY: kill(2) with a negative pid only sends a signal to that
            // process group; it touches no memory.
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }
}

/// In a forked child (async-signal-safe): `signal` comes when the thread
/// that forked us ends; false when `parent` is already gone (it died before
/// the request took effect, so nobody would send it).
pub(crate) fn dies_with(parent: u32, signal: i32) -> bool {
    // SAFETY: prctl(2) and getppid(2) touch no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, signal);
        libc::getppid() as u32 == parent
    }
}

// ---------------------------------------------------------------------------
// The spawner thread

type SpawnJob = Box<dyn FnOnce() + Send>;

/// PR_SET_PDEATHSIG fires when the *thread* that forked exits, so every program
/// is forked from one thread that lives as long as the process: never from a
/// tokio blocking-pool thread that may retire after an idle spell, nor from a
/// worker thread that ends before its program.
fn on_spawner_thread(job: SpawnJob) -> io::Result<()> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        thread::Builder::new()
            .name("process-spawner".into())
            .spawn(move || {
                for job in rx {
                    // A panicking job must not take the spawner (and every later
                    // spawn) with it; its caller sees its reply channel closed.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            })
            .ok()
            .map(|_| tx)
    });
    match sender {
        Some(tx) => tx.send(job).map_err(|_| spawner_gone()),
        None => Err(io::Error::other("the process spawner thread could not start")),
    }
}

fn spawner_gone() -> io::Error {
    io::Error::other("the process spawner thread is gone")
}

/// Spawns `cmd` on the spawner thread and waits for the answer.
fn spawn_blocking(mut cmd: std::process::Command) -> io::Result<std::process::Child> {
    let (reply, answer) = mpsc::sync_channel(1);
    on_spawner_thread(Box::new(move || {
        let _ = reply.send(cmd.spawn());
    }))?;
    answer.recv().map_err(|_| spawner_gone())?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Program {
        Program::new("sh", &["-c".to_string(), script.to_string()])
    }

    #[test]
    fn first_lines_and_status_come_back() {
        let done = run(
            &sh("echo; echo '  out  '; echo err >&2; exit 3"),
            None,
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.stdout_line.as_deref(), Some("out"));
        assert_eq!(done.describe_exit(), "exit code 3: err");
    }

    #[test]
    fn stdin_is_written_and_closed() {
        let done = run(
            &sh("read line; echo \"got $line\""),
            Some(b"hello\n".to_vec()),
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(done.stdout_line.as_deref(), Some("got hello"));
    }

    #[test]
    fn a_program_that_never_reads_stdin_does_not_block_the_writer() {
        // Far more than a pipe buffer, to a program that exits without reading.
        let big = vec![b'x'; 1 << 20];
        let done = run(&sh("exit 0"), Some(big), Duration::from_secs(30)).unwrap();
        assert!(done.status.success());
    }

    #[test]
    fn cwd_and_env_reach_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let program = sh("echo \"$(pwd) $GREETING\"")
            .current_dir(dir.path())
            .env("GREETING", "hi");
        let done = run(&program, None, Duration::from_secs(30)).unwrap();
        let expected = format!("{} hi", dir.path().canonicalize().unwrap().display());
        assert_eq!(done.stdout_line.as_deref(), Some(expected.as_str()));
    }

    #[test]
    fn spawn_failures_name_the_program() {
        let err = run(
            &Program::new("/nonexistent/agentcron-x", &[]),
            None,
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot start /nonexistent/agentcron-x:"),
            "{err}"
        );
        assert!(matches!(Program::from_argv(&[]), Err(ProcessError::Empty)));
    }

    #[test]
    fn groups_never_address_ourselves_or_everyone() {
        assert!(Group::of(0).is_none());
        assert!(Group::of(1).is_none());
        assert!(Group::of(u32::MAX).is_none());
        assert!(Group::of(1234).is_some());
    }
}
