//! Running summaries, pure: a [`Summarizer`] folds a session's new turns
//! into its previous state and renders a structured `SessionSummary` whose
//! every item cites its turns; the faithfulness validator refuses any
//! summary that is not faithful; renderings turn it into JSON or Markdown.
//!
//! Nothing here reads storage, the clock (times come in `SummaryContext`)
//! or the async runtime: the domain's summary pipeline (`memory::summary`)
//! reads the turns, calls the summarizer and stores what it returns.
//!
//! - `rules`: per-turn classification and extraction rules.
//! - `engine`: `FoldState`, the rule-based incremental accumulator:
//!   folding turns k+1..n into the state of 1..k equals folding 1..n from
//!   scratch, and costs time proportional to the new turns.
//! - `rule_based`: the rule-based [`Summarizer`] over `FoldState`.
//! - `validate`: the faithfulness check run before a summary is stored.
//! - `render`: JSON and Markdown renderings.

pub mod engine;
pub mod render;
pub mod rule_based;
pub mod rules;
pub mod validate;

pub use crate::model::SessionSummary;
pub use engine::FoldState;
pub use rule_based::RuleBased;

use crate::model::{FoldRecord, Trigger, Turn, UnixNanos};

/// What the summarizer needs to know besides the turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryContext {
    /// The session's namespace (a summarizer may act per namespace).
    pub namespace: String,
    /// The session's context window, for `budget_remaining_tokens`.
    pub context_limit_tokens: u64,
    /// Tokens a bundle of the session needs now (the caller's estimate).
    pub bundle_tokens: u64,
    /// Why this summary is written.
    pub trigger: Trigger,
    /// Version number to give it.
    pub version: u64,
    /// Creation time.
    pub now: UnixNanos,
    /// High-risk sessions flag irreversible actions for human review.
    pub high_risk: bool,
    /// The caller must not wait on anything outside the process (a
    /// handoff, a removed turn's refold): a summarizer that calls a model
    /// folds with its fallback at once.
    pub wait_free: bool,
}

/// Why a fold produced nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateError {
    /// A stored fold state this summarizer cannot read (damaged, or
    /// written in a layout it does not know), or one it cannot write.
    Unreadable(String),
    /// The fold was given up because the summarizer was interrupted (the
    /// daemon is stopping): not a damaged state, the work stays due.
    Interrupted(String),
}

impl StateError {
    /// A fold given up because the summarizer was interrupted.
    pub fn interrupted(why: &str) -> StateError {
        StateError::Interrupted(why.to_owned())
    }

    /// Whether this is [`StateError::Interrupted`].
    pub fn is_interrupted(&self) -> bool {
        matches!(self, StateError::Interrupted(_))
    }
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Unreadable(why) => f.write_str(why),
            StateError::Interrupted(why) => write!(f, "interrupted: {why}"),
        }
    }
}

/// What one fold produced: the new state (opaque bytes in the
/// summarizer's current format) and the summary rendered from it.
#[derive(Debug, Clone)]
pub struct Folded {
    /// The encoded state after the fold.
    pub state: Vec<u8>,
    /// The summary of every turn folded so far.
    pub summary: SessionSummary,
    /// Who wrote it, for the audit log, when not [`Summarizer::label`]
    /// (e.g. a fallback).
    pub label: Option<String>,
    /// Facts about how it was written, for the audit log's health flags
    /// (e.g. a model call's tokens, latency and retries).
    pub notes: Vec<String>,
}

/// A summarizer: folds new turns into its previous state. Implementations
/// are pure over their inputs, so a fold can be retried, and folding turns
/// k+1..n into the state of 1..k gives the summary of 1..n.
pub trait Summarizer: Send + Sync + 'static {
    /// Its name, stored with each fold state (`FoldRecord::summarizer`).
    fn name(&self) -> &str;

    /// The layout version of the states it writes (`FoldRecord::format`).
    fn format(&self) -> u32;

    /// Name and version for the audit log.
    fn label(&self) -> String;

    /// Folds `turns` (in seq order, each after what `previous` covers)
    /// into `previous` (`None`: nothing folded yet) and renders the summary.
    /// `previous` is a state this summarizer wrote: same name, and a
    /// format it reads.
    fn fold(
        &self,
        previous: Option<&FoldRecord>,
        turns: &[Turn],
        ctx: &SummaryContext,
    ) -> Result<Folded, StateError>;

    /// Folds again after [`Summarizer::fold`]'s summary failed validation
    /// with `violations` (a model is told what was wrong); `None`: no
    /// second try.
    fn retry(
        &self,
        _previous: Option<&FoldRecord>,
        _turns: &[Turn],
        _ctx: &SummaryContext,
        _violations: &[String],
    ) -> Option<Result<Folded, StateError>> {
        None
    }

    /// The fold to store when its summaries keep failing validation (a
    /// model falls back to the rules); `None`: none.
    fn fallback(
        &self,
        _previous: Option<&FoldRecord>,
        _turns: &[Turn],
        _ctx: &SummaryContext,
    ) -> Option<Result<Folded, StateError>> {
        None
    }

    /// Stop waiting on anything outside the process: folds in progress
    /// and later ones return [`StateError::interrupted`], leaving their
    /// work due (the daemon calls this when it shuts down).
    fn interrupt(&self) {}

    /// Whether it can continue from `record` (else the pipeline folds the
    /// session from its first turn).
    fn reads(&self, record: &FoldRecord) -> bool {
        record.summarizer == self.name() && record.format == self.format()
    }

    /// Converts a record written before fold states were opaque (format
    /// [`crate::model::LEGACY_FOLD_FORMAT`]) into one in the current
    /// format, if this summarizer wrote such records.
    fn upgrade_legacy(&self, _record: &FoldRecord) -> Option<Result<FoldRecord, StateError>> {
        None
    }
}

/// Summarizes `turns` (in seq order) from scratch with the rule-based
/// summarizer.
pub fn summarize(turns: &[Turn], ctx: &SummaryContext) -> SessionSummary {
    let mut state = FoldState::default();
    state.fold(turns);
    state.render(ctx)
}
