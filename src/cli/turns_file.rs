//! `mnemo append --file`: turns as JSON lines, one turn per line, e.g.
//!
//! ```text
//! {"role": "user", "speaker": "customer:42", "content": "Where is my order?"}
//! {"role": "assistant", "speaker": "agent-a", "content": "Checking.", "tool_call": {"tool_name": "lookup_order", "arguments_json": "{\"id\": 7}", "result": "shipped", "status": "success"}}
//! ```
//!
//! The whole file is read and checked before anything is sent; a bad line
//! is an error naming it, and nothing is appended.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde::Deserialize;

use crate::pb;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnLine {
    role: String,
    #[serde(default)]
    speaker: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    tool_call: Option<ToolCallLine>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallLine {
    tool_name: String,
    #[serde(default)]
    arguments_json: String,
    #[serde(default)]
    result: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    error_details: String,
}

/// The turns of `input`, or an error naming the first bad line. Blank
/// lines are skipped.
pub fn read(input: &mut dyn BufRead) -> Result<Vec<pb::NewTurn>, String> {
    let mut turns = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| format!("line {n}: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let t: TurnLine = serde_json::from_str(&line).map_err(|e| format!("line {n}: {e}"))?;
        let role = pb::Role::from_str_name(&format!("ROLE_{}", t.role.to_uppercase()))
            .filter(|r| *r != pb::Role::Unspecified)
            .ok_or_else(|| {
                format!(
                    "line {n}: role {:?} is not user, assistant, system or tool",
                    t.role
                )
            })?;
        let tool_call = match t.tool_call {
            None => None,
            Some(c) => {
                let status = if c.status.is_empty() {
                    pb::ToolCallStatus::Unspecified
                } else {
                    pb::ToolCallStatus::from_str_name(&format!(
                        "TOOL_CALL_STATUS_{}",
                        c.status.to_uppercase()
                    ))
                    .ok_or_else(|| {
                        format!(
                            "line {n}: tool status {:?} is not success, failure, timeout, pending or unknown",
                            c.status
                        )
                    })?
                };
                Some(pb::ToolCall {
                    tool_name: c.tool_name,
                    arguments_json: c.arguments_json,
                    result: c.result,
                    status: status as i32,
                    error_details: c.error_details,
                })
            }
        };
        turns.push(pb::NewTurn {
            role: role as i32,
            speaker: t.speaker,
            content: t.content,
            tool_call,
            metadata: t.metadata.into_iter().collect(),
            ..Default::default()
        });
    }
    if turns.is_empty() {
        return Err("the file holds no turns".into());
    }
    Ok(turns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_turns_and_a_bad_line_is_named() {
        let text = "{\"role\":\"user\",\"content\":\"hi\"}\n\n{\"role\":\"Assistant\",\"speaker\":\"a\",\"content\":\"x\",\"tool_call\":{\"tool_name\":\"t\",\"status\":\"failure\"}}\n";
        let turns = read(&mut text.as_bytes()).unwrap();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[1].role, pb::Role::Assistant as i32);
        assert_eq!(
            turns[1].tool_call.as_ref().unwrap().status,
            pb::ToolCallStatus::Failure as i32
        );
        let e = read(&mut "{\"role\":\"user\"}\n{\"role\":\"robot\"}\n".as_bytes()).unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = read(&mut "{\"role\":\"user\",\"colour\":1}\n".as_bytes()).unwrap_err();
        assert!(e.starts_with("line 1:"), "{e}");
        assert!(read(&mut "\n".as_bytes()).is_err());
    }
}
