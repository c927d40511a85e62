//! How a schedule's fires bend around the clock and the calendar: the DST gap and
//! fold policies, where an `every` interval is anchored, and what a non-business
//! day does. Time owns these because [`super::fire`] decides with them; config
//! only reads them from TOML (and re-exports them).

/// Where an `every` interval counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Anchor {
    /// Aligned to the clock: 10:00, 10:05, …
    #[default]
    Fixed,
    /// N after the previous start.
    LastStart,
}

/// What a fire on a non-business day of the schedule's calendar does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NonBusinessDay {
    /// The window opens as a `skipped` run (reason calendar).
    #[default]
    Skip,
    /// The fire moves to the next business day, same local time.
    NextBusinessDay,
}

/// A pinned wall-clock time that does not exist (spring-forward gap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DstGap {
    /// Fire at the gap's end.
    #[default]
    Shift,
    /// No fire that day.
    Skip,
}

/// A pinned wall-clock time that occurs twice (fall-back fold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DstFold {
    /// Fire at the earlier occurrence.
    #[default]
    First,
    /// Fire at the later occurrence.
    Last,
    /// Fire at both; the second gets its own window key.
    Both,
}
