//! `agentcron` (the console with the embedded scheduler), `agentcron console
//! --attach` (the console over a database a headless scheduler runs) and
//! `agentcron rehearse FILE --console` (the console stepping through a rehearsal).

use super::exit;
use crate::agent::runner::DefaultRunner;
use crate::console::{self, ConsoleOptions};
use crate::engine::{Engine, EngineOptions, Stopper};
use crate::store::Store;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub struct Options<'a> {
    pub config: &'a Path,
    pub db: Option<&'a Path>,
    pub theme: Option<String>,
    pub no_color: bool,
    pub read_only: bool,
    /// Attach to a database another process schedules: no embedded scheduler.
    pub attach: bool,
    /// `--listen ADDR`: the embedded scheduler also serves the HTTP API.
    pub listen: Option<&'a str>,
    /// `--log-format`: of the embedded scheduler's log file.
    pub log_format: super::run::LogFormat,
}

pub fn run(o: Options<'_>) -> i32 {
    // An attached console only reads: a file that does not load shows the
    // ledger's version (as the read verbs do); the embedded scheduler needs it.
    let loaded = if o.attach {
        super::db::config_or_ledger(o.config, o.db)
    } else {
        super::load_config(o.config)
    };
    let mut cfg = match loaded {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(db) = o.db {
        cfg.scheduler.database = db.to_path_buf();
    }
    let db = cfg.scheduler.database.clone();
    if o.attach && !db.exists() && !db.to_str().is_some_and(crate::store::pg::is_url) {
        eprintln!(
            "agentcron: no database at {}; start a scheduler first (`agentcron run --headless`) or pass --db",
            db.display()
        );
        return exit::USAGE;
    }
    // An attached console leaves scheduling to the headless scheduler. A
    // read-only console still runs the embedded scheduler (DESIGN: `agentcron
    // [--read-only]` is the console with it); only the operator may not act.
    let embedded = !o.attach;
    // Refuse (not a terminal, unknown theme) before starting anything: an
    // embedded scheduler would otherwise claim runs and start agents first.
    if let Err(code) = console::preflight(&options(&cfg, &o, db.clone())) {
        return code;
    }
    if !embedded && o.listen.is_some() {
        eprintln!(
            "agentcron: --listen serves with a scheduler: use it with `agentcron` or `agentcron run --headless`, not --attach"
        );
        return exit::USAGE;
    }
    // The embedded scheduler logs to a file: the terminal is the console's.
    let log_file = embedded.then(|| cfg.scheduler.log_path(o.config));
    if let Some(path) = &log_file
        && let Err(e) = super::run::init_file_logging(o.log_format, path)
    {
        eprintln!(
            "agentcron: cannot open the scheduler's log file {}: {e}; set [scheduler] log_file",
            path.display()
        );
        return exit::USAGE;
    }
    let scheduler = if embedded {
        match start_embedded(cfg.clone(), o.listen) {
            Ok(s) => Some(Arc::new(s)),
            Err(code) => return code,
        }
    } else {
        None
    };
    let mut opts = options(&cfg, &o, db);
    opts.log_file = log_file;
    opts.embedded = scheduler
        .clone()
        .map(|s| s as Arc<dyn console::EmbeddedScheduler>);
    let code = console::run(opts);
    // A quit through the dialog stopped it already; SIGTERM / SIGHUP did not:
    // that is a shutdown (its attempts, if the grace period runs out, end as
    // "stopped by scheduler shutdown", never left to be found lost).
    if let Some(s) = scheduler {
        s.shut_down();
        s.join();
    }
    code
}

fn options(cfg: &crate::config::Config, o: &Options<'_>, db: std::path::PathBuf) -> ConsoleOptions {
    ConsoleOptions {
        config: cfg.clone(),
        db,
        theme: o.theme.clone(),
        no_color: o.no_color,
        read_only: o.read_only,
        mode_label: "LIVE".into(),
        rehearsal: None,
        embedded: None,
        log_file: None,
    }
}

/// `agentcron rehearse FILE --console`: the scenario is checked here, so a bad
/// file is reported like `rehearse` headless does, before the screen changes.
pub fn rehearse(file: &Path, theme: Option<String>, no_color: bool, read_only: bool) -> i32 {
    let sc = match crate::rehearsal::scenario::load(file) {
        Ok(sc) => sc,
        Err(e) => return super::check::report_load_error(file, &e),
    };
    console::run(ConsoleOptions {
        config: sc.config,
        db: std::path::PathBuf::new(),
        theme,
        no_color,
        read_only,
        mode_label: "REHEARSAL".into(),
        rehearsal: Some(file.to_path_buf()),
        embedded: None,
        log_file: None,
    })
}

/// The scheduler thread of `agentcron` (no verb), and how the console stops it.
#[derive(Debug)]
struct Embedded {
    owner: String,
    grace: std::time::Duration,
    /// Resolves the engine's shutdown future with who stopped it (taken on
    /// the first stop).
    shutdown: Mutex<Option<tokio::sync::oneshot::Sender<Stopper>>>,
    /// True: stop running attempts now (they retry).
    stop_now: tokio::sync::watch::Sender<bool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Embedded {
    /// Stops it for a signal (the console ended without its quit dialog):
    /// running attempts get the grace period, then end as stopped by the
    /// shutdown. Nothing when the dialog stopped it already.
    fn shut_down(&self) {
        if let Some(tx) = self.shutdown.lock().ok().and_then(|mut s| s.take()) {
            let _ = tx.send(Stopper::Shutdown);
        }
    }

    fn join(&self) {
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl console::EmbeddedScheduler for Embedded {
    fn owner(&self) -> &str {
        &self.owner
    }

    fn grace(&self) -> std::time::Duration {
        self.grace
    }

    fn stop(&self, now: bool) {
        if now {
            let _ = self.stop_now.send(true);
        }
        if let Some(tx) = self.shutdown.lock().ok().and_then(|mut s| s.take()) {
            let _ = tx.send(Stopper::Operator);
        }
    }

    fn stopped(&self) -> bool {
        self.thread
            .lock()
            .map(|t| t.as_ref().is_none_or(|h| h.is_finished()))
            .unwrap_or(true)
    }
}

/// Runs the engine on its own thread and runtime; it stops when told (the
/// console quit): it waits for running attempts within the grace period, or
/// stops them at once so they retry. With `listen` it also serves the HTTP
/// API until the engine has stopped.
fn start_embedded(cfg: crate::config::Config, listen: Option<&str>) -> Result<Embedded, i32> {
    super::run::raise_open_files();
    let store = match Store::open(&cfg.scheduler.database) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("agentcron: {e}");
            return Err(exit::USAGE);
        }
    };
    // As `run --headless`: the file becomes a config version and the
    // scheduler runs what the database runs; `agentcron reload` reaches it.
    let owner = crate::engine::default_owner();
    let reload = crate::engine::ReloadSource::new(&cfg.path);
    let super::config_cmd::Startup {
        cfg,
        version,
        secrets,
    } = super::config_cmd::startup(&store, &cfg, &owner)?;
    let registration = super::config_cmd::registration(&store, &cfg);
    let cfg = Arc::new(cfg);
    let applied = crate::config::Applied::new(cfg.clone());
    let server = super::run::bind_api(&applied, listen)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<Stopper>();
    let (now_tx, now_rx) = tokio::sync::watch::channel(false);
    let grace = cfg.scheduler.shutdown_grace;
    let opts = EngineOptions {
        owner,
        registry: Some(registration),
        reload: Some(reload),
        applied: Some(applied),
        ..EngineOptions::default()
    };
    let owner = opts.owner.clone();
    let handle = std::thread::Builder::new()
        .name("scheduler".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_multi_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                let api = server.map(super::run::spawn_api);
                let clock = super::run::scheduler_clock(&store);
                let mut engine = Engine::new(cfg.clone(), store, clock, Arc::new(DefaultRunner), opts);
                engine.set_config_version(version);
                engine.keep_secrets(secrets);
                // A dropped sender (the console gone without a word) is a shutdown.
                let shutdown = async { stop_rx.await.unwrap_or(Stopper::Shutdown) };
                // Errors end up in the store's trace where possible; the console
                // shows the scheduler as stopped by its missing ticks.
                let _ = engine.run_live_until(shutdown, grace, Some(now_rx)).await;
                if let Some(api) = api {
                    api.stop().await;
                }
            });
        })
        .map_err(|e| {
            eprintln!("agentcron: cannot start the scheduler thread: {e}");
            exit::USAGE
        })?;
    Ok(Embedded {
        owner,
        grace,
        shutdown: Mutex::new(Some(stop_tx)),
        stop_now: now_tx,
        thread: Mutex::new(Some(handle)),
    })
}
