//! The indexer: one thread that rebuilds the index when it must, then
//! follows the store's outbox by its own cursor — apply a batch of
//! entries, make the store durable, commit the index, advance the cursor.
//! A crash between commit and advance re-applies a batch, which is
//! harmless (every document is replaced by its key); a crash before the
//! commit loses nothing, since the entries are still in the store. The
//! store is made durable before the index commit, so the index never
//! holds a record that a crash can take back from the store (a write
//! visible but not yet synced when the indexer read it).
//! Writers nudge it after each write; it waits `COALESCE` so that the
//! writes that follow share one commit, then applies them — at once when a
//! read is waiting for them (read-your-writes, `memory::consistency`). It
//! also polls, so a missed nudge delays an update by at most `POLL`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::memory::knowledge::StoredDocuments;
use crate::memory::IndexClock;
use crate::search::SearchIndex;
use crate::store::Store;

/// Outbox entries applied per index commit.
const BATCH: usize = 2048;
/// Longest wait between two looks at the outbox.
const POLL: Duration = Duration::from_millis(500);
/// Pause after a failed batch before it is retried.
const RETRY: Duration = Duration::from_secs(1);
/// After a nudge, and after a batch that was not full, wait this long so
/// the writes that follow share one commit: at most about ten commits a
/// second. A commit per write made tantivy's indexing and merge threads a
/// third of the daemon's CPU under concurrent appends.
const COALESCE: Duration = Duration::from_millis(100);

/// Counters of the indexer.
#[derive(Debug, Default)]
pub struct IndexerStats {
    /// Outbox entries applied.
    pub applied: AtomicU64,
    /// Index commits.
    pub commits: AtomicU64,
    /// Batches that failed (and were retried).
    pub failures: AtomicU64,
}

/// Handle to the indexer thread.
pub struct Indexer {
    nudge: SyncSender<()>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    stats: Arc<IndexerStats>,
    index: Arc<SearchIndex>,
}

impl Indexer {
    /// Starts the thread; it first rebuilds the index if `rebuild`, then
    /// follows the outbox as `consumer`.
    pub fn start(
        store: Arc<dyn Store>,
        index: Arc<SearchIndex>,
        rebuild: bool,
        consumer: String,
        clock: Arc<IndexClock>,
    ) -> Indexer {
        // One pending nudge is enough: the thread drains the whole outbox.
        let (tx, rx) = mpsc::sync_channel::<()>(1);
        let waker = tx.clone();
        clock.set_waker(Box::new(move || {
            let _ = waker.try_send(());
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(IndexerStats::default());
        let (flag, counters) = (stop.clone(), stats.clone());
        let kept = index.clone();
        let thread = std::thread::Builder::new()
            .name("mnemo-indexer".into())
            .spawn(move || {
                if rebuild {
                    rebuild_until_done(store.as_ref(), &index, &flag);
                }
                match index.repair_after_crash(&StoredDocuments(store.as_ref()), rebuild) {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(
                        keys = n,
                        "records indexed twice before the last crash were indexed again"
                    ),
                    Err(e) => tracing::error!(error = %e, "checking the search index after a crash failed"),
                }
                while !flag.load(Ordering::Acquire) {
                    match drain(store.as_ref(), &index, &counters, &consumer, &clock) {
                        Ok(0) => match rx.recv_timeout(POLL) {
                            Ok(()) => pause(&flag, &clock, COALESCE),
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Disconnected) => break,
                        },
                        // A full batch: more is waiting.
                        Ok(n) if n >= BATCH => {}
                        Ok(_) => pause(&flag, &clock, COALESCE),
                        Err(e) => {
                            counters.failures.fetch_add(1, Ordering::Relaxed);
                            tracing::error!(error = %e, "search index update failed; retrying");
                            std::thread::sleep(RETRY);
                        }
                    }
                }
            })
            // Spawning fails only when the OS is out of threads.
            .expect("cannot start the indexer thread");
        Indexer {
            nudge: tx,
            stop,
            thread: Mutex::new(Some(thread)),
            stats,
            index: kept,
        }
    }

    /// Tells the thread there is work (never blocks).
    pub fn nudge(&self) {
        let _ = self.nudge.try_send(());
    }

    /// The indexer's counters.
    pub fn stats(&self) -> &IndexerStats {
        &self.stats
    }

    /// Stops the thread after its current batch and waits for it
    /// (blocking). What is left in the outbox is applied after a restart.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.nudge();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            if t.join().is_err() {
                tracing::error!("the indexer thread panicked");
                return;
            }
            // Its last commit is done: the next start need not check the
            // index for a crash's leftovers.
            if let Err(e) = self.index.mark_clean_stop() {
                tracing::warn!(error = %e, "cannot mark the search index as cleanly stopped");
            }
        }
    }
}

impl Drop for Indexer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn rebuild_until_done(store: &dyn Store, index: &SearchIndex, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        let started = std::time::Instant::now();
        match index.rebuild(&StoredDocuments(store)) {
            Ok(docs) => {
                tracing::info!(
                    documents = docs,
                    millis = started.elapsed().as_millis() as u64,
                    "search index rebuilt from the store"
                );
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "search index rebuild failed; retrying");
                std::thread::sleep(RETRY);
            }
        }
    }
}

/// Sleeps for `time`, or less if `stop` is set or a read starts waiting
/// for the index meanwhile.
fn pause(stop: &AtomicBool, clock: &IndexClock, time: Duration) {
    let step = Duration::from_millis(2);
    let mut left = time;
    while !left.is_zero() && !stop.load(Ordering::Acquire) && !clock.has_waiters() {
        let nap = left.min(step);
        std::thread::sleep(nap);
        left -= nap;
    }
}

/// Applies one batch of the outbox; returns how many entries it held.
fn drain(
    store: &dyn Store,
    index: &SearchIndex,
    stats: &IndexerStats,
    consumer: &str,
    clock: &IndexClock,
) -> crate::Result<usize> {
    // Every write counted by now is in the outbox this read sees (a
    // shared store numbers its committed entries first).
    let written = clock.written();
    let page = store.read_outbox(consumer, BATCH)?;
    if page.through == 0 {
        clock.applied_through(written);
        return Ok(0);
    }
    let n = page.entries.len();
    let changes: Vec<_> = page.entries.into_iter().map(|(_, c)| c).collect();
    // What the batch read from the store is made durable before the index
    // commits it: a crash cannot leave a document whose record it undid.
    index.apply(&StoredDocuments(store), &changes)?;
    // Counted once committed to the index and before the cursor moves: a
    // scrape that sees no backlog sees them counted (a batch applied again
    // after a failed advance is counted again: it was applied again).
    stats.applied.fetch_add(n as u64, Ordering::Relaxed);
    stats.commits.fetch_add(1, Ordering::Relaxed);
    // The index commit is durable before the cursor moves past them.
    store.advance_outbox(consumer, page.through)?;
    // A page that was not full held everything counted before the read.
    if n < BATCH {
        clock.applied_through(written);
    }
    Ok(n.max(1))
}
