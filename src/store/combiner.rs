//! Group commit for appends: appends that arrive while one commit is in flight wait in a
//! queue, and the next commit takes them all, to any sessions, as one transaction and
//! one flush of the log. An append is answered only after the commit that holds it.
//!
//! One writer task per store drains the queue, so combined transactions never overlap:
//! each session's appends commit in the order they reached the queue, their seqs
//! contiguous. A combined transaction that fails before its commit is rolled back and
//! its appends are made again one by one, so a request the database rejects fails
//! alone.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use super::{Appended, Result, StoreError};
use crate::model::{IdempotencyKey, ItemBody, SessionId};

/// The most appends one transaction combines, and the most item text: a batch is
/// bounded in memory and in how long it holds its sessions' row locks.
const MAX_APPENDS: usize = 256;
const MAX_BYTES: usize = 8 * 1024 * 1024;

/// How many appends may wait for the writer before a new one waits to be queued.
const QUEUE: usize = 4096;

/// One append request, checked already and ready to be written.
pub(super) struct Append {
    pub tenant: String,
    pub session_id: SessionId,
    pub bodies: Vec<ItemBody>,
    pub idempotency: Option<IdempotencyKey>,
}

impl Append {
    fn bytes(&self) -> usize {
        self.bodies.iter().map(|b| b.as_str().len()).sum()
    }

    /// Two appends with one key cannot share a transaction: the second must see the
    /// first's answer.
    fn key(&self) -> Option<(&str, &str)> {
        self.idempotency.as_ref().map(|key| (self.tenant.as_str(), key.key.as_str()))
    }
}

/// What a combined transaction that did not commit leaves behind.
pub(super) enum BatchFailed {
    /// A statement failed and the transaction was rolled back: nothing of it was
    /// written, so each append can be made again alone.
    BeforeCommit(StoreError),
    /// The commit itself failed: whether it took effect is unknown, so no append of it
    /// may be made again without its client's say (an idempotent retry).
    AtCommit(StoreError),
}

/// How a backend writes appends.
#[async_trait]
pub(super) trait Appender: Send + Sync + 'static {
    /// Writes one append in a transaction of its own.
    async fn append_one(&self, append: &Append) -> Result<Appended>;

    /// Writes the appends in one transaction. `None` for an append is one its backend
    /// would rather make alone after the commit: a retry of an idempotency key that an
    /// earlier request claimed.
    async fn append_many(
        &self,
        appends: &[Append],
    ) -> std::result::Result<Vec<Option<Appended>>, BatchFailed>;
}

/// Counts for the metrics endpoint, from the start of the process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendStats {
    /// Transactions the writer committed or tried, combined or not.
    pub transactions: u64,
    /// Appends those transactions held.
    pub appends: u64,
    /// Combined transactions rolled back and made again one append at a time.
    pub fallbacks: u64,
}

#[derive(Default)]
struct Counters {
    transactions: AtomicU64,
    appends: AtomicU64,
    fallbacks: AtomicU64,
}

struct Waiting {
    append: Append,
    reply: oneshot::Sender<Result<Appended>>,
}

/// The queue in front of a store's appends, and its writer task.
pub(super) struct Combiner {
    queue: mpsc::Sender<Waiting>,
    counters: Arc<Counters>,
}

impl Combiner {
    /// Starts the writer task on the current runtime; it ends when the combiner is
    /// dropped and the queue is empty.
    pub fn start(appender: impl Appender) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters::default());
        tokio::spawn(write(appender, waiting, counters.clone()));
        Self { queue, counters }
    }

    /// Queues the append and waits for the commit that holds it.
    pub async fn append(&self, append: Append) -> Result<Appended> {
        let (reply, answer) = oneshot::channel();
        self.queue.send(Waiting { append, reply }).await.map_err(|_| writer_gone())?;
        answer.await.map_err(|_| writer_gone())?
    }

    pub fn stats(&self) -> AppendStats {
        AppendStats {
            transactions: self.counters.transactions.load(Ordering::Relaxed),
            appends: self.counters.appends.load(Ordering::Relaxed),
            fallbacks: self.counters.fallbacks.load(Ordering::Relaxed),
        }
    }
}

/// The writer task stopped (its runtime is shutting down): the append was not made.
fn writer_gone() -> StoreError {
    StoreError::Database(sqlx::Error::WorkerCrashed)
}

async fn write(
    appender: impl Appender,
    mut queue: mpsc::Receiver<Waiting>,
    counters: Arc<Counters>,
) {
    let mut held_back = VecDeque::new();
    loop {
        let first = match held_back.pop_front() {
            Some(waiting) => waiting,
            None => match queue.recv().await {
                Some(waiting) => waiting,
                None => return,
            },
        };
        let (appends, replies): (Vec<Append>, Vec<_>) = gather(first, &mut held_back, &mut queue)
            .into_iter()
            .map(|w| (w.append, w.reply))
            .unzip();
        counters.transactions.fetch_add(1, Ordering::Relaxed);
        counters.appends.fetch_add(appends.len() as u64, Ordering::Relaxed);
        let answers = if appends.len() == 1 {
            vec![appender.append_one(&appends[0]).await]
        } else {
            combine(&appender, &appends, &counters).await
        };
        for (reply, answer) in replies.into_iter().zip(answers) {
            // A client that went away meanwhile misses only the answer.
            let _ = reply.send(answer);
        }
    }
}

/// Writes the appends in one transaction, or one by one when it fails before its commit.
async fn combine(
    appender: &impl Appender,
    appends: &[Append],
    counters: &Counters,
) -> Vec<Result<Appended>> {
    match appender.append_many(appends).await {
        Ok(results) => {
            let mut answers = Vec::with_capacity(appends.len());
            for (append, result) in appends.iter().zip(results) {
                answers.push(match result {
                    Some(appended) => Ok(appended),
                    None => appender.append_one(append).await,
                });
            }
            answers
        }
        Err(BatchFailed::BeforeCommit(error)) => {
            counters.fallbacks.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, appends = appends.len(), "a combined append failed; making its appends one by one");
            let mut answers = Vec::with_capacity(appends.len());
            for append in appends {
                answers.push(appender.append_one(append).await);
            }
            answers
        }
        Err(BatchFailed::AtCommit(error)) => {
            tracing::error!(%error, appends = appends.len(), "the commit of a combined append failed");
            let message = error.to_string();
            appends
                .iter()
                .map(|_| {
                    Err(StoreError::Database(sqlx::Error::Io(std::io::Error::other(
                        message.clone(),
                    ))))
                })
                .collect()
        }
    }
}

/// The batch that starts with `first`: what else is queued, up to the limits. An append
/// whose idempotency key is in the batch already waits for the next one.
fn gather(
    first: Waiting,
    held_back: &mut VecDeque<Waiting>,
    queue: &mut mpsc::Receiver<Waiting>,
) -> Vec<Waiting> {
    let mut bytes = first.append.bytes();
    let mut batch = vec![first];
    let mut keys: HashSet<(String, String)> = HashSet::new();
    if let Some((tenant, key)) = batch[0].append.key() {
        keys.insert((tenant.to_owned(), key.to_owned()));
    }
    let mut earlier = std::mem::take(held_back);
    let mut later = Vec::new();
    while batch.len() < MAX_APPENDS && bytes < MAX_BYTES {
        let Some(next) = earlier.pop_front().or_else(|| queue.try_recv().ok()) else {
            break;
        };
        if let Some((tenant, key)) = next.append.key() {
            if !keys.insert((tenant.to_owned(), key.to_owned())) {
                later.push(next);
                continue;
            }
        }
        bytes += next.append.bytes();
        batch.push(next);
    }
    // What the limits left of the earlier held-back appends goes first next time.
    held_back.extend(earlier);
    held_back.extend(later);
    batch
}
