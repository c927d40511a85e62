//! Human durations as DESIGN.md writes them: `"90s"`, `"5m"`, `"1h30m"`, `"72h"`.

use std::time::Duration;

/// Parses `"250ms"`, `"90s"`, `"5m"`, `"1h30m"`, `"2d"`, `"1w"`. Units may repeat in
/// descending order; a bare number is refused because "30" is ambiguous.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let mut total: u128 = 0;
    let mut rest = s;
    let mut last_rank = usize::MAX;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("expected a number at `{rest}` in duration `{s}`"));
        }
        let n: u128 = rest[..digits]
            .parse()
            .map_err(|_| format!("number too large in duration `{s}`"))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let (rank, millis) = match unit {
            "w" => (0, 7 * 86_400_000),
            "d" => (1, 86_400_000),
            "h" => (2, 3_600_000),
            "m" => (3, 60_000),
            "s" => (4, 1000),
            "ms" => (5, 1),
            "" => {
                return Err(format!(
                    "duration `{s}` needs a unit (ms, s, m, h, d, w), e.g. \"{n}s\""
                ));
            }
            other => {
                return Err(format!(
                    "unknown unit `{other}` in duration `{s}` (use ms, s, m, h, d or w)"
                ));
            }
        };
        if rank <= last_rank && last_rank != usize::MAX {
            return Err(format!(
                "units in duration `{s}` must go from largest to smallest, each once"
            ));
        }
        last_rank = rank;
        total += n * millis;
    }
    let millis = u64::try_from(total).map_err(|_| format!("duration `{s}` is too large"))?;
    Ok(Duration::from_millis(millis))
}

/// Formats a duration the way it is written in config: `1h30m`, `90s` → `1m30s`.
pub fn format_duration(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [
        ("d", 86_400_000u128),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
        ("ms", 1),
    ] {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}

/// Converts to chrono, saturating (config durations are far below the limit).
pub fn to_delta(d: Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(d).unwrap_or(chrono::TimeDelta::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_design_examples() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("72h").unwrap(), Duration::from_secs(72 * 3600));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86400));
    }

    #[test]
    fn refuses_ambiguous_or_malformed() {
        for bad in ["", "30", "5x", "m5", "5m1h", "1h1h", "1.5h", "-5m"] {
            assert!(parse_duration(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn formats_round_trip() {
        for s in ["1h30m", "90ms", "5m", "3d", "1m30s"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }
}
