//! The summary pipeline, the one copy the background worker and handoff
//! both run: read the stored fold state, hand only the turns after it to
//! the summarizer, validate the summary against the turns it cites, and
//! store the summary (or the refusal) with its audit record in one atomic
//! write; then extract facts and settle the episode. Plus the summary,
//! audit and review API.
//!
//! Cost: proportional to the new turns plus the summary's cited turns
//! (point reads), never to the whole transcript.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::page::PageToken;
use super::{knowledge, validate as check, Event, Memory, Page};
use crate::config::SummaryConfig;
use crate::error::{Error, Precondition, Result};
use crate::model::{
    now_nanos, AuditKind, AuditRecord, FoldRecord, ReviewItem, ReviewStatus, RiskLevel, Session,
    SessionState, SessionSummary, Trigger, Turn, LEGACY_FOLD_FORMAT,
};
use crate::store::{Store, SummaryWrite};
use crate::summarize::{engine, render, rule_based, validate, Folded, Summarizer, SummaryContext};
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

/// The stored fold state a summarizer can continue from: the record as
/// stored, one of the old whole-record layout upgraded, or nothing (no
/// summary yet, or a state another summarizer wrote: fold from turn 1).
fn base_of(summarizer: &dyn Summarizer, stored: Option<FoldRecord>) -> Result<Option<FoldRecord>> {
    let Some(record) = stored else {
        return Ok(None);
    };
    if record.format == LEGACY_FOLD_FORMAT {
        return match summarizer.upgrade_legacy(&record) {
            Some(up) => up.map(Some).map_err(|e| Error::DataLoss(e.to_string())),
            None => Ok(None),
        };
    }
    Ok(summarizer.reads(&record).then_some(record))
}

/// Whether a summary or fold covering turns through `covers_through_seq`
/// covers a turn removed since: removing a covered turn lowers the
/// session's recorded summary progress below what the stored summary
/// covers (`append::plan_removal`), a mark that survives a crash and
/// later appends until a new summary is folded from the remaining turns.
pub fn is_rewound(session: &Session, covers_through_seq: u64) -> bool {
    covers_through_seq > session.summary.through_seq
}

/// Summarizes the turns of a session not yet covered (blocking).
/// `force` ignores earlier refused attempts (a client asked explicitly).
/// Three steps: read what the fold has not seen, fold and validate it,
/// then store the summary (or the refusal) with its audit record.
pub fn run(
    store: &dyn Store,
    summarizer: &dyn Summarizer,
    cfg: &SummaryConfig,
    (ns, session_id): (&str, &str),
    trigger: Trigger,
    force: bool,
    wait_free: bool,
) -> Result<Attempt> {
    let session = store.get_session(ns, session_id)?;
    let Some(new) = read_new_turns(store, summarizer, &session, trigger, force)? else {
        return Ok(Attempt::Unchanged);
    };
    let ctx = SummaryContext {
        namespace: ns.to_owned(),
        context_limit_tokens: session.settings.context_limit_tokens,
        bundle_tokens: 0,
        trigger,
        version: session.summary.version + 1,
        now: now_nanos(),
        high_risk: session.settings.risk_level == RiskLevel::High,
        wait_free,
    };
    let checked = fold_and_validate(store, summarizer, &session, &new, &ctx)?;
    let folded: Vec<Turn> = new.turns.into_values().collect();
    let (write, summary, verdict) =
        audited(store, summarizer, cfg, &session, new.fold, checked, &ctx)?;
    let session = store.save_summary(ns, session_id, write)?;
    Ok(match verdict {
        Ok(()) => {
            knowledge::after_summary(store, &session, &summary, &folded);
            Attempt::Stored(Box::new(summary))
        }
        Err(errors) => {
            // A refused final summary still leaves the latest stored one
            // as the episode.
            knowledge::settle_episode(store, ns, session_id);
            Attempt::Refused(errors)
        }
    })
}

/// What the read step found: the stored fold to continue from, the fold
/// record extended over the new turns (hash chain, tokens, last seq) and
/// those turns.
struct NewTurns {
    base: Option<FoldRecord>,
    fold: FoldRecord,
    turns: BTreeMap<u64, Turn>,
}

/// Reads the turns the fold has not seen. `None` when there is nothing
/// to fold (nothing new since the last summary or attempt, or every new
/// turn was removed by retention); the episode is settled then.
fn read_new_turns(
    store: &dyn Store,
    summarizer: &dyn Summarizer,
    session: &Session,
    trigger: Trigger,
    force: bool,
) -> Result<Option<NewTurns>> {
    let (ns, session_id) = (session.namespace.as_str(), session.session_id.as_str());
    let last = session.next_seq - 1;
    let mut base = base_of(summarizer, store.fold_record(ns, session_id)?)?;
    // A fold over a turn removed since starts again from turn 1.
    let rewound = base
        .as_ref()
        .is_some_and(|b| is_rewound(session, b.through_seq));
    if rewound {
        base = None;
    }
    let through = base.as_ref().map_or(0, |b| b.through_seq);
    let attempted = if force || rewound {
        through
    } else {
        session.summary.attempted_through_seq.max(through)
    };
    if last <= attempted {
        // A session that stopped with nothing new still needs its episode.
        knowledge::settle_episode(store, ns, session_id);
        return Ok(None);
    }
    let mut fold = FoldRecord {
        summarizer: summarizer.name().to_owned(),
        format: summarizer.format(),
        ..base.clone().unwrap_or_default()
    };
    let mut turns: BTreeMap<u64, Turn> = BTreeMap::new();
    // Turns a retention policy removed are not there to fold.
    let gone = store.retention_mark(ns, session_id)?.turns_through_seq;
    let mut from = fold.through_seq.max(gone) + 1;
    if from > last {
        super::retention::nothing_left(
            store,
            (ns, session_id),
            session,
            (fold.through_seq, gone),
            trigger,
        )?;
        return Ok(None);
    }
    while from <= last {
        let page = store.read_turns(ns, session_id, from, last, FOLD_PAGE)?;
        let Some(end) = page.last().map(|t| t.seq) else {
            break;
        };
        for t in &page {
            fold.chain_hash = chain(&fold.chain_hash, t)?;
            fold.through_tokens += u64::from(t.token_count);
        }
        fold.through_seq = end;
        turns.extend(page.into_iter().map(|t| (t.seq, t)));
        from = end + 1;
    }
    Ok(Some(NewTurns { base, fold, turns }))
}

/// What the fold step produced: the summary the gate let through (or the
/// last one it refused), its size, the verdict, the refused attempts and
/// what was dropped from a rule-based summary to pass.
struct Checked {
    out: Folded,
    post_tokens: u64,
    verdict: std::result::Result<(), Vec<String>>,
    refused_attempts: Vec<String>,
    dropped: Option<validate::Dropped>,
}

/// Folds the new turns and validates the summary against the turns it
/// cites: a refused summary is folded once more with the violations as a
/// hint, then taken from the summarizer's fallback when it has one (a
/// model does; the rules do not); a rule-based summary is never refused
/// whole (what fails the check is dropped, the rest kept).
fn fold_and_validate(
    store: &dyn Store,
    summarizer: &dyn Summarizer,
    session: &Session,
    new: &NewTurns,
    ctx: &SummaryContext,
) -> Result<Checked> {
    let (ns, session_id) = (session.namespace.as_str(), session.session_id.as_str());
    let state_error = |e: crate::summarize::StateError| {
        if e.is_interrupted() {
            return Error::Unavailable(format!(
                "summary of session {ns}/{session_id} {e}; it is folded at the next start"
            ));
        }
        Error::DataLoss(format!(
            "summary fold state of session {ns}/{session_id}: {e}"
        ))
    };
    let base = new.base.as_ref();
    let folded: Vec<Turn> = new.turns.values().cloned().collect();
    let through = new.fold.through_seq;
    let mut out = summarizer.fold(base, &folded, ctx).map_err(state_error)?;
    let mut refused_attempts: Vec<String> = Vec::new();
    let (mut out, mut post_tokens, mut verdict, cited) = loop {
        let post_tokens = set_budget(&mut out.summary, session);
        let cited = cited_turns(store, ns, session_id, &out.summary, &new.turns)?;
        let verdict = validate::validate(&out.summary, &cited, through);
        let Err(errors) = &verdict else {
            break (out, post_tokens, verdict, cited);
        };
        let next = match refused_attempts.len() {
            0 => summarizer.retry(base, &folded, ctx, errors),
            1 => summarizer.fallback(base, &folded, ctx),
            _ => None,
        };
        let Some(next) = next else {
            break (out, post_tokens, verdict, cited);
        };
        refused_attempts.push(format!(
            "attempt {} by {} refused: {}",
            refused_attempts.len() + 1,
            out.label.unwrap_or_else(|| summarizer.label()),
            errors.join("; ")
        ));
        // The model path's call records of the refused attempt stay in
        // the audit beside the next attempt's (issue 39).
        let earlier = std::mem::take(&mut out.notes);
        out = next.map_err(state_error)?;
        out.notes.splice(0..0, earlier);
    };
    // A model's summary that still fails here had no fallback to go to and
    // keeps the gate.
    let mut dropped: Option<validate::Dropped> = None;
    let by_rules = out
        .label
        .as_deref()
        .map_or(summarizer.name() == rule_based::NAME, |l| {
            l.starts_with(rule_based::NAME)
        });
    if let (Err(errors), true) = (&verdict, by_rules) {
        let mut pruned = out.summary.clone();
        if let Ok(d) = validate::prune(&mut pruned, &cited, through, engine::prose) {
            tracing::warn!(
                namespace = ns,
                session_id,
                ?errors,
                "items of a rule-based summary failed validation; dropped, the rest stored"
            );
            dropped = Some(d);
            out.summary = pruned;
            post_tokens = set_budget(&mut out.summary, session);
            verdict = Ok(());
        }
    }
    Ok(Checked {
        out,
        post_tokens,
        verdict,
        refused_attempts,
        dropped,
    })
}

/// The audit record of an attempt and the write that stores it with the
/// summary (or, refused, without one); also the summary and the verdict.
#[allow(clippy::type_complexity)]
fn audited(
    store: &dyn Store,
    summarizer: &dyn Summarizer,
    cfg: &SummaryConfig,
    session: &Session,
    mut fold: FoldRecord,
    checked: Checked,
    ctx: &SummaryContext,
) -> Result<(
    SummaryWrite,
    SessionSummary,
    std::result::Result<(), Vec<String>>,
)> {
    let Checked {
        out,
        post_tokens,
        verdict,
        refused_attempts,
        dropped,
    } = checked;
    let Folded {
        state,
        summary,
        label,
        notes,
    } = out;
    fold.state = state;
    let mut audit = AuditRecord::new(AuditKind::SummaryAttempt, ctx.now);
    audit.trigger = Some(ctx.trigger);
    audit.covers_through_seq = fold.through_seq;
    audit.pre_summary_tokens = fold.through_tokens;
    audit.post_summary_tokens = post_tokens;
    audit.compression_ratio = if post_tokens == 0 {
        0.0
    } else {
        fold.through_tokens as f64 / post_tokens as f64
    };
    audit.summarizer = label.unwrap_or_else(|| summarizer.label());
    audit.covered_turns_sha256 = hex::encode(fold.chain_hash);
    audit.validation_passed = verdict.is_ok();
    audit.validation_errors = verdict.clone().err().unwrap_or_default();
    audit.decisions = summary.decisions.len() as u32;
    audit.pending_actions = summary.pending_actions.len() as u32;
    audit.open_questions = summary.open_questions.len() as u32;
    audit.health_flags = health_flags(
        store,
        session,
        &summary,
        (audit.pre_summary_tokens, audit.compression_ratio),
        cfg,
    )?;
    audit.health_flags.extend(refused_attempts);
    if let Some(d) = dropped.filter(|d| d.count > 0) {
        let one = d.count == 1;
        audit.health_flags.push(format!(
            "validator_dropped_items: {} {} failed validation and {} dropped, the rest stored: {}",
            d.count,
            if one { "item" } else { "items" },
            if one { "was" } else { "were" },
            d.items.join(" | ")
        ));
    }
    audit.health_flags.extend(notes);
    let write = match &verdict {
        Ok(()) => {
            audit.summary_version = summary.version;
            let review = review_item(session, &summary);
            SummaryWrite {
                base_version: session.summary.version,
                summary: Some(summary.clone()),
                attempted_through_seq: fold.through_seq,
                fold: Some(fold),
                audit,
                review,
            }
        }
        Err(errors) => {
            tracing::warn!(
                namespace = session.namespace.as_str(),
                session_id = session.session_id.as_str(),
                ?errors,
                "summary refused by validation"
            );
            SummaryWrite::without_summary(session.summary.version, audit, fold.through_seq)
        }
    };
    Ok((write, summary, verdict))
}

/// Sets the summary's `budget_remaining_tokens` (until bundles exist,
/// what a resuming agent needs is the summary itself) and returns the
/// tokens of its Markdown rendering.
fn set_budget(summary: &mut SessionSummary, session: &Session) -> u64 {
    let markdown = render::markdown(summary);
    let post_tokens = tokens::count(session.settings.encoding, &markdown) as u64;
    summary.context_health.budget_remaining_tokens =
        i64::try_from(session.settings.context_limit_tokens).unwrap_or(i64::MAX)
            - post_tokens as i64;
    post_tokens
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
    new_turns: &BTreeMap<u64, Turn>,
) -> Result<BTreeMap<u64, Turn>> {
    let mut cited = BTreeMap::new();
    let mut older = Vec::new();
    for seq in validate::cited_seqs(summary) {
        match new_turns.get(&seq) {
            Some(t) => {
                cited.insert(seq, t.clone());
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
        reviewer_key: String::new(),
    })
}

pub use super::episodes::episode_due;

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

/// Attempts a summary runs before giving up on a session that keeps
/// changing under it.
const ATTEMPTS: usize = 3;

impl Memory {
    /// Runs the summary pipeline for one session on the blocking pool,
    /// retrying when a concurrent attempt stored a version first; announces
    /// a stored summary. The worker and handoff both come here.
    pub async fn summarize_session(
        &self,
        ns: &str,
        session_id: &str,
        trigger: Trigger,
        force: bool,
        wait_free: bool,
    ) -> Result<Attempt> {
        for _ in 0..ATTEMPTS {
            let (n, i, cfg) = (ns.to_owned(), session_id.to_owned(), self.summaries.clone());
            let summarizer = self.summarizer.clone();
            let attempt = self
                .blocking(move |st| {
                    let a = run(
                        st,
                        summarizer.as_ref(),
                        &cfg,
                        (&n, &i),
                        trigger,
                        force,
                        wait_free,
                    )?;
                    // Whose memory a stored version may have changed (its
                    // episode, the actions it carries): reads of that
                    // subject wait for the index to apply it.
                    let subject = match &a {
                        Attempt::Stored(_) => st.get_session(&n, &i).ok().map(|s| s.subject_id),
                        _ => None,
                    };
                    Ok((a, subject))
                })
                .await;
            match attempt {
                Err(Error::Aborted(_)) => continue,
                Err(e) => return Err(e),
                Ok((a, subject)) => {
                    if let Attempt::Stored(s) = &a {
                        self.notify(Event::SummaryWritten {
                            namespace: ns,
                            session_id,
                            summary: s,
                        });
                        // Facts and episodes may have changed with it.
                        self.notify(Event::KnowledgeChanged {
                            namespace: Some(ns),
                            subject_id: subject.as_deref(),
                            session_id: Some(session_id),
                        });
                    }
                    return Ok(a);
                }
            }
        }
        Err(Error::Aborted(format!(
            "session {session_id:?} kept changing while its summary was written; retry"
        )))
    }

    /// The latest summary when it covers every turn, else `None` (work to
    /// queue). `FailedPrecondition` for a session without turns.
    pub async fn summary_if_current(
        &self,
        ns: &str,
        session_id: &str,
    ) -> Result<Option<SessionSummary>> {
        let session = self.get_session(ns, session_id).await?;
        if session.turn_count == 0 {
            return Err(Error::FailedPrecondition(
                Precondition::NoTurns,
                format!("session {session_id:?} has no turns to summarize"),
            ));
        }
        if session.summary.version > 0 && session.summary.through_seq >= session.last_seq() {
            return self.get_summary(ns, session_id, 0).await.map(Some);
        }
        Ok(None)
    }

    /// Summary `version` (0 = latest).
    pub async fn get_summary(
        &self,
        ns: &str,
        session_id: &str,
        version: u64,
    ) -> Result<SessionSummary> {
        check::id("namespace", ns)?;
        check::id("session_id", session_id)?;
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        self.blocking(move |st| match st.get_summary(&ns, &id, version) {
            Err(Error::NotFound(why)) => {
                // Removed by retention: say so rather than "not found".
                let mark = st.retention_mark(&ns, &id)?;
                let wanted = if version == 0 {
                    st.get_session(&ns, &id)?.summary.version
                } else {
                    version
                };
                if wanted > 0 && wanted <= mark.summaries_through_version {
                    return Err(Error::NotFound(format!(
                        "summary version {wanted} of session {ns}/{id} was removed by a retention policy (versions up to {} are gone)",
                        mark.summaries_through_version
                    )));
                }
                Err(Error::NotFound(why))
            }
            other => other,
        })
        .await
    }

    /// Summary versions, newest first.
    pub async fn list_summaries(
        &self,
        ns: &str,
        session_id: &str,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<SessionSummary>> {
        check::id("namespace", ns)?;
        check::id("session_id", session_id)?;
        let limit = self.page_size(page_size)?;
        let at_most = match PageToken::decode(page_token)? {
            None => u64::MAX,
            Some(PageToken::SummariesAtMost(v)) => v,
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let items = self
            .blocking(move |st| st.list_summaries(&ns, &id, at_most, limit))
            .await?;
        let next = match items.last() {
            Some(s) if items.len() == limit && s.version > 1 => {
                Some(PageToken::SummariesAtMost(s.version - 1).encode())
            }
            _ => None,
        };
        Ok(Page {
            items,
            next_page_token: next,
        })
    }

    /// The oldest summary version covering `seq` or later (binary search
    /// over versions 1..=latest, whose coverage only grows); `latest + 1`
    /// when none does.
    pub async fn first_summary_covering(
        &self,
        ns: &str,
        session_id: &str,
        seq: u64,
        latest: u64,
    ) -> Result<u64> {
        let (mut lo, mut hi) = (1u64, latest + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let s = self.get_summary(ns, session_id, mid).await?;
            if s.covers_through_seq >= seq {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    /// The session's audit log, oldest first.
    pub async fn audit_log(
        &self,
        ns: &str,
        session_id: &str,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<AuditRecord>> {
        check::id("namespace", ns)?;
        check::id("session_id", session_id)?;
        let limit = self.page_size(page_size)?;
        let after = match PageToken::decode(page_token)? {
            None => 0,
            Some(PageToken::AuditAfter(n)) => n,
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let (ns, id) = (ns.to_owned(), session_id.to_owned());
        let items = self
            .blocking(move |st| st.list_audit(&ns, &id, after, limit))
            .await?;
        let next = match items.last() {
            Some(r) if items.len() == limit => Some(PageToken::AuditAfter(r.audit_seq).encode()),
            _ => None,
        };
        Ok(Page {
            items,
            next_page_token: next,
        })
    }

    /// The namespace's review queue, oldest first.
    pub async fn review_items(
        &self,
        ns: &str,
        include_resolved: bool,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<ReviewItem>> {
        check::id("namespace", ns)?;
        let limit = self.page_size(page_size)?;
        let after = match PageToken::decode(page_token)? {
            None => None,
            Some(PageToken::ReviewsAfter(id)) => Some(id),
            Some(_) => return Err(Error::invalid("page_token belongs to another listing")),
        };
        let ns = ns.to_owned();
        let (items, resume) = self
            .blocking(move |st| {
                st.list_review_items(&ns, after.as_deref(), include_resolved, limit, limit * 10)
            })
            .await?;
        Ok(Page {
            items,
            next_page_token: resume.map(|id| PageToken::ReviewsAfter(id).encode()),
        })
    }

    /// Approves or rejects a review item; durable when it returns.
    pub async fn resolve_review_item(
        &self,
        ns: &str,
        review_id: &str,
        status: ReviewStatus,
        by: Reviewer<'_>,
        comment: &str,
    ) -> Result<ReviewItem> {
        let reviewer = by.name;
        check::id("namespace", ns)?;
        check::id("review_id", review_id)?;
        if status == ReviewStatus::Pending {
            return Err(Error::invalid("status must be APPROVED or REJECTED"));
        }
        if reviewer.is_empty() {
            return Err(Error::invalid("reviewer is required"));
        }
        check::name("reviewer", reviewer, check::MAX_NAME_BYTES)?;
        if comment.len() > check::MAX_METADATA_VALUE_BYTES {
            return Err(Error::invalid(format!(
                "comment is {} bytes; the limit is {}",
                comment.len(),
                check::MAX_METADATA_VALUE_BYTES
            )));
        }
        let audit = AuditRecord {
            validation_passed: true,
            review_id: review_id.to_owned(),
            review_status: Some(status),
            reviewer: reviewer.to_owned(),
            comment: comment.to_owned(),
            reviewer_key: by.key.to_owned(),
            ..AuditRecord::new(AuditKind::ReviewResolved, now_nanos())
        };
        let (ns, id) = (ns.to_owned(), review_id.to_owned());
        self.blocking(move |st| {
            st.resolve_review_item(&ns, &id, audit.clone(), &mut |item| {
                resolve(item, status, &audit)
            })
        })
        .await
    }
}

/// Who resolves a review item: the name the person typed, and the API
/// key the request came with (which the caller cannot choose).
#[derive(Debug, Clone, Copy)]
pub struct Reviewer<'a> {
    /// The reviewer's name as given (free text).
    pub name: &'a str,
    /// The acting key's configured name ("anyone" with auth off).
    pub key: &'a str,
}

/// A pending review item resolved by `audit`'s reviewer; one resolved
/// already stays as it is (`FailedPrecondition`).
fn resolve(item: &ReviewItem, status: ReviewStatus, audit: &AuditRecord) -> Result<ReviewItem> {
    if item.status != ReviewStatus::Pending {
        return Err(Error::FailedPrecondition(
            Precondition::AlreadyResolved,
            format!(
                "review item {:?} is already {:?} by {:?}",
                item.review_id, item.status, item.reviewer
            ),
        ));
    }
    let mut item = item.clone();
    item.status = status;
    item.reviewer = audit.reviewer.clone();
    item.comment = audit.comment.clone();
    item.reviewer_key = audit.reviewer_key.clone();
    item.resolved_at = audit.created_at;
    Ok(item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

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
