//! What a context bundle is packed from: the domain reads it, `bundle`
//! packs it. The session is read once; the turns since the fold are read
//! in chunks (without re-reading the session), within a window that moves
//! in fixed steps when the summary lags; the subject's newest facts are read newest first
//! without scanning older ones; memory that bears on the request is
//! retrieved (`recall`). A session whose whole transcript fits the budget
//! is read whole and given as its transcript.

use std::collections::HashSet;

use super::consistency::{ReadAfter, ReadScope};
use super::recall::{recall, Shown};
use super::{validate, Memory};
use crate::bundle::{self, Bundle, BundleRequest, Inputs, SubjectMemory, MIN_TURN_COST};
use crate::error::{Error, Result};
use crate::model::{ActionStatus, Role, Session, UnixNanos};
use crate::store::Store;

/// Turns read per store call while walking back.
const READ_CHUNK: u64 = 64;
/// What a bundle considers of the subject's memory beyond this session,
/// the newest first: about twice what the section's share of the budget
/// (a tenth) can hold, so the choice by relevance has room, and no more
/// (what is read and measured here is what a bundle of a long-lived
/// subject costs beyond a new one's). What bears on the request is
/// retrieved from all of it, whatever its age (`recall`).
///
/// Carried actions and facts: a line is about 20 tokens.
const TOKENS_PER_ITEM_CONSIDERED: usize = 100;
const MIN_CARRIED: usize = 10;
const MAX_CARRIED: usize = 50;
const MIN_FACTS: usize = 20;
const MAX_FACTS: usize = 200;
/// Fact versions examined per fact wanted (superseded ones are skipped).
const FACT_SCAN_PER_FACT: usize = 20;
/// Past episodes: a line is about 100 tokens.
const TOKENS_PER_EPISODE_CONSIDERED: usize = 400;
const MIN_EPISODES: usize = 3;
const MAX_EPISODES: usize = 20;
/// Tokens a transcript line costs beyond its turn's text, about (the
/// speaker's name and a colon).
const TRANSCRIPT_TURN_COST: u64 = 6;
/// Most of the budget a whole transcript may take when the request has a
/// query: the rest is for what is retrieved.
const TRANSCRIPT_SHARE_WITH_QUERY: f64 = 0.3;
/// Tokens of a transcript's one-line header, about.
const TRANSCRIPT_HEADER_COST: u64 = 40;

impl Memory {
    /// Builds a context bundle of a session (see [`crate::bundle`]); its
    /// retrieval sees every write to the session's subject (or, without
    /// one, to the session) this process acknowledged before.
    pub async fn get_context_bundle(
        &self,
        ns: &str,
        session_id: &str,
        req: BundleRequest,
    ) -> Result<Bundle> {
        self.get_context_bundle_after(ns, session_id, req, ReadAfter::OwnWrites)
            .await
    }

    /// [`Memory::get_context_bundle`], its retrieval seeing what `after`
    /// names.
    pub async fn get_context_bundle_after(
        &self,
        ns: &str,
        session_id: &str,
        req: BundleRequest,
        after: ReadAfter,
    ) -> Result<Bundle> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        validate::bundle_request(&req)?;
        // Only retrieval reads the index, and only what the session's
        // retrieval can see is waited for: its subject's memory, or the
        // session alone when it has no subject (one more read of the
        // session, and only while the index is behind).
        if req.retrieves() && !(after == ReadAfter::OwnWrites && self.clock.caught_up()) {
            let session = self.get_session(ns, session_id).await?;
            let scope = if session.subject_id.is_empty() {
                ReadScope::Session(ns, session_id)
            } else {
                ReadScope::Subject(ns, &session.subject_id)
            };
            self.await_index(after, scope).await?;
        }
        // The text and its structured copy must fit one response message.
        let mut req = req;
        req.max_bytes = self.limits.max_message_bytes / 3;
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let index = self.search.clone();
        // Reading, searching and tokenizing all block: one trip to the pool.
        self.blocking(move |st| {
            let mut inputs = gather(st, &ns, &id, &req)?;
            // The log's newest turns, about as far back as it can show:
            // retrieval looks elsewhere.
            let mut seqs: HashSet<u64> = HashSet::new();
            let mut cost = 0u64;
            for t in inputs.turns.iter().rev() {
                cost += u64::from(t.token_count) + MIN_TURN_COST;
                if cost > u64::from(req.budget_tokens) / 2 && !seqs.is_empty() {
                    break;
                }
                seqs.insert(t.seq);
            }
            let shown = Shown {
                seqs,
                whole_session: inputs.transcript,
                recent: &inputs.turns,
            };
            // Retrieval is an addition: when the index or a read behind it
            // fails, the bundle is served without it (and the failure
            // logged), as while the index is being rebuilt.
            inputs.recalled = match recall(st, &index, &inputs.session, &req, &shown) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(session = %inputs.session.session_id, error = %e, "bundle served without retrieved memory");
                    Vec::new()
                }
            };
            let Some(t) = st.retention_mark(&ns, &id)?.turns_removed() else {
                return Ok(bundle::build(inputs, &req));
            };
            // Said after everything else, so the stable prefix and the
            // log's offsets stay as they are; its tokens come out of the
            // budget.
            let note = t.note();
            let enc = req.encoding.unwrap_or(inputs.session.settings.encoding);
            // A few tokens of slack: the joined text is counted exactly
            // after, and BPE may merge across the line break.
            let cost = u32::try_from(crate::tokens::count(enc, &note) + 4).unwrap_or(u32::MAX);
            let mut narrower = req.clone();
            narrower.budget_tokens = req
                .budget_tokens
                .saturating_sub(cost)
                .max(crate::bundle::MIN_BUDGET);
            let mut b = bundle::build(inputs, &narrower);
            b.budget_tokens = req.budget_tokens;
            b.manifest.turns_removed = Some(t);
            let text = format!("{}\n{note}", b.rendered_text);
            let count = crate::tokens::count(b.encoding, &text);
            if let Ok(count) = u32::try_from(count) {
                if count <= b.budget_tokens {
                    b.rendered_text = text;
                    b.token_count = count;
                }
            }
            Ok(b)
        })
        .await
    }
}

/// Carried actions read per one kept, at most, so that weak items the
/// gate drops do not leave the section empty.
const CARRIED_SURPLUS: usize = 4;

/// The subject's memory beyond this session.
fn subject_memory(store: &dyn Store, session: &Session, budget: u32) -> Result<SubjectMemory> {
    let (ns, subject) = (&session.namespace, &session.subject_id);
    if subject.is_empty() {
        return Ok(SubjectMemory::default());
    }
    let mine = |sid: &str| sid == session.session_id;
    let budget = budget as usize;
    let items = budget / TOKENS_PER_ITEM_CONSIDERED;
    let max_carried = items.clamp(MIN_CARRIED, MAX_CARRIED);
    // Stored carried actions are judged again: summaries written before
    // the dialogue-act gate (and model-written ones) listed talk that
    // commits nobody, and a bundle must not spend its budget on it. Read
    // a bounded surplus so that weak items do not crowd real ones out.
    let mut carried = store.carried_actions(ns, subject, (max_carried + 1) * CARRIED_SURPLUS)?;
    carried.retain(|c| !mine(&c.action_ref.session_id) && super::episodes::is_carried(&c.action));
    carried.truncate(max_carried);
    // Newest first from the store; the bundle lists them oldest first.
    let wanted = items.clamp(MIN_FACTS, MAX_FACTS);
    let mut facts = store.recent_facts(ns, subject, wanted, wanted * FACT_SCAN_PER_FACT)?;
    facts.reverse();
    let max_episodes = (budget / TOKENS_PER_EPISODE_CONSIDERED).clamp(MIN_EPISODES, MAX_EPISODES);
    let mut episodes = store.list_episodes(ns, subject, None, max_episodes + 1)?;
    episodes.retain(|e| !mine(&e.session_id));
    episodes.truncate(max_episodes);
    // The days shown are when things were said (a client importing a
    // history sends the turns' own times), not when the daemon closed
    // their session: the client's time, else the daemon's; `None` for a
    // turn gone (retention, erasure). One read for all of them.
    let at: Vec<(&str, u64)> = carried
        .iter()
        .map(|c| (c.action_ref.session_id.as_str(), c.action_ref.action_seq))
        .chain(episodes.iter().map(|e| (e.session_id.as_str(), e.last_seq)))
        .collect();
    let mut said: Vec<Option<UnixNanos>> = store
        .turns_at(ns, &at)?
        .into_iter()
        .map(|t| t.map(|t| t.client_time.unwrap_or(t.server_time)))
        .collect();
    let episodes_last_said = said.split_off(carried.len());
    let carried_said = said;
    Ok(SubjectMemory {
        carried,
        carried_said,
        facts,
        episodes,
        episodes_last_said,
    })
}

/// Most turns since the fold a bundle reads: enough for any block of
/// its log, bounded when the summary lags far behind.
fn log_window(budget: u32) -> u64 {
    (u64::from(budget) / 16).clamp(MIN_LOG_WINDOW, MAX_LOG_WINDOW)
}
const MIN_LOG_WINDOW: u64 = 64;
const MAX_LOG_WINDOW: u64 = 1024;

/// The first turn a bundle's log reads: the turn after the fold, or, when
/// more turns than the window follow it, a start that moves by half a
/// window at a time (so it does not slide with every append).
fn log_origin(covered: u64, as_of: u64, window: u64) -> u64 {
    let span = as_of - covered;
    if span <= window {
        return covered + 1;
    }
    let step = (window / 2).max(1);
    covered + 1 + (span - window).div_ceil(step) * step
}

/// Most turns read back looking for the newest user turn.
const MAX_INTERACTION_SCAN: u64 = 256;

/// The newest user turn at or before `at` (and after `gone`, the turns
/// retention removed), reading back a few turns first and at most
/// `MAX_INTERACTION_SCAN`; `None` when there is none within reach.
fn user_turn_before(
    store: &dyn Store,
    ns: &str,
    session_id: &str,
    at: u64,
    gone: u64,
) -> Result<Option<u64>> {
    let (mut next, mut size) = (at, 8u64);
    while next > gone && at - next < MAX_INTERACTION_SCAN {
        let from = next.saturating_sub(size - 1).max(gone + 1);
        let chunk = store.read_turns(ns, session_id, from, next, size as usize)?;
        if chunk.is_empty() {
            return Err(Error::session_not_found(ns, session_id));
        }
        if let Some(t) = chunk.iter().rev().find(|t| t.role == Role::User) {
            return Ok(Some(t.seq));
        }
        next = from - 1;
        size = READ_CHUNK;
    }
    Ok(None)
}

/// The first turn of the log. It depends on the fold and the session's
/// length, never on the newest turn alone, so the log is append-only
/// between folds and window steps:
/// - from the fold's last interaction (the last USER turn it covers), so
///   the exchange the fold ended on stays in view, verbatim, right after a
///   fold and while turns follow it;
/// - once more turns than the window follow the fold, from a start that
///   moves by half a window at a time ([`log_origin`]);
/// - never after the newest interaction (the newest USER turn), which is
///   always in (a log starting at the fold's last USER turn holds it
///   already, so only a log without one looks for it).
fn log_start(
    store: &dyn Store,
    ns: &str,
    session_id: &str,
    (covered, as_of, gone): (u64, u64, u64),
    window: u64,
) -> Result<u64> {
    let origin = log_origin(covered, as_of, window);
    let fold_tail = if origin == covered + 1 && covered > gone {
        user_turn_before(store, ns, session_id, covered, gone)?
    } else {
        None
    };
    // Starting at a user turn, the log holds the newest interaction.
    if let Some(u) = fold_tail {
        return Ok(u.min(origin));
    }
    // Else the newest interaction, when a long run of turns without a
    // user turn ends the session.
    let newest = user_turn_before(store, ns, session_id, as_of, gone)?;
    Ok(newest
        .map_or(origin, |u| u.min(origin))
        .clamp(1, as_of.max(1)))
}

/// Reads what a bundle of `session_id` within `req`'s budget needs.
pub(super) fn gather(
    store: &dyn Store,
    ns: &str,
    session_id: &str,
    req: &BundleRequest,
) -> Result<Inputs> {
    // The session once, then the summary it names, by a point read: that
    // summary never covers a turn the session snapshot does not have (a
    // newer version written meanwhile is not read).
    let session = store.get_session(ns, session_id)?;
    let mut summary = match session.summary.version {
        0 => None,
        v => store.summary_at(ns, session_id, v)?,
    };
    // A summary covering a turn removed since is never shown: the bundle
    // goes without one until it is refolded (see `summary::is_rewound`).
    summary = summary.filter(|s| !super::summary::is_rewound(&session, s.covers_through_seq));
    // Statuses a client set since (UpdatePendingAction) win; the bundle
    // shows them as lines after the summary's (see `bundle::log`).
    let action_updates = match &summary {
        Some(_) => store.action_statuses(ns, session_id)?,
        None => Default::default(),
    };
    let memory = subject_memory(store, &session, req.budget_tokens)?;
    let as_of = session.last_seq();
    // Turns a retention policy removed: the log starts after them, and a
    // session missing its start is never shown as a whole transcript.
    let gone = store.retention_mark(ns, session_id)?.turns_through_seq;
    let covered = summary
        .as_ref()
        .map_or(0, |s| s.covers_through_seq.min(as_of));
    let budget = u64::from(req.budget_tokens);
    // The whole session fits: its transcript, read whole (its turns' tokens
    // are within the budget, so they are few).
    let same_encoding = req.encoding.is_none_or(|e| e == session.settings.encoding);
    // Open items go with it (about four bytes a token).
    let open_items: u64 = summary.as_ref().map_or(0, |s| {
        let actions = s
            .pending_actions
            .iter()
            .filter(|a| a.status != ActionStatus::Done)
            .map(|a| a.action.len() + 40);
        let questions = s.open_questions.iter().map(|q| q.question.len() + 20);
        actions.chain(questions).sum::<usize>() as u64 / 4
    });
    let whole =
        session.total_tokens + as_of * TRANSCRIPT_TURN_COST + TRANSCRIPT_HEADER_COST + open_items;
    // A request with a query asks for memory beyond this session: the
    // transcript is given whole only when it takes no more than the log
    // would (else the log from the last fold, which the packer cuts), so
    // the retrieved memory keeps its room.
    let room = if req.retrieves() {
        (budget as f64 * TRANSCRIPT_SHARE_WITH_QUERY) as u64
    } else {
        budget
    };
    let transcript = gone == 0 && same_encoding && as_of > 0 && whole <= room;
    let from = if transcript {
        1
    } else {
        log_start(
            store,
            ns,
            session_id,
            (covered, as_of, gone),
            log_window(req.budget_tokens),
        )?
        .max(gone + 1)
    };
    // The turns from there, oldest first.
    let mut turns = Vec::new();
    let mut next = from;
    while next <= as_of {
        let to = (next + READ_CHUNK - 1).min(as_of);
        let chunk = store.read_turns(ns, session_id, next, to, READ_CHUNK as usize)?;
        if chunk.len() as u64 != to - next + 1 {
            // Turns are gap-free: fewer than the session says means it
            // was deleted meanwhile.
            return Err(Error::session_not_found(ns, session_id));
        }
        turns.extend(chunk);
        next = to + 1;
    }
    let first_kept = (covered + 1).max(gone + 1);
    let unread = (from > first_kept && !transcript).then_some((first_kept, from - 1));
    Ok(Inputs {
        session,
        summary,
        action_updates,
        turns,
        unread,
        memory,
        recalled: Vec::new(),
        transcript,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_origin_moves_by_half_a_window() {
        assert_eq!(log_origin(10, 50, 64), 11);
        assert_eq!(log_origin(0, 64, 64), 1);
        assert_eq!(log_origin(0, 65, 64), 33);
        assert_eq!(log_origin(0, 96, 64), 33);
        assert_eq!(log_origin(0, 97, 64), 65);
        for as_of in 65..400 {
            let o = log_origin(0, as_of, 64);
            let kept = as_of - o + 1;
            assert!((33..=64).contains(&kept), "{as_of}: {o}");
        }
    }
}
