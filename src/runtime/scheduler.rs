//! The running-summary scheduler: sessions with a summary due are marked in
//! the store's claims (`Claims`, kind `Summary`), and one worker task claims
//! them under a lease and runs each through the domain's one summary
//! pipeline (`Memory::summarize_session`, durable on return), then
//! completes the claim. Client requests (Summarize with `wait`) come
//! through a bounded channel and go first.
//!
//! Automatic triggers never block the request path: marking is a note in
//! the claims table; when the table holds `queue` items, new work is
//! deferred (counted) and re-derived on the session's next append. At
//! start the runtime rescans stored sessions, so work is never forgotten
//! because the daemon stopped. Which trigger is due is the domain's rule
//! (`memory::summary::due`); when to run it is this file's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use crate::config::SummaryConfig;
use crate::error::{Error, Result};
use crate::memory::summary::{self as pipeline, Attempt};
use crate::memory::{Event, Memory, Notifier};
use crate::model::{now_nanos, Session, SessionState, Trigger};
use crate::store::{Claim, Store, WorkKind};

type Reply = oneshot::Sender<Result<Attempt>>;

/// A client's request.
struct Job {
    namespace: String,
    session_id: String,
    reply: Reply,
}

/// Claims taken per look at the table.
const CLAIM_BATCH: usize = 16;
/// Longest sleep between looks when nothing wakes the worker.
const IDLE_POLL: Duration = Duration::from_secs(1);

/// Counters of the scheduler.
#[derive(Debug, Default)]
pub struct SchedulerStats {
    /// Summaries stored.
    pub written: AtomicU64,
    /// Attempts refused by validation.
    pub refused: AtomicU64,
    /// Attempts that failed with an error.
    pub failed: AtomicU64,
    /// Automatic attempts deferred because the queue was full.
    pub deferred: AtomicU64,
}

/// Handle to the summary worker.
pub struct Scheduler {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    store: Arc<dyn Store>,
    wake: Arc<Notify>,
    stats: Arc<SchedulerStats>,
    config: SummaryConfig,
}

impl Scheduler {
    /// Starts the worker. Must be called inside a tokio runtime.
    pub fn start(memory: Arc<Memory>, config: SummaryConfig) -> Scheduler {
        let (tx, rx) = mpsc::channel(config.queue);
        let stats = Arc::new(SchedulerStats::default());
        let wake = Arc::new(Notify::new());
        let store = memory.store().clone();
        let worker = tokio::spawn(
            Worker {
                memory,
                store: store.clone(),
                wake: wake.clone(),
                stats: stats.clone(),
                config: config.clone(),
            }
            .run(rx),
        );
        Scheduler {
            tx: Mutex::new(Some(tx)),
            worker: Mutex::new(Some(worker)),
            store,
            wake,
            stats,
            config,
        }
    }

    /// The summary settings.
    pub fn config(&self) -> &SummaryConfig {
        &self.config
    }

    /// Sessions with an automatic attempt due or running now.
    pub fn queued(&self) -> usize {
        self.store.due_count(WorkKind::Summary).unwrap_or(0) as usize
    }

    /// The scheduler's counters.
    pub fn stats(&self) -> Arc<SchedulerStats> {
        self.stats.clone()
    }

    /// Marks an automatic attempt due if one is (or if `trigger` is given,
    /// e.g. CLOSE). Never waits. Returns whether an attempt for the session
    /// is now due.
    pub fn maybe_schedule(&self, session: &Session, trigger: Option<Trigger>) -> bool {
        let trigger = match trigger {
            Some(t) if session.next_seq - 1 > session.summary.through_seq => t,
            // Nothing new to summarize, but a stopped session may still
            // need its episode.
            Some(t) if pipeline::episode_due(session) => t,
            Some(_) => return false,
            None => match pipeline::due(session, &self.config) {
                Some(t) => t,
                None => return false,
            },
        };
        mark(
            &*self.store,
            &self.wake,
            &self.stats,
            &self.config,
            session,
            trigger,
        )
    }

    /// Runs an attempt for a client and waits for its result (before
    /// automatic work).
    pub async fn request(&self, ns: &str, session_id: &str) -> Result<Attempt> {
        let (tx, rx) = oneshot::channel();
        let job = Job {
            namespace: ns.to_owned(),
            session_id: session_id.to_owned(),
            reply: tx,
        };
        let sender = self
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Error::Internal("the summary worker has stopped".into()))?;
        sender.try_send(job).map_err(|_| {
            Error::ResourceExhausted("the summary queue is full; retry shortly".into())
        })?;
        rx.await
            .map_err(|_| Error::Internal("the summary worker dropped a request".into()))?
    }

    /// Stops taking requests, finishes the work due now and waits for the
    /// worker.
    pub async fn shutdown(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.wake.notify_one();
        let worker = self.worker.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = worker {
            if let Err(e) = w.await {
                tracing::error!(error = %e, "summary worker failed");
            }
        }
    }
}

/// Marks a session's summary due, unless the table is full (then the
/// attempt is deferred and counted: the next append derives it again).
fn mark(
    store: &dyn Store,
    wake: &Notify,
    stats: &SchedulerStats,
    config: &SummaryConfig,
    session: &Session,
    trigger: Trigger,
) -> bool {
    let full = store
        .due_count(WorkKind::Summary)
        .is_ok_and(|n| n >= config.queue as u64);
    let marked = !full
        && store
            .mark_due(
                WorkKind::Summary,
                &session.namespace,
                &session.session_id,
                now_nanos(),
                Some(trigger),
            )
            .is_ok();
    if marked {
        wake.notify_one();
    } else {
        stats.deferred.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(namespace = %session.namespace, session_id = %session.session_id, "summary queue full; summary deferred");
    }
    marked
}

/// The worker task's state.
struct Worker {
    memory: Arc<Memory>,
    store: Arc<dyn Store>,
    wake: Arc<Notify>,
    stats: Arc<SchedulerStats>,
    config: SummaryConfig,
}

impl Worker {
    async fn run(self, mut rx: mpsc::Receiver<Job>) {
        let mut open = true;
        loop {
            if open {
                match rx.try_recv() {
                    Ok(job) => {
                        self.serve(job).await;
                        continue;
                    }
                    Err(mpsc::error::TryRecvError::Disconnected) => open = false,
                    Err(mpsc::error::TryRecvError::Empty) => {}
                }
            }
            let claims = self
                .store
                .claim_due(
                    WorkKind::Summary,
                    now_nanos(),
                    Duration::from_secs(self.config.lease_secs).as_nanos() as i64,
                    CLAIM_BATCH,
                )
                .unwrap_or_else(|e| {
                    tracing::error!(error = %e, "claiming due summaries failed");
                    Vec::new()
                });
            if claims.is_empty() {
                // At shutdown: what was due now is done.
                if !open {
                    return;
                }
                let sleep = tokio::time::sleep(self.until_next());
                tokio::select! {
                    job = rx.recv() => match job {
                        Some(job) => self.serve(job).await,
                        None => open = false,
                    },
                    () = self.wake.notified() => {}
                    () = sleep => {}
                }
                continue;
            }
            for claim in claims {
                self.automatic(claim).await;
            }
        }
    }

    /// How long until the next claim can be taken (bounded).
    fn until_next(&self) -> Duration {
        match self.store.next_due(WorkKind::Summary) {
            Ok(Some(at)) => {
                Duration::from_nanos(at.saturating_sub(now_nanos()).max(1_000_000) as u64)
                    .min(IDLE_POLL)
            }
            _ => IDLE_POLL,
        }
    }

    async fn serve(&self, job: Job) {
        let result = self
            .memory
            .summarize_session(
                &job.namespace,
                &job.session_id,
                Trigger::Requested,
                true,
                false,
            )
            .await;
        self.count(&job.namespace, &job.session_id, &result);
        let _ = job.reply.send(result);
    }

    async fn automatic(&self, claim: Claim) {
        let (ns, id) = (&claim.namespace, &claim.session_id);
        let trigger = claim.trigger.unwrap_or(Trigger::EveryNTurns);
        let result = self
            .memory
            .summarize_session(ns, id, trigger, false, false)
            .await;
        if let Err(Error::Unavailable(why)) = &result {
            // Interrupted at shutdown: the start-up rescan finds it due again.
            tracing::info!(namespace = %ns, session_id = %id, reason = %why, "summary left for the next start");
            let _ = self.store.complete_claim(&claim);
            return;
        }
        self.count(ns, id, &result);
        if let Err(e) = self.store.complete_claim(&claim) {
            tracing::warn!(namespace = %ns, session_id = %id, error = %e, "summary claim lost");
        }
        // Appends during the attempt kept the session marked; whether it is
        // still due is decided on the session as it is now, so they do not
        // cause a second, tiny attempt.
        if let Ok(session) = self.memory.get_session(ns, id).await {
            match pipeline::due(&session, &self.config) {
                Some(trigger) => {
                    mark(
                        &*self.store,
                        &self.wake,
                        &self.stats,
                        &self.config,
                        &session,
                        trigger,
                    );
                }
                None => {
                    let _ = self.store.cancel_due(WorkKind::Summary, ns, id);
                }
            }
        }
    }

    fn count(&self, ns: &str, id: &str, result: &Result<Attempt>) {
        match result {
            Ok(Attempt::Stored(s)) => {
                self.stats.written.fetch_add(1, Ordering::Relaxed);
                tracing::info!(namespace = %ns, session_id = %id, version = s.version, through = s.covers_through_seq, "summary written");
            }
            Ok(Attempt::Refused(_)) => {
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Attempt::Unchanged) => {}
            // A deleted session needs no summary.
            Err(Error::NotFound(_)) => {}
            Err(e) => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(namespace = %ns, session_id = %id, error = %e, "summary failed");
            }
        }
    }
}

impl Notifier for Scheduler {
    fn notify(&self, event: &Event<'_>) {
        match event {
            Event::Appended { session, .. } => {
                self.maybe_schedule(session, None);
            }
            Event::Stopped { session, .. } => {
                let trigger = match session.state {
                    SessionState::Idle => Trigger::IdleTimeout,
                    _ => Trigger::Close,
                };
                self.maybe_schedule(session, Some(trigger));
            }
            Event::Deleted {
                namespace,
                session_id,
            } => {
                let _ = self
                    .store
                    .cancel_due(WorkKind::Summary, namespace, session_id);
            }
            _ => {}
        }
    }
}
