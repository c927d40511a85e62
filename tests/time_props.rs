//! Property tests for the time layer: for random expressions, zones and start
//! instants, fires strictly increase, never fall at or before `after`, window keys
//! never repeat, and pinned daily schedules fire exactly once per local day.

use agentcron::time::cron::CronSpec;
use agentcron::time::fire::{FireRule, FireSource, LocalTime, resolve_local};
use agentcron::time::policy::{Anchor, DstGap};
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;
use std::collections::HashSet;

const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Asia/Shanghai",
    "Asia/Kathmandu",
    "America/Santiago",
    "Pacific/Chatham",
    "America/Sao_Paulo",
];

fn field(max: u32, min: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_string()),
        (1..=max.min(30)).prop_map(|k| format!("*/{k}")),
        (min..=max).prop_map(|n| n.to_string()),
        (min..=max, min..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
        (min..=max, min..=max, 2..6u32).prop_map(|(a, b, k)| format!("{}-{}/{k}", a.min(b), a.max(b))),
        (min..=max, min..=max).prop_map(|(a, b)| format!("{a},{b}")),
    ]
}

fn expr() -> impl Strategy<Value = String> {
    let dom = prop_oneof![
        Just("*".to_string()),
        (1..=28u32).prop_map(|d| d.to_string()),
        Just("L".into()),
        Just("1-15".into())
    ];
    let month = prop_oneof![
        Just("*".to_string()),
        (1..=12u32).prop_map(|m| m.to_string()),
        Just("3-11".into())
    ];
    let dow = prop_oneof![
        Just("*".to_string()),
        Just("1-5".into()),
        Just("0".into()),
        Just("MON".into()),
        Just("5#2".into()),
        Just("SAT,SUN".into())
    ];
    (field(59, 0), field(23, 0), dom, month, dow)
        .prop_map(|(mi, h, d, mo, w)| format!("{mi} {h} {d} {mo} {w}"))
}

fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    // 2020-01-01 .. 2035-01-01, minute resolution plus odd seconds.
    (1_577_836_800i64..2_051_222_400i64).prop_map(|s| DateTime::<Utc>::from_timestamp(s, 0).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn fires_increase_and_keys_never_repeat(e in expr(), zi in 0..ZONES.len(), after in instant(), gap_skip in any::<bool>(), fold in 0..3u8) {
        let Ok(spec) = CronSpec::parse(&e) else { return Ok(()) };
        let mut rule = FireRule::cron(spec, ZONES[zi].parse::<Tz>().unwrap());
        if gap_skip { rule.dst_gap = DstGap::Skip; }
        rule.dst_fold = [agentcron::time::policy::DstFold::First, agentcron::time::policy::DstFold::Last, agentcron::time::policy::DstFold::Both][fold as usize];
        let fires: Vec<_> = rule.fires_after(after).take(40).collect();
        let mut keys = HashSet::new();
        let mut prev = after;
        for f in &fires {
            prop_assert!(f.at > prev, "{e} in {}: {} not after {}", ZONES[zi], f.at, prev);
            prev = f.at;
            prop_assert!(keys.insert(f.window_key.clone()), "{e} in {}: key {} repeated", ZONES[zi], f.window_key);
            prop_assert_eq!(f.local.with_timezone(&Utc), f.at);
        }
    }

    /// The engine waits for the first fire after a schedule's cursor, and
    /// when it opens one it asks for the first fire after that fire's
    /// instant: restarting the sequence at any fire must give the same
    /// fires as walking it.
    #[test]
    fn restarting_at_a_fire_continues_the_same_sequence(e in expr(), zi in 0..ZONES.len(), after in instant(), gap_skip in any::<bool>(), fold in 0..3u8) {
        let Ok(spec) = CronSpec::parse(&e) else { return Ok(()) };
        let mut rule = FireRule::cron(spec, ZONES[zi].parse::<Tz>().unwrap());
        if gap_skip { rule.dst_gap = DstGap::Skip; }
        rule.dst_fold = [agentcron::time::policy::DstFold::First, agentcron::time::policy::DstFold::Last, agentcron::time::policy::DstFold::Both][fold as usize];
        let walked: Vec<_> = rule.fires_after(after).take(30).collect();
        let mut restarted = Vec::with_capacity(walked.len());
        let mut from = after;
        while restarted.len() < walked.len() {
            let Some(f) = rule.next_after(from) else { break };
            from = f.at;
            restarted.push(f);
        }
        prop_assert_eq!(restarted.len(), walked.len(), "{} in {}", e, ZONES[zi]);
        for (a, b) in walked.iter().zip(&restarted) {
            prop_assert_eq!((a.at, &a.window_key, &a.note), (b.at, &b.window_key, &b.note), "{} in {}", e, ZONES[zi]);
        }
    }

    #[test]
    fn every_fixed_keeps_real_time_spacing(step in prop::sample::select(vec![1i64, 5, 10, 15, 30]), zi in 0..ZONES.len(), after in instant()) {
        let tz: Tz = ZONES[zi].parse().unwrap();
        let mut rule = FireRule::cron(CronSpec::parse("0 0 * * *").unwrap(), tz);
        rule.source = FireSource::Every { interval: TimeDelta::minutes(step), anchor: Anchor::Fixed };
        let fires: Vec<_> = rule.fires_after(after).take(50).collect();
        prop_assert!(fires[0].at > after && fires[0].at - after <= TimeDelta::minutes(step));
        for w in fires.windows(2) {
            prop_assert_eq!(w[1].at - w[0].at, TimeDelta::minutes(step), "{} around {}", ZONES[zi], w[0].local);
        }
    }
}

/// Exhaustive over zones, every hour and four minutes, a year, both gap
/// policies: "never twice for one window, never silently zero times".
#[test]
fn pinned_daily_fires_exactly_once_per_local_day() {
    let mut checked_gaps = 0;
    for zone in ZONES {
        let tz: Tz = zone.parse().unwrap();
        for h in 0..24u32 {
            for m in [0u32, 15, 30, 45] {
                for gap_skip in [false, true] {
                    let mut rule = FireRule::cron(CronSpec::parse(&format!("{m} {h} * * *")).unwrap(), tz);
                    if gap_skip {
                        rule.dst_gap = DstGap::Skip;
                    }
                    let start = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
                    let end = NaiveDate::from_ymd_opt(2027, 1, 1).unwrap();
                    let after = resolve_local(tz, start.and_hms_opt(0, 0, 0).unwrap()).earliest()
                        - TimeDelta::seconds(1);
                    let until = resolve_local(tz, end.and_hms_opt(0, 0, 0).unwrap()).earliest();
                    let mut seen = HashSet::new();
                    for f in rule.fires_after(after).take_while(|f| f.at < until) {
                        assert!(
                            seen.insert(f.window_key.clone()),
                            "{zone} {m} {h}: two fires for {}",
                            f.window_key
                        );
                    }
                    let mut d = start;
                    while d < end {
                        let nominal = d.and_hms_opt(h, m, 0).unwrap();
                        let in_gap = matches!(resolve_local(tz, nominal), LocalTime::Gap { .. });
                        let key = d.format("%Y-%m-%d").to_string();
                        if in_gap {
                            checked_gaps += 1;
                        }
                        if in_gap && gap_skip {
                            assert!(
                                !seen.contains(&key),
                                "{zone} {m} {h}: {key} fired in a gap with dst_gap = skip"
                            );
                        } else {
                            assert!(seen.contains(&key), "{zone} {m} {h} * * *: no fire on {key}");
                        }
                        d = d.succ_opt().unwrap();
                    }
                }
            }
        }
    }
    assert!(
        checked_gaps > 50,
        "the matrix must cross real DST gaps ({checked_gaps})"
    );
}
