//! The Rust client: the generated `MemoryServiceClient` over a channel
//! that carries the API key on every call, the consistency token of its
//! last write on every read that honours one, and speaks TLS when asked.
//! The CLI and the tests connect through [`connect`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tonic::codegen::http::{HeaderValue, Request as HttpRequest, Response as HttpResponse};
use tonic::codegen::BoxFuture;

use tonic::metadata::AsciiMetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Request, Status};

use crate::pb::memory_service_client::MemoryServiceClient;

/// A connected client; every generated method is typed by the `.proto`.
pub type MemoryClient = MemoryServiceClient<InterceptedService<CarryToken<Channel>, BearerKey>>;

/// The RPCs that honour a consistency token (their path's last part).
const READS_AFTER_TOKEN: [&str; 2] = ["/Search", "/GetContextBundle"];

/// Keeps the consistency token of the last write answered through it and
/// sends it with every search and bundle, so they see that write on
/// whichever daemon answers them (`api::status::CONSISTENCY_TOKEN`).
#[derive(Clone)]
pub struct CarryToken<S> {
    inner: S,
    last: Arc<Mutex<Option<HeaderValue>>>,
}

impl<S> CarryToken<S> {
    /// Wraps `inner`, with no token yet.
    pub fn new(inner: S) -> Self {
        CarryToken {
            inner,
            last: Arc::default(),
        }
    }
}

impl<S, B, R> tower::Service<HttpRequest<B>> for CarryToken<S>
where
    S: tower::Service<HttpRequest<B>, Response = HttpResponse<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: HttpRequest<B>) -> Self::Future {
        use crate::api::status::CONSISTENCY_TOKEN;
        let path = req.uri().path();
        if READS_AFTER_TOKEN.iter().any(|m| path.ends_with(m)) {
            let token = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(t) = token {
                req.headers_mut().insert(CONSISTENCY_TOKEN, t);
            }
        }
        let last = self.last.clone();
        let call = self.inner.call(req);
        Box::pin(async move {
            let response = call.await?;
            if let Some(t) = response.headers().get(CONSISTENCY_TOKEN) {
                *last.lock().unwrap_or_else(|p| p.into_inner()) = Some(t.clone());
            }
            Ok(response)
        })
    }
}

/// How to reach the daemon.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    /// `http://host:port`, or `https://host:port` for TLS.
    pub addr: String,
    /// Sent as `authorization: Bearer <key>` when set.
    pub api_key: Option<String>,
    /// CA certificate (PEM) that signed the daemon's certificate; the
    /// system roots are not used.
    pub ca_cert: Option<PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub client_identity: Option<(PathBuf, PathBuf)>,
    /// Name to check the daemon's certificate against, when it differs
    /// from the host in `addr`.
    pub tls_domain: Option<String>,
    /// Time limit for connecting.
    pub connect_timeout: Option<Duration>,
}

/// Adds the API key to every request.
#[derive(Clone)]
pub struct BearerKey(Option<AsciiMetadataValue>);

impl tonic::service::Interceptor for BearerKey {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// Connects to the daemon `options` names. Errors are one line for a person.
pub async fn connect(options: &ClientOptions) -> Result<MemoryClient, String> {
    let key = bearer(options.api_key.as_deref())?;
    let mut endpoint = Endpoint::from_shared(options.addr.clone())
        .map_err(|e| format!("invalid address {:?}: {e}", options.addr))?
        .connect_timeout(options.connect_timeout.unwrap_or(Duration::from_secs(10)))
        .tcp_nodelay(true);
    let wants_tls = options.addr.starts_with("https://")
        || options.ca_cert.is_some()
        || options.client_identity.is_some();
    if wants_tls {
        let read =
            |p: &PathBuf| std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()));
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = &options.ca_cert {
            tls = tls.ca_certificate(Certificate::from_pem(read(ca)?));
        }
        if let Some((cert, key)) = &options.client_identity {
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        if let Some(d) = &options.tls_domain {
            tls = tls.domain_name(d.clone());
        }
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| format!("invalid TLS settings: {e}"))?;
    }
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| format!("cannot connect to {}: {}", options.addr, chain(&e)))?;
    Ok(over(channel, key))
}

/// A client over an already connected `channel` (the in-process one of
/// `mnemo mcp --embedded`), sending `api_key` when set.
pub fn with_channel(channel: Channel, api_key: Option<&str>) -> Result<MemoryClient, String> {
    Ok(over(channel, bearer(api_key)?))
}

fn over(channel: Channel, key: Option<AsciiMetadataValue>) -> MemoryClient {
    MemoryServiceClient::with_interceptor(CarryToken::new(channel), BearerKey(key))
}

fn bearer(api_key: Option<&str>) -> Result<Option<AsciiMetadataValue>, String> {
    api_key
        .map(|k| {
            format!("Bearer {}", k.trim())
                .parse::<AsciiMetadataValue>()
                .map_err(|_| "the API key has characters that cannot be sent".to_string())
        })
        .transpose()
}

/// An error and its causes on one line (tonic's top-level message alone
/// is often just "transport error").
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
