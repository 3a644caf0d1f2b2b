//! The MCP tools: each one a thin translation from a tool call (JSON
//! arguments, schema derived from the structs below) to the daemon's gRPC
//! contract, and from the answer to bounded text. The namespace and the
//! API key are the server's configuration; the model never chooses them.
//! A gRPC error comes back as a tool error carrying its code and reason.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::render::{self, bounded};
use super::Tools;
use crate::pb;

/// Most turns one `remember` call may append.
pub const MAX_REMEMBER_TURNS: usize = 64;
/// Most hits `search_memory` returns.
pub const MAX_SEARCH_LIMIT: u32 = 20;
/// Most items a listing returns.
pub const MAX_LIST_LIMIT: u32 = 50;
/// Smallest bundle the daemon makes.
const MIN_BUDGET: u32 = 256;

type ToolResult = Result<String, String>;

/// Arguments of `get_context`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetContext {
    /// The session to continue.
    pub session_id: String,
    /// What you are about to do; memory bearing on it is retrieved from the session's older turns and the subject's past sessions. Empty: nothing is retrieved (pass the user's newest message to retrieve for it).
    #[serde(default)]
    pub query: String,
    /// Most tokens the context may take (256 up to the server's limit; default 2000).
    pub budget_tokens: Option<u32>,
}

/// Who produced a turn.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person.
    User,
    /// The agent.
    Assistant,
    /// Instructions.
    System,
    /// A tool's output.
    Tool,
}

/// One turn to remember.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TurnIn {
    /// Who produced it.
    pub role: Role,
    /// The person's or agent's id (optional).
    #[serde(default)]
    pub speaker: String,
    /// What was said, verbatim.
    pub content: String,
}

/// Arguments of `remember`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Remember {
    /// The session to append to; created when it does not exist yet.
    pub session_id: String,
    /// The person, customer or project the session is about (used only when the session is created).
    #[serde(default)]
    pub subject_id: String,
    /// The turns, oldest first (1 to 64).
    pub turns: Vec<TurnIn>,
}

/// Arguments of `search_memory`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchMemory {
    /// What to look for.
    pub query: String,
    /// Only this subject's turns, facts and past sessions.
    #[serde(default)]
    pub subject_id: String,
    /// Only this session's turns.
    #[serde(default)]
    pub session_id: String,
    /// Most hits (1 to 20; default 5).
    pub limit: Option<u32>,
}

/// Arguments of `put_fact`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PutFact {
    /// Who or what the fact is about.
    pub subject_id: String,
    /// The fact, in one sentence.
    pub text: String,
    /// Optional key, e.g. preferred_language: a fact with the key of a current fact supersedes it (the old one is kept as history).
    #[serde(default)]
    pub key: String,
    /// Optional tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// Arguments of `list_facts`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListFacts {
    /// Whose facts.
    pub subject_id: String,
    /// Only the fact with this key.
    #[serde(default)]
    pub key: String,
    /// Only facts with this tag.
    #[serde(default)]
    pub tag: String,
    /// Most facts (1 to 50; default 20).
    pub limit: Option<u32>,
}

/// Arguments of `list_pending_actions`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListPendingActions {
    /// The session whose open actions to list (with those its subject's past sessions left open).
    pub session_id: String,
}

/// A status an action can be given.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished: it no longer carries over to later sessions.
    Done,
}

/// Arguments of `update_pending_action`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdatePendingAction {
    /// The session the action came from (as list_pending_actions shows it).
    pub session_id: String,
    /// The action's action_seq (as list_pending_actions shows it).
    pub action_seq: u64,
    /// The new status.
    pub status: ActionStatus,
}

/// Arguments of `handoff`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Handoff {
    /// The session to pass on.
    pub session_id: String,
    /// Its current owner.
    pub from_agent: String,
    /// The agent taking over.
    pub to_agent: String,
    /// Why (kept in the session).
    #[serde(default)]
    pub reason: String,
    /// The lease epoch you hold; when absent, the session's current one is used (no fencing against another agent's concurrent handoff).
    pub lease_epoch: Option<u64>,
}

/// Arguments of `list_sessions`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListSessions {
    /// Only this subject's sessions.
    #[serde(default)]
    pub subject_id: String,
    /// Most sessions (1 to 50; default 20).
    pub limit: Option<u32>,
    /// Continue a previous listing (its next_page_token).
    #[serde(default)]
    pub page_token: String,
}

/// A gRPC failure as one line a model (and a person) can act on: the
/// code, mnemo's reason when it sent one, and the message.
fn failure(s: tonic::Status) -> String {
    let reason = s
        .metadata()
        .get(crate::api::status::REASON)
        .and_then(|v| v.to_str().ok())
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    format!("{:?}{reason}: {}", s.code(), s.message())
}

/// `value` or `default`, refused outside `1..=max`.
fn limit(value: Option<u32>, default: u32, max: u32, name: &str) -> Result<u32, String> {
    match value.unwrap_or(default) {
        n if (1..=max).contains(&n) => Ok(n),
        n => Err(format!("{name} must be from 1 to {max}, not {n}")),
    }
}

impl Tools {
    /// The bundle of `session_id` in the configured namespace.
    async fn bundle(
        &self,
        session_id: String,
        budget_tokens: u32,
        query: String,
        skip_recall: bool,
    ) -> Result<pb::ContextBundle, String> {
        self.client()
            .get_context_bundle(pb::GetContextBundleRequest {
                namespace: self.namespace().to_owned(),
                session_id,
                budget_tokens,
                query,
                skip_recall,
                ..Default::default()
            })
            .await
            .map_err(failure)?
            .into_inner()
            .bundle
            .ok_or_else(|| "the daemon sent no bundle".to_owned())
    }

    /// `lines` within this server's token bound.
    fn bounded(&self, lines: &[String], more: &str) -> ToolResult {
        Ok(bounded(lines, self.max_tokens() as usize, more))
    }
}

#[tool_router(vis = "pub(super)")]
impl Tools {
    #[tool(
        description = "Load what you need to continue a session, within a token budget: its open pending actions and questions, the summary, the subject's facts and past sessions, the turns since the summary, and memory retrieved for your query (each cited by session and turn). Put the result at the head of your context, before anything else that changes: its beginning stays the same from one call to the next, so a prompt cache reuses it."
    )]
    async fn get_context(&self, Parameters(p): Parameters<GetContext>) -> ToolResult {
        let budget = p.budget_tokens.unwrap_or(2000);
        if !(MIN_BUDGET..=self.max_tokens()).contains(&budget) {
            return Err(format!(
                "budget_tokens must be from {MIN_BUDGET} to {} (this server's limit), not {budget}",
                self.max_tokens()
            ));
        }
        let b = self.bundle(p.session_id, budget, p.query, false).await?;
        Ok(b.rendered_text)
    }

    #[tool(
        description = "Remember turns of a conversation: appends them, verbatim and durably, to a session (created when it does not exist yet). Summaries, facts and search follow from them."
    )]
    async fn remember(&self, Parameters(p): Parameters<Remember>) -> ToolResult {
        if p.turns.is_empty() || p.turns.len() > MAX_REMEMBER_TURNS {
            return Err(format!(
                "turns must hold 1 to {MAX_REMEMBER_TURNS} turns, not {}",
                p.turns.len()
            ));
        }
        let turns: Vec<pb::NewTurn> = p
            .turns
            .into_iter()
            .map(|t| pb::NewTurn {
                role: match t.role {
                    Role::User => pb::Role::User,
                    Role::Assistant => pb::Role::Assistant,
                    Role::System => pb::Role::System,
                    Role::Tool => pb::Role::Tool,
                } as i32,
                speaker: t.speaker,
                content: t.content,
                ..Default::default()
            })
            .collect();
        let request = pb::AppendTurnsRequest {
            namespace: self.namespace().to_owned(),
            session_id: p.session_id.clone(),
            turns,
            ..Default::default()
        };
        let mut client = self.client();
        let appended = match client.append_turns(request.clone()).await {
            Err(s) if s.code() == tonic::Code::NotFound => {
                let created = client
                    .create_session(pb::CreateSessionRequest {
                        namespace: self.namespace().to_owned(),
                        session_id: p.session_id.clone(),
                        subject_id: p.subject_id,
                        ..Default::default()
                    })
                    .await;
                match created {
                    // Another caller created it first: append all the same.
                    Ok(_) => {}
                    Err(s) if s.code() == tonic::Code::AlreadyExists => {}
                    Err(s) => return Err(failure(s)),
                }
                client.append_turns(request).await
            }
            other => other,
        }
        .map_err(failure)?
        .into_inner();
        Ok(format!(
            "Remembered in session {}: turns #{}–#{} (session now {} tokens).",
            p.session_id, appended.first_seq, appended.last_seq, appended.total_tokens
        ))
    }

    #[tool(
        description = "Search memory: turns, current facts and past sessions ranked against the query, best first, each with where it is from."
    )]
    async fn search_memory(&self, Parameters(p): Parameters<SearchMemory>) -> ToolResult {
        let limit = limit(p.limit, 5, MAX_SEARCH_LIMIT, "limit")?;
        let r = self
            .client()
            .search(pb::SearchRequest {
                namespace: self.namespace().to_owned(),
                subject_id: p.subject_id,
                session_id: p.session_id,
                query: p.query,
                limit,
                ..Default::default()
            })
            .await
            .map_err(failure)?
            .into_inner();
        if r.hits.is_empty() {
            return Ok("Nothing found.".to_owned());
        }
        let lines: Vec<String> = r
            .hits
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let place = match pb::SearchKind::try_from(h.kind) {
                    Ok(pb::SearchKind::Turn) => format!("turn {} #{}", h.session_id, h.seq),
                    Ok(pb::SearchKind::Fact) => format!("fact {}", h.fact_id),
                    Ok(pb::SearchKind::Episode) => format!("past session {}", h.session_id),
                    _ => "record".to_owned(),
                };
                let subject = if h.subject_id.is_empty() {
                    String::new()
                } else {
                    format!(" (subject {})", h.subject_id)
                };
                format!(
                    "{}. {place}{subject}: {}",
                    i + 1,
                    render::shorten(&h.snippet, 600)
                )
            })
            .collect();
        self.bounded(&lines, "ask for fewer hits")
    }

    #[tool(
        description = "Store a fact about a subject (a preference, attribute, identifier or plan). A fact with the key of a current fact supersedes it; the old version is kept as history."
    )]
    async fn put_fact(&self, Parameters(p): Parameters<PutFact>) -> ToolResult {
        let r = self
            .client()
            .put_fact(pb::PutFactRequest {
                namespace: self.namespace().to_owned(),
                subject_id: p.subject_id,
                text: p.text,
                key: p.key,
                tags: p.tags,
                ..Default::default()
            })
            .await
            .map_err(failure)?
            .into_inner();
        let fact = r.fact.ok_or("the daemon sent no fact")?;
        let outcome = pb::PutFactOutcome::try_from(r.outcome)
            .map(|o| {
                o.as_str_name()
                    .trim_start_matches("PUT_FACT_OUTCOME_")
                    .to_lowercase()
            })
            .unwrap_or_default();
        let mut text = format!("Fact {} {outcome}: {}", fact.fact_id, fact.text);
        if let Some(old) = r.superseded {
            text.push_str(&format!(" (supersedes {}: {})", old.fact_id, old.text));
        }
        Ok(text)
    }

    #[tool(description = "List a subject's current facts, newest first.")]
    async fn list_facts(&self, Parameters(p): Parameters<ListFacts>) -> ToolResult {
        let limit = limit(p.limit, 20, MAX_LIST_LIMIT, "limit")?;
        let r = self
            .client()
            .list_facts(pb::ListFactsRequest {
                namespace: self.namespace().to_owned(),
                subject_id: p.subject_id,
                key: p.key,
                tag: p.tag,
                page_size: limit,
                ..Default::default()
            })
            .await
            .map_err(failure)?
            .into_inner();
        if r.facts.is_empty() {
            return Ok("No facts.".to_owned());
        }
        let mut lines: Vec<String> = r.facts.iter().map(render::fact_line).collect();
        if !r.next_page_token.is_empty() {
            lines.push("[more facts exist: filter by key or tag]".to_owned());
        }
        self.bounded(&lines, "filter by key or tag")
    }

    #[tool(
        description = "List the open pending actions of a session (owner, deadline, status) and those its subject's past sessions left open, each with the session_id and action_seq that update_pending_action takes."
    )]
    async fn list_pending_actions(
        &self,
        Parameters(p): Parameters<ListPendingActions>,
    ) -> ToolResult {
        let b = self
            .bundle(p.session_id.clone(), self.max_tokens(), String::new(), true)
            .await?;
        let mut lines: Vec<String> = b
            .pending_actions
            .iter()
            .map(|a| render::action_line(&p.session_id, a))
            .collect();
        for c in &b.carried_actions {
            if let (Some(r), Some(a)) = (&c.r#ref, &c.action) {
                lines.push(format!(
                    "from a past session: {}",
                    render::action_line(&r.session_id, a)
                ));
            }
        }
        if lines.is_empty() {
            return Ok(format!(
                "Session {} has no open pending actions.",
                p.session_id
            ));
        }
        self.bounded(&lines, "mark finished ones done")
    }

    #[tool(
        description = "Set the status of a pending action (pending, in_progress or done). A done action no longer carries over to the subject's later sessions."
    )]
    async fn update_pending_action(
        &self,
        Parameters(p): Parameters<UpdatePendingAction>,
    ) -> ToolResult {
        let status = match p.status {
            ActionStatus::Pending => pb::ActionStatus::Pending,
            ActionStatus::InProgress => pb::ActionStatus::InProgress,
            ActionStatus::Done => pb::ActionStatus::Done,
        };
        let r = self
            .client()
            .update_pending_action(pb::UpdatePendingActionRequest {
                namespace: self.namespace().to_owned(),
                r#ref: Some(pb::PendingActionRef {
                    session_id: p.session_id.clone(),
                    action_seq: p.action_seq,
                }),
                status: status as i32,
            })
            .await
            .map_err(failure)?
            .into_inner();
        let a = r.action.ok_or("the daemon sent no action")?;
        Ok(format!(
            "Updated: {}",
            render::action_line(&p.session_id, &a)
        ))
    }

    #[tool(
        description = "Hand a session over to another agent: records the handoff, makes to_agent the owner (appends under the old lease are refused from then on), summarizes, and returns the context the new owner starts from."
    )]
    async fn handoff(&self, Parameters(p): Parameters<Handoff>) -> ToolResult {
        let mut client = self.client();
        let lease_epoch = match p.lease_epoch {
            Some(e) => e,
            None => {
                client
                    .get_session(pb::GetSessionRequest {
                        namespace: self.namespace().to_owned(),
                        session_id: p.session_id.clone(),
                    })
                    .await
                    .map_err(failure)?
                    .into_inner()
                    .session
                    .ok_or("the daemon sent no session")?
                    .lease_epoch
            }
        };
        let r = client
            .handoff(pb::HandoffRequest {
                namespace: self.namespace().to_owned(),
                session_id: p.session_id.clone(),
                from_agent: p.from_agent,
                to_agent: p.to_agent.clone(),
                lease_epoch,
                reason: p.reason,
                budget_tokens: self.max_tokens(),
                ..Default::default()
            })
            .await
            .map_err(failure)?
            .into_inner();
        let mut text = format!(
            "Session {} is now owned by {} at lease epoch {} (handoff recorded as turn #{}).",
            p.session_id, p.to_agent, r.lease_epoch, r.event_seq
        );
        if let Some(b) = r.bundle {
            text.push_str("\n\n");
            text.push_str(&b.rendered_text);
        }
        Ok(text)
    }

    #[tool(description = "List sessions, optionally of one subject, in id order.")]
    async fn list_sessions(&self, Parameters(p): Parameters<ListSessions>) -> ToolResult {
        let limit = limit(p.limit, 20, MAX_LIST_LIMIT, "limit")?;
        let r = self
            .client()
            .list_sessions(pb::ListSessionsRequest {
                namespace: self.namespace().to_owned(),
                subject_id: p.subject_id,
                page_size: limit,
                page_token: p.page_token,
                ..Default::default()
            })
            .await
            .map_err(failure)?
            .into_inner();
        if r.sessions.is_empty() {
            return Ok("No sessions.".to_owned());
        }
        let mut lines: Vec<String> = r.sessions.iter().map(render::session_line).collect();
        if !r.next_page_token.is_empty() {
            lines.push(format!("next page_token: {}", r.next_page_token));
        }
        self.bounded(&lines, "ask for a smaller limit")
    }
}

/// The router of every tool above.
pub(super) fn router() -> ToolRouter<Tools> {
    Tools::tool_router()
}
