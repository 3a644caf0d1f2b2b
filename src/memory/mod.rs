//! The domain layer: sessions and their turns. `Memory` validates requests,
//! counts tokens, calls the store off the async runtime and acknowledges
//! writes only once they are durable (group commit). It never sees gRPC
//! types; `api` converts to and from them.

pub mod episodes;
pub mod facts;
pub mod idle;
pub mod long_term;
pub mod page;
pub mod types;
pub mod validate;
pub mod watch;

use std::sync::{Arc, Mutex, Weak};

use sha2::{Digest, Sha256};

use self::idle::IdleTracker;
use self::page::PageToken;
use self::types::{
    now_nanos, AppendOutcome, NewTurn, OwnerChange, PreparedAppend, Role, Session, SessionFilter,
    SessionSettings, SessionState, Turn,
};
use self::watch::{Notice, SummaryWritten, WatchHub};
use crate::bundle::{self, Bundle, BundleRequest};
use crate::config::{Limits, SummaryConfig};
use crate::error::{Error, Precondition, Result};
use crate::search::indexer::Indexer;
use crate::search::SearchIndex;
use crate::store::commit::GroupCommit;
use crate::store::Store;
use crate::summarize::model::Trigger;
use crate::summarize::pipeline::Attempt;
use crate::summarize::records::{AuditKind, AuditRecord, ReviewItem, ReviewStatus};
use crate::summarize::scheduler::Scheduler;
use crate::summarize::SessionSummary;
use crate::tokens;

/// Default page size of list calls.
pub const DEFAULT_PAGE_SIZE: u32 = 100;

/// What a client asks for when creating a session.
#[derive(Debug, Clone, Default)]
pub struct NewSession {
    /// Required tenancy boundary.
    pub namespace: String,
    /// Client-chosen id; `None` = generate a ULID.
    pub session_id: Option<String>,
    /// Subject the session is about; may be empty.
    pub subject_id: String,
    /// Title; may be empty.
    pub title: String,
    /// Client key/value pairs.
    pub metadata: std::collections::BTreeMap<String, String>,
    /// Settings, defaults already filled in.
    pub settings: SessionSettings,
    /// The agent that owns the session at first; may be empty.
    pub owner_agent: String,
}

/// An append request.
#[derive(Debug, Clone)]
pub struct AppendRequest {
    /// The turns, in order.
    pub turns: Vec<NewTurn>,
    /// Retry key; `None` = not idempotent.
    pub idempotency_key: Option<String>,
    /// Optimistic check on `next_seq`.
    pub expected_next_seq: Option<u64>,
    /// Fencing: must equal the session's lease epoch.
    pub lease_epoch: Option<u64>,
}

/// A page of results and the token of the next page, if any.
#[derive(Debug, Clone)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// Opaque token of the next page.
    pub next_page_token: Option<String>,
}

/// A handoff request.
#[derive(Debug, Clone, Default)]
pub struct HandoffRequest {
    /// The current owner.
    pub from_agent: String,
    /// The new owner.
    pub to_agent: String,
    /// Why.
    pub reason: String,
    /// The lease epoch the caller holds.
    pub lease_epoch: u64,
    /// Budget of the returned bundle; 0 = the default.
    pub budget_tokens: u32,
    /// Makes a retry safe: a repeat with the same key replays the outcome.
    pub idempotency_key: Option<String>,
}

/// What a handoff did.
#[derive(Debug, Clone)]
pub struct HandoffOutcome {
    /// The session after the handoff.
    pub session: Session,
    /// The handoff event turn's seq.
    pub event_seq: u64,
    /// The lease epoch the handoff gave the new owner.
    pub lease_epoch: u64,
    /// True when this replays an earlier handoff with the same key.
    pub replayed: bool,
    /// The HANDOFF summary, when validation accepted it.
    pub summary: Option<SessionSummary>,
    /// The bundle for the new owner.
    pub bundle: Bundle,
}

/// Default budget of the bundle a handoff returns.
pub const HANDOFF_BUNDLE_TOKENS: u32 = 8000;
/// Longest handoff reason, in bytes.
pub const MAX_REASON_BYTES: usize = 4096;
/// Sessions idled per sweep before the sweeper yields.
const IDLE_SWEEP_BATCH: usize = 256;

/// Working memory: the domain API over a store.
pub struct Memory {
    store: Arc<dyn Store>,
    search: Arc<SearchIndex>,
    indexer: Arc<Indexer>,
    commit: Arc<GroupCommit>,
    summaries: Scheduler,
    limits: Limits,
    hub: Arc<WatchHub>,
    idle: Arc<IdleTracker>,
    sweeper: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Turns and tokens appended since start (metrics).
    appended: Arc<AppendCounters>,
}

/// Counters of what was appended since the daemon started.
#[derive(Debug, Default)]
pub struct AppendCounters {
    /// Turns.
    pub turns: std::sync::atomic::AtomicU64,
    /// Their tokens.
    pub tokens: std::sync::atomic::AtomicU64,
}

impl Memory {
    /// Wraps `store`, starting its group-commit thread, summary worker,
    /// idle sweeper and search indexer (over the index in `search_dir`, in
    /// memory when `None`; rebuilt from the store when missing or
    /// damaged), and queues the summaries and idle deadlines the stored
    /// sessions show. Must be called inside a tokio runtime.
    pub async fn open(
        store: Arc<dyn Store>,
        limits: Limits,
        summaries: SummaryConfig,
        search_dir: Option<std::path::PathBuf>,
    ) -> Result<Arc<Self>> {
        let scan = store.clone();
        let (search, rebuild) = tokio::task::spawn_blocking(move || {
            let (search, rebuild) = SearchIndex::open(search_dir.as_deref())?;
            // A new data dir has nothing to index: finish the (empty)
            // rebuild here, so a new daemon never answers UNAVAILABLE.
            if rebuild && holds_nothing_searchable(scan.as_ref())? {
                search.rebuild(scan.as_ref())?;
                return Ok::<_, Error>((search, false));
            }
            Ok((search, rebuild))
        })
        .await
        .map_err(|e| Error::Internal(format!("opening the search index failed: {e}")))??;
        let search = Arc::new(search);
        let indexer = Arc::new(Indexer::start(store.clone(), search.clone(), rebuild));
        let commit = Arc::new(GroupCommit::start(store.clone(), limits.sync_queue)?);
        let hub = Arc::new(WatchHub::new(
            limits.watch_buffer,
            limits.max_watches_per_namespace,
        ));
        let summaries = Scheduler::start(store.clone(), commit.clone(), hub.clone(), summaries);
        let memory = Arc::new(Memory {
            store,
            search,
            indexer,
            commit,
            summaries,
            limits,
            hub,
            idle: Arc::new(IdleTracker::default()),
            sweeper: Mutex::new(None),
            appended: Arc::new(AppendCounters::default()),
        });
        // The rescan reads every session record once (not their turns).
        let store = memory.store.clone();
        let idle = memory.idle.clone();
        let due = memory
            .summaries
            .rescan(store.as_ref(), &mut |s| idle.track(s))?;
        if due > 0 {
            tracing::info!(
                sessions = due,
                "resuming summaries that were due before the restart"
            );
        }
        let sweeper = tokio::spawn(sweep_idle(Arc::downgrade(&memory), memory.idle.clone()));
        *memory.sweeper.lock().unwrap_or_else(|p| p.into_inner()) = Some(sweeper);
        Ok(memory)
    }

    /// The registry of watchers.
    pub fn watch_hub(&self) -> &Arc<WatchHub> {
        &self.hub
    }

    /// Sessions waiting for their idle deadline.
    pub fn idle_tracked(&self) -> usize {
        self.idle.len()
    }

    /// The summary scheduler (its counters).
    pub fn summaries(&self) -> &Scheduler {
        &self.summaries
    }

    /// The search indexer (its counters).
    pub fn indexer(&self) -> &Indexer {
        &self.indexer
    }

    /// Turns and tokens appended since start.
    pub fn appended(&self) -> &AppendCounters {
        &self.appended
    }

    /// Ends watch streams, stops the idle sweeper and the summary worker
    /// (after its queued work), then syncs.
    pub async fn shutdown(&self) -> Result<()> {
        self.hub.close();
        let sweeper = self
            .sweeper
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(s) = sweeper {
            s.abort();
            let _ = s.await;
        }
        self.summaries.shutdown().await;
        self.sync().await?;
        // The outbox keeps whatever the indexer has not applied yet.
        let indexer = self.indexer.clone();
        tokio::task::spawn_blocking(move || indexer.stop())
            .await
            .map_err(|e| Error::Internal(format!("stopping the indexer failed: {e}")))
    }

    /// The group-commit handle (its counters show syncs per request).
    pub fn commit(&self) -> &GroupCommit {
        &self.commit
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

    /// Creates a session; durable when it returns.
    pub async fn create_session(&self, req: NewSession) -> Result<Session> {
        validate::id("namespace", &req.namespace)?;
        let session_id = match req.session_id {
            Some(id) => {
                validate::id("session_id", &id)?;
                id
            }
            None => ulid::Ulid::new().to_string(),
        };
        validate::name("subject_id", &req.subject_id, validate::MAX_NAME_BYTES)?;
        validate::name("title", &req.title, validate::MAX_TITLE_BYTES)?;
        validate::metadata("metadata", &req.metadata)?;
        validate::settings(&req.settings)?;
        validate::name("owner_agent", &req.owner_agent, validate::MAX_NAME_BYTES)?;
        let mut session = Session::new(&req.namespace, &session_id, req.settings, now_nanos());
        session.subject_id = req.subject_id;
        session.title = req.title;
        session.metadata = req.metadata;
        session.owner_agent = req.owner_agent;
        let s = session.clone();
        self.blocking(move |st| st.create_session(&s)).await?;
        self.commit.durable().await?;
        self.idle.track(&session);
        Ok(session)
    }

    /// Reads a session.
    pub async fn get_session(&self, ns: &str, session_id: &str) -> Result<Session> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        self.blocking(move |st| st.get_session(&ns, &id)).await
    }

    /// Lists sessions of a namespace, filtered and paginated.
    pub async fn list_sessions(
        &self,
        ns: &str,
        filter: SessionFilter,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<Session>> {
        validate::id("namespace", ns)?;
        if let Some(s) = &filter.subject_id {
            validate::name("subject_id", s, validate::MAX_NAME_BYTES)?;
        }
        let limit = self.page_size(page_size)?;
        let after = match PageToken::decode(page_token)? {
            None => None,
            Some(PageToken::SessionsAfter(id)) => Some(id),
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let ns = ns.to_owned();
        // Examine at most 10 pages' worth per call so a selective filter
        // returns a short page (with a token) instead of scanning forever.
        let scan_limit = limit * 10;
        let mut page = self
            .blocking(move |st| st.list_sessions(&ns, &filter, after.as_deref(), limit, scan_limit))
            .await?;
        // Like turns, a page is also cut to stay under half the message
        // limit: a session's metadata alone can reach 256 KiB.
        let byte_budget = self.limits.max_message_bytes / 2;
        let mut bytes = 0usize;
        let keep = page
            .sessions
            .iter()
            .take_while(|s| {
                bytes += session_size(s);
                bytes <= byte_budget
            })
            .count()
            .max(1)
            .min(page.sessions.len());
        if keep < page.sessions.len() {
            page.sessions.truncate(keep);
            page.resume_after = page.sessions.last().map(|s| s.session_id.clone());
        }
        Ok(Page {
            items: page.sessions,
            next_page_token: page
                .resume_after
                .map(|id| PageToken::SessionsAfter(id).encode()),
        })
    }

    /// Closes a session (idempotent); durable when it returns.
    pub async fn close_session(&self, ns: &str, session_id: &str) -> Result<Session> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let (s, changed) = self
            .blocking(move |st| {
                let mut changed = false;
                let s = st.update_session(&ns, &id, &mut |s| {
                    changed = s.state != SessionState::Closed;
                    if changed {
                        s.state = SessionState::Closed;
                        s.updated_at = now_nanos();
                    }
                    Ok(())
                })?;
                Ok((s, changed))
            })
            .await?;
        self.commit.durable().await?;
        self.idle.track(&s);
        if changed {
            self.hub.publish(
                &s.namespace,
                &s.session_id,
                Notice::State {
                    state: SessionState::Closed,
                    at_seq: s.last_seq(),
                },
            );
        }
        self.summaries.maybe_schedule(&s, Some(Trigger::Close));
        Ok(s)
    }

    /// Deletes a session and everything in it; durable when it returns.
    pub async fn delete_session(&self, ns: &str, session_id: &str) -> Result<u64> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let (n, i) = (ns.to_owned(), session_id.to_owned());
        let deleted = self.blocking(move |st| st.delete_session(&n, &i)).await?;
        self.commit.durable().await?;
        self.idle.forget(ns, session_id);
        self.hub.publish(ns, session_id, Notice::Deleted);
        self.indexer.nudge();
        Ok(deleted)
    }

    /// Appends turns; returns once they are durable on disk.
    pub async fn append_turns(
        &self,
        ns: &str,
        session_id: &str,
        req: AppendRequest,
    ) -> Result<AppendOutcome> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        validate::turns(&req.turns, &self.limits)?;
        if let Some(k) = &req.idempotency_key {
            if k.is_empty() {
                return Err(Error::invalid(
                    "idempotency_key must not be empty when given",
                ));
            }
            validate::name("idempotency_key", k, validate::MAX_IDEMPOTENCY_KEY_BYTES)?;
        }
        Ok(self.write_append(ns, session_id, req, None).await?.outcome)
    }

    /// Counts tokens, appends (with an ownership change for a handoff),
    /// waits until it is durable, then tells idle tracking, watchers and
    /// the summary scheduler. The request is already validated.
    async fn write_append(
        &self,
        ns: &str,
        session_id: &str,
        req: AppendRequest,
        handoff: Option<OwnerChange>,
    ) -> Result<crate::store::Appended> {
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let appended = self
            .blocking(move |st| {
                // The encoding is fixed at creation, so reading it outside
                // the store's lock is safe.
                let encoding = st.get_session(&ns, &id)?.settings.encoding;
                let token_counts = req
                    .turns
                    .iter()
                    .map(|t| tokens::count_turn(encoding, t))
                    .collect();
                let prepared = PreparedAppend {
                    fingerprint: fingerprint(&req.turns)?,
                    turns: req.turns,
                    token_counts,
                    idempotency_key: req.idempotency_key,
                    expected_next_seq: req.expected_next_seq,
                    lease_epoch: req.lease_epoch,
                    handoff,
                    now: now_nanos(),
                };
                st.append_turns(&ns, &id, &prepared)
            })
            .await?;
        // Replays wait too: the original write may not be durable yet.
        self.commit.durable().await?;
        self.after_append(&appended);
        Ok(appended)
    }

    /// What follows a durable append: idle deadline, watchers, summaries.
    fn after_append(&self, appended: &crate::store::Appended) {
        let (session, outcome) = (&appended.session, &appended.outcome);
        if outcome.replayed {
            return;
        }
        self.idle.track(session);
        use std::sync::atomic::Ordering::Relaxed;
        let turns = outcome.last_seq + 1 - outcome.first_seq;
        let tokens: u64 = outcome.token_counts.iter().map(|&t| u64::from(t)).sum();
        self.appended.turns.fetch_add(turns, Relaxed);
        self.appended.tokens.fetch_add(tokens, Relaxed);
        let (ns, id) = (&session.namespace, &session.session_id);
        if appended.previous_state != session.state {
            self.hub.publish(
                ns,
                id,
                Notice::State {
                    state: session.state,
                    at_seq: outcome.first_seq - 1,
                },
            );
        }
        self.hub.publish(
            ns,
            id,
            Notice::Appended {
                last_seq: outcome.last_seq,
            },
        );
        self.summaries.maybe_schedule(session, None);
        self.indexer.nudge();
    }

    /// Lists turns by seq range, oldest first, paginated. A page is also
    /// cut to stay under half the message limit.
    pub async fn list_turns(
        &self,
        ns: &str,
        session_id: &str,
        from_seq: u64,
        to_seq: Option<u64>,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<Turn>> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let limit = self.page_size(page_size)?;
        let from = match PageToken::decode(page_token)? {
            None => from_seq.max(1),
            Some(PageToken::TurnsFrom(seq)) => seq,
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let to = to_seq.unwrap_or(u64::MAX);
        let byte_budget = self.limits.max_message_bytes / 2;
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let mut turns = self
            .blocking(move |st| st.list_turns(&ns, &id, from, to, limit + 1))
            .await?;
        let mut bytes = 0usize;
        let mut keep = 0usize;
        for t in turns.iter().take(limit) {
            bytes += approx_size(t);
            if keep > 0 && bytes > byte_budget {
                break;
            }
            keep += 1;
        }
        let next = if turns.len() > keep {
            Some(PageToken::TurnsFrom(turns[keep].seq).encode())
        } else {
            None
        };
        turns.truncate(keep);
        Ok(Page {
            items: turns,
            next_page_token: next,
        })
    }

    /// Summarizes the turns not yet covered. With `wait`, returns the new
    /// (or, when nothing is new, the latest) summary. Without, returns the
    /// latest when nothing is new, else queues the work and returns `None`.
    pub async fn summarize(
        self: &Arc<Self>,
        ns: &str,
        session_id: &str,
        wait: bool,
    ) -> Result<Option<SessionSummary>> {
        let session = self.get_session(ns, session_id).await?;
        if session.turn_count == 0 {
            return Err(Error::FailedPrecondition(
                Precondition::NoTurns,
                format!("session {session_id:?} has no turns to summarize"),
            ));
        }
        if !wait {
            // Nothing new: the latest summary is the answer and nothing is
            // queued (the contract promises it).
            if session.summary.version > 0 && session.summary.through_seq >= session.last_seq() {
                return self.get_summary(ns, session_id, 0).await.map(Some);
            }
            let me = self.clone();
            let (ns, id) = (ns.to_owned(), session_id.to_owned());
            tokio::spawn(async move {
                if let Err(e) = me.summaries.request(&ns, &id).await {
                    tracing::warn!(namespace = %ns, session_id = %id, error = %e, "requested summary failed");
                }
            });
            return Ok(None);
        }
        match self.summaries.request(ns, session_id).await? {
            Attempt::Stored(s) => Ok(Some(*s)),
            Attempt::Unchanged => self.get_summary(ns, session_id, 0).await.map(Some),
            Attempt::Refused(errors) => Err(Error::Internal(format!(
                "the summarizer produced a summary that failed validation ({}); it was not stored, see GetAuditLog",
                errors.join("; ")
            ))),
        }
    }

    /// Summary `version` (0 = latest).
    pub async fn get_summary(
        &self,
        ns: &str,
        session_id: &str,
        version: u64,
    ) -> Result<SessionSummary> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        self.blocking(move |st| st.get_summary(&ns, &id, version))
            .await
    }

    /// Summary versions, newest first.
    pub async fn list_summaries(
        &self,
        ns: &str,
        session_id: &str,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<SessionSummary>> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let limit = self.page_size(page_size)?;
        let at_most = match PageToken::decode(page_token)? {
            None => u64::MAX,
            Some(PageToken::SummariesAtMost(v)) => v,
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let items = self
            .blocking(move |st| st.list_summaries(&ns, &id, at_most, limit))
            .await?;
        let next = match items.last() {
            Some(s) if items.len() == limit && s.version > 1 => {
                Some(PageToken::SummariesAtMost(s.version - 1).encode())
            }
            _ => None,
        };
        Ok(Page {
            items,
            next_page_token: next,
        })
    }

    /// The session's audit log, oldest first.
    pub async fn audit_log(
        &self,
        ns: &str,
        session_id: &str,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<AuditRecord>> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let limit = self.page_size(page_size)?;
        let after = match PageToken::decode(page_token)? {
            None => 0,
            Some(PageToken::AuditAfter(n)) => n,
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let items = self
            .blocking(move |st| st.list_audit(&ns, &id, after, limit))
            .await?;
        let next = match items.last() {
            Some(r) if items.len() == limit => Some(PageToken::AuditAfter(r.audit_seq).encode()),
            _ => None,
        };
        Ok(Page {
            items,
            next_page_token: next,
        })
    }

    /// The namespace's review queue, oldest first.
    pub async fn review_items(
        &self,
        ns: &str,
        include_resolved: bool,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<ReviewItem>> {
        validate::id("namespace", ns)?;
        let limit = self.page_size(page_size)?;
        let after = match PageToken::decode(page_token)? {
            None => None,
            Some(PageToken::ReviewsAfter(id)) => Some(id),
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let ns = ns.to_owned();
        let (items, resume) = self
            .blocking(move |st| {
                st.list_review_items(&ns, after.as_deref(), include_resolved, limit, limit * 10)
            })
            .await?;
        Ok(Page {
            items,
            next_page_token: resume.map(|id| PageToken::ReviewsAfter(id).encode()),
        })
    }

    /// Approves or rejects a review item; durable when it returns.
    pub async fn resolve_review_item(
        &self,
        ns: &str,
        review_id: &str,
        status: ReviewStatus,
        reviewer: &str,
        comment: &str,
    ) -> Result<ReviewItem> {
        validate::id("namespace", ns)?;
        validate::id("review_id", review_id)?;
        if status == ReviewStatus::Pending {
            return Err(Error::invalid("status must be APPROVED or REJECTED"));
        }
        if reviewer.is_empty() {
            return Err(Error::invalid("reviewer is required"));
        }
        validate::name("reviewer", reviewer, validate::MAX_NAME_BYTES)?;
        if comment.len() > validate::MAX_METADATA_VALUE_BYTES {
            return Err(Error::invalid(format!(
                "comment is {} bytes; the limit is {}",
                comment.len(),
                validate::MAX_METADATA_VALUE_BYTES
            )));
        }
        let audit = AuditRecord {
            audit_seq: 0,
            kind: AuditKind::ReviewResolved,
            created_at: now_nanos(),
            summary_version: 0,
            trigger: None,
            covers_through_seq: 0,
            pre_summary_tokens: 0,
            post_summary_tokens: 0,
            compression_ratio: 0.0,
            summarizer: String::new(),
            covered_turns_sha256: String::new(),
            validation_passed: true,
            validation_errors: Vec::new(),
            decisions: 0,
            pending_actions: 0,
            open_questions: 0,
            health_flags: Vec::new(),
            review_id: review_id.to_owned(),
            review_status: Some(status),
            reviewer: reviewer.to_owned(),
            comment: comment.to_owned(),
        };
        let (ns, id) = (ns.to_owned(), review_id.to_owned());
        let item = self
            .blocking(move |st| st.resolve_review_item(&ns, &id, status, audit))
            .await?;
        self.commit.durable().await?;
        Ok(item)
    }

    /// Builds a context bundle of a session (see [`crate::bundle`]).
    pub async fn get_context_bundle(
        &self,
        ns: &str,
        session_id: &str,
        req: BundleRequest,
    ) -> Result<Bundle> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        req.validate()?;
        // The text and its structured copy must fit one response message.
        let mut req = req;
        req.max_bytes = self.limits.max_message_bytes / 3;
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        self.blocking(move |st| bundle::build(st, &ns, &id, &req))
            .await
    }

    /// Hands a session from one agent to another: records the handoff
    /// event turn and the new owner and epoch atomically (durable on
    /// return), writes a HANDOFF summary covering every turn, and builds
    /// the new owner's bundle.
    pub async fn handoff(
        &self,
        ns: &str,
        session_id: &str,
        req: HandoffRequest,
    ) -> Result<HandoffOutcome> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        for (field, v) in [("from_agent", &req.from_agent), ("to_agent", &req.to_agent)] {
            if v.is_empty() {
                return Err(Error::invalid(format!("{field} is required")));
            }
            validate::name(field, v, validate::MAX_NAME_BYTES)?;
        }
        if req.from_agent == req.to_agent {
            return Err(Error::invalid("to_agent must differ from from_agent"));
        }
        if req.reason.len() > MAX_REASON_BYTES {
            return Err(Error::invalid(format!(
                "reason is {} bytes; the limit is {MAX_REASON_BYTES}",
                req.reason.len()
            )));
        }
        if req.lease_epoch == 0 {
            return Err(Error::invalid(
                "lease_epoch is required: pass the session's current lease epoch (GetSession)",
            ));
        }
        if let Some(k) = &req.idempotency_key {
            validate::name("idempotency_key", k, validate::MAX_IDEMPOTENCY_KEY_BYTES)?;
        }
        if req.budget_tokens != 0 {
            BundleRequest {
                budget_tokens: req.budget_tokens,
                ..Default::default()
            }
            .validate()?;
        }
        let next_epoch = req.lease_epoch + 1;
        let metadata = watch::HandoffEvent {
            from_agent: req.from_agent.clone(),
            to_agent: req.to_agent.clone(),
            reason: req.reason.clone(),
            lease_epoch: next_epoch,
            seq: 0,
        }
        .metadata();
        let reason = if req.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", req.reason)
        };
        let event = NewTurn {
            role: Role::System,
            speaker: "mnemo".to_owned(),
            content: format!(
                "Handoff from {} to {} (lease epoch {next_epoch}){reason}",
                req.from_agent, req.to_agent
            ),
            client_time: None,
            tool_call: None,
            metadata,
        };
        let change = OwnerChange {
            from_agent: req.from_agent.clone(),
            to_agent: req.to_agent.clone(),
        };
        let event = AppendRequest {
            turns: vec![event],
            idempotency_key: req.idempotency_key.clone(),
            expected_next_seq: None,
            lease_epoch: Some(req.lease_epoch),
        };
        let appended = self
            .write_append(ns, session_id, event, Some(change))
            .await?;
        let event_seq = appended.outcome.last_seq;
        let replayed = appended.outcome.replayed;

        // The summary covers every turn through the event turn. It runs
        // here rather than through the queue, so a full queue cannot delay
        // the handoff; a concurrent background attempt is retried against.
        // A replay writes nothing: it answers with the first summary that
        // covers the event turn (none when validation refused it).
        let summary = if replayed {
            let latest = appended.session.summary.version;
            let v = self
                .first_summary_covering(ns, session_id, event_seq, latest)
                .await?;
            if v > latest {
                None
            } else {
                Some(self.get_summary(ns, session_id, v).await?)
            }
        } else {
            self.summarize_now(ns, session_id, Trigger::Handoff).await?
        };
        let budget = match req.budget_tokens {
            0 => {
                let limit = appended.session.settings.context_limit_tokens;
                u32::try_from(limit.min(u64::from(HANDOFF_BUNDLE_TOKENS)))
                    .unwrap_or(HANDOFF_BUNDLE_TOKENS)
                    .max(bundle::MIN_BUDGET)
            }
            n => n,
        };
        let bundle = self
            .get_context_bundle(
                ns,
                session_id,
                BundleRequest {
                    budget_tokens: budget,
                    agent_id: req.to_agent.clone(),
                    ..Default::default()
                },
            )
            .await?;
        Ok(HandoffOutcome {
            session: bundle.session.clone(),
            event_seq,
            lease_epoch: next_epoch,
            replayed,
            summary,
            bundle,
        })
    }

    /// Runs a summary attempt on the blocking pool now (not queued),
    /// retrying when a concurrent attempt stored a version first. Returns
    /// the stored summary, or `None` when validation refused it.
    async fn summarize_now(
        &self,
        ns: &str,
        session_id: &str,
        trigger: Trigger,
    ) -> Result<Option<SessionSummary>> {
        let cfg = self.summaries.config().clone();
        for _ in 0..3 {
            let (ns_s, id_s, cfg) = (ns.to_owned(), session_id.to_owned(), cfg.clone());
            let attempt = self
                .blocking(move |st| {
                    crate::summarize::pipeline::run(st, &cfg, &ns_s, &id_s, trigger, true)
                })
                .await;
            match attempt {
                Err(Error::Aborted(_)) => continue,
                Err(e) => return Err(e),
                Ok(a) => {
                    self.commit.durable().await?;
                    return match a {
                        Attempt::Stored(s) => {
                            self.hub.publish(
                                ns,
                                session_id,
                                Notice::Summary(SummaryWritten::of(&s)),
                            );
                            Ok(Some(*s))
                        }
                        Attempt::Unchanged => self.get_summary(ns, session_id, 0).await.map(Some),
                        Attempt::Refused(_) => Ok(None),
                    };
                }
            }
        }
        Err(Error::Aborted(format!(
            "session {session_id:?} kept changing while its summary was written; retry"
        )))
    }

    /// Idles one session if its stored deadline has passed: state IDLE,
    /// durable, watchers told, IDLE_TIMEOUT summary queued. A session
    /// touched since gets its new deadline tracked instead.
    async fn idle_one(&self, ns: String, session_id: String) -> Result<()> {
        let now = now_nanos();
        let (n, i) = (ns.clone(), session_id.clone());
        let result = self
            .blocking(move |st| {
                let s = st.get_session(&n, &i)?;
                if s.state != SessionState::Active || s.idle_deadline() > now {
                    return Ok((s, false));
                }
                let mut changed = false;
                let s = st.update_session(&n, &i, &mut |s| {
                    changed = s.state == SessionState::Active && s.idle_deadline() <= now;
                    if changed {
                        s.state = SessionState::Idle;
                        s.updated_at = now;
                    }
                    Ok(())
                })?;
                Ok((s, changed))
            })
            .await;
        let (session, changed) = match result {
            Ok(r) => r,
            Err(Error::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        if !changed {
            self.idle.track(&session);
            return Ok(());
        }
        self.commit.durable().await?;
        tracing::info!(namespace = %ns, session_id = %session_id, "session idle");
        self.hub.publish(
            &ns,
            &session_id,
            Notice::State {
                state: SessionState::Idle,
                at_seq: session.last_seq(),
            },
        );
        self.summaries
            .maybe_schedule(&session, Some(Trigger::IdleTimeout));
        Ok(())
    }

    /// Makes every acknowledged and pending write durable (used at shutdown).
    pub async fn sync(&self) -> Result<()> {
        self.commit.durable().await
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

/// The idle sweeper: sleeps until the earliest tracked deadline (or a
/// minute, or an earlier deadline arriving), then idles what is due. Ends
/// when the memory is dropped or at shutdown.
async fn sweep_idle(memory: Weak<Memory>, idle: Arc<IdleTracker>) {
    loop {
        let now = now_nanos();
        let due = idle.take_due(now, IDLE_SWEEP_BATCH);
        let more = due.len() == IDLE_SWEEP_BATCH;
        if !due.is_empty() {
            let Some(memory) = memory.upgrade() else {
                return;
            };
            for (ns, id) in due {
                if let Err(e) = memory.idle_one(ns.clone(), id.clone()).await {
                    tracing::error!(namespace = %ns, session_id = %id, error = %e, "idling a session failed");
                }
            }
        }
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        let wait_ns = idle.next_deadline().map_or(60_000_000_000, |d| {
            d.saturating_sub(now_nanos())
                .clamp(1_000_000, 60_000_000_000)
        });
        let wait = std::time::Duration::from_nanos(wait_ns as u64);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = idle.wake.notified() => {}
        }
        if memory.strong_count() == 0 {
            return;
        }
    }
}

/// SHA-256 of the canonical encoding of an append's turns, so a reused
/// idempotency key with different turns is detected.
fn fingerprint(turns: &[NewTurn]) -> Result<[u8; 32]> {
    let bytes = postcard::to_stdvec(turns)
        .map_err(|e| Error::Internal(format!("cannot encode turns: {e}")))?;
    Ok(Sha256::digest(&bytes).into())
}

/// Rough encoded size of a session, for cutting pages under the message
/// limit.
fn session_size(s: &Session) -> usize {
    let meta: usize = s.metadata.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    256 + s.namespace.len()
        + s.session_id.len()
        + s.subject_id.len()
        + s.title.len()
        + s.owner_agent.len()
        + meta
}

/// Rough encoded size of a turn, for cutting pages under the message limit.
fn approx_size(t: &Turn) -> usize {
    let meta: usize = t.metadata.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    let tool = t.tool_call.as_ref().map_or(0, |c| {
        c.tool_name.len() + c.arguments_json.len() + c.result.len() + c.error_details.len() + 16
    });
    64 + t.speaker.len() + t.content.len() + meta + tool
}

/// Whether `store` holds no session, fact or episode (a new data dir).
fn holds_nothing_searchable(store: &dyn Store) -> Result<bool> {
    Ok(store.scan_sessions(None, 1)?.sessions.is_empty()
        && store.scan_facts(None, 1)?.0.is_empty()
        && store.scan_episodes(None, 1)?.0.is_empty())
}
