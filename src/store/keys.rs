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
//! K <ns> 0x00 <fact_id>                            -> Fact (every version)
//! V <ns> 0x00 <subject_id> 0x00 <fact_id>          -> (empty) facts of a subject
//! Y <ns> 0x00 <subject_id> 0x00 <key>              -> fact id: current fact of a key
//! H <ns> 0x00 <subject_id> 0x00 <words hash>       -> fact id: current unkeyed fact
//! E <ns> 0x00 <subject_id> 0x00 <!ended: u64 BE> 0x00 <session_id> -> Episode
//! P <ns> 0x00 <session_id>                         -> key of the session's episode
//! O <ns> 0x00 <subject_id> 0x00 <session_id> 0x00 <action_seq: u64 BE> -> CarriedAction
//! Q <ns> 0x00 <session_id> 0x00 <action_seq: u64 BE> -> ActionStatus set by a client
//! L <change id: u64 BE>                            -> IndexChange (search outbox)
//! X <ns> 0x00 <subject_id>                         -> EraseJob (an erase in progress)
//! Z <ns> 0x00 <erasure_id>                         -> ErasureRecord (no content)
//! W <ns> 0x00 <session_id>                         -> RetentionMark (what retention removed)
//! ```
//!
//! Episodes sort newest first within a subject: their time component is
//! the bitwise complement of the end time.
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
/// Tag byte of fact versions.
pub const FACT: u8 = b'K';
/// Tag byte of the facts-of-a-subject index.
pub const SUBJECT_FACT: u8 = b'V';
/// Tag byte of the current-fact-of-a-key pointers.
pub const FACT_KEY: u8 = b'Y';
/// Tag byte of the current-unkeyed-fact-by-words pointers.
pub const FACT_WORDS: u8 = b'H';
/// Tag byte of episodes.
pub const EPISODE: u8 = b'E';
/// Tag byte of the session-to-episode pointers.
pub const EPISODE_OF: u8 = b'P';
/// Tag byte of carried-over pending actions.
pub const CARRIED: u8 = b'O';
/// Tag byte of client-set action statuses.
pub const ACTION_STATUS: u8 = b'Q';
/// Tag byte of the search-index outbox.
pub const CHANGE: u8 = b'L';
/// Tag byte of outbox consumers' cursors.
pub const CURSOR: u8 = b'C';
/// Tag byte of erase jobs in progress.
pub const ERASE_JOB: u8 = b'X';
/// Tag byte of erasure records.
pub const ERASURE: u8 = b'Z';
/// Tag byte of retention marks.
pub const RETENTION_MARK: u8 = b'W';

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

/// The prefix of every key under `parts` (the key plus a separator).
fn prefix(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    let mut k = key(tag, parts);
    k.push(0);
    k
}

/// Key of a fact version.
pub fn fact(ns: &str, fact_id: &str) -> Vec<u8> {
    key(FACT, &[ns.as_bytes(), fact_id.as_bytes()])
}

/// Prefix of every fact of a namespace.
pub fn facts_of(ns: &str) -> Vec<u8> {
    prefix(FACT, &[ns.as_bytes()])
}

/// Key of a facts-of-a-subject index entry.
pub fn subject_fact(ns: &str, subject_id: &str, fact_id: &str) -> Vec<u8> {
    key(
        SUBJECT_FACT,
        &[ns.as_bytes(), subject_id.as_bytes(), fact_id.as_bytes()],
    )
}

/// Prefix of the fact index entries of one subject.
pub fn subject_facts_of(ns: &str, subject_id: &str) -> Vec<u8> {
    prefix(SUBJECT_FACT, &[ns.as_bytes(), subject_id.as_bytes()])
}

/// Key of the pointer to the current fact of `fact_key`.
pub fn fact_key(ns: &str, subject_id: &str, fact_key: &str) -> Vec<u8> {
    key(
        FACT_KEY,
        &[ns.as_bytes(), subject_id.as_bytes(), fact_key.as_bytes()],
    )
}

/// Key of the pointer to the current unkeyed fact with these normalized
/// words (hashed: a fact may be 4 KiB).
pub fn fact_words(ns: &str, subject_id: &str, normalized: &str) -> Vec<u8> {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(normalized.as_bytes());
    key(
        FACT_WORDS,
        &[ns.as_bytes(), subject_id.as_bytes(), hash.as_slice()],
    )
}

/// Prefix of a subject's current-fact-of-a-key pointers.
pub fn fact_keys_of(ns: &str, subject_id: &str) -> Vec<u8> {
    prefix(FACT_KEY, &[ns.as_bytes(), subject_id.as_bytes()])
}

/// Prefix of a subject's current-unkeyed-fact pointers.
pub fn fact_words_of(ns: &str, subject_id: &str) -> Vec<u8> {
    prefix(FACT_WORDS, &[ns.as_bytes(), subject_id.as_bytes()])
}

/// Key of an episode.
pub fn episode(ns: &str, subject_id: &str, ended_at: i64, session_id: &str) -> Vec<u8> {
    // Complemented so that later episodes sort first.
    let rev = !(ended_at as u64);
    key(
        EPISODE,
        &[
            ns.as_bytes(),
            subject_id.as_bytes(),
            &rev.to_be_bytes(),
            session_id.as_bytes(),
        ],
    )
}

/// Prefix of a subject's episodes (newest first).
pub fn episodes_of(ns: &str, subject_id: &str) -> Vec<u8> {
    prefix(EPISODE, &[ns.as_bytes(), subject_id.as_bytes()])
}

/// Key of the pointer from a session to its episode's key.
pub fn episode_of(ns: &str, session_id: &str) -> Vec<u8> {
    key(EPISODE_OF, &[ns.as_bytes(), session_id.as_bytes()])
}

/// Key of a carried action.
pub fn carried(ns: &str, subject_id: &str, session_id: &str, action_seq: u64) -> Vec<u8> {
    key(
        CARRIED,
        &[
            ns.as_bytes(),
            subject_id.as_bytes(),
            session_id.as_bytes(),
            &action_seq.to_be_bytes(),
        ],
    )
}

/// Prefix of a subject's carried actions.
pub fn carried_of_subject(ns: &str, subject_id: &str) -> Vec<u8> {
    prefix(CARRIED, &[ns.as_bytes(), subject_id.as_bytes()])
}

/// Prefix of the carried actions of one session.
pub fn carried_of_session(ns: &str, subject_id: &str, session_id: &str) -> Vec<u8> {
    prefix(
        CARRIED,
        &[ns.as_bytes(), subject_id.as_bytes(), session_id.as_bytes()],
    )
}

/// Key of a client-set action status.
pub fn action_status(ns: &str, session_id: &str, action_seq: u64) -> Vec<u8> {
    key(
        ACTION_STATUS,
        &[
            ns.as_bytes(),
            session_id.as_bytes(),
            &action_seq.to_be_bytes(),
        ],
    )
}

/// Prefix of a session's client-set action statuses.
pub fn action_statuses_of(ns: &str, session_id: &str) -> Vec<u8> {
    prefix(ACTION_STATUS, &[ns.as_bytes(), session_id.as_bytes()])
}

/// Key of a search-outbox entry.
pub fn change(id: u64) -> Vec<u8> {
    let mut k = vec![CHANGE];
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// Key of an outbox consumer's cursor.
pub fn cursor(consumer: &str) -> Vec<u8> {
    key(CURSOR, &[consumer.as_bytes()])
}

/// Key of the erase job of a subject.
pub fn erase_job(ns: &str, subject_id: &str) -> Vec<u8> {
    key(ERASE_JOB, &[ns.as_bytes(), subject_id.as_bytes()])
}

/// Prefix of every erase job (of every namespace).
pub fn erase_jobs() -> Vec<u8> {
    vec![ERASE_JOB]
}

/// Key of an erasure record.
pub fn erasure(ns: &str, erasure_id: &str) -> Vec<u8> {
    key(ERASURE, &[ns.as_bytes(), erasure_id.as_bytes()])
}

/// Prefix of a namespace's erasure records (oldest first: ids are ULIDs).
pub fn erasures_of(ns: &str) -> Vec<u8> {
    prefix(ERASURE, &[ns.as_bytes()])
}

/// Key of a session's retention mark.
pub fn retention_mark(ns: &str, session_id: &str) -> Vec<u8> {
    key(RETENTION_MARK, &[ns.as_bytes(), session_id.as_bytes()])
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

    #[test]
    fn episodes_sort_newest_first_within_their_subject() {
        let old = episode("ns", "u", 1_000, "s1");
        let new = episode("ns", "u", 2_000, "s2");
        assert!(new < old);
        let p = episodes_of("ns", "u");
        assert!(old.starts_with(&p) && new.starts_with(&p));
        assert!(!episode("ns", "u2", 1, "s").starts_with(&p));
    }
}
