//! Cron expressions, evaluated on local wall-clock time.
//!
//! croner matches the expression against a `NaiveDateTime`, so the expression never
//! sees a time zone; [`crate::time::resolve`] then maps each wall-clock time to
//! instants under the schedule's DST policy. That keeps DST rules ours, not the
//! library's.

use chrono::NaiveDateTime;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// How long a schedule's windows are, which decides the shape of its window keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cadence {
    /// Fires more than once a day: keys are local date-times with offset.
    SubDaily,
    /// Fires at most once a day: keys are local dates.
    Daily,
    /// Fires on one weekday each week: keys are ISO weeks (`2026-W23`).
    Weekly,
}

/// A parsed, validated cron expression.
#[derive(Clone)]
pub struct CronSpec {
    expr: String,
    cron: Arc<Shared>,
    repeats_within_day: bool,
    cadence: Cadence,
}

impl fmt::Debug for CronSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSpec")
            .field("expr", &self.expr)
            .field("repeats_within_day", &self.repeats_within_day)
            .field("cadence", &self.cadence)
            .finish()
    }
}

impl PartialEq for CronSpec {
    fn eq(&self, other: &Self) -> bool {
        self.expr == other.expr
    }
}

impl CronSpec {
    /// Parses 5-field (Unix), 6-field (leading seconds) and 7-field (seconds and
    /// year) expressions. Weekdays are Unix-numbered: 0 and 7 are Sunday, so `1-5`
    /// is Monday to Friday. Day-of-month and day-of-week are ORed as in Vixie cron
    /// when both are restricted (prefix the weekday field with `+` to AND them);
    /// as in Vixie, a field that starts with `*` (`*/2`) does not count as
    /// restricted for this, so `0 9 */2 * MON` is odd-numbered Mondays.
    pub fn parse(expr: &str) -> Result<Self, String> {
        let trimmed = expr.trim();
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        let nickname = trimmed.starts_with('@');
        if !nickname && !(5..=7).contains(&fields.len()) {
            return Err(format!(
                "cron expression `{trimmed}` has {} fields; expected 5 (min hour dom mon dow), 6 (with seconds) or 7 (with seconds and year)",
                fields.len()
            ));
        }
        let (dom_field, dow_field) = match fields.len() {
            5 => (fields[2], fields[4]),
            6 | 7 => (fields[3], fields[5]),
            _ => ("*", "*"),
        };
        let starred = |f: &str| f.starts_with('*') || f.starts_with('?');
        let parser = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Optional)
            .dom_and_dow(starred(dom_field) || starred(dow_field))
            .alternative_weekdays(false)
            .sloppy_ranges(true)
            .build();
        // Nicknames are expanded here (croner lacks `@midnight`), so every
        // nickname means exactly what the table below says.
        let expanded = if nickname {
            let (sec, min, hour, dom, dow) = nickname_fields(trimmed)?;
            let month =
                if trimmed.eq_ignore_ascii_case("@yearly") || trimmed.eq_ignore_ascii_case("@annually") {
                    "1"
                } else {
                    "*"
                };
            format!("{sec} {min} {hour} {dom} {month} {dow}")
        } else {
            trimmed.to_string()
        };
        let cron = interned(&expanded, || {
            let cron = parser
                .parse(&expanded)
                .map_err(|e| format!("invalid cron expression `{trimmed}`: {}", describe_error(&e)))?;
            // Reject expressions that can never fire (e.g. `0 0 30 2 *`) now, not at 3am.
            let probe = chrono::NaiveDate::from_ymd_opt(2000, 1, 1)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .ok_or("internal: probe date")?;
            if cron.find_next_occurrence(&probe, true).is_err() {
                // A year field may legitimately lie in the past; only refuse if it also
                // never fires from today's calendar perspective (year 2000 covers both).
                return Err(format!(
                    "cron expression `{trimmed}` never fires (no date matches it)"
                ));
            }
            Ok(cron)
        })?;
        let (second, minute, hour, dom, dow) = if nickname {
            nickname_fields(trimmed)?
        } else if fields.len() == 5 {
            ("0", fields[0], fields[1], fields[2], fields[4])
        } else {
            (fields[0], fields[1], fields[2], fields[3], fields[5])
        };
        let repeats_within_day = hour == "*" || hour.contains('/');
        let single = |f: &str| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit());
        let cadence = if !(single(second) && single(minute) && single(hour)) {
            Cadence::SubDaily
        } else if matches!(dom, "*" | "?") && is_single_weekday(dow) {
            Cadence::Weekly
        } else {
            Cadence::Daily
        };
        Ok(Self {
            expr: trimmed.to_string(),
            cron,
            repeats_within_day,
            cadence,
        })
    }

    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// True when the hour field is `*` or stepped: such schedules follow real-time
    /// cadence across DST changes; others are pinned to fixed hours.
    pub fn repeats_within_day(&self) -> bool {
        self.repeats_within_day
    }

    pub fn cadence(&self) -> Cadence {
        self.cadence
    }

    /// The first wall-clock time matching the expression at or after `from`
    /// (`inclusive`) or strictly after it.
    pub fn next_local(&self, from: NaiveDateTime, inclusive: bool) -> Option<NaiveDateTime> {
        let date = from.date();
        if let Some(times) = self.cron.day(date) {
            let t = from.time();
            let i = times.partition_point(|m| if inclusive { *m < t } else { *m <= t });
            if let Some(m) = times.get(i) {
                return Some(date.and_time(*m));
            }
            // Nothing later that day: croner finds the next matching day.
            let next_day = date.succ_opt()?.and_hms_opt(0, 0, 0)?;
            return self.cron.cron.find_next_occurrence(&next_day, true).ok();
        }
        self.cron.cron.find_next_occurrence(&from, inclusive).ok()
    }
}

/// Matches per day kept per expression: at most this many (minute steps fill
/// 1,440; second-level expressions that match more go to croner each time).
const DAY_MATCHES: usize = 1440;
/// Days tracked per expression (the ones being walked now).
const DAYS_KEPT: usize = 8;
/// Questions about one day before its matches are listed: a day asked about
/// once or twice (a single schedule's walk, a cold `next`) costs croner one
/// search per question, cheaper than listing the day.
const LIST_AFTER: u32 = 3;

/// The matching times of a day, once it has been asked about often enough.
type DayMatches = Option<Arc<[chrono::NaiveTime]>>;

enum Day {
    Asked(u32),
    Listed(DayMatches),
}

/// A parsed expression shared by every schedule that uses it, with the
/// matching wall-clock times of the days walked most. croner searches field
/// by field for every call; enumerating a long outage of 1,000 schedules on
/// one expression asked it the same 288 questions per day a thousand times.
pub(crate) struct Shared {
    cron: Cron,
    days: Mutex<Vec<(chrono::NaiveDate, Day)>>,
}

impl Shared {
    fn new(cron: Cron) -> Self {
        Self {
            cron,
            days: Mutex::new(Vec::new()),
        }
    }

    /// The matching times of `date` in order, if the day is listed (`None`:
    /// ask croner: not asked about often enough yet, or more than [`DAY_MATCHES`]).
    fn day(&self, date: chrono::NaiveDate) -> DayMatches {
        let mut days = self.days.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = days.iter().position(|(d, _)| *d == date) else {
            if days.len() >= DAYS_KEPT {
                days.remove(0);
            }
            days.push((date, Day::Asked(1)));
            return None;
        };
        match &mut days[i].1 {
            Day::Listed(times) => times.clone(),
            Day::Asked(n) if *n + 1 < LIST_AFTER => {
                *n += 1;
                None
            }
            Day::Asked(_) => {
                let times = self.matches_on(date);
                days[i].1 = Day::Listed(times.clone());
                times
            }
        }
    }

    fn matches_on(&self, date: chrono::NaiveDate) -> DayMatches {
        let mut out = Vec::new();
        let mut at = date.and_hms_opt(0, 0, 0)?;
        let mut inclusive = true;
        while let Ok(next) = self.cron.find_next_occurrence(&at, inclusive) {
            if next.date() != date {
                break;
            }
            if out.len() == DAY_MATCHES {
                return None;
            }
            out.push(next.time());
            at = next;
            inclusive = false;
        }
        Some(out.into())
    }
}

fn interned(expanded: &str, parse: impl FnOnce() -> Result<Cron, String>) -> Result<Arc<Shared>, String> {
    static SHARED: LazyLock<Mutex<HashMap<String, Weak<Shared>>>> = LazyLock::new(Default::default);
    if let Some(cron) = SHARED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(expanded)
        .and_then(Weak::upgrade)
    {
        return Ok(cron);
    }
    let cron = Arc::new(Shared::new(parse()?));
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if shared.len() >= 1024 && shared.len().is_power_of_two() {
        shared.retain(|_, c| c.strong_count() > 0);
    }
    shared.insert(expanded.to_string(), Arc::downgrade(&cron));
    Ok(cron)
}

fn is_single_weekday(dow: &str) -> bool {
    let d = dow.trim_start_matches('+').to_ascii_uppercase();
    let names = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
    (d.len() == 1 && d.chars().all(|c| c.is_ascii_digit())) || names.contains(&d.as_str())
}

fn nickname_fields(
    n: &str,
) -> Result<
    (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    ),
    String,
> {
    Ok(match n.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => ("0", "0", "0", "1", "*"),
        "@monthly" => ("0", "0", "0", "1", "*"),
        "@weekly" => ("0", "0", "0", "*", "0"),
        "@daily" | "@midnight" => ("0", "0", "0", "*", "*"),
        "@hourly" => ("0", "0", "*", "*", "*"),
        other => {
            return Err(format!(
                "unknown cron nickname `{other}` (use @yearly, @monthly, @weekly, @daily or @hourly)"
            ));
        }
    })
}

fn describe_error(e: &croner::errors::CronError) -> String {
    use croner::errors::CronError as E;
    match e {
        E::InvalidPattern(m) | E::IllegalCharacters(m) | E::ComponentError(m) => m.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate, Weekday};

    fn at(y: i32, m: u32, d: u32, h: u32, mi: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, m, d)
            .unwrap()
            .and_hms_opt(h, mi, 0)
            .unwrap()
    }

    proptest::proptest! {
        /// The per-day match cache answers exactly what croner answers, across
        /// month ends, leap days, empty days and second-level expressions.
        #[test]
        fn next_local_equals_croner(
            expr in proptest::sample::select(vec![
                "*/5 * * * *", "0 9 * * 1-5", "30 2 * * *", "0 0 29 2 *", "15 10 L * *",
                "0 12 * * 5#3", "*/7 3-5 * * *", "0 0 31 * *", "*/20 * * * * *", "0 */3 * * 0,6",
                "@hourly", "5 4 1,15 * SUN",
            ]),
            secs in 1_700_000_000i64..1_900_000_000i64,
            frac in 0u32..3,
            inclusive: bool,
        ) {
            let spec = CronSpec::parse(expr).unwrap();
            let from = chrono::DateTime::from_timestamp(secs - secs % 60 + i64::from(frac) * 7, 0)
                .unwrap()
                .naive_utc();
            let direct = spec.cron.cron.find_next_occurrence(&from, inclusive).ok();
            // The same question again and again: first croner, then the listed day.
            for _ in 0..2 * LIST_AFTER {
                proptest::prop_assert_eq!(spec.next_local(from, inclusive), direct);
            }
            // A walk from there, as the fire iterator does: sub-daily
            // expressions come back to one day until it is listed.
            let mut at = from;
            for _ in 0..40 {
                let want = spec.cron.cron.find_next_occurrence(&at, false).ok();
                proptest::prop_assert_eq!(spec.next_local(at, false), want);
                match want {
                    Some(w) => at = w,
                    None => break,
                }
            }
        }
    }

    #[test]
    fn schedules_with_the_same_expression_share_one_parsed_cron() {
        let a = CronSpec::parse("7 3 * * 1-5").unwrap();
        let b = CronSpec::parse(" 7 3 * * 1-5 ").unwrap();
        let c = CronSpec::parse("8 3 * * 1-5").unwrap();
        assert!(Arc::ptr_eq(&a.cron, &b.cron));
        assert!(!Arc::ptr_eq(&a.cron, &c.cron));
        assert_eq!(b.expr(), "7 3 * * 1-5");
        // Errors are never cached: the same bad expression fails each time.
        assert!(CronSpec::parse("0 0 30 2 *").is_err());
        assert!(CronSpec::parse("0 0 30 2 *").is_err());
    }

    #[test]
    fn five_field_one_to_five_is_monday_to_friday() {
        let c = CronSpec::parse("0 17 * * 1-5").unwrap();
        let mut t = at(2026, 6, 5, 0, 0); // a Friday
        let mut days = vec![];
        for _ in 0..5 {
            t = c.next_local(t, false).unwrap();
            days.push(t.weekday());
        }
        use Weekday::*;
        assert_eq!(days, vec![Fri, Mon, Tue, Wed, Thu]);
    }

    #[test]
    fn zero_and_seven_are_sunday_and_names_work() {
        for e in ["0 9 * * 0", "0 9 * * 7", "0 9 * * SUN", "0 9 ? * sun"] {
            let c = CronSpec::parse(e).unwrap();
            let t = c.next_local(at(2026, 6, 1, 0, 0), false).unwrap();
            assert_eq!(t.weekday(), Weekday::Sun, "{e}");
        }
        let c = CronSpec::parse("0 9 * JAN MON-FRI").unwrap();
        let t = c.next_local(at(2026, 6, 1, 0, 0), false).unwrap();
        assert_eq!((t.year(), t.month()), (2027, 1));
    }

    #[test]
    fn dom_and_dow_are_ored_like_vixie() {
        // 1st of the month OR any Monday.
        let c = CronSpec::parse("0 0 1 * MON").unwrap();
        let t = c.next_local(at(2026, 6, 2, 0, 0), false).unwrap(); // Tue 2nd
        assert_eq!(t.date(), NaiveDate::from_ymd_opt(2026, 6, 8).unwrap()); // Monday
        let t = c.next_local(at(2026, 6, 29, 1, 0), false).unwrap(); // after Mon 29th
        assert_eq!(t.date(), NaiveDate::from_ymd_opt(2026, 7, 1).unwrap());
    }

    #[test]
    fn a_starred_day_field_ands_like_vixie() {
        // Vixie: a field starting with `*` is "unrestricted" for the OR rule, so
        // the other field's days are filtered by it: odd-numbered Mondays.
        let c = CronSpec::parse("0 9 */2 * MON").unwrap();
        let mut t = at(2026, 7, 1, 0, 0);
        let mut got = vec![];
        for _ in 0..3 {
            t = c.next_local(t, false).unwrap();
            got.push(t.date().to_string());
        }
        assert_eq!(got, ["2026-07-13", "2026-07-27", "2026-08-03"]);
        // Day of month every other day, any weekday (`*/1` weekdays): every odd day.
        let c = CronSpec::parse("0 9 */2 * */1").unwrap();
        assert_eq!(
            c.next_local(at(2026, 7, 1, 10, 0), false).unwrap().date(),
            NaiveDate::from_ymd_opt(2026, 7, 3).unwrap()
        );
        // `*` weekday with a restricted day of month: only that day.
        let c = CronSpec::parse("0 9 15 * *").unwrap();
        assert_eq!(c.next_local(at(2026, 7, 1, 0, 0), false).unwrap().day(), 15);
        let c = CronSpec::parse("0 9 ? * MON").unwrap();
        assert_eq!(c.next_local(at(2026, 7, 1, 0, 0), false).unwrap().day(), 6);
    }

    #[test]
    fn six_and_seven_fields_and_specials() {
        let c = CronSpec::parse("30 0 9 * * *").unwrap();
        assert_eq!(
            c.next_local(at(2026, 6, 1, 0, 0), false).unwrap(),
            at(2026, 6, 1, 9, 0) + chrono::TimeDelta::seconds(30)
        );
        let c = CronSpec::parse("0 0 9 1 1 * 2030").unwrap();
        assert_eq!(c.next_local(at(2026, 6, 1, 0, 0), false).unwrap().year(), 2030);
        let last = CronSpec::parse("0 9 L * *").unwrap();
        assert_eq!(last.next_local(at(2026, 2, 1, 0, 0), false).unwrap().day(), 28);
        let nth = CronSpec::parse("0 9 * * 5#2").unwrap(); // second Friday
        assert_eq!(nth.next_local(at(2026, 6, 1, 0, 0), false).unwrap().day(), 12);
        let w = CronSpec::parse("0 9 15W * *").unwrap(); // 2026-08-15 is a Saturday
        assert_eq!(w.next_local(at(2026, 8, 1, 0, 0), false).unwrap().day(), 14);
    }

    #[test]
    fn pinned_versus_repeating_and_cadence() {
        let p = |e: &str| CronSpec::parse(e).unwrap();
        assert!(!p("30 2 * * *").repeats_within_day());
        assert!(p("0 * * * *").repeats_within_day());
        assert!(p("0 8-18/2 * * *").repeats_within_day());
        assert!(!p("0 8,12 * * *").repeats_within_day());
        assert_eq!(p("0 9 * * MON-FRI").cadence(), Cadence::Daily);
        assert_eq!(p("0 9 * * MON").cadence(), Cadence::Weekly);
        assert_eq!(p("*/5 * * * *").cadence(), Cadence::SubDaily);
        assert_eq!(p("0 9,17 * * *").cadence(), Cadence::SubDaily);
        assert_eq!(p("0 0 1 * *").cadence(), Cadence::Daily);
        assert_eq!(p("@hourly").cadence(), Cadence::SubDaily);
        assert_eq!(p("@midnight").cadence(), Cadence::Daily);
        let y = p("@yearly").next_local(at(2026, 6, 1, 0, 0), false).unwrap();
        assert_eq!((y.month(), y.day()), (1, 1));
        assert!(p("@hourly").repeats_within_day());
    }

    #[test]
    fn invalid_expressions_are_refused_with_a_reason() {
        for bad in [
            "",
            "* * *",
            "61 * * * *",
            "0 25 * * *",
            "0 9 * * 8",
            "0 9 * FOO *",
            "0 0 30 2 *",
            "a b c d e",
            "@never",
        ] {
            let e = CronSpec::parse(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
    }
}
