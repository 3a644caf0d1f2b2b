//! Retention in a `KvStore`: what the domain needs to decide what is due
//! (a session's remaining summaries, audit records and episode with their
//! times), and the deletes themselves (with what derives from the removed
//! summaries: review items and the fold state), each a bounded unit of work under
//! the lock the records' writers take, durable on return, adding outbox
//! entries so the search index forgets what went. The store never decides
//! what is due; it removes what it is told, and what is already gone
//! counts as nothing (a pass repeated by another daemon removes nothing
//! twice).

use std::ops::Bound;

use super::engine::{Batch, Engine, Read, Write};
use super::knowledge::{read_fact, subject_lock, unpoint};
use super::records::{read, read_session, reviews_of_session};
use super::{codec, keys, KvStore};
use crate::error::{Error, Result};
use crate::model::{
    AuditRecord, Episode, Fact, IndexChange, RetentionCounts, RetentionMark, Session, SessionCut,
    SessionSummary, Turn, UnixNanos,
};

/// What the domain reads of a session to decide what retention removes.
#[derive(Debug, Clone)]
pub struct RetentionView {
    /// The session.
    pub session: Session,
    /// What retention removed from it before.
    pub mark: RetentionMark,
    /// When its oldest remaining turn was stored, if one remains.
    pub oldest_turn_at: Option<UnixNanos>,
    /// Its remaining summary versions, oldest first: (version, written at).
    pub summaries: Vec<(u64, UnixNanos)>,
    /// Its remaining audit records, oldest first: (audit seq, written at).
    pub audits: Vec<(u64, UnixNanos)>,
    /// When its episode's session ended, if it has one.
    pub episode_ended_at: Option<UnixNanos>,
}

/// Removing records that a retention policy no longer keeps.
pub trait RetentionStore {
    /// The retention mark of a session (default when nothing was removed).
    fn retention_mark(&self, ns: &str, session_id: &str) -> Result<RetentionMark>;

    /// What retention needs to know of a session; `None` when it is gone.
    /// Reads at most `limit` summaries and audit records.
    fn retention_view(
        &self,
        ns: &str,
        session_id: &str,
        limit: usize,
    ) -> Result<Option<RetentionView>>;

    /// Removes at most `batch` records of `cut` from a session, oldest
    /// first (turns, then summaries, audit records, the episode), in one
    /// unit of work under the session's lock, and records the turns and
    /// summaries removed in its mark (time `now`). Returns what it removed;
    /// less than `batch` means the cut is done. Nothing when the session
    /// is gone.
    fn retain_session(
        &self,
        ns: &str,
        session_id: &str,
        cut: &SessionCut,
        batch: usize,
        now: UnixNanos,
    ) -> Result<RetentionCounts>;

    /// Removes the given chains of fact versions of one subject (each a
    /// current version followed by the versions it superseded), in one
    /// unit of work under the subject's facts lock. A chain whose first
    /// version is no longer current or for which `still_due` is false (it
    /// was updated meanwhile) is left whole. Returns the versions removed.
    fn retain_facts(
        &self,
        ns: &str,
        subject_id: &str,
        chains: &[Vec<String>],
        still_due: &dyn Fn(&Fact) -> bool,
    ) -> Result<u64>;
}

/// The first `limit` entries under `prefix`, decoded.
fn scan_decoded<T: serde::de::DeserializeOwned + 'static>(
    r: &dyn Read,
    prefix: &[u8],
    limit: usize,
    what: &str,
) -> Result<Vec<T>> {
    r.scan(Bound::Unbounded, prefix, limit)?
        .into_iter()
        .map(|(k, v)| codec::decode(&v, || format!("{what} {}", hex::encode(&k))))
        .collect()
}

fn read_mark(r: &dyn Read, ns: &str, session_id: &str) -> Result<RetentionMark> {
    Ok(read(r, &keys::retention_mark(ns, session_id), || {
        format!("retention mark of session {ns}/{session_id}")
    })?
    .unwrap_or_default())
}

impl<E: Engine> RetentionStore for KvStore<E> {
    fn retention_mark(&self, ns: &str, session_id: &str) -> Result<RetentionMark> {
        read_mark(self.engine(), ns, session_id)
    }

    fn retention_view(
        &self,
        ns: &str,
        session_id: &str,
        limit: usize,
    ) -> Result<Option<RetentionView>> {
        let e = self.engine();
        let session = match read_session(e, ns, session_id) {
            Ok(s) => s,
            Err(Error::NotFound(_)) => return Ok(None),
            Err(err) => return Err(err),
        };
        let mark = read_mark(e, ns, session_id)?;
        let oldest_turn_at = scan_decoded::<Turn>(e, &keys::turns_of(ns, session_id), 1, "turn")?
            .first()
            .map(|t| t.server_time);
        let summaries = scan_decoded::<SessionSummary>(
            e,
            &keys::summaries_of(ns, session_id),
            limit,
            "summary",
        )?
        .into_iter()
        .map(|s| (s.version, s.created_at))
        .collect();
        let audits = scan_decoded::<AuditRecord>(
            e,
            &keys::audits_of(ns, session_id),
            limit,
            "audit record",
        )?
        .into_iter()
        .map(|a| (a.audit_seq, a.created_at))
        .collect();
        let episode_ended_at = match e.get(&keys::episode_of(ns, session_id))? {
            Some(k) => read::<Episode>(e, &k, || format!("episode of session {ns}/{session_id}"))?
                .map(|ep| ep.ended_at),
            None => None,
        };
        Ok(Some(RetentionView {
            session,
            mark,
            oldest_turn_at,
            summaries,
            audits,
            episode_ended_at,
        }))
    }

    fn retain_session(
        &self,
        ns: &str,
        session_id: &str,
        cut: &SessionCut,
        batch: usize,
        now: UnixNanos,
    ) -> Result<RetentionCounts> {
        let batch = batch.max(1);
        let counts = self.locked(ns, session_id, |tx| {
            let mut c = RetentionCounts::default();
            let session = match read_session(tx, ns, session_id) {
                Ok(s) => s,
                Err(Error::NotFound(_)) => return Ok(c),
                Err(e) => return Err(e),
            };
            let mut mark = read_mark(tx, ns, session_id)?;
            let before = mark;
            let mut writes = Batch::new();
            let mut notes = Vec::new();
            let mut budget = batch;
            // Turns, from the oldest: the seqs stay taken (next_seq is
            // untouched), so appends stay gap-free and no seq is reused.
            let through = cut.turns_through_seq.min(session.last_seq());
            if through > mark.turns_through_seq {
                let from = keys::turn(ns, session_id, mark.turns_through_seq + 1);
                for (k, _) in tx.scan(
                    Bound::Included(&from),
                    &keys::turns_of(ns, session_id),
                    budget,
                )? {
                    let seq = keys::seq_of(&k);
                    if seq > through {
                        break;
                    }
                    writes.push(Write::Delete(k));
                    notes.push(IndexChange::TurnRemoved {
                        namespace: ns.to_owned(),
                        session_id: session_id.to_owned(),
                        seq,
                    });
                    mark.turns_through_seq = seq;
                    c.turns += 1;
                }
                budget -= c.turns as usize;
                if c.turns > 0 {
                    mark.turns_removed += c.turns;
                    mark.turns_removed_at = now;
                    let next = mark.turns_through_seq + 1;
                    if next < session.next_seq {
                        // The first kept turn was indexed with the last
                        // removed one as its context: index it again.
                        notes.push(IndexChange::Turns {
                            namespace: ns.to_owned(),
                            session_id: session_id.to_owned(),
                            first_seq: next,
                            last_seq: next,
                        });
                    }
                }
            }
            if budget > 0 && cut.summaries_through_version > 0 {
                for (k, _) in tx.scan(
                    Bound::Unbounded,
                    &keys::summaries_of(ns, session_id),
                    budget,
                )? {
                    let version = keys::seq_of(&k);
                    if version > cut.summaries_through_version {
                        break;
                    }
                    writes.push(Write::Delete(k));
                    mark.summaries_through_version = mark.summaries_through_version.max(version);
                    mark.summaries_removed_at = now;
                    c.summaries += 1;
                }
                budget -= c.summaries as usize;
                if c.summaries > 0 {
                    // What was derived from the removed summaries goes with
                    // them, as DeleteSession's purge removes it: their
                    // review items (which quote the actions), and once no
                    // summary is left the summarizer's saved fold state
                    // (sentences of the turns word for word, names,
                    // amounts). Not counted: they are parts of the
                    // summaries counted.
                    let through = mark.summaries_through_version;
                    for k in reviews_of_session(tx, ns, session_id, through)? {
                        writes.push(Write::Delete(k));
                    }
                    if through >= session.summary.version {
                        writes.push(Write::Delete(keys::fold(ns, session_id)));
                    }
                }
            }
            if budget > 0 && cut.audit_through_seq > 0 {
                for (k, _) in tx.scan(Bound::Unbounded, &keys::audits_of(ns, session_id), budget)? {
                    if keys::seq_of(&k) > cut.audit_through_seq {
                        break;
                    }
                    writes.push(Write::Delete(k));
                    c.audit_records += 1;
                }
                budget -= c.audit_records as usize;
            }
            if budget > 0 && cut.episode {
                let pointer = keys::episode_of(ns, session_id);
                if let Some(episode_key) = tx.get(&pointer)? {
                    if tx.get(&episode_key)?.is_some() {
                        c.episodes += 1;
                    }
                    writes.push(Write::Delete(episode_key));
                    writes.push(Write::Delete(pointer));
                    notes.push(IndexChange::Episode {
                        namespace: ns.to_owned(),
                        session_id: session_id.to_owned(),
                    });
                }
            }
            if mark != before {
                writes.push(Write::Put(
                    keys::retention_mark(ns, session_id),
                    codec::encode(&mark)?,
                ));
            }
            if !writes.is_empty() {
                self.changes.commit(tx, writes, notes)?;
            }
            Ok(c)
        })?;
        if counts.total() > 0 {
            self.durable()?;
        }
        Ok(counts)
    }

    fn retain_facts(
        &self,
        ns: &str,
        subject_id: &str,
        chains: &[Vec<String>],
        still_due: &dyn Fn(&Fact) -> bool,
    ) -> Result<u64> {
        let n = self.locked(ns, &subject_lock(subject_id), |tx| {
            let mut writes = Batch::new();
            let mut notes = Vec::new();
            let mut n = 0u64;
            for chain in chains {
                let Some(head) = chain.first() else { continue };
                match read_fact(tx, ns, head)? {
                    Some(f) if f.is_current() && f.subject_id == subject_id && still_due(&f) => {
                        unpoint(tx, &f, &mut writes)?;
                    }
                    _ => continue,
                }
                for id in chain {
                    let Some(f) = read_fact(tx, ns, id)? else {
                        continue;
                    };
                    writes.push(Write::Delete(keys::fact(ns, id)));
                    writes.push(Write::Delete(keys::subject_fact(ns, &f.subject_id, id)));
                    notes.push(IndexChange::Fact {
                        namespace: ns.to_owned(),
                        fact_id: id.clone(),
                    });
                    n += 1;
                }
            }
            if !writes.is_empty() {
                self.changes.commit(tx, writes, notes)?;
            }
            Ok(n)
        })?;
        if n > 0 {
            self.durable()?;
        }
        Ok(n)
    }
}
