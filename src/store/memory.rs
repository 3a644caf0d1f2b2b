//! The in-memory store: a reference implementation of `Store` for tests and
//! ephemeral use (`--store memory`). Nothing survives the process; `sync`
//! is a no-op. It must pass the same conformance suite as the sled store.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Mutex;

use super::{plan_append, AppendPlan, IdempotencyRecord, SessionPage, Store};
use crate::error::{Error, Result};
use crate::memory::types::{AppendOutcome, PreparedAppend, Session, SessionFilter, Turn};

type SessionKey = (String, String);

#[derive(Default)]
struct Inner {
    sessions: BTreeMap<SessionKey, Session>,
    turns: HashMap<SessionKey, Vec<Turn>>,
    idempotency: HashMap<SessionKey, HashMap<String, IdempotencyRecord>>,
}

/// A `Store` held entirely in memory behind one mutex.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves data consistent (every
        // method validates before mutating), so a poisoned lock is usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn k(ns: &str, id: &str) -> SessionKey {
    (ns.to_owned(), id.to_owned())
}

impl Store for MemoryStore {
    fn create_session(&self, session: &Session) -> Result<()> {
        let mut g = self.lock();
        let key = k(&session.namespace, &session.session_id);
        if g.sessions.contains_key(&key) {
            return Err(Error::AlreadyExists(format!(
                "session {:?} already exists in namespace {:?}",
                session.session_id, session.namespace
            )));
        }
        g.sessions.insert(key, session.clone());
        Ok(())
    }

    fn get_session(&self, ns: &str, session_id: &str) -> Result<Session> {
        self.lock()
            .sessions
            .get(&k(ns, session_id))
            .cloned()
            .ok_or_else(|| Error::session_not_found(ns, session_id))
    }

    fn list_sessions(
        &self,
        ns: &str,
        filter: &SessionFilter,
        after: Option<&str>,
        limit: usize,
        scan_limit: usize,
    ) -> Result<SessionPage> {
        let g = self.lock();
        let start = match after {
            Some(a) => Bound::Excluded(k(ns, a)),
            None => Bound::Included(k(ns, "")),
        };
        let mut page = SessionPage::default();
        let mut last_examined: Option<&String> = None;
        for (scanned, ((sns, sid), s)) in g.sessions.range((start, Bound::Unbounded)).enumerate() {
            if sns != ns {
                break;
            }
            if page.sessions.len() == limit || scanned == scan_limit {
                // More candidates exist; resume after the last one examined.
                page.resume_after = last_examined.cloned();
                break;
            }
            last_examined = Some(sid);
            if filter.matches(s) {
                page.sessions.push(s.clone());
            }
        }
        Ok(page)
    }

    fn update_session(
        &self,
        ns: &str,
        session_id: &str,
        change: &mut dyn FnMut(&mut Session) -> Result<()>,
    ) -> Result<Session> {
        let mut g = self.lock();
        let s = g
            .sessions
            .get_mut(&k(ns, session_id))
            .ok_or_else(|| Error::session_not_found(ns, session_id))?;
        let mut next = s.clone();
        change(&mut next)?;
        *s = next.clone();
        Ok(next)
    }

    fn delete_session(&self, ns: &str, session_id: &str) -> Result<u64> {
        let mut g = self.lock();
        let key = k(ns, session_id);
        if g.sessions.remove(&key).is_none() {
            return Err(Error::session_not_found(ns, session_id));
        }
        g.idempotency.remove(&key);
        Ok(g.turns.remove(&key).map_or(0, |t| t.len() as u64))
    }

    fn append_turns(
        &self,
        ns: &str,
        session_id: &str,
        append: &PreparedAppend,
    ) -> Result<AppendOutcome> {
        let mut g = self.lock();
        let key = k(ns, session_id);
        let current = g
            .sessions
            .get(&key)
            .cloned()
            .ok_or_else(|| Error::session_not_found(ns, session_id))?;
        let previous = append
            .idempotency_key
            .as_ref()
            .and_then(|ik| g.idempotency.get(&key).and_then(|m| m.get(ik)).cloned());
        match plan_append(&current, previous, append)? {
            AppendPlan::Replay(outcome) => Ok(outcome),
            AppendPlan::Write {
                turns,
                session,
                outcome,
            } => {
                g.turns.entry(key.clone()).or_default().extend(turns);
                if let Some(ik) = &append.idempotency_key {
                    g.idempotency.entry(key.clone()).or_default().insert(
                        ik.clone(),
                        IdempotencyRecord {
                            fingerprint: append.fingerprint,
                            outcome: outcome.clone(),
                        },
                    );
                }
                g.sessions.insert(key, *session);
                Ok(outcome)
            }
        }
    }

    fn list_turns(
        &self,
        ns: &str,
        session_id: &str,
        from_seq: u64,
        to_seq: u64,
        limit: usize,
    ) -> Result<Vec<Turn>> {
        let g = self.lock();
        let key = k(ns, session_id);
        if !g.sessions.contains_key(&key) {
            return Err(Error::session_not_found(ns, session_id));
        }
        let Some(turns) = g.turns.get(&key) else {
            return Ok(Vec::new());
        };
        // Seqs are gap-free from 1, so seq n sits at index n - 1.
        let start = usize::try_from(from_seq.max(1) - 1).unwrap_or(usize::MAX);
        Ok(turns
            .iter()
            .skip(start)
            .take_while(|t| t.seq <= to_seq)
            .take(limit)
            .cloned()
            .collect())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }
}
