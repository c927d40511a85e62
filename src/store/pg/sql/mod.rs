//! The ledger in PostgreSQL's words: the text of every fixed statement of
//! the store, by area, under the names SQLite's text has in `store::sqlite`.

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
