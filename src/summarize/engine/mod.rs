//! `FoldState`: the incremental accumulator behind running summaries.
//!
//! `fold` reads turns one at a time and keeps only what later turns can
//! change (open questions, actions, live decisions, the open topic segment,
//! per-tool failure streaks) plus the items found so far; `render` turns the
//! state into a `SessionSummary`. Because folding is a per-turn state
//! machine whose whole memory is the (serializable) state, folding turns
//! 1..k and then k+1..n gives exactly the state of folding 1..n at once, and
//! the cost of a fold is proportional to the new turns: each turn is
//! compared with bounded lists, never with the transcript.
//!
//! Bounds, so state and per-turn work stay bounded in long sessions (items
//! past a bound are counted and reported in `truncated`):
//! [`MAX_DECISIONS`], [`MAX_ACTIONS`] (the oldest DONE action makes room
//! first), [`MAX_OPEN_QUESTIONS`], [`MAX_FACTS`], [`MAX_ARTIFACTS`],
//! [`MAX_ANOMALIES`], [`MAX_CONFLICTS`], [`MAX_KEY_POINTS_PER_TOPIC`],
//! [`MAX_TOPIC_WORDS`], [`MAX_TOOL_CALLS`] (the most recent are kept),
//! [`MAX_EVIDENCE_SEQS`] per item (the first and the most recent); a
//! turn's content is analysed up to [`MAX_ANALYSED_BYTES`]. `topics` are
//! kept whole: they grow by one entry per topic shift.
//!
//! This module must not do I/O or read clocks: the same turns always give
//! the same summary (`ctx.now` is the only time it stamps).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::rules::{self, Annotation, Classified, EntityKind, OwnerCue, TurnKind};
use super::SummaryContext;
use crate::model::{
    ActionStatus, Anomaly, Artifact, Conflict, ContextHealth, Decision, KeyFact, OpenQuestion,
    Outcome, Participant, PendingAction, Priority, QuestionStatus, SessionSummary, Severity,
    ToolCallEntry, TopicSegment,
};
use crate::model::{Role, ToolCall, ToolCallStatus, Turn};

mod items;
#[cfg(test)]
mod meeting_tests;
mod render;
#[cfg(test)]
mod tests;
mod tools;
mod topics;

pub use self::render::prose;
use self::topics::{topic_turn, OpenTopic};

/// Bytes of a turn's content that are analysed; the rest is skipped and
/// the summary says so in `truncated`.
pub const MAX_ANALYSED_BYTES: usize = 256 * 1024;
/// Live decisions kept.
pub const MAX_DECISIONS: usize = 100;
/// Pending actions kept (DONE ones included; the oldest DONE one is
/// dropped to make room for a new action).
pub const MAX_ACTIONS: usize = 200;
/// Open questions kept.
pub const MAX_OPEN_QUESTIONS: usize = 100;
/// Key facts kept (the first ones stated).
pub const MAX_FACTS: usize = 200;
/// Artifacts kept.
pub const MAX_ARTIFACTS: usize = 200;
/// Artifacts taken from one tool result.
pub const MAX_ARTIFACTS_PER_CALL: usize = 5;
/// Errors and anomalies kept.
pub const MAX_ANOMALIES: usize = 200;
/// Unresolved conflicts kept.
pub const MAX_CONFLICTS: usize = 50;
/// Key points per topic segment.
pub const MAX_KEY_POINTS_PER_TOPIC: usize = 20;
/// Distinct words counted per topic segment for its label.
pub const MAX_TOPIC_WORDS: usize = 512;
/// Longest `result_summary` of a tool call, in characters.
pub const MAX_RESULT_SUMMARY_CHARS: usize = 200;
/// Evidence seqs kept per item: the first and the most recent ones.
pub const MAX_EVIDENCE_SEQS: usize = 16;
/// Tool calls kept in the summary's log: the most recent ones, exactly;
/// older calls stay in the transcript and are counted in `truncated`.
/// Without a bound the summary, and so the cost of every later summary,
/// would grow with the session.
pub const MAX_TOOL_CALLS: usize = 200;
/// Longest annotated item, in characters (annotations take the whole turn).
pub const MAX_ANNOTATION_CHARS: usize = 2000;

/// Substantive turns a topic needs before a shift can start a new one.
const MIN_TOPIC_TURNS: u32 = 3;
/// Substantive turns in the cohesion window.
const TOPIC_WINDOW: usize = 4;
/// Below this share of words seen in the window, a turn may start a topic.
const TOPIC_SHIFT_COHESION: f64 = 0.15;
/// Content words a turn needs to count as substantive for topics.
const MIN_TOPIC_WORDS: usize = 3;
/// "Agreed" attaches to a decision only in the very next conversational
/// turn (chains of "+1" extend it): later, it more likely answers
/// something else.
const AGREEMENT_WINDOW: u64 = 1;
/// Completion statements remembered to settle dependencies.
const MAX_COMPLETIONS_KEPT: usize = 50;
/// Turn seqs listed by name in the `truncated` note.
const MAX_OVERSIZED_LISTED: usize = 5;
/// Label words of a topic.
const TOPIC_LABEL_WORDS: usize = 3;

/// A live decision with a stable id (positions shift when one is removed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct DecisionItem {
    pub(super) id: u64,
    pub(super) decision: Decision,
}

/// The decision agreements attach to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RecentDecision {
    pub(super) id: u64,
    pub(super) conv_index: u64,
}

/// A proposal a turn ended on ("we should…", "let's…"): the next
/// speaker's assent makes it a decision agreed by both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Proposal {
    pub(super) seq: u64,
    pub(super) speaker: String,
    pub(super) text: String,
    /// Conversational turn index of the proposing turn.
    pub(super) conv_index: u64,
}

/// A contradiction and what would settle it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ConflictItem {
    pub(super) conflict: Conflict,
    /// Who reversed the earlier decision.
    pub(super) reverser: String,
    /// Conversational turn index of the reversal.
    pub(super) conv_index: u64,
}

/// Consecutive failures of one tool, with the anomalies they raised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct ToolRun {
    pub(super) failures: u64,
    pub(super) anomaly_indexes: Vec<usize>,
}

/// Everything folded so far. Serializable so it can be stored with the
/// latest summary and resumed; equal states render equal summaries.
/// Fields missing from a stored state (an older version) start empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FoldState {
    last_seq: u64,
    total_turns: u64,
    first_time: Option<i64>,
    last_time: Option<i64>,
    participants: Vec<Participant>,
    user_intent: Option<(String, u64)>,
    decisions: Vec<DecisionItem>,
    next_decision_id: u64,
    recent_decision: Option<RecentDecision>,
    /// The proposal the last conversational turn ended on.
    proposal: Option<Proposal>,
    actions: Vec<PendingAction>,
    questions: Vec<OpenQuestion>,
    facts: Vec<KeyFact>,
    tool_calls: Vec<ToolCallEntry>,
    tool_runs: BTreeMap<String, ToolRun>,
    successful_tools: BTreeSet<String>,
    artifacts: Vec<Artifact>,
    /// Hash of (tool, arguments) of each artifact, same order.
    artifact_origins: Vec<String>,
    anomalies: Vec<Anomaly>,
    conflicts: Vec<ConflictItem>,
    topics: Vec<TopicSegment>,
    /// Substantive turns of each closed topic, same order.
    topic_weights: Vec<u32>,
    open_topic: Option<OpenTopic>,
    /// Content words of recent completion statements.
    completions: VecDeque<Vec<String>>,
    /// Conversational (non-tool) turns folded.
    conv_index: u64,
    /// Words of the conversational turns folded: how many decisions and
    /// actions the summary shows scales with it.
    conv_words: u64,
    /// Seq and speaker of the last conversational turn.
    prev_conv: Option<(u64, String)>,
    /// Seq of the first turn of the run of conversational turns the last
    /// speaker is in (chat splits one reply into several messages); `None`
    /// in a state written before it was kept.
    run_start: Option<u64>,
    /// The run the current speaker's run replies to: its first and last
    /// seq and its speaker. Questions asked in it are answered by the
    /// reply (see `answer_questions`).
    reply_to: Option<(u64, u64, String)>,
    /// Up to two most recent distinct user/assistant speakers, newest first.
    recent_speakers: Vec<String>,
    /// The tool that failed since the last conversational turn.
    last_failed_tool: Option<String>,
    /// For each action (same order): the tool whose next success completes
    /// it, when it was promised as a retry.
    action_retries: Vec<Option<String>>,
    last_resolution_seq: u64,
    last_complaint_seq: u64,
    closing_conv_index: Option<u64>,
    /// Items not kept at a bound, by section.
    dropped: BTreeMap<String, u64>,
    /// Turns whose content was only partly analysed: (seq, bytes).
    oversized: Vec<(u64, usize)>,
    oversized_count: u64,
}

impl FoldState {
    /// Folds `turns` (in seq order) into the state. Turns at or below the
    /// last folded seq are ignored, so re-sending an overlap is harmless.
    pub fn fold(&mut self, turns: &[Turn]) {
        for t in turns {
            self.fold_turn(t);
        }
    }

    /// The last folded seq (0 when nothing was folded).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    fn fold_turn(&mut self, turn: &Turn) {
        if turn.seq <= self.last_seq {
            return;
        }
        self.last_seq = turn.seq;
        self.total_turns += 1;
        let time = rules::turn_time(turn);
        self.first_time.get_or_insert(time);
        self.last_time = Some(time);
        if rules::is_event(&turn.metadata) {
            return;
        }
        let speaker = rules::speaker_of(turn);
        if !self.participants.iter().any(|p| p.speaker == speaker) {
            self.participants.push(Participant {
                speaker: speaker.clone(),
                role: turn.role,
            });
        }
        let text = rules::prefix_bytes(&turn.content, MAX_ANALYSED_BYTES);
        if text.len() < turn.content.len() {
            self.oversized_count += 1;
            if self.oversized.len() < MAX_OVERSIZED_LISTED {
                self.oversized.push((turn.seq, turn.content.len()));
            }
        }
        if let Some(q) = rules::answer_to(&turn.metadata) {
            self.questions
                .retain(|x| x.evidence_seqs.first() != Some(&q));
        }
        if let Some(tc) = &turn.tool_call {
            self.drop_narrated_step(tc);
            self.fold_tool_call(turn.seq, tc);
        }

        let annotation = rules::annotation(&turn.metadata);
        // The turn is split into sentences once; every rule below reads
        // these.
        let (_, sentences) = rules::classify_text(text);
        // Tool output is machine text: it gives facts and artifacts, not
        // commitments or questions.
        let conversational = turn.tool_call.is_none() && turn.role != Role::Tool;
        // A system turn instructs the agent (policy, tool descriptions): it
        // is context, never the session's actions, decisions or questions,
        // unless a client annotated it as one.
        let instructs = turn.role == Role::System && annotation.is_none();
        if conversational && !instructs {
            self.note_run(turn.seq, &speaker);
            let proposal = self.proposal.take();
            match annotation {
                Some(a) => self.fold_annotation(a, turn.seq, &speaker, text, time),
                None => {
                    if let Some(p) = proposal {
                        self.fold_assent(p, turn.seq, &speaker, &sentences);
                    }
                    self.fold_sentences(turn.seq, &speaker, text, time, &sentences);
                    let texts: Vec<&str> = sentences.iter().map(|c| c.text).collect();
                    self.proposal = rules::closing_proposal(text, &texts).map(|p| Proposal {
                        seq: turn.seq,
                        speaker: speaker.clone(),
                        text: rules::item_text(p),
                        conv_index: self.conv_index,
                    });
                }
            }
            if turn.role == Role::User && self.user_intent.is_none() {
                self.note_intent(turn.seq, &sentences);
            }
            if rules::is_closing(text) {
                self.closing_conv_index = Some(self.conv_index);
            }
            self.prev_conv = Some((turn.seq, speaker.clone()));
            // "You" is a person or the agent, never a system notice.
            if matches!(turn.role, Role::User | Role::Assistant) {
                self.recent_speakers.retain(|s| *s != speaker);
                self.recent_speakers.insert(0, speaker.clone());
                self.recent_speakers.truncate(2);
            }
            // Only the turn right after a failure can promise its retry.
            self.last_failed_tool = None;
            self.conv_index += 1;
            self.conv_words += text.split_whitespace().count() as u64;
        }
        if annotation != Some(Annotation::Fact) {
            self.fold_facts(turn.seq, &speaker, &sentences);
        }
        let topic_turn = topic_turn(turn.seq, conversational, &sentences);
        self.fold_topic(topic_turn);
    }

    /// A new speaker starts a run of turns that replies to the run before
    /// it (chat splits one message into several turns).
    fn note_run(&mut self, seq: u64, speaker: &str) {
        let Some((last, previous)) = self.prev_conv.clone() else {
            self.run_start = Some(seq);
            return;
        };
        if previous != speaker {
            // A state written before runs were kept knows the last turn.
            let from = self.run_start.unwrap_or(last).min(last);
            self.reply_to = Some((from, last, previous));
            self.run_start = Some(seq);
        }
    }

    /// "I will search for news about the iPhone 14." and then the search
    /// call: the agent narrated the step it took, nothing stays to do. An
    /// action of the turn just before a tool call, owned by that turn's
    /// speaker, naming the tool or an argument, and promised to nobody
    /// ("you") by no date, is dropped; "I'll check the payment log and get
    /// back to you by Friday" stays (the call's success completes it).
    fn drop_narrated_step(&mut self, tc: &ToolCall) {
        let Some((seq, speaker)) = self.prev_conv.clone() else {
            return;
        };
        let mut called = tool_words(&tc.tool_name);
        for arg in json_strings(&tc.arguments_json) {
            called.extend(rules::content_words(&arg));
        }
        self.remove_actions(|a| {
            let to_someone = a
                .action
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| w.eq_ignore_ascii_case("you") || w.eq_ignore_ascii_case("your"));
            a.evidence_seqs.first() == Some(&seq)
                && a.owner == speaker
                && a.status == ActionStatus::Pending
                && a.deadline.is_empty()
                && !to_someone
                && rules::content_words(&a.action)
                    .iter()
                    .any(|w| called.contains(w))
        });
    }

    // -- conversational turns ------------------------------------------------

    fn fold_sentences(
        &mut self,
        seq: u64,
        speaker: &str,
        text: &str,
        time: i64,
        sentences: &[Classified<'_>],
    ) {
        self.answer_questions(seq, speaker, sentences);
        self.fold_agreement(seq, speaker, sentences);

        // Progress reports first, so a turn never completes its own action.
        for c in sentences {
            let completion = c.cues.completion;
            if completion || c.cues.resolution {
                self.complete_by_statement(seq, speaker, &c.content, completion);
                if self.completions.len() == MAX_COMPLETIONS_KEPT {
                    self.completions.pop_front();
                }
                self.completions
                    .push_back(c.content.iter().cloned().collect());
            } else if c.cues.acceptance {
                if let Some(a) = self
                    .actions
                    .iter_mut()
                    .rev()
                    .find(|a| a.owner == speaker && a.status == ActionStatus::Pending)
                {
                    // "Will do" acknowledges; "On it" / "Working on it" starts.
                    if rules::is_started(c.text) {
                        a.status = ActionStatus::InProgress;
                    }
                    push_seq(&mut a.evidence_seqs, seq);
                }
            }
            if c.cues.resolution {
                self.last_resolution_seq = seq;
            }
            if c.kind == TurnKind::Complaint {
                self.last_complaint_seq = seq;
            }
        }

        let mut skip_next = false;
        for (i, c) in sentences.iter().enumerate() {
            if std::mem::take(&mut skip_next) {
                continue;
            }
            let next = sentences.get(i + 1);
            if !(c.cues.reversal && !self.decisions.is_empty() || c.cues.decision) {
                continue;
            }
            // "Let's reverse the decision: no cluster. We upgrade the node
            // instead." — the choice is stated in the next sentence.
            let (decided, next) = match next {
                Some(n) if continues_decision(n) => {
                    skip_next = true;
                    (span(text, c.text, n.text), sentences.get(i + 2))
                }
                _ => (c.text, next),
            };
            // "If it is only a matter of downloading the data. Yes, let's
            // include that.": a short decision about "that" takes the
            // sentence it points back at.
            let before = i.checked_sub(1).map(|p| &sentences[p]);
            let decided = match before {
                Some(p)
                    if rules::is_noise(decided)
                        && refers_back(decided)
                        && !rules::is_noise(p.text) =>
                {
                    span(text, p.text, decided)
                }
                _ => decided,
            };
            if c.cues.reversal && !self.decisions.is_empty() {
                self.fold_reversal(seq, speaker, decided, &c.content, next);
            } else if !rules::is_noise(decided)
                && !rules::is_empty_decision(decided)
                && rules::is_listed(rules::Act::Decision, decided)
            {
                self.add_decision(seq, speaker, decided, next, true);
            }
        }

        let participants: Vec<String> = self
            .participants
            .iter()
            .map(|p| p.speaker.clone())
            .collect();
        let turn_priority = rules::priority(text);
        // The dates the whole turn states. A clause read alone can date
        // differently (its cut-off context pairs a month with another
        // number); only a date the turn as a whole states is kept, which
        // is what the validator checks.
        let mut in_turn: Option<Vec<String>> = None;
        for (ci, c) in sentences.iter().enumerate() {
            if c.cues.decision || !c.cues.maybe_action {
                continue;
            }
            // "Marco, please X, and Lee, do Y": one action per addressee.
            for clause in rules::clauses(c.text) {
                let Some(cue) = rules::action_cue(clause, &participants) else {
                    continue;
                };
                // "Off-by-one in the loop. I'll fix it.": a short commitment
                // to "it" takes the sentence before it along; alone, or
                // with nothing substantive before it, it is noise.
                let item_text = if rules::is_noise(clause) {
                    let before = ci.checked_sub(1).map(|p| &sentences[p]);
                    match before.filter(|p| refers_back(clause) && !rules::is_noise(p.text)) {
                        Some(p) => span(text, p.text, clause),
                        None => continue,
                    }
                } else {
                    clause
                };
                // Precision first: only checkable work is listed (judged
                // on the item's own words, as a later reader re-judges a
                // carried item).
                if !rules::is_listed(rules::Act::Action, item_text) {
                    continue;
                }
                let owner_seq = self.addressee_seq(&cue.owner, speaker);
                let owner = self.owner_name(cue.owner, speaker);
                let stated = in_turn.get_or_insert_with(|| rules::deadlines(text, time));
                let deadline = [clause, c.text]
                    .into_iter()
                    .filter_map(|x| rules::deadline(x, time))
                    .find(|d| stated.contains(d))
                    .or_else(|| stated.first().cloned())
                    .unwrap_or_default();
                let depends_on = rules::depends_on(clause)
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                // An agent's commitment right after a tool failed is most
                // likely the retry: that tool's next success completes it.
                let retry_of = self.last_failed_tool.clone().filter(|_| owner == speaker);
                let action = rules::item_text(item_text);
                self.add_action(
                    PendingAction {
                        action,
                        owner,
                        deadline,
                        status: ActionStatus::Pending,
                        depends_on,
                        priority: turn_priority,
                        // The origin first; then the addressee's turn.
                        evidence_seqs: std::iter::once(seq).chain(owner_seq).collect(),
                        requires_human_review: false,
                    },
                    retry_of,
                );
            }
        }

        let mut skip_next = false;
        for (i, c) in sentences.iter().enumerate() {
            if std::mem::take(&mut skip_next) {
                continue;
            }
            if c.cues.open_question
                && !rules::is_noise_question(c.text)
                && rules::is_listed(rules::Act::Question, c.text)
            {
                // "Which systems does it talk to? Your EHR, payroll?": the
                // second only spells out the first; they are one question.
                let asked = match sentences.get(i + 1) {
                    Some(n) if rules::is_elaboration(n.text) => {
                        skip_next = true;
                        span(text, c.text, n.text)
                    }
                    _ => c.text,
                };
                let question = rules::item_text(asked);
                self.add_question(seq, speaker, question);
            }
        }
    }
}

/// Whether a short sentence points back at what was just said ("I'll fix
/// it", "will do that").
fn refers_back(sentence: &str) -> bool {
    sentence.split(|c: char| !c.is_alphanumeric()).any(|w| {
        matches!(
            w.to_lowercase().as_str(),
            "it" | "that" | "this" | "them" | "those"
        )
    })
}

/// Whether a sentence carries on the decision before it: a plain statement
/// saying what is done "instead", or what "we" do now.
fn continues_decision(c: &Classified<'_>) -> bool {
    matches!(c.kind, TurnKind::Answer | TurnKind::Decision)
        && !c.cues.reversal
        && (c.text.to_lowercase().contains("instead")
            || c.text.starts_with("We ")
            || c.text.starts_with("So we "))
}

/// The slice of `text` from the start of `a` to the end of `b` (both
/// slices of `text`, `a` first), so a two-sentence item stays verbatim.
fn span<'a>(text: &'a str, a: &'a str, b: &'a str) -> &'a str {
    let base = text.as_ptr() as usize;
    let start = (a.as_ptr() as usize).saturating_sub(base);
    let end = (b.as_ptr() as usize + b.len()).saturating_sub(base);
    // Both are slices of `text`, so the range is valid; `a` alone if not.
    text.get(start..end).unwrap_or(a)
}

/// "unassigned": the owner of an action nobody took.
pub const UNASSIGNED: &str = "unassigned";

/// Adds `seq` to an item's evidence. An item restated on every few turns
/// would otherwise cite without bound (and make every later summary, and
/// its validation, cost more): past [`MAX_EVIDENCE_SEQS`], the oldest seq
/// after the first goes. The first stays: it is the item's origin, which
/// other rules use as its identity.
fn push_seq(v: &mut Vec<u64>, seq: u64) {
    if !v.contains(&seq) {
        v.push(seq);
        v.sort_unstable();
        if v.len() > MAX_EVIDENCE_SEQS {
            v.remove(1);
        }
    }
}

/// Words of tool names that only read: such a tool completes nothing by
/// its object alone.
const READ_VERBS: &[&str] = &[
    "get", "search", "list", "lookup", "look", "query", "fetch", "read", "check", "find",
    "describe", "show", "view", "status", "inspect", "count", "estimat",
];

/// String values (three characters or more) of a JSON arguments object,
/// lower case, at most 20: the objects a tool call acts on.
fn json_strings(args: &str) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) if s.chars().count() >= 3 && out.len() < 20 => {
                out.push(s.to_lowercase());
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            serde_json::Value::Object(m) => m.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(args) {
        walk(&v, &mut out);
    }
    out
}

/// Content words of a tool name ("get_payment_log" → payment, log).
fn tool_words(name: &str) -> BTreeSet<String> {
    let mut spaced = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_uppercase() && prev_lower {
            spaced.push(' ');
        }
        prev_lower = c.is_lowercase();
        spaced.push(if c.is_alphanumeric() { c } else { ' ' });
    }
    rules::content_words(&spaced)
}

fn origin_key(tool: &str, args: &str) -> String {
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update([0u8]);
    h.update(args.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
