//! The thin shell around the pure core: the terminal (raw mode, alternate
//! screen, restored on exit, on panic and on SIGTERM/SIGHUP), three sources of
//! messages on one channel (keys, store snapshots, ticks), drawing only when
//! something changed (at most ~30 frames a second), and the [`Cmd`] executor.
//!
//! The store is read by a poller thread with its own connection: every 250 ms
//! it probes the newest event id and reloads the snapshot when it moved (or the
//! selection changed, or 5 s passed, for next fires and maintenance). Before
//! such a reload it follows the database's config version ([`super::follow`]):
//! a new one is what the snapshot is read with, what the executor's actions
//! check against (shared as a [`crate::config::Applied`]), and the model's zone. The full
//! scans of a snapshot (needs_human, dead letters) are reused for 5 s,
//! or longer on databases where they are slow.
//!
//! Which store the poller reads is its *source*: the live database, or in
//! rehearsal mode the rehearsal's (with the rehearsal's config and virtual
//! clock). Every snapshot carries its source's number, so one read before a
//! switch is never shown after it. Operator actions go to the live store with
//! the wall clock — or, in rehearsal mode, to the rehearsal ([`Player`]).

use super::actions;
use super::app::{Cmd, EmbeddedInfo, Init, LogTail, Model, Msg, update};
use super::follow::{Follow, Followed};
use super::player::{Opened, Player, PlayerReq};
use super::snapshot::{self, SlowTier, SnapshotRequest};
use super::theme::{self, Theme};
use super::view::view;
use super::{ConsoleOptions, EmbeddedScheduler};
use crate::config::{Applied, Config};
use crate::operator;
use crate::rehearsal::scenario;
use crate::store::Store;
use crate::time::{Clock, SystemClock};
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
const FULL_EVERY: Duration = Duration::from_secs(5);
/// The slow tier (needs_human, dead letters) is reused for this long…
const SLOW_EVERY: Duration = Duration::from_secs(5);
/// …or for this many times what reading it took, on databases where its full
/// scans are slow (a million runs: seconds), so a console left open stays idle.
const SLOW_SHARE: u32 = 20;
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

/// A store the poller reads, with the config and clock that go with it.
struct Source {
    id: u64,
    store: Store,
    cfg: Config,
    clock: Arc<dyn Clock>,
    /// The live database: its config versions are followed, and the one
    /// applied is shared with the executor's actions.
    follow: Option<(Follow, Applied)>,
}

impl Source {
    /// The live database's source, following its config versions.
    fn live(id: u64, store: Store, live: &Live) -> Self {
        let cfg = live.cfg.get();
        Source {
            id,
            store,
            follow: Some((Follow::new(&cfg), live.cfg.clone())),
            cfg: (*cfg).clone(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Follows the database's config version: a new one is sent to the
    /// model, shared with the executor, and used by the next snapshot.
    /// A store error is left to the snapshot read that follows to report.
    fn follow_config(&mut self, tx: &Sender<Msg>) {
        let Some((follow, applied)) = self.follow.as_mut() else {
            return;
        };
        let msg = match follow.poll(&self.store) {
            Ok(Followed::Same) => return,
            Ok(Followed::Applied { version, cfg }) => {
                let tz = cfg.scheduler.timezone;
                self.cfg = *cfg;
                applied.set(Arc::new(self.cfg.clone()));
                Msg::ConfigApplied { version, tz }
            }
            Ok(Followed::Failed { version, error }) => Msg::ConfigUnloadable { version, error },
            // The snapshot read that follows says what is wrong with the store.
            Err(_) => return,
        };
        let _ = tx.send(msg);
    }
}

/// What the poller is asked to do.
enum Request {
    Focus(Option<i64>),
    View(Vec<String>),
    Refresh,
    Detail(i64),
    /// Read another store from now on.
    Source(Box<Source>),
}

/// Theme files next to the config: `<config dir>/themes/NAME.toml`.
fn theme_dirs(cfg: &Config) -> Vec<PathBuf> {
    vec![cfg.dir.join("themes")]
}

/// The live database: where the console reads and acts outside rehearsals.
struct Live {
    db: PathBuf,
    /// The config version the database runs (followed by the poller).
    cfg: Applied,
    read_only: bool,
    /// The connection operator actions write through (`None` when read-only).
    actions: Option<Store>,
}

impl Live {
    fn reader(&self) -> Result<Store, crate::store::StoreError> {
        if self.read_only {
            Store::open_read_only(&self.db)
        } else {
            Store::open(&self.db)
        }
    }
}

/// What must hold before the console starts (and before anything is started
/// for it, such as the embedded scheduler): a terminal on stdin and stdout, a
/// theme that exists. Err is the exit code, after the message.
pub fn preflight(opts: &ConsoleOptions) -> Result<theme::Theme, i32> {
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        eprintln!(
            "agentcron: the console needs a terminal (stdin and stdout must be a TTY).\n\
             hint: for scripts use `agentcron run --headless` and the CLI verbs \
             (`agentcron runs`, `show`, `events`, `explain`; `agentcron rehearse FILE` headless)."
        );
        return Err(2);
    }
    let env_no_color = theme::no_color_requested(std::env::var("NO_COLOR").ok().as_deref());
    let no_color = opts.no_color || env_no_color;
    let dirs = theme_dirs(&opts.config);
    theme::select(opts.theme.as_deref(), no_color, &dirs).map_err(|e| {
        eprintln!("agentcron: {e}");
        2
    })
}

pub fn run(opts: ConsoleOptions) -> i32 {
    let theme = match preflight(&opts) {
        Ok(t) => t,
        Err(code) => return code,
    };
    // `rehearse FILE --console` has no live database.
    let live = if opts.rehearsal.is_some() {
        None
    } else {
        let mut live = Live {
            db: opts.db.clone(),
            cfg: Applied::new(Arc::new(opts.config.clone())),
            read_only: opts.read_only,
            actions: None,
        };
        let opened = live.reader().and_then(|reader| {
            let actions = if opts.read_only {
                None
            } else {
                Some(Store::open(&opts.db)?)
            };
            Ok((reader, actions))
        });
        match opened {
            Ok((reader, actions)) => {
                live.actions = actions;
                Some((live, reader))
            }
            Err(e) => {
                eprintln!("agentcron: {e}");
                return 2;
            }
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
    let dirs = theme_dirs(&opts.config);
    let result = event_loop(&mut term, opts, live, theme, dirs);
    restore_terminal();
    match result {
        Ok(code) => code,
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

/// The store poller: see the module doc. Without a source (a rehearsal still
/// loading) it only waits for one.
fn spawn_poller(source: Option<Box<Source>>, tx: Sender<Msg>, requests: Receiver<Request>) {
    thread::spawn(move || {
        let mut source = source;
        let mut focus: Option<i64> = None;
        let mut view: Option<Vec<String>> = None;
        let mut slow: Option<(SlowTier, i64, Instant)> = None;
        let mut slow_every = SLOW_EVERY;
        let mut last_id: Option<i64> = None;
        let mut last_load: Option<Instant> = None;
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
                    Request::View(v) => {
                        force |= view.as_ref() != Some(&v);
                        view = Some(v);
                    }
                    Request::Refresh => {
                        force = true;
                        slow = None;
                    }
                    Request::Source(s) => {
                        source = Some(s);
                        // Its schedules are others: the first ones until told.
                        view = None;
                        slow_every = SLOW_EVERY;
                        force = true;
                        slow = None;
                        last_id = None;
                    }
                    Request::Detail(id) => {
                        let Some(src) = &source else { continue };
                        let msg = match snapshot::load_run_detail_with(
                            &src.store,
                            Some(&src.cfg),
                            src.clock.now(),
                            id,
                        ) {
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
            let Some(src) = source.as_mut() else { continue };
            let id = match snapshot::last_event_id(&src.store) {
                Ok(id) => id,
                Err(e) => {
                    if tx.send(Msg::SnapshotFailed(e.to_string())).is_err() {
                        return;
                    }
                    continue;
                }
            };
            let stale = last_load.is_none_or(|at| at.elapsed() >= FULL_EVERY);
            if !(force || stale || Some(id) != last_id) {
                continue;
            }
            // Applying a config version writes `config_applied`: its version is
            // looked at whenever the trace moved (and on every full reload),
            // before the snapshot that shows it is read.
            src.follow_config(&tx);
            // Reuse the full scans while young, or while nothing was written since.
            let reuse = slow
                .as_ref()
                .filter(|(_, seen, at)| at.elapsed() < slow_every || *seen == id)
                .map(|(s, _, _)| s.clone());
            let req = SnapshotRequest {
                focus,
                reuse_slow: reuse,
                view: view.clone(),
            };
            let started = Instant::now();
            match snapshot::load_snapshot_with(&src.store, &src.cfg, src.clock.now(), &req) {
                Ok((mut snap, used)) => {
                    snap.source = src.id;
                    if req.reuse_slow.is_none() {
                        slow_every = SLOW_EVERY.max(started.elapsed() * SLOW_SHARE);
                        slow = Some((used, snap.last_event_id, Instant::now()));
                    }
                    last_id = Some(snap.last_event_id);
                    last_load = Some(Instant::now());
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

/// How many of the log's last lines `:log` shows.
const LOG_LINES: usize = 500;

/// Performs the [`Cmd`]s; results come back as messages.
struct Executor {
    read_only: bool,
    actor: String,
    live: Option<Live>,
    player: Option<Player>,
    theme: Theme,
    dirs: Vec<PathBuf>,
    requests: Sender<Request>,
    tx: Sender<Msg>,
    embedded: Option<Arc<dyn EmbeddedScheduler>>,
    /// The embedded scheduler was told to stop (the loop then watches for its end).
    stopping: bool,
    /// The embedded scheduler's log file (`:log`).
    log_file: Option<PathBuf>,
}

impl Executor {
    fn request(&self, r: Request) {
        // The poller only stops when the console does.
        let _ = self.requests.send(r);
    }

    fn reply(&self, msg: Msg) {
        let _ = self.tx.send(msg);
    }

    fn execute(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Quit => {}
            Cmd::StopScheduler { now } => {
                self.stopping = true;
                match &self.embedded {
                    Some(e) => e.stop(now),
                    None => self.reply(Msg::SchedulerStopped),
                }
            }
            Cmd::Refresh => self.request(Request::Refresh),
            Cmd::Focus(f) => self.request(Request::Focus(f)),
            Cmd::View(v) => self.request(Request::View(v)),
            Cmd::LoadRunDetail(id) => self.request(Request::Detail(id)),
            Cmd::SetTheme(name) => {
                let msg = match theme::select(Some(&name), false, &self.dirs) {
                    Ok(t) => {
                        let name = t.name.clone();
                        self.theme = t;
                        Ok(name)
                    }
                    Err(e) => Err(e.to_string()),
                };
                self.reply(Msg::ThemeChanged(msg));
            }
            Cmd::ReadLog => {
                let result = match &self.log_file {
                    Some(path) => crate::log_file::tail(path, LOG_LINES)
                        .map(|lines| LogTail {
                            path: path.display().to_string(),
                            lines,
                        })
                        .map_err(|e| format!("cannot read the scheduler's log {}: {e}", path.display())),
                    None => Err(
                        "no scheduler log here: an attached console's scheduler logs where it runs (its stderr, the journal)"
                            .to_string(),
                    ),
                };
                self.reply(Msg::LogTail(result));
            }
            Cmd::Rehearse { file, source } => self.rehearse(&file, source),
            Cmd::RehearsalStep => self.to_player(PlayerReq::Step),
            Cmd::RehearsalPlay(rate) => self.to_player(PlayerReq::Play(rate)),
            Cmd::LeaveRehearsal { source } => {
                // Dropping the player stops it and removes its database.
                self.player = None;
                let Some(live) = &self.live else { return };
                match live.reader() {
                    Ok(store) => self.request(Request::Source(Box::new(Source::live(source, store, live)))),
                    Err(e) => self.reply(Msg::SnapshotFailed(e.to_string())),
                }
            }
            Cmd::Preview(intent) => {
                if self.read_only {
                    return;
                }
                if let Some(p) = &self.player {
                    p.send(PlayerReq::Preview(intent));
                } else if let Some((store, live)) =
                    self.live.as_ref().and_then(|l| Some((l.actions.as_ref()?, l)))
                {
                    let result =
                        actions::preview(store, &live.cfg.get(), &intent, &self.actor, SystemClock.now());
                    self.reply(Msg::Preview { intent, result });
                }
            }
            action => self.act(action),
        }
    }

    fn to_player(&self, req: PlayerReq) {
        if let Some(p) = &self.player {
            p.send(req);
        }
    }

    /// An operator action: refused read-only, to the rehearsal in rehearsal
    /// mode, else on the live store now.
    fn act(&self, cmd: Cmd) {
        if self.read_only {
            self.reply(Msg::ActionResult(Err(
                "read-only console: actions are disabled".to_string()
            )));
            return;
        }
        if let Some(p) = &self.player {
            p.send(PlayerReq::Act(cmd));
            return;
        }
        let result = match self
            .live
            .as_ref()
            .and_then(|l| Some((l.actions.as_ref()?, l.cfg.get())))
        {
            Some((store, cfg)) => actions::perform(store, &cfg, &cmd, &self.actor, SystemClock.now()),
            None => Err("no database to act on".to_string()),
        };
        self.reply(Msg::ActionResult(result));
    }

    /// Loads a scenario and starts it on its own thread as `source`.
    fn rehearse(&mut self, file: &std::path::Path, source: u64) {
        self.player = None;
        let sc = match scenario::load(file) {
            Ok(sc) => sc,
            Err(e) => {
                let error = format!("{}: {e}", file.display());
                self.reply(Msg::RehearsalFailed { source, error });
                return;
            }
        };
        let requests = self.requests.clone();
        let opened = Box::new(move |o: Opened| {
            let _ = requests.send(Request::Source(Box::new(Source {
                id: source,
                store: o.store,
                cfg: o.config,
                clock: o.clock,
                follow: None,
            })));
        });
        match Player::start(sc, source, self.actor.clone(), self.tx.clone(), opened) {
            Ok(p) => self.player = Some(p),
            Err(e) => self.reply(Msg::RehearsalFailed {
                source,
                error: format!("cannot start the rehearsal thread: {e}"),
            }),
        }
    }
}

fn event_loop(
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    opts: ConsoleOptions,
    live: Option<(Live, Store)>,
    theme: Theme,
    dirs: Vec<PathBuf>,
) -> io::Result<i32> {
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
        rehearsal: opts.rehearsal.as_ref().map(|f| f.display().to_string()),
        embedded: opts.embedded.as_ref().map(|e| EmbeddedInfo {
            owner: e.owner().to_string(),
            grace: chrono::Duration::from_std(e.grace()).unwrap_or(chrono::Duration::MAX),
        }),
    });
    let (tx, rx) = mpsc::channel::<Msg>();
    let (req_tx, req_rx) = mpsc::channel::<Request>();
    let stop = Arc::new(AtomicBool::new(false));
    let input = spawn_input(tx.clone(), stop.clone());
    let (live, first_source) = match live {
        Some((live, reader)) => {
            let src = Source::live(model.source, reader, &live);
            (Some(live), Some(Box::new(src)))
        }
        None => (None, None),
    };
    spawn_poller(first_source, tx.clone(), req_rx);
    let mut exec = Executor {
        read_only: opts.read_only,
        actor: operator::default_actor(),
        live,
        player: None,
        theme,
        dirs,
        requests: req_tx,
        tx: tx.clone(),
        embedded: opts.embedded.clone(),
        log_file: opts.log_file.clone(),
        stopping: false,
    };
    if let Some(file) = &opts.rehearsal {
        exec.execute(Cmd::Rehearse {
            file: file.clone(),
            source: model.source,
        });
    }

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
            if let Err(e) = term.draw(|f| view(&model, &exec.theme, f)) {
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
        if exec.stopping && exec.embedded.as_ref().is_some_and(|e| e.stopped()) {
            exec.stopping = false;
            msgs.push(Msg::SchedulerStopped);
        }
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
                exec.execute(cmd);
            }
        }
    };
    stop.store(true, Ordering::SeqCst);
    // The input thread sees `stop` within INPUT_POLL — unless the terminal hung
    // up, where crossterm's read never returns (and spins): then it is left to
    // end with the process instead of keeping the process alive.
    let deadline = Instant::now() + 3 * INPUT_POLL;
    while !input.is_finished() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    if input.is_finished() {
        let _ = input.join();
    }
    // Stops a rehearsal and removes its database before the terminal is restored.
    exec.player = None;
    // `rehearse FILE --console` exits as `rehearse FILE` would on what it saw.
    let rehearsed = opts.rehearsal.is_some().then(|| {
        let progress = model.rehearsal.as_ref().and_then(|r| r.progress.as_ref());
        progress.map(|p| &p.verdicts[..])
    });
    outcome.map(|()| rehearsed.map_or(0, crate::rehearsal::exit_code))
}
