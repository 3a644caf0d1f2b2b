//! Following other daemons' writes, for a store shared by several daemons
//! (PostgreSQL): watchers of a session on this daemon must see turns,
//! summaries and state changes made through any daemon, in order, exactly
//! once. The store's `listen` (LISTEN/NOTIFY) wakes the follower for one
//! session as soon as another daemon commits a change to it; a poll of
//! every watched session each second is the fallback, since notifications
//! are lost while the connection is down. Either way the follower re-reads
//! the session and publishes what its watchers were not told yet; the
//! watchers read the turns themselves, by seq, so a notice seen twice or
//! late loses and repeats nothing. Other daemons' writes also wake the
//! search indexer, which follows the shared outbox.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::indexer::Indexer;
use super::watch::{Notice, SummaryWritten, WatchHub};
use crate::error::Error;
use crate::memory::Memory;

/// How often every watched session is re-read.
const POLL: Duration = Duration::from_secs(1);
/// Wake-ups buffered between the listening thread and the follower (more
/// are dropped: the poll catches up).
const WAKE_BUFFER: usize = 1024;

/// The follower: its task and the store's listener; both stop on drop.
pub struct Follower {
    task: tokio::task::JoinHandle<()>,
    _listener: Option<Box<dyn Send>>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts following; `None` when the store is this daemon's alone.
pub fn follow(
    memory: &Arc<Memory>,
    hub: &Arc<WatchHub>,
    indexer: &Arc<Indexer>,
) -> Option<Follower> {
    let store = memory.store();
    if !store.is_shared() {
        return None;
    }
    let (tx, rx) = mpsc::channel::<(String, String)>(WAKE_BUFFER);
    let wake_indexer = indexer.clone();
    let listener = store.listen(Arc::new(move |topic: &str| {
        wake_indexer.nudge();
        if let Some((ns, id)) = topic.split_once('\t') {
            let _ = tx.try_send((ns.to_owned(), id.to_owned()));
        }
    }));
    let task = tokio::spawn(run(Arc::downgrade(memory), hub.clone(), rx));
    Some(Follower {
        task,
        _listener: listener,
    })
}

async fn run(
    memory: std::sync::Weak<Memory>,
    hub: Arc<WatchHub>,
    mut wakes: mpsc::Receiver<(String, String)>,
) {
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let keys = tokio::select! {
            _ = tick.tick() => hub.watched(),
            Some(key) = wakes.recv() => vec![key],
        };
        let Some(memory) = memory.upgrade() else {
            return;
        };
        for (ns, id) in keys {
            if let Err(e) = reconcile(&memory, &hub, &ns, &id).await {
                tracing::debug!(namespace = %ns, session_id = %id, error = %e, "cannot re-read a watched session yet");
            }
        }
    }
}

/// Re-reads one watched session and publishes what its watchers were not
/// told yet.
async fn reconcile(memory: &Memory, hub: &WatchHub, ns: &str, id: &str) -> crate::Result<()> {
    let Some(before) = hub.known(ns, id) else {
        return Ok(());
    };
    let session = match memory.get_session(ns, id).await {
        Ok(s) => s,
        Err(Error::NotFound(_)) => {
            hub.publish(ns, id, Notice::Deleted);
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let summary = if session.summary.version > before.summary_version {
        Some(SummaryWritten::of(
            &memory.get_summary(ns, id, session.summary.version).await?,
        ))
    } else {
        None
    };
    // A notice published here meanwhile may be newer than what was read.
    let Some(known) = hub
        .known(ns, id)
        .filter(|k| k.published == before.published)
    else {
        return Ok(());
    };
    let last = session.last_seq();
    if last < known.last_seq {
        hub.publish(ns, id, Notice::Removed { seq: last + 1 });
    }
    if last > known.last_seq {
        hub.publish(ns, id, Notice::Appended { last_seq: last });
    }
    if session.state != known.state {
        hub.publish(
            ns,
            id,
            Notice::State {
                state: session.state,
                at_seq: last,
            },
        );
    }
    if let Some(s) = summary {
        hub.publish(ns, id, Notice::Summary(s));
    }
    Ok(())
}
