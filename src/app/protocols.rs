//! Which HTTP a connection speaks: HTTP/1.1, or HTTP/2 with prior knowledge, told from
//! the first bytes the client sent, peeked without taking them. hyper-util's own
//! detection reads up to the 24 bytes of HTTP/2's preface and hands them to HTTP/1 as
//! one read; the rest of the request head then no longer fits the 8 KiB read buffer
//! beside them, and the buffer doubles to 16 KiB for the life of the connection, which
//! for a client following a run is the run's. Peeked, the head is read whole at once.

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::Watcher;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::lingering::Lingering;

/// What an HTTP/2 client with prior knowledge sends first.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub(super) struct Protocols {
    http1: auto::Builder<TokioExecutor>,
    http2: auto::Builder<TokioExecutor>,
    /// For a client whose first bytes begin the preface and stop short of it: hyper-util
    /// reads on until it can tell.
    either: auto::Builder<TokioExecutor>,
    /// How long a client may take to send a request's head, its first bytes included.
    patience: Duration,
}

impl Protocols {
    pub(super) fn new(patience: Duration) -> Self {
        let mut either = auto::Builder::new(TokioExecutor::new());
        // Without a timer hyper applies no header timeout: a client could hold a
        // connection forever by sending its headers slowly.
        either.http1().timer(TokioTimer::new()).header_read_timeout(patience);
        let (http1, http2) = (either.clone().http1_only(), either.clone().http2_only());
        Self { http1, http2, either, patience }
    }

    /// Serves the connection until it closes, or until `watcher`'s shutdown closes it. A
    /// client that sends nothing within the patience, or before the server begins to
    /// close, is let go (the watcher would hold the shutdown back).
    pub(super) async fn serve(
        &self, stream: TcpStream, router: Router, watcher: Watcher, closing: CancellationToken,
    ) {
        let mut first = [0; PREFACE.len()];
        let peek = tokio::time::timeout(self.patience, stream.peek(&mut first));
        let Some(Ok(Ok(peeked))) = closing.run_until_cancelled(peek).await else {
            return;
        };
        let first = &first[..peeked];
        let builder = if first == PREFACE {
            &self.http2
        } else if !first.is_empty() && PREFACE.starts_with(first) {
            &self.either
        } else {
            &self.http1
        };
        let io = TokioIo::new(Lingering::new(stream));
        let connection = builder.serve_connection(io, TowerToHyperService::new(router));
        if let Err(error) = watcher.watch(connection).await {
            tracing::debug!(%error, "connection ended with an error");
        }
    }
}
