//! A subject's own postings. Every record of a subject is indexed a second
//! time with each of its words prefixed by the subject (namespace and
//! subject id), so the records of one subject that hold a word are one
//! posting list of their own. A search of one subject is then a plain
//! disjunction of term queries that reads only that subject's records;
//! scope filters (`query.rs`) would make every record of the index that
//! holds a query word be scored. tantivy scores a disjunction
//! exhaustively (its block-max WAND applies only when every term is in the
//! segment searched, and a word that names nobody has no speaker
//! postings; WAND forced segment by segment was measured slower here,
//! docs/benchmarks.md), so the disjunction is bounded instead: the rarest
//! terms, while their postings stay within [`LEADING_POSTINGS`], find the
//! candidates, and the commoner ones add their score to those candidates
//! only, read by seeking.
//!
//! The pruned search ranks the top candidates by the same weights as the
//! filtered one; its tiers (records holding two of the query's words
//! first) are then read from the candidates' postings. Inverse document
//! frequencies count the subject's records that hold a word, not the
//! whole index's.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use tantivy::collector::TopDocs;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::{Postings, SegmentPostings};
use tantivy::query::{
    Bm25StatisticsProvider, Bm25Weight, BooleanQuery, BoostQuery, ConstScoreQuery, Occur, Query,
    RangeQuery, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::tokenizer::{PreTokenizedString, Token};
use tantivy::{DocAddress, DocSet, Searcher, TantivyDocument, Term, TERMINATED};

use super::fresh::{Fresh, Plan, WithFresh};
use super::schema::{weighted_terms, WHEN_BOOST};
use super::{index_error, when, SearchIndex, SearchQuery};
use crate::error::Result;

/// Candidates ranked per hit wanted before they are sorted into tiers.
const CANDIDATES_PER_HIT: usize = 2;
/// Postings read, about, to find a subject's candidates: its query words
/// are taken rarest first while their postings together stay within this;
/// the commoner ones (a name that is every other turn's speaker, a word
/// said every day) only score the candidates found, read by seeking. A
/// subject of a few thousand records is searched whole; a long history
/// costs about the same as a short one.
pub(super) const LEADING_POSTINGS: u64 = 2_000;

/// Where a candidate is: in the index, or among the batches not committed
/// yet (`fresh.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum At {
    Index(DocAddress),
    Fresh(usize),
}

/// A candidate: its tier (0 = two of the query's words its own), score and
/// place.
pub(super) type Ranked = (u8, f32, At);

/// What every word of a subject's records is prefixed with. Ids never hold
/// a NUL (they are validated), so no two scopes share a prefix.
pub(super) fn scope(ns: &str, subject: &str) -> String {
    format!("{ns}\u{0}{subject}\u{0}")
}

impl SearchIndex {
    /// Adds the scoped copies of a record's text, neighbours' text and
    /// speaker to `doc` (nothing for a record without a subject).
    pub(super) fn add_scoped(
        &self,
        doc: &mut TantivyDocument,
        (ns, subject): (&str, &str),
        text: &str,
        context: &[&str],
        speaker: &str,
    ) -> Result<()> {
        if subject.is_empty() {
            return Ok(());
        }
        let scope = scope(ns, subject);
        let mut analyzer = self
            .index
            .tokenizer_for_field(self.f.text)
            .map_err(index_error)?;
        let f = self.f;
        let values = std::iter::once((f.scoped_text, text))
            .chain(context.iter().map(|c| (f.scoped_context, *c)))
            .chain(std::iter::once((f.scoped_speaker, speaker)));
        for (field, value) in values.filter(|(_, v)| !v.is_empty()) {
            let mut stream = analyzer.token_stream(value);
            let mut tokens = Vec::new();
            while stream.advance() {
                let t = stream.token();
                tokens.push(Token {
                    text: format!("{scope}{}", t.text),
                    ..t.clone()
                });
            }
            // The value itself is not stored: only its terms are indexed.
            doc.add_pre_tokenized_text(
                field,
                PreTokenizedString {
                    text: String::new(),
                    tokens,
                },
            );
        }
        Ok(())
    }

    /// The top candidates of a search of one subject (every kind, no
    /// session, no phrases), in tiers as the filtered search gives them;
    /// `None` when the search is not of that form.
    pub(super) fn pruned(
        &self,
        searcher: &Searcher,
        fresh: Option<&Fresh>,
        q: &SearchQuery,
        (terms, named, cues): (&[String], &[bool], &[String]),
        fetch: usize,
    ) -> Result<Option<Vec<Ranked>>> {
        let Some(subject) = q.subject_id.as_deref() else {
            return Ok(None);
        };
        let every_kind = q.kinds.is_empty() || q.kinds.len() >= 3;
        if q.session_id.is_some() || q.phrases || !every_kind {
            return Ok(None);
        }
        let scope = scope(&q.namespace, subject);
        let f = self.f;
        let term = |field: Field, t: &str| Term::from_field_text(field, &format!("{scope}{t}"));
        let weighted = weighted_terms(
            [f.scoped_text, f.scoped_context, f.scoped_speaker],
            (terms, named, cues),
            term,
        );
        let with_fresh = WithFresh {
            index: searcher,
            fresh,
            f: &self.f,
        };
        let stats = Counted::new(
            &with_fresh,
            &weighted,
            [f.scoped_text, f.scoped_context, f.scoped_speaker],
        )?;
        let (leading, rest) = by_postings(&stats, weighted.clone(), self.leading_postings);
        let clauses: Vec<(Occur, Box<dyn Query>)> = leading
            .into_iter()
            .map(|(t, boost)| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
                if boost == 1.0 {
                    (Occur::Should, q)
                } else {
                    (
                        Occur::Should,
                        Box::new(BoostQuery::new(q, boost)) as Box<dyn Query>,
                    )
                }
            })
            .collect();
        let words = BooleanQuery::new(clauses);
        // Ranked by the leading words alone, then rescored on the rest. A
        // candidate outside this first top could move up on the commoner
        // words; ranking four times as many found the same answers in
        // bundles with the split forced far harder than a long history
        // makes it, and cost a fifth of a search at 100,000 turns
        // (docs/benchmarks.md).
        let wanted = fetch * CANDIDATES_PER_HIT;
        let top_k = TopDocs::with_limit(wanted);
        let mut found = searcher
            .search_with_statistics_provider(&words, &top_k, &stats)
            .map_err(index_error)?;
        if let Some((from, to)) = when::period(&q.query, q.reference_time) {
            // The records of the period a query names score their words
            // and the period's weight. Ranked apart (the period's records
            // by their words), then merged: a record in the true top is in
            // the period's top or, outside it, in the top by words alone.
            let range = RangeQuery::new(
                Bound::Included(Term::from_field_u64(f.time, from)),
                Bound::Excluded(Term::from_field_u64(f.time, to)),
            );
            let within = BooleanQuery::new(vec![
                (
                    Occur::Must,
                    Box::new(ConstScoreQuery::new(Box::new(range), 0.0)),
                ),
                (Occur::Must, Box::new(words.clone())),
            ]);
            let dated = searcher
                .search_with_statistics_provider(&within, &top_k, &stats)
                .map_err(index_error)?;
            let dated_docs: HashSet<DocAddress> = dated.iter().map(|(_, a)| *a).collect();
            found.retain(|(_, a)| !dated_docs.contains(a));
            found.extend(dated.into_iter().map(|(s, a)| (s + WHEN_BOOST, a)));
            found.sort_by(|a, b| b.0.total_cmp(&a.0));
            found.truncate(wanted);
        }
        if !rest.is_empty() {
            add_scores(searcher, &stats, &mut found, &rest)?;
            found.sort_by(|a, b| b.0.total_cmp(&a.0));
            found.truncate(wanted);
        }
        // Without time words every candidate holds one of the query's words
        // (on its text, a neighbour or its speaker); with them, a record
        // holding only time words is no match, as in the filtered search,
        // so the neighbours' postings are read too.
        let check_any = !cues.is_empty();
        let fields: &[Field] = if check_any {
            &[f.scoped_text, f.scoped_speaker, f.scoped_context]
        } else {
            &[f.scoped_text, f.scoped_speaker]
        };
        let word_terms: Vec<Term> = terms
            .iter()
            .flat_map(|t| fields.iter().map(|&field| term(field, t)))
            .collect();
        let matched = words_matched(searcher, &found, &word_terms, fields.len())?;
        // A one-word query has no first tier.
        let mut top: Vec<Ranked> = found
            .into_iter()
            .zip(matched)
            .filter(|(_, (_, any))| !check_any || *any)
            .map(|((score, addr), (own, _))| {
                (u8::from(terms.len() < 2 || own < 2), score, At::Index(addr))
            })
            .collect();
        if let Some(fresh) = fresh {
            let plan = Plan {
                query: q,
                weighted: &weighted,
                phrases: Vec::new(),
                period: when::period(&q.query, q.reference_time),
                words: terms
                    .iter()
                    .map(|t| {
                        (
                            [term(f.scoped_text, t), term(f.scoped_speaker, t)],
                            term(f.scoped_context, t),
                        )
                    })
                    .collect(),
            };
            let ranked = fresh.rank(&self.f, &plan, &stats)?;
            top.extend(ranked.into_iter().map(|(t, s, i)| (t, s, At::Fresh(i))));
        }
        top.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
        top.truncate(fetch);
        Ok(Some(top))
    }
}

/// The index's statistics, with the document frequencies of a query's
/// terms and the token totals of its fields read once: tantivy's weights
/// would look each up again in every segment, for every query they run.
struct Counted<'a> {
    base: &'a dyn Bm25StatisticsProvider,
    freqs: HashMap<Term, u64>,
    tokens: HashMap<Field, u64>,
    docs: u64,
}

impl<'a> Counted<'a> {
    fn new<const N: usize>(
        base: &'a dyn Bm25StatisticsProvider,
        weighted: &[(Term, f32)],
        fields: [Field; N],
    ) -> Result<Counted<'a>> {
        let mut freqs = HashMap::with_capacity(weighted.len());
        for (t, _) in weighted {
            if !freqs.contains_key(t) {
                freqs.insert(t.clone(), base.doc_freq(t).map_err(index_error)?);
            }
        }
        let mut tokens = HashMap::with_capacity(N);
        for field in fields {
            tokens.insert(field, base.total_num_tokens(field).map_err(index_error)?);
        }
        let docs = base.total_num_docs().map_err(index_error)?;
        Ok(Counted {
            base,
            freqs,
            tokens,
            docs,
        })
    }

    /// Documents holding `t` (every term of the query was counted).
    fn freq(&self, t: &Term) -> u64 {
        self.freqs.get(t).copied().unwrap_or(0)
    }
}

impl Bm25StatisticsProvider for Counted<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        match self.tokens.get(&field) {
            Some(&n) => Ok(n),
            None => self.base.total_num_tokens(field),
        }
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        match self.freqs.get(term) {
            Some(&n) => Ok(n),
            None => self.base.doc_freq(term),
        }
    }
}

/// Splits the scoring terms into those that find the candidates (the
/// rarest, while their postings stay within `limit`; always at least one)
/// and the rest; a term no record holds is in neither.
#[allow(clippy::type_complexity)]
fn by_postings(
    stats: &Counted<'_>,
    weighted: Vec<(Term, f32)>,
    limit: u64,
) -> (Vec<(Term, f32)>, Vec<(Term, f32)>) {
    let mut counted: Vec<(u64, Term, f32)> = weighted
        .into_iter()
        .map(|(t, boost)| (stats.freq(&t), t, boost))
        .filter(|(n, _, _)| *n > 0)
        .collect();
    counted.sort_by_key(|(n, _, _)| *n);
    let (mut leading, mut rest) = (Vec::new(), Vec::new());
    let mut total = 0u64;
    for (n, t, boost) in counted {
        total += n;
        if leading.is_empty() || total <= limit {
            leading.push((t, boost));
        } else {
            rest.push((t, boost));
        }
    }
    (leading, rest)
}

/// Adds to each candidate's score what `rest` scores on it, as the term
/// queries would (BM25 over the whole index's statistics, boosted).
fn add_scores(
    searcher: &Searcher,
    stats: &Counted<'_>,
    found: &mut [(f32, DocAddress)],
    rest: &[(Term, f32)],
) -> Result<()> {
    let weights = rest
        .iter()
        .map(|(t, boost)| {
            Ok(Bm25Weight::for_terms(stats, std::slice::from_ref(t))
                .map_err(index_error)?
                .boost_by(*boost))
        })
        .collect::<Result<Vec<_>>>()?;
    let terms: Vec<Term> = rest.iter().map(|(t, _)| t.clone()).collect();
    let mut added = vec![0.0f32; found.len()];
    let mut norms: Option<(u32, Vec<FieldNormReader>)> = None;
    seek_postings(
        searcher,
        found,
        &terms,
        IndexRecordOption::WithFreqs,
        |i, k, postings| {
            let segment = found[i].1.segment_ord;
            if norms.as_ref().is_none_or(|(s, _)| *s != segment) {
                let reader = searcher.segment_reader(segment);
                let readers = terms
                    .iter()
                    .map(|t| {
                        Ok(reader
                            .fieldnorms_readers()
                            .get_field(t.field())
                            .map_err(index_error)?
                            .unwrap_or_else(|| FieldNormReader::constant(reader.max_doc(), 1)))
                    })
                    .collect::<Result<Vec<_>>>()?;
                norms = Some((segment, readers));
            }
            let (_, readers) = norms.as_ref().expect("set above");
            let norm = readers[k].fieldnorm_id(found[i].1.doc_id);
            added[i] += weights[k].score(norm, postings.term_freq());
            Ok(())
        },
    )?;
    for (c, a) in found.iter_mut().zip(added) {
        c.0 += a;
    }
    Ok(())
}

/// Calls `visit(candidate, term, postings)` for each candidate of `found`
/// that holds each of `terms`, the postings positioned on it. Postings are
/// read by seeking, candidates in doc order, segment by segment.
fn seek_postings(
    searcher: &Searcher,
    found: &[(f32, DocAddress)],
    terms: &[Term],
    option: IndexRecordOption,
    mut visit: impl FnMut(usize, usize, &SegmentPostings) -> Result<()>,
) -> Result<()> {
    let mut order: Vec<usize> = (0..found.len()).collect();
    order.sort_by_key(|&i| found[i].1);
    let mut start = 0;
    while start < order.len() {
        let segment = found[order[start]].1.segment_ord;
        let end = order[start..]
            .iter()
            .position(|&i| found[i].1.segment_ord != segment)
            .map_or(order.len(), |n| start + n);
        let reader = searcher.segment_reader(segment);
        for (k, term) in terms.iter().enumerate() {
            let index = reader.inverted_index(term.field()).map_err(index_error)?;
            let Some(mut postings) = index
                .read_postings(term, option)
                .map_err(|e| index_error(e.into()))?
            else {
                continue;
            };
            for &i in &order[start..end] {
                let doc = found[i].1.doc_id;
                if postings.doc() < doc {
                    postings.seek(doc);
                }
                if postings.doc() == TERMINATED {
                    break;
                }
                if postings.doc() == doc {
                    visit(i, k, &postings)?;
                }
            }
        }
        start = end;
    }
    Ok(())
}

/// For each candidate, how many of the query's words it holds in its own
/// text or speaker, and whether it holds any of `word_terms`. `word_terms`
/// holds `per_word` terms for each word in turn, its text and speaker
/// terms first (then its neighbours'); the candidates' postings are read
/// by seeking, in doc order.
fn words_matched(
    searcher: &Searcher,
    found: &[(f32, DocAddress)],
    word_terms: &[Term],
    per_word: usize,
) -> Result<Vec<(u32, bool)>> {
    // Bit per query word (at most 64, `MAX_TERMS`): own, and any field.
    let mut own = vec![0u64; found.len()];
    let mut any = vec![false; found.len()];
    seek_postings(
        searcher,
        found,
        word_terms,
        IndexRecordOption::Basic,
        |i, k, _| {
            any[i] = true;
            if k % per_word < 2 {
                own[i] |= 1u64 << ((k / per_word) % 64);
            }
            Ok(())
        },
    )?;
    Ok(own.into_iter().map(u64::count_ones).zip(any).collect())
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::{Role, Session, SessionSettings, Turn};
    use crate::search::{Hit, Kind};

    const T0: i64 = 1_700_000_000 * 1_000_000_000;

    /// A turn of `speaker`, turns ten days apart from [`T0`].
    fn turn(seq: u64, speaker: &str, content: &str) -> Turn {
        Turn {
            seq,
            role: Role::User,
            speaker: speaker.to_owned(),
            content: content.to_owned(),
            client_time: None,
            // Ten days apart: a month named in a query holds some of them.
            server_time: T0 + i64::try_from(seq).unwrap_or(0) * 864_000_000_000_000,
            tool_call: None,
            metadata: BTreeMap::new(),
            token_count: 1,
        }
    }

    /// Adds `(speaker, text)` turns `1..` of one session (namespace,
    /// subject, session id) to `sink`, each with its neighbours.
    pub(in crate::search) fn add_said(
        idx: &SearchIndex,
        sink: &mut crate::search::changes::Sink<'_>,
        (ns, subject, session): (&str, &str, &str),
        said: &[(&str, &str)],
    ) {
        let mut s = Session::new(ns, session, SessionSettings::default(), T0);
        s.subject_id = subject.to_owned();
        let turns: Vec<Turn> = said
            .iter()
            .enumerate()
            .map(|(i, (speaker, t))| turn(i as u64 + 1, speaker, t))
            .collect();
        for (i, t) in turns.iter().enumerate() {
            let before = i.checked_sub(1).map(|j| &turns[j]);
            idx.add_turn(sink, &s, t, [before, turns.get(i + 1)])
                .expect("indexed");
        }
    }

    /// Indexes `texts` as one session of `subject` in `ns`, said by the
    /// subject.
    fn index(idx: &SearchIndex, ns: &str, subject: &str, session: &str, texts: &[&str]) {
        let said: Vec<(&str, &str)> = texts.iter().map(|t| (subject, *t)).collect();
        index_said(idx, ns, subject, session, &said);
    }

    /// Indexes `(speaker, text)` turns as one session of `subject` in `ns`.
    fn index_said(
        idx: &SearchIndex,
        ns: &str,
        subject: &str,
        session: &str,
        said: &[(&str, &str)],
    ) {
        let mut w = idx.writer();
        let mut sink = crate::search::changes::Sink::Writer(&w);
        add_said(idx, &mut sink, (ns, subject, session), said);
        idx.commit(&mut w).expect("committed");
        // A new index waits for its rebuild; this one is complete.
        idx.ready.store(true, std::sync::atomic::Ordering::Release);
    }

    fn query(ns: &str, subject: &str, text: &str, phrases: bool) -> SearchQuery {
        SearchQuery {
            namespace: ns.to_owned(),
            subject_id: Some(subject.to_owned()),
            session_id: None,
            query: text.to_owned(),
            kinds: Vec::new(),
            limit: 5,
            reference_time: None,
            snippets: false,
            phrases,
        }
    }

    fn hits(idx: &SearchIndex, q: &SearchQuery) -> Vec<(String, u64)> {
        idx.search(q, &mut |_: &Hit| Ok(true))
            .expect("searched")
            .into_iter()
            .filter(|h| h.kind == Kind::Turn)
            .map(|h| (h.session_id, h.seq))
            .collect()
    }

    const TEXTS: &[&str] = &[
        "Good morning!",
        "We adopted a beagle puppy called Biscuit last spring.",
        "Biscuit chewed my running shoes again.",
        "The vet said the puppy needs a booster shot in June.",
        "I ran ten kilometres along the river this morning.",
        "Running with a beagle is harder than it sounds.",
        "My sister visits in June with her two cats.",
    ];

    #[test]
    fn a_hit_names_its_record_and_later_commits_are_seen() {
        let (idx, _) = SearchIndex::open(None).expect("index");
        index(&idx, "ns", "ann", "s1", TEXTS);
        let found = idx
            .search(
                &query("ns", "ann", "beagle puppy Biscuit", false),
                &mut |_| Ok(true),
            )
            .expect("searched");
        let first = found.first().expect("a hit");
        assert_eq!(
            (
                first.kind,
                first.subject_id.as_str(),
                first.session_id.as_str()
            ),
            (Kind::Turn, "ann", "s1")
        );
        assert_eq!((first.seq, first.role), (2, Some(Role::User)));
        assert_eq!(first.time_seconds, 1_700_000_000 + 2 * 864_000);
        // A second commit is a new searcher: its columns are read afresh.
        index(
            &idx,
            "ns",
            "ann",
            "s2",
            &["We paddled a kayak", "The kayak tipped over"],
        );
        assert_eq!(
            hits(&idx, &query("ns", "ann", "kayak tipped", false)),
            [("s2".to_owned(), 2), ("s2".to_owned(), 1)]
        );
        assert_eq!(
            hits(&idx, &query("ns", "ann", "Biscuit chewed", false))[0],
            ("s1".to_owned(), 3)
        );
    }

    #[test]
    fn one_subject_ranks_as_the_filtered_search_does() {
        let (idx, _) = SearchIndex::open(None).expect("index");
        index(&idx, "ns", "ann", "s1", TEXTS);
        for text in [
            "what is the beagle puppy called",
            "when is the vet booster shot",
            "running shoes",
            "sister cats",
            "what did the vet say about the puppy in December 2023",
            "when did Biscuit chew the shoes",
            "when did ann go running",
        ] {
            let pruned = query("ns", "ann", text, false);
            let searcher = idx.reader.searcher();
            let terms = idx.terms(text).expect("terms");
            let named = idx
                .speaker_words(&searcher, &pruned, &terms)
                .expect("names");
            assert!(
                idx.pruned(&searcher, None, &pruned, (&terms, &named, &[]), 10)
                    .expect("ran")
                    .is_some(),
                "{text}: takes the pruned path"
            );
            // Phrases off in both: the filtered search is forced by
            // naming the session.
            let mut filtered = pruned.clone();
            filtered.session_id = Some("s1".into());
            assert!(idx
                .pruned(&searcher, None, &filtered, (&terms, &named, &[]), 10)
                .expect("ran")
                .is_none());
            let (a, b) = (hits(&idx, &pruned), hits(&idx, &filtered));
            assert!(!a.is_empty(), "{text}: found");
            assert_eq!(a, b, "{text}");
        }
    }

    #[test]
    fn words_left_out_of_the_first_stage_still_score_its_candidates() {
        // "coffee" is in every turn, "espresso" in two: with the first
        // stage read from the rarest word alone, both espresso turns are
        // found and the one that also says coffee twice comes first, with
        // the score the whole query gives it.
        let mut said: Vec<String> = (0..30).map(|i| format!("coffee number {i}")).collect();
        said.push("An espresso please.".into());
        said.push("Espresso, then coffee, more coffee.".into());
        let texts: Vec<&str> = said.iter().map(String::as_str).collect();
        let scored = |leading: u64| {
            let (mut idx, _) = SearchIndex::open(None).expect("index");
            idx.leading_postings = leading;
            index(&idx, "ns", "ann", "s1", &texts);
            let q = query("ns", "ann", "espresso coffee", false);
            idx.search(&q, &mut |_: &Hit| Ok(true))
                .expect("searched")
                .into_iter()
                .map(|h| (h.seq, h.score))
                .collect::<Vec<_>>()
        };
        let (split, whole) = (scored(1), scored(LEADING_POSTINGS));
        assert_eq!(
            split.iter().map(|h| h.0).take(2).collect::<Vec<_>>(),
            [32, 31]
        );
        for (a, b) in split.iter().take(2).zip(&whole) {
            assert_eq!(a.0, b.0);
            assert!((a.1 - b.1).abs() < 1e-4, "{a:?} vs {b:?}");
        }
        // A turn holding only the common word is no candidate then.
        assert!(split.iter().all(|h| h.0 >= 31), "{split:?}");
        assert!(whole.iter().any(|h| h.0 < 31), "{whole:?}");
    }

    #[test]
    fn a_subject_sees_only_its_own_records() {
        let (idx, _) = SearchIndex::open(None).expect("index");
        index(&idx, "ns", "ann", "a1", TEXTS);
        index(&idx, "ns", "bob", "b1", &["Rocket the beagle hates baths."]);
        index(&idx, "other", "ann", "o1", &["A beagle called Pepper."]);
        let found = hits(&idx, &query("ns", "bob", "beagle called", false));
        assert_eq!(found, vec![("b1".to_owned(), 1)]);
        let found = hits(&idx, &query("other", "ann", "beagle called", false));
        assert_eq!(found, vec![("o1".to_owned(), 1)]);
        let found = hits(&idx, &query("ns", "ann", "beagle called", false));
        assert!(found.iter().all(|(s, _)| s == "a1") && found.len() >= 2);
        assert!(hits(&idx, &query("ns", "carol", "beagle", false)).is_empty());
    }

    #[test]
    fn a_named_speaker_is_found_by_what_they_said() {
        let (idx, _) = SearchIndex::open(None).expect("index");
        let said = [
            ("tom", "Hi Kate! How are you doing today Kate?"),
            (
                "kate",
                "Good! I started skiing ten years ago, still love it.",
            ),
            ("tom", "Kate, when did you start skiing, Kate?"),
            ("kate", "Tom, you should come skiing with me."),
            ("kate", "Sure."),
            ("kate", "Sounds good."),
            ("kate", "Yes, see you then."),
            ("kate", "Bye now."),
        ];
        index_said(&idx, "ns", "pair", "s1", &said);
        let q = query("ns", "pair", "Did Kate start skiing?", false);
        let found = hits(&idx, &q);
        assert_eq!(found.first(), Some(&("s1".to_owned(), 2)), "{found:?}");
        // With phrases, the question that mirrors the query's words may
        // rank first; the answer is next.
        let q = query("ns", "pair", "Did Kate start skiing?", true);
        assert!(hits(&idx, &q)[..2].contains(&("s1".to_owned(), 2)));
        // A name still finds the turns that hold it, below what was said.
        let q = query("ns", "pair", "kate", false);
        assert_eq!(hits(&idx, &q).len(), 5);
    }

    #[test]
    fn an_answer_outranks_the_question_that_asks_it() {
        let (idx, _) = SearchIndex::open(None).expect("index");
        let said = [
            ("tom", "Any good tv lately? What tv show are you watching?"),
            ("kate", "I started watching Casa de Papel."),
            ("tom", "Nice, I love a heist."),
            ("kate", "It's about a heist indeed."),
        ];
        index_said(&idx, "ns", "pair", "s1", &said);
        for phrases in [false, true] {
            let q = query("ns", "pair", "What TV show was Kate watching?", phrases);
            let found = hits(&idx, &q);
            assert_eq!(found.first(), Some(&("s1".to_owned(), 2)), "{found:?}");
            assert!(found.contains(&("s1".to_owned(), 1)), "still found");
        }
    }
}
