//! Working memory end to end over gRPC: appending and listing turns,
//! pagination, idempotency, optimistic concurrency, concurrent appenders
//! and every limit (status code asserted, stored data unchanged).

mod common;

use common::*;
use mnemo::pb;
use tonic::Code;

fn mixed_turn(i: usize) -> pb::NewTurn {
    match i % 4 {
        0 => user_turn(&format!("User message {i}: my order ORD-{i} costs $49.99")),
        1 => pb::NewTurn {
            role: pb::Role::Assistant as i32,
            speaker: "agent-a".into(),
            content: format!("Assistant reply {i}"),
            metadata: [("model".to_string(), "m1".to_string())].into(),
            ..Default::default()
        },
        2 => pb::NewTurn {
            role: pb::Role::Tool as i32,
            speaker: "tool".into(),
            content: String::new(),
            tool_call: Some(pb::ToolCall {
                tool_name: "lookup_order".into(),
                arguments_json: format!(r#"{{"order_id": "ORD-{i}"}}"#),
                result: "status: shipped".into(),
                status: pb::ToolCallStatus::Success as i32,
                error_details: String::new(),
            }),
            client_time: Some(prost_types::Timestamp {
                seconds: 1_700_000_000 + i as i64,
                nanos: 123_456_789,
            }),
            ..Default::default()
        },
        _ => pb::NewTurn {
            role: pb::Role::System as i32,
            speaker: "orchestrator".into(),
            content: format!("System note {i}"),
            ..Default::default()
        },
    }
}

#[tokio::test]
async fn append_25_mixed_turns_and_list_them_back_exactly() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s1").await;
    let sent: Vec<pb::NewTurn> = (0..25).map(mixed_turn).collect();
    // Two appends: 10 then 15.
    let r1 = c
        .append_turns(append_req("ns", "s1", sent[..10].to_vec()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r1.first_seq, r1.last_seq), (1, 10));
    let r2 = c
        .append_turns(append_req("ns", "s1", sent[10..].to_vec()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r2.first_seq, r2.last_seq), (11, 25));
    assert!(!r2.replayed);

    let got = all_turns(&mut c, "ns", "s1").await;
    assert_eq!(got.len(), 25);
    let counts: Vec<u32> = r1
        .token_counts
        .iter()
        .chain(&r2.token_counts)
        .copied()
        .collect();
    for (i, (t, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(t.seq, i as u64 + 1);
        assert_eq!(t.role, s.role);
        assert_eq!(t.speaker, s.speaker);
        assert_eq!(t.content, s.content);
        assert_eq!(t.tool_call, s.tool_call);
        assert_eq!(t.client_time, s.client_time);
        assert_eq!(t.metadata, s.metadata);
        assert!(t.server_time.is_some());
        assert_eq!(t.token_count, counts[i]);
    }
    let session = get_session(&mut c, "ns", "s1").await.unwrap();
    assert_eq!(session.turn_count, 25);
    assert_eq!(session.next_seq, 26);
    assert_eq!(
        session.total_tokens,
        counts.iter().map(|&n| u64::from(n)).sum::<u64>()
    );
    assert_eq!(r2.total_tokens, session.total_tokens);
}

#[tokio::test]
async fn token_counts_match_tiktoken() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    for (id, enc) in [
        ("c", pb::Encoding::Cl100kBase),
        ("o", pb::Encoding::O200kBase),
    ] {
        c.create_session(pb::CreateSessionRequest {
            namespace: "ns".into(),
            session_id: id.into(),
            settings: Some(pb::SessionSettings {
                encoding: enc as i32,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        let text = "Refund of $49.99 for ORD-9921 approved — merci beaucoup! 🎉 fn main() { println!(\"hi\"); }";
        let r = c
            .append_turns(append_req("ns", id, vec![user_turn(text)]))
            .await
            .unwrap()
            .into_inner();
        let reference = match enc {
            pb::Encoding::O200kBase => tiktoken_rs::o200k_base().unwrap(),
            _ => tiktoken_rs::cl100k_base().unwrap(),
        };
        assert_eq!(
            r.token_counts[0] as usize,
            reference.encode_ordinary(text).len(),
            "{enc:?}"
        );
    }
}

#[tokio::test]
async fn list_turns_paginates_by_seq_range() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let turns: Vec<_> = (0..30).map(|i| user_turn(&format!("t{i}"))).collect();
    c.append_turns(append_req("ns", "s", turns)).await.unwrap();

    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = c
            .list_turns(pb::ListTurnsRequest {
                namespace: "ns".into(),
                session_id: "s".into(),
                from_seq: 5,
                to_seq: 27,
                page_size: 7,
                page_token: token,
                newest: 0,
            })
            .await
            .unwrap()
            .into_inner();
        pages += 1;
        assert!(page.turns.len() <= 7);
        seen.extend(page.turns.iter().map(|t| t.seq));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen, (5..=27).collect::<Vec<u64>>());
    assert_eq!(pages, 4);

    // The newest N: of the session, of a range, more than there are, and
    // more than a page (the rest follows by token).
    for (from, to, newest, page_size, want) in [
        (0, 0, 20, 0, (11..=30).collect::<Vec<u64>>()),
        (0, 25, 3, 0, vec![23, 24, 25]),
        (28, 0, 10, 0, vec![28, 29, 30]),
        (0, 0, 100, 0, (1..=30).collect()),
        (0, 0, 12, 5, (19..=30).collect()),
    ] {
        let mut got = Vec::new();
        let mut token = String::new();
        loop {
            let page = c
                .list_turns(pb::ListTurnsRequest {
                    namespace: "ns".into(),
                    session_id: "s".into(),
                    from_seq: from,
                    to_seq: to,
                    page_size,
                    page_token: token,
                    newest,
                })
                .await
                .unwrap()
                .into_inner();
            got.extend(page.turns.iter().map(|t| t.seq));
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        assert_eq!(got, want, "from {from} to {to} newest {newest}");
    }

    // Bad page size and token.
    let err = c
        .list_turns(pb::ListTurnsRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            page_size: 1001,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("1000"), "{}", err.message());
    let err = c
        .list_turns(pb::ListTurnsRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            page_token: "not-a-token".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    // Unknown session.
    let err = c
        .list_turns(pb::ListTurnsRequest {
            namespace: "ns".into(),
            session_id: "missing".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test]
async fn idempotent_retry_writes_nothing() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let mut req = append_req("ns", "s", vec![user_turn("a"), user_turn("b")]);
    req.idempotency_key = "req-1".into();
    let first = c.append_turns(req.clone()).await.unwrap().into_inner();
    assert!(!first.replayed);
    let retry = c.append_turns(req.clone()).await.unwrap().into_inner();
    assert!(retry.replayed);
    assert_eq!(
        (retry.first_seq, retry.last_seq),
        (first.first_seq, first.last_seq)
    );
    assert_eq!(retry.token_counts, first.token_counts);
    assert_eq!(retry.total_tokens, first.total_tokens);
    let s = get_session(&mut c, "ns", "s").await.unwrap();
    assert_eq!(s.turn_count, 2);
    assert_eq!(all_turns(&mut c, "ns", "s").await.len(), 2);

    // The same key with different turns is refused and writes nothing.
    let mut other = append_req("ns", "s", vec![user_turn("different")]);
    other.idempotency_key = "req-1".into();
    let err = c.append_turns(other).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason(&err), "IDEMPOTENCY_KEY_REUSED");
    assert!(err.message().contains("idempotency_key"));
    assert_eq!(get_session(&mut c, "ns", "s").await.unwrap().turn_count, 2);
}

#[tokio::test]
async fn expected_next_seq_conflict_is_aborted_with_current_value() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let mut req = append_req("ns", "s", vec![user_turn("a")]);
    req.expected_next_seq = 1;
    c.append_turns(req.clone()).await.unwrap();
    // Same expectation again: now stale.
    let err = c.append_turns(req).await.unwrap_err();
    assert_eq!(err.code(), Code::Aborted);
    assert!(err.message().contains("next_seq 2"), "{}", err.message());
    let mut ok = append_req("ns", "s", vec![user_turn("b")]);
    ok.expected_next_seq = 2;
    c.append_turns(ok).await.unwrap();
    let turns = all_turns(&mut c, "ns", "s").await;
    assert_eq!(
        turns.iter().map(|t| t.content.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_appenders_get_a_gap_free_sequence() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let mut tasks = Vec::new();
    for w in 0..16 {
        // A few connections, shared by several workers each.
        let channel = server.channel().await;
        tasks.push(tokio::spawn(async move {
            let mut c = mnemo::pb::memory_service_client::MemoryServiceClient::new(channel);
            let mut acked = Vec::new();
            for i in 0..20 {
                let content = format!("w{w}-i{i}");
                let r = c
                    .append_turns(append_req("ns", "s", vec![user_turn(&content)]))
                    .await
                    .expect("append")
                    .into_inner();
                acked.push((r.first_seq, content));
            }
            acked
        }));
    }
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    let turns = all_turns(&mut c, "ns", "s").await;
    assert_eq!(turns.len(), 320);
    for (i, t) in turns.iter().enumerate() {
        assert_eq!(t.seq, i as u64 + 1, "gap-free");
    }
    for (seq, content) in acked {
        assert_eq!(
            turns[seq as usize - 1].content,
            content,
            "acked turn at its seq"
        );
    }
    // Group commit: fewer syncs than durable requests (sled's own; on
    // PostgreSQL every request is a transaction the server commits).
    if on_postgres() {
        return;
    }
    let stats = &server.commit_stats;
    let syncs = stats.syncs.load(std::sync::atomic::Ordering::Relaxed);
    let requests = stats.requests.load(std::sync::atomic::Ordering::Relaxed);
    assert!(syncs < requests, "syncs {syncs} < requests {requests}");
}

#[tokio::test]
async fn appending_to_a_closed_session_fails_and_writes_nothing() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    c.append_turns(append_req("ns", "s", vec![user_turn("a")]))
        .await
        .unwrap();
    c.close_session(pb::CloseSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
    })
    .await
    .unwrap();
    let err = c
        .append_turns(append_req("ns", "s", vec![user_turn("b")]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason(&err), "SESSION_CLOSED");
    assert!(err.message().contains("closed"));
    assert_eq!(all_turns(&mut c, "ns", "s").await.len(), 1);
}

/// Asserts an append fails with `code`, the message mentions `needle`, and
/// the session is unchanged.
async fn assert_rejected(
    c: &mut mnemo::pb::memory_service_client::MemoryServiceClient<tonic::transport::Channel>,
    req: pb::AppendTurnsRequest,
    code: Code,
    needle: &str,
) {
    let before = get_session(c, &req.namespace, &req.session_id)
        .await
        .unwrap();
    let (ns, id) = (req.namespace.clone(), req.session_id.clone());
    let err = c.append_turns(req).await.unwrap_err();
    assert_eq!(err.code(), code, "{}", err.message());
    assert!(
        err.message().contains(needle),
        "{:?} lacks {needle:?}",
        err.message()
    );
    let after = get_session(c, &ns, &id).await.unwrap();
    assert_eq!(before, after, "session unchanged");
}

#[tokio::test]
async fn limits_and_bad_turns_are_rejected_without_writing() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    c.append_turns(append_req("ns", "s", vec![user_turn("keep me")]))
        .await
        .unwrap();

    let too_many = (0..257).map(|i| user_turn(&i.to_string())).collect();
    assert_rejected(
        &mut c,
        append_req("ns", "s", too_many),
        Code::InvalidArgument,
        "256",
    )
    .await;
    let big = user_turn(&"x".repeat(1024 * 1024 + 1));
    assert_rejected(
        &mut c,
        append_req("ns", "s", vec![big]),
        Code::InvalidArgument,
        "max_turn_bytes",
    )
    .await;
    assert_rejected(
        &mut c,
        append_req("ns", "s", vec![]),
        Code::InvalidArgument,
        "at least one",
    )
    .await;
    let mut no_role = user_turn("x");
    no_role.role = 0;
    assert_rejected(
        &mut c,
        append_req("ns", "s", vec![no_role]),
        Code::InvalidArgument,
        "role",
    )
    .await;
    let mut bad_json = user_turn("x");
    bad_json.tool_call = Some(pb::ToolCall {
        tool_name: "t".into(),
        arguments_json: "{not json".into(),
        ..Default::default()
    });
    assert_rejected(
        &mut c,
        append_req("ns", "s", vec![bad_json]),
        Code::InvalidArgument,
        "arguments_json",
    )
    .await;
    let mut bad_time = user_turn("x");
    bad_time.client_time = Some(prost_types::Timestamp {
        seconds: 0,
        nanos: -5,
    });
    assert_rejected(
        &mut c,
        append_req("ns", "s", vec![bad_time]),
        Code::InvalidArgument,
        "client_time",
    )
    .await;
    // Over the 4 MiB message limit: RESOURCE_EXHAUSTED naming the limit.
    let huge = (0..5)
        .map(|_| user_turn(&"y".repeat(1024 * 1024)))
        .collect();
    assert_rejected(
        &mut c,
        append_req("ns", "s", huge),
        Code::ResourceExhausted,
        "4194304",
    )
    .await;
    // A second turn in a batch that fails validation: nothing of the batch lands.
    let mut half_bad = vec![user_turn("fine")];
    let mut bad = user_turn("bad");
    bad.role = 99;
    half_bad.push(bad);
    assert_rejected(
        &mut c,
        append_req("ns", "s", half_bad),
        Code::InvalidArgument,
        "turns[1]",
    )
    .await;

    let turns = all_turns(&mut c, "ns", "s").await;
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].content, "keep me");
}

#[tokio::test]
async fn a_one_mib_single_character_turn_is_accepted_and_counted() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let text = "a".repeat(1024 * 1024);
    let r = c
        .append_turns(append_req("ns", "s", vec![user_turn(&text)]))
        .await
        .unwrap()
        .into_inner();
    let n = r.token_counts[0] as usize;
    // The linear-time counter agrees with tiktoken on a prefix small enough
    // for tiktoken's quadratic path, and scales as the text does.
    assert_eq!(
        mnemo::tokens::count(mnemo::model::Encoding::Cl100kBase, &text),
        n
    );
    let prefix = &text[..4096];
    let reference = tiktoken_rs::cl100k_base()
        .unwrap()
        .encode_ordinary(prefix)
        .len();
    assert_eq!(
        mnemo::tokens::count(mnemo::model::Encoding::Cl100kBase, prefix),
        reference
    );
    assert!((1024 * 1024 / 16..=1024 * 1024).contains(&n), "{n} tokens");
    let turns = all_turns(&mut c, "ns", "s").await;
    assert_eq!(turns[0].content.len(), 1024 * 1024);
    assert_eq!(turns[0].token_count as usize, n);
}
