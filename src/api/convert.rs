//! Conversions between protobuf messages and domain types. Requests become
//! domain values through `TryFrom`-style functions that fail with
//! `INVALID_ARGUMENT`; domain values become messages infallibly.

use std::collections::BTreeMap;

use prost_types::Timestamp;

use crate::error::{Error, Result};
use crate::model::{
    AppendOutcome, Encoding, NewTurn, RiskLevel, Role, Session, SessionSettings, SessionState,
    ToolCall, ToolCallStatus, Turn, UnixNanos,
};
use crate::pb;

/// Timestamp to nanoseconds, rejecting values outside 1678..2262.
pub fn nanos_from(ts: &Timestamp, field: &str) -> Result<UnixNanos> {
    if !(0..1_000_000_000).contains(&ts.nanos) {
        return Err(Error::invalid(format!(
            "{field}.nanos must be 0 to 999999999"
        )));
    }
    ts.seconds
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(i64::from(ts.nanos)))
        .ok_or_else(|| Error::invalid(format!("{field} is outside the years 1678 to 2262")))
}

/// Nanoseconds to a protobuf timestamp.
pub fn timestamp(n: UnixNanos) -> Timestamp {
    Timestamp {
        seconds: n.div_euclid(1_000_000_000),
        // rem_euclid of 1e9 always fits in i32.
        nanos: n.rem_euclid(1_000_000_000) as i32,
    }
}

fn metadata(m: std::collections::HashMap<String, String>) -> BTreeMap<String, String> {
    m.into_iter().collect()
}

/// Settings from a request, defaults filled in for zero fields.
pub fn settings_from(s: Option<pb::SessionSettings>) -> Result<SessionSettings> {
    let d = SessionSettings::default();
    let Some(s) = s else { return Ok(d) };
    let encoding = encoding_from(s.encoding, "settings.encoding")?.unwrap_or_default();
    let risk_level = match pb::RiskLevel::try_from(s.risk_level) {
        Ok(pb::RiskLevel::Unspecified) | Ok(pb::RiskLevel::Normal) => RiskLevel::Normal,
        Ok(pb::RiskLevel::High) => RiskLevel::High,
        Err(_) => {
            return Err(Error::invalid(format!(
                "settings.risk_level {} is not a known risk level",
                s.risk_level
            )))
        }
    };
    let fact_extraction = match pb::FactExtraction::try_from(s.fact_extraction) {
        Ok(pb::FactExtraction::Unspecified) | Ok(pb::FactExtraction::Enabled) => true,
        Ok(pb::FactExtraction::Disabled) => false,
        Err(_) => {
            return Err(Error::invalid(format!(
                "settings.fact_extraction {} is not a known setting",
                s.fact_extraction
            )))
        }
    };
    Ok(SessionSettings {
        risk_level,
        fact_extraction,
        summary_every_turns: if s.summary_every_turns == 0 {
            d.summary_every_turns
        } else {
            s.summary_every_turns
        },
        context_limit_tokens: if s.context_limit_tokens == 0 {
            d.context_limit_tokens
        } else {
            s.context_limit_tokens
        },
        idle_timeout_seconds: if s.idle_timeout_seconds == 0 {
            d.idle_timeout_seconds
        } else {
            s.idle_timeout_seconds
        },
        encoding,
    })
}

/// An encoding field; `None` when unspecified.
pub fn encoding_from(v: i32, field: &str) -> Result<Option<Encoding>> {
    match pb::Encoding::try_from(v) {
        Ok(pb::Encoding::Unspecified) => Ok(None),
        Ok(pb::Encoding::Cl100kBase) => Ok(Some(Encoding::Cl100kBase)),
        Ok(pb::Encoding::O200kBase) => Ok(Some(Encoding::O200kBase)),
        Err(_) => Err(Error::invalid(format!(
            "{field} {v} is not a known encoding"
        ))),
    }
}

/// A session state filter; `None` = any.
pub fn state_filter(v: i32) -> Result<Option<SessionState>> {
    match pb::SessionState::try_from(v) {
        Ok(pb::SessionState::Unspecified) => Ok(None),
        Ok(pb::SessionState::Active) => Ok(Some(SessionState::Active)),
        Ok(pb::SessionState::Closed) => Ok(Some(SessionState::Closed)),
        Ok(pb::SessionState::Idle) => Ok(Some(SessionState::Idle)),
        Err(_) => Err(Error::invalid(format!(
            "state {v} is not a known session state"
        ))),
    }
}

/// A submitted turn; `i` is its index in the request, for messages.
pub fn new_turn(i: usize, t: pb::NewTurn) -> Result<NewTurn> {
    let role = match pb::Role::try_from(t.role) {
        Ok(pb::Role::User) => Role::User,
        Ok(pb::Role::Assistant) => Role::Assistant,
        Ok(pb::Role::System) => Role::System,
        Ok(pb::Role::Tool) => Role::Tool,
        Ok(pb::Role::Unspecified) => {
            return Err(Error::invalid(format!("turns[{i}].role is required")))
        }
        Err(_) => {
            return Err(Error::invalid(format!(
                "turns[{i}].role {} is not a known role",
                t.role
            )))
        }
    };
    let client_time = t
        .client_time
        .as_ref()
        .map(|ts| nanos_from(ts, &format!("turns[{i}].client_time")))
        .transpose()?;
    let tool_call = t.tool_call.map(|c| tool_call(i, c)).transpose()?;
    Ok(NewTurn {
        role,
        speaker: t.speaker,
        content: t.content,
        client_time,
        tool_call,
        metadata: metadata(t.metadata),
    })
}

fn tool_call(i: usize, c: pb::ToolCall) -> Result<ToolCall> {
    let status = match pb::ToolCallStatus::try_from(c.status) {
        Ok(pb::ToolCallStatus::Success) => ToolCallStatus::Success,
        Ok(pb::ToolCallStatus::Failure) => ToolCallStatus::Failure,
        Ok(pb::ToolCallStatus::Timeout) => ToolCallStatus::Timeout,
        Ok(pb::ToolCallStatus::Pending) => ToolCallStatus::Pending,
        Ok(pb::ToolCallStatus::Unknown) | Ok(pb::ToolCallStatus::Unspecified) => {
            ToolCallStatus::Unknown
        }
        Err(_) => {
            return Err(Error::invalid(format!(
                "turns[{i}].tool_call.status {} is not a known status",
                c.status
            )))
        }
    };
    Ok(ToolCall {
        tool_name: c.tool_name,
        arguments_json: c.arguments_json,
        result: c.result,
        status,
        error_details: c.error_details,
    })
}

impl From<Session> for pb::Session {
    fn from(s: Session) -> Self {
        pb::Session {
            namespace: s.namespace,
            session_id: s.session_id,
            subject_id: s.subject_id,
            title: s.title,
            metadata: s.metadata.into_iter().collect(),
            settings: Some(pb::SessionSettings {
                summary_every_turns: s.settings.summary_every_turns,
                context_limit_tokens: s.settings.context_limit_tokens,
                idle_timeout_seconds: s.settings.idle_timeout_seconds,
                encoding: match s.settings.encoding {
                    Encoding::Cl100kBase => pb::Encoding::Cl100kBase,
                    Encoding::O200kBase => pb::Encoding::O200kBase,
                } as i32,
                risk_level: match s.settings.risk_level {
                    RiskLevel::Normal => pb::RiskLevel::Normal,
                    RiskLevel::High => pb::RiskLevel::High,
                } as i32,
                fact_extraction: if s.settings.fact_extraction {
                    pb::FactExtraction::Enabled
                } else {
                    pb::FactExtraction::Disabled
                } as i32,
            }),
            state: state(s.state) as i32,
            turn_count: s.turn_count,
            next_seq: s.next_seq,
            total_tokens: s.total_tokens,
            create_time: Some(timestamp(s.created_at)),
            update_time: Some(timestamp(s.updated_at)),
            summary_version: s.summary.version,
            summarized_through_seq: s.summary.through_seq,
            owner_agent: s.owner_agent,
            lease_epoch: s.lease_epoch,
            last_active_time: Some(timestamp(s.last_active_at)),
            // Read from the session's retention mark by GetSession and
            // ListSessions.
            turns_removed: None,
        }
    }
}

/// A session state as its proto enum.
pub fn state(s: SessionState) -> pb::SessionState {
    match s {
        SessionState::Active => pb::SessionState::Active,
        SessionState::Idle => pb::SessionState::Idle,
        SessionState::Closed => pb::SessionState::Closed,
    }
}

/// A role as its proto enum.
pub fn role(r: Role) -> pb::Role {
    match r {
        Role::User => pb::Role::User,
        Role::Assistant => pb::Role::Assistant,
        Role::System => pb::Role::System,
        Role::Tool => pb::Role::Tool,
    }
}

/// A tool-call status as its proto enum.
pub fn tool_status(s: ToolCallStatus) -> pb::ToolCallStatus {
    match s {
        ToolCallStatus::Success => pb::ToolCallStatus::Success,
        ToolCallStatus::Failure => pb::ToolCallStatus::Failure,
        ToolCallStatus::Timeout => pb::ToolCallStatus::Timeout,
        ToolCallStatus::Pending => pb::ToolCallStatus::Pending,
        ToolCallStatus::Unknown => pb::ToolCallStatus::Unknown,
    }
}

impl From<Turn> for pb::Turn {
    fn from(t: Turn) -> Self {
        pb::Turn {
            seq: t.seq,
            role: role(t.role) as i32,
            speaker: t.speaker,
            content: t.content,
            client_time: t.client_time.map(timestamp),
            server_time: Some(timestamp(t.server_time)),
            tool_call: t.tool_call.map(|c| pb::ToolCall {
                tool_name: c.tool_name,
                arguments_json: c.arguments_json,
                result: c.result,
                status: tool_status(c.status) as i32,
                error_details: c.error_details,
            }),
            metadata: t.metadata.into_iter().collect(),
            token_count: t.token_count,
        }
    }
}

impl From<AppendOutcome> for pb::AppendTurnsResponse {
    fn from(o: AppendOutcome) -> Self {
        pb::AppendTurnsResponse {
            first_seq: o.first_seq,
            last_seq: o.last_seq,
            token_counts: o.token_counts,
            total_tokens: o.total_tokens,
            replayed: o.replayed,
        }
    }
}

impl From<crate::model::TurnsRemoved> for pb::TurnsRemoved {
    fn from(t: crate::model::TurnsRemoved) -> Self {
        pb::TurnsRemoved {
            through_seq: t.through_seq,
            count: t.count,
            remove_time: Some(timestamp(t.at)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_including_before_the_epoch() {
        for n in [
            0i64,
            1,
            999_999_999,
            1_700_000_000_123_456_789,
            -1,
            -1_500_000_001,
        ] {
            assert_eq!(nanos_from(&timestamp(n), "t").unwrap(), n);
        }
        let huge = Timestamp {
            seconds: i64::MAX / 2,
            nanos: 0,
        };
        assert!(nanos_from(&huge, "t").is_err());
    }
}
