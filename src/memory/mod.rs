//! The domain layer: sessions and their turns. `Memory` validates requests,
//! counts tokens, calls the store off the async runtime and acknowledges
//! writes only once they are durable (group commit). It never sees gRPC
//! types; `api` converts to and from them.

pub mod page;
pub mod types;
pub mod validate;

use std::sync::Arc;

use sha2::{Digest, Sha256};

use self::page::PageToken;
use self::types::{
    now_nanos, AppendOutcome, NewTurn, PreparedAppend, Session, SessionFilter, SessionSettings,
    SessionState, Turn,
};
use crate::config::{Limits, SummaryConfig};
use crate::error::{Error, Result};
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
}

/// A page of results and the token of the next page, if any.
#[derive(Debug, Clone)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// Opaque token of the next page.
    pub next_page_token: Option<String>,
}

/// Working memory: the domain API over a store.
pub struct Memory {
    store: Arc<dyn Store>,
    commit: Arc<GroupCommit>,
    summaries: Scheduler,
    limits: Limits,
}

impl Memory {
    /// Wraps `store`, starting its group-commit thread and summary worker,
    /// and queues the summaries the stored sessions show are due. Must be
    /// called inside a tokio runtime.
    pub async fn open(
        store: Arc<dyn Store>,
        limits: Limits,
        summaries: SummaryConfig,
    ) -> Result<Self> {
        let commit = Arc::new(GroupCommit::start(store.clone(), limits.sync_queue)?);
        let summaries = Scheduler::start(store.clone(), commit.clone(), summaries);
        let memory = Memory {
            store,
            commit,
            summaries,
            limits,
        };
        // The rescan reads every session record once (not their turns).
        let store = memory.store.clone();
        let due = memory.summaries.rescan(store.as_ref())?;
        if due > 0 {
            tracing::info!(
                sessions = due,
                "resuming summaries that were due before the restart"
            );
        }
        Ok(memory)
    }

    /// The summary scheduler (its counters).
    pub fn summaries(&self) -> &Scheduler {
        &self.summaries
    }

    /// Stops the summary worker after its queued work, then syncs.
    pub async fn shutdown(&self) -> Result<()> {
        self.summaries.shutdown().await;
        self.sync().await
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
        let mut session = Session::new(&req.namespace, &session_id, req.settings, now_nanos());
        session.subject_id = req.subject_id;
        session.title = req.title;
        session.metadata = req.metadata;
        let s = session.clone();
        self.blocking(move |st| st.create_session(&s)).await?;
        self.commit.durable().await?;
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
        let page = self
            .blocking(move |st| st.list_sessions(&ns, &filter, after.as_deref(), limit, scan_limit))
            .await?;
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
        let s = self
            .blocking(move |st| {
                st.update_session(&ns, &id, &mut |s| {
                    if s.state != SessionState::Closed {
                        s.state = SessionState::Closed;
                        s.updated_at = now_nanos();
                    }
                    Ok(())
                })
            })
            .await?;
        self.commit.durable().await?;
        self.summaries.maybe_schedule(&s, Some(Trigger::Close));
        Ok(s)
    }

    /// Deletes a session and everything in it; durable when it returns.
    pub async fn delete_session(&self, ns: &str, session_id: &str) -> Result<u64> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let n = self.blocking(move |st| st.delete_session(&ns, &id)).await?;
        self.commit.durable().await?;
        Ok(n)
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
                    now: now_nanos(),
                };
                st.append_turns(&ns, &id, &prepared)
            })
            .await?;
        // Replays wait too: the original write may not be durable yet.
        self.commit.durable().await?;
        self.summaries.maybe_schedule(&appended.session, None);
        Ok(appended.outcome)
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
    /// (or, when nothing is new, the latest) summary; else queues the work
    /// and returns `None`.
    pub async fn summarize(
        self: &Arc<Self>,
        ns: &str,
        session_id: &str,
        wait: bool,
    ) -> Result<Option<SessionSummary>> {
        let session = self.get_session(ns, session_id).await?;
        if session.turn_count == 0 {
            return Err(Error::FailedPrecondition(format!(
                "session {session_id:?} has no turns to summarize"
            )));
        }
        if !wait {
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

/// SHA-256 of the canonical encoding of an append's turns, so a reused
/// idempotency key with different turns is detected.
fn fingerprint(turns: &[NewTurn]) -> Result<[u8; 32]> {
    let bytes = postcard::to_stdvec(turns)
        .map_err(|e| Error::Internal(format!("cannot encode turns: {e}")))?;
    Ok(Sha256::digest(&bytes).into())
}

/// Rough encoded size of a turn, for cutting pages under the message limit.
fn approx_size(t: &Turn) -> usize {
    let meta: usize = t.metadata.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    let tool = t.tool_call.as_ref().map_or(0, |c| {
        c.tool_name.len() + c.arguments_json.len() + c.result.len() + c.error_details.len() + 16
    });
    64 + t.speaker.len() + t.content.len() + meta + tool
}
