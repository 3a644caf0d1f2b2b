//! Exactly one document per record, also after a crash. Every document
//! carries its record's key (`doc_key`, a column too), and adding one first
//! deletes every document of that key, so applying an outbox entry twice
//! leaves one. Crash rounds under load (`kill -9` while the indexer and
//! tantivy's merges run) have still left a few keys with two live
//! documents, so after a start that did not follow a clean stop the index
//! is checked: every key held twice is indexed again from the store, which
//! replaces both copies by one. The check is one pass over the key column
//! (a map of every key in memory while it runs).
//!
//! A clean stop leaves a marker file in the index directory; the daemon's
//! indexer removes it when it starts (tools that only open the index leave
//! it), so its absence at the next start means the daemon did not stop
//! cleanly.

use std::collections::HashMap;
use std::path::Path;

use super::{index_error, Documents, SearchIndex};
use crate::error::{Error, Result};
use crate::model::IndexChange;

/// The marker a clean stop leaves in the index directory.
const CLEAN_STOP: &str = "mnemo-clean-stop";

/// Whether the daemon that last used the index in `dir` stopped cleanly;
/// removes the marker, so a crash from now on is noticed.
pub(super) fn stopped_cleanly(dir: &Path) -> Result<bool> {
    let marker = dir.join(CLEAN_STOP);
    match std::fs::remove_file(&marker) {
        Ok(()) => {
            sync_dir(dir)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::Storage(format!(
            "cannot remove {}: {e}",
            marker.display()
        ))),
    }
}

/// Whether the marker of a clean stop is in `dir` (left as it is).
pub(super) fn left_cleanly(dir: &Path) -> bool {
    dir.join(CLEAN_STOP).exists()
}

/// Checks an index that a crash may have left torn: commits after the
/// last checkpoint were not synced, so after a power loss a file the last
/// commit references may be missing or hold something else. Every such
/// file must exist and match the checksum in its footer; then what no
/// commit references (files kept for a checkpoint that never came) is
/// removed. An error means: rebuild from the store.
pub(super) fn whole_after_crash(index: &tantivy::Index, dir: &Path) -> Result<()> {
    let metas = index.searchable_segment_metas().map_err(index_error)?;
    let mut referenced = std::collections::HashSet::new();
    for meta in &metas {
        for file in meta.list_files() {
            // A segment without deletes has no delete file, say.
            if dir.join(&file).exists() {
                referenced.insert(file);
            }
        }
        if !dir
            .join(meta.relative_path(tantivy::index::SegmentComponent::Store))
            .exists()
        {
            return Err(Error::Storage(format!(
                "segment {} of the last commit is missing",
                meta.id().uuid_string()
            )));
        }
    }
    for file in &referenced {
        let whole = index
            .directory()
            .validate_checksum(file)
            .map_err(|e| Error::Storage(format!("{}: {e}", file.display())))?;
        if !whole {
            return Err(Error::Storage(format!(
                "{} does not match its checksum",
                file.display()
            )));
        }
    }
    let removed = super::checkpoint::remove_leftovers(dir, &referenced)
        .map_err(|e| Error::Storage(format!("search index directory {}: {e}", dir.display())))?;
    if removed > 0 {
        tracing::info!(
            files = removed,
            "removed search index files a crash left behind"
        );
    }
    Ok(())
}

/// Leaves the clean-stop marker in `dir` (durably).
pub(super) fn mark_clean_stop(dir: &Path) -> Result<()> {
    let marker = dir.join(CLEAN_STOP);
    std::fs::write(&marker, b"the daemon stopped cleanly\n")
        .and_then(|()| std::fs::File::open(&marker)?.sync_all())
        .map_err(|e| Error::Storage(format!("cannot write {}: {e}", marker.display())))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<()> {
    super::checkpoint::sync_dir(dir)
        .map_err(|e| Error::Storage(format!("cannot sync {}: {e}", dir.display())))
}

/// The outbox entry that indexes the record of `key` again.
fn change_of(key: &str) -> Option<IndexChange> {
    let mut parts = key.split('\u{0}');
    let kind = parts.next()?;
    let ns = parts.next()?.to_owned();
    let id = parts.next()?.to_owned();
    match (kind, parts.next(), parts.next()) {
        ("t", Some(seq), None) => {
            let seq: u64 = seq.parse().ok()?;
            Some(IndexChange::Turns {
                namespace: ns,
                session_id: id,
                first_seq: seq,
                last_seq: seq,
            })
        }
        ("f", None, None) => Some(IndexChange::Fact {
            namespace: ns,
            fact_id: id,
        }),
        ("e", None, None) => Some(IndexChange::Episode {
            namespace: ns,
            session_id: id,
        }),
        _ => None,
    }
}

impl SearchIndex {
    /// Keys held by more than one live document.
    pub(super) fn duplicated_keys(&self) -> Result<Vec<String>> {
        let searcher = self.reader.searcher();
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut text = String::new();
        for segment in searcher.segment_readers() {
            let Some(keys) = segment.fast_fields().str("doc_key").map_err(index_error)? else {
                continue;
            };
            for doc in segment.doc_ids_alive() {
                for ord in keys.term_ords(doc) {
                    text.clear();
                    keys.ord_to_str(ord, &mut text).map_err(|e| {
                        Error::Storage(format!("search index: reading a document key: {e}"))
                    })?;
                    *counts.entry(text.clone()).or_default() += 1;
                }
            }
        }
        let mut twice: Vec<String> = counts
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(k, _)| k)
            .collect();
        twice.sort();
        Ok(twice)
    }

    /// Called once by the daemon's indexer at start, after the rebuild if
    /// one ran (`rebuilt`): takes the clean-stop marker, and when the last
    /// stop was not clean and the index was not just rebuilt from the
    /// store, indexes every key held twice again (one document each
    /// afterwards). Returns how many keys were repaired.
    pub fn repair_after_crash(&self, store: &dyn Documents, rebuilt: bool) -> Result<usize> {
        let clean = match &self.dir {
            Some(dir) => stopped_cleanly(dir)?,
            None => true,
        };
        if clean || rebuilt || !self.is_ready() {
            return Ok(0);
        }
        let twice = self.duplicated_keys()?;
        if twice.is_empty() {
            return Ok(0);
        }
        let mut w = self.writer();
        let applied = twice
            .iter()
            .try_for_each(|key| {
                // Every copy goes; the record, if still stored, comes back
                // once.
                w.delete_term(tantivy::Term::from_field_text(self.f.doc_key, key));
                match change_of(key) {
                    Some(c) => self.apply_one(&mut super::changes::Sink::Writer(&w), store, &c),
                    None => Ok(()),
                }
            })
            .and_then(|()| store.durable());
        if let Err(e) = applied {
            let _ = w.rollback();
            return Err(e);
        }
        self.commit(&mut w)?;
        Ok(twice.len())
    }

    /// Leaves the clean-stop marker (at the end of a clean stop, after the
    /// last commit).
    pub fn mark_clean_stop(&self) -> Result<()> {
        match &self.dir {
            Some(dir) => mark_clean_stop(dir),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_entry_that_indexes_their_record_again() {
        assert_eq!(
            change_of("t\u{0}ns\u{0}s1\u{0}42"),
            Some(IndexChange::Turns {
                namespace: "ns".into(),
                session_id: "s1".into(),
                first_seq: 42,
                last_seq: 42
            })
        );
        assert_eq!(
            change_of("f\u{0}ns\u{0}01F"),
            Some(IndexChange::Fact {
                namespace: "ns".into(),
                fact_id: "01F".into()
            })
        );
        assert_eq!(
            change_of("e\u{0}ns\u{0}s1"),
            Some(IndexChange::Episode {
                namespace: "ns".into(),
                session_id: "s1".into()
            })
        );
        assert_eq!(change_of("t\u{0}ns\u{0}s1\u{0}x"), None);
        assert_eq!(change_of("q\u{0}ns\u{0}s1"), None);
    }
}
