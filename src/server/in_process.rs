//! The daemon's front door inside one process: `mnemo mcp --embedded`
//! runs the daemon and its own gRPC client in the same process, joined by
//! in-memory pipes (tokio duplex streams) instead of a TCP port. Every
//! call still goes through the whole server stack (limits, auth, the
//! handlers' conversions, the domain), so an embedded MCP server behaves
//! exactly as one in front of `mnemo serve`; only the transport differs.
//! Nothing here listens, and no other process can connect.

use std::io;

use hyper_util::rt::TokioIo;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::{Channel, Endpoint, Uri};

/// Connections waiting for the server to take them. The client opens one
/// or two (tonic reconnects after a broken pipe), so a few suffice.
const PENDING_CONNECTIONS: usize = 4;
/// Bytes in flight each way on one pipe; only throughput depends on it
/// (a bigger message waits for the reader, as on a socket).
const PIPE_BYTES: usize = 256 * 1024;

/// The client's end: opens pipes whose other ends the server accepts.
#[derive(Clone)]
pub struct Connector {
    to_server: mpsc::Sender<DuplexStream>,
}

/// The server's end: the pipes the connector opened, for
/// [`super::Daemon::serve_in_process`].
pub struct Incoming {
    from_clients: mpsc::Receiver<DuplexStream>,
}

/// A connector and the incoming side it feeds.
pub fn pipe() -> (Connector, Incoming) {
    let (to_server, from_clients) = mpsc::channel(PENDING_CONNECTIONS);
    (Connector { to_server }, Incoming { from_clients })
}

impl Incoming {
    pub(super) fn into_stream(
        self,
    ) -> impl tokio_stream::Stream<Item = Result<DuplexStream, io::Error>> {
        ReceiverStream::new(self.from_clients).map(Ok)
    }
}

impl Connector {
    /// A gRPC channel whose connections are pipes to the in-process
    /// server; fails when the server has stopped.
    pub async fn channel(&self) -> Result<Channel, String> {
        let to_server = self.to_server.clone();
        // The URI is never resolved: the connector below ignores it, but
        // HTTP/2 needs an authority to send.
        Endpoint::from_static("http://mnemo.in-process")
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let to_server = to_server.clone();
                async move {
                    let (client, server) = tokio::io::duplex(PIPE_BYTES);
                    to_server.send(server).await.map_err(|_| {
                        io::Error::new(io::ErrorKind::NotConnected, "the in-process daemon stopped")
                    })?;
                    Ok::<_, io::Error>(TokioIo::new(client))
                }
            }))
            .await
            .map_err(|e| format!("cannot reach the in-process daemon: {e}"))
    }
}
