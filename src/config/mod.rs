//! Every option of the service, each a flag and an environment variable.

mod command_line;
mod model_aliases;
mod redaction;
mod settings;

use clap::{Parser, Subcommand};

use crate::secret::Secret;
use crate::telemetry::LogFormat;
pub use model_aliases::ModelAliases;
pub use redaction::{describe_database, DatabaseUrl};
pub use settings::StartupError;

/// Where runs go unless `LLM_BASE_URL` says otherwise.
pub const DEFAULT_LLM_URL: &str = "https://api.openai.com/v1";

/// The command line. Every option can also be given as an environment variable.
#[derive(Debug, Parser)]
#[command(
    name = "agent-sessions",
    version,
    about = "Keeps AI-agent conversation sessions and serves them over HTTP",
    after_help = "Logging: RUST_LOG filters log lines (e.g. `RUST_LOG=agent_sessions=debug,info`; default `info`)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub config: Config,
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Serve the HTTP API (the default).
    Serve,
    /// Apply the database migrations and exit.
    Migrate,
    /// Manage API keys in the database.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Rewrite every stored value not under the first key of ENCRYPTION_KEYS, batch by
    /// batch in short transactions. Safe beside a running service; after a kill, run it
    /// again and it goes on where it stopped.
    Reencrypt {
        /// Values per transaction.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        batch: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum KeysCommand {
    /// Create an API key for a tenant and print it (it is shown only this once).
    Create {
        /// The tenant the key acts for: 1-64 of A-Za-z0-9_.-
        #[arg(long)]
        tenant: String,
        /// What the key is for, to tell keys apart.
        #[arg(long)]
        name: String,
        /// `read`, or `read,write` (the default).
        #[arg(long, value_delimiter = ',', value_parser = ["read", "write"])]
        scopes: Vec<String>,
    },
    /// List the keys (never their secrets), oldest first, as tab-separated columns.
    List {
        /// Only the keys of this tenant.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Revoke a key by its id; replicas that looked it up trust it for up to
    /// AUTH_CACHE_SECS more.
    Revoke {
        /// The key's id, as `keys list` or `keys create` shows it.
        key_id: uuid::Uuid,
    },
}

/// Its `Debug` output, which the log shows at start, hides every secret.
#[derive(Debug, Clone, Parser)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long = "listen", env = "LISTEN_ADDR", default_value = "127.0.0.1:8080", global = true)]
    pub listen_addr: String,

    /// `postgres://…` or `sqlite:…`; unset means the SQLite file `./agent-sessions.db`.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub database_url: Option<DatabaseUrl>,

    /// Largest number of connections to Postgres.
    #[arg(long, env = "DATABASE_MAX_CONNECTIONS", global = true, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub database_max_connections: u32,

    /// How many seconds one database operation may take before it fails with 503
    /// `database_unavailable`: a database out of reach fails requests this fast.
    #[arg(long, env = "DATABASE_TIMEOUT_SECS", global = true, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub database_timeout_secs: u64,

    /// Log lines for people (`pretty`) or for machines (`json`).
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty, global = true)]
    pub log_format: LogFormat,

    /// Request bodies larger than this many bytes are refused with 413.
    #[arg(long, env = "MAX_BODY_BYTES", global = true, default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// A session's state document may hold at most this many bytes, serialized; a
    /// write that would make it larger is refused with 413.
    #[arg(long, env = "MAX_STATE_BYTES", global = true, default_value_t = 1024 * 1024)]
    pub max_state_bytes: usize,

    /// A request that takes longer than this many seconds is answered with 503.
    #[arg(long, env = "REQUEST_TIMEOUT_SECS", global = true, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_secs: u64,

    /// After SIGTERM, how many seconds the service goes on accepting requests while
    /// `/readyz` answers 503, so that balancers stop sending before it stops listening.
    #[arg(long, env = "SHUTDOWN_DELAY_SECS", global = true, default_value_t = 2)]
    pub shutdown_delay_secs: u64,

    /// Origins allowed to call the API from a browser, comma-separated; `*` allows any.
    #[arg(long, env = "CORS_ALLOWED_ORIGINS", global = true, value_delimiter = ',')]
    pub cors_allowed_origins: Vec<String>,

    /// The OpenAI-compatible API runs call, up to and including `/v1`.
    #[arg(
        long,
        env = "LLM_BASE_URL",
        global = true,
        default_value = DEFAULT_LLM_URL
    )]
    pub llm_base_url: String,

    /// Sent as `Authorization: Bearer …`; local servers usually need none.
    #[arg(long, env = "LLM_API_KEY", global = true, hide_env_values = true)]
    pub llm_api_key: Option<Secret>,

    /// The model of runs whose agent names none.
    #[arg(long, env = "LLM_MODEL", global = true)]
    pub llm_model: Option<String>,

    /// `requested=upstream,…`: the model the OpenAI-compatible routes send upstream for
    /// a requested name; `*=upstream` for every other name. Without an alias the name is
    /// sent as given.
    #[arg(long, env = "MODEL_ALIASES", global = true, value_parser = ModelAliases::parse, default_value = "")]
    pub model_aliases: ModelAliases,

    /// Retries of an LLM call after 429, 5xx, connection errors and timeouts.
    #[arg(long, env = "LLM_MAX_RETRIES", global = true, default_value_t = 3)]
    pub llm_max_retries: u32,

    /// Seconds to wait for the LLM's response headers, or between two streamed chunks.
    #[arg(long, env = "LLM_IDLE_TIMEOUT_SECS", global = true, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub llm_idle_timeout_secs: u64,

    /// Seconds one LLM call may take in all.
    #[arg(long, env = "LLM_TIMEOUT_SECS", global = true, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub llm_timeout_secs: u64,

    /// Worker tasks executing runs in this process; 0 leaves the runs to other replicas.
    #[arg(long, env = "RUN_WORKERS", global = true, default_value_t = 4)]
    pub run_workers: usize,

    /// Megabytes of memory a process may hold in session histories kept prepared between
    /// runs, so that a run reads only the items appended since the last; 0 reads every
    /// run's history whole.
    #[arg(long, env = "HISTORY_CACHE_MB", global = true, default_value_t = 64)]
    pub history_cache_mb: u64,

    /// Seconds a worker's claim on a run lasts unless renewed.
    #[arg(long, env = "RUN_LEASE_SECS", global = true, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub run_lease_secs: u64,

    /// Claims of one run before a lost worker fails it with `worker_lost`.
    #[arg(long, env = "RUN_MAX_ATTEMPTS", global = true, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub run_max_attempts: u32,

    /// Seconds a run created without `stream` or `background` is waited for before the
    /// answer is 202 with the run as it stands.
    #[arg(long, env = "RUN_WAIT_SECS", global = true, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub run_wait_secs: u64,

    /// Hosts (`host` or `host:port`) webhook tools may call, comma-separated; empty
    /// refuses every webhook tool.
    #[arg(long, env = "TOOL_WEBHOOK_ALLOWED_HOSTS", global = true, value_delimiter = ',')]
    pub tool_webhook_allowed_hosts: Vec<String>,

    /// Seconds one request to an MCP server may take (opening its session, listing its
    /// tools, one tool call); a call cut off is cancelled at the server.
    #[arg(long, env = "MCP_CALL_TIMEOUT_SECS", global = true, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub mcp_call_timeout_secs: u64,

    /// Signs completion webhooks as Standard Webhooks do (a `whsec_` base64 secret, or
    /// any other string as its bytes); unset refuses runs and agents with a `webhook`.
    #[arg(long, env = "WEBHOOK_SIGNING_SECRET", global = true, hide_env_values = true)]
    pub webhook_signing_secret: Option<Secret>,

    /// Turns authentication on: every `/v1` request then needs an API key, and this key
    /// (at least 32 characters) manages them.
    #[arg(long, env = "ADMIN_API_KEY", global = true, hide_env_values = true)]
    pub admin_api_key: Option<Secret>,

    /// Serve without authentication on an address other than loopback.
    #[arg(long, env = "ALLOW_UNAUTHENTICATED", global = true)]
    pub allow_unauthenticated: bool,

    /// Seconds a looked-up API key is trusted before it is looked up again: how long a
    /// key revoked on another replica keeps working here.
    #[arg(long, env = "AUTH_CACHE_SECS", global = true, default_value_t = 5)]
    pub auth_cache_secs: u64,

    /// Requests per second each API key may make (bursts of twice that); unset is no limit.
    #[arg(long, env = "RATE_LIMIT_PER_KEY", global = true)]
    pub rate_limit_per_key: Option<std::num::NonZeroU32>,

    /// `key_id:BASE64_32_BYTES,…`: encrypt what conversations say at rest with the first
    /// key (AES-256-GCM); every listed key decrypts. Unset stores values in plain.
    #[arg(long, env = "ENCRYPTION_KEYS", global = true, hide_env_values = true)]
    pub encryption_keys: Option<Secret>,

    /// Runs of one tenant that may execute at once, across replicas; unset is no limit.
    #[arg(long, env = "TENANT_MAX_ACTIVE_RUNS", global = true)]
    pub tenant_max_active_runs: Option<std::num::NonZeroU32>,

    /// Seconds of inactivity after which a session created without `expires_after` is
    /// deleted; unset keeps sessions until they are deleted.
    #[arg(long, env = "SESSION_EXPIRES_AFTER_SECS", global = true,
          value_parser = clap::value_parser!(u64).range(1..=crate::model::MAX_EXPIRES_AFTER_SECS))]
    pub session_expires_after_secs: Option<u64>,

    /// Seconds between two passes of the sweeper, which deletes expired sessions and
    /// idempotency keys older than 24 hours.
    #[arg(long, env = "SWEEP_INTERVAL_SECS", global = true, default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub sweep_interval_secs: u64,

    /// Seconds between two counts of the stored values per encryption key id, which
    /// `/metrics` and `/readyz` report (a scan of every payload column).
    #[arg(long, env = "KEY_CENSUS_INTERVAL_SECS", global = true, default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub key_census_interval_secs: u64,
}

impl Config {
    /// The database to use: `DATABASE_URL`, or the SQLite file of the embedded default.
    pub fn database_url(&self) -> &str {
        self.database_url.as_ref().map_or("sqlite://agent-sessions.db", DatabaseUrl::expose)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_may_follow_the_subcommand() {
        let cli = Cli::parse_from([
            "agent-sessions",
            "serve",
            "--request-timeout-secs",
            "5",
            "--max-body-bytes",
            "10",
        ]);
        assert_eq!((cli.config.request_timeout_secs, cli.config.max_body_bytes), (5, 10));
    }

    #[test]
    fn sqlite_file_is_the_default_database() {
        let mut cli = Cli::parse_from(["agent-sessions", "migrate"]);
        assert_eq!(cli.command, Some(Command::Migrate));
        // The environment of a test run may name a database; the default applies without.
        cli.config.database_url = None;
        assert_eq!(cli.config.database_url(), "sqlite://agent-sessions.db");
    }
}
