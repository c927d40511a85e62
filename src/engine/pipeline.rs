//! The decision pipeline in the loop: for every due run, time → switches →
//! gates in declared order, then claim, wait, skip, fail, park or miss.

use super::decision::{Decision, HoldKind, SwitchCheck, Verdict};
use super::{CancelCause, Engine, Result};
use crate::config::model::{Catchup, Overlap};
use crate::core::layers::switches::{self, MaintenanceWindow, SwitchFacts, SwitchOutcome};
use crate::core::plan::{Effect, Plan};
use crate::core::planner::{self, Facts, Input, Policy};
use crate::gates::{GateContext, GateResult};
use crate::store::Applied;
use crate::store::types::*;
use crate::time::duration::to_delta;
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// Facts about layer 3 gathered once per tick; each run's
/// [`SwitchFacts`] is read from them (plus the few per-run lookups).
pub(crate) struct TickFacts {
    kill: Option<Switch>,
    states: HashMap<String, ScheduleState>,
    /// Maintenance windows holding runs now.
    maintenance: Vec<MaintenanceWindow>,
    /// Running runs per schedule and per tenant, counted up as this tick claims.
    by_schedule: HashMap<String, u32>,
    by_tenant: HashMap<String, u32>,
}

impl TickFacts {
    /// A run claimed in this tick counts against the quotas at once.
    fn count_claim(&mut self, run: &Run) {
        *self.by_schedule.entry(run.schedule.clone()).or_insert(0) += 1;
        *self.by_tenant.entry(run.tenant.clone()).or_insert(0) += 1;
    }
}

impl Engine {
    pub(crate) fn evaluate_due_runs(&mut self, now: DateTime<Utc>) -> Result<()> {
        // Catch-up runs are read only as far as the backfill pool has room: a
        // backlog of thousands waits in the store, untouched, instead of being
        // re-decided (and re-held as "pool full") on every tick.
        let backfill_room = self.pool_room(Pool::Backfill);
        let mut due = self.store.read(|tx| {
            let mut due = tx.due_runs_in_pool(Pool::OnTime, now, 5000)?;
            if backfill_room > 0 {
                due.extend(tx.due_runs_in_pool(Pool::Backfill, now, 4 * backfill_room + 16)?);
            }
            Ok(due)
        })?;
        if due.is_empty() {
            return Ok(());
        }
        // On-time runs first (catch-up never delays them), then catch-up oldest first.
        due.sort_by(|a, b| match (a.pool, b.pool) {
            (Pool::OnTime, Pool::Backfill) => std::cmp::Ordering::Less,
            (Pool::Backfill, Pool::OnTime) => std::cmp::Ordering::Greater,
            (Pool::OnTime, Pool::OnTime) => (a.next_check_at, a.id).cmp(&(b.next_check_at, b.id)),
            (Pool::Backfill, Pool::Backfill) => (a.window_start, a.id).cmp(&(b.window_start, b.id)),
        });
        let mut facts = self.tick_facts(now)?;
        // Runs whose gates stay inside agentcron are decided and claimed in one
        // transaction; a run with a gate that does IO (a command, HTTP, another
        // database) is decided outside any batch, so no lock is held while it waits.
        let store = self.store.clone();
        let mut due = due.into_iter().peekable();
        while due.peek().is_some() {
            let needs_io = |e: &Engine, r: &Run| {
                e.index.get(&r.schedule).is_some_and(|&idx| {
                    e.gates[idx]
                        .iter()
                        .any(|g| !matches!(g.kind(), "previous_run_finished" | "calendar" | "simulated"))
                })
            };
            if due.peek().is_some_and(|r| needs_io(self, r)) {
                if let Some(run) = due.next()
                    && let Some(&idx) = self.index.get(&run.schedule)
                {
                    self.evaluate_run(idx, run, now, &mut facts)?;
                }
            } else {
                store.batch(|| {
                    while let Some(run) = due.next_if(|r| !needs_io(self, r)) {
                        // A run of a schedule no longer in the config is left alone.
                        if let Some(&idx) = self.index.get(&run.schedule) {
                            self.evaluate_run(idx, run, now, &mut facts)?;
                        }
                    }
                    Ok::<(), super::EngineError>(())
                })?;
            }
            self.start_pending();
        }
        Ok(())
    }

    /// (attempts of `pool` running or about to start in this process, its size).
    pub(crate) fn pool_use(&self, pool: Pool) -> (usize, usize) {
        let size = match pool {
            Pool::OnTime => self.cfg.scheduler.workers,
            Pool::Backfill => self.cfg.scheduler.backfill_workers,
        };
        let used = self
            .running
            .values()
            .chain(self.pending_starts.iter().map(|(_, r)| r))
            .filter(|r| r.pool == pool)
            .count();
        (used, size)
    }

    /// Free places in `pool` in this process.
    pub(crate) fn pool_room(&self, pool: Pool) -> usize {
        let (used, size) = self.pool_use(pool);
        size.saturating_sub(used)
    }

    fn tick_facts(&self, now: DateTime<Utc>) -> Result<TickFacts> {
        let (kill, states, adhoc, running) = self.store.read(|tx| {
            let kill = tx.switch("kill")?.filter(|s| s.on);
            let states = tx.all_schedule_states()?;
            let adhoc = tx.maintenance_at(now)?;
            // One pass over the running runs for the whole tick, not one count
            // query per schedule (each of which walked every running run).
            let running = tx.running_counts()?;
            Ok((kill, states, adhoc, running))
        })?;
        let mut maintenance = switches::maintenance_windows(&self.cfg.maintenance, &adhoc, now);
        maintenance.retain(|m| m.active);
        let mut facts = TickFacts {
            kill,
            states: states.into_iter().map(|s| (s.schedule.clone(), s)).collect(),
            maintenance,
            by_schedule: HashMap::new(),
            by_tenant: HashMap::new(),
        };
        for ((tenant, schedule), n) in running {
            *facts.by_schedule.entry(schedule).or_insert(0) += n;
            *facts.by_tenant.entry(tenant).or_insert(0) += n;
        }
        Ok(facts)
    }

    fn evaluate_run(
        &mut self,
        idx: usize,
        run: Run,
        now: DateTime<Utc>,
        facts: &mut TickFacts,
    ) -> Result<()> {
        let s = self.schedule(idx).clone();
        // A retry is durable backoff: it is not due before `not_before`, even if
        // something brought its check forward (resume, unkill and slot wake-ups
        // move `next_check_at` only). Look again when it is due.
        if run.state == RunState::RetryWait
            && let Some(not_before) = run.not_before
            && now < not_before
        {
            self.store
                .write(|tx| tx.set_next_check(run.id, not_before, None))?;
            return Ok(());
        }
        // Layer 1: is the window still open (or the retry due)?
        let local = |t: DateTime<Utc>| t.with_timezone(&s.timezone).format("%Y-%m-%d %H:%M").to_string();
        let (time, deadline) = match (run.state, run.reason) {
            (RunState::RetryWait, _) => (
                format!(
                    "retry after attempt {}: not before {} reached",
                    run.attempts,
                    run.not_before.map(local).unwrap_or_default()
                ),
                None,
            ),
            (_, RunReason::Manual) => {
                // An operator asked for it: it may wait on its gates for a catch-up
                // window counted from the request, whatever its window's age.
                let exp = run.created_at + to_delta(s.catchup_window);
                (
                    format!("manual run of window {}; gives up {}", run.window_key, local(exp)),
                    Some((exp, Verdict::Expired)),
                )
            }
            (_, RunReason::Catchup) => {
                let exp = run.window_start + to_delta(s.catchup_window);
                (
                    format!("catch-up of window {}; expires {}", run.window_key, local(exp)),
                    Some((exp, Verdict::Expired)),
                )
            }
            _ => (
                format!(
                    "window {} open {} – {} ({})",
                    run.window_key,
                    local(run.window_start),
                    local(run.window_end),
                    s.timezone.name()
                ),
                Some((run.window_end, Verdict::Missed)),
            ),
        };
        let buffered = run.hold == Some(HoldKind::Overlap)
            && matches!(s.overlap, Overlap::BufferOne | Overlap::BufferAll);
        if let Some((end, verdict)) = deadline
            && now >= end
            && !buffered
        {
            let reason = match verdict {
                Verdict::Expired => format!("catch-up window of {} ended at {}", run.window_key, local(end)),
                _ => format!(
                    "window closed at {} before the run could start{}",
                    local(end),
                    run.state_reason
                        .as_ref()
                        .map(|r| format!(" (last hold: {r})"))
                        .unwrap_or_default()
                ),
            };
            let d = Decision::by_time(time, verdict, reason);
            return self.apply(idx, &run, d, false, now);
        }
        // Layer 3: switches (cheap, local) before any gate touches the outside world.
        let sw = self.check_switches(idx, &run, now, facts)?;
        if let Some(d) = Decision::with_switches(&time, &sw.checks) {
            return self.apply(idx, &run, d, false, now);
        }
        // Layer 2: gates in declared order, stopping at the first that does not pass.
        let switches: Vec<SwitchCheck> = sw.checks.into_iter().map(|(c, _)| c).collect();
        let gates = self.run_gates(idx, &run, now)?;
        let d = Decision::from_gates(time, switches, gates);
        if d.verdict == Verdict::Claim {
            facts.count_claim(&run);
        }
        self.apply(idx, &run, d, sw.probe, now)?;
        if sw.probe {
            // The schedule states are a snapshot taken once per tick: without a
            // fresh read, every other new window due in this tick would still see
            // an open circuit past its cool-down and go out as a second probe.
            let st = self.store.read(|tx| tx.schedule_state(&s.id))?;
            facts.states.insert(s.id.clone(), st);
        }
        Ok(())
    }

    /// Layer 3: gathers the run's switch facts and asks the core. An
    /// `overlap = "cancel_previous"` hold stops the schedule's attempts this
    /// process runs.
    fn check_switches(
        &mut self,
        idx: usize,
        run: &Run,
        now: DateTime<Utc>,
        facts: &TickFacts,
    ) -> Result<SwitchOutcome> {
        let s = self.schedule(idx).clone();
        let default_state = ScheduleState::new(&s.id);
        let state = facts.states.get(&s.id).unwrap_or(&default_state);
        let running = facts.by_schedule.get(&s.id).copied().unwrap_or(0);
        let maintenance = facts
            .maintenance
            .iter()
            .find(|m| m.applies_to(&s.id))
            .map(MaintenanceWindow::hold_reason);
        let spent_today = match s.budget.max_cost_per_day {
            Some(_) => {
                let (from, to) = switches::local_day(now, s.timezone);
                Some(
                    self.store
                        .read(|tx| tx.schedule_cost_between(&s.tenant, &s.id, from, to))?,
                )
            }
            None => None,
        };
        let overlaps = running > 0 && s.overlap != Overlap::Allow;
        let running_window = if overlaps {
            Some(self.running_window_of(idx)?)
        } else {
            None
        };
        let first_buffered = if overlaps && s.overlap == Overlap::BufferOne {
            self.store
                .read(|tx| tx.buffered_runs(&s.tenant, &s.id))?
                .first()
                .copied()
        } else {
            None
        };
        let (pool_used, pool_size) = self.pool_use(run.pool);
        let switch_facts = SwitchFacts {
            kill: facts.kill.as_ref(),
            state,
            maintenance: maintenance.as_deref(),
            spent_today,
            running,
            running_window,
            tenant_running: facts.by_tenant.get(&s.tenant).copied().unwrap_or(0),
            tenant_max: self.cfg.tenants.get(&s.tenant).and_then(|t| t.max_concurrent),
            first_buffered,
            pool_used,
            pool_size,
        };
        let outcome = switches::check(run, &s, &switch_facts, now);
        if outcome.cancel_running {
            let others = self.store.read(|tx| tx.running_runs(Some(&s.id)))?;
            for r in &others {
                if let Some(mine) = self.running.get_mut(&r.id)
                    && mine.cancel.is_none()
                {
                    mine.cancel = Some(CancelCause::Superseded(run.window_key.clone()));
                    mine.handle.cancel();
                }
            }
        }
        Ok(outcome)
    }

    fn run_gates(&self, idx: usize, run: &Run, now: DateTime<Utc>) -> Result<Vec<GateResult>> {
        let s = self.schedule(idx);
        let gates = &self.gates[idx];
        if gates.is_empty() {
            return Ok(vec![]);
        }
        let previous = self
            .store
            .read(|tx| tx.previous_run(&run.tenant, &run.schedule, run.window_start))?;
        let mut out = vec![];
        for (i, gate) in gates.iter().enumerate() {
            let cfg = s.gates.get(i);
            let ctx = GateContext {
                tenant: &run.tenant,
                schedule: s,
                window_key: &run.window_key,
                window_start: run.window_start,
                window_end: run.window_end,
                now,
                previous_run: previous.as_ref(),
                calendars: &self.cfg.calendars,
                timeout: cfg.map_or(std::time::Duration::from_secs(30), |g| g.timeout),
            };
            let on_fail = cfg.map(|g| g.on_fail).unwrap_or_default();
            let r = crate::gates::evaluate(gate.as_ref(), on_fail, &ctx);
            let pass = r.verdict == crate::gates::GateVerdict::Pass;
            out.push(r);
            if !pass {
                break;
            }
        }
        Ok(out)
    }

    /// Plans a decision with the core and applies it: the plan's events,
    /// the run's step and the schedule delta in one write, then its effects.
    fn apply(&mut self, idx: usize, run: &Run, d: Decision, probe: bool, now: DateTime<Utc>) -> Result<()> {
        let s = self.schedule(idx).clone();
        let mut facts = Facts::default();
        if d.verdict == Verdict::Claim && run.state == RunState::RetryWait {
            facts.uncertain_steps = self.store.read(|tx| tx.uncertain_steps(run.id))?;
        }
        if d.verdict == Verdict::Missed && s.catchup == Catchup::Latest {
            facts.newer_run = self
                .store
                .read(|tx| tx.has_newer_run(&run.tenant, &run.schedule, run.window_start))?;
        }
        let hold = d.hold();
        let input = Input::Decided {
            decision: d,
            probe,
            lease: (self.opts.owner.clone(), now + self.lease()),
        };
        let plan = planner::plan(run, input, &self.policy(idx), &facts, now);
        if hold == Some(HoldKind::Quota) {
            // A freed slot must now also look for quota-held runs.
            self.quota_holds.set(true);
        }
        self.apply_plan(idx, &plan, now)?;
        Ok(())
    }

    /// The configuration the core plans schedule `idx` by.
    pub(crate) fn policy(&self, idx: usize) -> Policy<'_> {
        let schedule = self.schedule(idx);
        Policy {
            schedule,
            agent: self.cfg.agents.get(&schedule.agent),
        }
    }

    /// Applies a plan in one write and performs its effects; `None` when the
    /// run had moved on (the effects are dropped: no alert, no count, no
    /// wake-up from a race this scheduler lost).
    pub(crate) fn apply_plan(
        &mut self,
        idx: usize,
        plan: &Plan,
        now: DateTime<Utc>,
    ) -> Result<Option<Applied>> {
        if plan.is_empty() {
            return Ok(None);
        }
        let applied = self.store.write(|tx| tx.apply(plan, now))?;
        let Applied::Done { claim, effects, .. } = &applied else {
            return Ok(None);
        };
        let mut claim = claim.clone();
        for effect in effects.clone() {
            match effect {
                Effect::Dispatch => {
                    if let Some(c) = claim.take() {
                        self.dispatch(idx, *c, now)?;
                    }
                }
                Effect::Alert(a) => self.send_alert(&a, now),
                Effect::WakeHeld { schedule, .. } => self.wake_held(&schedule, now)?,
                Effect::RecheckAll { schedule } => {
                    self.store.write(|tx| tx.recheck_all(schedule.as_deref(), now))?;
                }
                Effect::ApprovalDeadline(at) => {
                    self.next_ttl_deadline = Some(self.next_ttl_deadline.map_or(at, |d| d.min(at)));
                }
            }
        }
        Ok(Some(applied))
    }

    fn running_window_of(&self, idx: usize) -> Result<String> {
        let ours = self
            .running
            .values()
            .filter(|r| r.schedule == idx)
            .min_by_key(|r| r.run_id)
            .map(|r| r.run_id);
        if let Some(id) = ours
            && let Some(run) = self.store.read(|tx| tx.try_run(id))?
        {
            return Ok(run.window_key);
        }
        let s = self.schedule(idx);
        let others = self.store.read(|tx| tx.running_runs(Some(&s.id)))?;
        Ok(others.first().map(|r| r.window_key.clone()).unwrap_or_default())
    }
}
