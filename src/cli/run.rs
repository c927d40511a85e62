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
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.with_ansi(false).try_init(),
    };
}

pub fn run(config: &Path, db: Option<&Path>, format: LogFormat) -> i32 {
    init_logging(format);
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
    let grace = cfg.scheduler.shutdown_grace;
    let cfg = Arc::new(cfg);
    runtime.block_on(async move {
        let mut engine = Engine::new(
            cfg.clone(),
            store,
            Arc::new(SystemClock),
            Arc::new(DefaultRunner),
            EngineOptions::default(),
        );
        tracing::info!(
            owner = engine.owner(),
            schedules = cfg.schedules.len(),
            database = %cfg.scheduler.database.display(),
            "agentcron scheduler started"
        );
        match engine.run_live(shutdown_signal(), grace).await {
            Ok(()) => {
                tracing::info!("stopped");
                exit::OK
            }
            Err(e) => {
                tracing::error!(error = %e, "scheduler stopped on an error");
                eprintln!("agentcron: {e}");
                exit::DOES_NOT_HOLD
            }
        }
    })
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
