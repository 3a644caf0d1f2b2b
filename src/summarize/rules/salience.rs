//! Salience: how much a decision or an action matters, from its own words,
//! so a long meeting's summary keeps its tens of best items instead of
//! every sentence with "will" in it. Explicit decisions ("we decided", "we
//! agreed", "let's go with"), work a named person takes on, and the
//! speaker's own "I will …" rank high; hedged talk ("maybe",
//! "probably", "I think"), general necessities ("we need to…"), narrated
//! questions ("the question is whether…"), disfluent rambling and items
//! with fewer than three words of substance rank low.
//! The engine adds what the words cannot tell: agreement by others,
//! restatement, where in the session the item was said, and whether it
//! names the topic of its stretch of the session ([`names_topic`]).
//!
//! How many decisions and actions a summary shows scales with what was
//! said ([`items_shown`]): about 25 an hour of speech.

use super::*;

/// Decisions and actions a summary shows whatever the session's length.
pub const MIN_ITEMS_SHOWN: usize = 12;

/// Words spoken per decision or action shown beyond [`MIN_ITEMS_SHOWN`]:
/// 25 items per 9,000 words, an hour of speech at 150 words a minute.
pub const WORDS_PER_ITEM: u64 = 360;

/// Decisions and actions shown for a session of `words` conversational
/// words: at least [`MIN_ITEMS_SHOWN`], one per [`WORDS_PER_ITEM`].
pub fn items_shown(words: u64) -> usize {
    MIN_ITEMS_SHOWN.max(usize::try_from(words / WORDS_PER_ITEM).unwrap_or(usize::MAX))
}

/// Decisions and actions one per [`WORDS_PER_ITEM`] words, without the
/// minimum: what a ranked summary shows of its items at or below
/// [`FLOOR_SALIENCE`].
pub fn items_shown_by_words(words: u64) -> usize {
    usize::try_from(words / WORDS_PER_ITEM).unwrap_or(usize::MAX)
}

/// Items above this salience may fill a ranked summary up to
/// [`MIN_ITEMS_SHOWN`] even past one per [`WORDS_PER_ITEM`] words: an
/// explicit decision, agreement, a named owner or the speaker's own "I
/// will…" without hedges.
pub const FLOOR_SALIENCE: f32 = 1.0;

/// When a session has more decisions and actions than it can show, those
/// at or below this salience are left out even if the bound has room:
/// fewer than three words of substance and nothing else for them.
pub const MIN_SALIENCE: f32 = -2.0;

/// What an item gains when it names what its stretch of the session is
/// about (a word of its topic segment's name): the substance of the
/// discussion rather than an aside ("Invited speakers, ugh. Okay, I will
/// read it."). Worth as much as the speaker's own "I will".
pub const TOPIC_SALIENCE: f32 = 1.0;

/// Whether `text` names the topic `topic` (a topic segment's name): they
/// share a stemmed content word.
pub fn names_topic(text: &str, topic: &str) -> bool {
    let words = content_words(text);
    content_words(topic).iter().any(|w| words.contains(w))
}

/// Phrases that state a decision outright.
const STRONG_DECISIONS: &[&str] = &[
    "we decided",
    "we've decided",
    "we have decided",
    "decided to",
    "we agreed",
    "we have agreed",
    "we've agreed",
    "agreed to",
    "agreed on",
    "final decision",
    "let's go with",
    "we'll go with",
    "we will go with",
    "settled on",
    "we chose",
];

/// Words that hedge what a sentence says.
const HEDGES: &[&str] = &[
    "maybe",
    "probably",
    "perhaps",
    "i think",
    "i guess",
    "i hope",
    "i believe",
    "might",
    "i don't know",
    "not sure",
    "somehow",
    "kind of",
    "sort of",
];

/// Phrases of a necessity nobody takes on.
const NECESSITIES: &[&str] = &[
    "we need to",
    "you need to",
    "needs to",
    "need to",
    "have to",
];

/// Whether the speaker states their own necessity: "I need to…", "I
/// still have to…", "then I only need to finish…" ("I" at most two words
/// before "need to" / "have to"). Necessities of "we", "you" or "they"
/// are not taken on by anyone in particular.
fn speaker_necessity(n: &Norm) -> bool {
    ["need to", "have to"].iter().any(|cue| {
        n.find(cue)
            .is_some_and(|p| n.words[p.saturating_sub(3)..p].iter().any(|w| w == "i"))
    })
}

/// Phrases that narrate a question rather than settle anything.
const NARRATED_QUESTIONS: &[&str] = &[
    "the question is",
    "question is whether",
    "whether",
    "i wonder",
    "is there anything",
];

/// Fillers of speech, counted for disfluency.
const FILLERS: &[&str] = &["uh", "um", "uhm", "ehm", "eh", "erm", "hmm", "mm"];

/// The salience of a decision or action from its words alone (about -3
/// to 4; 0 is plain). `owner` is the action's owner ("" for a decision).
pub fn text_salience(text: &str, owner: &str) -> f32 {
    let n = Norm::new(&strip_markers(text));
    let mut score = 0.0;
    if n.has_any(STRONG_DECISIONS) {
        score += 2.0;
    }
    // "I'll send…", "I will continue…", "I only need to finish the
    // executive summary": the speaker takes it on.
    let own_necessity = speaker_necessity(&n);
    if n.has_any(&["i will", "i'll", "i'm going to", "i am going to"]) || own_necessity {
        score += 1.0;
    }
    // "[PERSON6] will download…", "Marco, please…": someone named does it.
    let named = !owner.is_empty()
        && owner != "unassigned"
        && text.to_lowercase().contains(&owner.to_lowercase());
    if named {
        score += 1.5;
    }
    if n.has("let's") {
        score += 0.5;
    }
    let hedges = HEDGES.iter().filter(|h| n.has(h)).count();
    score -= 0.5 * hedges.min(2) as f32;
    if n.has_any(NECESSITIES) && !named && !own_necessity {
        score -= 0.5;
    }
    if n.has_any(NARRATED_QUESTIONS) {
        score -= 1.0;
    }
    // Disfluency: fillers and a word said twice in a row ("the the").
    let words = n.words.len().max(1);
    let stumbles = n
        .words
        .iter()
        .enumerate()
        .filter(|(i, w)| FILLERS.contains(&w.as_str()) || *i > 0 && n.words[i - 1] == **w)
        .count();
    if stumbles * 8 > words {
        score -= 1.0;
    }
    // Too little said to stand alone ("I'll send you a link."), or
    // something specific ("reorganize the directories by date and name").
    match substance_count(text) {
        0..=2 => score -= 3.0,
        3..=5 => {}
        _ => score += 0.5,
    }
    if text.chars().count() > 200 {
        score -= 0.5;
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_shown_scale_with_words() {
        assert_eq!(items_shown(0), MIN_ITEMS_SHOWN);
        assert_eq!(items_shown(2_000), MIN_ITEMS_SHOWN);
        assert_eq!(items_shown(9_000), 25);
        assert_eq!(items_shown(18_000), 50);
    }

    #[test]
    fn past_one_item_per_360_words_only_standing_out_items_fill_the_minimum() {
        // A 2,452-word meeting (ELITR test 001): 6 by its words, up to 12
        // when the rest stand out.
        assert_eq!(items_shown_by_words(2_452), 6);
        assert_eq!(items_shown(2_452), MIN_ITEMS_SHOWN);
        let plain = text_salience(
            "We need to invite more people into the committee.",
            "unassigned",
        );
        let own = text_salience(
            "So I will send the draft invitation email to the program committee reviewers.",
            "PERSON5",
        );
        assert!(plain <= FLOOR_SALIENCE, "{plain}");
        assert!(own > FLOOR_SALIENCE, "{own}");
    }

    #[test]
    fn decisions_and_named_work_outrank_hedged_talk() {
        let decided = text_salience("So now we decided that Ana will work with the data.", "");
        let named = text_salience(
            "And [PERSON5] and [PERSON11] should select the video.",
            "[PERSON5]",
        );
        let mine = text_salience("I will continue to annotate our data.", "PERSON3");
        let hedged = text_salience(
            "So maybe we need to uh think about the the format probably.",
            "unassigned",
        );
        let narrated = text_salience(
            "So the question is whether someone would be able to do the first step.",
            "unassigned",
        );
        for high in [decided, named, mine] {
            assert!(high > hedged, "{high} > {hedged}");
            assert!(high > narrated, "{high} > {narrated}");
        }
    }

    #[test]
    fn the_speakers_own_necessity_ranks_as_a_commitment() {
        // ELITR test meeting 002.
        let mine = text_salience(
            "Then, then I only need to finish the executive summary.",
            "PERSON12",
        );
        let ours = text_salience(
            "Then we only need to finish the executive summary.",
            "PERSON12",
        );
        assert!(mine > ours, "{mine} > {ours}");
    }

    #[test]
    fn an_item_names_its_topic_by_a_shared_content_word() {
        // ELITR test meeting 003: the data and its deadline are what the
        // stretch is about; reading a list of invited speakers is an aside.
        let topic = "data processing";
        assert!(names_topic(
            "The thing is that we need to have all the data processed by February mid.",
            topic
        ));
        assert!(!names_topic(
            "Invited speakers, ugh. Okay, uh, okay, I will read it.",
            topic
        ));
    }

    #[test]
    fn disfluent_rambling_ranks_low() {
        let clean = text_salience("We will publish the test set in March.", "PERSON1");
        let stumbling = text_salience(
            "We will, uh, we will um the the publish uh the test set in in March.",
            "PERSON1",
        );
        assert!(clean > stumbling, "{clean} > {stumbling}");
    }
}
