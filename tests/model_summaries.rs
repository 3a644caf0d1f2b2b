//! Model-backed summaries end to end through gRPC, against a scripted
//! OpenAI-compatible server on 127.0.0.1 (real HTTP), for what a real
//! server cannot be made to do on cue (tests/model_real.rs runs a real
//! one). Each path: a valid answer; an invented order id or turn (refused
//! by validation, retried with the violations); malformed JSON (asked
//! again, then the rules' summary); an invented placeholder; an empty
//! answer (a refusal); an answer that leaves out what the rules found
//! (merged: the rules are the floor); 429 with Retry-After and 503
//! (retried once each, never more); 500 with and without a message naming
//! response_format (a capability answer, negotiated and remembered, or a
//! failure with the server's text); a cut-off answer (half the turns,
//! then the fallback); a hang; nothing listening; an unlisted model name;
//! instructions without a system role; a call longer than the daemon's
//! request limit; the CLI's audit, writer and broken pipe. And no request
//! body ever holds the email or phone number of the turns.

mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
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
    /// A completion with this JSON after a wait.
    Slow(Duration, Value),
    /// A completion cut off at `max_tokens` (`finish_reason: length`).
    CutOff,
    /// An HTTP status with a body, and `Retry-After` seconds when given.
    Status(u16, &'static str, Option<u64>),
    /// No answer for this long.
    Hang(Duration),
    /// 400 naming response_format (a server without JSON-schema support).
    NoSchema,
}

#[derive(Clone, Default)]
struct Script {
    answers: Arc<Mutex<VecDeque<Answer>>>,
    bodies: Arc<Mutex<Vec<Value>>>,
    /// What `GET /v1/models` lists (default: `scripted`).
    models: Arc<Mutex<Option<Vec<String>>>>,
    /// Hanging answers whose request was dropped by the client before the
    /// hang ended (the connection closed: the server can stop).
    abandoned: Arc<std::sync::atomic::AtomicUsize>,
}

/// Counts a hanging answer as abandoned when dropped before it is disarmed.
struct Abandoned(Option<Arc<std::sync::atomic::AtomicUsize>>);

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(n) = self.0.take() {
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

impl Script {
    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

async fn models(State(s): State<Script>) -> Response {
    let names = s
        .models
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_else(|| vec!["scripted".into()]);
    let data: Vec<Value> = names
        .iter()
        .map(|n| json!({"id": n, "object": "model"}))
        .collect();
    (
        [("content-type", "application/json")],
        json!({"object": "list", "data": data}).to_string(),
    )
        .into_response()
}

fn completion(content: String, finish: &str) -> Response {
    let reply = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 321, "completion_tokens": 54, "total_tokens": 375},
    });
    ([("content-type", "application/json")], reply.to_string()).into_response()
}

async fn complete(State(s): State<Script>, _h: HeaderMap, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).expect("a JSON request");
    s.bodies.lock().unwrap().push(body);
    let next = s.answers.lock().unwrap().pop_front();
    let content = match next {
        None => return (StatusCode::INTERNAL_SERVER_ERROR, "script exhausted").into_response(),
        Some(Answer::Items(v)) => v.to_string(),
        Some(Answer::Text(t)) => t.to_owned(),
        Some(Answer::Slow(d, v)) => {
            tokio::time::sleep(d).await;
            v.to_string()
        }
        Some(Answer::CutOff) => {
            return completion(
                r#"{"user_intent": "charged twice for order ORD-77"#.into(),
                "length",
            )
        }
        Some(Answer::Status(code, text, after)) => {
            let mut r = (StatusCode::from_u16(code).unwrap(), text).into_response();
            if let Some(a) = after {
                r.headers_mut()
                    .insert("retry-after", a.to_string().parse().unwrap());
            }
            return r;
        }
        Some(Answer::Hang(d)) => {
            let mut guard = Abandoned(Some(s.abandoned.clone()));
            tokio::time::sleep(d).await;
            guard.0 = None;
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
    completion(content, "stop")
}

/// Starts the scripted server; its base URL.
async fn scripted(script: &Script) -> String {
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(complete))
        .route("/v1/models", get(models))
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
        audit.health_flags.iter().any(|f| f.starts_with(
            "model call: form=json_schema status=200 finish=stop prompt_tokens=321 completion_tokens=54 max_tokens="
        )),
        "{:?}",
        audit.health_flags
    );
    // The schema went with the request, bounded; no personal data did.
    let bodies = script.bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["response_format"]["type"], "json_schema");
    let schema = &bodies[0]["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["properties"]["decisions"]["maxItems"], 100);
    assert_eq!(schema["properties"]["pending_actions"]["maxItems"], 200);
    assert_eq!(
        schema["properties"]["key_facts"]["items"]["properties"]["turns"]["maxItems"],
        16
    );
    // max_tokens sized to the work, at most the configured cap.
    let max_tokens = bodies[0]["max_tokens"].as_u64().unwrap();
    assert!((100..=2048).contains(&max_tokens), "{max_tokens}");
    // The instructions in a system message; the schema not in the prompt
    // (the server constrains to it).
    assert_eq!(bodies[0]["messages"][0]["role"], "system");
    assert!(!bodies[0]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("Answer with one JSON object"));
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
async fn throttling_and_unavailability_are_retried_once_each() {
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([
        Answer::Status(429, "slow down", Some(1)),
        Answer::Status(503, "loading model", None),
        Answer::Items(good()),
    ])
    .await;
    let started = Instant::now();
    summarize(&mut c, "ns").await;
    // Retry-After: 1 was honoured.
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(script.bodies().len(), 3);
    let audit = latest_audit(&mut c, "ns").await;
    assert_eq!(audit.summarizer, "model:scripted");
    // Each attempt in the audit with the server's own words.
    let calls: Vec<&String> = audit
        .health_flags
        .iter()
        .filter(|f| f.starts_with("model call:"))
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls[0].contains("status=429") && calls[0].contains("slow down"));
    assert!(calls[1].contains("status=503") && calls[1].contains("loading model"));
    server.stop().await;
}

/// The same transient failure twice is not retried a second time: no
/// retry storm, the rules' summary at once, the reason in the flags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_throttle_is_retried_once_then_falls_back() {
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([
        Answer::Status(429, "quota exceeded", None),
        Answer::Status(429, "quota exceeded", None),
        Answer::Items(good()),
    ])
    .await;
    summarize(&mut c, "ns").await;
    assert_eq!(script.bodies().len(), 2, "one retry, not a storm");
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit.summarizer.starts_with("mnemo-rules/"),
        "{}",
        audit.summarizer
    );
    assert!(
        audit
            .health_flags
            .iter()
            .any(|f| f.starts_with("model_fallback:") && f.contains("quota exceeded")),
        "{:?}",
        audit.health_flags
    );
    server.stop().await;
}

/// A 500 that is not about the request's form is the server's failure:
/// no retry, its text in the audit, the rules' summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_is_not_retried_and_its_text_is_kept() {
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([
        Answer::Status(500, "llama_decode failed: KV cache is full", None),
        Answer::Items(good()),
    ])
    .await;
    summarize(&mut c, "ns").await;
    assert_eq!(script.bodies().len(), 1);
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit.summarizer.contains("KV cache is full"),
        "{}",
        audit.summarizer
    );
    assert!(
        audit
            .health_flags
            .iter()
            .any(|f| f.starts_with("model call:")
                && f.contains("status=500")
                && f.contains("KV cache is full")),
        "{:?}",
        audit.health_flags
    );
    server.stop().await;
}

/// llama-cpp-python's answer to a json_schema response_format is an HTTP
/// 500 whose body names response_format: the form is stepped down at
/// once (json_object with the schema), and remembered for later calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_naming_response_format_is_negotiated_once_and_remembered() {
    const REFUSAL: &str = r#"{"detail":[{"type":"literal_error","loc":["body","response_format","type"],"msg":"Input should be 'text' or 'json_object'","input":"json_schema"}]}"#;
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([
        Answer::Status(500, REFUSAL, None),
        Answer::Items(good()),
        Answer::Items(good()),
    ])
    .await;
    summarize(&mut c, "ns").await;
    let audit = latest_audit(&mut c, "ns").await;
    assert_eq!(audit.summarizer, "model:scripted");
    assert!(
        audit.health_flags[..2]
            .iter()
            .zip(["form=json_schema status=500", "form=json_object status=200"])
            .all(|(f, want)| f.contains(want)),
        "{:?}",
        audit.health_flags
    );
    // A second summary starts in the learnt form.
    c.append_turns(append_req(
        "ns",
        "s",
        vec![user_turn("Thanks, please confirm the refund of ORD-7731.")],
    ))
    .await
    .unwrap();
    summarize(&mut c, "ns").await;
    let bodies = script.bodies();
    assert_eq!(bodies.len(), 3);
    for b in &bodies[1..] {
        assert_eq!(b["response_format"]["type"], "json_object");
        // The schema goes with it, and in the prompt.
        assert!(b["response_format"]["schema"]["properties"]["decisions"].is_object());
        assert!(b["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("Answer with one JSON object"));
    }
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
        audit.summarizer.contains("no answer within")
            && audit.summarizer.contains("again after one retry"),
        "{}",
        audit.summarizer
    );
    // Both abandoned calls were cancelled: their connections closed long
    // before the server's 30 s hang would have ended.
    let deadline = Instant::now() + Duration::from_secs(5);
    while script.abandoned.load(std::sync::atomic::Ordering::SeqCst) < 2 {
        assert!(
            Instant::now() < deadline,
            "an abandoned call was not cancelled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    assert!(bodies[1]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("Answer with one JSON object"));

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

/// A faithful answer that leaves out the pending action the rules found.
fn forgetful() -> Value {
    let mut v = good();
    v["pending_actions"] = json!([]);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_rules_found_is_the_floor_of_a_model_summary() {
    // The rules alone, for the count to compare with.
    let rules_only = {
        let tmp = tempfile::tempdir().unwrap();
        let server = TestServer::start_with(config_for(&tmp.path().join("data"))).await;
        let mut c = server.client().await;
        session_with_chat(&mut c, "ns").await;
        let s = summarize(&mut c, "ns").await;
        server.stop().await;
        s
    };
    assert!(
        !rules_only.pending_actions.is_empty(),
        "the case needs the rules to find the refund"
    );
    let Setup {
        server,
        mut c,
        _tmp,
        ..
    } = setup([Answer::Items(forgetful())]).await;
    let s = summarize(&mut c, "ns").await;
    assert_eq!(s.pending_actions.len(), rules_only.pending_actions.len());
    assert_eq!(
        s.pending_actions[0].action,
        rules_only.pending_actions[0].action
    );
    // The model's own prose and facts stay.
    assert!(s.prose.starts_with("The customer was charged twice"));
    // The tool log and errors are the rules' too.
    assert_eq!(s.tool_calls.len(), rules_only.tool_calls.len());
    let audit = latest_audit(&mut c, "ns").await;
    assert_eq!(audit.summarizer, "model:scripted+rules");
    assert!(
        audit
            .health_flags
            .iter()
            .any(|f| f.starts_with("model_floor: 1 pending_actions")),
        "{:?}",
        audit.health_flags
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_answer_is_a_refusal_named_in_the_health_flags() {
    let empty = json!({
        "user_intent": "", "user_intent_turn": 0, "decisions": [], "pending_actions": [],
        "open_questions": [], "key_facts": [], "conflicts": [], "prose": ""
    });
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([Answer::Items(empty.clone()), Answer::Items(empty)]).await;
    let s = summarize(&mut c, "ns").await;
    assert!(
        !s.pending_actions.is_empty(),
        "the rules' summary is stored"
    );
    let bodies = script.bodies();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[1]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("empty answer"));
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit.summarizer.contains("fallback from model:scripted"),
        "{}",
        audit.summarizer
    );
    assert!(
        audit
            .health_flags
            .iter()
            .any(|f| f.starts_with("model_fallback: empty answer")),
        "{:?}",
        audit.health_flags
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_answer_is_asked_for_fewer_turns_then_falls_back() {
    // Two turns cut off: each half alone; the first half cut off again
    // (one turn cannot be split): the rules' summary.
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([Answer::CutOff, Answer::CutOff]).await;
    summarize(&mut c, "ns").await;
    let bodies = script.bodies();
    assert_eq!(bodies.len(), 2);
    let second = bodies[1]["messages"][1]["content"].as_str().unwrap();
    assert!(
        second.contains("[#1]") && !second.contains("[#2]"),
        "{second}"
    );
    // Not a JSON-parse hint.
    assert!(!second.contains("EOF while parsing"), "{second}");
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit.summarizer.contains("cut off at max_tokens"),
        "{}",
        audit.summarizer
    );
    assert!(audit
        .health_flags
        .iter()
        .any(|f| f.starts_with("model_cut_off:")));
    assert!(audit
        .health_flags
        .iter()
        .any(|f| f.contains("finish=length")));

    // Halves that fit are folded one after the other.
    let Setup {
        script,
        server: server2,
        mut c,
        _tmp: _tmp2,
    } = setup([Answer::CutOff, Answer::Items(good()), Answer::Items(good())]).await;
    summarize(&mut c, "ns").await;
    assert_eq!(script.bodies().len(), 3);
    assert_eq!(
        latest_audit(&mut c, "ns").await.summarizer,
        "model:scripted"
    );
    server.stop().await;
    server2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invented_turn_is_refused_and_every_call_stays_in_the_audit() {
    let mut invented = good();
    invented["key_facts"][0]["turns"] = json!([9]);
    let Setup {
        script,
        server,
        mut c,
        _tmp,
    } = setup([Answer::Items(invented.clone()), Answer::Items(invented)]).await;
    let s = summarize(&mut c, "ns").await;
    assert!(s.key_facts.iter().all(|f| !f.evidence_seqs.contains(&9)));
    assert_eq!(script.bodies().len(), 2);
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit.summarizer.starts_with("mnemo-rules/"),
        "{}",
        audit.summarizer
    );
    let calls = audit
        .health_flags
        .iter()
        .filter(|f| f.starts_with("model call:"))
        .count();
    assert_eq!(calls, 2, "{:?}", audit.health_flags);
    assert!(audit
        .health_flags
        .iter()
        .any(|f| f.starts_with("model_fallback:") && f.contains("validation")));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_said_plainly() {
    // A port that was free a moment ago.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (server, _tmp) = daemon(&format!("http://127.0.0.1:{port}"), |_| {}).await;
    let mut c = server.client().await;
    session_with_chat(&mut c, "ns").await;
    summarize(&mut c, "ns").await;
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit.summarizer.contains("connection refused"),
        "{}",
        audit.summarizer
    );
    assert!(audit
        .health_flags
        .iter()
        .any(|f| f.starts_with("model call:") && f.contains("status=connection refused")));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlisted_model_and_a_template_without_system_role() {
    let script = Script::default();
    *script.models.lock().unwrap() = Some(vec!["smollm2-135m".into()]);
    script
        .answers
        .lock()
        .unwrap()
        .push_back(Answer::Items(good()));
    let url = scripted(&script).await;
    let (server, _tmp) = daemon(&url, |m| m.system_role = false).await;
    let mut c = server.client().await;
    session_with_chat(&mut c, "ns").await;
    // The start-up check runs in the background; give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    summarize(&mut c, "ns").await;
    let audit = latest_audit(&mut c, "ns").await;
    assert!(
        audit
            .health_flags
            .iter()
            .any(|f| f.starts_with("model_unlisted:") && f.contains("smollm2-135m")),
        "{:?}",
        audit.health_flags
    );
    let bodies = script.bodies();
    let messages = bodies[0]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], "user");
    assert!(messages[0]["content"]
        .as_str()
        .unwrap()
        .starts_with("You maintain the running summary"));
    server.stop().await;
}

/// A model call longer than the daemon's generic request limit: the
/// waiting Summarize gets the model's budget, and its summary, never
/// DEADLINE_EXCEEDED for work that then succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summarize_waits_as_long_as_the_model_budget_not_the_request_limit() {
    let script = Script::default();
    script
        .answers
        .lock()
        .unwrap()
        .push_back(Answer::Slow(Duration::from_millis(2500), good()));
    let url = scripted(&script).await;
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    config.limits.request_timeout_secs = 1;
    config.model = ModelConfig {
        summarizer: SummarizerKind::Model,
        url,
        name: "scripted".into(),
        timeout_secs: 5,
        retry_budget_secs: 5,
        ..ModelConfig::default()
    };
    let server = TestServer::start_with(config).await;
    let mut c = server.client().await;
    session_with_chat(&mut c, "ns").await;
    let s = summarize(&mut c, "ns").await;
    assert!(s.prose.starts_with("The customer was charged twice"));
    // Other methods keep the generic limit.
    server.stop().await;
}

/// The command line: `mnemo summary` names the writer, `mnemo audit`
/// shows every call, and a closed pipe ends a command quietly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_names_the_writer_shows_the_audit_and_ends_quietly_on_a_closed_pipe() {
    let Setup {
        server,
        mut c,
        _tmp,
        ..
    } = setup([Answer::Items(forgetful())]).await;
    summarize(&mut c, "ns").await;
    let addr = server.url();
    let run = move |args: &'static [&'static str], close_stdout: bool| {
        let addr = addr.clone();
        tokio::task::spawn_blocking(move || {
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"));
            cmd.args(args).env("MNEMO_ADDR", &addr);
            if close_stdout {
                cmd.stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                let mut child = cmd.spawn().unwrap();
                drop(child.stdout.take());
                child.wait_with_output().unwrap()
            } else {
                cmd.output().unwrap()
            }
        })
    };
    let out = run(&["summary", "-n", "ns", "-s", "s", "--json"], false)
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["written_by"], "model:scripted+rules");
    let out = run(&["summary", "-n", "ns", "-s", "s"], false)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("_Written by model:scripted+rules._"));
    let out = run(&["audit", "-n", "ns", "-s", "s"], false).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("written by: model:scripted+rules"), "{text}");
    assert!(
        text.contains("model call: form=json_schema status=200"),
        "{text}"
    );
    assert!(text.contains("model_floor:"), "{text}");
    let out = run(&["audit", "-n", "ns", "-s", "s", "--json"], false)
        .await
        .unwrap();
    let first: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(first["summary_version"], 1);
    // A reader that closed its end at once.
    for args in [
        &["audit", "-n", "ns", "-s", "s"][..],
        &["turns", "-n", "ns", "-s", "s"][..],
    ] {
        let args: &'static [&'static str] = Box::leak(args.to_vec().into_boxed_slice());
        let out = run(args, true).await.unwrap();
        assert!(out.status.success(), "{args:?}: {:?}", out.status);
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    server.stop().await;
}

/// The target "no model summary with fewer evidenced items than the rules'
/// fold of the same turns", measured over every dev conversation (the
/// ELITR dev meetings and the BFCL memory dev sessions) with a model that
/// answers every chunk with prose only (the forgetful extreme): each
/// summary keeps every decision, open action and open question the rules
/// found. Folds through the summarizer itself (the pipeline's validator is
/// covered above), on a scripted server.
#[test]
fn the_rules_floor_holds_over_every_dev_conversation() {
    use mnemo::llm::ModelSummarizer;
    use mnemo::model::{now_nanos, ActionStatus, Role, SessionSummary, Trigger, Turn};
    use mnemo::summarize::{RuleBased, Summarizer, SummaryContext};

    #[derive(serde::Deserialize)]
    struct Meetings {
        meetings: Vec<Meeting>,
    }
    #[derive(serde::Deserialize)]
    struct Meeting {
        id: String,
        turns: Vec<Said>,
    }
    #[derive(serde::Deserialize)]
    struct Said {
        speaker: String,
        content: String,
        #[serde(default)]
        role: String,
    }
    #[derive(serde::Deserialize)]
    struct Memory {
        subjects: Vec<Subject>,
    }
    #[derive(serde::Deserialize)]
    struct Subject {
        sessions: Vec<Chat>,
    }
    #[derive(serde::Deserialize)]
    struct Chat {
        session_id: String,
        turns: Vec<Said>,
    }
    let read = |name: &str| {
        std::fs::read_to_string(format!(
            "{}/tests/fixtures/{name}/dev.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let meetings: Meetings = serde_json::from_str(&read("meetings_elitr")).unwrap();
    let memory: Memory = serde_json::from_str(&read("memory_bfcl")).unwrap();
    let mut conversations: Vec<(String, Vec<Said>)> = meetings
        .meetings
        .into_iter()
        .map(|m| (m.id, m.turns))
        .collect();
    conversations.extend(
        memory
            .subjects
            .into_iter()
            .flat_map(|s| s.sessions)
            .map(|c| (c.session_id, c.turns)),
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let script = Script::default();
    let prose = json!({
        "user_intent": "", "user_intent_turn": 0, "decisions": [], "pending_actions": [],
        "open_questions": [], "key_facts": [], "conflicts": [],
        "prose": "The participants went through the agenda and talked about the next steps."
    });
    script
        .answers
        .lock()
        .unwrap()
        .extend((0..10_000).map(|_| Answer::Items(prose.clone())));
    let url = rt.block_on(scripted(&script));
    let config = ModelConfig {
        summarizer: SummarizerKind::Model,
        url,
        name: "scripted".into(),
        ..ModelConfig::default()
    };
    let model = ModelSummarizer::new(&config, rt.handle().clone()).unwrap();
    let count = |s: &SessionSummary| {
        [
            s.decisions.len(),
            s.pending_actions
                .iter()
                .filter(|a| a.status != ActionStatus::Done)
                .count(),
            s.open_questions.len(),
        ]
    };
    let (mut kept, mut with_items) = (0, 0);
    for (id, said) in &conversations {
        let turns: Vec<Turn> = said
            .iter()
            .enumerate()
            .map(|(i, t)| Turn {
                seq: i as u64 + 1,
                role: if t.role == "assistant" {
                    Role::Assistant
                } else {
                    Role::User
                },
                speaker: t.speaker.clone(),
                content: t.content.clone(),
                client_time: None,
                server_time: 1_764_000_000_000_000_000 + i as i64 * 30_000_000_000,
                tool_call: None,
                metadata: Default::default(),
                token_count: 0,
            })
            .collect();
        let ctx = SummaryContext {
            namespace: "ns".into(),
            context_limit_tokens: 128_000,
            bundle_tokens: 0,
            trigger: Trigger::Requested,
            version: 1,
            now: now_nanos(),
            high_risk: false,
            wait_free: false,
        };
        let rules = RuleBased.fold(None, &turns, &ctx).unwrap().summary;
        let out = model.fold(None, &turns, &ctx).unwrap();
        assert!(
            out.label
                .as_deref()
                .is_some_and(|l| l.starts_with("model:scripted")),
            "{id}: {:?}",
            out.label
        );
        let (got, floor) = (count(&out.summary), count(&rules));
        assert!(
            got.iter().zip(floor).all(|(g, f)| *g >= f),
            "{id}: {got:?} below the rules' {floor:?}"
        );
        assert_eq!(out.summary.tool_calls.len(), rules.tool_calls.len());
        // The prose is the model's.
        assert!(out
            .summary
            .prose
            .starts_with("The participants went through"));
        kept += floor.iter().sum::<usize>();
        with_items += usize::from(floor.iter().any(|&n| n > 0));
    }
    println!(
        "{} dev conversations: 0 model summaries below the rules' floor; {kept} rules items in {with_items} of them kept in prose-only model summaries",
        conversations.len()
    );
    assert!(conversations.len() > 3 && kept > 0);
    drop(model);
    rt.shutdown_background();
}
