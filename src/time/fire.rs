//! Layer 1 of the trigger rules: *when to look*.
//!
//! A [`FireRule`] turns a schedule's time trigger (cron or `every`), its IANA zone,
//! its DST policy and its business calendar into an ordered stream of [`Fire`]s,
//! each the opening instant of one window with its window key.
//!
//! The DST policy is ours, not a library's: the cron expression is matched on naive
//! wall-clock time, and [`resolve_local`] maps every wall-clock time to zero, one
//! or two instants. Pinned schedules (fixed hours) shift or skip gap times and pick
//! the first, last or both fold occurrences; repeating schedules (`*` or stepped
//! hour) follow real time: gap times do not exist and both fold occurrences fire.

use crate::time::calendar::Calendar;
use crate::time::cron::{Cadence, CronSpec};
use crate::time::policy::{Anchor, DstFold, DstGap, NonBusinessDay};
use chrono::{
    DateTime, Duration as TimeDelta, FixedOffset, LocalResult, NaiveDateTime, Offset, TimeZone, Utc,
};
use chrono_tz::Tz;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::sync::Arc;

/// Why a fire is not simply "the expression's time in the zone".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FireNote {
    /// The nominal time fell in a spring-forward gap; fired at the gap's end.
    DstShifted,
    /// The nominal time occurred twice (fall-back); the other occurrence was not fired.
    DstFoldSkipped,
    /// Not a business day: the window is opened as a `skipped` run (reason calendar).
    CalendarSkipped,
    /// Not a business day: moved to the next business day, same local time.
    CalendarMoved,
}

impl FireNote {
    pub fn as_str(self) -> &'static str {
        match self {
            FireNote::DstShifted => "dst_shifted",
            FireNote::DstFoldSkipped => "dst_fold_skipped",
            FireNote::CalendarSkipped => "calendar_skipped",
            FireNote::CalendarMoved => "calendar_moved",
        }
    }
}

impl fmt::Display for FireNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One opening of a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fire {
    /// The instant the window opens.
    pub at: DateTime<Utc>,
    /// `at` in the schedule's zone, with its offset.
    pub local: DateTime<FixedOffset>,
    /// The business occurrence this fire belongs to.
    pub window_key: String,
    pub note: Option<FireNote>,
}

impl PartialOrd for Fire {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Fire {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, &self.window_key).cmp(&(other.at, &other.window_key))
    }
}

/// The time-based part of a schedule.
#[derive(Debug, Clone)]
pub enum FireSource {
    Cron(CronSpec),
    Every { interval: TimeDelta, anchor: Anchor },
}

/// Everything needed to enumerate a schedule's fires.
#[derive(Debug, Clone)]
pub struct FireRule {
    pub source: FireSource,
    pub tz: Tz,
    pub dst_gap: DstGap,
    pub dst_fold: DstFold,
    pub calendar: Option<Arc<Calendar>>,
    pub non_business_day: NonBusinessDay,
}

impl FireRule {
    /// A rule for a bare cron expression in a zone, default DST policy, no calendar.
    pub fn cron(spec: CronSpec, tz: Tz) -> Self {
        Self {
            source: FireSource::Cron(spec),
            tz,
            dst_gap: DstGap::default(),
            dst_fold: DstFold::default(),
            calendar: None,
            non_business_day: NonBusinessDay::default(),
        }
    }

    /// Fires strictly after `after`, in increasing order of instant. For
    /// `anchor = "last_start"`, pass the previous start: the first fire is one
    /// interval after it.
    pub fn fires_after(&self, after: DateTime<Utc>) -> Fires<'_> {
        Fires::new(self, after)
    }

    pub fn next_after(&self, after: DateTime<Utc>) -> Option<Fire> {
        self.fires_after(after).next()
    }

    /// Whether two of its fires can fall on one instant: only a calendar
    /// that moves a non-business day's fire onto the next business day's
    /// (each keeps its own window key). Otherwise fires strictly increase.
    pub fn may_share_instants(&self) -> bool {
        self.calendar.is_some() && self.non_business_day == NonBusinessDay::NextBusinessDay
    }

    /// The shape of this rule's window keys.
    pub fn key_style(&self) -> Cadence {
        match &self.source {
            FireSource::Cron(c) => c.cadence(),
            FireSource::Every { interval, .. } => {
                let secs = interval.num_seconds();
                if secs > 0 && secs % (7 * 86_400) == 0 {
                    Cadence::Weekly
                } else if secs > 0 && secs % 86_400 == 0 {
                    Cadence::Daily
                } else {
                    Cadence::SubDaily
                }
            }
        }
    }

    /// Pinned schedules shift/skip gap times and pick fold occurrences; repeating
    /// ones follow real time. Whole-day `every` intervals are calendar
    /// arithmetic (the same local time every N days), so they are pinned.
    fn pinned(&self) -> bool {
        match &self.source {
            FireSource::Cron(c) => !c.repeats_within_day(),
            FireSource::Every { interval, .. } => whole_days(*interval).is_some(),
        }
    }
}

/// What a wall-clock time is in a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalTime {
    Single(DateTime<Utc>),
    /// Occurs twice (fall-back): earlier and later instant.
    Fold(DateTime<Utc>, DateTime<Utc>),
    /// Does not exist (spring-forward); `gap_end` is the first instant after the gap.
    Gap {
        gap_end: DateTime<Utc>,
    },
}

impl LocalTime {
    /// The earliest instant this wall-clock time maps to (the gap end for a gap).
    pub fn earliest(&self) -> DateTime<Utc> {
        match *self {
            LocalTime::Single(t) | LocalTime::Fold(t, _) => t,
            LocalTime::Gap { gap_end } => gap_end,
        }
    }
}

/// Maps a wall-clock time in `tz` to instants, without any library DST defaults.
pub fn resolve_local(tz: Tz, naive: NaiveDateTime) -> LocalTime {
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(t) => LocalTime::Single(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(a, b) => {
            let (a, b) = (a.with_timezone(&Utc), b.with_timezone(&Utc));
            LocalTime::Fold(a.min(b), a.max(b))
        }
        LocalResult::None => LocalTime::Gap {
            gap_end: first_instant_at_or_after(tz, naive),
        },
    }
}

/// The first instant whose local wall-clock time is at or after `naive`.
/// Offsets lie within UTC-12..UTC+14, so the answer is inside ±15h of `naive`
/// read as UTC; local time is monotone there except at a fold, and no zone has a
/// gap and a fold within a day.
fn first_instant_at_or_after(tz: Tz, naive: NaiveDateTime) -> DateTime<Utc> {
    let base = naive.and_utc();
    let mut lo = (base - TimeDelta::hours(15)).timestamp();
    let mut hi = (base + TimeDelta::hours(15)).timestamp();
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let t = DateTime::<Utc>::from_timestamp(mid, 0).unwrap_or(base);
        if tz.from_utc_datetime(&t.naive_utc()).naive_local() >= naive {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    DateTime::<Utc>::from_timestamp(lo, 0).unwrap_or(base)
}

fn offset_secs(tz: Tz, t: DateTime<Utc>) -> i64 {
    i64::from(
        tz.offset_from_utc_datetime(&t.naive_utc())
            .fix()
            .local_minus_utc(),
    )
}

fn to_local(tz: Tz, t: DateTime<Utc>) -> DateTime<FixedOffset> {
    t.with_timezone(&tz).fixed_offset()
}

/// Window key of a fire opening at local time `local` for a rule keyed by `cadence`.
pub fn window_key(cadence: Cadence, local: &DateTime<FixedOffset>) -> String {
    use chrono::Datelike;
    match cadence {
        Cadence::Daily => format!("{:04}-{:02}-{:02}", local.year(), local.month(), local.day()),
        Cadence::Weekly => {
            let w = local.iso_week();
            format!("{:04}-W{:02}", w.year(), w.week())
        }
        Cadence::SubDaily => date_time_key(local),
    }
}

/// `2026-06-06T09:00+08:00` (with `:SS` when the seconds are not zero). Written
/// out digit by digit: chrono's format strings are parsed on every call, which
/// was most of the cost of enumerating a long outage's windows.
fn date_time_key(local: &DateTime<FixedOffset>) -> String {
    use chrono::{Datelike, Timelike};
    fn two(out: &mut String, n: u32) {
        out.push(char::from(b'0' + (n / 10 % 10) as u8));
        out.push(char::from(b'0' + (n % 10) as u8));
    }
    let year = local.year();
    if !(0..=9999).contains(&year) {
        return local.format("%Y-%m-%dT%H:%M:%S%:z").to_string();
    }
    let off = local.offset().local_minus_utc();
    let mut out = String::with_capacity(25);
    let y = year.unsigned_abs();
    two(&mut out, y / 100);
    two(&mut out, y % 100);
    out.push('-');
    two(&mut out, local.month());
    out.push('-');
    two(&mut out, local.day());
    out.push('T');
    two(&mut out, local.hour());
    out.push(':');
    two(&mut out, local.minute());
    if local.second() != 0 {
        out.push(':');
        two(&mut out, local.second());
    }
    out.push(if off < 0 { '-' } else { '+' });
    let off = off.unsigned_abs();
    two(&mut out, off / 3600);
    out.push(':');
    two(&mut out, off % 3600 / 60);
    out
}

/// Iterator over a rule's fires. Wall-clock candidates are produced in wall-clock
/// order; a small heap re-orders them by instant (a fold's second occurrence and
/// calendar moves land later than the wall-clock walk), released once the walk's
/// lower bound has passed them.
pub struct Fires<'a> {
    rule: &'a FireRule,
    after: DateTime<Utc>,
    cadence: Cadence,
    pinned: bool,
    /// Cron: the wall-clock cursor. Every: the instant cursor.
    naive_cursor: NaiveDateTime,
    instant_cursor: DateTime<Utc>,
    inclusive: bool,
    exhausted: bool,
    heap: BinaryHeap<Reverse<Fire>>,
    last: Option<Fire>,
}

impl<'a> Fires<'a> {
    fn new(rule: &'a FireRule, after: DateTime<Utc>) -> Self {
        let tz = rule.tz;
        // Any wall-clock time n that can map to an instant after `after` satisfies
        // n > after + offset(n) >= after + min offset nearby (3h covers every DST shift).
        let min_off = [-3, 0, 3]
            .iter()
            .map(|h| offset_secs(tz, after + TimeDelta::hours(*h)))
            .min()
            .unwrap_or(0);
        let mut naive_cursor = after.naive_utc() + TimeDelta::seconds(min_off);
        if let (Some(cal), NonBusinessDay::NextBusinessDay) = (&rule.calendar, rule.non_business_day) {
            // A fire moved off a non-business day may land after `after` although its
            // nominal time is before: start the walk after the last business day.
            let mut d = naive_cursor.date();
            for _ in 0..366 {
                match d.pred_opt() {
                    Some(p) if !cal.is_business_day(p) => d = p,
                    _ => break,
                }
            }
            naive_cursor = naive_cursor.min(d.and_hms_opt(0, 0, 0).unwrap_or(naive_cursor));
        }
        Self {
            rule,
            after,
            cadence: rule.key_style(),
            pinned: rule.pinned(),
            naive_cursor,
            instant_cursor: after,
            inclusive: true,
            exhausted: false,
            heap: BinaryHeap::new(),
            last: None,
        }
    }

    /// Advances the walk by one wall-clock match; returns the lower bound of every
    /// fire not yet produced, or `None` when the source is exhausted.
    fn step(&mut self) -> Option<DateTime<Utc>> {
        let rule = self.rule;
        let tz = rule.tz;
        match &rule.source {
            FireSource::Cron(spec) => {
                let n = spec.next_local(self.naive_cursor, self.inclusive)?;
                self.inclusive = false;
                self.naive_cursor = n;
                Some(self.wall_clock(n))
            }
            FireSource::Every {
                interval,
                anchor: Anchor::Fixed,
            } if whole_days(*interval).is_some() => {
                let days = whole_days(*interval).unwrap_or(1);
                let n = next_whole_day(self.naive_cursor, days, self.inclusive)?;
                self.inclusive = false;
                self.naive_cursor = n;
                Some(self.wall_clock(n))
            }
            FireSource::Every { interval, anchor } => {
                let step = interval.num_seconds().max(1);
                let next = match anchor {
                    Anchor::LastStart => after_interval(tz, self.instant_cursor, *interval),
                    Anchor::Fixed => next_aligned(tz, self.instant_cursor, step),
                };
                self.instant_cursor = next;
                let local = to_local(tz, next);
                self.candidate(local.naive_local(), next, None, false);
                Some(next)
            }
        }
    }

    /// Queues the fires of the wall-clock time `n` (a cron match or a
    /// whole-day `every` date) per the DST policy; returns the lower bound of
    /// fires not yet produced.
    fn wall_clock(&mut self, n: NaiveDateTime) -> DateTime<Utc> {
        let rule = self.rule;
        let lt = resolve_local(rule.tz, n);
        let bound = lt.earliest();
        match lt {
            LocalTime::Single(t) => self.candidate(n, t, None, false),
            LocalTime::Fold(a, b) if !self.pinned => {
                self.candidate(n, a, None, false);
                self.candidate(n, b, None, false);
            }
            LocalTime::Fold(a, b) => match rule.dst_fold {
                DstFold::First => self.candidate(n, a, Some(FireNote::DstFoldSkipped), false),
                DstFold::Last => self.candidate(n, b, Some(FireNote::DstFoldSkipped), false),
                DstFold::Both => {
                    self.candidate(n, a, None, false);
                    self.candidate(n, b, None, true);
                }
            },
            LocalTime::Gap { gap_end } => {
                if self.pinned && rule.dst_gap == DstGap::Shift {
                    self.candidate(n, gap_end, Some(FireNote::DstShifted), false);
                }
            }
        }
        bound
    }

    /// Applies the calendar to one candidate and queues it.
    fn candidate(
        &mut self,
        nominal: NaiveDateTime,
        at: DateTime<Utc>,
        note: Option<FireNote>,
        fold_second: bool,
    ) {
        let tz = self.rule.tz;
        let local = to_local(tz, at);
        let key = if fold_second && self.cadence != Cadence::SubDaily {
            // Both fold occurrences of a daily window fire: the second gets its own key.
            date_time_key(&local)
        } else {
            window_key(self.cadence, &local)
        };
        let mut fire = Fire {
            at,
            local,
            window_key: key,
            note,
        };
        if let Some(cal) = &self.rule.calendar
            && !cal.is_business_day(nominal.date())
        {
            match self.rule.non_business_day {
                NonBusinessDay::Skip => fire.note = Some(FireNote::CalendarSkipped),
                NonBusinessDay::NextBusinessDay => {
                    let Some(day) = cal.next_business_day(nominal.date()) else {
                        return;
                    };
                    let moved = day.and_time(nominal.time());
                    let moved_at = match resolve_local(tz, moved) {
                        LocalTime::Single(t) | LocalTime::Fold(t, _) => t,
                        LocalTime::Gap { gap_end } => gap_end,
                    };
                    fire.at = moved_at;
                    fire.local = to_local(tz, moved_at);
                    fire.note = Some(FireNote::CalendarMoved);
                }
            }
        }
        self.heap.push(Reverse(fire));
    }
}

/// The number of days of a whole-day interval (`1d`, `2d`, `1w`), if it is one.
pub fn whole_days(interval: TimeDelta) -> Option<i64> {
    let secs = interval.num_seconds();
    (secs > 0 && secs % 86_400 == 0 && interval.subsec_nanos() == 0).then_some(secs / 86_400)
}

/// The next local midnight strictly after `cursor` (or at it, when
/// `inclusive`) on a date whose day number since 1970-01-01 is a multiple of
/// `days`: `every = "2d"` fires on every second local date, at 00:00 local,
/// whatever the UTC offset does in between.
fn next_whole_day(cursor: NaiveDateTime, days: i64, inclusive: bool) -> Option<NaiveDateTime> {
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    let midnight = cursor.date().and_hms_opt(0, 0, 0)?;
    let mut date = cursor.date();
    if midnight < cursor || (midnight == cursor && !inclusive) {
        date = date.succ_opt()?;
    }
    let n = (date - epoch).num_days();
    let ahead = (days - n.rem_euclid(days)) % days;
    let date = date.checked_add_days(chrono::Days::new(u64::try_from(ahead).ok()?))?;
    date.and_hms_opt(0, 0, 0)
}

/// `at` plus `interval`: for whole days the same local wall-clock time N days
/// later in `tz` (the first instant after a gap, the first of a fold), for
/// shorter intervals real time. Used for `anchor = "last_start"`.
pub fn after_interval(tz: Tz, at: DateTime<Utc>, interval: TimeDelta) -> DateTime<Utc> {
    let Some(days) = whole_days(interval) else {
        return at + interval;
    };
    let local = at.with_timezone(&tz).naive_local();
    let Some(target) = local.checked_add_days(chrono::Days::new(u64::try_from(days).unwrap_or(1))) else {
        return at + interval;
    };
    match resolve_local(tz, target) {
        LocalTime::Single(t) | LocalTime::Fold(t, _) => t,
        LocalTime::Gap { gap_end } => gap_end,
    }
}

/// The next instant after `after` whose local wall-clock time is a multiple of
/// `step` seconds since midnight 1970-01-01 local (10:00, 10:05, … for 5m).
fn next_aligned(tz: Tz, after: DateTime<Utc>, step: i64) -> DateTime<Utc> {
    let mut off = offset_secs(tz, after);
    let mut candidate = after;
    for _ in 0..3 {
        let local = after.timestamp() + off;
        let aligned = (local.div_euclid(step) + 1) * step;
        candidate = DateTime::<Utc>::from_timestamp(aligned - off, 0).unwrap_or(after);
        let real_off = offset_secs(tz, candidate);
        if real_off == off {
            return candidate;
        }
        off = real_off;
    }
    candidate.max(after + TimeDelta::seconds(1))
}

impl Iterator for Fires<'_> {
    type Item = Fire;

    fn next(&mut self) -> Option<Fire> {
        loop {
            let bound = if self.exhausted {
                None
            } else {
                match self.step() {
                    Some(b) => Some(b),
                    None => {
                        self.exhausted = true;
                        None
                    }
                }
            };
            while let Some(Reverse(top)) = self.heap.peek() {
                let releasable = match bound {
                    Some(b) => top.at < b,
                    None => true,
                };
                if !releasable {
                    break;
                }
                let Some(Reverse(fire)) = self.heap.pop() else {
                    break;
                };
                if fire.at <= self.after {
                    continue;
                }
                // Several nominal times can land on one instant and key (gap shift).
                if self
                    .last
                    .as_ref()
                    .is_some_and(|l| l.at == fire.at && l.window_key == fire.window_key)
                {
                    continue;
                }
                self.last = Some(fire.clone());
                return Some(fire);
            }
            if self.exhausted && self.heap.is_empty() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written keys equal chrono's formats for every offset sign,
    /// seconds or not, and ISO weeks across a year boundary.
    #[test]
    fn window_keys_match_the_chrono_formats() {
        let offsets = [0, 8 * 3600, -5 * 3600, 5 * 3600 + 45 * 60, -(9 * 3600 + 30 * 60)];
        let instants = [
            "2026-06-06T01:00:00Z",
            "2026-12-31T23:59:07Z",
            "2027-01-01T00:00:00Z",
            "2021-01-03T12:00:00Z",
        ];
        for off in offsets {
            let tz = FixedOffset::east_opt(off).unwrap();
            for i in instants {
                let local = DateTime::parse_from_rfc3339(i).unwrap().with_timezone(&tz);
                let sub = if local.format("%S").to_string() == "00" {
                    local.format("%Y-%m-%dT%H:%M%:z").to_string()
                } else {
                    local.format("%Y-%m-%dT%H:%M:%S%:z").to_string()
                };
                assert_eq!(window_key(Cadence::SubDaily, &local), sub);
                assert_eq!(
                    window_key(Cadence::Daily, &local),
                    local.format("%Y-%m-%d").to_string()
                );
                assert_eq!(
                    window_key(Cadence::Weekly, &local),
                    local.format("%G-W%V").to_string()
                );
            }
        }
    }
}
