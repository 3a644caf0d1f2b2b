//! Memory retrieved for a bundle's request, as lines: each turn verbatim
//! after its day and speaker (a long one also as an excerpt of the
//! sentences that share the query's words, for when it does not fit
//! whole), a turn's question/answer neighbour next to it when the budget
//! allows, a fact with the day it was stated, an episode like the episodes
//! section shows it.

use std::collections::BTreeSet;

use super::compress::excerpt;
use super::lines::{
    day, episode_lines, fact_item_line, item, role_name, turn_prefix, verbatim, Candidate, Line,
    Share, BYTES_PER_TOKEN_AT_MOST,
};
use super::{Inputs, RecalledItem, Section};
use crate::model::Turn;
use crate::search::turn_time;
use crate::summarize::rules;

/// A retrieved turn read like memory: its day and speaker first, then the
/// words verbatim (and the exact tool call): "[8 May 2023] Caroline:
/// text". A dated line per turn is what a reader answers "when" from; the
/// role is left out when the speaker is named. Where the line comes from
/// (session, turn) is in the response's `recalled` references, not in the
/// text: a citation on every line took about a fifth of a chat turn's
/// tokens, room that holds more memory (measured in docs/benchmarks.md).
fn cited(t: &Turn) -> String {
    // The exact tool call, as the log shows it, follows the words.
    let whole = verbatim(t);
    let said = format!("{} {}", turn_prefix(t), t.content);
    let call = whole.strip_prefix(&said).unwrap_or("");
    format!("{}{}{call}", said_by(t), t.content)
}

/// "[8 May 2023] Caroline: ": the day and who said it.
fn said_by(t: &Turn) -> String {
    let who = if t.speaker.is_empty() {
        role_name(t.role)
    } else {
        t.speaker.as_str()
    };
    format!("[{}] {who}: ", day(turn_time(t)))
}

/// The short form of a long retrieved turn: its sentences that share the
/// query's words (`compress::excerpt`); none for a tool call (kept
/// exact) or a turn that is not long.
fn excerpted(t: &Turn, query: &BTreeSet<String>) -> Option<String> {
    if t.tool_call.is_some() {
        return None;
    }
    excerpt(&t.content, query).map(|e| format!("{}{e}", said_by(t)))
}

/// Keys of retrieved memory: the item's position times this, plus the
/// line's place within the item (a neighbour before the hit, the hit, a
/// neighbour after it), so lines show in rank order and turn order.
pub(super) const KEY_STRIDE: u64 = 4;

/// The candidates of the retrieved memory: every item's hit, best first,
/// then the neighbours completing question/answer pairs, which draw on a
/// share of their own ("where the budget allows").
pub(super) fn candidates(inputs: &Inputs, query: &str, out: &mut Vec<Candidate>) {
    let section = Section::Recalled;
    let query = rules::content_words(query);
    let mut neighbours = Vec::new();
    for (i, r) in inputs.recalled.iter().enumerate() {
        let base = i as u64 * KEY_STRIDE;
        let c = match &r.item {
            RecalledItem::Turns { hit_seq, turns, .. } => {
                for t in turns.iter().filter(|t| t.seq != *hit_seq) {
                    let place = if t.seq < *hit_seq { 0 } else { 2 };
                    neighbours.push(Candidate {
                        section,
                        share: Share::Neighbour,
                        key: base + place,
                        full: Line::new(cited(t)),
                        short: None,
                        short_lossy: false,
                        estimate: u64::from(t.token_count),
                    });
                }
                let Some(hit) = turns.iter().find(|t| t.seq == *hit_seq) else {
                    continue;
                };
                let short = excerpted(hit, &query);
                Candidate {
                    section,
                    share: Share::Section(section),
                    key: base + 1,
                    full: Line::new(cited(hit)),
                    short_lossy: short.is_some(),
                    short: short.map(Line::new),
                    estimate: u64::from(hit.token_count),
                }
            }
            RecalledItem::Fact(f) => {
                let mut c = item(
                    section,
                    0,
                    format!("{} (stated {})", fact_item_line(f), day(f.created_at)),
                );
                c.key = base + 1;
                c
            }
            RecalledItem::Episode(e) => {
                let (full, short) = episode_lines(e, None);
                Candidate {
                    section,
                    share: Share::Section(section),
                    key: base + 1,
                    full: Line::new(full.clone()),
                    short_lossy: short != full,
                    estimate: full.len() as u64 / BYTES_PER_TOKEN_AT_MOST,
                    short: (short != full).then(|| Line::new(short)),
                }
            }
        };
        out.push(c);
    }
    out.extend(neighbours);
}
