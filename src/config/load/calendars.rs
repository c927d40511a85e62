//! The `[calendars.NAME]` sections: weekend days, holidays (inline or from a
//! holidays file, whose own errors point into that file) and make-up workdays.

use super::table::Tbl;
use super::value::a_type;
use super::{Loader, Value};
use crate::config::diagnostic::Diagnostic;
use crate::time::calendar::{Calendar, parse_holidays_file, parse_weekday};
use chrono::{NaiveDate, Weekday};
use std::collections::BTreeMap;
use std::sync::Arc;
use toml::de::DeValue;

pub(super) const CALENDAR_KEYS: &[&str] = &["weekend", "holidays", "holidays_file", "workdays"];

impl Loader<'_> {
    pub(super) fn calendars(&mut self, root: &Tbl) -> BTreeMap<String, Arc<Calendar>> {
        let mut out = BTreeMap::new();
        for (name, t) in self.named_tables(root, "calendars") {
            self.check_keys(&t, CALENDAR_KEYS, &[], None);
            let mut ok = true;
            let weekend = match t.get("weekend") {
                None => vec![Weekday::Sat, Weekday::Sun],
                Some(v) => self.weekdays(v).unwrap_or_else(|| {
                    ok = false;
                    vec![]
                }),
            };
            let mut cal = Calendar::new(&name, &weekend);
            match self.opt_dates(&t, "holidays") {
                Some(dates) => cal.holidays.extend(dates),
                None => ok &= !t.has("holidays"),
            }
            if let Some((written, at)) = self.opt_str(&t, "holidays_file") {
                match self.holidays_file(&written, at) {
                    Some(dates) => cal.holidays.extend(dates),
                    None => ok = false,
                }
            } else {
                ok &= !t.has("holidays_file");
            }
            match self.opt_dates(&t, "workdays") {
                Some(dates) => cal.workdays.extend(dates),
                None => ok &= !t.has("workdays"),
            }
            if ok {
                out.insert(name, Arc::new(cal));
            }
        }
        out
    }

    fn weekdays(&mut self, v: &Value) -> Option<Vec<Weekday>> {
        self.array_of("weekend", v, "an array of weekdays", |l, item| {
            let text = match item.get_ref() {
                DeValue::String(s) => s.to_string(),
                DeValue::Integer(i) => i.as_str().to_string(),
                other => {
                    l.error(
                        item.span().start,
                        format!(
                            "a weekend day must be a weekday name or number, not {}",
                            a_type(other)
                        ),
                    );
                    return None;
                }
            };
            let day = parse_weekday(&text);
            if day.is_none() {
                l.error_help(
                    item.span().start,
                    format!("`{text}` is not a weekday"),
                    Some("use MON, TUE, WED, THU, FRI, SAT, SUN or 0-7 (0 and 7 are Sunday)".into()),
                );
            }
            day
        })
    }

    fn opt_dates(&mut self, t: &Tbl, key: &str) -> Option<Vec<NaiveDate>> {
        let v = t.get(key)?;
        self.array_of(key, v, "an array of dates", |l, item| {
            let text = match item.get_ref() {
                DeValue::String(s) => s.to_string(),
                DeValue::Datetime(d) => d.to_string(),
                other => {
                    l.error(
                        item.span().start,
                        format!(
                            "`{key}` entries must be dates like \"2026-10-01\", not {}",
                            a_type(other)
                        ),
                    );
                    return None;
                }
            };
            let date = NaiveDate::parse_from_str(&text, "%Y-%m-%d").ok();
            if date.is_none() {
                l.error(
                    item.span().start,
                    format!("`{text}` is not a date; expected YYYY-MM-DD"),
                );
            }
            date
        })
    }

    /// Reads a holidays file; its syntax errors are reported at its own line and
    /// column, and sorted where the config references it.
    fn holidays_file(&mut self, written: &str, at: usize) -> Option<Vec<NaiveDate>> {
        if written.trim().is_empty() {
            self.error(at, "`holidays_file` must not be empty");
            return None;
        }
        let path = self.resolve(written);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                self.error(at, format!("cannot read holidays file `{written}`: {e}"));
                return None;
            }
        };
        match parse_holidays_file(&text) {
            Ok(dates) => Some(dates),
            Err((line, col, message)) => {
                self.diags.push((
                    at,
                    Diagnostic {
                        file: self.display_path(written),
                        line,
                        col,
                        message,
                        help: None,
                    },
                ));
                None
            }
        }
    }
}
