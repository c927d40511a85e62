//! Recovery rules (DESIGN.md "Recovery rules"): what happens after an attempt
//! failed, half ran or never ran. The policies themselves are pure and live in
//! [`crate::core::recovery`] (re-exported here); this module keeps what does
//! IO: sending alerts.

pub mod alert;
pub use crate::core::recovery::{catchup, circuit, classify, retry};
