//! What a bundle spends its budget on, through gRPC on a real socket:
//! memory retrieved for the request wins over a block of carried items
//! when they compete for a small budget; without a query the bundle is the
//! session's state (carried actions first); a closed session's small talk
//! is never carried into the next session's bundle, its real commitment
//! is, with its session and day.

mod common;

use common::*;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use tonic::transport::Channel;

type Client = MemoryServiceClient<Channel>;

const NS: &str = "value";
/// 8 May 2023, 13:56 UTC.
const MAY_8: i64 = 1_683_554_160;

async fn session(c: &mut Client, id: &str, subject: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: NS.into(),
        session_id: id.into(),
        subject_id: subject.into(),
        ..Default::default()
    })
    .await
    .unwrap();
}

/// Appends `turns`, closes the session and waits for its episode.
async fn closed_session(c: &mut Client, id: &str, subject: &str, turns: Vec<pb::NewTurn>) {
    session(c, id, subject).await;
    c.append_turns(append_req(NS, id, turns)).await.unwrap();
    let before = episodes_until(c, NS, subject, 0).await.len();
    c.close_session(pb::CloseSessionRequest {
        namespace: NS.into(),
        session_id: id.into(),
    })
    .await
    .unwrap();
    episodes_until(c, NS, subject, before + 1).await;
}

/// A subject whose first session left many real commitments open and
/// whose second session said, once, the locker code; a third is open.
async fn busy_subject(c: &mut Client) {
    let subject = "member:7";
    let mut promises = vec![turn_at(
        pb::Role::User,
        "dana",
        "I need the quarterly reports sorted out before the audit.",
        MAY_8,
    )];
    for (i, what) in [
        "revenue",
        "payroll",
        "expenses",
        "inventory",
        "travel",
        "vendor",
        "tax",
        "capex",
        "leases",
        "grants",
        "refunds",
        "bonuses",
    ]
    .iter()
    .enumerate()
    {
        promises.push(turn_at(
            pb::Role::Assistant,
            "agent",
            &format!(
                "I'll send the {what} report for the second quarter to the finance team by Friday."
            ),
            MAY_8 + 60 * (i as i64 + 1),
        ));
    }
    closed_session(c, "reports", subject, promises).await;
    let day = 86_400;
    closed_session(
        c,
        "gym",
        subject,
        vec![
            turn_at(
                pb::Role::User,
                "dana",
                "Which locker did they give me at the gym?",
                MAY_8 + day,
            ),
            turn_at(
                pb::Role::Assistant,
                "agent",
                "Your locker is number 4417, on the second floor next to the sauna.",
                MAY_8 + day + 30,
            ),
        ],
    )
    .await;
    session(c, "today", subject).await;
    c.append_turns(append_req(
        NS,
        "today",
        vec![turn_at(
            pb::Role::User,
            "dana",
            "Hello again, quick question.",
            MAY_8 + 2 * day,
        )],
    ))
    .await
    .unwrap();
    index_caught_up(c, NS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relevant_retrieved_turn_wins_over_a_block_of_carried_items() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    busy_subject(&mut c).await;
    let b = query_bundle(
        &mut c,
        NS,
        "today",
        400,
        "What is my locker number at the gym?",
    )
    .await;
    let text = &b.rendered_text;
    assert!(text.contains("4417"), "the answer was crowded out:\n{text}");
    // Read like memory: its day and speaker first.
    assert!(
        text.contains("[9 May 2023] agent: Your locker is number 4417"),
        "{text}"
    );
    // The carried block is still there, cut: the first carried action is
    // always admitted.
    assert!(
        text.contains("## Pending actions from earlier sessions"),
        "{text}"
    );
    assert!(text.contains("revenue report"), "{text}");
    assert!(!text.contains("bonuses report"), "{text}");
    assert!(b.token_count <= 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_a_query_gets_its_state() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    busy_subject(&mut c).await;
    let b = query_bundle(&mut c, NS, "today", 1_000, "").await;
    let text = &b.rendered_text;
    // The first carried action is always admitted, naming its session and
    // the day it was said: the turn's client time (8 May 2023), not the
    // day the daemon closed the session.
    assert!(
        text.contains("## Pending actions from earlier sessions"),
        "{text}"
    );
    let first = text
        .lines()
        .find(|l| l.contains("revenue report for the second quarter"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        first.ends_with("from session reports [#2], 8 May 2023"),
        "{first}"
    );

    assert!(
        !text.contains("## Relevant memory"),
        "no query, no retrieval:\n{text}"
    );
    assert!(text.contains("Hello again, quick question."), "{text}");
    assert!(b.token_count <= 1_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_sessions_small_talk_is_not_carried_into_the_next_bundle() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let subject = "friend:caroline";
    // Lines a summary once listed as pending actions on ordinary chat.
    let chat = [
        ("caroline", "Woohoo, congrats James! I'm so happy for you."),
        (
            "james",
            "Thanks! I'm gonna keep chasing after those dreams.",
        ),
        ("caroline", "Wow, looks awesome! Caroline, hope all's good!"),
        ("james", "I'll keep ya posted."),
        (
            "caroline",
            "I'll send you the photos from the lake trip tomorrow.",
        ),
        ("james", "Perfect, talk soon!"),
    ];
    let turns = chat
        .iter()
        .enumerate()
        .map(|(i, (who, text))| {
            let role = if *who == "caroline" {
                pb::Role::User
            } else {
                pb::Role::Assistant
            };
            turn_at(role, who, text, MAY_8 + 60 * i as i64)
        })
        .collect();
    closed_session(&mut c, "chat-1", subject, turns).await;
    session(&mut c, "chat-2", subject).await;
    let b = query_bundle(&mut c, NS, "chat-2", 2_000, "").await;
    let text = &b.rendered_text;
    assert!(
        text.contains("I'll send you the photos from the lake trip tomorrow"),
        "{text}"
    );
    for junk in [
        "keep ya posted",
        "chasing after those dreams",
        "Woohoo",
        "hope all's good",
    ] {
        assert!(
            !text.contains(junk),
            "{junk:?} was carried into the next session:\n{text}"
        );
    }
    server.stop().await;
}
