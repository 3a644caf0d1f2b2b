//! Handlers of a subject's data lifecycle: EraseSubject and ExportSubject
//! (admin keys only). The erase runs in the runtime's eraser, which keeps
//! driving it if the caller goes away; the export streams through a
//! bounded channel.

use std::sync::Arc;

use tokio_stream::StreamExt;
use tonic::Status;

use super::convert::timestamp;
use crate::memory::export::EXPORT_BUFFER;
use crate::memory::Memory;
use crate::model::{EraseCounts, ErasureRecord};
use crate::pb;
use crate::runtime::Runtime;

impl From<EraseCounts> for pb::EraseCounts {
    fn from(c: EraseCounts) -> Self {
        pb::EraseCounts {
            sessions: c.sessions,
            turns: c.turns,
            summaries: c.summaries,
            fold_states: c.fold_states,
            audit_records: c.audit_records,
            review_items: c.review_items,
            action_statuses: c.action_statuses,
            idempotency_records: c.idempotency_records,
            facts: c.facts,
            episodes: c.episodes,
            carried_actions: c.carried_actions,
        }
    }
}

impl From<ErasureRecord> for pb::EraseSubjectResponse {
    fn from(r: ErasureRecord) -> Self {
        pb::EraseSubjectResponse {
            erasure_id: r.erasure_id,
            subject_sha256: r.subject_sha256,
            request_time: Some(timestamp(r.requested_at)),
            complete_time: Some(timestamp(r.completed_at)),
            requested_by: r.requested_by,
            counts: Some(r.counts.into()),
        }
    }
}

/// EraseSubject.
pub async fn erase_subject(
    rt: &Arc<Runtime>,
    r: pb::EraseSubjectRequest,
    by: &str,
) -> Result<pb::EraseSubjectResponse, Status> {
    let record = rt.eraser()?.erase(&r.namespace, &r.subject_id, by).await?;
    Ok(record.into())
}

/// The stream of ExportSubject.
pub type ExportStream = std::pin::Pin<
    Box<dyn tokio_stream::Stream<Item = Result<pb::ExportSubjectResponse, Status>> + Send>,
>;

/// ExportSubject.
pub async fn export_subject(
    memory: &Memory,
    r: pb::ExportSubjectRequest,
) -> Result<ExportStream, Status> {
    let (tx, rx) = tokio::sync::mpsc::channel(EXPORT_BUFFER);
    memory
        .export_subject(&r.namespace, &r.subject_id, tx)
        .await?;
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx).map(|item| {
        item.map(|json| pb::ExportSubjectResponse { json })
            .map_err(Status::from)
    });
    Ok(Box::pin(stream))
}
