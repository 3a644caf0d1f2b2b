//! The domain API of long-term memory: facts, episodes, pending actions
//! that carry over, and search; plus what the summary pipeline does after
//! a summary is stored (extract facts, close carried actions a later
//! session reports done, write the episode of a stopped session).

use super::episodes::{self, ActionRef, Episode};
use super::facts::{self, Fact, FactFilter, NewFact, PutOutcome};
use super::page::PageToken;
use super::types::{Session, Turn};
use super::{validate, Memory, Page};
use crate::error::{Error, Result};
use crate::search::{self, Hit, SearchQuery};
use crate::store::Store;
use crate::summarize::model::{ActionStatus, PendingAction};
use crate::summarize::{rules, SessionSummary};

/// Episodes per page when a request does not say.
pub const DEFAULT_EPISODE_PAGE: u32 = 20;
/// Most episodes per page.
pub const MAX_EPISODE_PAGE: u32 = 100;
/// Carried actions a session's summary is compared against.
const CARRIED_CHECKED: usize = 200;

impl Memory {
    /// Stores a client's fact; durable when it returns.
    pub async fn put_fact(&self, new: NewFact) -> Result<(Fact, PutOutcome)> {
        facts::validate(&new)?;
        let r = self
            .blocking(move |st| {
                if let Some(src) = &new.source {
                    let s = st.get_session(&new.namespace, &src.session_id)?;
                    if src.seq > s.last_seq() {
                        return Err(Error::invalid(format!(
                            "source.seq {} is not a turn of session {:?} (its last seq is {})",
                            src.seq,
                            src.session_id,
                            s.last_seq()
                        )));
                    }
                }
                st.put_fact(&new)
            })
            .await?;
        self.commit.durable().await?;
        self.indexer.nudge();
        Ok(r)
    }

    /// One fact version.
    pub async fn get_fact(&self, ns: &str, fact_id: &str) -> Result<Fact> {
        validate::id("namespace", ns)?;
        validate::id("fact_id", fact_id)?;
        let (ns, id) = (ns.to_owned(), fact_id.to_owned());
        self.blocking(move |st| st.get_fact(&ns, &id)).await
    }

    /// Facts of a namespace or subject, paginated.
    pub async fn list_facts(
        &self,
        ns: &str,
        filter: FactFilter,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<Fact>> {
        validate::id("namespace", ns)?;
        if let Some(s) = &filter.subject_id {
            validate::name("subject_id", s, validate::MAX_NAME_BYTES)?;
        }
        if let Some(t) = &filter.tag {
            facts::tag(t)?;
        }
        if let Some(k) = &filter.key {
            validate::name("key", k, facts::MAX_KEY_CHARS)?;
        }
        let limit = self.page_size(page_size)?;
        let after = match PageToken::decode(page_token)? {
            None => None,
            Some(PageToken::FactsAfter(id)) => Some(id),
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let ns = ns.to_owned();
        let (items, resume) = self
            .blocking(move |st| st.list_facts(&ns, &filter, after.as_deref(), limit, limit * 10))
            .await?;
        Ok(Page {
            items,
            next_page_token: resume.map(|id| PageToken::FactsAfter(id).encode()),
        })
    }

    /// Removes a fact version; durable when it returns.
    pub async fn delete_fact(&self, ns: &str, fact_id: &str) -> Result<Fact> {
        validate::id("namespace", ns)?;
        validate::id("fact_id", fact_id)?;
        let (n, id) = (ns.to_owned(), fact_id.to_owned());
        let fact = self.blocking(move |st| st.delete_fact(&n, &id)).await?;
        self.commit.durable().await?;
        self.indexer.nudge();
        Ok(fact)
    }

    /// A subject's episodes, newest first, paginated.
    pub async fn list_episodes(
        &self,
        ns: &str,
        subject_id: &str,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<Episode>> {
        validate::id("namespace", ns)?;
        if subject_id.is_empty() {
            return Err(Error::invalid("subject_id is required"));
        }
        validate::name("subject_id", subject_id, validate::MAX_NAME_BYTES)?;
        let limit = match page_size {
            0 => DEFAULT_EPISODE_PAGE,
            n if n <= MAX_EPISODE_PAGE => n,
            n => {
                return Err(Error::invalid(format!(
                    "page_size {n} is over the limit of {MAX_EPISODE_PAGE}"
                )))
            }
        } as usize;
        let after = match PageToken::decode(page_token)? {
            None => None,
            Some(PageToken::EpisodesAfter(t, id)) => Some((t, id)),
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let (ns, subject) = (ns.to_owned(), subject_id.to_owned());
        let mut items = self
            .blocking(move |st| {
                let after = after.as_ref().map(|(t, id)| (*t, id.as_str()));
                st.list_episodes(&ns, &subject, after, limit + 1)
            })
            .await?;
        let more = items.len() > limit;
        items.truncate(limit);
        let next_page_token = more
            .then(|| items.last())
            .flatten()
            .map(|e| PageToken::EpisodesAfter(e.ended_at, e.session_id.clone()).encode());
        Ok(Page {
            items,
            next_page_token,
        })
    }

    /// Sets a pending action's status; durable when it returns.
    pub async fn update_pending_action(
        &self,
        ns: &str,
        action: ActionRef,
        status: ActionStatus,
    ) -> Result<PendingAction> {
        validate::id("namespace", ns)?;
        validate::id("ref.session_id", &action.session_id)?;
        if action.action_seq == 0 {
            return Err(Error::invalid(
                "ref.action_seq is required: the action's first evidence seq",
            ));
        }
        let n = ns.to_owned();
        let a = self
            .blocking(move |st| st.set_action_status(&n, &action, status))
            .await?;
        self.commit.durable().await?;
        self.indexer.nudge();
        Ok(a)
    }

    /// Ranked search; the second value is the index backlog when it ran.
    pub async fn search(&self, q: SearchQuery) -> Result<(Vec<Hit>, u64)> {
        validate::id("namespace", &q.namespace)?;
        if let Some(s) = &q.subject_id {
            validate::name("subject_id", s, validate::MAX_NAME_BYTES)?;
        }
        if let Some(s) = &q.session_id {
            validate::id("session_id", s)?;
        }
        if q.query.trim().is_empty() {
            return Err(Error::invalid("query is required"));
        }
        if q.query.len() > search::MAX_QUERY_BYTES {
            return Err(Error::invalid(format!(
                "query is {} bytes; the limit is {}",
                q.query.len(),
                search::MAX_QUERY_BYTES
            )));
        }
        if q.limit > search::MAX_LIMIT as usize {
            return Err(Error::invalid(format!(
                "limit {} is over the limit of {}",
                q.limit,
                search::MAX_LIMIT
            )));
        }
        let index = self.search.clone();
        let lag = self.store.index_backlog();
        let hits = self.blocking(move |st| index.search(st, &q)).await?;
        Ok((hits, lag))
    }

    /// Outbox entries the search index has not applied yet.
    pub fn index_backlog(&self) -> u64 {
        self.store.index_backlog()
    }
}

/// What follows a stored summary (blocking; called by the pipeline with
/// the turns it folded): its facts become the subject's, carried actions
/// those turns report done are closed, and a stopped session gets its
/// episode. Failures are logged, not returned: the summary itself is
/// already stored.
pub fn after_summary(
    store: &dyn Store,
    session: &Session,
    summary: &SessionSummary,
    new_turns: &[Turn],
) {
    let (ns, sid, subject) = (&session.namespace, &session.session_id, &session.subject_id);
    if subject.is_empty() {
        return;
    }
    if session.settings.fact_extraction {
        for f in facts::extract(ns, subject, sid, summary, new_turns) {
            if let Err(e) = store.put_fact(&f) {
                tracing::warn!(namespace = %ns, session_id = %sid, error = %e, "storing an extracted fact failed");
            }
        }
    }
    if let Err(e) = close_reported_actions(store, session, new_turns) {
        tracing::warn!(namespace = %ns, session_id = %sid, error = %e, "closing carried actions failed");
    }
    settle_episode(store, ns, sid);
}

/// Writes the episode of a stopped session if it is not up to date.
pub fn settle_episode(store: &dyn Store, ns: &str, session_id: &str) {
    match store.save_episode(ns, session_id) {
        Ok(Some(e)) => {
            tracing::info!(namespace = %ns, session_id, subject_id = %e.subject_id, "episode written")
        }
        Ok(None) | Err(Error::NotFound(_)) => {}
        Err(e) => {
            tracing::warn!(namespace = %ns, session_id, error = %e, "writing the episode failed")
        }
    }
}

/// Marks DONE the subject's carried actions (from other sessions) that a
/// completion report in `turns` ("I've issued the refund for ORD-55123")
/// names: the summarizer's completion rule finds the report, and
/// `episodes::same_action` matches it to the action.
fn close_reported_actions(store: &dyn Store, session: &Session, turns: &[Turn]) -> Result<()> {
    let done: Vec<&str> = turns
        .iter()
        .flat_map(|t| rules::sentences(&t.content))
        .filter(|s| rules::is_completion(s))
        .collect();
    if done.is_empty() {
        return Ok(());
    }
    let ns = &session.namespace;
    for c in store.carried_actions(ns, &session.subject_id, CARRIED_CHECKED)? {
        if c.action_ref.session_id == session.session_id {
            continue;
        }
        if done
            .iter()
            .any(|d| episodes::same_action(d, &c.action.action))
        {
            store.set_action_status(ns, &c.action_ref, ActionStatus::Done)?;
            tracing::info!(namespace = %ns, from_session = %c.action_ref.session_id, by_session = %session.session_id, "a carried action was reported done");
        }
    }
    Ok(())
}
