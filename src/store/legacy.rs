//! Decoders for records written in older formats (see `codec`). postcard
//! is not self-describing, so a stored type that gains a field gets a new
//! format number, and its old layout lives on here, converted on read.
//! Records are rewritten in the current format the next time they change.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::codec::{self, FORMAT_V1};
use crate::error::Result;
use crate::memory::types::{Session, SessionSettings, SessionState, SummaryProgress, UnixNanos};

/// A session as format 1 stored it (before ownership and idle tracking).
#[derive(Deserialize)]
struct SessionV1 {
    namespace: String,
    session_id: String,
    subject_id: String,
    title: String,
    metadata: BTreeMap<String, String>,
    settings: SessionSettings,
    state: SessionState,
    turn_count: u64,
    next_seq: u64,
    total_tokens: u64,
    created_at: UnixNanos,
    updated_at: UnixNanos,
    summary: SummaryProgress,
}

impl From<SessionV1> for Session {
    fn from(v: SessionV1) -> Session {
        Session {
            namespace: v.namespace,
            session_id: v.session_id,
            subject_id: v.subject_id,
            title: v.title,
            metadata: v.metadata,
            settings: v.settings,
            state: v.state,
            turn_count: v.turn_count,
            next_seq: v.next_seq,
            total_tokens: v.total_tokens,
            created_at: v.created_at,
            updated_at: v.updated_at,
            summary: v.summary,
            owner_agent: String::new(),
            lease_epoch: 1,
            // Format 1 changed `updated_at` only on appends and close.
            last_active_at: v.updated_at,
        }
    }
}

/// Decodes a session record of any known format.
pub fn decode_session(bytes: &[u8], what: impl Fn() -> String) -> Result<Session> {
    let (format, _) = codec::open(bytes, &what)?;
    if format == FORMAT_V1 {
        codec::decode::<SessionV1>(bytes, what).map(Session::from)
    } else {
        codec::decode(bytes, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    /// Format 1's layout, for writing test records.
    #[derive(Serialize)]
    struct WriteV1<'a>(
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        BTreeMap<String, String>,
        SessionSettings,
        SessionState,
        u64,
        u64,
        u64,
        UnixNanos,
        UnixNanos,
        SummaryProgress,
    );

    #[test]
    fn a_format_1_session_decodes_with_defaults_for_new_fields() {
        let progress = SummaryProgress {
            version: 2,
            through_seq: 20,
            ..Default::default()
        };
        let old = WriteV1(
            "ns",
            "s1",
            "user:1",
            "t",
            BTreeMap::new(),
            SessionSettings::default(),
            SessionState::Closed,
            25,
            26,
            900,
            10,
            20,
            progress.clone(),
        );
        let bytes = codec::encode_as(FORMAT_V1, &old).unwrap();
        let s = decode_session(&bytes, || "s".into()).unwrap();
        assert_eq!(
            (s.session_id.as_str(), s.subject_id.as_str()),
            ("s1", "user:1")
        );
        assert_eq!((s.turn_count, s.next_seq, s.total_tokens), (25, 26, 900));
        assert_eq!(s.state, SessionState::Closed);
        assert_eq!(s.summary, progress);
        assert_eq!(
            (s.owner_agent.as_str(), s.lease_epoch, s.last_active_at),
            ("", 1, 20)
        );
        // And the current format round-trips the new fields.
        let mut now = s.clone();
        now.owner_agent = "agent-a".into();
        now.lease_epoch = 3;
        let back = decode_session(&codec::encode(&now).unwrap(), || "s".into()).unwrap();
        assert_eq!(back, now);
    }
}
