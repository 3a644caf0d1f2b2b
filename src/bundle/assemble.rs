//! A packed bundle's accounting and structured copy: the manifest (one
//! entry per section, the log's turns by seq range), the retrieved items
//! that made it in, and the structured fields holding exactly what the
//! text shows. Reads nothing; decides nothing about what fits (`pack.rs`).

use std::collections::{BTreeSet, HashSet};

use super::candidates::part_of;
use super::compress;
use super::lines::Candidate;
use super::log::{LogPlan, Shown};
use super::pack::{is_shortened, Choice};
use super::recalled::KEY_STRIDE;
use super::{
    Bundle, BundleRequest, CompressedTurn, Inputs, Manifest, ManifestEntry, Offset, Part,
    RecalledItem, Section, SeqRange,
};
use crate::model::Encoding;

/// The retrieved memory that made it in, each item with the turns of it
/// that fit, and its manifest entry counted by item: included whole,
/// shortened (a neighbour did not fit) or left out; an item the stable
/// part shows counts as included.
fn recalled_items(
    bundle: &mut Bundle,
    recalled: Vec<super::Recalled>,
    cands: &[Candidate],
    choices: &[Choice],
    shown_above: &HashSet<usize>,
) {
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
        if shown_above.contains(&i) {
            // In the stable part's facts or episodes.
            included += 1;
            continue;
        }
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

/// The manifest entries of the log's two turn sections.
fn log_entries(inputs: &Inputs, plan: &LogPlan) -> Vec<ManifestEntry> {
    let mut recent = ManifestEntry::new(Section::RecentTurns);
    let mut earlier = ManifestEntry::new(Section::EarlierTurns);
    let (mut r_in, mut r_short, mut r_out) = (Vec::new(), Vec::new(), Vec::new());
    let (mut e_in, mut e_short, mut e_out) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (t, s)) in inputs.turns.iter().zip(&plan.shown).enumerate() {
        let in_recent = i >= plan.verbatim_from;
        let e = if in_recent { &mut recent } else { &mut earlier };
        e.available += 1;
        e.tokens += plan.turn_tokens[i];
        let (inc, short, out) = if in_recent {
            (&mut r_in, &mut r_short, &mut r_out)
        } else {
            (&mut e_in, &mut e_short, &mut e_out)
        };
        match s {
            Shown::Whole | Shown::Short(false) | Shown::Earlier(false) => {
                e.included += 1;
                inc.push(t.seq);
            }
            Shown::Short(true) | Shown::Earlier(true) => {
                e.shortened += 1;
                short.push(t.seq);
            }
            Shown::Omitted => {
                e.omitted += 1;
                out.push(t.seq);
            }
        }
    }
    (
        recent.included_seqs,
        recent.shortened_seqs,
        recent.omitted_seqs,
    ) = (ranges(r_in), ranges(r_short), ranges(r_out));
    (
        earlier.included_seqs,
        earlier.shortened_seqs,
        earlier.omitted_seqs,
    ) = (ranges(e_in), ranges(e_short), ranges(e_out));
    if let Some((a, b)) = inputs.unread {
        let n = u32::try_from(b - a + 1).unwrap_or(u32::MAX);
        earlier.available = earlier.available.saturating_add(n);
        earlier.omitted = earlier.omitted.saturating_add(n);
        earlier.omitted_seqs.insert(0, (a, b));
    }
    [recent, earlier]
        .into_iter()
        .filter(|e| e.available > 0)
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(super) fn assemble(
    inputs: Inputs,
    req: &BundleRequest,
    enc: Encoding,
    (cands, choices, plan): (&[Candidate], &[Choice], &LogPlan),
    text: String,
    count: u64,
    (shortened, omitted): (u32, u64),
    shown_above: &HashSet<usize>,
) -> Bundle {
    let mut sections: Vec<ManifestEntry> = Vec::new();
    let mut logged = false;
    for (c, &ch) in cands.iter().zip(choices) {
        if !logged && part_of(c) == Part::Request {
            sections.extend(log_entries(&inputs, plan));
            logged = true;
        }
        let pos = match sections.iter().position(|e| e.section == c.section) {
            Some(p) => p,
            None => {
                sections.push(ManifestEntry::new(c.section));
                sections.len() - 1
            }
        };
        let e = &mut sections[pos];
        e.available += 1;
        match ch {
            Choice::Omitted => e.omitted += 1,
            _ if is_shortened(c, ch) => e.shortened += 1,
            _ => e.included += 1,
        }
        e.tokens += match ch {
            Choice::Full => c.full.tokens.unwrap_or(0),
            Choice::Short => c.short.as_ref().and_then(|s| s.tokens).unwrap_or(0),
            Choice::Omitted => 0,
        };
    }
    if !logged {
        sections.extend(log_entries(&inputs, plan));
    }
    let Inputs {
        session,
        summary,
        action_updates,
        turns,
        memory,
        recalled,
        transcript,
        ..
    } = inputs;

    // The structured fields: exactly what the text holds.
    let chosen = |section: Section| -> Vec<usize> {
        let mut v: Vec<usize> = cands
            .iter()
            .zip(choices)
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
            turns_removed: None,
            layout: req.layout(),
            sections,
            summary_version: summary.as_ref().map_or(0, |s| s.version),
            summarized: summary
                .as_ref()
                .filter(|s| s.covers_through_seq > 0)
                .map(|s| (1, s.covers_through_seq)),
        },
        session,
        stable_end: Offset::default(),
        log_end: Offset::default(),
    };
    if let Some(s) = summary {
        // The structured copy carries the statuses as they are now (the
        // text shows a status set since the fold as a line of the log),
        // and, as the contract says, only actions not done.
        let mut actions = s.pending_actions.clone();
        for a in actions.iter_mut() {
            if let Some(&st) = action_updates.get(&a.action_seq()) {
                a.status = st;
            }
        }
        bundle.pending_actions = pick(&actions, chosen(Section::PendingActions));
        // Those not done (one done since the fold is a line of the log).
        bundle
            .pending_actions
            .retain(|a| a.status != crate::model::ActionStatus::Done);
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
    recalled_items(&mut bundle, recalled, cands, choices, shown_above);
    for (t, s) in turns.into_iter().zip(&plan.shown) {
        match s {
            Shown::Omitted => {}
            Shown::Whole => bundle.recent_turns.push(t),
            Shown::Short(_) | Shown::Earlier(_) => {
                let (text, lossy) = compress::shorten(&t);
                bundle.earlier_turns.push(CompressedTurn {
                    seq: t.seq,
                    role: t.role,
                    speaker: t.speaker.clone(),
                    text,
                    shortened: lossy,
                });
            }
        }
    }
    bundle
}
