//! Model-backed summaries against a real OpenAI-compatible server with a
//! real model: llama.cpp's server through `llama-cpp-python`
//! (`python -m llama_cpp.server`) and small GGUF models from registry
//! packages (SmolLM2-135M-Instruct; Gemma 3 270M), end to end through the
//! daemon's gRPC API on a few short sessions: the form negotiated
//! (this server answers `json_schema` with a 500 naming response_format,
//! and takes `json_object` with a schema), output bounded by `max_tokens`,
//! the rules as the floor (never fewer evidenced items than the rules'
//! fold), the audit's contents, a Summarize that outlasts the daemon's
//! generic request limit, and the fallback when the server dies.
//!
//! Needs `MNEMO_LLAMA_PYTHON` (a python with `llama_cpp.server`, default
//! `python3`) and `MNEMO_LLAMA_MODELS` (`name=path.gguf[:system]`, comma
//! separated; `:nosystem` for chat templates without a system role).
//! Skipped with the reason printed when either is missing, unless
//! `MNEMO_REQUIRE_LLAMA=1` (CI), where that is a failure. Prints one
//! table row per summary (what was stored, why, tokens, seconds).

mod common;

use std::time::{Duration, Instant};

use common::llama::{models, LlamaServer, Model};
use common::*;
use mnemo::config::{ModelConfig, SummarizerKind};
use mnemo::pb;

type Client = mnemo::pb::memory_service_client::MemoryServiceClient<tonic::transport::Channel>;

/// Whether the environment lets these tests run; panics in CI when not.
fn available() -> Option<(String, Vec<Model>)> {
    match models() {
        Ok(m) => Some(m),
        Err(why) if std::env::var("MNEMO_REQUIRE_LLAMA").as_deref() == Ok("1") => {
            panic!("MNEMO_REQUIRE_LLAMA=1 but the real model server cannot run: {why}")
        }
        Err(why) => {
            println!("skipped: {why}");
            None
        }
    }
}

fn tool(name: &str, args: &str, result: &str, ok: bool, err: &str) -> pb::NewTurn {
    pb::NewTurn {
        role: pb::Role::Tool as i32,
        speaker: "booking-tool".into(),
        tool_call: Some(pb::ToolCall {
            tool_name: name.into(),
            arguments_json: args.into(),
            result: result.into(),
            status: if ok {
                pb::ToolCallStatus::Success
            } else {
                pb::ToolCallStatus::Failure
            } as i32,
            error_details: err.into(),
        }),
        ..Default::default()
    }
}

/// A short flight change: tool calls, a tool error, a decision, a pending
/// action with a deadline, an open question.
fn flight_change() -> Vec<pb::NewTurn> {
    use pb::Role::*;
    vec![
        turn(
            User,
            "maria",
            "I need to move my flight LH 401 from Frankfurt to New York to Friday 2026-12-11.",
        ),
        turn(Assistant, "agent", "Let me look up booking ABC123 for you."),
        tool(
            "get_booking",
            r#"{"ref":"ABC123"}"#,
            r#"{"flight":"LH 401","date":"2026-12-09"}"#,
            true,
            "",
        ),
        tool(
            "search_flights",
            r#"{"from":"FRA","to":"JFK","date":"2026-12-11"}"#,
            "",
            false,
            "upstream timeout from the fare service",
        ),
        turn(
            Assistant,
            "agent",
            "The fare search timed out. I will retry it and send you the options by 2026-12-08.",
        ),
        turn(
            User,
            "maria",
            "OK. We decided to keep the same seat class, economy.",
        ),
        turn(
            User,
            "maria",
            "Is the change fee refundable if the airline cancels?",
        ),
    ]
}

/// A short meeting: a decision, an action with its owner and deadline.
fn meeting() -> Vec<pb::NewTurn> {
    use pb::Role::*;
    vec![
        turn(
            User,
            "ana",
            "Let's settle the launch date for the mobile app.",
        ),
        turn(
            User,
            "bo",
            "Marketing needs two weeks after the store review.",
        ),
        turn(User, "ana", "Then we agreed: the launch is on 2027-01-15."),
        turn(User, "chen", "I will prepare the press kit by 2027-01-08."),
        turn(User, "bo", "Who owns the app store screenshots?"),
        turn(
            User,
            "ana",
            "Good question, we still need an owner for that.",
        ),
    ]
}

fn counts(s: &pb::SessionSummary) -> [usize; 3] {
    [
        s.decisions.len(),
        s.pending_actions.len(),
        s.open_questions.len(),
    ]
}

/// The rules' summary of `turns`, for the floor.
async fn rules_summary(turns: Vec<pb::NewTurn>) -> pb::SessionSummary {
    let tmp = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(config_for(&tmp.path().join("data"))).await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    c.append_turns(append_req("ns", "s", turns)).await.unwrap();
    let s = summarize(&mut c, "s").await.0;
    server.stop().await;
    s
}

async fn summarize(c: &mut Client, id: &str) -> (pb::SessionSummary, Duration) {
    let started = Instant::now();
    let s = c
        .summarize(pb::SummarizeRequest {
            namespace: "ns".into(),
            session_id: id.into(),
            wait: true,
        })
        .await
        .expect("Summarize (never DEADLINE_EXCEEDED for work that then succeeds)")
        .into_inner()
        .summary
        .expect("a stored summary");
    (s, started.elapsed())
}

/// The figure `key=` in a call record.
fn figure(flag: &str, key: &str) -> u64 {
    flag.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_models_summarize_within_bounds_above_the_rules_floor() {
    let Some((python, models)) = available() else {
        return;
    };
    let floors = [
        ("flight", rules_summary(flight_change()).await),
        ("meeting", rules_summary(meeting()).await),
    ];
    println!("| model | session | stored | why | calls | prompt tok | completion tok | seconds |");
    println!("|---|---|---|---|---|---|---|---|");
    for m in &models {
        let mut llama = LlamaServer::start(&python, m, 2).await;
        let tmp = tempfile::tempdir().unwrap();
        let mut config = config_for(&tmp.path().join("data"));
        // The generic request limit is far below one CPU model call: the
        // waiting Summarize must follow the model's budget instead.
        config.limits.request_timeout_secs = 5;
        config.model = ModelConfig {
            summarizer: SummarizerKind::Model,
            url: llama.url.clone(),
            name: m.name.clone(),
            // Small models on two shared cores: a few tokens a second
            // under a schema grammar, so short answers and long limits.
            timeout_secs: 120,
            retry_budget_secs: 240,
            max_output_tokens: 128,
            system_role: m.system_role,
            ..ModelConfig::default()
        };
        let server = TestServer::start_with(config).await;
        let mut c = server.client().await;
        // The first model gets both sessions, the others the flight one
        // (CI time).
        let sessions = if std::ptr::eq(m, &models[0]) { 2 } else { 1 };
        for (i, (id, floor)) in floors.iter().enumerate().take(sessions) {
            create_session(&mut c, "ns", id).await;
            let turns = if i == 0 { flight_change() } else { meeting() };
            c.append_turns(append_req("ns", id, turns)).await.unwrap();
            let (s, took) = summarize(&mut c, id).await;
            let audit = common::audit_log(&mut c, "ns", id).await.pop().unwrap();
            let calls: Vec<&String> = audit
                .health_flags
                .iter()
                .filter(|f| f.starts_with("model call:"))
                .collect();
            // The floor: never fewer evidenced items than the rules.
            let (got, want) = (counts(&s), counts(floor));
            assert!(
                got.iter().zip(want).all(|(g, w)| *g >= w),
                "{}: {id}: {got:?} < the rules' {want:?}; audit {:?}",
                m.name,
                audit
            );
            // The tool log and the tool error are always there.
            assert_eq!(s.tool_calls.len(), floor.tool_calls.len());
            assert_eq!(
                s.errors_and_anomalies.len(),
                floor.errors_and_anomalies.len()
            );
            // Every call is in the audit, bounded by max_tokens.
            assert!(!calls.is_empty(), "{:?}", audit.health_flags);
            for f in &calls {
                assert!(
                    figure(f, "completion_tokens=") <= figure(f, "max_tokens="),
                    "{f}"
                );
            }
            // This server answers json_schema with a 500 naming
            // response_format: the first call learns json_object, once.
            if i == 0 {
                assert!(
                    calls[0].contains("form=json_schema status=500"),
                    "{calls:?}"
                );
            }
            assert!(
                calls
                    .iter()
                    .skip(usize::from(i == 0))
                    .all(|f| f.contains("form=json_object")),
                "{calls:?}"
            );
            let why: Vec<&String> = audit
                .health_flags
                .iter()
                .filter(|f| {
                    f.starts_with("model_fallback")
                        || f.starts_with("model_floor")
                        || f.starts_with("model_answer_refused")
                        || f.starts_with("model_cut_off")
                })
                .collect();
            if audit.summarizer.starts_with("mnemo-rules/") {
                assert!(
                    why.iter().any(|f| f.starts_with("model_fallback")),
                    "a fallback names its reason: {:?}",
                    audit.health_flags
                );
            }
            let stored = if audit.summarizer.starts_with("mnemo-rules/") {
                "rules"
            } else if audit.summarizer.ends_with("+rules") {
                "merged"
            } else {
                "model"
            };
            let tokens = |key| calls.iter().map(|f| figure(f, key)).sum::<u64>();
            println!(
                "| {} | {id} | {stored} | {} | {} | {} | {} | {:.1} |",
                m.name,
                why.iter()
                    .map(|f| mnemo_clip(f))
                    .collect::<Vec<_>>()
                    .join("; "),
                calls.len(),
                tokens("prompt_tokens="),
                tokens("completion_tokens="),
                took.as_secs_f64()
            );
        }

        // A call mnemo gives up on stops the server generating: answers
        // are streamed, and the server checks the connection between
        // tokens. A second daemon on the same server with a 2 s call limit
        // and room for 2,048 tokens abandons its call (and its one retry)
        // long before the answer ends.
        if std::ptr::eq(m, &models[0]) {
            let tmp = tempfile::tempdir().unwrap();
            let mut config = config_for(&tmp.path().join("data"));
            config.model = ModelConfig {
                summarizer: SummarizerKind::Model,
                url: llama.url.clone(),
                name: m.name.clone(),
                timeout_secs: 2,
                retry_budget_secs: 6,
                max_output_tokens: 2048,
                system_role: m.system_role,
                ..ModelConfig::default()
            };
            let impatient = TestServer::start_with(config).await;
            let mut c2 = impatient.client().await;
            create_session(&mut c2, "ns", "abandoned").await;
            c2.append_turns(append_req("ns", "abandoned", meeting()))
                .await
                .unwrap();
            let (s, _) = summarize(&mut c2, "abandoned").await;
            assert!(s.covers_through_seq > 0);
            let audit = common::audit_log(&mut c2, "ns", "abandoned")
                .await
                .pop()
                .unwrap();
            assert!(audit.summarizer.starts_with("mnemo-rules/"), "{audit:?}");
            assert!(
                audit
                    .health_flags
                    .iter()
                    .any(|f| f.starts_with("model call:") && f.contains("status=timeout")),
                "{:?}",
                audit.health_flags
            );
            impatient.stop().await;
            // The server's own account: it saw the client go and left its
            // generation loop. It looks only between two tokens, so a
            // server still reading the prompt (a loaded machine) says so
            // once it reaches the first one: waited for, at most 90 s.
            let deadline = Instant::now() + Duration::from_secs(90);
            let log = loop {
                let log = std::fs::read_to_string(&llama.log).unwrap_or_default();
                if log.contains("Disconnected from client") || Instant::now() > deadline {
                    break log;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            };
            assert!(
                log.contains("Disconnected from client"),
                "the server kept generating after mnemo gave up; its log ends: {}",
                log.lines().rev().take(20).collect::<Vec<_>>().join(" | ")
            );
        }

        // The server dies: the next summary is the rules', the reason said.
        llama.kill();
        c.append_turns(append_req(
            "ns",
            "flight",
            vec![user_turn(
                "Please also add a vegetarian meal to booking ABC123.",
            )],
        ))
        .await
        .unwrap();
        let (s, _) = summarize(&mut c, "flight").await;
        assert!(s.covers_through_seq >= 8);
        let audit = common::audit_log(&mut c, "ns", "flight")
            .await
            .pop()
            .unwrap();
        assert!(
            audit.summarizer.contains("connection refused"),
            "{}",
            audit.summarizer
        );
        server.stop().await;
    }
}

fn mnemo_clip(s: &str) -> String {
    let s = s.replace('|', "/");
    match s.char_indices().nth(140) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}
