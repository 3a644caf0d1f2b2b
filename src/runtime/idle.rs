//! Idle timeouts. Each ACTIVE session has a deadline, `last_active_at +
//! idle_timeout_seconds`, taken from its stored record; this tracker keeps
//! the deadlines in order so one sweeper task sleeps until the earliest.
//! The store stays the source of truth: the sweeper re-reads a session
//! before idling it, and the tracker is rebuilt from stored records at
//! start, so a daemon restarted after a deadline still idles the session.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use tokio::sync::Notify;

use std::sync::{Arc, Weak};

use crate::memory::{Event, Memory, Notifier};
use crate::model::{now_nanos, Session, SessionState, UnixNanos};

type Key = (String, String);

#[derive(Default)]
struct Inner {
    by_deadline: BTreeSet<(UnixNanos, Key)>,
    deadline_of: HashMap<Key, UnixNanos>,
}

/// Deadlines of ACTIVE sessions, earliest first. Memory: one entry per
/// ACTIVE session.
#[derive(Default)]
pub struct IdleTracker {
    inner: Mutex<Inner>,
    /// Wakes the sweeper when an earlier deadline arrives.
    pub wake: Notify,
}

impl IdleTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the session's current deadline (or forgets it when the
    /// session is not ACTIVE).
    pub fn track(&self, s: &Session) {
        let key = (s.namespace.clone(), s.session_id.clone());
        let mut inner = self.lock();
        if let Some(old) = inner.deadline_of.remove(&key) {
            inner.by_deadline.remove(&(old, key.clone()));
        }
        if s.state != SessionState::Active {
            return;
        }
        let deadline = s.idle_deadline();
        let earliest = inner.by_deadline.first().is_none_or(|(d, _)| deadline < *d);
        inner.deadline_of.insert(key.clone(), deadline);
        inner.by_deadline.insert((deadline, key));
        drop(inner);
        if earliest {
            self.wake.notify_one();
        }
    }

    /// Forgets a session (deleted).
    pub fn forget(&self, ns: &str, session_id: &str) {
        let key = (ns.to_owned(), session_id.to_owned());
        let mut inner = self.lock();
        if let Some(old) = inner.deadline_of.remove(&key) {
            inner.by_deadline.remove(&(old, key));
        }
    }

    /// Removes and returns the sessions whose deadline is at or before
    /// `now`, at most `limit`.
    pub fn take_due(&self, now: UnixNanos, limit: usize) -> Vec<Key> {
        let mut inner = self.lock();
        let mut out = Vec::new();
        while out.len() < limit {
            match inner.by_deadline.first() {
                Some((d, _)) if *d <= now => {}
                _ => break,
            }
            if let Some((_, key)) = inner.by_deadline.pop_first() {
                inner.deadline_of.remove(&key);
                out.push(key);
            }
        }
        out
    }

    /// The earliest deadline, if any session is tracked.
    pub fn next_deadline(&self) -> Option<UnixNanos> {
        self.lock().by_deadline.first().map(|(d, _)| *d)
    }

    /// Sessions tracked.
    pub fn len(&self) -> usize {
        self.lock().deadline_of.len()
    }

    /// Whether no session is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Sessions idled per sweep before the sweeper yields.
const IDLE_SWEEP_BATCH: usize = 256;

impl Notifier for IdleTracker {
    fn notify(&self, event: &Event<'_>) {
        match event {
            Event::Created { session }
            | Event::Appended { session, .. }
            | Event::Stopped { session, .. } => self.track(session),
            Event::Deleted {
                namespace,
                session_id,
            } => self.forget(namespace, session_id),
            _ => {}
        }
    }
}

/// The idle sweeper: sleeps until the earliest tracked deadline (or a
/// minute, or an earlier deadline arriving), then asks the domain to idle
/// what is due. Ends when the memory is dropped or the task is aborted.
pub async fn sweep(memory: Weak<Memory>, idle: Arc<IdleTracker>) {
    loop {
        let now = now_nanos();
        let due = idle.take_due(now, IDLE_SWEEP_BATCH);
        let more = due.len() == IDLE_SWEEP_BATCH;
        if !due.is_empty() {
            let Some(memory) = memory.upgrade() else {
                return;
            };
            for (ns, id) in due {
                match memory.idle_session(&ns, &id).await {
                    // Touched since: track its new deadline. (Idled ones
                    // are tracked through the event.)
                    Ok(Some(s)) => idle.track(&s),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::error!(namespace = %ns, session_id = %id, error = %e, "idling a session failed");
                    }
                }
            }
        }
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        let wait_ns = idle.next_deadline().map_or(60_000_000_000, |d| {
            d.saturating_sub(now_nanos())
                .clamp(1_000_000, 60_000_000_000)
        });
        let wait = std::time::Duration::from_nanos(wait_ns as u64);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = idle.wake.notified() => {}
        }
        if memory.strong_count() == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SessionSettings;

    fn session(id: &str, last_active: UnixNanos, timeout_s: u32) -> Session {
        let settings = SessionSettings {
            idle_timeout_seconds: timeout_s,
            ..Default::default()
        };
        let mut s = Session::new("ns", id, settings, last_active);
        s.last_active_at = last_active;
        s
    }

    #[test]
    fn deadlines_come_out_in_order_and_track_replaces() {
        let t = IdleTracker::default();
        let sec = 1_000_000_000;
        t.track(&session("a", 0, 10));
        t.track(&session("b", 0, 5));
        t.track(&session("c", 0, 20));
        assert_eq!(t.next_deadline(), Some(5 * sec));
        // An append to b moves its deadline.
        t.track(&session("b", 30 * sec, 5));
        assert_eq!(t.take_due(12 * sec, 10), vec![("ns".into(), "a".into())]);
        assert_eq!(t.take_due(30 * sec, 10), vec![("ns".into(), "c".into())]);
        let mut closed = session("b", 0, 5);
        closed.state = SessionState::Closed;
        t.track(&closed);
        assert!(t.is_empty());
        assert_eq!(t.take_due(i64::MAX, 10), Vec::<Key>::new());
    }
}
