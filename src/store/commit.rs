//! Group commit: one dedicated thread makes writes durable for many callers
//! at once. A caller first applies its write, then waits here; the thread
//! takes every waiting request, runs one `Store::sync`, and answers them
//! all. Every request was queued after its write returned, so the one sync
//! covers all of them. The queue is bounded: when it is full callers wait
//! (back-pressure), they are never dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::Store;
use crate::error::{Error, Result};

type Waiter = oneshot::Sender<Result<()>>;

/// Owner of the sync thread. Dropping it stops and joins the thread, which
/// releases the thread's reference to the store.
pub struct GroupCommit {
    tx: Option<mpsc::Sender<Waiter>>,
    thread: Option<std::thread::JoinHandle<()>>,
    stats: Arc<Stats>,
}

/// Counters of the sync thread.
#[derive(Debug, Default)]
pub struct Stats {
    /// `Store::sync` calls made.
    pub syncs: AtomicU64,
    /// Durability requests answered.
    pub requests: AtomicU64,
}

impl GroupCommit {
    /// Starts the sync thread for `store` with a queue of `queue` waiters.
    pub fn start(store: Arc<dyn Store>, queue: usize) -> Result<Self> {
        let (tx, rx) = mpsc::channel(queue.max(1));
        let stats = Arc::new(Stats::default());
        let thread_stats = stats.clone();
        let thread = std::thread::Builder::new()
            .name("mnemo-sync".into())
            .spawn(move || run(store, rx, thread_stats))
            .map_err(|e| Error::Internal(format!("cannot start the sync thread: {e}")))?;
        Ok(GroupCommit {
            tx: Some(tx),
            thread: Some(thread),
            stats,
        })
    }

    /// Waits until every write that returned before this call is durable.
    pub async fn durable(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        let sender = self
            .tx
            .as_ref()
            .ok_or_else(|| Error::Internal("the sync thread has stopped".into()))?;
        sender
            .send(tx)
            .await
            .map_err(|_| Error::Internal("the sync thread has stopped".into()))?;
        rx.await
            .map_err(|_| Error::Internal("the sync thread dropped a request".into()))?
    }

    /// The thread's counters, shareable beyond the commit's lifetime.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop after it answers
        // whatever is queued.
        self.tx.take();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("the sync thread panicked");
            }
        }
    }
}

fn run(store: Arc<dyn Store>, mut rx: mpsc::Receiver<Waiter>, stats: Arc<Stats>) {
    let mut batch = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let result = store.sync();
        if let Err(e) = &result {
            tracing::error!(error = %e, "sync failed; the writes it covered are not acknowledged");
        }
        stats.syncs.fetch_add(1, Ordering::Relaxed);
        stats
            .requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        for w in batch.drain(..) {
            // A waiter that went away (client cancelled) needs no answer.
            let _ = w.send(result.clone());
        }
    }
}
