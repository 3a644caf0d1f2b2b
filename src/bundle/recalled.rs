//! Memory retrieved for a bundle's request, as lines: each turn verbatim
//! under a citation (session, seq, date), a turn's question/answer
//! neighbour next to it when the budget allows, a fact with the day it was
//! stated, an episode like the episodes section shows it.

use super::lines::{
    day, episode_lines, fact_item_line, item, turn_prefix, verbatim, Candidate, Line, Share,
    BYTES_PER_TOKEN_AT_MOST,
};
use super::{Inputs, RecalledItem, Section};
use crate::model::Turn;
use crate::search::turn_time;

/// A retrieved turn: its citation, then the turn as the recent turns show
/// it (content and exact tool call).
fn cited(session_id: &str, t: &Turn) -> String {
    let whole = verbatim(t);
    let prefix = turn_prefix(t);
    let rest = whole.strip_prefix(&prefix).unwrap_or(&whole);
    let who = prefix
        .split_once(' ')
        .map_or("", |(_, who)| who)
        .trim_end_matches(':');
    format!(
        "[session {session_id} #{}, {}] {who}:{rest}",
        t.seq,
        day(turn_time(t))
    )
}

/// Keys of retrieved memory: the item's position times this, plus the
/// line's place within the item (a neighbour before the hit, the hit, a
/// neighbour after it), so lines show in rank order and turn order.
pub(super) const KEY_STRIDE: u64 = 4;

/// The candidates of the retrieved memory: every item's hit, best first,
/// then the neighbours completing question/answer pairs, which draw on a
/// share of their own ("where the budget allows").
pub(super) fn candidates(inputs: &Inputs, out: &mut Vec<Candidate>) {
    let section = Section::Recalled;
    let mut neighbours = Vec::new();
    for (i, r) in inputs.recalled.iter().enumerate() {
        let base = i as u64 * KEY_STRIDE;
        let c = match &r.item {
            RecalledItem::Turns {
                session_id,
                hit_seq,
                turns,
            } => {
                for t in turns.iter().filter(|t| t.seq != *hit_seq) {
                    let place = if t.seq < *hit_seq { 0 } else { 2 };
                    neighbours.push(Candidate {
                        section,
                        share: Share::Neighbour,
                        key: base + place,
                        full: Line::new(cited(session_id, t)),
                        short: None,
                        short_lossy: false,
                        estimate: u64::from(t.token_count),
                    });
                }
                let Some(hit) = turns.iter().find(|t| t.seq == *hit_seq) else {
                    continue;
                };
                Candidate {
                    section,
                    share: Share::Section(section),
                    key: base + 1,
                    full: Line::new(cited(session_id, hit)),
                    short: None,
                    short_lossy: false,
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
                let (full, short) = episode_lines(e);
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
