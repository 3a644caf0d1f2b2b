//! Questions: which sentences ask, and which turns answer them.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

pub(crate) const WH_WORDS: &[&str] = &[
    "what", "when", "where", "who", "whom", "whose", "which", "why", "how",
];
pub(crate) const AUX_WORDS: &[&str] = &[
    "is", "are", "was", "were", "do", "does", "did", "can", "could", "would", "will", "should",
    "shall", "may", "have", "has", "had", "am", "isn't", "aren't", "don't", "doesn't", "didn't",
];
pub(crate) const SUBJECTS: &[&str] = &[
    "you", "we", "i", "there", "they", "he", "she", "anyone", "someone", "anybody", "somebody",
    "the", "this", "that", "these", "those", "my", "our", "your", "his", "her", "its", "it",
];

pub(crate) fn is_question_norm(sentence: &str, n: &Norm) -> bool {
    let t = sentence.trim_end_matches(['"', '\'', ')', ' ']);
    if t.ends_with('?') {
        return true;
    }
    if t.ends_with(['.', '!']) {
        return false;
    }
    let first = n.words.first().map_or("", String::as_str);
    let second = n.words.get(1).map_or("", String::as_str);
    // "When I was watching them" states; "what do you think" asks: a
    // wh-word needs an auxiliary after it (or nothing) without a '?'.
    WH_WORDS.contains(&first) && (second.is_empty() || AUX_WORDS.contains(&second))
        || AUX_WORDS.contains(&first) && SUBJECTS.contains(&second) && second != "it"
}

/// Whether a sentence asks something: it ends with '?', or it starts with a
/// wh-word, or with an auxiliary followed by a subject ("do you…"), and has
/// no other end mark.
pub fn is_question(sentence: &str) -> bool {
    is_question_norm(sentence, &Norm::new(sentence))
}

/// Whether a question is worth tracking: a real question with content, not
/// a request (which is an action), nor a pleasantry ("How are you?",
/// "Anything else I can help with?").
pub fn is_open_question(sentence: &str) -> bool {
    is_open_question_n(sentence, &Norm::new(sentence))
}

pub(crate) fn is_open_question_n(sentence: &str, n: &Norm) -> bool {
    is_question_norm(sentence, n)
        && request(sentence, n).is_none()
        && !is_small_talk_norm(n)
        && !content_of(n).is_empty()
}

/// Replies that say the answer is not known: the question stays open.
pub(crate) const NON_ANSWERS: &[&str] = &[
    "don't know",
    "do not know",
    "not sure",
    "no idea",
    "can't tell",
    "cannot tell",
    "not yet",
    "don't have",
    "do not have",
    "not me",
    "unclear",
    "no clue",
    "can't say",
    "cannot say",
    "i'd need",
    "need to check",
    "find out",
    "good question",
    "great question",
    "no one knows",
    "nobody knows",
    "not certain",
    "can't confirm",
    "cannot confirm",
    // Deferrals: someone will find out, nobody has yet.
    "looking into",
    "look into it",
    "let me check",
    "will check",
    "get back to you",
    "investigating",
    "checking on",
];

/// Whether a sentence can answer a question: a statement (not a question,
/// not a commitment to find out later) with content, or a plain yes/no.
pub fn is_answer_like(sentence: &str) -> bool {
    is_answer_like_n(sentence, &Norm::new(sentence))
}

pub(crate) fn is_answer_like_n(sentence: &str, n: &Norm) -> bool {
    if n.words.is_empty()
        || is_question_norm(sentence, n)
        || is_commitment_norm(n)
        || n.has_any(NON_ANSWERS)
    {
        return false;
    }
    let yes_no = [
        "yes",
        "no",
        "yeah",
        "yep",
        "nope",
        "correct",
        "exactly",
        "right",
        "confirmed",
    ]
    .contains(&n.words[0].as_str());
    yes_no || !is_small_talk_norm(n) && !is_greeting_norm(n)
}

/// Whether a question only spells out the one before it: a few words
/// ending in '?' that start with no question word or auxiliary ("Your
/// EHR, payroll?", "The blue one?").
pub fn is_elaboration(sentence: &str) -> bool {
    let n = Norm::new(sentence);
    let first = n.words.first().map_or("", String::as_str);
    sentence.trim_end().ends_with('?')
        && (1..=4).contains(&n.words.len())
        && !WH_WORDS.contains(&first)
        && !AUX_WORDS.contains(&first)
}
