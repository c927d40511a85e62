//! The stored text of the trace's busiest events — a window opening, its
//! decision when every switch was clear and no gate ran, a claim, a start, a
//! success — written straight into one string. They are most of the JSON a
//! lifecycle writes, and serde's path for them (`flatten` goes through a map,
//! every key is escaped again) was about a tenth of a rehearsal's
//! instructions. The text is byte for byte what serde writes
//! (`Event::to_row_text` falls back to serde for everything else, and the
//! tests compare the two).

use super::decision::SwitchCheck;
use super::event::{DecisionRecord, Event, Opener, WindowFacts};
use chrono::{DateTime, Utc};

/// The detail's JSON text of `e`, when it is one of the events written here.
pub(crate) fn detail(e: &Event) -> Option<String> {
    let mut out = JsonText(String::with_capacity(192));
    match e {
        Event::Claimed {
            due,
            claimed,
            owner,
            attempt,
            token,
            lateness_ms,
        } => {
            out.instant("{\"due\":", *due);
            out.instant(",\"claimed\":", *claimed);
            out.str(",\"owner\":", owner);
            out.num(",\"attempt\":", *attempt);
            out.num(",\"token\":", *token);
            out.num(",\"lateness_ms\":", *lateness_ms);
        }
        Event::Started {
            attempt,
            token,
            reason,
            agent,
            verify_step,
            timeout_ms,
            lateness_ms,
        } => {
            out.num("{\"attempt\":", *attempt);
            out.num(",\"token\":", *token);
            out.str(",\"reason\":", reason.as_str());
            out.str(",\"agent\":", agent);
            out.opt_str(",\"verify_step\":", verify_step.as_deref());
            out.num(",\"timeout_ms\":", *timeout_ms);
            if let Some(l) = lateness_ms {
                out.num(",\"lateness_ms\":", *l);
            }
        }
        Event::Succeeded {
            attempt,
            summary,
            processed,
        } => {
            out.num("{\"attempt\":", *attempt);
            out.opt_str(",\"summary\":", summary.as_deref());
            match processed {
                Some(n) => out.num(",\"processed\":", *n),
                None => out.0.push_str(",\"processed\":null"),
            }
        }
        Event::WindowOpened {
            window,
            reason,
            opener,
        } if *opener == Opener::default() => {
            out.window(window);
            out.str(",\"reason\":", reason.as_str());
        }
        Event::Decision(d) if d.gates.is_empty() && d.switches.iter().all(clear) => out.decision(d),
        _ => return None,
    }
    out.0.push('}');
    Some(out.0)
}

/// Whether `bytes` hold a `"`, a `\\` or a control character, eight bytes
/// at a time (the byte-at-a-time check was most of writing a string).
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Whether any byte of `w` is zero (exact as a yes or no).
    let zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGH != 0;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        let w = u64::from_le_bytes(word);
        // A byte below 0x20, or equal to '"' or '\\'.
        if w.wrapping_sub(ONES * 0x20) & !w & HIGH != 0 || zero(w ^ (ONES * 0x22)) || zero(w ^ (ONES * 0x5c))
        {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// A switch stored as its name alone (see `event::compact_switches`).
fn clear(c: &SwitchCheck) -> bool {
    !c.held && c.reason == "clear"
}

/// JSON text written field by field (also the agent's envelope, see
/// `agent::envelope`).
pub(crate) struct JsonText(pub(crate) String);

impl JsonText {
    pub(crate) fn num(&mut self, key: &str, n: impl JsonNum) {
        self.0.push_str(key);
        n.push_to(&mut self.0);
    }

    /// An instant as [`crate::time::rfc3339`] writes it (nothing in it to
    /// escape), written in place.
    pub(crate) fn instant(&mut self, key: &str, t: DateTime<Utc>) {
        self.0.reserve(key.len() + 26);
        self.0.push_str(key);
        self.0.push('"');
        crate::time::push_rfc3339(&mut self.0, t);
        self.0.push('"');
    }

    pub(crate) fn opt_str(&mut self, key: &str, s: Option<&str>) {
        match s {
            Some(s) => self.str(key, s),
            None => {
                self.0.push_str(key);
                self.0.push_str("null");
            }
        }
    }

    /// A JSON string as serde_json writes it: only `"`, `\` and control
    /// characters are escaped, so text without them is copied as it is.
    pub(crate) fn str(&mut self, key: &str, s: &str) {
        self.0.reserve(key.len() + s.len() + 2);
        self.0.push_str(key);
        if !needs_escape(s.as_bytes()) {
            self.0.push('"');
            self.0.push_str(s);
            self.0.push('"');
        } else {
            // A string always serializes.
            self.0.push_str(&serde_json::to_string(s).unwrap_or_default());
        }
    }

    /// `WindowFacts` flattened into the event's object (its fields first).
    fn window(&mut self, w: &WindowFacts) {
        self.str("{\"window_key\":", &w.window_key);
        self.instant(",\"start\":", w.start);
        self.instant(",\"end\":", w.end);
        self.instant(",\"due\":", w.due);
        if let Some(note) = &w.note {
            self.str(",\"note\":", note);
        }
        self.str(",\"pool\":", w.pool.as_str());
    }

    fn decision(&mut self, d: &DecisionRecord) {
        self.str("{\"time\":", &d.time);
        self.0.push_str(",\"switches\":[");
        for (i, c) in d.switches.iter().enumerate() {
            self.str(if i == 0 { "" } else { "," }, c.name.as_str());
        }
        self.0.push_str("],\"gates\":[]");
        self.str(",\"verdict\":", d.verdict.as_str());
        self.str(",\"reason\":", &d.reason);
    }
}

/// A number (or boolean) as JSON writes it, digit by digit: through
/// `core::fmt` it was most of writing a number.
pub(crate) trait JsonNum {
    fn push_to(self, out: &mut String);
}

impl JsonNum for u64 {
    fn push_to(self, out: &mut String) {
        let mut buf = [0u8; 20];
        let mut at = buf.len();
        let mut v = self;
        loop {
            at -= 1;
            buf[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        // ASCII digits only.
        out.push_str(std::str::from_utf8(&buf[at..]).unwrap_or_default());
    }
}

impl JsonNum for i64 {
    fn push_to(self, out: &mut String) {
        if self < 0 {
            out.push('-');
        }
        self.unsigned_abs().push_to(out);
    }
}

impl JsonNum for u32 {
    fn push_to(self, out: &mut String) {
        u64::from(self).push_to(out);
    }
}

impl JsonNum for usize {
    fn push_to(self, out: &mut String) {
        (self as u64).push_to(out);
    }
}

impl JsonNum for bool {
    fn push_to(self, out: &mut String) {
        out.push_str(if self { "true" } else { "false" });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_json_writes_them() {
        let text = |n: &dyn Fn(&mut String)| {
            let mut s = String::new();
            n(&mut s);
            s
        };
        for v in [0, 1, -1, 9, 10, -10, 1234567890, i64::MIN, i64::MAX] {
            assert_eq!(text(&|s| v.push_to(s)), serde_json::to_string(&v).unwrap());
        }
        for v in [0, 7, 99_999, u64::MAX] {
            assert_eq!(text(&|s| v.push_to(s)), serde_json::to_string(&v).unwrap());
        }
        assert_eq!(text(&|s| u32::MAX.push_to(s)), u32::MAX.to_string());
        assert_eq!(text(&|s| 42usize.push_to(s)), "42");
        assert_eq!(text(&|s| true.push_to(s)), "true");
        assert_eq!(text(&|s| false.push_to(s)), "false");
    }
    use crate::core::decision::{SwitchName, Verdict};
    use crate::core::records::{Pool, RunReason};

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(ms).expect("in range")
    }

    /// Texts a person or an agent may write, quotes and controls among them.
    const TEXTS: [&str; 7] = [
        "",
        "plain",
        "say \"hi\"",
        "back\\slash",
        "tab\there\nnewline \u{1} \u{7f}",
        "héllo — 日本 🙂",
        "2026-06-08T09:00+08:00",
    ];

    const REASONS: [RunReason; 6] = [
        RunReason::Scheduled,
        RunReason::Retry,
        RunReason::Catchup,
        RunReason::Manual,
        RunReason::Rehearsal,
        RunReason::Verify,
    ];

    const VERDICTS: [Verdict; 7] = [
        Verdict::Claim,
        Verdict::Wait,
        Verdict::Skip,
        Verdict::Fail,
        Verdict::Human,
        Verdict::Missed,
        Verdict::Expired,
    ];

    fn events() -> Vec<Event> {
        let mut all = vec![];
        for (i, text) in TEXTS.iter().enumerate() {
            let text = text.to_string();
            let some = |s: &String| (i % 2 == 0).then(|| s.clone());
            let reason = REASONS[i % REASONS.len()];
            all.push(Event::Claimed {
                due: at(1_780_000_000_000 + i as i64),
                claimed: at(1_780_000_000_123 * (i as i64 + 1)),
                owner: text.clone(),
                attempt: i as u32,
                token: -(i as i64) * 7,
                lateness_ms: i as i64 * 1000 - 3,
            });
            all.push(Event::Started {
                attempt: i as u32 + 1,
                token: i64::MAX - i as i64,
                reason,
                agent: text.clone(),
                verify_step: some(&text),
                timeout_ms: u64::MAX / (i as u64 + 1),
                lateness_ms: (i % 2 == 1).then_some(i as i64 * 10 - 5),
            });
            all.push(Event::Succeeded {
                attempt: 1,
                summary: some(&text),
                processed: (i % 3 != 0).then_some(i as i64 - 2),
            });
            for pool in [Pool::OnTime, Pool::Backfill] {
                all.push(Event::WindowOpened {
                    window: WindowFacts {
                        window_key: text.clone(),
                        start: at(0),
                        end: at(86_400_000 * 365 * 30 + i as i64),
                        due: at(-1000),
                        note: some(&text),
                        pool,
                    },
                    reason,
                    opener: Opener::default(),
                });
            }
            for verdict in VERDICTS {
                let switches = SwitchName::ALL[..(i + 1).min(SwitchName::ALL.len())]
                    .iter()
                    .map(|&name| SwitchCheck {
                        name,
                        held: false,
                        reason: "clear".into(),
                    })
                    .collect();
                all.push(Event::Decision(DecisionRecord {
                    time: text.clone(),
                    switches,
                    gates: vec![],
                    verdict,
                    reason: text.clone(),
                }));
            }
        }
        all
    }

    #[test]
    fn the_busiest_events_are_written_as_serde_writes_them() {
        let all = events();
        for e in &all {
            let kind = e.kind();
            let fast = detail(e).unwrap_or_else(|| panic!("{kind} is written here"));
            assert_eq!(fast, e.serde_row_text(kind).1, "{e:?}");
            assert_eq!(e.to_row_text(), (kind.to_string(), fast));
            // And it reads back as the same event.
            let value: serde_json::Value = serde_json::from_str(&e.to_row_text().1).expect("JSON");
            assert_eq!(&Event::from_row(kind, &value), e);
        }
        assert!(all.len() > 80);
    }

    #[test]
    fn a_string_needs_escaping_exactly_when_it_holds_a_quote_a_backslash_or_a_control() {
        for (len, filler) in
            (0..20).flat_map(|len| [b'a', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xff].map(|f| (len, f)))
        {
            for at in 0..len.max(1) {
                for b in 0u8..=255 {
                    let mut bytes = vec![filler; len];
                    if len > 0 {
                        bytes[at] = b;
                    }
                    let slow = bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
                    assert_eq!(needs_escape(&bytes), slow, "{bytes:?}");
                }
            }
        }
        assert!(!needs_escape("héllo 日本 🙂 ~\u{7f}".as_bytes()));
    }

    #[test]
    fn anything_else_is_left_to_serde() {
        let held = SwitchCheck {
            name: SwitchName::Quota,
            held: true,
            reason: "2 of 2 running".into(),
        };
        let mut gated = DecisionRecord {
            time: "t".into(),
            switches: vec![held],
            gates: vec![],
            verdict: Verdict::Wait,
            reason: "r".into(),
        };
        let opened = Event::WindowOpened {
            window: WindowFacts {
                window_key: "k".into(),
                start: at(0),
                end: at(1),
                due: at(0),
                note: None,
                pool: Pool::OnTime,
            },
            reason: RunReason::Manual,
            opener: Opener {
                by: Some("ops".into()),
                ..Opener::default()
            },
        };
        assert_eq!(detail(&Event::Decision(gated.clone())), None);
        gated.switches.clear();
        assert!(detail(&Event::Decision(gated)).is_some());
        assert_eq!(detail(&opened), None);
        assert_eq!(detail(&Event::Heartbeat { attempt: 1 }), None);
    }
}
