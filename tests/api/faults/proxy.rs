//! A TCP proxy between the service and its database that injects the faults of a
//! network: a peer that goes silent behind an open socket, and a blackhole that holds
//! every byte (of open and new connections) until it heals. It is also the one address
//! in front of a failover pair, moved to the promoted standby.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

#[derive(Clone, Copy, Default)]
struct Faults {
    /// Connections numbered up to this one are silent for good.
    silent_through: u64,
    blackhole: bool,
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

    /// What the blackhole held passes, and everything after it.
    pub fn heal(&self) {
        self.faults.send_modify(|f| f.blackhole = false);
    }
}

async fn accept(
    listener: TcpListener,
    target: Arc<Mutex<String>>,
    faults: Arc<watch::Sender<Faults>>,
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

/// Forwards what `from` sends while the faults let the connection pass; ends with
/// either side, or when the proxy is dropped.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    connection: u64,
    mut faults: watch::Receiver<Faults>,
) {
    let mut buffer = vec![0; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if faults.wait_for(|f| f.passes(connection)).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
