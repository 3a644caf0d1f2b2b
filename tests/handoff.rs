//! Multi-agent work over gRPC: handoff with lease fencing (stale writers,
//! concurrent handoffs, chains), idle timeouts driven by stored time (also
//! across a restart), WatchSession (replay, live order, several watchers,
//! lag, limits, deletion), and the whole support-case story end to end.

mod common;

use std::time::Duration;

use common::*;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use tonic::transport::Channel;
use tonic::Code;

type Client = MemoryServiceClient<Channel>;

async fn create_owned(c: &mut Client, id: &str, owner: &str, idle_secs: u32) -> pb::Session {
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        subject_id: "customer:jane".into(),
        owner_agent: owner.into(),
        settings: Some(pb::SessionSettings {
            idle_timeout_seconds: idle_secs,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .session
    .unwrap()
}

async fn append_as(
    c: &mut Client,
    id: &str,
    epoch: u64,
    t: pb::NewTurn,
) -> Result<pb::AppendTurnsResponse, tonic::Status> {
    c.append_turns(pb::AppendTurnsRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        turns: vec![t],
        lease_epoch: epoch,
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner())
}

fn handoff_req(id: &str, from: &str, to: &str, epoch: u64) -> pb::HandoffRequest {
    pb::HandoffRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        from_agent: from.into(),
        to_agent: to.into(),
        reason: "shift change".into(),
        lease_epoch: epoch,
        budget_tokens: 4000,
        idempotency_key: String::new(),
    }
}

async fn handoff(
    c: &mut Client,
    id: &str,
    from: &str,
    to: &str,
    epoch: u64,
) -> Result<pb::HandoffResponse, tonic::Status> {
    c.handoff(handoff_req(id, from, to, epoch))
        .await
        .map(|r| r.into_inner())
}

/// Waits (bounded) until the session reaches `state`.
async fn wait_state(c: &mut Client, id: &str, state: pb::SessionState) -> pb::Session {
    for _ in 0..600 {
        let s = get_session(c, "ns", id).await.unwrap();
        if s.state == state as i32 {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("session {id} never reached {state:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_moves_ownership_and_fences_the_old_owner() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let s = create_owned(&mut c, "h", "agent-a", 0).await;
    assert_eq!((s.owner_agent.as_str(), s.lease_epoch), ("agent-a", 1));
    append_as(
        &mut c,
        "h",
        1,
        turn(
            pb::Role::User,
            "customer",
            "Hello, I need help with ORD-77.",
        ),
    )
    .await
    .unwrap();

    let h = handoff(&mut c, "h", "agent-a", "agent-b", 1).await.unwrap();
    assert_eq!(h.lease_epoch, 2);
    let session = h.session.unwrap();
    assert_eq!(
        (session.owner_agent.as_str(), session.lease_epoch),
        ("agent-b", 2)
    );
    assert_eq!(h.event_seq, 2);
    let summary = h.summary.expect("handoff summary");
    assert_eq!(summary.trigger, pb::SummaryTrigger::Handoff as i32);
    assert_eq!(summary.covers_through_seq, 2, "covers every turn");
    let bundle = h.bundle.unwrap();
    assert_eq!(bundle.owner_agent, "agent-b");
    assert!(bundle.rendered_text.contains("Prepared for agent agent-b."));
    let event = all_turns(&mut c, "ns", "h").await.pop().unwrap();
    assert_eq!(event.role, pb::Role::System as i32);
    assert!(event.content.contains("agent-a") && event.content.contains("agent-b"));
    assert!(event.content.contains("shift change"));

    // The old owner is fenced, and told who owns the session now.
    let err = append_as(
        &mut c,
        "h",
        1,
        turn(pb::Role::Assistant, "agent-a", "late reply"),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason(&err), "STALE_LEASE_EPOCH");
    assert!(err.message().contains("agent-b"), "{}", err.message());
    // A stale handoff is rejected the same way.
    let err = handoff(&mut c, "h", "agent-a", "agent-c", 1)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason(&err), "STALE_LEASE_EPOCH");
    // An epoch from the future too.
    let err = append_as(&mut c, "h", 9, turn(pb::Role::Assistant, "x", "y"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason(&err), "LEASE_EPOCH_AHEAD");
    // Only the owner hands off.
    let err = handoff(&mut c, "h", "agent-a", "agent-c", 2)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason(&err), "NOT_OWNER");
    assert!(err.message().contains("agent-b"));
    // The new owner writes with its epoch; unfenced appends stay allowed.
    append_as(
        &mut c,
        "h",
        2,
        turn(pb::Role::Assistant, "agent-b", "Hi, I am taking over."),
    )
    .await
    .unwrap();
    append_as(&mut c, "h", 0, turn(pb::Role::User, "customer", "Thanks."))
        .await
        .unwrap();
    let turns = all_turns(&mut c, "ns", "h").await;
    assert_eq!(turns.len(), 4);
    assert!(!turns.iter().any(|t| t.content == "late reply"));

    // Bad requests.
    for (from, to, epoch) in [
        ("", "b", 2),
        ("agent-b", "", 2),
        ("agent-b", "agent-b", 2),
        ("agent-b", "c", 0),
    ] {
        let err = handoff(&mut c, "h", from, to, epoch).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{from} {to} {epoch}");
    }
    let err = handoff(&mut c, "missing", "a", "b", 1).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    // Client turns cannot pose as server events.
    let mut forged = turn(pb::Role::System, "x", "Handoff from a to b");
    forged
        .metadata
        .insert("mnemo.event".into(), "handoff".into());
    let err = append_as(&mut c, "h", 0, forged).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    // A closed session cannot be handed off.
    c.close_session(pb::CloseSessionRequest {
        namespace: "ns".into(),
        session_id: "h".into(),
    })
    .await
    .unwrap();
    let err = handoff(&mut c, "h", "agent-b", "agent-c", 2)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_handoffs_exactly_one_wins() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_owned(&mut c, "race", "agent-a", 0).await;
    append_as(
        &mut c,
        "race",
        1,
        turn(pb::Role::User, "customer", "Help me please."),
    )
    .await
    .unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let mut c = server.client().await;
        tasks.push(tokio::spawn(async move {
            handoff(&mut c, "race", "agent-a", &format!("agent-{i}"), 1).await
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(h) => winners.push(h.session.unwrap().owner_agent),
            Err(e) => assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let s = get_session(&mut c, "ns", "race").await.unwrap();
    assert_eq!(s.owner_agent, winners[0]);
    assert_eq!(s.lease_epoch, 2);
    // One handoff event turn, not eight.
    assert_eq!(all_turns(&mut c, "ns", "race").await.len(), 2);
    server.stop().await;
}

/// A handoff retried with its idempotency key (after a lost response)
/// answers with the first outcome instead of a stale-epoch error, and
/// writes nothing; the key cannot be reused for another request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_retried_with_its_key_replays_the_first_outcome() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_owned(&mut c, "k", "agent-a", 0).await;
    let said = turn(pb::Role::User, "customer", "Please refund order ORD-77.");
    append_as(&mut c, "k", 1, said).await.unwrap();
    let mut req = handoff_req("k", "agent-a", "agent-b", 1);
    req.idempotency_key = "handoff-1".into();
    let first = c.handoff(req.clone()).await.unwrap().into_inner();
    assert!(!first.replayed);
    assert_eq!((first.lease_epoch, first.event_seq), (2, 2));
    let first_summary = first.summary.clone().expect("handoff summary");

    // The new owner writes; then the old caller's retry arrives.
    let late = turn(pb::Role::Assistant, "agent-b", "Refund started.");
    append_as(&mut c, "k", 2, late).await.unwrap();
    let again = c.handoff(req.clone()).await.unwrap().into_inner();
    assert!(again.replayed);
    assert_eq!((again.lease_epoch, again.event_seq), (2, 2));
    assert_eq!(
        again.summary.map(|s| s.version),
        Some(first_summary.version)
    );
    let session = again.session.expect("session");
    assert_eq!(
        (session.owner_agent.as_str(), session.lease_epoch),
        ("agent-b", 2)
    );
    assert_eq!(session.turn_count, 3, "nothing written by the retry");
    assert_eq!(session.summary_version, first_summary.version);

    // The same key for another handoff is refused; without a key the retry
    // is the stale-epoch error it always was.
    let mut other = handoff_req("k", "agent-a", "agent-c", 1);
    other.idempotency_key = "handoff-1".into();
    let err = c.handoff(other).await.unwrap_err();
    assert_eq!(reason(&err), "IDEMPOTENCY_KEY_REUSED", "{err:?}");
    let err = handoff(&mut c, "k", "agent-a", "agent-b", 1)
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "STALE_LEASE_EPOCH");
    assert_eq!(all_turns(&mut c, "ns", "k").await.len(), 3);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_handoffs_keeps_what_the_first_agent_decided() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_owned(&mut c, "chain", "agent-a", 0).await;
    for t in [
        turn(
            pb::Role::User,
            "customer",
            "My invoice INV-5521 is wrong, it says $120.00 instead of $100.00.",
        ),
        turn(
            pb::Role::Assistant,
            "agent-a",
            "We decided to reissue invoice INV-5521 because the discount was not applied.",
        ),
        turn(
            pb::Role::Assistant,
            "agent-a",
            "I will send the corrected invoice INV-5521 by 2026-12-10.",
        ),
        turn(
            pb::Role::User,
            "customer",
            "Why was the discount missing in the first place?",
        ),
    ] {
        append_as(&mut c, "chain", 1, t).await.unwrap();
    }
    handoff(&mut c, "chain", "agent-a", "agent-b", 1)
        .await
        .unwrap();
    append_as(
        &mut c,
        "chain",
        2,
        turn(pb::Role::Assistant, "agent-b", "Looking into it."),
    )
    .await
    .unwrap();
    let h = handoff(&mut c, "chain", "agent-b", "agent-c", 2)
        .await
        .unwrap();
    assert_eq!(h.lease_epoch, 3);
    let b = h.bundle.unwrap();
    // A session this short is handed over as its transcript, decisions
    // included verbatim; what is still open is listed above it.
    assert!(b.manifest.as_ref().unwrap().transcript);
    assert!(
        b.rendered_text.contains("reissue invoice INV-5521"),
        "{}",
        b.rendered_text
    );
    assert!(
        b.pending_actions
            .iter()
            .any(|a| a.action.contains("INV-5521") && a.deadline == "2026-12-10"),
        "{:?}",
        b.pending_actions
    );
    assert!(
        b.open_questions
            .iter()
            .any(|q| q.question.contains("Why was the discount missing")),
        "{}",
        b.rendered_text
    );
    // Both handoffs are in the transcript, and neither became an item.
    assert!(b.rendered_text.contains("Handoff from agent-a to agent-b"));
    assert!(!b
        .pending_actions
        .iter()
        .any(|a| a.action.contains("Handoff")));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_summarized_and_wakes_on_append() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_owned(&mut c, "idle", "agent-a", 1).await;
    append_as(
        &mut c,
        "idle",
        0,
        turn(
            pb::Role::User,
            "customer",
            "Please refund order ORD-3 ($5.00).",
        ),
    )
    .await
    .unwrap();
    let s = wait_state(&mut c, "idle", pb::SessionState::Idle).await;
    assert_eq!(s.turn_count, 1);
    // The IDLE_TIMEOUT summary is written in the background.
    let mut summary = None;
    for _ in 0..100 {
        if let Ok(r) = c
            .get_summary(pb::GetSummaryRequest {
                namespace: "ns".into(),
                session_id: "idle".into(),
                ..Default::default()
            })
            .await
        {
            summary = r.into_inner().summary;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let summary = summary.expect("idle summary");
    assert_eq!(summary.trigger, pb::SummaryTrigger::IdleTimeout as i32);
    // A bundle of an idle session rehydrates it.
    let b = c
        .get_context_bundle(pb::GetContextBundleRequest {
            namespace: "ns".into(),
            session_id: "idle".into(),
            budget_tokens: 2000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .bundle
        .unwrap();
    assert_eq!(b.state, pb::SessionState::Idle as i32);
    assert!(b.rendered_text.contains("state IDLE"));
    assert!(b.rendered_text.contains("ORD-3"));
    // An append wakes it.
    append_as(
        &mut c,
        "idle",
        0,
        turn(pb::Role::User, "customer", "Any news?"),
    )
    .await
    .unwrap();
    let s = get_session(&mut c, "ns", "idle").await.unwrap();
    assert_eq!(s.state, pb::SessionState::Active as i32);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_that_passed_while_the_daemon_was_down_still_idles() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_owned(&mut c, "down", "agent-a", 2).await;
    append_as(
        &mut c,
        "down",
        0,
        turn(pb::Role::User, "customer", "Where is my parcel PKG-88?"),
    )
    .await
    .unwrap();
    let dir = server.data_dir.clone();
    let tmp = server.stop().await;
    // The deadline passes with no daemon running.
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    let s = wait_state(&mut c, "down", pb::SessionState::Idle).await;
    assert_eq!(s.turn_count, 1);
    let mut version = 0;
    for _ in 0..100 {
        version = get_session(&mut c, "ns", "down")
            .await
            .unwrap()
            .summary_version;
        if version > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(version, 1, "the idle summary was written after the restart");
    server.stop().await;
    drop(tmp);
}

/// Reads events until `n` arrived.
async fn take(
    stream: &mut tonic::Streaming<pb::WatchSessionResponse>,
    n: usize,
) -> Vec<pb::watch_session_response::Event> {
    let mut out = Vec::new();
    while out.len() < n {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("event in time")
            .expect("stream ok")
            .expect("stream open");
        out.push(ev.event.expect("event set"));
    }
    out
}

async fn watch(c: &mut Client, id: &str, from: u64) -> tonic::Streaming<pb::WatchSessionResponse> {
    c.watch_session(pb::WatchSessionRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        from_seq: from,
        observer: false,
    })
    .await
    .unwrap()
    .into_inner()
}

/// The `mnemo-first-seq` header of a new watch: the seq of the first turn
/// it will carry.
async fn first_seq(c: &mut Client, id: &str, from: u64) -> u64 {
    let response = c
        .watch_session(pb::WatchSessionRequest {
            namespace: "ns".into(),
            session_id: id.into(),
            from_seq: from,
            observer: false,
        })
        .await
        .unwrap();
    let header = response.metadata().get("mnemo-first-seq");
    header
        .expect("first-seq header")
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn seqs(events: &[pb::watch_session_response::Event]) -> Vec<u64> {
    use pb::watch_session_response::Event;
    events
        .iter()
        .filter_map(|e| match e {
            Event::Turn(t) => Some(t.seq),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_replay_then_follow_every_event_in_order() {
    use pb::watch_session_response::Event;
    let server = TestServer::start().await;
    let mut c = server.client().await;
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: "w".into(),
        owner_agent: "agent-a".into(),
        settings: Some(pb::SessionSettings {
            summary_every_turns: 10_000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    for i in 1..=5 {
        append_as(
            &mut c,
            "w",
            0,
            turn(pb::Role::User, "u", &format!("turn {i}")),
        )
        .await
        .unwrap();
    }
    c.summarize(pb::SummarizeRequest {
        namespace: "ns".into(),
        session_id: "w".into(),
        wait: true,
    })
    .await
    .unwrap();
    // Replay from 3: turns 3..5, then the summary covering 1..5.
    let mut w1 = watch(&mut c, "w", 3).await;
    let mut w2 = watch(&mut c, "w", 1).await;
    let ev = take(&mut w1, 4).await;
    assert_eq!(seqs(&ev), vec![3, 4, 5]);
    assert!(
        matches!(&ev[3], Event::SummaryWritten(s) if s.version == 1 && s.covers_through_seq == 5)
    );
    let ev = take(&mut w2, 6).await;
    assert_eq!(seqs(&ev), vec![1, 2, 3, 4, 5]);
    // Each watch says where its turns start: a replay at its from_seq, a
    // live-only one at the seq the next append gets.
    assert_eq!(first_seq(&mut c, "w", 3).await, 3);
    assert_eq!(first_seq(&mut c, "w", 0).await, 6);
    // Live: concurrent appends, a handoff and a close arrive in order.
    let mut live = watch(&mut c, "w", 0).await;
    let mut tasks = Vec::new();
    for k in 0..4 {
        let mut c = server.client().await;
        tasks.push(tokio::spawn(async move {
            for i in 0..10 {
                append_as(
                    &mut c,
                    "w",
                    0,
                    turn(pb::Role::User, "u", &format!("live {k}-{i}")),
                )
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    handoff(&mut c, "w", "agent-a", "agent-b", 1).await.unwrap();
    c.close_session(pb::CloseSessionRequest {
        namespace: "ns".into(),
        session_id: "w".into(),
    })
    .await
    .unwrap();
    for stream in [&mut w1, &mut w2, &mut live] {
        // 40 turns, the handoff turn, its handoff event, its summary, the
        // state change.
        let ev = take(stream, 44).await;
        assert_eq!(seqs(&ev), (6..=46).collect::<Vec<_>>());
        let kinds: Vec<&str> = ev[40..]
            .iter()
            .map(|e| match e {
                Event::Turn(_) => "turn",
                Event::Handoff(_) => "handoff",
                Event::SummaryWritten(_) => "summary",
                Event::StateChanged(_) => "state",
            })
            .collect();
        assert_eq!(kinds, ["turn", "handoff", "summary", "state"]);
        assert!(
            matches!(&ev[41], Event::Handoff(h) if h.to_agent == "agent-b" && h.lease_epoch == 2 && h.seq == 46)
        );
        assert!(
            matches!(&ev[43], Event::StateChanged(s) if s.state == pb::SessionState::Closed as i32 && s.at_seq == 46)
        );
    }
    // Deleting the session ends the streams with NOT_FOUND.
    c.delete_session(pb::DeleteSessionRequest {
        namespace: "ns".into(),
        session_id: "w".into(),
    })
    .await
    .unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), live.message())
        .await
        .unwrap();
    assert_eq!(end.unwrap_err().code(), Code::NotFound);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_falls_behind_is_told_where_to_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    config.limits.watch_buffer = 4;
    config.limits.max_watches_per_namespace = 2;
    let server = TestServer::start_with(config).await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "lag").await;
    // The slow watcher's own connection, with small HTTP/2 windows so
    // what it does not read backs up into the daemon quickly.
    let channel = tonic::transport::Endpoint::from_shared(server.url())
        .unwrap()
        .initial_stream_window_size(Some(16 * 1024))
        .initial_connection_window_size(Some(16 * 1024))
        .connect()
        .await
        .unwrap();
    let mut slow_client = MemoryServiceClient::new(channel).max_decoding_message_size(64 << 20);
    let mut slow = watch(&mut slow_client, "lag", 1).await;
    let _other = watch(&mut c, "lag", 0).await;
    // The namespace's cap on open watches.
    let err = c
        .watch_session(pb::WatchSessionRequest {
            namespace: "ns".into(),
            session_id: "lag".into(),
            from_seq: 0,
            observer: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    // Enough large turns to fill the stream's buffers, without reading.
    let big = "x".repeat(64 * 1024);
    for _ in 0..64 {
        c.append_turns(append_req("ns", "lag", vec![user_turn(&big)]))
            .await
            .unwrap();
    }
    // Turns received; summary events may be interleaved and do not count.
    let mut received = 0u64;
    let status = loop {
        match tokio::time::timeout(Duration::from_secs(10), slow.message())
            .await
            .expect("stream answers")
        {
            Ok(Some(ev)) => {
                if let Some(pb::watch_session_response::Event::Turn(t)) = ev.event {
                    assert_eq!(t.seq, received + 1, "turns in order, none skipped");
                    received = t.seq;
                }
            }
            Ok(None) => panic!("stream ended without an error"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), Code::ResourceExhausted);
    let resume: u64 = status
        .metadata()
        .get("mnemo-resume-from-seq")
        .expect("resume trailer")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(resume, received + 1, "{}", status.message());
    assert!(status.message().contains(&format!("from_seq={resume}")));
    assert!(resume <= 64);
    // Resuming from there delivers the rest, nothing lost.
    drop(slow);
    let mut again = watch(&mut c, "lag", resume).await;
    // Until turn 64 (summary events may come in between).
    let mut ev = Vec::new();
    while seqs(&ev).last() != Some(&64) {
        ev.extend(take(&mut again, 1).await);
    }
    assert_eq!(seqs(&ev), (resume..=64).collect::<Vec<_>>());
    drop((again, _other, slow_client));
    server.stop().await;
}

/// The support case: agent A works it for 30 turns (summaries written in
/// the background), hands off to B; A's late append is fenced; B's bundle
/// alone holds the pending refund (order id and amount verbatim) and the
/// open question; the session idles, the daemon restarts, and a new bundle
/// rehydrates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_support_case_story_end_to_end() {
    use pb::Role::{Assistant, Tool, User};
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_owned(&mut c, "case-1001", "agent-a", 2).await;
    let mut script: Vec<pb::NewTurn> = vec![
        turn(
            User,
            "maria",
            "Hi, I was charged twice for order ORD-55123. Each charge was $129.99.",
        ),
        turn(
            Assistant,
            "agent-a",
            "Sorry to hear that. Let me look up order ORD-55123.",
        ),
        pb::NewTurn {
            role: Tool as i32,
            speaker: "billing".into(),
            tool_call: Some(pb::ToolCall {
                tool_name: "lookup_order".into(),
                arguments_json: r#"{"order_id": "ORD-55123"}"#.into(),
                result: "ORD-55123: two captures of $129.99 on 2026-11-30".into(),
                status: pb::ToolCallStatus::Success as i32,
                error_details: String::new(),
            }),
            ..Default::default()
        },
        turn(
            Assistant,
            "agent-a",
            "I can see two captures of $129.99 on 2026-11-30. One of them is a duplicate.",
        ),
        turn(User, "maria", "Can you refund the duplicate?"),
        turn(
            Assistant,
            "agent-a",
            "Yes. We decided to refund the duplicate capture because it was a gateway retry.",
        ),
    ];
    for i in 0..22 {
        script.push(turn(
            if i % 2 == 0 { User } else { Assistant },
            if i % 2 == 0 { "maria" } else { "agent-a" },
            &format!("Chatting about the delivery window, message {i}."),
        ));
    }
    script.push(turn(
        Assistant,
        "agent-a",
        "I will issue the refund of $129.99 for order ORD-55123 by 2026-12-05.",
    ));
    script.push(turn(
        User,
        "maria",
        "Thanks. Will the refund go back to the Visa card ending in 4242?",
    ));
    assert_eq!(script.len(), 30);
    for t in script {
        append_as(&mut c, "case-1001", 1, t).await.unwrap();
    }
    // Summaries were written in the background while A worked.
    let mut version = 0;
    for _ in 0..200 {
        version = get_session(&mut c, "ns", "case-1001")
            .await
            .unwrap()
            .summary_version;
        if version >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(version >= 2, "background summaries: {version}");

    let h = handoff(&mut c, "case-1001", "agent-a", "agent-b", 1)
        .await
        .unwrap();
    assert_eq!(h.lease_epoch, 2);
    // A's late append is fenced.
    let err = append_as(
        &mut c,
        "case-1001",
        1,
        turn(Assistant, "agent-a", "One more thing..."),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("agent-b"));

    let check = |b: &pb::ContextBundle| {
        let refund = b
            .pending_actions
            .iter()
            .find(|a| a.action.contains("refund") && a.action.contains("ORD-55123"))
            .unwrap_or_else(|| panic!("no pending refund in\n{}", b.rendered_text));
        assert!(refund.action.contains("$129.99"), "{}", b.rendered_text);
        assert_eq!(refund.deadline, "2026-12-05");
        assert!(
            b.open_questions
                .iter()
                .any(|q| q.question.contains("Visa card ending in 4242")),
            "{}",
            b.rendered_text
        );
        // The text alone is enough for the next agent.
        for needle in [
            "ORD-55123",
            "$129.99",
            "2026-12-05",
            "Visa card ending in 4242",
        ] {
            assert!(b.rendered_text.contains(needle), "{needle}");
        }
        assert!(b.token_count <= b.budget_tokens);
        assert_eq!(b.as_of_seq, 31);
    };
    let bundle = h.bundle.unwrap();
    assert_eq!(bundle.owner_agent, "agent-b");
    check(&bundle);

    // The session idles, the daemon restarts, a new bundle rehydrates it.
    wait_state(&mut c, "case-1001", pb::SessionState::Idle).await;
    let server = server.restart().await;
    let mut c = server.client().await;
    let b = c
        .get_context_bundle(pb::GetContextBundleRequest {
            namespace: "ns".into(),
            session_id: "case-1001".into(),
            budget_tokens: 4000,
            agent_id: "agent-b".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .bundle
        .unwrap();
    assert_eq!(b.state, pb::SessionState::Idle as i32);
    assert_eq!((b.owner_agent.as_str(), b.lease_epoch), ("agent-b", 2));
    check(&b);
    // B carries on with its epoch, which wakes the session.
    append_as(
        &mut c,
        "case-1001",
        2,
        turn(
            Assistant,
            "agent-b",
            "Hi Maria, agent B here; the refund is on its way.",
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        get_session(&mut c, "ns", "case-1001").await.unwrap().state,
        pb::SessionState::Active as i32
    );
    server.stop().await;
}
