//! Prometheus metrics on their own HTTP listener (`--metrics-listen`, off
//! by default): requests by RPC and status code with latency histograms
//! (recorded by a tower layer around every gRPC service), and, read at
//! scrape time, turns and tokens appended, summaries written / refused /
//! failed / deferred / queued, search index lag and indexer counters, open
//! watch streams, subject erases, records removed by retention,
//! group-commit syncs and the data
//! directory's size on disk.
//! Uses `prometheus-client` (a registry per daemon, no global state).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::error::{Error, Result};
use crate::memory::profile::Step;
use crate::runtime::Runtime;

/// Labels of a request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    rpc: String,
    code: String,
}

/// Labels of a latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    rpc: String,
}

/// The daemon's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RpcLabels, Histogram>,
}

impl Metrics {
    /// Metrics of `runtime`, whose sled files (if any) are in `data_dir`.
    pub fn new(
        runtime: &Arc<Runtime>,
        data_dir: Option<PathBuf>,
        model: Option<Arc<crate::llm::ModelStats>>,
    ) -> Metrics {
        let mut registry = Registry::with_prefix("mnemo");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "gRPC requests by method and status code",
            requests.clone(),
        );
        let latency = Family::<RpcLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.000_1, 2.0, 18))) as fn() -> Histogram,
        );
        registry.register(
            "request_duration_seconds",
            "gRPC request latency until the response headers, by method",
            latency.clone(),
        );
        registry.register_collector(Box::new(MemoryCollector {
            runtime: Arc::downgrade(runtime),
            data_dir,
        }));
        if let Some(stats) = model {
            registry.register_collector(Box::new(ModelCollector(stats)));
        }
        Metrics {
            registry,
            requests,
            latency,
        }
    }

    /// Records one finished request.
    fn observe(&self, rpc: &str, code: &str, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                rpc: rpc.to_owned(),
                code: code.to_owned(),
            })
            .inc();
        self.latency
            .get_or_create(&RpcLabels {
                rpc: rpc.to_owned(),
            })
            .observe(seconds);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> Result<String> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .map_err(|e| Error::Internal(format!("cannot encode metrics: {e}")))?;
        Ok(out)
    }
}

/// Values read from the domain at scrape time.
#[derive(Debug)]
struct MemoryCollector {
    runtime: Weak<Runtime>,
    data_dir: Option<PathBuf>,
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    ConstCounter::new(v).encode(e.encode_descriptor(name, help, None, MetricType::Counter)?)
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> std::fmt::Result {
    ConstGauge::new(v).encode(e.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

/// Bytes of the files under `dir` (bounded depth: sled and tantivy keep
/// flat directories).
fn disk_bytes(dir: &Path, depth: u8) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_file() => m.len(),
            Ok(m) if m.is_dir() && depth > 0 => disk_bytes(&e.path(), depth - 1),
            _ => 0,
        })
        .sum()
}

/// The model summarizer's counters.
#[derive(Debug)]
struct ModelCollector(Arc<crate::llm::ModelStats>);

impl Collector for ModelCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let m = &self.0;
        for (name, help, v) in [
            (
                "model_calls",
                "calls to the summary model, retries included",
                &m.calls,
            ),
            (
                "model_failures",
                "model calls that failed or whose answer was refused",
                &m.failures,
            ),
            (
                "model_fallbacks",
                "summaries stored from the rules instead of the model",
                &m.fallbacks,
            ),
            (
                "model_latency_milliseconds",
                "wall time of model calls, summed",
                &m.latency_ms,
            ),
            (
                "model_prompt_tokens",
                "prompt tokens the model server reported",
                &m.prompt_tokens,
            ),
            (
                "model_completion_tokens",
                "completion tokens the model server reported",
                &m.completion_tokens,
            ),
        ] {
            counter(&mut e, name, help, v.load(Relaxed))?;
        }
        Ok(())
    }
}

impl Collector for MemoryCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let Some(m) = self.runtime.upgrade() else {
            return Ok(());
        };
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        let a = m.appended();
        counter(
            &mut e,
            "turns_appended",
            "turns appended since start",
            a.turns.load(Relaxed),
        )?;
        counter(
            &mut e,
            "tokens_appended",
            "tokens of the turns appended since start",
            a.tokens.load(Relaxed),
        )?;
        let s = m.summaries().stats();
        counter(
            &mut e,
            "summaries_written",
            "summaries stored",
            s.written.load(Relaxed),
        )?;
        counter(
            &mut e,
            "summaries_refused",
            "summary attempts refused by validation",
            s.refused.load(Relaxed),
        )?;
        counter(
            &mut e,
            "summaries_failed",
            "summary attempts that failed with an error",
            s.failed.load(Relaxed),
        )?;
        counter(
            &mut e,
            "summaries_deferred",
            "automatic summaries deferred because the queue was full",
            s.deferred.load(Relaxed),
        )?;
        gauge(
            &mut e,
            "summaries_queued",
            "sessions waiting for the summary worker",
            n(m.summaries().queued()),
        )?;
        let lag = i64::try_from(m.index_backlog()).unwrap_or(i64::MAX);
        gauge(
            &mut e,
            "search_index_lag",
            "writes not yet applied to the search index",
            lag,
        )?;
        if let Some((open, idle)) = m.memory().store().connections() {
            gauge(
                &mut e,
                "postgres_connections",
                "connections to PostgreSQL this daemon holds",
                i64::from(open),
            )?;
            gauge(
                &mut e,
                "postgres_connections_idle",
                "of them, idle in the pool",
                i64::from(idle),
            )?;
        }
        let ix = m.indexer().stats();
        counter(
            &mut e,
            "search_index_applied",
            "outbox entries applied to the search index",
            ix.applied.load(Relaxed),
        )?;
        counter(
            &mut e,
            "search_index_commits",
            "search index commits (searchable at once)",
            ix.commits.load(Relaxed),
        )?;
        counter(
            &mut e,
            "search_index_checkpoints",
            "search index checkpoints (syncs that make the commits before them durable)",
            ix.checkpoints.load(Relaxed),
        )?;
        counter(
            &mut e,
            "search_index_failures",
            "search index batches that failed (and were retried)",
            ix.failures.load(Relaxed),
        )?;
        let rw = m.memory().index_clock().stats();
        counter(
            &mut e,
            "search_consistency_waits",
            "searches and bundles that waited for the index to apply earlier writes",
            rw.waits.load(Relaxed),
        )?;
        counter(
            &mut e,
            "search_consistency_wait_microseconds",
            "time those reads waited, in all",
            rw.waited_micros.load(Relaxed),
        )?;
        counter(
            &mut e,
            "search_consistency_timeouts",
            "reads whose wait for the index reached read_your_writes_wait_ms",
            rw.timeouts.load(Relaxed),
        )?;
        if let Ok(er) = m.eraser() {
            counter(
                &mut e,
                "subject_erases",
                "EraseSubject jobs this daemon finished",
                er.stats().finished.load(Relaxed),
            )?;
            counter(
                &mut e,
                "subject_erased_records",
                "records this daemon's erase steps removed",
                er.stats().records.load(Relaxed),
            )?;
            gauge(
                &mut e,
                "subject_erases_running",
                "EraseSubject jobs this daemon is driving",
                n(er.running()),
            )?;
        }
        if let Some(r) = m.retention() {
            let mut family = e.encode_descriptor(
                "retention_deleted",
                "records retention passes of this daemon removed, by kind",
                None,
                MetricType::Counter,
            )?;
            for (kind, n) in crate::model::RetentionCounts::KINDS
                .iter()
                .zip(&r.stats().deleted)
            {
                let labels = [("kind", *kind)];
                ConstCounter::new(n.load(Relaxed)).encode(family.encode_family(&labels)?)?;
            }
        }
        gauge(
            &mut e,
            "watch_streams_open",
            "open WatchSession streams",
            n(m.watch_hub().total_watches()),
        )?;
        gauge(
            &mut e,
            "sessions_idle_tracked",
            "active sessions waiting for their idle deadline",
            n(m.idle_tracked()),
        )?;
        let c = m.sync_stats();
        counter(
            &mut e,
            "store_syncs",
            "group-commit syncs of the store",
            c.syncs.load(Relaxed),
        )?;
        counter(
            &mut e,
            "store_sync_requests",
            "writes that waited for a group-commit sync",
            c.requests.load(Relaxed),
        )?;
        counter(
            &mut e,
            "store_sync_wait_microseconds",
            "time writes waited for a group-commit sync, in all",
            c.waited_nanos.load(Relaxed) / 1_000,
        )?;
        let appends = m.memory().append_profile().snapshot();
        counter(
            &mut e,
            "append_calls",
            "appends through the domain (the steps below are their totals)",
            appends.appends,
        )?;
        for step in Step::ALL {
            counter(
                &mut e,
                &format!("append_{}_microseconds", step.name()),
                step.help(),
                appends.total_us(step),
            )?;
        }
        if let Some(dir) = &self.data_dir {
            let bytes = i64::try_from(disk_bytes(dir, 2)).unwrap_or(i64::MAX);
            gauge(
                &mut e,
                "data_dir_bytes",
                "bytes on disk of the data directory (store and search index)",
                bytes,
            )?;
        }
        Ok(())
    }
}

/// Serves `GET /metrics` on `listener` until `shutdown` resolves.
pub async fn serve(
    metrics: Arc<Metrics>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move {
                match metrics.render() {
                    Ok(text) => (
                        StatusCode::OK,
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        text,
                    )
                        .into_response(),
                    Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
                }
            }
        }),
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| Error::Internal(format!("metrics listener failed: {e}")))
}

/// A tower layer that records every gRPC request's method, status code and
/// latency.
#[derive(Clone)]
pub struct RecordLayer(pub Arc<Metrics>);

impl<S> tower::Layer<S> for RecordLayer {
    type Service = Record<S>;
    fn layer(&self, inner: S) -> Record<S> {
        Record {
            inner,
            metrics: self.0.clone(),
        }
    }
}

/// The service of [`RecordLayer`].
#[derive(Clone)]
pub struct Record<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B, RB> tower::Service<axum::http::Request<B>> for Record<S>
where
    S: tower::Service<axum::http::Request<B>, Response = axum::http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = std::result::Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        // "/mnemo.v1.MemoryService/PutFact" -> "PutFact".
        let rpc = req
            .uri()
            .path()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let metrics = self.metrics.clone();
        let start = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            // A failed unary call carries its status in the headers
            // ("trailers-only"); a successful one says OK in trailers.
            let code = match &res {
                Ok(r) => r
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i32>().ok())
                    .map_or("OK", |c| code_name(tonic::Code::from_i32(c))),
                Err(_) => "TRANSPORT_ERROR",
            };
            metrics.observe(&rpc, code, start.elapsed().as_secs_f64());
            res
        })
    }
}

fn code_name(c: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match c {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}
