//! PostgreSQL's own full-text search over the same turns, beside mnemo's
//! Search: the measurement behind the choice of search for daemons that
//! share a database (docs/benchmarks.md). Turns go into a table with a
//! `tsvector` column (english configuration) and a GIN index; a question
//! becomes the OR of its lexemes (`plainto_tsquery` with `&` turned into
//! `|`, since a natural question rarely has all its words in the answer),
//! filtered by subject and ranked by `ts_rank_cd`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Flat;

/// One question: its subject, its text, and its evidence turns.
pub struct Asked {
    pub subject: String,
    pub question: String,
    pub evidence: Vec<(String, u64)>,
}

/// What the measurement found.
pub struct Fts {
    /// Rank of the first evidence turn in the top 10, per question.
    pub ranks: Vec<Option<usize>>,
    /// Microseconds per turn to insert (tsvector and GIN maintenance).
    pub insert_us_per_turn: f64,
    /// Query latency.
    pub p50: Duration,
    pub p99: Duration,
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v.get(((v.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

/// Loads the turns into a fresh database at `url` and asks every question.
pub fn measure(url: &str, flats: &HashMap<&str, Vec<Flat>>, asked: &[Asked]) -> Fts {
    let mut c = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    c.batch_execute(
        "CREATE TABLE turns (subject text NOT NULL, session_id text NOT NULL, seq bigint NOT NULL,
             body text NOT NULL, tsv tsvector NOT NULL);
         CREATE INDEX turns_tsv ON turns USING gin (tsv);
         CREATE INDEX turns_subject ON turns (subject);",
    )
    .expect("schema");
    let started = Instant::now();
    let mut n = 0usize;
    let insert = c
        .prepare(
            "INSERT INTO turns (subject, session_id, seq, body, tsv)
             VALUES ($1, $2, $3, $4, to_tsvector('english', $4))",
        )
        .expect("prepare");
    for (subject, turns) in flats {
        let mut tx = c.transaction().expect("begin");
        for t in turns {
            let seq = t.seq as i64;
            tx.execute(&insert, &[subject, &t.session_id, &seq, &t.line])
                .expect("insert");
            n += 1;
        }
        tx.commit().expect("commit");
    }
    let insert_us_per_turn = started.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64;
    let query = c
        .prepare(
            "WITH q AS (SELECT replace(plainto_tsquery('english', $2)::text, '&', '|')::tsquery AS q)
             SELECT session_id, seq FROM turns, q
             WHERE subject = $1 AND tsv @@ q.q
             ORDER BY ts_rank_cd(tsv, q.q) DESC LIMIT 10",
        )
        .expect("prepare");
    let mut ranks = Vec::new();
    let mut times = Vec::new();
    for a in asked {
        let t = Instant::now();
        let rows = c.query(&query, &[&a.subject, &a.question]).expect("query");
        times.push(t.elapsed());
        ranks.push(rows.iter().position(|r| {
            let (sid, seq): (String, i64) = (r.get(0), r.get(1));
            a.evidence
                .iter()
                .any(|(s, q)| *s == sid && *q == seq as u64)
        }));
    }
    Fts {
        ranks,
        insert_us_per_turn,
        p50: percentile(&mut times, 0.5),
        p99: percentile(&mut times, 0.99),
    }
}
