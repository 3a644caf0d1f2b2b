//! Export, import and verification of a store, record by record, below
//! the domain layer (so nothing is recomputed and a round trip is exact).
//!
//! An export is JSON lines: a header, one line per stored record
//! (`{"kind", "key", "value"}`, the key in hex, the value decoded to JSON
//! so people and scripts can read turns, summaries, facts and audit
//! records), and a trailer with the record count, without which an
//! import refuses the file (a truncated backup is never half-restored
//! silently). The search outbox is not exported: the index is derived and
//! rebuilt after an import.

use std::io::BufRead;
use std::ops::Bound;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::engine::{Engine, Write};
use super::{codec, keys, legacy};
use crate::error::{Error, Precondition, Result};
use crate::model::{
    ActionStatus, AuditRecord, CarriedAction, Episode, EraseJob, ErasureRecord, Fact, FoldRecord,
    IdempotencyRecord, IndexChange, RetentionMark, ReviewItem, Session, SessionSummary, Turn,
};

/// The export format's version (in the header line).
pub const EXPORT_VERSION: u32 = 1;
/// Records read or written per engine call.
const PAGE: usize = 1024;

/// What an export covers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Scope {
    /// Only this namespace; every namespace when `None`.
    pub namespace: Option<String>,
    /// Only this session's records (needs `namespace`); facts, which
    /// belong to a subject, are left out.
    pub session: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    mnemo_export: u32,
    scope: Scope,
    exported_at_unix_nanos: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Trailer {
    end: bool,
    records: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Line {
    kind: String,
    key: String,
    value: Value,
}

/// How a record kind's value is stored.
#[derive(Clone, Copy)]
enum Codec {
    Session,
    Turn,
    Idempotency,
    Summary,
    Fold,
    Audit,
    Review,
    Fact,
    Episode,
    Carried,
    ActionStatus,
    /// A checksummed string (a fact id).
    Id,
    /// Bytes stored as they are (index entries, pointers).
    Raw,
    /// The search outbox: derived, never exported.
    Outbox,
    /// An outbox consumer's cursor (a checksummed id): never exported.
    Cursor,
    /// An erase in progress.
    EraseJob,
    /// An erasure record.
    Erasure,
    /// What retention removed from a session.
    RetentionMark,
}

/// Each key tag's kind name and value codec.
fn kind_of(tag: u8) -> Option<(&'static str, Codec)> {
    Some(match tag {
        keys::SESSION => ("session", Codec::Session),
        keys::TURN => ("turn", Codec::Turn),
        keys::IDEMPOTENCY => ("idempotency", Codec::Idempotency),
        keys::SUBJECT => ("subject_index", Codec::Raw),
        keys::SUMMARY => ("summary", Codec::Summary),
        keys::FOLD => ("fold", Codec::Fold),
        keys::AUDIT => ("audit", Codec::Audit),
        keys::REVIEW => ("review", Codec::Review),
        keys::FACT => ("fact", Codec::Fact),
        keys::SUBJECT_FACT => ("subject_fact_index", Codec::Raw),
        keys::FACT_KEY => ("fact_key_pointer", Codec::Id),
        keys::FACT_WORDS => ("fact_words_pointer", Codec::Id),
        keys::EPISODE => ("episode", Codec::Episode),
        keys::EPISODE_OF => ("episode_pointer", Codec::Raw),
        keys::CARRIED => ("carried_action", Codec::Carried),
        keys::ACTION_STATUS => ("action_status", Codec::ActionStatus),
        keys::CHANGE => ("index_change", Codec::Outbox),
        keys::CURSOR => ("outbox_cursor", Codec::Cursor),
        keys::ERASE_JOB => ("erase_job", Codec::EraseJob),
        keys::ERASURE => ("erasure", Codec::Erasure),
        keys::RETENTION_MARK => ("retention_mark", Codec::RetentionMark),
        _ => return None,
    })
}

fn tag_of(kind: &str) -> Option<u8> {
    (b'A'..=b'Z').find(|t| kind_of(*t).is_some_and(|(k, _)| k == kind))
}

/// A stored value as JSON (checksum and decoding verified).
fn to_json(codec: Codec, bytes: &[u8], what: impl Fn() -> String) -> Result<Value> {
    fn j<T: serde::de::DeserializeOwned + 'static + Serialize>(
        bytes: &[u8],
        what: impl Fn() -> String,
    ) -> Result<Value> {
        let v: T = codec::decode(bytes, what)?;
        serde_json::to_value(v).map_err(|e| Error::Internal(format!("cannot show a record: {e}")))
    }
    match codec {
        Codec::Session => serde_json::to_value(legacy::decode_session(bytes, what)?)
            .map_err(|e| Error::Internal(format!("cannot show a session: {e}"))),
        Codec::Turn => j::<Turn>(bytes, what),
        Codec::Idempotency => j::<IdempotencyRecord>(bytes, what),
        Codec::Summary => j::<SessionSummary>(bytes, what),
        Codec::Fold => serde_json::to_value(legacy::decode_fold(bytes, what)?)
            .map_err(|e| Error::Internal(format!("cannot show a fold record: {e}"))),
        Codec::Audit => j::<AuditRecord>(bytes, what),
        Codec::Review => j::<ReviewItem>(bytes, what),
        Codec::Fact => j::<Fact>(bytes, what),
        Codec::Episode => j::<Episode>(bytes, what),
        Codec::Carried => j::<CarriedAction>(bytes, what),
        Codec::ActionStatus => j::<ActionStatus>(bytes, what),
        Codec::Id => j::<String>(bytes, what),
        Codec::Outbox => j::<IndexChange>(bytes, what),
        Codec::Cursor => j::<u64>(bytes, what),
        Codec::EraseJob => j::<EraseJob>(bytes, what),
        Codec::Erasure => j::<ErasureRecord>(bytes, what),
        Codec::RetentionMark => j::<RetentionMark>(bytes, what),
        Codec::Raw => Ok(Value::String(hex::encode(bytes))),
    }
}

/// A JSON value back into its stored form (current format).
fn from_json(codec: Codec, v: Value) -> std::result::Result<Vec<u8>, String> {
    fn e<T: serde::de::DeserializeOwned + 'static + Serialize>(
        v: Value,
    ) -> std::result::Result<Vec<u8>, String> {
        let t: T = serde_json::from_value(v).map_err(|e| e.to_string())?;
        codec::encode(&t).map_err(|e| e.to_string())
    }
    match codec {
        Codec::Session => e::<Session>(v),
        Codec::Turn => e::<Turn>(v),
        Codec::Idempotency => e::<IdempotencyRecord>(v),
        Codec::Summary => e::<SessionSummary>(v),
        Codec::Fold => e::<FoldRecord>(v),
        Codec::Audit => e::<AuditRecord>(v),
        Codec::Review => e::<ReviewItem>(v),
        Codec::Fact => e::<Fact>(v),
        Codec::Episode => e::<Episode>(v),
        Codec::Carried => e::<CarriedAction>(v),
        Codec::ActionStatus => e::<ActionStatus>(v),
        Codec::Id => e::<String>(v),
        Codec::Outbox => Err("search outbox entries are not imported".into()),
        Codec::Cursor => Err("outbox cursors are not imported".into()),
        Codec::EraseJob => e::<EraseJob>(v),
        Codec::Erasure => e::<ErasureRecord>(v),
        Codec::RetentionMark => e::<RetentionMark>(v),
        Codec::Raw => match v {
            Value::String(s) => hex::decode(&s).map_err(|e| e.to_string()),
            _ => Err("expected a hex string".into()),
        },
    }
}

/// The components of a key after its tag (split at 0x00). Big-endian
/// numbers inside are left as bytes; only the string parts are used.
fn parts(key: &[u8]) -> Vec<&[u8]> {
    key.get(1..)
        .unwrap_or_default()
        .split(|b| *b == 0)
        .collect()
}

/// Component `i` of `parts` as text, for messages ("" when absent).
fn part_text(parts: &[&[u8]], i: usize) -> String {
    String::from_utf8_lossy(parts.get(i).copied().unwrap_or_default()).into_owned()
}

/// Whether the record under `key` (with `value`) is inside `scope`.
fn in_scope(scope: &Scope, key: &[u8], value: &[u8]) -> bool {
    let tag = key.first().copied().unwrap_or(0);
    if tag == keys::CHANGE || tag == keys::CURSOR {
        return false;
    }
    let p = parts(key);
    if let Some(ns) = &scope.namespace {
        if p.first() != Some(&ns.as_bytes()) {
            return false;
        }
    }
    let Some(session) = &scope.session else {
        return true;
    };
    let s = session.as_bytes();
    match tag {
        keys::SESSION
        | keys::TURN
        | keys::IDEMPOTENCY
        | keys::SUMMARY
        | keys::FOLD
        | keys::AUDIT
        | keys::EPISODE_OF
        | keys::ACTION_STATUS => p.get(1) == Some(&s),
        keys::SUBJECT | keys::CARRIED => p.get(2) == Some(&s),
        keys::EPISODE => p.last() == Some(&s),
        keys::REVIEW => {
            codec::decode::<ReviewItem>(value, String::new).is_ok_and(|r| r.session_id == *session)
        }
        _ => false,
    }
}

/// Writes every record of `scope` to `out`; returns the records written.
/// `progress` is called with the running count.
pub fn export(
    engine: &dyn Engine,
    scope: &Scope,
    out: &mut dyn std::io::Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    if scope.session.is_some() && scope.namespace.is_none() {
        return Err(Error::invalid("a session export needs its namespace"));
    }
    let io = |e: std::io::Error| Error::Storage(format!("cannot write the export: {e}"));
    let header = Header {
        mnemo_export: EXPORT_VERSION,
        scope: scope.clone(),
        exported_at_unix_nanos: crate::model::now_nanos(),
    };
    writeln!(out, "{}", json_line(&header)?).map_err(io)?;
    let mut records = 0u64;
    each_entry(engine, b"", |key, value| {
        if !in_scope(scope, key, value) {
            return Ok(());
        }
        let Some((kind, codec)) = kind_of(key[0]) else {
            return Err(Error::DataLoss(format!(
                "unknown record tag {:?} under key {}",
                key[0] as char,
                hex::encode(key)
            )));
        };
        let value = to_json(codec, value, || {
            format!("{kind} record {}", hex::encode(key))
        })?;
        let line = Line {
            kind: kind.to_owned(),
            key: hex::encode(key),
            value,
        };
        writeln!(out, "{}", json_line(&line)?).map_err(io)?;
        records += 1;
        if records % 10_000 == 0 {
            progress(records);
        }
        Ok(())
    })?;
    writeln!(out, "{}", json_line(&Trailer { end: true, records })?).map_err(io)?;
    out.flush().map_err(io)?;
    progress(records);
    Ok(records)
}

/// Restores an export into `engine`. Refuses (writing nothing) a file that
/// is malformed, truncated, or holds a session, fact or review item the
/// target already has. Returns the records written.
pub fn import(
    engine: &dyn Engine,
    input: &mut dyn BufRead,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    // Parse and check the whole file first: nothing is written unless all
    // of it is sound.
    let mut lines = input.lines().enumerate();
    let bad = |n: usize, why: String| Error::invalid(format!("export line {}: {why}", n + 1));
    let (n, first) = lines
        .next()
        .ok_or_else(|| Error::invalid("the export is empty"))?;
    let first = first.map_err(|e| bad(n, e.to_string()))?;
    let header: Header = serde_json::from_str(&first)
        .map_err(|e| bad(n, format!("not a mnemo export header: {e}")))?;
    if header.mnemo_export != EXPORT_VERSION {
        return Err(bad(
            n,
            format!(
                "export format {} is not supported (this mnemo reads {EXPORT_VERSION})",
                header.mnemo_export
            ),
        ));
    }
    let mut writes = Vec::new();
    let mut trailer = None;
    for (n, line) in lines {
        let line = line.map_err(|e| bad(n, e.to_string()))?;
        if trailer.is_some() {
            return Err(bad(n, "data after the end line".into()));
        }
        let v: Value = serde_json::from_str(&line).map_err(|e| bad(n, e.to_string()))?;
        if v.get("end").is_some() {
            let t: Trailer = serde_json::from_value(v).map_err(|e| bad(n, e.to_string()))?;
            trailer = Some(t);
            continue;
        }
        let l: Line = serde_json::from_value(v).map_err(|e| bad(n, e.to_string()))?;
        let key = hex::decode(&l.key).map_err(|e| bad(n, format!("the key is not hex: {e}")))?;
        let tag = tag_of(&l.kind).ok_or_else(|| bad(n, format!("unknown kind {:?}", l.kind)))?;
        if key.first() != Some(&tag) {
            return Err(bad(
                n,
                format!("the key does not belong to a {} record", l.kind),
            ));
        }
        let (_, codec) = kind_of(tag).expect("tag_of found it");
        let value = from_json(codec, l.value).map_err(|e| bad(n, format!("{}: {e}", l.kind)))?;
        writes.push((key, value));
    }
    let Some(trailer) = trailer else {
        return Err(Error::invalid(
            "the export has no end line: it is truncated; nothing was imported",
        ));
    };
    if trailer.records != writes.len() as u64 {
        return Err(Error::invalid(format!(
            "the export says {} records but holds {}; nothing was imported",
            trailer.records,
            writes.len()
        )));
    }
    for (key, _) in &writes {
        if matches!(key[0], keys::SESSION | keys::FACT | keys::REVIEW) && engine.get(key)?.is_some()
        {
            let p = parts(key);
            let name = |i| part_text(&p, i);
            return Err(Error::FailedPrecondition(
                Precondition::ImportConflict,
                format!(
                "the target already holds {} {:?} in namespace {:?}: import into an empty data directory, or delete it first; nothing was imported",
                kind_of(key[0]).map_or("record", |k| k.0),
                name(1),
                name(0)
            )));
        }
    }
    let mut written = 0u64;
    for chunk in writes.chunks(PAGE) {
        engine.apply(
            chunk
                .iter()
                .map(|(k, v)| Write::Put(k.clone(), v.clone()))
                .collect(),
        )?;
        written += chunk.len() as u64;
        progress(written);
    }
    engine.sync()?;
    if let Some(shared) = engine.shared() {
        // Daemons sharing the database may be running: their search
        // indexes learn of the imported records from the outbox.
        for chunk in imported_changes(&writes)?.chunks(PAGE) {
            let entries = chunk.iter().map(codec::encode).collect::<Result<_>>()?;
            shared.stage(entries)?;
        }
    }
    Ok(written)
}

/// What the search index must learn of imported records: each session's
/// turns, each fact version, each episode.
fn imported_changes(writes: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<IndexChange>> {
    let mut out = Vec::new();
    for (key, value) in writes {
        let what = || String::from("an imported record");
        match key[0] {
            keys::SESSION => {
                let s = legacy::decode_session(value, what)?;
                if s.next_seq > 1 {
                    out.push(IndexChange::Turns {
                        namespace: s.namespace,
                        session_id: s.session_id,
                        first_seq: 1,
                        last_seq: s.next_seq - 1,
                    });
                }
            }
            keys::FACT => {
                let f: Fact = codec::decode(value, what)?;
                out.push(IndexChange::Fact {
                    namespace: f.namespace,
                    fact_id: f.fact_id,
                });
            }
            keys::EPISODE => {
                let e: Episode = codec::decode(value, what)?;
                out.push(IndexChange::Episode {
                    namespace: e.namespace,
                    session_id: e.session_id,
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Problems [`verify`] found, each a line for a person.
#[derive(Debug, Default)]
pub struct Report {
    /// Records read.
    pub records: u64,
    /// Sessions checked.
    pub sessions: u64,
    /// What is wrong.
    pub problems: Vec<String>,
    /// Search outbox entries not yet applied to the index.
    pub pending_index_changes: u64,
    /// Documents the index should hold once the outbox is applied.
    pub expected_index_docs: u64,
}

/// Checks every record's checksum and decoding, and the cross-references:
/// a session's turns are exactly seqs 1..next_seq with the counted number
/// of turns; its summary versions exist; no turn, summary or audit record
/// outlives its session; fact pointers and episode pointers lead to
/// records that exist. At most `max_problems` are listed.
pub fn verify(
    engine: &dyn Engine,
    max_problems: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<Report> {
    let mut r = Report::default();
    let note = |r: &mut Report, p: String| {
        if r.problems.len() < max_problems {
            r.problems.push(p);
        }
    };
    let mut owner_seen: Option<(Vec<u8>, bool)> = None;
    each_entry(engine, b"", |key, value| {
        r.records += 1;
        if r.records % 10_000 == 0 {
            progress(r.records);
        }
        let Some((kind, codec)) = kind_of(key[0]) else {
            note(
                &mut r,
                format!("unknown record tag under key {}", hex::encode(key)),
            );
            return Ok(());
        };
        let p = parts(key);
        let name = |i| part_text(&p, i);
        let what = || format!("{kind} record {}/{}", name(0), name(1));
        if let Err(e) = to_json(codec, value, what) {
            note(&mut r, e.to_string());
            return Ok(());
        }
        match key[0] {
            keys::SESSION => {
                r.sessions += 1;
                let s = legacy::decode_session(value, what)?;
                r.expected_index_docs += check_session(engine, &s, &mut |p| note(&mut r, p))?;
            }
            keys::TURN
            | keys::SUMMARY
            | keys::AUDIT
            | keys::FOLD
            | keys::IDEMPOTENCY
            | keys::RETENTION_MARK => {
                // Records of one session are contiguous: look it up once.
                let owner = keys::session(&name(0), &name(1));
                if owner_seen.as_ref().map(|(k, _)| k) != Some(&owner) {
                    let exists = engine.get(&owner)?.is_some();
                    owner_seen = Some((owner, exists));
                }
                if owner_seen.as_ref().is_some_and(|(_, exists)| !exists) {
                    note(
                        &mut r,
                        format!("{} has no session (orphaned {kind} record)", what()),
                    );
                }
            }
            keys::FACT_KEY | keys::FACT_WORDS => {
                let id: String = codec::decode(value, what)?;
                let missing = engine.get(&keys::fact(&name(0), &id))?.is_none();
                if missing {
                    let (ns, subject) = (name(0), name(1));
                    note(
                        &mut r,
                        format!("{kind} of subject {ns}/{subject} points to missing fact {id}"),
                    );
                }
            }
            keys::FACT => {
                let f: Fact = codec::decode(value, what)?;
                r.expected_index_docs += u64::from(f.is_current());
            }
            keys::EPISODE => r.expected_index_docs += 1,
            keys::EPISODE_OF => {
                let missing = engine.get(value)?.is_none();
                if missing {
                    let (ns, id) = (name(0), name(1));
                    note(
                        &mut r,
                        format!("session {ns}/{id} points to a missing episode"),
                    );
                }
            }
            keys::CHANGE => r.pending_index_changes += 1,
            _ => {}
        }
        Ok(())
    })?;
    progress(r.records);
    Ok(r)
}

/// A session's counters against its turns and summaries (turns and
/// summary versions that retention removed, as its mark records, are not
/// expected). Returns the turns stored.
fn check_session(engine: &dyn Engine, s: &Session, note: &mut dyn FnMut(String)) -> Result<u64> {
    let (ns, id) = (&s.namespace, &s.session_id);
    let mark: RetentionMark =
        codec_read(engine, &keys::retention_mark(ns, id))?.unwrap_or_default();
    let prefix = keys::turns_of(ns, id);
    let (mut expected, mut count) = (mark.turns_through_seq + 1, 0u64);
    each_entry(engine, &prefix, |key, _| {
        let seq = keys::seq_of(key);
        if seq != expected {
            note(format!("session {ns}/{id}: turn seq {seq} where {expected} was expected (a gap or a duplicate)"));
        }
        expected = seq + 1;
        count += 1;
        Ok(())
    })?;
    let counted = s.turn_count.saturating_sub(mark.turns_removed);
    if count != counted || expected != s.next_seq {
        note(format!(
            "session {ns}/{id}: {count} turns stored (last seq {}), but the session counts {} turns ({} removed by retention) and next seq {}",
            expected - 1,
            s.turn_count,
            mark.turns_removed,
            s.next_seq
        ));
    }
    let v = s.summary.version;
    if v > mark.summaries_through_version {
        if engine.get(&keys::summary(ns, id, v))?.is_none() {
            note(format!(
                "session {ns}/{id}: its summary version {v} is missing"
            ));
        }
        if s.summary.through_seq > s.last_seq() {
            note(format!(
                "session {ns}/{id}: the summary covers through seq {} but the last turn is {}",
                s.summary.through_seq,
                s.last_seq()
            ));
        }
    }
    Ok(count)
}

/// A record, verified, if stored (an unreadable one is reported where its
/// own key is checked).
fn codec_read<T: serde::de::DeserializeOwned + 'static>(
    engine: &dyn Engine,
    key: &[u8],
) -> Result<Option<T>> {
    Ok(match engine.get(key)? {
        Some(v) => codec::decode(&v, String::new).ok(),
        None => None,
    })
}

/// Calls `f` with every entry whose key starts with `prefix`, in key
/// order, reading a page at a time.
fn each_entry(
    engine: &dyn Engine,
    prefix: &[u8],
    mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    let mut after: Option<Vec<u8>> = None;
    loop {
        let from = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let page = engine.scan(from, prefix, PAGE)?;
        let Some((last, _)) = page.last() else {
            return Ok(());
        };
        after = Some(last.clone());
        for (key, value) in &page {
            f(key, value)?;
        }
    }
}

fn json_line<T: Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Internal(format!("cannot write JSON: {e}")))
}
