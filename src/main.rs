//! The `agentcron` binary: CLI parsing and dispatch only.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "agentcron", version, about = "A scheduler for AI-agent tasks with a terminal operations console")]
struct Cli {
    /// Config file (default ./agentcron.toml).
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
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Some(Command::Check) => agentcron::cli::check::run(&cli.config),
        None => {
            eprintln!("agentcron: the console is not built yet; try `agentcron check` or `agentcron next`");
            agentcron::cli::exit::USAGE
        }
    };
    std::process::exit(code);
}
