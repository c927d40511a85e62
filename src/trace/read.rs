//! Small questions asked of one typed event.

use crate::core::event::{Event, WindowFacts};

impl Event {
    /// The window facts of an event that opens or settles a window
    /// (`window_opened`, and `skipped` / `expired` of a window created already
    /// decided).
    pub fn window_facts(&self) -> Option<&WindowFacts> {
        match self {
            Event::WindowOpened { window, .. } => Some(window),
            Event::Skipped { window, .. } | Event::Expired { window, .. } => window.as_ref(),
            _ => None,
        }
    }
}
