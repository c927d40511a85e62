//! The endpoints. Reads return the CLI's `--json` shapes (built by the same
//! functions); mutations call [`crate::operator`] as the CLI does. Every
//! error is JSON `{"error": "…"}` with a status that says whose fault it is:
//! 400 bad input, 401 no or unknown token, 403 a `read` token asking to act,
//! 404 no such run / schedule / event listener, 409 refused by the state
//! machine, 503 not ready, 500 the store failed. An action already in effect
//! is no error (as on the command line): 200 with the state as it is and
//! `"already"` saying since when and why (the first reason is kept).

use super::Api;
use super::auth::{Caller, Role};
use crate::cli::{runs, show};
use crate::operator::{self, ActionError};
use crate::store::StoreError;
use crate::store::types::RunFilter;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

type Shared = State<Arc<Api>>;
type Params = Query<HashMap<String, String>>;

/// Most runs one `GET /api/v1/runs` returns.
const MAX_RUNS: usize = 10_000;
/// Runs listed with one schedule.
const SCHEDULE_RUNS: usize = 20;

pub(super) fn router(api: Arc<Api>) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/v1/status", get(status))
        .route("/api/v1/schedules", get(schedules))
        .route("/api/v1/schedules/{id}", get(schedule))
        .route("/api/v1/schedules/{id}/{action}", post(schedule_action))
        .route("/api/v1/runs", get(list_runs))
        .route("/api/v1/runs/{id}", get(one_run))
        .route("/api/v1/runs/{id}/{action}", post(run_action))
        .route("/api/v1/explain/{schedule}", get(explain))
        .route("/api/v1/events/{name}", post(post_event))
        .route("/api/v1/kill", post(kill))
        .route("/api/v1/unkill", post(unkill))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(super::BODY_LIMIT))
        .layer(axum::middleware::map_response_with_state(
            api.clone(),
            without_paths,
        ))
        .with_state(api)
}

/// What an error answer says instead of a path of this machine: a client
/// learns which file, never where it lies (DESIGN.md "Status").
fn known_paths(cfg: &crate::config::Config) -> Vec<(String, &'static str)> {
    let mut paths: Vec<(String, &'static str)> = vec![
        (cfg.path.display().to_string(), "the config file"),
        (cfg.scheduler.database.display().to_string(), "the database"),
        (cfg.dir.display().to_string(), "the config folder"),
    ];
    if let Some(t) = &cfg.api.tokens_file {
        paths.push((t.display().to_string(), "the tokens file"));
    }
    // Longest first: the config file before the folder that holds it.
    paths.retain(|(p, _)| p.len() > 1);
    paths.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    paths
}

/// `text` (an answer's JSON) with each known path replaced by its name, as
/// the path is written inside a JSON string.
fn scrub(text: &str, paths: &[(String, &'static str)]) -> String {
    let mut out = text.to_string();
    for (path, name) in paths {
        let quoted = serde_json::to_string(path).unwrap_or_default();
        let inner = quoted.trim_matches('"');
        if !inner.is_empty() {
            out = out.replace(inner, name);
        }
    }
    out
}

/// Every error answer (4xx, 5xx) passes here on its way out: whatever
/// produced it (a handler, a store error, explain's prose), no filesystem
/// path of the config, the database or the tokens file leaves the server.
async fn without_paths(State(api): Shared, response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 4 * super::BODY_LIMIT).await else {
        return ApiError(status, "the answer could not be read".into()).into_response();
    };
    let clean = scrub(&String::from_utf8_lossy(&bytes), &known_paths(&api.cfg()));
    // The length changed with the text.
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(clean))
}

/// An error answer.
pub(super) struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(json!({"error": self.1}))).into_response()
    }
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.into())
}

fn missing(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, msg.into())
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
}

impl From<ActionError> for ApiError {
    fn from(e: ActionError) -> Self {
        match e {
            ActionError::Refused(m) => ApiError(StatusCode::CONFLICT, m),
            ActionError::Invalid(m) => bad(m),
            // The action handlers answer it as a 200 (see [`already`]) before
            // it could get here.
            ActionError::Already(m) => ApiError(StatusCode::CONFLICT, m),
            ActionError::Store(e) => e.into(),
        }
    }
}

type Reply = Result<Response, ApiError>;

/// An action's outcome: `Some(text)` when it was already in effect (nothing
/// changed), `None` when it took effect; any other error is the answer.
fn already<T>(r: operator::Result<T>) -> Result<(Option<T>, Option<String>), ApiError> {
    match r {
        Ok(v) => Ok((Some(v), None)),
        Err(ActionError::Already(text)) => Ok((None, Some(text))),
        Err(e) => Err(e.into()),
    }
}

/// `v` (an object) with `"already": text` when the action was already in effect.
fn with_already(mut v: Value, text: Option<String>) -> Value {
    if let (Some(text), Some(o)) = (text, v.as_object_mut()) {
        o.insert("already".into(), Value::String(text));
    }
    v
}

fn ok(v: Value) -> Reply {
    Ok(axum::Json(v).into_response())
}

/// Runs store work off the async workers (SQLite blocks).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, format!("request failed: {e}")))?
}

/// The caller, if its token allows `need`: 401 without a (known) token, 403
/// with one whose role is too small.
fn authorize(api: &Api, headers: &HeaderMap, need: Role) -> Result<Caller, ApiError> {
    if api.tokens.is_empty() {
        return Err(ApiError(
            StatusCode::UNAUTHORIZED,
            "the API is closed: no tokens are configured ([api] tokens_file)".into(),
        ));
    }
    let value = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let caller = api.tokens.caller(value).ok_or_else(|| {
        ApiError(
            StatusCode::UNAUTHORIZED,
            "a valid bearer token is required (Authorization: Bearer TOKEN)".into(),
        )
    })?;
    if caller.role < need {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            format!(
                "token `{}` has the {} role; this needs {}",
                caller.name,
                caller.role.as_str(),
                need.as_str()
            ),
        ));
    }
    Ok(caller)
}

/// Query parameters other than `allowed` are refused, so a typo never
/// silently widens a listing.
fn only(params: &HashMap<String, String>, allowed: &[&str]) -> Result<(), ApiError> {
    match params.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(bad(format!(
            "unknown query parameter `{k}`; known: {}",
            if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            }
        ))),
        None => Ok(()),
    }
}

/// The body as JSON (`{}` when empty); too large or not JSON is a 400.
fn json_body(body: Result<Bytes, BytesRejection>) -> Result<Value, ApiError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            bad(format!(
                "request body too large (at most {} bytes)",
                super::BODY_LIMIT
            ))
        } else {
            bad(format!("cannot read the request body: {e}"))
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes).map_err(|e| bad(format!("request body is not valid JSON: {e}")))
}

async fn not_found() -> ApiError {
    missing("no such endpoint (see docs/OPERATIONS.md, Endpoints)")
}

/// A known endpoint asked with a method it does not take (the `Allow` header
/// lists the ones it does).
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} does not take {method} (see docs/OPERATIONS.md, Endpoints)",
            uri.path()
        ),
    )
}

/// Alive unless the process's live loop is stuck: it has shown no progress
/// (a pass completed, leases renewed while it waits for gates) for
/// [`crate::engine::tick_time::STUCK_AFTER`] (a liveness probe then restarts
/// it; its runs' leases lapse and other schedulers take them over).
async fn livez() -> Response {
    match stuck(crate::engine::tick_time::since_progress()) {
        None => axum::Json(json!({"alive": true})).into_response(),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"alive": false, "reason": why})),
        )
            .into_response(),
    }
}

/// Why the live loop counts as stuck, from how long ago it last made
/// progress (`None`: no live loop in this process).
fn stuck(since_progress: Option<std::time::Duration>) -> Option<String> {
    let age = since_progress?;
    (age > crate::engine::tick_time::STUCK_AFTER).then(|| {
        format!(
            "the scheduler's loop has made no progress for {} s (stuck after {} s)",
            age.as_secs(),
            crate::engine::tick_time::STUCK_AFTER.as_secs()
        )
    })
}

/// Ready when the database answers with this build's schema and the config is
/// loaded (it is, or the server would not have started).
async fn readyz(State(api): Shared) -> Response {
    let probe = api.clone();
    let answer = blocking(move || {
        Ok(probe
            .store
            .read(|tx| Ok((tx.schema_version()?, tx.build_schema_version())))?)
    })
    .await
    .map_err(|e| e.1);
    let schema = answer.as_ref().map_or(0, |(v, _)| *v);
    match not_ready(answer) {
        None => axum::Json(json!({
            "ready": true,
            "schema": schema,
            "schedules": api.cfg().schedules.len(),
        }))
        .into_response(),
        Some(r) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"ready": false, "reason": r})),
        )
            .into_response(),
    }
}

/// Why the server is not ready, from the database's answer to "your
/// schema?" (the ledger's version, the one this build needs there).
fn not_ready(schema: Result<(i64, i64), String>) -> Option<String> {
    match schema {
        Ok((v, needed)) if v == needed => None,
        Ok((v, needed)) => Some(format!("database schema {v}, this build needs {needed}")),
        Err(e) => Some(format!("database not reachable: {e}")),
    }
}

/// Open without tokens; with tokens configured, a `read` token.
async fn metrics(State(api): Shared, headers: HeaderMap) -> Reply {
    if !api.tokens.is_empty() {
        authorize(&api, &headers, Role::Read)?;
    }
    let text = blocking(move || {
        let now = api.clock.now();
        Ok(api.metrics.render(&api.store, &api.cfg(), now)?)
    })
    .await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

async fn status(State(api): Shared, headers: HeaderMap, Query(q): Params) -> Reply {
    authorize(&api, &headers, Role::Read)?;
    only(&q, &[])?;
    let v = blocking(move || {
        let now = api.clock.now();
        let cfg = api.cfg();
        let status = api.store.read(|tx| crate::status::status(tx, Some(&cfg), now))?;
        // As `status --json`: the file on disk, not what runs (the version
        // it runs is the ledger's either way). Lines and columns, no path.
        let file_error = match crate::config::load_file(&cfg.path) {
            Ok(_) => None,
            Err(crate::config::LoadError::Invalid(diags)) => Some(crate::cli::db::one_line(&diags)),
            Err(crate::config::LoadError::Io { .. }) => Some("the config file cannot be read".to_string()),
        };
        Ok(status.to_json_with_file(file_error))
    })
    .await?;
    ok(v)
}

async fn schedules(State(api): Shared, headers: HeaderMap, Query(q): Params) -> Reply {
    authorize(&api, &headers, Role::Read)?;
    only(&q, &[])?;
    let list = blocking(move || {
        let now = api.clock.now();
        Ok(api.store.read(|tx| {
            let (_, summary) = crate::status::registry(tx, now)?;
            crate::status::schedules(tx, &api.cfg(), summary.alive == 0, now)
        })?)
    })
    .await?;
    ok(Value::Array(
        list.iter().map(crate::status::schedule_json).collect(),
    ))
}

async fn schedule(State(api): Shared, headers: HeaderMap, Path(id): Path<String>, Query(q): Params) -> Reply {
    authorize(&api, &headers, Role::Read)?;
    only(&q, &[])?;
    let cfg = api.cfg();
    let Some(s) = cfg.schedule(&id).cloned() else {
        return Err(missing(format!("no schedule `{id}` in the config")));
    };
    let v = blocking(move || {
        let now = api.clock.now();
        Ok(api.store.read(|tx| {
            let (_, summary) = crate::status::registry(tx, now)?;
            let all = crate::status::schedules(tx, &cfg, summary.alive == 0, now)?;
            let recent = tx.runs(&RunFilter {
                schedule: Some(s.id.clone()),
                tenant: Some(s.tenant.clone()),
                newest_first: true,
                limit: Some(SCHEDULE_RUNS),
                ..RunFilter::default()
            })?;
            let mut v = all
                .iter()
                .find(|x| x.id == s.id)
                .map(crate::status::schedule_json)
                .unwrap_or_else(|| json!({"id": s.id}));
            if let Value::Object(map) = &mut v {
                map.insert(
                    "runs".into(),
                    Value::Array(recent.iter().map(runs::run_json).collect()),
                );
            }
            Ok(v)
        })?)
    })
    .await?;
    ok(v)
}

async fn list_runs(State(api): Shared, headers: HeaderMap, Query(q): Params) -> Reply {
    authorize(&api, &headers, Role::Read)?;
    only(&q, &["schedule", "state", "limit"])?;
    let states = match q.get("state").filter(|s| !s.is_empty()) {
        Some(s) => runs::parse_states(s).map_err(bad)?,
        None => vec![],
    };
    let limit = match q.get("limit") {
        None => 50,
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=MAX_RUNS).contains(&n) => n,
            _ => {
                return Err(bad(format!(
                    "`limit` must be a number from 1 to {MAX_RUNS}, not {l:?}"
                )));
            }
        },
    };
    let filter = RunFilter {
        schedule: q.get("schedule").filter(|s| !s.is_empty()).cloned(),
        states,
        newest_first: true,
        limit: Some(limit),
        ..RunFilter::default()
    };
    let list = blocking(move || Ok(api.store.read(|tx| tx.runs(&filter))?)).await?;
    ok(Value::Array(list.iter().map(runs::run_json).collect()))
}

fn run_id(text: &str) -> Result<i64, ApiError> {
    crate::cli::events::parse_run_id(text).map_err(bad)
}

async fn one_run(State(api): Shared, headers: HeaderMap, Path(id): Path<String>) -> Reply {
    authorize(&api, &headers, Role::Read)?;
    let id = run_id(&id)?;
    let found = blocking(
        move || match api.store.read(|tx| show::read_with_versions(tx, id)) {
            Ok(x) => Ok(Some(x)),
            Err(StoreError::RunNotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        },
    )
    .await?;
    match found {
        Some(((run, attempts, steps, events), versions)) => {
            let mut v = show::show_json(&run, &attempts, &steps, &events);
            show::add_versions(&mut v, versions.as_ref());
            ok(v)
        }
        None => Err(missing(format!("run {id} not found"))),
    }
}

async fn explain(
    State(api): Shared,
    headers: HeaderMap,
    Path(schedule): Path<String>,
    Query(q): Params,
) -> Reply {
    authorize(&api, &headers, Role::Read)?;
    only(&q, &["window"])?;
    let window = q.get("window").cloned();
    let x = blocking(move || {
        let now = api.clock.now();
        Ok(api
            .store
            .read(|tx| crate::trace::explain(tx, Some(&api.cfg()), &schedule, window.as_deref(), now))?)
    })
    .await?;
    if x.found() {
        return ok(x.to_json());
    }
    // Not found: the explanation as `explain --json` gives it, with the
    // `error` every 4xx answer carries.
    let mut v = x.to_json();
    if let Value::Object(o) = &mut v {
        o.insert("error".into(), Value::String(x.headline.clone()));
    }
    Ok((StatusCode::NOT_FOUND, axum::Json(v)).into_response())
}

/// What a mutation's body may say.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionBody {
    reason: Option<String>,
    by: Option<String>,
    resume_after: Option<String>,
    cancel_running: Option<bool>,
}

/// Parses an action body; `fields` beyond reason and by that this action takes.
fn action_body(body: Result<Bytes, BytesRejection>, extra: &[&str]) -> Result<ActionBody, ApiError> {
    let v = json_body(body)?;
    let b: ActionBody = serde_json::from_value(v).map_err(|e| {
        bad(format!(
            "request body: {e} (fields: reason, by{})",
            extra.iter().map(|f| format!(", {f}")).collect::<String>()
        ))
    })?;
    for (name, given) in [
        ("resume_after", b.resume_after.is_some()),
        ("cancel_running", b.cancel_running.is_some()),
    ] {
        if given && !extra.contains(&name) {
            return Err(bad(format!("`{name}` does not apply to this action")));
        }
    }
    match b.reason.as_deref().map(str::trim) {
        Some(r) if !r.is_empty() => Ok(b),
        _ => Err(bad("a reason is required: {\"reason\": \"…\"}")),
    }
}

/// `by` from the body, else the token's name.
fn actor(b: &ActionBody, caller: &Caller) -> String {
    b.by.clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| caller.name.clone())
}

async fn run_action(
    State(api): Shared,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Reply {
    let caller = authorize(&api, &headers, Role::Operate)?;
    let extra: &[&str] = match action.as_str() {
        "approve" => &["resume_after"],
        "reject" | "requeue" => &[],
        other => {
            return Err(missing(format!(
                "no run action `{other}`; actions: approve, reject, requeue"
            )));
        }
    };
    let id = run_id(&id)?;
    let b = action_body(body, extra)?;
    let by = actor(&b, &caller);
    let run = blocking(move || {
        if api.store.read(|tx| tx.try_run(id))?.is_none() {
            return Err(missing(format!("run {id} not found")));
        }
        let now = api.clock.now();
        let reason = b.reason.clone().unwrap_or_default();
        let (run, was) = already(match action.as_str() {
            "approve" => operator::approve_checked(
                &api.store,
                Some(&api.cfg()),
                id,
                &by,
                &reason,
                b.resume_after.as_deref(),
                now,
            ),
            "reject" => operator::reject(&api.store, Some(&api.cfg()), id, &by, &reason, now),
            _ => operator::requeue(&api.store, id, &by, &reason, now),
        })?;
        let run = match run {
            Some(run) => run,
            // Already in effect: the run as it is.
            None => api
                .store
                .read(|tx| tx.try_run(id))?
                .ok_or_else(|| missing(format!("run {id} not found")))?,
        };
        tracing::info!(run = id, %action, by = %by, already = was.is_some(), "api: run action");
        Ok((run, was))
    })
    .await?;
    ok(with_already(runs::run_json(&run.0), run.1))
}

async fn schedule_action(
    State(api): Shared,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Reply {
    let caller = authorize(&api, &headers, Role::Operate)?;
    if !matches!(action.as_str(), "pause" | "resume") {
        return Err(missing(format!(
            "no schedule action `{action}`; actions: pause, resume"
        )));
    }
    let cfg = api.cfg();
    if cfg.schedule(&id).is_none() {
        return Err(missing(format!("no schedule `{id}` in the config")));
    }
    let b = action_body(body, &[])?;
    let by = actor(&b, &caller);
    let v = blocking(move || {
        let now = api.clock.now();
        let reason = b.reason.clone().unwrap_or_default();
        let (_, was) = if action == "pause" {
            already(operator::pause(&api.store, &cfg, &id, &by, &reason, now))?
        } else {
            already(operator::resume(&api.store, &cfg, &id, &by, &reason, now))?
        };
        tracing::info!(schedule = %id, %action, by = %by, already = was.is_some(), "api: schedule action");
        let st = api.store.read(|tx| tx.schedule_state(&id))?;
        Ok(with_already(
            json!({"schedule": id, "paused": st.paused, "by": by}),
            was,
        ))
    })
    .await?;
    ok(v)
}

async fn kill(State(api): Shared, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Reply {
    switch(api, headers, body, true).await
}

async fn unkill(State(api): Shared, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Reply {
    switch(api, headers, body, false).await
}

async fn switch(api: Arc<Api>, headers: HeaderMap, body: Result<Bytes, BytesRejection>, on: bool) -> Reply {
    let caller = authorize(&api, &headers, Role::Operate)?;
    let b = action_body(body, if on { &["cancel_running"] } else { &[] })?;
    let by = actor(&b, &caller);
    let v = blocking(move || {
        let now = api.clock.now();
        let reason = b.reason.clone().unwrap_or_default();
        let (_, was) = if on {
            already(operator::kill(
                &api.store,
                &by,
                &reason,
                b.cancel_running.unwrap_or(false),
                now,
            ))?
        } else {
            already(operator::unkill(&api.store, &by, &reason, now))?
        };
        tracing::info!(on, by = %by, already = was.is_some(), "api: kill switch");
        if was.is_some() {
            // Nothing changed: who set the switch as it is, and why.
            let k = api.store.read(|tx| tx.switch("kill"))?;
            let (by, reason) = k.map(|k| (k.actor, k.reason)).unwrap_or_default();
            return Ok(with_already(
                json!({"kill_switch": on, "by": by, "reason": reason}),
                was,
            ));
        }
        Ok(json!({"kill_switch": on, "by": by, "reason": reason}))
    })
    .await?;
    ok(v)
}

/// The event id: the `Idempotency-Key` header, else the body's `id`.
fn event_id(headers: &HeaderMap, payload: &Value) -> Result<Option<String>, ApiError> {
    let id = match headers.get("idempotency-key") {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| bad("Idempotency-Key must be visible ASCII"))?
                .trim()
                .to_string(),
        ),
        None => match payload.as_object().and_then(|o| o.get("id")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.trim().to_string()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(_) => return Err(bad("`id` must be a string or a number")),
        },
    };
    // The CLI's check: one validation path.
    if let Some(id) = &id {
        operator::check_key("event id", id).map_err(bad)?;
    }
    Ok(id)
}

async fn post_event(
    State(api): Shared,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Reply {
    authorize(&api, &headers, Role::Operate)?;
    let payload = json_body(body)?;
    let id = event_id(&headers, &payload)?;
    operator::listeners(&api.cfg(), &name).map_err(missing)?;
    let (id, new) = blocking(move || {
        let now = api.clock.now();
        Ok(
            operator::post_event(&api.store, &name, id.as_deref(), &payload, now).map(|(id, new)| {
                tracing::info!(event = %name, id = %id, new, "api: event posted");
                (json!({"name": name, "id": id, "posted": new}), new)
            })?,
        )
    })
    .await?;
    let status = if new { StatusCode::ACCEPTED } else { StatusCode::OK };
    Ok((status, axum::Json(id)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn livez_says_a_loop_stuck_past_the_limit_and_nothing_else() {
        use crate::engine::tick_time::STUCK_AFTER;
        use std::time::Duration;
        assert_eq!(stuck(None), None);
        assert_eq!(stuck(Some(Duration::from_millis(400))), None);
        assert_eq!(stuck(Some(STUCK_AFTER)), None);
        let why = stuck(Some(STUCK_AFTER + Duration::from_secs(3))).unwrap();
        assert!(why.contains("has made no progress for 123 s"), "{why}");
    }

    #[test]
    fn not_ready_says_why() {
        assert_eq!(not_ready(Ok((7, 7))), None);
        assert!(
            not_ready(Ok((3, 7)))
                .unwrap()
                .contains("schema 3, this build needs 7")
        );
        assert!(
            not_ready(Err("database is locked".into()))
                .unwrap()
                .contains("not reachable: database is locked")
        );
    }

    #[test]
    fn error_answers_name_files_instead_of_their_paths() {
        let paths = vec![
            ("/srv/agent cron/agentcron.toml".to_string(), "the config file"),
            ("/srv/agent cron".to_string(), "the config folder"),
        ];
        let body =
            json!({"error": "/srv/agent cron/agentcron.toml:3:1: bad; see /srv/agent cron/x"}).to_string();
        let clean = scrub(&body, &paths);
        assert!(!clean.contains("/srv"), "{clean}");
        assert_eq!(
            serde_json::from_str::<Value>(&clean).unwrap()["error"],
            "the config file:3:1: bad; see the config folder/x"
        );
    }

    #[test]
    fn bodies_are_json_or_a_400_that_says_why() {
        assert_eq!(json_body(Ok(Bytes::from_static(b"  "))).ok(), Some(json!({})));
        let e = json_body(Ok(Bytes::from_static(b"{\"a\":"))).err().unwrap();
        assert_eq!(e.0, StatusCode::BAD_REQUEST);
        assert!(e.1.contains("not valid JSON"), "{}", e.1);
        let e = action_body(
            Ok(Bytes::from_static(
                b"{\"reason\": \"r\", \"cancel_running\": true}",
            )),
            &[],
        )
        .err()
        .unwrap();
        assert!(e.1.contains("does not apply"), "{}", e.1);
        let e = action_body(Ok(Bytes::from_static(b"{\"reasons\": \"r\"}")), &[])
            .err()
            .unwrap();
        assert!(e.1.contains("unknown field"), "{}", e.1);
        let e = action_body(Ok(Bytes::from_static(b"{\"reason\": \"  \"}")), &[])
            .err()
            .unwrap();
        assert!(e.1.contains("reason is required"), "{}", e.1);
    }
}
