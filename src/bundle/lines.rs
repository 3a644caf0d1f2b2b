//! A bundle's lines: a line of text with its token count (measured once),
//! a candidate line (its section, its share of the budget, its whole and
//! short forms), and how a stored record reads as a line: a turn verbatim,
//! a fact, an episode, a day.

use crate::model::calendar::{civil_from_days, MONTH_NAMES};
use crate::model::{Encoding, Episode, Fact, Role, SessionState, Turn, UnixNanos};
use crate::summarize::render;
use crate::tokens;

use super::Section;

/// A line and its token count, counted once on first use.
pub(super) struct Line {
    pub(super) text: String,
    pub(super) tokens: Option<u32>,
}

impl Line {
    /// A line of `text`, newline-terminated. Lines must not start with
    /// whitespace or '/' (token counts add up by line: see `pack.rs`).
    pub(super) fn new(mut text: String) -> Line {
        debug_assert!(
            !text.starts_with(|c: char| c.is_whitespace() || c == '/'),
            "a bundle line must not start with whitespace or '/': {text:?}"
        );
        text.push('\n');
        Line { text, tokens: None }
    }

    /// At least this many tokens, known without measuring
    /// ([`tokens::at_least`]).
    pub(super) fn at_least(&self) -> u64 {
        self.tokens
            .map_or_else(|| tokens::at_least(&self.text) as u64, u64::from)
    }

    pub(super) fn tokens(&mut self, enc: Encoding) -> u32 {
        *self.tokens.get_or_insert_with(|| {
            u32::try_from(tokens::count_remembered(enc, &self.text)).unwrap_or(u32::MAX)
        })
    }
}

/// The share of the budget a candidate draws on while sections compete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Share {
    /// Its section's share.
    Section(Section),
    /// The neighbour of a retrieved turn, completing its question/answer
    /// pair: after every retrieved item, within a share of its own.
    Neighbour,
}

/// One thing the bundle may hold.
pub(super) struct Candidate {
    pub(super) section: Section,
    pub(super) share: Share,
    /// Position for display: the item's index in the summary, or a seq.
    pub(super) key: u64,
    pub(super) full: Line,
    pub(super) short: Option<Line>,
    /// Stored tokens of the full text, to skip measuring what cannot fit.
    pub(super) estimate: u64,
    /// Whether the short form lost anything (else it counts as whole).
    pub(super) short_lossy: bool,
}

pub(super) fn role_name(r: Role) -> &'static str {
    match r {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
        Role::Tool => "tool",
    }
}

pub(super) fn state_name(s: SessionState) -> &'static str {
    match s {
        SessionState::Active => "ACTIVE",
        SessionState::Idle => "IDLE",
        SessionState::Closed => "CLOSED",
    }
}

pub(super) fn turn_prefix(t: &Turn) -> String {
    if t.speaker.is_empty() {
        format!("[#{}] {}:", t.seq, role_name(t.role))
    } else {
        format!("[#{}] {} {}:", t.seq, role_name(t.role), t.speaker)
    }
}

/// A turn verbatim: content, then its tool call's exact fields.
pub(super) fn verbatim(t: &Turn) -> String {
    let mut out = format!("{} {}", turn_prefix(t), t.content);
    if let Some(c) = &t.tool_call {
        out.push_str(&format!(
            "\n  tool call {}({}) -> {:?}",
            c.tool_name, c.arguments_json, c.status
        ));
        if !c.result.is_empty() {
            out.push_str(&format!("\n  result: {}", c.result));
        }
        if !c.error_details.is_empty() {
            out.push_str(&format!("\n  error: {}", c.error_details));
        }
    }
    out
}

/// Fewest bytes a token of English text takes, about: a line of `n` bytes
/// is taken to cost at least `n / BYTES_PER_TOKEN_AT_MOST` tokens, so a
/// line far over what is left is never measured.
pub(super) const BYTES_PER_TOKEN_AT_MOST: u64 = 8;

pub(super) fn item(section: Section, key: usize, text: String) -> Candidate {
    Candidate {
        section,
        share: Share::Section(section),
        key: key as u64,
        estimate: text.len() as u64 / BYTES_PER_TOKEN_AT_MOST,
        full: Line::new(text),
        short: None,
        short_lossy: false,
    }
}

/// One line of text (newlines folded): a stored fact or episode may hold
/// any characters.
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(super) fn fact_item_line(f: &Fact) -> String {
    if f.key.is_empty() {
        format!("- {}", one_line(&f.text))
    } else {
        format!("- {}: {}", f.key, one_line(&f.text))
    }
}

/// Most characters of an episode's prose a bundle shows.
const EPISODE_PROSE_CHARS: usize = 400;
/// Most of an episode's pending actions a bundle names.
const EPISODE_ACTIONS: usize = 5;

/// `text` cut to at most `max` characters at a word boundary, marked "…"
/// when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    let at = cut.rfind(' ').unwrap_or(cut.len());
    format!("{}…", cut[..at].trim_end())
}

/// An episode in full (topic, outcome, prose, still-pending actions) and
/// its short form (topic and outcome only). The day it ended is when its
/// last summarized turn was said (`last_said`), else when it stopped.
pub(super) fn episode_lines(e: &Episode, last_said: Option<UnixNanos>) -> (String, String) {
    let ended = last_said.unwrap_or(e.ended_at);
    let (y, m, d) = crate::summarize::rules::civil_from_days(ended.div_euclid(86_400_000_000_000));
    let day = format!("{y:04}-{m:02}-{d:02}");
    let head = format!(
        "- Session {} (ended {day}, {}): {}",
        e.session_id,
        render::outcome(e.outcome),
        one_line(if e.topic.is_empty() {
            &e.user_intent
        } else {
            &e.topic
        })
    );
    let mut full = head.clone();
    // Bounded: an episode is one line among many (ListEpisodes has it all).
    if !e.prose.trim().is_empty() {
        full.push_str(&format!(
            ". {}",
            clip(&one_line(&e.prose), EPISODE_PROSE_CHARS)
        ));
    }
    if !e.pending_actions.is_empty() {
        let mut still: Vec<String> = e
            .pending_actions
            .iter()
            .take(EPISODE_ACTIONS)
            .map(|a| one_line(&a.action))
            .collect();
        if e.pending_actions.len() > EPISODE_ACTIONS {
            still.push(format!(
                "and {} more",
                e.pending_actions.len() - EPISODE_ACTIONS
            ));
        }
        full.push_str(&format!(". Still pending: {}", still.join("; ")));
    }
    (full, head)
}

/// A day as people write it: "8 May 2023".
pub(super) fn day(t: UnixNanos) -> String {
    let (y, m, d) = civil_from_days(t.div_euclid(86_400_000_000_000));
    format!("{d} {} {y}", MONTH_NAMES[(m as usize).clamp(1, 12) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::calendar::days_from_civil;

    #[test]
    fn days_read_like_people_write_them() {
        let t = days_from_civil(2023, 5, 8) * 86_400_000_000_000 + 1;
        assert_eq!(day(t), "8 May 2023");
        let t = days_from_civil(1999, 12, 31) * 86_400_000_000_000;
        assert_eq!(day(t), "31 December 1999");
    }

    #[test]
    fn an_episode_ends_when_its_last_turn_was_said() {
        let at = |y, m, d| days_from_civil(y, m, d) * 86_400_000_000_000;
        let e = Episode {
            namespace: "ns".into(),
            subject_id: "s".into(),
            session_id: "chat-1".into(),
            started_at: at(2026, 12, 8),
            ended_at: at(2026, 12, 8),
            topic: "The lake trip".into(),
            outcome: crate::model::Outcome::Resolved,
            prose: String::new(),
            user_intent: String::new(),
            decisions: Vec::new(),
            pending_actions: Vec::new(),
            summary_version: 1,
            last_seq: 4,
            ended_as: SessionState::Closed,
        };
        // Imported history: its turns were said in 2023, the daemon
        // closed the session today.
        let (full, _) = episode_lines(&e, Some(at(2023, 5, 9)));
        assert!(
            full.starts_with("- Session chat-1 (ended 2023-05-09, "),
            "{full}"
        );
        // Its last turn gone (retention): the day it stopped.
        let (full, _) = episode_lines(&e, None);
        assert!(
            full.starts_with("- Session chat-1 (ended 2026-12-08, "),
            "{full}"
        );
    }
}
