//! The faithfulness check every summary passes before it is stored.
//!
//! A summary is faithful when every seq it cites exists in the session and
//! was provided, every identifier, number, date, amount, email and URL in
//! an item's text appears verbatim in one of *that item's* cited turns,
//! tool-call entries match their turns exactly, deadlines are dates a cited
//! turn states or implies, names are speakers of (or named in) cited turns,
//! and the prose, intent and topic labels contain no such token that the
//! cited turns lack. The check reads only the summary and the cited turns
//! (see [`cited_seqs`]), never the whole transcript, and returns every
//! problem it finds, each naming the field and the offending value.

use std::collections::{BTreeMap, BTreeSet};

use super::engine::UNASSIGNED;
use super::rules::{self, Entity, EntityKind};
use crate::model::SessionSummary;
use crate::model::Turn;

/// Every seq the summary cites: item evidence, tool-call, artifact (and
/// expiry), anomaly and conflict seqs, topic bounds and key-point seqs,
/// and the turn of the user intent. Load these turns to call [`validate`].
pub fn cited_seqs(s: &SessionSummary) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    out.extend(
        s.decisions
            .iter()
            .flat_map(|d| d.evidence_seqs.iter().copied()),
    );
    out.extend(
        s.pending_actions
            .iter()
            .flat_map(|a| a.evidence_seqs.iter().copied()),
    );
    out.extend(
        s.open_questions
            .iter()
            .flat_map(|q| q.evidence_seqs.iter().copied()),
    );
    out.extend(
        s.key_facts
            .iter()
            .flat_map(|f| f.evidence_seqs.iter().copied()),
    );
    out.extend(s.tool_calls.iter().map(|t| t.seq));
    out.extend(s.artifacts.iter().map(|a| a.seq));
    out.extend(s.artifacts.iter().map(|a| a.expiry_seq).filter(|&e| e != 0));
    out.extend(s.errors_and_anomalies.iter().map(|a| a.seq));
    out.extend(
        s.unresolved_conflicts
            .iter()
            .flat_map(|c| c.conflicting_seqs.iter().copied()),
    );
    for t in &s.topics {
        out.insert(t.first_seq);
        out.insert(t.last_seq);
        out.extend(t.evidence_seqs.iter().copied());
    }
    if s.user_intent_seq != 0 {
        out.insert(s.user_intent_seq);
    }
    out
}

/// Checks that `s` is faithful to the turns it cites. `cited` must hold
/// (at least) the turns of [`cited_seqs`]; `max_seq` is the session's last
/// seq. On failure, returns one message per problem.
pub fn validate(
    s: &SessionSummary,
    cited: &BTreeMap<u64, Turn>,
    max_seq: u64,
) -> Result<(), Vec<String>> {
    let mut v = Check {
        cited,
        max_seq,
        errors: Vec::new(),
    };
    v.check(s);
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(v.errors)
    }
}

/// Dropped-item entries a summary names one by one; past it, one entry
/// counts the rest.
pub const MAX_DROPPED_LISTED: usize = 20;

/// Rounds [`prune`] runs: a dropped action can leave a dependency in
/// `context_health` that the next round removes.
const PRUNE_ROUNDS: usize = 4;

/// What [`prune`] dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// Items dropped.
    pub count: usize,
    /// One entry per item (field, text, why), at most
    /// [`MAX_DROPPED_LISTED`], the last one counting the rest.
    pub items: Vec<String>,
}

/// The words `truncated` uses for dropped items: "2 items dropped by the
/// faithfulness check: …".
pub const DROPPED_NOTE: &str = "dropped by the faithfulness check";

/// Makes a rule-based summary pass [`validate`] by dropping what fails:
/// each item (decision, action, question, fact, tool call, artifact,
/// anomaly, conflict, topic) the validator names is removed; a summary
/// field it names (intent, topic) is emptied; `context_health` keeps only
/// dependencies of remaining actions and remaining stale artifacts; the
/// prose is written again from what remains with `prose`. The summary
/// says so in `truncated` ("N items dropped by the faithfulness check:
/// …", [`DROPPED_NOTE`]), listing each removed item (field, text, why; at
/// most [`MAX_DROPPED_LISTED`] entries, then a count); the same list is
/// returned for the audit.
/// `Err` holds the violations that dropping cannot mend (e.g. a summary
/// covering turns the session does not have); then `s` must not be
/// stored. A model's summary is not pruned: it keeps the gate (a retry,
/// then the rules' summary).
pub fn prune(
    s: &mut SessionSummary,
    cited: &BTreeMap<u64, Turn>,
    max_seq: u64,
    prose: impl Fn(&SessionSummary) -> String,
) -> Result<Dropped, Vec<String>> {
    let mut dropped: Vec<String> = Vec::new();
    let mut last = Vec::new();
    let (mut prose_failed, mut clear_prose) = (false, false);
    for _ in 0..PRUNE_ROUNDS {
        let errors = match validate(s, cited, max_seq) {
            Ok(()) => {
                let count = dropped.len();
                if count > MAX_DROPPED_LISTED {
                    dropped.truncate(MAX_DROPPED_LISTED - 1);
                    dropped.push(format!(
                        "and {} more items",
                        count - (MAX_DROPPED_LISTED - 1)
                    ));
                }
                if count > 0 {
                    if !s.truncated.is_empty() {
                        s.truncated.push_str("; ");
                    }
                    s.truncated.push_str(&format!(
                        "{count} {} {DROPPED_NOTE}: {}",
                        if count == 1 { "item" } else { "items" },
                        dropped.join(" | ")
                    ));
                }
                return Ok(Dropped {
                    count,
                    items: dropped,
                });
            }
            Err(e) => e,
        };
        // Per item, why; items removed highest index first so the
        // indexes the messages name stay valid.
        let mut items: BTreeMap<(String, usize), Vec<String>> = BTreeMap::new();
        let mut fields: BTreeSet<String> = BTreeSet::new();
        for e in &errors {
            let why = e.split_once(": ").map_or(e.as_str(), |(_, why)| why);
            match located(e) {
                Some(Place::Item(section, i)) => items
                    .entry((section.to_string(), i))
                    .or_default()
                    .push(why.to_string()),
                Some(Place::Field(f)) => {
                    fields.insert(f.to_string());
                }
                None => return Err(errors),
            }
        }
        for ((section, i), why) in items.iter().rev() {
            match drop_item(s, section, *i) {
                Some(text) => dropped.push(format!(
                    "{section}: \"{}\" ({})",
                    rules::clip(&text, 80),
                    why.join("; ")
                )),
                None => return Err(errors),
            }
        }
        for f in fields {
            match f.as_str() {
                "user_intent" | "user_intent_seq" => {
                    s.user_intent.clear();
                    s.user_intent_seq = 0;
                }
                "topic" => s.topic.clear(),
                // Written again from what remains once; failing again, it
                // goes.
                "prose" if prose_failed => clear_prose = true,
                "prose" => prose_failed = true,
                // Recomputed below from what remains.
                "context_health.missing_dependencies" | "context_health.stale_artifacts" => {}
                _ => return Err(errors),
            }
        }
        s.context_health
            .missing_dependencies
            .retain(|d| s.pending_actions.iter().any(|a| a.depends_on.contains(d)));
        let stale: BTreeSet<&str> = s
            .artifacts
            .iter()
            .filter(|a| a.expiry_seq != 0)
            .map(|a| a.artifact_id.as_str())
            .collect();
        s.context_health
            .stale_artifacts
            .retain(|a| stale.contains(a.as_str()));
        s.requires_human_review = s.decisions.iter().any(|d| d.requires_human_review)
            || s.pending_actions.iter().any(|a| a.requires_human_review)
            || s.tool_calls.iter().any(|t| t.requires_human_review);
        s.prose = if clear_prose { String::new() } else { prose(s) };
        last = errors;
    }
    Err(last)
}

/// Where a violation lies: an item of a list, or a field of the summary.
#[derive(Debug, PartialEq, Eq)]
enum Place<'a> {
    Item(&'a str, usize),
    Field(&'a str),
}

/// The place a violation message names (its path, before the first
/// ": "): `decisions[3].decision` is item 3 of `decisions`; `prose` a
/// field.
fn located(message: &str) -> Option<Place<'_>> {
    let path = message.split_once(": ").map_or(message, |(p, _)| p);
    match path.split_once('[') {
        Some((section, rest)) => {
            let i = rest.split_once(']')?.0.parse().ok()?;
            Some(Place::Item(section, i))
        }
        None => Some(Place::Field(path)),
    }
}

/// Removes item `i` of `section`; returns its text (`None`: no such item).
fn drop_item(s: &mut SessionSummary, section: &str, i: usize) -> Option<String> {
    fn take<T>(v: &mut Vec<T>, i: usize, text: impl Fn(&T) -> String) -> Option<String> {
        (i < v.len()).then(|| text(&v.remove(i)))
    }
    match section {
        "decisions" => take(&mut s.decisions, i, |d| d.decision.clone()),
        "pending_actions" => take(&mut s.pending_actions, i, |a| a.action.clone()),
        "open_questions" => take(&mut s.open_questions, i, |q| q.question.clone()),
        "key_facts" => take(&mut s.key_facts, i, |f| f.fact.clone()),
        "tool_calls" => take(&mut s.tool_calls, i, |t| t.tool_name.clone()),
        "artifacts" => take(&mut s.artifacts, i, |a| a.artifact_id.clone()),
        "errors_and_anomalies" => take(&mut s.errors_and_anomalies, i, |a| a.description.clone()),
        "unresolved_conflicts" => take(&mut s.unresolved_conflicts, i, |c| c.description.clone()),
        "topics" => take(&mut s.topics, i, |t| t.topic.clone()),
        _ => None,
    }
}

struct Check<'a> {
    cited: &'a BTreeMap<u64, Turn>,
    max_seq: u64,
    errors: Vec<String>,
}

/// Everything of a turn a summary may quote: content, speaker and the tool
/// call's fields.
fn haystack(t: &Turn) -> String {
    let mut h = format!("{}\n{}", t.content, t.speaker);
    if let Some(tc) = &t.tool_call {
        for part in [
            &tc.tool_name,
            &tc.arguments_json,
            &tc.result,
            &tc.error_details,
        ] {
            h.push('\n');
            h.push_str(part);
        }
    }
    h
}

fn kind_name(k: EntityKind) -> &'static str {
    match k {
        EntityKind::Url => "URL",
        EntityKind::Email => "email",
        EntityKind::Amount => "amount",
        EntityKind::Date => "date",
        EntityKind::Number => "number",
        EntityKind::Identifier => "identifier",
        EntityKind::Path => "file name",
        EntityKind::Code => "identifier",
    }
}

impl Check<'_> {
    fn err(&mut self, msg: String) {
        self.errors.push(msg);
    }

    /// A seq must be in 1..=max_seq and its turn provided. Returns whether
    /// it is usable.
    fn seq(&mut self, path: &str, seq: u64) -> bool {
        if seq == 0 || seq > self.max_seq {
            self.err(format!(
                "{path}: seq {seq} is out of range 1..={}",
                self.max_seq
            ));
            false
        } else if !self.cited.contains_key(&seq) {
            self.err(format!(
                "{path}: seq {seq} is cited but its turn was not provided"
            ));
            false
        } else {
            true
        }
    }

    /// An item's evidence: non-empty, each seq valid. Returns the usable ones.
    fn evidence(&mut self, path: &str, seqs: &[u64]) -> Vec<u64> {
        if seqs.is_empty() {
            self.err(format!("{path}: cites no turn"));
        }
        seqs.iter()
            .copied()
            .filter(|&q| self.seq(path, q))
            .collect()
    }

    fn turns(&self, seqs: &[u64]) -> Vec<&Turn> {
        seqs.iter().filter_map(|q| self.cited.get(q)).collect()
    }

    /// Every entity of `text` must appear verbatim in one of the turns.
    fn text(&mut self, path: &str, text: &str, seqs: &[u64]) {
        if text.is_empty() {
            return;
        }
        let hay: Vec<String> = self.turns(seqs).into_iter().map(haystack).collect();
        let mut missing: Vec<Entity<'_>> = Vec::new();
        for e in rules::entities(text) {
            if !hay.iter().any(|h| h.contains(e.text)) && !missing.contains(&e) {
                missing.push(e);
            }
        }
        for e in missing {
            self.err(format!(
                "{path}: {} \"{}\" appears in none of its cited turns {seqs:?}",
                kind_name(e.kind),
                e.text
            ));
        }
    }

    /// A speaker name must be the speaker of a cited turn.
    fn speaker(&mut self, path: &str, name: &str, seqs: &[u64]) {
        if !self
            .turns(seqs)
            .iter()
            .any(|t| rules::speaker_of(t) == name)
        {
            self.err(format!(
                "{path}: \"{name}\" is not the speaker of any cited turn {seqs:?}"
            ));
        }
    }

    /// An owner is "unassigned", a cited turn's speaker, or named in one
    /// (any case; names are resolved to participant ids).
    fn owner(&mut self, path: &str, name: &str, seqs: &[u64]) {
        if name == UNASSIGNED {
            return;
        }
        let lower = name.to_lowercase();
        let ok = self
            .turns(seqs)
            .iter()
            .any(|t| rules::speaker_of(t) == name || t.content.to_lowercase().contains(&lower))
            || self.cited.values().any(|t| rules::speaker_of(t) == name);
        if !ok {
            self.err(format!("{path}: owner \"{name}\" is neither a speaker nor named in its cited turns {seqs:?}"));
        }
    }

    /// A deadline is empty, or a date a cited turn states or implies.
    fn deadline(&mut self, path: &str, deadline: &str, seqs: &[u64]) {
        if deadline.is_empty() {
            return;
        }
        let ok = self.turns(seqs).iter().any(|t| {
            t.content.contains(deadline)
                || rules::deadlines(&t.content, rules::turn_time(t))
                    .iter()
                    .any(|d| d == deadline)
        });
        if !ok {
            self.err(format!("{path}: deadline \"{deadline}\" is not stated or implied by its cited turns {seqs:?}"));
        }
    }

    fn check(&mut self, s: &SessionSummary) {
        if s.covers_through_seq > self.max_seq {
            self.err(format!(
                "covers_through_seq: seq {} is out of range 1..={}",
                s.covers_through_seq, self.max_seq
            ));
        }
        let all: Vec<u64> = self.cited.keys().copied().collect();

        if s.user_intent_seq != 0 {
            if self.seq("user_intent_seq", s.user_intent_seq) {
                self.text("user_intent", &s.user_intent, &[s.user_intent_seq]);
            }
        } else if !s.user_intent.is_empty() {
            self.err("user_intent: has no source turn (user_intent_seq is 0)".to_string());
        }
        self.text("topic", &s.topic, &all);
        self.text("prose", &s.prose, &all);

        for (i, d) in s.decisions.iter().enumerate() {
            let p = format!("decisions[{i}]");
            let ev = self.evidence(&format!("{p}.evidence_seqs"), &d.evidence_seqs);
            self.text(&format!("{p}.decision"), &d.decision, &ev);
            self.text(&format!("{p}.rationale"), &d.rationale, &ev);
            for (k, a) in d.agreed_by.iter().enumerate() {
                self.speaker(&format!("{p}.agreed_by[{k}]"), a, &ev);
            }
        }
        for (i, a) in s.pending_actions.iter().enumerate() {
            let p = format!("pending_actions[{i}]");
            let ev = self.evidence(&format!("{p}.evidence_seqs"), &a.evidence_seqs);
            self.text(&format!("{p}.action"), &a.action, &ev);
            self.owner(&format!("{p}.owner"), &a.owner, &ev);
            self.deadline(&format!("{p}.deadline"), &a.deadline, &ev);
            for (k, d) in a.depends_on.iter().enumerate() {
                let ok = self
                    .turns(&ev)
                    .iter()
                    .any(|t| t.content.contains(d.as_str()));
                if !ok {
                    self.err(format!(
                        "{p}.depends_on[{k}]: \"{d}\" is not in its cited turns {ev:?}"
                    ));
                }
            }
        }
        for (i, q) in s.open_questions.iter().enumerate() {
            let p = format!("open_questions[{i}]");
            let ev = self.evidence(&format!("{p}.evidence_seqs"), &q.evidence_seqs);
            self.text(&format!("{p}.question"), &q.question, &ev);
            self.speaker(&format!("{p}.asked_by"), &q.asked_by, &ev);
        }
        for (i, f) in s.key_facts.iter().enumerate() {
            let p = format!("key_facts[{i}]");
            let ev = self.evidence(&format!("{p}.evidence_seqs"), &f.evidence_seqs);
            self.text(&format!("{p}.fact"), &f.fact, &ev);
            self.speaker(&format!("{p}.stated_by"), &f.stated_by, &ev);
        }
        for (i, t) in s.tool_calls.iter().enumerate() {
            let p = format!("tool_calls[{i}]");
            if !self.seq(&format!("{p}.seq"), t.seq) {
                continue;
            }
            let Some(tc) = self.cited.get(&t.seq).and_then(|x| x.tool_call.as_ref()) else {
                self.err(format!("{p}: turn {} has no tool call", t.seq));
                continue;
            };
            let mut diffs = Vec::new();
            if t.tool_name != tc.tool_name {
                diffs.push("tool_name");
            }
            if t.arguments_json != tc.arguments_json {
                diffs.push("arguments_json");
            }
            if t.error_details != tc.error_details {
                diffs.push("error_details");
            }
            if t.status != tc.status {
                diffs.push("status");
            }
            if !tc
                .result
                .trim()
                .starts_with(t.result_summary.trim_end_matches('…'))
            {
                diffs.push("result_summary");
            }
            for d in diffs {
                self.err(format!(
                    "{p}.{d}: differs from the tool call of turn {}",
                    t.seq
                ));
            }
        }
        for (i, a) in s.artifacts.iter().enumerate() {
            let p = format!("artifacts[{i}]");
            if !self.seq(&format!("{p}.seq"), a.seq) {
                continue;
            }
            if a.expiry_seq != 0 {
                self.seq(&format!("{p}.expiry_seq"), a.expiry_seq);
            }
            let source = self.cited.get(&a.seq).and_then(|x| x.tool_call.as_ref());
            match source {
                Some(tc) if tc.result.contains(a.artifact_id.as_str()) => {
                    if tc.tool_name != a.source_tool {
                        self.err(format!(
                            "{p}.source_tool: \"{}\" did not make turn {}",
                            a.source_tool, a.seq
                        ));
                    }
                }
                _ => self.err(format!(
                    "{p}.artifact_id: \"{}\" is not in the tool result of turn {}",
                    a.artifact_id, a.seq
                )),
            }
            self.text(&format!("{p}.summary"), &a.summary, &[a.seq]);
        }
        for (i, a) in s.errors_and_anomalies.iter().enumerate() {
            let p = format!("errors_and_anomalies[{i}]");
            if self.seq(&format!("{p}.seq"), a.seq) {
                self.text(&format!("{p}.description"), &a.description, &[a.seq]);
            }
        }
        for (i, c) in s.unresolved_conflicts.iter().enumerate() {
            let p = format!("unresolved_conflicts[{i}]");
            let ev = self.evidence(&format!("{p}.conflicting_seqs"), &c.conflicting_seqs);
            self.text(&format!("{p}.description"), &c.description, &ev);
        }
        for (i, t) in s.topics.iter().enumerate() {
            let p = format!("topics[{i}]");
            let a = self.seq(&format!("{p}.first_seq"), t.first_seq);
            let b = self.seq(&format!("{p}.last_seq"), t.last_seq);
            if a && b && t.first_seq > t.last_seq {
                self.err(format!(
                    "{p}: first_seq {} is after last_seq {}",
                    t.first_seq, t.last_seq
                ));
            }
            for &q in &t.evidence_seqs {
                if q < t.first_seq || q > t.last_seq {
                    self.err(format!("{p}.evidence_seqs: seq {q} is outside the segment"));
                }
            }
            let ev: Vec<u64> = t
                .evidence_seqs
                .iter()
                .copied()
                .filter(|&q| self.seq(&format!("{p}.evidence_seqs"), q))
                .collect();
            if !t.key_points.is_empty() && ev.is_empty() {
                self.err(format!("{p}.key_points: cite no turn"));
            }
            for (k, kp) in t.key_points.iter().enumerate() {
                self.text(&format!("{p}.key_points[{k}]"), kp, &ev);
            }
            self.text(&format!("{p}.topic"), &t.topic, &ev);
        }

        let stale: BTreeSet<&str> = s
            .artifacts
            .iter()
            .filter(|a| a.expiry_seq != 0)
            .map(|a| a.artifact_id.as_str())
            .collect();
        for id in &s.context_health.stale_artifacts {
            if !stale.contains(id.as_str()) {
                self.err(format!(
                    "context_health.stale_artifacts: \"{id}\" is no stale artifact"
                ));
            }
        }
        for d in &s.context_health.missing_dependencies {
            if !s.pending_actions.iter().any(|a| a.depends_on.contains(d)) {
                self.err(format!(
                    "context_health.missing_dependencies: \"{d}\" is no action's dependency"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ActionStatus, KeyFact, PendingAction, Priority, Trigger};
    use crate::model::{Role, ToolCall, ToolCallStatus};
    use crate::summarize::{summarize, SummaryContext};

    const T0: i64 = 1_773_741_600 * 1_000_000_000;

    fn turn(seq: u64, role: Role, speaker: &str, content: &str) -> Turn {
        Turn {
            seq,
            role,
            speaker: speaker.to_string(),
            content: content.to_string(),
            client_time: None,
            server_time: T0 + i64::try_from(seq).unwrap_or(0) * 1_000_000_000,
            tool_call: None,
            metadata: BTreeMap::new(),
            token_count: 1,
        }
    }

    fn session() -> Vec<Turn> {
        let mut tool = turn(4, Role::Tool, "lookup", "");
        tool.tool_call = Some(ToolCall {
            tool_name: "lookup_order".into(),
            arguments_json: r#"{"id":"ORD-9921"}"#.into(),
            result: "ORD-9921: 2 charges of $49.99, invoice inv-77.pdf".into(),
            status: ToolCallStatus::Success,
            error_details: String::new(),
        });
        vec![
            turn(
                1,
                Role::User,
                "cust",
                "I was charged twice for ORD-9921, $49.99 each. Email me at a@b.com",
            ),
            turn(2, Role::Assistant, "agent", "I'll refund $49.99 by Friday."),
            turn(3, Role::User, "cust", "What about the fee on 2026-03-01?"),
            tool,
        ]
    }

    fn ctx() -> SummaryContext {
        SummaryContext {
            namespace: String::new(),
            context_limit_tokens: 100,
            bundle_tokens: 10,
            trigger: Trigger::Requested,
            version: 1,
            now: T0,
            high_risk: false,
            wait_free: false,
        }
    }

    fn cited_of(s: &SessionSummary, turns: &[Turn]) -> BTreeMap<u64, Turn> {
        cited_seqs(s)
            .into_iter()
            .filter_map(|q| turns.iter().find(|t| t.seq == q).map(|t| (q, t.clone())))
            .collect()
    }

    fn faithful() -> (SessionSummary, Vec<Turn>) {
        let turns = session();
        (summarize(&turns, &ctx()), turns)
    }

    fn errors(s: &SessionSummary, turns: &[Turn]) -> Vec<String> {
        validate(s, &cited_of(s, turns), 4)
            .err()
            .unwrap_or_default()
    }

    #[test]
    fn faithful_summary_passes() {
        let (s, turns) = faithful();
        assert!(!s.key_facts.is_empty() && !s.pending_actions.is_empty());
        assert_eq!(validate(&s, &cited_of(&s, &turns), 4), Ok(()));
        assert!(cited_seqs(&s).contains(&4));
    }

    #[test]
    fn invented_amount_fails_naming_it() {
        let (mut s, turns) = faithful();
        s.key_facts[0].fact = s.key_facts[0].fact.replace("$49.99", "$59.99");
        let e = errors(&s, &turns);
        assert!(
            e.iter()
                .any(|m| m.contains("key_facts[0].fact") && m.contains("\"$59.99\"")),
            "{e:?}"
        );
    }

    #[test]
    fn invented_order_id_fails_naming_it() {
        let (mut s, turns) = faithful();
        s.pending_actions[0].action = "Refund ORD-1234".to_string();
        let e = errors(&s, &turns);
        assert!(
            e.iter()
                .any(|m| m.contains("pending_actions[0].action") && m.contains("\"ORD-1234\"")),
            "{e:?}"
        );
        // The id exists in the session but not in this item's cited turn.
        let (mut s, turns) = faithful();
        s.pending_actions[0].action = "Refund ORD-9921".to_string();
        assert!(!errors(&s, &turns).is_empty());
    }

    #[test]
    fn out_of_range_seq_fails_naming_it() {
        let (mut s, turns) = faithful();
        s.key_facts.push(KeyFact {
            fact: "x".into(),
            stated_by: "cust".into(),
            evidence_seqs: vec![99],
        });
        let e = errors(&s, &turns);
        assert!(
            e.iter().any(|m| m.contains("seq 99 is out of range 1..=4")),
            "{e:?}"
        );
        let (mut s, turns) = faithful();
        s.tool_calls[0].seq = 0;
        assert!(errors(&s, &turns)
            .iter()
            .any(|m| m.contains("tool_calls[0].seq: seq 0")));
    }

    #[test]
    fn missing_cited_turn_fails() {
        let (s, turns) = faithful();
        let mut cited = cited_of(&s, &turns);
        cited.remove(&1);
        let e = validate(&s, &cited, 4).expect_err("turn 1 missing");
        assert!(
            e.iter()
                .any(|m| m.contains("seq 1 is cited but its turn was not provided")),
            "{e:?}"
        );
    }

    #[test]
    fn tool_call_must_match_exactly() {
        let (mut s, turns) = faithful();
        s.tool_calls[0].arguments_json = r#"{"id":"ORD-9922"}"#.into();
        s.tool_calls[0].result_summary = "something else".into();
        let e = errors(&s, &turns);
        assert!(
            e.iter().any(|m| m.contains("tool_calls[0].arguments_json")),
            "{e:?}"
        );
        assert!(
            e.iter().any(|m| m.contains("tool_calls[0].result_summary")),
            "{e:?}"
        );
    }

    #[test]
    fn deadlines_owners_speakers_and_prose_are_checked() {
        let (mut s, turns) = faithful();
        assert_eq!(s.pending_actions[0].deadline, "2026-03-20");
        s.pending_actions.push(PendingAction {
            action: "I'll refund $49.99 by Friday.".into(),
            owner: "mallory".into(),
            deadline: "2026-04-01".into(),
            status: ActionStatus::Pending,
            depends_on: vec!["nothing said".into()],
            priority: Priority::Medium,
            evidence_seqs: vec![2],
            requires_human_review: false,
        });
        s.key_facts[0].stated_by = "agent".into();
        s.prose.push_str(" Refund ref RF-555.");
        let e = errors(&s, &turns);
        for needle in [
            "pending_actions[1].owner",
            "pending_actions[1].deadline: deadline \"2026-04-01\"",
            "pending_actions[1].depends_on[0]",
            "key_facts[0].stated_by",
            "prose: identifier \"RF-555\"",
        ] {
            assert!(e.iter().any(|m| m.contains(needle)), "{needle}: {e:?}");
        }
    }

    #[test]
    fn artifacts_must_come_from_their_tool_result() {
        let (mut s, turns) = faithful();
        assert!(
            s.artifacts.iter().any(|a| a.artifact_id == "inv-77.pdf"),
            "{:?}",
            s.artifacts
        );
        s.artifacts[0].artifact_id = "inv-78.pdf".into();
        s.context_health.stale_artifacts.push("ghost".into());
        let e = errors(&s, &turns);
        assert!(
            e.iter()
                .any(|m| m.contains("artifacts[0].artifact_id") && m.contains("inv-78.pdf")),
            "{e:?}"
        );
        assert!(e.iter().any(|m| m.contains("\"ghost\"")), "{e:?}");
    }

    fn rules_prose(s: &SessionSummary) -> String {
        crate::summarize::engine::prose(s)
    }

    #[test]
    fn prune_drops_what_fails_names_it_and_keeps_the_rest() {
        let (mut s, turns) = faithful();
        let actions = s.pending_actions.len();
        let decisions = s.decisions.len();
        // An action whose amount no cited turn holds, with a dependency
        // only it has, and a dependency no action has.
        s.pending_actions.push(PendingAction {
            action: "I'll refund $59.99 by Friday.".into(),
            owner: "agent".into(),
            deadline: String::new(),
            status: ActionStatus::Pending,
            depends_on: vec!["I'll refund".into()],
            priority: Priority::Medium,
            evidence_seqs: vec![2],
            requires_human_review: false,
        });
        s.context_health.missing_dependencies.extend([
            "I'll refund".to_string(),
            "is that we use different colours".into(),
        ]);
        s.prose.push_str(" Ref RF-555.");
        let cited = cited_of(&s, &turns);
        assert!(validate(&s, &cited, 4).is_err());
        let dropped = prune(&mut s, &cited, 4, rules_prose).expect("prunable");
        assert_eq!(dropped.count, 1);
        assert_eq!(validate(&s, &cited, 4), Ok(()));
        assert_eq!(s.pending_actions.len(), actions);
        assert_eq!(s.decisions.len(), decisions);
        assert!(s.context_health.missing_dependencies.is_empty());
        assert!(!s.prose.contains("RF-555"), "{}", s.prose);
        let named = &dropped.items;
        assert_eq!(named.len(), 1, "{named:?}");
        assert!(
            named[0].starts_with("pending_actions: \"I'll refund $59.99 by Friday.\"")
                && named[0].contains("\"$59.99\" appears in none of its cited turns"),
            "{named:?}"
        );
        assert!(
            s.truncated
                .ends_with(&format!("1 item {DROPPED_NOTE}: {}", named[0])),
            "{}",
            s.truncated
        );
    }

    #[test]
    fn prune_refuses_what_dropping_cannot_mend() {
        let (mut s, turns) = faithful();
        s.covers_through_seq = 9;
        let cited = cited_of(&s, &turns);
        let e = prune(&mut s, &cited, 4, rules_prose).expect_err("not prunable");
        assert!(
            e.iter().any(|m| m.starts_with("covers_through_seq")),
            "{e:?}"
        );
    }

    #[test]
    fn prune_lists_at_most_the_bound_then_counts() {
        let (mut s, turns) = faithful();
        let bad = s.key_facts[0].clone();
        for k in 0..30 {
            let mut f = bad.clone();
            f.fact = format!("Order ORD-{k:04} was charged.");
            s.key_facts.push(f);
        }
        let cited = cited_of(&s, &turns);
        let dropped = prune(&mut s, &cited, 4, rules_prose).expect("prunable");
        assert_eq!(dropped.count, 30);
        assert!(s
            .truncated
            .contains("30 items dropped by the faithfulness check"));
        let named = &dropped.items;
        assert_eq!(named.len(), MAX_DROPPED_LISTED);
        assert_eq!(named.last().map(String::as_str), Some("and 11 more items"));
        assert_eq!(validate(&s, &cited, 4), Ok(()));
    }

    #[test]
    fn every_violation_names_its_place() {
        for (m, place) in [
            (
                "decisions[3].decision: x",
                Some(Place::Item("decisions", 3)),
            ),
            (
                "pending_actions[1].depends_on[0]: \"d\" is not in",
                Some(Place::Item("pending_actions", 1)),
            ),
            (
                "tool_calls[0]: turn 4 has no tool call",
                Some(Place::Item("tool_calls", 0)),
            ),
            ("prose: identifier \"X-1\"", Some(Place::Field("prose"))),
            (
                "context_health.missing_dependencies: \"a: b\" is no",
                Some(Place::Field("context_health.missing_dependencies")),
            ),
            ("topics[x].topic: y", None),
        ] {
            assert_eq!(located(m), place, "{m}");
        }
    }
}
