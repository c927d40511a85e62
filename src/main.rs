//! The `agentcron` binary: CLI parsing and dispatch only.

use agentcron::cli;
use agentcron::config::model::{DstFold, DstGap};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "agentcron",
    version,
    about = "A scheduler for AI-agent tasks with a terminal operations console"
)]
struct Cli {
    /// Config file.
    #[arg(long, global = true, default_value = "agentcron.toml")]
    config: PathBuf,
    /// SQLite database (overrides [scheduler] database).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate the config.
    Check,
    /// Run the scheduler without the console, until SIGINT/SIGTERM.
    Run {
        /// Required: the console is the default mode.
        #[arg(long, required = true)]
        headless: bool,
        /// Log format on stderr.
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormatArg,
    },
    /// Queue a manual run of a schedule (through its gates and switches).
    Trigger {
        schedule: String,
        /// Window key (default manual-<now>).
        #[arg(long)]
        window: Option<String>,
    },
    /// Named events for on_event / after_event triggers.
    Event {
        #[command(subcommand)]
        command: EventCommand,
    },
    /// Upcoming fires of a schedule, or of an ad-hoc --cron expression.
    #[command(group = clap::ArgGroup::new("what").required(true).args(["schedule", "cron"]))]
    Next {
        /// Schedule id from the config.
        schedule: Option<String>,
        /// An ad-hoc cron expression instead of a schedule.
        #[arg(long)]
        cron: Option<String>,
        /// IANA time zone for --cron (default UTC).
        #[arg(long, requires = "cron")]
        tz: Option<String>,
        /// DST gap policy for --cron.
        #[arg(long, value_enum, requires = "cron")]
        dst_gap: Option<GapArg>,
        /// DST fold policy for --cron.
        #[arg(long, value_enum, requires = "cron")]
        dst_fold: Option<FoldArg>,
        /// How many fires to list.
        #[arg(long, default_value_t = 5)]
        count: usize,
        /// List fires strictly after this RFC 3339 instant (default now).
        #[arg(long)]
        after: Option<String>,
        /// JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum EventCommand {
    /// Post a named event (deduped by id) for on_event / after_event schedules.
    Post {
        name: String,
        /// Event id (default: generated); the window key of the runs it opens.
        #[arg(long)]
        id: Option<String>,
        /// JSON payload handed to the agent as payload.event.payload.
        #[arg(long)]
        payload: Option<String>,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum GapArg {
    Shift,
    Skip,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FoldArg {
    First,
    Last,
    Both,
}

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Some(Command::Check) => cli::check::run(&cli.config),
        Some(Command::Next {
            schedule,
            cron,
            tz,
            dst_gap,
            dst_fold,
            count,
            after,
            json,
        }) => {
            let target = match (schedule, cron) {
                (_, Some(expr)) => cli::next::Target::Cron {
                    expr,
                    tz: tz.as_deref(),
                    dst_gap: dst_gap.map(|g| match g {
                        GapArg::Shift => DstGap::Shift,
                        GapArg::Skip => DstGap::Skip,
                    }),
                    dst_fold: dst_fold.map(|f| match f {
                        FoldArg::First => DstFold::First,
                        FoldArg::Last => DstFold::Last,
                        FoldArg::Both => DstFold::Both,
                    }),
                },
                (Some(id), None) => cli::next::Target::Schedule(id),
                // clap's required group guarantees one of the two.
                (None, None) => unreachable!("clap enforces SCHEDULE or --cron"),
            };
            let opts = cli::next::Options {
                target,
                count: *count,
                after: after.as_deref(),
                json: *json,
            };
            cli::next::run(&cli.config, &opts)
        }
        Some(Command::Run {
            headless: _,
            log_format,
        }) => {
            let format = match log_format {
                LogFormatArg::Text => cli::run::LogFormat::Text,
                LogFormatArg::Json => cli::run::LogFormat::Json,
            };
            cli::run::run(&cli.config, cli.db.as_deref(), format)
        }
        Some(Command::Trigger { schedule, window }) => {
            cli::trigger::trigger(&cli.config, cli.db.as_deref(), schedule, window.as_deref())
        }
        Some(Command::Event {
            command: EventCommand::Post { name, id, payload },
        }) => cli::trigger::post_event(
            &cli.config,
            cli.db.as_deref(),
            name,
            id.as_deref(),
            payload.as_deref(),
        ),
        None => {
            eprintln!("agentcron: the console is not built yet; try `agentcron check` or `agentcron next`");
            cli::exit::USAGE
        }
    };
    std::process::exit(code);
}
