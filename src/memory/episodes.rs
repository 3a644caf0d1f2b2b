//! Episodic memory: when a session stops (closes or goes idle) its latest
//! summary becomes an episode of its subject, and the actions still pending
//! then carry over to the subject's later sessions until someone marks them
//! done (a client with UpdatePendingAction, or a later session's summary
//! reporting the same action done). Pure functions; the store writes an
//! episode and its carried actions in one batch.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::types::{Session, SessionState, UnixNanos};
use crate::summarize::model::{ActionStatus, Decision, Outcome, PendingAction};
use crate::summarize::{rules, SessionSummary};

/// A past session of a subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Episode {
    /// Tenancy boundary.
    pub namespace: String,
    /// The subject.
    pub subject_id: String,
    /// The session (also the episode's id).
    pub session_id: String,
    /// The session's creation.
    pub started_at: UnixNanos,
    /// When it stopped.
    pub ended_at: UnixNanos,
    /// What it was about.
    pub topic: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The summary's prose.
    pub prose: String,
    /// What the user wanted.
    pub user_intent: String,
    /// Decisions made.
    pub decisions: Vec<Decision>,
    /// Actions pending when it stopped, minus those marked done since.
    pub pending_actions: Vec<PendingAction>,
    /// The summary version it was made from.
    pub summary_version: u64,
    /// The newest turn that summary covers.
    pub last_seq: u64,
    /// CLOSED or IDLE.
    pub ended_as: SessionState,
}

/// Identifies a pending action: its session and first evidence seq.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ActionRef {
    /// The session whose summary holds it.
    pub session_id: String,
    /// Its first evidence seq.
    pub action_seq: u64,
}

/// A pending action of a past session, carried to the subject's later
/// sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarriedAction {
    /// Where it was raised.
    pub action_ref: ActionRef,
    /// The action.
    pub action: PendingAction,
    /// When its session stopped (newest carried actions rank first).
    pub ended_at: UnixNanos,
}

/// The first evidence seq of an action: its identity within the session.
pub fn action_seq(a: &PendingAction) -> u64 {
    a.evidence_seqs.first().copied().unwrap_or(0)
}

/// Applies status overrides (from UpdatePendingAction) to actions.
pub fn apply_overrides(actions: &mut [PendingAction], overrides: &BTreeMap<u64, ActionStatus>) {
    for a in actions.iter_mut() {
        if let Some(&st) = overrides.get(&action_seq(a)) {
            a.status = st;
        }
    }
}

/// The episode of a stopped session and the actions it carries over.
pub fn episode_of(
    session: &Session,
    summary: &SessionSummary,
    overrides: &BTreeMap<u64, ActionStatus>,
    now: UnixNanos,
) -> (Episode, Vec<CarriedAction>) {
    let mut actions = summary.pending_actions.clone();
    apply_overrides(&mut actions, overrides);
    actions.retain(|a| a.status != ActionStatus::Done);
    let carried = actions
        .iter()
        .map(|a| CarriedAction {
            action_ref: ActionRef {
                session_id: session.session_id.clone(),
                action_seq: action_seq(a),
            },
            action: a.clone(),
            ended_at: now,
        })
        .collect();
    let topic = if summary.topic.is_empty() {
        session.title.clone()
    } else {
        summary.topic.clone()
    };
    let episode = Episode {
        namespace: session.namespace.clone(),
        subject_id: session.subject_id.clone(),
        session_id: session.session_id.clone(),
        started_at: session.created_at,
        ended_at: now,
        topic,
        outcome: summary.outcome,
        prose: summary.prose.clone(),
        user_intent: summary.user_intent.clone(),
        decisions: summary.decisions.clone(),
        pending_actions: actions,
        summary_version: summary.version,
        last_seq: summary.covers_through_seq,
        ended_as: session.state,
    };
    (episode, carried)
}

/// The text an episode is searched and ranked by.
pub fn episode_text(e: &Episode) -> String {
    let mut parts = vec![e.topic.clone(), e.user_intent.clone(), e.prose.clone()];
    parts.extend(e.decisions.iter().map(|d| d.decision.clone()));
    parts.extend(e.pending_actions.iter().map(|a| a.action.clone()));
    parts.retain(|p| !p.is_empty());
    parts.join("\n")
}

/// Whether a done action of a later session reports the same work as a
/// carried action: they share an identifier (an order number, an email,
/// a URL...), or most of their content words.
pub fn same_action(done: &str, carried: &str) -> bool {
    // Dates and bare numbers are shared by unrelated work too.
    let ids = |t: &str| -> BTreeSet<String> {
        rules::entities(t)
            .into_iter()
            .filter(|e| !matches!(e.kind, rules::EntityKind::Date | rules::EntityKind::Number))
            .map(|e| e.text.to_lowercase())
            .collect()
    };
    let (a, b) = (ids(done), ids(carried));
    if !a.is_empty() && !a.is_disjoint(&b) {
        return true;
    }
    let words = |t: &str| -> BTreeSet<String> {
        t.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 4)
            .map(str::to_lowercase)
            .collect()
    };
    let (a, b) = (words(done), words(carried));
    let shared = a.intersection(&b).count();
    let smaller = a.len().min(b.len());
    smaller >= 2 && shared * 3 >= smaller * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_actions_match_by_identifier_or_most_words() {
        assert!(same_action(
            "Refund for ORD-55123 was issued",
            "issue the refund of $129.99 for ORD-55123 by Friday"
        ));
        assert!(same_action(
            "sent the replacement charger shipping label",
            "send the replacement charger shipping label"
        ));
        assert!(!same_action(
            "sent the invoice",
            "book the follow-up appointment with Dr. Rao"
        ));
        assert!(!same_action(
            "Refund for ORD-11111 was issued",
            "issue the refund for ORD-55123"
        ));
    }
}
