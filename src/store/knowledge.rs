//! Long-term memory in a `KvStore`: facts (versions, key and duplicate
//! pointers), episodes with their carried-over actions, and client-set
//! action statuses. The rules (supersede, merge, what an episode holds)
//! come from the domain as `decide` closures; every change is one atomic
//! batch that also adds an outbox entry, so the derived search index can
//! always be brought up to date from the store.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::engine::{Batch, Engine, Entry, Read, Write};
use super::records::{read, read_session, read_summary};
use super::{
    codec, keys, DecideAction, DecideEpisode, EpisodePlan, FactFate, KnowledgeStore, KvStore,
    ScanPage,
};
use crate::error::{Error, Result};
use crate::model::{
    ActionRef, ActionStatus, CarriedAction, Episode, Fact, FactFilter, FactIdentity, FactPlan,
    IndexChange, PendingAction, PutOutcome,
};

/// The value of a subject index entry whose fact is superseded. Entries of
/// current facts are empty, as are all entries written before the mark
/// existed: an empty entry is read to learn whether its fact is current,
/// a marked one is skipped unread when only current facts are wanted.
const SUPERSEDED: &[u8] = b"s";

/// The subject index entry's value for `fact`.
fn index_value(fact: &Fact) -> Vec<u8> {
    if fact.is_current() {
        Vec::new()
    } else {
        SUPERSEDED.to_vec()
    }
}

fn fact_not_found(ns: &str, fact_id: &str) -> Error {
    Error::NotFound(format!("fact {fact_id:?} not found in namespace {ns:?}"))
}

/// The pointer key that names `fact` while it is current: its key's, or
/// (unkeyed) its words'.
fn pointer_of(fact: &Fact) -> Vec<u8> {
    pointer(&fact.namespace, &fact.subject_id, &fact.identity())
}

/// The pointer key of an identity.
fn pointer(ns: &str, subject: &str, identity: &FactIdentity) -> Vec<u8> {
    match identity {
        FactIdentity::Words(words) => keys::fact_words(ns, subject, words),
        FactIdentity::Key(key) => keys::fact_key(ns, subject, key),
    }
}

/// A lock name for a subject's facts that no session id can take (ids
/// cannot hold control characters).
pub(super) fn subject_lock(subject_id: &str) -> String {
    format!("\u{1}facts\u{1}{subject_id}")
}

pub(super) fn read_fact(r: &dyn Read, ns: &str, fact_id: &str) -> Result<Option<Fact>> {
    read(r, &keys::fact(ns, fact_id), || {
        format!("fact {fact_id} of namespace {ns}")
    })
}

/// The fact a pointer names, if the pointer and the fact exist.
fn pointed_fact(r: &dyn Read, ns: &str, pointer: &[u8]) -> Result<Option<Fact>> {
    let Some(id) = read::<String>(r, pointer, || format!("fact pointer in {ns}"))? else {
        return Ok(None);
    };
    read_fact(r, ns, &id)
}

/// Deletes the pointer naming `fact`, if it still names this version (a
/// newer one may have taken it).
pub(super) fn unpoint(r: &dyn Read, fact: &Fact, batch: &mut Batch) -> Result<()> {
    let pointer = pointer_of(fact);
    if read::<String>(r, &pointer, String::new)?.as_deref() == Some(fact.fact_id.as_str()) {
        batch.push(Write::Delete(pointer));
    }
    Ok(())
}

fn episode_key_of(r: &dyn Read, ns: &str, session_id: &str) -> Result<Option<Vec<u8>>> {
    r.get(&keys::episode_of(ns, session_id))
}

/// Statuses clients set on a session's actions, by action seq.
fn action_statuses(
    r: &dyn Read,
    ns: &str,
    session_id: &str,
) -> Result<BTreeMap<u64, ActionStatus>> {
    // Bounded by the summary's actions (one status per action).
    let mut out = BTreeMap::new();
    for (k, v) in r.scan(
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

impl<E: Engine> KvStore<E> {
    fn scan_typed<T: serde::de::DeserializeOwned + 'static>(
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

    /// The current facts among the subject index entries `index`, in
    /// their order, appended to `out` until it holds `limit`. Entries
    /// marked superseded are skipped unread; the others are read a chunk
    /// at a time (an unmarked entry of an earlier release may still name a
    /// superseded version, so a chunk may not fill the page).
    fn current_facts(
        &self,
        ns: &str,
        index: &[Entry],
        limit: usize,
        out: &mut Vec<Fact>,
    ) -> Result<()> {
        if out.len() >= limit {
            return Ok(());
        }
        let unmarked: Vec<&Entry> = index.iter().filter(|(_, v)| v != SUPERSEDED).collect();
        for chunk in unmarked.chunks(limit.clamp(16, 256)) {
            let ids: Vec<&[u8]> = chunk.iter().map(|(k, _)| keys::last_component(k)).collect();
            let keys: Vec<Vec<u8>> = ids
                .iter()
                .map(|id| keys::fact(ns, &String::from_utf8_lossy(id)))
                .collect();
            for (id, value) in ids.iter().zip(self.engine().get_many(&keys)?) {
                let Some(v) = value else { continue };
                let f: Fact = codec::decode(&v, || {
                    format!("fact {} of namespace {ns}", String::from_utf8_lossy(id))
                })?;
                if f.is_current() {
                    out.push(f);
                    if out.len() == limit {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }
}

impl<E: Engine> KnowledgeStore for KvStore<E> {
    fn put_fact(
        &self,
        ns: &str,
        subject: &str,
        identity: &FactIdentity,
        decide: &mut dyn FnMut(Option<Fact>) -> Result<FactPlan>,
    ) -> Result<FactPlan> {
        let plan = self.locked(ns, &subject_lock(subject), |tx| {
            super::erase::refuse_if_erasing(tx, ns, subject)?;
            let plan = decide(pointed_fact(tx, ns, &pointer(ns, subject, identity))?)?;
            if !plan.write {
                return Ok(plan);
            }
            let fact = &plan.fact;
            let mut batch = Batch::new();
            let mut notes = Vec::new();
            match &plan.outcome {
                PutOutcome::KeptClientFact | PutOutcome::Merged => {}
                PutOutcome::Created | PutOutcome::Superseded(_) => {
                    batch.push(Write::Put(
                        keys::subject_fact(ns, subject, &fact.fact_id),
                        index_value(fact),
                    ));
                    batch.push(Write::Put(pointer_of(fact), codec::encode(&fact.fact_id)?));
                }
            }
            if let PutOutcome::Superseded(old) = &plan.outcome {
                batch.push(Write::Put(
                    keys::subject_fact(ns, subject, &old.fact_id),
                    index_value(old),
                ));
                batch.push(Write::Put(
                    keys::fact(ns, &old.fact_id),
                    codec::encode(old.as_ref())?,
                ));
                notes.push(IndexChange::Fact {
                    namespace: ns.to_owned(),
                    fact_id: old.fact_id.clone(),
                });
            }
            batch.push(Write::Put(
                keys::fact(ns, &fact.fact_id),
                codec::encode(fact)?,
            ));
            notes.push(IndexChange::Fact {
                namespace: ns.to_owned(),
                fact_id: fact.fact_id.clone(),
            });
            self.changes.commit(tx, batch, notes)?;
            Ok(plan)
        })?;
        if plan.write {
            self.durable()?;
        }
        Ok(plan)
    }

    fn get_fact(&self, ns: &str, fact_id: &str) -> Result<Fact> {
        read_fact(self.engine(), ns, fact_id)?.ok_or_else(|| fact_not_found(ns, fact_id))
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
                    |k, v| {
                        let id = String::from_utf8_lossy(keys::last_component(k)).into_owned();
                        if v == SUPERSEDED && !filter.include_history {
                            return Ok((id, None));
                        }
                        // An index entry without its fact: deleted meanwhile.
                        let fact = read_fact(self.engine(), ns, &id)?.filter(|f| filter.matches(f));
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

    fn recent_facts(
        &self,
        ns: &str,
        subject: &str,
        limit: usize,
        scan_limit: usize,
    ) -> Result<Vec<Fact>> {
        // Fact ids are ULIDs: the subject index read backwards is newest
        // first. It is read twice as far as the page first, and to
        // `scan_limit` only when superseded versions left the page short
        // (the entries read already are not read again).
        let prefix = keys::subject_facts_of(ns, subject);
        let first = limit.saturating_mul(2).min(scan_limit);
        let near = self.engine().scan_rev(&prefix, first)?;
        let mut found = Vec::with_capacity(limit);
        self.current_facts(ns, &near, limit, &mut found)?;
        if found.len() == limit || near.len() < first {
            return Ok(found);
        }
        let far = self.engine().scan_rev(&prefix, scan_limit)?;
        let last_read = near.last().map(|(k, _)| k.as_slice()).unwrap_or_default();
        let older = far.iter().position(|(k, _)| k.as_slice() < last_read);
        let rest = older.map_or(&[][..], |i| &far[i..]);
        self.current_facts(ns, rest, limit, &mut found)?;
        Ok(found)
    }

    fn revise_facts(
        &self,
        ns: &str,
        subject: &str,
        fate: &mut dyn FnMut(&Fact) -> FactFate,
    ) -> Result<()> {
        let changed = self.locked(ns, &subject_lock(subject), |tx| {
            let mut batch = Batch::new();
            let mut notes = Vec::new();
            let mut from: Option<Vec<u8>> = None;
            let prefix = keys::subject_facts_of(ns, subject);
            loop {
                let bound = from.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
                let chunk = tx.scan(bound, &prefix, 1024)?;
                let Some((last, _)) = chunk.last() else { break };
                from = Some(last.clone());
                for (k, _) in &chunk {
                    let id = String::from_utf8_lossy(keys::last_component(k)).into_owned();
                    let Some(fact) = read_fact(tx, ns, &id)? else {
                        continue;
                    };
                    match fate(&fact) {
                        FactFate::Keep => continue,
                        FactFate::Delete => {
                            batch.push(Write::Delete(keys::fact(ns, &id)));
                            batch.push(Write::Delete(k.clone()));
                            unpoint(tx, &fact, &mut batch)?;
                        }
                        FactFate::Rewrite(f) => {
                            batch.push(Write::Put(keys::fact(ns, &id), codec::encode(f.as_ref())?));
                            batch.push(Write::Put(k.clone(), index_value(&f)));
                        }
                    }
                    notes.push(IndexChange::Fact {
                        namespace: ns.to_owned(),
                        fact_id: id,
                    });
                }
            }
            if notes.is_empty() {
                return Ok(false);
            }
            self.changes.commit(tx, batch, notes)?;
            Ok(true)
        })?;
        if changed {
            self.durable()?;
        }
        Ok(())
    }

    fn delete_fact(&self, ns: &str, fact_id: &str) -> Result<Fact> {
        let peek = self.get_fact(ns, fact_id)?;
        let subject = peek.subject_id.clone();
        let fact = self.locked(ns, &subject_lock(&subject), |tx| {
            let fact = read_fact(tx, ns, fact_id)?.ok_or_else(|| fact_not_found(ns, fact_id))?;
            let mut batch: Batch = vec![
                Write::Delete(keys::fact(ns, fact_id)),
                Write::Delete(keys::subject_fact(ns, &subject, fact_id)),
            ];
            let mut notes = Vec::new();
            unpoint(tx, &fact, &mut batch)?;
            notes.push(IndexChange::Fact {
                namespace: ns.to_owned(),
                fact_id: fact_id.to_owned(),
            });
            self.changes.commit(tx, batch, notes)?;
            Ok(fact)
        })?;
        self.durable()?;
        Ok(fact)
    }

    fn save_episode(
        &self,
        ns: &str,
        session_id: &str,
        decide: &mut DecideEpisode<'_>,
    ) -> Result<Option<Episode>> {
        let episode = self.locked(ns, session_id, |tx| {
            let mut session = read_session(tx, ns, session_id)?;
            let version = session.summary.version;
            let summary = match version {
                0 => None,
                v => read_summary(tx, ns, session_id, v)?,
            };
            let overrides = action_statuses(tx, ns, session_id)?;
            let Some(EpisodePlan { episode, carried }) =
                decide(&session, summary.as_ref(), &overrides)?
            else {
                return Ok(None);
            };
            let subject = session.subject_id.clone();
            let mut batch = Batch::new();
            let mut notes = Vec::new();
            if let Some(old) = episode_key_of(tx, ns, session_id)? {
                batch.push(Write::Delete(old));
            }
            for (k, _) in tx.scan(
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
            session.episode_version = episode.summary_version;
            batch.push(Write::Put(
                keys::session(ns, session_id),
                codec::encode(&session)?,
            ));
            notes.push(IndexChange::Episode {
                namespace: ns.to_owned(),
                session_id: session_id.to_owned(),
            });
            self.changes.commit(tx, batch, notes)?;
            Ok(Some(episode))
        })?;
        if episode.is_some() {
            self.durable()?;
        }
        Ok(episode)
    }

    fn get_episode(&self, ns: &str, session_id: &str) -> Result<Option<Episode>> {
        let Some(k) = episode_key_of(self.engine(), ns, session_id)? else {
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
        action_statuses(self.engine(), ns, session_id)
    }

    fn set_action_status(
        &self,
        ns: &str,
        action: &ActionRef,
        status: ActionStatus,
        decide: &mut DecideAction<'_>,
    ) -> Result<PendingAction> {
        let sid = action.session_id.as_str();
        let action = self.locked(ns, sid, |tx| {
            let session = read_session(tx, ns, sid)?;
            let summary = match session.summary.version {
                0 => None,
                v => read_summary(tx, ns, sid, v)?,
            };
            let ekey = episode_key_of(tx, ns, sid)?;
            let episode: Option<Episode> = match &ekey {
                Some(k) => read(tx, k, || format!("episode of session {ns}/{sid}"))?,
                None => None,
            };
            let plan = decide(&session, summary.as_ref(), episode)?;
            let mut batch: Batch = vec![Write::Put(
                keys::action_status(ns, sid, action.action_seq),
                codec::encode(&status)?,
            )];
            let mut notes = Vec::new();
            if let (Some(ekey), Some(ep)) = (ekey, &plan.episode) {
                let ckey = keys::carried(ns, &session.subject_id, sid, action.action_seq);
                match &plan.carried {
                    Some(c) => batch.push(Write::Put(ckey, codec::encode(c)?)),
                    None => batch.push(Write::Delete(ckey)),
                }
                batch.push(Write::Put(ekey, codec::encode(ep)?));
                notes.push(IndexChange::Episode {
                    namespace: ns.to_owned(),
                    session_id: sid.to_owned(),
                });
            }
            self.changes.commit(tx, batch, notes)?;
            Ok(plan.action)
        })?;
        self.durable()?;
        Ok(action)
    }

    fn scan_facts(&self, after: Option<&[u8]>, limit: usize) -> Result<ScanPage<Fact>> {
        self.scan_typed(keys::FACT, after, limit, "fact")
    }

    fn scan_episodes(&self, after: Option<&[u8]>, limit: usize) -> Result<ScanPage<Episode>> {
        self.scan_typed(keys::EPISODE, after, limit, "episode")
    }
}
