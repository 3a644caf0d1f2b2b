//! Fuzzes the turn-text heuristics and the renderers: arbitrary bytes
//! become a session's turns (one per line; the first byte of a line picks
//! the role, a line with a tab is a tool call); the summarizer folds them
//! whole and in two parts, the validator must accept what it wrote, and
//! the Markdown renderer, turn shortening and fact extraction must take
//! all of it without panicking.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use mnemo::bundle::compress::shorten;
use mnemo::memory::facts::extract;
use mnemo::model::{Role, ToolCall, ToolCallStatus, Turn};
use mnemo::model::Trigger;
use mnemo::summarize::{render, summarize, validate, FoldState, SummaryContext};

fn turns(data: &[u8]) -> Vec<Turn> {
    let text = String::from_utf8_lossy(data);
    text.split('\n')
        .take(64)
        .enumerate()
        .map(|(i, line)| {
            let role = match line.bytes().next().unwrap_or(0) % 4 {
                0 => Role::User,
                1 => Role::Assistant,
                2 => Role::System,
                _ => Role::Tool,
            };
            let tool_call = line.split_once('\t').map(|(name, rest)| ToolCall {
                tool_name: name.to_owned(),
                arguments_json: String::new(),
                result: rest.to_owned(),
                status: if rest.len() % 2 == 0 {
                    ToolCallStatus::Success
                } else {
                    ToolCallStatus::Failure
                },
                error_details: String::new(),
            });
            Turn {
                seq: i as u64 + 1,
                role,
                speaker: format!("speaker-{}", i % 3),
                content: line.to_owned(),
                client_time: None,
                server_time: 1_700_000_000_000_000_000 + i as i64,
                tool_call,
                metadata: BTreeMap::new(),
                token_count: 1,
            }
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let turns = turns(data);
    let ctx = SummaryContext {
        context_limit_tokens: 8000,
        bundle_tokens: 100,
        trigger: Trigger::Requested,
        version: 1,
        now: 1_800_000_000_000_000_000,
        high_risk: true,
    };
    let whole = summarize(&turns, &ctx);
    let cited: BTreeMap<u64, Turn> = turns.iter().map(|t| (t.seq, t.clone())).collect();
    if let Err(problems) = validate::validate(&whole, &cited, turns.len() as u64) {
        panic!("the summarizer wrote an invalid summary: {problems:?}");
    }
    // Folding in two parts gives the same summary.
    let mid = turns.len() / 2;
    let mut state = FoldState::default();
    state.fold(&turns[..mid]);
    state.fold(&turns[mid..]);
    assert_eq!(state.render(&ctx), whole, "incremental fold differs");
    let _ = render::markdown(&whole);
    let _ = render::json(&whole);
    for t in &turns {
        let _ = shorten(t);
    }
    let _ = extract("ns", "subject", "session", &whole, &turns);
});
