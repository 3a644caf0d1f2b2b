//! Retention policies: the domain decides which records a policy no
//! longer keeps, as of a given time (the caller's clock, so tests and the
//! dry run can ask "as of when"); the store only removes them
//! (`store::RetentionStore`). The same decisions serve the daemon's
//! passes (`runtime::retention`) and `mnemo retention --dry-run`, so a dry
//! run counts exactly what a pass at the same time removes.
//!
//! What is due, per namespace table:
//! - turns of a CLOSED session, all of them, once its last append is
//!   `turns_days` old and its final summary was attempted (folded from
//!   them; until then they stay), ACTIVE and IDLE sessions keep theirs;
//! - summary versions written `summaries_days` ago, except a session's
//!   latest while the session is not CLOSED, and the session's episode
//!   once the session ended that long ago;
//! - audit records written `audit_days` ago;
//! - a fact whose current version was last updated `facts_days` ago, with
//!   the versions it superseded.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{knowledge, Event, Memory};
use crate::config::{RetentionPolicy, RetentionRule};
use crate::error::{Error, Result};
use crate::model::{
    now_nanos, AuditKind, AuditRecord, Fact, RetentionCounts, Session, SessionCut, SessionState,
    Trigger, UnixNanos,
};
use crate::store::{RetentionView, Store, SummaryWrite};

/// Records removed per unit of work (one store transaction).
pub const RETENTION_BATCH: usize = 256;
/// Summaries and audit records of one session looked at per decision (a
/// session with more has the rest removed by the next pass).
pub const VIEW_LIMIT: usize = 4096;
/// Sessions or facts read per page while looking for due work.
pub const SCAN_PAGE: usize = 256;

const NANOS_PER_DAY: i64 = 86_400 * 1_000_000_000;

/// The time before which a period of `days` has passed at `now`.
pub fn cutoff(now: UnixNanos, days: i64) -> UnixNanos {
    now.saturating_sub(days.saturating_mul(NANOS_PER_DAY))
}

/// The last of `records` (oldest first: (version or seq, written at)) in
/// the prefix that `due` holds for; 0 when the first is not due.
fn prefix_through(records: &[(u64, UnixNanos)], due: impl Fn(u64, UnixNanos) -> bool) -> u64 {
    records
        .iter()
        .take_while(|&&(n, at)| due(n, at))
        .last()
        .map_or(0, |&(n, _)| n)
}

/// What `rule` removes from the session seen in `v` at `now`.
pub fn session_cut(v: &RetentionView, rule: &RetentionRule, now: UnixNanos) -> SessionCut {
    let s = &v.session;
    let closed = s.state == SessionState::Closed;
    let mut cut = SessionCut::default();
    if let Some(days) = rule.turns_days {
        // The final summary is folded from the turns first: they go only
        // once it was attempted through the last turn.
        let summarized = s.summary.attempted_through_seq.max(s.summary.through_seq);
        if closed
            && s.last_active_at <= cutoff(now, days)
            && s.last_seq() > v.mark.turns_through_seq
            && summarized >= s.last_seq()
        {
            cut.turns_through_seq = s.last_seq();
        }
    }
    if let Some(days) = rule.summaries_days {
        let before = cutoff(now, days);
        let latest = s.summary.version;
        // Versions are written in order: the due ones are a prefix.
        cut.summaries_through_version = prefix_through(&v.summaries, |version, at| {
            at <= before && (closed || version < latest)
        });
        cut.episode = v.episode_ended_at.is_some_and(|at| at <= before);
    }
    if let Some(keep) = rule.summary_versions {
        // The newest `keep` versions stay (the latest always: it is the
        // session's running memory); the older ones are a prefix.
        let keep = u64::try_from(keep).unwrap_or(u64::MAX).max(1);
        let through = s.summary.version.saturating_sub(keep);
        let by_count = prefix_through(&v.summaries, |version, _| version <= through);
        cut.summaries_through_version = cut.summaries_through_version.max(by_count);
    }
    if let Some(days) = rule.audit_days {
        let before = cutoff(now, days);
        cut.audit_through_seq = prefix_through(&v.audits, |_, at| at <= before);
    }
    cut
}

/// Records an attempt that found nothing to fold: every turn after the
/// fold was removed by retention before it was summarized. No summary is
/// written; the audit says why, and the session is no longer due (its
/// attempt reached its last turn), so the scheduler does not come back.
pub(super) fn nothing_left(
    store: &dyn Store,
    (ns, session_id): (&str, &str),
    session: &Session,
    (through, gone): (u64, u64),
    trigger: Trigger,
) -> Result<()> {
    let why = format!(
        "turns {}–{gone} were removed by retention before they were summarized; nothing is left to fold",
        through + 1
    );
    tracing::warn!(namespace = ns, session_id, "{why}");
    let audit = AuditRecord {
        trigger: Some(trigger),
        covers_through_seq: through,
        validation_errors: vec![why],
        ..AuditRecord::new(AuditKind::SummaryAttempt, now_nanos())
    };
    store.save_summary(
        ns,
        session_id,
        SummaryWrite::without_summary(session.summary.version, audit, session.last_seq()),
    )?;
    knowledge::settle_episode(store, ns, session_id);
    Ok(())
}

/// How many records of each kind `cut` removes from the session seen in
/// `v`, and the oldest one's time per kind.
pub fn cut_counts(
    v: &RetentionView,
    cut: &SessionCut,
) -> (RetentionCounts, [Option<UnixNanos>; 5]) {
    let mut c = RetentionCounts::default();
    let mut oldest = [None; 5];
    if cut.turns_through_seq > v.mark.turns_through_seq {
        c.turns = cut.turns_through_seq - v.mark.turns_through_seq;
        oldest[0] = v.oldest_turn_at;
    }
    let summaries: Vec<_> = v
        .summaries
        .iter()
        .filter(|(version, _)| *version <= cut.summaries_through_version)
        .collect();
    c.summaries = summaries.len() as u64;
    oldest[1] = summaries.first().map(|(_, at)| *at);
    if cut.episode {
        c.episodes = 1;
        oldest[2] = v.episode_ended_at;
    }
    let audits: Vec<_> = v
        .audits
        .iter()
        .filter(|(seq, _)| *seq <= cut.audit_through_seq)
        .collect();
    c.audit_records = audits.len() as u64;
    oldest[3] = audits.first().map(|(_, at)| *at);
    (c, oldest)
}

/// Whether `rule` removes the fact `f` (with its history) at `now`.
pub fn fact_due(f: &Fact, rule: &RetentionRule, now: UnixNanos) -> bool {
    f.is_current()
        && rule
            .facts_days
            .is_some_and(|d| f.updated_at <= cutoff(now, d))
}

/// What is due in one namespace and kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KindDue {
    /// Records.
    pub count: u64,
    /// The oldest one's time (unix nanoseconds), when any.
    pub oldest: Option<UnixNanos>,
}

/// What a retention pass at a given time would remove: per namespace, per
/// kind (the names of [`RetentionCounts::KINDS`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RetentionPlan {
    /// The time it was made for.
    pub at: UnixNanos,
    /// Namespace -> kind -> what is due.
    pub namespaces: BTreeMap<String, BTreeMap<&'static str, KindDue>>,
}

impl RetentionPlan {
    fn add(&mut self, ns: &str, counts: &RetentionCounts, oldest: &[Option<UnixNanos>; 5]) {
        if counts.total() == 0 {
            return;
        }
        let kinds = self.namespaces.entry(ns.to_owned()).or_default();
        for ((kind, n), at) in RetentionCounts::KINDS
            .iter()
            .zip(counts.by_kind())
            .zip(oldest)
        {
            if n == 0 {
                continue;
            }
            let k = kinds.entry(kind).or_default();
            k.count += n;
            k.oldest = match (k.oldest, *at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }

    /// The totals per kind over every namespace.
    pub fn totals(&self) -> RetentionCounts {
        let mut t = RetentionCounts::default();
        for kinds in self.namespaces.values() {
            let get = |k: &str| kinds.get(k).map_or(0, |d| d.count);
            t.add(&RetentionCounts {
                turns: get("turns"),
                summaries: get("summaries"),
                episodes: get("episodes"),
                audit_records: get("audit_records"),
                facts: get("facts"),
            });
        }
        t
    }
}

/// Calls `f` with each session a table applies to that has something due
/// at `now`, and what is due of it. Reads a page of sessions at a time.
pub fn each_due_session(
    store: &dyn Store,
    policy: &RetentionPolicy,
    now: UnixNanos,
    f: &mut dyn FnMut(&RetentionView, SessionCut) -> Result<()>,
) -> Result<()> {
    let mut after: Option<(String, String)> = None;
    loop {
        let page = store.scan_sessions(
            after.as_ref().map(|(n, s)| (n.as_str(), s.as_str())),
            SCAN_PAGE,
        )?;
        let Some(resume) = page.resume_after else {
            return Ok(());
        };
        after = Some(resume);
        for s in &page.sessions {
            let Some(rule) = policy.for_namespace(&s.namespace) else {
                continue;
            };
            let Some(view) = store.retention_view(&s.namespace, &s.session_id, VIEW_LIMIT)? else {
                continue;
            };
            let cut = session_cut(&view, rule, now);
            if !cut.is_empty() {
                f(&view, cut)?;
            }
        }
    }
}

/// The chain of a current fact: it, then each version it superseded.
fn chain_of(store: &dyn Store, head: &Fact) -> Result<Vec<Fact>> {
    let mut chain = vec![head.clone()];
    let mut prev = head.supersedes.clone();
    // A bound against a cycle a damaged store could hold.
    while !prev.is_empty() && chain.len() < 100_000 {
        match store.get_fact(&head.namespace, &prev) {
            Ok(f) => {
                prev = f.supersedes.clone();
                chain.push(f);
            }
            Err(Error::NotFound(_)) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(chain)
}

/// Receives the due fact chains of one subject: (namespace, subject,
/// chains, each a current version then the versions it superseded).
pub type DueChains<'a> = dyn FnMut(&str, &str, Vec<Vec<Fact>>) -> Result<()> + 'a;

/// Calls `f` with each page's due fact chains of one subject: (namespace,
/// subject, chains). Pages through every namespace's facts.
pub fn each_due_fact_page(
    store: &dyn Store,
    policy: &RetentionPolicy,
    now: UnixNanos,
    f: &mut DueChains<'_>,
) -> Result<()> {
    if !policy.removes_facts() {
        return Ok(());
    }
    let mut after: Option<Vec<u8>> = None;
    loop {
        let (facts, resume) = store.scan_facts(after.as_deref(), SCAN_PAGE)?;
        let mut groups: BTreeMap<(String, String), Vec<Vec<Fact>>> = BTreeMap::new();
        for fact in &facts {
            let due = policy
                .for_namespace(&fact.namespace)
                .is_some_and(|rule| fact_due(fact, rule, now));
            if due {
                groups
                    .entry((fact.namespace.clone(), fact.subject_id.clone()))
                    .or_default()
                    .push(chain_of(store, fact)?);
            }
        }
        for ((ns, subject), chains) in groups {
            f(&ns, &subject, chains)?;
        }
        match resume {
            Some(r) if !facts.is_empty() => after = Some(r),
            _ => return Ok(()),
        }
    }
}

/// What a pass at `now` would remove (`mnemo retention --dry-run`).
pub fn plan(store: &dyn Store, policy: &RetentionPolicy, now: UnixNanos) -> Result<RetentionPlan> {
    let mut plan = RetentionPlan {
        at: now,
        ..Default::default()
    };
    each_due_session(store, policy, now, &mut |view, cut| {
        let (counts, oldest) = cut_counts(view, &cut);
        plan.add(&view.session.namespace, &counts, &oldest);
        Ok(())
    })?;
    each_due_fact_page(store, policy, now, &mut |ns, _, chains| {
        for chain in chains {
            let counts = RetentionCounts {
                facts: chain.len() as u64,
                ..Default::default()
            };
            let oldest = chain.iter().map(|f| f.updated_at).min();
            plan.add(ns, &counts, &[None, None, None, None, oldest]);
        }
        Ok(())
    })?;
    Ok(plan)
}

impl Memory {
    /// The turns retention removed from a session, if any.
    pub async fn turns_removed(
        &self,
        ns: &str,
        session_id: &str,
    ) -> Result<Option<crate::model::TurnsRemoved>> {
        let (n, id) = (ns.to_owned(), session_id.to_owned());
        self.blocking(move |st| Ok(st.retention_mark(&n, &id)?.turns_removed()))
            .await
    }

    /// What retention removed of each of `session_ids` (in that order),
    /// for listings of records that cite their turns (episodes).
    pub async fn sessions_turns_removed(
        &self,
        ns: &str,
        session_ids: Vec<String>,
    ) -> Result<Vec<Option<crate::model::TurnsRemoved>>> {
        let n = ns.to_owned();
        self.blocking(move |st| {
            session_ids
                .iter()
                .map(|id| Ok(st.retention_mark(&n, id)?.turns_removed()))
                .collect()
        })
        .await
    }

    /// Sessions with something due at `now` (namespace, session id), to
    /// be claimed.
    pub async fn retention_due(
        &self,
        policy: RetentionPolicy,
        now: UnixNanos,
    ) -> Result<Vec<(String, String)>> {
        self.blocking(move |st| {
            let mut due = Vec::new();
            each_due_session(st, &policy, now, &mut |v, _| {
                due.push((v.session.namespace.clone(), v.session.session_id.clone()));
                Ok(())
            })?;
            Ok(due)
        })
        .await
    }

    /// Removes what `policy` no longer keeps of one session at `now`, a
    /// batch per unit of work, yielding between batches.
    pub async fn retain_session(
        &self,
        policy: &RetentionPolicy,
        ns: &str,
        session_id: &str,
        now: UnixNanos,
    ) -> Result<RetentionCounts> {
        let Some(rule) = policy.for_namespace(ns).cloned() else {
            return Ok(RetentionCounts::default());
        };
        let mut total = RetentionCounts::default();
        loop {
            let (n, id, r) = (ns.to_owned(), session_id.to_owned(), rule.clone());
            let removed = self
                .blocking(move |st| {
                    let Some(view) = st.retention_view(&n, &id, VIEW_LIMIT)? else {
                        return Ok(RetentionCounts::default());
                    };
                    let cut = session_cut(&view, &r, now);
                    if cut.is_empty() {
                        return Ok(RetentionCounts::default());
                    }
                    st.retain_session(&n, &id, &cut, RETENTION_BATCH, now)
                })
                .await?;
            total.add(&removed);
            if removed.total() > 0 {
                // Wakes the indexer for the outbox entries.
                self.notify(Event::KnowledgeChanged {
                    namespace: Some(ns),
                    subject_id: None,
                    session_id: Some(session_id),
                });
            }
            if (removed.total() as usize) < RETENTION_BATCH {
                return Ok(total);
            }
            tokio::task::yield_now().await;
        }
    }

    /// Removes the facts `policy` no longer keeps at `now`, every
    /// namespace's, whole chains of one subject per unit of work (about
    /// [`RETENTION_BATCH`] versions each). Returns the versions removed.
    pub async fn retain_facts(&self, policy: &RetentionPolicy, now: UnixNanos) -> Result<u64> {
        let p = policy.clone();
        let n = self
            .blocking(move |st| {
                let mut n = 0u64;
                each_due_fact_page(st, &p, now, &mut |ns, subject, chains| {
                    let ids: Vec<Vec<String>> = chains
                        .iter()
                        .map(|c| c.iter().map(|f| f.fact_id.clone()).collect())
                        .collect();
                    let rule = p.for_namespace(ns).cloned().unwrap_or_default();
                    // Whole chains per unit of work, about a batch of
                    // versions each (one chain longer than a batch goes
                    // alone).
                    let mut part: Vec<Vec<String>> = Vec::new();
                    let mut versions = 0;
                    for chain in ids {
                        if versions > 0 && versions + chain.len() > RETENTION_BATCH {
                            n +=
                                st.retain_facts(ns, subject, &part, &|f| fact_due(f, &rule, now))?;
                            part.clear();
                            versions = 0;
                        }
                        versions += chain.len();
                        part.push(chain);
                    }
                    if !part.is_empty() {
                        n += st.retain_facts(ns, subject, &part, &|f| fact_due(f, &rule, now))?;
                    }
                    Ok(())
                })?;
                Ok(n)
            })
            .await?;
        if n > 0 {
            self.notify(Event::KnowledgeChanged {
                namespace: None,
                subject_id: None,
                session_id: None,
            });
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RetentionMark, Session};

    fn view(state: SessionState, last_active_at: UnixNanos) -> RetentionView {
        let mut s = Session::new("ns", "s", Default::default(), 0);
        s.state = state;
        s.last_active_at = last_active_at;
        s.next_seq = 11;
        s.turn_count = 10;
        s.summary.version = 3;
        s.summary.through_seq = 10;
        RetentionView {
            session: s,
            mark: RetentionMark::default(),
            oldest_turn_at: Some(1),
            summaries: vec![(1, 10 * DAY), (2, 20 * DAY), (3, 30 * DAY)],
            audits: vec![(1, 10 * DAY), (2, 20 * DAY), (3, 30 * DAY)],
            episode_ended_at: Some(30 * DAY),
        }
    }

    fn rule() -> RetentionRule {
        RetentionRule {
            namespace: "ns".into(),
            turns_days: Some(5),
            summaries_days: Some(5),
            audit_days: Some(5),
            facts_days: Some(5),
            summary_versions: None,
        }
    }

    const DAY: i64 = NANOS_PER_DAY;

    #[test]
    fn turns_go_only_from_closed_sessions_once_old_enough() {
        let closed = view(SessionState::Closed, 30 * DAY);
        assert_eq!(
            session_cut(&closed, &rule(), 35 * DAY - 1).turns_through_seq,
            0
        );
        assert_eq!(
            session_cut(&closed, &rule(), 35 * DAY).turns_through_seq,
            10
        );
        for state in [SessionState::Active, SessionState::Idle] {
            let v = view(state, 30 * DAY);
            assert_eq!(session_cut(&v, &rule(), 1000 * DAY).turns_through_seq, 0);
        }
        // Already removed: nothing more.
        let mut done = closed.clone();
        done.mark.turns_through_seq = 10;
        assert_eq!(session_cut(&done, &rule(), 1000 * DAY).turns_through_seq, 0);
        let counts = cut_counts(&closed, &session_cut(&closed, &rule(), 35 * DAY)).0;
        assert_eq!(counts.turns, 10);
        // Not yet summarized through its last turn: the turns wait for the
        // final summary; an attempt (even a refused one) lets them go.
        let mut behind = closed.clone();
        behind.session.summary.through_seq = 8;
        assert_eq!(
            session_cut(&behind, &rule(), 1000 * DAY).turns_through_seq,
            0
        );
        behind.session.summary.attempted_through_seq = 10;
        assert_eq!(
            session_cut(&behind, &rule(), 1000 * DAY).turns_through_seq,
            10
        );
    }

    #[test]
    fn summaries_are_a_prefix_and_the_latest_stays_while_not_closed() {
        let open = view(SessionState::Active, 30 * DAY);
        // At day 26 versions 1 and 2 are 5 days old or more.
        let cut = session_cut(&open, &rule(), 26 * DAY);
        assert_eq!(cut.summaries_through_version, 2);
        assert_eq!(cut.audit_through_seq, 2);
        assert!(!cut.episode);
        // Far later: the open session keeps its latest, a closed one not.
        assert_eq!(
            session_cut(&open, &rule(), 999 * DAY).summaries_through_version,
            2
        );
        let closed = view(SessionState::Closed, 30 * DAY);
        let cut = session_cut(&closed, &rule(), 999 * DAY);
        assert_eq!(
            (cut.summaries_through_version, cut.audit_through_seq),
            (3, 3)
        );
        assert!(cut.episode);
        let (c, oldest) = cut_counts(&closed, &cut);
        assert_eq!((c.summaries, c.episodes, c.audit_records), (3, 1, 3));
        assert_eq!(oldest[1], Some(10 * DAY));
        // A kind left out is kept.
        let keep = RetentionRule {
            namespace: "ns".into(),
            ..Default::default()
        };
        assert!(session_cut(&closed, &keep, 999 * DAY).is_empty());
    }

    #[test]
    fn a_session_keeps_its_newest_summary_versions_whatever_their_age() {
        // Versions 1 to 3, the latest 3, written minutes ago.
        let v = view(SessionState::Active, 30 * DAY);
        let keep = |n| RetentionRule {
            namespace: "ns".into(),
            summary_versions: Some(n),
            ..Default::default()
        };
        let now = 30 * DAY;
        assert_eq!(session_cut(&v, &keep(2), now).summaries_through_version, 1);
        assert_eq!(session_cut(&v, &keep(1), now).summaries_through_version, 2);
        assert!(session_cut(&v, &keep(3), now).is_empty());
        assert!(session_cut(&v, &keep(100), now).is_empty());
        // Already removed: nothing more.
        let mut done = v.clone();
        done.summaries.remove(0);
        assert!(session_cut(&done, &keep(2), now).is_empty());
        // With a period too, the larger cut wins; the latest always stays.
        let both = RetentionRule {
            summaries_days: Some(5),
            ..keep(2)
        };
        assert_eq!(
            session_cut(&v, &both, 999 * DAY).summaries_through_version,
            2
        );
    }

    #[test]
    fn cutoffs_do_not_overflow() {
        assert_eq!(cutoff(i64::MIN + 5, 365_000), i64::MIN);
        assert_eq!(cutoff(10 * DAY, 1), 9 * DAY);
    }
}
