//! Queuing a long outage's catch-up backlog as it drains. Planning queues the
//! oldest catch-up windows of a schedule, as many as it may run at once
//! ([`catchup_slots`]), and stores the rest as one range (`Tx::put_backlog`);
//! here the engine queues the next windows of the ranges as places of the
//! backfill pool free up, the oldest window of a schedule with room first.
//! Windows whose catch-up window ends before they are reached are queued at
//! that instant and expire through the ordinary decision, as a queued run would.

use super::pipeline::Fresh;
use super::{Engine, Result};
use crate::config::model::{Overlap, ScheduleConfig};
use crate::core::event::Opener;
use crate::core::layers::time::{new_run_for, opened_event};
use crate::recovery::catchup::Disposition;
use crate::store::types::NewEvent;
use crate::store::types::{Pool, RunState};
use crate::time::duration::to_delta;
use crate::time::fire::FireNote;
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::BTreeSet;

/// How often the backlog table is read again for ranges another scheduler
/// planned (this engine's own plans are known at once).
const POLL: TimeDelta = TimeDelta::minutes(5);

/// When to look at a schedule's backlog next, and why.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Look {
    pub(crate) at: DateTime<Utc>,
    /// When its next window reaches the end of its catch-up window (it is
    /// queued then, room or not); `None`: not known yet.
    expires: Option<DateTime<Utc>>,
    /// [`crate::store::Store::generation`] at the last look.
    seen: Option<u64>,
    /// The backlog's next window, when known (from a look or the table).
    next: Option<DateTime<Utc>>,
    /// At the last look the schedule had as many catch-up runs unfinished
    /// as it may run at once: a free place of the pool is not for it until
    /// one of them leaves.
    full: bool,
}

impl Look {
    /// A look as soon as possible (a new or newly seen backlog).
    pub(crate) fn now(at: DateTime<Utc>) -> Self {
        Self {
            at,
            expires: None,
            seen: None,
            next: None,
            full: false,
        }
    }

    /// Whether a look that has come must read the backlog: its next window
    /// expires, or someone else may have changed its catch-up runs
    /// (another connection committed since the last look). Otherwise the
    /// look is only the poll for ends elsewhere, and nothing was written
    /// elsewhere: it is put off by one poll. (A run of the schedule ending
    /// here puts it back among the heads a free place goes to.)
    fn needed(&self, now: DateTime<Utc>, generation: u64) -> bool {
        self.expires.is_none_or(|e| e <= now) || self.seen != Some(generation)
    }

    /// The next look: at the poll, or sooner when the next window expires.
    fn next_at(expires: Option<DateTime<Utc>>, poll: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        expires.map_or(poll, |e| e.min(poll)).max(now)
    }
}

/// The schedules with a backlog, and their next windows in order: a free
/// place of the backfill pool goes to the oldest window of a schedule with
/// room, whichever schedule's run left it.
#[derive(Debug, Default)]
pub(crate) struct Looks {
    /// Each schedule's look, by its index in the config.
    by_schedule: Vec<Option<Look>>,
    /// (next window, schedule) of every look whose next window is known
    /// and whose schedule is not full.
    heads: BTreeSet<(DateTime<Utc>, usize)>,
    /// (look's instant, schedule) of every look, soonest first.
    by_at: BTreeSet<(DateTime<Utc>, usize)>,
    /// A place of the backfill pool was freed here and not offered yet.
    freed: Option<DateTime<Utc>>,
}

impl Looks {
    fn head(l: &Look) -> Option<DateTime<Utc>> {
        l.next.filter(|_| !l.full)
    }

    /// Sets schedule `idx`'s look. (Every backlog is put off by a poll
    /// every `check_every`: the ordered sets change only where it moved.)
    pub(crate) fn insert(&mut self, idx: usize, look: Look) {
        if self.by_schedule.len() <= idx {
            self.by_schedule.resize(idx + 1, None);
        }
        let old = self.by_schedule[idx].replace(look);
        let (old_head, old_at) = match &old {
            Some(o) => (Self::head(o), Some(o.at)),
            None => (None, None),
        };
        let head = Self::head(&look);
        if old_head != head {
            if let Some(at) = old_head {
                self.heads.remove(&(at, idx));
            }
            if let Some(at) = head {
                self.heads.insert((at, idx));
            }
        }
        if old_at != Some(look.at) {
            if let Some(at) = old_at {
                self.by_at.remove(&(at, idx));
            }
            self.by_at.insert((look.at, idx));
        }
    }

    fn remove(&mut self, idx: usize) {
        if let Some(old) = self.by_schedule.get_mut(idx).and_then(Option::take) {
            if let Some(at) = Self::head(&old) {
                self.heads.remove(&(at, idx));
            }
            self.by_at.remove(&(old.at, idx));
        }
    }

    fn get(&self, idx: usize) -> Option<Look> {
        self.by_schedule.get(idx).copied().flatten()
    }

    /// The looks whose instant has come, soonest first.
    fn due(&self, now: DateTime<Utc>) -> Vec<(usize, Look)> {
        self.by_at
            .range(..=(now, usize::MAX))
            .filter_map(|&(_, idx)| Some((idx, self.get(idx)?)))
            .collect()
    }

    /// The soonest instant a look needs the engine.
    fn next_look(&self) -> Option<DateTime<Utc>> {
        let freed = self.freed.filter(|_| !self.heads.is_empty());
        self.by_at
            .first()
            .map(|&(at, _)| at)
            .into_iter()
            .chain(freed)
            .min()
    }
}

/// How many catch-up runs of schedule `s` may wait or run at once:
/// `max_concurrency`, or one while its overlap rule (anything but `allow`)
/// would hold a second behind the first.
pub(crate) fn catchup_slots(s: &ScheduleConfig) -> usize {
    if s.overlap == Overlap::Allow {
        (s.max_concurrency as usize).max(1)
    } else {
        1
    }
}

/// What one look at a schedule's backlog did.
struct Queued {
    /// The backlog's next window (`None`: the backlog is all queued).
    next: Option<DateTime<Utc>>,
    /// The schedule has as many catch-up runs unfinished as it may run at once.
    full: bool,
}

impl Engine {
    /// Queues the backlog windows that are due: the oldest windows of
    /// schedules with room, as many as the backfill pool has places free;
    /// every window that has reached the end of its catch-up window; and
    /// reads each backlog whose look has come. A backlog's windows are
    /// queued only as places free up, so a long backlog never waits in the
    /// store as thousands of runs to be decided, held and woken again.
    ///
    /// With `fresh` (the tick decides the windows it opens in the transaction
    /// that opens them), a window given a place while no older catch-up run
    /// is due is left unopened there ([`Fresh::Unopened`]), as an on-time
    /// window is: inserted already claimed if its decision claims it at once.
    pub(crate) fn queue_backlogs(
        &mut self,
        now: DateTime<Utc>,
        fresh: Option<&mut Vec<Fresh>>,
    ) -> Result<()> {
        if self.backlog_poll.is_none_or(|t| t <= now) {
            let rows = self.store.read(|tx| tx.backlogs())?;
            let mut looks = self.backlog.borrow_mut();
            for b in rows {
                if let Some(&idx) = self.index.get(&b.schedule)
                    && looks.get(idx).is_none()
                {
                    looks.insert(
                        idx,
                        Look {
                            next: Some(b.next),
                            ..Look::now(now)
                        },
                    );
                }
            }
            self.backlog_poll = Some(now + POLL);
        }
        // Looks whose time has come: a new backlog read, a window expiring
        // queued (to expire), a poll for runs ended elsewhere.
        let due = self.backlog.borrow().due(now);
        let mut looked = false;
        for (idx, look) in due {
            if !look.needed(now, self.store.generation()) {
                let poll = now + self.backlog_poll_every(idx);
                self.backlog.borrow_mut().insert(
                    idx,
                    Look {
                        at: Look::next_at(look.expires, poll, now),
                        ..look
                    },
                );
                continue;
            }
            self.look_at(idx, now, &mut 0, None)?;
            looked = true;
        }
        // Then the pool's free places, to the oldest windows of schedules
        // with room: offered when a catch-up run has left or a backlog was
        // read since the last offer (a place that stays free, say after a
        // woken run was held again, is offered at the next).
        let freed = self.backlog.borrow_mut().freed.take();
        if (freed.is_some() || looked) && !self.backlog.borrow().heads.is_empty() {
            self.offer_places(now, fresh).inspect_err(|_| {
                // Rolled back: the places are still to offer.
                if let Some(at) = freed {
                    self.backfill_freed(None, at);
                }
            })?;
        }
        Ok(())
    }

    /// The pool's free places to the heads, oldest window first; with
    /// `fresh`, and no catch-up run already due (which would go first), the
    /// windows given a place are left unopened in it.
    fn offer_places(&self, now: DateTime<Utc>, mut fresh: Option<&mut Vec<Fresh>>) -> Result<()> {
        let (mut places, due) = self.backfill_places(now)?;
        if due > 0 {
            fresh = None;
        }
        while places > 0 {
            let Some(&(_, idx)) = self.backlog.borrow().heads.first() else {
                break;
            };
            self.look_at(idx, now, &mut places, fresh.as_deref_mut())?;
        }
        Ok(())
    }

    /// Places of the backfill pool free for windows not queued yet: its
    /// room in this process less the catch-up runs already due (a run
    /// woken by an end, or queued and not decided yet, takes one first).
    /// Also the count of those due runs (up to the room).
    fn backfill_places(&self, now: DateTime<Utc>) -> Result<(usize, usize)> {
        let room = self.pool_room(Pool::Backfill);
        if room == 0 {
            return Ok((0, 0));
        }
        let due = self.store.read(|tx| tx.due_catchup_count(now, room))?;
        Ok((room.saturating_sub(due), due))
    }

    /// Reads schedule `idx`'s backlog and queues what is due of it, at most
    /// `places` windows that do not expire yet; sets its next look. With
    /// `fresh`, windows given a place are left unopened in it.
    fn look_at(
        &self,
        idx: usize,
        now: DateTime<Utc>,
        places: &mut usize,
        fresh: Option<&mut Vec<Fresh>>,
    ) -> Result<()> {
        let q = self.queue_backlog(idx, now, places, fresh)?;
        let mut looks = self.backlog.borrow_mut();
        let Some(next) = q.next else {
            looks.remove(idx);
            return Ok(());
        };
        let expires = next + to_delta(self.schedule(idx).catchup_window);
        let poll = now + self.backlog_poll_every(idx);
        // Looked at again when the next window would expire, and every
        // check_every in case a run ended elsewhere; a run of the schedule
        // ending here puts it back among the heads (backfill_freed).
        looks.insert(
            idx,
            Look {
                at: Look::next_at(Some(expires), poll, now),
                expires: Some(expires),
                seen: Some(self.store.generation()),
                next: Some(next),
                full: q.full,
            },
        );
        Ok(())
    }

    /// How often a backlog is looked at in case a catch-up run ended
    /// elsewhere (another scheduler, an operator's reject): the schedule's
    /// `check_every`.
    fn backlog_poll_every(&self, idx: usize) -> TimeDelta {
        TimeDelta::from_std(self.schedule(idx).check_every).unwrap_or(TimeDelta::minutes(1))
    }

    /// The soonest instant a backlog needs a look, if any schedule has one.
    pub(crate) fn next_backlog_look(&self) -> Option<DateTime<Utc>> {
        self.backlog.borrow().next_look()
    }

    /// A catch-up run left the queue or gave its place back (of schedule
    /// `idx`, when its own backlog may have room again): a place of the
    /// backfill pool is to be offered to the oldest backlog window.
    pub(crate) fn backfill_freed(&self, idx: Option<usize>, now: DateTime<Utc>) {
        let mut looks = self.backlog.borrow_mut();
        looks.freed = Some(looks.freed.map_or(now, |t| t.min(now)));
        if let Some(idx) = idx
            && let Some(l) = looks.get(idx)
            && l.full
        {
            looks.insert(idx, Look { full: false, ..l });
        }
    }

    /// Queues the next windows of schedule `idx`'s backlog: as many as it
    /// has room for and `places` allows, plus every window that has reached
    /// the end of its catch-up window.
    fn queue_backlog(
        &self,
        idx: usize,
        now: DateTime<Utc>,
        places: &mut usize,
        mut fresh: Option<&mut Vec<Fresh>>,
    ) -> Result<Queued> {
        let s = self.schedule(idx);
        let done = Queued {
            next: None,
            full: false,
        };
        let Some(rule) = self.rules[idx].as_ref() else {
            return Ok(done);
        };
        let slots = catchup_slots(s);
        let catchup_window = to_delta(s.catchup_window);
        // As in open_due_windows: only a schedule without gates has its
        // window decided before its row exists.
        if !self.gates.get(idx).is_some_and(|g| g.is_empty()) {
            fresh = None;
        }
        let mut left = *places;
        let queued = self.store.write(|tx| {
            let Some(b) = tx.backlog(&s.id)? else {
                return Ok(done);
            };
            let mut room = slots.saturating_sub(tx.unfinished_catchup(&s.id, b.next)?);
            let mut fires = rule
                .fires_after(b.next - TimeDelta::milliseconds(1))
                .take_while(|f| f.at <= b.until)
                .peekable();
            while let Some(f) = fires.next_if(|f| room > 0 && left > 0 || f.at + catchup_window <= now) {
                let calendar = f.note == Some(FireNote::CalendarSkipped);
                let d = if calendar {
                    Disposition::Calendar
                } else {
                    Disposition::CatchUp
                };
                let takes_place = !calendar && f.at + catchup_window > now;
                let mut new = Some(new_run_for(s, &f, d, now));
                if takes_place
                    && let Some(fresh) = fresh.as_deref_mut()
                    && let Some(n) = new.take_if(|n| n.state == RunState::Pending)
                {
                    match Fresh::unopened(n, f.note, now) {
                        Ok(u) => fresh.push(u),
                        Err(back) => new = Some(back),
                    }
                }
                let queued = match new {
                    None => true, // left unopened in `fresh`
                    Some(new) => match tx.insert_run(&new, now)? {
                        Some(run) => {
                            tx.append_event(
                                &NewEvent::of(now, opened_event(&run, f.note, Opener::default()))
                                    .for_run(&run),
                            )?;
                            true
                        }
                        None => false, // another scheduler queued it first
                    },
                };
                if queued && takes_place {
                    room = room.saturating_sub(1);
                    left = left.saturating_sub(1);
                }
            }
            let Some(next) = fires.next() else {
                tx.clear_backlog(&s.id)?;
                return Ok(done);
            };
            if next.at != b.next {
                tx.advance_backlog(&s.id, next.at)?;
            }
            Ok(Queued {
                next: Some(next.at),
                full: room == 0,
            })
        })?;
        *places = left;
        Ok(queued)
    }
}
