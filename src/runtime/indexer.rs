//! The indexer: one thread that rebuilds the index when it must, then
//! follows the store's outbox — apply a batch of entries, make the store
//! durable, show the batch to searches beside the index (`search/fresh.rs`),
//! commit the index when the writes pause (searchable as before, not
//! synced), and now and then checkpoint: commit, sync the index's files,
//! then move the durable cursor past what the synced commits applied. A crash re-applies from the
//! durable cursor, which is harmless (every document is replaced by its
//! key); a crash before a commit loses nothing, since the entries are
//! still in the store. The store is made durable before each index commit,
//! so the index never holds a record that a crash can take back from the
//! store (a write visible but not yet synced when the indexer read it).
//! Writers nudge it after each write. A nudge after a quiet spell is
//! applied at once; while writes keep coming, batches are at least
//! `COALESCE` apart, so the writes of that time share one — unless a read
//! is waiting for them (read-your-writes, `memory::consistency`), which
//! wakes the indexer at once. It also polls, so a missed nudge delays an
//! update by at most `POLL`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::memory::knowledge::StoredDocuments;
use crate::memory::IndexClock;
use crate::search::SearchIndex;
use crate::store::Store;

/// Outbox entries applied per index commit.
const BATCH: usize = 2048;
/// Longest time commits stay unsynced: what a crash makes the indexer
/// apply again is at most this much of the outbox (or `CHECKPOINT_ENTRIES`).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);
/// Most entries applied ahead of the durable cursor before a checkpoint.
const CHECKPOINT_ENTRIES: u64 = 50_000;
/// Longest wait between two looks at the outbox.
const POLL: Duration = Duration::from_millis(500);
/// Pause after a failed batch before it is retried.
const RETRY: Duration = Duration::from_secs(1);
/// Least time between two batches, unless a read waits: the writes of
/// that time share one, at most about ten a second. (A commit per write
/// made tantivy's indexing and merge threads a third of the daemon's CPU
/// under concurrent appends; commits now wait for a pause in the writes.)
const COALESCE: Duration = Duration::from_millis(100);

/// Counters of the indexer.
#[derive(Debug, Default)]
pub struct IndexerStats {
    /// Outbox entries applied.
    pub applied: AtomicU64,
    /// Index commits.
    pub commits: AtomicU64,
    /// Index checkpoints (syncs of the commits before them).
    pub checkpoints: AtomicU64,
    /// Batches that failed (and were retried).
    pub failures: AtomicU64,
}

/// Handle to the indexer thread.
pub struct Indexer {
    nudge: SyncSender<()>,
    /// Cuts a pause short (a read waits, or the indexer stops).
    hurry: SyncSender<()>,
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
        let (hurry, hurried) = mpsc::sync_channel::<()>(1);
        let (waker, hurry_waker) = (tx.clone(), hurry.clone());
        clock.set_waker(Box::new(move || {
            let _ = waker.try_send(());
            let _ = hurry_waker.try_send(());
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
                let mut follower = Follower::new(store.as_ref(), &index, &counters, &consumer, &clock);
                let pause = Pause {
                    stop: &flag,
                    clock: &clock,
                    hurried: &hurried,
                };
                // When a batch was last applied (none yet: long enough ago).
                let mut last = Instant::now().checked_sub(COALESCE).unwrap_or_else(Instant::now);
                // Whether the last look at the outbox found nothing.
                let mut idle = true;
                while !flag.load(Ordering::Acquire) {
                    // Shown before its commit when a read waits for it or
                    // after a quiet spell (the last look found nothing);
                    // under a stream of writes that no read waits for,
                    // committed at once (showing costs each search the
                    // scoring of the shown documents).
                    let show = clock.has_waiters() || idle;
                    let drained = follower.drain(show);
                    idle = matches!(drained, Ok(0));
                    if matches!(drained, Ok(n) if n > 0) {
                        last = Instant::now();
                    }
                    if let Err(e) = follower.checkpoint_if_due() {
                        counters.failures.fetch_add(1, Ordering::Relaxed);
                        tracing::error!(error = %e, "search index checkpoint failed; retrying");
                    }
                    match drained {
                        Ok(0) => {
                            // Quiet: commit what was shown beside the index
                            // (searchable already), unless a read waits.
                            if !clock.has_waiters() {
                                if let Err(e) = follower.flush() {
                                    counters.failures.fetch_add(1, Ordering::Relaxed);
                                    tracing::error!(error = %e, "search index commit failed; retrying");
                                }
                            }
                            match rx.recv_timeout(POLL.min(CHECKPOINT_EVERY)) {
                                Ok(()) => pause.until(last + COALESCE),
                                Err(RecvTimeoutError::Timeout) => {}
                                Err(RecvTimeoutError::Disconnected) => break,
                            }
                        }
                        // A full batch: more is waiting.
                        Ok(n) if n >= BATCH => {}
                        Ok(_) => pause.until(last + COALESCE),
                        Err(e) => {
                            counters.failures.fetch_add(1, Ordering::Relaxed);
                            tracing::error!(error = %e, "search index update failed; retrying");
                            std::thread::sleep(RETRY);
                        }
                    }
                }
                // A clean stop leaves every commit synced and passed.
                if let Err(e) = follower.checkpoint() {
                    tracing::error!(error = %e, "search index checkpoint at stop failed; the next start applies the outbox again");
                }
            })
            // Spawning fails only when the OS is out of threads.
            .expect("cannot start the indexer thread");
        Indexer {
            nudge: tx,
            hurry,
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
        let _ = self.hurry.try_send(());
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

/// The indexer's wait between commits.
struct Pause<'a> {
    stop: &'a AtomicBool,
    clock: &'a IndexClock,
    /// Signalled when a read starts waiting, and at stop.
    hurried: &'a Receiver<()>,
}

impl Pause<'_> {
    /// Waits until `deadline` (not at all when it is past), or less if
    /// the indexer stops or a read is waiting for the index.
    fn until(&self, deadline: Instant) {
        loop {
            if self.stop.load(Ordering::Acquire) || self.clock.has_waiters() {
                return;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            // A signal left by a read that is gone already wakes this
            // early; the loop looks again and waits on. (Timed out, or no
            // sender left: done.)
            if self.hurried.recv_timeout(left).is_err() {
                return;
            }
        }
    }
}

/// The indexer's place in the outbox: what it has applied (searchable)
/// and what it has passed durably.
struct Follower<'a> {
    store: &'a dyn Store,
    index: &'a SearchIndex,
    stats: &'a IndexerStats,
    consumer: &'a str,
    clock: &'a IndexClock,
    /// The last entry applied to the index (0: none since the start).
    applied: u64,
    /// Where the durable cursor is known to be (0: not moved since the
    /// start).
    passed: u64,
    /// Entries applied since the last checkpoint.
    ahead: u64,
    last_checkpoint: Instant,
}

impl<'a> Follower<'a> {
    fn new(
        store: &'a dyn Store,
        index: &'a SearchIndex,
        stats: &'a IndexerStats,
        consumer: &'a str,
        clock: &'a IndexClock,
    ) -> Follower<'a> {
        Follower {
            store,
            index,
            stats,
            consumer,
            clock,
            applied: 0,
            passed: 0,
            ahead: 0,
            last_checkpoint: Instant::now(),
        }
    }

    /// Applies one batch of the outbox (shown before its commit when
    /// `show`); returns how many entries it held.
    fn drain(&mut self, show: bool) -> crate::Result<usize> {
        // Every write counted by now is in the outbox this read sees (a
        // shared store numbers its committed entries first).
        let written = self.clock.written();
        let page = self
            .store
            .read_outbox_after(self.consumer, self.applied, BATCH)?;
        if page.through == 0 {
            self.clock.applied_through(written);
            return Ok(0);
        }
        let n = page.entries.len();
        let changes: Vec<_> = page.entries.into_iter().map(|(_, c)| c).collect();
        // What the batch read from the store is made durable before the
        // index commits it: a crash cannot leave a document whose record
        // it undid.
        self.index
            .apply(&StoredDocuments(self.store), &changes, show)?;
        self.stats.applied.fetch_add(n as u64, Ordering::Relaxed);
        self.applied = page.through;
        self.ahead += n as u64;
        self.clock.set_applied_ahead(self.ahead);
        // A page that was not full held everything counted before the read.
        if n < BATCH {
            self.clock.applied_through(written);
        }
        Ok(n.max(1))
    }

    /// Commits what was applied and only shown beside the index.
    fn flush(&mut self) -> crate::Result<()> {
        if self.index.has_pending() {
            self.index.flush()?;
            self.stats.commits.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Checkpoints when the commits since the last one are old or many
    /// enough.
    fn checkpoint_if_due(&mut self) -> crate::Result<()> {
        if self.ahead >= CHECKPOINT_ENTRIES || self.last_checkpoint.elapsed() >= CHECKPOINT_EVERY {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Syncs the index's commits, then moves the durable cursor past what
    /// they applied.
    fn checkpoint(&mut self) -> crate::Result<()> {
        self.last_checkpoint = Instant::now();
        if self.applied == self.passed && !self.index.has_unsynced_files() {
            return Ok(());
        }
        self.flush()?;
        self.index.checkpoint()?;
        self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        if self.applied > self.passed {
            // Counted as not applied while the cursor moves: the lag a read
            // reports may be too high for a moment, never too low.
            self.clock.set_applied_ahead(0);
            self.store.advance_outbox(self.consumer, self.applied)?;
            self.passed = self.applied;
            self.ahead = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_ends_at_its_deadline_at_stop_and_not_on_a_stale_signal() {
        let (stop, clock) = (AtomicBool::new(false), IndexClock::default());
        let (hurry, hurried) = mpsc::sync_channel::<()>(1);
        let pause = Pause {
            stop: &stop,
            clock: &clock,
            hurried: &hurried,
        };
        // A deadline already past: no wait.
        let started = Instant::now();
        pause.until(started);
        assert!(started.elapsed() < Duration::from_secs(1));

        // A signal left by a read that is gone: the pause waits on.
        hurry.try_send(()).expect("signal");
        let started = Instant::now();
        pause.until(started + Duration::from_millis(50));
        assert!(started.elapsed() >= Duration::from_millis(50));

        // Stopping ends it long before its deadline.
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                stop.store(true, Ordering::Release);
                hurry.try_send(()).expect("signal");
            });
            let started = Instant::now();
            pause.until(started + Duration::from_secs(30));
            assert!(started.elapsed() < Duration::from_secs(10));
        });
    }
}
