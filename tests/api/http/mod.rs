//! The API through the router in process: status codes, bodies and headers.

mod agents;
mod bad_input;
mod console;
mod items;
mod operations;
mod sessions;
