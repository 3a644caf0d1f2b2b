//! Does a bundle carry the memory an agent needs? Measured on multi-session
//! conversations with questions whose answers lie in earlier sessions,
//! through the real daemon (in-process, gRPC on 127.0.0.1), next to
//! baselines computed in the same run over the same turns with the same
//! token counter (cl100k_base):
//!
//! - `quality`: for each question, `GetContextBundle(open session, budget,
//!   query = question)` at 1,000 / 2,000 / 4,000 tokens; the answer is
//!   "in the bundle" when one of its accepted strings, lower-cased with
//!   punctuation stripped, is a substring of the rendered text treated the
//!   same way. Baselines: the bundle without retrieval (`skip_recall`), the
//!   subject's newest turns that fit, and a plain Okapi BM25 (k1 1.2,
//!   b 0.75, lower-cased words, no stemming) top-turns pack. Then `Search`
//!   (turns, limit 10) against the same plain BM25: evidence recall@1/5/10
//!   and MRR.
//! - `latency`: bundle p50/p99 with and without retrieval for a subject of
//!   1,000 and 100,000 turns (`MNEMO_BENCH_RETRIEVAL_TURNS`, comma
//!   separated, sets the sizes), up to 200 of the set's questions as
//!   queries, one unmeasured pass then `MNEMO_BENCH_LATENCY_PASSES`
//!   (default 3) measured passes pooled: a p99 of 600 samples, not the
//!   slowest of a few dozen. Every size is loaded first, each into a
//!   daemon of its own, and each query is then asked of every size in
//!   turn: a spell of the machine's noise falls on all sizes alike (measured
//!   one size after the other, the same binary's p99 ratio between sizes
//!   read anywhere from 0.7× to 3× on a 2-core VM). Then, the daemons
//!   stopped, the bundle's
//!   retrieval query alone on the subject's index, in this process
//!   (`search alone`): the part that grows with the history, with less of
//!   the machine's noise than a whole bundle through gRPC.
//!
//! Data: `MNEMO_RETRIEVAL_SET` (comma-separated paths; default the committed
//! BFCL v4 memory fixture, `tests/fixtures/memory_bfcl/dev.json`). The
//! format is described in `scripts/bfcl_memory_to_dev_set.py`.
//!
//! When a PostgreSQL server is at hand (as for the tests: its binaries
//! installed, or `MNEMO_TEST_POSTGRES_URL`), `quality` also ranks the same
//! questions with PostgreSQL's full-text search (`retrieval/pg_fts.rs`).
//!
//! `MNEMO_BENCH_DUMP_SEARCH=path` appends `Search`'s top 50 turns for each
//! question with evidence to `path` (JSON lines), for ranking experiments
//! outside the daemon; `MNEMO_BENCH_SHOW_MISSES` prints the questions whose
//! evidence is not in the top 5.
//!
//! Run: `cargo bench --bench retrieval -- [quality|search|latency|all]`
//! (default `all`; `search` skips the bundles). Prints Markdown tables.
//! This measures, it does not test.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mnemo::config::Config;
use mnemo::model::Encoding;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use mnemo::search::{SearchIndex, SearchQuery};
use mnemo::server::Daemon;
use serde::Deserialize;
use tokio::sync::oneshot;
use tonic::transport::Channel;

// The daemon runs in this process: the allocator the binary uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/common/postgres.rs"]
mod pg;
#[path = "retrieval/pg_fts.rs"]
mod pg_fts;

type Client = MemoryServiceClient<Channel>;

const NS: &str = "bench";
const BUDGETS: [u32; 3] = [1_000, 2_000, 4_000];
/// Seconds between a session's turns as the bench appends them (client
/// times from the session's date).
const TURN_SPACING_SECS: i64 = 30;

#[derive(Deserialize)]
struct Dataset {
    #[serde(default)]
    source: String,
    subjects: Vec<Subject>,
    questions: Vec<Question>,
}

#[derive(Deserialize)]
struct Subject {
    subject_id: String,
    sessions: Vec<Session>,
}

#[derive(Deserialize)]
struct Session {
    session_id: String,
    date: String,
    turns: Vec<Turn>,
}

#[derive(Deserialize, Clone)]
struct Turn {
    role: String,
    #[serde(default)]
    speaker: String,
    content: String,
}

#[derive(Deserialize)]
struct Question {
    subject_id: String,
    question: String,
    answers: Vec<String>,
    #[serde(default)]
    evidence: Vec<Evidence>,
    /// The set's own category of the question (multi-hop, temporal...).
    #[serde(default)]
    category: String,
}

#[derive(Deserialize)]
struct Evidence {
    session_id: String,
    index: usize,
}

/// Seconds since the epoch of an RFC 3339 UTC time ("2023-05-08T13:56:00Z").
fn parse_time(s: &str) -> i64 {
    let num = |a: usize, b: usize| s.get(a..b).and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
    let (y, mo, d) = (num(0, 4), num(5, 7) as u32, num(8, 10) as u32);
    let (h, mi, se) = (num(11, 13), num(14, 16), num(17, 19));
    mnemo::model::calendar::days_from_civil(y, mo.max(1), d.max(1)) * 86_400
        + h * 3_600
        + mi * 60
        + se
}

/// Lower-cased, punctuation stripped, whitespace collapsed.
fn norm(s: &str) -> String {
    let kept: String = s
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else if c.is_whitespace() {
                ' '
            } else {
                '\u{0}'
            }
        })
        .filter(|&c| c != '\u{0}')
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn answered(text: &str, answers: &[String]) -> bool {
    let t = norm(text);
    answers
        .iter()
        .map(|a| norm(a))
        .any(|a| !a.is_empty() && t.contains(&a))
}

fn tokens(s: &str) -> usize {
    mnemo::tokens::count(Encoding::Cl100kBase, s)
}

/// A turn of a subject as the baselines see it.
struct Flat {
    session_id: String,
    seq: u64,
    line: String,
}

/// Plain Okapi BM25 over a subject's turns.
struct Bm25 {
    docs: Vec<HashMap<String, u32>>,
    lens: Vec<f64>,
    df: HashMap<String, u32>,
    avg: f64,
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

impl Bm25 {
    fn new(texts: &[&str]) -> Bm25 {
        let mut docs = Vec::new();
        let mut lens = Vec::new();
        let mut df: HashMap<String, u32> = HashMap::new();
        for t in texts {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let w = words(t);
            lens.push(w.len() as f64);
            for x in w {
                *tf.entry(x).or_default() += 1;
            }
            for k in tf.keys() {
                *df.entry(k.clone()).or_default() += 1;
            }
            docs.push(tf);
        }
        let avg = lens.iter().sum::<f64>() / lens.len().max(1) as f64;
        Bm25 {
            docs,
            lens,
            df,
            avg,
        }
    }

    /// Document indexes, best first (only those sharing a word).
    fn rank(&self, query: &str) -> Vec<usize> {
        let (k1, b) = (1.2, 0.75);
        let n = self.docs.len() as f64;
        let mut q = words(query);
        q.sort();
        q.dedup();
        let mut scored: Vec<(f64, usize)> = Vec::new();
        for (i, d) in self.docs.iter().enumerate() {
            let mut s = 0.0;
            for w in &q {
                if let Some(&tf) = d.get(w) {
                    let df = f64::from(self.df[w]);
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    let tf = f64::from(tf);
                    s +=
                        idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * self.lens[i] / self.avg));
                }
            }
            if s > 0.0 {
                scored.push((s, i));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        scored.into_iter().map(|(_, i)| i).collect()
    }
}

/// Lines taken in the given order while they fit `budget` tokens.
fn pack<'a>(lines: impl Iterator<Item = &'a str>, budget: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for l in lines {
        let n = tokens(l) + 1;
        if used + n > budget {
            continue;
        }
        used += n;
        out.push_str(l);
        out.push('\n');
    }
    out
}

struct Daemon1 {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<mnemo::Result<()>>,
    dir: tempfile::TempDir,
}

async fn start() -> Daemon1 {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = Config {
        data_dir: PathBuf::from(dir.path()),
        ..Config::default()
    };
    let daemon = Daemon::open(config).await.expect("the daemon opens");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("an address");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(daemon.serve(listener, async {
        let _ = stopped.await;
    }));
    Daemon1 {
        addr,
        stop,
        task,
        dir,
    }
}

async fn connect(addr: SocketAddr) -> Client {
    let ch = Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect()
        .await
        .expect("connect to the daemon");
    MemoryServiceClient::new(ch).max_decoding_message_size(64 << 20)
}

fn role(r: &str) -> pb::Role {
    match r {
        "user" => pb::Role::User,
        "assistant" => pb::Role::Assistant,
        "tool" => pb::Role::Tool,
        _ => pb::Role::System,
    }
}

/// Loads every subject: sessions in order, all closed but the last; waits
/// for their episodes and for the index.
async fn load(c: &mut Client, data: &Dataset) {
    for s in &data.subjects {
        let last = s.sessions.len().saturating_sub(1);
        for (i, sess) in s.sessions.iter().enumerate() {
            c.create_session(pb::CreateSessionRequest {
                namespace: NS.into(),
                session_id: sess.session_id.clone(),
                subject_id: s.subject_id.clone(),
                ..Default::default()
            })
            .await
            .expect("create session");
            let start = parse_time(&sess.date);
            let turns: Vec<pb::NewTurn> = sess
                .turns
                .iter()
                .enumerate()
                .map(|(k, t)| pb::NewTurn {
                    role: role(&t.role) as i32,
                    speaker: t.speaker.clone(),
                    content: t.content.clone(),
                    client_time: Some(prost_types::Timestamp {
                        seconds: start + TURN_SPACING_SECS * k as i64,
                        nanos: 0,
                    }),
                    ..Default::default()
                })
                .collect();
            for chunk in turns.chunks(200) {
                c.append_turns(pb::AppendTurnsRequest {
                    namespace: NS.into(),
                    session_id: sess.session_id.clone(),
                    turns: chunk.to_vec(),
                    ..Default::default()
                })
                .await
                .expect("append");
            }
            if i < last {
                c.close_session(pb::CloseSessionRequest {
                    namespace: NS.into(),
                    session_id: sess.session_id.clone(),
                })
                .await
                .expect("close");
            }
        }
    }
    settle(c, data).await;
}

/// Waits until every closed session has its episode (or the count of
/// episodes stops moving for 10 s: a session may end without one), then
/// for the index.
async fn settle(c: &mut Client, data: &Dataset) {
    let deadline = Instant::now() + Duration::from_secs(1800);
    let want: usize = data
        .subjects
        .iter()
        .map(|s| s.sessions.len().saturating_sub(1))
        .sum();
    let (mut last, mut since) = (usize::MAX, Instant::now());
    loop {
        let mut n = 0;
        for s in &data.subjects {
            let mut token = String::new();
            loop {
                let r = c
                    .list_episodes(pb::ListEpisodesRequest {
                        namespace: NS.into(),
                        subject_id: s.subject_id.clone(),
                        page_size: 100,
                        page_token: token.clone(),
                    })
                    .await
                    .expect("list episodes")
                    .into_inner();
                n += r.episodes.len();
                token = r.next_page_token;
                if token.is_empty() {
                    break;
                }
            }
        }
        if n != last {
            (last, since) = (n, Instant::now());
        }
        if n >= want || since.elapsed() > Duration::from_secs(10) || Instant::now() > deadline {
            if n < want {
                eprintln!("{} of {want} closed sessions have an episode", n);
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    loop {
        let lag = c
            .search(pb::SearchRequest {
                namespace: NS.into(),
                query: "warmup".into(),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner().index_lag);
        if matches!(lag, Ok(0)) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    quiet().await;
}

/// CPU time this process has used, in clock ticks (Linux; zero elsewhere).
fn cpu_ticks() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name's closing parenthesis; utime
            // and stime are the 12th and 13th of them.
            let rest = s.rsplit_once(')')?.1.to_owned();
            let f: Vec<u64> = rest
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse().ok())
                .collect();
            Some(f.iter().sum())
        })
        .unwrap_or(0)
}

/// Waits until the daemon's background work after a load (the index's
/// segment merges, the last folds) is done: less than a tenth of a core
/// used over a second, or a minute passed. What is measured after is a
/// daemon at rest, at every size alike.
async fn quiet() {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let before = cpu_ticks();
        tokio::time::sleep(Duration::from_secs(1)).await;
        // 100 ticks a second on Linux: 10 is a tenth of a core.
        if cpu_ticks().saturating_sub(before) < 10 || Instant::now() > deadline {
            break;
        }
    }
}

/// A day as people write it ("7 May 2023"), from Unix seconds.
fn day(secs: i64) -> String {
    use mnemo::model::calendar::{civil_from_days, MONTH_NAMES};
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    format!("{d} {} {y}", MONTH_NAMES[(m as usize).clamp(1, 12) - 1])
}

/// Every turn of a subject as the plain pack shows it: `[7 May 2023]
/// Caroline: text`, dated by the time the bench appends it with.
fn flat(s: &Subject) -> Vec<Flat> {
    let mut out = Vec::new();
    for sess in &s.sessions {
        let start = parse_time(&sess.date);
        for (k, t) in sess.turns.iter().enumerate() {
            let who = if t.speaker.is_empty() {
                &t.role
            } else {
                &t.speaker
            };
            out.push(Flat {
                session_id: sess.session_id.clone(),
                seq: k as u64 + 1,
                line: format!(
                    "[{}] {who}: {}",
                    day(start + TURN_SPACING_SECS * k as i64),
                    t.content
                ),
            });
        }
    }
    out
}

/// `Search` over a subject's turns.
async fn search_turns(
    c: &mut Client,
    subject: &str,
    question: &str,
    limit: u32,
) -> pb::SearchResponse {
    c.search(pb::SearchRequest {
        namespace: NS.into(),
        subject_id: subject.to_owned(),
        query: question.to_owned(),
        kinds: vec![pb::SearchKind::Turn as i32],
        limit,
        ..Default::default()
    })
    .await
    .expect("search")
    .into_inner()
}

async fn bundle(c: &mut Client, session: &str, budget: u32, query: &str, skip: bool) -> String {
    c.get_context_bundle(pb::GetContextBundleRequest {
        namespace: NS.into(),
        session_id: session.into(),
        budget_tokens: budget,
        query: query.into(),
        skip_recall: skip,
        ..Default::default()
    })
    .await
    .expect("bundle")
    .into_inner()
    .bundle
    .expect("a bundle")
    .rendered_text
}

#[derive(Default)]
struct Ranks(Vec<Option<usize>>);

impl Ranks {
    fn at(&self, k: usize) -> f64 {
        self.0.iter().filter(|r| r.is_some_and(|r| r < k)).count() as f64
            / self.0.len().max(1) as f64
    }
    fn mrr(&self) -> f64 {
        self.0
            .iter()
            .map(|r| r.map_or(0.0, |r| 1.0 / (r + 1) as f64))
            .sum::<f64>()
            / self.0.len().max(1) as f64
    }
}

async fn quality(path: &str) {
    let data: Dataset = serde_json::from_str(&std::fs::read_to_string(path).expect("read the set"))
        .expect("parse the set");
    let d = start().await;
    let mut c = connect(d.addr).await;
    let t0 = Instant::now();
    load(&mut c, &data).await;
    let turns: usize = data
        .subjects
        .iter()
        .flat_map(|s| &s.sessions)
        .map(|s| s.turns.len())
        .sum();
    println!("\n### {path}\n\n{}\n\n{} subjects, {} turns, {} questions (loaded and settled in {:.0} s)\n",
        data.source.lines().next().unwrap_or(""), data.subjects.len(), turns, data.questions.len(), t0.elapsed().as_secs_f64());
    let subjects: HashMap<&str, &Subject> = data
        .subjects
        .iter()
        .map(|s| (s.subject_id.as_str(), s))
        .collect();
    let flats: HashMap<&str, Vec<Flat>> = data
        .subjects
        .iter()
        .map(|s| (s.subject_id.as_str(), flat(s)))
        .collect();
    let indexes: HashMap<&str, Bm25> = flats
        .iter()
        .map(|(k, v)| {
            (
                *k,
                Bm25::new(&v.iter().map(|f| f.line.as_str()).collect::<Vec<_>>()),
            )
        })
        .collect();
    // hits[budget][method]
    let methods = [
        "mnemo bundle",
        "mnemo bundle, no retrieval",
        "newest turns",
        "plain BM25 pack",
    ];
    let mut hits = vec![[0usize; 4]; BUDGETS.len()];
    let (mut search_ranks, mut bm25_ranks) = (Ranks::default(), Ranks::default());
    let mut misses = Vec::new();
    let mut asked = Vec::new();
    // The ceiling: questions whose answer is said verbatim somewhere in
    // the subject's conversations (no pack of transcript text can do
    // better).
    let ceiling = data
        .questions
        .iter()
        .filter(|q| {
            flats.get(q.subject_id.as_str()).is_some_and(|fl| {
                let all: Vec<&str> = fl.iter().map(|f| f.line.as_str()).collect();
                answered(&all.join("\n"), &q.answers)
            })
        })
        .count();
    // The set as the blind reader's tables name it: its source's first words.
    let set_name = data
        .source
        .split([',', '\n', '(', ':'])
        .next()
        .unwrap_or("")
        .trim();
    let mut contexts = std::env::var_os("MNEMO_BENCH_DUMP_CONTEXTS").map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open the contexts dump")
    });
    let mut dump = std::env::var_os("MNEMO_BENCH_DUMP_SEARCH").map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open the dump")
    });
    for (qi, q) in data.questions.iter().enumerate() {
        let Some(s) = subjects.get(q.subject_id.as_str()) else {
            continue;
        };
        let open = &s.sessions.last().expect("a session").session_id;
        let fl = &flats[q.subject_id.as_str()];
        let order = indexes[q.subject_id.as_str()].rank(&q.question);
        for (b, &budget) in BUDGETS.iter().enumerate() {
            if what_only_search() {
                break;
            }
            let with = bundle(&mut c, open, budget, &q.question, false).await;
            let without = bundle(&mut c, open, budget, &q.question, true).await;
            let newest = pack(fl.iter().rev().map(|f| f.line.as_str()), budget as usize);
            let bm = pack(order.iter().map(|&i| fl[i].line.as_str()), budget as usize);
            for (m, text) in [&with, &without, &newest, &bm].into_iter().enumerate() {
                hits[b][m] += usize::from(answered(text, &q.answers));
            }
            if let Some(out) = contexts.as_mut() {
                // For the blind reader (scripts/blind_reader.py).
                let line = serde_json::json!({
                    "set": set_name, "qid": qi, "question": q.question,
                    "answers": q.answers, "category": q.category, "budget": budget,
                    "contexts": {"bundle": with, "pack": bm},
                });
                writeln!(out, "{line}").expect("write the contexts dump");
            }
            if budget == 2_000
                && !answered(&with, &q.answers)
                && answered(&bm, &q.answers)
                && misses.len() < 12
            {
                misses.push(format!("- {:?} → {:?}", q.question, q.answers));
            }
        }
        if q.evidence.is_empty() {
            continue;
        }
        let is_evidence = |sid: &str, seq: u64| {
            q.evidence
                .iter()
                .any(|e| e.session_id == sid && e.index as u64 + 1 == seq)
        };
        let r = search_turns(&mut c, &q.subject_id, &q.question, 10).await;
        let rank = r
            .hits
            .iter()
            .position(|h| is_evidence(&h.session_id, h.seq));
        if rank.is_none_or(|r| r >= 5) && std::env::var_os("MNEMO_BENCH_SHOW_MISSES").is_some() {
            let ev: Vec<&str> = q
                .evidence
                .iter()
                .filter_map(|e| {
                    s.sessions
                        .iter()
                        .find(|x| x.session_id == e.session_id)
                        .and_then(|x| x.turns.get(e.index))
                        .map(|t| t.content.as_str())
                })
                .collect();
            eprintln!(
                "MISS {:?} rank {rank:?}\n  evidence: {ev:?}\n  top: {:?}",
                q.question,
                r.hits.first().map(|h| &h.snippet)
            );
        }
        search_ranks.0.push(rank);
        if let Some(dump) = dump.as_mut() {
            // Mnemo's top 50 per question, for ranking experiments outside
            // the daemon (one JSON line per question).
            let r = search_turns(&mut c, &q.subject_id, &q.question, 50).await;
            let top: Vec<(&str, u64)> = r
                .hits
                .iter()
                .map(|h| (h.session_id.as_str(), h.seq))
                .collect();
            let line =
                serde_json::json!({"question": q.question, "subject_id": q.subject_id, "top": top});
            writeln!(dump, "{line}").expect("write the dump");
        }
        asked.push(pg_fts::Asked {
            subject: q.subject_id.clone(),
            question: q.question.clone(),
            evidence: q
                .evidence
                .iter()
                .map(|e| (e.session_id.clone(), e.index as u64 + 1))
                .collect(),
        });
        bm25_ranks.0.push(
            order
                .iter()
                .take(10)
                .position(|&i| is_evidence(&fl[i].session_id, fl[i].seq)),
        );
    }
    let n = data.questions.len().max(1) as f64;
    println!(
        "Answer in the bundle ({} questions):\n",
        data.questions.len()
    );
    println!("| what goes into the budget | 1,000 | 2,000 | 4,000 |\n|---|---:|---:|---:|");
    for (m, name) in methods.iter().enumerate() {
        let cells: Vec<String> = (0..BUDGETS.len())
            .map(|b| format!("{:.1}%", 100.0 * hits[b][m] as f64 / n))
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
    let ratio: Vec<String> = (0..BUDGETS.len())
        .map(|b| format!("{:.2}×", hits[b][0] as f64 / hits[b][3].max(1) as f64))
        .collect();
    println!("| mnemo ÷ BM25 pack | {} |", ratio.join(" | "));
    let of_ceiling: Vec<String> = (0..BUDGETS.len())
        .map(|b| {
            format!(
                "{:.3} / {:.3}",
                hits[b][0] as f64 / ceiling.max(1) as f64,
                hits[b][3] as f64 / ceiling.max(1) as f64
            )
        })
        .collect();
    println!(
        "| ceiling: answer said verbatim in the conversations | {0:.1}% | {0:.1}% | {0:.1}% |",
        100.0 * ceiling as f64 / n
    );
    println!(
        "| share of the ceiling, bundle / BM25 pack | {} |",
        of_ceiling.join(" | ")
    );
    println!(
        "\nSearch, evidence turn ranked ({} questions with evidence):\n",
        search_ranks.0.len()
    );
    println!("| ranking | recall@1 | recall@5 | recall@10 | MRR |\n|---|---:|---:|---:|---:|");
    // PostgreSQL's full-text search on the same turns (off the runtime:
    // the synchronous client runs its own).
    let fts = std::thread::scope(|s| {
        s.spawn(|| {
            pg::server().map(|server| pg_fts::measure(&server.fresh_database(), &flats, &asked))
        })
        .join()
        .expect("the full-text measurement")
    });
    let fts_ranks = fts.as_ref().map(|f| Ranks(f.ranks.clone()));
    let mut rows = vec![("mnemo Search", &search_ranks), ("plain BM25", &bm25_ranks)];
    if let Some(r) = &fts_ranks {
        rows.push(("PostgreSQL full-text (ts_rank_cd)", r));
    }
    for (name, r) in rows {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} |",
            r.at(1),
            r.at(5),
            r.at(10),
            r.mrr()
        );
    }
    if let Some(f) = &fts {
        println!(
            "\nPostgreSQL full-text: {:.0} µs per turn inserted (tsvector + GIN), query p50 {:.2} ms p99 {:.2} ms",
            f.insert_us_per_turn,
            f.p50.as_secs_f64() * 1e3,
            f.p99.as_secs_f64() * 1e3
        );
    }
    if !misses.is_empty() {
        println!(
            "\nSome questions the BM25 pack answers and the bundle does not (2,000 tokens):\n{}",
            misses.join("\n")
        );
    }
    let _ = d.stop.send(());
    let _ = d.task.await;
}

fn what_only_search() -> bool {
    std::env::args().any(|a| a == "search")
}

fn percentile(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

/// One subject size under measurement: its daemon, a client, its open
/// session and the samples taken so far.
struct Sized {
    turns: usize,
    daemon: Daemon1,
    client: Client,
    open: String,
    /// The open session's date, in seconds.
    reference: i64,
    with: Vec<Duration>,
    without: Vec<Duration>,
}

/// A subject of `n` turns: the set's turns repeated into sessions of 500,
/// the last one open. The pool is laid out so that the open session holds
/// the same turns, on the same day, at every size: only the history behind
/// it grows.
fn subject_of(pool: &[Turn], n: usize) -> Dataset {
    let per = 500.min(n);
    let count = n.div_ceil(per);
    let shift = pool.len() - ((count - 1) * per) % pool.len();
    let sessions: Vec<Session> = (0..count)
        .map(|i| Session {
            session_id: format!("lat-{i:05}"),
            // Back from the open session's date, a day apart.
            date: {
                let back = count - 1 - i;
                format!(
                    "2024-{:02}-{:02}T10:00:00Z",
                    12 - (back / 28) % 12,
                    28 - back % 28
                )
            },
            turns: (0..per.min(n - i * per))
                .map(|k| pool[(i * per + k + shift) % pool.len()].clone())
                .collect(),
        })
        .collect();
    Dataset {
        source: String::new(),
        subjects: vec![Subject {
            subject_id: "lat".into(),
            sessions,
        }],
        questions: Vec::new(),
    }
}

/// Bundle latency per subject size. Every size is loaded first, each into
/// its own daemon; then each query is asked of every size in turn, so a
/// spell of the machine's noise falls on all sizes alike rather than on
/// whichever size was being measured at the time.
async fn latency(path: &str, sizes: &[usize]) {
    let data: Dataset = serde_json::from_str(&std::fs::read_to_string(path).expect("read the set"))
        .expect("parse the set");
    let pool: Vec<Turn> = data
        .subjects
        .iter()
        .flat_map(|s| &s.sessions)
        .flat_map(|s| s.turns.clone())
        .collect();
    let queries: Vec<&str> = data
        .questions
        .iter()
        .map(|q| q.question.as_str())
        .take(200)
        .collect();
    let passes: usize = std::env::var("MNEMO_BENCH_LATENCY_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut subjects = Vec::new();
    for &n in sizes {
        let daemon = start().await;
        let mut client = connect(daemon.addr).await;
        let set = subject_of(&pool, n);
        load(&mut client, &set).await;
        let last = set.subjects[0].sessions.last().expect("a session");
        subjects.push(Sized {
            turns: n,
            daemon,
            client,
            open: last.session_id.clone(),
            reference: parse_time(&last.date),
            with: Vec::new(),
            without: Vec::new(),
        });
    }
    // Loading a larger subject may leave a smaller one's daemon with work.
    quiet().await;
    // An unmeasured pass first: caches warm.
    for pass in 0..=passes {
        for q in &queries {
            for s in &mut subjects {
                let t = Instant::now();
                bundle(&mut s.client, &s.open, 2_000, q, false).await;
                s.with.push(t.elapsed());
                let t = Instant::now();
                bundle(&mut s.client, &s.open, 2_000, q, true).await;
                s.without.push(t.elapsed());
            }
        }
        for s in &mut subjects {
            if std::env::var_os("MNEMO_BENCH_SHOW_PASSES").is_some() {
                eprintln!(
                    "{} turns, pass {pass}: p50 {:.2} / {:.2} ms",
                    s.turns,
                    percentile(&mut s.with, 0.5),
                    percentile(&mut s.without, 0.5)
                );
            }
            if pass == 0 {
                (s.with, s.without) = (Vec::new(), Vec::new());
            }
        }
    }
    println!(
        "\n### Bundle latency (budget 2,000, {} queries x {passes} passes each, sizes interleaved; ms)\n",
        queries.len()
    );
    println!("| turns per subject | p50 with retrieval | p99 with | p50 without | p99 without | p99 ratio | search alone p50 / p99 (µs) |\n|---:|---:|---:|---:|---:|---:|---:|");
    for mut s in subjects {
        let (w50, w99, o50, o99) = (
            percentile(&mut s.with, 0.5),
            percentile(&mut s.with, 0.99),
            percentile(&mut s.without, 0.5),
            percentile(&mut s.without, 0.99),
        );
        let _ = s.daemon.stop.send(());
        let _ = s.daemon.task.await;
        let (s50, s99) = search_alone(
            &s.daemon.dir.path().join(mnemo::server::SEARCH_INDEX_DIR),
            &queries,
            passes,
            s.reference * 1_000_000_000,
        );
        println!(
            "| {} | {w50:.2} | {w99:.2} | {o50:.2} | {o99:.2} | {:.2}× | {s50:.0} / {s99:.0} |",
            s.turns,
            w99 / o99.max(1e-9)
        );
    }
}

/// A bundle's retrieval query (`memory/recall.rs`: the subject's records,
/// no snippets, no phrases, the 40 hits a 2,000-token bundle asks for),
/// timed in this process on the subject's index once the daemon has
/// stopped: without gRPC, the store and the rest of the bundle, what grows
/// with the history is seen apart from most of a busy machine's noise.
/// One unmeasured pass, then `passes`; p50 and p99 in µs.
fn search_alone(dir: &std::path::Path, queries: &[&str], passes: usize, now: i64) -> (f64, f64) {
    let (index, rebuild) = SearchIndex::open(Some(dir)).expect("the index opens");
    assert!(!rebuild, "the daemon left a complete index");
    let mut times = Vec::new();
    for pass in 0..=passes {
        for q in queries {
            let q = SearchQuery {
                namespace: NS.into(),
                subject_id: Some("lat".into()),
                session_id: None,
                query: (*q).to_owned(),
                kinds: Vec::new(),
                limit: 40,
                reference_time: Some(now),
                snippets: false,
                phrases: false,
            };
            let t = Instant::now();
            index.search(&q, &mut |_| Ok(true)).expect("a search");
            if pass > 0 {
                times.push(t.elapsed());
            }
        }
    }
    (
        percentile(&mut times, 0.5) * 1e3,
        percentile(&mut times, 0.99) * 1e3,
    )
}

fn main() {
    let what = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "all".into());
    let sets = std::env::var("MNEMO_RETRIEVAL_SET").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/memory_bfcl/dev.json"
        )
        .into()
    });
    let sizes: Vec<usize> = std::env::var("MNEMO_BENCH_RETRIEVAL_TURNS")
        .unwrap_or_else(|_| "1000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        for path in sets.split(',') {
            if matches!(what.as_str(), "quality" | "all" | "search") {
                quality(path).await;
            }
        }
        if matches!(what.as_str(), "latency" | "all") {
            latency(sets.split(',').next().unwrap_or_default(), &sizes).await;
        }
    });
}
