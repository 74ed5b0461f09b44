//! Logs, and traces over OTLP when the standard `OTEL_*` variables ask for them.
//!
//! Spans go to both unless their target says otherwise: [`TRACE_ONLY`] spans are the
//! request's as the HTTP conventions shape it, which logs need not repeat; [`LOG_ONLY`]
//! spans carry what a trace must not, such as the caller's request id (a header value).
//! Traces hold spans only: log events may quote what a caller sent.

mod export;
mod propagation;

use std::io::IsTerminal;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

pub use propagation::{continue_from, failed, follow, inject, record_span, traceparent};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people.
    Pretty,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// The target of spans that only traces carry.
pub const TRACE_ONLY: &str = "agent_sessions::trace";
/// The target of spans that only logs carry.
pub const LOG_ONLY: &str = "agent_sessions::log";

/// What must outlive the process's work: the trace exporter, flushed at [`Self::shutdown`].
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Sends the spans still buffered; waits for the exporter at most its timeout.
    pub async fn shutdown(self) {
        if let Some(provider) = self.provider {
            // The exporter's HTTP client blocks.
            let flushed = tokio::task::spawn_blocking(move || provider.shutdown()).await;
            if let Ok(Err(error)) = flushed {
                tracing::warn!(%error, "cannot send the last spans");
            }
        }
    }
}

/// Installs the global subscriber. `RUST_LOG` picks what is logged (default `info`, and
/// nothing of the MCP client's own lines: every failure of an MCP server is in the run's
/// items and spans);
/// traces are on when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is set.
pub fn init(format: LogFormat) -> anyhow::Result<Telemetry> {
    let logged = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,rmcp=off"))
        .add_directive(format!("{TRACE_ONLY}=off").parse().expect("a valid directive"));
    let provider = export::provider()?;
    let traces = provider.as_ref().map(|provider| {
        let tracer = provider.tracer(env!("CARGO_PKG_NAME"));
        opentelemetry::global::set_tracer_provider(provider.clone());
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_filter(filter_fn(traced).with_max_level_hint(Level::INFO))
    });
    let registry = tracing_subscriber::registry().with(traces);
    match format {
        // Colour codes only for a terminal: in a file or a log collector they are noise.
        LogFormat::Pretty => registry
            .with(fmt::layer().with_ansi(std::io::stdout().is_terminal()).with_filter(logged))
            .init(),
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_filter(logged),
            )
            .init(),
    }
    Ok(Telemetry { provider })
}

/// The service's own spans, but for those only logs carry.
fn traced(meta: &Metadata<'_>) -> bool {
    meta.is_span() && meta.target().starts_with("agent_sessions") && meta.target() != LOG_ONLY
}
