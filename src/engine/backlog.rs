//! Queuing a long outage's catch-up backlog as it drains. Planning queues the
//! oldest `max_concurrency` catch-up windows of a schedule and stores the rest
//! as one range (`Tx::put_backlog`); here the engine queues the next windows of
//! that range as the schedule's catch-up runs finish, oldest first. Windows
//! whose catch-up window ends before they are reached are queued at that
//! instant and expire through the ordinary decision, as a queued run would.

use super::{Engine, Result};
use crate::core::event::Opener;
use crate::core::layers::time::{new_run_for, opened_event};
use crate::recovery::catchup::Disposition;
use crate::store::Backlog;
use crate::store::types::NewEvent;
use crate::time::duration::to_delta;
use crate::time::fire::FireNote;
use chrono::{DateTime, TimeDelta, Utc};

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
    /// A catch-up run of the schedule left the queue here since the last look.
    room: bool,
    /// [`crate::store::Store::generation`] at the last look.
    seen: Option<u64>,
}

impl Look {
    /// A look as soon as possible (a new or newly seen backlog).
    pub(crate) fn now(at: DateTime<Utc>) -> Self {
        Self {
            at,
            expires: None,
            room: true,
            seen: None,
        }
    }

    /// Whether a look that has come must read the backlog: a run left,
    /// its next window expires, or someone else may have changed its
    /// catch-up runs (another connection committed since the last look).
    /// Otherwise the look is only the poll for ends elsewhere, and nothing
    /// was written elsewhere: it is put off by one poll.
    fn needed(&self, now: DateTime<Utc>, generation: u64) -> bool {
        self.room || self.expires.is_none_or(|e| e <= now) || self.seen != Some(generation)
    }

    /// The next look: at the poll, or sooner when the next window expires.
    fn next_at(expires: Option<DateTime<Utc>>, poll: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        expires.map_or(poll, |e| e.min(poll)).max(now)
    }
}

impl Engine {
    /// Queues the backlog windows that are due: for every schedule whose next
    /// look has come, as many as its free catch-up slots, plus every window
    /// that has reached the end of its catch-up window.
    pub(crate) fn queue_backlogs(&mut self, now: DateTime<Utc>) -> Result<()> {
        if self.backlog_poll.is_none_or(|t| t <= now) {
            let rows = self.store.read(|tx| tx.backlogs())?;
            let mut looks = self.backlog.borrow_mut();
            for b in rows {
                if let Some(&idx) = self.index.get(&b.schedule) {
                    looks.entry(idx).or_insert(Look::now(now));
                }
            }
            self.backlog_poll = Some(now + POLL);
        }
        let due: Vec<(usize, Look)> = self
            .backlog
            .borrow()
            .iter()
            .filter(|(_, l)| l.at <= now)
            .map(|(idx, l)| (*idx, *l))
            .collect();
        for (idx, look) in due {
            let poll = now + self.backlog_poll_every(idx);
            if !look.needed(now, self.store.generation()) {
                if let Some(l) = self.backlog.borrow_mut().get_mut(&idx) {
                    l.at = Look::next_at(look.expires, poll, now);
                }
                continue;
            }
            let next = self.queue_backlog(idx, now)?;
            let seen = Some(self.store.generation());
            let mut looks = self.backlog.borrow_mut();
            match next {
                Some(expires) => looks.insert(
                    idx,
                    Look {
                        at: Look::next_at(Some(expires), poll, now),
                        expires: Some(expires),
                        room: false,
                        seen,
                    },
                ),
                None => looks.remove(&idx),
            };
        }
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
        self.backlog.borrow().values().map(|l| l.at).min()
    }

    /// A run of schedule `idx` left the catch-up queue: look at its backlog now.
    pub(crate) fn backlog_room(&self, idx: usize, now: DateTime<Utc>) {
        if let Some(l) = self.backlog.borrow_mut().get_mut(&idx) {
            l.at = l.at.min(now);
            l.room = true;
        }
    }

    /// Queues the next windows of schedule `idx`'s backlog; returns when its
    /// next window reaches the end of its catch-up window (`None`: the
    /// backlog is all queued).
    fn queue_backlog(&self, idx: usize, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        let s = self.schedule(idx);
        let Some(rule) = self.rules[idx].as_ref() else {
            return Ok(None);
        };
        let slots = (s.max_concurrency as usize).max(1);
        let catchup_window = to_delta(s.catchup_window);
        Ok(self.store.write(|tx| {
            let Some(b) = tx.backlog(&s.id)? else {
                return Ok(None);
            };
            let mut room = slots.saturating_sub(tx.unfinished_catchup(&s.id, b.next)?);
            let mut fires = rule
                .fires_after(b.next - TimeDelta::milliseconds(1))
                .take_while(|f| f.at <= b.until)
                .peekable();
            while let Some(f) = fires.next_if(|f| room > 0 || f.at + catchup_window <= now) {
                let calendar = f.note == Some(FireNote::CalendarSkipped);
                let d = if calendar {
                    Disposition::Calendar
                } else {
                    Disposition::CatchUp
                };
                if let Some(run) = tx.insert_run(&new_run_for(s, &f, d, now), now)? {
                    tx.append_event(
                        &NewEvent::of(now, opened_event(&run, f.note, Opener::default())).for_run(&run),
                    )?;
                    if !calendar && f.at + catchup_window > now {
                        room -= 1;
                    }
                }
            }
            let Some(next) = fires.next() else {
                tx.clear_backlog(&s.id)?;
                return Ok(None);
            };
            if next.at != b.next {
                tx.put_backlog(&Backlog { next: next.at, ..b })?;
            }
            // Again when a run of the schedule ends (backlog_room), at the latest
            // when the next window would expire, and every check_every in case a
            // run ended elsewhere (queue_backlogs).
            Ok(Some(next.at + catchup_window))
        })?)
    }
}
