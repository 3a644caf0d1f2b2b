//! Ranked retrieval over turns, current facts and episodes with tantivy
//! (BM25, English stemming). The index is derived: the store is the source
//! of truth, every store change adds an `IndexChange` to the outbox in the
//! same batch, and the indexer (`runtime::indexer`) applies them shortly
//! after, reading what they name through the [`Documents`] port. A
//! missing, damaged or half-built index is rebuilt at start (and by
//! `mnemo reindex`).
//!
//! Scope is enforced inside the query (namespace, subject, session); the
//! caller checks every hit against the store before it is returned (the
//! `keep` closure of [`SearchIndex::search`]), so a deleted session or
//! fact never shows up, whatever the index lag. This module never reads
//! storage itself.

mod changes;
mod checkpoint;
mod fresh;
mod identity;
mod query;
mod repair;
mod schema;
mod scoped;
pub mod when;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument};

use crate::error::{Error, Result};
use crate::model::{Episode, Fact, IndexChange, Session, Turn, UnixNanos};
use changes::{Op, Sink};
use fresh::Fresh;
pub use schema::turn_time;
use schema::{schema, Fields, ANALYZER};

/// Most hits a search may ask for.
pub const MAX_LIMIT: u32 = 100;
/// Hits when a search does not say.
pub const DEFAULT_LIMIT: u32 = 10;
/// Longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;
/// A page of sessions and the (namespace, session id) to resume after.
pub type SessionsPage = (Vec<Session>, Option<(String, String)>);

/// What the index reads its documents from (the domain implements it over
/// the store).
pub trait Documents {
    /// A session; `NotFound` when absent.
    fn session(&self, ns: &str, session_id: &str) -> Result<Session>;
    /// Turns `from..=to` of a session, oldest first, at most `limit`;
    /// `NotFound` when the session is gone.
    fn turns(
        &self,
        ns: &str,
        session_id: &str,
        from: u64,
        to: u64,
        limit: usize,
    ) -> Result<Vec<Turn>>;
    /// A fact version; `NotFound` when absent.
    fn fact(&self, ns: &str, fact_id: &str) -> Result<Fact>;
    /// A session's episode, if any.
    fn episode(&self, ns: &str, session_id: &str) -> Result<Option<Episode>>;
    /// Sessions of every namespace after `after`, at most `limit`, and
    /// where to resume (`None` when the page was empty).
    fn sessions_after(&self, after: Option<(&str, &str)>, limit: usize) -> Result<SessionsPage>;
    /// Every fact version after an opaque resume key, and the next one.
    fn facts_after(
        &self,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<Fact>, Option<Vec<u8>>)>;
    /// Every episode after an opaque resume key, and the next one.
    fn episodes_after(
        &self,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<Episode>, Option<Vec<u8>>)>;
    /// Makes everything read so far durable. The index commits only what
    /// a crash cannot take back: a record can be visible before the write
    /// that made it is synced (and acknowledged).
    fn durable(&self) -> Result<()>;
}

/// The commit payload of a complete index of this layout. An index
/// without it (older layout, or a rebuild that did not finish) is rebuilt.
const COMPLETE: &str = "mnemo-search-v5 complete";
/// Words too common in agent conversations and questions to rank by:
/// Lucene's English stop words (without "no" and "not") and the question
/// and pronoun words agents put in a search.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this",
    "to", "was", "will", "with", "what", "which", "when", "where", "why", "how", "who", "whom",
    "did", "do", "does", "were", "has", "have", "had", "we", "i", "you", "he", "she", "our", "my",
    "your", "me", "us", "its", "can", "could", "would", "should",
];
/// Memory the index writer may buffer before it writes a segment.
const WRITER_BYTES: usize = 32 * 1024 * 1024;
/// Records read per store call while rebuilding.
const REBUILD_PAGE: usize = 1000;
/// Most operations shown beside the index before they are committed
/// (`fresh.rs`): every search scores those documents one by one. More (a
/// bulk load) are committed at once.
const FRESH_OPS: usize = 256;

/// What a hit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A turn.
    Turn,
    /// A current fact.
    Fact,
    /// An episode.
    Episode,
}

impl Kind {
    fn tag(self) -> &'static str {
        match self {
            Kind::Turn => "turn",
            Kind::Fact => "fact",
            Kind::Episode => "episode",
        }
    }

    fn from_tag(t: &str) -> Option<Kind> {
        match t {
            "turn" => Some(Kind::Turn),
            "fact" => Some(Kind::Fact),
            "episode" => Some(Kind::Episode),
            _ => None,
        }
    }
}

/// A search request, validated by the domain layer.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    /// Required namespace.
    pub namespace: String,
    /// Only this subject.
    pub subject_id: Option<String>,
    /// Only this session.
    pub session_id: Option<String>,
    /// The words.
    pub query: String,
    /// Kinds to return; empty = all.
    pub kinds: Vec<Kind>,
    /// Most hits.
    pub limit: usize,
    /// What dates in the query are relative to ("last May"); `None` = now.
    pub reference_time: Option<UnixNanos>,
    /// Cut a snippet for each hit (a bundle reads the records instead).
    pub snippets: bool,
    /// Score adjacent query words found near each other (phrases). They
    /// sharpen the first hits of a short search and cost position reads
    /// on every record holding both words; a bundle's retrieval (a long
    /// request, many hits packed) leaves them out.
    pub phrases: bool,
}

/// One ranked result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// What it is.
    pub kind: Kind,
    /// BM25 score.
    pub score: f32,
    /// Text around the matched words.
    pub snippet: String,
    /// The subject.
    pub subject_id: String,
    /// Turn and episode: the session.
    pub session_id: String,
    /// Turn: its seq.
    pub seq: u64,
    /// Fact: its id.
    pub fact_id: String,
    /// Turn: its role.
    pub role: Option<crate::model::Role>,
    /// When it happened (a turn's client time when given), seconds since
    /// the epoch.
    pub time_seconds: u64,
}

fn index_error(e: tantivy::TantivyError) -> Error {
    Error::Storage(format!("search index: {e}"))
}

/// What a search reads.
#[derive(Clone)]
struct View {
    disk: tantivy::Searcher,
    fresh: Option<Arc<Fresh>>,
}

/// The search index.
pub struct SearchIndex {
    index: Index,
    reader: IndexReader,
    writer: Mutex<IndexWriter<TantivyDocument>>,
    /// What searches read: the last commit and the batches applied since
    /// (`fresh.rs`), replaced together.
    view: RwLock<View>,
    /// The operations of those batches, committed by the next flush.
    pending: Mutex<Vec<Op>>,
    f: Fields,
    ready: AtomicBool,
    columns: identity::ColumnCache,
    /// See [`scoped::LEADING_POSTINGS`] (tests lower it).
    leading_postings: u64,
    /// Where the index lives (`None`: in memory); its clean-stop marker
    /// is there (see `repair.rs`).
    dir: Option<std::path::PathBuf>,
    /// The directory's checkpoints (`None` in memory).
    files: Option<checkpoint::CheckpointDirectory>,
}

impl SearchIndex {
    /// Opens the index in `dir` (in memory when `None`). The second value
    /// says whether it must be rebuilt from the store: it is new, damaged,
    /// of another layout, or a rebuild did not finish. A damaged index is
    /// moved aside, never trusted.
    pub fn open(dir: Option<&Path>) -> Result<(SearchIndex, bool)> {
        let (schema, f) = schema();
        let (index, files, rebuild) = match dir {
            None => (Index::create_in_ram(schema), None, true),
            Some(dir) => {
                let (index, files, rebuild) = Self::open_dir(dir, schema)?;
                (index, Some(files), rebuild)
            }
        };
        // Words, lowercased, common words dropped, English stems.
        index.tokenizers().register(
            ANALYZER,
            TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(RemoveLongFilter::limit(40))
                .filter(LowerCaser)
                .filter(StopWordFilter::remove(
                    STOP_WORDS.iter().map(|w| (*w).to_owned()),
                ))
                .filter(Stemmer::new(Language::English))
                .build(),
        );
        let writer = index
            .writer_with_num_threads(1, WRITER_BYTES)
            .map_err(index_error)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(index_error)?;
        let view = RwLock::new(View {
            disk: reader.searcher(),
            fresh: None,
        });
        let s = SearchIndex {
            index,
            reader,
            writer: Mutex::new(writer),
            view,
            pending: Mutex::default(),
            f,
            ready: AtomicBool::new(!rebuild),
            columns: identity::ColumnCache::default(),
            leading_postings: scoped::LEADING_POSTINGS,
            dir: dir.map(Path::to_path_buf),
            files,
        };
        Ok((s, rebuild))
    }

    /// What searches read now.
    fn view(&self) -> View {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_view(&self, view: View) {
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = view;
    }

    fn open_dir(
        dir: &Path,
        schema: tantivy::schema::Schema,
    ) -> Result<(Index, checkpoint::CheckpointDirectory, bool)> {
        let io = |e: std::io::Error| {
            Error::Storage(format!("search index directory {}: {e}", dir.display()))
        };
        let files = || {
            checkpoint::CheckpointDirectory::open(dir).map_err(|e| {
                Error::Storage(format!("search index directory {}: {e}", dir.display()))
            })
        };
        if dir.join("meta.json").exists() {
            let opened =
                files().and_then(|d| Ok((Index::open(d.clone()).map_err(index_error)?, d)));
            match opened {
                Ok((index, d)) if index.schema() == schema => {
                    let complete = index
                        .load_metas()
                        .map(|m| m.payload.as_deref() == Some(COMPLETE))
                        .unwrap_or(false);
                    match (complete, repair::left_cleanly(dir)) {
                        (false, _) => {
                            tracing::warn!(dir = %dir.display(), "search index is incomplete; rebuilding it from the store")
                        }
                        (true, true) => return Ok((index, d, false)),
                        // Commits after the last checkpoint were not
                        // synced: a power loss may have torn them.
                        (true, false) => match repair::whole_after_crash(&index, dir) {
                            Ok(()) => return Ok((index, d, false)),
                            Err(e) => {
                                tracing::warn!(dir = %dir.display(), error = %e, "search index was damaged by a crash; rebuilding it from the store")
                            }
                        },
                    }
                }
                Ok(_) => {
                    tracing::warn!(dir = %dir.display(), "search index has another layout; rebuilding it from the store")
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "search index cannot be opened; rebuilding it from the store")
                }
            }
            let aside = dir.with_extension(format!("damaged-{}", ulid::Ulid::new()));
            std::fs::rename(dir, &aside).map_err(io)?;
            tracing::warn!(moved_to = %aside.display(), "old search index moved aside; delete it when no longer needed");
        }
        std::fs::create_dir_all(dir).map_err(io)?;
        let d = files()?;
        let index = Index::create(d.clone(), schema, tantivy::IndexSettings::default())
            .map_err(index_error)?;
        Ok((index, d, true))
    }

    /// Whether commits or merges wrote files no checkpoint synced yet.
    pub fn has_unsynced_files(&self) -> bool {
        self.files.as_ref().is_some_and(|f| f.unsynced_files() > 0)
    }

    /// Makes every commit so far durable (syncs what they wrote). The
    /// indexer calls it before it moves its outbox cursor past what those
    /// commits applied.
    pub fn checkpoint(&self) -> Result<()> {
        match &self.files {
            Some(files) => files
                .checkpoint()
                .map_err(|e| Error::Storage(format!("search index checkpoint: {e}"))),
            None => Ok(()),
        }
    }

    /// Whether searches can be served (no rebuild is running).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, IndexWriter<TantivyDocument>> {
        // A panic mid-update leaves uncommitted documents at worst; the
        // outbox entries were not acknowledged, so they are applied again.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies outbox entries, after what they read from the store was
    /// made durable: searchable when it returns, from the batches shown
    /// beside the index (`fresh.rs`) until [`SearchIndex::flush`] commits
    /// them — at once when they grow past `FRESH_OPS` operations (a bulk
    /// load), or when not `show` (committed with what was shown). A commit is durable after the next
    /// [`SearchIndex::checkpoint`]: only then may the entries be
    /// acknowledged. On failure the caller applies the entries again,
    /// which is harmless: every document is keyed, and adding one replaces
    /// the document of the same key.
    pub fn apply(&self, store: &dyn Documents, changes: &[IndexChange], show: bool) -> Result<()> {
        let mut list = Sink::List(Vec::new());
        for c in changes {
            self.apply_one(&mut list, store, c)?;
        }
        store.durable()?;
        let ops = list.into_ops();
        let mut pending = self.pending();
        if !show || pending.len() + ops.len() > FRESH_OPS {
            pending.extend(ops);
            return self.flush_locked(&mut pending);
        }
        let mut analyzer = self
            .index
            .tokenizer_for_field(self.f.text)
            .map_err(index_error)?;
        let mut view = self.view();
        let mut fresh = view.fresh.take().unwrap_or_default();
        Arc::make_mut(&mut fresh).extend(&ops, &self.f, &mut analyzer);
        view.fresh = Some(fresh);
        self.set_view(view);
        pending.extend(ops);
        Ok(())
    }

    /// Whether applied entries wait for [`SearchIndex::flush`].
    pub fn has_pending(&self) -> bool {
        !self.pending().is_empty()
    }

    /// Commits what [`SearchIndex::apply`] showed beside the index
    /// (searchable as before; durable after the next checkpoint). On
    /// failure it stays shown and pending.
    pub fn flush(&self) -> Result<()> {
        let mut pending = self.pending();
        if pending.is_empty() {
            return Ok(());
        }
        self.flush_locked(&mut pending)
    }

    fn flush_locked(&self, pending: &mut Vec<Op>) -> Result<()> {
        let mut w = self.writer();
        let applied = pending.iter().try_for_each(|op| op.apply(&w));
        if let Err(e) = applied {
            let _ = w.rollback();
            return Err(e);
        }
        self.commit(&mut w)?;
        pending.clear();
        Ok(())
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<Op>> {
        // A panic mid-apply leaves the list as it was or with the batch;
        // either is what was shown.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Commits and shows the commit to searches (with no batch beside it).
    fn commit(&self, w: &mut IndexWriter<TantivyDocument>) -> Result<()> {
        let mut prepared = w.prepare_commit().map_err(index_error)?;
        prepared.set_payload(COMPLETE);
        prepared.commit().map_err(index_error)?;
        self.reader.reload().map_err(index_error)?;
        self.set_view(View {
            disk: self.reader.searcher(),
            fresh: None,
        });
        Ok(())
    }

    /// Rebuilds the whole index from the store; returns the documents
    /// added. Searches answer UNAVAILABLE until it is done.
    pub fn rebuild(&self, store: &dyn Documents) -> Result<u64> {
        self.rebuild_with_progress(store, &mut |_| {})
    }

    /// [`SearchIndex::rebuild`], calling `progress` with the documents
    /// added so far after each page of the store.
    pub fn rebuild_with_progress(
        &self,
        store: &dyn Documents,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        self.ready.store(false, Ordering::Release);
        // What was shown is rebuilt from the store too.
        self.pending().clear();
        let mut w = self.writer();
        w.delete_all_documents().map_err(index_error)?;
        // Until the final commit the payload says "incomplete".
        let mut prepared = w.prepare_commit().map_err(index_error)?;
        prepared.set_payload("");
        prepared.commit().map_err(index_error)?;
        let mut docs = 0u64;
        let mut after: Option<(String, String)> = None;
        loop {
            let (sessions, resume) = store.sessions_after(
                after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
                REBUILD_PAGE,
            )?;
            let Some(resume) = resume else {
                break;
            };
            after = Some(resume);
            for s in &sessions {
                self.index_turns(&mut Sink::Writer(&w), store, s, (1, s.last_seq()))?;
                docs += s.last_seq();
            }
            progress(docs);
        }
        let mut from: Option<Vec<u8>> = None;
        loop {
            let (facts, resume) = store.facts_after(from.as_deref(), REBUILD_PAGE)?;
            for fact in &facts {
                self.put_fact(
                    &mut Sink::Writer(&w),
                    &fact.namespace,
                    &fact.fact_id,
                    Some(fact),
                )?;
                docs += u64::from(fact.is_current());
            }
            match resume {
                Some(r) => from = Some(r),
                None => break,
            }
        }
        let mut from: Option<Vec<u8>> = None;
        loop {
            let (eps, resume) = store.episodes_after(from.as_deref(), REBUILD_PAGE)?;
            for e in &eps {
                self.put_episode(&mut Sink::Writer(&w), &e.namespace, &e.session_id, Some(e))?;
                docs += 1;
            }
            match resume {
                Some(r) => from = Some(r),
                None => break,
            }
        }
        store.durable()?;
        self.commit(&mut w)?;
        self.checkpoint()?;
        self.ready.store(true, Ordering::Release);
        Ok(docs)
    }

    /// Documents in the index (live ones).
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index in `dir` with one committed document, closed without the
    /// clean-stop marker (as a crash leaves it).
    fn crashed_index(dir: &Path) -> Vec<std::path::PathBuf> {
        let (idx, _) = SearchIndex::open(Some(dir)).expect("created");
        {
            let mut w = idx.writer();
            let mut doc = TantivyDocument::default();
            doc.add_text(idx.f.doc_key, "t\u{0}ns\u{0}s\u{0}1");
            w.add_document(doc).expect("added");
            idx.commit(&mut w).expect("committed");
        }
        assert_eq!(idx.num_docs(), 1);
        idx.index
            .searchable_segment_metas()
            .expect("metas")
            .iter()
            .flat_map(|m| m.list_files())
            .map(|f| dir.join(f))
            .filter(|f| f.exists())
            .collect()
    }

    #[test]
    fn after_a_crash_a_torn_index_is_rebuilt_and_a_whole_one_kept() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("search-index");
        crashed_index(&dir);
        // A file a checkpoint kept for a deletion that never came.
        let orphan = dir.join("0123456789abcdef0123456789abcdef.idx");
        std::fs::write(&orphan, b"left by a crash").expect("orphan");
        let (idx, rebuild) = SearchIndex::open(Some(&dir)).expect("reopened");
        assert!(!rebuild, "a whole index is kept");
        assert_eq!(idx.num_docs(), 1);
        assert!(!orphan.exists(), "what no commit references is removed");
        drop(idx);

        // A power loss tore a file of the last (unsynced) commit.
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("search-index");
        let files = crashed_index(&dir);
        let store = files
            .iter()
            .find(|f| f.extension().is_some_and(|e| e == "store"))
            .expect("a store file");
        let mut bytes = std::fs::read(store).expect("read");
        bytes[0] ^= 0xff;
        std::fs::write(store, bytes).expect("torn");
        let (_idx, rebuild) = SearchIndex::open(Some(&dir)).expect("reopened");
        assert!(rebuild, "a torn index is rebuilt from the store");

        // The same damage after a clean stop is not looked for (the
        // checkpoint at stop synced every commit).
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("search-index");
        crashed_index(&dir);
        repair::mark_clean_stop(&dir).expect("marker");
        let (_idx, rebuild) = SearchIndex::open(Some(&dir)).expect("reopened");
        assert!(!rebuild);
    }

    #[test]
    fn an_index_of_another_layout_is_moved_aside_and_rebuilt() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("search-index");
        std::fs::create_dir_all(&dir).expect("dir");
        // A complete index of an earlier layout (here: one field).
        let mut b = tantivy::schema::Schema::builder();
        b.add_text_field("doc_key", tantivy::schema::STRING);
        let old = Index::create_in_dir(&dir, b.build()).expect("old index");
        let mut w: IndexWriter<TantivyDocument> = old
            .writer_with_num_threads(1, WRITER_BYTES)
            .expect("writer");
        let mut commit = w.prepare_commit().expect("prepared");
        commit.set_payload(COMPLETE);
        commit.commit().expect("committed");
        drop((w, old));

        let (idx, rebuild) = SearchIndex::open(Some(&dir)).expect("opened");
        assert!(rebuild, "another layout is rebuilt from the store");
        assert!(!idx.is_ready(), "searches wait for the rebuild");
        assert_eq!(idx.index.schema(), schema().0);
        let aside = std::fs::read_dir(tmp.path())
            .expect("listed")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".damaged-"))
            .count();
        assert_eq!(aside, 1, "the old index is kept aside");
    }
}
