//! Renderings of a summary for people and prompts: JSON (field names equal
//! to the proto's) and Markdown with the sections support teams expect:
//! Issues Reported, Decisions Made, Actions Taken, Pending Follow-Up, Open
//! Questions. Renderings only rearrange the summary's own items.

use std::fmt::Write as _;

use crate::model::ToolCallStatus;
use crate::model::{
    ActionStatus, Decision, KeyFact, OpenQuestion, Outcome, PendingAction, Priority,
    SessionSummary, Severity,
};

/// The summary as pretty JSON.
pub fn json(s: &SessionSummary) -> String {
    // Serializing plain data (strings, numbers, enums) cannot fail.
    serde_json::to_string_pretty(s).unwrap_or_default()
}

/// How a session ended, in words.
pub fn outcome(o: Outcome) -> &'static str {
    match o {
        Outcome::InProgress => "in progress",
        Outcome::Resolved => "resolved",
        Outcome::UnresolvedFollowUp => "unresolved, follow-up needed",
        Outcome::Completed => "completed",
    }
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Blocking => "Blocking",
        Severity::Degraded => "Degraded",
        Severity::Warning => "Warning",
    }
}

fn priority(p: Priority) -> &'static str {
    match p {
        Priority::High => "high priority",
        Priority::Medium => "medium priority",
        Priority::Low => "low priority",
    }
}

/// An action's status, in words.
pub fn status(s: ActionStatus) -> &'static str {
    match s {
        ActionStatus::Pending => "pending",
        ActionStatus::InProgress => "in progress",
        ActionStatus::Done => "done",
    }
}

fn seqs(v: &[u64]) -> String {
    let list: Vec<String> = v.iter().map(|s| format!("#{s}")).collect();
    format!("[{}]", list.join(", "))
}

/// The summary as Markdown.
pub fn markdown(s: &SessionSummary) -> String {
    let mut out = String::new();
    // `write!` into a String cannot fail.
    let _ = writeln!(
        out,
        "## Session summary (v{}, turns 1–{})",
        s.version, s.covers_through_seq
    );
    if !s.prose.is_empty() {
        let _ = writeln!(out, "\n{}", s.prose);
    }
    if !s.user_intent.is_empty() {
        let _ = writeln!(out, "\n**User intent:** {}", s.user_intent);
    }
    let _ = writeln!(out, "**Outcome:** {}", outcome(s.outcome));

    let _ = writeln!(out, "\n### Issues Reported");
    let mut any = false;
    if !s.user_intent.is_empty() {
        let _ = writeln!(out, "- {} [#{}]", s.user_intent, s.user_intent_seq);
        any = true;
    }
    for e in &s.errors_and_anomalies {
        let _ = writeln!(
            out,
            "- {}: {} [#{}]",
            severity(e.severity),
            e.description,
            e.seq
        );
        any = true;
    }
    for c in &s.unresolved_conflicts {
        let _ = writeln!(
            out,
            "- Conflict: {} {}",
            c.description,
            seqs(&c.conflicting_seqs)
        );
        any = true;
    }
    if !any {
        let _ = writeln!(out, "- None");
    }

    if !s.key_facts.is_empty() {
        let _ = writeln!(out, "\n### Key Facts");
        for f in &s.key_facts {
            let _ = writeln!(out, "{}", fact_line(f));
        }
    }

    let _ = writeln!(out, "\n### Decisions Made");
    if s.decisions.is_empty() {
        let _ = writeln!(out, "- None");
    }
    for d in &s.decisions {
        let _ = writeln!(out, "{}", decision_line(d));
    }

    let _ = writeln!(out, "\n### Actions Taken");
    let done: Vec<_> = s
        .pending_actions
        .iter()
        .filter(|a| a.status == ActionStatus::Done)
        .collect();
    let ok_tools: Vec<_> = s
        .tool_calls
        .iter()
        .filter(|t| t.status == ToolCallStatus::Success)
        .collect();
    if done.is_empty() && ok_tools.is_empty() {
        let _ = writeln!(out, "- None");
    }
    for a in done {
        let _ = writeln!(
            out,
            "- {} ({}) {}",
            a.action,
            a.owner,
            seqs(&a.evidence_seqs)
        );
    }
    for t in ok_tools {
        let _ = writeln!(
            out,
            "- `{}({})` → {} [#{}]",
            t.tool_name, t.arguments_json, t.result_summary, t.seq
        );
    }

    let _ = writeln!(out, "\n### Pending Follow-Up");
    let pending: Vec<_> = s
        .pending_actions
        .iter()
        .filter(|a| a.status != ActionStatus::Done)
        .collect();
    if pending.is_empty() {
        let _ = writeln!(out, "- None");
    }
    for a in pending {
        let _ = writeln!(out, "{}", action_line(a));
    }

    let _ = writeln!(out, "\n### Open Questions");
    if s.open_questions.is_empty() {
        let _ = writeln!(out, "- None");
    }
    for q in &s.open_questions {
        let _ = writeln!(out, "{}", question_line(q));
    }
    if !s.truncated.is_empty() {
        let _ = writeln!(out, "\n_Not fully covered: {}_", s.truncated);
    }
    out
}

/// A pending action as one Markdown list item.
pub fn action_line(a: &PendingAction) -> String {
    let due = if a.deadline.is_empty() {
        String::new()
    } else {
        format!(", due {}", a.deadline)
    };
    let after = if a.depends_on.is_empty() {
        String::new()
    } else {
        format!(", after {}", a.depends_on.join(", "))
    };
    format!(
        "- {} (owner {}{due}{after}, {}, {}) {}",
        a.action,
        a.owner,
        priority(a.priority),
        status(a.status),
        seqs(&a.evidence_seqs)
    )
}

/// A decision as one Markdown list item.
pub fn decision_line(d: &Decision) -> String {
    let why = match d.rationale.as_str() {
        "" => String::new(),
        r if r.to_lowercase().starts_with("because") => format!(" — {r}"),
        r => format!(" — because {r}"),
    };
    format!("- {}{why} {}", d.decision, seqs(&d.evidence_seqs))
}

/// An open question as one Markdown list item.
pub fn question_line(q: &OpenQuestion) -> String {
    format!(
        "- {} (asked by {}) {}",
        q.question,
        q.asked_by,
        seqs(&q.evidence_seqs)
    )
}

/// A key fact as one Markdown list item.
pub fn fact_line(f: &KeyFact) -> String {
    format!("- {} ({}) {}", f.fact, f.stated_by, seqs(&f.evidence_seqs))
}
