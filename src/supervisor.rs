//! The per-attempt supervisor: `agentcron __supervise [limits] -- PROGRAM ARGS…`,
//! a small process between the scheduler and one agent (DESIGN.md "Recovery
//! rules", Containment). It makes itself a child subreaper, so every process
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
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

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
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut out = Args {
        timeout: Duration::MAX,
        lease: None,
        term_grace: Duration::from_secs(2),
        lease_grace: Duration::from_secs(2),
        argv: vec![],
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
    match supervise(&args) {
        Ok(()) => 0,
        Err(e) => {
            report(&format!(
                "{{\"spawn_error\":{},\"errno\":{}}}",
                serde_json::Value::String(e.to_string()),
                e.raw_os_error().map_or("null".to_string(), |n| n.to_string())
            ));
            1
        }
    }
}

/// Writes one report line; a gone scheduler (EPIPE) is fine.
fn report(line: &str) {
    let bytes = format!("{line}\n");
    // SAFETY: send(2) on the control fd with a valid buffer; MSG_NOSIGNAL so a
    // closed socket is an error, not SIGPIPE.
    unsafe {
        libc::send(CONTROL_FD, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL);
    }
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

fn supervise(args: &Args) -> io::Result<()> {
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
    let mut cmd = std::process::Command::new(&args.argv[0]);
    cmd.args(&args.argv[1..]).process_group(0);
    // SAFETY: only async-signal-safe calls between fork and exec. (std resets
    // the signal mask and SIGPIPE in the child before this runs.)
    unsafe {
        cmd.pre_exec(move || {
            // If we are killed outright (SIGKILL), at least the leader follows.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() as u32 != me {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    let leader = child.id() as i32;
    // We never wait through `child`: every child is reaped by waitpid(-1).
    drop(child);
    report(&format!("{{\"started\":{leader}}}"));
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
        let mut fds = [
            libc::pollfd {
                fd: CONTROL_FD,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sigfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
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
            let mut fds = [libc::pollfd {
                fd: self.sigfd,
                events: libc::POLLIN,
                revents: 0,
            }];
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
