//! `mnemo inspect`: a web inspector for people debugging what an agent's
//! memory holds: sessions, turns, summaries and the turns they cite, audit
//! logs, bundle previews, subjects, search and the review queue.
//!
//! It is a client of the daemon's gRPC contract like the CLI and `mnemo
//! mcp` (one key, TLS when asked): it reads and writes only through the
//! RPCs, so it works against one daemon or a fleet on PostgreSQL. Pages are
//! rendered on the server (maud escapes every value); the browser gets a
//! vendored copy of htmx and a few lines of our own script, from this
//! binary, never from a CDN. Writes (review decisions) need the CSRF token
//! of this process and a same-origin request; the daemon decides whether
//! the key may resolve review items (ADMIN or the review permission).

mod assets;
mod bundle;
mod chart;
mod guard;
mod layout;
mod live;
mod review;
mod search;
mod session;
mod sessions;
mod subject;
mod summary;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::routing::{get, post, MethodRouter};
use axum::Router;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::client::MemoryClient;
use crate::hosts::HostPolicy;
use crate::pb;

/// Turns per page of a session's conversation.
pub const TURNS_PER_PAGE: u64 = 100;
/// Sessions per page of the sessions list.
pub const SESSIONS_PER_PAGE: u32 = 100;
/// Most sessions the namespace totals and chart walk through.
pub const MAX_SESSIONS_COUNTED: usize = 10_000;
/// Default for [`Settings::max_live_streams`]: well below the daemon's
/// default share of a namespace's watches for observers (32 of 64), so an
/// inspector left open in many tabs never takes the agents' places.
pub const MAX_LIVE_STREAMS: usize = 16;
/// Largest gRPC message the inspector accepts (a bundle of a million
/// tokens, a page of large turns).
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// How an inspector is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where `/` leads.
    pub default_namespace: Option<String>,
    /// `Host` names (`name` or `name:port`) accepted besides loopback
    /// ones from loopback peers (DNS rebinding and forged-host
    /// protection).
    pub allowed_hosts: Vec<String>,
    /// Most live pages (server-sent event streams) open at once; one more
    /// gets 503.
    pub max_live_streams: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_namespace: None,
            allowed_hosts: Vec::new(),
            max_live_streams: MAX_LIVE_STREAMS,
        }
    }
}

/// What every page handler shares: the daemon's client and this process's
/// secrets and bounds.
#[derive(Clone)]
pub struct Inspector {
    inner: Arc<Shared>,
}

struct Shared {
    client: MemoryClient,
    default_namespace: Option<String>,
    /// Per-process CSRF secret, sent in a SameSite cookie and in every
    /// write form.
    csrf: String,
    /// The cookie's name: `mnemo_csrf_PORT` once serving (see
    /// `guard::CSRF_COOKIE`).
    csrf_cookie: std::sync::OnceLock<String>,
    /// `Host` names accepted.
    hosts: HostPolicy,
    /// Whether the key may resolve review items, per namespace (asked
    /// once).
    reviewable: Mutex<HashMap<String, bool>>,
    live: Arc<Semaphore>,
    max_live_streams: usize,
    /// Cancelled at shutdown: ends the live streams, which would otherwise
    /// keep the HTTP server's graceful shutdown waiting.
    stop: CancellationToken,
}

impl Inspector {
    /// An inspector over `client`.
    pub fn new(client: MemoryClient, settings: Settings) -> Result<Inspector, String> {
        if settings.max_live_streams == 0 {
            return Err("the inspector's max live streams must be positive".to_owned());
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)
            .map_err(|e| format!("no randomness for the CSRF token: {e}"))?;
        Ok(Inspector {
            inner: Arc::new(Shared {
                client: client
                    .max_decoding_message_size(MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_MESSAGE_BYTES),
                default_namespace: settings.default_namespace.filter(|n| !n.trim().is_empty()),
                csrf: hex::encode(secret),
                csrf_cookie: std::sync::OnceLock::new(),
                hosts: HostPolicy::new(settings.allowed_hosts),
                reviewable: Mutex::new(HashMap::new()),
                live: Arc::new(Semaphore::new(settings.max_live_streams)),
                max_live_streams: settings.max_live_streams,
                stop: CancellationToken::new(),
            }),
        })
    }

    fn client(&self) -> MemoryClient {
        self.inner.client.clone()
    }

    fn csrf(&self) -> &str {
        &self.inner.csrf
    }

    fn csrf_cookie(&self) -> &str {
        self.inner
            .csrf_cookie
            .get()
            .map_or(guard::CSRF_COOKIE, String::as_str)
    }

    /// Whether the key may resolve review items in `namespace` (ADMIN, or
    /// the review permission). Asked of the daemon once with a
    /// ResolveReviewItem that names no item: auth is checked before the
    /// request, so a key without the right gets PERMISSION_DENIED and one
    /// with it INVALID_ARGUMENT; nothing is written either way.
    async fn may_review(&self, namespace: &str) -> bool {
        if let Some(known) = self.lock_reviewable().get(namespace) {
            return *known;
        }
        let probe = self
            .client()
            .resolve_review_item(pb::ResolveReviewItemRequest {
                namespace: namespace.to_owned(),
                ..Default::default()
            })
            .await;
        let reviewable = match probe {
            Ok(_) => true,
            Err(s) => match s.code() {
                tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => false,
                // The request got past auth and failed on its content.
                tonic::Code::InvalidArgument
                | tonic::Code::NotFound
                | tonic::Code::FailedPrecondition => true,
                // No answer (daemon unreachable, overloaded): show no
                // controls this time and ask again on the next page.
                _ => return false,
            },
        };
        self.lock_reviewable()
            .insert(namespace.to_owned(), reviewable);
        reviewable
    }

    fn lock_reviewable(&self) -> std::sync::MutexGuard<'_, HashMap<String, bool>> {
        // A panic while holding this lock leaves a plain map behind; the
        // worst a stale entry does is show or hide a form the daemon
        // checks anyway.
        self.inner
            .reviewable
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Every path the inspector serves, in the order the router adds them.
const PATHS: [&str; 12] = [
    "/",
    "/static/{file}",
    "/ns/{ns}/sessions",
    "/ns/{ns}/sessions/{id}",
    "/ns/{ns}/sessions/{id}/events",
    "/ns/{ns}/sessions/{id}/handoffs",
    "/ns/{ns}/sessions/{id}/diff",
    "/ns/{ns}/sessions/{id}/bundle",
    "/ns/{ns}/subjects/{subject}",
    "/ns/{ns}/search",
    "/ns/{ns}/review",
    "/ns/{ns}/review/{review_id}",
];

/// The method and handler of `path`.
fn route(path: &str) -> Option<(&'static str, MethodRouter<Inspector>)> {
    Some(match path {
        "/" => ("GET", get(sessions::home)),
        "/static/{file}" => ("GET", get(assets::serve)),
        "/ns/{ns}/sessions" => ("GET", get(sessions::list)),
        "/ns/{ns}/sessions/{id}" => ("GET", get(session::show)),
        "/ns/{ns}/sessions/{id}/events" => ("GET", get(live::events)),
        "/ns/{ns}/sessions/{id}/handoffs" => ("GET", get(session::handoffs)),
        "/ns/{ns}/sessions/{id}/diff" => ("GET", get(summary::diff_page)),
        "/ns/{ns}/sessions/{id}/bundle" => ("GET", get(bundle::page_route)),
        "/ns/{ns}/subjects/{subject}" => ("GET", get(subject::page_route)),
        "/ns/{ns}/search" => ("GET", get(search::page_route)),
        "/ns/{ns}/review" => ("GET", get(review::page_route)),
        "/ns/{ns}/review/{review_id}" => ("POST", post(review::resolve)),
        _ => return None,
    })
}

/// Every (method, path) the router serves: the list the docs' access
/// table is checked against.
pub fn routes() -> Vec<(&'static str, &'static str)> {
    PATHS
        .iter()
        .filter_map(|p| route(p).map(|(method, _)| (method, *p)))
        .collect()
}

/// The inspector's routes.
pub fn router(inspector: Inspector) -> Router {
    PATHS
        .iter()
        .filter_map(|p| route(p).map(|(_, handler)| (*p, handler)))
        .fold(Router::new(), |r, (path, handler)| r.route(path, handler))
        .layer(axum::middleware::from_fn_with_state(
            inspector.clone(),
            guard::check,
        ))
        .with_state(inspector)
}

/// Serves the inspector on `listener` until `shutdown` completes.
pub async fn serve(
    inspector: Inspector,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let stop = inspector.inner.stop.clone();
    if let Ok(addr) = listener.local_addr() {
        let _ = inspector
            .inner
            .csrf_cookie
            .set(format!("{}_{}", guard::CSRF_COOKIE, addr.port()));
    }
    // The peer's address lets the Host check tell a loopback client from
    // a remote one that claims a loopback name.
    let app = router(inspector).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stop.cancel();
        })
        .await
        .map_err(|e| format!("the inspector's HTTP server failed: {e}"))
}
