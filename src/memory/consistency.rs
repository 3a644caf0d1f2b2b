//! Read-your-writes for everything answered from the search index.
//!
//! The index trails the store: the indexer applies the outbox shortly after
//! each write. [`IndexClock`] lets a read wait, bounded, until the index
//! has applied every write this process acknowledged before the read
//! arrived that the read can see. Writes are counted, not numbered by the
//! outbox: the domain counts an index-relevant write once it is durable
//! (before it is acknowledged), and the indexer, which samples the count
//! before it reads the outbox, publishes that sample once the batch it read
//! is committed to the index and the outbox held nothing more. A read waits
//! until the published count reaches the count of the newest write in its
//! scope ([`ReadScope`]: its namespace, subject or session), so a read
//! does not queue behind other clients' writes elsewhere: each write also
//! records its count in a fixed table of slots by what it touched
//! ([`WriteScope`]), and a read takes the largest count of the slots it
//! depends on. Scopes that share a slot only make a read wait longer.
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

/// Slots of the per-scope counts: a fixed table, so what the clock keeps
/// is bounded whatever the number of namespaces, subjects and sessions.
const SCOPE_SLOTS: usize = 4096;

/// What an index-relevant write touched. `subject: None` is a write whose
/// subject is not known (or that spans the namespace: retention, a
/// deleted session): every read in the namespace waits for it;
/// `namespace: None` one that spans namespaces (a retention sweep of
/// facts): every read waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteScope<'a> {
    /// The namespace.
    pub namespace: Option<&'a str>,
    /// The subject (`Some("")`: a session without one).
    pub subject: Option<&'a str>,
    /// The session, when the write is one session's.
    pub session: Option<&'a str>,
}

/// What a read can see, and so which writes it must wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadScope<'a> {
    /// Everything in a namespace.
    Namespace(&'a str),
    /// One subject's sessions, facts and episodes.
    Subject(&'a str, &'a str),
    /// One session's turns and episode.
    Session(&'a str, &'a str),
}

/// The slot a scope's count lives in: a namespace-wide slot (`kind` 0:
/// every write of the namespace; 1: writes of unknown subject), a
/// subject's (2), a session's (3), or writes spanning namespaces (4).
fn slot(kind: u8, namespace: &str, key: &str) -> usize {
    use std::hash::Hasher;
    // A fixed-key hasher: the same scope maps to the same slot for the
    // life of the process (the table is never shared across processes).
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write_u8(kind);
    h.write(namespace.as_bytes());
    h.write_u8(0xff);
    h.write(key.as_bytes());
    (h.finish() % SCOPE_SLOTS as u64) as usize
}

/// What a read must see before it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAfter {
    /// The writes this process acknowledged before the read arrived, in
    /// the read's scope.
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
    /// The newest count of a write per scope slot ([`slot`]).
    scopes: Box<[AtomicU64]>,
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
            scopes: (0..SCOPE_SLOTS).map(|_| AtomicU64::new(0)).collect(),
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
    /// acknowledged), and records it in the slots of what it touched.
    pub fn wrote(&self, scope: WriteScope<'_>) {
        let count = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        let mark = |i: usize| self.scopes[i].fetch_max(count, Ordering::SeqCst);
        let Some(ns) = scope.namespace else {
            mark(slot(4, "", ""));
            return;
        };
        mark(slot(0, ns, ""));
        match scope.subject {
            None => {
                mark(slot(1, ns, ""));
            }
            Some("") => {}
            Some(subject) => {
                mark(slot(2, ns, subject));
            }
        }
        if let Some(session) = scope.session {
            mark(slot(3, ns, session));
        }
    }

    /// The count of the newest write a read of `scope` can see.
    fn newest_in(&self, scope: ReadScope<'_>) -> u64 {
        let at = |i: usize| self.scopes[i].load(Ordering::SeqCst);
        let everywhere = at(slot(4, "", ""));
        everywhere.max(match scope {
            ReadScope::Namespace(ns) => at(slot(0, ns, "")),
            ReadScope::Subject(ns, subject) => at(slot(1, ns, "")).max(at(slot(2, ns, subject))),
            ReadScope::Session(ns, session) => at(slot(1, ns, "")).max(at(slot(3, ns, session))),
        })
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

    /// Whether the index has applied every write counted so far (no read
    /// would wait).
    pub fn caught_up(&self) -> bool {
        self.applied() >= self.written()
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

    /// The count a read of `scope` arriving now with `after` must see.
    pub fn target(&self, after: ReadAfter, scope: ReadScope<'_>) -> u64 {
        match after {
            ReadAfter::OwnWrites => self.newest_in(scope),
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

    const ANN: WriteScope<'static> = WriteScope {
        namespace: Some("ns"),
        subject: Some("ann"),
        session: Some("ann-1"),
    };

    #[test]
    fn tokens_round_trip_and_garbage_is_refused() {
        let clock = IndexClock::default();
        clock.wrote(ANN);
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
        clock.wrote(ANN);
        clock.wrote(ANN);
        let target = clock.target(ReadAfter::OwnWrites, ReadScope::Subject("ns", "ann"));
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
        a.wrote(ANN);
        let token = a.token();
        assert_eq!(
            a.target(ReadAfter::Token(token), ReadScope::Namespace("ns")),
            1
        );
        // On b: a pretend write, beyond what b has applied.
        let t = b.target(ReadAfter::Token(token), ReadScope::Namespace("ns"));
        assert_eq!(t, 1);
        assert_eq!(b.written(), 1);
        assert!(b.applied() < t);
    }

    #[test]
    fn a_read_waits_only_for_the_writes_it_can_see() {
        let clock = IndexClock::default();
        clock.wrote(ANN);
        let own = |scope| clock.target(ReadAfter::OwnWrites, scope);
        // Other clients write another subject, another namespace.
        for _ in 0..5 {
            clock.wrote(WriteScope {
                subject: Some("bob"),
                session: Some("bob-1"),
                ..ANN
            });
            clock.wrote(WriteScope {
                namespace: Some("other"),
                ..ANN
            });
        }
        assert_eq!(clock.written(), 11);
        // Ann's reads wait for Ann's write only.
        assert_eq!(own(ReadScope::Subject("ns", "ann")), 1);
        assert_eq!(own(ReadScope::Session("ns", "ann-1")), 1);
        assert_eq!(own(ReadScope::Subject("other", "carol")), 0);
        // A read of the whole namespace sees Bob's too.
        assert_eq!(own(ReadScope::Namespace("ns")), 10);
        // A write of unknown subject (a deleted session, retention) is
        // waited for by every read of its namespace, and by no other.
        clock.wrote(WriteScope {
            subject: None,
            session: Some("x"),
            ..ANN
        });
        assert_eq!(own(ReadScope::Subject("ns", "ann")), 12);
        assert_eq!(own(ReadScope::Session("ns", "ann-1")), 12);
        assert_eq!(own(ReadScope::Subject("other", "ann")), 11);
        // One spanning namespaces, by every read.
        clock.wrote(WriteScope {
            namespace: None,
            subject: None,
            session: None,
        });
        assert_eq!(own(ReadScope::Subject("other", "carol")), 13);
        // A token still names every write before it, whoever made it.
        assert_eq!(
            clock.target(
                ReadAfter::Token(clock.token()),
                ReadScope::Subject("ns", "ann")
            ),
            13
        );
    }
}
