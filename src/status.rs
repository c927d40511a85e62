//! "Is it working?" in one read (DESIGN.md "Status"): the schedulers alive,
//! stopped and lost, the kill switch, paused schedules, open circuits, runs
//! by state, approvals waiting, dead letters, the catch-up queue and each
//! schedule's next fire — or, when no scheduler is alive, the fires that
//! passed unevaluated. `agentcron status`, `GET /api/v1/status` and the
//! console's header read it from here.

use crate::config::Config;
use crate::config::model::{Anchor, ScheduleConfig, TriggerConfig};
use crate::core::registry::{Liveness, RegistrySummary, SchedulerRecord, summarize};
use crate::store::Oldest;
use crate::store::types::{CircuitState, RunState, Switch};
use crate::time::fire::Fire;
use crate::time::rfc3339;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::HashMap;

type StoreResult<T> = crate::store::Result<T>;

/// Fires counted per schedule when telling how many windows passed unevaluated.
pub const MAX_COUNTED: usize = 10_000;

/// Windows that fell due while no scheduler evaluated a schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Overdue {
    /// The first of them.
    pub due: DateTime<Utc>,
    pub window_key: String,
    /// How many (at most [`MAX_COUNTED`]).
    pub windows: usize,
}

/// One schedule's line of the status.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleStatus {
    pub id: String,
    pub tenant: String,
    pub next_fire: Option<Fire>,
    /// Only when no scheduler is alive.
    pub overdue: Option<Overdue>,
    pub paused: bool,
    pub circuit: CircuitState,
    pub last_success: Option<DateTime<Utc>>,
}

/// The whole status at `at`.
#[derive(Debug, Clone)]
pub struct Status {
    pub at: DateTime<Utc>,
    pub schedulers: Vec<SchedulerRecord>,
    pub summary: RegistrySummary,
    pub kill: Option<Switch>,
    /// (schedule, reason).
    pub paused: Vec<(String, Option<String>)>,
    /// (schedule, state, since, consecutive failures).
    pub circuits: Vec<(String, CircuitState, Option<DateTime<Utc>>, u32)>,
    pub counts: Vec<(RunState, u64)>,
    pub oldest_approval: Option<Oldest>,
    pub backfill_pending: u64,
    pub schedules: Vec<ScheduleStatus>,
    /// The config version the database runs (number, hash) and the newest
    /// one waiting for `approve-config`, if any (issue 18).
    pub config: Option<(i64, String)>,
    pub config_waiting: Option<i64>,
}

impl Status {
    /// At least one scheduler alive and the kill switch off: exit 0.
    pub fn ok(&self) -> bool {
        self.summary.alive > 0 && !self.kill_on()
    }

    pub fn kill_on(&self) -> bool {
        self.kill.as_ref().is_some_and(|k| k.on)
    }

    pub fn count(&self, state: RunState) -> u64 {
        self.counts
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n)
    }

    /// Windows due since the last scheduler was seen, over all schedules.
    pub fn windows_due_since(&self) -> usize {
        self.schedules
            .iter()
            .filter_map(|s| s.overdue.as_ref())
            .map(|o| o.windows)
            .sum()
    }

    /// [`Status::to_json`] with whether the config file on disk loads
    /// (`config_file_invalid`) and its first problem (`config_file_error`,
    /// lines and columns, no path): `status --json` and `/api/v1/status`.
    pub fn to_json_with_file(&self, file_error: Option<String>) -> Value {
        let mut v = self.to_json();
        if let Some(obj) = v.as_object_mut() {
            obj.insert("config_file_invalid".into(), Value::Bool(file_error.is_some()));
            obj.insert("config_file_error".into(), file_error.into());
        }
        v
    }

    /// The `status --json` shape (docs/CLI.md, `status`).
    pub fn to_json(&self) -> Value {
        let t = |x: Option<DateTime<Utc>>| x.map(rfc3339);
        let schedulers: Vec<Value> = self
            .schedulers
            .iter()
            .map(|r| {
                json!({
                    "owner": r.owner,
                    "host": r.host,
                    "pid": r.pid,
                    "version": r.version,
                    "config_hash": r.config_hash,
                    "state": r.liveness(self.at).as_str(),
                    "started_at": rfc3339(r.started_at),
                    "last_seen": rfc3339(r.last_seen),
                    "alive_for_ms": r.alive_for().num_milliseconds(),
                    "stopped_at": t(r.stopped_at),
                    "lost_at": t(r.lost_at),
                    "lost_by": r.lost_by,
                })
            })
            .collect();
        let runs: serde_json::Map<String, Value> = self
            .counts
            .iter()
            .map(|(s, n)| (s.as_str().to_string(), json!(n)))
            .collect();
        json!({
            "ok": self.ok(),
            "at": rfc3339(self.at),
            "schedulers": {
                "alive": self.summary.alive,
                "stopped": self.summary.stopped,
                "lost": self.summary.lost,
                "last_seen": t(self.summary.last_seen),
                "list": schedulers,
            },
            "no_scheduler_alive": (self.summary.alive == 0).then(|| json!({
                "last_seen": t(self.summary.last_seen),
                "windows_due_since": self.windows_due_since(),
            })),
            "kill_switch": {
                "on": self.kill_on(),
                "by": self.kill.as_ref().filter(|k| k.on).map(|k| k.actor.clone()),
                "reason": self.kill.as_ref().filter(|k| k.on).map(|k| k.reason.clone()),
                "since": self.kill.as_ref().filter(|k| k.on).map(|k| rfc3339(k.at)),
            },
            "paused": self.paused.iter().map(|(s, r)| json!({"schedule": s, "reason": r})).collect::<Vec<_>>(),
            "open_circuits": self.circuits.iter().map(|(s, st, since, n)| json!({
                "schedule": s, "state": st.as_str(), "since": t(*since), "consecutive_failures": n,
            })).collect::<Vec<_>>(),
            "runs": runs,
            "approvals_waiting": {
                "count": self.count(RunState::NeedsHuman),
                "oldest": self.oldest_approval.as_ref().map(|(id, s, since)| json!({
                    "run": id, "schedule": s, "since": rfc3339(*since),
                })),
            },
            "dead_letters": self.count(RunState::Dead),
            "backfill_pending": self.backfill_pending,
            "schedules": self.schedules.iter().map(schedule_json).collect::<Vec<_>>(),
            "config": {
                "version": self.config.as_ref().map(|c| c.0),
                "hash": self.config.as_ref().map(|c| c.1.clone()),
                "waiting_approval": self.config_waiting,
                "schedulers_on_older": self.on_older_config(),
            },
        })
    }

    /// Live schedulers whose config is not the one the database runs.
    pub fn on_older_config(&self) -> Vec<String> {
        let Some((_, hash)) = &self.config else {
            return vec![];
        };
        self.schedulers
            .iter()
            .filter(|r| r.liveness(self.at) == Liveness::Alive && &r.config_hash != hash)
            .map(|r| r.owner.clone())
            .collect()
    }
}

/// One schedule as `status --json` and `GET /api/v1/schedules` show it.
pub fn schedule_json(s: &ScheduleStatus) -> Value {
    json!({
        "id": s.id,
        "tenant": s.tenant,
        "next_fire": s.next_fire.as_ref().map(|f| rfc3339(f.at)),
        "next_window_key": s.next_fire.as_ref().map(|f| f.window_key.clone()),
        "overdue": s.overdue.as_ref().map(|o| json!({
            "due": rfc3339(o.due), "window_key": o.window_key, "windows": o.windows,
        })),
        "paused": s.paused,
        "circuit": s.circuit.as_str(),
        "last_success": s.last_success.map(rfc3339),
    })
}

/// The next fire of `s` after `now` (after its last start plus the interval
/// for `anchor = "last_start"`), or `None` for event triggers.
pub fn next_fire(
    cfg: &Config,
    s: &ScheduleConfig,
    last_start: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<Fire> {
    let calendar = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
    let rule = s.fire_rule(calendar)?;
    let after = match &s.trigger {
        TriggerConfig::Every {
            anchor: Anchor::LastStart,
            ..
        } => last_start.unwrap_or(now),
        _ => now,
    };
    rule.next_after(after)
}

/// The fires of `s` after `evaluated` up to `now`: due, and nobody evaluated
/// them (asked only when no scheduler is alive).
pub fn overdue(
    cfg: &Config,
    s: &ScheduleConfig,
    evaluated: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    cap: usize,
) -> Option<Overdue> {
    let evaluated = evaluated?;
    let calendar = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
    let rule = s.fire_rule(calendar)?;
    let mut fires = rule.fires_after(evaluated).take_while(|f| f.at <= now);
    let first = fires.next()?;
    Some(Overdue {
        due: first.at,
        window_key: first.window_key,
        windows: 1 + fires.take(cap.saturating_sub(1)).count(),
    })
}

/// The registry rows and their summary at `now`.
pub fn registry(
    tx: &dyn crate::store::read::LedgerRead,
    now: DateTime<Utc>,
) -> StoreResult<(Vec<SchedulerRecord>, RegistrySummary)> {
    let rows = tx.schedulers()?;
    let summary = summarize(&rows, now);
    Ok((rows, summary))
}

/// Every schedule of the config with its next fire, and (no scheduler alive)
/// its overdue windows.
pub fn schedules(
    tx: &dyn crate::store::read::LedgerRead,
    cfg: &Config,
    none_alive: bool,
    now: DateTime<Utc>,
) -> StoreResult<Vec<ScheduleStatus>> {
    let states: HashMap<String, crate::store::ScheduleState> = tx
        .all_schedule_states()?
        .into_iter()
        .map(|s| (s.schedule.clone(), s))
        .collect();
    Ok(cfg
        .schedules
        .iter()
        .map(|s| {
            let st = states.get(&s.id);
            ScheduleStatus {
                id: s.id.clone(),
                tenant: s.tenant.clone(),
                next_fire: next_fire(cfg, s, st.and_then(|st| st.last_start), now),
                overdue: if none_alive {
                    overdue(cfg, s, st.and_then(|st| st.last_evaluated), now, MAX_COUNTED)
                } else {
                    None
                },
                paused: st.is_some_and(|st| st.paused),
                circuit: st.map_or(CircuitState::Closed, |st| st.circuit),
                last_success: st.and_then(|st| st.last_success),
            }
        })
        .collect())
}

/// The status at `now`; without a config, no schedules are listed.
pub fn status(
    tx: &dyn crate::store::read::LedgerRead,
    cfg: Option<&Config>,
    now: DateTime<Utc>,
) -> StoreResult<Status> {
    let (schedulers, summary) = registry(tx, now)?;
    let states = tx.all_schedule_states()?;
    let schedules = match cfg {
        Some(cfg) => schedules(tx, cfg, summary.alive == 0, now)?,
        None => vec![],
    };
    let config = tx.current_config()?.map(|c| (c.version, c.hash));
    let config_waiting = tx
        .config_versions()?
        .into_iter()
        .rev()
        .find(|v| v.status == crate::store::ConfigStatus::Waiting)
        .map(|v| v.version);
    Ok(Status {
        config,
        config_waiting,
        at: now,
        kill: tx.switch("kill")?,
        paused: states
            .iter()
            .filter(|s| s.paused)
            .map(|s| (s.schedule.clone(), s.paused_reason.clone()))
            .collect(),
        circuits: states
            .iter()
            .filter(|s| s.circuit != CircuitState::Closed)
            .map(|s| {
                (
                    s.schedule.clone(),
                    s.circuit,
                    s.circuit_changed_at,
                    s.consecutive_failures,
                )
            })
            .collect(),
        counts: tx.count_by_state()?,
        oldest_approval: tx.oldest_in_state(RunState::NeedsHuman)?,
        backfill_pending: tx.backfill_pending()?,
        schedulers,
        summary,
        schedules,
    })
}
