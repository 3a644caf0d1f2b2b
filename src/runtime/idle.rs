//! Idle timeouts. Each ACTIVE session's deadline, `last_active_at +
//! idle_timeout_seconds`, is marked in the store's claims (kind `Idle`,
//! due at the deadline); one sweeper task sleeps until the next one is due,
//! claims what is due under a lease and asks the domain to idle each
//! session. The store stays the source of truth: the domain re-reads a
//! session before idling it (one touched since gets its new deadline), and
//! the marks are rebuilt from stored records at start, so a daemon
//! restarted after a deadline still idles the session.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use crate::memory::{Event, Memory, Notifier};
use crate::model::{now_nanos, Session, SessionState};
use crate::store::{Store, WorkKind};

/// Sessions idled per sweep before the sweeper yields.
const IDLE_SWEEP_BATCH: usize = 256;
/// How long a claimed idle check stays leased to the sweeper.
const LEASE: Duration = Duration::from_secs(60);
/// Longest sleep between looks.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Keeps the idle marks in step with the sessions, and wakes the sweeper
/// when an earlier deadline arrives.
pub struct IdleMarks {
    store: Arc<dyn Store>,
    /// Wakes the sweeper.
    pub wake: Notify,
}

impl IdleMarks {
    /// Marks over `store`.
    pub fn new(store: Arc<dyn Store>) -> IdleMarks {
        IdleMarks {
            store,
            wake: Notify::new(),
        }
    }

    /// Marks the session's current deadline (or forgets it when the session
    /// is not ACTIVE).
    pub fn track(&self, s: &Session) {
        let (ns, id) = (&s.namespace, &s.session_id);
        let result = if s.state == SessionState::Active {
            let deadline = s.idle_deadline();
            let earlier = self
                .store
                .next_due(WorkKind::Idle)
                .map_or(true, |next| next.is_none_or(|n| deadline < n));
            let marked = self.store.mark_due(WorkKind::Idle, ns, id, deadline, None);
            if earlier {
                self.wake.notify_one();
            }
            marked
        } else {
            self.store.cancel_due(WorkKind::Idle, ns, id)
        };
        if let Err(e) = result {
            tracing::error!(namespace = %ns, session_id = %id, error = %e, "tracking an idle deadline failed");
        }
    }

    /// Sessions with a deadline marked.
    pub fn len(&self) -> usize {
        self.store.due_count(WorkKind::Idle).unwrap_or(0) as usize
    }

    /// Whether no deadline is marked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Notifier for IdleMarks {
    fn notify(&self, event: &Event<'_>) {
        match event {
            Event::Created { session }
            | Event::Appended { session, .. }
            | Event::Stopped { session, .. } => self.track(session),
            Event::Deleted {
                namespace,
                session_id,
            } => {
                let _ = self.store.cancel_due(WorkKind::Idle, namespace, session_id);
            }
            _ => {}
        }
    }
}

/// The idle sweeper: sleeps until the next deadline (at most a minute, or
/// less when an earlier one arrives), then claims what is due and asks the
/// domain to idle it. Ends when the memory is dropped or the task aborted.
pub async fn sweep(memory: Weak<Memory>, marks: Arc<IdleMarks>) {
    loop {
        let claims = marks
            .store
            .claim_due(
                WorkKind::Idle,
                now_nanos(),
                LEASE.as_nanos() as i64,
                IDLE_SWEEP_BATCH,
            )
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "claiming idle deadlines failed");
                Vec::new()
            });
        let more = claims.len() == IDLE_SWEEP_BATCH;
        if !claims.is_empty() {
            let Some(memory) = memory.upgrade() else {
                return;
            };
            for claim in claims {
                let (ns, id) = (&claim.namespace, &claim.session_id);
                match memory.idle_session(ns, id).await {
                    // Touched since: its new deadline is marked before the
                    // claim ends, so it stays. (Idled ones are unmarked
                    // through the event.)
                    Ok(Some(s)) => marks.track(&s),
                    Ok(None) => {
                        let _ = marks.store.cancel_due(WorkKind::Idle, ns, id);
                    }
                    Err(e) => {
                        tracing::error!(namespace = %ns, session_id = %id, error = %e, "idling a session failed");
                    }
                }
                if let Err(e) = marks.store.complete_claim(&claim) {
                    tracing::warn!(namespace = %ns, session_id = %id, error = %e, "idle claim lost");
                }
            }
        }
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        let wait = match marks.store.next_due(WorkKind::Idle) {
            Ok(Some(at)) => Duration::from_nanos(
                at.saturating_sub(now_nanos())
                    .clamp(1_000_000, MAX_SLEEP.as_nanos() as i64) as u64,
            ),
            _ => MAX_SLEEP,
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = marks.wake.notified() => {}
        }
        if memory.strong_count() == 0 {
            return;
        }
    }
}
