//! A subject's data for an access request: every record the namespace
//! holds about the subject, as JSON objects (one per line in the CLI's
//! file), read through the store's ports page by page so any size stays
//! bounded in memory. The format is documented in docs/operations.md
//! ("Subject export"); its records are the stored records as `mnemo
//! export` shows them, grouped by session.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{json, Value};

use super::Memory;
use crate::error::{Error, Result};
use crate::model::{now_nanos, FactFilter, SessionFilter};
use crate::store::Store;

/// The subject export format's version (in its header).
pub const SUBJECT_EXPORT_VERSION: u32 = 1;
/// Records read per store call.
const PAGE: usize = 500;
/// JSON records buffered between the reader and the stream.
pub const EXPORT_BUFFER: usize = 64;

fn to_value<T: Serialize>(v: &T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| Error::Internal(format!("cannot show a record: {e}")))
}

/// Calls `emit` with each JSON record of the subject, header first and
/// trailer last; returns the records between them.
pub fn export_subject(
    st: &dyn Store,
    ns: &str,
    subject_id: &str,
    emit: &mut dyn FnMut(Value) -> Result<()>,
) -> Result<u64> {
    emit(json!({
        "kind": "header",
        "mnemo_subject_export": SUBJECT_EXPORT_VERSION,
        "namespace": ns,
        "subject_id": subject_id,
        "exported_at_unix_nanos": now_nanos(),
    }))?;
    let mut n = 0u64;
    let mut put = |kind: &str, session_id: Option<&str>, record: Value| -> Result<()> {
        n += 1;
        let mut line = json!({ "kind": kind, "record": record });
        if let Some(s) = session_id {
            line["session_id"] = Value::String(s.to_owned());
        }
        emit(line)
    };
    let filter = SessionFilter {
        subject_id: Some(subject_id.to_owned()),
        state: None,
    };
    let mut sessions = BTreeSet::new();
    let mut after: Option<String> = None;
    loop {
        let page = st.list_sessions(ns, &filter, after.as_deref(), PAGE, PAGE)?;
        for s in &page.sessions {
            let id = s.session_id.as_str();
            sessions.insert(id.to_owned());
            put("session", Some(id), to_value(s)?)?;
            let mut from = 1u64;
            loop {
                let turns = st.read_turns(ns, id, from, u64::MAX, PAGE)?;
                let Some(last) = turns.last().map(|t| t.seq) else {
                    break;
                };
                for t in &turns {
                    put("turn", Some(id), to_value(t)?)?;
                }
                from = last + 1;
            }
            let mut top = s.summary.version;
            while top > 0 {
                let summaries = st.list_summaries(ns, id, top, PAGE)?;
                for m in &summaries {
                    put("summary", Some(id), to_value(m)?)?;
                }
                top = match summaries.last() {
                    Some(m) if summaries.len() == PAGE => m.version.saturating_sub(1),
                    _ => 0,
                };
            }
            let mut audit_after = 0u64;
            loop {
                let records = st.list_audit(ns, id, audit_after, PAGE)?;
                let Some(last) = records.last().map(|a| a.audit_seq) else {
                    break;
                };
                for a in &records {
                    put("audit", Some(id), to_value(a)?)?;
                }
                audit_after = last;
            }
            for (seq, status) in st.action_statuses(ns, id)? {
                put(
                    "action_status",
                    Some(id),
                    json!({ "action_seq": seq, "status": to_value(&status)? }),
                )?;
            }
            if let Some(e) = st.get_episode(ns, id)? {
                put("episode", Some(id), to_value(&e)?)?;
            }
        }
        match page.resume_after {
            Some(a) => after = Some(a),
            None => break,
        }
    }
    // Review items are keyed by namespace: one walk for all the sessions.
    let mut review_after: Option<String> = None;
    loop {
        let (items, resume) =
            st.list_review_items(ns, review_after.as_deref(), true, PAGE, PAGE)?;
        for r in items.iter().filter(|r| sessions.contains(&r.session_id)) {
            put("review_item", Some(&r.session_id), to_value(r)?)?;
        }
        match resume {
            Some(r) => review_after = Some(r),
            None => break,
        }
    }
    let facts = FactFilter {
        subject_id: Some(subject_id.to_owned()),
        include_history: true,
        ..FactFilter::default()
    };
    let mut fact_after: Option<String> = None;
    loop {
        let (items, resume) = st.list_facts(ns, &facts, fact_after.as_deref(), PAGE, PAGE)?;
        for f in &items {
            put("fact", None, to_value(f)?)?;
        }
        match resume {
            Some(r) => fact_after = Some(r),
            None => break,
        }
    }
    // Episodes of sessions that are gone (a session's own was written
    // with it above).
    let mut ep_after: Option<(i64, String)> = None;
    loop {
        let items = st.list_episodes(
            ns,
            subject_id,
            ep_after.as_ref().map(|(t, s)| (*t, s.as_str())),
            PAGE,
        )?;
        for e in items.iter().filter(|e| !sessions.contains(&e.session_id)) {
            put("episode", Some(&e.session_id), to_value(e)?)?;
        }
        match items.last() {
            Some(e) if items.len() == PAGE => ep_after = Some((e.ended_at, e.session_id.clone())),
            _ => break,
        }
    }
    for c in st.carried_actions(ns, subject_id, usize::MAX)? {
        put("carried_action", None, to_value(&c)?)?;
    }
    emit(json!({ "kind": "end", "records": n }))?;
    Ok(n)
}

impl Memory {
    /// Streams the subject's export into `out` (one JSON object per item,
    /// as text); stops early when the receiver is gone. `NotFound` before
    /// anything is sent when the namespace holds nothing of the subject.
    pub async fn export_subject(
        &self,
        ns: &str,
        subject_id: &str,
        out: tokio::sync::mpsc::Sender<Result<String>>,
    ) -> Result<()> {
        self.require_subject(ns, subject_id).await?;
        let (n, s) = (ns.to_owned(), subject_id.to_owned());
        let store = self.store().clone();
        tokio::task::spawn_blocking(move || {
            let tx = out.clone();
            let result = export_subject(store.as_ref(), &n, &s, &mut |v| {
                tx.blocking_send(Ok(v.to_string()))
                    .map_err(|_| Error::Unavailable("the export's reader went away".into()))
            });
            if let Err(e) = result {
                let _ = out.blocking_send(Err(e));
            }
        });
        Ok(())
    }
}
