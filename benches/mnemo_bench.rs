//! Benchmarks of mnemo's two hot paths, each next to a baseline measured in
//! the same run on the same machine and disk:
//!
//! - `append`: `AppendTurns` with one ~200-byte turn through the real daemon
//!   (in-process, gRPC on 127.0.0.1) at 1, 16 and 64 concurrent appenders,
//!   each on its own session, and 16 appenders sharing one session. Reports
//!   p50/p99 latency, turns/s and syncs per append (group-commit counters).
//!   Baselines: a raw sled insert + flush + fdatasync loop, and a raw
//!   write + fdatasync loop on a plain file.
//! - `tokens`: cl100k_base counting throughput of `mnemo::tokens` against
//!   tiktoken-rs on a generated ~1 MB English-ish corpus; one character
//!   repeated (the case where tiktoken is quadratic); and `count_turn` on
//!   ~200-byte turns.
//!
//! - `summaries`: time to fold 10 new turns into the stored summary of a
//!   session of 100, 1,000, 10,000 and 50,000 turns, next to a from-scratch fold.
//!
//! - `bundles`: `GetContextBundle` (budget 8,000 tokens) through the real
//!   daemon for sessions of 100, 10,000 and 100,000 turns (summarized, plus
//!   a short unsummarized tail); its cost must not grow with the session.
//!   Also the tokens of the whole transcript against the bundle's.
//!
//! - `search`: `Search` (BM25, limit 10) through the real daemon after
//!   10,000 and 1,000,000 turns (1,000 per session; `MNEMO_BENCH_SEARCH_TURNS`
//!   sets the larger size), next to `GetSession` in the same run; and how
//!   fast turns are appended and become searchable.
//!
//! - `floor`: `grpc.health.v1.Health/Check` at concurrency 1 and 64 (the
//!   RPC floor), with `GetSession` and a small `GetContextBundle` as ratios
//!   to it.
//!
//! - `redis`: the usual stack. The same appends (concurrency 1, 16, 64) and
//!   reads (the last 20 of 1,000 turns, concurrency 1 and 16) against
//!   Redis (`redis-server` on loopback, `appendfsync always`, a list per
//!   session) and mnemo, in the same run, as ratios.
//!
//! Run: `cargo bench --bench mnemo_bench -- [append|tokens|summaries|bundles|search|floor|redis|all]` (default
//! `all`). Prints Markdown tables and writes every figure to
//! `target/bench/mnemo_bench.json`. This measures, it does not test: nothing
//! asserts on timing. Every loop stops at a count or a time limit, whichever
//! comes first. MB means 10^6 bytes. `MNEMO_CACHE_MB` sets the daemon's
//! sled page cache (default 1024).

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

// The daemon runs in this process: the allocator the binary uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let which = match Which::from_args() {
        Ok(w) => w,
        Err(arg) => {
            eprintln!(
                "unknown benchmark {arg:?}: use append, tokens, summaries, bundles, search, floor, redis or all"
            );
            std::process::exit(2);
        }
    };
    let mut figures = serde_json::Map::new();
    figures.insert("meta".into(), to_json(&Meta::now()));
    if which == Which::Append || which == Which::All {
        let report = append::run();
        report.print();
        figures.insert("append".into(), to_json(&report));
    }
    if which == Which::Tokens || which == Which::All {
        let report = tokens::run();
        report.print();
        figures.insert("tokens".into(), to_json(&report));
    }
    if which == Which::Summaries || which == Which::All {
        let report = summaries::run();
        report.print();
        figures.insert("summaries".into(), to_json(&report));
    }
    if which == Which::Bundles || which == Which::All {
        let report = bundles::run();
        report.print();
        figures.insert("bundles".into(), to_json(&report));
    }
    if which == Which::Floor || which == Which::All {
        let report = floor::run();
        report.print();
        figures.insert("floor".into(), to_json(&report));
    }
    if which == Which::Redis || which == Which::All {
        let report = usual_stack::run();
        report.print();
        figures.insert("usual_stack".into(), to_json(&report));
    }
    if which == Which::Search || which == Which::All {
        let report = search::run();
        report.print();
        figures.insert("search".into(), to_json(&report));
    }
    write_json(&serde_json::Value::Object(figures));
    write_markdown(which == Which::All);
}

/// Which benchmarks to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Append,
    Tokens,
    Summaries,
    Bundles,
    Search,
    Floor,
    Redis,
    All,
}

impl Which {
    /// cargo passes flags such as `--bench` to a harness-less bench; the
    /// first bare word chooses.
    fn from_args() -> Result<Which, String> {
        match std::env::args()
            .skip(1)
            .find(|a| !a.starts_with('-'))
            .as_deref()
        {
            None | Some("all") => Ok(Which::All),
            Some("append") => Ok(Which::Append),
            Some("tokens") => Ok(Which::Tokens),
            Some("summaries") => Ok(Which::Summaries),
            Some("bundles") => Ok(Which::Bundles),
            Some("search") => Ok(Which::Search),
            Some("floor") => Ok(Which::Floor),
            Some("redis") => Ok(Which::Redis),
            Some(other) => Err(other.to_owned()),
        }
    }
}

/// The conditions of a run, stored with its figures.
#[derive(Serialize)]
struct Meta {
    unix_time_secs: u64,
    cpus: usize,
    scratch_dir: String,
    max_ops_per_case: u64,
    max_seconds_per_case: u64,
    turn_bytes: usize,
    appenders_per_channel: usize,
}

impl Meta {
    fn now() -> Meta {
        Meta {
            unix_time_secs: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            scratch_dir: std::env::temp_dir().display().to_string(),
            max_ops_per_case: measure::MAX_OPS,
            max_seconds_per_case: measure::MAX_TIME.as_secs(),
            turn_bytes: text::TURN_BYTES,
            appenders_per_channel: append::APPENDERS_PER_CHANNEL,
        }
    }
}

fn to_json(value: &impl Serialize) -> serde_json::Value {
    // Plain structs of numbers and strings always serialize.
    serde_json::to_value(value).expect("bench results are plain data")
}

/// `$CARGO_TARGET_DIR/bench/mnemo_bench.json`, or under `./target`.
/// Everything the report prints, kept to be written as Markdown too.
static REPORT: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// `println!` that also keeps the line for the Markdown report.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        let line = format!($($arg)*);
        println!("{line}");
        let mut report = $crate::REPORT.lock().unwrap_or_else(|p| p.into_inner());
        report.push_str(&line);
        report.push('\n');
    }};
}

/// Where the figures go: `target/bench/` (or `$CARGO_TARGET_DIR/bench/`).
fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("bench");
    std::fs::create_dir_all(&dir).expect("cannot create the bench output directory");
    dir
}

/// A full run (`all`) also writes its tables to `docs/benchmarks-latest.md`;
/// every run writes them to `target/bench/mnemo_bench.md`.
fn write_markdown(full: bool) {
    let tables = REPORT.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let path = bench_dir().join("mnemo_bench.md");
    std::fs::write(&path, &tables).expect("cannot write the bench Markdown");
    if full {
        let doc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks-latest.md");
        let text = format!(
            "# Latest full benchmark run\n\nWritten by `cargo bench --bench mnemo_bench -- all` \
             (the harness overwrites this file; the commented figures and their history are in \
             [benchmarks.md](benchmarks.md)).\n\n```text\n{tables}```\n"
        );
        std::fs::write(&doc, text).expect("cannot write docs/benchmarks-latest.md");
        println!("tables written to {}", doc.display());
    }
}

fn write_json(value: &serde_json::Value) {
    let path = bench_dir().join("mnemo_bench.json");
    let text = serde_json::to_string_pretty(value).expect("a JSON value always serializes");
    std::fs::write(&path, text + "\n").expect("cannot write the bench JSON");
    println!("\nfigures written to {}", path.display());
}

/// A figure derived from others (a ratio or a rate).
#[derive(Serialize)]
struct Derived {
    name: String,
    value: f64,
}

impl Derived {
    fn new(name: &str, value: f64) -> Derived {
        Derived {
            name: name.to_owned(),
            value,
        }
    }
}

/// `a / b`, NaN (JSON `null`) when `b` is zero.
fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        f64::NAN
    } else {
        a / b
    }
}

fn print_derived(figures: &[Derived]) {
    out!("\n| figure | value |\n|---|---:|");
    for f in figures {
        out!("| {} | {:.2} |", f.name, f.value);
    }
}

/// Latency histograms, operation budgets and the result of one loop.
mod measure {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use hdrhistogram::Histogram;
    use serde::Serialize;

    /// Every measured loop stops after this many operations in total...
    pub const MAX_OPS: u64 = 2000;
    /// ...or once this much time has passed, whichever comes first.
    pub const MAX_TIME: Duration = Duration::from_secs(10);

    /// Latencies in microseconds, 1 µs to 60 s, three significant digits.
    pub fn histogram() -> Histogram<u64> {
        // Constant bounds that satisfy hdrhistogram's rules (low >= 1,
        // high >= 2 * low, sigfig <= 5).
        Histogram::new_with_bounds(1, 60_000_000, 3).expect("constant bounds are valid")
    }

    pub fn record(hist: &mut Histogram<u64>, elapsed: Duration) {
        hist.saturating_record(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
    }

    /// Hands out operations to concurrent workers until `MAX_OPS` are
    /// taken or `MAX_TIME` has passed.
    pub struct Budget {
        taken: AtomicU64,
        deadline: Instant,
    }

    impl Budget {
        pub fn new() -> Budget {
            Budget {
                taken: AtomicU64::new(0),
                deadline: Instant::now() + MAX_TIME,
            }
        }

        pub fn take(&self) -> bool {
            Instant::now() < self.deadline && self.taken.fetch_add(1, Ordering::Relaxed) < MAX_OPS
        }
    }

    /// One measured loop.
    #[derive(Debug, Clone, Serialize)]
    pub struct LoopResult {
        pub case: String,
        pub concurrency: usize,
        pub ops: u64,
        pub seconds: f64,
        pub ops_per_sec: f64,
        pub p50_us: u64,
        pub p99_us: u64,
        pub p999_us: u64,
        pub max_us: u64,
        /// Group-commit syncs during the loop (daemon cases only).
        pub syncs: Option<u64>,
        /// Durability requests during the loop (daemon cases only).
        pub sync_requests: Option<u64>,
        /// `syncs / ops`; 1 by construction for the raw baselines.
        pub syncs_per_op: f64,
    }

    impl LoopResult {
        pub fn new(
            case: &str,
            concurrency: usize,
            elapsed: Duration,
            hist: &Histogram<u64>,
        ) -> LoopResult {
            let seconds = elapsed.as_secs_f64();
            LoopResult {
                case: case.to_owned(),
                concurrency,
                ops: hist.len(),
                seconds,
                ops_per_sec: super::ratio(hist.len() as f64, seconds),
                p50_us: hist.value_at_quantile(0.50),
                p99_us: hist.value_at_quantile(0.99),
                p999_us: hist.value_at_quantile(0.999),
                max_us: hist.max(),
                syncs: None,
                sync_requests: None,
                syncs_per_op: 1.0,
            }
        }

        pub fn with_syncs(mut self, syncs: u64, requests: u64) -> LoopResult {
            self.syncs = Some(syncs);
            self.sync_requests = Some(requests);
            self.syncs_per_op = super::ratio(syncs as f64, self.ops as f64);
            self
        }
    }

    /// Runs one task per worker state; each calls `op` while the shared
    /// budget lasts, timing every call (`op` takes the state and hands it
    /// back, so a client or connection can live in it). Returns the merged
    /// latencies and the time the whole run took.
    pub async fn concurrent<W, F, Fut>(states: Vec<W>, op: F) -> (Histogram<u64>, Duration)
    where
        W: Send + 'static,
        F: Fn(W) -> Fut + Clone + Send + 'static,
        Fut: std::future::Future<Output = W> + Send + 'static,
    {
        let budget = std::sync::Arc::new(Budget::new());
        let start = Instant::now();
        let tasks: Vec<_> = states
            .into_iter()
            .map(|mut state| {
                let (budget, op) = (budget.clone(), op.clone());
                tokio::spawn(async move {
                    let mut hist = histogram();
                    while budget.take() {
                        let t = Instant::now();
                        state = op(state).await;
                        record(&mut hist, t.elapsed());
                    }
                    hist
                })
            })
            .collect();
        let mut hist = histogram();
        for task in tasks {
            hist.add(task.await.expect("a benchmark worker panicked"))
                .expect("histograms with equal bounds always add");
        }
        (hist, start.elapsed())
    }

    /// Runs `op(i)` in a loop on this thread, timing each call.
    pub fn sync_loop(case: &str, mut op: impl FnMut(u64)) -> LoopResult {
        let budget = Budget::new();
        let mut hist = histogram();
        let start = Instant::now();
        let mut i = 0;
        while budget.take() {
            let t = Instant::now();
            op(i);
            record(&mut hist, t.elapsed());
            i += 1;
        }
        LoopResult::new(case, 1, start.elapsed(), &hist)
    }

    /// Runs `f` up to `max_runs` times (at least once) or until `MAX_TIME`
    /// has passed; returns the median seconds, the runs and `f`'s result.
    pub fn repeated(max_runs: u32, mut f: impl FnMut() -> usize) -> (f64, u32, usize) {
        let start = Instant::now();
        let mut times = Vec::new();
        let mut out = 0;
        while times.is_empty() || (times.len() < max_runs as usize && start.elapsed() < MAX_TIME) {
            let t = Instant::now();
            out = std::hint::black_box(f());
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        (times[times.len() / 2], times.len() as u32, out)
    }
}

/// Deterministic English-ish text: words, punctuation, numbers and
/// code-ish snippets, from a fixed seed so every run counts the same text.
mod text {
    /// Bytes of each appended or counted turn.
    pub const TURN_BYTES: usize = 200;

    /// Split on whitespace into the vocabulary.
    const WORDS: &str = "the agent memory session customer order shipped refund please check \
        status of and to a in is it that for with was account billing invoice tool call \
        returned error retry later summary context window tokens budget we you they can't \
        won't it's delivery address changed yesterday tomorrow warehouse package tracking \
        number support ticket escalate manager approved declined café naïve résumé über";

    const SNIPPETS: &[&str] = &[
        "fn main() { out!(\"{}\", x + 1); }",
        "{\"order_id\": 48213, \"status\": \"shipped\", \"items\": [1, 2, 3]}",
        "SELECT id, name FROM users WHERE age > 30 ORDER BY name;",
        "https://example.com/api/v1/orders?page=2&limit=50",
        "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "$ cargo build --release 2>&1 | tee build.log",
        "if err != nil { return fmt.Errorf(\"lookup: %w\", err) }",
        "def handler(event): return {'statusCode': 200}",
    ];

    /// xorshift64*: deterministic and dependency-free; its statistical
    /// quality does not matter here.
    pub struct Rng(u64);

    impl Rng {
        pub fn new(seed: u64) -> Rng {
            Rng(seed | 1)
        }

        pub fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    fn number(rng: &mut Rng) -> String {
        match rng.below(4) {
            0 => rng.below(1000).to_string(),
            1 => format!("${}.{:02}", rng.below(500), rng.below(100)),
            2 => format!("2024-{:02}-{:02}", 1 + rng.below(12), 1 + rng.below(28)),
            _ => format!("#{}", 10_000 + rng.below(90_000)),
        }
    }

    fn sentence(rng: &mut Rng, words: &[&str], out: &mut String) {
        for i in 0..5 + rng.below(15) {
            if i > 0 {
                if rng.below(10) == 0 {
                    out.push(',');
                }
                out.push(' ');
            }
            match rng.below(12) {
                0 => out.push_str(&number(rng)),
                _ if i == 0 => capitalized(rng.pick(words), out),
                _ => out.push_str(rng.pick(words)),
            }
        }
        out.push_str(rng.pick(&[". ", ". ", ". ", "? ", "! ", ": "]));
        if rng.below(6) == 0 {
            out.push('`');
            out.push_str(rng.pick(SNIPPETS));
            out.push_str("` ");
        }
        if rng.below(8) == 0 {
            out.push_str("\n\n");
        }
    }

    fn capitalized(word: &str, out: &mut String) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }

    /// At least `min_bytes` of text.
    pub fn english(rng: &mut Rng, min_bytes: usize) -> String {
        let words: Vec<&str> = WORDS.split_whitespace().collect();
        let mut out = String::with_capacity(min_bytes + 256);
        while out.len() < min_bytes {
            sentence(rng, &words, &mut out);
        }
        out
    }

    /// `n` distinct turns of at most `TURN_BYTES` (cut at a char boundary).
    pub fn turns(n: usize, seed: u64) -> Vec<String> {
        let mut rng = Rng::new(seed);
        (0..n)
            .map(|_| {
                let mut t = english(&mut rng, TURN_BYTES);
                let mut end = TURN_BYTES;
                while !t.is_char_boundary(end) {
                    end -= 1;
                }
                t.truncate(end);
                t
            })
            .collect()
    }
}

/// `AppendTurns` through the daemon, against raw fsync baselines.
mod append {
    use std::fs::{File, OpenOptions};
    use std::io::Write;
    use std::net::SocketAddr;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use mnemo::config::Config;
    use mnemo::memory::profile::Step;
    use mnemo::memory::Memory;
    use mnemo::pb;
    use mnemo::pb::memory_service_client::MemoryServiceClient;
    use mnemo::server::Daemon;
    use mnemo::store::commit::Stats;
    use serde::Serialize;
    use tokio::sync::oneshot;
    use tokio::task::JoinHandle;
    use tonic::transport::Channel;

    use super::measure::{self, LoopResult};
    use super::{print_derived, ratio, text, Derived};

    /// One HTTP/2 connection serializes its streams' frames, so appenders
    /// share a pool of connections, this many per connection.
    pub const APPENDERS_PER_CHANNEL: usize = 4;
    const NAMESPACE: &str = "bench";

    type Client = MemoryServiceClient<Channel>;

    #[derive(Serialize)]
    pub struct Report {
        raw_write_fdatasync: LoopResult,
        raw_sled_flush_fdatasync: LoopResult,
        /// Concurrency 1, 16 and 64, one session per appender.
        own_sessions: Vec<LoopResult>,
        /// Concurrency 16, every appender on one session.
        one_session_16: LoopResult,
        /// Where each case's appends spent their time inside the daemon.
        steps: Vec<StepRow>,
        derived: Vec<Derived>,
    }

    /// Mean microseconds per append, by step, for one case: the client's
    /// latency, then the daemon's steps (`memory::profile`), the rest being
    /// gRPC decoding, the network and the response.
    #[derive(Serialize)]
    pub struct StepRow {
        case: String,
        concurrency: usize,
        client_us: f64,
        validate_us: f64,
        prepare_us: f64,
        queue_us: f64,
        plan_us: f64,
        store_locked_us: f64,
        durable_wait_us: f64,
        announce_us: f64,
        rest_us: f64,
    }

    pub fn run() -> Report {
        let scratch = tempfile::tempdir().expect("cannot create a temp dir");
        out!("append: scratch dir {}", scratch.path().display());
        let raw_write_fdatasync = raw_write_loop(&scratch.path().join("raw.log"));
        let raw_sled_flush_fdatasync = raw_sled_loop(&scratch.path().join("raw-sled"));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("cannot build the tokio runtime");
        let (own_sessions, one_session_16, steps) =
            runtime.block_on(daemon_cases(scratch.path().join("daemon")));
        let mut report = Report {
            raw_write_fdatasync,
            raw_sled_flush_fdatasync,
            own_sessions,
            one_session_16,
            steps,
            derived: Vec::new(),
        };
        report.derived = derived(&report);
        report
    }

    fn derived(r: &Report) -> Vec<Derived> {
        let (c1, c16, c64) = (&r.own_sessions[0], &r.own_sessions[1], &r.own_sessions[2]);
        let (sled, raw) = (&r.raw_sled_flush_fdatasync, &r.raw_write_fdatasync);
        let q = |a: u64, b: u64| ratio(a as f64, b as f64);
        vec![
            Derived::new(
                "append p99 @1 / raw sled+flush+fdatasync p99",
                q(c1.p99_us, sled.p99_us),
            ),
            Derived::new(
                "append p99 @1 / raw write+fdatasync p99",
                q(c1.p99_us, raw.p99_us),
            ),
            Derived::new(
                "append p50 @1 / raw sled+flush+fdatasync p50",
                q(c1.p50_us, sled.p50_us),
            ),
            Derived::new(
                "append p50 @1 / raw write+fdatasync p50",
                q(c1.p50_us, raw.p50_us),
            ),
            Derived::new(
                "throughput @64 / throughput @1",
                ratio(c64.ops_per_sec, c1.ops_per_sec),
            ),
            Derived::new(
                "throughput @16 / throughput @1",
                ratio(c16.ops_per_sec, c1.ops_per_sec),
            ),
            Derived::new(
                "throughput @16 one session / @16 own sessions",
                ratio(r.one_session_16.ops_per_sec, c16.ops_per_sec),
            ),
        ]
    }

    impl Report {
        pub fn print(&self) {
            out!(
                "\n## append: one {}-byte turn per call, durable on return\n",
                text::TURN_BYTES
            );
            out!("| case | concurrency | ops | p50 (µs) | p99 (µs) | p99.9 (µs) | max (µs) | ops/s | syncs/op |");
            out!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
            let rows = [&self.raw_write_fdatasync, &self.raw_sled_flush_fdatasync]
                .into_iter()
                .chain(&self.own_sessions)
                .chain([&self.one_session_16]);
            for r in rows {
                out!(
                    "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.3} |",
                    r.case,
                    r.concurrency,
                    r.ops,
                    r.p50_us,
                    r.p99_us,
                    r.p999_us,
                    r.max_us,
                    r.ops_per_sec,
                    r.syncs_per_op
                );
            }
            out!("\n### Inside the daemon: mean µs per append, by step\n");
            out!("| case | concurrency | client sees | validate | token count + fingerprint | wait for a blocking thread | plan (under the session lock) | read, encode, apply batch + outbox (locked) | durability wait (group commit) | announce | rest: gRPC decode, network, response |");
            out!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for r in &self.steps {
                out!(
                    "| {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
                    r.case,
                    r.concurrency,
                    r.client_us,
                    r.validate_us,
                    r.prepare_us,
                    r.queue_us,
                    r.plan_us,
                    r.store_locked_us,
                    r.durable_wait_us,
                    r.announce_us,
                    r.rest_us
                );
            }
            print_derived(&self.derived);
        }
    }

    /// Baseline: append ~200 bytes to a plain file and `fdatasync` it.
    fn raw_write_loop(path: &Path) -> LoopResult {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("cannot create the raw baseline file");
        let payload = text::turns(1, 1).remove(0);
        measure::sync_loop("raw write + fdatasync", |_| {
            file.write_all(payload.as_bytes())
                .expect("raw baseline write failed");
            file.sync_data().expect("raw baseline fdatasync failed");
        })
    }

    /// Baseline: what mnemo's sled store does per sync, without the rest:
    /// insert, `flush`, then `fdatasync` of sled's log file.
    fn raw_sled_loop(dir: &Path) -> LoopResult {
        let db = sled::Config::new()
            .path(dir)
            .open()
            .expect("cannot open the raw sled baseline");
        let tree = db.open_tree("bench").expect("cannot open a sled tree");
        // sled 0.34 keeps its whole log in `<dir>/db`.
        let log = File::open(dir.join("db")).expect("cannot open sled's log file");
        let payload = text::turns(1, 2).remove(0);
        measure::sync_loop("raw sled insert + flush + fdatasync", |i| {
            tree.insert(i.to_be_bytes(), payload.as_bytes())
                .expect("raw sled insert failed");
            db.flush().expect("raw sled flush failed");
            log.sync_data().expect("raw sled fdatasync failed");
        })
    }

    /// The daemon cases on one daemon: (own sessions @1, @16, @64; one
    /// session @16).
    async fn daemon_cases(data_dir: PathBuf) -> (Vec<LoopResult>, LoopResult, Vec<StepRow>) {
        let daemon = RunningDaemon::start(data_dir).await;
        let mut own = Vec::new();
        let mut steps = Vec::new();
        for concurrency in [1, 16, 64] {
            let (r, s) = append_case(&daemon, concurrency, SessionLayout::OnePerAppender).await;
            own.push(r);
            steps.push(s);
        }
        let (shared, s) = append_case(&daemon, 16, SessionLayout::Shared).await;
        steps.push(s);
        daemon.stop().await;
        (own, shared, steps)
    }

    /// The real daemon serving on 127.0.0.1:0 from a fresh data dir.
    pub struct RunningDaemon {
        pub addr: SocketAddr,
        stats: Arc<Stats>,
        memory: Arc<Memory>,
        stop: oneshot::Sender<()>,
        task: JoinHandle<mnemo::Result<()>>,
    }

    impl RunningDaemon {
        pub async fn start(data_dir: PathBuf) -> RunningDaemon {
            // `MNEMO_CACHE_MB` sizes sled's page cache, as for `mnemo serve`.
            let cache_mb = std::env::var("MNEMO_CACHE_MB")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(mnemo::config::DEFAULT_CACHE_MB);
            let config = Config {
                data_dir,
                cache_mb,
                ..Config::default()
            };
            let daemon = Daemon::open(config).await.expect("cannot open the daemon");
            let stats = daemon.runtime().sync_stats();
            let memory = daemon.runtime().memory().clone();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("cannot bind 127.0.0.1:0");
            let addr = listener
                .local_addr()
                .expect("a bound listener has an address");
            let (stop, stopped) = oneshot::channel::<()>();
            let shutdown = async {
                // A dropped sender also means stop.
                let _ = stopped.await;
            };
            let task = tokio::spawn(daemon.serve(listener, shutdown));
            RunningDaemon {
                addr,
                stats,
                memory,
                stop,
                task,
            }
        }

        /// (syncs, durability requests, nanoseconds waited for them) so far.
        fn sync_counters(&self) -> (u64, u64, u64) {
            let stats = &self.stats;
            (
                stats.syncs.load(Ordering::Relaxed),
                stats.requests.load(Ordering::Relaxed),
                stats.waited_nanos.load(Ordering::Relaxed),
            )
        }

        pub async fn stop(self) {
            // The receiver lives in the serve task until shutdown.
            let _ = self.stop.send(());
            self.task
                .await
                .expect("the daemon task panicked")
                .expect("the daemon failed to shut down cleanly");
        }
    }

    #[derive(Debug, Clone, Copy)]
    pub enum SessionLayout {
        OnePerAppender,
        Shared,
    }

    /// `concurrency` appenders share `MAX_OPS` appends (or `MAX_TIME`).
    pub async fn append_case(
        daemon: &RunningDaemon,
        concurrency: usize,
        layout: SessionLayout,
    ) -> (LoopResult, StepRow) {
        let case = match layout {
            SessionLayout::OnePerAppender => "AppendTurns, a session per appender",
            SessionLayout::Shared => "AppendTurns, all appenders on one session",
        };
        let mut clients = connect_pool(daemon.addr, concurrency).await;
        let sessions = create_sessions(&mut clients, layout).await;
        let turns = text::turns(concurrency, 3);
        // Warm-up, unmeasured: one append per appender.
        for ((client, session), turn) in clients.iter_mut().zip(&sessions).zip(&turns) {
            append_one(client, session, turn).await;
        }

        let (syncs_before, requests_before, waited_before) = daemon.sync_counters();
        let profile_before = daemon.memory.append_profile().snapshot();
        let states: Vec<_> = clients.into_iter().zip(sessions).zip(turns).collect();
        let (hist, elapsed) =
            measure::concurrent(states, |((mut client, session), turn)| async move {
                append_one(&mut client, &session, &turn).await;
                ((client, session), turn)
            })
            .await;
        let (syncs_after, requests_after, waited_after) = daemon.sync_counters();
        let p = daemon
            .memory
            .append_profile()
            .snapshot()
            .since(&profile_before);
        let requests = (requests_after - requests_before).max(1);
        // The mean durability wait (the indexer's own waits included: it
        // syncs the store before an index commit when a write is unsynced).
        let durable_wait_us = (waited_after - waited_before) as f64 / requests as f64 / 1_000.0;
        let client_us = hist.mean();
        let store_us = p.mean_us(Step::Store);
        let plan_us = p.mean_us(Step::Plan);
        let inside = p.mean_us(Step::Validate)
            + p.mean_us(Step::Prepare)
            + p.mean_us(Step::Queue)
            + store_us
            + p.mean_us(Step::Announce);
        let steps = StepRow {
            case: case.into(),
            concurrency,
            client_us,
            validate_us: p.mean_us(Step::Validate),
            prepare_us: p.mean_us(Step::Prepare),
            queue_us: p.mean_us(Step::Queue),
            plan_us,
            store_locked_us: (store_us - plan_us - durable_wait_us).max(0.0),
            durable_wait_us,
            announce_us: p.mean_us(Step::Announce),
            rest_us: (client_us - inside).max(0.0),
        };
        let result = LoopResult::new(case, concurrency, elapsed, &hist)
            .with_syncs(syncs_after - syncs_before, requests_after - requests_before);
        (result, steps)
    }

    /// Creates session `id` in the bench namespace and appends `turns`
    /// generated user turns to it, 250 per call.
    pub async fn fill_session(client: &mut Client, id: &str, turns: usize) {
        client
            .create_session(pb::CreateSessionRequest {
                namespace: NAMESPACE.into(),
                session_id: id.into(),
                ..Default::default()
            })
            .await
            .expect("CreateSession failed");
        for chunk in text::turns(turns, 5).chunks(250) {
            client
                .append_turns(pb::AppendTurnsRequest {
                    namespace: NAMESPACE.into(),
                    session_id: id.into(),
                    turns: chunk
                        .iter()
                        .map(|t| pb::NewTurn {
                            role: pb::Role::User as i32,
                            speaker: "bench-user".into(),
                            content: t.clone(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .await
                .expect("AppendTurns failed");
        }
    }

    /// One client per appender over `ceil(n / APPENDERS_PER_CHANNEL)`
    /// connections.
    pub async fn connect_pool(addr: SocketAddr, appenders: usize) -> Vec<Client> {
        let mut channels = Vec::new();
        for _ in 0..appenders.div_ceil(APPENDERS_PER_CHANNEL) {
            let channel = Channel::from_shared(format!("http://{addr}"))
                .expect("a socket address makes a valid URI")
                .connect()
                .await
                .expect("cannot connect to the daemon");
            channels.push(channel);
        }
        (0..appenders)
            .map(|i| MemoryServiceClient::new(channels[i / APPENDERS_PER_CHANNEL].clone()))
            .collect()
    }

    /// The session id each client appends to.
    async fn create_sessions(clients: &mut [Client], layout: SessionLayout) -> Vec<String> {
        match layout {
            SessionLayout::Shared => {
                let id = create_session(&mut clients[0]).await;
                vec![id; clients.len()]
            }
            SessionLayout::OnePerAppender => {
                let mut ids = Vec::new();
                for client in clients {
                    ids.push(create_session(client).await);
                }
                ids
            }
        }
    }

    async fn create_session(client: &mut Client) -> String {
        let req = pb::CreateSessionRequest {
            namespace: NAMESPACE.into(),
            ..Default::default()
        };
        let resp = client
            .create_session(req)
            .await
            .expect("CreateSession failed");
        resp.into_inner()
            .session
            .expect("CreateSession returns the session")
            .session_id
    }

    async fn append_one(client: &mut Client, session: &str, content: &str) {
        let req = pb::AppendTurnsRequest {
            namespace: NAMESPACE.into(),
            session_id: session.into(),
            turns: vec![pb::NewTurn {
                role: pb::Role::User as i32,
                speaker: "bench-user".into(),
                content: content.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        // A failed append would make every figure meaningless: stop.
        client.append_turns(req).await.expect("AppendTurns failed");
    }
}

/// The usual stack: the same append and read workload against Redis
/// (Debian's `redis-server` on loopback, `appendonly yes`, `appendfsync
/// always`, one list per session: what Redis-backed memory servers use),
/// next to mnemo in the same run. Skipped, with a note, when
/// `redis-server` is not installed.
mod usual_stack {
    use std::net::TcpListener;
    use std::path::Path;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use mnemo::pb;
    use mnemo::pb::memory_service_client::MemoryServiceClient;
    use serde::Serialize;
    use tonic::transport::Channel;

    use super::append::{self, RunningDaemon, SessionLayout, APPENDERS_PER_CHANNEL};
    use super::measure::{self, LoopResult};
    use super::{print_derived, ratio, text, Derived};

    /// Turns in the session both reads come from, and the turns read.
    const READ_SESSION_TURNS: u64 = 1000;
    const READ_LAST: u64 = 20;

    #[derive(Serialize)]
    pub struct Report {
        skipped: Option<String>,
        mnemo: Vec<LoopResult>,
        redis: Vec<LoopResult>,
        derived: Vec<Derived>,
    }

    /// A private redis-server on a free loopback port, stopped on drop.
    struct Redis {
        child: Child,
        port: u16,
    }

    impl Redis {
        fn start(dir: &Path) -> Result<Redis, String> {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("no free port: {e}"))?
                .port();
            let child = Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args([
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                ])
                .arg("--dir")
                .arg(dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start redis-server: {e}"))?;
            Ok(Redis { child, port })
        }

        async fn connect(&self) -> redis::aio::MultiplexedConnection {
            let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
                .expect("a valid redis URL");
            let started = Instant::now();
            loop {
                match client.get_multiplexed_async_connection().await {
                    Ok(c) => return c,
                    Err(e) if started.elapsed() > Duration::from_secs(10) => {
                        panic!("redis-server did not come up: {e}")
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }
    }

    impl Drop for Redis {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    pub fn run() -> Report {
        let scratch = tempfile::tempdir().expect("cannot create a temp dir");
        let redis = match Redis::start(scratch.path()) {
            Ok(r) => r,
            Err(why) => {
                out!("usual stack: skipped ({why}); install redis-server to compare");
                return Report {
                    skipped: Some(why),
                    mnemo: Vec::new(),
                    redis: Vec::new(),
                    derived: Vec::new(),
                };
            }
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("cannot build the tokio runtime");
        let (mnemo, redis) = runtime.block_on(async {
            let daemon = RunningDaemon::start(scratch.path().join("daemon")).await;
            let (mut mnemo, mut theirs) = (Vec::new(), Vec::new());
            for concurrency in [1, 16, 64] {
                mnemo.push(
                    append::append_case(&daemon, concurrency, SessionLayout::OnePerAppender)
                        .await
                        .0,
                );
                theirs.push(redis_append(&redis, concurrency).await);
            }
            for concurrency in [1, 16] {
                mnemo.push(mnemo_read(&daemon, concurrency).await);
                theirs.push(redis_read(&redis, concurrency).await);
            }
            daemon.stop().await;
            (mnemo, theirs)
        });
        let derived = mnemo
            .iter()
            .zip(&redis)
            .flat_map(|(m, r)| {
                let what = if m.case.starts_with("AppendTurns") {
                    "append"
                } else {
                    "read last 20"
                };
                [
                    Derived::new(
                        &format!("{what} @{}: mnemo p50 / Redis p50", m.concurrency),
                        ratio(m.p50_us as f64, r.p50_us as f64),
                    ),
                    Derived::new(
                        &format!("{what} @{}: mnemo p99 / Redis p99", m.concurrency),
                        ratio(m.p99_us as f64, r.p99_us as f64),
                    ),
                    Derived::new(
                        &format!("{what} @{}: mnemo ops/s / Redis ops/s", m.concurrency),
                        ratio(m.ops_per_sec, r.ops_per_sec),
                    ),
                ]
            })
            .collect();
        Report {
            skipped: None,
            mnemo,
            redis,
            derived,
        }
    }

    impl Report {
        pub fn print(&self) {
            if self.skipped.is_some() {
                return;
            }
            out!("\n## the usual stack: Redis (appendfsync always, a list per session) vs mnemo\n");
            out!("| store | case | concurrency | ops | p50 (µs) | p99 (µs) | ops/s |");
            out!("|---|---|---:|---:|---:|---:|---:|");
            let rows = self
                .mnemo
                .iter()
                .map(|r| ("mnemo", r))
                .chain(self.redis.iter().map(|r| ("Redis", r)));
            for (store, r) in rows {
                out!(
                    "| {store} | {} | {} | {} | {} | {} | {:.0} |",
                    r.case,
                    r.concurrency,
                    r.ops,
                    r.p50_us,
                    r.p99_us,
                    r.ops_per_sec
                );
            }
            print_derived(&self.derived);
        }
    }

    /// Connections shared like mnemo's pool: one per
    /// `APPENDERS_PER_CHANNEL` workers.
    async fn redis_pool(redis: &Redis, workers: usize) -> Vec<redis::aio::MultiplexedConnection> {
        let mut conns = Vec::new();
        for _ in 0..workers.div_ceil(APPENDERS_PER_CHANNEL) {
            conns.push(redis.connect().await);
        }
        (0..workers)
            .map(|i| conns[i / APPENDERS_PER_CHANNEL].clone())
            .collect()
    }

    /// `RPUSH` of one turn (the same ~200 bytes as mnemo's) per call, each
    /// worker on its own list.
    async fn redis_append(redis: &Redis, concurrency: usize) -> LoopResult {
        let conns = redis_pool(redis, concurrency).await;
        let states: Vec<_> = conns
            .into_iter()
            .zip(text::turns(concurrency, 3))
            .enumerate()
            .map(|(i, (con, turn))| (con, format!("session:{concurrency}:{i}"), turn))
            .collect();
        let (hist, elapsed) = measure::concurrent(states, |(mut con, key, turn)| async move {
            let _: i64 = redis::cmd("RPUSH")
                .arg(&key)
                .arg(&turn)
                .query_async(&mut con)
                .await
                .expect("RPUSH failed");
            (con, key, turn)
        })
        .await;
        LoopResult::new("RPUSH, a list per appender", concurrency, elapsed, &hist)
    }

    /// `LRANGE key -20 -1` on a list of 1,000 turns.
    async fn redis_read(redis: &Redis, concurrency: usize) -> LoopResult {
        let mut setup = redis.connect().await;
        let key = format!("read:{concurrency}");
        for turn in text::turns(READ_SESSION_TURNS as usize, 5) {
            let _: i64 = redis::cmd("RPUSH")
                .arg(&key)
                .arg(turn)
                .query_async(&mut setup)
                .await
                .expect("RPUSH failed");
        }
        let conns = redis_pool(redis, concurrency).await;
        let states: Vec<_> = conns.into_iter().map(|con| (con, key.clone())).collect();
        let (hist, elapsed) = measure::concurrent(states, |(mut con, key)| async move {
            let got: Vec<String> = redis::cmd("LRANGE")
                .arg(&key)
                .arg(-(READ_LAST as i64))
                .arg(-1)
                .query_async(&mut con)
                .await
                .expect("LRANGE failed");
            assert_eq!(got.len() as u64, READ_LAST);
            (con, key)
        })
        .await;
        LoopResult::new("LRANGE the last 20 of 1,000", concurrency, elapsed, &hist)
    }

    /// `ListTurns` of the last 20 turns of a 1,000-turn session.
    async fn mnemo_read(daemon: &RunningDaemon, concurrency: usize) -> LoopResult {
        let channel = Channel::from_shared(format!("http://{}", daemon.addr))
            .expect("a valid URI")
            .connect()
            .await
            .expect("cannot connect to the daemon");
        let mut setup = MemoryServiceClient::new(channel);
        let id = format!("read-{concurrency}");
        append::fill_session(&mut setup, &id, READ_SESSION_TURNS as usize).await;
        // Let the summaries of the new turns be written first, so the reads
        // are not measured against the background fold.
        setup
            .summarize(pb::SummarizeRequest {
                namespace: "bench".into(),
                session_id: id.clone(),
                wait: true,
            })
            .await
            .expect("Summarize failed");
        let clients = append::connect_pool(daemon.addr, concurrency).await;
        let states: Vec<_> = clients.into_iter().map(|c| (c, id.clone())).collect();
        let (hist, elapsed) = measure::concurrent(states, |(mut c, id)| async move {
            let got = c
                .list_turns(pb::ListTurnsRequest {
                    namespace: "bench".into(),
                    session_id: id.clone(),
                    newest: READ_LAST as u32,
                    ..Default::default()
                })
                .await
                .expect("ListTurns failed")
                .into_inner();
            assert_eq!(got.turns.len() as u64, READ_LAST);
            (c, id)
        })
        .await;
        LoopResult::new(
            "ListTurns the last 20 of 1,000",
            concurrency,
            elapsed,
            &hist,
        )
    }
}

/// Token counting: mnemo (bpe-openai) against tiktoken-rs, cl100k_base.
mod tokens {
    use mnemo::model::{Encoding, NewTurn, Role};
    use serde::Serialize;
    use tiktoken_rs::CoreBPE;

    use super::measure::repeated;
    use super::{print_derived, ratio, text, Derived};

    const CORPUS_BYTES: usize = 1_000_000;
    const ONE_MIB: usize = 1 << 20;
    /// tiktoken is quadratic on a run without whitespace: about 0.2 s for
    /// 20,000 characters, about 21 s for 200,000.
    const SHORT_RUN: usize = 20_000;
    const TURNS: usize = 1000;

    /// One counting measurement.
    #[derive(Serialize)]
    struct Count {
        case: String,
        bytes: usize,
        runs: u32,
        median_seconds: f64,
        mb_per_sec: f64,
        tokens: usize,
    }

    #[derive(Serialize)]
    pub struct Report {
        counts: Vec<Count>,
        derived: Vec<Derived>,
    }

    pub fn run() -> Report {
        let corpus = text::english(&mut text::Rng::new(42), CORPUS_BYTES);
        let long_run = "a".repeat(ONE_MIB);
        let short_run = "a".repeat(SHORT_RUN);
        let turns = new_turns();
        let tiktoken = tiktoken_rs::cl100k_base().expect("tiktoken-rs embeds cl100k_base");
        mnemo::tokens::warm_up();

        let corpus_mnemo = mnemo_count("mnemo, English-ish corpus", &corpus, 20);
        let corpus_tiktoken = tiktoken_count("tiktoken-rs, English-ish corpus", &tiktoken, &corpus);
        let long_mnemo = mnemo_count("mnemo, 1 MiB of 'a'", &long_run, 10);
        let short_mnemo = mnemo_count("mnemo, 20,000 × 'a'", &short_run, 20);
        let short_tiktoken = tiktoken_count("tiktoken-rs, 20,000 × 'a'", &tiktoken, &short_run);
        let turn_count = count_turns(&turns);

        let derived = vec![
            Derived::new(
                "mnemo / tiktoken-rs MB/s on the corpus",
                ratio(corpus_mnemo.mb_per_sec, corpus_tiktoken.mb_per_sec),
            ),
            Derived::new(
                "tiktoken-rs / mnemo time on 20,000 × 'a'",
                ratio(short_tiktoken.median_seconds, short_mnemo.median_seconds),
            ),
            Derived::new("mnemo ms for 1 MiB of 'a'", long_mnemo.median_seconds * 1e3),
            Derived::new(
                "count_turn turns/s (~200-byte turns)",
                ratio(TURNS as f64, turn_count.median_seconds),
            ),
        ];
        Report {
            counts: vec![
                corpus_mnemo,
                corpus_tiktoken,
                long_mnemo,
                short_mnemo,
                short_tiktoken,
                turn_count,
            ],
            derived,
        }
    }

    fn measured(case: &str, bytes: usize, max_runs: u32, f: impl FnMut() -> usize) -> Count {
        let (median_seconds, runs, tokens) = repeated(max_runs, f);
        Count {
            case: case.to_owned(),
            bytes,
            runs,
            median_seconds,
            mb_per_sec: ratio(bytes as f64 / 1e6, median_seconds),
            tokens,
        }
    }

    fn mnemo_count(case: &str, text: &str, max_runs: u32) -> Count {
        measured(case, text.len(), max_runs, || {
            mnemo::tokens::count(Encoding::Cl100kBase, text)
        })
    }

    fn tiktoken_count(case: &str, bpe: &CoreBPE, text: &str) -> Count {
        measured(case, text.len(), 5, || bpe.encode_ordinary(text).len())
    }

    /// One run counts all `TURNS` turns.
    fn count_turns(turns: &[NewTurn]) -> Count {
        let bytes = turns.iter().map(NewTurn::text_bytes).sum();
        measured(
            &format!("mnemo count_turn, {TURNS} turns of ~200 bytes"),
            bytes,
            50,
            || {
                turns
                    .iter()
                    .map(|t| mnemo::tokens::count_turn(Encoding::Cl100kBase, t) as usize)
                    .sum()
            },
        )
    }

    fn new_turns() -> Vec<NewTurn> {
        text::turns(TURNS, 7)
            .into_iter()
            .map(|content| NewTurn {
                role: Role::User,
                speaker: "bench-user".into(),
                content,
                client_time: None,
                tool_call: None,
                metadata: Default::default(),
            })
            .collect()
    }

    impl Report {
        pub fn print(&self) {
            out!("\n## tokens: cl100k_base, single thread\n");
            out!("| case | bytes | runs | median (ms) | MB/s | tokens |");
            out!("|---|---:|---:|---:|---:|---:|");
            for c in &self.counts {
                out!(
                    "| {} | {} | {} | {:.3} | {:.2} | {} |",
                    c.case,
                    c.bytes,
                    c.runs,
                    c.median_seconds * 1e3,
                    c.mb_per_sec,
                    c.tokens
                );
            }
            print_derived(&self.derived);
        }
    }
}

/// Running summaries: the time to fold 10 new turns into the stored
/// summary of sessions of 100 to 50,000 turns (incremental: it must not
/// grow with the session), next to folding the whole session from scratch.
/// Runs the real pipeline (fold, render, validate, one atomic store write)
/// on a sled store in a temp dir. The store write returns once durable, so
/// each attempt includes its fsync (before the layout change the fsync
/// followed in the daemon and was not part of this figure).
mod summaries {
    use std::time::{Duration, Instant};

    use hdrhistogram::Histogram;
    use mnemo::config::SummaryConfig;
    use mnemo::memory::append::{self, PreparedAppend};
    use mnemo::memory::summary::{self as pipeline, Attempt};
    use mnemo::model::{
        NewTurn, Role, Session, SessionSettings, ToolCall, ToolCallStatus, Trigger,
    };
    use mnemo::store::{SessionStore, SledStore, Store};
    use mnemo::summarize::RuleBased;
    use serde::Serialize;

    const LINES: [&str; 10] = [
        "Hi, I was charged twice for order ORD-{n}, $49.99 each time.",
        "Let me look up order ORD-{n} for you.",
        "I can see two charges of $49.99 on 2024-03-14 for ORD-{n}.",
        "Can you refund the duplicate charge on ORD-{n}?",
        "We decided to refund the duplicate charge because it was a processing error.",
        "I will send the refund confirmation to jane{n}@example.com by Friday.",
        "Will the refund show up on my statement this week?",
        "Yes, refunds usually appear within 3 to 5 business days.",
        "Thanks, that's all for order ORD-{n}.",
        "The refund for ORD-{n} has been processed.",
    ];

    pub fn turn(i: u64) -> NewTurn {
        let tool_call = (i % 10 == 2).then(|| ToolCall {
            tool_name: "lookup_order".into(),
            arguments_json: format!(r#"{{"order_id": "ORD-{i}"}}"#),
            result: format!("ORD-{i}: 2 charges of $49.99"),
            status: ToolCallStatus::Success,
            error_details: String::new(),
        });
        NewTurn {
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            speaker: if i % 2 == 0 {
                "customer".into()
            } else {
                "agent-a".into()
            },
            content: LINES[(i % 10) as usize].replace("{n}", &i.to_string()),
            client_time: None,
            tool_call,
            metadata: Default::default(),
        }
    }

    fn append(store: &dyn Store, id: &str, from: u64, n: u64) {
        let turns: Vec<NewTurn> = (from..from + n).map(turn).collect();
        let append = PreparedAppend {
            token_counts: turns.iter().map(|_| 20).collect(),
            turns,
            idempotency_key: None,
            fingerprint: [0; 32],
            expected_next_seq: None,
            lease_epoch: None,
            handoff: None,
            now: 1_733_000_000_000_000_000 + from as i64 * 1_000_000_000,
        };
        store
            .append_turns("bench", id, None, &mut |s, prev| {
                append::plan(s, prev, &append)
            })
            .expect("append");
    }

    fn summarize(store: &dyn Store, id: &str) -> Duration {
        let start = Instant::now();
        let r = pipeline::run(
            store,
            &RuleBased,
            &SummaryConfig::default(),
            ("bench", id),
            Trigger::Requested,
            true,
            false,
        )
        .expect("summary attempt");
        let took = start.elapsed();
        assert!(
            matches!(r, Attempt::Stored(_)),
            "the benchmark's summaries validate"
        );
        took
    }

    /// One session size.
    #[derive(Serialize)]
    pub struct Case {
        turns: u64,
        from_scratch_ms: f64,
        fold_10_p50_us: u64,
        fold_10_p99_us: u64,
        samples: u64,
    }

    /// All figures.
    #[derive(Serialize)]
    pub struct Report {
        cases: Vec<Case>,
        fold_10_p50_ratio_10000_vs_100: f64,
        fold_10_p50_ratio_50000_vs_1000: f64,
    }

    pub fn run() -> Report {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SledStore::open(&dir.path().join("data")).expect("sled store");
        let mut cases = Vec::new();
        for size in [100u64, 1_000, 10_000, 50_000] {
            let id = format!("s{size}");
            let session = Session::new("bench", &id, SessionSettings::default(), 0);
            store.create_session(&session).expect("create");
            let mut next = 0;
            while next < size {
                let n = (size - next).min(256);
                append(&store, &id, next, n);
                next += n;
            }
            let from_scratch = summarize(&store, &id);
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            let deadline = Instant::now() + Duration::from_secs(20);
            for _ in 0..50 {
                if Instant::now() > deadline {
                    break;
                }
                append(&store, &id, next, 10);
                next += 10;
                let took = summarize(&store, &id);
                h.record(took.as_micros() as u64).expect("in range");
            }
            cases.push(Case {
                turns: size,
                from_scratch_ms: from_scratch.as_secs_f64() * 1e3,
                fold_10_p50_us: h.value_at_quantile(0.5),
                fold_10_p99_us: h.value_at_quantile(0.99),
                samples: h.len(),
            });
        }
        let p50 = |turns: u64| {
            cases
                .iter()
                .find(|c| c.turns == turns)
                .map_or(1, |c| c.fold_10_p50_us.max(1)) as f64
        };
        Report {
            fold_10_p50_ratio_10000_vs_100: p50(10_000) / p50(100),
            fold_10_p50_ratio_50000_vs_1000: p50(50_000) / p50(1_000),
            cases,
        }
    }

    impl Report {
        pub fn print(&self) {
            out!("\n## summaries: fold 10 new turns into a stored summary (pipeline, sled, no fsync)\n");
            out!("| session turns | from scratch (ms) | +10 turns p50 (µs) | +10 turns p99 (µs) | samples |");
            out!("|---:|---:|---:|---:|---:|");
            for c in &self.cases {
                out!(
                    "| {} | {:.1} | {} | {} | {} |",
                    c.turns,
                    c.from_scratch_ms,
                    c.fold_10_p50_us,
                    c.fold_10_p99_us,
                    c.samples
                );
            }
            out!(
                "\n+10 turns p50 at 10,000 turns / at 100 turns: {:.2}",
                self.fold_10_p50_ratio_10000_vs_100
            );
            out!(
                "+10 turns p50 at 50,000 turns / at 1,000 turns: {:.2}",
                self.fold_10_p50_ratio_50000_vs_1000
            );
        }
    }
}

/// Context bundles through the real daemon: latency of `GetContextBundle`
/// (budget 8,000) for sessions of 100, 10,000 and 100,000 turns. Each
/// session is summarized (as the background worker keeps it) and then gets
/// a short unsummarized tail, the steady state an agent meets.
mod bundles {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use hdrhistogram::Histogram;
    use mnemo::pb;
    use mnemo::pb::memory_service_client::MemoryServiceClient;
    use serde::Serialize;
    use tonic::transport::Channel;

    use super::append::RunningDaemon;

    const BUDGET: u32 = 8_000;
    const SIZES: [u64; 3] = [100, 10_000, 100_000];
    const MAX_REQUESTS: u64 = 300;
    const MAX_TIME: Duration = Duration::from_secs(15);

    /// One session size.
    #[derive(Serialize)]
    pub struct Case {
        turns: u64,
        p50_us: u64,
        p99_us: u64,
        requests: u64,
        transcript_tokens: u64,
        bundle_tokens: u32,
        transcript_to_bundle_ratio: f64,
        setup_seconds: f64,
    }

    /// All figures.
    #[derive(Serialize)]
    pub struct Report {
        budget_tokens: u32,
        cases: Vec<Case>,
        p99_ratio_100000_vs_100: f64,
        p50_ratio_100000_vs_100: f64,
    }

    pub fn run() -> Report {
        let scratch = tempfile::tempdir().expect("temp dir");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("cannot build the tokio runtime");
        let cases = runtime.block_on(cases(&scratch.path().join("daemon")));
        let p = |turns: u64, p99: bool| {
            cases.iter().find(|c| c.turns == turns).map_or(1, |c| {
                if p99 {
                    c.p99_us.max(1)
                } else {
                    c.p50_us.max(1)
                }
            }) as f64
        };
        Report {
            budget_tokens: BUDGET,
            p99_ratio_100000_vs_100: p(100_000, true) / p(100, true),
            p50_ratio_100000_vs_100: p(100_000, false) / p(100, false),
            cases,
        }
    }

    fn pb_turn(i: u64) -> pb::NewTurn {
        let t = super::summaries::turn(i);
        pb::NewTurn {
            role: match t.role {
                mnemo::model::Role::User => pb::Role::User,
                _ => pb::Role::Assistant,
            } as i32,
            speaker: t.speaker,
            content: t.content,
            tool_call: t.tool_call.map(|c| pb::ToolCall {
                tool_name: c.tool_name,
                arguments_json: c.arguments_json,
                result: c.result,
                status: pb::ToolCallStatus::Success as i32,
                error_details: String::new(),
            }),
            ..Default::default()
        }
    }

    async fn append(c: &mut MemoryServiceClient<Channel>, id: &str, from: u64, n: u64) {
        c.append_turns(pb::AppendTurnsRequest {
            namespace: "bench".into(),
            session_id: id.into(),
            turns: (from..from + n).map(pb_turn).collect(),
            ..Default::default()
        })
        .await
        .expect("append");
    }

    async fn cases(dir: &Path) -> Vec<Case> {
        let daemon = RunningDaemon::start(dir.to_path_buf()).await;
        let channel = Channel::from_shared(format!("http://{}", daemon.addr))
            .expect("valid url")
            .connect()
            .await
            .expect("connect");
        let mut c = MemoryServiceClient::new(channel).max_decoding_message_size(64 << 20);
        let mut out = Vec::new();
        for size in SIZES {
            let setup = Instant::now();
            let id = format!("b{size}");
            c.create_session(pb::CreateSessionRequest {
                namespace: "bench".into(),
                session_id: id.clone(),
                ..Default::default()
            })
            .await
            .expect("create");
            let mut next = 0;
            while next < size {
                let n = (size - next).min(256);
                append(&mut c, &id, next, n).await;
                next += n;
            }
            c.summarize(pb::SummarizeRequest {
                namespace: "bench".into(),
                session_id: id.clone(),
                wait: true,
            })
            .await
            .expect("summarize");
            append(&mut c, &id, next, 5).await;
            let setup_seconds = setup.elapsed().as_secs_f64();
            let request = pb::GetContextBundleRequest {
                namespace: "bench".into(),
                session_id: id.clone(),
                budget_tokens: BUDGET,
                ..Default::default()
            };
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            let mut last = None;
            for _ in 0..5 {
                c.get_context_bundle(request.clone()).await.expect("bundle");
            }
            let deadline = Instant::now() + MAX_TIME;
            while h.len() < MAX_REQUESTS && Instant::now() < deadline {
                let start = Instant::now();
                let b = c.get_context_bundle(request.clone()).await.expect("bundle");
                h.record(start.elapsed().as_micros() as u64)
                    .expect("in range");
                last = b.into_inner().bundle;
            }
            let bundle = last.expect("at least one bundle");
            let session = c
                .get_session(pb::GetSessionRequest {
                    namespace: "bench".into(),
                    session_id: id.clone(),
                })
                .await
                .expect("session")
                .into_inner()
                .session
                .expect("session");
            out.push(Case {
                turns: size,
                p50_us: h.value_at_quantile(0.5),
                p99_us: h.value_at_quantile(0.99),
                requests: h.len(),
                transcript_tokens: session.total_tokens,
                bundle_tokens: bundle.token_count,
                transcript_to_bundle_ratio: super::ratio(
                    session.total_tokens as f64,
                    f64::from(bundle.token_count),
                ),
                setup_seconds,
            });
        }
        daemon.stop().await;
        out
    }

    impl Report {
        pub fn print(&self) {
            out!(
                "\n## bundles: GetContextBundle, budget {} tokens (real daemon, gRPC on 127.0.0.1)\n",
                self.budget_tokens
            );
            out!("| session turns | p50 (µs) | p99 (µs) | requests | transcript tokens | bundle tokens | transcript / bundle |");
            out!("|---:|---:|---:|---:|---:|---:|---:|");
            for c in &self.cases {
                out!(
                    "| {} | {} | {} | {} | {} | {} | {:.1} |",
                    c.turns,
                    c.p50_us,
                    c.p99_us,
                    c.requests,
                    c.transcript_tokens,
                    c.bundle_tokens,
                    c.transcript_to_bundle_ratio
                );
            }
            out!(
                "\np99 at 100,000 turns / at 100 turns: {:.2} (target ≤ 2); p50: {:.2}",
                self.p99_ratio_100000_vs_100,
                self.p50_ratio_100000_vs_100
            );
        }
    }
}

/// `Search` through the real daemon at 10,000 and 1,000,000 indexed turns
/// (`MNEMO_BENCH_SEARCH_TURNS` sets the larger size), with indexing
/// throughput; the baseline is `GetSession` (a point read) in the same run.
mod search {
    use std::time::{Duration, Instant};

    use hdrhistogram::Histogram;
    use mnemo::pb;
    use mnemo::pb::memory_service_client::MemoryServiceClient;
    use serde::Serialize;
    use tonic::transport::Channel;

    use super::append::RunningDaemon;
    use super::text::Rng;

    const TURNS_PER_SESSION: u64 = 1_000;
    const BATCH: u64 = 250;
    const WRITERS: usize = 8;
    const MAX_REQUESTS: u64 = 500;
    const MAX_TIME: Duration = Duration::from_secs(15);
    const SYLLABLES: [&str; 24] = [
        "ka", "lo", "mi", "ren", "to", "sa", "vel", "di", "quo", "ber", "na", "zu", "fe", "gor",
        "pli", "tas", "we", "xo", "ham", "ju", "cor", "ni", "sto", "yam",
    ];
    const COMMON: [&str; 24] = [
        "the", "order", "refund", "customer", "please", "check", "status", "invoice", "account",
        "delivery", "we", "you", "ticket", "agent", "was", "and", "to", "of", "payment", "error",
        "tracking", "update", "address", "support",
    ];

    /// A vocabulary word: common words half the time, else one of ~13,800
    /// synthetic words with a skewed (roughly Zipf) frequency.
    fn word(rng: &mut Rng, out: &mut String) {
        if rng.below(2) == 0 {
            out.push_str(COMMON[rng.below(COMMON.len())]);
            return;
        }
        let u = rng.below(1 << 20) as f64 / f64::from(1u32 << 20);
        let rank = (u * u * u * 13_824.0) as usize;
        out.push_str(SYLLABLES[rank % 24]);
        out.push_str(SYLLABLES[(rank / 24) % 24]);
        out.push_str(SYLLABLES[(rank / 576) % 24]);
    }

    fn content(rng: &mut Rng) -> String {
        let mut s = String::with_capacity(220);
        while s.len() < 190 {
            if !s.is_empty() {
                s.push(' ');
            }
            word(rng, &mut s);
        }
        s
    }

    fn query(rng: &mut Rng) -> String {
        let mut q = String::new();
        for i in 0..3 {
            if i > 0 {
                q.push(' ');
            }
            // Queries use rarer words than text, as people's do.
            let u = rng.below(1 << 20) as f64 / f64::from(1u32 << 20);
            let rank = (u * u * 13_824.0) as usize;
            q.push_str(SYLLABLES[rank % 24]);
            q.push_str(SYLLABLES[(rank / 24) % 24]);
            q.push_str(SYLLABLES[(rank / 576) % 24]);
        }
        q
    }

    /// One index size.
    #[derive(Serialize)]
    pub struct Case {
        indexed_turns: u64,
        search_p50_us: u64,
        search_p99_us: u64,
        searches: u64,
        get_session_p50_us: u64,
        get_session_p99_us: u64,
        p99_ratio_to_get_session: f64,
        append_seconds: f64,
        index_catch_up_seconds: f64,
        turns_per_second_appended_and_indexed: f64,
        mean_hits: f64,
        /// Bytes of turn text appended (the raw content).
        raw_content_bytes: u64,
        /// sled's files (the store) and tantivy's (the index), on disk.
        store_bytes: u64,
        index_bytes: u64,
        store_bytes_per_turn: f64,
        store_over_raw: f64,
        index_over_raw: f64,
        /// Resident memory of the process (daemon and clients), now and
        /// at its peak.
        rss_mb: f64,
        peak_rss_mb: f64,
    }

    /// All figures.
    #[derive(Serialize)]
    pub struct Report {
        cases: Vec<Case>,
        index_bytes: u64,
        p99_ratio_largest_vs_10000: f64,
    }

    pub fn run() -> Report {
        let large: u64 = std::env::var("MNEMO_BENCH_SEARCH_TURNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000);
        let scratch = tempfile::tempdir().expect("temp dir");
        let dir = scratch.path().join("daemon");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("cannot build the tokio runtime");
        // A smoke run (CI) asks for less than 10,000: then one small case.
        let sizes = if large > 10_000 {
            vec![10_000, large]
        } else {
            vec![large.max(TURNS_PER_SESSION)]
        };
        let cases = runtime.block_on(cases(&dir, &sizes));
        let index_bytes = tree_size(
            &dir.join(mnemo::server::SEARCH_INDEX_DIR),
            std::path::Path::new(""),
        );
        let p99 = |c: &Case| c.search_p99_us.max(1) as f64;
        Report {
            p99_ratio_largest_vs_10000: p99(cases.last().expect("a case")) / p99(&cases[0]),
            // (1.0 when there is one case.)
            index_bytes,
            cases,
        }
    }

    async fn client(addr: std::net::SocketAddr) -> MemoryServiceClient<Channel> {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("valid url")
            .connect()
            .await
            .expect("connect");
        MemoryServiceClient::new(channel).max_decoding_message_size(64 << 20)
    }

    /// Bytes of the files under `dir`, recursively, but not under `skip`.
    fn tree_size(dir: &std::path::Path, skip: &std::path::Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .filter_map(|e| e.ok())
            .map(|e| {
                let path = e.path();
                match e.metadata() {
                    Ok(m) if m.is_dir() && path != skip => tree_size(&path, skip),
                    Ok(m) if m.is_file() => m.len(),
                    _ => 0,
                }
            })
            .sum()
    }

    /// (VmRSS, VmHWM) of this process in MB, from /proc.
    fn rss_mb() -> (f64, f64) {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
                .unwrap_or(0.0)
                / 1024.0
        };
        (kb("VmRSS:"), kb("VmHWM:"))
    }

    /// Fills sessions `first..first + n` with `TURNS_PER_SESSION` turns each,
    /// over `WRITERS` connections; returns the bytes of text appended.
    async fn fill(addr: std::net::SocketAddr, first: u64, n: u64) -> u64 {
        let mut tasks = Vec::new();
        for w in 0..WRITERS as u64 {
            tasks.push(tokio::spawn(async move {
                let mut c = client(addr).await;
                let mut rng = Rng::new(0x5EED + w + first * 131);
                let mut bytes = 0u64;
                let mut s = first + w;
                while s < first + n {
                    let id = format!("s{s}");
                    c.create_session(pb::CreateSessionRequest {
                        namespace: "bench".into(),
                        session_id: id.clone(),
                        subject_id: format!("subject-{}", s % 100),
                        settings: Some(pb::SessionSettings {
                            // Measure search, not the summarizer.
                            summary_every_turns: 10_000,
                            context_limit_tokens: 10_000_000,
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                    .await
                    .expect("create");
                    for _ in 0..TURNS_PER_SESSION / BATCH {
                        let turns: Vec<pb::NewTurn> = (0..BATCH)
                            .map(|i| pb::NewTurn {
                                role: if i % 2 == 0 {
                                    pb::Role::User
                                } else {
                                    pb::Role::Assistant
                                } as i32,
                                content: content(&mut rng),
                                ..Default::default()
                            })
                            .collect();
                        bytes += turns.iter().map(|t| t.content.len() as u64).sum::<u64>();
                        c.append_turns(pb::AppendTurnsRequest {
                            namespace: "bench".into(),
                            session_id: id.clone(),
                            turns,
                            ..Default::default()
                        })
                        .await
                        .expect("append");
                    }
                    s += WRITERS as u64;
                }
                bytes
            }));
        }
        let mut bytes = 0;
        for t in tasks {
            bytes += t.await.expect("writer");
        }
        bytes
    }

    async fn cases(dir: &std::path::Path, sizes: &[u64]) -> Vec<Case> {
        let daemon = RunningDaemon::start(dir.to_path_buf()).await;
        let mut c = client(daemon.addr).await;
        let mut out = Vec::new();
        let mut sessions = 0;
        let mut raw_content_bytes = 0;
        for &size in sizes {
            let want = size / TURNS_PER_SESSION;
            let started = Instant::now();
            raw_content_bytes += fill(daemon.addr, sessions, want - sessions).await;
            sessions = want;
            let append_seconds = started.elapsed().as_secs_f64();
            // Until every write is searchable.
            loop {
                let lag = c
                    .search(pb::SearchRequest {
                        namespace: "bench".into(),
                        query: "warmup".into(),
                        ..Default::default()
                    })
                    .await
                    .map(|r| r.into_inner().index_lag);
                if matches!(lag, Ok(0)) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let total = started.elapsed().as_secs_f64();
            let mut rng = Rng::new(0xC0FFEE);
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            let mut hits = 0u64;
            let deadline = Instant::now() + MAX_TIME;
            while h.len() < MAX_REQUESTS && Instant::now() < deadline {
                let request = pb::SearchRequest {
                    namespace: "bench".into(),
                    query: query(&mut rng),
                    limit: 10,
                    ..Default::default()
                };
                let t = Instant::now();
                let r = c.search(request).await.expect("search");
                h.record(t.elapsed().as_micros() as u64).expect("in range");
                hits += r.into_inner().hits.len() as u64;
            }
            let mut g = Histogram::<u64>::new(3).expect("histogram");
            let deadline = Instant::now() + MAX_TIME;
            while g.len() < MAX_REQUESTS && Instant::now() < deadline {
                let t = Instant::now();
                c.get_session(pb::GetSessionRequest {
                    namespace: "bench".into(),
                    session_id: format!("s{}", g.len() % sessions),
                })
                .await
                .expect("get session");
                g.record(t.elapsed().as_micros() as u64).expect("in range");
            }
            out.push(Case {
                indexed_turns: size,
                search_p50_us: h.value_at_quantile(0.5),
                search_p99_us: h.value_at_quantile(0.99),
                searches: h.len(),
                get_session_p50_us: g.value_at_quantile(0.5),
                get_session_p99_us: g.value_at_quantile(0.99),
                p99_ratio_to_get_session: super::ratio(
                    h.value_at_quantile(0.99) as f64,
                    g.value_at_quantile(0.99) as f64,
                ),
                append_seconds,
                index_catch_up_seconds: total - append_seconds,
                turns_per_second_appended_and_indexed: (size
                    - out.last().map_or(0, |c: &Case| c.indexed_turns))
                    as f64
                    / total,
                mean_hits: hits as f64 / h.len().max(1) as f64,
                raw_content_bytes,
                store_bytes: 0,
                index_bytes: 0,
                store_bytes_per_turn: 0.0,
                store_over_raw: 0.0,
                index_over_raw: 0.0,
                rss_mb: 0.0,
                peak_rss_mb: 0.0,
            });
            // The footprint: every append was acknowledged after a sync, so
            // it is on disk.
            let index_dir = dir.join(mnemo::server::SEARCH_INDEX_DIR);
            let case = out.last_mut().expect("pushed above");
            case.store_bytes = tree_size(dir, &index_dir);
            case.index_bytes = tree_size(&index_dir, std::path::Path::new(""));
            case.store_bytes_per_turn = case.store_bytes as f64 / size as f64;
            case.store_over_raw = super::ratio(case.store_bytes as f64, raw_content_bytes as f64);
            case.index_over_raw = super::ratio(case.index_bytes as f64, raw_content_bytes as f64);
            (case.rss_mb, case.peak_rss_mb) = rss_mb();
        }
        daemon.stop().await;
        out
    }

    impl Report {
        pub fn print(&self) {
            out!("\n## search: Search (BM25, limit 10) through the real daemon on 127.0.0.1\n");
            out!("| indexed turns | search p50 (µs) | p99 (µs) | searches | GetSession p50 / p99 (µs) | p99 / GetSession p99 | append (s) | index catch-up (s) | turns/s appended + indexed | mean hits |");
            out!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for c in &self.cases {
                out!(
                    "| {} | {} | {} | {} | {} / {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} |",
                    c.indexed_turns,
                    c.search_p50_us,
                    c.search_p99_us,
                    c.searches,
                    c.get_session_p50_us,
                    c.get_session_p99_us,
                    c.p99_ratio_to_get_session,
                    c.append_seconds,
                    c.index_catch_up_seconds,
                    c.turns_per_second_appended_and_indexed,
                    c.mean_hits
                );
            }
            out!("\n| indexed turns | raw text (MB) | store on disk (MB) | store bytes / turn | store / raw | index (MB) | index / raw | RSS now / peak (MB) |");
            out!("|---:|---:|---:|---:|---:|---:|---:|---:|");
            for c in &self.cases {
                out!(
                    "| {} | {:.1} | {:.1} | {:.0} | {:.2} | {:.1} | {:.2} | {:.0} / {:.0} |",
                    c.indexed_turns,
                    c.raw_content_bytes as f64 / 1e6,
                    c.store_bytes as f64 / 1e6,
                    c.store_bytes_per_turn,
                    c.store_over_raw,
                    c.index_bytes as f64 / 1e6,
                    c.index_over_raw,
                    c.rss_mb,
                    c.peak_rss_mb
                );
            }
            out!(
                "\nsearch p99, largest / 10,000 turns: {:.2}; index on disk: {:.1} MB",
                self.p99_ratio_largest_vs_10000,
                self.index_bytes as f64 / 1e6
            );
        }
    }
}

/// The RPC floor: `grpc.health.v1.Health/Check` at concurrency 1 and 64
/// (8 connections), next to `GetSession` (a store point read) and
/// `GetContextBundle` of a 20-turn session at the same concurrency.
mod floor {
    use std::time::{Duration, Instant};

    use hdrhistogram::Histogram;
    use mnemo::pb;
    use mnemo::pb::memory_service_client::MemoryServiceClient;
    use serde::Serialize;
    use tonic::transport::Channel;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    use super::append::RunningDaemon;

    const MAX_REQUESTS: u64 = 4_000;
    const MAX_TIME: Duration = Duration::from_secs(10);
    const CONNECTIONS: usize = 8;

    /// One RPC at one concurrency.
    #[derive(Serialize)]
    pub struct Case {
        rpc: &'static str,
        concurrency: usize,
        p50_us: u64,
        p99_us: u64,
        requests: u64,
        per_second: f64,
        p50_ratio_to_health: f64,
        p99_ratio_to_health: f64,
    }

    /// All figures.
    #[derive(Serialize)]
    pub struct Report {
        cases: Vec<Case>,
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Rpc {
        Health,
        GetSession,
        Bundle,
        /// `ListTurns` of the newest 20 of a 1,000-turn session.
        LastTurns,
    }

    pub fn run() -> Report {
        let scratch = tempfile::tempdir().expect("temp dir");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("cannot build the tokio runtime");
        Report {
            cases: runtime.block_on(cases(scratch.path().join("daemon"))),
        }
    }

    async fn cases(dir: std::path::PathBuf) -> Vec<Case> {
        let daemon = RunningDaemon::start(dir).await;
        let mut channels = Vec::new();
        for _ in 0..CONNECTIONS {
            channels.push(
                Channel::from_shared(format!("http://{}", daemon.addr))
                    .expect("valid url")
                    .connect()
                    .await
                    .expect("connect"),
            );
        }
        let mut c = MemoryServiceClient::new(channels[0].clone());
        c.create_session(pb::CreateSessionRequest {
            namespace: "bench".into(),
            session_id: "floor".into(),
            ..Default::default()
        })
        .await
        .expect("create");
        let turns = (0..20)
            .map(|i| pb::NewTurn {
                role: if i % 2 == 0 {
                    pb::Role::User
                } else {
                    pb::Role::Assistant
                } as i32,
                content: format!("turn {i}: a question about order ORD-{i} and its refund"),
                ..Default::default()
            })
            .collect();
        c.append_turns(pb::AppendTurnsRequest {
            namespace: "bench".into(),
            session_id: "floor".into(),
            turns,
            ..Default::default()
        })
        .await
        .expect("append");
        // A long session for the read of its newest turns.
        super::append::fill_session(&mut c, "floor-read", 1_000).await;
        let mut out: Vec<Case> = Vec::new();
        for concurrency in [1usize, 64] {
            let (mut health_p50, mut health_p99) = (1.0, 1.0);
            for (rpc, name) in [
                (Rpc::Health, "Health/Check"),
                (Rpc::GetSession, "GetSession"),
                (Rpc::LastTurns, "ListTurns (newest 20 of 1,000)"),
                (Rpc::Bundle, "GetContextBundle (20 turns)"),
            ] {
                let (h, elapsed) = run_case(&channels, rpc, concurrency).await;
                let p99 = h.value_at_quantile(0.99);
                if rpc == Rpc::Health {
                    health_p50 = h.value_at_quantile(0.5).max(1) as f64;
                    health_p99 = p99.max(1) as f64;
                }
                out.push(Case {
                    rpc: name,
                    concurrency,
                    p50_us: h.value_at_quantile(0.5),
                    p99_us: p99,
                    requests: h.len(),
                    per_second: h.len() as f64 / elapsed.as_secs_f64(),
                    p50_ratio_to_health: h.value_at_quantile(0.5) as f64 / health_p50,
                    p99_ratio_to_health: p99 as f64 / health_p99,
                });
            }
        }
        daemon.stop().await;
        out
    }

    async fn run_case(
        channels: &[Channel],
        rpc: Rpc,
        concurrency: usize,
    ) -> (Histogram<u64>, Duration) {
        let budget = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(MAX_REQUESTS));
        let deadline = Instant::now() + MAX_TIME;
        let started = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..concurrency {
            let channel = channels[i % channels.len()].clone();
            let budget = budget.clone();
            tasks.push(tokio::spawn(async move {
                let mut health = HealthClient::new(channel.clone());
                let mut memory = MemoryServiceClient::new(channel);
                let mut h = Histogram::<u64>::new(3).expect("histogram");
                while Instant::now() < deadline
                    && budget
                        .fetch_update(
                            std::sync::atomic::Ordering::Relaxed,
                            std::sync::atomic::Ordering::Relaxed,
                            |b| b.checked_sub(1),
                        )
                        .is_ok()
                {
                    let t = Instant::now();
                    match rpc {
                        Rpc::Health => {
                            health
                                .check(HealthCheckRequest {
                                    service: String::new(),
                                })
                                .await
                                .expect("health");
                        }
                        Rpc::GetSession => {
                            memory
                                .get_session(pb::GetSessionRequest {
                                    namespace: "bench".into(),
                                    session_id: "floor".into(),
                                })
                                .await
                                .expect("get session");
                        }
                        Rpc::Bundle => {
                            memory
                                .get_context_bundle(pb::GetContextBundleRequest {
                                    namespace: "bench".into(),
                                    session_id: "floor".into(),
                                    budget_tokens: 2_000,
                                    ..Default::default()
                                })
                                .await
                                .expect("bundle");
                        }
                        Rpc::LastTurns => {
                            let got = memory
                                .list_turns(pb::ListTurnsRequest {
                                    namespace: "bench".into(),
                                    session_id: "floor-read".into(),
                                    newest: 20,
                                    ..Default::default()
                                })
                                .await
                                .expect("list turns")
                                .into_inner();
                            assert_eq!(got.turns.len(), 20);
                        }
                    }
                    h.record(t.elapsed().as_micros() as u64).expect("in range");
                }
                h
            }));
        }
        let mut all = Histogram::<u64>::new(3).expect("histogram");
        for t in tasks {
            all.add(t.await.expect("task")).expect("same bounds");
        }
        (all, started.elapsed())
    }

    impl Report {
        pub fn print(&self) {
            out!("\n## floor: the cheapest RPC against real ones (gRPC on 127.0.0.1, 8 connections)\n");
            out!("| RPC | concurrency | p50 (µs) | p99 (µs) | requests | per second | p50 / Health p50 | p99 / Health p99 |");
            out!("|---|---:|---:|---:|---:|---:|---:|---:|");
            for c in &self.cases {
                out!(
                    "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} |",
                    c.rpc,
                    c.concurrency,
                    c.p50_us,
                    c.p99_us,
                    c.requests,
                    c.per_second,
                    c.p50_ratio_to_health,
                    c.p99_ratio_to_health
                );
            }
        }
    }
}
