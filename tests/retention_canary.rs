//! Retention leaves nothing of what it removes (issue 44, finding 2): a
//! closed high-risk session whose turns, summaries and audit records are
//! all due loses, with its summaries, the summarizer's saved fold state
//! and its review items (which quote the turns), as DeleteSession's purge
//! does. On sled a canary the turns held is in no file of the data
//! directory after the pass and `mnemo compact`; on PostgreSQL no row
//! holds it and a `pg_dump` of the database does not contain it.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use common::{config_for, TestServer};
use mnemo::client::{connect, ClientOptions, MemoryClient};
use mnemo::config::{Config, RetentionRule, StoreKind};
use mnemo::pb;
use mnemo::runtime::retention::Retention;

const CANARY: &str = "zqretcanary5518marimba";
const NS: &str = "ret";
const DAY: i64 = 86_400 * 1_000_000_000;

fn with_retention(mut config: Config) -> Config {
    config.retention = vec![RetentionRule {
        namespace: NS.into(),
        turns_days: Some(30),
        summaries_days: Some(30),
        audit_days: Some(30),
        facts_days: Some(30),
        summary_versions: None,
    }];
    config
}

/// A daemon whose retention task reads `clock`.
async fn start(config: Config, clock: Arc<AtomicI64>) -> (TestServer, Arc<Retention>) {
    let slot: Arc<Mutex<Option<Arc<Retention>>>> = Arc::default();
    let s = slot.clone();
    let server = TestServer::start_with_hook(config, move |d| {
        let r = d.runtime().retention().expect("retention started");
        r.set_clock(Arc::new(move || clock.load(Ordering::SeqCst)));
        *s.lock().unwrap() = Some(r);
    })
    .await;
    let r = slot.lock().unwrap().take().unwrap();
    (server, r)
}

async fn review_items(c: &mut MemoryClient) -> Vec<pb::ReviewItem> {
    c.list_review_items(pb::ListReviewItemsRequest {
        namespace: NS.into(),
        include_resolved: true,
        ..Default::default()
    })
    .await
    .expect("review items")
    .into_inner()
    .items
}

/// A closed high-risk session (no subject: a subject's carried-over
/// actions are the subject's, and stay) whose turns and pending review
/// item quote the canary; `before_pass` runs then (to show the check can
/// fail); then a pass 31 days later.
async fn fill_and_retain(
    server: &TestServer,
    retention: &Retention,
    clock: &AtomicI64,
    before_pass: impl FnOnce(),
) {
    let mut c = connect(&ClientOptions {
        addr: server.url(),
        ..ClientOptions::default()
    })
    .await
    .expect("connect");
    c.create_session(pb::CreateSessionRequest {
        namespace: NS.into(),
        session_id: "s".into(),
        title: "Refund".into(),
        settings: Some(pb::SessionSettings {
            risk_level: pb::RiskLevel::High as i32,
            summary_every_turns: 1000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .expect("create");
    let what = format!("the duplicate charge {CANARY}");
    let turns = vec![
        common::turn(
            pb::Role::User,
            "user:42",
            &format!("I was charged twice. Please refund {what}."),
        ),
        common::turn(
            pb::Role::Assistant,
            "agent-billing",
            &format!("I will refund {what} of $40 on order A-1001 by Friday."),
        ),
        common::turn(
            pb::Role::User,
            "user:42",
            "Great. Will I get a confirmation email when the refund goes through?",
        ),
    ];
    c.append_turns(common::append_req(NS, "s", turns))
        .await
        .expect("append");
    c.summarize(pb::SummarizeRequest {
        namespace: NS.into(),
        session_id: "s".into(),
        wait: true,
    })
    .await
    .expect("summarize");
    c.close_session(pb::CloseSessionRequest {
        namespace: NS.into(),
        session_id: "s".into(),
    })
    .await
    .expect("close");
    let items = review_items(&mut c).await;
    assert!(
        items
            .iter()
            .any(|i| i.items.iter().any(|l| l.contains(CANARY))),
        "the review item quotes the canary before the pass: {items:?}"
    );
    before_pass();
    clock.store(mnemo::model::now_nanos() + 31 * DAY, Ordering::SeqCst);
    let removed = retention.pass().await.expect("pass");
    assert!(removed.turns == 3 && removed.summaries >= 1, "{removed:?}");
    assert!(
        review_items(&mut c).await.is_empty(),
        "the review item went with the summary it reviewed"
    );
    let s = common::get_session(
        &mut mnemo::pb::memory_service_client::MemoryServiceClient::new(server.channel().await),
        NS,
        "s",
    )
    .await
    .expect("the session record stays");
    assert_eq!(s.title, "Refund", "title kept, as documented");
}

fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    out.push(p.strip_prefix(dir).unwrap().display().to_string());
                }
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sled_no_file_holds_the_canary_after_the_pass_and_compact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut config = with_retention(config_for(&dir));
    if config.store != StoreKind::Sled {
        return; // about sled's files; PostgreSQL has its own case below.
    }
    config.store = StoreKind::Sled;
    let clock = Arc::new(AtomicI64::new(mnemo::model::now_nanos()));
    let (server, retention) = start(config, clock.clone()).await;
    fill_and_retain(&server, &retention, &clock, || {}).await;
    drop(retention);
    server.stop().await;
    let out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["compact", "--data-dir"])
        .arg(&dir)
        .output()
        .expect("run mnemo compact");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = files_holding(&dir, CANARY.as_bytes());
    assert!(left.is_empty(), "the canary is still in {left:?}");
}

/// Whether any row of the database at `url` holds `needle` (in a bytea or
/// text column).
fn rows_holding(url: &str, needle: &str) -> Vec<String> {
    let (url, needle) = (url.to_owned(), needle.to_owned());
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        let columns = c
            .query(
                "SELECT table_name::text, column_name::text FROM information_schema.columns \
                 WHERE table_schema = 'public' AND data_type IN ('bytea', 'text')",
                &[],
            )
            .expect("columns");
        let mut out = Vec::new();
        for row in columns {
            let (t, col): (String, String) = (row.get(0), row.get(1));
            let sql = format!(
                "SELECT count(*) FROM {t} WHERE position(convert_to($1, 'UTF8') in {col}::bytea) > 0"
            );
            let n: i64 = c.query_one(&sql, &[&needle]).expect("scan").get(0);
            if n > 0 {
                out.push(format!("{t}.{col}: {n}"));
            }
        }
        out
    })
    .join()
    .expect("query thread")
}

/// A `pg_dump` of the database at `url`, when the server's binaries are
/// installed.
fn pg_dump(url: &str) -> Option<String> {
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin/pg_dump")))
        .find(|p| p.exists())?;
    let out = Command::new(bin).arg("--dbname").arg(url).output().ok()?;
    assert!(
        out.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_no_row_and_no_dump_holds_the_canary_after_the_pass() {
    let Some(url) = common::postgres::fresh_database() else {
        return; // said loudly by the helper
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut config = with_retention(config_for(&tmp.path().join("data")));
    config.store = StoreKind::Postgres;
    config.postgres.url = url.clone();
    let clock = Arc::new(AtomicI64::new(mnemo::model::now_nanos()));
    let (server, retention) = start(config, clock.clone()).await;
    fill_and_retain(&server, &retention, &clock, || {
        let rows = rows_holding(&url, CANARY);
        assert!(!rows.is_empty(), "the check can fail: rows hold it now");
    })
    .await;
    drop(retention);
    server.stop().await;
    let rows = rows_holding(&url, CANARY);
    assert!(rows.is_empty(), "rows still hold the canary: {rows:?}");
    if let Some(dump) = pg_dump(&url) {
        // bytea columns are dumped as hex.
        let hex = hex::encode(CANARY);
        assert!(
            !dump.contains(CANARY) && !dump.contains(&hex),
            "the dump holds the canary"
        );
    }
}
