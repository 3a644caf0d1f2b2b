//! `mnemo mcp`: a Model Context Protocol server in front of a running
//! daemon, so that agents reach their memory as MCP tools (Claude Code,
//! Cursor, Codex and most agent frameworks speak MCP). It is a client of
//! the daemon's gRPC contract like the CLI, built on the official Rust SDK
//! (`rmcp`), over stdio or over Streamable HTTP.
//!
//! The namespace and the API key are this server's configuration: the
//! model picks sessions, subjects and queries, never whose memory it
//! reads. Every result is held to a token bound (`max_tokens`).

pub mod render;
mod tools;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool_handler, ServerHandler, ServiceExt};
use tokio_util::sync::CancellationToken;

pub use self::tools::{MAX_LIST_LIMIT, MAX_REMEMBER_TURNS, MAX_SEARCH_LIMIT};
use crate::client::MemoryClient;
use crate::hosts::HostPolicy;

/// Smallest and largest bound on a tool result, in tokens.
pub const MAX_TOKENS_RANGE: std::ops::RangeInclusive<u32> = 256..=32_000;

/// The MCP server: the daemon's client, the fixed namespace, the bound.
#[derive(Clone)]
pub struct Tools {
    client: MemoryClient,
    namespace: Arc<str>,
    max_tokens: u32,
    router: ToolRouter<Tools>,
}

impl Tools {
    /// Tools that act on `namespace` through `client`, each result at most
    /// `max_tokens` tokens (clamped to [`MAX_TOKENS_RANGE`]).
    pub fn new(client: MemoryClient, namespace: &str, max_tokens: u32) -> Tools {
        Tools {
            client,
            namespace: namespace.into(),
            max_tokens: max_tokens.clamp(*MAX_TOKENS_RANGE.start(), *MAX_TOKENS_RANGE.end()),
            router: tools::router(),
        }
    }

    fn client(&self) -> MemoryClient {
        self.client.clone()
    }

    fn namespace(&self) -> &str {
        &self.namespace
    }

    fn max_tokens(&self) -> u32 {
        self.max_tokens
    }
}

#[tool_handler(router = self.router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            format!(
            "Persistent memory (mnemo), namespace {:?}. Call get_context with your session id to \
                 resume or take over a session; remember to store the conversation's turns; \
                 search_memory to look something up; put_fact for durable facts about a person or \
                 project. Results are at most {} tokens.",
            self.namespace, self.max_tokens
        ),
        )
    }
}

/// Serves MCP over this process's stdin and stdout until the client
/// closes them. Nothing else may write to stdout.
pub async fn serve_stdio(tools: Tools) -> Result<(), String> {
    let running = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("MCP over stdio did not start: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("MCP over stdio failed: {e}"))?;
    Ok(())
}

/// Serves MCP over Streamable HTTP at `http://ADDR/mcp` until `shutdown`
/// completes. A request is answered only when its `Host` is a loopback
/// name and it comes from this machine, or `hosts` lists it (DNS
/// rebinding and forged-host protection, see `crate::hosts`). With
/// `bearer`, every request must also carry `Authorization: Bearer <it>`
/// (the embedded store has no daemon in front to check keys).
pub async fn serve_http(
    tools: Tools,
    listener: tokio::net::TcpListener,
    hosts: HostPolicy,
    bearer: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let cancel = CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = cancel.clone();
    // The Host check below knows the peer, which rmcp's cannot: it
    // would accept `Host: 127.0.0.1` from any machine.
    config.allowed_hosts = Vec::new();
    // A tool call's arguments: up to 64 turns of a few hundred KiB each.
    config.max_request_body_bytes = 16 * 1024 * 1024;
    let service: StreamableHttpService<Tools, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(tools.clone()), Default::default(), config);
    let mut app = axum::Router::new().nest_service("/mcp", service);
    if let Some(key) = bearer {
        app = app.layer(axum::middleware::from_fn_with_state(
            Arc::<str>::from(key.trim()),
            require_key,
        ));
    }
    let app = app
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(hosts),
            check_host,
        ))
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    let stop = cancel.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stop.cancel();
        })
        .await
        .map_err(|e| format!("MCP over HTTP failed: {e}"))
}

/// Lets a request through only with the expected bearer key (compared in
/// constant time); 401 otherwise.
async fn require_key(
    axum::extract::State(key): axum::extract::State<Arc<str>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    use subtle::ConstantTimeEq;
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(key.as_bytes()))) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "this MCP server needs `Authorization: Bearer <key>` (the key it was started with)\n",
    )
        .into_response()
}

/// Refuses (421) a request whose `Host` the policy does not accept from
/// its peer.
async fn check_host(
    axum::extract::State(hosts): axum::extract::State<Arc<HostPolicy>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0);
    let host = request
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !hosts.allows(host, peer) {
        return (
            axum::http::StatusCode::MISDIRECTED_REQUEST,
            "this MCP server answers only to loopback host names from this machine and to the \
             names given with --allowed-host NAME[:PORT]",
        )
            .into_response();
    }
    next.run(request).await
}
