//! The second part of a bundle: the turns since the last fold as an
//! append-only log. A new turn is a line appended at its end; nothing above
//! it is rewritten, so two bundles around an append share the log up to
//! the new turn.
//!
//! The log has two blocks: the newest turns verbatim (a turn too long for
//! a fixed cap is always shown shortened, whatever its place) and, before
//! them, older turns shortened. When a block outgrows its allowance, its
//! start moves to the next block boundary: boundaries lie every half an
//! allowance of turns counted from the fold (at a user turn), so a start
//! moves in rare big steps, never one exchange at a time, and depends only
//! on the turns and the allowance, never on the request. The newest
//! interaction is always in. A status set on a pending action since the
//! fold (UpdatePendingAction) is a line after the turns: the summary's
//! lines above are not edited.

use super::compress;
use super::lines::{role_name, turn_prefix, verbatim, Line};
use super::{Inputs, MAX_SHORT_TURN_COST, MIN_TURN_COST};
use crate::model::{Encoding, Role, Turn};
use crate::summarize::render;

/// Share of the log's allowance its verbatim block may take; the rest is
/// for the shortened block.
const VERBATIM_SHARE: f64 = 0.75;
/// Share of the log's allowance one turn may take verbatim; a longer turn
/// is shown shortened (wherever it stands, so its line never changes).
const TURN_CAP_SHARE: f64 = 0.5;

/// How a turn of the log is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shown {
    /// Verbatim.
    Whole,
    /// Shortened in the verbatim block (over the cap, or the newest
    /// interaction squeezed by the budget); `true` when it lost anything.
    Short(bool),
    /// In the shortened block; `true` when it lost anything.
    Earlier(bool),
    /// Left out.
    Omitted,
}

/// What the log holds.
pub(super) struct LogPlan {
    /// Its lines, in order.
    pub(super) lines: Vec<Line>,
    /// Their tokens.
    pub(super) tokens: u64,
    /// Their bytes.
    pub(super) bytes: usize,
    /// How each turn read is shown, by index into `Inputs::turns`.
    pub(super) shown: Vec<Shown>,
    /// Tokens of each turn's line (0 when left out).
    pub(super) turn_tokens: Vec<u32>,
    /// Index of the first turn of the verbatim block.
    pub(super) verbatim_from: usize,
}

/// A turn's two forms: whole (or as a transcript shows it) and shortened.
fn forms(t: &Turn, transcript: bool) -> (Line, Line, bool) {
    let (short, lossy) = compress::shorten(t);
    let marker = if lossy { " (shortened)" } else { "" };
    let whole = verbatim(t);
    let whole = if transcript {
        let who = if t.speaker.is_empty() {
            role_name(t.role)
        } else {
            t.speaker.as_str()
        };
        let rest = whole.strip_prefix(&turn_prefix(t)).unwrap_or(&whole);
        format!("{who}:{rest}")
    } else {
        whole
    };
    (
        Line::new(whole),
        Line::new(format!("{}{marker} {short}", turn_prefix(t))),
        lossy,
    )
}

/// Block boundaries: indexes where a block starts, the first at 0, the
/// next at the first user turn after `size` more estimated tokens.
fn boundaries(turns: &[Turn], size: u64, estimate: impl Fn(&Turn) -> u64) -> Vec<usize> {
    let mut out = vec![0];
    let mut acc = 0u64;
    let mut due = false;
    for (i, t) in turns.iter().enumerate() {
        if due && t.role == Role::User {
            out.push(i);
            acc = 0;
            due = false;
        }
        acc += estimate(t);
        due |= acc >= size.max(1);
    }
    out
}

/// The lines a status set since the fold adds: one per pending action of
/// the summary whose status a client changed.
fn updates(inputs: &Inputs) -> Vec<Line> {
    let Some(s) = &inputs.summary else {
        return Vec::new();
    };
    s.pending_actions
        .iter()
        .filter_map(|a| {
            let now = *inputs.action_updates.get(&a.action_seq())?;
            (now != a.status).then(|| {
                Line::new(format!(
                    "Update: pending action \"{}\" [#{}] is now {}.",
                    super::lines::one_line(&a.action),
                    a.action_seq(),
                    render::status(now)
                ))
            })
        })
        .collect()
}

/// Plans the log within `allowance` tokens (the newest interaction may
/// take up to `rest`) and `max_bytes`.
pub(super) fn plan(
    inputs: &Inputs,
    enc: Encoding,
    allowance: u64,
    rest: u64,
    max_bytes: usize,
    heading: Option<Line>,
) -> LogPlan {
    let turns = &inputs.turns;
    let n = turns.len();
    let transcript = inputs.transcript;
    let mut lines_of: Vec<(Line, Line, bool)> =
        turns.iter().map(|t| forms(t, transcript)).collect();
    let cap = (allowance as f64 * TURN_CAP_SHARE) as u64;
    // A transcript fits: every turn verbatim unless the estimate was off.
    let verbatim_share = if transcript { 1.0 } else { VERBATIM_SHARE };
    let verbatim_allowance = (allowance as f64 * verbatim_share) as u64;
    let earlier_allowance = allowance - verbatim_allowance;
    // Whether a turn of the verbatim block is shown whole: decided by the
    // turn alone (and the cap), so its line never changes. A line whose
    // lower bound is over the cap is not measured.
    let mut whole_ok = vec![false; n];
    let cost = |i: usize, lines_of: &mut Vec<(Line, Line, bool)>, whole_ok: &mut Vec<bool>| {
        let (w, s, _) = &mut lines_of[i];
        if w.at_least() <= cap && u64::from(w.tokens(enc)) <= cap {
            whole_ok[i] = true;
            (u64::from(w.tokens(enc)), w.text.len())
        } else {
            (u64::from(s.tokens(enc)), s.text.len())
        }
    };
    let last_user = turns
        .iter()
        .rposition(|t| t.role == Role::User)
        .unwrap_or(0);
    let mut shown = vec![Shown::Omitted; n];
    let mut lines = Vec::new();
    let (mut tokens, mut bytes) = (0u64, 0usize);
    // The heading names the fold: kept even before a turn follows it.
    if let Some(mut h) = heading.filter(|_| n > 0 || inputs.summary.is_some()) {
        tokens += u64::from(h.tokens(enc));
        bytes += h.text.len();
        lines.push(h);
    }
    // The verbatim block: the first boundary (at most the newest user
    // turn) from which every turn fits. Walks back from the newest turn,
    // measuring each turn once, until the allowance is spent.
    let starts = boundaries(turns, verbatim_allowance / 2, |t| {
        u64::from(t.token_count) + MIN_TURN_COST
    });
    let mut verbatim_from = None;
    let mut suffix = (0u64, 0usize);
    let mut i = n;
    while i > 0 {
        let (t, by) = cost(i - 1, &mut lines_of, &mut whole_ok);
        if suffix.0 + t > verbatim_allowance || bytes + suffix.1 + by > max_bytes {
            break;
        }
        suffix = (suffix.0 + t, suffix.1 + by);
        i -= 1;
        if i <= last_user && starts.binary_search(&i).is_ok() {
            verbatim_from = Some(i);
        }
    }
    let verbatim_from = match verbatim_from {
        Some(b) => {
            for i in b..n {
                let (w, s, lossy) = &lines_of[i];
                let line = if whole_ok[i] {
                    shown[i] = Shown::Whole;
                    w
                } else {
                    shown[i] = Shown::Short(*lossy);
                    s
                };
                tokens += u64::from(line.tokens.unwrap_or(0));
                bytes += line.text.len();
            }
            b
        }
        None => {
            // The newest interaction alone is over the allowance: it takes
            // what it needs of `rest`, newest turn first, whole or short.
            let b = last_user.min(n.saturating_sub(1));
            for i in (b..n).rev() {
                let (w, s, lossy) = &mut lines_of[i];
                let wt = u64::from(w.tokens(enc));
                if tokens + wt <= rest && bytes + w.text.len() <= max_bytes {
                    tokens += wt;
                    bytes += w.text.len();
                    shown[i] = Shown::Whole;
                    continue;
                }
                let st = u64::from(s.tokens(enc));
                if tokens + st <= rest && bytes + s.text.len() <= max_bytes {
                    tokens += st;
                    bytes += s.text.len();
                    shown[i] = Shown::Short(*lossy);
                }
            }
            b
        }
    };
    // The shortened block before it, by the same rule.
    let starts = boundaries(&turns[..verbatim_from], earlier_allowance / 2, |t| {
        u64::from(t.token_count).min(MAX_SHORT_TURN_COST) + MIN_TURN_COST
    });
    // Its heading counts once it has a line.
    let mut head = Line::new(super::pack::EARLIER_HEADING.to_owned());
    let head_cost = (u64::from(head.tokens(enc)), head.text.len());
    let mut suffix = head_cost;
    let mut earlier_head = None;
    let mut earlier_from = verbatim_from;
    let mut i = verbatim_from;
    while i > 0 {
        let s = &mut lines_of[i - 1].1;
        let (t, by) = (u64::from(s.tokens(enc)), s.text.len());
        let (t2, by2) = (suffix.0 + t, suffix.1 + by);
        if t2 > earlier_allowance + head_cost.0 || tokens + t2 > rest || bytes + by2 > max_bytes {
            break;
        }
        suffix = (t2, by2);
        i -= 1;
        if starts.binary_search(&i).is_ok() {
            earlier_from = i;
        }
    }
    if earlier_from < verbatim_from {
        tokens += head_cost.0;
        bytes += head_cost.1;
        earlier_head = Some(head);
        let (t, by) = turns[earlier_from..verbatim_from].iter().enumerate().fold(
            (0u64, 0usize),
            |acc, (k, _)| {
                let s = &lines_of[earlier_from + k].1;
                (
                    acc.0 + u64::from(s.tokens.unwrap_or(0)),
                    acc.1 + s.text.len(),
                )
            },
        );
        tokens += t;
        bytes += by;
    }
    for i in earlier_from..verbatim_from {
        shown[i] = Shown::Earlier(lines_of[i].2);
    }
    // The lines in order: shortened block, verbatim block, updates.
    let mut turn_tokens = vec![0u32; n];
    for (i, (w, s, _)) in lines_of.into_iter().enumerate() {
        if i == earlier_from {
            lines.extend(earlier_head.take());
        }
        let line = match shown[i] {
            Shown::Whole => w,
            Shown::Short(_) | Shown::Earlier(_) => s,
            Shown::Omitted => continue,
        };
        turn_tokens[i] = line.tokens.unwrap_or(0);
        lines.push(line);
    }
    for mut u in updates(inputs) {
        let t = u64::from(u.tokens(enc));
        if tokens + t <= rest && bytes + u.text.len() <= max_bytes {
            tokens += t;
            bytes += u.text.len();
            lines.push(u);
        }
    }
    LogPlan {
        lines,
        tokens,
        bytes,
        shown,
        turn_tokens,
        verbatim_from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(seq: u64, role: Role, tokens: u32) -> Turn {
        Turn {
            seq,
            role,
            speaker: String::new(),
            content: "x".into(),
            client_time: None,
            server_time: 0,
            tool_call: None,
            metadata: Default::default(),
            token_count: tokens,
        }
    }

    #[test]
    fn boundaries_come_every_block_at_a_user_turn_and_never_move() {
        let turns: Vec<Turn> = (1..=40)
            .map(|s| {
                let role = if s % 2 == 1 {
                    Role::User
                } else {
                    Role::Assistant
                };
                turn(s, role, 16)
            })
            .collect();
        let est = |t: &Turn| u64::from(t.token_count) + MIN_TURN_COST;
        let all = boundaries(&turns, 100, est);
        assert_eq!(all[0], 0);
        assert!(all.windows(2).all(|w| w[1] > w[0]));
        assert!(all.iter().all(|&b| turns[b].role == Role::User));
        // A block is about 100 estimated tokens: 5 turns of 20, then the
        // next user turn.
        assert_eq!(all[1], 6);
        // Appending turns never moves a boundary found before.
        for n in 1..turns.len() {
            let some = boundaries(&turns[..n], 100, est);
            assert_eq!(some[..], all[..some.len()]);
        }
    }
}
