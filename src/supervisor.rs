//! The per-attempt supervisor: a small process between the scheduler and one
//! agent (DESIGN.md "Recovery rules", Containment). The scheduler starts one
//! fork server, `agentcron __spawner` ([`serve`]); each attempt's supervisor
//! is a fork of it (no exec: it shares the server's pages copy-on-write), given
//! the attempt's pipes and control socket with the request. `agentcron
//! __supervise [limits] -- PROGRAM ARGS…` ([`main`]) runs the same supervisor
//! as a process of its own (on the stdio and fd 3 it was given).
//!
//! The supervisor makes itself a child subreaper, so every process
//! the agent starts — double forks and `setsid` included — stays its
//! descendant, starts the agent in its own process group on the stdio it was
//! given, and ends the whole tree (TERM, grace, SIGCONT for the frozen, KILL)
//! when:
//! - the agent exits (leftovers would act beside the next attempt),
//! - the timeout passes, or the scheduler says `stop`,
//! - the lease passes without a `renew` from the scheduler (a frozen or
//!   wedged scheduler cannot keep its agent acting past its lease),
//! - the scheduler is gone (its control socket closes, or SIGHUP).
//!
//! Then it reports how the agent ended on the control socket and exits. The
//! scheduler's side is `process::supervised`; the wire format is described there.
//! Time here is the monotonic clock: these are real-time deadlines of IO.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

mod exec;

const CONTROL_FD: i32 = 3;

/// After SIGKILL, how long we wait for the tree to be reaped before reporting anyway.
const REAP_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq)]
struct Args {
    timeout: Duration,
    lease: Option<Duration>,
    term_grace: Duration,
    lease_grace: Duration,
    argv: Vec<String>,
    /// Added to the agent's environment.
    env: Vec<(String, String)>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut out = Args {
        timeout: Duration::MAX,
        lease: None,
        term_grace: Duration::from_secs(2),
        lease_grace: Duration::from_secs(2),
        argv: vec![],
        env: vec![],
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            out.argv = it.cloned().collect();
            break;
        }
        let value = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        let ms: u64 = value
            .parse()
            .map_err(|_| format!("{a}: `{value}` is not a number of ms"))?;
        let d = Duration::from_millis(ms);
        match a.as_str() {
            "--timeout-ms" => out.timeout = d,
            "--lease-ms" => out.lease = Some(d),
            "--term-grace-ms" => out.term_grace = d,
            "--lease-grace-ms" => out.lease_grace = d,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if out.argv.is_empty() {
        return Err("no program after `--`".into());
    }
    Ok(out)
}

/// Why the tree is ended; the report's `ended`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Why {
    Exited,
    Timeout,
    Lease,
    Stopped,
    /// The scheduler is gone: nobody reads the report.
    Parent,
}

impl Why {
    fn word(self) -> &'static str {
        match self {
            Why::Exited => "exited",
            Why::Timeout => "timeout",
            Why::Lease => "lease",
            Why::Stopped => "stopped",
            Why::Parent => "parent",
        }
    }
}

/// Entry of the hidden subcommand; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("agentcron __supervise: {e}");
            return 2;
        }
    };
    match supervise(&args, None) {
        Ok(()) => 0,
        Err(e) => {
            report_spawn_error(&e);
            1
        }
    }
}

/// The report of a program that could not be started.
fn report_spawn_error(e: &io::Error) {
    report(&format!(
        "{{\"spawn_error\":{},\"errno\":{}}}",
        serde_json::Value::String(e.to_string()),
        e.raw_os_error().map_or("null".to_string(), |n| n.to_string())
    ));
}

/// Writes one report line; a gone scheduler (EPIPE) is fine.
fn report(line: &str) {
    report_to(CONTROL_FD, line);
}

fn report_to(fd: i32, line: &str) {
    let bytes = format!("{line}\n");
    // SAFETY: send(2) on a control socket with a valid buffer; MSG_NOSIGNAL so
    // a closed socket is an error, not SIGPIPE.
    unsafe {
        libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL);
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the
/// machine (std's `Instant` reads it too), so the scheduler can place an
/// instant we report on its own timeline.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes only the struct we pass.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

// ---------------------------------------------------------------------------
// The fork server

/// What the scheduler asks the fork server for: one supervised agent. Sent as
/// one message of a `SOCK_SEQPACKET` socket with [`REQUEST_FDS`] descriptors
/// (the attempt's control socket, then the agent's stdin, stdout, stderr).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SpawnRequest {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The supervisor's (and so the agent's) working directory.
    pub cwd: Option<String>,
    pub timeout_ms: u64,
    pub lease_ms: Option<u64>,
    pub term_grace_ms: u64,
    pub lease_grace_ms: u64,
}

impl SpawnRequest {
    fn args(self) -> Args {
        let ms = Duration::from_millis;
        Args {
            timeout: ms(self.timeout_ms),
            lease: self.lease_ms.map(ms),
            term_grace: ms(self.term_grace_ms),
            lease_grace: ms(self.lease_grace_ms),
            argv: self.argv,
            env: self.env,
        }
    }
}

/// The descriptors of a request: control socket, stdin, stdout, stderr.
pub const REQUEST_FDS: usize = 4;

/// The longest the fork server waits for one agent's exec before it goes on
/// with the next request.
const READY_WAIT: Duration = Duration::from_millis(100);

/// The largest request (argv, environment and folder of one agent).
const MAX_REQUEST: usize = 256 * 1024;

/// Entry of `agentcron __spawner`: the fork server. Its control socket (a
/// `SOCK_SEQPACKET` socket on fd 3) brings requests; for each it forks a
/// supervisor (see the module) and closes its copies of the request's
/// descriptors. It reaps its children, and exits when the scheduler closes
/// the socket. Single-threaded, so forking without exec is safe.
pub fn serve() -> i32 {
    let server = std::process::id();
    // SAFETY: plain syscalls on valid arguments; single-threaded, so the
    // mask is the process's.
    let sigfd = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::fcntl(CONTROL_FD, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK)
    };
    if sigfd < 0 {
        eprintln!("agentcron __spawner: {}", io::Error::last_os_error());
        return 1;
    }
    let mut buf = vec![0u8; MAX_REQUEST];
    let mut starting = Starting::new();
    loop {
        let mut fds = [readable(CONTROL_FD), readable(sigfd)];
        poll(&mut fds, None);
        if fds[1].revents != 0 {
            drain(sigfd);
            // SAFETY: waitpid(2) with a valid status pointer.
            while unsafe { libc::waitpid(-1, &mut 0, libc::WNOHANG) } > 0 {}
        }
        if fds[0].revents != 0 {
            match receive(&mut buf) {
                Received::Gone => return 0,
                Received::Nothing => {}
                Received::Request(len, fds) => {
                    starting.wait_for_room();
                    if let Some(ready) = fork_supervisor(&buf[..len], fds, sigfd, server) {
                        starting.push(ready);
                    }
                }
            }
        }
    }
}

enum Received {
    Gone,
    Nothing,
    Request(usize, Vec<OwnedFd>),
}

/// Reads one request and the descriptors that came with it.
fn receive(buf: &mut [u8]) -> Received {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // u64s: aligned for cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: a zeroed msghdr is valid; it points at buffers that outlive
    // the call, and recvmsg(2) writes only into them.
    let (n, msg) = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(CONTROL_FD, &mut msg, libc::MSG_CMSG_CLOEXEC);
        (n, msg)
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => Received::Nothing,
            _ => Received::Gone,
        };
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages recvmsg(2) filled in, with the
    // libc macros; SCM_RIGHTS data is an array of ints we now own.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<i32>();
                let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<i32>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n == 0 && fds.is_empty() {
        return Received::Gone;
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        if let Some(control) = fds.first() {
            report_to(
                control.as_raw_fd(),
                "{\"spawn_error\":\"the request to start the agent is too large\",\"errno\":null}",
            );
        }
        return Received::Nothing;
    }
    Received::Request(n as usize, fds)
}

/// The agents being started: the read ends of their supervisors' `ready`
/// pipes, each with the instant we stop waiting for it; and how many may
/// start at once.
struct Starting {
    ready: Vec<(OwnedFd, Instant)>,
    room: usize,
}

impl Starting {
    /// Agents exec'ing at once: one per core keeps the cores busy without
    /// making every agent's startup share them. Read once: std reads the
    /// cgroup files of /proc and /sys for it, which costs more than a fork.
    fn new() -> Self {
        Self {
            ready: Vec::new(),
            room: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }

    fn push(&mut self, ready: OwnedFd) {
        self.ready.push((ready, Instant::now() + READY_WAIT));
    }

    /// Waits until fewer than `room` agents are starting.
    fn wait_for_room(&mut self) {
        while self.ready.len() >= self.room {
            let now = Instant::now();
            self.ready.retain(|(_, until)| *until > now);
            let Some(first) = self.ready.iter().map(|(_, until)| *until).min() else {
                return;
            };
            let mut fds: Vec<libc::pollfd> = self
                .ready
                .iter()
                .map(|(fd, _)| readable(fd.as_raw_fd()))
                .collect();
            poll(&mut fds, Some(first.saturating_duration_since(now)));
            let mut done = fds.iter().map(|f| f.revents != 0);
            self.ready.retain(|_| !done.next().unwrap_or(false));
        }
    }
}

/// Forks the supervisor of one request; the server's copies of its
/// descriptors close when `fds` drops. Returns the read end of a pipe that
/// closes once the agent has exec'd (or could not be started).
fn fork_supervisor(request: &[u8], fds: Vec<OwnedFd>, sigfd: i32, server: u32) -> Option<OwnedFd> {
    let control = fds.first().map(AsRawFd::as_raw_fd)?;
    if fds.len() != REQUEST_FDS {
        report_to(
            control,
            "{\"spawn_error\":\"a request to start an agent came without its pipes\",\"errno\":null}",
        );
        return None;
    }
    let request: SpawnRequest = match serde_json::from_slice(request) {
        Ok(r) => r,
        Err(e) => {
            report_to(
                control,
                &format!(
                    "{{\"spawn_error\":{},\"errno\":null}}",
                    serde_json::Value::String(format!("a bad request to start an agent: {e}"))
                ),
            );
            return None;
        }
    };
    // Agents start a few at a time, as from a plain spawn loop (see
    // `Starting`): forked all at once, their startups would share the CPU
    // at once, each reaching its first instruction late.
    let mut pipe = [-1i32; 2];
    // SAFETY: pipe2(2) into a two-int array.
    let ready = if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } == 0 {
        // SAFETY: both ends are fresh descriptors we own.
        unsafe { Some((OwnedFd::from_raw_fd(pipe[0]), OwnedFd::from_raw_fd(pipe[1]))) }
    } else {
        None
    };
    // SAFETY: fork(2) in a single-threaded process: the child may do anything.
    let pid = unsafe { libc::fork() };
    if pid > 0 {
        return ready.map(|(read, _write)| read);
    }
    if pid < 0 {
        let e = io::Error::last_os_error();
        report_to(
            control,
            &format!(
                "{{\"spawn_error\":{},\"errno\":{}}}",
                serde_json::Value::String(format!("cannot start the supervisor: {e}")),
                e.raw_os_error().unwrap_or(0)
            ),
        );
        return None;
    }
    if pid == 0 {
        let ready = ready.map(|(read, write)| {
            drop(read);
            write
        });
        let code = supervisor_child(request, fds, sigfd, server, ready);
        // SAFETY: leaving the forked child without running the server's
        // exit path (nothing of it is ours to flush).
        unsafe { libc::_exit(code) }
    }
    None
}

/// In the forked child: the request's descriptors become 0–3, then the
/// supervisor runs as `__supervise` would.
fn supervisor_child(
    request: SpawnRequest,
    fds: Vec<OwnedFd>,
    sigfd: i32,
    server: u32,
    ready: Option<OwnedFd>,
) -> i32 {
    // SAFETY: plain syscalls on descriptors we own.
    unsafe {
        libc::close(sigfd);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // A server killed outright takes its supervisors' trees with it
        // (besides their control sockets closing when the scheduler dies).
        if !crate::process::dies_with(server, libc::SIGHUP) {
            return 1;
        }
        // A group of our own, as the agent's: never signalled with the scheduler's.
        libc::setpgid(0, 0);
    }
    // Control, stdin, stdout, stderr → 3, 0, 1, 2. Every received fd is above
    // 3 (the server's 0–3 are open), so no dup2 overwrites one still to copy.
    for (fd, target) in fds.iter().zip([CONTROL_FD, 0, 1, 2]) {
        // SAFETY: dup2(2) of an fd we own; the copy has no close-on-exec.
        if unsafe { libc::dup2(fd.as_raw_fd(), target) } < 0 {
            return 1;
        }
    }
    drop(fds);
    if let Some(dir) = &request.cwd
        && let Err(e) = std::env::set_current_dir(dir)
    {
        report_spawn_error(&e);
        return 1;
    }
    match supervise(&request.args(), ready) {
        Ok(()) => 0,
        Err(e) => {
            report_spawn_error(&e);
            1
        }
    }
}

fn drain(fd: i32) {
    let mut buf = [0u8; 1024];
    // SAFETY: read(2) into a valid buffer; the fd is non-blocking.
    while unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
}

/// The signals we take through a signalfd instead of handlers.
fn signal_set() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset to initialise.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// `ready`: a pipe closed once the agent has been started (or could not
/// be), so the fork server starts agents one after another.
fn supervise(args: &Args, ready: Option<OwnedFd>) -> io::Result<()> {
    let started_at = Instant::now();
    let set = signal_set();
    // SAFETY: plain syscalls on valid arguments; we are single-threaded here,
    // so blocking the signals for this thread blocks them for the process.
    let sigfd = unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        // Our control fd must not reach the agent.
        libc::fcntl(CONTROL_FD, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK)
    };
    if sigfd < 0 {
        return Err(io::Error::last_os_error());
    }
    let me = std::process::id();
    let agent = exec::Exec::new(&args.argv, &args.env);
    // The child stamps its clock as its last act before the execve that
    // succeeds: the agent ran from `exec_ns`, to within the exec itself. (Our
    // own clock after the clone returns can trail the agent by the tens of
    // ms a wakeup takes when many start at once.)
    let spawned = agent.and_then(|agent| agent.spawn());
    drop(ready);
    let (leader, exec_ns) = spawned?;
    report(&format!(
        "{{\"started\":{leader},\"supervisor\":{me},\"mono_ns\":{exec_ns}}}"
    ));
    // The tree alone holds the scheduler's pipes now, so their EOF means it is gone.
    // SAFETY: open/dup2 on fds we own.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for fd in 0..=2 {
                libc::dup2(null, fd);
            }
            libc::close(null);
        }
    }

    let mut tree = Tree {
        leader,
        status: None,
        sigfd,
    };
    let timeout_at = started_at.checked_add(args.timeout);
    let mut lease_at = args.lease.and_then(|l| Instant::now().checked_add(l));
    let mut orders = Vec::new();
    let why = loop {
        let next = [timeout_at, lease_at].into_iter().flatten().min();
        let now = Instant::now();
        if timeout_at.is_some_and(|t| now >= t) {
            break Why::Timeout;
        }
        if lease_at.is_some_and(|t| now >= t) {
            break Why::Lease;
        }
        let wait = next.map(|t| t.saturating_duration_since(now));
        let mut fds = [readable(CONTROL_FD), readable(sigfd)];
        poll(&mut fds, wait);
        if fds[1].revents != 0
            && let Some(why) = tree.signals()
        {
            break why;
        }
        if fds[0].revents != 0 {
            match read_orders(&mut orders) {
                Order::Gone => break Why::Parent,
                Order::Stop => break Why::Stopped,
                Order::Renew(ms) => {
                    if lease_at.is_some() {
                        lease_at = Instant::now().checked_add(Duration::from_millis(ms));
                    }
                }
                Order::None => {}
            }
        }
    };
    let grace = match why {
        Why::Lease | Why::Parent => args.lease_grace,
        _ => args.term_grace,
    };
    tree.end(grace);
    let status = tree.status.map_or("null".to_string(), |s| s.to_string());
    report(&format!("{{\"ended\":\"{}\",\"status\":{status}}}", why.word()));
    Ok(())
}

enum Order {
    None,
    Renew(u64),
    Stop,
    Gone,
}

/// Reads what the scheduler sent; the last renewal counts, a stop wins.
fn read_orders(buf: &mut Vec<u8>) -> Order {
    let mut chunk = [0u8; 1024];
    // SAFETY: read(2) into a valid buffer of that length.
    let n = unsafe { libc::read(CONTROL_FD, chunk.as_mut_ptr().cast(), chunk.len()) };
    if n == 0 {
        return Order::Gone;
    }
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => Order::None,
            _ => Order::Gone,
        };
    }
    buf.extend_from_slice(&chunk[..n as usize]);
    let mut order = Order::None;
    while let Some(i) = buf.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = buf.drain(..=i).collect();
        let line = String::from_utf8_lossy(&line);
        let line = line.trim();
        if line == "stop" {
            return Order::Stop;
        }
        if let Some(ms) = line.strip_prefix("renew ").and_then(|v| v.parse().ok()) {
            order = Order::Renew(ms);
        }
    }
    order
}

/// A pollfd waiting for `fd` to be readable.
fn readable(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

fn poll(fds: &mut [libc::pollfd], wait: Option<Duration>) {
    // Rounded up, so a deadline is not missed by a sub-millisecond early wake.
    let ms = wait.map_or(-1, |w| {
        i32::try_from(w.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
    });
    // SAFETY: poll(2) on a valid array of pollfds.
    unsafe {
        libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms);
    }
}

/// The agent's process tree: everything we (as subreaper) are an ancestor of.
struct Tree {
    leader: i32,
    /// The leader's raw wait status, once reaped.
    status: Option<i32>,
    sigfd: i32,
}

impl Tree {
    /// Drains the signalfd and reaps what exited. `Some(why)` for a signal that
    /// ends supervision (TERM/INT: stopped, HUP: parent gone), `Some(Exited)`
    /// when the leader was reaped.
    fn signals(&mut self) -> Option<Why> {
        let mut why = None;
        loop {
            // SAFETY: a zeroed signalfd_siginfo is valid storage for read(2).
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: read(2) of one record into `info`.
            let n = unsafe {
                libc::read(
                    self.sigfd,
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n != size as isize {
                break;
            }
            match info.ssi_signo as i32 {
                libc::SIGHUP => why = Some(Why::Parent),
                libc::SIGTERM | libc::SIGINT => why = why.or(Some(Why::Stopped)),
                _ => {}
            }
        }
        if self.reap() && why.is_none() {
            why = Some(Why::Exited);
        }
        why
    }

    /// Reaps every exited child; true once the leader has been reaped.
    fn reap(&mut self) -> bool {
        loop {
            let mut status = 0;
            // SAFETY: waitpid(2) with a valid status pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            if pid == self.leader {
                self.status = Some(status);
            }
        }
        self.status.is_some()
    }

    /// Whether any child is left, running or not yet reaped. Only peeks
    /// (WNOWAIT): reaping is `reap`'s, which records the leader's status.
    fn children_left(&self) -> bool {
        // SAFETY: waitid(2) into a zeroed siginfo_t, valid storage for it.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // -1 with ECHILD: no children at all.
        rc == 0
    }

    /// Signals the leader's group and every descendant we can see.
    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) sends a signal; it touches no memory. The group id
        // is the leader's pid (> 1), never ours.
        unsafe {
            libc::kill(-self.leader, sig);
        }
        for pid in descendants(std::process::id() as i32) {
            // SAFETY: as above; these are our descendants.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// Ends the tree: TERM (and CONT, so frozen members can act on it), up to
    /// `grace` for everything to exit, KILL, and a bounded wait to reap it all.
    fn end(&mut self, grace: Duration) {
        self.reap();
        if !self.children_left() {
            return;
        }
        self.signal(libc::SIGTERM);
        self.signal(libc::SIGCONT);
        if self.wait_all(grace) {
            return;
        }
        self.signal(libc::SIGKILL);
        self.wait_all(REAP_WAIT);
    }

    /// Reaps until no child is left or `within` passes; true if none is left.
    fn wait_all(&mut self, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            self.reap();
            if !self.children_left() {
                return true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let mut fds = [readable(self.sigfd)];
            // Wake at least every 50 ms: a process re-parented to us after
            // its parent died sends no SIGCHLD until it exits itself.
            poll(&mut fds, Some(left.min(Duration::from_millis(50))));
            if fds[0].revents != 0 {
                let _ = self.signals();
            }
        }
    }
}

/// Every process whose parent chain reaches `root` (from /proc), root excluded.
fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(ppid) = parent_of(pid) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if seen.insert(c) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// The parent pid in /proc/PID/stat (`pid (comm) state ppid …`; comm may hold
/// spaces and parentheses, so the fields are read after the last `)`).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_and_bad_ones_are_named() {
        let args: Vec<String> = [
            "--timeout-ms",
            "5000",
            "--lease-ms",
            "3000",
            "--",
            "sh",
            "-c",
            "x",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let a = parse(&args).unwrap();
        assert_eq!(a.timeout, Duration::from_secs(5));
        assert_eq!(a.lease, Some(Duration::from_secs(3)));
        assert_eq!(a.argv, ["sh", "-c", "x"]);
        assert!(
            parse(&["--lease-ms".into(), "x".into()])
                .unwrap_err()
                .contains("not a number")
        );
        assert!(parse(&["--".into()]).unwrap_err().contains("no program"));
        assert!(parse(&["--what".into(), "1".into(), "--".into(), "a".into()]).is_err());
    }

    #[test]
    fn stat_lines_with_odd_names_give_the_parent() {
        let me = std::process::id() as i32;
        let parent = parent_of(me).unwrap();
        assert!(parent > 0);
        assert!(descendants(parent).contains(&me));
    }
}
