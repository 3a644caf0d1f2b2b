//! What the indexer applied since the index's last commit: searchable
//! before that commit.
//!
//! A commit of the index makes a segment, and tantivy's fixed cost per
//! segment (a term table sized for bulk indexing, written and walked on
//! every commit; a term dictionary per field) is several milliseconds
//! even for one document — what a search right after a write used to
//! wait for. So the indexer shows each batch to searches as soon as the
//! store made it durable, as [`Fresh`] documents (when a read waits for
//! it or after a quiet spell), and commits the batches when writes pause
//! (or when they hold `FRESH_OPS` operations, or at a checkpoint); the view
//! that shows the commit drops them. A search
//! scores the fresh documents here by the rules the index applies
//! (`query.rs`, `scoped.rs`): the same terms, boosts, phrases and dates,
//! BM25 from tantivy's own [`Bm25Weight`] over statistics that count the
//! index and the fresh documents together, each field's length quantized
//! as the index stores it — equal scores to float rounding (a test holds
//! them to it). A document they replace or delete (a turn indexed again
//! with its next turn as context, a deleted session) is hidden in the
//! index until the commit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::{Bm25StatisticsProvider, Bm25Weight};
use tantivy::schema::{Field, Value};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{TantivyDocument, Term};

use super::changes::Op;
use super::schema::{role_from_tag, Fields, PHRASE_BOOST, WHEN_BOOST};
use super::scoped::scope;
use super::{index_error, Hit, Kind, SearchQuery};
use crate::error::Result;

/// Positions within which two words count as a phrase (the index's
/// phrase queries use the same slop).
pub(super) const PHRASE_SLOP: u32 = 2;

/// One analysed field: each word's positions, and how many words.
#[derive(Debug, Default)]
struct Words {
    at: HashMap<String, Vec<u32>>,
    len: u32,
}

impl Words {
    fn add(&mut self, analyzer: &mut TextAnalyzer, value: &str, gap: u32) {
        let base = if self.len == 0 { 0 } else { self.len + gap };
        let mut stream = analyzer.token_stream(value);
        while stream.advance() {
            let t = stream.token();
            let position = base + u32::try_from(t.position).unwrap_or(u32::MAX - base);
            self.at.entry(t.text.clone()).or_default().push(position);
            self.len += 1;
        }
    }

    fn tf(&self, word: &str) -> u32 {
        self.at
            .get(word)
            .map_or(0, |p| u32::try_from(p.len()).unwrap_or(u32::MAX))
    }
}

/// A document of the batch, as searches need it.
#[derive(Debug)]
pub(super) struct FreshDoc {
    key: String,
    ns: String,
    session_key: String,
    /// What every scoped word of it is prefixed with ("" without subject).
    scope: String,
    asks: bool,
    text: String,
    /// Its text, neighbours' text and speaker.
    words: [Words; 3],
    /// What a hit on it says (score and snippet unset).
    hit: Hit,
}

impl FreshDoc {
    fn of(doc: &TantivyDocument, f: &Fields, analyzer: &mut TextAnalyzer) -> FreshDoc {
        let text_of = |field: Field| {
            doc.get_first(field)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let u64_of = |field: Field| doc.get_first(field).and_then(|v| v.as_u64());
        let mut words: [Words; 3] = Default::default();
        for (i, field) in [f.text, f.context, f.speaker].into_iter().enumerate() {
            for value in doc.get_all(field).filter_map(|v| v.as_str()) {
                words[i].add(analyzer, value, 1);
            }
        }
        let kind = Kind::from_tag(&text_of(f.kind)).unwrap_or(Kind::Turn);
        let (ns, subject) = (text_of(f.ns), text_of(f.subject));
        let hit = Hit {
            kind,
            score: 0.0,
            snippet: String::new(),
            subject_id: subject.clone(),
            session_id: text_of(f.session_id),
            seq: u64_of(f.seq).unwrap_or(0),
            fact_id: if kind == Kind::Fact {
                text_of(f.ref_id)
            } else {
                String::new()
            },
            role: role_from_tag(&text_of(f.role)),
            time_seconds: u64_of(f.time).unwrap_or(0),
        };
        FreshDoc {
            key: text_of(f.doc_key),
            scope: if subject.is_empty() {
                String::new()
            } else {
                scope(&ns, &subject)
            },
            ns,
            session_key: text_of(f.session_key),
            asks: u64_of(f.asks) == Some(1),
            text: text_of(f.text),
            words,
            hit,
        }
    }

    /// Which of its analysed fields `field` is, and the word a term of
    /// that field names in it (a scoped term's word without its prefix);
    /// `None` for another field or another subject's scope.
    fn word<'t>(&self, f: &Fields, field: Field, text: &'t str) -> Option<(usize, &'t str)> {
        match Counts::slot(f, field)? {
            i @ 0..3 => Some((i, text)),
            i => (!self.scope.is_empty())
                .then(|| text.strip_prefix(self.scope.as_str()))
                .flatten()
                .map(|w| (i - 3, w)),
        }
    }

    fn tf(&self, f: &Fields, term: &Term) -> u32 {
        let value = term.value();
        let Some(text) = value.as_str() else {
            return 0;
        };
        self.word(f, term.field(), text)
            .map_or(0, |(i, w)| self.words[i].tf(w))
    }

    /// Words in `field` (a scoped field has them only with a subject).
    fn len(&self, f: &Fields, field: Field) -> u32 {
        match Counts::slot(f, field) {
            Some(i @ 0..3) => self.words[i].len,
            Some(i) if !self.scope.is_empty() => self.words[i - 3].len,
            _ => 0,
        }
    }
}

/// The batches applied since the last commit: their documents (the last
/// of each key) and what they hide in the index. Cloned cheaply (each
/// search's view holds one while the indexer adds the next batch).
#[derive(Debug, Default, Clone)]
pub(super) struct Fresh {
    /// In the order added; a replaced or deleted one's slot is emptied.
    slots: Vec<Option<Arc<FreshDoc>>>,
    /// Where each key's document is.
    at: HashMap<String, usize>,
    keys: HashSet<String>,
    sessions: HashSet<String>,
    counts: Counts,
}

/// The fresh documents' statistics, kept as they come and go (a search
/// asks for them many times): per field — text, context, speaker, then
/// their scoped copies — the documents holding each term (by the term's
/// text) and the words in all; and the documents.
#[derive(Debug, Default, Clone)]
struct Counts {
    df: [HashMap<String, u32>; 6],
    tokens: [u64; 6],
    docs: u64,
}

impl Counts {
    /// Which of the six fields `field` is: 0–2 the text, context and
    /// speaker, 3–5 their scoped copies.
    fn slot(f: &Fields, field: Field) -> Option<usize> {
        [
            f.text,
            f.context,
            f.speaker,
            f.scoped_text,
            f.scoped_context,
            f.scoped_speaker,
        ]
        .iter()
        .position(|x| *x == field)
    }

    /// Counts `d` in (`sign` 1) or out (-1).
    fn count(&mut self, d: &FreshDoc, sign: i64) {
        self.docs = self.docs.saturating_add_signed(sign);
        for (i, words) in d.words.iter().enumerate() {
            let scoped = (!d.scope.is_empty()).then_some(i + 3);
            for slot in std::iter::once(i).chain(scoped) {
                self.tokens[slot] =
                    self.tokens[slot].saturating_add_signed(sign * i64::from(words.len));
                for w in words.at.keys() {
                    let term = if slot < 3 {
                        w.clone()
                    } else {
                        format!("{}{w}", d.scope)
                    };
                    if sign > 0 {
                        *self.df[slot].entry(term).or_default() += 1;
                    } else if let Some(n) = self.df[slot].get_mut(&term) {
                        *n -= 1;
                        if *n == 0 {
                            self.df[slot].remove(&term);
                        }
                    }
                }
            }
        }
    }
}

/// How a search ranks: the scored terms with their weights, the word
/// pairs scored as phrases, the period a query names, and which terms
/// are the query's words (for the tiers).
pub(super) struct Plan<'a> {
    pub(super) query: &'a SearchQuery,
    /// A term and its weight.
    pub(super) weighted: &'a [(Term, f32)],
    /// Adjacent words scored as phrases on the text.
    pub(super) phrases: Vec<[Term; 2]>,
    pub(super) period: Option<(u64, u64)>,
    /// For each query word: its terms on the record's own fields (text,
    /// speaker) and its neighbours' (context).
    pub(super) words: Vec<([Term; 2], Term)>,
}

impl Fresh {
    /// Adds a batch: each document it adds, and what its deletions hide
    /// in the index (an added document replaces its key).
    pub(super) fn extend(&mut self, ops: &[Op], f: &Fields, analyzer: &mut TextAnalyzer) {
        for op in ops {
            match op {
                Op::Delete(term) => {
                    let value = term.value();
                    let Some(text) = value.as_str() else {
                        continue;
                    };
                    if term.field() == f.doc_key {
                        if let Some(i) = self.at.remove(text) {
                            if let Some(d) = self.slots[i].take() {
                                self.counts.count(&d, -1);
                            }
                        }
                        self.keys.insert(text.to_owned());
                    } else if term.field() == f.session_key {
                        for slot in &mut self.slots {
                            if slot.as_ref().is_some_and(|d| d.session_key == text) {
                                if let Some(d) = slot.take() {
                                    self.at.remove(&d.key);
                                    self.counts.count(&d, -1);
                                }
                            }
                        }
                        self.sessions.insert(text.to_owned());
                    }
                }
                Op::Add(doc) => {
                    let d = FreshDoc::of(doc, f, analyzer);
                    if let Some(i) = self.at.insert(d.key.clone(), self.slots.len()) {
                        if let Some(old) = self.slots[i].take() {
                            self.counts.count(&old, -1);
                        }
                    }
                    self.counts.count(&d, 1);
                    self.slots.push(Some(Arc::new(d)));
                }
            }
        }
    }

    /// The documents, with their slots.
    fn docs(&self) -> impl Iterator<Item = (usize, &FreshDoc)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_deref().map(|d| (i, d)))
    }

    fn doc(&self, i: usize) -> Option<&FreshDoc> {
        self.slots.get(i).and_then(|d| d.as_deref())
    }

    /// Whether the index's document of `key` in `session_key` ("" for a
    /// fact) is hidden: the fresh batches replace or delete it.
    pub(super) fn hides(&self, key: &str, session_key: &str) -> bool {
        self.keys.contains(key) || self.sessions.contains(session_key)
    }

    /// The hit on document `i` (`None` for an emptied slot).
    pub(super) fn hit(&self, i: usize, score: f32) -> Option<Hit> {
        self.doc(i).map(|d| Hit {
            score,
            ..d.hit.clone()
        })
    }

    pub(super) fn time(&self, i: usize) -> u64 {
        self.doc(i).map_or(0, |d| d.hit.time_seconds)
    }

    pub(super) fn asks(&self, i: usize) -> bool {
        self.doc(i).is_some_and(|d| d.asks)
    }

    pub(super) fn text(&self, i: usize) -> &str {
        self.doc(i).map_or("", |d| d.text.as_str())
    }

    /// The documents that match `plan`: (tier, score, index), ranked as
    /// the index ranks its own (`stats` counting both).
    pub(super) fn rank(
        &self,
        f: &Fields,
        plan: &Plan<'_>,
        stats: &dyn Bm25StatisticsProvider,
    ) -> Result<Vec<(u8, f32, usize)>> {
        let q = plan.query;
        let mut weights: HashMap<&Term, Bm25Weight> = HashMap::new();
        let mut out = Vec::new();
        for (i, d) in self.docs() {
            let wanted = d.ns == q.namespace
                && q.subject_id.as_ref().is_none_or(|s| *s == d.hit.subject_id)
                && q.session_id.as_ref().is_none_or(|s| *s == d.hit.session_id)
                && (q.kinds.is_empty() || q.kinds.contains(&d.hit.kind));
            if !wanted {
                continue;
            }
            let holds = |t: &Term| d.tf(f, t) > 0;
            let own = plan
                .words
                .iter()
                .filter(|(own, _)| own.iter().any(holds))
                .count();
            let any = plan
                .words
                .iter()
                .any(|(own, near)| own.iter().any(holds) || holds(near));
            if !any {
                continue;
            }
            let mut score = 0.0f32;
            for (t, boost) in plan.weighted {
                let tf = d.tf(f, t);
                if tf == 0 {
                    continue;
                }
                let w = match weights.get(t) {
                    Some(w) => w,
                    None => {
                        let w = Bm25Weight::for_terms(stats, std::slice::from_ref(t))
                            .map_err(index_error)?;
                        weights.entry(t).or_insert(w)
                    }
                };
                let norm = FieldNormReader::fieldnorm_to_id(d.len(f, t.field()));
                score += w.boost_by(*boost).score(norm, tf);
            }
            for pair in &plan.phrases {
                let count = d.phrase_count(f, pair);
                if count > 0 {
                    let w = Bm25Weight::for_terms(stats, pair).map_err(index_error)?;
                    let norm = FieldNormReader::fieldnorm_to_id(d.len(f, f.text));
                    score += w.boost_by(PHRASE_BOOST).score(norm, count);
                }
            }
            if plan
                .period
                .is_some_and(|(from, to)| (from..to).contains(&d.hit.time_seconds))
            {
                score += WHEN_BOOST;
            }
            let tier = u8::from(plan.words.len() < 2 || own < 2);
            out.push((tier, score, i));
        }
        Ok(out)
    }
}

impl FreshDoc {
    /// How often the pair occurs within [`PHRASE_SLOP`] positions, counted
    /// as tantivy's phrase scorer counts it: each occurrence of the second
    /// word matched at most once, to the nearest first word before it.
    fn phrase_count(&self, f: &Fields, [a, b]: &[Term; 2]) -> u32 {
        let positions = |t: &Term| {
            let value = t.value();
            value
                .as_str()
                .filter(|_| t.field() == f.text)
                .and_then(|w| self.words[0].at.get(w))
                .cloned()
                .unwrap_or_default()
        };
        // The first word's positions shifted by one: a match is the
        // second word within the slop of where it would follow.
        let left: Vec<u32> = positions(a).into_iter().map(|p| p + 1).collect();
        let right = positions(b);
        let (mut i, mut j, mut count) = (0, 0, 0u32);
        while i < left.len() && j < right.len() {
            if left[i].abs_diff(right[j]) <= PHRASE_SLOP {
                while i + 1 < left.len() && left[i + 1] <= right[j] {
                    i += 1;
                }
                count += 1;
                i += 1;
                j += 1;
            } else if left[i] < right[j] {
                i += 1;
            } else {
                j += 1;
            }
        }
        count
    }
}

/// The index's statistics with the fresh documents counted in.
pub(super) struct WithFresh<'a> {
    pub(super) index: &'a dyn Bm25StatisticsProvider,
    pub(super) fresh: Option<&'a Fresh>,
    pub(super) f: &'a Fields,
}

impl Bm25StatisticsProvider for WithFresh<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let fresh = self
            .fresh
            .zip(Counts::slot(self.f, field))
            .map_or(0, |(b, i)| b.counts.tokens[i]);
        Ok(self.index.total_num_tokens(field)? + fresh)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        let fresh = self.fresh.map_or(0, |b| b.counts.docs);
        Ok(self.index.total_num_docs()? + fresh)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let value = term.value();
        let fresh = self
            .fresh
            .zip(Counts::slot(self.f, term.field()))
            .zip(value.as_str())
            .and_then(|((b, i), text)| b.counts.df[i].get(text))
            .map_or(0, |n| u64::from(*n));
        Ok(self.index.doc_freq(term)? + fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::super::changes::Sink;
    use super::super::scoped::tests::add_said;
    use super::super::View;
    use super::*;
    use crate::search::SearchIndex;

    /// The operations that index `said` as turns `1..` of a session of
    /// `subject` (each with its neighbours).
    fn ops(idx: &SearchIndex, subject: &str, session: &str, said: &[(&str, &str)]) -> Vec<Op> {
        let mut list = Sink::List(Vec::new());
        add_said(idx, &mut list, ("ns", subject, session), said);
        list.into_ops()
    }

    fn commit(idx: &SearchIndex, ops: Vec<Op>) {
        let mut w = idx.writer();
        for op in ops {
            op.apply(&w).expect("applied");
        }
        idx.commit(&mut w).expect("committed");
    }

    fn show(idx: &SearchIndex, ops: &[Op]) {
        let mut analyzer = idx.index.tokenizer_for_field(idx.f.text).expect("analyzer");
        let mut fresh = Fresh::default();
        fresh.extend(ops, &idx.f, &mut analyzer);
        idx.set_view(View {
            disk: idx.view().disk,
            fresh: Some(Arc::new(fresh)),
        });
    }

    fn query(subject: Option<&str>, text: &str, phrases: bool) -> SearchQuery {
        SearchQuery {
            namespace: "ns".to_owned(),
            subject_id: subject.map(str::to_owned),
            session_id: None,
            query: text.to_owned(),
            kinds: Vec::new(),
            limit: 8,
            reference_time: None,
            snippets: true,
            phrases,
        }
    }

    fn ranked(idx: &SearchIndex, q: &SearchQuery) -> Vec<(String, u64, f32, String)> {
        idx.search(q, &mut |_: &Hit| Ok(true))
            .expect("searched")
            .into_iter()
            .map(|h| (h.session_id, h.seq, h.score, h.snippet))
            .collect()
    }

    const OLD: &[(&str, &str)] = &[
        (
            "ann",
            "I booked the flight to Lisbon for the conference in May",
        ),
        ("bob", "Did you book the hotel near the venue too?"),
        ("ann", "Not yet, the hotel near the venue was full"),
        ("bob", "Try the guest house by the river, it is cheap"),
        ("ann", "My sister Kate starts skiing lessons next week"),
    ];
    const NEW: &[(&str, &str)] = &[
        ("kate", "I will book the guest house by the river tonight"),
        ("ann", "Kate, the flight to Lisbon leaves at nine"),
        (
            "kate",
            "Skiing lessons moved to Friday, the hotel is booked",
        ),
    ];

    /// The batch, shown before its commit, is ranked as the index ranks
    /// it once committed: the same hits, order, scores and snippets, on
    /// one subject (the pruned search), with phrases and across subjects
    /// (the filtered one), and with a period named.
    #[test]
    fn a_batch_before_its_commit_ranks_as_after_it() {
        let (idx, _) = SearchIndex::open(None).expect("index");
        idx.ready.store(true, std::sync::atomic::Ordering::Release);
        commit(&idx, ops(&idx, "ann", "s1", OLD));
        let batch = ops(&idx, "ann", "s2", NEW);
        let queries = [
            query(Some("ann"), "book the guest house by the river", false),
            query(Some("ann"), "When does Kate go skiing?", false),
            query(Some("ann"), "flight to Lisbon in May", false),
            query(Some("ann"), "guest house river", true),
            query(None, "hotel booked near the venue", true),
            query(None, "kate skiing friday", false),
        ];
        show(&idx, &batch);
        let before: Vec<_> = queries.iter().map(|q| ranked(&idx, q)).collect();
        commit(&idx, batch);
        let after: Vec<_> = queries.iter().map(|q| ranked(&idx, q)).collect();
        assert!(before.iter().any(|r| r.iter().any(|h| h.0 == "s2")));
        // Scores equal to float rounding (the index sums a record's clauses
        // in its own order): hits whose scores tie may swap places.
        let key = |r: &[(String, u64, f32, String)]| {
            let mut r: Vec<_> = r
                .iter()
                .map(|(s, n, score, snip)| {
                    ((score * 1e4).round() as i64, s.clone(), *n, snip.clone())
                })
                .collect();
            r.sort_by(|a, b| b.0.cmp(&a.0).then((&a.1, a.2).cmp(&(&b.1, b.2))));
            r
        };
        for ((b, a), q) in before.iter().zip(&after).zip(&queries) {
            assert_eq!(key(b), key(a), "{}", q.query);
        }
    }

    /// What the batch replaces or deletes is hidden in the index until
    /// the commit: a turn indexed again shows once, a deleted session's
    /// turns not at all.
    #[test]
    fn a_batch_hides_what_it_replaces_or_deletes() {
        let (idx, _) = SearchIndex::open(None).expect("index");
        idx.ready.store(true, std::sync::atomic::Ordering::Release);
        commit(&idx, ops(&idx, "ann", "s1", OLD));
        commit(&idx, ops(&idx, "ann", "s3", &OLD[..2]));
        // s1's turns indexed again (as a later turn re-indexes the one
        // before it), and s3 deleted.
        let mut batch = ops(&idx, "ann", "s1", OLD);
        batch.push(Op::Delete(Term::from_field_text(
            idx.f.session_key,
            &super::super::schema::session_key("ns", "s3"),
        )));
        show(&idx, &batch);
        let hits = ranked(&idx, &query(Some("ann"), "hotel near the venue", false));
        let mut seen: Vec<(String, u64)> = hits.iter().map(|h| (h.0.clone(), h.1)).collect();
        assert!(!seen.is_empty());
        assert!(seen.iter().all(|(s, _)| s == "s1"), "{seen:?}");
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n, "each turn once");
    }
}
