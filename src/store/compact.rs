//! Offline compaction of a sled data directory: every live record is
//! copied into a fresh sled database, which then takes the old one's
//! place. sled appends to its log and reuses segments only when it needs
//! to, so a removed record's bytes can stay in the files long after the
//! delete; after this, the files hold the live records only (an erased
//! subject's text is in no file of the directory).
//!
//! Crash-safe by markers: the copy is built in `compact.tmp/` and marked
//! `COMPLETE` once durable; the old files are moved into `compact.old/`
//! (marked `MOVED` when all are), then the new ones into the directory,
//! then both helpers are removed. [`compact`] run again finishes (or
//! discards) whatever an interrupted run left, and [`interrupted`] lets
//! the engine refuse to open a directory in between.

use std::ops::Bound;
use std::path::{Path, PathBuf};

use super::engine::{Engine, Read, SledEngine, Write};
use crate::error::{Error, Result};

/// Where the new database is built.
pub const NEW_DIR: &str = "compact.tmp";
/// Where the old database's files wait to be removed.
pub const OLD_DIR: &str = "compact.old";
const COMPLETE: &str = "COMPLETE";
const MOVED: &str = "MOVED";
/// Records copied per batch.
const PAGE: usize = 4096;

/// What a compaction did.
#[derive(Debug, Clone, Default)]
pub struct Compacted {
    /// Records copied.
    pub records: u64,
    /// Bytes of the sled files before.
    pub bytes_before: u64,
    /// Bytes of the sled files after.
    pub bytes_after: u64,
}

fn io<'a>(what: &str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    let what = what.to_owned();
    move |e| Error::Storage(format!("{what} {}: {e}", path.display()))
}

/// Whether `name` is one of sled's files in a data directory.
fn is_sled_file(name: &str) -> bool {
    matches!(name, "conf" | "db" | "blobs") || name.starts_with("snap.")
}

/// Sled's files in `dir`.
fn sled_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io("cannot list", dir))? {
        let entry = entry.map_err(io("cannot list", dir))?;
        if is_sled_file(&entry.file_name().to_string_lossy()) {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// Total size of the files under `path`.
pub fn size_of(path: &Path) -> u64 {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::read_dir(path)
            .map(|rd| rd.flatten().map(|e| size_of(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("cannot sync", dir))
}

fn mark(dir: &Path, name: &str) -> Result<()> {
    let path = dir.join(name);
    std::fs::File::create(&path)
        .and_then(|f| f.sync_all())
        .map_err(io("cannot write", &path))?;
    sync_dir(dir)
}

/// A message when an interrupted compaction left `dir` half swapped (the
/// engine refuses to open it then).
pub fn interrupted(dir: &Path) -> Option<String> {
    (dir.join(NEW_DIR).exists() || dir.join(OLD_DIR).exists()).then(|| {
        format!(
            "an interrupted `mnemo compact` left {}; run `mnemo compact` again to finish it before starting the daemon",
            dir.display()
        )
    })
}

/// Finishes or discards what an interrupted compaction left in `dir`.
fn recover(dir: &Path) -> Result<()> {
    let new = dir.join(NEW_DIR);
    let old = dir.join(OLD_DIR);
    if !new.join(COMPLETE).exists() {
        // The copy never finished: the old files were not touched.
        if old.exists() {
            return Err(Error::Storage(format!(
                "{} exists without a complete {}: restore the files of {} into {} by hand",
                old.display(),
                new.display(),
                old.display(),
                dir.display()
            )));
        }
        if new.exists() {
            std::fs::remove_dir_all(&new).map_err(io("cannot remove", &new))?;
        }
        return Ok(());
    }
    swap(dir)
}

/// Moves the old files out and the new ones in (resuming where a crash
/// stopped), then removes both helper directories.
fn swap(dir: &Path) -> Result<()> {
    let new = dir.join(NEW_DIR);
    let old = dir.join(OLD_DIR);
    if !old.join(MOVED).exists() {
        std::fs::create_dir_all(&old).map_err(io("cannot create", &old))?;
        for f in sled_files(dir)? {
            let to = old.join(f.file_name().unwrap_or_default());
            std::fs::rename(&f, &to).map_err(io("cannot move", &f))?;
        }
        sync_dir(dir)?;
        mark(&old, MOVED)?;
    }
    for f in sled_files(&new)? {
        let to = dir.join(f.file_name().unwrap_or_default());
        std::fs::rename(&f, &to).map_err(io("cannot move", &f))?;
    }
    sync_dir(dir)?;
    std::fs::remove_dir_all(&old).map_err(io("cannot remove", &old))?;
    std::fs::remove_dir_all(&new).map_err(io("cannot remove", &new))?;
    sync_dir(dir)
}

/// Rewrites the sled database in `dir` (daemon stopped) so its files hold
/// the live records only. `check` runs on the old database first (e.g.
/// to refuse while erase jobs are unfinished).
pub fn compact(
    dir: &Path,
    cache_mb: u64,
    check: &dyn Fn(&SledEngine) -> Result<()>,
    progress: &mut dyn FnMut(u64),
) -> Result<Compacted> {
    recover(dir)?;
    let bytes_before: u64 = sled_files(dir)?.iter().map(|f| size_of(f)).sum();
    let new_dir = dir.join(NEW_DIR);
    let records = {
        let old = SledEngine::open_with_cache(dir, cache_mb)?;
        check(&old)?;
        let new = SledEngine::open_with_cache(&new_dir, cache_mb)?;
        let mut records = 0u64;
        let mut after: Option<Vec<u8>> = None;
        loop {
            let from = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = old.scan(from, b"", PAGE)?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            records += page.len() as u64;
            new.apply(page.into_iter().map(|(k, v)| Write::Put(k, v)).collect())?;
            progress(records);
        }
        new.sync()?;
        records
    };
    mark(&new_dir, COMPLETE)?;
    swap(dir)?;
    let bytes_after: u64 = sled_files(dir)?.iter().map(|f| size_of(f)).sum();
    Ok(Compacted {
        records,
        bytes_before,
        bytes_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(dir: &Path, keys: &[&[u8]]) {
        let e = SledEngine::open(dir).unwrap();
        e.apply(
            keys.iter()
                .map(|k| Write::Put(k.to_vec(), b"v".to_vec()))
                .collect(),
        )
        .unwrap();
        e.sync().unwrap();
    }

    fn keys_in(dir: &Path) -> Vec<Vec<u8>> {
        let e = SledEngine::open(dir).unwrap();
        e.scan(Bound::Unbounded, b"", 100)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    fn no_check(_: &SledEngine) -> Result<()> {
        Ok(())
    }

    /// The old database holds `old`, a complete copy in `compact.tmp/`
    /// holds `new` (as a crash after the copy leaves them).
    fn interrupted_after_the_copy(dir: &Path) {
        put(dir, &[b"old"]);
        put(&dir.join(NEW_DIR), &[b"new"]);
        mark(&dir.join(NEW_DIR), COMPLETE).unwrap();
    }

    #[test]
    fn compaction_keeps_every_live_record_and_drops_removed_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        {
            let e = SledEngine::open(&dir).unwrap();
            e.apply(vec![
                Write::Put(b"keep".to_vec(), b"kept value".to_vec()),
                Write::Put(b"gone".to_vec(), b"zqsecretvalue".to_vec()),
            ])
            .unwrap();
            e.sync().unwrap();
            e.apply(vec![Write::Delete(b"gone".to_vec())]).unwrap();
            e.sync().unwrap();
        }
        let held = |dir: &Path| {
            sled_files(dir).unwrap().iter().any(|f| {
                f.is_file()
                    && std::fs::read(f)
                        .unwrap()
                        .windows(13)
                        .any(|w| w == b"zqsecretvalue")
            })
        };
        assert!(held(&dir), "the removed value is still in the log");
        let done = compact(&dir, 8, &no_check, &mut |_| {}).unwrap();
        assert_eq!(done.records, 1);
        assert!(!held(&dir));
        assert_eq!(keys_in(&dir), [b"keep".to_vec()]);
        assert!(interrupted(&dir).is_none());
    }

    #[test]
    fn an_unfinished_copy_is_discarded_and_the_old_database_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        put(&dir, &[b"old"]);
        put(&dir.join(NEW_DIR), &[b"half"]);
        assert!(interrupted(&dir).is_some());
        assert!(SledEngine::open(&dir).is_err(), "the engine refuses it");
        compact(&dir, 8, &no_check, &mut |_| {}).unwrap();
        assert_eq!(keys_in(&dir), [b"old".to_vec()]);
    }

    #[test]
    fn a_crash_while_moving_the_old_files_out_is_finished() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        interrupted_after_the_copy(&dir);
        // Some old files moved out, no MOVED mark yet.
        std::fs::create_dir_all(dir.join(OLD_DIR)).unwrap();
        std::fs::rename(dir.join("conf"), dir.join(OLD_DIR).join("conf")).unwrap();
        assert!(SledEngine::open(&dir).is_err());
        compact(&dir, 8, &no_check, &mut |_| {}).unwrap();
        assert_eq!(keys_in(&dir), [b"new".to_vec()]);
        assert!(interrupted(&dir).is_none());
    }

    #[test]
    fn a_crash_while_moving_the_new_files_in_is_finished() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        interrupted_after_the_copy(&dir);
        std::fs::create_dir_all(dir.join(OLD_DIR)).unwrap();
        for f in sled_files(&dir).unwrap() {
            std::fs::rename(&f, dir.join(OLD_DIR).join(f.file_name().unwrap())).unwrap();
        }
        mark(&dir.join(OLD_DIR), MOVED).unwrap();
        // Only the new `conf` made it in.
        std::fs::rename(dir.join(NEW_DIR).join("conf"), dir.join("conf")).unwrap();
        compact(&dir, 8, &no_check, &mut |_| {}).unwrap();
        assert_eq!(keys_in(&dir), [b"new".to_vec()]);
        assert!(!dir.join(OLD_DIR).exists() && !dir.join(NEW_DIR).exists());
    }

    #[test]
    fn the_check_can_refuse_before_anything_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        put(&dir, &[b"old"]);
        let refuse = |_: &SledEngine| -> Result<()> { Err(Error::invalid("not now")) };
        assert!(compact(&dir, 8, &refuse, &mut |_| {}).is_err());
        assert!(interrupted(&dir).is_none());
        assert_eq!(keys_in(&dir), [b"old".to_vec()]);
    }
}
