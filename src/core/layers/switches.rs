//! Layer 3 — switches (DESIGN.md "Trigger rules"), as one pure function of
//! prefetched facts: the global kill switch, the schedule's pause, its
//! circuit, maintenance windows, its daily budget, overlap with its running
//! window, and the concurrency quotas (schedule, tenant, pool). The first
//! switch that holds decides; later ones are not looked at.
//!
//! The engine gathers [`SwitchFacts`] once per tick and per run; the console's
//! switches pane reads maintenance windows, schedule limits and budget days
//! through the same functions, so both say the same thing.

use crate::config::model::{MaintenanceConfig, Overlap, ScheduleConfig, TriggerConfig};
use crate::core::decision::{Hold, SwitchCheck, SwitchName};
use crate::core::records::{
    CircuitState, Maintenance, Pool, Run, RunReason, RunState, ScheduleState, Switch,
};
use crate::core::recovery::circuit;
use crate::time::duration::to_delta;
use crate::time::fire::FireRule;
use crate::time::rfc3339;
use chrono::{DateTime, Utc};

/// Everything the switch layer looks at for one run, read before it decides.
#[derive(Debug, Clone)]
pub struct SwitchFacts<'a> {
    /// The global kill switch, when it is on.
    pub kill: Option<&'a Switch>,
    pub state: &'a ScheduleState,
    /// Why a maintenance window holds this schedule now, if one does.
    pub maintenance: Option<&'a str>,
    /// Cost of the schedule's attempts started this local day; read only when
    /// the schedule has a daily cap.
    pub spent_today: Option<f64>,
    /// Runs of this schedule running anywhere (every scheduler on the store),
    /// and of them the on-time ones.
    pub running: u32,
    pub running_on_time: u32,
    /// The window key of a running on-time run and of a running catch-up run
    /// of the schedule, for the reason text (read when something runs).
    pub on_time_window: Option<String>,
    pub catchup_window: Option<String>,
    /// The running on-time run started late because it waited for a
    /// catch-up run (read only when a new time window would be skipped for
    /// it): the window after it is then never skipped either.
    pub on_time_late_for_catchup: bool,
    /// A pending on-time window of the schedule (read for catch-up runs: the
    /// on-time window goes first).
    pub on_time_due: Option<String>,
    /// Runs of this schedule's tenant running anywhere, and its cap.
    pub tenant_running: u32,
    pub tenant_max: Option<u32>,
    /// The oldest pending run of the schedule held by an overlap buffer.
    pub first_buffered: Option<i64>,
    /// Attempts of the run's pool this process runs or is starting, and its size.
    pub pool_used: usize,
    pub pool_size: usize,
}

/// What the switch layer concluded.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchOutcome {
    pub checks: Vec<(SwitchCheck, Hold)>,
    /// This run would be the half-open circuit's probe.
    pub probe: bool,
    /// `overlap = "cancel_previous"`: the schedule's running windows must be
    /// cancelled (the engine stops the ones it runs).
    pub cancel_running: bool,
}

/// The effective concurrency of a schedule: `max_concurrency`, halved per
/// rate limit (divisor), never below one.
pub fn schedule_limit(max_concurrency: u32, divisor: u32) -> u32 {
    (max_concurrency / divisor.max(1)).max(1)
}

/// The schedule-local calendar day containing `now`, as UTC bounds: the day a
/// daily cost cap counts.
pub fn local_day(now: DateTime<Utc>, tz: chrono_tz::Tz) -> (DateTime<Utc>, DateTime<Utc>) {
    let date = now.with_timezone(&tz).date_naive();
    let start = |d: chrono::NaiveDate| {
        crate::time::fire::resolve_local(tz, d.and_hms_opt(0, 0, 0).unwrap_or_default()).earliest()
    };
    let next = date.succ_opt().unwrap_or(date);
    (start(date), start(next))
}

/// One maintenance window, configured (recurring) or added by an operator.
#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceWindow {
    /// The configured name, or `#ID` for an ad-hoc one.
    pub name: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub reason: String,
    pub actor: Option<String>,
    /// Empty = all schedules.
    pub schedules: Vec<String>,
    pub active: bool,
}

impl MaintenanceWindow {
    pub fn applies_to(&self, schedule: &str) -> bool {
        self.schedules.is_empty() || self.schedules.iter().any(|s| s == schedule)
    }

    /// Why it holds a run, as the decision says it.
    pub fn hold_reason(&self) -> String {
        match &self.actor {
            Some(actor) => format!(
                "maintenance until {} ({}, by {actor})",
                rfc3339(self.to),
                self.reason
            ),
            None => format!(
                "maintenance window {} until {} ({})",
                self.name,
                rfc3339(self.to),
                self.reason
            ),
        }
    }
}

/// The maintenance windows not yet over at `now`: each configured window's
/// current or next opening, and the ad-hoc ones, active first.
pub fn maintenance_windows(
    configured: &[MaintenanceConfig],
    adhoc: &[Maintenance],
    now: DateTime<Utc>,
) -> Vec<MaintenanceWindow> {
    let mut out = vec![];
    for m in configured {
        let rule = FireRule::cron(m.cron.clone(), m.timezone);
        let len = to_delta(m.duration);
        // The first opening that has not closed yet: active if it opened already.
        if let Some(f) = rule.next_after(now - len) {
            out.push(MaintenanceWindow {
                name: m.name.clone(),
                from: f.at,
                to: f.at + len,
                reason: m.reason.clone(),
                actor: None,
                schedules: m.schedules.clone(),
                active: f.at <= now,
            });
        }
    }
    for m in adhoc.iter().filter(|m| m.to > now) {
        out.push(MaintenanceWindow {
            name: format!("#{}", m.id),
            from: m.from,
            to: m.to,
            reason: m.reason.clone(),
            actor: Some(m.actor.clone()),
            schedules: m.schedules.clone(),
            active: m.from <= now,
        });
    }
    out
}

fn clear(name: SwitchName) -> (SwitchCheck, Hold) {
    (
        SwitchCheck {
            name,
            held: false,
            reason: "clear".into(),
        },
        Hold::Wait,
    )
}

fn held(name: SwitchName, reason: String, hold: Hold) -> (SwitchCheck, Hold) {
    (
        SwitchCheck {
            name,
            held: true,
            reason: reason.into(),
        },
        hold,
    )
}

/// Layer 3 for `run` of schedule `s` at `now`.
pub fn check(run: &Run, s: &ScheduleConfig, f: &SwitchFacts<'_>, now: DateTime<Utc>) -> SwitchOutcome {
    let mut out = SwitchOutcome {
        checks: Vec::with_capacity(SwitchName::ALL.len()),
        probe: false,
        cancel_running: false,
    };
    let push_held = |out: &mut SwitchOutcome, name, reason, hold| {
        out.checks.push(held(name, reason, hold));
    };
    // Global kill switch.
    if let Some(k) = f.kill {
        push_held(
            &mut out,
            SwitchName::Kill,
            format!("global kill switch on (by {}: {})", k.actor, k.reason),
            Hold::Wait,
        );
        return out;
    }
    out.checks.push(clear(SwitchName::Kill));
    let st = f.state;
    if st.paused {
        let why = st.paused_reason.clone().unwrap_or_else(|| "paused".into());
        push_held(
            &mut out,
            SwitchName::Paused,
            format!("schedule paused: {why}"),
            Hold::Wait,
        );
        return out;
    }
    out.checks.push(clear(SwitchName::Paused));
    // Circuit breaker: new windows only; retries of a run already going continue.
    let new_window = run.state == RunState::Pending && run.reason != RunReason::Manual;
    match st.circuit {
        CircuitState::Open if new_window => {
            if circuit::cool_down_over(st, &s.circuit, now) {
                out.probe = true;
                out.checks.push((
                    SwitchCheck {
                        name: SwitchName::Circuit,
                        held: false,
                        reason: "cool-down over: this run is the half-open probe".into(),
                    },
                    Hold::Wait,
                ));
            } else {
                let until = st.circuit_changed_at.map(|t| t + to_delta(s.circuit.cool_down));
                push_held(
                    &mut out,
                    SwitchName::Circuit,
                    // The configured threshold, not today's count: failures of
                    // runs already going keep counting while it is open, and
                    // the count at opening is the `circuit_opened` event's.
                    format!(
                        "circuit_open: open{} (it opens at open_after = {} consecutive failed runs); probe after {}",
                        st.circuit_changed_at
                            .map(|t| format!(" since {}", rfc3339(t)))
                            .unwrap_or_default(),
                        s.circuit.open_after,
                        until.map(rfc3339).unwrap_or_default()
                    ),
                    Hold::Skip,
                );
                return out;
            }
        }
        CircuitState::HalfOpen if new_window => {
            push_held(
                &mut out,
                SwitchName::Circuit,
                "circuit_open: half-open, waiting for the probe run".into(),
                Hold::Skip,
            );
            return out;
        }
        _ => out.checks.push(clear(SwitchName::Circuit)),
    }
    if let Some(why) = f.maintenance {
        push_held(&mut out, SwitchName::Maintenance, why.to_string(), Hold::Wait);
        return out;
    }
    out.checks.push(clear(SwitchName::Maintenance));
    // Budget: the schedule's daily cost cap.
    if let (Some(cap), Some(spent)) = (s.budget.max_cost_per_day, f.spent_today)
        && spent >= cap
    {
        push_held(
            &mut out,
            SwitchName::Budget,
            format!(
                "daily cost cap reached: {} of {}",
                crate::core::money::usd_text(spent),
                crate::core::money::usd_text(cap)
            ),
            Hold::Wait,
        );
        return out;
    }
    out.checks.push(clear(SwitchName::Budget));
    // On time first: no new catch-up run of a schedule starts while an
    // on-time window of it is due.
    if run.pool == Pool::Backfill
        && let Some(w) = &f.on_time_due
    {
        push_held(
            &mut out,
            SwitchName::OnTime,
            format!("on-time window {w} of the same schedule goes first"),
            Hold::Wait,
        );
        return out;
    }
    out.checks.push(clear(SwitchName::OnTime));
    // Overlap with a run of the same schedule still running. The policy is
    // about a new time-triggered window meeting a running on-time one; every
    // other run waits its turn and is never skipped: a catch-up window behind
    // any running window (catch-up windows never skip each other), an on-time
    // window behind a catch-up run, a posted event or a manual trigger behind
    // whatever runs, a retry behind the window running now.
    if f.running > 0 && s.overlap != Overlap::Allow {
        let time_window = run.state == RunState::Pending
            && run.pool == Pool::OnTime
            && run.reason == RunReason::Scheduled
            && matches!(s.trigger, TriggerConfig::Cron(_) | TriggerConfig::Every { .. });
        let any = f
            .on_time_window
            .clone()
            .or_else(|| f.catchup_window.clone())
            .unwrap_or_default();
        let (reason, hold) = if time_window && f.running_on_time > 0 {
            let prev = f.on_time_window.clone().unwrap_or_default();
            // On time first, carried one window on: the window running late
            // because it waited for a catch-up run does not cost the next one
            // its run. (An overlap hold: the window after this one is again
            // under the policy, so a schedule whose runs outlast its period
            // never queues without end.)
            if f.on_time_late_for_catchup && matches!(s.overlap, Overlap::Skip | Overlap::BufferOne) {
                push_held(
                    &mut out,
                    SwitchName::Overlap,
                    format!(
                        "waits for window {prev}, which started late behind a catch-up run \
                         (never skipped for catch-up)"
                    ),
                    Hold::Wait,
                );
                return out;
            }
            match s.overlap {
                Overlap::Skip => (
                    format!("window {prev} still running (overlap = skip)"),
                    Hold::Skip,
                ),
                // The oldest buffered window waits; any other is skipped.
                Overlap::BufferOne if f.first_buffered.is_some_and(|first| first != run.id) => (
                    format!(
                        "window {prev} still running and one window is already buffered (overlap = buffer_one)"
                    ),
                    Hold::Skip,
                ),
                Overlap::BufferOne => (
                    format!("buffered until window {prev} finishes (overlap = buffer_one)"),
                    Hold::Wait,
                ),
                Overlap::BufferAll => (
                    format!("buffered until window {prev} finishes (overlap = buffer_all)"),
                    Hold::Wait,
                ),
                Overlap::CancelPrevious => {
                    out.cancel_running = true;
                    (
                        format!("cancelling window {prev} (overlap = cancel_previous)"),
                        Hold::Wait,
                    )
                }
                // Excluded above.
                Overlap::Allow => (String::new(), Hold::Wait),
            }
        } else if time_window {
            // On time first, the other way round: the on-time window waits for
            // the catch-up run already going, goes right after it (its window
            // does not close meanwhile), and is never skipped for it.
            let prev = f.catchup_window.clone().unwrap_or_default();
            push_held(
                &mut out,
                SwitchName::OnTime,
                format!("waits for catch-up run of window {prev} to finish"),
                Hold::Wait,
            );
            return out;
        } else if run.state == RunState::Pending && run.pool == Pool::OnTime {
            (
                format!("waits its turn behind window {any} of the same schedule"),
                Hold::Wait,
            )
        } else {
            (
                format!("waits for window {any} of the same schedule to finish"),
                Hold::Wait,
            )
        };
        push_held(&mut out, SwitchName::Overlap, reason, hold);
        return out;
    }
    out.checks.push(clear(SwitchName::Overlap));
    // Quotas: schedule concurrency (halved after rate limits), tenant, pool.
    if let Some(reason) = quota_hold(run.pool, s, &Quotas::of(f)) {
        push_held(&mut out, SwitchName::Quota, reason, Hold::Wait);
        return out;
    }
    out.checks.push(clear(SwitchName::Quota));
    out
}

/// What the quota switch looks at: a subset of [`SwitchFacts`], also gathered
/// on its own when a freed slot looks for a run that can take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    pub divisor: u32,
    pub running: u32,
    pub tenant_running: u32,
    pub tenant_max: Option<u32>,
    pub pool_used: usize,
    pub pool_size: usize,
}

impl Quotas {
    pub fn of(f: &SwitchFacts<'_>) -> Self {
        Self {
            divisor: f.state.concurrency_divisor,
            running: f.running,
            tenant_running: f.tenant_running,
            tenant_max: f.tenant_max,
            pool_used: f.pool_used,
            pool_size: f.pool_size,
        }
    }
}

/// The quota that holds a run, if one does ([`quota_limit`]): the reason
/// is written only when a hold is recorded, not when a freed slot merely
/// asks whether a held run may start (every attempt's end after an outage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaLimit {
    /// The schedule's `max_concurrency`, divided after rate limits.
    Schedule {
        running: u32,
        limit: u32,
        divisor: u32,
    },
    Tenant {
        running: u32,
        max: u32,
    },
    Pool {
        used: usize,
        size: usize,
    },
}

impl QuotaLimit {
    /// The hold's reason, as the trace records it.
    pub fn reason(&self, pool: Pool, s: &ScheduleConfig) -> String {
        match *self {
            QuotaLimit::Schedule {
                running,
                limit,
                divisor,
            } => {
                let halved = if divisor > 1 {
                    format!(
                        " (max_concurrency {} halved after rate limiting)",
                        s.max_concurrency
                    )
                } else {
                    String::new()
                };
                format!("schedule at {running}/{limit} running{halved}")
            }
            QuotaLimit::Tenant { running, max } => format!("tenant {} at {running}/{max} running", s.tenant),
            QuotaLimit::Pool { used, size } => format!("{} pool full ({used}/{size})", pool.as_str()),
        }
    }
}

/// Which quota holds a run (schedule concurrency halved after rate limits,
/// tenant, this process's pool: `q.pool_*` are the run's pool's), or `None`
/// when it may start.
pub fn quota_limit(s: &ScheduleConfig, q: &Quotas) -> Option<QuotaLimit> {
    let divisor = q.divisor.max(1);
    let limit = schedule_limit(s.max_concurrency, divisor);
    if q.running >= limit {
        return Some(QuotaLimit::Schedule {
            running: q.running,
            limit,
            divisor,
        });
    }
    if let Some(max) = q.tenant_max
        && q.tenant_running >= max
    {
        return Some(QuotaLimit::Tenant {
            running: q.tenant_running,
            max,
        });
    }
    if q.pool_used >= q.pool_size {
        return Some(QuotaLimit::Pool {
            used: q.pool_used,
            size: q.pool_size,
        });
    }
    None
}

/// Why a quota holds a run of `pool` ([`quota_limit`]'s reason), or `None`
/// when it may start.
pub fn quota_hold(pool: Pool, s: &ScheduleConfig, q: &Quotas) -> Option<String> {
    quota_limit(s, q).map(|l| l.reason(pool, s))
}
