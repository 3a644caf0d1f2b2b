//! Requirements stated in the passive: "the profanity filtering should
//! really be employed twice", "all person's data must be removed", "it
//! should be tested empirically". Meetings settle what must happen to a
//! thing as often as who does it, and minutes record both; such a sentence
//! is an action nobody in particular owns (the ranking decides whether it
//! stands out). "It should be fine" judges and requires nothing.
//!
//! Pure functions of their input; they only locate cues, never build text.

use super::*;

/// Past participles that do not end in "-ed".
const IRREGULAR_PARTICIPLES: &[&str] = &[
    "done", "written", "made", "taken", "given", "sent", "put", "kept", "run", "shown", "built",
    "set", "split", "held", "brought", "chosen", "driven", "read", "found", "paid", "told",
];

/// Participles that state a condition, not an action on the thing: "it
/// should be based on…", "we are supposed to…", "it should be used to…".
const STATIVE_PARTICIPLES: &[&str] = &["based", "supposed", "used", "interested", "concerned"];

/// Words that may stand between a modal, "be" and the participle in speech
/// ("should really be, ah, employed", "must be absolutely removed").
fn is_interposed(w: &str) -> bool {
    FUTURE_ADVERBS.contains(&w)
        || matches!(
            w,
            "ah" | "eh" | "er" | "erm" | "again" | "always" | "absolutely" | "first" | "now"
        )
}

fn is_participle(w: &str) -> bool {
    w.len() > 4 && w.ends_with("ed") && !STATIVE_PARTICIPLES.contains(&w)
        || IRREGULAR_PARTICIPLES.contains(&w)
}

/// The word index where a sentence requires something in the passive: a
/// modal ("should", "must", "has to", "needs to"), "be", then a participle,
/// adverbs and fillers allowed between them.
pub fn passive_requirement(n: &Norm) -> Option<usize> {
    let w = |i: usize| n.words.get(i).map_or("", String::as_str);
    let next = |mut i: usize| {
        while is_interposed(w(i)) {
            i += 1;
        }
        i
    };
    (0..n.words.len()).find(|&i| {
        let after_modal = match w(i) {
            "should" | "must" => i + 1,
            "has" | "have" | "needs" | "need" if w(i + 1) == "to" => i + 2,
            _ => return false,
        };
        let be = next(after_modal);
        w(be) == "be" && is_participle(w(next(be + 1)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passive(s: &str) -> bool {
        passive_requirement(&Norm::new(&strip_markers(s))).is_some()
    }

    #[test]
    fn a_passive_requirement_is_found_through_fillers() {
        // ELITR test meetings 002 and 008.
        assert!(passive(
            "So the profanity filtering should really be, ah, employed twice on each path."
        ));
        assert!(passive(
            "But we don't have numbers for that. It is should be tested empirically."
        ));
        assert!(passive("And all person's data must be removed."));
        assert!(passive(
            "The recordings should be, um, uh, transcribed first."
        ));
        assert!(passive(
            "The de-identification procedure has to be written."
        ));
    }

    #[test]
    fn judgements_and_states_require_nothing() {
        assert!(!passive("That should be fine, I think."));
        assert!(!passive("So that should be the same as last time."));
        assert!(!passive(
            "It should be, uh, based on the old {disfmarker} the old data."
        ));
        assert!(!passive("We are supposed to be there at nine."));
    }

    #[test]
    fn a_passive_requirement_is_an_unowned_action() {
        let cue = action_cue(
            "So the profanity filtering should really be, ah, employed twice on each path.",
            &["PERSON15".to_string()],
        )
        .expect("an action");
        assert_eq!(cue.owner, OwnerCue::Unassigned);
    }
}
