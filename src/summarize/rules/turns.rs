//! Turns as the rules see them: text, events and annotations.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

/// The name items use for a turn's speaker: the speaker id, or the role in
/// lower case when the client gave no speaker.
pub fn speaker_of(turn: &Turn) -> String {
    if turn.speaker.trim().is_empty() {
        format!("{:?}", turn.role).to_lowercase()
    } else {
        turn.speaker.clone()
    }
}

/// The time a turn happened: the client's clock when given, else the
/// server's (unix nanos, UTC).
pub fn turn_time(turn: &Turn) -> UnixNanos {
    turn.client_time.unwrap_or(turn.server_time)
}

/// A client annotation: the whole turn is taken as this kind of item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotation {
    /// A decision.
    Decision,
    /// A pending action.
    PendingAction,
    /// An open question.
    OpenQuestion,
    /// A key fact.
    Fact,
}

/// The turn's annotation, if its metadata carries a known one.
pub fn annotation(metadata: &BTreeMap<String, String>) -> Option<Annotation> {
    match metadata
        .get(ANNOTATION_KEY)?
        .trim()
        .to_ascii_lowercase()
        .as_str()
    {
        "decision" => Some(Annotation::Decision),
        "pending_action" | "action" => Some(Annotation::PendingAction),
        "open_question" | "question" => Some(Annotation::OpenQuestion),
        "fact" => Some(Annotation::Fact),
        _ => None,
    }
}

/// The seq of the question the turn says it answers (`mnemo.answer_to`).
pub fn answer_to(metadata: &BTreeMap<String, String>) -> Option<u64> {
    metadata.get(ANSWER_TO_KEY)?.trim().parse().ok()
}
