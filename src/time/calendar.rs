//! Business calendars: weekend days, holidays and make-up workdays.

use chrono::{Datelike, NaiveDate, Weekday};
use std::collections::BTreeSet;

/// Which local dates are business days for a schedule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Calendar {
    pub name: String,
    /// Indexed by `Weekday::num_days_from_monday()`.
    pub weekend: [bool; 7],
    pub holidays: BTreeSet<NaiveDate>,
    /// Make-up working days: business days even when on a weekend.
    pub workdays: BTreeSet<NaiveDate>,
}

impl Calendar {
    pub fn new(name: &str, weekend: &[Weekday]) -> Self {
        let mut w = [false; 7];
        for d in weekend {
            w[d.num_days_from_monday() as usize] = true;
        }
        Self {
            name: name.to_string(),
            weekend: w,
            ..Default::default()
        }
    }

    pub fn is_business_day(&self, date: NaiveDate) -> bool {
        if self.workdays.contains(&date) {
            return true;
        }
        !self.weekend[date.weekday().num_days_from_monday() as usize] && !self.holidays.contains(&date)
    }

    /// The first business day strictly after `date`, within two years.
    pub fn next_business_day(&self, date: NaiveDate) -> Option<NaiveDate> {
        let mut d = date;
        for _ in 0..731 {
            d = d.succ_opt()?;
            if self.is_business_day(d) {
                return Some(d);
            }
        }
        None
    }

    /// Why `date` is not a business day, for skip reasons.
    pub fn why_not(&self, date: NaiveDate) -> Option<String> {
        if self.is_business_day(date) {
            None
        } else if self.holidays.contains(&date) {
            Some(format!("{date} is a holiday in calendar {}", self.name))
        } else {
            Some(format!(
                "{date} is a weekend day ({}) in calendar {}",
                date.weekday(),
                self.name
            ))
        }
    }
}

/// Parses a weekday name (`MON`, `monday`) or Unix number (0/7 = Sunday).
pub fn parse_weekday(s: &str) -> Option<Weekday> {
    match s.trim().to_ascii_lowercase().as_str() {
        "mon" | "monday" | "1" => Some(Weekday::Mon),
        "tue" | "tuesday" | "2" => Some(Weekday::Tue),
        "wed" | "wednesday" | "3" => Some(Weekday::Wed),
        "thu" | "thursday" | "4" => Some(Weekday::Thu),
        "fri" | "friday" | "5" => Some(Weekday::Fri),
        "sat" | "saturday" | "6" => Some(Weekday::Sat),
        "sun" | "sunday" | "0" | "7" => Some(Weekday::Sun),
        _ => None,
    }
}

/// Parses a holidays file: one `YYYY-MM-DD` per line, optionally followed by a
/// name; blank lines and `#` comments ignored. Errors carry the 1-based line and
/// column.
pub fn parse_holidays_file(text: &str) -> Result<Vec<NaiveDate>, (usize, usize, String)> {
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        let content = line.split('#').next().unwrap_or("");
        let trimmed = content.trim_start();
        if trimmed.trim().is_empty() {
            continue;
        }
        let col = content.len() - trimmed.len() + 1;
        let word = trimmed.split_whitespace().next().unwrap_or("");
        let date = NaiveDate::parse_from_str(word, "%Y-%m-%d")
            .map_err(|_| (i + 1, col, format!("`{word}` is not a date; expected YYYY-MM-DD")))?;
        out.push(date);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn weekend_holiday_and_makeup_day() {
        let mut c = Calendar::new("cn", &[Weekday::Sat, Weekday::Sun]);
        c.holidays.insert(d("2026-10-01"));
        c.workdays.insert(d("2026-09-27")); // a Sunday
        assert!(!c.is_business_day(d("2026-10-01")));
        assert!(c.is_business_day(d("2026-09-27")));
        assert!(!c.is_business_day(d("2026-10-03")));
        assert!(c.is_business_day(d("2026-09-30")));
        assert_eq!(c.next_business_day(d("2026-09-30")), Some(d("2026-10-02")));
        assert!(c.why_not(d("2026-10-01")).unwrap().contains("holiday"));
    }

    #[test]
    fn holidays_file_reports_line_and_column() {
        let ok = parse_holidays_file("# cn\n2026-10-01 National Day\n\n  2026-10-02\n").unwrap();
        assert_eq!(ok, vec![d("2026-10-01"), d("2026-10-02")]);
        let err = parse_holidays_file("2026-10-01\n  2026-13-01\n").unwrap_err();
        assert_eq!((err.0, err.1), (2, 3));
    }

    #[test]
    fn weekday_names_and_numbers() {
        assert_eq!(parse_weekday("SAT"), Some(Weekday::Sat));
        assert_eq!(parse_weekday("7"), Some(Weekday::Sun));
        assert_eq!(parse_weekday("0"), Some(Weekday::Sun));
        assert_eq!(parse_weekday("xx"), None);
    }
}
