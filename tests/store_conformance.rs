//! One conformance suite for every `Store` implementation: the in-memory
//! reference store and the sled store (on real files) must behave the same.

use std::collections::BTreeMap;
use std::sync::Arc;

use mnemo::error::Precondition;
use mnemo::memory::facts::{FactFilter, FactOrigin, NewFact, PutOutcome};
use mnemo::model::*;
use mnemo::store::{IndexChange, MemoryStore, SledStore, Store};
use mnemo::Error;

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
        .append_turns("ns", "s", &append(&["ab", "cde"], None, None))
        .unwrap()
        .outcome;
    assert_eq!(
        (o.first_seq, o.last_seq, o.total_tokens, o.replayed),
        (1, 2, 5, false)
    );
    let o = store
        .append_turns("ns", "s", &append(&["f"], None, Some(3)))
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
        store.append_turns("ns", "nope", &append(&["x"], None, None)),
        Err(Error::NotFound(_))
    ));
}

fn conflicts_and_closed_sessions_write_nothing(store: &dyn Store) {
    store.create_session(&session("ns", "s", "")).unwrap();
    store
        .append_turns("ns", "s", &append(&["a"], None, None))
        .unwrap();
    let e = store
        .append_turns("ns", "s", &append(&["b"], None, Some(1)))
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
        .append_turns("ns", "s", &append(&["c"], None, None))
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
        .append_turns("ns", "s", &append(&["a", "b"], Some("k"), None))
        .unwrap()
        .outcome;
    let again = store
        .append_turns("ns", "s", &append(&["a", "b"], Some("k"), None))
        .unwrap()
        .outcome;
    assert!(again.replayed);
    assert_eq!(
        (again.first_seq, again.last_seq),
        (first.first_seq, first.last_seq)
    );
    let e = store
        .append_turns("ns", "s", &append(&["zz"], Some("k"), None))
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
            .append_turns("ns", "s", &append(&["a", "b"], Some("k"), None))
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
        .append_turns("ns", "s", &append(&["a", "b", "c"], Some("k"), None))
        .unwrap();
    store
        .append_turns("ns", "s2", &append(&["keep"], None, None))
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
        .append_turns("ns", "s", &append(&["a", "b", "c"], Some("k"), None))
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
                        .append_turns("ns", "s", &append(&[&text], None, None))
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
    store.sync().unwrap();
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
    let (a, o) = store
        .put_fact(&new_fact("lang", "Speaks Spanish", FactOrigin::Client))
        .unwrap();
    assert_eq!(o, PutOutcome::Created);
    let (b, o) = store
        .put_fact(&new_fact("lang", "Speaks English", FactOrigin::Client))
        .unwrap();
    assert!(matches!(o, PutOutcome::Superseded(ref old) if old.fact_id == a.fact_id));
    assert_eq!(
        store.get_fact("ns", &a.fact_id).unwrap().superseded_by,
        b.fact_id
    );
    // An extracted fact never replaces the client's.
    let (kept, o) = store
        .put_fact(&new_fact("lang", "Speaks French", FactOrigin::Extracted))
        .unwrap();
    assert_eq!(
        (o, kept.fact_id.as_str()),
        (PutOutcome::KeptClientFact, b.fact_id.as_str())
    );
    let (_, o) = store
        .put_fact(&new_fact("", "Has a dog.", FactOrigin::Client))
        .unwrap();
    assert_eq!(o, PutOutcome::Created);
    let (_, o) = store
        .put_fact(&new_fact("", "has a DOG", FactOrigin::Extracted))
        .unwrap();
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
    let (_, o) = store
        .put_fact(&new_fact("lang", "Speaks German", FactOrigin::Client))
        .unwrap();
    assert_eq!(o, PutOutcome::Created);
}

fn every_searchable_change_enters_the_outbox(store: &dyn Store) {
    let before = store.index_changes(10_000).unwrap().len();
    store.create_session(&session("ns", "s", "u")).unwrap();
    store
        .append_turns("ns", "s", &append(&["a", "b"], None, None))
        .unwrap();
    store
        .put_fact(&new_fact("k", "v", FactOrigin::Client))
        .unwrap();
    store.delete_session("ns", "s").unwrap();
    let changes = store.index_changes(10_000).unwrap();
    let kinds: Vec<&str> = changes[before..]
        .iter()
        .map(|(_, c)| match c {
            IndexChange::Turns { .. } => "turns",
            IndexChange::Fact { .. } => "fact",
            IndexChange::SessionDeleted { .. } => "deleted",
            IndexChange::Episode { .. } => "episode",
        })
        .collect();
    assert_eq!(kinds, ["turns", "fact", "deleted"]);
    assert_eq!(store.index_backlog(), changes.len() as u64);
    let ids: Vec<u64> = changes.iter().map(|(id, _)| *id).collect();
    store.ack_index_changes(&ids).unwrap();
    assert!(store.index_changes(10).unwrap().is_empty());
    assert_eq!(store.index_backlog(), 0);
}

fn suite(make: impl Fn() -> Arc<dyn Store>) {
    let cases: [fn(&dyn Store); 8] = [
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
        store.sync().unwrap();
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
fn sled_store_keeps_everything_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    {
        let store = SledStore::open(&path).unwrap();
        store.create_session(&session("ns", "s", "alice")).unwrap();
        store
            .append_turns("ns", "s", &append(&["a", "b"], Some("k"), None))
            .unwrap();
        store.sync().unwrap();
    }
    let store = SledStore::open(&path).unwrap();
    assert_eq!(contents(&store, "ns", "s"), ["a", "b"]);
    assert!(
        store
            .append_turns("ns", "s", &append(&["a", "b"], Some("k"), None))
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
        .append_turns("ns", "s", &append(&["old"], Some("k"), None))
        .unwrap();
    // Simulate the interrupted delete: only the session record goes.
    store
        .engine()
        .apply(vec![Write::Delete(mnemo::store::keys::session("ns", "s"))])
        .unwrap();
    store.create_session(&session("ns", "s", "")).unwrap();
    assert!(contents(&store, "ns", "s").is_empty());
    let o = store
        .append_turns("ns", "s", &append(&["old"], Some("k"), None))
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
