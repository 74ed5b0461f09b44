//! W3C trace context across processes: a caller's `traceparent` continued, the current
//! one stored with queued work and sent with outgoing calls. With traces off there is no
//! current context, and each of these does nothing.

use std::collections::HashMap;
use std::time::SystemTime;

use axum::http::HeaderMap;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, TraceContextExt, Tracer as _};
use opentelemetry::{global, Context, KeyValue};
use opentelemetry_http::HeaderInjector;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

const TRACEPARENT: &str = "traceparent";

/// Makes `span`, not yet entered, continue the trace of the `traceparent` a caller sent.
/// Its `tracestate` is left out: a header value that spans would carry on.
pub fn continue_from(span: &Span, headers: &HeaderMap) {
    if let Some(traceparent) = headers.get(TRACEPARENT).and_then(|v| v.to_str().ok()) {
        follow(span, traceparent);
    }
}

/// Makes `span`, not yet entered, continue the trace of a stored [`traceparent`].
pub fn follow(span: &Span, traceparent: &str) {
    let parent = stored(traceparent);
    if parent.span().span_context().is_valid() {
        // Only a span the trace layer sees can take a parent; with traces off none does.
        let _ = span.set_parent(parent);
    }
}

/// Marks the work of `span` failed, with an `error.type` of few values; the span must
/// have declared both fields.
pub fn failed(span: &Span, error_type: &str) {
    span.record("otel.status_code", "error");
    span.record("error.type", error_type);
}

/// Records a span that began before the trace it belongs to was known: `parent` is a
/// stored [`traceparent`]; it ends now.
pub fn record_span(
    name: &'static str, began: SystemTime, parent: Option<&str>, attributes: Vec<KeyValue>,
) {
    let parent = parent.map_or_else(Context::new, stored);
    let tracer = global::tracer(env!("CARGO_PKG_NAME"));
    let builder = tracer.span_builder(name).with_start_time(began).with_attributes(attributes);
    builder.start_with_context(&tracer, &parent).end();
}

/// The current `traceparent`, to store with work another process may pick up.
pub fn traceparent() -> Option<String> {
    let mut fields = HashMap::new();
    TraceContextPropagator::new().inject_context(&Context::current(), &mut fields);
    fields.remove(TRACEPARENT)
}

/// Adds the current `traceparent` to an outgoing call's headers.
pub fn inject(headers: &mut HeaderMap) {
    TraceContextPropagator::new().inject_context(&Context::current(), &mut HeaderInjector(headers));
}

fn stored(traceparent: &str) -> Context {
    let fields = HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
    TraceContextPropagator::new().extract(&fields)
}
