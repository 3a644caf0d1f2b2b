//! Long-term memory in the store: facts (versions, key and duplicate
//! pointers), episodes with their carried-over actions, client-set action
//! statuses, and the search outbox. Every change is one atomic batch that
//! also queues an `IndexChange`, so the derived search index can always be
//! brought up to date from the store (see `search`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::engine::{Batch, Engine, Write};
use super::{codec, keys, KvStore};
use crate::error::{Error, Result};
use crate::memory::episodes::{self, ActionRef, CarriedAction, Episode};
use crate::memory::facts::{self, Fact, FactFilter, NewFact, PutOutcome};
use crate::memory::types::{now_nanos, SessionState};
use crate::summarize::model::{ActionStatus, PendingAction};

/// Something the search index must catch up with. Entries name what
/// changed, not its content: the indexer reads the store, so re-applying an
/// entry is harmless and a deleted record is removed from the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexChange {
    /// Turns were appended.
    Turns {
        /// Namespace.
        namespace: String,
        /// Session.
        session_id: String,
        /// First new seq.
        first_seq: u64,
        /// Last new seq.
        last_seq: u64,
    },
    /// A session was deleted: everything of it leaves the index.
    SessionDeleted {
        /// Namespace.
        namespace: String,
        /// Session.
        session_id: String,
    },
    /// A fact version was stored, superseded or deleted.
    Fact {
        /// Namespace.
        namespace: String,
        /// The version.
        fact_id: String,
    },
    /// A session's episode was written or changed.
    Episode {
        /// Namespace.
        namespace: String,
        /// Session.
        session_id: String,
    },
}

/// A page of a store-wide scan and where to resume (an opaque key).
pub type ScanPage<T> = (Vec<T>, Option<Vec<u8>>);

/// Ids of outbox entries and a count of those not yet acknowledged.
#[derive(Debug, Default)]
pub struct ChangeLog {
    next: AtomicU64,
    backlog: AtomicU64,
}

impl ChangeLog {
    /// Picks up after what `engine` holds.
    pub(super) fn recover(engine: &dyn Engine) -> Result<ChangeLog> {
        let log = ChangeLog::default();
        let mut from: Option<Vec<u8>> = None;
        let mut last = 0u64;
        loop {
            let bound = from.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let chunk = engine.scan(bound, &[keys::CHANGE], 4096)?;
            let Some((k, _)) = chunk.last() else { break };
            last = keys::seq_of(k);
            log.backlog.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            from = Some(k.clone());
        }
        // Ids follow the clock so they stay unique across restarts even if
        // the outbox was emptied; never below what is stored.
        log.next
            .store(last.max(now_nanos() as u64) + 1, Ordering::Relaxed);
        Ok(log)
    }

    /// A new outbox entry's write (counted once `apply` succeeded, by
    /// `committed`).
    pub(super) fn entry(&self, change: &IndexChange) -> Result<Write> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        Ok(Write::Put(keys::change(id), codec::encode(change)?))
    }

    /// Counts entries that were applied.
    pub(super) fn committed(&self, n: u64) {
        self.backlog.fetch_add(n, Ordering::Relaxed);
    }

    fn acked(&self, n: u64) {
        let _ = self
            .backlog
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(n))
            });
    }

    /// Entries not yet acknowledged by the indexer.
    pub fn backlog(&self) -> u64 {
        self.backlog.load(Ordering::Relaxed)
    }
}

/// Facts, episodes, carried actions and the search outbox.
pub trait LongTermStore {
    /// Stores a fact by the rules of `facts::plan_put`, under the subject's
    /// lock; returns the fact as stored and what happened.
    fn put_fact(&self, new: &NewFact) -> Result<(Fact, PutOutcome)>;

    /// One fact version; `NotFound` when absent.
    fn get_fact(&self, ns: &str, fact_id: &str) -> Result<Fact>;

    /// Facts passing `filter` after fact id `after`, in id order; examines
    /// at most `scan_limit`. The second value is where to resume.
    fn list_facts(
        &self,
        ns: &str,
        filter: &FactFilter,
        after: Option<&str>,
        limit: usize,
        scan_limit: usize,
    ) -> Result<(Vec<Fact>, Option<String>)>;

    /// Removes a fact version (and the pointers that named it).
    fn delete_fact(&self, ns: &str, fact_id: &str) -> Result<Fact>;

    /// Writes the episode of a stopped session from its latest summary,
    /// replacing an older one, with its carried actions. `None` when the
    /// session has no subject or summary, is active, or its episode is
    /// already up to date.
    fn save_episode(&self, ns: &str, session_id: &str) -> Result<Option<Episode>>;

    /// The episode of a session, if it has one.
    fn get_episode(&self, ns: &str, session_id: &str) -> Result<Option<Episode>>;

    /// A subject's episodes, newest first, after `(ended_at, session_id)`.
    fn list_episodes(
        &self,
        ns: &str,
        subject_id: &str,
        after: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<Episode>>;

    /// A subject's carried actions, at most `limit`.
    fn carried_actions(
        &self,
        ns: &str,
        subject_id: &str,
        limit: usize,
    ) -> Result<Vec<CarriedAction>>;

    /// Statuses clients set on a session's actions, by action seq.
    fn action_statuses(&self, ns: &str, session_id: &str) -> Result<BTreeMap<u64, ActionStatus>>;

    /// Sets the status of an action of a session's latest summary; a DONE
    /// action stops carrying over. `NotFound` for an unknown action.
    fn set_action_status(
        &self,
        ns: &str,
        action: &ActionRef,
        status: ActionStatus,
    ) -> Result<PendingAction>;

    /// Outbox entries, oldest first, at most `limit`.
    fn index_changes(&self, limit: usize) -> Result<Vec<(u64, IndexChange)>>;

    /// Removes outbox entries the index has durably absorbed.
    fn ack_index_changes(&self, ids: &[u64]) -> Result<()>;

    /// Outbox entries not yet acknowledged.
    fn index_backlog(&self) -> u64;

    /// Every fact version of every namespace (rebuilding the index).
    fn scan_facts(&self, after: Option<&[u8]>, limit: usize) -> Result<ScanPage<Fact>>;

    /// Every episode of every namespace (rebuilding the index).
    fn scan_episodes(&self, after: Option<&[u8]>, limit: usize) -> Result<ScanPage<Episode>>;
}

fn fact_not_found(ns: &str, fact_id: &str) -> Error {
    Error::NotFound(format!("fact {fact_id:?} not found in namespace {ns:?}"))
}

/// The pointer key that names `fact` while it is current: its key's, or
/// (unkeyed) its words'.
fn pointer_of(fact: &Fact) -> Vec<u8> {
    let (ns, subject) = (&fact.namespace, &fact.subject_id);
    if fact.key.is_empty() {
        keys::fact_words(ns, subject, &facts::normalized(&fact.text))
    } else {
        keys::fact_key(ns, subject, &fact.key)
    }
}

/// A lock name for a subject's facts that no session id can take (ids
/// cannot hold control characters).
fn subject_lock(subject_id: &str) -> String {
    format!("\u{1}facts\u{1}{subject_id}")
}

impl<E: Engine> KvStore<E> {
    fn read_fact(&self, ns: &str, fact_id: &str) -> Result<Option<Fact>> {
        self.read(&keys::fact(ns, fact_id), || {
            format!("fact {fact_id} of namespace {ns}")
        })
    }

    /// The fact a pointer names, if the pointer and the fact exist.
    fn pointed_fact(&self, ns: &str, pointer: &[u8]) -> Result<Option<Fact>> {
        let Some(id) = self.read::<String>(pointer, || format!("fact pointer in {ns}"))? else {
            return Ok(None);
        };
        self.read_fact(ns, &id)
    }

    /// Applies a batch, counting its outbox entries.
    fn apply_with_changes(&self, batch: Batch, changes: u64) -> Result<()> {
        self.engine().apply(batch)?;
        self.changes.committed(changes);
        Ok(())
    }

    fn scan_typed<T: serde::de::DeserializeOwned>(
        &self,
        tag: u8,
        after: Option<&[u8]>,
        limit: usize,
        what: &str,
    ) -> Result<ScanPage<T>> {
        let bound = after.map_or(Bound::Unbounded, Bound::Excluded);
        let entries = self.engine().scan(bound, &[tag], limit)?;
        let resume = (entries.len() == limit)
            .then(|| entries.last().map(|(k, _)| k.clone()))
            .flatten();
        let mut out = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            match codec::decode(&v, || {
                format!("{what} {}", String::from_utf8_lossy(&k[1..]))
            }) {
                Ok(x) => out.push(x),
                // A damaged record is left out of the index, not fatal.
                Err(e) => tracing::error!(error = %e, "skipping an unreadable record"),
            }
        }
        Ok((out, resume))
    }

    /// Removes a deleted session from the sources of the subject's
    /// extracted facts; an extracted fact left without a source is
    /// deleted (client facts stay: a client wrote them). Takes the
    /// subject's lock, so the caller must not hold a session lock.
    pub(super) fn forget_extracted(&self, ns: &str, subject: &str, session_id: &str) -> Result<()> {
        let _g = self.lock(ns, &subject_lock(subject));
        let mut batch = Batch::new();
        let mut changes = 0;
        let mut from: Option<Vec<u8>> = None;
        let prefix = keys::subject_facts_of(ns, subject);
        loop {
            let bound = from.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let chunk = self.engine().scan(bound, &prefix, 1024)?;
            let Some((last, _)) = chunk.last() else { break };
            from = Some(last.clone());
            for (k, _) in &chunk {
                let id = String::from_utf8_lossy(keys::last_component(k)).into_owned();
                let Some(mut fact) = self.read_fact(ns, &id)? else {
                    continue;
                };
                if fact.origin != facts::FactOrigin::Extracted
                    || !fact.sources.iter().any(|s| s.session_id == session_id)
                {
                    continue;
                }
                fact.sources.retain(|s| s.session_id != session_id);
                if fact.sources.is_empty() {
                    batch.push(Write::Delete(keys::fact(ns, &id)));
                    batch.push(Write::Delete(k.clone()));
                    self.unpoint(&fact, &mut batch)?;
                } else {
                    batch.push(Write::Put(keys::fact(ns, &id), codec::encode(&fact)?));
                }
                batch.push(self.changes.entry(&IndexChange::Fact {
                    namespace: ns.to_owned(),
                    fact_id: id,
                })?);
                changes += 1;
            }
        }
        if changes > 0 {
            self.apply_with_changes(batch, changes)?;
        }
        Ok(())
    }

    /// Deletes the pointer naming `fact`, if it still names this version
    /// (a newer one may have taken it).
    fn unpoint(&self, fact: &Fact, batch: &mut Batch) -> Result<()> {
        let pointer = pointer_of(fact);
        if self.read::<String>(&pointer, String::new)?.as_deref() == Some(fact.fact_id.as_str()) {
            batch.push(Write::Delete(pointer));
        }
        Ok(())
    }

    fn episode_key_of(&self, ns: &str, session_id: &str) -> Result<Option<Vec<u8>>> {
        self.engine().get(&keys::episode_of(ns, session_id))
    }
}

impl<E: Engine> LongTermStore for KvStore<E> {
    fn put_fact(&self, new: &NewFact) -> Result<(Fact, PutOutcome)> {
        let ns = new.namespace.as_str();
        let subject = new.subject_id.as_str();
        let _g = self.lock(ns, &subject_lock(subject));
        let words = facts::normalized(&new.text);
        let (same_key, same_words) = if new.key.is_empty() {
            (
                None,
                self.pointed_fact(ns, &keys::fact_words(ns, subject, &words))?,
            )
        } else {
            (
                self.pointed_fact(ns, &keys::fact_key(ns, subject, &new.key))?,
                None,
            )
        };
        let plan = facts::plan_put(
            new,
            same_key,
            same_words,
            ulid::Ulid::new().to_string(),
            now_nanos(),
        );
        let fact = plan.fact;
        if !plan.write {
            return Ok((fact, plan.outcome));
        }
        let mut batch = Batch::new();
        let mut changes = 1;
        match &plan.outcome {
            PutOutcome::KeptClientFact | PutOutcome::Merged => {}
            PutOutcome::Created | PutOutcome::Superseded(_) => {
                batch.push(Write::Put(
                    keys::subject_fact(ns, subject, &fact.fact_id),
                    Vec::new(),
                ));
                batch.push(Write::Put(pointer_of(&fact), codec::encode(&fact.fact_id)?));
            }
        }
        if let PutOutcome::Superseded(old) = &plan.outcome {
            batch.push(Write::Put(
                keys::fact(ns, &old.fact_id),
                codec::encode(old.as_ref())?,
            ));
            batch.push(self.changes.entry(&IndexChange::Fact {
                namespace: ns.to_owned(),
                fact_id: old.fact_id.clone(),
            })?);
            changes += 1;
        }
        batch.push(Write::Put(
            keys::fact(ns, &fact.fact_id),
            codec::encode(&fact)?,
        ));
        batch.push(self.changes.entry(&IndexChange::Fact {
            namespace: ns.to_owned(),
            fact_id: fact.fact_id.clone(),
        })?);
        self.apply_with_changes(batch, changes)?;
        Ok((fact, plan.outcome))
    }

    fn get_fact(&self, ns: &str, fact_id: &str) -> Result<Fact> {
        self.read_fact(ns, fact_id)?
            .ok_or_else(|| fact_not_found(ns, fact_id))
    }

    fn list_facts(
        &self,
        ns: &str,
        filter: &FactFilter,
        after: Option<&str>,
        limit: usize,
        scan_limit: usize,
    ) -> Result<(Vec<Fact>, Option<String>)> {
        match &filter.subject_id {
            Some(subject) => {
                let start = after.map(|a| keys::subject_fact(ns, subject, a));
                self.filtered_page(
                    start.as_deref(),
                    &keys::subject_facts_of(ns, subject),
                    limit,
                    scan_limit,
                    |k, _| {
                        let id = String::from_utf8_lossy(keys::last_component(k)).into_owned();
                        // An index entry without its fact: deleted meanwhile.
                        let fact = self.read_fact(ns, &id)?.filter(|f| filter.matches(f));
                        Ok((id, fact))
                    },
                )
            }
            None => {
                let start = after.map(|a| keys::fact(ns, a));
                self.filtered_page(
                    start.as_deref(),
                    &keys::facts_of(ns),
                    limit,
                    scan_limit,
                    |k, v| {
                        let id = String::from_utf8_lossy(keys::last_component(k)).into_owned();
                        let fact: Fact =
                            codec::decode(v, || format!("fact {id} of namespace {ns}"))?;
                        Ok((id, filter.matches(&fact).then_some(fact)))
                    },
                )
            }
        }
    }

    fn delete_fact(&self, ns: &str, fact_id: &str) -> Result<Fact> {
        let peek = self.get_fact(ns, fact_id)?;
        let subject = peek.subject_id.clone();
        let _g = self.lock(ns, &subject_lock(&subject));
        let fact = self.get_fact(ns, fact_id)?;
        let mut batch: Batch = vec![
            Write::Delete(keys::fact(ns, fact_id)),
            Write::Delete(keys::subject_fact(ns, &subject, fact_id)),
        ];
        self.unpoint(&fact, &mut batch)?;
        batch.push(self.changes.entry(&IndexChange::Fact {
            namespace: ns.to_owned(),
            fact_id: fact_id.to_owned(),
        })?);
        self.apply_with_changes(batch, 1)?;
        Ok(fact)
    }

    fn save_episode(&self, ns: &str, session_id: &str) -> Result<Option<Episode>> {
        let _g = self.lock(ns, session_id);
        let mut session = self.read_session(ns, session_id)?;
        let stopped = matches!(session.state, SessionState::Closed | SessionState::Idle);
        let version = session.summary.version;
        if !stopped
            || session.subject_id.is_empty()
            || version == 0
            || session.episode_version >= version
        {
            return Ok(None);
        }
        let summary = self.read_summary(ns, session_id, version)?.ok_or_else(|| {
            Error::NotFound(format!(
                "session {ns}/{session_id} has no summary {version}"
            ))
        })?;
        let overrides = self.action_statuses(ns, session_id)?;
        let (episode, carried) = episodes::episode_of(&session, &summary, &overrides, now_nanos());
        let subject = session.subject_id.clone();
        let mut batch = Batch::new();
        if let Some(old) = self.episode_key_of(ns, session_id)? {
            batch.push(Write::Delete(old));
        }
        for (k, _) in self.engine().scan(
            Bound::Unbounded,
            &keys::carried_of_session(ns, &subject, session_id),
            usize::MAX,
        )? {
            batch.push(Write::Delete(k));
        }
        let ekey = keys::episode(ns, &subject, episode.ended_at, session_id);
        batch.push(Write::Put(ekey.clone(), codec::encode(&episode)?));
        batch.push(Write::Put(keys::episode_of(ns, session_id), ekey));
        for c in &carried {
            batch.push(Write::Put(
                keys::carried(ns, &subject, session_id, c.action_ref.action_seq),
                codec::encode(c)?,
            ));
        }
        session.episode_version = version;
        batch.push(Write::Put(
            keys::session(ns, session_id),
            codec::encode(&session)?,
        ));
        batch.push(self.changes.entry(&IndexChange::Episode {
            namespace: ns.to_owned(),
            session_id: session_id.to_owned(),
        })?);
        self.apply_with_changes(batch, 1)?;
        Ok(Some(episode))
    }

    fn get_episode(&self, ns: &str, session_id: &str) -> Result<Option<Episode>> {
        let Some(k) = self.episode_key_of(ns, session_id)? else {
            return Ok(None);
        };
        self.read(&k, || format!("episode of session {ns}/{session_id}"))
    }

    fn list_episodes(
        &self,
        ns: &str,
        subject_id: &str,
        after: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<Episode>> {
        let start = after.map(|(t, id)| keys::episode(ns, subject_id, t, id));
        let bound = start.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        self.engine()
            .scan(bound, &keys::episodes_of(ns, subject_id), limit)?
            .into_iter()
            .map(|(_, v)| codec::decode(&v, || format!("an episode of subject {ns}/{subject_id}")))
            .collect()
    }

    fn carried_actions(
        &self,
        ns: &str,
        subject_id: &str,
        limit: usize,
    ) -> Result<Vec<CarriedAction>> {
        self.engine()
            .scan(
                Bound::Unbounded,
                &keys::carried_of_subject(ns, subject_id),
                limit,
            )?
            .into_iter()
            .map(|(_, v)| {
                codec::decode(&v, || {
                    format!("a carried action of subject {ns}/{subject_id}")
                })
            })
            .collect()
    }

    fn action_statuses(&self, ns: &str, session_id: &str) -> Result<BTreeMap<u64, ActionStatus>> {
        // Bounded by the summary's actions (one status per action).
        let mut out = BTreeMap::new();
        for (k, v) in self.engine().scan(
            Bound::Unbounded,
            &keys::action_statuses_of(ns, session_id),
            usize::MAX,
        )? {
            let st: ActionStatus = codec::decode(&v, || {
                format!("an action status of session {ns}/{session_id}")
            })?;
            out.insert(keys::seq_of(&k), st);
        }
        Ok(out)
    }

    fn set_action_status(
        &self,
        ns: &str,
        action: &ActionRef,
        status: ActionStatus,
    ) -> Result<PendingAction> {
        let sid = action.session_id.as_str();
        let _g = self.lock(ns, sid);
        let session = self.read_session(ns, sid)?;
        let unknown = || {
            Error::NotFound(format!(
                "session {ns}/{sid} has no pending action raised at turn {}; the action_seq is an action's first evidence seq",
                action.action_seq
            ))
        };
        let version = session.summary.version;
        if version == 0 {
            return Err(unknown());
        }
        let summary = self.read_summary(ns, sid, version)?.ok_or_else(unknown)?;
        let mut found = summary
            .pending_actions
            .iter()
            .find(|a| episodes::action_seq(a) == action.action_seq)
            .cloned()
            .ok_or_else(unknown)?;
        found.status = status;
        let mut batch: Batch = vec![Write::Put(
            keys::action_status(ns, sid, action.action_seq),
            codec::encode(&status)?,
        )];
        let mut changes = 0;
        if !session.subject_id.is_empty() {
            let subject = &session.subject_id;
            let ckey = keys::carried(ns, subject, sid, action.action_seq);
            if let Some(ekey) = self.episode_key_of(ns, sid)? {
                let mut ep: Episode = self
                    .read(&ekey, || format!("episode of session {ns}/{sid}"))?
                    .ok_or_else(unknown)?;
                ep.pending_actions
                    .retain(|a| episodes::action_seq(a) != action.action_seq);
                if status == ActionStatus::Done {
                    batch.push(Write::Delete(ckey));
                } else {
                    ep.pending_actions.push(found.clone());
                    ep.pending_actions.sort_by_key(episodes::action_seq);
                    let carried = CarriedAction {
                        action_ref: action.clone(),
                        action: found.clone(),
                        ended_at: ep.ended_at,
                    };
                    batch.push(Write::Put(ckey, codec::encode(&carried)?));
                }
                batch.push(Write::Put(ekey, codec::encode(&ep)?));
                batch.push(self.changes.entry(&IndexChange::Episode {
                    namespace: ns.to_owned(),
                    session_id: sid.to_owned(),
                })?);
                changes = 1;
            }
        }
        self.apply_with_changes(batch, changes)?;
        Ok(found)
    }

    fn index_changes(&self, limit: usize) -> Result<Vec<(u64, IndexChange)>> {
        self.engine()
            .scan(Bound::Unbounded, &[keys::CHANGE], limit)?
            .into_iter()
            .filter_map(|(k, v)| {
                let id = keys::seq_of(&k);
                match codec::decode(&v, || format!("search outbox entry {id}")) {
                    Ok(c) => Some(Ok((id, c))),
                    Err(e) => {
                        // A damaged entry cannot be applied; a rebuild
                        // (`mnemo reindex`) covers whatever it named.
                        tracing::error!(error = %e, "dropping an unreadable search outbox entry");
                        let _ = self.engine().apply(vec![Write::Delete(k)]);
                        None
                    }
                }
            })
            .collect()
    }

    fn ack_index_changes(&self, ids: &[u64]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.engine().apply(
            ids.iter()
                .map(|&id| Write::Delete(keys::change(id)))
                .collect(),
        )?;
        self.changes.acked(ids.len() as u64);
        Ok(())
    }

    fn index_backlog(&self) -> u64 {
        self.changes.backlog()
    }

    fn scan_facts(&self, after: Option<&[u8]>, limit: usize) -> Result<ScanPage<Fact>> {
        self.scan_typed(keys::FACT, after, limit, "fact")
    }

    fn scan_episodes(&self, after: Option<&[u8]>, limit: usize) -> Result<ScanPage<Episode>> {
        self.scan_typed(keys::EPISODE, after, limit, "episode")
    }
}
