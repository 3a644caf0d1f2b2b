//! Shortening of older turns for the "Earlier conversation summary" of a
//! bundle, after the Q&A truncation scheme: a question (a user turn) keeps
//! up to 150 characters; an answer (any other turn) is kept whole up to 100
//! characters, else cut to its first sentence, and that to 100 characters.
//! Lengths are in characters (Unicode scalar values), never bytes, so a cut
//! never splits a character.

use crate::model::{Role, Turn};
use crate::summarize::rules;

/// Characters a question keeps.
pub const QUESTION_CHARS: usize = 150;
/// Characters an answer keeps.
pub const ANSWER_CHARS: usize = 100;
/// Marks a cut.
pub const ELLIPSIS: &str = "...";

/// The shortened text of a turn and whether it lost anything.
pub fn shorten(turn: &Turn) -> (String, bool) {
    let text = match &turn.tool_call {
        // A tool call keeps its exact name; the arguments and the outcome
        // are shortened like an answer.
        Some(call) => {
            let (args, args_cut) = cut(&call.arguments_json, ANSWER_CHARS / 2);
            let outcome = if call.error_details.is_empty() {
                &call.result
            } else {
                &call.error_details
            };
            let (content, content_cut) = answer(&turn.content);
            let (outcome_text, outcome_cut) = answer(outcome);
            let mut out = String::new();
            if !content.is_empty() {
                out.push_str(&content);
                out.push_str(" | ");
            }
            out.push_str(&format!("{}({args}) -> {:?}", call.tool_name, call.status));
            if !outcome_text.is_empty() {
                out.push_str(": ");
                out.push_str(&outcome_text);
            }
            let result_dropped = !call.error_details.is_empty() && !call.result.is_empty();
            return (
                out,
                args_cut || content_cut || outcome_cut || result_dropped,
            );
        }
        None => &turn.content,
    };
    match turn.role {
        Role::User => cut(text, QUESTION_CHARS),
        _ => answer(text),
    }
}

/// An answer: whole up to 100 characters, else its first sentence, cut to
/// 100 characters.
fn answer(text: &str) -> (String, bool) {
    if text.chars().count() <= ANSWER_CHARS {
        return (text.to_owned(), false);
    }
    let sentence = first_sentence(text);
    let (short, _) = cut(sentence, ANSWER_CHARS);
    (short, true)
}

/// `text` up to `max` characters, with "..." when cut.
fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        None => (text.to_owned(), false),
        Some((end, _)) => (format!("{}{ELLIPSIS}", &text[..end]), true),
    }
}

/// The first sentence (see `rules::sentences`: abbreviations, decimals
/// and domain names do not end one), or the whole text when it has none.
fn first_sentence(text: &str) -> &str {
    rules::sentences(text).first().copied().unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ToolCall, ToolCallStatus};

    fn turn(role: Role, content: &str) -> Turn {
        Turn {
            seq: 1,
            role,
            speaker: "x".into(),
            content: content.into(),
            client_time: None,
            server_time: 0,
            tool_call: None,
            metadata: Default::default(),
            token_count: 0,
        }
    }

    #[test]
    fn questions_keep_150_characters() {
        let q = "q".repeat(150);
        assert_eq!(shorten(&turn(Role::User, &q)), (q.clone(), false));
        let long = format!("{q}tail");
        assert_eq!(shorten(&turn(Role::User, &long)), (format!("{q}..."), true));
    }

    #[test]
    fn answers_keep_100_characters_or_their_first_sentence() {
        let short = "a".repeat(100);
        assert_eq!(
            shorten(&turn(Role::Assistant, &short)),
            (short.clone(), false)
        );
        let two = format!("The refund is approved. {}", "More detail ".repeat(20));
        assert_eq!(
            shorten(&turn(Role::Assistant, &two)),
            ("The refund is approved.".to_string(), true)
        );
        let run_on = format!("{} end.", "word ".repeat(40));
        let (s, cut) = shorten(&turn(Role::Assistant, &run_on));
        assert!(cut);
        assert_eq!(s.chars().count(), 103);
        assert!(s.ends_with("..."));
        // A decimal point is not a sentence end.
        let num = format!("It costs 12.50 today. {}", "x ".repeat(60));
        assert_eq!(
            shorten(&turn(Role::Assistant, &num)).0,
            "It costs 12.50 today."
        );
    }

    #[test]
    fn cuts_count_characters_not_bytes() {
        let q = "é".repeat(200);
        let (s, cut) = shorten(&turn(Role::User, &q));
        assert!(cut);
        assert_eq!(s.chars().count(), 153);
    }

    #[test]
    fn tool_calls_keep_their_exact_name() {
        let mut t = turn(Role::Assistant, "");
        t.tool_call = Some(ToolCall {
            tool_name: "lookup_order".into(),
            arguments_json: r#"{"order_id":"A-1"}"#.into(),
            result: "found. shipped yesterday with carrier X and more text that is long enough to be cut at some point, surely".into(),
            status: ToolCallStatus::Success,
            error_details: String::new(),
        });
        let (s, cut) = shorten(&t);
        assert!(cut);
        assert!(
            s.starts_with(r#"lookup_order({"order_id":"A-1"}) -> Success: found."#),
            "{s}"
        );
    }
}
