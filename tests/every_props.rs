//! `every` across zones, DST and years (DESIGN.md "Layer 1"): whole-day
//! intervals are calendar arithmetic in the schedule's zone (the same local
//! time every N days), shorter ones real-time cadence on the local clock's
//! grid (like a repeating cron schedule across DST); window keys never
//! repeat; and the windows the engine opens are exactly the fires `next`
//! lists.

mod support;

use agentcron::rehearsal::sim::SimAttempt;
use agentcron::time::fire::{FireRule, FireSource};
use agentcron::time::policy::{Anchor, DstFold, DstGap, NonBusinessDay};
use chrono::{DateTime, TimeDelta, Timelike, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;
use std::collections::HashSet;
use support::*;

const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Kathmandu",
    "America/Havana",
    "Asia/Beirut",
];

const INTERVALS: &[i64] = &[300, 3_600, 5_400, 86_400, 2 * 86_400, 3 * 86_400, 7 * 86_400];

fn rule(tz: Tz, secs: i64) -> FireRule {
    FireRule {
        source: FireSource::Every {
            interval: TimeDelta::seconds(secs),
            anchor: Anchor::Fixed,
        },
        tz,
        dst_gap: DstGap::Shift,
        dst_fold: DstFold::First,
        calendar: None,
        non_business_day: NonBusinessDay::Skip,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_keeps_its_cadence_for_three_years(
        zone in 0..ZONES.len(),
        interval in 0..INTERVALS.len(),
        start_day in 0i64..365,
    ) {
        let tz: Tz = ZONES[zone].parse().unwrap();
        let secs = INTERVALS[interval];
        let r = rule(tz, secs);
        let from = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().to_utc() + TimeDelta::days(start_day);
        let until = from + TimeDelta::days(3 * 365);
        // Sub-day cadences are sampled (three years of 5-minute fires is 300k).
        let cap = if secs < 86_400 { 20_000 } else { 2_000 };
        let fires: Vec<_> = r.fires_after(from).take_while(|f| f.at <= until).take(cap).collect();
        prop_assert!(!fires.is_empty());
        let mut keys = HashSet::new();
        for w in fires.windows(2) {
            prop_assert!(w[0].at < w[1].at, "fires increase: {:?} {:?}", w[0], w[1]);
        }
        for f in &fires {
            prop_assert!(keys.insert(f.window_key.clone()), "key {} repeats ({})", f.window_key, ZONES[zone]);
        }
        if secs % 86_400 == 0 {
            let days = secs / 86_400;
            for w in fires.windows(2) {
                // The same local time (midnight) every N local days, except a
                // midnight that falls in a DST gap, shifted to the gap's end.
                let (a, b) = (w[0].local, w[1].local);
                prop_assert_eq!((b.date_naive() - a.date_naive()).num_days(), days, "{:?} → {:?}", a, b);
                for l in [a, b] {
                    let shifted = w.iter().any(|f| f.local == l && f.note.is_some());
                    prop_assert!(l.time().hour() == 0 && l.time().minute() == 0 || shifted, "{:?}", l);
                }
            }
        } else {
            // Real-time cadence on the local clock's grid (as a repeating cron
            // schedule): never more than one interval between fires, and less
            // only by what a DST change moved the clock (at most an hour).
            for w in fires.windows(2) {
                let gap = (w[1].at - w[0].at).num_seconds();
                prop_assert!(gap <= secs && gap >= secs - 3_600, "{:?} → {:?}", w[0], w[1]);
            }
        }
    }
}

/// The engine, run on a virtual clock over a year across DST changes, opens
/// exactly the windows `next` (the same fire rule) lists: same keys, same
/// instants, none twice.
#[test]
fn the_engine_opens_the_windows_next_lists() {
    for zone in ["America/New_York", "Australia/Lord_Howe", "Europe/London"] {
        let dir = tempfile::tempdir().unwrap();
        let mut toml = BASE.replace("timezone = \"Asia/Shanghai\"", &format!("timezone = \"{zone}\""));
        for (id, every) in [("d1", "1d"), ("d2", "2d"), ("w1", "1w"), ("h7", "7h")] {
            toml.push_str(&format!(
                "\n[[schedule]]\nid = \"{id}\"\nagent = \"sim\"\nevery = \"{every}\"\noverlap = \"allow\"\n"
            ));
        }
        let cfg = config(&dir, &toml);
        let start = "2026-01-01T00:00:00Z";
        let quick = || {
            sim_agent(vec![SimAttempt {
                latency: TimeDelta::seconds(1),
                ..Default::default()
            }])
        };
        let mut d = driver(
            &dir,
            cfg.clone(),
            start,
            vec![("d1", quick()), ("d2", quick()), ("w1", quick()), ("h7", quick())],
            vec![],
        );
        let end = t("2027-01-01T00:00:00Z");
        d.run_until(end).unwrap();
        let store = d.store().unwrap();
        for s in &cfg.schedules {
            let rule = s.fire_rule(None).unwrap();
            let want: Vec<(String, DateTime<Utc>)> = rule
                .fires_after(t(start) - TimeDelta::milliseconds(1))
                .take_while(|f| f.at <= end)
                .map(|f| (f.window_key, f.at))
                .collect();
            let got: Vec<(String, DateTime<Utc>)> = runs(&store, &s.id)
                .into_iter()
                .map(|r| (r.window_key, r.window_start))
                .collect();
            assert_eq!(got, want, "{zone} {}", s.id);
            let keys: HashSet<&String> = got.iter().map(|(k, _)| k).collect();
            assert_eq!(keys.len(), got.len(), "{zone} {}: a key repeats", s.id);
        }
    }
}

/// The reproduction: `every = "2d"` in New York across the fall-back night
/// listed 11-01 00:00, then 11-02 23:00 -05:00, then 11-03 00:00; `1d` and
/// `1w` repeated a key. Now every second local midnight, one key each.
#[test]
fn next_lists_whole_day_every_on_local_midnights_across_fall_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentcron.toml");
    std::fs::write(
        &path,
        "[scheduler]\ntimezone = \"America/New_York\"\n[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n\
         [[schedule]]\nid = \"d2\"\nagent = \"a\"\nevery = \"2d\"\n",
    )
    .unwrap();
    let out = assert_cmd::Command::cargo_bin("agentcron")
        .unwrap()
        .args([
            "next",
            "d2",
            "--json",
            "--count",
            "4",
            "--after",
            "2026-10-30T12:00:00-04:00",
            "--config",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fires: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let local: Vec<&str> = fires
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["local"].as_str().unwrap())
        .collect();
    let keys: Vec<&str> = fires
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["window_key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        ["2026-11-01", "2026-11-03", "2026-11-05", "2026-11-07"],
        "{local:?}"
    );
    assert!(local.iter().all(|l| l.contains("T00:00:00")), "{local:?}");
}
