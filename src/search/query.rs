//! Running a search: the query's words matched on a record's own text, on
//! the turn before it and on its speaker, word pairs matched as phrases,
//! dates the query names matched against when a record happened, scope
//! enforced as filters, and every candidate checked by the caller before
//! it is returned.

use std::collections::HashSet;
use std::ops::Bound;

use tantivy::collector::TopDocs;
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query,
    RangeQuery, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::snippet::SnippetGenerator;
use tantivy::{DocAddress, Searcher, TantivyDocument, Term};

use super::fresh::{Fresh, Plan, WithFresh, PHRASE_SLOP};
use super::schema::{session_key, weighted_terms, ASKING_WEIGHT, PHRASE_BOOST, WHEN_BOOST};
use super::scoped::{scope, At, Ranked};
use super::{index_error, when, Hit, Kind, SearchIndex, SearchQuery};
use crate::error::{Error, Result};

/// Most distinct query terms used (the rest are ignored).
const MAX_TERMS: usize = 64;
/// Longest snippet, in characters.
const SNIPPET_CHARS: usize = 200;

impl SearchIndex {
    fn filter(&self, field: Field, value: &str) -> (Occur, Box<dyn Query>) {
        let q = TermQuery::new(
            Term::from_field_text(field, value),
            IndexRecordOption::Basic,
        );
        // Filters must not move scores.
        (
            Occur::Must,
            Box::new(ConstScoreQuery::new(Box::new(q), 0.0)),
        )
    }

    /// The query's analyzed words, distinct, in order, at most
    /// [`MAX_TERMS`].
    pub(super) fn terms(&self, text: &str) -> Result<Vec<String>> {
        let mut tokenizer = self
            .index
            .tokenizer_for_field(self.f.text)
            .map_err(index_error)?;
        let mut stream = tokenizer.token_stream(text);
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        while stream.advance() {
            let t = stream.token().text.clone();
            if out.len() < MAX_TERMS && seen.insert(t.clone()) {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// For each of the query's words, whether it names a speaker of the
    /// records searched (the subject's when one is given, else any's).
    pub(super) fn speaker_words(
        &self,
        stats: &dyn Bm25StatisticsProvider,
        q: &SearchQuery,
        terms: &[String],
    ) -> Result<Vec<bool>> {
        let prefix = q.subject_id.as_deref().map(|s| scope(&q.namespace, s));
        let term = |t: &str| match &prefix {
            Some(p) => Term::from_field_text(self.f.scoped_speaker, &format!("{p}{t}")),
            None => Term::from_field_text(self.f.speaker, t),
        };
        terms
            .iter()
            .map(|t| Ok(stats.doc_freq(&term(t)).map_err(index_error)? > 0))
            .collect()
    }

    /// The query's words on the record's own text: what snippets are cut
    /// around.
    fn text_query(&self, terms: &[String]) -> BooleanQuery {
        let words: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(self.f.text, t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect();
        BooleanQuery::new(words)
    }

    /// The scoring part of a query: what a record must match at least one
    /// word of.
    fn scoring(
        &self,
        q: &SearchQuery,
        terms: &[String],
        named: &[bool],
        cues: &[String],
    ) -> BooleanQuery {
        let f = self.f;
        let mut any: Vec<(Occur, Box<dyn Query>)> = weighted_terms(
            [f.text, f.context, f.speaker],
            (terms, named, cues),
            Term::from_field_text,
        )
        .into_iter()
        .map(|(t, boost)| {
            let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
            (
                Occur::Should,
                Box::new(BoostQuery::new(q, boost)) as Box<dyn Query>,
            )
        })
        .collect();
        for pair in terms.windows(2).filter(|_| q.phrases) {
            let mut phrase = PhraseQuery::new(
                pair.iter()
                    .map(|t| Term::from_field_text(f.text, t))
                    .collect(),
            );
            phrase.set_slop(PHRASE_SLOP);
            any.push((
                Occur::Should,
                Box::new(BoostQuery::new(Box::new(phrase), PHRASE_BOOST)),
            ));
        }
        if let Some((from, to)) = when::period(&q.query, q.reference_time) {
            let range = RangeQuery::new(
                Bound::Included(Term::from_field_u64(f.time, from)),
                Bound::Excluded(Term::from_field_u64(f.time, to)),
            );
            any.push((
                Occur::Should,
                Box::new(ConstScoreQuery::new(Box::new(range), WHEN_BOOST)),
            ));
        }
        BooleanQuery::new(any)
    }

    /// The whole query: scoring, at least `least` of the query's words
    /// matched (on the text, a neighbour or the speaker), and the scope.
    fn scoped(
        &self,
        q: &SearchQuery,
        scoring: &BooleanQuery,
        terms: &[String],
        least: usize,
    ) -> BooleanQuery {
        let f = self.f;
        let words: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                // Two words must be the record's own (its text or speaker);
                // one may be a neighbour's.
                let fields: &[Field] = if least > 1 {
                    &[f.text, f.speaker]
                } else {
                    &[f.text, f.context, f.speaker]
                };
                let any: Vec<(Occur, Box<dyn Query>)> = fields
                    .iter()
                    .map(|&field| {
                        let q: Box<dyn Query> = Box::new(TermQuery::new(
                            Term::from_field_text(field, t),
                            IndexRecordOption::Basic,
                        ));
                        (Occur::Should, q)
                    })
                    .collect();
                let q: Box<dyn Query> = Box::new(BooleanQuery::new(any));
                (Occur::Should, q)
            })
            .collect();
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![
            (Occur::Must, Box::new(scoring.clone())),
            (
                Occur::Must,
                Box::new(ConstScoreQuery::new(
                    Box::new(BooleanQuery::with_minimum_required_clauses(words, least)),
                    0.0,
                )),
            ),
        ];
        clauses.push(self.filter(f.ns, &q.namespace));
        if let Some(s) = &q.subject_id {
            clauses.push(self.filter(f.subject, s));
        }
        if let Some(s) = &q.session_id {
            clauses.push(self.filter(f.session_key, &session_key(&q.namespace, s)));
        }
        if !q.kinds.is_empty() && q.kinds.len() < 3 {
            let kinds: Vec<(Occur, Box<dyn Query>)> = q
                .kinds
                .iter()
                .map(|k| {
                    let t: Box<dyn Query> = Box::new(TermQuery::new(
                        Term::from_field_text(f.kind, k.tag()),
                        IndexRecordOption::Basic,
                    ));
                    (Occur::Should, t)
                })
                .collect();
            clauses.push((
                Occur::Must,
                Box::new(ConstScoreQuery::new(
                    Box::new(BooleanQuery::new(kinds)),
                    0.0,
                )),
            ));
        }
        BooleanQuery::new(clauses)
    }

    /// The top candidates with scope filters: records that share two of
    /// the query's words first (a greeting that only names the person
    /// asked about is not an answer), then those that share one.
    fn tiered(
        &self,
        searcher: &Searcher,
        fresh: Option<&Fresh>,
        q: &SearchQuery,
        (terms, named, cues): (&[String], &[bool], &[String]),
        stats: &WithFresh<'_>,
        fetch: usize,
    ) -> Result<Vec<Ranked>> {
        let scoring = self.scoring(q, terms, named, cues);
        let mut top = Vec::new();
        let mut seen = HashSet::new();
        for (tier, least) in [(0u8, 2), (1, 1)] {
            if top.len() >= fetch || least > terms.len() {
                continue;
            }
            let query = self.scoped(q, &scoring, terms, least);
            let found = searcher
                .search_with_statistics_provider(&query, &TopDocs::with_limit(fetch), stats)
                .map_err(index_error)?;
            for (score, addr) in found {
                if top.len() < fetch && seen.insert(addr) {
                    top.push((tier, score, At::Index(addr)));
                }
            }
        }
        if let Some(fresh) = fresh {
            let f = self.f;
            let term = |field: Field, t: &str| Term::from_field_text(field, t);
            let weighted =
                weighted_terms([f.text, f.context, f.speaker], (terms, named, cues), term);
            let plan = Plan {
                query: q,
                weighted: &weighted,
                phrases: terms
                    .windows(2)
                    .filter(|_| q.phrases)
                    .map(|p| [term(f.text, &p[0]), term(f.text, &p[1])])
                    .collect(),
                period: when::period(&q.query, q.reference_time),
                words: terms
                    .iter()
                    .map(|t| ([term(f.text, t), term(f.speaker, t)], term(f.context, t)))
                    .collect(),
            };
            let ranked = fresh.rank(&self.f, &plan, stats)?;
            top.extend(ranked.into_iter().map(|(t, s, i)| (t, s, At::Fresh(i))));
        }
        Ok(top)
    }

    /// Runs a search. Each candidate hit is shown to `keep`, which checks it
    /// against the store: what was deleted is dropped even if the index has
    /// not caught up.
    pub fn search(
        &self,
        q: &SearchQuery,
        keep: &mut dyn FnMut(&Hit) -> Result<bool>,
    ) -> Result<Vec<Hit>> {
        if !self.is_ready() {
            return Err(Error::Unavailable(
                "the search index is being rebuilt from the store; retry shortly".into(),
            ));
        }
        let f = self.f;
        let terms = self.terms(&q.query)?;
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let view = self.view();
        let (searcher, fresh) = (&view.disk, view.fresh.as_deref());
        let stats = WithFresh {
            index: searcher,
            fresh,
            f: &self.f,
        };
        // Room for hits the store check drops.
        let fetch = q.limit * 2 + 10;
        let named = self.speaker_words(&stats, q, &terms)?;
        let cues = self.terms(when::answer_cues(&q.query))?;
        let top = match self.pruned(searcher, fresh, q, (&terms, &named, &cues), fetch)? {
            Some(top) => top,
            None => self.tiered(searcher, fresh, q, (&terms, &named, &cues), &stats, fetch)?,
        };
        let snippets = if q.snippets {
            let mut g = SnippetGenerator::create(searcher, &self.text_query(&terms), f.text)
                .map_err(index_error)?;
            g.set_max_num_chars(SNIPPET_CHARS);
            Some(g)
        } else {
            None
        };
        // Times, question marks and identities from their columns (a
        // document is read only for its snippet): a turn that only asks
        // weighs less, and recency only breaks ties.
        let mut columns = self.columns.columns(searcher)?;
        let mut found: Vec<(u8, f32, u64, At)> = top
            .into_iter()
            .map(|(tier, score, at)| {
                let (asks, time) = match (at, fresh) {
                    (At::Fresh(i), Some(b)) => (b.asks(i), b.time(i)),
                    (At::Index(addr), _) => (columns.asks(addr), columns.time(addr)),
                    (At::Fresh(_), None) => (false, 0),
                };
                let score = if asks { score * ASKING_WEIGHT } else { score };
                (tier, score, time, at)
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)).then(b.2.cmp(&a.2)));
        let mut hits = Vec::new();
        // Turns already shown, directly or as an extracted fact.
        let mut shown: HashSet<(String, u64)> = HashSet::new();
        for (_, score, time, at) in found {
            if hits.len() == q.limit {
                break;
            }
            let mut hit = match (at, fresh) {
                (At::Fresh(i), Some(b)) => match b.hit(i, score) {
                    Some(hit) => hit,
                    None => continue,
                },
                (At::Fresh(_), None) => continue,
                (At::Index(addr), _) => {
                    let Some(hit) = columns.hit(addr, score, time)? else {
                        continue;
                    };
                    // A document the fresh batches replace or delete (a
                    // fact is in no session's key).
                    if let Some(b) = fresh {
                        let session = match hit.kind {
                            Kind::Fact => String::new(),
                            _ => session_key(&q.namespace, &hit.session_id),
                        };
                        if b.hides(&columns.key(addr)?, &session) {
                            continue;
                        }
                    }
                    hit
                }
            };
            let turn = (hit.kind != Kind::Episode && hit.seq > 0)
                .then(|| (hit.session_id.clone(), hit.seq));
            if turn.as_ref().is_some_and(|t| shown.contains(t)) {
                continue;
            }
            if keep(&hit)? {
                if let Some(g) = &snippets {
                    hit.snippet = match (at, fresh) {
                        (At::Fresh(i), Some(b)) => snippet_of(g, b.text(i)),
                        _ => match at {
                            At::Index(addr) => snippet(searcher, g, f.text, addr)?,
                            At::Fresh(_) => String::new(),
                        },
                    };
                }
                shown.extend(turn);
                hits.push(hit);
            }
        }
        Ok(hits)
    }
}

/// The snippet of the document at `addr`.
fn snippet(
    searcher: &Searcher,
    g: &SnippetGenerator,
    text: Field,
    addr: DocAddress,
) -> Result<String> {
    let doc: TantivyDocument = searcher.doc(addr).map_err(index_error)?;
    let whole = doc
        .get_first(text)
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    Ok(snippet_of(g, whole))
}

/// The text around the query's words in `text`, or its beginning when
/// none is found in it.
fn snippet_of(g: &SnippetGenerator, text: &str) -> String {
    let snippet = g.snippet(text).fragment().to_owned();
    if !snippet.is_empty() {
        return snippet;
    }
    text.chars().take(SNIPPET_CHARS).collect()
}
