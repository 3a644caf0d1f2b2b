//! Where an append's time goes inside the daemon, step by step: each step's
//! total since start, so a benchmark (or anyone holding the domain) can
//! take two snapshots and divide the difference by the appends between.
//! The store's durability wait is counted by the group commit
//! (`store::commit::Stats::waited_nanos`); what the client sees beyond the
//! sum is gRPC decoding, the network and the response.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// A step of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Checking ids, turns, limits and the idempotency key.
    Validate,
    /// Counting tokens and fingerprinting the turns (before the lock).
    Prepare,
    /// Waiting for a thread of the blocking pool.
    Queue,
    /// The store's call: the session read under its lock, the plan, the
    /// records encoded and checksummed, the batch with its outbox entry
    /// applied, then the durability wait.
    Store,
    /// Of the store's call, the plan (seq order, fencing, idempotency,
    /// a recount in another encoding).
    Plan,
    /// Counting the append and telling the listeners (the index, watches).
    Announce,
}

const STEPS: usize = 6;

impl Step {
    /// Every step, in the order an append takes them.
    pub const ALL: [Step; STEPS] = [
        Step::Validate,
        Step::Prepare,
        Step::Queue,
        Step::Store,
        Step::Plan,
        Step::Announce,
    ];

    /// Its name in metrics.
    pub fn name(self) -> &'static str {
        match self {
            Step::Validate => "validate",
            Step::Prepare => "prepare",
            Step::Queue => "queue",
            Step::Store => "store",
            Step::Plan => "plan",
            Step::Announce => "announce",
        }
    }

    /// What it measures, for a metric's help text.
    pub fn help(self) -> &'static str {
        match self {
            Step::Validate => "appends: checking ids, turns and limits, in all",
            Step::Prepare => "appends: counting tokens and fingerprinting, in all",
            Step::Queue => "appends: waiting for a blocking-pool thread, in all",
            Step::Store => "appends: the store's call (locked section and durability wait), in all",
            Step::Plan => "appends: of the store's call, the plan under the session lock, in all",
            Step::Announce => "appends: counting and telling the listeners, in all",
        }
    }
}

/// Running totals per step, in nanoseconds, and the appends they cover.
#[derive(Debug, Default)]
pub struct AppendProfile {
    appends: AtomicU64,
    nanos: [AtomicU64; STEPS],
}

/// A snapshot of [`AppendProfile`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendSteps {
    /// Appends written (replays and failures included).
    pub appends: u64,
    nanos: [u64; STEPS],
}

impl AppendProfile {
    /// Adds `took` to `step`.
    pub fn add(&self, step: Step, took: Duration) {
        self.nanos[step as usize].fetch_add(took.as_nanos() as u64, Relaxed);
    }

    /// Counts an append.
    pub fn counted(&self) {
        self.appends.fetch_add(1, Relaxed);
    }

    /// The totals so far.
    pub fn snapshot(&self) -> AppendSteps {
        AppendSteps {
            appends: self.appends.load(Relaxed),
            nanos: std::array::from_fn(|i| self.nanos[i].load(Relaxed)),
        }
    }
}

impl AppendSteps {
    /// What was added between `earlier` and this snapshot.
    pub fn since(&self, earlier: &AppendSteps) -> AppendSteps {
        AppendSteps {
            appends: self.appends.saturating_sub(earlier.appends),
            nanos: std::array::from_fn(|i| self.nanos[i].saturating_sub(earlier.nanos[i])),
        }
    }

    /// The total time of `step`, in whole microseconds.
    pub fn total_us(&self, step: Step) -> u64 {
        self.nanos[step as usize] / 1_000
    }

    /// The mean time of `step` per append, in microseconds.
    pub fn mean_us(&self, step: Step) -> f64 {
        if self.appends == 0 {
            return 0.0;
        }
        self.nanos[step as usize] as f64 / self.appends as f64 / 1_000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_subtract_to_means_per_append() {
        let p = AppendProfile::default();
        let before = p.snapshot();
        for _ in 0..4 {
            p.counted();
            p.add(Step::Store, Duration::from_micros(100));
            p.add(Step::Plan, Duration::from_micros(10));
        }
        let d = p.snapshot().since(&before);
        assert_eq!(d.appends, 4);
        assert_eq!(d.mean_us(Step::Store), 100.0);
        assert_eq!(d.mean_us(Step::Plan), 10.0);
        assert_eq!(d.mean_us(Step::Queue), 0.0);
        assert_eq!(AppendSteps::default().mean_us(Step::Store), 0.0);
    }
}
