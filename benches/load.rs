//! The load test: the real `mnemo` binary on loopback in a temporary data
//! directory, driven by 64 clients (each on its own connection) mixing
//! appends (70%, each with an idempotency key), context bundles (15%) and
//! searches (15%) for 60 s. Bounded in count and time; talks only to
//! 127.0.0.1.
//!
//! It fails (exit status non-zero) when any call ends with a code other
//! than the shedding codes (RESOURCE_EXHAUSTED, UNAVAILABLE), or when an
//! acknowledged turn is missing, duplicated or out of order afterwards.
//! It reports throughput, latency, error counts by code and the daemon's
//! RSS over time (peak, and growth over the second half of the run).
//!
//! ```text
//! cargo bench --bench load                                   # 64 clients, 60 s
//! MNEMO_LOAD_SECS=5 cargo bench --profile dev --bench load   # CI's short run
//! ```
//! Environment: `MNEMO_LOAD_SECS`, `MNEMO_LOAD_CLIENTS`. Figures are printed
//! and written to `target/load.json`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Binary;
use hdrhistogram::Histogram;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use tonic::transport::Channel;
use tonic::Code;

const NAMESPACE: &str = "load";
/// Most operations one client makes, whatever the duration.
const MAX_OPS_PER_CLIENT: u64 = 1_000_000;

const WORDS: &[&str] = &[
    "invoice",
    "refund",
    "charger",
    "warranty",
    "shipment",
    "espresso",
    "grinder",
    "boiler",
    "appointment",
    "technician",
    "password",
    "account",
    "subscription",
    "premium",
    "delivery",
    "address",
    "courier",
    "battery",
    "screen",
    "keyboard",
    "discount",
    "coupon",
    "ticket",
    "escalation",
    "billing",
    "contract",
    "renewal",
    "outage",
    "latency",
    "database",
];

#[derive(Default)]
struct Tally {
    calls: BTreeMap<(&'static str, String), u64>,
    latency: BTreeMap<&'static str, Histogram<u64>>,
}

impl Tally {
    fn record(&mut self, kind: &'static str, code: Code, micros: u64) {
        *self.calls.entry((kind, format!("{code:?}"))).or_default() += 1;
        if code == Code::Ok {
            self.latency
                .entry(kind)
                .or_insert_with(|| Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram"))
                .record(micros.max(1))
                .ok();
        }
    }

    fn merge(&mut self, other: Tally) {
        for (k, v) in other.calls {
            *self.calls.entry(k).or_default() += v;
        }
        for (k, h) in other.latency {
            match self.latency.get_mut(k) {
                Some(mine) => mine.add(&h).expect("same bounds"),
                None => {
                    self.latency.insert(k, h);
                }
            }
        }
    }
}

/// A small deterministic generator (xorshift), one per client.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn words(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| WORDS[(self.next() % WORDS.len() as u64) as usize])
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn shedding(code: Code) -> bool {
    matches!(code, Code::ResourceExhausted | Code::Unavailable)
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// One client: its own connection and session; returns its tally and how
/// many turns the daemon acknowledged.
async fn client(url: String, i: usize, until: Instant) -> (Tally, u64) {
    let channel = Channel::from_shared(url)
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut c = MemoryServiceClient::new(channel).max_decoding_message_size(64 << 20);
    let session = format!("client-{i}");
    c.create_session(pb::CreateSessionRequest {
        namespace: NAMESPACE.into(),
        session_id: session.clone(),
        subject_id: format!("subject-{}", i % 8),
        ..Default::default()
    })
    .await
    .expect("create session");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
    let mut tally = Tally::default();
    let mut acked = 0u64;
    let mut n = 0u64;
    while Instant::now() < until && n < MAX_OPS_PER_CLIENT {
        n += 1;
        let op = rng.next() % 20;
        let started = Instant::now();
        if op < 14 {
            // An append is retried with its key until acknowledged, so the
            // check at the end can count exactly.
            let text = format!("Turn {n} of {session}: {}.", rng.words(24));
            let req = pb::AppendTurnsRequest {
                namespace: NAMESPACE.into(),
                session_id: session.clone(),
                turns: vec![common::user_turn(&text)],
                idempotency_key: format!("{session}-{n}"),
                ..Default::default()
            };
            loop {
                let attempt = Instant::now();
                let r = c.append_turns(req.clone()).await;
                let code = r.as_ref().map_or_else(|s| s.code(), |_| Code::Ok);
                tally.record("append", code, attempt.elapsed().as_micros() as u64);
                if code == Code::Ok {
                    acked += 1;
                    break;
                }
                if !shedding(code) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        } else if op < 17 {
            let r = c
                .get_context_bundle(pb::GetContextBundleRequest {
                    namespace: NAMESPACE.into(),
                    session_id: session.clone(),
                    budget_tokens: 2000,
                    ..Default::default()
                })
                .await;
            let code = r.as_ref().map_or_else(|s| s.code(), |_| Code::Ok);
            tally.record("bundle", code, started.elapsed().as_micros() as u64);
        } else {
            let r = c
                .search(pb::SearchRequest {
                    namespace: NAMESPACE.into(),
                    subject_id: format!("subject-{}", i % 8),
                    query: rng.words(2),
                    limit: 10,
                    ..Default::default()
                })
                .await;
            let code = r.as_ref().map_or_else(|s| s.code(), |_| Code::Ok);
            tally.record("search", code, started.elapsed().as_micros() as u64);
        }
    }
    (tally, acked)
}

fn main() {
    let secs: u64 = std::env::var("MNEMO_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let clients: usize = std::env::var("MNEMO_LOAD_CLIENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
        .clamp(1, 512);
    let tmp = tempfile::tempdir().expect("temp dir");
    let daemon = Binary::start(&tmp.path().join("data"), &[]);
    let pid = daemon.pid;
    let url = daemon.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let samples: Arc<Mutex<Vec<(f64, u64)>>> = Arc::default();
    let started = Instant::now();
    let until = started + Duration::from_secs(secs);
    let (tally, acked) = runtime.block_on(async {
        let sampler = {
            let samples = samples.clone();
            tokio::spawn(async move {
                loop {
                    samples
                        .lock()
                        .unwrap()
                        .push((started.elapsed().as_secs_f64(), rss_kib(pid, "VmRSS:")));
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
        };
        let tasks: Vec<_> = (0..clients)
            .map(|i| tokio::spawn(client(url.clone(), i, until)))
            .collect();
        let mut tally = Tally::default();
        let mut acked = Vec::new();
        for t in tasks {
            let (t, a) = t.await.expect("client task");
            tally.merge(t);
            acked.push(a);
        }
        sampler.abort();
        (tally, acked)
    });
    let elapsed = started.elapsed().as_secs_f64();
    let peak_kib = rss_kib(pid, "VmHWM:");

    // Every acknowledged turn present exactly once, gap-free.
    let lost = runtime.block_on(async {
        let mut c = MemoryServiceClient::new(
            Channel::from_shared(url.clone())
                .unwrap()
                .connect()
                .await
                .unwrap(),
        )
        .max_decoding_message_size(64 << 20);
        let mut problems = Vec::new();
        for (i, &a) in acked.iter().enumerate() {
            let turns = common::all_turns(&mut c, NAMESPACE, &format!("client-{i}")).await;
            let seqs: Vec<u64> = turns.iter().map(|t| t.seq).collect();
            if seqs != (1..=a).collect::<Vec<_>>() {
                problems.push(format!(
                    "client-{i}: {a} acknowledged, {} stored",
                    seqs.len()
                ));
            }
        }
        problems
    });
    let status = daemon.terminate();

    // Report.
    let samples = samples.lock().unwrap().clone();
    let at = |frac: f64| {
        samples
            .iter()
            .rev()
            .find(|(t, _)| *t <= elapsed * frac)
            .map_or(0, |(_, r)| *r)
    };
    let (mid, end) = (at(0.5), at(1.0));
    let growth = if mid > 0 {
        (end as f64 / mid as f64 - 1.0) * 100.0
    } else {
        0.0
    };
    println!("load: {clients} clients, {elapsed:.1} s");
    println!(
        "{:<8} {:>20} {:>10} {:>10} {:>10} {:>10}",
        "call", "code", "count", "per s", "p50 ms", "p99 ms"
    );
    let mut unexpected = 0u64;
    let mut by_code = serde_json::Map::new();
    for ((kind, code), count) in &tally.calls {
        let h = tally.latency.get(kind);
        let (p50, p99) = match (code.as_str(), h) {
            ("Ok", Some(h)) => (
                h.value_at_quantile(0.5) as f64 / 1000.0,
                h.value_at_quantile(0.99) as f64 / 1000.0,
            ),
            _ => (0.0, 0.0),
        };
        println!(
            "{kind:<8} {code:>20} {count:>10} {:>10.0} {p50:>10.2} {p99:>10.2}",
            *count as f64 / elapsed
        );
        if code != "Ok" && code != "ResourceExhausted" && code != "Unavailable" {
            unexpected += count;
        }
        by_code.insert(
            format!("{kind}.{code}"),
            serde_json::json!({"count": count, "per_sec": *count as f64 / elapsed, "p50_ms": p50, "p99_ms": p99}),
        );
    }
    let total_acked: u64 = acked.iter().sum();
    println!(
        "acknowledged turns: {total_acked}; lost or duplicated: {}; unexpected errors: {unexpected}",
        lost.len()
    );
    println!(
        "daemon RSS: peak {:.0} MiB; {:.0} MiB at half time, {:.0} MiB at the end ({growth:+.1}% over the second half)",
        peak_kib as f64 / 1024.0,
        mid as f64 / 1024.0,
        end as f64 / 1024.0
    );
    let report = serde_json::json!({
        "clients": clients,
        "seconds": elapsed,
        "calls": by_code,
        "acknowledged_turns": total_acked,
        "lost": lost.len(),
        "unexpected_errors": unexpected,
        "rss_peak_mib": peak_kib as f64 / 1024.0,
        "rss_half_mib": mid as f64 / 1024.0,
        "rss_end_mib": end as f64 / 1024.0,
        "rss_second_half_growth_percent": growth,
        "rss_samples_kib": samples,
        "daemon_exit": status.code(),
    });
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/load.json");
    let _ = std::fs::write(&out, serde_json::to_string_pretty(&report).unwrap());
    println!("written to {}", out.display());

    for p in &lost {
        eprintln!("lost: {p}");
    }
    assert!(
        lost.is_empty(),
        "acknowledged turns were lost or duplicated"
    );
    assert_eq!(unexpected, 0, "calls failed with codes other than shedding");
    assert!(
        status.success(),
        "the daemon did not exit cleanly: {status:?}"
    );
}
