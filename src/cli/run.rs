//! `agentcron run --headless`: the scheduler alone, until SIGINT or SIGTERM.

use super::exit;
use crate::agent::runner::DefaultRunner;
use crate::engine::{Engine, EngineOptions};
use crate::store::Store;
use crate::time::SystemClock;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the tracing subscriber (stderr). `RUST_LOG` overrides the level.
pub fn init_logging(format: LogFormat) {
    init_logging_to(format, std::io::stderr);
}

/// Installs the tracing subscriber writing to `path` (the console's embedded
/// scheduler: the terminal is the console's), rotated by size as
/// [`super::log_file`] says. Fails when the file cannot be opened.
pub fn init_file_logging(format: LogFormat, path: &Path) -> std::io::Result<()> {
    let file = crate::log_file::RotatingFile::open(path, crate::log_file::MAX_BYTES, crate::log_file::KEEP)?;
    init_logging_to(format, std::sync::Mutex::new(file));
    Ok(())
}

fn init_logging_to<W>(format: LogFormat, writer: W)
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.with_ansi(false).try_init(),
    };
}

/// How often a scheduler on a PostgreSQL ledger measures the database's
/// clock again.
const CLOCK_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// A new reading of the database's clock replaces the last one only if its
/// round trip took at most this (its error is at most half of it).
const TRUSTED_ROUND_TRIP_MS: i64 = 200;

/// The clock a scheduler runs on: this machine's for an embedded ledger; for
/// a PostgreSQL one, the database's (this machine's moved by the measured
/// offset, measured again every [`CLOCK_EVERY`]), so that the schedulers
/// sharing it agree on every lease and due time however their machines'
/// clocks drift.
pub(super) fn scheduler_clock(store: &Arc<Store>) -> Arc<dyn crate::time::Clock> {
    let offset = match store.database_offset_ms() {
        Ok(Some(reading)) => reading.offset_ms,
        Ok(None) => return Arc::new(SystemClock),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the database's clock; using this machine's until it can");
            0
        }
    };
    if offset.abs() >= 1_000 {
        tracing::warn!(
            offset_ms = offset,
            "this machine's clock is far from the database's; scheduling on the database's"
        );
    } else {
        tracing::info!(offset_ms = offset, "scheduling on the database's clock");
    }
    let clock = crate::time::OffsetClock::new(offset);
    let (measured, weak) = (clock.clone(), Arc::downgrade(store));
    let _ = std::thread::Builder::new()
        .name("database-clock".into())
        .spawn(move || {
            loop {
                std::thread::sleep(CLOCK_EVERY);
                let Some(store) = weak.upgrade() else { return };
                // A reading slower than this says more about this
                // process's stalls (a freeze, a starved machine) than
                // about the clocks: the last good one stays.
                if let Ok(Some(reading)) = store.database_offset_ms()
                    && reading.round_trip_ms <= TRUSTED_ROUND_TRIP_MS
                {
                    measured.set_offset_ms(reading.offset_ms);
                }
            }
        });
    Arc::new(clock)
}

/// Raises the soft limit on open files to the hard limit (a scheduler's HTTP
/// connections, agent pipes and database handles all take one) and says so.
pub(super) fn raise_open_files() {
    match crate::process::raise_open_files() {
        Ok(limit) if limit.now > limit.before => tracing::info!(
            before = limit.before,
            now = limit.now,
            "open-files limit raised to the hard limit"
        ),
        Ok(limit) => tracing::info!(limit = limit.now, "open-files limit already at the hard limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-files limit"),
    }
}

pub fn run(config: &Path, db: Option<&Path>, format: LogFormat, listen: Option<&str>) -> i32 {
    init_logging(format);
    raise_open_files();
    let mut cfg = match super::load_config(config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(db) = db {
        cfg.scheduler.database = db.to_path_buf();
    }
    let store = match Store::open(&cfg.scheduler.database) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("agentcron: {e}");
            return exit::USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentcron: cannot start the async runtime: {e}");
            return exit::USAGE;
        }
    };
    // The file is stored as a config version; the scheduler runs what the
    // database runs (an approval-gated change waits), only its stages.
    let owner = crate::engine::default_owner();
    let database = crate::store::shown_database(&cfg.scheduler.database);
    let super::config_cmd::Startup {
        cfg,
        version,
        secrets,
    } = match super::config_cmd::startup(&store, &cfg, &owner) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let grace = cfg.scheduler.shutdown_grace;
    let cfg = Arc::new(cfg);
    let reload = crate::engine::ReloadSource::new(config);
    let applied = crate::config::Applied::new(cfg.clone());
    let server = match bind_api(&applied, listen) {
        Ok(s) => s,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let api = server.map(spawn_api);
        let registration = super::config_cmd::registration(&store, &cfg);
        // SIGHUP reloads the config (it used to end the process).
        let hup = reload.hup.clone();
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(mut signal) => {
                tokio::spawn(async move {
                    while signal.recv().await.is_some() {
                        hup.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                });
            }
            Err(e) => tracing::warn!(error = %e, "cannot catch SIGHUP; use `agentcron reload`"),
        }
        let clock = scheduler_clock(&store);
        let mut engine = Engine::new(
            cfg.clone(),
            store,
            clock,
            Arc::new(DefaultRunner),
            EngineOptions {
                owner,
                registry: Some(registration),
                reload: Some(reload),
                applied: Some(applied),
                ..EngineOptions::default()
            },
        );
        engine.set_config_version(version);
        engine.keep_secrets(secrets);
        tracing::info!(
            owner = engine.owner(),
            schedules = cfg.schedules.len(),
            config_version = version,
            database = %database,
            "agentcron scheduler started"
        );
        let outcome = engine.run_live(shutdown_signal(), grace).await;
        if let Some(api) = api {
            api.stop().await;
        }
        match outcome {
            Ok(()) => {
                tracing::info!("stopped");
                exit::OK
            }
            Err(e) => {
                tracing::error!(error = %e, "scheduler stopped on an error");
                eprintln!("agentcron: {e}");
                exit_code(&e)
            }
        }
    })
}

/// The exit code of a scheduler stopped by `e`: 2 when its ledger file went
/// away or was replaced (nothing it could keep writing to), else 1.
fn exit_code(e: &crate::engine::EngineError) -> i32 {
    match e {
        crate::engine::EngineError::Store(crate::store::StoreError::FileChanged(_)) => exit::USAGE,
        _ => exit::DOES_NOT_HOLD,
    }
}

/// Binds the HTTP server when asked to (`--listen` wins over the config), so
/// a taken port or a bad tokens file stops the command before the scheduler
/// starts (exit 2).
pub(crate) fn bind_api(
    applied: &crate::config::Applied,
    listen: Option<&str>,
) -> Result<Option<crate::api::Server>, i32> {
    let addr = match listen.map(crate::config::model::parse_listen).transpose() {
        Ok(a) => a.or(applied.get().scheduler.listen),
        Err(e) => {
            eprintln!("agentcron: --listen: {e}");
            return Err(exit::USAGE);
        }
    };
    let Some(addr) = addr else { return Ok(None) };
    match crate::api::Server::bind(addr, applied.clone(), Arc::new(SystemClock)) {
        Ok(s) => {
            let at = s.local_addr().map_or(addr.to_string(), |a| a.to_string());
            tracing::info!(address = %at, api_tokens = s.has_tokens(), "HTTP server listening");
            if !addr.ip().is_loopback() {
                tracing::warn!(address = %at, "listening beyond this machine: /livez, /readyz{} answer anyone who can reach it",
                    if s.has_tokens() { "" } else { " and /metrics" });
            }
            Ok(Some(s))
        }
        Err(e) => {
            eprintln!("agentcron: {e}");
            Err(exit::USAGE)
        }
    }
}

/// The HTTP server running on the current runtime.
pub(crate) struct ApiTask {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// How long open connections get to finish when the scheduler stops.
const API_STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

impl ApiTask {
    /// Stops accepting, lets open requests finish (briefly), then ends it.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        let abort = self.task.abort_handle();
        if tokio::time::timeout(API_STOP_WITHIN, self.task).await.is_err() {
            abort.abort();
        }
    }
}

/// Starts serving on the current tokio runtime.
pub(crate) fn spawn_api(server: crate::api::Server) -> ApiTask {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    ApiTask { stop, task }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
