//! Drives one or more real engines on a virtual clock: the clock jumps from
//! one thing-to-do to the next (a window opens, a run is due, a simulated agent
//! reports, a scripted fault fires), so a month runs in seconds.

use super::sim::{SimAgent, SimRunner};
use crate::config::model::Config;
use crate::engine::{Engine, EngineError, EngineOptions};
use crate::gates::Gate;
use crate::store::Store;
use crate::time::{Clock, VirtualClock};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Builds the gates of every schedule (simulated in rehearsals, real in tests).
pub type GateFactory = Box<dyn Fn(&Config) -> Vec<Vec<Box<dyn Gate>>>>;

/// One scheduler process in the rehearsal.
pub struct Scheduler {
    pub name: String,
    pub engine: Option<Engine>,
}

/// Instants [`Driver::run_until`] handles in one transaction while one
/// scheduler is live.
const INSTANTS_PER_COMMIT: usize = 64;

pub struct Driver {
    pub clock: VirtualClock,
    pub sim: SimRunner,
    pub cfg: Arc<Config>,
    db: PathBuf,
    /// Holds the database open while every scheduler is down (a crash), so
    /// an in-memory one survives until the restart.
    keeper: Store,
    gates: GateFactory,
    pub schedulers: Vec<Scheduler>,
    /// Safety valve: work items handled at one instant before giving up.
    max_rounds_per_instant: usize,
    /// Engines run with the model's oracle (see
    /// [`crate::engine::model::EngineStore::forgetful`]).
    forgetful_model: bool,
    /// Which scheduler goes first in the next round: the turn rotates, so with
    /// two schedulers each one is first to a due window half the time and their
    /// claims really contend (deterministically).
    turn: usize,
}

impl Driver {
    /// A driver with one scheduler named `main` on the database `db`: a file,
    /// or an in-memory database shared by the driver's schedulers
    /// ([`memory_database`]).
    pub fn new(
        cfg: Arc<Config>,
        db: &Path,
        start: DateTime<Utc>,
        agents: BTreeMap<String, SimAgent>,
        gates: GateFactory,
    ) -> Result<Self, EngineError> {
        let clock = VirtualClock::new(start);
        let sim = SimRunner::new(Arc::new(clock.clone()), agents);
        let keeper = Store::open(db)?;
        let mut d = Self {
            clock,
            sim,
            cfg,
            db: db.to_path_buf(),
            keeper,
            gates,
            schedulers: vec![],
            max_rounds_per_instant: 10_000,
            forgetful_model: false,
            turn: 0,
        };
        d.add_scheduler("main")?;
        Ok(d)
    }

    /// From now on, and for the schedulers already added (none may have
    /// run yet), engines run with the model's oracle: every fact read from
    /// the ledger. Tests compare a rehearsal run so with one run with the
    /// model.
    pub fn use_forgetful_model(&mut self) -> Result<(), EngineError> {
        self.forgetful_model = true;
        let names: Vec<String> = self.schedulers.iter().map(|s| s.name.clone()).collect();
        for name in names {
            self.add_scheduler(&name)?;
        }
        Ok(())
    }

    /// Starts another scheduler process on the same database.
    pub fn add_scheduler(&mut self, name: &str) -> Result<(), EngineError> {
        let engine = self.build_engine(name)?;
        if let Some(s) = self.schedulers.iter_mut().find(|s| s.name == name) {
            s.engine = Some(engine);
        } else {
            self.schedulers.push(Scheduler {
                name: name.to_string(),
                engine: Some(engine),
            });
        }
        Ok(())
    }

    fn build_engine(&self, name: &str) -> Result<Engine, EngineError> {
        let store = Arc::new(Store::open(&self.db)?);
        let opts = EngineOptions {
            owner: name.to_string(),
            forgetful_model: self.forgetful_model,
            ..EngineOptions::default()
        };
        let clock: Arc<dyn Clock> = Arc::new(self.clock.clone());
        Ok(Engine::with_gates(
            self.cfg.clone(),
            store,
            clock,
            Arc::new(self.sim.clone()),
            opts,
            (self.gates)(&self.cfg),
        ))
    }

    /// The scheduler process dies: in-memory state and its agents are gone; the
    /// database keeps what was committed.
    pub fn crash(&mut self, name: &str) {
        if let Some(s) = self.schedulers.iter_mut().find(|s| s.name == name) {
            s.engine = None;
        }
        if self.schedulers.iter().all(|s| s.engine.is_none()) {
            self.sim.crash();
        }
    }

    /// The process starts again: the database is reopened, nothing else survives.
    pub fn restart(&mut self, name: &str) -> Result<(), EngineError> {
        self.add_scheduler(name)
    }

    /// The database the schedulers share (for expectations, kept open).
    pub fn keeper(&self) -> &Store {
        &self.keeper
    }

    /// A store handle for expectations and scripted operator actions.
    pub fn store(&self) -> Result<Store, EngineError> {
        Ok(Store::open(&self.db)?)
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Handles everything due at the current instant, on every live scheduler.
    ///
    /// Each scheduler's round (its reports, a tick, the reports that brought)
    /// is one transaction ([`Store::batch`]; the engine's own batches join
    /// it): its commits inside would only copy the same pages into the
    /// rollback journal again (an in-memory database journals each page a
    /// transaction first touches; a tenth of an outage drain's instructions).
    /// A rehearsal's faults (a crash, a restart, a clock jump) happen between
    /// rounds, where every commit of the round has happened either way.
    pub fn settle(&mut self) -> Result<(), EngineError> {
        self.settle_quiet().map(drop)
    }

    /// [`Driver::settle`]; `true` when it ended because nothing was left to
    /// do at this instant (a round left no agent due to report and no engine
    /// with anything due), `false` at the round limit.
    fn settle_quiet(&mut self) -> Result<bool, EngineError> {
        for _ in 0..self.max_rounds_per_instant {
            let now = self.clock.now();
            self.sim.release_due(now);
            self.next_turn();
            let first = self.turn.min(self.schedulers.len());
            let (before, from_turn) = self.schedulers.split_at_mut(first);
            for s in from_turn.iter_mut().chain(before.iter_mut()) {
                if let Some(e) = s.engine.as_mut() {
                    let store = e.ledger().clone();
                    store.batch(|| {
                        e.drain_reports()?;
                        e.tick()?;
                        e.drain_reports()?;
                        Ok::<(), EngineError>(())
                    })?;
                }
            }
            // Nothing left at this instant once no agent is due to report
            // and no engine has anything due: as the live loop, which sleeps
            // until the engine's next wake-up or a report, the driver does
            // not tick again to find nothing (that tick was about a third
            // of an outage drain's rounds).
            let more_sim = self.sim.next_due().is_some_and(|t| t <= now);
            let more_engine = self.next_engine_wakeup()?.is_some_and(|t| t <= now);
            if !more_sim && !more_engine {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The next round's first scheduler.
    fn next_turn(&mut self) {
        self.turn = (self.turn + 1) % self.schedulers.len().max(1);
    }

    fn next_engine_wakeup(&self) -> Result<Option<DateTime<Utc>>, EngineError> {
        let mut next: Option<DateTime<Utc>> = None;
        for s in &self.schedulers {
            if let Some(e) = s.engine.as_ref()
                && let Some(t) = e.next_wakeup()?
            {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        Ok(next)
    }

    /// The next instant anything is due (engine or simulated agent).
    pub fn next_event(&self) -> Result<Option<DateTime<Utc>>, EngineError> {
        let e = self.next_engine_wakeup()?;
        let s = self.sim.next_due();
        Ok(match (e, s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// Moves to the next instant with something to do, if it is at or before
    /// `limit`, and handles it. Returns the instant, or `None` when nothing is due
    /// by `limit` (the clock is then left at `limit`).
    pub fn step(&mut self, limit: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, EngineError> {
        Ok(self.step_from(limit, false)?.0)
    }

    /// [`Driver::step`], without first settling the current instant when
    /// `settled` (the caller's last step left it quiet and nothing acted
    /// since); also whether this step left its instant quiet.
    fn step_from(
        &mut self,
        limit: DateTime<Utc>,
        settled: bool,
    ) -> Result<(Option<DateTime<Utc>>, bool), EngineError> {
        if settled {
            // The turn moves on as that settle's one round would have moved
            // it: which scheduler goes first at each instant stays the same.
            self.next_turn();
        } else {
            self.settle()?;
        }
        match self.next_event()? {
            Some(t) if t <= limit => {
                let t = t.max(self.clock.now());
                self.clock.set(t);
                let quiet = self.settle_quiet()?;
                Ok((Some(t), quiet))
            }
            _ => {
                if limit > self.clock.now() {
                    self.clock.set(limit);
                    self.settle()?;
                }
                Ok((None, false))
            }
        }
    }

    /// Runs until `t`, event by event. Between its steps nothing outside the
    /// driver acts, so a step that begins where the last one left everything
    /// settled does not settle that instant again (a round of every engine's
    /// tick that finds nothing: a third of an outage drain's ticks).
    ///
    /// For the same reason, while one scheduler is live its rounds of up to
    /// [`INSTANTS_PER_COMMIT`] instants are one transaction (each round's
    /// batch joins it): an in-memory database's commit copies every page the
    /// transaction touched into its rollback journal first, and consecutive
    /// instants touch mostly the same pages (the newest runs, events and
    /// attempts, the schedule states). With two or more schedulers each
    /// round commits on its own, as the schedulers would.
    pub fn run_until(&mut self, t: DateTime<Utc>) -> Result<(), EngineError> {
        let mut settled = false;
        loop {
            let more = match self.sole_store() {
                Some(store) => store.batch(|| {
                    for _ in 0..INSTANTS_PER_COMMIT {
                        let (step, quiet) = self.step_from(t, settled)?;
                        settled = quiet;
                        if step.is_none() {
                            return Ok::<bool, EngineError>(false);
                        }
                    }
                    Ok(true)
                })?,
                None => {
                    let (step, quiet) = self.step_from(t, settled)?;
                    settled = quiet;
                    step.is_some()
                }
            };
            if !more {
                return Ok(());
            }
        }
    }

    /// The ledger (with its model) of the one live scheduler, if only one
    /// is live.
    fn sole_store(&self) -> Option<Arc<crate::engine::model::EngineStore>> {
        let mut live = self.schedulers.iter().filter_map(|s| s.engine.as_ref());
        let first = live.next()?;
        live.next().is_none().then(|| first.ledger().clone())
    }

    /// Jumps the wall clock (a clock jump fault): no time "passes" for timers.
    pub fn jump_clock(&mut self, to: DateTime<Utc>) -> Result<(), EngineError> {
        let from = self.clock.now();
        self.clock.set(to);
        for s in &mut self.schedulers {
            if let Some(e) = s.engine.as_mut() {
                e.note_clock_jump(from, to)?;
            }
        }
        self.settle()
    }
}

/// An in-memory SQLite database the schedulers of one rehearsal share (one
/// process, several connections, shared cache): the real schema and store,
/// without a file's writes and syncs. `name` must be unique per rehearsal.
///
/// Not SQLite's `memdb` file system, though it is about a fifth faster on
/// the month bench: the 72-hour outage bench of 1,000 schedules failed on it
/// with "disk full" at its default 1 GiB limit and, with the limit lifted,
/// with "out of memory" (a `memdb` database is one growing allocation).
pub fn memory_database(name: &str) -> PathBuf {
    PathBuf::from(format!("file:{name}?mode=memory&cache=shared"))
}
