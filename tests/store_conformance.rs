//! The conformance suite of the store's ports (`SessionStore`,
//! `SummaryStore`, `KnowledgeStore`, `Outbox`, and `Store` itself): every
//! method, on the in-memory engine and on sled (on real files), must behave
//! the same. The domain decides and the store applies, so the plans these
//! tests hand the store come from the domain's own rules
//! (`memory::append`, `memory::facts`, `memory::episodes`), or are built by
//! hand where a test needs a plan the domain would never make. Every
//! refused write is checked to leave the stored data exactly as it was
//! (see [`snapshot`]). Sled-only tests cover reopening a store; tests
//! marked `ignore` show bugs found here and not fixed yet. `Claims` is
//! covered too (leases, fencing, take-over).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use mnemo::error::Precondition;
use mnemo::memory::append::{self, OwnerChange, PreparedAppend};
use mnemo::memory::{episodes, facts, knowledge};
use mnemo::model::*;
use mnemo::store::engine::{Batch, Engine, Entry, MemoryEngine, Read, Write};
use mnemo::store::postgres::PgOptions;
use mnemo::store::{
    keys, AppendPlan, Appended, EpisodePlan, FactFate, KnowledgeStore, KvStore, MemoryStore,
    Outbox, PgStore, Removed, SessionStore, SledStore, Store, SummaryStore, SummaryWrite,
};
use mnemo::{Error, Result};

#[path = "common/postgres.rs"]
mod pg;

/// A limit no test reaches.
const BIG: usize = 1_000_000;
/// The outbox consumer [`snapshot`] reads with (it never advances).
const PEEK: &str = "conformance-peek";

// ---------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------

fn session(ns: &str, id: &str, subject: &str) -> Session {
    let mut s = Session::new(ns, id, SessionSettings::default(), 1);
    s.subject_id = subject.into();
    s
}

fn prepared(texts: &[&str], key: Option<&str>, expected: Option<u64>) -> PreparedAppend {
    let turns: Vec<NewTurn> = texts
        .iter()
        .map(|t| NewTurn {
            role: Role::User,
            speaker: "u".into(),
            content: (*t).into(),
            client_time: None,
            tool_call: None,
            metadata: BTreeMap::new(),
        })
        .collect();
    let mut fingerprint = [0u8; 32];
    for (i, b) in texts.concat().bytes().enumerate() {
        fingerprint[i % 32] ^= b;
    }
    PreparedAppend {
        token_counts: texts.iter().map(|t| t.len() as u32).collect(),
        turns,
        idempotency_key: key.map(Into::into),
        fingerprint,
        expected_next_seq: expected,
        lease_epoch: None,
        handoff: None,
        now: 7,
    }
}

/// Appends by the domain's rules (`append::plan`).
fn append_to(store: &dyn Store, ns: &str, id: &str, p: &PreparedAppend) -> Result<Appended> {
    store.append_turns(ns, id, p.idempotency_key.as_deref(), &mut |s, prev| {
        append::plan(s, prev, p)
    })
}

fn append_texts(store: &dyn Store, ns: &str, id: &str, texts: &[&str]) -> Appended {
    append_to(store, ns, id, &prepared(texts, None, None)).unwrap()
}

fn contents(store: &dyn Store, ns: &str, id: &str) -> Vec<String> {
    store
        .list_turns(ns, id, 1, u64::MAX, 10_000)
        .unwrap()
        .into_iter()
        .map(|t| t.content)
        .collect()
}

fn turn(seq: u64, text: &str) -> Turn {
    Turn {
        seq,
        role: Role::User,
        speaker: "u".into(),
        content: text.into(),
        client_time: None,
        server_time: 7,
        tool_call: None,
        metadata: BTreeMap::new(),
        token_count: 1,
    }
}

/// A hand-made append plan: turns with `seqs`, the session with
/// `next_seq` and a title only this plan sets.
fn write_plan(current: &Session, seqs: &[u64], next_seq: u64) -> AppendPlan {
    let mut session = current.clone();
    session.next_seq = next_seq;
    session.turn_count = next_seq.saturating_sub(1);
    session.title = "set by the plan".into();
    AppendPlan::Write {
        turns: seqs
            .iter()
            .map(|&q| turn(q, &format!("turn {q}")))
            .collect(),
        session: Box::new(session),
        outcome: AppendOutcome {
            first_seq: seqs.first().copied().unwrap_or(0),
            last_seq: seqs.last().copied().unwrap_or(0),
            token_counts: vec![1; seqs.len()],
            total_tokens: 42,
            replayed: false,
        },
        fingerprint: [9; 32],
    }
}

fn action(text: &str, seq: u64) -> PendingAction {
    PendingAction {
        action: text.into(),
        owner: "agent".into(),
        deadline: String::new(),
        status: ActionStatus::Pending,
        depends_on: Vec::new(),
        priority: Priority::Medium,
        evidence_seqs: vec![seq],
        requires_human_review: false,
    }
}

fn summary(version: u64, through: u64, actions: Vec<PendingAction>) -> SessionSummary {
    SessionSummary {
        user_intent: format!("intent {version}"),
        user_intent_seq: 1,
        topic: format!("topic {version}"),
        outcome: Outcome::InProgress,
        decisions: Vec::new(),
        pending_actions: actions,
        open_questions: Vec::new(),
        key_facts: Vec::new(),
        tool_calls: Vec::new(),
        artifacts: Vec::new(),
        context_health: ContextHealth::default(),
        truncated: String::new(),
        errors_and_anomalies: Vec::new(),
        unresolved_conflicts: Vec::new(),
        participants: Vec::new(),
        topics: Vec::new(),
        prose: format!("prose {version}"),
        covers_through_seq: through,
        version,
        trigger: Trigger::Requested,
        created_at: 100 + version as i64,
        duration_seconds: 0,
        total_turns: through,
        requires_human_review: false,
    }
}

fn fold(version: u64, through: u64) -> FoldRecord {
    FoldRecord {
        summarizer: "test".into(),
        format: 1,
        state: vec![version as u8; 3],
        through_seq: through,
        through_tokens: through * 10,
        chain_hash: [version as u8; 32],
    }
}

/// The audit record of a summary attempt. Its `audit_seq` is deliberately
/// wrong: the store assigns it.
fn attempt_audit(version: u64, through: u64) -> AuditRecord {
    AuditRecord {
        audit_seq: 99,
        summary_version: version,
        trigger: Some(Trigger::Requested),
        covers_through_seq: through,
        pre_summary_tokens: through * 10,
        post_summary_tokens: 5,
        compression_ratio: 2.0,
        summarizer: "test".into(),
        validation_passed: version > 0,
        validation_errors: if version > 0 {
            Vec::new()
        } else {
            vec!["refused".into()]
        },
        ..AuditRecord::new(AuditKind::SummaryAttempt, 5)
    }
}

fn resolution_audit(review_id: &str, status: ReviewStatus, reviewer: &str) -> AuditRecord {
    AuditRecord {
        kind: AuditKind::ReviewResolved,
        summary_version: 0,
        trigger: None,
        covers_through_seq: 0,
        validation_passed: true,
        review_id: review_id.into(),
        review_status: Some(status),
        reviewer: reviewer.into(),
        comment: "checked".into(),
        reviewer_key: format!("key-{reviewer}"),
        ..attempt_audit(0, 0)
    }
}

fn review(ns: &str, id: &str, session_id: &str, version: u64) -> ReviewItem {
    ReviewItem {
        review_id: id.into(),
        namespace: ns.into(),
        session_id: session_id.into(),
        summary_version: version,
        items: vec![format!("refund ({id})")],
        status: ReviewStatus::Pending,
        reviewer: String::new(),
        comment: String::new(),
        created_at: 3,
        resolved_at: 0,
        reviewer_key: String::new(),
    }
}

/// Stores summary `version` (from `version - 1`) covering `1..=through`.
fn summarize(
    store: &dyn Store,
    ns: &str,
    id: &str,
    version: u64,
    through: u64,
    review: Option<ReviewItem>,
) -> Session {
    store
        .save_summary(
            ns,
            id,
            SummaryWrite {
                base_version: version - 1,
                summary: Some(summary(version, through, Vec::new())),
                fold: Some(fold(version, through)),
                audit: attempt_audit(version, through),
                review,
                attempted_through_seq: through,
            },
        )
        .unwrap()
}

/// A CLOSED session of `subject` with three turns and summary version 1,
/// which holds `actions` (text, first evidence seq).
fn stopped_session(
    store: &dyn Store,
    ns: &str,
    id: &str,
    subject: &str,
    actions: &[(&str, u64)],
) -> Session {
    store.create_session(&session(ns, id, subject)).unwrap();
    append_texts(store, ns, id, &["one", "two", "three"]);
    let actions = actions.iter().map(|(t, q)| action(t, *q)).collect();
    store
        .save_summary(
            ns,
            id,
            SummaryWrite {
                base_version: 0,
                summary: Some(summary(1, 3, actions)),
                fold: Some(fold(1, 3)),
                audit: attempt_audit(1, 3),
                review: None,
                attempted_through_seq: 3,
            },
        )
        .unwrap();
    close(store, ns, id)
}

fn close(store: &dyn Store, ns: &str, id: &str) -> Session {
    store
        .update_session(ns, id, &mut |s| {
            s.state = SessionState::Closed;
            Ok(())
        })
        .unwrap()
}

/// Writes a session's episode by the domain's rule, ended at `ended_at`.
fn settle(store: &dyn Store, ns: &str, id: &str, ended_at: i64) -> Option<Episode> {
    store
        .save_episode(ns, id, &mut |s, summary, statuses| {
            Ok(episodes::plan_episode(s, summary, statuses, ended_at))
        })
        .unwrap()
}

/// Sets an action's status by the domain's rule.
fn set_status(
    store: &dyn Store,
    ns: &str,
    session_id: &str,
    seq: u64,
    status: ActionStatus,
) -> Result<PendingAction> {
    let action = ActionRef {
        session_id: session_id.into(),
        action_seq: seq,
    };
    store.set_action_status(ns, &action, status, &mut |s, summary, episode| {
        episodes::plan_action_status(s, summary, episode, seq, status)
    })
}

fn new_fact(key: &str, text: &str, origin: FactOrigin) -> NewFact {
    new_fact_of("u", key, text, origin)
}

fn new_fact_of(subject: &str, key: &str, text: &str, origin: FactOrigin) -> NewFact {
    NewFact {
        namespace: "ns".into(),
        subject_id: subject.into(),
        key: key.into(),
        text: text.into(),
        source: None,
        tags: Vec::new(),
        origin,
    }
}

/// Stores a fact by the domain's rules (`memory::knowledge::put_fact`).
fn put(store: &dyn Store, new: &NewFact) -> (Fact, PutOutcome) {
    knowledge::put_fact(store, new).unwrap()
}

/// As [`put`], with a chosen fact id and time (ids order facts).
fn put_with_id(store: &dyn Store, new: &NewFact, id: &str, now: i64) -> FactPlan {
    let identity = FactIdentity::of(&new.key, &new.text);
    store
        .put_fact(&new.namespace, &new.subject_id, &identity, &mut |current| {
            let (same_key, same_words) = if new.key.is_empty() {
                (None, current)
            } else {
                (current, None)
            };
            Ok(facts::plan_put(new, same_key, same_words, id.into(), now))
        })
        .unwrap()
}

fn filter(subject: Option<&str>, history: bool) -> FactFilter {
    FactFilter {
        subject_id: subject.map(Into::into),
        include_history: history,
        ..FactFilter::default()
    }
}

fn ids(facts: &[Fact]) -> Vec<&str> {
    facts.iter().map(|f| f.fact_id.as_str()).collect()
}

// ---------------------------------------------------------------------------
// Reading everything back
// ---------------------------------------------------------------------------

/// Everything stored about one session.
#[derive(Debug, Clone, PartialEq)]
struct Records {
    session: Session,
    turns: Vec<Turn>,
    summaries: Vec<SessionSummary>,
    fold: Option<FoldRecord>,
    audit: Vec<AuditRecord>,
    episode: Option<Episode>,
    statuses: BTreeMap<u64, ActionStatus>,
}

/// Everything a store holds that its ports can read (idempotency records
/// only show through appends), across namespaces.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    sessions: BTreeMap<(String, String), Records>,
    unreadable: Vec<String>,
    reviews: BTreeMap<String, Vec<ReviewItem>>,
    facts: Vec<Fact>,
    episodes: Vec<Episode>,
    carried: BTreeMap<(String, String), Vec<CarriedAction>>,
    outbox: Vec<(u64, IndexChange)>,
}

fn all_sessions(store: &dyn Store, page: usize) -> (Vec<Session>, Vec<String>) {
    let (mut sessions, mut unreadable) = (Vec::new(), Vec::new());
    let mut after: Option<(String, String)> = None;
    for _ in 0..BIG {
        let scan = store
            .scan_sessions(after.as_ref().map(|(n, i)| (n.as_str(), i.as_str())), page)
            .unwrap();
        assert!(scan.sessions.len() + scan.unreadable.len() <= page);
        sessions.extend(scan.sessions);
        unreadable.extend(scan.unreadable);
        match scan.resume_after {
            Some(a) => after = Some(a),
            None => return (sessions, unreadable),
        }
    }
    panic!("scan_sessions does not end");
}

fn all_facts(store: &dyn Store, page: usize) -> Vec<Fact> {
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    for _ in 0..BIG {
        let (facts, resume) = store.scan_facts(after.as_deref(), page).unwrap();
        assert!(facts.len() <= page);
        out.extend(facts);
        match resume {
            Some(r) => after = Some(r),
            None => return out,
        }
    }
    panic!("scan_facts does not end");
}

fn all_episodes(store: &dyn Store, page: usize) -> Vec<Episode> {
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    for _ in 0..BIG {
        let (episodes, resume) = store.scan_episodes(after.as_deref(), page).unwrap();
        assert!(episodes.len() <= page);
        out.extend(episodes);
        match resume {
            Some(r) => after = Some(r),
            None => return out,
        }
    }
    panic!("scan_episodes does not end");
}

/// The outbox as the never-advancing consumer [`PEEK`] sees it.
fn outbox(store: &dyn Store) -> Vec<(u64, IndexChange)> {
    store.read_outbox(PEEK, BIG).unwrap().entries
}

/// Outbox entries added since `before` was read.
fn new_entries(store: &dyn Store, before: &[(u64, IndexChange)]) -> Vec<IndexChange> {
    let last = before.last().map_or(0, |(id, _)| *id);
    outbox(store)
        .into_iter()
        .filter(|(id, _)| *id > last)
        .map(|(_, c)| c)
        .collect()
}

/// Reads back everything: a refused write must leave this unchanged.
fn snapshot(store: &dyn Store) -> Snapshot {
    let (sessions, unreadable) = all_sessions(store, 1000);
    let facts = all_facts(store, 1000);
    let episodes = all_episodes(store, 1000);
    let mut namespaces: BTreeSet<String> = ["ns", "ns2", "other"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut subjects = BTreeSet::new();
    for s in &sessions {
        namespaces.insert(s.namespace.clone());
        subjects.insert((s.namespace.clone(), s.subject_id.clone()));
    }
    for f in &facts {
        subjects.insert((f.namespace.clone(), f.subject_id.clone()));
    }
    for e in &episodes {
        subjects.insert((e.namespace.clone(), e.subject_id.clone()));
    }
    let sessions = sessions
        .into_iter()
        .map(|s| {
            let (ns, id) = (s.namespace.clone(), s.session_id.clone());
            let records = Records {
                turns: store.list_turns(&ns, &id, 1, u64::MAX, BIG).unwrap(),
                summaries: store.list_summaries(&ns, &id, u64::MAX, BIG).unwrap(),
                fold: store.fold_record(&ns, &id).unwrap(),
                audit: store.list_audit(&ns, &id, 0, BIG).unwrap(),
                episode: store.get_episode(&ns, &id).unwrap(),
                statuses: store.action_statuses(&ns, &id).unwrap(),
                session: s,
            };
            ((ns, id), records)
        })
        .collect();
    let reviews = namespaces
        .into_iter()
        .map(|ns| {
            let (items, resume) = store.list_review_items(&ns, None, true, BIG, BIG).unwrap();
            assert!(resume.is_none());
            (ns, items)
        })
        .collect();
    let carried = subjects
        .into_iter()
        .map(|(ns, subject)| {
            let c = store.carried_actions(&ns, &subject, BIG).unwrap();
            ((ns, subject), c)
        })
        .collect();
    Snapshot {
        sessions,
        unreadable,
        reviews,
        facts,
        episodes,
        carried,
        outbox: outbox(store),
    }
}

fn key(ns: &str, id: &str) -> (String, String) {
    (ns.into(), id.into())
}

/// The "unchanged" checks mean something only if [`snapshot`] sees every
/// kind of write: each write below must change it.
fn snapshot_sees_every_kind_of_write(store: &dyn Store) {
    let mut last = snapshot(store);
    let mut changed = |what: &str, store: &dyn Store| {
        let now = snapshot(store);
        assert_ne!(now, last, "{what} did not show in the snapshot");
        last = now;
    };
    store.create_session(&session("ns", "s", "alice")).unwrap();
    changed("a session", store);
    append_texts(store, "ns", "s", &["one", "two"]);
    changed("turns", store);
    store
        .save_summary(
            "ns",
            "s",
            SummaryWrite {
                base_version: 0,
                summary: Some(summary(1, 2, vec![action("call back", 1)])),
                fold: Some(fold(1, 2)),
                audit: attempt_audit(1, 2),
                review: Some(review("ns", "r1", "s", 1)),
                attempted_through_seq: 2,
            },
        )
        .unwrap();
    changed("a summary", store);
    store
        .resolve_review_item(
            "ns",
            "r1",
            resolution_audit("r1", ReviewStatus::Approved, "ann"),
            &mut |item| {
                Ok(ReviewItem {
                    status: ReviewStatus::Approved,
                    ..item.clone()
                })
            },
        )
        .unwrap();
    changed("a resolved review", store);
    close(store, "ns", "s");
    changed("a session update", store);
    settle(store, "ns", "s", 1000).expect("an episode");
    changed("an episode", store);
    set_status(store, "ns", "s", 1, ActionStatus::InProgress).unwrap();
    changed("an action status", store);
    let (fact, _) = put(
        store,
        &new_fact_of("alice", "", "Has a dog", FactOrigin::Client),
    );
    changed("a fact", store);
    store.delete_fact("ns", &fact.fact_id).unwrap();
    changed("a deleted fact", store);
    store.delete_session("ns", "s").unwrap();
    changed("a deleted session", store);
}

// ---------------------------------------------------------------------------
// SessionStore
// ---------------------------------------------------------------------------

fn sessions_create_get_and_conflict(store: &dyn Store) {
    store.create_session(&session("ns", "a", "")).unwrap();
    assert_eq!(
        store.get_session("ns", "a").unwrap(),
        session("ns", "a", "")
    );
    let before = snapshot(store);
    assert!(matches!(
        store.create_session(&session("ns", "a", "x")),
        Err(Error::AlreadyExists(_))
    ));
    assert_eq!(
        store.get_session("ns", "a").unwrap().subject_id,
        "",
        "unchanged"
    );
    assert_eq!(snapshot(store), before);
    assert!(matches!(
        store.get_session("ns", "b"),
        Err(Error::NotFound(_))
    ));
    assert!(
        matches!(store.get_session("other", "a"), Err(Error::NotFound(_))),
        "namespaces are separate"
    );
    // The same id in another namespace is another session.
    store.create_session(&session("other", "a", "x")).unwrap();
    assert_eq!(store.get_session("other", "a").unwrap().subject_id, "x");
    assert_eq!(store.get_session("ns", "a").unwrap().subject_id, "");
}

fn append_assigns_gap_free_seqs_and_counters(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    let appended = append_to(store, "ns", "s", &prepared(&["ab", "cde"], None, None)).unwrap();
    let o = &appended.outcome;
    assert_eq!(
        (o.first_seq, o.last_seq, o.total_tokens, o.replayed),
        (1, 2, 5, false)
    );
    assert_eq!(appended.previous_state, SessionState::Active);
    assert_eq!(appended.session, store.get_session("ns", "s").unwrap());
    let o = append_to(store, "ns", "s", &prepared(&["f"], None, Some(3)))
        .unwrap()
        .outcome;
    assert_eq!((o.first_seq, o.last_seq, o.total_tokens), (3, 3, 6));
    let s = store.get_session("ns", "s").unwrap();
    assert_eq!(
        (s.turn_count, s.next_seq, s.total_tokens, s.updated_at),
        (3, 4, 6, 7)
    );
    let turns = store.list_turns("ns", "s", 1, u64::MAX, 100).unwrap();
    assert_eq!(turns.iter().map(|t| t.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(turns[1].token_count, 3);
    assert_eq!(turns[1].server_time, 7);
    // Ranges and limits.
    let mid = store.list_turns("ns", "s", 2, 2, 100).unwrap();
    assert_eq!(mid.len(), 1);
    assert_eq!(mid[0].content, "cde");
    assert_eq!(
        store.list_turns("ns", "s", 2, u64::MAX, 1).unwrap().len(),
        1
    );
    assert!(store
        .list_turns("ns", "s", 4, u64::MAX, 10)
        .unwrap()
        .is_empty());
    assert!(store.list_turns("ns", "s", 3, 2, 10).unwrap().is_empty());
    assert!(matches!(
        store.list_turns("ns", "nope", 1, 9, 10),
        Err(Error::NotFound(_))
    ));
    // An append wakes an idle session, and says it was idle.
    store
        .update_session("ns", "s", &mut |s| {
            s.state = SessionState::Idle;
            Ok(())
        })
        .unwrap();
    let woken = append_texts(store, "ns", "s", &["g"]);
    assert_eq!(woken.previous_state, SessionState::Idle);
    assert_eq!(woken.session.state, SessionState::Active);
    assert_eq!(
        store.get_session("ns", "s").unwrap().state,
        SessionState::Active
    );
    let before = snapshot(store);
    assert!(matches!(
        append_to(store, "ns", "nope", &prepared(&["x"], None, None)),
        Err(Error::NotFound(_))
    ));
    assert_eq!(snapshot(store), before);
}

fn conflicts_and_closed_sessions_write_nothing(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    append_texts(store, "ns", "s", &["a"]);
    let before = snapshot(store);
    let e = append_to(store, "ns", "s", &prepared(&["b"], None, Some(1))).unwrap_err();
    assert!(
        matches!(e, Error::Aborted(ref m) if m.contains("next_seq 2")),
        "{e:?}"
    );
    assert_eq!(snapshot(store), before);
    // A failing update changes nothing.
    let e = store
        .update_session("ns", "s", &mut |s| {
            s.title = "changed".into();
            Err(Error::FailedPrecondition(
                Precondition::SessionClosed,
                "no".into(),
            ))
        })
        .unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(..)));
    assert_eq!(store.get_session("ns", "s").unwrap().title, "");
    assert_eq!(snapshot(store), before);
    // Fencing: a stale lease epoch writes nothing.
    let mut handoff = prepared(&["handing off"], None, None);
    handoff.handoff = Some(OwnerChange {
        from_agent: String::new(),
        to_agent: "agent-b".into(),
    });
    let moved = append_to(store, "ns", "s", &handoff).unwrap().session;
    assert_eq!(
        (moved.owner_agent.as_str(), moved.lease_epoch),
        ("agent-b", 2)
    );
    assert_eq!(store.get_session("ns", "s").unwrap(), moved);
    let before = snapshot(store);
    let mut stale = prepared(&["late"], None, None);
    stale.lease_epoch = Some(1);
    assert!(matches!(
        append_to(store, "ns", "s", &stale),
        Err(Error::FailedPrecondition(Precondition::StaleLeaseEpoch, _))
    ));
    assert_eq!(snapshot(store), before);
    store
        .update_session("ns", "s", &mut |s| {
            s.state = SessionState::Closed;
            Ok(())
        })
        .unwrap();
    let before = snapshot(store);
    let e = append_to(store, "ns", "s", &prepared(&["c"], None, None)).unwrap_err();
    assert!(matches!(
        e,
        Error::FailedPrecondition(Precondition::SessionClosed, _)
    ));
    assert_eq!(contents(store, "ns", "s"), ["a", "handing off"]);
    assert_eq!(snapshot(store), before);
}

fn idempotency_replays_and_detects_reuse(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    let first = append_to(store, "ns", "s", &prepared(&["a", "b"], Some("k"), None))
        .unwrap()
        .outcome;
    let before = snapshot(store);
    let again = append_to(store, "ns", "s", &prepared(&["a", "b"], Some("k"), None))
        .unwrap()
        .outcome;
    assert!(again.replayed);
    assert_eq!(
        (again.first_seq, again.last_seq),
        (first.first_seq, first.last_seq)
    );
    assert_eq!(snapshot(store), before, "a replay writes nothing");
    let e = append_to(store, "ns", "s", &prepared(&["zz"], Some("k"), None)).unwrap_err();
    assert!(matches!(
        e,
        Error::FailedPrecondition(Precondition::IdempotencyKeyReused, _)
    ));
    assert_eq!(snapshot(store), before);
    // A replay is answered even after the session closed.
    store
        .update_session("ns", "s", &mut |s| {
            s.state = SessionState::Closed;
            Ok(())
        })
        .unwrap();
    let before = snapshot(store);
    assert!(
        append_to(store, "ns", "s", &prepared(&["a", "b"], Some("k"), None))
            .unwrap()
            .outcome
            .replayed
    );
    assert_eq!(contents(store, "ns", "s"), ["a", "b"]);
    assert_eq!(snapshot(store), before);
}

fn append_applies_the_plan_of_decide(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    // decide sees the stored session and the record under the key.
    let p = prepared(&["a", "b"], Some("k"), None);
    let mut seen = Vec::new();
    let first = store
        .append_turns("ns", "s", Some("k"), &mut |s, prev| {
            seen.push((s.clone(), prev.cloned()));
            append::plan(s, prev, &p)
        })
        .unwrap();
    assert_eq!(seen, [(session("ns", "s", ""), None)]);
    seen.clear();
    store
        .append_turns("ns", "s", Some("k"), &mut |s, prev| {
            seen.push((s.clone(), prev.cloned()));
            append::plan(s, prev, &p)
        })
        .unwrap();
    let record = IdempotencyRecord {
        fingerprint: p.fingerprint,
        outcome: first.outcome.clone(),
    };
    assert_eq!(seen, [(first.session.clone(), Some(record))]);
    seen.clear();
    store
        .append_turns("ns", "s", Some("other-key"), &mut |s, prev| {
            seen.push((s.clone(), prev.cloned()));
            Ok(AppendPlan::Replay(first.outcome.clone()))
        })
        .unwrap();
    assert_eq!(seen[0].1, None, "another key has no record");

    // The plan is applied as given: its turns, its session, its outcome.
    let outbox_before = outbox(store);
    let current = store.get_session("ns", "s").unwrap();
    let applied = store
        .append_turns("ns", "s", None, &mut |s, _| Ok(write_plan(s, &[3, 4], 5)))
        .unwrap();
    let AppendPlan::Write {
        turns,
        session: planned,
        outcome,
        ..
    } = write_plan(&current, &[3, 4], 5)
    else {
        unreachable!()
    };
    assert_eq!(applied.outcome, outcome);
    assert_eq!(*planned, applied.session);
    assert_eq!(store.get_session("ns", "s").unwrap(), *planned);
    assert_eq!(store.list_turns("ns", "s", 3, 4, 10).unwrap(), turns);
    assert_eq!(
        new_entries(store, &outbox_before),
        [IndexChange::Turns {
            namespace: "ns".into(),
            session_id: "s".into(),
            first_seq: 3,
            last_seq: 4,
        }]
    );

    // A replay plan returns its outcome and writes nothing.
    let before = snapshot(store);
    let replay = store
        .append_turns("ns", "s", None, &mut |_, _| {
            Ok(AppendPlan::Replay(first.outcome.clone()))
        })
        .unwrap();
    assert_eq!(replay.outcome, first.outcome);
    assert_eq!(replay.session, store.get_session("ns", "s").unwrap());
    assert_eq!(snapshot(store), before);

    // decide's error is the answer, and nothing is written.
    let e = store
        .append_turns("ns", "s", Some("k2"), &mut |_, _| {
            Err(Error::Aborted("decided no".into()))
        })
        .unwrap_err();
    assert_eq!(e, Error::Aborted("decided no".into()));
    assert_eq!(snapshot(store), before);
    // The key stayed free: a real append under it is not a replay.
    let o = append_to(store, "ns", "s", &prepared(&["c"], Some("k2"), None)).unwrap();
    assert!(!o.outcome.replayed);
}

fn append_plan_breaking_seq_order_is_refused(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    append_texts(store, "ns", "s", &["a"]);
    let before = snapshot(store);
    // (turn seqs, the session's next_seq) that do not continue at seq 2.
    let broken: [(&[u64], u64); 4] = [
        (&[3], 4),    // starts after a gap
        (&[1, 2], 3), // rewrites turn 1
        (&[2, 3], 3), // the session's next_seq is not after the last turn
        (&[], 2),     // no turns at all
    ];
    for (seqs, next_seq) in broken {
        let e = store
            .append_turns("ns", "s", Some("k"), &mut |s, _| {
                Ok(write_plan(s, seqs, next_seq))
            })
            .unwrap_err();
        assert!(matches!(e, Error::Internal(_)), "{seqs:?}: {e:?}");
        assert_eq!(snapshot(store), before, "{seqs:?}");
    }
}

fn append_plan_with_a_gap_between_its_turns_is_refused(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    let before = snapshot(store);
    // First seq and next_seq agree with each other; seq 2 is missing.
    let e = store
        .append_turns("ns", "s", None, &mut |s, _| Ok(write_plan(s, &[1, 3], 4)))
        .map(|a| a.outcome);
    assert!(matches!(e, Err(Error::Internal(_))), "{e:?}");
    assert_eq!(snapshot(store), before);
}

fn update_session_applies_the_change_or_nothing(store: &dyn Store) {
    store.create_session(&session("ns", "s", "alice")).unwrap();
    let mut seen = None;
    let updated = store
        .update_session("ns", "s", &mut |s| {
            seen = Some(s.clone());
            s.title = "new title".into();
            s.metadata.insert("k".into(), "v".into());
            Ok(())
        })
        .unwrap();
    assert_eq!(seen, Some(session("ns", "s", "alice")));
    assert_eq!(updated.title, "new title");
    assert_eq!(updated.metadata.get("k").map(String::as_str), Some("v"));
    assert_eq!(store.get_session("ns", "s").unwrap(), updated);
    let before = snapshot(store);
    // The change's error is the answer.
    let e = store
        .update_session("ns", "s", &mut |s| {
            s.title = "lost".into();
            Err(Error::invalid("no"))
        })
        .unwrap_err();
    assert_eq!(e, Error::invalid("no"));
    assert_eq!(snapshot(store), before);
    // A session's subject never changes.
    let e = store
        .update_session("ns", "s", &mut |s| {
            s.subject_id = "bob".into();
            s.title = "lost".into();
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(e, Error::Internal(_)), "{e:?}");
    assert_eq!(snapshot(store), before);
    let bob = SessionFilter {
        subject_id: Some("bob".into()),
        state: None,
    };
    assert!(store
        .list_sessions("ns", &bob, None, 10, 10)
        .unwrap()
        .sessions
        .is_empty());
    // A missing session: NotFound, and the change never runs.
    let mut called = false;
    let e = store
        .update_session("ns", "nope", &mut |_| {
            called = true;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)));
    assert!(!called);
    assert_eq!(snapshot(store), before);
}

fn list_sessions_filters_and_resumes(store: &dyn Store) {
    for i in 0..30 {
        let mut s = session(
            "ns",
            &format!("s{i:02}"),
            if i % 4 == 0 { "alice" } else { "bob" },
        );
        if i % 5 == 0 {
            s.state = SessionState::Closed;
        }
        store.create_session(&s).unwrap();
    }
    store
        .create_session(&session("ns2", "s00", "alice"))
        .unwrap();
    let collect = |filter: SessionFilter, limit: usize, scan: usize| {
        let mut ids = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..1000 {
            let page = store
                .list_sessions("ns", &filter, after.as_deref(), limit, scan)
                .unwrap();
            assert!(page.sessions.len() <= limit);
            ids.extend(page.sessions.into_iter().map(|s| s.session_id));
            match page.resume_after {
                Some(a) => after = Some(a),
                None => return ids,
            }
        }
        panic!("pagination does not end");
    };
    let all: Vec<String> = (0..30).map(|i| format!("s{i:02}")).collect();
    assert_eq!(collect(SessionFilter::default(), 7, 70), all);
    assert_eq!(collect(SessionFilter::default(), 100, 1000), all);
    let alice = SessionFilter {
        subject_id: Some("alice".into()),
        state: None,
    };
    let want: Vec<String> = (0..30).step_by(4).map(|i| format!("s{i:02}")).collect();
    assert_eq!(collect(alice.clone(), 2, 3), want);
    let closed = SessionFilter {
        subject_id: None,
        state: Some(SessionState::Closed),
    };
    let want: Vec<String> = (0..30).step_by(5).map(|i| format!("s{i:02}")).collect();
    // A tiny scan budget forces short (even empty) pages; the union is complete.
    assert_eq!(collect(closed, 10, 2), want);
    let alice_closed = SessionFilter {
        subject_id: Some("alice".into()),
        state: Some(SessionState::Closed),
    };
    assert_eq!(collect(alice_closed, 10, 1), ["s00", "s20"]);
}

fn turns_are_read_by_range_and_by_seq(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    store.create_session(&session("ns", "s2", "")).unwrap();
    append_texts(store, "ns", "s", &["a", "b", "c", "d"]);
    append_texts(store, "ns", "s2", &["other"]);
    let texts = |turns: Vec<Turn>| turns.into_iter().map(|t| t.content).collect::<Vec<_>>();
    // read_turns: as list_turns, without the session record.
    assert_eq!(
        store.read_turns("ns", "s", 1, u64::MAX, 100).unwrap(),
        store.list_turns("ns", "s", 1, u64::MAX, 100).unwrap()
    );
    assert_eq!(
        texts(store.read_turns("ns", "s", 2, 3, 100).unwrap()),
        ["b", "c"]
    );
    assert_eq!(
        texts(store.read_turns("ns", "s", 2, 9, 2).unwrap()),
        ["b", "c"]
    );
    assert!(store.read_turns("ns", "s", 3, 2, 100).unwrap().is_empty());
    assert!(store.read_turns("ns", "s", 5, 9, 100).unwrap().is_empty());
    assert!(
        store
            .read_turns("ns", "nope", 1, 9, 100)
            .unwrap()
            .is_empty(),
        "an absent session has no turns"
    );
    assert!(matches!(
        store.list_turns("ns", "nope", 1, 9, 100),
        Err(Error::NotFound(_))
    ));
    // get_turns: point reads in the order asked, absent seqs skipped.
    assert_eq!(
        texts(store.get_turns("ns", "s", &[4, 1, 9, 2]).unwrap()),
        ["d", "a", "b"]
    );
    assert_eq!(
        store.get_turns("ns", "s", &[3]).unwrap(),
        store.list_turns("ns", "s", 3, 3, 1).unwrap()
    );
    assert!(store.get_turns("ns", "s", &[]).unwrap().is_empty());
    assert!(store.get_turns("ns", "nope", &[1]).unwrap().is_empty());
    assert!(store.get_turns("ns2", "s", &[1]).unwrap().is_empty());
    assert_eq!(
        texts(store.get_turns("ns", "s2", &[1, 2]).unwrap()),
        ["other"]
    );
}

fn scan_sessions_pages_through_every_namespace(store: &dyn Store) {
    assert!(store
        .scan_sessions(None, 10)
        .unwrap()
        .resume_after
        .is_none());
    let mut want = Vec::new();
    for ns in ["a", "ab", "b"] {
        for id in ["x", "y", "z"] {
            store.create_session(&session(ns, id, "")).unwrap();
            want.push((ns.to_string(), id.to_string()));
        }
    }
    let names = |sessions: Vec<Session>| {
        sessions
            .into_iter()
            .map(|s| (s.namespace, s.session_id))
            .collect::<Vec<_>>()
    };
    for page in [1, 2, 4, 9, 100] {
        let (sessions, unreadable) = all_sessions(store, page);
        assert!(unreadable.is_empty());
        assert_eq!(names(sessions), want, "page size {page}");
    }
    // A page says where it stopped; resuming there continues after it.
    let first = store.scan_sessions(None, 4).unwrap();
    assert_eq!(first.resume_after, Some(key("ab", "x")));
    let next = store.scan_sessions(Some(("ab", "x")), 2).unwrap();
    assert_eq!(names(next.sessions), [key("ab", "y"), key("ab", "z")]);
    assert_eq!(next.resume_after, Some(key("ab", "z")));
    let end = store.scan_sessions(Some(("b", "z")), 10).unwrap();
    assert!(end.sessions.is_empty() && end.resume_after.is_none());
}

fn delete_removes_everything_of_one_session(store: &dyn Store) {
    store.create_session(&session("ns", "s", "alice")).unwrap();
    store.create_session(&session("ns", "s2", "alice")).unwrap();
    append_to(
        store,
        "ns",
        "s",
        &prepared(&["a", "b", "c"], Some("k"), None),
    )
    .unwrap();
    append_texts(store, "ns", "s2", &["keep"]);
    // Everything that hangs off s: a summary, a review, an episode with a
    // carried action, a status; s2 has its own.
    store
        .save_summary(
            "ns",
            "s",
            SummaryWrite {
                base_version: 0,
                summary: Some(summary(1, 3, vec![action("call back", 2)])),
                fold: Some(fold(1, 3)),
                audit: attempt_audit(1, 3),
                review: Some(review("ns", "r1", "s", 1)),
                attempted_through_seq: 3,
            },
        )
        .unwrap();
    close(store, "ns", "s");
    settle(store, "ns", "s", 1000).expect("an episode");
    set_status(store, "ns", "s", 2, ActionStatus::InProgress).unwrap();
    summarize(store, "ns", "s2", 1, 1, Some(review("ns", "r2", "s2", 1)));
    let (fact, _) = put(
        store,
        &new_fact_of("alice", "", "Has a dog", FactOrigin::Client),
    );
    let s2_before = snapshot(store).sessions[&key("ns", "s2")].clone();
    let outbox_before = outbox(store);

    assert_eq!(store.delete_session("ns", "s").unwrap(), 3);
    assert!(matches!(
        store.get_session("ns", "s"),
        Err(Error::NotFound(_))
    ));
    let before = snapshot(store);
    assert!(matches!(
        store.delete_session("ns", "s"),
        Err(Error::NotFound(_))
    ));
    assert_eq!(snapshot(store), before);
    let alice = SessionFilter {
        subject_id: Some("alice".into()),
        state: None,
    };
    let page = store.list_sessions("ns", &alice, None, 10, 100).unwrap();
    assert_eq!(page.sessions.len(), 1);
    assert!(store
        .read_turns("ns", "s", 1, u64::MAX, 10)
        .unwrap()
        .is_empty());
    assert!(store.get_turns("ns", "s", &[1, 2, 3]).unwrap().is_empty());
    assert_eq!(store.fold_record("ns", "s").unwrap(), None);
    assert_eq!(store.get_episode("ns", "s").unwrap(), None);
    assert!(store
        .list_episodes("ns", "alice", None, 10)
        .unwrap()
        .is_empty());
    assert!(store.carried_actions("ns", "alice", 10).unwrap().is_empty());
    assert!(store.action_statuses("ns", "s").unwrap().is_empty());
    let (reviews, _) = store.list_review_items("ns", None, true, 10, 10).unwrap();
    assert_eq!(
        reviews
            .iter()
            .map(|r| r.review_id.as_str())
            .collect::<Vec<_>>(),
        ["r2"]
    );
    // Facts about the subject are not the session's: they stay.
    assert_eq!(store.get_fact("ns", &fact.fact_id).unwrap(), fact);
    assert_eq!(before.sessions[&key("ns", "s2")], s2_before);
    assert_eq!(
        new_entries(store, &outbox_before),
        [IndexChange::SessionDeleted {
            namespace: "ns".into(),
            session_id: "s".into(),
        }]
    );
    // Re-created: empty, and the old idempotency key is gone.
    store.create_session(&session("ns", "s", "")).unwrap();
    assert!(contents(store, "ns", "s").is_empty());
    assert!(store.list_audit("ns", "s", 0, 10).unwrap().is_empty());
    let o = append_to(
        store,
        "ns",
        "s",
        &prepared(&["a", "b", "c"], Some("k"), None),
    )
    .unwrap()
    .outcome;
    assert!(!o.replayed);
    assert_eq!(o.first_seq, 1);
    assert_eq!(contents(store, "ns", "s2"), ["keep"]);
}

fn erase_removes_a_subject_in_steps_and_refuses_its_writes_meanwhile(store: &dyn Store) {
    // alice: two sessions (one with a summary, review, episode, carried
    // action and status), two fact versions; bob and another namespace's
    // alice keep theirs.
    store.create_session(&session("ns", "s", "alice")).unwrap();
    store.create_session(&session("ns", "s2", "alice")).unwrap();
    store.create_session(&session("ns", "b", "bob")).unwrap();
    store.create_session(&session("ns2", "s", "alice")).unwrap();
    append_to(
        store,
        "ns",
        "s",
        &prepared(&["a", "b", "c"], Some("k"), None),
    )
    .unwrap();
    append_texts(store, "ns", "s2", &["d"]);
    append_texts(store, "ns", "b", &["bob's"]);
    append_texts(store, "ns2", "s", &["other namespace"]);
    store
        .save_summary(
            "ns",
            "s",
            SummaryWrite {
                base_version: 0,
                summary: Some(summary(1, 3, vec![action("call back", 2)])),
                fold: Some(fold(1, 3)),
                audit: attempt_audit(1, 3),
                review: Some(review("ns", "r1", "s", 1)),
                attempted_through_seq: 3,
            },
        )
        .unwrap();
    close(store, "ns", "s");
    settle(store, "ns", "s", 1000).expect("an episode");
    set_status(store, "ns", "s", 2, ActionStatus::InProgress).unwrap();
    put(
        store,
        &new_fact_of("alice", "pet", "Has a dog", FactOrigin::Client),
    );
    put(
        store,
        &new_fact_of("alice", "pet", "Has a cat", FactOrigin::Client),
    );
    put(
        store,
        &new_fact_of("bob", "pet", "Has a fish", FactOrigin::Client),
    );
    let mut ns2_fact = new_fact_of("alice", "pet", "Has a horse", FactOrigin::Client);
    ns2_fact.namespace = "ns2".into();
    put(store, &ns2_fact);
    let before = snapshot(store);
    assert!(store.subject_holds("ns", "alice").unwrap());
    assert!(!store.subject_holds("ns", "carol").unwrap());

    let job = EraseJob {
        namespace: "ns".into(),
        subject_id: "alice".into(),
        erasure_id: "01JERASE".into(),
        requested_at: 5,
        requested_by: "admin".into(),
        counts: EraseCounts::default(),
        heartbeat_at: 5,
    };
    assert_eq!(store.begin_erase(&job).unwrap(), job);
    // A second request joins the first.
    let mut again = job.clone();
    again.erasure_id = "01JOTHER".into();
    assert_eq!(store.begin_erase(&again).unwrap(), job);
    assert_eq!(store.erase_jobs(10).unwrap(), std::slice::from_ref(&job));
    // Writes that would add to alice are refused and write nothing.
    let unchanged = snapshot(store);
    let refused = |r: Result<()>| match r {
        Err(Error::FailedPrecondition(Precondition::SubjectErasing, m)) => {
            assert!(m.contains("erase"), "{m}")
        }
        other => panic!("expected SUBJECT_ERASING, got {other:?}"),
    };
    refused(append_to(store, "ns", "s2", &prepared(&["late"], None, None)).map(|_| ()));
    refused(store.create_session(&session("ns", "s3", "alice")));
    refused(
        knowledge::put_fact(
            store,
            &new_fact_of("alice", "", "Late fact", FactOrigin::Client),
        )
        .map(|_| ()),
    );
    assert_eq!(snapshot(store), unchanged);
    // bob and the other namespace's alice are not held up.
    append_texts(store, "ns", "b", &["bob again"]);
    append_texts(store, "ns2", "s", &["still here"]);

    let mut total = EraseCounts::default();
    let mut steps = 0;
    loop {
        let step = store.erase_step("ns", "alice", 1, 9).unwrap();
        total.add(&step.removed);
        steps += 1;
        assert!(steps < 20, "the erase does not end");
        if step.done {
            break;
        }
    }
    assert_eq!(
        store.erase_job("ns", "alice").unwrap().unwrap().counts,
        total
    );
    assert_eq!(total.sessions, 2);
    assert_eq!(total.turns, 4);
    assert_eq!(total.summaries, 1);
    assert_eq!(total.fold_states, 1);
    assert_eq!(total.audit_records, 1);
    assert_eq!(total.review_items, 1);
    assert_eq!(total.action_statuses, 1);
    assert_eq!(total.idempotency_records, 1);
    assert_eq!(total.facts, 2);
    assert_eq!(total.episodes, 1);
    assert_eq!(total.carried_actions, 1);
    let record = ErasureRecord {
        erasure_id: job.erasure_id.clone(),
        namespace: "ns".into(),
        subject_sha256: subject_sha256("ns", "alice"),
        requested_at: 5,
        completed_at: 10,
        requested_by: "admin".into(),
        counts: total,
    };
    assert!(store.finish_erase("ns", "alice", &record).unwrap());
    assert!(store.erase_jobs(10).unwrap().is_empty());
    assert_eq!(store.list_erasures("ns", None, 10).unwrap(), [record]);
    assert!(!store.subject_holds("ns", "alice").unwrap());

    // Nothing of alice in ns is left; everything else is as it was.
    let after = snapshot(store);
    assert!(after
        .sessions
        .keys()
        .all(|(ns, id)| !(ns == "ns" && id.starts_with('s'))));
    assert!(after
        .facts
        .iter()
        .all(|f| !(f.namespace == "ns" && f.subject_id == "alice")));
    assert!(after.episodes.is_empty());
    assert!(after.carried.values().all(Vec::is_empty));
    assert!(after
        .reviews
        .values()
        .flatten()
        .all(|r| r.session_id != "s"));
    assert_eq!(
        after.facts.len(),
        before.facts.len() - 2,
        "bob's and ns2's facts stay"
    );
    assert_eq!(contents(store, "ns", "b"), ["bob's", "bob again"]);
    assert_eq!(
        contents(store, "ns2", "s"),
        ["other namespace", "still here"]
    );
    assert!(store.erase_step("ns", "alice", 1, 11).is_err());
    // The subject takes new sessions again.
    store.create_session(&session("ns", "s3", "alice")).unwrap();
}

fn concurrent_appends_are_serialized(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    std::thread::scope(|scope| {
        for w in 0..8 {
            scope.spawn(move || {
                for i in 0..50 {
                    let text = format!("{w}-{i}");
                    append_texts(store, "ns", "s", &[&text]);
                }
            });
        }
    });
    let turns = store.list_turns("ns", "s", 1, u64::MAX, 10_000).unwrap();
    assert_eq!(turns.len(), 400);
    assert!(turns.iter().enumerate().all(|(i, t)| t.seq == i as u64 + 1));
    assert_eq!(store.get_session("ns", "s").unwrap().next_seq, 401);
    let distinct: BTreeSet<&str> = turns.iter().map(|t| t.content.as_str()).collect();
    assert_eq!(distinct.len(), 400, "no append overwrote another");
    store.flush().unwrap();
}

// ---------------------------------------------------------------------------
// SummaryStore
// ---------------------------------------------------------------------------

fn summaries_are_stored_with_fold_audit_review_and_progress(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    append_texts(store, "ns", "s", &["a", "b", "c", "d"]);
    assert!(matches!(
        store.get_summary("ns", "s", 0),
        Err(Error::NotFound(_))
    ));
    assert_eq!(store.fold_record("ns", "s").unwrap(), None);
    assert!(store
        .list_summaries("ns", "s", u64::MAX, 10)
        .unwrap()
        .is_empty());
    assert!(store.list_audit("ns", "s", 0, 10).unwrap().is_empty());

    let stored = store
        .save_summary(
            "ns",
            "s",
            SummaryWrite {
                base_version: 0,
                summary: Some(summary(1, 2, Vec::new())),
                fold: Some(fold(1, 2)),
                audit: attempt_audit(1, 2),
                review: Some(review("ns", "r1", "s", 1)),
                attempted_through_seq: 2,
            },
        )
        .unwrap();
    let want = SummaryProgress {
        version: 1,
        through_seq: 2,
        through_tokens: 20,
        attempted_through_seq: 2,
        audit_seq: 1,
    };
    assert_eq!(stored.summary, want);
    assert_eq!(store.get_session("ns", "s").unwrap(), stored);
    assert_eq!(
        store.get_summary("ns", "s", 0).unwrap(),
        summary(1, 2, Vec::new())
    );
    assert_eq!(
        store.get_summary("ns", "s", 1).unwrap(),
        summary(1, 2, Vec::new())
    );
    assert_eq!(store.fold_record("ns", "s").unwrap(), Some(fold(1, 2)));
    let audit1 = AuditRecord {
        audit_seq: 1,
        ..attempt_audit(1, 2)
    };
    assert_eq!(
        store.list_audit("ns", "s", 0, 10).unwrap(),
        std::slice::from_ref(&audit1)
    );
    assert_eq!(
        store.list_review_items("ns", None, false, 10, 10).unwrap(),
        (vec![review("ns", "r1", "s", 1)], None)
    );

    let stored = summarize(store, "ns", "s", 2, 4, None);
    assert_eq!(
        (
            stored.summary.version,
            stored.summary.through_seq,
            stored.summary.audit_seq
        ),
        (2, 4, 2)
    );
    let (v1, v2) = (summary(1, 2, Vec::new()), summary(2, 4, Vec::new()));
    assert_eq!(store.get_summary("ns", "s", 0).unwrap(), v2);
    assert_eq!(store.get_summary("ns", "s", 1).unwrap(), v1);
    assert_eq!(store.fold_record("ns", "s").unwrap(), Some(fold(2, 4)));
    assert_eq!(
        store.list_summaries("ns", "s", u64::MAX, 10).unwrap(),
        [v2.clone(), v1.clone()]
    );
    assert_eq!(
        store.list_summaries("ns", "s", 1, 10).unwrap(),
        std::slice::from_ref(&v1)
    );
    assert_eq!(
        store.list_summaries("ns", "s", u64::MAX, 1).unwrap(),
        std::slice::from_ref(&v2)
    );
    assert!(store.list_summaries("ns", "s", 0, 10).unwrap().is_empty());
    assert!(matches!(
        store.get_summary("ns", "s", 3),
        Err(Error::NotFound(_))
    ));
    for missing in [
        store.get_summary("ns", "nope", 0).map(|_| ()),
        store.list_summaries("ns", "nope", u64::MAX, 10).map(|_| ()),
        store.list_audit("ns", "nope", 0, 10).map(|_| ()),
    ] {
        assert!(matches!(missing, Err(Error::NotFound(_))), "{missing:?}");
    }
    assert_eq!(store.fold_record("ns", "nope").unwrap(), None);

    // Another attempt got there first: ABORTED, nothing written.
    let before = snapshot(store);
    let e = store
        .save_summary(
            "ns",
            "s",
            SummaryWrite {
                base_version: 1,
                summary: Some(summary(2, 4, Vec::new())),
                fold: Some(fold(2, 4)),
                audit: attempt_audit(2, 4),
                review: Some(review("ns", "r9", "s", 2)),
                attempted_through_seq: 4,
            },
        )
        .unwrap_err();
    assert!(matches!(e, Error::Aborted(_)), "{e:?}");
    assert_eq!(snapshot(store), before);
    assert!(matches!(
        store.save_summary(
            "ns",
            "nope",
            SummaryWrite {
                base_version: 0,
                summary: None,
                fold: None,
                audit: attempt_audit(0, 1),
                review: None,
                attempted_through_seq: 1,
            },
        ),
        Err(Error::NotFound(_))
    ));
    assert_eq!(snapshot(store), before);

    // A refused attempt stores only its audit record and the progress.
    let refused = |attempted| SummaryWrite {
        base_version: 2,
        summary: None,
        fold: None,
        audit: attempt_audit(0, attempted),
        review: None,
        attempted_through_seq: attempted,
    };
    let session = store.save_summary("ns", "s", refused(5)).unwrap();
    let mut want = before.clone();
    let records = want.sessions.get_mut(&key("ns", "s")).unwrap();
    records.session.summary.audit_seq = 3;
    records.session.summary.attempted_through_seq = 5;
    records.audit.push(AuditRecord {
        audit_seq: 3,
        ..attempt_audit(0, 5)
    });
    assert_eq!(session, records.session);
    assert_eq!(snapshot(store), want);
    // Progress never goes back.
    let session = store.save_summary("ns", "s", refused(1)).unwrap();
    assert_eq!(
        (
            session.summary.attempted_through_seq,
            session.summary.audit_seq
        ),
        (5, 4)
    );
    let seqs = |records: Vec<AuditRecord>| records.iter().map(|r| r.audit_seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(store.list_audit("ns", "s", 0, 10).unwrap()),
        [1, 2, 3, 4]
    );
    assert_eq!(seqs(store.list_audit("ns", "s", 1, 10).unwrap()), [2, 3, 4]);
    assert_eq!(seqs(store.list_audit("ns", "s", 1, 2).unwrap()), [2, 3]);
    assert!(store.list_audit("ns", "s", 4, 10).unwrap().is_empty());
    assert_eq!(store.list_audit("ns", "s", 0, 1).unwrap(), [audit1]);
}

fn review_items_are_listed_and_resolved(store: &dyn Store) {
    for id in ["s1", "s2"] {
        store.create_session(&session("ns", id, "")).unwrap();
        append_texts(store, "ns", id, &["a", "b"]);
    }
    store.create_session(&session("ns2", "s1", "")).unwrap();
    append_texts(store, "ns2", "s1", &["a"]);
    summarize(store, "ns", "s1", 1, 1, Some(review("ns", "r1", "s1", 1)));
    summarize(store, "ns", "s2", 1, 1, Some(review("ns", "r2", "s2", 1)));
    summarize(store, "ns", "s1", 2, 2, Some(review("ns", "r3", "s1", 2)));
    summarize(store, "ns", "s2", 2, 2, Some(review("ns", "r4", "s2", 2)));
    summarize(store, "ns2", "s1", 1, 1, Some(review("ns2", "r5", "s1", 1)));
    let collect = |ns: &str, resolved: bool, limit: usize, scan: usize| {
        let mut ids = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..1000 {
            let (items, resume) = store
                .list_review_items(ns, after.as_deref(), resolved, limit, scan)
                .unwrap();
            assert!(items.len() <= limit);
            ids.extend(items.into_iter().map(|i| i.review_id));
            match resume {
                Some(r) => after = Some(r),
                None => return ids,
            }
        }
        panic!("paging does not end");
    };
    assert_eq!(collect("ns", false, 10, 100), ["r1", "r2", "r3", "r4"]);
    assert_eq!(collect("ns2", false, 10, 100), ["r5"]);

    // Resolving: decide runs on the stored item; its answer is stored and
    // an audit record appended with the session's next audit_seq.
    let before = snapshot(store);
    let audit = resolution_audit("r2", ReviewStatus::Approved, "ann");
    let mut seen = None;
    let resolved = store
        .resolve_review_item("ns", "r2", audit.clone(), &mut |item| {
            seen = Some(item.clone());
            Ok(ReviewItem {
                status: ReviewStatus::Approved,
                reviewer: "ann".into(),
                comment: "checked".into(),
                resolved_at: 9,
                reviewer_key: "key-ann".into(),
                ..item.clone()
            })
        })
        .unwrap();
    assert_eq!(seen, Some(review("ns", "r2", "s2", 1)));
    let want_item = ReviewItem {
        status: ReviewStatus::Approved,
        reviewer: "ann".into(),
        comment: "checked".into(),
        resolved_at: 9,
        reviewer_key: "key-ann".into(),
        ..review("ns", "r2", "s2", 1)
    };
    assert_eq!(resolved, want_item);
    let mut want = before.clone();
    want.reviews.get_mut("ns").unwrap()[1] = want_item.clone();
    let s2 = want.sessions.get_mut(&key("ns", "s2")).unwrap();
    s2.session.summary.audit_seq = 3;
    s2.audit.push(AuditRecord {
        audit_seq: 3,
        ..audit.clone()
    });
    assert_eq!(snapshot(store), want);
    assert_eq!(collect("ns", false, 10, 100), ["r1", "r3", "r4"]);
    assert_eq!(collect("ns", true, 10, 100), ["r1", "r2", "r3", "r4"]);
    // Paging, with short and even empty pages under a tiny scan budget.
    assert_eq!(collect("ns", false, 1, 100), ["r1", "r3", "r4"]);
    assert_eq!(collect("ns", false, 10, 1), ["r1", "r3", "r4"]);
    assert_eq!(collect("ns", true, 2, 2), ["r1", "r2", "r3", "r4"]);
    let (page, resume) = store.list_review_items("ns", None, true, 2, 100).unwrap();
    assert_eq!(page.len(), 2);
    assert_eq!(resume.as_deref(), Some("r2"));
    let (page, _) = store
        .list_review_items("ns", Some("r2"), true, 10, 100)
        .unwrap();
    assert_eq!(
        page.iter()
            .map(|i| i.review_id.as_str())
            .collect::<Vec<_>>(),
        ["r3", "r4"]
    );

    // decide's error (already resolved) leaves everything as it was.
    let before = snapshot(store);
    let e = store
        .resolve_review_item(
            "ns",
            "r2",
            resolution_audit("r2", ReviewStatus::Rejected, "bob"),
            &mut |item| {
                if item.status == ReviewStatus::Pending {
                    Ok(item.clone())
                } else {
                    Err(Error::FailedPrecondition(
                        Precondition::AlreadyResolved,
                        "already resolved".into(),
                    ))
                }
            },
        )
        .unwrap_err();
    assert!(matches!(
        e,
        Error::FailedPrecondition(Precondition::AlreadyResolved, _)
    ));
    assert_eq!(snapshot(store), before);
    // Unknown ids (or another namespace's): NotFound, decide never runs.
    for (ns, id) in [("ns", "nope"), ("ns2", "r1"), ("ns", "r5")] {
        let mut called = false;
        let e = store
            .resolve_review_item(
                ns,
                id,
                resolution_audit(id, ReviewStatus::Approved, "ann"),
                &mut |item| {
                    called = true;
                    Ok(item.clone())
                },
            )
            .unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{ns}/{id}: {e:?}");
        assert!(!called);
        assert_eq!(snapshot(store), before);
    }
}

// ---------------------------------------------------------------------------
// KnowledgeStore: facts
// ---------------------------------------------------------------------------

fn facts_supersede_merge_and_delete(store: &dyn Store) {
    let (a, o) = put(
        store,
        &new_fact("lang", "Speaks Spanish", FactOrigin::Client),
    );
    assert_eq!(o, PutOutcome::Created);
    let (b, o) = put(
        store,
        &new_fact("lang", "Speaks English", FactOrigin::Client),
    );
    assert!(matches!(o, PutOutcome::Superseded(ref old) if old.fact_id == a.fact_id));
    let old = store.get_fact("ns", &a.fact_id).unwrap();
    assert_eq!(old.superseded_by, b.fact_id);
    assert_eq!(old.text, "Speaks Spanish", "the old version stays readable");
    assert_eq!(
        store.get_fact("ns", &b.fact_id).unwrap().supersedes,
        a.fact_id
    );
    // An extracted fact never replaces the client's.
    let before = snapshot(store);
    let (kept, o) = put(
        store,
        &new_fact("lang", "Speaks French", FactOrigin::Extracted),
    );
    assert_eq!(
        (o, kept.fact_id.as_str()),
        (PutOutcome::KeptClientFact, b.fact_id.as_str())
    );
    assert_eq!(snapshot(store), before, "a kept client fact writes nothing");
    let (dog, o) = put(store, &new_fact("", "Has a dog.", FactOrigin::Client));
    assert_eq!(o, PutOutcome::Created);
    let before = snapshot(store);
    let (same, o) = put(store, &new_fact("", "has a DOG", FactOrigin::Extracted));
    assert_eq!(o, PutOutcome::Merged);
    assert_eq!(same, dog);
    assert_eq!(
        snapshot(store),
        before,
        "a merge that adds nothing writes nothing"
    );
    // A merge that adds a source and a tag rewrites the same fact.
    let mut tagged = new_fact("", "HAS A DOG!", FactOrigin::Extracted);
    tagged.tags = vec!["pet".into()];
    tagged.source = Some(FactSource {
        session_id: "s".into(),
        seq: 2,
    });
    let outbox_before = outbox(store);
    let (merged, o) = put(store, &tagged);
    assert_eq!(o, PutOutcome::Merged);
    assert_eq!(merged.fact_id, dog.fact_id);
    assert_eq!(store.get_fact("ns", &dog.fact_id).unwrap(), merged);
    assert_eq!((merged.tags.len(), merged.sources.len()), (1, 1));
    assert_eq!(
        new_entries(store, &outbox_before),
        [IndexChange::Fact {
            namespace: "ns".into(),
            fact_id: dog.fact_id.clone(),
        }]
    );
    let (current, _) = store
        .list_facts("ns", &filter(Some("u"), false), None, 100, 1000)
        .unwrap();
    assert_eq!(current.len(), 2);
    let (all, _) = store
        .list_facts("ns", &filter(Some("u"), true), None, 100, 1000)
        .unwrap();
    assert_eq!(all.len(), 3);
    store.delete_fact("ns", &b.fact_id).unwrap();
    assert!(matches!(
        store.get_fact("ns", &b.fact_id),
        Err(Error::NotFound(_))
    ));
    // The key has no current fact now: the next put creates.
    let (_, o) = put(
        store,
        &new_fact("lang", "Speaks German", FactOrigin::Client),
    );
    assert_eq!(o, PutOutcome::Created);
    // Identity is per subject.
    let (_, o) = put(
        store,
        &new_fact_of("v", "lang", "Speaks German", FactOrigin::Client),
    );
    assert_eq!(o, PutOutcome::Created);
}

fn put_fact_decides_on_the_current_fact_of_its_identity(store: &dyn Store) {
    let mut seen: Vec<Option<Fact>> = Vec::new();
    let mut probe = |store: &dyn Store, subject: &str, identity: FactIdentity| {
        let mut got = None;
        let e = store
            .put_fact("ns", subject, &identity, &mut |current| {
                got = Some(current);
                Err(Error::Aborted("probe".into()))
            })
            .unwrap_err();
        assert_eq!(e, Error::Aborted("probe".into()));
        seen.push(got.expect("decide ran"));
    };
    let lang = || FactIdentity::Key("lang".into());
    probe(store, "u", lang());
    let (spanish, _) = put(
        store,
        &new_fact("lang", "Speaks Spanish", FactOrigin::Client),
    );
    let (dog, _) = put(store, &new_fact("", "Has a dog.", FactOrigin::Client));
    let before = snapshot(store);
    probe(store, "u", lang());
    probe(store, "u", FactIdentity::of("", "has a DOG!"));
    probe(store, "u", FactIdentity::of("", "Has a cat."));
    probe(store, "v", lang());
    // A keyed fact's words are not an unkeyed identity.
    probe(store, "u", FactIdentity::of("", "Speaks Spanish"));
    assert_eq!(snapshot(store), before, "decide's error writes nothing");
    let (english, _) = put(
        store,
        &new_fact("lang", "Speaks English", FactOrigin::Client),
    );
    probe(store, "u", lang());
    assert_eq!(
        seen,
        [
            None,
            Some(spanish),
            Some(dog.clone()),
            None,
            None,
            None,
            Some(english)
        ]
    );
    // A plan that says nothing needs writing is returned, not applied.
    let before = snapshot(store);
    let mut changed = dog.clone();
    changed.text = "not written".into();
    let plan = FactPlan {
        fact: changed.clone(),
        outcome: PutOutcome::Merged,
        write: false,
    };
    let returned = store
        .put_fact("ns", "u", &dog.identity(), &mut |_| Ok(plan.clone()))
        .unwrap();
    assert_eq!(returned, plan);
    assert_eq!(snapshot(store), before);
}

fn list_facts_filters_and_resumes(store: &dyn Store) {
    let mut pref = new_fact("lang", "Speaks Spanish", FactOrigin::Client);
    pref.tags = vec!["pref".into()];
    let (spanish, _) = put(store, &pref);
    let (english, _) = put(
        store,
        &new_fact("lang", "Speaks English", FactOrigin::Client),
    );
    let mut pet = new_fact("", "Has a dog", FactOrigin::Client);
    pet.tags = vec!["pet".into(), "pref".into()];
    let (dog, _) = put(store, &pet);
    let (tea, _) = put(
        store,
        &new_fact_of("v", "drink", "Likes tea", FactOrigin::Client),
    );
    let mut elsewhere = new_fact("lang", "Speaks Dutch", FactOrigin::Client);
    elsewhere.namespace = "ns2".into();
    put(store, &elsewhere);
    let sorted = |mut v: Vec<&Fact>| {
        v.sort_by(|a, b| a.fact_id.cmp(&b.fact_id));
        v.into_iter().map(|f| f.fact_id.clone()).collect::<Vec<_>>()
    };
    let list = |f: &FactFilter| {
        let (facts, resume) = store.list_facts("ns", f, None, 100, 1000).unwrap();
        assert!(resume.is_none());
        facts.into_iter().map(|f| f.fact_id).collect::<Vec<_>>()
    };
    assert_eq!(
        list(&filter(Some("u"), false)),
        sorted(vec![&english, &dog])
    );
    assert_eq!(
        list(&filter(Some("u"), true)),
        sorted(vec![&spanish, &english, &dog])
    );
    assert_eq!(list(&filter(Some("v"), false)), sorted(vec![&tea]));
    assert!(list(&filter(Some("w"), true)).is_empty());
    assert_eq!(
        list(&filter(None, false)),
        sorted(vec![&english, &dog, &tea])
    );
    assert_eq!(
        list(&filter(None, true)),
        sorted(vec![&spanish, &english, &dog, &tea])
    );
    let by_tag = |tag: &str, history| FactFilter {
        tag: Some(tag.into()),
        ..filter(None, history)
    };
    assert_eq!(list(&by_tag("pet", false)), sorted(vec![&dog]));
    // The superseded Spanish fact had the tag; only history shows it.
    assert_eq!(list(&by_tag("pref", false)), sorted(vec![&dog]));
    assert_eq!(list(&by_tag("pref", true)), sorted(vec![&spanish, &dog]));
    let by_key = |k: &str, history| FactFilter {
        key: Some(k.into()),
        ..filter(Some("u"), history)
    };
    assert_eq!(list(&by_key("lang", false)), sorted(vec![&english]));
    assert_eq!(
        list(&by_key("lang", true)),
        sorted(vec![&spanish, &english])
    );
    // Pages: short pages (even empty ones) under a small scan budget; the
    // union is the whole listing.
    let collect = |f: &FactFilter, limit: usize, scan: usize| {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..1000 {
            let (facts, resume) = store
                .list_facts("ns", f, after.as_deref(), limit, scan)
                .unwrap();
            assert!(facts.len() <= limit);
            out.extend(facts.into_iter().map(|f| f.fact_id));
            match resume {
                Some(r) => after = Some(r),
                None => return out,
            }
        }
        panic!("paging does not end");
    };
    for f in [
        filter(Some("u"), true),
        filter(Some("u"), false),
        filter(None, true),
        by_tag("pet", false),
    ] {
        let whole = list(&f);
        for (limit, scan) in [(1, 100), (2, 2), (10, 1)] {
            assert_eq!(collect(&f, limit, scan), whole, "{f:?} {limit} {scan}");
        }
    }
}

fn recent_facts_are_newest_current_first(store: &dyn Store) {
    let facts = [
        ("F1", "city", "Lives in Rome"),
        ("F2", "", "Has a cat"),
        ("F3", "lang", "Speaks Italian"),
        ("F4", "lang", "Speaks French"),
        ("F5", "", "Plays chess"),
    ];
    for (i, (id, key, text)) in facts.iter().enumerate() {
        put_with_id(
            store,
            &new_fact(key, text, FactOrigin::Client),
            id,
            i as i64,
        );
    }
    put_with_id(
        store,
        &new_fact_of("v", "", "Owns a boat", FactOrigin::Client),
        "F6",
        6,
    );
    let recent = |limit, scan| {
        ids(&store.recent_facts("ns", "u", limit, scan).unwrap())
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    // F3 was superseded by F4.
    assert_eq!(recent(10, 100), ["F5", "F4", "F2", "F1"]);
    assert_eq!(recent(3, 100), ["F5", "F4", "F2"]);
    // The scan budget counts the superseded version it skipped.
    assert_eq!(recent(10, 3), ["F5", "F4"]);
    assert_eq!(
        ids(&store.recent_facts("ns", "v", 10, 100).unwrap()),
        ["F6"]
    );
    assert!(store.recent_facts("ns", "w", 10, 100).unwrap().is_empty());
    assert!(store.recent_facts("ns2", "u", 10, 100).unwrap().is_empty());
}

fn delete_fact_removes_one_version(store: &dyn Store) {
    let (a, _) = put(
        store,
        &new_fact("lang", "Speaks Spanish", FactOrigin::Client),
    );
    let (b, _) = put(
        store,
        &new_fact("lang", "Speaks English", FactOrigin::Client),
    );
    let (dog, _) = put(store, &new_fact("", "Has a dog", FactOrigin::Client));
    // Deleting a superseded version leaves the current one current.
    let outbox_before = outbox(store);
    assert_eq!(
        store.delete_fact("ns", &a.fact_id).unwrap().fact_id,
        a.fact_id
    );
    assert!(matches!(
        store.get_fact("ns", &a.fact_id),
        Err(Error::NotFound(_))
    ));
    assert_eq!(
        new_entries(store, &outbox_before),
        [IndexChange::Fact {
            namespace: "ns".into(),
            fact_id: a.fact_id.clone(),
        }]
    );
    let (c, o) = put(
        store,
        &new_fact("lang", "Speaks German", FactOrigin::Client),
    );
    assert!(matches!(o, PutOutcome::Superseded(ref old) if old.fact_id == b.fact_id));
    // Deleting the current version frees its key and its words.
    assert_eq!(store.delete_fact("ns", &c.fact_id).unwrap(), c);
    let (_, o) = put(store, &new_fact("lang", "Speaks Greek", FactOrigin::Client));
    assert_eq!(o, PutOutcome::Created);
    store.delete_fact("ns", &dog.fact_id).unwrap();
    let (dog2, o) = put(store, &new_fact("", "has a dog!", FactOrigin::Client));
    assert_eq!(o, PutOutcome::Created);
    assert_ne!(dog2.fact_id, dog.fact_id);
    let (all, _) = store
        .list_facts("ns", &filter(Some("u"), true), None, 100, 100)
        .unwrap();
    assert!(!ids(&all).contains(&a.fact_id.as_str()));
    assert!(!ids(&all).contains(&c.fact_id.as_str()));
    assert!(!ids(&all).contains(&dog.fact_id.as_str()));
    let before = snapshot(store);
    for (ns, id) in [
        ("ns", a.fact_id.as_str()),
        ("ns", "nope"),
        ("ns2", b.fact_id.as_str()),
    ] {
        assert!(matches!(store.delete_fact(ns, id), Err(Error::NotFound(_))));
        assert!(matches!(store.get_fact(ns, id), Err(Error::NotFound(_))));
    }
    assert_eq!(snapshot(store), before);
}

fn revise_facts_keeps_rewrites_and_deletes(store: &dyn Store) {
    let (old, _) = put(store, &new_fact("k1", "First words", FactOrigin::Client));
    let (current, _) = put(store, &new_fact("k1", "Second words", FactOrigin::Client));
    let (keep, _) = put(store, &new_fact("", "Keep me", FactOrigin::Client));
    let (rewrite, _) = put(store, &new_fact("k2", "Rewrite me", FactOrigin::Client));
    let (delete, _) = put(store, &new_fact("", "Delete me", FactOrigin::Client));
    let (other, _) = put(
        store,
        &new_fact_of("v", "", "Delete me", FactOrigin::Client),
    );
    // All kept: fate saw every version of the subject, and nothing changed.
    let before = snapshot(store);
    let mut asked = Vec::new();
    store
        .revise_facts("ns", "u", &mut |f| {
            asked.push(f.clone());
            FactFate::Keep
        })
        .unwrap();
    asked.sort_by(|a, b| a.fact_id.cmp(&b.fact_id));
    let mut want = vec![
        store.get_fact("ns", &old.fact_id).unwrap(),
        current.clone(),
        keep.clone(),
        rewrite.clone(),
        delete.clone(),
    ];
    want.sort_by(|a, b| a.fact_id.cmp(&b.fact_id));
    assert_eq!(asked, want);
    assert_eq!(snapshot(store), before);

    let outbox_before = outbox(store);
    let mut revised = rewrite.clone();
    revised.tags = vec!["revised".into()];
    revised.sources.clear();
    store
        .revise_facts("ns", "u", &mut |f| {
            if f.fact_id == rewrite.fact_id {
                FactFate::Rewrite(Box::new(revised.clone()))
            } else if f.fact_id == delete.fact_id {
                FactFate::Delete
            } else {
                FactFate::Keep
            }
        })
        .unwrap();
    assert_eq!(store.get_fact("ns", &rewrite.fact_id).unwrap(), revised);
    assert!(matches!(
        store.get_fact("ns", &delete.fact_id),
        Err(Error::NotFound(_))
    ));
    assert_eq!(store.get_fact("ns", &keep.fact_id).unwrap(), keep);
    assert_eq!(store.get_fact("ns", &current.fact_id).unwrap(), current);
    assert_eq!(store.get_fact("ns", &other.fact_id).unwrap(), other);
    let mut entries = new_entries(store, &outbox_before);
    entries.sort_by_key(|c| format!("{c:?}"));
    let mut want: Vec<IndexChange> = [&rewrite, &delete]
        .iter()
        .map(|f| IndexChange::Fact {
            namespace: "ns".into(),
            fact_id: f.fact_id.clone(),
        })
        .collect();
    want.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(entries, want);
    let (listed, _) = store
        .list_facts("ns", &filter(Some("u"), true), None, 100, 100)
        .unwrap();
    assert_eq!(listed.len(), 4);
    assert!(!ids(&listed).contains(&delete.fact_id.as_str()));
    // The deleted fact's words are free again; the rewritten one still
    // holds its key.
    let (_, o) = put(store, &new_fact("", "delete me", FactOrigin::Client));
    assert_eq!(o, PutOutcome::Created);
    let (_, o) = put(
        store,
        &new_fact("k2", "Rewritten again", FactOrigin::Client),
    );
    assert!(matches!(o, PutOutcome::Superseded(ref f) if f.fact_id == rewrite.fact_id));
    // A subject without facts: fate never runs.
    let mut called = false;
    store
        .revise_facts("ns", "nobody", &mut |_| {
            called = true;
            FactFate::Delete
        })
        .unwrap();
    assert!(!called);
}

// ---------------------------------------------------------------------------
// KnowledgeStore: episodes, carried actions, action statuses
// ---------------------------------------------------------------------------

fn save_episode_applies_the_plan_or_nothing(store: &dyn Store) {
    store.create_session(&session("ns", "s", "alice")).unwrap();
    append_texts(store, "ns", "s", &["one", "two", "three"]);
    let actions = vec![action("call the bank", 2), action("send the form", 3)];
    store
        .save_summary(
            "ns",
            "s",
            SummaryWrite {
                base_version: 0,
                summary: Some(summary(1, 3, actions.clone())),
                fold: Some(fold(1, 3)),
                audit: attempt_audit(1, 3),
                review: None,
                attempted_through_seq: 3,
            },
        )
        .unwrap();
    // Active: no episode is due, and a `None` plan writes nothing.
    let before = snapshot(store);
    assert_eq!(settle(store, "ns", "s", 1000), None);
    assert_eq!(snapshot(store), before);
    // decide sees the session, its latest summary and its statuses; its
    // error writes nothing.
    let mut seen = None;
    let e = store
        .save_episode("ns", "s", &mut |s, summary, statuses| {
            seen = Some((s.clone(), summary.cloned(), statuses.clone()));
            Err(Error::Aborted("no".into()))
        })
        .unwrap_err();
    assert_eq!(e, Error::Aborted("no".into()));
    assert_eq!(snapshot(store), before);
    assert_eq!(
        seen,
        Some((
            store.get_session("ns", "s").unwrap(),
            Some(summary(1, 3, actions.clone())),
            BTreeMap::new()
        ))
    );

    close(store, "ns", "s");
    assert!(episodes::episode_due(
        &store.get_session("ns", "s").unwrap()
    ));
    let outbox_before = outbox(store);
    let episode = settle(store, "ns", "s", 1000).expect("an episode is due");
    assert_eq!(
        (episode.ended_at, episode.summary_version, episode.ended_as),
        (1000, 1, SessionState::Closed)
    );
    assert_eq!(episode.pending_actions, actions);
    assert_eq!(store.get_episode("ns", "s").unwrap(), Some(episode.clone()));
    let s = store.get_session("ns", "s").unwrap();
    assert_eq!(s.episode_version, 1);
    assert!(!episodes::episode_due(&s));
    let carried = |store: &dyn Store| {
        let mut c = store.carried_actions("ns", "alice", 100).unwrap();
        c.sort_by_key(|c| c.action_ref.clone());
        c
    };
    let want: Vec<CarriedAction> = actions
        .iter()
        .map(|a| CarriedAction {
            action_ref: ActionRef {
                session_id: "s".into(),
                action_seq: a.action_seq(),
            },
            action: a.clone(),
            ended_at: 1000,
        })
        .collect();
    assert_eq!(carried(store), want);
    assert_eq!(
        new_entries(store, &outbox_before),
        [IndexChange::Episode {
            namespace: "ns".into(),
            session_id: "s".into(),
        }]
    );
    // Up to date: the rule plans nothing.
    let before = snapshot(store);
    assert_eq!(settle(store, "ns", "s", 2000), None);
    assert_eq!(snapshot(store), before);

    // A plan replaces the episode (wherever it sorted) and the carried
    // actions, and its summary version is recorded on the session.
    let replacement = Episode {
        ended_at: 2000,
        topic: "replaced".into(),
        pending_actions: vec![actions[0].clone()],
        summary_version: 7,
        ..episode.clone()
    };
    let one = vec![CarriedAction {
        ended_at: 2000,
        ..want[0].clone()
    }];
    let saved = store
        .save_episode("ns", "s", &mut |_, _, _| {
            Ok(Some(EpisodePlan {
                episode: replacement.clone(),
                carried: one.clone(),
            }))
        })
        .unwrap();
    assert_eq!(saved, Some(replacement.clone()));
    assert_eq!(
        store.get_episode("ns", "s").unwrap(),
        Some(replacement.clone())
    );
    assert_eq!(
        store.list_episodes("ns", "alice", None, 10).unwrap(),
        [replacement]
    );
    assert_eq!(carried(store), one);
    assert_eq!(store.get_session("ns", "s").unwrap().episode_version, 7);

    // A missing session: NotFound, decide never runs.
    let before = snapshot(store);
    let mut called = false;
    let e = store
        .save_episode("ns", "nope", &mut |_, _, _| {
            called = true;
            Ok(None)
        })
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)));
    assert!(!called);
    assert_eq!(snapshot(store), before);
    assert_eq!(store.get_episode("ns", "nope").unwrap(), None);
}

fn list_episodes_newest_first_and_resumes(store: &dyn Store) {
    for (id, ended) in [("s1", 1000), ("s2", 3000), ("s3", 2000), ("s4", 3000)] {
        stopped_session(store, "ns", id, "alice", &[]);
        settle(store, "ns", id, ended).expect("an episode");
    }
    stopped_session(store, "ns", "b1", "bob", &[]);
    settle(store, "ns", "b1", 5000).expect("an episode");
    stopped_session(store, "ns2", "s1", "alice", &[]);
    settle(store, "ns2", "s1", 4000).expect("an episode");
    let list = |ns: &str, subject: &str, after: Option<(i64, &str)>, limit| {
        store
            .list_episodes(ns, subject, after, limit)
            .unwrap()
            .into_iter()
            .map(|e| (e.ended_at, e.session_id))
            .collect::<Vec<_>>()
    };
    let e = |t: i64, id: &str| (t, id.to_string());
    let all = [e(3000, "s2"), e(3000, "s4"), e(2000, "s3"), e(1000, "s1")];
    assert_eq!(list("ns", "alice", None, 10), all);
    assert_eq!(list("ns", "alice", None, 2), all[..2]);
    assert_eq!(list("ns", "alice", Some((3000, "s2")), 10), all[1..]);
    assert_eq!(list("ns", "alice", Some((3000, "s4")), 1), all[2..3]);
    assert_eq!(list("ns", "alice", Some((2000, "s3")), 10), all[3..]);
    assert!(list("ns", "alice", Some((1000, "s1")), 10).is_empty());
    assert_eq!(list("ns", "bob", None, 10), [e(5000, "b1")]);
    assert_eq!(list("ns2", "alice", None, 10), [e(4000, "s1")]);
    assert!(list("ns", "carol", None, 10).is_empty());
}

fn carried_actions_belong_to_their_subject(store: &dyn Store) {
    stopped_session(store, "ns", "s1", "alice", &[("a1", 1), ("a2", 2)]);
    settle(store, "ns", "s1", 1000).expect("an episode");
    stopped_session(store, "ns", "s2", "alice", &[("a3", 3)]);
    settle(store, "ns", "s2", 2000).expect("an episode");
    stopped_session(store, "ns", "b1", "bob", &[("b", 1)]);
    settle(store, "ns", "b1", 1000).expect("an episode");
    let names = |c: Vec<CarriedAction>| {
        c.into_iter()
            .map(|c| {
                (
                    c.action_ref.session_id,
                    c.action_ref.action_seq,
                    c.action.action,
                    c.ended_at,
                )
            })
            .collect::<BTreeSet<_>>()
    };
    let alice = names(store.carried_actions("ns", "alice", 10).unwrap());
    let want: BTreeSet<_> = [
        ("s1".to_string(), 1, "a1".to_string(), 1000),
        ("s1".to_string(), 2, "a2".to_string(), 1000),
        ("s2".to_string(), 3, "a3".to_string(), 2000),
    ]
    .into_iter()
    .collect();
    assert_eq!(alice, want);
    let two = names(store.carried_actions("ns", "alice", 2).unwrap());
    assert_eq!(two.len(), 2);
    assert!(two.is_subset(&want));
    assert_eq!(store.carried_actions("ns", "bob", 10).unwrap().len(), 1);
    assert!(store.carried_actions("ns", "carol", 10).unwrap().is_empty());
    assert!(store
        .carried_actions("ns2", "alice", 10)
        .unwrap()
        .is_empty());
}

fn action_status_is_stored_with_its_episode_and_carried_copy(store: &dyn Store) {
    stopped_session(
        store,
        "ns",
        "s",
        "alice",
        &[("call the bank", 2), ("send the form", 3)],
    );
    let episode = settle(store, "ns", "s", 1000).expect("an episode");
    assert!(store.action_statuses("ns", "s").unwrap().is_empty());
    // decide sees the session, its latest summary and its episode.
    let mut seen = None;
    let e = store
        .set_action_status(
            "ns",
            &ActionRef {
                session_id: "s".into(),
                action_seq: 3,
            },
            ActionStatus::InProgress,
            &mut |s, summary, episode| {
                seen = Some((s.clone(), summary.cloned(), episode));
                Err(Error::Aborted("no".into()))
            },
        )
        .unwrap_err();
    assert_eq!(e, Error::Aborted("no".into()));
    assert_eq!(
        seen,
        Some((
            store.get_session("ns", "s").unwrap(),
            Some(store.get_summary("ns", "s", 0).unwrap()),
            Some(episode.clone())
        ))
    );

    let outbox_before = outbox(store);
    let a = set_status(store, "ns", "s", 3, ActionStatus::InProgress).unwrap();
    assert_eq!(
        (a.action.as_str(), a.status),
        ("send the form", ActionStatus::InProgress)
    );
    assert_eq!(
        store.action_statuses("ns", "s").unwrap(),
        BTreeMap::from([(3, ActionStatus::InProgress)])
    );
    let stored = store.get_episode("ns", "s").unwrap().unwrap();
    assert_eq!(
        stored.pending_actions,
        [action("call the bank", 2), a.clone()]
    );
    let carried = |store: &dyn Store| {
        let mut c = store.carried_actions("ns", "alice", 100).unwrap();
        c.sort_by_key(|c| c.action_ref.action_seq);
        c.into_iter()
            .map(|c| (c.action_ref.action_seq, c.action.status))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        carried(store),
        [(2, ActionStatus::Pending), (3, ActionStatus::InProgress)]
    );
    assert_eq!(
        new_entries(store, &outbox_before),
        [IndexChange::Episode {
            namespace: "ns".into(),
            session_id: "s".into(),
        }]
    );
    // DONE: out of the episode, and the carried copy is removed.
    set_status(store, "ns", "s", 2, ActionStatus::Done).unwrap();
    assert_eq!(
        store.action_statuses("ns", "s").unwrap(),
        BTreeMap::from([(2, ActionStatus::Done), (3, ActionStatus::InProgress)])
    );
    assert_eq!(carried(store), [(3, ActionStatus::InProgress)]);
    let stored = store.get_episode("ns", "s").unwrap().unwrap();
    assert_eq!(stored.pending_actions, [a]);
    // The statuses reach the next episode's decide.
    let mut statuses = None;
    store
        .save_episode("ns", "s", &mut |_, _, st| {
            statuses = Some(st.clone());
            Ok(None)
        })
        .unwrap();
    assert_eq!(
        statuses,
        Some(BTreeMap::from([
            (2, ActionStatus::Done),
            (3, ActionStatus::InProgress)
        ]))
    );

    // An action the summary does not hold: decide refuses, nothing stored.
    let before = snapshot(store);
    assert!(matches!(
        set_status(store, "ns", "s", 9, ActionStatus::Done),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        set_status(store, "ns", "nope", 2, ActionStatus::Done),
        Err(Error::NotFound(_))
    ));
    assert_eq!(snapshot(store), before);

    // A session without an episode: only the status is stored.
    store.create_session(&session("ns", "t", "alice")).unwrap();
    append_texts(store, "ns", "t", &["one"]);
    store
        .save_summary(
            "ns",
            "t",
            SummaryWrite {
                base_version: 0,
                summary: Some(summary(1, 1, vec![action("book a room", 1)])),
                fold: Some(fold(1, 1)),
                audit: attempt_audit(1, 1),
                review: None,
                attempted_through_seq: 1,
            },
        )
        .unwrap();
    let mut want = snapshot(store);
    set_status(store, "ns", "t", 1, ActionStatus::Done).unwrap();
    want.sessions
        .get_mut(&key("ns", "t"))
        .unwrap()
        .statuses
        .insert(1, ActionStatus::Done);
    assert_eq!(snapshot(store), want);
}

fn scan_facts_and_episodes_page_through_every_namespace(store: &dyn Store) {
    let mut want_facts = Vec::new();
    let (a, _) = put(
        store,
        &new_fact("lang", "Speaks Spanish", FactOrigin::Client),
    );
    let (b, _) = put(
        store,
        &new_fact("lang", "Speaks English", FactOrigin::Client),
    );
    let (c, _) = put(store, &new_fact("", "Has a dog", FactOrigin::Client));
    want_facts.push(store.get_fact("ns", &a.fact_id).unwrap());
    want_facts.extend([b, c]);
    for ns in ["ns2", "other"] {
        let mut f = new_fact("", "Has a cat", FactOrigin::Client);
        f.namespace = ns.into();
        want_facts.push(put(store, &f).0);
    }
    let sorted_facts = |mut v: Vec<Fact>| {
        v.sort_by(|a, b| (&a.namespace, &a.fact_id).cmp(&(&b.namespace, &b.fact_id)));
        v
    };
    let want_facts = sorted_facts(want_facts);
    let mut want_episodes = Vec::new();
    for (ns, id, subject) in [
        ("ns", "s1", "alice"),
        ("ns", "s2", "bob"),
        ("ns2", "s1", "alice"),
    ] {
        stopped_session(store, ns, id, subject, &[("x", 1)]);
        want_episodes.push(settle(store, ns, id, 1000).expect("an episode"));
    }
    let sorted_episodes = |mut v: Vec<Episode>| {
        v.sort_by(|a, b| (&a.namespace, &a.session_id).cmp(&(&b.namespace, &b.session_id)));
        v
    };
    let want_episodes = sorted_episodes(want_episodes);
    for page in [1, 2, 3, 5, 100] {
        assert_eq!(
            sorted_facts(all_facts(store, page)),
            want_facts,
            "page {page}"
        );
        assert_eq!(
            sorted_episodes(all_episodes(store, page)),
            want_episodes,
            "page {page}"
        );
    }
    // Resuming continues after the page, never repeating it.
    let (first, resume) = store.scan_facts(None, 2).unwrap();
    let (rest, _) = store.scan_facts(resume.as_deref(), 100).unwrap();
    assert_eq!(first.len() + rest.len(), want_facts.len());
    assert!(first.iter().all(|f| !rest.contains(f)));
    let (first, resume) = store.scan_episodes(None, 1).unwrap();
    let (rest, _) = store.scan_episodes(resume.as_deref(), 100).unwrap();
    assert_eq!(first.len() + rest.len(), want_episodes.len());
    assert!(!rest.contains(&first[0]));
}

// ---------------------------------------------------------------------------
// Outbox
// ---------------------------------------------------------------------------

fn every_searchable_change_enters_the_outbox(store: &dyn Store) {
    let before = store.read_outbox("search", 10_000).unwrap().entries.len();
    store.create_session(&session("ns", "s", "u")).unwrap();
    append_texts(store, "ns", "s", &["a", "b"]);
    put(store, &new_fact("k", "v", FactOrigin::Client));
    store.delete_session("ns", "s").unwrap();
    let page = store.read_outbox("search", 10_000).unwrap();
    let kinds: Vec<&str> = page.entries[before..]
        .iter()
        .map(|(_, c)| match c {
            IndexChange::Turns { .. } => "turns",
            IndexChange::Fact { .. } => "fact",
            IndexChange::SessionDeleted { .. } => "deleted",
            IndexChange::Episode { .. } => "episode",
            IndexChange::TurnRemoved { .. } => "removed",
        })
        .collect();
    assert_eq!(kinds, ["turns", "fact", "deleted"]);
    assert_eq!(
        store.outbox_backlog("search").unwrap(),
        page.entries.len() as u64
    );
    store.advance_outbox("search", page.through).unwrap();
    assert!(store.read_outbox("search", 10).unwrap().entries.is_empty());
    assert_eq!(store.outbox_backlog("search").unwrap(), 0);
}

fn outbox_consumers_keep_their_own_cursors(store: &dyn Store) {
    for c in ["a", "b"] {
        let page = store.read_outbox(c, 10).unwrap();
        assert!(page.entries.is_empty());
        assert_eq!(page.through, 0);
        assert_eq!(store.outbox_backlog(c).unwrap(), 0);
    }
    store.create_session(&session("ns", "s", "u")).unwrap();
    append_texts(store, "ns", "s", &["a", "b"]);
    let (f1, _) = put(
        store,
        &new_fact("lang", "Speaks Spanish", FactOrigin::Client),
    );
    let (f2, _) = put(
        store,
        &new_fact("lang", "Speaks English", FactOrigin::Client),
    );
    store.delete_session("ns", "s").unwrap();
    let fact = |f: &Fact| IndexChange::Fact {
        namespace: "ns".into(),
        fact_id: f.fact_id.clone(),
    };
    let want = [
        IndexChange::Turns {
            namespace: "ns".into(),
            session_id: "s".into(),
            first_seq: 1,
            last_seq: 2,
        },
        fact(&f1),
        fact(&f1),
        fact(&f2),
        IndexChange::SessionDeleted {
            namespace: "ns".into(),
            session_id: "s".into(),
        },
    ];
    let all = store.read_outbox("b", 100).unwrap();
    let changes = |e: &[(u64, IndexChange)]| e.iter().map(|(_, c)| c.clone()).collect::<Vec<_>>();
    assert_eq!(changes(&all.entries), want);
    assert!(
        all.entries.windows(2).all(|w| w[0].0 < w[1].0),
        "ids increase"
    );
    assert_eq!(all.through, all.entries[4].0);
    let id = |i: usize| all.entries[i].0;
    assert_eq!(store.outbox_backlog("a").unwrap(), 5);
    assert_eq!(store.outbox_backlog("b").unwrap(), 5);

    // a reads a page at a time.
    let page = store.read_outbox("a", 2).unwrap();
    assert_eq!(page.entries, all.entries[..2]);
    assert_eq!(page.through, id(1));
    assert_eq!(
        store.read_outbox("a", 2).unwrap().entries,
        page.entries,
        "reading moves nothing"
    );
    store.advance_outbox("a", page.through).unwrap();
    assert_eq!(store.outbox_backlog("a").unwrap(), 3);
    assert_eq!(
        store.read_outbox("a", 100).unwrap().entries,
        all.entries[2..]
    );
    // A cursor never moves back.
    store.advance_outbox("a", id(0)).unwrap();
    store.advance_outbox("a", 0).unwrap();
    assert_eq!(
        store.read_outbox("a", 100).unwrap().entries,
        all.entries[2..]
    );
    assert_eq!(store.outbox_backlog("a").unwrap(), 3);
    store.advance_outbox("a", all.through).unwrap();
    let page = store.read_outbox("a", 100).unwrap();
    assert!(page.entries.is_empty());
    assert_eq!(page.through, 0);
    assert_eq!(store.outbox_backlog("a").unwrap(), 0);

    // b has its own cursor: nothing a passed is gone for b.
    assert_eq!(store.read_outbox("b", 100).unwrap().entries, all.entries);
    assert_eq!(store.outbox_backlog("b").unwrap(), 5);
    // Once both passed the first three, they are pruned: a consumer new
    // now (it starts before every stored entry) sees only the other two.
    store.advance_outbox("b", id(2)).unwrap();
    assert_eq!(
        store.read_outbox("b", 100).unwrap().entries,
        all.entries[3..]
    );
    assert_eq!(store.outbox_backlog("b").unwrap(), 2);
    assert_eq!(
        store.read_outbox("c", 100).unwrap().entries,
        all.entries[3..]
    );
    assert_eq!(store.outbox_backlog("c").unwrap(), 2);

    // A later change: a larger id, counted for every consumer.
    store.create_session(&session("ns", "t", "")).unwrap();
    append_texts(store, "ns", "t", &["x"]);
    let page = store.read_outbox("a", 100).unwrap();
    assert_eq!(
        changes(&page.entries),
        [IndexChange::Turns {
            namespace: "ns".into(),
            session_id: "t".into(),
            first_seq: 1,
            last_seq: 1,
        }]
    );
    assert!(page.through > all.through);
    assert_eq!(store.outbox_backlog("a").unwrap(), 1);
    assert_eq!(store.outbox_backlog("b").unwrap(), 3);
    assert_eq!(store.outbox_backlog("c").unwrap(), 3);
}

// ---------------------------------------------------------------------------
// Store
// ---------------------------------------------------------------------------

fn sync_stats_count_durable_writes(store: &dyn Store) {
    let stats = store.sync_stats();
    let requests = || stats.requests.load(Ordering::Relaxed);
    let r0 = requests();
    // Reads wait for no sync.
    let _ = store.get_session("ns", "s");
    store
        .list_sessions("ns", &SessionFilter::default(), None, 10, 10)
        .unwrap();
    store.read_outbox("reader", 10).unwrap();
    store.recent_facts("ns", "u", 10, 10).unwrap();
    assert_eq!(requests(), r0);
    // Every write does.
    store.create_session(&session("ns", "s", "")).unwrap();
    let r1 = requests();
    assert!(r1 > r0);
    append_texts(store, "ns", "s", &["a"]);
    let r2 = requests();
    assert!(r2 > r1);
    put(store, &new_fact("k", "v", FactOrigin::Client));
    let r3 = requests();
    assert!(r3 > r2);
    summarize(store, "ns", "s", 1, 1, None);
    assert!(requests() > r3);
    let syncs = stats.syncs.load(Ordering::Relaxed);
    assert!(syncs >= 1, "no sync for {} requests", requests());
    assert!(syncs <= requests());
    // The counters are shared: a second handle sees the same.
    assert_eq!(
        store.sync_stats().requests.load(Ordering::Relaxed),
        requests()
    );
}

fn flush_syncs_and_changes_nothing(store: &dyn Store) {
    store.flush().unwrap();
    store.create_session(&session("ns", "s", "")).unwrap();
    append_texts(store, "ns", "s", &["a"]);
    let before = snapshot(store);
    let syncs = store.sync_stats().syncs.load(Ordering::Relaxed);
    store.flush().unwrap();
    assert!(store.sync_stats().syncs.load(Ordering::Relaxed) > syncs);
    assert_eq!(snapshot(store), before);
}

// ---------------------------------------------------------------------------
// Every case on both engines
// ---------------------------------------------------------------------------

/// Runs each listed case on a fresh in-memory store and on a fresh sled
/// store, as one test per case and engine.
fn remove_last(store: &dyn Store, ns: &str, id: &str, removal: append::Removal) -> Result<Removed> {
    store.remove_last_turn(ns, id, &mut |s, last| {
        append::plan_removal(s, last, &removal)
    })
}

const ANY_LAST: append::Removal = append::Removal {
    expected_last_seq: None,
    lease_epoch: None,
    now: 9,
};

fn removing_the_last_turn_frees_its_seq(store: &dyn Store) {
    store.create_session(&session("ns", "s", "u")).unwrap();
    let appended = append_texts(store, "ns", "s", &["a", "bb", "ccc"]);
    let outbox_before = store.read_outbox("search", BIG).unwrap().entries.len();
    let removed = remove_last(store, "ns", "s", ANY_LAST).unwrap();
    let turn = removed.turn.expect("a turn was removed");
    assert_eq!((turn.seq, turn.content.as_str()), (3, "ccc"));
    let s = store.get_session("ns", "s").unwrap();
    assert_eq!((s.next_seq, s.turn_count), (3, 2));
    assert_eq!(s.total_tokens, appended.session.total_tokens - 3);
    assert_eq!(removed.session.next_seq, 3);
    assert_eq!(contents(store, "ns", "s"), ["a", "bb"]);
    assert!(store.get_turns("ns", "s", &[3]).unwrap().is_empty());
    let entries = store.read_outbox("search", BIG).unwrap().entries;
    assert_eq!(entries.len(), outbox_before + 1);
    assert!(matches!(
        &entries.last().unwrap().1,
        IndexChange::TurnRemoved { namespace, session_id, seq: 3 } if namespace == "ns" && session_id == "s"
    ));
    // The seq goes to the next append: still gap-free.
    let again = append_texts(store, "ns", "s", &["d"]);
    assert_eq!(again.outcome.first_seq, 3);
    assert_eq!(contents(store, "ns", "s"), ["a", "bb", "d"]);
    // Down to empty, then nothing to remove: nothing written.
    for _ in 0..3 {
        assert!(remove_last(store, "ns", "s", ANY_LAST)
            .unwrap()
            .turn
            .is_some());
    }
    let before = snapshot(store);
    let none = remove_last(store, "ns", "s", ANY_LAST).unwrap();
    assert!(none.turn.is_none());
    assert_eq!(none.session.next_seq, 1);
    assert_eq!(snapshot(store), before);
    assert_eq!(append_texts(store, "ns", "s", &["e"]).outcome.first_seq, 1);
}

fn refused_removals_write_nothing(store: &dyn Store) {
    store.create_session(&session("ns", "s", "u")).unwrap();
    append_texts(store, "ns", "s", &["a", "b"]);
    let before = snapshot(store);
    let stale = append::Removal {
        lease_epoch: Some(0),
        ..ANY_LAST
    };
    assert!(matches!(
        remove_last(store, "ns", "s", stale),
        Err(Error::FailedPrecondition(Precondition::StaleLeaseEpoch, _))
    ));
    let moved = append::Removal {
        expected_last_seq: Some(1),
        ..ANY_LAST
    };
    assert!(matches!(
        remove_last(store, "ns", "s", moved),
        Err(Error::Aborted(_))
    ));
    assert!(matches!(
        remove_last(store, "ns", "missing", ANY_LAST),
        Err(Error::NotFound(_))
    ));
    assert_eq!(snapshot(store), before);
    store
        .update_session("ns", "s", &mut |s| {
            s.state = SessionState::Closed;
            Ok(())
        })
        .unwrap();
    let closed = snapshot(store);
    assert!(matches!(
        remove_last(store, "ns", "s", ANY_LAST),
        Err(Error::FailedPrecondition(Precondition::SessionClosed, _))
    ));
    assert_eq!(snapshot(store), closed);
}

fn a_removal_plan_breaking_seq_order_is_refused(store: &dyn Store) {
    store.create_session(&session("ns", "s", "u")).unwrap();
    append_texts(store, "ns", "s", &["a", "b"]);
    let before = snapshot(store);
    let r = store.remove_last_turn("ns", "s", &mut |s, _| {
        let mut wrong = s.clone();
        wrong.next_seq -= 2;
        Ok(Some(Box::new(wrong)))
    });
    assert!(matches!(r, Err(Error::Internal(_))), "{r:?}");
    assert_eq!(snapshot(store), before);
}

macro_rules! conformance {
    ($($(#[$meta:meta])* $case:ident;)*) => {
        /// The in-memory engine.
        mod memory_engine {
            $(
                $(#[$meta])*
                #[test]
                fn $case() {
                    let store = super::MemoryStore::default();
                    super::$case(&store);
                    super::Store::flush(&store).unwrap();
                }
            )*
        }

        /// The sled engine, on real files.
        mod sled_engine {
            $(
                $(#[$meta])*
                #[test]
                fn $case() {
                    let dir = tempfile::tempdir().unwrap();
                    let store = super::SledStore::open(&dir.path().join("data")).unwrap();
                    super::$case(&store);
                    super::Store::flush(&store).unwrap();
                }
            )*
        }

        /// The PostgreSQL engine, on a real server (a fresh database per
        /// case).
        mod postgres_engine {
            $(
                $(#[$meta])*
                #[test]
                fn $case() {
                    let Some(url) = super::pg::fresh_database() else { return };
                    let store = super::PgStore::connect(&super::PgOptions::new(&url)).unwrap();
                    super::$case(&store);
                    super::Store::flush(&store).unwrap();
                }
            )*
        }
    };
}

// ---------------------------------------------------------------------------
// Claims and point reads
// ---------------------------------------------------------------------------

fn claims_lease_fence_and_take_over(store: &dyn Store) {
    use mnemo::store::WorkKind::{Idle, Summary};
    store
        .mark_due(Summary, "ns", "s", 100, Some(Trigger::Close))
        .unwrap();
    store.mark_due(Summary, "ns", "t", 300, None).unwrap();
    store.mark_due(Idle, "ns", "s", 50, None).unwrap();
    assert_eq!(store.due_count(Summary).unwrap(), 2);
    assert_eq!(store.next_due(Summary).unwrap(), Some(100));
    // Only what is due by `now`, of the kind asked.
    let c = store.claim_due(Summary, 200, 1_000, 10).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].session_id.as_str(), c[0].trigger),
        ("s", Some(Trigger::Close))
    );
    // Held: nobody else gets it while the lease runs.
    assert!(store.claim_due(Summary, 250, 1_000, 10).unwrap().is_empty());
    assert_eq!(store.next_due(Summary).unwrap(), Some(300));
    // Marked again while held: it stays due after completion.
    store.mark_due(Summary, "ns", "s", 260, None).unwrap();
    store.complete_claim(&c[0]).unwrap();
    assert_eq!(store.due_count(Summary).unwrap(), 2);
    let again = store.claim_due(Summary, 270, 1_000, 10).unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0].trigger,
        Some(Trigger::Close),
        "the trigger is kept"
    );
    // An expired lease is taken over; the old holder's completion is refused.
    let taken = store.claim_due(Summary, 270 + 1_000, 1_000, 10).unwrap();
    assert!(taken
        .iter()
        .any(|t| t.session_id == "s" && t.token != again[0].token));
    assert!(matches!(
        store.complete_claim(&again[0]),
        Err(Error::Aborted(_))
    ));
    for t in &taken {
        store.complete_claim(t).unwrap();
    }
    assert_eq!(store.due_count(Summary).unwrap(), 0);
    // Cancelled work is gone; other kinds are untouched.
    assert_eq!(store.due_count(Idle).unwrap(), 1);
    store.cancel_due(Idle, "ns", "s").unwrap();
    assert_eq!(store.due_count(Idle).unwrap(), 0);
    assert_eq!(store.next_due(Idle).unwrap(), None);
}

fn summary_at_reads_one_version_without_the_session(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    assert!(store.summary_at("ns", "s", 1).unwrap().is_none());
    append_to(
        store,
        "ns",
        "s",
        &prepared(&["I will send the invoice by Friday."], None, None),
    )
    .unwrap();
    let turns = store.list_turns("ns", "s", 1, u64::MAX, 10).unwrap();
    let ctx = mnemo::summarize::SummaryContext {
        namespace: String::new(),
        context_limit_tokens: 8000,
        bundle_tokens: 0,
        trigger: Trigger::Requested,
        version: 1,
        now: 1,
        high_risk: false,
        wait_free: false,
    };
    let mut summary = mnemo::summarize::summarize(&turns, &ctx);
    summary.version = 1;
    store
        .save_summary(
            "ns",
            "s",
            SummaryWrite {
                base_version: 0,
                summary: Some(summary.clone()),
                fold: Some(FoldRecord {
                    through_seq: 1,
                    ..FoldRecord::default()
                }),
                audit: {
                    AuditRecord {
                        audit_seq: 0,
                        kind: AuditKind::SummaryAttempt,
                        created_at: 1,
                        summary_version: 1,
                        trigger: Some(Trigger::Requested),
                        covers_through_seq: 1,
                        pre_summary_tokens: 0,
                        post_summary_tokens: 0,
                        compression_ratio: 0.0,
                        summarizer: "test".into(),
                        covered_turns_sha256: String::new(),
                        validation_passed: true,
                        validation_errors: vec![],
                        decisions: 0,
                        pending_actions: 0,
                        open_questions: 0,
                        health_flags: vec![],
                        review_id: String::new(),
                        review_status: None,
                        reviewer: String::new(),
                        comment: String::new(),
                        reviewer_key: String::new(),
                    }
                },
                review: None,
                attempted_through_seq: 1,
            },
        )
        .unwrap();
    assert_eq!(store.summary_at("ns", "s", 1).unwrap().unwrap(), summary);
    assert!(store.summary_at("ns", "s", 2).unwrap().is_none());
    assert!(store.summary_at("ns", "other", 1).unwrap().is_none());
}

fn retention_removes_what_it_is_told_in_batches_and_marks_it(store: &dyn Store) {
    store.create_session(&session("ns", "s", "alice")).unwrap();
    store.create_session(&session("ns", "t", "alice")).unwrap();
    for chunk in 0..3 {
        let texts: Vec<String> = (0..100)
            .map(|i| format!("turn {}", chunk * 100 + i))
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        append_texts(store, "ns", "s", &texts);
    }
    append_texts(store, "ns", "t", &["keep", "me"]);
    summarize(store, "ns", "t", 1, 2, None);
    summarize(store, "ns", "t", 2, 2, None);
    close(store, "ns", "s");
    let before = outbox(store).len();
    let cut = SessionCut {
        turns_through_seq: 300,
        ..Default::default()
    };
    // A batch per call, oldest first; the mark follows; a repeat removes
    // nothing.
    let first = store.retain_session("ns", "s", &cut, 256, 7).unwrap();
    assert_eq!(first.turns, 256);
    let mark = store.retention_mark("ns", "s").unwrap();
    assert_eq!(
        (
            mark.turns_through_seq,
            mark.turns_removed,
            mark.turns_removed_at
        ),
        (256, 256, 7)
    );
    assert_eq!(
        store.retain_session("ns", "s", &cut, 256, 8).unwrap().turns,
        44
    );
    assert_eq!(
        store
            .retain_session("ns", "s", &cut, 256, 9)
            .unwrap()
            .total(),
        0
    );
    assert!(contents(store, "ns", "s").is_empty());
    let mark = store.retention_mark("ns", "s").unwrap();
    assert_eq!((mark.turns_through_seq, mark.turns_removed), (300, 300));
    // The session keeps its seqs; the other session is untouched.
    let s = store.get_session("ns", "s").unwrap();
    assert_eq!((s.next_seq, s.turn_count), (301, 300));
    assert_eq!(contents(store, "ns", "t"), ["keep", "me"]);
    // The index hears of every removed turn.
    let removed: BTreeSet<u64> = outbox(store)[before..]
        .iter()
        .filter_map(|(_, c)| match c {
            IndexChange::TurnRemoved {
                session_id, seq, ..
            } if session_id == "s" => Some(*seq),
            _ => None,
        })
        .collect();
    assert_eq!(removed, (1..=300).collect());
    let view = store.retention_view("ns", "s", 10).unwrap().unwrap();
    assert_eq!(view.oldest_turn_at, None);
    // Summary versions and audit records up to the cut; the mark says
    // which versions.
    let cut = SessionCut {
        summaries_through_version: 1,
        audit_through_seq: 1,
        ..Default::default()
    };
    let c = store.retain_session("ns", "t", &cut, 256, 10).unwrap();
    assert_eq!((c.summaries, c.audit_records, c.turns), (1, 1, 0));
    assert_eq!(
        store
            .retention_mark("ns", "t")
            .unwrap()
            .summaries_through_version,
        1
    );
    assert!(store.summary_at("ns", "t", 1).unwrap().is_none());
    assert!(store.summary_at("ns", "t", 2).unwrap().is_some());
    // A session that is gone: nothing, and no error.
    assert_eq!(
        store
            .retain_session("ns", "gone", &cut, 256, 10)
            .unwrap()
            .total(),
        0
    );
    assert!(store.retention_view("ns", "gone", 10).unwrap().is_none());
    // Fact chains: left whole when no longer due, removed whole otherwise.
    let (old, _) = put(
        store,
        &new_fact_of("alice", "pet", "Has a dog", FactOrigin::Client),
    );
    let (cur, _) = put(
        store,
        &new_fact_of("alice", "pet", "Has a cat", FactOrigin::Client),
    );
    let chain = vec![vec![cur.fact_id.clone(), old.fact_id.clone()]];
    assert_eq!(
        store
            .retain_facts("ns", "alice", &chain, &|_| false)
            .unwrap(),
        0
    );
    assert!(store.get_fact("ns", &cur.fact_id).is_ok());
    assert_eq!(
        store
            .retain_facts("ns", "alice", &chain, &|_| true)
            .unwrap(),
        2
    );
    assert!(matches!(
        store.get_fact("ns", &old.fact_id),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        store.get_fact("ns", &cur.fact_id),
        Err(Error::NotFound(_))
    ));
    // Deleting the session takes its mark with it.
    store.delete_session("ns", "s").unwrap();
    assert_eq!(
        store.retention_mark("ns", "s").unwrap(),
        RetentionMark::default()
    );
}

conformance! {
    snapshot_sees_every_kind_of_write;
    removing_the_last_turn_frees_its_seq;
    refused_removals_write_nothing;
    a_removal_plan_breaking_seq_order_is_refused;
    sessions_create_get_and_conflict;
    append_assigns_gap_free_seqs_and_counters;
    conflicts_and_closed_sessions_write_nothing;
    idempotency_replays_and_detects_reuse;
    append_applies_the_plan_of_decide;
    append_plan_breaking_seq_order_is_refused;
    append_plan_with_a_gap_between_its_turns_is_refused;
    update_session_applies_the_change_or_nothing;
    list_sessions_filters_and_resumes;
    turns_are_read_by_range_and_by_seq;
    scan_sessions_pages_through_every_namespace;
    delete_removes_everything_of_one_session;
    concurrent_appends_are_serialized;
    summaries_are_stored_with_fold_audit_review_and_progress;
    review_items_are_listed_and_resolved;
    facts_supersede_merge_and_delete;
    put_fact_decides_on_the_current_fact_of_its_identity;
    list_facts_filters_and_resumes;
    recent_facts_are_newest_current_first;
    delete_fact_removes_one_version;
    revise_facts_keeps_rewrites_and_deletes;
    save_episode_applies_the_plan_or_nothing;
    list_episodes_newest_first_and_resumes;
    carried_actions_belong_to_their_subject;
    action_status_is_stored_with_its_episode_and_carried_copy;
    scan_facts_and_episodes_page_through_every_namespace;
    every_searchable_change_enters_the_outbox;
    outbox_consumers_keep_their_own_cursors;
    sync_stats_count_durable_writes;
    flush_syncs_and_changes_nothing;
    claims_lease_fence_and_take_over;
    summary_at_reads_one_version_without_the_session;
    erase_removes_a_subject_in_steps_and_refuses_its_writes_meanwhile;
    retention_removes_what_it_is_told_in_batches_and_marks_it;
}

// ---------------------------------------------------------------------------
// Sled only: reopening
// ---------------------------------------------------------------------------

#[test]
fn sled_store_keeps_everything_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let (before, unread) = {
        let store = SledStore::open(&path).unwrap();
        store.create_session(&session("ns", "s", "alice")).unwrap();
        append_to(&store, "ns", "s", &prepared(&["a", "b"], Some("k"), None)).unwrap();
        summarize(&store, "ns", "s", 1, 2, Some(review("ns", "r1", "s", 1)));
        stopped_session(
            &store,
            "ns",
            "t",
            "alice",
            &[("call back", 2), ("write", 3)],
        );
        settle(&store, "ns", "t", 1000).expect("an episode");
        set_status(&store, "ns", "t", 3, ActionStatus::InProgress).unwrap();
        put(
            &store,
            &new_fact_of("alice", "lang", "Speaks Spanish", FactOrigin::Client),
        );
        put(
            &store,
            &new_fact_of("alice", "lang", "Speaks English", FactOrigin::Client),
        );
        let page = store.read_outbox("search", 2).unwrap();
        store.advance_outbox("search", page.through).unwrap();
        store.flush().unwrap();
        (
            snapshot(&store),
            store.read_outbox("search", 100).unwrap().entries,
        )
    };
    assert!(!before.facts.is_empty() && !before.episodes.is_empty());
    let store = SledStore::open(&path).unwrap();
    assert_eq!(snapshot(&store), before);
    assert_eq!(contents(&store, "ns", "s"), ["a", "b"]);
    assert!(
        append_to(&store, "ns", "s", &prepared(&["a", "b"], Some("k"), None))
            .unwrap()
            .outcome
            .replayed
    );
    assert_eq!(store.read_outbox("search", 100).unwrap().entries, unread);
}

#[test]
fn sled_store_keeps_outbox_cursors_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let all = {
        let store = SledStore::open(&path).unwrap();
        store.create_session(&session("ns", "s", "")).unwrap();
        for text in ["a", "b", "c", "d"] {
            append_texts(&store, "ns", "s", &[text]);
        }
        let all = store.read_outbox("a", 100).unwrap().entries;
        assert_eq!(all.len(), 4);
        store.read_outbox("b", 100).unwrap();
        store.advance_outbox("a", all[1].0).unwrap();
        store.advance_outbox("b", all[2].0).unwrap();
        all
    };
    let store = SledStore::open(&path).unwrap();
    // Each consumer resumes after its own cursor.
    assert_eq!(store.read_outbox("a", 100).unwrap().entries, all[2..]);
    assert_eq!(store.read_outbox("b", 100).unwrap().entries, all[3..]);
    assert_eq!(store.outbox_backlog("a").unwrap(), 2);
    assert_eq!(store.outbox_backlog("b").unwrap(), 1);
    // What both had passed was pruned before the restart and stays gone.
    assert_eq!(store.read_outbox("new", 100).unwrap().entries, all[2..]);
    // New entries get ids after every old one.
    append_texts(&store, "ns", "s", &["e"]);
    let page = store.read_outbox("b", 100).unwrap();
    assert_eq!(page.entries.len(), 2);
    assert!(page.entries[1].0 > all[3].0);
    assert_eq!(store.outbox_backlog("a").unwrap(), 3);
}

// ---------------------------------------------------------------------------
// Interrupted deletes (through the engine)
// ---------------------------------------------------------------------------

/// Leaves what a crash in the middle of a delete can leave: a session's
/// records without the session record itself.
fn interrupted_delete<E: Engine>(store: &KvStore<E>) {
    store.create_session(&session("ns", "s", "")).unwrap();
    append_to(store, "ns", "s", &prepared(&["old"], Some("k"), None)).unwrap();
    store
        .save_summary(
            "ns",
            "s",
            SummaryWrite {
                base_version: 0,
                summary: Some(summary(1, 1, vec![action("old action", 1)])),
                fold: Some(fold(1, 1)),
                audit: attempt_audit(1, 1),
                review: Some(review("ns", "r-old", "s", 1)),
                attempted_through_seq: 1,
            },
        )
        .unwrap();
    set_status(store, "ns", "s", 1, ActionStatus::Done).unwrap();
    store
        .engine()
        .apply(vec![Write::Delete(keys::session("ns", "s"))])
        .unwrap();
}

/// Re-creating the id must not resurrect the leftovers.
fn recreated_session_ignores_leftovers<E: Engine>(store: KvStore<E>) {
    interrupted_delete(&store);
    store.create_session(&session("ns", "s", "")).unwrap();
    assert!(contents(&store, "ns", "s").is_empty());
    assert!(store.get_turns("ns", "s", &[1]).unwrap().is_empty());
    assert!(store.list_audit("ns", "s", 0, 10).unwrap().is_empty());
    assert_eq!(store.fold_record("ns", "s").unwrap(), None);
    assert!(store.action_statuses("ns", "s").unwrap().is_empty());
    assert!(store
        .list_review_items("ns", None, true, 10, 10)
        .unwrap()
        .0
        .is_empty());
    let o = append_to(&store, "ns", "s", &prepared(&["old"], Some("k"), None))
        .unwrap()
        .outcome;
    assert!(!o.replayed, "old idempotency key is gone");
}

#[test]
fn leftovers_of_an_interrupted_delete_never_leak() {
    recreated_session_ignores_leftovers(MemoryStore::default());
    let dir = tempfile::tempdir().unwrap();
    recreated_session_ignores_leftovers(SledStore::open(&dir.path().join("d")).unwrap());
}

/// Before the id is re-created, the session is gone for every reader.
fn leftovers_are_unreachable<E: Engine>(store: KvStore<E>) {
    interrupted_delete(&store);
    assert!(matches!(
        store.get_session("ns", "s"),
        Err(Error::NotFound(_))
    ));
    let mut leaks = Vec::new();
    if !store
        .read_turns("ns", "s", 1, u64::MAX, 10)
        .unwrap()
        .is_empty()
    {
        leaks.push("read_turns");
    }
    if !store.get_turns("ns", "s", &[1]).unwrap().is_empty() {
        leaks.push("get_turns");
    }
    if store.fold_record("ns", "s").unwrap().is_some() {
        leaks.push("fold_record");
    }
    if !store.action_statuses("ns", "s").unwrap().is_empty() {
        leaks.push("action_statuses");
    }
    let (reviews, _) = store.list_review_items("ns", None, true, 10, 10).unwrap();
    if !reviews.is_empty() {
        leaks.push("list_review_items");
    }
    assert!(
        leaks.is_empty(),
        "a deleted session's records are still read by {leaks:?}"
    );
}

#[test]
#[ignore = "store bug: after a delete interrupted between its two steps, the session is gone but read_turns, get_turns, fold_record, action_statuses and list_review_items still return its records (delete_session promises they are unreachable); only re-creating the id purges them"]
fn leftovers_of_an_interrupted_delete_are_unreachable() {
    leftovers_are_unreachable(MemoryStore::default());
    let dir = tempfile::tempdir().unwrap();
    leftovers_are_unreachable(SledStore::open(&dir.path().join("d")).unwrap());
}

// ---------------------------------------------------------------------------
// Outbox under concurrent writers (an engine that holds one batch)
// ---------------------------------------------------------------------------

/// When [`GatedEngine`] holds the batch that carries an outbox entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    BeforeApply,
    AfterApply,
}

/// What the next held batch does: tell `held`, then wait for `release`.
type Armed = (Hold, mpsc::Sender<()>, mpsc::Receiver<()>);

/// The in-memory engine, except that one armed batch carrying an outbox
/// entry waits (before or after it is applied) until the test releases
/// it: a slow writer, made deterministic.
struct GatedEngine {
    inner: MemoryEngine,
    armed: Arc<Mutex<Option<Armed>>>,
}

impl GatedEngine {
    fn new() -> (Self, Arc<Mutex<Option<Armed>>>) {
        let armed = Arc::new(Mutex::new(None));
        let engine = GatedEngine {
            inner: MemoryEngine::new(),
            armed: armed.clone(),
        };
        (engine, armed)
    }
}

/// Arms the gate: returns (held signal, release handle).
fn arm(gate: &Mutex<Option<Armed>>, hold: Hold) -> (mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    *gate.lock().unwrap() = Some((hold, held_tx, release_rx));
    (held_rx, release_tx)
}

impl Read for GatedEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }

    fn scan(&self, from: Bound<&[u8]>, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        self.inner.scan(from, prefix, limit)
    }

    fn scan_rev(&self, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        self.inner.scan_rev(prefix, limit)
    }
}

impl Engine for GatedEngine {
    fn apply(&self, batch: Batch) -> Result<()> {
        let announces = batch
            .iter()
            .any(|w| matches!(w, Write::Put(k, _) if k.first() == Some(&keys::CHANGE)));
        let armed = if announces {
            self.armed.lock().unwrap().take()
        } else {
            None
        };
        let Some((hold, held, release)) = armed else {
            return self.inner.apply(batch);
        };
        let result = if hold == Hold::AfterApply {
            self.inner.apply(batch.clone())
        } else {
            Ok(())
        };
        held.send(()).unwrap();
        // A dropped release handle (the test failed) lets the writer go.
        let _ = release.recv_timeout(Duration::from_secs(30));
        if hold == Hold::BeforeApply {
            return self.inner.apply(batch);
        }
        result
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
}

/// The lock stripe `KvStore` serializes a session's writers on (64
/// stripes by a `DefaultHasher` of namespace and id): the two writers
/// below must not share one.
fn stripe(ns: &str, id: &str) -> u64 {
    let mut h = DefaultHasher::new();
    (ns, id).hash(&mut h);
    h.finish() % 64
}

/// Entries become visible in id order: while a writer's batch is on its
/// way into the engine, a writer with a later id waits, so a consumer that
/// reads and advances meanwhile cannot pass (and so skip) the earlier one.
#[test]
fn outbox_entry_of_a_slow_writer_is_not_skipped() {
    let (engine, gate) = GatedEngine::new();
    let store = KvStore::new(engine);
    let fast = (0..)
        .map(|i| format!("b{i}"))
        .find(|b| stripe("ns", b) != stripe("ns", "a"))
        .unwrap();
    store.create_session(&session("ns", "a", "")).unwrap();
    store.create_session(&session("ns", &fast, "")).unwrap();
    assert!(store.read_outbox("search", 10).unwrap().entries.is_empty());
    let (held, release) = arm(&gate, Hold::BeforeApply);
    let mut seen = Vec::new();
    std::thread::scope(|scope| {
        let slow = scope.spawn(|| append_texts(&store, "ns", "a", &["slow"]));
        held.recv_timeout(Duration::from_secs(30))
            .expect("the slow batch reached the engine");
        let quick = scope.spawn(|| append_texts(&store, "ns", &fast, &["fast"]));
        let reader = scope.spawn(|| {
            let page = store.read_outbox("search", 10).unwrap();
            store.advance_outbox("search", page.through).unwrap();
            page.entries
        });
        std::thread::sleep(Duration::from_millis(200));
        release.send(()).unwrap();
        slow.join().unwrap();
        quick.join().unwrap();
        seen.extend(reader.join().unwrap().into_iter().map(|(_, c)| c));
    });
    seen.extend(
        store
            .read_outbox("search", 10)
            .unwrap()
            .entries
            .into_iter()
            .map(|(_, c)| c),
    );
    let turns_of = |id: &str| IndexChange::Turns {
        namespace: "ns".into(),
        session_id: id.into(),
        first_seq: 1,
        last_seq: 1,
    };
    assert!(seen.contains(&turns_of(&fast)), "{seen:?}");
    assert!(
        seen.contains(&turns_of("a")),
        "the slow writer's entry was never read: {seen:?}"
    );
    let left = store.read_outbox("search", 10).unwrap().entries.len() as u64;
    assert_eq!(store.outbox_backlog("search").unwrap(), left);
}

/// An entry is counted for the backlog in the same step that makes it
/// visible: a consumer reading while a batch is being applied waits, and
/// is never charged for an entry it already passed.
#[test]
fn outbox_backlog_counts_what_is_left_to_read() {
    let (engine, gate) = GatedEngine::new();
    let store = KvStore::new(engine);
    store.create_session(&session("ns", "a", "")).unwrap();
    assert_eq!(store.outbox_backlog("search").unwrap(), 0);
    let (held, release) = arm(&gate, Hold::AfterApply);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| append_texts(&store, "ns", "a", &["x"]));
        held.recv_timeout(Duration::from_secs(30))
            .expect("the batch was applied");
        let reader = scope.spawn(|| {
            let page = store.read_outbox("search", 10).unwrap();
            store.advance_outbox("search", page.through).unwrap();
            page.entries.len()
        });
        std::thread::sleep(Duration::from_millis(200));
        release.send(()).unwrap();
        writer.join().unwrap();
        reader.join().unwrap();
    });
    let left = store.read_outbox("search", 10).unwrap().entries.len() as u64;
    assert_eq!(store.outbox_backlog("search").unwrap(), left);
    let page = store.read_outbox("search", 10).unwrap();
    store.advance_outbox("search", page.through).unwrap();
    assert_eq!(store.outbox_backlog("search").unwrap(), 0);
}

// ---------------------------------------------------------------------------
// Fact ids made by the domain
// ---------------------------------------------------------------------------

/// A superseded version's subject index entry is marked, so reads of
/// current facts skip it unread; an unmarked entry (as an earlier release
/// wrote every entry) is still read and found superseded.
#[test]
fn superseded_versions_are_marked_in_the_subject_index() {
    let store = MemoryStore::default();
    let (old, _) = put(
        &store,
        &new_fact("plan", "On the basic plan", FactOrigin::Client),
    );
    let (new, outcome) = put(
        &store,
        &new_fact("plan", "On the premium plan", FactOrigin::Client),
    );
    assert!(matches!(outcome, PutOutcome::Superseded(_)));
    let entries = store
        .engine()
        .scan_rev(&mnemo::store::keys::subject_facts_of("ns", "u"), 10)
        .unwrap();
    let value = |id: &str| {
        entries
            .iter()
            .find(|(k, _)| k.ends_with(id.as_bytes()))
            .map(|(_, v)| v.clone())
            .expect("an index entry")
    };
    assert_eq!(value(&old.fact_id), b"s");
    assert!(value(&new.fact_id).is_empty());
    let current = |store: &MemoryStore| {
        let recent = store.recent_facts("ns", "u", 10, 100).unwrap();
        let (listed, _) = store
            .list_facts("ns", &filter(Some("u"), false), None, 10, 100)
            .unwrap();
        (
            ids(&recent)
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
            ids(&listed)
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
        )
    };
    let want = vec![new.fact_id.clone()];
    assert_eq!(current(&store), (want.clone(), want.clone()));
    // As an earlier release left it: the same answers.
    store
        .engine()
        .apply(vec![Write::Put(
            mnemo::store::keys::subject_fact("ns", "u", &old.fact_id),
            Vec::new(),
        )])
        .unwrap();
    assert_eq!(current(&store), (want.clone(), want));
    let (history, _) = store
        .list_facts("ns", &filter(Some("u"), true), None, 10, 100)
        .unwrap();
    assert_eq!(history.len(), 2);
}

#[test]
fn recent_facts_put_within_a_millisecond_are_newest_first() {
    let store = MemoryStore::default();
    let texts: Vec<String> = (0..40).map(|i| format!("Fact number {i}")).collect();
    for text in &texts {
        put(&store, &new_fact("", text, FactOrigin::Client));
    }
    let got: Vec<String> = store
        .recent_facts("ns", "u", 40, 100)
        .unwrap()
        .into_iter()
        .map(|f| f.text)
        .collect();
    let want: Vec<String> = texts.iter().rev().cloned().collect();
    assert_eq!(got, want);
}

/// On a shared database, two processes' writes: one daemon's append still
/// in its transaction while another's commits and a consumer reads and
/// advances past it — the slow one's entry is still read once it commits
/// (entries are numbered in commit order, after every id given before).
#[test]
fn postgres_outbox_entry_of_a_slow_daemon_is_not_skipped() {
    let Some(url) = pg::fresh_database() else {
        return;
    };
    let (slow_daemon, fast_daemon, consumer) = (
        PgStore::connect(&PgOptions::new(&url)).unwrap(),
        PgStore::connect(&PgOptions::new(&url)).unwrap(),
        PgStore::connect(&PgOptions::new(&url)).unwrap(),
    );
    slow_daemon.create_session(&session("ns", "a", "")).unwrap();
    slow_daemon.create_session(&session("ns", "b", "")).unwrap();
    let (held_tx, held) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let mut seen = Vec::new();
    let slow_daemon = &slow_daemon;
    std::thread::scope(|scope| {
        let slow = scope.spawn(move || {
            let p = prepared(&["slow"], None, None);
            slow_daemon
                .append_turns("ns", "a", None, &mut |s, prev| {
                    held_tx.send(()).unwrap();
                    let _ = release_rx.recv_timeout(Duration::from_secs(30));
                    append::plan(s, prev, &p)
                })
                .unwrap()
        });
        held.recv_timeout(Duration::from_secs(30)).unwrap();
        append_texts(&fast_daemon, "ns", "b", &["fast"]);
        let page = consumer.read_outbox("search", 10).unwrap();
        consumer.advance_outbox("search", page.through).unwrap();
        seen.extend(page.entries.into_iter().map(|(_, c)| c));
        release.send(()).unwrap();
        slow.join().unwrap();
    });
    seen.extend(
        consumer
            .read_outbox("search", 10)
            .unwrap()
            .entries
            .into_iter()
            .map(|(_, c)| c),
    );
    let turns_of = |id: &str| IndexChange::Turns {
        namespace: "ns".into(),
        session_id: id.into(),
        first_seq: 1,
        last_seq: 1,
    };
    assert!(seen.contains(&turns_of("b")), "{seen:?}");
    assert!(
        seen.contains(&turns_of("a")),
        "the slow daemon's entry was skipped: {seen:?}"
    );
}
