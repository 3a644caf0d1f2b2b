//! Turns: append (validate, count tokens, decide under the store's lock,
//! announce once durable) and list.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::append::{self, OwnerChange, PreparedAppend};
use super::page::PageToken;
use super::profile::Step;
use super::{validate, Event, Memory, Page};
use crate::error::{Error, Result};
use crate::model::{now_nanos, AppendOutcome, Encoding, NewTurn, Turn, TurnsRemoved};
use crate::store::Appended;
use crate::tokens;

/// An append request.
#[derive(Debug, Clone)]
pub struct AppendRequest {
    /// The turns, in order.
    pub turns: Vec<NewTurn>,
    /// Retry key; `None` = not idempotent.
    pub idempotency_key: Option<String>,
    /// Optimistic check on `next_seq`.
    pub expected_next_seq: Option<u64>,
    /// Fencing: must equal the session's lease epoch.
    pub lease_epoch: Option<u64>,
}

/// What removing a session's last turn did.
#[derive(Debug, Clone)]
pub struct RemovedTurn {
    /// The removed turn; `None` when the session had none.
    pub turn: Option<Turn>,
    /// The session afterwards.
    pub session: crate::model::Session,
    /// The summary version refolded because the previous one covered the
    /// removed turn.
    pub refolded: Option<u64>,
}

impl Memory {
    /// Appends turns; returns once they are durable on disk.
    pub async fn append_turns(
        &self,
        ns: &str,
        session_id: &str,
        req: AppendRequest,
    ) -> Result<AppendOutcome> {
        let started = Instant::now();
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        validate::turns(&req.turns, &self.limits)?;
        if let Some(k) = &req.idempotency_key {
            if k.is_empty() {
                return Err(Error::invalid(
                    "idempotency_key must not be empty when given",
                ));
            }
            validate::name("idempotency_key", k, validate::MAX_IDEMPOTENCY_KEY_BYTES)?;
        }
        self.append_profile.add(Step::Validate, started.elapsed());
        Ok(self.write_append(ns, session_id, req, None).await?.outcome)
    }

    /// Appends (with an ownership change for a handoff) and announces it
    /// once durable. The request is already validated. The session record
    /// is read once, by the store, under its lock.
    pub(super) async fn write_append(
        &self,
        ns: &str,
        session_id: &str,
        req: AppendRequest,
        handoff: Option<OwnerChange>,
    ) -> Result<Appended> {
        let profile = &self.append_profile;
        profile.counted();
        let started = Instant::now();
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        // Tokens are counted before the store's lock, in the default
        // encoding most sessions use; a session in another encoding has
        // them recounted under the lock (the session is read only there).
        let guess = Encoding::default();
        let counts: Vec<u32> = req
            .turns
            .iter()
            .map(|t| tokens::count_turn(guess, t))
            .collect();
        let mut prepared = PreparedAppend {
            fingerprint: fingerprint(&req.turns)?,
            turns: req.turns,
            token_counts: counts,
            idempotency_key: req.idempotency_key,
            expected_next_seq: req.expected_next_seq,
            lease_epoch: req.lease_epoch,
            handoff,
            now: now_nanos(),
        };
        profile.add(Step::Prepare, started.elapsed());
        let queued = Instant::now();
        let (queue_took, store_took, plan_took, appended) = self
            .blocking(move |st| {
                let started = Instant::now();
                let key = prepared.idempotency_key.clone();
                let mut counted = guess;
                let mut plan_took = Duration::ZERO;
                let appended =
                    st.append_turns(&ns, &id, key.as_deref(), &mut |session, previous| {
                        let planning = Instant::now();
                        // A replay needs no counts.
                        let encoding = session.settings.encoding;
                        if previous.is_none() && encoding != counted {
                            prepared.token_counts = prepared
                                .turns
                                .iter()
                                .map(|t| tokens::count_turn(encoding, t))
                                .collect();
                            counted = encoding;
                        }
                        let plan = append::plan(session, previous, &prepared);
                        plan_took += planning.elapsed();
                        plan
                    });
                let queue_took = started.saturating_duration_since(queued);
                Ok((queue_took, started.elapsed(), plan_took, appended))
            })
            .await?;
        profile.add(Step::Queue, queue_took);
        profile.add(Step::Store, store_took);
        profile.add(Step::Plan, plan_took);
        let appended = appended?;
        let announcing = Instant::now();
        self.after_append(&appended);
        profile.add(Step::Announce, announcing.elapsed());
        Ok(appended)
    }

    /// Counts and announces a durable append (not a replay).
    fn after_append(&self, appended: &Appended) {
        let (session, outcome) = (&appended.session, &appended.outcome);
        if outcome.replayed {
            return;
        }
        let turns = outcome.last_seq + 1 - outcome.first_seq;
        let tokens: u64 = outcome.token_counts.iter().map(|&t| u64::from(t)).sum();
        self.appended.turns.fetch_add(turns, Relaxed);
        self.appended.tokens.fetch_add(tokens, Relaxed);
        self.notify(Event::Appended {
            session,
            first_seq: outcome.first_seq,
            last_seq: outcome.last_seq,
            previous_state: appended.previous_state,
        });
    }

    /// Removes the session's last turn, atomically and fenced like an
    /// append (an undo: an agent SDK's `pop_item`); returns once durable.
    /// The seq goes to the next append. When the latest summary covered
    /// the turn, a new summary version is folded from the remaining turns
    /// before this returns (until it is stored, bundles show no summary).
    pub async fn remove_last_turn(
        &self,
        ns: &str,
        session_id: &str,
        expected_last_seq: Option<u64>,
        lease_epoch: Option<u64>,
    ) -> Result<RemovedTurn> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let removal = append::Removal {
            expected_last_seq,
            lease_epoch,
            now: now_nanos(),
        };
        let (n, i) = (ns.to_owned(), session_id.to_owned());
        let (removed, covered) = self
            .blocking(move |st| {
                // Whether the stored summary covered the turn (decided on
                // the session as read under the store's lock).
                let mut covered = false;
                let removed = st.remove_last_turn(&n, &i, &mut |s, last| {
                    covered = last.is_some_and(|t| append::summary_covers(s, t));
                    append::plan_removal(s, last, &removal)
                })?;
                Ok((removed, covered))
            })
            .await?;
        let Some(turn) = removed.turn else {
            return Ok(RemovedTurn {
                turn: None,
                session: removed.session,
                refolded: None,
            });
        };
        self.notify(Event::TurnRemoved {
            session: &removed.session,
            seq: turn.seq,
        });
        let mut session = removed.session;
        let mut refolded = None;
        if covered && session.turn_count > 0 {
            match self
                .summarize_session(ns, session_id, crate::model::Trigger::Requested, true, true)
                .await
            {
                Ok(super::summary::Attempt::Stored(s)) => refolded = Some(s.version),
                Ok(_) => {}
                // The removal stands; the summary is refolded when next due
                // and bundles leave the stale one out meanwhile.
                Err(e) => tracing::warn!(
                    namespace = ns,
                    session_id,
                    error = %e,
                    "summary not refolded after a turn was removed"
                ),
            }
            session = self.get_session(ns, session_id).await?;
        }
        Ok(RemovedTurn {
            turn: Some(turn),
            session,
            refolded,
        })
    }

    /// Lists turns by seq range, oldest first, paginated. A page is also
    /// cut to stay under half the message limit. With `newest` > 0 (and
    /// no page token) the range starts at its N-th turn from the end, so
    /// only what is returned is read. Also returns what retention removed
    /// of the session, read in the same storage call (a listing is one
    /// trip to the blocking pool, not two).
    #[allow(clippy::too_many_arguments)]
    pub async fn list_turns(
        &self,
        ns: &str,
        session_id: &str,
        from_seq: u64,
        to_seq: Option<u64>,
        page_size: u32,
        page_token: &str,
        newest: u32,
    ) -> Result<(Page<Turn>, Option<TurnsRemoved>)> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        let limit = self.page_size(page_size)?;
        let token = PageToken::decode(page_token)?;
        let from = match &token {
            None => from_seq.max(1),
            Some(PageToken::TurnsFrom(seq)) => *seq,
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let to = to_seq.unwrap_or(u64::MAX);
        let tail = (token.is_none() && newest > 0).then_some(u64::from(newest));
        let byte_budget = self.limits.max_message_bytes / 2;
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let (mut turns, removed) = self
            .blocking(move |st| {
                let from = match tail {
                    Some(n) => {
                        let end = st.get_session(&ns, &id)?.last_seq().min(to);
                        from.max(end.saturating_sub(n - 1)).max(1)
                    }
                    None => from,
                };
                let turns = st.list_turns(&ns, &id, from, to, limit + 1)?;
                Ok((turns, st.retention_mark(&ns, &id)?.turns_removed()))
            })
            .await?;
        let mut bytes = 0usize;
        let mut keep = 0usize;
        for t in turns.iter().take(limit) {
            bytes += approx_size(t);
            if keep > 0 && bytes > byte_budget {
                break;
            }
            keep += 1;
        }
        let next = if turns.len() > keep {
            Some(PageToken::TurnsFrom(turns[keep].seq).encode())
        } else {
            None
        };
        turns.truncate(keep);
        let page = Page {
            items: turns,
            next_page_token: next,
        };
        Ok((page, removed))
    }
}

/// SHA-256 of the canonical encoding of an append's turns, so a reused
/// idempotency key with different turns is detected.
fn fingerprint(turns: &[NewTurn]) -> Result<[u8; 32]> {
    let bytes = postcard::to_stdvec(turns)
        .map_err(|e| Error::Internal(format!("cannot encode turns: {e}")))?;
    Ok(Sha256::digest(&bytes).into())
}

/// Rough encoded size of a turn, for cutting pages under the message limit.
fn approx_size(t: &Turn) -> usize {
    let meta: usize = t.metadata.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    let tool = t.tool_call.as_ref().map_or(0, |c| {
        c.tool_name.len() + c.arguments_json.len() + c.result.len() + c.error_details.len() + 16
    });
    64 + t.speaker.len() + t.content.len() + meta + tool
}
