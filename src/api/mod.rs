//! The HTTP server of `--listen ADDR` (DESIGN.md "Status"): probes
//! (`/livez`, `/readyz`), Prometheus metrics (`/metrics`, see [`metrics`]) and
//! the API under `/api/v1/` — the CLI's JSON shapes for reads, and the
//! operator actions through the same functions as the CLI ([`crate::operator`]).
//!
//! Security: the address defaults to loopback (the caller chooses it);
//! `/api/v1/` needs a bearer token of `[api] tokens_file` ([`auth`]), `operate`
//! for mutations; without tokens only the probes and `/metrics` answer. Bodies
//! are limited to [`BODY_LIMIT`]; a bad body is a 400 with a message.
//!
//! Holding a connection needs no token, so the server bounds what anyone can
//! hold: `[api] max_connections` open at once (one more is closed as soon as
//! it is accepted), and `[api] header_timeout` to send a request's headers or
//! to sit idle between requests. Past those, a flood of idle connections costs
//! the scheduler no file descriptor its agents need.
//!
//! Handlers read the configuration the engine runs now ([`Applied`]): a
//! reload that adds an event listener is served at once.

pub mod auth;
pub mod metrics;
mod routes;

use crate::config::{Applied, Config};
use crate::store::Store;
use crate::time::Clock;
use auth::Tokens;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Largest request body accepted (an event payload, an action's reason).
pub const BODY_LIMIT: usize = 64 * 1024;

/// How long the accept loop waits after the system refused it a descriptor
/// (EMFILE, ENFILE) before it tries again: the listening socket stays
/// readable, so trying at once would only spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// At most one warning this often about connections turned away (past the
/// cap, or no descriptor to accept them): a flood must not become one in the
/// log too.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Counts what it is told of and says when to warn: the first time, then at
/// most once per [`WARN_EVERY`], with how many happened since.
#[derive(Default)]
struct Throttle {
    warned: Option<tokio::time::Instant>,
    since: u64,
}

impl Throttle {
    /// One more; `Some(count)` when it is time to warn about `count` of them.
    fn note(&mut self) -> Option<u64> {
        self.since += 1;
        let now = tokio::time::Instant::now();
        if self.warned.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
            return None;
        }
        self.warned = Some(now);
        Some(std::mem::take(&mut self.since))
    }
}

/// What every handler shares.
pub struct Api {
    pub(crate) store: Arc<Store>,
    /// The configuration the engine runs; read it once per request.
    pub(crate) applied: Applied,
    pub(crate) tokens: Tokens,
    pub(crate) metrics: metrics::Metrics,
    pub(crate) clock: Arc<dyn Clock>,
}

impl Api {
    /// The configuration the engine runs now.
    pub(crate) fn cfg(&self) -> Arc<Config> {
        self.applied.get()
    }
}

/// What bounds the connections (`[api]`, read when the server starts).
#[derive(Debug, Clone, Copy)]
struct Limits {
    max_connections: usize,
    header_timeout: Duration,
}

/// A bound server, not yet serving: binding first lets the command refuse a
/// taken port or a bad tokens file before the scheduler starts.
pub struct Server {
    listener: std::net::TcpListener,
    api: Arc<Api>,
    limits: Limits,
}

impl Server {
    /// Binds `addr`, reads the tokens file and opens the database (its own
    /// connection: API reads never wait for the engine's).
    pub fn bind(addr: SocketAddr, applied: Applied, clock: Arc<dyn Clock>) -> Result<Server, String> {
        let cfg = applied.get();
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
            limits: Limits {
                max_connections: cfg.api.max_connections,
                header_timeout: cfg.api.header_timeout,
            },
            api: Arc::new(Api {
                store: Arc::new(store),
                applied,
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

    /// Serves until `shutdown` resolves, then lets open requests finish (the
    /// caller bounds how long; dropping this future closes every connection).
    /// Needs a tokio runtime.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::from_std(self.listener)?;
        let limits = self.limits;
        let router = routes::router(self.api).layer(axum::middleware::map_request_with_state(
            limits.header_timeout,
            body_within,
        ));
        let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
        let (closing, closed) = tokio::sync::watch::channel(false);
        // Owning the connections' tasks here means dropping this future ends
        // them all: none outlives the server.
        let mut connections = tokio::task::JoinSet::new();
        let (mut refused, mut starved) = (Throttle::default(), Throttle::default());
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                Some(_) = connections.join_next() => continue,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    if let Some(times) = starved.note() {
                        tracing::warn!(error = %e, times, "the HTTP server cannot accept a connection; trying again");
                    }
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                // Said before the close, so whoever sees the connection
                // closed finds the reason already in the log.
                if let Some(closed) = refused.note() {
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        closed,
                        "the HTTP server holds [api] max_connections; new connections are closed until one ends"
                    );
                }
                // Closed at once: a descriptor held past the cap is one an
                // agent's pipe or the database may not get.
                drop(stream);
                continue;
            };
            connections.spawn(connection(stream, router.clone(), limits, closed.clone(), slot));
        }
        let _ = closing.send(true);
        while connections.join_next().await.is_some() {}
        Ok(())
    }
}

/// Gives a request's body as long to arrive as its headers had: the handlers
/// read it before they look at the token, so without a bound a client that
/// announced a body and never sent it would hold its connection forever.
async fn body_within(
    axum::extract::State(limit): axum::extract::State<Duration>,
    request: axum::extract::Request,
) -> axum::extract::Request {
    request.map(|body| {
        axum::body::Body::new(BodyWithin {
            body,
            deadline: Box::pin(tokio::time::sleep(limit)),
        })
    })
}

/// A request body that fails once its deadline passes (the handler answers
/// 400, and the connection closes: its body was not read to the end).
struct BodyWithin {
    body: axum::body::Body,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl hyper::body::Body for BodyWithin {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::future::Future;
        use std::task::Poll;
        if let Poll::Ready(frame) = std::pin::Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the body did not arrive within [api] header_timeout",
            )))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves one connection (HTTP/1) until the client closes it, it times out,
/// or the server stops (then the request in flight finishes first). `slot`
/// is its place under the cap, given back when it ends.
async fn connection(
    stream: tokio::net::TcpStream,
    router: axum::Router,
    limits: Limits,
    mut closing: tokio::sync::watch::Receiver<bool>,
    slot: tokio::sync::OwnedSemaphorePermit,
) {
    let io = hyper_util::rt::TokioIo::new(stream);
    let service = hyper_util::service::TowerToHyperService::new(router);
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The header timeout runs whenever the connection waits for a request's
    // head: from the accept, and again after every response, so it is the
    // idle keep-alive timeout too.
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "HTTP connection ended");
                }
                break;
            }
            // The server stops (or is gone): finish the request in flight.
            _ = closing.changed(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
    drop(slot);
}
