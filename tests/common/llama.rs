//! A real llama.cpp server for the model-path tests and benches:
//! `python -m llama_cpp.server` (llama-cpp-python) on a loopback port with
//! one small GGUF model, started in its own process group and ended with
//! it, its stdout and stderr in one log file.
//!
//! What to run comes from the environment: `MNEMO_LLAMA_PYTHON` (a python
//! that can import `llama_cpp.server`, default `python3`) and
//! `MNEMO_LLAMA_MODELS` (`name=path.gguf[:nosystem]`, comma separated;
//! `:nosystem` for a model whose chat template has no system role).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{spawn_in_group, ProcessGroup};

/// One model to run.
pub struct Model {
    pub name: String,
    pub gguf: String,
    /// Whether its chat template takes a system message.
    pub system_role: bool,
}

/// The python and the models to run, or why none can run.
pub fn models() -> Result<(String, Vec<Model>), String> {
    let python = std::env::var("MNEMO_LLAMA_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import llama_cpp.server"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err(format!(
            "{python} cannot import llama_cpp.server (pip install 'llama-cpp-python[server]'; set MNEMO_LLAMA_PYTHON)"
        ));
    }
    let list = std::env::var("MNEMO_LLAMA_MODELS")
        .map_err(|_| "MNEMO_LLAMA_MODELS is not set (name=path.gguf[:nosystem],…)".to_owned())?;
    let mut out = Vec::new();
    for item in list.split(',').filter(|s| !s.trim().is_empty()) {
        let (name, rest) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not name=path.gguf"))?;
        let (gguf, system_role) = match rest.strip_suffix(":nosystem") {
            Some(p) => (p, false),
            None => (rest, true),
        };
        if !Path::new(gguf).is_file() {
            return Err(format!("{gguf} does not exist"));
        }
        out.push(Model {
            name: name.trim().to_owned(),
            gguf: gguf.to_owned(),
            system_role,
        });
    }
    if out.is_empty() {
        return Err("MNEMO_LLAMA_MODELS names no model".into());
    }
    Ok((python, out))
}

/// A running `llama_cpp.server`, killed with its process group on drop.
pub struct LlamaServer {
    pub url: String,
    /// Its stdout and stderr (unbuffered: the server says there when a
    /// client went away mid-answer).
    pub log: PathBuf,
    child: Option<Child>,
    group: ProcessGroup,
}

impl LlamaServer {
    /// Starts the server for `m` on `threads` threads and waits (at most
    /// 180 s) until it answers `GET /v1/models`.
    pub async fn start(python: &str, m: &Model, threads: usize) -> LlamaServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::env::temp_dir().join(format!("llama-server-{port}.log"));
        let mut cmd = Command::new(python);
        cmd.args(["-m", "llama_cpp.server", "--model", &m.gguf])
            .args(["--model_alias", &m.name, "--host", "127.0.0.1"])
            .args(["--port", &port.to_string(), "--n_ctx", "4096"])
            .args(["--n_threads", &threads.to_string()])
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null());
        let file = std::fs::File::create(&log).unwrap();
        cmd.stdout(file.try_clone().unwrap()).stderr(file);
        let (child, group) = spawn_in_group(&mut cmd);
        let server = LlamaServer {
            url: format!("http://127.0.0.1:{port}"),
            log: log.clone(),
            child: Some(child),
            group,
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let r = http.get(format!("{}/v1/models", server.url)).send().await;
            if r.is_ok_and(|r| r.status().is_success()) {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "llama_cpp.server did not start; its log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Peak resident memory of the server process, MiB (0 when unknown).
    pub fn peak_mib(&self) -> u64 {
        let Some(c) = &self.child else { return 0 };
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", c.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024)
    }

    /// Ends the server and everything it started. Idempotent.
    pub fn kill(&mut self) {
        self.group.end();
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.kill();
    }
}
