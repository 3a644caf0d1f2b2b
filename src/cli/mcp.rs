//! `mnemo mcp`: runs the MCP server (`crate::mcp`) against a daemon, over
//! stdio (the default, for MCP hosts that start it as a child process) or
//! over Streamable HTTP (`--http`). With `--embedded` the daemon runs in
//! this process on a sled store of its own (`server::in_process`): no
//! daemon to start first, no gRPC port. Without it, a daemon must answer:
//! there is never a silent fallback from one to the other.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use super::{connect, ClientArgs};
use crate::config::{data_home, Config, LogFormat, StoreKind};
use crate::hosts::HostPolicy;
use crate::mcp::{Tools, MAX_TOKENS_RANGE};
use crate::server::{in_process, shutdown_signal, Daemon};

/// sled's page cache of an embedded store, in MiB: an MCP server is one
/// agent's helper, not a shared daemon (`mnemo serve` defaults to 1024).
const EMBEDDED_CACHE_MB: u64 = 256;

/// `mnemo mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The namespace every tool acts on (the model cannot choose another).
    #[arg(long, short, env = "MNEMO_NAMESPACE")]
    namespace: String,
    /// Serve Streamable HTTP on this address (at /mcp) instead of stdio.
    #[arg(long, env = "MNEMO_MCP_HTTP")]
    http: Option<SocketAddr>,
    /// Serve HTTP on a non-loopback address (needs --allowed-host): whoever
    /// reaches it uses this API key's tools.
    #[arg(long)]
    allow_remote: bool,
    /// A Host name (NAME or NAME:PORT) accepted in HTTP requests besides
    /// loopback names from this machine (repeat the flag); required with
    /// --allow-remote.
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// Most tokens one tool result may take (256 to 32000).
    #[arg(long, env = "MNEMO_MCP_MAX_TOKENS", default_value_t = 4000)]
    max_result_tokens: u32,
    /// Serve from a store embedded in this process (sled; no daemon, no
    /// port) instead of a daemon's. One process at a time may hold a data
    /// directory; to share memory between hosts, run `mnemo serve`.
    #[arg(long)]
    embedded: bool,
    /// The embedded store's data directory [default: the per-user data
    /// home: $XDG_DATA_HOME/mnemo or ~/.local/share/mnemo on Linux,
    /// ~/Library/Application Support/mnemo on macOS].
    #[arg(long, requires = "embedded")]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Connects to the daemon (or opens the embedded one), then serves MCP
/// until the client leaves (stdio) or a shutdown signal.
pub async fn mcp(args: McpArgs) -> Result<(), String> {
    if !MAX_TOKENS_RANGE.contains(&args.max_result_tokens) {
        return Err(format!(
            "--max-result-tokens must be from {} to {}",
            MAX_TOKENS_RANGE.start(),
            MAX_TOKENS_RANGE.end()
        ));
    }
    if args.namespace.trim().is_empty() {
        return Err("--namespace must not be empty".to_owned());
    }
    if args.embedded {
        return embedded(args).await;
    }
    if let Some(addr) = args.http {
        let warning =
            super::remote::check("MCP server", addr, args.allow_remote, &args.allowed_hosts)?;
        if let Some(w) = warning {
            eprintln!("mnemo mcp: {w}");
        }
    }
    let client = connect(&args.client).await?;
    let tools = Tools::new(client, &args.namespace, args.max_result_tokens);
    serve(
        tools,
        args.http,
        args.allowed_hosts,
        None,
        shutdown_signal(),
    )
    .await
}

/// `--embedded`: opens the store, serves the daemon over in-process
/// pipes, serves MCP through a client of it, and closes the store (every
/// write synced, the lock released) when MCP ends.
async fn embedded(args: McpArgs) -> Result<(), String> {
    // Over HTTP the server is reachable by every local process (and, by
    // name, by browsers): loopback only, and a key that each request
    // carries, since no daemon stands in front to check keys.
    let bearer =
        match args.http {
            None => None,
            Some(addr) => {
                if !addr.ip().is_loopback() {
                    return Err(format!(
                        "--embedded serves HTTP on loopback only, not {addr}: to serve other \
                     machines, run `mnemo serve` and `mnemo mcp` without --embedded"
                    ));
                }
                if !args.allowed_hosts.is_empty() {
                    return Err(
                    "--embedded accepts loopback Host names only; --allowed-host needs a daemon \
                     (`mnemo serve`) and `mnemo mcp` without --embedded"
                        .to_owned(),
                );
                }
                match args.client.api_key.as_deref().map(str::trim) {
                    Some(k) if !k.is_empty() => Some(k.to_owned()),
                    _ => return Err(
                        "--embedded with --http needs a key (--api-key or MNEMO_API_KEY): HTTP \
                         clients must send it as `Authorization: Bearer <key>`"
                            .to_owned(),
                    ),
                }
            }
        };
    let data_dir = match args.data_dir {
        Some(d) => d,
        None => data_home::user_data_dir()
            .ok_or("no per-user data directory (HOME is not set): pass --data-dir".to_owned())?,
    };
    // Said before opening, so a host's log shows where memory lives even
    // when opening fails.
    eprintln!(
        "mnemo mcp: embedded store in {} (namespace {:?}; in this process, no daemon, no port)",
        data_dir.display(),
        args.namespace
    );
    super::serve::init_logging(LogFormat::Text, "warn");
    let config = Config {
        data_dir: data_dir.clone(),
        store: StoreKind::Sled,
        cache_mb: EMBEDDED_CACHE_MB,
        ..Config::default()
    };
    let daemon = Daemon::open(config).await.map_err(|e| {
        let msg = e.to_string();
        if msg.contains("in use by another process") {
            format!(
                "{msg}\nOne process at a time can hold an embedded store. To share memory \
                 between several MCP hosts, run `mnemo serve --data-dir {}` once and start \
                 `mnemo mcp` without --embedded.",
                data_dir.display()
            )
        } else {
            msg
        }
    })?;
    let (connector, incoming) = in_process::pipe();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(daemon.serve_in_process(incoming, async {
        let _ = stopped.await;
    }));
    let served = match connector.channel().await {
        Ok(channel) => {
            let client = crate::client::with_channel(channel, None)?;
            let tools = Tools::new(client, &args.namespace, args.max_result_tokens);
            serve(tools, args.http, Vec::new(), bearer, shutdown_signal()).await
        }
        Err(e) => Err(e),
    };
    drop(connector);
    let _ = stop.send(());
    let closed = match server.await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the embedded daemon's task failed: {e}")),
    };
    served.and(closed)
}

/// Serves `tools` over stdio until the client closes it or `shutdown`
/// resolves, or over HTTP on `http` until `shutdown`.
async fn serve(
    tools: Tools,
    http: Option<SocketAddr>,
    allowed_hosts: Vec<String>,
    bearer: Option<String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    match http {
        None => tokio::select! {
            r = crate::mcp::serve_stdio(tools) => r,
            () = shutdown => Ok(()),
        },
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            let bound = listener
                .local_addr()
                .map_err(|e| format!("listener has no address: {e}"))?;
            // Tests and scripts read this line to learn the port.
            eprintln!("mnemo mcp: listening on http://{bound}/mcp");
            let hosts = HostPolicy::new(allowed_hosts);
            crate::mcp::serve_http(tools, listener, hosts, bearer, shutdown).await
        }
    }
}
