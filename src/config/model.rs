//! The `[model]` section: an optional OpenAI-compatible model that writes
//! summaries (off by default; the daemon never needs the network). The API
//! key is read from `MNEMO_MODEL_API_KEY` only, never from the file, and
//! never logged.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Room a waiting Summarize has beyond its model budgets, in seconds.
pub const SUMMARIZE_MARGIN_SECS: u64 = 30;

/// Which summarizer folds sessions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SummarizerKind {
    /// The rule-based summarizer (no model).
    #[default]
    Rules,
    /// A model behind an OpenAI-compatible API, validated, with the rules
    /// as the fallback.
    Model,
}

/// `[model]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// `rules` (default) or `model`.
    pub summarizer: SummarizerKind,
    /// Base URL of an OpenAI-compatible API; `/v1/chat/completions` is
    /// appended (vLLM, llama.cpp's server, Ollama, hosted APIs).
    pub url: String,
    /// The model's name as the server knows it.
    pub name: String,
    /// Time limit of one HTTP call.
    pub timeout_secs: u64,
    /// Time limit of all the model work of one summary: its chunks, their
    /// retries (429, 503, time-outs, connection errors: one each) and the
    /// re-ask after a validation refusal; past it, the fold falls back to
    /// the rules. A waiting Summarize's deadline follows from it
    /// ([`ModelConfig::summarize_deadline`]).
    pub retry_budget_secs: u64,
    /// Most tokens one answer may have (`max_tokens`); each call asks for
    /// what the summary so far and the new turns need, at most this. A
    /// cut-off answer is asked again for half the turns.
    pub max_output_tokens: u32,
    /// Send the instructions as a `system` message; `false` puts them at
    /// the head of the user message, for chat templates without a system
    /// role (Gemma's).
    pub system_role: bool,
    /// Calls in flight at once.
    pub max_concurrent: usize,
    /// Most tokens of turns sent in one call; longer folds are chunked.
    pub max_input_tokens: usize,
    /// Namespaces the model summarizes; empty = all.
    pub namespaces: Vec<String>,
    /// Replace emails, phone numbers, card numbers, IBANs and IP addresses
    /// (and `redact_patterns`) by placeholders before text leaves.
    pub redact_pii: bool,
    /// More regular expressions whose matches are redacted.
    pub redact_patterns: Vec<String>,
    /// From `MNEMO_MODEL_API_KEY` only.
    #[serde(skip)]
    pub api_key: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            summarizer: SummarizerKind::Rules,
            url: String::new(),
            name: String::new(),
            timeout_secs: 60,
            retry_budget_secs: 120,
            max_output_tokens: 2048,
            system_role: true,
            max_concurrent: 2,
            max_input_tokens: 6000,
            namespaces: Vec::new(),
            redact_pii: true,
            redact_patterns: Vec::new(),
            api_key: None,
        }
    }
}

impl ModelConfig {
    /// Whether the model summarizes sessions of `namespace`.
    pub fn covers(&self, namespace: &str) -> bool {
        self.summarizer == SummarizerKind::Model
            && (self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace))
    }

    /// How long a Summarize that waits may take on the server with a model
    /// writing summaries: the worker may be finishing another session's
    /// summary (one budget), then writes this one (another), plus time for
    /// the rules' fold and the store (`SUMMARIZE_MARGIN_SECS`). `None`
    /// when the rules write every summary.
    pub fn summarize_deadline(&self) -> Option<std::time::Duration> {
        (self.summarizer == SummarizerKind::Model).then(|| {
            std::time::Duration::from_secs(
                self.retry_budget_secs
                    .saturating_mul(2)
                    .saturating_add(SUMMARIZE_MARGIN_SECS),
            )
        })
    }

    /// Rejects a model setting that cannot work.
    pub fn validate(&self) -> Result<()> {
        if self.summarizer == SummarizerKind::Rules {
            return Ok(());
        }
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return Err(Error::invalid(
                "model.url (--model-url, MNEMO_MODEL_URL) must be an http:// or https:// base URL when the summarizer is `model`",
            ));
        }
        if self.name.trim().is_empty() {
            return Err(Error::invalid(
                "model.name (--model-name, MNEMO_MODEL_NAME) is required when the summarizer is `model`",
            ));
        }
        if self.timeout_secs == 0
            || self.retry_budget_secs < self.timeout_secs
            || self.retry_budget_secs > 86_400
        {
            return Err(Error::invalid(
                "model.timeout_secs must be positive and model.retry_budget_secs at least as long, at most 86400",
            ));
        }
        if !(64..=131_072).contains(&self.max_output_tokens) {
            return Err(Error::invalid(
                "model.max_output_tokens must be 64 to 131072",
            ));
        }
        if !(1..=64).contains(&self.max_concurrent)
            || !(500..=1_000_000).contains(&self.max_input_tokens)
        {
            return Err(Error::invalid(
                "model.max_concurrent must be 1 to 64 and model.max_input_tokens 500 to 1000000",
            ));
        }
        for p in &self.redact_patterns {
            regex::Regex::new(p).map_err(|e| {
                Error::invalid(format!(
                    "model.redact_patterns: {p:?} is not a regular expression: {e}"
                ))
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ModelConfig {
        ModelConfig {
            summarizer: SummarizerKind::Model,
            url: "http://127.0.0.1:8080".into(),
            name: "m".into(),
            ..ModelConfig::default()
        }
    }

    #[test]
    fn the_summarize_deadline_follows_the_model_budget() {
        assert_eq!(ModelConfig::default().summarize_deadline(), None);
        assert_eq!(
            model().summarize_deadline(),
            Some(std::time::Duration::from_secs(
                2 * 120 + SUMMARIZE_MARGIN_SECS
            ))
        );
    }

    #[test]
    fn budgets_and_output_caps_are_bounded() {
        assert!(model().validate().is_ok());
        for bad in [
            ModelConfig {
                retry_budget_secs: 86_401,
                ..model()
            },
            ModelConfig {
                max_output_tokens: 10,
                ..model()
            },
            ModelConfig {
                max_output_tokens: 1_000_000,
                ..model()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
