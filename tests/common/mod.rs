//! Test support: `TestServer` runs the real daemon in-process on
//! `127.0.0.1:0` with a temporary data directory and a real gRPC client;
//! `Binary` runs the compiled `mnemo` executable as a child process.
#![allow(dead_code)]

pub mod llama;
pub mod postgres;
pub mod raw;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mnemo::config::{Config, StoreKind};
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use mnemo::server::Daemon;
use mnemo::store::commit::Stats;
use tokio::sync::oneshot;
use tonic::transport::Channel;
use tonic::Code;

/// A daemon serving on a loopback port until `stop` (or drop). It runs on
/// its own runtime thread, as in production: ending a test never cancels
/// the daemon's tasks midway; it always shuts down cleanly (drain, sync,
/// close the store) before the thread ends.
pub struct TestServer {
    pub addr: SocketAddr,
    pub commit_stats: Arc<Stats>,
    pub data_dir: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<mnemo::Result<()>>>,
    _tmp: Option<tempfile::TempDir>,
}

impl TestServer {
    /// A server on a fresh temporary sled data directory.
    pub async fn start() -> TestServer {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("data");
        let mut s = Self::start_with(config_for(&dir)).await;
        s._tmp = Some(tmp);
        s
    }

    /// A server with a given config (its data_dir is the caller's).
    pub async fn start_with(config: Config) -> TestServer {
        Self::start_with_hook(config, |_| {}).await
    }

    /// As [`TestServer::start_with`], calling `hook` with the daemon once
    /// it is open (to reach its runtime, e.g. its retention clock).
    pub async fn start_with_hook(
        config: Config,
        hook: impl FnOnce(&Daemon) + Send + 'static,
    ) -> TestServer {
        let data_dir = config.data_dir.clone();
        let (ready_tx, ready_rx) = oneshot::channel::<(SocketAddr, Arc<Stats>)>();
        let (tx, rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("test-daemon".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("daemon runtime");
                runtime.block_on(async move {
                    let daemon = Daemon::open(config).await.expect("daemon opens");
                    hook(&daemon);
                    let stats = daemon.runtime().sync_stats();
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("bind");
                    let addr = listener.local_addr().expect("addr");
                    let _ = ready_tx.send((addr, stats));
                    daemon
                        .serve(listener, async {
                            let _ = rx.await;
                        })
                        .await
                })
            })
            .expect("daemon thread");
        let (addr, commit_stats) = ready_rx.await.expect("daemon started");
        TestServer {
            addr,
            commit_stats,
            data_dir,
            stop: Some(tx),
            thread: Some(thread),
            _tmp: None,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url())
            .expect("valid url")
            .connect()
            .await
            .expect("connect")
    }

    pub async fn client(&self) -> MemoryServiceClient<Channel> {
        MemoryServiceClient::new(self.channel().await).max_decoding_message_size(64 << 20)
    }

    /// Graceful shutdown; returns the temp dir so a restart can reuse it.
    pub async fn stop(mut self) -> Option<tempfile::TempDir> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            tokio::time::timeout(
                STOP_WITHIN,
                tokio::task::spawn_blocking(move || thread.join()),
            )
            .await
            .unwrap_or_else(|_| {
                panic!("the daemon did not finish a graceful stop within {STOP_WITHIN:?}")
            })
            .expect("join task")
            .expect("daemon thread")
            .expect("server exits cleanly");
        }
        self._tmp.take()
    }

    /// Stops and starts again on the same data directory.
    pub async fn restart(self) -> TestServer {
        let dir = self.data_dir.clone();
        let tmp = self.stop().await;
        let mut s = Self::start_with(config_for(&dir)).await;
        s._tmp = tmp;
        s
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            // The daemon runs on its own runtime: joining cannot deadlock
            // the caller's. Its result was already checked by `stop` when
            // the test cared. Bounded, so a daemon that never stops fails
            // the test (its thread is left behind) instead of hanging it.
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = thread.join();
                let _ = tx.send(());
            });
            if rx.recv_timeout(STOP_WITHIN).is_err() && !std::thread::panicking() {
                panic!("the daemon did not finish a graceful stop within {STOP_WITHIN:?}");
            }
        }
    }
}

/// Longest a test daemon's graceful stop may take.
const STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(120);

/// The default config on a given sled directory.
/// The grace period is 1 s: a test that ends while its client is still
/// connected (its runtime cannot close the connection while the drop waits)
/// would otherwise wait the default 10 s.
///
/// With `MNEMO_TEST_STORE=postgres` the daemon stores in PostgreSQL
/// instead (one fresh database per directory, the same on a restart), so
/// a test file's cases run unchanged on the shared-database backend.
pub fn config_for(dir: &Path) -> Config {
    let mut c = Config {
        data_dir: dir.to_path_buf(),
        store: StoreKind::Sled,
        ..Config::default()
    };
    c.limits.shutdown_grace_secs = 1;
    if on_postgres() {
        static DATABASES: Mutex<Vec<(PathBuf, String)>> = Mutex::new(Vec::new());
        let mut dbs = DATABASES.lock().unwrap();
        let url = match dbs.iter().find(|(d, _)| d == dir) {
            Some((_, url)) => url.clone(),
            None => {
                let url = postgres::server()
                    .expect("MNEMO_TEST_STORE=postgres needs a PostgreSQL server")
                    .fresh_database();
                dbs.push((dir.to_path_buf(), url.clone()));
                url
            }
        };
        c.store = StoreKind::Postgres;
        c.postgres.url = url;
    }
    c
}

/// A session's whole audit log, oldest first.
pub async fn audit_log(
    c: &mut MemoryServiceClient<Channel>,
    ns: &str,
    id: &str,
) -> Vec<pb::AuditRecord> {
    c.get_audit_log(pb::GetAuditLogRequest {
        namespace: ns.into(),
        session_id: id.into(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .records
}

/// Whether `MNEMO_TEST_STORE=postgres` runs this test file's daemons on
/// PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var("MNEMO_TEST_STORE").as_deref() == Ok("postgres")
}

pub async fn create_session(
    c: &mut MemoryServiceClient<Channel>,
    ns: &str,
    id: &str,
) -> pb::Session {
    c.create_session(pb::CreateSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
        ..Default::default()
    })
    .await
    .expect("create session")
    .into_inner()
    .session
    .expect("session in response")
}

/// A turn of `role` by `speaker`.
pub fn turn(role: pb::Role, speaker: &str, content: &str) -> pb::NewTurn {
    pb::NewTurn {
        role: role as i32,
        speaker: speaker.into(),
        content: content.into(),
        ..Default::default()
    }
}

pub fn user_turn(content: &str) -> pb::NewTurn {
    pb::NewTurn {
        role: pb::Role::User as i32,
        speaker: "user:1".into(),
        content: content.into(),
        ..Default::default()
    }
}

pub fn append_req(ns: &str, id: &str, turns: Vec<pb::NewTurn>) -> pb::AppendTurnsRequest {
    pb::AppendTurnsRequest {
        namespace: ns.into(),
        session_id: id.into(),
        turns,
        ..Default::default()
    }
}

/// Every turn of a session, following pagination.
pub async fn all_turns(c: &mut MemoryServiceClient<Channel>, ns: &str, id: &str) -> Vec<pb::Turn> {
    let mut out = Vec::new();
    let mut token = String::new();
    loop {
        let page = c
            .list_turns(pb::ListTurnsRequest {
                namespace: ns.into(),
                session_id: id.into(),
                page_size: 1000,
                page_token: token,
                ..Default::default()
            })
            .await
            .expect("list turns")
            .into_inner();
        out.extend(page.turns);
        if page.next_page_token.is_empty() {
            return out;
        }
        token = page.next_page_token;
    }
}

pub async fn get_session(
    c: &mut MemoryServiceClient<Channel>,
    ns: &str,
    id: &str,
) -> Result<pb::Session, tonic::Status> {
    c.get_session(pb::GetSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
    })
    .await
    .map(|r| r.into_inner().session.expect("session in response"))
}

/// The compiled `mnemo` binary running `serve` as a child process, in a
/// process group of its own (with its wrapper, e.g. strace), so ending it
/// ends everything it started: killing only a wrapper would leave the
/// daemon running, orphaned. Every way of ending it (`kill9`, `terminate`,
/// drop) checks that no process of the group survives.
pub struct Binary {
    pub child: Child,
    /// The child's process group (ended and checked on every way out).
    group: ProcessGroup,
    pub addr: SocketAddr,
    /// The daemon's own pid (differs from the child's under a wrapper).
    pub pid: u32,
    /// Every line the daemon has logged so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Binary {
    /// Starts `mnemo serve` on `127.0.0.1:0` over `data_dir`, optionally
    /// wrapped in another command (e.g. strace), and waits for the
    /// "listening" log line to learn the port.
    pub fn start(data_dir: &Path, wrapper: &[&str]) -> Binary {
        Self::start_with(data_dir, wrapper, &[])
    }

    /// As [`Binary::start`], with more `serve` arguments (e.g. `--config`).
    pub fn start_with(data_dir: &Path, wrapper: &[&str], serve_args: &[&str]) -> Binary {
        Self::start_exe(
            Path::new(env!("CARGO_BIN_EXE_mnemo")),
            data_dir,
            wrapper,
            serve_args,
        )
    }

    /// As [`Binary::start_with`], running another build of mnemo (e.g. a
    /// release binary writing a stored-format fixture).
    pub fn start_exe(exe: &Path, data_dir: &Path, wrapper: &[&str], serve_args: &[&str]) -> Binary {
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(serve_args)
            .env("MNEMO_LOG", "info")
            .env_remove("MNEMO_CONFIG")
            .env_remove("MNEMO_LISTEN")
            .env_remove("MNEMO_DATA_DIR")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let (mut child, group) = spawn_in_group(&mut cmd);
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if std::env::var_os("MNEMO_TEST_LOG").is_some() {
                    eprintln!("[daemon] {line}");
                }
                lines.lock().unwrap().push(line.clone());
                if !sent {
                    if let Some(rest) = line.split("mnemo listening on ").nth(1) {
                        let addr = rest
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .to_string();
                        let pid = rest
                            .split_whitespace()
                            .find_map(|w| w.strip_prefix("pid="))
                            .unwrap_or_default()
                            .to_string();
                        let _ = tx.send((addr, pid));
                        sent = true;
                    }
                }
            }
        });
        let (addr, pid) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("daemon reports its address");
        Binary {
            child,
            group,
            addr: addr.parse().expect("address parses"),
            pid: pid.parse().expect("pid parses"),
            log,
        }
    }

    /// `mnemo serve` on the PostgreSQL database `url` (`data_dir` holds
    /// only its search index), with more `serve` arguments.
    pub fn start_on_postgres(data_dir: &Path, url: &str, serve_args: &[&str]) -> Binary {
        let mut args = vec!["--store", "postgres", "--postgres-url", url];
        args.extend_from_slice(serve_args);
        Self::start_with(data_dir, &[], &args)
    }

    /// Sends the daemon a signal (`kill -<name>`).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {}", self.pid);
    }

    /// Waits (at most 30 s) until the daemon has logged `times` lines
    /// that contain `text`.
    pub fn wait_for_log(&self, text: &str, times: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let seen = || {
            self.log
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.contains(text))
                .count()
        };
        while seen() < times {
            assert!(
                Instant::now() < deadline,
                "the daemon did not log {text:?} {times} times"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL to the daemon itself (a wrapper such as strace then exits
    /// on its own and flushes its log), then the group is ended.
    pub fn kill9(mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.pid.to_string()])
            .status();
        self.child.wait().expect("reap");
        self.group.end();
    }

    /// SIGTERM and wait; returns the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
        let status = self.child.wait().expect("reap");
        self.group.end();
        status
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        self.group.end();
        // Reap the leader (already dead: the group was killed).
        let _ = self.child.try_wait();
    }
}

/// Spawns `cmd` as the leader of a new process group, so that everything
/// it starts can be ended together (`kill -- -PGID`) and checked for.
pub fn spawn_in_group(cmd: &mut Command) -> (Child, ProcessGroup) {
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    let child = cmd.spawn().expect("spawn a child process");
    let group = ProcessGroup {
        pgid: child.id(),
        ended: false,
    };
    (child, group)
}

/// A process group a test started. Ending it kills every process left in
/// it and fails the test (unless it is already failing) when one
/// survives; dropping it ends it, so a test that panics midway leaves
/// nothing behind either.
pub struct ProcessGroup {
    pgid: u32,
    ended: bool,
}

impl ProcessGroup {
    /// Kills whatever is left of the group and checks (for at most 10 s)
    /// that nothing of it survives. Idempotent.
    pub fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        let group = format!("-{}", self.pgid);
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let alive = group_alive(self.pgid);
            if alive.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                if !std::thread::panicking() {
                    panic!(
                        "processes of a test's process group {} survive: {}",
                        self.pgid,
                        alive.join("; ")
                    );
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.end();
    }
}

/// A short-lived child process other than the daemon (e.g. `mnemo watch`,
/// or `mnemo append --file -` fed on stdin) in a process group of its own:
/// waiting for it also checks that nothing it started survives, and
/// dropping it (a test that fails before waiting) kills it.
pub struct Spawned {
    /// `None` once waited for.
    child: Option<Child>,
    group: ProcessGroup,
}

impl Spawned {
    pub fn spawn(cmd: &mut Command) -> Spawned {
        let (child, group) = spawn_in_group(cmd);
        Spawned {
            child: Some(child),
            group,
        }
    }

    /// The child's stdin, when it was piped (once).
    pub fn take_stdin(&mut self) -> std::process::ChildStdin {
        let child = self.child.as_mut().expect("not waited for yet");
        child.stdin.take().expect("stdin is piped")
    }

    /// Waits for the child to exit, then ends its group.
    pub fn wait(mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("not waited for yet");
        let status = child.wait().expect("wait for the child");
        self.group.end();
        status
    }

    /// Waits for the child to exit, collecting its piped output, then ends
    /// its group.
    pub fn wait_with_output(mut self) -> std::process::Output {
        let child = self.child.take().expect("not waited for yet");
        let out = child.wait_with_output().expect("wait for the child");
        self.group.end();
        out
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.group.end();
        if let Some(mut child) = self.child.take() {
            let _ = child.try_wait();
        }
    }
}

/// The processes still in process group `pgid` (pid and command line),
/// zombies aside, read from /proc.
pub fn group_alive(pgid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "pid (comm) state ppid pgrp ...": fields after the last ')'.
            let rest = &stat[stat.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let (state, pgrp) = (f.first()?, f.get(2)?.parse::<u32>().ok()?);
            (pgrp == pgid && *state != "Z").then(|| {
                let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .unwrap_or_default()
                    .replace('\0', " ");
                format!("{pid} {cmd}")
            })
        })
        .collect()
}

/// A turn with its client time (`seconds` since the epoch).
pub fn turn_at(role: pb::Role, speaker: &str, content: &str, seconds: i64) -> pb::NewTurn {
    pb::NewTurn {
        client_time: Some(prost_types::Timestamp { seconds, nanos: 0 }),
        ..turn(role, speaker, content)
    }
}

/// Waits until the search index has applied every change (at most 60 s).
pub async fn index_caught_up(c: &mut MemoryServiceClient<Channel>, ns: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let lag = c
            .search(search_request(ns, "", "warmup"))
            .await
            .map(|r| r.into_inner().index_lag);
        if matches!(lag, Ok(0)) {
            return;
        }
        assert!(Instant::now() < deadline, "the index never caught up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A session's bundle of `budget` tokens for `query` (empty: none).
pub async fn query_bundle(
    c: &mut MemoryServiceClient<Channel>,
    ns: &str,
    id: &str,
    budget: u32,
    query: &str,
) -> pb::ContextBundle {
    c.get_context_bundle(pb::GetContextBundleRequest {
        namespace: ns.into(),
        session_id: id.into(),
        budget_tokens: budget,
        query: query.into(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .bundle
    .unwrap()
}

/// A search of `query` in a namespace (and subject, unless empty), 10 hits.
pub fn search_request(ns: &str, subject: &str, query: &str) -> pb::SearchRequest {
    pb::SearchRequest {
        namespace: ns.into(),
        subject_id: subject.into(),
        query: query.into(),
        limit: 10,
        ..Default::default()
    }
}

/// Searches until `pred` holds for the hits (at most 30 s; the index is
/// updated shortly after each write, and answers UNAVAILABLE while it is
/// rebuilt).
pub async fn search_until(
    c: &mut MemoryServiceClient<Channel>,
    ns: &str,
    subject: &str,
    query: &str,
    pred: impl Fn(&[pb::SearchHit]) -> bool,
) -> Vec<pb::SearchHit> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = c.search(search_request(ns, subject, query)).await;
        let hits = match r {
            Ok(r) => r.into_inner().hits,
            // While the index is rebuilt from the store.
            Err(e) if e.code() == Code::Unavailable => Vec::new(),
            Err(e) => panic!("search: {e}"),
        };
        if pred(&hits) {
            return hits;
        }
        assert!(
            Instant::now() < deadline,
            "search {query:?} never matched: {hits:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Lists a subject's episodes until there are at least `n` (at most 30 s).
pub async fn episodes_until(
    c: &mut MemoryServiceClient<Channel>,
    ns: &str,
    subject: &str,
    n: usize,
) -> Vec<pb::Episode> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let eps = c
            .list_episodes(pb::ListEpisodesRequest {
                namespace: ns.into(),
                subject_id: subject.into(),
                ..Default::default()
            })
            .await
            .expect("list episodes")
            .into_inner()
            .episodes;
        if eps.len() >= n {
            return eps;
        }
        assert!(Instant::now() < deadline, "{n} episodes never appeared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The machine-readable reason of a FAILED_PRECONDITION status (the
/// `mnemo-reason` trailer), or "" when there is none.
pub fn reason(status: &tonic::Status) -> &str {
    status
        .metadata()
        .get(mnemo::api::status::REASON)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// A high-risk session `id` whose summary promises to refund `what` (so
/// it enters the review queue, quoting the promise) and whose turns hold
/// `what` word for word. Summarized before it returns.
pub async fn risky_session(c: &mut mnemo::client::MemoryClient, ns: &str, id: &str, what: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
        subject_id: "user:42".into(),
        title: format!("Refund of {what}"),
        settings: Some(pb::SessionSettings {
            risk_level: pb::RiskLevel::High as i32,
            summary_every_turns: 1000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .expect("create a high-risk session");
    let turns = vec![
        turn(
            pb::Role::User,
            "user:42",
            &format!("I was charged twice. Please refund {what}."),
        ),
        turn(
            pb::Role::Assistant,
            "agent-billing",
            &format!("I will refund {what} of $40 on order A-1001 by Friday."),
        ),
        turn(
            pb::Role::User,
            "user:42",
            "Great. Will I get a confirmation email when the refund goes through?",
        ),
    ];
    c.append_turns(append_req(ns, id, turns))
        .await
        .expect("append");
    c.summarize(pb::SummarizeRequest {
        namespace: ns.into(),
        session_id: id.into(),
        wait: true,
    })
    .await
    .expect("summarize");
}
