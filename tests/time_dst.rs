//! DST, weekday and window-key semantics of DESIGN.md "Layer 1 — time", checked
//! on real zones: New York, London, Sydney (southern hemisphere), Lord Howe
//! (30-minute shift) and Shanghai (no DST).

use agentcron::time::calendar::Calendar;
use agentcron::time::cron::CronSpec;
use agentcron::time::fire::{Fire, FireNote, FireRule, FireSource};
use agentcron::time::policy::{Anchor, DstFold, DstGap, NonBusinessDay};
use chrono::{DateTime, NaiveDate, TimeDelta, Utc, Weekday};
use chrono_tz::Tz;
use std::sync::Arc;

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn rule(expr: &str, tz: &str) -> FireRule {
    FireRule::cron(CronSpec::parse(expr).unwrap(), tz.parse::<Tz>().unwrap())
}

fn fires(rule: &FireRule, after: &str, n: usize) -> Vec<Fire> {
    rule.fires_after(t(after)).take(n).collect()
}

/// `(local rfc3339, window key, note)` triples, easy to compare.
fn shape(fires: &[Fire]) -> Vec<(String, String, Option<&'static str>)> {
    fires
        .iter()
        .map(|f| {
            (
                f.local.to_rfc3339(),
                f.window_key.clone(),
                f.note.map(|n| n.as_str()),
            )
        })
        .collect()
}

fn row(local: &str, key: &str, note: Option<&'static str>) -> (String, String, Option<&'static str>) {
    (local.to_string(), key.to_string(), note)
}

#[test]
fn weekdays_one_to_five_are_monday_to_friday_in_shanghai() {
    let f = fires(&rule("0 17 * * 1-5", "Asia/Shanghai"), "2026-06-05T00:00:00Z", 5);
    let locals: Vec<String> = f.iter().map(|f| f.local.to_rfc3339()).collect();
    assert_eq!(
        locals,
        [
            "2026-06-05T17:00:00+08:00",
            "2026-06-08T17:00:00+08:00",
            "2026-06-09T17:00:00+08:00",
            "2026-06-10T17:00:00+08:00",
            "2026-06-11T17:00:00+08:00",
        ]
    );
    use chrono::Datelike;
    let days: Vec<Weekday> = f.iter().map(|f| f.local.weekday()).collect();
    assert_eq!(
        days,
        [
            Weekday::Fri,
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
            Weekday::Thu
        ]
    );
}

#[test]
fn new_york_spring_forward_pinned_shifts_or_skips() {
    let r = rule("30 2 * * *", "America/New_York");
    assert_eq!(
        shape(&fires(&r, "2026-03-07T00:00:00-05:00", 3)),
        [
            row("2026-03-07T02:30:00-05:00", "2026-03-07", None),
            row("2026-03-08T03:00:00-04:00", "2026-03-08", Some("dst_shifted")),
            row("2026-03-09T02:30:00-04:00", "2026-03-09", None),
        ]
    );
    let mut skip = r.clone();
    skip.dst_gap = DstGap::Skip;
    assert_eq!(
        shape(&fires(&skip, "2026-03-07T00:00:00-05:00", 2)),
        [
            row("2026-03-07T02:30:00-05:00", "2026-03-07", None),
            row("2026-03-09T02:30:00-04:00", "2026-03-09", None),
        ]
    );
}

#[test]
fn several_gap_times_landing_on_one_instant_fire_once() {
    let r = rule("0,15,30,45 2 * * *", "America/New_York");
    let f = fires(&r, "2026-03-08T00:00:00-05:00", 2);
    assert_eq!(
        shape(&f),
        [
            row(
                "2026-03-08T03:00:00-04:00",
                "2026-03-08T03:00-04:00",
                Some("dst_shifted")
            ),
            row("2026-03-09T02:00:00-04:00", "2026-03-09T02:00-04:00", None),
        ]
    );
    // A gap time shifted onto an existing fire of the same key fires once too.
    let r = rule("30 2,3 * * *", "America/New_York");
    let f = fires(&r, "2026-03-08T00:00:00-05:00", 2);
    assert_eq!(f[0].local.to_rfc3339(), "2026-03-08T03:00:00-04:00");
    assert_eq!(f[1].local.to_rfc3339(), "2026-03-08T03:30:00-04:00");
}

#[test]
fn new_york_fall_back_pinned_first_last_both() {
    let after = "2026-10-31T12:00:00-04:00";
    let mut r = rule("30 1 * * *", "America/New_York");
    assert_eq!(
        shape(&fires(&r, after, 2)),
        [
            row(
                "2026-11-01T01:30:00-04:00",
                "2026-11-01",
                Some("dst_fold_skipped")
            ),
            row("2026-11-02T01:30:00-05:00", "2026-11-02", None),
        ]
    );
    r.dst_fold = DstFold::Last;
    assert_eq!(
        shape(&fires(&r, after, 2)),
        [
            row(
                "2026-11-01T01:30:00-05:00",
                "2026-11-01",
                Some("dst_fold_skipped")
            ),
            row("2026-11-02T01:30:00-05:00", "2026-11-02", None),
        ]
    );
    r.dst_fold = DstFold::Both;
    let both = fires(&r, after, 3);
    assert_eq!(
        shape(&both),
        [
            row("2026-11-01T01:30:00-04:00", "2026-11-01", None),
            row("2026-11-01T01:30:00-05:00", "2026-11-01T01:30-05:00", None),
            row("2026-11-02T01:30:00-05:00", "2026-11-02", None),
        ]
    );
    assert_eq!(both[1].at - both[0].at, TimeDelta::hours(1));
}

#[test]
fn new_york_hourly_follows_real_time_through_fold_and_gap() {
    let r = rule("0 * * * *", "America/New_York");
    assert_eq!(
        shape(&fires(&r, "2026-11-01T00:30:00-04:00", 3)),
        [
            row("2026-11-01T01:00:00-04:00", "2026-11-01T01:00-04:00", None),
            row("2026-11-01T01:00:00-05:00", "2026-11-01T01:00-05:00", None),
            row("2026-11-01T02:00:00-05:00", "2026-11-01T02:00-05:00", None),
        ]
    );
    // Policies for pinned schedules do not apply to repeating ones.
    let mut last = r.clone();
    last.dst_fold = DstFold::Last;
    assert_eq!(fires(&last, "2026-11-01T00:30:00-04:00", 2).len(), 2);
    assert_eq!(
        shape(&fires(&r, "2026-03-08T00:30:00-05:00", 2)),
        [
            row("2026-03-08T01:00:00-05:00", "2026-03-08T01:00-05:00", None),
            row("2026-03-08T03:00:00-04:00", "2026-03-08T03:00-04:00", None),
        ]
    );
    // Starting inside the fold's second half still finds the second 01:30.
    let every30 = rule("*/30 * * * *", "America/New_York");
    let f = fires(&every30, "2026-11-01T05:45:00Z", 3); // 01:45 EDT
    assert_eq!(
        f.iter().map(|f| f.local.to_rfc3339()).collect::<Vec<_>>(),
        [
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T01:30:00-05:00",
            "2026-11-01T02:00:00-05:00"
        ]
    );
}

#[test]
fn london_gap_and_fold() {
    let r = rule("30 1 * * *", "Europe/London");
    assert_eq!(
        shape(&fires(&r, "2026-03-28T12:00:00Z", 2)),
        [
            row("2026-03-29T02:00:00+01:00", "2026-03-29", Some("dst_shifted")),
            row("2026-03-30T01:30:00+01:00", "2026-03-30", None),
        ]
    );
    let mut both = r.clone();
    both.dst_fold = DstFold::Both;
    assert_eq!(
        shape(&fires(&both, "2026-10-24T12:00:00Z", 2)),
        [
            row("2026-10-25T01:30:00+01:00", "2026-10-25", None),
            row("2026-10-25T01:30:00+00:00", "2026-10-25T01:30+00:00", None),
        ]
    );
}

#[test]
fn sydney_southern_hemisphere() {
    // DST ends first Sunday of April (fold 02:00–03:00), starts first Sunday of October (gap 02:00–03:00).
    let mut r = rule("30 2 * * *", "Australia/Sydney");
    assert_eq!(
        shape(&fires(&r, "2026-04-04T00:00:00Z", 2)),
        [
            row(
                "2026-04-05T02:30:00+11:00",
                "2026-04-05",
                Some("dst_fold_skipped")
            ),
            row("2026-04-06T02:30:00+10:00", "2026-04-06", None),
        ]
    );
    r.dst_fold = DstFold::Last;
    assert_eq!(
        fires(&r, "2026-04-04T00:00:00Z", 1)[0].local.to_rfc3339(),
        "2026-04-05T02:30:00+10:00"
    );
    assert_eq!(
        shape(&fires(&r, "2026-10-03T00:00:00Z", 2)),
        [
            row("2026-10-04T03:00:00+11:00", "2026-10-04", Some("dst_shifted")),
            row("2026-10-05T02:30:00+11:00", "2026-10-05", None),
        ]
    );
}

#[test]
fn lord_howe_thirty_minute_shift() {
    // Standard +10:30, summer +11:00. Gap 02:00–02:30 on 2026-10-04; fold 01:30–02:00 on 2026-04-05.
    let r = rule("15 2 * * *", "Australia/Lord_Howe");
    assert_eq!(
        shape(&fires(&r, "2026-10-03T00:00:00Z", 2)),
        [
            row("2026-10-04T02:30:00+11:00", "2026-10-04", Some("dst_shifted")),
            row("2026-10-05T02:15:00+11:00", "2026-10-05", None),
        ]
    );
    let mut fold = rule("45 1 * * *", "Australia/Lord_Howe");
    fold.dst_fold = DstFold::Both;
    let f = fires(&fold, "2026-04-04T00:00:00Z", 2);
    assert_eq!(
        shape(&f),
        [
            row("2026-04-05T01:45:00+11:00", "2026-04-05", None),
            row("2026-04-05T01:45:00+10:30", "2026-04-05T01:45+10:30", None),
        ]
    );
    assert_eq!(f[1].at - f[0].at, TimeDelta::minutes(30));
    let half_hourly = rule("*/30 * * * *", "Australia/Lord_Howe");
    let f = fires(&half_hourly, "2026-04-04T13:45:00Z", 4); // 00:45 +11
    assert_eq!(
        f.iter().map(|f| f.local.to_rfc3339()).collect::<Vec<_>>(),
        [
            "2026-04-05T01:00:00+11:00",
            "2026-04-05T01:30:00+11:00",
            "2026-04-05T01:30:00+10:30",
            "2026-04-05T02:00:00+10:30",
        ]
    );
}

#[test]
fn zone_without_dst_never_notes() {
    let r = rule("30 2 * * *", "Asia/Shanghai");
    for after in [
        "2026-03-07T00:00:00Z",
        "2026-10-30T00:00:00Z",
        "2026-03-27T00:00:00Z",
    ] {
        let f = fires(&r, after, 5);
        assert!(
            f.iter()
                .all(|f| f.note.is_none() && f.local.to_rfc3339().ends_with("02:30:00+08:00"))
        );
    }
}

#[test]
fn weekly_keys_are_iso_weeks_and_subdaily_keys_carry_offsets() {
    let f = fires(&rule("0 8 * * MON", "Asia/Shanghai"), "2026-05-31T00:00:00Z", 2);
    assert_eq!(f[0].window_key, "2026-W23");
    assert_eq!(f[1].window_key, "2026-W24");
    let f = fires(&rule("5 10 * * *", "Asia/Shanghai"), "2026-06-06T00:00:00Z", 1);
    assert_eq!(f[0].window_key, "2026-06-06");
    let f = fires(&rule("*/5 * * * *", "Asia/Shanghai"), "2026-06-06T02:00:00Z", 2);
    assert_eq!(f[0].window_key, "2026-06-06T10:05+08:00");
    let f = fires(&rule("*/20 * * * * *", "UTC"), "2026-06-06T00:00:00Z", 2);
    assert_eq!(f[0].window_key, "2026-06-06T00:00:20+00:00");
}

fn every(interval: TimeDelta, anchor: Anchor, tz: &str) -> FireRule {
    let mut r = rule("0 0 * * *", tz);
    r.source = FireSource::Every { interval, anchor };
    r
}

#[test]
fn every_fixed_aligns_to_the_local_clock_and_follows_real_time() {
    let r = every(TimeDelta::minutes(5), Anchor::Fixed, "Asia/Shanghai");
    let f = fires(&r, "2026-06-06T02:02:10Z", 2);
    assert_eq!(f[0].local.to_rfc3339(), "2026-06-06T10:05:00+08:00");
    assert_eq!(f[1].local.to_rfc3339(), "2026-06-06T10:10:00+08:00");
    // Kathmandu is +05:45: hourly still means on the local hour.
    let r = every(TimeDelta::hours(1), Anchor::Fixed, "Asia/Kathmandu");
    assert_eq!(
        fires(&r, "2026-06-06T00:00:00Z", 1)[0].local.to_rfc3339(),
        "2026-06-06T06:00:00+05:45"
    );
    // Through the New York fold: 01:55 EDT, then 01:00 EST five minutes later.
    let r = every(TimeDelta::minutes(5), Anchor::Fixed, "America/New_York");
    let f = fires(&r, "2026-11-01T05:50:00Z", 3);
    assert_eq!(
        f.iter().map(|f| f.local.to_rfc3339()).collect::<Vec<_>>(),
        [
            "2026-11-01T01:55:00-04:00",
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T01:05:00-05:00"
        ]
    );
    let r = every(TimeDelta::minutes(7), Anchor::LastStart, "UTC");
    let f = fires(&r, "2026-06-06T10:01:13Z", 2);
    assert_eq!(f[0].at, t("2026-06-06T10:08:13Z"));
    assert_eq!(f[1].at, t("2026-06-06T10:15:13Z"));
}

fn cn_calendar() -> Arc<Calendar> {
    let mut c = Calendar::new("cn", &[Weekday::Sat, Weekday::Sun]);
    c.holidays.insert(NaiveDate::from_ymd_opt(2026, 10, 1).unwrap());
    c.holidays.insert(NaiveDate::from_ymd_opt(2026, 10, 2).unwrap());
    c.workdays.insert(NaiveDate::from_ymd_opt(2026, 9, 27).unwrap()); // a Sunday
    Arc::new(c)
}

#[test]
fn calendar_skip_and_next_business_day() {
    let mut r = rule("0 9 * * *", "Asia/Shanghai");
    r.calendar = Some(cn_calendar());
    let f = fires(&r, "2026-09-26T00:00:00Z", 9);
    let notes: Vec<(String, Option<FireNote>)> = f.iter().map(|f| (f.window_key.clone(), f.note)).collect();
    assert_eq!(notes[0], ("2026-09-26".into(), Some(FireNote::CalendarSkipped))); // Saturday
    assert_eq!(notes[1], ("2026-09-27".into(), None)); // make-up workday
    assert_eq!(notes[5], ("2026-10-01".into(), Some(FireNote::CalendarSkipped)));

    r.non_business_day = NonBusinessDay::NextBusinessDay;
    let f = fires(&r, "2026-09-30T02:00:00Z", 4);
    // 10-01, 10-02 (holidays), 10-03, 10-04 (weekend) all move to Monday 10-05 09:00,
    // after which Monday's own window follows.
    let keys: Vec<&str> = f.iter().map(|f| f.window_key.as_str()).collect();
    assert_eq!(keys, ["2026-10-01", "2026-10-02", "2026-10-03", "2026-10-04"]);
    assert!(f.iter().all(|f| f.note == Some(FireNote::CalendarMoved)));
    assert!(
        f.iter()
            .all(|f| f.local.to_rfc3339() == "2026-10-05T09:00:00+08:00")
    );
    let next = fires(&r, "2026-10-05T00:59:00Z", 5);
    assert_eq!(next[4].window_key, "2026-10-05");
    assert_eq!(next[4].note, None);
    // Asked from the Sunday, the moved windows are still ahead.
    let from_sunday = fires(&r, "2026-10-04T12:00:00Z", 1);
    assert_eq!(from_sunday[0].window_key, "2026-10-01");
}
