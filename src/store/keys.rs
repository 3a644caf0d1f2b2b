//! The on-disk key layout, in one place. All of mnemo's records live in one
//! ordered keyspace (the sled tree `memory`), so that a session's records
//! are contiguous and its turns are a range scan by seq.
//!
//! ```text
//! S <ns> 0x00 <session_id>                         -> Session
//! T <ns> 0x00 <session_id> 0x00 <seq: u64 BE>      -> Turn
//! I <ns> 0x00 <session_id> 0x00 <idempotency_key>  -> IdempotencyRecord
//! U <ns> 0x00 <subject_id> 0x00 <session_id>       -> (empty) subject index
//! M <ns> 0x00 <session_id> 0x00 <version: u64 BE>  -> SessionSummary
//! F <ns> 0x00 <session_id>                         -> FoldRecord (latest)
//! A <ns> 0x00 <session_id> 0x00 <audit_seq: u64 BE> -> AuditRecord
//! R <ns> 0x00 <review_id>                          -> ReviewItem
//! ```
//!
//! Invariant relied on for prefix scans: namespaces, session ids and
//! subject ids never contain 0x00 (validation rejects control characters).
//! Big-endian seqs sort numerically. Values are checksummed envelopes (see
//! `codec`).

/// Tag byte of session records.
pub const SESSION: u8 = b'S';
/// Tag byte of turn records.
pub const TURN: u8 = b'T';
/// Tag byte of idempotency records.
pub const IDEMPOTENCY: u8 = b'I';
/// Tag byte of the subject index.
pub const SUBJECT: u8 = b'U';
/// Tag byte of stored summaries.
pub const SUMMARY: u8 = b'M';
/// Tag byte of fold states.
pub const FOLD: u8 = b'F';
/// Tag byte of audit records.
pub const AUDIT: u8 = b'A';
/// Tag byte of review items.
pub const REVIEW: u8 = b'R';

fn key(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    let len = 1 + parts.iter().map(|p| p.len() + 1).sum::<usize>();
    let mut k = Vec::with_capacity(len);
    k.push(tag);
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            k.push(0);
        }
        k.extend_from_slice(p);
    }
    k
}

/// Key of a session record.
pub fn session(ns: &str, session_id: &str) -> Vec<u8> {
    key(SESSION, &[ns.as_bytes(), session_id.as_bytes()])
}

/// Prefix of every session record of a namespace.
pub fn sessions_of(ns: &str) -> Vec<u8> {
    let mut k = key(SESSION, &[ns.as_bytes()]);
    k.push(0);
    k
}

/// Key of turn `seq` of a session.
pub fn turn(ns: &str, session_id: &str, seq: u64) -> Vec<u8> {
    key(
        TURN,
        &[ns.as_bytes(), session_id.as_bytes(), &seq.to_be_bytes()],
    )
}

/// Prefix of every turn of a session.
pub fn turns_of(ns: &str, session_id: &str) -> Vec<u8> {
    let mut k = key(TURN, &[ns.as_bytes(), session_id.as_bytes()]);
    k.push(0);
    k
}

/// Key of an idempotency record.
pub fn idempotency(ns: &str, session_id: &str, idem_key: &str) -> Vec<u8> {
    key(
        IDEMPOTENCY,
        &[ns.as_bytes(), session_id.as_bytes(), idem_key.as_bytes()],
    )
}

/// Prefix of every idempotency record of a session.
pub fn idempotency_of(ns: &str, session_id: &str) -> Vec<u8> {
    let mut k = key(IDEMPOTENCY, &[ns.as_bytes(), session_id.as_bytes()]);
    k.push(0);
    k
}

/// Key of a subject-index entry.
pub fn subject(ns: &str, subject_id: &str, session_id: &str) -> Vec<u8> {
    key(
        SUBJECT,
        &[ns.as_bytes(), subject_id.as_bytes(), session_id.as_bytes()],
    )
}

/// Prefix of the subject-index entries of one subject.
pub fn subject_of(ns: &str, subject_id: &str) -> Vec<u8> {
    let mut k = key(SUBJECT, &[ns.as_bytes(), subject_id.as_bytes()]);
    k.push(0);
    k
}

/// Key of summary `version` of a session.
pub fn summary(ns: &str, session_id: &str, version: u64) -> Vec<u8> {
    key(
        SUMMARY,
        &[ns.as_bytes(), session_id.as_bytes(), &version.to_be_bytes()],
    )
}

/// Prefix of every summary of a session.
pub fn summaries_of(ns: &str, session_id: &str) -> Vec<u8> {
    let mut k = key(SUMMARY, &[ns.as_bytes(), session_id.as_bytes()]);
    k.push(0);
    k
}

/// Key of a session's fold state.
pub fn fold(ns: &str, session_id: &str) -> Vec<u8> {
    key(FOLD, &[ns.as_bytes(), session_id.as_bytes()])
}

/// Key of audit record `n` of a session.
pub fn audit(ns: &str, session_id: &str, n: u64) -> Vec<u8> {
    key(
        AUDIT,
        &[ns.as_bytes(), session_id.as_bytes(), &n.to_be_bytes()],
    )
}

/// Prefix of every audit record of a session.
pub fn audits_of(ns: &str, session_id: &str) -> Vec<u8> {
    let mut k = key(AUDIT, &[ns.as_bytes(), session_id.as_bytes()]);
    k.push(0);
    k
}

/// Key of a review item.
pub fn review(ns: &str, review_id: &str) -> Vec<u8> {
    key(REVIEW, &[ns.as_bytes(), review_id.as_bytes()])
}

/// Prefix of a namespace's review items.
pub fn reviews_of(ns: &str) -> Vec<u8> {
    let mut k = key(REVIEW, &[ns.as_bytes()]);
    k.push(0);
    k
}

/// The seq of a turn key (its last eight bytes), 0 if the key is short.
pub fn seq_of(key: &[u8]) -> u64 {
    key.len()
        .checked_sub(8)
        .and_then(|i| key[i..].try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// The last component of a key (after the final 0x00), e.g. the session id
/// of a session or subject-index key.
pub fn last_component(key: &[u8]) -> &[u8] {
    match key.iter().rposition(|b| *b == 0) {
        Some(i) => &key[i + 1..],
        None => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_sort_by_seq_and_stay_inside_their_session() {
        let a = turn("ns", "s", 2);
        let b = turn("ns", "s", 10);
        let c = turn("ns", "s", 256);
        assert!(a < b && b < c);
        let p = turns_of("ns", "s");
        assert!(a.starts_with(&p) && c.starts_with(&p));
        // A session whose id extends another's is not inside its prefix.
        assert!(!turn("ns", "s2", 1).starts_with(&p));
    }

    #[test]
    fn last_component_extracts_ids() {
        assert_eq!(last_component(&session("ns", "abc")), b"abc");
        assert_eq!(last_component(&subject("ns", "u", "sid")), b"sid");
    }
}
