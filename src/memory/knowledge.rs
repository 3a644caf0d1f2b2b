//! The domain API of long-term memory: facts, episodes, pending actions
//! that carry over, and search; plus what the summary pipeline does after
//! a summary is stored (extract facts, close carried actions a later
//! session reports done, write the episode of a stopped session). The
//! rules are `facts` and `episodes`; they reach the store as `decide`
//! closures.

use super::consistency::{ReadAfter, ReadScope, Waited};
use super::episodes::{self, ActionRef, Episode};
use super::facts::{self, Fact, FactFilter, NewFact, PutOutcome};
use super::page::PageToken;
use super::{validate, Event, Memory, Page};
use crate::error::{Error, Result};
use crate::model::{now_nanos, ActionStatus, FactIdentity, PendingAction, Session, Turn};
use crate::search::{self, Documents, Hit, Kind, SearchQuery};
use crate::store::Store;
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
        let (ns, subject) = (new.namespace.clone(), new.subject_id.clone());
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
                put_fact(st, &new)
            })
            .await?;
        self.notify(Event::KnowledgeChanged {
            namespace: Some(&ns),
            subject_id: Some(&subject),
            session_id: None,
        });
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
        self.notify(Event::KnowledgeChanged {
            namespace: Some(ns),
            subject_id: Some(&fact.subject_id),
            session_id: None,
        });
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
            .blocking(move |st| set_action_status(st, &n, &action, status))
            .await?;
        // Carried actions are the subject's; which subject is not known here.
        self.notify(Event::KnowledgeChanged {
            namespace: Some(ns),
            subject_id: None,
            session_id: None,
        });
        Ok(a)
    }

    /// Ranked search; the second value is the index backlog when it ran.
    /// It sees every write in its scope (session, subject or namespace)
    /// this process acknowledged before it arrived.
    pub async fn search(&self, q: SearchQuery) -> Result<(Vec<Hit>, u64)> {
        self.search_after(q, ReadAfter::OwnWrites).await
    }

    /// [`Memory::search`], seeing what `after` names.
    pub async fn search_after(&self, q: SearchQuery, after: ReadAfter) -> Result<(Vec<Hit>, u64)> {
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
        let scope = match (&q.session_id, &q.subject_id) {
            (Some(session), _) => ReadScope::Session(&q.namespace, session),
            (None, Some(subject)) => ReadScope::Subject(&q.namespace, subject),
            (None, None) => ReadScope::Namespace(&q.namespace),
        };
        self.await_index(after, scope).await?;
        let index = self.search.clone();
        let lag = self.index_backlog();
        let ns = q.namespace.clone();
        let hits = self
            .blocking(move |st| index.search(&q, &mut |hit| still_stored(st, &ns, hit)))
            .await?;
        Ok((hits, lag))
    }

    /// Waits, at most `limits.read_your_writes_wait_ms`, until the index
    /// has applied what `after` names. Past the bound, a read of its own
    /// writes is answered with what is indexed (its `index_lag` says how
    /// much is not), and a read with a token is refused: UNAVAILABLE
    /// naming the lag, to retry. A rebuilding index is not waited for
    /// (searches answer UNAVAILABLE, bundles go without retrieval).
    pub(super) async fn await_index(&self, after: ReadAfter, scope: ReadScope<'_>) -> Result<()> {
        if !self.search.is_ready() {
            return Ok(());
        }
        let target = self.clock.target(after, scope);
        let bound = std::time::Duration::from_millis(self.limits.read_your_writes_wait_ms);
        match (self.clock.wait_for(target, bound).await, after) {
            (Waited::CaughtUp, _) | (Waited::TimedOut, ReadAfter::OwnWrites) => Ok(()),
            (Waited::TimedOut, ReadAfter::Token(_)) => Err(Error::Unavailable(format!(
                "this daemon's search index has not yet applied the write the consistency token names ({} outbox entries behind after {} ms); retry shortly",
                self.index_backlog(),
                bound.as_millis()
            ))),
        }
    }

    /// Outbox entries this process's search index has not applied yet.
    pub fn index_backlog(&self) -> u64 {
        self.store
            .outbox_backlog(&self.search_consumer)
            .unwrap_or(0)
            .saturating_sub(self.clock.applied_ahead())
    }
}

/// Stores a fact by the rules of `facts::plan_put` (blocking).
pub fn put_fact(store: &dyn Store, new: &NewFact) -> Result<(Fact, PutOutcome)> {
    let identity = FactIdentity::of(&new.key, &new.text);
    let (fact_id, now) = (fact_id(), now_nanos());
    let plan = store.put_fact(&new.namespace, &new.subject_id, &identity, &mut |current| {
        // One lookup serves both rules: the identity is the key for keyed
        // facts and the words for unkeyed ones.
        let (same_key, same_words) = if new.key.is_empty() {
            (None, current)
        } else {
            (current, None)
        };
        Ok(facts::plan_put(
            new,
            same_key,
            same_words,
            fact_id.clone(),
            now,
        ))
    })?;
    Ok((plan.fact, plan.outcome))
}

/// A new fact id: a ULID, increasing even within one millisecond, so a
/// subject's facts sort by id in the order they were stored (the newest
/// facts are read by id, backwards).
fn fact_id() -> String {
    static IDS: std::sync::Mutex<Option<ulid::Generator>> = std::sync::Mutex::new(None);
    let mut ids = IDS.lock().unwrap_or_else(|p| p.into_inner());
    let generator = ids.get_or_insert_with(ulid::Generator::new);
    // Overflow needs 2^80 ids in one millisecond; a fresh one is fine then.
    generator
        .generate()
        .unwrap_or_else(|_| ulid::Ulid::new())
        .to_string()
}

/// Sets an action's status by the rules of `episodes::plan_action_status`
/// (blocking).
fn set_action_status(
    store: &dyn Store,
    ns: &str,
    action: &ActionRef,
    status: ActionStatus,
) -> Result<PendingAction> {
    store.set_action_status(ns, action, status, &mut |session, summary, episode| {
        episodes::plan_action_status(session, summary, episode, action.action_seq, status)
    })
}

/// Whether the store still holds what a hit names (and, for a fact, as
/// the current version).
fn still_stored(store: &dyn Store, ns: &str, hit: &Hit) -> Result<bool> {
    let found = match hit.kind {
        // The turn itself: an unacknowledged append lost in a crash may
        // have been indexed before it was durable.
        Kind::Turn => store
            .get_turns(ns, &hit.session_id, &[hit.seq])
            .map(|t| !t.is_empty()),
        Kind::Episode => store.get_episode(ns, &hit.session_id).map(|e| e.is_some()),
        Kind::Fact => store.get_fact(ns, &hit.fact_id).map(|f| f.is_current()),
    };
    match found {
        Ok(b) => Ok(b),
        Err(Error::NotFound(_)) => Ok(false),
        // A damaged record is not shown; the rest of the results are.
        Err(Error::DataLoss(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The store as the search index's [`Documents`].
pub struct StoredDocuments<'a>(pub &'a dyn Store);

impl Documents for StoredDocuments<'_> {
    fn session(&self, ns: &str, session_id: &str) -> Result<Session> {
        self.0.get_session(ns, session_id)
    }

    fn turns(
        &self,
        ns: &str,
        session_id: &str,
        from: u64,
        to: u64,
        limit: usize,
    ) -> Result<Vec<Turn>> {
        self.0.list_turns(ns, session_id, from, to, limit)
    }

    fn fact(&self, ns: &str, fact_id: &str) -> Result<Fact> {
        self.0.get_fact(ns, fact_id)
    }

    fn episode(&self, ns: &str, session_id: &str) -> Result<Option<Episode>> {
        self.0.get_episode(ns, session_id)
    }

    fn sessions_after(
        &self,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<search::SessionsPage> {
        let page = self.0.scan_sessions(after, limit)?;
        Ok((page.sessions, page.resume_after))
    }

    fn facts_after(
        &self,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<Fact>, Option<Vec<u8>>)> {
        self.0.scan_facts(after, limit)
    }

    fn episodes_after(
        &self,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<Episode>, Option<Vec<u8>>)> {
        self.0.scan_episodes(after, limit)
    }

    fn durable(&self) -> Result<()> {
        self.0.durable_reads()
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
    // Split once for both rules below (the summarizer split them too, but
    // keeps its sentences to itself).
    let split: Vec<facts::SplitTurn<'_>> = new_turns.iter().map(facts::SplitTurn::of).collect();
    if session.settings.fact_extraction {
        for f in facts::extract(ns, subject, sid, summary, &split) {
            if let Err(e) = put_fact(store, &f) {
                tracing::warn!(namespace = %ns, session_id = %sid, error = %e, "storing an extracted fact failed");
            }
        }
    }
    if let Err(e) = close_reported_actions(store, session, &split) {
        tracing::warn!(namespace = %ns, session_id = %sid, error = %e, "closing carried actions failed");
    }
    settle_episode(store, ns, sid);
}

/// Writes the episode of a stopped session if it is not up to date.
pub fn settle_episode(store: &dyn Store, ns: &str, session_id: &str) {
    let now = now_nanos();
    let saved = store.save_episode(ns, session_id, &mut |session, summary, overrides| {
        Ok(episodes::plan_episode(session, summary, overrides, now))
    });
    match saved {
        Ok(Some(e)) => {
            // The subject by the hash its erasure record would use: an id
            // in clear would outlive the subject's erasure in the logs.
            let subject = crate::model::subject_sha256(ns, &e.subject_id);
            tracing::info!(namespace = %ns, session_id, subject_sha256 = %subject, "episode written")
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
fn close_reported_actions(
    store: &dyn Store,
    session: &Session,
    turns: &[facts::SplitTurn<'_>],
) -> Result<()> {
    let done: Vec<&str> = turns
        .iter()
        .flat_map(|t| t.sentences.iter().copied())
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
            set_action_status(store, ns, &c.action_ref, ActionStatus::Done)?;
            tracing::info!(namespace = %ns, from_session = %c.action_ref.session_id, by_session = %session.session_id, "a carried action was reported done");
        }
    }
    Ok(())
}
