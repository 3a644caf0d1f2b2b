//! A gRPC client that sends any bytes as a request message (a codec that
//! passes bytes through), to reach the daemon's decode path with what a
//! typed client cannot send: invalid UTF-8, truncated or arbitrary
//! messages.

use bytes::{Buf, BufMut};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Code, Status};

/// Bytes in, bytes out.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

/// The encoder and decoder of [`RawCodec`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Raw;

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

/// Sends `body` as the request message of `/mnemo.v1.MemoryService/{rpc}`
/// (a server-streaming RPC when `streaming`) and returns the status code
/// of the answer (OK when it answered, or for a stream, when its first
/// message or its end came).
pub async fn call(channel: &Channel, rpc: &str, body: Vec<u8>, streaming: bool) -> Status {
    let path = format!("/mnemo.v1.MemoryService/{rpc}");
    call_path(channel, &path, tonic::Request::new(body), streaming).await
}

/// As [`call`], to any method `path` (`/package.Service/Method`) with the
/// request's metadata as given.
pub async fn call_path(
    channel: &Channel,
    path: &str,
    request: tonic::Request<Vec<u8>>,
    streaming: bool,
) -> Status {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    if let Err(e) = grpc.ready().await {
        return Status::unavailable(format!("not ready: {e}"));
    }
    let path: tonic::codegen::http::uri::PathAndQuery = path.parse().expect("path");
    if streaming {
        match grpc.server_streaming(request, path, RawCodec).await {
            Ok(resp) => {
                let mut stream = resp.into_inner();
                // A watch stays open: the first message (or a timeout)
                // says it was accepted.
                match tokio::time::timeout(std::time::Duration::from_secs(2), stream.message())
                    .await
                {
                    Ok(Err(s)) => s,
                    _ => Status::new(Code::Ok, ""),
                }
            }
            Err(s) => s,
        }
    } else {
        match grpc.unary(request, path, RawCodec).await {
            Ok(_) => Status::new(Code::Ok, ""),
            Err(s) => s,
        }
    }
}
