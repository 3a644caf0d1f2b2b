//! The lines a bundle may hold outside its log of turns, each with its
//! whole form and (where it has one) a short form and the share of the
//! budget it draws on: the stable part (header, the summary, the
//! subject's memory), offered in a fixed order that depends on nothing a
//! request says, and the request's part (retrieved memory, the reader,
//! the point in time). The log of turns is `log.rs`; choosing what fits is
//! `pack.rs`.

use super::lines::{
    day, episode_lines, fact_item_line, item, one_line, state_name, Candidate, Line, Share,
    BYTES_PER_TOKEN_AT_MOST,
};
use super::recalled;
use super::{BundleRequest, Inputs, Part, Section, SubjectMemory};
use crate::model::{
    ActionStatus, CarriedAction, Priority, SessionState, SessionSummary, UnixNanos,
};
use crate::summarize::render;

/// Cut order within a section: `prio` first, then oldest first. The
/// summary's lists are in the order their items were first stated and a
/// fold appends to them, so a section cut by its share keeps the items it
/// showed before the fold and the fold's new ones come after them (or do
/// not fit): the section's text then only grows at its end, and a prompt
/// cache keeps it. The stable part is never ranked by a request: its lines
/// do not depend on one. Returns indexes in that order.
fn ranked(n: usize, prio: impl Fn(usize) -> u8) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by_key(|&i| (prio(i), i));
    idx
}

/// The summary's items; with `pending_only`, only what is still open
/// (pending actions not done, open questions): what a transcript cannot
/// show. Statuses are the summary's own: a status set since is a line of
/// the log (`log.rs`), so that this part changes only with a fold.
fn summary_candidates(s: &SessionSummary, pending_only: bool, out: &mut Vec<Candidate>) {
    let pending: Vec<_> = s
        .pending_actions
        .iter()
        .enumerate()
        .filter(|(_, a)| a.status != ActionStatus::Done)
        .collect();
    let order = ranked(pending.len(), |i| match pending[i].1.priority {
        Priority::High => 0,
        Priority::Medium => 1,
        Priority::Low => 2,
    });
    for i in order {
        let (k, a) = pending[i];
        out.push(item(Section::PendingActions, k, render::action_line(a)));
    }
    for i in ranked(s.open_questions.len(), |_| 0) {
        let line = render::question_line(&s.open_questions[i]);
        out.push(item(Section::OpenQuestions, i, line));
    }
    if pending_only {
        return;
    }
    for i in ranked(s.decisions.len(), |_| 0) {
        let line = render::decision_line(&s.decisions[i]);
        out.push(item(Section::Decisions, i, line));
    }
    if !s.user_intent.is_empty() {
        out.push(item(
            Section::Summary,
            0,
            format!("User intent: {} [#{}]", s.user_intent, s.user_intent_seq),
        ));
    }
    if !s.prose.trim().is_empty() {
        out.push(item(Section::Summary, 1, s.prose.trim().to_owned()));
    }
    for i in ranked(s.key_facts.len(), |_| 0) {
        let line = render::fact_line(&s.key_facts[i]);
        out.push(item(Section::KeyFacts, i, line));
    }
}

/// A carried action: the action in its own words, where it came from (its
/// evidence seqs are another session's) and the day it was said (`said`;
/// the day its session stopped when that turn is gone).
fn carried_line(c: &CarriedAction, said: Option<UnixNanos>) -> String {
    let a = &c.action;
    let due = if a.deadline.is_empty() {
        String::new()
    } else {
        format!(", due {}", a.deadline)
    };
    format!(
        "- {} (owner {}{due}, {}) — from session {} [#{}], {}",
        one_line(&a.action),
        a.owner,
        render::status(a.status),
        c.action_ref.session_id,
        c.action_ref.action_seq,
        day(said.unwrap_or(c.ended_at))
    )
}

/// The carried actions, oldest first.
fn carried_candidates(m: &SubjectMemory, out: &mut Vec<Candidate>) {
    for (i, c) in m.carried.iter().enumerate() {
        let said = m.carried_said.get(i).copied().flatten();
        out.push(item(Section::CarriedActions, i, carried_line(c, said)));
    }
}

/// The subject's memory: carried actions (the oldest promise kept first
/// when cut: it is the most overdue, and a new one then does not push an
/// older one out), facts and episodes (newest kept first).
fn memory_candidates(inputs: &Inputs, out: &mut Vec<Candidate>) {
    let m = &inputs.memory;
    carried_candidates(m, out);
    for i in (0..m.facts.len()).rev() {
        out.push(item(Section::Facts, i, fact_item_line(&m.facts[i])));
    }
    // Newest first in the input: key by position, newest kept first.
    for (i, e) in m.episodes.iter().enumerate() {
        let (full, short) = episode_lines(e, m.episodes_last_said.get(i).copied().flatten());
        out.push(Candidate {
            section: Section::Episodes,
            share: Share::Section(Section::Episodes),
            key: i as u64,
            estimate: full.len() as u64 / BYTES_PER_TOKEN_AT_MOST,
            short: (short != full).then(|| Line::new(short.clone())),
            full: Line::new(full),
            short_lossy: true,
        });
    }
}

/// Where a candidate stands in the order candidates are offered.
fn priority(c: &Candidate) -> u8 {
    match (c.share, c.section) {
        (_, Section::Header) => 0,
        (_, Section::PendingActions) => 2,
        (_, Section::CarriedActions) => 3,
        (_, Section::OpenQuestions) => 4,
        (_, Section::Recalled) => 6,
        (Share::Neighbour, _) => 7,
        (_, Section::Decisions) => 8,
        (_, Section::Summary) => 9,
        (_, Section::KeyFacts) => 10,
        (_, Section::Facts) => 11,
        (_, Section::Episodes) => 13,
        (_, Section::RecentTurns | Section::EarlierTurns) => 14,
    }
}

/// How a header names the subject (", subject X" or nothing) and the owner.
fn subject_and_owner(s: &crate::model::Session) -> (String, String) {
    let subject = if s.subject_id.is_empty() {
        String::new()
    } else {
        format!(", subject {}", s.subject_id)
    };
    let owner = if s.owner_agent.is_empty() {
        "no owner agent".to_owned()
    } else {
        format!("owner agent {}", s.owner_agent)
    };
    (subject, owner)
}

/// Keys of the header's lines: the first two open the stable part, the
/// others close the request's part.
pub(super) const HEADER_AS_OF: usize = 2;
/// The reader's line.
pub(super) const HEADER_READER: usize = 3;

/// The part of the text a candidate belongs to.
pub(super) fn part_of(c: &Candidate) -> Part {
    match c.section {
        Section::Header if c.key >= HEADER_AS_OF as u64 => Part::Request,
        Section::Recalled => Part::Request,
        Section::RecentTurns | Section::EarlierTurns => Part::Log,
        _ => Part::Stable,
    }
}

/// The point in time and the session's state: what changes with every
/// append, so it closes the bundle.
pub(super) fn as_of_line(as_of: u64, state: SessionState) -> String {
    if as_of == 0 {
        format!("No turns yet; state {}.", state_name(state))
    } else {
        format!("As of turn {as_of}; state {}.", state_name(state))
    }
}

/// Every candidate outside the log, stable part first, each part in
/// priority order. The first is the header's first line, which is always
/// kept; the as-of line is always kept too (`pack.rs` reserves it).
pub(super) fn candidates(inputs: &Inputs, req: &BundleRequest) -> Vec<Candidate> {
    let s = &inputs.session;
    let (subject, owner) = subject_and_owner(s);
    let mut out = Vec::new();
    if inputs.transcript {
        // A transcript is its turns under one header line.
        out.push(item(
            Section::Header,
            0,
            format!(
                "# Context bundle: session {}; namespace {}{subject}; {owner} (lease epoch {}); the whole transcript, verbatim below.",
                s.session_id, s.namespace, s.lease_epoch
            ),
        ));
    } else {
        out.push(item(
            Section::Header,
            0,
            format!("# Context bundle: session {}", s.session_id),
        ));
        out.push(item(
            Section::Header,
            1,
            format!(
                "Namespace {}{subject}; {owner} (lease epoch {}).",
                s.namespace, s.lease_epoch
            ),
        ));
    }
    if let Some(sum) = &inputs.summary {
        summary_candidates(sum, inputs.transcript, &mut out);
    }
    if inputs.transcript {
        carried_candidates(&inputs.memory, &mut out);
    } else {
        memory_candidates(inputs, &mut out);
    }
    out.push(item(
        Section::Header,
        HEADER_AS_OF,
        as_of_line(s.last_seq(), s.state),
    ));
    if !req.agent_id.is_empty() {
        out.push(item(
            Section::Header,
            HEADER_READER,
            format!("Prepared for agent {}.", req.agent_id),
        ));
    }
    recalled::candidates(inputs, &req.query, &mut out);
    // Stable: each section keeps its order; the stable part first.
    out.sort_by_key(|c| (part_of(c), priority(c)));
    out
}
