//! `calendar`: the window's local date (in the schedule's timezone) is a business
//! day of the named calendar, or of the schedule's own calendar.

use super::{Gate, GateContext, GateOutcome};

pub struct CalendarGate {
    name: String,
    /// `None`: the schedule's calendar.
    calendar: Option<String>,
}

impl CalendarGate {
    pub fn new(name: String, calendar: Option<String>) -> Self {
        Self { name, calendar }
    }
}

impl Gate for CalendarGate {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "calendar"
    }

    fn check(&self, ctx: &GateContext<'_>) -> GateOutcome {
        let Some(name) = self.calendar.as_deref().or(ctx.schedule.calendar.as_deref()) else {
            return GateOutcome::wait("no calendar: name one on the gate or the schedule");
        };
        let Some(cal) = ctx.calendars.get(name) else {
            return GateOutcome::wait(format!("unknown calendar {name}"));
        };
        let date = ctx
            .window_start
            .with_timezone(&ctx.schedule.timezone)
            .date_naive();
        match cal.why_not(date) {
            None => GateOutcome::pass(format!("{date} is a business day in calendar {name}")),
            // A non-business day will not become one by waiting: a real fail, so
            // on_fail = "skip" can skip it.
            Some(why) => GateOutcome::fail(why),
        }
    }
}
