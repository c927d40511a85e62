//! The SQLite text of the statements `store::db` runs around a transaction.

/// A transaction's change to the number of runs in one state, added once
/// before it commits (PostgreSQL's triggers keep the count there).
pub(crate) const ADD_RUN_COUNT: &str = "UPDATE run_counts SET n = n + ?2 WHERE state = ?1";

/// The fencing counter, moved on to the last token a transaction's claims took.
pub(crate) const SET_FENCING: &str = "UPDATE fencing SET token = ?1 WHERE id = 1 AND token < ?1";
