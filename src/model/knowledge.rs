//! Long-term memory's values: facts (semantic memory, versioned, never
//! overwritten) and episodes (a subject's past sessions) with the pending
//! actions they carry over. Plain data; the rules live in the domain.

use serde::{Deserialize, Serialize};

use super::{Decision, Outcome, PendingAction, SessionState, UnixNanos};

/// Who wrote a fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FactOrigin {
    /// A client, through PutFact.
    Client,
    /// mnemo, from a session's summary or a stated preference.
    Extracted,
}

/// Where a fact was stated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactSource {
    /// The session.
    pub session_id: String,
    /// The turn; 0 = the session as a whole.
    pub seq: u64,
}

/// A stored fact version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// Tenancy boundary.
    pub namespace: String,
    /// ULID.
    pub fact_id: String,
    /// The subject it is about.
    pub subject_id: String,
    /// Optional key; empty = unkeyed.
    pub key: String,
    /// The fact in the words it was stated in.
    pub text: String,
    /// Where it was stated; the first is the original.
    pub sources: Vec<FactSource>,
    /// Tags.
    pub tags: Vec<String>,
    /// Who wrote it.
    pub origin: FactOrigin,
    /// The version this one replaced.
    pub supersedes: String,
    /// The version that replaced this one; empty while current.
    pub superseded_by: String,
    /// Stored at.
    pub created_at: UnixNanos,
    /// Last changed at.
    pub updated_at: UnixNanos,
}

impl Fact {
    /// Whether this is the current version.
    pub fn is_current(&self) -> bool {
        self.superseded_by.is_empty()
    }

    /// What makes two facts of a subject the same fact.
    pub fn identity(&self) -> FactIdentity {
        FactIdentity::of(&self.key, &self.text)
    }
}

/// What makes two facts of a subject the same fact: the same key, or for
/// unkeyed facts the same normalized words.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FactIdentity {
    /// A keyed fact's key.
    Key(String),
    /// An unkeyed fact's normalized words.
    Words(String),
}

impl FactIdentity {
    /// The identity of a fact with `key` (empty: unkeyed) and `text`.
    pub fn of(key: &str, text: &str) -> FactIdentity {
        if key.is_empty() {
            FactIdentity::Words(normalized(text))
        } else {
            FactIdentity::Key(key.to_owned())
        }
    }
}

/// The words of a text, lowercase, in order, punctuation dropped: two
/// facts with the same normalized words are the same fact.
pub fn normalized(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What to write for a new fact, decided against what the subject has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactPlan {
    /// The fact to store (new, or the existing one merged).
    pub fact: Fact,
    /// The outcome; for `Superseded`, the old version to rewrite.
    pub outcome: PutOutcome,
    /// Whether anything must be written: not for a merge that added no
    /// source or tag, nor when a client fact is kept.
    pub write: bool,
}

/// A fact to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFact {
    /// Tenancy boundary.
    pub namespace: String,
    /// Required subject.
    pub subject_id: String,
    /// Optional key.
    pub key: String,
    /// The text.
    pub text: String,
    /// Where it was stated.
    pub source: Option<FactSource>,
    /// Tags.
    pub tags: Vec<String>,
    /// Who writes it.
    pub origin: FactOrigin,
}

/// What storing a fact did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutOutcome {
    /// A new fact.
    Created,
    /// A new version; the previous one, now superseded.
    Superseded(Box<Fact>),
    /// The subject already had it; sources and tags were merged in.
    Merged,
    /// An extracted fact lost to the client's fact of the same key, which
    /// is returned unchanged.
    KeptClientFact,
}

/// Filters of a fact listing.
#[derive(Debug, Clone, Default)]
pub struct FactFilter {
    /// Only this subject.
    pub subject_id: Option<String>,
    /// Only facts with this tag.
    pub tag: Option<String>,
    /// Only facts with this key.
    pub key: Option<String>,
    /// Superseded versions too.
    pub include_history: bool,
}

impl FactFilter {
    /// Whether `f` passes.
    pub fn matches(&self, f: &Fact) -> bool {
        (self.include_history || f.is_current())
            && self.subject_id.as_ref().is_none_or(|s| *s == f.subject_id)
            && self.key.as_ref().is_none_or(|k| *k == f.key)
            && self.tag.as_ref().is_none_or(|t| f.tags.contains(t))
    }
}

/// A past session of a subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Episode {
    /// Tenancy boundary.
    pub namespace: String,
    /// The subject.
    pub subject_id: String,
    /// The session (also the episode's id).
    pub session_id: String,
    /// The session's creation.
    pub started_at: UnixNanos,
    /// When it stopped.
    pub ended_at: UnixNanos,
    /// What it was about.
    pub topic: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The summary's prose.
    pub prose: String,
    /// What the user wanted.
    pub user_intent: String,
    /// Decisions made.
    pub decisions: Vec<Decision>,
    /// Actions pending when it stopped, minus those marked done since.
    pub pending_actions: Vec<PendingAction>,
    /// The summary version it was made from.
    pub summary_version: u64,
    /// The newest turn that summary covers.
    pub last_seq: u64,
    /// CLOSED or IDLE.
    pub ended_as: SessionState,
}

/// Identifies a pending action: its session and first evidence seq.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ActionRef {
    /// The session whose summary holds it.
    pub session_id: String,
    /// Its first evidence seq.
    pub action_seq: u64,
}

impl Episode {
    /// Its searchable text: topic, intent, prose, decisions and actions.
    pub fn text(&self) -> String {
        let mut parts = vec![
            self.topic.clone(),
            self.user_intent.clone(),
            self.prose.clone(),
        ];
        parts.extend(self.decisions.iter().map(|d| d.decision.clone()));
        parts.extend(self.pending_actions.iter().map(|a| a.action.clone()));
        parts.retain(|p| !p.is_empty());
        parts.join("\n")
    }
}

impl PendingAction {
    /// Its first evidence seq: its identity within the session.
    pub fn action_seq(&self) -> u64 {
        self.evidence_seqs.first().copied().unwrap_or(0)
    }
}

/// A pending action of a past session, carried to the subject's later
/// sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarriedAction {
    /// Where it was raised.
    pub action_ref: ActionRef,
    /// The action.
    pub action: PendingAction,
    /// When its session stopped (newest carried actions rank first).
    pub ended_at: UnixNanos,
}
