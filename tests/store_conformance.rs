//! One conformance suite for every storage engine: the in-memory reference
//! store and the sled store (on real files) must behave the same on every
//! method of every port (`SessionStore`, `SummaryStore`, `KnowledgeStore`,
//! `Outbox`, `Claims`). Plans come from the domain's own rules
//! (`memory::append::plan`, `memory::facts::plan_put`, `memory::episodes`),
//! as in the daemon; the next engine runs this suite too.

use std::collections::BTreeMap;
use std::sync::Arc;

use mnemo::error::Precondition;
use mnemo::memory::append::{self, PreparedAppend};
use mnemo::memory::facts::{FactFilter, FactOrigin, NewFact, PutOutcome};
use mnemo::memory::knowledge;
use mnemo::model::*;
use mnemo::store::{Appended, MemoryStore, Outbox, SessionStore, SledStore, Store};
use mnemo::{Error, Result};

/// Appends as the daemon does: the domain's plan, applied by the store.
trait AppendPlanned {
    fn append_planned(&self, ns: &str, id: &str, a: &PreparedAppend) -> Result<Appended>;
}

impl<T: SessionStore + ?Sized> AppendPlanned for T {
    fn append_planned(&self, ns: &str, id: &str, a: &PreparedAppend) -> Result<Appended> {
        SessionStore::append_turns(
            self,
            ns,
            id,
            a.idempotency_key.as_deref(),
            &mut |s, prev| append::plan(s, prev, a),
        )
    }
}

/// Puts a fact as the daemon does (`facts::plan_put` under the lock).
fn put_fact(store: &dyn Store, f: &NewFact) -> Result<(Fact, PutOutcome)> {
    knowledge::put_fact(store, f)
}

fn session(ns: &str, id: &str, subject: &str) -> Session {
    let mut s = Session::new(ns, id, SessionSettings::default(), 1);
    s.subject_id = subject.into();
    s
}

fn append(texts: &[&str], key: Option<&str>, expected: Option<u64>) -> PreparedAppend {
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

fn contents(store: &dyn Store, ns: &str, id: &str) -> Vec<String> {
    store
        .list_turns(ns, id, 1, u64::MAX, 10_000)
        .unwrap()
        .into_iter()
        .map(|t| t.content)
        .collect()
}

fn sessions_create_get_and_conflict(store: &dyn Store) {
    store.create_session(&session("ns", "a", "")).unwrap();
    assert_eq!(
        store.get_session("ns", "a").unwrap(),
        session("ns", "a", "")
    );
    assert!(matches!(
        store.create_session(&session("ns", "a", "x")),
        Err(Error::AlreadyExists(_))
    ));
    assert_eq!(
        store.get_session("ns", "a").unwrap().subject_id,
        "",
        "unchanged"
    );
    assert!(matches!(
        store.get_session("ns", "b"),
        Err(Error::NotFound(_))
    ));
    assert!(
        matches!(store.get_session("other", "a"), Err(Error::NotFound(_))),
        "namespaces are separate"
    );
}

fn append_assigns_gap_free_seqs_and_counters(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    let o = store
        .append_planned("ns", "s", &append(&["ab", "cde"], None, None))
        .unwrap()
        .outcome;
    assert_eq!(
        (o.first_seq, o.last_seq, o.total_tokens, o.replayed),
        (1, 2, 5, false)
    );
    let o = store
        .append_planned("ns", "s", &append(&["f"], None, Some(3)))
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
    assert!(matches!(
        store.append_planned("ns", "nope", &append(&["x"], None, None)),
        Err(Error::NotFound(_))
    ));
}

fn conflicts_and_closed_sessions_write_nothing(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    store
        .append_planned("ns", "s", &append(&["a"], None, None))
        .unwrap();
    let e = store
        .append_planned("ns", "s", &append(&["b"], None, Some(1)))
        .unwrap_err();
    assert!(
        matches!(e, Error::Aborted(ref m) if m.contains("next_seq 2")),
        "{e:?}"
    );
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
    store
        .update_session("ns", "s", &mut |s| {
            s.state = SessionState::Closed;
            Ok(())
        })
        .unwrap();
    let e = store
        .append_planned("ns", "s", &append(&["c"], None, None))
        .unwrap_err();
    assert!(matches!(
        e,
        Error::FailedPrecondition(Precondition::SessionClosed, _)
    ));
    assert_eq!(contents(store, "ns", "s"), ["a"]);
}

fn idempotency_replays_and_detects_reuse(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    let first = store
        .append_planned("ns", "s", &append(&["a", "b"], Some("k"), None))
        .unwrap()
        .outcome;
    let again = store
        .append_planned("ns", "s", &append(&["a", "b"], Some("k"), None))
        .unwrap()
        .outcome;
    assert!(again.replayed);
    assert_eq!(
        (again.first_seq, again.last_seq),
        (first.first_seq, first.last_seq)
    );
    let e = store
        .append_planned("ns", "s", &append(&["zz"], Some("k"), None))
        .unwrap_err();
    assert!(matches!(
        e,
        Error::FailedPrecondition(Precondition::IdempotencyKeyReused, _)
    ));
    // A replay is answered even after the session closed.
    store
        .update_session("ns", "s", &mut |s| {
            s.state = SessionState::Closed;
            Ok(())
        })
        .unwrap();
    assert!(
        store
            .append_planned("ns", "s", &append(&["a", "b"], Some("k"), None))
            .unwrap()
            .outcome
            .replayed
    );
    assert_eq!(contents(store, "ns", "s"), ["a", "b"]);
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

fn delete_removes_everything_of_one_session(store: &dyn Store) {
    store.create_session(&session("ns", "s", "alice")).unwrap();
    store.create_session(&session("ns", "s2", "alice")).unwrap();
    store
        .append_planned("ns", "s", &append(&["a", "b", "c"], Some("k"), None))
        .unwrap();
    store
        .append_planned("ns", "s2", &append(&["keep"], None, None))
        .unwrap();
    assert_eq!(store.delete_session("ns", "s").unwrap(), 3);
    assert!(matches!(
        store.get_session("ns", "s"),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        store.delete_session("ns", "s"),
        Err(Error::NotFound(_))
    ));
    let alice = SessionFilter {
        subject_id: Some("alice".into()),
        state: None,
    };
    let page = store.list_sessions("ns", &alice, None, 10, 100).unwrap();
    assert_eq!(page.sessions.len(), 1);
    // Re-created: empty, and the old idempotency key is gone.
    store.create_session(&session("ns", "s", "")).unwrap();
    assert!(contents(store, "ns", "s").is_empty());
    let o = store
        .append_planned("ns", "s", &append(&["a", "b", "c"], Some("k"), None))
        .unwrap()
        .outcome;
    assert!(!o.replayed);
    assert_eq!(o.first_seq, 1);
    assert_eq!(contents(store, "ns", "s2"), ["keep"]);
}

fn concurrent_appends_are_serialized(store: Arc<dyn Store>) {
    store.create_session(&session("ns", "s", "")).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let text = format!("{w}-{i}");
                    store
                        .append_planned("ns", "s", &append(&[&text], None, None))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let turns = store.list_turns("ns", "s", 1, u64::MAX, 10_000).unwrap();
    assert_eq!(turns.len(), 400);
    assert!(turns.iter().enumerate().all(|(i, t)| t.seq == i as u64 + 1));
    assert_eq!(store.get_session("ns", "s").unwrap().next_seq, 401);
    store.flush().unwrap();
}

/// Runs every case against fresh stores from `make`.
fn new_fact(key: &str, text: &str, origin: FactOrigin) -> NewFact {
    NewFact {
        namespace: "ns".into(),
        subject_id: "u".into(),
        key: key.into(),
        text: text.into(),
        source: None,
        tags: vec![],
        origin,
    }
}

fn facts_supersede_merge_and_delete(store: &dyn Store) {
    let (a, o) = put_fact(
        store,
        &new_fact("lang", "Speaks Spanish", FactOrigin::Client),
    )
    .unwrap();
    assert_eq!(o, PutOutcome::Created);
    let (b, o) = put_fact(
        store,
        &new_fact("lang", "Speaks English", FactOrigin::Client),
    )
    .unwrap();
    assert!(matches!(o, PutOutcome::Superseded(ref old) if old.fact_id == a.fact_id));
    assert_eq!(
        store.get_fact("ns", &a.fact_id).unwrap().superseded_by,
        b.fact_id
    );
    // An extracted fact never replaces the client's.
    let (kept, o) = put_fact(
        store,
        &new_fact("lang", "Speaks French", FactOrigin::Extracted),
    )
    .unwrap();
    assert_eq!(
        (o, kept.fact_id.as_str()),
        (PutOutcome::KeptClientFact, b.fact_id.as_str())
    );
    let (_, o) = put_fact(store, &new_fact("", "Has a dog.", FactOrigin::Client)).unwrap();
    assert_eq!(o, PutOutcome::Created);
    let (_, o) = put_fact(store, &new_fact("", "has a DOG", FactOrigin::Extracted)).unwrap();
    assert_eq!(o, PutOutcome::Merged);
    let filter = |history| FactFilter {
        subject_id: Some("u".into()),
        include_history: history,
        ..FactFilter::default()
    };
    let (current, _) = store
        .list_facts("ns", &filter(false), None, 100, 1000)
        .unwrap();
    assert_eq!(current.len(), 2);
    let (all, _) = store
        .list_facts("ns", &filter(true), None, 100, 1000)
        .unwrap();
    assert_eq!(all.len(), 3);
    store.delete_fact("ns", &b.fact_id).unwrap();
    assert!(matches!(
        store.get_fact("ns", &b.fact_id),
        Err(Error::NotFound(_))
    ));
    // The key has no current fact now: the next put creates.
    let (_, o) = put_fact(
        store,
        &new_fact("lang", "Speaks German", FactOrigin::Client),
    )
    .unwrap();
    assert_eq!(o, PutOutcome::Created);
}

fn every_searchable_change_enters_the_outbox(store: &dyn Store) {
    let before = store.read_outbox("search", 10_000).unwrap().entries.len();
    store.create_session(&session("ns", "s", "u")).unwrap();
    store
        .append_planned("ns", "s", &append(&["a", "b"], None, None))
        .unwrap();
    put_fact(store, &new_fact("k", "v", FactOrigin::Client)).unwrap();
    store.delete_session("ns", "s").unwrap();
    let page = store.read_outbox("search", 10_000).unwrap();
    let kinds: Vec<&str> = page.entries[before..]
        .iter()
        .map(|(_, c)| match c {
            IndexChange::Turns { .. } => "turns",
            IndexChange::Fact { .. } => "fact",
            IndexChange::SessionDeleted { .. } => "deleted",
            IndexChange::Episode { .. } => "episode",
        })
        .collect();
    assert_eq!(kinds, ["turns", "fact", "deleted"]);
    let ids: Vec<u64> = page.entries.iter().map(|(id, _)| *id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    assert_eq!(page.through, *ids.last().unwrap());
    assert_eq!(
        store.outbox_backlog("search").unwrap(),
        page.entries.len() as u64
    );
    store.advance_outbox("search", page.through).unwrap();
    let after = store.read_outbox("search", 10).unwrap();
    assert!(after.entries.is_empty());
    assert_eq!(after.through, 0);
    assert_eq!(store.outbox_backlog("search").unwrap(), 0);
}

fn turns_by_range_point_and_scan(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    store.create_session(&session("ns", "t", "")).unwrap();
    store
        .append_planned("ns", "s", &append(&["a", "b", "c", "d"], None, None))
        .unwrap();
    // read_turns does not read the session: a missing one has no turns.
    let r = store.read_turns("ns", "s", 2, 3, 10).unwrap();
    assert_eq!(r.iter().map(|t| t.seq).collect::<Vec<_>>(), [2, 3]);
    assert!(store.read_turns("ns", "nope", 1, 9, 10).unwrap().is_empty());
    assert!(store.read_turns("ns", "s", 3, 2, 10).unwrap().is_empty());
    let p = store.get_turns("ns", "s", &[4, 9, 1]).unwrap();
    assert_eq!(p.iter().map(|t| t.seq).collect::<Vec<_>>(), [4, 1]);
    // A plan that breaks the seq order is refused and writes nothing.
    let bad = store.append_turns("ns", "s", None, &mut |s, prev| {
        let mut plan = append::plan(s, prev, &append(&["x"], None, None))?;
        if let mnemo::store::AppendPlan::Write { turns, .. } = &mut plan {
            turns[0].seq += 5;
        }
        Ok(plan)
    });
    assert!(matches!(bad, Err(Error::Internal(_))), "{bad:?}");
    assert_eq!(contents(store, "ns", "s"), ["a", "b", "c", "d"]);
    // A decide error writes nothing either.
    let refused = store.append_turns("ns", "s", None, &mut |_, _| Err(Error::invalid("no")));
    assert!(matches!(refused, Err(Error::InvalidArgument(_))));
    assert_eq!(store.get_session("ns", "s").unwrap().next_seq, 5);
    // The store-wide scan pages in (namespace, id) order and resumes.
    let first = store.scan_sessions(None, 1).unwrap();
    assert_eq!(first.sessions.len(), 1);
    let (ns, id) = first.resume_after.clone().unwrap();
    let rest = store.scan_sessions(Some((&ns, &id)), 10).unwrap();
    let ids: Vec<&str> = first
        .sessions
        .iter()
        .chain(&rest.sessions)
        .map(|s| s.session_id.as_str())
        .collect();
    assert_eq!(ids, ["s", "t"]);
    assert!(rest.unreadable.is_empty());
    let (ns, id) = rest.resume_after.unwrap();
    let end = store.scan_sessions(Some((&ns, &id)), 10).unwrap();
    assert!(end.sessions.is_empty() && end.resume_after.is_none());
}

fn ctx(version: u64) -> mnemo::summarize::SummaryContext {
    mnemo::summarize::SummaryContext {
        context_limit_tokens: 8000,
        bundle_tokens: 0,
        trigger: Trigger::Requested,
        version,
        now: 1_733_000_000_000_000_000,
        high_risk: false,
    }
}

fn audit_record(version: u64) -> AuditRecord {
    AuditRecord {
        audit_seq: 0,
        kind: AuditKind::SummaryAttempt,
        created_at: 1,
        summary_version: version,
        trigger: Some(Trigger::Requested),
        covers_through_seq: 0,
        pre_summary_tokens: 0,
        post_summary_tokens: 0,
        compression_ratio: 0.0,
        summarizer: "test".into(),
        covered_turns_sha256: String::new(),
        validation_passed: version > 0,
        validation_errors: vec![],
        decisions: 0,
        pending_actions: 0,
        open_questions: 0,
        health_flags: vec![],
        review_id: String::new(),
        review_status: None,
        reviewer: String::new(),
        comment: String::new(),
    }
}

const ACTION_TURNS: [&str; 2] = [
    "I need the invoice for order ORD-77 resent.",
    "I will send the invoice for ORD-77 to ana@example.com by Friday.",
];

/// Stores summary `version` of a session from its turns, with a review
/// item when `review` is set.
fn store_summary(
    store: &dyn Store,
    id: &str,
    version: u64,
    review: Option<&str>,
) -> SessionSummary {
    let turns = store.list_turns("ns", id, 1, u64::MAX, 1000).unwrap();
    let mut summary = mnemo::summarize::summarize(&turns, &ctx(version));
    summary.version = version;
    let last = turns.last().map_or(0, |t| t.seq);
    let write = mnemo::store::SummaryWrite {
        base_version: version - 1,
        summary: Some(summary.clone()),
        fold: Some(FoldRecord {
            summarizer: "test".into(),
            format: 1,
            state: vec![version as u8],
            through_seq: last,
            through_tokens: 10 * version,
            chain_hash: [version as u8; 32],
        }),
        audit: audit_record(version),
        review: review.map(|rid| ReviewItem {
            review_id: rid.into(),
            namespace: "ns".into(),
            session_id: id.into(),
            summary_version: version,
            items: vec!["action: refund".into()],
            status: ReviewStatus::Pending,
            reviewer: String::new(),
            comment: String::new(),
            created_at: 1,
            resolved_at: 0,
        }),
        attempted_through_seq: last,
    };
    store.save_summary("ns", id, write).unwrap();
    summary
}

fn summaries_fold_audit_and_review(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    assert!(store.fold_record("ns", "s").unwrap().is_none());
    assert!(store.summary_at("ns", "s", 1).unwrap().is_none());
    assert!(matches!(
        store.get_summary("ns", "s", 0),
        Err(Error::NotFound(_))
    ));
    store
        .append_planned("ns", "s", &append(&ACTION_TURNS, None, None))
        .unwrap();
    let v1 = store_summary(store, "s", 1, Some("01REVIEWA"));
    store
        .append_planned("ns", "s", &append(&["And a receipt too?"], None, None))
        .unwrap();
    let v2 = store_summary(store, "s", 2, None);
    let s = store.get_session("ns", "s").unwrap();
    assert_eq!(
        (
            s.summary.version,
            s.summary.through_seq,
            s.summary.audit_seq
        ),
        (2, 3, 2)
    );
    assert_eq!(store.get_summary("ns", "s", 0).unwrap(), v2);
    assert_eq!(store.get_summary("ns", "s", 1).unwrap(), v1);
    assert_eq!(store.summary_at("ns", "s", 2).unwrap().unwrap(), v2);
    assert_eq!(store.summary_at("ns", "s", 1).unwrap().unwrap(), v1);
    assert!(store.summary_at("ns", "s", 3).unwrap().is_none());
    assert!(matches!(
        store.get_summary("ns", "s", 3),
        Err(Error::NotFound(_))
    ));
    let fold = store.fold_record("ns", "s").unwrap().unwrap();
    assert_eq!((fold.state.as_slice(), fold.through_seq), (&[2u8][..], 3));
    let versions = |at_most, limit| -> Vec<u64> {
        store
            .list_summaries("ns", "s", at_most, limit)
            .unwrap()
            .iter()
            .map(|s| s.version)
            .collect()
    };
    assert_eq!(versions(u64::MAX, 10), [2, 1]);
    assert_eq!(versions(1, 10), [1]);
    assert_eq!(versions(u64::MAX, 1), [2]);
    // A write from a stale base version is refused and changes nothing.
    let stale = mnemo::store::SummaryWrite {
        base_version: 1,
        summary: Some(v1.clone()),
        fold: None,
        audit: audit_record(2),
        review: None,
        attempted_through_seq: 3,
    };
    assert!(matches!(
        store.save_summary("ns", "s", stale),
        Err(Error::Aborted(_))
    ));
    assert_eq!(store.get_session("ns", "s").unwrap(), s);
    // A refused attempt stores its audit record and progress only.
    store
        .append_planned("ns", "s", &append(&["ok"], None, None))
        .unwrap();
    let refused = mnemo::store::SummaryWrite {
        base_version: 2,
        summary: None,
        fold: None,
        audit: audit_record(0),
        review: None,
        attempted_through_seq: 4,
    };
    let after = store.save_summary("ns", "s", refused).unwrap();
    assert_eq!(
        (
            after.summary.version,
            after.summary.attempted_through_seq,
            after.summary.audit_seq
        ),
        (2, 4, 3)
    );
    assert_eq!(store.fold_record("ns", "s").unwrap().unwrap(), fold);
    let audit = store.list_audit("ns", "s", 0, 10).unwrap();
    assert_eq!(
        audit.iter().map(|a| a.audit_seq).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(!audit[2].validation_passed);
    assert_eq!(store.list_audit("ns", "s", 1, 1).unwrap()[0].audit_seq, 2);
    assert!(matches!(
        store.list_audit("ns", "nope", 0, 10),
        Err(Error::NotFound(_))
    ));
    // Review items: pending ones, then resolved.
    let (pending, resume) = store.list_review_items("ns", None, false, 10, 100).unwrap();
    assert_eq!(pending.len(), 1);
    assert!(resume.is_none());
    let mut resolution = audit_record(0);
    resolution.kind = AuditKind::ReviewResolved;
    resolution.reviewer = "rita".into();
    // A decide error leaves the item and the log as they were.
    let no = store.resolve_review_item("ns", "01REVIEWA", resolution.clone(), &mut |_| {
        Err(Error::FailedPrecondition(
            Precondition::AlreadyResolved,
            "no".into(),
        ))
    });
    assert!(matches!(no, Err(Error::FailedPrecondition(..))));
    assert_eq!(store.list_audit("ns", "s", 0, 10).unwrap().len(), 3);
    let item = store
        .resolve_review_item("ns", "01REVIEWA", resolution.clone(), &mut |i| {
            let mut i = i.clone();
            i.status = ReviewStatus::Approved;
            i.reviewer = "rita".into();
            Ok(i)
        })
        .unwrap();
    assert_eq!(item.status, ReviewStatus::Approved);
    let log = store.list_audit("ns", "s", 0, 10).unwrap();
    assert_eq!(
        (log.len(), log[3].audit_seq, log[3].reviewer.as_str()),
        (4, 4, "rita")
    );
    assert!(store
        .list_review_items("ns", None, false, 10, 100)
        .unwrap()
        .0
        .is_empty());
    let (all, _) = store.list_review_items("ns", None, true, 10, 100).unwrap();
    assert_eq!(all, [item]);
    assert!(matches!(
        store.resolve_review_item("ns", "nope", resolution, &mut |i| Ok(i.clone())),
        Err(Error::NotFound(_))
    ));
}

fn recent_and_revised_facts(store: &dyn Store) {
    let mut ids = Vec::new();
    for (k, text) in [
        ("a", "Likes tea"),
        ("b", "Likes jazz"),
        ("a", "Likes coffee"),
    ] {
        let mut f = new_fact(k, text, FactOrigin::Extracted);
        f.source = Some(FactSource {
            session_id: if k == "b" {
                "keep".into()
            } else {
                "gone".into()
            },
            seq: 1,
        });
        ids.push(put_fact(store, &f).unwrap().0.fact_id);
        // ULIDs made in one millisecond are not ordered by time.
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    put_fact(store, &new_fact("", "Has a cat", FactOrigin::Client)).unwrap();
    let texts = |v: Vec<Fact>| v.into_iter().map(|f| f.text).collect::<Vec<_>>();
    // Newest current first; the superseded "Likes tea" is skipped.
    assert_eq!(
        texts(store.recent_facts("ns", "u", 10, 100).unwrap()),
        ["Has a cat", "Likes coffee", "Likes jazz"]
    );
    assert_eq!(
        texts(store.recent_facts("ns", "u", 1, 100).unwrap()),
        ["Has a cat"]
    );
    assert!(store
        .recent_facts("ns", "nobody", 10, 100)
        .unwrap()
        .is_empty());
    let backlog = store.outbox_backlog("search").unwrap();
    store
        .revise_facts("ns", "u", &mut |f| match f.text.as_str() {
            "Likes coffee" => mnemo::store::FactFate::Delete,
            "Likes jazz" => {
                let mut f = f.clone();
                f.tags.push("music".into());
                mnemo::store::FactFate::Rewrite(Box::new(f))
            }
            _ => mnemo::store::FactFate::Keep,
        })
        .unwrap();
    assert!(matches!(
        store.get_fact("ns", &ids[2]),
        Err(Error::NotFound(_))
    ));
    assert_eq!(store.get_fact("ns", &ids[1]).unwrap().tags, ["music"]);
    assert_eq!(store.outbox_backlog("search").unwrap(), backlog + 2);
    // The deleted fact's key pointer went with it: a new put creates.
    let (_, o) = put_fact(store, &new_fact("a", "Likes cocoa", FactOrigin::Client)).unwrap();
    assert_eq!(o, PutOutcome::Created);
    // scan_facts pages over every version of every namespace.
    let (first, resume) = store.scan_facts(None, 2).unwrap();
    assert_eq!(first.len(), 2);
    let (rest, end) = store.scan_facts(resume.as_deref(), 100).unwrap();
    // tea (superseded), jazz, cat, cocoa; coffee was deleted.
    assert_eq!(first.len() + rest.len(), 4);
    assert!(end.is_none());
}

fn episodes_carried_actions_and_statuses(store: &dyn Store) {
    store.create_session(&session("ns", "s", "alice")).unwrap();
    store
        .append_planned("ns", "s", &append(&ACTION_TURNS, None, None))
        .unwrap();
    let summary = store_summary(store, "s", 1, None);
    let action_seq = summary.pending_actions[0].action_seq();
    let now = 1_800_000_000_000_000_000;
    let mut plan = |s: &Session, sum: Option<&SessionSummary>, o: &BTreeMap<u64, ActionStatus>| {
        Ok(mnemo::memory::episodes::plan_episode(s, sum, o, now))
    };
    // Active: no episode is due; nothing is written.
    assert!(store.save_episode("ns", "s", &mut plan).unwrap().is_none());
    assert!(store.get_episode("ns", "s").unwrap().is_none());
    store
        .update_session("ns", "s", &mut |s| {
            s.state = SessionState::Closed;
            Ok(())
        })
        .unwrap();
    let e = store.save_episode("ns", "s", &mut plan).unwrap().unwrap();
    assert_eq!((e.session_id.as_str(), e.summary_version), ("s", 1));
    assert_eq!(store.get_session("ns", "s").unwrap().episode_version, 1);
    assert_eq!(store.get_episode("ns", "s").unwrap().unwrap(), e);
    // Up to date now: a second save writes nothing.
    assert!(store.save_episode("ns", "s", &mut plan).unwrap().is_none());
    let carried = store.carried_actions("ns", "alice", 10).unwrap();
    assert_eq!(carried.len(), summary.pending_actions.len());
    assert_eq!(carried[0].action_ref.action_seq, action_seq);
    // A second episode of the subject, newer: listed first.
    store.create_session(&session("ns", "t", "alice")).unwrap();
    store
        .append_planned("ns", "t", &append(&ACTION_TURNS, None, None))
        .unwrap();
    store_summary(store, "t", 1, None);
    store
        .update_session("ns", "t", &mut |s| {
            s.state = SessionState::Idle;
            Ok(())
        })
        .unwrap();
    let mut later = |s: &Session, sum: Option<&SessionSummary>, o: &BTreeMap<u64, ActionStatus>| {
        Ok(mnemo::memory::episodes::plan_episode(s, sum, o, now + 1))
    };
    store.save_episode("ns", "t", &mut later).unwrap().unwrap();
    let list = store.list_episodes("ns", "alice", None, 10).unwrap();
    assert_eq!(
        list.iter()
            .map(|e| e.session_id.as_str())
            .collect::<Vec<_>>(),
        ["t", "s"]
    );
    let first = &list[0];
    let rest = store
        .list_episodes("ns", "alice", Some((first.ended_at, "t")), 10)
        .unwrap();
    assert_eq!(rest.len(), 1);
    let (eps, resume) = store.scan_episodes(None, 1).unwrap();
    assert_eq!(eps.len(), 1);
    assert_eq!(
        store.scan_episodes(resume.as_deref(), 10).unwrap().0.len(),
        1
    );
    // Setting an action DONE: status stored, episode rewritten, carried
    // copy gone.
    let r = ActionRef {
        session_id: "s".into(),
        action_seq,
    };
    let done = store
        .set_action_status("ns", &r, ActionStatus::Done, &mut |s, sum, ep| {
            mnemo::memory::episodes::plan_action_status(s, sum, ep, action_seq, ActionStatus::Done)
        })
        .unwrap();
    assert_eq!(done.status, ActionStatus::Done);
    assert_eq!(
        store.action_statuses("ns", "s").unwrap().get(&action_seq),
        Some(&ActionStatus::Done)
    );
    assert!(store
        .carried_actions("ns", "alice", 10)
        .unwrap()
        .iter()
        .all(|c| c.action_ref != r));
    assert!(store
        .get_episode("ns", "s")
        .unwrap()
        .unwrap()
        .pending_actions
        .iter()
        .all(|a| a.action_seq() != action_seq));
    // An unknown action: NotFound, nothing written.
    let unknown = ActionRef {
        session_id: "s".into(),
        action_seq: 999,
    };
    assert!(matches!(
        store.set_action_status("ns", &unknown, ActionStatus::Done, &mut |s, sum, ep| {
            mnemo::memory::episodes::plan_action_status(s, sum, ep, 999, ActionStatus::Done)
        }),
        Err(Error::NotFound(_))
    ));
    assert_eq!(store.action_statuses("ns", "s").unwrap().len(), 1);
    // Deleting a session takes its episode and carried actions along.
    store.delete_session("ns", "t").unwrap();
    assert!(store.get_episode("ns", "t").unwrap().is_none());
    assert!(store.carried_actions("ns", "alice", 10).unwrap().is_empty());
}

fn outbox_consumers_keep_their_own_cursors(store: &dyn Store) {
    // Both consumers exist before the writes (a consumer starts before
    // every stored entry).
    assert_eq!(store.outbox_backlog("a").unwrap(), 0);
    assert_eq!(store.outbox_backlog("b").unwrap(), 0);
    store.create_session(&session("ns", "s", "")).unwrap();
    for i in 0..3 {
        store
            .append_planned("ns", "s", &append(&[&format!("t{i}")], None, None))
            .unwrap();
    }
    let a = store.read_outbox("a", 2).unwrap();
    assert_eq!(a.entries.len(), 2);
    store.advance_outbox("a", a.through).unwrap();
    assert_eq!(store.outbox_backlog("a").unwrap(), 1);
    assert_eq!(store.outbox_backlog("b").unwrap(), 3);
    // b has read nothing: every entry is still there for it.
    let b = store.read_outbox("b", 10).unwrap();
    assert_eq!(b.entries.len(), 3);
    assert_eq!(b.entries[..2], a.entries[..]);
    // A cursor never moves back.
    store.advance_outbox("a", 1).unwrap();
    assert_eq!(store.read_outbox("a", 10).unwrap().entries.len(), 1);
    store.advance_outbox("b", b.through).unwrap();
    assert_eq!(store.outbox_backlog("b").unwrap(), 0);
    let rest = store.read_outbox("a", 10).unwrap();
    assert_eq!(rest.entries, b.entries[2..]);
    store.advance_outbox("a", rest.through).unwrap();
    assert!(store.read_outbox("a", 10).unwrap().entries.is_empty());
}

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

fn writes_are_counted_by_group_commit(store: &dyn Store) {
    let stats = store.sync_stats();
    let before = stats.requests.load(std::sync::atomic::Ordering::Relaxed);
    store.create_session(&session("ns", "s", "")).unwrap();
    store
        .append_planned("ns", "s", &append(&["a"], None, None))
        .unwrap();
    store.flush().unwrap();
    let after = stats.requests.load(std::sync::atomic::Ordering::Relaxed);
    assert!(after >= before + 3, "{before} -> {after}");
}

fn suite(make: impl Fn() -> Arc<dyn Store>) {
    let cases: [fn(&dyn Store); 15] = [
        turns_by_range_point_and_scan,
        summaries_fold_audit_and_review,
        recent_and_revised_facts,
        episodes_carried_actions_and_statuses,
        outbox_consumers_keep_their_own_cursors,
        claims_lease_fence_and_take_over,
        writes_are_counted_by_group_commit,
        facts_supersede_merge_and_delete,
        every_searchable_change_enters_the_outbox,
        sessions_create_get_and_conflict,
        append_assigns_gap_free_seqs_and_counters,
        conflicts_and_closed_sessions_write_nothing,
        idempotency_replays_and_detects_reuse,
        list_sessions_filters_and_resumes,
        delete_removes_everything_of_one_session,
    ];
    for case in cases {
        let store = make();
        case(store.as_ref());
        store.flush().unwrap();
    }
    concurrent_appends_are_serialized(make());
}

#[test]
fn memory_store_conforms() {
    suite(|| Arc::new(MemoryStore::default()));
}

#[test]
fn sled_store_conforms() {
    let dirs = std::sync::Mutex::new(Vec::new());
    suite(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(&dir.path().join("data")).unwrap();
        dirs.lock().unwrap().push(dir);
        Arc::new(store)
    });
}

#[test]
fn sled_store_keeps_outbox_cursors_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let through = {
        let store = SledStore::open(&path).unwrap();
        store.create_session(&session("ns", "s", "")).unwrap();
        store
            .append_planned("ns", "s", &append(&["a"], None, None))
            .unwrap();
        store
            .append_planned("ns", "s", &append(&["b"], None, None))
            .unwrap();
        let first = store.read_outbox("search", 1).unwrap();
        store.advance_outbox("search", first.through).unwrap();
        first.through
    };
    let store = SledStore::open(&path).unwrap();
    let next = store.read_outbox("search", 10).unwrap();
    assert_eq!(next.entries.len(), 1);
    assert!(next.entries[0].0 > through);
    assert_eq!(store.outbox_backlog("search").unwrap(), 1);
    // New ids stay above everything stored or passed.
    store
        .append_planned("ns", "s", &append(&["c"], None, None))
        .unwrap();
    let all = store.read_outbox("search", 10).unwrap();
    assert!(all.entries[1].0 > all.entries[0].0);
}

#[test]
fn sled_store_keeps_everything_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    {
        let store = SledStore::open(&path).unwrap();
        store.create_session(&session("ns", "s", "alice")).unwrap();
        store
            .append_planned("ns", "s", &append(&["a", "b"], Some("k"), None))
            .unwrap();
        store.flush().unwrap();
    }
    let store = SledStore::open(&path).unwrap();
    assert_eq!(contents(&store, "ns", "s"), ["a", "b"]);
    assert!(
        store
            .append_planned("ns", "s", &append(&["a", "b"], Some("k"), None))
            .unwrap()
            .outcome
            .replayed
    );
}

/// A crash in the middle of a delete can leave a session's turns behind;
/// re-creating the id must not resurrect them.
fn recreated_session_ignores_leftovers<E: mnemo::store::engine::Engine>(
    store: mnemo::store::KvStore<E>,
) {
    use mnemo::store::engine::Write;
    store.create_session(&session("ns", "s", "")).unwrap();
    store
        .append_planned("ns", "s", &append(&["old"], Some("k"), None))
        .unwrap();
    // Simulate the interrupted delete: only the session record goes.
    store
        .engine()
        .apply(vec![Write::Delete(mnemo::store::keys::session("ns", "s"))])
        .unwrap();
    store.create_session(&session("ns", "s", "")).unwrap();
    assert!(contents(&store, "ns", "s").is_empty());
    let o = store
        .append_planned("ns", "s", &append(&["old"], Some("k"), None))
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
