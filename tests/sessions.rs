//! Sessions end to end over gRPC: create (generated and chosen ids,
//! defaults, validation), get, list with filters and pagination, close,
//! delete; plus health and reflection.

mod common;

use common::*;
use mnemo::pb;
use tonic::Code;

#[tokio::test]
async fn create_fills_defaults_and_generates_sortable_ids() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let a = create_session(&mut c, "ns", "").await;
    let b = create_session(&mut c, "ns", "").await;
    assert_eq!(a.session_id.len(), 26, "a ULID");
    assert!(a.session_id < b.session_id, "ids sort by creation");
    let settings = a.settings.unwrap();
    assert_eq!(settings.summary_every_turns, 10);
    assert_eq!(settings.context_limit_tokens, 128_000);
    assert_eq!(settings.idle_timeout_seconds, 1800);
    assert_eq!(settings.encoding, pb::Encoding::Cl100kBase as i32);
    assert_eq!(a.state, pb::SessionState::Active as i32);
    assert_eq!((a.turn_count, a.next_seq, a.total_tokens), (0, 1, 0));
    assert!(a.create_time.is_some() && a.update_time.is_some());

    let full = c
        .create_session(pb::CreateSessionRequest {
            namespace: "ns".into(),
            session_id: "case-42".into(),
            subject_id: "customer:alice@example.com".into(),
            title: "Billing dispute".into(),
            metadata: [("channel".to_string(), "chat".to_string())].into(),
            settings: Some(pb::SessionSettings {
                summary_every_turns: 5,
                context_limit_tokens: 8000,
                idle_timeout_seconds: 60,
                encoding: pb::Encoding::O200kBase as i32,
                risk_level: pb::RiskLevel::High as i32,
                fact_extraction: pb::FactExtraction::Disabled as i32,
            }),
            owner_agent: "agent-billing".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(get_session(&mut c, "ns", "case-42").await.unwrap(), full);
    assert_eq!(
        full.settings.unwrap().encoding,
        pb::Encoding::O200kBase as i32
    );

    let err = c
        .create_session(pb::CreateSessionRequest {
            namespace: "ns".into(),
            session_id: "case-42".into(),
            title: "other".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert_eq!(
        get_session(&mut c, "ns", "case-42").await.unwrap(),
        full,
        "unchanged"
    );
}

#[tokio::test]
async fn invalid_create_requests_name_the_field() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let base = pb::CreateSessionRequest {
        namespace: "ns".into(),
        ..Default::default()
    };
    let cases: Vec<(pb::CreateSessionRequest, &str)> = vec![
        (
            pb::CreateSessionRequest {
                namespace: String::new(),
                ..base.clone()
            },
            "namespace is required",
        ),
        (
            pb::CreateSessionRequest {
                namespace: "a/b".into(),
                ..base.clone()
            },
            "namespace",
        ),
        (
            pb::CreateSessionRequest {
                session_id: "x".repeat(129),
                ..base.clone()
            },
            "session_id",
        ),
        (
            pb::CreateSessionRequest {
                subject_id: "a\u{0}b".into(),
                ..base.clone()
            },
            "subject_id",
        ),
        (
            pb::CreateSessionRequest {
                title: "t".repeat(1025),
                ..base.clone()
            },
            "title",
        ),
        (
            pb::CreateSessionRequest {
                settings: Some(pb::SessionSettings {
                    context_limit_tokens: 10,
                    ..Default::default()
                }),
                ..base.clone()
            },
            "context_limit_tokens",
        ),
        (
            pb::CreateSessionRequest {
                settings: Some(pb::SessionSettings {
                    encoding: 9,
                    ..Default::default()
                }),
                ..base.clone()
            },
            "encoding",
        ),
        (
            pb::CreateSessionRequest {
                metadata: (0..65).map(|i| (i.to_string(), String::new())).collect(),
                ..base.clone()
            },
            "metadata",
        ),
    ];
    for (req, needle) in cases {
        let err = c.create_session(req).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains(needle),
            "{:?} lacks {needle:?}",
            err.message()
        );
    }
    let page = c
        .list_sessions(pb::ListSessionsRequest {
            namespace: "ns".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(page.sessions.is_empty(), "nothing was created");
}

async fn list_all(
    c: &mut mnemo::pb::memory_service_client::MemoryServiceClient<tonic::transport::Channel>,
    mut req: pb::ListSessionsRequest,
) -> Vec<String> {
    let mut ids = Vec::new();
    loop {
        let page = c.list_sessions(req.clone()).await.unwrap().into_inner();
        assert!(page.sessions.len() <= req.page_size.max(1) as usize || req.page_size == 0);
        ids.extend(page.sessions.into_iter().map(|s| s.session_id));
        if page.next_page_token.is_empty() {
            return ids;
        }
        req.page_token = page.next_page_token;
    }
}

#[tokio::test]
async fn list_filters_by_subject_and_state_and_paginates() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    for i in 0..25 {
        c.create_session(pb::CreateSessionRequest {
            namespace: "ns".into(),
            session_id: format!("s{i:02}"),
            subject_id: if i % 3 == 0 {
                "alice".into()
            } else {
                "bob".into()
            },
            ..Default::default()
        })
        .await
        .unwrap();
    }
    create_session(&mut c, "other-ns", "s00").await;
    for i in [0, 3, 4] {
        c.close_session(pb::CloseSessionRequest {
            namespace: "ns".into(),
            session_id: format!("s{i:02}"),
        })
        .await
        .unwrap();
    }
    let req = |subject: &str, state: pb::SessionState, size: u32| pb::ListSessionsRequest {
        namespace: "ns".into(),
        subject_id: subject.into(),
        state: state as i32,
        page_size: size,
        page_token: String::new(),
    };
    let all = list_all(&mut c, req("", pb::SessionState::Unspecified, 4)).await;
    assert_eq!(all, (0..25).map(|i| format!("s{i:02}")).collect::<Vec<_>>());
    let alice = list_all(&mut c, req("alice", pb::SessionState::Unspecified, 2)).await;
    assert_eq!(
        alice,
        ["s00", "s03", "s06", "s09", "s12", "s15", "s18", "s21", "s24"]
    );
    let closed = list_all(&mut c, req("", pb::SessionState::Closed, 1)).await;
    assert_eq!(closed, ["s00", "s03", "s04"]);
    let alice_active = list_all(&mut c, req("alice", pb::SessionState::Active, 3)).await;
    assert_eq!(alice_active.len(), 7);

    let err = c
        .list_sessions(req("", pb::SessionState::Unspecified, 1001))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let mut bad = req("", pb::SessionState::Unspecified, 10);
    bad.page_token = "zz".into();
    assert_eq!(
        c.list_sessions(bad).await.unwrap_err().code(),
        Code::InvalidArgument
    );
}

#[tokio::test]
async fn close_is_idempotent_and_delete_removes_everything() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        subject_id: "alice".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    create_session(&mut c, "ns", "keep").await;
    let mut req = append_req(
        "ns",
        "s",
        (0..5).map(|i| user_turn(&i.to_string())).collect(),
    );
    req.idempotency_key = "k".into();
    c.append_turns(req.clone()).await.unwrap();
    c.append_turns(append_req("ns", "keep", vec![user_turn("stay")]))
        .await
        .unwrap();

    let close = pb::CloseSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
    };
    let closed = c
        .close_session(close.clone())
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(closed.state, pb::SessionState::Closed as i32);
    let again = c
        .close_session(close)
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    // Closing again changes nothing (the CLOSE summary written in the
    // background meanwhile may advance the summary fields only).
    assert_eq!(again.state, closed.state);
    assert_eq!(again.update_time, closed.update_time);
    assert_eq!(again.turn_count, closed.turn_count);

    let del = pb::DeleteSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
    };
    assert_eq!(
        c.delete_session(del.clone())
            .await
            .unwrap()
            .into_inner()
            .deleted_turns,
        5
    );
    assert_eq!(
        get_session(&mut c, "ns", "s").await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(
        c.delete_session(del).await.unwrap_err().code(),
        Code::NotFound
    );
    let by_subject = list_all(
        &mut c,
        pb::ListSessionsRequest {
            namespace: "ns".into(),
            subject_id: "alice".into(),
            ..Default::default()
        },
    )
    .await;
    assert!(by_subject.is_empty(), "subject index entry removed");

    // Re-creating the id starts empty: no old turns or idempotency keys.
    create_session(&mut c, "ns", "s").await;
    assert!(all_turns(&mut c, "ns", "s").await.is_empty());
    let r = c.append_turns(req).await.unwrap().into_inner();
    assert!(!r.replayed);
    assert_eq!(r.first_seq, 1);
    assert_eq!(
        all_turns(&mut c, "ns", "keep").await.len(),
        1,
        "other sessions untouched"
    );
}

#[tokio::test]
async fn health_and_reflection_are_served() {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;

    let server = TestServer::start().await;
    let mut health = HealthClient::new(server.channel().await);
    for service in ["", "mnemo.v1.MemoryService"] {
        let r = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status, 1, "SERVING for {service:?}");
    }

    let mut reflection = ServerReflectionClient::new(server.channel().await);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = reflection
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let resp = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = resp.message_response else {
        panic!("unexpected reflection response");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"mnemo.v1.MemoryService".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"grpc.health.v1.Health".to_string()),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_large_sessions_is_cut_to_fit_one_message() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    config.limits.max_message_bytes = 1 << 20;
    config.limits.max_turn_bytes = 512 << 10;
    let server = TestServer::start_with(config).await;
    let mut c = server.client().await;
    // 20 sessions with ~240 KB of metadata each: ~4.8 MB in all.
    let metadata: std::collections::HashMap<String, String> = (0..60)
        .map(|i| (format!("key-{i}"), "v".repeat(4000)))
        .collect();
    for i in 0..20 {
        c.create_session(pb::CreateSessionRequest {
            namespace: "ns".into(),
            session_id: format!("s{i:02}"),
            metadata: metadata.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let mut ids = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = c
            .list_sessions(pb::ListSessionsRequest {
                namespace: "ns".into(),
                page_size: 100,
                page_token: token,
                ..Default::default()
            })
            .await
            .expect("every page fits the message limit")
            .into_inner();
        pages += 1;
        ids.extend(page.sessions.into_iter().map(|s| s.session_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert!(pages >= 8, "{pages} pages");
    assert_eq!(ids, (0..20).map(|i| format!("s{i:02}")).collect::<Vec<_>>());
    server.stop().await;
}
