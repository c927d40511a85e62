//! "Why did it (not) run?" answered from the events alone (DESIGN.md
//! "Trace"): an [`Explanation`] of one window of one schedule — a headline
//! (what happened to the window, and why), the story behind it (see
//! [`super::story`]) and what happens next. A window with no run at all is
//! explained from the scheduler's own trail: when it was last alive, when it
//! started again, what the catch-up planner decided.
//!
//! `agentcron explain` prints it as text or JSON; the console's run detail
//! shows the same lines.

use super::liveness::{ALIVE_KINDS, liveness};
use super::story::{LATE, Step, Story, catchup_clause, plural};
use crate::config::Config;
use crate::config::model::{Anchor, ScheduleConfig, TriggerConfig};
use crate::core::event::Event;
use crate::store::read::LedgerRead;
use crate::store::types::{Event as Row, EventFilter, Run, RunFilter, RunState};
use chrono::{DateTime, NaiveDate, Utc, Weekday};
use chrono_tz::Tz;
use serde_json::{Value, json};

/// Schedule-level and global events that explain a run without belonging to it.
const CONTEXT_KINDS: [&str; 5] = [
    "switch_changed",
    "circuit_opened",
    "circuit_half_open",
    "circuit_closed",
    "catchup_planned",
];
/// Bound on fires enumerated when looking for windows due without a run.
const MAX_FIRES: usize = 100_000;

type StoreResult<T> = crate::store::Result<T>;

/// What happened to the window, as a word scripts can branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The window has a run; its state says how far it got.
    Run(RunState),
    /// No run: the window never opened (its event never came, no scheduler ran …).
    NeverOpened,
    /// No run yet: it is due later, or planned for catch-up.
    NotYet,
    /// The key names no window of the schedule.
    NotAWindow,
    /// The schedule has no runs at all (no window was asked for).
    NoRuns,
    /// No run: the window was due before the schedule's first evaluation.
    BeforeBirth,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Run(state) => state.as_str(),
            Outcome::NeverOpened => "never_opened",
            Outcome::NotYet => "not_yet",
            Outcome::NotAWindow => "not_a_window",
            Outcome::NoRuns => "no_runs",
            Outcome::BeforeBirth => "before_first_evaluation",
        }
    }
}

/// The answer to "why did it (not) run?" for one window.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    pub schedule: String,
    /// `None` when no window was asked for and the schedule has no run.
    pub window_key: Option<String>,
    pub run: Option<i64>,
    pub verdict: Outcome,
    /// The first line of the text form: the window, and what happened to it.
    pub headline: String,
    pub steps: Vec<Step>,
    /// What happens next, or the command that moves it on.
    pub next: Option<String>,
    /// Later windows due by now without a run (explaining a schedule's newest run).
    pub later: Option<String>,
    /// The config names the schedule (so "no runs" means not run yet, not
    /// an unknown name).
    pub known_schedule: bool,
}

impl Explanation {
    /// The same with the UTC instants that stored reasons carry told in `tz`,
    /// the zone of the rest of the story: one zone per explanation.
    fn in_zone(mut self, tz: Tz) -> Self {
        let z = |t: &str| crate::time::in_zone(t, tz);
        self.headline = z(&self.headline);
        for s in &mut self.steps {
            s.detail = z(&s.detail);
        }
        self.next = self.next.as_deref().map(z);
        self.later = self.later.as_deref().map(z);
        self
    }

    /// Whether the window (or the schedule) has a run.
    pub fn found(&self) -> bool {
        self.run.is_some()
    }

    /// Whether this answers the question: the window (or the schedule) has a
    /// run, or a schedule the config names simply has not run yet (the text
    /// says when it first will). `explain` exits 1 when not: an unknown
    /// schedule, or a window without a run.
    pub fn answered(&self) -> bool {
        self.found() || (self.known_schedule && self.verdict == Outcome::NoRuns)
    }

    /// The story as lines: the headline, then one indented clause per step.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![self.headline.clone()];
        for (i, s) in self.steps.iter().enumerate() {
            let end = if i + 1 == self.steps.len() { "." } else { ";" };
            out.push(format!("  {}{end}", s.detail));
        }
        if let Some(later) = &self.later {
            out.push(format!("note: {later}"));
        }
        out
    }

    /// What `agentcron explain` prints.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for l in self.lines() {
            out.push_str(&l);
            out.push('\n');
        }
        out
    }

    /// What `agentcron explain --json` prints (docs/CLI.md).
    pub fn to_json(&self) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|s| {
                json!({
                    "at": s.at.map(crate::time::rfc3339),
                    "what": s.what,
                    "detail": s.detail,
                })
            })
            .collect();
        json!({
            "schedule": self.schedule,
            "window_key": self.window_key,
            "run": self.run,
            "verdict": self.verdict.as_str(),
            "steps": steps,
            "next": self.next,
        })
    }
}

/// Explains `window` of `schedule` (default: its most recent window), with
/// every time in the schedule's zone.
pub fn explain(
    tx: &dyn LedgerRead,
    cfg: Option<&Config>,
    schedule: &str,
    window: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<Explanation> {
    explain_with(tx, cfg, schedule, window, now, false)
}

/// [`explain`], with every time in UTC when `utc` (`explain --utc`).
pub fn explain_with(
    tx: &dyn LedgerRead,
    cfg: Option<&Config>,
    schedule: &str,
    window: Option<&str>,
    now: DateTime<Utc>,
    utc: bool,
) -> StoreResult<Explanation> {
    let ctx = Ctx::new(cfg, schedule, now, utc);
    explain_in(&ctx, tx, window).map(|x| x.in_zone(ctx.tz))
}

fn explain_in(ctx: &Ctx<'_>, tx: &dyn LedgerRead, window: Option<&str>) -> StoreResult<Explanation> {
    let schedule = ctx.schedule;
    let run = match window {
        Some(key) => ctx.find_window(tx, key)?,
        None => tx
            .runs(&RunFilter {
                schedule: Some(schedule.to_string()),
                newest_first: true,
                limit: Some(1),
                ..RunFilter::default()
            })?
            .pop(),
    };
    match (run, window) {
        (Some(run), _) => {
            let mut x = ctx.explain_run(tx, &run)?;
            if window.is_none() {
                x.later = ctx.later_windows(&run);
                if x.next.is_none() {
                    x.next.clone_from(&x.later);
                }
            }
            Ok(x)
        }
        (None, Some(key)) => ctx.never_opened(tx, key),
        (None, None) => ctx.no_runs(tx),
    }
}

/// `explain SCHEDULE --at TIME`: the key of the window covering `at` — a run
/// whose window `[start, end)` holds it (manual and event windows included),
/// else the schedule's latest window starting at or before it (from its
/// trigger); `None` when there is neither.
pub fn window_at(
    tx: &dyn LedgerRead,
    cfg: Option<&Config>,
    schedule: &str,
    at: DateTime<Utc>,
) -> StoreResult<Option<String>> {
    /// Runs looked at, newest first: the recent past is what people ask about.
    const RECENT_RUNS: usize = 2000;
    let runs = tx.runs(&RunFilter {
        schedule: Some(schedule.to_string()),
        newest_first: true,
        limit: Some(RECENT_RUNS),
        ..RunFilter::default()
    })?;
    if let Some(r) = runs.iter().find(|r| r.window_start <= at && at < r.window_end) {
        return Ok(Some(r.window_key.clone()));
    }
    let Some(s) = cfg.and_then(|c| c.schedule(schedule)) else {
        return Ok(None);
    };
    let calendar = s
        .calendar
        .as_ref()
        .and_then(|c| cfg.and_then(|cfg| cfg.calendars.get(c).cloned()));
    let Some(rule) = s.fire_rule(calendar) else {
        return Ok(None);
    };
    // Look back a little first (most triggers fire daily or more often), then
    // further for weekly and rarer ones.
    for days in [2, 40, 400] {
        let last = rule
            .fires_after(at - chrono::TimeDelta::days(days))
            .take_while(|f| f.at <= at)
            .take(MAX_FIRES)
            .last();
        if let Some(f) = last {
            return Ok(Some(f.window_key));
        }
    }
    Ok(None)
}

/// Explains one run (the console's run detail), its times told in `tz` —
/// the console's zone, whatever zone the schedule fires in: one zone per
/// screen.
pub fn explain_run(
    tx: &dyn LedgerRead,
    cfg: Option<&Config>,
    run: &Run,
    now: DateTime<Utc>,
    tz: Tz,
) -> StoreResult<Explanation> {
    let mut ctx = Ctx::new(cfg, &run.schedule, now, false);
    ctx.tz = tz;
    ctx.explain_run(tx, run).map(|x| x.in_zone(ctx.tz))
}

struct Ctx<'a> {
    schedule: &'a str,
    cfg: Option<&'a Config>,
    sched: Option<&'a ScheduleConfig>,
    tz: Tz,
    now: DateTime<Utc>,
}

impl<'a> Ctx<'a> {
    fn new(cfg: Option<&'a Config>, schedule: &'a str, now: DateTime<Utc>, utc: bool) -> Self {
        let sched = cfg.and_then(|c| c.schedule(schedule));
        Self {
            schedule,
            cfg,
            sched,
            // The schedule's zone; for an id the config lacks, the
            // scheduler's (as every other block without a schedule); without
            // the config, UTC.
            tz: if utc {
                Tz::UTC
            } else {
                sched.map_or_else(|| cfg.map_or(Tz::UTC, |c| c.scheduler.timezone), |s| s.timezone)
            },
            now,
        }
    }

    fn story(&self, day: DateTime<Utc>) -> Story {
        Story::new(self.tz, day)
    }

    fn title(&self, key: &str) -> String {
        format!(
            "{} {} ({})",
            self.schedule,
            crate::time::key_text(key, self.tz),
            self.tz.name()
        )
    }

    fn answer(
        &self,
        key: Option<&str>,
        verdict: Outcome,
        headline: String,
        steps: Vec<Step>,
        next: Option<String>,
    ) -> Explanation {
        Explanation {
            schedule: self.schedule.to_string(),
            window_key: key.map(str::to_string),
            run: None,
            verdict,
            headline,
            steps,
            next,
            later: None,
            known_schedule: self.sched.is_some(),
        }
    }

    fn find_window(&self, tx: &dyn LedgerRead, key: &str) -> StoreResult<Option<Run>> {
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

    fn explain_run(&self, tx: &dyn LedgerRead, run: &Run) -> StoreResult<Explanation> {
        let own: Vec<(Row, Event)> = typed(tx.events(&EventFilter {
            run_id: Some(run.id),
            ..EventFilter::default()
        })?);
        let first = own.first().map_or(run.created_at, |(e, _)| e.at);
        let last = match own.last() {
            Some((e, _)) if run.state.is_terminal() => e.at,
            Some((e, _)) => e.at.max(self.now),
            None => self.now,
        };
        let context = self.context_events(tx, &own, first, last)?;
        let mut all: Vec<&(Row, Event)> = own.iter().chain(context.iter()).collect();
        all.sort_by_key(|(e, _)| (e.at, e.id));

        let mut story = self.story(run.window_start);
        // A window caught up after a gap: the plan that queued it says when
        // nobody was evaluating the schedule.
        let plan_of_gap = if run.reason == crate::store::RunReason::Catchup {
            tx.events(&EventFilter {
                schedule: Some(run.schedule.clone()),
                kinds: vec!["catchup_planned".into()],
                ..EventFilter::default()
            })?
            .into_iter()
            .rfind(|p| p.at <= first)
            .and_then(|p| match p.event() {
                Event::CatchupPlanned {
                    since: Some(since), ..
                } if since < run.due_at && run.due_at <= p.at => Some((since, p.at)),
                _ => None,
            })
        } else {
            None
        };
        for (row, e) in all {
            story.event(row.at, e, run);
            if let (Event::WindowOpened { .. }, Some((since, back))) = (e, plan_of_gap) {
                story.push(
                    Some(back),
                    "downtime",
                    format!(
                        "caught up after downtime {}–{}",
                        story.hms(since),
                        story.hms(back)
                    ),
                );
            }
            // A window someone asked for (trigger, backfill) is late on
            // purpose: whether a scheduler was alive then says nothing.
            if let Some(w) = e.window_facts()
                && row.at - w.due > LATE
                && run.reason != crate::store::RunReason::Manual
            {
                let c = liveness(tx, w.due, &story)?;
                story.push(None, "liveness", c);
            }
        }
        story.flush();
        let head = headline(run, &own, &story);
        let mut steps = story.steps;
        // Which schedule version opened it and each attempt ran under (issue
        // 18); runs from before versions were recorded say nothing.
        let versions = crate::control::versions::of_run(tx, run.id, &run.schedule)?;
        if versions.opened_under.is_some() {
            steps.push(crate::trace::story::Step {
                at: None,
                what: "versions".into(),
                detail: versions.summary,
            });
        }
        Ok(Explanation {
            schedule: self.schedule.to_string(),
            window_key: Some(run.window_key.clone()),
            run: Some(run.id),
            verdict: Outcome::Run(run.state),
            headline: format!("{}, run {}: {head}", self.title(&run.window_key), run.id),
            steps,
            next: next_for_run(run, &self.story(run.window_start)),
            later: None,
            known_schedule: self.sched.is_some(),
        })
    }

    /// Events around the run that explain it: switches turned, the circuit, the
    /// catch-up planner — during the run's life, plus the latest change of each
    /// switch that held it, however long before.
    fn context_events(
        &self,
        tx: &dyn LedgerRead,
        own: &[(Row, Event)],
        first: DateTime<Utc>,
        last: DateTime<Utc>,
    ) -> StoreResult<Vec<(Row, Event)>> {
        let candidates: Vec<(Row, Event)> = typed(tx.events(&EventFilter {
            kinds: CONTEXT_KINDS.iter().map(|k| k.to_string()).collect(),
            ..EventFilter::default()
        })?)
        .into_iter()
        .filter(|(row, e)| {
            row.run_id.is_none()
                && match row.schedule.as_deref() {
                    None => matches!(e, Event::SwitchChanged { .. }),
                    Some(s) => s == self.schedule,
                }
        })
        .collect();
        let mut keep: Vec<(Row, Event)> = vec![];
        for (hold, held) in own {
            let Event::SwitchHeld { switch, .. } = held else {
                continue;
            };
            let cause = candidates.iter().rfind(|(c, ev)| {
                let caused = match (switch.as_str(), ev) {
                    ("kill" | "paused", Event::SwitchChanged { name, on, .. }) => {
                        name == switch.as_str() && *on
                    }
                    ("circuit", Event::CircuitOpened { .. } | Event::CircuitHalfOpen { .. }) => true,
                    _ => false,
                };
                caused && c.at <= hold.at && c.at < first
            });
            if let Some(c) = cause
                && !keep.iter().any(|(k, _)| k.id == c.0.id)
            {
                keep.push(c.clone());
            }
        }
        keep.extend(
            candidates
                .into_iter()
                .filter(|(c, _)| c.at >= first && c.at <= last),
        );
        Ok(keep)
    }

    /// A window with no run: when it was due (if the config says), whether a
    /// scheduler was alive then, what catch-up decided since.
    fn never_opened(&self, tx: &dyn LedgerRead, key: &str) -> StoreResult<Explanation> {
        let mut steps: Vec<Step> = vec![];
        let step = |at: Option<DateTime<Utc>>, what: &str, detail: String| Step {
            at,
            what: what.to_string(),
            detail,
        };
        let mut verdict = Outcome::NeverOpened;
        let mut head = "no run: this window never opened".to_string();
        let mut next = None;
        let mut due = None;
        match (self.sched, self.cfg) {
            (None, Some(cfg)) => steps.push(step(None, "not_in_config", self.not_in_config(cfg))),
            (None, None) => steps.push(step(
                None,
                "no_config",
                "without the config (--config) the time this window was due is unknown".to_string(),
            )),
            (Some(s), Some(cfg)) => match &s.trigger {
                TriggerConfig::OnEvent { event } | TriggerConfig::AfterEvent { event, .. } => {
                    match tx.posted_event(event, key)? {
                        Some(p) => {
                            head = "no run: the event arrived but no window opened".into();
                            steps.push(step(
                                Some(p.arrived_at),
                                "event_posted",
                                format!(
                                    "event {event} with id {key} was posted at {}",
                                    self.story(p.arrived_at).full(p.arrived_at)
                                ),
                            ));
                            due = Some(p.arrived_at);
                        }
                        None => {
                            head = "no run: its event never arrived".into();
                            let post = format!("agentcron event post {event} --id {key}");
                            steps.push(step(
                                None,
                                "no_event",
                                format!("no event {event} with id {key} was ever posted ({post})"),
                            ));
                            next = Some(post);
                        }
                    }
                }
                _ => match find_fire(s, cfg, key) {
                    Some(at) => due = Some(at),
                    None => {
                        verdict = Outcome::NotAWindow;
                        head = format!("no run: {key} is not a window of {}", self.schedule);
                        steps.push(step(
                            None,
                            "not_a_window",
                            format!("per the config its trigger never opens a window with the key {key}"),
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
            let was_due = step(
                Some(due),
                "due",
                format!("the window was due {}", story.full(due)),
            );
            if due > self.now {
                verdict = Outcome::NotYet;
                head = format!("not yet: this window is due {}", story.full(due));
                next = Some(format!("it opens {}", story.full(due)));
            } else if let Some(born) = tx.born_at(self.schedule)?
                && due < born
            {
                // Birth: nothing due before a schedule's first evaluation opens.
                verdict = Outcome::BeforeBirth;
                head = "no run: due before this schedule's first evaluation".to_string();
                steps.insert(0, was_due);
                steps.push(step(
                    Some(born),
                    "born",
                    format!(
                        "it was due before this schedule's first evaluation ({}); windows before \
                         that are never opened automatically",
                        story.full(born)
                    ),
                ));
                next = Some(format!(
                    "run it on purpose: agentcron trigger {} --window {key} (or agentcron backfill {} --from … --to …)",
                    self.schedule, self.schedule
                ));
            } else if let Some(b) = backlog {
                verdict = Outcome::NotYet;
                head = "not yet: planned for catch-up, waiting to be queued".to_string();
                steps.insert(0, was_due);
                steps.push(step(
                    None,
                    "catchup_backlog",
                    format!(
                        "windows due {} to {} are caught up oldest first, as many at a time as \
                         max_concurrency allows, as earlier catch-up runs finish",
                        story.full(b.next),
                        story.full(b.until)
                    ),
                ));
                next = Some("it is queued for catch-up as earlier catch-up runs finish".into());
            } else {
                steps.insert(0, was_due);
                steps.push(step(None, "liveness", liveness(tx, due, &story)?));
                let planned = tx
                    .events(&EventFilter {
                        schedule: Some(self.schedule.to_string()),
                        kinds: vec!["catchup_planned".into()],
                        ..EventFilter::default()
                    })?
                    .into_iter()
                    .find(|e| e.at >= due);
                if let Some(p) = planned
                    && let Some(c) = catchup_clause(&story, p.at, &p.event())
                {
                    steps.push(step(Some(p.at), "catchup_planned", c));
                }
            }
        }
        steps.push(step(None, "recent_windows", self.recent_windows(tx)?));
        Ok(self.answer(
            Some(key),
            verdict,
            format!("{}: {head}", self.title(key)),
            steps,
            next,
        ))
    }

    /// The schedule has no runs at all.
    fn no_runs(&self, tx: &dyn LedgerRead) -> StoreResult<Explanation> {
        let mut steps = vec![];
        let mut next = None;
        match (self.sched, self.cfg) {
            (None, Some(cfg)) => steps.push(Step {
                at: None,
                what: "not_in_config".into(),
                detail: self.not_in_config(cfg),
            }),
            (Some(s), Some(cfg)) => {
                let cal = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
                if let Some(f) = s.fire_rule(cal).and_then(|r| r.next_after(self.now)) {
                    let when = self.story(f.at).full(f.at);
                    steps.push(Step {
                        at: Some(f.at),
                        what: "next_window".into(),
                        detail: format!("per the config its next window, {}, opens {when}", f.window_key),
                    });
                    next = Some(format!("its next window, {}, opens {when}", f.window_key));
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
        steps.push(match last {
            Some(e) => Step {
                at: Some(e.at),
                what: "liveness".into(),
                detail: format!(
                    "the last scheduler activity in this database: {} at {}",
                    e.event().kind(),
                    self.story(e.at).full(e.at)
                ),
            },
            None => Step {
                at: None,
                what: "liveness".into(),
                detail: "no scheduler has run on this database yet".into(),
            },
        });
        Ok(self.answer(
            None,
            Outcome::NoRuns,
            format!(
                "{}: no runs in this database (times in {})",
                self.schedule,
                self.tz.name()
            ),
            steps,
            next,
        ))
    }

    fn not_in_config(&self, cfg: &Config) -> String {
        let ids: Vec<&str> = cfg.schedules.iter().map(|s| s.id.as_str()).collect();
        match crate::operator::did_you_mean(self.schedule, ids.iter().copied()) {
            Some(close) => format!("{} is not in the config; did you mean `{close}`?", self.schedule),
            None => format!(
                "{} is not in the config; schedules there: {}",
                self.schedule,
                ids.join(", ")
            ),
        }
    }

    fn recent_windows(&self, tx: &dyn LedgerRead) -> StoreResult<String> {
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
    fn later_windows(&self, newest: &Run) -> Option<String> {
        let (s, cfg) = (self.sched?, self.cfg?);
        if matches!(
            s.trigger,
            TriggerConfig::Every {
                anchor: Anchor::LastStart,
                ..
            }
        ) {
            return None;
        }
        let cal = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
        let rule = s.fire_rule(cal)?;
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
        let f = latest?;
        Some(format!(
            "{count} later window{} due by now {} no run (the latest, {}, was due {}); \
             see `agentcron explain {} --window {}`",
            plural(count),
            if count == 1 { "has" } else { "have" },
            f.window_key,
            self.story(f.at).full(f.at),
            self.schedule,
            f.window_key
        ))
    }
}

/// Rows with their typed events, read once.
fn typed(rows: Vec<Row>) -> Vec<(Row, Event)> {
    rows.into_iter()
        .map(|r| {
            let e = r.event();
            (r, e)
        })
        .collect()
}

/// What moves a run on from where it is, if anything does.
fn next_for_run(run: &Run, story: &Story) -> Option<String> {
    match run.state {
        RunState::Pending => run.next_check_at.map(|t| format!("next check {}", story.full(t))),
        RunState::RetryWait => Some(format!(
            "attempt {} not before {}",
            run.attempts + 1,
            run.not_before.map(|t| story.full(t)).unwrap_or_default()
        )),
        RunState::NeedsHuman => Some(format!(
            "agentcron approve {id} --reason … or agentcron reject {id} --reason …",
            id = run.id
        )),
        RunState::Dead => Some(format!("agentcron dlq requeue {} --reason …", run.id)),
        _ => None,
    }
}

/// The headline: what happened to the window, and why, in one line.
fn headline(run: &Run, own: &[(Row, Event)], story: &Story) -> String {
    let reason = run.state_reason.clone().unwrap_or_default();
    let err = run.last_error.clone().unwrap_or_else(|| reason.clone());
    let last_missed = own.iter().rev().find_map(|(_, e)| match e {
        Event::Missed { reason, .. } => Some(reason.as_str()),
        _ => None,
    });
    match run.state {
        RunState::Succeeded => {
            let mut h = format!("ran — attempt {} succeeded", run.attempts);
            if let Some((row, _)) = own
                .iter()
                .rev()
                .find(|(_, e)| matches!(e, Event::Succeeded { .. }))
            {
                h.push_str(&format!(" at {}", story.hm(row.at)));
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
        RunState::Missed => format!("did not run — missed: {}", last_missed.unwrap_or(&reason)),
        RunState::Expired => format!("did not run — expired: {reason}"),
        RunState::Skipped => {
            if let Some(m) = last_missed {
                return format!("did not run — missed: {m}; then {reason}");
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

/// The instant the configured schedule's window `key` opens, found by walking
/// the fires around the date the key names (`2026-06-06…`, `2026-W23`).
fn find_fire(s: &ScheduleConfig, cfg: &Config, key: &str) -> Option<DateTime<Utc>> {
    let cal = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
    let rule = s.fire_rule(cal)?;
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
    fn clauses_end_with_a_full_stop() {
        let x = Explanation {
            schedule: "s".into(),
            window_key: None,
            run: None,
            verdict: Outcome::NoRuns,
            headline: "h".into(),
            steps: ["a", "b"]
                .map(|d| Step {
                    at: None,
                    what: "x".into(),
                    detail: d.into(),
                })
                .to_vec(),
            next: None,
            later: None,
            known_schedule: true,
        };
        assert_eq!(x.text(), "h\n  a;\n  b.\n");
    }
}
