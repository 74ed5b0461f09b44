//! The integration tests: one binary, so the crate and its dependencies link once.

mod helpers;
mod http;
mod process;
mod socket;
mod store;
