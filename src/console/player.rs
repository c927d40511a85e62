//! A rehearsal on its own thread, for rehearsal mode. The [`Rehearsal`] (the
//! real engine and store on a virtual clock, synchronous and fast) is built on
//! that thread and steps when told — or by itself at a chosen speed while
//! playing. After it starts and after every step it reports a [`Progress`];
//! its store, config and clock go to the shell's poller, which reads the
//! rehearsal's database like any other. Operator actions taken in rehearsal
//! mode are applied to that store at the virtual time, as the scenario's own
//! `[[action]]`s are.

use super::actions;
use super::app::{Cmd, Msg};
use super::dialogs::Intent;
use super::rehearsal::{HAPPENED, Progress};
use crate::config::Config;
use crate::rehearsal::Rehearsal;
use crate::rehearsal::run::{Line, Note, describe};
use crate::rehearsal::scenario::Scenario;
use crate::store::{EventFilter, Store, StoreError};
use crate::time::Clock;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What the player is asked to do.
#[derive(Debug)]
pub enum PlayerReq {
    Step,
    /// Steps per second, or pause.
    Play(Option<u32>),
    /// An operator action, at the virtual time.
    Act(Cmd),
    Preview(Intent),
    Stop,
}

/// The rehearsal's database, for the poller.
pub struct Opened {
    pub store: Store,
    pub config: Config,
    pub clock: Arc<dyn Clock>,
}

/// Event kinds too frequent to be "what happened" (as in the headless timeline).
const QUIET_KINDS: [&str; 3] = ["decision", "tick", "heartbeat"];

/// A running rehearsal thread; dropping it stops the thread, which removes the
/// rehearsal's temporary database.
pub struct Player {
    tx: Sender<PlayerReq>,
    handle: Option<JoinHandle<()>>,
}

impl Player {
    /// Starts `scenario` as `source`. `opened` receives the store once the
    /// rehearsal exists (before the first [`Msg::Rehearsal`] is sent).
    pub fn start(
        scenario: Scenario,
        source: u64,
        actor: String,
        msgs: Sender<Msg>,
        opened: Box<dyn FnOnce(Opened) + Send>,
    ) -> std::io::Result<Player> {
        let (tx, rx) = mpsc::channel();
        let handle = thread::Builder::new().name("rehearsal".into()).spawn(move || {
            let failed = |error: String| {
                let _ = msgs.send(Msg::RehearsalFailed { source, error });
            };
            if let Err(e) = play(scenario, source, &actor, &msgs, opened, &rx) {
                failed(e);
            }
        })?;
        Ok(Player {
            tx,
            handle: Some(handle),
        })
    }

    pub fn send(&self, req: PlayerReq) {
        // The thread only ends on Stop or after a failure it already reported.
        let _ = self.tx.send(req);
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        let _ = self.tx.send(PlayerReq::Stop);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Where the reports left off.
struct Seen {
    event_id: i64,
    notes: usize,
    steps: u64,
}

fn store_error(e: StoreError) -> String {
    e.to_string()
}

fn play(
    scenario: Scenario,
    source: u64,
    actor: &str,
    msgs: &Sender<Msg>,
    opened: Box<dyn FnOnce(Opened) + Send>,
    rx: &Receiver<PlayerReq>,
) -> Result<(), String> {
    let mut r = Rehearsal::new(scenario).map_err(|e| e.to_string())?;
    let store = r.driver.store().map_err(|e| e.to_string())?;
    opened(Opened {
        store: r.driver.store().map_err(|e| e.to_string())?,
        config: (*r.driver.cfg).clone(),
        clock: Arc::new(r.driver.clock.clone()),
    });
    let mut seen = Seen {
        event_id: 0,
        notes: 0,
        steps: 0,
    };
    report(&r, &store, source, &mut seen, msgs)?;
    let mut rate: Option<u32> = None;
    let mut next_at = Instant::now();
    loop {
        let req = match rate {
            Some(n) => {
                let wait = next_at.saturating_duration_since(Instant::now());
                match rx.recv_timeout(wait) {
                    Ok(req) => Some(req),
                    Err(RecvTimeoutError::Timeout) => {
                        next_at = Instant::now() + Duration::from_secs_f64(1.0 / f64::from(n.max(1)));
                        None
                    }
                    Err(RecvTimeoutError::Disconnected) => return Ok(()),
                }
            }
            None => match rx.recv() {
                Ok(req) => Some(req),
                Err(_) => return Ok(()),
            },
        };
        match req {
            // Playing and it is time, or one step by hand.
            None | Some(PlayerReq::Step) => {
                if !r.is_finished() {
                    r.step().map_err(|e| e.to_string())?;
                    seen.steps += 1;
                }
                if r.is_finished() {
                    rate = None;
                }
                report(&r, &store, source, &mut seen, msgs)?;
            }
            Some(PlayerReq::Play(n)) => {
                rate = n;
                next_at = Instant::now();
            }
            Some(PlayerReq::Act(cmd)) => {
                let now = r.now();
                let result = actions::perform(&store, &r.driver.cfg, &cmd, actor, now);
                if let Ok(text) = &result {
                    r.notes.push(Note {
                        at: now,
                        text: format!("ACTION {text}"),
                    });
                    // The engine reacts at the same virtual instant, as to scripted actions.
                    r.driver.settle().map_err(|e| e.to_string())?;
                }
                let _ = msgs.send(Msg::ActionResult(result));
                report(&r, &store, source, &mut seen, msgs)?;
            }
            Some(PlayerReq::Preview(intent)) => {
                let result = actions::preview(&store, &r.driver.cfg, &intent, actor, r.now());
                let _ = msgs.send(Msg::Preview { intent, result });
            }
            Some(PlayerReq::Stop) => return Ok(()),
        }
    }
}

/// Sends where the rehearsal stands and what happened since the last report.
fn report(
    r: &Rehearsal,
    store: &Store,
    source: u64,
    seen: &mut Seen,
    msgs: &Sender<Msg>,
) -> Result<(), String> {
    let (events, last_id) = store
        .read(|tx| {
            let events = tx.events(&EventFilter {
                after_id: Some(seen.event_id),
                newest_first: true,
                limit: Some(HAPPENED * 20),
                ..EventFilter::default()
            })?;
            Ok((events, tx.max_event_id()?))
        })
        .map_err(store_error)?;
    seen.event_id = last_id;
    let mut happened: Vec<Line> = events
        .into_iter()
        .filter(|e| !QUIET_KINDS.contains(&e.kind.as_str()))
        .take(HAPPENED)
        .map(|e| Line {
            at: e.at,
            text: describe(&e),
            kind: e.kind,
            schedule: e.schedule,
            window: None,
        })
        .collect();
    happened.extend(r.notes.iter().skip(seen.notes).map(|n| Line {
        at: n.at,
        kind: "rehearsal".into(),
        schedule: None,
        window: None,
        text: n.text.clone(),
    }));
    seen.notes = r.notes.len();
    happened.sort_by_key(|l| l.at);
    let keep = happened.len().saturating_sub(HAPPENED);
    happened.drain(..keep);
    let verdicts = r.verdicts().map_err(|e| e.to_string())?;
    let progress = Progress {
        source,
        name: r.scenario.name.clone(),
        tz: r.scenario.config.scheduler.timezone,
        start: r.scenario.start,
        end: r.scenario.end,
        now: r.now(),
        steps: seen.steps,
        finished: r.is_finished(),
        verdicts,
        happened,
    };
    let _ = msgs.send(Msg::Rehearsal(Box::new(progress)));
    Ok(())
}
