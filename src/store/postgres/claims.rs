//! Claims of background work in PostgreSQL: one row per (kind, session),
//! taken with `FOR UPDATE SKIP LOCKED` so daemons claiming at once take
//! different rows, leased until a deadline, completed only by the token
//! the claim was given (a worker whose lease ran out and was taken over
//! cannot complete it). Every daemon claims; no leader is elected.

use postgres::types::ToSql;

use super::{blocking, db_error, PgEngine};
use crate::error::{Error, Result};
use crate::model::{Trigger, UnixNanos};
use crate::store::{Claim, Claims, WorkKind};

fn kind_code(kind: WorkKind) -> i16 {
    match kind {
        WorkKind::Summary => 1,
        WorkKind::Idle => 2,
        WorkKind::Retention => 3,
    }
}

fn encode_trigger(trigger: Option<Trigger>) -> Result<Option<Vec<u8>>> {
    trigger
        .map(|t| {
            postcard::to_allocvec(&t)
                .map_err(|e| Error::Internal(format!("cannot encode a trigger: {e}")))
        })
        .transpose()
}

fn decode_trigger(bytes: Option<Vec<u8>>) -> Option<Trigger> {
    // An unreadable trigger only loses the label of why the work was due.
    bytes.and_then(|b| postcard::from_bytes(&b).ok())
}

/// A fencing token no other claim holds (random, positive).
fn new_token() -> Result<i64> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| Error::Internal(format!("no randomness: {e}")))?;
    Ok((u64::from_le_bytes(b) >> 1) as i64)
}

impl PgEngine {
    /// Runs `f` on a pooled connection, off the async runtime.
    fn run<T: Send>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> std::result::Result<T, postgres::Error> + Send,
    ) -> Result<T> {
        let mut conn = self.conn()?;
        blocking(|| f(&mut conn).map_err(db_error))
    }
}

impl Claims for PgEngine {
    fn mark_due(
        &self,
        kind: WorkKind,
        ns: &str,
        session_id: &str,
        due_at: UnixNanos,
        trigger: Option<Trigger>,
    ) -> Result<()> {
        let trigger = encode_trigger(trigger)?;
        let k = kind_code(kind);
        self.run(|c| {
            c.execute(
                "INSERT INTO mnemo_claims (kind, ns, session_id, due_at, trigger) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (kind, ns, session_id) DO UPDATE SET \
                   due_at = EXCLUDED.due_at, \
                   trigger = COALESCE(EXCLUDED.trigger, mnemo_claims.trigger), \
                   again = mnemo_claims.token IS NOT NULL",
                &[&k, &ns, &session_id, &due_at, &trigger],
            )
        })?;
        Ok(())
    }

    fn cancel_due(&self, kind: WorkKind, ns: &str, session_id: &str) -> Result<()> {
        let k = kind_code(kind);
        self.run(|c| {
            c.execute(
                "DELETE FROM mnemo_claims WHERE kind = $1 AND ns = $2 AND session_id = $3",
                &[&k, &ns, &session_id],
            )
        })?;
        Ok(())
    }

    fn claim_due(
        &self,
        kind: WorkKind,
        now: UnixNanos,
        lease_nanos: i64,
        limit: usize,
    ) -> Result<Vec<Claim>> {
        let k = kind_code(kind);
        // At most 1,024 claims per call (each gets a token of its own).
        let limit = limit.min(1024);
        let until = now.saturating_add(lease_nanos);
        let tokens = (0..limit)
            .map(|_| new_token())
            .collect::<Result<Vec<_>>>()?;
        let limit = limit as i64;
        let rows = self.run(|c| {
            let mut tx = c.transaction()?;
            let rows = tx.query(
                "SELECT ns, session_id, trigger FROM mnemo_claims \
                 WHERE kind = $1 AND ((token IS NULL AND due_at <= $2) OR lease_until <= $2) \
                 ORDER BY due_at LIMIT $3 FOR UPDATE SKIP LOCKED",
                &[&k, &now, &limit],
            )?;
            let mut out = Vec::with_capacity(rows.len());
            for (row, token) in rows.into_iter().zip(&tokens) {
                let (ns, id): (String, String) = (row.get(0), row.get(1));
                let params: [&(dyn ToSql + Sync); 5] = [token, &until, &k, &ns, &id];
                tx.execute(
                    "UPDATE mnemo_claims SET token = $1, lease_until = $2, again = false \
                     WHERE kind = $3 AND ns = $4 AND session_id = $5",
                    &params,
                )?;
                out.push((ns, id, row.get::<_, Option<Vec<u8>>>(2), *token));
            }
            tx.commit()?;
            Ok(out)
        })?;
        Ok(rows
            .into_iter()
            .map(|(namespace, session_id, trigger, token)| Claim {
                kind,
                namespace,
                session_id,
                trigger: decode_trigger(trigger),
                token: token as u64,
            })
            .collect())
    }

    fn complete_claim(&self, claim: &Claim) -> Result<()> {
        let k = kind_code(claim.kind);
        let token = claim.token as i64;
        let (ns, id) = (claim.namespace.as_str(), claim.session_id.as_str());
        let outcome = self.run(|c| {
            // Done, unless marked due again while held: then it is free
            // and due once more.
            let deleted = c.execute(
                "DELETE FROM mnemo_claims WHERE kind = $1 AND ns = $2 AND session_id = $3 \
                 AND token = $4 AND NOT again",
                &[&k, &ns, &id, &token],
            )?;
            if deleted > 0 {
                return Ok(true);
            }
            let freed = c.execute(
                "UPDATE mnemo_claims SET token = NULL, lease_until = NULL, again = false \
                 WHERE kind = $1 AND ns = $2 AND session_id = $3 AND token = $4",
                &[&k, &ns, &id, &token],
            )?;
            if freed > 0 {
                return Ok(true);
            }
            // Gone (cancelled) is fine; held by another token is not.
            let held = c.query_opt(
                "SELECT 1 FROM mnemo_claims WHERE kind = $1 AND ns = $2 AND session_id = $3",
                &[&k, &ns, &id],
            )?;
            Ok(held.is_none())
        })?;
        if outcome {
            Ok(())
        } else {
            Err(Error::Aborted(format!(
                "the claim on {ns}/{id} was lost (its lease expired and another worker took it)"
            )))
        }
    }

    fn next_due(&self, kind: WorkKind) -> Result<Option<UnixNanos>> {
        let k = kind_code(kind);
        self.run(|c| {
            c.query_one(
                "SELECT min(CASE WHEN token IS NULL THEN due_at ELSE lease_until END) \
                 FROM mnemo_claims WHERE kind = $1",
                &[&k],
            )
            .map(|r| r.get::<_, Option<i64>>(0))
        })
    }

    fn due_count(&self, kind: WorkKind) -> Result<u64> {
        let k = kind_code(kind);
        self.run(|c| {
            c.query_one("SELECT count(*) FROM mnemo_claims WHERE kind = $1", &[&k])
                .map(|r| r.get::<_, i64>(0) as u64)
        })
    }
}
