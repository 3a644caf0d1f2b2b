//! Input validation of the domain: identifiers, sizes and limits. Each
//! error names the field and the limit so a client can fix its request.

use std::collections::BTreeMap;

use crate::bundle::{
    BundleRequest, MAX_BUDGET, MAX_QUERY_BYTES, MAX_RECENT_INTERACTIONS, MIN_BUDGET,
};
use crate::config::Limits;
use crate::error::{Error, Result};
pub use crate::model::limits::*;
use crate::model::{NewTurn, SessionSettings};

/// A namespace or session id: 1..=128 chars of `A-Za-z0-9._-:@`.
pub fn id(field: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(format!("{field} is required")));
    }
    if value.len() > MAX_ID_BYTES {
        return Err(Error::invalid(format!(
            "{field} is {} bytes; the limit is {MAX_ID_BYTES}",
            value.len()
        )));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '@')))
    {
        return Err(Error::invalid(format!(
            "{field} contains {c:?}; allowed are A-Z a-z 0-9 . _ - : @"
        )));
    }
    Ok(())
}

/// Free text with a byte limit and no control characters (they would break
/// the key layout for ids and logs for names).
pub fn name(field: &str, value: &str, max: usize) -> Result<()> {
    if value.len() > max {
        return Err(Error::invalid(format!(
            "{field} is {} bytes; the limit is {max}",
            value.len()
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "{field} must not contain control characters"
        )));
    }
    Ok(())
}

/// Metadata map limits.
pub fn metadata(field: &str, m: &BTreeMap<String, String>) -> Result<()> {
    if m.len() > MAX_METADATA_ENTRIES {
        return Err(Error::invalid(format!(
            "{field} has {} entries; the limit is {MAX_METADATA_ENTRIES}",
            m.len()
        )));
    }
    for (k, v) in m {
        if k.is_empty() || k.len() > MAX_METADATA_KEY_BYTES {
            return Err(Error::invalid(format!(
                "{field} key {k:?} must be 1 to {MAX_METADATA_KEY_BYTES} bytes"
            )));
        }
        if v.len() > MAX_METADATA_VALUE_BYTES {
            return Err(Error::invalid(format!(
                "{field}[{k:?}] is {} bytes; the limit is {MAX_METADATA_VALUE_BYTES}",
                v.len()
            )));
        }
    }
    Ok(())
}

/// Settings ranges (defaults are already filled in).
pub fn settings(s: &SessionSettings) -> Result<()> {
    if !(1..=10_000).contains(&s.summary_every_turns) {
        return Err(Error::invalid(
            "settings.summary_every_turns must be 1 to 10000",
        ));
    }
    if !(256..=10_000_000).contains(&s.context_limit_tokens) {
        return Err(Error::invalid(
            "settings.context_limit_tokens must be 256 to 10000000",
        ));
    }
    if !(1..=2_592_000).contains(&s.idle_timeout_seconds) {
        return Err(Error::invalid(
            "settings.idle_timeout_seconds must be 1 to 2592000 (30 days)",
        ));
    }
    Ok(())
}

/// The turns of one append against the server's limits.
pub fn turns(turns: &[NewTurn], limits: &Limits) -> Result<()> {
    if turns.is_empty() {
        return Err(Error::invalid("turns must hold at least one turn"));
    }
    if turns.len() > limits.max_turns_per_append {
        return Err(Error::invalid(format!(
            "{} turns in one append; the limit is {} (max_turns_per_append)",
            turns.len(),
            limits.max_turns_per_append
        )));
    }
    for (i, t) in turns.iter().enumerate() {
        let bytes = t.text_bytes();
        if bytes > limits.max_turn_bytes {
            return Err(Error::invalid(format!(
                "turns[{i}] has {bytes} bytes of content and tool-call text; the limit is {} (max_turn_bytes)",
                limits.max_turn_bytes
            )));
        }
        name(&format!("turns[{i}].speaker"), &t.speaker, MAX_NAME_BYTES)?;
        metadata(&format!("turns[{i}].metadata"), &t.metadata)?;
        if t.metadata.contains_key(crate::summarize::rules::EVENT_KEY) {
            return Err(Error::invalid(format!(
                "turns[{i}].metadata key {:?} is reserved for events the server records",
                crate::summarize::rules::EVENT_KEY
            )));
        }
        if let Some(tc) = &t.tool_call {
            if tc.tool_name.is_empty() {
                return Err(Error::invalid(format!(
                    "turns[{i}].tool_call.tool_name is required when a tool call is given"
                )));
            }
            name(
                &format!("turns[{i}].tool_call.tool_name"),
                &tc.tool_name,
                MAX_NAME_BYTES,
            )?;
            if !tc.arguments_json.is_empty() {
                serde_json::from_str::<serde::de::IgnoredAny>(&tc.arguments_json).map_err(|e| {
                    Error::invalid(format!(
                        "turns[{i}].tool_call.arguments_json is not valid JSON: {e}"
                    ))
                })?;
            }
        }
    }
    Ok(())
}

/// Checks a bundle request's bounds.
pub fn bundle_request(req: &BundleRequest) -> Result<()> {
    if !(MIN_BUDGET..=MAX_BUDGET).contains(&req.budget_tokens) {
        return Err(Error::invalid(format!(
            "budget_tokens is {}; it must be from {MIN_BUDGET} to {MAX_BUDGET}",
            req.budget_tokens
        )));
    }
    if req.recent_interactions > MAX_RECENT_INTERACTIONS {
        return Err(Error::invalid(format!(
            "recent_interactions is {}; the limit is {MAX_RECENT_INTERACTIONS}",
            req.recent_interactions
        )));
    }
    if req.query.len() > MAX_QUERY_BYTES {
        return Err(Error::invalid(format!(
            "query is {} bytes; the limit is {MAX_QUERY_BYTES}",
            req.query.len()
        )));
    }
    name("agent_id", &req.agent_id, MAX_NAME_BYTES)
}
