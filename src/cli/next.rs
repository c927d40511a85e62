//! `agentcron next`: upcoming fires of a schedule or an ad-hoc cron expression,
//! with the DST and calendar notes that changed them.

use super::exit;
use crate::config::model::{DstFold, DstGap};
use crate::time::cron::CronSpec;
use crate::time::fire::{Fire, FireRule};
use crate::time::{Clock, SystemClock};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::path::Path;

/// What to enumerate.
pub enum Target<'a> {
    Schedule(&'a str),
    Cron(&'a str),
}

/// The zone and DST policy flags. They describe an ad-hoc `--cron` expression; a
/// schedule brings its own from the config.
pub struct CronFlags<'a> {
    pub tz: Option<&'a str>,
    pub dst_gap: Option<DstGap>,
    pub dst_fold: Option<DstFold>,
}

pub struct Options<'a> {
    pub target: Target<'a>,
    pub cron_flags: CronFlags<'a>,
    pub count: usize,
    pub after: Option<&'a str>,
    pub json: bool,
}

/// Most fires one call lists: enough for any review, small enough that a typo
/// (an extra zero or two) cannot make the command run for minutes.
pub const MAX_COUNT: usize = 10_000;

pub fn run(config: &Path, db: Option<&Path>, opts: &Options<'_>) -> i32 {
    if let Err(e) = check_usage(opts) {
        eprintln!("agentcron next: {e}");
        return exit::USAGE;
    }
    let after = match opts.after {
        None => SystemClock.now(),
        Some(s) => match parse_instant(s) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("agentcron next: {e}");
                return exit::USAGE;
            }
        },
    };
    let rule = match &opts.target {
        Target::Cron(expr) => {
            let CronFlags {
                tz,
                dst_gap,
                dst_fold,
            } = &opts.cron_flags;
            let tz: Tz = match tz {
                None => Tz::UTC,
                Some(name) => match name.parse() {
                    Ok(tz) => tz,
                    Err(_) => {
                        eprintln!(
                            "agentcron next: unknown time zone `{name}`; use an IANA name such as Europe/London or Asia/Shanghai"
                        );
                        return exit::USAGE;
                    }
                },
            };
            let spec = match CronSpec::parse(expr) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("agentcron next: {e}");
                    return exit::USAGE;
                }
            };
            let mut rule = FireRule::cron(spec, tz);
            rule.dst_gap = dst_gap.unwrap_or_default();
            rule.dst_fold = dst_fold.unwrap_or_default();
            rule
        }
        Target::Schedule(id) => {
            let cfg = match super::db::config_or_ledger(config, db) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let Some(s) = cfg.schedule(id) else {
                eprintln!(
                    "agentcron next: {} ({})",
                    crate::operator::unknown_schedule(id, cfg.schedules.iter().map(|s| s.id.as_str())),
                    config.display()
                );
                return exit::DOES_NOT_HOLD;
            };
            let calendar = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
            match s.fire_rule(calendar) {
                Some(rule) => rule,
                None => {
                    if opts.json {
                        println!("[]");
                    } else {
                        println!(
                            "{id} has an event trigger: it fires when its event is posted, not at fixed times"
                        );
                    }
                    return exit::OK;
                }
            }
        }
    };
    let fires: Vec<Fire> = rule.fires_after(after).take(opts.count).collect();
    if opts.json {
        let rows: Vec<serde_json::Value> = fires.iter().map(fire_json).collect();
        match serde_json::to_string_pretty(&rows) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("agentcron next: {e}");
                return exit::DOES_NOT_HOLD;
            }
        }
    } else {
        print!("{}", table(&fires));
    }
    exit::OK
}

/// Rejects flag combinations that would otherwise be silently ignored, and
/// counts beyond [`MAX_COUNT`].
fn check_usage(opts: &Options<'_>) -> Result<(), String> {
    if let Target::Schedule(id) = opts.target {
        let f = &opts.cron_flags;
        let given: Vec<&str> = [
            f.tz.map(|_| "--tz"),
            f.dst_gap.map(|_| "--dst-gap"),
            f.dst_fold.map(|_| "--dst-fold"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !given.is_empty() {
            let verb = if given.len() == 1 { "applies" } else { "apply" };
            return Err(format!(
                "{} {verb} only to --cron; schedule `{id}` uses its configured timezone and DST policy",
                given.join(", ")
            ));
        }
    }
    if opts.count > MAX_COUNT {
        return Err(format!(
            "--count {} is more than the maximum {MAX_COUNT}; list fewer fires, or a later --after",
            opts.count
        ));
    }
    Ok(())
}

/// Parses an RFC 3339 instant, with a message that shows the expected shape.
pub fn parse_instant(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("`{s}` is not an RFC 3339 instant ({e}); expected e.g. 2026-06-05T00:00:00Z or 2026-06-05T08:00:00+08:00"))
}

fn fire_json(f: &Fire) -> serde_json::Value {
    serde_json::json!({
        "utc": f.at.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        "local": f.local.to_rfc3339(),
        "window_key": f.window_key,
        "note": f.note.map(|n| n.as_str()),
    })
}

fn table(fires: &[Fire]) -> String {
    let mut rows = vec![["UTC".to_string(), "LOCAL".into(), "WINDOW".into(), "NOTE".into()]];
    for f in fires {
        rows.push([
            f.at.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            f.local.format("%a %Y-%m-%d %H:%M:%S %:z").to_string(),
            f.window_key.clone(),
            f.note.map(|n| n.as_str().to_string()).unwrap_or_default(),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
