//! `agentcron explain SCHEDULE [--window KEY]`: "why did it (not) run?",
//! answered in plain language from the events alone (DESIGN.md "Trace").
//!
//! The answer is a headline (what happened to the window, and why) and the
//! story behind it: one clause per thing that mattered, in order — window
//! opened, gates that waited (how often, the last reason, when they passed),
//! switches that held it (and who set them), claims, attempts, retries, the
//! human gate, the dead-letter queue, the window closing, catch-up. Repeated
//! checks are counted, never listed. A window with no run at all is explained
//! from the scheduler's own trail: when it was last alive, when it started
//! again, what the catch-up planner decided.

use super::db::{self, open_for_cli};
use super::exit;
use crate::config::Config;
use crate::config::model::{Anchor, ScheduleConfig, TriggerConfig};
use crate::store::Tx;
use crate::store::types::{Event, EventFilter, Run, RunFilter, RunState};
use crate::time::fire::FireRule;
use crate::time::{Clock, SystemClock};
use chrono::{DateTime, NaiveDate, TimeDelta, Utc, Weekday};
use chrono_tz::Tz;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Schedule-level and global events that explain a run without belonging to it.
const CONTEXT_KINDS: [&str; 5] = [
    "switch_changed",
    "circuit_opened",
    "circuit_half_open",
    "circuit_closed",
    "catchup_planned",
];
/// Signs that a scheduler was alive.
const ALIVE_KINDS: [&str; 2] = ["tick", "scheduler_started"];
/// A window opened later than this after its due instant was opened late.
const LATE: TimeDelta = TimeDelta::minutes(2);
/// No sign of life for longer than this is a gap worth naming.
const QUIET: TimeDelta = TimeDelta::minutes(5);
/// Bound on fires enumerated when looking for windows due without a run.
const MAX_FIRES: usize = 100_000;

pub struct Options<'a> {
    pub schedule: &'a str,
    pub window: Option<&'a str>,
}

pub fn run(config: &Path, db: Option<&Path>, opts: &Options<'_>) -> i32 {
    let (store, cfg) = match open_for_cli(config, db, false) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let now = SystemClock.now();
    let ctx = Ctx {
        schedule: opts.schedule,
        cfg: cfg.as_ref(),
        sched: cfg.as_ref().and_then(|c| c.schedule(opts.schedule)),
        tz: db::zone(cfg.as_ref(), Some(opts.schedule)),
        now,
    };
    match store.read(|tx| ctx.answer(tx, opts.window)) {
        Ok((text, found)) => {
            print!("{text}");
            if found { exit::OK } else { exit::DOES_NOT_HOLD }
        }
        Err(e) => {
            eprintln!("agentcron explain: {e}");
            exit::USAGE
        }
    }
}

struct Ctx<'a> {
    schedule: &'a str,
    cfg: Option<&'a Config>,
    sched: Option<&'a ScheduleConfig>,
    tz: Tz,
    now: DateTime<Utc>,
}

type StoreResult<T> = crate::store::Result<T>;

impl Ctx<'_> {
    /// The explanation, and whether the window (or the schedule) has a run.
    fn answer(&self, tx: &Tx<'_>, window: Option<&str>) -> StoreResult<(String, bool)> {
        let run = match window {
            Some(key) => self.find_window(tx, key)?,
            None => tx
                .runs(&RunFilter {
                    schedule: Some(self.schedule.to_string()),
                    newest_first: true,
                    limit: Some(1),
                    ..RunFilter::default()
                })?
                .pop(),
        };
        match (run, window) {
            (Some(run), _) => {
                let mut text = self.explain_run(tx, &run)?;
                if window.is_none() {
                    text.push_str(&self.newer_due_note(&run));
                }
                Ok((text, true))
            }
            (None, Some(key)) => Ok((self.never_opened(tx, key)?, false)),
            (None, None) => Ok((self.no_runs(tx)?, false)),
        }
    }

    fn find_window(&self, tx: &Tx<'_>, key: &str) -> StoreResult<Option<Run>> {
        let tenant = self.sched.map_or("default", |s| s.tenant.as_str());
        if let Some(r) = tx.find_run(tenant, self.schedule, key)? {
            return Ok(Some(r));
        }
        // Another tenant, or a config that changed since.
        Ok(tx
            .runs(&RunFilter {
                schedule: Some(self.schedule.to_string()),
                ..RunFilter::default()
            })?
            .into_iter()
            .find(|r| r.window_key == key))
    }

    fn story(&self, day: DateTime<Utc>) -> Story {
        Story {
            tz: self.tz,
            day: day.with_timezone(&self.tz).date_naive(),
            clauses: vec![],
            gates: vec![],
            hold: None,
            steps: BTreeMap::new(),
        }
    }

    fn title(&self, key: &str) -> String {
        format!("{} {key} ({})", self.schedule, self.tz.name())
    }

    fn explain_run(&self, tx: &Tx<'_>, run: &Run) -> StoreResult<String> {
        let own = tx.events(&EventFilter {
            run_id: Some(run.id),
            ..EventFilter::default()
        })?;
        let first = own.first().map_or(run.created_at, |e| e.at);
        let last = match own.last() {
            Some(e) if run.state.is_terminal() => e.at,
            Some(e) => e.at.max(self.now),
            None => self.now,
        };
        let context = self.context_events(tx, &own, first, last)?;
        let mut all: Vec<&Event> = own.iter().chain(context.iter()).collect();
        all.sort_by_key(|e| (e.at, e.id));

        let mut story = self.story(run.window_start);
        for e in all {
            story.event(e, run);
            if matches!(e.kind.as_str(), "window_opened" | "skipped" | "expired")
                && e.detail.get("window_key").is_some()
            {
                let due = detail_time(&e.detail, "due").unwrap_or(run.due_at);
                if e.at - due > LATE {
                    let c = self.liveness(tx, due, &story)?;
                    story.push(c);
                }
            }
        }
        story.flush();
        let head = headline(run, &own, &story);
        Ok(render(
            &format!("{}, run {}: {head}", self.title(&run.window_key), run.id),
            &story.clauses,
        ))
    }

    /// Events around the run that explain it: switches turned, the circuit, the
    /// catch-up planner — during the run's life, plus the latest change of each
    /// switch that held it, however long before.
    fn context_events(
        &self,
        tx: &Tx<'_>,
        own: &[Event],
        first: DateTime<Utc>,
        last: DateTime<Utc>,
    ) -> StoreResult<Vec<Event>> {
        let candidates: Vec<Event> = tx
            .events(&EventFilter {
                kinds: CONTEXT_KINDS.iter().map(|k| k.to_string()).collect(),
                ..EventFilter::default()
            })?
            .into_iter()
            .filter(|e| e.run_id.is_none())
            .filter(|e| match e.schedule.as_deref() {
                None => e.kind == "switch_changed",
                Some(s) => s == self.schedule,
            })
            .collect();
        let mut keep: Vec<Event> = vec![];
        for hold in own.iter().filter(|e| e.kind == "switch_held") {
            let switch = hold.detail["switch"].as_str().unwrap_or("");
            let cause = candidates.iter().rfind(|c| {
                let caused = match (switch, c.kind.as_str()) {
                    ("kill" | "paused", "switch_changed") => {
                        c.detail["name"] == switch && c.detail["on"] == Value::Bool(true)
                    }
                    ("circuit", "circuit_opened" | "circuit_half_open") => true,
                    _ => false,
                };
                caused && c.at <= hold.at && c.at < first
            });
            if let Some(c) = cause
                && !keep.iter().any(|k| k.id == c.id)
            {
                keep.push(c.clone());
            }
        }
        keep.extend(candidates.into_iter().filter(|c| c.at >= first && c.at <= last));
        Ok(keep)
    }

    /// Was a scheduler alive around `due`: the last sign of life before, the
    /// first after, a quiet gap between them and a restart ending it.
    fn liveness(&self, tx: &Tx<'_>, due: DateTime<Utc>, story: &Story) -> StoreResult<String> {
        let before = last_alive_before(tx, due)?;
        let after = first_alive_from(tx, due, &ALIVE_KINDS)?;
        let restart = first_alive_from(tx, due, &["scheduler_started"])?;
        let who = |e: &Event| {
            let owner = e.detail["owner"].as_str().unwrap_or("a scheduler");
            match e.kind.as_str() {
                "scheduler_started" => format!("{owner} started"),
                _ => format!("{owner} ticked"),
            }
        };
        let text = match (before, after) {
            (None, None) => "no scheduler has recorded any activity in this database".to_string(),
            (None, Some(a)) => format!(
                "no scheduler had run on this database before then; the first sign of life is {} at {}",
                who(&a),
                story.full(a.at)
            ),
            (Some(b), None) => format!("no scheduler activity since {} at {}", who(&b), story.full(b.at)),
            (Some(b), Some(a)) if a.at - b.at > QUIET => {
                let mut t = format!(
                    "no scheduler activity recorded between {} ({}) and {} ({})",
                    story.full(b.at),
                    who(&b),
                    story.full(a.at),
                    who(&a),
                );
                t.push_str(&format!(" — a gap of {}", human(a.at - b.at)));
                if let Some(r) = restart.filter(|r| r.id != a.id && r.at - a.at < QUIET) {
                    t.push_str(&format!("; {} at {}", who(&r), story.full(r.at)));
                }
                t
            }
            (Some(b), Some(a)) => format!(
                "a scheduler was running then ({} at {}, {} at {})",
                who(&b),
                story.full(b.at),
                who(&a),
                story.full(a.at)
            ),
        };
        Ok(text)
    }

    /// A window with no run: when it was due (if the config says), whether a
    /// scheduler was alive then, what catch-up decided since.
    fn never_opened(&self, tx: &Tx<'_>, key: &str) -> StoreResult<String> {
        let mut clauses = vec![];
        let mut head = "no run: this window never opened".to_string();
        let mut due = None;
        match (self.sched, self.cfg) {
            (None, Some(cfg)) => clauses.push(self.not_in_config(cfg)),
            (None, None) => clauses
                .push("without the config (--config) the time this window was due is unknown".to_string()),
            (Some(s), Some(cfg)) => match &s.trigger {
                TriggerConfig::OnEvent { event } | TriggerConfig::AfterEvent { event, .. } => {
                    match tx.posted_event(event, key)? {
                        Some(p) => {
                            head = "no run: the event arrived but no window opened".into();
                            clauses.push(format!(
                                "event {event} with id {key} was posted at {}",
                                self.story(p.arrived_at).full(p.arrived_at)
                            ));
                            due = Some(p.arrived_at);
                        }
                        None => {
                            head = "no run: its event never arrived".into();
                            clauses.push(format!(
                                "no event {event} with id {key} was ever posted (agentcron event post {event} --id {key})"
                            ));
                        }
                    }
                }
                _ => match find_fire(s, cfg, key) {
                    Some(at) => due = Some(at),
                    None => {
                        head = format!("no run: {key} is not a window of {}", self.schedule);
                        clauses.push(format!(
                            "per the config its trigger never opens a window with the key {key}"
                        ));
                    }
                },
            },
            // A schedule without a config is never returned by `Config::schedule`.
            (Some(_), None) => {}
        }
        if let Some(due) = due {
            let story = self.story(due);
            let backlog = tx
                .backlog(self.schedule)?
                .filter(|b| (b.next..=b.until).contains(&due));
            if due > self.now {
                head = format!("not yet: this window is due {}", story.full(due));
            } else if let Some(b) = backlog {
                head = "not yet: planned for catch-up, waiting to be queued".to_string();
                clauses.insert(0, format!("the window was due {}", story.full(due)));
                clauses.push(format!(
                    "windows due {} to {} are caught up oldest first, as many at a time as \
                     max_concurrency allows, as earlier catch-up runs finish",
                    story.full(b.next),
                    story.full(b.until)
                ));
            } else {
                clauses.insert(0, format!("the window was due {}", story.full(due)));
                clauses.push(self.liveness(tx, due, &story)?);
                let planned = tx
                    .events(&EventFilter {
                        schedule: Some(self.schedule.to_string()),
                        kinds: vec!["catchup_planned".into()],
                        ..EventFilter::default()
                    })?
                    .into_iter()
                    .find(|e| e.at >= due);
                if let Some(p) = planned {
                    clauses.push(catchup_clause(&story, &p));
                }
            }
        }
        clauses.push(self.recent_windows(tx)?);
        Ok(render(&format!("{}: {head}", self.title(key)), &clauses))
    }

    /// The schedule has no runs at all.
    fn no_runs(&self, tx: &Tx<'_>) -> StoreResult<String> {
        let mut clauses = vec![];
        match (self.sched, self.cfg) {
            (None, Some(cfg)) => clauses.push(self.not_in_config(cfg)),
            (Some(s), Some(cfg)) => {
                let cal = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
                if let Some(next) = FireRule::for_schedule(s, cal).and_then(|r| r.next_after(self.now)) {
                    clauses.push(format!(
                        "per the config its next window, {}, opens {}",
                        next.window_key,
                        self.story(next.at).full(next.at)
                    ));
                }
            }
            _ => {}
        }
        let last = tx
            .events(&EventFilter {
                kinds: ALIVE_KINDS.iter().map(|k| k.to_string()).collect(),
                newest_first: true,
                limit: Some(1),
                ..EventFilter::default()
            })?
            .pop();
        clauses.push(match last {
            Some(e) => format!(
                "the last scheduler activity in this database: {} at {}",
                e.kind,
                self.story(e.at).full(e.at)
            ),
            None => "no scheduler has run on this database yet".into(),
        });
        Ok(render(
            &format!("{}: no runs in this database", self.schedule),
            &clauses,
        ))
    }

    fn not_in_config(&self, cfg: &Config) -> String {
        let ids: Vec<&str> = cfg.schedules.iter().map(|s| s.id.as_str()).collect();
        format!(
            "{} is not in {}; schedules there: {}",
            self.schedule,
            cfg.path.display(),
            ids.join(", ")
        )
    }

    fn recent_windows(&self, tx: &Tx<'_>) -> StoreResult<String> {
        let recent = tx.runs(&RunFilter {
            schedule: Some(self.schedule.to_string()),
            newest_first: true,
            limit: Some(3),
            ..RunFilter::default()
        })?;
        if recent.is_empty() {
            return Ok(format!("{} has no runs in this database", self.schedule));
        }
        let list: Vec<String> = recent
            .iter()
            .map(|r| format!("{} ({})", r.window_key, r.state))
            .collect();
        Ok(format!("its most recent windows: {}", list.join(", ")))
    }

    /// Windows the config says were due after the newest run, which has none.
    fn newer_due_note(&self, newest: &Run) -> String {
        let (Some(s), Some(cfg)) = (self.sched, self.cfg) else {
            return String::new();
        };
        if matches!(
            s.trigger,
            TriggerConfig::Every {
                anchor: Anchor::LastStart,
                ..
            }
        ) {
            return String::new();
        }
        let cal = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
        let Some(rule) = FireRule::for_schedule(s, cal) else {
            return String::new();
        };
        let mut count = 0usize;
        let mut latest = None;
        for f in rule
            .fires_after(newest.window_start)
            // A window due this very minute may simply not be opened yet.
            .take_while(|f| f.at <= self.now - LATE)
            .take(MAX_FIRES)
        {
            if f.window_key != newest.window_key {
                count += 1;
                latest = Some(f);
            }
        }
        let Some(f) = latest else {
            return String::new();
        };
        format!(
            "note: {count} later window{} due by now {} no run (the latest, {}, was due {}); \
             see `agentcron explain {} --window {}`\n",
            plural(count),
            if count == 1 { "has" } else { "have" },
            f.window_key,
            self.story(f.at).full(f.at),
            self.schedule,
            f.window_key
        )
    }
}

/// The headline: what happened to the window, and why, in one line.
fn headline(run: &Run, own: &[Event], story: &Story) -> String {
    let reason = run.state_reason.clone().unwrap_or_default();
    let last = |kind: &str| own.iter().rev().find(|e| e.kind == kind);
    let err = run.last_error.clone().unwrap_or_else(|| reason.clone());
    match run.state {
        RunState::Succeeded => {
            let mut h = format!("ran — attempt {} succeeded", run.attempts);
            if let Some(e) = last("succeeded") {
                h.push_str(&format!(" at {}", story.hm(e.at)));
            }
            if run.attempts > 1 {
                let failed = run.attempts - 1;
                h.push_str(&format!(
                    " after {failed} failed attempt{}",
                    plural(failed as usize)
                ));
            }
            h
        }
        RunState::Running => format!(
            "running — attempt {} claimed by {}",
            run.attempts,
            run.lease_owner.as_deref().unwrap_or("a scheduler")
        ),
        RunState::Pending if reason.is_empty() => "not run yet — waiting for its first check".into(),
        RunState::Pending => {
            let next = run
                .next_check_at
                .map(|t| format!("; next check {}", story.hm(t)))
                .unwrap_or_default();
            format!("not run yet — waiting: {reason}{next}")
        }
        RunState::RetryWait => format!(
            "not done — attempt {} failed ({err}); the next attempt is not before {}",
            run.attempts,
            run.not_before.map(|t| story.hm(t)).unwrap_or_default()
        ),
        RunState::NeedsHuman => format!(
            "stopped — needs a human: {reason}; decide with `agentcron approve {id} --reason …` \
             or `agentcron reject {id} --reason …`",
            id = run.id
        ),
        RunState::Failed => format!("failed — {err}"),
        RunState::Dead => format!(
            "failed — dead-lettered after {} attempt{}: {err}; requeue with `agentcron dlq requeue {} --reason …`",
            run.attempts,
            plural(run.attempts as usize),
            run.id
        ),
        RunState::Missed => match last("missed") {
            Some(m) => format!("did not run — missed: {}", str_of(&m.detail, "reason")),
            None => format!("did not run — missed: {reason}"),
        },
        RunState::Expired => format!("did not run — expired: {reason}"),
        RunState::Skipped => {
            if let Some(m) = last("missed") {
                return format!(
                    "did not run — missed: {}; then {reason}",
                    str_of(&m.detail, "reason")
                );
            }
            let (prefix, rest) = reason.split_once(": ").unwrap_or(("", reason.as_str()));
            match prefix {
                "calendar" => format!("did not run — skipped by the calendar: {rest}"),
                "overlap" => format!("did not run — skipped because of overlap: {rest}"),
                "circuit" => format!("did not run — skipped because the circuit breaker is open: {rest}"),
                "coalesced" => format!("did not run — coalesced: {rest}"),
                "catchup" => format!("did not run — not caught up: {rest}"),
                _ => format!("did not run — skipped: {reason}"),
            }
        }
    }
}

/// A gate's checks within one stretch of waiting.
struct GateTally {
    name: String,
    waits: usize,
    last_reason: String,
    passed: Option<DateTime<Utc>>,
    failed: Option<(DateTime<Utc>, String, String)>,
}

/// The clauses of an explanation, built event by event.
struct Story {
    tz: Tz,
    /// Times on this local date are shown as HH:MM.
    day: NaiveDate,
    clauses: Vec<String>,
    /// Gates checked since the last decisive event, in first-checked order.
    gates: Vec<GateTally>,
    /// The switch holding the run now, if any.
    hold: Option<String>,
    /// Latest status of each step, per attempt.
    steps: BTreeMap<u32, Vec<(String, String, bool)>>,
}

impl Story {
    fn push(&mut self, clause: String) {
        if self.clauses.last() != Some(&clause) {
            self.clauses.push(clause);
        }
    }

    fn fmt(&self, t: DateTime<Utc>, time: &str) -> String {
        let local = t.with_timezone(&self.tz);
        if local.date_naive() == self.day {
            local.format(time).to_string()
        } else {
            local.format(&format!("%Y-%m-%d {time}")).to_string()
        }
    }

    /// `09:31`, or `09:31:02` when not on the minute, with the date when it
    /// is not the window's day.
    fn hm(&self, t: DateTime<Utc>) -> String {
        if t.timestamp() % 60 == 0 {
            self.fmt(t, "%H:%M")
        } else {
            self.fmt(t, "%H:%M:%S")
        }
    }

    /// `09:31:02`, with the date when it is not the window's day.
    fn hms(&self, t: DateTime<Utc>) -> String {
        self.fmt(t, "%H:%M:%S")
    }

    /// Always with the date.
    fn full(&self, t: DateTime<Utc>) -> String {
        t.with_timezone(&self.tz).format("%Y-%m-%d %H:%M").to_string()
    }

    fn gate(&mut self, name: &str) -> &mut GateTally {
        let i = match self.gates.iter().position(|g| g.name == name) {
            Some(i) => i,
            None => {
                self.gates.push(GateTally {
                    name: name.to_string(),
                    waits: 0,
                    last_reason: String::new(),
                    passed: None,
                    failed: None,
                });
                self.gates.len() - 1
            }
        };
        &mut self.gates[i]
    }

    /// Writes out the gate tallies: how often each waited, why, when it passed.
    fn flush(&mut self) {
        let gates = std::mem::take(&mut self.gates);
        for g in gates {
            if g.waits > 0 {
                self.push(format!(
                    "gate {} waited {} time{} ({})",
                    g.name,
                    g.waits,
                    plural(g.waits),
                    g.last_reason
                ));
                if let Some(p) = g.passed {
                    self.push(format!("passed {}", self.hm(p)));
                }
            }
            if let Some((at, reason, on_fail)) = g.failed {
                self.push(format!(
                    "gate {} failed {}: {reason} (on_fail = {on_fail})",
                    g.name,
                    self.hm(at)
                ));
            }
        }
    }

    fn steps_note(&self, attempt: u32) -> String {
        let Some(steps) = self.steps.get(&attempt) else {
            return String::new();
        };
        let list: Vec<String> = steps
            .iter()
            .map(|(name, status, side_effect)| {
                let unconfirmed = *side_effect && status == "started";
                format!(
                    "{name} {status}{}",
                    if unconfirmed {
                        " (side effect, unconfirmed)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        format!(" (steps: {})", list.join(", "))
    }

    /// Reads one event into the story.
    fn event(&mut self, e: &Event, run: &Run) {
        let d = &e.detail;
        let attempt = || d.get("attempt").and_then(Value::as_u64).unwrap_or(0);
        match e.kind.as_str() {
            "window_opened" => {
                let due = detail_time(d, "due").unwrap_or(run.due_at);
                let mut c = if str_of(d, "reason") == "catchup" {
                    format!(
                        "window due {} opened {} as a catch-up run (backfill pool)",
                        self.hm(due),
                        self.hm(e.at)
                    )
                } else if e.at - due > LATE {
                    format!(
                        "window due {} opened late, {} (closes {})",
                        self.hm(due),
                        self.hm(e.at),
                        self.hm(run.window_end)
                    )
                } else {
                    format!(
                        "window opened {} (closes {})",
                        self.hm(due),
                        self.hm(run.window_end)
                    )
                };
                if str_of(d, "note") == "dst_shifted" {
                    c.push_str(" — its time fell in a DST gap and was shifted to the end of it");
                }
                if let Some(ev) = d.get("event").and_then(Value::as_str) {
                    c.push_str(&format!(" for event {ev}"));
                }
                self.push(c);
            }
            "skipped" | "expired" if d.get("window_key").is_some() => {
                // Created already decided: calendar, coalesced, not caught up, too old.
                let due = detail_time(d, "due").unwrap_or(run.due_at);
                let why = match e.event() {
                    crate::core::event::Event::Skipped { reason, .. }
                    | crate::core::event::Event::Expired { reason, .. } => reason,
                    _ => e.kind.clone(),
                };
                self.push(format!("window due {} {}: {why}", self.hm(due), e.kind));
            }
            "gate" => {
                let at = e.at;
                let (name, result) = (str_of(d, "name"), str_of(d, "result"));
                let reason = str_of(d, "reason").to_string();
                let on_fail = str_of(d, "on_fail").to_string();
                let g = self.gate(name);
                match result {
                    "wait" => {
                        g.waits += 1;
                        g.last_reason = reason;
                        g.passed = None;
                    }
                    "pass" if g.waits > 0 && g.passed.is_none() => g.passed = Some(at),
                    "fail" => g.failed = Some((at, reason, on_fail)),
                    _ => {}
                }
            }
            "decision" => {
                // Released only when the switches were checked and all were clear;
                // a decision by the time layer alone checks none.
                let switches = d["switches"].as_array().map(Vec::as_slice).unwrap_or_default();
                let clear = !switches.is_empty() && switches.iter().all(|c| c["held"] != Value::Bool(true));
                if clear && let Some(h) = self.hold.take() {
                    self.flush();
                    self.push(format!("{} released it {}", switch_label(&h), self.hm(e.at)));
                }
            }
            "switch_held" => {
                let switch = str_of(d, "switch").to_string();
                // A skipping switch is told by the `skipped` that follows.
                if str_of(d, "verdict") != "skip" && self.hold.as_deref() != Some(switch.as_str()) {
                    self.flush();
                    self.push(format!(
                        "held by {} from {}: {}",
                        switch_label(&switch),
                        self.hm(e.at),
                        str_of(d, "reason")
                    ));
                    self.hold = Some(switch);
                }
            }
            "claimed" => {
                self.flush();
                self.hold = None;
                let owner = str_of(d, "owner");
                if attempt() <= 1 {
                    let late = d.get("lateness_ms").and_then(Value::as_i64).unwrap_or(0);
                    let when = if late < 1000 {
                        "on time".to_string()
                    } else {
                        format!("{} after due", human(TimeDelta::milliseconds(late)))
                    };
                    self.push(format!("claimed {} by {owner} ({when})", self.hms(e.at)));
                } else {
                    self.push(format!(
                        "attempt {} claimed {} by {owner}",
                        attempt(),
                        self.hms(e.at)
                    ));
                }
            }
            "started" => {
                if let Some(step) = d.get("verify_step").and_then(Value::as_str) {
                    self.push(format!(
                        "attempt {} started in verify mode: checking whether step {step} landed",
                        attempt()
                    ));
                }
            }
            "step" => {
                let n = u32::try_from(attempt()).unwrap_or(0);
                let name = str_of(d, "name").to_string();
                let status = str_of(d, "status").to_string();
                let side = d["side_effect"] == Value::Bool(true);
                let steps = self.steps.entry(n).or_default();
                match steps.iter_mut().find(|(s, _, _)| *s == name) {
                    Some(slot) => slot.1 = status,
                    None => steps.push((name, status, side)),
                }
            }
            "succeeded" => {
                let mut c = format!("attempt {} succeeded {}", attempt(), self.hm(e.at));
                if let Some(s) = d.get("summary").and_then(Value::as_str) {
                    c.push_str(&format!(" — \"{s}\""));
                }
                if let Some(p) = d.get("processed").and_then(Value::as_i64) {
                    c.push_str(&format!(" ({p} processed)"));
                }
                self.push(c);
            }
            "failed" => {
                self.flush();
                let reason = str_of(d, "reason");
                let c = match d.get("attempt").and_then(Value::as_u64) {
                    Some(n) => format!(
                        "attempt {n} failed {} ({}): {reason}{}",
                        self.hm(e.at),
                        str_of(d, "class"),
                        self.steps_note(u32::try_from(n).unwrap_or(0))
                    ),
                    None => format!("failed {}: {reason}", self.hm(e.at)),
                };
                self.push(c);
            }
            "retry_scheduled" => {
                let at = detail_time(d, "not_before").unwrap_or(e.at);
                if str_of(d, "after") == "verify" {
                    self.push("verified; a normal attempt follows".into());
                } else {
                    let of = d
                        .get("max_attempts")
                        .and_then(Value::as_u64)
                        .map(|m| format!(" of {m}"))
                        .unwrap_or_default();
                    self.push(format!(
                        "retry scheduled: attempt {}{of} not before {}",
                        d.get("next_attempt")
                            .and_then(Value::as_u64)
                            .unwrap_or(attempt() + 1),
                        self.hm(at)
                    ));
                }
            }
            "parked_for_human" => {
                self.flush();
                self.push(format!(
                    "parked for a human {}: {}",
                    self.hm(e.at),
                    str_of(d, "reason")
                ));
            }
            "approved" | "rejected" => {
                let who = ["actor", "by", "who"]
                    .iter()
                    .find_map(|k| d.get(*k).and_then(Value::as_str))
                    .unwrap_or("an operator");
                let why = ["reason", "why"]
                    .iter()
                    .find_map(|k| d.get(*k).and_then(Value::as_str))
                    .unwrap_or("");
                self.push(format!("{} {} by {who}: \"{why}\"", e.kind, self.hm(e.at)));
            }
            "dead_lettered" => self.push(format!(
                "dead-lettered {} after {} of {} attempts",
                self.hm(e.at),
                d["attempts"].as_u64().unwrap_or(0),
                d["max_attempts"].as_u64().unwrap_or(0)
            )),
            "lost" => self.push(format!(
                "attempt {} lost {}: {}",
                attempt(),
                self.hm(e.at),
                str_of(d, "reason")
            )),
            "stale_result" => self.push(format!(
                "a late result of an attempt that was no longer current was ignored {}",
                self.hm(e.at)
            )),
            "missed" => {
                self.flush();
                self.hold = None;
                self.push(format!("missed {}: {}", self.hm(e.at), str_of(d, "reason")));
            }
            "skipped" | "expired" => {
                self.flush();
                self.hold = None;
                self.push(format!("{} {}: {}", e.kind, self.hm(e.at), str_of(d, "reason")));
            }
            "catchup_queued" => {
                let until = detail_time(d, "expires").map(|t| format!(" until {}", self.hm(t)));
                self.push(format!(
                    "queued for catch-up in the backfill pool{}",
                    until.unwrap_or_default()
                ));
            }
            "concurrency_halved" => self.push(format!(
                "schedule concurrency halved to {} after a rate limit",
                d["effective"].as_u64().unwrap_or(1)
            )),
            "alert" => self.push(format!("owner alerted ({})", str_of(d, "what"))),
            "switch_changed" => {
                let name = str_of(d, "name");
                let on = d["on"] == Value::Bool(true);
                let what = match (name, on) {
                    ("kill", true) => "kill switch turned on".to_string(),
                    ("kill", false) => "kill switch turned off".to_string(),
                    ("paused", true) => "schedule paused".to_string(),
                    ("paused", false) => "schedule resumed".to_string(),
                    (n, on) => format!("switch {n} turned {}", if on { "on" } else { "off" }),
                };
                self.push(format!(
                    "{what} {} by {}: \"{}\"",
                    self.hm(e.at),
                    str_of(d, "actor"),
                    str_of(d, "reason")
                ));
            }
            "circuit_opened" => {
                let mut c = format!("circuit opened {}", self.hm(e.at));
                if let Some(n) = d.get("consecutive_failures").and_then(Value::as_u64) {
                    c.push_str(&format!(" after {n} consecutive failed runs"));
                }
                if let Some(p) = detail_time(d, "probe_after") {
                    c.push_str(&format!(" (probe after {})", self.hm(p)));
                }
                self.push(c);
            }
            "circuit_half_open" | "circuit_closed" => {
                let state = if e.kind == "circuit_closed" {
                    "closed"
                } else {
                    "half-open"
                };
                self.push(format!(
                    "circuit {state} {}: {}",
                    self.hm(e.at),
                    str_of(d, "reason")
                ));
            }
            // A plan of on-time and calendar windows only is no catch-up.
            "catchup_planned" if caught_up_windows(d) > 0 => {
                let c = catchup_clause(self, e);
                self.push(c);
            }
            "heartbeat" | "tick" | "scheduler_started" | "agent_output" | "catchup_planned" => {}
            other => {
                let detail = crate::trace::describe(&e.event(), crate::trace::Style::Table);
                self.push(format!("{other} {}: {detail}", self.hm(e.at)));
            }
        }
    }
}

/// Windows of a `catchup_planned` that were late: caught up, coalesced, not
/// caught up or expired.
fn caught_up_windows(d: &Value) -> u64 {
    ["catch_up", "coalesced", "not_caught_up", "expired"]
        .iter()
        .map(|k| d["summary"][k].as_u64().unwrap_or(0))
        .sum()
}

fn catchup_clause(story: &Story, e: &Event) -> String {
    let d = &e.detail;
    let mut parts = vec![];
    if let Some(Value::Object(summary)) = d.get("summary") {
        for (key, label) in [
            ("on_time", "on time"),
            ("catch_up", "caught up"),
            ("coalesced", "coalesced"),
            ("not_caught_up", "skipped (catchup = \"none\")"),
            ("expired", "expired"),
            ("calendar", "skipped by calendar"),
        ] {
            let n = summary.get(key).and_then(Value::as_u64).unwrap_or(0);
            if n > 0 {
                parts.push(format!("{n} {label}"));
            }
        }
    }
    let since = detail_time(d, "since")
        .map(|t| format!(" since {}", story.full(t)))
        .unwrap_or_default();
    let windows = d["windows"].as_u64().unwrap_or(0);
    format!(
        "catch-up planned {} for {windows} window{} due{since} (catchup = \"{}\"): {}",
        story.hm(e.at),
        plural(usize::try_from(windows).unwrap_or(0)),
        str_of(d, "policy"),
        parts.join(", ")
    )
}

/// The headline and the story as indented clauses, one per line.
fn render(head: &str, clauses: &[String]) -> String {
    let mut out = format!("{head}\n");
    for (i, c) in clauses.iter().enumerate() {
        let end = if i + 1 == clauses.len() { "." } else { ";" };
        out.push_str(&format!("  {c}{end}\n"));
    }
    out
}

fn switch_label(name: &str) -> String {
    match name {
        "kill" => "the kill switch".into(),
        "paused" => "the schedule pause".into(),
        "circuit" => "the circuit breaker".into(),
        "maintenance" => "a maintenance window".into(),
        "budget" => "the budget".into(),
        "overlap" => "the overlap rule".into(),
        "quota" => "a concurrency quota".into(),
        other => format!("switch {other}"),
    }
}

fn str_of<'a>(d: &'a Value, key: &str) -> &'a str {
    d.get(key).and_then(Value::as_str).unwrap_or("")
}

fn detail_time(d: &Value, key: &str) -> Option<DateTime<Utc>> {
    let s = d.get(key)?.as_str()?;
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `1m31s`, `15m`, `3h28m`: whole seconds, as durations are written in config.
fn human(d: TimeDelta) -> String {
    let secs = u64::try_from(d.num_seconds()).unwrap_or(0);
    crate::time::duration::format_duration(std::time::Duration::from_secs(secs))
}

/// The instant the configured schedule's window `key` opens, found by walking
/// the fires around the date the key names (`2026-06-06…`, `2026-W23`).
fn find_fire(s: &ScheduleConfig, cfg: &Config, key: &str) -> Option<DateTime<Utc>> {
    let cal = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
    let rule = FireRule::for_schedule(s, cal)?;
    let date = key_date(key)?;
    // Two days of margin on each side cover every offset and a moved fire.
    let from = date
        .checked_sub_days(chrono::Days::new(2))?
        .and_hms_opt(0, 0, 0)?
        .and_utc();
    let until = date
        .checked_add_days(chrono::Days::new(9))?
        .and_hms_opt(0, 0, 0)?
        .and_utc();
    rule.fires_after(from)
        .take_while(|f| f.at < until)
        .take(MAX_FIRES)
        .find(|f| f.window_key == key)
        .map(|f| f.at)
}

/// The local date a window key starts with: `2026-06-06`, `2026-06-06T10:05+08:00`,
/// or the Monday of `2026-W23`.
fn key_date(key: &str) -> Option<NaiveDate> {
    if let Some((year, week)) = key.split_once("-W") {
        let year: i32 = year.parse().ok()?;
        let week: u32 = week.get(..2).unwrap_or(week).parse().ok()?;
        return NaiveDate::from_isoywd_opt(year, week, Weekday::Mon);
    }
    NaiveDate::parse_from_str(key.get(..10)?, "%Y-%m-%d").ok()
}

/// The smallest event id from which events are at or after `t` (ids grow with
/// time), by binary search: a few primary-key lookups on any size of trail.
fn first_id_from(tx: &Tx<'_>, t: DateTime<Utc>) -> StoreResult<i64> {
    let (mut lo, mut hi) = (1, tx.max_event_id()? + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let next = tx
            .events(&EventFilter {
                after_id: Some(mid - 1),
                limit: Some(1),
                ..EventFilter::default()
            })?
            .pop();
        match next {
            Some(e) if e.at < t => lo = mid + 1,
            _ => hi = mid,
        }
    }
    Ok(lo)
}

fn alive_filter(kinds: &[&str], after_id: i64, limit: usize) -> EventFilter {
    EventFilter {
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        after_id: Some(after_id),
        limit: Some(limit),
        ..EventFilter::default()
    }
}

/// The last sign of life at or before `t`, looking back further and further.
fn last_alive_before(tx: &Tx<'_>, t: DateTime<Utc>) -> StoreResult<Option<Event>> {
    let bound = first_id_from(tx, t + TimeDelta::milliseconds(1))?;
    for back in [
        TimeDelta::hours(1),
        TimeDelta::days(1),
        TimeDelta::days(30),
        TimeDelta::days(3650),
    ] {
        let mut after = first_id_from(tx, t - back)? - 1;
        let mut found = None;
        loop {
            let page = tx.events(&alive_filter(&ALIVE_KINDS, after, 1000))?;
            let Some(tail) = page.last() else { break };
            after = tail.id;
            let done = page.len() < 1000 || tail.id >= bound;
            for e in page {
                if e.id < bound && e.at <= t {
                    found = Some(e);
                }
            }
            if done {
                break;
            }
        }
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// The first event of `kinds` at or after `t`.
fn first_alive_from(tx: &Tx<'_>, t: DateTime<Utc>, kinds: &[&str]) -> StoreResult<Option<Event>> {
    let from = first_id_from(tx, t)?;
    Ok(tx.events(&alive_filter(kinds, from - 1, 1))?.pop())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_keys_name_their_date() {
        let d = |s| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        assert_eq!(key_date("2026-06-06"), Some(d("2026-06-06")));
        assert_eq!(key_date("2026-06-06T10:05+08:00"), Some(d("2026-06-06")));
        assert_eq!(key_date("2026-W23"), Some(d("2026-06-01")));
        assert_eq!(key_date("ticket-42"), None);
    }

    #[test]
    fn durations_read_like_config() {
        assert_eq!(human(TimeDelta::milliseconds(91_500)), "1m31s");
        assert_eq!(human(TimeDelta::minutes(15)), "15m");
        assert_eq!(human(TimeDelta::seconds(-5)), "0s");
    }

    #[test]
    fn clauses_end_with_a_full_stop() {
        assert_eq!(render("h", &["a".into(), "b".into()]), "h\n  a;\n  b.\n");
    }
}
