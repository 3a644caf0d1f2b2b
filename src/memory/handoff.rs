//! Handoff: a session moves from one agent to another. The event turn and
//! the new owner and lease epoch are one append (fenced like any other);
//! then a HANDOFF summary covering every turn is written through the one
//! summary pipeline and the new owner gets a context bundle.

use super::append::OwnerChange;
use super::summary::Attempt;
use super::{validate, AppendRequest, Memory};
use crate::bundle::{self, Bundle, BundleRequest};
use crate::error::{Error, Result};
use crate::model::{NewTurn, Role, Session, SessionSummary, Trigger, Turn};
use crate::summarize::rules::EVENT_KEY;

/// Metadata of a handoff event turn.
pub mod handoff_keys {
    /// The previous owner.
    pub const FROM: &str = "mnemo.from_agent";
    /// The new owner.
    pub const TO: &str = "mnemo.to_agent";
    /// Why.
    pub const REASON: &str = "mnemo.reason";
    /// The lease epoch the handoff created.
    pub const EPOCH: &str = "mnemo.lease_epoch";
    /// The value of `mnemo.event` on a handoff turn.
    pub const EVENT: &str = "handoff";
}

/// A handoff, as watchers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffEvent {
    /// Previous owner.
    pub from_agent: String,
    /// New owner.
    pub to_agent: String,
    /// Why.
    pub reason: String,
    /// The new lease epoch.
    pub lease_epoch: u64,
    /// The event turn.
    pub seq: u64,
}

impl HandoffEvent {
    /// The metadata of this handoff's event turn (read back by
    /// [`HandoffEvent::from_turn`]; `seq` is the turn's own).
    pub fn metadata(&self) -> std::collections::BTreeMap<String, String> {
        [
            (EVENT_KEY, handoff_keys::EVENT.to_owned()),
            (handoff_keys::FROM, self.from_agent.clone()),
            (handoff_keys::TO, self.to_agent.clone()),
            (handoff_keys::REASON, self.reason.clone()),
            (handoff_keys::EPOCH, self.lease_epoch.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// The handoff a turn records, if it is a handoff event turn.
    pub fn from_turn(t: &Turn) -> Option<HandoffEvent> {
        if t.metadata.get(EVENT_KEY).map(String::as_str) != Some(handoff_keys::EVENT) {
            return None;
        }
        let get = |k: &str| t.metadata.get(k).cloned().unwrap_or_default();
        Some(HandoffEvent {
            from_agent: get(handoff_keys::FROM),
            to_agent: get(handoff_keys::TO),
            reason: get(handoff_keys::REASON),
            lease_epoch: get(handoff_keys::EPOCH).parse().unwrap_or(0),
            seq: t.seq,
        })
    }
}

/// A handoff request.
#[derive(Debug, Clone, Default)]
pub struct HandoffRequest {
    /// The current owner.
    pub from_agent: String,
    /// The new owner.
    pub to_agent: String,
    /// Why.
    pub reason: String,
    /// The lease epoch the caller holds.
    pub lease_epoch: u64,
    /// Budget of the returned bundle; 0 = the default.
    pub budget_tokens: u32,
    /// Makes a retry safe: a repeat with the same key replays the outcome.
    pub idempotency_key: Option<String>,
}

/// What a handoff did.
#[derive(Debug, Clone)]
pub struct HandoffOutcome {
    /// The session after the handoff.
    pub session: Session,
    /// The handoff event turn's seq.
    pub event_seq: u64,
    /// The lease epoch the handoff gave the new owner.
    pub lease_epoch: u64,
    /// True when this replays an earlier handoff with the same key.
    pub replayed: bool,
    /// The HANDOFF summary, when validation accepted it.
    pub summary: Option<SessionSummary>,
    /// The bundle for the new owner.
    pub bundle: Bundle,
}

/// Default budget of the bundle a handoff returns.
pub const HANDOFF_BUNDLE_TOKENS: u32 = 8000;
/// Longest handoff reason, in bytes.
pub const MAX_REASON_BYTES: usize = 4096;

impl Memory {
    /// Hands a session from one agent to another: records the handoff
    /// event turn and the new owner and epoch atomically (durable on
    /// return), writes a HANDOFF summary covering every turn, and builds
    /// the new owner's bundle.
    pub async fn handoff(
        &self,
        ns: &str,
        session_id: &str,
        req: HandoffRequest,
    ) -> Result<HandoffOutcome> {
        validate::id("namespace", ns)?;
        validate::id("session_id", session_id)?;
        for (field, v) in [("from_agent", &req.from_agent), ("to_agent", &req.to_agent)] {
            if v.is_empty() {
                return Err(Error::invalid(format!("{field} is required")));
            }
            validate::name(field, v, validate::MAX_NAME_BYTES)?;
        }
        if req.from_agent == req.to_agent {
            return Err(Error::invalid("to_agent must differ from from_agent"));
        }
        if req.reason.len() > MAX_REASON_BYTES {
            return Err(Error::invalid(format!(
                "reason is {} bytes; the limit is {MAX_REASON_BYTES}",
                req.reason.len()
            )));
        }
        if req.lease_epoch == 0 {
            return Err(Error::invalid(
                "lease_epoch is required: pass the session's current lease epoch (GetSession)",
            ));
        }
        if let Some(k) = &req.idempotency_key {
            validate::name("idempotency_key", k, validate::MAX_IDEMPOTENCY_KEY_BYTES)?;
        }
        if req.budget_tokens != 0 {
            validate::bundle_request(&BundleRequest {
                budget_tokens: req.budget_tokens,
                ..Default::default()
            })?;
        }
        let next_epoch = req.lease_epoch + 1;
        let metadata = HandoffEvent {
            from_agent: req.from_agent.clone(),
            to_agent: req.to_agent.clone(),
            reason: req.reason.clone(),
            lease_epoch: next_epoch,
            seq: 0,
        }
        .metadata();
        let reason = if req.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", req.reason)
        };
        let event = NewTurn {
            role: Role::System,
            speaker: "mnemo".to_owned(),
            content: format!(
                "Handoff from {} to {} (lease epoch {next_epoch}){reason}",
                req.from_agent, req.to_agent
            ),
            client_time: None,
            tool_call: None,
            metadata,
        };
        let change = OwnerChange {
            from_agent: req.from_agent.clone(),
            to_agent: req.to_agent.clone(),
        };
        let event = AppendRequest {
            turns: vec![event],
            idempotency_key: req.idempotency_key.clone(),
            expected_next_seq: None,
            lease_epoch: Some(req.lease_epoch),
        };
        let appended = self
            .write_append(ns, session_id, event, Some(change))
            .await?;
        let event_seq = appended.outcome.last_seq;
        let replayed = appended.outcome.replayed;

        // The summary covers every turn through the event turn. It runs
        // here rather than through the queue, so a full queue cannot delay
        // the handoff; a concurrent background attempt is retried against.
        // A replay writes nothing: it answers with the first summary that
        // covers the event turn (none when validation refused it).
        let summary = if replayed {
            let latest = appended.session.summary.version;
            let v = self
                .first_summary_covering(ns, session_id, event_seq, latest)
                .await?;
            if v > latest {
                None
            } else {
                Some(self.get_summary(ns, session_id, v).await?)
            }
        } else {
            match self
                .summarize_session(ns, session_id, Trigger::Handoff, true, true)
                .await?
            {
                Attempt::Stored(s) => Some(*s),
                Attempt::Unchanged => Some(self.get_summary(ns, session_id, 0).await?),
                Attempt::Refused(_) => None,
            }
        };
        let budget = match req.budget_tokens {
            0 => {
                let limit = appended.session.settings.context_limit_tokens;
                u32::try_from(limit.min(u64::from(HANDOFF_BUNDLE_TOKENS)))
                    .unwrap_or(HANDOFF_BUNDLE_TOKENS)
                    .max(bundle::MIN_BUDGET)
            }
            n => n,
        };
        let bundle = self
            .get_context_bundle(
                ns,
                session_id,
                BundleRequest {
                    budget_tokens: budget,
                    agent_id: req.to_agent.clone(),
                    ..Default::default()
                },
            )
            .await?;
        Ok(HandoffOutcome {
            session: bundle.session.clone(),
            event_seq,
            lease_epoch: next_epoch,
            replayed,
            summary,
            bundle,
        })
    }
}
