//! Claims of a `KvStore`: which sessions have background work due (a
//! summary, an idle check) and which worker holds each under a lease.
//!
//! sled allows one process per data directory, so this table lives in the
//! process: the runtime rebuilds it at start from the session records (the
//! store's source of truth). A shared database keeps the same table in a
//! table of its own, claimed with `FOR UPDATE SKIP LOCKED`; the port's
//! promises (one holder per item, an expired lease can be taken over,
//! completion fenced by the lease) are the same.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::{Claim, Claims, KvStore, WorkKind};
use crate::error::{Error, Result};
use crate::model::{Trigger, UnixNanos};

type Key = (WorkKind, String, String);

#[derive(Debug)]
struct Item {
    due_at: UnixNanos,
    trigger: Option<Trigger>,
    /// The holder's lease: its token and expiry.
    lease: Option<(u64, UnixNanos)>,
    /// Marked due again while leased: completion keeps it.
    again: bool,
}

/// The in-process claims table.
#[derive(Debug, Default)]
pub(super) struct ClaimTable {
    inner: Mutex<Inner>,
    tokens: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    items: BTreeMap<Key, Item>,
    /// Unleased items by due time (leased ones are found by expiry scan).
    by_due: BTreeSet<(WorkKind, UnixNanos, String, String)>,
}

impl Inner {
    fn unindex(&mut self, key: &Key, due_at: UnixNanos) {
        self.by_due
            .remove(&(key.0, due_at, key.1.clone(), key.2.clone()));
    }

    fn index(&mut self, key: &Key, due_at: UnixNanos) {
        self.by_due
            .insert((key.0, due_at, key.1.clone(), key.2.clone()));
    }
}

impl ClaimTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every change leaves the maps consistent before it can panic.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Claims for ClaimTable {
    fn mark_due(
        &self,
        kind: WorkKind,
        ns: &str,
        session_id: &str,
        due_at: UnixNanos,
        trigger: Option<Trigger>,
    ) -> Result<()> {
        let key = (kind, ns.to_owned(), session_id.to_owned());
        let mut t = self.lock();
        match t.items.get_mut(&key) {
            Some(item) if item.lease.is_some() => {
                item.again = true;
                item.due_at = due_at;
                item.trigger = trigger.or(item.trigger);
            }
            Some(item) => {
                let old = item.due_at;
                item.due_at = due_at;
                item.trigger = trigger.or(item.trigger);
                t.unindex(&key, old);
                t.index(&key, due_at);
            }
            None => {
                t.items.insert(
                    key.clone(),
                    Item {
                        due_at,
                        trigger,
                        lease: None,
                        again: false,
                    },
                );
                t.index(&key, due_at);
            }
        }
        Ok(())
    }

    fn cancel_due(&self, kind: WorkKind, ns: &str, session_id: &str) -> Result<()> {
        let key = (kind, ns.to_owned(), session_id.to_owned());
        let mut t = self.lock();
        if let Some(item) = t.items.remove(&key) {
            if item.lease.is_none() {
                t.unindex(&key, item.due_at);
            }
        }
        Ok(())
    }

    fn claim_due(
        &self,
        kind: WorkKind,
        now: UnixNanos,
        lease_nanos: i64,
        limit: usize,
    ) -> Result<Vec<Claim>> {
        let mut t = self.lock();
        let mut out = Vec::new();
        // Expired leases first: their holder is gone.
        let expired: Vec<Key> = t
            .items
            .iter()
            .filter(|(k, i)| k.0 == kind && i.lease.is_some_and(|(_, until)| until <= now))
            .map(|(k, _)| k.clone())
            .take(limit)
            .collect();
        let due: Vec<Key> = t
            .by_due
            .range((kind, i64::MIN, String::new(), String::new())..)
            .take_while(|(k, at, _, _)| *k == kind && *at <= now)
            .take(limit.saturating_sub(expired.len()))
            .map(|(k, _, ns, id)| (*k, ns.clone(), id.clone()))
            .collect();
        for key in expired.into_iter().chain(due) {
            let token = self.tokens.fetch_add(1, Ordering::Relaxed) + 1;
            let Some(item) = t.items.get_mut(&key) else {
                continue;
            };
            let was_free = item.lease.is_none();
            let due_at = item.due_at;
            item.lease = Some((token, now.saturating_add(lease_nanos)));
            item.again = false;
            let trigger = item.trigger;
            if was_free {
                t.unindex(&key, due_at);
            }
            out.push(Claim {
                kind,
                namespace: key.1,
                session_id: key.2,
                trigger,
                token,
            });
        }
        Ok(out)
    }

    fn complete_claim(&self, claim: &Claim) -> Result<()> {
        let key = (
            claim.kind,
            claim.namespace.clone(),
            claim.session_id.clone(),
        );
        let mut t = self.lock();
        let Some(item) = t.items.get_mut(&key) else {
            return Ok(());
        };
        if item.lease.map(|(token, _)| token) != Some(claim.token) {
            return Err(Error::Aborted(format!(
                "the claim on {}/{} was lost (its lease expired and another worker took it)",
                claim.namespace, claim.session_id
            )));
        }
        if item.again {
            item.lease = None;
            item.again = false;
            let due_at = item.due_at;
            t.index(&key, due_at);
        } else {
            t.items.remove(&key);
        }
        Ok(())
    }

    fn next_due(&self, kind: WorkKind) -> Result<Option<UnixNanos>> {
        let t = self.lock();
        let unleased = t
            .by_due
            .range((kind, i64::MIN, String::new(), String::new())..)
            .next()
            .filter(|(k, ..)| *k == kind)
            .map(|(_, at, ..)| *at);
        let lease_ends = t
            .items
            .iter()
            .filter(|(k, _)| k.0 == kind)
            .filter_map(|(_, i)| i.lease.map(|(_, until)| until))
            .min();
        Ok(match (unleased, lease_ends) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    fn due_count(&self, kind: WorkKind) -> Result<u64> {
        let t = self.lock();
        Ok(t.items.keys().filter(|k| k.0 == kind).count() as u64)
    }
}

impl<E: super::engine::Engine> KvStore<E> {
    /// Where the claims are: the database of a shared engine, else this
    /// process's table.
    fn claims_port(&self) -> &dyn Claims {
        match self.engine().shared() {
            Some(shared) => shared.claims(),
            None => &self.claims,
        }
    }
}

impl<E: super::engine::Engine> Claims for KvStore<E> {
    fn mark_due(
        &self,
        kind: WorkKind,
        ns: &str,
        session_id: &str,
        due_at: UnixNanos,
        trigger: Option<Trigger>,
    ) -> Result<()> {
        self.claims_port()
            .mark_due(kind, ns, session_id, due_at, trigger)
    }

    fn cancel_due(&self, kind: WorkKind, ns: &str, session_id: &str) -> Result<()> {
        self.claims_port().cancel_due(kind, ns, session_id)
    }

    fn claim_due(
        &self,
        kind: WorkKind,
        now: UnixNanos,
        lease_nanos: i64,
        limit: usize,
    ) -> Result<Vec<Claim>> {
        self.claims_port().claim_due(kind, now, lease_nanos, limit)
    }

    fn complete_claim(&self, claim: &Claim) -> Result<()> {
        self.claims_port().complete_claim(claim)
    }

    fn next_due(&self, kind: WorkKind) -> Result<Option<UnixNanos>> {
        self.claims_port().next_due(kind)
    }

    fn due_count(&self, kind: WorkKind) -> Result<u64> {
        self.claims_port().due_count(kind)
    }
}
