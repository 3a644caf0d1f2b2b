//! Key/value engines under the typed store: an ordered map with atomic
//! batches and units of work. `SledEngine` is the durable default;
//! `MemoryEngine` keeps everything in process memory; the PostgreSQL engine
//! (`postgres/`) is shared by several daemons. All hold raw bytes; keys,
//! encoding and checksums are the typed store's business (`kv.rs`).
//!
//! Contract: `apply` is atomic (all of a batch or nothing) and immediately
//! visible to readers; it is durable only after a later `sync` returns.
//! `locked` runs a read-decide-write as one unit serialized by a lock name;
//! a local engine leaves that serializing to the caller, a shared one does
//! it in the database and commits the unit as one transaction.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::mem::ManuallyDrop;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{Error, Result};

/// One write of a batch.
#[derive(Debug, Clone)]
pub enum Write {
    /// Set a key.
    Put(Vec<u8>, Vec<u8>),
    /// Remove a key (absent keys are fine).
    Delete(Vec<u8>),
}

/// An atomic group of writes.
pub type Batch = Vec<Write>;

/// A key and its value.
pub type Entry = (Vec<u8>, Vec<u8>);

/// What can be read: the engine itself, or a unit of work inside it.
pub trait Read {
    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Entries from `from` (or from `prefix` when unbounded) in ascending
    /// key order while keys start with `prefix`, at most `limit`.
    fn scan(&self, from: Bound<&[u8]>, prefix: &[u8], limit: usize) -> Result<Vec<Entry>>;

    /// Entries whose keys start with `prefix`, in descending key order,
    /// at most `limit`.
    fn scan_rev(&self, prefix: &[u8], limit: usize) -> Result<Vec<Entry>>;

    /// The values of `keys`, in their order (one round trip on a
    /// database; point reads on a local engine).
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }
}

/// A unit of work of [`Engine::locked`]: reads see every write committed
/// before it and its own writes; its writes commit together.
pub trait Txn: Read {
    /// Writes `batch` (atomically).
    fn apply(&mut self, batch: Batch) -> Result<()>;

    /// Whether the engine numbers outbox entries itself (a shared engine:
    /// it stages them with the unit and numbers them in commit order when
    /// the outbox is read, see [`Shared::sequence`]). When false the caller
    /// numbers them and writes them with `apply`.
    fn numbers_entries(&self) -> bool {
        false
    }

    /// Adds outbox entries for the engine to number (see
    /// [`Shared::sequence`]).
    fn add_entries(&mut self, _entries: Vec<Vec<u8>>) -> Result<()> {
        Err(Error::Internal(
            "this engine does not number outbox entries".into(),
        ))
    }

    /// Tells other processes sharing the engine, once the work commits,
    /// that `topic` changed (a wake-up only: it may be lost).
    fn announce(&mut self, _topic: String) {}
}

/// Called with each topic another process announced (see
/// [`Txn::announce`]).
pub type OnChange = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// What a shared engine (one database, several daemons) keeps in the
/// database rather than in the process.
pub trait Shared: Send + Sync {
    /// Due background work and its leases.
    fn claims(&self) -> &dyn crate::store::Claims;

    /// How many keys start with `prefix` from `from` on.
    fn count(&self, from: Bound<&[u8]>, prefix: &[u8]) -> Result<u64>;

    /// Calls `on_change` with each topic other processes announce (see
    /// [`Txn::announce`]) until the returned guard is dropped.
    fn listen(&self, on_change: OnChange) -> Box<dyn Send>;

    /// Numbers the outbox entries committed so far under `key(id)`, after
    /// every id already given, in one order for every process; returns
    /// how many. Readers of the outbox call it first.
    fn sequence(&self, key: fn(u64) -> Vec<u8>) -> Result<usize>;

    /// Outbox entries committed and not numbered yet.
    fn staged(&self) -> Result<u64>;

    /// Adds outbox entries outside a unit of work (after an import).
    fn stage(&self, entries: Vec<Vec<u8>>) -> Result<()>;

    /// Connections held to the database, and how many of them are idle.
    fn connections(&self) -> (u32, u32);
}

/// A local engine's unit of work: reads and writes go straight to the
/// engine as they are made; the caller serializes writers (the typed
/// store's lock stripes).
pub struct Direct<'a, E: Engine + ?Sized>(pub &'a E);

impl<E: Engine + ?Sized> Read for Direct<'_, E> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.0.get(key)
    }

    fn scan(&self, from: Bound<&[u8]>, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        self.0.scan(from, prefix, limit)
    }

    fn scan_rev(&self, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        self.0.scan_rev(prefix, limit)
    }
}

impl<E: Engine + ?Sized> Txn for Direct<'_, E> {
    fn apply(&mut self, batch: Batch) -> Result<()> {
        self.0.apply(batch)
    }
}

/// An ordered byte map with atomic batches and explicit durability.
pub trait Engine: Read + Send + Sync + 'static {
    /// Applies every write of `batch` atomically.
    fn apply(&self, batch: Batch) -> Result<()>;

    /// Makes every applied batch durable.
    fn sync(&self) -> Result<()>;

    /// Whether every batch applied so far is durable already (a sync that
    /// began after it finished), so a reader need not sync for what it
    /// read. `false` when the engine cannot tell.
    fn all_synced(&self) -> bool {
        false
    }

    /// Runs `work` as one unit: serialized with every other unit holding
    /// `lock` (in every process sharing the engine), committed when it
    /// returns `Ok`. A local engine (the default) applies writes as they
    /// are made and leaves serializing to the caller.
    fn locked<T>(&self, _lock: &[u8], work: impl FnOnce(&mut dyn Txn) -> Result<T>) -> Result<T>
    where
        Self: Sized,
    {
        work(&mut Direct(self))
    }

    /// What a shared engine keeps in the database; `None` for a local one.
    fn shared(&self) -> Option<&dyn Shared> {
        None
    }
}

/// Where a scan starts: `from`, or the prefix itself when unbounded.
fn start_bound(from: Bound<&[u8]>, prefix: &[u8]) -> Bound<Vec<u8>> {
    match from {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Included(prefix.to_vec()),
    }
}

/// The first key after every key that starts with `prefix` (`None`: no
/// such key, the prefix is all 0xff).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The in-memory engine: a `BTreeMap` behind a read-write lock.
#[derive(Default)]
pub struct MemoryEngine {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MemoryEngine {
    /// An empty engine.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Read for MemoryEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        // A writer never panics while holding the lock (inserts only), so
        // a poisoned lock still guards consistent data.
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        Ok(map.get(key).cloned())
    }

    fn scan(&self, from: Bound<&[u8]>, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        let from = start_bound(from, prefix);
        Ok(map
            .range((from, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn scan_rev(&self, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        let end = prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        Ok(map
            .range::<[u8], _>((Bound::Included(prefix), end.as_ref().map(Vec::as_slice)))
            .rev()
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

impl Engine for MemoryEngine {
    fn apply(&self, batch: Batch) -> Result<()> {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        for w in batch {
            match w {
                Write::Put(k, v) => {
                    map.insert(k, v);
                }
                Write::Delete(k) => {
                    map.remove(&k);
                }
            }
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }
}

/// sled 0.34 guards every operation of every database in the process with
/// one global reader-writer lock, fair to writers, and a flush (ours, its
/// background flusher's, or the one a dropped tree runs) holds a read
/// guard while it waits for log buffers that another thread may need a
/// read guard to write. With a batch waiting for the write guard in
/// between, that is a deadlock (seen as hangs with concurrent readers,
/// writers and syncs). The gate below orders our calls first: a batch
/// takes it exclusively, everything else shared, so a batch never waits in
/// sled's lock behind a flush of ours, and sled's own flusher is never
/// queued behind a waiting batch while one of our flushes waits for it.
static SLED_GATE: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    // The guarded data is `()`: a poisoned gate protects nothing.
    SLED_GATE.read().unwrap_or_else(|p| p.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SLED_GATE.write().unwrap_or_else(|p| p.into_inner())
}

/// The sled engine: one tree (`memory`) of a sled database in a directory.
///
/// sled's own `flush` writes its log with `sync_file_range`, which does not
/// survive power loss, and writes large values to `blobs/` files without
/// syncing them. `sync` therefore follows the flush with `fdatasync` of the
/// log file, of every blob file not yet synced and of the blob directory.
pub struct SledEngine {
    path: PathBuf,
    // Dropped explicitly, inside the gate (see `Drop`).
    db: ManuallyDrop<sled::Db>,
    tree: ManuallyDrop<sled::Tree>,
    /// The sled log file, kept open to `fdatasync` it after each flush.
    log_file: File,
    /// Blob files already synced (sled never rewrites a blob in place).
    synced_blobs: Mutex<HashSet<OsString>>,
    /// Batches applied (counted inside the exclusive gate, so a read that
    /// sees a batch sees it counted).
    applied: AtomicU64,
    /// Batches a finished sync covered (it began after they were applied).
    synced: AtomicU64,
}

impl SledEngine {
    /// Opens (or creates) the database in `dir`. Fails with a clear message
    /// when the directory is held by another process or is unusable.
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with_cache(dir, crate::config::DEFAULT_CACHE_MB)
    }

    /// As [`SledEngine::open`], with a page cache of `cache_mb` MiB.
    pub fn open_with_cache(dir: &Path, cache_mb: u64) -> Result<Self> {
        if let Some(msg) = super::compact::interrupted(dir) {
            return Err(Error::Storage(msg));
        }
        create_private_dir(dir).map_err(|e| {
            Error::Storage(format!(
                "cannot create data directory {}: {e}",
                dir.display()
            ))
        })?;
        let gate = shared();
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_mb << 20)
            .open()
            .map_err(|e| {
                let msg = e.to_string();
                if msg.contains("lock") {
                    let holder = match std::fs::read_to_string(dir.join(HOLDER_FILE)) {
                        // One line of ours; bounded in case the file is not.
                        Ok(h) if !h.trim().is_empty() => {
                            let line = h.lines().next().unwrap_or_default();
                            format!("held by {}", line.chars().take(200).collect::<String>())
                        }
                        _ => "is another mnemo running?".to_owned(),
                    };
                    Error::Storage(format!(
                        "data directory {} is in use by another process ({holder}): {msg}",
                        dir.display()
                    ))
                } else {
                    Error::Storage(format!(
                        "cannot open data directory {}: {msg}",
                        dir.display()
                    ))
                }
            })?;
        let tree = db.open_tree("memory")?;
        drop(gate);
        // Best effort: only the message a second opener prints depends on it.
        let _ = std::fs::write(dir.join(HOLDER_FILE), holder_line());
        let log_file = File::open(dir.join("db")).map_err(|e| {
            Error::Storage(format!("cannot open sled log in {}: {e}", dir.display()))
        })?;
        // Make the files' directory entries durable once.
        sync_dir(dir)?;
        Ok(SledEngine {
            path: dir.to_path_buf(),
            db: ManuallyDrop::new(db),
            tree: ManuallyDrop::new(tree),
            log_file,
            synced_blobs: Mutex::new(HashSet::new()),
            // What was recovered at open counts as one batch not known
            // to be synced (a killed process may have left it written but
            // not synced): the first reader that needs it synced syncs.
            applied: AtomicU64::new(1),
            synced: AtomicU64::new(0),
        })
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.path
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

impl Drop for SledEngine {
    fn drop(&mut self) {
        // Dropping the last handle flushes: do it inside the gate.
        let _gate = shared();
        // Removed while the lock is still held: a file present is the
        // holder's, or a crashed holder's.
        let _ = std::fs::remove_file(self.path.join(HOLDER_FILE));
        // SAFETY: the fields are never used again; `drop` runs once.
        unsafe {
            ManuallyDrop::drop(&mut self.tree);
            ManuallyDrop::drop(&mut self.db);
        }
    }
}

/// The file beside sled's lock that names the process holding the data
/// directory (written after the lock is taken, removed before it is
/// released), so a second opener's error can say who holds it.
pub const HOLDER_FILE: &str = "mnemo.pid";

/// "pid 1234, mnemo mcp": the process id and the program with its
/// subcommand, never further arguments (they may carry keys).
fn holder_line() -> String {
    let mut args = std::env::args_os();
    let program = args
        .next()
        .map(|p| {
            std::path::Path::new(&p).file_name().map_or_else(
                || p.to_string_lossy().into_owned(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .unwrap_or_default();
    let command = match args.next() {
        Some(sub) => format!("{program} {}", sub.to_string_lossy()),
        None => program,
    };
    format!("pid {}, {command}\n", std::process::id())
}

impl Read for SledEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _gate = shared();
        Ok(self.tree.get(key)?.map(|v| v.to_vec()))
    }

    fn scan(&self, from: Bound<&[u8]>, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        let _gate = shared();
        let from = start_bound(from, prefix);
        let mut out = Vec::new();
        for item in self.tree.range((from, Bound::Unbounded)) {
            let (k, v) = item?;
            if !k.starts_with(prefix) || out.len() == limit {
                break;
            }
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    fn scan_rev(&self, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        let _gate = shared();
        let mut out = Vec::new();
        for item in self.tree.scan_prefix(prefix).rev() {
            let (k, v) = item?;
            if out.len() == limit {
                break;
            }
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }
}

impl Engine for SledEngine {
    fn apply(&self, batch: Batch) -> Result<()> {
        let mut b = sled::Batch::default();
        for w in batch {
            match w {
                Write::Put(k, v) => b.insert(k, v),
                Write::Delete(k) => b.remove(k),
            }
        }
        let _gate = exclusive();
        self.tree.apply_batch(b)?;
        self.applied.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let covers = self.applied.load(Ordering::SeqCst);
        {
            let _gate = shared();
            self.db.flush()?;
        }
        self.sync_blobs()?;
        self.log_file
            .sync_data()
            .map_err(|e| Error::Storage(format!("fdatasync of the sled log failed: {e}")))?;
        self.synced.fetch_max(covers, Ordering::SeqCst);
        Ok(())
    }

    fn all_synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst) >= self.applied.load(Ordering::SeqCst)
    }
}

/// Creates `dir` (and missing parents) readable by its owner only (0700
/// on Unix): it holds every turn in clear. An existing directory keeps
/// the mode its operator gave it.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}
