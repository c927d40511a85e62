//! Time: the [`clock::Clock`], cron expressions, DST resolution, window keys and
//! business calendars (DESIGN.md "Layer 1 — time").

pub mod calendar;
pub mod clock;
pub mod cron;
pub mod duration;
pub mod fire;

pub use clock::{Clock, SystemClock, VirtualClock};
pub use fire::{Fire, FireNote, FireRule};
