//! One OpenAI-compatible chat-completions call, with what real servers do
//! to it. The structured-output form is negotiated once per client and
//! remembered ([`Form`]): a 4xx/5xx whose body names `response_format`
//! is the server saying which forms it takes, not an outage. Only what
//! retrying can fix is retried (429, 503, time-outs, refused or dropped
//! connections), at most once per distinct failure, honouring
//! `Retry-After`, and never past the caller's deadline. Every HTTP attempt
//! leaves a [`CallRecord`] (status, tokens, time, finish reason, the
//! server's own error text) for the audit. Answers are asked for as a
//! stream and read chunk by chunk ([`StreamedAnswer`]), so an attempt
//! that is given up is dropped between two tokens and its closed
//! connection stops the server generating. HTTP is reqwest (rustls);
//! nothing here is hand-written HTTP.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use super::stream::{StreamedAnswer, Usage, MAX_ANSWER_BYTES};
use crate::model::Encoding;
use crate::tokens;

/// Where and how to call.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Base URL; `/v1/chat/completions` is appended.
    pub url: String,
    /// The model's name.
    pub model: String,
    /// Bearer key, if the server wants one.
    pub api_key: Option<String>,
    /// Limit of one HTTP attempt.
    pub timeout: Duration,
    /// Whether the instructions go in a `system` message (else they open
    /// the first user message: for chat templates without a system role).
    pub system_role: bool,
}

/// How the answer's shape is asked for, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `response_format: {type: json_schema, json_schema: {schema}}`
    /// (OpenAI, vLLM, Ollama, llama.cpp's own server).
    JsonSchema,
    /// `response_format: {type: json_object, schema}` with the schema in
    /// the prompt too (llama-cpp-python's server constrains to it).
    JsonObject,
    /// No `response_format`; the schema in the prompt only.
    Plain,
}

impl Form {
    fn code(self) -> u8 {
        match self {
            Form::JsonSchema => 1,
            Form::JsonObject => 2,
            Form::Plain => 3,
        }
    }

    fn of(code: u8) -> Option<Form> {
        match code {
            1 => Some(Form::JsonSchema),
            2 => Some(Form::JsonObject),
            3 => Some(Form::Plain),
            _ => None,
        }
    }

    /// The next form to try when the server refuses this one.
    fn weaker(self) -> Option<Form> {
        match self {
            Form::JsonSchema => Some(Form::JsonObject),
            Form::JsonObject => Some(Form::Plain),
            Form::Plain => None,
        }
    }

    /// Its name in the audit.
    pub fn name(self) -> &'static str {
        match self {
            Form::JsonSchema => "json_schema",
            Form::JsonObject => "json_object",
            Form::Plain => "plain",
        }
    }

    /// Whether the prompt must carry the schema (the server does not).
    pub fn schema_in_prompt(self) -> bool {
        self != Form::JsonSchema
    }
}

/// A chat message.
#[derive(Debug, Clone, Serialize)]
struct Message {
    role: &'static str,
    content: String,
}

/// What a call returned.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The assistant message's text.
    pub content: String,
    /// `stop`, `length`, … as the server said (empty when it did not).
    pub finish_reason: String,
    /// Prompt tokens as the server reported them.
    pub prompt_tokens: u64,
    /// Completion tokens as the server reported them.
    pub completion_tokens: u64,
}

/// One HTTP attempt, for the audit.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The form asked for.
    pub form: Form,
    /// `200`, `HTTP 500`, `timeout`, `connection refused`, …
    pub status: String,
    /// The finish reason of a completion.
    pub finish_reason: String,
    /// Tokens as the server reported them.
    pub prompt_tokens: u64,
    /// Tokens as the server reported them.
    pub completion_tokens: u64,
    /// Wall time of the attempt.
    pub elapsed: Duration,
    /// The `max_tokens` sent.
    pub max_tokens: u32,
    /// The server's error text, or what went wrong (clipped).
    pub error: String,
    /// The server reported no usage: the completion tokens are the
    /// streamed chunks, the prompt's counted by mnemo.
    pub usage_counted: bool,
}

impl std::fmt::Display for CallRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "model call: form={} status={} finish={} prompt_tokens={} completion_tokens={} max_tokens={} latency_ms={}",
            self.form.name(),
            self.status,
            if self.finish_reason.is_empty() { "-" } else { &self.finish_reason },
            self.prompt_tokens,
            self.completion_tokens,
            self.max_tokens,
            self.elapsed.as_millis()
        )?;
        if self.usage_counted {
            write!(f, " usage=counted")?;
        }
        if !self.error.is_empty() {
            write!(f, " error={}", self.error)?;
        }
        Ok(())
    }
}

/// Why no completion came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// A transient failure came back after its one retry, or the deadline
    /// left no room for one (the last failure named).
    Unavailable(String),
    /// The server refused the request for good (its text quoted).
    Refused(String),
    /// The answer was not a chat completion.
    Malformed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unavailable(e) => write!(f, "model unavailable: {e}"),
            CallError::Refused(e) => write!(f, "model server refused the request: {e}"),
            CallError::Malformed(e) => write!(
                f,
                "model server answered something else than a completion: {e}"
            ),
        }
    }
}

#[derive(Deserialize)]
struct Reply {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ReplyMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct ModelList {
    #[serde(default)]
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
}

/// A client for one endpoint; at most `max_concurrent` calls in flight.
pub struct ChatClient {
    http: reqwest::Client,
    endpoint: Endpoint,
    slots: Arc<Semaphore>,
    /// The form the server honours (0: not learnt yet).
    form: AtomicU8,
}

/// One attempt's outcome.
enum Attempt {
    Done(Completion),
    /// Worth one retry: the failure's kind, its text, the server's wait.
    Transient(&'static str, String, Option<Duration>),
    /// The server does not take this form (its text).
    FormRefused(String),
    Fail(CallError),
}

/// Longest server text kept in a record or an error.
const ERROR_CHARS: usize = 300;

fn clip(text: &str) -> String {
    crate::summarize::rules::clip(text.trim(), ERROR_CHARS)
}

/// What a failed request was, in plain words ("connection refused" when
/// nothing listens), walking the error's sources.
fn transport_error(e: &reqwest::Error) -> (&'static str, String) {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            match io.kind() {
                ConnectionRefused => {
                    return (
                        "connection",
                        "connection refused (nothing listens there)".into(),
                    )
                }
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => {
                    return (
                        "connection",
                        format!("connection dropped by the server: {io}"),
                    )
                }
                _ => {}
            }
        }
        source = s.source();
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    ("connection", clip(&text))
}

impl ChatClient {
    /// A client for `endpoint`.
    pub fn new(endpoint: Endpoint, max_concurrent: usize) -> Result<ChatClient, String> {
        let http = reqwest::Client::builder()
            .connect_timeout(endpoint.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(ChatClient {
            http,
            endpoint,
            slots: Arc::new(Semaphore::new(max_concurrent.max(1))),
            form: AtomicU8::new(0),
        })
    }

    /// The endpoint's model name.
    pub fn model(&self) -> &str {
        &self.endpoint.model
    }

    /// The form the next call asks for.
    pub fn form(&self) -> Form {
        Form::of(self.form.load(Relaxed)).unwrap_or(Form::JsonSchema)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint.url.trim_end_matches('/'))
    }

    /// The model names `GET /v1/models` lists.
    pub async fn listed_models(&self) -> Result<Vec<String>, String> {
        let url = self.url("/v1/models");
        let mut request = self.http.get(&url).timeout(self.endpoint.timeout);
        if let Some(key) = &self.endpoint.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("GET {url}: {}", transport_error(&e).1))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| format!("GET {url}: {}", transport_error(&e).1))?;
        if !status.is_success() {
            return Err(format!("GET {url}: HTTP {status}: {}", clip(&text)));
        }
        let list: ModelList =
            serde_json::from_str(&text).map_err(|e| format!("GET {url}: not a model list: {e}"))?;
        Ok(list.data.into_iter().map(|m| m.id).collect())
    }

    /// One completion at temperature 0 following `schema` in the form the
    /// server honours, at most `max_tokens` long, given up at `deadline`.
    /// `prompt(form)` writes the user message (with the schema when the
    /// form needs it). Every HTTP attempt is appended to `records`.
    pub async fn complete(
        &self,
        instructions: &str,
        prompt: &dyn Fn(Form) -> String,
        schema: &Value,
        max_tokens: u32,
        deadline: Instant,
        records: &mut Vec<CallRecord>,
    ) -> Result<Completion, CallError> {
        let _slot = match tokio::time::timeout_at(deadline.into(), self.slots.acquire()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) => return Err(CallError::Unavailable("the client is shutting down".into())),
            Err(_) => {
                return Err(CallError::Unavailable(
                    "the time budget ran out waiting for a free call slot".into(),
                ))
            }
        };
        let mut seen: Vec<&'static str> = Vec::new();
        loop {
            let form = self.form();
            let now = Instant::now();
            if now >= deadline {
                return Err(CallError::Unavailable(
                    "the time budget ran out before the call".into(),
                ));
            }
            let limit = self.endpoint.timeout.min(deadline - now);
            let messages = self.messages(instructions, prompt(form));
            let started = Instant::now();
            let mut record = CallRecord {
                form,
                status: String::new(),
                finish_reason: String::new(),
                prompt_tokens: 0,
                completion_tokens: 0,
                elapsed: Duration::ZERO,
                max_tokens,
                error: String::new(),
                usage_counted: false,
            };
            // Past `limit` the attempt's future is dropped: its connection
            // closes, which is how a server learns to stop generating.
            let attempt = match tokio::time::timeout(
                limit,
                self.attempt(&messages, schema, form, max_tokens, &mut record),
            )
            .await
            {
                Ok(a) => a,
                Err(_) => {
                    record.status = "timeout".into();
                    Attempt::Transient(
                        "timeout",
                        format!("no answer within {} ms", limit.as_millis()),
                        None,
                    )
                }
            };
            record.elapsed = started.elapsed();
            match attempt {
                Attempt::Done(c) => {
                    records.push(record);
                    return Ok(c);
                }
                Attempt::Fail(e) => {
                    record.error = clip(&e.to_string());
                    records.push(record);
                    return Err(e);
                }
                Attempt::FormRefused(text) => {
                    record.error = clip(&text);
                    records.push(record);
                    let Some(next) = form.weaker() else {
                        return Err(CallError::Refused(format!(
                            "the server refuses even a request without response_format: {}",
                            clip(&text)
                        )));
                    };
                    tracing::warn!(refused = form.name(), next = next.name(), server = %clip(&text), "the model server does not take this response_format; asking in the next form from now on");
                    // Learnt once for the client: later calls start there.
                    self.form.store(next.code(), Relaxed);
                }
                Attempt::Transient(kind, why, after) => {
                    record.error = clip(&why);
                    records.push(record);
                    if seen.contains(&kind) {
                        return Err(CallError::Unavailable(format!(
                            "{why} (again after one retry)"
                        )));
                    }
                    seen.push(kind);
                    let wait = after.unwrap_or(Duration::from_millis(500));
                    if Instant::now() + wait >= deadline {
                        return Err(CallError::Unavailable(format!(
                            "{why}; no time left for a retry after {} ms",
                            wait.as_millis()
                        )));
                    }
                    tracing::warn!(retry_in_ms = wait.as_millis() as u64, reason = %why, "model call failed; retrying once");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    fn messages(&self, instructions: &str, user: String) -> Vec<Message> {
        if self.endpoint.system_role {
            vec![
                Message {
                    role: "system",
                    content: instructions.to_owned(),
                },
                Message {
                    role: "user",
                    content: user,
                },
            ]
        } else {
            vec![Message {
                role: "user",
                content: format!("{instructions}\n\n{user}"),
            }]
        }
    }

    async fn attempt(
        &self,
        messages: &[Message],
        schema: &Value,
        form: Form,
        max_tokens: u32,
        record: &mut CallRecord,
    ) -> Attempt {
        let url = self.url("/v1/chat/completions");
        let mut body = json!({
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
            // Streamed, so that abandoning the call stops the server.
            "stream": true,
        });
        match form {
            Form::JsonSchema => {
                body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "session_summary", "strict": true, "schema": schema}});
            }
            Form::JsonObject => {
                body["response_format"] = json!({"type": "json_object", "schema": schema});
            }
            Form::Plain => {}
        }
        let mut request = self.http.post(&url).json(&body);
        if let Some(key) = &self.endpoint.api_key {
            request = request.bearer_auth(key);
        }
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                let (kind, text) = transport_error(&e);
                record.status = text.clone();
                return Attempt::Transient(kind, format!("cannot reach {url}: {text}"), None);
            }
        };
        let status = response.status();
        record.status = status.as_u16().to_string();
        let after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s.min(600)));
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        // Read chunk by chunk: a dropped attempt closes the connection
        // between two tokens, and the answer's size is bounded.
        let mut answer = StreamedAnswer::default();
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(bytes)) if streamed && status.is_success() => {
                    if let Err(e) = answer.feed(&bytes) {
                        return Attempt::Fail(CallError::Malformed(e));
                    }
                }
                Ok(Some(bytes)) => {
                    if body.len() + bytes.len() > MAX_ANSWER_BYTES {
                        return Attempt::Fail(CallError::Malformed(format!(
                            "the answer is larger than {} MiB",
                            MAX_ANSWER_BYTES >> 20
                        )));
                    }
                    body.extend_from_slice(&bytes);
                }
                Ok(None) => break,
                Err(e) => {
                    let (kind, text) = transport_error(&e);
                    return Attempt::Transient(kind, format!("answer cut off: {text}"), None);
                }
            }
        }
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let server = clip(&text);
            if form != Form::Plain && names_response_format(&text) {
                return Attempt::FormRefused(format!("HTTP {status}: {server}"));
            }
            return match status.as_u16() {
                429 => Attempt::Transient("429", format!("HTTP {status}: {server}"), after),
                503 => Attempt::Transient("503", format!("HTTP {status}: {server}"), after),
                _ => Attempt::Fail(CallError::Refused(format!("HTTP {status}: {server}"))),
            };
        }
        let (content, finish_reason, usage) = if streamed {
            if let Err(e) = answer.finish() {
                return Attempt::Fail(CallError::Malformed(e));
            }
            if !answer.done && answer.finish_reason.is_none() {
                return Attempt::Transient(
                    "cut",
                    "answer cut off: the stream ended before the answer did".into(),
                    None,
                );
            }
            // A server that reports no usage in a stream (llama.cpp's
            // Python server) streams a token per chunk; the prompt is
            // counted with mnemo's own tokenizer.
            let usage = answer.usage.unwrap_or_else(|| {
                record.usage_counted = true;
                Usage {
                    prompt_tokens: messages
                        .iter()
                        .map(|m| tokens::count(Encoding::Cl100kBase, &m.content) as u64)
                        .sum(),
                    completion_tokens: answer.content_chunks,
                }
            });
            (
                answer.content,
                answer.finish_reason.unwrap_or_default(),
                usage,
            )
        } else {
            let reply: Reply = match serde_json::from_str(&text) {
                Ok(r) => r,
                Err(e) => return Attempt::Fail(CallError::Malformed(e.to_string())),
            };
            let Some(choice) = reply.choices.into_iter().next() else {
                return Attempt::Fail(CallError::Malformed("no choice in the answer".into()));
            };
            (
                choice.message.content.unwrap_or_default(),
                choice.finish_reason.unwrap_or_default(),
                reply.usage.unwrap_or_default(),
            )
        };
        record.prompt_tokens = usage.prompt_tokens;
        record.completion_tokens = usage.completion_tokens;
        record.finish_reason = finish_reason.clone();
        Attempt::Done(Completion {
            content,
            finish_reason,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
        })
    }
}

/// Whether an error body is about the request's `response_format` (the
/// server telling which forms it takes).
fn names_response_format(body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    b.contains("response_format") || b.contains("json_schema")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_weaken_in_order_and_round_trip() {
        let mut f = Form::JsonSchema;
        let mut seen = vec![f];
        while let Some(n) = f.weaker() {
            assert_eq!(Form::of(n.code()), Some(n));
            seen.push(n);
            f = n;
        }
        assert_eq!(seen, [Form::JsonSchema, Form::JsonObject, Form::Plain]);
        assert!(!Form::JsonSchema.schema_in_prompt() && Form::Plain.schema_in_prompt());
    }

    #[test]
    fn a_body_naming_response_format_is_a_capability_answer() {
        // llama-cpp-python's own words for a json_schema request.
        assert!(names_response_format(
            r#"{"detail":[{"type":"literal_error","loc":["body","response_format","type"],"msg":"Input should be 'text' or 'json_object'"}]}"#
        ));
        assert!(!names_response_format("out of memory"));
    }
}
