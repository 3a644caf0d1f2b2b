//! Context bundles: a session rehydrated into what an agent needs to carry
//! on, within a token budget.
//!
//! - The domain (`memory::gather`) reads the [`Inputs`]: the session, its
//!   latest summary as folded and the action statuses set since, the turns
//!   since the fold (within a bounded window), the subject's memory and
//!   what was retrieved for the request. This module never reads storage.
//! - `pack` chooses what fits and renders the text in three parts, from
//!   the most stable to the most volatile, so that successive bundles of a
//!   session share their beginning (a prompt cache reuses it):
//!   1. **stable**: the header (session, subject, owner), the subject's
//!      carried-over actions, facts and episodes, then the running summary
//!      and its sections: it changes only when the session is folded or the
//!      subject's memory changes. It holds nothing a request decides (no
//!      turn count, no reader, no query ranking, no budget note), and what
//!      of it fits depends only on the budget.
//!   2. **log** (`log`): the turns since the fold, append-only; cut in rare
//!      big steps (a block of the oldest turns at once).
//!   3. **request**: memory retrieved for the request, the point in time,
//!      the reader, and the note on what the budget cut.
//!
//!   [`Bundle::stable_end`] and [`Bundle::log_end`] say where the first
//!   two parts end (in tokens, exactly, and bytes).
//! - `compress` shortens older turns.
//!
//! Every turn through `as_of_seq` ends up covered by the summary, included
//! (whole or shortened) or listed as omitted in the manifest.
//!
//! A session with a subject also brings the subject's long-term memory:
//! pending actions carried over from its past sessions, its current facts
//! and its past episodes, each read with a fixed cap.
//!
//! Memory that bears on the request is retrieved by the domain (the
//! search index over this session's older turns, the subject's other
//! sessions, facts and episodes) and shown verbatim with a citation in
//! its own section ([`Section::Recalled`]).
//!
//! No section crowds out the rest: the stable part takes at most a share
//! of the budget, each of its sections a share of that; the log takes a
//! share of what is left; retrieved memory what remains. The shares come
//! in two fixed steps (`pack::SPLITS`, named by [`Layout`] in the
//! manifest), chosen by whether the request has a query: what the agent
//! asked for is worth most to this request, so the stable part and the
//! older log give way to it, and every request with a query chooses the
//! same step (their bundles share their beginning, even when a query
//! retrieves nothing).
//! A session whose whole transcript fits is given as that transcript
//! (the log, from turn 1) under a one-line header, never as summary plus
//! transcript.

mod assemble;
mod candidates;
pub mod compress;
mod lines;
mod log;
mod pack;
mod recalled;

use std::collections::BTreeMap;

use crate::model::{
    ActionStatus, CarriedAction, Decision, Encoding, Episode, Fact, KeyFact, OpenQuestion,
    PendingAction, Role, Session, SessionSummary, Turn, UnixNanos,
};

/// Smallest budget a bundle may be asked for.
pub const MIN_BUDGET: u32 = 256;
/// Largest budget a bundle may be asked for.
pub const MAX_BUDGET: u32 = 1_000_000;
/// Interactions kept verbatim when the request does not say.
pub const DEFAULT_RECENT_INTERACTIONS: u32 = 8;
/// Most interactions a request may ask to keep verbatim.
pub const MAX_RECENT_INTERACTIONS: u32 = 1000;
/// Longest `query`, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;
/// Tokens a rendered turn costs beyond its text (its "[#seq] role speaker:"
/// prefix), at least; bounds how many turns one budget can need.
pub const MIN_TURN_COST: u64 = 4;
/// Tokens a shortened turn costs at most, about (150 characters).
pub const MAX_SHORT_TURN_COST: u64 = 64;

/// What a client asks for.
#[derive(Debug, Clone, Default)]
pub struct BundleRequest {
    /// Most tokens the rendered text may take.
    pub budget_tokens: u32,
    /// Tokenizer to measure with; `None` = the session's.
    pub encoding: Option<Encoding>,
    /// What the agent is about to do; ranks summary items.
    pub query: String,
    /// The agent that will read the bundle.
    pub agent_id: String,
    /// Validated (at most [`MAX_RECENT_INTERACTIONS`]) but no longer sets
    /// the verbatim window: the log is cut in blocks of tokens (`log.rs`).
    pub recent_interactions: u32,
    /// Most bytes of rendered text (set by the server from its message
    /// limit, so the response fits one message); 0 = no byte limit.
    pub max_bytes: usize,
    /// Leave retrieved memory out.
    pub skip_recall: bool,
}

impl BundleRequest {
    /// Interactions asked to be kept verbatim (the default when unset);
    /// the layout no longer reads it.
    pub fn interactions(&self) -> u64 {
        u64::from(match self.recent_interactions {
            0 => DEFAULT_RECENT_INTERACTIONS,
            n => n,
        })
    }

    /// Whether memory is retrieved for this request: it has a query and
    /// does not skip retrieval.
    pub fn retrieves(&self) -> bool {
        !self.skip_recall && !self.query.trim().is_empty()
    }

    /// The budget split this request is packed with: the request's when
    /// memory is retrieved for it, else the session's state.
    pub fn layout(&self) -> Layout {
        if self.retrieves() {
            Layout::Request
        } else {
            Layout::State
        }
    }
}

/// A section of a bundle, in priority order (the order sections are filled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    /// Session identity and point in time.
    Header,
    /// Pending actions not done.
    PendingActions,
    /// Pending actions of the subject's past sessions.
    CarriedActions,
    /// Open questions.
    OpenQuestions,
    /// Memory retrieved for the request.
    Recalled,
    /// Decisions.
    Decisions,
    /// User intent and prose.
    Summary,
    /// Key facts.
    KeyFacts,
    /// The subject's current facts.
    Facts,
    /// Recent turns, verbatim.
    RecentTurns,
    /// The subject's past sessions.
    Episodes,
    /// Older unsummarized turns, shortened.
    EarlierTurns,
}

/// An inclusive seq range.
pub type SeqRange = (u64, u64);

/// What one section holds and left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// The section.
    pub section: Section,
    /// Items it had to offer.
    pub available: u32,
    /// Included whole.
    pub included: u32,
    /// Included shortened.
    pub shortened: u32,
    /// Left out.
    pub omitted: u32,
    /// Turn sections: seqs included whole.
    pub included_seqs: Vec<SeqRange>,
    /// Turn sections: seqs included shortened.
    pub shortened_seqs: Vec<SeqRange>,
    /// Turn sections: seqs left out.
    pub omitted_seqs: Vec<SeqRange>,
    /// Tokens of the section's lines, each counted alone.
    pub tokens: u32,
}

impl ManifestEntry {
    /// An entry for `section` with nothing counted yet.
    pub fn new(section: Section) -> ManifestEntry {
        ManifestEntry {
            section,
            available: 0,
            included: 0,
            shortened: 0,
            omitted: 0,
            included_seqs: Vec::new(),
            shortened_seqs: Vec::new(),
            omitted_seqs: Vec::new(),
            tokens: 0,
        }
    }
}

/// What was retrieved for a request and did not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecalledRef {
    /// The session of a turn or episode; empty for a fact.
    pub session_id: String,
    /// The seq of a turn; 0 otherwise.
    pub seq: u64,
    /// The id of a fact; empty otherwise.
    pub fact_id: String,
    /// Rank among what was retrieved, from 1.
    pub rank: u32,
}

/// The accounting of a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// One entry per section with anything to offer, in priority order.
    pub sections: Vec<ManifestEntry>,
    /// The summary version used (0 = none).
    pub summary_version: u64,
    /// Turns the summary covers (`1..=n`), if any.
    pub summarized: Option<SeqRange>,
    /// Nothing was shortened or omitted.
    pub complete: bool,
    /// Retrieved memory that did not fit, best first.
    pub recalled_left_out: Vec<RecalledRef>,
    /// The whole session fitted: the bundle is its transcript.
    pub transcript: bool,
    /// Turns a retention policy removed from the session's start (the
    /// summary may cite them); set by the domain.
    pub turns_removed: Option<crate::model::TurnsRemoved>,
    /// The budget split the bundle was packed with.
    pub layout: Layout,
}

/// The step a bundle's budget split is chosen from (`pack::SPLITS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// No query: the session's state.
    State,
    /// A query: the stable part and the log give room to retrieved memory.
    Request,
}

/// One piece of memory retrieved for a request.
#[derive(Debug, Clone)]
pub struct Recalled {
    /// Rank among what was retrieved, from 1.
    pub rank: u32,
    /// What it is.
    pub item: RecalledItem,
}

/// What was retrieved.
#[derive(Debug, Clone)]
pub enum RecalledItem {
    /// A turn that matched, with the neighbour completing its
    /// question/answer pair when there is one (oldest first).
    Turns {
        /// Their session.
        session_id: String,
        /// The seq of the turn that matched.
        hit_seq: u64,
        /// The turns, oldest first; the hit among them.
        turns: Vec<Turn>,
    },
    /// A current fact of the subject.
    Fact(Fact),
    /// A past session of the subject.
    Episode(Episode),
}

impl Recalled {
    /// Where it points, for the manifest.
    pub fn reference(&self) -> RecalledRef {
        let (session_id, seq, fact_id) = match &self.item {
            RecalledItem::Turns {
                session_id,
                hit_seq,
                ..
            } => (session_id.clone(), *hit_seq, String::new()),
            RecalledItem::Fact(f) => (String::new(), 0, f.fact_id.clone()),
            RecalledItem::Episode(e) => (e.session_id.clone(), 0, String::new()),
        };
        RecalledRef {
            session_id,
            seq,
            fact_id,
            rank: self.rank,
        }
    }
}

/// A turn shortened for a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressedTurn {
    /// Its seq.
    pub seq: u64,
    /// Who produced it.
    pub role: Role,
    /// Speaker id.
    pub speaker: String,
    /// The shortened text.
    pub text: String,
    /// Whether `text` lost anything.
    pub shortened: bool,
}

/// A context bundle. The structured fields hold exactly what
/// `rendered_text` shows.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The session as read for the bundle.
    pub session: Session,
    /// Newest turn accounted for.
    pub as_of_seq: u64,
    /// Tokenizer of `token_count`.
    pub encoding: Encoding,
    /// The budget asked for.
    pub budget_tokens: u32,
    /// Tokens of `rendered_text`; never above `budget_tokens`.
    pub token_count: u32,
    /// The text for the agent's prompt.
    pub rendered_text: String,
    /// The summary's user intent (empty when left out or absent).
    pub user_intent: String,
    /// The summary's prose (empty when left out or absent).
    pub prose: String,
    /// Pending actions that fit.
    pub pending_actions: Vec<PendingAction>,
    /// Open questions that fit.
    pub open_questions: Vec<OpenQuestion>,
    /// Decisions that fit.
    pub decisions: Vec<Decision>,
    /// Key facts that fit.
    pub key_facts: Vec<KeyFact>,
    /// Recent turns kept verbatim, oldest first.
    pub recent_turns: Vec<Turn>,
    /// Shortened turns, oldest first.
    pub earlier_turns: Vec<CompressedTurn>,
    /// Carried-over actions that fit.
    pub carried_actions: Vec<CarriedAction>,
    /// The subject's facts that fit.
    pub facts: Vec<Fact>,
    /// The subject's past episodes that fit.
    pub episodes: Vec<Episode>,
    /// Retrieved memory that fit, best first (a turn pair shortened to its
    /// hit holds only the hit).
    pub recalled: Vec<Recalled>,
    /// What was included, shortened and left out.
    pub manifest: Manifest,
    /// Where the stable part ends in `rendered_text`.
    pub stable_end: Offset,
    /// Where the log ends (the request's part begins).
    pub log_end: Offset,
}

/// A position in a bundle's text: the tokens of the text before it (exact:
/// counting that prefix gives this number) and its byte offset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offset {
    /// Tokens of the text before it, in the bundle's encoding.
    pub tokens: u32,
    /// Bytes (UTF-8) of the text before it.
    pub bytes: u32,
}

/// The three parts of a bundle's text, most stable first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Part {
    /// Changes with a fold or the subject's memory.
    Stable,
    /// The turns since the fold, append-only.
    Log,
    /// What the request decides.
    Request,
}

/// What a bundle is packed from, as the domain gathered it (see
/// `memory::gather`): reads bounded by the budget, never by the session's
/// length.
#[derive(Debug)]
pub struct Inputs {
    /// The session as read for the bundle.
    pub session: Session,
    /// Its latest summary, as folded (statuses set since are in
    /// `action_updates`).
    pub summary: Option<SessionSummary>,
    /// Its latest summary's pending actions' statuses set since the fold
    /// (UpdatePendingAction), by action seq: shown as lines of the log.
    pub action_updates: BTreeMap<u64, ActionStatus>,
    /// The turns since the fold that were read (all of them through the
    /// newest, or a window of them in fixed steps: see `memory::gather`),
    /// oldest first.
    pub turns: Vec<Turn>,
    /// Unsummarized turns older than those, not read.
    pub unread: Option<SeqRange>,
    /// The subject's long-term memory (empty without a subject).
    pub memory: SubjectMemory,
    /// Memory retrieved for the request, best first.
    pub recalled: Vec<Recalled>,
    /// The whole session is in `turns`, and fits: render it as its
    /// transcript.
    pub transcript: bool,
}

/// What a bundle shows of the subject beyond this session.
#[derive(Debug, Default)]
pub struct SubjectMemory {
    /// Pending actions of other sessions, not done.
    pub carried: Vec<CarriedAction>,
    /// When each carried action was said (its first cited turn's time),
    /// where that turn is still stored; shown instead of the day its
    /// session stopped.
    pub carried_said: Vec<Option<UnixNanos>>,
    /// Current facts, oldest first.
    pub facts: Vec<Fact>,
    /// Other sessions' episodes, newest first.
    pub episodes: Vec<Episode>,
    /// When each episode's last summarized turn was said, where stored.
    pub episodes_last_said: Vec<Option<UnixNanos>>,
}

/// Packs a bundle from what was gathered (pure: tokenizes, reads
/// nothing). The request is already validated (`memory::validate`).
pub fn build(inputs: Inputs, req: &BundleRequest) -> Bundle {
    pack::pack(inputs, req)
}
