//! Retention: what a retention pass removes from a session, what it
//! removed (per kind), and the mark a session keeps of it, so that a
//! summary or episode citing a removed turn can say so.

use serde::{Deserialize, Serialize};

use super::UnixNanos;

/// What retention removed from a session, kept beside the session record
/// (key `W`). Turns are always removed from the start, so what is gone is
/// `1..=turns_through_seq`; their seqs are never given out again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionMark {
    /// Turns with a seq up to this one were removed (0 = none).
    pub turns_through_seq: u64,
    /// How many turns that was (RemoveLastTurn may have freed seqs at the
    /// end before, so it can be less than `turns_through_seq`).
    pub turns_removed: u64,
    /// When turns were last removed.
    pub turns_removed_at: UnixNanos,
    /// Summary versions up to this one were removed (0 = none).
    pub summaries_through_version: u64,
    /// When summary versions were last removed.
    pub summaries_removed_at: UnixNanos,
}

/// What a retention pass should remove from one session now (decided by
/// the domain; the store removes at most a batch of it per call).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCut {
    /// Remove the turns with seq up to this one (0 = none).
    pub turns_through_seq: u64,
    /// Remove summary versions up to this one (0 = none).
    pub summaries_through_version: u64,
    /// Remove audit records up to this audit seq (0 = none).
    pub audit_through_seq: u64,
    /// Remove the session's episode.
    pub episode: bool,
}

impl SessionCut {
    /// Whether nothing is to go.
    pub fn is_empty(&self) -> bool {
        *self == SessionCut::default()
    }
}

/// Records removed (or due) per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionCounts {
    /// Turns.
    pub turns: u64,
    /// Summary versions.
    pub summaries: u64,
    /// Episodes.
    pub episodes: u64,
    /// Audit records.
    pub audit_records: u64,
    /// Fact versions (current and superseded).
    pub facts: u64,
}

impl RetentionCounts {
    /// The kinds' names, as metrics and the dry run label them.
    pub const KINDS: [&'static str; 5] =
        ["turns", "summaries", "episodes", "audit_records", "facts"];

    /// Adds `o`.
    pub fn add(&mut self, o: &RetentionCounts) {
        self.turns += o.turns;
        self.summaries += o.summaries;
        self.episodes += o.episodes;
        self.audit_records += o.audit_records;
        self.facts += o.facts;
    }

    /// Every record counted.
    pub fn total(&self) -> u64 {
        self.turns + self.summaries + self.episodes + self.audit_records + self.facts
    }

    /// The counts in the order of [`Self::KINDS`].
    pub fn by_kind(&self) -> [u64; 5] {
        [
            self.turns,
            self.summaries,
            self.episodes,
            self.audit_records,
            self.facts,
        ]
    }
}

/// Turns retention removed from the start of a session, as readers are
/// told of them (ListTurns, GetSummary, bundles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnsRemoved {
    /// Seqs `1..=through_seq` are gone.
    pub through_seq: u64,
    /// How many turns that was.
    pub count: u64,
    /// When turns were last removed.
    pub at: UnixNanos,
}

impl RetentionMark {
    /// The turns removed, if any.
    pub fn turns_removed(&self) -> Option<TurnsRemoved> {
        (self.turns_through_seq > 0).then_some(TurnsRemoved {
            through_seq: self.turns_through_seq,
            count: self.turns_removed,
            at: self.turns_removed_at,
        })
    }
}

impl TurnsRemoved {
    /// One line that says so, for rendered summaries and bundles: what is
    /// cited of turns `1..=through_seq` can no longer be looked up.
    pub fn note(&self) -> String {
        let days = self.at.div_euclid(86_400 * 1_000_000_000);
        let (y, m, d) = super::calendar::civil_from_days(days);
        format!(
            "[Turns 1-{} of this session were removed by a retention policy on {y:04}-{m:02}-{d:02}; what cites them can no longer be checked against the transcript.]",
            self.through_seq
        )
    }
}
