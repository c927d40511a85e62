//! Time: the [`clock::Clock`], cron expressions, DST resolution, window keys and
//! business calendars (DESIGN.md "Layer 1 — time").

pub mod calendar;
pub mod clock;
pub mod cron;
pub mod duration;
pub mod fire;
pub mod policy;

pub use clock::{Clock, OffsetClock, SystemClock, VirtualClock};

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;

/// An instant as every event, JSON output and CLI column writes it: RFC 3339
/// UTC with milliseconds (`2026-06-06T01:00:00.000Z`).
///
/// Written digit by digit: every event carries several instants, and chrono's
/// formatter (through `core::fmt`) was about 2 % of a run's lifecycle. Years
/// outside 0–9999 and leap seconds go through chrono.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    let mut out = String::with_capacity(24);
    push_rfc3339(&mut out, t);
    out
}

/// [`rfc3339`] written at the end of `out` (JSON text writes its instants
/// in place).
pub fn push_rfc3339(out: &mut String, t: DateTime<Utc>) {
    match digits(t, true) {
        // ASCII digits and separators only: one copy, not a push per char.
        Some((d, n)) => out.push_str(std::str::from_utf8(&d[..n]).unwrap_or_default()),
        None => out.push_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true)),
    }
}

/// `at` as RFC 3339 in `tz`'s offset at that instant, to the second
/// (`2026-06-06T11:00:00+02:00`): what chrono's `to_rfc3339_opts(Secs,
/// false)` writes, digit by digit (the agent's envelope carries several).
/// An offset with seconds, a year outside 0–9999 or a leap second go
/// through chrono.
pub fn local_rfc3339_secs(at: DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    use chrono::{Offset, TimeZone};
    let offset = tz
        .offset_from_utc_datetime(&at.naive_utc())
        .fix()
        .local_minus_utc();
    let local = at
        .naive_utc()
        .checked_add_signed(chrono::TimeDelta::seconds(i64::from(offset)))
        .map(|l| DateTime::<Utc>::from_naive_utc_and_offset(l, Utc));
    match local.filter(|_| offset % 60 == 0).and_then(|l| digits(l, false)) {
        Some((d, n)) => {
            let mut out = String::with_capacity(25);
            // All but the `Z`.
            out.push_str(std::str::from_utf8(&d[..n - 1]).unwrap_or_default());
            let (sign, abs) = if offset < 0 { ('-', -offset) } else { ('+', offset) };
            let (h, m) = (abs / 3600, abs / 60 % 60);
            out.push(sign);
            for v in [h / 10, h % 10] {
                out.push(char::from(b'0' + v as u8));
            }
            out.push(':');
            for v in [m / 10, m % 10] {
                out.push(char::from(b'0' + v as u8));
            }
            out
        }
        None => tz
            .from_utc_datetime(&at.naive_utc())
            .to_rfc3339_opts(SecondsFormat::Secs, false),
    }
}

/// `t` as RFC 3339 UTC digits, with milliseconds when `millis` (24 bytes)
/// or to the second (20); `None` for a year outside 0–9999 or a leap
/// second, which chrono writes.
fn digits(t: DateTime<Utc>, millis: bool) -> Option<([u8; 24], usize)> {
    use chrono::{Datelike, Timelike};
    let (year, nanos) = (t.year(), t.nanosecond());
    if !(0..=9999).contains(&year) || nanos >= 1_000_000_000 {
        return None;
    }
    let mut out = [0u8; 24];
    let mut put = |at: usize, value: u32, digits: usize| {
        let mut v = value;
        for i in (0..digits).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, year as u32, 4);
    put(5, t.month(), 2);
    put(8, t.day(), 2);
    put(11, t.hour(), 2);
    put(14, t.minute(), 2);
    put(17, t.second(), 2);
    let n = if millis {
        put(20, nanos / 1_000_000, 3);
        out[19] = b'.';
        24
    } else {
        20
    };
    for (at, sep) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')] {
        out[at] = sep;
    }
    out[n - 1] = b'Z';
    Some((out, n))
}

/// Appends `t` as [`rfc3339_secs`] writes it (a reason that names
/// instants is made in one string, not one per instant).
pub fn push_rfc3339_secs(out: &mut String, t: DateTime<Utc>) {
    match digits(t, false) {
        Some((d, n)) => out.push_str(std::str::from_utf8(&d[..n]).unwrap_or_default()),
        None => out.push_str(&t.to_rfc3339_opts(SecondsFormat::Secs, true)),
    }
}

/// The same to whole seconds, for what people and scripts read: gate reasons,
/// the window variables of gate commands, manual window keys.
pub fn rfc3339_secs(t: DateTime<Utc>) -> String {
    let mut out = String::with_capacity(20);
    push_rfc3339_secs(&mut out, t);
    out
}

/// An instant as a person reads it in `tz`: `2026-06-06 09:00:00 +08:00` (the
/// offset always, so the zone is never a guess).
pub fn local_text(t: DateTime<Utc>, tz: Tz) -> String {
    t.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S %:z").to_string()
}

/// A window key as a person reads it in `tz`: as it is, except a manual key
/// (`manual-2026-06-06T01:00:00Z`, stamped in UTC when it was made) gets its
/// instant told in `tz` beside it. The key is an identity and never changes;
/// only what is shown next to it does.
pub fn key_text(key: &str, tz: Tz) -> String {
    let stamp = key
        .strip_prefix("manual-")
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok());
    match stamp {
        Some(t) if tz != Tz::UTC => format!("{key} ({})", local_text(t.to_utc(), tz)),
        _ => key.to_string(),
    }
}

/// `text` with every instant that [`rfc3339`] or [`rfc3339_secs`] wrote into
/// it (`2026-06-06T01:00:00.000Z`, `2026-06-06T01:00:00Z`) told in `tz` as
/// [`local_text`]. Stored reasons and event details carry UTC instants; a block
/// a person reads shows one zone. Window keys are left alone: theirs carry
/// their own offset, and a manual key's stamp (`manual-2026-…Z`) is part of a
/// longer word.
pub fn in_zone(text: &str, tz: Tz) -> String {
    let b = text.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    // `YYYY-MM-DDTHH:MM:SS`, then `.fff…` and `Z`: its length, or None.
    let instant = |i: usize| {
        let shape = [4, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2];
        let seps = [b'-', b'-', b'T', b':', b':'];
        let mut j = i;
        for (n, len) in shape.iter().enumerate() {
            if n % 2 == 1 {
                if !at(j, seps[n / 2]) {
                    return None;
                }
                j += 1;
            } else {
                if !(j..j + len).all(digit) {
                    return None;
                }
                j += len;
            }
        }
        if at(j, b'.') && digit(j + 1) {
            j += 1;
            while digit(j) {
                j += 1;
            }
        }
        at(j, b'Z').then_some(j + 1 - i)
    };
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        let word_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b"-.:".contains(&b[i - 1]));
        let word_after = |end: usize| b.get(end).is_some_and(|c| c.is_ascii_alphanumeric());
        if !word_before
            && digit(i)
            && let Some(len) = instant(i)
            && !word_after(i + len)
            && let Ok(t) = DateTime::parse_from_rfc3339(&text[i..i + len])
        {
            out.push_str(&text[copied..i]);
            out.push_str(&local_text(t.to_utc(), tz));
            i += len;
            copied = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}

pub use fire::{Fire, FireNote, FireRule};
pub use policy::{Anchor, DstFold, DstGap, NonBusinessDay};

#[cfg(test)]
mod tests {
    use super::*;

    /// The digit-by-digit writer says what chrono says, over a spread of
    /// instants (every field at its edges, sub-millisecond parts dropped),
    /// and leaves years outside 0–9999 and leap seconds to chrono; so does
    /// its whole-second form, [`rfc3339_secs`].
    #[test]
    fn local_rfc3339_secs_is_chronos_form() {
        use chrono::TimeZone;
        let zones = [
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "Asia/Kolkata",
            "America/St_Johns",
            "Pacific/Chatham",
            "Australia/Lord_Howe",
            "America/Sao_Paulo",
        ];
        let starts = [
            Utc.with_ymd_and_hms(2026, 3, 29, 0, 30, 0).unwrap(),
            Utc.with_ymd_and_hms(2026, 10, 25, 0, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(2026, 11, 1, 5, 0, 1).unwrap(),
            Utc.with_ymd_and_hms(1999, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0).unwrap(),
        ];
        for z in zones {
            let tz: chrono_tz::Tz = z.parse().unwrap();
            for s in starts {
                for k in 0..30 {
                    let at = s + chrono::TimeDelta::milliseconds(k * 1_234_567);
                    let chrono_form = tz
                        .from_utc_datetime(&at.naive_utc())
                        .to_rfc3339_opts(SecondsFormat::Secs, false);
                    assert_eq!(local_rfc3339_secs(at, tz), chrono_form, "{z} {at}");
                }
            }
        }
        // Local mean time: an offset with seconds, written by chrono.
        let tz: chrono_tz::Tz = "Europe/Amsterdam".parse().unwrap();
        let old = Utc.with_ymd_and_hms(1900, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(
            local_rfc3339_secs(old, tz),
            tz.from_utc_datetime(&old.naive_utc())
                .to_rfc3339_opts(SecondsFormat::Secs, false)
        );
    }

    #[test]
    fn rfc3339_is_chronos_millisecond_form() {
        let chrono_form = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
        let secs_form = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
        let mut ms: i64 = -62_167_219_200_000; // 0000-01-01T00:00:00Z
        let end = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
        let mut step: i64 = 1;
        while ms <= end {
            let t = DateTime::from_timestamp_millis(ms).expect("in range")
                + chrono::Duration::nanoseconds(ms.rem_euclid(997) * 1_000);
            assert_eq!(rfc3339(t), chrono_form(t), "{ms}");
            assert_eq!(rfc3339_secs(t), secs_form(t), "{ms}");
            ms += step;
            step = step * 3 + 7;
            if step > 86_400_000 * 40 {
                step = 1_234_567;
            }
        }
        for t in [
            DateTime::from_timestamp_millis(253_402_300_800_000).expect("year 10000"),
            DateTime::from_timestamp_millis(-62_167_219_200_001).expect("year -1"),
            DateTime::from_timestamp(1_780_000_019, 1_500_000_000).expect("leap second"),
        ] {
            assert_eq!(rfc3339(t), chrono_form(t));
            assert_eq!(rfc3339_secs(t), secs_form(t));
        }
        assert_eq!(
            rfc3339(DateTime::from_timestamp_millis(1_780_272_000_007).expect("instant")),
            "2026-06-01T00:00:00.007Z"
        );
    }

    #[test]
    fn stored_utc_instants_are_told_in_the_zone_and_keys_are_left_alone() {
        let sh = chrono_tz::Asia::Shanghai;
        assert_eq!(
            in_zone("circuit_open: probe after 2026-12-01T08:56:27.504Z", sh),
            "circuit_open: probe after 2026-12-01 16:56:27 +08:00"
        );
        assert_eq!(
            in_zone("expires=2026-12-01T12:47:00.000Z, from 2026-12-01T12:00:00Z.", sh),
            "expires=2026-12-01 20:47:00 +08:00, from 2026-12-01 20:00:00 +08:00."
        );
        assert_eq!(
            in_zone("2026-12-01T12:00:00Z", Tz::UTC),
            "2026-12-01 12:00:00 +00:00"
        );
        for key in [
            "window manual-2026-12-01T12:42:44Z due",
            "window 2026-12-01T20:42:30+08:00 opened",
            "window 2026-12-01 opened",
            "x2026-12-01T12:00:00Z",
            "2026-12-01T12:00:00Zulu",
            "…08:56:27Z is not whole",
        ] {
            assert_eq!(in_zone(key, sh), key);
        }
    }
}
