//! Context bundles: a session rehydrated into what an agent needs to carry
//! on, within a token budget.
//!
//! - `gather` reads the inputs: the session, its latest summary, the recent
//!   turns (walking back from the newest until `recent_interactions` user
//!   turns or the budget are reached) and the older turns the summary does
//!   not cover (walking back again, only as far as the budget could
//!   possibly reach). Reads are bounded by the budget, never by the
//!   session's length, and use the turns' stored token counts to decide how
//!   far to read.
//! - `pack` chooses what fits, section by section in priority order, renders
//!   the text and measures it with the real tokenizer; `compress` shortens
//!   older turns.
//!
//! Every turn through `as_of_seq` ends up covered by the summary, included
//! (whole or shortened) or listed as omitted in the manifest.
//!
//! A session with a subject also brings the subject's long-term memory:
//! pending actions carried over from its past sessions, its current facts
//! and its past episodes, each read with a fixed cap and ranked like the
//! summary's items.

pub mod compress;
mod pack;

use crate::error::{Error, Result};
use crate::memory::episodes::{apply_overrides, CarriedAction, Episode};
use crate::memory::facts::{Fact, FactFilter};
use crate::memory::types::{Encoding, Role, Session, Turn};
use crate::store::Store;
use crate::summarize::model::{Decision, KeyFact, OpenQuestion, PendingAction};
use crate::summarize::SessionSummary;

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
/// Turns read per store call while walking back.
const READ_CHUNK: u64 = 64;
/// Tokens a rendered turn costs beyond its text (its "[#seq] role speaker:"
/// prefix), at least; bounds how many turns one budget can need.
const MIN_TURN_COST: u64 = 4;
/// Tokens a shortened turn costs at most, about (150 characters).
const MAX_SHORT_TURN_COST: u64 = 64;

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
    /// Interactions kept verbatim; 0 = the default.
    pub recent_interactions: u32,
    /// Most bytes of rendered text (set by the server from its message
    /// limit, so the response fits one message); 0 = no byte limit.
    pub max_bytes: usize,
}

impl BundleRequest {
    /// Checks the request's bounds.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_BUDGET..=MAX_BUDGET).contains(&self.budget_tokens) {
            return Err(Error::invalid(format!(
                "budget_tokens is {}; it must be from {MIN_BUDGET} to {MAX_BUDGET}",
                self.budget_tokens
            )));
        }
        if self.recent_interactions > MAX_RECENT_INTERACTIONS {
            return Err(Error::invalid(format!(
                "recent_interactions is {}; the limit is {MAX_RECENT_INTERACTIONS}",
                self.recent_interactions
            )));
        }
        if self.query.len() > MAX_QUERY_BYTES {
            return Err(Error::invalid(format!(
                "query is {} bytes; the limit is {MAX_QUERY_BYTES}",
                self.query.len()
            )));
        }
        crate::memory::validate::name(
            "agent_id",
            &self.agent_id,
            crate::memory::validate::MAX_NAME_BYTES,
        )
    }

    fn interactions(&self) -> u64 {
        u64::from(match self.recent_interactions {
            0 => DEFAULT_RECENT_INTERACTIONS,
            n => n,
        })
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
    /// What was included, shortened and left out.
    pub manifest: Manifest,
}

/// What `gather` read.
#[derive(Debug)]
struct Inputs {
    session: Session,
    summary: Option<SessionSummary>,
    /// The recent window, oldest first.
    recent: Vec<Turn>,
    /// Unsummarized turns older than the window that were read, oldest
    /// first.
    earlier: Vec<Turn>,
    /// Unsummarized turns older than those, not read: the budget could not
    /// reach them.
    unread: Option<SeqRange>,
    /// The subject's long-term memory (empty without a subject).
    memory: SubjectMemory,
}

/// What a bundle shows of the subject beyond this session.
#[derive(Debug, Default)]
struct SubjectMemory {
    /// Pending actions of other sessions, not done.
    carried: Vec<CarriedAction>,
    /// Current facts, oldest first.
    facts: Vec<Fact>,
    /// Other sessions' episodes, newest first.
    episodes: Vec<Episode>,
}

/// Most carried actions a bundle considers.
const MAX_CARRIED: usize = 50;
/// Most facts a bundle considers (the newest are kept when more exist).
const MAX_FACTS: usize = 200;
/// Most past episodes a bundle considers (the newest).
const MAX_EPISODES: usize = 20;

fn subject_memory(store: &dyn Store, session: &Session) -> Result<SubjectMemory> {
    let (ns, subject) = (&session.namespace, &session.subject_id);
    if subject.is_empty() {
        return Ok(SubjectMemory::default());
    }
    let mine = |sid: &str| sid == session.session_id;
    let mut carried = store.carried_actions(ns, subject, MAX_CARRIED + 1)?;
    carried.retain(|c| !mine(&c.action_ref.session_id));
    carried.truncate(MAX_CARRIED);
    // Facts come oldest first; keep the newest MAX_FACTS by reading pages.
    let filter = FactFilter {
        subject_id: Some(subject.clone()),
        ..FactFilter::default()
    };
    let mut facts: std::collections::VecDeque<Fact> = Default::default();
    let mut after: Option<String> = None;
    for _ in 0..20 {
        let (page, resume) =
            store.list_facts(ns, &filter, after.as_deref(), MAX_FACTS, MAX_FACTS * 4)?;
        for f in page {
            if facts.len() == MAX_FACTS {
                facts.pop_front();
            }
            facts.push_back(f);
        }
        match resume {
            Some(r) => after = Some(r),
            None => break,
        }
    }
    let mut episodes = store.list_episodes(ns, subject, None, MAX_EPISODES + 1)?;
    episodes.retain(|e| !mine(&e.session_id));
    episodes.truncate(MAX_EPISODES);
    Ok(SubjectMemory {
        carried,
        facts: facts.into(),
        episodes,
    })
}

/// Builds a bundle of a session (blocking: reads the store and tokenizes).
pub fn build(store: &dyn Store, ns: &str, session_id: &str, req: &BundleRequest) -> Result<Bundle> {
    req.validate()?;
    let inputs = gather(store, ns, session_id, req)?;
    Ok(pack::pack(inputs, req))
}

fn gather(store: &dyn Store, ns: &str, session_id: &str, req: &BundleRequest) -> Result<Inputs> {
    // The summary first, then the session: the summary then never covers
    // a turn the session snapshot does not have.
    let mut summary = match store.get_summary(ns, session_id, 0) {
        Ok(s) => Some(s),
        Err(Error::NotFound(_)) => None,
        Err(e) => return Err(e),
    };
    let session = store.get_session(ns, session_id)?;
    if let Some(s) = summary.as_mut() {
        // Statuses a client set since (UpdatePendingAction) win.
        let overrides = store.action_statuses(ns, session_id)?;
        apply_overrides(&mut s.pending_actions, &overrides);
    }
    let memory = subject_memory(store, &session)?;
    let as_of = session.last_seq();
    let covered = summary
        .as_ref()
        .map_or(0, |s| s.covers_through_seq.min(as_of));
    let budget = u64::from(req.budget_tokens);

    // The recent window: back from the newest turn until it holds the
    // asked-for number of user turns, or more tokens than the budget.
    let mut recent = Vec::new();
    let (mut users, mut cost) = (0u64, 0u64);
    let mut next = as_of;
    'window: while next >= 1 {
        let from = next.saturating_sub(READ_CHUNK - 1).max(1);
        let chunk = store.list_turns(ns, session_id, from, next, READ_CHUNK as usize)?;
        for t in chunk.into_iter().rev() {
            cost += u64::from(t.token_count) + MIN_TURN_COST;
            users += u64::from(t.role == Role::User);
            recent.push(t);
            if users == req.interactions() || cost > budget {
                break 'window;
            }
        }
        next = from - 1;
    }
    recent.reverse();
    let window_start = recent.first().map_or(as_of + 1, |t| t.seq);

    // Older turns the summary does not cover, as far as the budget left
    // could reach even when every one is shortened.
    let mut earlier = Vec::new();
    let mut next = window_start.saturating_sub(1);
    while next > covered && cost <= budget {
        let from = next.saturating_sub(READ_CHUNK - 1).max(covered + 1);
        let chunk = store.list_turns(ns, session_id, from, next, READ_CHUNK as usize)?;
        for t in chunk.into_iter().rev() {
            cost += u64::from(t.token_count).min(MAX_SHORT_TURN_COST) + MIN_TURN_COST;
            next = t.seq - 1;
            earlier.push(t);
            if cost > budget {
                break;
            }
        }
        if cost <= budget && next >= from {
            // The chunk came back short: turns are gap-free, so this only
            // happens when the session was deleted meanwhile.
            return Err(Error::session_not_found(ns, session_id));
        }
    }
    earlier.reverse();
    let unread = (next > covered).then_some((covered + 1, next));
    Ok(Inputs {
        session,
        summary,
        recent,
        earlier,
        unread,
        memory,
    })
}
