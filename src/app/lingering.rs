//! Lingering close. A response sent before the request's body was read (413 for a body
//! over the limit, 404 for no such route, 401, 415) ends the connection with that body
//! still arriving; closing the socket then makes the kernel answer the unread bytes with
//! a reset, and a client still sending never reads the answer. So a connection, once
//! the server is done with it, shuts down its sending side (the client sees the
//! response end) and reads and discards what the client still sends, within bounds,
//! before it closes.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// The most a closing connection reads and discards, and for how long.
const DISCARD_BYTES: usize = 64 * 1024 * 1024;
const DISCARD_FOR: Duration = Duration::from_secs(5);

/// The most connections that linger at once: past it, one closes at once, so that
/// clients closing many connections cannot hold descriptors for long.
const MOST_LINGERING: usize = 1024;
static LINGERING: AtomicUsize = AtomicUsize::new(0);

/// A client's connection that lingers when it is dropped.
pub(super) struct Lingering(Option<TcpStream>);

impl Lingering {
    pub(super) fn new(stream: TcpStream) -> Self {
        Self(Some(stream))
    }

    fn stream(self: Pin<&mut Self>) -> Pin<&mut TcpStream> {
        Pin::new(self.get_mut().0.as_mut().expect("present until dropped"))
    }
}

impl AsyncRead for Lingering {
    fn poll_read(
        self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.stream().poll_read(cx, buf)
    }
}

impl AsyncWrite for Lingering {
    fn poll_write(
        self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.stream().poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.stream().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.as_ref().is_some_and(TcpStream::is_write_vectored)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_shutdown(cx)
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let Some(stream) = self.0.take() else {
            return;
        };
        // A runtime that is shutting down drops the connection as it is.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if LINGERING.fetch_add(1, Ordering::Relaxed) >= MOST_LINGERING {
            LINGERING.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        runtime.spawn(async move {
            discard_then_close(stream).await;
            LINGERING.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

async fn discard_then_close(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut buffer = vec![0; 16 * 1024];
    let discard = async {
        let mut left = DISCARD_BYTES;
        while left > 0 {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(read) => left = left.saturating_sub(read),
            }
        }
    };
    let _ = tokio::time::timeout(DISCARD_FOR, discard).await;
}
