//! The engine: opens windows when time says so, evaluates the three layers for
//! every due run, claims the ones that pass, dispatches attempts to agents and
//! applies the recovery rules to what comes back.
//!
//! The engine is a loop over [`Engine::tick`]: every tick reads `now` from the
//! [`Clock`], so the same code runs live (system clock) and in tests and
//! rehearsals (virtual clock, stepped to [`Engine::next_wakeup`]). All state that
//! matters lives in the store; the in-memory parts (the due heap of window
//! openings, the attempts this process runs) are rebuilt from it on start.

mod backlog;
pub mod model;
pub use crate::core::decision;
mod dispatch;
mod gating;
mod hold;
mod live;
pub(crate) mod open;
mod outcome;
mod pipeline;
pub(crate) mod registry;
mod reload;
pub mod tick_time;

pub use live::Stopper;
pub use registry::Registration;
pub use reload::{ReloadOutcome, ReloadSource};

pub use decision::{Decision, Hold, SwitchCheck, Verdict};

use crate::agent::protocol::AgentResult;
use crate::agent::runner::{AgentRunner, AttemptHandle, AttemptReport};
use crate::config::model::{Config, ScheduleConfig, TriggerConfig};
use crate::core::event::Event;
use crate::gates::Gate;
use crate::store::types::{NewEvent, Pool};
use crate::store::{Store, StoreError};
use crate::time::Clock;
use crate::time::fire::FireRule;
use chrono::{DateTime, TimeDelta, Utc};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::mpsc;

/// How far ahead of a start [`Engine::warm_up`] reads the schedules due.
const WARM_UP_AHEAD: TimeDelta = TimeDelta::seconds(60);

/// The reason of a deny for a side-effect step whose journaling transaction
/// failed or rolled back: the step is not journaled, so it must not happen.
const NOT_JOURNALED: &str = "the step could not be journaled (the transaction failed): do not act";

/// Errors that stop the engine (everything else is recorded as events).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T> = std::result::Result<T, EngineError>;

/// Knobs that are not part of the config file.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Who claims: `host:pid` live, a name in rehearsals.
    pub owner: String,
    /// Bytes of agent output kept per attempt.
    pub log_limit: usize,
    /// At most this many windows are enumerated per schedule after a gap.
    pub max_catchup_windows: usize,
    /// How often a `tick` event records that this scheduler is alive.
    pub tick_event_every: TimeDelta,
    /// This scheduler's row in the registry; `None`: not registered
    /// (rehearsals, tests that do not ask for it).
    pub registry: Option<Registration>,
    /// Where a reload reads the config (SIGHUP, `agentcron reload`); `None`:
    /// the engine never reloads (rehearsals, most tests).
    pub reload: Option<reload::ReloadSource>,
    /// Keep (due, committed) of the newest claims for
    /// [`Engine::claim_commits`] (the lateness bench); off, nothing is kept.
    pub record_claim_commits: bool,
    /// Where the engine publishes each configuration it rebuilds itself
    /// from, for the HTTP API beside it; `None`: nobody reads it.
    pub applied: Option<crate::config::Applied>,
    /// Run with the model's oracle ([`model::EngineStore::forgetful`]):
    /// every fact read from the ledger. Tests only.
    pub forgetful_model: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            owner: default_owner(),
            log_limit: 64 * 1024,
            max_catchup_windows: 10_000,
            tick_event_every: TimeDelta::minutes(1),
            registry: None,
            reload: None,
            record_claim_commits: false,
            applied: None,
            forgetful_model: false,
        }
    }
}

/// `host:pid`, the lease owner of a live scheduler.
pub fn default_owner() -> String {
    format!("{}:{}", hostname(), std::process::id())
}

/// This machine's name (`localhost` if it cannot be read).
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into a valid buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".to_string()
    }
}

/// Why the engine itself stopped an attempt (the core's word for it).
pub(crate) use crate::core::planner::Cancel as CancelCause;

/// An attempt this process started and has not seen end.
pub(crate) struct Running {
    pub run_id: i64,
    pub token: i64,
    pub attempt: u32,
    pub schedule: usize,
    pub pool: Pool,
    pub handle: AttemptHandle,
    pub result: Option<AgentResult>,
    pub verify_step: Option<String>,
    pub cancel: Option<CancelCause>,
    pub last_heartbeat_event: Option<DateTime<Utc>>,
    pub rate_limited: bool,
    /// The last result line was not a valid result: `(error, line)`.
    pub broken_result: Option<(String, String)>,
    /// This attempt reported a step (the engine journals every one): without
    /// one, a first attempt has no journal to read at its end.
    pub journaled: bool,
    /// Until when the store holds this attempt's lease, as last renewed (and
    /// committed) by this scheduler; what is left of it is what the agent's
    /// supervisor enforces.
    pub lease_until: DateTime<Utc>,
    /// The attempt's `started` event, stamped with its claim's instant, until
    /// the runner reports the agent running (`Engine::started`); an attempt
    /// that could not start ends without one.
    pub started: Option<Box<crate::store::types::NewEvent>>,
    /// The instant the window was due (or its retry), for the start's lateness.
    pub due_at: DateTime<Utc>,
}

/// The attempts this process runs, by run id, with how many run in each
/// pool: a pool's free places are asked at every end (several times), and
/// counting them walked every attempt, a thousand of them whenever a
/// thousand windows open at one instant (4 % of the outage drain). Reads go
/// through the map; every change goes through here, which keeps the counts.
/// An attempt's pool never changes while it runs.
#[derive(Default)]
pub(crate) struct RunningAttempts {
    map: crate::store::FastMap<i64, Running>,
    /// Attempts in [`Pool::OnTime`], [`Pool::Backfill`].
    in_pool: [usize; 2],
}

impl RunningAttempts {
    fn slot(pool: Pool) -> usize {
        match pool {
            Pool::OnTime => 0,
            Pool::Backfill => 1,
        }
    }

    pub(crate) fn insert(&mut self, r: Running) {
        let slot = Self::slot(r.pool);
        if let Some(old) = self.map.insert(r.run_id, r) {
            self.in_pool[Self::slot(old.pool)] -= 1;
        }
        self.in_pool[slot] += 1;
    }

    pub(crate) fn remove(&mut self, run_id: i64) -> Option<Running> {
        let r = self.map.remove(&run_id)?;
        self.in_pool[Self::slot(r.pool)] -= 1;
        Some(r)
    }

    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.in_pool = [0, 0];
    }

    pub(crate) fn get_mut(&mut self, run_id: &i64) -> Option<&mut Running> {
        self.map.get_mut(run_id)
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut Running> {
        self.map.values_mut()
    }

    /// How many of them run in `pool`.
    pub(crate) fn in_pool(&self, pool: Pool) -> usize {
        self.in_pool[Self::slot(pool)]
    }

    /// All of them, leaving none.
    pub(crate) fn take_all(&mut self) -> Vec<Running> {
        self.in_pool = [0, 0];
        self.map.drain().map(|(_, r)| r).collect()
    }
}

impl std::ops::Deref for RunningAttempts {
    type Target = crate::store::FastMap<i64, Running>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

/// The scheduler core. See the module docs.
pub struct Engine {
    pub(crate) cfg: Arc<Config>,
    pub(crate) store: Arc<model::EngineStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) runner: Arc<dyn AgentRunner>,
    pub(crate) opts: EngineOptions,
    /// By schedule index.
    pub(crate) rules: Vec<Option<FireRule>>,
    /// By schedule index: the fire its rule gave after the cursor the
    /// schedule had then (that cursor, the fire) — the one its heap entry
    /// was pushed for, so opening it need not compute it again
    /// ([`Engine::open_due_windows`]).
    pub(crate) next_fire: Vec<Option<(DateTime<Utc>, crate::time::fire::Fire)>>,
    /// Schedules whose window opened this tick, off the due heap until
    /// their next fire is computed after the tick's agents started: (index,
    /// cursor). Empty between ticks ([`Engine::schedule_next_fires`]).
    pub(crate) unscheduled: Vec<(usize, DateTime<Utc>)>,
    pub(crate) gates: gating::ScheduleGates,
    /// IO gates being checked off the loop.
    pub(crate) gate_pool: gating::GatePool,
    pub(crate) index: crate::store::FastMap<String, usize>,
    /// Whether any schedule has an `on_event` / `after_event` trigger, and any an
    /// `approval_ttl`: asked every tick, so not answered by walking every schedule.
    pub(crate) has_event_triggers: bool,
    pub(crate) has_approval_ttls: bool,
    /// Next window opening per time-triggered schedule: (instant, schedule index).
    pub(crate) heap: BinaryHeap<Reverse<(DateTime<Utc>, usize)>>,
    /// Last evaluated instant per schedule (mirror of the store).
    pub(crate) cursor: Vec<Option<DateTime<Utc>>>,
    /// The attempts this process runs, by run id.
    pub(crate) running: RunningAttempts,
    /// Attempts claimed in the current batch, started once it has committed:
    /// an agent never runs on a claim that could still roll back.
    pub(crate) pending_starts: Vec<(crate::agent::runner::AttemptSpec, Running, DateTime<Utc>)>,
    /// How late each claim's transaction committed (commit − due), as
    /// [`Engine::claim_commit_lateness`] reports it.
    pub(crate) commit_lateness: dispatch::CommitLateness,
    /// Answers to side-effect steps, sent once the transaction that journaled
    /// the step has committed: (run id, fencing token, answer).
    pub(crate) pending_replies: Vec<(i64, i64, crate::agent::protocol::Reply)>,
    pub(crate) reports_tx: mpsc::UnboundedSender<AttemptReport>,
    pub(crate) reports_rx: mpsc::UnboundedReceiver<AttemptReport>,
    pub(crate) posted_seq: i64,
    /// Whether runs may be held by a quota (so a freed slot must look for
    /// them); cleared when a look finds none, set when a run is so held.
    pub(crate) quota_holds: std::cell::Cell<bool>,
    pub(crate) last_renewal: Option<DateTime<Utc>>,
    pub(crate) last_tick_event: Option<DateTime<Utc>>,
    /// When this scheduler last refreshed its registry row.
    pub(crate) registry_seen: Option<DateTime<Utc>>,
    pub(crate) last_ttl_check: Option<DateTime<Utc>>,
    /// The soonest `approval_ttl` deadline of a `needs_human` run known to us.
    pub(crate) next_ttl_deadline: Option<DateTime<Utc>>,
    /// Schedules with a catch-up backlog (windows planned, not yet queued):
    /// when to look at each next, their next windows in order, and a place
    /// freed to offer. A cell: a run leaving the queue (in `&self` paths)
    /// marks a place freed.
    pub(crate) backlog: std::cell::RefCell<backlog::Looks>,
    /// When to read the backlog table again for ranges other schedulers planned.
    pub(crate) backlog_poll: Option<DateTime<Utc>>,
    pub(crate) stopping: bool,
    pub(crate) started: bool,
    /// Since when this scheduler has been evaluating its schedules without a
    /// break: its start, or the end of the last clock jump. A window due
    /// before it was missed (nobody evaluated it when it was due).
    pub(crate) alive_since: DateTime<Utc>,
    /// The config version this engine runs and what a reload rebuilds from.
    pub(crate) control: reload::Control,
    /// The store fault the live loop holds through, if any.
    pub(crate) holding: hold::Holding,
}

impl Engine {
    /// Builds an engine with the gates the config declares.
    pub fn new(
        cfg: Arc<Config>,
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        runner: Arc<dyn AgentRunner>,
        opts: EngineOptions,
    ) -> Self {
        let gates = cfg
            .schedules
            .iter()
            .map(|s| {
                s.gates
                    .iter()
                    .map(|g| crate::gates::build_in(g, &cfg.dir))
                    .collect()
            })
            .collect();
        let deliveries: HashMap<String, Vec<crate::config::model::DeliveryConfig>> = cfg
            .schedules
            .iter()
            .filter(|s| !s.deliveries.is_empty())
            .map(|s| (s.id.clone(), s.deliveries.clone()))
            .collect();
        let base_runner = runner.clone();
        let runner: Arc<dyn AgentRunner> = if deliveries.is_empty() {
            runner
        } else {
            Arc::new(crate::agent::delivery::DeliveringRunner {
                inner: runner,
                deliveries,
            })
        };
        let mut engine = Self::with_gates(cfg, store, clock, runner, opts, gates);
        engine.control.base_runner = Some(base_runner);
        engine
    }

    /// Builds an engine with injected gates (rehearsals simulate them), one list
    /// per schedule in config order, matching each schedule's `gate` entries.
    pub fn with_gates(
        cfg: Arc<Config>,
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        runner: Arc<dyn AgentRunner>,
        opts: EngineOptions,
        gates: Vec<Vec<Box<dyn Gate>>>,
    ) -> Self {
        let rules = cfg
            .schedules
            .iter()
            .map(|s| {
                let cal = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
                s.fire_rule(cal)
            })
            .collect();
        let index = cfg
            .schedules
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        let has_event_triggers = cfg.schedules.iter().any(|s| {
            matches!(
                s.trigger,
                TriggerConfig::OnEvent { .. } | TriggerConfig::AfterEvent { .. }
            )
        });
        let has_approval_ttls = cfg.schedules.iter().any(|s| s.approval_ttl.is_some());
        let n = cfg.schedules.len();
        let (reports_tx, reports_rx) = mpsc::unbounded_channel();
        Self {
            cfg,
            store: Arc::new(if opts.forgetful_model {
                model::EngineStore::forgetful(store)
            } else {
                model::EngineStore::new(store)
            }),
            clock,
            runner,
            opts,
            rules,
            next_fire: vec![None; n],
            unscheduled: vec![],
            gates: Arc::new(gates),
            gate_pool: gating::GatePool::new(),
            index,
            has_event_triggers,
            has_approval_ttls,
            heap: BinaryHeap::new(),
            cursor: vec![None; n],
            running: RunningAttempts::default(),
            pending_starts: vec![],
            commit_lateness: dispatch::CommitLateness::default(),
            pending_replies: vec![],
            reports_tx,
            reports_rx,
            posted_seq: 0,
            quota_holds: std::cell::Cell::new(true),
            last_renewal: None,
            last_tick_event: None,
            registry_seen: None,
            last_ttl_check: None,
            next_ttl_deadline: None,
            backlog: std::cell::RefCell::new(backlog::Looks::default()),
            backlog_poll: None,
            stopping: false,
            started: false,
            alive_since: DateTime::<Utc>::MIN_UTC,
            control: reload::Control::default(),
            holding: hold::Holding::default(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn store(&self) -> &Arc<Store> {
        self.store.shared()
    }

    /// The store with the engine's model: a batch around the engine's own
    /// transactions (a rehearsal's round) must be made with it, or they run
    /// without the model.
    pub fn ledger(&self) -> &Arc<model::EngineStore> {
        &self.store
    }

    pub fn owner(&self) -> &str {
        &self.opts.owner
    }

    /// Attempts this process is running.
    pub fn running_count(&self) -> usize {
        self.running.len()
    }

    pub(crate) fn schedule(&self, idx: usize) -> &ScheduleConfig {
        &self.cfg.schedules[idx]
    }

    /// Loads durable state: each schedule's last evaluated instant (the gap since
    /// then is planned by the first tick), and sweeps zombies left by a crash.
    pub fn start(&mut self) -> Result<()> {
        let now = self.clock.now();
        // No claim waits for a checkpoint (a file store; else a no-op).
        self.store.checkpoint_in_background()?;
        self.load_cursors(now)?;
        self.warm_up(now)?;
        // Windows due before now were due while this scheduler was not
        // running: missed, whatever their close_after.
        self.alive_since = now;
        let owner = self.opts.owner.clone();
        self.store.write(|tx| {
            tx.append_event(&NewEvent::of(
                now,
                Event::SchedulerStarted {
                    owner,
                    schedules: self.cfg.schedules.len(),
                },
            ))
        })?;
        self.started = true;
        Ok(())
    }

    /// Reads into the engine's model what the first claims of the schedules
    /// due within [`WARM_UP_AHEAD`] need (their states, their execution
    /// memory, the running counts), so the first tick after a start claims
    /// as fast as the later ones: with 1,000 schedules due every second it
    /// took 45-75 ms where the later ones took 20-30, each window's first
    /// reads one query at a time on the claim path. Schedules due later are
    /// read when they are due (100,000 daily schedules keep nothing).
    fn warm_up(&self, now: DateTime<Utc>) -> Result<()> {
        let soon = now + WARM_UP_AHEAD;
        let due: Vec<&ScheduleConfig> = self
            .heap
            .iter()
            .filter(|Reverse((at, _))| *at <= soon)
            .map(|Reverse((_, idx))| &self.cfg.schedules[*idx])
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let n = self.cfg.scheduler.memory_runs;
        self.store.read(|tx| {
            let ids: Vec<&str> = due.iter().map(|s| s.id.as_str()).collect();
            tx.schedule_states(&ids)?;
            for s in &due {
                tx.execution_memory(&s.tenant, &s.id, n)?;
            }
            tx.running_by_schedule()?;
            Ok(())
        })?;
        Ok(())
    }

    /// Each schedule's next window opening from its stored last evaluated
    /// instant (a schedule seen for the first time is born now): at the
    /// start, and again after a reload.
    pub(crate) fn load_cursors(&mut self, now: DateTime<Utc>) -> Result<()> {
        let states = self.store.read(|tx| tx.all_schedule_states())?;
        let by_id: HashMap<&str, _> = states.iter().map(|s| (s.schedule.as_str(), s)).collect();
        for (idx, s) in self.cfg.schedules.iter().enumerate() {
            // A removed schedule kept only for its running attempts opens nothing.
            if self.index.get(&s.id) != Some(&idx) {
                continue;
            }
            let st = by_id.get(s.id.as_str());
            match &s.trigger {
                TriggerConfig::Every {
                    anchor: crate::config::model::Anchor::LastStart,
                    interval,
                } => {
                    // N after the previous start; the first start is now.
                    let at = st
                        .and_then(|st| st.last_start)
                        .map(|ls| {
                            crate::time::fire::after_interval(
                                s.timezone,
                                ls,
                                crate::time::duration::to_delta(*interval),
                            )
                        })
                        .unwrap_or(now);
                    self.heap.push(Reverse((at.max(now), idx)));
                }
                TriggerConfig::Cron(_) | TriggerConfig::Every { .. } => {
                    // Birth: a schedule seen for the first time is first
                    // evaluated now. No window with a nominal time before it is
                    // ever opened automatically (a fire exactly now is).
                    let cursor = match st.and_then(|st| st.last_evaluated) {
                        Some(c) => c,
                        None => {
                            // Stored at once, so a crash before the first window
                            // still leaves a gap to plan on restart.
                            let c = now - TimeDelta::milliseconds(1);
                            self.store.write(|tx| tx.set_born(&s.id, c, now))?;
                            c
                        }
                    };
                    self.cursor[idx] = Some(cursor);
                    if let Some(f) = self.rules[idx].as_ref().and_then(|r| r.next_after(cursor)) {
                        self.heap.push(Reverse((f.at, idx)));
                        self.next_fire[idx] = Some((cursor, f));
                    }
                }
                TriggerConfig::AfterEvent { .. } | TriggerConfig::OnEvent { .. } => {}
            }
        }
        Ok(())
    }

    /// One pass of the loop at the clock's `now`. Never waits for agents.
    pub fn tick(&mut self) -> Result<()> {
        if !self.started {
            self.start()?;
        }
        let now = self.clock.now();
        // Each phase commits once (see Store::batch): a tick that opens or ends
        // hundreds of runs writes their pages once, not once per run.
        let store = self.store.clone();
        self.drain_reports()?;
        // Its own transaction: a supervisor hears of a renewal only once it
        // is committed, so it never keeps an agent past the stored lease.
        self.renew_leases(now)?;
        // When no other on-time run is due, the windows opening now are decided
        // in the transaction that opens them, a chunk at a time: their claims
        // commit with their windows and their agents start while later chunks
        // are still being opened. (Otherwise they would be decided after runs
        // due before them, which must keep their turn.)
        let fuse = !self.stopping
            && self
                .store
                .read(|tx| tx.next_due_check_in_pool(Pool::OnTime))?
                .is_none_or(|t| t > now);
        let mut decided = HashSet::new();
        // Each chunk commits its claims with their attempt rows and their
        // whole trace, then starts their agents.
        let claimed = self.open_and_claim(now, fuse, &mut decided);
        // Whether or not every chunk committed: no schedule is left off the heap.
        self.schedule_next_fires();
        claimed?;
        if !self.stopping {
            self.apply_kill_cancel(now)?;
            self.evaluate_due_runs(now, &decided)?;
        }
        store.batch(|| {
            self.expire_approvals(now)?;
            self.maybe_tick_event(now)
        })?;
        Ok(())
    }

    /// Opens the windows due at `now` a chunk per transaction, with the fresh
    /// ones decided (and claimed) in it when `fuse`, starting each chunk's
    /// agents once it commits.
    fn open_and_claim(&mut self, now: DateTime<Utc>, fuse: bool, decided: &mut HashSet<i64>) -> Result<()> {
        let store = self.store.clone();
        let mut first = true;
        loop {
            let more = store.batch(|| {
                if std::mem::take(&mut first) {
                    self.sweep_zombies(now)?;
                }
                if self.stopping {
                    return Ok(false);
                }
                let mut fresh = Vec::new();
                let more = self.open_due_windows(now, fuse.then_some(&mut fresh))?;
                let mut catch_up = Vec::new();
                if !more {
                    self.queue_backlogs(now, fuse.then_some(&mut catch_up))?;
                    self.open_posted_events(now)?;
                }
                self.decide_fresh(fresh, now, decided)?;
                self.decide_fresh_catch_up(catch_up, now, decided)?;
                Ok::<bool, EngineError>(more)
            });
            let more = match more {
                Ok(more) => more,
                Err(e) => {
                    // Rolled back: its claims never happened.
                    self.pending_starts.clear();
                    return Err(e);
                }
            };
            self.start_pending();
            if !more {
                return Ok(());
            }
        }
    }

    /// Handles every agent report already received, in one transaction.
    pub fn drain_reports(&mut self) -> Result<usize> {
        let store = self.store.clone();
        let handled = store.batch(|| {
            let mut n = 0;
            while let Ok(report) = self.reports_rx.try_recv() {
                let now = self.clock.now();
                self.handle_report(now, report)?;
                n += 1;
            }
            Ok::<usize, EngineError>(n)
        });
        self.send_replies(handled.is_ok());
        handled
    }

    /// Sends the answers to side-effect steps whose journal entry has now
    /// committed; `committed = false` (the transaction rolled back) turns
    /// every ack into a deny: the step is not journaled, so it must not happen.
    pub(crate) fn send_replies(&mut self, committed: bool) {
        use crate::agent::protocol::Reply;
        for (run_id, token, reply) in std::mem::take(&mut self.pending_replies) {
            let Some(r) = self.running.get(&run_id).filter(|r| r.token == token) else {
                continue;
            };
            let reply = match reply {
                Reply::Ack { step, .. } if !committed => Reply::Deny {
                    step,
                    reason: NOT_JOURNALED.into(),
                },
                other => other,
            };
            r.handle.reply(reply);
        }
    }

    /// Waits (in real time) for the next agent report and handles it. For tests
    /// and rehearsals with real agents on a virtual clock.
    pub async fn wait_report(&mut self) -> Result<bool> {
        match self.reports_rx.recv().await {
            Some(report) => {
                let now = self.clock.now();
                let handled = self.handle_report(now, report);
                self.send_replies(handled.is_ok());
                handled?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Receives the next report without handling it (the live loop selects on it).
    pub async fn recv_report(&mut self) -> Option<AttemptReport> {
        self.reports_rx.recv().await
    }

    /// Handles one report (from [`Engine::recv_report`]).
    pub fn handle(&mut self, report: AttemptReport) -> Result<()> {
        let now = self.clock.now();
        let handled = self.handle_report(now, report);
        self.send_replies(handled.is_ok());
        handled
    }

    /// The sender simulated runners use to report on the engine's channel.
    pub fn report_sender(&self) -> mpsc::UnboundedSender<AttemptReport> {
        self.reports_tx.clone()
    }

    /// The next instant the engine has something to do, if any: a window opens,
    /// a run is due for a check, leases need renewal, a lease expires, a
    /// `needs_human` run reaches its `approval_ttl`.
    pub fn next_wakeup(&self) -> Result<Option<DateTime<Utc>>> {
        let mut next: Option<DateTime<Utc>> = None;
        let mut consider = |t: Option<DateTime<Utc>>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: DateTime<Utc>| n.min(t)));
            }
        };
        if !self.stopping {
            consider(self.heap.peek().map(|Reverse((t, _))| *t));
            consider(self.next_backlog_look());
            // Catch-up runs only matter while the backfill pool has room; a
            // full pool wakes the engine when one of its attempts ends.
            let backfill_room = self.pool_room(Pool::Backfill) > 0;
            consider(self.store.read(|tx| {
                let on_time = tx.next_due_check_in_pool(Pool::OnTime)?;
                let backfill = if backfill_room {
                    tx.next_due_check_in_pool(Pool::Backfill)?
                } else {
                    None
                };
                Ok(on_time.into_iter().chain(backfill).min())
            })?);
        }
        if !self.running.is_empty() {
            let every = self.renew_every();
            consider(Some(self.last_renewal.map_or(self.clock.now(), |t| t + every)));
        }
        // A lost lease is taken over only after its takeover grace.
        let grace = self.takeover_grace();
        consider(
            self.store
                .read(|tx| tx.next_lease_expiry())?
                .map(|t| t + grace + TimeDelta::milliseconds(1)),
        );
        consider(self.next_ttl_deadline);
        Ok(next)
    }

    /// Stops claiming; running attempts continue and are reported.
    pub fn stop_claiming(&mut self) {
        self.stopping = true;
    }

    /// Cancels every attempt this process runs (shutdown after the grace period).
    pub fn abandon_running(&mut self) {
        // Leave them to lease expiry: another scheduler sweeps them as lost.
        self.running.clear();
    }

    pub(crate) fn lease(&self) -> TimeDelta {
        crate::time::duration::to_delta(self.cfg.scheduler.lease)
    }

    pub(crate) fn renew_every(&self) -> TimeDelta {
        (self.lease() / 3).max(TimeDelta::milliseconds(10))
    }

    /// `[scheduler] takeover_grace` (default lease / 3).
    pub(crate) fn takeover_grace(&self) -> TimeDelta {
        crate::time::duration::to_delta(self.cfg.scheduler.takeover_grace())
    }

    /// The TERM → KILL grace of an agent whose lease lapsed: half the takeover
    /// grace (at most the usual grace), so its tree is gone before a takeover.
    pub(crate) fn lease_kill_grace(&self) -> std::time::Duration {
        (self.cfg.scheduler.takeover_grace() / 2).min(crate::process::KILL_GRACE)
    }

    /// Renews the leases of this process's attempts (every lease / 3) in a
    /// transaction of its own, then tells each agent's supervisor how long the
    /// committed lease still holds. Must not run inside a [`Store::batch`]: a
    /// supervisor must never hear of a renewal that could still roll back.
    /// (A rehearsal's round is one batch, see `Driver::settle`: its simulated
    /// supervisors hear early, and no rehearsal fault falls in between.)
    pub(crate) fn renew_leases(&mut self, now: DateTime<Utc>) -> Result<()> {
        // The registry heartbeat goes with the renewals: both say "alive".
        self.refresh_registry(now)?;
        if self.running.is_empty() {
            self.last_renewal = Some(now);
            return Ok(());
        }
        // Another scheduler's newer window superseded one of ours
        // (`overlap = "cancel_previous"`): stop it, as if decided here.
        let owner = self.opts.owner.clone();
        for (run, token, by) in self.store.read(|tx| tx.cancel_requests(&owner))? {
            if let Some(r) = self.running.get_mut(&run)
                && r.token == token
                && r.cancel.is_none()
            {
                r.cancel = Some(CancelCause::Superseded(by));
                r.handle.cancel();
            }
        }
        if self.last_renewal.is_some_and(|t| now < t + self.renew_every()) {
            return Ok(());
        }
        self.last_renewal = Some(now);
        let until = now + self.lease();
        let pairs: Vec<(i64, i64)> = self
            .running
            .values()
            .filter(|r| r.cancel != Some(CancelCause::Fenced))
            .map(|r| (r.run_id, r.token))
            .collect();
        let (renewed, lost) = self.store.write(|tx| {
            let (mut renewed, mut lost) = (vec![], vec![]);
            for (run, token) in &pairs {
                if tx.renew_lease(*run, *token, until)? {
                    renewed.push(*run);
                } else {
                    lost.push(*run);
                }
            }
            Ok((renewed, lost))
        })?;
        for run in lost {
            // Someone declared our attempt lost (we stalled past the lease): stop it;
            // its late result will be recorded as stale.
            if let Some(r) = self.running.get_mut(&run) {
                r.cancel = Some(CancelCause::Fenced);
                r.handle.cancel();
            }
        }
        // Measured after the commit: the supervisor's deadline is the stored one.
        let valid_for = (until - self.clock.now()).to_std().unwrap_or_default();
        for run in renewed {
            if let Some(r) = self.running.get_mut(&run) {
                r.lease_until = until;
                r.handle.renew(valid_for);
            }
        }
        Ok(())
    }

    fn maybe_tick_event(&mut self, now: DateTime<Utc>) -> Result<()> {
        if self
            .last_tick_event
            .is_some_and(|t| now < t + self.opts.tick_event_every)
        {
            return Ok(());
        }
        self.last_tick_event = Some(now);
        let tick = Event::Tick {
            owner: self.opts.owner.clone(),
            running: self.running.len(),
        };
        self.store.write(|tx| tx.append_event(&NewEvent::of(now, tick)))?;
        Ok(())
    }
}
