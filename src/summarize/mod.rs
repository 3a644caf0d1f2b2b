//! Running summaries: a deterministic, model-free summarizer that folds
//! turns into a structured `SessionSummary` whose every item cites its
//! turns, and a validator that refuses any summary that is not faithful.
//!
//! - `model`: the summary's types (field names match the proto).
//! - `rules`: per-turn classification and extraction rules (one place,
//!   unit-tested rule by rule).
//! - `engine`: `FoldState`, the incremental accumulator: folding turns
//!   k+1..n into the state of 1..k equals folding 1..n from scratch, and
//!   costs time proportional to the new turns.
//! - `validate`: the faithfulness check run before a summary is stored.
//! - `records`: fold state, audit log and review queue records.
//! - `render`: JSON and Markdown renderings.
//! - `pipeline`: one summary attempt (fold new turns, validate, store).
//! - `scheduler`: the bounded queue and worker that run attempts off the
//!   request path, and the restart rescan.

pub mod engine;
pub mod model;
pub mod pipeline;
pub mod records;
pub mod render;
pub mod rules;
pub mod scheduler;
pub mod validate;

pub use engine::FoldState;
pub use model::SessionSummary;

use crate::memory::types::{Turn, UnixNanos};
use model::Trigger;

/// What the summarizer needs to know besides the turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryContext {
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
}

/// Summarizes `turns` (in seq order) from scratch.
pub fn summarize(turns: &[Turn], ctx: &SummaryContext) -> SessionSummary {
    let mut state = FoldState::default();
    state.fold(turns);
    state.render(ctx)
}
