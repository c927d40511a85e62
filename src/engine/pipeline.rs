//! The decision pipeline in the loop: for every due run, time → switches →
//! gates in declared order, then claim, wait, skip, fail, park or miss.

use super::decision::{Decision, HoldKind, SwitchCheck, SwitchName, Verdict};
use super::{CancelCause, Engine, Result};
use crate::config::model::{Catchup, Overlap};
use crate::core::layers::switches::{self, MaintenanceWindow, SwitchFacts, SwitchOutcome};
use crate::core::layers::time::{self, TimeLayer};
use crate::core::plan::{Effect, Plan};
use crate::core::planner::{self, Facts, Input, Policy};
use crate::gates::GateResult;
use crate::store::Applied;
use crate::store::types::*;
use chrono::{DateTime, Utc};
use std::collections::HashSet;

/// Due runs decided and claimed per transaction: small enough that the
/// first agents start a few milliseconds into a tick of thousands, large
/// enough that a commit's page writes are shared by many claims.
pub(crate) const CLAIM_CHUNK: usize = 256;

/// A window a tick opened, due now, for [`Engine::decide_fresh`].
// Unboxed: a chunk holds at most CLAIM_CHUNK of them for a moment, and a box
// would be one more allocation per window on the hot path.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Fresh {
    /// Its pending run, inserted.
    Opened(Run),
    /// Not inserted yet: `new` opened at `at` (its `opened` event), and
    /// `run`, the row its insert would write (id 0): inserted already claimed
    /// if it is claimed at once, else pending.
    Unopened {
        new: NewRun,
        opened: crate::core::event::Event,
        run: Run,
        at: DateTime<Utc>,
    },
}

impl Fresh {
    /// `new`, opened now and left unopened for the tick to decide before
    /// its row exists, if it is due now; else `new` back, to be inserted.
    // Unboxed, as `Fresh` itself: a box would be an allocation per window.
    #[allow(clippy::result_large_err)]
    pub(crate) fn unopened(
        new: NewRun,
        note: Option<crate::time::fire::FireNote>,
        now: DateTime<Utc>,
    ) -> std::result::Result<Fresh, NewRun> {
        let run = crate::store::opened_run(&new, 0, now);
        if run.next_check_at.is_none_or(|t| t > now) {
            return Err(new);
        }
        let opened = time::opened_event(&run, note, crate::core::event::Opener::default());
        Ok(Fresh::Unopened {
            new,
            opened,
            run,
            at: now,
        })
    }

    /// The run decided: as inserted, or as it would be.
    pub(crate) fn run(&self) -> &Run {
        match self {
            Fresh::Opened(run) | Fresh::Unopened { run, .. } => run,
        }
    }
}

/// Facts about layer 3 gathered once per tick; each run's
/// [`SwitchFacts`] is read from them (plus the few per-run lookups).
pub(crate) struct TickFacts {
    kill: Option<Switch>,
    states: crate::store::FastMap<String, ScheduleState>,
    /// Maintenance windows holding runs now.
    maintenance: Vec<MaintenanceWindow>,
}

/// A run the time and switch layers let through, waiting for its gates.
#[derive(Debug, Clone)]
pub(crate) struct Gated {
    pub time: String,
    pub switches: Vec<SwitchCheck>,
    pub probe: bool,
}

impl Engine {
    /// Decides the on-time runs a tick just opened, in the transaction that
    /// opened them (see [`Engine::tick`]): their claims commit with their
    /// windows, a chunk at a time, without reading them back. Runs whose gates
    /// do IO are left to [`Engine::evaluate_due_runs`]; `decided` collects
    /// the ids decided here, which it then leaves alone.
    pub(crate) fn decide_fresh(
        &mut self,
        mut fresh: Vec<Fresh>,
        now: DateTime<Utc>,
        decided: &mut HashSet<i64>,
    ) -> Result<()> {
        fresh.retain(|f| {
            self.index
                .get(&f.run().schedule)
                .is_some_and(|&idx| !self.gates_do_io(idx))
        });
        if fresh.is_empty() {
            return Ok(());
        }
        // Stable: windows due at one instant keep the order they opened in
        // (the order of their ids).
        fresh.sort_by_key(|f| f.run().next_check_at);
        let mut facts = self.tick_facts(now, fresh.iter().map(|f| f.run().schedule.as_str()))?;
        let now = self.clock.now().max(now);
        for f in fresh {
            match f {
                Fresh::Opened(run) => {
                    decided.insert(run.id);
                    if let Some(&idx) = self.index.get(&run.schedule) {
                        self.evaluate_run(idx, run, now, &mut facts)?;
                    }
                }
                Fresh::Unopened { new, opened, run, at } => {
                    if let Some(&idx) = self.index.get(&run.schedule) {
                        self.decide_unopened(idx, (new, opened, at), run, now, &mut facts, decided)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Decides the backlog windows a tick gave places to and left unopened
    /// ([`Engine::queue_backlogs`]), after the on-time windows it opened:
    /// as [`Engine::decide_fresh`] does, unless an on-time run is due now
    /// all the same (opened for a posted event, woken by the zombie sweep,
    /// left to its gates): catch-up never goes before one, so they are then
    /// opened pending, for [`Engine::evaluate_due_runs`] to decide after it.
    pub(crate) fn decide_fresh_catch_up(
        &mut self,
        catch_up: Vec<Fresh>,
        now: DateTime<Utc>,
        decided: &mut HashSet<i64>,
    ) -> Result<()> {
        if catch_up.is_empty() {
            return Ok(());
        }
        let on_time_due = self
            .store
            .read(|tx| tx.next_due_check_in_pool(Pool::OnTime))?
            .is_some_and(|t| t <= now);
        if !on_time_due {
            return self.decide_fresh(catch_up, now, decided);
        }
        let lost = self.store.write(|tx| {
            let mut lost = false;
            for f in catch_up {
                if let Fresh::Unopened { new, opened, at, .. } = f {
                    lost |= open_pending(tx, &new, opened, at)?.is_none();
                }
            }
            Ok(lost)
        })?;
        if lost {
            self.backfill_freed(None, now);
        }
        Ok(())
    }

    /// A window not opened yet ([`Fresh::Unopened`]), decided on `run`, the
    /// row its insert would write: claimed at once, it is inserted already
    /// claimed ([`Tx::open_claimed`](crate::store::Tx::open_claimed)), with
    /// the same rows and events as an insert and a claim. Any other decision
    /// opens it pending and decides it as any due run.
    fn decide_unopened(
        &mut self,
        idx: usize,
        (new, opened, opened_at): (NewRun, crate::core::event::Event, DateTime<Utc>),
        run: Run,
        now: DateTime<Utc>,
        facts: &mut TickFacts,
        decided: &mut HashSet<i64>,
    ) -> Result<()> {
        if let Some(d) = self.claims_at_once(idx, &run, now, facts)? {
            let input = Input::Decided {
                decision: d,
                probe: false,
                lease: (self.opts.owner.clone(), now + self.lease()),
            };
            let plan = planner::plan(&run, input, &self.policy(idx), &Facts::default(), now);
            if crate::store::opens_claimed(&plan) {
                let pool = run.pool;
                let applied = self
                    .store
                    .write(|tx| tx.open_claimed_as(&new, run, opened, opened_at, plan, now))?;
                if pool == Pool::Backfill && matches!(applied, Applied::Conflict { .. }) {
                    // Another scheduler queued this backlog window first: the
                    // place it was given is offered again.
                    self.backfill_freed(None, now);
                }
                self.perform(idx, applied, now)?;
                return Ok(());
            }
        }
        let inserted = self.store.write(|tx| open_pending(tx, &new, opened, opened_at))?;
        match inserted {
            Some(run) => {
                decided.insert(run.id);
                self.evaluate_run(idx, run, now, facts)?;
            }
            // A backlog window another scheduler queued first: its place
            // is offered again.
            None if run.pool == Pool::Backfill => self.backfill_freed(None, now),
            None => {}
        }
        Ok(())
    }

    /// The claim decided for `run` when all three layers let it through at
    /// once (its schedule has no gates); `None` for any other decision, and
    /// without deciding where deciding acts (an overlap rule with runs of the
    /// schedule running) or reads the state again (a circuit's probe).
    fn claims_at_once(
        &mut self,
        idx: usize,
        run: &Run,
        now: DateTime<Utc>,
        facts: &TickFacts,
    ) -> Result<Option<Decision>> {
        let s = self.schedule(idx);
        if s.overlap != Overlap::Allow && self.running_counts()?.of_schedule(&s.id) > 0 {
            return Ok(None);
        }
        let TimeLayer::Open(time) = time::check(run, s, now) else {
            return Ok(None);
        };
        let sw = self.check_switches(idx, run, now, facts)?;
        if sw.probe || sw.cancel_running || Decision::with_switches(&time, &sw.checks).is_some() {
            return Ok(None);
        }
        let switches = sw.checks.into_iter().map(|(c, _)| c).collect();
        let d = Decision::from_gates(time, switches, vec![]);
        Ok((d.verdict == Verdict::Claim).then_some(d))
    }

    /// Decides every due run but those in `decided` (decided earlier in this
    /// tick by [`Engine::decide_fresh`]).
    pub(crate) fn evaluate_due_runs(&mut self, now: DateTime<Utc>, decided: &HashSet<i64>) -> Result<()> {
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
        if !decided.is_empty() {
            due.retain(|r| !decided.contains(&r.id));
        }
        if due.is_empty() {
            return self.collect_gates(std::time::Duration::ZERO);
        }
        // On-time runs first (catch-up never delays them), then catch-up oldest first.
        due.sort_by(|a, b| match (a.pool, b.pool) {
            (Pool::OnTime, Pool::Backfill) => std::cmp::Ordering::Less,
            (Pool::Backfill, Pool::OnTime) => std::cmp::Ordering::Greater,
            (Pool::OnTime, Pool::OnTime) => (a.next_check_at, a.id).cmp(&(b.next_check_at, b.id)),
            (Pool::Backfill, Pool::Backfill) => (a.window_start, a.id).cmp(&(b.window_start, b.id)),
        });
        let mut facts = self.tick_facts(now, due.iter().map(|r| r.schedule.as_str()))?;
        // Runs whose gates stay inside agentcron are decided and claimed in one
        // transaction; a run with a gate that does IO (a command, HTTP, another
        // database) has its time and switches decided here and its gates
        // checked on the gate pool (engine::gating), never on this thread.
        let store = self.store.clone();
        let mut due = due.into_iter().peekable();
        while due.peek().is_some() {
            let needs_io =
                |e: &Engine, r: &Run| e.index.get(&r.schedule).is_some_and(|&idx| e.gates_do_io(idx));
            if due.peek().is_some_and(|r| needs_io(self, r)) {
                if let Some(run) = due.next()
                    && let Some(&idx) = self.index.get(&run.schedule)
                    && !self.gates_in_flight(run.id)
                    && self.before_gates(idx, &run, now, &mut facts)?.is_some()
                {
                    self.submit_gates(idx, run, now)?;
                }
            } else {
                // Decided and claimed a chunk per transaction, each chunk's
                // agents started right after its commit: the first agents
                // start while later chunks are still being decided. The
                // chunk is decided at the clock's instant (a tick of 10,000
                // due runs takes a while), so its claims are stamped within
                // one chunk of their commit.
                let now = self.clock.now().max(now);
                let mut n = 0;
                store
                    .batch(|| {
                        while n < CLAIM_CHUNK
                            && let Some(run) = due.next_if(|r| !needs_io(self, r))
                        {
                            n += 1;
                            // A run of a schedule no longer in the config is left alone.
                            if let Some(&idx) = self.index.get(&run.schedule) {
                                self.evaluate_run(idx, run, now, &mut facts)?;
                            }
                        }
                        Ok::<(), super::EngineError>(())
                    })
                    .inspect_err(|_| {
                        // Rolled back: its claims never happened.
                        self.pending_starts.clear();
                    })?;
            }
            self.start_pending();
        }
        self.collect_gates(self.gate_phase())
    }

    /// How long a tick waits for IO gates before it moves on (a third of the
    /// lease: slow gates never hold up the loop for long, and leases are
    /// renewed while it waits).
    pub(crate) fn gate_phase(&self) -> std::time::Duration {
        (self.lease() / 3).to_std().unwrap_or_default()
    }

    /// (attempts of `pool` running or about to start in this process, its size).
    pub(crate) fn pool_use(&self, pool: Pool) -> (usize, usize) {
        let size = match pool {
            Pool::OnTime => self.cfg.scheduler.workers,
            Pool::Backfill => self.cfg.scheduler.backfill_workers,
        };
        let used = self.running.in_pool(pool)
            + self
                .pending_starts
                .iter()
                .filter(|(_, r, _)| r.pool == pool)
                .count();
        (used, size)
    }

    /// Free places in `pool` in this process.
    pub(crate) fn pool_room(&self, pool: Pool) -> usize {
        let (used, size) = self.pool_use(pool);
        size.saturating_sub(used)
    }

    /// The tick's facts: the kill switch, maintenance, running counts, and
    /// the states of `schedules` (those of the runs to decide) only, which
    /// the engine's model keeps between ticks while no one else writes them.
    pub(crate) fn tick_facts<'a>(
        &self,
        now: DateTime<Utc>,
        schedules: impl IntoIterator<Item = &'a str>,
    ) -> Result<TickFacts> {
        let mut wanted: Vec<&str> = schedules.into_iter().collect();
        wanted.sort_unstable();
        wanted.dedup();
        let (kill, states, adhoc) = self.store.read(|tx| {
            let kill = tx.switch("kill")?.filter(|s| s.on);
            let states = tx.schedule_states(&wanted)?;
            let adhoc = tx.maintenance_at(now)?;
            Ok((kill, states, adhoc))
        })?;
        let mut maintenance = switches::maintenance_windows(&self.cfg.maintenance, &adhoc, now);
        maintenance.retain(|m| m.active);
        let facts = TickFacts {
            kill,
            states: states.into_iter().map(|s| (s.schedule.clone(), s)).collect(),
            maintenance,
        };
        Ok(facts)
    }

    /// The running runs per schedule (all, and on-time) and per tenant, as
    /// the engine's model keeps them: read once (a walk of the running runs) and
    /// counted up and down as runs start and end, this tick's claims
    /// included. Held only for a lookup: a claim updates them in place, and
    /// a copy held elsewhere would make it copy them all.
    fn running_counts(&self) -> Result<std::sync::Arc<RunningCounts>> {
        Ok(self.store.read(|tx| tx.running_by_schedule())?)
    }

    /// Decides one due run whose gates stay inside agentcron: all three
    /// layers, then the plan.
    fn evaluate_run(
        &mut self,
        idx: usize,
        run: Run,
        now: DateTime<Utc>,
        facts: &mut TickFacts,
    ) -> Result<()> {
        if let Some(gated) = self.before_gates(idx, &run, now, facts)? {
            let gates = self.run_gates(idx, &run, now)?;
            self.after_gates(idx, &run, gated, gates, now, facts)?;
        }
        Ok(())
    }

    /// Layers 1 and 3, cheap and local, before any gate touches the outside
    /// world: decided (and applied) here, or `Some` when the gates decide.
    pub(crate) fn before_gates(
        &mut self,
        idx: usize,
        run: &Run,
        now: DateTime<Utc>,
        facts: &mut TickFacts,
    ) -> Result<Option<Gated>> {
        // The config is shared (an Arc), not copied per run.
        let cfg = self.cfg.clone();
        let s = &cfg.schedules[idx];
        let time = match time::check(run, s, now) {
            TimeLayer::NotYetDue(not_before) => {
                let plan = planner::plan(
                    run,
                    Input::NotYetDue { not_before },
                    &self.policy(idx),
                    &Facts::default(),
                    now,
                );
                self.apply_plan(idx, &plan, now)?;
                return Ok(None);
            }
            TimeLayer::Closed(d) => {
                self.apply(idx, run, d, false, now)?;
                return Ok(None);
            }
            TimeLayer::Open(time) => time,
        };
        let sw = self.check_switches(idx, run, now, facts)?;
        if let Some(d) = Decision::with_switches(&time, &sw.checks) {
            self.apply(idx, run, d, false, now)?;
            return Ok(None);
        }
        Ok(Some(Gated {
            time,
            switches: sw.checks.into_iter().map(|(c, _)| c).collect(),
            probe: sw.probe,
        }))
    }

    /// Layer 2 has answered: the decision, planned and applied.
    pub(crate) fn after_gates(
        &mut self,
        idx: usize,
        run: &Run,
        gated: Gated,
        gates: Vec<GateResult>,
        now: DateTime<Utc>,
        facts: &mut TickFacts,
    ) -> Result<()> {
        // The config is shared (an Arc), not copied per run.
        let cfg = self.cfg.clone();
        let s = &cfg.schedules[idx];
        let d = Decision::from_gates(gated.time, gated.switches, gates);
        self.apply(idx, run, d, gated.probe, now)?;
        if gated.probe {
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
        // The config is shared (an Arc), not copied per run.
        let cfg = self.cfg.clone();
        let s = &cfg.schedules[idx];
        // A schedule never evaluated yet has the default state, made only then.
        let default_state;
        let state = match facts.states.get(&s.id) {
            Some(st) => st,
            None => {
                default_state = ScheduleState::new(&s.id);
                &default_state
            }
        };
        // Read where the model keeps them (counted as this tick claims), and
        // let go of before anything claims: a claim updates them in place.
        let (running, running_on_time, tenant_running) = {
            let counts = self.running_counts()?;
            (
                counts.of_schedule(&s.id),
                counts.on_time_of_schedule(&s.id),
                counts.of_tenant(&s.tenant),
            )
        };
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
        let (on_time_window, catchup_window) = if overlaps {
            (
                (running_on_time > 0)
                    .then(|| self.running_window_of(idx, Pool::OnTime))
                    .transpose()?,
                (running > running_on_time)
                    .then(|| self.running_window_of(idx, Pool::Backfill))
                    .transpose()?,
            )
        } else {
            (None, None)
        };
        let on_time_late_for_catchup = on_time_window.is_some()
            && run.pool == Pool::OnTime
            && run.reason == RunReason::Scheduled
            && matches!(s.overlap, Overlap::Skip | Overlap::BufferOne)
            && self.on_time_run_waited_for_catchup(idx)?;
        let first_buffered = if overlaps && s.overlap == Overlap::BufferOne {
            self.store
                .read(|tx| tx.buffered_runs(&s.tenant, &s.id))?
                .first()
                .copied()
        } else {
            None
        };
        let on_time_due = if run.pool == Pool::Backfill {
            self.store.read(|tx| tx.pending_on_time(&s.id))?
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
            running_on_time,
            on_time_window,
            catchup_window,
            on_time_late_for_catchup,
            on_time_due,
            tenant_running,
            tenant_max: self.cfg.tenants.get(&s.tenant).and_then(|t| t.max_concurrent),
            first_buffered,
            pool_used,
            pool_size,
        };
        let outcome = switches::check(run, s, &switch_facts, now);
        if outcome.cancel_running {
            // The schedule's running on-time windows are superseded: this
            // process stops its own; another scheduler's attempt gets a cancel
            // request in the store, which its owner acts on within a tick.
            let others = self.store.read(|tx| tx.running_runs(Some(&s.id)))?;
            for r in others.iter().filter(|r| r.pool == Pool::OnTime) {
                match self.running.get_mut(&r.id) {
                    Some(mine) if mine.token == r.fencing_token => {
                        if mine.cancel.is_none() {
                            mine.cancel = Some(CancelCause::Superseded(run.window_key.clone()));
                            mine.handle.cancel();
                        }
                    }
                    _ => {
                        let why = run.window_key.clone();
                        self.store
                            .write(|tx| tx.request_cancel(r.id, r.fencing_token, &why))?;
                    }
                }
            }
        }
        Ok(outcome)
    }

    fn run_gates(&self, idx: usize, run: &Run, now: DateTime<Utc>) -> Result<Vec<GateResult>> {
        let gates = &self.gates[idx];
        if gates.is_empty() {
            return Ok(vec![]);
        }
        let previous = self
            .store
            .read(|tx| tx.previous_run(&run.tenant, &run.schedule, run.window_start))?;
        Ok(super::gating::check_gates(
            &self.cfg,
            idx,
            gates,
            run,
            previous.as_ref(),
            now,
        ))
    }

    /// Plans a decision with the core and applies it: the plan's events,
    /// the run's step and the schedule delta in one write, then its effects.
    fn apply(&mut self, idx: usize, run: &Run, d: Decision, probe: bool, now: DateTime<Utc>) -> Result<()> {
        // The config is shared (an Arc), not copied per run.
        let cfg = self.cfg.clone();
        let s = &cfg.schedules[idx];
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
        // A catch-up run held by a switch, a budget or a gate leaves the
        // place it may have been counted or queued for: it is offered again
        // (else it stood idle until another catch-up run ended or a
        // backlog's window expired). Offering the place of a run that keeps
        // it queued a window for every on-time hold at an on-time instant,
        // each held in turn.
        let gives_place_back = run.pool == Pool::Backfill && hold.is_some_and(|h| !h.keeps_catchup_place());
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
        if gives_place_back {
            self.backfill_freed(None, now);
        }
        Ok(())
    }

    /// The configuration the core plans schedule `idx` by.
    pub(crate) fn policy(&self, idx: usize) -> Policy<'_> {
        let schedule = self.schedule(idx);
        Policy {
            schedule,
            agent: self.cfg.agents.get(&schedule.agent).map(|a| &**a),
        }
    }

    /// Applies a plan in one write and performs its effects; `false` when
    /// the plan is empty or the run had moved on (the effects are dropped:
    /// no alert, no count, no wake-up from a race this scheduler lost).
    pub(crate) fn apply_plan(&mut self, idx: usize, plan: &Plan, now: DateTime<Utc>) -> Result<bool> {
        if plan.is_empty() {
            return Ok(false);
        }
        let applied = self.store.write(|tx| tx.apply(plan, now))?;
        self.perform(idx, applied, now)
    }

    /// After a plan was applied: its effects are performed; `false` on
    /// a conflict (nothing was written, so nothing is performed).
    fn perform(&mut self, idx: usize, applied: Applied, now: DateTime<Utc>) -> Result<bool> {
        let Applied::Done {
            mut claim,
            effects,
            mut state,
            run,
        } = applied
        else {
            return Ok(false);
        };
        // The run's pool: a window opened claimed has its run in its claim.
        let pool = run
            .as_ref()
            .map(|r| r.pool)
            .or(claim.as_ref().map(|c| c.run.pool));
        for effect in effects {
            match effect {
                Effect::Dispatch => {
                    if let Some(c) = claim.take() {
                        // The schedule's state is the dispatch's alone: moved, not copied.
                        self.dispatch(idx, *c, state.take().map(|st| *st), now)?;
                    }
                }
                Effect::Alert(a) => self.send_alert(&a, now),
                Effect::WakeHeld { schedule, .. } => {
                    // Only a catch-up run leaving makes room in its
                    // schedule's backlog (an on-time end cannot).
                    let catchup = pool.is_none_or(|p| p == Pool::Backfill);
                    self.wake_held(&schedule, catchup, now)?
                }
                Effect::RecheckAll { schedule } => {
                    self.store.write(|tx| tx.recheck_all(schedule.as_deref(), now))?;
                }
                Effect::ApprovalDeadline(at) => {
                    self.next_ttl_deadline = Some(self.next_ttl_deadline.map_or(at, |d| d.min(at)));
                }
            }
        }
        Ok(true)
    }

    /// Whether the schedule's running on-time run was held by the on-time
    /// rule before it started (it waited for a catch-up run): read from its
    /// trace, only on the way to an overlap skip.
    fn on_time_run_waited_for_catchup(&self, idx: usize) -> Result<bool> {
        let ours = self
            .running
            .values()
            .filter(|r| r.schedule == idx && r.pool == Pool::OnTime)
            .map(|r| r.run_id)
            .min();
        let id = match ours {
            Some(id) => Some(id),
            None => {
                let s = self.schedule(idx);
                let others = self.store.read(|tx| tx.running_runs(Some(&s.id)))?;
                others.iter().find(|r| r.pool == Pool::OnTime).map(|r| r.id)
            }
        };
        let Some(id) = id else {
            return Ok(false);
        };
        let held = self.store.read(|tx| {
            tx.events(&EventFilter {
                run_id: Some(id),
                kinds: vec!["switch_held".into()],
                ..EventFilter::default()
            })
        })?;
        Ok(held.iter().any(|e| {
            matches!(
                e.event(),
                crate::core::event::Event::SwitchHeld {
                    switch: SwitchName::OnTime,
                    ..
                }
            )
        }))
    }

    fn running_window_of(&self, idx: usize, pool: Pool) -> Result<String> {
        let ours = self
            .running
            .values()
            .filter(|r| r.schedule == idx && r.pool == pool)
            .min_by_key(|r| r.run_id)
            .map(|r| r.run_id);
        if let Some(id) = ours
            && let Some(run) = self.store.read(|tx| tx.try_run(id))?
        {
            return Ok(run.window_key);
        }
        let s = self.schedule(idx);
        let others = self.store.read(|tx| tx.running_runs(Some(&s.id)))?;
        Ok(others
            .iter()
            .find(|r| r.pool == pool)
            .map(|r| r.window_key.clone())
            .unwrap_or_default())
    }
}

/// Inserts `new` pending with its `opened` event (at `at`); `None` when
/// another scheduler opened the window first.
fn open_pending(
    tx: &crate::store::Tx,
    new: &NewRun,
    opened: crate::core::event::Event,
    at: DateTime<Utc>,
) -> crate::store::Result<Option<Run>> {
    let Some(run) = tx.insert_run(new, at)? else {
        return Ok(None);
    };
    tx.append_event(&NewEvent::of(at, opened).for_run(&run))?;
    Ok(Some(run))
}
