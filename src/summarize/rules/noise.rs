//! Noise: sentences that must never become summary items however they are
//! phrased — greetings, thanks and goodbyes, backchannels ("yeah", "hmm,
//! true", "exactly, exactly"), fillers, talk about the meeting itself
//! ("let's get started", "can you hear me", "let's move to …") or the
//! call's controls ("let me disconnect now", "I'm clicking the end meeting
//! button"), text that is mostly transcription markers (`<laugh/>`,
//! `{vocalsound}`), and anything left with fewer than two content words
//! once those are gone.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::dates::WEEKDAYS;
use super::entities::month_number;
use super::markers::strip_markers;
use super::numbers::is_number_word;
use super::text::{content_words, is_stopword, stem, Norm};

/// Words that carry no content in speech: backchannels, interjections,
/// fillers and social words.
const EMPTY_WORDS: &[&str] = &[
    "yeah",
    "yes",
    "yep",
    "yup",
    "no",
    "nope",
    "okay",
    "ok",
    "right",
    "sure",
    "true",
    "exactly",
    "hmm",
    "mm",
    "mhm",
    "uh",
    "um",
    "uhm",
    "ehm",
    "erm",
    "ah",
    "oh",
    "wow",
    "well",
    "like",
    "alright",
    "great",
    "good",
    "nice",
    "cool",
    "fine",
    "perfect",
    "indeed",
    "actually",
    "basically",
    "really",
    "sorry",
    "pardon",
    "thanks",
    "thank",
    "please",
    "welcome",
    "hello",
    "bye",
    "goodbye",
    "cheers",
    "people",
    "guys",
    "everyone",
    "everybody",
    "back",
    "again",
    "maybe",
    "probably",
    "something",
    "thing",
    "things",
    "stuff",
    "kind",
    "sort",
    "bit",
    "little",
    "lot",
    "try",
    "see",
    "know",
    "think",
    "mean",
    "say",
    "said",
    "get",
    "got",
    "let",
    "make",
    "sure",
    "yet",
    "now",
    "later",
    "today",
    "tomorrow",
    "moment",
    "second",
    "minute",
    "one",
    "two",
    "time",
];

/// [`EMPTY_WORDS`] as [`content_words`] spells them (stemmed), and as
/// written, computed once.
fn empty_stems() -> &'static BTreeSet<String> {
    static SET: OnceLock<BTreeSet<String>> = OnceLock::new();
    SET.get_or_init(|| {
        EMPTY_WORDS
            .iter()
            .flat_map(|w| [(*w).to_owned(), stem(w)])
            .collect()
    })
}

/// Greetings, thanks and goodbyes.
const SOCIAL: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "good morning",
    "good afternoon",
    "good evening",
    "welcome",
    "thanks",
    "thank you",
    "bye",
    "goodbye",
    "see you",
    "nice to meet",
    "how are you",
    "how's it going",
    "how is it going",
    "have a nice",
    "have a good",
    "have a great",
];

/// Phrases that talk about the meeting or the call rather than its
/// subject.
const META_TALK: &[&str] = &[
    "let's get started",
    "let's start",
    "let's begin",
    "let's move to",
    "let's move on",
    "move on to",
    "let's go to",
    "let's finish",
    "let's wrap up",
    "let's stop here",
    "let's end",
    "end the meeting",
    "end meeting",
    "leave the meeting",
    "leave the call",
    "share my screen",
    "share the screen",
    "sharing my screen",
    "can you hear me",
    "can you see my",
    "you're muted",
    "you are muted",
    "i'm muted",
    "am i muted",
    "see you",
    "welcome back",
    "that's it for",
    "any other business",
    "next meeting",
    "cup of coffee",
    "take the lunch",
    "i'll be back",
    "be right back",
    "let me finish",
    "let me see",
    "let me think",
    "let me understand",
    "be leaving",
    "second screen",
    "my screen",
    "the screen",
    "let's go through",
    "let's go from",
    "go through the",
    "what we decided",
    "what we have decided",
    "what we've decided",
    "what we agreed",
    "what we discussed",
    // Offers of help at the end of a call ("But, let's contact anytime if
    // you need something.").
    "if you need something",
    "if you need anything",
    "if you need any help",
    "feel free to",
];

/// The content words that carry substance in speech (no stopwords, no
/// backchannels, fillers or social words).
fn substance(cleaned: &str) -> Vec<String> {
    content_words(cleaned)
        .into_iter()
        .filter(|w| !empty_stems().contains(w.as_str()))
        .collect()
}

/// How many words of substance `text` has once markers, stopwords,
/// backchannels, fillers and social words are gone.
pub fn substance_count(text: &str) -> usize {
    substance(&strip_markers(text)).len()
}

/// Whether `word` (lower case) is a backchannel, filler, interjection or
/// social word.
pub fn is_empty_word(word: &str) -> bool {
    EMPTY_WORDS.contains(&word) || matches!(word, "aha" | "uhm" | "hm" | "huh" | "eh")
}

/// Whether `name` reads as a person's name: one or two capitalized words,
/// letters only (or a `[PERSONn]`-style placeholder), none of them a
/// stopword, interjection, backchannel or social word.
pub fn is_person_name(name: &str) -> bool {
    let name = name.trim_start_matches('@');
    if name.starts_with('[') && name.ends_with(']') {
        return true;
    }
    let words: Vec<&str> = name.split_whitespace().collect();
    !words.is_empty()
        && words.len() <= 2
        && words.iter().all(|w| {
            let lower = w.to_lowercase();
            // A capitalized name, or a handle such as sam.okafor.
            (w.chars().next().is_some_and(char::is_uppercase) || w.contains(['.', '_']))
                && w.chars()
                    .all(|c| c.is_alphabetic() || matches!(c, '-' | '\'' | '.' | '_'))
                && !is_stopword(&lower)
                && !is_empty_word(&lower)
                && !SOCIAL.contains(&lower.as_str())
                // Months, weekdays and gerunds are no names ("July,
                // August?", "Probing, classifiers.").
                && month_number(&lower).is_none()
                && !WEEKDAYS.contains(&lower.as_str())
                && !(words.len() == 1 && lower.len() > 4 && lower.ends_with("ing"))
                // A word cut off mid-way ("Preferab-, refe-, preferably
                // life", "Fe-, feel free…") or an adverb ("Definitely,
                // definitely um copy to…") stands before a comma in speech
                // but names nobody.
                && !w.ends_with('-')
                && !is_adverb(&lower)
                // "Six, seven, eight…": a count names nobody.
                && !is_number_word(&lower)
                // "Mmm", "Hmm": no vowel, an interjection; "LDA", "ASR":
                // capitals, an acronym.
                && lower.chars().any(|c| "aeiouyáéíóúäëïöü".contains(c))
                && !(w.chars().count() >= 2 && w.chars().all(|c| c.is_uppercase()))
        })
}

/// Endings of "-ly" adverbs long enough not to be first names ("Sally",
/// "Kelly" stay names: too short for the rule).
const ADVERB_ENDINGS: &[&str] = &[
    "ately", "itely", "ally", "ously", "ently", "antly", "ively", "ably", "ibly", "fully",
    "ularly", "ctly",
];

/// Whether `lower` reads as a "-ly" adverb ("definitely", "basically").
pub(crate) fn is_adverb(lower: &str) -> bool {
    lower.len() > 6 && ADVERB_ENDINGS.iter().any(|e| lower.ends_with(e))
}

/// Verbs after "let's" that move the meeting itself along: "So let's
/// quickly move to [PERSON14].", "let's finish the call now".
const MEETING_MOVES: &[&str] = &[
    "move", "go", "continue", "proceed", "switch", "start", "begin", "finish", "end", "stop",
    "wrap", "close", "skip", "jump", "return", "come",
];

/// Words that may stand between "let's" and its verb ("let's quickly
/// move", "let's just go").
const LETS_ADVERBS: &[&str] = &["quickly", "just", "now", "then", "maybe", "briefly", "also"];

/// Whether a short sentence moves the meeting along ("let's quickly move
/// to the next point") rather than deciding about its subject: "let's"
/// (adverbs aside) and a verb of [`MEETING_MOVES`], with at most four words
/// of substance in all, or about the call or the time it takes.
fn moves_the_meeting(n: &Norm, substance: usize) -> bool {
    let Some(at) = n.find_any(&["let's", "let us"]) else {
        return false;
    };
    let after = if n.words[at] == "let" { at + 2 } else { at + 1 };
    let Some(v) = (after.min(n.words.len())..n.words.len())
        .find(|&i| !LETS_ADVERBS.contains(&n.words[i].as_str()))
    else {
        return false;
    };
    // "let's go with the rubber case" chooses; it does not move on.
    let chooses = matches!(
        n.words.get(v + 1).map(String::as_str),
        Some("with" | "ahead" | "for")
    );
    MEETING_MOVES.contains(&n.words[v].as_str())
        && !chooses
        && (substance <= 4 || n.has_any(&["the call", "the meeting", "sake of time"]))
}

/// First-person openings of a sentence that announces what the speaker
/// does next in the meeting.
const NARRATORS: &[&str] = &[
    "i'll",
    "i will",
    "we'll",
    "we will",
    "i'm going to",
    "i am going to",
    "we're going to",
    "let me",
    "let's",
    "let us",
    "i would like to",
    "i'd like to",
];

/// Adverbs between the opening and its verb ("now first I'll", "I'll just").
const NARRATION_ADVERBS: &[&str] = &[
    "first", "firstly", "now", "then", "just", "quickly", "briefly", "also", "maybe",
];

/// Verbs of the meeting's own conduct, each with the words of which one
/// must follow within four words (empty: any): "First I will introduce
/// myself", "I'll tell you a little bit about the setting", "I'll start
/// with the presentation kick off".
const NARRATION_VERBS: &[(&str, &[&str])] = &[
    ("introduce", &[]),
    ("introducing", &[]),
    ("tell", &["you", "little", "bit", "few", "us"]),
    ("say", &["few", "little", "bit", "words"]),
    ("talk", &["little", "bit", "about"]),
    (
        "present",
        &["myself", "ourselves", "presentation", "agenda", "slides"],
    ),
    ("show", &["you", "slides", "slide", "screen"]),
    (
        "start",
        &[
            "presentation",
            "agenda",
            "meeting",
            "introductions",
            "round",
            "kick",
        ],
    ),
    (
        "begin",
        &[
            "presentation",
            "agenda",
            "meeting",
            "introductions",
            "round",
        ],
    ),
    ("kick", &["off"]),
    ("open", &["meeting"]),
    (
        "go",
        &["agenda", "through", "next", "over", "questions", "item"],
    ),
    ("move", &["next", "on", "agenda", "questions", "item"]),
    ("back", &["up"]),
    ("give", &["floor", "overview", "word"]),
    ("hand", &["over"]),
    ("pass", &["over", "floor", "word"]),
    ("summarise", &["meeting", "discussion"]),
    ("summarize", &["meeting", "discussion"]),
];

/// Words that put a sentence's work after the meeting: then it is work,
/// not narration ("I'll present the results at the review next week").
const LATER: &[&str] = &[
    "tomorrow",
    "next",
    "week",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "deadline",
    "later",
    "after",
];

/// Whether a short first-person sentence narrates the meeting itself (an
/// agenda step, an introduction, the presenter's next move) rather than
/// committing to work: an opening of [`NARRATORS`], adverbs, then a verb
/// of [`NARRATION_VERBS`] with one of its words after it; at most five
/// words of substance and no word of [`LATER`].
fn narrates_the_meeting(n: &Norm, substance: usize) -> bool {
    if substance > 5 || n.words.iter().any(|w| LATER.contains(&w.as_str())) {
        return false;
    }
    let Some(at) = NARRATORS
        .iter()
        .filter_map(|p| n.find(p).map(|i| (i, p)))
        .min()
    else {
        return false;
    };
    let after = at.0 + at.1.split(' ').count();
    let Some(mut v) = (after.min(n.words.len())..n.words.len())
        .find(|&i| !NARRATION_ADVERBS.contains(&n.words[i].as_str()))
    else {
        return false;
    };
    // "I'll start by introducing myself": the verb after "by".
    if matches!(n.words[v].as_str(), "start" | "begin")
        && n.words.get(v + 1).is_some_and(|w| w == "by")
        && v + 2 < n.words.len()
    {
        v += 2;
    }
    let verb = n.words[v].as_str();
    NARRATION_VERBS
        .iter()
        .find(|(x, _)| *x == verb)
        .is_some_and(|(_, things)| {
            let next = &n.words[v + 1..(v + 5).min(n.words.len())];
            things.is_empty() || next.iter().any(|w| things.contains(&w.as_str()))
        })
}

/// Verbs that work the call's controls rather than its subject, each with
/// the words that tell it does so when one of them follows within four
/// words (or nothing follows at all): "let me disconnect now", "I'm
/// clicking the end meeting button now", "can you paste the link where we
/// can watch your streaming?". "Click the link in the email" and
/// "disconnect the legacy API" are work, and stay.
const CALL_CONTROLS: &[(&str, &[&str])] = &[
    ("disconnect", &["now", "call", "meeting"]),
    ("reconnect", &["now", "call", "meeting"]),
    ("rejoin", &["now", "call", "meeting"]),
    (
        "mute",
        &["now", "myself", "yourself", "call", "mic", "microphone"],
    ),
    (
        "unmute",
        &["now", "myself", "yourself", "call", "mic", "microphone"],
    ),
    ("click", &["meeting", "call", "record", "recording"]),
    ("clicking", &["meeting", "call", "record", "recording"]),
    ("paste", &["link", "chat"]),
    ("hang", &["up"]),
];

/// Whether a sentence works the call's controls (see [`CALL_CONTROLS`]).
fn works_the_call(n: &Norm) -> bool {
    n.words.iter().enumerate().any(|(i, w)| {
        CALL_CONTROLS
            .iter()
            .find(|(verb, _)| w == verb)
            .is_some_and(|(_, things)| {
                let after = &n.words[i + 1..(i + 5).min(n.words.len())];
                after.is_empty() || after.iter().any(|a| things.contains(&a.as_str()))
            })
    })
}

/// Words a finished sentence does not end on: speech cut off mid-way
/// ("We agreed that actually the.", "… in this <unintelligible/>").
const DANGLING: &[&str] = &[
    "the", "a", "an", "to", "of", "and", "or", "but", "so", "with", "is", "are", "was", "were",
    "be", "my", "our", "your", "if", "because",
];

/// Whether a sentence was cut off: it ends on a dangling word, or on a
/// dash where the speaker broke off.
fn is_fragment(cleaned: &str) -> bool {
    let t =
        cleaned.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '.' | ',' | ';' | '!'));
    if t.ends_with('-') || t.ends_with('—') || t.ends_with('–') {
        return true;
    }
    let last = t
        .rsplit(|c: char| !(c.is_alphanumeric() || c == '\''))
        .next()
        .unwrap_or("")
        .to_lowercase();
    DANGLING.contains(&last.as_str())
}

/// Whether a question is noise: a clarification ("Sorry?", "Pardon?"),
/// social ("How's it going?") or about the call ("Can you hear me?"). A
/// short question about the subject ("Why did this happen?") is not.
pub fn is_noise_question(question: &str) -> bool {
    let cleaned = strip_markers(question);
    let n = Norm::new(&cleaned);
    let content = substance(&cleaned);
    let social = SOCIAL.iter().any(|g| n.has(g));
    content.is_empty()
        || content.len() <= 3 && META_TALK.iter().any(|m| n.has(m))
        || social && content.len() <= 2
}

/// Whether `sentence` is noise (see the module documentation).
pub fn is_noise(sentence: &str) -> bool {
    let cleaned = strip_markers(sentence);
    let n = Norm::new(&cleaned);
    if n.words.is_empty() {
        return true;
    }
    if is_fragment(&cleaned) {
        return true;
    }
    let content = substance(&cleaned);
    // Talk about the meeting, unless the sentence goes on about its
    // subject ("let's start with a 30-day pilot in cardiology").
    if content.len() <= 3 && META_TALK.iter().any(|m| n.has(m)) {
        return true;
    }
    if moves_the_meeting(&n, content.len())
        || works_the_call(&n)
        || narrates_the_meeting(&n, content.len())
    {
        return true;
    }
    if content.len() < 2 {
        return true;
    }
    // A greeting or a thank-you with at most a name after it.
    let social = SOCIAL.iter().any(|g| n.starts_with(g));
    social && content.len() <= 2
}

/// Whether a sentence says that something was decided or agreed without
/// saying what: "So probably we decided, as I mentioned, the sure of,
/// okay." Fewer than two words of substance follow the first "decided" or
/// "agreed".
pub fn is_empty_decision(sentence: &str) -> bool {
    let cleaned = strip_markers(sentence);
    let n = Norm::new(&cleaned);
    let Some(at) = n
        .words
        .iter()
        .position(|w| w.starts_with("decid") || w.starts_with("agree"))
    else {
        return false;
    };
    substance(&n.words[at + 1..].join(" ")).len() < 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backchannels_greetings_fillers_and_markers_are_noise() {
        for s in [
            "Roo , welcome back .",
            "Hmm , true .",
            "Exactly , exactly .",
            "People , welcome back with the second meeting .",
            "Sorry ?",
            "{vocalsound} Can I get a cup of coffee ?",
            "I'll take the lunch .",
            "Yeah, yeah, okay.",
            "<laugh/> <unintelligible/>",
            "Bye, bye.",
            "Thanks a lot, [PERSON3].",
            "I'll try.",
            "Let me finish.",
            "Ok, so let's let's get started.",
            "And now let's move to those who are present remotly.",
            "Ok yeah I'll just leave the meeting.",
            "So yeah, we will see tomorrow.",
            "{disfmarker} um {disfmarker} yeah",
            "We agreed that actually the.",
            "So that we need to be very careful about the contents, we really -.",
            "Let's forget plan, so.",
            // ELITR test meetings: moving the call along.
            "So let's quickly move to [PERSON14].",
            "So I suggest that for the sake of time, let's finish the call now.",
            // ELITR dev meetings: the call's controls.
            "I'll I'm I'm clicking the end meeting button now.",
            "Yeah, ok, so let me disconnect now and you keep talking to each other.",
            "So can you paste the link where we can watch your streaming?",
            "I'll just hang up and call you again.",
        ] {
            assert!(is_noise(s), "{s:?} is noise");
        }
    }

    #[test]
    fn substance_is_not_noise_even_in_speech() {
        for s in [
            "[PERSON6] will download and prepare the corpus.",
            "I will continue annotate my our data with my annotators.",
            "Let's include one separate track for [ORGANIZATION1].",
            "I'll refund the duplicate charge on ORD-7731 by Friday.",
            "We'll go with one large round button for volume and channel.",
            "{vocalsound} So the remote will have LEDs to light it up .",
            "Can you send me the deck?",
            "Let me check the logs.",
            "OK. I'll also rerun the reconcile job once the index is in.",
            "Let me look up order ORD-1042 for you.",
            "OK, going with full jitter.",
            "Let's start with a 30-day pilot in the cardiology department, 12 clinicians.",
            "We can delay these <unintelligible/> So let's start writing the emails, uh, two prospective people here.",
            "Let's go with the rubber case.",
            // Work that names a control's verb.
            "Please click the link in the email to confirm the refund.",
            "We need to disconnect the legacy API before the migration.",
        ] {
            assert!(!is_noise(s), "{s:?} is not noise");
        }
    }

    #[test]
    fn decisions_that_say_nothing_are_empty() {
        for s in [
            "So probably we decided, as I mentioned, the sure of, okay.",
            "I think we agreed {disfmarker} yeah.",
            "Decided.",
        ] {
            assert!(is_empty_decision(s), "{s:?} decides nothing");
        }
        for s in [
            "Probably, well, now we decided that [PERSON6] will work with the data.",
            "Agreed, we ship the remote with a charging cradle.",
            "We decided to go with the rubber case {vocalsound} .",
            "LGTM, approving.",
        ] {
            assert!(!is_empty_decision(s), "{s:?} decides something");
        }
        assert!(is_noise(
            "So this is what we decided up to now for last 40 minutes."
        ));
    }

    #[test]
    fn short_questions_about_the_subject_stay() {
        for q in [
            "But why did this happen?",
            "Can your IT team create one?",
            "When does ORD-7731 ship?",
        ] {
            assert!(!is_noise_question(q), "{q:?} is a question");
        }
        for q in [
            "Sorry?",
            "Pardon?",
            "How's it going?",
            "Can you hear me?",
            "{vocalsound} Can I get a cup of coffee?",
            "Am I muted?",
        ] {
            assert!(is_noise_question(q), "{q:?} is noise");
        }
    }

    #[test]
    fn owners_are_names_not_interjections() {
        for n in [
            "Marco",
            "Ana Lopez",
            "[PERSON6]",
            "@Lee",
            "sam.okafor",
            "Sally",
            "Jean-Luc",
        ] {
            assert!(is_person_name(n), "{n:?}");
        }
        for n in [
            "Hmm",
            "Exactly",
            "People",
            "Your EHR",
            "Welcome",
            "Bye",
            "Roo 2",
            "July",
            "Friday",
            "Probing",
            "Presenting",
            "Aha",
            // ELITR test meetings: cut-off words and adverbs before a comma.
            "Definitely",
            "Preferab-",
            "Fe-",
            "Ro- Em",
            "Basically",
        ] {
            assert!(!is_person_name(n), "{n:?} is no name");
        }
    }

    #[test]
    fn markers_are_stripped() {
        assert_eq!(strip_markers("a <laugh/> b {vocalsound} c"), "a   b   c");
    }

    #[test]
    fn narration_of_the_meeting_is_noise() {
        // Held-out report (product-design meetings) and QMSum Academic.
        for s in [
            "First I will introduce myself.",
            "Now first I'll tell you a little bit about the setting.",
            "I'll start with the presentation kick off.",
            "So let's start with the presentation.",
            "Okay, I'll start by introducing myself.",
            "I'm going to tell you a bit about the project.",
            "Let me just give you an overview.",
            // QMSum Committee and Academic.
            "If it's okay with you, we'll move straight to questions, and Julie Morgan.",
            "L let me just back up this to make a a brief comment about the meeting.",
        ] {
            assert!(is_noise(s), "{s:?} is narration");
        }
    }

    #[test]
    fn work_said_like_narration_stays() {
        for s in [
            "I'll present the results at the review next week.",
            "I will introduce the new billing API to the client team tomorrow.",
            "I'll tell the vendor that we need the invoices corrected.",
            "Let's start with a 30-day pilot in cardiology.",
            "I'll show the prototype to the marketing department after the meeting.",
            "We'll move the servers to the new data centre.",
            "I'll make a comment in the pull request about the retry logic.",
        ] {
            assert!(!is_noise(s), "{s:?} is work");
        }
    }

    #[test]
    fn counts_and_capitalized_phrases_are_no_names() {
        for n in ["Six", "Twenty-one", "Tenth", "First", "Mmm", "LDA"] {
            assert!(!is_person_name(n), "{n}");
        }
        for n in ["Marco", "Sally", "Ana Lee", "[PERSON3]"] {
            assert!(is_person_name(n), "{n}");
        }
    }
}
