//! Shortening of turns for a bundle. Older turns for the "Earlier
//! conversation summary", after the Q&A truncation scheme: a question (a
//! user turn) keeps up to 150 characters; an answer (any other turn) is
//! kept whole up to 100 characters, else cut to its first sentence, and
//! that to 100 characters. Lengths are in characters (Unicode scalar
//! values), never bytes, so a cut never splits a character. And a long
//! retrieved turn (a meeting's monologue, a tool's long output) read for a
//! query: its sentences that share the query's words ([`excerpt`]).

use std::collections::BTreeSet;

use crate::model::{Role, Turn};
use crate::summarize::rules;

/// Words a retrieved turn's excerpt keeps, about.
pub const EXCERPT_WORDS: usize = 80;
/// A retrieved turn longer than this many words gets an excerpt as its
/// short form.
pub const EXCERPT_FROM_WORDS: usize = 120;

/// Characters a question keeps.
pub const QUESTION_CHARS: usize = 150;
/// Characters an answer keeps.
pub const ANSWER_CHARS: usize = 100;
/// Marks a cut.
pub const ELLIPSIS: &str = "...";

/// The sentences of a long `text` that share the most of the query's
/// content words (`query`, stemmed: `rules::content_words`), in their
/// order, within about [`EXCERPT_WORDS`] words, "…" where text was left
/// out; `None` when the text is not long or no sentence shares a word.
pub fn excerpt(text: &str, query: &BTreeSet<String>) -> Option<String> {
    let words = |s: &str| s.split_whitespace().count();
    if query.is_empty() || words(text) <= EXCERPT_FROM_WORDS {
        return None;
    }
    let sentences = rules::sentences(text);
    let mut scored: Vec<(usize, usize)> = sentences
        .iter()
        .enumerate()
        .map(|(i, s)| (i, rules::content_words(s).intersection(query).count()))
        .filter(|&(_, shared)| shared > 0)
        .collect();
    // Most shared words first; earlier first among equals.
    scored.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut chosen: Vec<usize> = Vec::new();
    let mut kept = 0;
    for (i, _) in scored {
        let n = words(sentences[i]);
        if !chosen.is_empty() && kept + n > EXCERPT_WORDS {
            continue;
        }
        chosen.push(i);
        kept += n;
        if kept >= EXCERPT_WORDS {
            break;
        }
    }
    if chosen.is_empty() {
        return None;
    }
    chosen.sort_unstable();
    let mut out = String::new();
    let mut next = 0;
    for i in chosen {
        if i > next {
            out.push_str(if out.is_empty() { "… " } else { " … " });
        } else if !out.is_empty() {
            out.push(' ');
        }
        let s = sentences[i].trim();
        if words(s) > EXCERPT_WORDS {
            let cut: Vec<&str> = s.split_whitespace().take(EXCERPT_WORDS).collect();
            out.push_str(&cut.join(" "));
            out.push('…');
        } else {
            out.push_str(s);
        }
        next = i + 1;
    }
    if next < sentences.len() {
        out.push_str(" …");
    }
    Some(out)
}

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

    #[test]
    fn a_long_turn_is_excerpted_to_the_sentences_the_query_shares() {
        let filler = "We went over the agenda and the minutes of last week again. ".repeat(12);
        let text = format!(
            "{filler}The demo will be tested at the Students Firm Fair in March. {filler}Noise at the fair is the hard part for the demo. {filler}"
        );
        let query = rules::content_words("Where will the demo be tested?");
        let e = excerpt(&text, &query).expect("an excerpt");
        assert!(e.contains("Students Firm Fair"), "{e}");
        assert!(e.starts_with("… ") && e.ends_with(" …"), "{e}");
        assert!(e.split_whitespace().count() <= EXCERPT_WORDS + 4, "{e}");
        // Short turns, and turns that share no word, keep no excerpt.
        assert_eq!(excerpt("The demo is at the fair.", &query), None);
        assert_eq!(excerpt(&filler, &query), None);
        assert_eq!(excerpt(&text, &BTreeSet::new()), None);
    }
}
