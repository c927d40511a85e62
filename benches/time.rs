//! Time benchmarks: cron parsing, fire enumeration through the DST resolver, and
//! cold `next_after` calls.
//!
//! `cargo bench --bench time`. A plain `main` (`harness = false`): it prints wall
//! time and rate per case and asserts nothing about speed. Inputs come from a fixed
//! seed so two runs do the same work.

use agentcron::time::cron::CronSpec;
use agentcron::time::fire::FireRule;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::hint::black_box;
use std::time::{Duration, Instant};

const PARSES: usize = 100_000;
const FIRES: usize = 1_000_000;
const COLD_CALLS: usize = 100_000;
/// Fires taken from one iterator before starting a fresh one elsewhere in time.
const CHUNK: usize = 1_000;

/// Zones with and without DST, including Lord Howe's 30-minute shift and the
/// southern hemisphere.
const ZONES: &[Tz] = &[
    Tz::UTC,
    Tz::America__New_York,
    Tz::Europe__London,
    Tz::Europe__Berlin,
    Tz::Asia__Shanghai,
    Tz::Australia__Sydney,
    Tz::Australia__Lord_Howe,
];

/// The enumeration mix: (label, expression).
const RULES: &[(&str, &str)] = &[
    ("pinned daily 02:30", "30 2 * * *"),
    ("hourly", "0 * * * *"),
    ("every 5 min", "*/5 * * * *"),
    ("weekdays 09:00", "0 9 * * MON-FRI"),
];

fn main() {
    println!("agentcron time benchmarks ({} build)", profile());
    parse_bench();
    fires_bench();
    cold_bench();
}

fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "optimised"
    }
}

/// (a) 100,000 realistic expressions through `CronSpec::parse`.
fn parse_bench() {
    let mut rng = SplitMix(0x5eed_0001);
    let exprs: Vec<String> = (0..PARSES).map(|_| random_expression(&mut rng)).collect();
    let start = Instant::now();
    let mut failures = 0usize;
    let mut sub_daily = 0usize;
    for e in &exprs {
        match CronSpec::parse(black_box(e)) {
            Ok(spec) => sub_daily += usize::from(spec.repeats_within_day()),
            Err(msg) => {
                if failures == 0 {
                    eprintln!("unexpected parse failure: {msg}");
                }
                failures += 1;
            }
        }
    }
    let took = start.elapsed();
    report("parse", PARSES, "expressions", took);
    black_box(sub_daily);
    if failures > 0 {
        eprintln!("{failures} of {PARSES} generated expressions did not parse");
        std::process::exit(1);
    }
}

/// (b) 1,000,000 fires from `FireRule::fires_after` over zones × expressions; each
/// iterator yields `CHUNK` fires from a random start in 2026–2027 so many chunks
/// cross DST changes.
fn fires_bench() {
    let per_rule = FIRES / RULES.len();
    let mut total = Duration::ZERO;
    let mut rng = SplitMix(0x5eed_0002);
    for (label, expr) in RULES {
        let rules: Vec<FireRule> = ZONES.iter().map(|tz| rule(expr, *tz)).collect();
        let starts: Vec<DateTime<Utc>> = (0..per_rule.div_ceil(CHUNK))
            .map(|_| random_instant(&mut rng))
            .collect();
        let start = Instant::now();
        let mut produced = 0usize;
        let mut checksum = 0i64;
        for (i, from) in starts.iter().enumerate() {
            let r = &rules[i % rules.len()];
            let want = CHUNK.min(per_rule - produced);
            for fire in r.fires_after(*from).take(want) {
                checksum = checksum.wrapping_add(fire.at.timestamp());
                produced += 1;
            }
        }
        let took = start.elapsed();
        total += took;
        black_box(checksum);
        report(&format!("fires [{label}]"), produced, "fires", took);
    }
    report("fires (all)", per_rule * RULES.len(), "fires", total);
}

/// (c) 100,000 single `next_after` calls from random instants: the cost of
/// starting a walk cold (offset probing, first cron match, DST resolution).
fn cold_bench() {
    let mut rng = SplitMix(0x5eed_0003);
    let rules: Vec<FireRule> = RULES
        .iter()
        .flat_map(|(_, expr)| ZONES.iter().map(move |tz| rule(expr, *tz)))
        .collect();
    let calls: Vec<(usize, DateTime<Utc>)> = (0..COLD_CALLS)
        .map(|_| (rng.below(rules.len() as u64) as usize, random_instant(&mut rng)))
        .collect();
    let start = Instant::now();
    let mut found = 0usize;
    for (i, at) in &calls {
        if black_box(rules[*i].next_after(*at)).is_some() {
            found += 1;
        }
    }
    let took = start.elapsed();
    report("next_after (cold)", COLD_CALLS, "calls", took);
    black_box(found);
}

fn rule(expr: &str, tz: Tz) -> FireRule {
    match CronSpec::parse(expr) {
        Ok(spec) => FireRule::cron(spec, tz),
        Err(e) => {
            eprintln!("benchmark rule `{expr}` does not parse: {e}");
            std::process::exit(1);
        }
    }
}

/// A random instant (whole seconds) in 2026-01-01..2028-01-01 UTC.
fn random_instant(rng: &mut SplitMix) -> DateTime<Utc> {
    const FROM: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z
    const SPAN: u64 = 2 * 365 * 86_400;
    let secs = FROM + rng.below(SPAN) as i64;
    DateTime::<Utc>::from_timestamp(secs, 0).unwrap_or_default()
}

/// One expression of the kind people write: 5-field mostly, some 6/7-field,
/// names, steps, ranges, lists, `?`, `L`, `W`, `#`, `+` and nicknames.
fn random_expression(rng: &mut SplitMix) -> String {
    const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
    const STEPS: [u64; 7] = [1, 2, 5, 10, 15, 20, 30];
    let m = rng.below(60);
    let h = rng.below(24);
    let s = rng.below(60);
    let d = 1 + rng.below(28);
    let dow = rng.below(7);
    let name = DAYS[dow as usize];
    let step = STEPS[rng.below(STEPS.len() as u64) as usize];
    match rng.below(24) {
        0 => format!("{m} {h} * * *"),
        1 => format!("{m} {h} * * MON-FRI"),
        2 => format!("{m} {h} * * 1-5"),
        3 => format!("*/{step} * * * *"),
        4 => format!("{m} */{} * * *", 1 + rng.below(6)),
        5 => format!("{m} {}-{} * * *", h.min(12), 12 + h / 2),
        6 => format!("{m} {h} {d} * *"),
        7 => format!("{m} {h} L * *"),
        8 => format!("{m} {h} {d}W * *"),
        9 => format!("{m} {h} * * {dow}#{}", 1 + rng.below(4)),
        10 => format!("{m} {h} * * {dow}L"),
        11 => format!("{m} {h} 1 JAN,APR,JUL,OCT *"),
        12 => format!("{m} {h} * * {name}"),
        13 => format!("{m} {h} ? * MON,WED,FRI"),
        14 => format!("{m} {h} 1-7 * +{name}"),
        15 => format!("{m} {h} {d} * {name}"),
        16 => format!("0,30 {h}-{} * * MON-FRI", (h + 3).min(23)),
        17 => ["@daily", "@hourly", "@weekly", "@monthly", "@yearly"][rng.below(5) as usize].to_string(),
        18 => format!("{s} {m} {h} * * *"),
        19 => format!("*/{step} * * * * *"),
        20 => format!("0 {m} {h} * * MON-FRI"),
        21 => format!("0 {m} {h} {d} {} * {}", 1 + rng.below(12), 2026 + rng.below(5)),
        22 => format!("0 {m} {h} * * MON-FRI 2026-2030"),
        _ => format!("{m} {h} * {}-{} {}-{}", 1 + rng.below(6), 7 + rng.below(6), 1, 5),
    }
}

fn report(what: &str, n: usize, unit: &str, took: Duration) {
    let secs = took.as_secs_f64();
    let rate = if secs > 0.0 {
        n as f64 / secs
    } else {
        f64::INFINITY
    };
    println!(
        "{what}: {} {unit} in {secs:.2} s ({}/s)",
        thousands(n as u64),
        thousands(rate.round() as u64)
    );
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// SplitMix64: a tiny deterministic generator, so the bench needs no `rand`.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform-enough in `0..n` for picking inputs (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
