//! The typed store: sessions, turns and their records over any `Engine`,
//! using the key layout in `keys` and checksummed values from `codec`.
//! Writes to one session are serialized by a striped lock and applied as
//! one atomic batch, so the sled and in-memory stores share every rule.

use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard};

use super::engine::{Batch, Engine, MemoryEngine, SledEngine, Write};
use super::{codec, keys, plan_append, AppendPlan, IdempotencyRecord, SessionPage, Store};
use crate::error::{Error, Result};
use crate::memory::types::{AppendOutcome, PreparedAppend, Session, SessionFilter, Turn};

/// Lock stripes: enough that unrelated sessions rarely contend.
const STRIPES: usize = 64;
/// Keys removed per batch when deleting a session's records.
const DELETE_CHUNK: usize = 4096;

/// A `Store` over engine `E`.
pub struct KvStore<E: Engine> {
    engine: E,
    stripes: Vec<Mutex<()>>,
}

/// The durable default: a `KvStore` on sled.
pub type SledStore = KvStore<SledEngine>;
/// A `KvStore` in process memory (nothing survives a restart).
pub type MemoryStore = KvStore<MemoryEngine>;

impl SledStore {
    /// Opens the sled store in `dir` (see [`SledEngine::open`]).
    pub fn open(dir: &std::path::Path) -> Result<Self> {
        Ok(KvStore::new(SledEngine::open(dir)?))
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        KvStore::new(MemoryEngine::new())
    }
}

impl<E: Engine> KvStore<E> {
    /// Wraps an engine.
    pub fn new(engine: E) -> Self {
        KvStore {
            engine,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// The engine (tests reach through it to damage records on purpose).
    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// Serializes writers of one session.
    pub(crate) fn lock(&self, ns: &str, session_id: &str) -> MutexGuard<'_, ()> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (ns, session_id).hash(&mut h);
        let i = (h.finish() % STRIPES as u64) as usize;
        // The guarded data is `()`: a poisoned stripe protects nothing.
        self.stripes[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads and verifies a record.
    pub(crate) fn read<T: serde::de::DeserializeOwned>(
        &self,
        key: &[u8],
        what: impl FnOnce() -> String,
    ) -> Result<Option<T>> {
        match self.engine.get(key)? {
            Some(v) => codec::decode(&v, what).map(Some),
            None => Ok(None),
        }
    }

    pub(crate) fn read_session(&self, ns: &str, session_id: &str) -> Result<Session> {
        self.read(&keys::session(ns, session_id), || {
            format!("session record of {ns}/{session_id}")
        })?
        .ok_or_else(|| Error::session_not_found(ns, session_id))
    }

    /// Removes every key with `prefix`, in bounded batches; returns how many.
    fn delete_prefix(&self, prefix: &[u8]) -> Result<u64> {
        let mut n = 0u64;
        loop {
            let chunk = self.engine.scan(Bound::Unbounded, prefix, DELETE_CHUNK)?;
            if chunk.is_empty() {
                return Ok(n);
            }
            n += chunk.len() as u64;
            self.engine
                .apply(chunk.into_iter().map(|(k, _)| Write::Delete(k)).collect())?;
        }
    }
}

impl<E: Engine> KvStore<E> {
    /// Removes every record that hangs off a session (not the session
    /// record itself); returns the number of turns removed. Caller holds
    /// the session's lock.
    fn purge_records(&self, ns: &str, session_id: &str) -> Result<u64> {
        let turns = self.delete_prefix(&keys::turns_of(ns, session_id))?;
        self.delete_prefix(&keys::idempotency_of(ns, session_id))?;
        Ok(turns)
    }
}

fn session_id_of(key: &[u8]) -> Result<String> {
    String::from_utf8(keys::last_component(key).to_vec())
        .map_err(|_| Error::DataLoss("a session key is not valid UTF-8".into()))
}

impl<E: Engine> Store for KvStore<E> {
    fn create_session(&self, session: &Session) -> Result<()> {
        let (ns, id) = (&session.namespace, &session.session_id);
        let _g = self.lock(ns, id);
        let key = keys::session(ns, id);
        if self.engine.get(&key)?.is_some() {
            return Err(Error::AlreadyExists(format!(
                "session {id:?} already exists in namespace {ns:?}"
            )));
        }
        // Records a crash left behind while deleting an earlier session of
        // the same id must not leak into the new one.
        self.purge_records(ns, id)?;
        let mut batch: Batch = vec![Write::Put(key, codec::encode(session)?)];
        if !session.subject_id.is_empty() {
            batch.push(Write::Put(
                keys::subject(ns, &session.subject_id, id),
                Vec::new(),
            ));
        }
        self.engine.apply(batch)
    }

    fn get_session(&self, ns: &str, session_id: &str) -> Result<Session> {
        self.read_session(ns, session_id)
    }

    fn list_sessions(
        &self,
        ns: &str,
        filter: &SessionFilter,
        after: Option<&str>,
        limit: usize,
        scan_limit: usize,
    ) -> Result<SessionPage> {
        // With a subject filter, walk that subject's index; else all
        // sessions of the namespace. Both are in session-id order.
        let (prefix, start) = match &filter.subject_id {
            Some(subject) => (
                keys::subject_of(ns, subject),
                after.map(|a| keys::subject(ns, subject, a)),
            ),
            None => (keys::sessions_of(ns), after.map(|a| keys::session(ns, a))),
        };
        let from = match &start {
            Some(k) => Bound::Excluded(k.as_slice()),
            None => Bound::Unbounded,
        };
        // One extra candidate tells whether more follow.
        let candidates = self.engine.scan(from, &prefix, scan_limit + 1)?;
        let mut page = SessionPage::default();
        let mut last_examined: Option<String> = None;
        for (i, (key, value)) in candidates.iter().enumerate() {
            if page.sessions.len() == limit || i == scan_limit {
                page.resume_after = last_examined;
                break;
            }
            let sid = session_id_of(key)?;
            let session = if filter.subject_id.is_some() {
                match self.read_session(ns, &sid) {
                    Ok(s) => Some(s),
                    // Index entry without its session: deleted meanwhile.
                    Err(Error::NotFound(_)) => None,
                    Err(e) => return Err(e),
                }
            } else {
                Some(codec::decode(value, || {
                    format!("session record of {ns}/{sid}")
                })?)
            };
            if let Some(s) = session.filter(|s| filter.matches(s)) {
                page.sessions.push(s);
            }
            last_examined = Some(sid);
        }
        Ok(page)
    }

    fn update_session(
        &self,
        ns: &str,
        session_id: &str,
        change: &mut dyn FnMut(&mut Session) -> Result<()>,
    ) -> Result<Session> {
        let _g = self.lock(ns, session_id);
        let mut s = self.read_session(ns, session_id)?;
        let subject = s.subject_id.clone();
        change(&mut s)?;
        if s.subject_id != subject {
            return Err(Error::Internal("a session's subject cannot change".into()));
        }
        self.engine.apply(vec![Write::Put(
            keys::session(ns, session_id),
            codec::encode(&s)?,
        )])?;
        Ok(s)
    }

    fn delete_session(&self, ns: &str, session_id: &str) -> Result<u64> {
        let _g = self.lock(ns, session_id);
        let session = match self.read_session(ns, session_id) {
            Ok(s) => Some(s),
            // A corrupt session record must still be deletable.
            Err(Error::DataLoss(_)) => None,
            Err(e) => return Err(e),
        };
        // The session record goes first, atomically with its index entry:
        // from then on the session is gone for every reader, and the
        // remaining records (removed in bounded batches below) are
        // unreachable even if a crash interrupts the cleanup.
        let mut batch: Batch = vec![Write::Delete(keys::session(ns, session_id))];
        if let Some(s) = session.as_ref().filter(|s| !s.subject_id.is_empty()) {
            batch.push(Write::Delete(keys::subject(ns, &s.subject_id, session_id)));
        }
        self.engine.apply(batch)?;
        self.purge_records(ns, session_id)
    }

    fn append_turns(
        &self,
        ns: &str,
        session_id: &str,
        append: &PreparedAppend,
    ) -> Result<AppendOutcome> {
        let _g = self.lock(ns, session_id);
        let current = self.read_session(ns, session_id)?;
        let idem_key = append
            .idempotency_key
            .as_ref()
            .map(|ik| keys::idempotency(ns, session_id, ik));
        let previous = match &idem_key {
            Some(k) => self.read::<IdempotencyRecord>(k, || {
                format!("idempotency record of {ns}/{session_id}")
            })?,
            None => None,
        };
        match plan_append(&current, previous, append)? {
            AppendPlan::Replay(outcome) => Ok(outcome),
            AppendPlan::Write {
                turns,
                session,
                outcome,
            } => {
                let mut batch: Batch = Vec::with_capacity(turns.len() + 2);
                for t in &turns {
                    batch.push(Write::Put(
                        keys::turn(ns, session_id, t.seq),
                        codec::encode(t)?,
                    ));
                }
                if let Some(k) = idem_key {
                    let rec = IdempotencyRecord {
                        fingerprint: append.fingerprint,
                        outcome: outcome.clone(),
                    };
                    batch.push(Write::Put(k, codec::encode(&rec)?));
                }
                batch.push(Write::Put(
                    keys::session(ns, session_id),
                    codec::encode(&session)?,
                ));
                self.engine.apply(batch)?;
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
        // Existence (and integrity) of the session record first.
        self.read_session(ns, session_id)?;
        if from_seq > to_seq {
            return Ok(Vec::new());
        }
        let start = keys::turn(ns, session_id, from_seq);
        let entries = self.engine.scan(
            Bound::Included(&start),
            &keys::turns_of(ns, session_id),
            limit,
        )?;
        let mut out = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let t: Turn = codec::decode(&v, || {
                format!("turn {} of session {ns}/{session_id}", keys::seq_of(&k))
            })?;
            if t.seq > to_seq {
                break;
            }
            out.push(t);
        }
        Ok(out)
    }

    fn sync(&self) -> Result<()> {
        self.engine.sync()
    }
}
