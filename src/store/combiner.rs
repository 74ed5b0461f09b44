//! Group commit: writes (appends, run creations) that arrive while one commit is in
//! flight wait in a queue, and the next commit takes them all, to any sessions, as one
//! transaction and one flush of the log. A write is answered only after the commit that
//! holds it.
//!
//! One writer task per queue drains it, so combined transactions never overlap: each
//! session's appends commit in the order they reached the queue, their seqs contiguous.
//! A combined transaction that fails before its commit is rolled back and its writes are
//! made again one by one, so a request the database rejects fails alone.
//!
//! Each transaction has the store's deadline: a connection that stops answering (a
//! peer gone silent behind an open socket) fails the writes it holds and is dropped,
//! so that the writes queued behind it go on with a new one. A write whose client
//! stopped waiting before its transaction began is not made.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use super::deadline::within;
use super::{Result, StoreError};

/// The most writes one transaction combines, and the most item text: a batch is
/// bounded in memory and in how long it holds its sessions' row locks.
const MAX_WRITES: usize = 256;
const MAX_BYTES: usize = 8 * 1024 * 1024;

/// How many writes may wait for the writer before a new one waits to be queued.
const QUEUE: usize = 4096;

/// A write the combiner queues.
pub(super) trait Job: Send + Sync + 'static {
    /// What it adds to a batch's bytes.
    fn bytes(&self) -> usize;

    /// Two writes that name the same pair cannot share a transaction: the second must
    /// see the first's outcome.
    fn exclusive(&self) -> Option<(&str, &str)>;
}

/// What a combined transaction that did not commit leaves behind.
pub(super) enum BatchFailed {
    /// A statement failed and the transaction was rolled back: nothing of it was
    /// written, so each write can be made again alone.
    BeforeCommit(StoreError),
    /// The commit itself failed: whether it took effect is unknown, so no write of it
    /// may be made again without its client's say (an idempotent retry).
    AtCommit(StoreError),
}

/// How a backend commits one kind of write.
#[async_trait]
pub(super) trait Writer: Send + Sync + 'static {
    type Job: Job;
    type Done: Send + 'static;

    /// Writes one in a transaction of its own.
    async fn one(&self, job: &Self::Job) -> Result<Self::Done>;

    /// Writes one that a combined transaction left out or rolled back, as `one` unless
    /// the backend would rather its caller made it: these are made one after another
    /// while the queue waits.
    async fn again(&self, job: &Self::Job) -> Result<Self::Done> {
        self.one(job).await
    }

    /// Writes them in one transaction. `None` for a write is one its backend would
    /// rather make alone after the commit (a retry of an idempotency key that an
    /// earlier request claimed, say).
    async fn many(
        &self, jobs: &[Self::Job],
    ) -> std::result::Result<Vec<Option<Self::Done>>, BatchFailed>;
}

/// Counts for the metrics endpoint, from the start of the process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendStats {
    /// Transactions the writer committed or tried, combined or not.
    pub transactions: u64,
    /// Writes those transactions held.
    pub appends: u64,
    /// Combined transactions rolled back and made again one write at a time.
    pub fallbacks: u64,
}

#[derive(Default)]
struct Counters {
    transactions: AtomicU64,
    appends: AtomicU64,
    fallbacks: AtomicU64,
}

struct Waiting<J, D> {
    job: J,
    reply: oneshot::Sender<Result<D>>,
}

/// The queue in front of one kind of a store's writes, and its writer task.
pub(super) struct Combiner<J, D> {
    queue: mpsc::Sender<Waiting<J, D>>,
    counters: Arc<Counters>,
}

impl<J: Job, D: Send + 'static> Combiner<J, D> {
    /// Starts the writer task on the current runtime; it ends when the combiner is
    /// dropped and the queue is empty. A transaction that takes longer than `deadline`
    /// fails.
    pub fn start(writer: impl Writer<Job = J, Done = D>, deadline: Duration) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters::default());
        tokio::spawn(write(writer, waiting, counters.clone(), deadline));
        Self { queue, counters }
    }

    /// Queues the write and waits for the commit that holds it.
    pub async fn submit(&self, job: J) -> Result<D> {
        let (reply, answer) = oneshot::channel();
        self.queue.send(Waiting { job, reply }).await.map_err(|_| writer_gone())?;
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

/// The writer task stopped (its runtime is shutting down): the write was not made.
fn writer_gone() -> StoreError {
    StoreError::Database(sqlx::Error::WorkerCrashed)
}

async fn write<W: Writer>(
    writer: W, mut queue: mpsc::Receiver<Waiting<W::Job, W::Done>>, counters: Arc<Counters>,
    deadline: Duration,
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
        let (jobs, replies): (Vec<W::Job>, Vec<_>) = gather(first, &mut held_back, &mut queue)
            .into_iter()
            .filter(|w| !w.reply.is_closed())
            .map(|w| (w.job, w.reply))
            .unzip();
        if jobs.is_empty() {
            continue;
        }
        counters.transactions.fetch_add(1, Ordering::Relaxed);
        counters.appends.fetch_add(jobs.len() as u64, Ordering::Relaxed);
        let answers = async {
            Ok(if jobs.len() == 1 {
                vec![writer.one(&jobs[0]).await]
            } else {
                combine(&writer, &jobs, &counters).await
            })
        };
        // Dropped at the deadline, the transaction's connection goes back to the pool
        // mid-statement, which checks it under the deadline (`outage`).
        let answers = match within(deadline, answers).await {
            Ok(answers) => answers,
            Err(error) => {
                tracing::error!(
                    writes = jobs.len(),
                    ?deadline,
                    "a write transaction missed its deadline; its connection is dropped"
                );
                jobs.iter().map(|_| Err(error.for_each_write())).collect()
            }
        };
        for (reply, answer) in replies.into_iter().zip(answers) {
            // A client that went away meanwhile misses only the answer.
            let _ = reply.send(answer);
        }
    }
}

/// Writes the jobs in one transaction, or one by one when it fails before its commit.
async fn combine<W: Writer>(
    writer: &W, jobs: &[W::Job], counters: &Counters,
) -> Vec<Result<W::Done>> {
    match writer.many(jobs).await {
        Ok(results) => {
            let mut answers = Vec::with_capacity(jobs.len());
            for (job, result) in jobs.iter().zip(results) {
                answers.push(match result {
                    Some(done) => Ok(done),
                    None => writer.again(job).await,
                });
            }
            answers
        }
        Err(BatchFailed::BeforeCommit(error)) => {
            counters.fallbacks.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, writes = jobs.len(), "a combined write failed; making its writes one by one");
            let mut answers = Vec::with_capacity(jobs.len());
            for job in jobs {
                answers.push(writer.again(job).await);
            }
            answers
        }
        Err(BatchFailed::AtCommit(error)) => {
            tracing::error!(%error, writes = jobs.len(), "the commit of a combined write failed");
            jobs.iter().map(|_| Err(error.for_each_write())).collect()
        }
    }
}

/// The batch that starts with `first`: what else is queued, up to the limits. A write
/// whose exclusive pair is in the batch already waits for the next one.
fn gather<J: Job, D>(
    first: Waiting<J, D>, held_back: &mut VecDeque<Waiting<J, D>>,
    queue: &mut mpsc::Receiver<Waiting<J, D>>,
) -> Vec<Waiting<J, D>> {
    let mut bytes = first.job.bytes();
    let mut batch = vec![first];
    let mut pairs: HashSet<(String, String)> = HashSet::new();
    if let Some((a, b)) = batch[0].job.exclusive() {
        pairs.insert((a.to_owned(), b.to_owned()));
    }
    let mut earlier = std::mem::take(held_back);
    let mut later = Vec::new();
    while batch.len() < MAX_WRITES && bytes < MAX_BYTES {
        let Some(next) = earlier.pop_front().or_else(|| queue.try_recv().ok()) else {
            break;
        };
        if let Some((a, b)) = next.job.exclusive() {
            if !pairs.insert((a.to_owned(), b.to_owned())) {
                later.push(next);
                continue;
            }
        }
        bytes += next.job.bytes();
        batch.push(next);
    }
    // What the limits left of the earlier held-back writes goes first next time.
    held_back.extend(earlier);
    held_back.extend(later);
    batch
}
