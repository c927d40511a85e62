//! The `agentcron` binary: CLI parsing and dispatch only.

/// See Cargo.toml: SQLite's page-at-a-time allocations on a large heap.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use agentcron::cli;
use agentcron::config::model::{DstFold, DstGap};
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "agentcron",
    version = agentcron::VERSION,
    about = "A scheduler for AI-agent tasks with a terminal operations console"
)]
struct Cli {
    /// Config file.
    #[arg(long, global = true, default_value = "agentcron.toml")]
    config: PathBuf,
    /// SQLite database (overrides [scheduler] database).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    /// Console theme: a name in themes/ (dark, light, mono, high-contrast, colorblind) or a file.
    #[arg(long, global = true)]
    theme: Option<String>,
    /// Console without colours (as NO_COLOR=1).
    #[arg(long, global = true)]
    no_color: bool,
    /// Console that shows but never acts (and opens the database read-only).
    #[arg(long, global = true)]
    read_only: bool,
    /// Times in UTC instead of each schedule's zone (runs, show, events, explain, status, plan).
    #[arg(long, global = true)]
    utc: bool,
    /// Serve the HTTP API, /metrics and probes here (run --headless and the console's scheduler).
    #[arg(long, global = true, value_name = "ADDR")]
    listen: Option<String>,
    /// Log format of the scheduler: on stderr (run --headless), or in the
    /// console's log file ([scheduler] log_file).
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormatArg,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate the config.
    Check,
    /// The console over a database a headless scheduler runs (no second scheduler).
    Console {
        #[arg(long, required = true)]
        attach: bool,
    },
    /// Run the scheduler without the console, until SIGINT/SIGTERM.
    Run {
        /// Required: the console is the default mode.
        #[arg(long, required = true)]
        headless: bool,
    },
    /// Approve a run waiting for a human: a new attempt.
    Approve {
        run: i64,
        #[arg(long)]
        reason: String,
        /// Who approves (default: the OS user).
        #[arg(long)]
        by: Option<String>,
        /// Resume after this step (the agent receives `resume_after`).
        #[arg(long)]
        resume_after: Option<String>,
    },
    /// Reject a run waiting for a human: it fails.
    Reject {
        run: i64,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        by: Option<String>,
    },
    /// Global kill switch on: nothing new is claimed (or, with --tenant, nothing of one tenant).
    Kill {
        #[arg(long)]
        reason: String,
        /// Also stop running attempts (they retry after unkill).
        #[arg(long, conflicts_with = "tenant")]
        cancel_running: bool,
        /// Only this tenant: every schedule of it is paused.
        #[arg(long)]
        tenant: Option<String>,
        /// Who acts (default: $USER, then the OS account name).
        #[arg(long)]
        by: Option<String>,
    },
    /// Global kill switch off.
    Unkill {
        #[arg(long)]
        reason: String,
        #[arg(long)]
        by: Option<String>,
    },
    /// Pause a schedule, or every schedule of a tenant.
    #[command(group = clap::ArgGroup::new("what").required(true).args(["schedule", "tenant"]))]
    Pause {
        schedule: Option<String>,
        #[arg(long, conflicts_with = "schedule")]
        tenant: Option<String>,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        by: Option<String>,
    },
    /// Resume a paused schedule, or every one of a tenant (shows what it would start; needs --yes).
    #[command(group = clap::ArgGroup::new("what").required(true).args(["schedule", "tenant"]))]
    Resume {
        schedule: Option<String>,
        #[arg(long, conflicts_with = "schedule")]
        tenant: Option<String>,
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        by: Option<String>,
    },
    /// Queue the windows of a range on purpose (shows the plan with --dry-run).
    Backfill {
        schedule: String,
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
    /// The dead-letter queue.
    Dlq {
        #[command(subcommand)]
        command: Option<DlqCommand>,
    },
    /// Ad-hoc maintenance windows.
    Maintenance {
        #[command(subcommand)]
        command: MaintenanceCommand,
    },
    /// Circuit breakers.
    Circuit {
        #[command(subcommand)]
        command: CircuitCommand,
    },
    /// Run failure rehearsals (scenario files) on a virtual clock.
    Rehearse {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// One JSON verdict object per file on stdout.
        #[arg(long)]
        json: bool,
        /// Step through the rehearsal in the console.
        #[arg(long)]
        console: bool,
        /// Only the verdicts, not the timeline.
        #[arg(long)]
        quiet: bool,
    },
    /// Queue a manual run of a schedule (through its gates and switches).
    Trigger {
        schedule: String,
        /// Window key (default manual-<now>).
        #[arg(long, value_parser = key_arg("window key"))]
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
        // Not `requires = "cron"`: clap waives that when SCHEDULE, which conflicts
        // with --cron, is given; cli::next rejects these flags with a schedule.
        /// IANA time zone for --cron (default UTC).
        #[arg(long)]
        tz: Option<String>,
        /// DST gap policy for --cron.
        #[arg(long, value_enum)]
        dst_gap: Option<GapArg>,
        /// DST fold policy for --cron.
        #[arg(long, value_enum)]
        dst_fold: Option<FoldArg>,
        /// How many fires to list (at most 10000).
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
        /// Only this tenant's runs.
        #[arg(long)]
        tenant: Option<String>,
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
    /// Preview the config file against the version the database runs
    /// (exit 0 no change, 1 invalid, 3 changes).
    Plan {
        /// JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Ask every scheduler on the database to re-read, validate and apply its config.
    Reload {
        /// Apply a file without schedules even though it removes every
        /// schedule (refused otherwise; SIGHUP always refuses it).
        #[arg(long)]
        allow_empty: bool,
    },
    /// Apply a config version that waits for approval (a gated stage changed).
    ApproveConfig {
        version: i64,
        #[arg(long)]
        reason: String,
        /// Who approves (default: the OS user).
        #[arg(long)]
        by: Option<String>,
    },
    /// Re-apply an earlier stored config version (as a new version).
    Rollback {
        version: i64,
        #[arg(long)]
        reason: String,
        /// Who rolls back (default: the OS user).
        #[arg(long)]
        by: Option<String>,
    },
    /// Is it working? Schedulers alive, kill switch, circuits, queues, next fires.
    Status {
        /// JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// The ledger itself: copy an embedded (SQLite) ledger into PostgreSQL.
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Why did a window run, or not? Read from the events alone.
    Explain {
        /// Schedule id.
        schedule: String,
        /// The window key (default: the schedule's most recent window).
        #[arg(long, conflicts_with = "at")]
        window: Option<String>,
        /// The window covering this instant: RFC 3339, or `YYYY-MM-DD[ HH:MM[:SS]]`
        /// in the schedule's zone.
        #[arg(long)]
        at: Option<String>,
        /// The story as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// A shell completion script on stdout (e.g. `agentcron completions bash
    /// > ~/.local/share/bash-completion/completions/agentcron`).
    Completions {
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// The man page (roff) on stdout: `agentcron man > agentcron.1`.
    Man,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Subcommand, Debug)]
enum DbCommand {
    /// Copy an embedded ledger (runs, attempts, steps, events, switches,
    /// approvals, schedule state, config versions) into an empty PostgreSQL
    /// database, ids kept, in one transaction.
    Copy {
        /// The embedded ledger (SQLite file).
        #[arg(long)]
        from: PathBuf,
        /// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE
        #[arg(long)]
        to: String,
        /// The password's file, when neither the URL nor PGPASSWORD has it.
        #[arg(long)]
        password_file: Option<PathBuf>,
        /// Print the rows each table would copy; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand, Debug)]
enum DlqCommand {
    /// Runs whose retries are exhausted.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Put a dead (or failed) run back: one more attempt, now; or every dead
    /// run of a schedule (--schedule S --all).
    #[command(group = clap::ArgGroup::new("what").required(true).args(["run", "all"]))]
    Requeue {
        #[arg(conflicts_with_all = ["schedule", "all"])]
        run: Option<i64>,
        /// With --all: the schedule whose dead runs are requeued.
        #[arg(long, requires = "all")]
        schedule: Option<String>,
        /// Every dead run of --schedule.
        #[arg(long, requires = "schedule")]
        all: bool,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        by: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum MaintenanceCommand {
    /// Hold every schedule (or the named ones) between two instants.
    Add {
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
        #[arg(long)]
        reason: String,
        /// Only these schedules (repeatable); default all.
        #[arg(long = "schedule")]
        schedules: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
enum CircuitCommand {
    /// Close an open circuit by hand.
    Close {
        schedule: String,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        by: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum EventCommand {
    /// Post a named event (deduped by id) for on_event / after_event schedules.
    Post {
        name: String,
        /// Event id (default: generated); the window key of the runs it opens.
        #[arg(long, value_parser = key_arg("event id"))]
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

/// A `--window` / `--id` value: one printable line (a usage error, exit 2, otherwise).
fn key_arg(what: &'static str) -> impl Fn(&str) -> Result<String, String> + Clone + Send + Sync + 'static {
    move |v: &str| agentcron::operator::check_key(what, v).map(|()| v.to_string())
}

fn main() {
    // The per-attempt supervisor and its fork server are this binary
    // re-executed: handled before the CLI (no verbs; their own arguments).
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__supervise") => std::process::exit(agentcron::supervisor::main(&args[2..])),
        // The fork server the scheduler starts agents' supervisors from.
        Some("__spawner") => std::process::exit(agentcron::supervisor::serve()),
        _ => {}
    }
    // Agents run under the supervisor; /proc/self/exe still names this binary
    // if the file is replaced while the scheduler runs.
    agentcron::process::set_supervisor("/proc/self/exe");
    let cli = Cli::parse();
    // A printing verb piped into `head` ends quietly when the pipe closes, as
    // Unix tools do, instead of panicking on a broken pipe. Not for the
    // scheduler and the console: they write envelopes into agents' stdin, and an
    // agent that exits without reading must not kill the scheduler.
    let schedules = matches!(
        cli.command,
        None | Some(Command::Run { .. }) | Some(Command::Console { .. })
    ) || matches!(cli.command, Some(Command::Rehearse { console: true, .. }));
    if !schedules {
        // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let serves = matches!(cli.command, None | Some(Command::Run { .. }));
    if cli.listen.is_some() && !serves {
        eprintln!(
            "agentcron: --listen applies to `agentcron run --headless` and the console's embedded scheduler"
        );
        std::process::exit(cli::exit::USAGE);
    }
    let log_format = match cli.log_format {
        LogFormatArg::Text => cli::run::LogFormat::Text,
        LogFormatArg::Json => cli::run::LogFormat::Json,
    };
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
                (_, Some(expr)) => cli::next::Target::Cron(expr),
                (Some(id), None) => cli::next::Target::Schedule(id),
                // clap's required group guarantees one of the two.
                (None, None) => unreachable!("clap enforces SCHEDULE or --cron"),
            };
            let opts = cli::next::Options {
                target,
                cron_flags: cli::next::CronFlags {
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
                count: *count,
                after: after.as_deref(),
                json: *json,
            };
            cli::next::run(&cli.config, cli.db.as_deref(), &opts)
        }
        Some(Command::Run { headless: _ }) => {
            cli::run::run(&cli.config, cli.db.as_deref(), log_format, cli.listen.as_deref())
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
        Some(Command::Approve {
            run,
            reason,
            by,
            resume_after,
        }) => cli::actions::approve(
            &cli.config,
            cli.db.as_deref(),
            *run,
            reason,
            by.as_deref(),
            resume_after.as_deref(),
        ),
        Some(Command::Reject { run, reason, by }) => {
            cli::actions::reject(&cli.config, cli.db.as_deref(), *run, reason, by.as_deref())
        }
        Some(Command::Kill {
            reason,
            cancel_running,
            tenant,
            by,
        }) => match tenant {
            Some(t) => cli::actions::kill_tenant(&cli.config, cli.db.as_deref(), t, reason, by.as_deref()),
            None => cli::actions::kill(
                &cli.config,
                cli.db.as_deref(),
                reason,
                *cancel_running,
                by.as_deref(),
            ),
        },
        Some(Command::Unkill { reason, by }) => {
            cli::actions::unkill(&cli.config, cli.db.as_deref(), reason, by.as_deref())
        }
        Some(Command::Pause {
            schedule,
            tenant,
            reason,
            by,
        }) => match (schedule, tenant) {
            (_, Some(t)) => {
                cli::actions::pause_tenant(&cli.config, cli.db.as_deref(), t, reason, by.as_deref())
            }
            (Some(s), None) => cli::actions::pause(&cli.config, cli.db.as_deref(), s, reason, by.as_deref()),
            (None, None) => unreachable!("clap enforces SCHEDULE or --tenant"),
        },
        Some(Command::Resume {
            schedule,
            tenant,
            yes,
            reason,
            by,
        }) => match (schedule, tenant) {
            (_, Some(t)) => cli::actions::resume_tenant(
                &cli.config,
                cli.db.as_deref(),
                t,
                *yes,
                reason.as_deref(),
                by.as_deref(),
            ),
            (Some(s), None) => cli::actions::resume(
                &cli.config,
                cli.db.as_deref(),
                s,
                *yes,
                reason.as_deref(),
                by.as_deref(),
            ),
            (None, None) => unreachable!("clap enforces SCHEDULE or --tenant"),
        },
        Some(Command::Backfill {
            schedule,
            from,
            to,
            dry_run,
            json,
        }) => cli::actions::backfill(
            &cli.config,
            cli.db.as_deref(),
            schedule,
            from,
            to,
            *dry_run,
            *json,
        ),
        Some(Command::Dlq { command }) => match command {
            None => cli::actions::dlq_list(&cli.config, cli.db.as_deref(), false),
            Some(DlqCommand::List { json }) => cli::actions::dlq_list(&cli.config, cli.db.as_deref(), *json),
            Some(DlqCommand::Requeue {
                run,
                schedule,
                all: _,
                reason,
                by,
            }) => match (run, schedule) {
                (Some(r), _) => {
                    cli::actions::dlq_requeue(&cli.config, cli.db.as_deref(), *r, reason, by.as_deref())
                }
                (None, Some(s)) => {
                    cli::actions::dlq_requeue_all(&cli.config, cli.db.as_deref(), s, reason, by.as_deref())
                }
                (None, None) => unreachable!("clap enforces RUN or --schedule S --all"),
            },
        },
        Some(Command::Maintenance {
            command:
                MaintenanceCommand::Add {
                    from,
                    to,
                    reason,
                    schedules,
                },
        }) => cli::actions::maintenance_add(&cli.config, cli.db.as_deref(), from, to, reason, schedules),
        Some(Command::Circuit {
            command: CircuitCommand::Close { schedule, reason, by },
        }) => cli::actions::close_circuit(&cli.config, cli.db.as_deref(), schedule, reason, by.as_deref()),
        Some(Command::Rehearse {
            files,
            json,
            console,
            quiet,
        }) => {
            if *console {
                match files.as_slice() {
                    [file] => cli::console::rehearse(file, cli.theme.clone(), cli.no_color, cli.read_only),
                    _ => {
                        eprintln!("agentcron rehearse: --console steps through one file at a time");
                        cli::exit::USAGE
                    }
                }
            } else {
                cli::rehearse::run(files, *json, *quiet, cli.db.as_deref())
            }
        }
        Some(Command::Runs {
            schedule,
            tenant,
            state,
            json,
            limit,
        }) => cli::runs::run(
            &cli.config,
            cli.db.as_deref(),
            &cli::runs::Options {
                schedule: schedule.as_deref(),
                tenant: tenant.as_deref(),
                state: state.as_deref(),
                json: *json,
                limit: *limit,
                utc: cli.utc,
            },
        ),
        Some(Command::Show { run, json }) => cli::show::run(
            &cli.config,
            cli.db.as_deref(),
            &cli::show::Options {
                run,
                json: *json,
                utc: cli.utc,
            },
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
                utc: cli.utc,
            },
        ),
        Some(Command::Db {
            command:
                DbCommand::Copy {
                    from,
                    to,
                    password_file,
                    dry_run,
                },
        }) => cli::db_copy::run(from, to, password_file.as_deref(), *dry_run),
        Some(Command::Status { json }) => cli::status::run(&cli.config, cli.db.as_deref(), *json, cli.utc),
        Some(Command::Plan { json }) => cli::config_cmd::plan(&cli.config, cli.db.as_deref(), *json, cli.utc),
        Some(Command::Reload { allow_empty }) => {
            cli::config_cmd::reload(&cli.config, cli.db.as_deref(), *allow_empty)
        }
        Some(Command::ApproveConfig { version, reason, by }) => {
            cli::config_cmd::approve(&cli.config, cli.db.as_deref(), *version, reason, by.as_deref())
        }
        Some(Command::Rollback { version, reason, by }) => {
            cli::config_cmd::rollback(&cli.config, cli.db.as_deref(), *version, reason, by.as_deref())
        }
        Some(Command::Explain {
            schedule,
            window,
            at,
            json,
        }) => cli::explain::run(
            &cli.config,
            cli.db.as_deref(),
            &cli::explain::Options {
                schedule,
                window: window.as_deref(),
                at: at.as_deref(),
                json: *json,
                utc: cli.utc,
            },
        ),
        Some(Command::Completions { shell }) => {
            let shell = match shell {
                CompletionShell::Bash => clap_complete::Shell::Bash,
                CompletionShell::Zsh => clap_complete::Shell::Zsh,
                CompletionShell::Fish => clap_complete::Shell::Fish,
            };
            clap_complete::generate(shell, &mut Cli::command(), "agentcron", &mut std::io::stdout());
            cli::exit::OK
        }
        Some(Command::Man) => match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
            Ok(()) => cli::exit::OK,
            Err(e) => {
                eprintln!("agentcron man: {e}");
                cli::exit::USAGE
            }
        },
        Some(Command::Console { attach }) => cli::console::run(cli::console::Options {
            config: &cli.config,
            db: cli.db.as_deref(),
            theme: cli.theme.clone(),
            no_color: cli.no_color,
            read_only: cli.read_only,
            attach: *attach,
            listen: cli.listen.as_deref(),
            log_format,
        }),
        None => cli::console::run(cli::console::Options {
            config: &cli.config,
            db: cli.db.as_deref(),
            theme: cli.theme.clone(),
            no_color: cli.no_color,
            read_only: cli.read_only,
            attach: false,
            listen: cli.listen.as_deref(),
            log_format,
        }),
    };
    // exit() ends every thread: give alerts the scheduler queued (webhooks,
    // commands) one send's time to leave first. Nothing queued: no wait.
    agentcron::recovery::alert::drain(agentcron::recovery::alert::SEND_TIMEOUT);
    std::process::exit(code);
}
