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

mod checkpoint;
mod identity;
mod query;
mod repair;
mod schema;
mod scoped;
pub mod when;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::error::{Error, Result};
use crate::model::{Episode, Fact, FactOrigin, IndexChange, Session, Turn, UnixNanos};
pub use schema::turn_time;
use schema::{
    episode_key, fact_key, only_asks, role_tag, schema, seconds, session_key, turn_key, turn_text,
    Fields, ANALYZER,
};

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

/// The search index.
pub struct SearchIndex {
    index: Index,
    reader: IndexReader,
    writer: Mutex<IndexWriter<TantivyDocument>>,
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
        let s = SearchIndex {
            index,
            reader,
            writer: Mutex::new(writer),
            f,
            ready: AtomicBool::new(!rebuild),
            columns: identity::ColumnCache::default(),
            leading_postings: scoped::LEADING_POSTINGS,
            dir: dir.map(Path::to_path_buf),
            files,
        };
        Ok((s, rebuild))
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

    fn add_turn(
        &self,
        w: &IndexWriter<TantivyDocument>,
        s: &Session,
        t: &Turn,
        neighbours: [Option<&Turn>; 2],
    ) -> Result<()> {
        let f = self.f;
        let key = turn_key(&s.namespace, &s.session_id, t.seq);
        w.delete_term(Term::from_field_text(f.doc_key, &key));
        let mut doc = TantivyDocument::default();
        doc.add_text(f.doc_key, &key);
        doc.add_text(f.ns, &s.namespace);
        doc.add_text(f.subject, &s.subject_id);
        doc.add_text(f.session_key, session_key(&s.namespace, &s.session_id));
        doc.add_text(f.session_id, &s.session_id);
        doc.add_text(f.kind, Kind::Turn.tag());
        doc.add_u64(f.seq, t.seq);
        doc.add_text(f.role, role_tag(t.role));
        let text = turn_text(t);
        let context: Vec<&str> = neighbours
            .into_iter()
            .flatten()
            .map(|n| n.content.as_str())
            .collect();
        self.add_scoped(
            &mut doc,
            (&s.namespace, &s.subject_id),
            &text,
            &context,
            &t.speaker,
        )?;
        doc.add_text(f.text, text);
        for c in context {
            doc.add_text(f.context, c);
        }
        doc.add_text(f.speaker, &t.speaker);
        doc.add_u64(f.time, seconds(turn_time(t)));
        if t.tool_call.is_none() && only_asks(&t.content) {
            doc.add_u64(f.asks, 1);
        }
        w.add_document(doc).map_err(index_error)?;
        Ok(())
    }

    fn put_fact(
        &self,
        w: &IndexWriter<TantivyDocument>,
        ns: &str,
        id: &str,
        fact: Option<&Fact>,
    ) -> Result<()> {
        let f = self.f;
        let key = fact_key(ns, id);
        w.delete_term(Term::from_field_text(f.doc_key, &key));
        // Only current facts are searchable.
        let Some(fact) = fact.filter(|x| x.is_current()) else {
            return Ok(());
        };
        let mut doc = TantivyDocument::default();
        doc.add_text(f.doc_key, &key);
        doc.add_text(f.ns, ns);
        doc.add_text(f.subject, &fact.subject_id);
        doc.add_text(f.kind, Kind::Fact.tag());
        doc.add_text(f.ref_id, &fact.fact_id);
        // An extracted fact repeats a turn: remember which, so a search
        // shows one of the two.
        if fact.origin == FactOrigin::Extracted {
            if let Some(src) = fact.sources.first() {
                doc.add_text(f.session_id, &src.session_id);
                doc.add_u64(f.seq, src.seq);
            }
        }
        let text = if fact.key.is_empty() {
            fact.text.clone()
        } else {
            format!("{}: {}", fact.key.replace(['_', '.', '-'], " "), fact.text)
        };
        self.add_scoped(&mut doc, (ns, &fact.subject_id), &text, &[], "")?;
        doc.add_text(f.text, text);
        doc.add_u64(f.time, seconds(fact.created_at));
        w.add_document(doc).map_err(index_error)?;
        Ok(())
    }

    fn put_episode(
        &self,
        w: &IndexWriter<TantivyDocument>,
        ns: &str,
        session_id: &str,
        e: Option<&Episode>,
    ) -> Result<()> {
        let f = self.f;
        let key = episode_key(ns, session_id);
        w.delete_term(Term::from_field_text(f.doc_key, &key));
        let Some(e) = e else { return Ok(()) };
        let mut doc = TantivyDocument::default();
        doc.add_text(f.doc_key, &key);
        doc.add_text(f.ns, ns);
        doc.add_text(f.subject, &e.subject_id);
        doc.add_text(f.session_key, session_key(ns, session_id));
        doc.add_text(f.session_id, session_id);
        doc.add_text(f.kind, Kind::Episode.tag());
        doc.add_text(f.ref_id, session_id);
        let text = e.text();
        self.add_scoped(&mut doc, (ns, &e.subject_id), &text, &[], "")?;
        doc.add_text(f.text, text);
        doc.add_u64(f.time, seconds(e.ended_at));
        w.add_document(doc).map_err(index_error)?;
        Ok(())
    }

    fn index_turns(
        &self,
        w: &IndexWriter<TantivyDocument>,
        store: &dyn Documents,
        session: &Session,
        (first, last): (u64, u64),
    ) -> Result<()> {
        let (ns, sid) = (&session.namespace, &session.session_id);
        // Each turn is indexed with its neighbours: start two turns early,
        // and index the turn before `first` again, now that it has a turn
        // after it.
        let redo = first.saturating_sub(1).max(1);
        let mut from = first.saturating_sub(2).max(1);
        let (mut before, mut current): (Option<Turn>, Option<Turn>) = (None, None);
        while from <= last {
            let page = match store.turns(ns, sid, from, last, REBUILD_PAGE) {
                Ok(p) => p,
                // Deleted meanwhile: its SessionDeleted entry follows.
                Err(Error::NotFound(_)) => return Ok(()),
                Err(e) => return Err(e),
            };
            let Some(end) = page.last().map(|t| t.seq) else {
                break;
            };
            for t in page {
                if let Some(c) = current.as_ref().filter(|c| c.seq >= redo) {
                    self.add_turn(w, session, c, [before.as_ref(), Some(&t)])?;
                }
                before = current.replace(t);
            }
            from = end + 1;
        }
        if let Some(c) = current.as_ref().filter(|c| c.seq >= redo) {
            self.add_turn(w, session, c, [before.as_ref(), None])?;
        }
        Ok(())
    }

    fn apply_one(
        &self,
        w: &IndexWriter<TantivyDocument>,
        store: &dyn Documents,
        c: &IndexChange,
    ) -> Result<()> {
        match c {
            IndexChange::Turns {
                namespace,
                session_id,
                first_seq,
                last_seq,
            } => match store.session(namespace, session_id) {
                Ok(s) => self.index_turns(w, store, &s, (*first_seq, *last_seq)),
                Err(Error::NotFound(_)) => Ok(()),
                Err(e) => Err(e),
            },
            IndexChange::SessionDeleted {
                namespace,
                session_id,
            } => {
                w.delete_term(Term::from_field_text(
                    self.f.session_key,
                    &session_key(namespace, session_id),
                ));
                Ok(())
            }
            IndexChange::TurnRemoved {
                namespace,
                session_id,
                seq,
            } => {
                w.delete_term(Term::from_field_text(
                    self.f.doc_key,
                    &turn_key(namespace, session_id, *seq),
                ));
                // The turn before it was indexed with it as context.
                match store.session(namespace, session_id) {
                    Ok(s) if *seq > 1 && s.next_seq > *seq - 1 => {
                        self.index_turns(w, store, &s, (*seq - 1, *seq - 1))
                    }
                    Ok(_) | Err(Error::NotFound(_)) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            IndexChange::Fact { namespace, fact_id } => {
                let fact = match store.fact(namespace, fact_id) {
                    Ok(f) => Some(f),
                    Err(Error::NotFound(_)) => None,
                    Err(e) => return Err(e),
                };
                self.put_fact(w, namespace, fact_id, fact.as_ref())
            }
            IndexChange::Episode {
                namespace,
                session_id,
            } => {
                let e = store.episode(namespace, session_id)?;
                self.put_episode(w, namespace, session_id, e.as_ref())
            }
        }
    }

    /// Applies outbox entries and commits, after what they read from the
    /// store was made durable. The commit is searchable at once and
    /// durable after the next [`SearchIndex::checkpoint`]: only then may
    /// the entries be acknowledged.
    /// Applying an entry twice is harmless: every document is keyed, and
    /// adding one replaces the document of the same key.
    pub fn apply(&self, store: &dyn Documents, changes: &[IndexChange]) -> Result<()> {
        let mut w = self.writer();
        let applied = changes
            .iter()
            .try_for_each(|c| self.apply_one(&w, store, c))
            .and_then(|()| store.durable());
        if let Err(e) = applied {
            // Leave the batch uncommitted: it is retried, and the
            // documents it added are discarded.
            let _ = w.rollback();
            return Err(e);
        }
        self.commit(&mut w)
    }

    fn commit(&self, w: &mut IndexWriter<TantivyDocument>) -> Result<()> {
        let mut prepared = w.prepare_commit().map_err(index_error)?;
        prepared.set_payload(COMPLETE);
        prepared.commit().map_err(index_error)?;
        self.reader.reload().map_err(index_error)
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
                self.index_turns(&w, store, s, (1, s.last_seq()))?;
                docs += s.last_seq();
            }
            progress(docs);
        }
        let mut from: Option<Vec<u8>> = None;
        loop {
            let (facts, resume) = store.facts_after(from.as_deref(), REBUILD_PAGE)?;
            for fact in &facts {
                self.put_fact(&w, &fact.namespace, &fact.fact_id, Some(fact))?;
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
                self.put_episode(&w, &e.namespace, &e.session_id, Some(e))?;
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
