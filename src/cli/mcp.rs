//! `mnemo mcp`: runs the MCP server (`crate::mcp`) against a daemon, over
//! stdio (the default, for MCP hosts that start it as a child process) or
//! over Streamable HTTP (`--http`).

use std::net::SocketAddr;

use super::{connect, ClientArgs};
use crate::hosts::HostPolicy;
use crate::mcp::{Tools, MAX_TOKENS_RANGE};

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
    #[command(flatten)]
    client: ClientArgs,
}

/// Connects to the daemon, then serves MCP until the client leaves
/// (stdio) or a shutdown signal (HTTP).
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
    if let Some(addr) = args.http {
        let warning =
            super::remote::check("MCP server", addr, args.allow_remote, &args.allowed_hosts)?;
        if let Some(w) = warning {
            eprintln!("mnemo mcp: {w}");
        }
    }
    let client = connect(&args.client).await?;
    let tools = Tools::new(client, &args.namespace, args.max_result_tokens);
    match args.http {
        None => crate::mcp::serve_stdio(tools).await,
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            let bound = listener
                .local_addr()
                .map_err(|e| format!("listener has no address: {e}"))?;
            // Tests and scripts read this line to learn the port.
            eprintln!("mnemo mcp: listening on http://{bound}/mcp");
            let hosts = HostPolicy::new(args.allowed_hosts);
            crate::mcp::serve_http(tools, listener, hosts, crate::server::shutdown_signal()).await
        }
    }
}
