//! The daemon: opens the store, builds the gRPC server (limits, health,
//! reflection) and serves on an injected listener until an injected
//! shutdown future resolves; then it drains in-flight requests and syncs
//! the store. Tests bind `127.0.0.1:0` and pass their own shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tonic::codegen::http;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

pub mod auth;
pub mod guard;
pub mod in_process;
pub mod metrics;

use self::auth::{AuthConfig, Keys};
use self::guard::GuardLayer;
use self::metrics::{Metrics, RecordLayer};
use crate::api::MemoryApi;
use crate::config::SummarizerKind;
use crate::config::{Config, RetentionPolicy, StoreKind, TlsConfig};
use crate::error::{Error, Result};
use crate::llm::{ModelStats, ModelSummarizer};
use crate::memory::SEARCH_CONSUMER;
use crate::pb;
use crate::pb::memory_service_server::MemoryServiceServer;
use crate::runtime::Runtime;
use crate::store::postgres::PgOptions;
use crate::store::{MemoryStore, PgStore, SledStore, Store};
use crate::summarize::{RuleBased, Summarizer};

/// The search index's directory inside the data directory (derived data:
/// safe to delete; it is rebuilt from the store at the next start).
pub const SEARCH_INDEX_DIR: &str = "search-index";

/// An opened daemon, ready to serve.
pub struct Daemon {
    config: Config,
    runtime: Arc<Runtime>,
    auth_reloads: Option<mpsc::Receiver<AuthConfig>>,
    /// The model summarizer's counters, when the model is on.
    model_stats: Option<Arc<ModelStats>>,
}

impl Daemon {
    /// Opens the configured store (failing clearly if the data directory is
    /// held by another process or unusable) and warms the tokenizers.
    pub async fn open(config: Config) -> Result<Daemon> {
        config.validate()?;
        let cfg = config.clone();
        let store: Arc<dyn Store> =
            tokio::task::spawn_blocking(move || -> Result<Arc<dyn Store>> {
                crate::tokens::warm_up();
                Ok(match cfg.store {
                    StoreKind::Sled => {
                        Arc::new(SledStore::open_with_cache(&cfg.data_dir, cfg.cache_mb)?)
                    }
                    StoreKind::Memory => Arc::new(MemoryStore::default()),
                    StoreKind::Postgres => {
                        let store = PgStore::connect(&PgOptions::from_config(&cfg.postgres))?;
                        tracing::info!(
                            database = %crate::config::postgres::redacted(&cfg.postgres.url),
                            pool_size = cfg.postgres.pool_size,
                            tls = store.engine().encrypted().unwrap_or(false),
                            "storing in PostgreSQL, shared with every daemon using the database"
                        );
                        Arc::new(store)
                    }
                })
            })
            .await
            .map_err(|e| Error::Internal(format!("store open task failed: {e}")))??;
        // Each daemon keeps its own search index in its data directory,
        // following the store's outbox under a name of its own.
        let (search_dir, search_consumer) = match config.store {
            StoreKind::Sled => (
                Some(config.data_dir.join(SEARCH_INDEX_DIR)),
                SEARCH_CONSUMER.to_owned(),
            ),
            StoreKind::Memory => (None, SEARCH_CONSUMER.to_owned()),
            StoreKind::Postgres => (
                Some(config.data_dir.join(SEARCH_INDEX_DIR)),
                format!("{SEARCH_CONSUMER}@{}", node_id(&config.data_dir)?),
            ),
        };
        let (summarizer, model_stats): (Arc<dyn Summarizer>, _) = match config.model.summarizer {
            SummarizerKind::Rules => (Arc::new(RuleBased), None),
            SummarizerKind::Model => {
                let m = ModelSummarizer::new(&config.model, tokio::runtime::Handle::current())
                    .map_err(Error::invalid)?;
                tracing::info!(
                    url = %config.model.url,
                    model = %config.model.name,
                    namespaces = ?config.model.namespaces,
                    redact_pii = config.model.redact_pii,
                    "summaries are written by a model, validated, with the rules as the fallback"
                );
                let stats = m.stats();
                (Arc::new(m) as Arc<dyn Summarizer>, Some(stats))
            }
        };
        let runtime = Runtime::start_with(
            store,
            config.limits.clone(),
            config.summaries.clone(),
            search_dir,
            search_consumer,
            summarizer,
        )
        .await?;
        runtime.start_retention(
            RetentionPolicy::new(config.retention.clone())?,
            std::time::Duration::from_secs(config.limits.retention_sweep_secs),
        );
        Ok(Daemon {
            config,
            runtime,
            auth_reloads: None,
            model_stats,
        })
    }

    /// While serving, replace the API keys with each `[auth]` section
    /// `reloads` yields (the CLI sends one per SIGHUP). A section that does
    /// not validate is logged and the keys in force stay.
    pub fn reload_auth_from(mut self, reloads: mpsc::Receiver<AuthConfig>) -> Daemon {
        self.auth_reloads = Some(reloads);
        self
    }

    /// The domain and its runtime. Holding a clone past `serve` keeps the
    /// store open.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Serves on `listener` until `shutdown` resolves, then stops accepting,
    /// waits for in-flight requests, and makes every write durable.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<()> {
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Internal(format!("listener has no address: {e}")))?;
        // Without TCP_NODELAY a small reply can wait ~40 ms for a delayed
        // ACK (Nagle); tonic does not set it on an injected listener.
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        self.serve_on(incoming, FrontDoor::Tcp(addr), shutdown)
            .await
    }

    /// Serves the connections of `pipe`'s connector (in this process, no
    /// port) until `shutdown` resolves; then as [`Daemon::serve`]. Every
    /// call takes the same path as over TCP: limits, auth, handlers.
    pub async fn serve_in_process(
        self,
        pipe: in_process::Incoming,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<()> {
        if self.config.tls.is_some() {
            return Err(Error::invalid(
                "TLS is for a listener; the in-process front door has none",
            ));
        }
        self.serve_on(pipe.into_stream(), FrontDoor::InProcess, shutdown)
            .await
    }

    async fn serve_on<I, IO, IE>(
        mut self,
        incoming: I,
        door: FrontDoor,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<()>
    where
        I: tokio_stream::Stream<Item = std::result::Result<IO, IE>>,
        IO: tokio::io::AsyncRead
            + tokio::io::AsyncWrite
            + tonic::transport::server::Connected
            + Unpin
            + Send
            + 'static,
        IO::ConnectInfo: Clone + Send + Sync + 'static,
        IE: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let limits = &self.config.limits;
        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<MemoryServiceServer<MemoryApi>>().await;
        // Reflection in both versions: v1, and v1alpha for the clients that
        // speak only that (older grpcurl, Postman, Python's grpcio-reflection).
        let reflection_builder = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        let reflection_error = |e: tonic_reflection::server::Error| {
            Error::Internal(format!("cannot build reflection service: {e}"))
        };
        let reflection = reflection_builder().build_v1().map_err(reflection_error)?;
        let reflection_v1alpha = reflection_builder()
            .build_v1alpha()
            .map_err(reflection_error)?;
        // Auth follows the address actually bound (an injected listener may
        // differ from `config.listen`); in process, only this process can
        // call, as on loopback.
        let listener_kind = auth::Listener {
            loopback: door.is_local(),
            tls: self.config.tls.is_some(),
            plaintext_keys_allowed: self.config.allow_plaintext_keys_off_loopback,
        };
        let keys = Keys::for_listener(&self.config.auth, listener_kind)?;
        let tcp = match &door {
            FrontDoor::Tcp(addr) => Some(*addr),
            _ => None,
        };
        if let (false, Some(addr)) = (keys.enabled(), tcp) {
            tracing::warn!(%addr, "{}", auth::exposure_without_auth(listener_kind.loopback));
        } else if let (false, false, Some(addr)) = (listener_kind.loopback, listener_kind.tls, tcp)
        {
            tracing::warn!(
                %addr,
                "API keys and all memory cross the network in clear to {addr} \
                 (allow_plaintext_keys_off_loopback = true): only safe behind a TLS-terminating \
                 proxy on a private link"
            );
        }
        let reloader = self
            .auth_reloads
            .take()
            .map(|reloads| tokio::spawn(reload_keys(keys.clone(), reloads)));
        let memory_service = InterceptedService::new(
            MemoryServiceServer::new(MemoryApi::new(self.runtime.clone()))
                .max_decoding_message_size(limits.max_message_bytes)
                .max_encoding_message_size(limits.max_message_bytes),
            keys.interceptor(),
        );
        let tls = match &self.config.tls {
            Some(t) => Some(tls_config(t)?),
            None => None,
        };
        tracing::info!(
            addr = %door,
            pid = std::process::id(),
            store = ?self.config.store,
            data_dir = %self.config.data_dir.display(),
            auth = keys.enabled(),
            tls = self.config.tls.is_some(),
            review = if keys.enabled() { "ADMIN or the review permission" } else { "anyone who reaches the address" },
            "mnemo listening on {door}"
        );
        // Shutdown: stop accepting and drain, but no longer than the grace
        // period, so a client that keeps its connection open cannot hold
        // the daemon (and its data directory) forever.
        let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
        let hub = self.runtime.watch_hub().clone();
        let reporter = health.clone();
        let signal = async move {
            shutdown.await;
            // Load balancers watching health stop sending work first.
            reporter
                .set_not_serving::<MemoryServiceServer<MemoryApi>>()
                .await;
            reporter
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
            // Watch streams never end on their own; end them first so the
            // drain below is not held up by them.
            hub.close();
            let _ = stopping_tx.send(());
        };
        let grace = Duration::from_secs(limits.shutdown_grace_secs);
        let grace_expired = async move {
            if stopping_rx.await.is_ok() {
                tokio::time::sleep(grace).await;
            } else {
                std::future::pending::<()>().await;
            }
        };

        // On PostgreSQL the data directory holds this daemon's search index.
        let data_dir =
            (self.config.store != StoreKind::Memory).then(|| self.config.data_dir.clone());
        let metrics = Arc::new(Metrics::new(
            &self.runtime,
            data_dir,
            self.model_stats.clone(),
        ));
        let (metrics_stop, metrics_task) = match self.config.metrics_listen {
            Some(at) => {
                let listener = TcpListener::bind(at).await.map_err(|e| {
                    Error::invalid(format!("cannot listen for metrics on {at}: {e}"))
                })?;
                let bound = listener
                    .local_addr()
                    .map_err(|e| Error::Internal(format!("listener has no address: {e}")))?;
                tracing::info!(%bound, "metrics on http://{bound}/metrics");
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let task = tokio::spawn(metrics::serve(metrics.clone(), listener, async {
                    let _ = rx.await;
                }));
                (Some(tx), Some(task))
            }
            None => (None, None),
        };

        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            builder = builder
                .tls_config(tls)
                .map_err(|e| Error::invalid(format!("invalid TLS configuration: {e}")))?;
        }
        let server = builder
            .layer(tower::util::MapResponseLayer::new(
                client_faults_by_their_codes as fn(_) -> _,
            ))
            // Sees the final status code, shed and panicked requests too.
            .layer(RecordLayer(metrics))
            .layer(summarize_limit(
                GuardLayer::new(
                    limits.max_concurrent_requests,
                    Duration::from_secs(limits.request_timeout_secs),
                ),
                &self.config.model,
            ))
            .concurrency_limit_per_connection(limits.concurrency_per_connection)
            .max_concurrent_streams(limits.max_concurrent_streams)
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(10)))
            .add_service(health_service)
            .add_service(reflection)
            .add_service(reflection_v1alpha)
            .add_service(memory_service)
            .serve_with_incoming_shutdown(incoming, signal);
        tokio::select! {
            r = server => r.map_err(|e| Error::Internal(format!("server failed: {e}")))?,
            () = grace_expired => tracing::warn!(
                grace_secs = grace.as_secs(),
                "shutdown grace period expired; dropping connections still open"
            ),
        }
        if let Some(task) = reloader {
            task.abort();
        }

        if let Some(tx) = metrics_stop {
            let _ = tx.send(());
        }
        if let Some(task) = metrics_task {
            match task.await {
                Ok(Err(e)) => tracing::warn!(error = %e, "metrics listener"),
                Err(e) => tracing::warn!(error = %e, "metrics task"),
                Ok(Ok(())) => {}
            }
        }
        tracing::info!(
            "shutting down: in-flight requests done; finishing queued summaries and syncing"
        );
        self.runtime.shutdown().await?;
        // Close the store before returning, so the data directory's lock is
        // released when `serve` returns (a restart in the same process
        // depends on it).
        match Arc::try_unwrap(self.runtime) {
            Ok(runtime) => tokio::task::spawn_blocking(move || drop(runtime))
                .await
                .map_err(|e| Error::Internal(format!("closing the store failed: {e}")))?,
            Err(_) => tracing::warn!(
                "store still referenced at shutdown; it closes when the last user drops it"
            ),
        }
        tracing::info!("store synced and closed; bye");
        Ok(())
    }
}

/// Where the daemon's calls come in.
enum FrontDoor {
    /// A TCP listener bound to this address.
    Tcp(std::net::SocketAddr),
    /// In-memory pipes from this process ([`in_process`]).
    InProcess,
}

impl FrontDoor {
    /// Whether only this machine can reach it (auth's loopback default).
    fn is_local(&self) -> bool {
        match self {
            FrontDoor::Tcp(addr) => addr.ip().is_loopback(),
            FrontDoor::InProcess => true,
        }
    }
}

impl std::fmt::Display for FrontDoor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrontDoor::Tcp(addr) => write!(f, "{addr}"),
            FrontDoor::InProcess => f.write_str("in-process pipes (no port)"),
        }
    }
}

/// Applies each `[auth]` section from `reloads` to `keys` until the
/// channel closes.
async fn reload_keys(keys: Keys, mut reloads: mpsc::Receiver<AuthConfig>) {
    while let Some(auth) = reloads.recv().await {
        match keys.reload(&auth) {
            Ok(()) => {
                tracing::info!(
                    keys = keys.len(),
                    auth = keys.enabled(),
                    "API keys reloaded"
                );
                if !keys.enabled() {
                    tracing::warn!("{}", auth::exposure_without_auth(keys.loopback()));
                }
            }
            Err(e) => tracing::error!(
                error = %e,
                "API keys not reloaded; the keys in force stay"
            ),
        }
    }
}

/// Statuses tonic gives a client's malformed request, rewritten to the
/// codes gRPC's conventions (and mnemo's contract) give them:
/// - a request over `max_decoding_message_size` is OUT_OF_RANGE in tonic,
///   RESOURCE_EXHAUSTED here (mnemo never returns OUT_OF_RANGE itself, so
///   the rewrite is unambiguous);
/// - a body that does not decode (invalid UTF-8 in a string field, a
///   truncated message or frame, a bad compression flag, no message) is
///   INTERNAL in tonic ("failed to decode Protobuf message", …), though the
///   fault is the client's: INVALID_ARGUMENT here, so that INTERNAL keeps
///   meaning a fault of the daemon. Only those messages are rewritten; they
///   come from tonic's request decoder, never from a handler.
fn client_faults_by_their_codes(
    mut resp: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    let out_of_range = http::HeaderValue::from_static("11");
    let internal = http::HeaderValue::from_static("13");
    let status = resp.headers().get("grpc-status").cloned();
    if status == Some(out_of_range) {
        resp.headers_mut()
            .insert("grpc-status", http::HeaderValue::from_static("8"));
    } else if status == Some(internal) {
        let message = resp
            .headers()
            .get("grpc-message")
            .map(|m| percent_decoded(m.as_bytes()))
            .unwrap_or_default();
        if is_request_decode_error(&message) {
            resp.headers_mut()
                .insert("grpc-status", http::HeaderValue::from_static("3"));
        }
    }
    resp
}

/// The messages of tonic's request decoder (tonic 0.14, tonic-prost).
const REQUEST_DECODE_ERRORS: [&str; 4] = [
    "failed to decode Protobuf message",
    "Unexpected EOF decoding stream",
    "Missing request message",
    "protocol error: received message with",
];

fn is_request_decode_error(message: &str) -> bool {
    REQUEST_DECODE_ERRORS.iter().any(|p| message.starts_with(p))
}

/// A `grpc-message` value with its %XX escapes decoded (lossy).
fn percent_decoded(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (raw[i], raw.get(i + 1).copied(), raw.get(i + 2).copied()) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                // Two hex digits make one byte (both below 16).
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads the PEM files `t` names.
fn tls_config(t: &TlsConfig) -> Result<ServerTlsConfig> {
    let read = |what: &str, p: &std::path::Path| {
        std::fs::read(p)
            .map_err(|e| Error::invalid(format!("cannot read TLS {what} {}: {e}", p.display())))
    };
    let mut c = ServerTlsConfig::new().identity(Identity::from_pem(
        read("certificate", &t.cert)?,
        read("key", &t.key)?,
    ));
    if let Some(ca) = &t.client_ca {
        c = c.client_ca_root(Certificate::from_pem(read("client CA", ca)?));
    }
    Ok(c)
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received"),
        () = term => tracing::info!("SIGTERM received"),
    }
}

/// This daemon's name among those sharing a database: a ULID kept in
/// `node-id` in its data directory (created at first start), so a restart
/// resumes its own outbox cursor.
pub(crate) fn node_id(data_dir: &std::path::Path) -> Result<String> {
    let path = data_dir.join("node-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if ulid::Ulid::from_string(id.trim()).is_ok() => return Ok(id.trim().to_owned()),
        Ok(_) => {
            return Err(Error::Storage(format!(
                "{} does not hold a node id (a ULID); remove it to make a new one",
                path.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    crate::store::engine::create_private_dir(data_dir)?;
    let id = ulid::Ulid::new().to_string();
    let tmp = data_dir.join("node-id.tmp");
    {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(id.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(data_dir)?.sync_all()?;
    Ok(id)
}

/// A waiting Summarize may take as long as the model's budget says
/// (`ModelConfig::summarize_deadline`), not the generic request limit:
/// never DEADLINE_EXCEEDED for a summary that is then stored.
fn summarize_limit(guard: GuardLayer, model: &crate::config::ModelConfig) -> GuardLayer {
    match model.summarize_deadline() {
        Some(t) => guard.with_limit_for("/mnemo.v1.MemoryService/Summarize", t),
        None => guard,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_errors_are_recognised_through_their_escapes() {
        let sent = "failed%20to%20decode%20Protobuf%20message:%20invalid%20string";
        assert!(is_request_decode_error(&percent_decoded(sent.as_bytes())));
        assert!(!is_request_decode_error(&percent_decoded(
            b"the%20summarizer%20failed"
        )));
        assert_eq!(percent_decoded(b"100%25%zz"), "100%%zz");
    }
}
