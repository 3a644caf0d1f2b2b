//! Outbox changes turned into index operations: each change reads what
//! it names from the store and becomes deletions by key and documents. A
//! [`Sink`] takes them either straight into a writer (a rebuild, the
//! repair after a crash) or into a list, which the indexer shows to
//! searches at once (`fresh.rs`) and then commits to the index.

use tantivy::{IndexWriter, TantivyDocument, Term};

use super::schema::{
    episode_key, fact_key, only_asks, role_tag, seconds, session_key, turn_key, turn_text,
    turn_time,
};
use super::{index_error, Documents, Kind, SearchIndex, REBUILD_PAGE};
use crate::error::{Error, Result};
use crate::model::{Episode, Fact, FactOrigin, IndexChange, Session, Turn};

/// One index operation.
pub(super) enum Op {
    /// Delete every document holding the term (a key, or a session's key).
    Delete(Term),
    /// Add a document.
    Add(TantivyDocument),
}

/// Where the operations of a change go.
pub(super) enum Sink<'a> {
    /// Straight into a writer.
    Writer(&'a IndexWriter<TantivyDocument>),
    /// Into a list.
    List(Vec<Op>),
}

impl Op {
    /// Gives the operation to a writer (the document copied: a shown
    /// batch keeps its operations until their commit).
    pub(super) fn apply(&self, w: &IndexWriter<TantivyDocument>) -> Result<()> {
        match self {
            Op::Delete(t) => {
                w.delete_term(t.clone());
            }
            Op::Add(doc) => {
                w.add_document(doc.clone()).map_err(index_error)?;
            }
        }
        Ok(())
    }
}

impl Sink<'_> {
    /// A list sink's operations (none from a writer's, which applied
    /// them as they came).
    pub(super) fn into_ops(self) -> Vec<Op> {
        match self {
            Sink::Writer(_) => Vec::new(),
            Sink::List(ops) => ops,
        }
    }

    fn delete(&mut self, t: Term) {
        match self {
            Sink::Writer(w) => {
                w.delete_term(t);
            }
            Sink::List(ops) => ops.push(Op::Delete(t)),
        }
    }

    fn add(&mut self, doc: TantivyDocument) -> Result<()> {
        match self {
            Sink::Writer(w) => {
                w.add_document(doc).map_err(index_error)?;
            }
            Sink::List(ops) => ops.push(Op::Add(doc)),
        }
        Ok(())
    }
}

impl SearchIndex {
    /// Deletes the document keyed `key` and starts the one replacing it:
    /// its key, namespace, subject and kind (a document is upserted by
    /// its key).
    fn replacing(
        &self,
        w: &mut Sink<'_>,
        key: &str,
        (ns, subject): (&str, &str),
        kind: Kind,
    ) -> TantivyDocument {
        let f = self.f;
        w.delete(Term::from_field_text(f.doc_key, key));
        let mut doc = TantivyDocument::default();
        doc.add_text(f.doc_key, key);
        doc.add_text(f.ns, ns);
        doc.add_text(f.subject, subject);
        doc.add_text(f.kind, kind.tag());
        doc
    }

    pub(super) fn add_turn(
        &self,
        w: &mut Sink<'_>,
        s: &Session,
        t: &Turn,
        neighbours: [Option<&Turn>; 2],
    ) -> Result<()> {
        let f = self.f;
        let key = turn_key(&s.namespace, &s.session_id, t.seq);
        let mut doc = self.replacing(w, &key, (&s.namespace, &s.subject_id), Kind::Turn);
        doc.add_text(f.session_key, session_key(&s.namespace, &s.session_id));
        doc.add_text(f.session_id, &s.session_id);
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
        w.add(doc)?;
        Ok(())
    }

    pub(super) fn put_fact(
        &self,
        w: &mut Sink<'_>,
        ns: &str,
        id: &str,
        fact: Option<&Fact>,
    ) -> Result<()> {
        let f = self.f;
        let key = fact_key(ns, id);
        // Only current facts are searchable.
        let Some(fact) = fact.filter(|x| x.is_current()) else {
            w.delete(Term::from_field_text(f.doc_key, &key));
            return Ok(());
        };
        let mut doc = self.replacing(w, &key, (ns, &fact.subject_id), Kind::Fact);
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
        w.add(doc)?;
        Ok(())
    }

    pub(super) fn put_episode(
        &self,
        w: &mut Sink<'_>,
        ns: &str,
        session_id: &str,
        e: Option<&Episode>,
    ) -> Result<()> {
        let f = self.f;
        let key = episode_key(ns, session_id);
        let Some(e) = e else {
            w.delete(Term::from_field_text(f.doc_key, &key));
            return Ok(());
        };
        let mut doc = self.replacing(w, &key, (ns, &e.subject_id), Kind::Episode);
        doc.add_text(f.session_key, session_key(ns, session_id));
        doc.add_text(f.session_id, session_id);
        doc.add_text(f.ref_id, session_id);
        let text = e.text();
        self.add_scoped(&mut doc, (ns, &e.subject_id), &text, &[], "")?;
        doc.add_text(f.text, text);
        doc.add_u64(f.time, seconds(e.ended_at));
        w.add(doc)?;
        Ok(())
    }

    pub(super) fn index_turns(
        &self,
        w: &mut Sink<'_>,
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

    pub(super) fn apply_one(
        &self,
        w: &mut Sink<'_>,
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
                w.delete(Term::from_field_text(
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
                w.delete(Term::from_field_text(
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
}
