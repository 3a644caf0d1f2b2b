//! The PostgreSQL engine: the same ordered keyspace as sled (`keys`), in
//! one table shared by every daemon that points at the database, so the
//! typed store, its record formats, export/import and verify are the same
//! code on both engines. What one process kept in memory for sled lives in
//! the database here: writers of a session are serialized by a lock row
//! (`SELECT … FOR UPDATE` semantics, held to the end of the unit of work),
//! outbox ids come from a counter row taken just before commit (so entries
//! become visible in id order across daemons), and claims of background
//! work are rows claimed with `FOR UPDATE SKIP LOCKED` under a lease.
//!
//! Durability: every unit of work is one transaction, committed with
//! `synchronous_commit` on (checked at start), so a write is durable when
//! its method returns. Connection failures surface as `Unavailable`, which
//! clients retry (with their idempotency keys).
//!
//! The store's ports are synchronous and run on blocking threads, so the
//! engine uses the synchronous face of tokio-postgres (`postgres`) with an
//! r2d2 pool; a call from an async worker thread steps off the runtime
//! first (see `blocking`).

mod claims;
mod listen;
mod outbox;
mod schema;
mod txn;

use std::ops::Bound;
use std::time::Duration;

use postgres::types::{ToSql, Type};
use r2d2::{Pool, PooledConnection};
use r2d2_postgres::PostgresConnectionManager;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use self::listen::Listener;
pub use self::schema::SCHEMA_VERSION;
use self::txn::PgTxn;
use super::engine::{prefix_end, Batch, Engine, Entry, OnChange, Read, Shared, Txn, Write};
use crate::error::{Error, Result};

type Manager = PostgresConnectionManager<MakeRustlsConnect>;
type Conn = OffRuntime<PooledConnection<Manager>>;

/// A value whose drop may close database connections (a pooled
/// connection the pool finds broken, the pool itself): dropped off any
/// async runtime, like every other call that blocks on the database.
pub(crate) struct OffRuntime<T: Send>(Option<T>);

impl<T: Send> OffRuntime<T> {
    fn new(value: T) -> Self {
        OffRuntime(Some(value))
    }
}

impl<T: Send> std::ops::Deref for OffRuntime<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_ref().expect("present until dropped")
    }
}

impl<T: Send> std::ops::DerefMut for OffRuntime<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.as_mut().expect("present until dropped")
    }
}

impl<T: Send> Drop for OffRuntime<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            blocking(move || drop(value));
        }
    }
}

/// How to reach the database.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// A libpq-style URL or key=value string (`postgres://user@host/db`).
    pub url: String,
    /// Most connections this daemon holds.
    pub pool_size: u32,
    /// How long a request waits for a connection before `Unavailable`.
    pub connect_timeout: Duration,
    /// PEM file of the CA to trust for TLS (else the webpki roots); used
    /// when the URL asks for TLS (`sslmode=require`).
    pub ca_file: Option<std::path::PathBuf>,
}

impl PgOptions {
    /// The options a daemon's `[postgres]` settings give.
    pub fn from_config(c: &crate::config::PostgresConfig) -> PgOptions {
        PgOptions {
            url: c.url.clone(),
            pool_size: c.pool_size,
            connect_timeout: Duration::from_secs(c.connect_timeout_secs),
            ca_file: c.ca_file.clone(),
        }
    }

    /// Options for `url` with the defaults.
    pub fn new(url: &str) -> PgOptions {
        PgOptions {
            url: url.to_owned(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            ca_file: None,
        }
    }
}

/// The PostgreSQL engine.
pub struct PgEngine {
    pool: OffRuntime<Pool<Manager>>,
    /// For connections outside the pool (LISTEN).
    config: postgres::Config,
    tls: MakeRustlsConnect,
}

/// Runs a call that blocks on the database. The synchronous client drives
/// its connection with a runtime of its own, which cannot start on a
/// thread already running async tasks: on such a thread the call steps
/// off the runtime first (a multi-threaded runtime hands the thread's
/// tasks to others; a current-thread one gets a scoped thread).
pub(crate) fn blocking<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        Ok(_) => std::thread::scope(|s| match s.spawn(f).join() {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        }),
        Err(_) => f(),
    }
}

/// Maps a database error: lost connections and a server shutting down or
/// starting are `Unavailable` (retry); the rest is a storage error.
pub(crate) fn db_error(e: postgres::Error) -> Error {
    use postgres::error::SqlState;
    let retry = e.is_closed()
        || e.code().is_some_and(|c| {
            c.code().starts_with("08")
                || [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                    SqlState::TOO_MANY_CONNECTIONS,
                    SqlState::T_R_SERIALIZATION_FAILURE,
                    SqlState::T_R_DEADLOCK_DETECTED,
                ]
                .contains(c)
        })
        || e.code().is_none() && std::error::Error::source(&e).is_some();
    // The server's own words (its Display is only "db error").
    let what = match e.as_db_error() {
        Some(db) => format!("{} ({}): {}", db.severity(), db.code().code(), db.message()),
        None => e.to_string(),
    };
    if retry {
        Error::Unavailable(format!("the database is unavailable (retry): {what}"))
    } else {
        Error::Storage(format!("database error: {what}"))
    }
}

fn tls_connector(ca_file: Option<&std::path::Path>) -> Result<MakeRustlsConnect> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| {
                    Error::InvalidArgument(format!(
                        "cannot read the database CA file {}: {e}",
                        path.display()
                    ))
                })?;
            for c in certs {
                roots.add(c).map_err(|e| {
                    Error::InvalidArgument(format!(
                        "the database CA file {} holds an unusable certificate: {e}",
                        path.display()
                    ))
                })?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Error::Internal(format!("TLS set-up failed: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

impl PgEngine {
    /// Connects, applies the schema migrations this release knows (in
    /// one transaction) and checks the server keeps commits durable.
    /// Refuses a database whose schema is newer than this release.
    pub fn open(options: &PgOptions) -> Result<PgEngine> {
        let config: postgres::Config = options.url.parse().map_err(|e| {
            Error::InvalidArgument(format!(
                "the PostgreSQL URL is not valid ({e}); expected e.g. postgres://user:password@host:5432/db"
            ))
        })?;
        let tls = tls_connector(options.ca_file.as_deref())?;
        let manager = PostgresConnectionManager::new(config.clone(), tls.clone());
        let pool = blocking(|| {
            Pool::builder()
                .max_size(options.pool_size.max(1))
                .min_idle(Some(0))
                .connection_timeout(options.connect_timeout)
                .test_on_check_out(false)
                .build(manager)
        })
        .map_err(|e| Error::Unavailable(format!("cannot connect to PostgreSQL: {e}")))?;
        let engine = PgEngine {
            pool: OffRuntime::new(pool),
            config,
            tls,
        };
        let mut conn = engine.conn()?;
        blocking(|| schema::migrate(&mut conn))?;
        let sync: String = blocking(|| {
            conn.query_one("SHOW synchronous_commit", &[])
                .map(|r| r.get(0))
        })
        .map_err(db_error)?;
        if sync == "off" {
            return Err(Error::InvalidArgument(
                "the database has synchronous_commit = off: acknowledged writes could be lost on a crash; turn it on (the default) for mnemo's role or database".into(),
            ));
        }
        Ok(engine)
    }

    /// A pooled connection, or `Unavailable` within the connect timeout.
    pub(crate) fn conn(&self) -> Result<Conn> {
        blocking(|| self.pool.get().map(OffRuntime::new)).map_err(|e| {
            Error::Unavailable(format!(
                "no PostgreSQL connection (retry; is the database up?): {e}"
            ))
        })
    }

    /// Opens a connection outside the pool (call off any async runtime).
    fn connect_fn(
        &self,
    ) -> impl Fn() -> std::result::Result<postgres::Client, postgres::Error> + Send + 'static {
        let (config, tls) = (self.config.clone(), self.tls.clone());
        move || config.connect(tls.clone())
    }

    /// Whether this daemon's connections to the database are encrypted.
    pub fn encrypted(&self) -> Result<bool> {
        let mut conn = self.conn()?;
        blocking(|| {
            conn.query_typed(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .map_err(db_error)
            .map(|rows| rows.first().is_some_and(|r| r.get::<_, bool>(0)))
        })
    }

    /// Connections open and idle (for metrics and tests).
    pub fn pool_state(&self) -> (u32, u32) {
        let s = self.pool.state();
        (s.connections, s.idle_connections)
    }
}

/// The lower and upper bounds of a scan as SQL parameters.
fn range(from: Bound<&[u8]>, prefix: &[u8]) -> (Vec<u8>, bool, Option<Vec<u8>>) {
    let (low, inclusive) = match from {
        Bound::Included(k) if k >= prefix => (k.to_vec(), true),
        Bound::Excluded(k) if k >= prefix => (k.to_vec(), false),
        _ => (prefix.to_vec(), true),
    };
    (low, inclusive, prefix_end(prefix))
}

/// `limit` as a SQL LIMIT.
fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// Reads through any client: a pooled connection or a transaction's.
pub(crate) fn get_with(client: &mut postgres::Client, key: &[u8]) -> Result<Option<Vec<u8>>> {
    blocking(|| {
        client.query_typed(
            "SELECT v FROM mnemo_kv WHERE k = $1",
            &[(&key, Type::BYTEA)],
        )
    })
    .map_err(db_error)
    .map(|rows| rows.into_iter().next().map(|r| r.get(0)))
}

pub(crate) fn scan_with(
    client: &mut postgres::Client,
    from: Bound<&[u8]>,
    prefix: &[u8],
    limit: usize,
) -> Result<Vec<Entry>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let (low, inclusive, high) = range(from, prefix);
    let op = if inclusive { ">=" } else { ">" };
    let limit = sql_limit(limit);
    let rows = blocking(|| match &high {
        Some(high) => client.query_typed(
            &format!("SELECT k, v FROM mnemo_kv WHERE k {op} $1 AND k < $2 ORDER BY k LIMIT $3"),
            &[
                (&low, Type::BYTEA),
                (high, Type::BYTEA),
                (&limit, Type::INT8),
            ],
        ),
        None => client.query_typed(
            &format!("SELECT k, v FROM mnemo_kv WHERE k {op} $1 ORDER BY k LIMIT $2"),
            &[(&low, Type::BYTEA), (&limit, Type::INT8)],
        ),
    })
    .map_err(db_error)?;
    Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
}

pub(crate) fn scan_rev_with(
    client: &mut postgres::Client,
    prefix: &[u8],
    limit: usize,
) -> Result<Vec<Entry>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let high = prefix_end(prefix);
    let limit = sql_limit(limit);
    let rows = blocking(|| match &high {
        Some(high) => client.query_typed(
            "SELECT k, v FROM mnemo_kv WHERE k >= $1 AND k < $2 ORDER BY k DESC LIMIT $3",
            &[
                (&prefix, Type::BYTEA),
                (high, Type::BYTEA),
                (&limit, Type::INT8),
            ],
        ),
        None => client.query_typed(
            "SELECT k, v FROM mnemo_kv WHERE k >= $1 ORDER BY k DESC LIMIT $2",
            &[(&prefix, Type::BYTEA), (&limit, Type::INT8)],
        ),
    })
    .map_err(db_error)?;
    Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Writes a batch through `client` (inside the caller's transaction):
/// the last write of each key wins, as in a batch applied in order.
pub(crate) fn apply_with(client: &mut postgres::Client, batch: Batch) -> Result<()> {
    let mut last = std::collections::BTreeMap::new();
    for w in batch {
        match w {
            Write::Put(k, v) => last.insert(k, Some(v)),
            Write::Delete(k) => last.insert(k, None),
        };
    }
    let (mut put_k, mut put_v, mut del) = (Vec::new(), Vec::new(), Vec::new());
    for (k, v) in last {
        match v {
            Some(v) => {
                put_k.push(k);
                put_v.push(v);
            }
            None => del.push(k),
        }
    }
    blocking(|| -> std::result::Result<(), postgres::Error> {
        if !del.is_empty() {
            client.execute_typed(
                "DELETE FROM mnemo_kv WHERE k = ANY($1)",
                &[(&del, Type::BYTEA_ARRAY)],
            )?;
        }
        if !put_k.is_empty() {
            client.execute_typed(
                "INSERT INTO mnemo_kv (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
                 ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
                &[(&put_k, Type::BYTEA_ARRAY), (&put_v, Type::BYTEA_ARRAY)],
            )?;
        }
        Ok(())
    })
    .map_err(db_error)
}

/// Runs `f` on a pooled connection.
fn with_conn<T>(
    engine: &PgEngine,
    f: impl FnOnce(&mut postgres::Client) -> Result<T>,
) -> Result<T> {
    let mut conn = engine.conn()?;
    f(&mut conn)
}

impl Read for PgEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        with_conn(self, |c| get_with(c, key))
    }

    fn scan(&self, from: Bound<&[u8]>, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        with_conn(self, |c| scan_with(c, from, prefix, limit))
    }

    fn scan_rev(&self, prefix: &[u8], limit: usize) -> Result<Vec<Entry>> {
        with_conn(self, |c| scan_rev_with(c, prefix, limit))
    }

    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let rows = with_conn(self, |c| {
            blocking(|| {
                c.query_typed(
                    "SELECT k, v FROM mnemo_kv WHERE k = ANY($1)",
                    &[(&keys, Type::BYTEA_ARRAY)],
                )
            })
            .map_err(db_error)
        })?;
        let mut found: std::collections::HashMap<Vec<u8>, Vec<u8>> =
            rows.into_iter().map(|r| (r.get(0), r.get(1))).collect();
        Ok(keys.iter().map(|k| found.remove(k)).collect())
    }
}

impl Engine for PgEngine {
    fn apply(&self, batch: Batch) -> Result<()> {
        self.locked(&[], |tx| tx.apply(batch))
    }

    fn sync(&self) -> Result<()> {
        // Every unit of work commits durably (synchronous_commit).
        Ok(())
    }

    fn all_synced(&self) -> bool {
        // Nothing is visible before its commit, which is durable.
        true
    }

    fn locked<T>(&self, lock: &[u8], work: impl FnOnce(&mut dyn Txn) -> Result<T>) -> Result<T> {
        let conn = self.conn()?;
        let mut tx = PgTxn::begin(conn, lock)?;
        let out = work(&mut tx)?;
        tx.commit()?;
        Ok(out)
    }

    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }
}

impl Shared for PgEngine {
    fn claims(&self) -> &dyn crate::store::Claims {
        self
    }

    fn listen(&self, on_change: OnChange) -> Box<dyn Send> {
        Box::new(PgEngine::listen(self, on_change))
    }

    fn sequence(&self, key: fn(u64) -> Vec<u8>) -> Result<usize> {
        PgEngine::sequence(self, key)
    }

    fn staged(&self) -> Result<u64> {
        PgEngine::staged(self)
    }

    fn connections(&self) -> (u32, u32) {
        self.pool_state()
    }

    fn stage(&self, entries: Vec<Vec<u8>>) -> Result<()> {
        let mut conn = self.conn()?;
        blocking(|| outbox::stage_with(&mut conn, entries))
    }

    fn count(&self, from: Bound<&[u8]>, prefix: &[u8]) -> Result<u64> {
        let (low, inclusive, high) = range(from, prefix);
        let op = if inclusive { ">=" } else { ">" };
        let high = high.unwrap_or_else(|| vec![0xff; low.len() + 1]);
        let params: [&(dyn ToSql + Sync); 2] = [&low, &high];
        let n: i64 = with_conn(self, |c| {
            blocking(|| {
                c.query_one(
                    &format!("SELECT count(*) FROM mnemo_kv WHERE k {op} $1 AND k < $2"),
                    &params,
                )
            })
            .map_err(db_error)
            .map(|r| r.get(0))
        })?;
        Ok(n as u64)
    }
}
