//! Drives subject erases to their end. An erase is a durable job in the
//! store; this task owns the per-process side: one driver task per job
//! (a second request for the same subject waits for the first), a sweep
//! that resumes jobs a crash interrupted (at start, and every
//! [`SWEEP_EVERY`]), and on a shared store jobs another daemon left (its
//! heartbeat older than `limits.erase_take_over_secs`). Shutdown stops the drivers
//! between steps; what is left resumes at the next start.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::model::{now_nanos, ErasureRecord};

/// How often jobs left by a crash or another daemon are looked for.
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// Jobs looked at per sweep.
const SWEEP_LIMIT: usize = 100;

type Outcome = Option<Result<ErasureRecord>>;
type Key = (String, String);
/// A running driver: its result when it ends, and its task.
type Driver = (watch::Receiver<Outcome>, JoinHandle<()>);

/// What this process's drivers did since start (metrics).
#[derive(Debug, Default)]
pub struct EraseStats {
    /// Erases finished here.
    pub finished: AtomicU64,
    /// Records removed by steps run here.
    pub records: AtomicU64,
}

/// The erase drivers of this process.
pub struct Eraser {
    stats: Arc<EraseStats>,
    memory: Arc<Memory>,
    /// A shared store's job whose heartbeat is this old is taken over.
    take_over_after: Duration,
    stop: Arc<AtomicBool>,
    running: Mutex<HashMap<Key, Driver>>,
    sweeper: Mutex<Option<JoinHandle<()>>>,
}

impl Eraser {
    /// Starts the sweep (its first pass resumes what a crash left).
    pub fn start(memory: Arc<Memory>, take_over_after: Duration) -> Arc<Eraser> {
        let eraser = Arc::new(Eraser {
            stats: Arc::default(),
            memory,
            take_over_after,
            stop: Arc::new(AtomicBool::new(false)),
            running: Mutex::new(HashMap::new()),
            sweeper: Mutex::new(None),
        });
        let weak = Arc::downgrade(&eraser);
        let sweeper = tokio::spawn(async move {
            loop {
                let Some(e) = weak.upgrade() else { return };
                if e.stop.load(Ordering::Acquire) {
                    return;
                }
                if let Err(err) = e.sweep().await {
                    tracing::error!(error = %err, "looking for erase jobs failed");
                }
                drop(e);
                tokio::time::sleep(SWEEP_EVERY).await;
            }
        });
        *eraser.sweeper.lock().unwrap_or_else(|p| p.into_inner()) = Some(sweeper);
        eraser
    }

    /// Erases a subject: records the job, drives it to its end (or joins
    /// the driver already running) and returns the erasure record. A job
    /// survives the caller going away: it is driven to its end anyway.
    pub async fn erase(
        self: &Arc<Self>,
        ns: &str,
        subject_id: &str,
        by: &str,
    ) -> Result<ErasureRecord> {
        self.memory.begin_erase(ns, subject_id, by).await?;
        let mut rx = self.drive((ns.to_owned(), subject_id.to_owned()));
        let outcome = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Error::Internal("the erase driver ended without a result".into()))?
            .clone();
        outcome.unwrap_or_else(|| Err(Error::Internal("no erase result".into())))
    }

    /// The driver of a job: the running one, or a new one.
    fn drive(self: &Arc<Self>, key: Key) -> watch::Receiver<Outcome> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.retain(|_, (_, handle)| !handle.is_finished());
        if let Some((rx, _)) = running.get(&key) {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(None);
        let (memory, stop, k) = (self.memory.clone(), self.stop.clone(), key.clone());
        let stats = self.stats.clone();
        let handle = tokio::spawn(async move {
            let outcome = run(&memory, &k.0, &k.1, &stop, &stats).await;
            if let Err(e) = &outcome {
                tracing::error!(namespace = %k.0, error = %e, "subject erase stopped; it resumes at the next sweep");
            }
            let _ = tx.send(Some(outcome));
        });
        running.insert(key, (rx.clone(), handle));
        rx
    }

    /// Resumes the jobs nobody in this process drives (left by a crash,
    /// or on a shared store by a daemon whose heartbeat stopped).
    async fn sweep(self: &Arc<Self>) -> Result<()> {
        let jobs = self.memory.erase_jobs(SWEEP_LIMIT).await?;
        let shared = self.memory.store().is_shared();
        let stale = now_nanos() - self.take_over_after.as_nanos() as i64;
        for job in jobs {
            let key = (job.namespace.clone(), job.subject_id.clone());
            let mine = self
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .is_some_and(|(_, h)| !h.is_finished());
            if mine || (shared && job.heartbeat_at > stale) {
                continue;
            }
            tracing::info!(namespace = %job.namespace, erasure_id = %job.erasure_id, "resuming a subject erase");
            drop(self.drive(key));
        }
        Ok(())
    }

    /// What the drivers did since start.
    pub fn stats(&self) -> &EraseStats {
        &self.stats
    }

    /// Erases being driven in this process now.
    pub fn running(&self) -> usize {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(_, h)| !h.is_finished())
            .count()
    }

    /// Stops the sweep and the drivers (each after its current step).
    pub async fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        let sweeper = self
            .sweeper
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(s) = sweeper {
            s.abort();
            let _ = s.await;
        }
        let drivers: Vec<JoinHandle<()>> = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, (_, h))| h)
            .collect();
        for d in drivers {
            let _ = d.await;
        }
    }
}

/// Steps an erase until nothing of the subject is left, then finishes it.
async fn run(
    memory: &Memory,
    ns: &str,
    subject_id: &str,
    stop: &AtomicBool,
    stats: &EraseStats,
) -> Result<ErasureRecord> {
    loop {
        if stop.load(Ordering::Acquire) {
            return Err(Error::Unavailable(
                "the daemon is shutting down; the erase resumes when it starts again".into(),
            ));
        }
        let step = memory.erase_step(ns, subject_id, now_nanos()).await?;
        stats
            .records
            .fetch_add(step.removed.total(), Ordering::Relaxed);
        if step.done {
            if let Some(record) = memory.finish_erase(ns, subject_id).await? {
                stats.finished.fetch_add(1, Ordering::Relaxed);
                return Ok(record);
            }
        }
    }
}
