//! Wake-ups from other daemons: a thread holding one connection of its
//! own (outside the pool) `LISTEN`s on the watch channel and hands each
//! payload (a session's watch topic) to a callback. Notifications are only
//! a wake-up: they are lost while the connection is down, so callers also
//! poll; the thread reconnects with backoff until it is stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use fallible_iterator::FallibleIterator;

use super::txn::WATCH_CHANNEL;
use super::PgEngine;
use crate::store::engine::OnChange;

/// The listening thread; stops (within a second) when dropped.
pub struct Listener {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl PgEngine {
    /// Starts listening; `on_change` runs on the listening thread.
    pub fn listen(&self, on_change: OnChange) -> Listener {
        let stop = Arc::new(AtomicBool::new(false));
        let connect = self.connect_fn();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mnemo-pg-listen".into())
            .spawn(move || {
                let mut backoff = Duration::from_millis(100);
                while !flag.load(Ordering::Relaxed) {
                    match connect() {
                        Ok(mut client) => {
                            backoff = Duration::from_millis(100);
                            if let Err(e) = listen_on(&mut client, &flag, &on_change) {
                                tracing::warn!(error = %e, "lost the PostgreSQL LISTEN connection; watchers fall back to polling until it is back");
                            }
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, "cannot open the PostgreSQL LISTEN connection yet");
                        }
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            })
            .expect("a thread for LISTEN");
        Listener {
            stop,
            thread: Some(thread),
        }
    }
}

fn listen_on(
    client: &mut postgres::Client,
    stop: &AtomicBool,
    on_change: &OnChange,
) -> Result<(), postgres::Error> {
    client.batch_execute(&format!("LISTEN {WATCH_CHANNEL}"))?;
    while !stop.load(Ordering::Relaxed) {
        {
            let mut n = client.notifications();
            let mut it = n.timeout_iter(Duration::from_secs(1));
            while let Some(note) = it.next()? {
                on_change(note.payload());
                // A steady stream of notices must not keep a stopping
                // daemon waiting: the flag is read between them too.
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
            }
        }
        if client.is_closed() {
            return Ok(());
        }
    }
    Ok(())
}
