//! Erasing a subject (a right-to-erasure request): the domain decides
//! whether there is anything to erase, who asked and what record stays;
//! the store removes records in bounded, durable steps
//! (`store::EraseStore`). Driving a job to its end, resuming it after a
//! restart and stopping at shutdown is the runtime's (`runtime::eraser`).

use super::page::PageToken;
use super::{validate, Event, Memory, Page};
use crate::error::{Error, Result};
use crate::model::{now_nanos, subject_sha256, EraseJob, ErasureRecord, UnixNanos};
use crate::store::EraseStep;

/// Fact versions, episodes or carried actions removed per erase step (a
/// session is one step, whatever its size: its records go in chunks
/// inside it).
pub const ERASE_BATCH: usize = 256;

/// Erasure records a filtered ListErasures call examines at most.
pub const ERASURE_SCAN: usize = 10_000;

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
            self.notify(Event::KnowledgeChanged {
                namespace: Some(ns),
                subject_id: Some(subject_id),
                session_id: None,
            });
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

    /// A page of a namespace's erasure records, oldest first; only those
    /// of `subject_id` when it is not empty (matched by its hash: the id
    /// itself is not stored). Examines at most [`ERASURE_SCAN`] records
    /// per call, so a filtered page can be short with a token to go on.
    pub async fn list_erasures_page(
        &self,
        ns: &str,
        subject_id: &str,
        page_size: u32,
        page_token: &str,
    ) -> Result<Page<ErasureRecord>> {
        validate::id("namespace", ns)?;
        if !subject_id.is_empty() {
            validate::name("subject_id", subject_id, validate::MAX_NAME_BYTES)?;
        }
        let size = self.page_size(page_size)?;
        let after = match PageToken::decode(page_token)? {
            None => None,
            Some(PageToken::ErasuresAfter(id)) => Some(id),
            Some(_) => return Err(Error::invalid("page_token is not a token of ListErasures")),
        };
        let wanted = (!subject_id.is_empty()).then(|| subject_sha256(ns, subject_id));
        let n = ns.to_owned();
        self.blocking(move |st| {
            let mut items = Vec::new();
            let mut after = after;
            let mut examined = 0usize;
            loop {
                let asked = size.min(ERASURE_SCAN - examined);
                let chunk = st.list_erasures(&n, after.as_deref(), asked)?;
                let Some(last) = chunk.last() else {
                    return Ok(Page {
                        items,
                        next_page_token: None,
                    });
                };
                after = Some(last.erasure_id.clone());
                examined += chunk.len();
                let full_chunk = chunk.len() == asked;
                for r in chunk {
                    if wanted.as_ref().is_none_or(|w| *w == r.subject_sha256) {
                        items.push(r);
                    }
                }
                if !full_chunk {
                    return Ok(Page {
                        items,
                        next_page_token: None,
                    });
                }
                if items.len() >= size || examined >= ERASURE_SCAN {
                    items.truncate(size);
                    let resume = items
                        .last()
                        .filter(|_| items.len() == size)
                        .map(|r| r.erasure_id.clone())
                        .or(after);
                    return Ok(Page {
                        items,
                        next_page_token: resume.map(|id| PageToken::ErasuresAfter(id).encode()),
                    });
                }
            }
        })
        .await
    }
}
