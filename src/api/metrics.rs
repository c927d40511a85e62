//! `GET /metrics`: Prometheus (OpenMetrics text) exposition.
//!
//! Counters come from the trace: at each scrape the events appended since the
//! last one are read (by id, only the kinds that count) and tallied by
//! [`crate::trace::tally`], so a counter moves exactly when the store records
//! what it counts, whichever process did it. They start at zero when this
//! server starts; with several schedulers on one database each serving
//! `/metrics`, every one counts the whole database's work (aggregate with
//! `max`, not `sum`). Gauges are read from the store at the scrape.
//!
//! Labels are `tenant`, `schedule` and the few the metric names (`state`,
//! `reason`, `outcome`, `class`, `gate`, `result`, `sink`, `owner`): never a
//! run id or a window key, so series stay bounded by the config.

use crate::config::Config;
use crate::config::model::AlertSink;
use crate::store::types::{CircuitState, EventFilter, RunState};
use crate::store::{Store, StoreError};
use crate::trace::tally::{COUNTED_KINDS, Count, known, tally};
use chrono::{DateTime, Utc};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(&'static str, String)>;
type FloatCounter = Counter<f64, AtomicU64>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// Events read per page, and at most per scrape (the rest wait for the next).
const PAGE: usize = 5_000;
const MAX_PER_SCRAPE: usize = 200_000;
/// Claim lateness buckets, seconds: a tick is half a second, a gate check minutes.
const LATENESS_BUCKETS: [f64; 11] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 3600.0];

/// The counters, kept between scrapes.
struct Counters {
    windows_opened: Family<Labels, Counter>,
    runs_finished: Family<Labels, Counter>,
    windows_skipped: Family<Labels, Counter>,
    attempts: Family<Labels, Counter>,
    gate_checks: Family<Labels, Counter>,
    start_lateness: Histogram,
    alerts: Family<Labels, Counter>,
    cost: Family<Labels, FloatCounter>,
    tokens: Family<Labels, Counter>,
}

struct Tail {
    /// The newest event id tallied.
    after: i64,
    counters: Counters,
}

/// The `/metrics` state of one server.
pub struct Metrics {
    tail: Mutex<Tail>,
    sink: &'static str,
}

fn sink_kind(cfg: &Config) -> &'static str {
    match &cfg.scheduler.alert {
        None => "none",
        Some(AlertSink::File { .. }) => "file",
        Some(AlertSink::Webhook { .. }) => "webhook",
        Some(AlertSink::Command { .. }) => "command",
    }
}

fn owner_labels(tenant: &Option<String>, schedule: &Option<String>) -> Labels {
    vec![
        ("tenant", tenant.clone().unwrap_or_default()),
        ("schedule", schedule.clone().unwrap_or_default()),
    ]
}

fn with(mut labels: Labels, more: &[(&'static str, &str)]) -> Labels {
    labels.extend(more.iter().map(|(k, v)| (*k, (*v).to_string())));
    labels
}

/// The series of `labels` made to exist (at 0 when new).
fn touch<M: Default>(family: &Family<Labels, M>, labels: &Labels) {
    let _ = family.get_or_create(labels);
}

fn seconds(t: DateTime<Utc>) -> f64 {
    t.timestamp_millis() as f64 / 1000.0
}

impl Metrics {
    /// Counting from the store's newest event on.
    pub fn new(store: &Store, cfg: &Config) -> Result<Metrics, StoreError> {
        let after = store.read(|tx| tx.max_event_id())?;
        Ok(Metrics {
            tail: Mutex::new(Tail {
                after,
                counters: Counters {
                    windows_opened: Family::default(),
                    runs_finished: Family::default(),
                    windows_skipped: Family::default(),
                    attempts: Family::default(),
                    gate_checks: Family::default(),
                    start_lateness: Histogram::new(LATENESS_BUCKETS),
                    alerts: Family::default(),
                    cost: Family::default(),
                    tokens: Family::default(),
                },
            }),
            sink: sink_kind(cfg),
        })
    }

    /// Tallies the events appended since the last call.
    fn catch_up(&self, store: &Store, tail: &mut Tail) -> Result<(), StoreError> {
        let sink = self.sink;
        store.read(|tx| {
            let mut read = 0;
            while read < MAX_PER_SCRAPE {
                let page = tx.events(&EventFilter {
                    after_id: Some(tail.after),
                    kinds: COUNTED_KINDS.iter().map(|k| k.to_string()).collect(),
                    limit: Some(PAGE),
                    ..EventFilter::default()
                })?;
                // Only an empty page is the end: a page may end a few events
                // short of PAGE with more to read (one row's folded events
                // are not cut in two).
                let Some(last) = page.last() else { break };
                tail.after = last.id;
                read += page.len();
                for row in page {
                    let owner = owner_labels(&row.tenant, &row.schedule);
                    let c = &tail.counters;
                    for count in tally(&row.event(), row.run_id) {
                        match count {
                            Count::WindowOpened => {
                                c.windows_opened.get_or_create(&owner).inc();
                            }
                            Count::RunFinished(state) => {
                                c.runs_finished
                                    .get_or_create(&with(owner.clone(), &[("state", state)]))
                                    .inc();
                            }
                            Count::WindowSkipped(reason) => {
                                c.windows_skipped
                                    .get_or_create(&with(owner.clone(), &[("reason", reason)]))
                                    .inc();
                            }
                            Count::AttemptEnded {
                                outcome,
                                class,
                                run,
                                attempt,
                            } => {
                                c.attempts
                                    .get_or_create(&with(
                                        owner.clone(),
                                        &[("outcome", outcome), ("class", class)],
                                    ))
                                    .inc();
                                let usage = match run {
                                    Some(run) => tx.attempt_usage(run, attempt)?,
                                    None => None,
                                };
                                if let Some((tokens, cost)) = usage {
                                    c.tokens
                                        .get_or_create(&owner)
                                        .inc_by(u64::try_from(tokens).unwrap_or(0));
                                    if cost > 0.0 {
                                        c.cost.get_or_create(&owner).inc_by(cost);
                                    }
                                }
                            }
                            Count::GateChecked { gate, result } => {
                                c.gate_checks
                                    .get_or_create(&with(
                                        owner.clone(),
                                        &[("gate", &gate), ("result", result)],
                                    ))
                                    .inc();
                            }
                            Count::StartLateness(s) => c.start_lateness.observe(s),
                            Count::Alert(outcome) => {
                                c.alerts
                                    .get_or_create(&vec![
                                        ("sink", sink.to_string()),
                                        ("outcome", outcome.to_string()),
                                    ])
                                    .inc();
                            }
                        }
                    }
                }
            }
            Ok(())
        })
    }

    /// Zero series for what `cfg` says can be counted: each schedule's
    /// label values, each alert outcome. A counter that exists at 0 gives
    /// `rate()` and absence alerts a 0 instead of "no data" (and a reload's
    /// new schedule gets its series at the next scrape).
    fn seed(&self, c: &Counters, cfg: &Config) {
        for s in &cfg.schedules {
            let owner = vec![("tenant", s.tenant.clone()), ("schedule", s.id.clone())];
            touch(&c.windows_opened, &owner);
            touch(&c.cost, &owner);
            touch(&c.tokens, &owner);
            for state in known::FINISHED {
                touch(&c.runs_finished, &with(owner.clone(), &[("state", state)]));
            }
            for reason in known::skip_reasons() {
                touch(&c.windows_skipped, &with(owner.clone(), &[("reason", reason)]));
            }
            for (outcome, class) in known::ATTEMPT_ENDS {
                touch(
                    &c.attempts,
                    &with(owner.clone(), &[("outcome", outcome), ("class", class)]),
                );
            }
            for g in &s.gates {
                for result in known::GATE_RESULTS {
                    touch(
                        &c.gate_checks,
                        &with(owner.clone(), &[("gate", &g.name), ("result", result)]),
                    );
                }
            }
        }
        for outcome in known::ALERT_OUTCOMES {
            touch(
                &c.alerts,
                &vec![("sink", self.sink.to_string()), ("outcome", outcome.to_string())],
            );
        }
    }

    /// The exposition at `now`: counters caught up with the trace, gauges read now.
    pub fn render(&self, store: &Store, cfg: &Config, now: DateTime<Utc>) -> Result<String, StoreError> {
        let mut tail = self
            .tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.catch_up(store, &mut tail)?;
        self.seed(&tail.counters, cfg);
        let mut reg = Registry::with_prefix("agentcron");
        let c = &tail.counters;
        reg.register("windows_opened", help("windows_opened"), c.windows_opened.clone());
        reg.register("runs_finished", help("runs_finished"), c.runs_finished.clone());
        reg.register(
            "windows_skipped",
            help("windows_skipped"),
            c.windows_skipped.clone(),
        );
        reg.register("attempts", help("attempts"), c.attempts.clone());
        reg.register("gate_checks", help("gate_checks"), c.gate_checks.clone());
        reg.register_with_unit(
            "start_lateness",
            "How long after its window was due its agent started",
            Unit::Seconds,
            c.start_lateness.clone(),
        );
        reg.register("alerts", help("alerts"), c.alerts.clone());
        reg.register_with_unit(
            "tick_duration",
            "How long each tick of this process's live scheduler took",
            Unit::Seconds,
            crate::engine::tick_time::histogram(),
        );
        reg.register("cost_usd", help("cost_usd"), c.cost.clone());
        reg.register("tokens", help("tokens"), c.tokens.clone());
        drop(tail);
        self.gauges(store, cfg, now, &mut reg)?;
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &reg);
        declare_empty(&mut out);
        Ok(out)
    }

    fn gauges(
        &self,
        store: &Store,
        cfg: &Config,
        now: DateTime<Utc>,
        reg: &mut Registry,
    ) -> Result<(), StoreError> {
        let status = store.read(|tx| {
            let (schedulers, summary) = crate::status::registry(tx, now)?;
            let schedules = crate::status::schedules(tx, cfg, false, now)?;
            Ok((
                schedulers,
                summary,
                schedules,
                tx.count_by_state()?,
                tx.switch("kill")?,
                tx.backfill_pending()?,
            ))
        })?;
        let (schedulers, summary, schedules, counts, kill, backfill) = status;
        let count = |s: RunState| counts.iter().find(|(st, _)| *st == s).map_or(0, |(_, n)| *n);

        // Every state, 0 when no run is in it.
        let runs: Family<Labels, Gauge> = Family::default();
        for state in RunState::ALL {
            runs.get_or_create(&vec![("state", state.as_str().to_string())])
                .set(i64::try_from(count(state)).unwrap_or(i64::MAX));
        }
        reg.register("runs", "Runs now in each state", runs);

        let next: Family<Labels, FloatGauge> = Family::default();
        let success: Family<Labels, FloatGauge> = Family::default();
        let circuit: Family<Labels, Gauge> = Family::default();
        for s in &schedules {
            let owner = vec![("tenant", s.tenant.clone()), ("schedule", s.id.clone())];
            if let Some(f) = &s.next_fire {
                next.get_or_create(&owner).set(seconds(f.at));
            }
            // 0 (the epoch) until its first success: "how long since" alerts
            // see a schedule that never succeeded as very stale, not absent.
            success
                .get_or_create(&owner)
                .set(s.last_success.map_or(0.0, seconds));
            circuit
                .get_or_create(&owner)
                .set(i64::from(s.circuit != CircuitState::Closed));
        }
        reg.register(
            "schedule_next_fire_timestamp_seconds",
            help("schedule_next_fire_timestamp_seconds"),
            next,
        );
        reg.register(
            "schedule_last_success_timestamp_seconds",
            help("schedule_last_success_timestamp_seconds"),
            success,
        );
        reg.register("circuit_open", help("circuit_open"), circuit);

        let single = |reg: &mut Registry, name: &str, help: &str, v: i64| {
            let g: Gauge = Gauge::default();
            g.set(v);
            reg.register(name, help, g);
        };
        single(
            reg,
            "kill_switch",
            "1 while the global kill switch is on",
            i64::from(kill.is_some_and(|k| k.on)),
        );
        let n = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
        single(
            reg,
            "approvals_waiting",
            "Runs waiting for a human (needs_human)",
            n(count(RunState::NeedsHuman)),
        );
        single(
            reg,
            "dead_letters",
            "Runs in the dead-letter queue",
            n(count(RunState::Dead)),
        );
        single(
            reg,
            "backfill_pending",
            "Catch-up runs queued and not finished",
            n(backfill),
        );
        single(
            reg,
            "schedulers_alive",
            "Schedulers seen within three heartbeats",
            i64::try_from(summary.alive).unwrap_or(i64::MAX),
        );
        let seen: Family<Labels, FloatGauge> = Family::default();
        for r in schedulers.iter().filter(|r| r.stopped_at.is_none()) {
            seen.get_or_create(&vec![("owner", r.owner.clone())])
                .set(seconds(r.last_seen));
        }
        reg.register(
            "scheduler_last_seen_timestamp_seconds",
            help("scheduler_last_seen_timestamp_seconds"),
            seen,
        );
        Ok(())
    }
}

/// Each family's help, the one text for its registration and for its
/// declaration when it has no series ([`declare_empty`]).
const HELP: [(&str, &str); 12] = [
    ("windows_opened", "Windows opened (runs created to be decided)"),
    ("windows_skipped", "Windows skipped, by what skipped them"),
    ("runs_finished", "Runs that reached a terminal state, by state"),
    ("attempts", "Attempts that ended, by outcome and error class"),
    ("gate_checks", "Readiness gate checks, by gate and result"),
    ("alerts", "Alerts raised, and those the sink refused"),
    ("cost_usd", "Cost agents reported, in USD"),
    ("tokens", "Tokens agents reported"),
    (
        "schedule_next_fire_timestamp_seconds",
        "When each time-triggered schedule fires next (Unix time)",
    ),
    (
        "schedule_last_success_timestamp_seconds",
        "When each schedule last succeeded (Unix time)",
    ),
    (
        "circuit_open",
        "1 while a schedule's circuit is open or half-open",
    ),
    (
        "scheduler_last_seen_timestamp_seconds",
        "When each scheduler not stopped cleanly was last seen (Unix time)",
    ),
];

/// The help of family `name` (from [`HELP`]).
fn help(name: &str) -> &'static str {
    HELP.iter().find(|(n, _)| *n == name).map_or("", |(_, h)| h)
}

/// The families whose series depend on what exists (labels from schedules,
/// gates, schedulers), with their type: with none, the encoder writes
/// nothing for them. Each is still declared (HELP and TYPE), so every
/// documented family is always in the exposition.
const SOMETIMES_EMPTY: [(&str, &str); 12] = [
    ("windows_opened", "counter"),
    ("windows_skipped", "counter"),
    ("runs_finished", "counter"),
    ("attempts", "counter"),
    ("gate_checks", "counter"),
    ("alerts", "counter"),
    ("cost_usd", "counter"),
    ("tokens", "counter"),
    ("schedule_next_fire_timestamp_seconds", "gauge"),
    ("schedule_last_success_timestamp_seconds", "gauge"),
    ("circuit_open", "gauge"),
    ("scheduler_last_seen_timestamp_seconds", "gauge"),
];

/// Adds HELP and TYPE for each of [`SOMETIMES_EMPTY`] the exposition lacks,
/// before its `# EOF`.
fn declare_empty(out: &mut String) {
    let mut missing = String::new();
    for (name, kind) in SOMETIMES_EMPTY {
        if !out.contains(&format!("# TYPE agentcron_{name} ")) {
            let help = help(name);
            missing.push_str(&format!(
                "# HELP agentcron_{name} {help}.\n# TYPE agentcron_{name} {kind}\n"
            ));
        }
    }
    let at = out.rfind("# EOF").unwrap_or(out.len());
    out.insert_str(at, &missing);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A family's HELP is one text whether it has series or is only
    /// declared: every family declared when empty has its help in [`HELP`].
    #[test]
    fn every_sometimes_empty_family_has_one_help() {
        for (name, _) in SOMETIMES_EMPTY {
            assert!(!help(name).is_empty(), "{name} has no help in HELP");
        }
    }

    /// Issue 52: with no gate, no time-triggered schedule and no scheduler
    /// yet, every family docs/OPERATIONS.md documents is still declared.
    #[test]
    fn every_documented_family_is_declared_with_nothing_to_count() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::config::load_str(
            "[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n\n\
             [[schedule]]\nid = \"on-deploy\"\nagent = \"a\"\non_event = \"deploy\"\n",
            &dir.path().join("agentcron.toml"),
        )
        .unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let metrics = Metrics::new(&store, &cfg).unwrap();
        let now = "2026-06-01T00:00:00Z".parse().unwrap();
        let out = metrics.render(&store, &cfg, now).unwrap();
        let doc = include_str!("../../docs/OPERATIONS.md");
        let mut checked = 0;
        for line in doc.lines().filter(|l| l.starts_with("| `agentcron_")) {
            let name = line.split('`').nth(1).unwrap_or_default();
            let family = name.strip_suffix("_total").unwrap_or(name);
            assert!(
                out.contains(&format!("# TYPE {family} ")),
                "{family} is declared:\n{out}"
            );
            checked += 1;
        }
        assert!(checked >= 15, "the metrics table was read ({checked})");
        assert!(out.ends_with("# EOF\n"), "{out}");
    }
}
