//! Model-backed summaries: an optional summarizer that asks a model behind
//! an OpenAI-compatible API to write a session's summary items, never
//! trusted blindly. Personal data is redacted before a call and restored
//! after; the pipeline's faithfulness validator gates every answer, with
//! one retry carrying the violations and the rule-based summary as the
//! fallback; the tool log, errors and citations always come from the
//! turns, and what the rules found with evidence is the floor of every
//! model summary. Off by default: the daemon needs no network.
//!
//! Imports `summarize` (the trait, the rules, nothing else), `model`,
//! `config` and `tokens`.

mod client;
pub mod floor;
pub mod prompt;
pub mod redact;
mod stream;
mod summarizer;

pub use self::client::{CallError, CallRecord, Completion, Form};
pub use self::summarizer::{ModelStats, ModelSummarizer, FORMAT, NAME};
