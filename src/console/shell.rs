//! The thin shell around the pure core: the terminal (raw mode, alternate
//! screen, restored on exit, on panic and on SIGTERM/SIGHUP), three sources of
//! messages on one channel (keys, store snapshots, ticks), drawing only when
//! something changed (at most ~30 frames a second), and the [`Cmd`] executor.
//!
//! The store is read by a poller thread with its own connection: every 250 ms
//! it probes the newest event id and reloads the snapshot when it moved (or the
//! selection changed, or 5 s passed, for next fires and maintenance). The two
//! full scans of a snapshot (counts, needs_human) are reused for up to 5 s.

use super::ConsoleOptions;
use super::app::{Cmd, Init, Model, Msg, update};
use super::snapshot::{self, SlowTier, SnapshotRequest};
use super::theme::{self, Theme};
use super::view::view;
use crate::config::Config;
use crate::store::Store;
use crate::time::{Clock, SystemClock};
use chrono::{DateTime, Utc};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use ratatui::crossterm::{cursor, execute, style, terminal};
use std::io::{self, IsTerminal, Stdout};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

/// How often the poller probes the store.
const POLL: Duration = Duration::from_millis(250);
/// A full reload at least this often, even when nothing was written.
const FULL_EVERY: chrono::Duration = chrono::Duration::seconds(5);
/// The slow tier (counts, needs_human) is reused for this long.
const SLOW_EVERY: chrono::Duration = chrono::Duration::seconds(5);
/// The clock tick (relative times, header clock).
const TICK: Duration = Duration::from_secs(1);
/// At most ~30 frames a second.
const FRAME: Duration = Duration::from_millis(33);
/// How long the input thread blocks before checking whether to stop.
const INPUT_POLL: Duration = Duration::from_millis(100);

/// Set by SIGTERM / SIGHUP; the loop restores the terminal and leaves.
static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    TERMINATED.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() {
    let handler = on_terminate as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe;
    // `signal` is called with valid signal numbers and a valid function pointer.
    unsafe {
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGHUP, handler);
    }
}

/// Leaves raw mode and the alternate screen; safe to call more than once.
fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
}

/// What the poller is asked to do.
enum Request {
    Focus(Option<i64>),
    Refresh,
    Detail(i64),
}

/// Theme files next to the config: `<config dir>/themes/NAME.toml`.
fn theme_dirs(cfg: &Config) -> Vec<PathBuf> {
    vec![cfg.dir.join("themes")]
}

pub fn run(opts: ConsoleOptions) -> i32 {
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        eprintln!(
            "agentcron: the console needs a terminal (stdin and stdout must be a TTY).\n\
             hint: for scripts use `agentcron run --headless` and the CLI verbs \
             (`agentcron runs`, `show`, `events`, `explain`)."
        );
        return 2;
    }
    let env_no_color = theme::no_color_requested(std::env::var("NO_COLOR").ok().as_deref());
    let no_color = opts.no_color || env_no_color;
    let dirs = theme_dirs(&opts.config);
    let theme = match theme::select(opts.theme.as_deref(), no_color, &dirs) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("agentcron: {e}");
            return 2;
        }
    };
    let store = if opts.read_only {
        Store::open_read_only(&opts.db)
    } else {
        Store::open(&opts.db)
    };
    let store = match store {
        Ok(s) => s,
        Err(e) => {
            eprintln!("agentcron: {e}");
            return 2;
        }
    };
    // Meaning is carried by our themes (mono under NO_COLOR); crossterm's own
    // NO_COLOR handling would also drop bold and reverse.
    style::force_color_output(true);
    install_panic_hook();
    install_signal_handlers();
    let mut term = match enter_terminal() {
        Ok(t) => t,
        Err(e) => {
            restore_terminal();
            eprintln!("agentcron: cannot set up the terminal: {e}");
            return 2;
        }
    };
    let result = event_loop(&mut term, opts, store, theme, dirs);
    restore_terminal();
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("agentcron: terminal error: {e}");
            1
        }
    }
}

fn enter_terminal() -> io::Result<Terminal<CrosstermBackend<Stdout>>> {
    terminal::enable_raw_mode()?;
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
    Terminal::new(CrosstermBackend::new(io::stdout()))
}

fn spawn_input(tx: Sender<Msg>, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match event::poll(INPUT_POLL) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => break,
            }
            let msg = match event::read() {
                Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => Msg::Key(k),
                Ok(Event::Resize(width, height)) => Msg::Resize { width, height },
                Ok(_) => continue,
                Err(_) => break,
            };
            if tx.send(msg).is_err() {
                break;
            }
        }
    })
}

/// The store poller: see the module doc.
fn spawn_poller(store: Store, cfg: Config, tx: Sender<Msg>, requests: Receiver<Request>) {
    thread::spawn(move || {
        let clock = SystemClock;
        let mut focus: Option<i64> = None;
        let mut slow: Option<(SlowTier, i64)> = None;
        let mut last_id: Option<i64> = None;
        let mut last_load: Option<DateTime<Utc>> = None;
        let mut force = true;
        loop {
            let first = match requests.recv_timeout(POLL) {
                Ok(r) => Some(r),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            for req in first.into_iter().chain(requests.try_iter()) {
                match req {
                    Request::Focus(f) => {
                        force |= f != focus;
                        focus = f;
                    }
                    Request::Refresh => {
                        force = true;
                        slow = None;
                    }
                    Request::Detail(id) => {
                        let msg = match snapshot::load_run_detail(&store, id) {
                            Ok(d) => Msg::RunDetail(Box::new(d)),
                            Err(e) => Msg::RunDetailFailed {
                                run: id,
                                error: e.to_string(),
                            },
                        };
                        if tx.send(msg).is_err() {
                            return;
                        }
                    }
                }
            }
            let now = clock.now();
            let id = match snapshot::last_event_id(&store) {
                Ok(id) => id,
                Err(e) => {
                    if tx.send(Msg::SnapshotFailed(e.to_string())).is_err() {
                        return;
                    }
                    continue;
                }
            };
            let stale = last_load.is_none_or(|at| now - at >= FULL_EVERY);
            if !(force || stale || Some(id) != last_id) {
                continue;
            }
            // Reuse the full scans while young, or while nothing was written since.
            let reuse = slow
                .as_ref()
                .filter(|(s, seen)| now - s.at < SLOW_EVERY || *seen == id)
                .map(|(s, _)| s.clone());
            let req = SnapshotRequest {
                focus,
                reuse_slow: reuse,
            };
            match snapshot::load_snapshot_with(&store, &cfg, now, &req) {
                Ok((snap, used)) => {
                    let fresh_slow = req.reuse_slow.is_none();
                    if fresh_slow {
                        slow = Some((used, snap.last_event_id));
                    }
                    last_id = Some(snap.last_event_id);
                    last_load = Some(now);
                    force = false;
                    if tx.send(Msg::Snapshot(Box::new(snap))).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    if tx.send(Msg::SnapshotFailed(e.to_string())).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

/// Performs a command; results come back as messages on `tx`.
fn execute(
    cmd: Cmd,
    read_only: bool,
    theme: &mut Theme,
    dirs: &[PathBuf],
    requests: &Sender<Request>,
    tx: &Sender<Msg>,
) {
    let send = |r: Request| {
        // The poller only stops when the console does.
        let _ = requests.send(r);
    };
    match cmd {
        Cmd::Quit => {}
        Cmd::Refresh => send(Request::Refresh),
        Cmd::Focus(f) => send(Request::Focus(f)),
        Cmd::LoadRunDetail(id) => send(Request::Detail(id)),
        Cmd::SetTheme(name) => {
            let msg = match theme::select(Some(&name), false, dirs) {
                Ok(t) => {
                    let name = t.name.clone();
                    *theme = t;
                    Ok(name)
                }
                Err(e) => Err(e.to_string()),
            };
            let _ = tx.send(Msg::ThemeChanged(msg));
        }
        Cmd::Rehearse(file) => {
            let text = format!("rehearse {}: not available yet", file.display());
            let _ = tx.send(Msg::ActionResult(Err(text)));
        }
        other => {
            let text = if read_only {
                "read-only console: actions are disabled".to_string()
            } else {
                format!("{}: action not available yet", action_name(&other))
            };
            let _ = tx.send(Msg::ActionResult(Err(text)));
        }
    }
}

fn action_name(cmd: &Cmd) -> &'static str {
    match cmd {
        Cmd::Approve { .. } => "approve",
        Cmd::Reject { .. } => "reject",
        Cmd::SetKill { on: true, .. } => "kill",
        Cmd::SetKill { on: false, .. } => "unkill",
        Cmd::Pause { .. } => "pause",
        Cmd::Resume { .. } => "resume",
        Cmd::Trigger { .. } => "trigger",
        Cmd::Requeue { .. } => "requeue",
        Cmd::CloseCircuit { .. } => "close circuit",
        Cmd::Quit
        | Cmd::Refresh
        | Cmd::Focus(_)
        | Cmd::LoadRunDetail(_)
        | Cmd::SetTheme(_)
        | Cmd::Rehearse(_) => "command",
    }
}

fn event_loop(
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    opts: ConsoleOptions,
    store: Store,
    mut theme: Theme,
    dirs: Vec<PathBuf>,
) -> io::Result<()> {
    let clock = SystemClock;
    let size = term.size()?;
    let mut model = Model::new(Init {
        now: clock.now(),
        tz: opts.config.scheduler.timezone,
        mode_label: opts.mode_label.clone(),
        read_only: opts.read_only,
        theme_name: theme.name.clone(),
        width: size.width,
        height: size.height,
    });
    let (tx, rx) = mpsc::channel::<Msg>();
    let (req_tx, req_rx) = mpsc::channel::<Request>();
    let stop = Arc::new(AtomicBool::new(false));
    let input = spawn_input(tx.clone(), stop.clone());
    spawn_poller(store, opts.config.clone(), tx.clone(), req_rx);

    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    let mut next_tick = Instant::now() + TICK;
    let outcome = loop {
        if TERMINATED.load(Ordering::SeqCst) || model.quitting {
            break Ok(());
        }
        let now = Instant::now();
        let frame_due = last_draw.is_none_or(|at| now.duration_since(at) >= FRAME);
        if dirty && frame_due {
            if let Err(e) = term.draw(|f| view(&model, &theme, f)) {
                break Err(e);
            }
            dirty = false;
            last_draw = Some(now);
        }
        let mut wait = next_tick.saturating_duration_since(now).min(POLL);
        if dirty && let Some(at) = last_draw {
            wait = wait.min(FRAME.saturating_sub(now.duration_since(at)));
        }
        let first = match rx.recv_timeout(wait) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break Ok(()),
        };
        let mut msgs: Vec<Msg> = first.into_iter().chain(rx.try_iter()).collect();
        if Instant::now() >= next_tick {
            msgs.push(Msg::Tick { now: clock.now() });
            next_tick += TICK;
            if next_tick < Instant::now() {
                next_tick = Instant::now() + TICK;
            }
        }
        for msg in msgs {
            dirty = true;
            for cmd in update(&mut model, msg) {
                execute(cmd, opts.read_only, &mut theme, &dirs, &req_tx, &tx);
            }
        }
    };
    stop.store(true, Ordering::SeqCst);
    let _ = input.join();
    outcome
}
