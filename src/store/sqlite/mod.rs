//! The ledger in SQLite's words: the text of every fixed statement of the
//! store, by area (the module of `store` that runs it). PostgreSQL's text of
//! the same statements is in `store::pg::sql`, under the same names.

pub(crate) mod attempts;
pub(crate) mod backlog;
pub(crate) mod config_versions;
pub(crate) mod engine_queries;
pub(crate) mod events;
pub(crate) mod ledger;
pub(crate) mod operator;
pub(crate) mod registry;
pub(crate) mod runs;
pub(crate) mod status;
