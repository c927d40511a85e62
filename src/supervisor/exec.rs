//! How the supervisor starts its agent: a vfork-style `clone(CLONE_VM |
//! CLONE_VFORK)` on a stack of its own, not a `fork`. The child borrows our
//! address space until its `execve`, so no page table is copied and none of
//! our pages is made copy-on-write (std's `pre_exec` hook rules its
//! `posix_spawn` path out, and its fork path copies them). Everything the
//! child needs (argv, environment, the candidate paths of a `PATH` search) is
//! built before the clone; the child only makes async-signal-safe syscalls and
//! writes two words of our memory: its clock before each `execve`, and the
//! error when every `execve` failed.

use std::ffi::{CString, OsStr, OsString, c_char, c_int, c_void};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// The child's stack: it calls a few syscalls and `clock_gettime`.
const STACK: usize = 64 * 1024;

/// glibc's `execvp` path when `PATH` is unset.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// An agent ready to be started: every string as the C side wants it.
pub(super) struct Exec {
    /// Where `execve` is tried, in order: the program itself when it has a
    /// `/`, else each `PATH` folder joined with it.
    paths: Vec<CString>,
    argv: Vec<CString>,
    env: Vec<CString>,
}

/// What the child and the supervisor share: read by the child, its two
/// results written by it while we wait (CLONE_VFORK).
struct Shared {
    paths: Vec<*const c_char>,
    argv: Vec<*const c_char>,
    /// `/bin/sh`, the path tried, then `argv[1..]`: glibc's `execvp` runs a
    /// file without a `#!` line this way (ENOEXEC). The child writes the path.
    sh_argv: *mut *const c_char,
    env: Vec<*const c_char>,
    /// The supervisor the child must die with.
    parent: u32,
    stamp: AtomicU64,
    errno: AtomicI32,
}

impl Exec {
    /// `argv[0]` is the program; `env` is added to (and overrides) ours.
    pub(super) fn new(argv: &[String], env: &[(String, String)]) -> io::Result<Self> {
        let cstring = |bytes: Vec<u8>| {
            CString::new(bytes).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a NUL byte in the command or environment",
                )
            })
        };
        let program = argv
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no program"))?;
        let mut vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        for (key, value) in env {
            let key = OsStr::new(key);
            vars.retain(|(k, _)| k != key);
            vars.push((key.to_owned(), value.into()));
        }
        let path_var = vars
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or(DEFAULT_PATH.to_vec(), |(_, v)| v.as_bytes().to_vec());
        let paths = candidates(program.as_bytes(), &path_var)
            .into_iter()
            .map(cstring)
            .collect::<io::Result<_>>()?;
        let env = vars
            .into_iter()
            .map(|(mut k, v)| {
                k.push("=");
                k.push(v);
                cstring(k.into_vec())
            })
            .collect::<io::Result<_>>()?;
        let argv = argv
            .iter()
            .map(|a| cstring(a.clone().into_bytes()))
            .collect::<io::Result<_>>()?;
        Ok(Self { paths, argv, env })
    }

    /// Starts the agent in a process group of its own, with an empty signal
    /// mask and SIGPIPE at its default, dying (SIGKILL) with us. Returns its
    /// pid and the CLOCK_MONOTONIC instant of its successful `execve`'s
    /// start, once that `execve` succeeded; or the error of the last one.
    pub(super) fn spawn(&self) -> io::Result<(i32, u64)> {
        let pointers = |v: &[CString]| {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        let argv = pointers(&self.argv);
        let mut sh_argv: Vec<*const c_char> = [c"/bin/sh".as_ptr(), std::ptr::null()]
            .into_iter()
            .chain(argv.iter().skip(1).copied())
            .collect();
        let shared = Shared {
            paths: self.paths.iter().map(|p| p.as_ptr()).collect(),
            argv,
            sh_argv: sh_argv.as_mut_ptr(),
            env: pointers(&self.env),
            parent: std::process::id(),
            stamp: AtomicU64::new(0),
            errno: AtomicI32::new(0),
        };
        // Not zeroed: only the child writes it (and touches only its top pages).
        let mut stack: Vec<u8> = Vec::with_capacity(STACK);
        // The stack grows down from its (16-byte aligned) top.
        let top = (stack.as_mut_ptr() as usize + STACK) & !15;
        // Every signal blocked across the clone: the child runs on our memory
        // and must never run one of our handlers there. It sets its own mask.
        // SAFETY: sigfillset/sigprocmask on local sets; clone(2) with
        // CLONE_VM | CLONE_VFORK suspends us until the child's execve or
        // exit, so `shared` and `stack` outlive its use of them, and the child
        // only makes async-signal-safe calls (see `child`).
        let pid = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old);
            let pid = libc::clone(
                child,
                top as *mut c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&shared as *const Shared).cast_mut().cast(),
            );
            let clone_error = io::Error::last_os_error();
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid < 0 {
                return Err(clone_error);
            }
            pid
        };
        drop((stack, sh_argv));
        let errno = shared.errno.load(Ordering::Acquire);
        if errno != 0 {
            // SAFETY: reaping the child we just made, which has exited.
            unsafe {
                libc::waitpid(pid, &mut 0, 0);
            }
            return Err(io::Error::from_raw_os_error(errno));
        }
        // No stamp: the child was killed before its first execve (it is
        // reaped, and reported, as the agent that ended at once).
        let stamp = match shared.stamp.load(Ordering::Acquire) {
            0 => crate::supervisor::monotonic_ns(),
            at => at,
        };
        Ok((pid, stamp))
    }
}

/// The paths `execvp(3)` would try for `program` under `path_var`.
fn candidates(program: &[u8], path_var: &[u8]) -> Vec<Vec<u8>> {
    if program.contains(&b'/') {
        return vec![program.to_vec()];
    }
    path_var
        .split(|&b| b == b':')
        .map(|dir| {
            // An empty entry is the current folder.
            let mut p = if dir.is_empty() {
                b".".to_vec()
            } else {
                dir.to_vec()
            };
            p.push(b'/');
            p.extend_from_slice(program);
            p
        })
        .collect()
}

/// The clone's child: set up, stamp, execve; on failure the error for the
/// supervisor and `_exit(127)`. Async-signal-safe only: it runs on the
/// supervisor's memory while the supervisor waits.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Shared` the supervisor keeps alive while it waits
    // for us; every call below is an async-signal-safe syscall.
    unsafe {
        let shared = &*(arg as *const Shared);
        let fail = |errno: c_int| -> ! {
            shared.errno.store(errno.max(1), Ordering::Release);
            libc::_exit(127)
        };
        // SIGPIPE is ignored in Rust programs; an ignored signal stays
        // ignored across exec.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        // If the supervisor is killed outright (SIGKILL), at least the leader follows.
        if !crate::process::dies_with(shared.parent, libc::SIGKILL) {
            libc::_exit(1);
        }
        if libc::setpgid(0, 0) != 0 {
            fail(*libc::__errno_location());
        }
        // The supervisor takes its signals through a signalfd; the agent must
        // get them (a TERM it never sees is no grace at all).
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        let mut error = libc::ENOENT;
        let mut denied = false;
        for &path in &shared.paths {
            // The last act before the exec: once it succeeds, the agent ran
            // from here, to within the exec itself.
            shared
                .stamp
                .store(crate::supervisor::monotonic_ns(), Ordering::Release);
            libc::execve(path, shared.argv.as_ptr(), shared.env.as_ptr());
            error = *libc::__errno_location();
            if error == libc::ENOEXEC {
                *shared.sh_argv.add(1) = path;
                libc::execve(c"/bin/sh".as_ptr(), shared.sh_argv, shared.env.as_ptr());
                error = *libc::__errno_location();
            }
            // As execvp: go on past a folder without it, stop at anything else.
            match error {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => fail(error),
            }
        }
        // As execvp: a file found but not executable is the error to report.
        fail(if denied { libc::EACCES } else { error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Waits for `pid` and returns its exit code.
    fn exit_code(pid: i32) -> i32 {
        let mut status = 0;
        // SAFETY: waitpid(2) for our own child with a valid status pointer.
        unsafe {
            libc::waitpid(pid, &mut status, 0);
        }
        libc::WEXITSTATUS(status)
    }

    #[test]
    fn path_search_tries_each_folder_and_an_empty_one_is_the_current() {
        let found = |p: &str, path: &str| -> Vec<String> {
            candidates(p.as_bytes(), path.as_bytes())
                .into_iter()
                .map(|c| String::from_utf8(c).unwrap())
                .collect()
        };
        assert_eq!(found("./x", "/bin"), ["./x"]);
        assert_eq!(found("/usr/bin/env", "/bin"), ["/usr/bin/env"]);
        assert_eq!(found("x", "/a::/b"), ["/a/x", "./x", "/b/x"]);
    }

    #[test]
    fn the_agent_gets_its_arguments_environment_and_runs_scripts_without_a_shebang() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let script = dir.path().join("script");
        // No `#!`: execve says ENOEXEC and /bin/sh runs it, as execvp does.
        std::fs::write(&script, "printf '%s %s' \"$1\" \"$EXEC_TEST\" > \"$2\"\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let argv = strings(&[script.to_str().unwrap(), "hello", out.to_str().unwrap()]);
        let exec = Exec::new(&argv, &[("EXEC_TEST".into(), "there".into())]).unwrap();
        let (pid, stamp) = exec.spawn().unwrap();
        assert!(stamp > 0 && stamp <= crate::supervisor::monotonic_ns());
        assert_eq!(exit_code(pid), 0);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "hello there");
    }

    #[test]
    fn a_program_that_cannot_run_is_the_os_error_of_its_exec() {
        let missing = Exec::new(&strings(&["/nonexistent/agentcron-exec-test"]), &[]).unwrap();
        assert_eq!(missing.spawn().unwrap_err().raw_os_error(), Some(libc::ENOENT));
        let not_on_path = Exec::new(
            &strings(&["agentcron-exec-test-nowhere"]),
            &[("PATH".into(), "/nonexistent:/also-not".into())],
        )
        .unwrap();
        assert_eq!(
            not_on_path.spawn().unwrap_err().raw_os_error(),
            Some(libc::ENOENT)
        );
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "").unwrap();
        let denied = Exec::new(&strings(&[plain.to_str().unwrap()]), &[]).unwrap();
        assert_eq!(denied.spawn().unwrap_err().raw_os_error(), Some(libc::EACCES));
    }
}
