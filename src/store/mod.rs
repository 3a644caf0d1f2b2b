//! Storage: small ports, one per concern, and the engines that implement
//! them. The domain decides, the store applies: every write that depends
//! on what is stored takes a `decide` closure, which the store runs on the
//! current records under its lock (sled: the session's lock stripe; a SQL
//! backend: after `SELECT … FOR UPDATE`) and whose plan it applies as one
//! atomic write. The store enforces no domain rule of its own; what it
//! keeps is storage's own promises: ids unique, seqs gap-free, conditional
//! writes (a summary over a moved base version is `Aborted`).
//!
//! Durability contract: every write method returns only once its write is
//! durable (survives `kill -9` and power loss). Engines batch the syncs of
//! concurrent writers (group commit) behind that contract.
//!
//! Imports only `model`, the error type and configuration values.

mod claims;
pub mod codec;
pub mod commit;
pub mod compact;
pub mod dump;
pub mod engine;
mod erase;
pub mod keys;
mod knowledge;
mod kv;
pub mod legacy;
mod outbox;
pub mod postgres;
mod records;
mod retention;
mod upgrade;

use std::collections::BTreeMap;

pub use self::erase::{EraseStep, EraseStore};
pub use self::kv::{KvStore, MemoryStore, PgStore, SledStore};
pub use self::retention::{RetentionStore, RetentionView};
use crate::error::Result;
use crate::model::{
    ActionRef, ActionStatus, AppendOutcome, AuditRecord, CarriedAction, Episode, Fact, FactFilter,
    FactIdentity, FactPlan, FoldRecord, IdempotencyRecord, IndexChange, PendingAction, ReviewItem,
    Session, SessionFilter, SessionState, SessionSummary, Trigger, Turn, UnixNanos,
};

/// One page of sessions from [`SessionStore::list_sessions`].
#[derive(Debug, Clone, Default)]
pub struct SessionPage {
    /// Sessions that passed the filter, in id order.
    pub sessions: Vec<Session>,
    /// When set, more sessions may follow: continue after this id.
    pub resume_after: Option<String>,
}

/// One page of [`SessionStore::scan_sessions`].
#[derive(Debug, Clone, Default)]
pub struct SessionScan {
    /// Sessions that decoded.
    pub sessions: Vec<Session>,
    /// Why the others did not (DATA_LOSS messages naming the session).
    pub unreadable: Vec<String>,
    /// The last (namespace, session id) examined; `None` when the page
    /// was empty.
    pub resume_after: Option<(String, String)>,
}

/// A page of a store-wide scan and where to resume (an opaque key).
pub type ScanPage<T> = (Vec<T>, Option<Vec<u8>>);

/// What [`SessionStore::append_turns`] did, and the session after it (so
/// callers need not read the session again).
#[derive(Debug, Clone)]
pub struct Appended {
    /// The result for the client (a replay when the key was seen).
    pub outcome: AppendOutcome,
    /// The session as stored after the append.
    pub session: Session,
    /// Its state before the append (an append wakes an IDLE session).
    pub previous_state: SessionState,
}

/// The domain's decision on an append, applied atomically by the store.
#[derive(Debug)]
pub enum AppendPlan {
    /// The idempotency key was seen: return this, write nothing.
    Replay(AppendOutcome),
    /// Write these turns and this session, and remember the outcome with
    /// the request's fingerprint under the idempotency key (when the
    /// append has one).
    Write {
        /// Turns to store, seqs assigned (from the session's `next_seq`).
        turns: Vec<Turn>,
        /// The session after the append.
        session: Box<Session>,
        /// The result for the client.
        outcome: AppendOutcome,
        /// SHA-256 of the request, kept with the outcome.
        fingerprint: [u8; 32],
    },
}

/// Decides an append from the session and the record stored under the
/// append's idempotency key, if any.
pub type DecideAppend<'a> =
    dyn FnMut(&Session, Option<&IdempotencyRecord>) -> Result<AppendPlan> + 'a;

/// What [`SessionStore::remove_last_turn`] did.
#[derive(Debug, Clone)]
pub struct Removed {
    /// The removed turn; `None` when there was nothing to remove.
    pub turn: Option<Turn>,
    /// The session as stored afterwards.
    pub session: Session,
}

/// Decides a removal from the session and its last turn (`None` when it
/// has no turns): the session to store without that turn, or `None` to
/// write nothing.
pub type DecideRemoval<'a> =
    dyn FnMut(&Session, Option<&Turn>) -> Result<Option<Box<Session>>> + 'a;

/// Everything one summary attempt writes, atomically.
#[derive(Debug, Clone)]
pub struct SummaryWrite {
    /// The session's summary version the attempt started from; the write
    /// is refused (ABORTED) if another attempt got there first.
    pub base_version: u64,
    /// The summary to store; `None` when validation refused it.
    pub summary: Option<SessionSummary>,
    /// The new fold state (only with a stored summary).
    pub fold: Option<FoldRecord>,
    /// The audit record (its `audit_seq` is assigned by the store).
    pub audit: AuditRecord,
    /// A review item, for high-risk summaries that need one.
    pub review: Option<ReviewItem>,
    /// Last seq the attempt covered.
    pub attempted_through_seq: u64,
}

impl SummaryWrite {
    /// An attempt that stores no summary (refused, or nothing left to
    /// fold): its audit record and the last seq it covered.
    pub fn without_summary(
        base_version: u64,
        audit: AuditRecord,
        attempted_through_seq: u64,
    ) -> Self {
        SummaryWrite {
            base_version,
            summary: None,
            fold: None,
            audit,
            review: None,
            attempted_through_seq,
        }
    }
}

/// What becomes of a stored fact when a session it cites is deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactFate {
    /// Unchanged.
    Keep,
    /// Rewritten as given (same id).
    Rewrite(Box<Fact>),
    /// Removed.
    Delete,
}

/// The episode of a stopped session and the actions it carries over.
#[derive(Debug, Clone)]
pub struct EpisodePlan {
    /// The episode (replaces the session's earlier one).
    pub episode: Episode,
    /// Its carried actions (replace the session's earlier ones).
    pub carried: Vec<CarriedAction>,
}

/// What setting an action's status writes.
#[derive(Debug, Clone)]
pub struct ActionPlan {
    /// The action with its new status (returned to the caller).
    pub action: PendingAction,
    /// The session's episode, rewritten (when it has one).
    pub episode: Option<Episode>,
    /// The carried copy: `Some` to (re)write, `None` to remove.
    pub carried: Option<CarriedAction>,
}

/// Decides a session's episode from the session, its latest summary and
/// its client-set action statuses (`None`: nothing to write).
pub type DecideEpisode<'a> = dyn FnMut(
        &Session,
        Option<&SessionSummary>,
        &BTreeMap<u64, ActionStatus>,
    ) -> Result<Option<EpisodePlan>>
    + 'a;

/// Decides what setting an action's status writes, from the session, its
/// latest summary and its episode.
pub type DecideAction<'a> =
    dyn FnMut(&Session, Option<&SessionSummary>, Option<Episode>) -> Result<ActionPlan> + 'a;

/// Sessions and their turns.
pub trait SessionStore {
    /// Stores a new session; `AlreadyExists` when the id is taken.
    fn create_session(&self, session: &Session) -> Result<()>;

    /// Reads a session; `NotFound` when absent, `DataLoss` when corrupt.
    fn get_session(&self, ns: &str, session_id: &str) -> Result<Session>;

    /// Lists sessions of a namespace with ids after `after`, in id order,
    /// returning at most `limit` matches and examining at most `scan_limit`
    /// candidates (so a selective filter cannot make one call unbounded).
    fn list_sessions(
        &self,
        ns: &str,
        filter: &SessionFilter,
        after: Option<&str>,
        limit: usize,
        scan_limit: usize,
    ) -> Result<SessionPage>;

    /// Applies `change` to a session atomically and returns the result. If
    /// `change` fails nothing is written. A session's subject never changes.
    fn update_session(
        &self,
        ns: &str,
        session_id: &str,
        change: &mut dyn FnMut(&mut Session) -> Result<()>,
    ) -> Result<Session>;

    /// Removes a session and all its records (its episode and carried
    /// actions too); returns the turns removed.
    fn delete_session(&self, ns: &str, session_id: &str) -> Result<u64>;

    /// Appends turns: runs `decide` on the session and the record under
    /// `idempotency_key`, then applies its plan atomically with an outbox
    /// entry for the new turns.
    fn append_turns(
        &self,
        ns: &str,
        session_id: &str,
        idempotency_key: Option<&str>,
        decide: &mut DecideAppend<'_>,
    ) -> Result<Appended>;

    /// Removes the session's last turn: runs `decide` on the session and
    /// that turn, then deletes the turn and stores the session it returns
    /// (whose `next_seq` must be one lower) atomically, with an outbox
    /// entry. The seq is given to the next append.
    fn remove_last_turn(
        &self,
        ns: &str,
        session_id: &str,
        decide: &mut DecideRemoval<'_>,
    ) -> Result<Removed>;

    /// Turns with `from_seq <= seq <= to_seq`, oldest first, at most `limit`.
    /// `NotFound` when the session does not exist.
    fn list_turns(
        &self,
        ns: &str,
        session_id: &str,
        from_seq: u64,
        to_seq: u64,
        limit: usize,
    ) -> Result<Vec<Turn>>;

    /// As [`SessionStore::list_turns`], without reading the session record
    /// (for callers that already hold it): an absent session has no turns.
    fn read_turns(
        &self,
        ns: &str,
        session_id: &str,
        from_seq: u64,
        to_seq: u64,
        limit: usize,
    ) -> Result<Vec<Turn>>;

    /// The turns with the given seqs (absent ones are skipped), by point
    /// reads; the session record is not read.
    fn get_turns(&self, ns: &str, session_id: &str, seqs: &[u64]) -> Result<Vec<Turn>>;

    /// The turns at `(session_id, seq)` of any sessions of `ns`, in the
    /// order asked (`None` where absent), in one read of the engine (one
    /// round trip on a shared database); session records are not read.
    fn turns_at(&self, ns: &str, at: &[(&str, u64)]) -> Result<Vec<Option<Turn>>>;

    /// Sessions of every namespace after `(ns, session_id)`, at most `limit`
    /// (restart scans). Corrupt records are reported in `unreadable`, not
    /// as an error, so one damaged session cannot stop the daemon.
    fn scan_sessions(&self, after: Option<(&str, &str)>, limit: usize) -> Result<SessionScan>;
}

/// Summaries, their fold state, the audit log and the review queue.
pub trait SummaryStore {
    /// The latest fold state of a session, if it has a summary.
    fn fold_record(&self, ns: &str, session_id: &str) -> Result<Option<FoldRecord>>;

    /// Stores one summary attempt atomically: summary, fold state, audit
    /// record, review item and the session's progress. `Aborted` when the
    /// session's summary version is no longer `write.base_version`.
    /// Returns the session after the write.
    fn save_summary(&self, ns: &str, session_id: &str, write: SummaryWrite) -> Result<Session>;

    /// Summary `version` of a session (0 = latest); `NotFound` if none.
    fn get_summary(&self, ns: &str, session_id: &str, version: u64) -> Result<SessionSummary>;

    /// Summary `version` of a session, if stored, by a point read (the
    /// session record is not read: the caller holds it).
    fn summary_at(
        &self,
        ns: &str,
        session_id: &str,
        version: u64,
    ) -> Result<Option<SessionSummary>>;

    /// Summaries with version `<= at_most`, newest first, at most `limit`.
    fn list_summaries(
        &self,
        ns: &str,
        session_id: &str,
        at_most: u64,
        limit: usize,
    ) -> Result<Vec<SessionSummary>>;

    /// Audit records with `audit_seq > after`, oldest first, at most `limit`.
    fn list_audit(
        &self,
        ns: &str,
        session_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>>;

    /// Review items of a namespace after `after` (a review id), oldest
    /// first; pending only unless `include_resolved`. Examines at most
    /// `scan_limit` items; the second value is where to resume, if more.
    fn list_review_items(
        &self,
        ns: &str,
        after: Option<&str>,
        include_resolved: bool,
        limit: usize,
        scan_limit: usize,
    ) -> Result<(Vec<ReviewItem>, Option<String>)>;

    /// Resolves a review item: runs `decide` on the stored item (under its
    /// session's lock) and stores what it returns, with `audit` appended to
    /// the session's audit log (its `audit_seq` stamped). `NotFound` for an
    /// unknown id.
    fn resolve_review_item(
        &self,
        ns: &str,
        review_id: &str,
        audit: AuditRecord,
        decide: &mut dyn FnMut(&ReviewItem) -> Result<ReviewItem>,
    ) -> Result<ReviewItem>;
}

/// Facts, episodes, carried actions and action statuses.
pub trait KnowledgeStore {
    /// Stores a fact: runs `decide` on the subject's current fact with the
    /// same identity (`Fact::identity`: its key, or its normalized words),
    /// under the subject's lock, and applies the plan. Returns the plan.
    fn put_fact(
        &self,
        ns: &str,
        subject_id: &str,
        identity: &FactIdentity,
        decide: &mut dyn FnMut(Option<Fact>) -> Result<FactPlan>,
    ) -> Result<FactPlan>;

    /// One fact version; `NotFound` when absent.
    fn get_fact(&self, ns: &str, fact_id: &str) -> Result<Fact>;

    /// Facts passing `filter` after fact id `after`, in id order; examines
    /// at most `scan_limit`. The second value is where to resume.
    fn list_facts(
        &self,
        ns: &str,
        filter: &FactFilter,
        after: Option<&str>,
        limit: usize,
        scan_limit: usize,
    ) -> Result<(Vec<Fact>, Option<String>)>;

    /// A subject's newest current facts, newest first, at most `limit`,
    /// examining at most `scan_limit` versions (superseded ones are
    /// skipped).
    fn recent_facts(
        &self,
        ns: &str,
        subject_id: &str,
        limit: usize,
        scan_limit: usize,
    ) -> Result<Vec<Fact>>;

    /// Removes a fact version (and the pointer that named it).
    fn delete_fact(&self, ns: &str, fact_id: &str) -> Result<Fact>;

    /// Runs `fate` on each fact of a subject, under the subject's lock, and
    /// applies the answers in one write.
    fn revise_facts(
        &self,
        ns: &str,
        subject_id: &str,
        fate: &mut dyn FnMut(&Fact) -> FactFate,
    ) -> Result<()>;

    /// Writes the episode of a session: runs `decide` on the session, its
    /// latest summary and its action statuses under the session's lock;
    /// when it returns a plan, replaces the session's episode and carried
    /// actions and records the episode's summary version on the session.
    fn save_episode(
        &self,
        ns: &str,
        session_id: &str,
        decide: &mut DecideEpisode<'_>,
    ) -> Result<Option<Episode>>;

    /// The episode of a session, if it has one.
    fn get_episode(&self, ns: &str, session_id: &str) -> Result<Option<Episode>>;

    /// A subject's episodes, newest first, after `(ended_at, session_id)`.
    fn list_episodes(
        &self,
        ns: &str,
        subject_id: &str,
        after: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<Episode>>;

    /// A subject's carried actions, at most `limit`.
    fn carried_actions(
        &self,
        ns: &str,
        subject_id: &str,
        limit: usize,
    ) -> Result<Vec<CarriedAction>>;

    /// Statuses clients set on a session's actions, by action seq.
    fn action_statuses(&self, ns: &str, session_id: &str) -> Result<BTreeMap<u64, ActionStatus>>;

    /// Sets an action's status: runs `decide` on the session, its latest
    /// summary and its episode under the session's lock, then stores the
    /// status with the plan's episode and carried copy.
    fn set_action_status(
        &self,
        ns: &str,
        action: &ActionRef,
        status: ActionStatus,
        decide: &mut DecideAction<'_>,
    ) -> Result<PendingAction>;

    /// Every fact version of every namespace (rebuilding the index).
    fn scan_facts(&self, after: Option<&[u8]>, limit: usize) -> Result<ScanPage<Fact>>;

    /// Every episode of every namespace (rebuilding the index).
    fn scan_episodes(&self, after: Option<&[u8]>, limit: usize) -> Result<ScanPage<Episode>>;
}

/// The outbox: every write that changes something searchable adds an
/// entry in the same atomic write, with an id the store assigns
/// (increasing). Each consumer reads after its own durable cursor; entries
/// at or below every consumer's cursor are pruned.
pub trait Outbox {
    /// Entries after `consumer`'s cursor, oldest first, at most `limit`
    /// examined (an unreadable entry is logged and skipped).
    fn read_outbox(&self, consumer: &str, limit: usize) -> Result<OutboxPage> {
        self.read_outbox_after(consumer, 0, limit)
    }

    /// Entries after `consumer`'s cursor and after `after` (what the
    /// consumer has applied but not yet passed durably), as
    /// [`Outbox::read_outbox`].
    fn read_outbox_after(&self, consumer: &str, after: u64, limit: usize) -> Result<OutboxPage>;

    /// Moves `consumer`'s cursor to `through` (never back) and prunes the
    /// entries every known consumer has passed.
    fn advance_outbox(&self, consumer: &str, through: u64) -> Result<()>;

    /// Entries `consumer` has not passed yet.
    fn outbox_backlog(&self, consumer: &str) -> Result<u64>;
}

/// A page of the outbox for one consumer.
#[derive(Debug, Clone, Default)]
pub struct OutboxPage {
    /// Readable entries, oldest first, with their ids.
    pub entries: Vec<(u64, IndexChange)>,
    /// The last id examined (0 when none): where to advance once the
    /// entries are applied, past unreadable ones too.
    pub through: u64,
}

/// Kinds of background work on a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkKind {
    /// A summary is due.
    Summary,
    /// The session's idle deadline is to be checked.
    Idle,
    /// Records a retention policy no longer keeps are to be removed (a
    /// session's, or every namespace's facts).
    Retention,
}

/// Due work on a session, leased to one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// What kind of work.
    pub kind: WorkKind,
    /// Namespace.
    pub namespace: String,
    /// Session.
    pub session_id: String,
    /// For a summary: the trigger it was marked with.
    pub trigger: Option<Trigger>,
    /// The lease's token: completion is fenced by it.
    pub token: u64,
}

/// Background work by claims with leases: what is due on which session,
/// and which worker holds it. Each item is held by one worker at a time;
/// an expired lease can be taken over; completing a claim whose lease was
/// lost is refused, so a stalled worker cannot finish work someone else
/// took. No leader is elected: every worker claims.
pub trait Claims {
    /// Marks work due at `due_at` (replacing an earlier mark's time). Work
    /// marked while leased stays due after its claim completes.
    fn mark_due(
        &self,
        kind: WorkKind,
        ns: &str,
        session_id: &str,
        due_at: UnixNanos,
        trigger: Option<Trigger>,
    ) -> Result<()>;

    /// Forgets a session's due work of `kind` (a lease held on it is lost).
    fn cancel_due(&self, kind: WorkKind, ns: &str, session_id: &str) -> Result<()>;

    /// Claims at most `limit` items of `kind` due by `now` that nobody
    /// holds (or whose lease expired), leasing them until
    /// `now + lease_nanos`.
    fn claim_due(
        &self,
        kind: WorkKind,
        now: UnixNanos,
        lease_nanos: i64,
        limit: usize,
    ) -> Result<Vec<Claim>>;

    /// Ends a claim: the item is done unless it was marked due again
    /// meanwhile. `Aborted` when the claim's lease was lost.
    fn complete_claim(&self, claim: &Claim) -> Result<()>;

    /// When the next item of `kind` becomes claimable (due, or its lease
    /// expires), if any.
    fn next_due(&self, kind: WorkKind) -> Result<Option<UnixNanos>>;

    /// Items of `kind`, held or not.
    fn due_count(&self, kind: WorkKind) -> Result<u64>;
}

/// Every port, as one object the domain holds.
pub trait Store:
    SessionStore
    + SummaryStore
    + KnowledgeStore
    + Outbox
    + Claims
    + EraseStore
    + RetentionStore
    + Send
    + Sync
    + 'static
{
    /// Syncs done and writes acknowledged (group-commit counters).
    fn sync_stats(&self) -> std::sync::Arc<commit::Stats>;

    /// Makes everything durable before the process exits (writes already
    /// are; this also flushes what engines keep for speed).
    fn flush(&self) -> Result<()>;

    /// Makes durable every write a read so far may have seen (a write is
    /// visible before the sync that acknowledges it): no sync when every
    /// applied write is durable already.
    fn durable_reads(&self) -> Result<()> {
        self.flush()
    }

    /// Whether other daemons share this store (a shared database): then
    /// each daemon follows the outbox under its own consumer name, and
    /// watchers learn of other daemons' writes by [`Store::listen`] and
    /// polling.
    fn is_shared(&self) -> bool {
        false
    }

    /// For a shared store: calls `on_change` with the watch topic
    /// (`namespace \t session id`) of each session another daemon
    /// changed, until the guard is dropped. A wake-up only: it can be lost.
    fn listen(&self, _on_change: engine::OnChange) -> Option<Box<dyn Send>> {
        None
    }

    /// For a shared store: the database connections held, and how many
    /// are idle.
    fn connections(&self) -> Option<(u32, u32)> {
        None
    }
}
