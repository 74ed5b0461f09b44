//! Server-sent events from a run's event stream, for any wire protocol. The engine
//! publishes one typed stream of events; each protocol at the edge supplies a
//! [`Translator`] from those events to its own, and this module does the rest the same
//! way for all: it ends the answer when the engine's stream breaks off and keeps a quiet
//! connection alive.

use std::convert::Infallible;
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

/// The run's events, translated, as a `text/event-stream` answer with keep-alive
/// comments while the run is quiet. When `closing` is given and cancelled (the process
/// stops listening) the answer ends with a comment instead, so that the client
/// reconnects, to another replica, with `Last-Event-ID`: the run goes on wherever it
/// executes. The cut comes after the first event at the earliest (a client that started
/// a run learns its id) and never after the last (a client that saw the end does not come
/// back for it). Only protocols whose clients reconnect so give it.
pub fn sse(
    events: impl Stream<Item = Result<RunEvent, StoreError>> + Send + 'static,
    translator: impl Translator,
    closing: Option<&CancellationToken>,
) -> Response {
    let Some(closing) = closing.cloned() else {
        let events = translated(events, translator);
        return Sse::new(events).keep_alive(KeepAlive::default()).into_response();
    };
    let ended = closing.clone().cancelled_owned();
    let whole = Arc::new(AtomicBool::new(false));
    let finished = whole.clone();
    let rest = translated(events, translator).chain(
        futures::stream::once(async move {
            finished.store(true, Ordering::Relaxed);
            None
        })
        .filter_map(futures::future::ready),
    );
    let mut ended = Some(ended);
    let events =
        futures::stream::once(Box::pin(rest).into_future()).flat_map(move |(first, rest)| {
            let ended = ended.take().expect("one first event");
            futures::stream::iter(first).chain(rest.take_until(ended))
        });
    let events = events.chain(
        futures::stream::once(async move {
            let cut = closing.is_cancelled() && !whole.load(Ordering::Relaxed);
            cut.then(|| Ok(Event::default().comment(RECONNECT)))
        })
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
