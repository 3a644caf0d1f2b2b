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
    id: u64,
    decision: Decision,
}

/// The decision agreements attach to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RecentDecision {
    id: u64,
    conv_index: u64,
}

/// A contradiction and what would settle it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ConflictItem {
    conflict: Conflict,
    /// Who reversed the earlier decision.
    reverser: String,
    /// Conversational turn index of the reversal.
    conv_index: u64,
}

/// Consecutive failures of one tool, with the anomalies they raised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct ToolRun {
    failures: u64,
    anomaly_indexes: Vec<usize>,
}

/// One word of a topic's vocabulary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WordStat {
    count: u64,
    first: u64,
    surface: String,
}

/// What one turn brings to topic segmentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TopicTurn {
    seq: u64,
    /// (stem, surface) content words without digits.
    words: Vec<(String, String)>,
    key_point: Option<String>,
}

impl TopicTurn {
    fn substantive(&self) -> bool {
        self.words.len() >= MIN_TOPIC_WORDS
    }

    fn stems(&self) -> BTreeSet<String> {
        self.words.iter().map(|(s, _)| s.clone()).collect()
    }
}

/// The topic segment still growing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct OpenTopic {
    first_seq: u64,
    last_seq: u64,
    substantive: u32,
    key_points: Vec<(String, u64)>,
    vocabulary: BTreeMap<String, WordStat>,
    next_word: u64,
    /// Stems of the last substantive turns, for cohesion.
    window: VecDeque<Vec<String>>,
    /// Turns since a possible topic shift, not yet assigned.
    candidate: Vec<TopicTurn>,
    /// Key points or words dropped at the bounds.
    dropped_key_points: u64,
}

impl OpenTopic {
    fn new(first_seq: u64) -> OpenTopic {
        OpenTopic {
            first_seq,
            last_seq: first_seq,
            substantive: 0,
            key_points: Vec::new(),
            vocabulary: BTreeMap::new(),
            next_word: 0,
            window: VecDeque::new(),
            candidate: Vec::new(),
            dropped_key_points: 0,
        }
    }

    fn window_words(&self) -> BTreeSet<String> {
        self.window.iter().flatten().cloned().collect()
    }

    fn absorb(&mut self, t: TopicTurn) {
        self.last_seq = t.seq;
        if t.substantive() {
            self.substantive += 1;
            self.window
                .push_back(t.words.iter().map(|(s, _)| s.clone()).collect());
            if self.window.len() > TOPIC_WINDOW {
                self.window.pop_front();
            }
        }
        for (stem, surface) in t.words {
            if let Some(w) = self.vocabulary.get_mut(&stem) {
                w.count += 1;
            } else if self.vocabulary.len() < MAX_TOPIC_WORDS {
                self.vocabulary.insert(
                    stem,
                    WordStat {
                        count: 1,
                        first: self.next_word,
                        surface,
                    },
                );
                self.next_word += 1;
            }
        }
        if let Some(kp) = t.key_point {
            let dup = self
                .key_points
                .iter()
                .any(|(k, _)| rules::is_near_duplicate(&kp, k));
            if dup {
                // A repeated point adds nothing.
            } else if self.key_points.len() < MAX_KEY_POINTS_PER_TOPIC {
                self.key_points.push((kp, t.seq));
            } else {
                self.dropped_key_points += 1;
            }
        }
    }

    fn label(&self) -> String {
        let mut ranked: Vec<&WordStat> = self.vocabulary.values().collect();
        ranked.sort_by(|a, b| b.count.cmp(&a.count).then(a.first.cmp(&b.first)));
        let top: Vec<&str> = ranked
            .iter()
            .take(TOPIC_LABEL_WORDS)
            .map(|w| w.surface.as_str())
            .collect();
        if top.is_empty() {
            self.key_points
                .first()
                .map(|(k, _)| rules::clip(k, 80))
                .unwrap_or_default()
        } else {
            top.join(", ")
        }
    }

    fn segment(&self) -> TopicSegment {
        let mut evidence: Vec<u64> = self.key_points.iter().map(|(_, s)| *s).collect();
        evidence.sort_unstable();
        evidence.dedup();
        TopicSegment {
            first_seq: self.first_seq,
            last_seq: self.last_seq,
            topic: self.label(),
            key_points: self.key_points.iter().map(|(k, _)| k.clone()).collect(),
            evidence_seqs: evidence,
        }
    }
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
    /// Seq and speaker of the last conversational turn.
    prev_conv: Option<(u64, String)>,
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
            self.fold_tool_call(turn.seq, tc);
        }

        let annotation = rules::annotation(&turn.metadata);
        let (_, sentences) = rules::classify_text(text);
        // Tool output is machine text: it gives facts and artifacts, not
        // commitments or questions.
        let conversational = turn.tool_call.is_none() && turn.role != Role::Tool;
        if conversational {
            match annotation {
                Some(a) => self.fold_annotation(a, turn.seq, &speaker, text, time),
                None => self.fold_sentences(turn.seq, &speaker, text, time, &sentences),
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
        }
        if annotation != Some(Annotation::Fact) {
            self.fold_facts(turn.seq, &speaker, text);
        }
        let topic_turn = topic_turn(turn.seq, conversational, &sentences);
        self.fold_topic(topic_turn);
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
            if c.cues.reversal && !self.decisions.is_empty() {
                self.fold_reversal(seq, speaker, decided, &c.content, next);
            } else {
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
        for c in sentences {
            if c.cues.decision || !c.cues.maybe_action {
                continue;
            }
            // "Marco, please X, and Lee, do Y": one action per addressee.
            for clause in rules::clauses(c.text) {
                let Some(cue) = rules::action_cue(clause, &participants) else {
                    continue;
                };
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
                let action = rules::clip(rules::trim_filler(clause), rules::MAX_ITEM_CHARS);
                self.add_action(
                    PendingAction {
                        action,
                        owner,
                        deadline,
                        status: ActionStatus::Pending,
                        depends_on,
                        priority: turn_priority,
                        evidence_seqs: vec![seq],
                        requires_human_review: false,
                    },
                    retry_of,
                );
            }
        }

        for c in sentences {
            if c.cues.open_question {
                let question = rules::clip(rules::trim_filler(c.text), rules::MAX_ITEM_CHARS);
                self.add_question(seq, speaker, question);
            }
        }
    }

    fn fold_annotation(&mut self, a: Annotation, seq: u64, speaker: &str, text: &str, time: i64) {
        let whole = rules::clip(text, MAX_ANNOTATION_CHARS);
        if whole.is_empty() {
            return;
        }
        match a {
            Annotation::Decision => {
                let rationale = rules::sentences(text)
                    .into_iter()
                    .find_map(rules::rationale)
                    .map(|r| rules::clip(r, rules::MAX_ITEM_CHARS))
                    .unwrap_or_default();
                self.push_decision(Decision {
                    decision: whole,
                    rationale,
                    agreed_by: vec![speaker.to_string()],
                    evidence_seqs: vec![seq],
                    requires_human_review: false,
                });
            }
            Annotation::PendingAction => {
                let participants: Vec<String> = self
                    .participants
                    .iter()
                    .map(|p| p.speaker.clone())
                    .collect();
                let owner = rules::sentences(text)
                    .into_iter()
                    .find_map(|s| rules::action_cue(s, &participants))
                    .map_or_else(
                        || speaker.to_string(),
                        |c| self.owner_name(c.owner, speaker),
                    );
                let depends_on = rules::sentences(text)
                    .into_iter()
                    .flat_map(rules::depends_on)
                    .map(str::to_string)
                    .collect();
                let action = PendingAction {
                    action: whole,
                    owner,
                    deadline: rules::deadline(text, time).unwrap_or_default(),
                    status: ActionStatus::Pending,
                    depends_on,
                    priority: rules::priority(text),
                    evidence_seqs: vec![seq],
                    requires_human_review: false,
                };
                self.add_action(action, None);
            }
            Annotation::OpenQuestion => self.add_question(seq, speaker, whole),
            Annotation::Fact => self.add_fact(KeyFact {
                fact: whole,
                stated_by: speaker.to_string(),
                evidence_seqs: vec![seq],
            }),
        }
    }

    fn note_intent(&mut self, seq: u64, sentences: &[Classified<'_>]) {
        let mut best: Option<&Classified<'_>> = None;
        for c in sentences {
            if matches!(c.kind, TurnKind::Greeting | TurnKind::SmallTalk) || c.cues.filler {
                continue;
            }
            if best.is_none_or(|b| c.importance > b.importance) {
                best = Some(c);
            }
        }
        if let Some(c) = best {
            let text = rules::clip(rules::trim_filler(c.text), rules::MAX_ITEM_CHARS);
            self.user_intent = Some((text, seq));
        }
    }

    /// The person "you" refers to: the latest other conversational speaker.
    fn addressee(&self, speaker: &str) -> Option<String> {
        self.recent_speakers.iter().find(|s| *s != speaker).cloned()
    }

    fn owner_name(&self, cue: OwnerCue, speaker: &str) -> String {
        match cue {
            OwnerCue::Speaker => speaker.to_string(),
            OwnerCue::Addressee => self
                .addressee(speaker)
                .unwrap_or_else(|| UNASSIGNED.to_string()),
            OwnerCue::Named(name) => name,
            OwnerCue::Unassigned => UNASSIGNED.to_string(),
        }
    }

    // -- questions -------------------------------------------------------------

    fn add_question(&mut self, seq: u64, speaker: &str, question: String) {
        if self
            .questions
            .iter()
            .any(|q| q.asked_by == speaker && rules::is_near_duplicate(&question, &q.question))
        {
            return;
        }
        if self.questions.len() >= MAX_OPEN_QUESTIONS {
            self.drop_item("open_questions");
            return;
        }
        self.questions.push(OpenQuestion {
            question,
            asked_by: speaker.to_string(),
            status: QuestionStatus::Unanswered,
            evidence_seqs: vec![seq],
        });
    }

    /// A later statement by another participant answers a question when it
    /// is the very next conversational turn after the question, or when it
    /// shares at least half of the question's content words; sharing two or
    /// more (but fewer than half) answers it partly.
    fn answer_questions(&mut self, seq: u64, speaker: &str, sentences: &[Classified<'_>]) {
        if self.questions.is_empty() {
            return;
        }
        let answer: Vec<&Classified<'_>> =
            sentences.iter().filter(|c| c.cues.answer_like).collect();
        if answer.is_empty() {
            return;
        }
        let words: BTreeSet<String> = answer
            .iter()
            .flat_map(|c| c.content.iter().cloned())
            .collect();
        let prev_seq = self.prev_conv.as_ref().map(|(s, _)| *s);
        let qwords: Vec<BTreeSet<String>> = self
            .questions
            .iter()
            .map(|q| rules::content_words(&q.question))
            .collect();

        let mut answered = vec![false; self.questions.len()];
        let immediate: Vec<usize> = (0..self.questions.len())
            .filter(|&i| {
                let q = &self.questions[i];
                q.asked_by != speaker && q.evidence_seqs.first().copied() == prev_seq
            })
            .collect();
        if immediate.len() == 1 {
            answered[immediate[0]] = true;
        } else if !immediate.is_empty() {
            // Several questions in one turn: the reply answers those it
            // talks about, or all of them when it names none.
            let touched: Vec<usize> = immediate
                .iter()
                .copied()
                .filter(|&i| qwords[i].intersection(&words).count() > 0)
                .collect();
            for i in if touched.is_empty() {
                immediate
            } else {
                touched
            } {
                answered[i] = true;
            }
        }
        for (i, q) in self.questions.iter_mut().enumerate() {
            if answered[i] || q.asked_by == speaker {
                continue;
            }
            let shared = qwords[i].intersection(&words).count();
            let need = qwords[i].len().div_ceil(2).max(1);
            if shared >= need {
                answered[i] = true;
            } else if shared >= 2 {
                q.status = QuestionStatus::PartiallyAnswered;
                push_seq(&mut q.evidence_seqs, seq);
            }
        }
        let mut i = 0;
        self.questions.retain(|_| {
            let keep = !answered[i];
            i += 1;
            keep
        });
    }

    // -- decisions -------------------------------------------------------------

    fn decision_from(
        &self,
        seq: u64,
        speaker: &str,
        sentence: &str,
        next: Option<&Classified<'_>>,
    ) -> Decision {
        let rationale = rules::rationale(sentence)
            .or_else(|| next.filter(|n| n.cues.reason).map(|n| n.text))
            .map(|r| rules::clip(r, rules::MAX_ITEM_CHARS))
            .unwrap_or_default();
        let mut evidence_seqs = vec![seq];
        // A rationale from the next sentence is in the same turn.
        evidence_seqs.dedup();
        Decision {
            decision: rules::clip(rules::trim_filler(sentence), rules::MAX_ITEM_CHARS),
            rationale,
            agreed_by: vec![speaker.to_string()],
            evidence_seqs,
            requires_human_review: false,
        }
    }

    fn add_decision(
        &mut self,
        seq: u64,
        speaker: &str,
        sentence: &str,
        next: Option<&Classified<'_>>,
        merge_repeats: bool,
    ) -> Option<u64> {
        let d = self.decision_from(seq, speaker, sentence, next);
        if merge_repeats {
            // The same decision restated is agreement, not a new decision.
            if let Some(item) = self
                .decisions
                .iter_mut()
                .find(|x| rules::is_near_duplicate(&d.decision, &x.decision.decision))
            {
                // Only a new voice adds evidence, and never past the cap:
                // an evicted seq could be the one that names an agreeing
                // speaker, and `agreed_by` must stay provable from the
                // cited turns.
                let d = &mut item.decision;
                if !d.agreed_by.iter().any(|a| a == speaker)
                    && d.evidence_seqs.len() < MAX_EVIDENCE_SEQS
                {
                    d.agreed_by.push(speaker.to_string());
                    push_seq(&mut d.evidence_seqs, seq);
                }
                return Some(item.id);
            }
        }
        self.push_decision(d)
    }

    fn push_decision(&mut self, d: Decision) -> Option<u64> {
        if self.decisions.len() >= MAX_DECISIONS {
            self.drop_item("decisions");
            return None;
        }
        let id = self.next_decision_id;
        self.next_decision_id += 1;
        self.decisions.push(DecisionItem { id, decision: d });
        self.recent_decision = Some(RecentDecision {
            id,
            conv_index: self.conv_index,
        });
        Some(id)
    }

    /// A reversal supersedes the live decision it talks about (most shared
    /// words; else the latest). The old decision leaves `decisions`; the
    /// reversal becomes a decision when it decides something itself. When
    /// someone other than those who made the old decision reverses it, the
    /// two stay in conflict until another participant agrees.
    fn fold_reversal(
        &mut self,
        seq: u64,
        speaker: &str,
        sentence: &str,
        words: &BTreeSet<String>,
        next: Option<&Classified<'_>>,
    ) {
        let mut target = self.decisions.len() - 1;
        let mut best = 0;
        for (i, d) in self.decisions.iter().enumerate() {
            let shared = rules::content_words(&d.decision.decision)
                .intersection(words)
                .count();
            if shared > best || shared == best && shared > 0 {
                best = shared;
                target = i;
            }
        }
        let old = self.decisions.remove(target).decision;
        let new_text = rules::clip(rules::trim_filler(sentence), rules::MAX_ITEM_CHARS);
        if rules::is_decision(sentence) {
            self.add_decision(seq, speaker, sentence, next, false);
        }
        if !old.agreed_by.iter().any(|a| a == speaker) {
            if self.conflicts.len() >= MAX_CONFLICTS {
                self.drop_item("unresolved_conflicts");
                return;
            }
            let mut seqs = vec![old.evidence_seqs.first().copied().unwrap_or(seq), seq];
            seqs.sort_unstable();
            seqs.dedup();
            self.conflicts.push(ConflictItem {
                conflict: Conflict {
                    description: format!(
                        "\"{}\" reverses \"{}\"",
                        rules::clip(&new_text, 150),
                        rules::clip(&old.decision, 150)
                    ),
                    conflicting_seqs: seqs,
                },
                reverser: speaker.to_string(),
                conv_index: self.conv_index,
            });
        }
    }

    /// "Agreed", "+1" right after a decision adds the speaker to it, and
    /// settles a recent reversal that someone else disputed.
    fn fold_agreement(&mut self, seq: u64, speaker: &str, sentences: &[Classified<'_>]) {
        if !sentences.iter().any(|c| c.cues.agreement) {
            return;
        }
        let now = self.conv_index;
        if let Some(recent) = &mut self.recent_decision {
            if now - recent.conv_index <= AGREEMENT_WINDOW {
                recent.conv_index = now;
                let id = recent.id;
                if let Some(item) = self.decisions.iter_mut().find(|d| d.id == id) {
                    if !item.decision.agreed_by.iter().any(|a| a == speaker)
                        && item.decision.evidence_seqs.len() < MAX_EVIDENCE_SEQS
                    {
                        item.decision.agreed_by.push(speaker.to_string());
                        push_seq(&mut item.decision.evidence_seqs, seq);
                    }
                }
            }
        }
        for c in &mut self.conflicts {
            if now - c.conv_index <= AGREEMENT_WINDOW {
                c.conv_index = now;
            }
        }
        self.conflicts
            .retain(|c| !(c.reverser != speaker && c.conv_index == now));
    }

    // -- actions -----------------------------------------------------------------

    fn add_action(&mut self, a: PendingAction, retry_of: Option<String>) {
        // The same commitment restated (same owner) merges into the open one.
        if let Some(existing) = self.actions.iter_mut().find(|x| {
            x.status != ActionStatus::Done
                && x.owner == a.owner
                && rules::is_near_duplicate(&a.action, &x.action)
        }) {
            for s in &a.evidence_seqs {
                push_seq(&mut existing.evidence_seqs, *s);
            }
            if existing.deadline.is_empty() {
                existing.deadline = a.deadline;
            }
            return;
        }
        if self.actions.len() >= MAX_ACTIONS {
            match self
                .actions
                .iter()
                .position(|x| x.status == ActionStatus::Done)
            {
                Some(i) => {
                    self.actions.remove(i);
                    if i < self.action_retries.len() {
                        self.action_retries.remove(i);
                    }
                    self.drop_item("done pending_actions");
                }
                None => {
                    self.drop_item("pending_actions");
                    return;
                }
            }
        }
        self.actions.push(a);
        // Kept aligned with `actions` (a state from before this field
        // existed deserializes it empty: pad it).
        self.action_retries.resize(self.actions.len() - 1, None);
        self.action_retries.push(retry_of);
    }

    /// A completion statement marks DONE the open action it talks about
    /// (two shared words, or half of the action's words), else — for "done"
    /// and the like, not for a customer's "resolved" — the speaker's own
    /// latest open action.
    fn complete_by_statement(
        &mut self,
        seq: u64,
        speaker: &str,
        words: &BTreeSet<String>,
        by_worker: bool,
    ) {
        let mut best: Option<(usize, usize)> = None; // (shared, index)
        for (i, a) in self.actions.iter().enumerate() {
            if a.status == ActionStatus::Done || a.evidence_seqs.first() == Some(&seq) {
                continue;
            }
            let aw = rules::content_words(&a.action);
            let shared = aw.intersection(words).count();
            let enough = shared >= 2 || shared >= 1 && shared * 2 >= aw.len();
            if enough && best.is_none_or(|(b, _)| shared >= b) {
                best = Some((shared, i));
            }
        }
        let index = best.map(|(_, i)| i).or_else(|| {
            by_worker
                .then(|| {
                    self.actions.iter().rposition(|a| {
                        a.status != ActionStatus::Done
                            && a.owner == speaker
                            && a.evidence_seqs.first() != Some(&seq)
                    })
                })
                .flatten()
        });
        // Else the latest open action it shares a word with ("Approval
        // REQ0087731 approved" after "I'll request the approval").
        let index = index.or_else(|| {
            self.actions.iter().rposition(|a| {
                a.status != ActionStatus::Done
                    && a.evidence_seqs.first() != Some(&seq)
                    && rules::content_words(&a.action)
                        .intersection(words)
                        .next()
                        .is_some()
            })
        });
        if let Some(i) = index {
            let a = &mut self.actions[i];
            a.status = ActionStatus::Done;
            push_seq(&mut a.evidence_seqs, seq);
        }
    }

    // -- facts -------------------------------------------------------------------

    fn fold_facts(&mut self, seq: u64, speaker: &str, text: &str) {
        for s in rules::sentences(text) {
            if rules::has_fact_entity(s) {
                self.add_fact(KeyFact {
                    fact: rules::clip(rules::trim_filler(s), rules::MAX_ITEM_CHARS),
                    stated_by: speaker.to_string(),
                    evidence_seqs: vec![seq],
                });
            }
        }
    }

    /// Keeps a fact unless an earlier one repeats it: near-duplicate words
    /// and no identifier the earlier fact lacks.
    fn add_fact(&mut self, f: KeyFact) {
        if self.facts.len() >= MAX_FACTS {
            self.drop_item("key_facts");
            return;
        }
        let ents: BTreeSet<&str> = rules::entities(&f.fact)
            .into_iter()
            .map(|e| e.text)
            .collect();
        // Cheap containment first: only facts holding all of the new one's
        // identifiers can repeat it, and few do.
        let repeated = self.facts.iter().any(|old| {
            ents.iter().all(|e| old.fact.contains(e)) && {
                let old_ents: BTreeSet<&str> = rules::entities(&old.fact)
                    .into_iter()
                    .map(|e| e.text)
                    .collect();
                ents.is_subset(&old_ents) && rules::is_near_duplicate(&f.fact, &old.fact)
            }
        });
        if !repeated {
            self.facts.push(f);
        }
    }

    // -- tool calls --------------------------------------------------------------

    fn fold_tool_call(&mut self, seq: u64, tc: &ToolCall) {
        if self.tool_calls.len() == MAX_TOOL_CALLS {
            self.tool_calls.remove(0);
            self.drop_item("older tool_calls");
        }
        self.tool_calls.push(ToolCallEntry {
            tool_name: tc.tool_name.clone(),
            arguments_json: tc.arguments_json.clone(),
            result_summary: rules::shorten(&tc.result, MAX_RESULT_SUMMARY_CHARS),
            status: tc.status,
            error_details: tc.error_details.clone(),
            seq,
            requires_human_review: false,
        });
        match tc.status {
            ToolCallStatus::Failure | ToolCallStatus::Timeout => {
                self.last_failed_tool = Some(tc.tool_name.clone());
                let run = self.tool_runs.entry(tc.tool_name.clone()).or_default();
                run.failures += 1;
                // Twice in a row with no success since: work is stuck.
                let severity = if run.failures >= 2 {
                    Severity::Blocking
                } else {
                    Severity::Degraded
                };
                let what = if tc.status == ToolCallStatus::Timeout {
                    "timed out"
                } else {
                    "failed"
                };
                let description = if tc.error_details.trim().is_empty() {
                    format!("{} {what}", tc.tool_name)
                } else {
                    format!(
                        "{} {what}: {}",
                        tc.tool_name,
                        rules::clip(&tc.error_details, rules::MAX_ITEM_CHARS)
                    )
                };
                if self.anomalies.len() >= MAX_ANOMALIES {
                    self.drop_item("errors_and_anomalies");
                } else {
                    run.anomaly_indexes.push(self.anomalies.len());
                    self.anomalies.push(Anomaly {
                        description,
                        severity,
                        seq,
                    });
                }
            }
            ToolCallStatus::Success => {
                if let Some(run) = self.tool_runs.remove(&tc.tool_name) {
                    // A success after the failures: they no longer block.
                    for i in run.anomaly_indexes {
                        if let Some(a) = self.anomalies.get_mut(i) {
                            if a.severity == Severity::Blocking {
                                a.severity = Severity::Degraded;
                            }
                        }
                    }
                }
                self.successful_tools.insert(tc.tool_name.clone());
                self.complete_by_tool(seq, tc);
                self.add_artifacts(seq, tc);
            }
            ToolCallStatus::Pending | ToolCallStatus::Unknown => {}
        }
    }

    /// A successful call completes open actions that mention the tool (all
    /// of its name's words) or its object (an identifier of its arguments
    /// or result) together with one of its name's words.
    ///
    /// A tool that only reads (get, search, query…) completes an action only
    /// by name; one that changes things also by one shared verb ("refresh")
    /// or by its object alone ("asset LT-20931", "the vpn-users group"). A
    /// retry promised right after the tool failed is completed by its next
    /// success.
    fn complete_by_tool(&mut self, seq: u64, tc: &ToolCall) {
        let parts = tool_words(&tc.tool_name);
        let mutating = !parts.iter().any(|p| READ_VERBS.contains(&p.as_str()));
        let mut objects: Vec<String> = rules::entities(&tc.arguments_json)
            .into_iter()
            .chain(rules::entities(rules::prefix_bytes(
                &tc.result,
                MAX_ANALYSED_BYTES,
            )))
            .filter(|e| !matches!(e.kind, EntityKind::Code | EntityKind::Number))
            .map(|e| e.text.to_lowercase())
            .collect();
        objects.extend(json_strings(&tc.arguments_json));
        let name = tc.tool_name.to_lowercase();
        if self.last_failed_tool.as_deref() == Some(tc.tool_name.as_str()) {
            self.last_failed_tool = None;
        }
        for (i, a) in self.actions.iter_mut().enumerate() {
            if a.status == ActionStatus::Done {
                continue;
            }
            let lower = a.action.to_lowercase();
            let aw = rules::content_words(&a.action);
            let shared = parts.iter().filter(|p| aw.contains(*p)).count();
            let mentions_tool = lower.contains(&name)
                || !parts.is_empty() && shared == parts.len()
                || shared >= 2
                || mutating && shared >= 1;
            let mentions_object =
                objects.iter().any(|o| lower.contains(o.as_str())) && (mutating || shared >= 1);
            let retried = self.action_retries.get(i).and_then(Option::as_deref)
                == Some(tc.tool_name.as_str());
            if mentions_tool || mentions_object || retried {
                a.status = ActionStatus::Done;
                push_seq(&mut a.evidence_seqs, seq);
            }
        }
    }

    /// Identifiers a result names (ids, files, URLs, emails) become
    /// artifacts; a later successful call of the same tool with the same
    /// arguments makes the earlier ones stale.
    fn add_artifacts(&mut self, seq: u64, tc: &ToolCall) {
        let origin = origin_key(&tc.tool_name, &tc.arguments_json);
        for (a, o) in self.artifacts.iter_mut().zip(&self.artifact_origins) {
            if *o == origin && a.expiry_seq == 0 {
                a.expiry_seq = seq;
            }
        }
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let result = rules::prefix_bytes(&tc.result, MAX_ANALYSED_BYTES);
        for s in rules::sentences(result) {
            for e in rules::entities(s) {
                // Short tokens ("v2", "x1") are versions or sizes, not things.
                let keep = matches!(
                    e.kind,
                    EntityKind::Identifier | EntityKind::Path | EntityKind::Url | EntityKind::Email
                ) && e.text.chars().count() >= 4;
                if !keep || seen.contains(e.text) || seen.len() >= MAX_ARTIFACTS_PER_CALL {
                    continue;
                }
                seen.insert(e.text);
                if self.artifacts.len() >= MAX_ARTIFACTS {
                    self.drop_item("artifacts");
                    continue;
                }
                self.artifacts.push(Artifact {
                    artifact_id: e.text.to_string(),
                    source_tool: tc.tool_name.clone(),
                    summary: rules::shorten(s, MAX_RESULT_SUMMARY_CHARS),
                    seq,
                    expiry_seq: 0,
                });
                self.artifact_origins.push(origin.clone());
            }
        }
    }

    // -- topics ------------------------------------------------------------------

    /// Lexical cohesion: a substantive turn sharing under 15% of its words
    /// with the last few turns of a topic (of at least three substantive
    /// turns) may start a new topic. The shift is confirmed when the next
    /// substantive turn shares at least as many words with the new turns as
    /// with the old topic; otherwise the turns go back to the old topic.
    fn fold_topic(&mut self, t: TopicTurn) {
        let Some(open) = &mut self.open_topic else {
            let mut open = OpenTopic::new(t.seq);
            open.absorb(t);
            self.open_topic = Some(open);
            return;
        };
        if !t.substantive() {
            if open.candidate.is_empty() {
                open.absorb(t);
            } else {
                open.candidate.push(t);
            }
            return;
        }
        let stems = t.stems();
        if !open.candidate.is_empty() {
            let new_words: BTreeSet<String> =
                open.candidate.iter().flat_map(TopicTurn::stems).collect();
            let s_new = stems.intersection(&new_words).count();
            let s_old = stems.intersection(&open.window_words()).count();
            let candidate = std::mem::take(&mut open.candidate);
            if s_new >= s_old {
                let mut next = OpenTopic::new(candidate[0].seq);
                for c in candidate {
                    next.absorb(c);
                }
                next.absorb(t);
                if let Some(closed) = self.open_topic.replace(next) {
                    self.close_topic(&closed);
                }
            } else {
                for c in candidate {
                    open.absorb(c);
                }
                open.absorb(t);
            }
            return;
        }
        let cohesion = rules::overlap(&stems, &open.window_words());
        if open.substantive >= MIN_TOPIC_TURNS && cohesion < TOPIC_SHIFT_COHESION {
            open.candidate.push(t);
        } else {
            open.absorb(t);
        }
    }

    fn close_topic(&mut self, closed: &OpenTopic) {
        if closed.dropped_key_points > 0 {
            *self
                .dropped
                .entry("topic key_points".to_string())
                .or_default() += closed.dropped_key_points;
        }
        self.topics.push(closed.segment());
        self.topic_weights.push(closed.substantive);
    }

    fn drop_item(&mut self, section: &str) {
        *self.dropped.entry(section.to_string()).or_default() += 1;
    }

    // -- rendering ---------------------------------------------------------------

    /// The summary of everything folded so far.
    pub fn render(&self, ctx: &SummaryContext) -> SessionSummary {
        let review = |text: &str| ctx.high_risk && rules::is_irreversible(text);
        let decisions: Vec<Decision> = self
            .decisions
            .iter()
            .map(|d| Decision {
                requires_human_review: review(&d.decision.decision),
                ..d.decision.clone()
            })
            .collect();
        let pending_actions: Vec<PendingAction> = self
            .actions
            .iter()
            .map(|a| PendingAction {
                requires_human_review: review(&a.action),
                ..a.clone()
            })
            .collect();
        let tool_calls: Vec<ToolCallEntry> = self
            .tool_calls
            .iter()
            .map(|t| ToolCallEntry {
                requires_human_review: review(&t.tool_name),
                ..t.clone()
            })
            .collect();
        let requires_human_review = decisions.iter().any(|d| d.requires_human_review)
            || pending_actions.iter().any(|a| a.requires_human_review)
            || tool_calls.iter().any(|t| t.requires_human_review);

        let (topics, weights) = self.topic_segments();
        let topic = weights
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .and_then(|(i, _)| topics.get(i))
            .map(|t| t.topic.clone())
            .unwrap_or_default();

        let mut stale: Vec<String> = Vec::new();
        for a in self.artifacts.iter().filter(|a| a.expiry_seq != 0) {
            if !stale.contains(&a.artifact_id) {
                stale.push(a.artifact_id.clone());
            }
        }
        let budget = i64::try_from(ctx.context_limit_tokens)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(ctx.bundle_tokens).unwrap_or(i64::MAX));

        let (user_intent, user_intent_seq) = self.user_intent.clone().unwrap_or_default();
        let outcome = self.outcome();
        let duration_ns = match (self.first_time, self.last_time) {
            (Some(a), Some(b)) => b.saturating_sub(a).max(0),
            _ => 0,
        };
        let mut summary = SessionSummary {
            user_intent,
            user_intent_seq,
            topic,
            outcome,
            decisions,
            pending_actions,
            open_questions: self.questions.clone(),
            key_facts: self.facts.clone(),
            tool_calls,
            artifacts: self.artifacts.clone(),
            context_health: ContextHealth {
                stale_artifacts: stale,
                missing_dependencies: self.missing_dependencies(),
                budget_remaining_tokens: budget,
            },
            truncated: self.truncation_note(),
            errors_and_anomalies: self.anomalies.clone(),
            unresolved_conflicts: self.conflicts.iter().map(|c| c.conflict.clone()).collect(),
            participants: self.participants.clone(),
            topics,
            prose: String::new(),
            covers_through_seq: self.last_seq,
            version: ctx.version,
            trigger: ctx.trigger,
            created_at: ctx.now,
            duration_seconds: u64::try_from(duration_ns / 1_000_000_000).unwrap_or(0),
            total_turns: self.total_turns,
            requires_human_review,
        };
        summary.prose = prose(&summary);
        summary
    }

    fn topic_segments(&self) -> (Vec<TopicSegment>, Vec<u32>) {
        let mut topics = self.topics.clone();
        let mut weights = self.topic_weights.clone();
        if let Some(open) = &self.open_topic {
            // Turns of an unconfirmed shift still belong to the open topic.
            let mut view = open.clone();
            for c in std::mem::take(&mut view.candidate) {
                view.absorb(c);
            }
            topics.push(view.segment());
            weights.push(view.substantive);
        }
        (topics, weights)
    }

    fn outcome(&self) -> Outcome {
        let open_actions = self
            .actions
            .iter()
            .filter(|a| a.status != ActionStatus::Done)
            .count();
        let open = open_actions + self.questions.len();
        let resolved =
            self.last_resolution_seq > 0 && self.last_resolution_seq >= self.last_complaint_seq;
        let closing = self
            .closing_conv_index
            .is_some_and(|c| self.conv_index.saturating_sub(c) <= 2);
        if resolved && open == 0 {
            Outcome::Resolved
        } else if !self.actions.is_empty() && open == 0 {
            Outcome::Completed
        } else if open > 0 && closing {
            Outcome::UnresolvedFollowUp
        } else {
            Outcome::InProgress
        }
    }

    /// Dependencies of open actions that nothing done satisfies: no DONE
    /// action, completion statement, successful tool or artifact covers at
    /// least half of the dependency's words (or names it).
    fn missing_dependencies(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in self
            .actions
            .iter()
            .filter(|a| a.status != ActionStatus::Done)
        {
            for d in &a.depends_on {
                let dw = rules::content_words(d);
                let lower = d.to_lowercase();
                let covered = |w: &BTreeSet<String>| rules::overlap(&dw, w) >= 0.5;
                let satisfied = dw.is_empty()
                    || self
                        .actions
                        .iter()
                        .filter(|x| x.status == ActionStatus::Done)
                        .any(|x| covered(&rules::content_words(&x.action)))
                    || self
                        .completions
                        .iter()
                        .any(|c| covered(&c.iter().cloned().collect()))
                    || self
                        .successful_tools
                        .iter()
                        .any(|t| covered(&tool_words(t)))
                    || self
                        .artifacts
                        .iter()
                        .any(|x| lower.contains(&x.artifact_id.to_lowercase()));
                if !satisfied && !out.contains(d) {
                    out.push(d.clone());
                }
            }
        }
        out
    }

    fn truncation_note(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.oversized_count > 0 {
            let listed: Vec<String> = self
                .oversized
                .iter()
                .map(|(s, b)| format!("turn {s} ({b} bytes)"))
                .collect();
            let more = self
                .oversized_count
                .saturating_sub(self.oversized.len() as u64);
            let tail = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            parts.push(format!(
                "only the first {MAX_ANALYSED_BYTES} bytes of {}{tail} were analysed",
                listed.join(", ")
            ));
        }
        for (section, n) in &self.dropped {
            parts.push(format!("{n} {section} not kept (bound reached)"));
        }
        parts.join("; ")
    }
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

fn topic_turn(seq: u64, conversational: bool, sentences: &[Classified<'_>]) -> TopicTurn {
    if !conversational {
        return TopicTurn {
            seq,
            words: Vec::new(),
            key_point: None,
        };
    }
    let mut words: Vec<(String, String)> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for c in sentences {
        for w in rules::words(c.text) {
            if rules::is_stopword(&w)
                || w.chars().count() < 3
                || w.chars().any(|c| c.is_ascii_digit())
            {
                continue;
            }
            let s = rules::stem(&w);
            if seen.insert(s.clone()) {
                words.push((s, w));
            }
        }
    }
    let mut best: Option<&Classified<'_>> = None;
    for c in sentences {
        if c.importance >= rules::KEY_POINT_IMPORTANCE
            && !c.cues.filler
            && best.is_none_or(|b| c.importance > b.importance)
        {
            best = Some(c);
        }
    }
    let key_point = best.map(|c| rules::clip(rules::trim_filler(c.text), rules::MAX_ITEM_CHARS));
    TopicTurn {
        seq,
        words,
        key_point,
    }
}

/// One to three sentences built only from the summary's items: the user's
/// intent (quoted), counts (in words, so no number appears that no turn
/// contains) and the most pressing open action or question (quoted).
fn prose(s: &SessionSummary) -> String {
    // Quotes end the sentence themselves when they end with a mark.
    let quoted = |text: &str| {
        let q = rules::clip(text, 200);
        let end = if q.ends_with(['.', '?', '!', '…']) {
            ""
        } else {
            "."
        };
        format!("\"{q}\"{end}")
    };
    let mut out: Vec<String> = Vec::new();
    if !s.user_intent.is_empty() {
        out.push(format!("The user asked: {}", quoted(&s.user_intent)));
    }
    let open = s
        .pending_actions
        .iter()
        .filter(|a| a.status != ActionStatus::Done)
        .count() as u64;
    let done = s.pending_actions.len() as u64 - open;
    let count = |n: u64, one: &str, many: &str| {
        (n > 0).then(|| {
            format!(
                "{} {}",
                rules::number_words(n),
                if n == 1 { one } else { many }
            )
        })
    };
    let mut counts: Vec<String> = [
        count(s.decisions.len() as u64, "decision", "decisions"),
        count(open, "open action", "open actions"),
        count(done, "done action", "done actions"),
        count(
            s.open_questions.len() as u64,
            "open question",
            "open questions",
        ),
        count(
            s.errors_and_anomalies.len() as u64,
            "tool error",
            "tool errors",
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let status = match s.outcome {
        Outcome::InProgress => "in progress",
        Outcome::Resolved => "resolved",
        Outcome::UnresolvedFollowUp => "unresolved, follow-up needed",
        Outcome::Completed => "completed",
    };
    out.push(match counts.pop() {
        None => format!("Status: {status}, nothing decided or pending."),
        Some(last) if counts.is_empty() => format!("Status: {status}, with {last}."),
        Some(last) => format!("Status: {status}, with {} and {last}.", counts.join(", ")),
    });
    let rank = |p: Priority| match p {
        Priority::High => 0,
        Priority::Medium => 1,
        Priority::Low => 2,
    };
    let pressing = s
        .pending_actions
        .iter()
        .filter(|a| a.status != ActionStatus::Done)
        .min_by_key(|a| rank(a.priority));
    if let Some(a) = pressing {
        out.push(format!(
            "Most pressing action ({}): {}",
            a.owner,
            quoted(&a.action)
        ));
    } else if let Some(q) = s.open_questions.first() {
        out.push(format!(
            "Open question from {}: {}",
            q.asked_by,
            quoted(&q.question)
        ));
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;
    use crate::model::Trigger;
    use crate::summarize::validate;

    /// 2026-03-17 10:00 UTC, a Tuesday.
    const T0: i64 = 1_773_741_600 * 1_000_000_000;

    fn turn(seq: u64, role: Role, speaker: &str, content: &str) -> Turn {
        Turn {
            seq,
            role,
            speaker: speaker.to_string(),
            content: content.to_string(),
            client_time: None,
            server_time: T0 + i64::try_from(seq).unwrap_or(0) * 30_000_000_000,
            tool_call: None,
            metadata: BTreeMap::new(),
            token_count: 1,
        }
    }

    fn tool(
        seq: u64,
        name: &str,
        args: &str,
        result: &str,
        status: ToolCallStatus,
        err: &str,
    ) -> Turn {
        let mut t = turn(seq, Role::Tool, name, "");
        t.tool_call = Some(ToolCall {
            tool_name: name.to_string(),
            arguments_json: args.to_string(),
            result: result.to_string(),
            status,
            error_details: err.to_string(),
        });
        t
    }

    fn ctx(high_risk: bool) -> SummaryContext {
        SummaryContext {
            context_limit_tokens: 1000,
            bundle_tokens: 300,
            trigger: Trigger::Requested,
            version: 3,
            now: T0 + 999,
            high_risk,
        }
    }

    fn summarize(turns: &[Turn], high_risk: bool) -> SessionSummary {
        let mut s = FoldState::default();
        s.fold(turns);
        s.render(&ctx(high_risk))
    }

    fn check_valid(turns: &[Turn], s: &SessionSummary) {
        let cited: BTreeMap<u64, Turn> = validate::cited_seqs(s)
            .into_iter()
            .filter_map(|q| turns.iter().find(|t| t.seq == q).map(|t| (q, t.clone())))
            .collect();
        let max = turns.last().map_or(0, |t| t.seq);
        if let Err(e) = validate::validate(s, &cited, max) {
            panic!("summary not valid: {e:#?}\n{s:#?}");
        }
    }

    fn billing() -> Vec<Turn> {
        vec![
            turn(1, Role::User, "customer-42", "Hi, I have a billing problem"),
            turn(
                2,
                Role::Assistant,
                "agent-a",
                "I'm sorry to hear that. What's the issue?",
            ),
            turn(
                3,
                Role::User,
                "customer-42",
                "I was charged twice for order ORD-9921, $49.99 each.",
            ),
            turn(
                4,
                Role::Assistant,
                "agent-a",
                "I'll check the payment log and get back to you by Friday.",
            ),
            tool(
                5,
                "get_payment_log",
                r#"{"order":"ORD-9921"}"#,
                "Two charges of $49.99 on card 4242; receipt at https://pay.example.com/r/77",
                ToolCallStatus::Success,
                "",
            ),
            turn(
                6,
                Role::Assistant,
                "agent-a",
                "I found the duplicate charge. Shall I refund $49.99 to your card?",
            ),
            turn(
                7,
                Role::User,
                "customer-42",
                "Yes proceed with the refund, confirmed.",
            ),
            turn(
                8,
                Role::Assistant,
                "agent-a",
                "The refund has been processed. It will appear in 3-5 business days.",
            ),
            turn(
                9,
                Role::User,
                "customer-42",
                "Thank you, that solves my issue.",
            ),
        ]
    }

    #[test]
    fn billing_dispute_end_to_end() {
        let turns = billing();
        let s = summarize(&turns, false);
        check_valid(&turns, &s);
        assert_eq!(s.user_intent, "I have a billing problem");
        assert_eq!(s.user_intent_seq, 1);
        assert_eq!(s.outcome, Outcome::Resolved, "{s:#?}");
        assert_eq!(s.participants.len(), 3);
        assert_eq!(s.participants[0].speaker, "customer-42");
        assert!(s
            .key_facts
            .iter()
            .any(|f| f.fact.contains("ORD-9921") && f.fact.contains("$49.99")));
        assert_eq!(s.pending_actions.len(), 1, "{:#?}", s.pending_actions);
        let a = &s.pending_actions[0];
        assert_eq!(a.owner, "agent-a");
        assert_eq!(a.deadline, "2026-03-20");
        assert_eq!(a.status, ActionStatus::Done);
        assert!(a.evidence_seqs.contains(&5));
        assert!(s.open_questions.is_empty(), "{:#?}", s.open_questions);
        assert_eq!(s.decisions.len(), 1);
        assert_eq!(s.tool_calls.len(), 1);
        assert_eq!(s.tool_calls[0].arguments_json, r#"{"order":"ORD-9921"}"#);
        assert!(s
            .artifacts
            .iter()
            .any(|x| x.artifact_id == "https://pay.example.com/r/77"));
        assert_eq!(s.context_health.budget_remaining_tokens, 700);
        assert_eq!(s.covers_through_seq, 9);
        assert_eq!(s.total_turns, 9);
        assert_eq!(s.duration_seconds, 240);
        assert_eq!(s.version, 3);
        assert_eq!(s.created_at, T0 + 999);
        assert!(s.truncated.is_empty());
        assert!(
            !s.prose.is_empty()
                && !s
                    .prose
                    .chars()
                    .any(|c| c.is_ascii_digit() && !s.user_intent.contains(c))
        );
    }

    #[test]
    fn high_risk_flags_irreversible_items() {
        let turns = billing();
        let s = summarize(&turns, true);
        assert!(s.requires_human_review);
        assert!(
            s.decisions.iter().any(|d| d.requires_human_review),
            "refund decision"
        );
        let low = summarize(&turns, false);
        assert!(!low.requires_human_review);
        assert!(low.decisions.iter().all(|d| !d.requires_human_review));
        let mut turns = billing();
        turns.push(tool(
            10,
            "issue_refund",
            "{}",
            "ok",
            ToolCallStatus::Success,
            "",
        ));
        let s = summarize(&turns, true);
        assert!(s
            .tool_calls
            .iter()
            .find(|t| t.seq == 10)
            .is_some_and(|t| t.requires_human_review));
    }

    #[test]
    fn tool_failures_timeouts_and_stale_artifacts() {
        let turns = vec![
            turn(1, Role::User, "u", "Please build the report for Q3."),
            tool(
                2,
                "fetch_sales",
                r#"{"q":3}"#,
                "",
                ToolCallStatus::Timeout,
                "deadline exceeded after 30s",
            ),
            tool(
                3,
                "fetch_sales",
                r#"{"q":3}"#,
                "",
                ToolCallStatus::Failure,
                "HTTP 503 from sales-api",
            ),
            tool(
                4,
                "write_file",
                r#"{"path":"out/q3.csv"}"#,
                "wrote out/q3.csv",
                ToolCallStatus::Success,
                "",
            ),
            tool(
                5,
                "write_file",
                r#"{"path":"out/q3.csv"}"#,
                "wrote out/q3.csv (v2)",
                ToolCallStatus::Success,
                "",
            ),
        ];
        let s = summarize(&turns, false);
        check_valid(&turns, &s);
        assert_eq!(
            s.errors_and_anomalies.len(),
            2,
            "{:#?}",
            s.errors_and_anomalies
        );
        assert_eq!(s.errors_and_anomalies[0].severity, Severity::Degraded);
        assert_eq!(s.errors_and_anomalies[1].severity, Severity::Blocking);
        assert!(s.errors_and_anomalies[1]
            .description
            .contains("HTTP 503 from sales-api"));
        assert_eq!(s.tool_calls[1].error_details, "HTTP 503 from sales-api");
        assert_eq!(s.artifacts.len(), 2);
        assert_eq!(s.artifacts[0].expiry_seq, 5);
        assert_eq!(s.artifacts[1].expiry_seq, 0);
        assert_eq!(
            s.context_health.stale_artifacts,
            vec!["out/q3.csv".to_string()]
        );

        // A later success of the tool downgrades the blocking failure.
        let mut more = turns.clone();
        more.push(tool(
            6,
            "fetch_sales",
            r#"{"q":3}"#,
            "rows: 120",
            ToolCallStatus::Success,
            "",
        ));
        let s = summarize(&more, false);
        assert!(s
            .errors_and_anomalies
            .iter()
            .all(|a| a.severity == Severity::Degraded));
    }

    #[test]
    fn result_summary_is_bounded_on_char_boundary() {
        let long = "é".repeat(300);
        let turns = vec![tool(1, "t", "{}", &long, ToolCallStatus::Success, "")];
        let s = summarize(&turns, false);
        assert!(s.tool_calls[0].result_summary.chars().count() <= MAX_RESULT_SUMMARY_CHARS);
    }

    #[test]
    fn meeting_owners_deadlines_decisions_and_reversal() {
        let turns = vec![
            turn(1, Role::User, "alice", "Good morning team."),
            turn(2, Role::User, "bob", "Morning! Let's plan the launch."),
            turn(
                3,
                Role::User,
                "alice",
                "We decided to use Postgres because it is cheaper to run.",
            ),
            turn(
                4,
                Role::User,
                "carol",
                "Actually, let's go with MySQL instead.",
            ),
            turn(
                5,
                Role::User,
                "alice",
                "Bob, can you send the deck by Friday? It's urgent.",
            ),
            turn(6, Role::User, "bob", "Sure, will do."),
            turn(
                7,
                Role::User,
                "carol",
                "I'll draft the announcement next Monday.",
            ),
            turn(8, Role::User, "alice", "When is the launch date?"),
        ];
        let s = summarize(&turns, false);
        check_valid(&turns, &s);
        assert_eq!(s.decisions.len(), 1, "{s:#?}");
        assert!(s.decisions[0].decision.contains("MySQL"));
        assert_eq!(s.unresolved_conflicts.len(), 1);
        assert_eq!(s.unresolved_conflicts[0].conflicting_seqs, vec![3, 4]);
        let deck = s
            .pending_actions
            .iter()
            .find(|a| a.action.contains("deck"))
            .expect("deck action");
        assert_eq!(deck.owner, "bob");
        assert_eq!(deck.deadline, "2026-03-20");
        assert_eq!(deck.priority, Priority::High);
        // "Will do" acknowledges (still PENDING, cited); "On it" would start it.
        assert_eq!(deck.status, ActionStatus::Pending);
        assert_eq!(deck.evidence_seqs, vec![5, 6]);
        let draft = s
            .pending_actions
            .iter()
            .find(|a| a.action.contains("draft"))
            .expect("draft");
        assert_eq!(draft.owner, "carol");
        assert_eq!(draft.deadline, "2026-03-23");
        assert_eq!(s.open_questions.len(), 1);
        assert_eq!(s.open_questions[0].asked_by, "alice");

        // Alice agrees with the reversal: the conflict is settled.
        let mut more = turns[..4].to_vec();
        more.push(turn(5, Role::User, "alice", "Agreed."));
        let s = summarize(&more, false);
        assert!(s.unresolved_conflicts.is_empty());
        assert_eq!(
            s.decisions[0].agreed_by,
            vec!["carol".to_string(), "alice".to_string()]
        );
    }

    #[test]
    fn same_speaker_reversal_is_no_conflict() {
        let turns = vec![
            turn(1, Role::User, "alice", "We'll use Redis for the cache."),
            turn(2, Role::User, "alice", "Scratch that."),
        ];
        let s = summarize(&turns, false);
        assert!(s.decisions.is_empty());
        assert!(s.unresolved_conflicts.is_empty());
    }

    #[test]
    fn questions_answered_partially_or_not() {
        let turns = vec![
            turn(
                1,
                Role::User,
                "u",
                "Which card was charged for the annual subscription renewal?",
            ),
            turn(2, Role::Assistant, "a", "Let me check."),
            turn(3, Role::User, "u", "Also, what is the refund policy?"),
            turn(
                4,
                Role::Assistant,
                "a",
                "Refunds are possible within 30 days under our policy.",
            ),
            turn(
                5,
                Role::Assistant,
                "a",
                "The renewal was on your card, I see it now.",
            ),
        ];
        let s = summarize(&turns, false);
        check_valid(&turns, &s);
        assert_eq!(s.open_questions.len(), 1, "{:#?}", s.open_questions);
        assert_eq!(
            s.open_questions[0].status,
            QuestionStatus::PartiallyAnswered
        );
        assert_eq!(s.open_questions[0].evidence_seqs, vec![1, 5]);
        assert_eq!(s.outcome, Outcome::InProgress);
    }

    #[test]
    fn annotations_win_over_heuristics() {
        let mut t1 = turn(1, Role::User, "u", "Ship it on Monday, probably");
        t1.metadata
            .insert(rules::ANNOTATION_KEY.into(), "decision".into());
        let mut t2 = turn(2, Role::Assistant, "a", "Budget for ACME-7 is tight");
        t2.metadata
            .insert(rules::ANNOTATION_KEY.into(), "open_question".into());
        let mut t3 = turn(3, Role::User, "u", "It is fine");
        t3.metadata.insert(rules::ANSWER_TO_KEY.into(), "2".into());
        let mut t4 = turn(4, Role::Assistant, "a", "Renew the TLS certificate");
        t4.metadata
            .insert(rules::ANNOTATION_KEY.into(), "pending_action".into());
        let mut t5 = turn(5, Role::User, "u", "Blue is the preferred colour");
        t5.metadata
            .insert(rules::ANNOTATION_KEY.into(), "fact".into());
        let turns = vec![t1, t2, t3, t4, t5];
        let s = summarize(&turns, false);
        check_valid(&turns, &s);
        assert_eq!(s.decisions[0].decision, "Ship it on Monday, probably");
        assert!(s.open_questions.is_empty(), "answered by annotation");
        assert_eq!(s.pending_actions[0].action, "Renew the TLS certificate");
        assert_eq!(s.pending_actions[0].owner, "a");
        assert_eq!(
            s.key_facts.last().map(|f| f.fact.as_str()),
            Some("Blue is the preferred colour")
        );
    }

    #[test]
    fn goodbye_with_open_items_needs_follow_up() {
        let turns = vec![
            turn(
                1,
                Role::User,
                "u",
                "My router keeps dropping the connection.",
            ),
            turn(
                2,
                Role::Assistant,
                "a",
                "I'll escalate this to the network team and follow up tomorrow.",
            ),
            turn(3, Role::User, "u", "Ok, thanks. Bye!"),
        ];
        let s = summarize(&turns, false);
        assert_eq!(s.outcome, Outcome::UnresolvedFollowUp);
        assert_eq!(s.pending_actions[0].deadline, "2026-03-18");
    }

    #[test]
    fn completed_when_all_actions_done() {
        let turns = vec![
            turn(1, Role::Assistant, "a", "Hello, how can I help?"),
            turn(
                2,
                Role::User,
                "u",
                "Please rotate the API keys for staging.",
            ),
            turn(
                3,
                Role::Assistant,
                "a",
                "Done, the API keys for staging are rotated.",
            ),
        ];
        let s = summarize(&turns, false);
        assert_eq!(s.pending_actions.len(), 1);
        assert_eq!(s.pending_actions[0].owner, "a");
        assert_eq!(s.pending_actions[0].status, ActionStatus::Done);
        assert_eq!(s.outcome, Outcome::Completed);
    }

    #[test]
    fn missing_dependencies_are_reported() {
        let turns = vec![
            turn(
                1,
                Role::Assistant,
                "a",
                "I'll send the invoice once the refund is approved by finance.",
            ),
            turn(
                2,
                Role::Assistant,
                "a",
                "I will publish the notes after the review meeting.",
            ),
            turn(3, Role::User, "u", "The review meeting is finished."),
        ];
        let s = summarize(&turns, false);
        check_valid(&turns, &s);
        assert_eq!(
            s.context_health.missing_dependencies,
            vec!["the refund is approved by finance".to_string()]
        );
    }

    #[test]
    fn oversized_turn_is_reported_in_truncated() {
        let big = "word ".repeat(MAX_ANALYSED_BYTES / 5 + 100);
        let turns = vec![turn(1, Role::User, "u", &big)];
        let s = summarize(&turns, false);
        assert!(s.truncated.contains("turn 1"), "{}", s.truncated);
    }

    #[test]
    fn topics_segment_on_lexical_shift() {
        let turns = vec![
            turn(
                1,
                Role::User,
                "u",
                "My invoice shows a wrong billing amount for March.",
            ),
            turn(
                2,
                Role::Assistant,
                "a",
                "I see the billing amount on the invoice is wrong.",
            ),
            turn(
                3,
                Role::User,
                "u",
                "Please correct the invoice billing amount.",
            ),
            turn(
                4,
                Role::Assistant,
                "a",
                "The invoice billing amount is corrected now.",
            ),
            turn(
                5,
                Role::User,
                "u",
                "Separately, how do I change my shipping address for deliveries?",
            ),
            turn(
                6,
                Role::Assistant,
                "a",
                "You can change the shipping address for deliveries under settings.",
            ),
            turn(
                7,
                Role::User,
                "u",
                "Great, the shipping address settings page works.",
            ),
        ];
        let s = summarize(&turns, false);
        check_valid(&turns, &s);
        assert_eq!(s.topics.len(), 2, "{:#?}", s.topics);
        assert_eq!((s.topics[0].first_seq, s.topics[0].last_seq), (1, 4));
        assert_eq!((s.topics[1].first_seq, s.topics[1].last_seq), (5, 7));
        assert!(s.topics[0].topic.contains("invoice") || s.topics[0].topic.contains("billing"));
        assert!(s.topics[1].topic.contains("shipping") || s.topics[1].topic.contains("address"));
    }

    #[test]
    fn refolding_old_seqs_is_ignored() {
        let turns = billing();
        let mut a = FoldState::default();
        a.fold(&turns);
        let mut b = a.clone();
        b.fold(&turns[3..]);
        assert_eq!(a, b);
    }

    // -- the incremental property ------------------------------------------------

    /// xorshift64*: small, seeded, deterministic.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: usize) -> usize {
            usize::try_from(self.next() % n as u64).unwrap_or(0)
        }
    }

    const LINES: &[&str] = &[
        "Hi there!",
        "Hello, I have a problem with order ORD-{n}.",
        "I was charged twice, ${n}.99 each time.",
        "What is the status of my refund?",
        "When will the deck for project {n} be ready?",
        "I'll check the payment log and get back to you by Friday.",
        "Bob, can you send the report by tomorrow?",
        "@alice please review PR-{n} when you can.",
        "We decided to use Postgres because it is cheaper.",
        "Actually, let's go with MySQL instead.",
        "Scratch that.",
        "Agreed.",
        "Done.",
        "The refund has been processed.",
        "Thanks, that solves my issue.",
        "Sure, will do.",
        "Waiting for the bank to confirm the transfer.",
        "Email me at user{n}@example.com please.",
        "See https://status.example.com/incident/{n} for details.",
        "Bye!",
        "Next step is to migrate the database in 3 days.",
        "It was the Visa card ending {n}.",
        "This is urgent, please fix the login bug ASAP.",
        "The payment log shows two charges on 2026-03-{d}.",
        "Can you tell me your order number?",
        "My order number is ORD-{n}.",
        "ok",
        "I will deploy v{n}.2 to production on March {d}.",
        "Let me check the shipping address.",
        "The shipping address is 12 Oak Street.",
    ];

    fn random_session(rng: &mut Rng) -> Vec<Turn> {
        let speakers = [
            ("user-1", Role::User),
            ("agent", Role::Assistant),
            ("bob", Role::User),
            ("alice", Role::User),
        ];
        let tools = ["search_orders", "issue_refund", "get_payment_log"];
        let statuses = [
            ToolCallStatus::Success,
            ToolCallStatus::Failure,
            ToolCallStatus::Timeout,
            ToolCallStatus::Success,
        ];
        let n = 1 + rng.below(30);
        let mut turns = Vec::with_capacity(n);
        for seq in 1..=u64::try_from(n).unwrap_or(1) {
            let num = 1000 + rng.below(9000);
            let day = 10 + rng.below(18);
            if rng.below(6) == 0 {
                let name = tools[rng.below(tools.len())];
                let args = format!("{{\"order\":\"ORD-{}\"}}", 1000 + rng.below(3));
                let result =
                    format!("Found ORD-{num} in file-{num}.txt at https://x.example.com/{num}");
                let status = statuses[rng.below(statuses.len())];
                let err = if status == ToolCallStatus::Success {
                    ""
                } else {
                    "upstream 502"
                };
                turns.push(tool(seq, name, &args, &result, status, err));
                continue;
            }
            let (speaker, role) = speakers[rng.below(speakers.len())];
            let k = 1 + rng.below(3);
            let mut content = Vec::new();
            for _ in 0..k {
                let line = LINES[rng.below(LINES.len())]
                    .replace("{n}", &num.to_string())
                    .replace("{d}", &day.to_string());
                content.push(line);
            }
            let mut t = turn(seq, role, speaker, &content.join(" "));
            t.client_time = (rng.below(3) == 0)
                .then(|| T0 + i64::try_from(seq).unwrap_or(0) * 86_400_000_000_000);
            match rng.below(12) {
                0 => {
                    let kinds = ["decision", "pending_action", "open_question", "fact"];
                    t.metadata.insert(
                        rules::ANNOTATION_KEY.into(),
                        kinds[rng.below(kinds.len())].into(),
                    );
                }
                1 if seq > 1 => {
                    t.metadata.insert(
                        rules::ANSWER_TO_KEY.into(),
                        (1 + rng.below(usize::try_from(seq - 1).unwrap_or(1))).to_string(),
                    );
                }
                _ => {}
            }
            turns.push(t);
        }
        turns
    }

    #[test]
    fn folding_in_two_parts_equals_folding_at_once() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..100 {
            let turns = random_session(&mut rng);
            let mut whole = FoldState::default();
            whole.fold(&turns);
            let expected = whole.render(&ctx(true));
            check_valid(&turns, &expected);
            for k in 0..=turns.len() {
                let mut part = FoldState::default();
                part.fold(&turns[..k]);
                // The state is stored between folds: it must survive JSON.
                let json = serde_json::to_string(&part).expect("state serializes");
                let mut part: FoldState = serde_json::from_str(&json).expect("state deserializes");
                // Re-sending an overlap must not matter either.
                part.fold(&turns[k.saturating_sub(2)..]);
                assert_eq!(part, whole, "split at {k}");
                assert_eq!(part.render(&ctx(true)), expected);
            }
        }
    }

    #[test]
    fn state_stays_bounded_in_long_sessions() {
        let mut rng = Rng(42);
        let mut state = FoldState::default();
        let mut seq = 0;
        for _ in 0..120 {
            let mut turns = random_session(&mut rng);
            for t in &mut turns {
                seq += 1;
                t.seq = seq;
            }
            state.fold(&turns);
        }
        assert!(state.facts.len() <= MAX_FACTS);
        assert!(state.actions.len() <= MAX_ACTIONS);
        assert!(state.questions.len() <= MAX_OPEN_QUESTIONS);
        assert!(state.decisions.len() <= MAX_DECISIONS);
        assert!(state.artifacts.len() <= MAX_ARTIFACTS);
        assert!(state.completions.len() <= MAX_COMPLETIONS_KEPT);
        let s = state.render(&ctx(false));
        assert_eq!(s.covers_through_seq, seq);
        assert!(s
            .topics
            .iter()
            .all(|t| t.key_points.len() <= MAX_KEY_POINTS_PER_TOPIC));
    }
}
