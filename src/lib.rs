//! agent-sessions: a durable, multi-tenant store for AI-agent conversation sessions,
//! served over HTTP.

/// Builds the state, router and background tasks, and serves them until shutdown.
pub mod app;
/// Who is calling: API keys, tenants and rate limits.
pub mod auth;
/// Command line and environment configuration.
pub mod config;
/// The HTTP API: routing, middleware, extractors, the error format and one module per resource.
pub mod http;
/// `agent-sessions keys`: API keys made, listed and revoked from the command line.
pub mod key_commands;
/// The LLM client the run worker calls: a trait and its OpenAI-compatible implementation.
pub mod llm;
/// The metrics registry, below both the HTTP layer and the upkeep tasks that record into it.
pub mod metrics;
/// The domain types shared by the store and the API, with their validation rules.
pub mod model;
/// `agent-sessions reencrypt`: stored values rewritten under the newest key.
pub mod reencrypt;
/// The run engine: the worker pool that claims queued runs, calls the LLM, runs tools and
/// commits turns, and the streams of run events.
pub mod runs;
/// Values handed to clients sealed, to take back: opaque, tamper-evident, tenant-bound.
pub mod sealing;
/// Values that logs must not show.
pub mod secret;
/// Persistence behind the `SessionStore` trait, for Postgres and SQLite.
pub mod store;
/// Logging set-up.
pub mod telemetry;
/// Background upkeep: the sweeper of expired sessions and the count of values per key.
pub mod upkeep;
