//! sled against PostgreSQL, in one run: the real `mnemo` binary on
//! loopback, on its embedded sled store, on PostgreSQL with one daemon,
//! and on PostgreSQL with three daemons sharing the database (clients
//! spread over them). Appends (one turn each, with an idempotency key, each
//! client on a session of its own) at concurrency 1, 16 and 64: p50/p99
//! latency and throughput; then GetContextBundle (2,000 tokens) and Search
//! p50/p99 on a 400-turn session, on sled and on PostgreSQL.
//!
//! PostgreSQL is a throwaway cluster the bench starts (as the tests do;
//! `MNEMO_TEST_POSTGRES_URL` for another), with `fsync` and
//! `synchronous_commit` on, as sled syncs before every acknowledgement.
//!
//! ```text
//! cargo bench --bench stores                                  # 5 s per cell
//! MNEMO_BENCH_STORE_SECS=1 cargo bench --profile dev --bench stores   # CI smoke
//! ```
//! Figures are printed and written to `target/stores.json`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{append_req, user_turn, Binary};
use hdrhistogram::Histogram;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use tonic::transport::Channel;

type Client = MemoryServiceClient<Channel>;

const NS: &str = "bench";

struct Setup {
    name: &'static str,
    daemons: Vec<Binary>,
    _dirs: Vec<tempfile::TempDir>,
}

fn sled() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let d = Binary::start(&tmp.path().join("data"), &[]);
    Setup {
        name: "sled",
        daemons: vec![d],
        _dirs: vec![tmp],
    }
}

fn postgres(name: &'static str, n: usize, url: &str) -> Setup {
    let mut daemons = Vec::new();
    let mut dirs = Vec::new();
    for _ in 0..n {
        let tmp = tempfile::tempdir().unwrap();
        daemons.push(Binary::start_on_postgres(
            &tmp.path().join("data"),
            url,
            &["--postgres-pool-size", "32"],
        ));
        dirs.push(tmp);
    }
    Setup {
        name,
        daemons,
        _dirs: dirs,
    }
}

async fn connect(url: String) -> Client {
    for _ in 0..200 {
        if let Ok(c) = MemoryServiceClient::connect(url.clone()).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("cannot connect to {url}");
}

async fn create(c: &mut Client, id: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: NS.into(),
        session_id: id.into(),
        subject_id: format!("subject:{id}"),
        settings: Some(pb::SessionSettings {
            summary_every_turns: 10_000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
}

/// Latency (µs) percentiles and calls per second.
#[derive(Debug, Clone, Copy)]
struct Cell {
    p50_us: u64,
    p99_us: u64,
    per_sec: f64,
}

fn cell(h: &Histogram<u64>, secs: f64) -> Cell {
    Cell {
        p50_us: h.value_at_quantile(0.5),
        p99_us: h.value_at_quantile(0.99),
        per_sec: h.len() as f64 / secs,
    }
}

async fn appends(setup: &Setup, clients: usize, secs: u64, round: usize) -> Cell {
    let urls: Vec<String> = setup.daemons.iter().map(Binary::url).collect();
    let mut tasks = Vec::new();
    let started = Instant::now();
    let until = started + Duration::from_secs(secs);
    for w in 0..clients {
        let url = urls[w % urls.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut c = connect(url).await;
            let id = format!("a{round}-{w}");
            create(&mut c, &id).await;
            let mut h = Histogram::<u64>::new(3).unwrap();
            let mut i = 0u64;
            while Instant::now() < until {
                let mut req = append_req(
                    NS,
                    &id,
                    vec![user_turn(&format!(
                        "Turn {i}: the refund for order ORD-{w}{i} goes out by Friday."
                    ))],
                );
                req.idempotency_key = format!("{w}-{i}");
                let t = Instant::now();
                c.append_turns(req).await.expect("append");
                h.record(t.elapsed().as_micros() as u64).unwrap();
                i += 1;
            }
            h
        }));
    }
    let mut all = Histogram::<u64>::new(3).unwrap();
    for t in tasks {
        all.add(t.await.unwrap()).unwrap();
    }
    cell(&all, started.elapsed().as_secs_f64())
}

/// Bundle and search latency on a 400-turn session.
async fn reads(setup: &Setup, calls: usize) -> (Cell, Cell) {
    let mut c = connect(setup.daemons[0].url()).await;
    create(&mut c, "reads").await;
    for chunk in 0..20 {
        let turns = (0..20)
            .map(|i| {
                let n = chunk * 20 + i;
                user_turn(&format!(
                    "Message {n}: the courier lost parcel PKG-{n}; the customer wants a refund to card ending {n:04}."
                ))
            })
            .collect();
        c.append_turns(append_req(NS, "reads", turns))
            .await
            .unwrap();
    }
    // The index follows the store shortly after each write.
    common::search_until(&mut c, NS, "subject:reads", "PKG-399", |hits| {
        !hits.is_empty()
    })
    .await;
    let mut bundle = Histogram::<u64>::new(3).unwrap();
    let started = Instant::now();
    for i in 0..calls {
        let t = Instant::now();
        c.get_context_bundle(pb::GetContextBundleRequest {
            namespace: NS.into(),
            session_id: "reads".into(),
            budget_tokens: 2000,
            query: format!("what happened to parcel PKG-{}", i % 400),
            ..Default::default()
        })
        .await
        .unwrap();
        bundle.record(t.elapsed().as_micros() as u64).unwrap();
    }
    let bundle = cell(&bundle, started.elapsed().as_secs_f64());
    let mut search = Histogram::<u64>::new(3).unwrap();
    let started = Instant::now();
    for i in 0..calls {
        let t = Instant::now();
        c.search(common::search_request(
            NS,
            "subject:reads",
            &format!("refund card ending {:04}", i % 400),
        ))
        .await
        .unwrap();
        search.record(t.elapsed().as_micros() as u64).unwrap();
    }
    (bundle, cell(&search, started.elapsed().as_secs_f64()))
}

fn main() {
    let secs: u64 = std::env::var("MNEMO_BENCH_STORE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let calls = if secs <= 1 { 50 } else { 500 };
    let Some(server) = common::postgres::server() else {
        eprintln!("no PostgreSQL: nothing to compare");
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    let mut reads_rows = Vec::new();
    let setups: Vec<Box<dyn Fn() -> Setup>> = vec![
        Box::new(sled),
        Box::new(|| postgres("postgres x1", 1, &server.fresh_database())),
        Box::new(|| postgres("postgres x3", 3, &server.fresh_database())),
    ];
    for make in &setups {
        let setup = make();
        for (round, clients) in [1usize, 16, 64].into_iter().enumerate() {
            let c = rt.block_on(appends(&setup, clients, secs, round));
            println!(
                "append  {:<12} c={clients:<3} p50 {:>7} µs  p99 {:>7} µs  {:>8.0}/s",
                setup.name, c.p50_us, c.p99_us, c.per_sec
            );
            rows.push((setup.name, clients, c));
        }
        if setup.daemons.len() == 1 {
            let (b, s) = rt.block_on(reads(&setup, calls));
            println!(
                "bundle  {:<12} p50 {:>7} µs  p99 {:>7} µs;  search p50 {:>7} µs  p99 {:>7} µs",
                setup.name, b.p50_us, b.p99_us, s.p50_us, s.p99_us
            );
            reads_rows.push((setup.name, b, s));
        }
    }
    let json = serde_json::json!({
        "seconds_per_cell": secs,
        "appends": rows.iter().map(|(n, c, x)| serde_json::json!({
            "setup": n, "clients": c, "p50_us": x.p50_us, "p99_us": x.p99_us, "per_sec": x.per_sec,
        })).collect::<Vec<_>>(),
        "reads": reads_rows.iter().map(|(n, b, s)| serde_json::json!({
            "setup": n,
            "bundle_p50_us": b.p50_us, "bundle_p99_us": b.p99_us,
            "search_p50_us": s.p50_us, "search_p99_us": s.p99_us,
        })).collect::<Vec<_>>(),
    });
    let _ = std::fs::create_dir_all("target");
    std::fs::write(
        "target/stores.json",
        serde_json::to_string_pretty(&json).unwrap(),
    )
    .unwrap();
}
