//! The live loop: tick, sleep until the next thing to do (or an agent report,
//! or at most a second so other processes' changes are seen), stop gracefully.

use super::{CancelCause, Engine, Result};
use crate::agent::runner::AttemptSignal;
use crate::core::event::Event;
use crate::store::types::{EventFilter, NewEvent};
use chrono::TimeDelta;
use std::time::{Duration, Instant};

/// Who stopped a live scheduler: the words its stopped attempts end with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopper {
    /// A signal (SIGINT or SIGTERM of `run --headless`; SIGTERM or SIGHUP of
    /// the console): "stopped by scheduler shutdown".
    Shutdown,
    /// The operator quit the console through its dialog: "stopped when the
    /// operator quit".
    Operator,
}

/// Longest sleep: switches, approvals and runs created by other processes
/// (CLI, console, other schedulers) are seen within this.
const POLL: Duration = Duration::from_millis(500);

/// How long stopping the agents left after the grace period may take: the
/// runner's SIGTERM-to-SIGKILL grace, and a little for the reports.
const STOP_AGENTS_WITHIN: Duration = Duration::from_secs(5);

/// Wall clock and monotonic clock disagreeing by more than this is a clock jump.
const JUMP_THRESHOLD: TimeDelta = TimeDelta::seconds(30);

/// Runs `f`, which blocks the thread: on a multi-threaded runtime, tokio is
/// told so other tasks (agent output readers) keep running.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Wakes the live loop at the instants it asks for, from a thread of its
/// own. The loop's waits used to be `tokio::time::sleep` on the runtime's
/// `block_on` thread, and such a sleep was seen never to end: schedulers of
/// `pg_scale_out` sat for over a minute in a 0 ms and in a 500 ms sleep of
/// the loop's `select!` (its other branches quiet, every thread parked, a
/// signal still woke it). The cause was not found in tokio (1.54); this
/// alarm does not depend on its timer: a plain thread waits with
/// `recv_timeout` and rings a tokio channel, whose wakeups the loop gets
/// like an agent's report. A ring for an earlier wait is told apart by its
/// number and ignored. It is also precise where tokio's timer is not (that
/// wakes on whole milliseconds, rounded up: 1–2 ms after a due instant, a
/// tenth of a claim's lateness at 1,000 schedules a second): within the
/// kernel's timer slack, about 50 µs.
struct Alarm {
    set: std::sync::mpsc::Sender<(u64, Instant)>,
    rung: tokio::sync::mpsc::UnboundedReceiver<u64>,
    /// The number of the last wait asked for.
    last: u64,
}

impl Alarm {
    fn new() -> Alarm {
        let (set, asked) = std::sync::mpsc::channel::<(u64, Instant)>();
        let (ring, rung) = tokio::sync::mpsc::unbounded_channel();
        // Without a thread (none could start), `set` fails and every wait
        // falls back to tokio's timer.
        let _ = std::thread::Builder::new()
            .name("loop-alarm".into())
            .spawn(move || {
                let mut next: Option<(u64, Instant)> = None;
                loop {
                    let asked_for = match next {
                        Some((_, at)) => asked.recv_timeout(at.saturating_duration_since(Instant::now())),
                        None => asked
                            .recv()
                            .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected),
                    };
                    match asked_for {
                        Ok(wait) => next = Some(wait),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                            if let Some((n, at)) = next.take() {
                                // The last stretch (under the kernel's
                                // rounding of the timeout) on the clock itself.
                                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                                if ring.send(n).is_err() {
                                    return;
                                }
                            }
                        }
                        // The loop is gone.
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                }
            });
        Alarm { set, rung, last: 0 }
    }

    /// Resolves at `at` (an instant already past: at once).
    async fn until(&mut self, at: Instant) {
        if at <= Instant::now() {
            return;
        }
        self.last += 1;
        let me = self.last;
        if self.set.send((me, at)).is_ok() {
            while let Some(n) = self.rung.recv().await {
                if n == me {
                    return;
                }
            }
        }
        // No alarm thread (none could start): tokio's timer.
        tokio::time::sleep_until(at.into()).await;
    }
}

/// Detects wall-clock jumps: between two observations the wall clock should
/// move as much as the monotonic clock did; a difference beyond
/// [`JUMP_THRESHOLD`] either way is a jump (NTP step, suspended laptop, an
/// operator setting the date).
#[derive(Debug, Clone, Copy)]
pub struct JumpDetector {
    last_wall: chrono::DateTime<chrono::Utc>,
    last_mono: Instant,
}

impl JumpDetector {
    pub fn new(wall: chrono::DateTime<chrono::Utc>, mono: Instant) -> Self {
        Self {
            last_wall: wall,
            last_mono: mono,
        }
    }

    /// The jump since the last observation, as (where the wall clock should
    /// be, where it is), or None.
    pub fn observe(
        &mut self,
        wall: chrono::DateTime<chrono::Utc>,
        mono: Instant,
    ) -> Option<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)> {
        let expected =
            TimeDelta::from_std(mono.saturating_duration_since(self.last_mono)).unwrap_or_default();
        let should_be = self.last_wall + expected;
        let drift = wall - should_be;
        self.last_wall = wall;
        self.last_mono = mono;
        (drift > JUMP_THRESHOLD || drift < -JUMP_THRESHOLD).then_some((should_be, wall))
    }
}

impl Engine {
    /// Records a detected clock jump; the next tick plans any windows it skipped.
    pub fn note_clock_jump(
        &mut self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
    ) -> Result<()> {
        let delta = to - from;
        let jump = Event::ClockJump {
            from,
            to,
            delta_s: delta.num_seconds(),
            owner: self.opts.owner.clone(),
        };
        self.store
            .write(|tx| tx.append_event(&NewEvent::of(to, jump)).map(|_| ()))?;
        // Nobody evaluated the schedules across a forward jump: what fell
        // due inside it was missed.
        if to > from {
            self.alive_since = self.alive_since.max(to);
        }
        Ok(())
    }

    /// Runs until `shutdown` resolves, then stops claiming, waits up to `grace`
    /// for running attempts, and ends the rest as stopped by the shutdown
    /// (`run --headless` on SIGINT or SIGTERM).
    pub async fn run_live(
        &mut self,
        shutdown: impl std::future::Future<Output = ()>,
        grace: Duration,
    ) -> Result<()> {
        self.run_live_until(
            async {
                shutdown.await;
                Stopper::Shutdown
            },
            grace,
            None,
        )
        .await
    }

    /// Like [`Engine::run_live`]; `shutdown` says who stopped the scheduler.
    /// Once `stop_now` turns true — before the drain or during it — or when
    /// the grace period runs out, the running attempts are stopped (their
    /// whole process groups) and each end is recorded at once through the
    /// recovery rules: "stopped when the operator quit at …"
    /// ([`CancelCause::OperatorQuit`]: the console's quit dialog; it retries
    /// at once) or "stopped by scheduler shutdown at …"
    /// ([`CancelCause::Shutdown`]: a signal; retryable by the usual rules).
    /// None is left to lease expiry, which is for a crash or a freeze: a
    /// clean stop is never told later as "lost".
    ///
    /// A transient store error (the database locked by another process
    /// beyond the busy timeout; a PostgreSQL ledger unreachable, or a
    /// transaction lost with its connection or its wait for the write lock;
    /// a full disk) is held: see [`Engine::pass`].
    ///
    /// A ledger file deleted or replaced under the scheduler stops it (see
    /// [`Engine::ledger_lost`]).
    pub async fn run_live_until(
        &mut self,
        shutdown: impl std::future::Future<Output = Stopper>,
        grace: Duration,
        mut stop_now: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> Result<()> {
        tokio::pin!(shutdown);
        // `/livez` ages the loop's last progress from now until it ends, however.
        struct LoopAlive;
        impl Drop for LoopAlive {
            fn drop(&mut self) {
                super::tick_time::loop_ended();
            }
        }
        super::tick_time::progressed();
        let _alive = LoopAlive;
        let mut alarm = Alarm::new();
        crate::process::prestart_supervisor();
        let mut log_after = self.store.read(|tx| tx.max_event_id())?;
        let mut jumps = JumpDetector::new(self.clock.now(), Instant::now());
        let by = loop {
            if let Err(e) = self.store.check_file() {
                return self.ledger_lost(e, &mut alarm).await;
            }
            if let Some((from, to)) = jumps.observe(self.clock.now(), Instant::now()) {
                let noted = self.note_clock_jump(from, to);
                self.hold(noted)?;
            }
            let began = Instant::now();
            let passed = blocking(|| self.pass());
            super::tick_time::observe(began.elapsed());
            super::tick_time::progressed();
            passed?;
            log_after = self.log_events(log_after).unwrap_or(log_after);
            let now = self.clock.now();
            // Unknown (the database away for a moment): look again after a poll.
            let next = match self.next_wakeup() {
                Err(super::EngineError::Store(e)) if e.is_transient() => None,
                other => other?,
            };
            let due = next
                .map(|t| (t - now).to_std().unwrap_or(Duration::ZERO))
                .filter(|d| *d <= POLL);
            let wait = due.unwrap_or(POLL);
            let until = Instant::now() + wait;
            tokio::select! {
                by = &mut shutdown => break by,
                _ = alarm.until(until) => {}
                report = self.recv_report() => {
                    if let Some(r) = report {
                        // Lost with its transaction: the run stays running
                        // until its lease lapses and a sweep ends it.
                        let handled = self.handle(r);
                        self.hold(handled)?;
                    }
                }
            }
        };
        self.stop_claiming();
        tracing::info!(running = self.running_count(), "stopping: claiming nothing new");
        let deadline = Instant::now() + grace;
        let now_wanted =
            |rx: &Option<tokio::sync::watch::Receiver<bool>>| rx.as_ref().is_some_and(|r| *r.borrow());
        while self.running_count() > 0 && Instant::now() < deadline && !now_wanted(&stop_now) {
            let left = deadline.saturating_duration_since(Instant::now());
            let changed = async {
                match stop_now.as_mut() {
                    Some(rx) => {
                        if rx.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                report = self.recv_report() => {
                    if let Some(r) = report {
                        let handled = self.handle(r);
                        self.hold(handled)?;
                    }
                }
                _ = changed => {}
                _ = alarm.until(Instant::now() + left.min(POLL)) => {
                    let ticked = self.tick_blocking();
                    self.hold(ticked)?;
                }
            }
        }
        if self.running_count() > 0 {
            let at = self.clock.now();
            // "Stop now" is only ever the operator's (the quit dialog).
            let cause = if by == Stopper::Operator || now_wanted(&stop_now) {
                CancelCause::OperatorQuit(at)
            } else {
                tracing::warn!(
                    running = self.running_count(),
                    "grace period over; stopping the agents and recording their attempts as stopped by scheduler shutdown"
                );
                CancelCause::Shutdown(at)
            };
            self.stop_running(cause, &mut alarm).await?;
        }
        let left = self.running_count();
        if left > 0 {
            // Only an agent that outlived SIGKILL, or a report lost with its
            // transaction: nothing more this process can record.
            tracing::warn!(
                left,
                "attempts not recorded as stopped; leaving them to lease expiry"
            );
        }
        let now = self.clock.now();
        let stopped = Event::SchedulerStopped {
            owner: self.opts.owner.clone(),
            left_running: left,
        };
        self.store
            .write(|tx| tx.append_event(&NewEvent::of(now, stopped)).map(|_| ()))?;
        self.registry_stopped(now)?;
        self.log_events(log_after)?;
        self.abandon_running();
        Ok(())
    }

    /// The scheduler stops with attempts still running: each is cancelled
    /// (its whole process group: SIGTERM, then SIGKILL) and its end recorded
    /// at once, with `cause`'s words and instant, through the recovery rules,
    /// so nothing is left to lease expiry.
    async fn stop_running(&mut self, cause: CancelCause, alarm: &mut Alarm) -> Result<()> {
        for r in self.running.values_mut() {
            // One already being stopped (a budget, the kill switch, fenced)
            // keeps its own cause: it is told as what it was.
            if r.cancel.is_none() {
                r.cancel = Some(cause.clone());
            }
            r.handle.cancel();
        }
        let deadline = Instant::now() + STOP_AGENTS_WITHIN;
        while self.running_count() > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            tokio::select! {
                report = self.recv_report() => match report {
                    Some(r) => {
                        // A store error here loses only this report: the
                        // others are still recorded, this run goes to lease expiry.
                        let handled = self.handle(r);
                        self.hold(handled)?;
                    }
                    None => break,
                },
                _ = alarm.until(deadline) => break,
            }
        }
        Ok(())
    }

    /// Stops the agents of a scheduler that lost its ledger file (their whole
    /// process groups: SIGTERM, then SIGKILL) and waits for them to end, so no
    /// agent of this scheduler keeps acting once it is gone. Their runs are not
    /// touched (nothing can be recorded where anyone looks): they stay
    /// `running` until the lease expires and a scheduler marks the attempt
    /// lost (then retry, or a human if a side-effect step is uncertain),
    /// exactly as after a crash.
    async fn stop_agents(&mut self, alarm: &mut Alarm) {
        let mut open: std::collections::HashSet<(i64, i64)> = self
            .running
            .iter()
            .map(|(run, r)| {
                r.handle.cancel();
                (*run, r.token)
            })
            .collect();
        let deadline = Instant::now() + STOP_AGENTS_WITHIN;
        while !open.is_empty() {
            tokio::select! {
                report = self.recv_report() => match report {
                    Some(r) if matches!(r.signal, AttemptSignal::Ended { .. }) => {
                        open.remove(&(r.run_id, r.token));
                    }
                    Some(_) => {}
                    None => break,
                },
                _ = alarm.until(deadline) => break,
            }
        }
        if !open.is_empty() {
            tracing::warn!(left = open.len(), "agents still running after SIGKILL");
        }
    }

    /// The ledger file was deleted, moved away or replaced under this
    /// scheduler ([`crate::store::Store::check_file`]): it says so (an error
    /// in the log, an alert `ledger_missing` or `ledger_replaced` to the
    /// sink; not to the ledger, which nobody reads any more), stops its
    /// agents and returns the error, which ends the process (exit 2).
    ///
    /// Why stop rather than hold: from then on every write reaches a file no
    /// other process sees (deleted), or a different ledger than the one the
    /// CLI, the console and other schedulers use (replaced), so its claims
    /// would fence nobody and its runs could happen twice. The file will not
    /// come back under this open connection; a restart (a supervisor's,
    /// or the operator's once the file is restored) opens what is at the
    /// path. Its agents are stopped because no result of theirs could be
    /// recorded where anyone looks.
    async fn ledger_lost(&mut self, e: crate::store::StoreError, alarm: &mut Alarm) -> Result<()> {
        let now = self.clock.now();
        if let crate::store::StoreError::FileChanged(what) = &e {
            tracing::error!(error = %e, "stopping: the ledger file is not the one this scheduler opened");
            let alert = crate::core::event::Alert::scheduler_wide(
                what.alert_kind(),
                format!(
                    "{what}; scheduler {} stopped its agents and exited (restart it to open the ledger at its path)",
                    self.opts.owner
                ),
                now,
            );
            self.send_alert(&alert, now);
        }
        self.stop_claiming();
        self.stop_agents(alarm).await;
        self.abandon_running();
        Err(e.into())
    }

    /// `tick` may block on gates and SQLite. Its duration goes to
    /// `/metrics` ([`super::tick_time`]).
    fn tick_blocking(&mut self) -> Result<()> {
        let began = Instant::now();
        let ticked = blocking(|| self.tick());
        super::tick_time::observe(began.elapsed());
        super::tick_time::progressed();
        ticked
    }

    /// Mirrors new trace events to the log (tracing), so `run --headless` shows
    /// what happens; the store stays the record.
    fn log_events(&self, after: i64) -> Result<i64> {
        if !tracing::enabled!(tracing::Level::INFO) {
            return Ok(self.store.read(|tx| tx.max_event_id())?);
        }
        let events = self.store.read(|tx| {
            tx.events(&EventFilter {
                after_id: Some(after),
                limit: Some(2000),
                ..EventFilter::default()
            })
        })?;
        let mut last = after;
        for e in events {
            last = last.max(e.id);
            let quiet = matches!(e.kind.as_str(), "gate" | "decision" | "heartbeat" | "tick");
            let detail = e.detail.to_string();
            let run = e.run_id.unwrap_or(0);
            let schedule = e.schedule.as_deref().unwrap_or("-");
            if quiet {
                tracing::debug!(kind = %e.kind, schedule, run, %detail, "event");
            } else if matches!(
                e.kind.as_str(),
                "failed" | "dead_lettered" | "alert" | "lost" | "circuit_opened" | "scheduler_lost"
            ) {
                tracing::warn!(kind = %e.kind, schedule, run, %detail, "event");
            } else {
                tracing::info!(kind = %e.kind, schedule, run, %detail, "event");
            }
        }
        Ok(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (real time, bounded) until the alarm thread has rung.
    fn wait_for_a_ring(alarm: &Alarm) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while alarm.rung.is_empty() {
            assert!(Instant::now() < deadline, "the alarm never rang");
            std::thread::yield_now();
        }
    }

    #[test]
    fn the_alarm_ends_a_wait_at_its_instant_and_not_at_an_earlier_wait_s_ring() {
        // As the live loop runs: on a multi-threaded runtime's block_on thread.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut alarm = Alarm::new();
            // An instant already past: at once, nothing asked of the thread.
            alarm.until(Instant::now()).await;
            assert_eq!(alarm.last, 0);

            let at = Instant::now() + Duration::from_millis(20);
            alarm.until(at).await;
            assert!(Instant::now() >= at);

            // A wait given up (another branch of the loop's select won) still
            // rings; the next wait must not end at that ring.
            let given_up = Instant::now() + Duration::from_millis(5);
            tokio::select! {
                biased;
                _ = alarm.until(given_up) => unreachable!("5 ms are not over at its first poll"),
                _ = std::future::ready(()) => {}
            }
            assert_eq!(alarm.last, 2, "the given-up wait was asked of the thread");
            wait_for_a_ring(&alarm);
            let later = Instant::now() + Duration::from_millis(30);
            alarm.until(later).await;
            assert!(Instant::now() >= later, "ended at the earlier wait's ring");
        });
    }

    fn t(s: &str) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    #[test]
    fn wall_time_that_moves_with_the_monotonic_clock_is_no_jump() {
        let m0 = Instant::now();
        let mut d = JumpDetector::new(t("2026-06-01T09:00:00Z"), m0);
        // 10 minutes pass on both clocks; a few seconds of NTP slew is fine.
        assert_eq!(
            d.observe(t("2026-06-01T09:10:00Z"), m0 + Duration::from_secs(600)),
            None
        );
        assert_eq!(
            d.observe(t("2026-06-01T09:10:29Z"), m0 + Duration::from_secs(600)),
            None
        );
    }

    #[test]
    fn a_forward_and_a_backward_step_are_jumps() {
        let m0 = Instant::now();
        let mut d = JumpDetector::new(t("2026-06-01T09:00:00Z"), m0);
        // One second of real time, three hours of wall time.
        assert_eq!(
            d.observe(t("2026-06-01T12:00:01Z"), m0 + Duration::from_secs(1)),
            Some((t("2026-06-01T09:00:01Z"), t("2026-06-01T12:00:01Z")))
        );
        // Then the wall clock is set back an hour.
        assert_eq!(
            d.observe(t("2026-06-01T11:00:02Z"), m0 + Duration::from_secs(2)),
            Some((t("2026-06-01T12:00:02Z"), t("2026-06-01T11:00:02Z")))
        );
        // A suspended laptop: the monotonic clock stood still for 8 hours.
        assert!(
            d.observe(t("2026-06-01T19:00:03Z"), m0 + Duration::from_secs(3))
                .is_some()
        );
    }
}
