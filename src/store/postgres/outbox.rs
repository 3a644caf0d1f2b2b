//! Outbox ids across daemons. A writer's transaction only stages its
//! entries (`mnemo_staged`, keyed by the time and process that staged
//! them), so writers never wait for one another; a consumer numbers what
//! is staged before it reads (`sequence`): under the counter row's lock it
//! moves every committed staged entry into the keyspace with the next ids.
//! Only committed entries are visible to it and each pass numbers above
//! every id before, so an entry can never appear below a cursor that
//! already passed (which a consumer would skip) — the promise a single
//! process keeps with its order lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use postgres::types::Type;

use super::{apply_with, blocking, db_error, PgEngine};
use crate::error::{Error, Result};
use crate::model::now_nanos;
use crate::store::engine::{Batch, Write};

/// Entries numbered per pass.
const PASS: i64 = 4096;

/// Stages outbox entries through `conn` (inside the caller's transaction,
/// if any).
pub(super) fn stage_with(conn: &mut postgres::Client, entries: Vec<Vec<u8>>) -> Result<()> {
    let keys: Vec<Vec<u8>> = entries.iter().map(|_| stage_key()).collect();
    conn.execute_typed(
        "INSERT INTO mnemo_staged (k, entry) SELECT * FROM unnest($1::bytea[], $2::bytea[])",
        &[(&keys, Type::BYTEA_ARRAY), (&entries, Type::BYTEA_ARRAY)],
    )
    .map_err(db_error)?;
    Ok(())
}

/// A staging key: the time, this process, and a counter (unique, and in
/// staging order within a process).
fn stage_key() -> Vec<u8> {
    static PROCESS: OnceLock<[u8; 8]> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let process = PROCESS.get_or_init(|| {
        let mut b = [0u8; 8];
        // Without randomness, the pid still tells processes apart.
        if getrandom::fill(&mut b).is_err() {
            b[..4].copy_from_slice(&std::process::id().to_be_bytes());
        }
        b
    });
    let mut k = Vec::with_capacity(24);
    k.extend_from_slice(&(now_nanos() as u64).to_be_bytes());
    k.extend_from_slice(process);
    k.extend_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    k
}

impl PgEngine {
    /// Numbers the committed staged entries (in staging order) under
    /// `key(id)`; returns how many.
    pub(super) fn sequence(&self, key: fn(u64) -> Vec<u8>) -> Result<usize> {
        let mut total = 0;
        loop {
            let n = self.sequence_pass(key)?;
            total += n;
            if (n as i64) < PASS {
                return Ok(total);
            }
        }
    }

    fn sequence_pass(&self, key: fn(u64) -> Vec<u8>) -> Result<usize> {
        let mut conn = self.conn()?;
        blocking(|| -> Result<usize> {
            let tx: &mut postgres::Client = &mut conn;
            tx.batch_execute("BEGIN").map_err(db_error)?;
            let n = numbered(tx, key);
            let end = if n.as_ref().is_ok_and(|&n| n > 0) {
                "COMMIT"
            } else {
                "ROLLBACK"
            };
            tx.batch_execute(end).map_err(db_error)?;
            n
        })
    }

    /// Entries staged and not numbered yet.
    pub(super) fn staged(&self) -> Result<u64> {
        let mut conn = self.conn()?;
        blocking(|| {
            conn.query_typed("SELECT count(*) FROM mnemo_staged", &[])
                .map_err(db_error)
                .map(|rows| rows.first().map_or(0, |r| r.get::<_, i64>(0) as u64))
        })
    }
}

/// One pass inside the caller's transaction: numbers up to [`PASS`]
/// staged entries; returns how many.
fn numbered(tx: &mut postgres::Client, key: fn(u64) -> Vec<u8>) -> Result<usize> {
    // Taken first: sequencing passes run one at a time, and each
    // sees every entry committed before it got the lock.
    let value: i64 = tx
        .query_typed(
            "SELECT value FROM mnemo_counters WHERE name = 'outbox' FOR UPDATE",
            &[],
        )
        .map_err(db_error)?
        .first()
        .ok_or_else(|| Error::Storage("the outbox counter row is missing".into()))?
        .get(0);
    let rows = tx
        .query_typed(
            "SELECT k, entry FROM mnemo_staged ORDER BY k LIMIT $1",
            &[(&PASS, Type::INT8)],
        )
        .map_err(db_error)?;
    if rows.is_empty() {
        return Ok(0);
    }
    // Ids follow the clock (as on sled) and never go back.
    let first = value.max(now_nanos()) + 1;
    let mut staged = Vec::with_capacity(rows.len());
    let mut batch = Batch::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        staged.push(r.get::<_, Vec<u8>>(0));
        batch.push(Write::Put(key((first + i as i64) as u64), r.get(1)));
    }
    let top = first + rows.len() as i64 - 1;
    apply_with(tx, batch)?;
    tx.execute_typed(
        "DELETE FROM mnemo_staged WHERE k = ANY($1)",
        &[(&staged, Type::BYTEA_ARRAY)],
    )
    .map_err(db_error)?;
    tx.execute_typed(
        "UPDATE mnemo_counters SET value = $1 WHERE name = 'outbox'",
        &[(&top, Type::INT8)],
    )
    .map_err(db_error)?;
    Ok(rows.len())
}
