//! Several daemons (the real binary) on one PostgreSQL database: every
//! promise a single daemon makes holds across them. Gap-free seqs and
//! exactly-once appends with retries sent to another daemon, handoff
//! fencing and races through different daemons, a due summary written
//! once, watchers on one daemon following appends made through another,
//! `kill -9` of a daemon under load (its claimed summary finished by
//! another after the lease), and a database restart under load.
//!
//! The server is real (see `common/postgres.rs`); these tests are skipped
//! loudly only when no PostgreSQL is available, and never in CI.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::postgres as pg;
use common::*;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use tonic::transport::Channel;
use tonic::Code;

type Client = MemoryServiceClient<Channel>;

/// Daemons on `url`, each with a data directory of its own (for its
/// search index), a summary lease of 2 s.
struct Fleet {
    daemons: Vec<Option<Binary>>,
    _dirs: Vec<tempfile::TempDir>,
}

fn fleet(url: &str, n: usize) -> Fleet {
    let mut daemons = Vec::new();
    let mut dirs = Vec::new();
    for _ in 0..n {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("mnemo.toml");
        // A request waits at most 1 s for a database connection.
        std::fs::write(
            &config,
            "[summaries]\nlease_secs = 2\n[postgres]\nconnect_timeout_secs = 1\n",
        )
        .unwrap();
        daemons.push(Some(start_on(url, &tmp.path().join("data"), &config)));
        dirs.push(tmp);
    }
    Fleet {
        daemons,
        _dirs: dirs,
    }
}

fn start_on(url: &str, data: &Path, config: &Path) -> Binary {
    Binary::start_on_postgres(
        data,
        url,
        &[
            "--postgres-pool-size",
            "24",
            "--config",
            config.to_str().unwrap(),
        ],
    )
}

impl Fleet {
    fn url(&self, i: usize) -> String {
        self.daemons[i].as_ref().expect("daemon running").url()
    }

    async fn client(&self, i: usize) -> Client {
        connect(self.url(i)).await
    }
}

async fn connect(url: String) -> Client {
    for _ in 0..200 {
        if let Ok(c) = MemoryServiceClient::connect(url.clone()).await {
            return c.max_decoding_message_size(64 << 20);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("cannot connect to {url}");
}

/// A fresh database, or `None` when the tests are skipped.
fn database() -> Option<String> {
    pg::fresh_database()
}

async fn create(c: &mut Client, id: &str, owner: &str, every: u32) {
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        subject_id: "customer:ada".into(),
        owner_agent: owner.into(),
        settings: Some(pb::SessionSettings {
            summary_every_turns: every,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
}

fn keyed(id: &str, text: &str, key: &str) -> pb::AppendTurnsRequest {
    let mut r = append_req("ns", id, vec![user_turn(text)]);
    r.idempotency_key = key.into();
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appenders_spread_over_three_daemons_get_gap_free_seqs_exactly_once() {
    let Some(url) = database() else { return };
    let f = fleet(&url, 3);
    let mut a = f.client(0).await;
    create(&mut a, "s", "", 10_000).await;
    const WRITERS: usize = 16;
    const EACH: usize = 20;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let urls: Vec<String> = (0..3).map(|i| f.url(i)).collect();
        tasks.push(tokio::spawn(async move {
            let mut clients = Vec::new();
            for u in &urls {
                clients.push(connect(u.clone()).await);
            }
            let mut acked = Vec::new();
            for i in 0..EACH {
                let key = format!("w{w}-i{i}");
                let req = keyed("s", &key, &key);
                let first = clients[(w + i) % 3]
                    .append_turns(req.clone())
                    .await
                    .unwrap()
                    .into_inner();
                assert!(!first.replayed);
                // The same request again through another daemon (a client
                // that lost the answer): replayed, nothing written.
                let again = clients[(w + i + 1) % 3]
                    .append_turns(req)
                    .await
                    .unwrap()
                    .into_inner();
                assert!(again.replayed, "{key} retried through another daemon");
                assert_eq!(again.first_seq, first.first_seq, "{key}");
                acked.push((key, first.first_seq));
            }
            acked
        }));
    }
    let mut by_seq = BTreeMap::new();
    for t in tasks {
        for (key, seq) in t.await.unwrap() {
            assert!(by_seq.insert(seq, key).is_none(), "seq {seq} given twice");
        }
    }
    let total = (WRITERS * EACH) as u64;
    assert_eq!(
        by_seq.keys().copied().collect::<Vec<_>>(),
        (1..=total).collect::<Vec<_>>()
    );
    // Every daemon reads the same transcript: each turn once, where its
    // append said.
    for i in 0..3 {
        let mut c = f.client(i).await;
        let turns = all_turns(&mut c, "ns", "s").await;
        assert_eq!(turns.len() as u64, total, "daemon {i}");
        for t in &turns {
            assert_eq!(by_seq[&t.seq], t.content, "daemon {i} seq {}", t.seq);
        }
    }
    let s = get_session(&mut a, "ns", "s").await.unwrap();
    assert_eq!(s.next_seq, total + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_handoff_through_one_daemon_fences_the_others_and_one_of_two_racing_wins() {
    let Some(url) = database() else { return };
    let f = fleet(&url, 3);
    let (mut a, mut b, mut c) = (f.client(0).await, f.client(1).await, f.client(2).await);
    create(&mut a, "h", "agent-a", 10_000).await;
    let mut first = append_req("ns", "h", vec![user_turn("My order ORD-1 is late.")]);
    first.lease_epoch = 1;
    b.append_turns(first).await.unwrap();
    let handed = a
        .handoff(pb::HandoffRequest {
            namespace: "ns".into(),
            session_id: "h".into(),
            from_agent: "agent-a".into(),
            to_agent: "agent-b".into(),
            reason: "shift change".into(),
            lease_epoch: 1,
            budget_tokens: 2000,
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(handed.session.unwrap().lease_epoch, 2);
    // The old owner's epoch is refused by every daemon.
    for client in [&mut b, &mut c] {
        let mut stale = append_req("ns", "h", vec![user_turn("still here")]);
        stale.lease_epoch = 1;
        let err = client.append_turns(stale).await.unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
        assert_eq!(reason(&err), "STALE_LEASE_EPOCH");
    }
    // Two handoffs from agent-b at once, through two daemons: one wins.
    let race = |to: &str, url: String| {
        let to = to.to_owned();
        tokio::spawn(async move {
            let mut c = connect(url).await;
            c.handoff(pb::HandoffRequest {
                namespace: "ns".into(),
                session_id: "h".into(),
                from_agent: "agent-b".into(),
                to_agent: to,
                reason: "escalation".into(),
                lease_epoch: 2,
                budget_tokens: 2000,
                idempotency_key: String::new(),
            })
            .await
        })
    };
    let (x, y) = (race("agent-c", f.url(1)), race("agent-d", f.url(2)));
    let results = [x.await.unwrap(), y.await.unwrap()];
    let wins: Vec<_> = results.iter().filter(|r| r.is_ok()).collect();
    assert_eq!(wins.len(), 1, "{results:?}");
    for r in &results {
        if let Err(e) = r {
            assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        }
    }
    let s = get_session(&mut c, "ns", "h").await.unwrap();
    assert_eq!(s.lease_epoch, 3);
    // One user turn and two handoff event turns.
    assert_eq!(all_turns(&mut a, "ns", "h").await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_on_one_daemon_sees_appends_through_the_others_in_order_once() {
    use pb::watch_session_response::Event;
    let Some(url) = database() else { return };
    let f = fleet(&url, 3);
    let mut a = f.client(0).await;
    create(&mut a, "w", "", 10_000).await;
    let mut b = f.client(1).await;
    let mut stream = b
        .watch_session(pb::WatchSessionRequest {
            namespace: "ns".into(),
            session_id: "w".into(),
            from_seq: 1,
            observer: false,
        })
        .await
        .unwrap()
        .into_inner();
    let mut c = f.client(2).await;
    const N: u64 = 40;
    for i in 1..=N {
        let client = if i % 2 == 0 { &mut a } else { &mut c };
        client
            .append_turns(append_req("ns", "w", vec![user_turn(&format!("turn {i}"))]))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while (seen.len() as u64) < N {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, stream.message())
            .await
            .expect("the watcher on B saw every append in time")
            .unwrap()
            .unwrap();
        if let Some(Event::Turn(t)) = msg.event {
            assert_eq!(t.content, format!("turn {}", t.seq));
            seen.push(t.seq);
        }
    }
    assert_eq!(seen, (1..=N).collect::<Vec<_>>());
    // Nothing more (no turn twice) within a poll round.
    let extra = tokio::time::timeout(Duration::from_millis(2500), stream.message()).await;
    if let Ok(Ok(Some(msg))) = extra {
        assert!(
            !matches!(msg.event, Some(Event::Turn(_))),
            "a turn came twice: {msg:?}"
        );
    }
}

/// Waits until the session's summary reaches `version` (read through `c`).
async fn wait_summary(c: &mut Client, id: &str, version: u64) -> pb::Session {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = get_session(c, "ns", id).await.unwrap();
        if s.summary_version >= version {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "summary {version} of {id} never came (at {})",
            s.summary_version
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn audit_versions(c: &mut Client, id: &str) -> Vec<u64> {
    audit_log(c, "ns", id)
        .await
        .iter()
        .filter(|r| r.validation_passed)
        .map(|r| r.summary_version)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_due_summary_is_written_once_whichever_daemon_claims_it() {
    let Some(url) = database() else { return };
    let f = fleet(&url, 3);
    let mut clients = Vec::new();
    for i in 0..3 {
        clients.push(f.client(i).await);
    }
    for s in 0..6 {
        let id = format!("due-{s}");
        create(&mut clients[0], &id, "", 5).await;
        for i in 0..5 {
            clients[(s + i) % 3]
                .append_turns(append_req(
                    "ns",
                    &id,
                    vec![user_turn(&format!(
                        "I will send invoice INV-{s}{i} to the customer by Friday."
                    ))],
                ))
                .await
                .unwrap();
        }
    }
    for s in 0..6 {
        let id = format!("due-{s}");
        wait_summary(&mut clients[1], &id, 1).await;
    }
    // Give every daemon's worker time to claim twice more.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for s in 0..6 {
        let id = format!("due-{s}");
        let session = get_session(&mut clients[2], "ns", &id).await.unwrap();
        assert_eq!(session.summary_version, 1, "{id}");
        assert_eq!(audit_versions(&mut clients[2], &id).await, [1], "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_a_daemon_under_load_loses_no_acknowledged_turn() {
    let Some(url) = database() else { return };
    let mut f = fleet(&url, 3);
    let mut a = f.client(0).await;
    create(&mut a, "k", "", 10_000).await;
    let urls: Vec<String> = (0..3).map(|i| f.url(i)).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..6 {
        let urls = urls.clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked: HashMap<String, u64> = HashMap::new();
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let key = format!("w{w}-i{i}");
                // Each append is retried with its key through the next
                // daemon until one acknowledges it.
                let mut target = w % 3;
                let mut tries = 0;
                let seq = loop {
                    tries += 1;
                    assert!(tries < 100, "{key} never acknowledged");
                    let Ok(mut c) = MemoryServiceClient::connect(urls[target].clone()).await else {
                        target = (target + 1) % 3;
                        continue;
                    };
                    match c.append_turns(keyed("k", &key, &key)).await {
                        Ok(r) => break r.into_inner().first_seq,
                        Err(_) => target = (target + 1) % 3,
                    }
                };
                acked.insert(key, seq);
                i += 1;
            }
            acked
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    f.daemons[0].take().unwrap().kill9();
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acked = HashMap::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    let mut b = f.client(1).await;
    let turns = all_turns(&mut b, "ns", "k").await;
    let stored: HashMap<&str, u64> = turns.iter().map(|t| (t.content.as_str(), t.seq)).collect();
    assert_eq!(stored.len(), turns.len(), "no turn stored twice");
    for (key, seq) in &acked {
        assert_eq!(
            stored.get(key.as_str()),
            Some(seq),
            "acknowledged {key} kept at its seq"
        );
    }
    let seqs: Vec<u64> = turns.iter().map(|t| t.seq).collect();
    assert_eq!(seqs, (1..=turns.len() as u64).collect::<Vec<_>>());
}

/// A model server that accepts connections and never answers: a daemon
/// summarizing through it holds its claim until it is killed.
fn hanging_model_server() -> (String, std::sync::mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            // Only a completion call counts: the daemon's start-up check
            // (`GET /v1/models`) is held too, but it claims nothing.
            let mut first = [0u8; 4];
            let post =
                std::io::Read::read_exact(&mut conn, &mut first).is_ok() && &first == b"POST";
            held.push(conn);
            if post {
                let _ = tx.send(());
            }
        }
    });
    (url, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_summary_claimed_by_a_killed_daemon_is_finished_by_another_after_the_lease() {
    let Some(url) = database() else { return };
    let (model_url, called) = hanging_model_server();
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("mnemo.toml");
    std::fs::write(
        &config,
        "[summaries]\nlease_secs = 2\n[model]\ntimeout_secs = 600\nretry_budget_secs = 600\n",
    )
    .unwrap();
    // Only daemon A runs at first: it claims the due summary and waits on
    // its model.
    let a = Binary::start_on_postgres(
        &tmp.path().join("a"),
        &url,
        &[
            "--config",
            config.to_str().unwrap(),
            "--summarizer",
            "model",
            "--model-url",
            &model_url,
            "--model-name",
            "hangs",
        ],
    );
    let mut ca = connect(a.url()).await;
    create(&mut ca, "lease", "", 5).await;
    for i in 0..5 {
        ca.append_turns(append_req(
            "ns",
            "lease",
            vec![user_turn(&format!(
                "Step {i}: I will file ticket T-{i} today."
            ))],
        ))
        .await
        .unwrap();
    }
    called
        .recv_timeout(Duration::from_secs(30))
        .expect("daemon A claimed the summary and called its model");
    a.kill9();
    let killed = Instant::now();
    // Daemon B (rules) takes the claim over once A's lease has run out.
    let b = start_on(&url, &tmp.path().join("b"), &config);
    let mut cb = connect(b.url()).await;
    let s = wait_summary(&mut cb, "lease", 1).await;
    assert_eq!(s.summary_version, 1);
    assert!(
        killed.elapsed() >= Duration::from_millis(1500),
        "taken over only after the lease ({:?})",
        killed.elapsed()
    );
    assert_eq!(audit_versions(&mut cb, "lease").await, [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_restart_under_load_loses_nothing_acknowledged() {
    let Some(cluster) = pg::private_cluster(None) else {
        return;
    };
    let url = cluster.fresh_database();
    let f = fleet(&url, 2);
    let mut a = f.client(0).await;
    create(&mut a, "r", "", 10_000).await;
    let urls: Vec<String> = (0..2).map(|i| f.url(i)).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let unavailable = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..4 {
        let urls = urls.clone();
        let stop = stop.clone();
        let unavailable = unavailable.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = connect(urls[w % 2].clone()).await;
            let mut acked: HashMap<String, u64> = HashMap::new();
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let key = format!("w{w}-i{i}");
                let deadline = Instant::now() + Duration::from_secs(60);
                let seq = loop {
                    match c.append_turns(keyed("r", &key, &key)).await {
                        Ok(r) => break r.into_inner().first_seq,
                        Err(e) => {
                            assert_eq!(e.code(), Code::Unavailable, "{e:?}");
                            unavailable.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            assert!(
                                Instant::now() < deadline,
                                "{key}: the daemon never recovered"
                            );
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                };
                acked.insert(key, seq);
                i += 1;
            }
            acked
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c2 = std::thread::scope(|s| s.spawn(|| cluster.stop()).join());
    c2.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    std::thread::scope(|s| s.spawn(|| cluster.start()).join()).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acked = HashMap::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    assert!(
        unavailable.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "clients saw UNAVAILABLE while the database was down"
    );
    let mut b = f.client(1).await;
    let turns = all_turns(&mut b, "ns", "r").await;
    let keys: HashSet<&str> = turns.iter().map(|t| t.content.as_str()).collect();
    assert_eq!(keys.len(), turns.len(), "no turn stored twice");
    for (key, seq) in &acked {
        assert!(
            turns.iter().any(|t| &t.content == key && t.seq == *seq),
            "acknowledged {key} kept at {seq}"
        );
    }
    let seqs: Vec<u64> = turns.iter().map(|t| t.seq).collect();
    assert_eq!(seqs, (1..=turns.len() as u64).collect::<Vec<_>>());
}

/// TLS to the database (rustls): a server with a certificate from a test
/// CA is reached with `sslmode=require` and that CA, and the connection is
/// encrypted; with another CA the daemon's store refuses the server.
#[test]
fn the_database_is_reached_over_tls_checked_against_the_given_ca() {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let ca = |_: ()| {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
    };
    let (good, other) = (ca(()), ca(()));
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &good)
        .unwrap();
    let Some(cluster) = pg::private_cluster(Some((&cert.pem(), &key.serialize_pem()))) else {
        return;
    };
    let url = format!("{} sslmode=require", cluster.fresh_database());
    let tmp = tempfile::tempdir().unwrap();
    let (good_ca, other_ca) = (tmp.path().join("good.pem"), tmp.path().join("other.pem"));
    std::fs::write(&good_ca, good.pem()).unwrap();
    std::fs::write(&other_ca, other.pem()).unwrap();
    let options = |ca: &Path| mnemo::store::postgres::PgOptions {
        ca_file: Some(ca.to_path_buf()),
        ..mnemo::store::postgres::PgOptions::new(&url)
    };
    let store = mnemo::store::PgStore::connect(&options(&good_ca)).expect("TLS with the right CA");
    assert!(store.engine().encrypted().unwrap(), "the connection is TLS");
    let refused = mnemo::store::PgStore::connect(&options(&other_ca))
        .err()
        .expect("refused");
    assert!(matches!(refused, mnemo::Error::Unavailable(_)), "{refused}");
    // The default sslmode (prefer) checks the certificate too (unlike
    // libpq): without the CA the server is refused; `disable` connects in
    // plaintext.
    let plain = cluster.fresh_database();
    let refused = mnemo::store::PgStore::connect(&mnemo::store::postgres::PgOptions::new(&plain))
        .err()
        .expect("refused without the CA");
    assert!(matches!(refused, mnemo::Error::Unavailable(_)), "{refused}");
    let store = mnemo::store::PgStore::connect(&mnemo::store::postgres::PgOptions::new(&format!(
        "{plain} sslmode=disable"
    )))
    .expect("plaintext when asked");
    assert!(!store.engine().encrypted().unwrap());
}

/// A database whose schema is newer than this release knows is refused
/// at start, with what to do; the schema is created once by daemons
/// starting together.
#[test]
fn a_newer_schema_is_refused_and_migrations_apply_once() {
    let Some(url) = database() else { return };
    let opts = mnemo::store::postgres::PgOptions::new(&url);
    let stores: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| mnemo::store::PgStore::connect(&opts)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for s in &stores {
        assert!(
            s.is_ok(),
            "four daemons starting together: {:?}",
            s.as_ref().err()
        );
    }
    drop(stores);
    let mut c = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    let version: i32 = c
        .query_one("SELECT version FROM mnemo_schema WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, mnemo::store::postgres::SCHEMA_VERSION);
    c.execute(
        "UPDATE mnemo_schema SET version = version + 1 WHERE id = 1",
        &[],
    )
    .unwrap();
    let err = mnemo::store::PgStore::connect(&opts)
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("newer than this release") && msg.contains("run a newer mnemo"),
        "{msg}"
    );
}

/// Idle sweeping by the same claims: a session made idle-prone through
/// one daemon and written through another goes IDLE once, with one
/// IDLE_TIMEOUT summary, whichever of three daemons sweeps it; a watcher
/// on the third sees the state change once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_session_is_swept_once_by_one_of_three_daemons() {
    use pb::watch_session_response::Event;
    let Some(url) = database() else { return };
    let f = fleet(&url, 3);
    let (mut a, mut b, mut c) = (f.client(0).await, f.client(1).await, f.client(2).await);
    a.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: "idle".into(),
        subject_id: "customer:ada".into(),
        settings: Some(pb::SessionSettings {
            idle_timeout_seconds: 1,
            summary_every_turns: 10_000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut stream = c
        .watch_session(pb::WatchSessionRequest {
            namespace: "ns".into(),
            session_id: "idle".into(),
            from_seq: 1,
            observer: false,
        })
        .await
        .unwrap()
        .into_inner();
    b.append_turns(append_req(
        "ns",
        "idle",
        vec![user_turn("Please refund order ORD-3 ($5.00) by Friday.")],
    ))
    .await
    .unwrap();
    let mut idle_events = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(Some(Ok(msg))) = tokio::time::timeout(left.min(Duration::from_secs(4)), async {
            stream.message().await.transpose()
        })
        .await
        else {
            if idle_events > 0 {
                break;
            }
            continue;
        };
        if let Some(Event::StateChanged(s)) = msg.event {
            if s.state == pb::SessionState::Idle as i32 {
                idle_events += 1;
            }
        }
    }
    assert_eq!(
        idle_events, 1,
        "one IDLE state change seen through the third daemon"
    );
    let s = wait_summary(&mut a, "idle", 1).await;
    assert_eq!(s.state, pb::SessionState::Idle as i32);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        audit_versions(&mut a, "idle").await,
        [1],
        "one idle summary"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_search_with_the_token_of_a_write_through_another_daemon_sees_it() {
    let Some(url) = database() else { return };
    let fleet = fleet(&url, 2);
    let (mut a, mut b) = (fleet.client(0).await, fleet.client(1).await);
    create(&mut a, "s", "", 0).await;
    const TOKEN: &str = "mnemo-consistency-token";
    let mut misses = Vec::new();
    for i in 0..50 {
        let w = format!("relay{i:03}zq");
        let r = a
            .append_turns(append_req(
                "ns",
                "s",
                vec![user_turn(&format!("parcel {w}"))],
            ))
            .await
            .unwrap();
        let token = r
            .metadata()
            .get(TOKEN)
            .expect("a write carries a token")
            .clone();
        let mut req = tonic::Request::new(search_request("ns", "", &w));
        req.metadata_mut().insert(TOKEN, token);
        let hits = b.search(req).await.unwrap().into_inner().hits;
        // The turn before is indexed with this one as its context: only
        // the turn itself holds the word in its own text.
        let own = hits.iter().filter(|h| h.snippet.contains(&w)).count();
        if own != 1 {
            misses.push((i, own));
        }
    }
    assert!(
        misses.is_empty(),
        "searches through daemon 1 with the token of a write through daemon 0 that missed it: {misses:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_removal_through_another_daemon_followed_by_an_append_reaches_the_watchers() {
    use pb::watch_session_response::Event;
    let Some(url) = database() else { return };
    let f = fleet(&url, 2);
    let (mut a, mut b) = (f.client(0).await, f.client(1).await);
    create(&mut a, "rm", "", 10_000).await;
    for round in 1..=5u64 {
        let seq = round;
        b.append_turns(append_req(
            "ns",
            "rm",
            vec![user_turn(&format!("draft {seq}"))],
        ))
        .await
        .unwrap();
        // A watcher on A that has sent the turn.
        let mut stream = a
            .watch_session(pb::WatchSessionRequest {
                namespace: "ns".into(),
                session_id: "rm".into(),
                from_seq: seq,
                observer: false,
            })
            .await
            .unwrap()
            .into_inner();
        let first = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("the turn in time")
            .unwrap()
            .unwrap();
        assert!(matches!(first.event, Some(Event::Turn(ref t)) if t.seq == seq));
        // Through B: the turn goes and another takes its seq at once.
        b.remove_last_turn(pb::RemoveLastTurnRequest {
            namespace: "ns".into(),
            session_id: "rm".into(),
            expected_last_seq: seq,
            ..Default::default()
        })
        .await
        .unwrap();
        b.append_turns(append_req(
            "ns",
            "rm",
            vec![user_turn(&format!("final {seq}"))],
        ))
        .await
        .unwrap();
        let end = loop {
            let msg = tokio::time::timeout(Duration::from_secs(10), stream.message())
                .await
                .expect("round {round}: the watcher on A heard of the removal in time");
            match msg {
                Err(status) => break status,
                Ok(Some(m)) => assert!(
                    !matches!(m.event, Some(Event::Turn(ref t)) if t.seq == seq),
                    "round {round}: the replacement was sent without the removal: {m:?}"
                ),
                Ok(None) => panic!("round {round}: the stream ended without an error"),
            }
        };
        assert_eq!(end.code(), Code::Aborted, "{end:?}");
        assert!(
            end.message().contains(&format!("from_seq={seq}")),
            "{}",
            end.message()
        );
    }
}
