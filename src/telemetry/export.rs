//! The OTLP exporter, configured as every OpenTelemetry SDK is: by `OTEL_*` variables.

use anyhow::Context as _;
use opentelemetry::{Key, KeyValue};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

/// The tracer provider, or None when traces are off: no endpoint is set, or
/// `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`.
pub(super) fn provider() -> anyhow::Result<Option<SdkTracerProvider>> {
    let set = |name| std::env::var(name).is_ok_and(|value| !value.trim().is_empty());
    let is = |name, value: &str| std::env::var(name).is_ok_and(|v| v.trim() == value);
    let endpoint = set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    if !endpoint || is("OTEL_SDK_DISABLED", "true") || is("OTEL_TRACES_EXPORTER", "none") {
        return Ok(None);
    }
    // The endpoint, headers, timeout, sampler and batching are read from the variables.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .context("OTEL_EXPORTER_OTLP_ENDPOINT: cannot build the trace exporter")?;
    Ok(Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource())
            .build(),
    ))
}

/// The process as traces name it: by `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`,
/// and where they are silent by this service's name and version and an id of this replica.
fn resource() -> Resource {
    let detected = Resource::builder().build();
    let unset = |key: &'static str| {
        detected.get(&Key::new(key)).is_none_or(|v| v.as_str().starts_with("unknown_service"))
    };
    let defaults = [
        ("service.name", env!("CARGO_PKG_NAME").to_owned()),
        ("service.version", env!("CARGO_PKG_VERSION").to_owned()),
        ("service.instance.id", uuid::Uuid::now_v7().to_string()),
    ];
    let missing = defaults.into_iter().filter(|(key, _)| unset(key));
    Resource::builder()
        .with_attributes(missing.map(|(key, value)| KeyValue::new(key, value)))
        .build()
}
