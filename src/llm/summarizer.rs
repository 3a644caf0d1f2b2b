//! The model-backed summarizer: the rule-based fold runs on every turn (it
//! keeps the tool log, errors, artifacts and citations, which the model may
//! not decide, and it is the fallback), and a model rewrites the items a
//! model writes better: intent, decisions, pending actions, open
//! questions, key facts, conflicts and prose. The pipeline validates what
//! it returns; on failure it asks [`Summarizer::retry`] once with the
//! violations, then takes [`Summarizer::fallback`] (the rules' summary).
//!
//! The fold state holds the rules' state and the model's last items, so a
//! fold sends only the new turns with the summary so far.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::client::{ChatClient, Message};
use super::prompt::{self, ModelItems};
use super::redact::{Placeholders, Redactor};
use crate::config::ModelConfig;
use crate::model::{Encoding, FoldRecord, Turn};
use crate::summarize::{rule_based, Folded, RuleBased, StateError, Summarizer, SummaryContext};
use crate::tokens;

/// The name stored with its fold states.
pub const NAME: &str = "mnemo-model";
/// The layout of its fold states: they hold the rules' state, so this
/// changes with [`rule_based::FORMAT`] (2: the rules' layout 2).
pub const FORMAT: u32 = 2;

/// Counters for the metrics endpoint.
#[derive(Debug, Default)]
pub struct ModelStats {
    /// Calls made (retries included).
    pub calls: AtomicU64,
    /// Calls that failed (unreachable, refused, malformed) or whose answer
    /// was refused.
    pub failures: AtomicU64,
    /// Folds stored from the rules instead.
    pub fallbacks: AtomicU64,
    /// Wall time of calls, in milliseconds.
    pub latency_ms: AtomicU64,
    /// Prompt tokens as servers reported them.
    pub prompt_tokens: AtomicU64,
    /// Completion tokens as servers reported them.
    pub completion_tokens: AtomicU64,
}

#[derive(Serialize, Deserialize)]
struct ModelState {
    rules: Vec<u8>,
    /// The model's items after the last model fold (JSON); `None` after a
    /// fallback or a rules-only fold.
    items: Option<String>,
}

/// See the module documentation.
pub struct ModelSummarizer {
    rules: RuleBased,
    client: ChatClient,
    config: ModelConfig,
    redactor: Option<Redactor>,
    runtime: tokio::runtime::Handle,
    stats: Arc<ModelStats>,
    /// Cancelled at shutdown: calls in flight are given up.
    stop: tokio_util::sync::CancellationToken,
}

/// What one model fold produced, or why not.
enum Outcome {
    Items(ModelItems, String),
    Failed(String),
    Interrupted,
}

impl ModelSummarizer {
    /// A summarizer calling `config`'s model; calls run on `runtime`.
    pub fn new(
        config: &ModelConfig,
        runtime: tokio::runtime::Handle,
    ) -> Result<ModelSummarizer, String> {
        let client = ChatClient::new(
            super::client::Endpoint {
                url: config.url.clone(),
                model: config.name.clone(),
                api_key: config.api_key.clone(),
                timeout: std::time::Duration::from_secs(config.timeout_secs),
                budget: std::time::Duration::from_secs(config.retry_budget_secs),
            },
            config.max_concurrent,
        )?;
        let redactor = if config.redact_pii {
            Some(Redactor::new(&config.redact_patterns).map_err(|e| e.to_string())?)
        } else {
            None
        };
        Ok(ModelSummarizer {
            rules: RuleBased,
            client,
            config: config.clone(),
            redactor,
            runtime,
            stats: Arc::new(ModelStats::default()),
            stop: tokio_util::sync::CancellationToken::new(),
        })
    }

    /// Its counters.
    pub fn stats(&self) -> Arc<ModelStats> {
        self.stats.clone()
    }

    fn decode(
        previous: Option<&FoldRecord>,
    ) -> Result<(Option<FoldRecord>, Option<ModelItems>), StateError> {
        let Some(r) = previous else {
            return Ok((None, None));
        };
        let state: ModelState = postcard::from_bytes(&r.state)
            .map_err(|e| StateError(format!("model fold state cannot be decoded: {e}")))?;
        let items = match state.items {
            Some(j) => Some(
                serde_json::from_str(&j)
                    .map_err(|e| StateError(format!("model items cannot be decoded: {e}")))?,
            ),
            None => None,
        };
        let rules = FoldRecord {
            summarizer: rule_based::NAME.to_owned(),
            format: rule_based::FORMAT,
            state: state.rules,
            ..r.clone()
        };
        Ok((Some(rules), items))
    }

    fn encode(rules: Vec<u8>, items: Option<&ModelItems>) -> Result<Vec<u8>, StateError> {
        let items = items
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StateError(e.to_string()))?;
        postcard::to_allocvec(&ModelState { rules, items }).map_err(|e| StateError(e.to_string()))
    }

    /// The rules' fold, as this summarizer's state, labelled `why`.
    fn rules_only(
        &self,
        rules_prev: Option<&FoldRecord>,
        turns: &[Turn],
        ctx: &SummaryContext,
        label: String,
    ) -> Result<Folded, StateError> {
        let out = self.rules.fold(rules_prev, turns, ctx)?;
        Ok(Folded {
            state: Self::encode(out.state, None)?,
            summary: out.summary,
            label: Some(label),
            notes: Vec::new(),
        })
    }

    /// Whether the model writes this fold (else the rules do, at once).
    fn uses_model(&self, ctx: &SummaryContext) -> bool {
        // A handoff or a removed turn's refold never waits on a model:
        // its summary is the rules'.
        self.config.covers(&ctx.namespace) && !ctx.wait_free
    }

    /// Turns in chunks of at most `max_input_tokens` each (a turn longer
    /// than that is a chunk of its own).
    fn chunks<'a>(&self, turns: &'a [Turn]) -> Vec<&'a [Turn]> {
        let mut out = Vec::new();
        let (mut start, mut used) = (0, 0usize);
        for (i, t) in turns.iter().enumerate() {
            let n = tokens::count(Encoding::Cl100kBase, &t.content) + 16;
            if used + n > self.config.max_input_tokens && i > start {
                out.push(&turns[start..i]);
                start = i;
                used = 0;
            }
            used += n;
        }
        if start < turns.len() {
            out.push(&turns[start..]);
        }
        out
    }

    /// One call, its answer parsed and un-redacted; a malformed answer or
    /// an invented placeholder is asked again once.
    fn call(&self, so_far: &ModelItems, turns: &[Turn], violations: &[String]) -> Outcome {
        let mut hints: Vec<String> = violations.to_vec();
        for attempt in 0..2 {
            let mut names = Placeholders::default();
            let user =
                prompt::user_message(so_far, turns, self.redactor.as_ref(), &mut names, &hints);
            let messages = [
                Message {
                    role: "system",
                    content: prompt::SYSTEM.to_owned(),
                },
                Message {
                    role: "user",
                    content: user,
                },
            ];
            self.stats.calls.fetch_add(1, Relaxed);
            let schema = prompt::schema();
            let answer = self.runtime.block_on(async {
                tokio::select! {
                    a = self.client.complete(&messages, &schema) => Some(a),
                    () = self.stop.cancelled() => None,
                }
            });
            let c = match answer {
                None => return Outcome::Interrupted,
                Some(Ok(c)) => c,
                Some(Err(e)) => {
                    self.stats.failures.fetch_add(1, Relaxed);
                    return Outcome::Failed(e.to_string());
                }
            };
            self.stats
                .latency_ms
                .fetch_add(c.latency.as_millis() as u64, Relaxed);
            self.stats.prompt_tokens.fetch_add(c.prompt_tokens, Relaxed);
            self.stats
                .completion_tokens
                .fetch_add(c.completion_tokens, Relaxed);
            let restored = match &self.redactor {
                Some(r) => r.restore(&c.content, &names).map_err(|invented| {
                    format!(
                        "the answer contains placeholders that were never sent: {}",
                        invented.join(", ")
                    )
                }),
                None => Ok(c.content.clone()),
            };
            let parsed = restored.and_then(|text| {
                serde_json::from_str::<ModelItems>(json_of(&text)).map_err(|e| {
                    format!("the answer is not the JSON object the schema describes: {e}")
                })
            });
            match parsed {
                Ok(items) => {
                    return Outcome::Items(
                        items,
                        format!(
                            "model call: prompt_tokens={} completion_tokens={} latency_ms={} retries={} attempts={}",
                            c.prompt_tokens,
                            c.completion_tokens,
                            c.latency.as_millis(),
                            c.retries,
                            attempt + 1
                        ),
                    )
                }
                Err(why) => {
                    self.stats.failures.fetch_add(1, Relaxed);
                    tracing::warn!(attempt, reason = %why, "model answer refused");
                    if attempt == 1 {
                        return Outcome::Failed(why);
                    }
                    hints.push(why);
                }
            }
        }
        Outcome::Failed("no usable answer".into())
    }

    fn model_fold(
        &self,
        previous: Option<&FoldRecord>,
        turns: &[Turn],
        ctx: &SummaryContext,
        violations: &[String],
    ) -> Result<Folded, StateError> {
        let (rules_prev, items) = Self::decode(previous)?;
        let rules_out = self.rules.fold(rules_prev.as_ref(), turns, ctx)?;
        let mut so_far = match items {
            Some(i) => i,
            // After a fallback or at the start: what the rules had.
            None => match &rules_prev {
                Some(r) => ModelItems::of(&self.rules.fold(Some(r), &[], ctx)?.summary),
                None => ModelItems::default(),
            },
        };
        let mut notes = Vec::new();
        for chunk in self.chunks(turns) {
            match self.call(&so_far, chunk, violations) {
                Outcome::Items(i, note) => {
                    so_far = i;
                    notes.push(note);
                }
                Outcome::Interrupted => {
                    return Err(StateError::interrupted("the daemon is shutting down"))
                }
                Outcome::Failed(why) => {
                    self.stats.fallbacks.fetch_add(1, Relaxed);
                    tracing::warn!(namespace = %ctx.namespace, reason = %why, "model summary failed; the rules' summary is stored");
                    return Ok(Folded {
                        state: Self::encode(rules_out.state, None)?,
                        summary: rules_out.summary,
                        label: Some(format!(
                            "{} (fallback from model:{}: {why})",
                            self.rules.label(),
                            self.client.model()
                        )),
                        notes,
                    });
                }
            }
        }
        let mut summary = so_far.clone().apply(rules_out.summary);
        if ctx.high_risk {
            // A high-risk session's model-written commitments and decisions
            // wait for a person (the review queue).
            summary.requires_human_review = true;
            for a in &mut summary.pending_actions {
                a.requires_human_review = true;
            }
            for d in &mut summary.decisions {
                d.requires_human_review = true;
            }
        }
        Ok(Folded {
            state: Self::encode(rules_out.state, Some(&so_far))?,
            summary,
            label: Some(format!("model:{}", self.client.model())),
            notes,
        })
    }
}

/// The JSON object in an answer (servers without schema support may wrap
/// it in a code fence or a sentence).
fn json_of(text: &str) -> &str {
    match (text.find('{'), text.rfind('}')) {
        (Some(a), Some(b)) if a < b => &text[a..=b],
        _ => text,
    }
}

impl Summarizer for ModelSummarizer {
    fn interrupt(&self) {
        self.stop.cancel();
    }

    fn name(&self) -> &str {
        NAME
    }

    fn format(&self) -> u32 {
        FORMAT
    }

    fn label(&self) -> String {
        format!("model:{}", self.client.model())
    }

    fn fold(
        &self,
        previous: Option<&FoldRecord>,
        turns: &[Turn],
        ctx: &SummaryContext,
    ) -> Result<Folded, StateError> {
        if self.stop.is_cancelled() && self.uses_model(ctx) {
            return Err(StateError::interrupted("the daemon is shutting down"));
        }
        if !self.uses_model(ctx) {
            let (rules_prev, _) = Self::decode(previous)?;
            return self.rules_only(rules_prev.as_ref(), turns, ctx, self.rules.label());
        }
        self.model_fold(previous, turns, ctx, &[])
    }

    fn retry(
        &self,
        previous: Option<&FoldRecord>,
        turns: &[Turn],
        ctx: &SummaryContext,
        violations: &[String],
    ) -> Option<Result<Folded, StateError>> {
        if !self.uses_model(ctx) {
            return None;
        }
        self.stats.failures.fetch_add(1, Relaxed);
        Some(self.model_fold(previous, turns, ctx, violations))
    }

    fn fallback(
        &self,
        previous: Option<&FoldRecord>,
        turns: &[Turn],
        ctx: &SummaryContext,
    ) -> Option<Result<Folded, StateError>> {
        if !self.uses_model(ctx) {
            return None;
        }
        self.stats.fallbacks.fetch_add(1, Relaxed);
        Some(Self::decode(previous).and_then(|(rules_prev, _)| {
            self.rules_only(
                rules_prev.as_ref(),
                turns,
                ctx,
                format!(
                    "{} (fallback: model:{} refused twice by validation)",
                    self.rules.label(),
                    self.client.model()
                ),
            )
        }))
    }
}
