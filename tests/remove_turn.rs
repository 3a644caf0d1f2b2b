//! RemoveLastTurn through gRPC on a real socket: concurrent removals each
//! take a different turn and seqs stay gap-free; a summary that covered the
//! removed turn is refolded and never shown stale; fencing, closed
//! sessions and `expected_last_seq` refuse without writing; the index
//! forgets the turn; a watcher past it is told to watch again.

mod common;

use std::collections::BTreeSet;

use common::*;
use mnemo::pb;
use tonic::Code;

fn remove(ns: &str, id: &str) -> pb::RemoveLastTurnRequest {
    pb::RemoveLastTurnRequest {
        namespace: ns.into(),
        session_id: id.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn forty_concurrent_removals_take_forty_distinct_turns() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let turns: Vec<pb::NewTurn> = (1..=50).map(|i| user_turn(&format!("item {i}"))).collect();
    c.append_turns(append_req("ns", "s", turns)).await.unwrap();

    let mut tasks = Vec::new();
    for _ in 0..40 {
        let mut c = server.client().await;
        tasks.push(tokio::spawn(async move {
            c.remove_last_turn(remove("ns", "s"))
                .await
                .unwrap()
                .into_inner()
                .turn
                .expect("a turn")
        }));
    }
    let mut seqs = BTreeSet::new();
    for t in tasks {
        let turn = t.await.unwrap();
        assert_eq!(turn.content, format!("item {}", turn.seq));
        assert!(seqs.insert(turn.seq), "turn {} removed twice", turn.seq);
    }
    assert_eq!(seqs, (11..=50).collect::<BTreeSet<u64>>());
    let s = get_session(&mut c, "ns", "s").await.unwrap();
    assert_eq!((s.turn_count, s.next_seq), (10, 11));
    let left: Vec<u64> = all_turns(&mut c, "ns", "s")
        .await
        .iter()
        .map(|t| t.seq)
        .collect();
    assert_eq!(left, (1..=10).collect::<Vec<u64>>());
    // The next append takes seq 11: no gap.
    let r = c
        .append_turns(append_req("ns", "s", vec![user_turn("after")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.first_seq, 11);
    server.stop().await;
}

#[tokio::test]
async fn a_summary_that_covered_the_turn_is_refolded() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let turns = vec![
        turn(
            pb::Role::User,
            "ann",
            "Please book the flight to Oslo for Friday.",
        ),
        turn(
            pb::Role::Assistant,
            "agent",
            "I will book the Oslo flight by Friday.",
        ),
        turn(
            pb::Role::User,
            "ann",
            "Also cancel my hotel reservation HX-5512.",
        ),
        turn(
            pb::Role::Assistant,
            "agent",
            "I will cancel hotel reservation HX-5512 today.",
        ),
    ];
    c.append_turns(append_req("ns", "s", turns)).await.unwrap();
    let summarized = c
        .summarize(pb::SummarizeRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            wait: true,
        })
        .await
        .unwrap()
        .into_inner()
        .summary
        .expect("a summary");
    assert_eq!(summarized.covers_through_seq, 4);

    let r = c
        .remove_last_turn(remove("ns", "s"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.turn.as_ref().map(|t| t.seq), Some(4));
    assert_eq!(r.refolded_summary_version, summarized.version + 1);
    let latest = c
        .get_summary(pb::GetSummaryRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .summary
        .unwrap();
    assert_eq!(latest.version, summarized.version + 1);
    assert_eq!(latest.covers_through_seq, 3);
    let cites_4 = |s: &pb::SessionSummary| {
        s.pending_actions
            .iter()
            .any(|a| a.evidence_seqs.contains(&4))
            || s.key_facts.iter().any(|f| f.evidence_seqs.contains(&4))
            || s.decisions.iter().any(|d| d.evidence_seqs.contains(&4))
    };
    assert!(!cites_4(&latest), "{latest:?}");
    let session = r.session.unwrap();
    assert_eq!(session.summary_version, latest.version);

    // The next bundle cites nothing past turn 3.
    let b = c
        .get_context_bundle(pb::GetContextBundleRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            budget_tokens: 300,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .bundle
        .unwrap();
    assert!(!b.rendered_text.contains("#4"), "{}", b.rendered_text);
    assert!(!b.rendered_text.contains("today"), "{}", b.rendered_text);
    server.stop().await;
}

#[tokio::test]
async fn refused_removals_change_nothing() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    // An empty session: nothing to remove, not an error.
    let none = c
        .remove_last_turn(remove("ns", "s"))
        .await
        .unwrap()
        .into_inner();
    assert!(none.turn.is_none());
    c.append_turns(append_req("ns", "s", vec![user_turn("a"), user_turn("b")]))
        .await
        .unwrap();

    let moved = c
        .remove_last_turn(pb::RemoveLastTurnRequest {
            expected_last_seq: 1,
            ..remove("ns", "s")
        })
        .await
        .unwrap_err();
    assert_eq!(moved.code(), Code::Aborted, "{moved:?}");
    assert!(
        moved.message().contains("ends at seq 2"),
        "{}",
        moved.message()
    );
    let ahead = c
        .remove_last_turn(pb::RemoveLastTurnRequest {
            lease_epoch: 7,
            ..remove("ns", "s")
        })
        .await
        .unwrap_err();
    assert_eq!(ahead.code(), Code::FailedPrecondition);
    let missing = c.remove_last_turn(remove("ns", "nope")).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    let bad = c.remove_last_turn(remove("", "s")).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert_eq!(all_turns(&mut c, "ns", "s").await.len(), 2);

    // With the right seq it goes through.
    let ok = c
        .remove_last_turn(pb::RemoveLastTurnRequest {
            expected_last_seq: 2,
            lease_epoch: 1,
            ..remove("ns", "s")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.turn.map(|t| t.content), Some("b".to_owned()));

    c.close_session(pb::CloseSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
    })
    .await
    .unwrap();
    let closed = c.remove_last_turn(remove("ns", "s")).await.unwrap_err();
    assert_eq!(closed.code(), Code::FailedPrecondition);
    assert_eq!(reason(&closed), "SESSION_CLOSED");
    assert_eq!(all_turns(&mut c, "ns", "s").await.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn the_index_forgets_a_removed_turn_and_watchers_past_it_start_again() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    c.append_turns(append_req(
        "ns",
        "s",
        vec![
            user_turn("the parcel went to Rotterdam"),
            user_turn("zanzibar marmalade"),
        ],
    ))
    .await
    .unwrap();
    search_until(&mut c, "ns", "", "zanzibar marmalade", |h| !h.is_empty()).await;

    let mut watch = c
        .watch_session(pb::WatchSessionRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            from_seq: 1,
            observer: false,
        })
        .await
        .unwrap()
        .into_inner();
    for seq in 1..=2 {
        let e = watch.message().await.unwrap().unwrap();
        assert!(
            matches!(e.event, Some(pb::watch_session_response::Event::Turn(ref t)) if t.seq == seq),
            "{e:?}"
        );
    }

    c.remove_last_turn(remove("ns", "s")).await.unwrap();
    let ended = loop {
        match watch.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the watch ended without a status"),
            Err(s) => break s,
        }
    };
    assert_eq!(ended.code(), Code::Aborted, "{ended:?}");
    assert!(
        ended.message().contains("from_seq=2"),
        "{}",
        ended.message()
    );

    search_until(&mut c, "ns", "", "zanzibar marmalade", |h| {
        h.iter().all(|h| h.seq != 2)
    })
    .await;
    // The other turn is still found.
    search_until(&mut c, "ns", "", "Rotterdam", |h| {
        h.iter().any(|h| h.seq == 1)
    })
    .await;
    server.stop().await;
}
