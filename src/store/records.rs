//! Reading records through any reader (the engine, or a unit of work
//! inside it) and removing what hangs off a session: helpers the typed
//! store's files share.

use std::ops::Bound;

use super::engine::{Read, Txn, Write};
use super::{codec, keys, legacy};
use crate::error::{Error, Result};
use crate::model::{ReviewItem, Session, SessionSummary};

/// Keys removed per batch when deleting a session's records.
const DELETE_CHUNK: usize = 4096;

/// Reads and verifies a record through `r`.
pub(super) fn read<T: serde::de::DeserializeOwned + 'static>(
    r: &dyn Read,
    key: &[u8],
    what: impl FnOnce() -> String,
) -> Result<Option<T>> {
    match r.get(key)? {
        Some(v) => codec::decode(&v, what).map(Some),
        None => Ok(None),
    }
}

/// Reads a session record through `r`; `NotFound` when absent.
pub(super) fn read_session(r: &dyn Read, ns: &str, session_id: &str) -> Result<Session> {
    let bytes = r
        .get(&keys::session(ns, session_id))?
        .ok_or_else(|| Error::session_not_found(ns, session_id))?;
    legacy::decode_session(&bytes, || format!("session record of {ns}/{session_id}"))
}

/// Summary version `v` of a session through `r`, if stored.
pub(super) fn read_summary(
    r: &dyn Read,
    ns: &str,
    session_id: &str,
    v: u64,
) -> Result<Option<SessionSummary>> {
    read(r, &keys::summary(ns, session_id, v), || {
        format!("summary version {v} of session {ns}/{session_id}")
    })
}

/// Removes every key with `prefix`, in bounded batches; returns how many.
pub(super) fn delete_prefix(tx: &mut dyn Txn, prefix: &[u8]) -> Result<u64> {
    let mut n = 0u64;
    loop {
        let chunk = tx.scan(Bound::Unbounded, prefix, DELETE_CHUNK)?;
        if chunk.is_empty() {
            return Ok(n);
        }
        n += chunk.len() as u64;
        tx.apply(chunk.into_iter().map(|(k, _)| Write::Delete(k)).collect())?;
    }
}

/// Removes every record that hangs off a session (not the session record
/// itself); returns the number of turns removed. Runs under the session's
/// lock.
pub(super) fn purge_records(tx: &mut dyn Txn, ns: &str, session_id: &str) -> Result<u64> {
    let turns = delete_prefix(tx, &keys::turns_of(ns, session_id))?;
    delete_prefix(tx, &keys::action_statuses_of(ns, session_id))?;
    delete_prefix(tx, &keys::idempotency_of(ns, session_id))?;
    delete_prefix(tx, &keys::summaries_of(ns, session_id))?;
    delete_prefix(tx, &keys::audits_of(ns, session_id))?;
    tx.apply(vec![
        Write::Delete(keys::fold(ns, session_id)),
        Write::Delete(keys::retention_mark(ns, session_id)),
    ])?;
    delete_reviews_of(tx, ns, session_id)?;
    Ok(turns)
}

/// Removes the review items of a session (they are keyed by namespace, so
/// the namespace's items are walked); returns how many.
pub(super) fn delete_reviews_of(tx: &mut dyn Txn, ns: &str, session_id: &str) -> Result<u64> {
    let keys = reviews_of_session(tx, ns, session_id, u64::MAX)?;
    let n = keys.len() as u64;
    for chunk in keys.chunks(DELETE_CHUNK) {
        tx.apply(chunk.iter().cloned().map(Write::Delete).collect())?;
    }
    Ok(n)
}

/// The keys of a session's review items of summary versions up to
/// `through_version` (they are keyed by namespace, so the namespace's
/// items are walked, a chunk at a time).
pub(super) fn reviews_of_session(
    r: &dyn Read,
    ns: &str,
    session_id: &str,
    through_version: u64,
) -> Result<Vec<Vec<u8>>> {
    let prefix = keys::reviews_of(ns);
    let mut from: Option<Vec<u8>> = None;
    let mut out = Vec::new();
    loop {
        let bound = from.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let chunk = r.scan(bound, &prefix, DELETE_CHUNK)?;
        let Some((last, _)) = chunk.last() else { break };
        from = Some(last.clone());
        for (k, v) in &chunk {
            // A corrupt review item cannot be attributed; keep it.
            if let Ok(item) = codec::decode::<ReviewItem>(v, String::new) {
                if item.session_id == session_id && item.summary_version <= through_version {
                    out.push(k.clone());
                }
            }
        }
    }
    Ok(out)
}
