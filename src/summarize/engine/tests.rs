//! Unit tests of the fold: folding in parts equals folding at once, and the
//! items each kind of turn yields.

use super::*;
use crate::model::ToolCall;
use crate::model::Trigger;
use crate::summarize::validate;

/// 2026-03-17 10:00 UTC, a Tuesday.
const T0: i64 = 1_773_741_600 * 1_000_000_000;

fn turn(seq: u64, role: Role, speaker: &str, content: &str) -> Turn {
    Turn {
        seq,
        role,
        speaker: speaker.to_string(),
        content: content.to_string(),
        client_time: None,
        server_time: T0 + i64::try_from(seq).unwrap_or(0) * 30_000_000_000,
        tool_call: None,
        metadata: BTreeMap::new(),
        token_count: 1,
    }
}

fn tool(seq: u64, name: &str, args: &str, result: &str, status: ToolCallStatus, err: &str) -> Turn {
    let mut t = turn(seq, Role::Tool, name, "");
    t.tool_call = Some(ToolCall {
        tool_name: name.to_string(),
        arguments_json: args.to_string(),
        result: result.to_string(),
        status,
        error_details: err.to_string(),
    });
    t
}

fn ctx(high_risk: bool) -> SummaryContext {
    SummaryContext {
        namespace: String::new(),
        context_limit_tokens: 1000,
        bundle_tokens: 300,
        trigger: Trigger::Requested,
        version: 3,
        now: T0 + 999,
        high_risk,
        wait_free: false,
    }
}

fn summarize(turns: &[Turn], high_risk: bool) -> SessionSummary {
    let mut s = FoldState::default();
    s.fold(turns);
    s.render(&ctx(high_risk))
}

fn check_valid(turns: &[Turn], s: &SessionSummary) {
    let cited: BTreeMap<u64, Turn> = validate::cited_seqs(s)
        .into_iter()
        .filter_map(|q| turns.iter().find(|t| t.seq == q).map(|t| (q, t.clone())))
        .collect();
    let max = turns.last().map_or(0, |t| t.seq);
    if let Err(e) = validate::validate(s, &cited, max) {
        panic!("summary not valid: {e:#?}\n{s:#?}");
    }
}

fn billing() -> Vec<Turn> {
    vec![
        turn(1, Role::User, "customer-42", "Hi, I have a billing problem"),
        turn(
            2,
            Role::Assistant,
            "agent-a",
            "I'm sorry to hear that. What's the issue?",
        ),
        turn(
            3,
            Role::User,
            "customer-42",
            "I was charged twice for order ORD-9921, $49.99 each.",
        ),
        turn(
            4,
            Role::Assistant,
            "agent-a",
            "I'll check the payment log and get back to you by Friday.",
        ),
        tool(
            5,
            "get_payment_log",
            r#"{"order":"ORD-9921"}"#,
            "Two charges of $49.99 on card 4242; receipt at https://pay.example.com/r/77",
            ToolCallStatus::Success,
            "",
        ),
        turn(
            6,
            Role::Assistant,
            "agent-a",
            "I found the duplicate charge. Shall I refund $49.99 to your card?",
        ),
        turn(
            7,
            Role::User,
            "customer-42",
            "Yes proceed with the refund, confirmed.",
        ),
        turn(
            8,
            Role::Assistant,
            "agent-a",
            "The refund has been processed. It will appear in 3-5 business days.",
        ),
        turn(
            9,
            Role::User,
            "customer-42",
            "Thank you, that solves my issue.",
        ),
    ]
}

#[test]
fn billing_dispute_end_to_end() {
    let turns = billing();
    let s = summarize(&turns, false);
    check_valid(&turns, &s);
    assert_eq!(s.user_intent, "I have a billing problem");
    assert_eq!(s.user_intent_seq, 1);
    assert_eq!(s.outcome, Outcome::Resolved, "{s:#?}");
    assert_eq!(s.participants.len(), 3);
    assert_eq!(s.participants[0].speaker, "customer-42");
    assert!(s
        .key_facts
        .iter()
        .any(|f| f.fact.contains("ORD-9921") && f.fact.contains("$49.99")));
    assert_eq!(s.pending_actions.len(), 1, "{:#?}", s.pending_actions);
    let a = &s.pending_actions[0];
    assert_eq!(a.owner, "agent-a");
    assert_eq!(a.deadline, "2026-03-20");
    assert_eq!(a.status, ActionStatus::Done);
    assert!(a.evidence_seqs.contains(&5));
    assert!(s.open_questions.is_empty(), "{:#?}", s.open_questions);
    assert_eq!(s.decisions.len(), 1);
    assert_eq!(s.tool_calls.len(), 1);
    assert_eq!(s.tool_calls[0].arguments_json, r#"{"order":"ORD-9921"}"#);
    assert!(s
        .artifacts
        .iter()
        .any(|x| x.artifact_id == "https://pay.example.com/r/77"));
    assert_eq!(s.context_health.budget_remaining_tokens, 700);
    assert_eq!(s.covers_through_seq, 9);
    assert_eq!(s.total_turns, 9);
    assert_eq!(s.duration_seconds, 240);
    assert_eq!(s.version, 3);
    assert_eq!(s.created_at, T0 + 999);
    assert!(s.truncated.is_empty());
    assert!(
        !s.prose.is_empty()
            && !s
                .prose
                .chars()
                .any(|c| c.is_ascii_digit() && !s.user_intent.contains(c))
    );
}

#[test]
fn high_risk_flags_irreversible_items() {
    let turns = billing();
    let s = summarize(&turns, true);
    assert!(s.requires_human_review);
    assert!(
        s.decisions.iter().any(|d| d.requires_human_review),
        "refund decision"
    );
    let low = summarize(&turns, false);
    assert!(!low.requires_human_review);
    assert!(low.decisions.iter().all(|d| !d.requires_human_review));
    let mut turns = billing();
    turns.push(tool(
        10,
        "issue_refund",
        "{}",
        "ok",
        ToolCallStatus::Success,
        "",
    ));
    let s = summarize(&turns, true);
    assert!(s
        .tool_calls
        .iter()
        .find(|t| t.seq == 10)
        .is_some_and(|t| t.requires_human_review));
}

#[test]
fn tool_failures_timeouts_and_stale_artifacts() {
    let turns = vec![
        turn(1, Role::User, "u", "Please build the report for Q3."),
        tool(
            2,
            "fetch_sales",
            r#"{"q":3}"#,
            "",
            ToolCallStatus::Timeout,
            "deadline exceeded after 30s",
        ),
        tool(
            3,
            "fetch_sales",
            r#"{"q":3}"#,
            "",
            ToolCallStatus::Failure,
            "HTTP 503 from sales-api",
        ),
        tool(
            4,
            "write_file",
            r#"{"path":"out/q3.csv"}"#,
            "wrote out/q3.csv",
            ToolCallStatus::Success,
            "",
        ),
        tool(
            5,
            "write_file",
            r#"{"path":"out/q3.csv"}"#,
            "wrote out/q3.csv (v2)",
            ToolCallStatus::Success,
            "",
        ),
    ];
    let s = summarize(&turns, false);
    check_valid(&turns, &s);
    assert_eq!(
        s.errors_and_anomalies.len(),
        2,
        "{:#?}",
        s.errors_and_anomalies
    );
    assert_eq!(s.errors_and_anomalies[0].severity, Severity::Degraded);
    assert_eq!(s.errors_and_anomalies[1].severity, Severity::Blocking);
    assert!(s.errors_and_anomalies[1]
        .description
        .contains("HTTP 503 from sales-api"));
    assert_eq!(s.tool_calls[1].error_details, "HTTP 503 from sales-api");
    assert_eq!(s.artifacts.len(), 2);
    assert_eq!(s.artifacts[0].expiry_seq, 5);
    assert_eq!(s.artifacts[1].expiry_seq, 0);
    assert_eq!(
        s.context_health.stale_artifacts,
        vec!["out/q3.csv".to_string()]
    );

    // A later success of the tool downgrades the blocking failure.
    let mut more = turns.clone();
    more.push(tool(
        6,
        "fetch_sales",
        r#"{"q":3}"#,
        "rows: 120",
        ToolCallStatus::Success,
        "",
    ));
    let s = summarize(&more, false);
    assert!(s
        .errors_and_anomalies
        .iter()
        .all(|a| a.severity == Severity::Degraded));
}

#[test]
fn result_summary_is_bounded_on_char_boundary() {
    let long = "é".repeat(300);
    let turns = vec![tool(1, "t", "{}", &long, ToolCallStatus::Success, "")];
    let s = summarize(&turns, false);
    assert!(s.tool_calls[0].result_summary.chars().count() <= MAX_RESULT_SUMMARY_CHARS);
}

#[test]
fn meeting_owners_deadlines_decisions_and_reversal() {
    let turns = vec![
        turn(1, Role::User, "alice", "Good morning team."),
        turn(2, Role::User, "bob", "Morning! Let's plan the launch."),
        turn(
            3,
            Role::User,
            "alice",
            "We decided to use Postgres because it is cheaper to run.",
        ),
        turn(
            4,
            Role::User,
            "carol",
            "Actually, let's go with MySQL instead.",
        ),
        turn(
            5,
            Role::User,
            "alice",
            "Bob, can you send the deck by Friday? It's urgent.",
        ),
        turn(6, Role::User, "bob", "Sure, will do."),
        turn(
            7,
            Role::User,
            "carol",
            "I'll draft the announcement next Monday.",
        ),
        turn(8, Role::User, "alice", "When is the launch date?"),
    ];
    let s = summarize(&turns, false);
    check_valid(&turns, &s);
    assert_eq!(s.decisions.len(), 1, "{s:#?}");
    assert!(s.decisions[0].decision.contains("MySQL"));
    assert_eq!(s.unresolved_conflicts.len(), 1);
    assert_eq!(s.unresolved_conflicts[0].conflicting_seqs, vec![3, 4]);
    let deck = s
        .pending_actions
        .iter()
        .find(|a| a.action.contains("deck"))
        .expect("deck action");
    assert_eq!(deck.owner, "bob");
    assert_eq!(deck.deadline, "2026-03-20");
    assert_eq!(deck.priority, Priority::High);
    // "Will do" acknowledges (still PENDING, cited); "On it" would start it.
    assert_eq!(deck.status, ActionStatus::Pending);
    assert_eq!(deck.evidence_seqs, vec![5, 6]);
    let draft = s
        .pending_actions
        .iter()
        .find(|a| a.action.contains("draft"))
        .expect("draft");
    assert_eq!(draft.owner, "carol");
    assert_eq!(draft.deadline, "2026-03-23");
    assert_eq!(s.open_questions.len(), 1);
    assert_eq!(s.open_questions[0].asked_by, "alice");

    // Alice agrees with the reversal: the conflict is settled.
    let mut more = turns[..4].to_vec();
    more.push(turn(5, Role::User, "alice", "Agreed."));
    let s = summarize(&more, false);
    assert!(s.unresolved_conflicts.is_empty());
    assert_eq!(
        s.decisions[0].agreed_by,
        vec!["carol".to_string(), "alice".to_string()]
    );
}

#[test]
fn same_speaker_reversal_is_no_conflict() {
    let turns = vec![
        turn(1, Role::User, "alice", "We'll use Redis for the cache."),
        turn(2, Role::User, "alice", "Scratch that."),
    ];
    let s = summarize(&turns, false);
    assert!(s.decisions.is_empty());
    assert!(s.unresolved_conflicts.is_empty());
}

#[test]
fn questions_answered_partially_or_not() {
    let turns = vec![
        turn(
            1,
            Role::User,
            "u",
            "Which card was charged for the annual subscription renewal?",
        ),
        turn(2, Role::Assistant, "a", "Let me check."),
        turn(3, Role::User, "u", "Also, what is the refund policy?"),
        turn(
            4,
            Role::Assistant,
            "a",
            "Refunds are possible within 30 days under our policy.",
        ),
        turn(
            5,
            Role::Assistant,
            "a",
            "The renewal was on your card, I see it now.",
        ),
    ];
    let s = summarize(&turns, false);
    check_valid(&turns, &s);
    assert_eq!(s.open_questions.len(), 1, "{:#?}", s.open_questions);
    assert_eq!(
        s.open_questions[0].status,
        QuestionStatus::PartiallyAnswered
    );
    assert_eq!(s.open_questions[0].evidence_seqs, vec![1, 5]);
    assert_eq!(s.outcome, Outcome::InProgress);
}

#[test]
fn a_reply_split_over_messages_answers_the_questions_of_the_run_before_it() {
    // Chat: the asker sends the questions and more in several messages,
    // the other replies in several; the reply takes the questions up.
    let turns = vec![
        turn(
            1,
            Role::User,
            "ana",
            "Which pasta did you make at the class?",
        ),
        turn(
            2,
            Role::User,
            "ana",
            "Did you take any photos of the dishes?",
        ),
        turn(
            3,
            Role::User,
            "ana",
            "The gallery was great today by the way.",
        ),
        turn(4, Role::Assistant, "bo", "Not sure yet, honestly."),
        turn(
            5,
            Role::Assistant,
            "bo",
            "We made carbonara with fresh guanciale.",
        ),
        turn(6, Role::User, "ana", "When does the next class start?"),
    ];
    let s = summarize(&turns, false);
    check_valid(&turns, &s);
    let open: Vec<&str> = s
        .open_questions
        .iter()
        .map(|q| q.question.as_str())
        .collect();
    assert_eq!(open, ["When does the next class start?"], "{open:?}");

    // A state written before runs were kept (no run start) still answers
    // the question of the turn just before the reply.
    let mut state = FoldState::default();
    state.fold(&turns[..2]);
    state.run_start = None;
    state.reply_to = None;
    state.fold(&turns[3..]);
    let open: Vec<String> = state
        .render(&ctx(false))
        .open_questions
        .into_iter()
        .map(|q| q.question)
        .collect();
    assert!(
        open.iter().all(|q| !q.contains("photos")),
        "the last question before the reply is answered: {open:?}"
    );
}

#[test]
fn annotations_win_over_heuristics() {
    let mut t1 = turn(1, Role::User, "u", "Ship it on Monday, probably");
    t1.metadata
        .insert(rules::ANNOTATION_KEY.into(), "decision".into());
    let mut t2 = turn(2, Role::Assistant, "a", "Budget for ACME-7 is tight");
    t2.metadata
        .insert(rules::ANNOTATION_KEY.into(), "open_question".into());
    let mut t3 = turn(3, Role::User, "u", "It is fine");
    t3.metadata.insert(rules::ANSWER_TO_KEY.into(), "2".into());
    let mut t4 = turn(4, Role::Assistant, "a", "Renew the TLS certificate");
    t4.metadata
        .insert(rules::ANNOTATION_KEY.into(), "pending_action".into());
    let mut t5 = turn(5, Role::User, "u", "Blue is the preferred colour");
    t5.metadata
        .insert(rules::ANNOTATION_KEY.into(), "fact".into());
    let turns = vec![t1, t2, t3, t4, t5];
    let s = summarize(&turns, false);
    check_valid(&turns, &s);
    assert_eq!(s.decisions[0].decision, "Ship it on Monday, probably");
    assert!(s.open_questions.is_empty(), "answered by annotation");
    assert_eq!(s.pending_actions[0].action, "Renew the TLS certificate");
    assert_eq!(s.pending_actions[0].owner, "a");
    assert_eq!(
        s.key_facts.last().map(|f| f.fact.as_str()),
        Some("Blue is the preferred colour")
    );
}

#[test]
fn goodbye_with_open_items_needs_follow_up() {
    let turns = vec![
        turn(
            1,
            Role::User,
            "u",
            "My router keeps dropping the connection.",
        ),
        turn(
            2,
            Role::Assistant,
            "a",
            "I'll escalate this to the network team and follow up tomorrow.",
        ),
        turn(3, Role::User, "u", "Ok, thanks. Bye!"),
    ];
    let s = summarize(&turns, false);
    assert_eq!(s.outcome, Outcome::UnresolvedFollowUp);
    assert_eq!(s.pending_actions[0].deadline, "2026-03-18");
}

#[test]
fn completed_when_all_actions_done() {
    let turns = vec![
        turn(1, Role::Assistant, "a", "Hello, how can I help?"),
        turn(
            2,
            Role::User,
            "u",
            "Please rotate the API keys for staging.",
        ),
        turn(
            3,
            Role::Assistant,
            "a",
            "Done, the API keys for staging are rotated.",
        ),
    ];
    let s = summarize(&turns, false);
    assert_eq!(s.pending_actions.len(), 1);
    assert_eq!(s.pending_actions[0].owner, "a");
    assert_eq!(s.pending_actions[0].status, ActionStatus::Done);
    assert_eq!(s.outcome, Outcome::Completed);
}

#[test]
fn missing_dependencies_are_reported() {
    let turns = vec![
        turn(
            1,
            Role::Assistant,
            "a",
            "I'll send the invoice once the refund is approved by finance.",
        ),
        turn(
            2,
            Role::Assistant,
            "a",
            "I will publish the notes after the review meeting.",
        ),
        turn(3, Role::User, "u", "The review meeting is finished."),
    ];
    let s = summarize(&turns, false);
    check_valid(&turns, &s);
    assert_eq!(
        s.context_health.missing_dependencies,
        vec!["the refund is approved by finance".to_string()]
    );
}

#[test]
fn oversized_turn_is_reported_in_truncated() {
    let big = "word ".repeat(MAX_ANALYSED_BYTES / 5 + 100);
    let turns = vec![turn(1, Role::User, "u", &big)];
    let s = summarize(&turns, false);
    assert!(s.truncated.contains("turn 1"), "{}", s.truncated);
}

#[test]
fn topics_segment_on_lexical_shift() {
    let turns = vec![
        turn(
            1,
            Role::User,
            "u",
            "My invoice shows a wrong billing amount for March.",
        ),
        turn(
            2,
            Role::Assistant,
            "a",
            "I see the billing amount on the invoice is wrong.",
        ),
        turn(
            3,
            Role::User,
            "u",
            "Please correct the invoice billing amount.",
        ),
        turn(
            4,
            Role::Assistant,
            "a",
            "The invoice billing amount is corrected now.",
        ),
        turn(
            5,
            Role::User,
            "u",
            "Separately, how do I change my shipping address for deliveries?",
        ),
        turn(
            6,
            Role::Assistant,
            "a",
            "You can change the shipping address for deliveries under settings.",
        ),
        turn(
            7,
            Role::User,
            "u",
            "Great, the shipping address settings page works.",
        ),
    ];
    let s = summarize(&turns, false);
    check_valid(&turns, &s);
    assert_eq!(s.topics.len(), 2, "{:#?}", s.topics);
    assert_eq!((s.topics[0].first_seq, s.topics[0].last_seq), (1, 4));
    assert_eq!((s.topics[1].first_seq, s.topics[1].last_seq), (5, 7));
    assert!(s.topics[0].topic.contains("invoice") || s.topics[0].topic.contains("billing"));
    assert!(s.topics[1].topic.contains("shipping") || s.topics[1].topic.contains("address"));
}

#[test]
fn refolding_old_seqs_is_ignored() {
    let turns = billing();
    let mut a = FoldState::default();
    a.fold(&turns);
    let mut b = a.clone();
    b.fold(&turns[3..]);
    assert_eq!(a, b);
}

// -- the incremental property ------------------------------------------------

/// xorshift64*: small, seeded, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }
}

const LINES: &[&str] = &[
    "Hi there!",
    "Hello, I have a problem with order ORD-{n}.",
    "I was charged twice, ${n}.99 each time.",
    "What is the status of my refund?",
    "When will the deck for project {n} be ready?",
    "I'll check the payment log and get back to you by Friday.",
    "Bob, can you send the report by tomorrow?",
    "@alice please review PR-{n} when you can.",
    "We decided to use Postgres because it is cheaper.",
    "Actually, let's go with MySQL instead.",
    "Scratch that.",
    "Agreed.",
    "Done.",
    "The refund has been processed.",
    "Thanks, that solves my issue.",
    "Sure, will do.",
    "Waiting for the bank to confirm the transfer.",
    "Email me at user{n}@example.com please.",
    "See https://status.example.com/incident/{n} for details.",
    "Bye!",
    "Next step is to migrate the database in 3 days.",
    "It was the Visa card ending {n}.",
    "This is urgent, please fix the login bug ASAP.",
    "The payment log shows two charges on 2026-03-{d}.",
    "Can you tell me your order number?",
    "My order number is ORD-{n}.",
    "ok",
    "I will deploy v{n}.2 to production on March {d}.",
    "Let me check the shipping address.",
    "The shipping address is 12 Oak Street.",
];

fn random_session(rng: &mut Rng) -> Vec<Turn> {
    let speakers = [
        ("user-1", Role::User),
        ("agent", Role::Assistant),
        ("bob", Role::User),
        ("alice", Role::User),
    ];
    let tools = ["search_orders", "issue_refund", "get_payment_log"];
    let statuses = [
        ToolCallStatus::Success,
        ToolCallStatus::Failure,
        ToolCallStatus::Timeout,
        ToolCallStatus::Success,
    ];
    let n = 1 + rng.below(30);
    let mut turns = Vec::with_capacity(n);
    for seq in 1..=u64::try_from(n).unwrap_or(1) {
        let num = 1000 + rng.below(9000);
        let day = 10 + rng.below(18);
        if rng.below(6) == 0 {
            let name = tools[rng.below(tools.len())];
            let args = format!("{{\"order\":\"ORD-{}\"}}", 1000 + rng.below(3));
            let result =
                format!("Found ORD-{num} in file-{num}.txt at https://x.example.com/{num}");
            let status = statuses[rng.below(statuses.len())];
            let err = if status == ToolCallStatus::Success {
                ""
            } else {
                "upstream 502"
            };
            turns.push(tool(seq, name, &args, &result, status, err));
            continue;
        }
        let (speaker, role) = speakers[rng.below(speakers.len())];
        let k = 1 + rng.below(3);
        let mut content = Vec::new();
        for _ in 0..k {
            let line = LINES[rng.below(LINES.len())]
                .replace("{n}", &num.to_string())
                .replace("{d}", &day.to_string());
            content.push(line);
        }
        let mut t = turn(seq, role, speaker, &content.join(" "));
        t.client_time =
            (rng.below(3) == 0).then(|| T0 + i64::try_from(seq).unwrap_or(0) * 86_400_000_000_000);
        match rng.below(12) {
            0 => {
                let kinds = ["decision", "pending_action", "open_question", "fact"];
                t.metadata.insert(
                    rules::ANNOTATION_KEY.into(),
                    kinds[rng.below(kinds.len())].into(),
                );
            }
            1 if seq > 1 => {
                t.metadata.insert(
                    rules::ANSWER_TO_KEY.into(),
                    (1 + rng.below(usize::try_from(seq - 1).unwrap_or(1))).to_string(),
                );
            }
            _ => {}
        }
        turns.push(t);
    }
    turns
}

#[test]
fn folding_in_two_parts_equals_folding_at_once() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..100 {
        let turns = random_session(&mut rng);
        let mut whole = FoldState::default();
        whole.fold(&turns);
        let expected = whole.render(&ctx(true));
        check_valid(&turns, &expected);
        for k in 0..=turns.len() {
            let mut part = FoldState::default();
            part.fold(&turns[..k]);
            // The state is stored between folds: it must survive JSON.
            let json = serde_json::to_string(&part).expect("state serializes");
            let mut part: FoldState = serde_json::from_str(&json).expect("state deserializes");
            // Re-sending an overlap must not matter either.
            part.fold(&turns[k.saturating_sub(2)..]);
            assert_eq!(part, whole, "split at {k}");
            assert_eq!(part.render(&ctx(true)), expected);
        }
    }
}

#[test]
fn state_stays_bounded_in_long_sessions() {
    let mut rng = Rng(42);
    let mut state = FoldState::default();
    let mut seq = 0;
    for _ in 0..120 {
        let mut turns = random_session(&mut rng);
        for t in &mut turns {
            seq += 1;
            t.seq = seq;
        }
        state.fold(&turns);
    }
    assert!(state.facts.len() <= MAX_FACTS);
    assert!(state.actions.len() <= MAX_ACTIONS);
    assert!(state.questions.len() <= MAX_OPEN_QUESTIONS);
    assert!(state.decisions.len() <= MAX_DECISIONS);
    assert!(state.artifacts.len() <= MAX_ARTIFACTS);
    assert!(state.completions.len() <= MAX_COMPLETIONS_KEPT);
    let s = state.render(&ctx(false));
    assert_eq!(s.covers_through_seq, seq);
    assert!(s
        .topics
        .iter()
        .all(|t| t.key_points.len() <= MAX_KEY_POINTS_PER_TOPIC));
}

#[test]
fn key_facts_scale_with_the_session_and_the_cut_is_counted() {
    // A CI-debugging session: every turn names a build, a job and an error code.
    let turns: Vec<Turn> = (1..=200)
        .map(|i| {
            turn(
                i,
                if i % 2 == 1 {
                    Role::User
                } else {
                    Role::Assistant
                },
                if i % 2 == 1 { "dev" } else { "agent" },
                &format!(
                    "Build B-{i} failed: job JOB-{} exited with E{}.",
                    20000 + i,
                    100 + i
                ),
            )
        })
        .collect();
    let s = summarize(&turns, false);
    assert_eq!(s.key_facts.len(), 32, "12 + 200 / 10");
    // The newest are kept.
    assert!(s.key_facts.last().unwrap().fact.contains("B-200"));
    assert!(
        s.truncated
            .contains("older key_facts not shown (at most 32 for 200 turns)"),
        "{}",
        s.truncated
    );
}
