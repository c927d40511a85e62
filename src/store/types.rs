//! The store's own query and trace-row types; the records themselves are
//! [`crate::core::records`], re-exported here so `store::types::Run` reads as before.

pub use crate::core::records::*;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// Running runs counted by schedule (every pool, and the on-time pool
/// alone) and by tenant: what quotas and overlap rules compare against.
/// A key whose runs all ended keeps its entry at zero (a claim of a
/// schedule that ran before copies no key); zero and no entry are equal.
#[derive(Debug, Clone, Default)]
pub struct RunningCounts {
    pub by_schedule: super::FastMap<String, u32>,
    pub on_time_by_schedule: super::FastMap<String, u32>,
    pub by_tenant: super::FastMap<String, u32>,
}

impl PartialEq for RunningCounts {
    fn eq(&self, other: &Self) -> bool {
        fn same(a: &super::FastMap<String, u32>, b: &super::FastMap<String, u32>) -> bool {
            let within = |a: &super::FastMap<String, u32>, b: &super::FastMap<String, u32>| {
                a.iter().all(|(k, &n)| n == 0 || b.get(k) == Some(&n))
            };
            within(a, b) && within(b, a)
        }
        same(&self.by_schedule, &other.by_schedule)
            && same(&self.on_time_by_schedule, &other.on_time_by_schedule)
            && same(&self.by_tenant, &other.by_tenant)
    }
}

impl RunningCounts {
    /// One more (`up`) or one fewer run of `schedule` running in `pool`.
    /// `false` if that would count below zero (the counts were wrong).
    pub fn add(&mut self, tenant: &str, schedule: &str, pool: Pool, up: bool) -> bool {
        fn step(map: &mut super::FastMap<String, u32>, key: &str, up: bool) -> bool {
            if up {
                // The key copied only when it is new.
                match map.get_mut(key) {
                    Some(n) => *n += 1,
                    None => {
                        map.insert(key.to_string(), 1);
                    }
                }
                return true;
            }
            match map.get_mut(key) {
                Some(n) if *n > 0 => *n -= 1,
                _ => return false,
            }
            true
        }
        let mut ok = step(&mut self.by_schedule, schedule, up);
        if pool == Pool::OnTime {
            ok &= step(&mut self.on_time_by_schedule, schedule, up);
        }
        ok & step(&mut self.by_tenant, tenant, up)
    }

    pub fn of_schedule(&self, schedule: &str) -> u32 {
        self.by_schedule.get(schedule).copied().unwrap_or(0)
    }

    pub fn on_time_of_schedule(&self, schedule: &str) -> u32 {
        self.on_time_by_schedule.get(schedule).copied().unwrap_or(0)
    }

    pub fn of_tenant(&self, tenant: &str) -> u32 {
        self.by_tenant.get(tenant).copied().unwrap_or(0)
    }
}

/// An append-only trace row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub kind: String,
    pub tenant: Option<String>,
    pub schedule: Option<String>,
    pub run_id: Option<i64>,
    pub detail: serde_json::Value,
}

impl Event {
    /// The typed event of this row (see [`crate::core::event::Event::from_row`]).
    pub fn event(&self) -> crate::core::event::Event {
        crate::core::event::Event::from_row(&self.kind, &self.detail)
    }
}

/// The kinds of event a `claimed` or `started` row carries folded in: what
/// the window's opening, the decision that led to the claim and the claim
/// recorded just before it (see [`NewEvent::folding`]). A listing of any of
/// them reads those rows too.
pub const FOLDED_KINDS: [&str; 5] = ["window_opened", "gate", "switch_held", "decision", "claimed"];

/// The kinds of row that may hold folded events.
pub(crate) const FOLDING_KINDS: [&str; 2] = ["claimed", "started"];

/// An event to append.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub at: DateTime<Utc>,
    /// Borrowed for every kind but an unknown one: an event costs no
    /// allocation for its kind.
    pub kind: std::borrow::Cow<'static, str>,
    pub tenant: Option<String>,
    pub schedule: Option<String>,
    pub run_id: Option<i64>,
    detail: Detail,
}

/// An event's detail: its JSON text, or the typed event it is written from
/// when it is written (a claim's trace row is written after its agent
/// starts: its text is made then, not on the claim's path).
#[derive(Debug, Clone)]
enum Detail {
    Text(String),
    Typed(Box<crate::core::event::Event>),
}

impl PartialEq for NewEvent {
    fn eq(&self, other: &Self) -> bool {
        (self.at, &self.kind, &self.tenant, &self.schedule, self.run_id)
            == (
                other.at,
                &other.kind,
                &other.tenant,
                &other.schedule,
                other.run_id,
            )
            && self.detail_text() == other.detail_text()
    }
}

impl NewEvent {
    /// A typed trace event, as the store will write it (its text made when
    /// it is written).
    pub fn of(at: DateTime<Utc>, event: crate::core::event::Event) -> Self {
        Self {
            at,
            kind: event.kind_text(),
            tenant: None,
            schedule: None,
            run_id: None,
            detail: Detail::Typed(Box::new(event)),
        }
    }

    /// The typed event it was made from ([`NewEvent::of`]), to amend before
    /// it is written.
    pub(crate) fn typed_mut(&mut self) -> Option<&mut crate::core::event::Event> {
        match &mut self.detail {
            Detail::Typed(e) => Some(e.as_mut()),
            Detail::Text(_) => None,
        }
    }

    /// The same from a borrowed event: its text is all that is kept, so a
    /// plan's events need no copy to be written.
    pub fn of_ref(at: DateTime<Utc>, event: &crate::core::event::Event) -> Self {
        let (kind, detail) = event.to_row_text();
        Self {
            at,
            kind: kind.into(),
            tenant: None,
            schedule: None,
            run_id: None,
            detail: Detail::Text(detail),
        }
    }

    /// An event whose detail is JSON text already.
    pub(crate) fn from_text(at: DateTime<Utc>, kind: &str, detail: String) -> Self {
        Self {
            at,
            kind: kind.to_string().into(),
            tenant: None,
            schedule: None,
            run_id: None,
            detail: Detail::Text(detail),
        }
    }

    /// An event from its stored parts (old rows, fixtures); writers use [`NewEvent::of`].
    pub fn new(at: DateTime<Utc>, kind: &str, detail: serde_json::Value) -> Self {
        Self::from_text(at, kind, detail.to_string())
    }

    /// The detail's JSON text, as stored.
    pub fn detail_text(&self) -> std::borrow::Cow<'_, str> {
        match &self.detail {
            Detail::Text(t) => std::borrow::Cow::Borrowed(t),
            Detail::Typed(e) => std::borrow::Cow::Owned(e.to_row_text().1),
        }
    }

    /// The detail as JSON.
    pub fn detail(&self) -> serde_json::Value {
        serde_json::from_str(&self.detail_text()).unwrap_or(serde_json::Value::Null)
    }

    /// This event's row with `before` folded in: one row for a transition
    /// instead of one per fact recorded on the way to it. Each folded event
    /// keeps its kind, detail and, when it differs from this event's, its
    /// instant; the store reads the row back as those events then this one,
    /// all with the row's id (see `Tx::events`). `before` must be events of
    /// this event's run whose kinds are in [`FOLDED_KINDS`].
    pub(crate) fn folding(&self, before: &[NewEvent]) -> Self {
        let own = self.detail_text();
        let Some(open) = own.strip_suffix('}').filter(|_| !before.is_empty()) else {
            return self.clone();
        };
        let details: Vec<std::borrow::Cow<'_, str>> = before.iter().map(NewEvent::detail_text).collect();
        let mut text =
            String::with_capacity(open.len() + 16 + details.iter().map(|d| d.len() + 48).sum::<usize>());
        text.push_str(open);
        text.push_str(if open.len() > 1 {
            ",\"folded\":["
        } else {
            "\"folded\":["
        });
        for (i, (e, detail)) in before.iter().zip(&details).enumerate() {
            if i > 0 {
                text.push(',');
            }
            // Kinds are plain words (no quoting needed).
            text.push_str("{\"kind\":\"");
            text.push_str(&e.kind);
            text.push('"');
            let at = e.at.timestamp_millis();
            if at != self.at.timestamp_millis() {
                text.push_str(",\"at\":");
                crate::core::row_text::JsonNum::push_to(at, &mut text);
            }
            text.push_str(",\"detail\":");
            text.push_str(detail);
            text.push('}');
        }
        text.push_str("]}");
        Self {
            at: self.at,
            kind: self.kind.clone(),
            tenant: self.tenant.clone(),
            schedule: self.schedule.clone(),
            run_id: self.run_id,
            detail: Detail::Text(text),
        }
    }

    /// Attaches the run (and its tenant and schedule).
    pub fn for_run(mut self, run: &Run) -> Self {
        self.tenant = Some(run.tenant.clone());
        self.schedule = Some(run.schedule.clone());
        self.run_id = Some(run.id);
        self
    }

    /// Attaches a run id only (tenant and schedule filled in by the caller).
    pub fn with_run_id(mut self, run_id: i64) -> Self {
        self.run_id = Some(run_id);
        self
    }

    pub fn for_schedule(mut self, tenant: &str, schedule: &str) -> Self {
        self.tenant = Some(tenant.to_string());
        self.schedule = Some(schedule.to_string());
        self
    }
}

/// A waiting run held by a quota, as [`Tx::quota_held`](super::Tx::quota_held)
/// reads it: what choosing the runs a freed slot admits needs.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldRun {
    pub id: i64,
    pub schedule: String,
    pub pool: Pool,
    pub due_at: DateTime<Utc>,
}

/// Filter for run listings; `None` = any.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub schedule: Option<String>,
    pub tenant: Option<String>,
    pub states: Vec<RunState>,
    /// Newest first when true.
    pub newest_first: bool,
    pub limit: Option<usize>,
}

/// Filter for event listings.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub run_id: Option<i64>,
    pub schedule: Option<String>,
    pub kinds: Vec<String>,
    /// Events with id greater than this (for tailing).
    pub after_id: Option<i64>,
    pub limit: Option<usize>,
    pub newest_first: bool,
}

#[cfg(test)]
mod running_counts_tests {
    use super::*;

    /// A schedule whose runs all ended keeps a zero entry, which equals no
    /// entry; counting below zero still says the counts were wrong.
    #[test]
    fn a_count_back_at_zero_is_no_count() {
        let mut c = RunningCounts::default();
        assert!(c.add("t", "s", Pool::OnTime, true));
        assert!(c.add("t", "s", Pool::OnTime, false));
        assert_eq!(c.by_schedule.get("s"), Some(&0));
        assert_eq!(c, RunningCounts::default());
        assert_eq!(RunningCounts::default(), c);
        assert_eq!((c.of_schedule("s"), c.of_tenant("t")), (0, 0));
        assert!(!c.add("t", "s", Pool::OnTime, false));
        assert!(c.add("t", "s", Pool::Backfill, true));
        assert_ne!(c, RunningCounts::default());
        assert_eq!((c.of_schedule("s"), c.on_time_of_schedule("s")), (1, 0));
    }
}
