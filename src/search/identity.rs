//! A hit's identity — what it is, whose, which session and turn, when —
//! read from the index's columns. Ranking and identifying a hit never
//! reads its stored document: at a long history the hits' stored blocks
//! are rarely shared, and decompressing one block per hit was a seventh of
//! a bundle's retrieval. Only a snippet reads the document. The columns
//! are opened once per searcher (once per index commit), not per search.

use std::sync::{Arc, Mutex};

use tantivy::columnar::{Column, StrColumn};
use tantivy::{DocAddress, Searcher};

use super::schema::role_from_tag;
use super::{index_error, Hit, Kind};
use crate::error::Result;

/// One segment's columns.
struct Segment {
    key: Option<StrColumn>,
    kind: Option<StrColumn>,
    subject: Option<StrColumn>,
    session: Option<StrColumn>,
    ref_id: Option<StrColumn>,
    role: Option<StrColumn>,
    seq: Column<u64>,
    time: Column<u64>,
    asks: Column<u64>,
}

/// The columns of the newest searcher's segments, opened by the first
/// search that reads them.
#[derive(Default)]
pub(super) struct ColumnCache(Mutex<Option<(u64, Arc<[Segment]>)>>);

impl ColumnCache {
    /// The columns of `searcher`'s segments.
    pub(super) fn columns(&self, searcher: &Searcher) -> Result<Columns> {
        let generation = searcher.generation().generation_id();
        let cached = |c: &Option<(u64, Arc<[Segment]>)>| {
            c.as_ref()
                .filter(|(g, _)| *g == generation)
                .map(|(_, s)| Arc::clone(s))
        };
        let lock = || self.0.lock().unwrap_or_else(|p| p.into_inner());
        // The guard is dropped at the end of this statement.
        let hit = cached(&lock());
        let segments = match hit {
            Some(s) => s,
            None => {
                // Opened outside the lock; a search racing this one may
                // open them too, and the newer generation is kept.
                let s: Arc<[Segment]> = open(searcher)?.into();
                let mut c = lock();
                if c.as_ref().is_none_or(|(g, _)| *g < generation) {
                    *c = Some((generation, Arc::clone(&s)));
                }
                s
            }
        };
        Ok(Columns {
            segments,
            word: String::new(),
        })
    }
}

/// The columns of every segment a search reads.
pub(super) struct Columns {
    segments: Arc<[Segment]>,
    /// Scratch space for the words read.
    word: String,
}

/// Opens the columns of `searcher`'s segments.
fn open(searcher: &Searcher) -> Result<Vec<Segment>> {
    let mut segments = Vec::with_capacity(searcher.segment_readers().len());
    for reader in searcher.segment_readers() {
        let fast = reader.fast_fields();
        let str = |name: &str| fast.str(name).map_err(index_error);
        let u64 = |name: &str| fast.u64(name).map_err(index_error);
        segments.push(Segment {
            key: str("doc_key")?,
            kind: str("kind")?,
            subject: str("subject")?,
            session: str("session_id")?,
            ref_id: str("ref_id")?,
            role: str("role")?,
            seq: u64("seq")?,
            time: u64("time")?,
            asks: u64("asks")?,
        });
    }
    Ok(segments)
}

impl Columns {
    fn segment(&self, addr: DocAddress) -> &Segment {
        &self.segments[addr.segment_ord as usize]
    }

    /// When the record happened, seconds since the epoch (0 if unknown).
    pub(super) fn time(&self, addr: DocAddress) -> u64 {
        self.segment(addr).time.first(addr.doc_id).unwrap_or(0)
    }

    /// Whether the record is a turn that only asks.
    pub(super) fn asks(&self, addr: DocAddress) -> bool {
        self.segment(addr).asks.first(addr.doc_id) == Some(1)
    }

    /// The record's word in `column`, or "" when it has none.
    fn word(
        &mut self,
        addr: DocAddress,
        column: fn(&Segment) -> &Option<StrColumn>,
    ) -> Result<&str> {
        self.word.clear();
        let segment = &self.segments[addr.segment_ord as usize];
        if let Some(c) = column(segment) {
            if let Some(ord) = c.term_ords(addr.doc_id).next() {
                c.ord_to_str(ord, &mut self.word)
                    .map_err(|e| index_error(e.into()))?;
            }
        }
        Ok(&self.word)
    }

    /// The record's key (what it is replaced and deleted by).
    pub(super) fn key(&mut self, addr: DocAddress) -> Result<String> {
        Ok(self.word(addr, |s| &s.key)?.to_owned())
    }

    /// The hit at `addr`, without its snippet; `None` for a document of no
    /// known kind.
    pub(super) fn hit(&mut self, addr: DocAddress, score: f32, time: u64) -> Result<Option<Hit>> {
        let Some(kind) = Kind::from_tag(self.word(addr, |s| &s.kind)?) else {
            return Ok(None);
        };
        let subject_id = self.word(addr, |s| &s.subject)?.to_owned();
        let session_id = self.word(addr, |s| &s.session)?.to_owned();
        let fact_id = if kind == Kind::Fact {
            self.word(addr, |s| &s.ref_id)?.to_owned()
        } else {
            String::new()
        };
        let role = role_from_tag(self.word(addr, |s| &s.role)?);
        Ok(Some(Hit {
            kind,
            score,
            snippet: String::new(),
            subject_id,
            session_id,
            seq: self.segment(addr).seq.first(addr.doc_id).unwrap_or(0),
            fact_id,
            role,
            time_seconds: time,
        }))
    }
}
