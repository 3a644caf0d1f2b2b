//! One OpenAI-compatible chat-completions call, with what a server may do
//! to it: 429 with `Retry-After`, 5xx, time-outs and refused connections
//! are retried with backoff within a time budget; a server that does not
//! know the JSON-schema `response_format` is asked again for plain JSON.
//! HTTP is reqwest (rustls); nothing here is hand-written HTTP.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

/// Where and how to call.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Base URL; `/v1/chat/completions` is appended.
    pub url: String,
    /// The model's name.
    pub model: String,
    /// Bearer key, if the server wants one.
    pub api_key: Option<String>,
    /// Limit of one call.
    pub timeout: Duration,
    /// Limit of all calls of one request, retries included.
    pub budget: Duration,
}

/// A chat message.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    /// `system` or `user`.
    pub role: &'static str,
    /// Its text.
    pub content: String,
}

/// What a call returned.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The assistant message's text.
    pub content: String,
    /// Prompt tokens as the server reported them.
    pub prompt_tokens: u64,
    /// Completion tokens as the server reported them.
    pub completion_tokens: u64,
    /// Attempts beyond the first (retries).
    pub retries: u32,
    /// Wall time of the call with its retries.
    pub latency: Duration,
}

/// Why no completion came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The retry budget ran out on retryable failures (the last one named).
    Exhausted(String),
    /// The server refused the request for good (4xx other than 429).
    Refused(String),
    /// The answer was not a chat completion.
    Malformed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Exhausted(e) => write!(f, "model unavailable within the retry budget: {e}"),
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
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// A client for one endpoint; at most `max_concurrent` calls in flight.
pub struct ChatClient {
    http: reqwest::Client,
    endpoint: Endpoint,
    slots: Arc<Semaphore>,
}

/// One attempt's outcome.
enum Attempt {
    Done(Completion),
    Retry(String, Option<Duration>),
    Fail(CallError),
    NoSchema,
}

impl ChatClient {
    /// A client for `endpoint`.
    pub fn new(endpoint: Endpoint, max_concurrent: usize) -> Result<ChatClient, String> {
        let http = reqwest::Client::builder()
            .timeout(endpoint.timeout)
            .connect_timeout(endpoint.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(ChatClient {
            http,
            endpoint,
            slots: Arc::new(Semaphore::new(max_concurrent.max(1))),
        })
    }

    /// The endpoint's model name.
    pub fn model(&self) -> &str {
        &self.endpoint.model
    }

    /// One completion at temperature 0, asked to follow `schema` (plain
    /// JSON when the server does not take JSON-schema response formats).
    pub async fn complete(
        &self,
        messages: &[Message],
        schema: &Value,
    ) -> Result<Completion, CallError> {
        let started = Instant::now();
        let deadline = started + self.endpoint.budget;
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| CallError::Exhausted("the client is shutting down".into()))?;
        let mut with_schema = true;
        let mut retries = 0u32;
        let mut backoff = Duration::from_millis(250);
        loop {
            match self.attempt(messages, schema, with_schema).await {
                Attempt::Done(mut c) => {
                    c.retries = retries;
                    c.latency = started.elapsed();
                    return Ok(c);
                }
                Attempt::NoSchema if with_schema => {
                    with_schema = false;
                    continue;
                }
                Attempt::NoSchema => {
                    return Err(CallError::Refused(
                        "response_format refused even without a schema".into(),
                    ))
                }
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry(why, after) => {
                    let wait = after.unwrap_or(backoff);
                    if Instant::now() + wait >= deadline {
                        return Err(CallError::Exhausted(why));
                    }
                    tracing::warn!(retry_in_ms = wait.as_millis() as u64, reason = %why, "model call failed; retrying");
                    tokio::time::sleep(wait).await;
                    retries += 1;
                    backoff = (backoff * 2).min(Duration::from_secs(8));
                }
            }
        }
    }

    async fn attempt(&self, messages: &[Message], schema: &Value, with_schema: bool) -> Attempt {
        let url = format!(
            "{}/v1/chat/completions",
            self.endpoint.url.trim_end_matches('/')
        );
        let response_format = if with_schema {
            json!({"type": "json_schema", "json_schema": {"name": "session_summary", "strict": true, "schema": schema}})
        } else {
            json!({"type": "json_object"})
        };
        let body = json!({
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": 0,
            "response_format": response_format,
        });
        let mut request = self.http.post(&url).json(&body);
        if let Some(key) = &self.endpoint.api_key {
            request = request.bearer_auth(key);
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Attempt::Retry(
                    format!("no answer within {:?}", self.endpoint.timeout),
                    None,
                )
            }
            Err(e) => return Attempt::Retry(format!("cannot reach {url}: {e}"), None),
        };
        let status = response.status();
        if status.as_u16() == 429 || status.is_server_error() {
            let after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| Duration::from_secs(s.min(60)));
            return Attempt::Retry(format!("HTTP {status}"), after);
        }
        let text = match response.text().await {
            Ok(t) => t,
            Err(e) if e.is_timeout() => {
                return Attempt::Retry(
                    format!("no answer within {:?}", self.endpoint.timeout),
                    None,
                )
            }
            Err(e) => return Attempt::Retry(format!("answer cut off: {e}"), None),
        };
        if status.is_client_error() {
            if with_schema && text.contains("response_format") {
                return Attempt::NoSchema;
            }
            return Attempt::Fail(CallError::Refused(format!(
                "HTTP {status}: {}",
                crate::summarize::rules::clip(&text, 300)
            )));
        }
        let reply: Reply = match serde_json::from_str(&text) {
            Ok(r) => r,
            Err(e) => return Attempt::Fail(CallError::Malformed(e.to_string())),
        };
        let Some(content) = reply
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message.content)
        else {
            return Attempt::Fail(CallError::Malformed("no choice with a message".into()));
        };
        let usage = reply.usage.unwrap_or(Usage {
            prompt_tokens: 0,
            completion_tokens: 0,
        });
        Attempt::Done(Completion {
            content,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            retries: 0,
            latency: Duration::ZERO,
        })
    }
}
