//! What the two backends share: the flows of the store, written once.
//!
//! Postgres and SQLite run the same statements (SQLite accepts `$1` parameters too) with
//! different sqlx types, so a function generic over the database would need a bound for
//! every type it binds or reads, repeated on every function (Rust does not carry a
//! trait's `where` clauses to its users). Instead each backend mounts this folder as a
//! module of its own (`#[path]` in `postgres/mod.rs` and `sqlite/mod.rs`): the code here
//! is compiled once for each, with that backend's types, as plain Rust that the compiler,
//! rustfmt and an editor all read.
//!
//! `backend` is the backend that mounts it. What the flows take from it is what differs
//! by dialect:
//! - `Db` and `Store`: its sqlx database and its store, which has `writer()`, `reader()`
//!   and `pools()`, and the fields `codec`, `default_expiry`, `appends`, `creations`,
//!   `page_readers` and `append_writer`; `MIGRATOR`, its schema;
//! - `FOR_UPDATE`, `FOR_NO_KEY_UPDATE` and `SKIP_LOCKED`, the row locks its transactions
//!   and sweeps take, if any; `NOW`, its SQL for the current time; `touch`, the SQL that records activity;
//!   `json_members`, the rows of a JSON object's members;
//! - `insert_items` and `appends::append_many`, how it writes one append's items and a
//!   combined batch of appends; `push_listed_sessions`, a listing's sessions and the
//!   metadata filter over them;
//! - `new_id` and `SNAPSHOT`, ids made in SQL and a fork's one snapshot;
//! - `runs::{insert_run, write_run, save_events}`, the statements of runs that differ;
//!   `claims::{claim_next, finish}`, the queue's claim and a finish that may claim the
//!   worker's next run with it; `run_batch::{upsert_run_sessions, insert_runs}`, how it
//!   writes a combined batch of run creations;
//! - `RowId`, `ROW_ID`, `ROW_READ`, `ROW_BIND`, `FIRST_ROW` and `count_by_key_id`, the
//!   physical row order `reencrypt` walks and the count of stored values per key id.

mod agents;
mod api_keys;
mod append_writer;
pub(super) mod appends;
mod at_rest;
pub(super) mod binds;
mod checkpoint_deletes;
mod checkpoint_reads;
mod checkpoints;
mod compactions;
mod creation_writer;
mod deliveries;
pub(super) mod documents;
mod forks;
mod idempotency_keys;
mod item_changes;
mod items;
mod owners;
pub(super) mod run_creation;
mod run_store;
pub(super) mod runs;
mod session_store;
mod sessions;
mod state;
mod steering;
mod store;

/// The backend that mounts this folder.
use super::{self as backend};

/// A connection of the backend: the steps that a flow composes within one transaction
/// take one.
type Conn = <backend::Db as sqlx::Database>::Connection;
