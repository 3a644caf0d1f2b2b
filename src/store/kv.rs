//! The typed store over any `Engine`: sessions, turns, summaries and their
//! records, using the key layout in `keys` and checksummed values from
//! `codec`. Writes to one session run as one unit of work under the
//! session's lock (a lock stripe in this process for a local engine, the
//! session's lock row for a shared one); the domain's `decide` closure runs
//! inside it and its plan is applied atomically, then the write is durable
//! before the method returns (group commit on sled, the transaction's
//! commit on PostgreSQL). Long-term memory and the outbox are in
//! `knowledge.rs` and `outbox.rs`; shared record helpers in `records.rs`.

use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard};

use super::claims::ClaimTable;
use super::commit::{self, GroupCommit};
use super::engine::{Batch, Engine, MemoryEngine, Read, SledEngine, Txn, Write};
use super::erase::refuse_if_erasing;
use super::outbox::ChangeLog;
use super::records::{purge_records, read, read_session, read_summary};
use super::{
    codec, keys, legacy, AppendPlan, Appended, DecideAppend, DecideRemoval, Removed, SessionPage,
    SessionScan, SessionStore, Store, SummaryStore, SummaryWrite,
};
use crate::error::{Error, Result};
use crate::model::{
    AuditRecord, FoldRecord, IdempotencyRecord, IndexChange, ReviewItem, ReviewStatus, Session,
    SessionFilter, SessionSummary, Turn,
};

/// Lock stripes: enough that unrelated sessions rarely contend.
const STRIPES: usize = 64;

/// A `Store` over engine `E`.
pub struct KvStore<E: Engine> {
    engine: E,
    stripes: Vec<Mutex<()>>,
    /// Ids and cursors of the outbox.
    pub(super) changes: ChangeLog,
    /// Batches the syncs of concurrent writers.
    commit: GroupCommit,
    /// Due background work and its leases.
    pub(super) claims: ClaimTable,
}

/// The durable default: a `KvStore` on sled.
pub type SledStore = KvStore<SledEngine>;
/// A `KvStore` in process memory (nothing survives a restart).
pub type MemoryStore = KvStore<MemoryEngine>;
/// A `KvStore` on PostgreSQL, shared by every daemon using the database.
pub type PgStore = KvStore<super::postgres::PgEngine>;

impl SledStore {
    /// Opens the sled store in `dir` (see [`SledEngine::open`]).
    pub fn open(dir: &std::path::Path) -> Result<Self> {
        Ok(KvStore::new(SledEngine::open(dir)?))
    }

    /// As [`SledStore::open`], with a page cache of `cache_mb` MiB.
    pub fn open_with_cache(dir: &std::path::Path, cache_mb: u64) -> Result<Self> {
        Ok(KvStore::new(SledEngine::open_with_cache(dir, cache_mb)?))
    }
}

impl PgStore {
    /// Connects to PostgreSQL (see [`super::postgres::PgEngine::open`]).
    pub fn connect(options: &super::postgres::PgOptions) -> Result<Self> {
        Ok(KvStore::new(super::postgres::PgEngine::open(options)?))
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
        let changes = ChangeLog::recover(&engine).unwrap_or_else(|e| {
            // Reads failing here fail every request too; the outbox ids
            // still start from the clock, so they stay unique.
            tracing::error!(error = %e, "cannot read the outbox");
            ChangeLog::default()
        });
        KvStore {
            engine,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            changes,
            commit: GroupCommit::new(),
            claims: ClaimTable::default(),
        }
    }

    /// Returns once every batch applied so far is durable (one sync for
    /// all concurrent callers).
    pub(super) fn durable(&self) -> Result<()> {
        self.commit.wait_durable(|| self.engine.sync())
    }

    /// The engine (tests reach through it to damage records on purpose).
    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// Runs `work` as one unit of the engine under the lock of
    /// `(ns, name)` (a session id, or a subject's lock name): the lock
    /// stripe of a local engine, the lock row of a shared one.
    pub(crate) fn locked<T>(
        &self,
        ns: &str,
        name: &str,
        work: impl FnOnce(&mut dyn Txn) -> Result<T>,
    ) -> Result<T> {
        let _stripe = self.engine.shared().is_none().then(|| self.lock(ns, name));
        self.engine.locked(&keys::session(ns, name), work)
    }

    /// Serializes writers of one session in this process.
    pub(crate) fn lock(&self, ns: &str, session_id: &str) -> MutexGuard<'_, ()> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (ns, session_id).hash(&mut h);
        let i = (h.finish() % STRIPES as u64) as usize;
        // The guarded data is `()`: a poisoned stripe protects nothing.
        self.stripes[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads and verifies a record.
    pub(crate) fn read<T: serde::de::DeserializeOwned + 'static>(
        &self,
        key: &[u8],
        what: impl FnOnce() -> String,
    ) -> Result<Option<T>> {
        read(&self.engine, key, what)
    }

    pub(crate) fn read_session(&self, ns: &str, session_id: &str) -> Result<Session> {
        read_session(&self.engine, ns, session_id)
    }

    /// One page of a filtered listing: walks the keys with `prefix` after
    /// `after`, keeps what `examine` returns (with the id it names), and
    /// stops at `limit` kept or `scan_limit` examined. The second value is
    /// the last id examined when more candidates follow (where to resume).
    pub(super) fn filtered_page<T>(
        &self,
        after: Option<&[u8]>,
        prefix: &[u8],
        limit: usize,
        scan_limit: usize,
        mut examine: impl FnMut(&[u8], &[u8]) -> Result<(String, Option<T>)>,
    ) -> Result<(Vec<T>, Option<String>)> {
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        // One extra candidate tells whether more follow.
        let candidates = self.engine.scan(from, prefix, scan_limit + 1)?;
        let mut kept = Vec::new();
        let mut last_examined: Option<String> = None;
        for (i, (key, value)) in candidates.iter().enumerate() {
            if kept.len() == limit || i == scan_limit {
                return Ok((kept, last_examined));
            }
            let (id, item) = examine(key, value)?;
            kept.extend(item);
            last_examined = Some(id);
        }
        Ok((kept, None))
    }
}

/// The topic other daemons' watchers of a session listen for.
pub(super) fn watch_topic(ns: &str, session_id: &str) -> String {
    format!("{ns}\t{session_id}")
}

fn session_id_of(key: &[u8]) -> Result<String> {
    String::from_utf8(keys::last_component(key).to_vec())
        .map_err(|_| Error::DataLoss("a session key is not valid UTF-8".into()))
}

impl<E: Engine> SessionStore for KvStore<E> {
    fn create_session(&self, session: &Session) -> Result<()> {
        let (ns, id) = (&session.namespace, &session.session_id);
        self.locked(ns, id, |tx| {
            let key = keys::session(ns, id);
            if tx.get(&key)?.is_some() {
                return Err(Error::AlreadyExists(format!(
                    "session {id:?} already exists in namespace {ns:?}"
                )));
            }
            refuse_if_erasing(tx, ns, &session.subject_id)?;
            // Records a crash left behind while deleting an earlier session
            // of the same id must not leak into the new one.
            purge_records(tx, ns, id)?;
            let mut batch: Batch = vec![Write::Put(key, codec::encode(session)?)];
            if !session.subject_id.is_empty() {
                batch.push(Write::Put(
                    keys::subject(ns, &session.subject_id, id),
                    Vec::new(),
                ));
            }
            tx.apply(batch)
        })?;
        // Outside the lock: writers waiting for it join the same sync.
        self.durable()
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
        let (sessions, resume_after) = self.filtered_page(
            start.as_deref(),
            &prefix,
            limit,
            scan_limit,
            |key, value| {
                let sid = session_id_of(key)?;
                let session = if filter.subject_id.is_some() {
                    match self.read_session(ns, &sid) {
                        Ok(s) => Some(s),
                        // Index entry without its session: deleted meanwhile.
                        Err(Error::NotFound(_)) => None,
                        Err(e) => return Err(e),
                    }
                } else {
                    Some(legacy::decode_session(value, || {
                        format!("session record of {ns}/{sid}")
                    })?)
                };
                Ok((sid, session.filter(|s| filter.matches(s))))
            },
        )?;
        Ok(SessionPage {
            sessions,
            resume_after,
        })
    }

    fn update_session(
        &self,
        ns: &str,
        session_id: &str,
        change: &mut dyn FnMut(&mut Session) -> Result<()>,
    ) -> Result<Session> {
        let s = self.locked(ns, session_id, |tx| {
            let mut s = read_session(tx, ns, session_id)?;
            let subject = s.subject_id.clone();
            change(&mut s)?;
            if s.subject_id != subject {
                return Err(Error::Internal("a session's subject cannot change".into()));
            }
            tx.apply(vec![Write::Put(
                keys::session(ns, session_id),
                codec::encode(&s)?,
            )])?;
            tx.announce(watch_topic(ns, session_id));
            Ok(s)
        })?;
        // Outside the lock: writers waiting for it join the same sync.
        self.durable()?;
        Ok(s)
    }

    fn delete_session(&self, ns: &str, session_id: &str) -> Result<u64> {
        let turns = self.locked(ns, session_id, |tx| {
            let session = match read_session(tx, ns, session_id) {
                Ok(s) => Some(s),
                // A corrupt session record must still be deletable.
                Err(Error::DataLoss(_)) => None,
                Err(e) => return Err(e),
            };
            // The session record goes first, atomically with its index entry:
            // from then on the session is gone for every reader, and the
            // remaining records (removed in bounded batches below) are
            // unreachable even if a crash interrupts the cleanup.
            // Its episode and carried actions go in the same batch (they are
            // what other sessions of the subject see), and the search index is
            // told to forget the session.
            let mut batch: Batch = vec![Write::Delete(keys::session(ns, session_id))];
            if let Some(s) = session.as_ref().filter(|s| !s.subject_id.is_empty()) {
                batch.push(Write::Delete(keys::subject(ns, &s.subject_id, session_id)));
                for (k, _) in tx.scan(
                    Bound::Unbounded,
                    &keys::carried_of_session(ns, &s.subject_id, session_id),
                    usize::MAX,
                )? {
                    batch.push(Write::Delete(k));
                }
            }
            let pointer = keys::episode_of(ns, session_id);
            if let Some(episode_key) = tx.get(&pointer)? {
                batch.push(Write::Delete(episode_key));
                batch.push(Write::Delete(pointer));
            }
            let note = IndexChange::SessionDeleted {
                namespace: ns.to_owned(),
                session_id: session_id.to_owned(),
            };
            self.changes.commit(tx, batch, vec![note])?;
            purge_records(tx, ns, session_id)
        })?;
        // Outside the lock: writers waiting for it join the same sync.
        self.durable()?;
        Ok(turns)
    }

    fn append_turns(
        &self,
        ns: &str,
        session_id: &str,
        idempotency_key: Option<&str>,
        decide: &mut DecideAppend<'_>,
    ) -> Result<Appended> {
        let idem_key = idempotency_key.map(|ik| keys::idempotency(ns, session_id, ik));
        let appended = self.locked(ns, session_id, |tx| {
            let current = read_session(tx, ns, session_id)?;
            refuse_if_erasing(tx, ns, &current.subject_id)?;
            let previous = match &idem_key {
                Some(k) => read::<IdempotencyRecord>(tx, k, || {
                    format!("idempotency record of {ns}/{session_id}")
                })?,
                None => None,
            };
            Ok(match decide(&current, previous.as_ref())? {
                AppendPlan::Replay(outcome) => Appended {
                    outcome,
                    previous_state: current.state,
                    session: current,
                },
                AppendPlan::Write {
                    turns,
                    session,
                    outcome,
                    fingerprint,
                } => {
                    let gap_free = turns
                        .iter()
                        .enumerate()
                        .all(|(i, t)| t.seq == current.next_seq + i as u64);
                    if turns.is_empty()
                        || !gap_free
                        || session.next_seq != current.next_seq + turns.len() as u64
                    {
                        return Err(Error::Internal(format!(
                            "an append plan for {ns}/{session_id} breaks the seq order"
                        )));
                    }
                    let mut batch: Batch = Vec::with_capacity(turns.len() + 3);
                    for t in &turns {
                        batch.push(Write::Put(
                            keys::turn(ns, session_id, t.seq),
                            codec::encode(t)?,
                        ));
                    }
                    if let Some(k) = idem_key {
                        let rec = IdempotencyRecord {
                            fingerprint,
                            outcome: outcome.clone(),
                        };
                        batch.push(Write::Put(k, codec::encode(&rec)?));
                    }
                    batch.push(Write::Put(
                        keys::session(ns, session_id),
                        codec::encode(&session)?,
                    ));
                    let note = IndexChange::Turns {
                        namespace: ns.to_owned(),
                        session_id: session_id.to_owned(),
                        first_seq: outcome.first_seq,
                        last_seq: outcome.last_seq,
                    };
                    self.changes.commit(tx, batch, vec![note])?;
                    tx.announce(watch_topic(ns, session_id));
                    Appended {
                        outcome,
                        session: *session,
                        previous_state: current.state,
                    }
                }
            })
        })?;
        // Outside the lock, so writers of other sessions on this stripe
        // join the same sync. A replay waits too: the original write may
        // not be durable yet.
        self.durable()?;
        Ok(appended)
    }

    fn remove_last_turn(
        &self,
        ns: &str,
        session_id: &str,
        decide: &mut DecideRemoval<'_>,
    ) -> Result<Removed> {
        let removed = self.locked(ns, session_id, |tx| {
            let current = read_session(tx, ns, session_id)?;
            let last = match current.next_seq.checked_sub(1).filter(|&s| s > 0) {
                Some(seq) => read::<Turn>(tx, &keys::turn(ns, session_id, seq), || {
                    format!("turn {seq} of {ns}/{session_id}")
                })?,
                None => None,
            };
            Ok(match (decide(&current, last.as_ref())?, last) {
                (None, _) => Removed {
                    turn: None,
                    session: current,
                },
                (Some(session), Some(turn)) => {
                    if session.next_seq != turn.seq || turn.seq + 1 != current.next_seq {
                        return Err(Error::Internal(format!(
                            "a removal plan for {ns}/{session_id} breaks the seq order"
                        )));
                    }
                    let batch: Batch = vec![
                        Write::Delete(keys::turn(ns, session_id, turn.seq)),
                        Write::Put(keys::session(ns, session_id), codec::encode(&session)?),
                    ];
                    let note = IndexChange::TurnRemoved {
                        namespace: ns.to_owned(),
                        session_id: session_id.to_owned(),
                        seq: turn.seq,
                    };
                    self.changes.commit(tx, batch, vec![note])?;
                    tx.announce(watch_topic(ns, session_id));
                    Removed {
                        turn: Some(turn),
                        session: *session,
                    }
                }
                (Some(_), None) => {
                    return Err(Error::Internal(format!(
                        "a removal plan for {ns}/{session_id}, which has no turn to remove"
                    )))
                }
            })
        })?;
        self.durable()?;
        Ok(removed)
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
        self.read_turns(ns, session_id, from_seq, to_seq, limit)
    }

    fn read_turns(
        &self,
        ns: &str,
        session_id: &str,
        from_seq: u64,
        to_seq: u64,
        limit: usize,
    ) -> Result<Vec<Turn>> {
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
            // Stop on the key, before decoding: a turn outside the range
            // must not be read (nor fail a request with its checksum).
            if keys::seq_of(&k) > to_seq {
                break;
            }
            let t: Turn = codec::decode(&v, || {
                format!("turn {} of session {ns}/{session_id}", keys::seq_of(&k))
            })?;
            out.push(t);
        }
        Ok(out)
    }

    fn get_turns(&self, ns: &str, session_id: &str, seqs: &[u64]) -> Result<Vec<Turn>> {
        let at: Vec<(&str, u64)> = seqs.iter().map(|&seq| (session_id, seq)).collect();
        Ok(self.turns_at(ns, &at)?.into_iter().flatten().collect())
    }

    fn turns_at(&self, ns: &str, at: &[(&str, u64)]) -> Result<Vec<Option<Turn>>> {
        let keys: Vec<Vec<u8>> = at
            .iter()
            .map(|&(session_id, seq)| keys::turn(ns, session_id, seq))
            .collect();
        at.iter()
            .zip(self.engine.get_many(&keys)?)
            .map(|(&(session_id, seq), value)| {
                value
                    .map(|v| {
                        codec::decode(&v, || format!("turn {seq} of session {ns}/{session_id}"))
                    })
                    .transpose()
            })
            .collect()
    }

    fn scan_sessions(&self, after: Option<(&str, &str)>, limit: usize) -> Result<SessionScan> {
        let start = after.map(|(ns, id)| keys::session(ns, id));
        let from = start.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut scan = SessionScan::default();
        for (k, v) in self.engine.scan(from, &[keys::SESSION], limit)? {
            let text = String::from_utf8_lossy(&k[1..]).into_owned();
            let (ns, id) = text.split_once('\0').unwrap_or((text.as_str(), ""));
            scan.resume_after = Some((ns.to_owned(), id.to_owned()));
            match legacy::decode_session(&v, || format!("session record {ns}/{id}")) {
                Ok(s) => scan.sessions.push(s),
                Err(e) => scan.unreadable.push(e.to_string()),
            }
        }
        Ok(scan)
    }
}

impl<E: Engine> SummaryStore for KvStore<E> {
    fn fold_record(&self, ns: &str, session_id: &str) -> Result<Option<FoldRecord>> {
        match self.engine.get(&keys::fold(ns, session_id))? {
            Some(v) => legacy::decode_fold(&v, || {
                format!("summary fold state of session {ns}/{session_id}")
            })
            .map(Some),
            None => Ok(None),
        }
    }

    fn save_summary(&self, ns: &str, session_id: &str, write: SummaryWrite) -> Result<Session> {
        let session = self.locked(ns, session_id, |tx| {
        let mut session = read_session(tx, ns, session_id)?;
        if session.summary.version != write.base_version {
            return Err(Error::Aborted(format!(
                "session {ns}/{session_id} got summary version {} while this one was being written from version {}",
                session.summary.version, write.base_version
            )));
        }
        let mut batch = Batch::new();
        let progress = &mut session.summary;
        progress.audit_seq += 1;
        progress.attempted_through_seq = progress
            .attempted_through_seq
            .max(write.attempted_through_seq);
        let mut audit = write.audit;
        audit.audit_seq = progress.audit_seq;
        if let (Some(summary), Some(fold)) = (&write.summary, &write.fold) {
            progress.version = summary.version;
            progress.through_seq = fold.through_seq;
            progress.through_tokens = fold.through_tokens;
            batch.push(Write::Put(
                keys::summary(ns, session_id, summary.version),
                codec::encode(summary)?,
            ));
            batch.push(Write::Put(keys::fold(ns, session_id), codec::encode(fold)?));
        }
        if let Some(review) = &write.review {
            batch.push(Write::Put(
                keys::review(ns, &review.review_id),
                codec::encode(review)?,
            ));
        }
        batch.push(Write::Put(
            keys::audit(ns, session_id, audit.audit_seq),
            codec::encode(&audit)?,
        ));
        batch.push(Write::Put(
            keys::session(ns, session_id),
            codec::encode(&session)?,
        ));
        tx.apply(batch)?;
        tx.announce(watch_topic(ns, session_id));
        Ok(session)
        })?;
        // Outside the lock: writers waiting for it join the same sync.
        self.durable()?;
        Ok(session)
    }

    fn get_summary(&self, ns: &str, session_id: &str, version: u64) -> Result<SessionSummary> {
        let session = self.read_session(ns, session_id)?;
        let v = if version == 0 {
            session.summary.version
        } else {
            version
        };
        if v == 0 {
            return Err(Error::NotFound(format!(
                "session {ns}/{session_id} has no summary yet"
            )));
        }
        read_summary(&self.engine, ns, session_id, v)?.ok_or_else(|| {
            Error::NotFound(format!(
                "session {ns}/{session_id} has no summary version {v}"
            ))
        })
    }

    fn summary_at(
        &self,
        ns: &str,
        session_id: &str,
        version: u64,
    ) -> Result<Option<SessionSummary>> {
        read_summary(&self.engine, ns, session_id, version)
    }

    fn list_summaries(
        &self,
        ns: &str,
        session_id: &str,
        at_most: u64,
        limit: usize,
    ) -> Result<Vec<SessionSummary>> {
        let session = self.read_session(ns, session_id)?;
        let top = at_most.min(session.summary.version);
        let mut out = Vec::new();
        for v in (1..=top).rev().take(limit) {
            if let Some(s) = read_summary(&self.engine, ns, session_id, v)? {
                out.push(s);
            }
        }
        Ok(out)
    }

    fn list_audit(
        &self,
        ns: &str,
        session_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>> {
        self.read_session(ns, session_id)?;
        let start = keys::audit(ns, session_id, after);
        self.engine
            .scan(
                Bound::Excluded(&start),
                &keys::audits_of(ns, session_id),
                limit,
            )?
            .into_iter()
            .map(|(k, v)| {
                codec::decode(&v, || {
                    format!(
                        "audit record {} of session {ns}/{session_id}",
                        keys::seq_of(&k)
                    )
                })
            })
            .collect()
    }

    fn list_review_items(
        &self,
        ns: &str,
        after: Option<&str>,
        include_resolved: bool,
        limit: usize,
        scan_limit: usize,
    ) -> Result<(Vec<ReviewItem>, Option<String>)> {
        let start = after.map(|a| keys::review(ns, a));
        self.filtered_page(
            start.as_deref(),
            &keys::reviews_of(ns),
            limit,
            scan_limit,
            |k, v| {
                let id = session_id_of(k)?;
                let item: ReviewItem = codec::decode(v, || format!("review item {ns}/{id}"))?;
                let keep = include_resolved || item.status == ReviewStatus::Pending;
                Ok((id, keep.then_some(item)))
            },
        )
    }

    fn resolve_review_item(
        &self,
        ns: &str,
        review_id: &str,
        mut audit: AuditRecord,
        decide: &mut dyn FnMut(&ReviewItem) -> Result<ReviewItem>,
    ) -> Result<ReviewItem> {
        let key = keys::review(ns, review_id);
        let read_item = |r: &dyn Read| -> Result<ReviewItem> {
            read(r, &key, || format!("review item {ns}/{review_id}"))?.ok_or_else(|| {
                Error::NotFound(format!(
                    "review item {review_id:?} not found in namespace {ns:?}"
                ))
            })
        };
        let peek = read_item(&self.engine)?;
        let item = self.locked(ns, &peek.session_id, |tx| {
            // Re-read under the session's lock: a concurrent resolve may have won.
            let item = decide(&read_item(tx)?)?;
            let mut batch: Batch = vec![Write::Put(key.clone(), codec::encode(&item)?)];
            match read_session(tx, ns, &item.session_id) {
                Ok(mut session) => {
                    session.summary.audit_seq += 1;
                    audit.audit_seq = session.summary.audit_seq;
                    batch.push(Write::Put(
                        keys::audit(ns, &item.session_id, audit.audit_seq),
                        codec::encode(&audit)?,
                    ));
                    batch.push(Write::Put(
                        keys::session(ns, &item.session_id),
                        codec::encode(&session)?,
                    ));
                }
                // The session was deleted meanwhile: resolve the item anyway.
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
            tx.apply(batch)?;
            Ok(item)
        })?;
        // Outside the lock: writers waiting for it join the same sync.
        self.durable()?;
        Ok(item)
    }
}

impl<E: Engine> Store for KvStore<E> {
    fn sync_stats(&self) -> std::sync::Arc<commit::Stats> {
        self.commit.stats()
    }

    fn flush(&self) -> Result<()> {
        self.durable()
    }

    fn durable_reads(&self) -> Result<()> {
        if self.engine.all_synced() {
            return Ok(());
        }
        self.durable()
    }

    fn is_shared(&self) -> bool {
        self.engine.shared().is_some()
    }

    fn listen(&self, on_change: super::engine::OnChange) -> Option<Box<dyn Send>> {
        self.engine.shared().map(|s| s.listen(on_change))
    }

    fn connections(&self) -> Option<(u32, u32)> {
        self.engine.shared().map(|s| s.connections())
    }
}
