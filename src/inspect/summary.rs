//! A session's summary as the inspector shows it: every item with links
//! to the turns it cites, the versions, and a diff between two versions
//! (items added and removed, compared section by section).

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use axum::extract::{Path, Query, State};
use maud::{html, Markup};
use serde::Deserialize;

use super::layout::{self, cites, page, session_url, PageError, PageResult};
use super::Inspector;
use crate::pb;

/// A session's summary version `version` (0 = latest); `None` when the
/// session has none yet.
pub async fn fetch(
    inspector: &Inspector,
    ns: &str,
    id: &str,
    version: u64,
) -> Result<Option<pb::SessionSummary>, tonic::Status> {
    let r = inspector
        .client()
        .get_summary(pb::GetSummaryRequest {
            namespace: ns.to_owned(),
            session_id: id.to_owned(),
            version,
            format: pb::SummaryFormat::Structured as i32,
        })
        .await;
    match r {
        Ok(r) => Ok(r.into_inner().summary),
        Err(s) if s.code() == tonic::Code::NotFound && version == 0 => {
            // Either no summary yet or no session: tell them apart.
            inspector
                .client()
                .get_session(pb::GetSessionRequest {
                    namespace: ns.to_owned(),
                    session_id: id.to_owned(),
                })
                .await?;
            Ok(None)
        }
        Err(s) => Err(s),
    }
}

fn enum_name<E: TryFrom<i32>>(v: i32, as_str: impl Fn(&E) -> &'static str, prefix: &str) -> String {
    layout::name(E::try_from(v).ok().as_ref().map(as_str), prefix)
}

/// The summary panel of a session's page.
pub fn panel(
    ns: &str,
    id: &str,
    s: Option<&pb::SessionSummary>,
    versions: &[pb::SummaryInfo],
    on_page: RangeInclusive<u64>,
) -> Markup {
    let c = |seqs: &[u64]| cites(ns, id, seqs, on_page.clone());
    let Some(s) = s else {
        return html! { h2 { "Summary" } p.muted #summary { "No summary yet." } };
    };
    let base = session_url(ns, id);
    html! {
        h2 { "Summary v" (s.version) " " span.muted { "(" (layout::trigger(s.trigger)) ", turns 1–" (s.covers_through_seq) ", " (layout::time(&s.created_at)) ")" } }
        div #summary {
            @if !s.user_intent.is_empty() {
                p.summary-item { strong { "Intent: " } (s.user_intent) @if s.user_intent_seq > 0 { (c(&[s.user_intent_seq])) } }
            }
            @if !s.topic.is_empty() { p { strong { "Topic: " } (s.topic) } }
            p { strong { "Outcome: " } (enum_name(s.outcome, pb::Outcome::as_str_name, "OUTCOME_")) }
            @if !s.prose.is_empty() { p { (s.prose) } }
            @if !s.truncated.is_empty() { p.err { "Truncated: " (s.truncated) } }
            @if s.requires_human_review { p { span.badge.failure { "needs human review" } } }
            h3 { "Pending actions" }
            @if s.pending_actions.is_empty() { p.muted { "None." } } @else {
                table #pending-actions {
                    thead { tr { th { "Action" } th { "Owner" } th { "Deadline" } th { "Status" } th { "Turns" } } }
                    tbody { @for a in &s.pending_actions {
                        tr.summary-item {
                            td { (a.action) @if a.requires_human_review { " " span.badge.failure { "review" } } }
                            td { (a.owner) }
                            td { (a.deadline) }
                            td { (enum_name(a.status, pb::ActionStatus::as_str_name, "ACTION_STATUS_")) " · " (enum_name(a.priority, pb::ActionPriority::as_str_name, "ACTION_PRIORITY_")) }
                            td { (c(&a.evidence_seqs)) }
                        }
                    } }
                }
            }
            h3 { "Open questions" }
            @if s.open_questions.is_empty() { p.muted { "None." } }
            ul #open-questions { @for q in &s.open_questions {
                li.summary-item { (q.question) span.muted { " — " (q.asked_by) ", " (enum_name(q.status, pb::QuestionStatus::as_str_name, "QUESTION_STATUS_")) } (c(&q.evidence_seqs)) }
            } }
            h3 { "Decisions" }
            @if s.decisions.is_empty() { p.muted { "None." } }
            ul #decisions { @for d in &s.decisions {
                li.summary-item { (d.decision) @if !d.rationale.is_empty() { span.muted { " — because " (d.rationale) } } (c(&d.evidence_seqs)) }
            } }
            h3 { "Key facts" }
            @if s.key_facts.is_empty() { p.muted { "None." } }
            ul #key-facts { @for f in &s.key_facts {
                li.summary-item { (f.fact) span.muted { " — " (f.stated_by) } (c(&f.evidence_seqs)) }
            } }
            @if !s.errors_and_anomalies.is_empty() {
                h3 { "Errors and anomalies" }
                ul { @for e in &s.errors_and_anomalies {
                    li.summary-item.err { (enum_name(e.severity, pb::Severity::as_str_name, "SEVERITY_")) ": " (e.description) (c(&[e.seq])) }
                } }
            }
            @if !s.unresolved_conflicts.is_empty() {
                h3 { "Unresolved conflicts" }
                ul { @for k in &s.unresolved_conflicts { li.summary-item { (k.description) (c(&k.conflicting_seqs)) } } }
            }
            @if !s.tool_calls.is_empty() {
                h3 { "Tool calls" }
                ul { @for t in &s.tool_calls {
                    li.summary-item { code { (t.tool_name) } " " (enum_name(t.status, pb::ToolCallStatus::as_str_name, "TOOL_CALL_STATUS_")) @if !t.error_details.is_empty() { span.err { " " (t.error_details) } } (c(&[t.seq])) }
                } }
            }
            @if s.topics.len() > 1 {
                h3 { "Topics" }
                ul { @for t in &s.topics { li.summary-item { (t.topic) span.muted { " (turns " (t.first_seq) "–" (t.last_seq) ")" } (c(&t.evidence_seqs)) } } }
            }
        }
        h3 { "Versions" }
        table #versions {
            thead { tr { th { "Version" } th { "Trigger" } th { "Covers" } th { "Items" } th {} } }
            tbody { @for v in versions {
                tr {
                    td { a href={(base) "?v=" (v.version)} { "v" (v.version) } }
                    td { (layout::trigger(v.trigger)) }
                    td { "1–" (v.covers_through_seq) }
                    td { (v.decisions) " d · " (v.pending_actions) " a · " (v.open_questions) " q" }
                    td { @if v.version > 1 { a.diff-link href={(base) "/diff?a=" (v.version - 1) "&b=" (v.version)} { "diff vs v" (v.version - 1) } } }
                }
            } }
        }
    }
}

/// Every item of a summary as one line with its section, for diffing.
fn lines(s: &pb::SessionSummary) -> Vec<String> {
    let mut out = vec![
        format!("intent: {}", s.user_intent),
        format!("topic: {}", s.topic),
        format!(
            "outcome: {}",
            enum_name(s.outcome, pb::Outcome::as_str_name, "OUTCOME_")
        ),
        format!("prose: {}", s.prose),
    ];
    out.extend(
        s.decisions
            .iter()
            .map(|d| format!("decision: {}", d.decision)),
    );
    out.extend(s.pending_actions.iter().map(|a| {
        format!(
            "action: {} (owner {}, deadline {}, {})",
            a.action,
            a.owner,
            a.deadline,
            enum_name(a.status, pb::ActionStatus::as_str_name, "ACTION_STATUS_")
        )
    }));
    out.extend(
        s.open_questions
            .iter()
            .map(|q| format!("question: {}", q.question)),
    );
    out.extend(s.key_facts.iter().map(|f| format!("fact: {}", f.fact)));
    out.extend(
        s.errors_and_anomalies
            .iter()
            .map(|e| format!("error: {}", e.description)),
    );
    out.extend(
        s.unresolved_conflicts
            .iter()
            .map(|c| format!("conflict: {}", c.description)),
    );
    out.extend(
        s.tool_calls
            .iter()
            .map(|t| format!("tool call: {} at #{}", t.tool_name, t.seq)),
    );
    out
}

/// Query of the diff page.
#[derive(Debug, Deserialize)]
pub struct DiffQuery {
    a: u64,
    b: u64,
}

/// `GET /ns/{ns}/sessions/{id}/diff?a=&b=`: what changed from version `a`
/// to version `b`.
pub async fn diff_page(
    State(inspector): State<Inspector>,
    Path((ns, id)): Path<(String, String)>,
    Query(q): Query<DiffQuery>,
) -> PageResult {
    if q.a == 0 || q.b == 0 {
        return Err(PageError::BadRequest(
            "a and b must be versions (from 1)".into(),
        ));
    }
    let old = fetch(&inspector, &ns, &id, q.a).await?.unwrap_or_default();
    let new = fetch(&inspector, &ns, &id, q.b).await?.unwrap_or_default();
    let (old_lines, new_lines) = (lines(&old), lines(&new));
    let old_set: BTreeSet<&String> = old_lines.iter().collect();
    let new_set: BTreeSet<&String> = new_lines.iter().collect();
    let body = html! {
        h1 { "Session " a href=(session_url(&ns, &id)) { (id) } ": summary v" (q.a) " → v" (q.b) }
        p.muted { "v" (q.a) " covers turns 1–" (old.covers_through_seq) "; v" (q.b) " covers turns 1–" (new.covers_through_seq) "." }
        ul.diff #diff {
            @for l in &old_lines { @if !new_set.contains(l) { li.removed { "− " (l) } } }
            @for l in &new_lines { @if !old_set.contains(l) { li.added { "+ " (l) } } }
        }
        p.muted { (old_lines.iter().filter(|l| new_set.contains(l)).count()) " items unchanged." }
    };
    Ok(page(&format!("Summary diff of {id}"), Some(&ns), body))
}
