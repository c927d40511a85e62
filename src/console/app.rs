//! The console's state machine, The Elm Architecture style: a [`Model`], the
//! [`Msg`]s that arrive (keys, ticks, snapshots, results), a pure
//! [`update`] that returns [`Cmd`]s for the shell to perform. No IO and no clock
//! reads here: `now` arrives in [`Msg::Tick`] (or, in rehearsal mode, with the
//! rehearsal's [`Progress`]), data in [`Msg::Snapshot`].
//!
//! Long (~1,200 lines) on purpose: [`update`] is one exhaustive match over
//! every message and key action, beside the model it changes, so the whole
//! console state machine reads in one place; panes, dialogs, the keymap and
//! the view live in their own modules.

use super::command::{self, Command};
use super::dialogs::quit::{QuitDialog, QuitOutcome, QuitPhase, RunningAttempt};
use super::dialogs::{Dialog, Intent, Outcome, Preview};
use super::input::LineInput;
use super::keymap::{self, Action, Layer};
use super::panes::{self, ListCursor, Pane, RowKey};
use super::rehearsal::{Progress, RehearsalView, SPEEDS};
use super::snapshot::{RunDetail, Snapshot};
use crate::store::{Run, RunState};
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::path::PathBuf;

/// How long an informational status line stays.
const STATUS_TTL: Duration = Duration::seconds(10);

/// Something that happened.
#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    /// The clock moved (1–4 Hz); relative times are recomputed from this.
    Tick {
        now: DateTime<Utc>,
    },
    Resize {
        width: u16,
        height: u16,
    },
    Snapshot(Box<Snapshot>),
    SnapshotFailed(String),
    RunDetail(Box<RunDetail>),
    RunDetailFailed {
        run: i64,
        error: String,
    },
    /// An operator action finished: what happened, or why not.
    ActionResult(Result<String, String>),
    /// The plan of a resume or backfill dialog (see [`Cmd::Preview`]).
    Preview {
        intent: Intent,
        result: Result<Preview, String>,
    },
    /// `:theme` was applied (the theme's name) or refused.
    ThemeChanged(Result<String, String>),
    /// The rehearsal started or stepped.
    Rehearsal(Box<Progress>),
    /// The rehearsal could not be loaded or run.
    RehearsalFailed {
        source: u64,
        error: String,
    },
    /// The embedded scheduler has stopped (after [`Cmd::StopScheduler`]).
    SchedulerStopped,
    /// The tail of the scheduler's log file (after [`Cmd::ReadLog`]), or why not.
    LogTail(Result<LogTail, String>),
    /// The database runs config version `version` now, in zone `tz`: the
    /// panes, completions and actions follow it (snapshots read after this
    /// message are of it).
    ConfigApplied {
        version: i64,
        tz: Tz,
    },
    /// The version the database runs does not load here; the console keeps
    /// the config it has.
    ConfigUnloadable {
        version: i64,
        error: String,
    },
}

/// The last lines of the embedded scheduler's log file (`:log`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTail {
    pub path: String,
    pub lines: Vec<String>,
}

/// Something for the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Cmd {
    Quit,
    /// Stop the embedded scheduler: claim nothing new and wait for running
    /// attempts up to `shutdown_grace` (`now: false`), or stop them at once so
    /// they retry (`now: true`). The console quits on [`Msg::SchedulerStopped`].
    StopScheduler {
        now: bool,
    },
    /// Reload the snapshot now (all tiers).
    Refresh,
    /// Read the tail of the embedded scheduler's log file (`:log`).
    ReadLog,
    /// The selected run changed: load its events and decision with snapshots.
    Focus(Option<i64>),
    /// The schedules in view changed: load their newest runs and lanes.
    View(Vec<String>),
    LoadRunDetail(i64),
    SetTheme(String),
    /// Open a rehearsal; its store becomes the console's `source`.
    Rehearse {
        file: PathBuf,
        source: u64,
    },
    /// One step of the rehearsal (to its next event).
    RehearsalStep,
    /// Play at this many steps a second, or pause (`None`).
    RehearsalPlay(Option<u32>),
    /// Close the rehearsal and show the live store again as `source`.
    LeaveRehearsal {
        source: u64,
    },
    /// Read the plan a dialog shows before it can be confirmed.
    Preview(Intent),
    // Operator actions.
    Approve {
        run: i64,
        reason: String,
        resume_after: Option<String>,
    },
    Reject {
        run: i64,
        reason: String,
    },
    /// Ask every scheduler on the database to re-read its config (`:reload`).
    Reload,
    /// Apply a config version waiting for approval (`:approve-config`).
    ApproveConfig {
        version: i64,
        reason: String,
    },
    SetKill {
        on: bool,
        reason: String,
        /// Turning it on also stops running attempts (`kill --cancel-running`).
        cancel_running: bool,
    },
    Pause {
        schedule: String,
        reason: String,
    },
    Resume {
        schedule: String,
    },
    Trigger {
        schedule: String,
    },
    Requeue {
        run: i64,
        reason: String,
    },
    CloseCircuit {
        schedule: String,
        reason: String,
    },
    Backfill {
        schedule: String,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    },
}

impl Cmd {
    /// Changes the world (as opposed to loading or showing).
    pub fn is_operator_action(&self) -> bool {
        matches!(
            self,
            Cmd::Approve { .. }
                | Cmd::Reject { .. }
                | Cmd::SetKill { .. }
                | Cmd::Pause { .. }
                | Cmd::Resume { .. }
                | Cmd::Trigger { .. }
                | Cmd::Requeue { .. }
                | Cmd::CloseCircuit { .. }
                | Cmd::Backfill { .. }
                | Cmd::Reload
                | Cmd::ApproveConfig { .. }
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetailSection {
    Attempts,
    Steps,
    Events,
    Log,
    Envelope,
    /// Why it ran (or not): the story `agentcron explain` tells.
    Explain,
}

impl DetailSection {
    pub const ALL: [DetailSection; 6] = [
        DetailSection::Attempts,
        DetailSection::Steps,
        DetailSection::Events,
        DetailSection::Log,
        DetailSection::Envelope,
        DetailSection::Explain,
    ];

    pub fn title(self) -> &'static str {
        match self {
            DetailSection::Attempts => "Attempts",
            DetailSection::Steps => "Steps",
            DetailSection::Events => "Events",
            DetailSection::Log => "Log",
            DetailSection::Envelope => "Envelope",
            DetailSection::Explain => "Explain",
        }
    }

    fn shift(self, forward: bool) -> Self {
        let n = Self::ALL.len();
        let i = Self::ALL.iter().position(|s| *s == self).unwrap_or(0);
        Self::ALL[if forward { (i + 1) % n } else { (i + n - 1) % n }]
    }
}

/// The run detail screen.
#[derive(Debug, Clone)]
pub struct DetailState {
    pub run: i64,
    pub detail: Option<Box<RunDetail>>,
    pub error: Option<String>,
    pub section: DetailSection,
    pub scroll: u16,
}

#[derive(Debug, Clone)]
pub enum Screen {
    Main,
    Detail(DetailState),
}

#[derive(Debug, Clone)]
pub enum Overlay {
    None,
    Help {
        scroll: u16,
    },
    /// `:log`: the scheduler log's last lines, scrolled like the help.
    Log {
        tail: LogTail,
        scroll: u16,
    },
    Dialog(Box<Dialog>),
    /// Quitting with the embedded scheduler's attempts running.
    Quit(QuitDialog),
}

/// The filter or command bar being typed into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bar {
    Filter(LineInput),
    Command(LineInput),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Ok,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub text: String,
    pub level: Level,
    pub at: DateTime<Utc>,
}

/// The timeline's selection: a lane (schedule) and a window in it, counted
/// from the newest; `run` keeps the same window selected while new ones arrive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GridCursor {
    pub lane: ListCursor,
    pub run: Option<i64>,
    pub from_newest: usize,
}

/// The scheduler a console embeds (`agentcron` with no verb), as the model
/// knows it: whose running runs are its attempts, and its grace period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedInfo {
    /// Its lease owner.
    pub owner: String,
    /// `[scheduler] shutdown_grace`.
    pub grace: Duration,
}

/// What the console starts with.
#[derive(Debug, Clone)]
pub struct Init {
    pub now: DateTime<Utc>,
    /// The scheduler's time zone (header clock).
    pub tz: Tz,
    /// `LIVE` or `REHEARSAL`.
    pub mode_label: String,
    pub read_only: bool,
    pub theme_name: String,
    pub width: u16,
    pub height: u16,
    /// `agentcron rehearse FILE --console`: start in rehearsal mode on this file.
    pub rehearsal: Option<String>,
    /// The embedded scheduler, if this console runs one.
    pub embedded: Option<EmbeddedInfo>,
}

/// Everything the console knows.
#[derive(Debug, Clone)]
pub struct Model {
    /// The time the console shows: the wall clock, or the rehearsal's virtual clock.
    pub now: DateTime<Utc>,
    /// The wall clock (status line expiry).
    pub wall: DateTime<Utc>,
    /// Which store the shown data comes from; bumped when entering or leaving a
    /// rehearsal so that a snapshot of the other store still in flight is dropped.
    pub source: u64,
    pub rehearsal: Option<RehearsalView>,
    pub tz: Tz,
    pub mode_label: String,
    pub read_only: bool,
    pub theme_name: String,
    pub width: u16,
    pub height: u16,
    pub snapshot: Snapshot,
    /// A snapshot has arrived.
    pub loaded: bool,
    pub load_error: Option<String>,
    pub pane: Pane,
    pub schedules: ListCursor,
    pub timeline: GridCursor,
    pub retries: ListCursor,
    pub approvals: ListCursor,
    pub backfill: ListCursor,
    pub switches: ListCursor,
    pub gates_scroll: u16,
    /// The run last selected in a run list; the gates pane shows it.
    pub last_run: Option<i64>,
    /// The focus last sent to the shell.
    pub focus_sent: Option<i64>,
    /// The schedules in view last sent to the shell.
    pub view_sent: Vec<String>,
    pub screen: Screen,
    pub overlay: Overlay,
    pub bar: Option<Bar>,
    pub filter: String,
    /// What the last Tab in the command bar could complete to (more than one).
    pub completions: Vec<String>,
    pub status: Option<Status>,
    pub quitting: bool,
    pub embedded: Option<EmbeddedInfo>,
    /// The config version the console follows (the database's; `None`
    /// before it was read, or on a database without versions).
    pub config_version: Option<i64>,
}

impl Model {
    pub fn new(init: Init) -> Self {
        let rehearsal = init
            .rehearsal
            .as_deref()
            .map(|file| RehearsalView::new(file, false, init.tz, &init.mode_label));
        let mode_label = if rehearsal.is_some() {
            REHEARSAL_LABEL.to_string()
        } else {
            init.mode_label
        };
        Self {
            now: init.now,
            wall: init.now,
            source: 0,
            rehearsal,
            tz: init.tz,
            mode_label,
            read_only: init.read_only,
            theme_name: init.theme_name,
            width: init.width,
            height: init.height,
            snapshot: Snapshot::default(),
            loaded: false,
            load_error: None,
            pane: Pane::Schedules,
            schedules: ListCursor::default(),
            timeline: GridCursor::default(),
            retries: ListCursor::default(),
            approvals: ListCursor::default(),
            backfill: ListCursor::default(),
            switches: ListCursor::default(),
            gates_scroll: 0,
            last_run: None,
            focus_sent: None,
            view_sent: Vec::new(),
            screen: Screen::Main,
            overlay: Overlay::None,
            bar: None,
            filter: String::new(),
            completions: Vec::new(),
            status: None,
            quitting: false,
            embedded: init.embedded,
            config_version: None,
        }
    }

    /// The attempts the embedded scheduler runs now (none without one).
    pub fn own_attempts(&self) -> Vec<RunningAttempt> {
        let Some(e) = &self.embedded else {
            return vec![];
        };
        self.snapshot
            .running
            .iter()
            .filter(|r| r.lease_owner.as_deref() == Some(e.owner.as_str()))
            .map(|r| RunningAttempt {
                run: r.id,
                schedule: r.schedule.clone(),
                window_key: r.window_key.clone(),
                attempt: r.attempts,
            })
            .collect()
    }

    /// The keymap layers that receive keys now, topmost first.
    pub fn layers(&self) -> Vec<Layer> {
        match &self.overlay {
            Overlay::Dialog(d) => return d.layers(),
            Overlay::Quit(q) => return q.layers(),
            _ => {}
        }
        if self.bar.is_some() {
            return vec![Layer::Input];
        }
        if matches!(self.overlay, Overlay::Help { .. } | Overlay::Log { .. }) {
            return vec![Layer::Help];
        }
        let rehearsal = self.rehearsal.as_ref().map(|_| Layer::Rehearsal);
        if matches!(self.screen, Screen::Detail(_)) {
            return [Some(Layer::Detail), rehearsal, Some(Layer::Global)]
                .into_iter()
                .flatten()
                .collect();
        }
        let mut layers: Vec<Layer> = rehearsal.into_iter().collect();
        layers.extend(Layer::of_pane(self.pane));
        layers.extend([Layer::Navigation, Layer::Global]);
        layers
    }

    /// Rows a page moves.
    pub fn page(&self) -> usize {
        usize::from(self.height).saturating_sub(8).max(1)
    }

    /// The run selected in the focused pane, if the pane selects runs
    /// (schedules: the schedule's newest run).
    pub fn selected_run(&self) -> Option<i64> {
        match self.pane {
            Pane::Schedules => {
                let id = panes::schedules::selected(self)?;
                self.snapshot.schedule(id)?.last.as_ref().map(|l| l.id)
            }
            Pane::Timeline => panes::timeline::selected_run(self).map(|r| r.id),
            Pane::Retries => self.retries.selected(&panes::retries::keys(self))?.run(),
            Pane::Approvals => self.approvals.selected(&panes::approvals::keys(self))?.run(),
            Pane::Backfill => self.backfill.selected(&panes::backfill::keys(self))?.run(),
            Pane::Gates | Pane::Switches => None,
        }
    }

    /// The run the gates pane and the event list show.
    pub fn focus_run(&self) -> Option<i64> {
        match self.pane {
            Pane::Gates | Pane::Switches => self.last_run,
            _ => self.selected_run().or(self.last_run),
        }
    }

    /// The schedules whose rows or lanes can be on screen: a screenful either
    /// side of the schedules and timeline cursors (the panes scroll to keep
    /// their cursor visible, so this covers whatever they draw).
    pub fn schedules_in_view(&self) -> Vec<String> {
        let span = usize::from(self.height).max(1);
        let mut out: Vec<String> = Vec::new();
        let around = |at: Option<usize>, names: &mut dyn Iterator<Item = &str>, out: &mut Vec<String>| {
            let from = at.unwrap_or(0).saturating_sub(span);
            for name in names.skip(from).take(2 * span + 1) {
                if !out.iter().any(|o| o == name) {
                    out.push(name.to_string());
                }
            }
        };
        let at = self.schedules.resolve_names(panes::schedules::names(self));
        around(at, &mut panes::schedules::names(self), &mut out);
        let at = self
            .timeline
            .lane
            .resolve_names(panes::timeline::lane_names(self));
        around(at, &mut panes::timeline::lane_names(self), &mut out);
        out
    }

    /// The selected schedule of the schedules pane.
    pub fn selected_schedule(&self) -> Option<String> {
        panes::schedules::selected(self).map(str::to_string)
    }

    fn set_status(&mut self, level: Level, text: impl Into<String>) {
        self.status = Some(Status {
            text: text.into(),
            level,
            at: self.wall,
        });
    }

    fn info(&mut self, text: impl Into<String>) {
        self.set_status(Level::Info, text);
    }

    fn error(&mut self, text: impl Into<String>) {
        self.set_status(Level::Error, text);
    }

    /// The steps of run `id` that finished (`done`), in journal order, from
    /// the approvals list or the open detail: what an approval may resume after.
    pub fn completed_steps(&self, id: i64) -> Vec<String> {
        let journal: Vec<&crate::store::Step> = match &self.screen {
            Screen::Detail(d) if d.run == id && d.detail.is_some() => {
                d.detail.iter().flat_map(|x| x.steps.iter()).collect()
            }
            _ => self
                .snapshot
                .approvals
                .iter()
                .filter(|a| a.run.id == id)
                .flat_map(|a| a.steps.iter())
                .collect(),
        };
        let mut out: Vec<String> = Vec::new();
        for st in journal {
            if st.status == crate::store::StepStatus::Done && !out.contains(&st.name) {
                out.push(st.name.clone());
            }
        }
        out
    }

    /// What the console knows of a kind, for completing a command's argument:
    /// schedule ids in pane order, run ids newest first.
    pub fn known(&self, kind: command::ArgKind) -> Vec<String> {
        use command::ArgKind;
        let s = &self.snapshot;
        let runs: Vec<&Run> = match kind {
            ArgKind::Schedule => return s.schedules.iter().map(|r| r.id.clone()).collect(),
            ArgKind::Theme => {
                return super::theme::builtin_names()
                    .into_iter()
                    .map(str::to_string)
                    .collect();
            }
            ArgKind::NeedsHuman => s.approvals.iter().map(|a| &a.run).collect(),
            ArgKind::Requeueable => s
                .dead
                .iter()
                .map(|r| &r.run)
                .chain(s.lanes.iter().flat_map(|l| l.runs.iter()))
                .filter(|r| matches!(r.state, RunState::Failed | RunState::Dead))
                .collect(),
            ArgKind::Run => s
                .lanes
                .iter()
                .flat_map(|l| l.runs.iter())
                .chain(s.retries.iter().map(|r| &r.run))
                .chain(s.dead.iter().map(|r| &r.run))
                .chain(s.approvals.iter().map(|r| &r.run))
                .chain(s.backfill.iter().map(|r| &r.run))
                .collect(),
        };
        let mut ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        ids.dedup();
        ids.iter().map(i64::to_string).collect()
    }

    /// A run the model knows: in the snapshot or the open detail.
    fn known_run(&self, id: i64) -> Option<&Run> {
        if let Screen::Detail(d) = &self.screen
            && let Some(detail) = &d.detail
            && detail.run.id == id
        {
            return Some(&detail.run);
        }
        self.snapshot.find_run(id)
    }
}

/// The header's mode while a rehearsal is open.
pub const REHEARSAL_LABEL: &str = "REHEARSAL";

/// The one state transition of the console.
pub fn update(m: &mut Model, msg: Msg) -> Vec<Cmd> {
    let mut cmds = Vec::new();
    match msg {
        Msg::Key(key) => on_key(m, &key, &mut cmds),
        Msg::Tick { now } => {
            m.wall = now;
            if m.rehearsal.is_none() {
                m.now = now;
            }
            if m.status.as_ref().is_some_and(|s| now - s.at > STATUS_TTL) {
                m.status = None;
            }
        }
        Msg::Resize { width, height } => {
            m.width = width;
            m.height = height;
        }
        Msg::Snapshot(snap) if snap.source != m.source => {}
        Msg::Snapshot(snap) => {
            let moved = snap.last_event_id != m.snapshot.last_event_id;
            m.snapshot = *snap;
            m.loaded = true;
            m.load_error = None;
            settle_cursors(m);
            if let Screen::Detail(d) = &m.screen
                && (moved || d.detail.is_none())
            {
                cmds.push(Cmd::LoadRunDetail(d.run));
            }
        }
        Msg::SnapshotFailed(e) => {
            m.load_error = Some(e.clone());
            m.error(format!("cannot read the store: {e}"));
        }
        Msg::RunDetail(detail) => {
            if let Screen::Detail(d) = &mut m.screen
                && d.run == detail.run.id
            {
                d.detail = Some(detail);
                d.error = None;
            }
        }
        Msg::RunDetailFailed { run, error } => {
            if let Screen::Detail(d) = &mut m.screen
                && d.run == run
            {
                d.error = Some(error);
            }
        }
        Msg::ActionResult(Ok(text)) => {
            m.set_status(Level::Ok, text);
            cmds.push(Cmd::Refresh);
        }
        Msg::ActionResult(Err(text)) => m.error(text),
        Msg::Preview { intent, result } => {
            if let Overlay::Dialog(d) = &mut m.overlay {
                d.set_preview(&intent, result);
            }
        }
        Msg::ThemeChanged(Ok(name)) => {
            m.info(format!("theme {name}"));
            m.theme_name = name;
        }
        Msg::ThemeChanged(Err(e)) => m.error(e),
        Msg::Rehearsal(p) => on_progress(m, *p, &mut cmds),
        Msg::RehearsalFailed { source, error } if source == m.source => {
            // A rehearsal opened from the live console that never started: back to live.
            let back_to_live = m
                .rehearsal
                .as_ref()
                .is_some_and(|v| v.nested && v.progress.is_none());
            if back_to_live {
                leave_rehearsal(m, &mut cmds);
            } else if let Some(view) = m.rehearsal.as_mut() {
                view.playing = false;
                view.error = Some(error.clone());
            }
            m.error(format!("rehearsal: {error}"));
        }
        Msg::RehearsalFailed { .. } => {}
        Msg::SchedulerStopped => {
            m.quitting = true;
            cmds.push(Cmd::Quit);
        }
        // Shown at its end (the newest lines), unless a dialog opened meanwhile.
        Msg::LogTail(Ok(tail)) => {
            if matches!(m.overlay, Overlay::None | Overlay::Log { .. }) {
                let scroll = u16::try_from(tail.lines.len()).unwrap_or(u16::MAX);
                m.overlay = Overlay::Log { tail, scroll };
            }
        }
        Msg::LogTail(Err(e)) => m.error(e),
        Msg::ConfigApplied { version, tz } => {
            let before = m.config_version.replace(version);
            // The console's zone is its config's: a rehearsal keeps its own
            // and returns to this one.
            match m.rehearsal.as_mut() {
                Some(view) => view.live_tz = tz,
                None => m.tz = tz,
            }
            if before.is_some_and(|b| b != version) {
                m.info(format!("config v{version} applied; the panes follow it"));
            }
        }
        Msg::ConfigUnloadable { version, error } => {
            m.error(format!(
                "config v{version} runs on the database but does not load here ({error}); showing the previous one"
            ));
        }
    }
    sync_focus(m, &mut cmds);
    sync_view(m, &mut cmds);
    cmds
}

/// Tells the shell when the schedules in view changed (once data is there:
/// before, the shell loads the first ones anyway).
fn sync_view(m: &mut Model, cmds: &mut Vec<Cmd>) {
    if !m.loaded {
        return;
    }
    let view = m.schedules_in_view();
    if view != m.view_sent {
        m.view_sent = view.clone();
        cmds.push(Cmd::View(view));
    }
}

/// The rehearsal started or stepped: its clock, zone and verdicts.
fn on_progress(m: &mut Model, p: Progress, cmds: &mut Vec<Cmd>) {
    if p.source != m.source {
        return;
    }
    let Some(view) = m.rehearsal.as_mut() else {
        return;
    };
    let newly_finished = p.finished && !view.finished();
    m.now = p.now;
    m.tz = p.tz;
    view.progress = Some(p);
    view.error = None;
    if newly_finished {
        view.playing = false;
        let (held, broken, pending) = view.tally();
        let text = format!(
            "rehearsal finished: {} — {held} held, {broken} broken, {pending} undecided (q leaves)",
            if broken + pending == 0 { "PASSED" } else { "BROKEN" }
        );
        if broken + pending == 0 {
            m.set_status(Level::Ok, text);
        } else {
            m.error(text);
        }
    }
    // Show what the step did without waiting for the next poll.
    cmds.push(Cmd::Refresh);
}

/// Opens `file` as a rehearsal from the live console.
fn enter_rehearsal(m: &mut Model, file: String, cmds: &mut Vec<Cmd>) {
    if let Some(view) = &m.rehearsal {
        m.error(format!(
            "the rehearsal {} is open; leave it first ({})",
            view.file,
            if view.nested { "Esc or q" } else { "q quits" }
        ));
        return;
    }
    m.source += 1;
    m.rehearsal = Some(RehearsalView::new(&file, true, m.tz, &m.mode_label));
    m.mode_label = REHEARSAL_LABEL.to_string();
    show_new_source(m);
    m.info(format!("loading rehearsal {file}…"));
    cmds.push(Cmd::Rehearse {
        file: PathBuf::from(file),
        source: m.source,
    });
}

/// Back to the live console from a rehearsal opened with `:rehearse`.
fn leave_rehearsal(m: &mut Model, cmds: &mut Vec<Cmd>) {
    let Some(view) = m.rehearsal.take() else {
        return;
    };
    m.tz = view.live_tz;
    m.mode_label = view.live_label;
    m.now = m.wall;
    m.source += 1;
    show_new_source(m);
    m.info(format!("left the rehearsal {}; live again", view.file));
    cmds.push(Cmd::LeaveRehearsal { source: m.source });
}

/// Forgets the data of the store no longer shown.
fn show_new_source(m: &mut Model) {
    m.snapshot = Snapshot::default();
    m.view_sent.clear();
    m.loaded = false;
    m.load_error = None;
    m.screen = Screen::Main;
    m.overlay = Overlay::None;
    m.last_run = None;
}

fn rehearsal_key(m: &mut Model, action: Action, cmds: &mut Vec<Cmd>) {
    let Some(view) = m.rehearsal.as_ref() else {
        return;
    };
    if action == Action::LeaveRehearsal {
        if view.nested {
            leave_rehearsal(m, cmds);
        } else {
            m.quitting = true;
            cmds.push(Cmd::Quit);
        }
        return;
    }
    if view.progress.is_none() {
        let text = match &view.error {
            Some(e) => format!("the rehearsal did not start: {e}"),
            None => "the rehearsal is still loading".to_string(),
        };
        m.info(text);
        return;
    }
    if matches!(action, Action::Step | Action::Play) && view.finished() {
        m.info("the rehearsal is finished (q leaves)");
        return;
    }
    let Some(view) = m.rehearsal.as_mut() else {
        return;
    };
    let status = match action {
        Action::Step => {
            if view.playing {
                view.playing = false;
                cmds.push(Cmd::RehearsalPlay(None));
            }
            cmds.push(Cmd::RehearsalStep);
            None
        }
        Action::Play => {
            view.playing = !view.playing;
            let rate = view.per_second();
            cmds.push(Cmd::RehearsalPlay(view.playing.then_some(rate)));
            Some(if view.playing {
                format!("playing at {rate} events/s (Space pauses, +/- speed)")
            } else {
                "paused (n steps, Space plays)".to_string()
            })
        }
        Action::Faster | Action::Slower => {
            view.speed = if action == Action::Faster {
                (view.speed + 1).min(SPEEDS.len() - 1)
            } else {
                view.speed.saturating_sub(1)
            };
            let rate = view.per_second();
            if view.playing {
                cmds.push(Cmd::RehearsalPlay(Some(rate)));
            }
            Some(format!("speed {rate} events/s"))
        }
        _ => None,
    };
    if let Some(text) = status {
        m.info(text);
    }
}

/// Tells the shell when the selected run changed.
fn sync_focus(m: &mut Model, cmds: &mut Vec<Cmd>) {
    if (matches!(m.pane, Pane::Schedules) || m.pane.lists_runs())
        && let Some(run) = m.selected_run()
    {
        m.last_run = Some(run);
    }
    let want = m.focus_run();
    if want != m.focus_sent {
        m.focus_sent = want;
        cmds.push(Cmd::Focus(want));
    }
}

fn settle_cursors(m: &mut Model) {
    let keys = panes::schedules::keys(m);
    m.schedules.settle(&keys);
    let keys = panes::retries::keys(m);
    m.retries.settle(&keys);
    let keys = panes::approvals::keys(m);
    m.approvals.settle(&keys);
    let keys = panes::backfill::keys(m);
    m.backfill.settle(&keys);
    let keys = panes::switches::keys(m);
    m.switches.settle(&keys);
    panes::timeline::settle(m);
}

fn on_key(m: &mut Model, key: &KeyEvent, cmds: &mut Vec<Cmd>) {
    if key.kind == KeyEventKind::Release {
        return;
    }
    // Ctrl-C quits from anywhere, dialogs and bars included (asking first
    // while the embedded scheduler runs attempts; a second one stops them).
    if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
        quit(m, true, cmds);
        return;
    }
    if let Overlay::Quit(dialog) = &mut m.overlay {
        match dialog.handle_key(key, m.wall) {
            QuitOutcome::Continue => {}
            QuitOutcome::Cancel => {
                m.overlay = Overlay::None;
                m.info("not quitting");
            }
            QuitOutcome::Stop(cmd) => cmds.push(cmd),
        }
        return;
    }
    if let Overlay::Dialog(dialog) = &mut m.overlay {
        match dialog.handle_key(key) {
            Outcome::Continue => {}
            Outcome::Cancel => {
                m.overlay = Overlay::None;
                m.info("cancelled");
            }
            Outcome::Submit(cmd) => {
                m.overlay = Overlay::None;
                m.info("sent…");
                cmds.push(cmd);
            }
        }
        return;
    }
    if m.bar.is_some() {
        on_bar_key(m, key, cmds);
        return;
    }
    let Some(action) = keymap::lookup(&m.layers(), key, false) else {
        return;
    };
    if let Overlay::Help { scroll } | Overlay::Log { scroll, .. } = &mut m.overlay {
        match action {
            Action::Down => *scroll = scroll.saturating_add(1),
            Action::Up => *scroll = scroll.saturating_sub(1),
            Action::PageDown => *scroll = scroll.saturating_add(10),
            Action::PageUp => *scroll = scroll.saturating_sub(10),
            _ => m.overlay = Overlay::None,
        }
        return;
    }
    if action.is_operator_action() && m.read_only {
        m.error("read-only console: actions are disabled (started with --read-only)");
        return;
    }
    apply(m, action, cmds);
}

fn on_bar_key(m: &mut Model, key: &KeyEvent, cmds: &mut Vec<Cmd>) {
    let action = keymap::lookup(&[Layer::Input], key, false);
    if action == Some(Action::Complete) {
        complete_command(m);
        return;
    }
    m.completions.clear();
    let Some(bar) = m.bar.as_mut() else {
        return;
    };
    match action {
        Some(Action::Cancel) => {
            if matches!(bar, Bar::Filter(_)) {
                m.filter.clear();
            }
            m.bar = None;
        }
        Some(Action::Accept) => {
            let bar = m.bar.take();
            if let Some(Bar::Command(line)) = bar {
                match command::parse(&line.text) {
                    Ok(c) => run_command(m, c, cmds),
                    Err(e) => m.error(e),
                }
            }
        }
        _ => match bar {
            Bar::Filter(line) => {
                line.edit(key);
                m.filter = line.text.clone();
            }
            Bar::Command(line) => {
                line.edit(key);
            }
        },
    }
}

/// Tab in the command bar: completes the command name or its argument from
/// what the console shows (see [`command::complete`]).
fn complete_command(m: &mut Model) {
    let Some(Bar::Command(line)) = &m.bar else {
        return;
    };
    let done = command::complete(&line.text, &|kind| m.known(kind));
    m.completions = done.candidates;
    m.bar = Some(Bar::Command(LineInput::with_text(&done.line)));
}

fn open_detail(m: &mut Model, run: i64, cmds: &mut Vec<Cmd>) {
    m.screen = Screen::Detail(DetailState {
        run,
        detail: None,
        error: None,
        section: DetailSection::Attempts,
        scroll: 0,
    });
    cmds.push(Cmd::LoadRunDetail(run));
}

fn apply(m: &mut Model, action: Action, cmds: &mut Vec<Cmd>) {
    match action {
        Action::ForceQuit => quit(m, true, cmds),
        Action::Quit => quit(m, false, cmds),
        Action::Help => m.overlay = Overlay::Help { scroll: 0 },
        Action::Back => back(m, cmds),
        Action::Filter => m.bar = Some(Bar::Filter(LineInput::with_text(&m.filter))),
        Action::Command => m.bar = Some(Bar::Command(LineInput::default())),
        Action::Refresh => {
            m.info("reloading…");
            cmds.push(Cmd::Refresh);
        }
        Action::NextPane => goto_pane(m, m.pane.next()),
        Action::PrevPane => goto_pane(m, m.pane.prev()),
        Action::GotoPane(p) => goto_pane(m, p),
        Action::NextSection | Action::PrevSection => {
            if let Screen::Detail(d) = &mut m.screen {
                d.section = d.section.shift(action == Action::NextSection);
                d.scroll = 0;
            }
        }
        Action::Down
        | Action::Up
        | Action::Left
        | Action::Right
        | Action::Top
        | Action::Bottom
        | Action::PageDown
        | Action::PageUp => navigate(m, action),
        Action::Open => open(m, cmds),
        Action::Approve | Action::Reject | Action::Requeue => run_action(m, action),
        Action::Pause | Action::Resume | Action::Trigger | Action::CloseCircuit => {
            schedule_action(m, action, cmds)
        }
        Action::Step | Action::Play | Action::Faster | Action::Slower | Action::LeaveRehearsal => {
            rehearsal_key(m, action, cmds)
        }
        Action::Kill => {
            let intent = if m.snapshot.kill_on() {
                Intent::KillOff
            } else {
                Intent::KillOn {
                    cancel_running: false,
                }
            };
            m.overlay = Overlay::Dialog(Box::new(kill_dialog(m, intent)));
        }
        // Dialog and bar keys are handled by their owners.
        Action::NextField
        | Action::PrevField
        | Action::NextChoice
        | Action::PrevChoice
        | Action::Confirm
        | Action::Cancel
        | Action::Accept
        | Action::Complete
        | Action::NextInput
        | Action::PrevButton
        | Action::NextButton
        | Action::StopNow => {}
    }
}

/// `q`, `:q` (`force: false`) or Ctrl-C (`force: true`). Without an embedded
/// scheduler the console quits at once. With one, it is stopped first and the
/// console quits when it has: at once when it runs no attempt; else the quit
/// dialog asks whether to wait for them or stop them now. Ctrl-C while asking
/// or waiting stops them now.
fn quit(m: &mut Model, force: bool, cmds: &mut Vec<Cmd>) {
    let Some(e) = &m.embedded else {
        m.quitting = true;
        cmds.push(Cmd::Quit);
        return;
    };
    let grace = e.grace;
    match &m.overlay {
        Overlay::Quit(d) => match d.phase {
            QuitPhase::Stopping { now: true, .. } => {}
            QuitPhase::Stopping { since, .. } if force => {
                m.overlay = Overlay::Quit(QuitDialog::stopping(grace, since, true));
                cmds.push(Cmd::StopScheduler { now: true });
            }
            QuitPhase::Stopping { .. } => {}
            QuitPhase::Ask(_) if force => {
                m.overlay = Overlay::Quit(QuitDialog::stopping(grace, m.wall, true));
                cmds.push(Cmd::StopScheduler { now: true });
            }
            QuitPhase::Ask(_) => {}
        },
        _ if m.own_attempts().is_empty() => {
            m.overlay = Overlay::Quit(QuitDialog::stopping(grace, m.wall, false));
            cmds.push(Cmd::StopScheduler { now: false });
        }
        _ => {
            m.bar = None;
            m.overlay = Overlay::Quit(QuitDialog::ask(grace));
        }
    }
}

fn goto_pane(m: &mut Model, p: Pane) {
    m.pane = p;
    m.screen = Screen::Main;
}

/// Esc: leave the detail, else clear the filter, else leave a rehearsal opened
/// from the live console, else clear the status line. Never quits.
fn back(m: &mut Model, cmds: &mut Vec<Cmd>) {
    if matches!(m.screen, Screen::Detail(_)) {
        m.screen = Screen::Main;
    } else if !m.filter.is_empty() {
        m.filter.clear();
        settle_cursors(m);
    } else if m.rehearsal.as_ref().is_some_and(|r| r.nested) {
        leave_rehearsal(m, cmds);
    } else {
        m.status = None;
    }
}

fn navigate(m: &mut Model, action: Action) {
    let page = m.page();
    if let Screen::Detail(d) = &mut m.screen {
        let by = u16::try_from(page).unwrap_or(u16::MAX);
        d.scroll = match action {
            Action::Down => d.scroll.saturating_add(1),
            Action::Up => d.scroll.saturating_sub(1),
            Action::PageDown => d.scroll.saturating_add(by),
            Action::PageUp => d.scroll.saturating_sub(by),
            Action::Top => 0,
            // The view clamps to the last screenful.
            Action::Bottom => u16::MAX,
            _ => d.scroll,
        };
        return;
    }
    let step = |c: &mut ListCursor, keys: &[RowKey]| match action {
        Action::Down => c.move_by(keys, 1),
        Action::Up => c.move_by(keys, -1),
        Action::PageDown => c.move_by(keys, page as isize),
        Action::PageUp => c.move_by(keys, -(page as isize)),
        Action::Top => c.top(keys),
        Action::Bottom => c.bottom(keys),
        _ => {}
    };
    match m.pane {
        Pane::Schedules => {
            let mut c = m.schedules.clone();
            c.navigate_names(|| panes::schedules::names(m), action, page);
            m.schedules = c;
        }
        Pane::Retries => {
            let keys = panes::retries::keys(m);
            step(&mut m.retries, &keys);
        }
        Pane::Approvals => {
            let keys = panes::approvals::keys(m);
            step(&mut m.approvals, &keys);
        }
        Pane::Backfill => {
            let keys = panes::backfill::keys(m);
            step(&mut m.backfill, &keys);
        }
        Pane::Switches => {
            let keys = panes::switches::keys(m);
            step(&mut m.switches, &keys);
        }
        Pane::Timeline => panes::timeline::navigate(m, action, page),
        Pane::Gates => {
            let by = u16::try_from(page).unwrap_or(u16::MAX);
            m.gates_scroll = match action {
                Action::Down => m.gates_scroll.saturating_add(1),
                Action::Up => m.gates_scroll.saturating_sub(1),
                Action::PageDown => m.gates_scroll.saturating_add(by),
                Action::PageUp => m.gates_scroll.saturating_sub(by),
                Action::Top => 0,
                Action::Bottom => u16::MAX,
                _ => m.gates_scroll,
            };
        }
    }
}

fn open(m: &mut Model, cmds: &mut Vec<Cmd>) {
    if m.pane == Pane::Switches {
        let keys = panes::switches::keys(m);
        let schedule = m
            .switches
            .selected(&keys)
            .and_then(|k| k.name())
            .and_then(panes::switches::schedule_of);
        if let Some(s) = schedule {
            let skeys = panes::schedules::keys(m);
            m.schedules.select(&skeys, &RowKey::Name(s.to_string()));
            m.pane = Pane::Schedules;
        } else {
            m.info("nothing to open here (K changes the kill switch)");
        }
        return;
    }
    let run = match m.pane {
        Pane::Gates => m.last_run,
        _ => m.selected_run(),
    };
    match run {
        Some(id) => open_detail(m, id, cmds),
        None if m.pane == Pane::Schedules => m.info("this schedule has no runs yet"),
        None => m.info("no run selected"),
    }
}

/// Whether `action` can act on what is selected now: approve / reject need a
/// `needs_human` run, requeue a failed or dead one, Tab completion the command
/// bar (the footer lists only keys that work here). Other actions always
/// apply; unknown runs are given the benefit of the doubt (the store decides).
pub fn action_applies(m: &Model, action: Action) -> bool {
    let wanted: &[RunState] = match action {
        // Tab completes in the command bar, not in the filter.
        Action::Complete => return matches!(m.bar, Some(Bar::Command(_))),
        Action::Approve | Action::Reject => &[RunState::NeedsHuman],
        Action::Requeue => &[RunState::Failed, RunState::Dead],
        _ => return true,
    };
    match action_run(m, action).map(|id| m.known_run(id).map(|r| r.state)) {
        Some(Some(state)) => wanted.contains(&state),
        Some(None) => true,
        None => false,
    }
}

/// The run an approve / reject / requeue is about, from the detail or the pane.
fn action_run(m: &Model, action: Action) -> Option<i64> {
    if let Screen::Detail(d) = &m.screen {
        return Some(d.run);
    }
    match (m.pane, action) {
        (Pane::Approvals, Action::Approve | Action::Reject) => m.selected_run(),
        (Pane::Timeline | Pane::Retries, Action::Requeue) => m.selected_run(),
        _ => None,
    }
}

fn run_label(run: Option<&Run>) -> String {
    match run {
        Some(r) => format!("{} {}", r.schedule, r.window_key),
        None => "not in view".to_string(),
    }
}

fn run_action(m: &mut Model, action: Action) {
    let Some(id) = action_run(m, action) else {
        m.info("select a run first");
        return;
    };
    open_run_dialog(m, action, id, None);
}

fn open_run_dialog(m: &mut Model, action: Action, id: i64, resume_after: Option<String>) {
    let run = m.known_run(id);
    let state = run.map(|r| r.state);
    let label = run_label(run);
    let intent = match action {
        Action::Approve | Action::Reject => {
            if let Some(s) = state.filter(|s| *s != RunState::NeedsHuman) {
                m.error(format!(
                    "run #{id} is {s}; only needs_human runs can be approved or rejected"
                ));
                return;
            }
            if action == Action::Approve {
                Intent::Approve {
                    run: id,
                    label,
                    resume_after,
                }
            } else {
                Intent::Reject { run: id, label }
            }
        }
        _ => {
            if let Some(s) = state.filter(|s| !matches!(s, RunState::Failed | RunState::Dead)) {
                m.error(format!(
                    "run #{id} is {s}; only failed or dead runs can be requeued"
                ));
                return;
            }
            Intent::Requeue { run: id, label }
        }
    };
    let dialog = match (Dialog::open(intent), action) {
        (Dialog::Reason(d), Action::Approve) => Dialog::Reason(d.with_choices(m.completed_steps(id))),
        (d, _) => d,
    };
    m.overlay = Overlay::Dialog(Box::new(dialog));
}

/// The kill switch dialog, listing what it touches: the attempts
/// `--cancel-running` stops, or the held runs turning it off releases.
fn kill_dialog(m: &Model, intent: Intent) -> Dialog {
    let runs: Vec<&Run> = match intent {
        Intent::KillOn { cancel_running: true } => m.snapshot.running.iter().collect(),
        Intent::KillOff => m.snapshot.kill_held.iter().collect(),
        _ => vec![],
    };
    let mut targets: Vec<String> = runs
        .iter()
        .map(|r| match intent {
            Intent::KillOff => format!(
                "#{} {} {} ({}) is released",
                r.id, r.schedule, r.window_key, r.state
            ),
            _ => format!(
                "#{} {} {} · attempt {} is stopped",
                r.id, r.schedule, r.window_key, r.attempts
            ),
        })
        .collect();
    if targets.is_empty() {
        match intent {
            Intent::KillOn { cancel_running: true } => targets.push("no attempt is running now".into()),
            Intent::KillOff => targets.push("no run is held by the kill switch now".into()),
            _ => {}
        }
    }
    match Dialog::open(intent) {
        Dialog::Reason(d) => Dialog::Reason(d.with_targets(targets)),
        Dialog::Confirm(d) => Dialog::Confirm(d.with_targets(targets)),
    }
}

/// The schedule a pause / resume / trigger / close is about.
fn action_schedule(m: &Model) -> Option<String> {
    match m.pane {
        Pane::Schedules => m.selected_schedule(),
        Pane::Switches => {
            let keys = panes::switches::keys(m);
            m.switches
                .selected(&keys)
                .and_then(|k| k.name())
                .and_then(panes::switches::schedule_of)
                .map(str::to_string)
        }
        _ => None,
    }
}

fn schedule_action(m: &mut Model, action: Action, cmds: &mut Vec<Cmd>) {
    let Some(schedule) = action_schedule(m) else {
        m.info("select a schedule first");
        return;
    };
    open_schedule_dialog(m, action, schedule, cmds);
}

/// Opens the dialog of `intent`, asking the shell for its plan if it shows one.
fn open_dialog(m: &mut Model, intent: Intent, cmds: &mut Vec<Cmd>) {
    if intent.needs_preview() {
        cmds.push(Cmd::Preview(intent.clone()));
    }
    m.overlay = Overlay::Dialog(Box::new(Dialog::open(intent)));
}

fn open_schedule_dialog(m: &mut Model, action: Action, schedule: String, cmds: &mut Vec<Cmd>) {
    let Some(row) = m.snapshot.schedule(&schedule) else {
        let known = m.snapshot.schedules.iter().map(|s| s.id.as_str());
        m.error(crate::operator::unknown_schedule(&schedule, known));
        return;
    };
    let refusal = match action {
        Action::Pause if row.paused => Some(format!("{schedule} is already paused")),
        Action::Resume if !row.paused => Some(format!("{schedule} is not paused")),
        Action::CloseCircuit if row.circuit == crate::store::CircuitState::Closed => {
            Some(format!("the circuit of {schedule} is already closed"))
        }
        _ => None,
    };
    if let Some(r) = refusal {
        m.info(r);
        return;
    }
    let intent = match action {
        Action::Pause => Intent::Pause { schedule },
        Action::Resume => Intent::Resume { schedule },
        Action::Trigger => Intent::Trigger { schedule },
        _ => Intent::CloseCircuit { schedule },
    };
    open_dialog(m, intent, cmds);
}

/// `:backfill SCHEDULE FROM TO`: dates are read in the scheduler's zone.
fn backfill_command(m: &mut Model, schedule: String, from: &str, to: &str, cmds: &mut Vec<Cmd>) {
    if m.snapshot.schedule(&schedule).is_none() {
        let known = m.snapshot.schedules.iter().map(|s| s.id.as_str());
        m.error(crate::operator::unknown_schedule(&schedule, known));
        return;
    }
    let range = command::parse_instant(from, m.tz, false)
        .and_then(|f| command::parse_instant(to, m.tz, true).map(|t| (f, t)));
    let (from_at, to_at) = match range {
        Ok(r) => r,
        Err(e) => {
            m.error(e);
            return;
        }
    };
    if to_at < from_at {
        m.error(format!("{to} is before {from}"));
        return;
    }
    let fmt = |t: DateTime<Utc>| t.with_timezone(&m.tz).format("%Y-%m-%d %H:%M").to_string();
    let range = format!("{} → {} {}", fmt(from_at), fmt(to_at), m.tz.name());
    open_dialog(
        m,
        Intent::Backfill {
            schedule,
            from: from_at,
            to: to_at,
            range,
        },
        cmds,
    );
}

fn run_command(m: &mut Model, c: Command, cmds: &mut Vec<Cmd>) {
    let operator = matches!(
        c,
        Command::Pause(_)
            | Command::Resume(_)
            | Command::Trigger(_)
            | Command::Close(_)
            | Command::Approve { .. }
            | Command::Reject(_)
            | Command::Requeue(_)
            | Command::Kill { .. }
            | Command::Unkill
            | Command::Reload
            | Command::ApproveConfig(_)
            | Command::Backfill { .. }
    );
    if operator && m.read_only {
        m.error("read-only console: actions are disabled (started with --read-only)");
        return;
    }
    match c {
        Command::Quit => quit(m, false, cmds),
        Command::Help => m.overlay = Overlay::Help { scroll: 0 },
        Command::Log => cmds.push(Cmd::ReadLog),
        Command::Refresh => cmds.push(Cmd::Refresh),
        Command::Goto(id) => open_detail(m, id, cmds),
        Command::Theme(name) => cmds.push(Cmd::SetTheme(name)),
        Command::Rehearse(file) => enter_rehearsal(m, file, cmds),
        Command::Pause(s) => open_schedule_dialog(m, Action::Pause, s, cmds),
        Command::Resume(s) => open_schedule_dialog(m, Action::Resume, s, cmds),
        Command::Trigger(s) => open_schedule_dialog(m, Action::Trigger, s, cmds),
        Command::Close(s) => open_schedule_dialog(m, Action::CloseCircuit, s, cmds),
        Command::Backfill { schedule, from, to } => backfill_command(m, schedule, &from, &to, cmds),
        Command::Approve { run, resume_after } => open_run_dialog(m, Action::Approve, run, resume_after),
        Command::Reject(id) => open_run_dialog(m, Action::Reject, id, None),
        Command::Requeue(id) => open_run_dialog(m, Action::Requeue, id, None),
        Command::Kill { cancel_running } => {
            if m.snapshot.kill_on() {
                m.info("the kill switch is already on");
            } else {
                m.overlay = Overlay::Dialog(Box::new(kill_dialog(m, Intent::KillOn { cancel_running })));
            }
        }
        Command::ApproveConfig(version) => {
            let intent = Intent::ApproveConfig { version };
            cmds.push(Cmd::Preview(intent.clone()));
            m.overlay = Overlay::Dialog(Box::new(Dialog::open(intent)));
        }
        Command::Reload => {
            let intent = Intent::Reload;
            cmds.push(Cmd::Preview(intent.clone()));
            m.overlay = Overlay::Dialog(Box::new(Dialog::open(intent)));
        }
        Command::Unkill => {
            if m.snapshot.kill_on() {
                m.overlay = Overlay::Dialog(Box::new(kill_dialog(m, Intent::KillOff)));
            } else {
                m.info("the kill switch is already off");
            }
        }
    }
}
