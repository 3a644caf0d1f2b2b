//! Fitting a bundle into its budget. Every candidate line (a summary item,
//! a turn, retrieved memory, or an item of the subject's memory) is offered
//! in priority order: header, the newest interactions, pending actions,
//! carried-over actions, open questions, retrieved memory, decisions,
//! summary, key facts, the subject's facts, the other recent turns (newest
//! first), past episodes, earlier turns (newest first). A line is taken
//! whole if it fits, else in its short form if it has one, else left out
//! and counted in the manifest.
//!
//! While sections compete, each may take only its share of the budget
//! ([`share`]); a line cut by its share alone is offered again, in
//! priority order, once every section had its turn.
//!
//! Counting is exact and additive: every line ends with a newline and no
//! line starts with whitespace (or '/'), and the OpenAI pre-tokenizers never
//! join a newline run with a non-space character after it, so the tokens of
//! the text are the sum of its lines' tokens, each measured once with the
//! real tokenizer. The text is never measured twice (debug builds check the
//! sum against a full count, and the property test against tiktoken-rs),
//! and the result is never over budget.

use std::collections::{BTreeSet, HashSet};

use super::candidates::candidates;
use super::compress;
use super::lines::{Candidate, Line, Share};
use super::{
    Bundle, BundleRequest, CompressedTurn, Inputs, Manifest, ManifestEntry, RecalledItem, Section,
    SeqRange,
};
use crate::model::{Encoding, Turn};
use crate::tokens;

/// The heading of the shortened older turns (from the Q&A truncation
/// scheme agents are used to).
pub const EARLIER_HEADING: &str = "Earlier conversation summary:";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
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
        Section::Recalled => "## Relevant memory (retrieved for the request)",
        Section::Decisions => "## Decisions",
        Section::Summary => "## Summary",
        Section::KeyFacts => "## Key facts",
        Section::Facts => "## Known facts about the subject",
        Section::Episodes => "## Earlier sessions",
        Section::RecentTurns => "## Recent turns (verbatim)",
        Section::EarlierTurns => EARLIER_HEADING,
    }
}

/// Most of the budget (after the note) a share may take while sections
/// compete; `None` = no limit but the budget. Set by measurement on the
/// retrieval development set (see `benches/retrieval.rs`).
fn share(share: Share) -> Option<f64> {
    Some(match share {
        Share::Last => return None,
        Share::Newest => 0.25,
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

/// Sections in reading order.
const READING_ORDER: [Section; 12] = [
    Section::Header,
    Section::Summary,
    Section::PendingActions,
    Section::CarriedActions,
    Section::OpenQuestions,
    Section::Decisions,
    Section::KeyFacts,
    Section::Facts,
    Section::Recalled,
    Section::Episodes,
    Section::EarlierTurns,
    Section::RecentTurns,
];

pub(super) fn pack(inputs: Inputs, req: &BundleRequest) -> Bundle {
    let enc = req.encoding.unwrap_or(inputs.session.settings.encoding);
    let budget = u64::from(req.budget_tokens);
    let mut cands = candidates(&inputs, req);
    let unread = inputs.unread.map_or(0, |(a, b)| b - a + 1);
    // The note's count with the largest numbers bounds it with any.
    let note_reserve =
        u64::from(Line::new(note(req.budget_tokens, u32::MAX, u64::MAX)).tokens(enc));
    let mut headings: Vec<(Section, Option<Line>)> = READING_ORDER
        .iter()
        .map(|&s| {
            (
                s,
                Some(heading(s))
                    .filter(|h| !h.is_empty())
                    // A transcript is its one-line header and its turns.
                    .filter(|_| !(inputs.transcript && s == Section::RecentTurns))
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
    let choices = choose(
        &mut cands,
        enc,
        (budget.saturating_sub(note_reserve), max_bytes),
        &headings,
    );
    let (text, count, (shortened, omitted)) =
        render_text(&cands, &choices, &headings, enc, req.budget_tokens, unread);
    debug_assert_eq!(
        count,
        tokens::count(enc, &text) as u64,
        "line counts add up"
    );
    debug_assert!(count <= budget, "{count} tokens over a budget of {budget}");
    assemble(
        inputs,
        req,
        enc,
        cands,
        choices,
        text,
        count,
        (shortened, omitted),
    )
}

/// Chooses, in priority order, what fits in `allowance` tokens: first
/// within each share's limit, then, for what a share alone cut, within
/// what is left.
fn choose(
    cands: &mut [Candidate],
    enc: Encoding,
    (allowance, max_bytes): (u64, usize),
    headings: &[(Section, Option<Line>)],
) -> Vec<Choice> {
    let mut state = Chooser {
        used: 0,
        bytes: 0,
        headed: HashSet::new(),
        taken: std::collections::HashMap::new(),
    };
    let mut choices = Vec::with_capacity(cands.len());
    let mut deferred = Vec::new();
    for (i, c) in cands.iter_mut().enumerate() {
        let limit = share(c.share).map(|f| (allowance as f64 * f) as u64);
        let (choice, capped) = state.offer(c, i == 0, enc, (allowance, max_bytes), limit, headings);
        if capped {
            deferred.push(i);
        }
        choices.push(choice);
    }
    for i in deferred {
        let c = &mut cands[i];
        let (choice, _) = state.offer(c, false, enc, (allowance, max_bytes), None, headings);
        choices[i] = choice;
    }
    choices
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
        // The first pending action and the first open question are never
        // held back by their share: what is still to do comes first.
        let first_of_open_work = taken == 0
            && matches!(
                c.share,
                Share::Section(Section::PendingActions | Section::OpenQuestions)
            );
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

/// Whether a choice lost anything: a short form that is lossy, or an
/// earlier turn's (only) form when shortening cut it.
fn is_shortened(c: &Candidate, choice: Choice) -> bool {
    match choice {
        Choice::Short => c.short_lossy,
        Choice::Full => c.section == Section::EarlierTurns && c.short_lossy,
        Choice::Omitted => false,
    }
}

fn note(budget: u32, shortened: u32, omitted: u64) -> String {
    format!(
        "Note: to fit {budget} tokens, {shortened} items are shortened and {omitted} left out; the manifest lists them and ListTurns returns any turn in full."
    )
}

/// The text in reading order, its token count, and the counts of
/// shortened and omitted items.
fn render_text(
    cands: &[Candidate],
    choices: &[Choice],
    headings: &[(Section, Option<Line>)],
    enc: Encoding,
    budget: u32,
    unread: u64,
) -> (String, u64, (u32, u64)) {
    let mut shortened = 0u32;
    let mut omitted = unread;
    for (c, &ch) in cands.iter().zip(choices) {
        match ch {
            Choice::Omitted => omitted += 1,
            _ if is_shortened(c, ch) => shortened += 1,
            _ => {}
        }
    }
    let mut note_line = Line::new(note(budget, shortened, omitted));
    let mut text = String::new();
    let mut count = 0u64;
    let mut push = |line: &Line| {
        text.push_str(&line.text);
        count += u64::from(line.tokens.unwrap_or(0));
    };
    for (section, head) in headings {
        let mut picked: Vec<(u64, &Line)> = cands
            .iter()
            .zip(choices)
            .filter(|(c, _)| c.section == *section)
            .filter_map(|(c, &ch)| match ch {
                Choice::Full => Some((c.key, &c.full)),
                Choice::Short => c.short.as_ref().map(|s| (c.key, s)),
                Choice::Omitted => None,
            })
            .collect();
        if picked.is_empty() {
            continue;
        }
        picked.sort_by_key(|(k, _)| *k);
        if let Some(h) = head {
            push(h);
        }
        for (_, line) in picked {
            push(line);
        }
        if *section == Section::Header && (shortened > 0 || omitted > 0) {
            note_line.tokens(enc);
            push(&note_line);
        }
    }
    (text, count, (shortened, omitted))
}

/// The retrieved memory that made it in, each item with the turns of it
/// that fit, and its manifest entry counted by item: included whole,
/// shortened (a neighbour did not fit) or left out.
fn recalled_items(
    bundle: &mut Bundle,
    recalled: Vec<super::Recalled>,
    cands: &[Candidate],
    choices: &[Choice],
) {
    use super::recalled::KEY_STRIDE;
    let mut hit = vec![false; recalled.len()];
    let mut kept: Vec<Vec<u64>> = vec![Vec::new(); recalled.len()];
    let mut lost = vec![false; recalled.len()];
    for (c, &ch) in cands.iter().zip(choices) {
        if c.section != Section::Recalled {
            continue;
        }
        let i = (c.key / KEY_STRIDE) as usize;
        let is_hit = c.key % KEY_STRIDE == 1;
        match (ch, is_hit) {
            (Choice::Omitted, false) => lost[i] = true,
            (_, false) => kept[i].push(c.key % KEY_STRIDE),
            (Choice::Omitted, true) => {}
            (_, true) => hit[i] = true,
        }
    }
    let (mut included, mut shortened, mut omitted) = (0u32, 0u32, 0u32);
    for (i, mut r) in recalled.into_iter().enumerate() {
        if !hit[i] {
            omitted += 1;
            bundle.manifest.recalled_left_out.push(r.reference());
            continue;
        }
        if let RecalledItem::Turns { hit_seq, turns, .. } = &mut r.item {
            let hit_seq = *hit_seq;
            let places = &kept[i];
            turns.retain(|t| {
                t.seq == hit_seq
                    || (t.seq < hit_seq && places.contains(&0))
                    || (t.seq > hit_seq && places.contains(&2))
            });
        }
        if lost[i] {
            shortened += 1;
        } else {
            included += 1;
        }
        bundle.recalled.push(r);
    }
    if let Some(e) = bundle
        .manifest
        .sections
        .iter_mut()
        .find(|e| e.section == Section::Recalled)
    {
        e.available = included + shortened + omitted;
        (e.included, e.shortened, e.omitted) = (included, shortened, omitted);
    }
}

/// Seqs as inclusive ranges.
fn ranges(seqs: impl IntoIterator<Item = u64>) -> Vec<SeqRange> {
    let sorted: BTreeSet<u64> = seqs.into_iter().collect();
    let mut out: Vec<SeqRange> = Vec::new();
    for s in sorted {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == s => *last = s,
            _ => out.push((s, s)),
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    inputs: Inputs,
    req: &BundleRequest,
    enc: Encoding,
    cands: Vec<Candidate>,
    choices: Vec<Choice>,
    text: String,
    count: u64,
    (shortened, omitted): (u32, u64),
) -> Bundle {
    let Inputs {
        session,
        summary,
        recent,
        earlier,
        unread,
        memory,
        recalled,
        transcript,
    } = inputs;
    let mut sections: Vec<ManifestEntry> = Vec::new();
    for (c, &ch) in cands.iter().zip(&choices) {
        // The newest turns come early and the other recent turns later:
        // one entry per section all the same.
        let pos = match sections.iter().position(|e| e.section == c.section) {
            Some(p) => p,
            None => {
                sections.push(ManifestEntry::new(c.section));
                sections.len() - 1
            }
        };
        let e = &mut sections[pos];
        e.available += 1;
        let lossy = is_shortened(c, ch);
        match ch {
            Choice::Omitted => e.omitted += 1,
            _ if lossy => e.shortened += 1,
            _ => e.included += 1,
        }
        e.tokens += match ch {
            Choice::Full => c.full.tokens.unwrap_or(0),
            Choice::Short => c.short.as_ref().and_then(|s| s.tokens).unwrap_or(0),
            Choice::Omitted => 0,
        };
    }
    // Fill the seq ranges of the turn sections.
    for e in sections.iter_mut() {
        if !matches!(e.section, Section::RecentTurns | Section::EarlierTurns) {
            continue;
        }
        let of = |want: &dyn Fn(&Candidate, Choice) -> bool| {
            ranges(
                cands
                    .iter()
                    .zip(&choices)
                    .filter(|(c, &ch)| c.section == e.section && want(c, ch))
                    .map(|(c, _)| c.key),
            )
        };
        e.included_seqs = of(&|c, ch| ch != Choice::Omitted && !is_shortened(c, ch));
        e.shortened_seqs = of(&|c, ch| is_shortened(c, ch));
        e.omitted_seqs = of(&|_, ch| ch == Choice::Omitted);
    }
    if let Some((a, b)) = unread {
        let n = u32::try_from(b - a + 1).unwrap_or(u32::MAX);
        let pos = sections
            .iter()
            .position(|e| e.section == Section::EarlierTurns)
            .unwrap_or_else(|| {
                sections.push(ManifestEntry::new(Section::EarlierTurns));
                sections.len() - 1
            });
        let e = &mut sections[pos];
        e.available = e.available.saturating_add(n);
        e.omitted = e.omitted.saturating_add(n);
        e.omitted_seqs.insert(0, (a, b));
    }

    // The structured fields: exactly what the text holds.
    let chosen = |section: Section| -> Vec<usize> {
        let mut v: Vec<usize> = cands
            .iter()
            .zip(&choices)
            .filter(|(c, &ch)| c.section == section && ch != Choice::Omitted)
            .map(|(c, _)| c.key as usize)
            .collect();
        v.sort_unstable();
        v
    };
    // The items of one section that made it in, in display order.
    fn pick<T: Clone>(items: &[T], keys: Vec<usize>) -> Vec<T> {
        keys.into_iter().map(|k| items[k].clone()).collect()
    }
    let mut bundle = Bundle {
        as_of_seq: session.last_seq(),
        encoding: enc,
        budget_tokens: req.budget_tokens,
        token_count: u32::try_from(count).unwrap_or(u32::MAX),
        rendered_text: text,
        user_intent: String::new(),
        prose: String::new(),
        pending_actions: Vec::new(),
        open_questions: Vec::new(),
        decisions: Vec::new(),
        key_facts: Vec::new(),
        recent_turns: Vec::new(),
        earlier_turns: Vec::new(),
        carried_actions: Vec::new(),
        facts: Vec::new(),
        episodes: Vec::new(),
        recalled: Vec::new(),
        manifest: Manifest {
            complete: shortened == 0 && omitted == 0,
            recalled_left_out: Vec::new(),
            transcript,
            sections,
            summary_version: summary.as_ref().map_or(0, |s| s.version),
            summarized: summary
                .as_ref()
                .filter(|s| s.covers_through_seq > 0)
                .map(|s| (1, s.covers_through_seq)),
        },
        session,
    };
    if let Some(s) = summary {
        bundle.pending_actions = pick(&s.pending_actions, chosen(Section::PendingActions));
        bundle.open_questions = pick(&s.open_questions, chosen(Section::OpenQuestions));
        bundle.decisions = pick(&s.decisions, chosen(Section::Decisions));
        bundle.key_facts = pick(&s.key_facts, chosen(Section::KeyFacts));
        for k in chosen(Section::Summary) {
            if k == 0 {
                bundle.user_intent = s.user_intent.clone();
            } else {
                bundle.prose = s.prose.clone();
            }
        }
    }
    bundle.carried_actions = pick(&memory.carried, chosen(Section::CarriedActions));
    bundle.facts = pick(&memory.facts, chosen(Section::Facts));
    bundle.episodes = pick(&memory.episodes, chosen(Section::Episodes));
    recalled_items(&mut bundle, recalled, &cands, &choices);
    let by_seq: std::collections::HashMap<u64, &Turn> =
        recent.iter().chain(&earlier).map(|t| (t.seq, t)).collect();
    let mut short_turns: Vec<CompressedTurn> = Vec::new();
    for (c, &ch) in cands.iter().zip(&choices) {
        if !matches!(c.section, Section::RecentTurns | Section::EarlierTurns) {
            continue;
        }
        let Some(t) = by_seq.get(&c.key) else {
            continue;
        };
        match ch {
            Choice::Omitted => {}
            Choice::Full if c.section == Section::RecentTurns => {
                bundle.recent_turns.push((*t).clone())
            }
            _ => {
                let (text, lossy) = compress::shorten(t);
                short_turns.push(CompressedTurn {
                    seq: t.seq,
                    role: t.role,
                    speaker: t.speaker.clone(),
                    text,
                    shortened: lossy,
                });
            }
        }
    }
    short_turns.sort_by_key(|t| t.seq);
    bundle.recent_turns.sort_by_key(|t| t.seq);
    bundle.earlier_turns = short_turns;
    bundle
}
