mod lingering;
mod protocols;

use std::io;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use anyhow::Context as _;

use self::protocols::Protocols;
use crate::auth::Auth;
use crate::config::{describe_database, Config, StartupError, DEFAULT_LLM_URL};
use crate::http::{self, AppState};
use crate::llm::{LlmClient, OpenAiClient};
use crate::metrics::Metrics;
use crate::runs::Runs;
use crate::sealing::Sealer;
use crate::store::{self, SessionStore};
use crate::upkeep::{self, KeyCensus};

/// The service, bound and ready to serve. Binding happens in [`Application::build`], so
/// a caller that asked for port 0 learns the real port before serving starts.
pub struct Application {
    listener: TcpListener,
    router: Router,
    store: Arc<dyn SessionStore>,
    runs: Runs,
    metrics: Arc<Metrics>,
    key_census: Arc<KeyCensus>,
    draining: CancellationToken,
    closing: CancellationToken,
    sweep_every: Duration,
    census_every: Duration,
    /// How long a client may take to send request headers, and how long shutdown waits
    /// for requests in flight: the request time limit.
    patience: Duration,
    /// How long the listener stays open once shutdown begins.
    linger: Duration,
    startup: Startup,
}

/// What the start-up log line says the process is doing.
struct Startup {
    database: String,
    schema_version: Option<i64>,
    llm_base_url: String,
    llm_model: Option<String>,
    llm_key_missing: bool,
    workers: usize,
}

impl Startup {
    fn new(config: &Config) -> Self {
        let url = config.database_url();
        Self {
            database: describe_database(url),
            schema_version: store::schema_version(url),
            llm_base_url: config.llm_base_url.clone(),
            llm_model: config.llm_model.clone(),
            llm_key_missing: config.llm_api_key.as_ref().is_none_or(|key| key.expose().is_empty()),
            workers: config.run_workers,
        }
    }

    fn log(&self, addr: SocketAddr) {
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            %addr,
            database = %self.database,
            schema_version = self.schema_version,
            llm_base_url = %self.llm_base_url,
            llm_model = self.llm_model.as_deref().unwrap_or("(set per agent)"),
            workers = self.workers,
            "listening"
        );
        if self.llm_key_missing && self.llm_base_url.starts_with(DEFAULT_LLM_URL) {
            tracing::warn!(
                "runs go to {DEFAULT_LLM_URL} without LLM_API_KEY and will fail; set LLM_API_KEY, or LLM_BASE_URL for a local server"
            );
        }
    }
}

impl Application {
    pub async fn build(config: &Config) -> anyhow::Result<Self> {
        let url = config.database_url();
        let codec = config.payload_codec()?;
        let store = store::connect_with(url, config.store_options(codec))
            .await
            .with_context(|| format!("cannot open the database {}", describe_database(url)))?;
        Self::with_store(config, store).await
    }

    /// Builds the service on a store that is open already, with the LLM client
    /// `config` describes.
    pub async fn with_store(config: &Config, store: Arc<dyn SessionStore>) -> anyhow::Result<Self> {
        let llm = Arc::new(OpenAiClient::new(config.llm_settings())?);
        Self::with_parts(config, store, llm).await
    }

    /// Builds the service on a store and an LLM client of the caller's.
    pub async fn with_parts(
        config: &Config, store: Arc<dyn SessionStore>, llm: Arc<dyn LlmClient>,
    ) -> anyhow::Result<Self> {
        let state = state(config, store.clone(), llm)?;
        let runs = state.runs.clone();
        let (metrics, key_census) = (state.metrics.clone(), state.key_census.clone());
        let (draining, closing) = (state.draining.clone(), state.closing.clone());
        let auth_enabled = state.auth.enabled();
        let router = http::router(state, config)?;
        let listener = TcpListener::bind(&config.listen_addr).await.with_context(|| {
            format!(
                "cannot listen on {}; choose another address with --listen or LISTEN_ADDR",
                config.listen_addr
            )
        })?;
        let addr = listener.local_addr()?;
        if !auth_enabled && !addr.ip().is_loopback() && !config.allow_unauthenticated {
            return Err(StartupError::Unauthenticated(addr).into());
        }
        Ok(Self {
            listener,
            router,
            store,
            runs,
            metrics,
            key_census,
            draining,
            closing,
            sweep_every: Duration::from_secs(config.sweep_interval_secs),
            census_every: Duration::from_secs(config.key_census_interval_secs),
            patience: Duration::from_secs(config.request_timeout_secs),
            linger: Duration::from_secs(config.shutdown_delay_secs),
            startup: Startup::new(config),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, lets requests in flight
    /// finish and closes idle connections. A client that holds its connection longer
    /// than the request time limit is cut off, so shutdown always ends.
    pub async fn run(self, shutdown: CancellationToken) -> io::Result<()> {
        self.startup.log(self.local_addr()?);
        let upkeep = upkeep::spawn(
            self.store,
            self.metrics,
            self.key_census,
            self.sweep_every,
            self.census_every,
            shutdown.clone(),
        );
        let stop_workers = CancellationToken::new();
        let mut workers = self.runs.start_workers(stop_workers.clone());
        let protocols = Arc::new(Protocols::new(self.patience));
        let connections = GracefulShutdown::new();
        // From shutdown on, balancers asking `/readyz` stop sending, and clients open new
        // connections for their next requests; the listener stays open a while for the
        // requests sent meanwhile.
        let lingering = async {
            shutdown.cancelled().await;
            self.draining.cancel();
            tokio::time::sleep(self.linger).await;
        };
        tokio::pin!(lingering);
        loop {
            let stream = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        // Out of file descriptors, say: wait rather than spin.
                        tracing::warn!(%error, "cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut lingering => break,
            };
            let _ = stream.set_nodelay(true);
            let (protocols, router) = (protocols.clone(), self.router.clone());
            let (watcher, closing) = (connections.watcher(), self.closing.clone());
            tokio::spawn(async move { protocols.serve(stream, router, watcher, closing).await });
        }
        drop(self.listener);
        // Clients following runs are told to go on at another replica.
        self.closing.cancel();
        // One deadline for the requests in flight and the runs in hand together.
        let deadline = tokio::time::Instant::now() + self.patience;
        tokio::select! {
            _ = connections.shutdown() => {}
            _ = tokio::time::sleep_until(deadline) => {
                tracing::warn!("connections still open at the shutdown deadline are closed");
            }
        }
        shutdown.cancel();
        let _ = upkeep.await;
        // Runs in hand get what is left of the deadline; one cut off is claimed again
        // when its lease lapses.
        stop_workers.cancel();
        let runs = self.runs.clone();
        let drained = async move {
            while workers.join_next().await.is_some() {}
            runs.drain_started().await;
        };
        if tokio::time::timeout_at(deadline, drained).await.is_err() {
            tracing::warn!(
                "runs still executing at the shutdown deadline are left to their leases"
            );
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// The state the handlers share: the store, authentication, the run engine on `llm`
/// (its workers not started) and the metrics.
pub fn state(
    config: &Config, store: Arc<dyn SessionStore>, llm: Arc<dyn LlmClient>,
) -> Result<AppState, StartupError> {
    let metrics = Arc::new(Metrics::default());
    Ok(AppState {
        auth: Arc::new(Auth::new(&config.auth_settings()?, store.clone())),
        sealer: Arc::new(Sealer::new(store.clone(), config.keyring()?)),
        model_aliases: Arc::new(config.model_aliases.clone()),
        runs: Runs::new(store.clone(), llm, config.run_settings(), metrics.engine.clone()),
        store,
        metrics,
        key_census: Arc::new(KeyCensus::default()),
        run_wait: Duration::from_secs(config.run_wait_secs),
        draining: CancellationToken::new(),
        closing: CancellationToken::new(),
    })
}

/// A token cancelled by SIGTERM or Ctrl-C.
pub fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("a SIGTERM handler can be installed");
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down");
        cancel.cancel();
    });
    token
}
