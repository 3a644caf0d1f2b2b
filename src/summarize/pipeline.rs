//! One summary attempt for one session, start to end, on a blocking
//! thread: read the stored fold state, fold only the turns after it,
//! render, validate against the cited turns, and store the summary (or the
//! refusal) with its audit record in one atomic write.
//!
//! Cost: proportional to the new turns plus the summary's cited turns
//! (point reads), never to the whole transcript.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::model::{SessionSummary, Trigger};
use super::records::{AuditKind, AuditRecord, ReviewItem, ReviewStatus, SummaryWrite, SUMMARIZER};
use super::{render, validate, SummaryContext};
use crate::config::SummaryConfig;
use crate::error::{Error, Result};
use crate::memory::types::{now_nanos, RiskLevel, Session, SessionState, Turn};
use crate::store::Store;
use crate::tokens;

/// Turns read per page while folding.
const FOLD_PAGE: usize = 1000;

/// What an attempt did.
#[derive(Debug, Clone)]
pub enum Attempt {
    /// A new summary version was stored.
    Stored(Box<SessionSummary>),
    /// Validation refused the summary; the audit log says why.
    Refused(Vec<String>),
    /// No turn was new since the latest summary (or attempt).
    Unchanged,
}

/// Summarizes the turns of a session not yet covered.
/// `force` ignores earlier refused attempts (a client asked explicitly).
pub fn run(
    store: &dyn Store,
    cfg: &SummaryConfig,
    ns: &str,
    session_id: &str,
    trigger: Trigger,
    force: bool,
) -> Result<Attempt> {
    let session = store.get_session(ns, session_id)?;
    let last = session.next_seq - 1;
    let base = store.fold_record(ns, session_id)?.unwrap_or_default();
    let attempted = if force {
        base.through_seq
    } else {
        session.summary.attempted_through_seq.max(base.through_seq)
    };
    if last <= attempted {
        // A session that stopped with nothing new still needs its episode.
        crate::memory::long_term::settle_episode(store, ns, session_id);
        return Ok(Attempt::Unchanged);
    }
    let mut fold = base.clone();
    let mut new_turns: BTreeMap<u64, Turn> = BTreeMap::new();
    let mut from = fold.through_seq + 1;
    while from <= last {
        let page = store.list_turns(ns, session_id, from, last, FOLD_PAGE)?;
        let Some(end) = page.last().map(|t| t.seq) else {
            break;
        };
        for t in &page {
            fold.chain_hash = chain(&fold.chain_hash, t)?;
            fold.through_tokens += u64::from(t.token_count);
        }
        fold.state.fold(&page);
        fold.through_seq = end;
        // Keep only what validation may need: the turns just folded.
        new_turns.extend(page.into_iter().map(|t| (t.seq, t)));
        from = end + 1;
    }
    let ctx = SummaryContext {
        context_limit_tokens: session.settings.context_limit_tokens,
        bundle_tokens: 0,
        trigger,
        version: session.summary.version + 1,
        now: now_nanos(),
        high_risk: session.settings.risk_level == RiskLevel::High,
    };
    let mut summary = fold.state.render(&ctx);
    let markdown = render::markdown(&summary);
    let post_tokens = tokens::count(session.settings.encoding, &markdown) as u64;
    // Until bundles exist, what a resuming agent needs is the summary itself.
    summary.context_health.budget_remaining_tokens =
        i64::try_from(session.settings.context_limit_tokens).unwrap_or(i64::MAX)
            - post_tokens as i64;

    let folded: Vec<Turn> = new_turns.values().cloned().collect();
    let cited = cited_turns(store, ns, session_id, &summary, new_turns)?;
    let verdict = validate::validate(&summary, &cited, fold.through_seq);
    let mut audit = AuditRecord {
        audit_seq: 0,
        kind: AuditKind::SummaryAttempt,
        created_at: ctx.now,
        summary_version: 0,
        trigger: Some(trigger),
        covers_through_seq: fold.through_seq,
        pre_summary_tokens: fold.through_tokens,
        post_summary_tokens: post_tokens,
        compression_ratio: if post_tokens == 0 {
            0.0
        } else {
            fold.through_tokens as f64 / post_tokens as f64
        },
        summarizer: SUMMARIZER.to_string(),
        covered_turns_sha256: hex::encode(fold.chain_hash),
        validation_passed: verdict.is_ok(),
        validation_errors: verdict.clone().err().unwrap_or_default(),
        decisions: summary.decisions.len() as u32,
        pending_actions: summary.pending_actions.len() as u32,
        open_questions: summary.open_questions.len() as u32,
        health_flags: Vec::new(),
        review_id: String::new(),
        review_status: None,
        reviewer: String::new(),
        comment: String::new(),
    };
    audit.health_flags = health_flags(
        store,
        &session,
        &summary,
        (audit.pre_summary_tokens, audit.compression_ratio),
        cfg,
    )?;
    let write = match verdict {
        Ok(()) => {
            audit.summary_version = summary.version;
            let review = review_item(&session, &summary);
            SummaryWrite {
                base_version: session.summary.version,
                summary: Some(summary.clone()),
                fold: Some(fold.clone()),
                audit,
                review,
                attempted_through_seq: fold.through_seq,
            }
        }
        Err(ref errors) => {
            tracing::warn!(
                namespace = ns,
                session_id,
                ?errors,
                "summary refused by validation"
            );
            SummaryWrite {
                base_version: session.summary.version,
                summary: None,
                fold: None,
                audit,
                review: None,
                attempted_through_seq: fold.through_seq,
            }
        }
    };
    let session = store.save_summary(ns, session_id, write)?;
    Ok(match verdict {
        Ok(()) => {
            crate::memory::long_term::after_summary(store, &session, &summary, &folded);
            Attempt::Stored(Box::new(summary))
        }
        Err(errors) => {
            // A refused final summary still leaves the latest stored one
            // as the episode.
            crate::memory::long_term::settle_episode(store, ns, session_id);
            Attempt::Refused(errors)
        }
    })
}

/// h' = SHA-256(h || postcard(turn)): a hash of the covered turns that can
/// be extended turn by turn and equals the hash computed from scratch.
fn chain(prev: &[u8; 32], turn: &Turn) -> Result<[u8; 32]> {
    let bytes = postcard::to_stdvec(turn)
        .map_err(|e| Error::Internal(format!("cannot encode turn: {e}")))?;
    let mut h = Sha256::new();
    h.update(prev);
    h.update(&bytes);
    Ok(h.finalize().into())
}

/// Every turn the summary cites: the new ones from memory, older ones by
/// point reads.
fn cited_turns(
    store: &dyn Store,
    ns: &str,
    session_id: &str,
    summary: &SessionSummary,
    mut new_turns: BTreeMap<u64, Turn>,
) -> Result<BTreeMap<u64, Turn>> {
    let mut cited = BTreeMap::new();
    let mut older = Vec::new();
    for seq in validate::cited_seqs(summary) {
        match new_turns.remove(&seq) {
            Some(t) => {
                cited.insert(seq, t);
            }
            None => older.push(seq),
        }
    }
    for t in store.get_turns(ns, session_id, &older)? {
        cited.insert(t.seq, t);
    }
    Ok(cited)
}

fn health_flags(
    store: &dyn Store,
    session: &Session,
    summary: &SessionSummary,
    (pre_tokens, ratio): (u64, f64),
    cfg: &SummaryConfig,
) -> Result<Vec<String>> {
    let mut flags = Vec::new();
    if summary.version >= 3 {
        let prev = store.list_summaries(
            &session.namespace,
            &session.session_id,
            summary.version - 1,
            2,
        )?;
        if let [p1, p2] = prev.as_slice() {
            let (a, b, c) = (
                p2.open_questions.len(),
                p1.open_questions.len(),
                summary.open_questions.len(),
            );
            if a < b && b < c {
                flags.push(format!(
                    "open_questions_growing: {a} -> {b} -> {c} over the last 3 summaries"
                ));
            }
        }
    }
    let checked = pre_tokens >= cfg.compression_check_min_tokens;
    if checked && (ratio < cfg.compression_min_ratio || ratio > cfg.compression_max_ratio) {
        flags.push(format!(
            "compression_ratio_out_of_band: {ratio:.2} not in [{}, {}]",
            cfg.compression_min_ratio, cfg.compression_max_ratio
        ));
    }
    Ok(flags)
}

/// A review item for a high-risk summary with irreversible items.
fn review_item(session: &Session, s: &SessionSummary) -> Option<ReviewItem> {
    if session.settings.risk_level != RiskLevel::High || !s.requires_human_review {
        return None;
    }
    let mut items = Vec::new();
    for d in s.decisions.iter().filter(|d| d.requires_human_review) {
        items.push(format!("decision: {} {:?}", d.decision, d.evidence_seqs));
    }
    for a in s.pending_actions.iter().filter(|a| a.requires_human_review) {
        items.push(format!("action: {} {:?}", a.action, a.evidence_seqs));
    }
    for t in s.tool_calls.iter().filter(|t| t.requires_human_review) {
        items.push(format!(
            "tool call: {}({}) [{}]",
            t.tool_name, t.arguments_json, t.seq
        ));
    }
    Some(ReviewItem {
        review_id: ulid::Ulid::new().to_string(),
        namespace: session.namespace.clone(),
        session_id: session.session_id.clone(),
        summary_version: s.version,
        items,
        status: ReviewStatus::Pending,
        reviewer: String::new(),
        comment: String::new(),
        created_at: s.created_at,
        resolved_at: 0,
    })
}

/// Whether a stopped session with a subject has a summary newer than its
/// episode.
pub fn episode_due(session: &Session) -> bool {
    matches!(session.state, SessionState::Closed | SessionState::Idle)
        && !session.subject_id.is_empty()
        && session.summary.version > session.episode_version
}

/// Which automatic trigger, if any, is due for `session` now.
pub fn due(session: &Session, cfg: &SummaryConfig) -> Option<Trigger> {
    let last = session.next_seq - 1;
    let since = session
        .summary
        .attempted_through_seq
        .max(session.summary.through_seq);
    if last <= since {
        // Nothing to fold; the episode may still be missing (a crash
        // between the final summary and its episode).
        return episode_due(session).then_some(match session.state {
            SessionState::Idle => Trigger::IdleTimeout,
            _ => Trigger::Close,
        });
    }
    // A session that stopped (closed or idle) gets its final summary.
    match session.state {
        SessionState::Closed => return Some(Trigger::Close),
        SessionState::Idle => return Some(Trigger::IdleTimeout),
        SessionState::Active => {}
    }
    if last - since >= u64::from(session.settings.summary_every_turns) {
        return Some(Trigger::EveryNTurns);
    }
    let unsummarized = session
        .total_tokens
        .saturating_sub(session.summary.through_tokens);
    if unsummarized * 100
        > session.settings.context_limit_tokens * u64::from(cfg.token_threshold_percent)
    {
        return Some(Trigger::TokenThreshold);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::types::Role;

    fn turn(seq: u64) -> Turn {
        Turn {
            seq,
            role: Role::User,
            speaker: "u".into(),
            content: format!("turn {seq}"),
            client_time: None,
            server_time: 1,
            tool_call: None,
            metadata: Default::default(),
            token_count: 2,
        }
    }

    #[test]
    fn the_hash_chain_extends_turn_by_turn() {
        let turns: Vec<Turn> = (1..=10).map(turn).collect();
        let whole = turns
            .iter()
            .try_fold([0u8; 32], |h, t| chain(&h, t))
            .unwrap();
        for k in 0..=10 {
            let first = turns[..k]
                .iter()
                .try_fold([0u8; 32], |h, t| chain(&h, t))
                .unwrap();
            let split = turns[k..]
                .iter()
                .try_fold(first, |h, t| chain(&h, t))
                .unwrap();
            assert_eq!(split, whole, "split at {k}");
        }
        let mut changed = turns.clone();
        changed[4].content.push('!');
        let other = changed
            .iter()
            .try_fold([0u8; 32], |h, t| chain(&h, t))
            .unwrap();
        assert_ne!(other, whole);
    }
}
