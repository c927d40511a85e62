//! Layer 1 in the loop: opening windows when their fire instant is reached, for
//! time triggers (from the due heap) and event triggers (from posted events),
//! including the catch-up plan after any gap.

use super::pipeline::{CLAIM_CHUNK, Fresh};
use super::{Engine, Result, backlog};
use crate::config::model::{Anchor, ScheduleConfig, TriggerConfig};
use crate::core::event::{Event, Opener};
use crate::core::layers::time::{new_run_for, opened_event};
use crate::recovery::catchup::{self, Disposition};
use crate::store::Backlog;
use crate::store::types::{NewEvent, Pool, RunState};
use crate::time::duration::to_delta;
use crate::time::fire::{Fire, window_key};
use chrono::{DateTime, TimeDelta, Utc};
use std::cmp::Reverse;

impl Engine {
    /// Opens every window whose fire instant is at or before `now`. After a gap
    /// (first start, downtime, suspend, forward clock jump) several fires are due
    /// at once; the catch-up planner decides which run on time, which are caught
    /// up in the backfill pool, coalesced, skipped or expired.
    ///
    /// With `fresh` it stops once [`CLAIM_CHUNK`] fresh runs are in it: the
    /// on-time runs it opened that are due now, for the caller to decide in
    /// the same transaction. `true`: it stopped with windows still due.
    /// The one window due now of a schedule without gates is left unopened
    /// there ([`Fresh::Unopened`]): the caller inserts it already claimed
    /// when its decision claims it.
    pub(crate) fn open_due_windows(
        &mut self,
        now: DateTime<Utc>,
        mut fresh: Option<&mut Vec<Fresh>>,
    ) -> Result<bool> {
        while let Some(Reverse((at, idx))) = self.heap.peek().copied() {
            if at > now {
                break;
            }
            if fresh.as_ref().is_some_and(|f| f.len() >= CLAIM_CHUNK) {
                return Ok(true);
            }
            // Popped only once the window is durably opened: a failed write (a
            // locked database) leaves it due for the next tick.
            // The config is shared (an Arc), not copied per run.
            let cfg = self.cfg.clone();
            let s = &cfg.schedules[idx];
            if let TriggerConfig::Every {
                anchor: Anchor::LastStart,
                ..
            } = s.trigger
            {
                // One window now; the next is scheduled when this one starts.
                self.open_last_start_window(idx, s, at, now)?;
                self.heap.pop();
                continue;
            }
            let Some(rule) = self.rules[idx].clone() else {
                self.heap.pop();
                continue;
            };
            let from = self.cursor[idx].unwrap_or(at - TimeDelta::milliseconds(1));
            let cap = self.opts.max_catchup_windows;
            // The steady state: the fire computed when the cursor last moved
            // (the first after `from`) is the one due, and the one after it
            // is not due yet — and, being the first fire after the new
            // cursor, is the next one to wait for. One fire computed per
            // window instead of three.
            // (Not where fires can share an instant: the first after that
            // instant would skip the others.)
            let known = self.next_fire[idx]
                .take()
                .filter(|(computed_from, f)| {
                    self.cursor[idx] == Some(*computed_from) && f.at == at && !rule.may_share_instants()
                })
                .map(|(_, f)| f);
            let mut after_due: Option<Option<Fire>> = None;
            // Fires are whole seconds apart at least (shared instants are
            // excluded above): within a second of the due one, the next is
            // not due yet, and is computed once this tick's agents started
            // ([`Engine::schedule_next_fires`]), off the path from the due
            // instant to them.
            let mut next_later = false;
            let mut fires: Vec<Fire> = match known {
                Some(first)
                    if first.at.timestamp_subsec_nanos() == 0 && now < first.at + TimeDelta::seconds(1) =>
                {
                    next_later = true;
                    vec![first]
                }
                Some(first) => match rule.next_after(first.at) {
                    second if second.as_ref().is_none_or(|f| f.at > now) => {
                        after_due = Some(second);
                        vec![first]
                    }
                    _ => vec![],
                },
                None => vec![],
            };
            if after_due.is_none() && !next_later {
                fires = rule
                    .fires_after(from)
                    .take_while(|f| f.at <= now)
                    .take(cap + 1)
                    .collect();
            }
            let truncated = fires.len() > cap;
            if truncated {
                // Keep the newest windows; the older ones are far past any catch-up window.
                let newest_from = rule
                    .fires_after(now - to_delta(s.catchup_window) - to_delta(s.close_after))
                    .take_while(|f| f.at <= now)
                    .take(cap)
                    .collect::<Vec<_>>();
                fires = newest_from;
            }
            let plan = catchup::plan(
                fires,
                now,
                self.alive_since,
                s.catchup,
                to_delta(s.catchup_window),
            );
            let summary = catchup::summarize(&plan);
            let gap = plan.len() > 1 || plan.iter().any(|p| p.disposition != Disposition::OnTime);
            let new_cursor = self.cursor[idx].map_or(now, |c| c.max(now));
            let mut alerts = vec![];
            // Catch-up runs of one schedule go oldest first, at most
            // max_concurrency at a time: the oldest are queued now, the rest of
            // the range is kept as the schedule's backlog and queued as its runs
            // end (engine::backlog), so a long outage is planned in one row per
            // schedule, not one run per missed window.
            let slots = backlog::catchup_slots(s);
            let catch_ups: Vec<usize> = plan
                .iter()
                .enumerate()
                .filter(|(_, p)| p.disposition == Disposition::CatchUp)
                .map(|(i, _)| i)
                .collect();
            let mut deferred = 0;
            // The steady state: one window, on time, of a schedule without
            // gates (any gate is decided the usual way, after its insert).
            let unopened = !gap && plan.len() == 1 && self.gates.get(idx).is_some_and(|g| g.is_empty());
            self.store.write(|tx| {
                // Only catch-up windows can join a backlog range.
                let existing = if catch_ups.is_empty() {
                    None
                } else {
                    tx.backlog(&s.id)?
                };
                // Behind an older backlog, every new catch-up window waits its turn.
                let first = if existing.is_some() { 0 } else { slots };
                let range = catch_ups.get(first).zip(catch_ups.last()).map(|(&a, &b)| a..=b);
                for (i, p) in plan.iter().enumerate() {
                    if range.as_ref().is_some_and(|r| r.contains(&i)) {
                        deferred += 1;
                        continue;
                    }
                    let mut new = new_run_for(s, &p.fire, p.disposition, now);
                    if unopened
                        && let Some(f) = fresh.as_mut()
                        && new.pool == Pool::OnTime
                        && new.state == RunState::Pending
                    {
                        match Fresh::unopened(new, p.fire.note, now) {
                            Ok(u) => {
                                if f.capacity() == 0 {
                                    // A chunk's room at once: growing it
                                    // would copy its (large) windows each time.
                                    f.reserve_exact(CLAIM_CHUNK);
                                }
                                f.push(u);
                                continue;
                            }
                            Err(back) => new = back,
                        }
                    }
                    let Some(run) = tx.insert_run(&new, now)? else {
                        continue; // another scheduler opened it first
                    };
                    tx.append_event(
                        &NewEvent::of(now, opened_event(&run, p.fire.note, Opener::default())).for_run(&run),
                    )?;
                    if let Some(f) = fresh.as_mut()
                        && run.pool == Pool::OnTime
                        && run.state == RunState::Pending
                        && run.next_check_at.is_some_and(|t| t <= now)
                    {
                        f.push(Fresh::Opened(run));
                    }
                }
                if let Some(r) = &range {
                    let (next, until) = (plan[*r.start()].fire.at, plan[*r.end()].fire.at);
                    tx.put_backlog(&Backlog {
                        schedule: s.id.clone(),
                        next: existing.as_ref().map_or(next, |e| e.next.min(next)),
                        until: existing.as_ref().map_or(until, |e| e.until.max(until)),
                        planned_at: now,
                    })?;
                }
                if gap {
                    tx.append_event(
                        &NewEvent::of(
                            now,
                            Event::CatchupPlanned {
                                since: self.cursor[idx],
                                policy: format!("{:?}", s.catchup).to_lowercase(),
                                windows: plan.len(),
                                summary,
                                queued_later: deferred,
                                truncated,
                            },
                        )
                        .for_schedule(&s.tenant, &s.id),
                    )?;
                }
                tx.set_last_evaluated(&s.id, new_cursor)?;
                Ok(())
            })?;
            if summary.expired > 0 {
                alerts.push(format!(
                    "{} window(s) of {} are older than the catch-up window ({}) and expired without running",
                    summary.expired,
                    s.id,
                    crate::time::duration::format_duration(s.catchup_window)
                ));
            }
            if summary.not_caught_up > 0 {
                alerts.push(format!(
                    "{} missed window(s) of {} were skipped (catchup = \"none\")",
                    summary.not_caught_up, s.id
                ));
            }
            if truncated {
                alerts.push(format!(
                    "more than {cap} windows of {} were due after a gap; only the newest were planned",
                    s.id
                ));
            }
            self.heap.pop();
            self.cursor[idx] = Some(new_cursor);
            if deferred > 0 {
                self.backlog.borrow_mut().insert(idx, backlog::Look::now(now));
            }
            for a in alerts {
                self.raise_alert(now, &s.tenant, &s.id, None, "catchup", &a)?;
            }
            // After the fast path above the cursor moved to `now`, past the
            // one fire due: the fire after it is the first after the cursor.
            if next_later {
                self.unscheduled.push((idx, new_cursor));
                continue;
            }
            let next = match after_due {
                Some(next) => next,
                None => rule.next_after(new_cursor),
            };
            if let Some(next) = next {
                self.heap.push(Reverse((next.at, idx)));
                self.next_fire[idx] = Some((new_cursor, next));
            }
        }
        Ok(false)
    }

    /// Gives the schedules [`Engine::open_due_windows`] left without their
    /// next fire (see `next_later` there) their next fire, as it would
    /// have: the first after their cursor, on the due heap.
    pub(crate) fn schedule_next_fires(&mut self) {
        let mut unscheduled = std::mem::take(&mut self.unscheduled);
        for (idx, cursor) in unscheduled.drain(..) {
            if self.next_fire[idx].is_some() {
                continue; // scheduled since
            }
            let from = self.cursor[idx].unwrap_or(cursor);
            if let Some(next) = self.rules[idx].as_ref().and_then(|r| r.next_after(from)) {
                self.heap.push(Reverse((next.at, idx)));
                self.next_fire[idx] = Some((from, next));
            }
        }
        if self.unscheduled.is_empty() {
            self.unscheduled = unscheduled;
        }
    }

    fn open_last_start_window(
        &mut self,
        idx: usize,
        s: &ScheduleConfig,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let local = at.with_timezone(&s.timezone).fixed_offset();
        let fire = Fire {
            at,
            local,
            window_key: window_key(crate::time::cron::Cadence::SubDaily, &local),
            note: None,
        };
        let new = new_run_for(s, &fire, Disposition::OnTime, now);
        self.store.write(|tx| {
            if let Some(run) = tx.insert_run(&new, now)? {
                let opener = Opener {
                    anchor: Some("last_start".into()),
                    ..Opener::default()
                };
                tx.append_event(&NewEvent::of(now, opened_event(&run, None, opener)).for_run(&run))?;
            }
            tx.set_last_evaluated(&s.id, now)
        })?;
        let _ = idx;
        Ok(())
    }

    /// Opens windows for posted events (`on_event`, `after_event` + delay),
    /// deduped by event id: the window key is the event id.
    pub(crate) fn open_posted_events(&mut self, now: DateTime<Utc>) -> Result<()> {
        if !self.has_event_triggers {
            return Ok(());
        }
        loop {
            let posted = self
                .store
                .read(|tx| tx.posted_events_after(self.posted_seq, 500))?;
            if posted.is_empty() {
                return Ok(());
            }
            let cfg = self.cfg.clone();
            self.store.write(|tx| {
                for ev in &posted {
                    for s in &cfg.schedules {
                        let delay = match &s.trigger {
                            TriggerConfig::OnEvent { event } if *event == ev.name => TimeDelta::zero(),
                            TriggerConfig::AfterEvent { event, delay } if *event == ev.name => {
                                to_delta(*delay)
                            }
                            _ => continue,
                        };
                        let at = ev.arrived_at + delay;
                        let fire = Fire {
                            at,
                            local: at.with_timezone(&s.timezone).fixed_offset(),
                            window_key: ev.event_id.clone(),
                            note: None,
                        };
                        // A window that closed while we were down is a catch-up.
                        // An event whose window came due while no scheduler was
                        // looking is a catch-up, like any missed window.
                        let plan = catchup::plan(
                            vec![fire],
                            now.max(at),
                            self.alive_since,
                            s.catchup,
                            to_delta(s.catchup_window),
                        );
                        for p in plan {
                            let new = new_run_for(s, &p.fire, p.disposition, now);
                            if let Some(run) = tx.insert_run(&new, now)? {
                                let opener = Opener {
                                    event: Some(ev.name.clone()),
                                    event_id: Some(ev.event_id.clone()),
                                    ..Opener::default()
                                };
                                tx.append_event(
                                    &NewEvent::of(now, opened_event(&run, None, opener)).for_run(&run),
                                )?;
                            }
                        }
                    }
                }
                Ok(())
            })?;
            self.posted_seq = posted.last().map_or(self.posted_seq, |p| p.seq);
        }
    }

    /// Schedules the next window of an `anchor = "last_start"` schedule N after a start.
    pub(crate) fn after_start(&mut self, idx: usize, started: DateTime<Utc>) {
        let s = self.schedule(idx);
        if let TriggerConfig::Every {
            anchor: Anchor::LastStart,
            interval,
        } = s.trigger
        {
            // Whole days are the same local time N days on (DST and all).
            let next = crate::time::fire::after_interval(s.timezone, started, to_delta(interval));
            self.heap.push(Reverse((next, idx)));
        }
    }
}
