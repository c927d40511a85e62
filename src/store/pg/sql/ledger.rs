//! The PostgreSQL text of the statements of `store::ledger`.

pub(crate) const ADD_RUN_COUNT: &str = "UPDATE run_counts SET n = n + $2 WHERE state = $1";

pub(crate) const SET_FENCING: &str = "UPDATE fencing SET token = $1 WHERE id = 1 AND token < $1";
