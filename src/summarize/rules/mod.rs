//! The rules that read free text: sentence splitting, content words,
//! entities (identifiers, amounts, dates, emails, URLs), the per-sentence
//! classifier with its importance score, and the cue phrases for actions,
//! owners, deadlines, priorities, decisions, reversals, completions and
//! questions. Every rule is a pure function of its input (plus the turn's
//! time for deadlines), so the engine stays deterministic and each rule has
//! its own unit tests below. No rule invents text: extractors return slices
//! of their input, and the only derived value is a deadline date.
//!
//! One file per concept; every item is re-exported here, so callers name
//! `rules::X` whatever file holds it.

mod act_words;
mod action_details;
mod actions;
mod acts;
mod classify;
mod completion;
mod dates;
mod decisions;
mod entities;
mod markers;
mod noise;
mod numbers;
mod proposals;
mod questions;
mod requests;
mod requirements;
mod risk;
mod salience;
#[cfg(test)]
mod tests;
mod text;
mod turns;

pub use self::action_details::*;
pub use self::actions::*;
pub use self::acts::{confidence, is_cheer, is_listed, is_topic_word, Act, LIST_CONFIDENCE};
pub use self::classify::*;
pub use self::completion::*;
pub use self::dates::*;
pub use self::decisions::*;
pub use self::entities::*;
pub use self::markers::*;
pub use self::noise::*;
pub use self::numbers::*;
pub use self::proposals::*;
pub use self::questions::*;
pub use self::requests::*;
pub use self::requirements::*;
pub use self::risk::*;
pub use self::salience::*;
pub use self::text::*;
pub use self::turns::*;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use crate::model::Priority;
use crate::model::{Turn, UnixNanos};

/// Longest item text (fact, key point, decision...) in characters; longer
/// sentences are cut at a word boundary (see [`clip`]).
pub const MAX_ITEM_CHARS: usize = 300;

/// The text of an item cut from `sentence`: without transcription markers
/// (see [`without_markers`]), without leading filler, clipped to
/// [`MAX_ITEM_CHARS`].
pub fn item_text(sentence: &str) -> String {
    clip(trim_filler(&without_markers(sentence)), MAX_ITEM_CHARS)
}

/// Metadata key of a client annotation (`decision`, `pending_action`,
/// `open_question`, `fact`); annotations win over heuristics.
pub const ANNOTATION_KEY: &str = "mnemo.annotation";

/// Metadata key the server sets on event turns it records itself (e.g.
/// `handoff`); clients cannot set it. Event turns are counted but yield no
/// summary items.
pub const EVENT_KEY: &str = "mnemo.event";

/// Whether a turn is an event the server recorded.
pub fn is_event(metadata: &BTreeMap<String, String>) -> bool {
    metadata.contains_key(EVENT_KEY)
}

/// Metadata key naming (by seq) the question a turn answers.
pub const ANSWER_TO_KEY: &str = "mnemo.answer_to";
