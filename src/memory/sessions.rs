//! Sessions: create, read, list, close, delete, and the idle transition
//! the runtime's sweeper asks for. Each write returns once it is durable
//! and is then announced as an [`Event`].

use std::collections::BTreeMap;

use super::page::PageToken;
use super::{validate, Event, Memory, Page};
use crate::error::{Error, Result};
use crate::model::{now_nanos, FactOrigin, Session, SessionFilter, SessionSettings, SessionState};
use crate::store::{FactFate, SessionScan};

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
    pub metadata: BTreeMap<String, String>,
    /// Settings, defaults already filled in.
    pub settings: SessionSettings,
    /// The agent that owns the session at first; may be empty.
    pub owner_agent: String,
}

impl Memory {
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
        self.notify(Event::Created { session: &session });
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
        self.notify(Event::Stopped {
            session: &s,
            changed,
        });
        Ok(s)
    }

    /// Deletes a session and everything in it; durable when it returns.
    /// Facts extracted from it lose it as a source first (an extracted fact
    /// left without a source goes; client facts stay: a client wrote them).
    pub async fn delete_session(&self, ns: &str, session_id: &str) -> Result<u64> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let (n, i) = (ns.to_owned(), session_id.to_owned());
        let deleted = self
            .blocking(move |st| {
                // The facts first, under the subject's lock (never held
                // with a session lock). A crash before the session itself
                // is gone leaves a session whose delete can be retried.
                if let Ok(s) = st.get_session(&n, &i) {
                    if !s.subject_id.is_empty() {
                        st.revise_facts(&n, &s.subject_id, &mut |f| forget_source(f, &i))?;
                    }
                }
                st.delete_session(&n, &i)
            })
            .await?;
        self.notify(Event::Deleted {
            namespace: ns,
            session_id,
        });
        Ok(deleted)
    }

    /// Idles a session if its stored deadline has passed (state IDLE,
    /// durable, announced). Returns the session as it now is, or `None`
    /// when it is gone; a session touched since is returned unchanged.
    pub async fn idle_session(&self, ns: &str, session_id: &str) -> Result<Option<Session>> {
        let now = now_nanos();
        let (n, i) = (ns.to_owned(), session_id.to_owned());
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
            Err(Error::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        if changed {
            tracing::info!(namespace = %ns, session_id = %session_id, "session idle");
            self.notify(Event::Stopped {
                session: &session,
                changed,
            });
        }
        Ok(Some(session))
    }

    /// Stored sessions of every namespace after `after` (restart scans).
    pub async fn scan_sessions(
        &self,
        after: Option<(String, String)>,
        limit: usize,
    ) -> Result<SessionScan> {
        self.blocking(move |st| {
            st.scan_sessions(after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())), limit)
        })
        .await
    }
}

/// What becomes of a fact when session `session_id` is deleted.
fn forget_source(fact: &crate::model::Fact, session_id: &str) -> FactFate {
    if fact.origin != FactOrigin::Extracted
        || !fact.sources.iter().any(|s| s.session_id == session_id)
    {
        return FactFate::Keep;
    }
    let mut f = fact.clone();
    f.sources.retain(|s| s.session_id != session_id);
    if f.sources.is_empty() {
        FactFate::Delete
    } else {
        FactFate::Rewrite(Box::new(f))
    }
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
