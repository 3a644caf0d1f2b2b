//! The rule-based summarizer: `FoldState` (see `engine`) behind the
//! [`Summarizer`] trait, its state stored as postcard bytes. It also reads
//! the fold records written before states were opaque. No I/O.

use serde::{Deserialize, Serialize};

use super::{FoldState, Folded, StateError, Summarizer, SummaryContext};
use crate::model::{FoldRecord, Turn, LEGACY_FOLD_FORMAT};

/// The rule-based summarizer's name in fold records.
pub const NAME: &str = "mnemo-rules";
/// Layout of its state: 1 = postcard of `FoldState`.
pub const FORMAT: u32 = 1;

/// The deterministic, model-free summarizer.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuleBased;

/// The whole fold record as record formats 1 to 3 stored it, with the
/// rule engine's state inline.
#[derive(Deserialize, Serialize)]
struct LegacyRecord {
    state: FoldState,
    through_seq: u64,
    through_tokens: u64,
    chain_hash: [u8; 32],
}

fn encode(state: &FoldState) -> Result<Vec<u8>, StateError> {
    postcard::to_stdvec(state).map_err(|e| StateError(format!("cannot encode fold state: {e}")))
}

fn decode(bytes: &[u8]) -> Result<FoldState, StateError> {
    postcard::from_bytes(bytes)
        .map_err(|e| StateError(format!("fold state cannot be decoded: {e}")))
}

impl Summarizer for RuleBased {
    fn name(&self) -> &str {
        NAME
    }

    fn format(&self) -> u32 {
        FORMAT
    }

    fn label(&self) -> String {
        format!("{NAME}/{}", env!("CARGO_PKG_VERSION"))
    }

    fn fold(
        &self,
        previous: Option<&FoldRecord>,
        turns: &[Turn],
        ctx: &SummaryContext,
    ) -> Result<Folded, StateError> {
        let mut state = match previous {
            Some(r) => decode(&r.state)?,
            None => FoldState::default(),
        };
        state.fold(turns);
        Ok(Folded {
            summary: state.render(ctx),
            state: encode(&state)?,
            label: None,
            notes: Vec::new(),
        })
    }

    fn upgrade_legacy(&self, record: &FoldRecord) -> Option<Result<FoldRecord, StateError>> {
        if record.format != LEGACY_FOLD_FORMAT || record.summarizer != NAME {
            return None;
        }
        Some(
            postcard::from_bytes::<LegacyRecord>(&record.state)
                .map_err(|e| StateError(format!("old fold record cannot be decoded: {e}")))
                .and_then(|old| {
                    Ok(FoldRecord {
                        summarizer: NAME.to_owned(),
                        format: FORMAT,
                        state: encode(&old.state)?,
                        through_seq: old.through_seq,
                        through_tokens: old.through_tokens,
                        chain_hash: old.chain_hash,
                    })
                }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, Trigger};

    fn turn(seq: u64, text: &str) -> Turn {
        Turn {
            seq,
            role: if seq % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            },
            speaker: String::new(),
            content: text.to_owned(),
            client_time: None,
            server_time: 1,
            tool_call: None,
            metadata: Default::default(),
            token_count: 3,
        }
    }

    fn ctx() -> SummaryContext {
        SummaryContext {
            namespace: String::new(),
            context_limit_tokens: 8000,
            bundle_tokens: 0,
            trigger: Trigger::Requested,
            version: 1,
            now: 5,
            high_risk: false,
            wait_free: false,
        }
    }

    #[test]
    fn a_legacy_record_upgrades_to_the_same_state() {
        let turns = [
            turn(1, "I need to rebook flight AB123 to Friday."),
            turn(2, "I'll check the fares and email you by Thursday."),
        ];
        let mut state = FoldState::default();
        state.fold(&turns);
        let old = LegacyRecord {
            state: state.clone(),
            through_seq: 2,
            through_tokens: 6,
            chain_hash: [7; 32],
        };
        let stored = FoldRecord {
            summarizer: NAME.into(),
            format: LEGACY_FOLD_FORMAT,
            state: postcard::to_stdvec(&old).unwrap(),
            ..Default::default()
        };
        let up = RuleBased.upgrade_legacy(&stored).unwrap().unwrap();
        assert_eq!((up.through_seq, up.through_tokens), (2, 6));
        assert_eq!(up.chain_hash, [7; 32]);
        assert_eq!(decode(&up.state).unwrap(), state);
        assert!(RuleBased.reads(&up));
        // Folding on from the upgraded state equals folding from scratch.
        let more = [turn(3, "Also, what's the baggage allowance?")];
        let on = RuleBased.fold(Some(&up), &more, &ctx()).unwrap();
        let all: Vec<Turn> = turns.iter().chain(&more).cloned().collect();
        assert_eq!(on.summary, super::super::summarize(&all, &ctx()));
    }

    #[test]
    fn a_damaged_state_is_an_error_not_a_panic() {
        let bad = FoldRecord {
            summarizer: NAME.into(),
            format: FORMAT,
            state: vec![0xff; 3],
            ..Default::default()
        };
        assert!(RuleBased.fold(Some(&bad), &[], &ctx()).is_err());
    }
}
