//! Live watching of sessions. The domain's events become small notices
//! ("turns up to seq N are durable", "summary v written", "state
//! changed") on a bounded per-session broadcast channel (the hub is a
//! `Notifier`); each watcher's task turns them into events, reading turns
//! through the domain in seq order. So every watcher sees
//! every turn exactly once and in order, turns are sent only once durable,
//! and memory per watcher is bounded (the notice ring and an outgoing
//! buffer). A watcher whose notices overflow is disconnected with the seq to
//! resume from; nothing is lost for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, mpsc};

use crate::error::{Error, Result};
use crate::memory::handoff::HandoffEvent;
use crate::memory::{validate, Event, Memory, Notifier};
use crate::model::{SessionState, Trigger, Turn};

/// What writers publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Turns through `last_seq` are durable.
    Appended {
        /// The newest durable turn.
        last_seq: u64,
    },
    /// A summary was written (and is durable).
    Summary(SummaryWritten),
    /// The session's state changed.
    State {
        /// The new state.
        state: SessionState,
        /// The newest turn at the change.
        at_seq: u64,
    },
    /// The session was deleted.
    Deleted,
    /// The turn with this seq (the last) was removed.
    Removed {
        /// Its seq, which the next append reuses.
        seq: u64,
    },
}

/// A summary notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryWritten {
    /// The new version.
    pub version: u64,
    /// The last turn it covers.
    pub covers_through_seq: u64,
    /// Its trigger.
    pub trigger: Trigger,
}

impl SummaryWritten {
    /// The notice of a stored summary.
    pub fn of(s: &crate::summarize::SessionSummary) -> SummaryWritten {
        SummaryWritten {
            version: s.version,
            covers_through_seq: s.covers_through_seq,
            trigger: s.trigger,
        }
    }
}

/// One event of a watched session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// A durable turn.
    Turn(Box<Turn>),
    /// A summary was written.
    Summary(SummaryWritten),
    /// The session was handed off (right after its event turn).
    Handoff(HandoffEvent),
    /// The session's state changed.
    State {
        /// The new state.
        state: SessionState,
        /// The newest turn at the change.
        at_seq: u64,
    },
}

type Key = (String, String);

/// What a session's watchers were last told: where a shared store's
/// follower starts from when it reconciles with another daemon's writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// The newest turn announced.
    pub last_seq: u64,
    /// The state announced.
    pub state: SessionState,
    /// The newest summary version announced.
    pub summary_version: u64,
    /// Notices published so far (a reconciliation that read the session
    /// before the newest of them is stale and is dropped).
    pub published: u64,
    /// The session's count of removed turns the watchers were told of.
    pub removed_turns: u64,
}

impl Known {
    fn apply(&mut self, notice: &Notice) {
        self.published += 1;
        match notice {
            Notice::Appended { last_seq } => self.last_seq = self.last_seq.max(*last_seq),
            Notice::State { state, .. } => self.state = *state,
            Notice::Summary(s) => self.summary_version = self.summary_version.max(s.version),
            Notice::Removed { seq } => {
                self.last_seq = seq.saturating_sub(1);
                self.removed_turns += 1;
            }
            Notice::Deleted => {}
        }
    }
}

struct Channel {
    tx: broadcast::Sender<Notice>,
    known: Option<Known>,
}

struct Inner {
    channels: HashMap<Key, Channel>,
    per_namespace: HashMap<String, usize>,
    /// Of those, the observers' (people's views, not agents).
    observers_per_namespace: HashMap<String, usize>,
}

/// The registry of watched sessions.
pub struct WatchHub {
    inner: Mutex<Inner>,
    /// Notices buffered per session (shared by its watchers).
    capacity: usize,
    /// Open watches allowed per namespace.
    max_per_namespace: usize,
    /// Of those, most observers may hold: the rest is the agents'.
    max_observers_per_namespace: usize,
    /// Set at shutdown: watch tasks end their streams.
    closing: tokio::sync::watch::Sender<bool>,
}

/// A watcher's registration; unregisters on drop.
pub struct Subscription {
    hub: Arc<WatchHub>,
    key: Key,
    observer: bool,
    rx: Option<broadcast::Receiver<Notice>>,
    closing: tokio::sync::watch::Receiver<bool>,
}

impl WatchHub {
    /// A hub buffering `capacity` notices per session and allowing
    /// `max_per_namespace` open watches per namespace, half of them at
    /// most to observers.
    pub fn new(capacity: usize, max_per_namespace: usize) -> WatchHub {
        WatchHub::with_observers(capacity, max_per_namespace, max_per_namespace / 2)
    }

    /// As [`WatchHub::new`], with at most `max_observers_per_namespace` of
    /// a namespace's watches held by observers.
    pub fn with_observers(
        capacity: usize,
        max_per_namespace: usize,
        max_observers_per_namespace: usize,
    ) -> WatchHub {
        WatchHub {
            inner: Mutex::new(Inner {
                channels: HashMap::new(),
                per_namespace: HashMap::new(),
                observers_per_namespace: HashMap::new(),
            }),
            capacity: capacity.max(1),
            max_per_namespace,
            max_observers_per_namespace,
            closing: tokio::sync::watch::channel(false).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes a notice to the session's watchers, if any. Never blocks.
    pub fn publish(&self, ns: &str, session_id: &str, notice: Notice) {
        let mut inner = self.lock();
        if let Some(ch) = inner
            .channels
            .get_mut(&(ns.to_owned(), session_id.to_owned()))
        {
            if let Some(k) = ch.known.as_mut() {
                // A state already announced is not announced again: on a
                // shared store this daemon's change and the follower's
                // re-read of it (`remote.rs`) may both publish it, in
                // either order.
                if matches!(notice, Notice::State { state, .. } if state == k.state) {
                    return;
                }
                k.apply(&notice);
            }
            // No receiver left is not an error: the last one is leaving.
            let _ = ch.tx.send(notice);
        }
    }

    /// Records what a new watcher read, for a session whose watchers have
    /// no record yet.
    pub fn observe(&self, ns: &str, session_id: &str, session: &crate::model::Session) {
        let mut inner = self.lock();
        if let Some(ch) = inner
            .channels
            .get_mut(&(ns.to_owned(), session_id.to_owned()))
        {
            ch.known.get_or_insert(Known {
                last_seq: session.last_seq(),
                state: session.state,
                summary_version: session.summary.version,
                published: 0,
                removed_turns: session.removed_turns,
            });
        }
    }

    /// Records that the watchers of a session were told of its removals
    /// up to the session's count `total` (several removals can be told as
    /// one notice).
    pub fn told_removals(&self, ns: &str, session_id: &str, total: u64) {
        let mut inner = self.lock();
        if let Some(k) = inner
            .channels
            .get_mut(&(ns.to_owned(), session_id.to_owned()))
            .and_then(|ch| ch.known.as_mut())
        {
            k.removed_turns = k.removed_turns.max(total);
        }
    }

    /// What the watchers of a session were last told (`None` when it is
    /// not watched or not observed yet).
    pub fn known(&self, ns: &str, session_id: &str) -> Option<Known> {
        self.lock()
            .channels
            .get(&(ns.to_owned(), session_id.to_owned()))
            .and_then(|ch| ch.known)
    }

    /// The sessions being watched.
    pub fn watched(&self) -> Vec<(String, String)> {
        self.lock().channels.keys().cloned().collect()
    }

    /// Registers a watcher; `RESOURCE_EXHAUSTED` over the namespace's cap.
    pub fn subscribe(self: &Arc<Self>, ns: &str, session_id: &str) -> Result<Subscription> {
        self.subscribe_as(ns, session_id, false)
    }

    /// Registers a watcher, an `observer` (a person's view) or an agent;
    /// `RESOURCE_EXHAUSTED` over the namespace's cap, or for an observer
    /// over the observers' share of it.
    pub fn subscribe_as(
        self: &Arc<Self>,
        ns: &str,
        session_id: &str,
        observer: bool,
    ) -> Result<Subscription> {
        if *self.closing.borrow() {
            return Err(Error::Unavailable("the daemon is shutting down".into()));
        }
        let mut inner = self.lock();
        let open = inner.per_namespace.get(ns).copied().unwrap_or(0);
        if open >= self.max_per_namespace {
            return Err(Error::ResourceExhausted(format!(
                "namespace {ns:?} has {open} open watches, the limit (max_watches_per_namespace); close one first"
            )));
        }
        if observer {
            let observing = inner.observers_per_namespace.get(ns).copied().unwrap_or(0);
            if observing >= self.max_observers_per_namespace {
                return Err(Error::ResourceExhausted(format!(
                    "namespace {ns:?} has {observing} open observer watches (inspector live pages), \
                     their share (max_observer_watches_per_namespace); the rest is kept for agents: \
                     close a live page first"
                )));
            }
            *inner
                .observers_per_namespace
                .entry(ns.to_owned())
                .or_default() += 1;
        }
        *inner.per_namespace.entry(ns.to_owned()).or_default() += 1;
        let key = (ns.to_owned(), session_id.to_owned());
        let rx = inner
            .channels
            .entry(key.clone())
            .or_insert_with(|| Channel {
                tx: broadcast::channel(self.capacity).0,
                known: None,
            })
            .tx
            .subscribe();
        Ok(Subscription {
            hub: self.clone(),
            key,
            observer,
            rx: Some(rx),
            closing: self.closing.subscribe(),
        })
    }

    /// Open watches of a namespace.
    pub fn open_watches(&self, ns: &str) -> usize {
        self.lock().per_namespace.get(ns).copied().unwrap_or(0)
    }

    /// Open watches of every namespace.
    pub fn total_watches(&self) -> usize {
        self.lock().per_namespace.values().sum()
    }

    /// Tells every watch task to end its stream (daemon shutdown).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }
}

impl Subscription {
    /// A receiver that changes when the daemon starts shutting down.
    pub fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.clone()
    }

    /// The next notice. `Err(Lagged)` when notices were dropped because
    /// this watcher fell behind.
    pub async fn recv(&mut self) -> std::result::Result<Notice, broadcast::error::RecvError> {
        match self.rx.as_mut() {
            Some(rx) => rx.recv().await,
            None => Err(broadcast::error::RecvError::Closed),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut inner = self.hub.lock();
        drop(self.rx.take());
        if let Some(ch) = inner.channels.get(&self.key) {
            if ch.tx.receiver_count() == 0 {
                inner.channels.remove(&self.key);
            }
        }
        if let Some(n) = inner.per_namespace.get_mut(&self.key.0) {
            *n -= 1;
            if *n == 0 {
                inner.per_namespace.remove(&self.key.0);
            }
        }
        if self.observer {
            if let Some(n) = inner.observers_per_namespace.get_mut(&self.key.0) {
                *n -= 1;
                if *n == 0 {
                    inner.observers_per_namespace.remove(&self.key.0);
                }
            }
        }
    }
}

/// How long a watch task waits to deliver the status that ends its stream.
const FINAL_SEND: std::time::Duration = std::time::Duration::from_secs(5);
/// Events buffered between a watch task and its gRPC stream.
const OUTGOING: usize = 32;
/// Turns read per store call by a watch task.
const READ_CHUNK: usize = 256;

/// The stream of a watcher: events, then at most one error that ends it.
pub type WatchStream = mpsc::Receiver<Result<WatchEvent>>;

/// Watches a session: replays from `from_seq` (0 = live only), then
/// streams live events. Returns the stream and the seq of the first turn
/// it will carry (`from_seq`, or for a live-only watch the seq the next
/// append will get), so a client can resume without a gap. Errors before
/// the first event (unknown session, too many watches) are returned
/// directly.
pub async fn watch(
    memory: &Arc<Memory>,
    hub: &Arc<WatchHub>,
    ns: &str,
    session_id: &str,
    from_seq: u64,
    observer: bool,
) -> Result<(WatchStream, u64)> {
    validate::id("namespace", ns)?;
    validate::id("session_id", session_id)?;
    // Subscribe before reading, so nothing falls between the replay and
    // the live notices.
    let sub = hub.subscribe_as(ns, session_id, observer)?;
    let session = memory.get_session(ns, session_id).await?;
    hub.observe(ns, session_id, &session);
    // Everything through the snapshot is durable before it is sent (a
    // reader can see a write whose sync is still running).
    memory.flush().await?;
    let head = session.last_seq();
    let (next_turn, summaries_from) = if from_seq == 0 {
        (head + 1, session.summary.version + 1)
    } else {
        (
            from_seq,
            memory
                .first_summary_covering(ns, session_id, from_seq, session.summary.version)
                .await?,
        )
    };
    let (tx, rx) = mpsc::channel(OUTGOING);
    let watcher = Watcher {
        memory: memory.clone(),
        ns: ns.to_owned(),
        session_id: session_id.to_owned(),
        closing: sub.closing(),
        sub,
        tx,
        next_turn,
        next_summary: summaries_from,
    };
    tokio::spawn(watcher.run(head, session.summary.version));
    Ok((rx, next_turn))
}

/// One watcher's task.
struct Watcher {
    memory: Arc<Memory>,
    ns: String,
    session_id: String,
    sub: Subscription,
    closing: tokio::sync::watch::Receiver<bool>,
    tx: mpsc::Sender<Result<WatchEvent>>,
    /// The next turn to send.
    next_turn: u64,
    /// The next summary version to send.
    next_summary: u64,
}

/// Why a watcher stops.
enum Stop {
    /// The client went away.
    Gone,
    /// End the stream with this error.
    Fail(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Fail(e)
    }
}

impl Watcher {
    async fn run(mut self, head: u64, latest_summary: u64) {
        let result = self.serve(head, latest_summary).await;
        if let Err(Stop::Fail(e)) = result {
            // The closing status waits for room in the outgoing buffer, but
            // not forever: a client that stopped reading must not keep this
            // task (and the store it holds) alive.
            let _ = tokio::time::timeout(FINAL_SEND, self.tx.send(Err(e))).await;
        }
    }

    async fn serve(&mut self, head: u64, latest_summary: u64) -> std::result::Result<(), Stop> {
        // Replay: the stored turns through `head`, each stored summary
        // right after the last turn it covers.
        let mut pending: Option<SummaryWritten> = None;
        loop {
            if pending.is_none() && self.next_summary <= latest_summary {
                let s = self
                    .memory
                    .get_summary(&self.ns, &self.session_id, self.next_summary)
                    .await?;
                pending = Some(SummaryWritten::of(&s));
            }
            match pending.take() {
                Some(s) if s.covers_through_seq < self.next_turn => {
                    self.next_summary = s.version + 1;
                    self.emit(WatchEvent::Summary(s)).await?;
                }
                Some(s) if self.next_turn <= head => {
                    self.turns_through(s.covers_through_seq.min(head)).await?;
                    pending = Some(s);
                }
                None if self.next_turn <= head => self.turns_through(head).await?,
                _ => break,
            }
        }
        // Live.
        loop {
            enum Woke {
                Notice(std::result::Result<Notice, broadcast::error::RecvError>),
                Closing,
                Gone,
            }
            let woke = tokio::select! {
                n = self.sub.recv() => Woke::Notice(n),
                _ = self.closing.changed() => Woke::Closing,
                () = self.tx.closed() => Woke::Gone,
            };
            let notice = match woke {
                Woke::Notice(n) => n,
                Woke::Closing => return Err(self.shutting_down()),
                Woke::Gone => return Err(Stop::Gone),
            };
            match notice {
                Ok(Notice::Appended { last_seq }) => self.turns_through(last_seq).await?,
                Ok(Notice::Summary(s)) => {
                    self.turns_through(s.covers_through_seq).await?;
                    if s.version >= self.next_summary {
                        self.next_summary = s.version + 1;
                        self.emit(WatchEvent::Summary(s)).await?;
                    }
                }
                Ok(Notice::State { state, at_seq }) => {
                    self.turns_through(at_seq).await?;
                    self.emit(WatchEvent::State { state, at_seq }).await?;
                }
                // A watcher that already sent the removed turn ends, so that
                // it never misses the turn that takes the seq next.
                Ok(Notice::Removed { seq }) if seq < self.next_turn => {
                    return Err(Stop::Fail(Error::Aborted(format!(
                        "turn {seq} of session {}/{} was removed; watch again with from_seq={seq}",
                        self.ns, self.session_id
                    ))))
                }
                Ok(Notice::Removed { .. }) => {}
                Ok(Notice::Deleted) => {
                    return Err(Stop::Fail(Error::session_not_found(
                        &self.ns,
                        &self.session_id,
                    )))
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Err(Stop::Fail(Error::Lagged {
                        resume_from_seq: self.next_turn,
                    }))
                }
                Err(broadcast::error::RecvError::Closed) => return Err(self.shutting_down()),
            }
        }
    }

    fn shutting_down(&self) -> Stop {
        Stop::Fail(Error::Unavailable(format!(
            "the daemon is shutting down; watch again with from_seq={}",
            self.next_turn
        )))
    }

    /// Sends one event, giving up when the client leaves or the daemon
    /// shuts down (a full buffer never blocks shutdown).
    async fn emit(&mut self, event: WatchEvent) -> std::result::Result<(), Stop> {
        let sent = tokio::select! {
            r = self.tx.send(Ok(event)) => Some(r.is_ok()),
            _ = self.closing.changed() => None,
        };
        match sent {
            Some(true) => Ok(()),
            Some(false) => Err(Stop::Gone),
            None => Err(self.shutting_down()),
        }
    }

    /// Sends the turns from `next_turn` through `to` (a handoff event
    /// after each handoff turn), reading them from the store in chunks.
    async fn turns_through(&mut self, to: u64) -> std::result::Result<(), Stop> {
        while self.next_turn <= to {
            let (page, _) = self
                .memory
                .list_turns(
                    &self.ns,
                    &self.session_id,
                    self.next_turn,
                    Some(to),
                    READ_CHUNK as u32,
                    "",
                    0,
                )
                .await?;
            if page.items.is_empty() {
                // Turns through `to` were durable when announced, and seqs
                // are gap-free: missing ones mean damage, not a race.
                return Err(Stop::Fail(Error::DataLoss(format!(
                    "turns {}..={to} of session {}/{} are missing",
                    self.next_turn, self.ns, self.session_id
                ))));
            }
            for t in page.items {
                let handoff = HandoffEvent::from_turn(&t);
                self.next_turn = t.seq + 1;
                self.emit(WatchEvent::Turn(Box::new(t))).await?;
                if let Some(h) = handoff {
                    self.emit(WatchEvent::Handoff(h)).await?;
                }
            }
        }
        Ok(())
    }
}

impl Notifier for WatchHub {
    fn notify(&self, event: &Event<'_>) {
        match *event {
            Event::Appended {
                session,
                first_seq,
                last_seq,
                previous_state,
            } => {
                let (ns, id) = (&session.namespace, &session.session_id);
                if previous_state != session.state {
                    self.publish(
                        ns,
                        id,
                        Notice::State {
                            state: session.state,
                            at_seq: first_seq - 1,
                        },
                    );
                }
                self.publish(ns, id, Notice::Appended { last_seq });
            }
            Event::Stopped {
                session,
                changed: true,
            } => self.publish(
                &session.namespace,
                &session.session_id,
                Notice::State {
                    state: session.state,
                    at_seq: session.last_seq(),
                },
            ),
            Event::Deleted {
                namespace,
                session_id,
            } => self.publish(namespace, session_id, Notice::Deleted),
            Event::TurnRemoved { session, seq } => self.publish(
                &session.namespace,
                &session.session_id,
                Notice::Removed { seq },
            ),
            Event::SummaryWritten {
                namespace,
                session_id,
                summary,
            } => self.publish(
                namespace,
                session_id,
                Notice::Summary(SummaryWritten::of(summary)),
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Session, SessionSettings};

    #[test]
    fn a_state_change_is_announced_once() {
        let hub = Arc::new(WatchHub::new(16, 4));
        let mut sub = hub.subscribe("ns", "s").expect("subscribed");
        let session = Session::new("ns", "s", SessionSettings::default(), 0);
        hub.observe("ns", "s", &session);
        let closed = Notice::State {
            state: SessionState::Closed,
            at_seq: 3,
        };
        // The follower's re-read, then this daemon's own notice of it.
        hub.publish("ns", "s", closed.clone());
        hub.publish("ns", "s", closed.clone());
        hub.publish("ns", "s", Notice::Deleted);
        let rx = sub.rx.as_mut().expect("a receiver");
        assert_eq!(rx.try_recv().ok(), Some(closed));
        assert_eq!(rx.try_recv().ok(), Some(Notice::Deleted));
        assert!(rx.try_recv().is_err());
    }
}
