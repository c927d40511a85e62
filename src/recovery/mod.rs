//! Recovery rules (DESIGN.md "Recovery rules"): what happens after an attempt
//! failed, half ran or never ran.

pub mod alert;
pub mod catchup;
pub mod circuit;
pub mod classify;
pub mod retry;
