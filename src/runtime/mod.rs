//! Per-process machinery around the domain, each part behind a small port
//! so a shared database can take its place later: the summary worker and
//! the idle sweeper (claims with leases, `store::Claims`), watch streams
//! (woken by the domain's `Notifier`) and the search indexer (an outbox
//! consumer with its own cursor). They hear
//! of durable changes through the [`Bus`], the domain's `Notifier`, and
//! act through the domain (`Memory`) or the store's ports, never below.
//!
//! `Runtime::start` wires them; `shutdown` stops them in order.

pub mod eraser;
pub mod idle;
pub mod indexer;
pub mod remote;
pub mod retention;
pub mod scheduler;
pub mod watch;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use self::eraser::Eraser;
use self::idle::IdleMarks;
use self::indexer::Indexer;
use self::retention::Retention;
use self::scheduler::Scheduler;
use self::watch::WatchHub;
use crate::config::{Limits, SummaryConfig};
use crate::error::{Error, Result};
use crate::memory::{AppendCounters, Event, Memory, Notifier, Parts};
use crate::search::SearchIndex;
use crate::store::{commit, Store};
use crate::summarize::{RuleBased, Summarizer};

/// Fans the domain's events out to the runtime's parts.
#[derive(Default)]
pub struct Bus {
    listeners: RwLock<Vec<Arc<dyn Notifier>>>,
}

impl Bus {
    /// Adds a listener.
    pub fn subscribe(&self, listener: Arc<dyn Notifier>) {
        self.listeners
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(listener);
    }

    /// Drops every listener (shutdown; breaks the reference cycles
    /// through the domain).
    pub fn clear(&self) {
        self.listeners
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

impl Notifier for Bus {
    fn notify(&self, event: &Event<'_>) {
        for l in self
            .listeners
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            l.notify(event);
        }
    }
}

/// Wakes the indexer on changes it will find in the outbox.
struct IndexerWake(Arc<Indexer>);

impl Notifier for IndexerWake {
    fn notify(&self, event: &Event<'_>) {
        match event {
            Event::Appended { .. }
            | Event::Deleted { .. }
            | Event::KnowledgeChanged { .. }
            | Event::TurnRemoved { .. } => self.0.nudge(),
            _ => {}
        }
    }
}

/// The domain and the per-process parts around it.
pub struct Runtime {
    memory: Arc<Memory>,
    bus: Arc<Bus>,
    summaries: Arc<Scheduler>,
    hub: Arc<WatchHub>,
    idle: Arc<IdleMarks>,
    indexer: Arc<Indexer>,
    /// Drives subject erases (set once started).
    eraser: Mutex<Option<Arc<Eraser>>>,
    /// Applies retention policies (set by `start_retention`).
    retention: Mutex<Option<Arc<Retention>>>,
    sweeper: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Follows other daemons' writes (a shared store only).
    follower: Mutex<Option<remote::Follower>>,
}

/// Sessions read per page of the start-up rescan.
const RESCAN_PAGE: usize = 1000;

impl Runtime {
    /// Opens the domain over `store` with the rule-based summarizer and
    /// starts the summary worker, idle sweeper and search indexer (over the
    /// index in `search_dir`, in memory when `None`; rebuilt from the store
    /// when missing or damaged); queues the summaries and idle deadlines the
    /// stored sessions show. Must be called inside a tokio runtime.
    pub async fn start(
        store: Arc<dyn Store>,
        limits: Limits,
        summaries: SummaryConfig,
        search_dir: Option<PathBuf>,
    ) -> Result<Arc<Runtime>> {
        Self::start_with(
            store,
            limits,
            summaries,
            search_dir,
            crate::memory::SEARCH_CONSUMER.to_owned(),
            Arc::new(RuleBased),
        )
        .await
    }

    /// As [`Runtime::start`], with another summarizer.
    pub async fn start_with(
        store: Arc<dyn Store>,
        limits: Limits,
        summaries: SummaryConfig,
        search_dir: Option<PathBuf>,
        search_consumer: String,
        summarizer: Arc<dyn Summarizer>,
    ) -> Result<Arc<Runtime>> {
        let scan = store.clone();
        let (search, rebuild) = tokio::task::spawn_blocking(move || {
            let (search, rebuild) = SearchIndex::open(search_dir.as_deref())?;
            // A new data dir has nothing to index: finish the (empty)
            // rebuild here, so a new daemon never answers UNAVAILABLE.
            if rebuild && holds_nothing_searchable(scan.as_ref())? {
                search.rebuild(&crate::memory::knowledge::StoredDocuments(scan.as_ref()))?;
                return Ok::<_, Error>((search, false));
            }
            Ok((search, rebuild))
        })
        .await
        .map_err(|e| Error::Internal(format!("opening the search index failed: {e}")))??;
        let search = Arc::new(search);
        let bus = Arc::new(Bus::default());
        let memory = Arc::new(Memory::new(Parts {
            store: store.clone(),
            search: search.clone(),
            limits: limits.clone(),
            summaries: summaries.clone(),
            summarizer,
            notifier: bus.clone(),
            search_consumer: search_consumer.clone(),
        }));
        let indexer = Arc::new(Indexer::start(
            store,
            search,
            rebuild,
            search_consumer,
            memory.index_clock().clone(),
        ));
        let hub = Arc::new(WatchHub::with_observers(
            limits.watch_buffer,
            limits.max_watches_per_namespace,
            limits.observer_watches(),
        ));
        let idle = Arc::new(IdleMarks::new(memory.store().clone()));
        let scheduler = Arc::new(Scheduler::start(memory.clone(), summaries));
        bus.subscribe(hub.clone());
        bus.subscribe(idle.clone());
        bus.subscribe(scheduler.clone());
        bus.subscribe(Arc::new(IndexerWake(indexer.clone())));
        let rt = Arc::new(Runtime {
            memory,
            bus,
            summaries: scheduler,
            hub,
            idle,
            indexer,
            eraser: Mutex::new(None),
            retention: Mutex::new(None),
            sweeper: Mutex::new(None),
            follower: Mutex::new(None),
        });
        let due = rt.rescan().await?;
        if due > 0 {
            tracing::info!(
                sessions = due,
                "resuming summaries that were due before the restart"
            );
        }
        let sweeper = tokio::spawn(idle::sweep(Arc::downgrade(&rt.memory), rt.idle.clone()));
        *rt.sweeper.lock().unwrap_or_else(|p| p.into_inner()) = Some(sweeper);
        *rt.eraser.lock().unwrap_or_else(|p| p.into_inner()) = Some(Eraser::start(
            rt.memory.clone(),
            std::time::Duration::from_secs(limits.erase_take_over_secs),
        ));
        *rt.follower.lock().unwrap_or_else(|p| p.into_inner()) =
            remote::follow(&rt.memory, &rt.hub, &rt.indexer);
        Ok(rt)
    }

    /// Reads every session record once (not their turns): idle deadlines
    /// are tracked and due summaries queued. Returns how many were queued.
    async fn rescan(&self) -> Result<usize> {
        let mut after: Option<(String, String)> = None;
        let mut queued = 0;
        loop {
            let page = self.memory.scan_sessions(after.take(), RESCAN_PAGE).await?;
            for e in &page.unreadable {
                tracing::error!(error = %e, "skipping a session whose record is unreadable");
            }
            let Some(resume) = page.resume_after else {
                return Ok(queued);
            };
            after = Some(resume);
            for s in &page.sessions {
                self.idle.track(s);
                if self.summaries.maybe_schedule(s, None) {
                    queued += 1;
                }
            }
        }
    }

    /// The domain.
    pub fn memory(&self) -> &Arc<Memory> {
        &self.memory
    }

    /// The registry of watchers.
    pub fn watch_hub(&self) -> &Arc<WatchHub> {
        &self.hub
    }

    /// The summary scheduler (its counters, client requests).
    pub fn summaries(&self) -> &Scheduler {
        &self.summaries
    }

    /// The subject eraser; UNAVAILABLE once shut down.
    pub fn eraser(&self) -> Result<Arc<Eraser>> {
        self.eraser
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Error::Unavailable("the daemon is shutting down".into()))
    }

    /// Starts applying `policy` every `every` (the first pass at once).
    pub fn start_retention(
        &self,
        policy: crate::config::RetentionPolicy,
        every: std::time::Duration,
    ) {
        let r = Retention::start(self.memory.clone(), policy, every);
        *self.retention.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    }

    /// The retention task, once started.
    pub fn retention(&self) -> Option<Arc<Retention>> {
        self.retention
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The search indexer (its counters).
    pub fn indexer(&self) -> &Indexer {
        &self.indexer
    }

    /// Sessions with an idle deadline marked.
    pub fn idle_tracked(&self) -> usize {
        self.idle.len()
    }

    /// Turns and tokens appended since start.
    pub fn appended(&self) -> &AppendCounters {
        self.memory.appended()
    }

    /// Outbox entries the search index has not applied yet.
    pub fn index_backlog(&self) -> u64 {
        self.memory.index_backlog()
    }

    /// The store's group-commit counters.
    pub fn sync_stats(&self) -> std::sync::Arc<commit::Stats> {
        self.memory.store().sync_stats()
    }

    /// Ends watch streams, stops the idle sweeper and the summary worker
    /// (after its queued work), flushes, then stops the indexer.
    pub async fn shutdown(&self) -> Result<()> {
        self.hub.close();
        let follower = self
            .follower
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        // Its listening thread stops within a second: off the runtime.
        tokio::task::spawn_blocking(move || drop(follower))
            .await
            .map_err(|e| Error::Internal(format!("stopping the follower failed: {e}")))?;
        let sweeper = self
            .sweeper
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(s) = sweeper {
            s.abort();
            let _ = s.await;
        }
        let retention = self
            .retention
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(r) = retention {
            r.shutdown().await;
        }
        let eraser = self.eraser.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(e) = eraser {
            e.shutdown().await;
        }
        // A model summary in progress is given up (its work stays due and
        // is folded at the next start) rather than waited for.
        self.memory.interrupt_summaries();
        self.summaries.shutdown().await;
        self.memory.flush().await?;
        self.bus.clear();
        // The outbox keeps whatever the indexer has not applied yet.
        let indexer = self.indexer.clone();
        tokio::task::spawn_blocking(move || indexer.stop())
            .await
            .map_err(|e| Error::Internal(format!("stopping the indexer failed: {e}")))
    }
}

/// Whether `store` holds no session, fact or episode (a new data dir).
fn holds_nothing_searchable(store: &dyn Store) -> Result<bool> {
    Ok(store.scan_sessions(None, 1)?.sessions.is_empty()
        && store.scan_facts(None, 1)?.0.is_empty()
        && store.scan_episodes(None, 1)?.0.is_empty())
}
