//! Retrieval for a context bundle: what bears on the request, from this
//! session's turns that the bundle does not already show, the subject's
//! other sessions (their turns and episodes) and its current facts. The
//! search index proposes; the store confirms every proposal (a deleted
//! session or a superseded fact never comes back, whatever the index lag)
//! and supplies the neighbour that completes a turn's question/answer
//! pair.
//!
//! The request is the bundle's `query`; without one nothing is retrieved.
//! (Memory retrieved for the newest user turn would be a new pick at every
//! append, after the log, so a prompt cache could never reuse it: an agent
//! that wants it passes that turn as the query.)

use std::collections::{HashMap, HashSet};

use crate::bundle::{BundleRequest, Recalled, RecalledItem};
use crate::error::{Error, Result};
use crate::model::{Session, Turn};
use crate::search::{turn_time, Hit, Kind, SearchIndex, SearchQuery};
use crate::store::Store;

/// Fewest and most pieces of memory asked of the index.
const MIN_HITS: usize = 8;
const MAX_HITS: usize = 60;
/// Budget tokens per piece asked for (a turn pair takes about this much).
const TOKENS_PER_HIT: usize = 50;

/// What a bundle already shows of its own session.
pub(super) struct Shown<'a> {
    /// Seqs of this session that the bundle holds (recent and earlier).
    pub seqs: HashSet<u64>,
    /// Leave this session's turns out altogether (a transcript bundle
    /// shows all of them).
    pub whole_session: bool,
    /// The newest turns (the newest gives the time a question is asked at).
    pub recent: &'a [Turn],
}

/// Whether a stored record may be shown: `NotFound` and damaged records
/// are not, other errors fail the bundle.
fn present<T>(r: Result<Option<T>>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(v),
        Err(Error::NotFound(_)) | Err(Error::DataLoss(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Retrieves memory for a bundle of `session`, best first.
pub(super) fn recall(
    store: &dyn Store,
    index: &SearchIndex,
    session: &Session,
    req: &BundleRequest,
    shown: &Shown<'_>,
) -> Result<Vec<Recalled>> {
    let text = req.query.clone();
    if !req.retrieves() || !index.is_ready() {
        return Ok(Vec::new());
    }
    let ns = &session.namespace;
    let own = &session.session_id;
    let subject = &session.subject_id;
    if subject.is_empty() && shown.whole_session {
        // Nothing outside the session, and the session is all shown.
        return Ok(Vec::new());
    }
    let limit = (req.budget_tokens as usize / TOKENS_PER_HIT).clamp(MIN_HITS, MAX_HITS);
    let q = SearchQuery {
        namespace: ns.clone(),
        subject_id: (!subject.is_empty()).then(|| subject.clone()),
        session_id: subject.is_empty().then(|| own.clone()),
        query: text,
        kinds: Vec::new(),
        limit,
        reference_time: shown.recent.last().map(turn_time),
        snippets: false,
        // Measured on the retrieval sets: answers in bundles are as many
        // or more without them, and the 100,000-turn p99 drops by a
        // quarter (docs/benchmarks.md).
        phrases: false,
    };
    // Sessions looked up once each: a deleted one is never shown.
    let mut sessions: HashMap<String, bool> = HashMap::new();
    let mut alive = |sid: &str| -> Result<bool> {
        if let Some(&a) = sessions.get(sid) {
            return Ok(a);
        }
        let a = present(store.get_session(ns, sid).map(Some))?.is_some();
        sessions.insert(sid.to_owned(), a);
        Ok(a)
    };
    let mut keep = |hit: &Hit| -> Result<bool> {
        Ok(match hit.kind {
            Kind::Turn => {
                let mine = hit.session_id == *own;
                !(mine && (shown.whole_session || shown.seqs.contains(&hit.seq)))
                    && alive(&hit.session_id)?
            }
            Kind::Episode => hit.session_id != *own && alive(&hit.session_id)?,
            Kind::Fact => true,
        })
    };
    let hits = index.search(&q, &mut keep)?;
    let mut out = Vec::new();
    // Turns already retrieved (as a hit or a neighbour).
    let mut taken: HashSet<(String, u64)> = HashSet::new();
    for hit in hits {
        let item = match hit.kind {
            Kind::Turn => {
                if taken.contains(&(hit.session_id.clone(), hit.seq)) {
                    continue;
                }
                match pair(store, session, &hit, shown, &taken)? {
                    Some(turns) => {
                        taken.extend(turns.iter().map(|t| (hit.session_id.clone(), t.seq)));
                        RecalledItem::Turns {
                            session_id: hit.session_id.clone(),
                            hit_seq: hit.seq,
                            turns,
                        }
                    }
                    None => continue,
                }
            }
            Kind::Fact => match present(store.get_fact(ns, &hit.fact_id).map(Some))? {
                Some(f) if f.is_current() && f.subject_id == *subject => RecalledItem::Fact(f),
                _ => continue,
            },
            Kind::Episode => match present(store.get_episode(ns, &hit.session_id))? {
                Some(e) => RecalledItem::Episode(e),
                None => continue,
            },
        };
        out.push(Recalled {
            rank: u32::try_from(out.len() + 1).unwrap_or(u32::MAX),
            item,
        });
    }
    Ok(out)
}

/// A hit turn and the neighbour completing its question/answer pair: the
/// answer after a question, else the turn it responds to. A neighbour the
/// bundle already shows, or already retrieved, is left out.
fn pair(
    store: &dyn Store,
    session: &Session,
    hit: &Hit,
    shown: &Shown<'_>,
    taken: &HashSet<(String, u64)>,
) -> Result<Option<Vec<Turn>>> {
    // One range read: a point read each is three descents of the tree.
    let turns = store.read_turns(
        &session.namespace,
        &hit.session_id,
        hit.seq.saturating_sub(1),
        hit.seq + 1,
        3,
    )?;
    let Some(t) = turns.iter().find(|t| t.seq == hit.seq) else {
        // Not stored (an unacknowledged append indexed before a crash).
        return Ok(None);
    };
    let asks = t.content.contains('?');
    let want = if asks { hit.seq + 1 } else { hit.seq - 1 };
    let mine = hit.session_id == session.session_id;
    let usable = |n: &&Turn| {
        n.seq == want
            && !(mine && shown.seqs.contains(&n.seq))
            && !taken.contains(&(hit.session_id.clone(), n.seq))
    };
    let mut out: Vec<Turn> = turns
        .iter()
        .filter(|n| n.seq == hit.seq || usable(n))
        .cloned()
        .collect();
    out.sort_by_key(|t| t.seq);
    Ok(Some(out))
}
