//! Transcription markers, told by their shape rather than by one corpus's
//! words: a sound, a gap or an annotator's note written in braces
//! (`{vocalsound}`, `{disfmarker}`), angle brackets (`<laugh/>`,
//! `<parallel_talk>`), square brackets (`[noise]`, `[Laughter.]`) or
//! parentheses (`(inaudible)`). Anonymisation placeholders such as
//! `[PERSON3]` or `[ORGANIZATION1]` are names, not markers, and are kept.
//! Markers are no words: rules read text without them, and item text
//! never carries one.

use std::ops::Range;

/// Longest marker, in bytes, brackets included; longer bracketed text is
/// speech.
const MAX_MARKER_BYTES: usize = 48;

/// Words a parenthesised or square-bracketed marker may have.
const MAX_MARKER_WORDS: usize = 4;

/// Whether the inside of a bracket pair (`open` is the opening bracket)
/// reads as a transcription marker.
fn is_marker_body(open: char, body: &str) -> bool {
    let body = body.trim();
    if body.is_empty() {
        return false;
    }
    let letters = |c: char| c.is_alphabetic() || matches!(c, '_' | '-' | ' ' | '/');
    match open {
        // `{vocalsound}`, `{comment}`: braces around words.
        '{' => body.chars().all(letters),
        // `<laugh/>`, `</parallel_talk>`, `<another_language>`.
        '<' => {
            let inner = body.trim_start_matches('/').trim_end_matches('/');
            !inner.is_empty()
                && inner
                    .chars()
                    .all(|c| c.is_alphabetic() || matches!(c, '_' | '-'))
        }
        // `[noise]`, `[Laughter.]`, `[inaudible 00:12]`; not `[PERSON3]`
        // (a placeholder: capitals and digits) nor `[3]`.
        '[' => {
            let placeholder = body
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            let words = body.split_whitespace().count();
            !placeholder
                && body.chars().any(char::is_alphabetic)
                && body.chars().next().is_some_and(char::is_alphabetic)
                && words <= MAX_MARKER_WORDS
                && body
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '.' | ':' | '_' | '-' | '?'))
        }
        // `(inaudible)`, `(laughs)`, `(cross talk)`: lower-case words only,
        // so "(Wales)", "(N)" and "(see RFC 7231)" stay.
        '(' => {
            let words = body.split_whitespace().count();
            words <= 2
                && body
                    .chars()
                    .all(|c| c.is_lowercase() || matches!(c, ' ' | '.' | '_' | '-'))
                && body.chars().any(char::is_alphabetic)
        }
        _ => false,
    }
}

/// The byte ranges of `text` that are transcription markers, in order.
pub fn marker_spans(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let Some(rest) = text.get(i..) else { break };
        let Some(open) = rest.chars().next() else {
            break;
        };
        let close = match open {
            '{' => '}',
            '<' => '>',
            '[' => ']',
            '(' => ')',
            _ => {
                i += open.len_utf8();
                continue;
            }
        };
        let mut cut = rest.len().min(MAX_MARKER_BYTES);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let window = &rest[..cut];
        let end = window[1..]
            .find([close, open])
            .map(|k| k + 1)
            .filter(|&k| window[k..].starts_with(close));
        match end {
            // A Markdown link's text (`[docs](…)`) is no marker.
            Some(k) if open == '[' && rest[k + 1..].starts_with('(') => i += k + 1,
            Some(k) if is_marker_body(open, &rest[1..k]) => {
                out.push(i..i + k + 1);
                i += k + 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// Whether `text` holds a transcription marker.
pub fn has_marker(text: &str) -> bool {
    !marker_spans(text).is_empty()
}

/// `text` with its transcription markers removed (each replaced by a
/// space, so the words around it stay apart).
pub fn strip_markers(text: &str) -> String {
    let spans = marker_spans(text);
    if spans.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in spans {
        out.push_str(&text[at..r.start]);
        out.push(' ');
        at = r.end;
    }
    out.push_str(&text[at..]);
    out
}

/// `text` without its markers, tidied for an item: runs of spaces made
/// one, no space before punctuation a marker left alone ("so {vocalsound}
/// , yes" → "so, yes"), no dangling punctuation at the start.
pub fn without_markers(text: &str) -> String {
    if !has_marker(text) {
        return text.to_string();
    }
    let stripped = strip_markers(text);
    let mut out = String::with_capacity(stripped.len());
    for word in stripped.split_whitespace() {
        let glued = word.starts_with([',', '.', '?', '!', ';', ':']) && !out.is_empty();
        // A lone comma left where a marker was ("uh , , we") adds nothing.
        if word == "," && (out.ends_with(',') || out.is_empty()) {
            continue;
        }
        if !out.is_empty() && !glued {
            out.push(' ');
        }
        out.push_str(word);
    }
    out.trim_start_matches([',', '.', ';', ':', ' ', '-'])
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_of_every_convention_go_from_item_text() {
        for (raw, clean) in [
            // QMSum (Committee, Academic).
            (
                "So we {disfmarker} we should {vocalsound} move the meeting to Tuesday.",
                "So we we should move the meeting to Tuesday.",
            ),
            (
                "{gap} I'll send the forms {pause} by Friday.",
                "I'll send the forms by Friday.",
            ),
            (
                "[Laughter.] We agreed on the budget.",
                "We agreed on the budget.",
            ),
            // ELITR.
            (
                "<laugh/> Informations, I will spend the today afternoon.",
                "Informations, I will spend the today afternoon.",
            ),
            (
                "<parallel_talk> I'll check it </parallel_talk> tomorrow.",
                "I'll check it tomorrow.",
            ),
            // Other transcription conventions.
            (
                "I'll [noise] fix the build (inaudible) today.",
                "I'll fix the build today.",
            ),
            (
                "we decided {comment} , to ship it",
                "we decided, to ship it",
            ),
        ] {
            assert_eq!(without_markers(raw), clean, "{raw:?}");
            assert!(has_marker(raw), "{raw:?}");
            assert!(!has_marker(&without_markers(raw)), "{raw:?}");
        }
    }

    #[test]
    fn placeholders_names_and_plain_brackets_stay() {
        for text in [
            "[PERSON3] will prepare the data for [ORGANIZATION1].",
            "[PROJECT2] and [OTHER] stay as they are.",
            "The Minister (Wales) will answer in writing.",
            "See the [docs](https://example.org) and ref [3].",
            "Use `map<String, u64>` and the JSON {\"a\": 1}.",
            "Returns (N) items; see (RFC 7231).",
        ] {
            let hits: Vec<&str> = marker_spans(text).into_iter().map(|r| &text[r]).collect();
            assert!(hits.is_empty(), "{text:?}: {hits:?}");
        }
        assert_eq!(
            without_markers("[PERSON3] will prepare the data."),
            "[PERSON3] will prepare the data."
        );
    }

    #[test]
    fn odd_input_does_not_panic() {
        for text in [
            "{",
            "<",
            "[é",
            "(ü)",
            "{ü}",
            "<<>>",
            "[]()",
            "a{b",
            "é{vocalsound}é",
        ] {
            let _ = without_markers(text);
        }
        assert_eq!(without_markers("é{vocalsound}é"), "é é");
    }
}
