//! The `:` command line: parsing only. `update` turns a [`Command`] into
//! dialogs, screens and [`super::app::Cmd`]s.

/// A parsed `:` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Quit,
    Help,
    Refresh,
    Goto(i64),
    Theme(String),
    Rehearse(String),
    Pause(String),
    Resume(String),
    Trigger(String),
    Close(String),
    Approve(i64),
    Reject(i64),
    Requeue(i64),
    Kill,
    Unkill,
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
    doc("help", "", "this help", false),
    doc("q", "", "quit (also :quit)", false),
    doc("pause", "SCHEDULE", "pause a schedule (asks a reason)", true),
    doc("resume", "SCHEDULE", "resume a paused schedule", true),
    doc("trigger", "SCHEDULE", "run a schedule now", true),
    doc("close", "SCHEDULE", "close an open circuit (asks a reason)", true),
    doc("approve", "RUN", "approve a needs_human run", true),
    doc("reject", "RUN", "reject a needs_human run", true),
    doc("requeue", "RUN", "requeue a failed or dead run", true),
    doc(
        "kill",
        "",
        "turn the global kill switch on (type to confirm)",
        true,
    ),
    doc("unkill", "", "turn the global kill switch off", true),
    doc("rehearse", "FILE", "step through a rehearsal scenario", false),
];

fn run_id(arg: &str) -> Result<i64, String> {
    arg.trim_start_matches('#')
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| format!("`{arg}` is not a run id (a number such as 42 or #42)"))
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
        "refresh" | "r" => none(Command::Refresh),
        "goto" | "run" | "show" => one("run id").and_then(|a| run_id(&a)).map(Command::Goto),
        "theme" => one("theme name").map(Command::Theme),
        "rehearse" => one("scenario file").map(Command::Rehearse),
        "pause" => one("schedule id").map(Command::Pause),
        "resume" | "unpause" => one("schedule id").map(Command::Resume),
        "trigger" => one("schedule id").map(Command::Trigger),
        "close" | "close-circuit" => one("schedule id").map(Command::Close),
        "approve" => one("run id").and_then(|a| run_id(&a)).map(Command::Approve),
        "reject" => one("run id").and_then(|a| run_id(&a)).map(Command::Reject),
        "requeue" => one("run id").and_then(|a| run_id(&a)).map(Command::Requeue),
        "kill" => none(Command::Kill),
        "unkill" => none(Command::Unkill),
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

    #[test]
    fn parses_the_documented_commands() {
        assert_eq!(parse(":pause daily"), Ok(Command::Pause("daily".into())));
        assert_eq!(parse("kill"), Ok(Command::Kill));
        assert_eq!(parse(":goto #42"), Ok(Command::Goto(42)));
        assert_eq!(parse(":theme light"), Ok(Command::Theme("light".into())));
        assert_eq!(parse(":rehearse a.toml"), Ok(Command::Rehearse("a.toml".into())));
        assert_eq!(parse(":q"), Ok(Command::Quit));
        assert!(parse(":goto x").is_err());
        assert!(parse(":pause").is_err());
        assert!(parse(":kill now").is_err());
        assert_eq!(
            parse(":paus x").unwrap_err(),
            "unknown command `paus`; did you mean :pause?"
        );
    }
}
