//! Decoders for records written in older formats (see `codec`). postcard
//! is not self-describing, so a stored type that gains a field gets a new
//! format number, and its old layout lives on here, converted on read.
//! Records are rewritten in the current format the next time they change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::codec::{self, FORMAT_V1, FORMAT_V2, FORMAT_V3, FORMAT_V4};
use crate::error::Result;
use crate::model::{
    Encoding, FoldRecord, RiskLevel, Session, SessionSettings, SessionState, SummaryProgress,
    UnixNanos, LEGACY_FOLD_FORMAT,
};

/// Session settings as formats 1 and 2 stored them (before fact
/// extraction could be turned off).
#[derive(Serialize, Deserialize)]
struct SettingsV1 {
    summary_every_turns: u32,
    context_limit_tokens: u64,
    idle_timeout_seconds: u32,
    encoding: Encoding,
    risk_level: RiskLevel,
}

impl From<SettingsV1> for SessionSettings {
    fn from(v: SettingsV1) -> SessionSettings {
        SessionSettings {
            summary_every_turns: v.summary_every_turns,
            context_limit_tokens: v.context_limit_tokens,
            idle_timeout_seconds: v.idle_timeout_seconds,
            encoding: v.encoding,
            risk_level: v.risk_level,
            fact_extraction: true,
        }
    }
}

/// A session as format 1 stored it (before ownership and idle tracking).
#[derive(Deserialize)]
struct SessionV1 {
    namespace: String,
    session_id: String,
    subject_id: String,
    title: String,
    metadata: BTreeMap<String, String>,
    settings: SettingsV1,
    state: SessionState,
    turn_count: u64,
    next_seq: u64,
    total_tokens: u64,
    created_at: UnixNanos,
    updated_at: UnixNanos,
    summary: SummaryProgress,
}

/// A session as format 2 stored it (before fact extraction settings and
/// episodes).
#[derive(Deserialize)]
struct SessionV2 {
    v1: SessionV1,
    owner_agent: String,
    lease_epoch: u64,
    last_active_at: UnixNanos,
}

impl From<SessionV1> for Session {
    fn from(v: SessionV1) -> Session {
        // Format 1 changed `updated_at` only on appends and close.
        let last_active_at = v.updated_at;
        Session::from(SessionV2 {
            v1: v,
            owner_agent: String::new(),
            lease_epoch: 1,
            last_active_at,
        })
    }
}

impl From<SessionV2> for Session {
    fn from(v: SessionV2) -> Session {
        let SessionV2 {
            v1: v,
            owner_agent,
            lease_epoch,
            last_active_at,
        } = v;
        Session {
            namespace: v.namespace,
            session_id: v.session_id,
            subject_id: v.subject_id,
            title: v.title,
            metadata: v.metadata,
            settings: v.settings.into(),
            state: v.state,
            turn_count: v.turn_count,
            next_seq: v.next_seq,
            total_tokens: v.total_tokens,
            created_at: v.created_at,
            updated_at: v.updated_at,
            summary: v.summary,
            owner_agent,
            lease_epoch,
            last_active_at,
            // Sessions stored before episodes existed have none; a stopped
            // one gets its episode from the start-up rescan.
            episode_version: 0,
            removed_turns: 0,
        }
    }
}

/// A session as formats 3 and 4 stored it (before `removed_turns`).
#[derive(Deserialize)]
struct SessionV4 {
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
    owner_agent: String,
    lease_epoch: u64,
    last_active_at: UnixNanos,
    episode_version: u64,
}

impl From<SessionV4> for Session {
    fn from(v: SessionV4) -> Session {
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
            owner_agent: v.owner_agent,
            lease_epoch: v.lease_epoch,
            last_active_at: v.last_active_at,
            episode_version: v.episode_version,
            // Removals before format 5 were not counted.
            removed_turns: 0,
        }
    }
}

/// Decodes a session record of any known format.
pub fn decode_session(bytes: &[u8], what: impl Fn() -> String) -> Result<Session> {
    let (format, _) = codec::open(bytes, &what)?;
    match format {
        FORMAT_V1 => codec::decode::<SessionV1>(bytes, what).map(Session::from),
        FORMAT_V2 => codec::decode::<SessionV2>(bytes, what).map(Session::from),
        FORMAT_V3 | FORMAT_V4 => codec::decode::<SessionV4>(bytes, what).map(Session::from),
        _ => codec::decode(bytes, what),
    }
}

/// The summarizer that wrote every fold record before format 4.
const LEGACY_SUMMARIZER: &str = "mnemo-rules";

/// Decodes a fold record of any format. Before format 4 the payload was
/// the rule engine's whole record, which only that summarizer can read:
/// it is handed over as is, marked [`LEGACY_FOLD_FORMAT`].
pub fn decode_fold(bytes: &[u8], what: impl Fn() -> String) -> Result<FoldRecord> {
    let (format, payload) = codec::open(bytes, &what)?;
    if format >= FORMAT_V4 {
        return codec::decode(bytes, what);
    }
    Ok(FoldRecord {
        summarizer: LEGACY_SUMMARIZER.to_owned(),
        format: LEGACY_FOLD_FORMAT,
        state: payload.to_vec(),
        ..FoldRecord::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    /// Format 1's layout, for writing test records.
    #[derive(Serialize)]
    struct WriteV1<'a>(
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        BTreeMap<String, String>,
        SettingsV1,
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
            SettingsV1 {
                summary_every_turns: 7,
                context_limit_tokens: 4096,
                idle_timeout_seconds: 60,
                encoding: Encoding::O200kBase,
                risk_level: RiskLevel::High,
            },
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
            (s.settings.summary_every_turns, s.settings.encoding),
            (7, Encoding::O200kBase)
        );
        assert!(s.settings.fact_extraction, "extraction defaults to on");
        assert_eq!(s.episode_version, 0);
        assert_eq!(
            (s.owner_agent.as_str(), s.lease_epoch, s.last_active_at),
            ("", 1, 20)
        );
        // And the current format round-trips the new fields.
        let mut now = s.clone();
        now.owner_agent = "agent-a".into();
        now.lease_epoch = 3;
        now.settings.fact_extraction = false;
        now.episode_version = 2;
        let back = decode_session(&codec::encode(&now).unwrap(), || "s".into()).unwrap();
        assert_eq!(back, now);
        // A format-2 record: format 1's fields, then the owner's.
        let v2 = (old, "agent-b", 4u64, 99i64);
        let bytes = codec::encode_as(FORMAT_V2, &v2).unwrap();
        let s = decode_session(&bytes, || "s".into()).unwrap();
        assert_eq!(
            (s.owner_agent.as_str(), s.lease_epoch, s.last_active_at),
            ("agent-b", 4, 99)
        );
        assert!(s.settings.fact_extraction);
    }

    /// Why every stored type that gains a field needs a new format number:
    /// postcard is positional, so `#[serde(default)]` does not make an
    /// older record decode — the decoder runs out of bytes, or (worse)
    /// reads the next record's bytes as the new field. Only the format byte
    /// tells the layouts apart.
    #[test]
    fn a_gained_field_needs_a_format_bump_serde_default_is_not_enough() {
        #[derive(Serialize)]
        struct Before {
            name: String,
            count: u64,
        }
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)] // only its layout matters here
        struct After {
            name: String,
            count: u64,
            #[serde(default)]
            added: u64,
        }
        let old = codec::encode_as(
            FORMAT_V1,
            &Before {
                name: "x".into(),
                count: 7,
            },
        )
        .unwrap();
        let as_new: Result<After> = codec::decode(&old, || "record".into());
        assert!(
            matches!(as_new, Err(crate::Error::DataLoss(ref m)) if m.contains("cannot be decoded")),
            "{as_new:?}"
        );
        // A fold record of formats 1 to 3 (the rule engine's whole state
        // inline) is handed over as a legacy record, not misread.
        let legacy = codec::encode_as(codec::FORMAT_V3, &(1u8, 2u64, 3u64, [9u8; 32])).unwrap();
        let f = decode_fold(&legacy, || "fold".into()).unwrap();
        assert_eq!(f.format, LEGACY_FOLD_FORMAT);
        assert_eq!(f.summarizer, LEGACY_SUMMARIZER);
        assert_eq!(f.state, &legacy[5..]);
        // And one written now round-trips as it is.
        let now = FoldRecord {
            summarizer: "mnemo-rules".into(),
            format: 1,
            state: vec![1, 2, 3],
            through_seq: 4,
            through_tokens: 5,
            chain_hash: [6; 32],
        };
        let back = decode_fold(&codec::encode(&now).unwrap(), || "fold".into()).unwrap();
        assert_eq!(back, now);
    }
}
