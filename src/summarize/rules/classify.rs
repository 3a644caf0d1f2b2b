//! Classification of sentences and their importance score.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

/// What a sentence (or a turn, by its most important sentence) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TurnKind {
    /// "Hi", "Good morning".
    Greeting,
    /// Asks something.
    Question,
    /// States something (the default).
    Answer,
    /// Commits to, requests or reports work.
    Action,
    /// Decides something.
    Decision,
    /// Reports a problem.
    Complaint,
    /// Says the problem is solved.
    Resolution,
    /// Thanks, okay, pleasantries.
    SmallTalk,
}

impl TurnKind {
    /// Importance in 0..=1: decisions, actions, resolutions and complaints
    /// matter most; greetings and small talk least. Statements that carry an
    /// identifier, amount or date count more than bare ones.
    pub fn importance(self, has_entity: bool) -> f32 {
        match self {
            TurnKind::Decision => 0.9,
            TurnKind::Action | TurnKind::Resolution | TurnKind::Complaint => 0.8,
            TurnKind::Question => 0.6,
            TurnKind::Answer if has_entity => 0.7,
            TurnKind::Answer => 0.5,
            TurnKind::Greeting | TurnKind::SmallTalk => 0.1,
        }
    }
}

/// Threshold of importance for a sentence to become a key point.
pub const KEY_POINT_IMPORTANCE: f32 = 0.6;

/// Everything the engine asks of one sentence, computed from a single
/// normalization (each flag is the matching `is_*` rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cues {
    /// [`is_open_question`].
    pub open_question: bool,
    /// [`is_answer_like`].
    pub answer_like: bool,
    /// [`is_decision`].
    pub decision: bool,
    /// [`is_reversal`].
    pub reversal: bool,
    /// [`is_completion`].
    pub completion: bool,
    /// [`is_resolution`].
    pub resolution: bool,
    /// [`is_acceptance`].
    pub acceptance: bool,
    /// [`is_agreement`].
    pub agreement: bool,
    /// [`is_filler`].
    pub filler: bool,
    /// [`is_reason`].
    pub reason: bool,
    /// A commitment or a request: worth asking [`action_cue`].
    pub maybe_action: bool,
}

/// A classified sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified<'a> {
    /// The sentence (a slice of the turn).
    pub text: &'a str,
    /// What it does.
    pub kind: TurnKind,
    /// How much it matters, 0..=1.
    pub importance: f32,
    /// The rule flags.
    pub cues: Cues,
    /// Its [`content_words`].
    pub content: BTreeSet<String>,
}

/// Classifies one sentence. Order matters: a request ("can you…?") is an
/// action before it is a question; a question is not a decision or a
/// completion ("Is it fixed?"); complaints beat greetings ("Hi, my card
/// was charged twice").
pub fn classify_sentence(sentence: &str) -> TurnKind {
    kind_of(sentence, &Norm::new(sentence))
}

pub(crate) fn kind_of(sentence: &str, n: &Norm) -> TurnKind {
    if n.words.is_empty() {
        return TurnKind::SmallTalk;
    }
    if request(sentence, n).is_some() {
        return TurnKind::Action;
    }
    if is_question_norm(sentence, n) {
        return if is_small_talk_norm(n) {
            TurnKind::SmallTalk
        } else {
            TurnKind::Question
        };
    }
    if is_decision_norm(n) || is_reversal_norm(n) {
        return TurnKind::Decision;
    }
    if is_resolution_norm(n) {
        return TurnKind::Resolution;
    }
    if is_completion_norm(n) || is_commitment_norm(n) {
        return TurnKind::Action;
    }
    if is_complaint_norm(n) {
        return TurnKind::Complaint;
    }
    if is_greeting_norm(n) {
        return TurnKind::Greeting;
    }
    if is_small_talk_norm(n) {
        return TurnKind::SmallTalk;
    }
    TurnKind::Answer
}

/// Classifies a sentence, scores it and computes its cues.
pub fn classify(sentence: &str) -> Classified<'_> {
    let n = Norm::new(sentence);
    let kind = kind_of(sentence, &n);
    let cues = Cues {
        open_question: is_open_question_n(sentence, &n),
        answer_like: is_answer_like_n(sentence, &n),
        decision: is_decision_n(sentence, &n),
        reversal: is_reversal_n(sentence, &n),
        completion: is_completion_n(sentence, &n),
        resolution: is_resolution_n(sentence, &n),
        acceptance: is_acceptance_n(sentence, &n),
        agreement: is_agreement_n(sentence, &n),
        filler: is_filler_n(&n),
        reason: is_reason_n(&n),
        // Commitments, requests, and "<Name> will/to…" (see `action_cue`).
        maybe_action: is_commitment_norm(&n)
            || request(sentence, &n).is_some()
            // (after lead words and a second name: "So Ana and Lee will…").
            || n.words.iter().skip(1).take(5).any(|w| {
                matches!(
                    w.as_str(),
                    "will" | "to" | "needs" | "is" | "should" | "must"
                )
            }),
    };
    Classified {
        text: sentence,
        kind,
        importance: kind.importance(has_fact_entity(sentence)),
        cues,
        content: content_of(&n),
    }
}

/// Classifies a turn's text: every sentence, and the turn's kind is that of
/// its most important sentence (the first one on ties).
pub fn classify_text(text: &str) -> (TurnKind, Vec<Classified<'_>>) {
    let all: Vec<Classified<'_>> = sentences(text).into_iter().map(classify).collect();
    let mut best: Option<&Classified<'_>> = None;
    for c in &all {
        if best.is_none_or(|b| c.importance > b.importance) {
            best = Some(c);
        }
    }
    (best.map_or(TurnKind::SmallTalk, |b| b.kind), all)
}

/// Whether the sentence says nothing: only filler, thanks or pleasantries.
pub fn is_filler(sentence: &str) -> bool {
    is_filler_n(&Norm::new(sentence))
}

pub(crate) fn is_filler_n(n: &Norm) -> bool {
    n.words.is_empty() || (is_small_talk_norm(n) || is_greeting_norm(n)) && content_of(n).len() <= 1
}

pub(crate) const GREETINGS: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "good morning",
    "good afternoon",
    "good evening",
    "greetings",
    "howdy",
    "welcome",
    "hiya",
];

pub(crate) fn is_greeting_norm(n: &Norm) -> bool {
    GREETINGS.iter().any(|g| n.starts_with(g)) && n.words.len() <= 8
}

pub(crate) const SMALL_TALK: &[&str] = &[
    "thank you",
    "thanks",
    "how are you",
    "nice to meet",
    "have a nice day",
    "have a great day",
    "have a good day",
    "you're welcome",
    "no problem",
    "no worries",
    "sounds good",
    "ok",
    "okay",
    "cool",
    "great",
    "awesome",
    "perfect",
    "bye",
    "goodbye",
    "anything else",
    "is there anything",
    "how can i help",
    "how may i help",
    "what can i do for you",
    "happy to help",
    "glad to help",
    "let me know if",
    "appreciate it",
    "got it",
    "understood",
    "sure",
];

pub(crate) fn is_small_talk_norm(n: &Norm) -> bool {
    let content: usize = n
        .words
        .iter()
        .filter(|w| !is_stopword(w) && w.chars().count() >= 3)
        .count();
    content == 0 || n.has_any(SMALL_TALK) && content <= 2
}

/// Whether the turn's text closes the conversation ("bye", "that's all").
pub fn is_closing(text: &str) -> bool {
    Norm::new(text).has_any(&[
        "bye",
        "goodbye",
        "good bye",
        "talk soon",
        "talk to you later",
        "have a great day",
        "have a nice day",
        "have a good day",
        "have a good one",
        "that's all",
        "that is all",
        "thanks for your help",
        "thank you for your help",
        "thanks for the help",
        "see you",
        "take care",
        "closing the session",
        "closing this session",
        "end the session",
        "signing off",
    ])
}

pub(crate) const COMPLAINTS: &[&str] = &[
    "problem",
    "issue",
    "issues",
    "broken",
    "wrong",
    "not working",
    "doesn't work",
    "does not work",
    "isn't working",
    "error",
    "errors",
    "charged twice",
    "double charged",
    "duplicate charge",
    "failed",
    "failing",
    "fails",
    "can't",
    "cannot",
    "unable",
    "frustrated",
    "frustrating",
    "disappointed",
    "bug",
    "crash",
    "crashes",
    "crashed",
    "outage",
    "unacceptable",
    "still waiting",
    "never arrived",
    "missing",
    "overcharged",
    "incorrect",
];

pub(crate) fn is_complaint_norm(n: &Norm) -> bool {
    n.has_any(COMPLAINTS)
}

/// Whether a sentence reports a problem.
pub fn is_complaint(sentence: &str) -> bool {
    is_complaint_norm(&Norm::new(sentence))
}

pub(crate) fn is_resolution_norm(n: &Norm) -> bool {
    !has_negation(n)
        && n.has_any(&[
            "resolved",
            "that works",
            "it works",
            "everything works",
            "all set",
            "that solves",
            "solves my",
            "solved",
            "works now",
            "working now",
            "problem solved",
            "that did it",
            "that did the trick",
            "that fixed it",
            "fixed it",
            "issue is fixed",
            "problem is fixed",
        ])
}

/// Whether a sentence says the problem is solved.
pub fn is_resolution(sentence: &str) -> bool {
    is_resolution_n(sentence, &Norm::new(sentence))
}

pub(crate) fn is_resolution_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n) && is_resolution_norm(n)
}

pub(crate) fn has_negation(n: &Norm) -> bool {
    n.words
        .iter()
        .any(|w| w.ends_with("n't") || matches!(w.as_str(), "not" | "never" | "cannot"))
}
