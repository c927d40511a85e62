//! The HTTP server through the real binary (issue 17): `run --headless
//! --listen` on a free loopback port; probes, `/metrics` parsed as Prometheus
//! text with counters that move as runs happen, events posted twice with one
//! `Idempotency-Key` (one run), the token roles (401 / 403), bad bodies
//! (400), the CLI's JSON shapes, and `status` before and after the stop.
//! Everything waits on the server or the database with a deadline.

mod support;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::process::{Scheduler, bin, cli, wait_within};

const READ: &str = "read-token-for-tests-0001";
const OPERATE: &str = "operate-token-for-tests-0001";
const DEADLINE: Duration = Duration::from_secs(60);

/// A port nobody listens on now (the OS picks it; the server binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write_config(dir: &Path, extra_scheduler: &str) {
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
shutdown_grace = "5s"
heartbeat = "500ms"
{extra_scheduler}

[api]
tokens_file = "tokens.toml"

[agents.quick]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; echo '{{\"event\":\"usage\",\"tokens\":120,\"cost_usd\":0.25}}'; echo '{{\"event\":\"result\",\"status\":\"success\",\"summary\":\"done\"}}'"]
timeout = "30s"

[[schedule]]
id = "on-deploy"
agent = "quick"
on_event = "deploy"
close_after = "10m"

[[schedule]]
id = "nightly"
agent = "quick"
cron = "0 3 * * *"
"#
        ),
    )
    .unwrap();
}

fn start(dir: &Path, args: &[&str], log: &str) -> Scheduler {
    let log = std::fs::File::create(dir.join(log)).unwrap();
    Scheduler(
        Command::new(bin())
            .args(["run", "--headless", "--config"])
            .arg(dir.join("agentcron.toml"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

fn wait_for<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait_within(DEADLINE, what, f)
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// (status, body) of a request; `token` as a bearer token.
fn call(
    method: &str,
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> (u16, String) {
    let a = agent();
    let mut resp = match body {
        Some(b) => {
            let mut req = a.post(url);
            if let Some(t) = token {
                req = req.header("Authorization", &format!("Bearer {t}"));
            }
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            req.send(b)
        }
        None => {
            assert_eq!(method, "GET");
            let mut req = a.get(url);
            if let Some(t) = token {
                req = req.header("Authorization", &format!("Bearer {t}"));
            }
            req.call()
        }
    }
    .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap_or_default())
}

fn get(base: &str, path: &str, token: Option<&str>) -> (u16, String) {
    call("GET", &format!("{base}{path}"), token, &[], None)
}

fn post(base: &str, path: &str, token: Option<&str>, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    call(
        "POST",
        &format!("{base}{path}"),
        token,
        headers,
        Some(body.as_bytes()),
    )
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// The Prometheus text exposition, parsed strictly: every line a `# HELP`,
/// `# TYPE`, `# UNIT` or `# EOF` comment, or `name{labels} value` with a
/// metric name, quoted label values and a float value, each sample's family
/// declared by a `# TYPE` line before it. Returns (name, labels) → value.
fn parse_prometheus(text: &str) -> BTreeMap<(String, BTreeMap<String, String>), f64> {
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars().enumerate().all(|(i, c)| {
                c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
            })
    };
    let mut typed: Vec<String> = vec![];
    let mut out = BTreeMap::new();
    assert!(text.trim_end().ends_with("# EOF"), "ends with # EOF");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            match parts.next() {
                Some("TYPE") => {
                    let name = parts.next().expect("TYPE name");
                    let kind = parts.next().expect("TYPE kind");
                    assert!(name_ok(name), "{line}");
                    assert!(
                        ["counter", "gauge", "histogram", "unknown"].contains(&kind),
                        "{line}"
                    );
                    typed.push(name.to_string());
                }
                Some("HELP") | Some("UNIT") => assert!(name_ok(parts.next().unwrap_or("")), "{line}"),
                Some("EOF") => {}
                _ => panic!("unexpected comment: {line}"),
            }
            continue;
        }
        assert!(!line.is_empty(), "no blank lines");
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value: {line}"));
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("unclosed labels: {line}"));
                let mut labels = BTreeMap::new();
                for pair in body.split("\",").filter(|p| !p.is_empty()) {
                    let (k, v) = pair
                        .split_once("=\"")
                        .unwrap_or_else(|| panic!("bad label: {line}"));
                    assert!(name_ok(k), "label name: {line}");
                    labels.insert(k.to_string(), v.trim_end_matches('"').to_string());
                }
                (name, labels)
            }
        };
        assert!(name_ok(name), "metric name: {line}");
        assert!(
            typed.iter().any(|t| name == t
                || name
                    .strip_prefix(t.as_str())
                    .is_some_and(|s| ["_total", "_bucket", "_sum", "_count"].contains(&s))),
            "sample of an undeclared family: {line}"
        );
        out.insert((name.to_string(), labels), value);
    }
    out
}

/// The sum of a metric's samples whose labels include `with`.
fn sum(m: &BTreeMap<(String, BTreeMap<String, String>), f64>, name: &str, with: &[(&str, &str)]) -> f64 {
    m.iter()
        .filter(|((n, l), _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, v)| v)
        .sum()
}

fn metrics(base: &str) -> BTreeMap<(String, BTreeMap<String, String>), f64> {
    let (code, body) = get(base, "/metrics", Some(READ));
    assert_eq!(code, 200, "{body}");
    parse_prometheus(&body)
}

#[test]
fn the_prometheus_check_of_this_file_refuses_what_is_not_exposition_text() {
    let good = "# TYPE a_total counter\na_total{x=\"1\"} 2\n# EOF\n";
    assert_eq!(parse_prometheus(good).len(), 1);
    for bad in [
        "a_total 1\n# EOF\n",                     // no TYPE
        "# TYPE a counter\na{x=1} 2\n# EOF\n",    // unquoted label
        "# TYPE a counter\na_total two\n# EOF\n", // not a number
        "# TYPE a counter\na_total 1\n",          // no EOF
        "<html>oops</html>\n# EOF\n",
    ] {
        assert!(
            std::panic::catch_unwind(|| parse_prometheus(bad)).is_err(),
            "accepted {bad:?}"
        );
    }
}

#[test]
fn headless_with_listen_serves_probes_metrics_api_and_status() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut sched = start(
        dir.path(),
        &["--listen", &format!("127.0.0.1:{port}")],
        "scheduler.log",
    );
    let log = || std::fs::read_to_string(dir.path().join("scheduler.log")).unwrap_or_default();

    wait_for("/livez", || {
        agent()
            .get(&format!("{base}/livez"))
            .call()
            .ok()
            .filter(|r| r.status() == 200)
    });
    let (code, body) = get(&base, "/readyz", None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(json_of(&body)["ready"], true);

    // `status` sees the scheduler alive once its first heartbeat is in.
    let out = wait_for("status exit 0", || {
        let out = cli(dir.path(), &["status", "--json"]);
        (out.status.code() == Some(0)).then_some(out)
    });
    let st = json_of(&String::from_utf8_lossy(&out.stdout));
    for key in [
        "ok",
        "at",
        "schedulers",
        "no_scheduler_alive",
        "kill_switch",
        "paused",
        "open_circuits",
        "runs",
        "approvals_waiting",
        "dead_letters",
        "backfill_pending",
        "schedules",
    ] {
        assert!(st.get(key).is_some(), "status --json has {key}: {st}");
    }
    assert_eq!(st["schedulers"]["alive"], 1);
    assert_eq!(st["schedulers"]["list"][0]["state"], "alive");
    assert_eq!(st["kill_switch"]["on"], false);
    assert!(st["no_scheduler_alive"].is_null());
    assert_eq!(st["schedules"][1]["id"], "nightly");
    assert!(
        st["schedules"][1]["next_fire"]
            .as_str()
            .unwrap()
            .ends_with("T03:00:00.000Z")
    );
    // The API's status is the same document.
    let (code, body) = get(&base, "/api/v1/status", Some(READ));
    assert_eq!(code, 200, "{body}");
    assert_eq!(json_of(&body)["schedulers"]["alive"], 1);
    assert_eq!(json_of(&body)["config_file_invalid"], false, "{body}");
    assert_eq!(st["config_file_invalid"], false);
    // A config file broken on disk (not reloaded): both say so, with the
    // line and column and without the file's path; the scheduler runs on.
    let file = dir.path().join("agentcron.toml");
    let good = std::fs::read_to_string(&file).unwrap();
    let broken = "\n[[schedule]]\nid = \"broken\"\nagent = \"no-such-agent\"\nevery = \"1m\"\n";
    std::fs::write(&file, format!("{good}{broken}")).unwrap();
    let (code, body) = get(&base, "/api/v1/status", Some(READ));
    assert_eq!(code, 200, "{body}");
    let api_st = json_of(&body);
    assert_eq!(api_st["config_file_invalid"], true, "{body}");
    let why = api_st["config_file_error"].as_str().unwrap();
    assert!(
        why.contains(':') && !why.contains(dir.path().to_str().unwrap()),
        "{why}"
    );
    let cli_st = json_of(&String::from_utf8_lossy(
        &cli(dir.path(), &["status", "--json"]).stdout,
    ));
    assert_eq!(cli_st["config_file_invalid"], true);
    assert_eq!(cli_st["config_file_error"], api_st["config_file_error"]);
    assert_eq!(api_st["schedulers"]["alive"], 1);
    std::fs::write(&file, good).unwrap();

    let before = metrics(&base);
    let succeeded = |m: &BTreeMap<_, _>| sum(m, "agentcron_runs_finished_total", &[("state", "succeeded")]);
    assert_eq!(sum(&before, "agentcron_schedulers_alive", &[]), 1.0);
    assert_eq!(sum(&before, "agentcron_kill_switch", &[]), 0.0);
    assert!(
        sum(
            &before,
            "agentcron_schedule_next_fire_timestamp_seconds",
            &[("schedule", "nightly")]
        ) > 1.7e9,
        "next fire as Unix seconds"
    );

    // Tokens and roles: no token 401, a read token may not act (403).
    let deploy = "/api/v1/events/deploy";
    let (code, body) = post(&base, deploy, None, &[("Idempotency-Key", "d-1")], "{}");
    assert_eq!(code, 401, "{body}");
    let (code, body) = post(&base, deploy, Some("not-a-token-at-all-xx"), &[], "{}");
    assert_eq!(code, 401, "{body}");
    let (code, body) = post(&base, deploy, Some(READ), &[("Idempotency-Key", "d-1")], "{}");
    assert_eq!(code, 403, "{body}");
    assert!(
        json_of(&body)["error"].as_str().unwrap().contains("read role"),
        "{body}"
    );
    let (code, _) = get(&base, "/api/v1/runs", None);
    assert_eq!(code, 401, "reads need a token too");
    let (code, _) = get(&base, "/metrics", None);
    assert_eq!(code, 401, "with tokens configured, /metrics needs a read token");
    assert_eq!(get(&base, "/readyz", None).0, 200, "the probes never do");
    // Bad bodies: malformed and oversized JSON are 400s with a message.
    let (code, body) = post(&base, deploy, Some(OPERATE), &[], "{\"build\": ");
    assert_eq!(code, 400, "{body}");
    assert!(
        json_of(&body)["error"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{body}"
    );
    let huge = format!("{{\"blob\": \"{}\"}}", "x".repeat(100 * 1024));
    let (code, body) = post(&base, deploy, Some(OPERATE), &[], &huge);
    assert_eq!(code, 400, "{body}");
    assert!(
        json_of(&body)["error"].as_str().unwrap().contains("too large"),
        "{body}"
    );
    let (code, body) = post(&base, "/api/v1/kill", Some(OPERATE), &[], "{\"by\": \"x\"}");
    assert_eq!(code, 400, "a mutation needs a reason: {body}");
    let (code, body) = post(&base, "/api/v1/events/nobody-listens", Some(OPERATE), &[], "{}");
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("events listened to: deploy"), "{body}");
    let (code, body) = get(&base, "/api/v1/runs?state=done", Some(READ));
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("unknown state"), "{body}");
    let (code, _) = get(&base, "/api/v1/runs?limit=lots", Some(READ));
    assert_eq!(code, 400);
    let (code, _) = get(&base, "/api/v1/runs/abc", Some(READ));
    assert_eq!(code, 400);
    let (code, _) = get(&base, "/api/v1/runs/999", Some(READ));
    assert_eq!(code, 404);

    // One event posted twice with one Idempotency-Key: one run.
    let payload = "{\"build\": 41}";
    let (code, body) = post(
        &base,
        deploy,
        Some(OPERATE),
        &[("Idempotency-Key", "deploy-41")],
        payload,
    );
    assert_eq!(code, 202, "{body}");
    assert_eq!(
        json_of(&body),
        json!({"name": "deploy", "id": "deploy-41", "posted": true})
    );
    let (code, body) = post(
        &base,
        deploy,
        Some(OPERATE),
        &[("Idempotency-Key", "deploy-41")],
        payload,
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(json_of(&body)["posted"], false);
    let runs = wait_for("the deploy run succeeds", || {
        let (_, body) = get(&base, "/api/v1/runs?schedule=on-deploy", Some(READ));
        let v = json_of(&body);
        let done = v.as_array()?.iter().any(|r| r["state"] == "succeeded");
        done.then_some(v)
    });
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "one run for two posts: {runs}\n{}",
        log()
    );
    assert_eq!(runs[0]["window_key"], "deploy-41");
    // The `id` field of the body serves when there is no header.
    let (code, body) = post(&base, deploy, Some(OPERATE), &[], "{\"id\": \"deploy-41\"}");
    assert_eq!(
        (code, json_of(&body)["posted"].clone()),
        (200, json!(false)),
        "{body}"
    );

    // The counters moved by that one run.
    let after = metrics(&base);
    assert_eq!(
        succeeded(&after) - succeeded(&before),
        1.0,
        "runs_finished_total{{state=\"succeeded\"}} +1"
    );
    assert_eq!(
        sum(
            &after,
            "agentcron_windows_opened_total",
            &[("schedule", "on-deploy")]
        ) - sum(
            &before,
            "agentcron_windows_opened_total",
            &[("schedule", "on-deploy")]
        ),
        1.0
    );
    assert_eq!(
        sum(
            &after,
            "agentcron_attempts_total",
            &[("outcome", "succeeded"), ("class", "none")]
        ),
        1.0
    );
    assert_eq!(
        sum(&after, "agentcron_tokens_total", &[("schedule", "on-deploy")]),
        120.0
    );
    assert_eq!(
        sum(&after, "agentcron_cost_usd_total", &[("schedule", "on-deploy")]),
        0.25
    );
    assert_eq!(sum(&after, "agentcron_start_lateness_seconds_count", &[]), 1.0);
    // The live loop's ticks, timed (issue 44: a flood's tick p99 is read here).
    assert!(sum(&after, "agentcron_tick_duration_seconds_count", &[]) >= 1.0);
    assert_eq!(sum(&after, "agentcron_runs", &[("state", "succeeded")]), 1.0);
    for (name, labels) in after.keys() {
        for k in labels.keys() {
            assert!(
                [
                    "tenant", "schedule", "state", "reason", "outcome", "class", "gate", "result", "sink",
                    "owner", "le"
                ]
                .contains(&k.as_str()),
                "label {k} on {name}"
            );
        }
    }

    // docs/OPERATIONS.md documents every metric served, and the shipped dashboard
    // asks only for metrics that exist.
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/OPERATIONS.md")).unwrap();
    // Every family /metrics declares, by the name its samples carry.
    let (_, raw) = get(&base, "/metrics", Some(READ));
    let families: std::collections::BTreeSet<String> = raw
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| {
            if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            }
        })
        .collect();
    assert!(families.len() >= 15, "{families:?}");
    for f in &families {
        assert!(
            readme.contains(&format!("`{f}`")),
            "docs/OPERATIONS.md documents {f}"
        );
    }
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-config/grafana-dashboard.json"
    ))
    .unwrap();
    for word in dashboard.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("agentcron_") {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| word.strip_suffix(s))
                .unwrap_or(word);
            assert!(
                families.contains(base) || readme.contains(&format!("`{base}`")),
                "the dashboard asks for {word}, which is neither served nor documented"
            );
        }
    }
    for endpoint in [
        "/livez",
        "/readyz",
        "/metrics",
        "/api/v1/status",
        "/api/v1/schedules",
        "/api/v1/runs",
        "/api/v1/explain",
        "/api/v1/events",
        "/api/v1/kill",
        "/api/v1/unkill",
    ] {
        assert!(
            readme.contains(&format!("`GET {endpoint}")) || readme.contains(&format!("`POST {endpoint}")),
            "docs/OPERATIONS.md documents {endpoint}"
        );
    }

    // The API returns the CLI's JSON shapes.
    let id = runs[0]["id"].as_i64().unwrap();
    let out = cli(dir.path(), &["runs", "--schedule", "on-deploy", "--json"]);
    assert_eq!(
        json_of(&String::from_utf8_lossy(&out.stdout)),
        runs,
        "GET /runs is `runs --json`"
    );
    let (code, body) = get(&base, &format!("/api/v1/runs/{id}"), Some(READ));
    assert_eq!(code, 200);
    let out = cli(dir.path(), &["show", &id.to_string(), "--json"]);
    assert_eq!(
        json_of(&String::from_utf8_lossy(&out.stdout)),
        json_of(&body),
        "GET /runs/ID is `show --json`"
    );
    let (code, body) = get(&base, "/api/v1/explain/on-deploy?window=deploy-41", Some(READ));
    assert_eq!(code, 200, "{body}");
    let out = cli(
        dir.path(),
        &["explain", "on-deploy", "--window", "deploy-41", "--json"],
    );
    assert_eq!(
        json_of(&String::from_utf8_lossy(&out.stdout)),
        json_of(&body),
        "GET /explain is `explain --json`"
    );
    let (code, body) = get(&base, "/api/v1/explain/on-deploy?window=nope", Some(READ));
    assert_eq!(code, 404, "{body}");
    let (code, body) = get(&base, "/api/v1/schedules/on-deploy", Some(READ));
    assert_eq!(code, 200, "{body}");
    assert_eq!(json_of(&body)["runs"][0]["id"], id);
    let (code, _) = get(&base, "/api/v1/schedules/nope", Some(READ));
    assert_eq!(code, 404);

    // Operator actions through the API, recorded with who and why.
    let (code, body) = post(
        &base,
        "/api/v1/kill",
        Some(OPERATE),
        &[],
        "{\"reason\": \"incident 7\"}",
    );
    assert_eq!(code, 200, "{body}");
    let out = cli(dir.path(), &["status", "--json"]);
    assert_eq!(out.status.code(), Some(1), "kill switch on: status exits 1");
    let st = json_of(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(st["kill_switch"]["on"], true);
    assert_eq!(
        st["kill_switch"]["by"], "chatops",
        "the token's name is the default `by`"
    );
    assert_eq!(st["kill_switch"]["reason"], "incident 7");
    assert_eq!(sum(&metrics(&base), "agentcron_kill_switch", &[]), 1.0);
    let (code, _) = post(
        &base,
        "/api/v1/unkill",
        Some(OPERATE),
        &[],
        "{\"reason\": \"over\", \"by\": \"ana\"}",
    );
    assert_eq!(code, 200);
    let (code, body) = post(
        &base,
        "/api/v1/schedules/nightly/pause",
        Some(OPERATE),
        &[],
        "{\"reason\": \"migration\"}",
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(json_of(&body)["paused"], true);
    // Repeated, an action already in effect is no error (as on the command
    // line): 200, nothing changed, the first reason kept and said.
    let (code, body) = post(
        &base,
        "/api/v1/schedules/nightly/pause",
        Some(OPERATE),
        &[],
        "{\"reason\": \"again\"}",
    );
    assert_eq!(code, 200, "{body}");
    let again = json_of(&body);
    assert_eq!(again["paused"], true);
    let already = again["already"].as_str().unwrap_or_default();
    assert!(
        already.contains("already paused") && already.contains("migration"),
        "{body}"
    );
    let (code, body) = post(
        &base,
        "/api/v1/unkill",
        Some(OPERATE),
        &[],
        "{\"reason\": \"over again\"}",
    );
    assert_eq!(code, 200, "{body}");
    let again = json_of(&body);
    assert_eq!(again["kill_switch"], false);
    assert!(
        again["already"]
            .as_str()
            .is_some_and(|a| a.contains("already off")),
        "{body}"
    );
    assert_eq!(again["by"], "ana", "who turned it off first: {body}");
    let (code, body) = post(
        &base,
        "/api/v1/runs/{id}/approve"
            .replace("{id}", &id.to_string())
            .as_str(),
        Some(OPERATE),
        &[],
        "{\"reason\": \"x\"}",
    );
    assert_eq!(code, 409, "a succeeded run is not waiting for a human: {body}");
    let (code, _) = post(
        &base,
        "/api/v1/runs/1/explode",
        Some(OPERATE),
        &[],
        "{\"reason\": \"x\"}",
    );
    assert_eq!(code, 404);
    assert!(
        !log().contains(OPERATE) && !log().contains(READ),
        "tokens are never logged"
    );

    // A clean stop: the registry says stopped at once, and status exits 1.
    // SAFETY: kill(2) on the child we spawned.
    unsafe {
        libc::kill(sched.0.id() as i32, libc::SIGTERM);
    }
    assert!(sched.0.wait().unwrap().success(), "{}", log());
    let out = cli(dir.path(), &["status"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("NO SCHEDULER ALIVE"), "{text}");
    assert!(text.contains("stopped"), "{text}");
}

#[test]
fn without_tokens_only_probes_and_metrics_answer() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    write_config(dir.path(), &format!("listen = \"127.0.0.1:{port}\""));
    // No [api] tokens_file.
    let cfg = std::fs::read_to_string(dir.path().join("agentcron.toml")).unwrap();
    std::fs::write(
        dir.path().join("agentcron.toml"),
        cfg.replace("[api]\ntokens_file = \"tokens.toml\"\n", ""),
    )
    .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let _sched = start(dir.path(), &[], "scheduler.log");
    wait_for("/livez", || {
        agent()
            .get(&format!("{base}/livez"))
            .call()
            .ok()
            .filter(|r| r.status() == 200)
    });
    assert_eq!(get(&base, "/readyz", None).0, 200);
    let (code, body) = get(&base, "/metrics", None);
    assert_eq!(code, 200);
    parse_prometheus(&body);
    let (code, body) = get(&base, "/api/v1/status", Some(READ));
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("no tokens are configured"), "{body}");
    assert_eq!(
        post(&base, "/api/v1/kill", Some(OPERATE), &[], "{\"reason\": \"x\"}").0,
        401
    );
}

#[test]
fn a_bad_listen_address_or_tokens_file_stops_the_command_before_it_schedules() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    let out = Command::new(bin())
        .args(["run", "--headless", "--listen", "nonsense", "--config"])
        .arg(dir.path().join("agentcron.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("IP:PORT"));
    std::fs::write(
        dir.path().join("tokens.toml"),
        "[[token]]\nname = \"x\"\nrole = \"root\"\ntoken = \"0123456789abcdef0\"\n",
    )
    .unwrap();
    let out = Command::new(bin())
        .args([
            "run",
            "--headless",
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
            "--config",
        ])
        .arg(dir.path().join("agentcron.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tokens file") && err.contains("root"), "{err}");
    assert!(!dir.path().join("test.db").exists() || cli(dir.path(), &["runs", "--json"]).stdout == b"[]\n");
    let out = cli(dir.path(), &["status", "--listen", "127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(2), "--listen belongs to the scheduler");
    // `[scheduler] listen` is checked with the config.
    write_config(dir.path(), "listen = \"everywhere\"");
    let out = cli(dir.path(), &["check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`listen`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The metric families docs/OPERATIONS.md lists (its metrics table), by the
/// name their samples carry: the test follows the docs.
fn documented_families() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/OPERATIONS.md")).unwrap();
    let mut out = vec![];
    for line in doc.lines().filter(|l| l.starts_with("| `agentcron_")) {
        let first = line.split('|').nth(1).unwrap_or_default();
        for name in first.split('`').filter(|w| w.starts_with("agentcron_")) {
            out.push(name.to_string());
        }
    }
    assert!(out.len() >= 20, "the metrics table was found: {out:?}");
    out
}

/// Issue 52: the API is no looser than the command line, and every error is
/// JSON without a path of this machine; `/metrics` on a fresh ledger exposes
/// every documented family (zero series), so `rate()` sees 0, not no data.
#[test]
fn the_api_checks_what_the_cli_checks_and_every_error_is_json_without_paths() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    let cfg = std::fs::read_to_string(dir.path().join("agentcron.toml")).unwrap();
    std::fs::write(
        dir.path().join("agentcron.toml"),
        format!(
            "{cfg}\n[agents.careful]\nkind = \"command\"\n\
             command = [\"sh\", \"-c\", \"cat >/dev/null; exit 77\"]\n\
             steps = [{{ name = \"fetch\" }}, {{ name = \"deliver\", side_effect = true }}]\n\n\
             [[schedule]]\nid = \"refund\"\nagent = \"careful\"\non_event = \"refund\"\nclose_after = \"10m\"\n\n\
             [[schedule.gate]]\nkind = \"file_exists\"\nname = \"ledger_ready\"\npath = \"agentcron.toml\"\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let _sched = start(
        dir.path(),
        &["--listen", &format!("127.0.0.1:{port}")],
        "scheduler.log",
    );
    let log = || std::fs::read_to_string(dir.path().join("scheduler.log")).unwrap_or_default();
    wait_for("the scheduler is alive", || {
        (cli(dir.path(), &["status", "--json"]).status.code() == Some(0)).then_some(())
    });

    // A fresh ledger: nothing has happened, every documented family is there.
    let (code, raw) = get(&base, "/metrics", Some(READ));
    assert_eq!(code, 200, "{raw}");
    let fresh = parse_prometheus(&raw);
    for family in documented_families() {
        let sample = |n: &str| fresh.keys().any(|(name, _)| name == n);
        assert!(
            sample(&family) || sample(&format!("{family}_count")),
            "documented family {family} has a series on a fresh ledger:\n{raw}"
        );
    }
    for schedule in ["on-deploy", "nightly", "refund"] {
        let has = |name: &str, with: &[(&str, &str)]| {
            fresh.iter().any(|((n, l), v)| {
                n == name
                    && *v == 0.0
                    && l.get("schedule").map(String::as_str) == Some(schedule)
                    && with
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
        };
        assert!(has("agentcron_windows_opened_total", &[]), "{schedule}");
        assert!(
            has("agentcron_runs_finished_total", &[("state", "failed")]),
            "{schedule}"
        );
        assert!(
            has("agentcron_windows_skipped_total", &[("reason", "circuit")]),
            "{schedule}"
        );
        assert!(
            has(
                "agentcron_attempts_total",
                &[("outcome", "failed"), ("class", "retryable")]
            ),
            "{schedule}"
        );
    }
    assert_eq!(
        sum(
            &fresh,
            "agentcron_gate_checks_total",
            &[
                ("schedule", "refund"),
                ("gate", "ledger_ready"),
                ("result", "wait")
            ]
        ),
        0.0
    );
    assert!(fresh.contains_key(&(
        "agentcron_runs".to_string(),
        BTreeMap::from([("state".to_string(), "needs_human".to_string())])
    )));

    // A lower-case scheme is the same scheme (RFC 7235).
    for scheme in ["bearer", "BEARER"] {
        let mut resp = agent()
            .get(&format!("{base}/api/v1/status"))
            .header("authorization", &format!("{scheme} {READ}"))
            .call()
            .unwrap();
        assert_eq!(
            resp.status().as_u16(),
            200,
            "{scheme}: {}",
            resp.body_mut().read_to_string().unwrap_or_default()
        );
    }

    // Unknown routes (404) and known routes asked with the wrong method (405)
    // answer JSON with an error, like every other 4xx.
    for (code, body) in [get(&base, "/api/v1/nope", Some(READ)), get(&base, "/nope", None)] {
        assert_eq!(code, 404, "{body}");
        assert!(json_of(&body)["error"].is_string(), "{body}");
    }
    for (code, body) in [
        get(&base, "/api/v1/kill", Some(OPERATE)),
        post(&base, "/api/v1/status", Some(OPERATE), &[], "{}"),
        post(&base, "/metrics", Some(OPERATE), &[], "{}"),
    ] {
        assert_eq!(code, 405, "{body}");
        assert!(
            json_of(&body)["error"]
                .as_str()
                .is_some_and(|e| e.contains("does not take")),
            "{body}"
        );
    }

    // No path of this machine in an error: explain of an unknown schedule
    // names the config, not where it lies.
    let (code, body) = get(&base, "/api/v1/explain/nope", Some(READ));
    assert_eq!(code, 404, "{body}");
    let v = json_of(&body);
    assert!(v["error"].as_str().is_some_and(|e| e.contains("nope")), "{body}");
    let folder = dir.path().canonicalize().unwrap();
    for path in [dir.path().to_path_buf(), folder] {
        let path = path.display().to_string();
        assert!(!body.contains(&path), "{path} in {body}");
    }
    assert!(!body.contains("agentcron.toml"), "{body}");

    // approve --resume-after with a step the run does not have: refused, as
    // on the command line (400: the request is wrong, whatever the state).
    let (code, body) = post(
        &base,
        "/api/v1/events/refund",
        Some(OPERATE),
        &[("Idempotency-Key", "r-1")],
        "{}",
    );
    assert_eq!(code, 202, "{body}");
    let run = wait_for("the refund run waits for a human", || {
        let (_, body) = get(&base, "/api/v1/runs?schedule=refund", Some(READ));
        let v = json_of(&body);
        v.as_array()?
            .iter()
            .find(|r| r["state"] == "needs_human")
            .and_then(|r| r["id"].as_i64())
    });
    let approve = format!("/api/v1/runs/{run}/approve");
    let (code, body) = post(
        &base,
        &approve,
        Some(OPERATE),
        &[],
        "{\"reason\": \"checked\", \"resume_after\": \"nosuchstep\"}",
    );
    assert_eq!(code, 400, "{body}\n{}", log());
    let e = json_of(&body)["error"].as_str().unwrap_or_default().to_string();
    assert!(
        e.contains("`nosuchstep` is not a step of refund's agent `careful`; its steps: fetch, deliver"),
        "{e}"
    );
    let (_, body) = get(&base, &format!("/api/v1/runs/{run}"), Some(READ));
    assert_eq!(json_of(&body)["state"], "needs_human", "nothing changed: {body}");
    let out = cli(
        dir.path(),
        &[
            "approve",
            &run.to_string(),
            "--reason",
            "x",
            "--resume-after",
            "nosuchstep",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "the command line refuses it too");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&e),
        "one message for both"
    );
    let (code, body) = post(
        &base,
        &approve,
        Some(OPERATE),
        &[],
        "{\"reason\": \"checked\", \"resume_after\": \"fetch\"}",
    );
    assert_eq!(code, 200, "{body}");
    let (_, body) = get(&base, &format!("/api/v1/runs/{run}"), Some(READ));
    assert_eq!(json_of(&body)["resume_after"], "fetch", "{body}");
}
