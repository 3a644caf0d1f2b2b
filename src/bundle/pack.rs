//! Fitting a bundle into its budget. Every candidate line (a summary item,
//! a turn, or an item of the subject's memory) is offered in priority
//! order: header, pending actions, carried-over actions, open questions,
//! decisions, summary, key facts, the subject's facts, recent turns (newest
//! first), past episodes, earlier turns (newest first). A line is taken whole if it fits, else in
//! its short form if it has one, else left out and counted in the manifest.
//!
//! Counting is exact and additive: every line ends with a newline and no
//! line starts with whitespace (or '/'), and the OpenAI pre-tokenizers never
//! join a newline run with a non-space character after it, so the tokens of
//! the text are the sum of its lines' tokens, each measured once with the
//! real tokenizer. The text is never measured twice (debug builds check the
//! sum against a full count, and the property test against tiktoken-rs),
//! and the result is never over budget.

use std::collections::{BTreeSet, HashSet};

use super::compress;
use super::{
    Bundle, BundleRequest, CompressedTurn, Inputs, Manifest, ManifestEntry, Section, SeqRange,
};
use crate::model::{CarriedAction, Episode, Fact};
use crate::model::{Encoding, Role, SessionState, Turn};
use crate::model::ActionStatus;
use crate::summarize::{render, SessionSummary};
use crate::tokens;

/// The heading of the shortened older turns (from the Q&A truncation
/// scheme agents are used to).
pub const EARLIER_HEADING: &str = "Earlier conversation summary:";

/// A line and its token count, counted once on first use.
struct Line {
    text: String,
    tokens: Option<u32>,
}

impl Line {
    /// A line of `text`, newline-terminated. Lines must not start with
    /// whitespace or '/' (see the module docs).
    fn new(mut text: String) -> Line {
        debug_assert!(
            !text.starts_with(|c: char| c.is_whitespace() || c == '/'),
            "a bundle line must not start with whitespace or '/': {text:?}"
        );
        text.push('\n');
        Line { text, tokens: None }
    }

    fn tokens(&mut self, enc: Encoding) -> u32 {
        *self.tokens.get_or_insert_with(|| {
            u32::try_from(tokens::count(enc, &self.text)).unwrap_or(u32::MAX)
        })
    }
}

/// One thing the bundle may hold.
struct Candidate {
    section: Section,
    /// Position for display: the item's index in the summary, or a seq.
    key: u64,
    full: Line,
    short: Option<Line>,
    /// Stored tokens of the full text, to skip measuring what cannot fit.
    estimate: u64,
    /// Whether the short form lost anything (else it counts as whole).
    short_lossy: bool,
}

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
        Section::Decisions => "## Decisions",
        Section::Summary => "## Summary",
        Section::KeyFacts => "## Key facts",
        Section::Facts => "## Known facts about the subject",
        Section::Episodes => "## Earlier sessions",
        Section::RecentTurns => "## Recent turns (verbatim)",
        Section::EarlierTurns => EARLIER_HEADING,
    }
}

/// Sections in reading order.
const READING_ORDER: [Section; 11] = [
    Section::Header,
    Section::Summary,
    Section::PendingActions,
    Section::CarriedActions,
    Section::OpenQuestions,
    Section::Decisions,
    Section::KeyFacts,
    Section::Facts,
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

/// The words of `text` worth matching against a query (3+ chars), as
/// they stand.
fn raw_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().nth(2).is_some())
}

/// Words of `text` worth matching against a query, lowercase.
fn words(text: &str) -> HashSet<String> {
    raw_words(text).map(str::to_lowercase).collect()
}

/// How many distinct query words `text` contains. Walks the text's words
/// against the query set; it builds no set of its own (it runs for every
/// candidate of a bundle).
fn overlap(query: &HashSet<String>, text: &str) -> usize {
    if query.is_empty() {
        return 0;
    }
    let mut found: Vec<&str> = Vec::new();
    for w in raw_words(text) {
        if let Some(q) = query.get(w.to_lowercase().as_str()) {
            if !found.contains(&q.as_str()) {
                found.push(q);
            }
        }
    }
    found.len()
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
        Role::Tool => "tool",
    }
}

fn state_name(s: SessionState) -> &'static str {
    match s {
        SessionState::Active => "ACTIVE",
        SessionState::Idle => "IDLE",
        SessionState::Closed => "CLOSED",
    }
}

fn turn_prefix(t: &Turn) -> String {
    if t.speaker.is_empty() {
        format!("[#{}] {}:", t.seq, role_name(t.role))
    } else {
        format!("[#{}] {} {}:", t.seq, role_name(t.role), t.speaker)
    }
}

/// A turn verbatim: content, then its tool call's exact fields.
fn verbatim(t: &Turn) -> String {
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

fn turn_candidate(section: Section, t: &Turn) -> Candidate {
    let (short, lossy) = compress::shorten(t);
    let marker = if lossy { " (shortened)" } else { "" };
    let short = Line::new(format!("{}{marker} {short}", turn_prefix(t)));
    match section {
        // Older turns are only ever shown shortened.
        Section::EarlierTurns => Candidate {
            section,
            key: t.seq,
            full: short,
            short: None,
            estimate: u64::from(t.token_count).min(super::MAX_SHORT_TURN_COST),
            short_lossy: lossy,
        },
        _ => Candidate {
            section,
            key: t.seq,
            full: Line::new(verbatim(t)),
            short: Some(short),
            estimate: u64::from(t.token_count),
            short_lossy: lossy,
        },
    }
}

fn item(section: Section, key: usize, text: String) -> Candidate {
    Candidate {
        section,
        key: key as u64,
        estimate: 0,
        full: Line::new(text),
        short: None,
        short_lossy: false,
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

fn summary_candidates(s: &SessionSummary, req: &BundleRequest, out: &mut Vec<Candidate>) {
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

/// One line of text (newlines folded): a stored fact or episode may hold
/// any characters.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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

fn fact_item_line(f: &Fact) -> String {
    if f.key.is_empty() {
        format!("- {}", one_line(&f.text))
    } else {
        format!("- {}: {}", f.key, one_line(&f.text))
    }
}

/// An episode in full (topic, outcome, prose, still-pending actions) and
/// its short form (topic and outcome only).
fn episode_lines(e: &Episode) -> (String, String) {
    let (y, m, d) =
        crate::summarize::rules::civil_from_days(e.ended_at.div_euclid(86_400_000_000_000));
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
    if !e.prose.trim().is_empty() {
        full.push_str(&format!(". {}", one_line(&e.prose)));
    }
    if !e.pending_actions.is_empty() {
        let still: Vec<String> = e
            .pending_actions
            .iter()
            .map(|a| one_line(&a.action))
            .collect();
        full.push_str(&format!(". Still pending: {}", still.join("; ")));
    }
    (full, head)
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
    for i in ranked(&texts, &query, |_| (false, 0)) {
        out.push(item(Section::Facts, i, texts[i].clone()));
    }
}

fn episode_candidates(inputs: &Inputs, req: &BundleRequest, out: &mut Vec<Candidate>) {
    let eps = &inputs.memory.episodes;
    let query = words(&req.query);
    // Newest first in the input; `ranked` breaks ties newest-index first,
    // so rank over the reversed list.
    let lines: Vec<(String, String)> = eps.iter().rev().map(episode_lines).collect();
    let texts: Vec<String> = lines.iter().map(|(f, _)| f.clone()).collect();
    for i in ranked(&texts, &query, |_| (false, 0)) {
        let (full, short) = &lines[i];
        out.push(Candidate {
            section: Section::Episodes,
            // Display newest first: key by position in the input.
            key: (eps.len() - 1 - i) as u64,
            estimate: 0,
            full: Line::new(full.clone()),
            short: (short != full).then(|| Line::new(short.clone())),
            short_lossy: true,
        });
    }
}

/// Every candidate, in priority order. The first is the header's first
/// line, which is always kept.
fn candidates(inputs: &Inputs, req: &BundleRequest) -> Vec<Candidate> {
    let s = &inputs.session;
    let mut out = Vec::new();
    out.push(item(
        Section::Header,
        0,
        format!("# Context bundle: session {}", s.session_id),
    ));
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
        summary_candidates(sum, req, &mut out);
    }
    memory_candidates(inputs, req, &mut out);
    for t in inputs.recent.iter().rev() {
        out.push(turn_candidate(Section::RecentTurns, t));
    }
    episode_candidates(inputs, req, &mut out);
    for t in inputs.earlier.iter().rev() {
        out.push(turn_candidate(Section::EarlierTurns, t));
    }
    out
}

/// Chooses, in priority order, what fits in `allowance` tokens.
fn choose(
    cands: &mut [Candidate],
    enc: Encoding,
    (allowance, max_bytes): (u64, usize),
    headings: &[(Section, Option<Line>)],
) -> Vec<Choice> {
    let mut used = 0u64;
    let mut bytes = 0usize;
    let mut headed: HashSet<Section> = HashSet::new();
    let mut choices = Vec::with_capacity(cands.len());
    for (i, c) in cands.iter_mut().enumerate() {
        let head = if headed.contains(&c.section) {
            0
        } else {
            headings
                .iter()
                .find(|(s, _)| *s == c.section)
                .and_then(|(_, h)| h.as_ref())
                .map_or(0, |h| u64::from(h.tokens.unwrap_or(0)))
        };
        let left = allowance.saturating_sub(used + head);
        // The response carries the text and a structured copy, so the
        // text's bytes are bounded too (a third of the message limit).
        let fits_bytes = |line: &Line| bytes + line.text.len() <= max_bytes;
        // Stored counts are in the session's encoding; a text far over
        // what is left is not measured at all.
        let worth_measuring = c.estimate <= left.saturating_mul(2) + 64 && fits_bytes(&c.full);
        let mut choice = Choice::Omitted;
        if i == 0 || worth_measuring {
            let n = u64::from(c.full.tokens(enc));
            if i == 0 || n <= left {
                used += n + head;
                bytes += c.full.text.len();
                choice = Choice::Full;
            }
        }
        if choice == Choice::Omitted {
            if let Some(short) = c.short.as_mut() {
                if bytes + short.text.len() <= max_bytes {
                    let n = u64::from(short.tokens(enc));
                    if n <= left {
                        used += n + head;
                        bytes += short.text.len();
                        choice = Choice::Short;
                    }
                }
            }
        }
        if choice != Choice::Omitted {
            headed.insert(c.section);
        }
        choices.push(choice);
    }
    choices
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
    } = inputs;
    let mut sections: Vec<ManifestEntry> = Vec::new();
    for (c, &ch) in cands.iter().zip(&choices) {
        if sections.last().is_none_or(|e| e.section != c.section) {
            sections.push(ManifestEntry::new(c.section));
        }
        let e = sections.last_mut().expect("pushed above");
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
    // Candidates of one section are contiguous, so each section has one
    // entry; fill the seq ranges of the turn sections.
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
        manifest: Manifest {
            complete: shortened == 0 && omitted == 0,
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
