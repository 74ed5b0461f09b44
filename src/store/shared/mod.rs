//! What the two backends share: the flows of the store, written once.
//!
//! Postgres and SQLite run the same statements (SQLite accepts `$1` parameters too)
//! with different sqlx types, so a generic function would need a bound for every type
//! it binds, and query results have no common trait. These macros stamp the shared
//! flows out for each backend instead; a backend module supplies only what differs by
//! dialect (row locks, multi-row inserts, JSON containment, the run queue's claim, new
//! ids and snapshots in SQL).

mod agents;
mod api_keys;
mod at_rest;
mod compactions;
mod runs;
mod sessions;

pub(crate) use agents::agent_store;
pub(crate) use api_keys::api_key_store;
pub(crate) use at_rest::at_rest_store;
pub(crate) use compactions::compaction_store;
pub(crate) use runs::run_store;
pub(crate) use sessions::session_store;
