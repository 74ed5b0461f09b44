use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::http::{self, AppState, Metrics};
use crate::model::IdempotencyKey;
use crate::store::{self, SessionStore};

/// How often expired idempotency keys are purged.
const PURGE_INTERVAL: Duration = Duration::from_secs(3600);

/// The service, bound and ready to serve. Binding happens in [`Application::build`], so
/// a caller that asked for port 0 learns the real port before serving starts.
pub struct Application {
    listener: TcpListener,
    router: Router,
    store: Arc<dyn SessionStore>,
}

impl Application {
    pub async fn build(config: &Config) -> anyhow::Result<Self> {
        let store = store::connect(config.database_url(), config.database_max_connections).await?;
        Self::with_store(config, store).await
    }

    /// Builds the service on a store that is open already.
    pub async fn with_store(config: &Config, store: Arc<dyn SessionStore>) -> anyhow::Result<Self> {
        let state = AppState {
            store: store.clone(),
            metrics: Arc::new(Metrics::default()),
        };
        let router = http::router(state, config)?;
        let listener = TcpListener::bind(&config.listen_addr).await?;
        Ok(Self {
            listener,
            router,
            store,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is cancelled, then lets requests in flight finish.
    pub async fn run(self, shutdown: CancellationToken) -> io::Result<()> {
        tracing::info!(addr = %self.local_addr()?, "listening");
        let purger = tokio::spawn(purge_idempotency_keys(self.store, shutdown.clone()));
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned())
            .await?;
        shutdown.cancel();
        let _ = purger.await;
        tracing::info!("stopped");
        Ok(())
    }
}

async fn purge_idempotency_keys(store: Arc<dyn SessionStore>, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(PURGE_INTERVAL);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        let cutoff = chrono::Utc::now() - IdempotencyKey::ttl();
        match store.purge_idempotency_keys(cutoff).await {
            Ok(purged) => tracing::debug!(purged, "purged expired idempotency keys"),
            Err(error) => tracing::warn!(%error, "cannot purge expired idempotency keys"),
        }
    }
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
