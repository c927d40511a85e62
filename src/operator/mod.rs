//! Operator actions, shared by the command line, the console, the HTTP API and
//! rehearsals: each takes the store, the config, `now`, who acts and why, and
//! records all of it as events. Every check of an action's input lives here
//! (DESIGN.md "Status": one validation path), so no caller is looser than
//! another. The running scheduler sees the result within a tick; actions never
//! reach into engine memory.

use crate::config::Config;
use crate::core::decision::HoldKind;
use crate::core::event::{Event, Opener};
use crate::core::layers::time::{new_run_for, opened_event};
use crate::core::plan::{Effect, Plan};
use crate::core::planner::{self, Actor, RunAction, ScheduleAction};
use crate::recovery::catchup::Disposition;
use crate::store::Applied;
use crate::store::types::*;
use crate::store::{Store, StoreError};
use crate::time::fire::Fire;
use crate::time::{rfc3339, rfc3339_secs};
use chrono::{DateTime, Utc};

/// Why an action was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// What was checked does not hold (exit 1): refused by the state machine,
    /// not found, not waiting.
    #[error("{0}")]
    Refused(String),
    /// The action's input is wrong whatever the run's state, such as a
    /// resume-after step the run does not have (exit 1 on the command line,
    /// like a refusal; 400 from the API, where a refusal is 409).
    #[error("{0}")]
    Invalid(String),
    /// The action is already in effect: nothing changed and the first reason
    /// is kept. Not a failure (exit 0), the same for every verb.
    #[error("{0}")]
    Already(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T> = std::result::Result<T, ActionError>;

/// Who acts when `--by` is not given: `$USER`, then `$LOGNAME`, then the OS
/// account name of this process, then `operator`. Empty values do not count.
pub fn default_actor() -> String {
    actor(None)
}

/// `--by NAME` if given (and not empty), else [`default_actor`]'s order.
pub fn actor(by: Option<&str>) -> String {
    let given = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    given(by.map(str::to_string))
        .or_else(|| given(std::env::var("USER").ok()))
        .or_else(|| given(std::env::var("LOGNAME").ok()))
        .or_else(|| given(os_account()))
        .unwrap_or_else(|| "operator".to_string())
}

/// The name of the account this process runs as, from the passwd database.
fn os_account() -> Option<String> {
    // SAFETY: getuid never fails. getpwuid_r writes into our buffer and
    // returns a pointer into it (or null); the name is copied out before the
    // buffer goes away.
    unsafe {
        let uid = libc::getuid();
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out);
        if rc != 0 || out.is_null() || pw.pw_name.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(pw.pw_name)
            .to_str()
            .ok()
            .map(str::to_string)
    }
}

/// The candidate closest to `word` by edit distance, if it is close enough
/// to be a typo (at most a third of the word's length, at least 2).
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// "no schedule `X` in the config", with the closest id or the ids there are.
pub fn unknown_schedule<'a>(id: &str, known: impl IntoIterator<Item = &'a str> + Clone) -> String {
    match did_you_mean(id, known.clone()) {
        Some(close) => format!("no schedule `{id}` in the config; did you mean `{close}`?"),
        None => {
            let all: Vec<&str> = known.into_iter().collect();
            if all.is_empty() {
                format!("no schedule `{id}`: the config has no schedules")
            } else {
                format!("no schedule `{id}` in the config; schedules: {}", all.join(", "))
            }
        }
    }
}

/// The schedule `id` of the config, or the refusal that names the closest.
pub fn schedule_or_refuse<'a>(cfg: &'a Config, id: &str) -> Result<&'a crate::config::ScheduleConfig> {
    cfg.schedule(id).ok_or_else(|| {
        ActionError::Refused(unknown_schedule(id, cfg.schedules.iter().map(|s| s.id.as_str())))
    })
}

/// The schedules of tenant `tenant` (refused, with did-you-mean, when there are none).
pub fn tenant_schedules<'a>(cfg: &'a Config, tenant: &str) -> Result<Vec<&'a crate::config::ScheduleConfig>> {
    let of: Vec<_> = cfg.schedules.iter().filter(|s| s.tenant == tenant).collect();
    if of.is_empty() {
        let mut tenants: Vec<&str> = cfg.schedules.iter().map(|s| s.tenant.as_str()).collect();
        tenants.sort_unstable();
        tenants.dedup();
        let hint = match did_you_mean(tenant, tenants.iter().copied()) {
            Some(close) => format!("did you mean `{close}`?"),
            None => format!("tenants: {}", tenants.join(", ")),
        };
        return Err(ActionError::Refused(format!(
            "no schedule of tenant `{tenant}` in the config; {hint}"
        )));
    }
    Ok(of)
}

/// `trigger SCHEDULE [--window KEY]`: a manual run that goes through the same
/// gates and switches as any other. Without a key the window is `manual-<now>`.
pub fn trigger(
    store: &Store,
    cfg: &Config,
    schedule: &str,
    window: Option<&str>,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<Run> {
    let s = schedule_or_refuse(cfg, schedule)?;
    if let Some(w) = window {
        check_key("window key", w).map_err(ActionError::Refused)?;
    }
    let key = window
        .map(str::to_string)
        .unwrap_or_else(|| format!("manual-{}", rfc3339_secs(now)));
    let fire = Fire {
        at: now,
        local: now.with_timezone(&s.timezone).fixed_offset(),
        window_key: key.clone(),
        note: None,
    };
    let mut new = new_run_for(s, &fire, Disposition::OnTime, now);
    new.reason = RunReason::Manual;
    new.next_check_at = Some(now);
    store
        .write(|tx| match tx.insert_run(&new, now)? {
            Some(run) => {
                let opener = Opener {
                    by: Some(actor.to_string()),
                    ..Opener::default()
                };
                tx.append_event(&NewEvent::of(now, opened_event(&run, None, opener)).for_run(&run))?;
                Ok(Ok(run))
            }
            None => {
                let existing = tx.find_run(&s.tenant, &s.id, &key)?;
                Ok(Err(match existing {
                    Some(r) => format!(
                        "{schedule} already has run {} for window {key} ({}); {}",
                        r.id,
                        r.state,
                        if matches!(r.state, RunState::Failed | RunState::Dead) {
                            "requeue it with `agentcron dlq requeue RUN --reason T`"
                        } else {
                            "a window runs at most once"
                        }
                    ),
                    None => format!("could not create a run for window {key}"),
                }))
            }
        })?
        .map_err(ActionError::Refused)
}

/// The schedules of `cfg` that listen to event `name` (`on_event` /
/// `after_event`); none is a refusal naming the events that are listened to,
/// since a posted event nobody listens to would be stored and never run.
pub fn listeners<'a>(cfg: &'a Config, name: &str) -> std::result::Result<Vec<&'a str>, String> {
    use crate::config::model::TriggerConfig;
    let event_of = |s: &'a crate::config::ScheduleConfig| match &s.trigger {
        TriggerConfig::OnEvent { event } | TriggerConfig::AfterEvent { event, .. } => Some(event.as_str()),
        _ => None,
    };
    let found: Vec<&str> = cfg
        .schedules
        .iter()
        .filter(|s| event_of(s) == Some(name))
        .map(|s| s.id.as_str())
        .collect();
    if !found.is_empty() {
        return Ok(found);
    }
    let mut names: Vec<&str> = cfg.schedules.iter().filter_map(event_of).collect();
    names.sort_unstable();
    names.dedup();
    Err(format!(
        "no schedule listens to event `{name}`; nothing was posted{}",
        if names.is_empty() {
            " (no schedule has an event trigger)".to_string()
        } else {
            format!(" (events listened to: {})", names.join(", "))
        }
    ))
}

/// A window key or event id given by a person or a client: one printable
/// line, so every listing, log line and trace row stays one line per window.
pub fn check_key(what: &str, key: &str) -> std::result::Result<(), String> {
    const MAX: usize = 200;
    if key.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    if let Some(c) = key.chars().find(|c| c.is_control()) {
        return Err(format!(
            "{what} {key:?} holds a control character ({:?}); use one printable line",
            c
        ));
    }
    if key.chars().count() > MAX {
        return Err(format!("{what} is longer than {MAX} characters"));
    }
    Ok(())
}

/// `event post NAME [--id ID] [--payload JSON]`: deduped by id. Returns the id
/// and whether it was new.
pub fn post_event(
    store: &Store,
    name: &str,
    id: Option<&str>,
    payload: &serde_json::Value,
    now: DateTime<Utc>,
) -> Result<(String, bool)> {
    if let Some(id) = id {
        check_key("event id", id).map_err(ActionError::Refused)?;
    }
    let id = id.map_or_else(|| generated_event_id(now), str::to_string);
    let seq = store.write(|tx| {
        let seq = tx.post_event(name, &id, payload, now)?;
        if let Some(seq) = seq {
            tx.append_event(&NewEvent::of(
                now,
                Event::EventPosted {
                    name: name.to_string(),
                    id: id.clone(),
                    seq,
                },
            ))?;
        }
        Ok(seq)
    })?;
    Ok((id, seq.is_some()))
}

/// The id of an event posted without one: the instant to the millisecond
/// (ids sort by arrival, and read as when), then 16 Crockford base32 digits
/// of this process's random salt (48 bits) and a process-wide counter (32
/// bits). The counter makes every id of one process distinct, however many
/// arrive in one millisecond (the millisecond plus the pid, as before, made
/// 346 of 400 concurrent posts duplicates); the salt makes two processes'
/// ids distinct, even with the same pid on two hosts or in two containers.
/// No crate: the salt is std's per-process random hash key (seeded from the
/// OS), which is all the randomness a salt needs.
fn generated_event_id(now: DateTime<Utc>) -> String {
    use std::hash::BuildHasher;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU32, Ordering};
    static SALT: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    const DIGITS: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let salt = *SALT.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        std::hash::RandomState::new().hash_one((std::process::id(), nanos))
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let bits = (u128::from(salt & 0xFFFF_FFFF_FFFF) << 32) | u128::from(n);
    let mut id = now.format("%Y%m%dT%H%M%S%3fZ-").to_string();
    for i in (0..16).rev() {
        id.push(char::from(DIGITS[((bits >> (5 * i)) & 31) as usize]));
    }
    id
}

fn run_or_refuse(store: &Store, run_id: i64) -> Result<Run> {
    store
        .read(|tx| tx.try_run(run_id))?
        .ok_or_else(|| ActionError::Refused(format!("run {run_id} not found")))
}

fn require_reason(reason: &str) -> Result<()> {
    planner::require_reason(&Actor { name: "", reason }).map_err(|r| ActionError::Refused(r.0))
}

/// Maps a store refusal of the state machine to a plain operator message.
fn refused(e: StoreError) -> ActionError {
    match e {
        StoreError::IllegalTransition { .. }
        | StoreError::StateConflict { .. }
        | StoreError::RunNotFound(_) => ActionError::Refused(e.to_string()),
        other => ActionError::Store(other),
    }
}

/// Carries out an operator's plan in one write: the plan, then the store
/// effects it implies (wake-ups) in the same transaction, then its alerts.
/// A run that moved meanwhile refuses the whole action.
fn carry_out(store: &Store, cfg: Option<&Config>, plan: &Plan, now: DateTime<Utc>) -> Result<Option<Run>> {
    let applied = store
        .write(|tx| {
            let applied = tx.apply(plan, now)?;
            if let Applied::Done { effects, .. } = &applied {
                for effect in effects {
                    match effect {
                        Effect::WakeHeld { schedule, slots } => {
                            tx.recheck_held(schedule, slots.unwrap_or(1), false, true, now)?;
                        }
                        Effect::RecheckAll { schedule } => {
                            tx.recheck_all(schedule.as_deref(), now)?;
                        }
                        _ => {}
                    }
                }
            }
            Ok(applied)
        })
        .map_err(refused)?;
    match applied {
        Applied::Conflict { run_id, why } => Err(ActionError::Refused(format!(
            "run {run_id} changed meanwhile ({why}); nothing was done"
        ))),
        Applied::Done { run, effects, .. } => {
            if let Some(c) = cfg {
                for effect in &effects {
                    if let Effect::Alert(a) = effect
                        && let Some(sink) = c.scheduler.sink_for(a.owner.as_deref())
                    {
                        let detail = serde_json::to_value(a).unwrap_or_default();
                        crate::recovery::alert::send_or_record(store, sink, &detail, &c.dir, now);
                    }
                }
            }
            Ok(run.map(|r| *r))
        }
    }
}

/// An operator's action on a run, planned by the core and carried out.
fn act_on_run(
    store: &Store,
    cfg: Option<&Config>,
    run_id: i64,
    action: RunAction,
    who: &Actor<'_>,
    now: DateTime<Utc>,
) -> Result<Run> {
    require_reason(who.reason)?;
    let run = run_or_refuse(store, run_id)?;
    if let Some(text) = run_already(store, &run, &action)? {
        return Err(ActionError::Already(text));
    }
    let schedule = cfg.and_then(|c| c.schedule(&run.schedule));
    let plan =
        planner::run_action(&run, action, who, schedule, now).map_err(|r| ActionError::Refused(r.0))?;
    carry_out(store, cfg, &plan, now)?.ok_or_else(|| ActionError::Refused(format!("run {run_id} not found")))
}

/// A run action repeated after it took effect: the earlier approval or
/// rejection (who, when, why), or the requeue, told instead of refusing.
fn run_already(store: &Store, run: &Run, action: &RunAction) -> Result<Option<String>> {
    if run.state == RunState::NeedsHuman {
        return Ok(None);
    }
    let when = |at: DateTime<Utc>| rfc3339_secs(at);
    match action {
        RunAction::Approve { .. } | RunAction::Reject => {
            let approved = matches!(action, RunAction::Approve { .. });
            let last = store
                .read(|tx| tx.approvals(run.id))?
                .pop()
                .filter(|a| a.approved == approved);
            Ok(last.map(|a| {
                format!(
                    "run {} was already {} by {} at {} ({}); the first reason is kept; it is now {}",
                    run.id,
                    if approved { "approved" } else { "rejected" },
                    a.actor,
                    when(a.at),
                    a.reason,
                    run.state
                )
            }))
        }
        RunAction::Requeue => {
            if !matches!(
                run.state,
                RunState::RetryWait | RunState::Pending | RunState::Running
            ) {
                return Ok(None);
            }
            let last = store.read(|tx| {
                tx.events(&EventFilter {
                    run_id: Some(run.id),
                    kinds: vec!["requeued".into()],
                    newest_first: true,
                    limit: Some(1),
                    ..EventFilter::default()
                })
            })?;
            Ok(last.first().and_then(|e| match e.event() {
                Event::Requeued { by, reason, at, .. } => Some(format!(
                    "run {} was already requeued by {by} at {} ({reason}); the first reason is kept; it is now {}",
                    run.id,
                    when(at),
                    run.state
                )),
                _ => None,
            }))
        }
    }
}

/// [`approve_checked`] without the config: a resume-after step must be one
/// the run's attempts journaled.
pub fn approve(
    store: &Store,
    run_id: i64,
    actor: &str,
    reason: &str,
    resume_after: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Run> {
    approve_checked(store, None, run_id, actor, reason, resume_after, now)
}

/// Approves a `needs_human` run: a new attempt (optionally resuming after a
/// step), or back to the gates if it never ran. A resume-after step must be a
/// step of the run: one its schedule's agent declares (`[agents.X] steps`,
/// with the config) or one its attempts journaled. Every caller (command
/// line, console, API, rehearsal) comes through here, so none accepts a step
/// another refuses.
pub fn approve_checked(
    store: &Store,
    cfg: Option<&Config>,
    run_id: i64,
    actor: &str,
    reason: &str,
    resume_after: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Run> {
    require_reason(reason)?;
    if let Some(step) = resume_after {
        let run = run_or_refuse(store, run_id)?;
        check_step(store, cfg, &run, step)?;
    }
    let action = RunAction::Approve {
        resume_after: resume_after.map(str::to_string),
    };
    act_on_run(store, cfg, run_id, action, &Actor { name: actor, reason }, now)
}

/// `step` is a step of `run`: declared by its schedule's agent, or journaled
/// by one of its attempts (a step the agent reported without declaring it).
fn check_step(store: &Store, cfg: Option<&Config>, run: &Run, step: &str) -> Result<()> {
    let agent = cfg.and_then(|c| c.schedule(&run.schedule)).and_then(|s| {
        cfg.and_then(|c| c.agents.get(&s.agent))
            .map(|a| (s.agent.as_str(), a))
    });
    let mut steps: Vec<String> = agent
        .map(|(_, a)| a.steps.iter().map(|st| st.name.clone()).collect())
        .unwrap_or_default();
    for journaled in store.read(|tx| tx.steps(run.id))? {
        if !steps.contains(&journaled.name) {
            steps.push(journaled.name);
        }
    }
    if steps.iter().any(|s| s == step) {
        return Ok(());
    }
    let whose = match agent {
        Some((name, _)) => format!("{}'s agent `{name}`", run.schedule),
        None => format!("run {}", run.id),
    };
    let hint = match did_you_mean(step, steps.iter().map(String::as_str)) {
        Some(close) => format!("did you mean `{close}`?"),
        None if steps.is_empty() => match agent {
            Some((name, _)) => format!("agent `{name}` declares no steps"),
            None => "it has no steps".to_string(),
        },
        None => format!("its steps: {}", steps.join(", ")),
    };
    Err(ActionError::Invalid(format!(
        "`{step}` is not a step of {whose}; {hint}"
    )))
}

/// Rejects a `needs_human` run: it fails with the reason (and, with the
/// config, counts for its schedule's circuit breaker).
pub fn reject(
    store: &Store,
    cfg: Option<&Config>,
    run_id: i64,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<Run> {
    act_on_run(
        store,
        cfg,
        run_id,
        RunAction::Reject,
        &Actor { name: actor, reason },
        now,
    )
}

/// `dlq requeue --schedule S --all`: every dead run of the schedule back to
/// `retry_wait`, oldest window first. Returns the runs requeued (none: an
/// empty queue, not an error).
pub fn requeue_all_dead(
    store: &Store,
    cfg: &Config,
    schedule: &str,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Run>> {
    require_reason(reason)?;
    let s = schedule_or_refuse(cfg, schedule)?;
    let mut dead = store.read(|tx| {
        tx.runs(&RunFilter {
            schedule: Some(s.id.clone()),
            tenant: Some(s.tenant.clone()),
            states: vec![RunState::Dead],
            ..RunFilter::default()
        })
    })?;
    dead.sort_by_key(|r| (r.window_start, r.id));
    let mut out = Vec::with_capacity(dead.len());
    for r in dead {
        out.push(requeue(store, r.id, actor, reason, now)?);
    }
    Ok(out)
}

/// `pause --tenant T`: every schedule of the tenant, as one pause each; the
/// ones already paused keep their first reason. Returns (paused now, already).
pub fn pause_tenant(
    store: &Store,
    cfg: &Config,
    tenant: &str,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<(Vec<String>, Vec<String>)> {
    require_reason(reason)?;
    let mut paused = vec![];
    let mut already = vec![];
    for s in tenant_schedules(cfg, tenant)? {
        match pause(store, cfg, &s.id, actor, reason, now) {
            Ok(()) => paused.push(s.id.clone()),
            Err(ActionError::Already(_)) => already.push(s.id.clone()),
            Err(e) => return Err(e),
        }
    }
    Ok((paused, already))
}

/// Requeues a failed or dead run (dead-letter queue): one more attempt, now.
pub fn requeue(store: &Store, run_id: i64, actor: &str, reason: &str, now: DateTime<Utc>) -> Result<Run> {
    act_on_run(
        store,
        None,
        run_id,
        RunAction::Requeue,
        &Actor { name: actor, reason },
        now,
    )
}

/// An operator's action on a schedule, planned by the core against its
/// current state and carried out.
fn act_on_schedule(
    store: &Store,
    cfg: &Config,
    schedule: &str,
    action: ScheduleAction,
    who: &Actor<'_>,
    now: DateTime<Utc>,
) -> Result<()> {
    let s = schedule_or_refuse(cfg, schedule)?;
    let state = store.read(|tx| tx.schedule_state(schedule))?;
    if let Some(text) = planner::schedule_already(s, &state, &action) {
        return Err(ActionError::Already(text));
    }
    let plan = planner::schedule_action(s, &state, action, who).map_err(|r| ActionError::Refused(r.0))?;
    carry_out(store, Some(cfg), &plan, now)?;
    Ok(())
}

/// Turns the global kill switch on: nothing new is claimed anywhere; with
/// `cancel_running` running attempts are stopped too (and retried after unkill).
pub fn kill(
    store: &Store,
    actor: &str,
    reason: &str,
    cancel_running: bool,
    now: DateTime<Utc>,
) -> Result<()> {
    require_reason(reason)?;
    let already = store.write(|tx| {
        let on = tx.switch("kill")?.filter(|k| k.on);
        let cancelling = tx.switch("cancel_running")?.is_some_and(|c| c.on);
        if on.is_none() {
            tx.set_switch("kill", true, actor, reason, now)?;
        }
        if cancel_running && !cancelling {
            tx.set_switch("cancel_running", true, actor, reason, now)?;
        }
        Ok(on.map(|k| (k, cancel_running && !cancelling)))
    })?;
    match already {
        None => Ok(()),
        // Already on: the first reason stays; --cancel-running still stops attempts.
        Some((k, false)) => Err(ActionError::Already(format!(
            "the kill switch is already on (since {}, by {}: {}); the first reason is kept",
            rfc3339_secs(k.at),
            k.actor,
            k.reason
        ))),
        Some((_, true)) => Ok(()),
    }
}

/// Turns the global kill switch off; held windows are evaluated at the next tick.
pub fn unkill(store: &Store, actor: &str, reason: &str, now: DateTime<Utc>) -> Result<()> {
    require_reason(reason)?;
    let was_on = store.read(|tx| Ok(tx.switch("kill")?.is_some_and(|k| k.on)))?;
    if !was_on {
        return Err(ActionError::Already("the kill switch is already off".into()));
    }
    store.write(|tx| {
        if tx.switch("cancel_running")?.is_some_and(|s| s.on) {
            tx.set_switch("cancel_running", false, actor, reason, now)?;
        }
        tx.set_switch("kill", false, actor, reason, now)?;
        // Windows the switch held are checked again now, as after a resume,
        // rather than a whole `check_every` later.
        tx.recheck_all(None, now)?;
        Ok(())
    })?;
    Ok(())
}

/// Pauses a schedule: its windows still open (and explain why they wait) but
/// nothing is claimed until it is resumed.
pub fn pause(
    store: &Store,
    cfg: &Config,
    schedule: &str,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    require_reason(reason)?;
    act_on_schedule(
        store,
        cfg,
        schedule,
        ScheduleAction::Pause,
        &Actor { name: actor, reason },
        now,
    )
}

/// What resuming a paused schedule would start: its held windows, oldest first.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ResumePlan {
    pub schedule: String,
    pub paused: bool,
    pub paused_reason: Option<String>,
    /// Held runs that will be evaluated at once: (run id, window key, state, reason).
    pub held: Vec<(i64, String, String, String)>,
    /// Windows that expired or were missed while paused.
    pub lost_while_paused: usize,
}

pub fn resume_plan(store: &Store, cfg: &Config, schedule: &str) -> Result<ResumePlan> {
    let s = schedule_or_refuse(cfg, schedule)?;
    let (st, runs) = store.read(|tx| {
        let st = tx.schedule_state(schedule)?;
        let runs = tx.runs(&RunFilter {
            schedule: Some(schedule.to_string()),
            tenant: Some(s.tenant.clone()),
            ..RunFilter::default()
        })?;
        Ok((st, runs))
    })?;
    let mut held: Vec<&Run> = runs
        .iter()
        .filter(|r| matches!(r.state, RunState::Pending | RunState::RetryWait))
        .collect();
    held.sort_by_key(|r| (r.window_start, r.id));
    let lost = runs
        .iter()
        .filter(|r| {
            matches!(r.state, RunState::Expired | RunState::Missed) && r.hold == Some(HoldKind::Paused)
        })
        .count();
    Ok(ResumePlan {
        schedule: schedule.to_string(),
        paused: st.paused,
        paused_reason: st.paused_reason.clone(),
        held: held
            .into_iter()
            .map(|r| {
                (
                    r.id,
                    r.window_key.clone(),
                    r.state.as_str().to_string(),
                    format!("{} ({})", r.reason.as_str(), r.pool.as_str()),
                )
            })
            .collect(),
        lost_while_paused: lost,
    })
}

/// Resumes a paused schedule; held windows are evaluated at the next tick.
pub fn resume(
    store: &Store,
    cfg: &Config,
    schedule: &str,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    act_on_schedule(
        store,
        cfg,
        schedule,
        ScheduleAction::Resume,
        &Actor { name: actor, reason },
        now,
    )
}

/// Closes an open (or half-open) circuit by hand.
pub fn close_circuit(
    store: &Store,
    cfg: &Config,
    schedule: &str,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    require_reason(reason)?;
    act_on_schedule(
        store,
        cfg,
        schedule,
        ScheduleAction::CloseCircuit,
        &Actor { name: actor, reason },
        now,
    )
}

/// Adds an ad-hoc maintenance window (empty `schedules` = all).
pub fn add_maintenance(
    store: &Store,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    reason: &str,
    actor: &str,
    schedules: &[String],
    now: DateTime<Utc>,
) -> Result<i64> {
    require_reason(reason)?;
    if to <= from {
        return Err(ActionError::Refused("--to must be after --from".into()));
    }
    Ok(store.write(|tx| tx.add_maintenance(from, to, reason, actor, schedules, now))?)
}

/// One window of an operator backfill plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BackfillWindow {
    pub window_key: String,
    pub start: String,
    /// `queue` (new run), or the state of the run that already exists (left alone).
    pub action: String,
    pub existing_run: Option<i64>,
}

/// Plans (and unless `dry_run`, queues) a backfill of `[from, to]`: windows
/// without a run are queued in the backfill pool oldest first; windows that
/// already ran (or are running) are left alone.
#[allow(clippy::too_many_arguments)]
pub fn backfill(
    store: &Store,
    cfg: &Config,
    schedule: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    dry_run: bool,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<Vec<BackfillWindow>> {
    let s = schedule_or_refuse(cfg, schedule)?;
    if to < from {
        return Err(ActionError::Refused("--to must not be before --from".into()));
    }
    let cal = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
    let Some(rule) = s.fire_rule(cal) else {
        return Err(ActionError::Refused(format!(
            "{schedule} has an event trigger; post the events instead of backfilling"
        )));
    };
    let fires: Vec<Fire> = rule
        .fires_after(from - chrono::TimeDelta::milliseconds(1))
        .take_while(|f| f.at <= to)
        .take(100_000)
        .collect();
    let mut plan = vec![];
    store.write(|tx| {
        for f in &fires {
            let existing = tx.find_run(&s.tenant, &s.id, &f.window_key)?;
            let action = match &existing {
                Some(r) => r.state.as_str().to_string(),
                None if f.note == Some(crate::time::fire::FireNote::CalendarSkipped) => {
                    "calendar_skipped".into()
                }
                None => "queue".into(),
            };
            if action == "queue" && !dry_run {
                let mut new = new_run_for(s, f, Disposition::CatchUp, now);
                new.reason = RunReason::Manual;
                if let Some(run) = tx.insert_run(&new, now)? {
                    let opener = Opener {
                        by: Some(actor.to_string()),
                        backfill: Some(true),
                        ..Opener::default()
                    };
                    tx.append_event(&NewEvent::of(now, opened_event(&run, None, opener)).for_run(&run))?;
                }
            }
            plan.push(BackfillWindow {
                window_key: f.window_key.clone(),
                start: rfc3339(f.at),
                action,
                existing_run: existing.map(|r| r.id),
            });
        }
        Ok(())
    })?;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_event_ids_of_one_millisecond_are_distinct_and_in_order() {
        let now = DateTime::parse_from_rfc3339("2026-12-07T10:15:00.123Z")
            .unwrap()
            .with_timezone(&Utc);
        let ids: Vec<String> = (0..1000).map(|_| generated_event_id(now)).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        assert!(
            ids.iter()
                .all(|id| id.starts_with("20261207T101500123Z-") && id.len() == 36)
        );
        assert!(
            ids.iter()
                .all(|id| id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        );
    }
}
