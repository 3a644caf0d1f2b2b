//! Erasing a subject (a right-to-erasure request): the domain decides
//! whether there is anything to erase, who asked and what record stays;
//! the store removes records in bounded, durable steps
//! (`store::EraseStore`). Driving a job to its end, resuming it after a
//! restart and stopping at shutdown is the runtime's (`runtime::eraser`).

use super::{validate, Event, Memory};
use crate::error::{Error, Result};
use crate::model::{now_nanos, subject_sha256, EraseJob, ErasureRecord, UnixNanos};
use crate::store::EraseStep;

/// Fact versions, episodes or carried actions removed per erase step (a
/// session is one step, whatever its size: its records go in chunks
/// inside it).
pub const ERASE_BATCH: usize = 256;

/// Checks a namespace and subject id of an erase or export request.
pub fn validate_subject(ns: &str, subject_id: &str) -> Result<()> {
    validate::id("namespace", ns)?;
    if subject_id.is_empty() {
        return Err(Error::invalid("subject_id is required"));
    }
    validate::name("subject_id", subject_id, validate::MAX_NAME_BYTES)
}

impl Memory {
    /// Whether the namespace holds anything of the subject; `NotFound`
    /// (naming both) when it does not.
    pub async fn require_subject(&self, ns: &str, subject_id: &str) -> Result<()> {
        validate_subject(ns, subject_id)?;
        let (n, s) = (ns.to_owned(), subject_id.to_owned());
        if self.blocking(move |st| st.subject_holds(&n, &s)).await? {
            return Ok(());
        }
        Err(Error::NotFound(format!(
            "namespace {ns:?} holds nothing of subject {subject_id:?}"
        )))
    }

    /// Records the erase of a subject (durable before anything is
    /// removed), or returns the erase of it already running. `NotFound`
    /// when the namespace holds nothing of the subject.
    pub async fn begin_erase(&self, ns: &str, subject_id: &str, by: &str) -> Result<EraseJob> {
        self.require_subject(ns, subject_id).await?;
        let now = now_nanos();
        let job = EraseJob {
            namespace: ns.to_owned(),
            subject_id: subject_id.to_owned(),
            erasure_id: ulid::Ulid::new().to_string(),
            requested_at: now,
            requested_by: by.to_owned(),
            counts: Default::default(),
            heartbeat_at: now,
        };
        let job = self.blocking(move |st| st.begin_erase(&job)).await?;
        tracing::info!(namespace = %ns, erasure_id = %job.erasure_id, by = %job.requested_by, "subject erase started");
        Ok(job)
    }

    /// Removes the next part of a subject being erased (see
    /// [`crate::store::EraseStore::erase_step`]) and tells the runtime what
    /// left.
    pub async fn erase_step(
        &self,
        ns: &str,
        subject_id: &str,
        now: UnixNanos,
    ) -> Result<EraseStep> {
        let (n, s) = (ns.to_owned(), subject_id.to_owned());
        let step = self
            .blocking(move |st| st.erase_step(&n, &s, ERASE_BATCH, now))
            .await?;
        if let Some(session_id) = &step.session_id {
            self.notify(Event::Deleted {
                namespace: ns,
                session_id,
            });
        }
        if step.removed.facts + step.removed.episodes + step.removed.carried_actions > 0 {
            self.notify(Event::KnowledgeChanged);
        }
        Ok(step)
    }

    /// Ends an erase whose steps found nothing left: its job is replaced
    /// by the erasure record, which is returned; `None` when a record of
    /// the subject appeared meanwhile (more steps are needed).
    pub async fn finish_erase(&self, ns: &str, subject_id: &str) -> Result<Option<ErasureRecord>> {
        let (n, s) = (ns.to_owned(), subject_id.to_owned());
        let record = self
            .blocking(move |st| {
                let job = st.erase_job(&n, &s)?.ok_or_else(|| {
                    Error::NotFound(format!("no erase of subject {s:?} is running in {n:?}"))
                })?;
                let record = ErasureRecord {
                    erasure_id: job.erasure_id,
                    namespace: n.clone(),
                    subject_sha256: subject_sha256(&n, &s),
                    requested_at: job.requested_at,
                    completed_at: now_nanos(),
                    requested_by: job.requested_by,
                    counts: job.counts,
                };
                Ok(st.finish_erase(&n, &s, &record)?.then_some(record))
            })
            .await?;
        let Some(record) = record else {
            return Ok(None);
        };
        tracing::info!(
            namespace = %ns,
            erasure_id = %record.erasure_id,
            records = record.counts.total(),
            "subject erased"
        );
        Ok(Some(record))
    }

    /// Erase jobs of every namespace, at most `limit` (to resume them).
    pub async fn erase_jobs(&self, limit: usize) -> Result<Vec<EraseJob>> {
        self.blocking(move |st| st.erase_jobs(limit)).await
    }

    /// A namespace's erasure records, oldest first, at most `limit`.
    pub async fn list_erasures(&self, ns: &str, limit: usize) -> Result<Vec<ErasureRecord>> {
        validate::id("namespace", ns)?;
        let n = ns.to_owned();
        self.blocking(move |st| st.list_erasures(&n, None, limit))
            .await
    }
}
