//! What the panes show, read from the store and the config in one consistent
//! read transaction. The console never reaches into the engine: everything the
//! engine does is in the store (runs, attempts, steps, events, switches).
//!
//! Panes query what they show. Every query is bounded and index-backed, so a
//! snapshot stays cheap with a million runs and ten thousand schedules:
//! - the kill switch and other switches, schedule states, maintenance: small tables;
//! - every configured schedule as a row (from the config and its state), but
//!   its newest run, next fire and lane — its newest [`LANE_WINDOWS`] runs
//!   (`runs_window` and `runs_running`, newest first, limited, merged) — only for the schedules in
//!   view ([`SnapshotRequest::view`], the rows around the cursors);
//! - the retry and backfill queues: [`Tx::due_runs`] with an instant far in the
//!   future, i.e. the pending / retry_wait runs by next check (each pool's
//!   due index), at most [`QUEUE_LIMIT`];
//! - running runs for the quotas (`runs_lease` partial index);
//! - today's cost of schedules with a daily cap (`attempts_cost` index);
//! - for the selected run only: its newest events and its latest decision
//!   (`events_run` index).
//!
//! Run counts by state are ten rows the store keeps by triggers, read every
//! load. The two full scans — the `needs_human` list and the
//! dead-letter queue (the runs table has no index on state) — form the
//! [`SlowTier`], which the caller reuses between loads and refreshes only every
//! few seconds (see the shell). Between slow loads the approvals and dead
//! letters are kept fresh from the trace: the events since the slow tier was
//! read that move a run in or out of them (an id range of the events table),
//! and the lanes in view.

use crate::config::model::{Config, ScheduleConfig, TriggerConfig};
use crate::core::layers::switches;
use crate::store::{
    CircuitState, Event, EventFilter, Pool, Run, RunFilter, RunState, Step, Store, StoreError, Switch, Tx,
};
use crate::time::duration::{format_duration, to_delta};
use crate::trace::{DecisionView, latest_decision};
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use std::collections::{BTreeMap, HashMap};

mod detail;
pub use detail::{RunDetail, load_run_detail, load_run_detail_with};

/// Recent windows per schedule in the timeline.
pub const LANE_WINDOWS: usize = 64;
/// Schedules loaded in full before the console said which are in view.
pub const DEFAULT_VIEW: usize = 64;
/// Pending / retry_wait runs read for the retry and backfill queues.
pub const QUEUE_LIMIT: usize = 1000;
/// Rows of the approvals list.
pub const APPROVALS_LIMIT: usize = 200;
/// Rows of the dead-letter queue (newest first).
pub const DEAD_LIMIT: usize = 200;
/// Events of the selected run in the timeline.
pub const FOCUS_EVENTS: usize = 200;
/// Decision-related events of the selected run (gates pane).
pub const DECISION_EVENTS: usize = 100;
/// Events in a run's detail view.
pub const DETAIL_EVENTS: usize = 500;
/// Bytes of each attempt's log kept for the detail view (the tail).
pub const DETAIL_LOG_BYTES: usize = 64 * 1024;
/// Log lines of the latest attempt shown with an approval.
pub const APPROVAL_LOG_LINES: usize = 6;
/// The header counts finished runs of this many recent hours.
pub const RECENT_HOURS: i64 = 24;
/// The name of the global kill switch in the store.
pub const KILL_SWITCH: &str = "kill";

/// The event kinds that explain a decision.
const DECISION_KINDS: [&str; 4] = ["decision", "gate", "switch_held", "window_opened"];

/// Everything the panes show.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Which store it was read from (the live one, or a rehearsal's); set by
    /// the shell, see [`super::app::Model::source`].
    pub source: u64,
    /// The `now` it was loaded at (next fires, active maintenance).
    pub taken_at: DateTime<Utc>,
    /// The newest event id: when it does not move, nothing was written.
    pub last_event_id: i64,
    pub counts: Vec<(RunState, u64)>,
    /// When the counts were read (every load: the store keeps them by triggers).
    pub counts_at: Option<DateTime<Utc>>,
    /// Runs by state among those that changed in the last [`RECENT_HOURS`]
    /// (slow tier): what the header counts for finished states.
    pub recent_counts: Vec<(RunState, u64)>,
    pub schedules: Vec<ScheduleRow>,
    /// One lane per schedule, in the order of `schedules`.
    pub lanes: Vec<Lane>,
    pub retries: Vec<RetryRow>,
    /// The dead-letter queue: runs whose retries are exhausted, newest window first.
    pub dead: Vec<RetryRow>,
    pub approvals: Vec<ApprovalRow>,
    pub backfill: Vec<BackfillRow>,
    /// Schedules with catch-up windows planned but not yet queued (a long
    /// outage's backlog is queued as it drains).
    pub backlogs: Vec<crate::store::Backlog>,
    /// The queues were cut at [`QUEUE_LIMIT`].
    pub queue_truncated: bool,
    pub switches: SwitchBoard,
    /// The running runs (every scheduler's; the lease owner says whose).
    pub running: Vec<Run>,
    /// Queued runs the kill switch holds (what turning it off releases).
    pub kill_held: Vec<Run>,
    /// The selected run, with its events and latest decision.
    pub focus: Option<FocusRun>,
    /// Who schedules this database (the registry); `None` when no scheduler
    /// has ever registered in it (a rehearsal's store, an older database).
    pub liveness: Option<Liveness>,
}

/// The scheduler registry at a glance, for the header.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Liveness {
    pub alive: usize,
    /// The newest heartbeat of any scheduler.
    pub last_seen: Option<DateTime<Utc>>,
    /// With none alive: windows due since then, over all schedules (at most
    /// [`crate::status::MAX_COUNTED`]).
    pub due_since: usize,
    /// Live schedulers running another config than the one the database runs.
    pub on_older_config: usize,
    /// A config version waiting for `approve-config`.
    pub config_waiting: Option<i64>,
}

impl Snapshot {
    /// The kill switch: on or off.
    pub fn kill_on(&self) -> bool {
        self.switches.kill.as_ref().is_some_and(|s| s.on)
    }

    pub fn schedule(&self, id: &str) -> Option<&ScheduleRow> {
        self.schedules.iter().find(|s| s.id == id)
    }

    pub fn lane(&self, schedule: &str) -> Option<&Lane> {
        self.lanes.iter().find(|l| l.schedule == schedule)
    }

    /// A run the snapshot holds anywhere (lanes, queues, focus).
    pub fn find_run(&self, id: i64) -> Option<&Run> {
        self.lanes
            .iter()
            .flat_map(|l| l.runs.iter())
            .chain(self.retries.iter().map(|r| &r.run))
            .chain(self.dead.iter().map(|r| &r.run))
            .chain(self.approvals.iter().map(|r| &r.run))
            .chain(self.backfill.iter().map(|r| &r.run))
            .chain(self.focus.iter().map(|f| &f.run))
            .find(|r| r.id == id)
    }

    /// The focus data, if it is about `run`.
    pub fn focus_of(&self, run: i64) -> Option<&FocusRun> {
        self.focus.as_ref().filter(|f| f.run.id == run)
    }
}

/// One configured schedule with its durable state.
#[derive(Debug, Clone)]
pub struct ScheduleRow {
    pub id: String,
    /// In view: `next_fire` and `last` were read (else both are `None`).
    pub loaded: bool,
    pub tenant: String,
    /// `cron 0 9 * * MON-FRI`, `every 5m`, `on ticket.created`, …
    pub trigger: String,
    pub timezone: Tz,
    pub next_fire: Option<NextFire>,
    /// The newest run (by window start).
    pub last: Option<LastRun>,
    /// The newest run in a terminal state (succeeded, failed, dead, skipped,
    /// expired): how the schedule last ended.
    pub last_terminal: Option<LastRun>,
    /// What is wrong with it now, worst first (see [`Health`]).
    pub health: Health,
    pub circuit: CircuitState,
    pub circuit_since: Option<DateTime<Utc>>,
    pub consecutive_failures: u32,
    pub paused: bool,
    pub paused_reason: Option<String>,
    pub max_attempts: u32,
    pub catchup_window: Duration,
    /// In view and no scheduler alive: the fires that passed unevaluated.
    pub overdue: Option<crate::status::Overdue>,
}

/// A schedule's unresolved trouble, from which the schedules pane names the
/// worst: dead letters, runs waiting for a human, a run waiting on a gate.
/// (Circuit and pause are on the row itself.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Health {
    /// Dead runs not requeued (in the dead-letter list).
    pub dead: usize,
    /// Runs waiting for a human.
    pub needs_human: usize,
    /// The oldest run in view waiting on a gate: the gate and since when it is due.
    pub gate_wait: Option<(String, DateTime<Utc>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NextFire {
    pub at: DateTime<Utc>,
    pub window_key: String,
    /// `dst_shifted`, `calendar_moved`, …
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LastRun {
    pub id: i64,
    pub state: RunState,
    pub window_key: String,
    pub updated_at: DateTime<Utc>,
}

/// A schedule's recent windows, oldest first.
#[derive(Debug, Clone)]
pub struct Lane {
    pub schedule: String,
    pub tenant: String,
    /// In view: `runs` was read (else it is empty).
    pub loaded: bool,
    pub runs: Vec<Run>,
}

#[derive(Debug, Clone)]
pub struct RetryRow {
    pub run: Run,
    pub max_attempts: u32,
}

#[derive(Debug, Clone)]
pub struct ApprovalRow {
    pub run: Run,
    /// The step journal, oldest first.
    pub steps: Vec<Step>,
    /// The last lines of the latest attempt's log (at most [`APPROVAL_LOG_LINES`]).
    pub log_tail: Vec<String>,
    /// `approval_ttl` after it was parked: then it fails unanswered.
    pub deadline: Option<DateTime<Utc>>,
    /// The schedule's owner (who is alerted).
    pub owner: Option<String>,
}

#[derive(Debug, Clone)]
pub struct BackfillRow {
    pub run: Run,
    /// `window_start + catchup_window`: after this the window expires.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Layer 3 at a glance.
#[derive(Debug, Clone, Default)]
pub struct SwitchBoard {
    /// The global kill switch (`None`: never set, i.e. off).
    pub kill: Option<Switch>,
    /// Other named switches in the store.
    pub others: Vec<Switch>,
    pub paused: Vec<PausedRow>,
    /// Circuits that are open or half-open.
    pub circuits: Vec<CircuitRow>,
    pub maintenance: Vec<MaintenanceRow>,
    pub quotas: Vec<QuotaRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PausedRow {
    pub schedule: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CircuitRow {
    pub schedule: String,
    pub state: CircuitState,
    pub since: Option<DateTime<Utc>>,
    pub consecutive_failures: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceRow {
    /// The configured name, or `#id` of an ad-hoc window.
    pub name: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub reason: String,
    /// Empty: all schedules.
    pub schedules: Vec<String>,
    pub active: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QuotaRow {
    /// `pool on_time`, `tenant acme`, `schedule daily-report`, `budget daily-report`.
    pub scope: String,
    pub used: String,
    pub limit: String,
    pub full: bool,
}

/// The selected run with its trace.
#[derive(Debug, Clone)]
pub struct FocusRun {
    pub run: Run,
    /// Newest [`FOCUS_EVENTS`] events, oldest first.
    pub events: Vec<Event>,
    pub decision: Option<DecisionView>,
}

/// The expensive part of a snapshot (two full scans), reused between loads.
#[derive(Debug, Clone, Default)]
pub struct SlowTier {
    pub at: DateTime<Utc>,
    /// The newest event id when it was read: later changes come from the trace.
    pub event_id: i64,
    pub approvals: Vec<ApprovalRow>,
    pub dead: Vec<Run>,
    /// Runs by state changed in the last [`RECENT_HOURS`].
    pub recent_counts: Vec<(RunState, u64)>,
}

/// What to load besides the fixed panes.
#[derive(Debug, Clone, Default)]
pub struct SnapshotRequest {
    /// The selected run (gates pane, timeline events).
    pub focus: Option<i64>,
    /// A slow tier to reuse instead of reading it again.
    pub reuse_slow: Option<SlowTier>,
    /// The schedules in view, whose newest runs, next fires and lanes are read;
    /// `None`: the first [`DEFAULT_VIEW`] of the config.
    pub view: Option<Vec<String>>,
}

/// Everything the panes show, with nothing selected, reading every tier.
pub fn load_snapshot(store: &Store, cfg: &Config, now: DateTime<Utc>) -> Result<Snapshot, StoreError> {
    load_snapshot_with(store, cfg, now, &SnapshotRequest::default()).map(|(s, _)| s)
}

/// Everything the panes show; returns the slow tier it used so the caller can
/// reuse it.
pub fn load_snapshot_with(
    store: &Store,
    cfg: &Config,
    now: DateTime<Utc>,
    req: &SnapshotRequest,
) -> Result<(Snapshot, SlowTier), StoreError> {
    store.read(|tx| {
        let slow = match &req.reuse_slow {
            Some(s) => s.clone(),
            None => load_slow(tx, now)?,
        };
        let snap = load_fast(tx, cfg, now, req, &slow)?;
        Ok((snap, slow))
    })
}

/// The newest event id: a cheap "did anything change?" probe.
pub fn last_event_id(store: &Store) -> Result<i64, StoreError> {
    store.read(|tx| tx.max_event_id())
}

fn load_slow(tx: &Tx, now: DateTime<Utc>) -> Result<SlowTier, StoreError> {
    let event_id = tx.max_event_id()?;
    let runs = tx.runs(&RunFilter {
        states: vec![RunState::NeedsHuman],
        limit: Some(APPROVALS_LIMIT),
        ..RunFilter::default()
    })?;
    let approvals = runs
        .into_iter()
        .map(|run| approval_row(tx, run))
        .collect::<Result<Vec<_>, StoreError>>()?;
    let dead = tx.runs(&RunFilter {
        states: vec![RunState::Dead],
        newest_first: true,
        limit: Some(DEAD_LIMIT),
        ..RunFilter::default()
    })?;
    let recent_counts = tx.count_by_state_since(now - Duration::hours(RECENT_HOURS))?;
    Ok(SlowTier {
        at: now,
        event_id,
        approvals,
        dead,
        recent_counts,
    })
}

/// A `needs_human` run with its step journal and its latest attempt's log
/// tail (the deadline and owner come from the config, see [`fill_approvals`]).
fn approval_row(tx: &Tx, run: Run) -> Result<ApprovalRow, StoreError> {
    let log_tail = tx
        .attempts(run.id)?
        .last()
        .map(|a| {
            let lines: Vec<&str> = a.log.lines().filter(|l| !l.trim().is_empty()).collect();
            let from = lines.len().saturating_sub(APPROVAL_LOG_LINES);
            lines[from..].iter().map(|l| l.to_string()).collect()
        })
        .unwrap_or_default();
    Ok(ApprovalRow {
        steps: tx.steps(run.id)?,
        run,
        log_tail,
        deadline: None,
        owner: None,
    })
}

/// Each approval's deadline (`approval_ttl` after it was parked, as the
/// engine counts it) and its schedule's owner.
fn fill_approvals(cfg: &Config, rows: &mut [ApprovalRow]) {
    for r in rows {
        let s = cfg.schedule(&r.run.schedule);
        r.owner = s.and_then(|s| s.owner.clone());
        r.deadline = s
            .and_then(|s| s.approval_ttl)
            .map(|ttl| r.run.updated_at + to_delta(ttl));
    }
}

/// The schedule's newest terminal run among `runs` (oldest first).
fn last_terminal(runs: &[Run]) -> Option<LastRun> {
    runs.iter()
        .rev()
        .find(|r| r.state.is_terminal())
        .map(|r| LastRun {
            id: r.id,
            state: r.state,
            window_key: r.window_key.clone(),
            updated_at: r.updated_at,
        })
}

/// The oldest run of `runs` waiting on a gate, with the gate that waits (from
/// its latest decision) and since when the run is due.
fn gate_wait(tx: &Tx, runs: &[Run]) -> Result<Option<(String, DateTime<Utc>)>, StoreError> {
    let Some(r) = runs
        .iter()
        .filter(|r| {
            matches!(r.state, RunState::Pending | RunState::RetryWait)
                && r.hold == Some(crate::core::decision::HoldKind::Gate)
        })
        .min_by_key(|r| (r.due_at, r.id))
    else {
        return Ok(None);
    };
    let mut explaining = tx.events(&EventFilter {
        run_id: Some(r.id),
        kinds: DECISION_KINDS.iter().map(|k| k.to_string()).collect(),
        newest_first: true,
        limit: Some(DECISION_EVENTS),
        ..EventFilter::default()
    })?;
    explaining.reverse();
    let gate = latest_decision(&explaining)
        .and_then(|d| d.gates.into_iter().find(|g| g.result == "wait"))
        .map_or_else(|| "gate".to_string(), |g| g.name);
    Ok(Some((gate, r.due_at)))
}

fn trigger_text(s: &ScheduleConfig) -> String {
    match &s.trigger {
        TriggerConfig::Cron(spec) => format!("cron {}", spec.expr()),
        TriggerConfig::Every { interval, .. } => format!("every {}", format_duration(*interval)),
        TriggerConfig::AfterEvent { event, delay } => {
            format!("after {event} +{}", format_duration(*delay))
        }
        TriggerConfig::OnEvent { event } => format!("on {event}"),
    }
}

fn next_fire(
    cfg: &Config,
    s: &ScheduleConfig,
    last_start: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<NextFire> {
    let calendar = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
    let rule = s.fire_rule(calendar)?;
    let after = match &s.trigger {
        // N after the previous start; before any start, the next interval from now.
        TriggerConfig::Every {
            anchor: crate::config::model::Anchor::LastStart,
            ..
        } => last_start.unwrap_or(now),
        _ => now,
    };
    rule.next_after(after).map(|f| NextFire {
        at: f.at,
        window_key: f.window_key,
        note: f.note.map(|n| n.as_str().to_string()),
    })
}

fn load_fast(
    tx: &Tx,
    cfg: &Config,
    now: DateTime<Utc>,
    req: &SnapshotRequest,
    slow: &SlowTier,
) -> Result<Snapshot, StoreError> {
    let last_event_id = tx.max_event_id()?;
    let states: HashMap<String, crate::store::ScheduleState> = tx
        .all_schedule_states()?
        .into_iter()
        .map(|s| (s.schedule.clone(), s))
        .collect();
    let in_view: std::collections::HashSet<&str> = match &req.view {
        Some(v) => v.iter().map(String::as_str).collect(),
        None => cfg
            .schedules
            .iter()
            .take(DEFAULT_VIEW)
            .map(|s| s.id.as_str())
            .collect(),
    };

    let registry = tx.schedulers()?;
    let (current_hash, config_waiting) = tx.config_glance()?;
    let summary = crate::core::registry::summarize(&registry, now);
    let none_alive = !registry.is_empty() && summary.alive == 0;
    // Bounded over all schedules: after a long outage the count says "at
    // least", it never costs the poller more than this many fires.
    let mut due_budget = crate::status::MAX_COUNTED;
    let mut due_since = 0;

    let mut schedules: Vec<ScheduleRow> = Vec::with_capacity(cfg.schedules.len());
    let mut lanes = Vec::with_capacity(cfg.schedules.len());
    for s in &cfg.schedules {
        let loaded = in_view.contains(s.id.as_str());
        let mut runs = if loaded {
            tx.runs(&RunFilter {
                schedule: Some(s.id.clone()),
                tenant: Some(s.tenant.clone()),
                newest_first: true,
                limit: Some(LANE_WINDOWS),
                ..RunFilter::default()
            })?
        } else {
            Vec::new()
        };
        runs.reverse();
        let default_state;
        let st = match states.get(&s.id) {
            Some(st) => st,
            None => {
                default_state = crate::store::ScheduleState::new(&s.id);
                &default_state
            }
        };
        let overdue = if none_alive && due_budget > 0 {
            crate::status::overdue(cfg, s, st.last_evaluated, now, due_budget)
        } else {
            None
        };
        if let Some(o) = &overdue {
            due_since += o.windows;
            due_budget -= o.windows.min(due_budget);
        }
        schedules.push(ScheduleRow {
            id: s.id.clone(),
            loaded,
            tenant: s.tenant.clone(),
            trigger: trigger_text(s),
            timezone: s.timezone,
            next_fire: if loaded {
                next_fire(cfg, s, st.last_start, now)
            } else {
                None
            },
            last: runs.last().map(|r| LastRun {
                id: r.id,
                state: r.state,
                window_key: r.window_key.clone(),
                updated_at: r.updated_at,
            }),
            last_terminal: last_terminal(&runs),
            health: Health {
                gate_wait: if loaded { gate_wait(tx, &runs)? } else { None },
                ..Health::default()
            },
            circuit: st.circuit,
            circuit_since: st.circuit_changed_at,
            consecutive_failures: st.consecutive_failures,
            paused: st.paused,
            paused_reason: st.paused_reason.clone(),
            max_attempts: s.retry.max_attempts,
            catchup_window: to_delta(s.catchup_window),
            overdue: overdue.filter(|_| loaded),
        });
        lanes.push(Lane {
            schedule: s.id.clone(),
            tenant: s.tenant.clone(),
            loaded,
            runs,
        });
    }

    // The engine's own work queue: pending and retry_wait runs by next check.
    let far = now + Duration::days(365 * 100);
    let queued = tx.due_runs(far, QUEUE_LIMIT)?;
    let queue_truncated = queued.len() >= QUEUE_LIMIT;
    let by_id: HashMap<&str, &ScheduleConfig> = cfg.schedules.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut retries: Vec<RetryRow> = queued
        .iter()
        .filter(|r| r.state == RunState::RetryWait)
        .map(|r| RetryRow {
            run: r.clone(),
            max_attempts: by_id.get(r.schedule.as_str()).map_or(0, |s| s.retry.max_attempts),
        })
        .collect();
    retries.sort_by_key(|r| (r.run.not_before.or(r.run.next_check_at), r.run.id));
    let mut backfill: Vec<BackfillRow> = queued
        .iter()
        .filter(|r| r.state == RunState::Pending && r.pool == Pool::Backfill)
        .map(|r| BackfillRow {
            run: r.clone(),
            expires_at: by_id
                .get(r.schedule.as_str())
                .map(|s| r.window_start + to_delta(s.catchup_window)),
        })
        .collect();
    backfill.sort_by_key(|r| (r.run.window_start, r.run.id));
    let kill_held: Vec<Run> = queued
        .iter()
        .filter(|r| r.hold == Some(crate::core::decision::HoldKind::Kill))
        .cloned()
        .collect();

    let moved = moved_since(tx, slow.event_id)?;
    let fresh: HashMap<i64, &Run> = lanes
        .iter()
        .flat_map(|l| l.runs.iter())
        .chain(moved.iter())
        .map(|r| (r.id, r))
        .collect();
    let mut approvals = fresh_approvals(tx, &slow.approvals, &fresh)?;
    fill_approvals(cfg, &mut approvals);
    let dead: Vec<RetryRow> = fresh_dead(&slow.dead, &fresh)
        .into_iter()
        .map(|run| RetryRow {
            max_attempts: by_id
                .get(run.schedule.as_str())
                .map_or(0, |s| s.retry.max_attempts),
            run,
        })
        .collect();
    let running = tx.running_runs(None)?;
    let switches = switch_board(tx, cfg, now, &states, &running)?;
    // Dead letters and approvals per schedule, for the schedules pane's health.
    for row in &mut schedules {
        row.health.dead = dead
            .iter()
            .filter(|d: &&RetryRow| d.run.schedule == row.id)
            .count();
        row.health.needs_human = approvals.iter().filter(|a| a.run.schedule == row.id).count();
    }

    let focus = match req.focus {
        Some(id) => match tx.try_run(id)? {
            Some(run) => Some(focus_run(tx, run)?),
            None => None,
        },
        None => None,
    };

    Ok(Snapshot {
        source: 0,
        taken_at: now,
        last_event_id,
        counts: tx.count_by_state()?,
        counts_at: Some(now),
        recent_counts: slow.recent_counts.clone(),
        schedules,
        lanes,
        retries,
        dead,
        approvals,
        backfill,
        // A range left by a schedule no longer configured is never drained here.
        backlogs: tx
            .backlogs()?
            .into_iter()
            .filter(|b| by_id.contains_key(b.schedule.as_str()))
            .collect(),
        queue_truncated,
        switches,
        running,
        kill_held,
        focus,
        liveness: (!registry.is_empty()).then_some(Liveness {
            alive: summary.alive,
            last_seen: summary.last_seen,
            due_since,
            on_older_config: current_hash.as_ref().map_or(0, |h| {
                registry
                    .iter()
                    .filter(|r| {
                        r.liveness(now) == crate::core::registry::Liveness::Alive && &r.config_hash != h
                    })
                    .count()
            }),
            config_waiting,
        }),
    })
}

/// The event kinds that move a run into or out of the approvals and
/// dead-letter lists.
const LIST_KINDS: [&str; 5] = [
    "parked_for_human",
    "dead_lettered",
    "approved",
    "rejected",
    "requeued",
];
/// Runs re-read from the trace at most per load (newest first).
const MOVED_LIMIT: usize = 500;

/// The runs that entered or left `needs_human` or `dead` since event `after`,
/// read again.
fn moved_since(tx: &Tx, after: i64) -> Result<Vec<Run>, StoreError> {
    let events = tx.events(&EventFilter {
        after_id: Some(after),
        kinds: LIST_KINDS.iter().map(|k| k.to_string()).collect(),
        newest_first: true,
        limit: Some(MOVED_LIMIT),
        ..EventFilter::default()
    })?;
    let mut ids: Vec<i64> = events.iter().filter_map(|e| e.run_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut runs = Vec::with_capacity(ids.len());
    for id in ids {
        runs.extend(tx.try_run(id)?);
    }
    Ok(runs)
}

/// The slow needs_human list corrected by `fresh` runs (the lanes in view and
/// the runs the trace says moved): runs that left `needs_human` drop out, new
/// ones come in.
fn fresh_approvals(
    tx: &Tx,
    slow: &[ApprovalRow],
    fresh: &HashMap<i64, &Run>,
) -> Result<Vec<ApprovalRow>, StoreError> {
    let mut out: Vec<ApprovalRow> = Vec::with_capacity(slow.len());
    for row in slow {
        match fresh.get(&row.run.id) {
            Some(r) if r.state != RunState::NeedsHuman => {}
            Some(r) => out.push(ApprovalRow {
                run: (*r).clone(),
                ..row.clone()
            }),
            None => out.push(row.clone()),
        }
    }
    let mut new: Vec<&Run> = fresh
        .values()
        .filter(|r| r.state == RunState::NeedsHuman && !out.iter().any(|a| a.run.id == r.id))
        .copied()
        .collect();
    new.sort_by_key(|r| (r.window_start, r.id));
    for r in new {
        if out.len() < APPROVALS_LIMIT {
            out.push(approval_row(tx, r.clone())?);
        }
    }
    out.sort_by_key(|a| (a.run.window_start, a.run.id));
    Ok(out)
}

/// The slow dead-letter list corrected by `fresh` runs: requeued runs drop
/// out, runs that just died come in. Newest window first.
fn fresh_dead(slow: &[Run], fresh: &HashMap<i64, &Run>) -> Vec<Run> {
    let mut out: Vec<Run> = slow
        .iter()
        .filter_map(|r| match fresh.get(&r.id) {
            Some(f) if f.state != RunState::Dead => None,
            Some(f) => Some((*f).clone()),
            None => Some(r.clone()),
        })
        .collect();
    for r in fresh.values() {
        if r.state == RunState::Dead && !out.iter().any(|o| o.id == r.id) {
            out.push((*r).clone());
        }
    }
    out.sort_by_key(|r| (std::cmp::Reverse(r.window_start), std::cmp::Reverse(r.id)));
    out.truncate(DEAD_LIMIT);
    out
}

fn focus_run(tx: &Tx, run: Run) -> Result<FocusRun, StoreError> {
    let mut events = tx.events(&EventFilter {
        run_id: Some(run.id),
        newest_first: true,
        limit: Some(FOCUS_EVENTS),
        ..EventFilter::default()
    })?;
    events.reverse();
    let mut explaining = tx.events(&EventFilter {
        run_id: Some(run.id),
        kinds: DECISION_KINDS.iter().map(|k| k.to_string()).collect(),
        newest_first: true,
        limit: Some(DECISION_EVENTS),
        ..EventFilter::default()
    })?;
    explaining.reverse();
    let decision = latest_decision(&explaining);
    Ok(FocusRun {
        run,
        events,
        decision,
    })
}

fn switch_board(
    tx: &Tx,
    cfg: &Config,
    now: DateTime<Utc>,
    states: &HashMap<String, crate::store::ScheduleState>,
    running: &[Run],
) -> Result<SwitchBoard, StoreError> {
    let all = tx.switches()?;
    let kill = all.iter().find(|s| s.name == KILL_SWITCH).cloned();
    let others = all.into_iter().filter(|s| s.name != KILL_SWITCH).collect();

    let mut sorted: Vec<&crate::store::ScheduleState> = states.values().collect();
    sorted.sort_by(|a, b| a.schedule.cmp(&b.schedule));
    let paused = sorted
        .iter()
        .filter(|s| s.paused)
        .map(|s| PausedRow {
            schedule: s.schedule.clone(),
            reason: s.paused_reason.clone(),
        })
        .collect();
    let circuits = sorted
        .iter()
        .filter(|s| s.circuit != CircuitState::Closed)
        .map(|s| CircuitRow {
            schedule: s.schedule.clone(),
            state: s.circuit,
            since: s.circuit_changed_at,
            consecutive_failures: s.consecutive_failures,
        })
        .collect();

    // The same windows the engine's switch layer holds runs by.
    let adhoc = tx.maintenance_list()?;
    let mut maintenance: Vec<MaintenanceRow> = switches::maintenance_windows(&cfg.maintenance, &adhoc, now)
        .into_iter()
        .map(|m| MaintenanceRow {
            name: m.name,
            from: m.from,
            to: m.to,
            reason: m.reason,
            schedules: m.schedules,
            active: m.active,
        })
        .collect();
    maintenance.sort_by_key(|m| (!m.active, m.from));

    let quotas = quotas(tx, cfg, now, states, running)?;
    Ok(SwitchBoard {
        kill,
        others,
        paused,
        circuits,
        maintenance,
        quotas,
    })
}

fn quotas(
    tx: &Tx,
    cfg: &Config,
    now: DateTime<Utc>,
    states: &HashMap<String, crate::store::ScheduleState>,
    running: &[Run],
) -> Result<Vec<QuotaRow>, StoreError> {
    let mut rows = Vec::new();
    let count = |pred: &dyn Fn(&Run) -> bool| running.iter().filter(|r| pred(r)).count();
    for (pool, limit) in [
        (Pool::OnTime, cfg.scheduler.workers),
        (Pool::Backfill, cfg.scheduler.backfill_workers),
    ] {
        let used = count(&|r| r.pool == pool);
        rows.push(QuotaRow {
            scope: format!("pool {}", pool.as_str()),
            used: used.to_string(),
            limit: limit.to_string(),
            full: used >= limit,
        });
    }
    let mut by_tenant: BTreeMap<&str, usize> = BTreeMap::new();
    for r in running {
        *by_tenant.entry(r.tenant.as_str()).or_default() += 1;
    }
    for (tenant, t) in &cfg.tenants {
        if let Some(max) = t.max_concurrent {
            let used = by_tenant.get(tenant.as_str()).copied().unwrap_or(0);
            rows.push(QuotaRow {
                scope: format!("tenant {tenant}"),
                used: used.to_string(),
                limit: max.to_string(),
                full: used >= max as usize,
            });
        }
    }
    // Running runs by schedule, once: ten thousand schedules would otherwise
    // scan the running list each.
    let mut by_schedule: HashMap<(&str, &str), usize> = HashMap::new();
    for r in running {
        *by_schedule
            .entry((r.tenant.as_str(), r.schedule.as_str()))
            .or_default() += 1;
    }
    for s in &cfg.schedules {
        let used = by_schedule
            .get(&(s.tenant.as_str(), s.id.as_str()))
            .copied()
            .unwrap_or(0);
        let divisor = states.get(&s.id).map_or(1, |st| st.concurrency_divisor.max(1));
        let limit = switches::schedule_limit(s.max_concurrency, divisor);
        if used > 0 || divisor > 1 {
            let halved = if divisor > 1 {
                format!(" (÷{divisor}, rate limited)")
            } else {
                String::new()
            };
            rows.push(QuotaRow {
                scope: format!("schedule {}", s.id),
                used: used.to_string(),
                limit: format!("{limit}{halved}"),
                full: used as u32 >= limit,
            });
        }
        if let Some(cap) = s.budget.max_cost_per_day {
            // The day the engine's budget switch counts.
            let (from, to) = switches::local_day(now, s.timezone);
            let spent = tx.schedule_cost_between(&s.tenant, &s.id, from, to)?;
            rows.push(QuotaRow {
                scope: format!("budget {}", s.id),
                used: format!("${spent:.2}"),
                limit: format!("${cap:.2}/day"),
                full: spent >= cap,
            });
        }
    }
    Ok(rows)
}
