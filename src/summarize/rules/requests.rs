//! Requests and the names they address: who is asked to do something
//! ("Marco, please send…", "@ana can you…", "would you mind sending…"),
//! what is only asked about (a state, information, a preference or an
//! offer of help), and how a written name resolves to a participant.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

/// Who owns an action, as far as the sentence tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerCue {
    /// The speaker ("I will…", "we'll…").
    Speaker,
    /// The person spoken to, not named ("can you…", "please…").
    Addressee,
    /// Named: a vocative ("Bob, can you…"), a mention ("@bob") or a known
    /// participant as subject ("Alice will…", "Alice to…"). The name as
    /// written, or the participant id when it matches one.
    Named(String),
    /// Nobody ("next step is…", "waiting for…").
    Unassigned,
}

/// Verbs of a request that asks for information, not work: "can you tell
/// me…?" is a question; "can you send the file?" is an action.
pub(crate) const INFO_VERBS: &[&str] = &[
    "tell",
    "give",
    "confirm",
    "provide",
    "share",
    "clarify",
    "explain",
    "describe",
    "specify",
    "remind",
    "advise",
    "let",
    "repeat",
    "spell",
    "help",
    "say",
    "answer",
    "expand",
    "elaborate",
    "comment",
];

/// Verbs after "would you" / "do you" that ask what the one spoken to
/// prefers, or offer the speaker's help: "would you like to purchase
/// tickets?", "would you like me to book it?".
const PREFERENCE_VERBS: &[&str] = &["like", "love", "prefer", "want", "care", "rather"];

/// The base of an "-ing" verb, as far as the request checks need it
/// ("saying" → "say", "giving" → "give", "sending" → "send"); the word
/// itself when it is no "-ing" form.
fn base_of_gerund(word: &str) -> &str {
    let Some(stem) = word.strip_suffix("ing") else {
        return word;
    };
    // "giving", "sharing", "describing": the verb ends in a silent "e"
    // that the "-ing" form drops; look it up with the "e" back on.
    INFO_VERBS
        .iter()
        .chain(STATE_VERBS)
        .find(|v| v.strip_suffix('e') == Some(stem))
        .copied()
        .unwrap_or(stem)
}

/// Verbs of a request that asks about a state, not for work: "can you see
/// the charge?".
const STATE_VERBS: &[&str] = &[
    "see", "hear", "be", "believe", "imagine", "access", "remember", "read",
];

/// Verbs after "please" that ask for patience, not work.
pub(crate) const NON_TASK_VERBS: &[&str] = &[
    "let", "note", "hold", "wait", "be", "feel", "see", "accept", "allow", "bear", "find", "stand",
    "keep", "enjoy",
];

/// Connectives that open a sentence of a list of asks ("Furthermore,
/// suggest…"): no one is addressed, the ask is the listener's.
const ASK_CONNECTIVES: &[&str] = &[
    "furthermore",
    "moreover",
    "additionally",
    "also",
    "lastly",
    "finally",
    "secondly",
    "thirdly",
    "plus",
    "besides",
];

/// Whether `w` (lower case) is a discourse word or a connective: it
/// stands before a comma in speech but names nobody.
fn is_discourse_word(w: &str) -> bool {
    DISCOURSE_WORDS.contains(&w) || ASK_CONNECTIVES.contains(&w)
}

/// Words that start sentences with a comma but are not names.
pub(crate) const DISCOURSE_WORDS: &[&str] = &[
    "although",
    "though",
    "since",
    "because",
    "while",
    "whereas",
    "anyway",
    "besides",
    "meanwhile",
    "therefore",
    "yes",
    "no",
    "ok",
    "okay",
    "sure",
    "thanks",
    "well",
    "also",
    "so",
    "actually",
    "hi",
    "hello",
    "hey",
    "great",
    "alright",
    "right",
    "now",
    "then",
    "first",
    "next",
    "finally",
    "please",
    "however",
    "otherwise",
    "fine",
    "perfect",
    "cool",
    "agreed",
    "done",
    "honestly",
    "unfortunately",
    "sorry",
    "besides",
    "again",
    "anyway",
    "yeah",
    "yep",
    "nope",
    "oh",
    "um",
    "uh",
    "wait",
    "look",
    "listen",
    "good",
    "today",
    "tomorrow",
    "meanwhile",
    "instead",
    "awesome",
    "understood",
    "noted",
    "sounds",
    "got",
    "sir",
    "madam",
    "team",
    "everyone",
    "all",
    "guys",
    "folks",
    "friends",
    "note",
    "btw",
    "thank",
    "but",
    "and",
    "or",
    "if",
    "once",
    "when",
];

/// Resolves a written name to a participant id (case-insensitive; also
/// "bob" for "bob.smith" or "bob-7"), or returns it as written.
pub fn resolve_name(name: &str, participants: &[String]) -> String {
    let lower = name.trim_start_matches('@').to_lowercase();
    for p in participants {
        let pl = p.to_lowercase();
        if pl == lower {
            return p.clone();
        }
    }
    for p in participants {
        let pl = p.to_lowercase();
        if pl.starts_with(&lower) && pl[lower.len()..].starts_with(|c: char| !c.is_alphanumeric()) {
            return p.clone();
        }
    }
    name.trim_start_matches('@').to_string()
}

pub(crate) fn matches_participant(name: &str, participants: &[String]) -> bool {
    let lower = name.to_lowercase();
    participants.iter().any(|p| {
        let pl = p.to_lowercase();
        pl == lower
            || pl.starts_with(&lower)
                && pl[lower.len()..].starts_with(|c: char| !c.is_alphanumeric())
    })
}

/// A vocative at the start of a sentence: one or two capitalized words
/// (or an "@name") before the first comma, after an optional greeting
/// ("Hey Bob, …"). Returns the name and the rest of the sentence.
pub(crate) fn vocative(sentence: &str) -> Option<(&str, &str)> {
    let s = sentence.trim();
    let comma = s.find(',')?;
    let mut head = s[..comma].trim();
    for g in ["Hey ", "Hi ", "Hello ", "OK ", "Ok ", "Okay ", "So "] {
        if let Some(rest) = head.strip_prefix(g) {
            head = rest.trim();
        }
    }
    let parts: Vec<&str> = head.split_whitespace().collect();
    let name_like = |w: &str| {
        w.chars()
            .next()
            .is_some_and(|c| c.is_uppercase() || c == '@')
            && w.chars()
                .all(|c| c.is_alphanumeric() || "-_.@'".contains(c))
            && !is_discourse_word(&w.trim_start_matches('@').to_lowercase())
    };
    ((1..=2).contains(&parts.len()) && parts.iter().all(|w| name_like(w)))
        .then(|| (head.trim_start_matches('@'), &s[comma + 1..]))
}

/// A verb that asks for work when it opens what is said to someone
/// ("Raj, add the index", "Furthermore, suggest some activities"): a verb
/// of work or of an ask. Any other word there is not taken for one: after
/// a word and a comma, English mostly goes on with a list or a clause
/// ("Comfortable, flexible clothing is essential", "Absolutely, fashion
/// is…"), and the word before the comma then names nobody.
fn is_asked_verb(w: &str) -> bool {
    super::act_words::WORK_VERBS.contains(&w)
        || matches!(
            w,
            "suggest" | "recommend" | "provide" | "list" | "give" | "fetch" | "retrieve"
        )
}

/// "Let me know how the dinner goes", "let me know what the vet says": a
/// report on something named is asked of the listener ("let me know if
/// you need anything" asks nothing).
pub(crate) fn report_asked(n: &Norm) -> bool {
    let Some(at) = n.find("let me know") else {
        return false;
    };
    let wh = n.words.get(at + 3).map_or("", String::as_str);
    matches!(wh, "how" | "what" | "when" | "where" | "whether" | "which")
        && n.words[at + 4..]
            .iter()
            .filter(|w| !is_stopword(w) && w.chars().count() >= 3)
            .count()
            >= 1
}

/// What follows a connective that opens a sentence ("Furthermore, …",
/// "Additionally, …"), or `None`.
fn after_connective(sentence: &str) -> Option<&str> {
    let (head, rest) = sentence.trim_start().split_once(',')?;
    ASK_CONNECTIVES
        .contains(&head.trim().to_lowercase().as_str())
        .then_some(rest)
}

/// The first "@name" mention of a sentence, without the '@'.
pub(crate) fn mention(sentence: &str) -> Option<&str> {
    sentence.split_whitespace().find_map(|tok| {
        let name = tok
            .strip_prefix('@')?
            .trim_end_matches(|c: char| !c.is_alphanumeric());
        (!name.is_empty() && !name.contains('@')).then_some(name)
    })
}

/// The name a sentence addresses: "Bob, can you…", "Hey Bob, please…",
/// or an "@bob" mention anywhere. Returns the name as written (without
/// the '@').
pub fn addressed_name(sentence: &str) -> Option<&str> {
    vocative(sentence)
        .map(|(name, _)| name)
        .or_else(|| mention(sentence))
}

/// The request in a sentence ("can you…", "could you…", "please…"),
/// unless it only asks for information. Returns who is asked.
pub(crate) fn request(sentence: &str, n: &Norm) -> Option<OwnerCue> {
    if report_asked(n) {
        return Some(OwnerCue::Addressee);
    }
    // "Furthermore, suggest some activities…": a connective leads a list
    // of asks; what follows is asked of the one spoken to.
    if let Some(rest) = after_connective(sentence) {
        // A verb of work or of an ask ("find", "suggest"), not a recipe's
        // step ("Finally, fold in the flour").
        let first = words(rest).into_iter().next().unwrap_or_default();
        if is_asked_verb(&first)
            && rest.trim_start().starts_with(|c: char| c.is_lowercase())
            && !rest.trim_end().ends_with('?')
            && !has_negation(n)
        {
            return Some(OwnerCue::Addressee);
        }
    }
    // Skip a vocative so "Bob, can you…" reads as "can you…".
    let (named, body) = match vocative(sentence) {
        Some((name, rest)) => (Some(name), rest),
        // "@bob please…": the mention leads like a vocative.
        None => match sentence.trim_start().strip_prefix('@') {
            Some(rest) => (
                mention(sentence),
                rest.split_once(' ').map_or("", |(_, r)| r),
            ),
            None => (mention(sentence), sentence),
        },
    };
    let mut body_words = words(body);
    // "And please add…", "So can you send…": lead words of speech first.
    let lead = body_words
        .iter()
        .take_while(|w| matches!(w.as_str(), "and" | "so" | "also" | "then" | "now" | "well"))
        .count();
    if matches!(
        body_words.get(lead).map(String::as_str),
        Some("please" | "can" | "could" | "would" | "will")
    ) {
        body_words.drain(..lead);
    }
    let w = |i: usize| body_words.get(i).map_or("", String::as_str);
    let verb_at = match (w(0), w(1)) {
        ("can" | "could" | "would" | "will", "you" | "u") => 2,
        ("can" | "could", "someone" | "anyone" | "somebody") => 2,
        ("please", _) => 1,
        // "Raj, add the index…": a name, then a bare verb.
        (first, _) if named.is_some() && vocative(sentence).is_some() && !first.is_empty() => {
            // Not a verb: a filler ("Fin, aha I see"), a capitalized noun
            // ("Transformer, [PROJECT2]"), or a question ("July, August?").
            let capitalized = body
                .trim_start_matches(|c: char| !c.is_alphanumeric())
                .starts_with(char::is_uppercase);
            // A bare verb after a name addresses one person by one
            // name: a capitalized phrase ("Ninja Homer, made in Japan")
            // or a count ("Six, seven, eight") before a comma is no
            // vocative.
            let one_name = named.is_some_and(|n| n.split_whitespace().count() == 1);
            // "Insertions, deletions, or…", "LDA , neural nets , they're
            // good": a list, not an address.
            let listed = body
                .split(',')
                .next()
                .is_some_and(|head| head.split_whitespace().count() <= 2 && body.contains(','));
            if is_stopword(first)
                || !one_name
                || listed
                || is_discourse_word(first)
                || is_adverb(first)
                || is_number_word(first)
                || named.is_some_and(|n| is_number_word(&n.to_lowercase()))
                || first.ends_with("ing")
                || first.ends_with("ed")
                || is_empty_word(first)
                || capitalized
                || sentence.trim_end().ends_with('?')
                || !is_asked_verb(first)
            {
                return None;
            }
            0
        }
        _ => return None,
    };
    // "could you please send" → the verb after "please".
    let verb_at = if w(verb_at) == "please" {
        verb_at + 1
    } else {
        verb_at
    };
    // "Would you mind saying the city again?": the request is the verb
    // after "mind", in its "-ing" form.
    let (verb_at, gerund) = if w(verb_at) == "mind" {
        (verb_at + 1, true)
    } else {
        (verb_at, false)
    };
    let verb = if gerund {
        base_of_gerund(w(verb_at))
    } else {
        w(verb_at)
    };
    // "Would you like to hear the showtimes?", "would you like me to book
    // it?", "would you prefer the aisle?": a preference asked or an offer
    // made, no work asked of the one spoken to.
    if PREFERENCE_VERBS.contains(&verb) {
        return None;
    }
    // "Would you consider yourself a lucky person?", "would you describe
    // yourself as…": the one spoken to is asked about themselves, not for
    // work ("would you consider moving the meeting?" stays a request).
    if w(verb_at + 1) == "yourself" {
        return None;
    }
    // "Please, a question and then…": no verb is asked for.
    let determiner = matches!(
        verb,
        "a" | "an" | "the" | "this" | "that" | "these" | "those" | "my" | "your" | "some" | "any"
    );
    if verb.is_empty() || determiner || INFO_VERBS.contains(&verb) || has_negation(n) {
        return None;
    }
    if w(0) == "please" && NON_TASK_VERBS.contains(&verb) {
        return None;
    }
    // "Can you see the charge?" asks about a state, not for work.
    if STATE_VERBS.contains(&verb) {
        return None;
    }
    if matches!(w(1), "someone" | "anyone" | "somebody") {
        return Some(OwnerCue::Unassigned);
    }
    Some(match named {
        Some(name) => OwnerCue::Named(name.to_string()),
        None => OwnerCue::Addressee,
    })
}
