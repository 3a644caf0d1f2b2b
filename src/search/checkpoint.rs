//! The index's directory: an index commit becomes searchable without
//! waiting for the disk, and a checkpoint makes it durable later.
//!
//! tantivy syncs every file a commit writes (segment files, `meta.json`,
//! `.managed.json`, the directory): about a dozen syncs, which a search
//! that must see the write just before it (read-your-writes) used to wait
//! for. The index does not need that: the store is the source of truth and
//! the indexer's outbox cursor says what the index holds durably. So
//! [`CheckpointDirectory`] wraps tantivy's `MmapDirectory`, writes files
//! without syncing them and remembers which it wrote; [`CheckpointDirectory::checkpoint`]
//! syncs them and the directory, and only then may the indexer move its
//! cursor past what those commits applied.
//!
//! What the last checkpoint references stays on disk until the next one:
//! a file tantivy deletes (after a merge, say) that the checkpoint synced
//! is deleted after the next checkpoint, so a power loss that takes back
//! every later commit finds the checkpointed commit whole. A file written
//! and dropped between two checkpoints is deleted at once. While a
//! checkpoint runs, no commit can replace `meta.json`, so the commit it
//! syncs references only files it syncs too.
//!
//! After a `kill -9` the unsynced commits are intact (the page cache
//! survives); after a power loss they may be torn, which the checksums
//! checked at the next start find (see `SearchIndex::open`): the index is
//! then rebuilt from the store.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tantivy::directory::error::{
    DeleteError, LockError, OpenDirectoryError, OpenReadError, OpenWriteError,
};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, TerminatingWrite,
    WatchCallback, WatchHandle, WritePtr,
};

/// The file tantivy replaces to commit.
const META: &str = "meta.json";

/// What was written since the last checkpoint, and what waits for the
/// next one to be deleted.
#[derive(Debug, Default)]
struct Unsynced {
    /// Files written (and finished) since the last checkpoint.
    written: HashSet<PathBuf>,
    /// Files still being written (not finished yet).
    open: HashSet<PathBuf>,
    /// Files the last checkpoint may reference that tantivy deleted since.
    doomed: Vec<PathBuf>,
}

#[derive(Debug)]
struct Shared {
    root: PathBuf,
    state: Mutex<Unsynced>,
    /// Held while `meta.json` is replaced and while a checkpoint runs.
    commit: Mutex<()>,
}

/// An `MmapDirectory` whose writes are made durable by [`checkpoint`](Self::checkpoint),
/// not by each commit.
#[derive(Clone, Debug)]
pub struct CheckpointDirectory {
    inner: MmapDirectory,
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CheckpointDirectory {
    /// Opens the directory at `root` (it must exist).
    pub fn open(root: &Path) -> Result<CheckpointDirectory, OpenDirectoryError> {
        Ok(CheckpointDirectory {
            inner: MmapDirectory::open(root)?,
            shared: Arc::new(Shared {
                root: root.to_path_buf(),
                state: Mutex::default(),
                commit: Mutex::default(),
            }),
        })
    }

    /// Syncs every file written since the last checkpoint and the
    /// directory, then deletes the files the previous checkpoint kept for
    /// it. When it returns, the index as of the last commit survives a
    /// power loss.
    pub fn checkpoint(&self) -> io::Result<()> {
        let (written, doomed) = {
            let _commit = lock(&self.shared.commit);
            let (written, doomed) = {
                let mut s = lock(&self.shared.state);
                (
                    std::mem::take(&mut s.written),
                    std::mem::take(&mut s.doomed),
                )
            };
            // Every file the current meta.json references was finished
            // before it was written, so it is in `written` (or synced by an
            // earlier checkpoint).
            let synced = written
                .iter()
                .try_for_each(|p| sync_file(&self.shared.root.join(p)));
            if let Err(e) = synced.and_then(|()| sync_dir(&self.shared.root)) {
                // Not durable: sync them again next time.
                let mut s = lock(&self.shared.state);
                s.written.extend(written);
                s.doomed.extend(doomed);
                return Err(e);
            }
            (written, doomed)
        };
        drop(written);
        for p in doomed {
            match std::fs::remove_file(self.shared.root.join(&p)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %p.display(), error = %e, "cannot delete an old search index file")
                }
            }
        }
        Ok(())
    }

    /// Files written since the last checkpoint (for tests and metrics).
    pub fn unsynced_files(&self) -> usize {
        lock(&self.shared.state).written.len()
    }

    fn finished(&self, path: &Path) {
        let mut s = lock(&self.shared.state);
        s.open.remove(path);
        s.written.insert(path.to_path_buf());
    }
}

fn sync_file(path: &Path) -> io::Result<()> {
    match File::open(path) {
        Ok(f) => f.sync_data(),
        // Deleted since (written and dropped between two checkpoints).
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Syncs a directory's entries.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A file being written: finishing it flushes it to the OS and records it
/// for the next checkpoint, without a sync.
struct UnsyncedFile {
    file: File,
    path: PathBuf,
    dir: CheckpointDirectory,
}

impl Write for UnsyncedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TerminatingWrite for UnsyncedFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> io::Result<()> {
        self.file.flush()?;
        self.dir.finished(&self.path);
        Ok(())
    }
}

impl Directory for CheckpointDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        {
            let mut s = lock(&self.shared.state);
            let fresh = s.written.remove(path) || s.open.remove(path);
            if !fresh {
                // The last checkpoint may reference it.
                if !self.shared.root.join(path).exists() {
                    return Err(DeleteError::FileDoesNotExist(path.to_path_buf()));
                }
                s.doomed.push(path.to_path_buf());
                return Ok(());
            }
        }
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        if lock(&self.shared.state).doomed.iter().any(|d| d == path) {
            return Ok(false);
        }
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        let full = self.shared.root.join(path);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&full)
            .map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    OpenWriteError::FileAlreadyExists(path.to_path_buf())
                } else {
                    OpenWriteError::wrap_io_error(e, path.to_path_buf())
                }
            })?;
        lock(&self.shared.state).open.insert(path.to_path_buf());
        Ok(BufWriter::new(Box::new(UnsyncedFile {
            file,
            path: path.to_path_buf(),
            dir: self.clone(),
        })))
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.inner.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        // Written beside and renamed over, so a reader never sees half of
        // it; synced by the next checkpoint. meta.json waits for a running
        // checkpoint.
        let _commit = (path == Path::new(META)).then(|| lock(&self.shared.commit));
        let full = self.shared.root.join(path);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let temp = self.shared.root.join(format!(
            ".{}.{}.tmp",
            name.unwrap_or_default(),
            ulid::Ulid::new()
        ));
        std::fs::write(&temp, data)?;
        if let Err(e) = std::fs::rename(&temp, &full) {
            let _ = std::fs::remove_file(&temp);
            return Err(e);
        }
        lock(&self.shared.state).written.insert(path.to_path_buf());
        Ok(())
    }

    fn sync_directory(&self) -> io::Result<()> {
        // The next checkpoint syncs it.
        Ok(())
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.inner.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(watch_callback)
    }
}

/// Deletes what a crash left in `root` that no commit references: files
/// kept for a checkpoint that never came, and half-written replacements.
/// `referenced` are the files of the index's current commit.
pub(super) fn remove_leftovers(root: &Path, referenced: &HashSet<PathBuf>) -> io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let segment_file = name.split_once('.').is_some_and(|(stem, _)| {
            stem.len() == 32 && stem.bytes().all(|b| b.is_ascii_hexdigit())
        });
        let temp = name.starts_with('.') && name.ends_with(".tmp");
        if (segment_file && !referenced.contains(Path::new(&name))) || temp {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &CheckpointDirectory, name: &str, data: &[u8]) {
        let mut w = dir.open_write(Path::new(name)).expect("open");
        w.write_all(data).expect("write");
        w.terminate().expect("terminate");
    }

    #[test]
    fn files_wait_for_the_checkpoint_and_what_it_synced_outlives_a_delete() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = CheckpointDirectory::open(tmp.path()).expect("opened");
        write(&dir, "a.idx", b"one");
        dir.atomic_write(Path::new(META), b"{}").expect("meta");
        assert_eq!(dir.unsynced_files(), 2);
        dir.checkpoint().expect("checkpoint");
        assert_eq!(dir.unsynced_files(), 0);

        // Written and dropped before a checkpoint: gone at once.
        write(&dir, "b.idx", b"two");
        dir.delete(Path::new("b.idx")).expect("delete b");
        assert!(!tmp.path().join("b.idx").exists());
        // Synced by the last checkpoint: kept until the next one.
        dir.delete(Path::new("a.idx")).expect("delete a");
        assert!(tmp.path().join("a.idx").exists());
        assert!(!dir.exists(Path::new("a.idx")).expect("exists"));
        assert!(matches!(
            dir.delete(Path::new("c.idx")),
            Err(DeleteError::FileDoesNotExist(_))
        ));
        dir.checkpoint().expect("checkpoint");
        assert!(!tmp.path().join("a.idx").exists());
        assert_eq!(
            std::fs::read(tmp.path().join(META)).expect("meta"),
            b"{}",
            "an atomic write lands whole"
        );
    }

    #[test]
    fn leftovers_of_a_crash_are_removed_and_referenced_files_kept() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let kept = "0123456789abcdef0123456789abcdef.idx";
        let orphan = "fedcba9876543210fedcba9876543210.store";
        for name in [
            kept,
            orphan,
            META,
            ".meta.json.01ABC.tmp",
            ".tantivy-writer.lock",
        ] {
            std::fs::write(tmp.path().join(name), b"x").expect("write");
        }
        let referenced: HashSet<PathBuf> = [PathBuf::from(kept)].into();
        assert_eq!(
            remove_leftovers(tmp.path(), &referenced).expect("removed"),
            2
        );
        for name in [kept, META, ".tantivy-writer.lock"] {
            assert!(tmp.path().join(name).exists(), "{name} kept");
        }
    }
}
