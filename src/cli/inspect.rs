//! `mnemo inspect`: serves the web inspector (`crate::inspect`) for a
//! daemon, on a loopback address unless told otherwise.

use std::net::SocketAddr;

use super::{connect, ClientArgs};
use crate::inspect::{Inspector, Settings, MAX_LIVE_STREAMS};

/// `mnemo inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// Address to serve the inspector on.
    #[arg(long, env = "MNEMO_INSPECT_HTTP", default_value = "127.0.0.1:8787")]
    http: SocketAddr,
    /// The namespace `/` opens (any namespace the key reaches can be
    /// opened by its URL).
    #[arg(long, short, env = "MNEMO_NAMESPACE")]
    namespace: Option<String>,
    /// Serve on a non-loopback address (needs --allowed-host). The
    /// inspector has no login of its own: whoever reaches it acts with its
    /// API key.
    #[arg(long)]
    allow_remote: bool,
    /// A Host name (NAME or NAME:PORT) accepted in requests besides
    /// loopback names from this machine (repeat the flag); required with
    /// --allow-remote.
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// Most live session pages (server-sent event streams) open at once.
    #[arg(long, default_value_t = MAX_LIVE_STREAMS)]
    max_live_streams: usize,
    #[command(flatten)]
    client: ClientArgs,
}

/// Connects to the daemon, then serves the inspector until a shutdown
/// signal.
pub async fn inspect(args: InspectArgs) -> Result<(), String> {
    let warning = super::remote::check(
        "inspector",
        args.http,
        args.allow_remote,
        &args.allowed_hosts,
    )?;
    if let Some(w) = warning {
        eprintln!("mnemo inspect: {w}");
    }
    let client = connect(&args.client).await?;
    let inspector = Inspector::new(
        client,
        Settings {
            default_namespace: args.namespace,
            allowed_hosts: args.allowed_hosts,
            max_live_streams: args.max_live_streams,
        },
    )?;
    let listener = tokio::net::TcpListener::bind(args.http)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.http))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("listener has no address: {e}"))?;
    // Tests and scripts read this line to learn the port.
    eprintln!("mnemo inspect: listening on http://{bound}/");
    crate::inspect::serve(inspector, listener, crate::server::shutdown_signal()).await
}
