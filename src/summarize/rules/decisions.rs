//! Decisions: proposals, agreements, rationale and reversals.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

pub(crate) const DECISIONS: &[&str] = &[
    "we decided",
    "we've decided",
    "we have decided",
    "i decided",
    "i've decided",
    "i have decided",
    "decided to",
    "decision is",
    "final decision",
    "our decision",
    "i'll take the",
    "we'll take the",
    "i will take the",
    "we will take the",
    "approving",
    "approved",
    "decided",
    "let's go with",
    "lets go with",
    "let's use",
    "we'll use",
    "we will use",
    "we'll go with",
    "we will go with",
    "we're going with",
    "we are going with",
    "going with",
    "agreed to",
    "we agreed",
    "we agree",
    "i approve",
    "is approved",
    "are approved",
    "let's do",
    "let's proceed",
    "yes proceed",
    "go ahead with",
    "we'll stick with",
    "let's stick with",
    "let's switch to",
    "we'll switch to",
    "settled on",
    "we chose",
    "we've chosen",
    "let's not",
    "let's keep",
    "let's drop",
    "let's pick",
    "let's choose",
    "let's adopt",
    "we'll go ahead",
    "please proceed",
    // What a design will have: "so it'll have a rubber case".
    "it'll have",
    "it will have",
    "it's going to have",
    "it is going to have",
    "it's gonna have",
    "it should have",
];

/// Verbs after "let's" that plan work rather than decide.
pub(crate) const LETS_PLANNING: &[&str] = &[
    "schedule", "meet", "set", "plan", "review", "sync", "follow", "circle", "check", "see",
    "talk", "discuss", "look", "get", "try", "find", "figure", "think", "recap", "regroup",
    // Nor does a figure of speech: "let's say", "let's hope".
    "say", "hope", "imagine", "assume", "suppose",
];

/// Sentence-initial verbs that change a state on the spot ("Escalating
/// to SEV-1", "Downgrading INC-4521 to SEV-3").
pub(crate) const STATE_CHANGES: &[&str] = &[
    "escalating",
    "downgrading",
    "upgrading",
    "raising",
    "lowering",
    "switching",
    "reverting",
    "postponing",
    "pausing",
    "freezing",
    "approving",
    "rejecting",
];

/// Word index where a sentence decides something, if it does.
pub(crate) fn decision_position(n: &Norm) -> Option<usize> {
    if let Some(pos) = n.find_any(DECISIONS) {
        return Some(pos);
    }
    // "let's <verb>" decides, unless the verb plans more talk or work.
    // Fillers after it are skipped; a cut-off "let's- Uh, uh while…" has
    // no verb (a stopword comes first) and decides nothing.
    if let Some(pos) = n.find("let's") {
        let verb = n.words[pos + 1..]
            .iter()
            .map(String::as_str)
            .find(|w| !matches!(*w, "uh" | "um" | "ehm" | "eh" | "er" | "erm" | "like"))
            .unwrap_or("");
        if !verb.is_empty() && !is_stopword(verb) && !LETS_PLANNING.contains(&verb) {
            return Some(pos);
        }
    }
    // "Decision: …", "Decided then: …", "Escalating to…", "LGTM".
    let first = n.words.first().map_or("", String::as_str);
    if matches!(first, "decision" | "decided" | "lgtm") || STATE_CHANGES.contains(&first) {
        return Some(0);
    }
    // "Yes, use the staging bucket", "OK, book that one": a choice.
    let second = n.words.get(1).map_or("", String::as_str);
    let assent = ["yes", "ok", "okay", "fine", "sure", "alright", "then"];
    let choose = [
        "use", "book", "take", "pick", "choose", "go", "proceed", "keep", "ship",
    ];
    if assent.contains(&first) && choose.contains(&second) {
        return Some(1);
    }
    n.find_any(&[
        "book that",
        "book it",
        "go with that",
        "use that",
        "take that one",
    ])
}

/// Phrases that make a whole sentence hypothetical: "And let's say that
/// for some reason … we have already decided that [PERSON3] is a person".
pub(crate) const HYPOTHETICALS: &[&str] = &[
    "let's say",
    "let's assume",
    "let's suppose",
    "let's imagine",
    "say for example",
    "suppose that",
    "imagine that",
];

/// Whether a decision or agreement word at `pos` is negated: "we haven't
/// agreed on the bachelor's thesis", "nobody decided", "we never agreed".
fn negated_at(n: &Norm, pos: usize) -> bool {
    n.words[pos.saturating_sub(3)..pos].iter().any(|w| {
        matches!(
            w.as_str(),
            "not" | "never" | "nobody" | "haven't" | "hasn't" | "didn't" | "don't" | "hadn't"
        )
    })
}

/// Whether the cue at `pos` (a decision's, a proposal's or a commitment's)
/// sits in an embedded question or a relative clause: "And how much money
/// we will use for a book.", "the existing minutes, which we agree are not
/// very good". A cleft ("what we'll use is the rubber case", "that's what
/// we'll use") still counts.
pub(crate) fn embedded_at(n: &Norm, pos: usize) -> bool {
    let from = pos.saturating_sub(3);
    let Some(wh) = n.words[from..pos].iter().position(|w| {
        matches!(
            w.as_str(),
            "how" | "what" | "which" | "where" | "whether" | "who" | "why"
        )
    }) else {
        return false;
    };
    let is_be = |w: &String| matches!(w.as_str(), "is" | "was" | "that's" | "this" | "that");
    let cleft_before = (from + wh)
        .checked_sub(1)
        .is_some_and(|b| is_be(&n.words[b]));
    let cleft_after = n.words[pos..]
        .iter()
        .any(|w| matches!(w.as_str(), "is" | "was"));
    !cleft_before && !cleft_after
}

pub(crate) fn is_decision_norm(n: &Norm) -> bool {
    if n.has_any(HYPOTHETICALS) {
        return false;
    }
    if let Some(pos) = decision_position(n) {
        if negated_at(n, pos) || embedded_at(n, pos) {
            return false;
        }
        // "no decision yet" / "haven't decided" are not decisions, nor is
        // a condition ("once it is approved", "if we decide to…").
        let conditional = n.words[..pos].iter().any(|w| {
            matches!(
                w.as_str(),
                "if" | "once" | "when" | "whether" | "until" | "unless" | "after"
            )
        });
        return !conditional
            && !n.has_any(&[
                "no decision",
                "not decided",
                "haven't decided",
                "undecided",
                "decision yet",
            ]);
    }
    // "Agreed, we ship Monday." decides; a bare "Agreed." only agrees.
    n.find("agreed").is_some_and(|at| !negated_at(n, at)) && content_words(&n.text).len() >= 2
}

/// Whether a sentence states a decision ("we decided…", "let's go with…",
/// "we'll use…", "I approve…", "final decision…").
pub fn is_decision(sentence: &str) -> bool {
    is_decision_n(sentence, &Norm::new(sentence))
}

pub(crate) fn is_decision_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n) && is_decision_norm(n)
}

/// Why a decision was made: the clause from "because", "since", "so that",
/// "due to" or "as it" to the end of the sentence (a slice of it).
pub fn rationale(sentence: &str) -> Option<&str> {
    let lower = sentence.to_lowercase();
    if lower.len() != sentence.len() {
        return None;
    }
    let mut best: Option<usize> = None;
    for m in [
        " because ",
        " since ",
        " so that ",
        " due to ",
        " as it ",
        "because ",
        "since ",
    ] {
        if let Some(i) = lower.find(m) {
            // A sentence-initial marker only at position 0 ("Because…").
            if !m.starts_with(' ') && i != 0 {
                continue;
            }
            // "since Monday" is a time, not a reason.
            let next = lower[i + m.len()..].split_whitespace().next().unwrap_or("");
            if m.trim() == "since"
                && (WEEKDAYS.contains(&next)
                    || month_number(next).is_some()
                    || next.chars().any(|c| c.is_ascii_digit())
                    || next == "yesterday"
                    || next == "last")
            {
                continue;
            }
            let start = if m.starts_with(' ') { i + 1 } else { i };
            best = Some(best.map_or(start, |b: usize| b.min(start)));
        }
    }
    let start = best?;
    let clause = sentence[start..].trim().trim_end_matches(['.', '!', ';']);
    (!content_words(clause).is_empty()).then_some(clause)
}

/// Whether a sentence starts with a reason for what came before ("Because
/// it is cheaper.", "The reason is…").
pub fn is_reason(sentence: &str) -> bool {
    is_reason_n(&Norm::new(sentence))
}

pub(crate) fn is_reason_n(n: &Norm) -> bool {
    n.starts_with("because") || n.starts_with("that's because") || n.starts_with("the reason")
}

pub(crate) const STRONG_REVERSALS: &[&str] = &[
    "reverse the decision",
    "reversing the decision",
    "scratch that",
    "change of plan",
    "change of plans",
    "on second thought",
    "never mind",
    "nevermind",
    "let's not",
    "cancel that",
    "changed my mind",
    "change my mind",
    "we won't",
    "not anymore",
    "reverse that",
    "revert that",
    "forget that",
    "no longer",
];

pub(crate) fn is_reversal_norm(n: &Norm) -> bool {
    n.has_any(STRONG_REVERSALS)
        || n.has_any(&["actually", "instead", "rather than", "rather"])
            && decision_position(n).is_some()
}

/// Whether a sentence takes back an earlier decision ("actually, let's
/// not…", "…instead", "scratch that", "change of plan").
pub fn is_reversal(sentence: &str) -> bool {
    is_reversal_n(sentence, &Norm::new(sentence))
}

pub(crate) fn is_reversal_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n) && is_reversal_norm(n)
}

/// Whether a short sentence agrees with what was just said ("Agreed.",
/// "Sounds good", "+1", "Works for me", "LGTM").
pub fn is_agreement(sentence: &str) -> bool {
    is_agreement_n(sentence, &Norm::new(sentence))
}

pub(crate) fn is_agreement_n(sentence: &str, n: &Norm) -> bool {
    if is_question_norm(sentence, n) || has_negation(n) || n.words.len() > 6 {
        return false;
    }
    sentence.contains("+1")
        || sentence.contains('👍')
        || n.has_any(&[
            "agreed",
            "agree",
            "sounds good",
            "works for me",
            "yes",
            "yep",
            "ok",
            "okay",
            "sure",
            "fine by me",
            "lgtm",
            "approved",
            "i approve",
            "let's do it",
            "makes sense",
            "deal",
            "confirmed",
            "sounds great",
            "perfect",
        ])
}
