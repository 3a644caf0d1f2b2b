//! Erasing a subject in a `KvStore`: the erase job record, bounded steps
//! that each remove one session (with everything hanging off it) or a
//! chunk of the subject's facts, episodes or carried actions, and the
//! erasure record that replaces the job. Each step is one unit of work
//! under the lock the records' writers take (the session's, the subject's
//! facts'), adds outbox entries so the search index forgets what went, and
//! is durable before it returns; a step repeated after a crash finds less
//! to do, never more. What to erase and when to stop is the domain's call.

use std::ops::Bound;

use super::engine::{Batch, Engine, Read, Txn, Write};
use super::knowledge::{read_fact, subject_lock, unpoint};
use super::records::{delete_prefix, delete_reviews_of, read};
use super::{codec, keys, KvStore};
use crate::error::{Error, Precondition, Result};
use crate::model::{EraseCounts, EraseJob, ErasureRecord, IndexChange, UnixNanos};

/// What one [`EraseStore::erase_step`] did.
#[derive(Debug, Clone, Default)]
pub struct EraseStep {
    /// What it removed.
    pub removed: EraseCounts,
    /// The session it removed, if it removed one (the runtime forgets its
    /// due work).
    pub session_id: Option<String>,
    /// Nothing of the subject is left.
    pub done: bool,
}

/// Erasing every record of a subject, as a durable job.
pub trait EraseStore {
    /// Whether the namespace holds a session, fact, episode or carried
    /// action of the subject, or an erase of it is running.
    fn subject_holds(&self, ns: &str, subject_id: &str) -> Result<bool>;

    /// Stores `job` unless an erase of its subject is stored already;
    /// returns the stored job (that one, or `job`). Durable on return.
    fn begin_erase(&self, job: &EraseJob) -> Result<EraseJob>;

    /// The erase job of a subject, if one is running.
    fn erase_job(&self, ns: &str, subject_id: &str) -> Result<Option<EraseJob>>;

    /// Erase jobs of every namespace, at most `limit`.
    fn erase_jobs(&self, limit: usize) -> Result<Vec<EraseJob>>;

    /// Removes the next part of the subject's records: one session with
    /// its turns, summaries, fold state, audit log, review items, action
    /// statuses, idempotency records, episode and carried actions; else up
    /// to `batch` fact versions, episodes or carried actions. Adds what it
    /// removed to the job's counts and sets its heartbeat to `now`.
    /// `NotFound` when no erase of the subject is running.
    fn erase_step(
        &self,
        ns: &str,
        subject_id: &str,
        batch: usize,
        now: UnixNanos,
    ) -> Result<EraseStep>;

    /// Ends an erase: removes its job and stores `record`, atomically,
    /// unless a record of the subject appeared since the last step (a
    /// write that started before the job was stored): then `false`, and
    /// the steps go on.
    fn finish_erase(&self, ns: &str, subject_id: &str, record: &ErasureRecord) -> Result<bool>;

    /// A namespace's erasure records after erasure id `after`, oldest
    /// first, at most `limit`.
    fn list_erasures(
        &self,
        ns: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ErasureRecord>>;
}

/// A lock name for a subject's erase job that no session id can take.
fn erase_lock(subject_id: &str) -> String {
    format!("\u{1}erase\u{1}{subject_id}")
}

/// Refuses a write that would add to a subject being erased (called by
/// the writers of sessions, turns and facts, inside their unit of work).
pub(super) fn refuse_if_erasing(r: &dyn Read, ns: &str, subject_id: &str) -> Result<()> {
    if subject_id.is_empty() || r.get(&keys::erase_job(ns, subject_id))?.is_none() {
        return Ok(());
    }
    Err(Error::FailedPrecondition(
        Precondition::SubjectErasing,
        format!(
            "an erase of subject {subject_id:?} in namespace {ns:?} is running; it takes no new sessions, turns or facts until it is done"
        ),
    ))
}

fn read_job(r: &dyn Read, ns: &str, subject_id: &str) -> Result<Option<EraseJob>> {
    read(r, &keys::erase_job(ns, subject_id), || {
        format!("erase job of subject {ns}/{subject_id}")
    })
}

/// Whether a session, fact version, episode or carried action of the
/// subject is stored.
fn holds_records(r: &dyn Read, ns: &str, subject_id: &str) -> Result<bool> {
    Ok(first_key(r, &keys::subject_of(ns, subject_id))?.is_some()
        || first_key(r, &keys::subject_facts_of(ns, subject_id))?.is_some()
        || first_key(r, &keys::episodes_of(ns, subject_id))?.is_some()
        || first_key(r, &keys::carried_of_subject(ns, subject_id))?.is_some())
}

/// The first key with `prefix`, if any.
fn first_key(r: &dyn Read, prefix: &[u8]) -> Result<Option<Vec<u8>>> {
    Ok(r.scan(Bound::Unbounded, prefix, 1)?
        .into_iter()
        .next()
        .map(|(k, _)| k))
}

impl<E: Engine> KvStore<E> {
    /// Removes one session of the subject and everything hanging off it,
    /// under the session's lock; returns what it removed.
    fn erase_session(&self, ns: &str, subject_id: &str, session_id: &str) -> Result<EraseCounts> {
        let counts = self.locked(ns, session_id, |tx| {
            let mut c = EraseCounts::default();
            // Unlike `delete_session`, what hangs off the session goes
            // first and the session record last: a crash in between (a
            // local engine applies each chunk as it goes) leaves the
            // session and its subject index entry, so the next step finds
            // it again and finishes it. Nobody can add to it meanwhile
            // (the erase job refuses appends).
            purge_counted(tx, ns, session_id, &mut c)?;
            let mut batch: Batch = Vec::new();
            let session_key = keys::session(ns, session_id);
            if tx.get(&session_key)?.is_some() {
                c.sessions = 1;
                batch.push(Write::Delete(session_key));
            }
            batch.push(Write::Delete(keys::subject(ns, subject_id, session_id)));
            for (k, _) in tx.scan(
                Bound::Unbounded,
                &keys::carried_of_session(ns, subject_id, session_id),
                usize::MAX,
            )? {
                c.carried_actions += 1;
                batch.push(Write::Delete(k));
            }
            let pointer = keys::episode_of(ns, session_id);
            if let Some(episode_key) = tx.get(&pointer)? {
                if tx.get(&episode_key)?.is_some() {
                    c.episodes += 1;
                }
                batch.push(Write::Delete(episode_key));
                batch.push(Write::Delete(pointer));
            }
            let notes = vec![
                IndexChange::SessionDeleted {
                    namespace: ns.to_owned(),
                    session_id: session_id.to_owned(),
                },
                IndexChange::Episode {
                    namespace: ns.to_owned(),
                    session_id: session_id.to_owned(),
                },
            ];
            self.changes.commit(tx, batch, notes)?;
            Ok(c)
        })?;
        self.durable()?;
        Ok(counts)
    }

    /// Removes up to `limit` fact versions of the subject (every version,
    /// current or superseded), under the subject's facts lock.
    fn erase_facts(&self, ns: &str, subject_id: &str, limit: usize) -> Result<u64> {
        let n = self.locked(ns, &subject_lock(subject_id), |tx| {
            let index = tx.scan(
                Bound::Unbounded,
                &keys::subject_facts_of(ns, subject_id),
                limit,
            )?;
            let mut batch = Batch::new();
            let mut notes = Vec::new();
            let mut n = 0u64;
            for (k, _) in &index {
                let id = String::from_utf8_lossy(keys::last_component(k)).into_owned();
                // A damaged version is removed too: it is the subject's.
                match read_fact(tx, ns, &id) {
                    Ok(Some(fact)) => {
                        unpoint(tx, &fact, &mut batch)?;
                        n += 1;
                    }
                    Ok(None) => {}
                    Err(Error::DataLoss(_)) => n += 1,
                    Err(e) => return Err(e),
                }
                batch.push(Write::Delete(keys::fact(ns, &id)));
                batch.push(Write::Delete(k.clone()));
                notes.push(IndexChange::Fact {
                    namespace: ns.to_owned(),
                    fact_id: id,
                });
            }
            if index.len() < limit {
                // Pointers left without their index entries (a crash
                // between the two is not possible in one batch, but an
                // older release may have left some).
                for prefix in [
                    keys::fact_keys_of(ns, subject_id),
                    keys::fact_words_of(ns, subject_id),
                ] {
                    for (k, _) in tx.scan(Bound::Unbounded, &prefix, limit)? {
                        batch.push(Write::Delete(k));
                    }
                }
            }
            if batch.is_empty() {
                return Ok(0);
            }
            self.changes.commit(tx, batch, notes)?;
            Ok(n)
        })?;
        if n > 0 {
            self.durable()?;
        }
        Ok(n)
    }

    /// Removes up to `limit` episodes and carried actions of the subject
    /// that no session holds any more (a session's own go with it).
    fn erase_leftovers(&self, ns: &str, subject_id: &str, limit: usize) -> Result<EraseCounts> {
        let c = self.locked(ns, &erase_lock(subject_id), |tx| {
            let mut c = EraseCounts::default();
            let mut batch = Batch::new();
            let mut notes = Vec::new();
            for (k, _) in tx.scan(Bound::Unbounded, &keys::episodes_of(ns, subject_id), limit)? {
                let session_id = String::from_utf8_lossy(keys::last_component(&k)).into_owned();
                let pointer = keys::episode_of(ns, &session_id);
                if tx.get(&pointer)?.as_deref() == Some(k.as_slice()) {
                    batch.push(Write::Delete(pointer));
                }
                batch.push(Write::Delete(k));
                c.episodes += 1;
                notes.push(IndexChange::Episode {
                    namespace: ns.to_owned(),
                    session_id,
                });
            }
            for (k, _) in tx.scan(
                Bound::Unbounded,
                &keys::carried_of_subject(ns, subject_id),
                limit,
            )? {
                batch.push(Write::Delete(k));
                c.carried_actions += 1;
            }
            if !batch.is_empty() {
                self.changes.commit(tx, batch, notes)?;
            }
            Ok(c)
        })?;
        if c.total() > 0 {
            self.durable()?;
        }
        Ok(c)
    }

    /// Adds `removed` to the job's counts and beats its heartbeat.
    fn record_progress(
        &self,
        ns: &str,
        subject_id: &str,
        removed: &EraseCounts,
        now: UnixNanos,
    ) -> Result<()> {
        self.locked(ns, &erase_lock(subject_id), |tx| {
            let mut job = read_job(tx, ns, subject_id)?.ok_or_else(|| no_erase(ns, subject_id))?;
            job.counts.add(removed);
            job.heartbeat_at = now;
            tx.apply(vec![Write::Put(
                keys::erase_job(ns, subject_id),
                codec::encode(&job)?,
            )])
        })?;
        self.durable()
    }
}

fn no_erase(ns: &str, subject_id: &str) -> Error {
    Error::NotFound(format!(
        "no erase of subject {subject_id:?} is running in namespace {ns:?}"
    ))
}

/// Removes what hangs off a session (not the session record), counting
/// each kind. Runs under the session's lock.
fn purge_counted(tx: &mut dyn Txn, ns: &str, session_id: &str, c: &mut EraseCounts) -> Result<()> {
    c.turns += delete_prefix(tx, &keys::turns_of(ns, session_id))?;
    c.action_statuses += delete_prefix(tx, &keys::action_statuses_of(ns, session_id))?;
    c.idempotency_records += delete_prefix(tx, &keys::idempotency_of(ns, session_id))?;
    c.summaries += delete_prefix(tx, &keys::summaries_of(ns, session_id))?;
    c.audit_records += delete_prefix(tx, &keys::audits_of(ns, session_id))?;
    let fold = keys::fold(ns, session_id);
    if tx.get(&fold)?.is_some() {
        c.fold_states += 1;
        tx.apply(vec![Write::Delete(fold)])?;
    }
    c.review_items += delete_reviews_of(tx, ns, session_id)?;
    // What retention removed before: no content, but the session's.
    tx.apply(vec![Write::Delete(keys::retention_mark(ns, session_id))])?;
    Ok(())
}

impl<E: Engine> EraseStore for KvStore<E> {
    fn subject_holds(&self, ns: &str, subject_id: &str) -> Result<bool> {
        let e = self.engine();
        Ok(e.get(&keys::erase_job(ns, subject_id))?.is_some() || holds_records(e, ns, subject_id)?)
    }

    fn begin_erase(&self, job: &EraseJob) -> Result<EraseJob> {
        let (ns, subject) = (&job.namespace, &job.subject_id);
        let stored = self.locked(ns, &erase_lock(subject), |tx| {
            if let Some(running) = read_job(tx, ns, subject)? {
                return Ok(running);
            }
            tx.apply(vec![Write::Put(
                keys::erase_job(ns, subject),
                codec::encode(job)?,
            )])?;
            Ok(job.clone())
        })?;
        self.durable()?;
        Ok(stored)
    }

    fn erase_job(&self, ns: &str, subject_id: &str) -> Result<Option<EraseJob>> {
        read_job(self.engine(), ns, subject_id)
    }

    fn erase_jobs(&self, limit: usize) -> Result<Vec<EraseJob>> {
        self.engine()
            .scan(Bound::Unbounded, &keys::erase_jobs(), limit)?
            .into_iter()
            .map(|(k, v)| {
                codec::decode(&v, || {
                    format!("erase job {}", String::from_utf8_lossy(&k[1..]))
                })
            })
            .collect()
    }

    fn erase_step(
        &self,
        ns: &str,
        subject_id: &str,
        batch: usize,
        now: UnixNanos,
    ) -> Result<EraseStep> {
        let batch = batch.max(1);
        if read_job(self.engine(), ns, subject_id)?.is_none() {
            return Err(no_erase(ns, subject_id));
        }
        let mut step = EraseStep::default();
        if let Some(k) = first_key(self.engine(), &keys::subject_of(ns, subject_id))? {
            let session_id = String::from_utf8(keys::last_component(&k).to_vec())
                .map_err(|_| Error::DataLoss("a session key is not valid UTF-8".into()))?;
            step.removed = self.erase_session(ns, subject_id, &session_id)?;
            step.session_id = Some(session_id);
        } else {
            step.removed.facts = self.erase_facts(ns, subject_id, batch)?;
            if step.removed.facts == 0 {
                step.removed = self.erase_leftovers(ns, subject_id, batch)?;
                step.done = step.removed.total() == 0;
            }
        }
        self.record_progress(ns, subject_id, &step.removed, now)?;
        Ok(step)
    }

    fn finish_erase(&self, ns: &str, subject_id: &str, record: &ErasureRecord) -> Result<bool> {
        let finished = self.locked(ns, &erase_lock(subject_id), |tx| {
            if holds_records(tx, ns, subject_id)? {
                return Ok(false);
            }
            tx.apply(vec![
                Write::Delete(keys::erase_job(ns, subject_id)),
                Write::Put(
                    keys::erasure(ns, &record.erasure_id),
                    codec::encode(record)?,
                ),
            ])?;
            Ok(true)
        })?;
        self.durable()?;
        Ok(finished)
    }

    fn list_erasures(
        &self,
        ns: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ErasureRecord>> {
        let start = after.map(|a| keys::erasure(ns, a));
        let bound = start.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        self.engine()
            .scan(bound, &keys::erasures_of(ns), limit)?
            .into_iter()
            .map(|(k, v)| {
                codec::decode(&v, || {
                    format!("erasure record {}", String::from_utf8_lossy(&k[1..]))
                })
            })
            .collect()
    }
}
