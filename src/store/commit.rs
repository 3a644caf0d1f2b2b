//! Group commit inside an engine: a writer applies its batch, then calls
//! [`GroupCommit::wait_durable`]. The first waiter becomes the leader and
//! runs one sync for everyone who applied a batch before that sync began;
//! writers arriving meanwhile wait for the next one, whose leader covers
//! them all. So N concurrent writers cost about two syncs, not N, and no
//! writer returns before a sync that started after its batch finished.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::error::Result;

/// Counters of a group commit, shareable beyond the store's lifetime.
#[derive(Debug, Default)]
pub struct Stats {
    /// Syncs made.
    pub syncs: AtomicU64,
    /// Durability waits answered.
    pub requests: AtomicU64,
    /// Time writers spent waiting for durability (their share of a sync,
    /// or the whole of the one they led), in nanoseconds.
    pub waited_nanos: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Tickets handed out: a writer's ticket is the count when it asked.
    issued: u64,
    /// Every ticket up to this one is durable.
    durable: u64,
    /// A sync is running.
    syncing: bool,
    /// The last sync failed: its error, for the tickets it covered.
    failed: Option<(u64, crate::Error)>,
}

/// Batches the syncs of concurrent writers.
#[derive(Default)]
pub struct GroupCommit {
    state: Mutex<State>,
    done: Condvar,
    stats: Arc<Stats>,
}

impl GroupCommit {
    /// A group commit with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns once every write applied before this call is durable,
    /// running `sync` as the leader of a group when no sync is running.
    /// A failed sync fails every writer it covered (their writes are not
    /// acknowledged); later writers try again.
    pub fn wait_durable(&self, sync: impl Fn() -> Result<()>) -> Result<()> {
        let started = std::time::Instant::now();
        let result = self.wait(sync);
        self.stats
            .waited_nanos
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        result
    }

    fn wait(&self, sync: impl Fn() -> Result<()>) -> Result<()> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        // The state is counters only: a poisoned lock still holds them.
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.issued += 1;
        let ticket = st.issued;
        loop {
            if st.durable >= ticket {
                return Ok(());
            }
            if let Some((covered, e)) = &st.failed {
                if *covered >= ticket {
                    return Err(e.clone());
                }
            }
            if !st.syncing {
                // Lead: this sync covers every ticket issued so far, since
                // each was issued after its writer's batch was applied.
                st.syncing = true;
                let covers = st.issued;
                drop(st);
                let result = sync();
                self.stats.syncs.fetch_add(1, Ordering::Relaxed);
                st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                st.syncing = false;
                match result {
                    Ok(()) => st.durable = st.durable.max(covers),
                    Err(e) => {
                        tracing::error!(error = %e, "sync failed; the writes it covered are not acknowledged");
                        st.failed = Some((covers, e));
                    }
                }
                self.done.notify_all();
                continue;
            }
            st = self.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The counters.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn concurrent_writers_share_syncs_and_none_returns_before_one() {
        let gc = Arc::new(GroupCommit::new());
        let applied = Arc::new(AtomicU64::new(0));
        let synced = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let (gc, applied, synced) = (gc.clone(), applied.clone(), synced.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let mine = applied.fetch_add(1, Ordering::SeqCst) + 1;
                        gc.wait_durable(|| {
                            let upto = applied.load(Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_micros(200));
                            synced.fetch_max(upto, Ordering::SeqCst);
                            Ok(())
                        })
                        .unwrap();
                        // What this writer applied is covered by a sync.
                        assert!(synced.load(Ordering::SeqCst) >= mine);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = gc.stats();
        assert_eq!(s.requests.load(Ordering::Relaxed), 800);
        let syncs = s.syncs.load(Ordering::Relaxed);
        assert!(syncs < 800, "no grouping: {syncs} syncs");
    }

    #[test]
    fn a_failed_sync_fails_the_writers_it_covered_and_the_next_succeeds() {
        let gc = GroupCommit::new();
        let fail = AtomicBool::new(true);
        let sync = || {
            if fail.swap(false, Ordering::SeqCst) {
                Err(crate::Error::Storage("disk full".into()))
            } else {
                Ok(())
            }
        };
        assert!(gc.wait_durable(sync).is_err());
        assert!(gc.wait_durable(sync).is_ok());
    }
}
