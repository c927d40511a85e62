//! The scenario loader from the outside: a bad instant is a located error (never
//! the epoch), and every error points at the key that is wrong even when its
//! value is also written elsewhere in the file.

use agentcron::config::{Diagnostic, LoadError};
use agentcron::rehearsal::scenario::{Scenario, load};

/// A scenario header rehearsing the sample config; `body` follows on line 6.
fn scenario(body: &str) -> String {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-config/agentcron.toml");
    format!(
        "[rehearsal]\nname = \"x\"\nstart = \"2026-06-08T08:00:00+08:00\"\nend = \"2026-06-08T11:00:00+08:00\"\nconfig = \"{config}\"\n{body}"
    )
}

fn load_text(text: &str) -> Result<Scenario, LoadError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    load(&path)
}

fn error(text: &str) -> Diagnostic {
    match load_text(text) {
        Ok(_) => panic!("the scenario loaded but should be refused:\n{text}"),
        Err(LoadError::Invalid(mut d)) => {
            assert_eq!(d.len(), 1, "{d:?}");
            d.remove(0)
        }
        Err(e) => panic!("expected a located error, got {e}"),
    }
}

#[track_caller]
fn assert_at(d: &Diagnostic, line: usize, col: usize, message: &str) {
    assert_eq!((d.line, d.col), (line, col), "wrong location for: {d}");
    assert!(d.message.contains(message), "`{d}` should contain `{message}`");
}

#[test]
fn the_header_alone_loads() {
    let sc = load_text(&scenario("")).unwrap();
    assert_eq!(sc.start.to_rfc3339(), "2026-06-08T00:00:00+00:00");
    assert!(sc.end > sc.start);
}

#[test]
fn a_bad_instant_is_an_error_at_its_key_never_the_epoch() {
    // Each instant-valued key, with an impossible month and with garbage.
    let cases = [
        (
            "[[fault]]\nkind = \"crash\"\nat = \"2026-06-08T09:00:00Z\"\n\n[[fault]]\nkind = \"restart\"\nat = \"BAD\"\n",
            12,
            6,
            "fault.at",
        ),
        (
            "[[fault]]\nkind = \"crash\"\nat = \"2026-06-08T09:00:00Z\"\nrestart_at = \"BAD\"\n",
            9,
            14,
            "fault.restart_at",
        ),
        (
            "[[fault]]\nkind = \"clock_jump\"\nat = \"2026-06-08T09:00:00Z\"\nto = \"BAD\"\n",
            9,
            6,
            "fault.to",
        ),
        ("[[action]]\nkind = \"kill\"\nat = \"BAD\"\n", 8, 6, "action.at"),
        (
            "[[sim.gate]]\nschedule = \"daily-sales-report\"\nname = \"upstream_partition_ready\"\npass_from = \"BAD\"\n",
            9,
            13,
            "sim.gate.pass_from",
        ),
        (
            "[[expect]]\nschedule = \"daily-sales-report\"\nfinished_before = \"BAD\"\n",
            8,
            19,
            "expect.finished_before",
        ),
        (
            "[sim.agents.daily-sales-report]\nphases = [{ from = \"BAD\", attempts = [] }]\n",
            7,
            20,
            "sim.agents.daily-sales-report.phases.from",
        ),
    ];
    for bad in ["2026-13-01T09:00", "garbage"] {
        for (body, line, col, what) in cases {
            let d = error(&scenario(&body.replace("BAD", bad)));
            assert_at(
                &d,
                line,
                col,
                &format!("{what}: `{bad}` is not an RFC 3339 instant"),
            );
        }
    }
    let start = scenario("").replace("2026-06-08T08:00:00+08:00", "2026-13-01T09:00");
    assert_at(
        &error(&start),
        3,
        9,
        "rehearsal.start: `2026-13-01T09:00` is not an RFC 3339 instant",
    );
}

#[test]
fn an_error_points_at_the_wrong_key_not_the_first_copy_of_its_value() {
    // "10m" is a fine latency on line 7 and a bad instant on line 12.
    let d = error(&scenario(
        "[sim.agents.daily-sales-report]\nattempts = [{ latency = \"10m\" }]\n\n[[fault]]\nkind = \"crash\"\nat = \"2026-06-08T09:00:00Z\"\nrestart_at = \"10m\"\n",
    ));
    assert_at(&d, 12, 14, "fault.restart_at: `10m` is not an RFC 3339 instant");

    // The same for the checks made after reading: "meteor" is an expectation's
    // text on line 7 and a fault kind on line 10.
    let d = error(&scenario(
        "[[expect]]\ntext = \"meteor\"\nschedule = \"daily-sales-report\"\n[[fault]]\nkind = \"meteor\"\nat = \"2026-06-08T09:00:00Z\"\n",
    ));
    assert_at(&d, 10, 8, "unknown fault kind `meteor`");

    // Three scripts with the same latency; the third's class is the bad one.
    let d = error(&scenario(
        "[sim.agents.daily-sales-report]\nattempts = [\n  { latency = \"1m\", result = \"failure\", class = \"retryable\" },\n  { latency = \"1m\", result = \"failure\", class = \"retryable\" },\n  { latency = \"1m\", result = \"failure\", class = \"retry\" },\n]\n",
    ));
    assert_at(&d, 10, 49, "unknown class `retry`");

    // A schedule id that is also the name of the sim.agents table before it.
    let d = error(&scenario(
        "[sim.agents.daily-sales-report]\nattempts = []\n\n[[sim.gate]]\nschedule = \"daily-sales-report\"\nname = \"daily-sales-report\"\n",
    ));
    assert_at(&d, 11, 8, "has no gate `daily-sales-report`");
}

#[test]
fn a_missing_key_is_reported_where_its_table_starts() {
    let d = error(&scenario(
        "[[fault]]\nkind = \"crash\"\nat = \"2026-06-08T09:00:00Z\"\n\n[[fault]]\nkind = \"clock_jump\"\nat = \"2026-06-08T09:00:00Z\"\n",
    ));
    assert_at(&d, 10, 1, "fault clock_jump needs `to`");
}
