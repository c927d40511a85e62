//! The HTTP server of `--listen ADDR` (DESIGN.md "Status"): probes
//! (`/livez`, `/readyz`), Prometheus metrics (`/metrics`, see [`metrics`]) and
//! the API under `/api/v1/` — the CLI's JSON shapes for reads, and the
//! operator actions through the same functions as the CLI ([`crate::operator`]).
//!
//! Security: the address defaults to loopback (the caller chooses it);
//! `/api/v1/` needs a bearer token of `[api] tokens_file` ([`auth`]), `operate`
//! for mutations; without tokens only the probes and `/metrics` answer. Bodies
//! are limited to [`BODY_LIMIT`]; a bad body is a 400 with a message.

pub mod auth;
pub mod metrics;
mod routes;

use crate::config::Config;
use crate::store::Store;
use crate::time::Clock;
use auth::Tokens;
use std::net::SocketAddr;
use std::sync::Arc;

/// Largest request body accepted (an event payload, an action's reason).
pub const BODY_LIMIT: usize = 64 * 1024;

/// What every handler shares.
pub struct Api {
    pub(crate) store: Arc<Store>,
    pub(crate) cfg: Arc<Config>,
    pub(crate) tokens: Tokens,
    pub(crate) metrics: metrics::Metrics,
    pub(crate) clock: Arc<dyn Clock>,
}

/// A bound server, not yet serving: binding first lets the command refuse a
/// taken port or a bad tokens file before the scheduler starts.
pub struct Server {
    listener: std::net::TcpListener,
    api: Arc<Api>,
}

impl Server {
    /// Binds `addr`, reads the tokens file and opens the database (its own
    /// connection: API reads never wait for the engine's).
    pub fn bind(addr: SocketAddr, cfg: Arc<Config>, clock: Arc<dyn Clock>) -> Result<Server, String> {
        let tokens = match &cfg.api.tokens_file {
            Some(path) => Tokens::load(path)?,
            None => Tokens::default(),
        };
        let store = Store::open(&cfg.scheduler.database).map_err(|e| e.to_string())?;
        let metrics = metrics::Metrics::new(&store, &cfg).map_err(|e| e.to_string())?;
        let listener =
            std::net::TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        Ok(Server {
            listener,
            api: Arc::new(Api {
                store: Arc::new(store),
                cfg,
                tokens,
                metrics,
                clock,
            }),
        })
    }

    /// Where it listens (the port, when `:0` asked for any).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Whether any API token is configured.
    pub fn has_tokens(&self) -> bool {
        !self.api.tokens.is_empty()
    }

    /// Serves until `shutdown` resolves. Needs a tokio runtime.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::from_std(self.listener)?;
        axum::serve(listener, routes::router(self.api))
            .with_graceful_shutdown(shutdown)
            .await
    }
}
