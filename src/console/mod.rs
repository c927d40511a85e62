//! The full-screen operations console (DESIGN.md "The console").
//!
//! It reads only the store and the config — never engine internals — and is
//! arranged The Elm Architecture way:
//! - [`app`]: `Model`, `Msg`, `Cmd` and the pure `update`;
//! - [`view`]: the pure drawing of a model with a [`theme::Theme`];
//! - [`snapshot`]: the bounded store queries behind every pane;
//! - [`shell`]: the terminal, the store poller thread, ticks, and the `Cmd`
//!   executor (the only IO), with [`actions`] (operator actions on a store)
//!   and [`player`] (a rehearsal on its own thread);
//! - [`rehearsal`]: rehearsal mode as the model sees it;
//! - [`keymap`]: the key table that drives `update`, the help and the footer;
//! - [`panes`], [`detail`], [`dialogs`]: one file per thing on screen.

pub mod actions;
pub mod app;
pub mod command;
pub mod detail;
pub mod dialogs;
pub mod follow;
pub mod format;
pub mod input;
pub mod keymap;
pub mod marks;
pub mod panes;
pub mod player;
pub mod rehearsal;
pub mod shell;
pub mod snapshot;
pub mod theme;
pub mod view;

use crate::config::Config;
use std::path::PathBuf;

/// The scheduler a console embeds (`agentcron` with no verb), as its quit
/// dialog sees it: whose running runs are its attempts, how long it waits
/// for them, and how to stop it.
pub trait EmbeddedScheduler: Send + Sync + std::fmt::Debug {
    /// Its lease owner (the running runs it holds are its attempts).
    fn owner(&self) -> &str;
    /// `[scheduler] shutdown_grace`.
    fn grace(&self) -> std::time::Duration;
    /// Stop claiming and wait for running attempts up to the grace period
    /// (`now: false`), or stop them at once so they retry (`now: true`; may
    /// follow a `false`). Returns at once; see [`EmbeddedScheduler::stopped`].
    fn stop(&self, now: bool);
    /// It has stopped (its thread ended).
    fn stopped(&self) -> bool;
}

/// How the console is started (`agentcron`, `agentcron console --attach`).
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    pub config: Config,
    /// The SQLite file (`--db`, else `[scheduler] database`).
    pub db: PathBuf,
    /// `--theme`: a theme name or a path to a theme file.
    pub theme: Option<String>,
    /// `--no-color` (NO_COLOR in the environment does the same).
    pub no_color: bool,
    /// `--read-only`: no operator action is offered or performed, and the
    /// database is opened read-only.
    pub read_only: bool,
    /// The mode shown in the header: `LIVE` or `REHEARSAL`.
    pub mode_label: String,
    /// `agentcron rehearse FILE --console`: step through this scenario; there is
    /// no live database (`config` is the scenario's, `db` is unused).
    pub rehearsal: Option<PathBuf>,
    /// The scheduler this console embeds, if any.
    pub embedded: Option<std::sync::Arc<dyn EmbeddedScheduler>>,
    /// The embedded scheduler's log file (`:log` shows its tail).
    pub log_file: Option<PathBuf>,
}

/// Runs the console until the operator quits (or SIGTERM / SIGHUP). Returns
/// the process exit code: 0 after a normal quit, 2 when it cannot start (not
/// a terminal, unknown theme, database cannot be opened).
pub fn run(opts: ConsoleOptions) -> i32 {
    shell::run(opts)
}

/// The console's start checks (terminal, theme) without starting it: callers
/// run this before starting anything the console would watch.
pub fn preflight(opts: &ConsoleOptions) -> Result<(), i32> {
    shell::preflight(opts).map(|_| ())
}
