//! The index's layout: its fields, the keys documents are upserted and
//! deleted by, and the text each kind of record is indexed with.

use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED, STRING,
};
use tantivy::Term;

use crate::model::{Role, Turn, UnixNanos};

/// How much a match counts, against 1 for a word of the record's own
/// text. A word found in the turns around a turn:
pub(super) const CONTEXT_BOOST: f32 = 0.35;
/// Weight of a word that names a turn's speaker (questions name the
/// person they are about; a speaker term is common, so its idf is low).
pub(super) const SPEAKER_BOOST: f32 = 2.5;
/// Weight, on a record's text and neighbours, of a query word that names a
/// speaker of the records searched. "When did Kate start skiing?" is
/// answered by what Kate said, found by her speaker field; the turns that
/// hold her name are mostly others greeting or addressing her.
pub(super) const NAMED_IN_TEXT: f32 = 0.1;

/// Weight of a query word on a record's own text (and, times
/// [`CONTEXT_BOOST`], on its neighbours'): [`NAMED_IN_TEXT`] when the word
/// names a speaker, else 1.
pub(super) fn own_weight(names_a_speaker: bool) -> f32 {
    if names_a_speaker {
        NAMED_IN_TEXT
    } else {
        1.0
    }
}
/// Weight of two query words found next to each other (slop 2: a removed
/// stop word or two may stand between them).
pub(super) const PHRASE_BOOST: f32 = 0.3;
/// Weight of a time word ("today", "a week ago") in a record when the
/// query asks when something happened (`when::answer_cues`).
pub(super) const TIME_CUE_BOOST: f32 = 0.5;
/// Score added to a record from the period a query names.
pub(super) const WHEN_BOOST: f32 = 1.5;

/// The query's scored terms and their weights, in the order every
/// ranking path scores them: each word on a record's text, neighbours and
/// speaker (`fields`, or their scoped copies), then the time cues on its
/// text. `term` makes a field's term of a word.
pub(super) fn weighted_terms(
    [text, context, speaker]: [Field; 3],
    (terms, named, cues): (&[String], &[bool], &[String]),
    term: impl Fn(Field, &str) -> Term,
) -> Vec<(Term, f32)> {
    terms
        .iter()
        .zip(named)
        .flat_map(|(t, &named)| {
            let own = own_weight(named);
            [
                (term(text, t), own),
                (term(context, t), CONTEXT_BOOST * own),
                (term(speaker, t), SPEAKER_BOOST),
            ]
        })
        .chain(cues.iter().map(|t| (term(text, t), TIME_CUE_BOOST)))
        .collect()
}

/// Factor on the score of a turn that only asks ([`only_asks`]): a
/// question is answered by a statement, and the turn asking it shares the
/// question's words without holding the answer ("What tv show are you
/// watching?" for "What TV show was Kate watching?").
pub(super) const ASKING_WEIGHT: f32 = 0.5;

/// Whether every sentence of `content` is a question (ends in "?", an
/// "!" after it allowed).
pub(super) fn only_asks(content: &str) -> bool {
    let mut any = false;
    // The sentence so far: whether it has a word, and its last mark.
    let (mut words, mut last) = (false, None);
    let mut chars = content.trim().chars().peekable();
    while let Some(c) = chars.next() {
        words |= c.is_alphanumeric();
        if !c.is_whitespace() && c != '!' {
            last = Some(c);
        }
        let next = chars.peek();
        let ends = matches!(c, '.' | '!' | '?' | '\n') && next.is_none_or(|n| n.is_whitespace());
        if ends || next.is_none() {
            if words {
                if last != Some('?') {
                    return false;
                }
                any = true;
            }
            (words, last) = (false, None);
        }
    }
    any
}

/// The text analyzer of the text fields.
pub(super) const ANALYZER: &str = "mnemo_en";

#[derive(Clone, Copy)]
pub(super) struct Fields {
    /// Unique per document: upserts delete by it.
    pub(super) doc_key: Field,
    pub(super) ns: Field,
    pub(super) subject: Field,
    /// `ns \0 session_id`: deleting a session deletes by it.
    pub(super) session_key: Field,
    pub(super) session_id: Field,
    pub(super) kind: Field,
    pub(super) seq: Field,
    pub(super) ref_id: Field,
    pub(super) role: Field,
    /// The record's own words.
    pub(super) text: Field,
    /// A turn's neighbours (the turns before and after it), so an answer is
    /// found by the question it answers ("what is your dog called?" /
    /// "Max"), and a remark by what it refers to.
    pub(super) context: Field,
    /// Who said a turn.
    pub(super) speaker: Field,
    /// When it happened, in seconds since the epoch: the client's time of
    /// a turn when it gave one. Ranks equal scores newest first and
    /// matches dates named in a query.
    pub(super) time: Field,
    /// 1 for a turn that only asks ([`only_asks`]), else absent.
    pub(super) asks: Field,
    /// `text`, `context` and `speaker` again, each word prefixed with the
    /// record's subject (`scoped.rs`): a subject's own postings, so a
    /// search of one subject is a plain disjunction of terms that reads
    /// that subject's records only, however large the index.
    pub(super) scoped_text: Field,
    pub(super) scoped_context: Field,
    pub(super) scoped_speaker: Field,
}

pub(super) fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let analyzed = |stored: bool, positions: bool| {
        let opts = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(if positions {
                    IndexRecordOption::WithFreqsAndPositions
                } else {
                    IndexRecordOption::WithFreqs
                }),
        );
        if stored {
            opts.set_stored()
        } else {
            opts
        }
    };
    let f = Fields {
        // A column too: the check after a crash reads every key.
        doc_key: b.add_text_field("doc_key", STRING | FAST),
        ns: b.add_text_field("ns", STRING),
        // What identifies a hit is read from columns (`identity.rs`); the
        // document store keeps only the text snippets are cut from.
        subject: b.add_text_field("subject", STRING | FAST),
        session_key: b.add_text_field("session_key", STRING),
        session_id: b.add_text_field("session_id", FAST),
        kind: b.add_text_field("kind", STRING | FAST),
        seq: b.add_u64_field("seq", INDEXED | FAST),
        ref_id: b.add_text_field("ref_id", FAST),
        role: b.add_text_field("role", FAST),
        text: b.add_text_field("text", analyzed(true, true)),
        context: b.add_text_field("context", analyzed(false, false)),
        speaker: b.add_text_field("speaker", analyzed(false, false)),
        time: b.add_u64_field("time", INDEXED | FAST),
        asks: b.add_u64_field("asks", FAST),
        scoped_text: b.add_text_field("scoped_text", analyzed(false, false)),
        scoped_context: b.add_text_field("scoped_context", analyzed(false, false)),
        scoped_speaker: b.add_text_field("scoped_speaker", analyzed(false, false)),
    };
    (b.build(), f)
}

pub(super) fn session_key(ns: &str, session_id: &str) -> String {
    format!("{ns}\u{0}{session_id}")
}

pub(super) fn turn_key(ns: &str, session_id: &str, seq: u64) -> String {
    format!("t\u{0}{ns}\u{0}{session_id}\u{0}{seq}")
}

pub(super) fn fact_key(ns: &str, fact_id: &str) -> String {
    format!("f\u{0}{ns}\u{0}{fact_id}")
}

pub(super) fn episode_key(ns: &str, session_id: &str) -> String {
    format!("e\u{0}{ns}\u{0}{session_id}")
}

pub(super) fn role_tag(r: Role) -> &'static str {
    match r {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
        Role::Tool => "tool",
    }
}

pub(super) fn role_from_tag(t: &str) -> Option<Role> {
    match t {
        "user" => Some(Role::User),
        "assistant" => Some(Role::Assistant),
        "system" => Some(Role::System),
        "tool" => Some(Role::Tool),
        _ => None,
    }
}

/// The searchable text of a turn: its content and its tool call's name,
/// arguments, result and error.
pub(super) fn turn_text(t: &Turn) -> String {
    let mut text = t.content.clone();
    if let Some(c) = &t.tool_call {
        for part in [&c.tool_name, &c.arguments_json, &c.result, &c.error_details] {
            if !part.is_empty() {
                text.push('\n');
                text.push_str(part);
            }
        }
    }
    text
}

/// A turn's time for the index: the client's when given, else the
/// server's.
pub fn turn_time(t: &Turn) -> UnixNanos {
    t.client_time.unwrap_or(t.server_time)
}

/// Seconds since the epoch, clamped at zero.
pub(super) fn seconds(t: UnixNanos) -> u64 {
    u64::try_from(t.div_euclid(1_000_000_000)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::only_asks;

    #[test]
    fn a_turn_only_asks_when_every_sentence_is_a_question() {
        for asks in [
            "What's your cats name?",
            "Really?! And when did you go? ",
            "How was the trip?\nDid you see the lake?",
        ] {
            assert!(only_asks(asks), "{asks}");
        }
        for says in [
            "",
            "...",
            "I had an exam today. How about you?",
            "Who knows? I started skiing ten years ago.",
            "Version 2.0? No, 2.1 shipped.",
            "Wow!",
        ] {
            assert!(!only_asks(says), "{says}");
        }
    }
}
