//! A real PostgreSQL server for tests: `MNEMO_TEST_POSTGRES_URL` when set,
//! else a throwaway cluster this test process starts itself when the
//! server's binaries are installed (initdb in a temp dir, a free loopback
//! port, no systemd; as root the cluster runs as the `postgres` user). A
//! watcher process stops the cluster when the test process ends, however
//! it ends. Each caller gets a fresh database.
//!
//! With neither, the tests say loudly that they were skipped, unless
//! `MNEMO_REQUIRE_POSTGRES=1` (set by `.ci/run`), which makes that a
//! failure.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// Where the server is: a connection string without a database name.
pub struct Server {
    base: String,
    /// A cluster this process started: how to stop and start it again.
    owned: Option<Owned>,
    _dir: Option<tempfile::TempDir>,
}

struct Owned {
    pg_ctl: PathBuf,
    data: String,
    log: String,
    opts: String,
}

static SERVER: OnceLock<Option<Server>> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

fn pg_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists() && p.join("pg_ctl").exists())
        .collect();
    dirs.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Runs a server binary, as `postgres` when we are root (initdb refuses
/// root).
fn run_pg(bin: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    cmd.args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn start_cluster(bin: &Path) -> Server {
    start_cluster_with(bin, None)
}

/// A cluster; with `tls` (certificate chain and key, PEM) it serves TLS
/// beside plaintext.
fn start_cluster_with(bin: &Path, tls: Option<(&str, &str)>) -> Server {
    let dir = tempfile::Builder::new()
        .prefix("mnemo-pg-")
        .tempdir()
        .expect("temp dir");
    let data = dir.path().join("data");
    let mut ssl = String::new();
    if let Some((cert, key)) = tls {
        let (c, k) = (dir.path().join("server.crt"), dir.path().join("server.key"));
        std::fs::write(&c, cert).unwrap();
        std::fs::write(&k, key).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).unwrap();
        if is_root() {
            for f in [&c, &k] {
                let ok = Command::new("chown")
                    .arg("postgres:postgres")
                    .arg(f)
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(ok, "cannot hand the TLS files to the postgres user");
            }
        }
        ssl = format!(
            " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
            c.display(),
            k.display()
        );
    }
    if is_root() {
        let ok = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot hand the cluster directory to the postgres user");
    }
    let data_s = data.to_str().expect("utf-8 path");
    let out = run_pg(
        &bin.join("initdb"),
        &[
            "-D",
            data_s,
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
    );
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port();
    let log = dir.path().join("log");
    let opts = format!(
        "-k {} -p {port} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=on{ssl}",
        dir.path().display()
    );
    let out = run_pg(
        &bin.join("pg_ctl"),
        &[
            "-D",
            data_s,
            "-l",
            log.to_str().unwrap(),
            "-w",
            "-o",
            &opts,
            "start",
        ],
    );
    assert!(
        out.status.success(),
        "pg_ctl start failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // Stop the cluster when this process ends, however it ends.
    let stop = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {runas}{pg_ctl} -D {data_s} -m immediate stop >/dev/null 2>&1; rm -rf {dir}",
        pid = std::process::id(),
        runas = if is_root() { "runuser -u postgres -- " } else { "" },
        pg_ctl = bin.join("pg_ctl").display(),
        dir = dir.path().display(),
    );
    // Never waited for: it outlives this process by design.
    #[allow(clippy::zombie_processes)]
    let _watcher = Command::new("sh")
        .args(["-c", &stop])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the cluster's watcher");
    Server {
        base: format!("host=127.0.0.1 port={port} user=postgres"),
        owned: Some(Owned {
            pg_ctl: bin.join("pg_ctl"),
            data: data_s.to_owned(),
            log: log.to_str().unwrap().to_owned(),
            opts,
        }),
        _dir: Some(dir),
    }
}

/// The server, started on first use; `None` (after a loud notice) when
/// none can be had.
pub fn server() -> Option<&'static Server> {
    SERVER
        .get_or_init(|| {
            if let Ok(url) = std::env::var("MNEMO_TEST_POSTGRES_URL") {
                return Some(Server {
                    base: url,
                    owned: None,
                    _dir: None,
                });
            }
            match pg_bin() {
                Some(bin) => Some(start_cluster(&bin)),
                None => {
                    if std::env::var("MNEMO_REQUIRE_POSTGRES").as_deref() == Ok("1") {
                        panic!("PostgreSQL tests required (MNEMO_REQUIRE_POSTGRES=1) but no server: install postgresql or set MNEMO_TEST_POSTGRES_URL");
                    }
                    eprintln!("\n*** SKIPPED: PostgreSQL tests: no server binaries under /usr/lib/postgresql and MNEMO_TEST_POSTGRES_URL is unset ***\n");
                    None
                }
            }
        })
        .as_ref()
}

impl Server {
    /// A connection string for database `db`.
    pub fn url(&self, db: &str) -> String {
        if self.base.starts_with("postgres://") || self.base.starts_with("postgresql://") {
            let (head, query) = match self.base.split_once('?') {
                Some((h, q)) => (h.to_owned(), format!("?{q}")),
                None => (self.base.clone(), String::new()),
            };
            let root = match head.rfind('/') {
                Some(i) if i > head.find("//").map_or(0, |j| j + 1) => head[..i].to_owned(),
                _ => head,
            };
            format!("{root}/{db}{query}")
        } else {
            format!("{} dbname={db}", self.base)
        }
    }

    /// Whether this process started the cluster (and so may restart it).
    pub fn restartable(&self) -> bool {
        self.owned.is_some()
    }

    /// Stops the cluster (fast shutdown: connections are cut).
    pub fn stop(&self) {
        let o = self.owned.as_ref().expect("a cluster of our own");
        let out = run_pg(&o.pg_ctl, &["-D", &o.data, "-m", "fast", "-w", "stop"]);
        assert!(
            out.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the cluster again on the same port.
    pub fn start(&self) {
        let o = self.owned.as_ref().expect("a cluster of our own");
        let out = run_pg(
            &o.pg_ctl,
            &["-D", &o.data, "-l", &o.log, "-w", "-o", &o.opts, "start"],
        );
        assert!(
            out.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A new, empty database; returns its connection string.
    pub fn fresh_database(&self) -> String {
        let name = format!(
            "mnemo_t{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::Relaxed)
        );
        let admin = self.url("postgres");
        let sql = format!("CREATE DATABASE {name}");
        // Off any async runtime: the synchronous client runs its own.
        std::thread::spawn(move || {
            let mut c = postgres::Client::connect(&admin, postgres::NoTls)
                .unwrap_or_else(|e| panic!("cannot reach the test PostgreSQL at {admin}: {e}"));
            c.batch_execute(&sql).expect("create a test database");
        })
        .join()
        .expect("create a test database");
        self.url(&name)
    }
}

/// A fresh database on the test server, or `None` when PostgreSQL tests
/// are skipped.
pub fn fresh_database() -> Option<String> {
    server().map(Server::fresh_database)
}

/// A cluster of the caller's own (for tests that stop and start it, or
/// serve TLS with the given certificate chain and key), when the server's
/// binaries are installed; `None` (said loudly) when only
/// `MNEMO_TEST_POSTGRES_URL` or nothing is available.
pub fn private_cluster(tls: Option<(&str, &str)>) -> Option<Server> {
    match pg_bin() {
        Some(bin) => Some(start_cluster_with(&bin, tls)),
        None => {
            if std::env::var("MNEMO_REQUIRE_POSTGRES").as_deref() == Ok("1") {
                panic!("PostgreSQL tests required (MNEMO_REQUIRE_POSTGRES=1) but the server's binaries are not installed");
            }
            eprintln!("\n*** SKIPPED: this PostgreSQL test needs the server's binaries (a cluster of its own) ***\n");
            None
        }
    }
}
