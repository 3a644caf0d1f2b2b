//! Actions and owners: commitments, their owners, deadlines and priorities.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

/// Future-tense cues ("you should" among them), commitments too: after
/// them comes the verb that tells a commitment ("we'll send", "you should
/// send") from a forecast ("we'll see", "you should be fine").
const FUTURE_CUES: &[&str] = &[
    "i will",
    "i'll",
    "i'm going to",
    "i am going to",
    "i'm gonna",
    "i shall",
    "we will",
    "we'll",
    "we're going to",
    "we are going to",
    "you should",
];

/// Cues of a commitment besides the future-tense ones ([`FUTURE_CUES`]).
const COMMITMENTS: &[&str] = &[
    "let me",
    "i need to",
    "we need to",
    "you need to",
    "need to",
    "needs to",
    // Only a speaker's own "have to": "Legal would have to confirm…" and
    // "the XML has to be clear" commit nobody in the room.
    "i have to",
    "we have to",
    "you have to",
    "will follow up",
    "follow up",
    "get back to",
    "waiting for",
    "waiting on",
    "next step",
    "next steps",
    "action item",
    "todo",
    // "to do" as a noun only: "there is no way to do it" commits nobody.
    "to do list",
    "to do item",
    "to do items",
    "my to do",
    "our to do",
    "the to do",
    "i'll check",
    "let's schedule",
    "let's meet",
    "let's set up",
    "let's plan",
    "let's review",
    "let's sync",
    "let's follow up",
    "let's circle back",
];

/// Verbs that, right after a future cue, foretell a state instead of
/// committing to work: "we will see", "we'll have many options", "we will
/// be able to", "I'll need more time".
const FORECAST_VERBS: &[&str] = &[
    "have", "be", "see", "know", "need", "want", "like", "hear", "seem", "become", "happen", "end",
    "lose", "gain",
];

/// Words that may stand between a future cue and its verb ("we will
/// probably just have", "we will, we will see").
pub(crate) const FUTURE_ADVERBS: &[&str] = &[
    "also",
    "just",
    "probably",
    "definitely",
    "certainly",
    "surely",
    "then",
    "still",
    "actually",
    "simply",
    "really",
    "all",
    "maybe",
    "only",
    "both",
    "soon",
    "likely",
    "eventually",
    "basically",
    "anyway",
    "in",
    "any",
    "case",
    "we",
    "i",
    "will",
    "i'll",
    "we'll",
    "uh",
    "um",
    "ehm",
];

/// Whether every future cue of a sentence foretells a state ("we will see
/// which is faster", "we will be able to stream it") and nothing else in
/// it commits anyone: a forecast, not a commitment.
pub(crate) fn is_forecast(n: &Norm) -> bool {
    let mut any = false;
    for cue in FUTURE_CUES {
        let Some(pos) = n.find(cue) else { continue };
        any = true;
        let verb = n.words[pos + cue.split(' ').count()..]
            .iter()
            .find(|w| !FUTURE_ADVERBS.contains(&w.as_str()));
        if !verb.is_some_and(|v| FORECAST_VERBS.contains(&v.as_str())) {
            return false;
        }
    }
    any && !n.has_any(&[
        // "I'll see if I can catch her": an attempt promised.
        "see if i can",
        "see if we can",
        "need to",
        "needs to",
        "let me",
        "follow up",
        "get back to",
        "waiting for",
        "next step",
        "action item",
    ])
}

pub(crate) fn is_commitment_norm(n: &Norm) -> bool {
    // "The XML markup has to be clear" commits nobody, but "the data must
    // be removed" requires work (see `requirements.rs`).
    let required = passive_requirement(n);
    let Some(pos) = [n.find_any(FUTURE_CUES), n.find_any(COMMITMENTS), required]
        .into_iter()
        .flatten()
        .min()
    else {
        return false;
    };
    if required.is_none() && is_forecast(n) {
        return false;
    }
    // "I just hope we will join soon.": a wish, not a commitment.
    if n.words[pos.saturating_sub(3)..pos]
        .iter()
        .any(|w| matches!(w.as_str(), "hope" | "hopefully" | "wish"))
    {
        return false;
    }
    // "So you can nest things when you need to", "But, let's contact
    // anytime if you need something": the cue sits in a condition.
    if n.words[pos.saturating_sub(2)..pos].iter().any(|w| {
        matches!(
            w.as_str(),
            "if" | "when" | "whenever" | "unless" | "whether"
        )
    }) {
        return false;
    }
    // "And how much money we will use for a book": an embedded question.
    if is_progress_report(n, pos) || is_general_you(n, pos) || embedded_at(n, pos) {
        return false;
    }
    // "So I have to see", "I need to think about it": a necessity to find
    // out, not work; "I need to disconnect first": the call, not work;
    // "I don't think we need to…" doubts the necessity.
    if let Some(at) = n.find_any(&["have to", "need to", "needs to"]) {
        let verb = n.words[at + 2..]
            .iter()
            .find(|w| !FUTURE_ADVERBS.contains(&w.as_str()));
        if verb.is_some_and(|v| {
            matches!(
                v.as_str(),
                "see" | "think" | "wait" | "admit" | "say" | "disconnect" | "reconnect" | "leave"
            )
        }) || n.words[at.saturating_sub(4)..at]
            .windows(2)
            .any(|w| w[0] == "don't" && w[1] == "think")
        {
            return false;
        }
    }
    // "let me know" asks the other party for information.
    if n.has("let me know") && n.find("let me know") == Some(pos) {
        return false;
    }
    // "I won't", "we will not" — a refusal is not a commitment.
    if n.has_any(&[
        "won't",
        "will not",
        "not going to",
        "don't need to",
        "no need to",
        "will never",
    ]) {
        return false;
    }
    // A commitment to decide ("we'll use Postgres") is a decision.
    if is_decision_norm(n) {
        return false;
    }
    true
}

/// Whether a "you need to" or "you have to" at `pos` tells a reason or a
/// rule to anyone rather than asking the listener for work: "Because you
/// need to stream both video and audio.", "To buy computer equipment you
/// have to go through some formal process or whatever.", "You usually
/// have to ask twice." A plain "You need to send the form." stays.
fn is_general_you(n: &Norm, pos: usize) -> bool {
    if n.words.get(pos).map(String::as_str) != Some("you") {
        return false;
    }
    let reason = matches!(
        n.words.first().map(String::as_str),
        Some("because" | "since" | "cause" | "'cause")
    );
    reason
        || n.has_any(&[
            "or whatever",
            "usually",
            "always",
            "normally",
            "in general",
            "generally",
            "every time",
            "typically",
        ])
}

/// Whether the cue at `pos` reports what someone is waiting for ("I'm
/// waiting for the input from [ORGANIZATION1].", "he is still waiting for
/// some feedback") and no other cue follows: a status, nobody's next step.
/// A bare "Waiting for the vendor to confirm." stays an action.
fn is_progress_report(n: &Norm, pos: usize) -> bool {
    let at = |i: usize| n.words.get(i).map_or("", String::as_str);
    if at(pos) != "waiting" {
        return false;
    }
    let mut before = pos;
    while before > 0 && matches!(at(before - 1), "still" | "just" | "now" | "also" | "only") {
        before -= 1;
    }
    let reported = before > 0
        && matches!(
            at(before - 1),
            "i'm" | "am" | "is" | "are" | "we're" | "he's" | "she's" | "they're" | "was" | "were"
        );
    let rest = Norm::new(&n.words[pos + 2..].join(" "));
    reported && rest.find_any(FUTURE_CUES).is_none() && rest.find_any(COMMITMENTS).is_none()
}

/// Whether a sentence commits someone to do something.
pub fn is_commitment(sentence: &str) -> bool {
    is_commitment_norm(&Norm::new(sentence))
}

/// A pending action found in a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionCue {
    /// Who owns it.
    pub owner: OwnerCue,
}

/// The pending action in a sentence, if it commits someone ("I'll check
/// the log", "will follow up", "get back to you", "waiting for…", "next
/// step…", "need to…") or asks someone for work ("Bob, can you send the
/// deck?", "please restart the router"). Questions that only ask for
/// information, refusals and bare acceptances ("Will do.") are not actions.
/// `participants` are the known speaker ids, to recognise "Alice will…".
pub fn action_cue(sentence: &str, participants: &[String]) -> Option<ActionCue> {
    // Transcription markers are no words ("Transformer, <unint/> …").
    let cleaned = strip_markers(sentence);
    let sentence = cleaned.as_str();
    let n = Norm::new(sentence);
    if let Some(owner) = request(sentence, &n) {
        let owner = match owner {
            OwnerCue::Named(name) => OwnerCue::Named(resolve_name(&name, participants)),
            o => o,
        };
        return Some(ActionCue { owner });
    }
    if is_question_norm(sentence, &n) {
        return None;
    }
    if let Some(owner) = participant_subject(&n, participants) {
        if !has_negation(&n) && !is_decision_norm(&n) && n.words.len() > 2 {
            return Some(ActionCue { owner });
        }
    }
    if let Some(owner) = named_subject(sentence, &n, participants) {
        return Some(ActionCue { owner });
    }
    if !is_commitment_norm(&n) {
        return None;
    }
    // A bare acceptance carries no action of its own.
    let cue_words: BTreeSet<&str> = [
        "will", "do", "follow", "up", "get", "back", "need", "needs", "next", "step", "steps",
        "waiting", "action", "item", "todo", "going", "let", "check", "sure",
    ]
    .into_iter()
    .collect();
    let substantive = content_words(sentence)
        .iter()
        .any(|w| !cue_words.contains(w.as_str()) || w == "check");
    if !substantive && !n.has_any(&["i'll check", "get back to", "follow up", "let me check"]) {
        return None;
    }
    let owner = owner_of_commitment(sentence, &n, participants);
    Some(ActionCue { owner })
}

/// "Alice will…", "Alice to draft…", "Alice needs to…": a known
/// participant as the subject. Unknown capitalized words are not taken:
/// they are too often nouns ("Refund will be processed").
pub(crate) fn participant_subject(n: &Norm, participants: &[String]) -> Option<OwnerCue> {
    let w = |i: usize| n.words.get(i).map_or("", String::as_str);
    // "So [PERSON6] will…", "And Ana and Lee should…": the lead words of
    // speech come before the subject.
    let mut i = 0;
    while matches!(
        w(i),
        "so" | "and"
            | "then"
            | "well"
            | "okay"
            | "ok"
            | "yeah"
            | "yes"
            | "also"
            | "now"
            | "uh"
            | "um"
            | "ehm"
    ) {
        i += 1;
    }
    let named = |k: usize| {
        !w(k).is_empty() && !is_stopword(w(k)) && matches_participant(w(k), participants)
    };
    let subject_at = |i: usize| {
        if !named(i) {
            return false;
        }
        // "Ana and Lee should…": the first one named owns it.
        let mut verb = i + 1;
        if w(verb) == "and" && named(verb + 1) {
            verb += 2;
        }
        // "So, uh, [PERSON10] himself will finish…", "Ana then will…".
        while matches!(
            w(verb),
            "himself" | "herself" | "themselves" | "also" | "then" | "first" | "now" | "still"
        ) {
            verb += 1;
        }
        match w(verb) {
            "will" | "to" | "needs" | "should" | "must" => true,
            // "Ana is going to…", "Ana is to…" ("Ana is on leave" and "Ana
            // is coming back" commit nobody).
            "is" => matches!(w(verb + 1), "going" | "to"),
            _ => false,
        }
    };
    if subject_at(i) {
        return Some(OwnerCue::Named(resolve_name(w(i), participants)));
    }
    None
}

/// "And with [PERSON8] and [PERSON3], [PERSON10] will synchronize about
/// the tools", "So I think Marco should send the figures": a person named
/// anywhere in the sentence (a `[PERSONn]` placeholder, or a speaker's
/// capitalized name after the first word) as the subject of "will" or "should" and a verb of work
/// (not "be", "have", "see"…). The owner is that person when they speak in
/// the session; otherwise the work is unassigned: someone talked about is
/// neither a speaker nor addressed.
fn named_subject(sentence: &str, n: &Norm, participants: &[String]) -> Option<OwnerCue> {
    if has_negation(n) || is_decision_norm(n) {
        return None;
    }
    let spans = word_spans(sentence);
    let w = |i: usize| spans.get(i).map_or("", |(_, w)| w.as_str());
    for (k, (start, word)) in spans.iter().enumerate() {
        // The word as written (lower-casing may change its byte length).
        let written = sentence[*start..]
            .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
            .next()
            .unwrap_or("");
        let placeholder = sentence[..*start].ends_with('[') && word.starts_with("person");
        // Capitalized words are too often bodies and bills ("HEFCW will
        // face changes", "the Bill will provide…"): only speakers count.
        let name = placeholder
            || k > 0
                && written.starts_with(char::is_uppercase)
                && is_person_name(written)
                && matches_participant(word, participants);
        if !name {
            continue;
        }
        let mut at = k + 1;
        while matches!(
            w(at),
            "himself" | "herself" | "also" | "then" | "first" | "now"
        ) {
            at += 1;
        }
        if !matches!(w(at), "will" | "should") {
            continue;
        }
        at += 1;
        while FUTURE_ADVERBS.contains(&w(at)) {
            at += 1;
        }
        let verb = w(at);
        if verb.is_empty() || FORECAST_VERBS.contains(&verb) || is_stopword(verb) {
            continue;
        }
        return Some(if matches_participant(word, participants) {
            OwnerCue::Named(resolve_name(word, participants))
        } else {
            OwnerCue::Unassigned
        });
    }
    None
}

pub(crate) fn owner_of_commitment(sentence: &str, n: &Norm, participants: &[String]) -> OwnerCue {
    if let Some(name) = addressed_name(sentence) {
        if sentence.contains(&format!("@{name}")) || matches_participant(name, participants) {
            return OwnerCue::Named(resolve_name(name, participants));
        }
    }
    if let Some(owner) = participant_subject(n, participants) {
        return owner;
    }
    let first_person = [
        "i", "i'll", "i'm", "i've", "we", "we'll", "we're", "let", "i'd",
    ];
    if n.has_any(&[
        "you need to",
        "you'll need to",
        "you will need to",
        "you should",
    ]) {
        return OwnerCue::Addressee;
    }
    if n.words.iter().any(|w| first_person.contains(&w.as_str()))
        && !n.has("let me know")
        && !n.has("let's")
    {
        return OwnerCue::Speaker;
    }
    OwnerCue::Unassigned
}

/// Splits a sentence addressed to several people into one clause each:
/// "Marco, please prepare X, and Lee, rerun Y" → two clauses. A clause
/// break is ", and " or "; " followed by a vocative; otherwise the
/// sentence is one clause. Clauses are slices of the sentence.
pub fn clauses(sentence: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some((at, sep)) = [", and ", "; and ", "; "]
        .iter()
        .filter_map(|sep| sentence[search..].find(sep).map(|i| (search + i, *sep)))
        .min()
    {
        let rest = &sentence[at + sep.len()..];
        if vocative(rest).is_some() {
            out.push(sentence[start..at].trim());
            start = at + sep.len();
        }
        search = at + sep.len();
    }
    out.push(sentence[start..].trim());
    out.retain(|c| !c.is_empty());
    out
}

/// Whether a sentence accepts or starts work without naming it ("Will
/// do.", "On it.", "Working on it."): the speaker's latest action is now in
/// progress.
pub fn is_acceptance(sentence: &str) -> bool {
    is_acceptance_n(sentence, &Norm::new(sentence))
}

pub(crate) fn is_acceptance_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n)
        && !has_negation(n)
        && (is_started_n(n)
            || n.has_any(&[
                "will do",
                "i'll do it",
                "i'll do that",
                "i'll take care of it",
                "i'll handle it",
                "i'll look into it",
            ]))
}

/// Whether an acceptance says the work has started ("On it", "Working on
/// it"), not only that it will be done ("Will do" keeps it PENDING).
pub fn is_started(sentence: &str) -> bool {
    is_started_n(&Norm::new(sentence))
}

pub(crate) fn is_started_n(n: &Norm) -> bool {
    n.has_any(&[
        "on it",
        "i'm on it",
        "working on it",
        "in progress",
        "started on",
        "starting on",
        "looking into it",
        "started working",
    ])
}
