//! The model-backed summarizer: the rule-based fold runs on every turn (it
//! keeps the tool log, errors, artifacts and citations, which the model may
//! not decide, and it is the fallback), and a model rewrites the items a
//! model writes better: intent, decisions, pending actions, open
//! questions, key facts, conflicts and prose. The pipeline validates what
//! it returns; on failure it asks [`Summarizer::retry`] once with the
//! violations, then takes [`Summarizer::fallback`] (the rules' summary).
//!
//! The rules are the floor (`floor`): what the rules found with evidence
//! and the model left out is merged back. An empty, runaway or cut-off
//! answer is never stored. All model work of one pipeline run shares one
//! time budget, so a waiting Summarize's deadline follows from it. Every
//! HTTP call leaves a note for the audit record.
//!
//! The fold state holds the rules' state and the model's last items, so a
//! fold sends only the new turns with the summary so far.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::client::{ChatClient, Form};
use super::floor;
use super::prompt::{self, ModelItems};
use super::redact::{Placeholders, Redactor};
use crate::config::ModelConfig;
use crate::model::{now_nanos, Encoding, FoldRecord, Turn};
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
    client: Arc<ChatClient>,
    config: ModelConfig,
    redactor: Option<Redactor>,
    runtime: tokio::runtime::Handle,
    stats: Arc<ModelStats>,
    /// Cancelled at shutdown: calls in flight are given up.
    stop: tokio_util::sync::CancellationToken,
    /// What the start-up check found wrong (an unlisted model name), for
    /// every audit record until the daemon restarts.
    warning: Arc<Mutex<Option<String>>>,
}

/// What one call produced, or why not.
enum Outcome {
    Items(ModelItems),
    /// The answer stopped at `max_tokens` (`finish_reason: length`).
    CutOff(String),
    Failed(String),
    Interrupted,
}

/// Most audit notes one fold leaves (a long backlog sent in many chunks
/// keeps its first and last calls' records).
const MAX_NOTES: usize = 60;

/// `notes` within [`MAX_NOTES`]: the first two thirds and the last third,
/// with a line counting what was left out between them.
fn bounded(mut notes: Vec<String>) -> Vec<String> {
    if notes.len() <= MAX_NOTES {
        return notes;
    }
    let (head, tail) = (MAX_NOTES * 2 / 3, MAX_NOTES / 3 - 1);
    let cut = notes.len() - head - tail;
    notes.splice(
        head..head + cut,
        [format!("… {cut} more model notes of this summary left out")],
    );
    notes
}

/// Cut-off answers one fold answers by halving the turns sent.
const MAX_CUT_OFFS: usize = 2;

/// Characters (not spaces) a run of turns must hold for an empty answer
/// to be a refusal rather than a fair summary of nothing.
const CONTENT_CHARS: usize = 20;

impl ModelSummarizer {
    /// A summarizer calling `config`'s model; calls run on `runtime`. At
    /// start it asks the server which models it lists, in the background,
    /// and warns (in the log and the audit) when the name is not one.
    pub fn new(
        config: &ModelConfig,
        runtime: tokio::runtime::Handle,
    ) -> Result<ModelSummarizer, String> {
        let client = Arc::new(ChatClient::new(
            super::client::Endpoint {
                url: config.url.clone(),
                model: config.name.clone(),
                api_key: config.api_key.clone(),
                timeout: std::time::Duration::from_secs(config.timeout_secs),
                system_role: config.system_role,
            },
            config.max_concurrent,
        )?);
        let redactor = if config.redact_pii {
            Some(Redactor::new(&config.redact_patterns).map_err(|e| e.to_string())?)
        } else {
            None
        };
        let warning = Arc::new(Mutex::new(None));
        let (c, w) = (client.clone(), warning.clone());
        runtime.spawn(async move {
            let name = c.model().to_owned();
            match c.listed_models().await {
                Ok(names) if names.contains(&name) => {
                    tracing::info!(model = %name, "the model server lists the model");
                }
                Ok(names) => {
                    let shown: Vec<&str> = names.iter().take(8).map(String::as_str).collect();
                    let text = format!(
                        "model_unlisted: the server lists {shown:?}, not {name:?}; it may answer with another model or refuse"
                    );
                    tracing::warn!("{text}");
                    *w.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list the model server's models; summaries fall back to the rules while it is unreachable");
                }
            }
        });
        Ok(ModelSummarizer {
            rules: RuleBased,
            client,
            config: config.clone(),
            redactor,
            runtime,
            stats: Arc::new(ModelStats::default()),
            stop: tokio_util::sync::CancellationToken::new(),
            warning,
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
        let state: ModelState = postcard::from_bytes(&r.state).map_err(|e| {
            StateError::Unreadable(format!("model fold state cannot be decoded: {e}"))
        })?;
        let items = match state.items {
            Some(j) => Some(serde_json::from_str(&j).map_err(|e| {
                StateError::Unreadable(format!("model items cannot be decoded: {e}"))
            })?),
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
            .map_err(|e| StateError::Unreadable(e.to_string()))?;
        postcard::to_allocvec(&ModelState { rules, items })
            .map_err(|e| StateError::Unreadable(e.to_string()))
    }

    /// The rules' fold, as this summarizer's state, labelled `why`.
    fn rules_only(
        &self,
        rules_prev: Option<&FoldRecord>,
        turns: &[Turn],
        ctx: &SummaryContext,
        label: String,
        notes: Vec<String>,
    ) -> Result<Folded, StateError> {
        let out = self.rules.fold(rules_prev, turns, ctx)?;
        Ok(Folded {
            state: Self::encode(out.state, None)?,
            summary: out.summary,
            label: Some(label),
            notes,
        })
    }

    /// Whether the model writes this fold (else the rules do, at once).
    fn uses_model(&self, ctx: &SummaryContext) -> bool {
        // A handoff or a removed turn's refold never waits on a model:
        // its summary is the rules'.
        self.config.covers(&ctx.namespace) && !ctx.wait_free
    }

    /// When the model work of the pipeline run that `ctx` belongs to must
    /// be done: `retry_budget_secs` after the run started, shared by its
    /// chunks, re-asks and the validation retry (so a Summarize's
    /// deadline can be derived from it: `ModelConfig::summarize_deadline`).
    fn deadline(&self, ctx: &SummaryContext) -> Instant {
        let budget = Duration::from_secs(self.config.retry_budget_secs);
        let spent = Duration::from_nanos(u64::try_from(now_nanos() - ctx.now).unwrap_or(0));
        Instant::now() + budget.saturating_sub(spent)
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

    /// One call, its answer parsed, bounded and un-redacted; a malformed,
    /// runaway or empty answer, or an invented placeholder, is asked again
    /// once with what was wrong. Every HTTP attempt goes into `notes`.
    fn call(
        &self,
        so_far: &ModelItems,
        turns: &[Turn],
        violations: &[String],
        deadline: Instant,
        notes: &mut Vec<String>,
    ) -> Outcome {
        let mut hints: Vec<String> = violations.to_vec();
        let has_content = turns
            .iter()
            .map(|t| t.content.chars().filter(|c| !c.is_whitespace()).count())
            .sum::<usize>()
            >= CONTENT_CHARS;
        let max_tokens = prompt::max_tokens(so_far, turns.len(), self.config.max_output_tokens);
        let schema = prompt::schema();
        for attempt in 0..2 {
            let mut names = Placeholders::default();
            let user =
                prompt::user_message(so_far, turns, self.redactor.as_ref(), &mut names, &hints);
            let write = |form: Form| {
                if form.schema_in_prompt() {
                    format!("{user}\n{}\n", prompt::SHAPE)
                } else {
                    user.clone()
                }
            };
            let mut records = Vec::new();
            let answer = self.runtime.block_on(async {
                tokio::select! {
                    a = self.client.complete(prompt::SYSTEM, &write, &schema, max_tokens, deadline, &mut records) => Some(a),
                    () = self.stop.cancelled() => None,
                }
            });
            for r in &records {
                self.stats.calls.fetch_add(1, Relaxed);
                self.stats
                    .latency_ms
                    .fetch_add(r.elapsed.as_millis() as u64, Relaxed);
                self.stats.prompt_tokens.fetch_add(r.prompt_tokens, Relaxed);
                self.stats
                    .completion_tokens
                    .fetch_add(r.completion_tokens, Relaxed);
                notes.push(r.to_string());
            }
            let c = match answer {
                None => return Outcome::Interrupted,
                Some(Ok(c)) => c,
                Some(Err(e)) => {
                    self.stats.failures.fetch_add(1, Relaxed);
                    return Outcome::Failed(e.to_string());
                }
            };
            if c.finish_reason == "length" {
                self.stats.failures.fetch_add(1, Relaxed);
                return Outcome::CutOff(format!(
                    "the answer was cut off at max_tokens={max_tokens} ({} tokens) for {} turns",
                    c.completion_tokens,
                    turns.len()
                ));
            }
            let restored = match &self.redactor {
                Some(r) => r.restore(&c.content, &names).map_err(|invented| {
                    format!(
                        "the answer contains placeholders that were never sent: {}",
                        invented.join(", ")
                    )
                }),
                None => Ok(c.content.clone()),
            };
            let checked = restored
                .and_then(|text| {
                    serde_json::from_str::<ModelItems>(&plain_json(json_of(&text))).map_err(|e| {
                        format!("the answer is not the JSON object the schema describes: {e}")
                    })
                })
                .and_then(|items| match items.over_limits() {
                    Some(why) => Err(format!("runaway answer: {why}")),
                    None if has_content && items.is_near_empty() => Err(format!(
                        "empty answer: no intent, no item and almost no prose for {} turns with content",
                        turns.len()
                    )),
                    None => Ok(items),
                });
            match checked {
                Ok(items) => return Outcome::Items(items),
                Err(why) => {
                    self.stats.failures.fetch_add(1, Relaxed);
                    tracing::warn!(attempt, reason = %why, "model answer refused");
                    notes.push(format!("model_answer_refused: {why}"));
                    if attempt == 1 {
                        return Outcome::Failed(why);
                    }
                    hints.push(why);
                }
            }
        }
        Outcome::Failed("no usable answer".into())
    }

    /// The rules' summary of the same turns, stored because the model's
    /// could not be (`why`, named in the label and the health flags).
    fn fell_back(
        &self,
        rules_out: Folded,
        mut notes: Vec<String>,
        why: &str,
    ) -> Result<Folded, StateError> {
        self.stats.fallbacks.fetch_add(1, Relaxed);
        tracing::warn!(reason = %why, "model summary failed; the rules' summary is stored");
        notes.push(format!("model_fallback: {why}"));
        Ok(Folded {
            state: Self::encode(rules_out.state, None)?,
            summary: rules_out.summary,
            notes: bounded(notes),
            label: Some(format!(
                "{} (fallback from model:{}: {why})",
                self.rules.label(),
                self.client.model()
            )),
        })
    }

    fn model_fold(
        &self,
        previous: Option<&FoldRecord>,
        turns: &[Turn],
        ctx: &SummaryContext,
        violations: &[String],
    ) -> Result<Folded, StateError> {
        let deadline = self.deadline(ctx);
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
        let mut notes: Vec<String> = self
            .warning
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect();
        let mut queue: VecDeque<&[Turn]> = self.chunks(turns).into();
        let mut cut_offs = 0;
        while let Some(chunk) = queue.pop_front() {
            match self.call(&so_far, chunk, violations, deadline, &mut notes) {
                Outcome::Items(i) => so_far = i,
                Outcome::Interrupted => {
                    return Err(StateError::interrupted("the daemon is shutting down"))
                }
                // Fewer turns, shorter answer: the chunk in two halves (a
                // few times per fold: a model that runs on regardless
                // falls back soon).
                Outcome::CutOff(why) if chunk.len() > 1 && cut_offs < MAX_CUT_OFFS => {
                    cut_offs += 1;
                    let mid = chunk.len() / 2;
                    notes.push(format!(
                        "model_cut_off: {why}; sent again as {} and {} turns",
                        mid,
                        chunk.len() - mid
                    ));
                    queue.push_front(&chunk[mid..]);
                    queue.push_front(&chunk[..mid]);
                }
                Outcome::CutOff(why) | Outcome::Failed(why) => {
                    return self.fell_back(rules_out, notes, &why)
                }
            }
        }
        let mut summary = so_far.clone().apply(rules_out.summary.clone());
        // The floor: what the rules found with evidence stays.
        let merged = floor::merge(&mut summary, &rules_out.summary);
        let label = if merged.is_empty() {
            format!("model:{}", self.client.model())
        } else {
            so_far = ModelItems::of(&summary);
            format!("model:{}+rules", self.client.model())
        };
        notes.extend(merged);
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
            label: Some(label),
            notes: bounded(notes),
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

/// `text` with raw control characters (a line break inside a string,
/// which grammar-constrained small models write and JSON forbids) as
/// spaces; between tokens they were whitespace anyway.
fn plain_json(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(char::is_control) {
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect::<String>()
            .into()
    } else {
        text.into()
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
            return self.rules_only(
                rules_prev.as_ref(),
                turns,
                ctx,
                self.rules.label(),
                Vec::new(),
            );
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
                vec!["model_fallback: the model's summary was refused twice by validation".into()],
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_folds_notes_keep_their_first_and_last_calls() {
        let notes: Vec<String> = (0..500).map(|i| format!("call {i}")).collect();
        let kept = bounded(notes);
        assert_eq!(kept.len(), MAX_NOTES);
        assert_eq!(kept[0], "call 0");
        assert_eq!(kept.last().unwrap(), "call 499");
        assert!(kept.iter().any(|n| n.contains("more model notes")));
        let few: Vec<String> = (0..3).map(|i| i.to_string()).collect();
        assert_eq!(bounded(few.clone()), few);
    }

    #[test]
    fn a_line_break_inside_a_string_still_parses() {
        let answer = "{\"user_intent\": \"move the\nflight\", \"user_intent_turn\": 1, \"decisions\": [],\n \"pending_actions\": [], \"open_questions\": [], \"key_facts\": [], \"conflicts\": [], \"prose\": \"x\"}";
        assert!(serde_json::from_str::<ModelItems>(answer).is_err());
        let items: ModelItems = serde_json::from_str(&plain_json(answer)).unwrap();
        assert_eq!(items.user_intent, "move the flight");
    }
}
