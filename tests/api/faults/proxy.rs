//! A TCP proxy between the service and its database that injects the faults of a
//! network: a peer that goes silent behind an open socket, a blackhole that holds every
//! byte (of open and new connections) until it heals, every open connection closed at
//! once, and latency. It is also the one address
//! in front of a failover pair, moved to the promoted standby.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

#[derive(Clone, Copy, Default)]
struct Faults {
    /// Connections numbered up to this one are silent for good.
    silent_through: u64,
    blackhole: bool,
    /// Connections numbered up to this one are reset.
    reset_through: u64,
    /// How long each chunk waits before it is passed on.
    delay: std::time::Duration,
}

impl Faults {
    fn passes(&self, connection: u64) -> bool {
        !self.blackhole && connection > self.silent_through
    }
}

pub struct FaultProxy {
    pub port: u16,
    target: Arc<Mutex<String>>,
    faults: Arc<watch::Sender<Faults>>,
    opened: Arc<AtomicU64>,
    _accepting: AbortOnDropHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let faults = Arc::new(watch::Sender::new(Faults::default()));
        let opened = Arc::new(AtomicU64::new(0));
        let target = Arc::new(Mutex::new(target));
        let accepting =
            tokio::spawn(accept(listener, target.clone(), faults.clone(), opened.clone()));
        Self { port, target, faults, opened, _accepting: AbortOnDropHandle::new(accepting) }
    }

    /// New connections go to `target` from now on.
    pub fn move_to(&self, target: String) {
        *self.target.lock().unwrap() = target;
    }

    /// Every connection open now stops answering, and never answers again; its socket
    /// stays open. New connections pass.
    pub fn silence_open_connections(&self) {
        let last = self.opened.load(Ordering::SeqCst);
        self.faults.send_modify(|f| f.silent_through = last);
    }

    /// No byte passes, on any connection, until `heal`.
    pub fn blackhole(&self) {
        self.faults.send_modify(|f| f.blackhole = true);
    }

    /// Every connection open now is closed under its client; new ones pass.
    pub fn reset_open_connections(&self) {
        let last = self.opened.load(Ordering::SeqCst);
        self.faults.send_modify(|f| f.reset_through = last);
    }

    /// Each chunk, either way, waits `delay` before it is passed on.
    pub fn delay(&self, delay: std::time::Duration) {
        self.faults.send_modify(|f| f.delay = delay);
    }

    /// What the blackhole held passes, and everything after it.
    pub fn heal(&self) {
        self.faults.send_modify(|f| f.blackhole = false);
    }
}

async fn accept(
    listener: TcpListener, target: Arc<Mutex<String>>, faults: Arc<watch::Sender<Faults>>,
    opened: Arc<AtomicU64>,
) {
    while let Ok((client, _)) = listener.accept().await {
        let number = opened.fetch_add(1, Ordering::SeqCst) + 1;
        let target = target.lock().unwrap().clone();
        let Ok(server) = TcpStream::connect(&target).await else {
            continue;
        };
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        tokio::spawn(pump(client_read, server_write, number, faults.subscribe()));
        tokio::spawn(pump(server_read, client_write, number, faults.subscribe()));
    }
}

/// Forwards what `from` sends, each chunk after the delay and while the faults let the
/// connection pass; ends with either side, at a reset, or when the proxy is dropped.
async fn pump(
    mut from: OwnedReadHalf, mut to: OwnedWriteHalf, connection: u64,
    faults: watch::Receiver<Faults>,
) {
    // Chunks wait out the delay side by side, as packets on a slow link do.
    let (chunks, mut pending) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let delays = faults.clone();
    let reading = async move {
        let mut buffer = vec![0; 16 * 1024];
        while let Ok(read @ 1..) = from.read(&mut buffer).await {
            let due = Instant::now() + delays.borrow().delay;
            if chunks.send((due, buffer[..read].to_vec())).is_err() {
                return;
            }
        }
    };
    let mut gate = faults.clone();
    let writing = async move {
        while let Some((due, chunk)) = pending.recv().await {
            tokio::time::sleep_until(due).await;
            if gate.wait_for(|f| f.passes(connection)).await.is_err() {
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
    };
    let mut resets = faults;
    tokio::select! {
        _ = async { tokio::join!(reading, writing) } => {}
        _ = resets.wait_for(|f| f.reset_through >= connection) => {}
    }
}
