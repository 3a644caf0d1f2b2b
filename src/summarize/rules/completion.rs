//! Completion: sentences that report work done.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

pub(crate) const COMPLETIONS: &[&str] = &[
    "connected",
    "installed",
    "added",
    "granted",
    "entered",
    "throttled",
    "rotated",
    "renewed",
    "enabled",
    "disabled",
    "removed",
    "configured",
    "migrated",
    "killed",
    "applied",
    "emailed",
    "filed",
    "logged off",
    "it works",
    "all done",
    "that's done",
    "done",
    "completed",
    "complete",
    "fixed",
    "sent",
    "processed",
    "resolved",
    "finished",
    "shipped",
    "delivered",
    "deployed",
    "merged",
    "submitted",
    "uploaded",
    "taken care of",
    "i've initiated",
    "i have initiated",
    "went through",
    "came through",
    "refunded",
    "cancelled",
    "canceled",
    "updated",
    "created",
    "booked",
    "paid",
    "issued",
    "closed",
    "handled",
    "restarted",
    "reset",
    "approved",
];

/// Words that, before a completion word, make it future or conditional.
pub(crate) const NOT_YET: &[&str] = &[
    "will", "i'll", "we'll", "it'll", "you'll", "they'll", "once", "if", "when", "after", "until",
    "before", "going", "should", "could", "would", "can", "need", "needs", "please", "must",
    "whether", "soon",
];

pub(crate) fn is_completion_norm(n: &Norm) -> bool {
    let Some(pos) = n.find_any(COMPLETIONS) else {
        return false;
    };
    if has_negation(n) {
        return false;
    }
    let before = &n.words[..pos];
    // "needs to be processed", "yet to get done": not done.
    let to_be = before.len() >= 2
        && before[before.len() - 2] == "to"
        && matches!(before[before.len() - 1].as_str(), "be" | "get");
    !to_be && !before.iter().any(|w| NOT_YET.contains(&w.as_str()))
}

/// Whether a sentence reports work done ("Done.", "The refund has been
/// processed.", "I've sent the invoice"), not future or conditional ("once
/// it is done") and not negated ("not fixed yet").
pub fn is_completion(sentence: &str) -> bool {
    is_completion_n(sentence, &Norm::new(sentence))
}

pub(crate) fn is_completion_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n) && is_completion_norm(n)
}
