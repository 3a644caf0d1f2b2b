//! Applies retention policies (`[[retention]]`): an owned task that runs
//! a pass at start and every `limits.retention_sweep_secs`. A pass asks
//! the domain which sessions have records due (as of the retention
//! clock), marks them in the store's claims (kind `Retention`; the facts
//! of every namespace are one more item), then claims due items under a
//! lease and has the domain remove what is due, a bounded batch per unit
//! of work. On a shared database every daemon runs passes; the claims
//! give each item to one daemon at a time, and an item redone by another
//! daemon finds nothing left to remove, so nothing is counted twice.
//! Shutdown stops the task between items.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::config::RetentionPolicy;
use crate::error::Result;
use crate::memory::Memory;
use crate::model::{now_nanos, RetentionCounts, UnixNanos};
use crate::store::WorkKind;

/// The claim item that stands for every namespace's facts.
const FACTS_ITEM: &str = "\u{1}facts";
/// How long a claimed item stays leased to this daemon.
const LEASE: Duration = Duration::from_secs(300);
/// Items claimed at once: one, so that daemons sharing a database share
/// the items of a pass (a claim costs little beside an item's deletes).
const CLAIM_BATCH: usize = 1;

/// Where retention reads the time: the system clock, or a test's.
pub type Clock = Arc<dyn Fn() -> UnixNanos + Send + Sync>;

/// What this daemon's passes removed since start, per kind (metrics).
#[derive(Debug, Default)]
pub struct RetentionStats {
    /// Per kind, in the order of [`RetentionCounts::KINDS`].
    pub deleted: [AtomicU64; 5],
    /// Passes finished.
    pub passes: AtomicU64,
}

impl RetentionStats {
    fn add(&self, c: &RetentionCounts) {
        for (slot, n) in self.deleted.iter().zip(c.by_kind()) {
            slot.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// The retention task of this process.
pub struct Retention {
    memory: Arc<Memory>,
    policy: RetentionPolicy,
    clock: RwLock<Clock>,
    stats: RetentionStats,
    stop: AtomicBool,
    /// One pass at a time in this process.
    pass_lock: tokio::sync::Mutex<()>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Retention {
    /// Starts the task (none when no table removes anything).
    pub fn start(memory: Arc<Memory>, policy: RetentionPolicy, every: Duration) -> Arc<Retention> {
        let active = policy.is_active();
        let r = Arc::new(Retention {
            memory,
            policy,
            clock: RwLock::new(Arc::new(now_nanos)),
            stats: RetentionStats::default(),
            stop: AtomicBool::new(false),
            pass_lock: tokio::sync::Mutex::new(()),
            task: Mutex::new(None),
        });
        if active {
            let weak = Arc::downgrade(&r);
            let task = tokio::spawn(async move {
                loop {
                    let Some(r) = weak.upgrade() else { return };
                    if r.stop.load(Ordering::Acquire) {
                        return;
                    }
                    match r.pass().await {
                        Ok(c) if c.total() > 0 => {
                            tracing::info!(
                                removed = c.total(),
                                turns = c.turns,
                                summaries = c.summaries,
                                episodes = c.episodes,
                                audit_records = c.audit_records,
                                facts = c.facts,
                                "retention pass"
                            );
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::error!(error = %e, "retention pass failed; it runs again at the next sweep")
                        }
                    }
                    drop(r);
                    tokio::time::sleep(every).await;
                }
            });
            *r.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        }
        r
    }

    /// Reads the time from `clock` from now on (tests move it by days).
    pub fn set_clock(&self, clock: Clock) {
        *self.clock.write().unwrap_or_else(|p| p.into_inner()) = clock;
    }

    /// The time as retention sees it.
    pub fn now(&self) -> UnixNanos {
        (self.clock.read().unwrap_or_else(|p| p.into_inner()))()
    }

    /// The policy applied.
    pub fn policy(&self) -> &RetentionPolicy {
        &self.policy
    }

    /// What the passes removed since start.
    pub fn stats(&self) -> &RetentionStats {
        &self.stats
    }

    /// Runs one pass now, as of the retention clock; returns what this
    /// daemon removed in it.
    pub async fn pass(&self) -> Result<RetentionCounts> {
        let _one = self.pass_lock.lock().await;
        let mut total = RetentionCounts::default();
        if !self.policy.is_active() {
            return Ok(total);
        }
        let now = self.now();
        let store = self.memory.store().clone();
        for (ns, id) in self.memory.retention_due(self.policy.clone(), now).await? {
            store.mark_due(WorkKind::Retention, &ns, &id, now_nanos(), None)?;
        }
        if self.policy.removes_facts() {
            store.mark_due(WorkKind::Retention, "", FACTS_ITEM, now_nanos(), None)?;
        }
        loop {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let claims = store.claim_due(
                WorkKind::Retention,
                now_nanos(),
                LEASE.as_nanos() as i64,
                CLAIM_BATCH,
            )?;
            if claims.is_empty() {
                break;
            }
            for claim in claims {
                let removed = if claim.namespace.is_empty() && claim.session_id == FACTS_ITEM {
                    self.memory
                        .retain_facts(&self.policy, now)
                        .await
                        .map(|facts| RetentionCounts {
                            facts,
                            ..Default::default()
                        })
                } else {
                    self.memory
                        .retain_session(&self.policy, &claim.namespace, &claim.session_id, now)
                        .await
                };
                match removed {
                    Ok(c) => {
                        self.stats.add(&c);
                        total.add(&c);
                    }
                    // The item stays claimed until its lease ends; then
                    // the next pass (here or elsewhere) takes it again.
                    Err(e) => {
                        tracing::error!(namespace = %claim.namespace, session_id = %claim.session_id, error = %e, "retention of an item failed");
                        continue;
                    }
                }
                if let Err(e) = store.complete_claim(&claim) {
                    tracing::warn!(namespace = %claim.namespace, session_id = %claim.session_id, error = %e, "retention claim lost");
                }
                if self.stop.load(Ordering::Acquire) {
                    break;
                }
            }
        }
        self.stats.passes.fetch_add(1, Ordering::Relaxed);
        Ok(total)
    }

    /// Stops the task (after the item in hand).
    pub async fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = task {
            // Let an item in hand finish: a pass checks `stop` between items.
            let _guard = self.pass_lock.lock().await;
            t.abort();
            let _ = t.await;
        }
    }
}
