//! Time: the [`clock::Clock`], cron expressions, DST resolution, window keys and
//! business calendars (DESIGN.md "Layer 1 — time").

pub mod calendar;
pub mod clock;
pub mod cron;
pub mod duration;
pub mod fire;
pub mod policy;

pub use clock::{Clock, SystemClock, VirtualClock};

use chrono::{DateTime, SecondsFormat, Utc};

/// An instant as every event, JSON output and CLI column writes it: RFC 3339
/// UTC with milliseconds (`2026-06-06T01:00:00.000Z`).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The same to whole seconds, for what people and scripts read: gate reasons,
/// the window variables of gate commands, manual window keys.
pub fn rfc3339_secs(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}
pub use fire::{Fire, FireNote, FireRule};
pub use policy::{Anchor, DstFold, DstGap, NonBusinessDay};
