//! The sled store, mnemo's embedded default. One sled tree holds every
//! record under the layout in `keys`; each value is a checksummed envelope
//! (`codec`). Writes to one session are serialized by a striped lock and
//! applied as one atomic sled batch.
//!
//! Durability: sled's own `flush` writes its log with `sync_file_range`,
//! which does not survive power loss, and writes large values to `blobs/`
//! files without syncing them. `sync` therefore follows the flush with
//! `fdatasync` of the log file, of every blob file not yet synced and of
//! the blob directory.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::{codec, keys, plan_append, AppendPlan, IdempotencyRecord, SessionPage, Store};
use crate::error::{Error, Result};
use crate::memory::types::{AppendOutcome, PreparedAppend, Session, SessionFilter, Turn};

/// Lock stripes: enough that unrelated sessions rarely contend.
const STRIPES: usize = 64;

/// A `Store` on a sled database in a data directory.
pub struct SledStore {
    path: PathBuf,
    db: sled::Db,
    tree: sled::Tree,
    /// The sled log file, kept open to `fdatasync` it after each flush.
    log_file: File,
    /// Blob files already synced (sled never rewrites a blob in place).
    synced_blobs: Mutex<HashSet<OsString>>,
    stripes: Vec<Mutex<()>>,
}

impl SledStore {
    /// Opens (or creates) the store in `dir`. Fails with a clear message
    /// when the directory is held by another process or is unusable.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::Storage(format!(
                "cannot create data directory {}: {e}",
                dir.display()
            ))
        })?;
        let db = sled::Config::new().path(dir).open().map_err(|e| {
            let msg = e.to_string();
            if msg.contains("lock") {
                Error::Storage(format!(
                    "data directory {} is in use by another process (is another mnemo running?): {msg}",
                    dir.display()
                ))
            } else {
                Error::Storage(format!("cannot open data directory {}: {msg}", dir.display()))
            }
        })?;
        let tree = db.open_tree("memory")?;
        let log_file = File::open(dir.join("db")).map_err(|e| {
            Error::Storage(format!("cannot open sled log in {}: {e}", dir.display()))
        })?;
        // Make the files' directory entries durable once.
        sync_dir(dir)?;
        let stripes = (0..STRIPES).map(|_| Mutex::new(())).collect();
        let store = SledStore {
            path: dir.to_path_buf(),
            db,
            tree,
            log_file,
            synced_blobs: Mutex::new(HashSet::new()),
            stripes,
        };
        Ok(store)
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn stripe(&self, ns: &str, session_id: &str) -> MutexGuard<'_, ()> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (ns, session_id).hash(&mut h);
        let i = (h.finish() % STRIPES as u64) as usize;
        // The guarded data is `()`: a poisoned stripe protects nothing.
        self.stripes[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read_session(&self, ns: &str, session_id: &str) -> Result<Session> {
        match self.tree.get(keys::session(ns, session_id))? {
            Some(v) => codec::decode(&v, || format!("session record of {ns}/{session_id}")),
            None => Err(Error::session_not_found(ns, session_id)),
        }
    }

    fn sync_blobs(&self) -> Result<()> {
        let dir = self.path.join("blobs");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let mut synced = self.synced_blobs.lock().unwrap_or_else(|p| p.into_inner());
        let mut present = HashSet::new();
        let mut new_files = false;
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            if !synced.contains(&name) {
                match File::open(entry.path()) {
                    Ok(f) => f.sync_data()?,
                    // sled may garbage-collect a blob between listing and
                    // opening; a removed blob needs no sync.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e.into()),
                }
                new_files = true;
            }
            present.insert(name);
        }
        if new_files {
            sync_dir(&dir)?;
        }
        *synced = present;
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::Storage(format!("cannot sync directory {}: {e}", dir.display())))
}

fn session_id_of(key: &[u8]) -> Result<String> {
    String::from_utf8(keys::last_component(key).to_vec())
        .map_err(|_| Error::DataLoss("a session key is not valid UTF-8".into()))
}

impl Store for SledStore {
    fn create_session(&self, session: &Session) -> Result<()> {
        let (ns, id) = (&session.namespace, &session.session_id);
        let _g = self.stripe(ns, id);
        let key = keys::session(ns, id);
        if self.tree.contains_key(&key)? {
            return Err(Error::AlreadyExists(format!(
                "session {id:?} already exists in namespace {ns:?}"
            )));
        }
        let mut batch = sled::Batch::default();
        batch.insert(key, codec::encode(session)?);
        if !session.subject_id.is_empty() {
            batch.insert(keys::subject(ns, &session.subject_id, id), &[][..]);
        }
        self.tree.apply_batch(batch)?;
        Ok(())
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
        let lower = match &start {
            Some(k) => std::ops::Bound::Excluded(k.clone()),
            None => std::ops::Bound::Included(prefix.clone()),
        };
        let mut page = SessionPage::default();
        let mut last_examined: Option<String> = None;
        let range = self.tree.range((lower, std::ops::Bound::Unbounded));
        for (scanned, item) in range.enumerate() {
            let (key, value) = item?;
            if !key.starts_with(&prefix) {
                break;
            }
            if page.sessions.len() == limit || scanned == scan_limit {
                page.resume_after = last_examined;
                break;
            }
            let sid = session_id_of(&key)?;
            let session = if filter.subject_id.is_some() {
                match self.read_session(ns, &sid) {
                    Ok(s) => s,
                    // Index entry without its session: deleted meanwhile.
                    Err(Error::NotFound(_)) => {
                        last_examined = Some(sid);
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            } else {
                codec::decode(&value, || format!("session record of {ns}/{sid}"))?
            };
            if filter.matches(&session) {
                page.sessions.push(session);
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
        let _g = self.stripe(ns, session_id);
        let mut s = self.read_session(ns, session_id)?;
        let before = s.clone();
        change(&mut s)?;
        if s.subject_id != before.subject_id {
            return Err(Error::Internal("a session's subject cannot change".into()));
        }
        self.tree
            .insert(keys::session(ns, session_id), codec::encode(&s)?)?;
        Ok(s)
    }

    fn delete_session(&self, ns: &str, session_id: &str) -> Result<u64> {
        let _g = self.stripe(ns, session_id);
        let session = match self.read_session(ns, session_id) {
            Ok(s) => Some(s),
            // A corrupt session record must still be deletable.
            Err(Error::DataLoss(_)) => None,
            Err(e) => return Err(e),
        };
        let mut batch = sled::Batch::default();
        let mut turns = 0u64;
        for item in self.tree.scan_prefix(keys::turns_of(ns, session_id)) {
            let (k, _) = item?;
            batch.remove(k);
            turns += 1;
        }
        for item in self.tree.scan_prefix(keys::idempotency_of(ns, session_id)) {
            let (k, _) = item?;
            batch.remove(k);
        }
        if let Some(s) = session.filter(|s| !s.subject_id.is_empty()) {
            batch.remove(keys::subject(ns, &s.subject_id, session_id));
        }
        batch.remove(keys::session(ns, session_id));
        self.tree.apply_batch(batch)?;
        Ok(turns)
    }

    fn append_turns(
        &self,
        ns: &str,
        session_id: &str,
        append: &PreparedAppend,
    ) -> Result<AppendOutcome> {
        let _g = self.stripe(ns, session_id);
        let current = self.read_session(ns, session_id)?;
        let idem_key = append
            .idempotency_key
            .as_ref()
            .map(|ik| keys::idempotency(ns, session_id, ik));
        let previous = match &idem_key {
            Some(k) => match self.tree.get(k)? {
                Some(v) => Some(codec::decode::<IdempotencyRecord>(&v, || {
                    format!("idempotency record of {ns}/{session_id}")
                })?),
                None => None,
            },
            None => None,
        };
        match plan_append(&current, previous, append)? {
            AppendPlan::Replay(outcome) => Ok(outcome),
            AppendPlan::Write {
                turns,
                session,
                outcome,
            } => {
                let mut batch = sled::Batch::default();
                for t in &turns {
                    batch.insert(keys::turn(ns, session_id, t.seq), codec::encode(t)?);
                }
                if let Some(k) = idem_key {
                    let rec = IdempotencyRecord {
                        fingerprint: append.fingerprint,
                        outcome: outcome.clone(),
                    };
                    batch.insert(k, codec::encode(&rec)?);
                }
                batch.insert(keys::session(ns, session_id), codec::encode(&session)?);
                self.tree.apply_batch(batch)?;
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
        let lo = keys::turn(ns, session_id, from_seq);
        let hi = keys::turn(ns, session_id, to_seq);
        let mut out = Vec::new();
        for item in self.tree.range(lo..=hi).take(limit) {
            let (_, v) = item?;
            let t: Turn = codec::decode(&v, || format!("a turn of session {ns}/{session_id}"))?;
            out.push(t);
        }
        Ok(out)
    }

    fn sync(&self) -> Result<()> {
        self.db.flush()?;
        self.sync_blobs()?;
        self.log_file
            .sync_data()
            .map_err(|e| Error::Storage(format!("fdatasync of the sled log failed: {e}")))?;
        Ok(())
    }
}
