//! Model-backed summaries end to end through gRPC, against a scripted
//! OpenAI-compatible server on 127.0.0.1 (real HTTP; a hosted model cannot
//! run here). Each path: a valid answer; an invented order id (refused by
//! validation, retried with the violations, then accepted); malformed JSON
//! (asked again, then the rules' summary as the fallback); an invented
//! placeholder; 429 with Retry-After and 500 (retried); a server that
//! hangs (fallback, while appends and bundles keep working); a server
//! without JSON-schema support; a namespace the model does not cover. And
//! no request body ever holds the email or phone number of the turns.

mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::*;
use mnemo::config::{ModelConfig, SummarizerKind};
use mnemo::pb;
use serde_json::{json, Value};

/// One scripted answer.
#[derive(Clone)]
enum Answer {
    /// A completion whose message content is this JSON.
    Items(Value),
    /// A completion whose content is this text.
    Text(&'static str),
    /// An HTTP status, with `Retry-After` seconds when given.
    Status(u16, Option<u64>),
    /// No answer for this long.
    Hang(Duration),
    /// 400 naming response_format (a server without JSON-schema support).
    NoSchema,
}

#[derive(Clone, Default)]
struct Script {
    answers: Arc<Mutex<VecDeque<Answer>>>,
    bodies: Arc<Mutex<Vec<Value>>>,
}

async fn complete(State(s): State<Script>, _h: HeaderMap, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).expect("a JSON request");
    s.bodies.lock().unwrap().push(body);
    let next = s.answers.lock().unwrap().pop_front();
    let content = match next {
        None => return (StatusCode::INTERNAL_SERVER_ERROR, "script exhausted").into_response(),
        Some(Answer::Items(v)) => v.to_string(),
        Some(Answer::Text(t)) => t.to_owned(),
        Some(Answer::Status(code, after)) => {
            let mut r = (StatusCode::from_u16(code).unwrap(), "try later").into_response();
            if let Some(a) = after {
                r.headers_mut()
                    .insert("retry-after", a.to_string().parse().unwrap());
            }
            return r;
        }
        Some(Answer::Hang(d)) => {
            tokio::time::sleep(d).await;
            return (StatusCode::INTERNAL_SERVER_ERROR, "late").into_response();
        }
        Some(Answer::NoSchema) => {
            return (
                StatusCode::BAD_REQUEST,
                r#"{"error": "response_format json_schema is not supported"}"#,
            )
                .into_response()
        }
    };
    let reply = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 321, "completion_tokens": 54, "total_tokens": 375},
    });
    ([("content-type", "application/json")], reply.to_string()).into_response()
}

/// Starts the scripted server; its base URL.
async fn scripted(script: &Script) -> String {
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

async fn daemon(
    url: &str,
    tweak: impl FnOnce(&mut ModelConfig),
) -> (TestServer, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    config.model = ModelConfig {
        summarizer: SummarizerKind::Model,
        url: url.to_owned(),
        name: "scripted".into(),
        timeout_secs: 2,
        retry_budget_secs: 6,
        ..ModelConfig::default()
    };
    tweak(&mut config.model);
    (TestServer::start_with(config).await, tmp)
}

const EMAIL: &str = "jane.doe@example.com";
const PHONE: &str = "+1 415-555-0132";
const CARD: &str = "4111 1111 1111 1111";

fn chat() -> Vec<pb::NewTurn> {
    vec![
        turn(
            pb::Role::User,
            "cust-1",
            &format!(
                "I was charged twice for order ORD-7731 on my card {CARD}. Reach me at {EMAIL} or {PHONE}."
            ),
        ),
        turn(
            pb::Role::Assistant,
            "agent-a",
            "I see two charges of $84.50 on ORD-7731. I'll refund the duplicate charge.",
        ),
    ]
}

/// A faithful answer for [`chat`].
fn good() -> Value {
    json!({
        "user_intent": "charged twice for order ORD-7731",
        "user_intent_turn": 1,
        "decisions": [],
        "pending_actions": [{"action": "refund the duplicate charge", "owner": "agent-a", "deadline": "", "turns": [2]}],
        "open_questions": [],
        "key_facts": [{"fact": "two charges of $84.50 on ORD-7731", "stated_by": "agent-a", "turns": [2]}],
        "conflicts": [],
        "prose": "The customer was charged twice for order ORD-7731. agent-a will refund the duplicate charge."
    })
}

async fn summarize(c: &mut MemoryClient, ns: &str) -> pb::SessionSummary {
    c.summarize(pb::SummarizeRequest {
        namespace: ns.into(),
        session_id: "s".into(),
        wait: true,
    })
    .await
    .expect("summarize")
    .into_inner()
    .summary
    .expect("a stored summary")
}

async fn latest_audit(c: &mut MemoryClient, ns: &str) -> pb::AuditRecord {
    common::audit_log(c, ns, "s")
        .await
        .pop()
        .expect("an audit record")
}

type MemoryClient =
    mnemo::pb::memory_service_client::MemoryServiceClient<tonic::transport::Channel>;

async fn session_with_chat(c: &mut MemoryClient, ns: &str) {
    create_session(c, ns, "s").await;
    c.append_turns(append_req(ns, "s", chat())).await.unwrap();
}

/// A scripted server answering `answers` in order, a daemon using it, and
/// session `s` of namespace `ns` holding [`chat`].
struct Setup {
    script: Script,
    server: TestServer,
    c: MemoryClient,
    _tmp: tempfile::TempDir,
}

async fn setup(answers: impl IntoIterator<Item = Answer>) -> Setup {
    let script = Script::default();
    script.answers.lock().unwrap().extend(answers);
    let url = scripted(&script).await;
    let (server, _tmp) = daemon(&url, |_| {}).await;
    let mut c = server.client().await;
    session_with_chat(&mut c, "ns").await;
    Setup {
        script,
        server,
        c,
        _tmp,
    }
}

fn no_personal_data(script: &Script) {
    for body in script.bodies.lock().unwrap().iter() {
        let text = body.to_string();
        assert!(
            !text.contains(EMAIL) && !text.contains("415-555-0132"),
            "sent: {text}"
        );
        assert!(text.contains("⟦EMAIL_1⟧"), "no placeholder in {text}");
        assert_eq!(body["temperature"], 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_answer_is_stored_with_the_tool_log_from_the_turns() {
    let script = Script::default();
    script
        .answers
        .lock()
        .unwrap()
        .push_back(Answer::Items(good()));
    let url = scripted(&script).await;
    let (server, _tmp) = daemon(&url, |_| {}).await;
    let mut c = server.client().await;
    session_with_chat(&mut c, "ns").await;
    let s = summarize(&mut c, "ns").await;
    assert_eq!(s.pending_actions.len(), 1);
    assert_eq!(s.pending_actions[0].action, "refund the duplicate charge");
    assert_eq!(s.pending_actions[0].owner, "agent-a");
    assert!(s.prose.starts_with("The customer was charged twice"));
    let audit = latest_audit(&mut c, "ns").await;
    assert_eq!(audit.summarizer, "model:scripted");
    assert!(audit.validation_passed);
    // The call's figures as the server reported them.
    assert!(
        audit.health_flags.iter().any(|f| f
            .starts_with("model call: prompt_tokens=321 completion_tokens=54 latency_ms=")
            && f.ends_with("retries=0 attempts=1")),
        "{:?}",
        audit.health_flags
    );
    // The schema went with the request; no personal data did.
    let bodies = script.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["response_format"]["type"], "json_schema");
    no_personal_data(&script);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invented_order_id_is_refused_then_retried_with_the_violation() {
    let mut invented = good();
    invented["key_facts"][0]["fact"] = json!("two charges of $84.50 on ORD-9999");
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([Answer::Items(invented), Answer::Items(good())]).await;
    let s = summarize(&mut c, "ns").await;
    assert!(s.key_facts.iter().all(|f| !f.fact.contains("ORD-9999")));
    let audit = latest_audit(&mut c, "ns").await;
    assert_eq!(audit.summarizer, "model:scripted");
    assert!(
        audit
            .health_flags
            .iter()
            .any(|f| f.contains("attempt 1") && f.contains("ORD-9999")),
        "{:?}",
        audit.health_flags
    );
    let bodies = script.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    let retry = bodies[1]["messages"][1]["content"].as_str().unwrap();
    assert!(
        retry.contains("refused because") && retry.contains("ORD-9999"),
        "{retry}"
    );
    no_personal_data(&script);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_answers_fall_back_to_the_rules() {
    let script = Script::default();
    script.answers.lock().unwrap().extend([
        Answer::Text("Sure! Here is the summary: it was about a refund."),
        Answer::Text("{not json"),
    ]);
    let url = scripted(&script).await;
    let (server, _tmp) = daemon(&url, |_| {}).await;
    let mut c = server.client().await;
    session_with_chat(&mut c, "ns").await;
    let s = summarize(&mut c, "ns").await;
    assert_eq!(s.covers_through_seq, 2);
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit.summarizer.starts_with("mnemo-rules/"),
        "{}",
        audit.summarizer
    );
    assert!(
        audit.summarizer.contains("fallback from model:scripted"),
        "{}",
        audit.summarizer
    );
    assert!(audit.validation_passed);
    // The second request said what was wrong with the first answer.
    let bodies = script.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[1]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("not the JSON object"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invented_placeholder_is_a_failure() {
    let mut invented = good();
    invented["key_facts"][0]["fact"] = json!("contact ⟦EMAIL_7⟧ about ORD-7731");
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([Answer::Items(invented), Answer::Items(good())]).await;
    let s = summarize(&mut c, "ns").await;
    assert!(s.key_facts.iter().all(|f| !f.fact.contains('⟦')));
    let bodies = script.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[1]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("⟦EMAIL_7⟧"));
    assert_eq!(
        latest_audit(&mut c, "ns").await.summarizer,
        "model:scripted"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_and_server_errors_are_retried() {
    let script = Script::default();
    script.answers.lock().unwrap().extend([
        Answer::Status(429, Some(1)),
        Answer::Status(500, None),
        Answer::Items(good()),
    ]);
    let url = scripted(&script).await;
    let (server, _tmp) = daemon(&url, |_| {}).await;
    let mut c = server.client().await;
    session_with_chat(&mut c, "ns").await;
    let started = Instant::now();
    summarize(&mut c, "ns").await;
    // Retry-After: 1 was honoured.
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(script.bodies.lock().unwrap().len(), 3);
    assert_eq!(
        latest_audit(&mut c, "ns").await.summarizer,
        "model:scripted"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_model_falls_back_and_never_blocks_appends_or_bundles() {
    let script = Script::default();
    script
        .answers
        .lock()
        .unwrap()
        .extend((0..5).map(|_| Answer::Hang(Duration::from_secs(30))));
    let url = scripted(&script).await;
    let (server, _tmp) = daemon(&url, |m| {
        m.timeout_secs = 1;
        m.retry_budget_secs = 3;
    })
    .await;
    let mut c = server.client().await;
    session_with_chat(&mut c, "ns").await;
    let mut waiting = c.clone();
    let summary = tokio::spawn(async move { summarize(&mut waiting, "ns").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Meanwhile: appends and bundles answer at once.
    let t = Instant::now();
    c.append_turns(append_req(
        "ns",
        "s",
        vec![user_turn("Any news on the refund?")],
    ))
    .await
    .unwrap();
    c.get_context_bundle(pb::GetContextBundleRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        budget_tokens: 1000,
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    let s = summary.await.unwrap();
    assert!(s.covers_through_seq >= 2);
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit.summarizer.contains("fallback from model:scripted"),
        "{}",
        audit.summarizer
    );
    assert!(
        audit.summarizer.contains("retry budget"),
        "{}",
        audit.summarizer
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_json_schema_gets_plain_json_and_other_namespaces_keep_the_rules() {
    let script = Script::default();
    script.answers.lock().unwrap().extend([
        Answer::NoSchema,
        Answer::Text(Box::leak(
            format!("```json\n{}\n```", good()).into_boxed_str(),
        )),
    ]);
    let url = scripted(&script).await;
    let (server, _tmp) = daemon(&url, |m| m.namespaces = vec!["support".into()]).await;
    let mut c = server.client().await;
    session_with_chat(&mut c, "support").await;
    summarize(&mut c, "support").await;
    assert_eq!(
        latest_audit(&mut c, "support").await.summarizer,
        "model:scripted"
    );
    let bodies = script.bodies.lock().unwrap().clone();
    assert_eq!(bodies[1]["response_format"]["type"], "json_object");

    // Another namespace: the rules, no call.
    session_with_chat(&mut c, "other").await;
    summarize(&mut c, "other").await;
    assert!(latest_audit(&mut c, "other")
        .await
        .summarizer
        .starts_with("mnemo-rules/"));
    assert_eq!(script.bodies.lock().unwrap().len(), 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_risk_sessions_model_summary_goes_to_review() {
    let script = Script::default();
    script
        .answers
        .lock()
        .unwrap()
        .push_back(Answer::Items(good()));
    let url = scripted(&script).await;
    let (server, _tmp) = daemon(&url, |_| {}).await;
    let mut c = server.client().await;
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        settings: Some(pb::SessionSettings {
            risk_level: pb::RiskLevel::High as i32,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    c.append_turns(append_req("ns", "s", chat())).await.unwrap();
    let s = summarize(&mut c, "ns").await;
    assert!(s.requires_human_review);
    let items = c
        .list_review_items(pb::ListReviewItemsRequest {
            namespace: "ns".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    assert_eq!(items.len(), 1);
    assert!(
        items[0]
            .items
            .iter()
            .any(|i| i.contains("refund the duplicate charge")),
        "{items:?}"
    );
    server.stop().await;
}

#[test]
fn the_model_settings_are_checked_at_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["serve", "--summarizer", "model", "--model-name", "x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--model-url"), "{err}");
}

/// Summary work queued while the model hangs is not lost across a restart:
/// the next daemon folds it with the model once it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_model_work_resumes_after_a_restart() {
    let hung = Script::default();
    hung.answers
        .lock()
        .unwrap()
        .extend((0..20).map(|_| Answer::Hang(Duration::from_secs(60))));
    let hung_url = scripted(&hung).await;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let model = |url: &str| ModelConfig {
        summarizer: SummarizerKind::Model,
        url: url.to_owned(),
        name: "scripted".into(),
        timeout_secs: 30,
        retry_budget_secs: 60,
        ..ModelConfig::default()
    };
    let mut config = config_for(&data);
    config.model = model(&hung_url);
    let first = TestServer::start_with(config).await;
    let mut c = first.client().await;
    create_session(&mut c, "ns", "s").await;
    let mut turns = chat();
    turns.extend((0..8).map(|i| user_turn(&format!("note {i} about ORD-7731"))));
    // Ten turns: the background worker starts a summary, which hangs.
    c.append_turns(append_req("ns", "s", turns)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while hung.bodies.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the worker never called the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.stop().await;

    let ok = Script::default();
    ok.answers
        .lock()
        .unwrap()
        .extend((0..3).map(|_| Answer::Items(good())));
    let ok_url = scripted(&ok).await;
    let mut config = config_for(&data);
    config.model = model(&ok_url);
    let second = TestServer::start_with(config).await;
    let mut c = second.client().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let summary = loop {
        let r = c
            .get_summary(pb::GetSummaryRequest {
                namespace: "ns".into(),
                session_id: "s".into(),
                ..Default::default()
            })
            .await;
        if let Ok(r) = r {
            break r.into_inner().summary.unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the queued summary was never written"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(summary.covers_through_seq, 10);
    assert_eq!(
        latest_audit(&mut c, "ns").await.summarizer,
        "model:scripted"
    );
    second.stop().await;
    drop(tmp);
}

/// Removing a summarized turn refolds at once with the rules: the call
/// never waits on the model (here, one that hangs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_turns_refold_never_waits_on_the_model() {
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([
        Answer::Items(good()),
        Answer::Hang(Duration::from_secs(30)),
        Answer::Hang(Duration::from_secs(30)),
    ])
    .await;
    summarize(&mut c, "ns").await;
    let started = Instant::now();
    let r = c
        .remove_last_turn(pb::RemoveLastTurnRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.refolded_summary_version, 2);
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit.summarizer.starts_with("mnemo-rules/"),
        "{}",
        audit.summarizer
    );
    assert_eq!(
        script.bodies.lock().unwrap().len(),
        1,
        "only the first summary called the model"
    );
    server.stop().await;
}
