//! Proposals and assent: how meetings decide across speakers. One person
//! proposes ("we should add the reference", "let's keep two sections",
//! "how about a round button?"), often over several sentences ("That would
//! be the minutes corpus. And that will be the pairs of transcripts."), and
//! the next speaker assents ("Yes, yes. I'm fine with this.", "Yeah, good
//! idea."). The engine turns such a pair into a decision agreed by both.
//!
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

/// Phrases that put a course of action to the others.
const PROPOSALS: &[&str] = &[
    "we should",
    "we shouldn't",
    "we could",
    "let's",
    "let us",
    "i suggest",
    "i'd suggest",
    "i would suggest",
    "i propose",
    "i'd propose",
    "i would propose",
    "my suggestion",
    "my proposal",
    "how about",
    "what about",
    "why don't we",
    "we'll",
    "we will",
    "we're going to",
    "we are going to",
    "the plan is",
    "the idea is",
    "shall we",
    "should we",
    "do you agree",
    "do we agree",
    "are we agreed",
    "i'd go with",
    "i would go with",
    // "So the best thing would be if [PERSON12], [PERSON14] … had a
    // separate technical call", "it would be really great if we can also
    // prepare a demo".
    "the best thing would be",
    "the best would be",
    // With "if" only: "it would be good for comparison purposes, but not
    // for deployment" judges, it proposes nothing.
    "it would be good if",
    "it would be great if",
    "it would be really great if",
    "it would be nice if",
];

/// Short questions that ask the others to agree with what was just said
/// ("…, right?", "Okay?", "Does that make sense?").
const TAG_QUESTIONS: &[&str] = &[
    "right",
    "okay",
    "ok",
    "yes",
    "agreed",
    "no",
    "what do you think",
    "does that make sense",
    "do you agree",
    "is that ok",
    "is that okay",
    "is that fine",
    "all right",
    "alright",
    "fine",
];

/// Words a sentence that only assents is made of ("Yes, yes.", "Yeah,
/// okay, sure.").
const ASSENT_WORDS: &[&str] = &[
    "yes",
    "yeah",
    "yep",
    "yup",
    "ok",
    "okay",
    "sure",
    "right",
    "exactly",
    "agreed",
    "agree",
    "true",
    "definitely",
    "absolutely",
    "fine",
    "good",
    "great",
    "perfect",
    "alright",
    "correct",
    "indeed",
    "of",
    "course",
    "i",
    "totally",
    "so",
    "well",
    "uh",
    "um",
    "ehm",
    "oh",
];

/// Phrases that accept a proposal however the sentence goes on.
const ASSENT_PHRASES: &[&str] = &[
    "i agree",
    "i totally agree",
    "agreed",
    "sounds good",
    "sounds great",
    "sounds fine",
    "makes sense",
    "good idea",
    "great idea",
    "let's do it",
    "let's do that",
    "fine with this",
    "fine with that",
    "fine with it",
    "fine with me",
    "works for me",
    "okay with that",
    "ok with that",
    "that's fine",
    "go for it",
    "why not",
];

/// Backchannels that only signal listening.
const CONTINUERS: &[&str] = &["hm", "hmm", "mm", "mhm", "mmhm", "uh", "huh", "um", "hum"];

/// Words that turn an assent into an objection ("yes, but…").
const OBJECTIONS: &[&str] = &[
    "but",
    "however",
    "although",
    "not sure",
    "i don't think",
    "i'm not",
    "no no",
    "wait",
    "disagree",
];

/// Whether a sentence puts a course of action to the others: a proposal
/// phrase, not a forecast ("we'll see"), not cut off, not noise.
pub fn is_proposal(sentence: &str) -> bool {
    let cleaned = strip_markers(sentence);
    let n = Norm::new(&cleaned);
    let Some(at) = n.find_any(PROPOSALS) else {
        return false;
    };
    // "If we want to make 100 hours, let's count, 200": a proposal under
    // a condition, or a figure of speech ("let's say…"), puts nothing to
    // the others.
    let conditional = n.words[..at]
        .iter()
        .any(|w| matches!(w.as_str(), "if" | "unless" | "whether" | "when"));
    // "And how much money we will use for a book": an embedded question.
    !conditional
        && !embedded_at(&n, at)
        && !n.has_any(HYPOTHETICALS)
        && !is_forecast(&n)
        && !is_noise(sentence)
}

/// Whether a sentence carries on the proposal before it ("That would be
/// the minutes corpus.", "And that will be the pairs of transcripts.").
fn continues_proposal(sentence: &str) -> bool {
    let n = Norm::new(&strip_markers(sentence));
    let first = n.words.iter().find(|w| !matches!(w.as_str(), "and" | "so"));
    !is_question(sentence)
        && substance_count(sentence) > 0
        && (first.is_some_and(|w| matches!(w.as_str(), "that" | "this" | "it" | "which"))
            || n.has_any(&["would be", "will be"]))
}

/// Whether a sentence only asks the others to agree ("Right?", "Okay?").
fn is_tag_question(sentence: &str) -> bool {
    let n = Norm::new(&strip_markers(sentence));
    sentence.trim_end().ends_with('?')
        && n.words.len() <= 5
        && TAG_QUESTIONS.iter().any(|t| n.starts_with(t) || n.has(t))
}

/// The proposal a turn ends on, as one slice of `text`: the last run of
/// proposal sentences (and the sentences that carry them on), when only a
/// tag question ("…, right?") follows it. `None` when the turn ends on
/// something else: an assent then answers that, not a proposal.
pub fn closing_proposal<'a>(text: &'a str, sentences: &[&'a str]) -> Option<&'a str> {
    let mut end = sentences.len();
    while end > 0 && is_tag_question(sentences[end - 1]) {
        end -= 1;
    }
    let mut start = end;
    while start > 0
        && (is_proposal(sentences[start - 1]) || continues_proposal(sentences[start - 1]))
    {
        start -= 1;
    }
    // The run starts at a proposal, not at a sentence carrying one on.
    while start < end && !is_proposal(sentences[start]) {
        start += 1;
    }
    (start < end).then(|| span_of(text, sentences[start], sentences[end - 1]))
}

/// The slice of `text` from the start of `a` to the end of `b` (both
/// slices of it, `a` first); `a` alone if they are not.
pub fn span_of<'a>(text: &'a str, a: &'a str, b: &'a str) -> &'a str {
    let base = text.as_ptr() as usize;
    let start = (a.as_ptr() as usize).saturating_sub(base);
    let end = (b.as_ptr() as usize + b.len()).saturating_sub(base);
    text.get(start..end).unwrap_or(a)
}

/// Whether a turn opens by accepting what was just proposed: its first
/// sentence assents ("Yes, yes.", "Yeah, okay.", "I agree.", "Sounds
/// good, let's do it") and the opening raises no objection ("yes, but…"),
/// or it only backchannels ("Hm.", "Mm-hmm."): the proposal stands.
pub fn opens_with_assent(sentences: &[&str]) -> bool {
    let Some(first) = sentences.first() else {
        return false;
    };
    let opening = match sentences.get(1) {
        Some(second) => format!("{first} {second}"),
        None => (*first).to_owned(),
    };
    let on = Norm::new(&strip_markers(&opening));
    if on.has_any(OBJECTIONS) || on.words.iter().any(|w| w == "no" || w == "not") {
        return false;
    }
    let n = Norm::new(&strip_markers(first));
    if is_question(first) || n.words.is_empty() {
        return false;
    }
    // A turn that only backchannels ("Hm.", "Mm-hmm.") lets the proposal
    // stand: nobody objects, the meeting moves on.
    let whole = Norm::new(&strip_markers(&sentences.join(" ")));
    if whole.words.iter().all(|w| CONTINUERS.contains(&w.as_str())) {
        return true;
    }
    // "We should!", "Let's!": the proposal echoed back, nothing added.
    let echo = n.words.len() <= 3
        && (n.starts_with("we should")
            || n.starts_with("we could")
            || n.starts_with("we can")
            || n.starts_with("let's"));
    echo || n.has_any(ASSENT_PHRASES)
        || n.words.iter().all(|w| ASSENT_WORDS.contains(&w.as_str()))
            && n.words.iter().any(|w| {
                !matches!(
                    w.as_str(),
                    "i" | "so" | "well" | "uh" | "um" | "ehm" | "oh" | "of"
                )
            })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closing(text: &str) -> Option<&str> {
        closing_proposal(text, &sentences(text))
    }

    #[test]
    fn a_proposal_echoed_back_is_accepted() {
        assert!(opens_with_assent(&["We should!", "It could be fun."]));
        assert!(opens_with_assent(&["Let's!"]));
        assert!(!opens_with_assent(&["We should not do that."]));
    }

    #[test]
    fn a_turn_ending_on_a_proposal_gives_the_whole_run() {
        let t = "Unless we find a reason, all tasks run on all sets. And that we should \
                 do one more corpus preparation. That would be the minutes corpus. And \
                 that will be the pairs of transcripts and minutes. Right?";
        assert_eq!(
            closing(t),
            Some(
                "And that we should do one more corpus preparation. That would be the \
                 minutes corpus. And that will be the pairs of transcripts and minutes."
            )
        );
        assert_eq!(
            closing("{vocalsound} Um I'd suggest one big round button for the volume ."),
            Some("{vocalsound} Um I'd suggest one big round button for the volume .")
        );
        assert_eq!(
            closing("Should we put the logo on the back cover?"),
            Some("Should we put the logo on the back cover?")
        );
    }

    #[test]
    fn forecasts_statements_and_fragments_propose_nothing() {
        assert_eq!(closing("So yeah, we will see which one is faster."), None);
        assert_eq!(closing("We should -"), None);
        // ELITR dev meetings: an embedded question, not a proposal.
        assert_eq!(
            closing("And how much money we will use for, for a book."),
            None
        );
        assert_eq!(
            closing("We should add the reference. The rest of the chapter is fine."),
            None
        );
        assert_eq!(
            closing("The battery lasts two weeks {disfmarker} um ."),
            None
        );
    }

    #[test]
    fn assent_opens_a_turn_objections_and_continuers_do_not() {
        for t in [
            "Yes, yes. I'm absolutely fine with this, because more data helps.",
            "Yeah.",
            "Okay, sounds good.",
            "I agree, the round one is nicer.",
            "Yeah, yeah, good idea {vocalsound} .",
            "Mm-hmm, makes sense.",
        ] {
            assert!(opens_with_assent(&sentences(t)), "{t:?} assents");
        }
        // Only backchannelling lets the proposal stand.
        for t in ["Hm.", "Mm-hmm.", "Mm-hmm. {vocalsound}"] {
            assert!(opens_with_assent(&sentences(t)), "{t:?} lets it stand");
        }
        for t in [
            "Hm. The cradle is too big.",
            "Yeah, but the cost is too high.",
            "Yes. But I don't think the cradle fits.",
            "No, no.",
            "Okay? Shall we?",
            "Well.",
            "Yeah, I'm not sure about that.",
        ] {
            assert!(!opens_with_assent(&sentences(t)), "{t:?} does not assent");
        }
    }
}
