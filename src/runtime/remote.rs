//! Following other daemons' writes, for a store shared by several daemons
//! (PostgreSQL): watchers of a session on this daemon must see turns,
//! summaries and state changes made through any daemon, in order, exactly
//! once. The store's `listen` (LISTEN/NOTIFY) wakes the follower for one
//! session as soon as another daemon commits a change to it; a poll of
//! every watched session each second is the fallback, since notifications
//! are lost while the connection is down. Either way the follower re-reads
//! the session and publishes what its watchers were not told yet; the
//! watchers read the turns themselves, by seq, so a notice seen twice or
//! late loses and repeats nothing. A removal is told by the session's count
//! of removed turns, so one followed by an append (the seq refilled) before
//! the re-read is still seen as a removal. Other daemons' writes also wake the
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
    // Removals another daemon made: each took the last turn of its time,
    // so none took a seq below `known.last_seq + 1 - removed`. Appends may
    // have refilled the seqs since, so the count, not the last seq, tells.
    let removed = session.removed_turns.saturating_sub(known.removed_turns);
    let told_through = if removed > 0 {
        let from = (known.last_seq + 1)
            .saturating_sub(removed)
            .max(1)
            .min(last + 1);
        hub.publish(ns, id, Notice::Removed { seq: from });
        hub.told_removals(ns, id, session.removed_turns);
        from - 1
    } else if last < known.last_seq {
        hub.publish(ns, id, Notice::Removed { seq: last + 1 });
        last
    } else {
        known.last_seq
    };
    if last > told_through {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::memory::{AppendRequest, NewSession, Parts};
    use crate::model::{NewTurn, Role, SessionSettings};
    use crate::search::SearchIndex;
    use crate::store::MemoryStore;

    fn turn(text: &str) -> AppendRequest {
        AppendRequest {
            turns: vec![NewTurn {
                role: Role::User,
                speaker: "ada".into(),
                content: text.into(),
                client_time: None,
                tool_call: None,
                metadata: BTreeMap::new(),
            }],
            idempotency_key: None,
            expected_next_seq: None,
            lease_epoch: None,
        }
    }

    /// What this daemon's watchers hear when another daemon (here: writes
    /// that no listener of this hub heard) removed the last turn and
    /// appended another before the re-read.
    #[tokio::test]
    async fn a_removal_refilled_before_the_re_read_is_told_as_a_removal() {
        let (search, _) = SearchIndex::open(None).expect("index");
        let memory = Memory::new(Parts {
            store: Arc::new(MemoryStore::default()),
            search: Arc::new(search),
            limits: Default::default(),
            summaries: Default::default(),
            summarizer: Arc::new(crate::summarize::RuleBased),
            notifier: Arc::new(crate::memory::events::Nobody),
            search_consumer: "search".into(),
        });
        memory
            .create_session(NewSession {
                namespace: "ns".into(),
                session_id: Some("s".into()),
                subject_id: String::new(),
                title: String::new(),
                metadata: BTreeMap::new(),
                settings: SessionSettings::default(),
                owner_agent: String::new(),
            })
            .await
            .expect("created");
        for text in ["one", "two", "three"] {
            memory
                .append_turns("ns", "s", turn(text))
                .await
                .expect("appended");
        }
        let hub = Arc::new(WatchHub::new(16, 4));
        let mut sub = hub.subscribe("ns", "s").expect("subscribed");
        hub.observe(
            "ns",
            "s",
            &memory.get_session("ns", "s").await.expect("read"),
        );

        memory
            .remove_last_turn("ns", "s", Some(3), None)
            .await
            .expect("removed");
        memory
            .append_turns("ns", "s", turn("three again"))
            .await
            .expect("appended");
        reconcile(&memory, &hub, "ns", "s")
            .await
            .expect("reconciled");
        let wait = std::time::Duration::from_secs(5);
        let removed = tokio::time::timeout(wait, sub.recv())
            .await
            .expect("a notice in time");
        assert!(
            matches!(removed, Ok(Notice::Removed { seq: 3 })),
            "{removed:?}"
        );
        let appended = tokio::time::timeout(wait, sub.recv())
            .await
            .expect("a notice in time");
        assert!(
            matches!(appended, Ok(Notice::Appended { last_seq: 3 })),
            "{appended:?}"
        );
        // Told once: a second re-read tells nothing more.
        reconcile(&memory, &hub, "ns", "s")
            .await
            .expect("reconciled");
        assert_eq!(hub.known("ns", "s").map(|k| k.removed_turns), Some(1));
        let more = tokio::time::timeout(std::time::Duration::from_millis(50), sub.recv()).await;
        assert!(more.is_err(), "nothing more was told: {more:?}");
    }
}
