//! Schema migrations of the PostgreSQL engine, applied at start-up in one
//! transaction. The version row is locked first, so daemons starting
//! together apply each migration once; a daemon refuses a database whose
//! schema is newer than the release knows.
//!
//! Only plain tables, primary keys and a B-tree index: no triggers,
//! advisory locks, sequences or generated columns, so the same SQL runs on
//! PostgreSQL's distributed relatives (see docs/operations.md).

use super::{blocking, db_error};
use crate::error::{Error, Result};

/// The schema version this release writes.
pub const SCHEMA_VERSION: i32 = 1;

/// Migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    // 1: the keyspace, lock rows, the outbox counter and staged entries,
    // claims.
    "CREATE TABLE mnemo_kv (k bytea PRIMARY KEY, v bytea NOT NULL);
     CREATE TABLE mnemo_locks (k bytea PRIMARY KEY);
     CREATE TABLE mnemo_counters (name text PRIMARY KEY, value bigint NOT NULL);
     CREATE TABLE mnemo_staged (k bytea PRIMARY KEY, entry bytea NOT NULL);
     INSERT INTO mnemo_counters (name, value) VALUES ('outbox', 0);
     CREATE TABLE mnemo_claims (
         kind smallint NOT NULL,
         ns text NOT NULL,
         session_id text NOT NULL,
         due_at bigint NOT NULL,
         trigger bytea,
         token bigint,
         lease_until bigint,
         again boolean NOT NULL DEFAULT false,
         PRIMARY KEY (kind, ns, session_id)
     );
     CREATE INDEX mnemo_claims_due ON mnemo_claims (kind, due_at);",
];

/// Why a migration attempt failed.
enum Failed {
    Db(postgres::Error),
    Newer(i32),
}

impl From<postgres::Error> for Failed {
    fn from(e: postgres::Error) -> Failed {
        Failed::Db(e)
    }
}

/// Brings the schema to [`SCHEMA_VERSION`].
pub(super) fn migrate(conn: &mut postgres::Client) -> Result<()> {
    use postgres::error::SqlState;
    // Daemons creating the version table at once: all but one fail on the
    // catalog's unique index (or find the table created meanwhile); a
    // second try sees the table and waits on its row lock.
    let mut tries = 0;
    loop {
        tries += 1;
        match blocking(|| migrate_once(conn)) {
            Ok(()) => return Ok(()),
            Err(Failed::Newer(version)) => {
                return Err(Error::Storage(format!(
                    "the database's mnemo schema is version {version}, newer than this release knows ({SCHEMA_VERSION}); run a newer mnemo"
                )))
            }
            Err(Failed::Db(e))
                if tries < 5
                    && e.code().is_some_and(|c| {
                        *c == SqlState::UNIQUE_VIOLATION || *c == SqlState::DUPLICATE_TABLE
                    }) =>
            {
                continue
            }
            Err(Failed::Db(e)) => return Err(db_error(e)),
        }
    }
}

fn migrate_once(conn: &mut postgres::Client) -> std::result::Result<(), Failed> {
    let mut tx = conn.transaction()?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS mnemo_schema (id int PRIMARY KEY, version int NOT NULL);
         INSERT INTO mnemo_schema (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;",
    )?;
    let version: i32 = tx
        .query_one(
            "SELECT version FROM mnemo_schema WHERE id = 1 FOR UPDATE",
            &[],
        )?
        .get(0);
    if version > SCHEMA_VERSION {
        return Err(Failed::Newer(version));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
        tx.batch_execute(sql)?;
        tracing::info!(version = i + 1, "applied a PostgreSQL schema migration");
    }
    tx.execute(
        "UPDATE mnemo_schema SET version = $1 WHERE id = 1",
        &[&SCHEMA_VERSION.max(version)],
    )?;
    tx.commit()?;
    Ok(())
}
