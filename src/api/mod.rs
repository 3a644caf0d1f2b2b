//! gRPC handlers of `mnemo.v1.MemoryService`. Each handler is thin:
//! admit the caller, convert the request (`convert`), call the domain
//! (`memory::Memory`, or the runtime for watches and queued summaries), map
//! the result; errors become `Status` in `status.rs` only. Each request
//! runs in a span carrying the RPC name, namespace and session id.

pub mod admit;
pub mod context;
pub mod convert;
pub mod knowledge;
pub mod status;
pub mod subject;
pub mod summaries;

use std::sync::Arc;

use tokio_stream::StreamExt;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use self::admit::{admit, admit_named, Need};
use self::status::CONSISTENCY_TOKEN;
use crate::config::auth::Role;
use crate::memory::summary::Attempt;
use crate::memory::{AppendRequest, ConsistencyToken, Memory, NewSession, ReadAfter};
use crate::model::SessionFilter;
use crate::pb;
use crate::pb::memory_service_server::MemoryService;
use crate::runtime::{watch, Runtime};

/// The gRPC face of [`Memory`].
#[derive(Clone)]
pub struct MemoryApi {
    memory: Arc<Memory>,
    runtime: Arc<Runtime>,
}

impl MemoryApi {
    /// Serves the domain of `runtime`.
    pub fn new(runtime: Arc<Runtime>) -> Self {
        MemoryApi {
            memory: runtime.memory().clone(),
            runtime,
        }
    }

    /// Summarize: with `wait`, the new (or, when nothing is new, the
    /// latest) summary, run through the summary queue behind earlier work.
    /// Without, the latest when nothing is new, else the work is queued
    /// and `None` returned.
    async fn summarize(
        &self,
        ns: &str,
        session_id: &str,
        wait: bool,
    ) -> crate::Result<Option<crate::model::SessionSummary>> {
        if !wait {
            if let Some(s) = self.memory.summary_if_current(ns, session_id).await? {
                return Ok(Some(s));
            }
            let rt = self.runtime.clone();
            let (ns, id) = (ns.to_owned(), session_id.to_owned());
            tokio::spawn(async move {
                if let Err(e) = rt.summaries().request(&ns, &id).await {
                    tracing::warn!(namespace = %ns, session_id = %id, error = %e, "requested summary failed");
                }
            });
            return Ok(None);
        }
        // The session must exist and hold turns (the precondition).
        let _ = self.memory.summary_if_current(ns, session_id).await?;
        match self.runtime.summaries().request(ns, session_id).await? {
            Attempt::Stored(s) => Ok(Some(*s)),
            Attempt::Unchanged => self.memory.get_summary(ns, session_id, 0).await.map(Some),
            Attempt::Refused(errors) => Err(crate::Error::Internal(format!(
                "the summarizer produced a summary that failed validation ({}); it was not stored, see GetAuditLog",
                errors.join("; ")
            ))),
        }
    }
}

/// What a read must see: the token in its metadata, else this daemon's
/// acknowledged writes.
fn read_after(metadata: &tonic::metadata::MetadataMap) -> Result<ReadAfter, Status> {
    let Some(v) = metadata.get(CONSISTENCY_TOKEN) else {
        return Ok(ReadAfter::OwnWrites);
    };
    let text = v
        .to_str()
        .map_err(|_| Status::invalid_argument(format!("{CONSISTENCY_TOKEN} is not ASCII text")))?;
    ConsistencyToken::parse(text)
        .map(ReadAfter::Token)
        .map_err(Status::from)
}

impl MemoryApi {
    /// `response` with this daemon's consistency token: a read that
    /// carries it sees the write just made, on any daemon.
    fn stamped<T>(&self, mut response: Response<T>) -> Response<T> {
        let token = self.memory.index_clock().token().encode();
        // The token is hexadecimal and dots: always a valid value.
        if let Ok(v) = token.parse() {
            response.metadata_mut().insert(CONSISTENCY_TOKEN, v);
        }
        response
    }
}

/// The span of one request. Its fields are the client's values before any
/// check, so they are cut to a loggable length.
fn span(rpc: &'static str, namespace: &str, session_id: &str) -> tracing::Span {
    tracing::info_span!(
        "rpc",
        rpc,
        namespace = %admit::loggable(namespace),
        session_id = %admit::loggable(session_id)
    )
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn non_zero(n: u64) -> Option<u64> {
    (n != 0).then_some(n)
}

#[tonic::async_trait]
impl MemoryService for MemoryApi {
    async fn create_session(
        &self,
        request: Request<pb::CreateSessionRequest>,
    ) -> Result<Response<pb::CreateSessionResponse>, Status> {
        let r = admit(request, Role::Write)?;
        let span = span("CreateSession", &r.namespace, &r.session_id);
        async move {
            let req = NewSession {
                namespace: r.namespace,
                session_id: non_empty(r.session_id),
                subject_id: r.subject_id,
                title: r.title,
                metadata: r.metadata.into_iter().collect(),
                settings: convert::settings_from(r.settings)?,
                owner_agent: r.owner_agent,
            };
            let s = self.memory.create_session(req).await?;
            tracing::debug!(session_id = %s.session_id, "session created");
            Ok(Response::new(pb::CreateSessionResponse {
                session: Some(s.into()),
            }))
        }
        .instrument(span)
        .await
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("GetSession", &r.namespace, &r.session_id);
        async move {
            let s = self.memory.get_session(&r.namespace, &r.session_id).await?;
            let removed = self
                .memory
                .turns_removed(&r.namespace, &r.session_id)
                .await?;
            Ok(Response::new(pb::GetSessionResponse {
                session: Some(pb::Session {
                    turns_removed: removed.map(Into::into),
                    ..s.into()
                }),
            }))
        }
        .instrument(span)
        .await
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("ListSessions", &r.namespace, "");
        async move {
            let filter = SessionFilter {
                subject_id: non_empty(r.subject_id),
                state: convert::state_filter(r.state)?,
            };
            let page = self
                .memory
                .list_sessions(&r.namespace, filter, r.page_size, &r.page_token)
                .await?;
            let removed = self
                .memory
                .sessions_turns_removed(
                    &r.namespace,
                    page.items.iter().map(|s| s.session_id.clone()).collect(),
                )
                .await?;
            Ok(Response::new(pb::ListSessionsResponse {
                sessions: page
                    .items
                    .into_iter()
                    .zip(removed)
                    .map(|(s, removed)| pb::Session {
                        turns_removed: removed.map(Into::into),
                        ..s.into()
                    })
                    .collect(),
                next_page_token: page.next_page_token.unwrap_or_default(),
            }))
        }
        .instrument(span)
        .await
    }

    async fn close_session(
        &self,
        request: Request<pb::CloseSessionRequest>,
    ) -> Result<Response<pb::CloseSessionResponse>, Status> {
        let r = admit(request, Role::Write)?;
        let span = span("CloseSession", &r.namespace, &r.session_id);
        async move {
            let s = self
                .memory
                .close_session(&r.namespace, &r.session_id)
                .await?;
            Ok(Response::new(pb::CloseSessionResponse {
                session: Some(s.into()),
            }))
        }
        .instrument(span)
        .await
        .map(|r| self.stamped(r))
    }

    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteSessionResponse>, Status> {
        let r = admit(request, Role::Admin)?;
        let span = span("DeleteSession", &r.namespace, &r.session_id);
        async move {
            let deleted_turns = self
                .memory
                .delete_session(&r.namespace, &r.session_id)
                .await?;
            Ok(Response::new(pb::DeleteSessionResponse { deleted_turns }))
        }
        .instrument(span)
        .await
        .map(|r| self.stamped(r))
    }

    async fn append_turns(
        &self,
        request: Request<pb::AppendTurnsRequest>,
    ) -> Result<Response<pb::AppendTurnsResponse>, Status> {
        let r = admit(request, Role::Write)?;
        let span = span("AppendTurns", &r.namespace, &r.session_id);
        async move {
            let turns = r
                .turns
                .into_iter()
                .enumerate()
                .map(|(i, t)| convert::new_turn(i, t))
                .collect::<Result<Vec<_>, _>>()?;
            let req = AppendRequest {
                turns,
                idempotency_key: non_empty(r.idempotency_key),
                expected_next_seq: non_zero(r.expected_next_seq),
                lease_epoch: non_zero(r.lease_epoch),
            };
            let out = self
                .memory
                .append_turns(&r.namespace, &r.session_id, req)
                .await?;
            Ok(Response::new(out.into()))
        }
        .instrument(span)
        .await
        .map(|r| self.stamped(r))
    }

    async fn list_turns(
        &self,
        request: Request<pb::ListTurnsRequest>,
    ) -> Result<Response<pb::ListTurnsResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("ListTurns", &r.namespace, &r.session_id);
        async move {
            let (page, removed) = self
                .memory
                .list_turns(
                    &r.namespace,
                    &r.session_id,
                    r.from_seq,
                    non_zero(r.to_seq),
                    r.page_size,
                    &r.page_token,
                    r.newest,
                )
                .await?;
            Ok(Response::new(pb::ListTurnsResponse {
                turns: page.items.into_iter().map(Into::into).collect(),
                next_page_token: page.next_page_token.unwrap_or_default(),
                turns_removed: removed.map(Into::into),
            }))
        }
        .instrument(span)
        .await
    }

    async fn remove_last_turn(
        &self,
        request: Request<pb::RemoveLastTurnRequest>,
    ) -> Result<Response<pb::RemoveLastTurnResponse>, Status> {
        let r = admit(request, Role::Write)?;
        let span = span("RemoveLastTurn", &r.namespace, &r.session_id);
        async move {
            let out = self
                .memory
                .remove_last_turn(
                    &r.namespace,
                    &r.session_id,
                    non_zero(r.expected_last_seq),
                    non_zero(r.lease_epoch),
                )
                .await?;
            if let Some(t) = &out.turn {
                tracing::info!(seq = t.seq, refolded = ?out.refolded, "last turn removed");
            }
            Ok(Response::new(pb::RemoveLastTurnResponse {
                turn: out.turn.map(Into::into),
                session: Some(out.session.into()),
                refolded_summary_version: out.refolded.unwrap_or(0),
            }))
        }
        .instrument(span)
        .await
        .map(|r| self.stamped(r))
    }

    async fn summarize(
        &self,
        request: Request<pb::SummarizeRequest>,
    ) -> Result<Response<pb::SummarizeResponse>, Status> {
        let r = admit(request, Role::Write)?;
        let span = span("Summarize", &r.namespace, &r.session_id);
        async move {
            let s = self.summarize(&r.namespace, &r.session_id, r.wait).await?;
            Ok(Response::new(pb::SummarizeResponse {
                queued: s.is_none(),
                summary: s.map(Into::into),
            }))
        }
        .instrument(span)
        .await
        .map(|r| self.stamped(r))
    }

    async fn get_summary(
        &self,
        request: Request<pb::GetSummaryRequest>,
    ) -> Result<Response<pb::GetSummaryResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("GetSummary", &r.namespace, &r.session_id);
        async move {
            let format = pb::SummaryFormat::try_from(r.format).map_err(|_| {
                crate::Error::invalid(format!("format {} is not a known summary format", r.format))
            })?;
            let s = self
                .memory
                .get_summary(&r.namespace, &r.session_id, r.version)
                .await?;
            let removed = self
                .memory
                .turns_removed(&r.namespace, &r.session_id)
                .await?;
            let mut rendered = match format {
                pb::SummaryFormat::Json => crate::summarize::render::json(&s),
                pb::SummaryFormat::Markdown => crate::summarize::render::markdown(&s),
                pb::SummaryFormat::Structured | pb::SummaryFormat::Unspecified => String::new(),
            };
            if let (Some(t), pb::SummaryFormat::Markdown) = (removed, format) {
                rendered.push_str(&format!("\n{}\n", t.note()));
            }
            Ok(Response::new(pb::GetSummaryResponse {
                summary: Some(s.into()),
                rendered,
                turns_removed: removed.map(Into::into),
            }))
        }
        .instrument(span)
        .await
    }

    async fn list_summaries(
        &self,
        request: Request<pb::ListSummariesRequest>,
    ) -> Result<Response<pb::ListSummariesResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("ListSummaries", &r.namespace, &r.session_id);
        async move {
            let page = self
                .memory
                .list_summaries(&r.namespace, &r.session_id, r.page_size, &r.page_token)
                .await?;
            Ok(Response::new(pb::ListSummariesResponse {
                summaries: page.items.iter().map(summaries::info).collect(),
                next_page_token: page.next_page_token.unwrap_or_default(),
            }))
        }
        .instrument(span)
        .await
    }

    async fn get_audit_log(
        &self,
        request: Request<pb::GetAuditLogRequest>,
    ) -> Result<Response<pb::GetAuditLogResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("GetAuditLog", &r.namespace, &r.session_id);
        async move {
            let page = self
                .memory
                .audit_log(&r.namespace, &r.session_id, r.page_size, &r.page_token)
                .await?;
            Ok(Response::new(pb::GetAuditLogResponse {
                records: page.items.into_iter().map(Into::into).collect(),
                next_page_token: page.next_page_token.unwrap_or_default(),
            }))
        }
        .instrument(span)
        .await
    }

    async fn list_review_items(
        &self,
        request: Request<pb::ListReviewItemsRequest>,
    ) -> Result<Response<pb::ListReviewItemsResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("ListReviewItems", &r.namespace, "");
        async move {
            let page = self
                .memory
                .review_items(&r.namespace, r.include_resolved, r.page_size, &r.page_token)
                .await?;
            Ok(Response::new(pb::ListReviewItemsResponse {
                items: page.items.into_iter().map(Into::into).collect(),
                next_page_token: page.next_page_token.unwrap_or_default(),
            }))
        }
        .instrument(span)
        .await
    }

    async fn resolve_review_item(
        &self,
        request: Request<pb::ResolveReviewItemRequest>,
    ) -> Result<Response<pb::ResolveReviewItemResponse>, Status> {
        let (r, by_key) = admit_named(request, Need::Review)?;
        let span = span("ResolveReviewItem", &r.namespace, "");
        async move {
            let status = summaries::resolution(r.status)?;
            let item = self
                .memory
                .resolve_review_item(
                    &r.namespace,
                    &r.review_id,
                    status,
                    crate::memory::summary::Reviewer {
                        name: &r.reviewer,
                        key: &by_key,
                    },
                    &r.comment,
                )
                .await?;
            Ok(Response::new(pb::ResolveReviewItemResponse {
                item: Some(item.into()),
            }))
        }
        .instrument(span)
        .await
        .map(|r| self.stamped(r))
    }

    async fn get_context_bundle(
        &self,
        request: Request<pb::GetContextBundleRequest>,
    ) -> Result<Response<pb::GetContextBundleResponse>, Status> {
        let after = read_after(request.metadata())?;
        let r = admit(request, Role::Read)?;
        let span = span("GetContextBundle", &r.namespace, &r.session_id);
        async move {
            let req = context::bundle_request(&r)?;
            let bundle = self
                .memory
                .get_context_bundle_after(&r.namespace, &r.session_id, req, after)
                .await?;
            Ok(Response::new(pb::GetContextBundleResponse {
                bundle: Some(bundle.into()),
            }))
        }
        .instrument(span)
        .await
    }

    async fn handoff(
        &self,
        request: Request<pb::HandoffRequest>,
    ) -> Result<Response<pb::HandoffResponse>, Status> {
        let r = admit(request, Role::Write)?;
        let span = span("Handoff", &r.namespace, &r.session_id);
        async move {
            let (ns, id) = (r.namespace.clone(), r.session_id.clone());
            let out = self
                .memory
                .handoff(&ns, &id, context::handoff_request(r))
                .await?;
            tracing::info!(
                owner = %out.session.owner_agent,
                lease_epoch = out.session.lease_epoch,
                "session handed off"
            );
            Ok(Response::new(out.into()))
        }
        .instrument(span)
        .await
    }

    type WatchSessionStream = std::pin::Pin<
        Box<dyn tokio_stream::Stream<Item = Result<pb::WatchSessionResponse, Status>> + Send>,
    >;

    async fn watch_session(
        &self,
        request: Request<pb::WatchSessionRequest>,
    ) -> Result<Response<Self::WatchSessionStream>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("WatchSession", &r.namespace, &r.session_id);
        async move {
            let (rx, first_seq) = watch::watch(
                &self.memory,
                self.runtime.watch_hub(),
                &r.namespace,
                &r.session_id,
                r.from_seq,
                r.observer,
            )
            .await?;
            let stream = tokio_stream::wrappers::ReceiverStream::new(rx)
                .map(|item| item.map(Into::into).map_err(Status::from));
            let mut response = Response::new(Box::pin(stream) as Self::WatchSessionStream);
            response
                .metadata_mut()
                .insert(crate::api::status::FIRST_SEQ_HEADER, first_seq.into());
            Ok(response)
        }
        .instrument(span)
        .await
    }

    async fn put_fact(
        &self,
        request: Request<pb::PutFactRequest>,
    ) -> Result<Response<pb::PutFactResponse>, Status> {
        let r = admit(request, Role::Write)?;
        let span = span("PutFact", &r.namespace, "");
        knowledge::put_fact(&self.memory, r)
            .instrument(span)
            .await
            .map(|r| self.stamped(Response::new(r)))
    }

    async fn get_fact(
        &self,
        request: Request<pb::GetFactRequest>,
    ) -> Result<Response<pb::GetFactResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("GetFact", &r.namespace, "");
        knowledge::get_fact(&self.memory, r)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn list_facts(
        &self,
        request: Request<pb::ListFactsRequest>,
    ) -> Result<Response<pb::ListFactsResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("ListFacts", &r.namespace, "");
        knowledge::list_facts(&self.memory, r)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn delete_fact(
        &self,
        request: Request<pb::DeleteFactRequest>,
    ) -> Result<Response<pb::DeleteFactResponse>, Status> {
        let r = admit(request, Role::Write)?;
        let span = span("DeleteFact", &r.namespace, "");
        knowledge::delete_fact(&self.memory, r)
            .instrument(span)
            .await
            .map(|r| self.stamped(Response::new(r)))
    }

    async fn list_episodes(
        &self,
        request: Request<pb::ListEpisodesRequest>,
    ) -> Result<Response<pb::ListEpisodesResponse>, Status> {
        let r = admit(request, Role::Read)?;
        let span = span("ListEpisodes", &r.namespace, "");
        knowledge::list_episodes(&self.memory, r)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn update_pending_action(
        &self,
        request: Request<pb::UpdatePendingActionRequest>,
    ) -> Result<Response<pb::UpdatePendingActionResponse>, Status> {
        let r = admit(request, Role::Write)?;
        let sid = r.r#ref.as_ref().map_or("", |a| a.session_id.as_str());
        let span = span("UpdatePendingAction", &r.namespace, sid);
        knowledge::update_pending_action(&self.memory, r)
            .instrument(span)
            .await
            .map(|r| self.stamped(Response::new(r)))
    }

    async fn search(
        &self,
        request: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        let after = read_after(request.metadata())?;
        let r = admit(request, Role::Read)?;
        let span = span("Search", &r.namespace, &r.session_id);
        knowledge::search(&self.memory, r, after)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn erase_subject(
        &self,
        request: Request<pb::EraseSubjectRequest>,
    ) -> Result<Response<pb::EraseSubjectResponse>, Status> {
        let (r, by) = admit_named(request, Role::Admin)?;
        let span = span("EraseSubject", &r.namespace, "");
        subject::erase_subject(&self.runtime, r, &by)
            .instrument(span)
            .await
            .map(Response::new)
    }

    type ExportSubjectStream = subject::ExportStream;

    async fn export_subject(
        &self,
        request: Request<pb::ExportSubjectRequest>,
    ) -> Result<Response<Self::ExportSubjectStream>, Status> {
        let r = admit(request, Role::Admin)?;
        let span = span("ExportSubject", &r.namespace, "");
        subject::export_subject(&self.memory, r)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn list_erasures(
        &self,
        request: Request<pb::ListErasuresRequest>,
    ) -> Result<Response<pb::ListErasuresResponse>, Status> {
        let r = admit(request, Role::Admin)?;
        let span = span("ListErasures", &r.namespace, "");
        async move {
            let page = self
                .memory
                .list_erasures_page(&r.namespace, &r.subject_id, r.page_size, &r.page_token)
                .await?;
            Ok(Response::new(pb::ListErasuresResponse {
                erasures: page.items.into_iter().map(Into::into).collect(),
                next_page_token: page.next_page_token.unwrap_or_default(),
            }))
        }
        .instrument(span)
        .await
    }
}
