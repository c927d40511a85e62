//! `agentcron` (the console with the embedded scheduler), `agentcron console
//! --attach` (the console over a database a headless scheduler runs) and
//! `agentcron rehearse FILE --console` (the console stepping through a rehearsal).

use super::exit;
use crate::agent::runner::DefaultRunner;
use crate::console::{self, ConsoleOptions};
use crate::engine::{Engine, EngineOptions};
use crate::store::Store;
use crate::time::SystemClock;
use std::path::Path;
use std::sync::Arc;

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
}

pub fn run(o: Options<'_>) -> i32 {
    let mut cfg = match super::load_config(o.config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(db) = o.db {
        cfg.scheduler.database = db.to_path_buf();
    }
    let db = cfg.scheduler.database.clone();
    if o.attach && !db.exists() {
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
    let scheduler = if embedded {
        match start_embedded(cfg.clone(), o.listen) {
            Ok(s) => Some(s),
            Err(code) => return code,
        }
    } else {
        None
    };
    let code = console::run(options(&cfg, &o, db));
    if let Some((stop, handle)) = scheduler {
        let _ = stop.send(());
        let _ = handle.join();
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
    })
}

type Embedded = (tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>);

/// Runs the engine on its own thread and runtime; it stops when told (the
/// console quit), letting running attempts finish within the grace period.
fn start_embedded(cfg: crate::config::Config, listen: Option<&str>) -> Result<Embedded, i32> {
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
    let (cfg, version) = super::config_cmd::startup(&store, &cfg, &owner)?;
    let registration = super::config_cmd::registration(&store, &cfg);
    let cfg = Arc::new(cfg);
    let server = super::run::bind_api(&cfg, listen)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let grace = cfg.scheduler.shutdown_grace;
    let handle = std::thread::Builder::new()
        .name("scheduler".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_multi_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                let api = server.map(super::run::spawn_api);
                let mut engine = Engine::new(
                    cfg.clone(),
                    store,
                    Arc::new(SystemClock),
                    Arc::new(DefaultRunner),
                    EngineOptions {
                        owner,
                        registry: Some(registration),
                        reload: Some(reload),
                        ..EngineOptions::default()
                    },
                );
                engine.set_config_version(version);
                let shutdown = async {
                    let _ = stop_rx.await;
                };
                // Errors end up in the store's trace where possible; the console
                // shows the scheduler as stopped by its missing ticks.
                let _ = engine.run_live(shutdown, grace).await;
                if let Some(api) = api {
                    api.stop().await;
                }
            });
        })
        .map_err(|e| {
            eprintln!("agentcron: cannot start the scheduler thread: {e}");
            exit::USAGE
        })?;
    Ok((stop_tx, handle))
}
