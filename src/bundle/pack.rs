//! Fitting a bundle into its budget, in three parts (see the module doc):
//!
//! 1. the stable part: every candidate line (header, the subject's memory,
//!    the summary's items) is offered in a fixed priority order, within at
//!    most [`STABLE_SHARE`] of the budget; a line is taken whole if it
//!    fits, else in its short form if it has one, else left out and
//!    counted in the manifest. What fits depends only on the lines and the
//!    budget, so this part is the same for every request between two folds.
//! 2. the log of turns since the fold (`log.rs`), within [`LOG_SHARE`] of
//!    what the stable part left;
//! 3. the request's part: memory retrieved for the query (none without
//!    one), the point in time, the reader, then the note on what was cut,
//!    within what is left.
//!
//! While sections compete, each may take only its share of the budget
//! ([`share`]); a line cut by its share alone is offered again, in
//! priority order, once every section of its part had its turn.
//!
//! Counting is exact and additive: every line ends with a newline and no
//! line starts with whitespace (or '/'), and the OpenAI pre-tokenizers never
//! join a newline run with a non-space character after it, so the tokens of
//! the text are the sum of its lines' tokens, each measured once with the
//! real tokenizer, and the tokens of any prefix of whole lines the sum of
//! its lines' (which is what makes the part offsets exact). The text is
//! never measured twice (debug builds check the sum against a full count,
//! and the property test against tiktoken-rs), and the result is never
//! over budget.

use std::collections::HashSet;

use super::assemble::assemble;
use super::candidates::{as_of_line, candidates, part_of, HEADER_AS_OF};
use super::lines::{Candidate, Line, Share};
use super::log::{self, LogPlan, Shown};
use super::recalled::KEY_STRIDE;
use super::{Bundle, BundleRequest, Inputs, Layout, Offset, Part, RecalledItem, Section};
use crate::model::Encoding;
use crate::tokens;

/// The heading of the shortened older turns (from the Q&A truncation
/// scheme agents are used to).
pub const EARLIER_HEADING: &str = "Earlier conversation summary:";

/// How the budget (after the reserves) is split between the parts: the
/// most the stable part may take, and the most the log may take of what
/// the stable part left; the rest is the request's (retrieved memory).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Split {
    pub stable: f64,
    pub log: f64,
}

/// The splits a bundle chooses from: the session's state (no query: a
/// handoff, a resumption) and a request's (a query, whose retrieved memory
/// takes the rest). Two fixed steps, not a share that follows how
/// much was retrieved: successive requests of an agent that passes its
/// newest message as the query land on the same step, so their bundles
/// still share the stable part and the log (a share that followed the
/// amount changed the split at most calls and a prompt cache lost them:
/// measured on the replay, 0.55 of calls kept that prefix against 0.88).
pub(super) const SPLITS: [Split; 2] = [
    Split {
        stable: 0.30,
        log: 0.60,
    },
    Split {
        stable: 0.12,
        log: 0.30,
    },
];

/// The split for a request: the state's without a query, the request's
/// with one. Retrieved memory is what the agent asked for, so it is valued
/// above the stable part's carried items and the older log, which the
/// request's step cuts first (the newest interaction and the first open
/// item stay). The step follows the query's presence, not what it found:
/// an agent that passes every message as the query keeps one layout, and
/// its prompt cache the stable part and the log, even when a message
/// retrieves nothing (that bundle is smaller, not rearranged).
pub(super) fn split_for(layout: Layout) -> Split {
    match layout {
        Layout::State => SPLITS[0],
        Layout::Request => SPLITS[1],
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Choice {
    Full,
    Short,
    Omitted,
}

fn heading(section: Section) -> &'static str {
    match section {
        Section::Header => "",
        Section::PendingActions => "## Pending actions",
        Section::CarriedActions => "## Pending actions from earlier sessions",
        Section::OpenQuestions => "## Open questions",
        Section::Recalled => "## Relevant memory (retrieved for the request; [day] speaker: words)",
        Section::Decisions => "## Decisions",
        Section::Summary => "## Summary",
        Section::KeyFacts => "## Key facts",
        Section::Facts => "## Known facts about the subject",
        Section::Episodes => "## Earlier sessions",
        Section::RecentTurns => "",
        Section::EarlierTurns => EARLIER_HEADING,
    }
}

/// Most of the budget (after the reserves) a share may take while
/// sections compete; `None` = no limit but its part's.
fn share(share: Share) -> Option<f64> {
    Some(match share {
        Share::Neighbour => 0.10,
        Share::Section(s) => match s {
            Section::Header | Section::RecentTurns | Section::EarlierTurns => return None,
            Section::PendingActions => 0.15,
            Section::CarriedActions | Section::OpenQuestions => 0.10,
            Section::Recalled => 0.70,
            Section::Decisions | Section::Summary => 0.10,
            Section::KeyFacts | Section::Facts | Section::Episodes => 0.10,
        },
    })
}

/// Sections of the stable part in reading order: what changes least
/// first, so that a fold, which changes the summary's sections, leaves
/// the beginning before the first section it changed. Carried actions,
/// episodes and facts change only when the subject's memory does (another
/// session ends, a fact is added). Of the summary's sections a fold most
/// often keeps decisions (a record, appended to), then open questions
/// (one closes now and then), then pending actions (statuses change, done
/// ones leave), then key facts (the summary keeps only the newest, so
/// their list shifts once it is full), then the prose, rewritten at each
/// fold. Measured on the replay's fold pairs (BFCL and ELITR, 4,000
/// tokens): each section unchanged across a fold in 86%, 55%, 21%, 6%
/// and 12% of them.
const STABLE_ORDER: [Section; 9] = [
    Section::Header,
    Section::CarriedActions,
    Section::Episodes,
    Section::Facts,
    Section::Decisions,
    Section::OpenQuestions,
    Section::PendingActions,
    Section::KeyFacts,
    Section::Summary,
];

/// The log's heading: which fold it follows (the same between two folds).
fn log_heading(inputs: &Inputs) -> Option<Line> {
    if inputs.transcript {
        return None;
    }
    Some(Line::new(match &inputs.summary {
        Some(s) => format!(
            "## Conversation since summary v{} (turns 1–{} are summarized above)",
            s.version, s.covers_through_seq
        ),
        None => "## Conversation".to_owned(),
    }))
}

pub(super) fn pack(inputs: Inputs, req: &BundleRequest) -> Bundle {
    let enc = req.encoding.unwrap_or(inputs.session.settings.encoding);
    let budget = u64::from(req.budget_tokens);
    let mut cands = candidates(&inputs, req);
    let unread = inputs.unread.map_or(0, |(a, b)| b - a + 1);
    // The note's count with the largest numbers bounds it with any, and
    // the as-of line's likewise: both are kept out of every part's room.
    let note_reserve =
        u64::from(Line::new(note(req.budget_tokens, u32::MAX, u64::MAX)).tokens(enc));
    let as_of_reserve =
        u64::from(Line::new(as_of_line(u64::MAX, inputs.session.state)).tokens(enc));
    let allowance = budget.saturating_sub(note_reserve + as_of_reserve);
    let mut headings: Vec<(Section, Option<Line>)> = STABLE_ORDER
        .iter()
        .chain(&[Section::Recalled])
        .map(|&s| {
            (
                s,
                Some(heading(s))
                    .filter(|h| !h.is_empty())
                    .map(|h| Line::new(h.to_owned())),
            )
        })
        .collect();
    for h in headings.iter_mut().filter_map(|(_, h)| h.as_mut()) {
        h.tokens(enc);
    }
    let max_bytes = match req.max_bytes {
        0 => usize::MAX,
        n => n,
    };
    let mut state = Chooser {
        used: 0,
        bytes: 0,
        headed: HashSet::new(),
        taken: std::collections::HashMap::new(),
    };
    let mut choices = vec![Choice::Omitted; cands.len()];
    let split = split_for(req.layout());
    let stable_cap = (allowance as f64 * split.stable) as u64;
    choose(
        &mut cands,
        &mut choices,
        Part::Stable,
        &mut state,
        enc,
        (allowance, stable_cap, max_bytes),
        &headings,
    );
    // The log, within its share of what the stable part left (a
    // transcript, which fits, takes all of it).
    let rest = allowance.saturating_sub(state.used);
    let share = if inputs.transcript { 1.0 } else { split.log };
    let plan = log::plan(
        &inputs,
        enc,
        (rest as f64 * share) as u64,
        rest,
        max_bytes.saturating_sub(state.bytes),
        log_heading(&inputs),
    );
    state.used += plan.tokens;
    state.bytes += plan.bytes;
    // Retrieved memory already shown by the stable part is not repeated.
    let shown_above = shown_in_stable(&inputs, &cands, &choices);
    for (c, ch) in cands.iter_mut().zip(choices.iter_mut()) {
        if c.section == Section::Recalled && shown_above.contains(&((c.key / KEY_STRIDE) as usize))
        {
            *ch = Choice::Omitted;
            c.estimate = u64::MAX;
        }
    }
    // Memory is retrieved only for a query (`memory::recall`), and takes
    // all that is left.
    choose(
        &mut cands,
        &mut choices,
        Part::Request,
        &mut state,
        enc,
        (allowance, allowance, max_bytes),
        &headings,
    );
    let (text, count, (shortened, omitted), (stable_end, log_end)) = render_text(
        &cands,
        &choices,
        &plan,
        &headings,
        enc,
        req.budget_tokens,
        unread,
        &shown_above,
    );
    debug_assert_eq!(
        count,
        tokens::count(enc, &text) as u64,
        "line counts add up"
    );
    debug_assert_eq!(
        u64::from(stable_end.tokens),
        tokens::count(enc, &text[..stable_end.bytes as usize]) as u64,
        "the stable part's offset is exact"
    );
    debug_assert!(count <= budget, "{count} tokens over a budget of {budget}");
    let mut bundle = assemble(
        inputs,
        req,
        enc,
        (&cands, &choices, &plan),
        text,
        count,
        (shortened, omitted),
        &shown_above,
    );
    bundle.stable_end = stable_end;
    bundle.log_end = log_end;
    bundle
}

/// Retrieved items (by position) that the stable part already shows: a
/// fact or an episode of the subject.
fn shown_in_stable(inputs: &Inputs, cands: &[Candidate], choices: &[Choice]) -> HashSet<usize> {
    let picked = |section: Section| -> HashSet<usize> {
        cands
            .iter()
            .zip(choices)
            .filter(|(c, &ch)| c.section == section && ch != Choice::Omitted)
            .map(|(c, _)| c.key as usize)
            .collect()
    };
    let facts: HashSet<&str> = picked(Section::Facts)
        .into_iter()
        .map(|k| inputs.memory.facts[k].fact_id.as_str())
        .collect();
    let episodes: HashSet<&str> = picked(Section::Episodes)
        .into_iter()
        .map(|k| inputs.memory.episodes[k].session_id.as_str())
        .collect();
    inputs
        .recalled
        .iter()
        .enumerate()
        .filter(|(_, r)| match &r.item {
            RecalledItem::Fact(f) => facts.contains(f.fact_id.as_str()),
            RecalledItem::Episode(e) => episodes.contains(e.session_id.as_str()),
            RecalledItem::Turns { .. } => false,
        })
        .map(|(i, _)| i)
        .collect()
}

/// Pending actions (this session's or carried over) and open questions.
fn is_open_work(c: &Candidate) -> bool {
    matches!(
        c.share,
        Share::Section(Section::PendingActions | Section::CarriedActions | Section::OpenQuestions)
    )
}

/// Chooses, in priority order, what of `part` fits in `cap` tokens of
/// use (shares measured against `allowance`): first within each share's
/// limit, then, for what a share alone cut, within what is left.
fn choose(
    cands: &mut [Candidate],
    choices: &mut [Choice],
    part: Part,
    state: &mut Chooser,
    enc: Encoding,
    (allowance, cap, max_bytes): (u64, u64, usize),
    headings: &[(Section, Option<Line>)],
) {
    let mut deferred = Vec::new();
    // What the header lines took: not counted against the part's cap.
    let mut header = 0u64;
    for (i, c) in cands.iter_mut().enumerate() {
        if part_of(c) != part || c.estimate == u64::MAX {
            continue;
        }
        // The header's first line and the as-of line are always kept
        // (the latter has its reserve).
        let always = c.section == Section::Header && (c.key == 0 || c.key == HEADER_AS_OF as u64);
        let limit = share(c.share).map(|f| (allowance as f64 * f) as u64);
        // The first pending action, carried action and open question are
        // not held back by the part's cap either: only the budget holds
        // them back.
        let first_open = is_open_work(c) && !state.taken.contains_key(&c.share);
        let is_header = c.section == Section::Header;
        let room = if always || first_open || is_header {
            allowance
        } else {
            (cap + header).min(allowance)
        };
        let before = state.used;
        let (choice, capped) = state.offer(c, always, enc, (room, max_bytes), limit, headings);
        if is_header {
            header += state.used - before;
        }
        if capped {
            deferred.push(i);
        }
        choices[i] = choice;
    }
    let room = (cap + header).min(allowance);
    for i in deferred {
        let c = &mut cands[i];
        let (choice, _) = state.offer(c, false, enc, (room, max_bytes), None, headings);
        choices[i] = choice;
    }
}

/// What the choices so far have spent.
struct Chooser {
    used: u64,
    bytes: usize,
    headed: HashSet<Section>,
    /// Tokens taken per share.
    taken: std::collections::HashMap<Share, u64>,
}

impl Chooser {
    /// Offers one candidate; the second value says whether its share's
    /// limit alone kept it out (or short).
    fn offer(
        &mut self,
        c: &mut Candidate,
        always: bool,
        enc: Encoding,
        (allowance, max_bytes): (u64, usize),
        limit: Option<u64>,
        headings: &[(Section, Option<Line>)],
    ) -> (Choice, bool) {
        let head = if self.headed.contains(&c.section) {
            0
        } else {
            headings
                .iter()
                .find(|(s, _)| *s == c.section)
                .and_then(|(_, h)| h.as_ref())
                .map_or(0, |h| u64::from(h.tokens.unwrap_or(0)))
        };
        let left = allowance.saturating_sub(self.used + head);
        let taken = self.taken.get(&c.share).copied().unwrap_or(0);
        // The first pending action (of this session and of earlier ones)
        // and the first open question are never held back by their share:
        // what is still to do comes first.
        let first_of_open_work = taken == 0 && is_open_work(c);
        let share_left = match limit {
            Some(l) if !first_of_open_work => l.saturating_sub(taken + head),
            _ => u64::MAX,
        };
        // The response carries the text and a structured copy, so the
        // text's bytes are bounded too (a third of the message limit).
        let bytes = self.bytes;
        let fits_bytes = |line: &Line| bytes + line.text.len() <= max_bytes;
        // Stored counts are in the session's encoding; a text far over
        // what is left is not measured at all.
        let room = left.min(share_left);
        let worth_measuring = c.estimate <= room.saturating_mul(2) + 64 && fits_bytes(&c.full);
        let mut choice = Choice::Omitted;
        let mut capped = false;
        let mut cost = 0;
        // A line whose lower bound is over the room is not measured: it
        // cannot be taken now, and when only its share kept it out it is
        // offered again (where it is measured if it may fit then).
        let mut weigh = |line: &mut Line| -> Option<u64> {
            let low = line.at_least();
            if low > room {
                capped |= low <= left;
                return None;
            }
            let n = u64::from(line.tokens(enc));
            if n <= room {
                return Some(n);
            }
            capped |= n <= left;
            None
        };
        if always {
            cost = u64::from(c.full.tokens(enc));
            choice = Choice::Full;
        } else if worth_measuring {
            if let Some(n) = weigh(&mut c.full) {
                cost = n;
                choice = Choice::Full;
            }
        }
        if choice == Choice::Omitted {
            if let Some(short) = c.short.as_mut().filter(|s| fits_bytes(s)) {
                if let Some(n) = weigh(short) {
                    cost = n;
                    choice = Choice::Short;
                }
            }
        }
        match choice {
            Choice::Full => self.bytes += c.full.text.len(),
            Choice::Short => self.bytes += c.short.as_ref().map_or(0, |s| s.text.len()),
            Choice::Omitted => {}
        }
        if choice != Choice::Omitted {
            self.used += cost + head;
            *self.taken.entry(c.share).or_insert(0) += cost + head;
            self.headed.insert(c.section);
        }
        // Only a candidate left out entirely is offered again.
        (choice, capped && choice == Choice::Omitted)
    }
}

/// Whether a choice lost anything: a lossy short form.
pub(super) fn is_shortened(c: &Candidate, choice: Choice) -> bool {
    choice == Choice::Short && c.short_lossy
}

fn note(budget: u32, shortened: u32, omitted: u64) -> String {
    format!(
        "Note: to fit {budget} tokens, {shortened} shortened, {omitted} left out (see the manifest)."
    )
}

/// Counts of what the log shortened and left out.
fn log_cuts(plan: &LogPlan) -> (u32, u64) {
    let mut shortened = 0u32;
    let mut omitted = 0u64;
    for s in &plan.shown {
        match s {
            Shown::Short(true) | Shown::Earlier(true) => shortened += 1,
            Shown::Omitted => omitted += 1,
            _ => {}
        }
    }
    (shortened, omitted)
}

/// The text (stable part, log, request's part, note), its token count,
/// the counts of shortened and omitted items, and where the first two
/// parts end.
#[allow(clippy::too_many_arguments)]
fn render_text(
    cands: &[Candidate],
    choices: &[Choice],
    plan: &LogPlan,
    headings: &[(Section, Option<Line>)],
    enc: Encoding,
    budget: u32,
    unread: u64,
    shown_above: &HashSet<usize>,
) -> (String, u64, (u32, u64), (Offset, Offset)) {
    let (mut shortened, mut omitted) = log_cuts(plan);
    omitted += unread;
    for (c, &ch) in cands.iter().zip(choices) {
        let above = c.section == Section::Recalled
            && shown_above.contains(&((c.key / KEY_STRIDE) as usize));
        match ch {
            Choice::Omitted if !above => omitted += 1,
            _ if is_shortened(c, ch) => shortened += 1,
            _ => {}
        }
    }
    let mut text = String::new();
    let mut count = 0u64;
    let push = |text: &mut String, line: &Line| {
        text.push_str(&line.text);
        u64::from(line.tokens.unwrap_or(0))
    };
    let offset = |text: &str, count: u64| Offset {
        tokens: u32::try_from(count).unwrap_or(u32::MAX),
        bytes: u32::try_from(text.len()).unwrap_or(u32::MAX),
    };
    let section_lines = |section: Section, part: Part| -> Vec<&Line> {
        let mut picked: Vec<(u64, &Line)> = cands
            .iter()
            .zip(choices)
            .filter(|(c, _)| c.section == section && part_of(c) == part)
            .filter_map(|(c, &ch)| match ch {
                Choice::Full => Some((c.key, &c.full)),
                Choice::Short => c.short.as_ref().map(|s| (c.key, s)),
                Choice::Omitted => None,
            })
            .collect();
        picked.sort_by_key(|(k, _)| *k);
        picked.into_iter().map(|(_, l)| l).collect()
    };
    let head_of = |section: Section| {
        headings
            .iter()
            .find(|(s, _)| *s == section)
            .and_then(|(_, h)| h.as_ref())
    };
    for &section in &STABLE_ORDER {
        let lines = section_lines(section, Part::Stable);
        if lines.is_empty() {
            continue;
        }
        if let Some(h) = head_of(section) {
            count += push(&mut text, h);
        }
        for l in lines {
            count += push(&mut text, l);
        }
    }
    let stable_end = offset(&text, count);
    for l in &plan.lines {
        count += push(&mut text, l);
    }
    let log_end = offset(&text, count);
    let recalled = section_lines(Section::Recalled, Part::Request);
    if !recalled.is_empty() {
        if let Some(h) = head_of(Section::Recalled) {
            count += push(&mut text, h);
        }
        for l in recalled {
            count += push(&mut text, l);
        }
    }
    for l in section_lines(Section::Header, Part::Request) {
        count += push(&mut text, l);
    }
    if shortened > 0 || omitted > 0 {
        let mut note_line = Line::new(note(budget, shortened, omitted));
        note_line.tokens(enc);
        count += push(&mut text, &note_line);
    }
    (text, count, (shortened, omitted), (stable_end, log_end))
}
