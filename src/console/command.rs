//! The `:` command line: parsing only. `update` turns a [`Command`] into
//! dialogs, screens and [`super::app::Cmd`]s.

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use chrono_tz::Tz;

/// A parsed `:` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Quit,
    Help,
    /// `:log`: the embedded scheduler's log, its last lines.
    Log,
    Refresh,
    Goto(i64),
    Theme(String),
    Rehearse(String),
    Pause(String),
    Resume(String),
    Trigger(String),
    Close(String),
    /// `:approve RUN [STEP]`: STEP is `--resume-after`.
    Approve {
        run: i64,
        resume_after: Option<String>,
    },
    Reject(i64),
    Requeue(i64),
    /// `:kill [--cancel-running]`.
    Kill {
        cancel_running: bool,
    },
    Unkill,
    /// `:reload`: the config file's plan, then every scheduler re-reads it.
    Reload,
    /// `:approve-config VERSION`: apply a config version waiting for approval.
    ApproveConfig(i64),
    /// `:backfill SCHEDULE FROM TO`: instants as typed (RFC 3339 or a date).
    Backfill {
        schedule: String,
        from: String,
        to: String,
    },
}

/// One `:` command as the help lists it.
#[derive(Debug, Clone, Copy)]
pub struct CommandDoc {
    pub verb: &'static str,
    pub arg: &'static str,
    pub description: &'static str,
    /// Changes the world (hidden by `--read-only`).
    pub operator: bool,
}

const fn doc(verb: &'static str, arg: &'static str, description: &'static str, operator: bool) -> CommandDoc {
    CommandDoc {
        verb,
        arg,
        description,
        operator,
    }
}

/// Every command, for the help screen and did-you-mean.
pub const COMMANDS: &[CommandDoc] = &[
    doc("goto", "RUN", "open a run's detail (42 or #42)", false),
    doc(
        "theme",
        "NAME",
        "switch theme (dark, light, mono, high-contrast, colorblind)",
        false,
    ),
    doc("refresh", "", "reload from the store", false),
    doc(
        "log",
        "",
        "the embedded scheduler's log file, its last lines",
        false,
    ),
    doc("help", "", "this help", false),
    doc("q", "", "quit (also :quit)", false),
    doc("pause", "SCHEDULE", "pause a schedule (asks a reason)", true),
    doc("resume", "SCHEDULE", "resume a paused schedule", true),
    doc("trigger", "SCHEDULE", "run a schedule now", true),
    doc("close", "SCHEDULE", "close an open circuit (asks a reason)", true),
    doc(
        "approve",
        "RUN [STEP]",
        "approve a needs_human run (STEP: resume after that step)",
        true,
    ),
    doc("reject", "RUN", "reject a needs_human run", true),
    doc(
        "approve-config",
        "VERSION",
        "apply a config version waiting for approval (asks a reason)",
        true,
    ),
    doc(
        "reload",
        "",
        "show what the config file changes (agentcron plan), then reload it",
        true,
    ),
    doc("requeue", "RUN", "requeue a failed or dead run", true),
    doc(
        "kill",
        "",
        "turn the global kill switch on (type to confirm)",
        true,
    ),
    doc(
        "unkill",
        "",
        "turn the global kill switch off (asks a reason)",
        true,
    ),
    doc(
        "backfill",
        "SCHED FROM TO",
        "preview, then queue a range (dates or RFC 3339)",
        true,
    ),
    doc("rehearse", "FILE", "step through a rehearsal scenario", false),
];

/// What a command's argument names, for completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    Schedule,
    /// Any run the console knows.
    Run,
    /// A run waiting for a human (approve, reject).
    NeedsHuman,
    /// A failed or dead run (requeue).
    Requeueable,
    Theme,
}

/// The kind of the first argument of `verb`, if Tab completes it.
pub fn arg_kind(verb: &str) -> Option<ArgKind> {
    Some(match verb {
        "pause" | "resume" | "unpause" | "trigger" | "close" | "close-circuit" | "backfill" => {
            ArgKind::Schedule
        }
        "goto" | "run" | "show" => ArgKind::Run,
        "approve" | "reject" => ArgKind::NeedsHuman,
        "requeue" => ArgKind::Requeueable,
        "theme" => ArgKind::Theme,
        _ => return None,
    })
}

/// What Tab did to the command line: the line completed as far as the
/// candidates agree, and the candidates (shown when there is more than one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub line: String,
    pub candidates: Vec<String>,
}

/// Completes the last word of `line`: a command name, or the argument of a
/// command that takes a schedule id, a run id or a theme name — the values
/// `known` gives for that kind (the console's model: what it shows now).
pub fn complete(line: &str, known: &dyn Fn(ArgKind) -> Vec<String>) -> Completion {
    let mut words: Vec<&str> = line.split_whitespace().collect();
    let fresh = line.is_empty() || line.ends_with(char::is_whitespace);
    let current = if fresh { "" } else { words.pop().unwrap_or("") };
    let pool: Vec<String> = match words.as_slice() {
        [] => COMMANDS.iter().map(|c| c.verb.to_string()).collect(),
        [verb] => arg_kind(verb).map(known).unwrap_or_default(),
        _ => vec![],
    };
    // Run ids complete with or without their `#`.
    let typed = current.trim_start_matches('#');
    let mut candidates: Vec<String> = pool.into_iter().filter(|c| c.starts_with(typed)).collect();
    candidates.dedup();
    let done = match candidates.as_slice() {
        [] => current.to_string(),
        [one] => format!("{one} "),
        many => {
            let prefix = common_prefix(many);
            if prefix.chars().count() > typed.chars().count() {
                prefix
            } else {
                current.to_string()
            }
        }
    };
    let mut out: Vec<&str> = words.clone();
    out.push(&done);
    let mut text = out.join(" ");
    if words.is_empty() && done.is_empty() {
        text.clear();
    }
    Completion {
        line: text,
        candidates: if candidates.len() > 1 { candidates } else { vec![] },
    }
}

/// The longest prefix every string shares.
fn common_prefix(all: &[String]) -> String {
    let Some(first) = all.first() else {
        return String::new();
    };
    let mut len = first.chars().count();
    for s in &all[1..] {
        len = len.min(first.chars().zip(s.chars()).take_while(|(a, b)| a == b).count());
    }
    first.chars().take(len).collect()
}

fn run_id(arg: &str) -> Result<i64, String> {
    arg.trim_start_matches('#')
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| format!("`{arg}` is not a run id (a number such as 42 or #42)"))
}

/// An instant typed in a command: RFC 3339, or a date (`2026-06-01`) read in
/// `tz` — its first instant, or with `end_of_day` its last second, so that
/// `:backfill daily 2026-06-01 2026-06-03` includes the 3rd.
pub fn parse_instant(text: &str, tz: Tz, end_of_day: bool) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
        format!("`{text}` is not a date (2026-06-01) or an RFC 3339 instant (2026-06-01T09:00:00+08:00)")
    })?;
    let local = |d: NaiveDate| {
        d.and_hms_opt(0, 0, 0)
            .map(|n| crate::time::fire::resolve_local(tz, n).earliest())
    };
    let at = if end_of_day {
        day.succ_opt().and_then(local).map(|t| t - TimeDelta::seconds(1))
    } else {
        local(day)
    };
    at.ok_or_else(|| format!("`{text}` is out of range"))
}

/// Parses a command line (with or without the leading `:`).
pub fn parse(line: &str) -> Result<Command, String> {
    let line = line.trim().trim_start_matches(':').trim();
    let mut words = line.split_whitespace();
    let Some(verb) = words.next() else {
        return Err("empty command (try :help)".into());
    };
    let rest: Vec<&str> = words.collect();
    let one = |what: &str| -> Result<String, String> {
        match rest.as_slice() {
            [arg] => Ok((*arg).to_string()),
            [] => Err(format!(":{verb} needs a {what}")),
            _ => Err(format!(":{verb} takes one {what}")),
        }
    };
    let none = |cmd: Command| -> Result<Command, String> {
        if rest.is_empty() {
            Ok(cmd)
        } else {
            Err(format!(":{verb} takes no argument"))
        }
    };
    match verb {
        "q" | "q!" | "quit" | "qa" => none(Command::Quit),
        "help" | "h" => none(Command::Help),
        "log" => none(Command::Log),
        "refresh" | "r" => none(Command::Refresh),
        "goto" | "run" | "show" => one("run id").and_then(|a| run_id(&a)).map(Command::Goto),
        "theme" => one("theme name").map(Command::Theme),
        "rehearse" => one("scenario file").map(Command::Rehearse),
        "pause" => one("schedule id").map(Command::Pause),
        "resume" | "unpause" => one("schedule id").map(Command::Resume),
        "trigger" => one("schedule id").map(Command::Trigger),
        "close" | "close-circuit" => one("schedule id").map(Command::Close),
        "approve" => match rest.as_slice() {
            [run] => run_id(run).map(|run| Command::Approve {
                run,
                resume_after: None,
            }),
            [run, step] => run_id(run).map(|run| Command::Approve {
                run,
                resume_after: Some((*step).to_string()),
            }),
            _ => Err(":approve needs RUN and optionally the STEP to resume after".into()),
        },
        "reject" => one("run id").and_then(|a| run_id(&a)).map(Command::Reject),
        "requeue" => one("run id").and_then(|a| run_id(&a)).map(Command::Requeue),
        "backfill" => match rest.as_slice() {
            [schedule, from, to] => Ok(Command::Backfill {
                schedule: (*schedule).to_string(),
                from: (*from).to_string(),
                to: (*to).to_string(),
            }),
            _ => Err(":backfill needs SCHEDULE FROM TO (e.g. :backfill daily 2026-06-01 2026-06-05)".into()),
        },
        "kill" => match rest.as_slice() {
            [] => Ok(Command::Kill {
                cancel_running: false,
            }),
            ["--cancel-running" | "cancel-running"] => Ok(Command::Kill { cancel_running: true }),
            _ => Err(":kill takes only --cancel-running".into()),
        },
        "unkill" => none(Command::Unkill),
        "reload" => none(Command::Reload),
        "approve-config" => one("config version").and_then(|a| {
            a.trim_start_matches('v')
                .parse::<i64>()
                .map(Command::ApproveConfig)
                .map_err(|_| format!("`{a}` is not a config version (e.g. :approve-config 7)"))
        }),
        other => {
            let near: Vec<&str> = COMMANDS
                .iter()
                .map(|c| c.verb)
                .filter(|c| c.len() > 1 && (c.starts_with(other) || other.starts_with(c)))
                .collect();
            Err(match near.first() {
                Some(c) => format!("unknown command `{other}`; did you mean :{c}?"),
                None => format!("unknown command `{other}` (try :help)"),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(kind: ArgKind) -> Vec<String> {
        match kind {
            ArgKind::Schedule => vec!["daily-report".into(), "daily-sync".into(), "hourly".into()],
            ArgKind::NeedsHuman => vec!["42".into(), "417".into()],
            _ => vec![],
        }
    }

    #[test]
    fn tab_completes_command_names_then_their_arguments() {
        let c = complete("pa", &known);
        assert_eq!((c.line.as_str(), c.candidates.len()), ("pause ", 0));
        let c = complete("re", &known);
        assert_eq!(
            c.line, "re",
            "reject, reload, requeue, resume, rehearse: no common prefix"
        );
        assert!(c.candidates.contains(&"reject".to_string()) && c.candidates.contains(&"resume".to_string()));
        let c = complete("trigger da", &known);
        assert_eq!(c.line, "trigger daily-");
        assert_eq!(c.candidates, vec!["daily-report", "daily-sync"]);
        let c = complete("trigger daily-s", &known);
        assert_eq!((c.line.as_str(), c.candidates.len()), ("trigger daily-sync ", 0));
        let c = complete("approve #41", &known);
        assert_eq!(c.line, "approve 417 ");
        let c = complete("approve ", &known);
        assert_eq!(c.line, "approve 4");
        assert_eq!(c.candidates, vec!["42", "417"]);
        let c = complete("help x", &known);
        assert_eq!((c.line.as_str(), c.candidates.len()), ("help x", 0));
    }

    #[test]
    fn parses_the_documented_commands() {
        assert_eq!(parse(":log"), Ok(Command::Log));
        assert_eq!(parse(":pause daily"), Ok(Command::Pause("daily".into())));
        assert_eq!(
            parse("kill"),
            Ok(Command::Kill {
                cancel_running: false
            })
        );
        assert_eq!(
            parse(":kill --cancel-running"),
            Ok(Command::Kill { cancel_running: true })
        );
        assert_eq!(
            parse(":approve #7 deliver"),
            Ok(Command::Approve {
                run: 7,
                resume_after: Some("deliver".into())
            })
        );
        assert_eq!(
            parse(":approve 7"),
            Ok(Command::Approve {
                run: 7,
                resume_after: None
            })
        );
        assert!(parse(":approve 7 a b").is_err());
        assert!(parse(":kill now").is_err());
        assert_eq!(parse(":goto #42"), Ok(Command::Goto(42)));
        assert_eq!(parse(":theme light"), Ok(Command::Theme("light".into())));
        assert_eq!(parse(":rehearse a.toml"), Ok(Command::Rehearse("a.toml".into())));
        assert_eq!(parse(":q"), Ok(Command::Quit));
        assert_eq!(
            parse(":backfill daily 2026-06-01 2026-06-03T09:00:00Z"),
            Ok(Command::Backfill {
                schedule: "daily".into(),
                from: "2026-06-01".into(),
                to: "2026-06-03T09:00:00Z".into()
            })
        );
        assert!(parse(":backfill daily 2026-06-01").is_err());
        let sh = chrono_tz::Asia::Shanghai;
        assert_eq!(
            parse_instant("2026-06-01", sh, false).map(|t| t.to_rfc3339()),
            Ok("2026-05-31T16:00:00+00:00".into())
        );
        assert_eq!(
            parse_instant("2026-06-01", sh, true).map(|t| t.to_rfc3339()),
            Ok("2026-06-01T15:59:59+00:00".into())
        );
        assert!(parse_instant("June 1", sh, false).is_err());
        assert!(parse(":goto x").is_err());
        assert!(parse(":pause").is_err());
        assert!(parse(":kill now").is_err());
        assert_eq!(
            parse(":paus x").unwrap_err(),
            "unknown command `paus`; did you mean :pause?"
        );
    }
}
