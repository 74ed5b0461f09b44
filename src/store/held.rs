//! Connections held out of the pool between uses by the most frequent work: reads of
//! pages of items, and the append queue's writer. sqlx pings every connection taken back
//! into its pool (to flush whatever a query dropped mid-way left on it): on Postgres a
//! round trip as long as a page read itself, paid on every read and every combined
//! append. A connection parked here after a use that finished is handed to the next
//! use as it is.
//!
//! `count` connections are held, and their users take turns on them: more connections
//! than that gave no more page reads on two cores (docs/benchmarks.md), the writer is
//! one task, and the pool's other connections stay free for the other writes, runs and
//! reads. A use that fails or is abandoned gives its connection back to the pool, which
//! checks it, unless the connection was readied for its use (see [`Prepare`]): that
//! one is closed.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
use sqlx::{Connection, Database, Pool};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::outage;

/// Readies a connection the pool gave for the use it is held for, such as a setting of
/// its own, which the pool's other work must not inherit.
pub(super) type Prepare<DB> =
    for<'c> fn(&'c mut <DB as Database>::Connection) -> BoxFuture<'c, Result<(), sqlx::Error>>;

pub(super) struct HeldConnections<DB: Database> {
    pool: Pool<DB>,
    parked: Mutex<Vec<(PoolConnection<DB>, Instant)>>,
    /// One permit per connection held; None when there are none (its users take the pool's).
    holds: Option<Semaphore>,
    /// How long a parked connection may have been idle and be used without a ping, as
    /// the pool's own check; None where connections cannot be dropped from the other end.
    ping_after_idle: Option<Duration>,
    prepare: Option<Prepare<DB>>,
}

/// A connection for one use: `keep` it when the use succeeded.
pub(super) struct HeldConnection<'a, DB: Database> {
    conn: Option<PoolConnection<DB>>,
    /// Where the connection is parked after the use; None for one of the pool's.
    hold: Option<(SemaphorePermit<'a>, &'a HeldConnections<DB>)>,
}

impl<DB: Database> HeldConnections<DB> {
    pub(super) fn new(
        pool: Pool<DB>, count: usize, ping_after_idle: Option<Duration>,
        prepare: Option<Prepare<DB>>,
    ) -> Self {
        Self {
            pool,
            parked: Mutex::new(Vec::new()),
            holds: (count > 0).then(|| Semaphore::new(count)),
            ping_after_idle,
            prepare,
        }
    }

    /// A held connection once one is free (taken from the pool the first time). Waits
    /// no longer than the pool's acquire timeout, as a connection of the pool's would.
    pub(super) async fn take(&self) -> Result<HeldConnection<'_, DB>, sqlx::Error> {
        let Some(holds) = &self.holds else {
            return Ok(HeldConnection { conn: Some(self.pool.acquire().await?), hold: None });
        };
        let taken = async {
            let permit = holds.acquire().await.expect("never closed");
            Ok::<_, sqlx::Error>((permit, self.ready().await?))
        };
        let wait = self.pool.options().get_acquire_timeout();
        let (permit, conn) =
            tokio::time::timeout(wait, taken).await.map_err(|_| sqlx::Error::PoolTimedOut)??;
        Ok(HeldConnection { conn: Some(conn), hold: Some((permit, self)) })
    }

    /// A parked connection fit for use, or a new one from the pool.
    async fn ready(&self) -> Result<PoolConnection<DB>, sqlx::Error> {
        if self.pool.is_closed() {
            // Parked connections go back to a closing pool, which waits for them.
            self.parked.lock().expect("never poisoned").clear();
            return Err(sqlx::Error::PoolClosed);
        }
        let parked = self.parked.lock().expect("never poisoned").pop();
        let unchecked = |since: Instant| {
            self.ping_after_idle.is_none_or(|window| !outage::needs_check(since.elapsed(), window))
        };
        match parked {
            Some((conn, since)) if unchecked(since) => Ok(conn),
            Some((mut conn, _)) => {
                if conn.ping().await.is_ok() {
                    return Ok(conn);
                }
                // Given back (or closed) before a replacement is asked for, so that it
                // does not hold the slot the replacement needs; the pool's check closes
                // it.
                drop(conn);
                self.acquire().await
            }
            None => self.acquire().await,
        }
    }

    /// A connection from the pool, readied for its use.
    async fn acquire(&self) -> Result<PoolConnection<DB>, sqlx::Error> {
        let mut conn = self.pool.acquire().await?;
        if let Some(prepare) = self.prepare {
            conn.close_on_drop();
            prepare(&mut conn).await?;
        }
        Ok(conn)
    }

    /// Connections parked between uses: idle, though the pool counts them as in use.
    pub(super) fn parked(&self) -> u32 {
        self.parked.lock().expect("never poisoned").len() as u32
    }
}

impl<DB: Database> HeldConnection<'_, DB> {
    /// Parks the connection for the next use; the use of it completed. A closing pool
    /// gets it back instead, as it waits for all of its connections.
    pub(super) fn keep(mut self) {
        if let (Some(conn), Some((_permit, home))) = (self.conn.take(), self.hold.take()) {
            if home.pool.is_closed() {
                return;
            }
            let mut parked = home.parked.lock().expect("never poisoned");
            parked.push((conn, Instant::now()));
        }
    }
}

impl<DB: Database> Deref for HeldConnection<'_, DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &Self::Target {
        self.conn.as_deref().expect("present until kept")
    }
}

impl<DB: Database> DerefMut for HeldConnection<'_, DB> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.conn.as_deref_mut().expect("present until kept")
    }
}
