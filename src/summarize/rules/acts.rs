//! The dialogue-act gate: how sure we are that a sentence the cue rules
//! picked (an action, a decision, an open question) really is one, as a
//! confidence in 0..=1. The cue rules find candidates; this gate decides
//! whether a candidate is listed, so a summary says only what is true.
//!
//! Precision first. An item needs positive evidence of its act:
//! - a **commitment**: a first-person future or intent ("I'll", "let me",
//!   "I'm going to") followed by a verb of work and something to do it to;
//! - a **request**: a work verb asked of the listener ("can you send…",
//!   "please change…", "Ana, book…");
//! - a **decision**: a settled plan or choice with concrete content;
//! - an **open question**: an information question with substance, not a
//!   social or rhetorical move.
//!
//! and loses confidence for what marks talk that commits nobody: hedges
//! ("maybe", "someday"), aspirations and attitudes ("keep pushing", "never
//! forget"), cheering ("Let's keep the good vibes rolling!"), social moves
//! ("Take care!", "How about you?"). A time, an identifier or an amount, or
//! a transactional verb (send, book, cancel, refund…), adds confidence:
//! they are what someone can later check.
//!
//! Pure functions of the sentence, so a confidence is the same whenever it
//! is computed: at fold time for the summary, and at read time for an item
//! carried from an earlier session (`bundle` ranks and filters by it).

use super::act_words::{
    HABITS, HEDGES, INTENTS, INTENT_ADVERBS, INTERJECTIONS, LETS_ATTITUDE, NOT_WORK, ON_THE_SPOT,
    REST, SOCIAL, SOCIAL_QUESTIONS, TIME_WORDS, TRANSACTIONAL, VAGUE, WORK_VERBS,
};
use super::*;

/// Least confidence for an item to be listed.
pub const LIST_CONFIDENCE: f32 = 0.5;

/// Whether a sentence cheers or reacts and says nothing checkable: an
/// exclamation with an interjection or a social phrase and no date,
/// amount or identifier ("Woohoo, congrats James!", "Wow, looks
/// awesome!").
pub fn is_cheer(sentence: &str) -> bool {
    let cleaned = strip_markers(sentence);
    let n = Norm::new(&cleaned);
    let exclaims = cleaned.trim_end().ends_with('!');
    exclaims
        && !is_dated(&cleaned, &n)
        && (n.words.iter().any(|w| has_word(INTERJECTIONS, w)) || n.has_any(SOCIAL))
}

/// Whether a word can name what a conversation was about: not a filler,
/// an interjection, a number word or a verb of attitude ("keep").
pub fn is_topic_word(lower: &str) -> bool {
    lower.chars().count() >= 3
        && !is_stopword(lower)
        && !is_empty_word(lower)
        && !is_number_word(lower)
        && !is_adverb(lower)
        && !has_word(INTERJECTIONS, lower)
        && !has_word(NOT_WORK, lower)
        && !has_word(VAGUE, lower)
}

/// What kind of act a candidate item claims to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// A pending action: a commitment or a request.
    Action,
    /// A decision.
    Decision,
    /// An open question.
    Question,
}

/// Confidence in 0..=1 that `sentence` is the act `act` claims.
pub fn confidence(act: Act, sentence: &str) -> f32 {
    let cleaned = strip_markers(sentence);
    let n = Norm::new(&cleaned);
    if n.words.is_empty() {
        return 0.0;
    }
    let score = match act {
        Act::Action => action_score(&cleaned, &n),
        Act::Decision => decision_score(&cleaned, &n),
        Act::Question => question_score(&cleaned, &n),
    };
    score.clamp(0.0, 1.0)
}

/// Whether `sentence` passes the gate for `act`.
pub fn is_listed(act: Act, sentence: &str) -> bool {
    confidence(act, sentence) >= LIST_CONFIDENCE
}

fn has_word(list: &[&str], w: &str) -> bool {
    list.contains(&w)
}

/// Whether a time or a checkable entity (identifier, amount, date) occurs.
fn is_dated(text: &str, n: &Norm) -> bool {
    // A number that starts a word ("10", "3pm", "2024-06-14"), not one
    // inside a name ("v4_sports").
    n.has_any(TIME_WORDS)
        || has_fact_entity(text)
        || n.words
            .iter()
            .any(|w| w.starts_with(|c: char| c.is_ascii_digit()) && w.chars().count() <= 10)
}

/// The first word after `at` that is not an adverb of the intent; "go
/// ahead and" is skipped ("I'll go ahead and cancel it").
fn verb_after(n: &Norm, at: usize) -> Option<(usize, &str)> {
    let mut i = at;
    while let Some(w) = n.words.get(i) {
        let w = w.as_str();
        if FUTURE_ADVERBS.contains(&w) || INTENT_ADVERBS.contains(&w) {
            i += 1;
        } else if w == "go" && n.words.get(i + 1).is_some_and(|x| x == "ahead") {
            i += 2;
            if n.words.get(i).is_some_and(|x| x == "and") {
                i += 1;
            }
        } else {
            return Some((i, w));
        }
    }
    None
}

/// Content words after position `at` that are something to act on.
fn objects_after(n: &Norm, at: usize) -> usize {
    n.words[at.min(n.words.len())..]
        .iter()
        .filter(|w| !is_stopword(w) && !has_word(VAGUE, w) && w.chars().count() >= 3)
        .count()
}

/// Whether the word at `at` is a person the work is done to ("I'll call
/// him", "I'll see if I can catch her"): as checkable as a named one.
fn person_object(n: &Norm, at: usize) -> bool {
    n.words
        .get(at)
        .is_some_and(|w| matches!(w.as_str(), "him" | "her" | "them"))
}

/// Content words before position `at`.
fn objects_before(n: &Norm, at: usize) -> usize {
    n.words[..at.min(n.words.len())]
        .iter()
        .filter(|w| !is_stopword(w) && !has_word(VAGUE, w) && w.chars().count() >= 3)
        .count()
}

/// Marks of talk that commits nobody: cheering, hedges, exclamation-only.
fn social_penalty(text: &str, n: &Norm) -> f32 {
    let mut p = 0.0;
    if n.has_any(SOCIAL) {
        p += 0.45;
    }
    if hedged(n) {
        p += 0.3;
    }
    let exclaims = text.trim_end().ends_with('!');
    if exclaims && !is_dated(text, n) {
        p += 0.15;
    }
    p
}

/// Whether the sentence hedges ("maybe", "if I can"); "I'll see if I can
/// catch her" promises an attempt, which is work someone can check.
fn hedged(n: &Norm) -> bool {
    HEDGES
        .iter()
        .any(|h| n.has(h) && !(*h == "if i can" && n.has("see if i can")))
}

/// "If you need anything, I'll…": work promised on a condition.
fn conditional_penalty(n: &Norm) -> f32 {
    // "I'll see if I can…" tries; it sets no condition.
    let condition = n.has_any(&["unless", "whenever", "in case"])
        || n.words
            .iter()
            .enumerate()
            .any(|(i, w)| w == "if" && (i == 0 || n.words[i - 1] != "see"));
    if condition {
        0.15
    } else {
        0.0
    }
}

/// "- Overview: complete strangers band together to find…": a field of a
/// listing the agent presents (a tool's result retold), not anyone's
/// commitment.
fn is_listing_field(text: &str) -> bool {
    let t = text.trim_start();
    let Some(rest) = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| t.strip_prefix("• "))
    else {
        return false;
    };
    // "- Action item: Ana sends the deck" is a minute's action.
    rest.split_once(':').is_some_and(|(label, _)| {
        let label = label.to_lowercase();
        (1..=3).contains(&label.split_whitespace().count())
            && !["action", "todo", "to do", "next step", "task", "follow"]
                .iter()
                .any(|w| label.contains(w))
    })
}

fn action_score(text: &str, n: &Norm) -> f32 {
    if is_listing_field(text) {
        return 0.0;
    }
    if let Some(s) = request_score(text, n) {
        return s;
    }
    if is_question_norm(text, n) {
        return 0.0;
    }
    // "Alice will send…", "Ana to draft…": a named participant's work is
    // judged by the verb the cue rules found; here, by its content.
    let Some(at) = INTENTS
        .iter()
        .filter_map(|i| n.find(i).map(|p| (p, i.split(' ').count())))
        .min_by_key(|&(p, _)| p)
    else {
        return third_person_score(text, n);
    };
    let (pos, len) = at;
    let Some((mut vat, mut verb)) = verb_after(n, pos + len) else {
        return 0.0;
    };
    // "I'll see if I can drag him out": the attempt's verb is the work.
    if verb == "see"
        && matches!(
            n.words.get(vat + 1..vat + 4),
            Some([a, b, c]) if a == "if" && (b == "i" || b == "we") && c == "can"
        )
    {
        if let Some((v_at, v)) = verb_after(n, vat + 4) {
            (vat, verb) = (v_at, v);
        }
    }
    if let Some(s) = report_promise(text, n, pos, vat) {
        return s;
    }
    if let Some(s) = dated_visit(text, n, vat) {
        return s;
    }
    // "the church I am going to this morning": "going to" a place.
    if has_word(NOT_WORK, verb) || is_stopword(verb) {
        return 0.1;
    }
    // "I'll try again shortly" retries; "I will try a different approach"
    // only tries.
    let next = n.words.get(vat + 1).map_or("", String::as_str);
    if verb == "try" && !matches!(next, "again" | "to" | "and") {
        return 0.1;
    }
    // A verb of work we know, or any other verb (the lists cannot name
    // every trade's work: "I'll rotate the keys").
    let mut s: f32 = if has_word(WORK_VERBS, verb) { 0.5 } else { 0.4 };
    if has_word(TRANSACTIONAL, verb) {
        s += 0.15;
    }
    // What the work is done to: after the verb ("send the photos"), or
    // named before the intent ("Off-by-one in the loop. I'll fix it.").
    if objects_after(n, vat + 1) > 0 || person_object(n, vat + 1) {
        s += 0.1;
    } else if objects_before(n, pos) == 0 {
        s -= 0.25;
    }
    if is_dated(text, n) {
        s += 0.2;
    }
    let intent = n.words[pos..pos + len].join(" ");
    // "I have to write a contract for the project": an obligation told,
    // not work promised to the listener; it takes a date to be a plan.
    if matches!(intent.as_str(), "i need to" | "i have to" | "i must") {
        s -= 0.3;
    }
    // "Let me check…" is mostly done at once; "let me send you my
    // favourite one!" and "I'll show you" are done in the turn itself.
    if intent == "let me" {
        s -= 0.15;
    }
    let to_you = n.words.get(vat + 1).is_some_and(|w| w == "you");
    if has_word(ON_THE_SPOT, verb) && (to_you || intent == "let me") && !is_dated(text, n) {
        s -= 0.3;
    }
    // "Now" before the verb ("I will now retrieve the address", "Now I'm
    // gonna shower") is the step being taken; after it, it marks what is
    // done on the spot unless the verb is work someone can check ("I'll
    // request it from Helen now" is a step an agent then takes). "I'm
    // gonna work on that for a bit" is an activity, not something anyone
    // can later check was done.
    let from_now = n.has_any(&["from now", "by now", "until now", "till now"]);
    let now_at = n
        .words
        .iter()
        .position(|w| w == "now")
        .filter(|_| !from_now);
    let on_the_spot = now_at.is_some_and(|at| at < vat || !has_word(WORK_VERBS, verb));
    if on_the_spot || n.has_any(&["for a bit", "for a while"]) {
        s -= 0.3;
    }
    // "I'm gonna take a quick nap": rest, not work.
    if n.words[vat..(vat + 6).min(n.words.len())]
        .iter()
        .any(|w| has_word(REST, w))
    {
        s -= 0.3;
    }
    // "I'll try using the search function": a tool about to be called.
    if n.has_any(&["function", "tool", "api", "endpoint"]) {
        s -= 0.3;
    }
    // "I can" offers in support ("I can rebook you on…"), but in chat it
    // mostly states an ability ("I can relate").
    if n.words.get(pos).is_some_and(|w| w == "i")
        && n.words.get(pos + 1).is_some_and(|w| w == "can")
        && !n.has("for you")
    {
        s -= 0.2;
    }
    s - social_penalty(text, n) - conditional_penalty(n) - habit_penalty(n)
}

/// Verbs of a promise to report back: "let you know", "keep you posted".
const REPORTS: &[&str] = &[
    "let you know",
    "keep you posted",
    "keep you updated",
    "keep you in the loop",
    "update you",
    "get back to you",
    "fill you in",
];

/// "I'll let you know how it turns out when I make it", "as soon as I
/// name it I will let you know", "I'll keep you posted about that": a
/// report promised on something named (what follows, a condition before,
/// or a date) is a commitment; a bare "I'll keep ya posted." is a
/// pleasantry. `None` when the intent's verb promises no report.
fn report_promise(text: &str, n: &Norm, pos: usize, vat: usize) -> Option<f32> {
    // The report is the intent's verb ("I'll keep you posted…") or ends
    // the clause's plan ("I'll see if I can drag him out and let you know
    // tomorrow").
    let (at, len) = REPORTS
        .iter()
        .filter_map(|r| n.find(r).map(|p| (p, r.split(' ').count())))
        .filter(|&(p, _)| p >= vat)
        .min()?;
    let after = at + len;
    let next = n.words.get(after).map_or("", String::as_str);
    let named_after = match next {
        "how" | "if" | "whether" | "what" | "when" | "once" | "where" | "who" | "which" => {
            objects_after(n, after + 1) >= 1
        }
        // "about that" points at what was just said.
        "about" | "on" => n.words.len() > after + 1,
        _ => false,
    };
    // "As soon as I get one and name it I will…": the report waits on
    // something said before the intent.
    let named_before = n.words[..pos]
        .iter()
        .any(|w| matches!(w.as_str(), "once" | "when" | "after" | "soon"))
        && objects_before(n, pos) >= 1;
    // A plan of its own before the report ("I'm going to a shelter this
    // week and let you know how it goes") was judged by the caller.
    if !(named_after || named_before || is_dated(text, n)) {
        // Bare, the report is a pleasantry; after a plan of its own the
        // plan is judged as any other.
        return (at == vat).then_some(0.1);
    }
    // The report phrase itself is on the list of social talk; only the
    // rest of the sentence is judged for it.
    let social = SOCIAL
        .iter()
        .any(|p| !p.contains(" posted") && !p.contains(" updated") && n.has(p));
    let exclaims = text.trim_end().ends_with('!') && !is_dated(text, n);
    let penalty = if social { 0.45 } else { 0.0 }
        + if hedged(n) { 0.3 } else { 0.0 }
        + if exclaims { 0.15 } else { 0.0 };
    Some(0.6 - penalty - habit_penalty(n))
}

/// "I'm going to a rescue tomorrow", "I'm going to go to a shelter later
/// this week": a visit with a place and a time is a plan someone can
/// check; without a time it is talk ("I'm going to the gym").
fn dated_visit(text: &str, n: &Norm, vat: usize) -> Option<f32> {
    let mut at = vat;
    if n.words.get(at).is_some_and(|w| w == "go") {
        at += 1;
        if n.words.get(at).is_some_and(|w| w == "to") {
            at += 1;
        }
    } else if n.words.get(at.wrapping_sub(1)).is_none_or(|w| w != "to") {
        // "I'll a…" is not a visit; only "going to a…" reaches here.
        return None;
    }
    let det = n.words.get(at).map_or("", String::as_str);
    let place = n.words.get(at + 1).map_or("", String::as_str);
    if !matches!(
        det,
        "a" | "an" | "the" | "my" | "our" | "his" | "her" | "their"
    ) || is_stopword(place)
        || !is_dated(text, n)
    {
        return None;
    }
    Some(0.55 - social_penalty(text, n) - conditional_penalty(n) - habit_penalty(n))
}

/// "When I feel stressed I'll go to a spa": a habit, not a plan.
fn habit_penalty(n: &Norm) -> f32 {
    if n.has_any(HABITS) {
        0.3
    } else {
        0.0
    }
}

/// "Ana will send the deck by Friday": a third-person subject the cue rules
/// matched. Concrete only with a work verb and an object or a date.
fn third_person_score(text: &str, n: &Norm) -> f32 {
    third_person_from(text, n, 0)
}

/// [`third_person_score`] for the first modal at or after word `from`.
fn third_person_from(text: &str, n: &Norm, from: usize) -> f32 {
    const MODALS: [&str; 6] = ["will", "to", "needs to", "should", "must", "is going to"];
    // The earliest modal, and its length in words.
    let Some((pos, len)) = MODALS
        .iter()
        .filter_map(|m| {
            let len = m.split(' ').count();
            (from..=n.words.len().checked_sub(len)?)
                .find(|&i| m.split(' ').enumerate().all(|(k, p)| n.words[i + k] == p))
                .map(|i| (i, len))
        })
        .min()
    else {
        return 0.0;
    };
    // "you should consider…" advises; "he still needs to set the
    // boundary" is about someone outside the conversation. The subject
    // is before the modal and the adverbs between ("they just need to",
    // "you really have to").
    let before = &n.words[..pos];
    let obliged = before
        .iter()
        .rev()
        .take_while(|w| is_between_subject_and_modal(w))
        .any(|w| matches!(w.as_str(), "have" | "need" | "got"));
    let subject = before
        .iter()
        .rev()
        .find(|w| !is_between_subject_and_modal(w))
        .map_or("", String::as_str);
    // "I don't really need to take it outside": no work, negated.
    if subject.ends_with("n't") || matches!(subject, "not" | "never" | "dont" | "doesnt") {
        return 0.1;
    }
    // "Ana to draft the memo": a bare "to" gives work to a name; after
    // anything else it is a purpose ("clothing is essential too, to
    // allow for…") or an intent's ("I wanted to say…"), and a later
    // modal may still give the work ("…is that we really need to test
    // restarts").
    if n.words[pos] == "to" && !obliged && !is_named_in(text, subject) {
        return third_person_from(text, n, pos + 1);
    }
    let Some((vat, verb)) = verb_after(n, pos + len) else {
        return 0.0;
    };
    if has_word(NOT_WORK, verb) || is_stopword(verb) {
        return 0.2;
    }
    if matches!(
        subject,
        "he" | "she" | "they" | "it" | "one" | "someone" | "people"
    ) {
        return 0.2;
    }
    let mut s: f32 = if has_word(WORK_VERBS, verb) {
        0.45
    } else {
        0.4
    };
    // "You should send the exports by Friday" directs; "you should try
    // it" advises: the listener's work needs more to be a request.
    if subject == "you" {
        s -= 0.1;
    }
    // "I just need to wear a hat": an obligation told, as in
    // `action_score`; it takes a date to be a plan. "We need to test
    // restarts" gives a team its work.
    if obliged && subject == "i" {
        s -= 0.3;
    }
    if has_word(TRANSACTIONAL, verb) {
        s += 0.15;
    }
    if objects_after(n, vat + 1) > 0 {
        s += 0.1;
    }
    if is_dated(text, n) {
        s += 0.15;
    }
    s - social_penalty(text, n) - conditional_penalty(n) - habit_penalty(n)
}

/// Whether `word` (lower-cased) is written capitalized in `text`: a name.
fn is_named_in(text: &str, word: &str) -> bool {
    !word.is_empty()
        && text
            .split(|c: char| !c.is_alphanumeric() && c != '\'')
            .any(|w| w.eq_ignore_ascii_case(word) && w.starts_with(|c: char| c.is_uppercase()))
}

/// Words that stand between a subject and its modal: adverbs ("they
/// just need to", "I really have to") and the verb of an obligation
/// ("have", "need", "got" before "to").
fn is_between_subject_and_modal(w: &str) -> bool {
    matches!(
        w,
        "still"
            | "also"
            | "really"
            | "just"
            | "only"
            | "even"
            | "actually"
            | "definitely"
            | "probably"
            | "kinda"
            | "have"
            | "need"
            | "got"
    )
}

/// A request's confidence, or `None` when the sentence asks nothing.
fn request_score(text: &str, n: &Norm) -> Option<f32> {
    request(text, n)?;
    // The verb asked for: after "can you", "please", a vocative.
    let at = n
        .find_any(&["can you", "could you", "would you", "will you", "can u"])
        .map(|p| p + 2)
        .or_else(|| n.find("please").map(|p| p + 1))
        .unwrap_or(0);
    // "Let me know how the dinner goes": a report on something named.
    if report_asked(n) {
        let social = SOCIAL.iter().any(|p| *p != "let me know" && n.has(p));
        return Some(if social { 0.15 } else { 0.55 });
    }
    let verb = verb_after(n, at).map_or("", |(_, v)| v);
    if has_word(NOT_WORK, verb) || n.has_any(SOCIAL_QUESTIONS) && !has_word(TRANSACTIONAL, verb) {
        return Some(0.1);
    }
    // "Would you win…?", "would you ever try sea urchin?": a hypothetical
    // put to the listener; "would you send…" asks for work.
    if n.has("would you") && (n.has("would you ever") || !has_word(WORK_VERBS, verb)) {
        return Some(0.1);
    }
    let mut s: f32 = if has_word(WORK_VERBS, verb) {
        0.55
    } else {
        0.45
    };
    if has_word(TRANSACTIONAL, verb) {
        s += 0.15;
    }
    if objects_after(n, at + 1) > 0 {
        s += 0.1;
    } else {
        s -= 0.2;
    }
    if is_dated(text, n) {
        s += 0.1;
    }
    Some(s - social_penalty(text, n))
}

fn decision_score(text: &str, n: &Norm) -> f32 {
    if is_question_norm(text, n) {
        return 0.0;
    }
    // "Let's keep…", "let's hope…": the verb after "let's" is an
    // attitude, not a plan.
    if let Some(at) = n.find("let's") {
        if verb_after(n, at + 1).is_some_and(|(_, v)| has_word(LETS_ATTITUDE, v)) {
            return 0.1;
        }
    }
    let content = objects_after(n, 0);
    // The cue rules found a decision; the gate asks that it settle
    // something concrete.
    let mut s: f32 = if n.has_any(&[
        "we decided",
        "we've decided",
        "we have decided",
        "decided to",
        "we agreed",
        "agreed to",
        "we'll go with",
        "we will go with",
        "go with",
        "going with",
        "settled on",
        "we chose",
        "i'll take",
        "i will take",
        "go ahead",
        "proceed",
        "let's meet",
        "let's book",
        "let's schedule",
        "let's use",
        "let's pick",
        "let's choose",
        "let's do",
        "let's go with",
        "let's plan",
        "let's set",
        "the plan is",
        "final decision",
        "decision is",
    ]) {
        0.65
    } else {
        0.55
    };
    if content >= 2 {
        s += 0.1;
    } else {
        s -= 0.2;
    }
    if is_dated(text, n) {
        s += 0.1;
    }
    // "This year I decided to make a wreath": one person's past choice
    // told, not a plan the participants settle.
    if n.has_any(&["i decided", "i've decided", "i had decided"]) {
        s -= 0.3;
    }
    // "Switching with a person … would be pretty mind altering": what
    // would be, not what was settled (in the item's first sentence: a
    // proposal may give its reason after it, "That would be cheaper").
    let first = text.split(['.', '!', '?']).next().unwrap_or_default();
    if Norm::new(first).has_any(&["would be", "would have", "could be", "might be"]) {
        s -= 0.3;
    }
    s - social_penalty(text, n) - habit_penalty(n)
}

fn question_score(text: &str, n: &Norm) -> f32 {
    if !is_question_norm(text, n) {
        return 0.0;
    }
    if n.has_any(SOCIAL_QUESTIONS) {
        return 0.1;
    }
    // "Why did this happen?": a wh-question asks for information even
    // with one content word.
    let wh = n.words.first().is_some_and(|w| {
        matches!(
            w.as_str(),
            "why" | "how" | "what" | "when" | "where" | "who" | "which"
        )
    });
    let mut s: f32 = match objects_after(n, 0) {
        0 => 0.0,
        1 if wh => 0.5,
        1 => 0.3,
        2 => 0.5,
        _ => 0.6,
    };
    // A tag question ("…, right?", "…, huh?", "…, you know?") confirms, it
    // does not ask; "Remember how I mentioned…?" reminds.
    let last = n.words.last().map_or("", String::as_str);
    if matches!(
        last,
        "right" | "huh" | "eh" | "no" | "yeah" | "yes" | "ok" | "okay" | "yknow" | "ya"
    ) || n.text.ends_with(" you know ")
        || n.starts_with("remember")
    {
        s -= 0.4;
    }
    if text.contains('!') {
        s -= 0.2;
    }
    if is_speculation(n) || is_rhetorical_why(n) {
        s -= 0.4;
    }
    // "Maybe a low energy?": a guess offered, not a question owed an answer.
    if n.has_any(HEDGES) {
        s -= 0.3;
    }
    if is_dated(text, n) {
        s += 0.1;
    }
    s
}

/// "What would they even list for their name?", "Would it be the name
/// their owners gave them?": a conditional asked of no one present —
/// wondering aloud, not a question someone owes an answer. Asked of the
/// listener ("would you…", "what would you recommend?") or asking leave
/// ("would it be possible to…") it stays a question.
fn is_speculation(n: &Norm) -> bool {
    let w = |i: usize| n.words.get(i).map_or("", String::as_str);
    let at = usize::from(matches!(
        w(0),
        "why" | "how" | "what" | "when" | "where" | "who" | "which"
    ));
    matches!(w(at), "would" | "could" | "might")
        && !matches!(w(at + 1), "you" | "u" | "ya" | "")
        && !matches!(w(at + 3), "possible" | "ok" | "okay" | "alright" | "fine")
}

/// "Why make it a big deal?", "why bother?", "why not?": "why" before a
/// bare verb or "not" argues a point; an asked "why" has an auxiliary or
/// a subject after it ("why did…", "why is…", "why you…").
fn is_rhetorical_why(n: &Norm) -> bool {
    let Some(at) = n.find("why") else {
        return false;
    };
    let next = n.words.get(at + 1).map_or("", String::as_str);
    next == "not"
        || !next.is_empty()
            && !is_stopword(next)
            && !matches!(next, "you" | "u" | "ya" | "people" | "everyone" | "someone")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(act: Act, s: &str) -> bool {
        is_listed(act, s)
    }

    fn assert_listed(act: Act, sentences: &[&str]) {
        for s in sentences {
            assert!(listed(act, s), "{s}: {}", confidence(act, s));
        }
    }

    fn assert_not_listed(act: Act, sentences: &[&str]) {
        for s in sentences {
            assert!(!listed(act, s), "{s}: {}", confidence(act, s));
        }
    }

    #[test]
    fn commitments_are_checkable_work_not_aspirations() {
        assert_listed(
            Act::Action,
            &[
                "I'll send you the photos tomorrow.",
                "I will cancel reservation ABC123 and refund your card.",
                "- Action item: Ana will send the deck by Friday.",
                "That needs approval, so I'll request it from Helen Kwan now.",
                "Let me check the payment log for ORD-9921.",
                "I'm going to book the table for Saturday.",
                "I'll email the deck to Ana by Friday.",
            ],
        );
        assert_not_listed(
            Act::Action,
            &[
                "I'm gonna keep chasing after those dreams.",
                "I'll keep ya posted.",
                "I'll never forget that trip!",
                "I'll keep pushing forward!",
                "I'll do my best!",
                "Woohoo, congrats James!",
                "Mmm, looks yummy!",
                "Sorry it took me so long to get back to you.",
                "I can relate to that.",
                "I'll definitely be more careful next time.",
                "Maybe someday I'll visit Japan.",
                "- Overview: strangers band together to find the strength they need to survive.",
            ],
        );
    }

    #[test]
    fn a_person_is_something_to_act_on_and_a_soon_is_no_pleasantry() {
        assert_listed(
            Act::Action,
            &[
                "I'll call him after the meeting",
                "I'll see if I can catch them on the way out",
                "I'll renew the passport as soon as I can!",
            ],
        );
        assert_not_listed(
            Act::Action,
            &[
                "I'll miss him so much",
                "I'll do it!",
                "I'll be there for her",
            ],
        );
    }

    #[test]
    fn a_report_promised_on_something_named_is_a_commitment() {
        assert_listed(
            Act::Action,
            &[
                "I'll let you know how the new recipe turns out.",
                "Once I pick a name for the kitten I will let you know",
                "I'll keep you posted about the apartment",
                "Ill ask my roommate tonight and let you know tomorrow",
                "I'm going to a shelter on Saturday to meet the dogs",
                "Ok, I'm going to go to the clinic later this week",
                "Kk, I'll see if I can catch her before work",
            ],
        );
        assert_not_listed(
            Act::Action,
            &[
                "I'll let you know!",
                "I'll keep you posted.",
                "Maybe I'll let you know how it goes.",
                "I'm going to the gym.",
                "Now I'm gonna grab a coffee and a sandwich",
                "Im gonna eat some bread and soup now what about you",
                "I'm gonna read on the porch for a bit",
                "Take your time before you answer, it's a big question.",
            ],
        );
    }

    #[test]
    fn requests_ask_for_work_not_social_moves() {
        assert_listed(
            Act::Action,
            &[
                "Can you send me the recipe?",
                "Please change my flight to the 20th.",
                "Could you forward the invoice to billing?",
            ],
        );
        assert!(listed(
            Act::Action,
            "Let me know how the dinner goes Kevin."
        ));
        assert!(listed(
            Act::Action,
            "You have to send the signed form by Friday."
        ));
        // Advice to anyone is no request.
        assert!(!listed(
            Act::Action,
            "Also you have to take into account how the weather changes the mood"
        ));
        assert_not_listed(
            Act::Action,
            &[
                "Can you believe it?",
                "Keep it up!",
                "Take care!",
                "Let me know if you need anything!",
                "Let me know!",
            ],
        );
    }

    #[test]
    fn decisions_settle_something_cheers_do_not() {
        assert_listed(
            Act::Decision,
            &[
                "Let's meet at the park on Saturday at 10.",
                "We decided to use PostgreSQL for the ledger.",
                "Yes, go ahead with the economy option.",
            ],
        );
        assert_not_listed(
            Act::Decision,
            &[
                "Let's keep movin' forward!",
                "Let's keep the good vibes rolling!",
                "Let's do this!",
                "Let's hope for the best.",
            ],
        );
    }

    #[test]
    fn open_questions_ask_for_information() {
        assert_listed(
            Act::Question,
            &[
                "Which refund method did the customer choose?",
                "When does the new billing cycle start?",
            ],
        );
        assert_not_listed(
            Act::Question,
            &[
                "We all need a push sometimes, right?",
                "How about you?",
                "How's it going?",
                "Can you believe it?",
                "Isn't that amazing?",
                "I'm just a night person yknow?",
                "Remember how I said the lease ends in June?",
            ],
        );
    }

    #[test]
    fn a_word_before_a_comma_and_a_wondered_question_ask_nothing() {
        assert_listed(
            Act::Action,
            &[
                "Raj, add the index to the orders table.",
                "Ana to draft the memo by Friday.",
                "And one thing I wanted to say is that we really need to test restarts.",
                "Would you send me the invoice?",
            ],
        );
        assert_not_listed(
            Act::Action,
            &[
                // A word and a comma, then no verb asked: no vocative.
                "Absolutely, fashion is a form of self-expression.",
                "Comfortable, flexible clothing is essential too, to allow for a full range of motion.",
                "Anyways, enough about me.",
                "Picasso, van gogh",
                // The subject is before the adverbs and the modal.
                "I think they'll be fine, they just need to slow down on releases",
                "I just need to wear a hat and keep my ears warm",
                // A hypothetical put to the listener, a place headed to, a feeling.
                "Would you win in those stay in the circle the longest?",
                "Im gonna head to bed",
                "I feel like im gonna turn into a psychopath",
                // Rest, a negated need, no verb asked for, an opinion asked.
                "Im gonna take a quick nap i got a headache",
                "I'm gonna wash up and take a shower then I'm gonna eat.",
                "I have a cat and I don't really need to take it outside.",
                "Please, a question and then get going answering it using research.",
                "Let me know what you think if you decide to read any of them.",
                // Shorter than a modal: nothing to find, nothing to panic on.
                "needs",
                "is going",
                "to",
            ],
        );
        assert_listed(
            Act::Question,
            &[
                "Why did the deploy fail on Friday?",
                "What would you recommend for a first trip to Japan?",
                "Would it be possible to move the call to Monday?",
            ],
        );
        assert_not_listed(
            Act::Question,
            &[
                "What would they even list for their name?",
                "Would it be the name their owners gave them?",
                "But why make it a big deal if you told everyone before hand?",
            ],
        );
        assert_not_listed(
            Act::Decision,
            &["Switching bodies with a stranger would be pretty mind altering."],
        );
    }
}
