//! Older layouts of records that [`codec::decode`](super::codec::decode)
//! upgrades on read, whatever the caller: audit records and review items
//! gained `reviewer_key` in format 6. A record's format byte says which
//! layout its payload has (postcard is positional: a new field cannot be
//! defaulted). Knows the model and postcard only, nothing of the store.

use std::any::{Any, TypeId};

use serde::Deserialize;

use crate::model::{AuditKind, AuditRecord, ReviewItem, ReviewStatus, Trigger, UnixNanos};

/// The first format whose audit records and review items carry
/// `reviewer_key`.
pub const REVIEWER_KEY_SINCE: u8 = 6;

/// An audit record as formats 1 to 5 laid it out.
#[derive(Deserialize)]
struct AuditRecordV5 {
    audit_seq: u64,
    kind: AuditKind,
    created_at: UnixNanos,
    summary_version: u64,
    trigger: Option<Trigger>,
    covers_through_seq: u64,
    pre_summary_tokens: u64,
    post_summary_tokens: u64,
    compression_ratio: f64,
    summarizer: String,
    covered_turns_sha256: String,
    validation_passed: bool,
    validation_errors: Vec<String>,
    decisions: u32,
    pending_actions: u32,
    open_questions: u32,
    health_flags: Vec<String>,
    review_id: String,
    review_status: Option<ReviewStatus>,
    reviewer: String,
    comment: String,
}

impl From<AuditRecordV5> for AuditRecord {
    fn from(v: AuditRecordV5) -> AuditRecord {
        AuditRecord {
            audit_seq: v.audit_seq,
            kind: v.kind,
            created_at: v.created_at,
            summary_version: v.summary_version,
            trigger: v.trigger,
            covers_through_seq: v.covers_through_seq,
            pre_summary_tokens: v.pre_summary_tokens,
            post_summary_tokens: v.post_summary_tokens,
            compression_ratio: v.compression_ratio,
            summarizer: v.summarizer,
            covered_turns_sha256: v.covered_turns_sha256,
            validation_passed: v.validation_passed,
            validation_errors: v.validation_errors,
            decisions: v.decisions,
            pending_actions: v.pending_actions,
            open_questions: v.open_questions,
            health_flags: v.health_flags,
            review_id: v.review_id,
            review_status: v.review_status,
            reviewer: v.reviewer,
            comment: v.comment,
            reviewer_key: String::new(),
        }
    }
}

/// A review item as formats 1 to 5 laid it out.
#[derive(Deserialize)]
struct ReviewItemV5 {
    review_id: String,
    namespace: String,
    session_id: String,
    summary_version: u64,
    items: Vec<String>,
    status: ReviewStatus,
    reviewer: String,
    comment: String,
    created_at: UnixNanos,
    resolved_at: UnixNanos,
}

impl From<ReviewItemV5> for ReviewItem {
    fn from(v: ReviewItemV5) -> ReviewItem {
        ReviewItem {
            review_id: v.review_id,
            namespace: v.namespace,
            session_id: v.session_id,
            summary_version: v.summary_version,
            items: v.items,
            status: v.status,
            reviewer: v.reviewer,
            comment: v.comment,
            created_at: v.created_at,
            resolved_at: v.resolved_at,
            reviewer_key: String::new(),
        }
    }
}

/// `payload` (of `format`) decoded as `T` through its older layout, when
/// `T` had one at that format; `None` when the current layout applies.
pub(super) fn older<T: 'static>(format: u8, payload: &[u8]) -> Option<Result<T, String>> {
    if format >= REVIEWER_KEY_SINCE {
        return None;
    }
    let t = TypeId::of::<T>();
    let decoded: Result<Box<dyn Any>, postcard::Error> = if t == TypeId::of::<AuditRecord>() {
        postcard::from_bytes::<AuditRecordV5>(payload)
            .map(|v| Box::new(AuditRecord::from(v)) as Box<dyn Any>)
    } else if t == TypeId::of::<ReviewItem>() {
        postcard::from_bytes::<ReviewItemV5>(payload)
            .map(|v| Box::new(ReviewItem::from(v)) as Box<dyn Any>)
    } else {
        return None;
    };
    Some(match decoded {
        // The box holds a T: its type id was checked above.
        Ok(any) => any
            .downcast::<T>()
            .map(|b| *b)
            .map_err(|_| "has a layout this build cannot convert".to_owned()),
        Err(e) => Err(format!("cannot be decoded (format {format}): {e}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::{self, FORMAT_V5};

    /// A V5 review item is the current one without its last field: encode
    /// the current one, drop the key, and read it back as format 5.
    #[test]
    fn format_5_audit_records_and_review_items_read_with_no_key() {
        let mut audit = AuditRecord::new(AuditKind::ReviewResolved, 7);
        audit.reviewer = "lea".into();
        audit.review_status = Some(ReviewStatus::Approved);
        let item = ReviewItem {
            review_id: "r".into(),
            namespace: "ns".into(),
            session_id: "s".into(),
            summary_version: 2,
            items: vec!["action: wire".into()],
            status: ReviewStatus::Approved,
            reviewer: "lea".into(),
            comment: "ok".into(),
            created_at: 1,
            resolved_at: 2,
            reviewer_key: String::new(),
        };
        // With an empty key the new layout ends in one zero byte (the
        // string's length); without it, it is the old layout.
        let old_audit = {
            let mut b = codec::encode_as(FORMAT_V5, &audit).unwrap();
            b.pop();
            codec::encode_as(FORMAT_V5, &postcard_tail(&b)).unwrap()
        };
        let back: AuditRecord = codec::decode(&old_audit, String::new).unwrap();
        assert_eq!(back, audit);
        let old_item = {
            let mut b = codec::encode_as(FORMAT_V5, &item).unwrap();
            b.pop();
            codec::encode_as(FORMAT_V5, &postcard_tail(&b)).unwrap()
        };
        let back: ReviewItem = codec::decode(&old_item, String::new).unwrap();
        assert_eq!(back, item);
        // A current record keeps its key.
        let now = ReviewItem {
            reviewer_key: "reviewer-lea".into(),
            ..item
        };
        let back: ReviewItem = codec::decode(&codec::encode(&now).unwrap(), String::new).unwrap();
        assert_eq!(back, now);
    }

    /// The payload of an envelope, as raw bytes re-encoded untouched.
    fn postcard_tail(envelope: &[u8]) -> Raw {
        Raw(envelope[5..].to_vec())
    }

    /// Bytes serialized as they are (a tuple of u8, which postcard writes
    /// verbatim).
    struct Raw(Vec<u8>);

    impl serde::Serialize for Raw {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeTuple;
            let mut t = s.serialize_tuple(self.0.len())?;
            for b in &self.0 {
                t.serialize_element(b)?;
            }
            t.end()
        }
    }
}
