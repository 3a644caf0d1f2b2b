//! Read-your-writes for everything answered from the search index.
//!
//! The index trails the store: the indexer applies the outbox shortly after
//! each write. [`IndexClock`] lets a read wait, bounded, until the index
//! has applied every write this process acknowledged before the read
//! arrived. Writes are counted, not numbered by the outbox: the domain
//! counts an index-relevant write once it is durable (before it is
//! acknowledged), and the indexer, which samples the count before it reads
//! the outbox, publishes that sample once the batch it read is committed to
//! the index and the outbox held nothing more. A read waits until the
//! published count reaches the count at its arrival.
//!
//! Across daemons sharing a database, a write's response carries a
//! [`ConsistencyToken`]. A read carrying a token of this process waits for
//! the count in it; a token of another process is honoured by counting a
//! pretend write at arrival: the indexer's next pass (which numbers every
//! entry committed before it starts, the token's write among them) covers it.
//!
//! This module never reads storage and never sees gRPC types.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::error::{Error, Result};

/// Version tag of the token's text.
const TOKEN_PREFIX: &str = "c1";
/// Longest token accepted, in bytes.
pub const MAX_TOKEN_BYTES: usize = 64;

/// What a read must see before it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAfter {
    /// The writes this process acknowledged before the read arrived.
    OwnWrites,
    /// A write named by a token; an answer that cannot see it is refused
    /// (UNAVAILABLE) rather than given without it.
    Token(ConsistencyToken),
}

/// Where a write left the store, as seen by the process that made it: the
/// process's instance and its count of index-relevant writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsistencyToken {
    instance: u64,
    count: u64,
}

impl ConsistencyToken {
    /// The token's text (`c1.<instance>.<count>`, hexadecimal).
    pub fn encode(&self) -> String {
        format!("{TOKEN_PREFIX}.{:016x}.{:x}", self.instance, self.count)
    }

    /// Parses a token's text; INVALID_ARGUMENT naming what is wrong.
    pub fn parse(text: &str) -> Result<ConsistencyToken> {
        let bad = || {
            Error::invalid(format!(
                "consistency token {:?} is not one mnemo issued (expected c1.<instance>.<count>, as returned by a write)",
                text.chars().take(MAX_TOKEN_BYTES).collect::<String>()
            ))
        };
        if text.len() > MAX_TOKEN_BYTES {
            return Err(bad());
        }
        let mut parts = text.split('.');
        let (Some(TOKEN_PREFIX), Some(instance), Some(count), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let instance = u64::from_str_radix(instance, 16).map_err(|_| bad())?;
        let count = u64::from_str_radix(count, 16).map_err(|_| bad())?;
        Ok(ConsistencyToken { instance, count })
    }
}

/// Counters of the waits (exported as metrics).
#[derive(Debug, Default)]
pub struct ConsistencyStats {
    /// Reads that had to wait for the index.
    pub waits: AtomicU64,
    /// Total time those reads waited, in microseconds.
    pub waited_micros: AtomicU64,
    /// Reads whose wait reached the bound.
    pub timeouts: AtomicU64,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The index covers what the read must see.
    CaughtUp,
    /// The bound passed first.
    TimedOut,
}

/// This process's count of index-relevant writes, and how far the index
/// has applied them.
pub struct IndexClock {
    instance: u64,
    written: AtomicU64,
    applied: watch::Sender<u64>,
    waiters: AtomicUsize,
    waker: OnceLock<Box<dyn Fn() + Send + Sync>>,
    stats: ConsistencyStats,
    /// Outbox entries the index has applied (searchable) that its durable
    /// cursor has not passed yet (until the next index checkpoint).
    ahead: AtomicU64,
}

impl std::fmt::Debug for IndexClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexClock")
            .field("instance", &self.instance)
            .field("written", &self.written)
            .field("applied", &*self.applied.borrow())
            .finish()
    }
}

impl Default for IndexClock {
    fn default() -> Self {
        let mut b = [0u8; 8];
        // Without randomness the clock still tells processes apart enough:
        // a token of another process is only honoured more slowly.
        if getrandom::fill(&mut b).is_err() {
            b[..4].copy_from_slice(&std::process::id().to_be_bytes());
        }
        IndexClock {
            instance: u64::from_be_bytes(b),
            written: AtomicU64::new(0),
            applied: watch::Sender::new(0),
            waiters: AtomicUsize::new(0),
            waker: OnceLock::new(),
            stats: ConsistencyStats::default(),
            ahead: AtomicU64::new(0),
        }
    }
}

impl IndexClock {
    /// Counts a durable, index-relevant write (called before it is
    /// acknowledged).
    pub fn wrote(&self) {
        self.written.fetch_add(1, Ordering::SeqCst);
    }

    /// The count of writes so far: what the indexer samples before it
    /// reads the outbox.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// The token a write acknowledged now returns.
    pub fn token(&self) -> ConsistencyToken {
        ConsistencyToken {
            instance: self.instance,
            count: self.written(),
        }
    }

    /// Called by the indexer: everything counted up to `count` is applied.
    pub fn applied_through(&self, count: u64) {
        self.applied.send_if_modified(|v| {
            let moved = count > *v;
            if moved {
                *v = count;
            }
            moved
        });
    }

    /// Called by the indexer: `n` outbox entries are searchable but not
    /// yet passed by its durable cursor (0 once a checkpoint passed them).
    pub fn set_applied_ahead(&self, n: u64) {
        self.ahead.store(n, Ordering::Release);
    }

    /// Outbox entries applied ahead of the durable cursor: the outbox's
    /// backlog less these is what is not searchable yet.
    pub fn applied_ahead(&self) -> u64 {
        self.ahead.load(Ordering::Acquire)
    }

    /// The count the index has applied through.
    pub fn applied(&self) -> u64 {
        *self.applied.borrow()
    }

    /// Whether a read is waiting (the indexer then skips its pauses).
    pub fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Acquire) > 0
    }

    /// Sets what wakes the indexer (once, by the runtime).
    pub fn set_waker(&self, wake: Box<dyn Fn() + Send + Sync>) {
        let _ = self.waker.set(wake);
    }

    /// The counters of the waits.
    pub fn stats(&self) -> &ConsistencyStats {
        &self.stats
    }

    /// The count a read arriving now with `after` must see.
    pub fn target(&self, after: ReadAfter) -> u64 {
        match after {
            ReadAfter::OwnWrites => self.written(),
            ReadAfter::Token(t) if t.instance == self.instance => t.count.min(self.written()),
            // Another process's write (or this daemon's before a restart):
            // count a pretend write now; the indexer's next pass starts
            // after it and so numbers and applies the token's write.
            ReadAfter::Token(_) => self.written.fetch_add(1, Ordering::SeqCst) + 1,
        }
    }

    /// Waits until the index has applied through `target`, at most `bound`.
    pub async fn wait_for(&self, target: u64, bound: Duration) -> Waited {
        if self.applied() >= target {
            return Waited::CaughtUp;
        }
        let started = Instant::now();
        self.waiters.fetch_add(1, Ordering::AcqRel);
        if let Some(wake) = self.waker.get() {
            wake();
        }
        let mut rx = self.applied.subscribe();
        let outcome = match tokio::time::timeout(bound, rx.wait_for(|v| *v >= target)).await {
            Ok(Ok(_)) => Waited::CaughtUp,
            // The indexer is gone (shutdown): answer with what is indexed.
            Ok(Err(_)) | Err(_) => Waited::TimedOut,
        };
        self.waiters.fetch_sub(1, Ordering::AcqRel);
        self.stats.waits.fetch_add(1, Ordering::Relaxed);
        self.stats
            .waited_micros
            .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        if outcome == Waited::TimedOut {
            self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_garbage_is_refused() {
        let clock = IndexClock::default();
        clock.wrote();
        let t = clock.token();
        assert_eq!(ConsistencyToken::parse(&t.encode()).expect("parsed"), t);
        for bad in [
            "",
            "c1",
            "c2.00.1",
            "c1.xyz.1",
            "c1.00.1.2",
            &"c1.0.".repeat(30),
        ] {
            let e = ConsistencyToken::parse(bad).expect_err(bad);
            assert!(e.to_string().contains("consistency token"), "{e}");
        }
    }

    #[tokio::test]
    async fn a_read_waits_for_the_writes_before_it_and_no_longer() {
        let clock = std::sync::Arc::new(IndexClock::default());
        clock.wrote();
        clock.wrote();
        let target = clock.target(ReadAfter::OwnWrites);
        assert_eq!(target, 2);
        // Nothing applies it: the bound ends the wait.
        let w = clock.wait_for(target, Duration::from_millis(20)).await;
        assert_eq!(w, Waited::TimedOut);
        assert_eq!(clock.stats().timeouts.load(Ordering::Relaxed), 1);
        // The indexer publishes part, then all.
        let c = clock.clone();
        let indexer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            c.applied_through(1);
            tokio::time::sleep(Duration::from_millis(10)).await;
            c.applied_through(2);
        });
        let w = clock.wait_for(target, Duration::from_secs(10)).await;
        assert_eq!(w, Waited::CaughtUp);
        indexer.await.expect("joined");
        // Published counts never go back.
        clock.applied_through(1);
        assert_eq!(clock.applied(), 2);
    }

    #[test]
    fn a_token_of_another_process_counts_a_write_at_arrival() {
        let (a, b) = (IndexClock::default(), IndexClock::default());
        a.wrote();
        let token = a.token();
        assert_eq!(a.target(ReadAfter::Token(token)), 1);
        // On b: a pretend write, beyond what b has applied.
        let t = b.target(ReadAfter::Token(token));
        assert_eq!(t, 1);
        assert_eq!(b.written(), 1);
        assert!(b.applied() < t);
    }
}
