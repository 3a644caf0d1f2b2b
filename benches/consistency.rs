//! What read-your-writes costs: the same daemon, data and requests with
//! the wait off (`read_your_writes_wait_ms = 0`, the index trails the store
//! as before) and on (the default), in one run.
//!
//! For each: a subject of `MNEMO_BENCH_RW_TURNS` turns (default 100,000,
//! 1,000 per session) appended over 8 connections; then search latency
//! (p50/p99) with no write before the searches, and with an append just
//! before each search whose word the search asks for (and whether it was
//! found), the rounds back to back and then `PACED_GAP` apart (an agent's
//! pace: a turn, then a recall, seconds later the next); then append throughput over 16 connections for a few seconds
//! (`MNEMO_BENCH_RW_SECS`, default 5), other subjects' sessions, while one
//! more client searches the first subject (which no one writes then): a
//! read waits only for writes it can see, so those searches should cost
//! what they cost with the wait off.
//!
//! `cargo bench --bench consistency`. Prints a table and a JSON line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mnemo::config::Config;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use mnemo::server::Daemon;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

const TURNS_PER_SESSION: u64 = 1_000;
const BATCH: u64 = 250;
const LOADERS: usize = 8;
const APPENDERS: usize = 16;
const SEARCHES: u64 = 300;
/// Rounds of append-then-search at an agent's pace, and their spacing.
const PACED: u64 = 50;
const PACED_GAP: Duration = Duration::from_millis(200);

struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<mnemo::Result<()>>,
}

async fn start(data_dir: PathBuf, wait_ms: u64) -> Running {
    let mut config = Config {
        data_dir,
        ..Config::default()
    };
    config.limits.read_your_writes_wait_ms = wait_ms;
    let daemon = Daemon::open(config).await.expect("daemon opens");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(daemon.serve(listener, async {
        let _ = stopped.await;
    }));
    Running { addr, stop, task }
}

async fn client(addr: SocketAddr) -> MemoryServiceClient<Channel> {
    for _ in 0..200 {
        if let Ok(c) = MemoryServiceClient::connect(format!("http://{addr}")).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("cannot connect to {addr}");
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const WORDS: [&str; 32] = [
    "order",
    "refund",
    "customer",
    "invoice",
    "account",
    "delivery",
    "ticket",
    "agent",
    "payment",
    "error",
    "tracking",
    "update",
    "address",
    "support",
    "parcel",
    "warehouse",
    "carrier",
    "label",
    "return",
    "credit",
    "card",
    "receipt",
    "discount",
    "voucher",
    "schedule",
    "courier",
    "window",
    "signature",
    "damage",
    "claim",
    "photo",
    "manager",
];

fn text(rng: &mut Rng) -> String {
    let mut s = String::new();
    while s.len() < 180 {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        // A rarer word now and then, so searches have something to rank.
        if rng.below(4) == 0 {
            s.push_str(&format!(" w{}", rng.below(20_000)));
        }
    }
    s
}

fn turn(content: String) -> pb::NewTurn {
    pb::NewTurn {
        role: pb::Role::User.into(),
        speaker: "customer:1".into(),
        content,
        ..Default::default()
    }
}

async fn session(c: &mut MemoryServiceClient<Channel>, id: &str) {
    session_of(c, id, "customer:1").await;
}

async fn session_of(c: &mut MemoryServiceClient<Channel>, id: &str, subject: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: "bench".into(),
        session_id: id.into(),
        subject_id: subject.into(),
        settings: Some(pb::SessionSettings {
            // Summaries off: the figures are search's and append's.
            summary_every_turns: 10_000,
            context_limit_tokens: 10_000_000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .expect("create session");
}

async fn fill(addr: SocketAddr, turns: u64) {
    let sessions = turns.div_ceil(TURNS_PER_SESSION);
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..LOADERS {
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = client(addr).await;
            let mut rng = Rng(0x9e37_79b9 + w as u64);
            loop {
                let s = next.fetch_add(1, Ordering::Relaxed);
                if s >= sessions {
                    return;
                }
                let id = format!("s{s}");
                session(&mut c, &id).await;
                for _ in 0..TURNS_PER_SESSION / BATCH {
                    let turns = (0..BATCH).map(|_| turn(text(&mut rng))).collect();
                    c.append_turns(pb::AppendTurnsRequest {
                        namespace: "bench".into(),
                        session_id: id.clone(),
                        turns,
                        ..Default::default()
                    })
                    .await
                    .expect("append");
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("loader");
    }
}

fn search(query: String) -> pb::SearchRequest {
    pb::SearchRequest {
        namespace: "bench".into(),
        subject_id: "customer:1".into(),
        query,
        limit: 10,
        ..Default::default()
    }
}

#[derive(Debug, serde::Serialize)]
struct Figures {
    wait_ms: u64,
    search_p50_us: u64,
    search_p99_us: u64,
    after_write_p50_us: u64,
    after_write_p99_us: u64,
    after_write_found: u64,
    after_write_rounds: u64,
    paced_p50_us: u64,
    paced_p99_us: u64,
    paced_found: u64,
    paced_rounds: u64,
    appends_per_second: f64,
    under_load_p50_us: u64,
    under_load_p99_us: u64,
}

async fn measure(addr: SocketAddr, rng: &mut Rng, tag: u64) -> Figures {
    let mut c = client(addr).await;
    // Everything loaded is searchable before the searches are timed.
    loop {
        let r = c
            .search(search("order".into()))
            .await
            .expect("search")
            .into_inner();
        if r.index_lag == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut plain = Histogram::<u64>::new(3).expect("histogram");
    for _ in 0..SEARCHES {
        let q = format!("w{} {}", rng.below(20_000), WORDS[rng.below(32) as usize]);
        let t = Instant::now();
        c.search(search(q)).await.expect("search");
        plain
            .record(t.elapsed().as_micros() as u64)
            .expect("recorded");
    }
    let probe = format!("probe{tag}");
    session(&mut c, &probe).await;
    let (after, found) = after_writes(&mut c, &probe, rng, SEARCHES, Duration::ZERO).await;
    let (paced, paced_found) = after_writes(&mut c, &probe, rng, PACED, PACED_GAP).await;
    let secs: u64 = std::env::var("MNEMO_BENCH_RW_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let end = Instant::now() + Duration::from_secs(secs);
    let appended = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..APPENDERS {
        let appended = appended.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = client(addr).await;
            let id = format!("load{tag}-{w}");
            session_of(&mut c, &id, &format!("other:{w}")).await;
            let mut rng = Rng(0x51_7cc1 + w as u64);
            while Instant::now() < end {
                c.append_turns(pb::AppendTurnsRequest {
                    namespace: "bench".into(),
                    session_id: id.clone(),
                    turns: vec![turn(text(&mut rng))],
                    ..Default::default()
                })
                .await
                .expect("append");
                appended.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let started = Instant::now();
    // The first subject's reader, while the others write.
    let mut under_load = Histogram::<u64>::new(3).expect("histogram");
    while Instant::now() < end {
        let q = format!("w{} {}", rng.below(20_000), WORDS[rng.below(32) as usize]);
        let t = Instant::now();
        c.search(search(q)).await.expect("search");
        under_load
            .record(t.elapsed().as_micros() as u64)
            .expect("recorded");
    }
    for t in tasks {
        t.await.expect("appender");
    }
    let rate = appended.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    Figures {
        wait_ms: 0,
        search_p50_us: plain.value_at_quantile(0.5),
        search_p99_us: plain.value_at_quantile(0.99),
        after_write_p50_us: after.value_at_quantile(0.5),
        after_write_p99_us: after.value_at_quantile(0.99),
        after_write_found: found,
        after_write_rounds: SEARCHES,
        paced_p50_us: paced.value_at_quantile(0.5),
        paced_p99_us: paced.value_at_quantile(0.99),
        paced_found,
        paced_rounds: PACED,
        appends_per_second: rate,
        under_load_p50_us: under_load.value_at_quantile(0.5),
        under_load_p99_us: under_load.value_at_quantile(0.99),
    }
}

/// `rounds` of: append a turn with a new word to `session`, then search
/// for the word at once, `gap` between rounds. The searches' latency and
/// how many found the turn.
async fn after_writes(
    c: &mut MemoryServiceClient<Channel>,
    session: &str,
    rng: &mut Rng,
    rounds: u64,
    gap: Duration,
) -> (Histogram<u64>, u64) {
    let mut after = Histogram::<u64>::new(3).expect("histogram");
    let mut found = 0;
    for i in 0..rounds {
        tokio::time::sleep(gap).await;
        let w = format!("probe{i}x{}", rng.below(1_000_000));
        c.append_turns(pb::AppendTurnsRequest {
            namespace: "bench".into(),
            session_id: session.into(),
            turns: vec![turn(format!("the probe word is {w}"))],
            ..Default::default()
        })
        .await
        .expect("append");
        let t = Instant::now();
        let hits = c.search(search(w)).await.expect("search").into_inner().hits;
        after
            .record(t.elapsed().as_micros() as u64)
            .expect("recorded");
        found += u64::from(!hits.is_empty());
    }
    (after, found)
}

fn main() {
    let turns: u64 = std::env::var("MNEMO_BENCH_RW_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut rows = Vec::new();
    runtime.block_on(async {
        // One data set, loaded once; each setting gets the daemon over it
        // in turn (the probes and the load each add their own sessions).
        let dir = tmp.path().join("data");
        let d = start(dir.clone(), 0).await;
        let t = Instant::now();
        fill(d.addr, turns).await;
        eprintln!("loaded {turns} turns in {:.1} s", t.elapsed().as_secs_f64());
        let _ = d.stop.send(());
        d.task.await.expect("daemon task").expect("clean stop");
        for (i, wait_ms) in [0u64, 2000].into_iter().enumerate() {
            let d = start(dir.clone(), wait_ms).await;
            let mut rng = Rng(0xfeed + i as u64);
            let mut f = measure(d.addr, &mut rng, i as u64).await;
            f.wait_ms = wait_ms;
            rows.push(f);
            let _ = d.stop.send(());
            d.task.await.expect("daemon task").expect("clean stop");
        }
    });
    println!("read-your-writes at {turns} indexed turns (search: limit 10, one subject)");
    println!("| read_your_writes_wait_ms | search p50 / p99 (µs) | search right after an append p50 / p99 (µs), found | the same, rounds {} ms apart | appends/s at {APPENDERS} clients (other subjects) | search meanwhile p50 / p99 (µs) |", PACED_GAP.as_millis());
    println!("|---:|---:|---:|---:|---:|---:|");
    for f in &rows {
        println!(
            "| {} | {} / {} | {} / {}, {}/{} | {} / {}, {}/{} | {:.0} | {} / {} |",
            f.wait_ms,
            f.search_p50_us,
            f.search_p99_us,
            f.after_write_p50_us,
            f.after_write_p99_us,
            f.after_write_found,
            f.after_write_rounds,
            f.paced_p50_us,
            f.paced_p99_us,
            f.paced_found,
            f.paced_rounds,
            f.appends_per_second,
            f.under_load_p50_us,
            f.under_load_p99_us
        );
    }
    println!(
        "{}",
        serde_json::to_string(&rows).expect("figures serialize")
    );
}
