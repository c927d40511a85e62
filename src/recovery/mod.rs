//! Recovery rules (DESIGN.md "Recovery rules"): what happens after an attempt
//! failed, half ran or never ran.

pub mod classify;
