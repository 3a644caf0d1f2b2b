//! JSON renderings of the contract's messages for `--json`: stable field
//! names (the proto's), enums by name, one object per line for lists and
//! streams.

use serde_json::{json, Value};

use crate::pb;

fn enum_name(name: Option<&str>, prefix: &str) -> String {
    name.map_or("unknown", |n| n.trim_start_matches(prefix))
        .to_lowercase()
}

fn time(t: &Option<prost_types::Timestamp>) -> Value {
    match t {
        Some(t) => json!(t.seconds as i128 * 1_000_000_000 + i128::from(t.nanos)),
        None => Value::Null,
    }
}

/// A session.
pub fn session(s: &pb::Session) -> Value {
    json!({
        "namespace": s.namespace,
        "session_id": s.session_id,
        "subject_id": s.subject_id,
        "title": s.title,
        "state": super::state_name(s.state),
        "owner_agent": s.owner_agent,
        "lease_epoch": s.lease_epoch,
        "turn_count": s.turn_count,
        "next_seq": s.next_seq,
        "total_tokens": s.total_tokens,
        "summary_version": s.summary_version,
        "metadata": s.metadata,
        "create_time_unix_nanos": time(&s.create_time),
        "update_time_unix_nanos": time(&s.update_time),
        "summarized_through_seq": s.summarized_through_seq,
    })
}

/// A turn.
pub fn turn(t: &pb::Turn) -> Value {
    json!({
        "seq": t.seq,
        "role": super::role_name(t.role),
        "speaker": t.speaker,
        "content": t.content,
        "tool_call": t.tool_call.as_ref().map(|c| json!({
            "tool_name": c.tool_name,
            "arguments_json": c.arguments_json,
            "result": c.result,
            "status": enum_name(pb::ToolCallStatus::try_from(c.status).ok().map(|x| x.as_str_name()), "TOOL_CALL_STATUS_"),
            "error_details": c.error_details,
        })),
        "metadata": t.metadata,
        "token_count": t.token_count,
        "server_time_unix_nanos": time(&t.server_time),
        "client_time_unix_nanos": time(&t.client_time),
    })
}

/// A watch event.
pub fn event(ev: &pb::WatchSessionResponse) -> Value {
    use pb::watch_session_response::Event;
    match &ev.event {
        Some(Event::Turn(t)) => json!({"event": "turn", "turn": turn(t)}),
        Some(Event::SummaryWritten(s)) => json!({
            "event": "summary_written",
            "version": s.version,
            "covers_through_seq": s.covers_through_seq,
        }),
        Some(Event::Handoff(h)) => json!({
            "event": "handoff",
            "from_agent": h.from_agent,
            "to_agent": h.to_agent,
            "lease_epoch": h.lease_epoch,
            "reason": h.reason,
        }),
        Some(Event::StateChanged(s)) => json!({
            "event": "state_changed",
            "state": super::state_name(s.state),
            "at_seq": s.at_seq,
        }),
        None => json!({"event": "unknown"}),
    }
}

/// A bundle's main fields.
pub fn bundle(b: &pb::ContextBundle) -> Value {
    let manifest = b.manifest.clone().unwrap_or_default();
    let ranges = |v: &[pb::SeqRange]| -> Vec<[u64; 2]> {
        v.iter().map(|r| [r.first_seq, r.last_seq]).collect()
    };
    let sections: Vec<serde_json::Value> = manifest
        .sections
        .iter()
        .map(|e| {
            json!({
                "section": pb::BundleSection::try_from(e.section)
                    .map_or("?", |s| s.as_str_name()),
                "available": e.available,
                "included": e.included,
                "shortened": e.shortened,
                "omitted": e.omitted,
                "included_seqs": ranges(&e.included_seqs),
                "shortened_seqs": ranges(&e.shortened_seqs),
                "omitted_seqs": ranges(&e.omitted_seqs),
                "tokens": e.tokens,
            })
        })
        .collect();
    let v = json!({
        "namespace": b.namespace,
        "session_id": b.session_id,
        "state": super::state_name(b.state),
        "owner_agent": b.owner_agent,
        "lease_epoch": b.lease_epoch,
        "as_of_seq": b.as_of_seq,
        "budget_tokens": b.budget_tokens,
        "token_count": b.token_count,
        "rendered_text": b.rendered_text,
        "carried_actions": b.carried_actions.iter().map(|c| {
            let r = c.r#ref.clone().unwrap_or_default();
            json!({
                "session_id": r.session_id,
                "action_seq": r.action_seq,
                "action": c.action.as_ref().map(|a| a.action.clone()).unwrap_or_default(),
            })
        }).collect::<Vec<_>>(),
        "facts": b.facts.iter().map(|f| json!({"fact_id": f.fact_id, "key": f.key, "text": f.text})).collect::<Vec<_>>(),
        "episodes": b.episodes.iter().map(|e| json!({"session_id": e.session_id, "topic": e.topic})).collect::<Vec<_>>(),
        "manifest": {
            "summary_version": manifest.summary_version,
            "complete": manifest.complete,
            "sections": sections,
        },
    });
    v
}
