//! Property tests (proptest) over bad and strange input: every request
//! type of MemoryService, sent to the real daemon with arbitrary Unicode
//! (empty strings, control characters, right-to-left text, emoji, lines
//! past the limits), arbitrary numbers (seq ranges, page sizes, budgets)
//! and arbitrary enum values. Each call must end in a correct result or a
//! clear client error (never INTERNAL, UNKNOWN or DATA_LOSS), and a
//! witness session must be unchanged at the end. The summarizer and its
//! Markdown renderer get the same treatment in process.

mod common;

use std::collections::BTreeMap;

use common::{append_req, create_session, user_turn, TestServer};
use mnemo::model::{Role, ToolCall, ToolCallStatus, Turn};
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use mnemo::summarize::{self, SummaryContext};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tonic::transport::Channel;
use tonic::{Code, Status};

type Client = MemoryServiceClient<Channel>;

/// Strings that have broken parsers before: empty, control characters,
/// bidi overrides, emoji and combining marks, arbitrary Unicode, and
/// occasionally one line past the turn limit.
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => Just(String::new()),
        6 => any::<String>(),
        3 => "[\\x00-\\x1f\\x7f]{1,8}",
        3 => Just("مرحبا \u{202E}evil\u{202C} שלום".to_owned()),
        3 => Just("👩‍👩‍👧‍👦🔥 e\u{301}\u{301} \u{FEFF}zero\u{200B}width".to_owned()),
        2 => Just("I prefer email. My name is Ana. Actually, my name is Bea.".to_owned()),
        2 => "[a-z0-9_.-]{1,20}",
        1 => (100_000usize..1_200_000).prop_map(|n| "x".repeat(n)),
    ]
    .boxed()
}

/// Ids: mostly the seeded ones, else anything.
fn id(known: &'static str) -> BoxedStrategy<String> {
    prop_oneof![2 => Just(known.to_owned()), 3 => text()].boxed()
}

fn any_enum() -> impl Strategy<Value = i32> {
    prop_oneof![0..8i32, any::<i32>()]
}

/// Runs `cases` of `strategy` against the daemon; `call` returns Ok(())
/// when the outcome is acceptable, the offending status otherwise.
fn check<S, F, Fut>(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    name: &str,
    cases: u32,
    strategy: S,
    call: F,
) where
    S: Strategy,
    F: Fn(Client, S::Value) -> Fut,
    Fut: std::future::Future<Output = Result<(), Status>>,
{
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |value| {
            rt.block_on(call(client.clone(), value))
                .map_err(|s| TestCaseError::fail(format!("{name}: {:?} {}", s.code(), s.message())))
        })
        .unwrap_or_else(|e| panic!("{name}: {e}"));
}

/// An error a client can act on: the right kind of code and a message.
fn clear<T>(r: Result<T, Status>) -> Result<Option<T>, Status> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(s) => {
            let acceptable = matches!(
                s.code(),
                Code::InvalidArgument
                    | Code::NotFound
                    | Code::FailedPrecondition
                    | Code::AlreadyExists
                    | Code::Aborted
                    | Code::ResourceExhausted
            );
            if acceptable && !s.message().trim().is_empty() {
                Ok(None)
            } else {
                let call = std::any::type_name::<T>();
                Err(Status::new(s.code(), format!("{call}: {}", s.message())))
            }
        }
    }
}

fn new_turn() -> impl Strategy<Value = pb::NewTurn> {
    (
        any_enum(),
        text(),
        text(),
        proptest::option::of((text(), text(), text(), any_enum(), text())),
        proptest::collection::btree_map(text(), text(), 0..3),
    )
        .prop_map(|(role, speaker, content, tool, metadata)| pb::NewTurn {
            role,
            speaker,
            content,
            tool_call: tool.map(
                |(tool_name, arguments_json, result, status, error_details)| pb::ToolCall {
                    tool_name,
                    arguments_json,
                    result,
                    status,
                    error_details,
                },
            ),
            metadata: metadata.into_iter().collect(),
            ..Default::default()
        })
}

async fn snapshot(c: &mut Client) -> (Vec<pb::Turn>, Option<pb::SessionSummary>) {
    let turns = common::all_turns(c, "witness", "w").await;
    let summary = c
        .get_summary(pb::GetSummaryRequest {
            namespace: "witness".into(),
            session_id: "w".into(),
            ..Default::default()
        })
        .await
        .ok()
        .and_then(|r| r.into_inner().summary);
    (turns, summary)
}

#[test]
fn every_request_type_answers_strange_input_cleanly_and_damages_nothing() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(TestServer::start());
    let mut c = rt.block_on(server.client());
    let witness = rt.block_on(async {
        create_session(&mut c, "witness", "w").await;
        create_session(&mut c, "p", "target").await;
        let turns = (0..12)
            .map(|i| {
                user_turn(&format!(
                    "Witness turn {i}: I prefer tea. The invoice is INV-{i}."
                ))
            })
            .collect();
        c.append_turns(append_req("witness", "w", turns))
            .await
            .unwrap();
        c.summarize(pb::SummarizeRequest {
            namespace: "witness".into(),
            session_id: "w".into(),
            wait: true,
        })
        .await
        .unwrap();
        snapshot(&mut c).await
    });
    assert!(witness.1.is_some());
    let cases = 48;

    check(
        &rt,
        &c,
        "CreateSession",
        cases,
        (
            id("p"),
            text(),
            text(),
            text(),
            any::<u32>(),
            any::<u64>(),
            any::<u32>(),
            any_enum(),
        ),
        |mut c: Client, (ns, sid, subject, title, every, limit, idle, enc)| async move {
            let r = c
                .create_session(pb::CreateSessionRequest {
                    namespace: ns.clone(),
                    session_id: sid,
                    subject_id: subject,
                    title: title.clone(),
                    settings: Some(pb::SessionSettings {
                        summary_every_turns: every,
                        context_limit_tokens: limit,
                        idle_timeout_seconds: idle,
                        encoding: enc,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await;
            if let Some(r) = clear(r)? {
                let s = r.into_inner().session.expect("session");
                assert_eq!(s.title, title, "stored as sent");
                assert_eq!(s.namespace, ns);
            }
            Ok(())
        },
    );

    check(
        &rt,
        &c,
        "AppendTurns",
        cases,
        (
            id("p"),
            id("target"),
            proptest::collection::vec(new_turn(), 0..4),
            text(),
            prop_oneof![Just(0u64), any::<u64>()],
        ),
        |mut c: Client, (ns, sid, turns, key, expected)| async move {
            let r = c
                .append_turns(pb::AppendTurnsRequest {
                    namespace: ns.clone(),
                    session_id: sid.clone(),
                    turns: turns.clone(),
                    idempotency_key: key,
                    expected_next_seq: expected,
                    lease_epoch: 0,
                })
                .await;
            if let Some(r) = clear(r)? {
                let r = r.into_inner();
                // What was acknowledged reads back as sent.
                let stored = c
                    .list_turns(pb::ListTurnsRequest {
                        namespace: ns,
                        session_id: sid,
                        from_seq: r.first_seq,
                        to_seq: r.last_seq,
                        ..Default::default()
                    })
                    .await?
                    .into_inner()
                    .turns;
                if !r.replayed {
                    let sent: Vec<&str> = turns.iter().map(|t| t.content.as_str()).collect();
                    let got: Vec<&str> = stored.iter().map(|t| t.content.as_str()).collect();
                    assert_eq!(got, sent);
                }
            }
            Ok(())
        },
    );

    check(
        &rt,
        &c,
        "ListTurns/ListSessions/GetSummary/ListSummaries/GetAuditLog",
        cases,
        (
            id("p"),
            id("target"),
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
            text(),
            any_enum(),
        ),
        |mut c: Client, (ns, sid, a, b, size, token, state)| async move {
            clear(
                c.list_turns(pb::ListTurnsRequest {
                    namespace: ns.clone(),
                    session_id: sid.clone(),
                    from_seq: a,
                    to_seq: b,
                    page_size: size,
                    page_token: token.clone(),
                    newest: size,
                })
                .await,
            )?;
            clear(
                c.list_sessions(pb::ListSessionsRequest {
                    namespace: ns.clone(),
                    subject_id: sid.clone(),
                    state,
                    page_size: size,
                    page_token: token.clone(),
                })
                .await,
            )?;
            clear(
                c.get_summary(pb::GetSummaryRequest {
                    namespace: ns.clone(),
                    session_id: sid.clone(),
                    version: a,
                    format: state,
                })
                .await,
            )?;
            clear(
                c.list_summaries(pb::ListSummariesRequest {
                    namespace: ns.clone(),
                    session_id: sid.clone(),
                    page_size: size,
                    page_token: token.clone(),
                })
                .await,
            )?;
            clear(
                c.get_audit_log(pb::GetAuditLogRequest {
                    namespace: ns,
                    session_id: sid,
                    page_size: size,
                    page_token: token,
                })
                .await,
            )?;
            Ok(())
        },
    );

    check(
        &rt,
        &c,
        "GetContextBundle/Handoff",
        cases,
        (
            id("p"),
            id("target"),
            any::<u32>(),
            any::<u32>(),
            text(),
            any_enum(),
            text(),
        ),
        |mut c: Client, (ns, sid, budget, recent, query, enc, agent)| async move {
            let r = c
                .get_context_bundle(pb::GetContextBundleRequest {
                    namespace: ns.clone(),
                    session_id: sid.clone(),
                    budget_tokens: budget,
                    encoding: enc,
                    query,
                    agent_id: agent.clone(),
                    recent_interactions: recent,
                    skip_recall: false,
                })
                .await;
            if let Some(r) = clear(r)? {
                let b = r.into_inner().bundle.expect("bundle");
                assert!(
                    b.token_count <= b.budget_tokens,
                    "{} > {}",
                    b.token_count,
                    b.budget_tokens
                );
            }
            clear(
                c.handoff(pb::HandoffRequest {
                    namespace: ns,
                    session_id: sid,
                    from_agent: agent.clone(),
                    idempotency_key: agent.clone(),
                    to_agent: agent,
                    reason: String::new(),
                    lease_epoch: u64::from(recent),
                    budget_tokens: budget,
                })
                .await,
            )?;
            Ok(())
        },
    );

    check(
        &rt,
        &c,
        "PutFact/GetFact/ListFacts/DeleteFact/Search/ListEpisodes",
        cases,
        (
            id("p"),
            text(),
            text(),
            text(),
            proptest::collection::vec(text(), 0..3),
            any::<u32>(),
            proptest::collection::vec(any_enum(), 0..3),
        ),
        |mut c: Client, (ns, subject, key, words, tags, limit, kinds)| async move {
            let put = c
                .put_fact(pb::PutFactRequest {
                    namespace: ns.clone(),
                    subject_id: subject.clone(),
                    key: key.clone(),
                    text: words.clone(),
                    source: None,
                    tags: tags.clone(),
                })
                .await;
            if let Some(r) = clear(put)? {
                let fact = r.into_inner().fact.expect("fact");
                let got = c
                    .get_fact(pb::GetFactRequest {
                        namespace: ns.clone(),
                        fact_id: fact.fact_id.clone(),
                    })
                    .await?
                    .into_inner()
                    .fact
                    .expect("fact");
                assert_eq!(got.text, fact.text);
            }
            clear(
                c.get_fact(pb::GetFactRequest {
                    namespace: ns.clone(),
                    fact_id: key.clone(),
                })
                .await,
            )?;
            clear(
                c.list_facts(pb::ListFactsRequest {
                    namespace: ns.clone(),
                    subject_id: subject.clone(),
                    tag: tags.first().cloned().unwrap_or_default(),
                    page_size: limit,
                    ..Default::default()
                })
                .await,
            )?;
            clear(
                c.delete_fact(pb::DeleteFactRequest {
                    namespace: ns.clone(),
                    fact_id: words.clone(),
                })
                .await,
            )?;
            clear(
                c.search(pb::SearchRequest {
                    namespace: ns.clone(),
                    subject_id: subject.clone(),
                    session_id: key,
                    query: words,
                    kinds,
                    limit,
                })
                .await,
            )?;
            clear(
                c.list_episodes(pb::ListEpisodesRequest {
                    namespace: ns,
                    subject_id: subject,
                    page_size: limit,
                    ..Default::default()
                })
                .await,
            )?;
            Ok(())
        },
    );

    check(
        &rt,
        &c,
        "Summarize/Watch/Close/Delete/Review/UpdatePendingAction",
        cases,
        (id("p"), text(), any::<u64>(), any_enum(), text()),
        |mut c: Client, (ns, sid, n, status, words)| async move {
            clear(
                c.summarize(pb::SummarizeRequest {
                    namespace: ns.clone(),
                    session_id: sid.clone(),
                    wait: n % 2 == 0,
                })
                .await,
            )?;
            // A watch that opens is dropped at once.
            clear(
                c.watch_session(pb::WatchSessionRequest {
                    namespace: ns.clone(),
                    session_id: sid.clone(),
                    from_seq: n,
                    observer: false,
                })
                .await,
            )?;
            clear(
                c.resolve_review_item(pb::ResolveReviewItemRequest {
                    namespace: ns.clone(),
                    review_id: words.clone(),
                    status,
                    reviewer: words.clone(),
                    comment: words.clone(),
                })
                .await,
            )?;
            clear(
                c.update_pending_action(pb::UpdatePendingActionRequest {
                    namespace: ns.clone(),
                    r#ref: Some(pb::PendingActionRef {
                        session_id: sid.clone(),
                        action_seq: n,
                    }),
                    status,
                })
                .await,
            )?;
            // Destructive calls only ever name arbitrary ids, never the
            // seeded sessions.
            if sid != "target" && sid != "w" {
                clear(
                    c.close_session(pb::CloseSessionRequest {
                        namespace: ns.clone(),
                        session_id: sid.clone(),
                    })
                    .await,
                )?;
                clear(
                    c.delete_session(pb::DeleteSessionRequest {
                        namespace: ns,
                        session_id: sid,
                    })
                    .await,
                )?;
            }
            Ok(())
        },
    );

    // Nothing above touched the witness.
    let after = rt.block_on(snapshot(&mut c));
    assert_eq!(after, witness, "the witness session changed");
    rt.block_on(server.stop());
}

/// A turn's role, speaker, content and tool call (name, arguments,
/// result, success).
type TurnParts = (Role, String, String, Option<(String, String, String, bool)>);

fn domain_turn() -> impl Strategy<Value = TurnParts> {
    (
        prop_oneof![
            Just(Role::User),
            Just(Role::Assistant),
            Just(Role::System),
            Just(Role::Tool)
        ],
        text(),
        text(),
        proptest::option::of((text(), text(), text(), any::<bool>())),
    )
}

proptest! {
    #![proptest_config(Config { cases: 64, failure_persistence: None, ..Config::default() })]

    /// The summarizer never panics, every summary it writes passes the
    /// validator (each item cites turns that exist and say it), and the
    /// Markdown renderer takes whatever it produced.
    #[test]
    fn summaries_of_strange_turns_are_valid(turns in proptest::collection::vec(domain_turn(), 0..16)) {
        let turns: Vec<Turn> = turns
            .into_iter()
            .enumerate()
            .map(|(i, (role, speaker, content, tool))| Turn {
                seq: i as u64 + 1,
                role,
                speaker,
                content,
                client_time: None,
                server_time: 1_700_000_000_000_000_000 + i as i64,
                tool_call: tool.map(|(name, args, result, ok)| ToolCall {
                    tool_name: name,
                    arguments_json: args,
                    result,
                    status: if ok { ToolCallStatus::Success } else { ToolCallStatus::Failure },
                    error_details: String::new(),
                }),
                metadata: BTreeMap::new(),
                token_count: 1,
            })
            .collect();
        let ctx = SummaryContext {
            namespace: String::new(),
            context_limit_tokens: 8000,
            bundle_tokens: 100,
            trigger: mnemo::model::Trigger::Requested,
            version: 1,
            now: 1_800_000_000_000_000_000,
            high_risk: true,
            wait_free: false,
        };
        let s = summarize::summarize(&turns, &ctx);
        let cited: BTreeMap<u64, Turn> = turns.iter().map(|t| (t.seq, t.clone())).collect();
        let max_seq = turns.len() as u64;
        prop_assert!(
            summarize::validate::validate(&s, &cited, max_seq).is_ok(),
            "{:?}",
            summarize::validate::validate(&s, &cited, max_seq)
        );
        let md = summarize::render::markdown(&s);
        prop_assert!(!md.is_empty());
    }
}

/// Found by cargo-fuzz: a clause read alone ("…apr@`,!6…") dated an action
/// April 6 while the whole turn reads as April 2, and the validator (which
/// reads the whole turn) refused the summary. Now only a date the turn
/// states is kept.
#[test]
fn an_action_is_dated_as_its_whole_turn_reads() {
    let bytes = b",\x002\x00\x00\x00\x01\x00\x00\x00\x00+\x00!\x0c@,\x00\x04apr@`,!\x0c@,0@,\x002\x00\x00\x00\x00\x00\x01\x00\x00!\x0c@,\x00\x0capr@`,!6\xef,0";
    let turn = Turn {
        seq: 1,
        role: Role::User,
        speaker: "speaker-0".into(),
        content: String::from_utf8_lossy(bytes).into_owned(),
        client_time: None,
        server_time: 1_700_000_000_000_000_000,
        tool_call: None,
        metadata: BTreeMap::new(),
        token_count: 1,
    };
    let ctx = SummaryContext {
        namespace: String::new(),
        context_limit_tokens: 8000,
        bundle_tokens: 100,
        trigger: mnemo::model::Trigger::Requested,
        version: 1,
        now: 1_800_000_000_000_000_000,
        high_risk: true,
        wait_free: false,
    };
    let s = summarize::summarize(std::slice::from_ref(&turn), &ctx);
    let cited: BTreeMap<u64, Turn> = [(1, turn.clone())].into_iter().collect();
    assert_eq!(summarize::validate::validate(&s, &cited, 1), Ok(()));
    // Since issue 33 an empty "@" before a comma addresses nobody, so the
    // bytes alone give no action; the same bytes after a commitment still
    // make the clause-versus-turn dating this test is about.
    let mut committed = turn;
    committed.content = format!("I will pay {}", committed.content);
    let s = summarize::summarize(std::slice::from_ref(&committed), &ctx);
    assert!(!s.pending_actions.is_empty(), "{:?}", s.pending_actions);
    assert!(
        s.pending_actions.iter().any(|a| !a.deadline.is_empty()),
        "{:?}",
        s.pending_actions
    );
    let cited: BTreeMap<u64, Turn> = [(1, committed)].into_iter().collect();
    assert_eq!(summarize::validate::validate(&s, &cited, 1), Ok(()));
}
