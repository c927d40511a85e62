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
    /// Runs, newest window first, with why each is in its state.
    Runs {
        /// Only this schedule's runs.
        #[arg(long)]
        schedule: Option<String>,
        /// Only runs in these states (comma-separated, e.g. failed,dead).
        #[arg(long)]
        state: Option<String>,
        /// JSON on stdout.
        #[arg(long)]
        json: bool,
        /// At most this many runs (0 = all).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// One run: its fields, attempts (with log tail), steps and events.
    Show {
        /// Run id (see `agentcron runs`).
        run: String,
        /// JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// The event trail, oldest first.
    Events {
        /// Only this run's events.
        #[arg(long, conflicts_with = "schedule")]
        run: Option<String>,
        /// Only this schedule's events.
        #[arg(long)]
        schedule: Option<String>,
        /// Only these kinds (repeatable or comma-separated, e.g. gate,claimed).
        #[arg(long = "kind")]
        kinds: Vec<String>,
        /// JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Only the latest N events (0 = all).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Why did a window run, or not? Read from the events alone.
    Explain {
        /// Schedule id.
        schedule: String,
        /// The window key (default: the schedule's most recent window).
        #[arg(long)]
        window: Option<String>,
    },
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
        Some(Command::Runs {
            schedule,
            state,
            json,
            limit,
        }) => cli::runs::run(
            &cli.config,
            cli.db.as_deref(),
            &cli::runs::Options {
                schedule: schedule.as_deref(),
                state: state.as_deref(),
                json: *json,
                limit: *limit,
            },
        ),
        Some(Command::Show { run, json }) => cli::show::run(
            &cli.config,
            cli.db.as_deref(),
            &cli::show::Options { run, json: *json },
        ),
        Some(Command::Events {
            run,
            schedule,
            kinds,
            json,
            limit,
        }) => cli::events::run(
            &cli.config,
            cli.db.as_deref(),
            &cli::events::Options {
                run: run.as_deref(),
                schedule: schedule.as_deref(),
                kinds,
                json: *json,
                limit: *limit,
            },
        ),
        Some(Command::Explain { schedule, window }) => cli::explain::run(
            &cli.config,
            cli.db.as_deref(),
            &cli::explain::Options {
                schedule,
                window: window.as_deref(),
            },
        ),
        None => {
            eprintln!("agentcron: the console is not built yet; try `agentcron check` or `agentcron next`");
            cli::exit::USAGE
        }
    };
    std::process::exit(code);
}
