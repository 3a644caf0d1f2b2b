//! Episodic memory: when a session stops (closes or goes idle) its latest
//! summary becomes an episode of its subject, and the actions still pending
//! then carry over to the subject's later sessions until someone marks them
//! done (a client with UpdatePendingAction, or a later session's summary
//! reporting the same action done). Pure functions; the store writes an
//! episode and its carried actions in one batch.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
pub use crate::model::{ActionRef, CarriedAction, Episode};
use crate::model::{ActionStatus, PendingAction, Session, SessionState, UnixNanos};
use crate::store::{ActionPlan, EpisodePlan};
use crate::summarize::{rules, SessionSummary};

/// The first evidence seq of an action: its identity within the session.
pub fn action_seq(a: &PendingAction) -> u64 {
    a.action_seq()
}

/// Whether a stopped session with a subject has a summary newer than its
/// episode (the one statement of this rule).
pub fn episode_due(session: &Session) -> bool {
    matches!(session.state, SessionState::Closed | SessionState::Idle)
        && !session.subject_id.is_empty()
        && session.summary.version > session.episode_version
}

/// The episode to write for `session` from its latest summary, if one is
/// due.
pub fn plan_episode(
    session: &Session,
    summary: Option<&SessionSummary>,
    overrides: &BTreeMap<u64, ActionStatus>,
    now: UnixNanos,
) -> Option<EpisodePlan> {
    let summary = summary.filter(|_| episode_due(session))?;
    let (episode, carried) = episode_of(session, summary, overrides, now);
    Some(EpisodePlan { episode, carried })
}

/// What setting the status of the action `action_seq` of a session's
/// latest summary writes: the action with its status, its episode with the
/// action updated, and its carried copy (gone once DONE). `NotFound` for
/// an action the latest summary does not hold.
pub fn plan_action_status(
    session: &Session,
    summary: Option<&SessionSummary>,
    episode: Option<Episode>,
    action_seq: u64,
    status: ActionStatus,
) -> Result<ActionPlan> {
    let unknown = || {
        Error::NotFound(format!(
            "session {}/{} has no pending action raised at turn {action_seq}; the action_seq is an action's first evidence seq",
            session.namespace, session.session_id
        ))
    };
    let mut found = summary
        .and_then(|s| {
            s.pending_actions
                .iter()
                .find(|a| a.action_seq() == action_seq)
        })
        .cloned()
        .ok_or_else(unknown)?;
    found.status = status;
    let Some(mut ep) = episode.filter(|_| !session.subject_id.is_empty()) else {
        return Ok(ActionPlan {
            action: found,
            episode: None,
            carried: None,
        });
    };
    ep.pending_actions.retain(|a| a.action_seq() != action_seq);
    let carried = if status == ActionStatus::Done {
        None
    } else {
        ep.pending_actions.push(found.clone());
        ep.pending_actions.sort_by_key(PendingAction::action_seq);
        Some(CarriedAction {
            action_ref: ActionRef {
                session_id: session.session_id.clone(),
                action_seq,
            },
            action: found.clone(),
            ended_at: ep.ended_at,
        })
    };
    Ok(ActionPlan {
        action: found,
        episode: Some(ep),
        carried,
    })
}

/// Whether an action of a stopped session is carried into later sessions'
/// bundles: still open, and confidently a commitment or a request (the
/// dialogue-act gate; a pure function of its words, so items stored before
/// the gate are judged the same way).
pub fn is_carried(a: &PendingAction) -> bool {
    a.status != ActionStatus::Done && rules::is_listed(rules::Act::Action, &a.action)
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
    // Every open action is stored as carried (a later `UpdatePendingAction`
    // finds it); which of them a bundle shows is decided on read
    // (`is_carried`), so items written before the gate are judged too.
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
