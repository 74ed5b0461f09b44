//! Server-sent events from a run's event stream, for any wire protocol. The engine
//! publishes one typed stream of events; each protocol at the edge supplies a
//! [`Translator`] from those events to its own, and this module does the rest the same
//! way for all: it ends the answer when the engine's stream breaks off, keeps a quiet
//! connection alive, and hands the stream over at shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::model::RunEvent;
use crate::store::StoreError;

/// Turns a run's events into one protocol's server-sent events.
pub trait Translator: Send + 'static {
    /// The events that stand for one of the run's: none, one or several.
    fn translate(&mut self, event: &RunEvent) -> Vec<Event>;

    /// The events that close the answer: after the run's stream ended (`broke` false) or
    /// broke off (`broke` true).
    fn finish(&mut self, broke: bool) -> Vec<Event> {
        let _ = broke;
        Vec::new()
    }
}

/// What an answer does when the process stops listening (`closing` cancelled): only
/// protocols whose clients reconnect hand their streams over.
pub enum Handover<'a> {
    /// The stream stays open until the shutdown deadline.
    Never,
    /// The stream ends with a comment that tells the client to reconnect, to another
    /// replica, with `Last-Event-ID`: the run goes on wherever it executes.
    Reconnect(&'a CancellationToken),
    /// The same, but not before the first event: a client that started a run must learn
    /// its id to follow it elsewhere.
    ReconnectAfterFirst(&'a CancellationToken),
}

/// The run's events, translated, as a `text/event-stream` answer with keep-alive
/// comments while the run is quiet, handed over at shutdown as `handover` says. A
/// stream whose run's last event was sent is never cut: its client is done.
pub fn sse(
    events: impl Stream<Item = Result<RunEvent, StoreError>> + Send + 'static,
    translator: impl Translator, handover: Handover<'_>,
) -> Response {
    let (closing, after_first) = match handover {
        Handover::Never => {
            let events = translated(events, translator);
            return Sse::new(events).keep_alive(KeepAlive::default()).into_response();
        }
        Handover::Reconnect(closing) => (closing.clone(), false),
        Handover::ReconnectAfterFirst(closing) => (closing.clone(), true),
    };
    let (ended, seen) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(!after_first)));
    let (ending, seeing) = (ended.clone(), seen.clone());
    let events = events.inspect(move |event| {
        seeing.store(true, Ordering::Relaxed);
        if event.as_ref().is_ok_and(RunEvent::ends_stream) {
            ending.store(true, Ordering::Relaxed);
        }
    });
    let cut = {
        let closing = closing.clone();
        move || {
            closing.is_cancelled() && seen.load(Ordering::Relaxed) && !ended.load(Ordering::Relaxed)
        }
    };
    // Shutdown cuts the stream once it may be cut (its first event sent, its last not):
    // until then each event polls this again.
    let mut cancelled = Box::pin(closing.cancelled_owned());
    let until = futures::future::poll_fn({
        let cut = cut.clone();
        move |cx| match cancelled.as_mut().poll(cx) {
            std::task::Poll::Ready(()) if cut() => std::task::Poll::Ready(()),
            _ => std::task::Poll::Pending,
        }
    });
    let events = translated(events, translator).take_until(until);
    let events = events.chain(
        futures::stream::once(
            async move { cut().then(|| Ok(Event::default().comment(RECONNECT))) },
        )
        .filter_map(futures::future::ready),
    );
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

/// The comment that ends an event stream cut off by shutdown.
pub const RECONNECT: &str = "shutting down: reconnect with Last-Event-ID";

/// The translated events, then the translator's closing ones.
fn translated(
    events: impl Stream<Item = Result<RunEvent, StoreError>> + Send + 'static,
    translator: impl Translator,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    let state = (Box::pin(events), Some(translator));
    futures::stream::unfold(state, |(mut events, mut translator)| async move {
        let mut open = translator.take()?;
        let (out, next) = match events.next().await {
            Some(Ok(event)) => (open.translate(&event), Some(open)),
            Some(Err(error)) => {
                tracing::warn!(%error, "a run's event stream broke off");
                (open.finish(true), None)
            }
            None => (open.finish(false), None),
        };
        Some((futures::stream::iter(out), (events, next)))
    })
    .flatten()
    .map(Ok)
}
