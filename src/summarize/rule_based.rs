//! The rule-based summarizer: `FoldState` (see `engine`) behind the
//! [`Summarizer`] trait, its state stored as postcard bytes. States of an
//! older layout (and the fold records written before states were opaque,
//! which hold the first layout) are not read: such a session is folded
//! again from its first turn, which gives what the current rules make of
//! it. No I/O.

use super::{FoldState, Folded, StateError, Summarizer, SummaryContext};
use crate::model::{FoldRecord, Turn};

/// The rule-based summarizer's name in fold records.
pub const NAME: &str = "mnemo-rules";
/// Layout of its state: 1 = postcard of `FoldState`; 2 = the same with
/// the meeting fields (conversational words, the open proposal). Postcard
/// is positional, so a new field is a new layout.
pub const FORMAT: u32 = 2;

/// The deterministic, model-free summarizer.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuleBased;

fn encode(state: &FoldState) -> Result<Vec<u8>, StateError> {
    postcard::to_stdvec(state)
        .map_err(|e| StateError::Unreadable(format!("cannot encode fold state: {e}")))
}

fn decode(bytes: &[u8]) -> Result<FoldState, StateError> {
    postcard::from_bytes(bytes)
        .map_err(|e| StateError::Unreadable(format!("fold state cannot be decoded: {e}")))
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, Trigger, LEGACY_FOLD_FORMAT};

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
    fn older_layouts_are_folded_again_from_the_first_turn() {
        let turns = [
            turn(1, "I need to rebook flight AB123 to Friday."),
            turn(2, "I'll check the fares and email you by Thursday."),
        ];
        let mut state = FoldState::default();
        state.fold(&turns);
        for format in [LEGACY_FOLD_FORMAT, 1] {
            let stored = FoldRecord {
                summarizer: NAME.into(),
                format,
                state: encode(&state).unwrap(),
                ..Default::default()
            };
            assert!(!RuleBased.reads(&stored), "format {format}");
            assert!(RuleBased.upgrade_legacy(&stored).is_none());
        }
        let current = FoldRecord {
            summarizer: NAME.into(),
            format: FORMAT,
            state: encode(&state).unwrap(),
            ..Default::default()
        };
        assert!(RuleBased.reads(&current));
        // Folding on from a current state equals folding from scratch.
        let more = [turn(3, "Also, what's the baggage allowance?")];
        let on = RuleBased.fold(Some(&current), &more, &ctx()).unwrap();
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
