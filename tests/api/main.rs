//! The integration tests: one binary, so the crate and its dependencies link once.

mod auth;
mod docs;
mod fake_llm;
mod faults;
mod helpers;
mod history;
mod http;
mod llm;
mod process;
mod runs;
mod socket;
mod state;
mod store;
