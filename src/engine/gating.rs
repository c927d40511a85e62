//! Layer 2 off the engine thread. Gates that do IO (a command, an HTTP call,
//! another database) run on a small pool of threads, never on the loop: while
//! they run, the loop keeps renewing the leases of the attempts it runs, reads
//! a fresh `now` and fresh switch facts before it decides on what they
//! answered, and gives up waiting at a phase deadline — a gate that outlives
//! it is answered into a later tick, and its run is not checked again until it
//! has.

use super::pipeline::TickFacts;
use super::{Engine, Result};
use crate::config::model::Config;
use crate::gates::{Gate, GateContext, GateResult, GateVerdict};
use crate::store::types::Run;
use chrono::{DateTime, Utc};
use std::collections::HashSet;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Threads checking gates at once (per engine).
const GATE_THREADS: usize = 4;

/// How often the loop looks up from waiting on gates to renew leases.
const RENEW_POLL: Duration = Duration::from_millis(20);

/// The gates of every schedule, in config order (shared with the pool).
pub(crate) type ScheduleGates = Arc<Vec<Vec<Box<dyn Gate>>>>;

/// One run's gates to check.
struct Job {
    idx: usize,
    run: Run,
    previous: Option<Run>,
    now: DateTime<Utc>,
}

/// What they answered.
pub(crate) struct Answered {
    pub idx: usize,
    pub run: Run,
    pub gates: Vec<GateResult>,
}

/// The gate threads, started with the first IO gate to check.
pub(crate) struct GatePool {
    jobs: Option<Sender<Job>>,
    answers_tx: Sender<Answered>,
    answers: Receiver<Answered>,
    /// Runs whose gates are being checked: not checked again meanwhile.
    pub in_flight: HashSet<i64>,
}

impl GatePool {
    pub fn new() -> Self {
        let (answers_tx, answers) = mpsc::channel();
        Self {
            jobs: None,
            answers_tx,
            answers,
            in_flight: HashSet::new(),
        }
    }

    fn start(&mut self, cfg: Arc<Config>, gates: ScheduleGates) -> &Sender<Job> {
        self.jobs.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let rx = Arc::new(Mutex::new(rx));
            for _ in 0..GATE_THREADS {
                let (rx, cfg, gates, out) = (rx.clone(), cfg.clone(), gates.clone(), self.answers_tx.clone());
                // Detached: a thread ends when the engine (the job sender) is gone.
                std::thread::spawn(move || {
                    loop {
                        let job = {
                            let rx = rx.lock().unwrap_or_else(PoisonError::into_inner);
                            rx.recv()
                        };
                        let Ok(job) = job else { return };
                        let gates_of = gates.get(job.idx).map(Vec::as_slice).unwrap_or(&[]);
                        let results =
                            check_gates(&cfg, job.idx, gates_of, &job.run, job.previous.as_ref(), job.now);
                        let answer = Answered {
                            idx: job.idx,
                            run: job.run,
                            gates: results,
                        };
                        if out.send(answer).is_err() {
                            return;
                        }
                    }
                });
            }
            tx
        })
    }
}

/// Checks `gates` (of schedule `idx`) in declared order, stopping at the
/// first that does not pass.
pub(crate) fn check_gates(
    cfg: &Config,
    idx: usize,
    gates: &[Box<dyn Gate>],
    run: &Run,
    previous: Option<&Run>,
    now: DateTime<Utc>,
) -> Vec<GateResult> {
    let Some(s) = cfg.schedules.get(idx) else {
        return vec![];
    };
    let mut out = vec![];
    for (i, gate) in gates.iter().enumerate() {
        let gc = s.gates.get(i);
        let ctx = GateContext {
            tenant: &run.tenant,
            schedule: s,
            window_key: &run.window_key,
            window_start: run.window_start,
            window_end: run.window_end,
            now,
            previous_run: previous,
            calendars: &cfg.calendars,
            timeout: gc.map_or(Duration::from_secs(30), |g| g.timeout),
        };
        let on_fail = gc.map(|g| g.on_fail).unwrap_or_default();
        let r = crate::gates::evaluate(gate.as_ref(), on_fail, &ctx);
        let pass = r.verdict == GateVerdict::Pass;
        out.push(r);
        if !pass {
            break;
        }
    }
    out
}

impl Engine {
    /// Whether schedule `idx` has a gate that leaves agentcron (checked on
    /// the pool, outside any write transaction).
    pub(crate) fn gates_do_io(&self, idx: usize) -> bool {
        self.gates.get(idx).is_some_and(|g| {
            g.iter()
                .any(|g| !matches!(g.kind(), "previous_run_finished" | "calendar" | "simulated"))
        })
    }

    /// Runs whose IO gates are being checked now.
    pub(crate) fn gates_in_flight(&self, run_id: i64) -> bool {
        self.gate_pool.in_flight.contains(&run_id)
    }

    /// Hands `run`'s gates to the pool (layers 1 and 3 already let it through).
    pub(crate) fn submit_gates(&mut self, idx: usize, run: Run, now: DateTime<Utc>) -> Result<()> {
        let previous = self
            .store
            .read(|tx| tx.previous_run(&run.tenant, &run.schedule, run.window_start))?;
        let id = run.id;
        let job = Job {
            idx,
            run,
            previous,
            now,
        };
        let (cfg, gates) = (self.cfg.clone(), self.gates.clone());
        if self.gate_pool.start(cfg, gates).send(job).is_ok() {
            self.gate_pool.in_flight.insert(id);
        }
        Ok(())
    }

    /// Waits for the gates in flight, up to `within` of real time (their IO
    /// takes real time, whatever the clock), renewing leases meanwhile; then
    /// decides each answered run with a fresh `now` and fresh switch facts.
    /// Answers arriving later are taken by a later call.
    pub(crate) fn collect_gates(&mut self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        let mut answered = vec![];
        loop {
            while let Ok(a) = self.gate_pool.answers.try_recv() {
                self.gate_pool.in_flight.remove(&a.run.id);
                answered.push(a);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if self.gate_pool.in_flight.is_empty() || left.is_zero() {
                break;
            }
            match self.gate_pool.answers.recv_timeout(left.min(RENEW_POLL)) {
                Ok(a) => {
                    self.gate_pool.in_flight.remove(&a.run.id);
                    answered.push(a);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            // Between answers: the attempts this process runs keep their leases.
            let now = self.clock.now();
            self.renew_leases(now)?;
            // A long wait for gates is progress, not a stuck loop (`/livez`).
            super::tick_time::progressed();
        }
        if answered.is_empty() {
            return Ok(());
        }
        // In the order the runs were due, not the order their gates answered:
        // on-time first, then by next check (catch-up oldest first).
        answered.sort_by_key(|a| {
            (
                a.run.pool != crate::store::types::Pool::OnTime,
                a.run.next_check_at,
                a.run.window_start,
                a.run.id,
            )
        });
        let now = self.clock.now();
        let mut facts: TickFacts = self.tick_facts(now, answered.iter().map(|a| a.run.schedule.as_str()))?;
        for a in answered {
            // The world may have moved while the gates ran: the kill switch, a
            // pause, a closing window. Time and switches are asked again.
            let Some(gated) = self.before_gates(a.idx, &a.run, now, &mut facts)? else {
                continue;
            };
            self.after_gates(a.idx, &a.run, gated, a.gates, now, &mut facts)?;
            self.start_pending();
        }
        Ok(())
    }
}
