//! How much of a session's bundle a prompt cache can reuse. Replays the
//! chat and meeting development sets through the real daemon (in-process,
//! gRPC on 127.0.0.1): each session's turns are appended one exchange at a
//! time (a user turn and what follows it; one turn of a meeting), and after
//! each append the agent asks for a bundle (default query, no reader) at
//! 2,000, 4,000 and 8,000 tokens (one daemon per budget). Each bundle is
//! compared with the previous bundle of the same session:
//!
//! - **reuse**: the share of the bundle's tokens that equal the previous
//!   bundle's beginning (their common prefix, cut at its last newline,
//!   counted with cl100k_base), the mean over pairs; also between two
//!   folds (same summary version) and across a fold;
//! - **changes / 100**: pairs whose common prefix is under half the
//!   previous bundle, per 100 exchanges;
//! - **bill / 100**: input tokens of the bundles per 100 exchanges, with
//!   no cache, and with the reused prefix billed at 0.1× and at 0.5× (the
//!   published range of cached-input prices; a cache write premium and a
//!   provider's minimum cacheable length are left out);
//! - bundle p50/p99 (ms) over the replay;
//! - **ceiling**: the share of the bundle that could be reused at best,
//!   the bundle less the new exchange's own lines and the as-of line
//!   (the least a request's part can hold; it names the newest turn), the
//!   mean over pairs, and reuse ÷ ceiling;
//! - where the non-reused share goes: the new exchange, the as-of line,
//!   retrieved memory (part 3), the reader's line and the note on what
//!   was cut, part 2 rewritten before the new exchange (a fold, a block
//!   cut), part 1 from its first difference on; found in the text through
//!   the response's part offsets.
//!
//! Folds are deterministic: automatic summaries are off and the bench
//! asks for one (`Summarize`, waiting) after every 10 turns of a session,
//! the daemon's default cadence. Sessions of a subject are replayed in
//! order, each closed (and its episode awaited) before the next, so later
//! sessions carry the subject's memory.
//!
//! The bench reads only the rendered text, so the same file measures any
//! version of the daemon (the "before" of a change is this bench run on
//! the base commit).
//!
//! `MNEMO_REPLAY_DUMP=path` appends every bundle (JSON lines) to `path`.
//! `MNEMO_REPLAY_QUERY=newest` asks every bundle with the exchange's newest
//! user message as its query (as the Agents session does); **stable + log
//! kept** is the share of pairs whose previous bundle's stable part and log
//! (up to its `log_end_bytes`: what a client caches) begin the next bundle.
//!
//! Data: `MNEMO_REPLAY_SETS` (comma-separated `name=path`; default the
//! committed BFCL v4 memory chats and ELITR meetings; any chat set in the
//! same JSON form, such as the REALTALK chats built by
//! `scripts/realtalk_to_dev_set.py`, which may not be committed, is added
//! as `realtalk=path`). `MNEMO_REPLAY_BUDGETS` (comma-separated) overrides
//! the budgets.
//!
//! Before/after in one run: `benches/replay_compare.sh <base commit>`
//! builds this file at the base commit (a temporary worktree, the same
//! target directory) and runs both with the same environment.
//!
//! Run: `cargo bench --bench replay`. Prints a Markdown table. This
//! measures, it does not test.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mnemo::config::Config;
use mnemo::model::Encoding;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use mnemo::server::Daemon;
use serde::Deserialize;
use tokio::sync::oneshot;
use tonic::transport::Channel;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Client = MemoryServiceClient<Channel>;

const NS: &str = "replay";
const FOLD_EVERY: usize = 10;

#[derive(Deserialize, Clone)]
struct Turn {
    #[serde(default = "user")]
    role: String,
    #[serde(default)]
    speaker: String,
    content: String,
}

fn user() -> String {
    "user".into()
}

/// The chat set (BFCL memory).
#[derive(Deserialize)]
struct Chats {
    subjects: Vec<ChatSubject>,
}

#[derive(Deserialize)]
struct ChatSubject {
    subject_id: String,
    sessions: Vec<ChatSession>,
}

#[derive(Deserialize)]
struct ChatSession {
    session_id: String,
    turns: Vec<Turn>,
}

/// The meeting set (ELITR).
#[derive(Deserialize)]
struct Meetings {
    meetings: Vec<Meeting>,
}

#[derive(Deserialize)]
struct Meeting {
    id: String,
    turns: Vec<Turn>,
}

/// A subject's sessions in order (empty subject: sessions stand alone).
struct Replay {
    subject: String,
    sessions: Vec<(String, Vec<Turn>)>,
}

fn load_set(path: &str) -> Vec<Replay> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    if let Ok(c) = serde_json::from_str::<Chats>(&text) {
        return c
            .subjects
            .into_iter()
            .map(|s| Replay {
                subject: s.subject_id,
                sessions: s
                    .sessions
                    .into_iter()
                    .map(|x| (x.session_id, x.turns))
                    .collect(),
            })
            .collect();
    }
    let m: Meetings = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    m.meetings
        .into_iter()
        .map(|m| Replay {
            subject: String::new(),
            sessions: vec![(m.id, m.turns)],
        })
        .collect()
}

/// Exchanges: a user turn and the turns after it up to the next user turn;
/// a meeting (no user turns) one turn at a time.
fn exchanges(turns: &[Turn]) -> Vec<Vec<Turn>> {
    let mut out: Vec<Vec<Turn>> = Vec::new();
    let meeting = !turns.iter().any(|t| t.role == "user");
    for t in turns {
        match out.last_mut() {
            Some(x) if !meeting && t.role != "user" => x.push(t.clone()),
            _ => out.push(vec![t.clone()]),
        }
    }
    out
}

fn role(r: &str) -> pb::Role {
    match r {
        "user" => pb::Role::User,
        "assistant" => pb::Role::Assistant,
        "tool" => pb::Role::Tool,
        _ => pb::Role::User,
    }
}

struct Daemon1 {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<mnemo::Result<()>>,
    _dir: tempfile::TempDir,
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
        _dir: dir,
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

fn tokens(s: &str) -> u64 {
    mnemo::tokens::count(Encoding::Cl100kBase, s) as u64
}

/// Tokens of the common beginning of `a` and `b`, cut at its last newline
/// (a whole line is a whole run of tokens in both).
fn shared_tokens(a: &str, b: &str) -> u64 {
    let n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let cut = b.as_bytes()[..n]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1);
    tokens(&b[..cut])
}

#[derive(Default)]
struct Tally {
    exchanges: u64,
    pairs: u64,
    reuse: f64,
    within: (u64, f64),
    across: (u64, f64),
    changes: u64,
    total: u64,
    cached: u64,
    latency: Vec<Duration>,
    folds: u64,
    refused: u64,
    /// Sums of per-pair shares: the ceiling (overall, between folds) and
    /// where the non-reused share went.
    ceiling: f64,
    ceiling_within: f64,
    loss: Loss,
    /// Bundle tokens over pairs (for the mean size).
    pair_tokens: u64,
    /// Pairs where the previous bundle's stable part and log (what a
    /// client caches, up to `log_end_bytes`) begin the next bundle whole.
    kept: u64,
}

/// Where a pair's non-reused tokens lie, as shares of the bundle (sums
/// over pairs).
#[derive(Default)]
struct Loss {
    /// The appended exchange's own lines (and any update line after them).
    exchange: f64,
    /// Part 3: retrieved memory.
    recalled: f64,
    /// Part 3: the as-of line.
    as_of: f64,
    /// Part 3: the reader's line and the note on what was cut.
    note: f64,
    /// Part 2 before the new exchange: the log rewritten (a fold, a block
    /// cut, a heading).
    log: f64,
    /// Part 1 from its first difference on.
    stable: f64,
}

/// A bundle's tokens by part, and the pair's breakdown: (ceiling, loss).
/// `first_seq` is the seq of the exchange's first turn; `who` names its
/// turns as a transcript shows them (speaker, else role), newest last.
fn breakdown(b: &pb::ContextBundle, shared: u64, first_seq: usize, who: &[String]) -> (f64, Loss) {
    let text = b.rendered_text.as_str();
    let total = u64::from(b.token_count).max(1);
    let (sb, lb) = (b.stable_end_bytes as usize, b.log_end_bytes as usize);
    let (se, le) = (u64::from(b.stable_end_tokens), u64::from(b.log_end_tokens));
    let log = text.get(sb..lb).unwrap_or("");
    // Where the exchange starts in the log: its first turn's line
    // ("[#seq] role:"), or in a transcript (no seqs) the line of its first
    // turn, found backwards from the end ("who:").
    let marker = format!("[#{first_seq}] ");
    let start = if log.starts_with(&marker) {
        Some(0)
    } else if let Some(i) = log.find(&format!("\n{marker}")) {
        Some(i + 1)
    } else {
        let mut end = log.len();
        let mut at = None;
        for w in who.iter().rev() {
            match log[..end].rfind(&format!("\n{w}:")) {
                Some(i) => {
                    at = Some(i + 1);
                    end = i;
                }
                None if log.starts_with(&format!("{w}:")) => at = Some(0),
                None => {}
            }
        }
        at
    };
    let exchange = start.map_or(0, |i| tokens(&log[i..]));
    let rest = text.get(lb..).unwrap_or("");
    let as_of_at = rest
        .find("As of turn ")
        .or_else(|| rest.find("No turns yet"))
        .unwrap_or(rest.len());
    let as_of = rest[as_of_at..]
        .split_inclusive('\n')
        .next()
        .map_or(0, tokens);
    let recalled = tokens(&rest[..as_of_at]);
    let part3 = total.saturating_sub(le);
    let log_lost = le.saturating_sub(shared.max(se));
    let exchange = exchange.min(log_lost);
    let share = |x: u64| x as f64 / total as f64;
    let loss = Loss {
        exchange: share(exchange),
        recalled: share(recalled),
        as_of: share(as_of),
        note: share(part3.saturating_sub(recalled + as_of)),
        log: share(log_lost - exchange),
        stable: share(se.saturating_sub(shared)),
    };
    (share(total.saturating_sub(exchange + as_of)), loss)
}

impl Loss {
    fn add(&mut self, o: &Loss) {
        self.exchange += o.exchange;
        self.recalled += o.recalled;
        self.as_of += o.as_of;
        self.note += o.note;
        self.log += o.log;
        self.stable += o.stable;
    }
}

/// A message as a query: at most the daemon's limit, cut at a character
/// boundary (as a client does with a long message).
fn clip_query(text: &str) -> String {
    let mut end = text.len().min(mnemo::bundle::MAX_QUERY_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Whether bundles are asked with the newest user message as their query
/// (`MNEMO_REPLAY_QUERY=newest`), as the Agents session asks them.
fn newest_as_query() -> bool {
    std::env::var("MNEMO_REPLAY_QUERY").is_ok_and(|v| v == "newest")
}

async fn wait_for_episode(c: &mut Client, subject: &str, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let n = c
            .list_episodes(pb::ListEpisodesRequest {
                namespace: NS.into(),
                subject_id: subject.into(),
                page_size: 100,
                page_token: String::new(),
            })
            .await
            .map(|r| r.into_inner().episodes.len())
            .unwrap_or(0);
        if n >= want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn replay(set: &[Replay], budget: u32) -> Tally {
    let d = start().await;
    let mut c = connect(d.addr).await;
    let mut t = Tally::default();
    for r in set {
        for (k, (sid, turns)) in r.sessions.iter().enumerate() {
            c.create_session(pb::CreateSessionRequest {
                namespace: NS.into(),
                session_id: sid.clone(),
                subject_id: r.subject.clone(),
                settings: Some(pb::SessionSettings {
                    summary_every_turns: 10_000,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .expect("create session");
            let mut prev: Option<(String, u64, usize)> = None;
            let mut appended = 0usize;
            for x in exchanges(turns) {
                let new: Vec<pb::NewTurn> = x
                    .iter()
                    .map(|t| pb::NewTurn {
                        role: role(&t.role) as i32,
                        speaker: t.speaker.clone(),
                        content: t.content.clone(),
                        ..Default::default()
                    })
                    .collect();
                let before = appended;
                appended += new.len();
                c.append_turns(pb::AppendTurnsRequest {
                    namespace: NS.into(),
                    session_id: sid.clone(),
                    turns: new,
                    ..Default::default()
                })
                .await
                .expect("append");
                if appended / FOLD_EVERY > before / FOLD_EVERY {
                    // A fold the summarizer's validation refuses is not
                    // stored (as in the daemon): counted, and the replay
                    // goes on.
                    let folded = c
                        .summarize(pb::SummarizeRequest {
                            namespace: NS.into(),
                            session_id: sid.clone(),
                            wait: true,
                        })
                        .await;
                    t.folds += 1;
                    if folded.is_err() {
                        t.refused += 1;
                    }
                }
                let at = Instant::now();
                // As the Agents session asks: the newest user message as
                // the query (MNEMO_REPLAY_QUERY=newest), else none.
                let query = if newest_as_query() {
                    x.iter()
                        .rev()
                        .find(|t| t.role == "user")
                        .map_or_else(String::new, |t| clip_query(&t.content))
                } else {
                    String::new()
                };
                let b = c
                    .get_context_bundle(pb::GetContextBundleRequest {
                        namespace: NS.into(),
                        session_id: sid.clone(),
                        budget_tokens: budget,
                        query,
                        ..Default::default()
                    })
                    .await
                    .expect("bundle")
                    .into_inner()
                    .bundle
                    .expect("a bundle");
                t.latency.push(at.elapsed());
                t.exchanges += 1;
                let version = b.manifest.as_ref().map_or(0, |m| m.summary_version);
                let total = u64::from(b.token_count);
                t.total += total;
                if let Some((text, v, log_end)) = &prev {
                    t.kept += u64::from(
                        text.get(..*log_end)
                            .is_some_and(|p| b.rendered_text.starts_with(p)),
                    );
                    let shared = shared_tokens(text, &b.rendered_text);
                    let share = shared as f64 / total.max(1) as f64;
                    t.cached += shared;
                    t.pairs += 1;
                    t.reuse += share;
                    let bucket = if *v == version {
                        &mut t.within
                    } else {
                        &mut t.across
                    };
                    bucket.0 += 1;
                    bucket.1 += share;
                    if (shared as f64) < 0.5 * tokens(text) as f64 {
                        t.changes += 1;
                    }
                    let who: Vec<String> = x
                        .iter()
                        .map(|t| {
                            if t.speaker.is_empty() {
                                t.role.clone()
                            } else {
                                t.speaker.clone()
                            }
                        })
                        .collect();
                    let (ceiling, loss) = breakdown(&b, shared, before + 1, &who);
                    t.ceiling += ceiling;
                    if *v == version {
                        t.ceiling_within += ceiling;
                    }
                    t.loss.add(&loss);
                    t.pair_tokens += total;
                }
                if let Some(path) = std::env::var_os("MNEMO_REPLAY_DUMP") {
                    use std::io::Write as _;
                    let line = serde_json::json!({
                        "budget": budget, "session": sid, "version": version,
                        "stable_end": b.stable_end_bytes, "log_end": b.log_end_bytes,
                        "text": b.rendered_text,
                    });
                    if let Ok(mut f) = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                    {
                        let _ = writeln!(f, "{line}");
                    }
                }
                let log_end = b.log_end_bytes as usize;
                prev = Some((b.rendered_text, version, log_end));
            }
            if !r.subject.is_empty() && k + 1 < r.sessions.len() {
                c.close_session(pb::CloseSessionRequest {
                    namespace: NS.into(),
                    session_id: sid.clone(),
                })
                .await
                .expect("close");
                wait_for_episode(&mut c, &r.subject, k + 1).await;
            }
        }
    }
    let _ = d.stop.send(());
    let _ = d.task.await;
    t
}

fn percentile(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    if v.is_empty() {
        return 0.0;
    }
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i].as_secs_f64() * 1000.0
}

fn main() {
    let root = env!("CARGO_MANIFEST_DIR");
    let sets = std::env::var("MNEMO_REPLAY_SETS").unwrap_or_else(|_| {
        format!(
            "bfcl-memory={root}/tests/fixtures/memory_bfcl/dev.json,elitr-meetings={root}/tests/fixtures/meetings_elitr/dev.json"
        )
    });
    let budgets: Vec<u32> = std::env::var("MNEMO_REPLAY_BUDGETS")
        .unwrap_or_else(|_| "2000,4000,8000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "Query: {}\n",
        if newest_as_query() {
            "the newest user message"
        } else {
            "none"
        }
    );
    println!("| set | budget | exchanges | reuse | ceiling | reuse ÷ ceiling | reuse between folds | ceiling between folds | reuse across a fold | changes / 100 | stable + log kept | bill / 100, no cache | bill / 100, cached 0.1× | bill / 100, cached 0.5× | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut losses = Vec::new();
    rt.block_on(async {
        for spec in sets.split(',') {
            let (name, path) = spec.split_once('=').unwrap_or((spec, spec));
            let set = load_set(path);
            for &budget in &budgets {
                let mut t = replay(&set, budget).await;
                let per100 = |x: f64| x * 100.0 / t.exchanges.max(1) as f64;
                let mean = |(n, s): (u64, f64)| {
                    if n == 0 {
                        "–".to_owned()
                    } else {
                        format!("{:.3}", s / n as f64)
                    }
                };
                let bill = |m: f64| per100(t.total as f64 - (1.0 - m) * t.cached as f64);
                let pairs = t.pairs.max(1) as f64;
                println!(
                    "| {name} | {budget} | {} | {} | {} | {:.3} | {} | {} | {} | {:.1} | {:.3} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} |",
                    t.exchanges,
                    mean((t.pairs, t.reuse)),
                    mean((t.pairs, t.ceiling)),
                    t.reuse / t.ceiling.max(f64::MIN_POSITIVE),
                    mean(t.within),
                    mean((t.within.0, t.ceiling_within)),
                    mean(t.across),
                    per100(t.changes as f64),
                    t.kept as f64 / pairs,
                    per100(t.total as f64),
                    bill(0.1),
                    bill(0.5),
                    percentile(&mut t.latency, 0.5),
                    percentile(&mut t.latency, 0.99),
                );
                let l = &t.loss;
                losses.push(format!(
                    "| {name} | {budget} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    t.pair_tokens as f64 / pairs,
                    1.0 - t.reuse / pairs,
                    l.exchange / pairs,
                    l.as_of / pairs,
                    l.recalled / pairs,
                    l.note / pairs,
                    l.log / pairs,
                    l.stable / pairs,
                    1.0 - t.ceiling / pairs,
                ));
                if t.refused > 0 {
                    eprintln!(
                        "{name} at {budget}: {} of {} folds refused by the summarizer's validation",
                        t.refused, t.folds
                    );
                }
            }
        }
    });
    println!("\nWhere the non-reused share goes (mean share of a bundle over pairs; the ceiling leaves out the new exchange and the as-of line):\n");
    println!("| set | budget | mean bundle tokens | not reused | new exchange | as-of line | part 3: retrieved memory | part 3: reader, note | part 2 rewritten | part 1 changed | 1 − ceiling |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for l in losses {
        println!("{l}");
    }
}
