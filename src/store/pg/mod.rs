//! The PostgreSQL ledger (issue 16, first part): several schedulers on
//! several machines share one database, and the database — not a leader, not
//! a lock a process believes it holds — decides every race.
//!
//! - A fire's identity is a constraint: each scheduler inserts the windows it
//!   finds due with `ON CONFLICT (tenant, schedule, window_key) DO NOTHING
//!   RETURNING id`, and only the insert that returned an id opened it.
//! - A claim is one conditional `UPDATE … WHERE id AND state = ANY(expected)
//!   RETURNING` the new fencing token: its changed-row count picks the winner.
//! - Every later write of a claimed run — renewal, completion, the lost-lease
//!   takeover — repeats the whole state it expects in its `WHERE` (id, fencing
//!   token, owner, state, and for a takeover the expiry it saw), never the id
//!   alone: a writer with an old fence or owner changes nothing and is told
//!   why ([`Refused`]). (Oban #1488 matched a leader row by name only; River
//!   #1302's rescuer updated by id and overwrote a completed job.)
//! - Lease instants come from the database's clock (`agentcron_now_ms()`),
//!   and a process stops trusting its lease before the database's expiry
//!   ([`Lease::trust_until`]): its own clock only ever shortens it.
//!
//! Not yet: the engine, CLI and console still run on the embedded ledger
//! only; this module is the protocol they will share (see docs/POSTGRES.md,
//! "Several schedulers on PostgreSQL").

pub mod copy;
mod schema;
pub(crate) mod session;
pub(crate) mod sql;

pub use schema::PG_SCHEMA_VERSION;

use crate::store::types::{Pool, RunState};
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};
use tokio_postgres::config::{Host, SslMode};

/// Errors from the PostgreSQL ledger, named plainly for operators. A URL is
/// only ever shown without its password.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("{shown}: {message}")]
    Url { shown: String, message: String },
    #[error("cannot connect to {shown}: {message}")]
    Connect { shown: String, message: String },
    #[error(
        "{shown} was migrated by a newer agentcron (PostgreSQL schema {found}, this build knows up to {known}); upgrade agentcron"
    )]
    TooNew { shown: String, found: i64, known: i64 },
    #[error(
        "{shown} is not an agentcron ledger (it has tables {tables} but no agentcron_meta); left untouched — give agentcron an empty database or schema"
    )]
    Foreign { shown: String, tables: String },
    #[error("run {run}: {from} → {to} is not allowed by the run state machine")]
    IllegalTransition { run: i64, from: RunState, to: RunState },
    #[error("PostgreSQL: {}", with_causes(.0))]
    Sql(#[from] tokio_postgres::Error),
}

pub type Result<T> = std::result::Result<T, PgError>;

/// Whether `db` names a PostgreSQL ledger rather than an embedded file.
pub fn is_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// `url` as shown to operators: without its password (or a placeholder
/// when it does not parse).
pub fn shown_url(url: &str) -> String {
    let (url, _) = take_param(url, "sslrootcert");
    tokio_postgres::Config::from_str(&url)
        .map(|c| shown(&c))
        .unwrap_or_else(|_| "the PostgreSQL URL".into())
}

/// The `[scheduler] password_file` of the config this process runs, for a
/// ledger opened by its URL alone ([`crate::store::Store::open`]): one
/// process runs one config. Set once, by the command line as it loads it.
static PASSWORD_FILE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Uses `path` as the password file of ledgers opened by URL (the first
/// call wins).
pub fn use_password_file(path: Option<&Path>) {
    if let Some(p) = path {
        let _ = PASSWORD_FILE.set(p.to_path_buf());
    }
}

/// The password file set by [`use_password_file`], if any.
pub(crate) fn password_file() -> Option<&'static Path> {
    PASSWORD_FILE.get().map(|p| p.as_path())
}

/// An error with its causes, `a: b: c` (tokio-postgres says "error
/// performing TLS handshake" and keeps the why in its source).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// Where a connection goes, without its password: `postgres://user@host:port/db`.
fn shown(cfg: &tokio_postgres::Config) -> String {
    let host = match cfg.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{host}:{port}/{}",
        cfg.get_user().unwrap_or(""),
        cfg.get_dbname().unwrap_or("")
    )
}

/// Parses `url` and finds its password: the URL's own, else `PGPASSWORD`,
/// else the first line of `password_file`.
fn config(url: &str, password_file: Option<&Path>) -> Result<(tokio_postgres::Config, String, Tls)> {
    // `sslrootcert` is libpq's; tokio-postgres does not know it.
    let (url, root_file) = take_param(url, "sslrootcert");
    let mut cfg = tokio_postgres::Config::from_str(&url).map_err(|e| PgError::Url {
        // The text is never echoed: it may hold the password.
        shown: "the PostgreSQL URL".into(),
        message: format!("{e} (expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE)"),
    })?;
    let shown = shown(&cfg);
    let tls = if cfg.get_ssl_mode() == SslMode::Require {
        Tls::Rustls(
            tls_connector(root_file.as_deref()).map_err(|message| PgError::Url {
                shown: shown.clone(),
                message,
            })?,
        )
    } else {
        Tls::None
    };
    if cfg.get_password().is_none() {
        if let Ok(p) = std::env::var("PGPASSWORD") {
            cfg.password(p);
        } else if let Some(path) = password_file {
            let text = std::fs::read_to_string(path).map_err(|e| PgError::Url {
                shown: shown.clone(),
                message: format!("cannot read password_file {}: {e}", path.display()),
            })?;
            cfg.password(text.lines().next().unwrap_or(""));
        }
    }
    if cfg.get_application_name().is_none() {
        cfg.application_name("agentcron");
    }
    // An unreachable host is said within seconds, not after TCP's minutes.
    if cfg.get_connect_timeout().is_none() {
        cfg.connect_timeout(CONNECT_TIMEOUT);
    }
    Ok((cfg, shown, tls))
}

/// How long a connection may take to open unless the URL says
/// (`connect_timeout=S`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How a connection is secured: `sslmode=require` is TLS whose server
/// certificate is verified — against `sslrootcert=FILE` (PEM) when the URL
/// names one, else the Mozilla roots (stricter than libpq's `require`, which
/// does not verify). Any other mode is a plain connection (a server's
/// certificate is never half trusted).
#[derive(Clone)]
enum Tls {
    None,
    Rustls(tokio_postgres_rustls::MakeRustlsConnect),
}

/// `url` without its query parameter `name`, and that parameter's value.
fn take_param(url: &str, name: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut value = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == name => {
                value = Some(v.to_string());
                false
            }
            _ => true,
        })
        .collect();
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, value)
}

fn tls_connector(
    root_file: Option<&str>,
) -> std::result::Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match root_file {
        Some(file) => {
            let certs = CertificateDer::pem_file_iter(file)
                .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| format!("sslrootcert {file}: {e}"))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("sslrootcert {file}: no certificate in it"));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// A run opened by a scheduler that found its window due.
#[derive(Debug, Clone)]
pub struct NewWindow {
    pub tenant: String,
    pub schedule: String,
    pub window_key: String,
    pub window_start: i64,
    pub window_end: i64,
    pub due_at: i64,
    pub reason: String,
    pub pool: Pool,
    pub next_check_at: Option<i64>,
}

/// A claim as the database granted it: the run is `running` under `fence`
/// and `owner` until `expires_ms` (database clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub run_id: i64,
    pub fence: i64,
    pub owner: String,
    pub expires_ms: i64,
    /// When this process stops trusting the lease: the request's start on
    /// the local monotonic clock plus the lease's length, less the safety
    /// margin — before the database's expiry, however late the answer came.
    pub trust_until: Instant,
}

impl Lease {
    /// Whether this process may still act under the lease.
    pub fn trusted(&self) -> bool {
        Instant::now() < self.trust_until
    }
}

/// A window [`PgStore::open_claimed`] opened, and its claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedClaimed {
    pub tenant: String,
    pub schedule: String,
    pub window_key: String,
    pub lease: Lease,
}

/// Why a write under an expected state changed nothing: the row as found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("run {0} does not exist")]
    NoRun(i64),
    #[error("run {run} is {actual}, not {expected}")]
    State {
        run: i64,
        expected: String,
        actual: RunState,
    },
    #[error("run {run} is fenced by token {actual}, not {expected}: a newer claim took it")]
    Fence { run: i64, expected: i64, actual: i64 },
    #[error("run {run} is leased to {actual}, not {expected}")]
    Owner {
        run: i64,
        expected: String,
        actual: String,
    },
    #[error("run {run}'s lease expired at {expires_ms} (database clock {now_ms})")]
    Expired { run: i64, expires_ms: i64, now_ms: i64 },
    #[error("run {run}'s lease changed since it was seen expired (now until {expires_ms})")]
    Renewed { run: i64, expires_ms: i64 },
}

/// A lease the database clock says has lapsed past the takeover grace, as
/// read: [`PgStore::take_over`] acts only if the row is still exactly this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LapsedLease {
    pub run_id: i64,
    pub fence: i64,
    pub owner: String,
    pub expires_ms: i64,
}

/// The PostgreSQL ledger's set-based claim protocol, on one connection to
/// one database whose schema is current: the same session (thread, client,
/// reconnects, error mapping) a [`crate::store::Store`] on PostgreSQL runs
/// on, driven asynchronously.
#[derive(Clone)]
pub struct PgStore {
    session: std::sync::Arc<session::PgSession>,
    shown: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("db", &self.shown).finish()
    }
}

/// How much sooner than the database's expiry a process stops trusting its
/// lease: a tenth of the lease, at least 100 ms (clock rate differences,
/// scheduling delays after the answer arrived).
fn trust_margin(lease: Duration) -> Duration {
    (lease / 10).max(Duration::from_millis(100)).min(lease)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl PgStore {
    /// Connects to `url` (password from the URL, `PGPASSWORD` or
    /// `password_file`) and migrates its schema (see [`schema`]).
    pub async fn connect(url: &str, password_file: Option<&Path>) -> Result<PgStore> {
        let (_, shown, _) = config(url, password_file)?;
        let (url, file) = (url.to_string(), password_file.map(Path::to_path_buf));
        let session =
            tokio::task::spawn_blocking(move || session::PgSession::connect(&url, file.as_deref(), true))
                .await
                .map_err(|e| PgError::Connect {
                    shown: shown.clone(),
                    message: e.to_string(),
                })??;
        Ok(PgStore {
            session: std::sync::Arc::new(session),
            shown,
        })
    }

    /// The database as shown to operators (no password).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The session this store runs on (`db copy` streams through it).
    pub(crate) fn session(&self) -> &session::PgSession {
        &self.session
    }

    /// The schema version the database is at.
    pub async fn schema_version(&self) -> Result<i64> {
        self.session
            .with_client(|c| {
                Box::pin(async move {
                    Ok(c.client
                        .query_one(
                            "SELECT value FROM agentcron_meta WHERE key = 'schema_version'",
                            &[],
                        )
                        .await?
                        .get(0))
                })
            })
            .await
    }

    /// Whether this store's connection is encrypted (TLS).
    pub async fn encrypted(&self) -> Result<bool> {
        self.session
            .with_client(|c| {
                Box::pin(async move {
                    Ok(c.client
                        .query_opt("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
                        .await?
                        .is_some_and(|r| r.get::<_, bool>(0)))
                })
            })
            .await
    }

    /// The database's clock, epoch ms.
    pub async fn now_ms(&self) -> Result<i64> {
        self.session
            .with_client(|c| {
                Box::pin(
                    async move { Ok(c.client.query_one("SELECT agentcron_now_ms()", &[]).await?.get(0)) },
                )
            })
            .await
    }

    /// Opens `w` pending, unless any scheduler opened its window already:
    /// `Some(run id)` only for the one call that inserted it.
    pub async fn open_window(&self, w: &NewWindow) -> Result<Option<i64>> {
        let w = w.clone();
        self.session
            .with_client(move |mut c| {
                Box::pin(async move {
                    let stmt = c
                        .prepare_cached(
                            "INSERT INTO runs (tenant, schedule, window_key, window_start, window_end, due_at, state, reason, \
                             pool, next_check_at, created_at, updated_at, schedule_version) \
                             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9, agentcron_now_ms(), agentcron_now_ms(), \
                             (SELECT version FROM schedule_current WHERE schedule = $2)) \
                             ON CONFLICT (tenant, schedule, window_key) DO NOTHING RETURNING id",
                        )
                        .await?;
                    let row = c
                        .client
                        .query_opt(
                            &stmt,
                            &[
                                &w.tenant,
                                &w.schedule,
                                &w.window_key,
                                &w.window_start,
                                &w.window_end,
                                &w.due_at,
                                &w.reason,
                                &w.pool.as_str(),
                                &w.next_check_at,
                            ],
                        )
                        .await?;
                    Ok(row.map(|r| r.get(0)))
                })
            })
            .await
    }

    /// Opens each of `windows` that no scheduler opened yet, already claimed
    /// for `owner` for `lease`, in one statement (and one commit): the fire's
    /// identity constraint picks, window by window, the one scheduler whose
    /// row went in, and each row that went in carries its new fence. The
    /// windows another scheduler opened first are not in the answer. The
    /// chunk form of [`PgStore::open_window`] + [`PgStore::claim`], for a
    /// tick's on-time windows without gates (as the embedded ledger inserts
    /// them already claimed).
    pub async fn open_claimed(
        &self,
        windows: &[NewWindow],
        owner: &str,
        lease: Duration,
    ) -> Result<Vec<OpenedClaimed>> {
        if windows.is_empty() {
            return Ok(vec![]);
        }
        let asked = Instant::now();
        let col = |f: fn(&NewWindow) -> String| windows.iter().map(f).collect::<Vec<String>>();
        let num = |f: fn(&NewWindow) -> i64| windows.iter().map(f).collect::<Vec<i64>>();
        let (tenants, schedules, keys, reasons, pools) = (
            col(|w| w.tenant.clone()),
            col(|w| w.schedule.clone()),
            col(|w| w.window_key.clone()),
            col(|w| w.reason.clone()),
            col(|w| w.pool.as_str().to_string()),
        );
        let (starts, ends, dues) = (num(|w| w.window_start), num(|w| w.window_end), num(|w| w.due_at));
        let owner = owner.to_string();
        self.session
            .with_client(move |mut c| {
                Box::pin(async move {
                    let stmt = c
                        .prepare_cached(
                            "INSERT INTO runs (tenant, schedule, window_key, window_start, window_end, due_at, state, reason, \
                             pool, attempts, fencing_token, lease_owner, lease_expires, created_at, updated_at, schedule_version) \
                             SELECT w.tenant, w.schedule, w.window_key, w.window_start, w.window_end, w.due_at, 'running', \
                             w.reason, w.pool, 1, agentcron_next_fence(), $9, agentcron_now_ms() + $10, agentcron_now_ms(), \
                             agentcron_now_ms(), (SELECT version FROM schedule_current sc WHERE sc.schedule = w.schedule) \
                             FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], \
                             $7::text[], $8::text[]) AS w(tenant, schedule, window_key, window_start, window_end, due_at, \
                             reason, pool) \
                             ON CONFLICT (tenant, schedule, window_key) DO NOTHING \
                             RETURNING id, tenant, schedule, window_key, fencing_token, lease_expires",
                        )
                        .await?;
                    let rows = c
                        .client
                        .query(
                            &stmt,
                            &[
                                &tenants,
                                &schedules,
                                &keys,
                                &starts,
                                &ends,
                                &dues,
                                &reasons,
                                &pools,
                                &owner,
                                &millis(lease),
                            ],
                        )
                        .await?;
                    let trust_until = asked + lease - trust_margin(lease);
                    Ok(rows
                        .iter()
                        .map(|r| OpenedClaimed {
                            tenant: r.get(1),
                            schedule: r.get(2),
                            window_key: r.get(3),
                            lease: Lease {
                                run_id: r.get(0),
                                fence: r.get(4),
                                owner: owner.clone(),
                                expires_ms: r.get(5),
                                trust_until,
                            },
                        })
                        .collect())
                })
            })
            .await
    }

    /// Ends the attempts under `ended` (each lease and its run's new state)
    /// in one statement, each only if its run is still `running` under that
    /// lease's fence and owner, as [`PgStore::complete`] does one by one.
    /// Returns the runs whose completion was refused, with why.
    pub async fn complete_all(&self, ended: &[(&Lease, RunState)], why: &str) -> Result<Vec<(i64, Refused)>> {
        for (lease, to) in ended {
            leaves_running(lease.run_id, *to)?;
        }
        if ended.is_empty() {
            return Ok(vec![]);
        }
        let leases: Vec<Lease> = ended.iter().map(|(l, _)| (*l).clone()).collect();
        let states: Vec<&'static str> = ended.iter().map(|(_, to)| to.as_str()).collect();
        let reason = why.to_string();
        self.session
            .with_client(move |mut c| {
                Box::pin(async move {
                    let stmt = c
                        .prepare_cached(
                            "UPDATE runs r SET state = e.state, state_reason = $5, lease_owner = NULL, lease_expires = NULL, \
                             updated_at = agentcron_now_ms() \
                             FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS e(id, fence, owner, state) \
                             WHERE r.id = e.id AND r.fencing_token = e.fence AND r.lease_owner = e.owner \
                             AND r.state = 'running' RETURNING r.id",
                        )
                        .await?;
                    let ids: Vec<i64> = leases.iter().map(|l| l.run_id).collect();
                    let fences: Vec<i64> = leases.iter().map(|l| l.fence).collect();
                    let owners: Vec<&str> = leases.iter().map(|l| l.owner.as_str()).collect();
                    let done: std::collections::HashSet<i64> = c
                        .client
                        .query(&stmt, &[&ids, &fences, &owners, &states, &reason])
                        .await?
                        .iter()
                        .map(|r| r.get(0))
                        .collect();
                    let mut refused = vec![];
                    for lease in leases {
                        if !done.contains(&lease.run_id) {
                            let run = lease.run_id;
                            refused.push((run, refusal(c.client, run, Expect::Owned(lease)).await?));
                        }
                    }
                    Ok(refused)
                })
            })
            .await
    }

    /// Claims run `run` for `owner` for `lease` if it is in one of
    /// `expected` (`pending` / `retry_wait`): one conditional `UPDATE`, a
    /// new fencing token, the lease measured on the database's clock. Of
    /// several schedulers claiming one run, exactly one gets the lease.
    pub async fn claim(
        &self,
        run: i64,
        expected: &[RunState],
        owner: &str,
        lease: Duration,
    ) -> Result<std::result::Result<Lease, Refused>> {
        let asked = Instant::now();
        let states: Vec<&'static str> = expected.iter().map(|s| s.as_str()).collect();
        let owner = owner.to_string();
        self.session
            .with_client(move |mut c| {
                Box::pin(async move {
                    let stmt = c
                        .prepare_cached(
                            "UPDATE runs SET state = 'running', fencing_token = agentcron_next_fence(), \
                             attempts = attempts + 1, lease_owner = $3, lease_expires = agentcron_now_ms() + $4, \
                             next_check_at = NULL, hold = NULL, updated_at = agentcron_now_ms() \
                             WHERE id = $1 AND state = ANY($2) RETURNING fencing_token, lease_expires",
                        )
                        .await?;
                    let row = c
                        .client
                        .query_opt(&stmt, &[&run, &states, &owner, &millis(lease)])
                        .await?;
                    match row {
                        Some(r) => Ok(Ok(Lease {
                            run_id: run,
                            fence: r.get(0),
                            owner,
                            expires_ms: r.get(1),
                            trust_until: asked + lease - trust_margin(lease),
                        })),
                        None => {
                            let expected = states.join(" or ");
                            Ok(Err(refusal(c.client, run, Expect::State(expected)).await?))
                        }
                    }
                })
            })
            .await
    }

    /// Extends `lease` by `by` from now (database clock), only if the run is
    /// still `running` under its fence and owner and the lease has not
    /// expired: a lapsed lease is never revived, even if no one took it yet.
    pub async fn renew(&self, lease: &Lease, by: Duration) -> Result<std::result::Result<Lease, Refused>> {
        let asked = Instant::now();
        let lease = lease.clone();
        self.session
            .with_client(move |mut c| {
                Box::pin(async move {
                    let stmt = c
                        .prepare_cached(
                            "UPDATE runs SET lease_expires = agentcron_now_ms() + $4, updated_at = agentcron_now_ms() \
                             WHERE id = $1 AND fencing_token = $2 AND lease_owner = $3 AND state = 'running' \
                             AND lease_expires > agentcron_now_ms() RETURNING lease_expires",
                        )
                        .await?;
                    let row = c
                        .client
                        .query_opt(&stmt, &[&lease.run_id, &lease.fence, &lease.owner, &millis(by)])
                        .await?;
                    match row {
                        Some(r) => Ok(Ok(Lease {
                            expires_ms: r.get(0),
                            trust_until: asked + by - trust_margin(by),
                            ..lease
                        })),
                        None => {
                            let run = lease.run_id;
                            Ok(Err(refusal(c.client, run, Expect::Lease(lease)).await?))
                        }
                    }
                })
            })
            .await
    }

    /// Ends the attempt under `lease`: the run becomes `to` (an attempt's
    /// outcome: succeeded, retry_wait, needs_human, failed or dead) only if it
    /// is still `running` under the lease's fence and owner. A completion
    /// arriving after its lease lapsed still lands while no one took the run
    /// over (the work is done; nothing else holds it).
    pub async fn complete(
        &self,
        lease: &Lease,
        to: RunState,
        why: &str,
    ) -> Result<std::result::Result<(), Refused>> {
        leaves_running(lease.run_id, to)?;
        let lease = lease.clone();
        let why = why.to_string();
        self.session
            .with_client(move |mut c| {
                Box::pin(async move {
                    let (run, fence, owner) = (lease.run_id, lease.fence, lease.owner.clone());
                    guarded(
                        &mut c,
                        "UPDATE runs SET state = $4, state_reason = $5, lease_owner = NULL, lease_expires = NULL, \
                         updated_at = agentcron_now_ms() \
                         WHERE id = $1 AND fencing_token = $2 AND lease_owner = $3 AND state = 'running'",
                        &[&run, &fence, &owner, &to.as_str(), &why],
                        run,
                        Expect::Owned(lease),
                    )
                    .await
                })
            })
            .await
    }

    /// The running runs whose lease the database clock says lapsed more than
    /// `grace` ago, oldest first, at most `limit`.
    pub async fn lapsed_leases(&self, grace: Duration, limit: i64) -> Result<Vec<LapsedLease>> {
        self.session
            .with_client(move |mut c| {
                Box::pin(async move {
                    let stmt = c
                        .prepare_cached(
                            "SELECT id, fencing_token, lease_owner, lease_expires FROM runs \
                             WHERE state = 'running' AND lease_expires < agentcron_now_ms() - $1 \
                             ORDER BY lease_expires, id LIMIT $2",
                        )
                        .await?;
                    let rows = c.client.query(&stmt, &[&millis(grace), &limit]).await?;
                    Ok(rows
                        .iter()
                        .map(|r| LapsedLease {
                            run_id: r.get(0),
                            fence: r.get(1),
                            owner: r.get::<_, Option<String>>(2).unwrap_or_default(),
                            expires_ms: r.get(3),
                        })
                        .collect())
                })
            })
            .await
    }

    /// Takes over a lapsed lease as read: the run becomes `to` only if it is
    /// still `running` with the same fence, owner and expiry, and that expiry
    /// is still `grace` in the past. A completion or renewal that came
    /// between the read and this write wins; the takeover is refused.
    pub async fn take_over(
        &self,
        lapsed: &LapsedLease,
        grace: Duration,
        to: RunState,
        why: &str,
    ) -> Result<std::result::Result<(), Refused>> {
        leaves_running(lapsed.run_id, to)?;
        let lapsed = lapsed.clone();
        let why = why.to_string();
        self.session
            .with_client(move |mut c| {
                Box::pin(async move {
                    let (run, fence, owner, expires) =
                        (lapsed.run_id, lapsed.fence, lapsed.owner.clone(), lapsed.expires_ms);
                    guarded(
                        &mut c,
                        "UPDATE runs SET state = $5, state_reason = $6, lease_owner = NULL, lease_expires = NULL, \
                         updated_at = agentcron_now_ms() \
                         WHERE id = $1 AND fencing_token = $2 AND lease_owner = $3 AND state = 'running' \
                         AND lease_expires = $4 AND lease_expires < agentcron_now_ms() - $7",
                        &[&run, &fence, &owner, &expires, &to.as_str(), &why, &millis(grace)],
                        run,
                        Expect::Lapsed(lapsed),
                    )
                    .await
                })
            })
            .await
    }
}

/// Runs `sql`, a guarded `UPDATE` of run `run`'s row that changes it or
/// nothing: nothing is a refusal, with why.
async fn guarded(
    c: &mut session::PgConn<'_>,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    run: i64,
    expect: Expect,
) -> Result<std::result::Result<(), Refused>> {
    let stmt = c.prepare_cached(sql).await?;
    if c.client.execute(&stmt, params).await? == 1 {
        return Ok(Ok(()));
    }
    Ok(Err(refusal(c.client, run, expect).await?))
}

/// Why a guarded write changed nothing, from the row as it is now.
async fn refusal(c: &tokio_postgres::Client, run: i64, expect: Expect) -> Result<Refused> {
    let row = c
        .query_opt(
            "SELECT state, fencing_token, lease_owner, lease_expires, agentcron_now_ms() FROM runs WHERE id = $1",
            &[&run],
        )
        .await?;
    let Some(row) = row else {
        return Ok(Refused::NoRun(run));
    };
    let state: String = row.get(0);
    let actual = RunState::parse(&state).unwrap_or(RunState::Failed);
    let (fence, owner, expires, now): (i64, Option<String>, Option<i64>, i64) =
        (row.get(1), row.get(2), row.get(3), row.get(4));
    let owner = owner.unwrap_or_default();
    let (want_fence, want_owner) = match &expect {
        Expect::State(expected) => {
            return Ok(Refused::State {
                run,
                expected: expected.clone(),
                actual,
            });
        }
        Expect::Lease(l) | Expect::Owned(l) => (l.fence, l.owner.as_str()),
        Expect::Lapsed(l) => (l.fence, l.owner.as_str()),
    };
    if actual != RunState::Running {
        return Ok(Refused::State {
            run,
            expected: "running".into(),
            actual,
        });
    }
    if fence != want_fence {
        return Ok(Refused::Fence {
            run,
            expected: want_fence,
            actual: fence,
        });
    }
    if owner != want_owner {
        return Ok(Refused::Owner {
            run,
            expected: want_owner.to_string(),
            actual: owner,
        });
    }
    let expires_ms = expires.unwrap_or(0);
    Ok(match expect {
        Expect::Lapsed(l) if l.expires_ms != expires_ms || expires_ms >= now => {
            Refused::Renewed { run, expires_ms }
        }
        _ => Refused::Expired {
            run,
            expires_ms,
            now_ms: now,
        },
    })
}

/// A running run may become `to` (DESIGN.md's state machine), or the write
/// is a bug of the caller's and is refused before it reaches the database.
fn leaves_running(run: i64, to: RunState) -> Result<()> {
    if RunState::Running.can_become(to, false) {
        Ok(())
    } else {
        Err(PgError::IllegalTransition {
            run,
            from: RunState::Running,
            to,
        })
    }
}

/// What a refused write expected of the row.
enum Expect {
    State(String),
    Lease(Lease),
    Owned(Lease),
    Lapsed(LapsedLease),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        let (cfg, shown, _) = config("postgres://ops:s3cret@db.example:6543/ledger", None).expect("url");
        assert_eq!(shown, "postgres://ops@db.example:6543/ledger");
        assert_eq!(cfg.get_password(), Some(&b"s3cret"[..]));
        assert!(!format!("{cfg:?}").contains("s3cret"), "Debug must not print it");
    }

    #[test]
    fn a_bad_url_is_refused_without_echoing_it() {
        let e = config("postgres://ops:s3cret@db.example:notaport/ledger", None)
            .err()
            .expect("bad port");
        let text = e.to_string();
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("expected postgres://"), "{text}");
    }

    #[test]
    fn the_password_file_is_read_when_the_url_has_none() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("pw");
        std::fs::write(&file, "from-file\nignored\n").expect("write");
        // PGPASSWORD would win over the file; this process never sets it.
        if std::env::var_os("PGPASSWORD").is_some() {
            return;
        }
        let (cfg, _, _) = config("postgres://ops@127.0.0.1/ledger", Some(&file)).expect("url");
        assert_eq!(cfg.get_password(), Some(&b"from-file"[..]));
    }

    #[test]
    fn a_running_run_only_ends_as_the_state_machine_allows() {
        for to in RunState::ALL {
            let allowed = leaves_running(1, to).is_ok();
            assert_eq!(allowed, RunState::Running.can_become(to, false), "{to}");
        }
        assert!(leaves_running(1, RunState::Pending).is_err());
        assert!(leaves_running(1, RunState::Succeeded).is_ok());
    }

    #[test]
    fn sslrootcert_is_taken_out_of_the_url_and_must_hold_a_certificate() {
        assert_eq!(
            take_param(
                "postgres://h/db?sslmode=require&sslrootcert=/ca.pem&connect_timeout=2",
                "sslrootcert"
            ),
            (
                "postgres://h/db?sslmode=require&connect_timeout=2".to_string(),
                Some("/ca.pem".to_string())
            )
        );
        assert_eq!(
            take_param("postgres://h/db", "sslrootcert"),
            ("postgres://h/db".to_string(), None)
        );
        let dir = tempfile::tempdir().expect("dir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").expect("write");
        let url = format!(
            "postgres://ops@db.example/ledger?sslmode=require&sslrootcert={}",
            empty.display()
        );
        let e = config(&url, None).err().expect("no certificate");
        assert!(e.to_string().contains("no certificate in it"), "{e}");
        let (_, _, tls) =
            config("postgres://ops@db.example/ledger?sslmode=require", None).expect("webpki roots");
        assert!(matches!(tls, Tls::Rustls(_)));
        let (_, _, tls) = config("postgres://ops@db.example/ledger", None).expect("plain");
        assert!(matches!(tls, Tls::None));
    }

    #[test]
    fn the_trust_margin_is_inside_the_lease() {
        assert_eq!(trust_margin(Duration::from_secs(60)), Duration::from_secs(6));
        assert_eq!(
            trust_margin(Duration::from_millis(500)),
            Duration::from_millis(100)
        );
        assert_eq!(trust_margin(Duration::from_millis(50)), Duration::from_millis(50));
    }
}

/// Errors are told with their causes (see `with_causes`).
#[cfg(test)]
mod cause_tests {
    #[derive(Debug)]
    struct Outer(Inner);
    #[derive(Debug)]
    struct Inner;
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("db error")
        }
    }
    impl std::fmt::Display for Inner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("ERROR: relation \"runs\" does not exist")
        }
    }
    impl std::error::Error for Inner {}
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_tokio_postgres_error_is_told_with_its_causes() {
        use std::str::FromStr;
        let e = tokio_postgres::Config::from_str("postgres://h:notaport/db").expect_err("bad port");
        // Its own Display says only "invalid connection string".
        assert_eq!(
            super::PgError::Sql(e).to_string(),
            "PostgreSQL: invalid connection string: invalid value for option `port`"
        );
    }

    #[test]
    fn an_error_is_told_with_its_causes() {
        let e = Outer(Inner);
        assert_eq!(
            super::with_causes(&e),
            "db error: ERROR: relation \"runs\" does not exist"
        );
        assert_eq!(
            super::with_causes(&&e),
            "db error: ERROR: relation \"runs\" does not exist"
        );
    }
}
