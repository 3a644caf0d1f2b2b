//! The outbox of a `KvStore`: entries keyed by an id the store assigns,
//! written in the same batch as the change they announce; one durable
//! cursor per consumer; entries every known consumer has passed are pruned.
//!
//! Ids are assigned and their batches applied under one lock, so entries
//! become visible in id order: a consumer that has read through id N never
//! finds a lower id appear later (which its cursor would skip). Engines
//! already apply batches one at a time (sled behind its gate), so the lock
//! costs little.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::engine::{Batch, Engine, Txn, Write};
use super::{codec, keys, KvStore, Outbox, OutboxPage};
use crate::error::{Error, Result};
use crate::model::{now_nanos, IndexChange};

/// Entries removed per batch when pruning.
const PRUNE_CHUNK: usize = 4096;

/// Outbox ids and what each consumer has left to read.
#[derive(Debug, Default)]
pub(super) struct ChangeLog {
    /// Held while ids are assigned and their batch applied, and while a
    /// consumer's counts change, so counts and visibility agree.
    order: Mutex<()>,
    next: AtomicU64,
    /// Entries stored (not yet pruned).
    stored: AtomicU64,
    /// Consumer -> (cursor, entries after it).
    consumers: Mutex<HashMap<String, (u64, u64)>>,
}

fn decode_cursor(v: &[u8], consumer: &str) -> Result<u64> {
    codec::decode(v, || format!("outbox cursor of {consumer:?}"))
}

impl ChangeLog {
    /// Picks up after what `engine` holds: the newest entry, the cursors.
    pub(super) fn recover(engine: &dyn Engine) -> Result<ChangeLog> {
        let log = ChangeLog::default();
        let mut ids = Vec::new();
        let mut from: Option<Vec<u8>> = None;
        loop {
            let bound = from.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let chunk = engine.scan(bound, &[keys::CHANGE], PRUNE_CHUNK)?;
            let Some((k, _)) = chunk.last() else { break };
            from = Some(k.clone());
            ids.extend(chunk.iter().map(|(k, _)| keys::seq_of(k)));
        }
        let mut top = ids.last().copied().unwrap_or(0);
        let mut consumers = HashMap::new();
        for (k, v) in engine.scan(Bound::Unbounded, &[keys::CURSOR], usize::MAX)? {
            let name = String::from_utf8_lossy(&k[1..]).into_owned();
            let cursor = decode_cursor(&v, &name)?;
            top = top.max(cursor);
            let after = ids.iter().filter(|&&id| id > cursor).count() as u64;
            consumers.insert(name, (cursor, after));
        }
        log.stored.store(ids.len() as u64, Ordering::Relaxed);
        *log.consumers.lock().unwrap_or_else(|p| p.into_inner()) = consumers;
        // Ids follow the clock so they stay unique and increasing across
        // restarts even if the outbox was emptied; never below what is
        // stored or what a cursor has passed.
        log.next
            .store(top.max(now_nanos() as u64) + 1, Ordering::Relaxed);
        Ok(log)
    }

    /// Applies `batch` with an outbox entry for each of `notes`, ids
    /// assigned in order under the order lock.
    ///
    /// A shared engine numbers the entries itself (several processes add
    /// them); this log's counts then cover only what this process added,
    /// and the port counts and prunes from the engine instead.
    pub(super) fn commit(
        &self,
        tx: &mut dyn Txn,
        mut batch: Batch,
        notes: Vec<IndexChange>,
    ) -> Result<()> {
        if tx.numbers_entries() {
            tx.apply(batch)?;
            let entries = notes.iter().map(codec::encode).collect::<Result<_>>()?;
            return tx.add_entries(entries);
        }
        let _order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let n = notes.len() as u64;
        for note in &notes {
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            batch.push(Write::Put(keys::change(id), codec::encode(note)?));
        }
        tx.apply(batch)?;
        self.committed(n);
        Ok(())
    }

    /// Counts `n` entries whose batch was applied (under the order lock).
    fn committed(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.stored.fetch_add(n, Ordering::Relaxed);
        for (_, after) in self
            .consumers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values_mut()
        {
            *after += n;
        }
    }

    /// The cursor of `consumer`; a new consumer starts before every
    /// stored entry.
    fn cursor(&self, consumer: &str) -> u64 {
        let mut c = self.consumers.lock().unwrap_or_else(|p| p.into_inner());
        let stored = self.stored.load(Ordering::Relaxed);
        c.entry(consumer.to_owned()).or_insert((0, stored)).0
    }
}

impl<E: Engine> Outbox for KvStore<E> {
    fn read_outbox_after(&self, consumer: &str, after: u64, limit: usize) -> Result<OutboxPage> {
        if let Some(shared) = self.engine().shared() {
            shared.sequence(keys::change)?;
        }
        let cursor = {
            let _order = self.changes.order.lock().unwrap_or_else(|p| p.into_inner());
            self.changes.cursor(consumer).max(after)
        };
        let start = keys::change(cursor);
        let mut out = OutboxPage::default();
        for (k, v) in self
            .engine()
            .scan(Bound::Excluded(&start), &[keys::CHANGE], limit)?
        {
            let id = keys::seq_of(&k);
            out.through = id;
            match codec::decode(&v, || format!("search outbox entry {id}")) {
                Ok(c) => out.entries.push((id, c)),
                // A damaged entry cannot be applied; the consumer passes
                // it, and a rebuild (`mnemo reindex`) covers what it named.
                Err(e) => tracing::error!(error = %e, "skipping an unreadable outbox entry"),
            }
        }
        Ok(out)
    }

    fn advance_outbox(&self, consumer: &str, through: u64) -> Result<()> {
        // No entry is applied (nor counted) while the passed ones are.
        let order = self.changes.order.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.changes.cursor(consumer);
        if through <= old {
            return Ok(());
        }
        // Entries passed now (what the consumer just read, normally).
        let mut passed = 0u64;
        let mut from = keys::change(old);
        loop {
            let chunk = self
                .engine()
                .scan(Bound::Excluded(&from), &[keys::CHANGE], PRUNE_CHUNK)?;
            let full = chunk.len() == PRUNE_CHUNK;
            let mut last = None;
            for (k, _) in chunk {
                if keys::seq_of(&k) > through {
                    last = None;
                    break;
                }
                passed += 1;
                last = Some(k);
            }
            match last {
                Some(k) if full => from = k,
                _ => break,
            }
        }
        self.engine().apply(vec![Write::Put(
            keys::cursor(consumer),
            codec::encode(&through)?,
        )])?;
        let lowest = {
            let mut c = self
                .changes
                .consumers
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(e) = c.get_mut(consumer) {
                *e = (through.max(e.0), e.1.saturating_sub(passed));
            }
            c.values().map(|(cursor, _)| *cursor).min().unwrap_or(0)
        };
        // Other processes' consumers of a shared engine are known only by
        // their stored cursors.
        let lowest = if self.engine().shared().is_some() {
            let mut lowest = lowest;
            for (k, v) in self
                .engine()
                .scan(Bound::Unbounded, &[keys::CURSOR], usize::MAX)?
            {
                let name = String::from_utf8_lossy(&k[1..]).into_owned();
                lowest = lowest.min(decode_cursor(&v, &name)?);
            }
            lowest
        } else {
            lowest
        };
        drop(order);
        // Prune what every consumer has passed, in bounded batches.
        loop {
            let chunk = self
                .engine()
                .scan(Bound::Unbounded, &[keys::CHANGE], PRUNE_CHUNK)?;
            let batch: Batch = chunk
                .into_iter()
                .take_while(|(k, _)| keys::seq_of(k) <= lowest)
                .map(|(k, _)| Write::Delete(k))
                .collect();
            if batch.is_empty() {
                break;
            }
            let n = batch.len() as u64;
            self.engine().apply(batch)?;
            let _ = self
                .changes
                .stored
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                    Some(s.saturating_sub(n))
                });
            if n < PRUNE_CHUNK as u64 {
                break;
            }
        }
        self.durable()
    }

    fn outbox_backlog(&self, consumer: &str) -> Result<u64> {
        let _order = self.changes.order.lock().unwrap_or_else(|p| p.into_inner());
        let cursor = self.changes.cursor(consumer);
        if let Some(shared) = self.engine().shared() {
            let from = keys::change(cursor);
            return Ok(shared.count(Bound::Excluded(&from), &[keys::CHANGE])? + shared.staged()?);
        }
        let c = self
            .changes
            .consumers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        c.get(consumer)
            .map(|(_, after)| *after)
            .ok_or_else(|| Error::Internal(format!("outbox consumer {consumer:?} vanished")))
    }
}
