use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter};

use crate::config::LogFormat;

/// Installs the global subscriber. `RUST_LOG` picks what is logged (default `info`).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        // Colour codes only for a terminal: in a file or a log collector they are noise.
        LogFormat::Pretty => {
            registry.with(fmt::layer().with_ansi(std::io::stdout().is_terminal())).init()
        }
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false),
            )
            .init(),
    }
}
