//! The running-summary scheduler: a bounded queue of sessions to summarize
//! and one worker task that runs each attempt through the domain's one
//! summary pipeline (`Memory::summarize_session`, durable on return).
//!
//! Automatic triggers never block the request path: when the queue is full
//! the attempt is deferred (counted) and re-derived on the session's next
//! append, and at start the runtime rescans stored sessions, so work is
//! never forgotten because the daemon stopped. Which trigger is due is the
//! domain's rule (`memory::summary::due`); when to run it is this file's.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::config::SummaryConfig;
use crate::error::{Error, Result};
use crate::memory::summary::{self as pipeline, Attempt};
use crate::memory::{Event, Memory, Notifier};
use crate::model::{Session, SessionState, Trigger};

type Reply = oneshot::Sender<Result<Attempt>>;

struct Job {
    namespace: String,
    session_id: String,
    trigger: Trigger,
    /// Set for client requests, which also ignore earlier refusals.
    reply: Option<Reply>,
}

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
    /// Sessions queued for an automatic attempt (deduplication).
    queued: Arc<Mutex<HashSet<(String, String)>>>,
    stats: Arc<SchedulerStats>,
    config: SummaryConfig,
}

impl Scheduler {
    /// Starts the worker. Must be called inside a tokio runtime.
    pub fn start(memory: Arc<Memory>, config: SummaryConfig) -> Scheduler {
        let (tx, rx) = mpsc::channel(config.queue);
        let queued = Arc::new(Mutex::new(HashSet::new()));
        let stats = Arc::new(SchedulerStats::default());
        let worker = tokio::spawn(work(
            rx,
            tx.downgrade(),
            memory,
            queued.clone(),
            stats.clone(),
            config.clone(),
        ));
        Scheduler {
            tx: Mutex::new(Some(tx)),
            worker: Mutex::new(Some(worker)),
            queued,
            stats,
            config,
        }
    }

    /// The summary settings.
    pub fn config(&self) -> &SummaryConfig {
        &self.config
    }

    /// Sessions queued for an automatic attempt now.
    pub fn queued(&self) -> usize {
        self.queued.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The scheduler's counters.
    pub fn stats(&self) -> Arc<SchedulerStats> {
        self.stats.clone()
    }

    fn sender(&self) -> Option<mpsc::Sender<Job>> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Queues an automatic attempt if one is due for `session` (or if
    /// `trigger` is given, e.g. CLOSE). Never waits. Returns whether an
    /// attempt for the session is now queued.
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
        let key = (session.namespace.clone(), session.session_id.clone());
        enqueue(self.sender(), &self.queued, &self.stats, key, trigger)
    }

    /// Runs an attempt for a client and waits for its result (queued behind
    /// earlier work).
    pub async fn request(&self, ns: &str, session_id: &str) -> Result<Attempt> {
        let (tx, rx) = oneshot::channel();
        let job = Job {
            namespace: ns.to_owned(),
            session_id: session_id.to_owned(),
            trigger: Trigger::Requested,
            reply: Some(tx),
        };
        let sender = self
            .sender()
            .ok_or_else(|| Error::Internal("the summary worker has stopped".into()))?;
        sender.try_send(job).map_err(|_| {
            Error::ResourceExhausted("the summary queue is full; retry shortly".into())
        })?;
        rx.await
            .map_err(|_| Error::Internal("the summary worker dropped a request".into()))?
    }

    /// Stops taking work, finishes what is queued and waits for the worker.
    pub async fn shutdown(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let worker = self.worker.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = worker {
            if let Err(e) = w.await {
                tracing::error!(error = %e, "summary worker failed");
            }
        }
    }
}

async fn work(
    mut rx: mpsc::Receiver<Job>,
    requeue: mpsc::WeakSender<Job>,
    memory: Arc<Memory>,
    queued: Arc<Mutex<HashSet<(String, String)>>>,
    stats: Arc<SchedulerStats>,
    config: SummaryConfig,
) {
    while let Some(job) = rx.recv().await {
        // An automatic job stays marked as queued while it runs, so appends
        // meanwhile do not queue a second, tiny attempt; what they make due
        // is re-checked when this one ends.
        let key = (job.namespace.clone(), job.session_id.clone());
        let automatic = job.reply.is_none();
        let force = job.reply.is_some();
        let result = memory
            .summarize_session(&key.0, &key.1, job.trigger, force)
            .await;
        match &result {
            Ok(Attempt::Stored(s)) => {
                stats.written.fetch_add(1, Ordering::Relaxed);
                tracing::info!(namespace = %key.0, session_id = %key.1, version = s.version, through = s.covers_through_seq, "summary written");
            }
            Ok(Attempt::Refused(_)) => {
                stats.refused.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Attempt::Unchanged) => {}
            // A deleted session needs no summary.
            Err(Error::NotFound(_)) => {}
            Err(e) => {
                stats.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(namespace = %key.0, session_id = %key.1, error = %e, "summary failed");
            }
        }
        if let Some(reply) = job.reply {
            let _ = reply.send(result);
        }
        if automatic {
            queued
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
            let session = memory.get_session(&key.0, &key.1).await;
            if let Ok(session) = session {
                if let Some(trigger) = pipeline::due(&session, &config) {
                    // A closed scheduler (shutdown) takes no new work.
                    if let Some(tx) = requeue.upgrade() {
                        enqueue(Some(tx), &queued, &stats, key, trigger);
                    }
                }
            }
        }
    }
}

/// Queues an automatic job unless one for the session is already queued.
/// When the queue is full (or closed) the job is deferred and counted: the
/// session's next append derives it again. Returns whether a job for the
/// session is now queued.
fn enqueue(
    tx: Option<mpsc::Sender<Job>>,
    queued: &Mutex<HashSet<(String, String)>>,
    stats: &SchedulerStats,
    key: (String, String),
    trigger: Trigger,
) -> bool {
    if !queued
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key.clone())
    {
        return true; // already queued; that attempt will see these turns
    }
    let job = Job {
        namespace: key.0.clone(),
        session_id: key.1.clone(),
        trigger,
        reply: None,
    };
    if matches!(tx.map(|tx| tx.try_send(job)), Some(Ok(()))) {
        return true;
    }
    queued
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key);
    stats.deferred.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(namespace = %key.0, session_id = %key.1, "summary queue full; summary deferred");
    false
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
            _ => {}
        }
    }
}
