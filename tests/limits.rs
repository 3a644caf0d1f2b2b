//! Every client-facing limit, through the real daemon, at the limit
//! (accepted) and one past it (refused with the status the contract names,
//! a message naming the field or limit, and nothing written).

mod common;

use common::{append_req, config_for, create_session, user_turn, TestServer};
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use prost::Message;
use tonic::transport::Channel;
use tonic::{Code, Status};

type Client = MemoryServiceClient<Channel>;

/// One limit: a call made with a value of size `n`, the limit, the code
/// past it and a word the refusal must contain.
struct Limit {
    name: &'static str,
    limit: usize,
    code: Code,
    says: &'static str,
}

async fn at_and_past<F, Fut>(c: &Client, l: Limit, call: F)
where
    F: Fn(Client, usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), Status>>,
{
    call(c.clone(), l.limit)
        .await
        .unwrap_or_else(|e| panic!("{} at its limit {}: {e:?}", l.name, l.limit));
    let e = call(c.clone(), l.limit + 1)
        .await
        .expect_err(&format!("{} at limit + 1", l.name));
    assert_eq!(e.code(), l.code, "{}: {e:?}", l.name);
    assert!(
        e.message().contains(l.says),
        "{}: {:?} does not say {:?}",
        l.name,
        e.message(),
        l.says
    );
}

fn s(n: usize) -> String {
    "a".repeat(n)
}

fn create(ns: &str, id: String) -> pb::CreateSessionRequest {
    pb::CreateSessionRequest {
        namespace: ns.into(),
        session_id: id,
        ..Default::default()
    }
}

#[tokio::test]
async fn every_limit_accepts_its_value_and_refuses_one_more() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let unique = std::sync::atomic::AtomicUsize::new(0);
    let next = || unique.fetch_add(1, std::sync::atomic::Ordering::Relaxed);

    // Ids and names of a session.
    at_and_past(
        &c,
        Limit {
            name: "session_id",
            limit: 128,
            code: Code::InvalidArgument,
            says: "128",
        },
        |mut c, n| async move { c.create_session(create("ns", s(n))).await.map(drop) },
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "namespace",
            limit: 128,
            code: Code::InvalidArgument,
            says: "128",
        },
        |mut c, n| async move { c.create_session(create(&s(n), "x".into())).await.map(drop) },
    )
    .await;
    for (field, limit) in [("subject_id", 256), ("title", 1024), ("owner_agent", 256)] {
        let i = next();
        at_and_past(
            &c,
            Limit {
                name: field,
                limit,
                code: Code::InvalidArgument,
                says: field,
            },
            |mut c, n| async move {
                let mut r = create("ns", format!("{field}-{i}-{n}"));
                match field {
                    "subject_id" => r.subject_id = s(n),
                    "title" => r.title = s(n),
                    _ => r.owner_agent = s(n),
                }
                c.create_session(r).await.map(drop)
            },
        )
        .await;
    }
    at_and_past(
        &c,
        Limit {
            name: "metadata entries",
            limit: 64,
            code: Code::InvalidArgument,
            says: "64",
        },
        |mut c, n| async move {
            let mut r = create("ns", format!("meta-{n}"));
            r.metadata = (0..n).map(|i| (format!("k{i}"), "v".into())).collect();
            c.create_session(r).await.map(drop)
        },
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "metadata key",
            limit: 128,
            code: Code::InvalidArgument,
            says: "128",
        },
        |mut c, n| async move {
            let mut r = create("ns", format!("mkey-{n}"));
            r.metadata.insert(s(n), "v".into());
            c.create_session(r).await.map(drop)
        },
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "metadata value",
            limit: 4096,
            code: Code::InvalidArgument,
            says: "4096",
        },
        |mut c, n| async move {
            let mut r = create("ns", format!("mval-{n}"));
            r.metadata.insert("k".into(), s(n));
            c.create_session(r).await.map(drop)
        },
    )
    .await;

    // Appends.
    at_and_past(
        &c,
        Limit {
            name: "turns per append",
            limit: 256,
            code: Code::InvalidArgument,
            says: "256",
        },
        |mut c, n| async move {
            let turns = (0..n).map(|i| user_turn(&i.to_string())).collect();
            c.append_turns(append_req("ns", "s", turns)).await.map(drop)
        },
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "turn bytes",
            limit: 1024 * 1024,
            code: Code::InvalidArgument,
            says: "max_turn_bytes",
        },
        |mut c, n| async move {
            c.append_turns(append_req("ns", "s", vec![user_turn(&s(n))]))
                .await
                .map(drop)
        },
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "speaker",
            limit: 256,
            code: Code::InvalidArgument,
            says: "speaker",
        },
        |mut c, n| async move {
            let mut t = user_turn("x");
            t.speaker = s(n);
            c.append_turns(append_req("ns", "s", vec![t]))
                .await
                .map(drop)
        },
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "tool name",
            limit: 256,
            code: Code::InvalidArgument,
            says: "tool_name",
        },
        |mut c, n| async move {
            let mut t = user_turn("x");
            t.tool_call = Some(pb::ToolCall {
                tool_name: s(n),
                ..Default::default()
            });
            c.append_turns(append_req("ns", "s", vec![t]))
                .await
                .map(drop)
        },
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "idempotency key",
            limit: 128,
            code: Code::InvalidArgument,
            says: "128",
        },
        |mut c, n| async move {
            let mut r = append_req("ns", "s", vec![user_turn("x")]);
            r.idempotency_key = s(n);
            c.append_turns(r).await.map(drop)
        },
    )
    .await;

    // Pages, bundles, handoffs.
    at_and_past(
        &c,
        Limit {
            name: "page size",
            limit: 1000,
            code: Code::InvalidArgument,
            says: "1000",
        },
        |mut c, n| async move {
            c.list_turns(pb::ListTurnsRequest {
                namespace: "ns".into(),
                session_id: "s".into(),
                page_size: n as u32,
                ..Default::default()
            })
            .await
            .map(drop)
        },
    )
    .await;
    let bundle = |budget: u32, recent: u32, query: String| pb::GetContextBundleRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        budget_tokens: budget,
        recent_interactions: recent,
        query,
        ..Default::default()
    };
    at_and_past(
        &c,
        Limit {
            name: "bundle budget",
            limit: 1_000_000,
            code: Code::InvalidArgument,
            says: "1000000",
        },
        |mut c, n| async move {
            c.get_context_bundle(bundle(n as u32, 0, String::new()))
                .await
                .map(drop)
        },
    )
    .await;
    // The lower bound, from below: 256 is accepted, 255 is not.
    c.get_context_bundle(bundle(256, 0, String::new()))
        .await
        .expect("budget 256");
    let e = c
        .get_context_bundle(bundle(255, 0, String::new()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    at_and_past(
        &c,
        Limit {
            name: "recent interactions",
            limit: 1000,
            code: Code::InvalidArgument,
            says: "1000",
        },
        |mut c, n| async move {
            c.get_context_bundle(bundle(8000, n as u32, String::new()))
                .await
                .map(drop)
        },
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "bundle query",
            limit: 4096,
            code: Code::InvalidArgument,
            says: "4096",
        },
        |mut c, n| async move { c.get_context_bundle(bundle(8000, 0, s(n))).await.map(drop) },
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "handoff reason",
            limit: 4096,
            code: Code::InvalidArgument,
            says: "4096",
        },
        |c, n| hand_on(c, n, s(n), String::new()),
    )
    .await;
    at_and_past(
        &c,
        Limit {
            name: "handoff idempotency key",
            limit: 128,
            code: Code::InvalidArgument,
            says: "128",
        },
        // Not the append test's key: keys share the session's key space.
        |c, n| hand_on(c, n, String::new(), "h".repeat(n)),
    )
    .await;
    server.stop().await;
}

/// Hands session "s" on to `agent-<n>` from whoever owns it now.
async fn hand_on(mut c: Client, n: usize, reason: String, key: String) -> Result<(), Status> {
    let session = c
        .get_session(pb::GetSessionRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
        })
        .await?
        .into_inner()
        .session
        .unwrap_or_default();
    let from = match session.owner_agent.as_str() {
        "" => "agent-0".to_owned(),
        owner => owner.to_owned(),
    };
    c.handoff(pb::HandoffRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        from_agent: from,
        to_agent: format!("agent-{n}"),
        reason,
        lease_epoch: session.lease_epoch,
        idempotency_key: key,
        ..Default::default()
    })
    .await
    .map(drop)
}

/// The message-size limit, to the byte: a request whose encoding is
/// exactly `max_message_bytes` is served; one byte more is
/// RESOURCE_EXHAUSTED naming the limit, and nothing is written.
#[tokio::test]
async fn the_message_size_limit_holds_to_the_byte() {
    const LIMIT: usize = 1024 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    config.limits.max_message_bytes = LIMIT;
    config.limits.max_turn_bytes = 256 * 1024;
    let server = TestServer::start_with(config).await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let sized = |total: usize| {
        // Four turns of 200 KiB and a fifth whose length makes the whole
        // request `total` bytes (each under the turn limit).
        let mut n = total - 4 * 200 * 1024;
        loop {
            let mut turns: Vec<pb::NewTurn> =
                (0..4).map(|_| user_turn(&"f".repeat(200 * 1024))).collect();
            turns.push(user_turn(&"m".repeat(n)));
            let r = append_req("ns", "s", turns);
            match r.encoded_len() {
                len if len == total => return r,
                len if len > total => n -= len - total,
                // A varint shrank a byte: pad the content by one.
                _ => n += 1,
            }
        }
    };
    c.append_turns(sized(LIMIT))
        .await
        .expect("exactly at the limit");
    let e = c.append_turns(sized(LIMIT + 1)).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains(&LIMIT.to_string()), "{}", e.message());
    let turns = common::all_turns(&mut c, "ns", "s").await;
    assert_eq!(turns.len(), 5, "only the request at the limit was stored");
    server.stop().await;
}
