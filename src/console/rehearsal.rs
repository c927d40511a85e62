//! Rehearsal mode as the model sees it (DESIGN.md "Rehearsals"): which
//! scenario, where its virtual clock stands, the verdict on every expectation
//! so far, and whether it plays. The rehearsal itself runs on its own thread
//! (see [`super::player`]); its store is shown like the live one.

use crate::rehearsal::Verdict;
use crate::rehearsal::run::Line;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// Play speeds, in rehearsal steps (events) per second.
pub const SPEEDS: [u32; 7] = [1, 2, 5, 10, 20, 50, 100];
/// The speed a rehearsal starts with (5 steps a second).
pub const DEFAULT_SPEED: usize = 2;
/// Lines of "what the last step did" kept.
pub const HAPPENED: usize = 6;

/// Where a rehearsal stands, reported after it started and after every step.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Which store the console shows (see [`super::app::Model::source`]).
    pub source: u64,
    pub name: String,
    /// The rehearsed config's zone (header clock).
    pub tz: Tz,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// The virtual clock.
    pub now: DateTime<Utc>,
    pub steps: u64,
    pub finished: bool,
    pub verdicts: Vec<Verdict>,
    /// What the last step did (store events and fault / action notes), oldest first.
    pub happened: Vec<Line>,
}

/// A rehearsal open in the console.
#[derive(Debug, Clone)]
pub struct RehearsalView {
    pub file: String,
    /// Opened with `:rehearse` from the live console: Esc and `q` return to it.
    pub nested: bool,
    /// `None` while the scenario loads.
    pub progress: Option<Progress>,
    /// The scenario could not be loaded or run.
    pub error: Option<String>,
    pub playing: bool,
    /// Index into [`SPEEDS`].
    pub speed: usize,
    /// The live header to restore when leaving.
    pub live_tz: Tz,
    pub live_label: String,
}

impl RehearsalView {
    pub fn new(file: &str, nested: bool, live_tz: Tz, live_label: &str) -> Self {
        Self {
            file: file.to_string(),
            nested,
            progress: None,
            error: None,
            playing: false,
            speed: DEFAULT_SPEED,
            live_tz,
            live_label: live_label.to_string(),
        }
    }

    pub fn per_second(&self) -> u32 {
        SPEEDS[self.speed.min(SPEEDS.len() - 1)]
    }

    pub fn finished(&self) -> bool {
        self.progress.as_ref().is_some_and(|p| p.finished)
    }

    /// Expectations (held, broken, pending).
    pub fn tally(&self) -> (usize, usize, usize) {
        let verdicts = self.progress.as_ref().map_or(&[][..], |p| &p.verdicts[..]);
        let held = verdicts.iter().filter(|v| v.passed == Some(true)).count();
        let broken = verdicts.iter().filter(|v| v.passed == Some(false)).count();
        (held, broken, verdicts.len() - held - broken)
    }
}
