//! The HTTP server holds under what anyone who can reach it may do, and
//! follows the scheduler (issue 44 items 5 and 7), through the real binary:
//! idle and half-sent connections past `[api] max_connections` are closed at
//! once and the rest after `[api] header_timeout` (a body that does not come
//! is bounded by it too), after which an authorised
//! request is answered; the scheduler raises its soft open-files limit (its
//! agents get the old one back); a reload that adds an `on_event` schedule is
//! served by the API at once. Everything waits with a deadline.

mod support;

use serde_json::Value;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::process::{Scheduler, bin, cli, wait_within};

const READ: &str = "read-token-for-tests-0001";
const OPERATE: &str = "operate-token-for-tests-0001";
const DEADLINE: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait_within(DEADLINE, what, f)
}

/// A config with the two tokens, `api` added to `[api]` and `rest` after it.
fn write_config(dir: &Path, api: &str, rest: &str) {
    std::fs::write(
        dir.join("tokens.toml"),
        format!(
            "[[token]]\nname = \"grafana\"\nrole = \"read\"\ntoken = \"{READ}\"\n\n\
             [[token]]\nname = \"chatops\"\nrole = \"operate\"\ntoken = \"{OPERATE}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("agentcron.toml"),
        format!(
            r#"
[scheduler]
database = "test.db"
lease = "10s"
shutdown_grace = "2s"
heartbeat = "500ms"

[api]
tokens_file = "tokens.toml"
{api}

[agents.quick]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; echo '{{\"event\":\"result\",\"status\":\"success\"}}'"]
timeout = "30s"

[[schedule]]
id = "nightly"
agent = "quick"
cron = "0 3 * * *"
{rest}
"#
        ),
    )
    .unwrap();
}

fn command(dir: &Path, port: u16) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args([
        "run",
        "--headless",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--config",
    ])
    .arg(dir.join("agentcron.toml"))
    .env("RUST_LOG", "info")
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(dir.join("scheduler.log")).unwrap());
    cmd
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("scheduler.log")).unwrap_or_default()
}

/// (status, body) of a request with a bearer token, on a fresh connection;
/// `None` if it cannot connect.
fn try_call(url: &str, token: &str, body: Option<&str>) -> Option<(u16, String)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let auth = format!("Bearer {token}");
    let answer = match body {
        Some(b) => agent.post(url).header("Authorization", &auth).send(b),
        None => agent.get(url).header("Authorization", &auth).call(),
    };
    let mut resp = answer.ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.body_mut().read_to_string().unwrap_or_default()))
}

fn get(url: &str, token: &str) -> (u16, String) {
    try_call(url, token, None).unwrap_or_else(|| panic!("GET {url}: no answer"))
}

/// Whether the server closed `conn` (end of stream or reset), reading what it
/// sends first; `false` if it stays open past `within`.
fn closed_within(conn: &mut TcpStream, within: Duration) -> bool {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                ) =>
            {
                return true;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return false,
            Err(e) => panic!("reading a held connection: {e}"),
        }
    }
}

/// Whether `conn` is still open now (nothing to read, no end of stream).
fn open_now(conn: &mut TcpStream) -> bool {
    conn.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 1];
    let open = matches!(conn.read(&mut buf), Err(e) if e.kind() == ErrorKind::WouldBlock);
    conn.set_nonblocking(false).unwrap();
    open
}

#[test]
fn idle_connections_past_the_cap_are_closed_at_once_and_the_rest_after_the_header_timeout() {
    const CAP: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    // Long enough that the connections are all still held while the one past
    // the cap is turned away; short enough to wait for.
    write_config(
        dir.path(),
        &format!("max_connections = {CAP}\nheader_timeout = \"4s\""),
        "",
    );
    let port = free_port();
    let _sched = Scheduler(command(dir.path(), port).spawn().unwrap());
    let addr = format!("127.0.0.1:{port}");

    // No probe request: a refused connect reaches nobody, and every accepted
    // one is held from here on, in the order the server accepts them.
    let first = wait_for("the server to listen", || TcpStream::connect(&addr).ok());
    let mut held = vec![first];
    for _ in 1..CAP {
        held.push(TcpStream::connect(&addr).unwrap());
    }
    // Some send half a request's headers and stop; one sends its headers and
    // not the body they announce.
    for conn in held.iter_mut().step_by(3) {
        conn.write_all(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\nAuthor")
            .unwrap();
    }
    held[1]
        .write_all(b"POST /api/v1/kill HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    let mut past = TcpStream::connect(&addr).unwrap();
    assert!(
        closed_within(&mut past, DEADLINE),
        "a connection past max_connections is closed\n{}",
        log(dir.path())
    );
    for (i, conn) in held.iter_mut().enumerate() {
        assert!(
            open_now(conn),
            "connection {i} is held until its header timeout, not turned away"
        );
    }
    assert!(
        log(dir.path()).contains("max_connections"),
        "the refusal is logged:\n{}",
        log(dir.path())
    );

    // Every held connection is closed by the header timeout (idle, half its
    // headers, or its body missing).
    for (i, conn) in held.iter_mut().enumerate() {
        assert!(
            closed_within(conn, DEADLINE),
            "held connection {i} closed after the header timeout"
        );
    }
    drop(held);

    // Room again: an authorised request is answered.
    let (code, body) = get(&format!("http://{addr}/api/v1/status"), READ);
    assert_eq!(code, 200, "{body}");

    // A kept-alive connection idle after its answer is closed too.
    let mut conn = TcpStream::connect(&addr).unwrap();
    conn.write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut got = vec![];
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains("\"alive\":true") {
        let n = conn.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "answered before closing: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    assert!(open_now(&mut conn), "kept alive after the answer");
    assert!(
        closed_within(&mut conn, DEADLINE),
        "an idle kept-alive connection is closed"
    );
}

/// The soft and hard "Max open files" of a process.
fn open_files_of(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let nums: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    (nums[0], nums[1])
}

#[test]
fn the_scheduler_raises_its_open_files_limit_and_its_agents_get_the_old_one_back() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "",
        r#"
[agents.counter]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; ulimit -n > nofile.txt; echo '{\"event\":\"result\",\"status\":\"success\"}'"]
timeout = "30s"

[[schedule]]
id = "tick"
agent = "counter"
every = "1s"
"#,
    );
    let mut hard: libc::rlimit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut hard) }, 0);
    let hard = hard.rlim_max.min(4096);
    let soft = 200.min(hard);
    assert!(
        soft < hard,
        "this test needs a hard open-files limit above {soft}"
    );
    let mut cmd = command(dir.path(), free_port());
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let sched = Scheduler(cmd.spawn().unwrap());
    let pid = sched.0.id();
    wait_for("the scheduler to start", || {
        log(dir.path())
            .contains("agentcron scheduler started")
            .then_some(())
    });
    assert_eq!(
        open_files_of(pid),
        (hard, hard),
        "soft limit raised to the hard one\n{}",
        log(dir.path())
    );
    assert!(
        log(dir.path()).contains("open-files limit raised"),
        "{}",
        log(dir.path())
    );
    let seen = wait_for("an agent to report its limit", || {
        std::fs::read_to_string(dir.path().join("nofile.txt"))
            .ok()
            .filter(|s| s.ends_with('\n'))
    });
    assert_eq!(
        seen.trim(),
        soft.to_string(),
        "agents run with the limit the scheduler got"
    );
}

#[test]
fn a_reload_that_adds_an_event_listener_is_served_by_the_api() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "", "");
    let port = free_port();
    let _sched = Scheduler(command(dir.path(), port).spawn().unwrap());
    let base = format!("http://127.0.0.1:{port}");
    wait_for("the API", || {
        try_call(&format!("{base}/api/v1/status"), READ, None).filter(|(code, _)| *code == 200)
    });
    let post = || {
        let url = format!("{base}/api/v1/events/deploy");
        try_call(&url, OPERATE, Some("{\"id\": \"release-42\"}"))
            .unwrap_or_else(|| panic!("POST {url}: no answer"))
    };
    let (code, body) = post();
    assert_eq!(code, 404, "no listener yet: {body}");

    write_config(
        dir.path(),
        "",
        "\n[[schedule]]\nid = \"on-deploy\"\nagent = \"quick\"\non_event = \"deploy\"\nclose_after = \"10m\"\n",
    );
    let out = cli(dir.path(), &["reload"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The CLI sees the new version at once; the API once the scheduler applied it.
    wait_for("the API to serve the reloaded config", || {
        let (code, _) = get(&format!("{base}/api/v1/schedules/on-deploy"), READ);
        (code == 200).then_some(())
    });
    let (code, body) = post();
    assert!(code == 202 || code == 200, "{code} {body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["posted"], true, "{body}");
    wait_for("a run of on-deploy", || {
        let (code, body) = get(&format!("{base}/api/v1/runs?schedule=on-deploy"), READ);
        let runs: Value = serde_json::from_str(&body).ok()?;
        (code == 200 && runs.as_array().is_some_and(|r| !r.is_empty())).then_some(())
    });
}
