//! What the model is asked and what it may answer: the instructions (in
//! our own words, from the seed designs' constraints), the JSON schema of
//! the answer, the turns as the model sees them, and the conversion of the
//! answer into summary items. The model writes intent, decisions, pending
//! actions, open questions, key facts, conflicts and prose; everything
//! else (tool log, errors, artifacts, participants, topics, counts) comes
//! from the turns through the rule-based fold.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::redact::{Placeholders, Redactor};
use crate::model::Encoding;
use crate::model::{
    ActionStatus, Conflict, Decision, KeyFact, OpenQuestion, PendingAction, Priority,
    QuestionStatus, SessionSummary, Turn,
};
use crate::summarize::engine;
use crate::summarize::rules;
use crate::tokens;

/// The instructions.
pub const SYSTEM: &str = "You maintain the running summary of a conversation between people, \
agents and tools, so that an agent can continue it without rereading it. You receive the \
summary so far (JSON, possibly empty) and the next turns, each written as [#seq] role speaker: text. \
Return the updated summary as one JSON object with exactly the fields of the schema.\n\
Rules:\n\
- Use only what the turns say. Never invent a tool result, a value, a name, a date or a commitment. \
Unknown stays empty.\n\
- Copy identifiers, amounts, dates, error codes, file paths and names exactly as written, including \
placeholders such as ⟦EMAIL_1⟧; never make up a placeholder.\n\
- Every item cites the seqs of the turns it comes from in `turns`; cite only seqs you were shown.\n\
- Write each item's text with words taken from its cited turns.\n\
- A pending action is a commitment or request still to be done, with its owner (a speaker or a person \
named in the turn, else \"unassigned\") and a deadline as YYYY-MM-DD only when a turn states one.\n\
- A decision is something the participants settled; open questions are substantive questions nobody \
has answered yet. Leave out greetings, thanks, backchannels and small talk.\n\
- Keep earlier items that still hold; drop actions that were completed and questions that were answered.\n\
- `prose` is two to four plain sentences a colleague would write.";

/// The items the model writes, as the schema names them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelItems {
    /// What the user or the meeting wants.
    pub user_intent: String,
    /// The turn stating it (0: none).
    pub user_intent_turn: u64,
    /// Decisions.
    pub decisions: Vec<DecisionItem>,
    /// Pending actions.
    pub pending_actions: Vec<ActionItem>,
    /// Open questions.
    pub open_questions: Vec<QuestionItem>,
    /// Key facts.
    pub key_facts: Vec<FactItem>,
    /// Conflicts between turns.
    pub conflicts: Vec<ConflictItem>,
    /// A few sentences.
    pub prose: String,
}

/// A decision.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DecisionItem {
    /// What was decided.
    pub decision: String,
    /// Why, as the turns say.
    pub rationale: String,
    /// Who agreed.
    pub agreed_by: Vec<String>,
    /// Cited seqs.
    pub turns: Vec<u64>,
}

/// A pending action.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ActionItem {
    /// What is to be done.
    pub action: String,
    /// Who does it.
    pub owner: String,
    /// YYYY-MM-DD or empty.
    pub deadline: String,
    /// Cited seqs.
    pub turns: Vec<u64>,
}

/// An open question.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QuestionItem {
    /// The question.
    pub question: String,
    /// Who asked.
    pub asked_by: String,
    /// Cited seqs.
    pub turns: Vec<u64>,
}

/// A key fact.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FactItem {
    /// The fact.
    pub fact: String,
    /// Who stated it.
    pub stated_by: String,
    /// Cited seqs.
    pub turns: Vec<u64>,
}

/// A conflict.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConflictItem {
    /// What conflicts.
    pub description: String,
    /// The turns that disagree.
    pub turns: Vec<u64>,
}

/// Most names in one `agreed_by`.
pub const MAX_AGREED_BY: usize = 16;

/// The item limits of the schema, mnemo's own: a longer list in an
/// answer is a runaway, refused.
pub const LIMITS: [(&str, usize); 5] = [
    ("decisions", engine::MAX_DECISIONS),
    ("pending_actions", engine::MAX_ACTIONS),
    ("open_questions", engine::MAX_OPEN_QUESTIONS),
    ("key_facts", engine::MAX_FACTS),
    ("conflicts", engine::MAX_CONFLICTS),
];

fn limit(field: &str) -> usize {
    LIMITS
        .iter()
        .find(|(f, _)| *f == field)
        .map_or(0, |(_, n)| *n)
}

/// The JSON schema of [`ModelItems`] (strict: every field required),
/// every array bounded by mnemo's own limits, so a server that constrains
/// its output to the schema cannot count on forever. Strings carry no
/// `maxLength`: llama.cpp turns one into that many nested grammar rules,
/// and at 2000 its grammar parser gives up and llama-cpp-python's server
/// dies; `max_tokens` bounds them instead.
pub fn schema() -> Value {
    let text = json!({"type": "string"});
    let strings = json!({"type": "array", "items": text, "maxItems": MAX_AGREED_BY});
    let seqs = json!({"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": engine::MAX_EVIDENCE_SEQS});
    let object = |props: Value| {
        let required: Vec<String> = props
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    };
    let list = |field: &str, props: Value| json!({"type": "array", "items": object(props), "maxItems": limit(field)});
    object(json!({
        "user_intent": text,
        "user_intent_turn": {"type": "integer", "minimum": 0},
        "decisions": list("decisions", json!({"decision": text, "rationale": text, "agreed_by": strings, "turns": seqs})),
        "pending_actions": list("pending_actions", json!({"action": text, "owner": text, "deadline": text, "turns": seqs})),
        "open_questions": list("open_questions", json!({"question": text, "asked_by": text, "turns": seqs})),
        "key_facts": list("key_facts", json!({"fact": text, "stated_by": text, "turns": seqs})),
        "conflicts": list("conflicts", json!({"description": text, "turns": seqs})),
        "prose": text,
    }))
}

/// The answer's shape in words, for servers that do not constrain their
/// output to a schema (it goes in the prompt).
pub const SHAPE: &str = "Answer with one JSON object and nothing else, with exactly these fields \
(TEXT is a string, SEQS a list of the turn numbers an item comes from; lists hold as many items as \
the turns give, or none):\n\
{\"user_intent\": TEXT, \"user_intent_turn\": SEQ, \
\"decisions\": [{\"decision\": TEXT, \"rationale\": TEXT, \"agreed_by\": [TEXT], \"turns\": SEQS}], \
\"pending_actions\": [{\"action\": TEXT, \"owner\": TEXT, \"deadline\": \"YYYY-MM-DD or empty\", \"turns\": SEQS}], \
\"open_questions\": [{\"question\": TEXT, \"asked_by\": TEXT, \"turns\": SEQS}], \
\"key_facts\": [{\"fact\": TEXT, \"stated_by\": TEXT, \"turns\": SEQS}], \
\"conflicts\": [{\"description\": TEXT, \"turns\": SEQS}], \"prose\": TEXT}";

/// Tokens of an answer's fixed part (field names, brackets).
const SKELETON_TOKENS: usize = 120;
/// Tokens an answer may spend per new turn (items citing it, prose).
const TOKENS_PER_TURN: usize = 60;

/// `max_tokens` for one call: the summary so far must be written again,
/// plus room for what the new turns add, at most `cap` (config).
pub fn max_tokens(so_far: &ModelItems, new_turns: usize, cap: u32) -> u32 {
    let so_far_tokens = serde_json::to_string(so_far)
        .map(|j| tokens::count(Encoding::Cl100kBase, &j))
        .unwrap_or(0);
    let want = SKELETON_TOKENS + so_far_tokens + TOKENS_PER_TURN * new_turns;
    u32::try_from(want).unwrap_or(u32::MAX).min(cap)
}

impl ModelItems {
    /// Whether the answer says next to nothing: no intent, no item and at
    /// most a few words of prose (the model's empty starting state).
    pub fn is_near_empty(&self) -> bool {
        self.user_intent.trim().is_empty()
            && self.decisions.is_empty()
            && self.pending_actions.is_empty()
            && self.open_questions.is_empty()
            && self.key_facts.is_empty()
            && self.conflicts.is_empty()
            && self.prose.split_whitespace().count() < 5
    }

    /// What in the answer breaks the schema's bounds (a runaway list, a
    /// citation list past mnemo's limit), if anything.
    pub fn over_limits(&self) -> Option<String> {
        let counts = [
            self.decisions.len(),
            self.pending_actions.len(),
            self.open_questions.len(),
            self.key_facts.len(),
            self.conflicts.len(),
        ];
        for ((field, max), n) in LIMITS.iter().zip(counts) {
            if n > *max {
                return Some(format!("{field} lists {n} items; the limit is {max}"));
            }
        }
        let cites = self
            .decisions
            .iter()
            .map(|d| &d.turns)
            .chain(self.pending_actions.iter().map(|a| &a.turns))
            .chain(self.open_questions.iter().map(|q| &q.turns))
            .chain(self.key_facts.iter().map(|f| &f.turns))
            .chain(self.conflicts.iter().map(|c| &c.turns));
        for turns in cites {
            if turns.len() > engine::MAX_EVIDENCE_SEQS {
                return Some(format!(
                    "an item cites {} turns; the limit is {}",
                    turns.len(),
                    engine::MAX_EVIDENCE_SEQS
                ));
            }
        }
        None
    }

    /// The model-written part of a stored summary, to continue from.
    pub fn of(s: &SessionSummary) -> ModelItems {
        ModelItems {
            user_intent: s.user_intent.clone(),
            user_intent_turn: s.user_intent_seq,
            decisions: s
                .decisions
                .iter()
                .map(|d| DecisionItem {
                    decision: d.decision.clone(),
                    rationale: d.rationale.clone(),
                    agreed_by: d.agreed_by.clone(),
                    turns: d.evidence_seqs.clone(),
                })
                .collect(),
            pending_actions: s
                .pending_actions
                .iter()
                .map(|a| ActionItem {
                    action: a.action.clone(),
                    owner: a.owner.clone(),
                    deadline: a.deadline.clone(),
                    turns: a.evidence_seqs.clone(),
                })
                .collect(),
            open_questions: s
                .open_questions
                .iter()
                .map(|q| QuestionItem {
                    question: q.question.clone(),
                    asked_by: q.asked_by.clone(),
                    turns: q.evidence_seqs.clone(),
                })
                .collect(),
            key_facts: s
                .key_facts
                .iter()
                .map(|f| FactItem {
                    fact: f.fact.clone(),
                    stated_by: f.stated_by.clone(),
                    turns: f.evidence_seqs.clone(),
                })
                .collect(),
            conflicts: s
                .unresolved_conflicts
                .iter()
                .map(|c| ConflictItem {
                    description: c.description.clone(),
                    turns: c.conflicting_seqs.clone(),
                })
                .collect(),
            prose: s.prose.clone(),
        }
    }

    /// `base` (the rule-based summary: tool log, errors, counts) with the
    /// model's items in place of its own.
    pub fn apply(self, mut base: SessionSummary) -> SessionSummary {
        let sorted = |mut v: Vec<u64>| {
            v.sort_unstable();
            v.dedup();
            v
        };
        base.user_intent = self.user_intent;
        base.user_intent_seq = self.user_intent_turn;
        base.decisions = self
            .decisions
            .into_iter()
            .map(|d| Decision {
                decision: d.decision,
                rationale: d.rationale,
                agreed_by: d.agreed_by,
                evidence_seqs: sorted(d.turns),
                requires_human_review: false,
            })
            .collect();
        base.pending_actions = self
            .pending_actions
            .into_iter()
            .map(|a| PendingAction {
                action: a.action,
                owner: if a.owner.trim().is_empty() {
                    "unassigned".to_owned()
                } else {
                    a.owner
                },
                deadline: a.deadline,
                status: ActionStatus::Pending,
                depends_on: Vec::new(),
                priority: Priority::Medium,
                evidence_seqs: sorted(a.turns),
                requires_human_review: false,
            })
            .collect();
        base.open_questions = self
            .open_questions
            .into_iter()
            .map(|q| OpenQuestion {
                question: q.question,
                asked_by: q.asked_by,
                status: QuestionStatus::Unanswered,
                evidence_seqs: sorted(q.turns),
            })
            .collect();
        base.key_facts = self
            .key_facts
            .into_iter()
            .map(|f| KeyFact {
                fact: f.fact,
                stated_by: f.stated_by,
                evidence_seqs: sorted(f.turns),
            })
            .collect();
        base.unresolved_conflicts = self
            .conflicts
            .into_iter()
            .map(|c| Conflict {
                description: c.description,
                conflicting_seqs: sorted(c.turns),
            })
            .collect();
        base.prose = self.prose;
        base
    }
}

/// A turn as the model reads it, redacted.
fn turn_line(t: &Turn, redactor: Option<&Redactor>, names: &mut Placeholders) -> String {
    let mut text = t.content.clone();
    if let Some(tc) = &t.tool_call {
        text.push_str(&format!(
            " [tool call {} {}",
            tc.tool_name, tc.arguments_json
        ));
        if !tc.result.is_empty() {
            text.push_str(&format!(" → {}", tc.result));
        }
        if !tc.error_details.is_empty() {
            text.push_str(&format!(" error: {}", tc.error_details));
        }
        text.push(']');
    }
    let date = rules::format_day(rules::day_of(t.client_time.unwrap_or(t.server_time)));
    let line = format!("[#{}] ({date}) {:?} {}: {text}", t.seq, t.role, t.speaker);
    match redactor {
        Some(r) => r.redact(&line, names),
        None => line,
    }
}

/// The user message: the summary so far and the turns, and, on a retry,
/// what was wrong with the previous answer.
pub fn user_message(
    previous: &ModelItems,
    turns: &[Turn],
    redactor: Option<&Redactor>,
    names: &mut Placeholders,
    violations: &[String],
) -> String {
    let so_far = serde_json::to_string(previous).unwrap_or_else(|_| "{}".to_owned());
    let so_far = match redactor {
        Some(r) => r.redact(&so_far, names),
        None => so_far,
    };
    let mut out = format!("Summary so far:\n{so_far}\n\nNext turns:\n");
    for t in turns {
        out.push_str(&turn_line(t, redactor, names));
        out.push('\n');
    }
    if !violations.is_empty() {
        out.push_str("\nYour previous answer was refused because:\n");
        for v in violations {
            // A violation may quote personal data: it is redacted too.
            let v = match redactor {
                Some(r) => r.redact(v, names),
                None => v.clone(),
            };
            out.push_str("- ");
            out.push_str(&v);
            out.push('\n');
        }
        out.push_str(
            "Answer again, fixing these, with words and values from the cited turns only.\n",
        );
    }
    out
}
