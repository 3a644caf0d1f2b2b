//! The domain: what mnemo does with sessions, turns, summaries and
//! long-term memory. `Memory` validates requests (every limit names itself
//! in its error), counts tokens, decides every write (the store applies
//! the decision atomically and returns once it is durable), runs the one
//! summary pipeline, gathers what a context bundle needs, and announces
//! what happened through the [`events::Notifier`] port.
//!
//! It never sees gRPC types (`api` converts), never runs per-process
//! machinery (queues, timers, watch streams: `runtime`), and never writes
//! bytes itself (`store`).
//!
//! - `sessions`, `turns`, `append`: working memory and the append rules.
//! - `summary`: the summary pipeline and the summary/audit/review API.
//! - `handoff`: ownership moves with a summary and a bundle.
//! - `knowledge`, `facts`, `episodes`: semantic and episodic memory.
//! - `gather`: what a context bundle is packed from.
//! - `erase`, `export`: a subject's erasure and access requests.
//! - `validate`, `page`: request checks and page tokens.

pub mod append;
pub mod consistency;
pub mod episodes;
pub mod erase;
pub mod events;
pub mod export;
pub mod facts;
mod gather;
pub mod handoff;
pub mod knowledge;
pub mod page;
pub mod profile;
mod recall;
pub mod retention;
pub mod sessions;
pub mod summary;
pub mod turns;
pub mod validate;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub use self::consistency::{ConsistencyToken, IndexClock, ReadAfter, ReadScope, WriteScope};
pub use self::events::{Event, Notifier};
pub use self::handoff::{HandoffOutcome, HandoffRequest};
pub use self::sessions::NewSession;
pub use self::turns::AppendRequest;
use crate::config::{Limits, SummaryConfig};
use crate::error::{Error, Result};
use crate::search::SearchIndex;
use crate::store::Store;
use crate::summarize::Summarizer;

/// Default page size of list calls.
pub const DEFAULT_PAGE_SIZE: u32 = 100;

/// A page of results and the token of the next page, if any.
#[derive(Debug, Clone)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// Opaque token of the next page.
    pub next_page_token: Option<String>,
}

/// Counters of what was appended since the daemon started.
#[derive(Debug, Default)]
pub struct AppendCounters {
    /// Turns.
    pub turns: AtomicU64,
    /// Their tokens.
    pub tokens: AtomicU64,
}

/// The parts `Memory` is made of.
pub struct Parts {
    /// Where everything is stored.
    pub store: Arc<dyn Store>,
    /// The search index (derived from the store).
    pub search: Arc<SearchIndex>,
    /// Request limits.
    pub limits: Limits,
    /// Summary settings.
    pub summaries: SummaryConfig,
    /// The summarizer.
    pub summarizer: Arc<dyn Summarizer>,
    /// Who hears about durable changes.
    pub notifier: Arc<dyn Notifier>,
    /// The outbox consumer name of this process's search index.
    pub search_consumer: String,
}

/// The domain API over a store.
pub struct Memory {
    store: Arc<dyn Store>,
    search: Arc<SearchIndex>,
    limits: Limits,
    summaries: SummaryConfig,
    summarizer: Arc<dyn Summarizer>,
    notifier: Arc<dyn Notifier>,
    /// This process's search index's outbox consumer name.
    search_consumer: String,
    /// Turns and tokens appended since start (metrics).
    appended: AppendCounters,
    /// Where appends spend their time, step by step.
    append_profile: profile::AppendProfile,
    /// Index-relevant writes and how far the index applied them.
    clock: Arc<IndexClock>,
}

/// The outbox consumer name of the search index of a daemon with a store
/// of its own (daemons sharing a database add their node id).
pub const SEARCH_CONSUMER: &str = "search";

impl Memory {
    /// The domain over `parts`.
    pub fn new(parts: Parts) -> Memory {
        Memory {
            store: parts.store,
            search: parts.search,
            limits: parts.limits,
            summaries: parts.summaries,
            summarizer: parts.summarizer,
            notifier: parts.notifier,
            search_consumer: parts.search_consumer,
            appended: AppendCounters::default(),
            append_profile: profile::AppendProfile::default(),
            clock: Arc::new(IndexClock::default()),
        }
    }

    /// The count of index-relevant writes and how far the index applied
    /// them (the runtime's indexer publishes its progress there).
    pub fn index_clock(&self) -> &Arc<IndexClock> {
        &self.clock
    }

    /// Tells the summarizer to stop waiting on outside services (at shutdown).
    /// The store (the runtime's indexer reads the outbox through it).
    pub fn interrupt_summaries(&self) {
        self.summarizer.interrupt();
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The search index.
    pub fn search_index(&self) -> &Arc<SearchIndex> {
        &self.search
    }

    /// The request limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The summary settings.
    pub fn summary_config(&self) -> &SummaryConfig {
        &self.summaries
    }

    /// Turns and tokens appended since start.
    pub fn appended(&self) -> &AppendCounters {
        &self.appended
    }

    /// Where appends spent their time since start, step by step.
    pub fn append_profile(&self) -> &profile::AppendProfile {
        &self.append_profile
    }

    /// Tells the listeners.
    fn notify(&self, event: Event<'_>) {
        // Counted before anyone hears of it, and so before it is
        // acknowledged: a read arriving after the acknowledgement, in the
        // scope of what the write touched, waits for the index to apply it.
        let touched = match &event {
            Event::Appended { session, .. } | Event::TurnRemoved { session, .. } => {
                Some(WriteScope {
                    namespace: Some(&session.namespace),
                    subject: Some(&session.subject_id),
                    session: Some(&session.session_id),
                })
            }
            // Whose subject it was is gone with it.
            Event::Deleted {
                namespace,
                session_id,
            } => Some(WriteScope {
                namespace: Some(namespace),
                subject: None,
                session: Some(session_id),
            }),
            Event::KnowledgeChanged {
                namespace,
                subject_id,
                session_id,
            } => Some(WriteScope {
                namespace: *namespace,
                subject: *subject_id,
                session: *session_id,
            }),
            _ => None,
        };
        if let Some(scope) = touched {
            self.clock.wrote(scope);
        }
        self.notifier.notify(&event);
    }

    /// Runs blocking store work on the blocking pool.
    async fn blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store) -> Result<T> + Send + 'static,
    {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(store.as_ref()))
            .await
            .map_err(|e| Error::Internal(format!("storage task failed: {e}")))?
    }

    /// Makes every write made so far durable (writes already are when they
    /// return; this also covers what a reader may have seen in flight).
    pub async fn flush(&self) -> Result<()> {
        self.blocking(|st| st.flush()).await
    }

    fn page_size(&self, requested: u32) -> Result<usize> {
        let max = self.limits.max_page_size;
        match requested {
            0 => Ok(DEFAULT_PAGE_SIZE.min(max) as usize),
            n if n <= max => Ok(n as usize),
            n => Err(Error::invalid(format!(
                "page_size {n} is over the limit of {max}"
            ))),
        }
    }
}
