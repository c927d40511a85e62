//! A schedule's recovery policies: the `retry`, `circuit` and `budget` tables,
//! each starting from its documented default and checked for consistency
//! (`retry.initial` within `retry.max`, jitter a fraction, a positive cost cap).

use super::Loader;
use super::table::Tbl;
use crate::config::model::{Backoff, BudgetPolicy, CircuitPolicy, RetryPolicy};
use crate::time::duration::format_duration;

pub(super) const RETRY_KEYS: &[&str] = &["max_attempts", "backoff", "initial", "max", "jitter"];
pub(super) const CIRCUIT_KEYS: &[&str] = &["open_after", "cool_down"];
pub(super) const BUDGET_KEYS: &[&str] = &[
    "max_runtime",
    "max_tokens",
    "max_cost_per_day",
    "runtime_error_class",
];

impl Loader<'_> {
    pub(super) fn retry(&mut self, parent: &Tbl) -> Option<RetryPolicy> {
        let mut r = RetryPolicy::default();
        if !parent.has("retry") {
            return Some(r);
        }
        let t = self.opt_table(parent, "retry", format!("the `retry` table of {}", parent.label))?;
        self.check_keys(&t, RETRY_KEYS, &[], None);
        let mut ok = true;
        match self.opt_uint::<u32>(&t, "max_attempts", 1) {
            Some((n, _)) => r.max_attempts = n,
            None => ok &= !t.has("max_attempts"),
        }
        match self.opt_enum(
            &t,
            "backoff",
            &[("fixed", Backoff::Fixed), ("exponential", Backoff::Exponential)],
        ) {
            Some(b) => r.backoff = b,
            None => ok &= !t.has("backoff"),
        }
        let initial = self.opt_duration(&t, "initial");
        let max = self.opt_duration(&t, "max");
        match initial {
            Some((d, _)) => r.initial = d,
            None => ok &= !t.has("initial"),
        }
        match max {
            Some((d, _)) => r.max = d,
            None => ok &= !t.has("max"),
        }
        if ok && r.initial > r.max {
            let at = initial
                .map(|(_, at)| at)
                .or(max.map(|(_, at)| at))
                .unwrap_or(t.at);
            self.error_help(
                at,
                format!(
                    "`retry.initial` ({}) is longer than `retry.max` ({})",
                    format_duration(r.initial),
                    format_duration(r.max)
                ),
                Some("the first retry delay must not exceed the cap; lower `initial` or raise `max`".into()),
            );
            ok = false;
        }
        match self.opt_f64(&t, "jitter") {
            Some((j, _)) if (0.0..=1.0).contains(&j) => r.jitter = j,
            Some((j, at)) => {
                self.error_help(
                    at,
                    format!("`jitter` must be between 0 and 1, not {j:?}"),
                    Some("jitter is the fraction of the delay varied at random, e.g. 0.1".into()),
                );
                ok = false;
            }
            None => ok &= !t.has("jitter"),
        }
        ok.then_some(r)
    }

    pub(super) fn circuit(&mut self, parent: &Tbl) -> Option<CircuitPolicy> {
        let mut c = CircuitPolicy::default();
        if !parent.has("circuit") {
            return Some(c);
        }
        let t = self.opt_table(
            parent,
            "circuit",
            format!("the `circuit` table of {}", parent.label),
        )?;
        self.check_keys(&t, CIRCUIT_KEYS, &[], None);
        let mut ok = true;
        match self.opt_uint::<u32>(&t, "open_after", 1) {
            Some((n, _)) => c.open_after = n,
            None => ok &= !t.has("open_after"),
        }
        match self.opt_duration(&t, "cool_down") {
            Some((d, _)) => c.cool_down = d,
            None => ok &= !t.has("cool_down"),
        }
        ok.then_some(c)
    }

    pub(super) fn budget(&mut self, parent: &Tbl) -> Option<BudgetPolicy> {
        let mut b = BudgetPolicy::default();
        if !parent.has("budget") {
            return Some(b);
        }
        let t = self.opt_table(
            parent,
            "budget",
            format!("the `budget` table of {}", parent.label),
        )?;
        self.check_keys(&t, BUDGET_KEYS, &[], None);
        let mut ok = true;
        b.max_runtime = self.opt_positive_duration(&t, "max_runtime");
        ok &= b.max_runtime.is_some() || !t.has("max_runtime");
        b.max_tokens = self.opt_uint::<u64>(&t, "max_tokens", 1).map(|(n, _)| n);
        ok &= b.max_tokens.is_some() || !t.has("max_tokens");
        match self.opt_f64(&t, "max_cost_per_day") {
            Some((c, _)) if c > 0.0 => b.max_cost_per_day = Some(c),
            Some((c, at)) => {
                self.error(
                    at,
                    format!("`max_cost_per_day` must be greater than 0, not {c:?}"),
                );
                ok = false;
            }
            None => ok &= !t.has("max_cost_per_day"),
        }
        match self.opt_error_class(&t, "runtime_error_class") {
            Some(c) => b.runtime_error_class = c,
            None => ok &= !t.has("runtime_error_class"),
        }
        ok.then_some(b)
    }
}
