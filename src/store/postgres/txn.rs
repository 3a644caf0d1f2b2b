//! A unit of work of the PostgreSQL engine: one transaction on one pooled
//! connection, holding the lock row it was begun with until it ends.
//! Outbox entries are staged with the unit's writes and numbered later, in
//! commit order, by whoever reads the outbox (`outbox.rs`), so units of
//! different sessions never wait for one another. Watchers of other
//! daemons are told by `NOTIFY` once the unit has committed.

use std::cell::RefCell;
use std::ops::Bound;

use super::outbox::stage_with;
use super::{apply_with, blocking, db_error, get_with, scan_rev_with, scan_with, Conn};
use postgres::types::Type;

use crate::error::Result;
use crate::store::engine::{Batch, Entry, Read, Txn};

/// The channel other daemons' watchers listen on; the payload is a
/// session's watch topic.
pub(crate) const WATCH_CHANNEL: &str = "mnemo_watch";

/// An open transaction.
pub(super) struct PgTxn {
    conn: RefCell<Conn>,
    /// Outbox entries to stage at commit.
    entries: Vec<Vec<u8>>,
    /// Topics to announce at commit.
    topics: Vec<String>,
    open: bool,
}

impl PgTxn {
    /// Begins a transaction and takes the lock row `lock` (none when
    /// empty): units holding the same lock run one at a time.
    pub(super) fn begin(mut conn: Conn, lock: &[u8]) -> Result<PgTxn> {
        blocking(|| -> std::result::Result<(), postgres::Error> {
            conn.batch_execute("BEGIN")?;
            if !lock.is_empty() {
                // Inserting the row or updating it both hold its lock to
                // the end of the transaction.
                conn.execute_typed(
                    "INSERT INTO mnemo_locks (k) VALUES ($1) ON CONFLICT (k) DO UPDATE SET k = EXCLUDED.k",
                    &[(&lock, Type::BYTEA)],
                )?;
            }
            Ok(())
        })
        .map_err(db_error)?;
        Ok(PgTxn {
            conn: RefCell::new(conn),
            entries: Vec::new(),
            topics: Vec::new(),
            open: true,
        })
    }

    /// Stages the outbox entries, commits, sends the notices.
    pub(super) fn commit(mut self) -> Result<()> {
        let conn = self.conn.get_mut();
        if !self.entries.is_empty() {
            let entries = std::mem::take(&mut self.entries);
            blocking(|| stage_with(conn, entries))?;
        }
        self.topics.sort();
        self.topics.dedup();
        let topics = std::mem::take(&mut self.topics);
        blocking(|| conn.batch_execute("COMMIT")).map_err(db_error)?;
        self.open = false;
        // After the commit, in a transaction of their own that writes
        // nothing: a NOTIFY inside the unit would hold PostgreSQL's global
        // notification lock through its commit and serialize every writer.
        // A crash right here loses a wake-up, which the watchers' poll
        // covers.
        let _ = blocking(|| -> std::result::Result<(), postgres::Error> {
            for t in &topics {
                conn.execute_typed(
                    "SELECT pg_notify($1, $2)",
                    &[(&WATCH_CHANNEL, Type::TEXT), (t, Type::TEXT)],
                )?;
            }
            Ok(())
        });
        Ok(())
    }
}

impl Drop for PgTxn {
    fn drop(&mut self) {
        if self.open {
            let conn = self.conn.get_mut();
            // A failed rollback means a broken connection, which the pool
            // drops when it is returned.
            let _ = blocking(|| conn.batch_execute("ROLLBACK"));
        }
    }
}

impl Read for PgTxn {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        get_with(&mut self.conn.borrow_mut(), key)
    }

    fn scan(&self, from: Bound<&[u8]>, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        scan_with(&mut self.conn.borrow_mut(), from, prefix, limit)
    }

    fn scan_rev(&self, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        scan_rev_with(&mut self.conn.borrow_mut(), prefix, limit)
    }
}

impl Txn for PgTxn {
    fn apply(&mut self, batch: Batch) -> Result<()> {
        apply_with(self.conn.get_mut(), batch)
    }

    fn numbers_entries(&self) -> bool {
        true
    }

    fn add_entries(&mut self, entries: Vec<Vec<u8>>) -> Result<()> {
        // Staged at commit, numbered when the outbox is read.
        self.entries.extend(entries);
        Ok(())
    }

    fn announce(&mut self, topic: String) {
        self.topics.push(topic);
    }
}
