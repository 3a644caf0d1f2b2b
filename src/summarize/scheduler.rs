//! The running-summary scheduler: a bounded queue of sessions to summarize
//! and one worker task that runs each attempt on the blocking pool, then
//! waits for group commit so a summary is durable before anyone is told.
//!
//! Automatic triggers never block the request path: when the queue is full
//! the attempt is deferred (counted) and re-derived on the session's next
//! append, and at start the scheduler rescans stored sessions, so work is
//! never forgotten because the daemon stopped.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::model::Trigger;
use super::pipeline::{self, Attempt};
use crate::config::SummaryConfig;
use crate::error::{Error, Result};
use crate::memory::types::Session;
use crate::memory::watch::{Notice, SummaryWritten, WatchHub};
use crate::store::commit::GroupCommit;
use crate::store::Store;

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
    pub fn start(
        store: Arc<dyn Store>,
        commit: Arc<GroupCommit>,
        hub: Arc<WatchHub>,
        config: SummaryConfig,
    ) -> Scheduler {
        let (tx, rx) = mpsc::channel(config.queue);
        let queued = Arc::new(Mutex::new(HashSet::new()));
        let stats = Arc::new(SchedulerStats::default());
        let worker = tokio::spawn(work(
            rx,
            tx.downgrade(),
            Outputs { store, commit, hub },
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

    /// Queues what stored sessions show is due (after a restart), showing
    /// every readable session to `observe` on the way.
    pub fn rescan(&self, store: &dyn Store, observe: &mut dyn FnMut(&Session)) -> Result<usize> {
        let mut after: Option<(String, String)> = None;
        let mut queued = 0;
        loop {
            let page =
                store.scan_sessions(after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())), 1000)?;
            for e in &page.unreadable {
                tracing::error!(error = %e, "skipping a session whose record is unreadable");
            }
            let Some(resume) = page.resume_after else {
                return Ok(queued);
            };
            after = Some(resume);
            for s in &page.sessions {
                observe(s);
                if self.maybe_schedule(s, None) {
                    queued += 1;
                }
            }
        }
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

/// Where the worker's results go: the store, group commit (a summary is
/// durable before anyone hears of it) and the watchers.
struct Outputs {
    store: Arc<dyn Store>,
    commit: Arc<GroupCommit>,
    hub: Arc<WatchHub>,
}

async fn work(
    mut rx: mpsc::Receiver<Job>,
    requeue: mpsc::WeakSender<Job>,
    outputs: Outputs,
    queued: Arc<Mutex<HashSet<(String, String)>>>,
    stats: Arc<SchedulerStats>,
    config: SummaryConfig,
) {
    let Outputs { store, commit, hub } = outputs;
    while let Some(job) = rx.recv().await {
        // An automatic job stays marked as queued while it runs, so appends
        // meanwhile do not queue a second, tiny attempt; what they make due
        // is re-checked when this one ends.
        let key = (job.namespace.clone(), job.session_id.clone());
        let automatic = job.reply.is_none();
        let st = store.clone();
        let cfg = config.clone();
        let force = job.reply.is_some();
        let (ns, id, trigger) = (job.namespace.clone(), job.session_id.clone(), job.trigger);
        let result = tokio::task::spawn_blocking(move || {
            pipeline::run(st.as_ref(), &cfg, &ns, &id, trigger, force)
        })
        .await
        .map_err(|e| Error::Internal(format!("summary task failed: {e}")))
        .and_then(|r| r);
        // Durable before anyone hears about it.
        let result = match result {
            Ok(a) => commit.durable().await.map(|()| a),
            Err(e) => Err(e),
        };
        match &result {
            Ok(Attempt::Stored(s)) => {
                stats.written.fetch_add(1, Ordering::Relaxed);
                hub.publish(&key.0, &key.1, Notice::Summary(SummaryWritten::of(s)));
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
            let st = store.clone();
            let (ns, id) = key.clone();
            let session = tokio::task::spawn_blocking(move || st.get_session(&ns, &id)).await;
            if let Ok(Ok(session)) = session {
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
