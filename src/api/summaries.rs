//! Conversions of summary-side domain values (summaries, audit records,
//! review items) into protobuf messages, and of their request enums back.

use super::convert::timestamp;
use crate::error::{Error, Result};
use crate::model::{
    ActionStatus, Decision, KeyFact, OpenQuestion, Outcome, PendingAction, Priority,
    QuestionStatus, SessionSummary, Severity, Trigger,
};
use crate::model::{AuditKind, AuditRecord, ReviewItem, ReviewStatus};
use crate::pb;

/// A summary trigger as its proto enum.
pub fn trigger(t: Trigger) -> pb::SummaryTrigger {
    match t {
        Trigger::EveryNTurns => pb::SummaryTrigger::EveryNTurns,
        Trigger::TokenThreshold => pb::SummaryTrigger::TokenThreshold,
        Trigger::Handoff => pb::SummaryTrigger::Handoff,
        Trigger::IdleTimeout => pb::SummaryTrigger::IdleTimeout,
        Trigger::Close => pb::SummaryTrigger::Close,
        Trigger::Requested => pb::SummaryTrigger::Requested,
    }
}

fn review_status(s: ReviewStatus) -> pb::ReviewStatus {
    match s {
        ReviewStatus::Pending => pb::ReviewStatus::Pending,
        ReviewStatus::Approved => pb::ReviewStatus::Approved,
        ReviewStatus::Rejected => pb::ReviewStatus::Rejected,
    }
}

/// A resolution status from a request: APPROVED or REJECTED.
pub fn resolution(v: i32) -> Result<ReviewStatus> {
    match pb::ReviewStatus::try_from(v) {
        Ok(pb::ReviewStatus::Approved) => Ok(ReviewStatus::Approved),
        Ok(pb::ReviewStatus::Rejected) => Ok(ReviewStatus::Rejected),
        _ => Err(Error::invalid(
            "status must be REVIEW_STATUS_APPROVED or REVIEW_STATUS_REJECTED",
        )),
    }
}

impl From<SessionSummary> for pb::SessionSummary {
    fn from(s: SessionSummary) -> Self {
        pb::SessionSummary {
            user_intent: s.user_intent,
            topic: s.topic,
            outcome: match s.outcome {
                Outcome::InProgress => pb::Outcome::InProgress,
                Outcome::Resolved => pb::Outcome::Resolved,
                Outcome::UnresolvedFollowUp => pb::Outcome::UnresolvedFollowUp,
                Outcome::Completed => pb::Outcome::Completed,
            } as i32,
            decisions: s.decisions.into_iter().map(Into::into).collect(),
            pending_actions: s.pending_actions.into_iter().map(Into::into).collect(),
            open_questions: s.open_questions.into_iter().map(Into::into).collect(),
            key_facts: s.key_facts.into_iter().map(Into::into).collect(),
            tool_calls: s
                .tool_calls
                .into_iter()
                .map(|t| pb::ToolCallEntry {
                    tool_name: t.tool_name,
                    arguments_json: t.arguments_json,
                    result_summary: t.result_summary,
                    status: super::convert::tool_status(t.status) as i32,
                    error_details: t.error_details,
                    seq: t.seq,
                    requires_human_review: t.requires_human_review,
                })
                .collect(),
            artifacts: s
                .artifacts
                .into_iter()
                .map(|a| pb::Artifact {
                    artifact_id: a.artifact_id,
                    source_tool: a.source_tool,
                    summary: a.summary,
                    seq: a.seq,
                    expiry_seq: a.expiry_seq,
                })
                .collect(),
            context_health: Some(pb::ContextHealth {
                stale_artifacts: s.context_health.stale_artifacts,
                missing_dependencies: s.context_health.missing_dependencies,
                budget_remaining_tokens: s.context_health.budget_remaining_tokens,
            }),
            truncated: s.truncated,
            errors_and_anomalies: s
                .errors_and_anomalies
                .into_iter()
                .map(|e| pb::Anomaly {
                    description: e.description,
                    severity: match e.severity {
                        Severity::Blocking => pb::Severity::Blocking,
                        Severity::Degraded => pb::Severity::Degraded,
                        Severity::Warning => pb::Severity::Warning,
                    } as i32,
                    seq: e.seq,
                })
                .collect(),
            unresolved_conflicts: s
                .unresolved_conflicts
                .into_iter()
                .map(|c| pb::Conflict {
                    description: c.description,
                    conflicting_seqs: c.conflicting_seqs,
                })
                .collect(),
            participants: s
                .participants
                .into_iter()
                .map(|p| pb::Participant {
                    speaker: p.speaker,
                    role: super::convert::role(p.role) as i32,
                })
                .collect(),
            topics: s
                .topics
                .into_iter()
                .map(|t| pb::TopicSegment {
                    first_seq: t.first_seq,
                    last_seq: t.last_seq,
                    topic: t.topic,
                    key_points: t.key_points,
                    evidence_seqs: t.evidence_seqs,
                })
                .collect(),
            prose: s.prose,
            covers_through_seq: s.covers_through_seq,
            version: s.version,
            trigger: trigger(s.trigger) as i32,
            created_at: Some(timestamp(s.created_at)),
            duration_seconds: s.duration_seconds,
            total_turns: s.total_turns,
            requires_human_review: s.requires_human_review,
            user_intent_seq: s.user_intent_seq,
        }
    }
}

/// Metadata of a summary version.
pub fn info(s: &SessionSummary) -> pb::SummaryInfo {
    pb::SummaryInfo {
        version: s.version,
        covers_through_seq: s.covers_through_seq,
        trigger: trigger(s.trigger) as i32,
        create_time: Some(timestamp(s.created_at)),
        decisions: s.decisions.len() as u32,
        pending_actions: s.pending_actions.len() as u32,
        open_questions: s.open_questions.len() as u32,
    }
}

impl From<AuditRecord> for pb::AuditRecord {
    fn from(a: AuditRecord) -> Self {
        pb::AuditRecord {
            audit_seq: a.audit_seq,
            kind: match a.kind {
                AuditKind::SummaryAttempt => pb::AuditKind::SummaryAttempt,
                AuditKind::ReviewResolved => pb::AuditKind::ReviewResolved,
            } as i32,
            create_time: Some(timestamp(a.created_at)),
            summary_version: a.summary_version,
            trigger: a.trigger.map_or(pb::SummaryTrigger::Unspecified, trigger) as i32,
            covers_through_seq: a.covers_through_seq,
            pre_summary_tokens: a.pre_summary_tokens,
            post_summary_tokens: a.post_summary_tokens,
            compression_ratio: a.compression_ratio,
            summarizer: a.summarizer,
            covered_turns_sha256: a.covered_turns_sha256,
            validation_passed: a.validation_passed,
            validation_errors: a.validation_errors,
            decisions: a.decisions,
            pending_actions: a.pending_actions,
            open_questions: a.open_questions,
            health_flags: a.health_flags,
            review_id: a.review_id,
            review_status: a
                .review_status
                .map_or(pb::ReviewStatus::Unspecified, review_status)
                as i32,
            reviewer: a.reviewer,
            comment: a.comment,
            reviewer_key: a.reviewer_key,
        }
    }
}

impl From<ReviewItem> for pb::ReviewItem {
    fn from(r: ReviewItem) -> Self {
        pb::ReviewItem {
            review_id: r.review_id,
            namespace: r.namespace,
            session_id: r.session_id,
            summary_version: r.summary_version,
            items: r.items,
            status: review_status(r.status) as i32,
            reviewer: r.reviewer,
            comment: r.comment,
            create_time: Some(timestamp(r.created_at)),
            resolve_time: (r.resolved_at != 0).then(|| timestamp(r.resolved_at)),
            reviewer_key: r.reviewer_key,
        }
    }
}

impl From<Decision> for pb::Decision {
    fn from(d: Decision) -> Self {
        pb::Decision {
            decision: d.decision,
            rationale: d.rationale,
            agreed_by: d.agreed_by,
            evidence_seqs: d.evidence_seqs,
            requires_human_review: d.requires_human_review,
        }
    }
}

impl From<PendingAction> for pb::PendingAction {
    fn from(a: PendingAction) -> Self {
        pb::PendingAction {
            action: a.action,
            owner: a.owner,
            deadline: a.deadline,
            status: match a.status {
                ActionStatus::Pending => pb::ActionStatus::Pending,
                ActionStatus::InProgress => pb::ActionStatus::InProgress,
                ActionStatus::Done => pb::ActionStatus::Done,
            } as i32,
            depends_on: a.depends_on,
            priority: match a.priority {
                Priority::High => pb::ActionPriority::High,
                Priority::Medium => pb::ActionPriority::Medium,
                Priority::Low => pb::ActionPriority::Low,
            } as i32,
            evidence_seqs: a.evidence_seqs,
            requires_human_review: a.requires_human_review,
        }
    }
}

impl From<OpenQuestion> for pb::OpenQuestion {
    fn from(q: OpenQuestion) -> Self {
        pb::OpenQuestion {
            question: q.question,
            asked_by: q.asked_by,
            status: match q.status {
                QuestionStatus::Unanswered => pb::QuestionStatus::Unanswered,
                QuestionStatus::PartiallyAnswered => pb::QuestionStatus::PartiallyAnswered,
            } as i32,
            evidence_seqs: q.evidence_seqs,
        }
    }
}

impl From<KeyFact> for pb::KeyFact {
    fn from(f: KeyFact) -> Self {
        pb::KeyFact {
            fact: f.fact,
            stated_by: f.stated_by,
            evidence_seqs: f.evidence_seqs,
        }
    }
}
