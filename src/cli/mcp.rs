//! `mnemo mcp`: runs the MCP server (`crate::mcp`) against a daemon, over
//! stdio (the default, for MCP hosts that start it as a child process) or
//! over Streamable HTTP (`--http`).

use std::net::SocketAddr;

use super::{connect, ClientArgs};
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
    /// Host names accepted in HTTP requests besides loopback ones (repeat
    /// the flag); needed when clients reach the server by another name.
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
            let hosts = if args.allowed_hosts.is_empty() {
                Vec::new()
            } else {
                let mut h = vec![
                    "localhost".to_owned(),
                    "127.0.0.1".to_owned(),
                    "::1".to_owned(),
                ];
                h.extend(args.allowed_hosts);
                h
            };
            crate::mcp::serve_http(tools, listener, hosts, crate::server::shutdown_signal()).await
        }
    }
}
