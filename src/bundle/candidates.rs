//! The lines a bundle may hold, in priority order: the header, the newest
//! interaction, the summary's pending actions and open questions, memory
//! retrieved for the request, the rest of the summary, the subject's
//! memory, recent and earlier turns, each with its whole form and (where
//! it has one) a short form, ranked within its section by the query, and
//! the share of the budget it draws on. Choosing what fits is `pack.rs`.

use std::collections::HashSet;

use super::lines::{
    episode_lines, fact_item_line, item, one_line, role_name, state_name, turn_prefix, verbatim,
    Candidate, Line, Share, BYTES_PER_TOKEN_AT_MOST,
};
use super::{compress, recalled};
use super::{BundleRequest, Inputs, Section};
use crate::model::{ActionStatus, CarriedAction, Role, SessionSummary, Turn};
use crate::summarize::render;

/// The words of `text` worth matching against a query (3+ chars), as
/// they stand.
pub(super) fn raw_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().nth(2).is_some())
}

/// Words of `text` worth matching against a query, lowercase.
pub(super) fn words(text: &str) -> HashSet<String> {
    raw_words(text).map(str::to_lowercase).collect()
}

/// How many distinct query words `text` contains. Walks the text's words
/// against the query set; it builds no set of its own (it runs for every
/// candidate of a bundle).
pub(super) fn overlap(query: &HashSet<String>, text: &str) -> usize {
    if query.is_empty() {
        return 0;
    }
    let mut found: Vec<&str> = Vec::new();
    // One buffer for every ASCII word (most of them).
    let mut ascii = String::new();
    for w in raw_words(text) {
        let other;
        let lower = if w.is_ascii() {
            ascii.clear();
            ascii.push_str(w);
            ascii.make_ascii_lowercase();
            &ascii
        } else {
            other = w.to_lowercase();
            &other
        };
        if let Some(q) = query.get(lower.as_str()) {
            if !found.contains(&q.as_str()) {
                found.push(q);
            }
        }
    }
    found.len()
}

fn turn_candidate(section: Section, t: &Turn) -> Candidate {
    let (short, lossy) = compress::shorten(t);
    let marker = if lossy { " (shortened)" } else { "" };
    let short = Line::new(format!("{}{marker} {short}", turn_prefix(t)));
    match section {
        // Older turns are only ever shown shortened.
        Section::EarlierTurns => Candidate {
            section,
            share: Share::Section(section),
            key: t.seq,
            full: short,
            short: None,
            estimate: u64::from(t.token_count).min(super::MAX_SHORT_TURN_COST),
            short_lossy: lossy,
        },
        _ => Candidate {
            section,
            share: Share::Section(section),
            key: t.seq,
            full: Line::new(verbatim(t)),
            short: Some(short),
            estimate: u64::from(t.token_count),
            short_lossy: lossy,
        },
    }
}

/// Ranks items for cutting: query overlap first, then newest first; returns
/// indexes in that order.
fn ranked(
    texts: &[String],
    query: &HashSet<String>,
    boost: impl Fn(usize) -> (bool, u8),
) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..texts.len()).collect();
    // Cached: the overlap is computed once per item, not per comparison.
    idx.sort_by_cached_key(|&i| {
        let (mine, prio) = boost(i);
        (
            std::cmp::Reverse(mine),
            std::cmp::Reverse(overlap(query, &texts[i])),
            prio,
            std::cmp::Reverse(i),
        )
    });
    idx
}

/// The summary's items; with `pending_only`, only what is still open
/// (pending actions not done, open questions): what a transcript cannot
/// show, since a client may have set an action's status since.
fn summary_candidates(
    s: &SessionSummary,
    req: &BundleRequest,
    pending_only: bool,
    out: &mut Vec<Candidate>,
) {
    let query = words(&req.query);
    let pending: Vec<_> = s
        .pending_actions
        .iter()
        .enumerate()
        .filter(|(_, a)| a.status != ActionStatus::Done)
        .collect();
    let texts: Vec<String> = pending
        .iter()
        .map(|(_, a)| render::action_line(a))
        .collect();
    let order = ranked(&texts, &query, |i| {
        let a = pending[i].1;
        let prio = match a.priority {
            crate::model::Priority::High => 0,
            crate::model::Priority::Medium => 1,
            crate::model::Priority::Low => 2,
        };
        (!req.agent_id.is_empty() && a.owner == req.agent_id, prio)
    });
    for i in order {
        out.push(item(
            Section::PendingActions,
            pending[i].0,
            texts[i].clone(),
        ));
    }
    let plain = |_| (false, 0);
    let texts: Vec<String> = s.open_questions.iter().map(render::question_line).collect();
    for i in ranked(&texts, &query, plain) {
        out.push(item(Section::OpenQuestions, i, texts[i].clone()));
    }
    if pending_only {
        return;
    }
    let texts: Vec<String> = s.decisions.iter().map(render::decision_line).collect();
    for i in ranked(&texts, &query, plain) {
        out.push(item(Section::Decisions, i, texts[i].clone()));
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
    let texts: Vec<String> = s.key_facts.iter().map(render::fact_line).collect();
    for i in ranked(&texts, &query, plain) {
        out.push(item(Section::KeyFacts, i, texts[i].clone()));
    }
}

/// A carried action: the action in its own words and where it came from
/// (its evidence seqs are another session's).
fn carried_line(c: &CarriedAction) -> String {
    let a = &c.action;
    let due = if a.deadline.is_empty() {
        String::new()
    } else {
        format!(", due {}", a.deadline)
    };
    format!(
        "- {} (owner {}{due}, {}) — from session {} [#{}]",
        one_line(&a.action),
        a.owner,
        render::status(a.status),
        c.action_ref.session_id,
        c.action_ref.action_seq
    )
}

/// The subject's memory: carried actions, facts and episodes, ranked by
/// the query (or, without one, by the latest turns).
fn memory_candidates(inputs: &Inputs, req: &BundleRequest, out: &mut Vec<Candidate>) {
    let m = &inputs.memory;
    let query = if req.query.trim().is_empty() {
        let recent: Vec<&str> = inputs
            .recent
            .iter()
            .rev()
            .take(4)
            .map(|t| t.content.as_str())
            .collect();
        words(&recent.join(" "))
    } else {
        words(&req.query)
    };
    let texts: Vec<String> = m.carried.iter().map(carried_line).collect();
    let order = ranked(&texts, &query, |i| {
        let a = &m.carried[i].action;
        (!req.agent_id.is_empty() && a.owner == req.agent_id, 0)
    });
    for i in order {
        out.push(item(Section::CarriedActions, i, texts[i].clone()));
    }
    let texts: Vec<String> = m.facts.iter().map(fact_item_line).collect();
    // A fact retrieved for the request is shown there, not twice.
    let recalled = recalled::fact_ids(inputs);
    for i in ranked(&texts, &query, |_| (false, 0)) {
        if !recalled.contains(m.facts[i].fact_id.as_str()) {
            out.push(item(Section::Facts, i, texts[i].clone()));
        }
    }
}

fn episode_candidates(inputs: &Inputs, req: &BundleRequest, out: &mut Vec<Candidate>) {
    let eps = &inputs.memory.episodes;
    let query = words(&req.query);
    // Newest first in the input; `ranked` breaks ties newest-index first,
    // so rank over the reversed list.
    let lines: Vec<(String, String)> = eps.iter().rev().map(episode_lines).collect();
    let texts: Vec<String> = lines.iter().map(|(f, _)| f.clone()).collect();
    let recalled = recalled::episode_ids(inputs);
    for i in ranked(&texts, &query, |_| (false, 0)) {
        if recalled.contains(eps[eps.len() - 1 - i].session_id.as_str()) {
            continue;
        }
        let (full, short) = &lines[i];
        out.push(Candidate {
            section: Section::Episodes,
            share: Share::Section(Section::Episodes),
            // Display newest first: key by position in the input.
            key: (eps.len() - 1 - i) as u64,
            estimate: full.len() as u64 / BYTES_PER_TOKEN_AT_MOST,
            full: Line::new(full.clone()),
            short: (short != full).then(|| Line::new(short.clone())),
            short_lossy: true,
        });
    }
}

/// Where a candidate stands in the order candidates are offered.
fn priority(c: &Candidate) -> u8 {
    match (c.share, c.section) {
        (_, Section::Header) => 0,
        (Share::Last, _) => 1,
        (_, Section::PendingActions) => 2,
        (_, Section::CarriedActions) => 3,
        (_, Section::OpenQuestions) => 4,
        (Share::Newest, _) => 5,
        (_, Section::Recalled) => 6,
        (Share::Neighbour, _) => 7,
        (_, Section::Decisions) => 8,
        (_, Section::Summary) => 9,
        (_, Section::KeyFacts) => 10,
        (_, Section::Facts) => 11,
        (_, Section::RecentTurns) => 12,
        (_, Section::Episodes) => 13,
        (_, Section::EarlierTurns) => 14,
    }
}

/// Interactions (user turns and what follows them) kept before anything
/// else but the header.
const NEWEST_INTERACTIONS: usize = 2;

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

/// The header of a transcript bundle: one line, with what the header of
/// a summary bundle says (owner, lease, state, reader).
fn transcript_header(inputs: &Inputs, req: &BundleRequest) -> String {
    let s = &inputs.session;
    let (subject, owner) = subject_and_owner(s);
    let reader = if req.agent_id.is_empty() {
        String::new()
    } else {
        format!(" Prepared for agent {}.", req.agent_id)
    };
    format!(
        "# Context bundle: session {}{subject}; {owner} (lease epoch {}); state {}; the whole transcript, turns 1–{}, verbatim below.{reader}",
        s.session_id,
        s.lease_epoch,
        state_name(s.state),
        s.last_seq()
    )
}

/// A turn of a transcript bundle: speaker (or role) and text; the order
/// gives the seq.
fn transcript_candidate(t: &Turn) -> Candidate {
    let who = if t.speaker.is_empty() {
        role_name(t.role)
    } else {
        t.speaker.as_str()
    };
    let full = verbatim(t);
    let rest = full.strip_prefix(&turn_prefix(t)).unwrap_or(&full);
    let mut c = turn_candidate(Section::RecentTurns, t);
    c.full = Line::new(format!("{who}:{rest}"));
    c
}

/// Every candidate, in priority order. The first is the header's first
/// line, which is always kept.
pub(super) fn candidates(inputs: &Inputs, req: &BundleRequest) -> Vec<Candidate> {
    let mut out = if inputs.transcript {
        let mut out = vec![item(Section::Header, 0, transcript_header(inputs, req))];
        out.extend(inputs.recent.iter().rev().map(transcript_candidate));
        out
    } else {
        summary_view(inputs, req)
    };
    let m = &inputs.memory;
    if inputs.transcript {
        if let Some(sum) = &inputs.summary {
            summary_candidates(sum, req, true, &mut out);
        }
        let texts: Vec<String> = m.carried.iter().map(carried_line).collect();
        for (i, text) in texts.into_iter().enumerate() {
            out.push(item(Section::CarriedActions, i, text));
        }
    }
    recalled::candidates(inputs, &mut out);
    // Stable: each section keeps its ranking.
    out.sort_by_key(priority);
    out
}

/// The candidates of a session that does not fit whole: header, summary,
/// the subject's memory, recent and earlier turns.
fn summary_view(inputs: &Inputs, req: &BundleRequest) -> Vec<Candidate> {
    let s = &inputs.session;
    let mut out = Vec::new();
    out.push(item(
        Section::Header,
        0,
        format!("# Context bundle: session {}", s.session_id),
    ));
    let (subject, owner) = subject_and_owner(s);
    out.push(item(
        Section::Header,
        1,
        format!(
            "Namespace {}{subject}; {owner} (lease epoch {}); state {}.",
            s.namespace,
            s.lease_epoch,
            state_name(s.state)
        ),
    ));
    let as_of = s.last_seq();
    let coverage = match &inputs.summary {
        Some(sum) => format!(
            "Turns 1–{as_of}; summary v{} covers turns 1–{}.",
            sum.version, sum.covers_through_seq
        ),
        None if as_of == 0 => "No turns yet.".to_owned(),
        None => format!("Turns 1–{as_of}; no summary yet."),
    };
    out.push(item(Section::Header, 2, coverage));
    if !req.agent_id.is_empty() {
        out.push(item(
            Section::Header,
            3,
            format!("Prepared for agent {}.", req.agent_id),
        ));
    }
    if let Some(sum) = &inputs.summary {
        summary_candidates(sum, req, false, &mut out);
    }
    memory_candidates(inputs, req, &mut out);
    let mut users = 0;
    for t in inputs.recent.iter().rev() {
        let mut c = turn_candidate(Section::RecentTurns, t);
        if users == 0 {
            c.share = Share::Last;
        } else if users < NEWEST_INTERACTIONS {
            c.share = Share::Newest;
        }
        users += usize::from(t.role == Role::User);
        out.push(c);
    }
    episode_candidates(inputs, req, &mut out);
    for t in inputs.earlier.iter().rev() {
        out.push(turn_candidate(Section::EarlierTurns, t));
    }
    out
}
