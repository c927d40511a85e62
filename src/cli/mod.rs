//! Command-line verbs. Each verb lives in its own file and returns an exit code:
//! 0 ok; 1 what was checked does not hold; 2 usage error or nothing could be opened.

pub mod check;
pub mod next;

/// Exit codes of DESIGN.md "Command line".
pub mod exit {
    pub const OK: i32 = 0;
    pub const DOES_NOT_HOLD: i32 = 1;
    pub const USAGE: i32 = 2;
}
