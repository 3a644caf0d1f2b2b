//! The guard every gRPC request passes on its way in, as one tower layer:
//!
//! - **Load shedding**: at most `limits.max_concurrent_requests` requests
//!   run at once across all connections; one more is refused at once with
//!   RESOURCE_EXHAUSTED (no queue grows behind a slow store).
//! - **Deadlines**: a request runs at most the smaller of the server's
//!   `request_timeout_secs` and the client's `grpc-timeout`; past it the
//!   caller gets DEADLINE_EXCEEDED (tonic's own timeout says CANCELLED).
//!   A method whose work has a longer budget of its own (Summarize while a
//!   model writes summaries) gets that instead of `request_timeout_secs`.
//! - **Panics**: a panic in a handler becomes INTERNAL for that request and
//!   an error in the log; the daemon and every other request carry on.
//!
//! For a streaming RPC these cover producing the response (its headers),
//! not the life of the stream.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::Semaphore;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::Status;

/// Builds [`GuardService`]s sharing one permit pool.
#[derive(Clone)]
pub struct GuardLayer {
    permits: Arc<Semaphore>,
    limit: usize,
    max_time: Duration,
    /// Methods (gRPC paths) with a server limit of their own.
    longer: Arc<Vec<(String, Duration)>>,
}

impl GuardLayer {
    /// At most `limit` requests at once, none longer than `max_time`.
    pub fn new(limit: usize, max_time: Duration) -> Self {
        GuardLayer {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
            max_time,
            longer: Arc::new(Vec::new()),
        }
    }

    /// Gives requests to `path` (`/package.Service/Method`) `max_time`
    /// instead, when that is longer.
    pub fn with_limit_for(mut self, path: &str, max_time: Duration) -> Self {
        let max_time = max_time.max(self.max_time);
        Arc::make_mut(&mut self.longer).push((path.to_owned(), max_time));
        self
    }
}

impl<S> tower::Layer<S> for GuardLayer {
    type Service = GuardService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GuardService {
            inner,
            guard: self.clone(),
        }
    }
}

/// See the module docs.
#[derive(Clone)]
pub struct GuardService<S> {
    inner: S,
    guard: GuardLayer,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> tower::Service<http::Request<Body>> for GuardService<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let Ok(permit) = self.guard.permits.clone().try_acquire_owned() else {
            let limit = self.guard.limit;
            tracing::warn!(limit, path = %req.uri().path(), "request shed: at the concurrency limit");
            return Box::pin(async move {
                Ok(reply(Status::resource_exhausted(format!(
                    "mnemo is running its limit of {limit} concurrent requests; retry with backoff"
                ))))
            });
        };
        let server_max = self
            .guard
            .longer
            .iter()
            .find(|(p, _)| p == req.uri().path())
            .map_or(self.guard.max_time, |(_, t)| *t);
        let max_time = client_timeout(req.headers()).map_or(server_max, |t| t.min(server_max));
        let path = req.uri().path().to_owned();
        // The service that was polled ready serves this request; its clone
        // waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let _permit = permit;
            let run = AssertUnwindSafe(inner.call(req)).catch_unwind();
            match tokio::time::timeout(max_time, run).await {
                Ok(Ok(result)) => result,
                Ok(Err(panic)) => {
                    tracing::error!(%path, panic = panic_message(&*panic), "request handler panicked");
                    Ok(reply(Status::internal(
                        "internal error: the request failed unexpectedly (logged); other requests are unaffected",
                    )))
                }
                Err(_) => Ok(reply(Status::deadline_exceeded(format!(
                    "the request took longer than its deadline of {} ms",
                    max_time.as_millis()
                )))),
            }
        })
    }
}

fn reply(status: Status) -> http::Response<Body> {
    status.into_http()
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// The client's deadline from `grpc-timeout` (digits, then a unit: H, M,
/// S, m, u or n); `None` when absent or malformed.
fn client_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, Service, ServiceExt};

    type Handler = fn(http::Request<Body>) -> BoxFuture<Result<http::Response<Body>, Status>>;

    fn service(
        guard: &GuardLayer,
        handler: Handler,
    ) -> GuardService<tower::util::ServiceFn<Handler>> {
        guard.layer(tower::service_fn(handler))
    }

    fn code(r: &http::Response<Body>) -> Option<&str> {
        r.headers().get("grpc-status").and_then(|v| v.to_str().ok())
    }

    fn request(timeout: Option<&str>) -> http::Request<Body> {
        let mut b = http::Request::builder().uri("/mnemo.v1.MemoryService/GetSession");
        if let Some(t) = timeout {
            b = b.header("grpc-timeout", t);
        }
        b.body(Body::empty()).unwrap()
    }

    fn ok(_: http::Request<Body>) -> BoxFuture<Result<http::Response<Body>, Status>> {
        Box::pin(async { Ok(http::Response::new(Body::empty())) })
    }

    fn slow(_: http::Request<Body>) -> BoxFuture<Result<http::Response<Body>, Status>> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(http::Response::new(Body::empty()))
        })
    }

    fn panics(_: http::Request<Body>) -> BoxFuture<Result<http::Response<Body>, Status>> {
        Box::pin(async { panic!("boom") })
    }

    #[tokio::test]
    async fn a_panic_becomes_internal_and_the_service_keeps_serving() {
        let guard = GuardLayer::new(4, Duration::from_secs(5));
        let r = service(&guard, panics)
            .oneshot(request(None))
            .await
            .unwrap();
        assert_eq!(code(&r), Some("13"));
        // The permit of the panicked request was returned.
        assert_eq!(guard.permits.available_permits(), 4);
        let r = service(&guard, ok).oneshot(request(None)).await.unwrap();
        assert_eq!(code(&r), None);
    }

    /// Fails the test instead of hanging when a guard does not act.
    async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(10), f)
            .await
            .expect("the guard did not answer in time")
    }

    #[tokio::test]
    async fn the_smaller_of_client_and_server_deadline_applies() {
        // The client's 200 ms, not the server's hour.
        let guard = GuardLayer::new(4, Duration::from_secs(3600));
        let r = within(service(&guard, slow).oneshot(request(Some("200m"))))
            .await
            .unwrap();
        assert_eq!(code(&r), Some("4"), "DEADLINE_EXCEEDED");
        // The server's 200 ms, not the client's five hours.
        let guard = GuardLayer::new(4, Duration::from_millis(200));
        let r = within(service(&guard, slow).oneshot(request(Some("5H"))))
            .await
            .unwrap();
        assert_eq!(code(&r), Some("4"));
    }

    #[tokio::test]
    async fn a_method_with_a_longer_budget_gets_it_and_only_it() {
        fn medium(_: http::Request<Body>) -> BoxFuture<Result<http::Response<Body>, Status>> {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(400)).await;
                Ok(http::Response::new(Body::empty()))
            })
        }
        let guard = GuardLayer::new(4, Duration::from_millis(100))
            .with_limit_for("/mnemo.v1.MemoryService/Summarize", Duration::from_secs(5));
        let summarize = http::Request::builder()
            .uri("/mnemo.v1.MemoryService/Summarize")
            .body(Body::empty())
            .unwrap();
        let r = within(service(&guard, medium).oneshot(summarize))
            .await
            .unwrap();
        assert_eq!(code(&r), None, "Summarize finished within its own limit");
        let r = within(service(&guard, medium).oneshot(request(None)))
            .await
            .unwrap();
        assert_eq!(code(&r), Some("4"), "other methods keep the generic limit");
    }

    #[tokio::test]
    async fn past_the_limit_requests_are_shed_at_once() {
        let guard = GuardLayer::new(2, Duration::from_secs(3600));
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut s = service(&guard, slow);
            s.ready().await.unwrap();
            held.push(tokio::spawn(s.call(request(None))));
        }
        while guard.permits.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        // Refused, not queued behind the two that never finish.
        let r = within(service(&guard, ok).oneshot(request(None)))
            .await
            .unwrap();
        assert_eq!(code(&r), Some("8"), "RESOURCE_EXHAUSTED");
        for h in held {
            h.abort();
        }
        while guard.permits.available_permits() < 2 {
            tokio::task::yield_now().await;
        }
        let r = within(service(&guard, ok).oneshot(request(None)))
            .await
            .unwrap();
        assert_eq!(code(&r), None, "permits come back when requests end");
    }

    #[test]
    fn grpc_timeout_parses_every_unit_and_rejects_junk() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            client_timeout(&m)
        };
        assert_eq!(h("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(h("2M"), Some(Duration::from_secs(120)));
        assert_eq!(h("3S"), Some(Duration::from_secs(3)));
        assert_eq!(h("4m"), Some(Duration::from_millis(4)));
        assert_eq!(h("5u"), Some(Duration::from_micros(5)));
        assert_eq!(h("6n"), Some(Duration::from_nanos(6)));
        for junk in ["", "S", "10", "1x", "123456789S", "-1S"] {
            assert_eq!(h(junk), None, "{junk:?}");
        }
    }
}
